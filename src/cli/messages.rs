//! Messages: `publish`, `correlate`, `import`, `messages`, `requeue`,
//! `discard`.
//!
//! Invariant: each command owns its arguments, its human text and its JSON;
//! `import` answers every line, in memory bounded whatever the input.

use super::prelude::*;
use super::values::{MAX_LINE, VarArgs, parse_ttl, parse_vars};
use clap::Args;
use postfach::contract::delivery_json;
use postfach::limits;
use postfach::server::http::requests;
use postfach::{Delivery, Error, Outcome, Postfach, Publish, Reason, Vars};
use serde_json::{Value, json};

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

// The arguments of `postfach publish`.
#[derive(Debug, Args)]
pub(crate) struct PublishArgs {
    pub(crate) message: String,
    #[command(flatten)]
    pub(crate) target: MessageArgs,
    /// How long the message may wait for its subscription (30s, 15m, 24h, 7d; 0s = no buffering; at most 366d).
    #[arg(long, value_parser = parse_ttl)]
    pub(crate) ttl: Option<u64>,
}

// The arguments of `postfach correlate`.
#[derive(Debug, Args)]
pub(crate) struct CorrelateArgs {
    pub(crate) message: String,
    #[command(flatten)]
    pub(crate) target: MessageArgs,
}

// The arguments of `postfach import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// Messages in flight at once.
    #[arg(long, default_value_t = 256)]
    pub(crate) concurrency: usize,
}

// The arguments of `postfach messages`.
#[derive(Debug, Args)]
pub(crate) struct MessagesArgs {
    #[arg(long)]
    pub(crate) buffered: bool,
    #[arg(long)]
    pub(crate) parked: bool,
    /// ambiguous, late, expired, malformed, no_subscription or unknown_message
    #[arg(long)]
    pub(crate) reason: Option<String>,
}

// The arguments of `postfach requeue`.
#[derive(Debug, Args)]
pub(crate) struct RequeueArgs {
    pub(crate) message_id: String,
}

// The arguments of `postfach discard`.
#[derive(Debug, Args)]
pub(crate) struct DiscardArgs {
    pub(crate) message_id: String,
    #[arg(long)]
    pub(crate) why: String,
    /// Who discards it (recorded; default $USER).
    #[arg(long, env = "USER", default_value = "operator")]
    pub(crate) by: String,
}

/// The message of `postfach publish` or `correlate`, as the request that
/// carries it.
pub(super) fn message_request(
    message: String,
    target: MessageArgs,
    ttl: Option<u64>,
) -> Result<requests::MessageBody, Failure> {
    Ok(requests::MessageBody {
        name: message,
        key: target.key,
        id: target.id,
        variables: parse_vars(&target.vars.var).map_err(usage)?,
        ttl: ttl.map(|ms| format!("{ms}ms")),
    })
}

/// `postfach publish` against the open database.
pub(super) async fn publish(pf: &Postfach, args: PublishArgs) -> Result<Output, Failure> {
    let d = pf
        .publish(to_publish(args.message, args.target, args.ttl)?)
        .await?;
    Ok(shown(delivery_json(&d), delivery_text))
}

/// `postfach correlate` against the open database.
pub(super) async fn correlate(pf: &Postfach, args: CorrelateArgs) -> Result<Output, Failure> {
    let CorrelateArgs { message, target } = args;
    let p = to_publish(message, target, None)?;
    let id = p.message_id.clone().unwrap_or_default();
    Ok(match pf.correlate(p).await {
        Ok(d) => shown(delivery_json(&d), delivery_text),
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
            return Err(rejected(&name, &key, delivery_json(&d)));
        }
        Err(e) => return Err(e.into()),
    })
}

/// A synchronous correlation that found no single waiting instance (exit
/// 3), with the rejection's document.
pub(super) fn rejected(name: &str, key: &str, doc: Value) -> Failure {
    let candidates = items(&doc["candidates"]);
    let e = Error::Rejected {
        name: name.to_string(),
        key: key.to_string(),
        reason: doc["reason"]
            .as_str()
            .and_then(Reason::parse)
            .map_or("rejected", Reason::as_str),
        candidates: candidates.iter().filter_map(|c| c.parse().ok()).collect(),
    };
    Failure {
        code: 3,
        message: e.to_string(),
        json: Some(doc),
    }
}

