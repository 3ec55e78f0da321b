--- The chat: a markdown buffer showing the session and a prompt buffer to type in. This module
--- owns their creation and the user's actions on them; the text is drawn whole by `chat.render`
--- and appended live by `chat.stream` (each item's lines from `chat.lines`, the thinking's folds
--- by `chat.folds`), the windows placed by `chat.layout`, the "generating" line by `chat.indicator`. Their state lives
--- in `handoff.state` (`ui`), so every part reads one place.
local state = require("handoff.state")
local render = require("handoff.chat.render")
local stream = require("handoff.chat.stream")
local layout = require("handoff.chat.layout")
local indicator = require("handoff.chat.indicator")

local api = vim.api
local ui = state.ui

local M = {
  render = render.render,
  append_item = stream.append_item,
  begin_assistant = stream.begin_assistant,
  append_text = stream.append_text,
  end_assistant = stream.end_assistant,
  close_stream = stream.close_stream,
  append_notice = stream.append_notice,
  append_approval = stream.append_approval,
  tool_start = stream.tool_start,
  tool_update = stream.tool_update,
  tool_end = stream.tool_end,
  follow = stream.follow,
  indicator_text = indicator.text,
  indicator_update = indicator.update,
  is_open = layout.is_open,
  close = layout.close,
}

-- `chat_buf`, `prompt_buf` and `earlier_row` read the one UI state (for the API and tests).
setmetatable(M, {
  __index = function(_, key)
    if key == "chat_buf" or key == "prompt_buf" or key == "earlier_row" then
      return ui[key]
    end
  end,
})

local function valid(buf)
  return buf ~= nil and api.nvim_buf_is_valid(buf)
end

--- Creates the chat and prompt buffers (once); returns both.
---@return integer chat_buf, integer prompt_buf
function M.ensure_buffers()
  if not valid(ui.chat_buf) then
    require("handoff.highlights").define()
    local buf = api.nvim_create_buf(false, true)
    api.nvim_buf_set_name(buf, "handoff://chat")
    render.markdown(buf)
    vim.bo[buf].modifiable = false
    vim.bo[buf].swapfile = false
    vim.bo[buf].bufhidden = "hide"
    ui.chat_buf = buf
    require("handoff.keymaps").chat_buffer(buf)
  end
  if not valid(ui.prompt_buf) then
    local buf = api.nvim_create_buf(false, true)
    api.nvim_buf_set_name(buf, "handoff://prompt")
    vim.bo[buf].filetype = "handoff-prompt"
    vim.bo[buf].swapfile = false
    vim.bo[buf].bufhidden = "hide"
    ui.prompt_buf = buf
    require("handoff.keymaps").prompt_buffer(buf)
    require("handoff.commands").attach(buf)
  end
  return ui.chat_buf, ui.prompt_buf
end

--- Opens the chat (and the prompt under it); focuses the prompt.
function M.open()
  -- The buffer the user comes from is the one `#buffer` and friends read.
  require("handoff.context").remember(api.nvim_get_current_buf())
  local chat_buf, prompt_buf = M.ensure_buffers()
  local was_open = layout.is_open()
  layout.open(chat_buf, prompt_buf)
  if not was_open then
    stream.follow(true)
  end
end

function M.toggle()
  if layout.is_open() then
    layout.close()
  else
    M.open()
  end
end

--- Shows a page of earlier items when the cursor is on the "earlier items" line; returns
--- whether it was. The view stays on what was the first item shown.
function M.show_earlier_at_cursor()
  if not (valid(ui.chat_buf) and ui.earlier_row) or api.nvim_get_current_buf() ~= ui.chat_buf then
    return false
  end
  if api.nvim_win_get_cursor(0)[1] - 1 ~= ui.earlier_row then
    return false
  end
  local host = require("handoff.host")
  local below = api.nvim_buf_line_count(ui.chat_buf) - (ui.earlier_row + 2)
  local reply = host.request("transcript", ui.shown + ui.page)
  if reply then
    host.apply_transcript(reply)
    -- The `below` lines from the old first item on end the buffer as before.
    local row = api.nvim_buf_line_count(ui.chat_buf) - below + 1
    pcall(api.nvim_win_set_cursor, 0, { math.max(row, 1), 0 })
  end
  return true
end

--- Appends `lines` to the prompt (after what it holds, a blank line between) and puts the cursor
--- on a new empty line after them, in the prompt's window when one shows it.
---@param lines string[]
function M.add_to_prompt(lines)
  local _, buf = M.ensure_buffers()
  local have = api.nvim_buf_get_lines(buf, 0, -1, false)
  while #have > 0 and vim.trim(have[#have]) == "" do
    table.remove(have)
  end
  local new = vim.deepcopy(have)
  if #new > 0 then
    table.insert(new, "")
  end
  vim.list_extend(new, lines)
  table.insert(new, "")
  api.nvim_buf_set_lines(buf, 0, -1, false, new)
  local win = vim.fn.win_findbuf(buf)[1]
  if win then
    api.nvim_win_set_cursor(win, { #new, 0 })
  end
end

--- Sends what the prompt buffer holds (slash commands are handled first) and clears it.
function M.submit()
  local _, buf = M.ensure_buffers()
  local text = vim.trim(table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), "\n"))
  if text == "" then
    return
  end
  api.nvim_buf_set_lines(buf, 0, -1, false, {})
  require("handoff.commands").run(text)
end

return M
