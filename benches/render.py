#!/usr/bin/env python3
"""Renders the measured figures of the README and the book from the
result files.

    benches/render.py          # rewrites the rendered blocks
    benches/render.py --check  # exits 1 when a block differs from its files

README.md and the chapters under docs/src/ hold blocks between
`<!-- rendered: NAME -->` and `<!-- end rendered -->`; each is rendered here
from bench-results/NAME.json (or the table a bench wrote beside it,
bench-results/NAME.md). A figure that has no result file is not printed.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
def documents():
    """The README and every chapter of the book."""
    src = os.path.join(ROOT, "docs", "src")
    return [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(src, f) for f in os.listdir(src) if f.endswith(".md")
    )


def load(name):
    with open(os.path.join(ROOT, "bench-results", f"{name}.json")) as f:
        return json.load(f)


def provenance(doc):
    return (
        f"Command `{doc['command']}`, commit {doc['commit']}, {doc['date']}, "
        f"{doc['machine']}; the median of criterion's samples "
        f"(`bench-results/` keeps the means too)."
    )


def rate(r):
    return r["elements"] / (r["median_ns"] / 1e9)


def fmt_rate(x):
    return f"{x:,.0f} /s"


def fmt_time(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.1f} ns"


def by_id(doc):
    return {r["id"]: r for r in doc["results"]}


# (criterion id, what it measures, target)
ENGINE = [
    ("fsync_ceiling/write_4k_fsync", "fsync ceiling (append 4 KiB + fdatasync)", "—"),
    ("fsync_ceiling/write_4k_fsync_overwrite", "fsync ceiling of an overwrite (4 KiB into blocks the file has + fdatasync; the log's appends since it writes zeros ahead)", "—"),
    ("publish_into_buffer/sequential_1_caller", "publish into buffer, 1 sequential caller", "≥ 1,500 /s"),
    ("publish_into_buffer/concurrent_64_callers", "publish into buffer, 64 concurrent callers (group commit)", "≥ 30,000 /s"),
    ("reference_instances/complete_64_callers", "reference instances completed (start → hand-over job → correlate → invoice job → end), 64 callers", "≥ 20,000 /s or ≥ 0.7× the floor"),
    ("reference_floor/complete_64_callers", "the floor: the same rows in the same transactions, bare redb and a log like the engine's, no engine", "—"),
    ("correlate_with_buffered/10000", "correlate into waiting instances, 10,000 other messages buffered", "flat"),
    ("correlate_with_buffered/1000000", "same, 1,000,000 other messages buffered", "flat"),
]


def render_engine():
    doc = load("engine")
    rs = by_id(doc)
    ceiling = rate(rs[ENGINE[0][0]])
    lines = [provenance(doc), "", "| benchmark | result | vs. fsync ceiling | target |", "| --- | ---: | ---: | --- |"]
    base = rs.get("correlate_with_buffered/10000")
    for cid, what, target in ENGINE:
        r = rs.get(cid)
        if r is None:
            continue
        x = rate(r)
        if cid == "reference_instances/complete_64_callers" and "reference_floor/complete_64_callers" in rs:
            floor = rate(rs["reference_floor/complete_64_callers"])
            vs = f"{x / ceiling:.2f}× ({x / floor:.2f}× the floor)"
        elif cid.startswith("correlate_with_buffered/"):
            # 512 correlations share a batch: a lookup cost, not a sync rate
            vs = f"{x / rate(base):.2f}× of the 10,000 row" if base and r is not base else "—"
        else:
            vs = f"{x / ceiling:.2f}×"
        lines.append(f"| {what} | {fmt_rate(x)} | {vs} | {target} |")
    return lines


JOBS = [
    ("noop_jobs/continuation_then_handler_job", "no-op jobs (async continuation + handler job, executor runner)", "≥ 10,000 /s"),
    ("external_worker_round_trip/acquire_1_then_complete", "external worker round trip, acquire 1 + complete 1", "—"),
    ("external_worker_round_trip/acquire_100_then_complete", "external worker round trip, acquire 100 + complete each", "—"),
]


def render_jobs():
    doc = load("jobs")
    rs = by_id(doc)
    lines = [provenance(doc), "", "| benchmark | result | target |", "| --- | ---: | --- |"]
    for cid, what, target in JOBS:
        r = rs.get(cid)
        if r is not None:
            lines.append(f"| {what} | {fmt_rate(rate(r))} | {target} |")
    r = rs.get("restart/open_to_first_resumed_job_100k_pending")
    if r is not None:
        lines.append(
            "| restart with 100,000 pending jobs (1,000 leased by the dead process): open → first resumed handler call "
            f"| {fmt_time(r['median_ns'])} | < 1 s |"
        )
    return lines


def render_expressions():
    doc = load("expressions")
    rs = by_id(doc)
    native = rs["gateway_condition/native"]["median_ns"]
    feel = rs["gateway_condition/feel"]["median_ns"]
    table = rs["decision_table/100_rules_unique"]["median_ns"]
    return [
        provenance(doc),
        "",
        "| benchmark | result | target |",
        "| --- | ---: | --- |",
        f"| gateway condition `${{amount > 1000 && approved}}`, postfach's own evaluator | {fmt_time(native)} | — |",
        f"| the same condition in FEEL, `=amount > 1000 and approved` | {fmt_time(feel)} ({feel / native:.2f}× the native evaluator) | ≤ 3× |",
        f"| DMN decision table, 100 rules, hit policy UNIQUE, the last rule matching, matched rules included | {fmt_time(table)} | ≤ 50 µs |",
    ]


def include_md(name):
    def render():
        doc = load(name)
        with open(os.path.join(ROOT, "bench-results", f"{name}.md")) as f:
            table = f.read().strip().splitlines()
        return [f"Result file `bench-results/{name}.json` (commit {doc['commit']}); the table the bench wrote beside it:", ""] + table

    return render


def render_sweep():
    doc = load("vendor-sweep")
    lines = [
        f"Command `{doc['command']}`, postfach {doc['postfach_commit']}, {doc['date']}, {doc['machine']}.",
        "",
        "| models (repository commit) | files | as drawn | with warnings | refused (only for a correlation key) | panics |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    tot = dict(files=0, as_drawn=0, with_warnings=0, refused=0, refused_for_keys_only=0, panics=0)
    for v in doc["vendors"]:
        n = max(v["files"], 1)
        lines.append(
            f"| {v['name']} ({v['commit'][:7]}) | {v['files']:,} | {v['as_drawn']:,} ({100 * v['as_drawn'] / n:.1f} %) "
            f"| {v['with_warnings']:,} ({100 * v['with_warnings'] / n:.1f} %) | {v['refused']:,} ({v['refused_for_keys_only']}) | {v['panics']} |"
        )
        for k in tot:
            tot[k] += v[k]
    n = max(tot["files"], 1)
    lines.append(
        f"| all | {tot['files']:,} | {tot['as_drawn']:,} ({100 * tot['as_drawn'] / n:.1f} %) "
        f"| {tot['with_warnings']:,} ({100 * tot['with_warnings'] / n:.1f} %) | {tot['refused']:,} ({tot['refused_for_keys_only']}) | {tot['panics']} |"
    )
    return lines


def tck_counts():
    doc = load("dmn-tck")
    l2, l3 = doc["levels"]["compliance-level-2"], doc["levels"]["compliance-level-3"]
    return doc, l2, l3


def passed(level):
    return level["values"][0] + level["errors"][0]


def total(level):
    return level["values"][1] + level["errors"][1]


def render_tck():
    doc, l2, l3 = tck_counts()
    both = passed(l2) + passed(l3), total(l2) + total(l3)

    def row(what, level):
        errors = f"{level['errors'][0]:,} of {level['errors'][1]:,}" if level["errors"][1] else "—"
        return (
            f"| {what} | {level['values'][0]:,} of {level['values'][1]:,} | {errors} "
            f"| {passed(level):,} of {total(level):,} ({100 * passed(level) / total(level):.1f} %) |"
        )

    return [
        f"Command `{doc['command']}`, commit {doc['commit']}, {doc['date']}; the TCK {doc['tck']}.",
        "",
        "| | values expected | errors expected | all |",
        "| --- | --- | --- | --- |",
        row("compliance level 2 (decision tables)", l2),
        row("compliance level 3 (FEEL, boxed expressions, decision services)", l3),
        f"| whole TCK (levels 2 and 3) | | | {both[0]:,} of {both[1]:,} ({100 * both[0] / both[1]:.1f} %) |",
        "",
        "Beside it, " + doc["published"]["source"] + ": DecisionToolkit "
        + "{:,} of {:,} ({:.1f} %), Camunda dmn-scala {}.".format(
            *doc["published"]["DecisionToolkit"],
            100 * doc["published"]["DecisionToolkit"][0] / doc["published"]["DecisionToolkit"][1],
            doc["published"]["Camunda dmn-scala"],
        ),
    ]


def render_headline():
    ingest = load("ingest")
    four = {c["name"].split(" (")[0]: c for c in ingest["contenders"] if c["streams"] == 4}
    run = four["postfach run"]["drain_per_s"] / four["Google's Go client, null consumer"]["drain_per_s"]
    compare = load("compare")
    cs = {c["contender"]: c for c in compare["contenders"]}
    mine = cs.pop("postfach")
    best = max(cs.values(), key=lambda c: c["burst_per_s"])
    worst_lost = max(c["lost"] for c in cs.values())
    worst_twice = max(c["orders_invoiced_twice"] for c in cs.values())
    cluster = load("cluster")
    cpu = {e["partitions"]: e["postfach_cpu_seconds"] for e in cluster["end_to_end"]}
    sweep = load("vendor-sweep")
    files = sum(v["files"] for v in sweep["vendors"])
    share = lambda k: 100 * sum(v[k] for v in sweep["vendors"]) / files
    _, l2, l3 = tck_counts()
    tck = passed(l2) + passed(l3), total(l2) + total(l3)
    return [
        "| what | figure | result file |",
        "| --- | --- | --- |",
        f"| Pub/Sub drain, postfach storing then acking vs Google's Go client acking only (4 streams) | {run:.2f}× | `bench-results/ingest.json` |",
        f"| backlog throughput vs the best Flowable-backed receiver of the article ({best['contender']}) | {mine['burst_per_s'] / best['burst_per_s']:.1f}× | `bench-results/compare.json` |",
        f"| completions lost / orders invoiced twice in the chaos run (the receivers: up to {worst_lost} lost, {worst_twice} twice) | {mine['lost']} / {mine['orders_invoiced_twice']} | `bench-results/compare.json` |",
        f"| cluster of {max(cpu)} partitions: CPU per completion vs one partition | {cpu[max(cpu)] / cpu[1]:.2f}× | `bench-results/cluster.json` |",
        f"| the vendors' own BPMN test models (Flowable, Camunda 7, Zeebe) as drawn / with warnings / refused | {share('as_drawn'):.1f} % / {share('with_warnings'):.1f} % / {share('refused'):.1f} % of {files:,} | `bench-results/vendor-sweep.json` |",
        f"| DMN TCK, compliance levels 2 and 3, strict scoring | {tck[0]:,} of {tck[1]:,} results ({100 * tck[0] / tck[1]:.1f} %) | `bench-results/dmn-tck.json` |",
    ]


def render_speed():
    """The engine's speed beside its limits: the floor, the fsync ceiling."""
    doc = load("engine")
    rs = by_id(doc)
    ceiling = rate(rs["fsync_ceiling/write_4k_fsync"])
    floor = rate(rs["reference_floor/complete_64_callers"])
    ref = rate(rs["reference_instances/complete_64_callers"])
    pub64 = rate(rs["publish_into_buffer/concurrent_64_callers"])
    seq = rate(rs["publish_into_buffer/sequential_1_caller"])
    lines = [
        provenance(doc),
        "",
        "| what | figure | beside its limit | target |",
        "| --- | ---: | ---: | --- |",
        f"| reference instances completed, 64 callers | {fmt_rate(ref)} | {ref / floor:.2f}× the floor ({fmt_rate(floor)}) | ≥ 20,000 /s or ≥ 0.70× |",
        f"| publish into the buffer, 64 callers | {fmt_rate(pub64)} | {pub64 / ceiling:.1f}× the fsync ceiling (commits shared) | ≥ 120,000 /s |",
        f"| publish into the buffer, 1 sequential caller | {fmt_rate(seq)} | {seq / ceiling:.2f}× the fsync ceiling ({fmt_rate(ceiling)}) | ≥ 0.80× |",
    ]
    if "fsync_ceiling/write_4k_fsync_overwrite" in rs:
        over = rate(rs["fsync_ceiling/write_4k_fsync_overwrite"])
        lines.append(
            f"| the same, beside an overwrite's fsync ceiling (the log writes zeros ahead of its appends) | {fmt_rate(seq)} | {seq / over:.2f}× ({fmt_rate(over)}) | — |"
        )
    try:
        ret = load("retention")
        disk = ret.get("disk_bytes_per_instance")
        if disk is not None:
            lines.append(
                f"| bytes on disk per completed reference instance, before retention (the file's blocks, as `du` counts them) | {disk:,.0f} B | {disk / 1024:.2f}× the target | ≤ 1,024 B |"
            )
        lines += [
            f"| file length per completed reference instance (redb grows its file ahead of use, doubling it while small; the part not written yet takes no blocks) | {ret['bytes_per_instance']:,.0f} B | — | — |",
            "",
            f"Bytes on disk: command `{ret['command']}`, commit {ret['commit']}, "
            f"{ret['date']}, {ret['machine']}; {ret['instances']:,} instances, "
            f"file {ret['bytes_completed']:,} bytes long"
            + (f" and {ret['disk_bytes_completed']:,} on disk" if disk is not None else "")
            + f", {ret['bytes_after_cleanup']:,} after "
            f"`cleanup`, {ret['bytes_after_compact']:,} after `compact`.",
        ]
    except FileNotFoundError:
        pass
    return lines


