--- What the editor knows of the host, filled from the host's events (never by asking it, so
--- `status()` answers at once even while a reply streams), and the UI's own state (`ui`).
---@class handoff.State
local M = {
  ---@type integer? RPC channel of the running host
  chan = nil,
  ---@type integer? process id of the running host
  pid = nil,
  ---@type string? the current session file (reopened after a crash)
  session_file = nil,
  ---@type string?
  session_id = nil,
  ---@type string?
  parent_session = nil,
  ---@type string?
  model = nil,
  ---@type string? the session's thinking level ("off", "minimal", "low", "medium", "high")
  thinking = nil,
  busy = false,
  -- The host's lifecycle phase (`idle`, `prompting`, `auto_handoff`, `handoff`, `committing`, `switching`).
  phase = nil,
  generating_handoff = false,
  --- The banner of the automatic handoff being generated (the host's words), else nil.
  auto_banner = nil,
  --- The handoff drafted before the wall (`handoff.prepare`): the host's `draft` record
  --- (`{ state = "writing", tokens }` or `{ state = "ready", input, cached, output }`), else nil.
  handoff_draft = nil,
  --- uv.now() when the running response / handoff started
  run_started = nil,
  handoff_started = nil,
  --- tokens of the reply being streamed (deltas, or the provider's count when it ends)
  tokens = 0,
  --- tokens of the model's window the conversation fills, and the window (the context meter)
  context_tokens = 0,
  context_window = 0,
  --- how full the window is, in percent, as the host computes it (nil: not said)
  context_percent = nil,
  --- the model's todo list on the current branch: `{ content, status, activeForm }` items
  ---@type table[]
  todos = {},
  --- the user's pins, in order (shown under the chat's title)
  ---@type string[]
  pins = {},
  --- The editor side's own state, owned here so that every part of the UI reads one place.
  ui = {
    ---@type integer? the chat buffer (markdown)
    chat_buf = nil,
    ---@type integer? the prompt buffer
    prompt_buf = nil,
    --- what streams into the chat's last line: nil, "fresh" (nothing yet), "text", "thinking"
    ---@type string?
    stream = nil,
    --- items rendered, the "earlier items" line (0-based row) and how many more a page shows
    shown = 0,
    ---@type integer?
    earlier_row = nil,
    page = 1,
    ---@type integer? the todo list's buffer (`:HandoffTodos`)
    todos_buf = nil,
    --- rows (0-based, inclusive `{ first, last }`, in order) of the replies' thinking in the
    --- chat buffer: the chat's windows fold them
    ---@type integer[][]
    thinking = {},
  },
}

return M
