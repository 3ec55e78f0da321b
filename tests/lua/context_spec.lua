-- Editor context in prompts against the fake host: `#buffer`, `#selection`, `#diagnostics` and
-- `@path` expanded before sending, `:'<,'>HandoffChat`, the chat's "📎" lines, and completion
-- (omnifunc, blink.cmp and nvim-cmp sources) of the tokens and of the project's files.
local fake = require("fake_host")
local h = require("helpers")
local eq, has, lacks, lines = h.eq, h.has, h.lacks, h.lines
local api = vim.api

fake.install()

local home = vim.fn.getcwd()

--- A temporary project, made the working directory: `files` maps paths to lines.
local function project(files)
  _G.notes = {}
  local dir = vim.fn.tempname()
  for path, content in pairs(files) do
    vim.fn.mkdir(vim.fs.dirname(dir .. "/" .. path), "p")
    if type(content) == "string" then
      local fd = assert(io.open(dir .. "/" .. path, "wb"))
      fd:write(content)
      fd:close()
    else
      vim.fn.writefile(content, dir .. "/" .. path)
    end
  end
  vim.cmd.cd(dir)
  return dir
end

--- The project's files once listed (the listing runs in the background; `vim.wait` lets it end).
local function listed()
  local list
  require("handoff.completion").files(function(l)
    list = l
  end)
  vim.wait(5000, function()
    return list ~= nil
  end)
  return list
end

local SRC = { "local M = {}", "function M.add(a, b)", "  return a + b", "end", "return M" }

--- Edits src/x.lua of a new project, selects lines 2-3 (then leaves visual mode).
local function editing()
  local dir = project({ ["src/x.lua"] = SRC })
  vim.cmd.edit("src/x.lua")
  vim.cmd("normal! 2GVj" .. vim.keycode("<Esc>"))
  return dir, api.nvim_get_current_buf()
end

--- Types `text` in the chat's prompt and sends it; returns what the host got.
local function send(text)
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, vim.split(text, "\n"))
  chat.submit()
  local sent = fake.calls_of("prompt")
  return sent[#sent].args[1]
end

local function chat_text()
  return table.concat(lines(require("handoff.chat").chat_buf), "\n")
end

local function notes()
  return table.concat(vim.tbl_map(function(n)
    return n.msg
  end, _G.notes), "\n")
end

local function cleanup()
  require("handoff.chat").close()
  vim.cmd("silent! only | enew!")
  local chat = require("handoff.chat")
  if chat.prompt_buf then
    api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, {})
  end
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if vim.bo[buf].buftype == "" and api.nvim_buf_get_name(buf) ~= "" then
      pcall(api.nvim_buf_delete, buf, { force = true })
    end
  end
  vim.cmd.cd(home)
  vim.diagnostic.reset()
  _G.notes = {}
  fake.reset()
  require("handoff").setup({})
  require("handoff.completion").invalidate()
end

local cases, it = h.suite()

it("the buffer before the chat is known from setup() on, not only once a prompt loaded the module", function()
  package.loaded["handoff.context"] = nil
  require("handoff").setup({})
  local dir = project({ ["a.txt"] = { "alpha" } })
  vim.cmd.edit(dir .. "/a.txt")
  local file = api.nvim_get_current_buf()
  local scratch = api.nvim_create_buf(false, true)
  api.nvim_set_current_buf(scratch)
  eq(file, require("handoff.context").origin(), "the file the user was in, not the scratch buffer")
  api.nvim_buf_delete(scratch, { force = true })
  vim.cmd.bwipeout({ args = { tostring(file) }, bang = true })
end)

it("#buffer, #selection and #diagnostics expand to fenced blocks with the path", function()
  local _, buf = editing()
  local ns = api.nvim_create_namespace("spec")
  vim.diagnostic.set(ns, buf, {
    { lnum = 2, col = 9, severity = vim.diagnostic.severity.ERROR, message = "undefined b" },
    { lnum = 0, col = 0, severity = vim.diagnostic.severity.WARN, message = "unused\nM", source = "lua_ls" },
  })
  local sent = send("explain #selection, in #buffer")
  has(sent, "explain `src/x.lua:2-3`, in `src/x.lua`\n\n", "references in the text")
  has(sent, "\n\n```lua src/x.lua:2-3\nfunction M.add(a, b)\n  return a + b\n```", "the selection")
  has(sent, "\n\n```lua src/x.lua\n" .. table.concat(SRC, "\n") .. "\n```", "the buffer")
  -- From the chat: the buffer is still the one the user came from.
  sent = send("fix #diagnostics")
  eq(
    "fix the diagnostics of `src/x.lua`\n\n```diagnostics src/x.lua\n"
      .. "src/x.lua:1:1 warn unused M [lua_ls]\nsrc/x.lua:3:10 error undefined b\n```",
    sent,
    "diagnostics"
  )
  -- A token alone on its line becomes its block there; a repeated one is attached once.
  sent = send("#selection\nwhy, and why #selection?")
  eq(
    "```lua src/x.lua:2-3\nfunction M.add(a, b)\n  return a + b\n```\nwhy, and why `src/x.lua:2-3`?",
    sent,
    "inline block"
  )
  eq("", notes(), "notifications")
end)

