//! The `postfach` command line (see docs/cli.md): argument parsing, output in human
//! text or one JSON document, and exit codes 0 ok · 1 error · 2 usage · 3 rejection.
//!
//! Invariant: the command line is a thin edge over the library API; it holds no
//! engine logic and prints exactly one JSON document with `--json`.

use clap::{Args, Parser, Subcommand};
use postfach::clock::rfc3339;
pub use postfach::contract::Output;
use postfach::contract::{delivery_json, locked_job_json, repair_json};
use postfach::limits;
use postfach::ops::{InstanceFilter, MessageFilter};
use postfach::{Delivery, Error, Outcome, Postfach, Publish, Reason, Vars};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// postfach — an embedded BPMN runtime whose messages wait durably in the engine.
#[derive(Debug, Parser)]
#[command(name = "postfach", version, about, long_about = None)]
pub struct Cli {
    /// The redb database file.
    #[arg(
        long,
        global = true,
        env = "POSTFACH_DB",
        default_value = "postfach.redb"
    )]
    pub db: PathBuf,
    /// Print exactly one JSON document on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// Log lines as human text or as JSON (one object per line).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "human",
        env = "POSTFACH_LOG_FORMAT"
    )]
    pub log_format: LogFormat,
    /// Talk to a running `postfach run` at this URL instead of opening --db
    /// (bearer token from $POSTFACH_TOKEN).
    #[arg(long, global = true, env = "POSTFACH_SERVER", value_name = "URL", value_parser = parse_server_url)]
    pub server: Option<String>,
    /// With --server: how long to wait for the connection (1ms … 1d).
    #[arg(long, global = true, value_name = "DURATION", default_value = "10s", value_parser = parse_connect_timeout, env = "POSTFACH_CONNECT_TIMEOUT")]
    pub connect_timeout: u64,
    /// With --server: how long to wait for the server's answer once connected (1ms … 1d).
    #[arg(long, global = true, value_name = "DURATION", default_value = "120s", value_parser = parse_server_timeout, env = "POSTFACH_SERVER_TIMEOUT")]
    pub server_timeout: u64,
    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written (to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the reference scenario end to end on an embedded database and print a summary.
    ///
    /// Example: postfach demo --orders 1000
    Demo(postfach::demo::DemoArgs),
    /// Parse, validate and store a BPMN file as a new version.
    ///
    /// Example: postfach deploy bpmn/auftrag-ausfuehrung.bpmn --correlation-key AuftragAbgeschlossen=auftragId
    Deploy {
        /// The BPMN 2.0 XML file.
        file: PathBuf,
        /// Correlation key variable per message name: MESSAGE=VARIABLE (repeatable).
        #[arg(long = "correlation-key", value_name = "MESSAGE=VARIABLE")]
        correlation_key: Vec<String>,
        /// Bind a send task to a Pub/Sub topic (outbox): ELEMENT=TOPIC (repeatable).
        #[arg(long = "send-topic", value_name = "ELEMENT=TOPIC")]
        send_topic: Vec<String>,
        /// Refuse the model when something in it would not run as written
        /// (listeners, Java classes, mappings, skipped pools) instead of warning.
        #[arg(long)]
        strict: bool,
    },
    /// Start an instance of the latest version of a process.
    ///
    /// Example: postfach start auftrag-ausfuehrung --var auftragId=4711
    Start {
        process: String,
        #[command(flatten)]
        vars: VarArgs,
        #[arg(long)]
        business_key: Option<String>,
    },
    /// Publish a message (buffered path): correlated, buffered, duplicate or parked.
    ///
    /// Example: postfach publish AuftragAbgeschlossen --key 4711 --id evt-1 --ttl 24h --var erledigtePositionen=1200
    Publish {
        message: String,
        #[command(flatten)]
        target: MessageArgs,
        /// How long the message may wait for its subscription (30s, 15m, 24h, 7d; 0s = no buffering; at most 366d).
        #[arg(long, value_parser = parse_ttl)]
        ttl: Option<u64>,
    },
    /// Correlate synchronously: never buffers; exit 3 when no single subscription waits.
    ///
    /// Example: postfach correlate AuftragAbgeschlossen --key 4711
    Correlate {
        message: String,
        #[command(flatten)]
        target: MessageArgs,
    },
    /// Publish many messages: JSON lines on stdin, one outcome line on stdout per
    /// message as soon as it is durably accepted (messages are published concurrently).
    ///
    /// Example: postfach import < completions.jsonl
    /// (each line: {"name": "AuftragAbgeschlossen", "key": "4711", "id": "evt-1", "variables": {...}, "ttl": "24h"})
    Import {
        /// Messages in flight at once.
        #[arg(long, default_value_t = 256)]
        concurrency: usize,
    },
    /// Broadcast a signal to every waiting subscription (never buffered).
    ///
    /// Example: postfach signal Tarifwechsel --var tarif=2027
    Signal {
        name: String,
        #[command(flatten)]
        vars: VarArgs,
    },
    /// Show one instance with variables and history.
    ///
    /// Example: postfach instance 17
    Instance { id: u64 },
    /// List instances, e.g. those waiting at an element (oldest first); every
    /// filter given must hold.
    ///
    /// Example: postfach instances --waiting-at warteAufAbschluss
    ///
    /// Example: postfach instances --key A-4711
    Instances {
        #[arg(long)]
        waiting_at: Option<String>,
        /// active, incident, completed or cancelled
        #[arg(long, value_parser = ["active", "incident", "completed", "cancelled"])]
        state: Option<String>,
        /// Only instances of this process.
        #[arg(long)]
        process: Option<String>,
        /// Only instances that wait for, expect or caught a message with this correlation key.
        #[arg(long)]
        key: Option<String>,
        /// Only instances whose variable has this value (strings as is, others as JSON).
        #[arg(long, value_name = "NAME=VALUE", value_parser = parse_variable_filter)]
        variable: Option<(String, String)>,
        /// Started at or after this instant (RFC 3339).
        #[arg(long, value_parser = parse_instant)]
        started_from: Option<u64>,
        /// Started before this instant (RFC 3339).
        #[arg(long, value_parser = parse_instant)]
        started_before: Option<u64>,
        /// Only instances with an incident.
        #[arg(long)]
        incident: bool,
    },
    /// List buffered and parked messages.
    ///
    /// Example: postfach messages --parked --reason ambiguous
    Messages {
        #[arg(long)]
        buffered: bool,
        #[arg(long)]
        parked: bool,
        /// ambiguous, late, expired, malformed, no_subscription or unknown_message
        #[arg(long)]
        reason: Option<String>,
    },
    /// Evaluate a parked message again, like a new publish.
    ///
    /// Example: postfach requeue evt-1
    Requeue { message_id: String },
    /// End a parked message explicitly; the reason is recorded.
    ///
    /// Example: postfach discard evt-1 --why "test message from provider"
    Discard {
        message_id: String,
        #[arg(long)]
        why: String,
        /// Who discards it (recorded; default $USER).
        #[arg(long, env = "USER", default_value = "operator")]
        by: String,
    },
    /// Per element of a deployed process version: tokens waiting and the
    /// oldest wait, ready jobs, incidents, buffered and parked messages of the
    /// element's message (read-only).
    ///
    /// Example: postfach statistics auftrag-ausfuehrung --version 2
    Statistics {
        process: String,
        /// The definition version (default: the latest).
        #[arg(long)]
        version: Option<u32>,
    },
    /// List jobs, or only incidents.
    ///
    /// Example: postfach jobs --incidents
    Jobs {
        #[arg(long)]
        incidents: bool,
    },
    /// Make an incident runnable again.
    ///
    /// Example: postfach retry 42
    Retry { job_id: u64 },
    /// Read the claim-check object a job's variable refers to (Cloud Storage;
    /// locally through $STORAGE_EMULATOR_HOST or Google's default credentials).
    /// A missing object exits 4: fail the job so it is retried.
    ///
    /// Example: postfach object 42 protokoll --out protokoll.json --server http://127.0.0.1:7820
    Object {
        job_id: u64,
        /// The instance variable holding the reference.
        variable: String,
        /// Write the object here (default: its bytes on stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// List open user tasks (read-only); every filter given must hold.
    ///
    /// Example: postfach tasks --candidate-group sachbearbeitung --due-before 2026-12-31T00:00:00Z
    Tasks {
        /// Held by this user.
        #[arg(long)]
        assignee: Option<String>,
        /// This user may claim it.
        #[arg(long = "candidate-user")]
        candidate_user: Option<String>,
        /// Members of this group may claim it.
        #[arg(long = "candidate-group")]
        candidate_group: Option<String>,
        /// Of this process.
        #[arg(long)]
        process: Option<String>,
        /// At this element.
        #[arg(long)]
        element: Option<String>,
        /// Created before this instant (RFC 3339).
        #[arg(long = "created-before", value_parser = parse_instant)]
        created_before: Option<u64>,
        /// Due before this instant (RFC 3339).
        #[arg(long = "due-before", value_parser = parse_instant)]
        due_before: Option<u64>,
    },
    /// Act on a user task as a person: claim, unclaim, assign or complete it.
    ///
    /// Example: postfach task claim 7 --user anna
    Task {
        #[command(subcommand)]
        action: TaskCommand,
    },
    /// Complete a task job, optionally with variables. A worker passes the
    /// lease token it got from `acquire`; without one, an unlocked job is
    /// completed by hand.
    ///
    /// Example: postfach complete 42 --var rechnungNr=R-7
    Complete {
        job_id: u64,
        #[command(flatten)]
        vars: VarArgs,
        /// The lease token from `acquire` (external workers).
        #[arg(long)]
        lease_token: Option<u64>,
    },
    /// External worker: lock up to --max due jobs of a topic for a lease.
    ///
    /// Example: postfach acquire rechnungStellen --worker abrechnung-1 --max 20 --lease 10m
    Acquire {
        topic: String,
        /// Who holds the lease (shown in `jobs`).
        #[arg(long, value_parser = parse_worker)]
        worker: String,
        /// How many due jobs to lock (1 … 10,000).
        #[arg(long, default_value_t = 1, value_parser = parse_max)]
        max: usize,
        /// Lease duration (30s, 15m, ...; at most 7d); extend it with `extend`.
        #[arg(long, value_parser = parse_lease, default_value = "5m")]
        lease: u64,
        /// Only this variable in each job (repeatable; default: every variable).
        #[arg(long = "fetch-variable", value_name = "NAME", value_parser = parse_fetch)]
        fetch_variable: Vec<String>,
    },
    /// External worker: extend the lease of a job it holds.
    ///
    /// Example: postfach extend 42 --lease-token 7 --by 10m
    Extend {
        job_id: u64,
        #[arg(long)]
        lease_token: u64,
        /// How long the lease lasts from now (at most 7d).
        #[arg(long, value_parser = parse_lease_extension)]
        by: u64,
    },
    /// External worker: report a failed attempt; it retries with backoff, or
    /// after --retry-delay, until its attempts (or --retries left) are used up.
    ///
    /// Example: postfach fail 42 --lease-token 7 --error "invoice system down" --retries 3 --retry-delay 1m
    Fail {
        job_id: u64,
        #[arg(long)]
        lease_token: Option<u64>,
        #[arg(long)]
        error: String,
        /// Attempts left after this one (0: incident now).
        #[arg(long)]
        retries: Option<u32>,
        /// Delay before the next attempt (at most 366d).
        #[arg(long, value_parser = parse_retry_delay)]
        retry_delay: Option<u64>,
    },
    /// External worker: throw a BPMN error; an error boundary event on the task
    /// takes it, otherwise the job becomes an incident (exit 3).
    ///
    /// Example: postfach bpmn-error 42 --lease-token 7 --code POSITIONEN_FEHLEN --message "3 missing"
    BpmnError {
        job_id: u64,
        #[arg(long)]
        lease_token: Option<u64>,
        #[arg(long)]
        code: String,
        #[arg(long, default_value = "")]
        message: String,
        #[command(flatten)]
        vars: VarArgs,
    },
    /// Run the job executor in the foreground: async continuations, and with
    /// --invoice-ledger the reference invoice handler for `rechnungStellen`.
    /// Without --until-idle it runs until Ctrl-C or SIGTERM.
    ///
    /// Example: postfach work --until-idle --invoice-ledger invoices.tsv
    Work {
        /// Stop when no job is due instead of waiting for more.
        #[arg(long)]
        until_idle: bool,
        /// Issue invoices for `rechnungStellen` into this ledger file, once per
        /// idempotency key (a retry or a rerun after a crash does not invoice twice).
        #[arg(long, value_name = "PATH")]
        invoice_ledger: Option<PathBuf>,
        /// Let each invoice take this long after it is recorded (simulates a slow
        /// invoice system, e.g. to watch crash recovery).
        #[arg(long, value_parser = parse_configured, value_name = "DURATION")]
        invoice_delay: Option<u64>,
    },
    /// Standalone server: deploys the model, runs the job executor, the Pub/Sub
    /// consumers and outbox, and the HTTP admin API until SIGINT/SIGTERM (a
    /// second signal exits at once).
    ///
    /// Example: postfach run bpmn/auftrag-ausfuehrung.bpmn --config postfach.toml
    ///
    /// Example: postfach run bpmn/auftrag-ausfuehrung.bpmn --correlation-key AuftragAbgeschlossen=auftragId --subscription auftrag-abgeschlossen-sub --message AuftragAbgeschlossen --key-from /auftragId --send-topic auftragUebergeben=auftraege
    Run {
        /// The BPMN file to deploy (an unchanged file keeps its version).
        file: PathBuf,
        #[arg(long = "correlation-key", value_name = "MESSAGE=VARIABLE")]
        correlation_key: Vec<String>,
        /// Bind a send task to a Pub/Sub topic (outbox): ELEMENT=TOPIC (repeatable).
        #[arg(long = "send-topic", value_name = "ELEMENT=TOPIC")]
        send_topic: Vec<String>,
        /// Consume this Pub/Sub subscription (short name in the configured
        /// project, or projects/P/subscriptions/S); see also [[subscriptions]].
        #[arg(long, value_name = "SUBSCRIPTION", requires_all = ["message", "key_from"])]
        subscription: Option<String>,
        /// The BPMN message name of the subscription's deliveries.
        #[arg(long, value_name = "MESSAGE", requires = "subscription")]
        message: Option<String>,
        /// Where the correlation key comes from: /json/pointer or attribute:NAME.
        #[arg(long, value_name = "SOURCE", requires = "subscription")]
        key_from: Option<String>,
        /// Where the message id comes from (default attribute:eventId, falling
        /// back to Pub/Sub's message_id).
        #[arg(long, value_name = "SOURCE", requires = "subscription")]
        id_from: Option<String>,
        /// Buffer TTL of the subscription's messages.
        #[arg(long, value_name = "DURATION", requires = "subscription")]
        message_ttl: Option<String>,
        /// Streaming pulls opened on the subscription (1–32, default 8).
        #[arg(long, value_name = "N", requires = "subscription")]
        streams: Option<u32>,
        /// Address of the HTTP API.
        #[arg(long, default_value = "127.0.0.1:7820")]
        listen: std::net::SocketAddr,
        /// File holding the bearer token the API requires (or $POSTFACH_TOKEN).
        /// Required when listening on a non-loopback address.
        #[arg(long, value_name = "PATH")]
        token_file: Option<PathBuf>,
        /// Issue invoices for `rechnungStellen` into this ledger file.
        #[arg(long, value_name = "PATH")]
        invoice_ledger: Option<PathBuf>,
        /// postfach.toml: alarms, [pubsub], [[subscriptions]], [send_topics],
        /// [correlation_keys] (see README).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
        /// Run as one of P partitions of a cluster (1–1024); without it,
        /// unpartitioned.
        #[arg(long, value_name = "P")]
        partitions: Option<u64>,
        /// This process's partition number, 0 … P-1 (default: the number at
        /// the end of $HOSTNAME, as StatefulSet pods are named NAME-ORDINAL).
        #[arg(long, value_name = "I", requires = "partitions")]
        partition: Option<u64>,
    },
    /// Retention: remove completed instances and settled messages older than
    /// the retention period (31 days), in small batches. Parked and buffered
    /// messages, incidents and active instances are never touched.
    ///
    /// Example: postfach cleanup
    Cleanup,
    /// Check the database file page by page and inspect the write-ahead log; with
    /// --discard-damaged, repair them offline: keep a copy of the log, replay every
    /// intact record, drop the damaged ones, and let redb repair the file.
    ///
    /// Example: postfach recover --discard-damaged
    Recover {
        /// Rewrite a damaged log with its intact records (the original is kept
        /// beside it as LOG.damaged-MILLIS) and replay them.
        #[arg(long)]
        discard_damaged: bool,
    },
    /// Reclaim file space offline (stop `postfach run` first).
    ///
    /// Example: postfach compact
    Compact,
    /// Move a token to before an element (repair), guarded like add-token.
    ///
    /// Example: postfach move-token 17 2 warteAufAbschluss
    MoveToken {
        instance: u64,
        token: u64,
        element: String,
        #[arg(long)]
        force: bool,
    },
    /// Remove a token (repair); removing the last one cancels the instance.
    ///
    /// Example: postfach cancel-token 17 3
    CancelToken { instance: u64, token: u64 },
    /// Move a token on from its wait state (a receive task or catch event
    /// without an event definition), by token id or by the element it waits at.
    ///
    /// Example: postfach trigger 17 freigabeAbwarten --var freigegeben=true
    Trigger {
        instance: u64,
        /// The token id, or the element its one waiting token rests at.
        token: String,
        #[command(flatten)]
        vars: VarArgs,
    },
    /// Add a token before an element (repair). Refused when it would open a second
    /// subscription for an already subscribed message and key, unless --force.
    ///
    /// Example: postfach add-token 17 auftragUebergeben
    AddToken {
        instance: u64,
        element: String,
        #[arg(long)]
        force: bool,
    },
}

/// What `postfach task` does.
#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Take the task (refused while someone else holds it).
    ///
    /// Example: postfach task claim 7 --user anna
    Claim {
        task: u64,
        /// Who you are.
        #[arg(long, env = "USER", value_parser = parse_user)]
        user: String,
    },
    /// Give the task back (only its holder can).
    ///
    /// Example: postfach task unclaim 7 --user anna
    Unclaim {
        task: u64,
        /// Who you are.
        #[arg(long, env = "USER", value_parser = parse_user)]
        user: String,
    },
    /// Give the task to someone.
    ///
    /// Example: postfach task assign 7 --to ben --user lead
    Assign {
        task: u64,
        /// The new holder.
        #[arg(long, value_parser = parse_to)]
        to: String,
        /// Who you are.
        #[arg(long, env = "USER", value_parser = parse_user)]
        user: String,
    },
    /// Finish the task (as its holder, or anyone while nobody holds it).
    ///
    /// Example: postfach task complete 7 --user anna --var genehmigt=true
    Complete {
        task: u64,
        /// Who you are.
        #[arg(long, env = "USER", value_parser = parse_user)]
        user: String,
        #[command(flatten)]
        vars: VarArgs,
    },
}

