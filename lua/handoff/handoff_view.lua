--- The handoff document in a split: a markdown buffer named after the new session
--- (`handoff://<session file name>.md`). The same text is on disk beside the session
--- (`document_file`), so `:w` elsewhere is never needed to keep it.
local config = require("handoff.config")

local M = {}

local api = vim.api

--- Buffers of documents shown so far.
local bufs = {}

function M.buffers()
  local out = {}
  for _, b in ipairs(bufs) do
    if api.nvim_buf_is_valid(b) then
      table.insert(out, b)
    end
  end
  bufs = out
  return vim.deepcopy(out)
end

--- The buffer name for a session file.
function M.name(session_file)
  return "handoff://" .. vim.fn.fnamemodify(session_file, ":t:r") .. ".md"
end

--- Opens the document of a finished handoff (`outcome` of `handoff_end`) and returns its buffer.
function M.open(outcome)
  local name = M.name(outcome.session_file or "handoff")
  local buf = vim.fn.bufnr(name)
  if buf == -1 or not api.nvim_buf_is_valid(buf) then
    buf = api.nvim_create_buf(true, true)
    api.nvim_buf_set_name(buf, name)
    table.insert(bufs, buf)
  end
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(outcome.document or "", "\n", { plain = true }))
  vim.bo[buf].modified = false
  vim.bo[buf].filetype = "markdown"
  vim.bo[buf].swapfile = false
  vim.b[buf].handoff_document_file = outcome.document_file
  vim.b[buf].handoff_session_file = outcome.session_file
  -- Reuse a window that shows an earlier document; otherwise split, and keep the cursor where it was.
  for _, win in ipairs(api.nvim_list_wins()) do
    local b = api.nvim_win_get_buf(win)
    if vim.tbl_contains(bufs, b) then
      api.nvim_win_set_buf(win, buf)
      return buf
    end
  end
  local current = api.nvim_get_current_win()
  vim.cmd("botright split")
  api.nvim_win_set_buf(0, buf)
  api.nvim_win_set_height(0, config.options.layout.document_height or 15)
  vim.wo[0].wrap = true
  vim.wo[0].linebreak = true
  if api.nvim_win_is_valid(current) then
    api.nvim_set_current_win(current)
  end
  return buf
end

return M
