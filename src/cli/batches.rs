//! `postfach batch …` and `postfach batches`: durable batch operations over
//! the filters of `instances` and `messages`, against the open database
//! (created, then worked off in the foreground with a progress bar) or a
//! server (created there, its batch runner works it off; followed here).
//!
//! Invariant: the request is built once ([`batch_request`]) and read the
//! same way by the library and the server; `--json` prints one document,
//! the progress bar goes to standard error and only to a terminal.

use super::prelude::*;
use super::remote::{Call, Client};
use super::values::{parse_instant, parse_variable_filter};
use clap::{Args, Subcommand};
use postfach::Postfach;
use postfach::server::http::requests::BatchBody;
use serde_json::{Value, json};

/// The arguments of `postfach batch`.
#[derive(Debug, Args)]
pub(crate) struct BatchArgs {
    #[command(subcommand)]
    pub(crate) what: BatchCommand,
}

/// What `postfach batch` does.
#[derive(Debug, Subcommand)]
pub(crate) enum BatchCommand {
    /// Cancel the running instances the filters choose.
    Cancel(On),
    /// Retry the jobs in an incident of the instances the filters choose.
    Retry(On),
    /// Migrate the running instances of a version to another.
    Migrate {
        /// The process id.
        #[arg(value_name = "PROCESS")]
        migrated: String,
        /// The version the instances run now.
        #[arg(long)]
        from_version: u32,
        /// The version they move to.
        #[arg(long)]
        to_version: u32,
        /// An element of the old version and its counterpart in the new.
        #[arg(long = "map", value_name = "OLD=NEW")]
        map: Vec<String>,
        #[command(flatten)]
        on: On,
    },
    /// Move each chosen instance's one token at --from to before --to.
    MoveToken {
        /// The element the token rests at.
        #[arg(long)]
        from: String,
        /// The element it moves to.
        #[arg(long)]
        to: String,
        #[command(flatten)]
        on: On,
    },
    /// Requeue the parked messages (of a reason).
    Requeue(OnMessages),
    /// Discard the parked messages (of a reason).
    Discard {
        /// Who discards them.
        #[arg(long)]
        by: String,
        /// Why.
        #[arg(long)]
        why: String,
        #[command(flatten)]
        on: OnMessages,
    },
    /// Delete the ended instances the filters choose, with their history.
    Delete(On),
    /// A batch's progress and its refused items.
    Status {
        /// The batch id.
        id: u64,
    },
    /// Stop a running batch.
    Stop {
        /// The batch id.
        id: u64,
    },
}

/// Which instances a batch takes: the filters of `instances`.
#[derive(Debug, Args)]
pub(crate) struct On {
    /// Only instances of this process.
    #[arg(long)]
    process: Option<String>,
    /// Only instances with a token at this element.
    #[arg(long)]
    waiting_at: Option<String>,
    /// active, incident, completed or cancelled
    #[arg(long, value_parser = ["active", "incident", "completed", "cancelled"])]
    state: Option<String>,
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
    /// Answer once the batch is created, without following it.
    #[arg(long)]
    detach: bool,
}

/// Which messages a batch takes: the parked ones (of a reason).
#[derive(Debug, Args)]
pub(crate) struct OnMessages {
    /// Only parked messages with this reason.
    #[arg(long)]
    reason: Option<String>,
    /// Answer once the batch is created, without following it.
    #[arg(long)]
    detach: bool,
}

/// The request a batch command sends (read locally the same way), and
/// whether to follow the batch; `None` for `status` and `stop`.
fn batch_request(what: BatchCommand) -> Result<Option<(BatchBody, bool)>, Failure> {
    let on = |operation: &str, o: On| {
        let (variable, value) = o.variable.unzip();
        let instant = |ms: Option<u64>| ms.map(postfach::clock::rfc3339);
        let body = BatchBody {
            operation: operation.into(),
            process: o.process,
            waiting_at: o.waiting_at,
            state: o.state,
            key: o.key,
            variable,
            value,
            started_from: instant(o.started_from),
            started_before: instant(o.started_before),
            has_incident: o.incident.then_some(true),
            ..BatchBody::default()
        };
        (body, !o.detach)
    };
    let messages = |operation: &str, o: OnMessages| {
        let body = BatchBody {
            operation: operation.into(),
            reason: o.reason,
            ..BatchBody::default()
        };
        (body, !o.detach)
    };
    Ok(Some(match what {
        BatchCommand::Cancel(o) => on("cancel", o),
        BatchCommand::Retry(o) => on("retry", o),
        BatchCommand::Delete(o) => on("delete", o),
        BatchCommand::Migrate {
            migrated,
            from_version,
            to_version,
            map,
            on: o,
        } => {
            let (mut b, follow) = on("migrate", o);
            b.process = Some(migrated);
            b.from_version = Some(from_version);
            b.to_version = Some(to_version);
            b.map = super::values::element_map(&map)?;
            (b, follow)
        }
        BatchCommand::MoveToken { from, to, on: o } => {
            let (mut b, follow) = on("move-token", o);
            (b.from, b.to) = (Some(from), Some(to));
            (b, follow)
        }
        BatchCommand::Requeue(o) => messages("requeue", o),
        BatchCommand::Discard { by, why, on: o } => {
            let (mut b, follow) = messages("discard", o);
            (b.by, b.why) = (Some(by), Some(why));
            (b, follow)
        }
        BatchCommand::Status { .. } | BatchCommand::Stop { .. } => return Ok(None),
    }))
}

