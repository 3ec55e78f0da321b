--- Tool approvals: the host asks before a tool edits or runs something (as the consent policy
--- says). Each request shows in the chat with what it will do (the command, or the diff of the
--- file) and the keys that answer it; several may wait at once, and nothing blocks the editor.
--- `require("handoff").approve(id, decision, reason?)` is the one way to answer (the keys use it
--- too); `User HandoffToolApproval` fires with `{ id, tool, kind, args, summary, path?, diff?, origin? }`
--- for your own UI (and `sandbox`: the sandbox the command runs in; `unsandboxed`: why allowing
--- it runs the command outside the sandbox; `protected`: why the path the call really reaches,
--- `path`, is protected: allowed per call, "always" counts once). What a call does (its summary, the file it changes, its preview) is what the
--- host sends, as the tool says it: nothing here reads the tool's arguments.
local state = require("handoff.state")

local M = {}

--- The module's state, private (mini.nvim's `H`).
local H = {}

local api = vim.api

---@class handoff.ApprovalRequest
---@field id string
---@field tool string
---@field kind "readOnly"|"edit"|"execute"|"mcp"
---@field args table
---@field summary string what the call does, as the tool says it (the command, the path, …)
---@field path? string the file it changes (absolute)
---@field diff? string
---@field before? string
---@field after? string
---@field origin? { server: string, tool: string, readOnlyHint?: boolean, destructiveHint?: boolean } an MCP tool's server
---@field sandbox? string the sandbox the command runs in (`workspace-write, no network`)
---@field unsandboxed? string why this approval would run the command outside the sandbox
---@field holes? string what the sandbox cannot protect for this command here, and why
---@field protected? string the real path a host tool reaches and why it is protected (asked per call)
---@field answers ("allow"|"always"|"reject"|"cancel")[] the answers the host offers for it, in order

---@type table<string, handoff.ApprovalRequest> requests waiting for an answer, by id
H.pending = {}
---@type string[] their ids, oldest first
H.order = {}

local DECISIONS = { allow = true, always = true, reject = true, cancel = true }

--- The requests waiting, oldest first.
---@return handoff.ApprovalRequest[]
function M.pending()
  local out = {}
  for _, id in ipairs(H.order) do
    if H.pending[id] then
      table.insert(out, H.pending[id])
    end
  end
  return out
end

local function forget(id)
  H.pending[id] = nil
  H.order = vim.tbl_filter(function(x)
    return x ~= id
  end, H.order)
end

