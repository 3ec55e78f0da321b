"""External ACP agents in the editor (issue 42, "Measured"): the same agent driven by our client
(`:HandoffAgent`, the plugin's host) and by codecompanion.nvim's ACP client, in the same headless
Neovim (bench/nvim_bench.lua, mode `agents`), against the loopback mock-model-server:

- session start: the command → the agent's session ready for a prompt;
- prompt → the reply's first text in the chat buffer (and → the reply's end), `--prompts` per
  client and run, one-line replies;
- a reply of `--tokens` tokens at full speed (bench.py's `stream_reply`, as §4): main-loop
  latency sampled by nvim_bench.lua's `latency_probe` (§4's sampler: an 8 ms timer, a sample is
  how late its scheduled callback runs), p50 / p99 / max.

The agents: ours (`handoff-nvim acp`, the same build) and codex-acp (its native binary; its
model is the mock over the Responses API, set up as in tests/acp_client.rs). Each run is one fresh
Neovim with both plugins loaded; the clients take turns, their order swapped run by run.

Nothing is fetched: codecompanion.nvim and plenary.nvim are read from checkouts,
`$CODECOMPANION_DIR` / `$PLENARY_DIR` (default bench/vendor/codecompanion.nvim and
bench/vendor/plenary.nvim, ignored by git); codex-acp from `$CODEX_ACP_BIN` (default the
checkout's .cache, scripts/deps.sh's ensure_codex_acp); Neovim from `$NVIM_BIN` or .venv.

usage: python3 bench/agent_editor.py --bin-dir target/release [--runs 5] [--prompts 3]
       [--tokens 20000] [--agents ours,codex] [--clients ours,codecompanion] [--json OUT]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ROOT, Mock, find_nvim, median, pct, run_nvim, stream_reply  # noqa: E402

CODEX_ACP = os.path.join(ROOT, ".cache/codex-acp/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp")


def agent_command(agent, bin_dir, mock, run_dir):
    """The agent's command line, the same for both clients (its environment set by `env`)."""
    if agent == "ours":
        return ["env", f"HANDOFF_SESSION_DIR={os.path.join(run_dir, 'inner-sessions')}",
                os.path.abspath(os.path.join(bin_dir, "handoff-nvim")), "acp", "--provider", "openai",
                "--base-url", mock.url, "--model", "mock-model"]
    if agent == "codex":
        codex = os.environ.get("CODEX_ACP_BIN", CODEX_ACP)
        if not os.path.isfile(codex):
            sys.exit(f"agent_editor.py: no codex-acp at {codex}: scripts/deps.sh's ensure_codex_acp, or $CODEX_ACP_BIN")
        home = os.path.join(run_dir, "codex-home")
        os.makedirs(home, exist_ok=True)
        # As tests/acp_client.rs: the mock as a Responses provider; codex's own sandbox off.
        with open(os.path.join(home, "config.toml"), "w") as f:
            f.write(f'model = "gpt-5.4"\nmodel_provider = "mock"\napproval_policy = "untrusted"\n'
                    f'sandbox_mode = "danger-full-access"\n\n[model_providers.mock]\nname = "mock"\n'
                    f'base_url = "{mock.url}"\nenv_key = "MOCK_KEY"\nwire_api = "responses"\n')
        return ["env", f"CODEX_HOME={home}", "MOCK_KEY=x", codex]
    sys.exit(f"agent_editor.py: unknown agent {agent}")


def one_run(nvim, bin_dir, mock, work, agent, clients, prompts, tokens, cc_dir, plenary_dir, stamp=False):
    run_dir = tempfile.mkdtemp(prefix=f"agent-{agent}-", dir=work)
    mock.control("reset")
    markers = {}
    for c in clients:
        markers[c] = []
        for i in range(1, prompts + 1):
            marker = f"Rep{c[:2]}{i}x"
            markers[c].append(marker)
            # Routed by the prompt's text, so a request of the agent's own cannot take it.
            mock.control("route", {"when": f"Say hi ({c} {i})",
                                   "reply": {"kind": "text", "chunks": [f"{marker} ", "says ", "hi."], "chunk_delay_ms": 0}})
        if tokens:
            mock.control("route", {"when": f"Stream it ({c})", "reply": stream_reply(tokens)})
    command = agent_command(agent, bin_dir, mock, run_dir)
    if stamp:  # the agent behind bench/acp_stamp.py (both clients alike): its lines timed
        command = ["env", f"STAMP_LOG={os.path.join(run_dir, 'stamp.log')}", sys.executable,
                   os.path.join(ROOT, "bench/acp_stamp.py")] + command
    params = dict(clients=clients, prompts=prompts, markers=markers, agent_command=command)
    # Absent when unused, never null (vim.NIL in Lua, which is true there).
    if "codecompanion" in clients:
        params.update(codecompanion=cc_dir, plenary=plenary_dir)
    if tokens:
        params["stream_tokens"] = tokens
    res = run_nvim(nvim, "agents", params, bin_dir, mock, run_dir)
    if stamp:
        res["stamps"] = split_prompts(res, os.path.join(run_dir, "stamp.log"))
    return res


