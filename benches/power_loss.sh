#!/usr/bin/env bash
# The power-loss property test as a soak: the same workloads as the 24 cases
# `cargo test` runs (src/power_loss.rs), thousands of them, on the simulated
# disk that keeps only what was synced. proptest prints the smallest failing
# workload and keeps its seed in proptest-regressions/power_loss.txt.
#
#   benches/power_loss.sh          # 5,000 cases
#   benches/power_loss.sh 20000    # cases
set -euo pipefail
cd "$(dirname "$0")/.."
export POSTFACH_POWER_LOSS_CASES=${1:-5000}
echo "== $POSTFACH_POWER_LOSS_CASES power cuts at random moments"
time cargo test --release --lib power_loss::every_answered_call_survives_a_power_cut_at_any_moment
