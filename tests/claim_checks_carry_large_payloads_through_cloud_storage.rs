//! The article's claim check, both ways, against the real Pub/Sub emulator and
//! a real Cloud Storage emulator (fake-gcs-server):
//! - out: an order with 5,000 positions is too large to publish; the outbox
//!   uploads it under a name derived from the job's idempotency key and
//!   publishes a lean message (key, reference, same `eventId`); a receiving
//!   postfach correlates the lean message and its handler reads the order;
//! - in: a completion protocol of several MB arrives as a Cloud Storage
//!   notification and the invoice handler reads it through `JobContext`;
//! - a reference to a missing object fails the job, is retried, becomes an
//!   incident, and is repaired by a retry once the object exists.
#![cfg(feature = "pubsub")]
use crate::common;

use common::gcs::{BUCKET, Gcs};
use common::pubsub::{Broker, eventually};
use common::{Env, HAND_OVER, MESSAGE, REFERENCE};
use postfach::ingress::SubscriptionConfig;
use postfach::jobs::HandlerError;
use postfach::objects::ObjectStore;
use postfach::pubsub::Consumer;
use postfach::pubsub::consumer::ConsumerOptions;
use postfach::pubsub::outbox::{self, ClaimCheckOut};
use postfach::{JobContext, Publish, Vars, vars};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The provider's side: an order arrives (message start), is checked by a worker.
const PROVIDER: &str = bpmn!(
    r#"
  <message id="m" name="Auftrag"/>
  <process id="auftrag-annehmen" isExecutable="true">
    <startEvent id="s"><messageEventDefinition messageRef="m"/></startEvent>
    <sequenceFlow id="f0" sourceRef="s" targetRef="auftragPruefen"/>
    <serviceTask id="auftragPruefen"/>
    <sequenceFlow id="f1" sourceRef="auftragPruefen" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

/// What the provider's worker saw: order, positions, the object it read them from.
type Checked = (String, usize, Option<String>);

fn positions(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                json!({"position": i, "artikel": format!("ART-{i:06}"), "menge": 1 + i % 7,
                       "beschreibung": "Wartung Heizungsanlage inkl. Anfahrt und Material"})
            })
            .collect(),
    )
}

