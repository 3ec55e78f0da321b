#!/usr/bin/env python3
"""Regenerates tests/fixtures/pi-sessions/pimono-0.73.1-history.jsonl: a session written by pi
0.73.1 (RPC mode, Anthropic API) against the mock model server, with what replaying history must
handle: signed and redacted thinking of one model, then a switch to another model, a turn aborted
while it streams text, a turn aborted in the middle of a tool call, a turn that failed (HTTP 400),
a compaction, and a turn after it. The temporary project path becomes /home/dev/project.

Run from the repository root after `source scripts/deps.sh && ensure_pi` (PI_BIN) and
`cargo build -p handoff-mock --bin mock-model-server`."""
import json, os, pathlib, shutil, subprocess, sys, tempfile, time, urllib.request

root = pathlib.Path(__file__).resolve().parent.parent
pi = os.environ["PI_BIN"]
work = pathlib.Path(tempfile.mkdtemp())
project = work / "project"
for d in ("project", "home", "pi-agent", "sessions"):
    (work / d).mkdir()
(project / "a.txt").write_text("alpha\n")

mock = subprocess.Popen([str(root / "target/debug/mock-model-server")], stdout=subprocess.PIPE, text=True)
base = mock.stdout.readline().strip()
origin = base.removesuffix("/v1")


def push(*replies):
    req = urllib.request.Request(origin + "/__mock/push", data=json.dumps(list(replies)).encode(), method="POST")
    urllib.request.urlopen(req).read()


models = [{"id": m, "contextWindow": 32000, "maxTokens": 4096, "reasoning": True} for m in ("mock-model", "mock-model-b")]
(work / "pi-agent/models.json").write_text(json.dumps(
    {"providers": {"mock": {"baseUrl": origin, "api": "anthropic-messages", "apiKey": "x", "models": models}}}))
env = dict(os.environ, HOME=str(work / "home"), PI_CODING_AGENT_DIR=str(work / "pi-agent"), PI_OFFLINE="1")
proc = subprocess.Popen(
    [pi, "--mode", "rpc", "--provider", "mock", "--model", "mock-model", "--thinking", "low",
     "--session-dir", str(work / "sessions"),
     "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files", "--no-themes"],
    cwd=project, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def send(cmd):
    proc.stdin.write(json.dumps(cmd) + "\n")
    proc.stdin.flush()


def until(pred, what):
    for line in proc.stdout:
        event = json.loads(line)
        if pred(event):
            return event
    sys.exit(f"pi ended before {what}")


def run(message, abort_on=None):
    send({"type": "prompt", "message": message})
    if abort_on:
        until(abort_on, "the reply streamed")
        send({"type": "abort"})
    until(lambda e: e.get("type") == "agent_end", "agent_end")


# 1. Signed and redacted thinking, a tool call and its result (model A).
push({"kind": "reasoning", "thinking": ["I should ", "read it."], "signature": "c2lnLWE=", "redacted": "cmVkLWE=",
      "chunks": ["Reading a.txt."],
      "calls": [{"id": "toolu_read_1", "name": "read", "arguments": "{\"path\":\"a.txt\"}", "chunks": 2}]},
     {"kind": "reasoning", "thinking": ["It says alpha."], "signature": "c2lnLWI=", "chunks": ["a.txt says alpha."]})
run("What is in a.txt?")
# 2. The other model from here on.
send({"type": "set_model", "provider": "mock", "modelId": "mock-model-b"})
until(lambda e: e.get("type") == "response" and e.get("command") == "set_model", "set_model")
# 3. Aborted while streaming text.
push({"kind": "text", "chunks": ["Let me ", "write ", "a very ", "long ", "answer."] + ["."] * 50, "chunk_delay_ms": 200})
run("Write a long story.", abort_on=lambda e: e.get("type") == "message_update")
# 4. Aborted in the middle of a tool call.
push({"kind": "tool_calls", "text_before": ["Checking."], "chunk_delay_ms": 400,
      "calls": [{"id": "toolu_ls_1", "name": "bash", "arguments": "{\"command\":\"ls -la /tmp\"}", "chunks": 20}]})
run("List /tmp.", abort_on=lambda e: e.get("type") == "message_update"
    and e.get("assistantMessageEvent", {}).get("type") == "toolcall_delta")
# 5. A failed request.
push({"kind": "status", "status": 400, "body": "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad request\"}}"})
run("Try again.")
# 6. A normal turn, then a compaction (the mock writes the summary), then a turn after it.
push({"kind": "text", "chunks": ["Here it is."]})
run("Just say something.")
push({"kind": "text", "chunks": ["## Goal\nRead a.txt and answer.\n\n## Progress\n- a.txt says alpha."]})
send({"type": "compact"})
until(lambda e: e.get("type") == "response" and e.get("command") == "compact", "compact")
push({"kind": "text", "chunks": ["After the summary."]})
run("Go on after the compaction.")
proc.stdin.close()
proc.wait(timeout=30)
mock.terminate()

[session] = list((work / "sessions").rglob("*.jsonl"))
text = session.read_text().replace(str(project), "/home/dev/project")
out = root / "tests/fixtures/pi-sessions/pimono-0.73.1-history.jsonl"
out.write_text(text)
shutil.rmtree(work)
print(f"wrote {out.relative_to(root)}")
