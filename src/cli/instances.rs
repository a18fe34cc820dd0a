//! Deploying, starting and looking at instances: `deploy`, `start`,
//! `signal`, `instance`, `instances`, `statistics`.
//!
//! Invariant: each command owns its arguments, its human text and its JSON;
//! the JSON is what docs/cli.md documents.

use super::Output;
use super::failure::{Failure, out, usage};
use super::values::{
    Sources, VarArgs, age, correlation_keys, parse_instant, parse_variable_filter, parse_vars,
    send_topics,
};
use clap::Args;
use postfach::ops::InstanceFilter;
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

/// `postfach deploy` against the open database.
pub(super) async fn deploy(
    pf: &Postfach,
    args: DeployArgs,
    sources: &Sources<'_>,
) -> Result<Output, Failure> {
    let DeployArgs {
        file,
        correlation_key,
        send_topic,
        strict,
    } = args;
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
                "{}{} version {}{}",
                if d.decision { "decision " } else { "" },
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
    Ok(out(postfach::contract::deployment_json(&deployment), text))
}

/// `postfach start` against the open database.
pub(super) async fn start(pf: &Postfach, args: StartArgs) -> Result<Output, Failure> {
    let StartArgs {
        process,
        vars,
        business_key,
    } = args;
    let v = parse_vars(&vars.var).map_err(usage)?;
    let id = pf.start(&process, v, business_key).await?;
    Ok(out(
        json!({"instance": id.to_string()}),
        format!("started instance {id}"),
    ))
}

/// `postfach signal` against the open database.
pub(super) async fn signal(pf: &Postfach, args: SignalArgs) -> Result<Output, Failure> {
    let SignalArgs { name, vars, id } = args;
    let vars = parse_vars(&vars.var).map_err(usage)?;
    let n = match &id {
        Some(id) => pf.signal_once(id, &name, vars).await?,
        None => pf.signal(&name, vars).await?,
    };
    let text = if n == 0 {
        format!("signal {name} reached no subscription (counted as signals_unreached)")
    } else {
        format!("signal {name} reached {n} subscription(s)")
    };
    Ok(out(
        postfach::server::documents::signal(&name, n, id.as_deref()),
        text,
    ))
}

/// `postfach conditions`: the variables offered to the conditional start
/// events; prints the instances started.
pub(super) async fn conditions(pf: &Postfach, args: ConditionsArgs) -> Result<Output, Failure> {
    let ConditionsArgs { process, vars } = args;
    let vars = parse_vars(&vars.var).map_err(usage)?;
    let ids = pf.start_by_conditions(process.as_deref(), vars).await?;
    let text = if ids.is_empty() {
        "no conditional start event's condition holds: nothing started".to_string()
    } else {
        let list: Vec<String> = ids.iter().map(u64::to_string).collect();
        format!("started {} instance(s): {}", ids.len(), list.join(", "))
    };
    Ok(out(postfach::server::documents::started(&ids), text))
}

/// `postfach decide`: a decision's value for the variables given.
pub(super) fn decide(pf: &Postfach, args: DecideArgs) -> Result<Output, Failure> {
    let DecideArgs { decision, vars } = args;
    let vars = parse_vars(&vars.var).map_err(usage)?;
    let d = pf.decide(&decision, &vars)?;
    let rules = if d.rules.is_empty() {
        "no rule".to_string()
    } else {
        format!("rules {}", d.rules.join(", "))
    };
    let text = format!(
        "{} v{}: {} ({rules} matched)",
        d.decision, d.version, d.value
    );
    Ok(out(serde_json::to_value(&d).unwrap_or_default(), text))
}

/// `postfach decisions`: the deployed decisions.
pub(super) fn decisions(pf: &Postfach) -> Result<Output, Failure> {
    let list = pf.reader()?.decisions()?;
    let text = if list.is_empty() {
        "no decision is deployed".to_string()
    } else {
        list.iter()
            .map(|d| {
                format!(
                    "{} v{} ({}, {}, deployed {})",
                    d.id, d.version, d.name, d.file, d.deployed_at
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(out(json!({"decisions": list}), text))
}

/// `postfach instance` against the open database.
pub(super) async fn instance(pf: &Postfach, args: InstanceArgs) -> Result<Output, Failure> {
    let InstanceArgs { id } = args;
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
    Ok(out(
        serde_json::to_value(&v).unwrap_or(Value::Null),
        text.trim_end().to_string(),
    ))
}

/// `postfach instances` against the open database.
pub(super) async fn instances(pf: &Postfach, args: InstancesArgs) -> Result<Output, Failure> {
    let InstancesArgs {
        waiting_at,
        state,
        process,
        key,
        variable,
        started_from,
        started_before,
        incident,
    } = args;
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
    Ok(out(json!({"instances": list}), text.trim_end().to_string()))
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
    Ok(out(json!(st), text.trim_end().to_string()))
}
