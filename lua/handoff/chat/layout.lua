--- The chat's windows: the chat (markdown) and the prompt under it, placed as `layout` says.
local config = require("handoff.config")
local state = require("handoff.state")

local M = {}

local api = vim.api

local function size(value, total)
  if value <= 1 then
    return math.max(1, math.floor(total * value))
  end
  return math.floor(value)
end

local function valid(buf)
  return buf ~= nil and api.nvim_buf_is_valid(buf)
end

function M.is_open()
  return valid(state.ui.chat_buf) and #vim.fn.win_findbuf(state.ui.chat_buf) > 0
end

--- Opens the chat and the prompt under it (or, when open, goes to the prompt).
---@param chat_buf integer
---@param prompt_buf integer
function M.open(chat_buf, prompt_buf)
  local layout = config.options.layout
  if M.is_open() then
    local wins = vim.fn.win_findbuf(prompt_buf)
    if wins[1] then
      api.nvim_set_current_win(wins[1])
    end
    return
  end
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
  -- The context meter: model, thinking level, tokens used, share of the window.
  vim.wo[chat_win].winbar = "%{%v:lua.require'handoff.meter'.winbar()%}"
  -- Each reply's thinking folded to one line.
  require("handoff.chat.folds").setup_window(chat_win)
  vim.cmd("belowright split")
  local prompt_win = api.nvim_get_current_win()
  api.nvim_win_set_buf(prompt_win, prompt_buf)
  api.nvim_win_set_height(prompt_win, size(layout.prompt_height, vim.o.lines))
  vim.wo[prompt_win].winfixheight = true
  vim.wo[prompt_win].number = false
  vim.wo[prompt_win].relativenumber = false
  if pos == "top" or pos == "bottom" then
    -- The chat and its prompt share `layout.height` rows (to the prompt's status line): the
    -- prompt's resize gave its rows to the window beside it, which is the chat at the bottom.
    local top = api.nvim_win_get_position(chat_win)[1]
    local used = api.nvim_win_get_position(prompt_win)[1] + api.nvim_win_get_height(prompt_win) + 1 - top
    local want = size(layout.height, vim.o.lines)
    api.nvim_win_set_height(chat_win, math.max(1, api.nvim_win_get_height(chat_win) + want - used))
  end
end

--- Closes the chat's windows (never the last window of the editor).
function M.close()
  for _, buf in ipairs({ state.ui.chat_buf, state.ui.prompt_buf }) do
    if valid(buf) then
      for _, win in ipairs(vim.fn.win_findbuf(buf)) do
        if #api.nvim_list_wins() > 1 then
          pcall(api.nvim_win_close, win, false)
        end
      end
    end
  end
end

return M
