//! Engine benchmarks with every commit durable (fsync), on the machine at hand.
//!
//! Run: `cargo bench --bench engine` (add `-- publish` etc. to pick one).
//! Numbers go to README.md with the machine named; compare each against the
//! fsync ceiling measured in the same run (`fsync_ceiling`).

#[path = "engine/floor.rs"]
mod floor;
mod support;
use support::{bench_dir, rt};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use postfach::{JobContext, Postfach, Publish, Vars, vars};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const REFERENCE: &str = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");
static UNIQUE: AtomicU64 = AtomicU64::new(0);

async fn open_deployed(dir: &tempfile::TempDir) -> Postfach {
    let pf = Postfach::open(dir.path().join("bench.redb")).unwrap();
    pf.deploy(
        "ref.bpmn",
        REFERENCE,
        [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into(),
    )
    .await
    .unwrap();
    pf
}

fn msg(key: String) -> Publish {
    let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
    Publish {
        name: "AuftragAbgeschlossen".into(),
        key,
        message_id: Some(format!("evt-{n}")),
        variables: vars([("erledigtePositionen", 1200.into())]),
        ..Default::default()
    }
}

/// The ceiling: one write + fsync per operation, as raw as it gets — an
/// append (the file grows at every fsync, which journals its length and
/// blocks), and an overwrite of blocks the file has (what the log does since
/// it writes zeros ahead of its appends: only the data is synced).
fn fsync_ceiling(c: &mut Criterion) {
    let dir = bench_dir();
    let mut f = std::fs::File::create(dir.path().join("fsync.bin")).unwrap();
    let mut g = c.benchmark_group("fsync_ceiling");
    g.throughput(Throughput::Elements(1))
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    g.bench_function("write_4k_fsync", |b| {
        let buf = [7u8; 4096];
        b.iter(|| {
            f.write_all(&buf).unwrap();
            f.sync_data().unwrap();
        })
    });
    const BLOCKS: u64 = 16 * 1024;
    let over = std::fs::File::create(dir.path().join("overwrite.bin")).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for i in 0..BLOCKS * 4096 / zeros.len() as u64 {
        std::os::unix::fs::FileExt::write_all_at(&over, &zeros, i * zeros.len() as u64).unwrap();
    }
    over.sync_all().unwrap();
    g.bench_function("write_4k_fsync_overwrite", |b| {
        let buf = [7u8; 4096];
        let mut block = 0u64;
        b.iter(|| {
            std::os::unix::fs::FileExt::write_all_at(&over, &buf, block * 4096).unwrap();
            over.sync_data().unwrap();
            block = (block + 1) % BLOCKS;
        })
    });
    g.finish();
}

fn publish(c: &mut Criterion) {
    let rt = rt();
    let dir = bench_dir();
    let pf = rt.block_on(open_deployed(&dir));
    let mut g = c.benchmark_group("publish_into_buffer");
    g.throughput(Throughput::Elements(1))
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    g.bench_function("sequential_1_caller", |b| {
        b.to_async(&rt).iter(|| {
            let pf = pf.clone();
            async move {
                pf.publish(msg(format!("K{}", UNIQUE.load(Ordering::Relaxed))))
                    .await
                    .unwrap()
            }
        })
    });
    g.bench_function("concurrent_64_callers", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let pf = pf.clone();
            async move {
                let per = iters.div_ceil(64);
                let start = Instant::now();
                let mut set = tokio::task::JoinSet::new();
                for _ in 0..64 {
                    let pf = pf.clone();
                    set.spawn(async move {
                        for _ in 0..per {
                            pf.publish(msg(format!("K{}", UNIQUE.load(Ordering::Relaxed))))
                                .await
                                .unwrap();
                        }
                    });
                }
                while set.join_next().await.is_some() {}
                start.elapsed().mul_f64(iters as f64 / (per * 64) as f64)
            }
        })
    });
    g.finish();
    pf.close();
}

/// Whole reference instances: start → send (async) → correlate → invoice (async,
/// no-op handler) → end, 64 concurrent callers.
fn reference_instances(c: &mut Criterion) {
    let rt = rt();
    let dir = bench_dir();
    let pf = rt.block_on(open_deployed(&dir));
    // the hand-over (an unbound send task: a job for its worker) and the invoice
    pf.register_handler("auftragUebergeben", |_job: JobContext| async move {
        Ok(Vars::new())
    });
    pf.register_handler("rechnungStellen", |_job: JobContext| async move {
        Ok(Vars::new())
    });
    let mut g = c.benchmark_group("reference_instances");
    g.throughput(Throughput::Elements(1))
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    g.bench_function("complete_64_callers", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let pf = pf.clone();
            async move {
                let start = Instant::now();
                let per = iters.div_ceil(64);
                let mut set = tokio::task::JoinSet::new();
                for _ in 0..64 {
                    let pf = pf.clone();
                    set.spawn(async move {
                        for _ in 0..per {
                            let key = format!("O{}", UNIQUE.fetch_add(1, Ordering::Relaxed));
                            pf.start(
                                "auftrag-ausfuehrung",
                                vars([("auftragId", key.clone().into())]),
                                None,
                            )
                            .await
                            .unwrap();
                            pf.publish(msg(key)).await.unwrap();
                        }
                    });
                }
                while set.join_next().await.is_some() {}
                pf.work_until_idle().await.unwrap();
                start.elapsed().mul_f64(iters as f64 / (per * 64) as f64)
            }
        })
    });
    g.finish();
    let left = pf
        .reader()
        .unwrap()
        .instances(&postfach::ops::InstanceFilter {
            state: Some("active".into()),
            ..Default::default()
        })
        .unwrap();
    assert!(left.is_empty(), "every benchmarked instance completed");
    pf.close();
}

