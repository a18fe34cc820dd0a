//! A database written with record format 1 (tests/fixtures/format-v1.redb, made by
//! `cargo run --example write_fixture`) opens and runs on: a change of the stored
//! format must be deliberate — bump `codec::FORMAT_VERSION` and migrate.
use postfach::{ManualClock, Options, Outcome, Postfach, Publish};

#[tokio::test]
async fn the_format_v1_fixture_opens_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.redb");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/format-v1.redb"),
        &path,
    )
    .unwrap();
    let clock = ManualClock::new(1_767_225_600_000 + 60_000);
    let pf = Postfach::open_with(
        &path,
        Options {
            clock,
            ..Options::default()
        },
    )
    .unwrap();
    let r = pf.reader().unwrap();
    assert_eq!(
        r.instance(1).unwrap().unwrap().waiting_at,
        vec!["warteAufAbschluss"]
    );
    assert_eq!(
        r.instance(2).unwrap().unwrap().waiting_at,
        vec!["auftragUebergeben"]
    );
    let open: Vec<(String, &str)> = r
        .messages(&Default::default())
        .unwrap()
        .into_iter()
        .map(|m| (m.message_id, m.state))
        .collect();
    assert_eq!(
        open,
        vec![
            ("early-2".to_string(), "buffered"),
            ("unknown-1".to_string(), "parked")
        ]
    );
    // the buffer-age index and the parked gauges came after the fixture: they
    // are derived from its records when it opens
    let listed: std::collections::BTreeMap<&str, u64> = r
        .messages(&Default::default())
        .unwrap()
        .iter()
        .filter(|m| m.state == "parked")
        .fold(Default::default(), |mut acc, m| {
            *acc.entry(m.reason.unwrap_or("unknown")).or_default() += 1;
            acc
        });
    assert_eq!(r.parked_by_reason().unwrap(), listed);
    assert_eq!(listed.values().sum::<u64>(), 1);
    assert!(
        r.oldest_buffered_age().unwrap().is_some(),
        "early-2 waits in the buffer"
    );
    // so are the per-version statistics: the fixture's tokens and messages count
    let st = r
        .statistics("auftrag-ausfuehrung", None)
        .unwrap()
        .expect("the fixture's process is deployed");
    let at = |id: &str| {
        st.elements
            .iter()
            .find(|e| e.element == id)
            .unwrap()
            .clone()
    };
    assert_eq!(at("warteAufAbschluss").waiting, 1);
    assert!(at("warteAufAbschluss").oldest_wait_since.is_some());
    assert_eq!(at("auftragUebergeben").waiting, 1);
    assert_eq!(at("warteAufAbschluss").buffered, 1, "early-2");
    drop(r);

    let msg = |key: &str, id: &str| Publish {
        name: "AuftragAbgeschlossen".into(),
        key: key.into(),
        message_id: Some(id.into()),
        ..Default::default()
    };
    assert_eq!(
        pf.publish(msg("A-1", "done-1")).await.unwrap().outcome,
        Outcome::Correlated
    );
    assert_eq!(
        pf.publish(msg("A-2", "early-2")).await.unwrap().outcome,
        Outcome::Duplicate,
        "the dedup index reads"
    );
    pf.run_continuations(10).await.unwrap();
    assert_eq!(
        pf.reader()
            .unwrap()
            .instance(2)
            .unwrap()
            .unwrap()
            .waiting_at,
        vec!["rechnungStellen"],
        "the buffered message correlates"
    );
    assert_eq!(
        pf.reader().unwrap().oldest_buffered_age().unwrap(),
        None,
        "the index row left with the message"
    );
}
