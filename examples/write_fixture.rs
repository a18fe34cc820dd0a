//! Writes tests/fixtures/format-v1.redb: a small database in the current record
//! format, opened by tests/opens_a_database_of_format_v1.rs so that a change of
//! the stored format is always deliberate (bump FORMAT_VERSION and migrate).
//! `cargo run --example write_fixture`
use postfach::{ManualClock, Options, Postfach, Publish, vars};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let path = std::path::Path::new("tests/fixtures/format-v1.redb");
    let _ = std::fs::remove_file(path);
    let clock = ManualClock::new(1_767_225_600_000);
    let pf = Postfach::open_with(
        path,
        Options {
            clock: clock.clone(),
            ..Options::default()
        },
    )
    .unwrap();
    let xml = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");
    pf.deploy(
        "auftrag-ausfuehrung.bpmn",
        xml,
        [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into(),
    )
    .await
    .unwrap();
    // 1: waits at the catch event; 2: still before the hand-over, its completion buffered
    pf.start(
        "auftrag-ausfuehrung",
        vars([("auftragId", "A-1".into())]),
        None,
    )
    .await
    .unwrap();
    pf.run_continuations(10).await.unwrap();
    pf.start(
        "auftrag-ausfuehrung",
        vars([("auftragId", "A-2".into())]),
        None,
    )
    .await
    .unwrap();
    let msg = |key: &str, id: &str| Publish {
        name: "AuftragAbgeschlossen".into(),
        key: key.into(),
        message_id: Some(id.into()),
        ..Default::default()
    };
    pf.publish(msg("A-2", "early-2")).await.unwrap();
    let mut unknown = msg("X", "unknown-1");
    unknown.name = "Unbekannt".into();
    pf.publish(unknown).await.unwrap();
    pf.close();
    // no compaction: it would open with the system clock and expire the buffer
    let _ = std::fs::remove_file(path.with_extension("redb.wal"));
    println!(
        "wrote {} ({} bytes)",
        path.display(),
        std::fs::metadata(path).unwrap().len()
    );
}
