--- The review of the agent's changes, hunk by hunk (`:help handoff-hunks`): the editor's half.
---
--- The host splits every successful `edit`/`write` call (and what a `bash` command changed in the
--- files it watched) into hunks against the file as it was
--- before *that* call and keeps their states beside the session (`crates/core/src/session/review.rs`,
--- request `review`). Here each hunk is found in the text as it is now (the call's result
--- diffed against the buffer, or the disk when the file is not loaded), drawn with signs and
--- line highlights that do not move the text, and kept or rejected in the real buffer: each
--- action is one undo block, and an action's state follows the undo tree (`u` after a reject
--- brings the lines back *and* the pending state, `<C-r>` both again).
---
--- Rejecting is three-way (the call's base, the agent's lines, the user's text now): the hunk's
--- lines go back to the call's base when they are still the agent's; lines the user typed inside
--- an added block stay; any other overlap is a conflict, shown and left to the user.
local M = {}

--- The review's state, private (mini.nvim's `H`): a new session starts it again (`M.reset`).
local H = {}

local api = vim.api
local changes = require("handoff.changes")
local config = require("handoff.config")
local paths = require("handoff.files")
local normalize = paths.normalize

M.ns = api.nvim_create_namespace("handoff_review")

---@class handoff.ReviewHunk
---@field id integer
---@field before { start: integer, ["end"]: integer } the call's base lines (0-based, end excluded)
---@field after { start: integer, ["end"]: integer } the agent's lines in the call's result
---@field state "pending"|"kept"|"rejected"
---@field reason? string
---@field edited? boolean

---@class handoff.ReviewCall
---@field call_id string
---@field tool string
---@field path string
---@field before_file? string
---@field after_file string
---@field hunks handoff.ReviewHunk[]

---@type handoff.ReviewCall[] oldest first
H.calls = {}
--- Blob files' lines (content-addressed, so never stale).
H.blob_lines = {}
--- Hunks a reject found in conflict with the user's text: id → true.
H.conflicts = {}
--- Per buffer: the keep/reject actions done there, each tied to the undo state it made.
---@type table<integer, { seq: integer, ids: integer[], state: string, reason?: string, edited: table<integer, boolean>, prev: table<integer, { state: string, edited: boolean }>, applied: boolean }[]>
H.actions = {}
H.attached = {}

local function notify(msg, level)
  vim.notify("handoff.nvim: " .. msg, level or vim.log.levels.INFO, { title = "handoff.nvim" })
end

function M.enabled()
  return config.options.changes.review ~= "off"
end

local function lines_of_blob(file)
  if not file then
    return {}
  end
  local cached = H.blob_lines[file]
  if cached then
    return cached
  end
  local text = changes.read_file(file)
  if not text then
    return {}
  end
  cached = changes.lines_of(text)
  H.blob_lines[file] = cached
  return cached
end

local function fire(data)
  api.nvim_exec_autocmds("User", { pattern = "HandoffHunks", modeline = false, data = data or {} })
end

-- Finding hunks in the text of today ----------------------------------------------------------

--- Whether two lists of lines are equal (Lua strings are interned: a cheap pass).
local function same(a, b)
  if #a ~= #b then
    return false
  end
  for i = 1, #a do
    if a[i] ~= b[i] then
      return false
    end
  end
  return true
end

