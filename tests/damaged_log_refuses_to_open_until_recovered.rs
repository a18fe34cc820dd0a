//! One damaged byte in the middle of the write-ahead log must not silently drop
//! the acknowledged records behind it: opening refuses, naming file and offset,
//! and changes nothing; `postfach recover --discard-damaged` keeps a copy and
//! replays every intact record.
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use crate::common;
use common::cli;

use postfach::Postfach;

#[test]
fn a_flipped_byte_mid_log_refuses_to_open_and_recover_replays_every_intact_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("damaged.redb");
    let acked = common::import_then_kill(&db, 2000);
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
                postfach::StoreError::LogDamaged { .. }
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
