//! The `postfach` command line (see docs/cli.md): argument parsing, output in human
//! text or one JSON document, and exit codes 0 ok · 1 error · 2 usage · 3 rejection.
//!
//! Invariant: the command line is a thin edge over the library API; it holds no
//! engine logic and prints exactly one JSON document with `--json`.
//!
//! One module per command group, in the manner of mini-redis's one file per
//! command: each owns its clap arguments, its human text and its JSON;
//! [`execute`] only dispatches. [`failure`] says what to do next for each
//! library error, [`values`] parses and range-checks what the user typed,
//! [`remote`] sends a command to a server as its operation of the API
//! (`--server`), [`show`] renders a command's text from its document.

mod audit;
mod backups;
mod batches;
mod cluster;
mod failure;
mod instances;
mod jobs;
mod messages;
mod migrate;
mod offline;
mod prelude;
mod remote;
mod repair;
mod serve;
mod show;
mod slots;
mod tasks;
mod values;
mod views;

use failure::usage;
pub use failure::{DAMAGED_ADVICE, Failure};
pub use postfach::contract::Output;
#[cfg(feature = "otlp")]
pub use serve::{otlp_endpoint, traces_wanted};

use clap::{Parser, Subcommand};
use postfach::Postfach;
use std::path::PathBuf;
use values::{parse_connect_timeout, parse_server_timeout, parse_server_url};

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
    Deploy(instances::DeployArgs),
    /// Start an instance of the latest version of a process.
    ///
    /// Example: postfach start auftrag-ausfuehrung --var auftragId=4711
    Start(instances::StartArgs),
    /// Publish a message (buffered path): correlated, buffered, duplicate or parked.
    ///
    /// Example: postfach publish AuftragAbgeschlossen --key 4711 --id evt-1 --ttl 24h --var erledigtePositionen=1200
    Publish(messages::PublishArgs),
    /// Correlate synchronously: never buffers; exit 3 when no single subscription waits.
    ///
    /// Example: postfach correlate AuftragAbgeschlossen --key 4711
    Correlate(messages::CorrelateArgs),
    /// Publish many messages: JSON lines on stdin, one outcome line on stdout per
    /// message as soon as it is durably accepted (messages are published concurrently).
    ///
    /// Example: postfach import < completions.jsonl
    /// (each line: {"name": "AuftragAbgeschlossen", "key": "4711", "id": "evt-1", "variables": {...}, "ttl": "24h"})
    Import(messages::ImportArgs),
    /// Broadcast a signal to every waiting subscription (never buffered).
    ///
    /// Example: postfach signal Tarifwechsel --var tarif=2027
    Signal(instances::SignalArgs),
    /// Offer variables to the conditional start events: an instance of each
    /// process starts at every conditional start event whose condition holds
    /// over them (Camunda 7's evaluateStartConditions).
    ///
    /// Example: postfach conditions --var betrag=1500
    Conditions(instances::ConditionsArgs),
    /// Evaluate the latest version of a deployed DMN decision against the
    /// variables given, without a process; prints its value and the rules
    /// that matched.
    ///
    /// Example: postfach decide credit-check --var amount=20000 --var rating=B
    Decide(instances::DecideArgs),
    /// List the deployed DMN decisions with their latest version.
    ///
    /// Example: postfach decisions
    Decisions,
    /// List the deployed processes with their versions, or print the BPMN
    /// XML a version was deployed from.
    ///
    /// Example: postfach processes --xml auftrag-ausfuehrung --version 2
    Processes(views::ProcessesArgs),
    /// Show one instance with variables and history.
    ///
    /// Example: postfach instance 17
    Instance(instances::InstanceArgs),
    /// List instances, e.g. those waiting at an element (oldest first); every
    /// filter given must hold.
    ///
    /// Example: postfach instances --waiting-at warteAufAbschluss
    ///
    /// Example: postfach instances --key A-4711
    Instances(instances::InstancesArgs),
    /// List buffered and parked messages.
    ///
    /// Example: postfach messages --parked --reason ambiguous
    Messages(messages::MessagesArgs),
    /// Evaluate a parked message again, like a new publish.
    ///
    /// Example: postfach requeue evt-1
    Requeue(messages::RequeueArgs),
    /// End a parked message explicitly; the reason is recorded.
    ///
    /// Example: postfach discard evt-1 --why "test message from provider"
    Discard(messages::DiscardArgs),
    /// Per element of a deployed process version: tokens waiting and the
    /// oldest wait, ready jobs, incidents, buffered and parked messages of the
    /// element's message (read-only).
    ///
    /// Example: postfach statistics auftrag-ausfuehrung --version 2
    Statistics(instances::StatisticsArgs),
    /// List jobs, or only incidents.
    ///
    /// Example: postfach jobs --incidents
    Jobs(jobs::JobsArgs),
    /// Make an incident runnable again.
    ///
    /// Example: postfach retry 42
    Retry(jobs::RetryArgs),
    /// Read the claim-check object a job's variable refers to (Cloud Storage;
    /// locally through $STORAGE_EMULATOR_HOST or Google's default credentials).
    /// A missing object exits 4: fail the job so it is retried.
    ///
    /// Example: postfach object 42 protokoll --out protokoll.json --server http://127.0.0.1:7820
    Object(jobs::ObjectArgs),
    /// List open user tasks (read-only); every filter given must hold.
    ///
    /// Example: postfach tasks --candidate-group sachbearbeitung --due-before 2026-12-31T00:00:00Z
    Tasks(tasks::TasksArgs),
    /// The audit trail, newest first: who deployed, repaired, requeued,
    /// discarded, retried, cleaned up or acted on a user task, and when.
    ///
    /// Example: postfach audit --who anna --since 2026-12-01T00:00:00Z
    Audit(audit::AuditArgs),
    /// Act on a user task as a person: claim, unclaim, assign or complete it.
    ///
    /// Example: postfach task claim 7 --user anna
    Task(tasks::TaskArgs),
    /// Complete a task job, optionally with variables. A worker passes the
    /// lease token it got from `acquire`; without one, an unlocked job is
    /// completed by hand.
    ///
    /// Example: postfach complete 42 --var rechnungNr=R-7
    Complete(jobs::CompleteArgs),
    /// External worker: lock up to --max due jobs of a topic for a lease.
    ///
    /// Example: postfach acquire rechnungStellen --worker abrechnung-1 --max 20 --lease 10m
    Acquire(jobs::AcquireArgs),
    /// External worker: extend the lease of a job it holds.
    ///
    /// Example: postfach extend 42 --lease-token 7 --by 10m
    Extend(jobs::ExtendArgs),
    /// External worker: report a failed attempt; it retries with backoff, or
    /// after --retry-delay, until its attempts (or --retries left) are used up.
    ///
    /// Example: postfach fail 42 --lease-token 7 --error "invoice system down" --retries 3 --retry-delay 1m
    Fail(jobs::FailArgs),
    /// External worker: throw a BPMN error; an error boundary event on the task
    /// takes it, otherwise the job becomes an incident (exit 3).
    ///
    /// Example: postfach bpmn-error 42 --lease-token 7 --code POSITIONEN_FEHLEN --message "3 missing"
    BpmnError(jobs::BpmnErrorArgs),
    /// Run the job executor in the foreground: async continuations, and with
    /// --invoice-ledger the reference invoice handler for `rechnungStellen`.
    /// Without --until-idle it runs until Ctrl-C or SIGTERM.
    ///
    /// Example: postfach work --until-idle --invoice-ledger invoices.tsv
    Work(jobs::WorkArgs),
    /// Standalone server: deploys the model, runs the job executor, the Pub/Sub
    /// consumers and outbox, and the HTTP admin API until SIGINT/SIGTERM (a
    /// second signal exits at once).
    ///
    /// Example: postfach run bpmn/auftrag-ausfuehrung.bpmn --config postfach.toml
    ///
    /// Example: postfach run bpmn/auftrag-ausfuehrung.bpmn --correlation-key AuftragAbgeschlossen=auftragId --subscription auftrag-abgeschlossen-sub --message AuftragAbgeschlossen --key-from /auftragId --send-topic auftragUebergeben=auftraege
    Run(serve::RunArgs),
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
    Recover(offline::RecoverArgs),
    /// Write a backup: a copy of the database at one batch of the log, with
    /// a manifest (partition, batch, checksums), as DIR/ID/.
    ///
    /// Example: postfach backup --to backups
    Backup(backups::BackupArgs),
    /// List the backups in a directory, each checked against its manifest.
    ///
    /// Example: postfach backups --at backups
    Backups(backups::BackupsArgs),
    /// Restore a backup as --db after checking it (checksums, redb's check,
    /// format, partition, the store's own check); an existing database is
    /// replaced only with --replace, and then kept beside it.
    ///
    /// Example: postfach restore backups/20261206T101500000Z-p0 --db postfach.redb
    Restore(backups::RestoreArgs),
    /// Reclaim file space offline (stop `postfach run` first).
    ///
    /// Example: postfach compact
    Compact,
    /// Move a token to before an element (repair), guarded like add-token.
    ///
    /// Example: postfach move-token 17 2 warteAufAbschluss
    MoveToken(repair::MoveTokenArgs),
    /// Remove a token (repair); removing the last one cancels the instance.
    ///
    /// Example: postfach cancel-token 17 3
    CancelToken(repair::CancelTokenArgs),
    /// End a running instance as cancelled with everything inside it (jobs,
    /// timers, subscriptions, user tasks, called instances).
    ///
    /// Example: postfach cancel 17
    Cancel(repair::CancelArgs),
    /// Set variables of a running instance (as a token writes them with
    /// --token, on the token itself with --local); waiting conditions that
    /// read them are asked.
    ///
    /// Example: postfach set-variables 17 --var freigabe=true
    SetVariables(repair::SetVariablesArgs),
    /// Move a token on from its wait state (a receive task or catch event
    /// without an event definition), by token id or by the element it waits at.
    ///
    /// Example: postfach trigger 17 freigabeAbwarten --var freigegeben=true
    Trigger(repair::TriggerArgs),
    /// Run an activity of an ad-hoc subprocess, or complete it, by the
    /// token holding it or by its element.
    ///
    /// Example: postfach ad-hoc 17 klaerung --activate rueckfrage
    ///
    /// Example: postfach ad-hoc 17 klaerung --complete
    AdHoc(repair::AdHocArgs),
    /// A durable batch over the filters of `instances` (or the parked
    /// messages): cancel, retry, migrate, move-token, requeue, discard or
    /// delete; each item's outcome recorded, resumed after a crash, followed
    /// with a progress bar until done (unless --detach); `status ID`, `stop ID`.
    ///
    /// Example: postfach batch retry --process auftrag-ausfuehrung
    ///
    /// Example: postfach batch status 12
    Batch(batches::BatchArgs),
    /// Every batch with its progress.
    ///
    /// Example: postfach batches
    Batches,
    /// Move running instances of one version of a process to another: each
    /// token goes to its element's counterpart (same id unless --map), its
    /// wait kept where the target is the same kind, re-opened where not; an
    /// instance that cannot move is refused with its reason and unchanged.
    ///
    /// Example: postfach migrate auftrag-ausfuehrung --from-version 1 --to-version 2 --dry-run
    Migrate(migrate::MigrateArgs),
    /// Add a token before an element (repair). Refused when it would open a second
    /// subscription for an already subscribed message and key, unless --force.
    ///
    /// Example: postfach add-token 17 auftragUebergeben
    AddToken(repair::AddTokenArgs),
    /// Gateway of a cluster: serves the API and console of `postfach run` in
    /// front of the partitions, sends each write to the partition that owns
    /// its key or id, deploys to every partition, gathers reads (answers name
    /// the partitions they could not reach), until SIGINT/SIGTERM.
    ///
    /// Example: postfach gateway --partition-url 0=http://10.0.0.5:7820 --partition-url 1=http://10.0.0.6:7820
    Gateway(cluster::GatewayArgs),
    /// A cluster of partitions: `status` through a gateway, `up` to try one
    /// out on this machine.
    ///
    /// Example: postfach --server http://127.0.0.1:7820 cluster status
    Cluster(cluster::ClusterArgs),
    /// Whether a running server is ready (or, with --live, serves at all);
    /// exit 1 when it is not (with --server).
    ///
    /// Example: postfach --server http://127.0.0.1:7820 health
    Health(views::HealthArgs),
    /// The partition a running server is and what it holds (with --server).
    ///
    /// Example: postfach --server http://127.0.0.1:7821 partition
    Partition,
    /// The alarms a running server evaluates and whether each fires (with --server).
    ///
    /// Example: postfach --server http://127.0.0.1:7820 alarms
    Alarms,
    /// A running server's Prometheus metrics, as it exposes them (with --server).
    ///
    /// Example: postfach --server http://127.0.0.1:7820 metrics
    Metrics,
    /// Router of a cluster: consumes the shared Pub/Sub subscription, decodes
    /// each delivery's key with the subscription's rules, and publishes it to
    /// the topic of the partition that owns the key (acked once the broker
    /// confirmed the forward), until SIGINT/SIGTERM.
    ///
    /// Example: postfach router --partitions 4 --subscription auftrag-abgeschlossen-sub --message AuftragAbgeschlossen --key-from /auftragId --forward-topic auftrag-abgeschlossen-{partition}
    Router(cluster::RouterArgs),
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> Result<Output, Failure> {
    // the commands that open no database, or their own
    match &cli.command {
        Command::Demo(args) => {
            return postfach::demo::run(args, cli.json)
                .await
                .map_err(Failure::from);
        }
        Command::Recover(args) => return offline::recover_offline(&cli, args),
        Command::Backups(args) => return backups::backups(args).await,
        Command::Restore(_) if cli.server.is_some() => {
            return Err(usage(
                "restore writes a database file: stop its server and run restore where the file is, without --server".into(),
            ));
        }
        Command::Restore(args) => return backups::restore(&cli.db, args).await,
        Command::Compact => return offline::compact(&cli),
        Command::Object(args) => return jobs::object(&cli, args).await,
        Command::Gateway(args) => return cluster::gateway(args).await,
        Command::Cluster(args) => return cluster::cluster(&cli, args).await,
        Command::Router(args) => return cluster::router(args).await,
        _ => {}
    }
    if cli.server.is_some() {
        return remote::send(cli).await;
    }
    // what a running server reports is not made up from the file
    match &cli.command {
        Command::Health(_) => return Err(views::server_only("health")),
        Command::Partition => return Err(views::server_only("partition")),
        Command::Alarms => return Err(views::server_only("alarms")),
        Command::Metrics => return Err(views::server_only("metrics")),
        _ => {}
    }
    let mut options = postfach::Options::default();
    let mut archive = None;
    if let Command::Run(args) = &cli.command {
        archive = serve::prepare(args, &mut options)?;
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
        Command::Instance(_)
            | Command::Processes(_)
            | Command::Instances(_)
            | Command::Messages(_)
            | Command::Jobs(_)
            | Command::Statistics(_)
            | Command::Tasks(_)
            | Command::Audit(_)
    );
    let pf = if looks_only {
        Postfach::open_read_only(&cli.db, options)?
    } else {
        Postfach::open_with(&cli.db, options)?
    };
    let partition = pf.partition().index();
    let result = execute(&pf, cli.command).await;
    pf.close();
    if let Some(archive) = archive {
        // the close closed the last segment: into the archive before exiting
        let log = postfach::backup::archive::log_of(&cli.db);
        if let Err(e) = archive.ship(&log, partition).await {
            tracing::error!(error = %e, "archiving the log at the stop failed; its segments wait beside it for the next start");
        }
    }
    result
}

