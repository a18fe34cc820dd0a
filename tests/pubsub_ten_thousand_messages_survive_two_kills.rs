//! Against the real Pub/Sub emulator and the `postfach run` binary: 10,000
//! orders, their completions (5 % published twice, 50 undecodable) consumed
//! while the server is killed with SIGKILL twice. Afterwards every published
//! message is accounted for — correlated, buffered, duplicate or parked — none
//! is lost, and no order is invoiced twice.
#![cfg(feature = "pubsub")]
use crate::common;

use common::pubsub::{Broker, COMPLETIONS_CONFIG, launch_with, message, wait};
use common::{PROCESS, REFERENCE};
use postfach::Postfach;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

const ORDERS: usize = 10_000;
const MALFORMED: usize = 50;
const SUB: &str = "auftrag-abgeschlossen-sub";
const RECEIVED: &str = "postfach_pubsub_deliveries_total{subscription=\"auftrag-abgeschlossen-sub\",result=\"received\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_is_accounted_for_across_two_kills() {
    let broker = Broker::start();
    broker.reference_topics(SUB).await;
    let dir = tempfile::tempdir().unwrap();
    {
        // the orders exist before their completions come in (most of them wait
        // for the async hand-over first, so many completions are early)
        let pf = Postfach::open(dir.path().join("run.redb")).unwrap();
        pf.deploy(
            "bpmn/auftrag-ausfuehrung.bpmn",
            REFERENCE,
            common::pubsub::reference_overrides(),
        )
        .await
        .unwrap();
        let mut set = tokio::task::JoinSet::new();
        for i in 0..ORDERS {
            let pf = pf.clone();
            set.spawn(async move {
                pf.start(
                    PROCESS,
                    postfach::vars([("auftragId", format!("A-{i}").into())]),
                    None,
                )
                .await
                .unwrap()
            });
        }
        while set.join_next().await.is_some() {}
        pf.close();
    }

    // publish everything in the background while the server runs and is killed
    let publisher = broker
        .conn
        .publisher("auftrag-abgeschlossen")
        .await
        .unwrap();
    let publishing = tokio::spawn(async move {
        let mut futures = Vec::new();
        let mut published: Vec<(String, bool)> = Vec::new(); // (id, decodable)
        for i in 0..ORDERS {
            let id = format!("done-A-{i}");
            let body = format!(r#"{{"auftragId": "A-{i}", "erledigtePositionen": {i}}}"#);
            let copies = if i % 20 == 0 { 2 } else { 1 };
            for _ in 0..copies {
                futures.push(publisher.publish(message(&body, &[("eventId", &id)])));
                published.push((id.clone(), true));
            }
            if i % (ORDERS / MALFORMED) == 0 {
                let id = format!("kaputt-{i}");
                futures.push(publisher.publish(message("{\"auftragId\": ", &[("eventId", &id)])));
                published.push((id, false));
            }
            if futures.len() >= 500 {
                for f in futures.drain(..) {
                    f.await.unwrap();
                }
            }
        }
        for f in futures {
            f.await.unwrap();
        }
        published
    });

    for kill in 1..=2 {
        let server = launch_with(dir.path(), &broker, COMPLETIONS_CONFIG, &[]);
        wait(
            &format!("deliveries before kill {kill}"),
            Duration::from_secs(120),
            || server.metric(RECEIVED) >= 2_500.0,
        );
        server.kill9();
    }
    let published = publishing.await.unwrap();
    let server = launch_with(dir.path(), &broker, COMPLETIONS_CONFIG, &[]);
    let ledger = dir.path().join("invoices.tsv");
    // a machine shared with other tests is slow, not stuck: the wait fails
    // only when the ledger stops growing for two minutes
    let invoiced = || {
        postfach::reference::InvoiceLedger::entries(&ledger)
            .unwrap()
            .len()
    };
    let (mut seen, mut since) = (invoiced(), std::time::Instant::now());
    while seen < ORDERS {
        std::thread::sleep(Duration::from_millis(200));
        let now = invoiced();
        if now > seen {
            (seen, since) = (now, std::time::Instant::now());
        }
        if since.elapsed() >= Duration::from_secs(120) {
            // what the server says about itself, to tell a stall from a loss
            let figures: Vec<String> = server
                .metrics()
                .lines()
                .filter(|l| {
                    !l.starts_with('#')
                        && ["pubsub", "messages", "jobs", "outbox", "tokens", "commit"]
                            .iter()
                            .any(|k| l.contains(k))
                })
                .map(str::to_string)
                .collect();
            let log: Vec<String> = server
                .log_so_far()
                .into_iter()
                .filter(|l| !l.contains("parked as malformed"))
                .collect();
            let tail = &log[log.len().saturating_sub(40)..];
            panic!(
                "invoicing stopped at {seen} of {ORDERS} orders\n{}\n--- server log ---\n{}",
                figures.join("\n"),
                tail.join("\n")
            );
        }
    }
    wait(
        "every undecodable message is parked",
        Duration::from_secs(60),
        || {
            server.metric("postfach_messages_total{outcome=\"parked\",reason=\"malformed\"}")
                == MALFORMED as f64
        },
    );
    assert!(server.stop().success());

    let pf = Postfach::open(dir.path().join("run.redb")).unwrap();
    let r = pf.reader().unwrap();
    let mut copies: HashMap<&str, usize> = HashMap::new();
    for (id, _) in &published {
        *copies.entry(id.as_str()).or_default() += 1;
    }
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    for (id, decodable) in &published {
        if copies[id.as_str()] == 0 {
            continue; // second copy of an id already checked
        }
        copies.insert(id, 0);
        let records = r.message(id).unwrap();
        assert_eq!(
            records.len(),
            1,
            "{id}: exactly one record, found {records:?}"
        );
        let m = &records[0];
        if *decodable {
            assert_eq!(m.state, "correlated", "{id}: {m:?}");
        } else {
            assert_eq!((m.state, m.reason), ("parked", Some("malformed")), "{id}");
        }
        *states.entry(m.state.to_string()).or_default() += 1;
    }
    let counters = r.counters().unwrap();
    let duplicates = counters.get("messages_duplicate").copied().unwrap_or(0) as usize;
    let twice = ORDERS / 20;
    assert!(
        duplicates >= twice,
        "{duplicates} duplicates recognised, {twice} published twice"
    );
    assert_eq!(states.get("correlated"), Some(&ORDERS));
    assert_eq!(states.get("parked"), Some(&MALFORMED));

    let mut invoices: HashMap<String, usize> = HashMap::new();
    for (_, order) in
        postfach::reference::InvoiceLedger::entries(&dir.path().join("invoices.tsv")).unwrap()
    {
        *invoices.entry(order).or_default() += 1;
    }
    assert_eq!(invoices.len(), ORDERS, "every order invoiced");
    let twice_invoiced: Vec<_> = invoices.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice_invoiced.is_empty(),
        "invoiced twice: {twice_invoiced:?}"
    );
    eprintln!(
        "{} published ({} ids), {duplicates} duplicates recognised (redeliveries after the kills included)",
        published.len(),
        states.values().sum::<usize>()
    );
}
