//! Publishing over the HTTP API: `POST /messages` on 64 keep-alive
//! connections against a `postfach run` process (each message buffered, so
//! each is one durable write; concurrent ones share a group commit). The
//! figure is messages per second from the first request to the last answer.
//!
//! With `POSTFACH_BENCH_BASELINE=PATH` (the `postfach` binary of an earlier
//! commit) the two binaries run alternately, `POSTFACH_HTTP_RUNS` times each
//! (default 3), and the table gives each one's median and their ratio: a
//! change to the API's edge (routing, catalogue, auth layer) is judged on the
//! same machine in the same minutes.
//!
//! With `POSTFACH_HTTP_TOKENS=1` this commit's binary runs alternately with
//! and without named tokens (`[auth] tokens_file` of ten entries, the
//! publishers holding a starter's): what the token layer — SHA-256 of the
//! presented token, a constant-time look among the entries, the catalogue's
//! permission — costs a publish (result `http-tokens`). With
//! `POSTFACH_HTTP_TOKENS=jwt` the other side holds an OpenID Connect
//! issuer's access token instead (`[auth] issuer` with a `jwks_file`, RS256
//! signed with the test fixture's key): what verifying a signature with
//! cached keys costs (result `http-jwt`).
//!
//! cargo bench --bench http
//! POSTFACH_BENCH_BASELINE=/tmp/postfach-before cargo bench --bench http
//! POSTFACH_HTTP_TOKENS=1 cargo bench --bench http
//! POSTFACH_HTTP_TOKENS=jwt cargo bench --bench http

#[path = "support/mod.rs"]
mod support;

use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::Instant;

const CONNECTIONS: usize = 64;

/// A `postfach run` of the reference model on a fresh database.
struct Server {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

/// The publishers' token, when the server is given named tokens.
const TOKEN: &str = "bench-starter-token";

/// postfach.toml with `[auth] tokens_file`: nine other tokens and the
/// publishers' starter token last (the look goes through every entry).
fn tokens_config(dir: &std::path::Path) -> std::path::PathBuf {
    let sum = |t: &str| -> String {
        use sha2::Digest;
        sha2::Sha256::digest(t.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let mut tokens = String::new();
    for i in 0..9 {
        tokens.push_str(&format!(
            "[[token]]\nname = \"other-{i}\"\nsha256 = \"{}\"\nroles = [\"reader\"]\n\n",
            sum(&format!("other-token-{i}"))
        ));
    }
    tokens.push_str(&format!(
        "[[token]]\nname = \"publisher\"\nsha256 = \"{}\"\nroles = [\"starter\"]\n",
        sum(TOKEN)
    ));
    std::fs::write(dir.join("tokens.toml"), tokens).unwrap();
    let cfg = dir.join("postfach.toml");
    let file = dir.join("tokens.toml").display().to_string();
    std::fs::write(&cfg, format!("[auth]\ntokens_file = {file:?}\n")).unwrap();
    cfg
}

/// How the publishers authenticate.
#[derive(Clone, Copy, PartialEq)]
enum Auth {
    /// An open loopback API.
    None,
    /// A named token of ten.
    Named,
    /// An issuer's RS256 access token.
    Jwt,
}

const ISSUER: &str = "https://id.example/realms/shop";

fn fixture_key() -> jsonwebtoken::EncodingKey {
    let pem = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/oidc/rsa-1.pem"
    ))
    .unwrap();
    jsonwebtoken::EncodingKey::from_rsa_pem(&pem).unwrap()
}

/// postfach.toml with `[auth] issuer` and its keys in a file.
fn issuer_config(dir: &std::path::Path) -> std::path::PathBuf {
    let alg = jsonwebtoken::Algorithm::RS256;
    let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(&fixture_key(), alg).unwrap();
    jwk.common.key_id = Some("r1".into());
    let set = dir.join("jwks.json");
    std::fs::write(&set, json!({ "keys": [jwk] }).to_string()).unwrap();
    let cfg = dir.join("postfach.toml");
    std::fs::write(
        &cfg,
        format!(
            "[auth]\nissuer = {ISSUER:?}\njwks_file = {:?}\n",
            set.display().to_string()
        ),
    )
    .unwrap();
    cfg
}

/// A starter's access token of the issuer, valid for an hour.
fn access_token() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    h.kid = Some("r1".into());
    let claims = json!({
        "iss": ISSUER, "aud": "postfach", "exp": now + 3600, "iat": now,
        "preferred_username": "publisher", "roles": ["starter"],
    });
    jsonwebtoken::encode(&h, &claims, &fixture_key()).unwrap()
}

