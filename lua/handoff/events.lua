--- The one entry point of host → editor traffic: `dispatch(batch)` receives the records the
--- host's event bridge sends (at most one batch per frame) and turns them into buffer updates,
--- notifications and `User` autocmds. Every user-facing text of the handoff comes from the host
--- (its controller); this module only shows it.
local state = require("handoff.state")

local M = {}

local levels = { info = vim.log.levels.INFO, warn = vim.log.levels.WARN, error = vim.log.levels.ERROR }

local function notify(message, level)
  vim.notify(message, levels[level] or vim.log.levels.INFO, { title = "handoff.nvim" })
end

--- Fires `User <name>` with `data`.
function M.fire(name, data)
  vim.api.nvim_exec_autocmds("User", { pattern = name, data = data or {}, modeline = false })
end

local function chat()
  return require("handoff.chat")
end

local handlers = {}

function handlers.transcript(r)
  state.session_file = r.session_file or state.session_file
  state.session_id = r.session_id or state.session_id
  state.parent_session = r.parent_session
  state.model = r.model or state.model
  state.thinking = r.thinking or state.thinking
  require("handoff.meter").update(r)
  if r.items then
    chat().render(r.items, r)
  end
  -- The list of this session's branch (a resume or a switch may change it).
  require("handoff.todos").set(r.todos, false)
  -- Its review: the hunks of its changes, drawn in their buffers.
  vim.schedule(function()
    require("handoff.review").on_session()
  end)
  -- A session is open: commands refused while it loaded run now (after this batch).
  vim.schedule(require("handoff.host").on_ready)
end

function handlers.agent_start()
  state.busy = true
  state.tokens = 0
  state.run_started = vim.uv.now()
  chat().indicator_update()
  M.fire("HandoffAgentStart", { session_file = state.session_file })
end

function handlers.message_start(r)
  if r.kind == "assistant" then
    state.tokens = 0
    chat().begin_assistant(r)
  else
    chat().append_item(r)
  end
end

function handlers.delta(r)
  state.tokens = r.tokens or state.tokens
  chat().append_text(r.text, false)
  if state.generating_handoff then
    require("handoff.handoff_view").append(r.text)
  end
end

function handlers.thinking_delta(r)
  state.tokens = r.tokens or state.tokens
  chat().append_text(r.text, true)
end

function handlers.message_end(r)
  if r.output_tokens then
    state.tokens = r.output_tokens
  end
  chat().end_assistant(r)
end

