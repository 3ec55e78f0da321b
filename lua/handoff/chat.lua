--- The chat: a markdown buffer showing the session, a prompt buffer to type in, and the
--- "generating" indicator. All edits of the chat buffer happen here, on the main loop, in the
--- order the host's records arrive.
local config = require("handoff.config")
local state = require("handoff.state")

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace("handoff_chat")
local ns_indicator = api.nvim_create_namespace("handoff_indicator")

---@type integer?
M.chat_buf = nil
---@type integer?
M.prompt_buf = nil

--- What is being streamed into the last line: nil, "fresh" (nothing yet), "text" or "thinking".
local stream = nil
local indicator_mark = nil
local timer = nil

local spinner = { "⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏" }

local function valid(buf)
  return buf ~= nil and api.nvim_buf_is_valid(buf)
end

local function set_hl()
  api.nvim_set_hl(0, "HandoffIndicator", { default = true, link = "Comment" })
  api.nvim_set_hl(0, "HandoffHandoffContext", { default = true, link = "DiffAdd" })
  api.nvim_set_hl(0, "HandoffNotice", { default = true, link = "Special" })
  api.nvim_set_hl(0, "HandoffError", { default = true, link = "ErrorMsg" })
end

--- Creates the chat and prompt buffers (once).
function M.ensure_buffers()
  if not valid(M.chat_buf) then
    set_hl()
    local buf = api.nvim_create_buf(false, true)
    api.nvim_buf_set_name(buf, "handoff://chat")
    vim.bo[buf].filetype = "markdown"
    vim.bo[buf].modifiable = false
    vim.bo[buf].swapfile = false
    vim.bo[buf].bufhidden = "hide"
    M.chat_buf = buf
    require("handoff.keymaps").chat_buffer(buf)
  end
  if not valid(M.prompt_buf) then
    local buf = api.nvim_create_buf(false, true)
    api.nvim_buf_set_name(buf, "handoff://prompt")
    vim.bo[buf].filetype = "handoff-prompt"
    vim.bo[buf].swapfile = false
    vim.bo[buf].bufhidden = "hide"
    M.prompt_buf = buf
    require("handoff.keymaps").prompt_buffer(buf)
    require("handoff.commands").attach(buf)
  end
  return M.chat_buf, M.prompt_buf
end

--- Runs `fn` with the chat buffer modifiable.
local function edit(fn)
  local buf = M.ensure_buffers()
  vim.bo[buf].modifiable = true
  local ok, err = pcall(fn, buf)
  vim.bo[buf].modifiable = false
  if not ok then
    error(err, 0)
  end
end

local function append_lines(lines, hl)
  edit(function(buf)
    local n = api.nvim_buf_line_count(buf)
    local empty = n == 1 and api.nvim_buf_get_lines(buf, 0, 1, false)[1] == ""
    local start = empty and 0 or n
    api.nvim_buf_set_lines(buf, start, empty and 1 or n, false, lines)
    if hl then
      for i = 0, #lines - 1 do
        api.nvim_buf_set_extmark(buf, ns, start + i, 0, { line_hl_group = hl })
      end
    end
  end)
end

local function split(text)
  return vim.split(text or "", "\n", { plain = true })
end

local function quote(text)
  local out = {}
  for _, l in ipairs(split(text)) do
    table.insert(out, "> " .. l)
  end
  return out
end

--- Lines for one transcript item.
local function item_lines(item)
  local lines = {}
  local function add(t)
    vim.list_extend(lines, type(t) == "table" and t or { t })
  end
  local k = item.kind
  if k == "user" then
    add({ "## You", "" })
    add(split(item.text))
  elseif k == "handoff_request" then
    add({ "## You", "" })
    add("*Handoff requested*" .. ((item.focus and item.focus ~= "") and (" — focus: " .. item.focus) or ""))
  elseif k == "assistant" then
    add({ "## Assistant" .. (item.model and (" · " .. item.model) or ""), "" })
    if item.thinking then
      add(quote(item.thinking))
      add("")
    end
    add(split(item.text))
    if item.stop_reason == "error" then
      add({ "", "**Error:** " .. (item.error_message or "the request failed") })
    elseif item.stop_reason == "aborted" then
      add({ "", "*(stopped)*" })
    end
  elseif k == "handoff" then
    add({ "## Handoff context", "" })
    add(split(item.text))
  elseif k == "compaction" or k == "branch_summary" then
    add({ "## " .. (k == "compaction" and "Compaction summary" or "Branch summary"), "" })
    add(split(item.text))
  elseif k == "custom" then
    add({ "## " .. (item.custom_type or "custom"), "" })
    add(split(item.text))
  else
    return nil
  end
  add("")
  return lines
