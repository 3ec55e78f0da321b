-- The chat's layouts (`layout.position`: right, left, top, bottom, tab) against the fake host:
-- where the chat and its prompt open, their sizes, and that closing them leaves the editor as
-- it was.
local fake = require("fake_host")
local h = require("helpers")
local eq = h.eq
local state = require("handoff.state")
local api = vim.api

fake.install()

local function cleanup()
  local handoff = require("handoff")
  require("handoff.chat").close()
  vim.cmd("silent! tabonly! | silent! only! | enew!")
  fake.reset()
  handoff.setup({})
end

local cases, it = h.suite()

--- One file window (Neovim's headless 80×24 editor), the chat opened with `layout`.
local function open_with(layout)
  vim.cmd("silent! tabonly! | silent! only! | enew!")
  api.nvim_buf_set_lines(0, 0, -1, false, { "the file the user edits" })
  local file_win = api.nvim_get_current_win()
  require("handoff").setup({ layout = layout })
  require("handoff").open_chat()
  local chat_win = vim.fn.win_findbuf(state.ui.chat_buf)[1]
  local prompt_win = vim.fn.win_findbuf(state.ui.prompt_buf)[1]
  assert(chat_win and prompt_win, "the chat and the prompt are shown")
  eq(prompt_win, api.nvim_get_current_win(), "the cursor is in the prompt")
  return file_win, chat_win, prompt_win
end

--- A window's { row, col, height, width } (0-based screen position).
local function geometry(win)
  local pos = api.nvim_win_get_position(win)
  return { row = pos[1], col = pos[2], height = api.nvim_win_get_height(win), width = api.nvim_win_get_width(win) }
end

it("right and left: a column of the given width, the prompt under the chat", function()
  for _, side in ipairs({ "right", "left" }) do
    local file_win, chat_win, prompt_win = open_with({ position = side, width = 0.25, prompt_height = 4 })
    eq(80, vim.o.columns, "the editor's width")
    local file, chat, prompt = geometry(file_win), geometry(chat_win), geometry(prompt_win)
    eq(20, chat.width, side .. ": chat width (0.25 of 80 columns)")
    eq(chat.width, prompt.width, side .. ": prompt as wide as the chat")
    eq(chat.col, prompt.col, side .. ": prompt in the chat's column")
    assert(prompt.row > chat.row, side .. ": the prompt is under the chat")
    eq(4, prompt.height, side .. ": prompt height")
    if side == "right" then
      assert(chat.col > file.col, "right: the chat is right of the file")
    else
      eq(0, chat.col, "left: the chat is at the left edge")
      assert(file.col > chat.col, "left: the file is right of the chat")
    end
    cleanup()
  end
end)

it("top and bottom: full width, the given height shared by the chat and its prompt", function()
  for _, side in ipairs({ "top", "bottom" }) do
    local file_win, chat_win, prompt_win = open_with({ position = side, height = 14, prompt_height = 5 })
    local file, chat, prompt = geometry(file_win), geometry(chat_win), geometry(prompt_win)
    eq(80, chat.width, side .. ": the chat spans the editor")
    eq(80, prompt.width, side .. ": the prompt spans the editor")
    eq(5, prompt.height, side .. ": prompt height")
    assert(prompt.row > chat.row + chat.height, side .. ": the prompt under the chat")
    -- 14 rows for the two windows, from the chat's winbar to the prompt's status line.
    eq(14, prompt.row + prompt.height + 1 - chat.row, side .. ": the chat area's height")
    if side == "top" then
      eq(0, chat.row, "top: the chat starts at the top")
      assert(file.row > prompt.row, "top: the file is under the prompt")
    else
      assert(chat.row > file.row, "bottom: the chat is under the file")
    end
    cleanup()
  end
end)

it("tab: the chat and the prompt in a new tab page; closing them closes it and the file stays", function()
  local file_win, chat_win, prompt_win = open_with({ position = "tab", prompt_height = 6 })
  eq(2, #api.nvim_list_tabpages(), "a tab page of its own")
  local tab = api.nvim_get_current_tabpage()
  eq(tab, api.nvim_win_get_tabpage(chat_win), "the chat is in the new tab")
  eq(tab, api.nvim_win_get_tabpage(prompt_win), "the prompt is in the new tab")
  assert(api.nvim_win_get_tabpage(file_win) ~= tab, "the file's window stays in its tab")
  eq(2, #api.nvim_tabpage_list_wins(tab), "only the chat and the prompt in it")
  eq(6, api.nvim_win_get_height(prompt_win), "prompt height")
  eq(vim.o.columns, api.nvim_win_get_width(chat_win), "the chat fills the tab's width")
  require("handoff").toggle_chat()
  eq(1, #api.nvim_list_tabpages(), "the chat's tab closed with it")
  eq({ "the file the user edits" }, api.nvim_buf_get_lines(api.nvim_win_get_buf(file_win), 0, -1, false))
  -- And it opens again the same way.
  require("handoff").toggle_chat()
  eq(2, #api.nvim_list_tabpages(), "opened again in a tab")
end)

it(":HandoffChat again while open goes to the prompt and opens nothing more", function()
  for _, side in ipairs({ "right", "bottom", "tab" }) do
    local file_win, _, prompt_win = open_with({ position = side })
    local wins, tabs = #api.nvim_list_wins(), #api.nvim_list_tabpages()
    api.nvim_set_current_win(file_win)
    vim.cmd("HandoffChat")
    eq(prompt_win, api.nvim_get_current_win(), side .. ": back in the prompt")
    eq(wins, #api.nvim_list_wins(), side .. ": no window added")
    eq(tabs, #api.nvim_list_tabpages(), side .. ": no tab added")
    cleanup()
  end
end)

return { cases = cases, cleanup = cleanup }
