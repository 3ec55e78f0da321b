#!/usr/bin/env bash
# Runs every test (scripts/test.sh, the README's test command; extra arguments go to it, e.g.
# `scripts/test-under-load.sh --test nvim_controller`) with a busy loop on each core for the whole
# run, as a loaded CI machine would. No test may fail because the machine is slow: run this after
# changing a test that waits for something or measures time (doc/design.md, "Working on it").
# HANDOFF_LOAD_LOOPS sets how many loops (default: one per core, `nproc`).
set -euo pipefail
cd "$(dirname "$0")/.."
loops=${HANDOFF_LOAD_LOOPS:-$(nproc)}
pids=()
stop_loops() {
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
}
trap stop_loops EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for _ in $(seq "$loops"); do
  # A subshell spinning in bash itself: no process per turn, all of a core's time.
  ( while :; do :; done ) &
  pids+=("$!")
done
echo "test-under-load.sh: $loops busy loops (pids ${pids[*]}) beside the suite" >&2
started=$SECONDS
status=0
scripts/test.sh "$@" || status=$?
echo "test-under-load.sh: the suite took $((SECONDS - started)) s under load, exit status $status" >&2
exit "$status"
