//! Load generator for profiling: 64 concurrent publishers for a few seconds.
//! `cargo run --release --example publish_load`
use postfach::{Postfach, Publish, vars};
use std::time::Instant;

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
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for c in 0..64u64 {
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
}
