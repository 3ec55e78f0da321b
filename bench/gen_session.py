#!/usr/bin/env python3
"""Writes a pi-format (v3) session of about N entries, with long tool outputs and two branches.

    bench/gen_session.py N OUT.jsonl [--cwd DIR] [--tool-lines MIN,MAX]

--tool-lines sets how many lines each bash result has (default 5,25: ~0.63 kB per entry;
25,125 gives the 12 MB / 8,000-entry session of section 8).

Deterministic (seeded), so every run measures the same file.
"""
import json
import random
import sys
import uuid

def main():
    n = int(sys.argv[1])
    out = sys.argv[2]
    cwd = sys.argv[sys.argv.index("--cwd") + 1] if "--cwd" in sys.argv else "/home/dev/project"
    lo, hi = map(int, (sys.argv[sys.argv.index("--tool-lines") + 1] if "--tool-lines" in sys.argv else "5,25").split(","))
    rnd = random.Random(n)
    ts = 1795979339000
    ids = set()

    def new_id():
        while True:
            i = "%08x" % rnd.getrandbits(32)
            if i not in ids:
                ids.add(i)
                return i

    def iso(ms):
        import datetime
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)

    lines = []
    header = {"type": "session", "version": 3, "id": str(uuid.UUID(int=rnd.getrandbits(128))), "timestamp": iso(ts), "cwd": cwd}
    lines.append(header)
    parent = None
    branch_points = []

    def add(entry):
        nonlocal parent, ts
        ts += 7
        e = {"type": entry.pop("type"), "id": new_id(), "parentId": parent, "timestamp": iso(ts)}
        e.update(entry)
        lines.append(e)
        parent = e["id"]
        return e["id"]

    add({"type": "model_change", "provider": "mock", "modelId": "mock-model"})
    add({"type": "thinking_level_change", "thinkingLevel": "off"})
    words = "the quick brown fox jumps over a lazy dog while tests compile and sessions grow".split()
    turn = 0
    while len(lines) < n:
        turn += 1
        add({"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": f"Step {turn}: " + " ".join(rnd.choice(words) for _ in range(30))}], "timestamp": ts}})
        call_id = f"call_{turn}"
        add({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": "Running a command."}, {"type": "toolCall", "id": call_id, "name": "bash", "arguments": {"command": f"cat file{turn}.txt"}}], "api": "openai-completions", "provider": "mock", "model": "mock-model", "usage": {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}, "stopReason": "toolUse", "timestamp": ts}})
        output = "\n".join(f"{i:5d} " + " ".join(rnd.choice(words) for _ in range(8)) for i in range(rnd.randint(lo, hi)))
        add({"type": "message", "message": {"role": "toolResult", "toolCallId": call_id, "toolName": "bash", "content": [{"type": "text", "text": output}], "isError": False, "timestamp": ts}})
        add({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": " ".join(rnd.choice(words) for _ in range(40))}], "api": "openai-completions", "provider": "mock", "model": "mock-model", "usage": {"input": 100, "output": 40, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 140, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}, "stopReason": "stop", "timestamp": ts}})
        if turn % 97 == 0:
            branch_points.append(parent)
        # Two branches: return to an earlier point, as /tree does.
        if len(branch_points) == 2 and turn % 211 == 0:
            parent = branch_points.pop(0)
    with open(out, "w") as f:
        for line in lines:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")

if __name__ == "__main__":
    main()
