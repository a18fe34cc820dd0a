#!/usr/bin/env bash
# How much of the vendors' own BPMN test models postfach deploys as drawn
# (no warning), with warnings, or refuses: Flowable's engine test models,
# Camunda 7's and Zeebe's. Each repository is taken from
# $POSTFACH_SWEEP_REPOS/NAME if it is there (a checkout or a bare clone),
# else shallow-cloned from GitHub into target/vendor-sweep/. The result,
# with each repository's commit, is kept in bench-results/vendor-sweep.json.
#
#   benches/vendor_sweep.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=target/vendor-sweep
mkdir -p "$work"
sweep=()
take() { # NAME URL PATH-IN-REPO
  local name=$1 url=$2 path=$3 src="${POSTFACH_SWEEP_REPOS:-}/$1"
  local out="$work/$name"
  rm -rf "$out" && mkdir -p "$out"
  local repo=$src
  if [[ -z "${POSTFACH_SWEEP_REPOS:-}" || ! -d "$src" ]]; then
    repo="$out.git"
    git clone -q --depth 1 --bare "$url" "$repo"
  fi
  local commit
  commit=$(git -C "$repo" rev-parse HEAD)
  # only the models: a repository's other files are not needed
  git -C "$repo" ls-tree -r --name-only HEAD -- "$path" |
    grep -E '\.(bpmn|bpmn20\.xml)$' |
    while IFS= read -r f; do
      mkdir -p "$out/$(dirname "$f")"
      git -C "$repo" show "HEAD:$f" >"$out/$f"
    done
  [[ "$repo" == "$out.git" ]] && rm -rf "$repo"
  sweep+=("$name,$url,$commit,$out/$path")
}
take flowable https://github.com/flowable/flowable-engine modules/flowable-engine/src/test/resources/org/flowable/engine/test/bpmn
take camunda7 https://github.com/camunda/camunda-bpm-platform engine/src/test/resources/org/camunda/bpm/engine/test/bpmn
take zeebe https://github.com/camunda/zeebe .
POSTFACH_COMMIT=$(git rev-parse --short HEAD) \
POSTFACH_DATE=$(date -u +%Y-%m-%d) \
POSTFACH_MACHINE="$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB" \
  cargo run --release --quiet --example vendor_sweep -- --json bench-results/vendor-sweep.json "${sweep[@]}"
