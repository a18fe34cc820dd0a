//! The command line and its `--server` client against hostile input: arguments
//! that are not UTF-8, damaged and non-regular files, silent, slow and lying
//! servers, blank names and out-of-range counts. Each gets a clear error naming
//! what is wrong and one of the documented exit codes (0 ok, 1 error, 2 usage,
//! 3 rejection, 4 missing object) — never a panic, never a hang, never garbage
//! taken as if it were fine.
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use crate::common;
use common::server::Server;
use serde_json::{Value, json};
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long any one command may take before it counts as a hang.
const HANG: Duration = Duration::from_secs(60);

/// Runs the binary with `args` (and `env`), killing it if it outlives [`HANG`].
fn run_env(args: &[&OsStr], env: &[(&str, &OsStr)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_postfach"));
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("POSTFACH_SERVER")
        .env_remove("POSTFACH_TOKEN")
        .env_remove("POSTFACH_DB")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("binary runs");
    let pid = child.id();
    // read both pipes while waiting: a long error line must not block the child
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(HANG) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            let shown: Vec<String> = args
                .iter()
                .map(|a| a.to_string_lossy().chars().take(40).collect())
                .collect();
            panic!("{shown:?} hung for {HANG:?}");
        }
    }
}

fn run(args: &[&str]) -> Output {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    run_env(&args, &[])
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A documented exit code, one line of error, no panic.
fn assert_clean(o: &Output, what: &str) {
    let err = stderr(o);
    assert!(!err.contains("panicked"), "{what} panicked: {err}");
    assert!(!err.contains("stack backtrace"), "{what}: {err}");
    let code = o.status.code();
    assert!(
        matches!(code, Some(0..=4)),
        "{what}: undocumented exit {code:?}: {err}"
    );
}

fn refused(o: &Output, code: i32, needle: &str, what: &str) {
    assert_clean(o, what);
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{what}: {err}");
    assert!(err.contains(needle), "{what} should name {needle:?}: {err}");
}

/// A database with the reference model and one order waiting at the hand-over.
fn database(dir: &Path) -> PathBuf {
    let db = dir.join("d.redb");
    let d = db.to_str().unwrap();
    for args in [
        &[
            "--db",
            d,
            "deploy",
            "bpmn/auftrag-ausfuehrung.bpmn",
            "--correlation-key",
            "AuftragAbgeschlossen=auftragId",
        ][..],
        &[
            "--db",
            d,
            "start",
            "auftrag-ausfuehrung",
            "--var",
            "auftragId=1",
        ],
        &["--db", d, "work", "--until-idle"],
    ] {
        let o = run(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    db
}

#[test]
fn a_damaged_database_file_is_an_error_naming_it_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path());
    // 8 KiB of (seeded) noise in the middle of the file, after a clean close
    let mut bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 16384 + 8192, "{}", bytes.len());
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in &mut bytes[16384..16384 + 8192] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::write(&db, &bytes).unwrap();
    let d = db.to_str().unwrap();
    for args in [
        &["--db", d, "instances"][..],
        &["--db", d, "jobs"],
        &["--db", d, "tasks"],
        &["--db", d, "deploy", "bpmn/auftrag-ausfuehrung.bpmn"],
    ] {
        let o = run(args);
        refused(&o, 1, d, &format!("{args:?}"));
        let err = stderr(&o);
        assert!(err.contains("is damaged"), "{args:?}: {err}");
        assert!(err.contains("postfach recover"), "{args:?}: {err}");
    }
    // recover checks every page and says what can be done
    let o = run(&["--db", d, "--json", "recover"]);
    refused(&o, 1, "restore it from a backup", "recover");
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["database"]["check"], "damaged", "{report}");
    // the library says the same as a typed error
    match postfach::Postfach::open_read_only(&db, Default::default()) {
        Err(postfach::Error::Store(postfach::StoreError::Damaged { path, .. })) => {
            assert_eq!(path, d)
        }
        other => panic!("expected Damaged, got {:?}", other.err()),
    }
    // an intact file passes the same check
    let fresh = tempfile::tempdir().unwrap();
    let good = database(fresh.path());
    let o = run(&["--db", good.to_str().unwrap(), "--json", "recover"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["database"]["check"], "intact", "{report}");
}

