--- The chat's text: a session's transcript rendered as markdown, and the streamed reply
--- appended as it arrives. Every edit of the chat buffer happens here, on the main loop, in the
--- order the host's records arrive.
---
--- A reply's thinking is a quote, folded: the chat's windows fold exactly the rows it takes
--- (`ui.thinking`, kept here as the buffer changes), closed to "▸ Thinking (N lines)" as it
--- streams; `za` (or `<CR>`) opens and closes it. The folds are manual ones made from those
--- rows: a 'foldexpr' is evaluated for every changed line, which took 20 ms of drawing a
--- 7,000-line transcript, while making the folds costs a few microseconds each.
local config = require("handoff.config")
local state = require("handoff.state")

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace("handoff_chat")

local ui = state.ui

local function valid(buf)
  return buf ~= nil and api.nvim_buf_is_valid(buf)
end

--- The chat buffer, created on first use by `handoff.chat`.
local function chat_buf()
  return (require("handoff.chat").ensure_buffers())
end

--- Runs `fn` with the chat buffer modifiable.
local function edit(fn)
  local buf = chat_buf()
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

local find, sub = string.find, string.sub

--- Appends the lines of `text` to `out` (each after `prefix`, when given); returns `out`.
--- Drawing a transcript splits every item's text: a plain find loop is several times faster
--- than `vim.split`.
local function push_lines(out, text, prefix)
  text = text or ""
  local n, init = #out, 1
  while true do
    local at = find(text, "\n", init, true)
    if not at then
      break
    end
    n = n + 1
    out[n] = prefix and (prefix .. sub(text, init, at - 1)) or sub(text, init, at - 1)
    init = at + 1
  end
  out[n + 1] = prefix and (prefix .. sub(text, init)) or sub(text, init)
  return out
end

local function split(text)
  return push_lines({}, text)
end

local function quote(text)
  return push_lines({}, text, "> ")
end