#[derive(Debug, Args)]
pub struct VarArgs {
    /// Variable NAME=JSON (repeatable); a bare word that is not JSON is a string.
    #[arg(long = "var", value_name = "NAME=JSON")]
    pub var: Vec<String>,
}

#[derive(Debug, Args)]
pub struct MessageArgs {
    /// The correlation key.
    #[arg(long)]
    pub key: String,
    /// Business message id for deduplication (generated when absent).
    #[arg(long)]
    pub id: Option<String>,
    #[command(flatten)]
    pub vars: VarArgs,
}

/// A command-line failure with its exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
    /// Printed on stdout with --json (e.g. a rejected correlation).
    pub json: Option<Value>,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let message = match next_step(&e) {
            Some(step) => format!("{e}: {step}"),
            None => e.to_string(),
        };
        Failure {
            code: if e.is_rejection() { 3 } else { 1 },
            message,
            json: None,
        }
    }
}

/// What to do next, on the command line: the library's errors say only what
/// happened. Exhaustive, so a new kind of error is placed here deliberately.
fn next_step(e: &Error) -> Option<String> {
    use postfach::EngineError as E;
    match e {
        Error::Engine(engine) => match engine {
            E::Store(s) => store_step(s),
            E::UnknownProcess(_) => {
                Some("deploy its BPMN file first (postfach deploy FILE.bpmn)".into())
            }
            E::UnknownInstance(_) => Some("list instances with `postfach instances`".into()),
            E::NotTriggerable { instance, .. } => Some(format!(
                "see where its tokens wait with `postfach instance {instance}`"
            )),
            E::OtherPartition { owner, .. } => Some(format!(
                "send it to partition {owner}, or through the cluster's gateway, which routes by key and id"
            )),
            E::KeyNeeded { variable, .. } => Some(format!(
                "give the correlation key with --var {variable}=VALUE"
            )),
            E::MixedKeys { .. } => Some(
                "correlate every message of the process by the same variable, or run it unpartitioned".into(),
            ),
            E::UnknownJob(_) => Some("list jobs with `postfach jobs`".into()),
            E::UnknownMessageId(_) => Some("list messages with `postfach messages`".into()),
            E::UnknownToken { instance, .. } => Some(format!(
                "see its tokens with `postfach instance {instance}`"
            )),
            E::JobState { job, refusal } => match refusal {
                postfach::JobRefusal::LockedByWorker => {
                    Some("wait for the worker or its lease to expire".into())
                }
                postfach::JobRefusal::Incident => {
                    Some(format!("retry it first (postfach retry {job})"))
                }
                postfach::JobRefusal::Continuation => Some("run it with `postfach work`".into()),
                postfach::JobRefusal::NotAnIncident => Some("only incidents can be retried".into()),
                postfach::JobRefusal::NotATask => None,
            },
            E::RepairRefused { .. } => Some("pass --force to add it anyway".into()),
            E::NoSingleScope {
                instance,
                subprocess,
                active: 0,
                ..
            } => Some(format!(
                "start the subprocess first (postfach add-token {instance} {subprocess}; an event subprocess starts by its event), then place the token inside it"
            )),
            E::NoSingleScope { instance, .. } => Some(format!(
                "see its tokens with `postfach instance {instance}`: cancel the scopes you do not want first"
            )),
            E::UnknownTask(_) => Some("list open tasks with `postfach tasks`".into()),
            E::TaskRefused { task, refusal } => match refusal {
                postfach::TaskRefusal::HeldBy(u) => Some(format!(
                    "ask {u} to give it back (postfach task unclaim {task}), or have it assigned (postfach task assign {task} --to USER)"
                )),
                postfach::TaskRefusal::NotHolder(_) => {
                    Some(format!("claim it first (postfach task claim {task} --user USER)"))
                }
            },
            E::Parse(postfach::model::ParseError::Strict { .. }) => Some(
                "change the model, or deploy without --strict to run it with these parts not executed"
                    .into(),
            ),
            E::Parse(p) => {
                let missing = p.missing_keys();
                (!missing.is_empty()).then(|| {
                    let flags: Vec<String> = missing
                        .iter()
                        .map(|m| {
                            if m.chars()
                                .any(|c| c.is_whitespace() || "'\"$`\\".contains(c))
                            {
                                format!("--correlation-key '{}=VARIABLE'", m.replace('\'', "'\\''"))
                            } else {
                                format!("--correlation-key {m}=VARIABLE")
                            }
                        })
                        .collect();
                    format!(
                        "deploy with {} (or set [correlation_keys] in postfach.toml)",
                        flags.join(" ")
                    )
                })
            }
            E::NoStartEvent(_)
            | E::UnknownElement { .. }
            | E::StaleLease(_)
            | E::AmbiguousMessageId { .. }
            | E::NotParked { .. }
            | E::InstanceEnded(_) => None,
        },
        Error::Store(s) => store_step(s),
        Error::OutOfRange(_) | Error::Task(_) | Error::Rejected { .. } => None,
    }
}

