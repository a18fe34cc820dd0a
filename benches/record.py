#!/usr/bin/env python3
"""Keeps what a criterion bench just measured as a result file.

    benches/record.py NAME "COMMAND" PREFIX [PREFIX ...]

reads every benchmark of target/criterion whose id starts with one of the
prefixes (its last run: `new/`) and writes bench-results/NAME.json — the
command, the commit, the date, the machine and, per benchmark, the median
and mean time of one iteration and the elements it handles (criterion's
throughput), from which benches/render.py computes rates.
"""
import json
import os
import subprocess
import sys
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def machine():
    cores = os.cpu_count()
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cores} cores ({model}), {mem_kb // (1024 * 1024)} GiB"


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    name, command, prefixes = sys.argv[1], sys.argv[2], sys.argv[3:]
    base = os.path.join(ROOT, "target", "criterion")
    results = []
    for dirpath, _, files in os.walk(base):
        if os.path.basename(dirpath) != "new" or "benchmark.json" not in files:
            continue
        with open(os.path.join(dirpath, "benchmark.json")) as f:
            bench = json.load(f)
        if not any(bench["full_id"].startswith(p) for p in prefixes):
            continue
        with open(os.path.join(dirpath, "estimates.json")) as f:
            est = json.load(f)
        elements = (bench.get("throughput") or {}).get("Elements")
        results.append(
            {
                "id": bench["full_id"],
                "median_ns": est["median"]["point_estimate"],
                "mean_ns": est["mean"]["point_estimate"],
                "elements": elements,
            }
        )
    if not results:
        sys.exit(f"no benchmark under {base} starts with {prefixes}")
    results.sort(key=lambda r: r["id"])
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    doc = {
        "command": command,
        "commit": commit,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "machine": machine(),
        "results": results,
    }
    out = os.path.join(ROOT, "bench-results", f"{name}.json")
    with open(out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"{out}: {len(results)} benchmarks")


if __name__ == "__main__":
    main()
