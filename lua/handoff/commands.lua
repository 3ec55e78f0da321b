--- Slash commands of the prompt buffer: the host's table (`handoff.slash_commands`:
--- `/handoff [focus instructions]`, `/pin {text}`, `/pins`, `/unpin {number}`, `/back`, `/new`,
--- `/sessions`, `/model [name]`, `/thinking [level]`), and the user's prompt templates (`/name args`, expanded
--- by the host). Completion (omnifunc, opened by typing `/` at the start, or `#`/`@` for context,
--- see `handoff.completion`; after a command with `complete`, its argument) and inline hints for
--- arguments.
local M = {}

--- The module's state, private (mini.nvim's `H`).
local H = {}

local api = vim.api
local ns_hint = api.nvim_create_namespace("handoff_hint")

---@class handoff.SlashCommand
---@field name string
---@field hint string  shown inline after the command
---@field description string
---@field run? fun(args: string)  nil: sent to the host as typed (it knows the command)
---@field complete? fun(): (string|{ word: string, menu: string })[]  the values its argument takes (completed after the name), a value or a value with a note

--- What the editor does itself with some commands (a picker when no argument is given, a
--- completion of the argument); every other command goes to the host as typed, where the one
--- parser intercepts it (it never reaches the model).
local editor = {
  unpin = {
    -- Each pin's number, its text beside it.
    complete = function()
      local ok, pins = require("handoff.host").try_request("pins")
      local items = {}
      for i, pin in ipairs(ok and pins or {}) do
        items[i] = { word = tostring(i), menu = pin:gsub("\n", " ") }
      end
      return items
    end,
  },
  new = {
    run = function()
      require("handoff").new_session()
    end,
  },
  sessions = {
    run = function()
      require("handoff").sessions()
    end,
  },
  model = {
    run = function(args)
      require("handoff").select_model(args ~= "" and args or nil)
    end,
  },
  thinking = {
    run = function(args)
      require("handoff").select_thinking(args ~= "" and args or nil)
    end,
    complete = function()
      return require("handoff.config").thinking_levels
    end,
  },
}

--- The host's command table (`handoff.slash_commands`, generated from it), with what the
--- editor does itself.
---@type handoff.SlashCommand[]
local builtin = vim.tbl_map(function(c)
  local own = editor[c.name] or {}
  return { name = c.name, hint = c.args or "", description = c.help, run = own.run, complete = own.complete }
end, require("handoff.slash_commands"))

local function find(name)
  for _, c in ipairs(builtin) do
    if c.name == name then
      return c
    end
  end
end

--- Splits `/name rest` (nil when `text` is no slash command).
function M.parse(text)
  local name, rest = text:match("^/(%S+)%s*(.*)$")
  if not name then
    return nil
  end
  return name, vim.trim(rest or "")
end

--- Runs the prompt text: the editor's own commands (`/new`, `/sessions`, `/model`) run here;
--- everything else, `/handoff …` and templates included, goes to the host as typed, where the
--- one parser decides (a `/handoff` never reaches the model as a prompt).
function M.run(text)
  local name, args = M.parse(text)
  local cmd = name and find(name)
  if cmd and cmd.run then
    cmd.run(args)
    return
  end
  require("handoff").prompt(text)
end

--- User templates, as the host lists them (cached for a few seconds).
H.cache = { at = 0, list = {} }
function M.templates()
  if not require("handoff.host").running() then
    return {}
  end
  if vim.uv.now() - H.cache.at > 5000 then
    local ok, list = require("handoff.host").try_request("templates")
    H.cache = { at = vim.uv.now(), list = ok and list or {} }
  end
  return H.cache.list
end

--- The commands the session's external agent offers (|handoff-agents|: its
--- `available_commands_update`), `{ name, description, hint? }`; none on ours, or before the
--- agent started (as the session opens). Typed `/name args`, they go to the agent
--- as the prompt's text.
function M.agent_commands()
  if not require("handoff.host").running() then
    return {}
  end
  local ok, offers = require("handoff.host").try_request("agent_offers")
  return ok and type(offers) == "table" and offers.commands or {}
end

--- Completion candidates for a command name prefix: ours, then the agent's, then templates.
function M.complete(prefix)
  local items = {}
  for _, c in ipairs(builtin) do
    if vim.startswith(c.name, prefix) then
      table.insert(items, { word = "/" .. c.name, abbr = "/" .. c.name, menu = c.hint, info = c.description })
    end
  end
  for _, c in ipairs(M.agent_commands()) do
    if vim.startswith(c.name, prefix) and not find(c.name) then
      local menu = "[agent]" .. (c.hint and (" " .. c.hint) or "")
      table.insert(items, { word = "/" .. c.name, abbr = "/" .. c.name, menu = menu, info = c.description })
    end
  end
  for _, t in ipairs(M.templates()) do
    if vim.startswith(t.name, prefix) and not find(t.name) then
      table.insert(items, { word = "/" .. t.name, abbr = "/" .. t.name, menu = "[template]", info = t.description })
    end
  end
  return items
end

--- The agents a session can run on (|handoff-agents|): those of `agents`, sorted, then "ours"
--- (our own model). `:HandoffAgent`, its picker and `:Handoff --to` offer these.
---@return string[]
function M.agent_names()
  local names = vim.tbl_keys(require("handoff.config").options.agents or {})
  table.sort(names)
  table.insert(names, "ours")
  return names
