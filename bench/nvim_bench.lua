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
