"""Runs an ACP agent between a client and itself, appending to STAMP_LOG the CLOCK_MONOTONIC time
(ns, the clock of Neovim's vim.uv.hrtime) of every JSON-RPC line each way: `>` to the agent, `<`
from it, with its method (a `session/update` with its kind and a chunk's first characters).
Used by bench/agent_editor.py --stamp to split a prompt's time into client / agent / client.

usage: STAMP_LOG=FILE python3 bench/acp_stamp.py AGENT [ARGS...]"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time

log = open(os.environ["STAMP_LOG"], "a")
lock = threading.Lock()


def die_with_us():
    """The agent gets SIGKILL when this process ends, however it ends: a client that kills its
    agent kills this one, and codex-acp does not exit on EOF."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


agent = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=die_with_us)


def stamp(way, line):
    t = time.monotonic_ns()
    try:
        msg = json.loads(line)
        what = msg.get("method") or ("result" if "result" in msg else "error")
        if what == "session/update":
            update = msg["params"]["update"]
            what += ":" + update.get("sessionUpdate", "")
            if update.get("sessionUpdate") == "agent_message_chunk":
                what += ":" + update["content"].get("text", "")[:12].replace("\n", " ")
    except (ValueError, KeyError, TypeError, AttributeError):
        what = "?"
    with lock:
        log.write(f"{t} {way} {what}\n")
        log.flush()


def to_agent():
    for line in sys.stdin.buffer:
        stamp(">", line)
        agent.stdin.write(line)
        agent.stdin.flush()
    agent.stdin.close()


threading.Thread(target=to_agent, daemon=True).start()
for line in agent.stdout:
    stamp("<", line)
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
sys.exit(agent.wait())
