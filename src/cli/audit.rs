//! The audit trail: `postfach audit [--since T] [--who P] [--limit N]` —
//! who deployed, repaired, requeued, discarded, retried, cleaned up or
//! acted on a user task, newest first.
//!
//! Invariant: each command owns its arguments, its human text and its JSON;
//! the file and a server answer the same document.

use super::prelude::*;
use super::values::parse_instant;
use clap::Args;
use postfach::Postfach;
use postfach::server::http::requests;
use serde_json::Value;

// The arguments of `postfach audit`.
#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    /// Only entries at or after this instant (RFC 3339).
    #[arg(long, value_parser = parse_instant)]
    pub(crate) since: Option<u64>,
    /// Only this principal's entries (a token's or an identity's name).
    #[arg(long)]
    pub(crate) who: Option<String>,
    /// At most this many (1 … 1000, default 1000).
    #[arg(long)]
    pub(crate) limit: Option<usize>,
}

/// The query `audit` sends.
pub(super) fn audit_query(args: AuditArgs) -> requests::AuditQuery {
    requests::AuditQuery {
        since: args.since.map(postfach::clock::rfc3339),
        who: args.who,
        limit: args.limit,
    }
}

/// `postfach audit` against the open database.
pub(super) fn audit(pf: &Postfach, args: AuditArgs) -> Result<Output, Failure> {
    let filter = audit_query(args).filter().map_err(usage)?;
    let list = pf.reader()?.audit(&filter)?;
    Ok(shown(postfach::server::documents::audit(&list), audit_text))
}

/// One line per entry: when, who, what, on what.
pub(super) fn audit_text(d: &Value) -> String {
    let lines: Vec<String> = each(&d["audit"])
        .iter()
        .map(|e| {
            format!(
                "{}  {:<24} {:<13} {}",
                s(&e["at"]),
                s(&e["who"]),
                s(&e["operation"]),
                s(&e["target"])
            )
        })
        .collect();
    if lines.is_empty() {
        "no audit entries".to_string()
    } else {
        lines.join("\n")
    }
}
