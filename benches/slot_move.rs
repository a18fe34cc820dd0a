//! A slot move under load: on partition 0 of a cluster of two, one key slot
//! holds `POSTFACH_MOVE_WAITING` instances (default 10,000) waiting at a
//! message catch and `POSTFACH_MOVE_BUFFERED` buffered messages (default
//! 100,000); the slot moves to partition 1 (in this process: each step the
//! target applies is handed to it directly, no HTTP) while 64 publishers
//! publish to the partition's other slots. Shown: the move's rate
//! (instances and records per second), the publishers' p99 during the move
//! against as long without it (target ≤ 2×), and how long a write for the
//! moving slot waited (a prober that writes for it every 20 ms — taken by
//! the source while the slot is copied, retried while it is fenced, then
//! written where the map says) and how many records were sent again because
//! they were written during the copy.
//!
//! cargo bench --bench slot_move

#[path = "support/mod.rs"]
mod support;

use postfach::partition::Partition;
use postfach::slots::SlotMap;
use postfach::{EngineError, Error, Options, Postfach, Publish, vars};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const SLOT: u32 = 0;

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// Keys `PREFIX-i` of `slot`, the first `n`.
fn keys_in(map: &SlotMap, prefix: &str, slot: u32, n: usize) -> Vec<String> {
    (0u64..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|k| map.slot_of_key(k) == slot)
        .take(n)
        .collect()
}

fn message(key: String) -> Publish {
    let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
    Publish {
        name: "Fertig".into(),
        key,
        message_id: Some(format!("m-{n}")),
        variables: vars([("n", n.into())]),
        ttl: Some(7 * 86_400_000),
        ..Default::default()
    }
}

/// 64 publishers to partition 0's other slots until `stop`; each latency.
async fn publishers(pf: &Postfach, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let map = SlotMap::new(2).unwrap();
    support::publishers(pf, stop, move |c, i| {
        let key = format!("load-{}", c + 64 * i);
        let other = map.partition_of_key(&key) == 0 && map.slot_of_key(&key) != SLOT;
        other.then(|| message(key))
    })
    .await
}

