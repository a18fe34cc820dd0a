//! Job benchmarks with every commit durable, on the machine at hand.
//!
//! Run: `cargo bench --bench jobs`. Compare with `fsync_ceiling` of
//! `cargo bench --bench engine` from the same run.

mod support;
use support::{bench_dir, rt};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use postfach::jobs::ExecutorConfig;
use postfach::{JobContext, Postfach, Vars, vars};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const NOOP: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:flowable="http://flowable.org/bpmn">
  <process id="noop" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="weiter"/>
    <intermediateThrowEvent id="weiter" flowable:async="true"/>
    <sequenceFlow id="f2" sourceRef="weiter" targetRef="arbeit"/>
    <serviceTask id="arbeit"/>
    <sequenceFlow id="f3" sourceRef="arbeit" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

static KEY: AtomicU64 = AtomicU64::new(0);

async fn open(path: &std::path::Path) -> Postfach {
    let pf = Postfach::open(path).unwrap();
    pf.deploy("noop.bpmn", NOOP, Default::default())
        .await
        .unwrap();
    pf
}

/// Starts `n` instances with 64 concurrent callers (not timed by the benches).
async fn start_many(pf: &Postfach, n: u64) {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..64 {
        let pf = pf.clone();
        let share = n / 64 + u64::from(i < n % 64);
        set.spawn(async move {
            for _ in 0..share {
                let k = KEY.fetch_add(1, Ordering::Relaxed);
                pf.start("noop", vars([("k", k.to_string().into())]), None)
                    .await
                    .unwrap();
            }
        });
    }
    while set.join_next().await.is_some() {}
}

/// Async continuations (engine-run) and no-op handler jobs (leased, run,
/// completed through the group-commit writer).
fn noop_jobs(c: &mut Criterion) {
    let rt = rt();
    let dir = bench_dir();
    let pf = rt.block_on(open(&dir.path().join("jobs.redb")));
    pf.register_handler("arbeit", |_j: JobContext| async move { Ok(Vars::new()) });
    let mut g = c.benchmark_group("noop_jobs");
    g.throughput(Throughput::Elements(1))
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    g.bench_function("continuation_then_handler_job", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let pf = pf.clone();
            async move {
                start_many(&pf, iters).await;
                let start = Instant::now();
                let r = pf.work_until_idle().await.unwrap();
                assert_eq!(r.tasks_completed as u64, iters);
                // two jobs per instance: the continuation and the handler job
                start.elapsed().div_f64(2.0)
            }
        })
    });
    g.finish();
    pf.close();
}

/// External worker round trip: acquire a batch, complete each job.
fn external_worker(c: &mut Criterion) {
    let rt = rt();
    let dir = bench_dir();
    let pf = rt.block_on(open(&dir.path().join("worker.redb")));
    let mut g = c.benchmark_group("external_worker_round_trip");
    g.throughput(Throughput::Elements(1))
        .sample_size(10)
        .measurement_time(Duration::from_secs(6));
    for batch in [1usize, 100] {
        g.bench_function(format!("acquire_{batch}_then_complete"), |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let pf = pf.clone();
                async move {
                    start_many(&pf, iters).await;
                    pf.run_continuations(usize::MAX).await.unwrap();
                    let start = Instant::now();
                    let mut done = 0u64;
                    while done < iters {
                        let jobs = pf
                            .lock_jobs("arbeit", batch, "bench-worker", 60_000)
                            .await
                            .unwrap();
                        assert!(!jobs.is_empty());
                        let mut set = tokio::task::JoinSet::new();
                        for j in jobs {
                            let pf = pf.clone();
                            set.spawn(async move {
                                pf.complete_job(j.task.job, Some(j.lease_token), Vars::new())
                                    .await
                                    .unwrap()
                            });
                            done += 1;
                        }
                        while set.join_next().await.is_some() {}
                    }
                    start.elapsed()
                }
            })
        });
    }
    g.finish();
    pf.close();
}

/// Restart with 100,000 pending jobs, 1,000 of them leased by the process that
/// died: time from `open` to the first handler call.
fn restart_to_first_job(c: &mut Criterion) {
    let rt = rt();
    let dir = bench_dir();
    let path = dir.path().join("restart.redb");
    rt.block_on(async {
        let pf = open(&path).await;
        start_many(&pf, 100_000).await;
        while pf.run_continuations(10_000).await.unwrap() > 0 {}
        pf.close();
    });
    let mut g = c.benchmark_group("restart");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("open_to_first_resumed_job_100k_pending", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let path = path.clone();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    {
                        // a process that dies with 1,000 handlers hanging on their jobs
                        let pf = Postfach::open(&path).unwrap();
                        let taken = Arc::new(AtomicU64::new(0));
                        let t = taken.clone();
                        pf.register_handler("arbeit", move |_j: JobContext| {
                            t.fetch_add(1, Ordering::SeqCst);
                            std::future::pending::<Result<Vars, postfach::HandlerError>>()
                        });
                        let exec = pf.start_executor(ExecutorConfig {
                            concurrency: 1000,
                            ..Default::default()
                        });
                        while taken.load(Ordering::SeqCst) < 1000 {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                        pf.close();
                        std::mem::forget(exec); // its handlers never return
                    }
                    let first = Arc::new(tokio::sync::Notify::new());
                    let start = Instant::now();
                    let pf = Postfach::open(&path).unwrap();
                    assert!(pf.recovery().released_leases >= 1000);
                    let f = first.clone();
                    pf.register_handler("arbeit", move |_j: JobContext| {
                        let f = f.clone();
                        async move {
                            f.notify_one();
                            Ok(Vars::new())
                        }
                    });
                    let exec = pf.start_executor(ExecutorConfig {
                        concurrency: 1,
                        ..Default::default()
                    });
                    first.notified().await;
                    total += start.elapsed();
                    exec.stop().await.unwrap();
                    pf.close();
                }
                total
            }
        })
    });
    g.finish();
}

criterion_group!(benches, noop_jobs, external_worker, restart_to_first_job);
criterion_main!(benches);
