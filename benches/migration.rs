//! A migration under load: `POSTFACH_MIGRATION_WAITING` instances (default
//! 10,000) wait at a message catch of version 1; version 2 adds a task
//! after it; a durable migrate batch moves every one of them while 64
//! publishers publish. The batch's rate (instances/s, target ≥ 2,000) is
//! shown beside the publishers' latencies during it and for as long
//! without it, measured in the same run (the p99 ratio; target ≤ 2×).
//!
//! cargo bench --bench migration

#[path = "support/mod.rs"]
mod support;

use postfach::{BatchOp, BatchState, MigrationPlan, Postfach, Publish, Selection, vars};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

static UNIQUE: AtomicU64 = AtomicU64::new(0);

fn buffered() -> Publish {
    let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
    Publish {
        name: "Fertig".into(),
        key: format!("load-{n}"),
        message_id: Some(format!("load-{n}")),
        variables: vars([("n", n.into())]),
        ttl: Some(7 * 86_400_000),
        ..Default::default()
    }
}

async fn fill(pf: &Postfach, n: u64) {
    let mut tasks = Vec::new();
    for c in 0..64 {
        let pf = pf.clone();
        tasks.push(tokio::spawn(async move {
            for i in (c..n).step_by(64) {
                pf.start("warten", vars([("key", format!("w-{i}").into())]), None)
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Migrates every waiting instance of version 1 to 2 as one durable batch,
/// worked off here a slice at a time; how long it took.
async fn migrate(pf: &Postfach) -> (Duration, u64, u64) {
    let plan = MigrationPlan {
        process: "warten".into(),
        from: 1,
        to: 2,
        map: Default::default(),
    };
    let t = Instant::now();
    let b = pf
        .create_batch(
            BatchOp::Migrate(plan),
            &Selection::Instances(Default::default()),
        )
        .await
        .unwrap();
    pf.run_batches(|_| {}).await.unwrap();
    let took = t.elapsed();
    let end = pf.reader().unwrap().batch(b.id, 0).unwrap().unwrap().record;
    assert_eq!(end.state, BatchState::Done);
    (took, end.done, end.refused)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let commit = support::measured_commit();
    let n = support::env_or("POSTFACH_MIGRATION_WAITING", 10_000);
    let rt = support::rt();
    let dir = support::bench_dir();
    let db = dir.path().join("bench.redb");
    let keys = || [("Fertig".to_string(), "key".to_string())].into();
    let (took, done, refused, during, without) = rt.block_on(async {
        let pf = Postfach::open(&db).unwrap();
        pf.deploy("warten.bpmn", support::WAITING_MODEL, keys())
            .await
            .unwrap();
        fill(&pf, n).await;
        let v2 = support::WAITING_MODEL.replace(
            r#"<sequenceFlow id="f2" sourceRef="c" targetRef="e"/>"#,
            r#"<sequenceFlow id="f2" sourceRef="c" targetRef="t"/><task id="t"/><sequenceFlow id="f3" sourceRef="t" targetRef="e"/>"#,
        );
        let d = pf.deploy("warten.bpmn", &v2, keys()).await.unwrap();
        assert_eq!(d[0].version, 2);
        // during the migration
        let stop = Arc::new(AtomicBool::new(false));
        let load = tokio::spawn({
            let (pf, stop) = (pf.clone(), stop.clone());
            async move { support::publishers(&pf, stop, |_, _| Some(buffered())).await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (took, done, refused) = migrate(&pf).await;
        stop.store(true, Ordering::Relaxed);
        let during = load.await.unwrap();
        // without it, as long
        let stop = Arc::new(AtomicBool::new(false));
        let load = tokio::spawn({
            let (pf, stop) = (pf.clone(), stop.clone());
            async move { support::publishers(&pf, stop, |_, _| Some(buffered())).await }
        });
        tokio::time::sleep(Duration::from_millis(500) + took).await;
        stop.store(true, Ordering::Relaxed);
        let without = load.await.unwrap();
        pf.close();
        (took, done, refused, during, without)
    });
    let rate = done as f64 / took.as_secs_f64();
    let (p99_during, p99_without) = (
        support::quantile(&during, 0.99),
        support::quantile(&without, 0.99),
    );
    let ratio = p99_during.as_secs_f64() / p99_without.as_secs_f64();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let md = format!(
        "| measure | value |\n| --- | ---: |\n\
         | waiting instances migrated (refused) | {done} ({refused}) |\n\
         | migration time, rate (target ≥ 2,000/s) | {:.2} s, {rate:.0} instances/s |\n\
         | publish p50 / p99 without a migration (64 publishers) | {:.2} / {:.2} ms |\n\
         | publish p50 / p99 during the migration | {:.2} / {:.2} ms |\n\
         | p99 during vs without (target ≤ 2×) | {ratio:.2}× |\n",
        took.as_secs_f64(),
        ms(support::quantile(&without, 0.5)),
        ms(p99_without),
        ms(support::quantile(&during, 0.5)),
        ms(p99_during),
    );
    println!("\n{md}");
    let doc = json!({
        "commit": commit,
        "command": "cargo bench --bench migration",
        "waiting": n,
        "migrated": done,
        "refused": refused,
        "seconds": took.as_secs_f64(),
        "instances_per_s": rate,
        "publish_ms": {
            "without": {"p50": ms(support::quantile(&without, 0.5)), "p99": ms(p99_without), "n": without.len()},
            "during": {"p50": ms(support::quantile(&during, 0.5)), "p99": ms(p99_during), "n": during.len()},
        },
        "p99_ratio": ratio,
    });
    support::keep_results("migration", &commit, &md, &doc);
}
