//! A client that announces a request and never finishes it must not hold the
//! API: `[http]` in postfach.toml bounds how long headers and body may take
//! and how many connections are served at once (the rest wait in the listen
//! queue until one is done).
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use crate::common;
use common::server::Server;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn launch(dir: &std::path::Path, http: &str) -> Server {
    let config = dir.join("postfach.toml");
    std::fs::write(&config, format!("[http]\n{http}\n")).unwrap();
    Server::launch(dir, &["--config".into(), config.display().to_string()], &[])
}

/// Everything the server sends until it closes the connection (or `limit`).
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> (String, Duration) {
    let started = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("still open after {:?}: {e}", started.elapsed()),
        }
    }
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn headers_and_bodies_that_never_end_are_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let srv = launch(
        dir.path(),
        "header_timeout = \"500ms\"\nbody_timeout = \"500ms\"",
    );
    // headers that never end
    let mut slow = TcpStream::connect(&srv.addr).unwrap();
    slow.write_all(b"GET /health/live HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let (_, took) = read_until_closed(&mut slow, Duration::from_secs(20));
    assert!(took < Duration::from_secs(10), "closed after {took:?}");

    // a chunked body that never comes
    let mut slow = TcpStream::connect(&srv.addr).unwrap();
    slow.write_all(
        b"POST /messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    let (answer, took) = read_until_closed(&mut slow, Duration::from_secs(20));
    assert!(took < Duration::from_secs(10), "answered after {took:?}");
    let status = answer.split_whitespace().nth(1).unwrap_or_default();
    assert!(
        status.starts_with('4'),
        "a client error, not a stored message: {answer}"
    );
    // and the API still serves everyone else
    assert_eq!(srv.json("GET", "/health/ready", None).0, 200);
}

#[test]
fn connections_beyond_the_bound_wait_until_one_is_done() {
    let dir = tempfile::tempdir().unwrap();
    let srv = launch(dir.path(), "max_connections = 2");
    let idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(&srv.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut third = TcpStream::connect(&srv.addr).unwrap();
    third
        .write_all(b"GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(
        third.read(&mut buf).is_err(),
        "not served while two connections are held"
    );
    drop(idle);
    let (answer, _) = read_until_closed(&mut third, Duration::from_secs(20));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn out_of_range_http_settings_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("postfach.toml");
    for (bad, field) in [
        ("max_connections = 0", "http.max_connections"),
        ("header_timeout = \"0s\"", "http.header_timeout"),
        ("body_timeout = \"2h\"", "http.body_timeout"),
    ] {
        std::fs::write(&config, format!("[http]\n{bad}\n")).unwrap();
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .arg("--db")
            .arg(dir.path().join("x.redb"))
            .args([
                "run",
                "bpmn/auftrag-ausfuehrung.bpmn",
                "--listen",
                "127.0.0.1:0",
            ])
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(field), "{bad}: {err}");
    }
}