/// The same rows in the same transactions with bare redb and a log like the engine's,
/// no engine ([`floor`]): the limit `reference_instances` is a ratio of.
/// It first checks that the floor still writes the engine's rows.
fn reference_floor(c: &mut Criterion) {
    let rt = rt();
    std::fs::create_dir_all("target/bench-db").unwrap();
    rt.block_on(floor::check_rows(REFERENCE));
    let dir = bench_dir();
    let f = std::sync::Arc::new(floor::Floor::open(dir.path()));
    let next = std::sync::Arc::new(AtomicU64::new(1));
    let mut g = c.benchmark_group("reference_floor");
    g.throughput(Throughput::Elements(1))
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    g.bench_function("complete_64_callers", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let (f, next) = (f.clone(), next.clone());
            async move {
                let start = Instant::now();
                let per = iters.div_ceil(64);
                let mut set = tokio::task::JoinSet::new();
                for _ in 0..64 {
                    let (f, next) = (f.clone(), next.clone());
                    set.spawn(async move {
                        for _ in 0..per {
                            let n = next.fetch_add(1, Ordering::Relaxed);
                            f.submit(floor::Op::Start(n)).await;
                            f.submit(floor::Op::Publish(n)).await;
                        }
                    });
                }
                while set.join_next().await.is_some() {}
                f.work().await;
                start.elapsed().mul_f64(iters as f64 / (per * 64) as f64)
            }
        })
    });
    g.finish();
    std::sync::Arc::into_inner(f)
        .expect("no caller holds the floor")
        .close();
}

/// Correlation into waiting instances with 10k and 1M other messages buffered:
/// 512 concurrent publishes per iteration so the fsync is shared and the
/// lookup itself shows.
fn lookup_scaling(c: &mut Criterion) {
    let rt = rt();
    let mut g = c.benchmark_group("correlate_with_buffered");
    g.throughput(Throughput::Elements(512))
        .sample_size(10)
        .measurement_time(Duration::from_secs(6));
    for buffered in [10_000u64, 1_000_000] {
        let dir = bench_dir();
        // filled when a benchmark of this group first runs: a run that
        // filters them out does not publish a million messages
        let filled = std::cell::OnceCell::new();
        let pf = || {
            filled.get_or_init(|| {
                rt.block_on(async {
                    let pf = open_deployed(&dir).await;
                    pf.register_handler("auftragUebergeben", |_job: JobContext| async move {
                        Ok(Vars::new())
                    });
                    let mut done = 0;
                    while done < buffered {
                        let chunk = 20_000.min(buffered - done);
                        let mut set = tokio::task::JoinSet::new();
                        for i in 0..chunk {
                            let pf = pf.clone();
                            set.spawn(async move {
                                pf.publish(msg(format!("B{}", done + i))).await.unwrap()
                            });
                        }
                        while set.join_next().await.is_some() {}
                        done += chunk;
                    }
                    pf
                })
            })
        };
        g.bench_with_input(BenchmarkId::from_parameter(buffered), &buffered, |b, _| {
            let pf = pf();
            b.to_async(&rt).iter_custom(|iters| {
                let pf = pf.clone();
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        // 512 instances wait at the catch event
                        let keys: Vec<String> = (0..512)
                            .map(|_| format!("W{}", UNIQUE.fetch_add(1, Ordering::Relaxed)))
                            .collect();
                        let mut set = tokio::task::JoinSet::new();
                        for k in &keys {
                            let pf = pf.clone();
                            let k = k.clone();
                            set.spawn(async move {
                                pf.start(
                                    "auftrag-ausfuehrung",
                                    vars([("auftragId", k.into())]),
                                    None,
                                )
                                .await
                                .unwrap()
                            });
                        }
                        while set.join_next().await.is_some() {}
                        // hand-over: every instance now waits at the catch event
                        pf.work_until_idle().await.unwrap();
                        let start = Instant::now();
                        let mut set = tokio::task::JoinSet::new();
                        for k in keys {
                            let pf = pf.clone();
                            set.spawn(async move {
                                let d = pf.publish(msg(k)).await.unwrap();
                                assert_eq!(d.outcome, postfach::Outcome::Correlated);
                            });
                        }
                        while set.join_next().await.is_some() {}
                        total += start.elapsed();
                    }
                    total
                }
            })
        });
        // what /metrics asks of the store with these messages buffered: the
        // oldest buffered age, parked per reason, due jobs and incidents (from
        // indexes and gauges) — and, for scale, reading every buffered record,
        // which is what the oldest age cost before the buffer-age index
        g.throughput(Throughput::Elements(1));
        g.bench_with_input(
            BenchmarkId::new("metrics_summary", buffered),
            &buffered,
            |b, _| {
                let pf = pf();
                b.iter(|| {
                    let r = pf.reader().unwrap();
                    (
                        r.oldest_buffered_age().unwrap(),
                        r.parked_by_reason().unwrap(),
                        r.job_counts().unwrap(),
                    )
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new("read_every_buffered_record", buffered),
            &buffered,
            |b, _| {
                let pf = pf();
                b.iter(|| {
                    let filter = postfach::ops::MessageFilter {
                        buffered: true,
                        ..Default::default()
                    };
                    pf.reader().unwrap().messages(&filter).unwrap().len()
                })
            },
        );
        g.throughput(Throughput::Elements(512));
        if let Some(pf) = filled.into_inner() {
            pf.close();
        }
    }
    g.finish();
}

criterion_group!(
    benches,
    fsync_ceiling,
    publish,
    reference_instances,
    reference_floor,
    lookup_scaling
);
criterion_main!(benches);