--- Appends the lines of one transcript item to `out`; returns whether the item shows, and the
--- rows its thinking takes among the lines added (0-based from the item's first line,
--- inclusive `{ first, last }`; nil without thinking).
local function push_item(out, item)
  local base = #out
  local thinking
  local k = item.kind
  if k == "user" then
    out[base + 1], out[base + 2] = "## You", ""
    -- Attached files and selections show as one line each; the session holds their text.
    local text = item.text or ""
    if find(text, "```", 1, true) then
      vim.list_extend(out, require("handoff.context").compact(split(text)))
    else
      push_lines(out, text)
    end
  elseif k == "handoff_request" then
    out[base + 1], out[base + 2] = "## You", ""
    out[base + 3] = "*Handoff requested*" .. ((item.focus and item.focus ~= "") and (" — focus: " .. item.focus) or "")
  elseif k == "assistant" then
    out[base + 1], out[base + 2] = "## Assistant" .. (item.model and (" · " .. item.model) or ""), ""
    if item.thinking then
      push_lines(out, item.thinking, "> ")
      thinking = { 2, #out - base - 1 }
      out[#out + 1] = ""
    end
    push_lines(out, item.text)
    for _, call in ipairs(item.tool_calls or {}) do
      out[#out + 1] = M.call_line(call.tool, call.summary)
    end
    if item.stop_reason == "error" then
      out[#out + 1] = ""
      out[#out + 1] = "**Error:** " .. (item.error_message or "the request failed")
    elseif item.stop_reason == "aborted" then
      out[#out + 1] = ""
      out[#out + 1] = "*(stopped)*"
    end
  elseif k == "tool" then
    vim.list_extend(out, M.result_lines(item.tool, item.text, item.is_error, false, item.earlier, item.earlier_lines))
  elseif k == "handoff" or k == "compaction" or k == "branch_summary" or k == "custom" then
    local title = k == "handoff" and "Handoff context"
      or k == "compaction" and "Compaction summary"
      or k == "branch_summary" and "Branch summary"
      or (item.custom_type or "custom")
    out[base + 1], out[base + 2] = "## " .. title, ""
    push_lines(out, item.text)
  else
    return false
  end
  out[#out + 1] = ""
  return true, thinking
end

--- Lines for one transcript item, and the rows its thinking takes among them (0-based,
--- inclusive `{ first, last }`; nil without thinking).
local function item_lines(item)
  local lines = {}
  local shows, thinking = push_item(lines, item)
  if not shows then
    return nil
  end
  return lines, thinking
end

--- The rows of `ui.thinking` shifted by `offset`, appended.
local function add_thinking(range, offset)
  if range then
    table.insert(ui.thinking, { range[1] + offset, range[2] + offset })
  end
end

--- The windows showing the chat that fold it (`setup_window`: manual folds).
local function fold_windows()
  return vim.tbl_filter(function(win)
    return vim.wo[win].foldmethod == "manual"
  end, vim.fn.win_findbuf(ui.chat_buf))
end

--- `:fold` commands closing each of `ranges` (0-based rows), as one script.
local function fold_script(ranges)
  local cmds = {}
  for i, r in ipairs(ranges) do
    cmds[i] = ("%d,%dfold"):format(r[1] + 1, r[2] + 1)
  end
  return table.concat(cmds, "\n")
end

--- Folds every reply's thinking in `win`, closed, in place of the folds it had.
function M.fold_all(win)
  api.nvim_win_call(win, function()
    vim.cmd("normal! zE")
    if #ui.thinking > 0 then
      vim.cmd(fold_script(ui.thinking))
    end
  end)
end

--- Whether each fold window shows `range` open (the user opened it), read before the edit that
--- changes its rows: the fold is made again after it.
local function open_states(range)
  local open = {}
  for _, win in ipairs(fold_windows()) do
    open[win] = api.nvim_win_call(win, function()
      return vim.fn.foldlevel(range[1] + 1) > 0 and vim.fn.foldclosed(range[1] + 1) == -1
    end)
  end
  return open
end

--- Folds `range` (0-based rows) in the chat's windows, closed unless `open[win]`; a fold of its
--- first rows (the thinking streamed so far) is replaced.
local function fold_range(range, open)
  local first, last = range[1] + 1, range[2] + 1
  for _, win in ipairs(fold_windows()) do
    api.nvim_win_call(win, function()
      if vim.fn.foldlevel(first) > 0 then
        local view = vim.fn.winsaveview()
        vim.cmd(("keepjumps %dnormal! zD"):format(first))
        vim.fn.winrestview(view)
      end
      vim.cmd(("%d,%dfold"):format(first, last))
      if open and open[win] then
        vim.cmd(("%d,%dfoldopen"):format(first, last))
      end
    end)
  end
end

--- 'foldtext' of the chat's windows: the folded thinking as one line.
function M.foldtext()
  local n = vim.v.foldend - vim.v.foldstart + 1
  return ("▸ Thinking (%d line%s)"):format(n, n == 1 and "" or "s")
end

--- Makes `win` fold the thinking of the replies it shows, closed at first. Local to the chat
--- buffer in that window (`:setlocal`): another buffer shown there later keeps its own folding.
function M.setup_window(win)
  local wo = vim.wo[win][0]
  wo.foldtext = "v:lua.require'handoff.chat.render'.foldtext()"
  wo.foldminlines = 0
  wo.foldlevel = 0
  wo.foldcolumn = "0"
  wo.foldenable = true
  wo.foldmethod = "manual"
  M.fold_all(win)
end

M.item_lines = item_lines

--- A token count as the chat shows it: 420, 9.8k, 12.3k, 1.2M.
function M.tokens(n)
  if n < 1000 then
    return tostring(n)
  elseif n < 999950 then
    return (("%.1fk"):format(n / 1000):gsub("%.0k$", "k"))
  end
  return (("%.1fM"):format(n / 1e6):gsub("%.0M$", "M"))
end

--- The usage line under an assistant message: "· 12.3k in (9.8k cached) · 420 out" (the whole
--- prompt, the part of it read from the provider's prompt cache and the part written to it, the
--- reply), or nil when the provider reported nothing.
function M.usage_text(item)
  local parts = {}
  if item.input_tokens then
    local cache = {}
    if item.cached_tokens then
      table.insert(cache, M.tokens(item.cached_tokens) .. " cached")
    end
    if item.cache_write_tokens then
      table.insert(cache, M.tokens(item.cache_write_tokens) .. " written to cache")
    end
    table.insert(parts, M.tokens(item.input_tokens) .. " in"
      .. (#cache > 0 and (" (" .. table.concat(cache, ", ") .. ")") or ""))
  end
  if item.output_tokens then
    table.insert(parts, M.tokens(item.output_tokens) .. " out")
  end
  if #parts == 0 then
    return nil
  end
  return "· " .. table.concat(parts, " · ")
end

--- Shows `text` as a virtual line under `row` (the usage footer of an assistant message).
function M.usage_mark(buf, row, text)
  api.nvim_buf_set_extmark(buf, ns, row, 0, { virt_lines = { { { text, "HandoffUsage" } } } })
end

--- The first lines of a transcript: the session, and the one it was handed off from (with the
--- key that opens it). Returns the lines and the 0-based row naming the parent, if any.
function M.header_lines(info, title)
  local lines = { title or ("# Session " .. (info and info.session_id or "")) }
  local parent_row = nil
  if info and info.parent_session then
    parent_row = #lines
    local key = config.options.keymaps.parent
    table.insert(lines, ("*Handed off from %s%s*"):format(
      vim.fn.fnamemodify(info.parent_session, ":t"),
      key and (" — " .. key .. " on this line opens it read-only") or ""
    ))
  end
  -- The instruction files the model is given (`:HandoffContext` shows the whole prompt).
  local files = info and info.instruction_files
  if type(files) == "table" and #files > 0 then
    local names = vim.tbl_map(function(f)
      return vim.fn.fnamemodify(f, ":~:.")
    end, files)
    table.insert(lines, "*Instructions: " .. table.concat(names, ", ") .. "*")
  end
  table.insert(lines, "")
  return lines, parent_row
end

--- Lines of transcript items, the first at 0-based `row`, and the highlights to give them once
--- they are in the buffer (`M.decorate`); `marks.thinking` are the rows of the replies' thinking
--- (the chat folds them).
function M.build(items, row)
  local lines, marks = {}, { context = {}, usage = {}, thinking = {} }
  for _, item in ipairs(items) do
    local start = #lines
    local shows, thinking = push_item(lines, item)
    if shows then
      local first = row + start
      if thinking then
        marks.thinking[#marks.thinking + 1] = { first + thinking[1], first + thinking[2] }
      end
      if item.kind == "handoff" then
        marks.context[#marks.context + 1] = { first, row + #lines - 1 }
      elseif item.kind == "assistant" then
        local usage = M.usage_text(item)
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
    M.usage_mark(buf, m[1], m[2])
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

--- Rebuilds the chat from a transcript (`items` of the host's `transcript`).
function M.render(items, info)
  ui.stream = nil
  edit(function(buf)
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    local lines, parent_row = M.header_lines(info)
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
  for _, win in ipairs(fold_windows()) do
    M.fold_all(win)
  end
  require("handoff.chat.indicator").update()
  M.follow(true)
end

--- The line naming a tool call.
function M.call_line(tool, summary)
  summary = (summary or ""):gsub("\n", " ")
  if #summary > 120 then
    summary = summary:sub(1, 117) .. "…"
  end
  return ("**▸ %s**%s"):format(tool or "tool", summary ~= "" and (" `" .. summary .. "`") or "")
end

--- A tool's output as the chat shows it: the last lines, in a fence. `earlier`: lines of the
--- output before `text` that the result itself does not hold (a running command's update carries
--- only its end; bash past its limits keeps the rest in the file its last line names). `cut`:
--- lines of the result the host left out of a transcript (the session holds them).
function M.result_lines(tool, text, is_error, live, earlier, cut)
  local max = config.options.tool_output_lines or 12
  local all = split(text or "")
  local n = #all
  while n > 0 and all[n] == "" do
    n = n - 1
  end
  local lines = {}
  if is_error then
    lines[1] = ("*%s failed:*"):format(tool or "tool")
  end
  local from = math.max(1, n - max + 1)
  local hidden = (from - 1) + (earlier or 0) + (cut or 0)
  if hidden > 0 then
    local whole = not live and (earlier or 0) == 0
    lines[#lines + 1] = ("*… %d earlier lines%s*"):format(hidden, whole and " (all of it is in the session)" or "")
  end
  lines[#lines + 1] = "```"
  for i = from, n do
    lines[#lines + 1] = all[i]
  end
  lines[#lines + 1] = "```"
  return lines
end

--- Rows of the output block of the tool running now (it is replaced as output arrives).
local live = nil

--- A tool starts: its line, and room for its output.
function M.tool_start(r)
  M.close_stream()
  append_lines({ M.call_line(r.tool, r.summary) })
  live = { id = r.id, tool = r.tool, start = api.nvim_buf_line_count(chat_buf()) }
end

local function replace_live(lines)
  edit(function(buf)
    api.nvim_buf_set_lines(buf, live.start, -1, false, lines)
  end)
end

--- The end of the running tool's output so far (each update replaces the last).
function M.tool_update(r)
  if live and live.id == r.id and live.start <= api.nvim_buf_line_count(chat_buf()) then
    replace_live(M.result_lines(live.tool, r.tail, false, true, r.earlier))
  end
end

--- A tool call ended: its result replaces the live output (or follows the call's line).
function M.tool_end(r)
  local lines = M.result_lines(r.tool, r.text, r.is_error, false, r.earlier)
  table.insert(lines, "")
  if live and live.id == r.id and live.start <= api.nvim_buf_line_count(chat_buf()) then
    replace_live(lines)
    if r.is_error then
      edit(function(buf)
        api.nvim_buf_set_extmark(buf, ns, live.start, 0, { line_hl_group = "HandoffError" })
      end)
    end
  else
    append_lines({ M.call_line(r.tool, "") })
    append_lines(lines)
  end
  live = nil
end

--- A tool call waiting for the user: what it will do and the keys that answer; `r.row` is the
--- row where it starts (the keys act on the request the cursor is in).
function M.append_approval(r)
  M.close_stream()
  local n = api.nvim_buf_line_count(chat_buf())
  local empty = n == 1 and api.nvim_buf_get_lines(chat_buf(), 0, 1, false)[1] == ""
  r.row = empty and 0 or n
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
  local lines, thinking = item_lines(item)
  if lines then
    local buf = chat_buf()
    local n = api.nvim_buf_line_count(buf)
    local empty = n == 1 and api.nvim_buf_get_lines(buf, 0, 1, false)[1] == ""
    add_thinking(thinking, empty and 0 or n)
    append_lines(lines)
    if thinking then
      fold_range(ui.thinking[#ui.thinking])
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
  local open = thinking and ui.stream == "thinking" and ui.thinking[#ui.thinking] and open_states(ui.thinking[#ui.thinking])
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
    local pieces = split(text)
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
    fold_range(ui.thinking[#ui.thinking], open or nil)
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
  local usage = M.usage_text(r)
  if usage then
    M.usage_mark(chat_buf(), api.nvim_buf_line_count(chat_buf()) - 1, usage)
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
