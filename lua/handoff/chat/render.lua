--- The chat's text drawn whole: a session's transcript rendered as markdown (also for
--- read-only sessions), with its highlights and the folds of its thinking. The streamed reply is
--- appended by `chat.stream`; the lines of each item come from `chat.lines`.
local config = require("handoff.config")
local state = require("handoff.state")
local buffer = require("handoff.chat.buffer")
local folds = require("handoff.chat.folds")
local lines_of = require("handoff.chat.lines")

local M = {}

local api = vim.api
local ns = buffer.ns
local ns_pins = api.nvim_create_namespace("handoff_pins")

local ui = state.ui

--- Lines of transcript items, the first at 0-based `row`, and the highlights to give them once
--- they are in the buffer (`M.decorate`); `marks.thinking` are the rows of the replies' thinking
--- (the chat folds them).
function M.build(items, row)
  local lines, marks = {}, { context = {}, usage = {}, thinking = {} }
  for _, item in ipairs(items) do
    local start = #lines
    local shows, thinking = lines_of.push_item(lines, item)
    if shows then
      local first = row + start
      if thinking then
        marks.thinking[#marks.thinking + 1] = { first + thinking[1], first + thinking[2] }
      end
      if item.kind == "handoff" then
        marks.context[#marks.context + 1] = { first, row + #lines - 1 }
      elseif item.kind == "assistant" then
        local usage = lines_of.usage_text(item)
        if usage then
          -- Under its last line (the item ends with a blank one).
          marks.usage[#marks.usage + 1] = { row + #lines - 2, usage }
        end
      end
    end
  end
  return lines, marks
end

function M.decorate(buf, marks)
  for _, m in ipairs(marks.context) do
    api.nvim_buf_set_extmark(buf, ns, m[1], 0, { end_row = m[2], line_hl_group = "HandoffHandoffContext" })
  end
  for _, m in ipairs(marks.usage) do
    buffer.usage_mark(buf, m[1], m[2])
  end
end

--- Syncs the markdown syntax of `buf` as markdown's own syntax file says (from
--- `g:markdown_minlines`, 50, lines above the window), without the sync items of the HTML
--- syntax it includes: those (XML comments) made every redraw after a transcript is drawn
--- search and parse up to 200 lines above the window first, 10 ms of the first redraw, for
--- comments a chat does not have.
local function markdown_sync(buf)
  local minlines = tonumber(vim.g.markdown_minlines) or 50
  api.nvim_buf_call(buf, function()
    pcall(vim.cmd, ("syntax sync clear | syntax sync minlines=%d linebreaks=1"):format(minlines))
  end)
end

--- Makes `buf` a markdown buffer whose syntax redraws a long transcript cheaply.
function M.markdown(buf)
  vim.api.nvim_create_autocmd("Syntax", {
    buffer = buf,
    group = api.nvim_create_augroup("handoff_markdown_" .. buf, { clear = true }),
    callback = function(ev)
      if ev.match == "markdown" then
        markdown_sync(buf)
      end
    end,
  })
  vim.bo[buf].filetype = "markdown"
end

--- Removes the chat's highlights and virtual lines from `buf`.
function M.clear(buf)
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
end

--- Where a buffer names the session it was handed off from (`parent` key, `handoff.sessions`).
function M.set_parent(buf, path, row)
  vim.b[buf].handoff_parent_session = path or nil
  vim.b[buf].handoff_parent_row = (path and row) or nil
end

--- The user's pins under the chat's title, as virtual lines (they take no row of the buffer,
--- so the rows of the transcript do not move when a pin comes or goes).
function M.show_pins()
  local buf = ui.chat_buf
  if not (buf and api.nvim_buf_is_valid(buf)) then
    return
  end
  api.nvim_buf_clear_namespace(buf, ns_pins, 0, -1)
  local pins = state.pins or {}
  if #pins == 0 or api.nvim_buf_line_count(buf) == 0 then
    return
  end
  local virt = {}
  for i, pin in ipairs(pins) do
    local text = pin:gsub("\n", " ⏎ ")
    if vim.fn.strchars(text) > 120 then
      text = vim.fn.strcharpart(text, 0, 119) .. "…"
    end
    virt[i] = { { ("📌 %d. %s"):format(i, text), "HandoffFacts" } }
  end
  api.nvim_buf_set_extmark(buf, ns_pins, 0, 0, { virt_lines = virt })
end

--- Rebuilds the chat from a transcript (`items` of the host's `transcript`).
function M.render(items, info)
  ui.stream = nil
  buffer.edit(function(buf)
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    local lines, parent_row = lines_of.header_lines(info)
    M.set_parent(buf, info and info.parent_session, parent_row)
    ui.shown, ui.earlier_row = #items, nil
    -- How many more to ask for at a time: the host says (its page), else as many as now.
    ui.page = info and info.page or math.max(#items, 1)
    if info and (info.earlier or 0) > 0 then
      -- A long session opens on its latest part; the rest comes a page at a time.
      ui.earlier_row = #lines
      local key = config.options.keymaps.earlier
      table.insert(lines, ("*… %d earlier items not shown%s*"):format(
        info.earlier,
        key and (" — " .. key .. " on this line shows " .. math.min(info.earlier, ui.page) .. " more") or ""
      ))
      table.insert(lines, "")
    end
    local body, marks = M.build(items, #lines)
    vim.list_extend(lines, body)
    ui.thinking = marks.thinking
    api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    M.decorate(buf, marks)
  end)
  if info and info.pins then
    state.pins = info.pins
  end
  M.show_pins()
  for _, win in ipairs(folds.fold_windows()) do
    folds.fold_all(win)
  end
  require("handoff.chat.indicator").update()
  require("handoff.chat.stream").follow(true)
  -- A session drawn anew ends at the window's bottom: a window scrolled far down a longer one
  -- (before `/back`, a resume) would otherwise keep its top at the new last line and show
  -- nothing above it.
  for _, win in ipairs(vim.fn.win_findbuf(ui.chat_buf)) do
    api.nvim_win_call(win, function()
      vim.cmd("normal! zb")
    end)
  end
end

return M