/// What to do about a damaged database file.
pub const DAMAGED_ADVICE: &str = "stop every process that uses it, keep a copy of the file, and run `postfach recover` to check it; if it cannot be repaired, restore the file from a backup";

fn store_step(e: &postfach::StoreError) -> Option<String> {
    use postfach::StoreError as S;
    match e {
        S::Locked { .. } => Some(
            "talk to the server with --server http://127.0.0.1:7820 (or its --listen address), or stop it and retry".into(),
        ),
        S::LogDamaged { .. } => Some(
            "see what is intact with `postfach recover`; `postfach recover --discard-damaged` keeps a copy of the log and replays every intact record".into(),
        ),
        S::ReadOnly => Some("this command changes the database; run it where the file is writable".into()),
        S::Damaged { .. } => Some(DAMAGED_ADVICE.into()),
        S::OtherPartition { .. } => Some(
            "give each partition its own database file and start it with the partition number its file was created with (--partition, or the ordinal at the end of $HOSTNAME)".into(),
        ),
        S::NewerFormat { .. } => Some(
            "open it with the release that wrote it (or a newer one); a file is never converted back to an older format".into(),
        ),
        S::Open { .. } | S::Redb(_) | S::Codec(_) | S::Closed | S::Aborted(_) | S::Io(_) => None,
    }
}

/// `postfach recover`: describes the log; with `discard_damaged`, salvages it.
fn recover(db: &std::path::Path, discard_damaged: bool) -> Result<Output, Failure> {
    let state = Postfach::inspect_log(db)?;
    let mut check = Postfach::check_database(db)?;
    let mut repaired = false;
    if discard_damaged && matches!(check, postfach::FileCheck::Repairable(_)) {
        Postfach::repair_database(db)?;
        check = Postfach::check_database(db)?;
        repaired = true;
    }
    let (verdict, detail) = match &check {
        postfach::FileCheck::Intact => ("intact", None),
        postfach::FileCheck::Repairable(d) => ("repairable", Some(d.clone())),
        postfach::FileCheck::Damaged(d) => ("damaged", Some(d.clone())),
    };
    let database = json!({
        "file": db.display().to_string(),
        "check": verdict,
        "detail": detail,
        "repaired": repaired,
    });
    let db_text = match &check {
        postfach::FileCheck::Intact if repaired => format!(
            "{}: repaired (back to its last intact commit); every page's checksum holds now",
            db.display()
        ),
        postfach::FileCheck::Intact => {
            format!("{}: intact (every page's checksum holds)", db.display())
        }
        postfach::FileCheck::Repairable(d) => format!(
            "{}: damaged ({d}); `postfach recover --discard-damaged` repairs it by going back to its last intact commit (keep a copy of the file first)",
            db.display()
        ),
        postfach::FileCheck::Damaged(d) => format!(
            "{}: damaged beyond repair ({d}); restore the file from a backup",
            db.display()
        ),
    };
    if !matches!(check, postfach::FileCheck::Intact) {
        return Err(Failure {
            code: 1,
            message: db_text,
            json: Some(json!({ "database": database })),
        });
    }
    let described = json!({
        "database": database,
        "log": state.path.display().to_string(),
        "bytes": state.size,
        "intact_records": state.intact_records,
        "intact_until": state.intact_until,
        "damaged": state.damaged,
        "intact_after_damage": state.intact_after,
    });
    let text = if state.damaged {
        format!(
            "{}: damaged at byte {} of {}: {} intact record(s) before, {} after",
            state.path.display(),
            state.intact_until,
            state.size,
            state.intact_records,
            state.intact_after
        )
    } else if state.intact_until < state.size {
        format!(
            "{}: {} intact record(s), then a torn tail of {} byte(s) that the next open cuts",
            state.path.display(),
            state.intact_records,
            state.size - state.intact_until
        )
    } else {
        format!(
            "{}: intact ({} record(s) to replay)",
            state.path.display(),
            state.intact_records
        )
    };
    let text = format!("{db_text}\n{text}");
    if !state.damaged {
        return Ok(out(described, text));
    }
    if !discard_damaged {
        return Err(Failure {
            code: 1,
            message: format!(
                "{text}; keep a copy of the files, then run `postfach recover --discard-damaged` to replay every intact record"
            ),
            json: Some(described),
        });
    }
    let Some(s) = Postfach::recover_damaged_log(db, postfach::Options::default())? else {
        return Ok(out(described, text));
    };
    let missing = s
        .missing_batches
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    Ok(out(
        json!({
            "log": state.path.display().to_string(),
            "backup": s.backup.display().to_string(),
            "kept_records": s.kept,
            "damaged_at": s.damaged_at,
            "missing_batches": s.missing_batches,
        }),
        format!(
            "{text}\nkept a copy as {}; replayed {} intact record(s); lost batches: {}",
            s.backup.display(),
            s.kept,
            if missing.is_empty() {
                "none".into()
            } else {
                missing
            }
        ),
    ))
}

impl From<postfach::StoreError> for Failure {
    fn from(e: postfach::StoreError) -> Self {
        Error::from(e).into()
    }
}

fn usage(message: String) -> Failure {
    Failure {
        code: 2,
        message,
        json: None,
    }
}

/// `NAME=VALUE` of `instances --variable`.
fn parse_variable_filter(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((n, v)) if !n.trim().is_empty() => Ok((n.trim().to_string(), v.to_string())),
        _ => Err(format!("{s:?}: expected NAME=VALUE")),
    }
}

// Durations of the command line, each parsed within its documented range.
/// An RFC 3339 instant as milliseconds since the epoch.
fn parse_instant(s: &str) -> Result<u64, String> {
    postfach::model::iso::instant(s)
}

fn parse_ttl(s: &str) -> Result<u64, String> {
    limits::MESSAGE_TTL.named("--ttl").parse(s)
}
fn parse_lease(s: &str) -> Result<u64, String> {
    limits::LEASE.named("--lease").parse(s)
}
fn parse_lease_extension(s: &str) -> Result<u64, String> {
    limits::LEASE_EXTENSION.named("--by").parse(s)
}
fn parse_retry_delay(s: &str) -> Result<u64, String> {
    limits::RETRY_DELAY.named("--retry-delay").parse(s)
}
/// A name given to `flag` ([`limits::check_name`]).
fn name_of(flag: &str, s: &str) -> Result<String, String> {
    limits::check_name(flag, s)
        .map(String::from)
        .map_err(|e| e.to_string())
}
fn parse_worker(s: &str) -> Result<String, String> {
    name_of("--worker", s)
}
fn parse_fetch(s: &str) -> Result<String, String> {
    name_of("--fetch-variable", s)
}
fn parse_user(s: &str) -> Result<String, String> {
    name_of("--user", s)
}
fn parse_to(s: &str) -> Result<String, String> {
    name_of("--to", s)
}
fn parse_max(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("--max '{s}' is not a whole number"))?;
    limits::check_count("--max", n, limits::LOCK_BATCH).map_err(|e| e.to_string())
}
fn parse_connect_timeout(s: &str) -> Result<u64, String> {
    limits::CLIENT_TIMEOUT.named("--connect-timeout").parse(s)
}
fn parse_server_timeout(s: &str) -> Result<u64, String> {
    limits::CLIENT_TIMEOUT.named("--server-timeout").parse(s)
}

