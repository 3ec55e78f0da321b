--- Sessions as chains of handoffs, and any session read-only.
---
--- The picker (`:HandoffSessions`) lists the sessions of the working directory as chains: each
--- session a handoff started sits under the one it was handed off from, marked `⇠`, the chain
--- with the newest session first. `:HandoffSessions!` opens the chosen one read-only instead of
--- resuming it: its transcript in a markdown buffer `handoff://session/<file>.md`, read by the
--- host off its main thread, while the agent stays on its session. The key `keymaps.parent`
--- (`gp`) on a "Handed off from" line (the chat's header, or a read-only session's) opens that
--- parent the same way, so a chain can be walked back to its start.
local config = require("handoff.config")
local state = require("handoff.state")

local M = {}

local api = vim.api

--- A session of the host's `sessions` list (`path`, `timestamp`, `first_message`,
--- `message_count`, `parent_session`…) with its place in its chain.
---@class handoff.SessionChainItem
---@field path string
---@field depth integer  0 for a chain's first session, 1 for one handed off from it, …

--- Orders the host's session list (newest first) as chains: a session without a listed parent
--- starts a chain and the sessions handed off from it follow, each under its parent. Chains are
--- ordered by their newest session, and so are the children of one session, newest first.
---@param list table[]
---@return handoff.SessionChainItem[]
function M.chains(list)
  local rank, by_path, children = {}, {}, {}
  for i, s in ipairs(list) do
    rank[s] = i
    by_path[s.path] = s
  end
  local roots = {}
  for _, s in ipairs(list) do
    local parent = s.parent_session and by_path[s.parent_session]
    if parent and parent ~= s then
      children[parent] = children[parent] or {}
      table.insert(children[parent], s)
    else
      table.insert(roots, s)
    end
  end
  -- The rank of the newest session of each subtree (a smaller rank is newer).
  local newest = {}
  local function measure(s, seen)
    if newest[s] then
      return newest[s]
    end
    seen[s] = true
    local best = rank[s]
    for _, c in ipairs(children[s] or {}) do
      if not seen[c] then
        best = math.min(best, measure(c, seen))
      end
    end
    newest[s] = best
    return best
  end
  local function by_newest(a, b)
    return measure(a, {}) < measure(b, {})
  end
  local out, placed = {}, {}
  local function place(s, depth)
    if placed[s] then
      return
    end
    placed[s] = true
    table.insert(out, vim.tbl_extend("force", s, { depth = depth }))
    local kids = children[s] or {}
    table.sort(kids, by_newest)
    for _, c in ipairs(kids) do
      place(c, depth + 1)
    end
  end
  table.sort(roots, by_newest)
  for _, s in ipairs(roots) do
    place(s, 0)
  end
  -- Parents naming each other (hand-edited files) start no chain: list them anyway.
  for _, s in ipairs(list) do
    place(s, 0)
  end
  return out
end