--- The changed regions between two versions, 0-based and end-excluded on both sides.
local function regions(a, b)
  local out = {}
  for _, h in ipairs(changes.hunks(a, b)) do
    local sa, ca, sb, cb = h[1], h[2], h[3], h[4]
    local x0 = ca == 0 and sa or sa - 1
    local y0 = cb == 0 and sb or sb - 1
    out[#out + 1] = { x0, x0 + ca, y0, y0 + cb }
  end
  return out
end

--- Where lines `s..e` of the call's result are in the text now, and whether anything changed
--- them since (the user, or a later call).
local function map_range(regs, s, e)
  local start, stop, touched = s, e, false
  local d_start, d_stop = 0, 0
  for _, r in ipairs(regs) do
    local x0, x1, y0, y1 = r[1], r[2], r[3], r[4]
    local delta = (y1 - y0) - (x1 - x0)
    if x1 <= s then
      d_start = d_start + delta
    elseif x0 < s then
      -- A change across the hunk's first line.
      start, d_start, touched = nil, y0, true
    end
    if x0 < e and x1 <= e then
      d_stop = d_stop + delta
    elseif x0 < e and x1 > e then
      stop, d_stop, touched = nil, y1, true
    end
    if (x0 < e and x1 > s) or (x0 == x1 and s < x0 and x0 < e) then
      touched = true
    end
  end
  start = start and (start + d_start) or d_start
  stop = stop and (stop + d_stop) or d_stop
  if s == e then
    stop = start
  end
  return start, math.max(stop, start), touched
end

---@class handoff.LocatedHunk
---@field id integer
---@field call handoff.ReviewCall
---@field hunk handoff.ReviewHunk
---@field path string
---@field start integer 0-based, in the text now
---@field stop integer end excluded
---@field touched boolean
---@field agent string[] the lines the call wrote
---@field base string[] the lines before the call
---@field now string[] the lines there now

H.located_cache = {}

--- Every hunk of every call to `path`, found in `current` (its lines now), newest call first.
---@return handoff.LocatedHunk[]
local function locate_file(path, calls, current)
  local out = {}
  for i = #calls, 1, -1 do
    local call = calls[i]
    local after = lines_of_blob(call.after_file)
    local before = lines_of_blob(call.before_file)
    local regs = same(after, current) and {} or regions(after, current)
    for _, h in ipairs(call.hunks) do
      local s, e = h.after.start, h.after["end"]
      local start, stop, touched = map_range(regs, s, e)
      out[#out + 1] = {
        id = h.id,
        call = call,
        hunk = h,
        path = path,
        start = start,
        stop = stop,
        touched = touched,
        agent = vim.list_slice(after, s + 1, e),
        base = vim.list_slice(before, h.before.start + 1, h.before["end"]),
        now = vim.list_slice(current, start + 1, stop),
      }
    end
  end
  return out
end

--- The calls per file, files in the order of their first call; made again only when the
--- session's calls are new (`refresh`, `reset`), so each file's list is the same table until then.
H.grouped = {}
local function by_file()
  if H.grouped.calls ~= H.calls then
    local files, order = {}, {}
    for _, call in ipairs(H.calls) do
      local key = normalize(call.path)
      if not files[key] then
        files[key] = {}
        order[#order + 1] = key
      end
      table.insert(files[key], call)
    end
    H.grouped = { calls = H.calls, files = files, order = order }
  end
  return H.grouped.files, H.grouped.order
end

--- What the text of `path` is now, as a key that changes with it: its buffer's change count,
--- else the file's size and time of change on disk.
local function text_key(path, buf)
  if buf then
    return ("buf %d %d"):format(buf, api.nvim_buf_get_changedtick(buf))
  end
  local st = vim.uv.fs_stat(path)
  return st and ("disk %d %d.%d"):format(st.size, st.mtime.sec, st.mtime.nsec) or "gone"
end

--- The located hunks of one file (found again only when its text or its calls changed).
---@return handoff.LocatedHunk[]
local function locate(path, calls, find_buf)
  local buf = (find_buf or paths.buffer_index())(path)
  local key = text_key(path, buf)
  local c = H.located_cache[path]
  if c and c.key == key and c.calls == calls then
    return c.list
  end
  local current = buf and api.nvim_buf_get_lines(buf, 0, -1, false) or changes.current_lines(path)
  local list = locate_file(path, calls, current)
  H.located_cache[path] = { key = key, calls = calls, list = list }
  return list
end

--- Every hunk of the session, found in the text now: files in the order they were first
--- changed, each top to bottom.
---@return handoff.LocatedHunk[]
function M.located()
  local files, order = by_file()
  local find_buf = paths.buffer_index()
  local out = {}
  for _, path in ipairs(order) do
    local list = vim.list_extend({}, locate(path, files[path], find_buf))
    table.sort(list, function(a, b)
      if a.start ~= b.start then
        return a.start < b.start
      end
      return a.id < b.id
    end)
    vim.list_extend(out, list)
  end
  return out
end

--- `require("handoff").hunks()`: `{ id, file, lnum, end_lnum, state, tool, call_id }` each.
function M.hunks()
  local out = {}
  for _, l in ipairs(M.located()) do
    local lnum = l.stop > l.start and l.start + 1 or math.max(l.start, 1)
    out[#out + 1] = {
      id = l.id,
      file = l.path,
      lnum = lnum,
      end_lnum = math.max(l.stop, lnum),
      state = l.hunk.state,
      tool = l.call.tool,
      call_id = l.call.call_id,
      conflict = H.conflicts[l.id] or nil,
    }
  end
  return out
end

-- Drawing -------------------------------------------------------------------------------------

local function draw_buffer(buf, list)
  api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  if not M.enabled() then
    return
  end
  local count = api.nvim_buf_line_count(buf)
  for _, l in ipairs(list) do
    if l.hunk.state == "pending" then
      local conflict = H.conflicts[l.id]
      if l.stop > l.start then
        local kind = #l.base == 0 and "Add" or "Change"
        api.nvim_buf_set_extmark(buf, M.ns, math.min(l.start, count - 1), 0, {
          end_row = math.min(l.stop - 1, count - 1),
          sign_text = conflict and "!" or "┃",
          sign_hl_group = conflict and "HandoffHunkConflict" or ("HandoffHunk" .. kind),
          line_hl_group = conflict and "HandoffHunkConflictLine" or ("HandoffHunk" .. kind .. "Line"),
          priority = 20,
        })
      else
        local row = math.max(math.min(l.start - 1, count - 1), 0)
        api.nvim_buf_set_extmark(buf, M.ns, row, 0, {
          sign_text = "▁",
          sign_hl_group = "HandoffHunkDelete",
          priority = 20,
        })
      end
    end
  end
end

--- Draws the pending hunks of every loaded buffer that has some, or of `only` (a change of its
--- text moves none of the other buffers' hunks).
---@param only? integer
function M.draw(only)
  local find_buf = paths.buffer_index()
  for path, calls in pairs(by_file()) do
    local buf = find_buf(path)
    if buf and (only == nil or buf == only) then
      draw_buffer(buf, locate(path, calls, find_buf))
      M.attach(buf)
    end
  end
end

-- Undo: an action is applied while its undo state is on the buffer's current branch ------------

local function undo_applied(buf, seq)
  local tree = vim.fn.undotree(buf)
  if seq > tree.seq_cur then
    return false
  end
  for _, entry in ipairs(tree.entries) do
    if entry.seq == seq then
      return true
    end
  end
  return false
end

local function decide(list)
  if #list == 0 then
    return
  end
  local host = require("handoff.host")
  local ok, answer = host.try_request("review_decide", list)
  if not ok then
    notify("the review's states could not be kept: " .. tostring(answer), vim.log.levels.WARN)
  end
end

local function set_local(id, state, edited, reason)
  for _, call in ipairs(H.calls) do
    for _, h in ipairs(call.hunks) do
      if h.id == id then
        h.state, h.edited, h.reason = state, edited or false, reason
      end
    end
  end
end

--- Brings each action's state in line with the buffer's undo state (after `u`, `<C-r>`, …).
function M.sync_undo(buf)
  local list = H.actions[buf]
  if not list or not api.nvim_buf_is_valid(buf) then
    return
  end
  local decisions = {}
  for _, a in ipairs(list) do
    local now = undo_applied(buf, a.seq)
    if now ~= a.applied then
      a.applied = now
      for _, id in ipairs(a.ids) do
        local state, edited, reason
        if now then
          state, edited, reason = a.state, a.edited[id] or false, a.reason
        else
          state, edited = a.prev[id].state, a.prev[id].edited
        end
        set_local(id, state, edited, reason)
        decisions[#decisions + 1] = { id = id, state = state, edited = edited, reason = reason }
      end
    end
  end
  if #decisions > 0 then
    decide(decisions)
    fire({ ids = vim.tbl_map(function(d) return d.id end, decisions), reason = "undo" })
  end
end

H.pending_redraw = {}

--- Buffers with hunks follow their text: redraw (and sync with undo) after each change.
function M.attach(buf)
  if H.attached[buf] then
    return
  end
  H.attached[buf] = true
  api.nvim_buf_attach(buf, false, {
    on_lines = function()
      if not H.attached[buf] then
        return true
      end
      if H.pending_redraw[buf] then
        return
      end
      H.pending_redraw[buf] = true
      vim.schedule(function()
        H.pending_redraw[buf] = nil
        if api.nvim_buf_is_valid(buf) then
          M.safely(M.sync_undo, buf)
          M.safely(M.draw, buf)
        end
      end)
    end,
    on_detach = function()
      H.attached[buf] = nil
      H.actions[buf] = nil
    end,
  })
  require("handoff.keymaps").review_buffer(buf)
end

-- Acting ----------------------------------------------------------------------------------------

--- The buffer of `path`, loaded when it is not (the action goes through a real buffer).
local function buffer_for(path)
  local buf = paths.buffer_of(path)
  if buf then
    return buf
  end
  buf = vim.fn.bufadd(path)
  vim.fn.bufload(buf)
  return buf
end

--- What rejecting `l` puts in place of its lines now (nil and why: a conflict).
---@param l handoff.LocatedHunk
---@return string[]? lines, string? why
function M.rejected_lines(l)
  if same(l.now, l.agent) then
    return l.base
  end
  if #l.base == 0 then
    -- An added block: the agent's lines go, the lines the user typed among them stay.
    local keep = {}
    local user = {}
    for _, r in ipairs(regions(l.agent, l.now)) do
      for i = r[3], r[4] - 1 do
        user[i] = true
      end
    end
    for i, line in ipairs(l.now) do
      if user[i - 1] then
        keep[#keep + 1] = line
      end
    end
    return keep
  end
  return nil, "its lines changed since the agent wrote them (by you or a later call)"
end

--- Runs `fn` as one undo block of `buf`, writes the buffer when it had no unsaved changes
--- before, and returns the undo state it made.
local function in_undo_block(buf, fn)
  local was_modified = vim.bo[buf].modified
  api.nvim_buf_call(buf, function()
    -- Setting 'undolevels' to itself closes the undo block: the action is a block of its own.
    vim.cmd("let &l:undolevels = &l:undolevels")
    fn()
    vim.cmd("let &l:undolevels = &l:undolevels")
    if not was_modified then
      vim.cmd("silent keepalt write")
    end
  end)
  return vim.fn.undotree(buf).seq_cur
end

--- The ids of `what` (an id, a list of ids, or nil: the pending hunk under the cursor, or the
--- Visual selection's lines inside it).
local function resolve(what, range)
  if type(what) == "number" then
    return { what }
  end
  if type(what) == "table" then
    return what
  end
  local buf = api.nvim_get_current_buf()
  local path = normalize(api.nvim_buf_get_name(buf))
  local row = range and range[1] or api.nvim_win_get_cursor(0)[1]
  local last = range and range[2] or row
  local calls = by_file()[path]
  local found
  for _, l in ipairs(calls and locate(path, calls) or {}) do
    -- The newest hunk wins (a later call's lines over an earlier one's).
    if l.hunk.state == "pending" then
      local first, stop = l.start + 1, math.max(l.stop, l.start + 1)
      if l.stop == l.start then
        first, stop = math.max(l.start, 1), math.max(l.start, 1)
      end
      if row >= first and row <= stop and (not found or l.id > found.id) then
        found = l
      end
    end
  end
  if not found then
    return {}
  end
  if range and found.stop > found.start and not found.touched then
    local i = math.max(range[1] - 1, found.start) - found.start
    local j = math.min(last - 1, found.stop - 1) - found.start
    local n_agent = found.stop - found.start
    if i > 0 or j < n_agent - 1 then
      local ids = M.split(found, i, j)
      return ids and { ids } or {}
    end
  end
  return { found.id }
end

--- Cuts `l` in up to three parts around its agent lines `i..j` (0-based, within it); returns
--- the id of the part `i..j`.
--- Where agent lines `i..j` (0-based, within a hunk of base lines `bs..be` and agent lines
--- `as..ae`) cut its base: the base lines `b1..b2` that go with them (line for line, the rest
--- of the base with the last selected line). The recorded review and the one before the write
--- cut hunks alike.
local function cut(bs, be, as, ae, i, j)
  local nb, na = be - bs, ae - as
  local b1 = bs + math.min(i, nb)
  local b2 = (j == na - 1) and be or bs + math.min(j + 1, nb)
  return b1, b2
end

function M.split(l, i, j)
  local h = l.hunk
  local bs, be, as, ae = h.before.start, h.before["end"], h.after.start, h.after["end"]
  local b1, b2 = cut(bs, be, as, ae, i, j)
  local parts, sel = {}, nil
  local function part(b_from, b_to, a_from, a_to, selected)
    if b_from == b_to and a_from == a_to then
      return
    end
    parts[#parts + 1] = { { start = b_from, ["end"] = b_to }, { start = a_from, ["end"] = a_to } }
    if selected then
      sel = #parts
    end
  end
  part(bs, b1, as, as + i)
  part(b1, b2, as + i, as + j + 1, true)
  part(b2, be, as + j + 1, ae)
  local ok, ids = require("handoff.host").try_request("review_split", { id = h.id, parts = parts })
  if not ok or type(ids) ~= "table" then
    notify("the hunk could not be cut at the selection: " .. tostring(ids), vim.log.levels.WARN)
    return nil
  end
  M.refresh({ quiet = true })
  return ids[sel]
end

-- A reject while the agent runs ------------------------------------------------------------

--- The running batch of tool calls (the host's `tool_batch`): the files its edits and writes
--- change (a set), and whether a call may change any file (a command, an MCP tool); nil when
--- none runs. `tool_running`: a call of it is running now (between `tool_start` and `tool_end`).
H.batch, H.tool_running = nil, false
--- Rejects held until the running call ends: `{ ids, reason }` each.
H.held = {}

--- Whether a reject of `path` must wait for the running call to end: reverting lines under a
--- running tool would have it build on lines that are no longer there.
local function must_wait(path)
  return H.tool_running and H.batch ~= nil and (H.batch.any_file or H.batch.files[normalize(path)] == true)
end

local act

--- Applies the rejects held for the running call (a tool boundary, or the run's end).
local function release()
  if #H.held == 0 then
    return
  end
  local list = H.held
  H.held = {}
  vim.schedule(function()
    for _, h in ipairs(list) do
      M.safely(act, "rejected", h.ids, h.reason)
    end
  end)
end

--- The host's `tool_batch`: a batch starts (its files) or ends.
function M.on_batch(r)
  if r.running then
    local files = {}
    for _, f in ipairs(r.files or {}) do
      files[normalize(f)] = true
    end
    H.batch = { files = files, any_file = r.any_file == true }
  else
    H.batch, H.tool_running = nil, false
    release()
  end
end

--- A tool call starts (`true`) or ends: an end is a tool boundary.
function M.on_tool(running)
  H.tool_running = running
  if not running then
    release()
  end
end

--- Hunk ids whose reject is held now (for the API and the tests).
function M.held()
  local out = {}
  for _, h in ipairs(H.held) do
    vim.list_extend(out, h.ids)
  end
  return out
end

--- Keeps or rejects the hunks `ids`: one undo block per buffer.
function act(state, ids, reason)
  local wanted = {}
  for _, id in ipairs(ids) do
    wanted[id] = true
  end
  local per_buf, order = {}, {}
  for _, l in ipairs(M.located()) do
    if wanted[l.id] and l.hunk.state == "pending" then
      if not per_buf[l.path] then
        per_buf[l.path] = {}
        order[#order + 1] = l.path
      end
      table.insert(per_buf[l.path], l)
    end
  end
  local done, conflicts = {}, {}
  local decisions = {}
  for _, path in ipairs(order) do
    local list = per_buf[path]
    if state == "rejected" and must_wait(path) then
      local waiting = vim.tbl_map(function(l)
        return l.id
      end, list)
      H.held[#H.held + 1] = { ids = waiting, reason = reason }
      notify(("%s: the reject waits for the running tool call to end"):format(vim.fn.fnamemodify(path, ":~:.")))
      fire({ ids = waiting, held = true })
      list = {}
    end
    -- Bottom to top, so each change leaves the rows of the others where they are.
    table.sort(list, function(a, b)
      return a.start > b.start
    end)
    local buf = buffer_for(path)
    local plan, edited, prev, acted = {}, {}, {}, {}
    for _, l in ipairs(list) do
      if state == "rejected" then
        local lines, why = M.rejected_lines(l)
        if lines then
          plan[#plan + 1] = { l = l, lines = lines }
        else
          H.conflicts[l.id] = true
          conflicts[#conflicts + 1] = ("%s line %d: %s"):format(vim.fn.fnamemodify(path, ":~:."), l.start + 1, why)
        end
      else
        plan[#plan + 1] = { l = l }
        edited[l.id] = not same(l.now, l.agent)
      end
    end
    if #plan > 0 then
      local seq = in_undo_block(buf, function()
        for _, p in ipairs(plan) do
          if p.lines then
            api.nvim_buf_set_lines(buf, p.l.start, p.l.stop, false, p.lines)
          else
            -- A keep changes no text: a line set to itself is its undo block.
            local row = math.min(p.l.start, math.max(api.nvim_buf_line_count(buf) - 1, 0))
            local line = api.nvim_buf_get_lines(buf, row, row + 1, false)
            api.nvim_buf_set_lines(buf, row, row + 1, false, line)
          end
        end
      end)
      for _, p in ipairs(plan) do
        local id = p.l.id
        prev[id] = { state = p.l.hunk.state, edited = p.l.hunk.edited or false }
        acted[#acted + 1] = id
        H.conflicts[id] = nil
        set_local(id, state, edited[id], reason)
        decisions[#decisions + 1] = { id = id, state = state, reason = reason, edited = edited[id] or false }
        done[#done + 1] = id
      end
      H.actions[buf] = H.actions[buf] or {}
      table.insert(H.actions[buf], { seq = seq, ids = acted, state = state, reason = reason, edited = edited, prev = prev, applied = true })
      M.attach(buf)
    end
  end
  decide(decisions)
  for _, c in ipairs(conflicts) do
    notify("not rejected, a conflict: " .. c .. "; edit the lines by hand, then keep the hunk", vim.log.levels.WARN)
  end
  if #done > 0 then
    fire({ ids = done, state = state })
  end
  M.draw()
  return done
end

-- Before it is written (`changes.review = "before"`) -------------------------------------------

--- The approvals under review: buffer → `{ r, base, agent, regs, kept, final_newline }`
--- (`regs`: the change's hunks, base → agent).
H.proposals = {}

function M.before_mode()
  return config.options.changes.review == "before"
end

--- The hunks of proposal `p` found in the text of its buffer now, as `locate_file` finds a
--- call's: `{ id, start, stop, touched, agent, base, now, hunk = { state } }`.
local function proposal_hunks(buf, p)
  local current = api.nvim_buf_get_lines(buf, 0, -1, false)
  local regs = same(p.agent, current) and {} or regions(p.agent, current)
  local out = {}
  for idx, h in ipairs(p.regs) do
    local start, stop, touched = map_range(regs, h[3], h[4])
    local now = vim.list_slice(current, start + 1, stop)
    local base = vim.list_slice(p.base, h[1] + 1, h[2])
    local agent = vim.list_slice(p.agent, h[3] + 1, h[4])
    local state = p.kept[idx] and "kept" or "pending"
    if touched and same(now, base) and not same(base, agent) then
      state = "rejected"
    end
    out[#out + 1] = { id = idx, start = start, stop = stop, touched = touched, agent = agent, base = base, now = now, h = h, hunk = { state = state } }
  end
  return out
end

local function draw_proposal(buf)
  local p = H.proposals[buf]
  if p and api.nvim_buf_is_valid(buf) then
    draw_buffer(buf, proposal_hunks(buf, p))
  end
end

--- The pending hunk of the proposal under the cursor (or at `row`).
local function proposal_hunk_at(buf, row)
  for _, l in ipairs(proposal_hunks(buf, H.proposals[buf])) do
    if l.hunk.state ~= "rejected" then
      local first, last = l.start + 1, math.max(l.stop, l.start + 1)
      if l.stop == l.start then
        first, last = math.max(l.start, 1), math.max(l.start, 1)
      end
      if row >= first and row <= last then
        return l
      end
    end
  end
end

--- Keeps or rejects in a proposal: the hunk under the cursor, the lines of `range` inside it,
--- or every hunk (`all`). A reject puts the base lines back in the buffer (one undo block:
--- `u` brings the agent's lines back); a keep only marks the hunk.
local function proposal_act(buf, state, range, all)
  local p = H.proposals[buf]
  local list
  if all then
    list = vim.tbl_filter(function(l)
      return l.hunk.state == "pending"
    end, proposal_hunks(buf, p))
  else
    local row = range and range[1] or api.nvim_win_get_cursor(0)[1]
    list = { proposal_hunk_at(buf, row) }
  end
  table.sort(list, function(a, b)
    return a.start > b.start
  end)
  local done = {}
  for _, l in ipairs(list) do
    if state == "kept" then
      p.kept[l.id] = true
    elseif l.touched and not same(l.now, l.agent) then
      notify("not rejected, a conflict: you changed these lines; edit them by hand", vim.log.levels.WARN)
    else
      local from, to, lines = l.start, l.stop, l.base
      if range and l.stop > l.start then
        local i = math.max(range[1] - 1, l.start) - l.start
        local j = math.min(range[2] - 1, l.stop - 1) - l.start
        local h = l.h
        local b1, b2 = cut(h[1], h[2], h[3], h[4], i, j)
        from, to, lines = l.start + i, l.start + j + 1, vim.list_slice(p.base, b1 + 1, b2)
      end
      api.nvim_buf_set_lines(buf, from, to, false, lines)
    end
    done[#done + 1] = l.id
  end
  draw_proposal(buf)
  if #done > 0 then
    fire({ proposal = p.r.id, ids = done, state = state })
  end
  return done
end

--- Allows the reviewed call with the proposal buffer's text (hunks still pending are written
--- as the agent wrote them) and closes the buffer.
function M.approve_proposal(buf)
  buf = buf or api.nvim_get_current_buf()
  local p = H.proposals[buf]
  if not p then
    return false
  end
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  -- The file's line endings, as the agent's version has them.
  local eol = (p.r.after or ""):find("\r\n", 1, true) and "\r\n" or "\n"
  local text = table.concat(lines, eol) .. ((#lines > 0 and p.final_newline) and eol or "")
  H.proposals[buf] = nil
  require("handoff.approvals").approve_reviewed(p.r.id, text)
  vim.bo[buf].modified = false
  if api.nvim_buf_is_valid(buf) then
    pcall(api.nvim_buf_delete, buf, { force = true })
  end
  return true
end

--- Opens the change an `edit` or `write` approval proposes (`r.before`, `r.after`) for review
--- hunk by hunk, in a new tab: a buffer holding the agent's version, its hunks drawn, the
--- review's keys; `:w` allows the call with what the buffer holds, the chat's answers still
--- work (allow: all of it; reject: none).
function M.open_proposal(r)
  if not (r.before or r.after) then
    return nil
  end
  local base, agent = changes.lines_of(r.before or ""), changes.lines_of(r.after or "")
  vim.cmd("tabnew")
  local buf = api.nvim_get_current_buf()
  vim.bo[buf].buftype = "acwrite"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  local levels = vim.bo[buf].undolevels
  vim.bo[buf].undolevels = -1
  api.nvim_buf_set_lines(buf, 0, -1, false, agent)
  vim.bo[buf].undolevels = levels
  vim.bo[buf].filetype = vim.filetype.match({ filename = r.path or "" }) or ""
  pcall(api.nvim_buf_set_name, buf, ("handoff://%s/review"):format(r.id))
  vim.bo[buf].modified = false
  H.proposals[buf] = {
    r = r,
    base = base,
    agent = agent,
    regs = regions(base, agent),
    kept = {},
    final_newline = (r.after or ""):sub(-1) == "\n",
  }
  api.nvim_create_autocmd("BufWriteCmd", {
    buffer = buf,
    callback = function()
      M.safely(M.approve_proposal, buf)
    end,
  })
  api.nvim_buf_attach(buf, false, {
    on_lines = function()
      if not H.proposals[buf] then
        return true
      end
      vim.schedule(function()
        draw_proposal(buf)
      end)
    end,
  })
  require("handoff.keymaps").review_buffer(buf)
  draw_proposal(buf)
  return buf
end

--- The approval `id` ended another way (answered in the chat, withdrawn): its review closes.
function M.close_proposal(id)
  for buf, p in pairs(H.proposals) do
    if p.r.id == id then
      H.proposals[buf] = nil
      if api.nvim_buf_is_valid(buf) then
        pcall(api.nvim_buf_delete, buf, { force = true })
      end
    end
  end
end

--- `require("handoff").keep(id_or_ids)`: keeps hunks (no id: the one under the cursor).
function M.keep(what, range)
  local buf = api.nvim_get_current_buf()
  if what == nil and H.proposals[buf] then
    return proposal_act(buf, "kept", range)
  end
  return act("kept", resolve(what, range))
end

--- `require("handoff").reject(id_or_ids, reason?)`: rejects hunks, their lines back to what
--- they were before their call (no id: the one under the cursor).
function M.reject(what, reason, range)
  local buf = api.nvim_get_current_buf()
  if what == nil and H.proposals[buf] then
    return proposal_act(buf, "rejected", range)
  end
  return act("rejected", resolve(what, range), reason)
end

local function pending_ids()
  local ids = {}
  for _, call in ipairs(H.calls) do
    for _, h in ipairs(call.hunks) do
      if h.state == "pending" then
        ids[#ids + 1] = h.id
      end
    end
  end
  return ids
end

function M.keep_all()
  local buf = api.nvim_get_current_buf()
  if H.proposals[buf] then
    return proposal_act(buf, "kept", nil, true)
  end
  return act("kept", pending_ids())
end

function M.reject_all(reason)
  local buf = api.nvim_get_current_buf()
  if H.proposals[buf] then
    return proposal_act(buf, "rejected", nil, true)
  end
  return act("rejected", pending_ids(), reason)
end

--- The next (or previous) pending hunk, across files; wraps around.
function M.jump(forward)
  local here_buf = api.nvim_get_current_buf()
  if H.proposals[here_buf] then
    -- In a review before the write: its own hunks, top to bottom.
    local rows = {}
    for _, l in ipairs(proposal_hunks(here_buf, H.proposals[here_buf])) do
      if l.hunk.state == "pending" then
        rows[#rows + 1] = math.max(l.stop > l.start and l.start + 1 or l.start, 1)
      end
    end
    table.sort(rows)
    local row = api.nvim_win_get_cursor(0)[1]
    local pick = forward and rows[1] or rows[#rows]
    for i = 1, #rows do
      local r = forward and rows[i] or rows[#rows + 1 - i]
      if (forward and r > row) or (not forward and r < row) then
        pick = r
        break
      end
    end
    if pick then
      api.nvim_win_set_cursor(0, { pick, 0 })
    end
    return pick ~= nil
  end
  local list = vim.tbl_filter(function(l)
    return l.hunk.state == "pending"
  end, M.located())
  if #list == 0 then
    notify("no pending hunks")
    return false
  end
  local here = normalize(api.nvim_buf_get_name(0))
  local row = api.nvim_win_get_cursor(0)[1]
  local files = {}
  for _, l in ipairs(list) do
    files[l.path] = files[l.path] or #vim.tbl_keys(files) + 1
  end
  local function key(path, line)
    return (files[path] or 0) * 1e9 + line
  end
  local cur = key(here, row)
  local pick
  if forward then
    for _, l in ipairs(list) do
      if key(l.path, l.start + 1) > cur then
        pick = l
        break
      end
    end
    pick = pick or list[1]
  else
    for i = #list, 1, -1 do
      if key(list[i].path, list[i].start + 1) < cur then
        pick = list[i]
        break
      end
    end
    pick = pick or list[#list]
  end
  if normalize(api.nvim_buf_get_name(0)) ~= pick.path then
    vim.cmd("edit " .. vim.fn.fnameescape(pick.path))
  end
  local count = api.nvim_buf_line_count(0)
  api.nvim_win_set_cursor(0, { math.min(math.max(pick.start + 1, 1), count), 0 })
  return true
end

--- `:HandoffReview`: every pending hunk in the quickfix list (the host started first when it
--- is not running: the list is filled once its session is open).
function M.quickfix()
  local host = require("handoff.host")
  if not require("handoff.state").chan then
    host.ensure()
    host.when_ready(M.quickfix)
    return nil
  end
  M.refresh({ quiet = true })
  local items = {}
  for _, l in ipairs(M.located()) do
    if l.hunk.state == "pending" then
      local what = changes.hunk_text(#l.base, l.agent)
      items[#items + 1] = {
        filename = l.path,
        lnum = math.max(l.stop > l.start and l.start + 1 or l.start, 1),
        col = 1,
        text = ("[%s %s] %s%s"):format(l.call.tool, l.call.call_id, H.conflicts[l.id] and "(conflict) " or "", what),
        user_data = { handoff_hunk = l.id },
      }
    end
  end
  vim.fn.setqflist({}, " ", { title = "handoff.nvim: pending hunks", items = items })
  if #items == 0 then
    notify("no pending hunks")
    return items
  end
  vim.cmd("botright copen")
  return items
end

--- A file opened after its hunks came (`:edit`, a `:HandoffReview` item, `]h` into another
--- file) is drawn as it loads, and gets the review's keys (`setup()` calls this).
function M.setup()
  api.nvim_create_autocmd("BufReadPost", {
    group = api.nvim_create_augroup("handoff_review", { clear = true }),
    desc = "handoff.nvim: draw the hunks of the agent's changes in a file as it loads",
    callback = function(ev)
      if #H.calls > 0 then
        M.safely(M.draw, ev.buf)
      end
    end,
  })
end

--- Reads the session's review from the host and redraws.
---@param opts? { quiet?: boolean }
function M.refresh(opts)
  local host = require("handoff.host")
  local ok, review, failure = host.try_request("review")
  if not ok then
    if failure and failure.kind == "not_ready" then
      host.when_ready(function()
        M.refresh(opts)
      end)
    end
    return
  end
  H.calls = review.calls or {}
  H.located_cache = {}
  M.draw()
  if not (opts and opts.quiet) then
    fire({ reason = "refresh" })
  end
end

--- A call the host just recorded (its `hunks` record): added to the calls without asking the
--- host, and its file's buffer drawn. A refresh that ran between the record's sending and now
--- has it already (one call per entry and file).
---@param call handoff.ReviewCall
function M.add_call(call)
  for _, c in ipairs(H.calls) do
    if c.entry_id == call.entry_id and c.path == call.path then
      return
    end
  end
  H.calls = vim.list_extend(vim.list_slice(H.calls), { call })
  local path = normalize(call.path)
  H.located_cache[path] = nil
  local buf = paths.buffer_index()(path)
  if buf then
    M.draw(buf)
  end
  fire({ reason = "refresh" })
end

--- Runs `fn`; an error is a notice, never an error message that stops the editor for Enter.
function M.safely(fn, ...)
  local ok, err = pcall(fn, ...)
  if not ok then
    notify("the review failed: " .. tostring(err), vim.log.levels.ERROR)
  end
end

--- A session is open (a start, a switch, a resume, a handoff): its own review, drawn.
function M.on_session()
  M.safely(function()
    M.reset()
    M.refresh()
  end)
end

--- A new session (switch, resume, handoff): its own review.
function M.reset()
  H.calls, H.conflicts, H.located_cache = {}, {}, {}
  -- Rejects held for the old session's running call are its own.
  H.held, H.batch, H.tool_running = {}, nil, false
  for buf in pairs(H.actions) do
    H.actions[buf] = nil
  end
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_valid(buf) then
      api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
    end
  end
end

return M
