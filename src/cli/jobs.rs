//! Jobs and workers: `jobs`, `retry`, `object`, `complete`, `acquire`,
//! `extend`, `fail`, `bpmn-error`, `work`.
//!
//! Invariant: each command owns its arguments, its human text and its JSON;
//! a worker's call carries the lease token it holds.

use super::Cli;
use super::prelude::*;
use super::remote::Client;
use super::values::{
    VarArgs, parse_configured, parse_fetch, parse_lease, parse_lease_extension, parse_max,
    parse_retry_delay, parse_vars, parse_worker,
};
use clap::Args;
use postfach::contract::locked_job_json;
use postfach::server::http::requests;
use postfach::{Error, Postfach};
use serde_json::{Value, json};
use std::path::PathBuf;

// The arguments of `postfach jobs`.
#[derive(Debug, Args)]
pub(crate) struct JobsArgs {
    #[arg(long)]
    pub(crate) incidents: bool,
}

// The arguments of `postfach retry`.
#[derive(Debug, Args)]
pub(crate) struct RetryArgs {
    pub(crate) job_id: u64,
}

// The arguments of `postfach object`.
#[derive(Debug, Args)]
pub(crate) struct ObjectArgs {
    pub(crate) job_id: u64,
    /// The instance variable holding the reference.
    pub(crate) variable: String,
    /// Write the object here (default: its bytes on stdout).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
}

// The arguments of `postfach complete`.
#[derive(Debug, Args)]
pub(crate) struct CompleteArgs {
    pub(crate) job_id: u64,
    #[command(flatten)]
    pub(crate) vars: VarArgs,
    /// The lease token from `acquire` (external workers).
    #[arg(long)]
    pub(crate) lease_token: Option<u64>,
}

// The arguments of `postfach acquire`.
#[derive(Debug, Args)]
pub(crate) struct AcquireArgs {
    pub(crate) topic: String,
    /// Who holds the lease (shown in `jobs`).
    #[arg(long, value_parser = parse_worker)]
    pub(crate) worker: String,
    /// How many due jobs to lock (1 … 10,000).
    #[arg(long, default_value_t = 1, value_parser = parse_max)]
    pub(crate) max: usize,
    /// Lease duration (30s, 15m, ...; at most 7d); extend it with `extend`.
    #[arg(long, value_parser = parse_lease, default_value = "5m")]
    pub(crate) lease: u64,
    /// Only this variable in each job (repeatable; default: every variable).
    #[arg(long = "fetch-variable", value_name = "NAME", value_parser = parse_fetch)]
    pub(crate) fetch_variable: Vec<String>,
}

// The arguments of `postfach extend`.
#[derive(Debug, Args)]
pub(crate) struct ExtendArgs {
    pub(crate) job_id: u64,
    #[arg(long)]
    pub(crate) lease_token: u64,
    /// How long the lease lasts from now (at most 7d).
    #[arg(long, value_parser = parse_lease_extension)]
    pub(crate) by: u64,
}

// The arguments of `postfach fail`.
#[derive(Debug, Args)]
pub(crate) struct FailArgs {
    pub(crate) job_id: u64,
    #[arg(long)]
    pub(crate) lease_token: Option<u64>,
    #[arg(long)]
    pub(crate) error: String,
    /// Attempts left after this one (0: incident now).
    #[arg(long)]
    pub(crate) retries: Option<u32>,
    /// Delay before the next attempt (at most 366d).
    #[arg(long, value_parser = parse_retry_delay)]
    pub(crate) retry_delay: Option<u64>,
}

// The arguments of `postfach bpmn-error`.
#[derive(Debug, Args)]
pub(crate) struct BpmnErrorArgs {
    pub(crate) job_id: u64,
    #[arg(long)]
    pub(crate) lease_token: Option<u64>,
    #[arg(long)]
    pub(crate) code: String,
    #[arg(long, default_value = "")]
    pub(crate) message: String,
    #[command(flatten)]
    pub(crate) vars: VarArgs,
}

// The arguments of `postfach work`.
#[derive(Debug, Args)]
pub(crate) struct WorkArgs {
    /// Stop when no job is due instead of waiting for more.
    #[arg(long)]
    pub(crate) until_idle: bool,
    /// Issue invoices for `rechnungStellen` into this ledger file, once per
    /// idempotency key (a retry or a rerun after a crash does not invoice twice).
    #[arg(long, value_name = "PATH")]
    pub(crate) invoice_ledger: Option<PathBuf>,
    /// Let each invoice take this long after it is recorded (simulates a slow
    /// invoice system, e.g. to watch crash recovery).
    #[arg(long, value_parser = parse_configured, value_name = "DURATION")]
    pub(crate) invoice_delay: Option<u64>,
}

/// The query of `postfach jobs`.
pub(super) fn jobs_query(args: &JobsArgs) -> requests::JobsQuery {
    requests::JobsQuery {
        incidents: args.incidents,
        after: None,
        limit: Some(postfach::server::http::MAX_PAGE),
    }
}