it("@path attaches a file; missing, binary and huge files are not attached, and say so", function()
  project({
    ["src/x.lua"] = SRC,
    ["logo.png"] = "\137PNG\r\n\26\n\0\0\0",
    ["big.txt"] = ("x"):rep(3000),
    ["win.txt"] = "one\r\ntwo\r\n",
  })
  require("handoff").setup({ context = { max_bytes = 2048 } })
  local sent = send("see @src/x.lua.")
  eq("see `src/x.lua`.\n\n```lua src/x.lua\n" .. table.concat(SRC, "\n") .. "\n```", sent, "attached")
  sent = send("@win.txt")
  eq("```text win.txt\none\ntwo\n```", sent, "CRLF file, alone on its line")
  sent = send("and @missing.lua or @src")
  eq("and @missing.lua or @src", sent, "a missing file and a folder stay as typed")
  has(notes(), "@missing.lua: no such file, sent as typed")
  has(notes(), "@src: not a file")
  sent = send("look at @logo.png and @big.txt")
  has(sent, "`logo.png` (not attached: binary file)")
  has(sent, "`big.txt` (not attached: 3 KB, over the 2 KB limit (context.max_bytes))")
  lacks(sent, "```", "nothing attached")
  has(notes(), "logo.png not attached: binary file")
end)

it("tokens in fenced blocks, after non-space, and in slash commands stay as typed", function()
  editing()
  local text = "```lua\n--- @param x #buffer\n```\nmail me@example.com, issue #12, C#buffer"
  eq(text, send(text), "left alone")
  eq("/handoff keep #buffer", send("/handoff keep #buffer"), "slash command")
  eq("", notes(), "notifications")
  -- The API can send a text as it is.
  require("handoff").prompt("#buffer", { expand = false })
  eq({ "#buffer" }, fake.calls_of("prompt")[3].args, "expand = false")
end)

