-- Thinking levels on the Lua side, against the fake host: setup()'s option, `/thinking` and
-- :HandoffThinking (with their completion), the meter's text, and the reply's thinking folded
-- in the chat.
local fake = require("fake_host")
local state = require("handoff.state")
local api = vim.api

fake.install()

local function eq(want, got, what)
  if not vim.deep_equal(want, got) then
    error(("%s: expected %s, got %s"):format(what or "value", vim.inspect(want), vim.inspect(got)), 2)
  end
end

local function lines(buf)
  return api.nvim_buf_get_lines(buf, 0, -1, false)
end

--- A status as the host answers `set_thinking`.
local function status(level)
  return { session_file = "/tmp/s.jsonl", session_id = "s", model = "mock-model", thinking = level }
end

local function cleanup()
  state.busy, state.thinking, state.model = false, nil, nil
  state.context_tokens, state.context_window = 0, 0
  vim.cmd("silent! only | enew!")
  fake.reset()
  require("handoff").setup({})
end

local cases = {}
local function it(name, fn)
  table.insert(cases, { name, fn })
end

it("setup() takes provider.thinking and reasoning_effort and checks the level", function()
  local handoff = require("handoff")
  local ok, err = pcall(handoff.setup, { provider = { thinking = "huge" } })
  assert(not ok and tostring(err):find([[provider.thinking must be one of "off", "minimal", "low", "medium", "high", "xhigh", got "huge"]], 1, true), tostring(err))
  ok, err = pcall(handoff.setup, { provider = { reasoning_effort = "yes" } })
  assert(not ok and tostring(err):find("reasoning_effort", 1, true), tostring(err))
  handoff.setup({ provider = { thinking = "medium", reasoning_effort = false } })
  local settings = require("handoff.config").host_settings()
  eq("medium", settings.thinking, "thinking sent to the host")
  eq(false, settings.reasoning_effort, "reasoning_effort sent to the host")
end)

it("/thinking high in the prompt asks the host and the meter shows the level", function()
  fake.replies.set_thinking = function(level)
    return status(level)
  end
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  fake.emit({ { type = "transcript", session_id = "s", session_file = "/tmp/s.jsonl", model = "mock-model", thinking = "off", items = {} } })
  local meter = require("handoff.meter")
  eq("mock-model", meter.text(), "meter with thinking off")
  api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, { "/thinking high" })
  chat.submit()
  eq({ "high" }, fake.calls_of("set_thinking")[1].args, "the request")
  eq(0, #fake.calls_of("prompt"), "nothing went to the model")
  eq("high", require("handoff").status().thinking, "status().thinking")
  eq("mock-model · high", meter.text(), "meter before any reply")
  fake.emit({ { type = "agent_end", stop_reason = "stop", context_tokens = 12000, context_window = 128000, context_percent = 9 } })
  eq("mock-model · high · 12k/128k (9%)", meter.text(), "meter after a reply")
  -- An unknown level never reaches the host.
  api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, { "/thinking lots" })
  chat.submit()
  eq(1, #fake.calls_of("set_thinking"), "requests after an unknown level")
  -- A transcript (a resumed session) brings its own level.
  fake.emit({ { type = "transcript", session_id = "t", session_file = "/tmp/t.jsonl", model = "mock-model", thinking = "low", items = {} } })
  eq("low", state.thinking, "level after a switch")
end)

it("/thinking and :HandoffThinking complete the levels; without one, a picker asks", function()
  local commands = require("handoff.commands")
  eq({ "minimal", "medium" }, vim.tbl_map(function(i)
    return i.word
  end, commands.complete_arg("thinking", "m")), "complete_arg")
  eq(nil, commands.complete_arg("new", ""), "a command without argument values")
  eq({ "/thinking" }, vim.tbl_map(function(i)
    return i.word
  end, commands.complete("thi")), "the command name")
  -- The omnifunc completes the argument after the name.
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  api.nvim_set_current_win(vim.fn.win_findbuf(chat.prompt_buf)[1])
  api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, { "/thinking h" })
  api.nvim_win_set_cursor(0, { 1, 11 })
  eq(10, commands.omnifunc(1, ""), "start of the argument")
  eq({ "high" }, vim.tbl_map(function(i)
    return i.word
  end, commands.omnifunc(0, "h")), "argument candidates")
  api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, { "/thi" })
  api.nvim_win_set_cursor(0, { 1, 4 })
  eq(0, commands.omnifunc(1, ""), "start of a command name")
  eq({ "low" }, vim.fn.getcompletion("HandoffThinking l", "cmdline"), ":HandoffThinking completion")
  local offered
  local select = vim.ui.select
  vim.ui.select = function(items, _, on_choice)
    offered = items
    on_choice("minimal")
  end
  fake.replies.set_thinking = function(level)
    return status(level)
  end
  vim.cmd("HandoffThinking")
  vim.ui.select = select
  eq({ "off", "minimal", "low", "medium", "high" }, offered, "the picker's levels")
  eq({ "minimal" }, fake.calls_of("set_thinking")[1].args, "the chosen level")
  vim.cmd("HandoffThinking medium")
  eq({ "medium" }, fake.calls_of("set_thinking")[2].args, "the typed level")
end)

--- In the chat's window: whether row `lnum` (1-based) is in a closed fold, and its fold text.
local function fold_at(lnum)
  local win = vim.fn.win_findbuf(require("handoff.chat").chat_buf)[1]
  return api.nvim_win_call(win, function()
    local start = vim.fn.foldclosed(lnum)
    return { closed = start ~= -1, start = start, text = start ~= -1 and vim.fn.foldtextresult(start) or nil, level = vim.fn.foldlevel(lnum) }
  end)
end

