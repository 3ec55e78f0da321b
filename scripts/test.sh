#!/usr/bin/env bash
# Runs every test: installs Neovim 0.11, pi 0.73.1 and the local model when missing, then
# `cargo test --workspace` (the host crate and the mock model server, whose binary the
# benchmark smoke test runs). Extra arguments go to cargo test (e.g. `scripts/test.sh --test handoff`).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
ensure_nvim
ensure_pi
if [ "${HANDOFF_SKIP_LOCAL_MODEL:-0}" != 1 ]; then
  scripts/local-model.sh install
  export HANDOFF_LOCAL_MODEL=1
fi
cargo test --locked --workspace "$@"