end

--- Completion of `:Handoff [--to NAME] [focus]`: after `--to`, the agents (|handoff-agents|);
--- else the last word of the focus as a file path (the words before it stay as typed).
---@param arg_lead string
---@param cmd_line? string
---@param cursor_pos? integer
---@return string[]
function M.complete_focus(arg_lead, cmd_line, cursor_pos)
  local head, word = arg_lead:match("^(.-)(%S*)$")
  local before = (cmd_line or arg_lead):sub(1, cursor_pos or #(cmd_line or arg_lead))
  if before:match("%f[%S]%-%-to%s+%S*$") then
    return vim.tbl_map(
      function(name)
        return head .. name
      end,
      vim.tbl_filter(function(name)
        return vim.startswith(name, word)
      end, M.agent_names())
    )
  end
  if word == "" then
    return {}
  end
  return vim.tbl_map(function(path)
    return head .. path
  end, vim.fn.getcompletion(word, "file"))
end

--- Completion candidates for the argument of `/name` (nil when it completes none).
function M.complete_arg(name, prefix)
  local cmd = find(name)
  if not (cmd and cmd.complete) then
    return nil
  end
  local items = {}
  for _, value in ipairs(cmd.complete()) do
    local word = type(value) == "table" and value.word or value
    if vim.startswith(word, prefix) then
      table.insert(items, { word = word, abbr = word, menu = type(value) == "table" and value.menu or ("/" .. name) })
    end
  end
  return items
end

--- What the cursor completes: the command name, or the argument of a command that completes
--- one. Set by the first call of the omnifunc, read by the second.
H.completing = nil

--- 'omnifunc' of the prompt buffer: `/commands` at the start, their argument after those that
--- complete one, and anywhere a `#` context token or an `@path` (see `handoff.completion`).
function M.omnifunc(findstart, base)
  if findstart == 1 then
    local line = api.nvim_get_current_line()
    local col = api.nvim_win_get_cursor(0)[2]
    local before = line:sub(1, col)
    if before:sub(1, 1) == "/" and not before:find("%s") then
      H.completing = nil
      return 0
    end
    local name, arg = before:match("^/(%S+)%s+(%S*)$")
    local cmd = name and find(name)
    if cmd and cmd.complete then
      H.completing = name
      return col - #arg
    end
    H.completing = nil
    local start = require("handoff.completion").token_at(line, col)
    return start or -3 -- -3: cancel silently
  end
  base = base or ""
  if H.completing then
    return M.complete_arg(H.completing, base) or {}
  end
  local sigil = base:sub(1, 1)
  if sigil == "#" or sigil == "@" then
    return vim.tbl_map(function(c)
      return { word = c.word, abbr = c.word, menu = c.menu, info = c.info }
    end, require("handoff.completion").items(base, { when_listed = require("handoff.completion").reopen_omni() }))
  end
  return M.complete((base:gsub("^/", "")))
end

--- Shows the argument hint of the command being typed, as virtual text.
local function update_hint(buf)
  api.nvim_buf_clear_namespace(buf, ns_hint, 0, -1)
  local line = api.nvim_buf_get_lines(buf, 0, 1, false)[1] or ""
  local name, rest = line:match("^/(%S+)(%s*)$")
  local cmd = name and find(name)
  if cmd and cmd.hint ~= "" then
    api.nvim_buf_set_extmark(buf, ns_hint, 0, #line, {
      virt_text = { { (rest == "" and " " or "") .. cmd.hint, "Comment" } },
      virt_text_pos = "inline",
    })
  end
end

function M.attach(buf)
  vim.bo[buf].omnifunc = "v:lua.require'handoff.commands'.omnifunc"
  pcall(function()
    vim.bo[buf].completeopt = "menuone,noinsert,popup"
  end)
  api.nvim_create_autocmd({ "TextChanged", "TextChangedI" }, {
    buffer = buf,
    callback = function(ev)
      update_hint(ev.buf)
    end,
  })
  local completion = require("handoff.completion")
  completion.register()
  api.nvim_create_autocmd("InsertEnter", {
    buffer = buf,
    callback = completion.register, -- a lazily loaded completion plugin is there by now
  })
  api.nvim_create_autocmd("TextChangedI", {
    buffer = buf,
    callback = function()
      local line = api.nvim_get_current_line()
      local col = api.nvim_win_get_cursor(0)[2]
      if vim.fn.pumvisible() == 1 then
        return
      end
      -- A `#` or `@` just typed at a word's start opens the menu too, unless a completion
      -- plugin shows our candidates; `/thinking ` (a command whose argument completes) its values.
      local sigil = line:sub(col, col)
      local typed_token = (sigil == "#" or sigil == "@") and completion.token_at(line, col) == col - 1
      local name = col == #line and line:match("^/(%S+) $")
      local cmd = name and find(name)
      if (line == "/" and col == 1) or (cmd and cmd.complete) or (typed_token and not completion.plugin_active()) then
        api.nvim_feedkeys(vim.keycode("<C-x><C-o>"), "n", false)
      end
    end,
  })
end

return M
