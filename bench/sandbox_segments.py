"""Where a sandboxed one-command turn's time goes, against --sandbox off (issue 39): N turns of
bench.py §11's paced model (each reply SANDBOX_TURN_MS after its request) in each mode,
interleaved, each under `perf record` of a few tracepoints (execs, exits, connect, recvfrom: no
strace, which slows every syscall), and the median of each segment: start → the model's request,
the call's arrival → the first exec (the helper, or bash), → bash's exec, bash, bash's exit →
the next request, the last reply → exit.

usage: bench/sandbox_segments.py N BIN_DIR [--fresh]   (--fresh: a new project each turn; else
one project for all, a user's next prompts). Needs perf and a mock-model-server in BIN_DIR."""
import os, sys, subprocess, statistics, re, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B
WORK = tempfile.mkdtemp(prefix="segments-")
n, bins = int(sys.argv[1]), sys.argv[2]; fresh = "--fresh" in sys.argv
ctr = [0]
def proj():
    ctr[0] += 1
    d = os.path.join(WORK, f"p{ctr[0]}"); os.makedirs(d); B.git_init(d)
    for name, text in B.TURN_SEED.items(): open(os.path.join(d, name), "w").write(text)
    return d
mock = B.Mock(bins)
env = dict(os.environ, HANDOFF_BASE_URL=mock.url, HANDOFF_MODEL="mock-model", HANDOFF_PROVIDER="openai", HANDOFF_SESSION_DIR=os.path.join(WORK, "sessions"), HOME=B.sandbox_home(WORK))
for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE"): env.pop(k, None)
p = proj()
ev = "sched:sched_process_exec,sched:sched_process_exit,syscalls:sys_enter_connect,syscalls:sys_exit_recvfrom,syscalls:sys_enter_exit_group"
segs = {m: {} for m in ("off", "workspace-write")}
for i in range(n + 1):
    for mode in segs:
        q = proj() if fresh else p
        B.paced_one_command(mock)
        cmd = B.ours_turn_cmd(bins, q)
        data = os.path.join(WORK, "seg.data")
        subprocess.run(["perf", "record", "-q", "-e", ev, "-o", data, "--"] + cmd[:1] + ["--sandbox", mode] + cmd[1:], env=env, cwd=q, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.remove(os.path.join(q, "count.txt"))
        if i == 0: continue
        out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,time,event,trace"], capture_output=True, text=True).stdout
        ev_list = []
        for line in out.splitlines():
            m = re.match(r"\s*(.+?)\s+(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)", line)
            if m: ev_list.append((float(m.group(3)) * 1000, m.group(1).strip(), m.group(4), m.group(5)))
        t_start = ev_list[0][0]
        connects = [e[0] for e in ev_list if e[2].endswith("sys_enter_connect")]
        recvs = [e[0] for e in ev_list if e[2].endswith("sys_exit_recvfrom") and not e[3].strip().endswith("0x0")]
        execs = [(e[0], e[3]) for e in ev_list if e[2].endswith("sched_process_exec")]
        bash_exec = next(t for t, f in execs if "/bin/bash" in f)
        call_recv = max(t for t in recvs if t < bash_exec)
        # The helper (handoff-sandbox, or the host's own binary re-entered), or bash itself; not
        # the host's process-group watcher (`/bin/sh`).
        first_exec = min(t for t, f in execs if t > call_recv and "/bin/sh " not in f + " ")
        exits = [(e[0], e[3]) for e in ev_list if e[2].endswith("sched_process_exit")]
        bash_exit = next(t for t, c in exits if "comm=bash" in c)
        last_cmd_exit = max(t for t, c in exits if ("comm=bash" in c or "comm=10 " in c or "comm=handoff-sandbox" in c) and t < connects[-1])
        final_recv = recvs[-1]
        main_exit = max(e[0] for e in ev_list if e[1] == "handoff-nvim" and e[2].endswith("sys_enter_exit_group"))
        d = dict(start_to_connect=connects[1] - t_start if len(connects) > 1 else connects[0] - t_start,
                 call_to_exec=first_exec - call_recv, exec_to_bash=bash_exec - first_exec, bash=bash_exit - bash_exec,
                 bash_exit_to_connect=connects[-1] - bash_exit, final_to_exit=main_exit - final_recv, total=main_exit - t_start)
        for k, v in d.items(): segs[mode].setdefault(k, []).append(v)
mock.close()
for k in segs["off"]:
    a, b = statistics.median(segs["off"][k]), statistics.median(segs["workspace-write"][k])
    print(f"{k:24s} off {a:8.2f}  ww {b:8.2f}  diff {b-a:+.2f} ms")
__import__("shutil").rmtree(WORK, ignore_errors=True)
