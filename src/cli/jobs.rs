//! Jobs and workers: `jobs`, `retry`, `object`, `complete`, `acquire`,
//! `extend`, `fail`, `bpmn-error`, `work`.
//!
//! Invariant: each command owns its arguments, its human text and its JSON;
//! a worker's call carries the lease token it holds.

use super::failure::{Failure, out, usage};
use super::remote::{Client, with_token};
use super::serve::shutdown_signal;
use super::values::{
    Sources, VarArgs, parse_configured, parse_fetch, parse_lease, parse_lease_extension, parse_max,
    parse_retry_delay, parse_vars, parse_worker,
};
use super::{Cli, Output};
use clap::Args;
use postfach::clock::rfc3339;
use postfach::contract::locked_job_json;
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

/// `postfach jobs` against the open database.
pub(super) async fn jobs(pf: &Postfach, args: JobsArgs) -> Result<Output, Failure> {
    let JobsArgs { incidents } = args;
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
    Ok(out(json!({"jobs": list}), text.trim_end().to_string()))
}

/// `postfach retry` against the open database.
pub(super) async fn retry(
    pf: &Postfach,
    args: RetryArgs,
    sources: &Sources<'_>,
) -> Result<Output, Failure> {
    let RetryArgs { job_id } = args;
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
    Ok(out(v, text))
}

/// `postfach acquire` against the open database.
pub(super) async fn acquire(pf: &Postfach, args: AcquireArgs) -> Result<Output, Failure> {
    let AcquireArgs {
        topic,
        worker,
        max,
        lease,
        fetch_variable,
    } = args;
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
    Ok(out(json!({"jobs": list}), text))
}

/// `postfach extend` against the open database.
pub(super) async fn extend(pf: &Postfach, args: ExtendArgs) -> Result<Output, Failure> {
    let ExtendArgs {
        job_id,
        lease_token,
        by,
    } = args;
    let until = pf.extend_lease(job_id, lease_token, by).await?;
    Ok(out(
        postfach::server::documents::lease(job_id, until),
        format!("job {job_id} leased until {}", rfc3339(until)),
    ))
}

/// `postfach fail` against the open database.
pub(super) async fn fail(pf: &Postfach, args: FailArgs) -> Result<Output, Failure> {
    let FailArgs {
        job_id,
        lease_token,
        error,
        retries,
        retry_delay,
    } = args;
    let state = pf
        .fail_job_with(job_id, lease_token, &error, retries, retry_delay)
        .await?;
    let s = match state {
        postfach::JobState::Incident => "incident",
        _ => "ready",
    };
    Ok(out(
        json!({"job": job_id.to_string(), "state": s}),
        format!("job {job_id}: attempt recorded, now {s}"),
    ))
}

/// `postfach bpmn-error` against the open database.
pub(super) async fn bpmn_error(pf: &Postfach, args: BpmnErrorArgs) -> Result<Output, Failure> {
    let BpmnErrorArgs {
        job_id,
        lease_token,
        code,
        message,
        vars,
    } = args;
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
            json: Some(json!({"job": job_id.to_string(), "caught": false, "state": "incident"})),
        });
    }
    Ok(out(
        json!({"job": job_id.to_string(), "caught": true}),
        format!("BPMN error '{code}' caught by the task's error boundary event"),
    ))
}

/// `postfach complete` against the open database.
pub(super) async fn complete(pf: &Postfach, args: CompleteArgs) -> Result<Output, Failure> {
    let CompleteArgs {
        job_id,
        vars,
        lease_token,
    } = args;
    pf.complete_job(job_id, lease_token, parse_vars(&vars.var).map_err(usage)?)
        .await?;
    Ok(out(
        postfach::server::documents::job_completed(job_id),
        format!("job {job_id} completed"),
    ))
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
    Ok(out(
        json!({"continuations": total.continuations, "tasks_completed": total.tasks_completed, "tasks_failed": total.tasks_failed, "tasks_waiting": waiting}),
        format!(
            "ran {} async continuation(s); {} task job(s) wait for a handler or `postfach complete`",
            total.continuations, waiting
        ),
    ))
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
            object_from_server(super::remote::client_of(cli), args.job_id, &args.variable).await?
        }
        None => object_from_store(&cli.db, args.job_id, &args.variable).await?,
    };
    deliver_object(bytes, args.out.as_deref())
}
