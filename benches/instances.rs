//! Does a step cost the same however big the instance has grown?
//!
//! One parallel multi-instance service task with `loopCardinality` N: its N
//! jobs are acquired by one external worker 1,000 at a time, then completed one
//! by one, every call durable. The same over a collection variable of N items
//! (each job fetching only its item), up to `POSTFACH_BENCH_COLLECTION_MAX`
//! items (default 10,000): the collection is a variable of the instance, and
//! the variables are still one map in its header, read on every step. A second measurement steps a fresh instance and
//! one that has collected 10,000 history entries. Printed as a table with the
//! ratios the targets are stated in (rate at N against the rate at the smallest
//! N, measured in the same run).
//!
//! Run: `cargo bench --bench instances` (sizes from `POSTFACH_BENCH_SIZES`,
//! default `1000,4000`; add 10000 or more for a longer run). Sizes below
//! 10,000 run three times and report the median.

mod support;
use support::{bench_dir, rt};

use postfach::{Postfach, Vars, vars};
use std::time::{Duration, Instant};

/// How the multi-instance activity gets its items.
#[derive(Clone, Copy)]
enum Over {
    Cardinality,
    Collection,
}

fn model(n: usize, over: Over) -> String {
    let characteristics = match over {
        Over::Cardinality => format!("<loopCardinality>{n}</loopCardinality>"),
        Over::Collection => String::new(),
    };
    let attributes = match over {
        Over::Cardinality => "",
        Over::Collection => {
            r#" flowable:collection="${positionen}" flowable:elementVariable="position""#
        }
    };
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:flowable="http://flowable.org/bpmn" targetNamespace="bench">
  <process id="mi" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="arbeit"/>
    <serviceTask id="arbeit">
      <multiInstanceLoopCharacteristics isSequential="false"{attributes}>{characteristics}</multiInstanceLoopCharacteristics>
    </serviceTask>
    <sequenceFlow id="f2" sourceRef="arbeit" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#
    )
}

/// A process whose instance loops through a service task until `rounds` is 0:
/// each round adds history entries to the same instance.
const LOOP: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" targetNamespace="bench">
  <process id="schleife" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="runde"/>
    <serviceTask id="runde"/>
    <sequenceFlow id="f2" sourceRef="runde" targetRef="g"/>
    <exclusiveGateway id="g" default="f4"/>
    <sequenceFlow id="f3" sourceRef="g" targetRef="runde"><conditionExpression>${weiter == true}</conditionExpression></sequenceFlow>
    <sequenceFlow id="f4" sourceRef="g" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

struct Row {
    n: usize,
    acquire: Duration,
    complete: Duration,
    p50: Duration,
    p99: Duration,
}

async fn multi_instance(n: usize, over: Over) -> Row {
    let dir = bench_dir();
    let pf = Postfach::open(dir.path().join("mi.redb")).unwrap();
    pf.deploy("mi.bpmn", &model(n, over), Default::default())
        .await
        .unwrap();
    let start = match over {
        Over::Cardinality => Vars::new(),
        Over::Collection => {
            let items: Vec<String> = (0..n).map(|i| format!("P-{i}")).collect();
            vars([("positionen", serde_json::json!(items))])
        }
    };
    pf.start("mi", start, None).await.unwrap();
    let started = Instant::now();
    let mut jobs = Vec::with_capacity(n);
    loop {
        let got = match over {
            Over::Cardinality => pf.lock_jobs("arbeit", 1000, "bench", 3_600_000).await,
            Over::Collection => {
                let fetch = vec!["position".to_string()];
                pf.lock_jobs_fetching("arbeit", 1000, "bench", 3_600_000, fetch)
                    .await
            }
        }
        .unwrap();
        if got.is_empty() {
            break;
        }
        jobs.extend(got);
    }
    let acquire = started.elapsed();
    assert_eq!(jobs.len(), n, "every inner instance has its job");
    let mut each = Vec::with_capacity(n);
    let started = Instant::now();
    for j in jobs {
        let t = Instant::now();
        pf.complete_job(j.task.job, Some(j.lease_token), Vars::new())
            .await
            .unwrap();
        each.push(t.elapsed());
    }
    let complete = started.elapsed();
    each.sort();
    pf.close();
    Row {
        n,
        acquire,
        complete,
        p50: each[each.len() / 2],
        p99: each[each.len() * 99 / 100],
    }
}

