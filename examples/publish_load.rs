//! Load generator for profiling: concurrent publishers (64 unless given) for
//! a few seconds, then the writer's mean commit latency (apply + log fsync).
//! `cargo run --release --example publish_load [-- CALLERS]`
use postfach::{Postfach, Publish, vars};
use std::time::Instant;

/// The binary's allocator (feature `mimalloc`, on by default), so a profile
/// shows the writer as `postfach` and the engine bench run it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main(worker_threads = 2)]
async fn main() {
    std::fs::create_dir_all("target/bench-db").unwrap();
    let dir = tempfile::tempdir_in("target/bench-db").unwrap();
    let pf = Postfach::open(dir.path().join("load.redb")).unwrap();
    let xml = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");
    pf.deploy(
        "ref.bpmn",
        xml,
        [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into(),
    )
    .await
    .unwrap();
    let callers: u64 = match std::env::args().nth(1) {
        None => 64,
        Some(a) => match a.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("publish_load: CALLERS must be a whole number above 0, not {a:?}");
                std::process::exit(2);
            }
        },
    };
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for c in 0..callers {
        let pf = pf.clone();
        set.spawn(async move {
            let mut n = 0u64;
            while start.elapsed().as_secs() < 4 {
                let id = format!("c{c}-{n}");
                pf.publish(Publish {
                    name: "AuftragAbgeschlossen".into(),
                    key: id.clone(),
                    message_id: Some(id),
                    variables: vars([("x", 1.into())]),
                    ..Default::default()
                })
                .await
                .unwrap();
                n += 1;
            }
            n
        });
    }
    let mut total = 0;
    while let Some(n) = set.join_next().await {
        total += n.unwrap();
    }
    println!(
        "{total} publishes in {:.2}s: {:.0}/s",
        start.elapsed().as_secs_f64(),
        total as f64 / start.elapsed().as_secs_f64()
    );
    let latency = &pf.commit_stats().latency_seconds;
    let (_, sum) = latency.buckets();
    println!(
        "{} batches, mean commit latency {:.0} µs, mean batch {:.1}",
        latency.count(),
        sum / latency.count().max(1) as f64 * 1e6,
        total as f64 / latency.count().max(1) as f64
    );
}
