-- UI behaviour against the fake host: setup()'s validation, highlights, :Handoff completion,
-- the chat's rendering, and the handoff's <Esc> and live document driven by host records.
local fake = require("fake_host")
local state = require("handoff.state")
local api = vim.api

fake.install()

local function eq(want, got, what)
  if not vim.deep_equal(want, got) then
    error(("%s: expected %s, got %s"):format(what or "value", vim.inspect(want), vim.inspect(got)), 2)
  end
end

local function raises(fn, pattern)
  local ok, err = pcall(fn)
  if ok then
    error("expected an error matching " .. pattern, 2)
  end
  if not tostring(err):find(pattern, 1, true) then
    error(("error %q does not contain %q"):format(tostring(err), pattern), 2)
  end
  return tostring(err)
end

local function lines(buf)
  return api.nvim_buf_get_lines(buf, 0, -1, false)
end

local function esc_map(buf)
  local maps = buf and api.nvim_buf_get_keymap(buf, "n") or api.nvim_get_keymap("n")
  for _, m in ipairs(maps) do
    if m.lhs == "<Esc>" then
      return m
    end
  end
end

local DOC = "## Goal\nShip it.\n\n## Next Steps\n1. more"

local function cleanup()
  require("handoff.keymaps").restore_esc()
  state.busy, state.generating_handoff, state.handoff_started, state.run_started = false, false, nil, nil
  state.todos = {}
  require("handoff.chat").indicator_update()
  vim.cmd("silent! only | enew!")
  pcall(vim.keymap.del, "n", "<Esc>")
  fake.reset()
  require("handoff").setup({})
end

local cases = {}
local function it(name, fn)
  table.insert(cases, { name, fn })
end

it("setup() names an unknown or misspelled option and the one it probably meant", function()
  local handoff = require("handoff")
  local err = raises(function()
    handoff.setup({ layuot = {} })
  end, "unknown option layuot")
  assert(err:find("did you mean layout?", 1, true), err)
  err = raises(function()
    handoff.setup({ layout = { widht = 30 } })
  end, "unknown option layout.widht, did you mean layout.width?")
  raises(function()
    handoff.setup({ provider = { modle = "x" } })
  end, "provider.model?")
  raises(function()
    handoff.setup({ resume_last = "yes" })
  end, "resume_last")
  raises(function()
    handoff.setup({ layout = { position = "middle" } })
  end, 'layout.position must be')
  raises(function()
    handoff.setup({ keymaps = { stop = 3 } })
  end, "keymaps.stop")
  -- Valid options pass, and `false` disables a key.
  handoff.setup({ layout = { position = "left", width = 30 }, keymaps = { close = false }, resume_last = true })
  eq("left", require("handoff.config").options.layout.position, "layout.position")
end)

it("highlight groups are defined by setup() and again after :colorscheme", function()
  require("handoff").setup({})
  eq("Comment", api.nvim_get_hl(0, { name = "HandoffIndicator" }).link, "before")
  vim.cmd("highlight clear")
  vim.cmd("colorscheme default")
  eq("Comment", api.nvim_get_hl(0, { name = "HandoffIndicator" }).link, "after :colorscheme")
  eq("Title", api.nvim_get_hl(0, { name = "HandoffDocumentHeader" }).link, "document header")
end)

it(":Handoff completes the focus's last word as a path", function()
  local dir = vim.fn.tempname()
  vim.fn.mkdir(dir .. "/src", "p")
  vim.fn.writefile({}, dir .. "/src/lexer.rs")
  vim.fn.writefile({}, dir .. "/src/lib.rs")
  local cwd = vim.fn.getcwd()
  vim.cmd.cd(dir)
  local got = vim.fn.getcompletion("Handoff fix the bug in src/le", "cmdline")
  vim.cmd.cd(cwd)
  eq({ "src/lexer.rs" }, got, "completion")
  eq({}, require("handoff.commands").complete_focus("fix the "), "no word yet")
end)