impl Server {
    fn start(binary: &str, auth: Auth) -> Server {
        let dir = support::bench_dir();
        let mut cmd = support::reference_run(binary, &dir.path().join("run.redb"));
        match auth {
            Auth::None => {}
            Auth::Named => {
                cmd.arg("--config").arg(tokens_config(dir.path()));
            }
            Auth::Jwt => {
                cmd.arg("--config").arg(issuer_config(dir.path()));
            }
        }
        let (child, addr) = support::spawn_listening(cmd);
        Server {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The header the publishers send (the access token signed once, before
/// the clock starts: a client fetches its token once, not per connection).
fn auth_header(auth: Auth) -> String {
    match auth {
        Auth::None => String::new(),
        Auth::Named => format!("Authorization: Bearer {TOKEN}\r\n"),
        Auth::Jwt => format!("Authorization: Bearer {}\r\n", access_token()),
    }
}

/// One keep-alive connection's share: `n` publishes, each answered before
/// the next is sent.
fn publish_on_one_connection(addr: &str, conn: usize, n: usize, auth: &str) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    for i in 0..n {
        let body = json!({
            "name": "AuftragAbgeschlossen",
            "key": format!("k-{conn}-{i}"),
            "id": format!("m-{conn}-{i}"),
            "variables": {"erledigtePositionen": i},
        })
        .to_string();
        write!(
            s,
            "POST /messages HTTP/1.1\r\nHost: bench\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.contains(" 200 "), "publish answered {status}");
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap();
            }
        }
        let mut answer = vec![0u8; length];
        reader.read_exact(&mut answer).unwrap();
    }
}

/// Messages per second of `total` publishes on [`CONNECTIONS`] connections.
fn run_once(binary: &str, total: usize, auth: Auth) -> f64 {
    let server = Server::start(binary, auth);
    let per = total / CONNECTIONS;
    let header = auth_header(auth);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for conn in 0..CONNECTIONS {
            let addr = server.addr.clone();
            let header = &header;
            scope.spawn(move || publish_on_one_connection(&addr, conn, per, header));
        }
    });
    (per * CONNECTIONS) as f64 / started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let commit = support::measured_commit();
    let total = support::env_or("POSTFACH_HTTP_N", 20_000) as usize;
    let runs = support::env_or("POSTFACH_HTTP_RUNS", 3).max(1);
    let current = env!("CARGO_BIN_EXE_postfach").to_string();
    match std::env::var("POSTFACH_HTTP_TOKENS").as_deref() {
        Ok("1") => return tokens_against_none(&commit, &current, total, runs, Auth::Named),
        Ok("jwt") => return tokens_against_none(&commit, &current, total, runs, Auth::Jwt),
        _ => {}
    }
    let baseline = std::env::var("POSTFACH_BENCH_BASELINE").ok();
    let mut now = Vec::new();
    let mut before = Vec::new();
    for r in 0..runs {
        if let Some(b) = &baseline {
            before.push(run_once(b, total, Auth::None));
            println!("run {r}: baseline {:.0}/s", before.last().unwrap());
        }
        now.push(run_once(&current, total, Auth::None));
        println!("run {r}: this commit {:.0}/s", now.last().unwrap());
    }
    let mut md = format!(
        "| binary | publishes | connections | runs | median publishes/s |\n| --- | ---: | ---: | ---: | ---: |\n| this commit ({commit}) | {total} | {CONNECTIONS} | {runs} | {:.0} |\n",
        median(now.clone())
    );
    if let Some(b) = &baseline {
        md.push_str(&format!(
            "| baseline ({}) | {total} | {CONNECTIONS} | {runs} | {:.0} |\n\nthis commit vs baseline: {:.2}×\n",
            std::path::Path::new(b)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            median(before.clone()),
            median(now.clone()) / median(before.clone())
        ));
    }
    println!("\n{md}");
    let doc = json!({
        "commit": commit,
        "publishes": total,
        "connections": CONNECTIONS,
        "runs": runs,
        "per_s": now,
        "baseline": baseline,
        "baseline_per_s": before,
    });
    support::keep_results("http", &commit, &md, &doc);
}

