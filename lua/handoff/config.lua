--- Configuration: the annotated defaults and their validation.
local M = {}

---@class handoff.ProviderConfig
---@field api? "openai"|"anthropic"  Wire protocol (default: the host's, i.e. "openai").
---@field base_url? string  e.g. "http://127.0.0.1:8080/v1" (default: the provider's public API).
---@field model? string  Model id (default: "gpt-4.1-mini" / "claude-sonnet-4-5").
---@field api_key_env? string  Variable holding the key (default: OPENAI_API_KEY / ANTHROPIC_API_KEY when set).
---@field api_key_cmd? string  Shell command printing the key (wins over api_key_env), e.g. "pass show openai".
---@field context_window? integer  The model's window in tokens (the handoff request is fitted to it).
---@field max_tokens? integer  Upper bound of reply tokens.
---@field provider_name? string  Provider id recorded in sessions (pi's provider name).
---@field max_retries? integer  Retries on 429/5xx/connection errors.
---@field timeout? integer  Seconds without data before a request is given up.
---@field thinking? "off"|"minimal"|"low"|"medium"|"high"  Thinking level of new sessions (default "off"; a resumed session keeps its own).
---@field reasoning_effort? boolean  Whether the model takes `reasoning_effort` (OpenAI-compatible servers; default: on for OpenAI's o-series and gpt-5, off elsewhere).

---@class handoff.Config
local defaults = {
  --- Path of the `handoff-nvim` binary. nil: the plugin's target/release, then target/debug,
  --- then $PATH.
  ---@type string?
  bin = nil,
  --- The model to talk to. Keys are never stored: name a variable or a command.
  ---@type handoff.ProviderConfig
  provider = {},
  --- Where session files live (pi's layout: one folder per working directory).
  ---@type string
  session_dir = vim.fn.stdpath("data") .. "/handoff/sessions",
  --- Prompt templates: `<dir>/name.md` is used as `/name args` in the prompt buffer.
  ---@type string
  templates_dir = vim.fn.stdpath("config") .. "/handoff/prompts",
  --- Replaces the words of the system prompt (nil: handoff.nvim's own). The instruction files
  --- (AGENTS.md), the skills, the date and the working directory still follow.
  ---@type string?
  system_prompt = nil,
  --- Added after the system prompt's words (nil: nothing).
  ---@type string?
  append_system_prompt = nil,
  --- The host's log file (nil: stdpath("log") .. "/handoff.log").
  ---@type string?
  log_file = nil,
  --- Continue the newest session of the working directory instead of starting a new one.
  ---@type boolean
  resume_last = false,
  --- Models offered by `/model` and :HandoffModel (any other name can be typed).
  ---@type string[]
  models = {},
  layout = {
    --- "right" | "left" | "bottom" | "top" | "tab": where the chat opens.
    position = "right",
    --- Width (columns, or a fraction of the editor) of a left/right chat.
    width = 0.4,
    --- Height (lines, or a fraction) of a top/bottom chat.
    height = 0.4,
    --- Lines of the prompt window under the chat.
    prompt_height = 5,
    --- Height of the split that shows a handoff document.
    document_height = 15,
  },
  keymaps = {
    --- Global mappings: none by default. Example: { chat = "<leader>hc", handoff = "<leader>hh" }.
    ---@type table<string, string>
    global = {},
    --- Visual mode, global: put the selection into the chat's prompt (as `:'<,'>HandoffChat`).
    --- false: none (the default). Example: "<leader>ha".
    ---@type string|false
    add_selection = false,
    --- Buffer-local mappings of the chat and prompt buffers (false disables one).
    submit_normal = "<CR>",
    submit_insert = "<C-s>",
    stop = "<C-c>",
    close = "q",
    --- Chat buffer, on the "earlier items" line of a long session: show a page more.
    earlier = "<CR>",
    --- Chat buffer and read-only sessions, on the "Handed off from" line: open that session
    --- read-only (`handoff://session/<file>.md`) without leaving the current one.
    parent = "gp",
    --- Chat buffer: answer the tool call the cursor is in (else the oldest waiting).
    approval = { allow = "a", always = "A", reject = "r", cancel = "c", diff = "d" },
  },
  --- The agent's tools. `enabled`: pi's names (default read, bash, edit, write, todo_write;
  --- grep, find, ls on request). `policy`: "ask" (edits and commands ask, the default),
  --- "allow_edits" or "allow_all". `rules`: per tool "allow" | "ask" | "deny", over the policy.
  tools = {
    ---@type string[]?
    enabled = nil,
    policy = "ask",
    ---@type table<string, "allow"|"ask"|"deny">
    rules = {},
  },
  --- Turns of one prompt at most (each round of tool calls is a turn).
  max_turns = 50,
  handoff = {
    --- Open the document for editing before the new session starts (as `:Handoff!` does).
    review = false,
    --- Suggest `:Handoff` (once per session) when a reply leaves the conversation above this
    --- share of the model's context window; false: never.
    ---@type number|false
    suggest_at = 0.8,
  },
  --- Lines of a tool's output shown in the chat (the rest is in the session).
  tool_output_lines = 12,
  --- Editor context in prompts: `#buffer`, `#selection`, `#diagnostics`, `@path`.
  context = {
    --- Bytes of one attachment at most (a larger file or buffer is named, not attached).
    max_bytes = 256 * 1024,
    --- Files `@path` completion lists at most outside a git repository (a directory walk).
    max_files = 5000,
  },
}

---@type handoff.Config
M.options = vim.deepcopy(defaults)

--- The thinking levels, lowest first (pi's names).
M.thinking_levels = { "off", "minimal", "low", "medium", "high" }

function M.defaults()
  return vim.deepcopy(defaults)
end

--- The type of every option (a value's `type()`; several joined by "|"). A key not named here
--- is an error that names it, with the nearest known spelling.
local schema = {
  bin = "string|nil",
  provider = {
    api = "string", base_url = "string", model = "string", api_key_env = "string",
    api_key_cmd = "string", context_window = "number", max_tokens = "number",
    provider_name = "string", max_retries = "number", timeout = "number",
    thinking = "string", reasoning_effort = "boolean",
    -- `name` is the host's spelling of provider_name.
    name = "string",
  },
  session_dir = "string",
  templates_dir = "string|nil",
  system_prompt = "string|nil",
  append_system_prompt = "string|nil",
  log_file = "string|nil",
  resume_last = "boolean",
  models = "table",
  layout = {
    position = "string", width = "number", height = "number",
    prompt_height = "number", document_height = "number",
  },
  tools = { enabled = "table", policy = "string", rules = "table" },
  max_turns = "number",
  tool_output_lines = "number",
  handoff = { review = "boolean", suggest_at = "number|boolean" },
  context = { max_bytes = "number", max_files = "number" },
  keymaps = {
    global = "table",
    add_selection = "string|boolean",
    approval = "table",
    submit_normal = "string|boolean", submit_insert = "string|boolean",
    stop = "string|boolean", close = "string|boolean", earlier = "string|boolean",
    parent = "string|boolean",
  },
}

--- Edit distance, to suggest the option a misspelled key meant.
local function distance(a, b)
  local prev = {}
  for j = 0, #b do
    prev[j] = j
  end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

local function nearest(key, known)
  local best, best_d = nil, 3
  for name in pairs(known) do
    local d = distance(key:lower(), name:lower())
    if d < best_d then
      best, best_d = name, d
    end
  end
  return best
end

local function fail(message)
  error("handoff.nvim: " .. message, 0)
end

--- `vim.validate` in the form this Neovim has (0.11 takes arguments, 0.10 a table).
local function validate(name, value, types)
  local list = vim.split(types, "|", { plain = true })
  local optional = vim.tbl_contains(list, "nil")
  list = vim.tbl_filter(function(t)
    return t ~= "nil"
  end, list)
  local ok, err = pcall(function()
    if vim.fn.has("nvim-0.11") == 1 then
      vim.validate(name, value, list, optional)
    else
      vim.validate({ [name] = { value, list, optional } })
    end
  end)
  if not ok then
    fail(tostring(err):gsub("^.-:%d+: ", ""))
  end
end

--- Checks `opts` (the user's, before defaults) against `spec`, naming unknown keys.
local function check(opts, spec, prefix)
  for key, value in pairs(opts) do
    local name = prefix .. tostring(key)
    local want = spec[key]
    if want == nil then
      local guess = type(key) == "string" and nearest(key, spec)
      local known = vim.tbl_keys(spec)
      table.sort(known)
      fail(("unknown option %s%s (known: %s)"):format(
        name, guess and (", did you mean " .. prefix .. guess .. "?") or "", table.concat(known, ", ")))
    elseif type(want) == "table" then
      validate(name, value, "table")
      check(value, want, name .. ".")
    else
      validate(name, value, want)
    end
  end
end

local positions = { right = true, left = true, bottom = true, top = true, tab = true }

---@param opts? table
---@return handoff.Config
function M.setup(opts)
  opts = opts or {}
  validate("setup() options", opts, "table")
  check(opts, schema, "")
  local merged = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts)
  local api = merged.provider.api
  if api and api ~= "openai" and api ~= "anthropic" then
    fail(('provider.api must be "openai" or "anthropic", got %q'):format(api))
  end
  local thinking = merged.provider.thinking
  if thinking and not vim.tbl_contains(M.thinking_levels, thinking) then
    fail(('provider.thinking must be one of %s, got %q'):format(table.concat(M.thinking_levels, ", "), thinking))
  end
  local policies = { ask = true, allow_edits = true, allow_all = true }
  if not policies[merged.tools.policy] then
    fail(('tools.policy must be "ask", "allow_edits" or "allow_all", got %q'):format(tostring(merged.tools.policy)))
  end
  for tool, rule in pairs(merged.tools.rules) do
    if rule ~= "allow" and rule ~= "ask" and rule ~= "deny" then
      fail(('tools.rules.%s must be "allow", "ask" or "deny", got %q'):format(tostring(tool), tostring(rule)))
    end
  end
  if not positions[merged.layout.position] then
    fail(('layout.position must be "right", "left", "bottom", "top" or "tab", got %q'):format(
      tostring(merged.layout.position)))
  end
  M.options = merged
  return merged
end

--- The settings table the host deserializes (`Settings` in src/core/config.rs).
function M.host_settings()
  local o = M.options
  local s = {}
  for k, v in pairs(o.provider) do
    if k == "provider_name" then
      s.name = v
    else
      s[k] = v
    end
  end
  s.session_dir = vim.fn.fnamemodify(o.session_dir, ":p")
  s.templates_dir = o.templates_dir and vim.fn.fnamemodify(o.templates_dir, ":p") or nil
  s.system_prompt = o.system_prompt
  s.append_system_prompt = o.append_system_prompt
  -- The user-level folder of instructions (AGENTS.md), the CLI's too.
  s.config_dir = vim.fn.stdpath("config") .. "/handoff"
  s.tools = { enabled = o.tools.enabled, policy = o.tools.policy, rules = o.tools.rules }
  if next(s.tools.rules) == nil then
    s.tools.rules = vim.empty_dict()
  end
  s.max_turns = o.max_turns
  return s
end

function M.log_file()
  return M.options.log_file or (vim.fn.stdpath("log") .. "/handoff.log")
end

return M
