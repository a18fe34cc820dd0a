//! Deploying, starting and looking at instances: `deploy`, `start`,
//! `signal`, `instance`, `instances`, `statistics`.
//!
//! Invariant: each command owns its arguments, its human text and its JSON;
//! the JSON is what docs/cli.md documents.

use super::prelude::*;
use super::values::{
    VarArgs, age, correlation_keys, parse_instant, parse_variable_filter, parse_vars, read_bounded,
    send_topics,
};
use clap::Args;
use postfach::server::http::requests;
use postfach::{Error, Postfach};
use serde_json::{Value, json};
use std::path::PathBuf;

// The arguments of `postfach deploy`.
#[derive(Debug, Args)]
pub(crate) struct DeployArgs {
    /// The BPMN 2.0 XML file.
    pub(crate) file: PathBuf,
    /// Correlation key variable per message name: MESSAGE=VARIABLE (repeatable).
    #[arg(long = "correlation-key", value_name = "MESSAGE=VARIABLE")]
    pub(crate) correlation_key: Vec<String>,
    /// Bind a send task to a Pub/Sub topic (outbox): ELEMENT=TOPIC (repeatable).
    #[arg(long = "send-topic", value_name = "ELEMENT=TOPIC")]
    pub(crate) send_topic: Vec<String>,
    /// Refuse the model when something in it would not run as written
    /// (listeners, Java classes, mappings, skipped pools) instead of warning.
    #[arg(long)]
    pub(crate) strict: bool,
}

// The arguments of `postfach start`.
#[derive(Debug, Args)]
pub(crate) struct StartArgs {
    pub(crate) process: String,
    #[command(flatten)]
    pub(crate) vars: VarArgs,
    #[arg(long)]
    pub(crate) business_key: Option<String>,
}

// The arguments of `postfach signal`.
#[derive(Debug, Args)]
pub(crate) struct SignalArgs {
    pub(crate) name: String,
    #[command(flatten)]
    pub(crate) vars: VarArgs,
    /// Apply it once per id: the same id again changes nothing and prints
    /// what the first reached (a cluster sends a signal to each partition with
    /// one id, so a retry is safe).
    #[arg(long, value_name = "ID")]
    pub(crate) id: Option<String>,
}

// The arguments of `postfach conditions`.
#[derive(Debug, Args)]
pub(crate) struct ConditionsArgs {
    /// Only this process's conditional start events (default: every
    /// deployed process's).
    #[arg(long, value_name = "PROCESS_ID")]
    pub(crate) process: Option<String>,
    #[command(flatten)]
    pub(crate) vars: VarArgs,
}

// The arguments of `postfach decide`.
#[derive(Debug, Args)]
pub(crate) struct DecideArgs {
    /// The decision's id.
    pub(crate) decision: String,
    #[command(flatten)]
    pub(crate) vars: VarArgs,
}

// The arguments of `postfach instance`.
#[derive(Debug, Args)]
pub(crate) struct InstanceArgs {
    pub(crate) id: u64,
}

// The arguments of `postfach instances`.
#[derive(Debug, Args)]
pub(crate) struct InstancesArgs {
    #[arg(long)]
    pub(crate) waiting_at: Option<String>,
    /// active, incident, completed or cancelled
    #[arg(long, value_parser = ["active", "incident", "completed", "cancelled"])]
    pub(crate) state: Option<String>,
    /// Only instances of this process.
    #[arg(long)]
    pub(crate) process: Option<String>,
    /// Only instances that wait for, expect or caught a message with this correlation key.
    #[arg(long)]
    pub(crate) key: Option<String>,
    /// Only instances whose variable has this value (strings as is, others as JSON).
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_variable_filter)]
    pub(crate) variable: Option<(String, String)>,
    /// Started at or after this instant (RFC 3339).
    #[arg(long, value_parser = parse_instant)]
    pub(crate) started_from: Option<u64>,
    /// Started before this instant (RFC 3339).
    #[arg(long, value_parser = parse_instant)]
    pub(crate) started_before: Option<u64>,
    /// Only instances with an incident.
    #[arg(long)]
    pub(crate) incident: bool,
}

// The arguments of `postfach statistics`.
#[derive(Debug, Args)]
pub(crate) struct StatisticsArgs {
    pub(crate) process: String,
    /// The definition version (default: the latest).
    #[arg(long)]
    pub(crate) version: Option<u32>,
}