#[test]
fn database_paths_that_are_not_regular_files_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let missing_dir = dir.path().join("nowhere").join("x.redb");
    let missing_dir = missing_dir.to_str().unwrap();
    let as_dir = dir.path().to_str().unwrap();
    for (args, needle) in [
        (
            &["--db", "/dev/null", "instances"][..],
            "/dev/null is a character device",
        ),
        (
            &["--db", "/dev/zero", "tasks"],
            "/dev/zero is a character device",
        ),
        (
            &["--db", "/dev/full", "statistics", "P"],
            "/dev/full is a character device",
        ),
        (
            &[
                "--db",
                "/dev/null",
                "deploy",
                "bpmn/auftrag-ausfuehrung.bpmn",
            ],
            "/dev/null is a character device",
        ),
        (&["--db", missing_dir, "recover"], "does not exist"),
        (&["--db", as_dir, "recover"], "is a directory"),
        (&["--db", as_dir, "instances"], "is a directory"),
    ] {
        refused(&run(args), 1, needle, &format!("{args:?}"));
    }
    // a write-ahead log that is a directory, or a link to /dev/zero
    let db = dir.path().join("w.redb");
    std::fs::create_dir(dir.path().join("w.redb.wal")).unwrap();
    let w = db.to_str().unwrap();
    refused(
        &run(&["--db", w, "deploy", "bpmn/auftrag-ausfuehrung.bpmn"]),
        1,
        "w.redb.wal is a directory",
        "log is a directory",
    );
    let zdir = dir.path().join("z");
    std::fs::create_dir(&zdir).unwrap();
    let db = database(&zdir);
    let log = PathBuf::from(format!("{}.wal", db.display()));
    std::fs::remove_file(&log).ok();
    std::os::unix::fs::symlink("/dev/zero", &log).unwrap();
    let z = db.to_str().unwrap();
    for args in [&["--db", z, "recover"][..], &["--db", z, "instances"]] {
        refused(&run(args), 1, "is a character device", &format!("{args:?}"));
    }
}

#[test]
fn an_invoice_ledger_that_is_a_device_is_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path());
    for dev in ["/dev/zero", "/dev/full"] {
        let o = run(&[
            "--db",
            db.to_str().unwrap(),
            "work",
            "--until-idle",
            "--invoice-ledger",
            dev,
        ]);
        refused(&o, 1, &format!("{dev} is a character device"), dev);
    }
}

#[test]
fn blank_names_and_out_of_range_counts_are_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path());
    let d = db.to_str().unwrap();
    for (args, flag) in [
        (
            &[
                "--db",
                d,
                "acquire",
                "auftragUebergeben",
                "--worker",
                "w",
                "--max",
                "0",
            ][..],
            "--max",
        ),
        (
            &[
                "--db",
                d,
                "acquire",
                "auftragUebergeben",
                "--worker",
                "w",
                "--max",
                "10001",
            ],
            "--max",
        ),
        (
            &["--db", d, "acquire", "auftragUebergeben", "--worker", ""],
            "--worker",
        ),
        (
            &[
                "--db",
                d,
                "acquire",
                "auftragUebergeben",
                "--worker",
                " \t ",
            ],
            "--worker",
        ),
        (
            &[
                "--db",
                d,
                "acquire",
                "auftragUebergeben",
                "--worker",
                "a\nb",
            ],
            "--worker",
        ),
        (&["--db", d, "complete", "1", "--var", " =x"], "--var"),
        (
            &[
                "--db", d, "task", "complete", "1", "--user", "u", "--var", " =x",
            ],
            "--var",
        ),
        (
            &[
                "--db", d, "task", "assign", "1", "--to", "", "--user", "lead",
            ],
            "--to",
        ),
        (&["--db", d, "task", "claim", "1", "--user", " "], "--user"),
        (
            &[
                "--db",
                d,
                "deploy",
                "bpmn/auftrag-ausfuehrung.bpmn",
                "--correlation-key",
                "M= ",
            ],
            "--correlation-key",
        ),
        (
            &[
                "--db",
                d,
                "deploy",
                "bpmn/auftrag-ausfuehrung.bpmn",
                "--send-topic",
                "E= ",
            ],
            "--send-topic",
        ),
    ] {
        refused(&run(args), 2, flag, &format!("{args:?}"));
    }
    // nothing of it locked a job: the hand-over is still there for a real worker
    let o = run(&[
        "--db",
        d,
        "--json",
        "acquire",
        "auftragUebergeben",
        "--worker",
        "w",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["jobs"].as_array().unwrap().len(), 1, "{v}");
}