end

--- Rebuilds the chat from a transcript (`items` of the host's `transcript`).
function M.render(items, info)
  stream = nil
  edit(function(buf)
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    local lines = { "# Session " .. (info and info.session_id or "") }
    if info and info.parent_session then
      table.insert(lines, "*Handed off from " .. vim.fn.fnamemodify(info.parent_session, ":t") .. "*")
    end
    table.insert(lines, "")
    M.shown, M.earlier_row = #items, nil
    -- How many more to ask for at a time: the host says (its page), else as many as now.
    M.page = info and info.page or math.max(#items, 1)
    if info and (info.earlier or 0) > 0 then
      -- A long session opens on its latest part; the rest comes a page at a time.
      M.earlier_row = #lines
      local key = config.options.keymaps.earlier
      table.insert(lines, ("*… %d earlier items not shown%s*"):format(
        info.earlier,
        key and (" — " .. key .. " on this line shows " .. math.min(info.earlier, M.page) .. " more") or ""
      ))
      table.insert(lines, "")
    end
    local marks = {}
    for _, item in ipairs(items) do
      local l = item_lines(item)
      if l then
        if item.kind == "handoff" then
          table.insert(marks, { #lines, #lines + #l - 1 })
        end
        vim.list_extend(lines, l)
      end
    end
    api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    for _, m in ipairs(marks) do
      api.nvim_buf_set_extmark(buf, ns, m[1], 0, { end_row = m[2], line_hl_group = "HandoffHandoffContext" })
    end
  end)
  M.indicator_update()
  M.follow(true)
end

--- Shows a page of earlier items when the cursor is on the "earlier items" line; returns
--- whether it was. The view stays on what was the first item shown.
function M.show_earlier_at_cursor()
  if not (valid(M.chat_buf) and M.earlier_row) or api.nvim_get_current_buf() ~= M.chat_buf then
    return false
  end
  if api.nvim_win_get_cursor(0)[1] - 1 ~= M.earlier_row then
    return false
  end
  local host = require("handoff.host")
  local below = api.nvim_buf_line_count(M.chat_buf) - (M.earlier_row + 2)
  local reply = host.request("transcript", M.shown + M.page)
  if reply then
    host.apply_transcript(reply)
    -- The `below` lines from the old first item on end the buffer as before.
    local row = api.nvim_buf_line_count(M.chat_buf) - below + 1
    pcall(api.nvim_win_set_cursor, 0, { math.max(row, 1), 0 })
  end
  return true
end

--- A finished item (a user prompt as it starts).
function M.append_item(item)
  M.close_stream()
  local lines = item_lines(item)
  if lines then
    append_lines(lines)
  end
end

function M.begin_assistant(item)
  M.close_stream()
  append_lines({ "## Assistant" .. (item.model and (" · " .. item.model) or ""), "", "" })
  stream = "fresh" -- the last line is empty and takes the first delta
end

--- Appends streamed text to the last line (thinking is shown as a quote).
function M.append_text(text, thinking)
  if not text or text == "" then
    return
  end
  local want = thinking and "thinking" or "text"
  edit(function(buf)
    local n = api.nvim_buf_line_count(buf)
    if stream ~= want then
      if stream == "fresh" then
        if thinking then
          api.nvim_buf_set_lines(buf, n - 1, n, false, { "> " })
        end
      else
        -- A blank line between thinking and text (or after anything else).
        api.nvim_buf_set_lines(buf, n, n, false, { "", thinking and "> " or "" })
        n = api.nvim_buf_line_count(buf)
      end
      stream = want
    end
    local last = api.nvim_buf_get_lines(buf, n - 1, n, false)[1]
    local pieces = split(text)
    pieces[1] = last .. pieces[1]
    if thinking then
      for i = 2, #pieces do
        pieces[i] = "> " .. pieces[i]
      end
    end
    api.nvim_buf_set_lines(buf, n - 1, n, false, pieces)
  end)
end

function M.end_assistant(r)
  stream = nil
  local lines = {}
  if r.stop_reason == "error" then
    lines = { "", "**Error:** " .. (r.error_message or "the request failed") }
  elseif r.stop_reason == "aborted" then
    lines = { "", "*(stopped)*" }
  end
  table.insert(lines, "")
  append_lines(lines, r.stop_reason == "error" and "HandoffError" or nil)
end

function M.close_stream()
  if stream then
    stream = nil
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
  if not valid(M.chat_buf) then
    return
  end
  local last = api.nvim_buf_line_count(M.chat_buf)
  for _, win in ipairs(vim.fn.win_findbuf(M.chat_buf)) do
    if force or win ~= api.nvim_get_current_win() then
      pcall(api.nvim_win_set_cursor, win, { last, 0 })
    end
  end
end

-- Indicator -------------------------------------------------------------------------------

--- The indicator's text, or nil when nothing runs.
function M.indicator_text()
  local started = state.handoff_started or state.run_started
  if not (state.busy or state.generating_handoff) or not started then
    return nil
  end
  local elapsed = (vim.uv.now() - started) / 1000
  local stop = config.options.keymaps.stop
  local what
  if state.generating_handoff then
    what = "Generating handoff… <Esc> to cancel ·"
  else
    what = "Generating…" .. (stop and (" (" .. stop .. " to stop)") or "")
  end
  return ("%s %.1fs · %d tokens"):format(what, elapsed, state.tokens or 0)
end

local function draw_indicator()
  local text = M.indicator_text()
  local view = require("handoff.handoff_view")
  if state.generating_handoff then
    view.header(text)
  end
  if not valid(M.chat_buf) then
    return
  end
  if indicator_mark then
    pcall(api.nvim_buf_del_extmark, M.chat_buf, ns_indicator, indicator_mark)
    indicator_mark = nil
  end
  if text then
    local frame = spinner[math.floor(vim.uv.now() / 100) % #spinner + 1]
    local last = api.nvim_buf_line_count(M.chat_buf) - 1
    indicator_mark = api.nvim_buf_set_extmark(M.chat_buf, ns_indicator, last, 0, {
      virt_lines = { { { frame .. " " .. text, "HandoffIndicator" } } },
    })
  end
end

--- Starts, refreshes or stops the indicator to match the state.
function M.indicator_update()
  local running = state.busy or state.generating_handoff
  if running and not timer then
    timer = vim.uv.new_timer()
    timer:start(100, 100, vim.schedule_wrap(draw_indicator))
  elseif not running and timer then
    timer:stop()
    timer:close()
    timer = nil
  end
  draw_indicator()
end

-- Windows ---------------------------------------------------------------------------------

local function size(value, total)
  if value <= 1 then
    return math.max(1, math.floor(total * value))
  end
  return math.floor(value)
end

function M.is_open()
  return valid(M.chat_buf) and #vim.fn.win_findbuf(M.chat_buf) > 0
end

--- Opens the chat (and the prompt under it); focuses the prompt.
function M.open()
  local chat_buf, prompt_buf = M.ensure_buffers()
  local layout = config.options.layout
  if not M.is_open() then
    local pos = layout.position
    if pos == "tab" then
      vim.cmd("tabnew")
      api.nvim_win_set_buf(0, chat_buf)
    else
      local vertical = pos == "left" or pos == "right"
      local mods = (pos == "left" or pos == "top") and "topleft" or "botright"
      vim.cmd(("%s %s"):format(mods, vertical and "vsplit" or "split"))
      api.nvim_win_set_buf(0, chat_buf)
      if vertical then
        api.nvim_win_set_width(0, size(layout.width, vim.o.columns))
      else
        api.nvim_win_set_height(0, size(layout.height, vim.o.lines))
      end
    end
    local chat_win = api.nvim_get_current_win()
    vim.wo[chat_win].wrap = true
    vim.wo[chat_win].linebreak = true
    vim.wo[chat_win].number = false
    vim.wo[chat_win].relativenumber = false
    vim.wo[chat_win].winfixwidth = true
    vim.cmd("belowright split")
    api.nvim_win_set_buf(0, prompt_buf)
    api.nvim_win_set_height(0, size(layout.prompt_height, vim.o.lines))
    vim.wo[0].winfixheight = true
    vim.wo[0].number = false
    vim.wo[0].relativenumber = false
    M.follow(true)
  else
    local wins = vim.fn.win_findbuf(prompt_buf)
    if wins[1] then
      api.nvim_set_current_win(wins[1])
    end
  end
end

function M.close()
  for _, buf in ipairs({ M.chat_buf, M.prompt_buf }) do
    if valid(buf) then
      for _, win in ipairs(vim.fn.win_findbuf(buf)) do
        if #api.nvim_list_wins() > 1 then
          pcall(api.nvim_win_close, win, false)
        end
      end
    end
  end
end

function M.toggle()
  if M.is_open() then
    M.close()
  else
    M.open()
  end
end

--- Sends what the prompt buffer holds (slash commands are handled first) and clears it.
function M.submit()
  local _, buf = M.ensure_buffers()
  local text = table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
  text = vim.trim(text)
  if text == "" then
    return
  end
  api.nvim_buf_set_lines(buf, 0, -1, false, {})
  require("handoff.commands").run(text)
end

return M
