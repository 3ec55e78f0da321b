--- The host process: found, started lazily, configured, restarted after a crash with the same
--- session, stopped on exit. Long work is only ever *notified*; requests are short queries that
--- the host answers at once: `{ ok = value }` or `{ error = { kind, message } }`. No request
--- waits for the session to load: it fails with kind "not_ready", and `when_ready` runs a retry
--- once the session's transcript arrives.
local config = require("handoff.config")
local state = require("handoff.state")

local M = {}

--- The module's state, private (mini.nvim's `H`).
local H = {}

local function notify(msg, level)
  vim.notify(msg, level or vim.log.levels.ERROR, { title = "handoff.nvim" })
end

--- The checkout this file belongs to (…/lua/handoff/host.lua → …).
function M.root()
  local source = debug.getinfo(1, "S").source:gsub("^@", "")
  return vim.fn.fnamemodify(source, ":p:h:h:h")
end

--- Why a host binary does not fit the plugin, or nil: another version than the plugin's, or
--- the same version built from other sources (its settings' digest differs from the plugin's
--- generated schema, or it has none: older than the digest). One line that says what to do; the
--- binary is refused (never used). Also asked of a release (`handoff.install`) before its
--- binary is fetched, and of the installed one's manifest before it is run.
---@param version? string the host's `version`
---@param digest? string the host's `schema_digest`
---@param bin? string the binary, named in the message
---@return string?
function M.stale_message(version, digest, bin)
  local wanted = M.source_version()
  local what = bin and ("the host binary " .. bin) or "the host binary"
  local fix = (": run :HandoffInstall (or build it: cargo build --release in %s)"):format(M.root())
  if version and wanted and version ~= wanted then
    return ("handoff.nvim: %s is version %s but the plugin is %s%s"):format(what, version, wanted, fix)
  end
  if digest ~= require("handoff.schema").digest then
    return ("handoff.nvim: %s was built from other sources than the plugin (its settings differ)%s"):format(what, fix)
  end
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

--- The binary the user named: the `bin` setting, else `$HANDOFF_BIN` (expanded), or nil.
---@return string?
function M.user_bin()
  for _, bin in ipairs({ config.options.bin or "", vim.env.HANDOFF_BIN or "" }) do
    if bin ~= "" then
      return vim.fn.expand(bin)
    end
  end
end

---@class handoff.Located
---@field path string
---@field source "user"|"download"|"build"|"manual"|"checkout"|"path"
---@field manifest? handoff.InstallManifest the installed binary's record (`handoff.install`)

--- Where the host binary is, and where it came from; the one lookup (nothing is run, nothing
--- downloaded). In order: the binary the user named (`bin`, `$HANDOFF_BIN`), used as it is;
--- the installed one (`:HandoffInstall`) when its manifest fits the plugin; the checkout's
--- `target/release`, then `target/debug`; `handoff-nvim` on $PATH. An installed binary of
--- another version is never run: without another candidate the error says to reinstall.
---@return handoff.Located?, string?
function M.locate()
  local user = M.user_bin()
  if user then
    if vim.fn.executable(user) == 1 then
      return { path = user, source = "user" }
    end
    return nil, ("handoff.nvim: %s = %q is not an executable file"):format(config.options.bin and "bin" or "$HANDOFF_BIN", user)
  end
  local installed = require("handoff.install").installed()
  local misfit
  if installed then
    local m = installed.manifest
    if not m.version then
      -- Put there by hand (README's three lines): no record to check, the handshake at start does.
      return { path = installed.path, source = "manual" }
    end
    misfit = M.stale_message(m.version, m.schema_digest, installed.path)
    if not misfit then
      return { path = installed.path, source = m.source or "download", manifest = m }
    end
  end
  local root = M.root()
  for _, path in ipairs({ root .. "/target/release/handoff-nvim", root .. "/target/debug/handoff-nvim" }) do
    if vim.fn.executable(path) == 1 then
      return { path = path, source = "checkout" }
    end
  end
  local on_path = vim.fn.exepath("handoff-nvim")
  if on_path ~= "" then
    return { path = on_path, source = "path" }
  end
  if misfit then
    return nil, misfit
  end
  return nil,
    ("handoff.nvim: the host binary is not installed: run :HandoffInstall (it downloads the release's binary for this "
      .. "system, checked against the checksum the plugin pins, or builds it with cargo), or build it yourself: "
      .. "cd %s && cargo build --release"):format(root)
end

--- A field of an answer of the host or of its binary (`--version`, `agents`): nil for
--- msgpack's or JSON's null (`vim.NIL`) too.
function M.given(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

--- Stops the host as the editor quits, so that it flushes the session (`setup()` calls this).
function M.setup()
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = vim.api.nvim_create_augroup("handoff_lifecycle", { clear = true }),
    desc = "handoff.nvim: stop the host (it flushes the session)",
    callback = function()
      M.stop()
    end,
  })
end

function M.running()
  return state.chan ~= nil
end

--- Channels stopped on purpose: their exit is no crash.
H.stopped = {}

