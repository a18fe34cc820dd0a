//! `postfach demo`: the article's scenario through the real engine on an embedded
//! database. A simulated provider sends completions, some before the instance
//! reaches the catch event, some twice, one for an order already invoiced; one
//! order gets a second token through a repair, so its completion is ambiguous.
//!
//! Invariant: the summary is read back from the database and the invoice ledger,
//! never computed from what the simulator intended.

#[cfg(feature = "pubsub")]
mod pubsub;

use crate::reference::{InvoiceLedger, invoice_handler};
use crate::store::Counter;
use crate::{Error, Postfach, Publish, vars};
use clap::Args;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// The reference model, shipped with the binary.
pub const REFERENCE_BPMN: &str = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");

/// What the demo runs: how many orders, which share arrives early, how it is seeded.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Number of orders.
    #[arg(long, default_value_t = 1000)]
    pub orders: usize,
    /// Share of completions the provider sends before the order reached the catch event.
    #[arg(long, default_value_t = 0.30)]
    pub early: f64,
    /// Share of completions delivered twice.
    #[arg(long, default_value_t = 0.05)]
    pub duplicates: f64,
    /// Seed of the simulated provider.
    #[arg(long, default_value_t = 4711)]
    pub seed: u64,
    /// Run the scenario through Pub/Sub: the outbox publishes each order to topic
    /// `auftraege`, a simulated provider answers on `auftrag-abgeschlossen`, and
    /// postfach consumes `auftrag-abgeschlossen-sub`. Uses the emulator at
    /// $PUBSUB_EMULATOR_HOST, or starts one.
    #[arg(long)]
    pub pubsub: bool,
    /// With --pubsub, the article's claim check both ways: every tenth order
    /// (2,000 positions) leaves through the outbox as a Cloud Storage object and
    /// a lean message, and every completion protocol arrives as a Cloud Storage
    /// reference that the invoice handler reads. Uses the emulator at
    /// $STORAGE_EMULATOR_HOST, or starts fake-gcs-server (installed with
    /// `go install` on first use).
    #[arg(long, requires = "pubsub")]
    pub claim_check: bool,
    /// Keep the demo database at this path (a new file) to inspect it afterwards,
    /// e.g. `postfach --db PATH messages --parked`.
    #[arg(long, value_name = "PATH")]
    pub keep: Option<std::path::PathBuf>,
}

/// The seeded generator of the simulated provider (splitmix64), shared with the
/// comparison benchmark so both draw the same workload from the same seed.
pub struct Rng(pub u64);
impl Rng {
    /// The next pseudo-random number.
    pub fn next_u64(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

fn auftrag(i: usize) -> String {
    format!("A-{i:06}")
}

fn completion(i: usize, id: &str) -> Publish {
    Publish {
        name: "AuftragAbgeschlossen".into(),
        key: auftrag(i),
        message_id: Some(id.to_string()),
        variables: vars([
            ("erledigtePositionen", (1000 + i as u64 % 5000).into()),
            ("abschlussZeitpunkt", "2026-12-02T10:00:00Z".into()),
        ]),
        ..Default::default()
    }
}

/// Starts orders A-000000 … concurrently (they share group commits); returns
/// the instance of each order.
async fn start_orders(pf: &Postfach, n: usize) -> Result<Vec<u64>, Error> {
    start_orders_sized(pf, n, |_| 0).await
}

/// Starts `n` orders; order `i` carries `positions(i)` positions (none: no
/// `positionen` variable).
async fn start_orders_sized(
    pf: &Postfach,
    n: usize,
    positions: fn(usize) -> usize,
) -> Result<Vec<u64>, Error> {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        let pf = pf.clone();
        set.spawn(async move {
            let mut v = vars([("auftragId", auftrag(i).into())]);
            let count = positions(i);
            if count > 0 {
                let list: Vec<Value> = (0..count)
                    .map(|p| serde_json::json!({"position": p + 1, "artikel": format!("ART-{p:05}"), "menge": 1}))
                    .collect();
                v.insert("positionen".into(), Value::Array(list));
            }
            pf.start("auftrag-ausfuehrung", v, None)
                .await
                .map(|id| (i, id))
        });
    }
    let mut instances = vec![0u64; n];
    while let Some(r) = set.join_next().await {
        let (i, id) = r.map_err(|e| Error::Task(e.to_string()))??;
        instances[i] = id;
    }
    Ok(instances)
}

async fn publish_all(pf: &Postfach, msgs: Vec<Publish>) -> Result<usize, Error> {
    let mut set = tokio::task::JoinSet::new();
    let n = msgs.len();
    for m in msgs {
        let pf = pf.clone();
        set.spawn(async move { pf.publish(m).await });
    }
    while let Some(r) = set.join_next().await {
        r.map_err(|e| Error::Task(e.to_string()))??;
    }
    Ok(n)
}

fn progress(json: bool, text: &str) {
    if !json {
        eprintln!("  {text}");
    }
}

/// The demo database: `--keep PATH` (must be new) or a file in `dir`.
fn database_path(args: &DemoArgs, dir: &tempfile::TempDir) -> Result<std::path::PathBuf, Error> {
    Ok(match &args.keep {
        Some(p) if p.exists() => {
            return Err(Error::Store(crate::store::StoreError::Io(
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!("{} exists: --keep needs a new file", p.display()),
                ),
            )));
        }
        Some(p) => p.clone(),
        None => dir.path().join("demo.redb"),
    })
}

