--- handoff.nvim: LLM agent sessions in Neovim with a structured `/handoff` to a fresh session.
---
--- Public API: setup(opts), prompt(text), handoff(focus), abort(), status(), and the helpers the
--- commands use. Nothing here waits on the model or on a session being loaded: long work is a
--- notification to the host (input sent while the session loads waits there, in order, and runs
--- once it is open), and its results come back as events (see `handoff.events`). A command that
--- asks the host something while the session loads runs again once it is open.
local config = require("handoff.config")
local host = require("handoff.host")
local state = require("handoff.state")

local M = {}

--- Configures the plugin (may be called again: a running host is reconfigured).
---@param opts? handoff.Config
function M.setup(opts)
  config.setup(opts)
  -- Every autocmd of the plugin is made here (a `require` makes none).
  host.setup()
  require("handoff.highlights").setup()
  require("handoff.context").setup()
  require("handoff.review").setup()
  require("handoff.keymaps").global()
  if state.chan and not (state.busy or state.generating_handoff) then
    -- The session comes back as a `transcript` record.
    host.request("configure", host.configure_args())
  end
end

--- Sends a prompt (a `/handoff …` text is intercepted by the host and runs the handoff).
--- `#buffer`, `#selection`, `#diagnostics` and `@path` expand to their content first (see
--- `handoff.context`); `opts.expand = false` sends the text as it is.
---@param text string
---@param opts? { expand?: boolean }
function M.prompt(text, opts)
  if type(text) ~= "string" then
    error("handoff.nvim: prompt(text) needs a string", 2)
  end
  if not (opts and opts.expand == false) then
    text = require("handoff.context").expand(text)
  end
  return host.notify("prompt", text)
end

--- Pins `text` (`:HandoffPin`): sent as `/pin TEXT`, which the host's one parser intercepts
--- (never a model request); the text is never expanded, so it is kept as written.
---@param text string
function M.pin(text)
  if type(text) ~= "string" or vim.trim(text) == "" then
    vim.notify("handoff.nvim: nothing to pin", vim.log.levels.WARN)
    return
  end
  return M.prompt("/pin " .. text, { expand = false })
end

--- Pins lines `line1`..`line2` of the current buffer (a chat line, a Visual selection), joined
--- by line breaks.
function M.pin_lines(line1, line2)
  M.pin(table.concat(vim.api.nvim_buf_get_lines(0, line1 - 1, line2, false), "\n"))
end

--- Puts lines `line1`..`line2` of `buf` (default: the current buffer) into the chat's prompt
--- as a fenced block headed by the path and line range, and focuses the prompt
--- (`:'<,'>HandoffChat`, `keymaps.add_selection`).
---@param line1 integer
---@param line2 integer
---@param buf? integer
function M.add_selection(line1, line2, buf)
  local context = require("handoff.context")
  buf = buf or vim.api.nvim_get_current_buf()
  context.remember(buf)
  local a = context.selection(buf, line1, line2)
  if not a.block then
    vim.notify(("handoff.nvim: %s not added: %s"):format(a.label, a.note), vim.log.levels.WARN, { title = "handoff.nvim" })
    return
  end
  M.open_chat()
  require("handoff.chat").add_to_prompt(a.block)
end

--- Hands the session off to a new one (`:Handoff [focus]`). With `opts.review` (`:Handoff!`)
--- the document opens for editing first: `:w` starts the new session with it, quitting without
--- writing discards it. Without it, `setup{ handoff = { review } }` decides (in the host, so
--- `/handoff` typed in the prompt does the same). With `opts.to` (`:Handoff --to NAME`) the
--- new session runs on that agent of `agents` (|handoff-agents|), or on ours (`"ours"`).
---@param focus? string focus instructions
---@param opts? { review?: boolean, to?: string }
function M.handoff(focus, opts)
  if focus == "" then
    focus = nil
  end
  local flags = {}
  if opts and opts.review ~= nil then
    flags.review = opts.review and true or false
  end
  if opts and opts.to then
    flags.to = opts.to
  end
  return host.notify("handoff", focus or vim.NIL, flags)
end

--- Stops what runs: the handoff being generated, or else the response.
function M.abort()
  if state.generating_handoff then
    return M.abort_handoff()
  end
  -- What waits for the session to open is dropped too (the host drops what waits there).
  host.drop_waiting()
  return host.notify_running("abort")
end

--- Answers a tool call waiting for approval: `decision` is "allow" (this once), "always" (the
--- tool, or for bash this exact command, for the rest of the session), "reject" (with an
--- optional reason the model reads) or "cancel" (the turn stops). A second answer is ignored.
---@param id string the request's id (`User HandoffToolApproval`'s `data.id`)
---@param decision "allow"|"always"|"reject"|"cancel"
---@param reason? string
---@return boolean answered
function M.approve(id, decision, reason)
  return require("handoff.approvals").approve(id, decision, reason)
end

--- Cancels the handoff being generated (mapped to `<Esc>` while it runs).
function M.abort_handoff()
  return host.notify_running("abort_handoff")
