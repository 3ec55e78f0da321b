--- Buffer-local mappings of the chat and prompt buffers, the optional global ones, and the
--- temporary `<Esc>` that cancels a handoff (whatever was mapped before comes back afterwards).
local config = require("handoff.config")

local M = {}

--- The module's state, private (mini.nvim's `H`).
local H = {}

local api = vim.api

local function map(buf, modes, lhs, rhs, desc)
  if lhs and lhs ~= "" then
    vim.keymap.set(modes, lhs, rhs, { buffer = buf, nowait = true, silent = true, desc = "handoff.nvim: " .. desc })
  end
end

function M.chat_buffer(buf)
  local k = config.options.keymaps
  map(buf, "n", k.stop, function()
    require("handoff").abort()
  end, "stop the response")
  map(buf, "n", k.close, function()
    require("handoff.chat").close()
  end, "close the chat")
  -- Answers to a tool call waiting for approval (the one the cursor is in, else the oldest).
  local approvals = function()
    return require("handoff.approvals")
  end
  local a = k.approval or {}
  for _, decision in ipairs({ "allow", "always", "reject", "cancel" }) do
    map(buf, "n", a[decision], function()
      approvals().answer_current(decision)
    end, decision .. " the tool call")
  end
  map(buf, "n", a.diff, function()
    if not approvals().open_diff() then
      vim.notify("handoff.nvim: no waiting edit to show as a diff", vim.log.levels.INFO, { title = "handoff.nvim" })
    end
  end, "show the proposed change as a diff")
  -- On the "earlier items" line of a long chat: a page more; on a reply's thinking: opens or
  -- closes it (as `za`); elsewhere the key does what it did.
  map(buf, "n", k.earlier, function()
    if require("handoff.chat").show_earlier_at_cursor() then
      return
    end
    if vim.fn.foldlevel(".") > 0 then
      vim.cmd("normal! za")
    else
      vim.cmd("normal! " .. vim.v.count1 .. "+")
    end
  end, "show earlier items / open or close the thinking")
  M.parent_key(buf)
end

--- The key that opens the session a buffer's transcript was handed off from (read-only), on
--- its "Handed off from" line; elsewhere the key does what it does without the mapping.
function M.parent_key(buf)
  local lhs = config.options.keymaps.parent
  map(buf, "n", lhs, function()
    if not require("handoff.sessions").open_parent_at_cursor() then
      local count = vim.v.count > 0 and tostring(vim.v.count) or ""
      local ok, err = pcall(vim.cmd, "normal! " .. count .. vim.keycode(lhs))
      if not ok then
        api.nvim_echo({ { tostring(err):match("(E%d+:.*)$") or tostring(err), "ErrorMsg" } }, true, {})
      end
    end
  end, "open the session this one was handed off from (on the line that names it)")
end

--- A read-only session's buffer: the parent key, and `close` closes its window.
function M.session_view_buffer(buf)
  M.parent_key(buf)
  map(buf, "n", config.options.keymaps.close, function()
    if #api.nvim_list_wins() > 1 then
      api.nvim_win_close(0, false)
    end
  end, "close the read-only session")
end

function M.prompt_buffer(buf)
  local k = config.options.keymaps
  local submit = function()
    require("handoff.chat").submit()
  end
  map(buf, "n", k.submit_normal, submit, "send the prompt")
  map(buf, "i", k.submit_insert, function()
    vim.cmd.stopinsert()
    submit()
  end, "send the prompt")
  map(buf, { "n", "i" }, k.stop, function()
    require("handoff").abort()
  end, "stop the response")
end

--- The review's keys in a buffer holding the agent's hunks (`keymaps.review`; a key set to
--- false or "" is not mapped).
function M.review_buffer(buf)
  local k = config.options.keymaps.review
  local review = function()
    return require("handoff.review")
  end
  map(buf, "n", k.next, function()
    review().jump(true)
  end, "the next pending hunk")
  map(buf, "n", k.prev, function()
    review().jump(false)
  end, "the previous pending hunk")
  for _, action in ipairs({ "keep", "reject" }) do
    map(buf, "n", k[action], function()
      review()[action]()
    end, action .. " the hunk under the cursor")
    map(buf, "x", k[action], function()
      local from, to = vim.fn.line("v"), vim.fn.line(".")
      vim.cmd("normal! " .. vim.keycode("<Esc>"))
      local range = { math.min(from, to), math.max(from, to) }
      if action == "keep" then
        review().keep(nil, range)
      else
        review().reject(nil, nil, range)
      end
    end, action .. " the selected lines of the hunk")
  end
  map(buf, "n", k.keep_all, function()
    review().keep_all()
  end, "keep every pending hunk")
  map(buf, "n", k.reject_all, function()
    review().reject_all()
  end, "reject every pending hunk")
