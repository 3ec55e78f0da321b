"""bench.py §11's one-command turn alone, for builds that bench.py's §11 cannot take (a static
`handoff-nvim` that is its own helper, with no `handoff-sandbox` beside it): each BIN_DIR's CLI
with --sandbox off and workspace-write, interleaved, in one project per (build, mode) for all
runs (a user's next prompts) or, with --fresh, a new project each run; two warm-up rounds.
BIN_DIR needs handoff-nvim; the first needs mock-model-server.
usage: bench/sandbox_turns.py RUNS [--fresh] BIN_DIR...   (medians and sandboxed − off)"""
import os, sys, shutil, tempfile, statistics
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B

runs = int(sys.argv[1]); args = sys.argv[2:]
fresh = "--fresh" in args; dirs = [a for a in args if a != "--fresh"]
work = tempfile.mkdtemp(prefix="sandbox-turns-")
mock = B.Mock(dirs[0])
home = B.sandbox_home(work)
env = dict(os.environ, HANDOFF_BASE_URL=mock.url, HANDOFF_MODEL="mock-model", HANDOFF_PROVIDER="openai",
           HANDOFF_SESSION_DIR=os.path.join(work, "sessions"), HOME=home)
for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE", "XDG_CACHE_HOME"):
    env.pop(k, None)
n = [0]
def new_project():
    n[0] += 1
    d = os.path.join(work, "p", str(n[0])); os.makedirs(d); B.git_init(d)
    for name, text in B.TURN_SEED.items():
        open(os.path.join(d, name), "w").write(text)
    return d
projects = {}
times = {(d, m): [] for d in dirs for m in ("off", "workspace-write")}
for i in range(runs + 2):
    for (d, m), t in times.items():
        p = new_project() if fresh else projects.setdefault((d, m), new_project())
        B.script_turn(mock, B.ONE_COMMAND)
        cmd = B.ours_turn_cmd(d, p)
        x = B.timed(cmd[:1] + ["--sandbox", m] + cmd[1:], env, p)
        if open(os.path.join(p, "count.txt")).read() != "200\n":
            raise SystemExit("the turn did not run its command")
        os.remove(os.path.join(p, "count.txt"))
        if i >= 2:
            t.append(x)
for d in dirs:
    off, on = statistics.median(times[(d, "off")]), statistics.median(times[(d, "workspace-write")])
    print(f"{d}: off {off*1e3:.2f} ms, workspace-write {on*1e3:.2f} ms, overhead {1e3*(on-off):+.2f} ms")
mock.close()
shutil.rmtree(work, ignore_errors=True)
