//! A host process runs the server's composition root itself (`server::run`)
//! on a Postfach it opened: the API answers on the bound port, an order
//! completes through it, `/cli` answers 404 (the command line sends the
//! API's typed operations), and the server stops when the host's shutdown future resolves. A non-loopback address without a token is refused before binding.
#![cfg(feature = "server")]
use crate::common;
use common::{MESSAGE, PROCESS, REFERENCE};
use postfach::server::{Listen, ServerError, config::ConfigFile, run};
use postfach::{Postfach, vars};
use std::io::{Read, Write};
use std::net::SocketAddr;

/// One HTTP/1.1 request with a JSON body; returns (status, body).
fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_serves_until_its_shutdown_future_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let pf = Postfach::open(dir.path().join("db.redb")).unwrap();
    pf.deploy(
        "ref.bpmn",
        REFERENCE,
        [(MESSAGE.into(), "auftragId".into())].into(),
    )
    .await
    .unwrap();
    // the host hands orders over (an unbound send task's job) and invoices them
    pf.register_handler("auftragUebergeben", |_job: postfach::JobContext| async {
        Ok(postfach::Vars::new())
    });
    pf.register_handler("rechnungStellen", |_job: postfach::JobContext| async {
        Ok(postfach::Vars::new())
    });
    let id = pf
        .start(PROCESS, vars([("auftragId", "4711".into())]), None)
        .await
        .unwrap();

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (bound_tx, bound_rx) = std::sync::mpsc::channel();
    let server = {
        let pf = pf.clone();
        tokio::spawn(async move {
            run(
                &pf,
                ConfigFile::default(),
                Listen {
                    addr: "127.0.0.1:0".parse().unwrap(),
                    token: None,
                    tokens: Vec::new(),
                    issuer: None,
                    tls: None,
                    insecure_plaintext: false,
                    zeebe: None,
                    zeebe_if_free: false,
                },
                async move {
                    let _ = stopped.await;
                },
                move |bound| bound_tx.send(bound.http).unwrap(),
            )
            .await
        })
    };
    let addr = tokio::task::spawn_blocking(move || bound_rx.recv().unwrap())
        .await
        .unwrap();
    let (status, body) = tokio::task::spawn_blocking(move || {
        request(
            addr,
            "POST",
            "/messages",
            r#"{"name": "AuftragAbgeschlossen", "key": "4711", "id": "evt-1"}"#,
        )
    })
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    // no command line runs inside a server: the API is its typed operations
    let (status, body) = tokio::task::spawn_blocking(move || {
        request(addr, "POST", "/cli", r#"{"args": ["instances"]}"#)
    })
    .await
    .unwrap();
    assert_eq!(status, 404, "{body}");

    // the server's executor hands over, correlates and invoices
    let mut state = String::new();
    for _ in 0..200 {
        state = pf
            .reader()
            .unwrap()
            .instance(id)
            .unwrap()
            .unwrap()
            .state
            .to_string();
        if state == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(state, "completed");

    stop.send(()).unwrap();
    let report = server.await.unwrap().unwrap();
    assert!(
        report.tasks_completed >= 2,
        "hand-over and invoice: {report:?}"
    );
    // after the stop the port no longer answers
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[tokio::test]
async fn an_address_reachable_from_other_machines_needs_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let pf = Postfach::open(dir.path().join("db.redb")).unwrap();
    let err = run(
        &pf,
        ConfigFile::default(),
        Listen {
            addr: "0.0.0.0:0".parse().unwrap(),
            token: None,
            tokens: Vec::new(),
            issuer: None,
            tls: None,
            insecure_plaintext: false,
            zeebe: None,
            zeebe_if_free: false,
        },
        async {},
        |_| panic!("must not bind"),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ServerError::Exposed(_)), "{err}");
}
