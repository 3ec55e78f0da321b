--- The chat's live text: the reply as it streams, tool calls and their running output,
--- approvals and notices, appended to what `chat.render` drew.
local state = require("handoff.state")
local buffer = require("handoff.chat.buffer")
local folds = require("handoff.chat.folds")
local lines_of = require("handoff.chat.lines")

local M = {}

--- The module's state, private (mini.nvim's `H`).
local H = {}

local api = vim.api
local ns = buffer.ns
local ui = state.ui
local chat_buf, edit, append_lines, valid = buffer.chat_buf, buffer.edit, buffer.append_lines, buffer.valid

--- Rows of the output block of the tool running now (it is replaced as output arrives).
H.live = nil

--- A tool starts: its line, and room for its output.
function M.tool_start(r)
  M.close_stream()
  append_lines({ lines_of.call_line(r.tool, r.summary) })
  H.live = { id = r.id, tool = r.tool, start = api.nvim_buf_line_count(chat_buf()) }
end

local function replace_live(lines)
  edit(function(buf)
    api.nvim_buf_set_lines(buf, H.live.start, -1, false, lines)
  end)
end

--- The end of the running tool's output so far (each update replaces the last).
function M.tool_update(r)
  if H.live and H.live.id == r.id and H.live.start <= api.nvim_buf_line_count(chat_buf()) then
    replace_live(lines_of.result_lines(H.live.tool, r.tail, false, true, r.earlier))
  end
end

--- A tool call ended: its result replaces the live output (or follows the call's line).
function M.tool_end(r)
  local lines = lines_of.result_lines(r.tool, r.text, r.is_error, false, r.earlier)
  if r.sandbox then
    -- How the command ran: in the sandbox, or again outside it after the user allowed that.
    table.insert(lines, "*" .. r.sandbox .. "*")
  end
  table.insert(lines, "")
  if H.live and H.live.id == r.id and H.live.start <= api.nvim_buf_line_count(chat_buf()) then
    replace_live(lines)
    if r.is_error then
      edit(function(buf)
        api.nvim_buf_set_extmark(buf, ns, H.live.start, 0, { line_hl_group = "HandoffError" })
      end)
    end
  else
    append_lines({ lines_of.call_line(r.tool, "") })
    append_lines(lines)
  end
  H.live = nil
end

--- A tool call waiting for the user: what it will do and the keys that answer; `r.row` is the
--- row where it starts (the keys act on the request the cursor is in).
function M.append_approval(r)
  M.close_stream()
  r.row = buffer.next_row(chat_buf())
  local lines = require("handoff.approvals").lines(r)
  table.insert(lines, "")
  append_lines(lines)
  edit(function(buf)
    api.nvim_buf_set_extmark(buf, ns, r.row, 0, { line_hl_group = "HandoffApproval" })
  end)
end

--- A finished item (a user prompt as it starts).
function M.append_item(item)
  M.close_stream()
  local lines, thinking = lines_of.item_lines(item)
  if lines then
    folds.add_thinking(thinking, buffer.next_row(chat_buf()))
    append_lines(lines)
    if thinking then
      folds.fold_range(ui.thinking[#ui.thinking])
    end
  end
end

function M.begin_assistant(item)
  M.close_stream()
  append_lines({ "## Assistant" .. (item.model and (" · " .. item.model) or ""), "", "" })
  ui.stream = "fresh" -- the last line is empty and takes the first delta
end

--- Appends streamed text to the last line (thinking is shown as a quote, folded).
function M.append_text(text, thinking)
  if not text or text == "" then
    return
  end
  local want = thinking and "thinking" or "text"
  -- Thinking that goes on: its fold is made again with its new rows, open where it was open.
  local open = thinking and ui.stream == "thinking" and ui.thinking[#ui.thinking] and folds.open_states(ui.thinking[#ui.thinking])
  edit(function(buf)
    local n = api.nvim_buf_line_count(buf)
    if ui.stream ~= want then
      if ui.stream == "fresh" then
        if thinking then
          table.insert(ui.thinking, { n - 1, n - 1 })
          api.nvim_buf_set_lines(buf, n - 1, n, false, { "> " })
        end
      else
        -- A blank line between thinking and text (or after anything else).
        if thinking then
          table.insert(ui.thinking, { n + 1, n + 1 })
        end
        api.nvim_buf_set_lines(buf, n, n, false, { "", thinking and "> " or "" })
        n = api.nvim_buf_line_count(buf)
      end
      ui.stream = want
    end
    local last = api.nvim_buf_get_lines(buf, n - 1, n, false)[1]
    local pieces = lines_of.split(text)
    pieces[1] = last .. pieces[1]
    if thinking then
      for i = 2, #pieces do
        pieces[i] = "> " .. pieces[i]
      end
      ui.thinking[#ui.thinking][2] = n - 1 + #pieces - 1
    end
    api.nvim_buf_set_lines(buf, n - 1, n, false, pieces)
  end)
  if thinking then
    folds.fold_range(ui.thinking[#ui.thinking], open or nil)
  end
end

function M.end_assistant(r)
  ui.stream = nil
  local lines = {}
  if r.stop_reason == "error" then
    lines = { "", "**Error:** " .. (r.error_message or "the request failed") }
  elseif r.stop_reason == "aborted" then
    lines = { "", "*(stopped)*" }
  end
  if #lines > 0 then
    append_lines(lines, r.stop_reason == "error" and "HandoffError" or nil)
  end
  -- The usage goes under the message's last line, as when the transcript is drawn.
  local usage = lines_of.usage_text(r)
  if usage then
    buffer.usage_mark(chat_buf(), api.nvim_buf_line_count(chat_buf()) - 1, usage)
  end
  append_lines({ "" })
end

function M.close_stream()
  if ui.stream then
    ui.stream = nil
    append_lines({ "" })
  end
end

--- A line from the editor or the host's controller, shown distinctly.
function M.append_notice(message)
  M.close_stream()
  append_lines({ "*" .. message .. "*", "" })
end

--- Keeps windows that showed the end of the chat at the end.
function M.follow(force)
  if not valid(ui.chat_buf) then
    return
  end
  local last = api.nvim_buf_line_count(ui.chat_buf)
  for _, win in ipairs(vim.fn.win_findbuf(ui.chat_buf)) do
    if force or win ~= api.nvim_get_current_win() then
      pcall(api.nvim_win_set_cursor, win, { last, 0 })
    end
  end
end

return M