/// Runs one command against an open database: a dispatch to the command's
/// group.
async fn execute(pf: &Postfach, command: Command) -> Result<Output, Failure> {
    match command {
        Command::Demo(_)
        | Command::Object(_)
        | Command::Compact
        | Command::Recover(_)
        | Command::Gateway(_)
        | Command::Router(_)
        | Command::Cluster(_)
        | Command::Backups(_)
        | Command::Restore(_) => Err(usage(
            "this command works without an open database; run it on its own".into(),
        )),
        Command::Backup(args) => backups::backup(pf, args).await,
        Command::Health(_) => Err(views::server_only("health")),
        Command::Partition => Err(views::server_only("partition")),
        Command::Alarms => Err(views::server_only("alarms")),
        Command::Metrics => Err(views::server_only("metrics")),
        Command::Processes(args) => views::processes(pf, args),
        Command::Run(args) => serve::run(pf, args).await,
        Command::Deploy(args) => instances::deploy(pf, args).await,
        Command::Start(args) => instances::start(pf, args).await,
        Command::Publish(args) => messages::publish(pf, args).await,
        Command::Correlate(args) => messages::correlate(pf, args).await,
        Command::Import(args) => messages::import(pf, args).await,
        Command::Cleanup => offline::cleanup(pf).await,
        Command::Signal(args) => instances::signal(pf, args).await,
        Command::Conditions(args) => instances::conditions(pf, args).await,
        Command::Decide(args) => instances::decide(pf, args),
        Command::Decisions => instances::decisions(pf),
        Command::Instance(args) => instances::instance(pf, args).await,
        Command::Instances(args) => instances::instances(pf, args).await,
        Command::Messages(args) => messages::messages(pf, args).await,
        Command::Requeue(args) => messages::requeue(pf, args).await,
        Command::Discard(args) => messages::discard(pf, args).await,
        Command::Tasks(args) => tasks::tasks(pf, args).await,
        Command::Audit(args) => audit::audit(pf, args),
        Command::Task(args) => tasks::task(pf, args).await,
        Command::Statistics(args) => instances::statistics(pf, args).await,
        Command::Jobs(args) => jobs::jobs(pf, args).await,
        Command::Retry(args) => jobs::retry(pf, args).await,
        Command::Acquire(args) => jobs::acquire(pf, args).await,
        Command::Extend(args) => jobs::extend(pf, args).await,
        Command::Fail(args) => jobs::fail(pf, args).await,
        Command::BpmnError(args) => jobs::bpmn_error(pf, args).await,
        Command::Complete(args) => jobs::complete(pf, args).await,
        Command::Work(args) => jobs::work(pf, args).await,
        Command::AddToken(args) => repair::add_token(pf, args).await,
        Command::MoveToken(args) => repair::move_token(pf, args).await,
        Command::CancelToken(args) => repair::cancel_token(pf, args).await,
        Command::Trigger(args) => repair::trigger(pf, args).await,
        Command::Cancel(args) => repair::cancel(pf, args).await,
        Command::SetVariables(args) => repair::set_variables(pf, args).await,
        Command::AdHoc(args) => repair::ad_hoc(pf, args).await,
        Command::Migrate(args) => migrate::migrate(pf, args).await,
        Command::Batch(args) => batches::batch(pf, args).await,
        Command::Batches => batches::batches(pf),
    }
}