/// What verifying an access token with cached keys costs in process, in
/// µs per token: (every token new, its RS256 signature checked; the same
/// token again, remembered from its first check).
fn verify_cost() -> (f64, f64) {
    use postfach::server::oidc::{Issuer, IssuerConfig};
    let dir = tempfile::tempdir().unwrap();
    issuer_config(dir.path());
    let config = IssuerConfig {
        issuer: ISSUER.into(),
        audience: "postfach".into(),
        jwks_file: Some(dir.path().join("jwks.json")),
        roles_claim: "roles".into(),
        groups_claim: "groups".into(),
        console_client: None,
    };
    let (issuer, _) =
        Issuer::open(config, std::sync::Arc::new(postfach::clock::SystemClock)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let n = 2_000;
    let tokens: Vec<String> = (0..n)
        .map(|i| {
            let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
            h.kid = Some("r1".into());
            let claims = json!({
                "iss": ISSUER, "aud": "postfach", "exp": now + 3600, "iat": now,
                "preferred_username": format!("publisher-{i}"), "roles": ["starter"],
            });
            jsonwebtoken::encode(&h, &claims, &fixture_key()).unwrap()
        })
        .collect();
    rt.block_on(async {
        let t = Instant::now();
        for token in &tokens {
            issuer.caller_of(token).await.unwrap();
        }
        let fresh = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        let t = Instant::now();
        for _ in 0..10 {
            for token in &tokens {
                issuer.caller_of(token).await.unwrap();
            }
        }
        let remembered = t.elapsed().as_secs_f64() * 1e6 / (10 * n) as f64;
        (fresh, remembered)
    })
}

/// This commit with tokens (`auth`) against without, alternately.
fn tokens_against_none(commit: &str, binary: &str, total: usize, runs: u64, auth: Auth) {
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (label, result) = match auth {
        Auth::Jwt => ("an issuer's RS256 access token, keys cached", "http-jwt"),
        _ => (
            "named tokens (10 entries, a starter's token)",
            "http-tokens",
        ),
    };
    for r in 0..runs {
        without.push(run_once(binary, total, Auth::None));
        println!("run {r}: no tokens {:.0}/s", without.last().unwrap());
        with.push(run_once(binary, total, auth));
        println!("run {r}: {label} {:.0}/s", with.last().unwrap());
    }
    let (w, wo) = (median(with.clone()), median(without.clone()));
    let per_request_us = (1.0 / w - 1.0 / wo) * 1e6 * CONNECTIONS as f64;
    let verify = (auth == Auth::Jwt).then(verify_cost);
    let mut md = format!(
        "| server | publishes | connections | runs | median publishes/s |\n| --- | ---: | ---: | ---: | ---: |\n| {label} | {total} | {CONNECTIONS} | {runs} | {w:.0} |\n| no tokens | {total} | {CONNECTIONS} | {runs} | {wo:.0} |\n\nwith tokens vs without: {:.2}× (target ≥ 0.95×); per request, at {CONNECTIONS} concurrent: {per_request_us:+.1} µs of latency\n",
        w / wo
    );
    if let Some((fresh, remembered)) = verify {
        md.push_str(&format!(
            "\nverifying one access token in process, keys cached: {fresh:.1} µs with its signature checked (a token seen first), {remembered:.2} µs remembered (the same token again) — target ≤ 50 µs\n"
        ));
    }
    println!("\n{md}");
    let doc = json!({
        "commit": commit,
        "publishes": total,
        "connections": CONNECTIONS,
        "runs": runs,
        "with_tokens_per_s": with,
        "without_per_s": without,
        "verify_us": verify.map(|(f, r)| json!({"signature_checked": f, "remembered": r})),
    });
    support::keep_results(result, commit, &md, &doc);
}