/// A progress bar on standard error (drawn only on a terminal).
fn bar(items: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(items),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:30}] {pos}/{len} items ({per_sec}, {eta} left)",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// `postfach batch …` against the open database: created, then worked off
/// here unless `--detach` (a server opening the database goes on with it).
pub(super) async fn batch(pf: &Postfach, a: BatchArgs) -> Result<Output, Failure> {
    let (id, follow) = match a.what {
        BatchCommand::Status { id } => (id, false),
        BatchCommand::Stop { id } => {
            let rec = pf.stop_batch(id).await?;
            return Ok(shown(postfach::ops::batch_json(&rec, None), batch_text));
        }
        what => {
            let Some((body, follow)) = batch_request(what)? else {
                unreachable!("status and stop are answered above")
            };
            let (op, selection) = body.batch().map_err(usage)?;
            (pf.create_batch(op, &selection).await?.id, follow)
        }
    };
    if follow {
        return follow_local(pf, id).await;
    }
    shown_status(pf, id)
}

/// Works batch `id` (and any other running one) off here with a progress
/// bar, then shows it.
pub(super) async fn follow_local(pf: &Postfach, id: u64) -> Result<Output, Failure> {
    {
        let progress = bar(0);
        pf.run_batches(|b| {
            if b.id == id {
                progress.set_length(b.items);
                progress.set_position(b.next);
                progress.set_message(format!("batch {} {}", b.id, b.op.name()));
            }
        })
        .await?;
        progress.finish_and_clear();
    }
    shown_status(pf, id)
}

fn shown_status(pf: &Postfach, id: u64) -> Result<Output, Failure> {
    let status = pf
        .reader()?
        .batch(id, postfach::ops::REFUSED_SHOWN)?
        .ok_or(postfach::Error::Engine(
            postfach::EngineError::UnknownBatch(id),
        ))?;
    Ok(shown(
        postfach::ops::batch_json(&status.record, Some(&status)),
        batch_text,
    ))
}

/// `postfach batch …` against a server: created there and, unless
/// `--detach`, followed until each partition's batch has ended.
pub(super) async fn batch_over(c: &Client, a: BatchArgs) -> Result<Output, Failure> {
    let ids: Vec<String> = match a.what {
        BatchCommand::Status { id } => vec![id.to_string()],
        BatchCommand::Stop { id } => {
            let doc = c.call(&Call::to("stop_batch")?.at(id)).await?;
            return Ok(shown(doc, batch_text));
        }
        what => {
            let Some((body, follow)) = batch_request(what)? else {
                unreachable!("status and stop are answered above")
            };
            let doc = c.call(&Call::to("create_batch")?.body(&body)).await?;
            if !follow {
                return Ok(shown(doc, batch_text));
            }
            each(&doc["batches"]).iter().map(s).collect()
        }
    };
    let mut ends = Vec::new();
    for id in ids {
        ends.push(follow_over(c, &id).await?);
    }
    Ok(shown(gathered(ends), batch_text))
}

/// Batch `id` on the server, asked until it is no longer running.
async fn follow_over(c: &Client, id: &str) -> Result<Value, Failure> {
    let progress = bar(0);
    loop {
        let doc = c.call(&Call::to("batch")?.at(id)).await?;
        progress.set_length(doc["items"].as_u64().unwrap_or(0));
        progress.set_position(doc["reached"].as_u64().unwrap_or(0));
        progress.set_message(format!("batch {id} {}", s(&doc["operation"])));
        if doc["state"] != "running" {
            progress.finish_and_clear();
            return Ok(doc);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// One partition's batch as it is, or (a gateway's) every partition's under
/// `batches` with the counts added up.
fn gathered(mut ends: Vec<Value>) -> Value {
    if ends.len() == 1 {
        return ends.remove(0);
    }
    let sum = |k: &str| ends.iter().map(|d| d[k].as_u64().unwrap_or(0)).sum::<u64>();
    let running = ends.iter().any(|d| d["state"] == "running");
    json!({
        "batch": ends.first().map(|d| d["batch"].clone()),
        "operation": ends.first().map(|d| d["operation"].clone()),
        "state": if running { "running" } else { "done" },
        "items": sum("items"),
        "done": sum("done"),
        "refused": sum("refused"),
        "batches": ends,
    })
}

/// `postfach batches`: every batch with its progress.
pub(super) fn batches(pf: &Postfach) -> Result<Output, Failure> {
    let list = pf.reader()?.batches()?;
    let doc = json!({
        "batches": list.iter().map(|b| postfach::ops::batch_json(b, None)).collect::<Vec<_>>(),
    });
    Ok(shown(doc, batches_text))
}

/// The human text of one batch (and its refused items).
pub(super) fn batch_text(d: &Value) -> String {
    let mut text = format!(
        "batch {} {}: {} — {} of {} done, {} refused",
        s(&d["batch"]),
        s(&d["operation"]),
        s(&d["state"]),
        d["done"].as_u64().unwrap_or(0),
        d["items"].as_u64().unwrap_or(0),
        d["refused"].as_u64().unwrap_or(0)
    );
    for r in each(&d["refused_items"]) {
        text.push_str(&format!("\n  {}: {}", s(&r["item"]), s(&r["reason"])));
    }
    for b in each(&d["batches"]).iter().filter(|b| b.is_object()) {
        text.push_str(&format!("\n{}", batch_text(b)));
    }
    text
}

/// The human text of `batches`.
pub(super) fn batches_text(d: &Value) -> String {
    let list = each(&d["batches"]);
    if list.is_empty() {
        return "no batches".into();
    }
    list.iter().map(batch_text).collect::<Vec<_>>().join("\n")
}
