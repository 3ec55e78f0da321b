--- Sessions as chains of handoffs, and any session read-only.
---
--- The picker (`:HandoffSessions`) lists the sessions of the working directory as chains, in the
--- order the host's `sessions` record gives (the host owns the chains): each session a handoff
--- started sits under the one it was handed off from, marked `⇠`, the chain with the newest
--- session first. `:HandoffSessions!` opens the chosen one read-only instead of
--- resuming it: its transcript in a markdown buffer `handoff://session/<file>.md`, read by the
--- host off its main thread, while the agent stays on its session. The key `keymaps.parent`
--- (`gp`) on a "Handed off from" line (the chat's header, or a read-only session's) opens that
--- parent the same way, so a chain can be walked back to its start.
local M = {}

local api = vim.api

--- A session of the host's `sessions` record, in the picker's order: the host places each
--- session in its chain of handoffs (`session::chain`), this module only draws it.
---@class handoff.SessionListItem
---@field path string
---@field timestamp string  when it was made
---@field updated string  its last activity (its last entry's time)
---@field first_message string
---@field message_count integer  messages on its current branch (the count the handoff's guard checks)
---@field parent_session? string
---@field depth integer  0 for a chain's first session, 1 for one handed off from it, …
---@field current? boolean  the agent's session now

--- What a picker asked for waits here until the host's list comes (`view`: read-only).
local H = { pending = nil }

--- A picker line: the timestamp, the first prompt and the size, indented and marked `⇠` under
--- the session it was handed off from.
---@param item handoff.SessionListItem
function M.format(item)
  local first = (item.first_message ~= nil and item.first_message ~= "") and item.first_message or "(no prompt yet)"
  local depth = item.depth or 0
  local lead = depth > 0 and (string.rep("  ", depth - 1) .. "⇠ ") or ""
  local current = item.current and " (current)" or ""
  return ("%s%s  %s  [%d messages]%s"):format(lead, item.timestamp or "", first, item.message_count or 0, current)
end

--- Picks a session of this directory: resumes it, or with `opts.view` opens it read-only. The
--- host lists the sessions in the background; the picker opens when its `sessions` record
--- arrives (`M.on_list`), the editor answering meanwhile.
---@param opts? { view?: boolean }
function M.pick(opts)
  H.pending = { view = opts and opts.view or false }
  if not require("handoff.host").notify("sessions") then
    H.pending = nil
  end
end

--- The host's `sessions` record: opens the picker a `pick` asked for.
---@param r { sessions: handoff.SessionListItem[], error?: string }
function M.on_list(r)
  local pending = H.pending
  H.pending = nil
  if not pending then
    return
  end
  if r.error then
    vim.notify("handoff.nvim: cannot list the sessions: " .. r.error, vim.log.levels.ERROR, { title = "handoff.nvim" })
    return
  end
  local list = r.sessions or {}
  if #list == 0 then
    vim.notify("No sessions for this directory yet", vim.log.levels.INFO, { title = "handoff.nvim" })
    return
  end
  local view = pending.view
  vim.ui.select(list, {
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
H.views = {}

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
  H.views[buf] = path
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
  for buf, path in pairs(H.views) do
    if not valid(buf) then
      H.views[buf] = nil
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
  for buf, path in pairs(H.views) do
    if valid(buf) then
      out[buf] = path
    end
  end
  return out
end

return M