#[test]
fn a_bearer_token_no_http_client_could_send_is_refused_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        &b"abc\0def"[..],
        b"abc\ndef",
        b"abc\x07",
        "t\u{e9}st".as_bytes(),
    ] {
        let file = dir.path().join("token");
        std::fs::write(&file, bad).unwrap();
        let tdb = dir.path().join("t.redb");
        let words = [
            "--db",
            tdb.to_str().unwrap(),
            "run",
            "bpmn/auftrag-ausfuehrung.bpmn",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            file.to_str().unwrap(),
        ];
        let args: Vec<&OsStr> = words.iter().map(OsStr::new).collect();
        let o = run_env(&args, &[]);
        refused(&o, 2, "printable ASCII", &format!("token file {bad:?}"));
        if bad.contains(&0) {
            continue; // no environment variable can hold a NUL
        }
        // the same token from the environment, for the server and the client
        let o = run_env(&args[..6], &[("POSTFACH_TOKEN", OsStr::from_bytes(bad))]);
        refused(
            &o,
            2,
            "$POSTFACH_TOKEN",
            &format!("$POSTFACH_TOKEN {bad:?}"),
        );
        let o = run_env(
            &["--server", "http://127.0.0.1:9", "instances"].map(OsStr::new),
            &[("POSTFACH_TOKEN", OsStr::from_bytes(bad))],
        );
        refused(&o, 2, "$POSTFACH_TOKEN", &format!("client token {bad:?}"));
    }
    assert!(
        !dir.path().join("t.redb").exists(),
        "refused before anything was written"
    );
}

#[test]
fn invalid_server_urls_are_usage_errors() {
    for url in [
        "http://127.0.0.1:99999",
        "http://127.0.0.1:0",
        "127.0.0.1:7820",
        "ftp://127.0.0.1:7820",
        "http://",
        "http://user:pw@127.0.0.1:7820",
    ] {
        refused(&run(&["--server", url, "instances"]), 2, "--server", url);
    }
}

/// A server stand-in on loopback: accepts connections and answers each with
/// `answer` (or never, when `None`).
fn fake_server(answer: Option<String>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            match &answer {
                None => held.push(s), // never answers, keeps the connection
                Some(body) => {
                    // Read the whole request head first: closing a socket
                    // with unread bytes resets the connection, and the
                    // client may see the reset before the answer.
                    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    // Half-close and drain until the client hangs up, so
                    // nothing it still sends turns into a reset.
                    let _ = s.shutdown(std::net::Shutdown::Write);
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                    }
                }
            }
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_silent_server_times_out_and_the_error_names_the_timeout() {
    let silent = fake_server(None);
    for args in [
        &["--server", &silent, "--server-timeout", "1s", "instances"][..],
        &[
            "--server",
            &silent,
            "--server-timeout",
            "1s",
            "object",
            "1",
            "doc",
        ],
    ] {
        let started = Instant::now();
        let o = run(args);
        refused(&o, 1, "--server-timeout", &format!("{args:?}"));
        assert!(
            stderr(&o).contains("did not answer within 1s"),
            "{}",
            stderr(&o)
        );
        assert!(started.elapsed() < Duration::from_secs(30));
    }
    // a listener whose queue is full takes no connection: the connect timeout
    let full = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = full.local_addr().unwrap();
    let mut queued = Vec::new();
    let mut filled = false;
    for _ in 0..4096 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => queued.push(s),
            Err(_) => {
                filled = true;
                break;
            }
        }
    }
    assert!(filled, "the listen queue never filled");
    let o = run(&[
        "--server",
        &format!("http://{addr}"),
        "--connect-timeout",
        "500ms",
        "instances",
    ]);
    refused(&o, 1, "--connect-timeout", "full listen queue");
    drop(queued);
}

