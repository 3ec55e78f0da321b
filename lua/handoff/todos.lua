--- The model's todo list: kept in `state.todos` from the host's `todos` records (a successful
--- `todo_write`) and from every `transcript` (so a resume or a session switch shows the list of
--- that session's branch), shown in a small window (`:HandoffTodos`) that follows it live.
--- Items keep pi's field names: `{ content, status, activeForm }`, status "pending",
--- "in_progress" or "completed".
local config = require("handoff.config")
local state = require("handoff.state")

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace("handoff_todos")

local NAME = "handoff://todos"
--- The window grows with the list up to this many lines.
local MAX_HEIGHT = 10

local marks = { pending = "[ ]", in_progress = "[~]", completed = "[x]" }

--- Open and total counts of `todos`.
local function counts(todos)
  local open = 0
  for _, t in ipairs(todos) do
    if t.status ~= "completed" then
      open = open + 1
    end
  end
  return open, #todos
end

--- The compact line the chat shows when the list changes.
---@param todos table[]
---@return string
function M.summary(todos)
  local open, total = counts(todos)
  if total == 0 then
    return "Todos: cleared"
  elseif open == 0 then
    return ("Todos: all %d done"):format(total)
  end
  return ("Todos: %d open of %d"):format(open, total)
end

--- The window's lines, and the 0-based rows of the item in progress and of completed ones.
---@param todos table[]
---@return string[] lines, integer? active, integer[] done
function M.lines(todos)
  if #todos == 0 then
    return { "_No todos._" }, nil, {}
  end
  local lines, active, done = {}, nil, {}
  for i, t in ipairs(todos) do
    local text = t.content or ""
    if t.status == "in_progress" then
      active = i - 1
      -- The present continuous is what it is for ("Running the tests").
      if t.activeForm and t.activeForm ~= "" then
        text = t.activeForm
      end
    elseif t.status == "completed" then
      table.insert(done, i - 1)
    end
    table.insert(lines, ("- %s %s"):format(marks[t.status] or "[ ]", (text:gsub("\n", " "))))
  end
  return lines, active, done
end

local function buffer()
  local buf = state.ui.todos_buf
  if buf and api.nvim_buf_is_valid(buf) then
    return buf
  end
  require("handoff.highlights").define()
  buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_name(buf, NAME)
  vim.bo[buf].filetype = "markdown"
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = false
  local close = config.options.keymaps.close
  if close and close ~= "" then
    vim.keymap.set("n", close, M.close, { buffer = buf, nowait = true, silent = true, desc = "handoff.nvim: close the todo list" })
  end
  state.ui.todos_buf = buf
  return buf
end

--- Windows of the current tab showing the list.
local function windows()
  local buf = state.ui.todos_buf
  if not (buf and api.nvim_buf_is_valid(buf)) then
    return {}
  end
  return vim.tbl_filter(function(w)
    return api.nvim_win_get_tabpage(w) == api.nvim_get_current_tabpage()
  end, vim.fn.win_findbuf(buf))
end

local function height(n)
  return math.max(1, math.min(n, MAX_HEIGHT))
end

--- Draws the list into its buffer (and fits the windows showing it).
local function draw()
  local buf = buffer()
  local lines, active, done = M.lines(state.todos)
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  if active then
    api.nvim_buf_set_extmark(buf, ns, active, 0, { line_hl_group = "HandoffTodoInProgress" })
  end
  for _, row in ipairs(done) do
    api.nvim_buf_set_extmark(buf, ns, row, 0, { line_hl_group = "HandoffTodoDone" })
  end
  local open, total = counts(state.todos)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    pcall(api.nvim_win_set_height, win, height(#lines))
    vim.wo[win].winbar = ("%%#HandoffIndicator#Todos · %d open of %d"):format(open, total)
  end
end

function M.is_open()
  return #windows() > 0
end

--- Opens the window (a split at the bottom; the cursor stays where it was).
function M.open()
  if M.is_open() then
    return
  end
  local buf = buffer()
  local current = api.nvim_get_current_win()
  vim.cmd("botright split")
  local win = api.nvim_get_current_win()
  api.nvim_win_set_buf(win, buf)
  vim.wo[win].winfixheight = true
  vim.wo[win].number = false
  vim.wo[win].relativenumber = false
  vim.wo[win].signcolumn = "no"
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  draw()
  if api.nvim_win_is_valid(current) then
    api.nvim_set_current_win(current)
  end
end

function M.close()
  for _, win in ipairs(windows()) do
    if #api.nvim_tabpage_list_wins(0) > 1 then
      pcall(api.nvim_win_close, win, true)
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

--- A copy of the current list.
---@return table[]
function M.get()
  return vim.deepcopy(state.todos)
end

--- Takes a list from the host. When it differs from the one held: the window redraws,
--- `User HandoffTodos` fires with `{ todos, open, total }`, and, for a live change (`announce`),
--- the chat shows the compact line.
---@param todos table[]?
---@param announce boolean?
function M.set(todos, announce)
  todos = todos or {}
  if vim.deep_equal(todos, state.todos) then
    return
  end
  state.todos = todos
  if state.ui.todos_buf and api.nvim_buf_is_valid(state.ui.todos_buf) then
    draw()
  end
  if announce then
    require("handoff.chat").append_notice(M.summary(todos))
  end
  local open, total = counts(todos)
  require("handoff.events").fire("HandoffTodos", { todos = M.get(), open = open, total = total })
end

return M
