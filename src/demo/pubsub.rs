//! `postfach demo --pubsub`: the scenario through Pub/Sub. The outbox of
//! `auftragUebergeben` publishes each order to `auftraege`; a simulated provider
//! consumes them and answers on `auftrag-abgeschlossen` (a share at once, racing
//! the order's own commit, the rest a moment later; some twice, two of them
//! undecodable, one late); postfach consumes `auftrag-abgeschlossen-sub`.
//!
//! With `--claim-check`, the article's variant 5 both ways: every tenth order
//! is too large to publish and leaves as a Cloud Storage object plus a lean
//! message (the provider reads the object), and every completion protocol is
//! stored in a bucket and announced by a notification-style message that the
//! invoice handler resolves.
//!
//! Invariant: as in the embedded demo, the summary is read back from the
//! database and the ledger; the simulator only counts what it published.

use super::{DemoArgs, Rng, auftrag, database_path, progress};
use crate::ingress::SubscriptionConfig;
use crate::objects::ObjectStore;
use crate::pubsub::consumer::ConsumerOptions;
use crate::pubsub::{
    CloudStorage, Connection, Consumer, Emulator, FakeGcs, PubsubConfig, SubscriptionOptions,
    outbox,
};
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

/// Bucket of the orders the outbox hands over by reference.
const ORDERS_BUCKET: &str = "auftraege-gross";
/// Bucket of the provider's completion protocols.
const PROTOCOLS_BUCKET: &str = "abschluss-protokolle";
/// Orders larger than this go out as a claim check.
const CLAIM_CHECK_ABOVE: u64 = 64 * 1024;

/// The Cloud Storage side of `--claim-check`, with what it counted.
#[derive(Clone)]
struct ClaimChecks {
    store: Arc<CloudStorage>,
    _emulator: Option<Arc<FakeGcs>>,
    /// Lean orders whose object the provider read.
    orders_read: Arc<AtomicUsize>,
    /// Positions in them.
    positions_read: Arc<AtomicUsize>,
    /// Completion protocols the invoice handler read.
    protocols_read: Arc<AtomicUsize>,
}

impl ClaimChecks {
    async fn start(json_out: bool) -> Result<Self, Error> {
        let external = std::env::var("STORAGE_EMULATOR_HOST")
            .ok()
            .filter(|h| !h.trim().is_empty());
        let emulator = match external {
            Some(host) => {
                progress(json_out, &format!("Cloud Storage emulator at {host}"));
                None
            }
            None => {
                progress(
                    json_out,
                    "starting the Cloud Storage emulator (fake-gcs-server)",
                );
                let emu = tokio::task::spawn_blocking(FakeGcs::start)
                    .await
                    .map_err(|e| Error::Task(e.to_string()))?
                    .map_err(pubsub_err)?;
                progress(
                    json_out,
                    &format!("Cloud Storage emulator at {}", emu.host()),
                );
                Some(Arc::new(emu))
            }
        };
        let cfg = crate::config::StorageConfig {
            endpoint: emulator.as_ref().map(|e| e.endpoint()),
            ..Default::default()
        };
        let store = CloudStorage::connect(&cfg).await.map_err(pubsub_err)?;
        for b in [ORDERS_BUCKET, PROTOCOLS_BUCKET] {
            store.ensure_bucket(b).await.map_err(pubsub_err)?;
        }
        Ok(Self {
            store: Arc::new(store),
            _emulator: emulator,
            orders_read: Arc::default(),
            positions_read: Arc::default(),
            protocols_read: Arc::default(),
        })
    }
}

/// Every tenth order of the claim-check demo is large.
fn claim_check_positions(i: usize) -> usize {
    if i.is_multiple_of(10) { 2000 } else { 0 }
}