/// A server that answers what the API does not — no JSON, or a list whose
/// cursor never ends — is an error naming it, never a hang or a made-up
/// result.
#[test]
fn a_server_answering_what_the_api_does_not_is_an_error_naming_it() {
    let url = fake_server(Some("<html>proxy error</html>".into()));
    let o = run(&["--server", &url, "instances"]);
    refused(&o, 1, &url, "not JSON");
    assert!(stderr(&o).contains("without JSON"), "{}", stderr(&o));
    let url = fake_server(Some(r#"{"instances": [], "next": "7"}"#.into()));
    let o = run(&["--server", &url, "instances"]);
    refused(&o, 1, &url, "an endless list");
    assert!(stderr(&o).contains("does not end"), "{}", stderr(&o));
}

#[test]
fn arguments_that_are_not_utf8_work_with_and_without_a_server() {
    let srv = Server::start("127.0.0.1:0", None);
    let url = format!("http://{}", srv.addr);
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join(OsStr::from_bytes(b"x\xff.bpmn"));
    std::fs::copy("bpmn/auftrag-ausfuehrung.bpmn", &model).unwrap();
    let db = dir.path().join(OsStr::from_bytes(b"x\xff.redb"));
    let deploy = |server: bool| {
        let mut args: Vec<OsString> = Vec::new();
        if server {
            args.extend(["--server".into(), url.clone().into()]);
        }
        args.extend([
            "--db".into(),
            db.clone().into_os_string(),
            "--json".into(),
            "deploy".into(),
            model.clone().into_os_string(),
            "--correlation-key".into(),
            "AuftragAbgeschlossen=auftragId".into(),
        ]);
        let refs: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
        run_env(&refs, &[])
    };
    for server in [true, false] {
        let o = deploy(server);
        assert_clean(&o, "deploy");
        assert!(o.status.success(), "server {server}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["deployed"][0]["process"], "auftrag-ausfuehrung", "{v}");
    }
    let o = run_env(
        &[
            OsStr::new("--server"),
            OsStr::new(&url),
            OsStr::new("--db"),
            db.as_os_str(),
            OsStr::new("instances"),
        ],
        &[],
    );
    assert_clean(&o, "instances");
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn instances_text_applies_the_same_filters_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path());
    let d = db.to_str().unwrap();
    let o = run(&["--db", d, "instances", "--waiting-at", "auftragUebergeben"]);
    assert!(
        stderr(&o).is_empty() && o.status.success(),
        "{}",
        stderr(&o)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("waiting at auftragUebergeben"));
    for filter in [
        &["--process", "other"][..],
        &["--variable", "auftragId=2"],
        &["--started-from", "2999-01-01T00:00:00Z"],
    ] {
        let mut args = vec!["--db", d, "instances", "--waiting-at", "auftragUebergeben"];
        args.extend_from_slice(filter);
        let o = run(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "no instances",
            "{filter:?}"
        );
        args.insert(0, "--json");
        let o = run(&args);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v, json!({"instances": [], "waiting": []}), "{filter:?}");
    }
}

#[test]
fn object_of_a_missing_job_exits_1_locally_and_over_the_server() {
    let srv = Server::start("127.0.0.1:0", None);
    let url = format!("http://{}", srv.addr);
    let o = run(&["--server", &url, "object", "0", "doc"]);
    refused(&o, 1, "job 0 does not exist", "over the server");
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path());
    let o = run(&["--db", db.to_str().unwrap(), "object", "0", "doc"]);
    refused(&o, 1, "job 0 does not exist", "locally");
}

/// Every subcommand with blank, huge, non-UTF-8, negative and overflowing
/// values in its first three positions ends with a documented exit code, no
/// panic and no hang.
#[test]
fn every_subcommand_survives_hostile_values() {
    let help = run(&["--help"]);
    let text = String::from_utf8_lossy(&help.stdout).into_owned();
    let subcommands: Vec<String> = text
        .split("Commands:")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|s| s != "help")
        .collect();
    assert!(subcommands.len() >= 29, "{subcommands:?}");
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path());
    let huge = "x".repeat(100_000); // one argument may hold 128 KiB
    let values: Vec<OsString> = vec![
        "".into(),
        " \t ".into(),
        huge.into(),
        OsStr::from_bytes(b"\xff\xfe").into(),
        "-1".into(),
        "99999999999999999999999".into(),
    ];
    for sub in &subcommands {
        if sub == "run" || sub == "demo" {
            continue; // they serve or run until stopped; their inputs have tests of their own
        }
        for v in &values {
            for n in 1..=3 {
                let mut args: Vec<&OsStr> =
                    vec![OsStr::new("--db"), db.as_os_str(), OsStr::new(sub.as_str())];
                if sub == "task" {
                    args.push(OsStr::new("claim"));
                }
                if sub == "work" {
                    args.push(OsStr::new("--until-idle"));
                }
                args.extend(std::iter::repeat_n(v.as_os_str(), n));
                let o = run_env(&args, &[]);
                assert_clean(
                    &o,
                    &format!(
                        "{sub} with {n} × {:?}",
                        v.to_string_lossy().chars().take(12).collect::<String>()
                    ),
                );
            }
        }
    }
}

#[test]
fn instants_with_a_numeric_offset_are_taken_as_rfc_3339_allows() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path());
    let d = db.to_str().unwrap();
    // the order started at the wall-clock now: one hour ahead in +01:00 is
    // still before it, one hour ahead in UTC terms of a far future is after
    for (from, found) in [
        ("2000-01-01T01:00:00+01:00", 1),
        ("2999-12-31T10:00:00-04:30", 0),
    ] {
        let o = run(&["--db", d, "--json", "instances", "--started-from", from]);
        assert!(o.status.success(), "{from}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["instances"].as_array().unwrap().len(), found, "{from}");
    }
    refused(
        &run(&[
            "--db",
            d,
            "instances",
            "--started-from",
            "2026-12-31T10:00:00+25:00",
        ]),
        2,
        "--started-from",
        "offset out of range",
    );
}
