#!/usr/bin/env bash
# postfach against the Flowable-backed receivers of the article, side by side on
# one machine: one emulator, one seeded workload, one SIGKILL per contender.
#
#   benches/compare.sh                       # 500 orders, backlog 1,000, all seven: about 35 min here
#   benches/compare.sh --orders 10000        # the long run: several hours here
#   benches/compare.sh --orders 300 --contenders postfach,naive-h2
#
# Options of the driver (examples/compare.rs): --orders N (500), --burst N (backlog
# phase, default min(2N, 2000)), --burst-limit S (180), --early SHARE (0.30),
# --seed N (4711), --quiet S (90: stop waiting after S without progress),
# --limit S (420: cap of the chaos phase), --out DIR (bench-results).
#
# Installs what it needs: PostgreSQL from Debian (when a -pg contender runs and
# it is missing), the Flowable receivers with Maven (Maven Central), the release
# build of postfach. Writes bench-results/compare.{md,json,svg}.
set -euo pipefail
cd "$(dirname "$0")/.."

args=("$@")
want_pg=1
for ((i = 0; i < ${#args[@]}; i++)); do
  if [[ "${args[$i]}" == "--contenders" ]]; then
    [[ "${args[$((i + 1))]}" == *-pg* ]] || want_pg=0
  fi
done

pg_bin=""
if [[ $want_pg == 1 ]]; then
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [[ -z "$pg_bin" || ! -x "$pg_bin/initdb" ]]; then
    echo "compare: installing PostgreSQL (Debian package postgresql)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
    pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  fi
  # stop the cluster Debian's package may have started: the harness runs its own
  if command -v pg_ctlcluster >/dev/null; then
    for c in $(pg_lsclusters -h 2>/dev/null | awk '{print $1"/"$2}'); do
      pg_ctlcluster "${c%/*}" "${c#*/}" stop 2>/dev/null || true
    done
  fi
fi

echo "compare: building the Flowable receivers (Maven)" >&2
(cd compare/flowable && mvn -q -B -DskipTests package)
cp="compare/flowable/target/classes:compare/flowable/target/lib/*"

echo "compare: building postfach (release)" >&2
cargo build --release --quiet --bins --example compare

extra=()
[[ -n "$pg_bin" ]] && extra=(--pg-bin "$pg_bin")
exec cargo run --release --quiet --example compare -- --java-cp "$cp" "${extra[@]}" "${args[@]}"