/// `--server`: an http or https URL with a host, a port (if any) that fits
/// 1 … 65535, and no query or fragment; returned without a trailing `/`.
fn parse_server_url(s: &str) -> Result<String, String> {
    let bad =
        |why: &str| format!("'{s}' is not a server URL: {why} (example: http://127.0.0.1:7820)");
    let uri: ureq::http::Uri = s.parse().map_err(|e| bad(&format!("{e}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return Err(bad(&format!("scheme '{other}' is not http or https"))),
        None => return Err(bad("it has no http:// or https://")),
    }
    let Some(authority) = uri.authority() else {
        return Err(bad("it names no host"));
    };
    if authority.host().is_empty() {
        return Err(bad("it names no host"));
    }
    if authority.as_str().contains('@') {
        return Err(bad(
            "user information does not belong in it; set $POSTFACH_TOKEN",
        ));
    }
    // the text after the host's last ':' (outside an IPv6 address's brackets)
    let after_host = authority.as_str().rsplit(']').next().unwrap_or_default();
    if let Some((_, port)) = after_host.rsplit_once(':') {
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(bad(&format!("port '{port}' is outside 1 … 65535"))),
        }
    }
    if uri.query().is_some() || s.contains('#') {
        return Err(bad("a query or fragment does not belong in it"));
    }
    Ok(s.trim_end_matches('/').to_string())
}

fn parse_configured(s: &str) -> Result<u64, String> {
    limits::CONFIGURED.parse(s)
}

/// A `--var` value: JSON objects, arrays, quoted strings, `true`, `false` and
/// `null` are parsed as JSON; any other word, numbers included, is a string
/// (`auftragId=4711` → `"4711"`, as business keys are). Conditions compare a
/// numeric string with a number numerically.
pub fn parse_value(v: &str) -> Value {
    let t = v.trim_start();
    let json_like = t.starts_with(['{', '[', '"']) || matches!(v, "true" | "false" | "null");
    if json_like && let Ok(parsed) = serde_json::from_str::<Value>(v) {
        return parsed;
    }
    Value::String(v.to_string())
}

/// Parses `NAME=VALUE` pairs with [`parse_value`].
pub fn parse_vars(pairs: &[String]) -> Result<Vars, String> {
    let mut out = Vars::new();
    for p in pairs {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| format!("--var '{p}' must look like NAME=VALUE"))?;
        if k.trim().is_empty() {
            return Err(format!("--var '{p}' has no name"));
        }
        limits::check_name("--var", k).map_err(|e| e.to_string())?;
        let value = parse_value(v);
        out.insert(k.to_string(), value);
    }
    Ok(out)
}

