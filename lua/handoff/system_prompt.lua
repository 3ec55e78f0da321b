--- `:HandoffContext`: the system prompt exactly as the session's requests send it (our words or
--- `system_prompt`, `append_system_prompt`, the instruction files, the skills, the date and the
--- working directory), in a scratch markdown buffer `handoff://system-prompt.md`.
local host = require("handoff.host")

local M = {}

local api = vim.api

M.name = "handoff://system-prompt.md"

--- The buffer, made on first use and refilled on each call.
local function buffer()
  local buf = vim.fn.bufnr(M.name)
  if buf == -1 or not api.nvim_buf_is_valid(buf) then
    buf = api.nvim_create_buf(false, true)
    api.nvim_buf_set_name(buf, M.name)
    vim.bo[buf].buftype = "nofile"
    vim.bo[buf].bufhidden = "hide"
    vim.bo[buf].swapfile = false
    vim.bo[buf].filetype = "markdown"
  end
  return buf
end

--- Asks the host for the prompt and shows it in a split (or the window already showing it).
--- While the session loads, asks again when it is open (a few times). Returns the buffer, or
--- nil when the host could not answer yet (it said why).
function M.show(attempt)
  attempt = attempt or 1
  local info, failure = host.request("system_prompt")
  if failure and failure.kind == "not_ready" and attempt < 20 then
    vim.defer_fn(function()
      M.show(attempt + 1)
    end, 100)
    return nil
  end
  if type(info) ~= "table" then
    return nil
  end
  local buf = buffer()
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(info.text, "\n", { plain = true }))
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  local win = vim.fn.win_findbuf(buf)[1]
  if win then
    api.nvim_set_current_win(win)
  else
    vim.cmd("split")
    api.nvim_win_set_buf(0, buf)
  end
  return buf
end

return M