BLOCKS = {
    "headline": render_headline,
    "speed": render_speed,
    "dmn-tck": render_tck,
    "engine": render_engine,
    "jobs": render_jobs,
    "expressions": render_expressions,
    "ingest": include_md("ingest"),
    "cluster": include_md("cluster"),
    "http": include_md("http"),
    "http-tokens": include_md("http-tokens"),
    "http-jwt": include_md("http-jwt"),
    "backup": include_md("backup"),
    "migration": include_md("migration"),
    "slot-move": include_md("slot_move"),
    "compare": include_md("compare"),
    "zeebe": include_md("zeebe"),
    "vendor-sweep": render_sweep,
}

BLOCK = re.compile(r"(<!-- rendered: ([a-z-]+) -->\n)(.*?)(<!-- end rendered -->)", re.S)


def rendered(path, text):
    def one(m):
        name = m.group(2)
        if name not in BLOCKS:
            sys.exit(f"{path}: no renderer for block '{name}'")
        body = "\n".join(BLOCKS[name]()) + "\n"
        return m.group(1) + body + m.group(4)

    return BLOCK.sub(one, text)


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for path in documents():
        with open(path) as f:
            text = f.read()
        new = rendered(path, text)
        if new == text:
            continue
        if check:
            stale.append(os.path.relpath(path, ROOT))
        else:
            with open(path, "w") as f:
                f.write(new)
    if stale:
        sys.exit(f"{', '.join(stale)}: a rendered block differs from what benches/render.py renders from bench-results/: run benches/render.py")
    if check:
        print("every rendered block matches its result files")


if __name__ == "__main__":
    main()