/// Writes for the moving slot every 20 ms until `stop`, each retried while
/// the slot is fenced and sent where the refusal names; the longest wait.
async fn prober(src: Postfach, dst: Postfach, key: String, stop: Arc<AtomicBool>) -> Duration {
    let mut longest = Duration::ZERO;
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let msg = message(key.clone());
        let mut at = &src;
        loop {
            match at.publish(msg.clone()).await {
                Ok(_) => break,
                Err(Error::Engine(EngineError::SlotMoving { .. })) => {
                    tokio::time::sleep(Duration::from_millis(10)).await
                }
                Err(Error::Engine(EngineError::OtherPartition { owner: 1, .. })) => at = &dst,
                Err(e) => panic!("probe: {e}"),
            }
        }
        longest = longest.max(t.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    longest
}

async fn fill(src: &Postfach, waiting: &[String], buffered: &[String], per_key: u64) {
    let mut tasks = Vec::new();
    for c in 0..64usize {
        let (pf, waiting, buffered) = (src.clone(), waiting.to_vec(), buffered.to_vec());
        tasks.push(tokio::spawn(async move {
            for k in waiting.iter().skip(c).step_by(64) {
                pf.start("warten", vars([("key", k.as_str().into())]), None)
                    .await
                    .unwrap();
            }
            for k in buffered.iter().skip(c).step_by(64) {
                for _ in 0..per_key {
                    pf.publish(message(k.clone())).await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let commit = support::measured_commit();
    let waiting_n = support::env_or("POSTFACH_MOVE_WAITING", 10_000) as usize;
    let buffered_n = support::env_or("POSTFACH_MOVE_BUFFERED", 100_000);
    let per_key = 100;
    let rt = support::rt();
    let dir = support::bench_dir();
    let map = SlotMap::new(2).unwrap();
    let waiting = keys_in(&map, "w", SLOT, waiting_n);
    let buffered = keys_in(&map, "b", SLOT, (buffered_n / per_key) as usize);
    let probe = keys_in(&map, "p", SLOT, 1).remove(0);
    let keys = || [("Fertig".to_string(), "key".to_string())].into();
    let open = |i: u64| {
        Postfach::open_with(
            dir.path().join(format!("p{i}.redb")),
            Options {
                partition: Some(Partition::new(i, 2).unwrap()),
                ..Options::default()
            },
        )
        .unwrap()
    };
    let (took, (items, again), max_wait, during, without) = rt.block_on(async {
        let (src, dst) = (open(0), open(1));
        for pf in [&src, &dst] {
            pf.deploy("warten.bpmn", support::WAITING_MODEL, keys())
                .await
                .unwrap();
        }
        fill(&src, &waiting, &buffered, per_key).await;
        // during the move
        let stop = Arc::new(AtomicBool::new(false));
        let load = tokio::spawn({
            let (pf, stop) = (src.clone(), stop.clone());
            async move { publishers(&pf, stop).await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let probing = tokio::spawn(prober(src.clone(), dst.clone(), probe, stop.clone()));
        let t = Instant::now();
        let b = src
            .begin_slot_move(SLOT, SLOT, 1, "http://in-process", None)
            .await
            .unwrap();
        let target = dst.clone();
        loop {
            let d = src.drive_moves(&target).await.unwrap();
            if d.left == 0 {
                break;
            }
        }
        let took = t.elapsed();
        let sent = src
            .reader()
            .unwrap()
            .batch(b.id, 0)
            .unwrap()
            .unwrap()
            .record
            .items;
        tokio::time::sleep(Duration::from_millis(200)).await;
        stop.store(true, Ordering::Relaxed);
        let during = load.await.unwrap();
        let max_wait = probing.await.unwrap();
        // without it, as long
        let stop = Arc::new(AtomicBool::new(false));
        let load = tokio::spawn({
            let (pf, stop) = (src.clone(), stop.clone());
            async move { publishers(&pf, stop).await }
        });
        tokio::time::sleep(Duration::from_millis(700) + took).await;
        stop.store(true, Ordering::Relaxed);
        let without = load.await.unwrap();
        let on_target = dst
            .reader()
            .unwrap()
            .instances(&Default::default())
            .unwrap()
            .len();
        assert_eq!(on_target, waiting_n, "every waiting instance moved");
        src.close();
        dst.close();
        (took, (b.items, sent - b.items), max_wait, during, without)
    });
    let secs = took.as_secs_f64();
    let (p99_during, p99_without) = (
        support::quantile(&during, 0.99),
        support::quantile(&without, 0.99),
    );
    let ratio = p99_during.as_secs_f64() / p99_without.as_secs_f64();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let md = format!(
        "| measure | value |\n| --- | ---: |\n\
         | moved: waiting instances, records in all | {waiting_n}, {items} |\n\
         | records written during the copy, sent again | {again} |\n\
         | move time, rate | {secs:.2} s, {:.0} instances/s ({:.0} records/s) |\n\
         | publish p50 / p99 to the other slots without a move (64 publishers) | {:.2} / {:.2} ms |\n\
         | publish p50 / p99 during the move | {:.2} / {:.2} ms |\n\
         | p99 during vs without (target ≤ 2×) | {ratio:.2}× |\n\
         | longest wait of a write for the moving slot (target ≤ 1 s) | {:.2} s |\n",
        waiting_n as f64 / secs,
        items as f64 / secs,
        ms(support::quantile(&without, 0.5)),
        ms(p99_without),
        ms(support::quantile(&during, 0.5)),
        ms(p99_during),
        max_wait.as_secs_f64(),
    );
    println!("\n{md}");
    let doc = json!({
        "commit": commit,
        "command": "cargo bench --bench slot_move",
        "waiting": waiting_n,
        "buffered": buffered_n,
        "items": items,
        "sent_again": again,
        "seconds": secs,
        "instances_per_s": waiting_n as f64 / secs,
        "records_per_s": items as f64 / secs,
        "publish_ms": {
            "without": {"p50": ms(support::quantile(&without, 0.5)), "p99": ms(p99_without), "n": without.len()},
            "during": {"p50": ms(support::quantile(&during, 0.5)), "p99": ms(p99_during), "n": during.len()},
        },
        "p99_ratio": ratio,
        "moving_slot_max_wait_s": max_wait.as_secs_f64(),
    });
    support::keep_results("slot_move", &commit, &md, &doc);
}
