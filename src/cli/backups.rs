//! Backups on the command line: `backup` (a consistent copy at one batch of
//! the log, with its manifest), `backups` (what a directory holds, each
//! checked), `restore` (checked before anything is written).
//!
//! Invariant: each command owns its arguments and its human text, rendered
//! from its document; a restore never replaces a database unless told to.

use super::prelude::*;
use clap::Args;
use postfach::backup::{BackupError, Place};
use postfach::server::shelf::{self, Shelf};
use serde_json::{Value, json};
use std::path::PathBuf;

// The arguments of `postfach backup`.
#[derive(Debug, Args)]
pub(crate) struct BackupArgs {
    /// The directory the backup is written into, as DIR/ID/ (created when
    /// missing), or gs://BUCKET/PREFIX (through a staging directory beside
    /// the database); with --server the server writes into its `[backup]
    /// to`.
    #[arg(long, value_name = "DIR")]
    pub(crate) to: Option<PathBuf>,
    /// The backup set's id (1 … 64 letters, digits, `-`, `_`): written as
    /// DIR/ID-pI/ (default: the instant, YYYYMMDDTHHMMSSmmmZ); a gateway
    /// gives every partition the same one.
    #[arg(long, value_name = "ID")]
    pub(crate) id: Option<String>,
}

// The arguments of `postfach backups`.
#[derive(Debug, Args)]
pub(crate) struct BackupsArgs {
    /// The directory (or gs://BUCKET/PREFIX) that holds the backups.
    #[arg(long, value_name = "DIR")]
    pub(crate) at: PathBuf,
}

// The arguments of `postfach restore`.
#[derive(Debug, Args)]
pub(crate) struct RestoreArgs {
    /// The backup's directory (DIR/SET-pI), or a backup set's (DIR/SET)
    /// with --partition I; or the same in Cloud Storage
    /// (gs://BUCKET/PREFIX/ID).
    pub(crate) backup: PathBuf,
    /// The partition to restore: picks the set's backup of it, and refuses
    /// a backup of another partition.
    #[arg(long, value_name = "I")]
    pub(crate) partition: Option<u32>,
    /// Replace an existing database: it and its log are kept beside it as
    /// FILE.replaced-MILLIS.
    #[arg(long)]
    pub(crate) replace: bool,
    /// Restore to this instant (RFC 3339): the backup, taken before it, and
    /// the batches archived in --archive up to it, replayed.
    #[arg(long, value_name = "T", requires = "archive")]
    pub(crate) until: Option<String>,
    /// The archive of the log (`[backup] archive` of the server): a
    /// directory or gs://BUCKET/PREFIX.
    #[arg(long, value_name = "DIR", requires = "until")]
    pub(crate) archive: Option<PathBuf>,
}

fn failed(e: BackupError) -> Failure {
    let step = match &e {
        BackupError::Exists(_) => {
            " (give --replace to keep it and its log aside and restore, or restore to another --db)"
        }
        BackupError::Partial(_) | BackupError::Damaged { .. } | BackupError::Manifest { .. } => {
            " (restore another backup: `postfach backups --at DIR` lists them, each checked)"
        }
        BackupError::UnknownTable(_) => " (back it up with the release that wrote it)",
        BackupError::ArchiveGap { .. } => {
            " (restore a backup taken after the gap, or to an instant before it)"
        }
        BackupError::Taken(_) => " (give another --id)",
        _ => "",
    };
    Failure {
        code: match e {
            BackupError::BadId(_) => 2,
            _ => 1,
        },
        message: format!("{e}{step}"),
        json: None,
    }
}

/// `postfach backup` against the open database.
pub(super) async fn backup(pf: &postfach::Postfach, args: BackupArgs) -> Result<Output, Failure> {
    let to = args.to.ok_or_else(|| {
        super::failure::usage(
            "backup needs --to DIR (with --server, the server's `[backup] to`)".into(),
        )
    })?;
    let (manifest, at) = shelf(&to)?.take(pf, args.id).await.map_err(failed)?;
    let mut doc = serde_json::to_value(&manifest).unwrap_or_default();
    doc["path"] = json!(at);
    Ok(shown(json!({ "backups": [doc] }), backup_text))
}

/// The place a command line names, with `[storage]` from the environment
/// ($STORAGE_EMULATOR_HOST, else Google's endpoint and credentials).
fn shelf(p: &std::path::Path) -> Result<Shelf, Failure> {
    let place = Place::parse(&p.to_string_lossy()).map_err(super::failure::usage)?;
    Ok(Shelf::new(place, Default::default()))
}