--- Called when the job ends, whether asked to or not.
local function on_exit(chan, code)
  if H.stopped[chan] then
    H.stopped[chan] = nil
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
  local found, why = M.locate()
  if not found then
    notify(why)
    return nil
  end
  local bin = found.path
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
  state.pid = vim.fn.jobpid(chan)
  -- The host opens the session in the background (the same one after a restart, else the
  -- newest of this directory or a new one) and sends it as a `transcript` record.
  -- Asked before `configure`: a binary of another version is refused here, before it is given
  -- settings it may not know or a prompt; the user reads what to do (:HandoffInstall).
  local okv, version = M.call(chan, "version")
  state.host_version = okv and version or nil
  local okd, digest = M.call(chan, "schema_digest")
  local stale = M.stale_message(okv and version or nil, okd and digest or nil, bin)
  if stale then
    M.stop()
    notify(stale)
    return nil
  end
  local ok2, failure = M.call(chan, "configure", M.configure_args())
  if not ok2 then
    M.stop()
    notify(("handoff.nvim: the host did not start: %s (log: %s)"):format(failure.message, log))
    return nil
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
    -- The host decides for `:Handoff` and `/handoff` typed in the prompt alike.
    handoff_review = config.options.handoff.review and true or false,
    -- The user-level folder of instructions (AGENTS.md); the CLI reads the same one.
    config_dir = vim.fn.stdpath("config") .. "/handoff",
    -- Copilot's Editor-Version header.
    editor_version = "Neovim/" .. tostring(vim.version()),
  }
end

---@class handoff.Failure
---@field kind string  "not_ready", "busy", "invalid", "auth", "rate_limit", "overflow", "network", "timeout", "io", "host", …
---@field message string

--- One request on `chan`: `true, value`, or `false, failure` (`handoff.Failure`). A failure of
--- the channel itself (the host went away) has kind "host".
---@return boolean, any
function M.call(chan, method, ...)
  local ok, answer = pcall(vim.rpcrequest, chan, method, ...)
  if not ok then
    return false, { kind = "host", message = (tostring(answer):gsub("^.-Vim:", "")) }
  end
  if type(answer) == "table" and answer.error ~= nil then
    return false, answer.error
  end
  if type(answer) ~= "table" or answer.ok == nil then
    return false, { kind = "host", message = ("unexpected answer to %s: %s"):format(method, vim.inspect(answer)) }
  end
  return true, answer.ok
end

--- Callbacks waiting for the session to be open (see `when_ready`), and whether any do: then
--- notifications wait behind them too, so that what the user did runs in the order they did it.
H.waiting = {}
H.loading = false

--- Runs `fn` once the host's session is open: at the next `transcript` record (the one a load
--- sends). For a command refused as "not_ready".
---@param fn fun()
function M.when_ready(fn)
  H.loading = true
  table.insert(H.waiting, fn)
end

--- The session is open (called by `handoff.events` on a transcript record).
function M.on_ready()
  local run = H.waiting
  H.waiting, H.loading = {}, false
  for _, fn in ipairs(run) do
    fn()
  end
end

--- Drops what waits for the session (`:HandoffStop` while it loads); returns how many.
function M.drop_waiting()
  local n = #H.waiting
  H.waiting, H.loading = {}, false
  return n
end

--- Sends a notification (long work: prompt, handoff; or an abort). Never waits on the model.
--- While commands wait for the session to open, it waits behind them.
function M.notify(method, ...)
  local chan = M.ensure()
  if not chan then
    return false
  end
  if H.loading then
    local args = { n = select("#", ...), ... }
    M.when_ready(function()
      M.notify(method, unpack(args, 1, args.n))
    end)
    return true
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
--- returns ok and the result, or false, the failure's text and the failure (completion and
--- health checks ask this way).
function M.try_request(method, ...)
  if not state.chan then
    return false, "the host is not running", { kind = "host", message = "the host is not running" }
  end
  local ok, res = M.call(state.chan, method, ...)
  if not ok then
    return false, res.message, res
  end
  return true, res
end

--- A short request. Returns the result, or nil and the failure (`handoff.Failure`) after
--- telling the user what failed (while the session loads, only that it loads).
---@return any, handoff.Failure?
function M.request(method, ...)
  local chan = M.ensure()
  if not chan then
    return nil, { kind = "host", message = "the host is not running" }
  end
  local ok, res = M.call(chan, method, ...)
  if not ok then
    if res.kind == "not_ready" then
      notify("handoff.nvim: " .. res.message, vim.log.levels.INFO)
    else
      notify(("handoff.nvim: %s failed: %s"):format(method, res.message))
    end
    return nil, res
  end
  return res
end

--- Stops the host (the session is flushed by the host on the way out).
function M.stop()
  local chan = state.chan
  if not chan then
    return
  end
  H.stopped[chan] = true
  state.chan = nil
  state.pid = nil
  pcall(vim.rpcnotify, chan, "shutdown")
  pcall(vim.fn.jobstop, chan)
end

return M
