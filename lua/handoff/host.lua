--- The host process: found, started lazily, configured, restarted after a crash with the same
--- session, stopped on exit. Long work is only ever *notified*; requests are short queries.
local config = require("handoff.config")
local state = require("handoff.state")

local M = {}


local function notify(msg, level)
  vim.notify(msg, level or vim.log.levels.ERROR, { title = "handoff.nvim" })
end

--- The checkout this file belongs to (…/lua/handoff/host.lua → …).
function M.root()
  local source = debug.getinfo(1, "S").source:gsub("^@", "")
  return vim.fn.fnamemodify(source, ":p:h:h:h")
end

--- The version of the checkout's sources (`version` in its Cargo.toml, the one place it is
--- written), or nil for a plugin installed without them. A host binary of another version was
--- built from other sources: it must be rebuilt.
---@return string?
function M.source_version()
  local ok, lines = pcall(vim.fn.readfile, M.root() .. "/Cargo.toml", "", 40)
  if not ok then
    return nil
  end
  for _, line in ipairs(lines) do
    local v = line:match('^version%s*=%s*"([^"]+)"')
    if v then
      return v
    end
  end
end

--- Where the binary is looked for, in order.
---@return string[]
function M.candidates()
  local root = M.root()
  local list = {}
  if config.options.bin then
    table.insert(list, config.options.bin)
  end
  table.insert(list, root .. "/target/release/handoff-nvim")
  table.insert(list, root .. "/target/debug/handoff-nvim")
  local on_path = vim.fn.exepath("handoff-nvim")
  if on_path ~= "" then
    table.insert(list, on_path)
  end
  return list
end

---@return string? bin, string? err
function M.find_bin()
  if config.options.bin then
    local bin = vim.fn.expand(config.options.bin)
    if vim.fn.executable(bin) == 1 then
      return bin
    end
    return nil, ("handoff.nvim: bin = %q is not an executable file"):format(bin)
  end
  for _, path in ipairs(M.candidates()) do
    if vim.fn.executable(path) == 1 then
      return path
    end
  end
  return nil,
    ("handoff.nvim: cannot find the host binary `handoff-nvim` (looked in %s/target/{release,debug} and $PATH). "
      .. "Build it: cd %s && cargo build --release"):format(M.root(), M.root())
end

function M.running()
  return state.chan ~= nil
end

--- Channels stopped on purpose: their exit is no crash.
local stopped = {}

--- Called when the job ends, whether asked to or not.
local function on_exit(chan, code)
  if stopped[chan] then
    stopped[chan] = nil
    return
  end
  if state.chan ~= chan then
    return -- an older host
  end
  state.chan = nil
  state.pid = nil
  local log = config.log_file()
  notify(
    ("handoff.nvim: the host exited unexpectedly (exit code %d). Your session is saved and the host "
      .. "restarts on next use. Log: %s"):format(code, log)
  )
  require("handoff.events").host_lost(("the host exited unexpectedly (exit code %d)"):format(code))
end

--- Applies a `transcript` reply as if it were the record: remember the session, redraw the chat.
function M.apply_transcript(reply)
  require("handoff.events").dispatch({ vim.tbl_extend("force", reply, { type = "transcript" }) })
end

--- Starts and configures the host unless it runs. Returns the channel, or nil after telling
--- the user why not.
---@return integer?
function M.ensure()
  if state.chan then
    return state.chan
  end
  local bin, why = M.find_bin()
  if not bin then
    notify(why)
    return nil
  end
  local log = config.log_file()
  vim.fn.mkdir(vim.fn.fnamemodify(log, ":h"), "p")
  local chan
  local ok, res = pcall(vim.fn.jobstart, { bin, "--log-file", log, "rpc" }, {
    rpc = true,
    on_exit = function(_, code)
      on_exit(chan, code)
    end,
  })
  if not ok or type(res) ~= "number" or res <= 0 then
    notify(("handoff.nvim: cannot start %s: %s"):format(bin, ok and tostring(res) or res))
    return nil
  end
  chan = res
  state.chan = chan
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = vim.api.nvim_create_augroup("handoff_lifecycle", { clear = true }),
    callback = M.stop,
  })
  state.pid = vim.fn.jobpid(chan)
  -- The host opens the session in the background (the same one after a restart, else the
  -- newest of this directory or a new one) and sends it as a `transcript` record.
  local ok2, reply = pcall(vim.rpcrequest, chan, "configure", M.configure_args())
  if not ok2 then
    M.stop()
    notify(("handoff.nvim: the host did not start: %s (log: %s)"):format(tostring(reply), log))
    return nil
  end
  local okv, version = pcall(vim.rpcrequest, chan, "version")
  local wanted = M.source_version()
  state.host_version = okv and version or nil
  if okv and wanted and version ~= wanted then
    notify(
      ("handoff.nvim: the host binary is version %s but the sources are %s: rebuild it (cargo build --release in %s)"):format(
        tostring(version), wanted, M.root()),
      vim.log.levels.WARN
    )
  end
  return chan
end

--- `configure`'s argument: the settings, and which session to open.
function M.configure_args()
  return {
    settings = config.host_settings(),
    cwd = vim.fn.getcwd(),
    session_file = state.session_file,
    resume = config.options.resume_last and "newest" or "new",
    -- A transcript carries no more of a tool's output than the chat shows.
    tool_output_lines = config.options.tool_output_lines,
    -- The user-level folder of instructions (AGENTS.md); the CLI reads the same one.
    config_dir = vim.fn.stdpath("config") .. "/handoff",
  }
end

--- Sends a notification (long work: prompt, handoff; or an abort). Never waits on the model.
function M.notify(method, ...)
  local chan = M.ensure()
  if not chan then
    return false
  end
  vim.rpcnotify(chan, method, ...)
  return true
end

--- Notifies only a running host (aborts must not start one).
function M.notify_running(method, ...)
  if state.chan then
    vim.rpcnotify(state.chan, method, ...)
    return true
  end
  return false
end

--- A short request to a running host, without starting one or telling the user anything:
--- returns ok and the result or the error (completion and health checks ask this way).
function M.try_request(method, ...)
  if not state.chan then
    return false, "the host is not running"
  end
  return pcall(vim.rpcrequest, state.chan, method, ...)
end

--- A short request. Returns the result, or nil after telling the user what failed.
function M.request(method, ...)
  local chan = M.ensure()
  if not chan then
    return nil
  end
  local ok, res = pcall(vim.rpcrequest, chan, method, ...)
  if not ok then
    notify(("handoff.nvim: %s failed: %s"):format(method, tostring(res):gsub("^.-Vim:", "")))
    return nil
  end
  return res
end

--- Stops the host (the session is flushed by the host on the way out).
function M.stop()
  local chan = state.chan
  if not chan then
    return
  end
  stopped[chan] = true
  state.chan = nil
  state.pid = nil
  pcall(vim.rpcnotify, chan, "shutdown")
  pcall(vim.fn.jobstop, chan)
end

return M
