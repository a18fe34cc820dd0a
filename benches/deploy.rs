//! Deploy benchmarks: parse time against model size (it must grow linearly, up to
//! the 16 MiB cap), and what a large deploy does to the publishes queued beside it
//! (the writer only stores the parsed model; parsing happens off the writer).
//!
//! Run: `cargo bench --bench deploy` (or `-- sizes`, `-- latency` for one table).
//! Prints two tables; numbers go to README.md.

mod support;
use support::{bench_dir, rt};

use postfach::{Postfach, Publish, vars};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const REFERENCE: &str = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");

/// A process of `tasks` async service tasks in a chain (two elements, a task and
/// its flow, per step): about 115 bytes per task.
fn chain(tasks: usize) -> String {
    let mut x = String::with_capacity(tasks * 120 + 512);
    x.push_str(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<definitions xmlns=\"http://www.omg.org/spec/BPMN/20100524/MODEL\" xmlns:flowable=\"http://flowable.org/bpmn\" targetNamespace=\"bench\">\n<process id=\"big\" isExecutable=\"true\">\n<startEvent id=\"s\"/>\n",
    );
    let mut prev = "s".to_string();
    for i in 0..tasks {
        x.push_str(&format!(
            "<serviceTask id=\"t{i}\" flowable:async=\"true\"/>\n<sequenceFlow id=\"f{i}\" sourceRef=\"{prev}\" targetRef=\"t{i}\"/>\n"
        ));
        prev = format!("t{i}");
    }
    x.push_str(&format!(
        "<endEvent id=\"e\"/>\n<sequenceFlow id=\"fe\" sourceRef=\"{prev}\" targetRef=\"e\"/>\n</process>\n</definitions>\n"
    ));
    x
}

/// The latency at quantile `q` of sorted latencies.
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let rt = rt();
    if wanted("sizes") {
        sizes(&rt);
    }
    if wanted("latency") {
        latency(&rt);
    }
}

fn sizes(rt: &tokio::runtime::Runtime) {
    println!("## deploy: elements against time (each into a fresh database)\n");
    println!("| tasks | elements + flows | bytes | deploy ms | µs per element |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    // the largest chain under the 16 MiB cap
    let cap_tasks = (16 * 1024 * 1024 - 1024) / 116;
    for tasks in [4_000, 8_000, 16_000, 32_000, 64_000, cap_tasks] {
        let mut xml = chain(tasks);
        let mut n = tasks;
        while xml.len() > 16 * 1024 * 1024 {
            n -= 1000;
            xml = chain(n);
        }
        let dir = bench_dir();
        let pf = Postfach::open(dir.path().join("deploy.redb")).unwrap();
        let t = Instant::now();
        rt.block_on(pf.deploy("big.bpmn", &xml, Default::default()))
            .unwrap();
        let took = t.elapsed();
        let elements = 2 * n + 3;
        println!(
            "| {n} | {elements} | {} | {:.0} | {:.2} |",
            xml.len(),
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() * 1e6 / elements as f64
        );
        pf.close();
    }
}

fn latency(rt: &tokio::runtime::Runtime) {
    println!("\n## publish latency beside a 4 MB deploy (16 publishers)\n");
    let dir = bench_dir();
    let pf = Postfach::open(dir.path().join("beside.redb")).unwrap();
    rt.block_on(pf.deploy(
        "ref.bpmn",
        REFERENCE,
        [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into(),
    ))
    .unwrap();
    let big = chain(4 * 1024 * 1024 / 116);
    let unique = Arc::new(AtomicU64::new(0));
    // publishes for `window`, while `during` runs; returns their latencies
    let measure = |during: Option<&str>| {
        rt.block_on(async {
            let stop = Arc::new(AtomicBool::new(false));
            let mut tasks = Vec::new();
            for _ in 0..16 {
                let (pf, stop, unique) = (pf.clone(), stop.clone(), unique.clone());
                tasks.push(tokio::spawn(async move {
                    let mut lat: Vec<(Instant, Duration)> = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let n = unique.fetch_add(1, Ordering::Relaxed);
                        let t = Instant::now();
                        pf.publish(Publish {
                            name: "AuftragAbgeschlossen".into(),
                            key: format!("k{n}"),
                            message_id: Some(format!("evt-{n}")),
                            variables: vars([("erledigtePositionen", 1.into())]),
                            ..Default::default()
                        })
                        .await
                        .unwrap();
                        lat.push((t, t.elapsed()));
                    }
                    lat
                }));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            let from = Instant::now();
            let deploy_took = match during {
                Some(xml) => {
                    pf.deploy("big.bpmn", xml, Default::default())
                        .await
                        .unwrap();
                    Some(from.elapsed())
                }
                None => {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    None
                }
            };
            let to = Instant::now();
            stop.store(true, Ordering::Relaxed);
            // the publishes that started while the deploy (or the quiet window) ran
            let mut all = Vec::new();
            for t in tasks {
                all.extend(
                    t.await
                        .unwrap()
                        .into_iter()
                        .filter(|(start, _)| *start >= from && *start < to)
                        .map(|(_, l)| l),
                );
            }
            all.sort();
            (all, deploy_took)
        })
    };
    let (quiet, _) = measure(None);
    let (busy, took) = measure(Some(&big));
    println!("publishes started within the window: a quiet 2 s, or the deploy's duration\n");
    println!("| phase | publishes | p50 ms | p99 ms | max ms |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (name, l) in [("no deploy", &quiet), ("during the deploy", &busy)] {
        println!(
            "| {name} | {} | {:.2} | {:.2} | {:.2} |",
            l.len(),
            percentile(l, 0.5).as_secs_f64() * 1e3,
            percentile(l, 0.99).as_secs_f64() * 1e3,
            l.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        );
    }
    println!(
        "\nthe deploy of {} bytes took {:.0} ms; p99 during it / p99 without: {:.2}x",
        big.len(),
        took.unwrap_or_default().as_secs_f64() * 1e3,
        percentile(&busy, 0.99).as_secs_f64() / percentile(&quiet, 0.99).as_secs_f64()
    );
    pf.close();
}
