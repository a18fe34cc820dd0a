//! A Pub/Sub emulator per test, with a connection and small helpers to create
//! topics and subscriptions, publish, and pull what a topic received.
use super::server::Server;
use postfach::pubsub::{Connection, Emulator, SubscriptionOptions};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub const PROJECT: &str = "postfach-test";

pub struct Broker {
    pub emulator: Emulator,
    pub conn: Connection,
}

impl Broker {
    /// Starts an emulator; fails the test with the reason if it cannot.
    pub fn start() -> Broker {
        let emulator = Emulator::start().unwrap_or_else(|e| panic!("{e}"));
        let conn = Connection::emulator(&emulator.endpoint(), PROJECT);
        Broker { emulator, conn }
    }

    /// The completions topic with `sub` on it, and the topic `auftraege` that
    /// [`COMPLETIONS_CONFIG`] hands orders over to (nobody reads it here).
    pub async fn reference_topics(&self, sub: &str) {
        self.topic_with_subscription("auftrag-abgeschlossen", sub)
            .await;
        self.conn.ensure_topic("auftraege").await.unwrap();
    }

    /// Creates a topic and a subscription on it (10 s ack deadline).
    pub async fn topic_with_subscription(&self, topic: &str, sub: &str) {
        self.subscription(
            topic,
            sub,
            SubscriptionOptions {
                ack_deadline_seconds: 10,
                ..Default::default()
            },
        )
        .await;
    }

    pub async fn subscription(&self, topic: &str, sub: &str, options: SubscriptionOptions) {
        self.conn.ensure_topic(topic).await.unwrap();
        self.conn
            .ensure_subscription(sub, topic, options)
            .await
            .unwrap();
    }

    /// Publishes one message and waits for the broker's confirmation.
    pub async fn publish(&self, topic: &str, data: &str, attrs: &[(&str, &str)]) -> String {
        let p = self.conn.publisher(topic).await.unwrap();
        p.publish(message(data, attrs)).await.unwrap()
    }

    /// Pulls what arrives on `sub` until `quiet` passes without a new message
    /// (or `limit` passes); acks everything. Returns (data, attributes).
    pub async fn drain(
        &self,
        sub: &str,
        quiet: Duration,
        limit: Duration,
    ) -> Vec<(String, BTreeMap<String, String>)> {
        let client = self.conn.subscriber().await.unwrap();
        let mut stream = client.subscribe(self.conn.subscription_path(sub)).build();
        let mut out = Vec::new();
        let end = Instant::now() + limit;
        while Instant::now() < end {
            match tokio::time::timeout(quiet, stream.next()).await {
                Ok(Some(Ok((m, h)))) => {
                    out.push((
                        String::from_utf8_lossy(&m.data).to_string(),
                        m.attributes.into_iter().collect(),
                    ));
                    h.ack();
                }
                Ok(Some(Err(e))) => panic!("pull from {sub}: {e}"),
                Ok(None) | Err(_) => break,
            }
        }
        stream.shutdown_token().shutdown().await;
        out
    }
}

pub fn message(data: &str, attrs: &[(&str, &str)]) -> google_cloud_pubsub::model::Message {
    google_cloud_pubsub::model::Message::new()
        .set_data(data.as_bytes().to_vec())
        .set_attributes(attrs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

/// Waits until `what` holds (the broker delivers asynchronously); panics with
/// `description` after `limit`.
pub async fn eventually(description: &str, limit: Duration, mut what: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !what() {
        assert!(Instant::now() < end, "never happened: {description}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits (blocking) until `what` holds; panics with `description` after `limit`.
pub fn wait(description: &str, limit: Duration, mut what: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !what() {
        assert!(Instant::now() < end, "never happened: {description}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// postfach.toml consuming `auftrag-abgeschlossen-sub` (10 s lease extension,
/// so a killed consumer's deliveries come back soon).
pub const COMPLETIONS_CONFIG: &str = r#"
[send_topics]
auftragUebergeben = "auftraege"

[[subscriptions]]
subscription = "auftrag-abgeschlossen-sub"
message = "AuftragAbgeschlossen"
key = "/auftragId"
max_lease_extension = "10s"
"#;

/// What `postfach run` with [`COMPLETIONS_CONFIG`] deploys the reference model
/// with: the correlation key and the hand-over bound to `auftraege`. A test that
/// starts orders through the library before the server runs deploys with the
/// same, so both are one version.
pub fn reference_overrides() -> std::collections::BTreeMap<String, String> {
    [
        (super::MESSAGE.to_string(), "auftragId".to_string()),
        (
            postfach::model::send_topic_override("auftragUebergeben"),
            "auftraege".to_string(),
        ),
    ]
    .into()
}

/// `postfach run` in `dir` against the broker with `config` (written to
/// `dir/postfach.toml`) and extra environment, waited for until ready.
pub fn launch_with(
    dir: &std::path::Path,
    broker: &Broker,
    config: &str,
    env: &[(&str, &str)],
) -> Server {
    let path = dir.join("postfach.toml");
    std::fs::write(&path, config).unwrap();
    let mut all = vec![
        ("PUBSUB_EMULATOR_HOST", broker.emulator.host()),
        ("GOOGLE_CLOUD_PROJECT", PROJECT),
    ];
    all.extend_from_slice(env);
    let s = Server::launch(dir, &["--config".into(), path.display().to_string()], &all);
    wait("the server is ready", Duration::from_secs(30), || {
        s.call("GET", "/health/ready", None, None).0 == 200
    });
    s
}

/// postfach.toml of partition `PARTITION` of a cluster: it consumes its own
/// subscription `auftrag-abgeschlossen-PARTITION` (10 s lease extension).
const PARTITION_CONFIG: &str = r#"
[send_topics]
auftragUebergeben = "auftraege"

[[subscriptions]]
subscription = "auftrag-abgeschlossen-PARTITION"
message = "AuftragAbgeschlossen"
key = "/auftragId"
max_lease_extension = "10s"
"#;

/// Partition `i` of a cluster started with `count` partitions, in `dir`,
/// listening on `listen`, consuming its own subscription and handing what
/// is no longer its own on to `auftrag-abgeschlossen-{partition}`, invoicing
/// through `ledger` (the cluster's one invoice system: a job that ran on a
/// slot's old owner and runs again at the new one has the same idempotency
/// key); waited for until ready.
pub fn cluster_partition(
    dir: &std::path::Path,
    (i, count): (u64, u64),
    listen: &str,
    broker: &Broker,
    ledger: &std::path::Path,
) -> Server {
    let config = dir.join("postfach.toml");
    std::fs::write(
        &config,
        PARTITION_CONFIG.replace("PARTITION", &i.to_string()),
    )
    .unwrap();
    let s = Server::launch(
        dir,
        &[
            "--config".into(),
            config.display().to_string(),
            "--listen".into(),
            listen.into(),
            "--partitions".into(),
            count.to_string(),
            "--partition".into(),
            i.to_string(),
            "--forward-topic".into(),
            "auftrag-abgeschlossen-{partition}".into(),
            "--invoice-ledger".into(),
            ledger.display().to_string(),
        ],
        &[
            ("PUBSUB_EMULATOR_HOST", broker.emulator.host()),
            ("GOOGLE_CLOUD_PROJECT", PROJECT),
        ],
    );
    wait("the partition is ready", Duration::from_secs(60), || {
        s.call("GET", "/health/ready", None, None).0 == 200
    });
    s
}
