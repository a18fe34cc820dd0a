//! TLS: `postfach run --tls-cert --tls-key` speaks HTTPS only and reads its
//! certificate again when the files change (a pair that does not load keeps
//! the one before); a gateway given `--tls-ca` calls an `https://`
//! partition only when its certificate chains to that CA — a self-signed
//! partition counts as down, named with the reason; a listener reachable
//! from other machines is refused plain HTTP unless `--insecure-plaintext`.
#![cfg(feature = "server")]
use crate::common;
use common::server::{Gateway, Server};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

fn der(pem: &Path) -> Vec<u8> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_file(pem).unwrap().to_vec()
}

/// A TLS connection to `addr` checked against the test CA, then `request`
/// sent on it: the certificate presented and the answer's first line.
fn over_tls(addr: &str, request: &str) -> Result<(Vec<u8>, String), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let config = postfach::server::tls::client_config(Some(&fixture("ca.pem")))?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1")
            .unwrap()
            .to_owned();
        let mut tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let cert = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
        tls.write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        let _ = tls.read_to_end(&mut answer).await;
        let text = String::from_utf8_lossy(&answer);
        Ok((cert, text.lines().next().unwrap_or("").to_string()))
    })
}

const LIVE: &str = "GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/// Replaces the served pair with `name`'s, its files stamped `later` so a
/// change is seen even within the file system's time granularity.
fn swap(dir: &Path, name: &str, later: u64) {
    let at = std::time::SystemTime::now() + std::time::Duration::from_secs(later);
    for (from, to) in [
        (format!("{name}.pem"), "cert.pem"),
        (format!("{name}.key"), "key.pem"),
    ] {
        std::fs::copy(fixture(&from), dir.join(to)).unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(dir.join(to))
            .unwrap();
        f.set_modified(at).unwrap();
    }
}

fn tls_server(dir: &Path, name: &str) -> Server {
    swap(dir, name, 0);
    Server::launch(
        dir,
        &[
            "--tls-cert".into(),
            dir.join("cert.pem").display().to_string(),
            "--tls-key".into(),
            dir.join("key.pem").display().to_string(),
        ],
        &[],
    )
}

#[test]
fn the_api_speaks_tls_only_and_reads_its_certificate_again_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let srv = tls_server(dir.path(), "server-1");
    let (cert, status) = over_tls(&srv.addr, LIVE).unwrap();
    assert_eq!(cert, der(&fixture("server-1.pem")));
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    // plain HTTP on the TLS port gets no answer
    let mut plain = std::net::TcpStream::connect(&srv.addr).unwrap();
    plain
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    plain.write_all(LIVE.as_bytes()).unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(!got.starts_with(b"HTTP/1.1 200"), "{got:?}");

    swap(dir.path(), "server-2", 10);
    let (cert, _) = over_tls(&srv.addr, LIVE).unwrap();
    assert_eq!(cert, der(&fixture("server-2.pem")), "read again");
    // a broken pair keeps the one before
    std::fs::write(dir.path().join("cert.pem"), "not a certificate").unwrap();
    let f = std::fs::File::options()
        .write(true)
        .open(dir.path().join("cert.pem"))
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(20))
        .unwrap();
    let (cert, status) = over_tls(&srv.addr, LIVE).unwrap();
    assert_eq!(cert, der(&fixture("server-2.pem")));
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    srv.stop();
}

#[test]
fn the_gateway_calls_only_partitions_whose_certificate_chains_to_its_ca() {
    let good_dir = tempfile::tempdir().unwrap();
    let rogue_dir = tempfile::tempdir().unwrap();
    let good = tls_server(good_dir.path(), "server-1");
    let rogue = tls_server(rogue_dir.path(), "rogue");
    let ca = fixture("ca.pem").display().to_string();
    let gateway = |partition: &str, with_ca: bool| {
        let url = format!("0=https://{partition}");
        let mut args = vec!["--partition-url", &url];
        if with_ca {
            args.extend(["--tls-ca", &ca]);
        }
        Gateway::start_with(&[], &args)
    };
    let trusted = gateway(&good.addr, true);
    let (status, body) = trusted.json("GET", "/partition", None);
    assert_eq!(status, 200, "{body}");
    drop(trusted);
    for (partition, with_ca) in [(&rogue.addr, true), (&good.addr, false)] {
        let gw = gateway(partition, with_ca);
        let (status, body) = gw.json("GET", "/partition", None);
        assert_eq!(status, 503, "{body}");
        assert!(body.to_string().contains("certificate"), "{body}");
    }
    good.stop();
    rogue.stop();
}

#[test]
fn a_listener_beyond_loopback_needs_tls_or_says_plain_http_is_meant() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--db")
        .arg(dir.path().join("x.redb"))
        .args([
            "run",
            "bpmn/auftrag-ausfuehrung.bpmn",
            "--listen",
            "0.0.0.0:0",
        ])
        .env("POSTFACH_TOKEN", "s3cret")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("--insecure-plaintext") && e.contains("--tls-cert"),
        "{e}"
    );
    assert!(
        !dir.path().join("x.redb").exists(),
        "refused before the database"
    );
}
