//! `postfach migrate`: running instances of one version of a process move
//! to another, against the open database or a server (`POST /migrations`).
//!
//! Invariant: the request is built once ([`migration_request`]) and read the
//! same way by the library and the server; the text is rendered from the
//! JSON document alone.

use super::prelude::*;
use super::values::{parse_instant, parse_variable_filter};
use clap::Args;
use postfach::Postfach;
use postfach::server::http::requests::MigrationBody;
use serde_json::Value;

/// The arguments of `postfach migrate`.
#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// The process id.
    pub(crate) process: String,
    /// The version the instances run now.
    #[arg(long)]
    pub(crate) from_version: u32,
    /// The version they move to.
    #[arg(long)]
    pub(crate) to_version: u32,
    /// An element of the old version and its counterpart in the new (an
    /// element not named keeps its id); repeatable.
    #[arg(long = "map", value_name = "OLD=NEW")]
    pub(crate) map: Vec<String>,
    /// Only instances with a token at this element.
    #[arg(long)]
    pub(crate) waiting_at: Option<String>,
    /// active (default) or incident
    #[arg(long, value_parser = ["active", "incident"])]
    pub(crate) state: Option<String>,
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
    /// Only say what would happen to each instance; nothing changes.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// The request `migrate` sends (and reads locally the same way).
pub(super) fn migration_request(a: MigrateArgs) -> Result<MigrationBody, Failure> {
    let map = super::values::element_map(&a.map)?;
    let (variable, value) = a.variable.unzip();
    let instant = |ms: Option<u64>| ms.map(postfach::clock::rfc3339);
    Ok(MigrationBody {
        process: a.process,
        from_version: a.from_version,
        to_version: a.to_version,
        map,
        waiting_at: a.waiting_at,
        state: a.state,
        key: a.key,
        variable,
        value,
        started_from: instant(a.started_from),
        started_before: instant(a.started_before),
        has_incident: a.incident.then_some(true),
        dry_run: a.dry_run,
    })
}

/// `postfach migrate` against the open database.
pub(super) async fn migrate(pf: &Postfach, a: MigrateArgs) -> Result<Output, Failure> {
    let (plan, filter, dry_run) = migration_request(a)?.plan().map_err(usage)?;
    let report = pf.migrate(plan, &filter, dry_run).await?;
    if let Some(id) = report.batch {
        // a large selection became a batch: worked off here, then shown
        return super::batches::follow_local(pf, id).await;
    }
    Ok(shown(
        postfach::contract::migration_json(&report, dry_run),
        migrated_text,
    ))
}

/// The human text of `migrate`: the count, then each refused instance
/// with its reason and, in a dry run, each instance's tokens.
pub(super) fn migrated_text(d: &Value) -> String {
    if d["batch"].is_string() {
        return format!(
            "too many instances for one call: batch {} migrates them (postfach batch status {})",
            s(&d["batch"]),
            s(&d["batch"])
        );
    }
    let dry = d["dry_run"].as_bool().unwrap_or(false);
    let mut text = format!(
        "{} instance(s) {}",
        d["migrated"].as_u64().unwrap_or(0),
        if dry { "would migrate" } else { "migrated" }
    );
    let refused = d["refused"].as_array().map_or(&[][..], Vec::as_slice);
    if !refused.is_empty() {
        text.push_str(&format!(", {} refused:", refused.len()));
        for r in refused {
            text.push_str(&format!("\n  {}: {}", s(&r["instance"]), s(&r["reason"])));
        }
        text.push_str(
            "\n(map an element without a counterpart with --map OLD=NEW, or repair the instance first)",
        );
    }
    if dry {
        for i in d["instances"].as_array().map_or(&[][..], Vec::as_slice) {
            text.push_str(&format!("\n  {}:", s(&i["instance"])));
            for t in i["tokens"].as_array().map_or(&[][..], Vec::as_slice) {
                text.push_str(&format!(
                    " {} → {} ({})",
                    s(&t["from"]),
                    s(&t["to"]),
                    s(&t["carry"])
                ));
            }
        }
    }
    text
}
