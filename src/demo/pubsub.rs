//! `postfach demo --pubsub`: the scenario through Pub/Sub. The outbox of
//! `auftragUebergeben` publishes each order to `auftraege`; a simulated provider
//! consumes them and answers on `auftrag-abgeschlossen` (a share at once, racing
//! the order's own commit, the rest a moment later; some twice, two of them
//! undecodable, one late); postfach consumes `auftrag-abgeschlossen-sub`.
//!
//! Invariant: as in the embedded demo, the summary is read back from the
//! database and the ledger; the simulator only counts what it published.

use super::{DemoArgs, Rng, auftrag, database_path, progress};
use crate::ingress::SubscriptionConfig;
use crate::pubsub::consumer::ConsumerOptions;
use crate::pubsub::{Connection, Consumer, Emulator, PubsubConfig, SubscriptionOptions, outbox};
use crate::reference::{InvoiceLedger, invoice_handler};
use crate::{Error, Postfach};
use google_cloud_pubsub::client::Publisher;
use google_cloud_pubsub::model::Message;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const ORDERS_TOPIC: &str = "auftraege";
const PROVIDER_SUB: &str = "auftraege-dienstleister";
const COMPLETIONS_TOPIC: &str = "auftrag-abgeschlossen";
const COMPLETIONS_SUB: &str = "auftrag-abgeschlossen-sub";

fn pubsub_err(e: impl std::fmt::Display) -> Error {
    Error::Task(format!("Pub/Sub: {e}"))
}

fn completion(order: &str, event_id: &str) -> Message {
    let body = json!({
        "auftragId": order,
        "erledigtePositionen": 1000 + order.len() as u64,
        "abschlussZeitpunkt": "2026-12-02T10:00:00Z",
    });
    Message::new()
        .set_data(body.to_string())
        .set_attributes([("eventId", event_id)])
}