--- A picker line: the timestamp, the first prompt and the size (the host's count of the messages
--- on the current branch, the one the handoff's guard checks), indented and marked `⇠` under the
--- session it was handed off from.
---@param item handoff.SessionChainItem
function M.format(item)
  local s = item
  local first = (s.first_message ~= nil and s.first_message ~= "") and s.first_message or "(no prompt yet)"
  local lead = item.depth > 0 and (string.rep("  ", item.depth - 1) .. "⇠ ") or ""
  local current = s.path == state.session_file and " (current)" or ""
  return ("%s%s  %s  [%d messages]%s"):format(lead, s.timestamp or "", first, s.message_count or 0, current)
end

--- Picks a session of this directory: resumes it, or with `opts.view` opens it read-only.
---@param opts? { view?: boolean }
function M.pick(opts)
  local view = opts and opts.view
  local list = require("handoff.host").request("sessions")
  if not list then
    return
  end
  if #list == 0 then
    vim.notify("No sessions for this directory yet", vim.log.levels.INFO, { title = "handoff.nvim" })
    return
  end
  vim.ui.select(M.chains(list), {
    prompt = view and "View session (read-only)" or "Resume session",
    format_item = M.format,
  }, function(choice)
    if not choice then
      return
    end
    if view then
      M.view(choice.path)
    else
      require("handoff").resume(choice.path)
    end
  end)
end

--- The buffer name of a session file's read-only view.
function M.buffer_name(path)
  return "handoff://session/" .. vim.fn.fnamemodify(path, ":t:r") .. ".md"
end

--- Session file of each read-only view buffer.
local views = {}

local function valid(buf)
  return buf ~= nil and api.nvim_buf_is_valid(buf)
end

local function set_lines(buf, lines)
  require("handoff.chat.render").clear(buf)
  -- 'readonly' off while the text is set (else Neovim warns about changing a read-only buffer).
  vim.bo[buf].readonly = false
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  vim.bo[buf].readonly = true
end

--- The read-only buffer for `path` (made once).
local function view_buffer(path)
  local name = M.buffer_name(path)
  local buf = vim.fn.bufnr("^" .. vim.fn.escape(name, "\\^$.*~[]") .. "$")
  if buf == -1 or not valid(buf) then
    require("handoff.highlights").define()
    buf = api.nvim_create_buf(true, true)
    api.nvim_buf_set_name(buf, name)
    vim.bo[buf].buftype = "nofile"
    vim.bo[buf].bufhidden = "hide"
    vim.bo[buf].swapfile = false
    require("handoff.chat.render").markdown(buf)
    vim.bo[buf].modifiable = false
    vim.bo[buf].readonly = true
    require("handoff.keymaps").session_view_buffer(buf)
  end
  views[buf] = path
  return buf
end

--- Opens a session file's transcript read-only (`handoff://session/<file>.md`, in a window of
--- its own, focused) without switching the agent to it. The host reads the file in the
--- background; the buffer fills when it is there (`User HandoffSessionView`).
---@param path string a session file
---@return integer? buf
function M.view(path)
  if type(path) ~= "string" or path == "" then
    vim.notify("handoff.nvim: view_session needs a session file", vim.log.levels.ERROR, { title = "handoff.nvim" })
    return nil
  end
  path = vim.fn.fnamemodify(path, ":p")
  local buf = view_buffer(path)
  set_lines(buf, { "# Session " .. vim.fn.fnamemodify(path, ":t"), "", "*Loading…*" })
  local win = vim.fn.win_findbuf(buf)[1]
  if win then
    api.nvim_set_current_win(win)
  else
    vim.cmd("botright split")
    api.nvim_win_set_buf(0, buf)
    vim.wo[0].wrap = true
    vim.wo[0].linebreak = true
  end
  require("handoff.host").notify("view_session", path)
  return buf
end

--- The host's `session_view` record: fills the buffers showing that file.
function M.on_view(r)
  local render = require("handoff.chat.render")
  for buf, path in pairs(views) do
    if not valid(buf) then
      views[buf] = nil
    elseif path == r.path then
      local title = "# Session " .. (r.session_id or vim.fn.fnamemodify(path, ":t"))
      if r.error then
        set_lines(buf, { title, "", "**Cannot read " .. path .. ":** " .. r.error })
        render.set_parent(buf, nil)
      else
        local lines, parent_row = require("handoff.chat.lines").header_lines(r, title)
        table.insert(lines, 2, "*Read-only: " .. path .. "*")
        parent_row = parent_row and parent_row + 1
        if (r.earlier or 0) > 0 then
          table.insert(lines, ("*… %d earlier items not shown*"):format(r.earlier))
          table.insert(lines, "")
        end
        local body, marks = render.build(r.items or {}, #lines)
        vim.list_extend(lines, body)
        set_lines(buf, lines)
        render.decorate(buf, marks)
        render.set_parent(buf, r.parent_session, parent_row)
      end
    end
  end
end

--- On a "Handed off from" line (the chat's header, a read-only session's): opens that parent
--- read-only and returns true; elsewhere returns false.
function M.open_parent_at_cursor()
  local buf = api.nvim_get_current_buf()
  local parent, row = vim.b[buf].handoff_parent_session, vim.b[buf].handoff_parent_row
  if not (parent and row) or api.nvim_win_get_cursor(0)[1] - 1 ~= row then
    return false
  end
  M.view(parent)
  return true
end

--- The read-only views open now: buffer → session file (for tests).
function M.views()
  local out = {}
  for buf, path in pairs(views) do
    if valid(buf) then
      out[buf] = path
    end
  end
  return out
end

return M
