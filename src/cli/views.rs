//! What is deployed and what a running server reports about itself:
//! `processes` (with `--xml`, a version's model), and with `--server` only
//! `alarms`, `partition`, `health` and `metrics`.
//!
//! Invariant: each command owns its arguments and its human text; a view of
//! a running server is refused without `--server` instead of being made up
//! from the file.

use super::prelude::*;
use super::remote::{Call, Client};
use clap::Args;
use postfach::Postfach;
use postfach::server::http::requests;
use serde_json::{Value, json};

// The arguments of `postfach processes`.
#[derive(Debug, Args)]
pub(crate) struct ProcessesArgs {
    /// Print the BPMN XML this process was deployed from instead.
    #[arg(long, value_name = "PROCESS_ID")]
    pub(crate) xml: Option<String>,
    /// With --xml: the definition version (default: the latest).
    #[arg(long, requires = "xml")]
    pub(crate) version: Option<u32>,
}

// The arguments of `postfach health`.
#[derive(Debug, Args)]
pub(crate) struct HealthArgs {
    /// Only whether the process serves HTTP (liveness), not whether it is ready.
    #[arg(long)]
    pub(crate) live: bool,
}

/// Why a server's own view is refused without `--server`.
pub(super) fn server_only(command: &str) -> Failure {
    usage(format!(
        "{command} is what a running server reports: give --server URL (or $POSTFACH_SERVER)"
    ))
}

/// `postfach processes` against the open database.
pub(super) fn processes(pf: &Postfach, args: ProcessesArgs) -> Result<Output, Failure> {
    let r = pf.reader()?;
    match args.xml {
        Some(id) => match r.source(&id, args.version)? {
            Some(xml) => Ok(xml_output(&id, xml)),
            None => Err(Failure {
                code: 1,
                message: format!(
                    "no BPMN source of process '{id}'{}: not deployed, or deployed before postfach kept sources (deploy it again)",
                    args.version
                        .map(|v| format!(" version {v}"))
                        .unwrap_or_default()
                ),
                json: None,
            }),
        },
        None => Ok(shown(json!({"processes": r.deployed()?}), processes_text)),
    }
}

/// A version's model: its XML as the text, `{"process", "xml"}` as JSON.
fn xml_output(id: &str, xml: String) -> Output {
    Output {
        json: json!({"process": id, "xml": xml}),
        text: xml,
    }
}

fn processes_text(d: &Value) -> String {
    let list = each(&d["processes"]);
    if list.is_empty() {
        return "no process is deployed".into();
    }
    list.iter()
        .map(|p| {
            let versions: Vec<String> = each(&p["versions"])
                .iter()
                .map(|v| format!("v{} ({})", s(&v["version"]), s(&v["deployed_at"])))
                .collect();
            format!(
                "{} latest v{}: {}",
                s(&p["process"]),
                s(&p["latest_version"]),
                versions.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `postfach processes` against a server.
pub(super) async fn processes_over(c: &Client, args: ProcessesArgs) -> Result<Output, Failure> {
    let Some(id) = args.xml else {
        let doc = c.call(&Call::to("processes")?).await?;
        return Ok(shown(doc, processes_text));
    };
    let q = requests::StatisticsQuery {
        version: args.version,
    };
    let call = Call::to("process_xml")?.at(&id).query(&q)?;
    let answer = c.answer(&call).await?;
    c.succeeded(&answer)?;
    Ok(xml_output(
        &id,
        String::from_utf8_lossy(&answer.body).into_owned(),
    ))
}

/// `postfach alarms` against a server: every configured alarm and whether
/// it fires.
pub(super) async fn alarms(c: &Client) -> Result<Output, Failure> {
    let doc = c.call(&Call::to("alarm_states")?).await?;
    Ok(shown(doc, |d| {
        let list = each(&d["alarms"]);
        if list.is_empty() {
            return "no alarm is configured".into();
        }
        list.iter()
            .map(|a| {
                let state = if a["active"] == true { "FIRING" } else { "ok" };
                match a.get("partition") {
                    Some(p) => format!("{:<8} {} (partition {})", state, s(&a["name"]), s(p)),
                    None => format!("{:<8} {}", state, s(&a["name"])),
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }))
}

/// `postfach partition` against a server: the partition it is and what it
/// holds.
pub(super) async fn partition(c: &Client) -> Result<Output, Failure> {
    let doc = c.call(&Call::to("partition")?).await?;
    Ok(shown(doc, |d| {
        let held = [
            ("tokens_waiting", "token(s) waiting"),
            ("buffered", "buffered"),
            ("parked", "parked"),
            ("jobs_due", "job(s) due"),
            ("incidents", "incident(s)"),
            ("tasks_open", "open task(s)"),
        ]
        .map(|(field, what)| format!("{} {what}", s(&d[field])));
        format!(
            "partition {} of {} (version {}): {}",
            s(&d["partition"]),
            s(&d["partitions"]),
            s(&d["version"]),
            held.join(", ")
        )
    }))
}

/// `postfach health` against a server: ready (or only live); exit 1 when
/// it is not.
pub(super) async fn health(c: &Client, args: HealthArgs) -> Result<Output, Failure> {
    let name = if args.live { "live" } else { "ready" };
    let doc = c.call(&Call::to(name)?).await?;
    Ok(shown(doc, |d| {
        let mut text = s(&d["status"]);
        if let Some(n) = d.get("consumers") {
            text.push_str(&format!(" ({} consumer(s))", s(n)));
        }
        if let Some(n) = d.get("partitions").filter(|p| p.is_number()) {
            text.push_str(&format!(" (gateway of {} partition(s))", s(n)));
        }
        text
    }))
}

/// `postfach metrics` against a server: its Prometheus exposition, as it
/// is.
pub(super) async fn metrics(c: &Client) -> Result<Output, Failure> {
    let answer = c.answer(&Call::to("metrics")?).await?;
    c.succeeded(&answer)?;
    let text = String::from_utf8_lossy(&answer.body).into_owned();
    let families = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
    Ok(Output {
        json: json!({"families": families, "exposition": text}),
        text: text.trim_end().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployed_list_renders_whatever_it_holds() {
        assert_eq!(
            processes_text(&json!({"processes": []})),
            "no process is deployed"
        );
        let text = processes_text(&json!({"processes": [
            {"process": "p", "latest_version": 2, "versions": [
                {"version": 1, "deployed_at": "t1"}, {"version": 2, "deployed_at": "t2"}]},
            {"unexpected": true}]}));
        assert!(text.starts_with("p latest v2: v1 (t1), v2 (t2)"), "{text}");
    }
}
