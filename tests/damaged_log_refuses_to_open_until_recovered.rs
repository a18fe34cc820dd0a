//! One damaged byte in the middle of the write-ahead log must not silently drop
//! the acknowledged records behind it: opening refuses, naming file and offset,
//! and changes nothing; `postfach recover --discard-damaged` keeps a copy and
//! replays every intact record.
use postfach::Postfach;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn cli(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(db)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("binary runs")
}

/// Imports completions until `n` are acknowledged, then SIGKILLs the importer:
/// everything acknowledged lives only in the log. Returns the acknowledged ids.
fn acknowledged_then_killed(db: &Path, n: usize) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(db)
        .args(["import", "--concurrency", "16"])
        .env("POSTFACH_CHECKPOINT_MS", "600000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..100_000 {
            let line = format!(
                "{{\"name\":\"AuftragAbgeschlossen\",\"key\":\"K{i}\",\"id\":\"evt-{i}\"}}\n"
            );
            if stdin.write_all(line.as_bytes()).is_err() {
                break;
            }
        }
    });
    let mut acked = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        acked.push(v["message_id"].as_str().unwrap().to_string());
        if acked.len() == n {
            child.kill().unwrap();
            break;
        }
    }
    child.wait().unwrap();
    let _ = writer.join();
    acked
}

#[test]
fn a_flipped_byte_mid_log_refuses_to_open_and_recover_replays_every_intact_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("damaged.redb");
    let acked = acknowledged_then_killed(&db, 2000);
    let log = dir.path().join("damaged.redb.wal");
    let state = Postfach::inspect_log(&db).unwrap();
    assert!(!state.damaged);
    assert!(state.intact_records > 10, "{state:?}");

    // damage one byte in the middle of the log
    let mut bytes = std::fs::read(&log).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&log, &bytes).unwrap();
    let db_before = std::fs::read(&db).unwrap();

    let o = cli(&db, &["messages"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("damaged.redb.wal is damaged at byte"), "{err}");
    assert!(err.contains("intact record(s) after it"), "{err}");
    assert!(err.contains("postfach recover --discard-damaged"), "{err}");
    assert!(
        matches!(
            Postfach::open(&db),
            Err(postfach::Error::Store(
                postfach::store::StoreError::LogDamaged { .. }
            ))
        ),
        "the library refuses too"
    );
    assert_eq!(std::fs::read(&log).unwrap(), bytes, "the log is untouched");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        db_before,
        "the database is untouched"
    );

    // `recover` alone only describes
    let o = cli(&db, &["--json", "recover"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read(&log).unwrap(), bytes);

    let o = cli(&db, &["--json", "recover", "--discard-damaged"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let backup = report["backup"].as_str().unwrap();
    assert_eq!(
        std::fs::read(backup).unwrap(),
        bytes,
        "a copy of the damaged log is kept"
    );
    let missing = report["missing_batches"].as_array().unwrap().len();
    assert_eq!(missing, 1, "exactly the damaged batch is lost: {report}");

    let pf = Postfach::open(&db).unwrap();
    let r = pf.reader().unwrap();
    let lost = acked
        .iter()
        .filter(|id| r.message(id).unwrap().len() != 1)
        .count();
    // the damaged batch held some messages; every other acknowledged one is back
    assert!(lost > 0 && lost < 200, "{lost} of {} lost", acked.len());
    drop(r);
    pf.close();
}
