#!/usr/bin/env bash
# Runs every benchmark side by side with pi and rewrites the results part of doc/benchmarks.md.
#
#   bench/run.sh              # release build of the host and mock-model-server (workspace),
#                             # Neovim 0.11 + pi 0.73.1 + rg installed when missing, whole-process
#                             # benchmarks (bench/bench.py), then `cargo bench`
#   bench/run.sh --runs 9     # extra arguments go to bench/bench.py
#   BENCH_SKIP_CARGO=1 bench/run.sh   # skip the in-process `cargo bench` part
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
ensure_nvim
ensure_pi
ensure_rg
cargo build --release --locked --workspace --bins   # the host and mock-model-server (handoff-mock)
python3 bench/bench.py --bin-dir target/release --pi "$PI_BIN" --rg "$RG_BIN" --doc doc/benchmarks.md \
  --json target/bench-results.json "$@"
if [ "${BENCH_SKIP_CARGO:-0}" != 1 ]; then
  cargo bench --locked --bench inprocess 2>&1 | tee target/bench-inprocess.txt
fi
