#!/usr/bin/env python3
"""Issue 40: a client that stops reading `handoff-nvim acp`'s output for a while as a long reply
streams. The host's memory is sampled (VmRSS every 50 ms, and VmHWM at the end) in two runs of
the same reply: a client that reads all along (the control), and one that reads the first
updates, stops reading for `--stall` seconds, then reads the rest. What the stalled client got
(the chunks, the notice of what was left out) is reported beside it.

    cargo build --release --workspace
    python3 bench/acp_backpressure.py --bin-dir target/release [--tokens 400000] [--stall 10]
"""
import argparse
import json
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the mock, the ACP client)


def run(bin_dir, env, mock, work, tokens, stall):
    cwd = os.path.join(work, "project")
    os.makedirs(cwd, exist_ok=True)
    reply = {"kind": "text", "chunks": [f"w{i}" + ("\n" if i % 16 == 15 else " ") for i in range(tokens)],
             "chunk_delay_ms": 0}
    mock.control("reset")
    mock.control("push", reply)
    agent = bench.AcpClient(bin_dir, env, cwd)
    pid = agent.proc.pid
    agent.answer(agent.send("initialize", {"protocolVersion": 1, "clientCapabilities": {}}))
    session = agent.answer(agent.send("session/new", {"cwd": cwd, "mcpServers": []}))[0]["sessionId"]
    idle = bench.rss_kib(pid)
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            r = bench.rss_kib(pid)
            if r:
                samples.append((time.monotonic(), r))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    prompt = agent.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
    chunks, notices, other = 0, [], 0
    stalled_at = None
    while True:
        if stall and chunks == 10 and stalled_at is None:
            stalled_at = time.monotonic()
            time.sleep(stall)
        message, _ = agent.until(lambda m: True)
        if message.get("id") == prompt and "method" not in message:
            answer = message
            break
        if bench.is_chunk(message):
            chunks += 1
            text = message["params"]["update"]["content"].get("text", "")
            if not text.startswith("w") and text.strip():
                notices.append(text[:200])
        else:
            other += 1
    t_end = time.monotonic()
    hwm = bench.rss_kib(pid, "VmHWM")
    agent.close()
    stop.set()
    sampler.join()
    during = [r for t, r in samples if stalled_at and stalled_at <= t <= stalled_at + stall]
    return dict(idle_kib=idle, peak_sampled_kib=max(r for _, r in samples), hwm_kib=hwm,
                peak_during_stall_kib=max(during) if during else None, chunks=chunks, other_updates=other,
                notices=notices, stop_reason=answer.get("result", {}).get("stopReason"),
                seconds=round(t_end - t0, 2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default="target/release")
    ap.add_argument("--tokens", type=int, default=400_000)
    ap.add_argument("--stall", type=float, default=10.0)
    args = ap.parse_args()
    args.bin_dir = os.path.abspath(args.bin_dir)
    work = tempfile.mkdtemp(prefix="acp-bp-")
    mock = bench.Mock(args.bin_dir)
    env = dict(os.environ, HANDOFF_PROVIDER="openai", HANDOFF_BASE_URL=mock.url, HANDOFF_MODEL="mock-model",
               HANDOFF_SESSION_DIR=os.path.join(work, "sessions"), HOME=work)
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HANDOFF_LOG_FILE"):
        env.pop(k, None)
    results = {}
    for name, stall in (("reads all along", 0), (f"stops reading {args.stall:g} s", args.stall)):
        results[name] = run(args.bin_dir, env, mock, work, args.tokens, stall)
    print(json.dumps(dict(tokens=args.tokens, **results), indent=2))


if __name__ == "__main__":
    main()
