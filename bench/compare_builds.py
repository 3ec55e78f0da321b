#!/usr/bin/env python3
"""Before/after of a change over the whole-process benchmarks of bench/bench.py (§1–5, 7b, 8, 8b, 17): two
checkouts, each with its own release build and its own Lua plugin, measured round by round
interleaved (old and new alternate who goes first), with pi in the same rounds, against one mock.

    git worktree add /work/bench-old c00d435
    (cd /work/bench-old && cargo build --release --bins)           # before the workspace split
    cargo build --release --workspace --bins                       # this checkout
    bench/compare_builds.py --old /work/bench-old [--new .] [--runs 7] [--only 1,2,3,4,5,7,8]

Every figure is the median over the rounds; `old / new` > 1 means the new build is faster
(or smaller). The Neovim figures run this checkout's bench/nvim_bench.lua with each checkout's
plugin on the runtimepath (the script copes with both plugin versions).
"""
import argparse
import os
import sys
import tempfile
import shutil
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True, help="checkout of the old build (its target/release)")
    ap.add_argument("--new", default=B.ROOT)
    ap.add_argument("--pi", default=os.environ.get("PI_BIN") or os.path.join(B.ROOT, ".cache", "pi", "node_modules", ".bin", "pi"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only", default="1,2,3,4,5")
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--stream-tokens", type=int, default=200000)
    ap.add_argument("--json", help="also write the raw figures here")
    args = ap.parse_args()
    only = set(args.only.split(","))
    builds = {k: (os.path.abspath(root), os.path.join(os.path.abspath(root), "target", "release"))
              for k, root in (("old", args.old), ("new", args.new))}
    for k, (_, bin_dir) in builds.items():
        if not os.path.isfile(os.path.join(bin_dir, "handoff-nvim")):
            sys.exit(f"no {bin_dir}/handoff-nvim: build the {k} checkout first")
    nvim = B.find_nvim()
    pi_bin = args.pi if os.access(args.pi, os.X_OK) else None
    work = tempfile.mkdtemp(prefix="handoff-compare-")
    mock = B.Mock(builds["new"][1])
    mock.control("default", {"kind": "text", "chunks": [B.DOCUMENT]})
    env = dict(os.environ, HANDOFF_BASE_URL=mock.url, HANDOFF_MODEL="mock-model",
               HANDOFF_SESSION_DIR=os.path.join(work, "sessions"), HANDOFF_PROVIDER="openai")
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE"):
        env.pop(k, None)
    pi = B.Pi(pi_bin, mock.url, work) if pi_bin else None
    sizes = [int(x) for x in args.sizes.split(",")]
    vals = {}  # figure -> who -> [values]

    def add(fig, who, v):
        vals.setdefault(fig, {}).setdefault(who, []).append(v)

    sessions = {n: B.gen_session(n, os.path.join(work, f"session-{n}.jsonl"), work) for n in sizes} if "2" in only or "5" in only else {}
    rp = B.ResumePrompt(builds["new"][1], pi_bin, work, 8000, "25,125") if "8" in only else None
    rpw = B.ResumePrompt(builds["new"][1], pi_bin, work, 8000, "25,125", wall=True) if "8b" in only else None
    # §17: one folder for both builds (each run a fresh host: its listing cache starts empty).
    folder = B.session_folder(work, 200, 500_000) if "17" in only else None
    try:
        for r in range(args.runs):
            order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
            B.log(f"round {r + 1}/{args.runs} ({' then '.join(order)})")
            for who in order:
                root, bin_dir = builds[who]
                if "1" in only:
                    for _ in range(5):
                        w, c, rss = B.cold_start_ours(bin_dir, env)
                        add("cold start: wall", who, w)
                        add("cold start: CPU", who, c)
                        add("cold start: RSS (KiB)", who, rss)
                if "2" in only:
                    for n in sizes:
                        cmd = [os.path.join(bin_dir, "handoff-nvim"), "context", sessions[n]]
                        for _ in range(3 if n < 100000 else 1):
                            add(f"context {n:,} entries: wall", who, B.wall(cmd, env))
                        add(f"context {n:,} entries: peak RSS (KiB)", who, B.time_v(cmd, env)[1])
                if "3" in only:
                    src = B.small_session(work, f"handoff-{who}-{r}.jsonl")
                    t0 = time.perf_counter()
                    B.subprocess.run([os.path.join(bin_dir, "handoff-nvim"), "handoff", src], stdout=B.subprocess.DEVNULL,
                                     stderr=B.subprocess.DEVNULL, env=env, check=True)
                    add("handoff, headless: wall", who, time.perf_counter() - t0)
                    res = B.run_nvim(nvim, "handoff", dict(runs=3, session=B.small_session(work, f"nh-{who}-{r}.jsonl")),
                                     bin_dir, mock, work, plugin_root=root)
                    for t in res["times_ms"]:
                        add("handoff through Neovim: :Handoff → HandoffDone", who, t / 1e3)
                    for t in res["start_ms"][1:]:  # the first one starts the host
                        add("handoff through Neovim: :Handoff → HandoffStart", who, t / 1e3)
                if "4" in only:
                    s = B.bench_stream(nvim, bin_dir, mock, 1, work, args.stream_tokens, "syntax", plugin_root=root)
                    add("stream into Neovim: tokens/s", who, s["tps"])
                    add("stream into Neovim: latency p99 (ms)", who, s["p99"])
                if "7" in only:
                    t = B.nvim_tool_turn(nvim, bin_dir, mock, work, B.steady_command(40, 12500), 20000, 20000,
                                         B.re.escape(B.LOUD_LINE), "chunk 40 done", root)
                    add("text, command, text in Neovim: latency p99 (ms)", who, B.pct(t["lateness_ms"], 0.99))
                    add("text, command, text in Neovim: Lua per tool update p99 (ms)", who, B.pct(t["update_ms"], 0.99))
                    add("text, command, text in Neovim: host peak (KiB)", who, t["host_hwm_kib"])
                if "8" in only:
                    if r == 0:
                        rp.ours(bin_dir)  # warm-up
                    t, peak, _, cpu = rp.ours(bin_dir)
                    add("8,000-entry session resumed + one prompt: wall", who, t)
                    add("8,000-entry session resumed + one prompt: CPU", who, cpu)
                    add("8,000-entry session resumed + one prompt: peak RSS (KiB)", who, peak)
                if "8b" in only:
                    if r == 0:
                        rpw.ours(bin_dir)  # warm-up
                    t, peak, _, cpu = rpw.ours(bin_dir)
                    add("8,000-entry session + one prompt at the wall (handed off first): wall", who, t)
                    add("8,000-entry session + one prompt at the wall (handed off first): CPU", who, cpu)
                    add("8,000-entry session + one prompt at the wall (handed off first): peak RSS (KiB)", who, peak)
                if "17" in only:
                    f = B.bench_sessions_folder(nvim, bin_dir, mock, work, *folder, plugin_root=root)
                    add("200 sessions of 500 KB: start-up → newest session in Lua (ms)", who, f["startup_ms"])
                    add(":HandoffSessions → list shown, first (ms)", who, f["picks"][0]["shown_ms"])
                    add(":HandoffSessions, first: worst main-loop gap (ms)", who, f["picks"][0]["gap_ms"])
                    add(":HandoffSessions → list shown, again (ms)", who, f["picks"][1]["shown_ms"])
                    add(":HandoffSessions, again: worst main-loop gap (ms)", who, f["picks"][1]["gap_ms"])
                if "5" in only:
                    add("idle RSS, rpc after a ping (KiB)", who, B.bench_idle_rss(bin_dir, env, 1))
                    for n in sizes:
                        rr = B.bench_resume_rss(nvim, bin_dir, mock, 1, work, n, plugin_root=root, path=sessions[n])
                        add(f"resume {n:,} entries in Neovim: resume() → chat on screen", who, rr["rendered_ms"] / 1e3)
                        add(f"resume {n:,} entries in Neovim: … host (resume() → transcript in Lua)", who, rr["transcript_ms"] / 1e3)
                        add(f"resume {n:,} entries in Neovim: … Lua renders the chat", who, rr["render_ms"] / 1e3)
                        add(f"resume {n:,} entries in Neovim: … redraw", who, rr["redraw_ms"] / 1e3)
                        add(f"resume {n:,} entries in Neovim: host RSS (KiB)", who, rr["loaded_rss_kib"])
                        add(f"resume {n:,} entries in Neovim: host peak (KiB)", who, rr["loaded_hwm_kib"])
                    add(f"resume {sizes[-1]:,} entries in Neovim: resume() call returned", who, rr["resume_call_ms"] / 1e3)
                    add("host started by the plugin, idle RSS (KiB)", who, rr["idle_rss_kib"])
            if pi:
                if "1" in only:
                    w, rss = B.cold_start_pi(pi)
                    add("cold start: wall", "pi", w)
                    add("cold start: RSS (KiB)", "pi", rss)
                if "2" in only:
                    for n in sizes:
                        t, peak = B.pi_resume(pi, sessions[n])
                        add(f"context {n:,} entries: wall", "pi", t)
                        add(f"context {n:,} entries: peak RSS (KiB)", "pi", peak)
                if "8" in only:
                    t, peak, _, cpu = rp.pi_run()
                    add("8,000-entry session resumed + one prompt: wall", "pi", t)
                    add("8,000-entry session resumed + one prompt: CPU", "pi", cpu)
                    add("8,000-entry session resumed + one prompt: peak RSS (KiB)", "pi", peak)
                if "8b" in only:
                    t, peak, _, cpu = rpw.pi_run()
                    add("8,000-entry session + one prompt at the wall (handed off first): wall", "pi", t)
                    add("8,000-entry session + one prompt at the wall (handed off first): CPU", "pi", cpu)
                    add("8,000-entry session + one prompt at the wall (handed off first): peak RSS (KiB)", "pi", peak)
                if "3" in only:
                    t = B.pi_handoff(pi, B.small_session(work, f"pi-handoff-{r}.jsonl"))
                    add("handoff, headless: wall", "pi", t)
                    add("handoff through Neovim: :Handoff → HandoffDone", "pi", t)
    finally:
        mock.close()
        for each in (rp, rpw):
            if each:
                each.close()
        shutil.rmtree(work, ignore_errors=True)

    def show(fig, v):
        if v is None:
            return "–"
        if "(KiB)" in fig:
            return B.mib(v)
        if "tokens/s" in fig:
            return f"{v:,.0f}"
        if "(ms)" in fig:
            return f"{v:.1f} ms"
        return B.fmt_ms(v)

    higher_is_better = ("tokens/s",)
    print(f"Median of {args.runs} rounds; old = {builds['old'][0]}, new = {builds['new'][0]}.\n")
    print("| figure | old | new | old / new | pi | pi / old | pi / new |")
    print("|---|---|---|---|---|---|---|")
    med = {}
    for fig, by in vals.items():
        m = {who: B.median(v) for who, v in by.items()}
        med[fig] = m
        o, n, p = m.get("old"), m.get("new"), m.get("pi")
        if any(h in fig for h in higher_is_better):
            on = B.ratio(n, o) + " (new / old)"
        else:
            on = B.ratio(o, n)
        print(f"| {fig} | {show(fig, o)} | {show(fig, n)} | {on} | {show(fig, p)} | "
              f"{B.ratio(p, o) if p else '–'} | {B.ratio(p, n) if p else '–'} |")
    if args.json:
        import json
        with open(args.json, "w") as f:
            json.dump(dict(medians=med, values=vals), f, indent=1)


if __name__ == "__main__":
    main()
