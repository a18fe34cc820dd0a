#!/usr/bin/env bash
# The cluster test as a soak: runs
# tests/a_cluster_loses_no_message_when_its_processes_are_killed.rs again and
# again with more orders and more SIGKILLs (of partitions, routers and
# gateways) than the standing test, each run with a fresh random seed
# (printed, and reproducible with POSTFACH_CLUSTER_SEED).
#
#   benches/cluster_soak.sh               # 10 rounds, 3,000 orders, 20 kills each
#   benches/cluster_soak.sh 3 1000 10     # rounds, orders, kills
#
# Every round must account for every published event id with exactly one
# outcome on exactly one partition and invoice no order twice; the first
# failing round stops the loop (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
export POSTFACH_CLUSTER_ORDERS=${2:-3000}
export POSTFACH_CLUSTER_KILLS=${3:-20}
cargo test --release --test scenarios --no-run
for ((r = 1; r <= rounds; r++)); do
  echo "== round $r of $rounds: $POSTFACH_CLUSTER_ORDERS orders, $POSTFACH_CLUSTER_KILLS kills"
  log=$(mktemp)
  status=0
  cargo test --release --test scenarios a_cluster_loses_no_message_when_its_processes_are_killed:: -- --nocapture >"$log" 2>&1 || status=$?
  grep -E "^cluster:|^kill |test result|panicked|never happened|have no record|invoiced|records, exactly" "$log" || true
  rm -f "$log"
  if [ "$status" != 0 ]; then
    echo "round $r failed" >&2
    exit 1
  fi
done
echo "$rounds round(s): every event id accounted for"
