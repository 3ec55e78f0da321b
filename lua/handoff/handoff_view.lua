--- The handoff document in a split: a markdown buffer that opens when the handoff starts, fills
--- as the model writes, and ends as the document of the new session
--- (`handoff://<session file name>.md`; the same text is on disk beside the session, so `:w` is
--- never needed to keep it). Its window's header (the 'winbar') says what is happening:
--- generating (elapsed time, tokens, `<Esc>` to cancel), or why it failed. On cancel it closes.
local config = require("handoff.config")

local M = {}

--- The module's state, private (mini.nvim's `H`).
local H = {}

local api = vim.api

--- Buffers of documents shown so far (the live one included).
H.bufs = {}

---@class handoff.LiveDocument
---@field buf integer
---@field win integer?  the split it was opened in
---@field origin integer?  the window the cursor was in when it opened
---@field earlier integer?  the earlier document its window showed before (back on cancel)

---@type handoff.LiveDocument?
H.live = nil

--- The buffer name for a session file.
function M.name(session_file)
  return "handoff://" .. vim.fn.fnamemodify(session_file, ":t:r") .. ".md"
end

--- The buffer of the document being generated, if any.
function M.live_buffer()
  return H.live and api.nvim_buf_is_valid(H.live.buf) and H.live.buf or nil
end

local function new_buffer(name, defer_filetype)
  local buf = api.nvim_create_buf(true, true)
  api.nvim_buf_set_name(buf, name)
  if defer_filetype then
    -- Loading markdown's ftplugin and syntax takes ~15 ms: after the handoff has started (and
    -- `<Esc>` cancels it), not before.
    vim.schedule(function()
      if api.nvim_buf_is_valid(buf) then
        vim.bo[buf].filetype = "markdown"
      end
    end)
  else
    vim.bo[buf].filetype = "markdown"
  end
  vim.bo[buf].swapfile = false
  vim.bo[buf].bufhidden = "hide"
  table.insert(H.bufs, buf)
  return buf
end

--- A window showing `buf`, else one showing an earlier document (reused), else a new split.
--- The cursor stays where it was.
local function show(buf)
  local wins = vim.fn.win_findbuf(buf)
  if wins[1] then
    return wins[1]
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    local earlier = api.nvim_win_get_buf(win)
    if vim.tbl_contains(H.bufs, earlier) then
      api.nvim_win_set_buf(win, buf)
      return win, earlier
    end
  end
  local current = api.nvim_get_current_win()
  vim.cmd("botright split")
  local win = api.nvim_get_current_win()
  api.nvim_win_set_buf(win, buf)
  api.nvim_win_set_height(win, config.options.layout.document_height)
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  if api.nvim_win_is_valid(current) then
    api.nvim_set_current_win(current)
  end
  return win
end

local function set_header(win, text, hl)
  if win and api.nvim_win_is_valid(win) then
    -- The winbar is a statusline expression: a literal `%` must be doubled.
    vim.wo[win].winbar = text and ("%#" .. hl .. "#" .. text:gsub("%%", "%%%%")) or ""
  end
end

local function live_win()
  if not M.live_buffer() then
    return nil
  end
  return vim.fn.win_findbuf(H.live.buf)[1]
end

--- Opens the split for a handoff that just started; returns its buffer.
function M.start()
  require("handoff.highlights").define()
  if H.live and api.nvim_buf_is_valid(H.live.buf) then
    pcall(api.nvim_buf_delete, H.live.buf, { force = true })
  end
  local name = "handoff://generating.md"
  local stale = vim.fn.bufnr(name)
  if stale ~= -1 then
    pcall(api.nvim_buf_delete, stale, { force = true })
  end
  local origin = api.nvim_get_current_win()
  local buf = new_buffer(name, true)
  vim.bo[buf].modifiable = false
  H.live = { buf = buf, origin = origin }
  H.live.win, H.live.earlier = show(buf)
  return buf
end

--- Shows the header of the live document (called with the indicator's text on every tick).
function M.header(text)
  set_header(live_win(), text, "HandoffDocumentHeader")
end

--- Appends streamed document text.
function M.append(text)
  local buf = M.live_buffer()
  if not buf or not text or text == "" then
    return
  end
  local n = api.nvim_buf_line_count(buf)
  local last = api.nvim_buf_get_lines(buf, n - 1, n, false)[1]
  local pieces = vim.split(text, "\n", { plain = true })
  pieces[1] = last .. pieces[1]
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, n - 1, n, false, pieces)
  vim.bo[buf].modifiable = false
  -- Windows not being read elsewhere follow the end of the text.
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if win ~= api.nvim_get_current_win() then
      pcall(api.nvim_win_set_cursor, win, { api.nvim_buf_line_count(buf), 0 })
    end
  end
end

local ns = api.nvim_create_namespace("handoff_document")

