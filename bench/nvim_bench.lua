--- Benchmarks run inside a real Neovim 0.11 (headless, or a TUI in a pty), driven by bench.py:
---
---   nvim --clean -n --headless --cmd 'set rtp^=ROOT' -c 'luafile ROOT/bench/nvim_bench.lua'
---
--- with $HANDOFF_BENCH holding the parameters as JSON (`mode`, `bin`, `base_url`, `session_dir`,
--- `log_file`, `out`, …). Results are written as JSON to `out`, then Neovim quits. Every time is
--- taken here with vim.uv.hrtime(), so process start-up is never part of a figure.
---
--- Modes:
---   handoff  `:Handoff` → `User HandoffDone`, `runs` times (a warm-up first), each from the same
---            source session (resumed before each run), with the mock answering at once.
---   stream   a prompt whose reply streams at full speed: tokens rendered per second, and the
---            lateness of a timer re-armed every `interval_ms` (main-loop latency) before and
---            during the stream.
---   resume   the host's RSS idle, then with a session resumed: `resume()` → the chat on
---            screen with that session (`rendered_ms`: drawn and redrawn), its parts, and the
---            RSS of the host (and its peak) and of Neovim then.
---   tools    a prompt whose turn (scripted by bench.py) streams text, runs a loud bash command
---            (tools allowed without asking), streams text again: main-loop latency through the
---            whole turn, the host's and Neovim's memory (sampled, and the host's peak), and
---            what the chat showed of the command's output.
---   sessions start-up in a folder of many sessions (the newest resumed), then `:HandoffSessions`:
---            the time until the picker has the list, the longest main-loop gap meanwhile.
---   agents   an external ACP agent (`agent_command`) driven by our client (`:HandoffAgent`) and
---            by codecompanion.nvim's, in this one Neovim: session start, prompt → the reply's
---            first text in the chat buffer, and main-loop latency through a long stream.
---   land     `files` (made by bench.py) loaded in buffers, then a prompt whose reply (scripted
---            by bench.py) writes all of them in one turn (tools allowed without asking): the
---            lateness of a timer from the prompt until the review (issue 41) has drawn all
---            `hunks`, and 100 ms after: what the editor is held while a many-file change lands.
local P = vim.json.decode(vim.env.HANDOFF_BENCH)
local uv = vim.uv
local hr = uv.hrtime

local function ms(ns)
  return ns / 1e6
end

local function finish(result)
  local f = assert(io.open(P.out, "w"))
  f:write(vim.json.encode(result))
  f:close()
  vim.cmd("qa!")
end

local function fail(msg)
  finish({ error = msg })
end

--- Reports Lua errors through the result file instead of hanging.
local function guard(fn)
  return function(...)
    local ok, err = pcall(fn, ...)
    if not ok then
      fail(tostring(err))
    end
  end
end

local function proc_kib(pid, field)
  local f = io.open(("/proc/%d/status"):format(pid))
  if not f then
    return nil
  end
  for line in f:lines() do
    local v = line:match("^" .. field .. ":%s+(%d+)")
    if v then
      f:close()
      return tonumber(v)
    end
  end
  f:close()
end

--- CPU time (user + system) a process has used, in ms (clock ticks of 10 ms), and its minor
--- page faults.
local function proc_cpu_ms(pid)
  local f = io.open(("/proc/%d/stat"):format(pid))
  if not f then
    return nil
  end
  local line = f:read("*l")
  f:close()
  local fields = vim.split(line:match("%) (.*)$"), " ")
  -- after "pid (comm) ": state is field 3, minflt field 10, utime field 14, stime field 15
  return (tonumber(fields[12]) + tonumber(fields[13])) * 10, tonumber(fields[8])
end

local notes = {}
vim.notify = function(msg)
  table.insert(notes, msg)
end

require("handoff").setup({
  bin = P.bin,
  session_dir = P.session_dir,
  log_file = P.log_file,
  provider = { api = "openai", base_url = P.base_url, model = "mock-model", max_retries = 0, timeout = 30 },
  -- The tools mode's bash call runs without a question, as for a user who allowed it.
  tools = (P.mode == "tools" or P.mode == "land") and { policy = "allow_all" } or nil,
  -- The sessions mode starts as a user who continues the newest session does.
  resume_last = P.resume_last or nil,
  -- The agents mode's external agent, for `:HandoffAgent bench`.
  agents = P.agent_command and { bench = { command = P.agent_command } } or nil,
})

local function once(pattern, fn)
  vim.api.nvim_create_autocmd("User", { pattern = pattern, once = true, callback = guard(fn) })
end

-- A deadline for the whole run: a hang fails with what was noticed so far.
local deadline = uv.new_timer()
deadline:start((P.timeout or 120) * 1000, 0, vim.schedule_wrap(function()
  fail("timed out; notices: " .. table.concat(notes, " | "))
end))

local modes = {}

function modes.handoff()
  local times, starts = {}, {}
  local n = 0
  local one
  local function run()
    local t0 = hr()
    once("HandoffStart", function()
      starts[#starts + 1] = ms(hr() - t0)
    end)
    once("HandoffDone", function(ev)
      local dt = ms(hr() - t0)
      if vim.fn.filereadable(ev.data.session_file) ~= 1 then
        return fail("no new session on disk")
      end
      n = n + 1
      if n > 1 then -- the first run starts the host
        times[#times + 1] = dt
      end
      if n > P.runs then
        return finish({ times_ms = times, start_ms = starts, notes = notes })
      end
      -- Close the document split so every run opens the same windows.
      vim.schedule(guard(function()
        vim.cmd("silent! only")
        one()
      end))
    end)
    vim.cmd("Handoff")
  end
  -- Resume the source session, then let the editor idle a moment (as a user would before typing
  -- :Handoff), so the host's event pacing starts from a quiet state.
  function one()
    if not require("handoff").resume(P.session) then
      return fail("resume failed: " .. table.concat(notes, " | "))
    end
    -- The host loads it in the background: wait until it is the session, then idle a moment.
    local function loaded()
      if require("handoff.state").session_file ~= P.session then
        return vim.defer_fn(guard(loaded), 5)
      end
      vim.defer_fn(guard(run), 50)
    end
    loaded()
  end
  one()
end

--- Main-loop latency: a uv timer repeating every `interval` ms schedules a Lua callback (as any
--- plugin's timer would); a sample is how late that callback runs: the tick's own lateness (the
--- gap since the previous tick beyond `interval`: the event loop did not run) plus the wait of
--- the scheduled callback (the main loop was busy with other events).
local function latency_probe(interval)
  local probe = { samples = {}, tick = {}, queue = {}, at = {} }
  local timer = uv.new_timer()
  local prev
  timer:start(interval, interval, function()
    local now = hr()
    local late = prev and math.max(0, ms(now - prev) - interval) or 0
    prev = now
    vim.schedule(function()
      if probe.stopped then
        return
      end
      local wait = ms(hr() - now)
      probe.tick[#probe.tick + 1] = late
      probe.queue[#probe.queue + 1] = wait
      probe.samples[#probe.samples + 1] = late + wait
      probe.at[#probe.at + 1] = now
    end)
  end)
  function probe.stop()
    probe.stopped = true
    timer:stop()
    timer:close()
    return probe.samples
  end
  return probe
end

function modes.stream()
  local chat = require("handoff.chat")
  local events = require("handoff.events")
  require("handoff").open_chat()
  -- The chat's highlighting, for comparison: "syntax" (the plugin's default: filetype markdown,
  -- Vim regex syntax), "treesitter" or "off".
  if P.highlight == "treesitter" then
    vim.treesitter.start(chat.chat_buf, "markdown")
  elseif P.highlight == "off" then
    vim.bo[chat.chat_buf].syntax = "OFF"
  end
  local interval = P.interval_ms or 8
  -- Quiet main loop first (the floor of the measurement).
  local idle = latency_probe(interval)
  vim.defer_fn(guard(function()
    local idle_samples = idle.stop()
    local first, last, deltas, batches, bytes = nil, nil, 0, 0, 0
    local t0 = hr()
    local append = chat.append_text
    chat.append_text = function(text, thinking)
      local now = hr()
      first = first or now
      last = now
      deltas = deltas + 1
      bytes = bytes + #(text or "")
      return append(text, thinking)
    end
    local dispatch = events.dispatch
    local dispatch_ms, dispatch_at = {}, {}
    events.dispatch = function(batch)
      local t = hr()
      dispatch(batch)
      batches = batches + 1
      dispatch_ms[#dispatch_ms + 1] = ms(hr() - t)
      dispatch_at[#dispatch_at + 1] = ms(t - t0)
    end
    local probe = latency_probe(interval)
    once("HandoffAgentEnd", function(ev)
      local t_end = hr()
      local tokens = require("handoff.state").tokens
      -- Keep probing a little: the last batch's redraw belongs to the stream too.
      vim.defer_fn(guard(function()
        local samples = probe.stop()
        local lines = vim.api.nvim_buf_get_lines(chat.chat_buf, 0, -1, false)
        finish({
          tokens = tokens,
          stop_reason = ev.data.stop_reason,
          total_ms = ms(t_end - t0),
          first_delta_ms = first and ms(first - t0),
          stream_ms = first and ms(last - first),
          deltas = deltas,
          batches = batches,
          bytes = bytes,
          chat_lines = #lines,
          chat_bytes = #table.concat(lines, "\n"),
          dispatch_ms = dispatch_ms,
          lateness_ms = samples,
          tick_lateness_ms = probe.tick,
          queue_wait_ms = probe.queue,
          dispatch_at_ms = dispatch_at,
          idle_lateness_ms = idle_samples,
          notes = notes,
        })
      end), P.tail_ms or 100)
    end)
    require("handoff").prompt("stream as fast as you can")
  end), P.idle_ms or 1000)
end

function modes.tools()
  local chat = require("handoff.chat")
  local events = require("handoff.events")
  local state = require("handoff.state")
  local api = vim.api
  -- The command's full output goes to a file in TMPDIR (bench.py removes it after the run).
  vim.env.TMPDIR = P.tmpdir or vim.env.TMPDIR
  require("handoff").open_chat()
  if P.highlight == "off" then
    vim.bo[chat.chat_buf].syntax = "OFF"
  end
  local interval = P.interval_ms or 8
  local idle = latency_probe(interval)
  vim.defer_fn(guard(function()
    local idle_samples = idle.stop()
    local host, me = state.pid, uv.os_getpid()
    if not host then
      return fail("the host did not start: " .. table.concat(notes, " | "))
    end
    local host_idle = proc_kib(host, "VmRSS")
    local nvim_idle = proc_kib(me, "VmRSS")
    -- Memory every 50 ms (a /proc read each: ~30 µs of the main loop).
    local host_max, nvim_max = host_idle, nvim_idle
    local mem = uv.new_timer()
    mem:start(50, 50, function()
      host_max = math.max(host_max, proc_kib(host, "VmRSS") or 0)
      nvim_max = math.max(nvim_max, proc_kib(me, "VmRSS") or 0)
    end)
    local host_cpu0, nvim_cpu0 = proc_cpu_ms(host), proc_cpu_ms(me)
    local t0 = hr()
    local updates, update_bytes, update_ms, live = 0, 0, {}, nil
    local tool_update = chat.tool_update
    chat.tool_update = function(r)
      local t = hr()
      tool_update(r)
      update_ms[#update_ms + 1] = ms(hr() - t)
      updates = updates + 1
      update_bytes = update_bytes + #(r.tail or "")
      -- What the chat shows of the running command (its block ends the buffer).
      local n = api.nvim_buf_line_count(chat.chat_buf)
      live = api.nvim_buf_get_lines(chat.chat_buf, math.max(0, n - 16), n, false)
    end
    -- What the chat shows once the command is done (its result).
    local result
    local tool_end_chat = chat.tool_end
    chat.tool_end = function(r)
      tool_end_chat(r)
      local n = api.nvim_buf_line_count(chat.chat_buf)
      result = api.nvim_buf_get_lines(chat.chat_buf, math.max(0, n - 18), n, false)
    end
    local dispatch = events.dispatch
    local dispatch_ms = {}
    events.dispatch = function(batch)
      local t = hr()
      dispatch(batch)
      dispatch_ms[#dispatch_ms + 1] = ms(hr() - t)
    end
    local tool_start, tool_end
    once("HandoffToolStart", function()
      tool_start = hr()
    end)
    once("HandoffToolEnd", function()
      tool_end = hr()
    end)
    local probe = latency_probe(interval)
    once("HandoffAgentEnd", function(ev)
      local t_end = hr()
      local host_cpu, nvim_cpu = proc_cpu_ms(host) - host_cpu0, proc_cpu_ms(me) - nvim_cpu0
      vim.defer_fn(guard(function()
        local samples = probe.stop()
        mem:stop()
        mem:close()
        local lines = api.nvim_buf_get_lines(chat.chat_buf, 0, -1, false)
        finish({
          stop_reason = ev.data.stop_reason,
          total_ms = ms(t_end - t0),
          tool_ms = tool_start and tool_end and ms(tool_end - tool_start),
          tool_start_ms = tool_start and ms(tool_start - t0),
          tool_end_ms = tool_end and ms(tool_end - t0),
          -- its parts: the tick's own lateness (the process waited for a core) and the scheduled
          -- callback's wait (the main loop was busy)
          tick_lateness_ms = probe.tick,
          queue_wait_ms = probe.queue,
          -- when each latency sample's tick fired, from the prompt
          lateness_at_ms = vim.tbl_map(function(t)
            return ms(t - t0)
          end, probe.at),
          updates = updates,
          update_bytes = update_bytes,
          update_ms = update_ms,
          dispatch_ms = dispatch_ms,
          lateness_ms = samples,
          idle_lateness_ms = idle_samples,
          -- CPU time (user + system, 10 ms ticks) from the prompt to HandoffAgentEnd
          host_cpu_ms = host_cpu,
          nvim_cpu_ms = nvim_cpu,
          batches = #dispatch_ms,
          host_idle_rss_kib = host_idle,
          host_max_rss_kib = host_max,
          host_hwm_kib = proc_kib(host, "VmHWM"),
          nvim_idle_rss_kib = nvim_idle,
          nvim_max_rss_kib = nvim_max,
          live = live or {},
          result = result or {},
          chat_lines = #lines,
          notes = notes,
        })
      end), P.tail_ms or 100)
    end)
    require("handoff").prompt("run the loud command")
  end), P.idle_ms or 1000)
end

--- `resume()` of P.session in the running, idle host, timed to the chat on screen: the
--- transcript's render, then the redraw Neovim would do right after it (done here, so that it
--- is inside the figure: with the regex markdown syntax it is a real part of the cost).
local function resume_timed()
  local state = require("handoff.state")
  local chat = require("handoff.chat")
  local pid = state.pid
  local idle_rss = proc_kib(pid, "VmRSS")
  local rendered
  local render = chat.render
  chat.render = function(items, info)
    local started = hr()
    render(items, info)
    if info and info.session_file == P.session then
      local returned = hr()
      vim.cmd("redraw")
      rendered = { at = hr(), returned = returned, started = started, items = #items }
    end
  end
  -- When the host's batches reach Lua (the transcript's is the last before the render).
  local events = require("handoff.events")
  local dispatch = events.dispatch
  local batches_at = {}
  events.dispatch = function(batch)
    batches_at[#batches_at + 1] = hr()
    return dispatch(batch)
  end
  -- `resume()` returns at once since the host opens sessions in the background (it was a
  -- blocking request before that change): the figure is the time until the chat shows the
  -- session; the call's own time is kept as `resume_call_ms`.
  local cpu0, faults0 = proc_cpu_ms(pid)
  local nvim_cpu0 = proc_cpu_ms(uv.os_getpid())
  local t0 = hr()
  if not require("handoff").resume(P.session) then
    return fail("resume failed: " .. table.concat(notes, " | "))
  end
  local t_call = hr()
  local function wait()
    if not rendered then
      if ms(hr() - t0) > 60000 then
        return fail("the resumed session was not drawn; notices: " .. table.concat(notes, " | "))
      end
      return vim.defer_fn(guard(wait), 5)
    end
    -- Let the host settle: what it holds then is what it keeps.
    vim.defer_fn(guard(function()
      finish({
        host_pid = pid,
        idle_rss_kib = idle_rss,
        loaded_rss_kib = proc_kib(pid, "VmRSS"),
        loaded_hwm_kib = proc_kib(pid, "VmHWM"),
        nvim_rss_kib = proc_kib(uv.os_getpid(), "VmRSS"),
        resume_call_ms = ms(t_call - t0),
        -- rendered_ms = transcript_ms (host: load, transcript, encoding; Neovim decoding it)
        --             + render_ms (Lua draws the chat) + redraw_ms (Neovim draws the window)
        rendered_ms = ms(rendered.at - t0),
        transcript_ms = ms(rendered.started - t0),
        render_ms = ms(rendered.returned - rendered.started),
        redraw_ms = ms(rendered.at - rendered.returned),
        -- CPU used from resume() to the end of the settle (idle by then)
        host_cpu_ms = proc_cpu_ms(pid) - cpu0,
        host_faults = select(2, proc_cpu_ms(pid)) - faults0,
        nvim_cpu_ms = proc_cpu_ms(uv.os_getpid()) - nvim_cpu0,
        batch_ms = vim.tbl_map(function(t)
          return ms(t - t0)
        end, batches_at),
        items = rendered.items,
        chat_lines = vim.api.nvim_buf_line_count(chat.chat_buf),
        notes = notes,
      })
    end), P.settle_ms or 300)
  end
  wait()
end

function modes.resume()
  local state = require("handoff.state")
  local chat = require("handoff.chat")
  local t_start = hr()
  require("handoff").open_chat() -- starts the host: a fresh, empty session
  -- The host is up once its first transcript (the empty session) is drawn; then it idles a
  -- moment, as it would before a user picks a session.
  local function started()
    if not (state.pid and state.session_file) then
      if ms(hr() - t_start) > 20000 then
        return fail("the host did not start; notices: " .. table.concat(notes, " | "))
      end
      return vim.defer_fn(guard(started), 5)
    end
    vim.defer_fn(guard(resume_timed), P.settle_ms or 300)
  end
  started()
end

--- A 10 ms timer on the main loop and the longest gap between two of its runs (ms): a call the
--- editor waits for shows as a gap as long as the wait.
local function gap_watch()
  local g = { max = 0, last = hr(), timer = uv.new_timer() }
  g.timer:start(10, 10, vim.schedule_wrap(function()
    local now = hr()
    g.max = math.max(g.max, ms(now - g.last))
    g.last = now
  end))
  return g
end

--- sessions: start-up in a folder of sessions (`resume_last`: the newest is resumed), the time
--- from `open_chat()` (the host starts) to that session's transcript in Lua; then
--- `:HandoffSessions` `P.picks` times (the first lists the folder, the later ones find the
--- listing cached): the time until the picker gets the list and the longest main-loop gap
--- from the command until 100 ms after it.
function modes.sessions()
  local state = require("handoff.state")
  local t_start = hr()
  require("handoff").open_chat()
  local startup_ms
  local picks = {}
  local function pick()
    if #picks >= (P.picks or 2) then
      return finish({ startup_ms = startup_ms, picks = picks, session_file = state.session_file, notes = notes })
    end
    local g = gap_watch()
    local t0 = hr()
    vim.ui.select = function(items)
      local shown = ms(hr() - t0)
      -- The timer's callback waiting behind the command runs first: its gap is counted.
      vim.defer_fn(guard(function()
        g.timer:stop()
        g.timer:close()
        picks[#picks + 1] = { shown_ms = shown, gap_ms = g.max, items = #items }
        vim.defer_fn(guard(pick), 200)
      end), 100)
    end
    vim.cmd("HandoffSessions")
  end
  local function started()
    if not state.session_id then
      if ms(hr() - t_start) > 60000 then
        return fail("the session did not open; notices: " .. table.concat(notes, " | "))
      end
      return vim.defer_fn(guard(started), 2)
    end
    startup_ms = ms(hr() - t_start)
    vim.defer_fn(guard(pick), P.settle_ms or 300)
  end
  started()
end

--- Calls `fn(t)` (hrtime) once, at the first change to `buf` whose new lines contain `marker`.
local function on_text(buf, marker, fn)
  local seen = false
  vim.api.nvim_buf_attach(buf, false, {
    on_lines = function(_, b, _, first, _, last_new)
      if seen then
        return true
      end
      for _, line in ipairs(vim.api.nvim_buf_get_lines(b, first, last_new, false)) do
        if line:find(marker, 1, true) then
          seen = true
          local t = hr()
          vim.schedule(guard(function()
            fn(t)
          end))
          return true -- detach
        end
      end
    end,
  })
end

--- The two ACP clients, each with: `start(cb)` a new session on the agent, `cb()` when it is
--- ready for a prompt; `buf()` its chat buffer; `prompt(text, on_end)` as a user sends it from the
--- chat, `on_end()` at the end of the reply.
local clients = {}

clients.ours = {
  start = function(cb)
    once("HandoffSessionSwitch", cb)
    vim.cmd("HandoffAgent bench")
  end,
  buf = function()
    return require("handoff.chat").chat_buf
  end,
  prompt = function(text, on_end)
    once("HandoffAgentEnd", on_end)
    require("handoff").prompt(text)
  end,
}

--- codecompanion.nvim (its checkout `P.codecompanion`, plenary's `P.plenary`), its chat on an
--- adapter of its own kind (`acp`) running the same command, without `authenticate` (ours sends
--- none either).
local cc = {}
clients.codecompanion = {
  start = function(cb)
    -- The session's own follow-ups (the buffer's link, metadata, defaults) run after the event.
    once("CodeCompanionACPSessionPost", function()
      vim.schedule(guard(cb))
    end)
    cc.chat = require("codecompanion").chat({ params = { adapter = "bench" } })
  end,
  buf = function()
    return cc.chat.bufnr
  end,
  prompt = function(text, on_end)
    once("CodeCompanionRequestFinished", function()
      vim.schedule(guard(on_end))
    end)
    -- Typed below the chat's last user header, then submitted as <CR> in normal mode does.
    local buf = cc.chat.bufnr
    local n = vim.api.nvim_buf_line_count(buf)
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, n, n, false, { text })
    cc.chat:submit()
  end,
}

local function codecompanion_setup()
  vim.opt.rtp:prepend(P.plenary)
  vim.opt.rtp:prepend(P.codecompanion)
  require("codecompanion").setup({
    adapters = {
      acp = {
        bench = function()
          return require("codecompanion.adapters").extend("codex", {
            name = "bench",
            formatted_name = "Bench",
            commands = { default = P.agent_command },
            env = {},
            defaults = { timeout = 60000 },
            handlers = {
              auth = function()
                return true
              end,
            },
          })
        end,
      },
    },
    interactions = { chat = { adapter = "bench" } },
    opts = { log_level = "ERROR" },
  })
end

--- agents: for each client of `P.clients` in turn (one new session each): the time from the
--- command to the session ready, then `P.prompts` prompts whose replies (pushed by bench/agent_editor.py)
--- start with `P.markers[client][i]` (routed by the prompt's text): prompt → that first text in the chat buffer, → the reply's
--- end; then, with `P.stream_tokens`, a prompt whose reply streams that many tokens at full speed,
--- with main-loop latency sampled as the stream mode does (`latency_probe`).
function modes.agents()
  if P.codecompanion then
    codecompanion_setup()
  end
  local interval = P.interval_ms or 8
  local results = {}
  local order = vim.deepcopy(P.clients)
  -- Our host's event batches during each short prompt (when, which records): where our client's
  -- time to the first chunk goes.
  local events = require("handoff.events")
  local dispatch, batches = events.dispatch, nil
  events.dispatch = function(batch)
    if batches then
      local types = {}
      for _, record in ipairs(batch) do
        types[#types + 1] = record.type
      end
      batches[#batches + 1] = { at = hr(), types = table.concat(types, ",") }
    end
    return dispatch(batch)
  end
  local run_client
  local function next_client()
    local name = table.remove(order, 1)
    if not name then
      return finish({ results = results, notes = notes })
    end
    run_client(name)
  end
  function run_client(name)
    local c = clients[name]
    -- prompt_at_ns: each prompt's CLOCK_MONOTONIC (vim.uv.hrtime), to line up with other processes' stamps
    local r = { first_ms = {}, done_ms = {}, batches = {}, prompt_at_ns = {} }
    results[name] = r
    local i = 0
    local stream
    local function one()
      i = i + 1
      if i > P.prompts then
        return stream()
      end
      local marker = P.markers[name][i]
      local t0 = hr()
      local first
      on_text(c.buf(), marker, function(t)
        first = t
      end)
      batches = {}
      c.prompt(("Say hi (%s %d)"):format(name, i), function()
        local t_end = hr()
        -- The marker's change is scheduled: let it land before reading it.
        vim.defer_fn(guard(function()
          if not first then
            return fail(name .. ": the reply " .. marker .. " never reached the chat; notices: " .. table.concat(notes, " | "))
          end
          r.first_ms[#r.first_ms + 1] = ms(first - t0)
          r.prompt_at_ns[#r.prompt_at_ns + 1] = t0
          r.done_ms[#r.done_ms + 1] = ms(t_end - t0)
          r.batches[#r.batches + 1] = vim.tbl_map(function(b)
            return { at_ms = ms(b.at - t0), types = b.types }
          end, batches)
          batches = nil
          vim.defer_fn(guard(one), P.pause_ms or 200)
        end), 20)
      end)
    end
    function stream()
      if not P.stream_tokens then
        return vim.defer_fn(guard(next_client), P.pause_ms or 200)
      end
      local idle = latency_probe(interval)
      vim.defer_fn(guard(function()
        local idle_samples = idle.stop()
        local last = ("w%d"):format(P.stream_tokens - 1)
        local t0 = hr()
        local first, t_last
        on_text(c.buf(), "w0 ", function(t)
          first = t
        end)
        on_text(c.buf(), last, function(t)
          t_last = t
        end)
        local probe = latency_probe(interval)
        c.prompt(("Stream it (%s)"):format(name), function()
          local t_end = hr()
          vim.defer_fn(guard(function()
            local samples = probe.stop()
            if not t_last then
              return fail(name .. ": the stream's last token " .. last .. " never reached the chat")
            end
            r.stream = {
              total_ms = ms(t_end - t0),
              first_ms = first and ms(first - t0),
              last_ms = ms(t_last - t0),
              lateness_ms = samples,
              tick_lateness_ms = probe.tick,
              queue_wait_ms = probe.queue,
              idle_lateness_ms = idle_samples,
            }
            vim.defer_fn(guard(next_client), P.pause_ms or 200)
          end), P.tail_ms or 100)
        end)
      end), P.idle_ms or 1000)
    end
    local t0 = hr()
    c.start(function()
      r.start_ms = ms(hr() - t0)
      vim.defer_fn(guard(one), P.pause_ms or 200)
    end)
  end
  -- Our host first (as `:HandoffAgent` needs it), idle before the first client.
  require("handoff").open_chat()
  vim.defer_fn(guard(next_client), P.settle_ms or 1000)
end

--- land: see the modes above.
function modes.land()
  local api = vim.api
  for _, f in ipairs(P.files) do
    vim.cmd("edit " .. vim.fn.fnameescape(f))
  end
  require("handoff").open_chat()
  -- The host started and idle before the prompt (as in the tools mode).
  vim.defer_fn(guard(function()
    if not require("handoff.state").pid then
      return fail("the host did not start: " .. table.concat(notes, " | "))
    end
    local review = require("handoff.review")
    local function drawn()
      local n = 0
      for _, buf in ipairs(api.nvim_list_bufs()) do
        n = n + #api.nvim_buf_get_extmarks(buf, review.ns, 0, -1, {})
      end
      return n
    end
    -- Where the main loop's time goes: each update of the review for a `hunks` record (a call
    -- added, or a refresh: a `review` request, then finding and drawing every hunk), and the
    -- `review` requests alone.
    local host = require("handoff.host")
    local refresh_ms, request_ms = {}, {}
    for _, name in ipairs({ "refresh", "add_call" }) do
      local fn = review[name]
      if fn then
        review[name] = function(...)
          local t = hr()
          fn(...)
          refresh_ms[#refresh_ms + 1] = ms(hr() - t)
        end
      end
    end
    local try_request = host.try_request
    host.try_request = function(method, ...)
      local t = hr()
      local r = { try_request(method, ...) }
      if method == "review" then
        request_ms[#request_ms + 1] = ms(hr() - t)
      end
      return unpack(r, 1, table.maxn(r))
    end
    local probe = latency_probe(P.interval_ms or 8)
    local t0, t_end, done = hr(), nil, false
    local function check()
      if done or not t_end or drawn() < P.hunks then
        return
      end
      done = true
      local t_drawn = hr()
      vim.defer_fn(guard(function()
        local samples = probe.stop()
        finish({ lateness_ms = samples, turn_ms = ms(t_end - t0), drawn_ms = ms(t_drawn - t0), drawn = drawn(), notes = notes,
          refresh_ms = refresh_ms, request_ms = request_ms })
      end), 100)
    end
    api.nvim_create_autocmd("User", { pattern = "HandoffHunks", callback = guard(check) })
    once("HandoffAgentEnd", function()
      t_end = hr()
      check()
    end)
    require("handoff").prompt("change every file")
  end), 1000)
end

vim.schedule(guard(function()
  local mode = modes[P.mode]
  if not mode then
    return fail("unknown mode " .. tostring(P.mode))
  end
  mode()
end))