/// `postfach jobs` against the open database.
pub(super) async fn jobs(pf: &Postfach, args: JobsArgs) -> Result<Output, Failure> {
    let list = pf.reader()?.jobs(args.incidents)?;
    Ok(shown(json!({"jobs": list}), |d| {
        jobs_text(d, args.incidents)
    }))
}

pub(super) fn jobs_text(d: &Value, incidents: bool) -> String {
    let mut text = String::new();
    for j in each(&d["jobs"]) {
        text.push_str(&format!(
            "{:>8}  instance {:<8} {:<22} {:<18} {:<8} attempts={}{}\n",
            s(&j["job"]),
            j["instance"].as_str().unwrap_or("-"),
            s(&j["element"]),
            s(&j["kind"]),
            s(&j["state"]),
            s(&j["attempts"]),
            j["error"]
                .as_str()
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
    super::instances::missing_note(d, text.trim_end())
}

/// `postfach retry` against the open database.
pub(super) async fn retry(pf: &Postfach, args: RetryArgs) -> Result<Output, Failure> {
    let RetryArgs { job_id } = args;
    let v = postfach::contract::retried(pf, job_id, std::time::Duration::ZERO).await?;
    Ok(shown(v, retry_text))
}

pub(super) fn retry_text(d: &Value) -> String {
    format!("job {} retried: {}", s(&d["job"]), s(&d["next"]))
}

/// The request of `postfach acquire`.
pub(super) fn acquire_request(args: AcquireArgs) -> requests::AcquireBody {
    requests::AcquireBody {
        topic: args.topic,
        worker: args.worker,
        max: args.max,
        lease_ms: args.lease,
        fetch_variables: (!args.fetch_variable.is_empty()).then_some(args.fetch_variable),
    }
}

/// `postfach acquire` against the open database.
pub(super) async fn acquire(pf: &Postfach, args: AcquireArgs) -> Result<Output, Failure> {
    let b = acquire_request(args);
    let jobs = match b.fetch_variables {
        None => pf.lock_jobs(&b.topic, b.max, &b.worker, b.lease_ms).await?,
        Some(fetch) => {
            pf.lock_jobs_fetching(&b.topic, b.max, &b.worker, b.lease_ms, fetch)
                .await?
        }
    };
    let list: Vec<Value> = jobs.iter().map(locked_job_json).collect();
    Ok(shown(json!({"jobs": list}), |d| acquire_text(&b.topic, d)))
}

pub(super) fn acquire_text(topic: &str, d: &Value) -> String {
    let jobs = each(&d["jobs"]);
    if jobs.is_empty() {
        return format!("no due job on topic {topic}");
    }
    jobs.iter()
        .map(|j| {
            format!(
                "job {} (instance {}, {}) lease token {} key {}",
                s(&j["job"]),
                s(&j["instance"]),
                s(&j["element"]),
                s(&j["lease_token"]),
                s(&j["idempotency_key"])
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `postfach extend` against the open database.
pub(super) async fn extend(pf: &Postfach, args: ExtendArgs) -> Result<Output, Failure> {
    let ExtendArgs {
        job_id,
        lease_token,
        by,
    } = args;
    let until = pf.extend_lease(job_id, lease_token, by).await?;
    Ok(shown(
        postfach::server::documents::lease(job_id, until),
        extend_text,
    ))
}

pub(super) fn extend_text(d: &Value) -> String {
    format!("job {} leased until {}", s(&d["job"]), s(&d["lease_until"]))
}

/// The request of `postfach fail`.
pub(super) fn fail_request(args: FailArgs) -> requests::FailBody {
    requests::FailBody {
        lease_token: args.lease_token,
        error: args.error,
        retries: args.retries,
        retry_delay_ms: args.retry_delay,
    }
}

/// `postfach fail` against the open database.
pub(super) async fn fail(pf: &Postfach, args: FailArgs) -> Result<Output, Failure> {
    let job_id = args.job_id;
    let b = fail_request(args);
    let state = pf
        .fail_job_with(job_id, b.lease_token, &b.error, b.retries, b.retry_delay_ms)
        .await?;
    let state = match state {
        postfach::JobState::Incident => "incident",
        _ => "ready",
    };
    Ok(shown(
        json!({"job": job_id.to_string(), "state": state}),
        fail_text,
    ))
}

pub(super) fn fail_text(d: &Value) -> String {
    format!(
        "job {}: attempt recorded, now {}",
        s(&d["job"]),
        s(&d["state"])
    )
}

/// The request of `postfach bpmn-error`.
pub(super) fn bpmn_error_request(args: BpmnErrorArgs) -> Result<requests::BpmnErrorBody, Failure> {
    Ok(requests::BpmnErrorBody {
        lease_token: args.lease_token,
        code: args.code,
        message: args.message,
        variables: parse_vars(&args.vars.var).map_err(usage)?,
    })
}

/// `postfach bpmn-error` against the open database.
pub(super) async fn bpmn_error(pf: &Postfach, args: BpmnErrorArgs) -> Result<Output, Failure> {
    let job_id = args.job_id;
    let b = bpmn_error_request(args)?;
    let caught = pf
        .throw_error(job_id, b.lease_token, &b.code, &b.message, b.variables)
        .await?;
    let doc = json!({"job": job_id.to_string(), "caught": caught, "state": if caught { "completed" } else { "incident" }});
    bpmn_error_answer(&b.code, doc)
}

/// A thrown BPMN error's answer: caught, or an incident (exit 3).
pub(super) fn bpmn_error_answer(code: &str, doc: Value) -> Result<Output, Failure> {
    if doc["caught"] != true {
        return Err(Failure {
            code: 3,
            message: format!(
                "BPMN error '{code}' of job {} is not caught by an error boundary event: the job is an incident",
                s(&doc["job"])
            ),
            json: Some(doc),
        });
    }
    let text = format!("BPMN error '{code}' caught by the task's error boundary event");
    Ok(shown(doc, |_| text))
}

/// The request of `postfach complete`.
pub(super) fn complete_request(args: CompleteArgs) -> Result<requests::CompleteBody, Failure> {
    Ok(requests::CompleteBody {
        lease_token: args.lease_token,
        variables: parse_vars(&args.vars.var).map_err(usage)?,
    })
}

/// `postfach complete` against the open database.
pub(super) async fn complete(pf: &Postfach, args: CompleteArgs) -> Result<Output, Failure> {
    let job_id = args.job_id;
    let b = complete_request(args)?;
    pf.complete_job(job_id, b.lease_token, b.variables).await?;
    Ok(shown(
        postfach::server::documents::job_completed(job_id),
        complete_text,
    ))
}

pub(super) fn complete_text(d: &Value) -> String {
    format!("job {} completed", s(&d["job"]))
}

/// `postfach work` against the open database.
pub(super) async fn work(pf: &Postfach, args: WorkArgs) -> Result<Output, Failure> {
    let WorkArgs {
        until_idle,
        invoice_ledger,
        invoice_delay,
    } = args;
    if let Some(path) = invoice_ledger {
        let ledger = postfach::reference::InvoiceLedger::open(&path).map_err(|e| Failure {
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
    let doc = if until_idle {
        postfach::contract::work_pass(pf).await?
    } else {
        let mut signals = super::serve::Signals::listen();
        let exec = pf.start_executor(postfach::jobs::ExecutorConfig::default());
        signals.next().await;
        let total = exec.stop().await?;
        postfach::contract::worked_json(pf, &total)?
    };
    Ok(shown(doc, work_text))
}

pub(super) fn work_text(d: &Value) -> String {
    format!(
        "ran {} async continuation(s); {} task job(s) wait for a handler or `postfach complete`",
        s(&d["continuations"]),
        s(&d["tasks_waiting"])
    )
}

/// A claim-check object fetched: (`gs://` URI, bytes).
pub(super) type Fetched = (String, Vec<u8>);

/// Exit code of `object` when the object does not exist.
pub(super) const OBJECT_MISSING: i32 = 4;

pub(super) async fn object_from_server(
    client: Client,
    job: u64,
    variable: &str,
) -> Result<Fetched, Failure> {
    let call = super::remote::Call::to("job_object")?.at(job).at(variable);
    let answer = client.answer(&call).await?;
    let server = &client.server;
    let status = answer.status.as_u16();
    if status == 200 {
        let name = answer.body_header("x-postfach-object").unwrap_or_default();
        return Ok((name, answer.body.to_vec()));
    }
    let doc = answer.json().unwrap_or_default();
    let message = doc["error"]
        .as_str()
        .map(String::from)
        .unwrap_or_else(|| format!("{server} answered {status}"));
    let code = match status {
        404 if doc["reason"] == "object_missing" => OBJECT_MISSING,
        400 | 422 => 2,
        _ => 1,
    };
    Err(Failure {
        code,
        message,
        json: None,
    })
}

pub(super) async fn object_from_store(
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
pub(super) async fn read_object(
    reference: &postfach::objects::ObjectRef,
) -> Result<Fetched, Failure> {
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
pub(super) async fn read_object(
    reference: &postfach::objects::ObjectRef,
) -> Result<Fetched, Failure> {
    Err(Failure {
        code: 1,
        message: format!(
            "{reference}: this build reads no Cloud Storage (feature `pubsub`); use --server"
        ),
        json: None,
    })
}

/// Writes a fetched object to `out`, or its bytes to stdout.
pub(super) fn deliver_object(
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

/// `postfach object`: from the server (`--server`) or the local database.
pub(super) async fn object(cli: &Cli, args: &ObjectArgs) -> Result<Output, Failure> {
    let bytes = match &cli.server {
        Some(_) => {
            object_from_server(super::remote::client_of(cli)?, args.job_id, &args.variable).await?
        }
        None => object_from_store(&cli.db, args.job_id, &args.variable).await?,
    };
    deliver_object(bytes, args.out.as_deref())
}
