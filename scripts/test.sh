#!/usr/bin/env bash
# Runs every test: installs Neovim 0.11, pi 0.73.1 and the local model when missing, then
# `cargo test --workspace` (the host's crates, crates/ and the root package, and the mock model
# server, whose binary the benchmark smoke test runs). Extra arguments go to that cargo test (e.g.
# `scripts/test.sh --test handoff`). Then, unless HANDOFF_SKIP_LOCAL_MODEL=1, the end-to-end
# handoff against the local model and the automatic handoff at its real overflow, tests
# `cargo test` alone reports as ignored.
# The README's lazy.nvim spec runs under the lazy.nvim in tests/vendor/ (HANDOFF_LAZY_NVIM=/path
# names another checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
ensure_nvim
ensure_pi
ensure_mcp_everything
ensure_codex_acp
ensure_claude_agent_acp
ensure_claude_code_acp
ensure_gemini_cli
ensure_rg || echo "deps: ripgrep not installed; the benchmark smoke run skips its rg comparison" >&2   # optional
# The static (musl) binary's test (tests/install.rs) builds it with cargo-zigbuild: both wheels
# from PyPI and rustup's musl standard library (~45 s the first time). Without them it is SKIPPED.
ensure_zigbuild || echo "deps: cargo-zigbuild not installed; the static binary's test will be SKIPPED" >&2
rustup target add "$(uname -m)-unknown-linux-musl" >/dev/null 2>&1 \
  || echo "deps: rustup cannot add the musl target; the static binary's test will be SKIPPED" >&2
local_model=1
if [ "${HANDOFF_SKIP_LOCAL_MODEL:-0}" = 1 ]; then
  local_model=0
fi
if [ "$local_model" = 1 ]; then
  scripts/local-model.sh install
fi
cargo test --locked --workspace "$@"
if [ "$local_model" = 1 ]; then
  # One at a time: both drive the one local model server, and on 2 busy cores the second
  # waited past its 60 s guard for a turn (CI, handoff_flow_against_the_local_model).
  cargo test --locked --test nvim_e2e -- --ignored local_model --test-threads=1
fi