fn consume(broker: &Broker, cfg: SubscriptionConfig, env: &Env) -> Consumer {
    Consumer::start(
        broker.conn.clone(),
        &cfg,
        Arc::new(env.pf.clone()),
        ConsumerOptions::default(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_with_5000_positions_goes_out_as_a_claim_check_and_is_read_on_the_other_side() {
    let broker = Broker::start();
    let gcs = Gcs::start().await;
    broker
        .topic_with_subscription("auftraege", "auftraege-dienstleister")
        .await;
    broker
        .topic_with_subscription("auftraege", "auftraege-mitschnitt")
        .await;

    // the sender: the reference model with its send task bound to `auftraege`
    let sender = Env::new();
    let overrides = [
        (MESSAGE.to_string(), "auftragId".to_string()),
        (
            postfach::model::send_topic_override(HAND_OVER),
            "auftraege".to_string(),
        ),
    ]
    .into();
    sender
        .pf
        .deploy("auftrag-ausfuehrung.bpmn", REFERENCE, overrides)
        .await
        .unwrap();
    outbox::register(
        &sender.pf,
        &broker.conn,
        ["auftraege".to_string()],
        Some(ClaimCheckOut {
            store: gcs.store.clone(),
            bucket: BUCKET.into(),
            // 5,000 positions are about 650 kB: hand them over by reference above 256 KiB
            above: 256 * 1024,
        }),
    )
    .await
    .unwrap();
    let big = sender
        .pf
        .start(
            "auftrag-ausfuehrung",
            vars([
                ("auftragId", "A-big".into()),
                ("positionen", positions(5000)),
            ]),
            None,
        )
        .await
        .unwrap();
    let small = sender
        .pf
        .start(
            "auftrag-ausfuehrung",
            vars([
                ("auftragId", "A-small".into()),
                ("positionen", positions(3)),
            ]),
            None,
        )
        .await
        .unwrap();
    sender.pf.work_until_idle().await.unwrap();
    assert_eq!(sender.waiting_at(big), ["warteAufAbschluss"]);
    assert_eq!(sender.waiting_at(small), ["warteAufAbschluss"]);
    // one object, for the large order only, named by its idempotency key
    let objects = gcs.objects();
    assert_eq!(objects.len(), 1, "{objects:?} {:?}", sender.jobs());
    assert!(
        objects[0].starts_with("postfach/auftraege/") && objects[0].contains(":auftragUebergeben:"),
        "{objects:?}"
    );

    // on the wire: the lean message, its eventId the key the object is named by
    let wire = broker
        .drain(
            "auftraege-mitschnitt",
            Duration::from_secs(2),
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(wire.len(), 2, "{wire:?}");
    let (lean, attrs) = wire
        .iter()
        .find(|(_, a)| a.contains_key("objectId"))
        .expect("the large order went out lean");
    assert!(lean.len() < 1024, "lean: {lean}");
    assert_eq!(attrs["objectId"], objects[0]);
    assert_eq!(attrs["bucketId"], BUCKET);
    assert_eq!(
        objects[0],
        outbox::object_name("auftraege", &attrs["eventId"]),
        "one name per hand-over"
    );
    let lean: Value = serde_json::from_str(lean).unwrap();
    assert_eq!(lean["auftragId"], "A-big");
    assert!(
        lean["claimCheck"]
            .as_str()
            .unwrap()
            .starts_with(&format!("gs://{BUCKET}/postfach/"))
    );
    assert!(lean.get("positionen").is_none());

    // the receiver: postfach behind the subscription, resolving the lean message
    let receiver = Env::new();
    receiver
        .pf
        .deploy(
            "annehmen.bpmn",
            PROVIDER,
            [("Auftrag".to_string(), "auftragId".to_string())].into(),
        )
        .await
        .unwrap();
    let mut cfg = SubscriptionConfig::new("auftraege-dienstleister", "Auftrag", "/auftragId");
    cfg.message_id = "attribute:eventId".into();
    cfg.claim_check = Some("attributes".into());
    cfg.claim_check_variable = Some("auftrag".into());
    // small orders come whole on the same topic
    cfg.claim_check_required = false;
    let consumer = consume(&broker, cfg, &receiver);
    let stats = consumer.stats();
    eventually("both orders are acked", Duration::from_secs(30), || {
        stats.acked.load(Ordering::Relaxed) == 2
    })
    .await;
    consumer.stop().await;

    let seen: Arc<Mutex<Vec<Checked>>> = Arc::default();
    let (store, log) = (gcs.store.clone(), seen.clone());
    receiver
        .pf
        .register_handler("auftragPruefen", move |job: JobContext| {
            let (store, log) = (store.clone(), log.clone());
            async move {
                let id = job.variables["auftragId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                // a lean message carries the reference; a small one the positions themselves
                let (n, object) = match job.claim_check("auftrag") {
                    Ok(r) => {
                        let order: Value = serde_json::from_slice(&store.read(&r).await?)
                            .map_err(|e| HandlerError::Failed(e.to_string()))?;
                        (
                            order["positionen"].as_array().map_or(0, Vec::len),
                            Some(r.object),
                        )
                    }
                    Err(_) => (
                        job.variables["positionen"].as_array().map_or(0, Vec::len),
                        None,
                    ),
                };
                log.lock().unwrap().push((id, n, object));
                Ok(Vars::new())
            }
        });
    receiver.pf.work_until_idle().await.unwrap();
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("A-big".to_string(), 5000, Some(objects[0].clone())),
            ("A-small".to_string(), 3, None)
        ]
    );
    assert_eq!(receiver.open_messages().len(), 0, "nothing parked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_protocol_of_several_mb_arrives_as_a_reference_and_the_invoice_handler_reads_it()
 {
    let broker = Broker::start();
    let gcs = Gcs::start().await;
    broker
        .topic_with_subscription("auftrag-abgeschlossen", "abschluss-sub")
        .await;
    let env = Env::reference().await;
    let order = env.waiting_order("A-1").await;

    // the provider stores the protocol (about 4 MB) and publishes a notification
    let protocol =
        serde_json::to_vec(&json!({"auftragId": "A-1", "positionen": positions(40_000)})).unwrap();
    assert!(protocol.len() > 3 * 1024 * 1024, "{} bytes", protocol.len());
    let stored = gcs.put("A-1/protokoll.json", &protocol).await;
    let generation = stored
        .generation
        .expect("the emulator reports a generation")
        .to_string();
    let mut cfg = SubscriptionConfig::new("abschluss-sub", MESSAGE, "attribute:auftragId");
    cfg.claim_check = Some("attributes".into());
    cfg.claim_check_variable = Some("protokoll".into());
    let consumer = consume(&broker, cfg, &env);
    let stats = consumer.stats();
    broker
        .publish(
            "auftrag-abgeschlossen",
            r#"{"kind": "storage#object", "name": "A-1/protokoll.json"}"#,
            &[
                ("auftragId", "A-1"),
                ("eventId", "evt-A-1"),
                ("bucketId", BUCKET),
                ("objectId", "A-1/protokoll.json"),
                ("objectGeneration", &generation),
            ],
        )
        .await;
    eventually("the notification is acked", Duration::from_secs(30), || {
        stats.acked.load(Ordering::Relaxed) == 1
    })
    .await;
    consumer.stop().await;

    let read = Arc::new(AtomicUsize::new(0));
    let (store, counted) = (gcs.store.clone(), read.clone());
    env.pf
        .register_handler("rechnungStellen", move |job: JobContext| {
            let (store, counted) = (store.clone(), counted.clone());
            async move {
                let bytes = store.read(&job.claim_check("protokoll")?).await?;
                let p: Value = serde_json::from_slice(&bytes)
                    .map_err(|e| HandlerError::Failed(e.to_string()))?;
                counted.store(
                    p["positionen"].as_array().map_or(0, Vec::len),
                    Ordering::SeqCst,
                );
                Ok(vars([(
                    "rechnungsPositionen",
                    p["positionen"].as_array().map_or(0, Vec::len).into(),
                )]))
            }
        });
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(read.load(Ordering::SeqCst), 40_000);
    assert_eq!(env.state(order), "completed");
    // the object stays: postfach deletes nothing, lifecycle rules do
    assert_eq!(gcs.objects(), ["A-1/protokoll.json"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_to_a_missing_object_is_an_incident_until_the_object_exists() {
    let gcs = Gcs::start().await;
    let env = Env::reference().await;
    let order = env.waiting_order("A-2").await;
    let reference = json!({"bucket": BUCKET, "object": "A-2/protokoll.json", "generation": null});
    let d = env
        .pf
        .publish(Publish {
            name: MESSAGE.into(),
            key: "A-2".into(),
            message_id: Some("evt-A-2".into()),
            variables: vars([("protokoll", reference)]),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(d.outcome.as_str(), "correlated");

    let store = gcs.store.clone();
    env.pf
        .register_handler("rechnungStellen", move |job: JobContext| {
            let store = store.clone();
            async move {
                let bytes = store.read(&job.claim_check("protokoll")?).await?;
                Ok(vars([("protokollBytes", bytes.len().into())]))
            }
        });
    // every attempt fails naming the object; after the retries it is an incident
    for _ in 0..20 {
        env.pf.work_until_idle().await.unwrap();
        if env.jobs().iter().any(|j| j.state == "incident") {
            break;
        }
        env.advance(Duration::from_secs(3600));
        env.pf.tick().await.unwrap();
    }
    let jobs = env.jobs();
    let incident = jobs
        .iter()
        .find(|j| j.element == "rechnungStellen")
        .expect("the invoice job is listed");
    assert_eq!(incident.state, "incident", "{incident:?}");
    assert!(incident.attempts > 1, "it was retried first: {incident:?}");
    let error = incident.error.as_deref().unwrap_or_default();
    assert!(
        error.contains(&format!("gs://{BUCKET}/A-2/protokoll.json does not exist")),
        "{error}"
    );
    let view = env.pf.reader().unwrap().instance(order).unwrap().unwrap();
    assert_eq!(view.waiting_at, ["rechnungStellen"]);
    assert_eq!(
        view.history.last().map(|h| h.event.as_str()),
        Some("incident")
    );

    // the provider uploads late; a retry repairs it
    gcs.put("A-2/protokoll.json", b"{\"positionen\": []}").await;
    env.pf
        .retry_job(incident.job.parse().unwrap())
        .await
        .unwrap();
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(env.state(order), "completed");
    let v = env.pf.reader().unwrap().instance(order).unwrap().unwrap();
    assert_eq!(v.variables["protokollBytes"], 18);
}
