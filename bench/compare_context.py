#!/usr/bin/env python3
"""Before/after of `handoff-nvim context`: two builds, run by run interleaved, on the sessions
bench/gen_session.py writes.

    bench/compare_context.py OLD_BINARY NEW_BINARY [--sizes 12,1000,10000,100000] [--runs 15]

Build the old one from a worktree, e.g.
    git worktree add /tmp/old REV && (cd /tmp/old && cargo build --release)
Prints the median wall time (output to /dev/null, timed alone) and the median peak RSS
(separate runs under /usr/bin/time) of each, and old/new.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--sizes", default="12,1000,10000,100000")
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="handoff-compare-")
    env = dict(os.environ, HANDOFF_SESSION_DIR=os.path.join(work, "sessions"))
    bins = {"old": os.path.abspath(args.old), "new": os.path.abspath(args.new)}
    print("| entries | old time | new time | old / new | old peak RSS | new peak RSS |")
    print("|---|---|---|---|---|---|")
    for n in [int(x) for x in args.sizes.split(",")]:
        path = os.path.join(work, f"session-{n}.jsonl")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_session.py"), str(n), path, "--cwd", work],
                       check=True)
        runs = args.runs if n < 100000 else max(5, args.runs // 3)
        wall = {k: [] for k in bins}
        peak = {k: [] for k in bins}
        for i in range(runs):
            for k, b in bins.items():
                cmd = [b, "context", path]
                t0 = time.perf_counter()
                subprocess.run(cmd, stdout=subprocess.DEVNULL, env=env, check=True)
                wall[k].append(time.perf_counter() - t0)
                if i < 3:
                    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, env=env, text=True, check=True)
                    peak[k].append(int(r.stderr.strip().splitlines()[-1]))
        o, w = statistics.median(wall["old"]), statistics.median(wall["new"])
        print(f"| {n:,} | {o*1e3:.2f} ms | {w*1e3:.2f} ms | {o/w:.1f}× | "
              f"{statistics.median(peak['old'])/1024:.1f} MiB | {statistics.median(peak['new'])/1024:.1f} MiB |")


if __name__ == "__main__":
    main()