fn delivery_text(d: &Delivery) -> String {
    let mut s = format!("{} {}", d.message_id, d.outcome.as_str());
    if let (Some(i), Some(e)) = (d.instance, &d.element) {
        s.push_str(&format!(" → instance {i} at {e}"));
    }
    if let Some(r) = d.reason {
        s.push_str(&format!(" (reason: {})", r.as_str()));
    }
    if !d.candidates.is_empty() {
        s.push_str(&format!(
            " candidates: {}",
            d.candidates
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(x) = d.expires_at {
        s.push_str(&format!(" until {}", rfc3339(x)));
    }
    s
}

fn out(json: Value, text: impl Into<String>) -> Output {
    Output {
        json,
        text: text.into(),
    }
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> Result<Output, Failure> {
    if let Command::Demo(args) = &cli.command {
        return postfach::demo::run(args, cli.json)
            .await
            .map_err(Failure::from);
    }
    if let Command::Recover { discard_damaged } = &cli.command {
        if cli.server.is_some() {
            return Err(usage(
                "recover works on the files offline; stop the server and drop --server".into(),
            ));
        }
        return recover(&cli.db, *discard_damaged);
    }
    if let Command::Compact = &cli.command {
        if cli.server.is_some() {
            return Err(usage(
                "compact works on the file offline; stop the server and drop --server".into(),
            ));
        }
        let (before, after) = Postfach::compact(&cli.db)?;
        return Ok(out(
            json!({"bytes_before": before, "bytes_after": after}),
            format!("{}: {before} bytes → {after} bytes", cli.db.display()),
        ));
    }
    if let Command::Object {
        job_id,
        variable,
        out,
    } = &cli.command
    {
        let bytes = match &cli.server {
            Some(_) => object_from_server(client_of(&cli), *job_id, variable).await?,
            None => object_from_store(&cli.db, *job_id, variable).await?,
        };
        return deliver_object(bytes, out.as_deref());
    }
    if cli.server.is_some() {
        // what the shell passed, as sent: a path that is not UTF-8 travels
        // lossily (the server names files by their display form), never panics
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        let client = client_of(&cli);
        return tokio::task::spawn_blocking(move || remote(&client, args))
            .await
            .map_err(|e| Failure {
                code: 1,
                message: e.to_string(),
                json: None,
            })?;
    }
    let mut options = postfach::Options::default();
    if let Command::Run {
        listen,
        token_file,
        partitions,
        partition,
        config,
        ..
    } = &cli.command
    {
        // refused before anything is written: no database file, no deploy
        let token = server_token(token_file.as_deref())?;
        check_exposure(*listen, token.as_deref())?;
        options.partition = partition_of(*partitions, *partition)?;
        // the server decides whether parked messages leave events; the
        // database keeps the setting for the commands run between servers
        let notifications = run_config(config.as_deref())?.notifications;
        options.parked_events = Some(notifications.parked_events());
    }
    if let Some(ms) = std::env::var("POSTFACH_CHECKPOINT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        options.checkpoint_every = std::time::Duration::from_millis(ms);
    }
    // looking needs no writing: on a full disk or a read-only file system too
    let looks_only = matches!(
        cli.command,
        Command::Instance { .. }
            | Command::Instances { .. }
            | Command::Messages { .. }
            | Command::Jobs { .. }
            | Command::Statistics { .. }
            | Command::Tasks { .. }
    );
    let pf = if looks_only {
        Postfach::open_read_only(&cli.db, options)?
    } else {
        Postfach::open_with(&cli.db, options)?
    };
    let result = execute(&pf, cli.command, Sources::Local).await;
    pf.close();
    result
}

/// `[tracing] otlp_endpoint` of the configuration `run` was given, for the
/// exporter set up before anything runs (a file that does not parse is
/// reported by `run` itself, naming the field).
#[cfg(feature = "otlp")]
pub fn otlp_endpoint(cli: &Cli) -> Option<String> {
    let Command::Run {
        config: Some(p), ..
    } = &cli.command
    else {
        return None;
    };
    run_config(Some(p)).ok()?.tracing.otlp_endpoint
}

/// The configuration file `run --config` names (the defaults without one),
/// read within its size cap and checked; errors name the file and field.
fn run_config(
    path: Option<&std::path::Path>,
) -> Result<postfach::server::config::ConfigFile, Failure> {
    match path {
        Some(p) => postfach::server::config::ConfigFile::parse(
            &p.display().to_string(),
            &read_bounded(p, MAX_CONFIG, "configuration file")?,
        )
        .map_err(usage),
        None => Ok(Default::default()),
    }
}

/// Whether the command runs long enough to export traces: the server and a
/// foreground worker.
#[cfg(feature = "otlp")]
pub fn traces_wanted(cli: &Cli) -> bool {
    matches!(cli.command, Command::Run { .. } | Command::Work { .. })
}

/// The partition `run --partitions P [--partition I]` asks for: I given, or
/// the ordinal at the end of `$HOSTNAME`.
fn partition_of(
    partitions: Option<u64>,
    partition: Option<u64>,
) -> Result<Option<postfach::partition::Partition>, Failure> {
    let Some(count) = partitions else {
        return Ok(None);
    };
    let index = match partition {
        Some(i) => i,
        None => {
            let host = std::env::var("HOSTNAME").unwrap_or_default();
            ordinal_of(&host).ok_or_else(|| {
                usage(format!(
                    "--partitions {count} needs --partition I, or a $HOSTNAME that ends in the partition number (NAME-ORDINAL); $HOSTNAME is '{host}'"
                ))
            })?
        }
    };
    postfach::partition::Partition::new(index, count)
        .map(Some)
        .map_err(|e| usage(format!("--partitions {count} --partition {index}: {e}")))
}

/// The number after the last `-` of a StatefulSet pod's name (`postfach-3` → 3).
fn ordinal_of(host: &str) -> Option<u64> {
    let (_, n) = host.rsplit_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

async fn execute(pf: &Postfach, command: Command, sources: Sources<'_>) -> Result<Output, Failure> {
    Ok(match command {
        Command::Demo(_) => unreachable!("handled before the database is opened"),
        Command::Object { .. } => unreachable!("handled before the database is opened"),
        Command::Run {
            file,
            correlation_key,
            send_topic,
            subscription,
            message,
            key_from,
            id_from,
            message_ttl,
            streams,
            listen,
            token_file,
            invoice_ledger,
            config,
            partitions: _,
            partition: _,
        } => {
            let mut config = run_config(config.as_deref())?;
            config
                .correlation_keys
                .extend(correlation_keys(&correlation_key)?);
            config.send_topics.extend(send_topics(&send_topic)?);
            if let (Some(sub), Some(message), Some(key)) = (subscription, message, key_from) {
                let mut s = postfach::ingress::SubscriptionConfig::new(&sub, &message, &key);
                if let Some(id) = id_from {
                    s.message_id = id;
                }
                s.ttl = message_ttl;
                if let Some(n) = streams {
                    s.streams = n;
                }
                s.compile().map_err(usage)?;
                config.subscriptions.push(s);
            }
            return serve(pf, file, listen, token_file, invoice_ledger, config).await;
        }
        Command::Deploy {
            file,
            correlation_key,
            send_topic,
            strict,
        } => {
            let mut keys = correlation_keys(&correlation_key)?;
            for (element, topic) in send_topics(&send_topic)? {
                keys.insert(postfach::model::send_topic_override(&element), topic);
            }
            let xml = sources.read(&file)?;
            let name = file.display().to_string();
            let deployment = pf.deploy_checked(&name, &xml, keys, strict).await?;
            let text = deployment
                .deployed
                .iter()
                .map(|d| {
                    format!(
                        "{} version {}{}",
                        d.process,
                        d.version,
                        if d.new_version { "" } else { " (unchanged)" }
                    )
                })
                .chain(deployment.warnings.iter().map(|w| {
                    format!(
                        "warning: {name}:{}: '{}': {} (--strict refuses this)",
                        w.line, w.id, w.message
                    )
                }))
                .collect::<Vec<_>>()
                .join("\n");
            out(postfach::contract::deployment_json(&deployment), text)
        }
        Command::Start {
            process,
            vars,
            business_key,
        } => {
            let v = parse_vars(&vars.var).map_err(usage)?;
            let id = pf.start(&process, v, business_key).await?;
            out(
                json!({"instance": id.to_string()}),
                format!("started instance {id}"),
            )
        }
        Command::Publish {
            message,
            target,
            ttl,
        } => {
            let d = pf.publish(to_publish(message, target, ttl)?).await?;
            out(delivery_json(&d), delivery_text(&d))
        }
        Command::Correlate { message, target } => {
            let p = to_publish(message, target, None)?;
            let id = p.message_id.clone().unwrap_or_default();
            match pf.correlate(p).await {
                Ok(d) => out(delivery_json(&d), delivery_text(&d)),
                Err(Error::Rejected {
                    name,
                    key,
                    reason,
                    candidates,
                }) => {
                    let d = Delivery {
                        outcome: Outcome::Rejected,
                        message_id: id,
                        instance: None,
                        element: None,
                        reason: Reason::parse(reason),
                        candidates: candidates.clone(),
                        candidate_elements: Vec::new(),
                        expires_at: None,
                    };
                    let e = Error::Rejected {
                        name,
                        key,
                        reason,
                        candidates,
                    };
                    return Err(Failure {
                        code: 3,
                        message: e.to_string(),
                        json: Some(delivery_json(&d)),
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
        Command::Import { concurrency } => import(pf, concurrency.max(1)).await?,
        Command::Compact | Command::Recover { .. } => {
            unreachable!("handled before the database is opened")
        }
        Command::Cleanup => {
            let (mut instances, mut messages) = (0, 0);
            loop {
                let (i, m, more) = pf.cleanup(1000).await?;
                instances += i;
                messages += m;
                if !more {
                    break;
                }
            }
            out(
                json!({"instances_removed": instances, "messages_removed": messages}),
                format!(
                    "removed {instances} completed instance(s) and {messages} settled message(s) past retention"
                ),
            )
        }
        Command::Signal { name, vars } => {
            let n = pf
                .signal(&name, parse_vars(&vars.var).map_err(usage)?)
                .await?;
            let text = if n == 0 {
                format!("signal {name} reached no subscription (counted as signals_unreached)")
            } else {
                format!("signal {name} reached {n} subscription(s)")
            };
            out(json!({"signal": name, "reached": n}), text)
        }
        Command::Instance { id } => {
            let v = pf
                .reader()?
                .instance(id)?
                .ok_or_else(|| Error::from(postfach::EngineError::UnknownInstance(id)))?;
            let mut text = format!(
                "instance {} of {} v{}: {}\nwaiting at: {}\nvariables: {}\n",
                v.instance,
                v.process,
                v.version,
                v.state,
                v.waiting_at.join(", "),
                serde_json::to_string(&v.variables).unwrap_or_default()
            );
            for i in &v.incidents {
                text.push_str(&format!("incident: {i}\n"));
            }
            if !v.tokens.is_empty() {
                text.push_str("tokens (for add-token, move-token, cancel-token):\n");
            }
            for t in &v.tokens {
                let mut place = t.scope.map(|s| format!("in scope {s}")).unwrap_or_default();
                if !t.locals.is_empty() {
                    let locals = serde_json::to_string(&t.locals).unwrap_or_default();
                    place = format!("{place}; local {locals}");
                }
                let place = if place.is_empty() {
                    String::new()
                } else {
                    format!("  ({place})")
                };
                text.push_str(&format!(
                    "  {:>4}  {:<24} waits for {}{place}\n",
                    t.token, t.element, t.waits_for
                ));
            }
            text.push_str("history:\n");
            for h in &v.history {
                text.push_str(&format!("  {}  {:<24} {}\n", h.at, h.element, h.event));
            }
            out(
                serde_json::to_value(&v).unwrap_or(Value::Null),
                text.trim_end().to_string(),
            )
        }
        Command::Instances {
            waiting_at,
            state,
            process,
            key,
            variable,
            started_from,
            started_before,
            incident,
        } => {
            let r = pf.reader()?;
            let list = r.instances(&InstanceFilter {
                waiting_at: waiting_at.clone(),
                state,
                process,
                key,
                variable,
                started_from,
                started_before,
                has_incident: incident.then_some(true),
            })?;
            let mut text = String::new();
            if let Some(el) = &waiting_at {
                // the same filtered instances as --json, oldest wait first
                let listed: std::collections::HashSet<&str> =
                    list.iter().map(|v| v.instance.as_str()).collect();
                for w in r
                    .waiting_at(el)?
                    .into_iter()
                    .filter(|w| listed.contains(w.instance.as_str()))
                {
                    text.push_str(&format!(
                        "{:>8}  waiting at {} since {} ({})\n",
                        w.instance,
                        w.element,
                        w.since,
                        age(w.age_ms)
                    ));
                }
            } else {
                for v in &list {
                    text.push_str(&format!(
                        "{:>8}  {:<10} {} at {}\n",
                        v.instance,
                        v.state,
                        v.process,
                        v.waiting_at.join(", ")
                    ));
                }
            }
            if text.is_empty() {
                text = "no instances".into();
            }
            out(json!({"instances": list}), text.trim_end().to_string())
        }
        Command::Messages {
            buffered,
            parked,
            reason,
        } => {
            let reason = match reason {
                Some(r) => {
                    Some(Reason::parse_or_list(&r).map_err(|e| usage(format!("--reason: {e}")))?)
                }
                None => None,
            };
            let list = pf.reader()?.messages(&MessageFilter {
                buffered,
                parked,
                reason,
            })?;
            let mut text = String::new();
            for m in &list {
                text.push_str(&format!(
                    "{:<20} {:<22} key={:<12} {:<8} {}{}\n",
                    m.message_id,
                    m.name,
                    m.key,
                    m.state,
                    m.reason.unwrap_or(""),
                    if m.candidates.is_empty() {
                        String::new()
                    } else {
                        format!(" candidates: {}", m.candidates.join(", "))
                    }
                ));
            }
            if text.is_empty() {
                text = "no buffered or parked messages".into();
            }
            out(json!({"messages": list}), text.trim_end().to_string())
        }
        Command::Requeue { message_id } => {
            let d = pf.requeue(&message_id).await?;
            out(delivery_json(&d), delivery_text(&d))
        }
        Command::Discard {
            message_id,
            why,
            by,
        } => {
            pf.discard(&message_id, &by, &why).await?;
            out(
                json!({"message_id": message_id, "state": "discarded", "why": why, "by": by}),
                format!("{message_id} discarded by {by}: {why}"),
            )
        }
        Command::Tasks {
            assignee,
            candidate_user,
            candidate_group,
            process,
            element,
            created_before,
            due_before,
        } => {
            let filter = postfach::ops::TaskFilter {
                assignee,
                candidate_user,
                candidate_group,
                process,
                element,
                created_before,
                due_before,
            };
            let list = pf.reader()?.tasks(&filter)?;
            let text = list
                .iter()
                .map(|t| {
                    format!(
                        "{:>8}  instance {:<8} {:<22} {}{}{}",
                        t.task,
                        t.instance,
                        t.element,
                        t.assignee
                            .as_ref()
                            .map(|a| format!("held by {a}"))
                            .unwrap_or_else(|| "open".into()),
                        t.due
                            .as_ref()
                            .map(|d| format!(" due {d}"))
                            .unwrap_or_default(),
                        if t.candidate_groups.is_empty() {
                            String::new()
                        } else {
                            format!(" groups {}", t.candidate_groups.join(","))
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            let text = if text.is_empty() {
                "no open tasks".to_string()
            } else {
                text
            };
            out(json!({"tasks": list}), text)
        }
        Command::Task { action } => {
            let (task, verb) = match action {
                TaskCommand::Claim { task, user } => {
                    pf.claim_task(task, &user).await?;
                    (task, format!("claimed by {user}"))
                }
                TaskCommand::Unclaim { task, user } => {
                    pf.unclaim_task(task, &user).await?;
                    (task, format!("given back by {user}"))
                }
                TaskCommand::Assign { task, to, user } => {
                    pf.assign_task(task, &to, &user).await?;
                    (task, format!("assigned to {to} by {user}"))
                }
                TaskCommand::Complete { task, user, vars } => {
                    let vars = parse_vars(&vars.var).map_err(usage)?;
                    pf.complete_task(task, &user, vars).await?;
                    (task, format!("completed by {user}"))
                }
            };
            out(
                json!({"task": task.to_string(), "done": verb}),
                format!("task {task} {verb}"),
            )
        }
        Command::Statistics { process, version } => {
            let Some(st) = pf.reader()?.statistics(&process, version)? else {
                return Err(Failure {
                    code: 1,
                    message: match version {
                        Some(v) => format!(
                            "process '{process}' has no deployed version {v}: see `postfach deploy`"
                        ),
                        None => {
                            format!("process '{process}' is not deployed: see `postfach deploy`")
                        }
                    },
                    json: None,
                });
            };
            let mut text = format!(
                "{} version {} (latest {})\n",
                st.process, st.version, st.latest_version
            );
            for e in &st.elements {
                let mut parts = Vec::new();
                if e.waiting > 0 {
                    parts.push(format!(
                        "{} waiting (oldest {})",
                        e.waiting,
                        e.oldest_wait_ms
                            .map(postfach::limits::human)
                            .unwrap_or_default()
                    ));
                }
                if e.jobs_ready > 0 {
                    parts.push(format!("{} jobs ready", e.jobs_ready));
                }
                if e.incidents > 0 {
                    parts.push(format!("{} incidents", e.incidents));
                }
                if let Some(m) = &e.message {
                    let parked: u64 = e.parked.values().sum();
                    parts.push(format!(
                        "message {m}: {} buffered, {parked} parked",
                        e.buffered
                    ));
                }
                let figures = if parts.is_empty() {
                    "-".to_string()
                } else {
                    parts.join(", ")
                };
                text.push_str(&format!("  {:<24} {:<20} {figures}\n", e.element, e.kind));
            }
            out(json!(st), text.trim_end().to_string())
        }
        Command::Jobs { incidents } => {
            let list = pf.reader()?.jobs(incidents)?;
            let mut text = String::new();
            for j in &list {
                text.push_str(&format!(
                    "{:>8}  instance {:<8} {:<22} {:<18} {:<8} attempts={}{}\n",
                    j.job,
                    j.instance.as_deref().unwrap_or("-"),
                    j.element,
                    j.kind,
                    j.state,
                    j.attempts,
                    j.error
                        .as_ref()
                        .map(|e| format!(" error: {e}"))
                        .unwrap_or_default()
                ));
            }
            if text.is_empty() {
                text = if incidents {
                    "no incidents".into()
                } else {
                    "no jobs".into()
                };
            }
            out(json!({"jobs": list}), text.trim_end().to_string())
        }
        Command::Retry { job_id } => {
            // inside a server (--server) its executor may take the job at once
            let wait = match sources {
                Sources::Local => std::time::Duration::ZERO,
                Sources::Sent(_) => std::time::Duration::from_secs(2),
            };
            let v = postfach::contract::retried(pf, job_id, wait).await?;
            let text = format!(
                "job {job_id} retried: {}",
                v["next"].as_str().unwrap_or_default()
            );
            out(v, text)
        }
        Command::Acquire {
            topic,
            worker,
            max,
            lease,
            fetch_variable,
        } => {
            let jobs = if fetch_variable.is_empty() {
                pf.lock_jobs(&topic, max, &worker, lease).await?
            } else {
                pf.lock_jobs_fetching(&topic, max, &worker, lease, fetch_variable)
                    .await?
            };
            let list: Vec<Value> = jobs.iter().map(locked_job_json).collect();
            let text = if jobs.is_empty() {
                format!("no due job on topic {topic}")
            } else {
                jobs.iter()
                    .map(|j| {
                        format!(
                            "job {} (instance {}, {}) lease token {} key {}",
                            j.task.job,
                            j.task.instance,
                            j.task.element,
                            j.lease_token,
                            j.task.idempotency_key
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            out(json!({"jobs": list}), text)
        }
        Command::Extend {
            job_id,
            lease_token,
            by,
        } => {
            let until = pf.extend_lease(job_id, lease_token, by).await?;
            out(
                json!({"job": job_id.to_string(), "lease_until": rfc3339(until)}),
                format!("job {job_id} leased until {}", rfc3339(until)),
            )
        }
        Command::Fail {
            job_id,
            lease_token,
            error,
            retries,
            retry_delay,
        } => {
            let state = pf
                .fail_job_with(job_id, lease_token, &error, retries, retry_delay)
                .await?;
            let s = match state {
                postfach::JobState::Incident => "incident",
                _ => "ready",
            };
            out(
                json!({"job": job_id.to_string(), "state": s}),
                format!("job {job_id}: attempt recorded, now {s}"),
            )
        }
        Command::BpmnError {
            job_id,
            lease_token,
            code,
            message,
            vars,
        } => {
            let vars = parse_vars(&vars.var).map_err(usage)?;
            if !pf
                .throw_error(job_id, lease_token, &code, &message, vars)
                .await?
            {
                return Err(Failure {
                    code: 3,
                    message: format!(
                        "BPMN error '{code}' of job {job_id} is not caught by an error boundary event: the job is an incident"
                    ),
                    json: Some(
                        json!({"job": job_id.to_string(), "caught": false, "state": "incident"}),
                    ),
                });
            }
            out(
                json!({"job": job_id.to_string(), "caught": true}),
                format!("BPMN error '{code}' caught by the task's error boundary event"),
            )
        }
        Command::Complete {
            job_id,
            vars,
            lease_token,
        } => {
            pf.complete_job(job_id, lease_token, parse_vars(&vars.var).map_err(usage)?)
                .await?;
            out(
                json!({"job": job_id.to_string(), "state": "completed"}),
                format!("job {job_id} completed"),
            )
        }
        Command::Work {
            until_idle,
            invoice_ledger,
            invoice_delay,
        } => {
            if let Some(path) = invoice_ledger {
                let ledger =
                    postfach::reference::InvoiceLedger::open(&path).map_err(|e| Failure {
                        code: 1,
                        message: format!("invoice ledger {}: {e}", path.display()),
                        json: None,
                    })?;
                let delay = std::time::Duration::from_millis(invoice_delay.unwrap_or(0));
                pf.register_handler(
                    "rechnungStellen",
                    postfach::reference::invoice_handler(ledger, delay),
                );
            }
            let total = if until_idle {
                pf.work_until_idle().await?
            } else {
                let exec = pf.start_executor(postfach::jobs::ExecutorConfig::default());
                shutdown_signal().await;
                exec.stop().await?
            };
            let waiting = pf
                .reader()?
                .jobs(false)?
                .iter()
                .filter(|j| j.kind == "task" && j.state == "ready")
                .count();
            out(
                json!({"continuations": total.continuations, "tasks_completed": total.tasks_completed, "tasks_failed": total.tasks_failed, "tasks_waiting": waiting}),
                format!(
                    "ran {} async continuation(s); {} task job(s) wait for a handler or `postfach complete`",
                    total.continuations, waiting
                ),
            )
        }
        Command::AddToken {
            instance,
            element,
            force,
        } => {
            let r = pf.add_token(instance, &element, force).await?;
            repair_output(instance, "added", &r)
        }
        Command::MoveToken {
            instance,
            token,
            element,
            force,
        } => {
            let r = pf.move_token(instance, token, &element, force).await?;
            repair_output(instance, "moved", &r)
        }
        Command::CancelToken { instance, token } => {
            let r = pf.cancel_token(instance, token).await?;
            repair_output(instance, "cancelled", &r)
        }
        Command::Trigger {
            instance,
            token,
            vars,
        } => {
            let v = parse_vars(&vars.var).map_err(usage)?;
            let token = token_at(pf, instance, &token)?;
            let t = pf.trigger(instance, token, v).await?;
            out(
                json!({"instance": instance.to_string(), "token": token, "triggered": t.element, "waiting_at": t.waiting_at}),
                format!(
                    "token {token} left {}; instance {instance} now waits at {}",
                    t.element,
                    t.waiting_at.join(", ")
                ),
            )
        }
    })
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn to_publish(message: String, target: MessageArgs, ttl: Option<u64>) -> Result<Publish, Failure> {
    Ok(Publish {
        name: message,
        key: target.key,
        message_id: target.id,
        variables: parse_vars(&target.vars.var).map_err(usage)?,
        ttl,
        attributes: Vec::new(),
    })
}

fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86399 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportLine {
    name: String,
    key: String,
    id: Option<String>,
    #[serde(default)]
    variables: Vars,
    ttl: Option<String>,
}

/// Publishes JSON lines from stdin; prints each outcome as a JSON line once durable.
async fn import(pf: &Postfach, concurrency: usize) -> Result<Output, Failure> {
    use std::io::Write;
    use tokio::sync::mpsc;
    let (tx, mut rx) = mpsc::channel::<(usize, Result<String, String>)>(1024);
    std::thread::spawn(move || {
        let mut input = std::io::stdin().lock();
        for n in 1.. {
            let line = match next_line(&mut input, MAX_LINE) {
                Ok(None) => break,
                Ok(Some(l)) => l,
                Err(e) => Err(e.to_string()),
            };
            if tx.blocking_send((n, line)).is_err() {
                break;
            }
        }
    });
    let mut running = tokio::task::JoinSet::new();
    let (mut accepted, mut failed) = (0usize, 0usize);
    // the first storage failure ends the import: the next lines would fail alike
    let mut storage_failed: Option<(usize, Error)> = None;
    let emit = |doc: Value| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{doc}");
        let _ = out.flush();
    };
    let mut input_open = true;
    while input_open || !running.is_empty() {
        tokio::select! {
            line = rx.recv(), if input_open && running.len() < concurrency => {
                let Some((n, line)) = line else { input_open = false; continue };
                let parsed = line.and_then(|l| {
                    if l.trim().is_empty() { return Err(String::new()); }
                    let m: ImportLine = serde_json::from_str(&l).map_err(|e| e.to_string())?;
                    let ttl = m.ttl.as_deref().map(|t| limits::MESSAGE_TTL.parse(t)).transpose()?;
                    Ok(Publish { name: m.name, key: m.key, message_id: m.id, variables: m.variables, ttl, attributes: Vec::new() })
                });
                match parsed {
                    Ok(p) => {
                        let pf = pf.clone();
                        running.spawn(async move { (n, pf.publish(p).await) });
                    }
                    Err(e) if e.is_empty() => {}
                    Err(e) => {
                        failed += 1;
                        emit(json!({"line": n, "error": e}));
                    }
                }
            }
            Some(done) = running.join_next(), if !running.is_empty() => {
                match done {
                    Ok((n, Ok(d))) => {
                        accepted += 1;
                        let mut doc = delivery_json(&d);
                        doc["line"] = json!(n);
                        emit(doc);
                    }
                    Ok((n, Err(e @ Error::Store(_)))) => {
                        failed += 1;
                        input_open = false;
                        if storage_failed.is_none() {
                            emit(json!({"line": n, "error": e.to_string()}));
                            storage_failed = Some((n, e));
                        }
                    }
                    Ok((n, Err(e))) => {
                        failed += 1;
                        emit(json!({"line": n, "error": e.to_string()}));
                    }
                    Err(e) => return Err(Error::Task(e.to_string()).into()),
                }
            }
        }
    }
    if let Some((n, e)) = storage_failed {
        return Err(Failure {
            code: 1,
            message: format!(
                "storage failed at line {n}: {e}; {accepted} message(s) were stored, the rest of the input was not read"
            ),
            json: None,
        });
    }
    if failed > 0 {
        return Err(Failure {
            code: 1,
            message: format!(
                "{failed} line(s) were not published (see their error lines); {accepted} were"
            ),
            json: None,
        });
    }
    // stdout carries exactly the outcome lines; the summary goes to stderr
    eprintln!("postfach: {accepted} message(s) published");
    Ok(out(Value::Null, ""))
}

/// The next line of `input` without its newline; `None` at the end. A line
/// longer than `cap` bytes is skipped to its end and answered with an error
/// (memory stays bounded whatever the input), as is one that is not UTF-8.
fn next_line(
    input: &mut impl std::io::BufRead,
    cap: usize,
) -> std::io::Result<Option<Result<String, String>>> {
    let mut line = Vec::new();
    let (mut seen, mut any, mut too_long) = (0usize, false, false);
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            if !any {
                return Ok(None);
            }
            break;
        }
        any = true;
        let end = chunk.iter().position(|b| *b == b'\n');
        let part = &chunk[..end.unwrap_or(chunk.len())];
        seen += part.len();
        if !too_long && line.len() + part.len() > cap {
            too_long = true;
            line = Vec::new();
        }
        if !too_long {
            line.extend_from_slice(part);
        }
        let used = end.map_or(chunk.len(), |e| e + 1);
        input.consume(used);
        if end.is_some() {
            break;
        }
    }
    if too_long {
        return Ok(Some(Err(format!(
            "line is longer than {cap} bytes ({seen} read); skipped"
        ))));
    }
    Ok(Some(String::from_utf8(line).map_err(|e| {
        format!("not UTF-8 at byte {}", e.utf8_error().valid_up_to())
    })))
}

fn correlation_keys(pairs: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    let mut keys = BTreeMap::new();
    for kv in pairs {
        let (m, v) = kv
            .split_once('=')
            .filter(|(m, v)| !m.trim().is_empty() && !v.trim().is_empty())
            .ok_or_else(|| {
                usage(format!(
                    "--correlation-key '{kv}' must look like MESSAGE=VARIABLE (neither blank)"
                ))
            })?;
        limits::check_name("--correlation-key VARIABLE", v).map_err(|e| usage(e.to_string()))?;
        keys.insert(m.to_string(), v.to_string());
    }
    Ok(keys)
}

fn send_topics(pairs: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    let mut topics = BTreeMap::new();
    for kv in pairs {
        let (e, t) = kv
            .split_once('=')
            .filter(|(e, t)| !e.trim().is_empty() && !t.trim().is_empty())
            .ok_or_else(|| {
                usage(format!(
                    "--send-topic '{kv}' must look like ELEMENT=TOPIC (neither blank)"
                ))
            })?;
        limits::check_name("--send-topic TOPIC", t).map_err(|e| usage(e.to_string()))?;
        topics.insert(e.to_string(), t.to_string());
    }
    Ok(topics)
}

/// Largest configuration file read.
const MAX_CONFIG: usize = 1024 * 1024;
/// Largest token file read.
const MAX_TOKEN: usize = 4096;
/// Longest line `import` reads (the HTTP body limit).
const MAX_LINE: usize = postfach::server::http::MAX_BODY;

/// Reads a file the command line names, refusing it as soon as it passes `cap`
/// bytes (a device such as /dev/zero never fills memory), and naming the byte
/// and line where it stops being UTF-8.
fn read_bounded(file: &std::path::Path, cap: usize, what: &str) -> Result<String, Failure> {
    use std::io::Read;
    let fail = |message: String| Failure {
        code: 1,
        message,
        json: None,
    };
    let f = std::fs::File::open(file)
        .map_err(|e| fail(format!("cannot read {}: {e}", file.display())))?;
    let mut bytes = Vec::new();
    f.take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(format!("cannot read {}: {e}", file.display())))?;
    if bytes.len() > cap {
        return Err(fail(format!(
            "{}: {what} is larger than {cap} bytes; refused without reading further",
            file.display()
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|b| **b == b'\n').count() + 1;
        fail(format!(
            "{}:{line}: not UTF-8 at byte {at}; save the {what} as UTF-8",
            file.display()
        ))
    })
}

/// Where a command's files come from: the local file system, or (inside a
/// server, for `--server`) the contents the client sent. A server never opens
/// a path that a caller names.
pub(crate) enum Sources<'a> {
    Local,
    Sent(&'a BTreeMap<String, String>),
}

impl Sources<'_> {
    /// A BPMN model by the path the command line gave.
    fn read(&self, file: &std::path::Path) -> Result<String, Failure> {
        match self {
            Sources::Local => read_bounded(file, postfach::model::MAX_SIZE, "BPMN model"),
            Sources::Sent(files) => files
                .get(&file.display().to_string())
                .cloned()
                .ok_or_else(|| {
                    usage(format!(
                        "{}: the server does not read files named by a caller; send the content (postfach --server does)",
                        file.display()
                    ))
                }),
        }
    }
}

/// The bearer token of `postfach run`: from --token-file, else $POSTFACH_TOKEN.
/// One that is empty or only whitespace is refused, never taken as "no token".
fn server_token(token_file: Option<&std::path::Path>) -> Result<Option<String>, Failure> {
    let (token, from) = match token_file {
        Some(p) => (
            read_bounded(p, MAX_TOKEN, "token file")?,
            p.display().to_string(),
        ),
        None => match std::env::var_os("POSTFACH_TOKEN") {
            Some(t) => (
                t.into_string().map_err(|_| {
                    usage("$POSTFACH_TOKEN is not UTF-8: a bearer token is printable ASCII".into())
                })?,
                "$POSTFACH_TOKEN".to_string(),
            ),
            None => return Ok(None),
        },
    };
    checked_token(&token, &from).map(Some)
}

/// A bearer token as HTTP carries it: printable ASCII (spaces inside allowed),
/// white space around it trimmed. Empty, or with a control character (NUL, a
/// line break inside) or a non-ASCII one, it is refused naming where it came
/// from: no HTTP client could send it.
fn checked_token(token: &str, from: &str) -> Result<String, Failure> {
    let token = token.trim();
    if token.is_empty() {
        return Err(usage(format!(
            "{from} is empty: give a bearer token of at least one non-blank character, or drop it"
        )));
    }
    if let Some((at, c)) = token
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_graphic() || *c == ' '))
    {
        return Err(usage(format!(
            "{from} holds {c:?} at byte {at}: a bearer token is printable ASCII (no control characters or line breaks inside)"
        )));
    }
    Ok(token.to_string())
}

/// A listener reachable from other machines needs a token.
fn check_exposure(listen: std::net::SocketAddr, token: Option<&str>) -> Result<(), Failure> {
    if !listen.ip().is_loopback() && token.is_none() {
        return Err(usage(format!(
            "--listen {listen} is reachable from other machines: give a bearer token with --token-file PATH or $POSTFACH_TOKEN"
        )));
    }
    Ok(())
}

/// `postfach run`: deploy, executor, HTTP API, until SIGINT/SIGTERM.
async fn serve(
    pf: &Postfach,
    file: PathBuf,
    listen: std::net::SocketAddr,
    token_file: Option<PathBuf>,
    invoice_ledger: Option<PathBuf>,
    config: postfach::server::config::ConfigFile,
) -> Result<Output, Failure> {
    let fail = |message: String| Failure {
        code: 1,
        message,
        json: None,
    };
    let token = server_token(token_file.as_deref())?;
    check_exposure(listen, token.as_deref())?;
    let xml = Sources::Local.read(&file)?;
    let deployment = pf
        .deploy_checked(&file.display().to_string(), &xml, config.overrides(), false)
        .await?;
    for w in &deployment.warnings {
        eprintln!(
            "postfach: warning: {}:{}: '{}': {}",
            file.display(),
            w.line,
            w.id,
            w.message
        );
    }
    let deployed = deployment.deployed;
    if let Some(path) = invoice_ledger {
        let ledger = postfach::reference::InvoiceLedger::open(&path)
            .map_err(|e| fail(format!("invoice ledger {}: {e}", path.display())))?;
        pf.register_handler(
            "rechnungStellen",
            postfach::reference::invoice_handler(ledger, std::time::Duration::ZERO),
        );
    }
    if pf.partition().is_clustered() {
        eprintln!("postfach: {} of the cluster", pf.partition());
    }
    for d in &deployed {
        eprintln!("postfach: {} version {} deployed", d.process, d.version);
    }
    // first SIGINT/SIGTERM: stop pulling, finish in-flight deliveries (commit,
    // then ack), stop the API and the executor; a second one exits at once
    // (Pub/Sub redelivers whatever was not acked)
    let (first_tx, first_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        shutdown_signal().await;
        eprintln!("postfach: stopping (a second signal exits at once)");
        let _ = first_tx.send(());
        shutdown_signal().await;
        eprintln!("postfach: second signal, exiting now");
        std::process::exit(130);
    });
    let db = pf.path().display().to_string();
    let report = postfach::server::run(
        pf,
        config,
        postfach::server::Listen {
            addr: listen,
            token,
            remote_cli: Some(remote_cli()),
        },
        async move {
            let _ = first_rx.await;
        },
        |bound| eprintln!("postfach: HTTP API on http://{bound} (database {db})"),
    )
    .await
    .map_err(|e| match e {
        postfach::server::ServerError::Engine(e) => Failure::from(e),
        postfach::server::ServerError::NoPubsub => usage(format!(
            "{e}: rebuild with default features, or drop [[subscriptions]] and [send_topics] from the configuration"
        )),
        postfach::server::ServerError::Config(_) => usage(e.to_string()),
        postfach::server::ServerError::Exposed(addr) => usage(format!(
            "--listen {addr} is reachable from other machines: give a bearer token with --token-file PATH or $POSTFACH_TOKEN"
        )),
        other => fail(other.to_string()),
    })?;
    Ok(out(
        json!({"stopped": true, "tasks_completed": report.tasks_completed}),
        format!(
            "stopped; {} job(s) completed while running",
            report.tasks_completed
        ),
    ))
}

/// A claim-check object fetched: (`gs://` URI, bytes).
type Fetched = (String, Vec<u8>);

/// Exit code of `object` when the object does not exist.
const OBJECT_MISSING: i32 = 4;

async fn object_from_server(client: Client, job: u64, variable: &str) -> Result<Fetched, Failure> {
    let url = format!("{}/jobs/{job}/objects/{variable}", client.server);
    tokio::task::spawn_blocking(move || {
        let server = &client.server;
        let fail = |code: i32, message: String| Failure {
            code,
            message,
            json: None,
        };
        let req = with_token(client.agent().get(&url))?;
        let mut resp = req.call().map_err(|e| client.unreachable(e))?;
        let status = resp.status().as_u16();
        let name = resp
            .headers()
            .get("x-postfach-object")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = resp
            .body_mut()
            .with_config()
            .limit(postfach::objects::MAX_OBJECT_BYTES)
            .read_to_vec()
            .map_err(|e| fail(1, format!("{server}: {e}")))?;
        if status == 200 {
            return Ok((name, body));
        }
        let answer = serde_json::from_slice::<Value>(&body).unwrap_or_default();
        let message = answer["error"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| format!("{server} answered {status}"));
        let code = match status {
            404 if answer["reason"] == "object_missing" => OBJECT_MISSING,
            400 | 422 => 2,
            _ => 1,
        };
        Err(fail(code, message))
    })
    .await
    .map_err(|e| Failure {
        code: 1,
        message: e.to_string(),
        json: None,
    })?
}

async fn object_from_store(
    db: &std::path::Path,
    job: u64,
    variable: &str,
) -> Result<Fetched, Failure> {
    let pf = Postfach::open_read_only(db, postfach::Options::default())?;
    let found = pf.reader()?.claim_check(job, variable)?;
    pf.close();
    let reference = match found {
        None => {
            return Err(Error::Engine(postfach::EngineError::UnknownJob(job)).into());
        }
        Some(r) => r.map_err(|e| usage(e.to_string()))?,
    };
    read_object(&reference).await
}

#[cfg(feature = "pubsub")]
async fn read_object(reference: &postfach::objects::ObjectRef) -> Result<Fetched, Failure> {
    use postfach::objects::{ObjectError, ObjectStore};
    let store = postfach::pubsub::CloudStorage::connect(&Default::default())
        .await
        .map_err(|e| Failure {
            code: 1,
            message: e.to_string(),
            json: None,
        })?;
    match store.read(reference).await {
        Ok(bytes) => Ok((reference.to_uri(), bytes)),
        Err(e) => Err(Failure {
            code: if matches!(e, ObjectError::NotFound { .. }) {
                OBJECT_MISSING
            } else {
                1
            },
            message: format!("{e}: fail the job so it is retried, or repair the reference"),
            json: None,
        }),
    }
}

#[cfg(not(feature = "pubsub"))]
async fn read_object(reference: &postfach::objects::ObjectRef) -> Result<Fetched, Failure> {
    Err(Failure {
        code: 1,
        message: format!(
            "{reference}: this build reads no Cloud Storage (feature `pubsub`); use --server"
        ),
        json: None,
    })
}

/// Writes a fetched object to `out`, or its bytes to stdout.
fn deliver_object(
    (name, bytes): Fetched,
    out_file: Option<&std::path::Path>,
) -> Result<Output, Failure> {
    let fail = |message: String| Failure {
        code: 1,
        message,
        json: None,
    };
    match out_file {
        Some(path) => {
            std::fs::write(path, &bytes).map_err(|e| fail(format!("{}: {e}", path.display())))?;
            Ok(out(
                json!({"object": name, "bytes": bytes.len(), "file": path.display().to_string()}),
                format!(
                    "{name}: {} bytes written to {}",
                    bytes.len(),
                    path.display()
                ),
            ))
        }
        None => {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&bytes)
                .and_then(|()| stdout.flush())
                .map_err(|e| fail(format!("stdout: {e}")))?;
            Ok(out(Value::Null, ""))
        }
    }
}

/// Whether a command can run inside a server for a remote command line.
pub(crate) fn runs_remotely(c: &Command) -> Result<(), String> {
    match c {
        Command::Demo(_) => Err("demo runs on its own embedded database; drop --server".into()),
        Command::Run { .. } => Err("run starts a server; drop --server".into()),
        Command::Compact | Command::Recover { .. } => Err(
            "compact and recover work on the files offline; stop the server first".into(),
        ),
        Command::Import { .. } => {
            Err("import streams stdin; use POST /messages against the server instead".into())
        }
        Command::Object { .. } => {
            Err("object streams bytes; use GET /jobs/{id}/objects/{variable} instead".into())
        }
                // a pass of the server's own executor is fine; a foreground executor or
        // handlers registered from a remote command line are not
        Command::Work { until_idle: true, invoice_ledger: None, invoice_delay: None } => Ok(()),
        Command::Work { .. } => Err(
            "the server runs its own job executor: use `work --until-idle` for one pass, or drop --server to work a local database".into(),
        ),
        _ => Ok(()),
    }
}

/// The command line as the server's `/cli` runs it.
fn remote_cli() -> postfach::server::RemoteCli {
    std::sync::Arc::new(|pf, args, files| {
        Box::pin(async move {
            match execute_remote(&pf, args, &files).await {
                Ok(o) => json!({"code": 0, "json": o.json, "text": o.text}),
                Err(f) => json!({"code": f.code, "message": f.message, "json": f.json}),
            }
        })
    })
}

/// Executes a parsed command line against an open database, for a remote caller.
pub(crate) async fn execute_remote(
    pf: &Postfach,
    args: Vec<String>,
    files: &BTreeMap<String, String>,
) -> Result<Output, Failure> {
    let cli =
        Cli::try_parse_from(std::iter::once("postfach".to_string()).chain(args)).map_err(|e| {
            usage(
                e.to_string()
                    .lines()
                    .next()
                    .unwrap_or("invalid arguments")
                    .to_string(),
            )
        })?;
    runs_remotely(&cli.command).map_err(usage)?;
    execute(pf, cli.command, Sources::Sent(files)).await
}

/// The files a command line names, read here for a server that never reads a
/// caller's paths itself: the model of `deploy`.
fn files_to_send(args: &[std::ffi::OsString]) -> Result<BTreeMap<String, String>, Failure> {
    let mut files = BTreeMap::new();
    let parsed =
        Cli::try_parse_from(std::iter::once("postfach".into()).chain(args.iter().cloned()));
    if let Ok(Cli {
        command: Command::Deploy { file, .. },
        ..
    }) = parsed
    {
        files.insert(file.display().to_string(), Sources::Local.read(&file)?);
    }
    Ok(files)
}

/// The `--server` client: the server's URL and how long to wait for it.
struct Client {
    server: String,
    connect_ms: u64,
    answer_ms: u64,
}

fn client_of(cli: &Cli) -> Client {
    Client {
        server: cli.server.clone().unwrap_or_default(),
        connect_ms: cli.connect_timeout,
        answer_ms: cli.server_timeout,
    }
}

impl Client {
    /// The HTTP client: statuses are answers, not errors; every phase is bounded.
    fn agent(&self) -> ureq::Agent {
        let connect = std::time::Duration::from_millis(self.connect_ms);
        let answer = std::time::Duration::from_millis(self.answer_ms);
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_resolve(Some(connect))
            .timeout_connect(Some(connect))
            .timeout_send_request(Some(answer))
            .timeout_send_body(Some(answer))
            .timeout_recv_response(Some(answer))
            .timeout_recv_body(Some(answer))
            .build()
            .into()
    }

    /// Why the server could not be talked to, naming the timeout it hit.
    fn unreachable(&self, e: ureq::Error) -> Failure {
        use ureq::Timeout as T;
        let show = |ms: u64| humantime::format_duration(std::time::Duration::from_millis(ms));
        let message = match e {
            ureq::Error::Timeout(T::Resolve | T::Connect) => format!(
                "no connection to {} within {} (--connect-timeout)",
                self.server,
                show(self.connect_ms)
            ),
            ureq::Error::Timeout(_) => format!(
                "{} accepted the connection but did not answer within {} (--server-timeout)",
                self.server,
                show(self.answer_ms)
            ),
            e => format!("cannot reach {}: {e}", self.server),
        };
        Failure {
            code: 1,
            message,
            json: None,
        }
    }
}

/// Adds `$POSTFACH_TOKEN` as bearer token, when set.
fn with_token<B>(req: ureq::RequestBuilder<B>) -> Result<ureq::RequestBuilder<B>, Failure> {
    Ok(match std::env::var_os("POSTFACH_TOKEN") {
        Some(token) => {
            let token = token.into_string().map_err(|_| {
                usage("$POSTFACH_TOKEN is not UTF-8: a bearer token is printable ASCII".into())
            })?;
            let token = checked_token(&token, "$POSTFACH_TOKEN")?;
            req.header("Authorization", &format!("Bearer {token}"))
        }
        None => req,
    })
}

/// The most bytes of a server's answer the client reads.
const MAX_ANSWER: u64 = 64 * 1024 * 1024;

/// Sends the command line to a server and turns its answer back into output.
fn remote(client: &Client, args: Vec<std::ffi::OsString>) -> Result<Output, Failure> {
    let server = &client.server;
    let fail = |message: String| Failure {
        code: 1,
        message,
        json: None,
    };
    let url = format!("{server}/cli");
    let req = with_token(client.agent().post(&url))?;
    let files = files_to_send(&args)?;
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut resp = req
        .send_json(json!({ "args": args, "files": files }))
        .map_err(|e| client.unreachable(e))?;
    let status = resp.status().as_u16();
    let v: Value = resp
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER)
        .read_json()
        .map_err(|e| match e {
            ureq::Error::Timeout(_) => client.unreachable(e),
            e => fail(format!("{server} answered {status} without JSON: {e}")),
        })?;
    if status == 401 {
        return Err(fail(format!(
            "{server}: {} (set $POSTFACH_TOKEN)",
            v["error"].as_str().unwrap_or("unauthorized")
        )));
    }
    // only the documented exit codes pass through; anything else is the
    // server's fault, not an outcome of the command
    let code = match v["code"].as_i64() {
        Some(c @ 0..=4) => c as i32,
        other => {
            return Err(fail(format!(
                "{server} answered an exit code that postfach does not document ({}); what the command did is unknown: look with postfach --server {server} instance/jobs/messages",
                other.map_or("none".to_string(), |c| c.to_string())
            )));
        }
    };
    if code == 0 {
        Ok(out(
            v["json"].clone(),
            v["text"].as_str().unwrap_or_default(),
        ))
    } else {
        let message = v["message"]
            .as_str()
            .or(v["error"].as_str())
            .unwrap_or("the server refused the command")
            .to_string();
        let doc = Some(v["json"].clone()).filter(|j| !j.is_null());
        Err(Failure {
            code,
            message,
            json: doc,
        })
    }
}

/// What a repair did, saying plainly when it only scheduled async work.
/// A token given as its id, or as the element its one waiting token rests at.
fn token_at(pf: &Postfach, instance: u64, given: &str) -> Result<u64, Failure> {
    if let Ok(id) = given.parse::<u64>() {
        return Ok(id);
    }
    let view = pf.reader()?.instance(instance)?.ok_or(Error::Engine(
        postfach::EngineError::UnknownInstance(instance),
    ))?;
    let at: Vec<u64> = view
        .tokens
        .iter()
        .filter(|t| t.element == given)
        .map(|t| t.token)
        .collect();
    match at.as_slice() {
        [one] => Ok(*one),
        [] => Err(usage(format!(
            "no token of instance {instance} rests at '{given}' (it waits at {})",
            view.waiting_at.join(", ")
        ))),
        many => Err(usage(format!(
            "{} tokens of instance {instance} rest at '{given}' ({}): give the token id",
            many.len(),
            many.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn repair_output(instance: u64, verb: &str, r: &postfach::Repair) -> Output {
    let text = if r.jobs_created.is_empty() {
        format!(
            "token {} {verb}; instance {instance} now waits at {}",
            r.token,
            r.waiting_at.join(", ")
        )
    } else {
        format!(
            "token {} {verb}; it waits for async job(s) {} — the work happens when they run (postfach work), not now",
            r.token,
            r.jobs_created
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    out(repair_json(instance, r), text)
}