/// Runs the demo and returns the summary (JSON and text).
pub async fn run(args: &DemoArgs, json_out: bool) -> Result<crate::contract::Output, Error> {
    if args.pubsub {
        #[cfg(feature = "pubsub")]
        return pubsub::run(args, json_out).await;
        #[cfg(not(feature = "pubsub"))]
        return Err(Error::Task(
            "this postfach was built without the `pubsub` feature: rebuild with default features for demo --pubsub".into(),
        ));
    }
    let dir = tempfile::tempdir().map_err(|e| Error::Store(e.into()))?;
    let path = database_path(args, &dir)?;
    let pf = Postfach::open(&path)?;
    let started = Instant::now();
    let n = args.orders.max(2);
    let mut rng = Rng(args.seed);

    let ledger_path = dir.path().join("invoices.tsv");
    prepare(&pf, &ledger_path).await?;

    progress(json_out, &format!("starting {n} orders"));
    let instances = start_orders(&pf, n).await?;

    let early: Vec<bool> = (0..n).map(|_| rng.chance(args.early)).collect();
    let twice: Vec<bool> = (0..n).map(|_| rng.chance(args.duplicates)).collect();
    // the order the operator repairs, and the one whose completion comes again after invoicing
    let repaired = (0..n).find(|&i| !early[i]).unwrap_or(0);
    let late = (0..n).rev().find(|&i| i != repaired).unwrap_or(1);

    let first_wave = wave(&twice, |i| early[i] && i != repaired);
    progress(
        json_out,
        &format!(
            "provider: {} completions before their order waits",
            first_wave.len()
        ),
    );
    let mut published = publish_all(&pf, first_wave).await?;

    progress(json_out, "job executor: handing orders over");
    pf.work_until_idle().await?;

    let guard_refused = repair(&pf, instances[repaired], json_out, &auftrag(repaired)).await?;
    pf.work_until_idle().await?;

    let second_wave = wave(&twice, |i| !early[i] || i == repaired);
    progress(
        json_out,
        &format!(
            "provider: {} completions while orders wait",
            second_wave.len()
        ),
    );
    published += publish_all(&pf, second_wave).await?;
    progress(json_out, "job executor: issuing invoices");
    pf.work_until_idle().await?;
    progress(
        json_out,
        &format!(
            "provider: a second completion for {}, already invoiced",
            auftrag(late)
        ),
    );
    published += publish_all(
        &pf,
        vec![completion(late, &format!("nachtrag-{}", auftrag(late)))],
    )
    .await?;
    let elapsed = started.elapsed();
    let mut out = summary(
        &pf,
        n,
        published,
        &ledger_path,
        elapsed,
        guard_refused_row(guard_refused),
    )?;
    if out.json["parked"].get("ambiguous").is_some() {
        out.text.push_str(&format!(
            "\n  {} waits with two tokens after the forced repair; its completion is parked as\n  ambiguous instead of being guessed. {}\n",
            auftrag(repaired),
            match &args.keep {
                Some(p) => format!("Inspect it: postfach --db {} messages --parked", p.display()),
                None => "Keep the database with --keep PATH to inspect it.".to_string(),
            }
        ));
    }
    pf.close();
    Ok(out)
}