function handlers.agent_end(r)
  -- The run ended; the prompt may go on (the host's `lifecycle` record says when it is idle).
  require("handoff.review").on_batch({ running = false })
  state.busy = state.phase ~= nil and state.phase ~= "idle"
  state.session_file = r.session_file or state.session_file
  chat().indicator_update()
  local meter = require("handoff.meter")
  meter.update(r)
  -- At the wall the host hands off by itself: no suggestion to do it by hand.
  if r.stop_reason == "stop" and not state.generating_handoff and not r.at_wall then
    meter.maybe_suggest()
  end
  if r.error_kind == "model_not_enabled" then
    require("handoff.models").offer_enable(r.error_message)
  end
  M.fire("HandoffAgentEnd", {
    session_file = r.session_file,
    stop_reason = r.stop_reason,
    error_message = r.error_message,
    error_kind = r.error_kind,
  })
end

function handlers.handoff_start(r)
  state.generating_handoff = true
  -- An automatic handoff: its banner (the host's words) stands in the chat and the indicator.
  state.auto_banner = r.banner
  state.handoff_started = vim.uv.now()
  state.tokens = 0
  -- The buffer the user ran :Handoff from, before the split takes any focus.
  local origin = vim.api.nvim_get_current_buf()
  local doc = require("handoff.handoff_view").start()
  local c = chat()
  local bufs = { origin, doc }
  for _, b in ipairs({ "chat_buf", "prompt_buf" }) do
    if c[b] then
      table.insert(bufs, c[b])
    end
  end
  require("handoff.keymaps").install_esc(bufs)
  if r.banner then
    c.append_notice(r.banner .. " <Esc> to cancel")
  end
  c.indicator_update()
  M.fire("HandoffStart", { focus = r.focus, auto = r.auto ~= nil })
  if r.auto then
    M.fire("HandoffAutoStart", {
      reason = r.auto.reason,
      boundary = r.auto.boundary,
      tokens = r.auto.tokens,
      window = r.auto.window,
      threshold = r.auto.threshold,
    })
  end
end

--- Leaves the "generating handoff" state: mappings back, indicator off.
local function end_generation()
  state.generating_handoff = false
  state.auto_banner = nil
  state.handoff_started = nil
  require("handoff.keymaps").restore_esc()
  chat().indicator_update()
end

function handlers.handoff_end(r)
  end_generation()
  local outcome = r.outcome or {}
  local notices = r.notices or {}
  local view = require("handoff.handoff_view")
  if outcome.kind == "done" then
    view.open(outcome)
    -- The first notice is the announcement; it also goes into the chat.
    if notices[1] then
      chat().append_notice(notices[1].message)
    end
  elseif outcome.kind == "review" then
    view.review(outcome, r.ledger)
  elseif outcome.kind == "discarded" then
    view.discarded()
  elseif outcome.kind == "cancelled" then
    view.cancel()
  elseif outcome.kind == "failed" then
    view.fail(outcome.message)
  end
  for _, n in ipairs(notices) do
    notify(n.message, n.level)
  end
  if outcome.kind == "done" and outcome.elided then
    notify(outcome.elided, "info")
  end
  if outcome.kind == "done" then
    M.fire("HandoffDone", {
      document = outcome.document,
      session_file = outcome.session_file,
      parent_session = outcome.parent_session,
      missing_sections = outcome.missing_sections or {},
      document_file = outcome.document_file,
      facts = outcome.facts,
      ledger = r.ledger,
    })
  elseif outcome.kind == "review" then
    M.fire("HandoffReview", { text = outcome.text, missing_sections = outcome.missing_sections or {} })
  elseif outcome.kind == "discarded" then
    M.fire("HandoffDiscarded", {})
  elseif outcome.kind == "cancelled" then
    M.fire("HandoffCancelled", {})
  elseif outcome.kind == "failed" then
    M.fire("HandoffFailed", { message = outcome.message })
  end
  if r.auto then
    M.fire("HandoffAutoEnd", {
      reason = r.auto.reason,
      tokens = r.auto.tokens,
      window = r.auto.window,
      result = outcome.kind,
      session_file = outcome.session_file,
      parent_session = outcome.parent_session,
      message = outcome.message,
    })
  end
end

--- The prompt's lifecycle changed phase: the host's one "busy", which the chat shows.
function handlers.lifecycle(r)
  state.phase = r.phase
  state.busy = r.busy
  chat().indicator_update()
end

--- The handoff drafted before the wall changed: the meter shows it, the chat says what it cost.
function handlers.handoff_draft(r)
  local draft = r.draft or {}
  if draft.state == "writing" or draft.state == "ready" then
    state.handoff_draft = draft
  else
    state.handoff_draft = nil
  end
  if r.text then
    chat().append_notice(r.text)
  end
  vim.cmd("redrawstatus")
  M.fire("HandoffDraft", draft)
end

function handlers.session_switch(r)
  state.session_file = r.new
  -- A draft belongs to the session it was written in.
  state.handoff_draft = nil
  M.fire("HandoffSessionSwitch", { old = r.old, new = r.new, reason = r.reason })
end

function handlers.todos(r)
  require("handoff.todos").set(r.todos, true)
end

function handlers.pins(r)
  state.pins = r.pins
  require("handoff.chat.render").show_pins()
end

--- A call's change was split into hunks: the call comes with the record (added without a
--- request: a request per call held the editor while the host was busy landing the others);
--- other changes of states ask for the whole review again.
function handlers.hunks(r)
  vim.schedule(function()
    local review = require("handoff.review")
    if r.call then
      review.safely(review.add_call, r.call)
    else
      review.safely(review.refresh)
    end
  end)
end

function handlers.tool_batch(r)
  require("handoff.review").on_batch(r)
end

function handlers.session_view(r)
  require("handoff.sessions").on_view(r)
  M.fire("HandoffSessionView", { path = r.path, session_id = r.session_id, parent_session = r.parent_session, error = r.error })
end

function handlers.sessions(r)
  require("handoff.sessions").on_list(r)
end

function handlers.models(r)
  require("handoff.models").on_list(r)
end

function handlers.model_enabled(r)
  require("handoff.models").on_enabled(r)
end

function handlers.health_probes(r)
  require("handoff.health").on_probes(r)
end

function handlers.notice(r)
  notify(r.message, r.level)
end

function handlers.tool_approval(r)
  require("handoff.approvals").request(r)
end

function handlers.tool_approval_end(r)
  require("handoff.approvals").resolved(r.id, r.decision)
end

function handlers.tool_start(r)
  require("handoff.review").on_tool(true)
  chat().tool_start(r)
  M.fire("HandoffToolStart", { id = r.id, tool = r.tool, args = r.args })
end

function handlers.tool_update(r)
  chat().tool_update(r)
end

function handlers.tool_end(r)
  chat().tool_end(r)
  if r.reload then
    -- The call may have changed files that buffers show (a command, an MCP server's tool, an
    -- external agent's own write; the host says which): reload the ones not modified here.
    vim.cmd("silent! checktime")
  end
  -- A tool boundary: the rejects held while the call ran apply now.
  require("handoff.review").on_tool(false)
  M.fire("HandoffToolEnd", { id = r.id, tool = r.tool, kind = r.kind, is_error = r.is_error })
end

--- Applies a batch of host records, in order. A failing handler is reported and skipped; the
--- rest of the batch still applies.
---@param batch table[]
function M.dispatch(batch)
  for _, record in ipairs(batch) do
    local handler = handlers[record.type]
    if handler then
      local ok, err = pcall(handler, record)
      if not ok then
        notify(("handoff.nvim: internal error while handling %s: %s"):format(record.type, err), "error")
      end
    end
  end
  chat().follow()
end

--- The host died: whatever it was doing ends here, as a failure.
---@param message string
function M.host_lost(message)
  require("handoff.approvals").clear(message)
  state.phase = nil
  if state.generating_handoff then
    end_generation()
    require("handoff.handoff_view").fail(message)
    M.fire("HandoffFailed", { message = message })
  end
  if state.busy then
    state.busy = false
    chat().append_notice("(" .. message .. ")")
    M.fire("HandoffAgentEnd", { session_file = state.session_file, stop_reason = "error" })
  end
  chat().indicator_update()
end

return M