end

---@class handoff.Status
---@field session_file string?
---@field session_id string?
---@field busy boolean
---@field generating_handoff boolean

--- What runs, from the host's latest events (answers at once; never asks the host).
---@return handoff.Status
function M.status()
  return {
    session_file = state.session_file,
    session_id = state.session_id,
    busy = state.busy,
    generating_handoff = state.generating_handoff,
    parent_session = state.parent_session,
    model = state.model,
    thinking = state.thinking,
    running = state.chan ~= nil,
    host_version = state.host_version,
    context_tokens = state.context_tokens,
    context_window = state.context_window,
    context_percent = state.context_percent,
  }
end

--- Opens the chat (starting the host if needed).
function M.open_chat()
  host.ensure()
  require("handoff.chat").open()
end

function M.toggle_chat()
  host.ensure()
  require("handoff.chat").toggle()
end

--- Asks the host for a command's work; while the session loads, asks again once it is open
--- (`again`). Returns the reply, or nil (the user was told why).
local function command(again, method, ...)
  local reply, failure = host.request(method, ...)
  if failure and failure.kind == "not_ready" then
    host.when_ready(again)
  end
  return reply
end

--- Starts a new, empty session.
function M.new_session()
  local reply = command(M.new_session, "new_session")
  if reply then
    vim.notify("New session " .. (reply.session_id or ""), vim.log.levels.INFO, { title = "handoff.nvim" })
  end
end

--- Picks a session of this directory (vim.ui.select), listed as chains of handoffs: resumes
--- it, or with `opts.view` (`:HandoffSessions!`) opens it read-only (see `view_session`).
---@param opts? { view?: boolean }
function M.sessions(opts)
  require("handoff.sessions").pick(opts)
end

--- Opens a session file's transcript read-only in `handoff://session/<file>.md` without
--- switching the agent to it (the host reads the file in the background; `User
--- HandoffSessionView` fires when the buffer is filled). Returns the buffer.
---@param path string
---@return integer?
function M.view_session(path)
  return require("handoff.sessions").view(path)
end

--- Switches to a session file. Returns at once: the host loads it in the background and the
--- chat redraws when it is there (`User HandoffSessionSwitch`).
---@param path string
function M.resume(path)
  return host.notify("resume", path)
end

--- A new session on the external agent `name` (|handoff-agents|; a name of `agents`, or
--- "ours" for our own model); without a name, the configured agents to pick from. Returns at
--- once: the chat redraws when the session is there (`User HandoffSessionSwitch`).
---@param name? string
function M.agent(name)
  if name and name ~= "" then
    return host.notify("agent", name)
  end
  vim.ui.select(require("handoff.commands").agent_names(), { prompt = "Agent" }, function(choice)
    if choice then
      host.notify("agent", choice)
    end
  end)
end

--- Sets the external agent's `what` ("mode" or "model", as the agent offers them:
--- |handoff-agents|) to `value`, or to one picked from what it offers (the one in force
--- marked). The session's agent starts as the session opens: until then, it offers nothing.
---@param what "mode"|"model"
---@param value? string
function M.agent_choose(what, value)
  local offers = host.request("agent_offers")
  local choice = type(offers) == "table" and offers[what] or nil
  if not choice then
    vim.notify(("handoff.nvim: the session's agent offers no %s (ours, or still starting)"):format(what), vim.log.levels.WARN)
    return
  end
  local function apply(id)
    if host.request("agent_choose", what, id) then
      vim.notify(("handoff.nvim: the agent's %s is %s"):format(what, id), vim.log.levels.INFO, { title = "handoff.nvim" })
    end
  end
  if value and value ~= "" then
    return apply(value)
  end
  vim.ui.select(choice.available, {
    prompt = "Agent " .. what,
    format_item = function(item)
      local mark = item.id == choice.current and "* " or "  "
      return mark .. (item.name ~= "" and item.name or item.id) .. (item.description and (" — " .. item.description) or "")
    end,
  }, function(item)
    if item then
      apply(item.id)
    end
  end)
end

--- The ids the session's agent offers for `what` (`:HandoffAgentMode`'s completion).
---@param what "mode"|"model"
---@return string[]
function M.agent_choices(what)
  local ok, offers = host.try_request("agent_offers")
  local choice = ok and type(offers) == "table" and offers[what] or nil
  return vim.tbl_map(function(item)
    return item.id
  end, choice and choice.available or {})
end

--- Switches the model (`name`, or chosen from the provider's list, `models` and the tables,
--- each shown with its window; see `handoff.models`). `opts.enable`: enable a Copilot model
--- for the account first (:HandoffModel!).
---@param name? string
---@param opts? { enable?: boolean }
function M.select_model(name, opts)
  local function apply(model)
    local reply = command(function()
      apply(model)
    end, "set_model", model)
    if reply then
      state.model = reply.model
      -- The meter shows the new model's window at once, not after the next reply.
      state.context_window = reply.context_window or state.context_window
      state.context_tokens = reply.context_tokens or state.context_tokens
      state.context_percent = reply.context_percent
      vim.cmd("redrawstatus")
      local window = reply.context_window and require("handoff.chat.lines").tokens(reply.context_window)
      vim.notify("Model: " .. reply.model .. (window and (" (" .. window .. " window)") or ""), vim.log.levels.INFO,
        { title = "handoff.nvim" })
    end
  end
  local name_given = name and vim.trim(name) ~= "" and vim.trim(name) or nil
  require("handoff.models").pick(name_given, { enable = opts and opts.enable, apply = apply })