/// A backup named on the command line: where it is, and its id.
fn split(backup: &std::path::Path) -> Result<(Shelf, String), Failure> {
    let text = backup.to_string_lossy();
    let text = text.trim_end_matches('/');
    let (parent, id) = text.rsplit_once('/').unwrap_or(("", text));
    let parent = match (parent, text.starts_with("gs://")) {
        ("", _) => ".",
        (p, true) if !p.trim_start_matches("gs://").is_empty() => p,
        (_, true) => {
            return Err(super::failure::usage(format!(
                "{text}: name a backup in the bucket, gs://BUCKET/PREFIX/ID"
            )));
        }
        (p, false) => p,
    };
    Ok((shelf(std::path::Path::new(parent))?, id.to_string()))
}

/// One line per backup written (one per partition through a gateway).
pub(super) fn backup_text(d: &Value) -> String {
    let lines: Vec<String> = each(&d["backups"])
        .iter()
        .map(|b| {
            let bytes: u64 = each(&b["files"])
                .iter()
                .filter_map(|f| f["bytes"].as_u64())
                .sum();
            format!(
                "backup {} of partition {} at batch {}: {} ({bytes} bytes)",
                s(&b["id"]),
                s(&b["partition"]),
                s(&b["batch"]),
                s(&b["path"])
            )
        })
        .collect();
    super::instances::missing_note(d, &lines.join("\n"))
}

/// `postfach backups`: the backups in a directory, each checked against its
/// manifest.
pub(super) async fn backups(args: &BackupsArgs) -> Result<Output, Failure> {
    let list = shelf(&args.at)?.list().await.map_err(failed)?;
    let rows: Vec<Value> = list
        .into_iter()
        .map(|(dir, checked)| match checked {
            Ok(m) => json!({"dir": dir, "ok": true, "manifest": m}),
            Err(e) => json!({"dir": dir, "ok": false, "error": e.to_string()}),
        })
        .collect();
    Ok(shown(json!({"backups": rows}), |d| {
        let rows = each(&d["backups"]);
        if rows.is_empty() {
            return "no backups".into();
        }
        rows.iter()
            .map(|b| {
                let m = &b["manifest"];
                if b["ok"] == true {
                    format!(
                        "{}  partition {} of {}, batch {}, taken {}",
                        s(&b["dir"]),
                        s(&m["partition"]),
                        s(&m["partitions"]),
                        s(&m["batch"]),
                        s(&m["taken_at"])
                    )
                } else {
                    format!("{}  NOT RESTORABLE: {}", s(&b["dir"]), s(&b["error"]))
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }))
}

/// `postfach restore`: the backup checked, then written as `--db`.
pub(super) async fn restore(db: &std::path::Path, args: &RestoreArgs) -> Result<Output, Failure> {
    let (from, id) = split(&args.backup)?;
    let (p, replace) = (args.partition, args.replace);
    let r = match (&args.until, &args.archive) {
        (Some(t), Some(archive)) => {
            let until = postfach::model::iso::instant(t).map_err(|e| {
                super::failure::usage(format!("--until {t}: {e} (give an RFC 3339 instant)"))
            })?;
            let archive = shelf(archive)?;
            let r = shelf::restore(&from, &id, db, p, replace, Some((until, &archive)))
                .await
                .map_err(failed)?;
            // the opening replays the archived batches; what it finds is said
            postfach::Postfach::open(db)
                .map_err(|e| Failure {
                    code: 1,
                    message: format!(
                        "{}: restored, but replaying the archived batches failed: {e}",
                        db.display()
                    ),
                    json: None,
                })?
                .close();
            r
        }
        _ => shelf::restore(&from, &id, db, p, replace, None)
            .await
            .map_err(failed)?,
    };
    let replay = r.replay.as_ref().map(|p| {
        json!({
            "batches": p.batches,
            "last_batch": p.last_batch,
            "last_at": p.last_at,
            "reached": p.reached,
        })
    });
    let doc = json!({
        "restored": r.manifest.id,
        "db": db.display().to_string(),
        "batch": r.manifest.batch,
        "partition": r.manifest.partition,
        "kept": r.kept.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "replayed": replay,
    });
    Ok(shown(doc, |d| {
        let mut text = format!(
            "restored backup {} (batch {}) as {}",
            s(&d["restored"]),
            s(&d["batch"]),
            s(&d["db"])
        );
        let p = &d["replayed"];
        if p.is_object() {
            text.push_str(&format!(
                "\nreplayed {} archived batch(es) to batch {}{}",
                s(&p["batches"]),
                s(&p["last_batch"]),
                p["last_at"]
                    .as_str()
                    .map(|t| format!(" of {t}"))
                    .unwrap_or_default()
            ));
            if p["reached"] != true {
                text.push_str(
                    "\nthe archive ends before the instant: what came later was not archived",
                );
            }
        }
        for k in each(&d["kept"]) {
            text.push_str(&format!("\nkept the one it replaced as {}", s(k)));
        }
        text
    }))
}