it(":Handoff sends the focus; /handoff typed in the prompt goes to the host as typed", function()
  vim.cmd("Handoff keep it short")
  local sent = fake.calls_of("handoff")
  eq(1, #sent, "handoff notifications")
  eq("keep it short", sent[1].args[1], "focus")
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, { "/handoff the parser" })
  chat.submit()
  eq(1, #fake.calls_of("handoff"), "handoff notifications")
  eq({ "/handoff the parser" }, fake.calls_of("prompt")[1].args, "what the host got")
  eq({ "" }, lines(chat.prompt_buf), "the prompt is cleared")
end)

it("a transcript renders, a reply streams in and the indicator counts", function()
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  fake.emit({
    {
      type = "transcript",
      session_id = "abc",
      session_file = "/tmp/s.jsonl",
      items = {
        { kind = "user", text = "hello" },
        { kind = "assistant", model = "m", thinking = "hm", text = "hi there" },
      },
    },
  })
  local text = table.concat(lines(chat.chat_buf), "\n")
  assert(text:find("# Session abc", 1, true), text)
  assert(text:find("## You\n\nhello", 1, true), text)
  assert(text:find("> hm\n\nhi there", 1, true), text)
  fake.emit({ { type = "agent_start" }, { type = "message_start", kind = "assistant", model = "m" } })
  fake.emit({ { type = "delta", text = "Stre", tokens = 1 }, { type = "delta", text = "amed\nline", tokens = 2 } })
  text = table.concat(lines(chat.chat_buf), "\n")
  assert(text:find("Streamed\nline", 1, true), text)
  local indicator = chat.indicator_text()
  assert(indicator:find("^Generating…") and indicator:find("2 tokens$"), indicator)
  fake.emit({ { type = "message_end", stop_reason = "stop" }, { type = "agent_end", stop_reason = "stop" } })
  eq(nil, chat.indicator_text(), "indicator after the end")
end)

it("handoff records: <Esc> installed then restored, the document live then final", function()
  vim.keymap.set("n", "<Esc>", "<Cmd>nohlsearch<CR>")
  local code = api.nvim_get_current_buf()
  vim.keymap.set("n", "<Esc>", "<Cmd>let g:mine = 1<CR>", { buffer = code })
  fake.emit({ { type = "handoff_start" } })
  local view = require("handoff.handoff_view")
  local live = view.live_buffer()
  assert(live, "no live document buffer")
  eq(code, api.nvim_get_current_buf(), "the cursor moved")
  eq("handoff.nvim: cancel the handoff", esc_map().desc, "global <Esc>")
  eq("handoff.nvim: cancel the handoff", esc_map(code).desc, "buffer <Esc>")
  eq("handoff.nvim: cancel the handoff", esc_map(live).desc, "document <Esc>")
  -- <Esc> (the mapping's callback) asks the host to cancel.
  esc_map(code).callback()
  eq(1, #fake.calls_of("abort_handoff"), "abort_handoff sent")
  fake.emit({ { type = "delta", text = "## Goal\nShip", tokens = 3 } })
  eq({ "## Goal", "Ship" }, lines(live), "live text")
  local win = vim.fn.win_findbuf(live)[1]
  require("handoff.chat.indicator").update()
  assert(vim.wo[win].winbar:find("Generating handoff", 1, true), vim.wo[win].winbar)
  fake.emit({
    {
      type = "handoff_end",
      outcome = { kind = "done", document = DOC, session_file = "/tmp/new.jsonl", parent_session = "/tmp/s.jsonl" },
      notices = { { level = "info", message = "New session started with handoff context" } },
    },
  })
  eq(win, vim.fn.win_findbuf(live)[1], "the document's window")
  eq(vim.split(DOC, "\n"), lines(live), "final document")
  eq("handoff://new.md", api.nvim_buf_get_name(live), "the document is named after the new session")
  eq("", vim.wo[win].winbar, "header after success")
  eq("<Cmd>nohlsearch<CR>", esc_map().rhs, "global <Esc> restored")
  eq("<Cmd>let g:mine = 1<CR>", esc_map(code).rhs, "buffer <Esc> restored")
  eq(nil, esc_map(live), "no <Esc> left in the document")
end)

it("a host lost mid-handoff fails it: header says why, <Esc> restored", function()
  fake.emit({ { type = "handoff_start" } })
  local live = require("handoff.handoff_view").live_buffer()
  local win = vim.fn.win_findbuf(live)[1]
  require("handoff.events").host_lost("the host exited unexpectedly (exit code 9)")
  eq(false, state.generating_handoff, "generating")
  assert(vim.wo[win].winbar:find("Handoff failed: the host exited unexpectedly", 1, true), vim.wo[win].winbar)
  eq(nil, esc_map(), "global <Esc> left")
end)

it("a cancelled handoff closes the document split", function()
  local before = #api.nvim_list_wins()
  fake.emit({ { type = "handoff_start" } })
  eq(before + 1, #api.nvim_list_wins(), "windows while generating")
  fake.emit({ { type = "handoff_end", outcome = { kind = "cancelled" }, notices = {} } })
  eq(before, #api.nvim_list_wins(), "windows after cancel")
  eq(nil, require("handoff.handoff_view").live_buffer(), "live buffer")
end)

it("the todo list: :HandoffTodos window, live redraw, the chat line, User HandoffTodos", function()
  local fired = {}
  local au = api.nvim_create_autocmd("User", {
    pattern = "HandoffTodos",
    callback = function(ev)
      table.insert(fired, ev.data)
    end,
  })
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  local todos = {
    { content = "Read the code", status = "completed", activeForm = "Reading the code" },
    { content = "Fix the bug", status = "in_progress", activeForm = "Fixing the bug" },
    { content = "Run the tests", status = "pending", activeForm = "Running the tests" },
  }
  -- A resumed session's transcript carries its list: no chat line, the event fires.
  fake.emit({ { type = "transcript", session_id = "t", session_file = "/tmp/t.jsonl", items = {}, todos = todos } })
  eq(todos, require("handoff").todos(), "todos()")
  eq(1, #fired, "events")
  eq(2, fired[1].open, "open")
  eq(3, fired[1].total, "total")
  assert(not table.concat(lines(chat.chat_buf), "\n"):find("Todos:", 1, true), "a transcript adds no chat line")
  local before = #api.nvim_list_wins()
  local current = api.nvim_get_current_win()
  vim.cmd("HandoffTodos")
  eq(before + 1, #api.nvim_list_wins(), "windows")
  eq(current, api.nvim_get_current_win(), "the cursor stays")
  local buf = state.ui.todos_buf
  eq({ "- [x] Read the code", "- [~] Fixing the bug", "- [ ] Run the tests" }, lines(buf), "window")
  local marks = api.nvim_buf_get_extmarks(buf, -1, 0, -1, { details = true })
  local active = vim.tbl_filter(function(m)
    return m[4].line_hl_group == "HandoffTodoInProgress"
  end, marks)
  eq(1, #active, "in-progress marks")
  eq(1, active[1][2], "in-progress row")
  -- A live change redraws the window, shows the line in the chat and fires once.
  local next = vim.deepcopy(todos)
  next[2].status = "completed"
  next[3].status = "in_progress"
  fake.emit({ { type = "todos", todos = next } })
  eq({ "- [x] Read the code", "- [x] Fix the bug", "- [~] Running the tests" }, lines(buf), "redrawn")
  eq(2, #fired, "events")
  local text = table.concat(lines(chat.chat_buf), "\n")
  assert(text:find("*Todos: 1 open of 3*", 1, true), text)
  -- The same list again changes nothing.
  fake.emit({ { type = "todos", todos = next } })
  eq(2, #fired, "events after the same list")
  -- q in the window closes it; :HandoffTodos toggles.
  api.nvim_set_current_win(vim.fn.win_findbuf(buf)[1])
  api.nvim_feedkeys("q", "x", false)
  eq(before, #api.nvim_list_wins(), "closed by q")
  vim.cmd("HandoffTodos")
  vim.cmd("HandoffTodos")
  eq(before, #api.nvim_list_wins(), "toggled closed")
  -- A switch to a session without a list empties it.
  fake.emit({ { type = "transcript", session_id = "u", session_file = "/tmp/u.jsonl", items = {}, todos = {} } })
  eq({}, require("handoff").todos(), "after the switch")
  eq(0, fired[3].total, "event after the switch")
  api.nvim_del_autocmd(au)
end)

return { cases = cases, cleanup = cleanup }