end

local global_actions = {
  chat = "toggle_chat",
  handoff = "handoff",
  stop = "abort",
  sessions = "sessions",
  new = "new_session",
  model = "select_model",
  thinking = "select_thinking",
  todos = "toggle_todos",
}

--- Global mappings named in `keymaps.global` (none by default).
function M.global()
  for action, lhs in pairs(config.options.keymaps.global or {}) do
    local fn = global_actions[action]
    if not fn then
      error(("handoff.nvim: keymaps.global.%s is not an action (known: %s)"):format(
        action, table.concat(vim.tbl_keys(global_actions), ", ")), 0)
    end
    vim.keymap.set("n", lhs, function()
      require("handoff")[fn]()
    end, { desc = "handoff.nvim: " .. action })
  end
  local add = config.options.keymaps.add_selection
  if add and add ~= "" then
    vim.keymap.set("x", add, function()
      -- Leaving visual mode sets the '< and '> marks, which `#selection` reads later.
      local from, to = vim.fn.line("v"), vim.fn.line(".")
      vim.cmd("normal! " .. vim.keycode("<Esc>"))
      require("handoff").add_selection(math.min(from, to), math.max(from, to))
    end, { desc = "handoff.nvim: add the selection to the prompt" })
  end
end

-- <Esc> during handoff generation ----------------------------------------------------------
--
-- While a handoff generates, normal-mode `<Esc>` cancels it wherever the cursor is: a global
-- mapping covers every buffer without a buffer-local `<Esc>`, and a buffer-local one overrides
-- the user's own in the places a handoff involves (the window `:Handoff` ran from, the chat, the
-- prompt, the document split). Buffers entered later keep their own buffer-local `<Esc>` (a
-- picker's "close", say). Whatever was mapped is saved as `nvim_get_keymap()` returns it and put
-- back with `mapset()`, so rhs, callbacks, flags and script context come back exactly.
-- Insert-mode `<Esc>` is never touched: it leaves insert mode as always.

local DESC = "handoff.nvim: cancel the handoff"

---@class handoff.EscSaved
---@field global table|false|nil  the user's global normal `<Esc>` (nil: not installed)
---@field bufs table<integer, table|false>  per buffer: its own normal `<Esc>`, or false
H.saved = { global = nil, bufs = {} }

local function esc_of(maps)
  for _, m in ipairs(maps) do
    if m.lhs == "<Esc>" or m.lhsraw == "\27" then
      return m
    end
  end
end

local function ours(m)
  return m ~= nil and m.desc == DESC
end

local function cancel()
  require("handoff").abort_handoff()
end

local function install_buffer(buf)
  if H.saved.bufs[buf] ~= nil or not api.nvim_buf_is_valid(buf) then
    return
  end
  local own = esc_of(api.nvim_buf_get_keymap(buf, "n"))
  H.saved.bufs[buf] = (own and not ours(own)) and own or false
  vim.keymap.set("n", "<Esc>", cancel, { buffer = buf, nowait = true, silent = true, desc = DESC })
end

--- Makes normal-mode `<Esc>` cancel the handoff; `bufs` are the buffers that get a buffer-local
--- override as well (their own mapping would otherwise win over the global one).
---@param bufs integer[]
function M.install_esc(bufs)
  if H.saved.global == nil then
    local global = esc_of(api.nvim_get_keymap("n"))
    H.saved.global = (global and not ours(global)) and global or false
    vim.keymap.set("n", "<Esc>", cancel, { nowait = true, silent = true, desc = DESC })
  end
  for _, buf in ipairs(bufs or {}) do
    install_buffer(buf)
  end
end

--- Puts back what `install_esc` replaced, everywhere it touched. Safe to call when nothing is
--- installed.
function M.restore_esc()
  for buf, own in pairs(H.saved.bufs) do
    if api.nvim_buf_is_valid(buf) then
      if ours(esc_of(api.nvim_buf_get_keymap(buf, "n"))) then
        pcall(vim.keymap.del, "n", "<Esc>", { buffer = buf })
      end
      if own then
        -- mapset() defines a buffer-local mapping in the current buffer.
        api.nvim_buf_call(buf, function()
          vim.fn.mapset(own)
        end)
      end
    end
  end
  if H.saved.global ~= nil then
    if ours(esc_of(api.nvim_get_keymap("n"))) then
      pcall(vim.keymap.del, "n", "<Esc>")
    end
    if H.saved.global then
      vim.fn.mapset(H.saved.global)
    end
  end
  H.saved = { global = nil, bufs = {} }
end

--- Whether the cancel key is installed (for tests and statuslines).
function M.esc_installed()
  return H.saved.global ~= nil
end

return M
