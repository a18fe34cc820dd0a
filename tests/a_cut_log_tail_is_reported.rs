//! The last record of the write-ahead log cut short — torn by a crash, or
//! damaged later: the file cannot tell which. Opening cuts it (a read-only open
//! leaves it for the next writer), and either way the operator is told: a WARN
//! line naming the log, the offset and the bytes, the same in `postfach
//! recover` and in the startup log of `postfach run`, and a counter in
//! `/metrics`.
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use crate::common;
use common::server::Server;
use std::path::Path;
use std::process::Command;

/// A database whose log holds acknowledged records (no checkpoint ran), with
/// the last 5 bytes of its last record cut off. Returns the log's path.
fn cut_log(db: &Path) -> std::path::PathBuf {
    common::import_then_kill(db, 200);
    let log = std::path::PathBuf::from(format!("{}.wal", db.display()));
    let len = std::fs::metadata(&log).unwrap().len();
    let state = postfach::Postfach::inspect_log(db).unwrap();
    assert!(state.intact_until > 100, "the log holds records: {state:?}");
    // the zeros written ahead of the appends are no torn record
    assert!(state.reserved > 0 && !state.damaged, "{state:?}");
    assert_eq!(state.intact_until + state.reserved, len);
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(state.intact_until - 5).unwrap();
    log
}

fn postfach(db: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("POSTFACH_LOG")
        .output()
        .unwrap()
}

#[test]
fn looking_and_recover_name_the_log_the_offset_and_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cut.redb");
    let log = cut_log(&db);
    let size = std::fs::metadata(&log).unwrap().len();

    let o = postfach(&db, &["messages"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("WARN"), "{err}");
    assert!(err.contains("torn record"), "{err}");
    assert!(
        err.contains(&log.display().to_string()),
        "names the log: {err}"
    );
    assert!(err.contains("byte(s) from offset"), "{err}");
    assert_eq!(
        std::fs::metadata(&log).unwrap().len(),
        size,
        "looking cuts nothing"
    );

    let o = postfach(&db, &["--json", "recover"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let intact = r["intact_until"].as_u64().unwrap();
    assert!(intact < size, "{r}");
    assert_eq!(r["bytes"].as_u64().unwrap(), size);
    let o = postfach(&db, &["recover"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("torn tail of {} byte(s)", size - intact)),
        "{text}"
    );

    // the library reports what it cut
    let pf = postfach::Postfach::open(&db).unwrap();
    assert_eq!(pf.recovery().torn_tail_bytes, size - intact);
    pf.close();
    assert!(
        std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0) <= intact,
        "the writer cut the torn record"
    );
}

#[test]
fn the_server_logs_it_at_startup_and_counts_it_in_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.redb");
    let log = cut_log(&db);
    let size = std::fs::metadata(&log).unwrap().len();
    let intact = postfach::Postfach::inspect_log(&db).unwrap().intact_until;
    let srv = Server::launch(dir.path(), &[], &[]);
    let startup = srv.startup_log.join("\n");
    assert!(
        startup.contains("cutting a torn record") && startup.contains(&log.display().to_string()),
        "{startup}"
    );
    assert_eq!(
        srv.metric("postfach_wal_torn_tail_bytes_total"),
        (size - intact) as f64
    );
}