pub(super) async fn run(args: &DemoArgs, json_out: bool) -> Result<crate::contract::Output, Error> {
    // the emulator: the one at $PUBSUB_EMULATOR_HOST, or our own for this run
    let external = std::env::var("PUBSUB_EMULATOR_HOST")
        .ok()
        .filter(|h| !h.trim().is_empty());
    let project = format!(
        "postfach-demo-{}",
        crate::Clock::now(&crate::clock::SystemClock)
    );
    let (conn, _emulator) = match external {
        Some(host) => {
            progress(json_out, &format!("Pub/Sub emulator at {host}"));
            let cfg = PubsubConfig {
                project: Some(project),
                ..Default::default()
            };
            (Connection::new(&cfg), None)
        }
        None => {
            progress(json_out, "starting the Pub/Sub emulator");
            let emu = tokio::task::spawn_blocking(Emulator::start)
                .await
                .map_err(|e| Error::Task(e.to_string()))?
                .map_err(pubsub_err)?;
            progress(json_out, &format!("Pub/Sub emulator at {}", emu.host()));
            (Connection::emulator(&emu.endpoint(), &project), Some(emu))
        }
    };
    let short = SubscriptionOptions {
        ack_deadline_seconds: 10,
        ..Default::default()
    };
    conn.ensure_topic(ORDERS_TOPIC).await.map_err(pubsub_err)?;
    conn.ensure_topic(COMPLETIONS_TOPIC)
        .await
        .map_err(pubsub_err)?;
    conn.ensure_subscription(PROVIDER_SUB, ORDERS_TOPIC, short.clone())
        .await
        .map_err(pubsub_err)?;
    conn.ensure_subscription(COMPLETIONS_SUB, COMPLETIONS_TOPIC, short)
        .await
        .map_err(pubsub_err)?;

    let dir = tempfile::tempdir().map_err(|e| Error::Store(e.into()))?;
    let pf = Postfach::open(database_path(args, &dir)?)?;
    let started = Instant::now();
    let n = args.orders.max(2);
    pf.deploy(
        "bpmn/auftrag-ausfuehrung.bpmn",
        super::REFERENCE_BPMN,
        [
            ("AuftragAbgeschlossen".to_string(), "auftragId".to_string()),
            (
                crate::model::send_topic_override("auftragUebergeben"),
                ORDERS_TOPIC.to_string(),
            ),
        ]
        .into(),
    )
    .await?;
    let ledger_path = dir.path().join("invoices.tsv");
    let ledger = InvoiceLedger::open(&ledger_path).map_err(|e| Error::Store(e.into()))?;
    pf.register_handler("rechnungStellen", invoice_handler(ledger, Duration::ZERO));
    outbox::register(&pf, &conn, [ORDERS_TOPIC.to_string()])
        .await
        .map_err(pubsub_err)?;
    let mut sub = SubscriptionConfig::new(COMPLETIONS_SUB, "AuftragAbgeschlossen", "/auftragId");
    sub.max_lease_extension = "10s".into();
    let consumer = Consumer::start(
        conn.clone(),
        &sub,
        Arc::new(pf.clone()),
        ConsumerOptions::default(),
    )
    .map_err(pubsub_err)?;
    let stats = consumer.stats();
    let executor = pf.start_executor(crate::jobs::ExecutorConfig::default());

    let provider_pub = conn
        .publisher(COMPLETIONS_TOPIC)
        .await
        .map_err(pubsub_err)?;
    let published = Arc::new(AtomicUsize::new(0));
    let mut rng = Rng(args.seed);
    let early: Vec<bool> = (0..n).map(|_| rng.chance(args.early)).collect();
    let twice: Vec<bool> = (0..n).map(|_| rng.chance(args.duplicates)).collect();
    let copies = |i: usize| if twice[i] { 2 } else { 1 };

    // the provider is faster than the order system: for a share of the orders
    // its completion is out before the order's instance even exists
    let mut first = Vec::new();
    for i in (0..n).filter(|&i| early[i]) {
        for _ in 0..copies(i) {
            first.push(
                provider_pub.publish(completion(&auftrag(i), &format!("done-{}", auftrag(i)))),
            );
        }
    }
    progress(
        json_out,
        &format!(
            "provider: {} completions before their order exists",
            first.len()
        ),
    );
    for f in first {
        f.await.map_err(pubsub_err)?;
        published.fetch_add(1, Ordering::SeqCst);
    }
    wait_acked(&stats, &published, Instant::now() + Duration::from_secs(60)).await?;

    // the provider answers every other order when it arrives on `auftraege`
    let answers: std::collections::HashMap<String, usize> = (0..n)
        .filter(|&i| !early[i])
        .map(|i| (auftrag(i), copies(i)))
        .collect();
    let provider = tokio::spawn(provider(
        conn.clone(),
        provider_pub.clone(),
        answers,
        published.clone(),
    ));

    progress(
        json_out,
        &format!("starting {n} orders; the outbox hands them over through Pub/Sub"),
    );
    super::start_orders(&pf, n).await?;

    // a broken provider message, twice
    for k in 0..2 {
        provider_pub
            .publish(
                Message::new()
                    .set_data(format!("{{\"auftragId\": \"{}\", ", auftrag(k)))
                    .set_attributes([("eventId", format!("kaputt-{k}"))]),
            )
            .await
            .map_err(pubsub_err)?;
        published.fetch_add(1, Ordering::SeqCst);
    }

    let deadline = Instant::now() + Duration::from_secs(120 + n as u64 / 20);
    let completed = |pf: &Postfach| -> Result<usize, Error> {
        Ok(pf
            .reader()?
            .instances(&crate::ops::InstanceFilter {
                state: Some("completed".into()),
                ..Default::default()
            })?
            .len())
    };
    progress(json_out, "waiting until every order is invoiced");
    while completed(&pf)? < n {
        if Instant::now() > deadline {
            return Err(Error::Task(format!(
                "demo --pubsub: only {} of {n} orders completed in time (consumer received {})",
                completed(&pf)?,
                stats.received.load(Ordering::Relaxed)
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // one more completion for an order already invoiced: parked as late
    let late = auftrag(n - 1);
    provider_pub
        .publish(completion(&late, &format!("nachtrag-{late}")))
        .await
        .map_err(pubsub_err)?;
    published.fetch_add(1, Ordering::SeqCst);
    progress(
        json_out,
        &format!("provider: a second completion for {late}, already invoiced"),
    );
    wait_acked(&stats, &published, deadline).await?;
    let elapsed = started.elapsed();
    provider.abort();
    consumer.stop().await;
    executor.stop().await?;
    let latency = &stats.ack_latency;
    let mut out = super::summary(
        &pf,
        n,
        published.load(Ordering::SeqCst),
        &ledger_path,
        elapsed,
        (
            "pubsub",
            json!({
                "deliveries": stats.received.load(Ordering::Relaxed),
                "acked": stats.acked.load(Ordering::Relaxed),
                "nacked": stats.nacked.load(Ordering::Relaxed),
                "ack_latency_p50_ms": latency.quantile(0.5).map(|s| s * 1000.0),
                "ack_latency_p99_ms": latency.quantile(0.99).map(|s| s * 1000.0),
            }),
        ),
    )?;
    out.text.push_str(&format!(
        "  {:<40} {} received, {} acked, {} nacked; publish→ack p50 {:.1} ms, p99 {:.1} ms\n",
        "Pub/Sub deliveries",
        stats.received.load(Ordering::Relaxed),
        stats.acked.load(Ordering::Relaxed),
        stats.nacked.load(Ordering::Relaxed),
        latency.quantile(0.5).unwrap_or(0.0) * 1000.0,
        latency.quantile(0.99).unwrap_or(0.0) * 1000.0,
    ));
    pf.close();
    Ok(out)
}

/// Waits until every published completion has been received and acked.
async fn wait_acked(
    stats: &crate::ingress::ConsumerStats,
    published: &AtomicUsize,
    deadline: Instant,
) -> Result<(), Error> {
    while stats.acked.load(Ordering::Relaxed) < published.load(Ordering::SeqCst) as u64 {
        if Instant::now() > deadline {
            return Err(Error::Task(format!(
                "demo --pubsub: {} of {} completions acked in time",
                stats.acked.load(Ordering::Relaxed),
                published.load(Ordering::SeqCst)
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// The simulated provider: consumes orders and answers each of `answers` once
/// with its number of copies (it deduplicates orders by their eventId).
async fn provider(
    conn: Connection,
    publisher: Publisher,
    answers: std::collections::HashMap<String, usize>,
    published: Arc<AtomicUsize>,
) -> Result<(), Error> {
    let client = conn.subscriber().await.map_err(pubsub_err)?;
    let mut stream = client
        .subscribe(conn.subscription_path(PROVIDER_SUB))
        .build();
    let mut seen = std::collections::HashSet::new();
    while let Some(next) = stream.next().await {
        let (m, h) = next.map_err(pubsub_err)?;
        let event = m.attributes.get("eventId").cloned().unwrap_or_default();
        let order = serde_json::from_slice::<Value>(&m.data)
            .ok()
            .and_then(|v| v["auftragId"].as_str().map(str::to_string));
        h.ack();
        let Some(order) = order else { continue };
        if !seen.insert(event) {
            continue; // the same order again (outbox redelivery): answered already
        }
        let Some(&copies) = answers.get(&order) else {
            continue; // answered before the order existed
        };
        for _ in 0..copies {
            let publisher = publisher.clone();
            let published = published.clone();
            let order = order.clone();
            // counted before it is sent, so the demo waits for its ack
            published.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                if publisher
                    .publish(completion(&order, &format!("done-{order}")))
                    .await
                    .is_err()
                {
                    published.fetch_sub(1, Ordering::SeqCst);
                }
            });
        }
    }
    Ok(())
}
