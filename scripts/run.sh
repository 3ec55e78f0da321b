#!/usr/bin/env bash
# Builds the host and opens Neovim 0.11 with handoff.nvim loaded from this checkout, in the folder
# you run it from: the agent works there, and file arguments open relative to it.
# With ANTHROPIC_API_KEY or OPENAI_API_KEY set, that provider is used; without, a tiny local
# model (SmolLM2-135M via llama.cpp) is installed once and started on 127.0.0.1.
# Arguments go to Neovim.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"
ensure_nvim
# The build runs in the checkout; nothing else leaves the caller's folder.
(cd "$root" && cargo build --release --locked)
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true; }
trap cleanup EXIT

if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
  provider='{ api = "anthropic", model = os.getenv("HANDOFF_MODEL") or "claude-sonnet-4-5" }'
  echo "handoff.nvim: using Anthropic (ANTHROPIC_API_KEY)"
elif [ -n "${OPENAI_API_KEY:-}" ]; then
  provider='{ api = "openai", model = os.getenv("HANDOFF_MODEL") or "gpt-4.1-mini" }'
  echo "handoff.nvim: using OpenAI (OPENAI_API_KEY)"
else
  echo "handoff.nvim: no ANTHROPIC_API_KEY or OPENAI_API_KEY: starting a tiny offline demo model"
  echo "  (SmolLM2-135M on 127.0.0.1: it answers, but far too small to write good handoffs)"
  portfile="$(mktemp)"
  "$root/scripts/local-model.sh" start "$portfile"
  read -r server_pid url <"$portfile"
  rm -f "$portfile"
  provider="{ api = \"openai\", base_url = \"$url\", model = \"smollm2-135m\", provider_name = \"local\", context_window = 8192, max_tokens = 1024 }"
fi

"$NVIM_BIN" --cmd "set rtp^=$root" \
  -c "lua require('handoff').setup({ provider = $provider })" \
  -c "HandoffChat" "$@"
