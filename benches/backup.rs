//! A backup under load: a database holding `POSTFACH_BACKUP_BUFFERED`
//! buffered messages (default 1,000,000) and `POSTFACH_BACKUP_WAITING`
//! waiting instances (default 100,000) is backed up while 64 publishers
//! publish; their latencies during the backup are compared with the same
//! publishers for the same time without one (the p99 ratio; target ≤ 2×).
//! The backup's speed (MB of copy per second) is shown beside the disk's
//! sequential read speed, measured in the same run on the database file
//! after it was evicted from the page cache.
//!
//! cargo bench --bench backup
//! POSTFACH_BACKUP_BUFFERED=100000 POSTFACH_BACKUP_WAITING=10000 cargo bench --bench backup

#[path = "support/mod.rs"]
mod support;

use postfach::{Postfach, Publish, vars};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const MODEL: &str = support::WAITING_MODEL;

static UNIQUE: AtomicU64 = AtomicU64::new(0);

fn buffered(prefix: &str) -> Publish {
    let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
    Publish {
        name: "Fertig".into(),
        key: format!("{prefix}-{n}"),
        message_id: Some(format!("{prefix}-{n}")),
        variables: vars([("n", n.into())]),
        ttl: Some(7 * 86_400_000),
        ..Default::default()
    }
}

/// `n` calls of `call` from 64 callers at once.
async fn from_64<F, Fut>(n: u64, call: F)
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let mut tasks = Vec::new();
    for c in 0..64 {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            for i in (c..n).step_by(64) {
                call(i).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// MB/s of reading `path` once from the disk: its pages are dropped from
/// the page cache first (`posix_fadvise(DONTNEED)`).
fn disk_read_mb_s(path: &std::path::Path) -> f64 {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let mut f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: a valid open descriptor; advice only, no memory is touched
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let mut buf = vec![0u8; 4 << 20];
    let (mut bytes, t) = (0u64, Instant::now());
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        bytes += n as u64;
    }
    bytes as f64 / 1e6 / t.elapsed().as_secs_f64()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let commit = support::measured_commit();
    let n_buffered = support::env_or("POSTFACH_BACKUP_BUFFERED", 1_000_000);
    let n_waiting = support::env_or("POSTFACH_BACKUP_WAITING", 100_000);
    let rt = support::rt();
    let dir = support::bench_dir();
    let db = dir.path().join("bench.redb");
    let out = rt.block_on(async {
        let pf = Postfach::open(&db).unwrap();
        pf.deploy(
            "warten.bpmn",
            MODEL,
            [("Fertig".to_string(), "key".to_string())].into(),
        )
        .await
        .unwrap();
        let filling = Instant::now();
        let p = pf.clone();
        from_64(n_waiting, move |i| {
            let p = p.clone();
            async move {
                p.start("warten", vars([("key", format!("w-{i}").into())]), None)
                    .await
                    .unwrap();
            }
        })
        .await;
        let p = pf.clone();
        from_64(n_buffered, move |_| {
            let p = p.clone();
            async move {
                p.publish(buffered("b")).await.unwrap();
            }
        })
        .await;
        println!(
            "filled: {n_waiting} waiting, {n_buffered} buffered in {:.1}s",
            filling.elapsed().as_secs_f64()
        );
        // during a backup
        let stop = Arc::new(AtomicBool::new(false));
        let load = tokio::spawn({
            let (pf, stop) = (pf.clone(), stop.clone());
            async move { support::publishers(&pf, stop, |_, _| Some(buffered("load"))).await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let started = Instant::now();
        let manifest = pf.backup(dir.path().join("backups")).await.unwrap();
        let took = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        let during = load.await.unwrap();
        // without one, as long
        let stop = Arc::new(AtomicBool::new(false));
        let load = tokio::spawn({
            let (pf, stop) = (pf.clone(), stop.clone());
            async move { support::publishers(&pf, stop, |_, _| Some(buffered("load"))).await }
        });
        tokio::time::sleep(Duration::from_millis(500) + took).await;
        stop.store(true, Ordering::Relaxed);
        let without = load.await.unwrap();
        pf.close();
        (manifest, took, during, without)
    });
    let (manifest, took, during, without) = out;
    let copy_bytes: u64 = manifest.files.iter().map(|f| f.bytes).sum();
    let backup_mb_s = copy_bytes as f64 / 1e6 / took.as_secs_f64();
    let disk_mb_s = disk_read_mb_s(&db);
    let p99_during = support::quantile(&during, 0.99);
    let p99_without = support::quantile(&without, 0.99);
    let ratio = p99_during.as_secs_f64() / p99_without.as_secs_f64();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let md = format!(
        "| measure | value |\n| --- | ---: |\n\
         | database: waiting instances, buffered messages | {n_waiting}, {n_buffered} |\n\
         | backup: copy size, time | {:.1} MB, {:.2} s |\n\
         | backup speed | {backup_mb_s:.0} MB/s |\n\
         | disk sequential read (page cache dropped) | {disk_mb_s:.0} MB/s |\n\
         | publish p50 / p99 without a backup (64 publishers) | {:.2} / {:.2} ms |\n\
         | publish p50 / p99 during the backup | {:.2} / {:.2} ms |\n\
         | p99 during vs without (target ≤ 2×) | {ratio:.2}× |\n",
        copy_bytes as f64 / 1e6,
        took.as_secs_f64(),
        ms(support::quantile(&without, 0.5)),
        ms(p99_without),
        ms(support::quantile(&during, 0.5)),
        ms(p99_during),
    );
    println!("\n{md}");
    let doc = json!({
        "commit": commit,
        "waiting": n_waiting,
        "buffered": n_buffered,
        "copy_bytes": copy_bytes,
        "backup_seconds": took.as_secs_f64(),
        "backup_mb_s": backup_mb_s,
        "disk_read_mb_s": disk_mb_s,
        "publish_ms": {
            "without": {"p50": ms(support::quantile(&without, 0.5)), "p99": ms(p99_without), "n": without.len()},
            "during": {"p50": ms(support::quantile(&during, 0.5)), "p99": ms(p99_during), "n": during.len()},
        },
        "p99_ratio": ratio,
    });
    support::keep_results("backup", &commit, &md, &doc);
}
