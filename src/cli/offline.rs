//! Work on the files themselves: `cleanup` (retention), `recover` (check and
//! salvage the database and its log) and `compact`, the last two offline.
//!
//! Invariant: recover never discards a record without keeping a copy of the
//! log it came from.

use super::Cli;
use super::prelude::*;
use clap::Args;
use postfach::Postfach;
use serde_json::{Value, json};

// The arguments of `postfach recover`.
#[derive(Debug, Args)]
pub(crate) struct RecoverArgs {
    /// Rewrite a damaged log with its intact records (the original is kept
    /// beside it as LOG.damaged-MILLIS) and replay them.
    #[arg(long)]
    pub(crate) discard_damaged: bool,
}

/// `postfach cleanup` against the open database.
pub(super) async fn cleanup(pf: &Postfach) -> Result<Output, Failure> {
    Ok(shown(postfach::contract::cleanup(pf).await?, cleanup_text))
}

pub(super) fn cleanup_text(d: &Value) -> String {
    format!(
        "removed {} completed instance(s) and {} settled message(s) past retention",
        s(&d["instances_removed"]),
        s(&d["messages_removed"])
    )
}

/// `postfach recover`: describes the log; with `discard_damaged`, salvages it.
pub(super) fn recover(db: &std::path::Path, discard_damaged: bool) -> Result<Output, Failure> {
    let state = Postfach::inspect_log(db)?;
    let mut check = Postfach::check_database(db)?;
    let mut repaired = false;
    if discard_damaged && matches!(check, postfach::FileCheck::Repairable(_)) {
        Postfach::repair_database(db)?;
        check = Postfach::check_database(db)?;
        repaired = true;
    }
    let (verdict, detail) = match &check {
        postfach::FileCheck::Intact => ("intact", None),
        postfach::FileCheck::Repairable(d) => ("repairable", Some(d.clone())),
        postfach::FileCheck::Damaged(d) => ("damaged", Some(d.clone())),
    };
    let database = json!({
        "file": db.display().to_string(),
        "check": verdict,
        "detail": detail,
        "repaired": repaired,
    });
    let db_text = match &check {
        postfach::FileCheck::Intact if repaired => format!(
            "{}: repaired (back to its last intact commit); every page's checksum holds now",
            db.display()
        ),
        postfach::FileCheck::Intact => {
            format!("{}: intact (every page's checksum holds)", db.display())
        }
        postfach::FileCheck::Repairable(d) => format!(
            "{}: damaged ({d}); `postfach recover --discard-damaged` repairs it by going back to its last intact commit (keep a copy of the file first)",
            db.display()
        ),
        postfach::FileCheck::Damaged(d) => format!(
            "{}: damaged beyond repair ({d}); restore it from a backup (postfach restore BACKUP --replace)",
            db.display()
        ),
    };
    if !matches!(check, postfach::FileCheck::Intact) {
        return Err(Failure {
            code: 1,
            message: db_text,
            json: Some(json!({ "database": database })),
        });
    }
    let described = json!({
        "database": database,
        "log": state.path.display().to_string(),
        "bytes": state.size,
        "intact_records": state.intact_records,
        "intact_until": state.intact_until,
        "reserved": state.reserved,
        "damaged": state.damaged,
        "intact_after_damage": state.intact_after,
    });
    let text = if state.damaged {
        format!(
            "{}: damaged at byte {} of {}: {} intact record(s) before, {} after",
            state.path.display(),
            state.intact_until,
            state.size,
            state.intact_records,
            state.intact_after
        )
    } else if state.intact_until + state.reserved < state.size {
        format!(
            "{}: {} intact record(s), then a torn tail of {} byte(s) that the next open cuts",
            state.path.display(),
            state.intact_records,
            state.size - state.intact_until
        )
    } else {
        format!(
            "{}: intact ({} record(s) to replay)",
            state.path.display(),
            state.intact_records
        )
    };
    let text = format!("{db_text}\n{text}");
    if !state.damaged {
        return Ok(out(described, text));
    }
    if !discard_damaged {
        return Err(Failure {
            code: 1,
            message: format!(
                "{text}; keep a copy of the files, then run `postfach recover --discard-damaged` to replay every intact record"
            ),
            json: Some(described),
        });
    }
    let Some(s) = Postfach::recover_damaged_log(db, postfach::Options::default())? else {
        return Ok(out(described, text));
    };
    let missing = s
        .missing_batches
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    Ok(out(
        json!({
            "log": state.path.display().to_string(),
            "backup": s.backup.display().to_string(),
            "kept_records": s.kept,
            "damaged_at": s.damaged_at,
            "missing_batches": s.missing_batches,
        }),
        format!(
            "{text}\nkept a copy as {}; replayed {} intact record(s); lost batches: {}",
            s.backup.display(),
            s.kept,
            if missing.is_empty() {
                "none".into()
            } else {
                missing
            }
        ),
    ))
}

/// `postfach recover`, offline only.
pub(super) fn recover_offline(cli: &Cli, args: &RecoverArgs) -> Result<Output, Failure> {
    if cli.server.is_some() {
        return Err(usage(
            "recover works on the files offline; stop the server and drop --server".into(),
        ));
    }
    recover(&cli.db, args.discard_damaged)
}

/// `postfach compact`, offline only.
pub(super) fn compact(cli: &Cli) -> Result<Output, Failure> {
    if cli.server.is_some() {
        return Err(usage(
            "compact works on the file offline; stop the server and drop --server".into(),
        ));
    }
    let (before, after) = Postfach::compact(&cli.db)?;
    Ok(out(
        json!({"bytes_before": before, "bytes_after": after}),
        format!("{}: {before} bytes → {after} bytes", cli.db.display()),
    ))
}