/// A completion: whole, or (claim check) the protocol stored in the bucket and
/// a lean message whose notification attributes name it.
async fn completion_of(
    cc: Option<&ClaimChecks>,
    order: &str,
    event_id: &str,
) -> Result<Message, Error> {
    let Some(cc) = cc else {
        return Ok(completion(order, event_id));
    };
    let protocol = json!({
        "auftragId": order,
        "erledigtePositionen": (1..=200).map(|p| json!({"position": p, "erledigt": "2026-12-02T10:00:00Z"})).collect::<Vec<_>>(),
    });
    let r = cc
        .store
        .write(
            PROTOCOLS_BUCKET,
            &format!("{order}/protokoll.json"),
            protocol.to_string().into_bytes(),
        )
        .await
        .map_err(pubsub_err)?;
    let mut attributes = vec![
        ("eventId".to_string(), event_id.to_string()),
        ("bucketId".to_string(), r.bucket.clone()),
        ("objectId".to_string(), r.object.clone()),
    ];
    if let Some(g) = r.generation {
        attributes.push(("objectGeneration".into(), g.to_string()));
    }
    Ok(Message::new()
        .set_data(
            json!({"auftragId": order, "kind": "storage#object", "name": r.object}).to_string(),
        )
        .set_attributes(attributes))
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
    let (conn, _emulator) = connect(json_out).await?;
    let claim_checks = if args.claim_check {
        Some(ClaimChecks::start(json_out).await?)
    } else {
        None
    };
    let cc = claim_checks.as_ref();
    create_topics(&conn).await?;
    let dir = tempfile::tempdir().map_err(|e| Error::Store(e.into()))?;
    let pf = Postfach::open(database_path(args, &dir)?)?;
    let started = Instant::now();
    let n = args.orders.max(2);
    let ledger_path = dir.path().join("invoices.tsv");
    let consumer = wire(&pf, &conn, &ledger_path, cc).await?;
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
    let pick = (0..n).filter(|&i| early[i]).map(|i| (i, copies(i)));
    let first = publish_early(&provider_pub, cc, pick.collect()).await?;
    progress(
        json_out,
        &format!("provider: {first} completions before their order exists"),
    );
    published.fetch_add(first, Ordering::SeqCst);
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
        claim_checks.clone(),
    ));

    progress(
        json_out,
        &format!("starting {n} orders; the outbox hands them over through Pub/Sub"),
    );
    if cc.is_some() {
        super::start_orders_sized(&pf, n, claim_check_positions).await?;
    } else {
        super::start_orders(&pf, n).await?;
    }

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
    progress(json_out, "waiting until every order is invoiced");
    wait_completed(&pf, n, deadline, &stats).await?;
    // one more completion for an order already invoiced: parked as late
    let late = auftrag(n - 1);
    provider_pub
        .publish(completion_of(cc, &late, &format!("nachtrag-{late}")).await?)
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
    let out = report(&pf, n, &published, &ledger_path, elapsed, &stats, cc)?;
    pf.close();
    Ok(out)
}

/// Deploys the reference process with its hand-over bound to the orders
/// topic, registers the invoice handler (its ledger at `ledger_path`) and the
/// outbox, and starts the consumer of the provider's completions.
async fn wire(
    pf: &Postfach,
    conn: &Connection,
    ledger_path: &std::path::Path,
    cc: Option<&ClaimChecks>,
) -> Result<Consumer, Error> {
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
    let ledger = InvoiceLedger::open(ledger_path).map_err(|e| Error::Store(e.into()))?;
    register_invoice(pf, ledger, cc);
    let claim_check_out = cc.map(|cc| outbox::ClaimCheckOut {
        store: cc.store.clone(),
        bucket: ORDERS_BUCKET.into(),
        above: CLAIM_CHECK_ABOVE,
    });
    outbox::register(pf, conn, [ORDERS_TOPIC.to_string()], claim_check_out)
        .await
        .map_err(pubsub_err)?;
    let mut sub = SubscriptionConfig::new(COMPLETIONS_SUB, "AuftragAbgeschlossen", "/auftragId");
    sub.max_lease_extension = "10s".into();
    if cc.is_some() {
        sub.claim_check = Some("attributes".into());
        sub.claim_check_variable = Some("protokoll".into());
    }
    Consumer::start(
        conn.clone(),
        &sub,
        Arc::new(pf.clone()),
        ConsumerOptions::default(),
    )
    .map_err(pubsub_err)
}

/// Publishes the completions of orders `(i, copies)` and waits until the
/// broker has them; returns how many went out. A duplicate is the same
/// message sent again (one protocol object).
async fn publish_early(
    provider_pub: &Publisher,
    cc: Option<&ClaimChecks>,
    orders: Vec<(usize, usize)>,
) -> Result<usize, Error> {
    let mut first = Vec::new();
    for (i, copies) in orders {
        let m = completion_of(cc, &auftrag(i), &format!("done-{}", auftrag(i))).await?;
        for _ in 0..copies {
            first.push(provider_pub.publish(m.clone()));
        }
    }
    let count = first.len();
    for f in first {
        f.await.map_err(pubsub_err)?;
    }
    Ok(count)
}

/// The emulator: the one at `$PUBSUB_EMULATOR_HOST`, or one of our own for
/// this run (kept alive by the returned handle).
async fn connect(json_out: bool) -> Result<(Connection, Option<Emulator>), Error> {
    let external = std::env::var("PUBSUB_EMULATOR_HOST")
        .ok()
        .filter(|h| !h.trim().is_empty());
    let project = format!(
        "postfach-demo-{}",
        crate::Clock::now(&crate::clock::SystemClock)
    );
    Ok(match external {
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
    })
}

/// The demo's topics and subscriptions: orders out, completions in.
async fn create_topics(conn: &Connection) -> Result<(), Error> {
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
    Ok(())
}

/// The invoice handler for `rechnungStellen`; with claim checks it reads the
/// completion protocol through its reference first.
fn register_invoice(pf: &Postfach, ledger: Arc<InvoiceLedger>, cc: Option<&ClaimChecks>) {
    match cc {
        None => pf.register_handler("rechnungStellen", invoice_handler(ledger, Duration::ZERO)),
        Some(cc) => {
            // the invoice needs the protocol: read it through the reference first
            let invoice: Arc<dyn crate::jobs::Handler> =
                Arc::new(invoice_handler(ledger, Duration::ZERO));
            let (store, read) = (cc.store.clone(), cc.protocols_read.clone());
            pf.register_handler("rechnungStellen", move |job: crate::JobContext| {
                let (store, read, invoice) = (store.clone(), read.clone(), invoice.clone());
                async move {
                    let protocol = store.read(&job.claim_check("protokoll")?).await?;
                    serde_json::from_slice::<Value>(&protocol).map_err(|e| {
                        crate::HandlerError::Failed(format!("completion protocol: {e}"))
                    })?;
                    read.fetch_add(1, Ordering::Relaxed);
                    invoice.call(job).await
                }
            });
        }
    }
}

