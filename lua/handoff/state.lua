--- What the editor knows of the host: filled from the host's events, never by asking it, so
--- `status()` answers at once even while a reply streams.
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
  busy = false,
  generating_handoff = false,
  --- uv.now() when the running response / handoff started
  run_started = nil,
  handoff_started = nil,
  --- tokens of the reply being streamed (deltas, or the provider's count when it ends)
  tokens = 0,
}

return M