end

--- Sets the session's thinking level ("off", "minimal", "low", "medium", "high"): sent from
--- the next prompt on (Anthropic's extended thinking, OpenAI's `reasoning_effort`; a reply that
--- runs keeps its level), and recorded in the session as pi records it, so the session resumes
--- with it. While the session loads, it is set once the session is open (false now).
---@param level string
---@return boolean changed_or_set
function M.set_thinking(level)
  level = vim.trim(level or ""):lower()
  if not vim.tbl_contains(config.thinking_names, level) then
    vim.notify(("handoff.nvim: unknown thinking level %q (one of %s)"):format(level, table.concat(config.thinking_levels, ", ")),
      vim.log.levels.ERROR, { title = "handoff.nvim" })
    return false
  end
  local reply = command(function()
    M.set_thinking(level)
  end, "set_thinking", level)
  if not reply then
    return false
  end
  state.thinking = reply.thinking
  vim.cmd("redrawstatus")
  vim.notify("Thinking: " .. reply.thinking, vim.log.levels.INFO, { title = "handoff.nvim" })
  return true
end

--- Sets the thinking level (`level`, or chosen with vim.ui.select).
---@param level? string
function M.select_thinking(level)
  if level and vim.trim(level) ~= "" then
    return M.set_thinking(level)
  end
  vim.ui.select(config.thinking_levels, {
    prompt = "Thinking level",
    format_item = function(l)
      return l == state.thinking and (l .. " (current)") or l
    end,
  }, function(choice)
    if choice then
      M.set_thinking(choice)
    end
  end)
end

--- The model's todo list on the current branch, from the host's latest events (never asks the
--- host): a list of `{ content, status, activeForm }`, status "pending", "in_progress" or
--- "completed".
---@return table[]
function M.todos()
  return require("handoff.todos").get()
end

--- Opens or closes the todo list window (it follows the list live).
function M.toggle_todos()
  host.ensure()
  require("handoff.todos").toggle()
end

--- Fills the quickfix list with the agent's changes in this session (`:HandoffChanges`): one
--- item per changed hunk of each file its edit and write calls changed, the most recently
--- changed file first; opens the quickfix window unless there are none. Returns the items.
---@return table[]?
function M.changes()
  return require("handoff.changes").quickfix()
end

--- Shows the session's changes to `file` (default: the current buffer's file) against the file
--- before the agent's first change, side by side in diff mode in a new tab (`:HandoffDiff`).
---@param file? string
---@return boolean shown
function M.diff(file)
  return require("handoff.changes").diff(file)
end

--- The files the agent changed in this session, asked of the host: `{ session_file,
--- session_id, files = { { path, original_file?, created, changes, first_change_entry_id,
--- last_changed }, … } }`, the most recently changed first (nil after telling why not).
---@return handoff.Changes?
function M.changed_files()
  return require("handoff.changes").get()
end

--- Every hunk of the agent's changes in this session, found in the text as it is now:
--- `{ id, file, lnum, end_lnum, state, tool, call_id }` each (`state`: "pending", "kept" or
--- "rejected"; `conflict = true` on a hunk a reject found overlapping your edits).
---@return table[]
function M.hunks()
  return require("handoff.review").hunks()
end

--- Keeps hunks: an id, a list of ids, or nothing (the pending hunk under the cursor). One
--- undo block per buffer. Returns the ids kept.
---@param ids? integer|integer[]
---@return integer[]
function M.keep(ids)
  return require("handoff.review").keep(ids)
end

--- Rejects hunks (an id, a list, or nothing: the one under the cursor): their lines go back to
--- what they were before their own call, your own typing kept; `reason` reaches the model with
--- the next prompt. One undo block per buffer; `u` brings the lines and the pending state back.
---@param ids? integer|integer[]
---@param reason? string
---@return integer[]
function M.reject(ids, reason)
  return require("handoff.review").reject(ids, reason)
end

--- Lists every pending hunk in the quickfix list (`:HandoffReview`).
function M.review()
  return require("handoff.review").quickfix()
end

--- For a statusline (lualine: `{ require("handoff").statusline }`): the indicator while
--- something runs, else the context meter ("model · high · 12.3k/128k (10%)"); "" before the
--- host runs.
function M.statusline()
  local running = require("handoff.chat").indicator_text()
  if running then
    return running
  end
  if not state.chan then
    return ""
  end
  return require("handoff.meter").text()
end

--- Stops the host (it restarts on next use, with the same session).
function M.stop_host()
  host.stop()
end

return M