/// Deploys the reference process and registers its handlers: the invoice
/// ledger at `ledger_path` (keyed by the job's idempotency key, so a retry
/// never invoices twice) and the hand-over (an unbound send task waits as a
/// job for its worker: the simulated provider takes the order; its
/// completions are published by the demo).
async fn prepare(pf: &Postfach, ledger_path: &Path) -> Result<(), Error> {
    pf.deploy(
        "bpmn/auftrag-ausfuehrung.bpmn",
        REFERENCE_BPMN,
        [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into(),
    )
    .await?;
    let ledger = InvoiceLedger::open(ledger_path).map_err(|e| Error::Store(e.into()))?;
    pf.register_handler(
        "rechnungStellen",
        invoice_handler(ledger, std::time::Duration::ZERO),
    );
    pf.register_handler("auftragUebergeben", |_job: crate::JobContext| async move {
        Ok(crate::model::Vars::new())
    });
    Ok(())
}

/// The completions of the orders `pick` chooses, twice where `twice` says so.
fn wave(twice: &[bool], pick: impl Fn(usize) -> bool) -> Vec<Publish> {
    let mut out = Vec::new();
    for i in (0..twice.len()).filter(|&i| pick(i)) {
        out.push(completion(i, &format!("done-{}", auftrag(i))));
        if twice[i] {
            out.push(completion(i, &format!("done-{}", auftrag(i))));
        }
    }
    out
}

/// The article's repair: an operator adds a token to `instance` (order
/// `order`) before the async hand-over; the guard refuses, the operator forces
/// it anyway. Returns whether the guard refused.
async fn repair(pf: &Postfach, instance: u64, json_out: bool, order: &str) -> Result<bool, Error> {
    let guard = pf.add_token(instance, "auftragUebergeben", false).await;
    let guard_refused = matches!(&guard, Err(e) if e.is_rejection());
    let forced = pf.add_token(instance, "auftragUebergeben", true).await?;
    progress(
        json_out,
        &format!(
            "repair on {order}: guard {}; forced anyway, job(s) {:?} scheduled",
            if guard_refused {
                "refused the second token"
            } else {
                "did not refuse"
            },
            forced.jobs_created
        ),
    );
    Ok(guard_refused)
}

fn guard_refused_row(refused: bool) -> (&'static str, Value) {
    ("repair_guard_refused", json!(refused))
}

/// The summary, read back from the database and the invoice ledger. `extra` is
/// one more field of the JSON document.
fn summary(
    pf: &Postfach,
    n: usize,
    published: usize,
    ledger_path: &std::path::Path,
    elapsed: std::time::Duration,
    extra: (&str, Value),
) -> Result<crate::contract::Output, Error> {
    let r = pf.reader()?;
    let c = r.counters()?;
    let get = |k: Counter| c.get(k.name().as_ref()).copied().unwrap_or(0);
    let states = r.message_counts()?;
    let stored: u64 = states.values().sum();
    let duplicates = get(Counter::MessagesDuplicate);
    let lost = (published as u64).saturating_sub(stored + duplicates);
    let completed = r
        .instances(&crate::ops::InstanceFilter {
            state: Some("completed".into()),
            ..Default::default()
        })?
        .len();
    let mut issued: HashMap<String, u32> = HashMap::new();
    for (_, order) in InvoiceLedger::entries(ledger_path).map_err(|e| Error::Store(e.into()))? {
        *issued.entry(order).or_default() += 1;
    }
    let invoices: u32 = issued.values().sum();
    let twice_invoiced = issued.values().filter(|&&v| v > 1).count();
    let parked: serde_json::Map<String, Value> = crate::Reason::ALL
        .into_iter()
        .map(|r| {
            (
                r.as_str().to_string(),
                json!(get(Counter::MessagesParked(r))),
            )
        })
        .filter(|(_, v)| v.as_u64() != Some(0))
        .collect();
    let secs = elapsed.as_secs_f64().max(1e-9);
    let mut summary = json!({
        "orders": n,
        "completions_published": published,
        "correlated_directly": get(Counter::MessagesCorrelated),
        "correlated_from_buffer": get(Counter::MessagesCorrelatedFromBuffer),
        "duplicates_recognised": duplicates,
        "parked": parked,
        "orders_completed": completed,
        "invoices_issued": invoices,
        "orders_invoiced_twice": twice_invoiced,
        "messages_lost": lost,
        "elapsed_seconds": secs,
        "orders_per_second": n as f64 / secs,
        "messages_per_second": published as f64 / secs,
    });
    let parked_text = if parked.is_empty() {
        "none".to_string()
    } else {
        parked
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let rows = [
        ("orders", n.to_string()),
        ("completions published", published.to_string()),
        (
            "correlated directly",
            get(Counter::MessagesCorrelated).to_string(),
        ),
        (
            "waited in the buffer, then correlated",
            get(Counter::MessagesCorrelatedFromBuffer).to_string(),
        ),
        ("duplicates recognised", duplicates.to_string()),
        ("parked (visible, repairable)", parked_text),
        ("orders completed", completed.to_string()),
        (
            "invoices issued",
            format!("{invoices} ({twice_invoiced} orders invoiced twice)"),
        ),
        ("messages lost", lost.to_string()),
        ("elapsed", format!("{secs:.2} s")),
        (
            "throughput",
            format!(
                "{:.0} orders/s, {:.0} messages/s",
                n as f64 / secs,
                published as f64 / secs
            ),
        ),
    ];
    summary[extra.0] = extra.1;
    let mut text = String::from("\npostfach demo — auftrag-ausfuehrung\n");
    for (k, v) in rows {
        text.push_str(&format!("  {k:<40} {v}\n"));
    }
    Ok(crate::contract::Output {
        json: summary,
        text,
    })
}
