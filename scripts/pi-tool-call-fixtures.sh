#!/usr/bin/env bash
# Regenerates the tool-call fixtures: pi 0.73.1 answers a prompt against the mock model server,
# which asks for three `read` calls (a text file, a missing file, a PNG) and then says "Done.".
# Writes, for each of pi's two APIs, the session file pi wrote
# (tests/fixtures/pi-sessions/pimono-0.73.1-tool-calls-<api>.jsonl) and the body of pi's second
# request, the one carrying the calls and their results (tests/fixtures/pi-requests/…json).
# The temporary project path is replaced by /home/dev/project in both, as in the other fixtures.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"
ensure_pi
cargo build --locked -q -p handoff-mock --bin mock-model-server
mock_bin="$root/target/debug/mock-model-server"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# A 1x1 PNG.
printf '%s' iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC | base64 -d > "$work/dot.png"
mkdir -p "$root/tests/fixtures/pi-requests"

for api in openai-completions anthropic-messages; do
  short=${api%%-*}
  out="$work/$short"
  mkdir -p "$out"/{project,home,pi-agent,sessions}
  cp "$work/dot.png" "$out/project/dot.png"
  printf 'alpha\nbeta\n' > "$out/project/a.txt"
  coproc MOCK { exec "$mock_bin"; }
  read -r base <&"${MOCK[0]}"
  origin=${base%/v1}
  # The Anthropic SDK appends /v1/messages itself.
  url=$base; [ "$api" = anthropic-messages ] && url=$origin
  printf '{"providers":{"mock":{"baseUrl":"%s","api":"%s","apiKey":"x","models":[{"id":"mock-model","contextWindow":32000,"maxTokens":4096,"input":["text","image"]}]}}}' \
    "$url" "$api" > "$out/pi-agent/models.json"
  curl -sf -X POST "$origin/__mock/push" -d '[
   {"kind":"tool_calls","text_before":["I will look."],"calls":[
     {"id":"call_read_1","name":"read","arguments":"{\"path\":\"a.txt\"}","chunks":3},
     {"id":"call_read_2","name":"read","arguments":"{\"path\":\"missing.txt\"}","chunks":2},
     {"id":"call_read_3","name":"read","arguments":"{\"path\":\"dot.png\"}","chunks":1}]},
   {"kind":"text","chunks":["Done."]}]' >/dev/null
  (cd "$out/project" && HOME="$out/home" PI_CODING_AGENT_DIR="$out/pi-agent" PI_OFFLINE=1 \
    timeout 120 "$PI_BIN" --provider mock --model mock-model --session-dir "$out/sessions" \
    -p "Read a.txt, missing.txt and dot.png" >/dev/null)
  curl -sf "$origin/__mock/requests" > "$out/requests.json"
  kill "$MOCK_PID"
  wait "$MOCK_PID" 2>/dev/null || true
  sed "s#$out/project#/home/dev/project#g" "$out"/sessions/*.jsonl \
    > "$root/tests/fixtures/pi-sessions/pimono-0.73.1-tool-calls-$short.jsonl"
  python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)[1]["body"], indent=1, ensure_ascii=False))' \
    < "$out/requests.json" | sed "s#$out/project#/home/dev/project#g" \
    > "$root/tests/fixtures/pi-requests/pimono-0.73.1-tool-calls-$short.json"
done
echo "wrote tests/fixtures/pi-sessions/pimono-0.73.1-tool-calls-{openai,anthropic}.jsonl and tests/fixtures/pi-requests/"