/// Waits until `n` orders are completed, or fails at `deadline` naming how
/// far it got.
async fn wait_completed(
    pf: &Postfach,
    n: usize,
    deadline: Instant,
    stats: &crate::ingress::ConsumerStats,
) -> Result<(), Error> {
    let completed = |pf: &Postfach| -> Result<usize, Error> {
        Ok(pf
            .reader()?
            .instances(&crate::ops::InstanceFilter {
                state: Some("completed".into()),
                ..Default::default()
            })?
            .len())
    };
    while completed(pf)? < n {
        if Instant::now() > deadline {
            return Err(Error::Task(format!(
                "demo --pubsub: only {} of {n} orders completed in time (consumer received {})",
                completed(pf)?,
                stats.received.load(Ordering::Relaxed)
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The demo's summary with what Pub/Sub (and the claim checks) did.
fn report(
    pf: &Postfach,
    n: usize,
    published: &AtomicUsize,
    ledger_path: &std::path::Path,
    elapsed: Duration,
    stats: &crate::ingress::ConsumerStats,
    cc: Option<&ClaimChecks>,
) -> Result<crate::contract::Output, Error> {
    let latency = &stats.ack_latency;
    let (p50, p99) = (
        latency.quantile(0.5).map(|s| s * 1000.0),
        latency.quantile(0.99).map(|s| s * 1000.0),
    );
    let received = stats.received.load(Ordering::Relaxed);
    let acked = stats.acked.load(Ordering::Relaxed);
    let nacked = stats.nacked.load(Ordering::Relaxed);
    let claim_json = cc.map(|cc| {
        json!({
            "orders_by_reference": cc.orders_read.load(Ordering::Relaxed),
            "positions_in_them": cc.positions_read.load(Ordering::Relaxed),
            "protocols_read": cc.protocols_read.load(Ordering::Relaxed),
        })
    });
    let mut out = super::summary(
        pf,
        n,
        published.load(Ordering::SeqCst),
        ledger_path,
        elapsed,
        (
            "pubsub",
            json!({
                "deliveries": received,
                "acked": acked,
                "nacked": nacked,
                "ack_latency_p50_ms": p50,
                "ack_latency_p99_ms": p99,
                "claim_checks": claim_json,
            }),
        ),
    )?;
    out.text.push_str(&format!(
        "  {:<40} {received} received, {acked} acked, {nacked} nacked; publish→ack p50 {:.1} ms, p99 {:.1} ms\n",
        "Pub/Sub deliveries",
        p50.unwrap_or(0.0),
        p99.unwrap_or(0.0),
    ));
    if let Some(cc) = cc {
        out.text.push_str(&format!(
            "  {:<40} {} orders handed over by reference ({} positions read by the provider), {} completion protocols read by the invoice handler\n",
            "Claim checks (Cloud Storage)",
            cc.orders_read.load(Ordering::Relaxed),
            cc.positions_read.load(Ordering::Relaxed),
            cc.protocols_read.load(Ordering::Relaxed),
        ));
    }
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
    claim_checks: Option<ClaimChecks>,
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
        // a lean order: the positions are in the bucket
        if let (Some(cc), Some(b), Some(o)) = (
            &claim_checks,
            m.attributes.get("bucketId"),
            m.attributes.get("objectId"),
        ) {
            let r = crate::objects::ObjectRef::new(
                b,
                o,
                m.attributes.get("objectGeneration").map(String::as_str),
            )
            .map_err(pubsub_err)?;
            let full: Value = serde_json::from_slice(&cc.store.read(&r).await.map_err(pubsub_err)?)
                .map_err(pubsub_err)?;
            cc.orders_read.fetch_add(1, Ordering::Relaxed);
            cc.positions_read.fetch_add(
                full["positionen"].as_array().map_or(0, Vec::len),
                Ordering::Relaxed,
            );
        }
        let Some(&copies) = answers.get(&order) else {
            continue; // answered before the order existed
        };
        let publisher = publisher.clone();
        let published = published.clone();
        let cc = claim_checks.clone();
        // counted before they are sent, so the demo waits for their acks
        published.fetch_add(copies, Ordering::SeqCst);
        tokio::spawn(async move {
            // a duplicate is the same message sent again (one protocol object)
            let Ok(m) = completion_of(cc.as_ref(), &order, &format!("done-{order}")).await else {
                published.fetch_sub(copies, Ordering::SeqCst);
                return;
            };
            for _ in 0..copies {
                if publisher.publish(m.clone()).await.is_err() {
                    published.fetch_sub(1, Ordering::SeqCst);
                }
            }
        });
    }
    Ok(())
}