/// The model and keys of `postfach deploy`, as the request that carries them:
/// the file is read here, on the caller's side.
pub(super) fn deploy_request(args: &DeployArgs) -> Result<requests::DeployBody, Failure> {
    let mut correlation_keys = correlation_keys(&args.correlation_key)?;
    for (element, topic) in send_topics(&args.send_topic)? {
        correlation_keys.insert(postfach::model::send_topic_override(&element), topic);
    }
    Ok(requests::DeployBody {
        file: Some(args.file.display().to_string()),
        xml: read_bounded(&args.file, postfach::model::MAX_SIZE, "BPMN model")?,
        correlation_keys,
        strict: args.strict,
    })
}

/// `postfach deploy` against the open database.
pub(super) async fn deploy(pf: &Postfach, args: DeployArgs) -> Result<Output, Failure> {
    let b = deploy_request(&args)?;
    let name = b.file.clone().unwrap_or_default();
    let deployment = pf
        .deploy_checked(&name, &b.xml, b.correlation_keys, b.strict)
        .await?;
    let doc = postfach::contract::deployment_json(&deployment);
    Ok(shown(doc, |d| deploy_text(&name, d)))
}

/// What a deploy stored, and its warnings naming the file.
pub(super) fn deploy_text(name: &str, d: &Value) -> String {
    each(&d["deployed"])
        .iter()
        .map(|d| {
            format!(
                "{}{} version {}{}",
                if d["kind"] == "decision" {
                    "decision "
                } else {
                    ""
                },
                s(&d["process"]),
                s(&d["version"]),
                if d["new_version"] == false {
                    " (unchanged)"
                } else {
                    ""
                }
            )
        })
        .chain(each(&d["warnings"]).iter().map(|w| {
            format!(
                "warning: {name}:{}: '{}': {} (--strict refuses this)",
                s(&w["line"]),
                s(&w["element"]),
                s(&w["message"])
            )
        }))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The request of `postfach start`.
pub(super) fn start_request(args: StartArgs) -> Result<requests::StartBody, Failure> {
    Ok(requests::StartBody {
        process: args.process,
        variables: parse_vars(&args.vars.var).map_err(usage)?,
        business_key: args.business_key,
    })
}

/// `postfach start` against the open database.
pub(super) async fn start(pf: &Postfach, args: StartArgs) -> Result<Output, Failure> {
    let b = start_request(args)?;
    let id = pf.start(&b.process, b.variables, b.business_key).await?;
    Ok(shown(json!({"instance": id.to_string()}), start_text))
}

pub(super) fn start_text(d: &Value) -> String {
    format!("started instance {}", s(&d["instance"]))
}

/// The request of `postfach signal`.
pub(super) fn signal_request(args: SignalArgs) -> Result<requests::SignalBody, Failure> {
    Ok(requests::SignalBody {
        name: args.name,
        variables: parse_vars(&args.vars.var).map_err(usage)?,
        id: args.id,
    })
}

/// `postfach signal` against the open database.
pub(super) async fn signal(pf: &Postfach, args: SignalArgs) -> Result<Output, Failure> {
    let b = signal_request(args)?;
    let n = match &b.id {
        Some(id) => pf.signal_once(id, &b.name, b.variables).await?,
        None => pf.signal(&b.name, b.variables).await?,
    };
    let doc = postfach::server::documents::signal(&b.name, n, b.id.as_deref());
    Ok(shown(doc, signal_text))
}

pub(super) fn signal_text(d: &Value) -> String {
    let name = s(&d["signal"]);
    match d["reached"].as_u64() {
        Some(0) => format!("signal {name} reached no subscription (counted as signals_unreached)"),
        _ => format!("signal {name} reached {} subscription(s)", s(&d["reached"])),
    }
}

/// The request of `postfach conditions`.
pub(super) fn conditions_request(
    args: ConditionsArgs,
) -> Result<requests::ConditionsBody, Failure> {
    Ok(requests::ConditionsBody {
        process: args.process,
        variables: parse_vars(&args.vars.var).map_err(usage)?,
    })
}

/// `postfach conditions`: the variables offered to the conditional start
/// events; prints the instances started.
pub(super) async fn conditions(pf: &Postfach, args: ConditionsArgs) -> Result<Output, Failure> {
    let b = conditions_request(args)?;
    let ids = pf
        .start_by_conditions(b.process.as_deref(), b.variables)
        .await?;
    Ok(shown(
        postfach::server::documents::started(&ids),
        conditions_text,
    ))
}

pub(super) fn conditions_text(d: &Value) -> String {
    let started = items(&d["started"]);
    if started.is_empty() {
        "no conditional start event's condition holds: nothing started".to_string()
    } else {
        format!(
            "started {} instance(s): {}",
            started.len(),
            started.join(", ")
        )
    }
}

/// The request of `postfach decide`.
pub(super) fn decide_request(args: DecideArgs) -> Result<requests::EvaluateBody, Failure> {
    Ok(requests::EvaluateBody {
        variables: parse_vars(&args.vars.var).map_err(usage)?,
    })
}

/// `postfach decide`: a decision's value for the variables given.
pub(super) fn decide(pf: &Postfach, args: DecideArgs) -> Result<Output, Failure> {
    let decision = args.decision.clone();
    let b = decide_request(args)?;
    let d = pf.decide(&decision, &b.variables)?;
    Ok(shown(
        serde_json::to_value(&d).unwrap_or_default(),
        decide_text,
    ))
}

pub(super) fn decide_text(d: &Value) -> String {
    let rules = items(&d["rules"]);
    let rules = if rules.is_empty() {
        "no rule".to_string()
    } else {
        format!("rules {}", rules.join(", "))
    };
    format!(
        "{} v{}: {} ({rules} matched)",
        s(&d["decision"]),
        s(&d["version"]),
        d["value"]
    )
}

/// `postfach decisions`: the deployed decisions.
pub(super) fn decisions(pf: &Postfach) -> Result<Output, Failure> {
    let list = pf.reader()?.decisions()?;
    Ok(shown(json!({"decisions": list}), decisions_text))
}

pub(super) fn decisions_text(d: &Value) -> String {
    let list = each(&d["decisions"]);
    if list.is_empty() {
        return "no decision is deployed".to_string();
    }
    list.iter()
        .map(|d| {
            format!(
                "{} v{} ({}, {}, deployed {})",
                s(&d["id"]),
                s(&d["version"]),
                s(&d["name"]),
                s(&d["file"]),
                s(&d["deployed_at"])
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `postfach instance` against the open database: the instance with the
/// subscriptions, jobs and messages of `GET /instances/{id}`.
pub(super) async fn instance(pf: &Postfach, args: InstanceArgs) -> Result<Output, Failure> {
    let InstanceArgs { id } = args;
    let v = pf
        .reader()?
        .instance_detail(id)?
        .ok_or_else(|| Error::from(postfach::EngineError::UnknownInstance(id)))?;
    Ok(shown(
        serde_json::to_value(&v).unwrap_or(Value::Null),
        instance_text,
    ))
}

pub(super) fn instance_text(v: &Value) -> String {
    let mut text = format!(
        "instance {} of {} v{}: {}\nwaiting at: {}\nvariables: {}\n",
        s(&v["instance"]),
        s(&v["process"]),
        s(&v["version"]),
        s(&v["state"]),
        joined(&v["waiting_at"]),
        v.get("variables").unwrap_or(&json!({}))
    );
    for i in items(&v["incidents"]) {
        text.push_str(&format!("incident: {i}\n"));
    }
    let tokens = each(&v["tokens"]);
    if !tokens.is_empty() {
        text.push_str("tokens (for add-token, move-token, cancel-token):\n");
    }
    for t in tokens {
        let mut place = match t.get("scope") {
            Some(scope) if !scope.is_null() => format!("in scope {}", s(scope)),
            _ => String::new(),
        };
        if let Some(locals) = t.get("locals").filter(|l| l.is_object()) {
            place = format!("{place}; local {locals}");
        }
        let place = if place.is_empty() {
            String::new()
        } else {
            format!("  ({place})")
        };
        text.push_str(&format!(
            "  {:>4}  {:<24} waits for {}{place}\n",
            s(&t["token"]),
            s(&t["element"]),
            s(&t["waits_for"])
        ));
    }
    text.push_str("history:\n");
    for h in each(&v["history"]) {
        text.push_str(&format!(
            "  {}  {:<24} {}\n",
            s(&h["at"]),
            s(&h["element"]),
            s(&h["event"])
        ));
    }
    text.trim_end().to_string()
}

/// The query of `postfach instances`: every instance, oldest first.
pub(super) fn instances_query(args: InstancesArgs) -> requests::InstancesQuery {
    let (variable, value) = args.variable.unzip();
    let instant = |ms: Option<u64>| ms.map(postfach::clock::rfc3339);
    requests::InstancesQuery {
        waiting_at: args.waiting_at,
        state: args.state,
        process: args.process,
        key: args.key,
        variable,
        value,
        started_from: instant(args.started_from),
        started_before: instant(args.started_before),
        has_incident: args.incident.then_some(true),
        after: None,
        limit: Some(postfach::server::http::MAX_PAGE),
        order: Some("oldest".into()),
    }
}

/// `postfach instances` against the open database.
pub(super) async fn instances(pf: &Postfach, args: InstancesArgs) -> Result<Output, Failure> {
    let filter = instances_query(args).filter().map_err(usage)?;
    let r = pf.reader()?;
    let list = r.instances(&filter)?;
    let mut doc = json!({ "instances": list });
    if let Some(el) = &filter.waiting_at {
        // the same filtered instances, with the age of their wait
        let listed: std::collections::HashSet<&str> =
            list.iter().map(|v| v.instance.as_str()).collect();
        let rows: Vec<_> = r
            .waiting_at(el)?
            .into_iter()
            .filter(|w| listed.contains(w.instance.as_str()))
            .collect();
        doc["waiting"] = json!(rows);
    }
    Ok(shown(doc, instances_text))
}

pub(super) fn instances_text(d: &Value) -> String {
    let mut text = String::new();
    if let Some(waiting) = d.get("waiting").and_then(Value::as_array) {
        // oldest wait first
        for w in waiting {
            text.push_str(&format!(
                "{:>8}  waiting at {} since {} ({})\n",
                s(&w["instance"]),
                s(&w["element"]),
                s(&w["since"]),
                age(w["age_ms"].as_u64().unwrap_or(0))
            ));
        }
    } else {
        for v in each(&d["instances"]) {
            text.push_str(&format!(
                "{:>8}  {:<10} {} at {}\n",
                s(&v["instance"]),
                s(&v["state"]),
                s(&v["process"]),
                joined(&v["waiting_at"])
            ));
        }
    }
    if text.is_empty() {
        text = "no instances".into();
    }
    missing_note(d, text.trim_end())
}

/// A list's text with the partitions a gateway could not read named.
pub(super) fn missing_note(d: &Value, text: &str) -> String {
    match d.get("missing").map(each) {
        Some(missing) if !missing.is_empty() => format!(
            "{text}\nnot read (partitions down): {}",
            missing
                .iter()
                .map(|m| s(&m["partition"]))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => text.to_string(),
    }
}

/// `postfach statistics` against the open database.
pub(super) async fn statistics(pf: &Postfach, args: StatisticsArgs) -> Result<Output, Failure> {
    let StatisticsArgs { process, version } = args;
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
    Ok(shown(json!(st), statistics_text))
}

pub(super) fn statistics_text(st: &Value) -> String {
    let mut text = format!(
        "{} version {} (latest {})\n",
        s(&st["process"]),
        s(&st["version"]),
        s(&st["latest_version"])
    );
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    for e in each(&st["elements"]) {
        let mut parts = Vec::new();
        if n(&e["waiting"]) > 0 {
            parts.push(format!(
                "{} waiting (oldest {})",
                n(&e["waiting"]),
                e["oldest_wait_ms"]
                    .as_u64()
                    .map(postfach::limits::human)
                    .unwrap_or_default()
            ));
        }
        if n(&e["jobs_ready"]) > 0 {
            parts.push(format!("{} jobs ready", n(&e["jobs_ready"])));
        }
        if n(&e["incidents"]) > 0 {
            parts.push(format!("{} incidents", n(&e["incidents"])));
        }
        if let Some(m) = e["message"].as_str() {
            let parked: u64 = e["parked"]
                .as_object()
                .map(|p| p.values().map(n).sum())
                .unwrap_or(0);
            parts.push(format!(
                "message {m}: {} buffered, {parked} parked",
                n(&e["buffered"])
            ));
        }
        let figures = if parts.is_empty() {
            "-".to_string()
        } else {
            parts.join(", ")
        };
        text.push_str(&format!(
            "  {:<24} {:<20} {figures}\n",
            s(&e["element"]),
            s(&e["kind"])
        ));
    }
    text.trim_end().to_string()
}