local function row_of(buf, text)
  for i, l in ipairs(lines(buf)) do
    if l == text then
      return i
    end
  end
  error("no line " .. text .. " in\n" .. table.concat(lines(buf), "\n"))
end

it("a reply's thinking is folded in the chat, as rendered and while it streams; <CR> and za toggle it", function()
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  fake.emit({
    {
      type = "transcript",
      session_id = "abc",
      session_file = "/tmp/s.jsonl",
      items = {
        { kind = "user", text = "hello" },
        { kind = "assistant", model = "m", thinking = "first\nsecond\nthird", text = "hi there" },
      },
    },
  })
  local buf = chat.chat_buf
  local text = table.concat(lines(buf), "\n")
  assert(text:find("> first\n> second\n> third\n\nhi there", 1, true), text)
  local first = row_of(buf, "> first")
  local fold = fold_at(first + 2)
  eq(true, fold.closed, "the thinking is folded")
  eq(first, fold.start, "the fold starts at the thinking")
  eq("▸ Thinking (3 lines)", fold.text, "fold text")
  eq(false, fold_at(row_of(buf, "hi there")).closed, "the answer is not folded")
  eq(0, fold_at(row_of(buf, "hello")).level, "nothing else folds")
  -- A streamed reply: its thinking folds as it arrives, the answer after it does not.
  fake.emit({ { type = "agent_start" }, { type = "message_start", kind = "assistant", model = "m" } })
  fake.emit({ { type = "thinking_delta", text = "Pondering ", tokens = 1 } })
  local streaming = row_of(buf, "> Pondering ")
  eq(true, fold_at(streaming).closed, "folded from the first piece")
  eq("▸ Thinking (1 line)", fold_at(streaming).text, "one line so far")
  fake.emit({ { type = "thinking_delta", text = "deeply\nstill", tokens = 2 } })
  eq({ true, streaming }, { fold_at(streaming + 1).closed, fold_at(streaming + 1).start }, "the fold grew")
  eq("▸ Thinking (2 lines)", fold_at(streaming).text, "two lines")
  fake.emit({ { type = "delta", text = "The answer.", tokens = 3 } })
  fake.emit({ { type = "message_end", stop_reason = "stop" }, { type = "agent_end", stop_reason = "stop" } })
  text = table.concat(lines(buf), "\n")
  assert(text:find("> Pondering deeply\n> still\n\nThe answer.", 1, true), text)
  eq(false, fold_at(row_of(buf, "The answer.")).closed, "the streamed answer is not folded")
  eq(true, fold_at(streaming).closed, "still folded")
  -- <CR> on the folded line opens it; za closes it again.
  local win = vim.fn.win_findbuf(buf)[1]
  api.nvim_set_current_win(win)
  api.nvim_win_set_cursor(win, { streaming, 0 })
  api.nvim_feedkeys(vim.keycode("<CR>"), "x", false)
  eq(false, fold_at(streaming).closed, "opened by <CR>")
  eq(streaming, api.nvim_win_get_cursor(win)[1], "the cursor stays on the thinking")
  api.nvim_feedkeys("za", "x", false)
  eq(true, fold_at(streaming).closed, "closed by za")
  -- Reopening the session renders the same folds.
  fake.emit({
    {
      type = "transcript",
      session_id = "abc",
      session_file = "/tmp/s.jsonl",
      items = { { kind = "assistant", model = "m", thinking = "only", text = "done" } },
    },
  })
  eq("▸ Thinking (1 line)", fold_at(row_of(buf, "> only")).text, "after a re-render")
  eq(false, fold_at(row_of(buf, "done")).closed, "the answer after a re-render")
  -- The folding belongs to the chat buffer: another buffer shown in its window keeps its own.
  api.nvim_set_current_win(win)
  vim.cmd("enew")
  eq("manual", vim.wo.foldmethod, "another buffer in the chat's window")
end)

it("thinking opened while it streams stays open as it grows; a closed one stays closed; a new window folds it too", function()
  require("handoff").open_chat()
  local chat = require("handoff.chat")
  local buf = chat.chat_buf
  fake.emit({ { type = "transcript", session_id = "abc", session_file = "/tmp/s.jsonl", items = {} } })
  fake.emit({ { type = "agent_start" }, { type = "message_start", kind = "assistant", model = "m" } })
  fake.emit({ { type = "thinking_delta", text = "one\ntwo", tokens = 1 } })
  local first = row_of(buf, "> one")
  local win = vim.fn.win_findbuf(buf)[1]
  api.nvim_win_call(win, function()
    vim.cmd(first .. "foldopen")
  end)
  eq(false, fold_at(first).closed, "opened")
  fake.emit({ { type = "thinking_delta", text = "\nthree", tokens = 2 } })
  eq(false, fold_at(first).closed, "still open as it grows")
  eq(1, fold_at(first + 2).level, "the fold takes the new line")
  api.nvim_win_call(win, function()
    vim.cmd(first .. "foldclose")
  end)
  fake.emit({ { type = "thinking_delta", text = "\nfour", tokens = 3 } })
  eq({ true, first, "▸ Thinking (4 lines)" }, { fold_at(first + 3).closed, fold_at(first + 3).start, fold_at(first).text }, "closed again, all four lines")
  fake.emit({ { type = "delta", text = "Answer.", tokens = 4 } })
  fake.emit({ { type = "message_end", stop_reason = "stop" }, { type = "agent_end", stop_reason = "stop" } })
  -- Closed and opened again: the new window folds the thinking as well.
  require("handoff.chat").close()
  require("handoff").open_chat()
  eq("▸ Thinking (4 lines)", fold_at(first).text, "folded in the new window")
  eq(false, fold_at(row_of(buf, "Answer.")).closed, "the answer is not folded")
end)

return { cases = cases, cleanup = cleanup }
