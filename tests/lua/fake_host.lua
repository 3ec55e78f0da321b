--- A fake host for fast UI tests: `handoff.host` without a process. Requests and notifications
--- are recorded; `replies[method]` answers requests; `emit(records)` plays host records into
--- the plugin's one dispatcher, as the real host's event bridge does.
local state = require("handoff.state")
local host = require("handoff.host")

local M = { calls = {}, replies = {} }

function M.install()
  host.ensure = function()
    state.chan = state.chan or -1
    return state.chan
  end
  host.running = function()
    return state.chan ~= nil
  end
  local function record(kind, method, ...)
    table.insert(M.calls, { kind = kind, method = method, args = { ... } })
  end
  host.notify = function(method, ...)
    host.ensure()
    record("notify", method, ...)
    return true
  end
  host.notify_running = function(method, ...)
    if not state.chan then
      return false
    end
    record("notify", method, ...)
    return true
  end
  host.request = function(method, ...)
    host.ensure()
    record("request", method, ...)
    local reply = M.replies[method]
    if type(reply) == "function" then
      return reply(...)
    end
    return reply
  end
  host.try_request = function(method, ...)
    if not state.chan then
      return false, "the host is not running"
    end
    return true, host.request(method, ...)
  end
  host.stop = function()
    state.chan = nil
  end
end

--- Records from the host, in one batch.
function M.emit(records)
  require("handoff.events").dispatch(records)
end

--- The calls of `method` so far.
function M.calls_of(method)
  return vim.tbl_filter(function(c)
    return c.method == method
  end, M.calls)
end

function M.reset()
  M.calls, M.replies = {}, {}
end

return M