/// Completions per second of `steps` loop rounds, on an instance that has
/// already gone `before` rounds (about 6 history entries each).
async fn long_history(before: usize, steps: usize) -> f64 {
    let dir = bench_dir();
    let pf = Postfach::open(dir.path().join("loop.redb")).unwrap();
    pf.deploy("loop.bpmn", LOOP, Default::default())
        .await
        .unwrap();
    let id = pf.start("schleife", Vars::new(), None).await.unwrap();
    let round = |pf: Postfach| async move {
        let j = pf
            .lock_jobs("runde", 1, "bench", 60_000)
            .await
            .unwrap()
            .remove(0);
        pf.complete_job(
            j.task.job,
            Some(j.lease_token),
            vars([("weiter", true.into())]),
        )
        .await
        .unwrap();
    };
    for _ in 0..before {
        round(pf.clone()).await;
    }
    let entries = pf
        .reader()
        .unwrap()
        .instance(id)
        .unwrap()
        .unwrap()
        .history
        .len();
    let started = Instant::now();
    for _ in 0..steps {
        round(pf.clone()).await;
    }
    let rate = steps as f64 / started.elapsed().as_secs_f64();
    println!("  instance with {entries} history entries: {rate:.0} rounds/s");
    pf.close();
    rate
}

fn main() {
    // `cargo bench` passes --bench; a filter argument is not used here
    let sizes: Vec<usize> = std::env::var("POSTFACH_BENCH_SIZES")
        .unwrap_or_else(|_| "1000,4000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let rt = rt();
    let collection_max: usize = std::env::var("POSTFACH_BENCH_COLLECTION_MAX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    for (over, what) in [
        (Over::Cardinality, "loopCardinality N"),
        (
            Over::Collection,
            "a collection of N items, each job fetching its item",
        ),
    ] {
        println!(
            "one parallel multi-instance service task over {what}, N jobs acquired 1,000 at a time, then completed one by one"
        );
        println!(
            "| N items | acquire all N | complete all N | completions/s | p50 / p99 per completion |"
        );
        println!("| --- | --- | --- | --- | --- |");
        let mut rows = Vec::new();
        for &n in &sizes {
            if matches!(over, Over::Collection) && n > collection_max {
                continue;
            }
            // a small N runs in a fraction of a second: the median of three
            let reps = if n < 10_000 { 3 } else { 1 };
            let mut runs: Vec<Row> = (0..reps)
                .map(|_| rt.block_on(multi_instance(n, over)))
                .collect();
            runs.sort_by_key(|r| r.complete);
            let r = runs.swap_remove(runs.len() / 2);
            println!(
                "| {} | {:.2} s | {:.2} s | {:.0} /s | {:.1} / {:.1} ms |",
                r.n,
                r.acquire.as_secs_f64(),
                r.complete.as_secs_f64(),
                r.n as f64 / r.complete.as_secs_f64(),
                r.p50.as_secs_f64() * 1000.0,
                r.p99.as_secs_f64() * 1000.0
            );
            rows.push(r);
        }
        if let Some(first) = rows.first() {
            let rate = |r: &Row| r.n as f64 / r.complete.as_secs_f64();
            let per_job = |r: &Row| r.acquire.as_secs_f64() / r.n as f64;
            for r in &rows[1..] {
                println!(
                    "N = {}: completions/s {:.2}× the rate at N = {}; acquire per job {:.2}× (target: ≥ 0.8× and ≤ 1.25×)",
                    r.n,
                    rate(r) / rate(first),
                    first.n,
                    per_job(r) / per_job(first)
                );
            }
        }
    }
    println!("a fresh instance against one with a long history (loop rounds, 200 timed):");
    let fresh = rt.block_on(long_history(0, 200));
    let old = rt.block_on(long_history(1700, 200));
    println!(
        "  long history steps at {:.2}× the fresh rate (target ≥ 0.8×)",
        old / fresh
    );
}