it(":'<,'>HandoffChat and the add_selection key put the lines into the prompt", function()
  local _, buf = editing()
  vim.cmd("'<,'>HandoffChat")
  local chat = require("handoff.chat")
  eq(chat.prompt_buf, api.nvim_get_current_buf(), "the prompt is focused")
  local want = { "```lua src/x.lua:2-3", "function M.add(a, b)", "  return a + b", "```", "" }
  eq(want, lines(chat.prompt_buf), "prompt")
  eq({ #want, 0 }, api.nvim_win_get_cursor(0), "cursor after the block")
  -- A visual-mode key does the same; what the prompt held stays before it.
  require("handoff").setup({ keymaps = { add_selection = "<Space>a" } })
  vim.cmd.wincmd("p")
  api.nvim_set_current_win(vim.fn.win_findbuf(buf)[1])
  api.nvim_feedkeys(vim.keycode("4GV5G<Space>a"), "xt", false)
  eq(chat.prompt_buf, api.nvim_get_current_buf(), "the prompt is focused again")
  local got = lines(chat.prompt_buf)
  eq({ "```", "", "```lua src/x.lua:4-5", "end", "return M", "```", "" }, vim.list_slice(got, 4), "appended")
  eq({ 4, 5 }, { api.nvim_buf_get_mark(buf, "<")[1], api.nvim_buf_get_mark(buf, ">")[1] }, "marks for #selection")
  -- Without a range, :HandoffChat opens the chat (or goes to its prompt); the toggle closes it.
  vim.cmd("HandoffChatToggle")
  eq(false, chat.is_open(), "closed")
  vim.cmd("HandoffChat")
  eq(true, chat.is_open(), "open")
  eq(chat.prompt_buf, api.nvim_get_current_buf(), "in the prompt")
  vim.cmd("HandoffChat")
  eq(true, chat.is_open(), "still open")
end)

it("the chat shows each attachment as one line, live and when rebuilt", function()
  editing()
  local ns = api.nvim_create_namespace("spec")
  vim.diagnostic.set(ns, 0, {
    { lnum = 0, col = 0, severity = vim.diagnostic.severity.ERROR, message = "a" },
    { lnum = 1, col = 0, severity = vim.diagnostic.severity.ERROR, message = "b" },
  })
  local sent = send("explain #selection with #buffer\n\nand #diagnostics")
  fake.emit({ { type = "message_start", kind = "user", text = sent } })
  local live = chat_text()
  has(live, "## You\n\nexplain `src/x.lua:2-3` with `src/x.lua`\n\nand the diagnostics of `src/x.lua`\n\n"
    .. "📎 src/x.lua:2-3 (2 lines)\n📎 src/x.lua (5 lines)\n📎 #diagnostics of src/x.lua (2)\n", "live")
  lacks(live, "return a + b", "live")
  fake.emit({
    { type = "transcript", session_id = "s", items = { { kind = "user", text = sent }, { kind = "assistant", text = "ok" } } },
  })
  local rebuilt = chat_text()
  has(rebuilt, "📎 src/x.lua:2-3 (2 lines)\n📎 src/x.lua (5 lines)\n📎 #diagnostics of src/x.lua (2)", "rebuilt")
  lacks(rebuilt, "```", "rebuilt")
  -- A fence the user wrote (no path after the language) shows as written.
  fake.emit({ { type = "message_start", kind = "user", text = "```lua\nx()\n```" } })
  has(chat_text(), "## You\n\n```lua\nx()\n```", "user fence")
end)

it("omnifunc completes the context tokens and @path (files as git lists them)", function()
  local dir = project({
    ["a.lua"] = { "a" },
    ["sub/b.lua"] = { "b" },
    ["ignored.txt"] = { "no" },
    ["build/out.lua"] = { "no" },
    [".gitignore"] = { "ignored.txt", "build/" },
  })
  vim.system({ "git", "init", "-q" }, { cwd = dir }):wait()
  vim.system({ "git", "add", "a.lua" }, { cwd = dir }):wait()
  vim.cmd.edit("a.lua")
  require("handoff").open_chat()
  local commands = require("handoff.commands")
  local function words(base)
    return vim.tbl_map(function(i)
      return i.word
    end, commands.omnifunc(0, base))
  end
  api.nvim_set_current_line("look at @su")
  api.nvim_win_set_cursor(0, { 1, 11 })
  eq(8, commands.omnifunc(1, ""), "start of @su")
  api.nvim_win_set_cursor(0, { 1, 4 })
  eq(-3, commands.omnifunc(1, ""), "no token at the cursor")
  eq({ ".gitignore", "a.lua", "sub/b.lua" }, listed(), "files")
  eq({ "@.gitignore", "@a.lua", "@sub/b.lua" }, words("@"), "every file")
  eq({ "@sub/b.lua" }, words("@su"), "by prefix")
  eq({ "@a.lua", "@sub/b.lua" }, words("@lua"), "by substring")
  eq({ "#buffer", "#selection", "#diagnostics" }, words("#"), "context tokens")
  eq({ "#diagnostics" }, words("#d"), "by prefix")
  eq("[a.lua]", commands.omnifunc(0, "#b")[1].menu, "the buffer they read")
  eq({ "/new" }, words("/ne"), "commands still complete")
end)

it("outside git, @path completion walks the folder, hidden ones skipped, up to max_files", function()
  project({ ["a.txt"] = { "a" }, [".hidden/x.txt"] = { "x" }, ["d/b.txt"] = { "b" }, ["d/c.txt"] = { "c" } })
  local completion = require("handoff.completion")
  eq({ "a.txt", "d/b.txt", "d/c.txt" }, listed(), "files")
  require("handoff").setup({ context = { max_files = 2 } })
  completion.invalidate()
  eq(2, #listed(), "capped")
end)

it("blink.cmp and nvim-cmp sources: candidates, and registration only when installed", function()
  project({ ["a.lua"] = { "a" } })
  local blink = require("handoff.completion.blink").new()
  eq({ "#", "@" }, blink:get_trigger_characters(), "trigger characters")
  local got
  blink:get_completions({ line = "see #bu", cursor = { 1, 7 } }, function(r)
    got = r
  end)
  eq("#buffer", got.items[1].label, "first item")
  eq({ start = { line = 0, character = 4 }, ["end"] = { line = 0, character = 7 } }, got.items[1].textEdit.range, "range")
  blink:get_completions({ line = "x@a", cursor = { 1, 3 } }, function(r)
    got = r
  end)
  eq({}, got.items, "not a token")
  local cmp = require("handoff.completion.cmp").new()
  got = nil
  cmp:complete({ context = { cursor_before_line = "look @" } }, function(r)
    got = r
  end)
  vim.wait(5000, function()
    return got ~= nil
  end)
  eq({ "@a.lua" }, vim.tbl_map(function(i)
    return i.label
  end, got.items), "cmp items")
  -- Registration: nothing without the plugins; with them, each once.
  local completion = require("handoff.completion")
  completion.register()
  eq(false, completion.plugin_active(), "no plugin")
  local registered = {}
  package.loaded["cmp"] = {
    register_source = function(name, source)
      table.insert(registered, { "cmp", name, type(source.complete) })
    end,
  }
  package.loaded["blink.cmp"] = {
    add_source_provider = function(id, opts)
      table.insert(registered, { "blink", id, opts.module })
    end,
    add_filetype_source = function(ft, id)
      table.insert(registered, { "blink ft", ft, id })
    end,
  }
  completion.register()
  completion.register()
  package.loaded["cmp"], package.loaded["blink.cmp"] = nil, nil
  eq({
    { "cmp", "handoff", "function" },
    { "blink", "handoff", "handoff.completion.blink" },
    { "blink ft", "handoff-prompt", "handoff" },
  }, registered, "registered")
  eq(true, completion.plugin_active(), "a plugin shows the candidates")
  -- Fresh modules for the next tests (no plugin registered).
  for _, m in ipairs({ "handoff.completion", "handoff.completion.blink", "handoff.completion.cmp" }) do
    package.loaded[m] = nil
  end
end)

return { cases = cases, cleanup = cleanup }
