--- The chat buffer's edits: every change of its text goes through `edit` (the buffer is
--- otherwise not modifiable), on the main loop, in the order the host's records arrive.
local M = {}

local api = vim.api

--- The namespace of the chat's highlights and virtual lines.
M.ns = api.nvim_create_namespace("handoff_chat")

function M.valid(buf)
  return buf ~= nil and api.nvim_buf_is_valid(buf)
end

--- The chat buffer, created on first use by `handoff.chat`.
function M.chat_buf()
  return (require("handoff.chat").ensure_buffers())
end

--- Runs `fn` with the chat buffer modifiable.
function M.edit(fn)
  local buf = M.chat_buf()
  vim.bo[buf].modifiable = true
  local ok, err = pcall(fn, buf)
  vim.bo[buf].modifiable = false
  if not ok then
    error(err, 0)
  end
end

--- The row the next appended line takes: 0 in an empty buffer (its one empty line is replaced).
function M.next_row(buf)
  local n = api.nvim_buf_line_count(buf)
  local empty = n == 1 and api.nvim_buf_get_lines(buf, 0, 1, false)[1] == ""
  return empty and 0 or n
end

--- Appends `lines` to the chat, each highlighted with `hl` when given.
function M.append_lines(lines, hl)
  M.edit(function(buf)
    local start = M.next_row(buf)
    api.nvim_buf_set_lines(buf, start, start == 0 and 1 or start, false, lines)
    if hl then
      for i = 0, #lines - 1 do
        api.nvim_buf_set_extmark(buf, M.ns, start + i, 0, { line_hl_group = hl })
      end
    end
  end)
end

--- Shows `text` as a virtual line under `row` (the usage footer of an assistant message).
function M.usage_mark(buf, row, text)
  api.nvim_buf_set_extmark(buf, M.ns, row, 0, { virt_lines = { { { text, "HandoffUsage" } } } })
end

return M
