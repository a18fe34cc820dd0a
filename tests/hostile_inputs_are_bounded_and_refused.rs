//! What an attacker or an unlucky operator hands postfach is bounded while it is
//! read and refused clearly: endless files, huge bodies and lines, DOCTYPEs,
//! files the server would read for a caller, empty tokens, an open listener.
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use crate::common;
use common::server::Server;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};

fn postfach(db: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_postfach"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("POSTFACH_TOKEN");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn deploying_an_endless_file_stops_at_the_size_cap() {
    let dir = tempfile::tempdir().unwrap();
    let o = postfach(&dir.path().join("x.redb"), &["deploy", "/dev/zero"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("/dev/zero: BPMN model is larger than 16777216 bytes"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_model_that_is_not_utf8_or_declares_a_doctype_is_refused_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.redb");
    let latin1 = dir.path().join("latin1.bpmn");
    std::fs::write(
        &latin1,
        b"<?xml version=\"1.0\"?>\n<definitions name=\"Gr\xfc\xdfe\"/>\n",
    )
    .unwrap();
    let o = postfach(&db, &["deploy", latin1.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("latin1.bpmn:2: not UTF-8 at byte 43"),
        "{}",
        stderr(&o)
    );

    let doctype = dir.path().join("doctype.bpmn");
    std::fs::write(
        &doctype,
        "<?xml version=\"1.0\"?>\n<!DOCTYPE definitions [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n<definitions xmlns=\"http://www.omg.org/spec/BPMN/20100524/MODEL\"><process id=\"p\" isExecutable=\"true\"><startEvent id=\"s\"/></process></definitions>\n",
    )
    .unwrap();
    let o = postfach(&db, &["deploy", doctype.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("doctype.bpmn:2:"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("DOCTYPE declarations are refused"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn import_skips_an_overlong_line_and_keeps_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(dir.path().join("x.redb"))
        .args(["import"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        stdin
            .write_all(b"{\"name\":\"AuftragAbgeschlossen\",\"key\":\"1\",\"id\":\"a\"}\n")
            .unwrap();
        stdin.write_all(&vec![b'x'; 5 * 1024 * 1024]).unwrap();
        stdin
            .write_all(b"\n{\"name\":\"AuftragAbgeschlossen\",\"key\":\"2\",\"id\":\"b\"}\n")
            .unwrap();
    });
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    let long = lines.iter().find(|l| l["line"] == 2).unwrap();
    assert!(
        long["error"].as_str().unwrap().contains("longer than"),
        "{long}"
    );
    let stored: Vec<&Value> = lines.iter().filter(|l| l["outcome"].is_string()).collect();
    assert_eq!(stored.len(), 2, "the lines around it are published");
}

/// Sends a request with a body of `len` bytes; ignores a write the server cut short.
fn post_raw(addr: &str, path: &str, len: usize) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&vec![b' '; len]);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_server_bounds_bodies_and_never_reads_a_path_a_caller_names() {
    let srv = Server::start("127.0.0.1:0", None);
    assert_eq!(post_raw(&srv.addr, "/messages", 5 * 1024 * 1024), 413);
    assert_eq!(post_raw(&srv.addr, "/deployments", 40 * 1024 * 1024), 413);

    // no route takes a command line to run inside the server (it would
    // name server-side files): the API has only its typed operations
    let (status, _) = srv.json(
        "POST",
        "/cli",
        Some(json!({"args": ["deploy", "/etc/hostname"]})),
    );
    assert_eq!(status, 404);
    // a deployment carries its model; it names no file the server reads
    let (status, answer) = srv.json(
        "POST",
        "/deployments",
        Some(json!({"file": "/etc/hostname"})),
    );
    assert_eq!(status, 400, "{answer}");
    // `postfach --server` sends the content of the file it names
    let o = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["--server", &format!("http://{}", srv.addr), "--json"])
        .args(["deploy", "bpmn/auftrag-ausfuehrung.bpmn"])
        .args(["--correlation-key", "AuftragAbgeschlossen=auftragId"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["deployed"][0]["process"], "auftrag-ausfuehrung");
}

#[test]
fn an_empty_token_or_an_open_listener_without_one_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.redb");
    let blank = dir.path().join("token");
    std::fs::write(&blank, " \n\t\n").unwrap();
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec![
            "run",
            "bpmn/auftrag-ausfuehrung.bpmn",
            "--correlation-key",
            "AuftragAbgeschlossen=auftragId",
        ];
        args.extend_from_slice(extra);
        postfach(&db, &args, env)
    };
    let o = run(&["--token-file", blank.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is empty"), "{}", stderr(&o));
    let o = run(&["--listen", "127.0.0.1:0"], &[("POSTFACH_TOKEN", "   ")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("$POSTFACH_TOKEN is empty"),
        "{}",
        stderr(&o)
    );
    let o = run(&["--listen", "0.0.0.0:0"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("reachable from other machines"),
        "{}",
        stderr(&o)
    );
    assert!(!db.exists(), "nothing was written: no database file");
}
