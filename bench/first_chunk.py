"""Prompt -> first byte of the reply on stdout, and the command's whole time, for a CLI command
(issue 42: external ACP agents through `handoff-nvim prompt --agent ...`, against the mock).
usage: python3 bench/first_chunk.py RUNS -- COMMAND...  (prints medians, min and max)."""
import subprocess, sys, time, os
runs = int(sys.argv[1]); cmd = sys.argv[3:]
firsts, totals = [], []
for _ in range(runs):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    first = p.stdout.read(1)
    t1 = time.monotonic()
    p.stdout.read(); p.wait()
    t2 = time.monotonic()
    firsts.append(t1 - t0); totals.append(t2 - t0)
firsts.sort(); totals.sort()
print(f"first chunk median {firsts[len(firsts)//2]:.2f}s (min {firsts[0]:.2f}, max {firsts[-1]:.2f}); command done median {totals[len(totals)//2]:.2f}s")
