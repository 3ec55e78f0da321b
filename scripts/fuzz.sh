#!/usr/bin/env bash
# Bounded fuzzing of the session-file reader and the stream/event parsers (not part of
# `cargo test`). Each target runs for FUZZ_SECONDS (default 60) from the seeds in fuzz/seeds
# plus the corpus kept in fuzz/corpus; crashes land in fuzz/artifacts/<target>/.
#
#   scripts/fuzz.sh                   # every target, 60 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh session_reader
#
# Needs a nightly toolchain and cargo-fuzz (`rustup toolchain install nightly`,
# `cargo install cargo-fuzz`). Prints one summary line per target: executions, corpus, crashes.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${FUZZ_SECONDS:-60}"
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(session_reader sse_openai sse_anthropic sse_responses)
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz.sh: no nightly toolchain: rustup toolchain install nightly" >&2; exit 2
fi
command -v cargo-fuzz >/dev/null || { echo "fuzz.sh: cargo install cargo-fuzz" >&2; exit 2; }
cargo +nightly fuzz build -O
status=0
for t in "${TARGETS[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  log="fuzz/artifacts/$t/last-run.log"
  set +e
  cargo +nightly fuzz run -O "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
    -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  corpus=$(ls "fuzz/corpus/$t" | wc -l)
  crashes=$(find "fuzz/artifacts/$t" -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' | wc -l)
  echo "$t: ${SECONDS_PER_TARGET}s, executions=$execs, corpus=$corpus, crashes=$crashes, exit=$rc (log: $log)"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