--- The document, and under it the facts the host appended, marked as machine-made.
local function fill(buf, outcome)
  vim.bo[buf].modifiable = true
  local lines = vim.split(outcome.document or "", "\n", { plain = true })
  local facts_at
  if outcome.facts and outcome.facts ~= "" then
    vim.list_extend(lines, { "", "---", "*Recorded by handoff.nvim from the session, not written by the model:*", "" })
    facts_at = #lines
    vim.list_extend(lines, vim.split(outcome.facts, "\n", { plain = true }))
  end
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  if facts_at then
    api.nvim_buf_set_extmark(buf, ns, facts_at - 2, 0, { end_row = #lines - 1, line_hl_group = "HandoffFacts" })
  end
  vim.bo[buf].modified = false
  vim.bo[buf].modifiable = false
  vim.b[buf].handoff_document_file = outcome.document_file
  vim.b[buf].handoff_session_file = outcome.session_file
end

--- A finished handoff (`outcome` of `handoff_end` with kind "done"): the live split becomes the
--- new session's document (or a split opens when there was none). Returns its buffer.
function M.open(outcome)
  require("handoff.highlights").define()
  local name = M.name(outcome.session_file or "handoff")
  local buf = M.live_buffer() or M.review_buffer()
  if buf then
    M.end_review(buf)
  end
  local existing = vim.fn.bufnr(name)
  if buf then
    if existing ~= -1 and existing ~= buf then
      pcall(api.nvim_buf_delete, existing, { force = true })
    end
    api.nvim_buf_set_name(buf, name)
  elseif existing ~= -1 and api.nvim_buf_is_valid(existing) then
    buf = existing
  else
    buf = new_buffer(name)
  end
  H.live = nil
  fill(buf, outcome)
  local win = show(buf)
  set_header(win, nil)
  pcall(api.nvim_win_set_cursor, win, { 1, 0 })
  return buf
end

-- Review mode ---------------------------------------------------------------------------------

H.review = nil

function M.review_buffer()
  return H.review and api.nvim_buf_is_valid(H.review.buf) and H.review.buf or nil
end

--- The review is over (committed, discarded or failed): the buffer is a plain view again.
function M.end_review(buf)
  if H.review and H.review.buf == buf then
    pcall(api.nvim_del_augroup_by_id, H.review.group)
    H.review = nil
    if api.nvim_buf_is_valid(buf) then
      vim.bo[buf].buftype = "nofile"
      vim.bo[buf].bufhidden = "hide"
    end
  end
end

--- A generated document waits for the user: the split becomes editable; `:w` starts the new
--- session with the text as written (facts included), quitting without writing discards it.
function M.review(outcome, ledger)
  require("handoff.highlights").define()
  local buf = M.live_buffer()
  H.live = nil
  if not buf then
    buf = new_buffer("handoff://review.md")
  else
    local stale = vim.fn.bufnr("handoff://review.md")
    if stale ~= -1 and stale ~= buf then
      pcall(api.nvim_buf_delete, stale, { force = true })
    end
    api.nvim_buf_set_name(buf, "handoff://review.md")
  end
  vim.bo[buf].modifiable = true
  vim.bo[buf].buftype = "acwrite"
  vim.bo[buf].bufhidden = "wipe"
  local text = outcome.text or ""
  api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, "\n", { plain = true }))
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  if outcome.facts_at then
    local row = #vim.split(text:sub(1, outcome.facts_at), "\n", { plain = true }) - 1
    api.nvim_buf_set_extmark(buf, ns, row, 0, {
      virt_lines = { { { "── recorded by handoff.nvim from the session (edit or keep) ──", "HandoffFacts" } } },
      virt_lines_above = true,
    })
  end
  if ledger then
    -- What this text carries and what it leaves behind, under it, before `:w` decides.
    local virt = { { { "", "" } } }
    for _, line in ipairs(require("handoff.chat.lines").ledger_lines(ledger)) do
      virt[#virt + 1] = { { line, "HandoffFacts" } }
    end
    api.nvim_buf_set_extmark(buf, ns, api.nvim_buf_line_count(buf) - 1, 0, { virt_lines = virt })
  end
  vim.bo[buf].modified = false
  local group = api.nvim_create_augroup("handoff_review_" .. buf, { clear = true })
  H.review = { buf = buf, group = group, committed = false }
  api.nvim_create_autocmd("BufWriteCmd", {
    group = group,
    buffer = buf,
    callback = function()
      local r = H.review
      if not r or r.buf ~= buf then
        return
      end
      r.committed = true
      vim.bo[buf].modified = false
      require("handoff.host").notify_running("handoff_commit", table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), "\n"))
    end,
  })
  api.nvim_create_autocmd("BufWipeout", {
    group = group,
    buffer = buf,
    callback = function()
      if H.review and H.review.buf == buf and not H.review.committed then
        H.review = nil
        require("handoff.host").notify_running("handoff_discard")
      end
    end,
  })
  local win = show(buf)
  set_header(win, "Review the handoff: :w starts the new session with this text · :q! discards it", "HandoffDocumentHeader")
  return buf
end

--- A discarded review: nothing was created; the split closes.
function M.discarded()
  local buf = M.review_buffer()
  if buf then
    M.end_review(buf)
    H.live = { buf = buf }
    M.cancel()
  end
end

--- A cancelled handoff: the split closes and its buffer goes.
function M.cancel()
  local buf = M.live_buffer()
  local earlier = H.live and H.live.earlier
  H.live = nil
  if not buf then
    return
  end
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if earlier and api.nvim_buf_is_valid(earlier) then
      -- The window showed an earlier document: it shows it again.
      api.nvim_win_set_buf(win, earlier)
      set_header(win, nil)
    elseif #api.nvim_list_wins() > 1 then
      pcall(api.nvim_win_close, win, true)
    end
  end
  pcall(api.nvim_buf_delete, buf, { force = true })
end

--- A failed handoff: the split stays with what was written and its header says why.
function M.fail(message)
  local buf = M.live_buffer()
  H.live = nil
  if not buf then
    return
  end
  set_header(vim.fn.win_findbuf(buf)[1], "Handoff failed: " .. (message or "unknown error"), "HandoffDocumentFailed")
  vim.b[buf].handoff_failed = message
end

return M