def split_prompts(res, log):
    """Each prompt's time cut at the agent's pipes (bench/acp_stamp.py's stamps, the same clock as
    the prompt's): the client's way to `session/prompt`, the agent to its first text chunk, the
    client's way from that chunk to the chat buffer."""
    with open(log) as f:
        lines = sorted((int(t), way, what.strip()) for t, way, what in (l.split(" ", 2) for l in f))
    out = {}
    for c, r in res["results"].items():
        for i, (t0, first) in enumerate(zip(r["prompt_at_ns"], r["first_ms"])):
            sent = next(t for t, way, what in lines if t >= t0 and way == ">" and what == "session/prompt")
            chunk = next(t for t, way, what in lines
                         if t >= sent and way == "<" and what.startswith("session/update:agent_message_chunk:Rep"))
            out.setdefault(c, []).append(dict(to_agent=(sent - t0) / 1e6, agent=(chunk - sent) / 1e6,
                                              to_chat=t0 / 1e6 + first - chunk / 1e6))
    return out


def report(raw, tokens):
    """Prints the table (markdown) and returns its figures. *cold*: the session's start plus the
    first prompt's first chunk (the agent's process starts in one or the other); *warm*: the
    later prompts' first chunk in the same session."""
    summary = {}
    for agent, per_client in raw.items():
        for c, rs in per_client.items():
            warm = sorted(x for r in rs for x in r["first_ms"][1:])
            row = dict(start=median([r["start_ms"] for r in rs]), first1=median([r["first_ms"][0] for r in rs]),
                       cold=median([r["start_ms"] + r["first_ms"][0] for r in rs]),
                       warm=median(warm), warm_min=warm[0], warm_max=warm[-1], n=len(warm),
                       done=median([x for r in rs for x in r["done_ms"][1:]]))
            if tokens:
                st = [r["stream"] for r in rs]
                row.update(p50=median([pct(s["lateness_ms"], 0.5) for s in st]),
                           p99=median([pct(s["lateness_ms"], 0.99) for s in st]),
                           max=median([max(s["lateness_ms"]) for s in st]),
                           worst=max(max(s["lateness_ms"]) for s in st),
                           # a sample = the tick's own lateness (no core for the process) + the
                           # scheduled callback's wait (the main loop busy): the latter of the max
                           busy=median([s["queue_wait_ms"][s["lateness_ms"].index(max(s["lateness_ms"]))] for s in st]),
                           busy_worst=max(max(s["queue_wait_ms"]) for s in st),
                           idle_p99=median([pct(s["idle_lateness_ms"], 0.99) for s in st]),
                           last=median([s["last_ms"] for s in st]))
            summary.setdefault(agent, {})[c] = row
    def table(head, cells):
        print("\n| agent | client | " + " | ".join(head) + " |\n" + "|---" * (len(head) + 2) + "|")
        for agent, per_client in summary.items():
            for c, row in per_client.items():
                print(f"| {agent} | {c} | " + " | ".join(cells(row)) + " |")
    table(["command → session ready", "1st prompt → 1st chunk", "cold: both", "later prompts → 1st chunk (min–max)",
           "→ reply's end"],
          lambda row: [f"{row['start']:.0f} ms", f"{row['first1']:.0f} ms", f"**{row['cold']:.0f} ms**",
                       f"**{row['warm']:.1f} ms** ({row['warm_min']:.1f}–{row['warm_max']:.1f}, n={row['n']})",
                       f"{row['done']:.1f} ms"])
    if tokens:
        table([f"{tokens} tokens: latency p50 / p99 / max", "of the max: main loop busy (longest of any run)",
               "idle p99", "prompt → last token in the chat"],
              lambda row: [f"{row['p50']:.1f} / {row['p99']:.1f} / **{row['max']:.0f} ms** (worst run {row['worst']:.0f})",
                           f"{row['busy']:.0f} ms ({row['busy_worst']:.0f})", f"{row['idle_p99']:.1f} ms",
                           f"{row['last']:.0f} ms"])
    if any("stamps" in r for per_client in raw.values() for rs in per_client.values() for r in rs):
        print("\n| agent | client | prompt | prompt → `session/prompt` written | → agent's 1st text chunk | → in the chat |")
        print("|---|---|---|---|---|---|")
        for agent, per_client in raw.items():
            for c, rs in per_client.items():
                for label, pick in (("1st", lambda st: st[:1]), ("later", lambda st: st[1:])):
                    xs = [x for r in rs for x in pick(r["stamps"])]
                    print(f"| {agent} | {c} | {label} (n={len(xs)}) | " + " | ".join(
                        f"{median([x[k] for x in xs]):.1f} ms" for k in ("to_agent", "agent", "to_chat")) + " |")
    # Our client's event batches in the later prompts: when the first reached Lua, and the one
    # that carried the reply's text.
    for agent, per_client in raw.items():
        for r in per_client.get("ours", []):
            for b in r.get("batches", [])[1:]:
                print(f"  {agent} ours batches: " + "; ".join(f"{x['at_ms']:.1f} ms {x['types']}" for x in b))
    return summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "target/release"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--agents", default="ours,codex")
    ap.add_argument("--clients", default="ours,codecompanion")
    ap.add_argument("--json")
    ap.add_argument("--stamp", action="store_true",
                    help="the agent behind bench/acp_stamp.py: each prompt's first chunk split at the agent's pipes")
    ap.add_argument("--report", help="print the table of an earlier run's --json file, run nothing")
    a = ap.parse_args()
    a.bin_dir = os.path.abspath(a.bin_dir)  # Neovim and the agents run in other folders
    if a.report:
        with open(a.report) as f:
            raw = json.load(f)["raw"]
        report(raw, a.tokens)
        return
    cc_dir = os.environ.get("CODECOMPANION_DIR", os.path.join(ROOT, "bench/vendor/codecompanion.nvim"))
    plenary_dir = os.environ.get("PLENARY_DIR", os.path.join(ROOT, "bench/vendor/plenary.nvim"))
    clients = a.clients.split(",")
    if "codecompanion" in clients and not os.path.isdir(os.path.join(cc_dir, "lua/codecompanion")):
        sys.exit(f"agent_editor.py: no codecompanion.nvim checkout at {cc_dir} (set $CODECOMPANION_DIR)")
    nvim = find_nvim()
    if not nvim:
        sys.exit("agent_editor.py: no Neovim: scripts/deps.sh's ensure_nvim, or $NVIM_BIN")
    mock = Mock(a.bin_dir)
    work = tempfile.mkdtemp(prefix="agent-editor-")
    raw = {}
    try:
        for run in range(a.runs):
            for agent in a.agents.split(","):
                order = clients if run % 2 == 0 else clients[::-1]
                res = one_run(nvim, a.bin_dir, mock, work, agent, order, a.prompts, a.tokens, cc_dir, plenary_dir, a.stamp)
                for c, r in res["results"].items():
                    if a.stamp:
                        r["stamps"] = res["stamps"][c]
                    raw.setdefault(agent, {}).setdefault(c, []).append(r)
                print(f"run {run + 1} {agent}: " + "; ".join(
                    f"{c} start {r['start_ms']:.0f} ms, first {', '.join(f'{x:.1f}' for x in r['first_ms'])} ms"
                    + (f", stream max {max(r['stream']['lateness_ms']):.1f} ms" if r.get("stream") else "")
                    for c, r in res["results"].items()), flush=True)
    finally:
        mock.close()
        shutil.rmtree(work, ignore_errors=True)  # sessions, codex homes, logs: the JSON keeps the figures
    summary = report(raw, a.tokens)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(summary=summary, raw=raw), f)


if __name__ == "__main__":
    main()