--- Lines of the chat for a request.
function M.lines(r)
  local keys = require("handoff.config").options.keymaps.approval or {}
  local title = r.unsandboxed and "### Run `%s` outside the sandbox?"
    or r.protected and "### Allow `%s` on a protected path?"
    or "### Allow `%s`?"
  local lines = { title:format(r.tool), "" }
  if r.protected then
    -- Where the call really lands (links resolved), which may differ from what it names.
    vim.list_extend(lines, { "*Protected:* " .. r.protected, "*Real path:* `" .. (r.path or "") .. "`", "" })
  end
  if r.origin then
    -- The server's own hints, shown as its words: they decide nothing.
    local hints = {}
    if r.origin.readOnlyHint ~= nil then
      table.insert(hints, "readOnlyHint " .. tostring(r.origin.readOnlyHint))
    end
    if r.origin.destructiveHint ~= nil then
      table.insert(hints, "destructiveHint " .. tostring(r.origin.destructiveHint))
    end
    local said = #hints > 0 and (" (the server says: %s)"):format(table.concat(hints, ", ")) or ""
    table.insert(lines, ("MCP server `%s`, tool `%s`%s"):format(r.origin.server, r.origin.tool, said))
    table.insert(lines, "")
  end
  if r.kind == "execute" then
    vim.list_extend(lines, { "```sh" })
    vim.list_extend(lines, vim.split(r.summary or "", "\n", { plain = true }))
    vim.list_extend(lines, { "```" })
    if r.unsandboxed then
      vim.list_extend(lines, { "", "*Why:* " .. r.unsandboxed })
    elseif r.holes then
      vim.list_extend(lines, { "", "*Runs in the sandbox, but " .. r.holes .. "*" })
    elseif r.sandbox then
      vim.list_extend(lines, { "", "*Runs in the sandbox: " .. r.sandbox .. "*" })
      if r.confined_by then
        vim.list_extend(lines, { "*Confined by " .. r.confined_by .. "*" })
      end
    end
  elseif r.diff then
    table.insert(lines, "`" .. (r.summary or "") .. "`")
    table.insert(lines, "")
    vim.list_extend(lines, { "```diff" })
    vim.list_extend(lines, vim.split(r.diff, "\n", { plain = true, trimempty = true }))
    vim.list_extend(lines, { "```" })
  else
    vim.list_extend(lines, { "```json" })
    vim.list_extend(lines, vim.split(vim.json.encode(r.args), "\n", { plain = true }))
    vim.list_extend(lines, { "```" })
  end
  local hint = {}
  -- The answers the host offers (a protected path, or a sandbox with holes, is allowed per call:
  -- no "always"), then the side-by-side view when there is a change to show.
  local shown = vim.list_extend({}, r.answers or {})
  if r.before or r.after then
    shown[#shown + 1] = "diff"
  end
  for _, name in ipairs(shown) do
    local key = keys[name]
    if key then
      table.insert(hint, ("`%s` %s"):format(key, name))
    end
  end
  table.insert(lines, "")
  table.insert(lines, "*" .. table.concat(hint, " · ") .. "*")
  return lines
end

--- A request from the host: remembered, shown in the chat, announced.
---@param r handoff.ApprovalRequest
function M.request(r)
  if H.pending[r.id] then
    return
  end
  H.pending[r.id] = r
  table.insert(H.order, r.id)
  local chat = require("handoff.chat")
  chat.append_approval(r)
  if not chat.is_open() then
    -- Only the chat shows a request and answers it: closed, nothing would say the agent waits.
    local what = r.path and (" " .. vim.fn.fnamemodify(r.path, ":~:.")) or ""
    vim.notify(("handoff.nvim: `%s`%s waits for your answer: :HandoffChat shows it"):format(r.tool, what),
      vim.log.levels.WARN, { title = "handoff.nvim" })
  end
  require("handoff.events").fire("HandoffToolApproval", {
    id = r.id,
    tool = r.tool,
    kind = r.kind,
    args = r.args,
    summary = r.summary,
    path = r.path,
    diff = r.diff,
    origin = r.origin,
    sandbox = r.sandbox,
    confined_by = r.confined_by,
    unsandboxed = r.unsandboxed,
    holes = r.holes,
    protected = r.protected,
  })
  local review = require("handoff.review")
  if review.before_mode() and (r.before or r.after) then
    -- Reviewed hunk by hunk before it is written (`:help handoff-hunks-before`).
    vim.schedule(function()
      review.safely(review.open_proposal, r)
    end)
  end
end

--- The host says a request ended (answered, or its turn was stopped).
function M.resolved(id, decision)
  require("handoff.review").close_proposal(id)
  if H.pending[id] then
    forget(id)
    require("handoff.chat").append_notice(("`%s`: %s"):format(id, decision or "answered"))
  end
end

--- Answers request `id`. A second answer, or one for an unknown id, is ignored.
---@param id string
---@param decision "allow"|"always"|"reject"|"cancel"
---@param reason? string
---@return boolean answered
function M.approve(id, decision, reason)
  if not DECISIONS[decision] then
    error(('handoff.nvim: approve(): decision must be "allow", "always", "reject" or "cancel", got %q'):format(
      tostring(decision)), 2)
  end
  local r = H.pending[id]
  if not r then
    return false
  end
  forget(id)
  require("handoff.review").close_proposal(id)
  require("handoff.host").notify_running("approve", id, decision, reason)
  require("handoff.chat").append_notice(("%s `%s`%s"):format(
    ({ allow = "Allowed", always = "Always allowed", reject = "Rejected", cancel = "Cancelled" })[decision],
    r.tool, (reason and reason ~= "") and (": " .. reason) or ""))
  return true
end

--- Allows an `edit` or `write` reviewed hunk by hunk before it is written
--- (`changes.review = "before"`): the file is written with `text`.
---@return boolean answered
function M.approve_reviewed(id, text)
  local r = H.pending[id]
  if not r then
    return false
  end
  forget(id)
  require("handoff.host").notify_running("approve_reviewed", id, text)
  require("handoff.chat").append_notice(("Allowed `%s` as reviewed (only the kept lines)"):format(r.tool))
  return true
end

--- The request the cursor is in (in the chat), else the oldest.
function M.current()
  local buf = state.ui.chat_buf
  if buf and api.nvim_get_current_buf() == buf then
    local row = api.nvim_win_get_cursor(0)[1] - 1
    local best
    for _, r in ipairs(M.pending()) do
      if r.row and r.row <= row and (not best or r.row > best.row) then
        best = r
      end
    end
    if best then
      return best
    end
  end
  return M.pending()[1]
end

--- The keys' action: answers the current request (a reject asks for a reason first).
function M.answer_current(decision)
  local r = M.current()
  if not r then
    vim.notify("handoff.nvim: no tool call is waiting for an answer", vim.log.levels.INFO, { title = "handoff.nvim" })
    return
  end
  if decision == "reject" then
    vim.ui.input({ prompt = "Reason (optional): " }, function(reason)
      if reason ~= nil then
        M.approve(r.id, "reject", reason)
      end
    end)
    return
  end
  M.approve(r.id, decision)
end

--- Opens the proposed change as a real diff, before and after side by side, in a new tab.
function M.open_diff(r)
  r = r or M.current()
  if not (r and (r.before or r.after)) then
    return false
  end
  local ft = vim.filetype.match({ filename = r.path or "" }) or ""
  vim.cmd("tabnew")
  local function side(text, label)
    local buf = api.nvim_create_buf(false, true)
    local lines = vim.split(text or "", "\n", { plain = true })
    if lines[#lines] == "" then
      table.remove(lines) -- the file's final newline
    end
    api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].bufhidden = "wipe"
    vim.bo[buf].modifiable = false
    vim.bo[buf].filetype = ft
    pcall(api.nvim_buf_set_name, buf, ("handoff://%s/%s (%s)"):format(r.id, r.summary ~= "" and r.summary or "file", label))
    api.nvim_win_set_buf(0, buf)
    vim.cmd("diffthis")
  end
  side(r.before, "before")
  vim.cmd("rightbelow vsplit")
  side(r.after, "after")
  return true
end

--- Everything pending ends (the host went away, or the session changed).
function M.clear(why)
  for _, r in ipairs(M.pending()) do
    require("handoff.chat").append_notice(("`%s` (%s): %s"):format(r.tool, r.id, why))
  end
  H.pending, H.order = {}, {}
end

return M
