--- `:HandoffMcp [list|start|stop|trust] [server]`: the session's MCP servers (state, tools, last
--- error), and starting, stopping or trusting them. The host owns the servers; this shows what it
--- answers.
local host = require("handoff.host")

local M = {}

local given = host.given

local ACTIONS = { "list", "start", "stop", "trust" }

--- The lines of the server list.
---@param list table the host's `mcp` answer
---@return string[]
function M.lines(list)
  local lines = {}
  if #list.servers == 0 then
    table.insert(lines, "No MCP servers are configured (see :help handoff-mcp).")
  end
  for _, s in ipairs(list.servers) do
    table.insert(lines, ("%s: %s, %d tools (%s; %s)"):format(s.name, s.state, #s.tools, s.transport, s.origin))
    if given(s.error) then
      table.insert(lines, "  error: " .. s.error)
    end
    -- What starts it again, in the editor's own commands (the host's words name none).
    if s.state == "stopped" then
      table.insert(lines, "  :HandoffMcp start " .. s.name .. " starts it")
    elseif s.state == "untrusted" then
      table.insert(lines, "  :HandoffMcp trust trusts the project's .mcp.json (after showing it)")
    end
    for _, tool in ipairs(s.tools) do
      table.insert(lines, "  " .. tool)
    end
  end
  for _, e in ipairs(list.errors or {}) do
    table.insert(lines, "configuration: " .. e)
  end
  return lines
end

--- `:HandoffMcp trust`: shows each server of the project's `.mcp.json` as the host read it
--- (command and arguments, or URL, `${VAR}` unexpanded) and that a trusted server runs the
--- project's files unsandboxed, then, on yes, trusts exactly those bytes (their digest: a file
--- changed since is refused by the host).
---@return table|nil list
function M.trust()
  local list, failure = host.request("mcp", "list")
  if failure or type(list) ~= "table" then
    return nil
  end
  local project = given(list.project)
  if not project then
    vim.notify("handoff.nvim: this project has no .mcp.json", vim.log.levels.WARN)
    return nil
  end
  local message = table.concat(project.lines, "\n") .. "\n\nTrust this file?"
  if vim.fn.confirm(message, "&Trust\n&Cancel", 2, "Warning") ~= 1 then
    vim.notify("handoff.nvim: " .. project.file .. " is not trusted", vim.log.levels.INFO)
    return nil
  end
  return M.run("trust", project.digest)
end

--- Runs the command: the action's answer (the list), echoed. `trust` without the digest of a
--- listing asks first (|M.trust|).
---@param action? string
---@param server? string for `trust`: the digest of the listing the user confirmed
---@return table|nil list
function M.run(action, server)
  if action == "trust" and server == nil then
    return M.trust()
  end
  local list, failure = host.request("mcp", action or "list", server)
  if failure or type(list) ~= "table" then
    return nil
  end
  vim.api.nvim_echo({ { table.concat(M.lines(list), "\n") } }, true, {})
  return list
end

--- Server names for completion, from the last list the host gave.
function M.complete(arg_lead, cmd_line)
  local words = vim.split(cmd_line, "%s+", { trimempty = true })
  local on_first = #words == 1 or (#words == 2 and arg_lead ~= "")
  if on_first then
    return vim.tbl_filter(function(a)
      return vim.startswith(a, arg_lead)
    end, ACTIONS)
  end
  local ok, list = host.try_request("mcp", "list")
  if not ok or type(list) ~= "table" then
    return {}
  end
  local names = vim.tbl_map(function(s)
    return s.name
  end, list.servers)
  return vim.tbl_filter(function(n)
    return vim.startswith(n, arg_lead)
  end, names)
end

--- `:checkhealth handoff`'s MCP section.
---@param health table vim.health
function M.check(health)
  health.start("MCP servers")
  local ok, list = host.try_request("mcp", "list")
  if not ok or type(list) ~= "table" then
    health.warn("cannot list the MCP servers: " .. tostring(list))
    return
  end
  if #list.servers == 0 then
    health.info("none configured (.mcp.json, " .. vim.fn.stdpath("config") .. "/handoff/mcp.json, setup{ mcp = … })")
  end
  for _, s in ipairs(list.servers) do
    local line = ("%s: %s, %d tools (%s; %s)"):format(s.name, s.state, #s.tools, s.transport, s.origin)
    if s.state == "failed" or given(s.error) then
      health.error(line .. ": " .. tostring(s.error))
    elseif s.state == "untrusted" then
      health.warn(line, { ":HandoffMcp trust starts the project's servers" })
    else
      health.ok(line)
    end
  end
  for _, e in ipairs(list.errors or {}) do
    health.error("configuration: " .. e)
  end
end

return M
