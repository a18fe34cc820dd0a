#!/usr/bin/env bash
# The kill loop as a soak: runs tests/pubsub_kill_loop_loses_nothing.rs again and
# again with more orders and more SIGKILLs than the standing test, each run with
# a fresh random seed (printed, and reproducible with POSTFACH_SOAK_SEED).
#
#   benches/kill_loop.sh                 # 10 rounds, 10,000 orders, 10 kills each
#   benches/kill_loop.sh 3 3000 5        # rounds, orders, kills
#
# Every round must account for every published id with exactly one outcome and
# invoice no order twice; the first failing round stops the loop (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
export POSTFACH_SOAK_ORDERS=${2:-10000}
export POSTFACH_SOAK_KILLS=${3:-10}
cargo test --release --test scenarios --no-run
for ((r = 1; r <= rounds; r++)); do
  echo "== round $r of $rounds: $POSTFACH_SOAK_ORDERS orders, $POSTFACH_SOAK_KILLS kills"
  log=$(mktemp)
  status=0
  cargo test --release --test scenarios pubsub_kill_loop_loses_nothing:: -- --nocapture >"$log" 2>&1 || status=$?
  grep -E "kill loop|^kill |test result|panicked|never happened|have no record|invoiced twice" "$log" || true
  rm -f "$log"
  if [ "$status" != 0 ]; then
    echo "round $r failed" >&2
    exit 1
  fi
done
echo "$rounds round(s): every message accounted for"
