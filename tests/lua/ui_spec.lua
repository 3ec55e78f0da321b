-- UI behaviour against the fake host: setup()'s validation, highlights, :Handoff completion,
-- the chat's rendering, and the handoff's <Esc> and live document driven by host records.
local fake = require("fake_host")
local h = require("helpers")
local eq, raises, lines = h.eq, h.raises, h.lines
local state = require("handoff.state")
local api = vim.api

fake.install()

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

local cases, it = h.suite()

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

it(":Handoff sends its words as typed (the host reads --to NAME in them), and the bang as review", function()
  vim.cmd("Handoff keep it short --to codex")
  vim.cmd("Handoff! --to ours")
  local sent = fake.calls_of("handoff")
  eq(2, #sent, "handoff notifications")
  eq({ "keep it short --to codex", {} }, sent[1].args, "the words and no flags")
  eq({ "--to ours", { review = true } }, sent[2].args, "review")
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

it("a redraw of a shorter session (/back) puts its last lines in view, not past its end", function()
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  local win = vim.fn.win_findbuf(chat.chat_buf)[1]
  local function items(n)
    local out = {}
    for i = 1, n do
      -- Replies with thinking: folded in the chat, as a real session's are.
      table.insert(out, { kind = i % 2 == 1 and "user" or "assistant", model = "m", thinking = "thought\nat length", text = "message " .. i })
    end
    return out
  end
  local function view()
    vim.cmd("redraw")
    return api.nvim_win_call(win, function()
      return { top = vim.fn.line("w0"), bottom = vim.fn.line("w$"), last = vim.fn.line("$"), height = api.nvim_win_get_height(0) }
    end)
  end
  fake.emit({ { type = "transcript", session_id = "long", session_file = "/tmp/long.jsonl", items = items(120) } })
  local long = view()
  eq(long.last, long.bottom, "the long session ends at the window's bottom: " .. vim.inspect(long))
  assert(long.top > 1, vim.inspect(long))
  -- `/back` to the session it was handed off from, a shorter one: switched, then drawn anew.
  fake.emit({
    { type = "session_switch", old = "/tmp/long.jsonl", new = "/tmp/short.jsonl", reason = "back" },
    { type = "transcript", session_id = "short", session_file = "/tmp/short.jsonl", items = items(12) },
  })
  local short = view()
  eq(short.last, short.bottom, "the short session's last line is in view: " .. vim.inspect(short))
  -- Not the last line alone at the top of an otherwise empty window (topline 94 of 94).
  assert(short.top < short.last - 10, "the window shows the session's last lines: " .. vim.inspect(short))
end)

it("a running command shows the end of its output and counts the lines before it", function()
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  fake.emit({ { type = "transcript", session_id = "abc", items = {} } })
  fake.emit({ { type = "tool_start", id = "c1", tool = "bash", summary = "loud", args = {} } })
  -- An update carries the end of the output (whole lines) and how many came before it.
  local tail = {}
  for i = 991, 1000 do
    table.insert(tail, "line " .. i)
  end
  fake.emit({ { type = "tool_update", id = "c1", tail = table.concat(tail, "\n") .. "\n", earlier = 990 } })
  local l = lines(chat.chat_buf)
  eq({ "**▸ bash** `loud`", "*… 990 earlier lines*", "```", "line 991" }, vim.list_slice(l, #l - 13, #l - 10),
    "a short tail: all of it")
  eq("line 1000", l[#l - 1], "the last line")
  -- More lines than the chat shows: the rest count as earlier.
  table.insert(tail, 1, "line 990")
  for i = 1001, 1005 do
    table.insert(tail, "line " .. i)
  end
  fake.emit({ { type = "tool_update", id = "c1", tail = table.concat(tail, "\n"), earlier = 989 } })
  l = lines(chat.chat_buf)
  eq("*… 993 earlier lines*", l[#l - 14], "earlier lines")
  eq({ "```", "line 994" }, vim.list_slice(l, #l - 13, #l - 12), "first shown")
  eq({ "line 1005", "```" }, vim.list_slice(l, #l - 1, #l), "last shown")
  -- The result replaces the live block.
  fake.emit({ { type = "tool_end", id = "c1", tool = "bash", is_error = false, text = "done\n" } })
  l = lines(chat.chat_buf)
  eq({ "**▸ bash** `loud`", "```", "done", "```", "" }, vim.list_slice(l, #l - 4, #l), "the result")
  -- Lines a result does not hold (they are in the file its last line names) count as earlier.
  fake.emit({ { type = "tool_start", id = "c2", tool = "bash", summary = "louder", args = {} } })
  fake.emit({ { type = "tool_end", id = "c2", tool = "bash", is_error = false, text = "x\ny", earlier = 5 } })
  l = lines(chat.chat_buf)
  eq({ "**▸ bash** `louder`", "*… 5 earlier lines*", "```", "x", "y", "```", "" }, vim.list_slice(l, #l - 6, #l), "cut result")
end)

it("a call that waits for an answer while the chat is closed says so; with the chat open the chat shows it", function()
  local approval = { type = "tool_approval", tool = "edit", kind = "edit", path = vim.fn.getcwd() .. "/calc.py", args = {},
    diff = "+x", answers = { "allow", "reject" } }
  local function waits()
    return vim.tbl_filter(function(n)
      return n.msg:find("waits for your answer", 1, true) ~= nil
    end, _G.notes)
  end
  _G.notes = {}
  -- The control first: the chat open.
  require("handoff").open_chat()
  fake.emit({ vim.tbl_extend("force", approval, { id = "a1" }) })
  eq({}, waits(), "the chat shows it")
  require("handoff").toggle_chat()
  eq(false, require("handoff.chat").is_open(), "closed")
  fake.emit({ vim.tbl_extend("force", approval, { id = "a2" }) })
  local said = waits()
  eq(1, #said, "one notice")
  eq("handoff.nvim: `edit` calc.py waits for your answer: :HandoffChat shows it", said[1].msg, "what waits, and where")
  eq(vim.log.levels.WARN, said[1].level, "level")
  fake.emit({ { type = "tool_approval_end", id = "a1" }, { type = "tool_approval_end", id = "a2" } })
end)

it("a tool's output shows its last lines, counting the ones the host left out; setup() tells the host how many", function()
  require("handoff").setup({ tool_output_lines = 3 })
  eq(3, require("handoff.host").configure_args().tool_output_lines, "configure's argument")
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  fake.emit({
    {
      type = "transcript",
      session_id = "abc",
      session_file = "/tmp/s.jsonl",
      items = {
        { kind = "tool", tool = "read", text = "l8\nl9\nl10\n", is_error = false, earlier_lines = 7 },
        { kind = "tool", tool = "bash", text = "a\nb\nc\nd\ne", is_error = true },
        { kind = "tool", tool = "ls", text = "x", is_error = false },
      },
    },
  })
  local text = table.concat(lines(chat.chat_buf), "\n")
  assert(text:find("*… 7 earlier lines (all of it is in the session)*\n```\nl8\nl9\nl10\n```", 1, true), text)
  assert(text:find("*bash failed:*\n*… 2 earlier lines (all of it is in the session)*\n```\nc\nd\ne\n```", 1, true), text)
  assert(text:find("```\nx\n```", 1, true) and not text:find("earlier lines[^\n]*\n```\nx"), text)
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

--- The virtual lines of the chat's namespace in `buf`: { row (1-based), text }.
local function virt_lines(buf)
  local out = {}
  local ns = api.nvim_get_namespaces().handoff_chat
  for _, m in ipairs(api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    for _, vl in ipairs(m[4].virt_lines or {}) do
      table.insert(out, { m[2] + 1, vl[1][1], vl[1][2] })
    end
  end
  return out
end

it("token counts: the usage with its cached part under each assistant message, streamed or drawn", function()
  local chat_lines = require("handoff.chat.lines")
  eq("420", chat_lines.tokens(420), "small")
  eq("9.8k", chat_lines.tokens(9800), "thousands")
  eq("12.3k", chat_lines.tokens(12345), "rounded")
  eq("1k", chat_lines.tokens(1000), "no .0")
  eq("1.2M", chat_lines.tokens(1234567), "millions")
  eq("· 12.3k in (9.8k cached) · 420 out",
    chat_lines.usage_text({ input_tokens = 12345, cached_tokens = 9800, output_tokens = 420 }), "usage")
  eq("· 2k in (1.5k written to cache) · 7 out",
    chat_lines.usage_text({ input_tokens = 2000, cache_write_tokens = 1500, output_tokens = 7 }), "cache write")
  eq("· 7 out", chat_lines.usage_text({ output_tokens = 7 }), "output only")
  eq(nil, chat_lines.usage_text({}), "nothing reported")
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  fake.emit({
    {
      type = "transcript",
      session_id = "abc",
      items = {
        { kind = "user", text = "hello" },
        { kind = "assistant", model = "m", text = "hi\nthere", input_tokens = 12345, cached_tokens = 9800, output_tokens = 420 },
        { kind = "assistant", model = "m", text = "no usage" },
      },
    },
  })
  local l = lines(chat.chat_buf)
  local marks = virt_lines(chat.chat_buf)
  eq(1, #marks, "one usage line: " .. vim.inspect(marks))
  eq("there", l[marks[1][1]], "under the message's last line")
  eq("· 12.3k in (9.8k cached) · 420 out", marks[1][2], "drawn")
  eq("HandoffUsage", marks[1][3], "highlight")
  eq("Comment", api.nvim_get_hl(0, { name = "HandoffUsage" }).link, "HandoffUsage links to Comment")
  -- Streamed: the same line once the message ends (the chat's text itself is unchanged).
  fake.emit({ { type = "agent_start" }, { type = "message_start", kind = "assistant", model = "m" } })
  fake.emit({ { type = "delta", text = "streamed\nreply", tokens = 2 } })
  local before = lines(chat.chat_buf)
  fake.emit({
    { type = "message_end", kind = "assistant", stop_reason = "stop", input_tokens = 1530, cached_tokens = 1200,
      cache_write_tokens = 300, output_tokens = 42 },
    { type = "agent_end", stop_reason = "stop" },
  })
  local after = lines(chat.chat_buf)
  eq(before, vim.list_slice(after, 1, #before), "the text streamed stays as it was")
  marks = virt_lines(chat.chat_buf)
  eq(2, #marks, vim.inspect(marks))
  eq("reply", after[marks[2][1]], "under the streamed message's last line")
  eq("· 1.5k in (1.2k cached, 300 written to cache) · 42 out", marks[2][2], "streamed")
  eq(42, state.tokens, "the provider's count replaces the estimate")
end)

-- The host's `sessions` record: placed in their chains (the host's `session::chain`), newest
-- chain first, each session under the one it was handed off from.
local SESSIONS = {
  { path = "/s/e.jsonl", timestamp = "2026-01-05", first_message = "other work", message_count = 2, depth = 0 },
  { path = "/s/a.jsonl", timestamp = "2026-01-01", first_message = "start", message_count = 6, depth = 0 },
  { path = "/s/b.jsonl", timestamp = "2026-01-02", first_message = "go on", message_count = 3, parent_session = "/s/a.jsonl", depth = 1 },
  { path = "/s/c.jsonl", timestamp = "2026-01-04", first_message = "", message_count = 1, parent_session = "/s/b.jsonl", depth = 2, current = true },
  { path = "/s/d.jsonl", timestamp = "2026-01-03", first_message = "unrelated", message_count = 4, depth = 0 },
  -- Its parent is not in this directory's list: it starts a chain.
  { path = "/s/f.jsonl", timestamp = "2025-12-31", first_message = "orphan", message_count = 2, parent_session = "/elsewhere/x.jsonl", depth = 0 },
}

it(":HandoffSessions asks the host for the list and draws its record, children under their parent", function()
  local shown, prompt
  local select = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    prompt = opts.prompt
    shown = vim.tbl_map(opts.format_item, items)
    on_choice(items[3])
  end
  local ok, err = pcall(vim.cmd, "HandoffSessions")
  eq(1, #fake.calls_of("sessions"), "the list is asked for, never waited for")
  eq("notify", fake.calls_of("sessions")[1].kind, "a notification")
  eq(nil, shown, "no picker before the list")
  fake.emit({ { type = "sessions", sessions = SESSIONS } })
  -- A second record nobody asked for opens nothing.
  fake.emit({ { type = "sessions", sessions = SESSIONS } })
  vim.ui.select = select
  assert(ok, err)
  eq("Resume session", prompt, "prompt")
  eq({
    "2026-01-05  other work  [2 messages]",
    "2026-01-01  start  [6 messages]",
    "⇠ 2026-01-02  go on  [3 messages]",
    "  ⇠ 2026-01-04  (no prompt yet)  [1 messages] (current)",
    "2026-01-03  unrelated  [4 messages]",
    "2025-12-31  orphan  [2 messages]",
  }, shown, "picker items")
  eq(1, #fake.calls_of("resume"), "one picker")
  eq({ "/s/b.jsonl" }, fake.calls_of("resume")[1].args, "resumed the chosen one")
end)

it(":HandoffSessions! opens the choice read-only; gp on a 'Handed off from' line opens the parent", function()
  local select = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    assert(opts.prompt:find("read-only", 1, true), opts.prompt)
    on_choice(items[3]) -- b, handed off from a
  end
  local ok, err = pcall(vim.cmd, "HandoffSessions!")
  fake.emit({ { type = "sessions", sessions = SESSIONS } })
  vim.ui.select = select
  assert(ok, err)
  eq(0, #fake.calls_of("resume"), "nothing resumed")
  eq({ "/s/b.jsonl" }, fake.calls_of("view_session")[1].args, "the host reads the file")
  local buf = api.nvim_get_current_buf()
  eq("handoff://session/b.md", api.nvim_buf_get_name(buf), "buffer name")
  eq("markdown", vim.bo[buf].filetype, "filetype")
  eq(false, vim.bo[buf].modifiable, "not modifiable")
  eq("nofile", vim.bo[buf].buftype, "buftype")
  eq("*Loading…*", lines(buf)[3], "placeholder")
  -- The host's answer fills it.
  fake.emit({
    {
      type = "session_view",
      path = "/s/b.jsonl",
      session_id = "bbb",
      parent_session = "/s/a.jsonl",
      items = {
        { kind = "handoff", text = "## Goal\nShip." },
        { kind = "user", text = "go on" },
        { kind = "assistant", text = "going", output_tokens = 3 },
      },
      earlier = 0,
    },
  })
  local l = lines(buf)
  eq("# Session bbb", l[1], "title")
  eq("*Read-only: /s/b.jsonl*", l[2], "says what it is")
  eq("*Handed off from a.jsonl — gp on this line opens it read-only*", l[3], "names the parent and the key")
  local text = table.concat(l, "\n")
  assert(text:find("## You\n\ngo on", 1, true), text)
  assert(text:find("going", 1, true), text)
  -- gp elsewhere does not open anything; on the parent line it opens the parent.
  api.nvim_win_set_cursor(0, { 1, 0 })
  vim.cmd("normal gp")
  eq(1, #fake.calls_of("view_session"), "gp off the line")
  api.nvim_win_set_cursor(0, { 3, 0 })
  vim.cmd("normal gp")
  eq({ "/s/a.jsonl" }, fake.calls_of("view_session")[2].args, "gp on the parent line")
  eq("handoff://session/a.md", api.nvim_buf_get_name(0), "the parent's view")
  -- A file the host cannot read says so.
  fake.emit({ { type = "session_view", path = "/s/a.jsonl", items = {}, earlier = 0, error = "no such file" } })
  assert(table.concat(lines(0), "\n"):find("no such file", 1, true), table.concat(lines(0), "\n"))
end)

it("gp on the chat's 'Handed off from' header opens the parent read-only, the chat stays", function()
  require("handoff").setup({ keymaps = { parent = "gp" } })
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  fake.emit({
    {
      type = "transcript",
      session_id = "ccc",
      session_file = "/s/c.jsonl",
      parent_session = "/s/b.jsonl",
      items = { { kind = "handoff", text = "## Goal\nShip." } },
    },
  })
  local l = lines(chat.chat_buf)
  eq("*Handed off from b.jsonl — gp on this line opens it read-only*", l[2], "header")
  local win = vim.fn.win_findbuf(chat.chat_buf)[1]
  api.nvim_set_current_win(win)
  api.nvim_win_set_cursor(win, { 2, 0 })
  vim.cmd("normal gp")
  eq({ "/s/b.jsonl" }, fake.calls_of("view_session")[1].args, "view asked")
  eq(0, #fake.calls_of("resume"), "no switch")
  eq("handoff://session/b.md", api.nvim_buf_get_name(0), "the view has the focus")
  eq("/s/c.jsonl", state.session_file, "the current session is unchanged")
  eq(l, lines(chat.chat_buf), "the chat is unchanged")
  -- The key is configurable, and `false` takes it (and its hint) away.
  require("handoff").setup({ keymaps = { parent = false } })
  fake.emit({ { type = "transcript", session_id = "ccc", parent_session = "/s/b.jsonl", items = {} } })
  eq("*Handed off from b.jsonl*", lines(chat.chat_buf)[2], "no key, no hint")
end)

it("the review finds a file's hunks again only when its text or the session's calls changed", function()
  local review = require("handoff.review")
  local changes = require("handoff.changes")
  local dir = vim.fn.tempname()
  vim.fn.mkdir(dir, "p")
  local function write(path, text)
    vim.fn.writefile(vim.split(text, "\n", { plain = true }), path)
  end
  -- Two files the agent wrote (one loaded, one not), each then changed by the user.
  local calls = {}
  for _, name in ipairs({ "open.txt", "closed.txt" }) do
    local path = dir .. "/" .. name
    write(path .. ".before", "a\nb\nc")
    write(path .. ".after", "a\nB\nc")
    write(path, "a\nB\nc\nmine")
    table.insert(calls, { call_id = "c_" .. name, tool = "write", path = path, before_file = path .. ".before",
      after_file = path .. ".after", hunks = { { id = #calls + 1, before = { start = 1, ["end"] = 2 }, after = { start = 1, ["end"] = 2 }, state = "pending" } } })
  end
  vim.cmd("edit " .. vim.fn.fnameescape(calls[1].path))
  local hunks, found = changes.hunks, 0
  changes.hunks = function(...)
    found = found + 1
    return hunks(...)
  end
  -- The session's review as the host answers it (the review's state is its own).
  local function from_host(list)
    fake.replies.review = { calls = list }
    require("handoff.host").ensure()
    review.refresh({ quiet = true })
  end
  local ok, err = pcall(function()
    from_host(calls)
    eq(2, #review.located(), "both files' hunks")
    eq(2, found, "each file found once")
    review.draw()
    review.located()
    review.jump(true)
    eq(2, found, "nothing changed: nothing found again")
    -- The user types in the loaded one: that file only.
    api.nvim_buf_set_lines(0, 0, 1, false, { "A" })
    review.draw()
    review.located()
    eq(3, found, "the changed buffer's file again, once")
    -- New calls from the host: every file again.
    from_host(vim.deepcopy(calls))
    review.located()
    eq(5, found, "new calls: both again")
  end)
  changes.hunks = hunks
  review.reset()
  vim.cmd("silent! %bwipeout!")
  assert(ok, err)
end)

return { cases = cases, cleanup = cleanup }