/// `postfach import` against the open database.
pub(super) async fn import(pf: &Postfach, args: ImportArgs) -> Result<Output, Failure> {
    let ImportArgs { concurrency } = args;
    import_lines(pf, concurrency.max(1)).await
}

/// The query of `postfach messages`.
pub(super) fn messages_query(args: MessagesArgs) -> requests::MessagesQuery {
    requests::MessagesQuery {
        buffered: args.buffered,
        parked: args.parked,
        reason: args.reason,
        after: None,
        limit: Some(postfach::server::http::MAX_PAGE),
    }
}

/// `postfach messages` against the open database.
pub(super) async fn messages(pf: &Postfach, args: MessagesArgs) -> Result<Output, Failure> {
    let filter = messages_query(args)
        .filter()
        .map_err(|e| usage(format!("--reason: {e}")))?;
    let list = pf.reader()?.messages(&filter)?;
    Ok(shown(json!({"messages": list}), messages_text))
}

pub(super) fn messages_text(d: &Value) -> String {
    let mut text = String::new();
    for m in each(&d["messages"]) {
        let candidates = joined(&m["candidates"]);
        text.push_str(&format!(
            "{:<20} {:<22} key={:<12} {:<8} {}{}\n",
            s(&m["message_id"]),
            s(&m["name"]),
            s(&m["key"]),
            s(&m["state"]),
            s(&m["reason"]),
            if candidates.is_empty() {
                String::new()
            } else {
                format!(" candidates: {candidates}")
            }
        ));
    }
    if text.is_empty() {
        text = "no buffered or parked messages".into();
    }
    super::instances::missing_note(d, text.trim_end())
}

/// `postfach requeue` against the open database.
pub(super) async fn requeue(pf: &Postfach, args: RequeueArgs) -> Result<Output, Failure> {
    let RequeueArgs { message_id } = args;
    let d = pf.requeue(&message_id).await?;
    Ok(shown(delivery_json(&d), delivery_text))
}

/// The request of `postfach discard`.
pub(super) fn discard_request(args: &DiscardArgs) -> requests::DiscardBody {
    requests::DiscardBody {
        why: args.why.clone(),
        by: args.by.clone(),
    }
}

/// `postfach discard` against the open database.
pub(super) async fn discard(pf: &Postfach, args: DiscardArgs) -> Result<Output, Failure> {
    let b = discard_request(&args);
    pf.discard(&args.message_id, &b.by, &b.why).await?;
    Ok(shown(
        json!({"message_id": args.message_id, "state": "discarded", "why": b.why, "by": b.by}),
        discard_text,
    ))
}

pub(super) fn discard_text(d: &Value) -> String {
    format!(
        "{} discarded by {}: {}",
        s(&d["message_id"]),
        s(&d["by"]),
        s(&d["why"])
    )
}

/// A delivery's outcome in one line.
pub(super) fn delivery_text(d: &Value) -> String {
    let mut text = format!("{} {}", s(&d["message_id"]), s(&d["outcome"]));
    if let (Some(i), Some(e)) = (d["instance"].as_str(), d["element"].as_str()) {
        text.push_str(&format!(" → instance {i} at {e}"));
    }
    if let Some(r) = d["reason"].as_str() {
        text.push_str(&format!(" (reason: {r})"));
    }
    let candidates = joined(&d["candidates"]);
    if !candidates.is_empty() {
        text.push_str(&format!(" candidates: {candidates}"));
    }
    if let Some(x) = d["expires_at"].as_str() {
        text.push_str(&format!(" until {x}"));
    }
    text
}

pub(super) fn to_publish(
    message: String,
    target: MessageArgs,
    ttl: Option<u64>,
) -> Result<Publish, Failure> {
    Ok(Publish {
        name: message,
        key: target.key,
        message_id: target.id,
        variables: parse_vars(&target.vars.var).map_err(usage)?,
        ttl,
        attributes: Vec::new(),
    })
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ImportLine {
    name: String,
    key: String,
    id: Option<String>,
    #[serde(default)]
    variables: Vars,
    ttl: Option<String>,
}

/// Publishes JSON lines from stdin; prints each outcome as a JSON line once durable.
async fn import_lines(pf: &Postfach, concurrency: usize) -> Result<Output, Failure> {
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
pub(super) fn next_line(
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
