//! `postfach gateway`: a stateless HTTP front of a cluster's partitions. It
//! serves the same API, OpenAPI document and console as `postfach run`,
//! sends each write to the partition that owns its key or id, deploys to
//! every partition, and gathers reads from all of them.
//!
//! Invariants:
//! - The gateway keeps no state of the engine: every answer comes from the
//!   partitions, and any number of gateways may serve the same cluster.
//! - A write reaches the partition that owns it, or none: a start placed on a
//!   partition that does not own its key is refused there before anything is
//!   written (421, naming the owner) and sent to the owner.
//! - An answer gathered from several partitions names the partitions it could
//!   not reach (`missing`), rather than being silently shorter.

pub mod client;
pub mod gather;
mod pages;
pub mod route;

use super::ServerError;
use super::catalogue::Placement;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use client::{Answer, Partitions, Unreachable};
use route::List;
use serde_json::{Value, json};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// What a gateway serves.
#[derive(Clone)]
pub struct GatewayConfig {
    /// The base URL of each partition, by partition number.
    pub partitions: Vec<String>,
    /// The admin token callers may present; a caller's token is passed on
    /// to the partitions, which require the same ones.
    pub token: Option<String>,
    /// The named tokens callers may present (`[auth] tokens_file`).
    pub tokens: Vec<super::auth::NamedToken>,
    /// The OpenID Connect issuer whose access tokens callers may present
    /// (the partitions check them again).
    pub issuer: Option<super::oidc::Issuer>,
    /// The certificate and key the gateway serves TLS with (none: plain).
    pub tls: Option<super::tls::TlsFiles>,
    /// Plain HTTP on a non-loopback address (`--insecure-plaintext`).
    pub insecure_plaintext: bool,
    /// The CA an `https://` partition's certificate must chain to (none:
    /// the public roots).
    pub partitions_ca: Option<std::path::PathBuf>,
    /// Where Zeebe's gateway protocol is served for the cluster (feature
    /// `zeebe`), forwarding to `partition_zeebe`; none: not served.
    pub zeebe_listen: Option<SocketAddr>,
    /// `zeebe_listen` is only the default address: taken, it is skipped
    /// with a warning.
    pub zeebe_if_free: bool,
    /// Where each partition serves Zeebe's gateway protocol (`HOST:PORT`,
    /// plaintext), in partition order.
    pub partition_zeebe: Vec<String>,
}

#[derive(Clone)]
struct Gw {
    parts: Partitions,
    keys: super::auth::Keys,
    /// The partition the next round-robin choice starts at.
    turn: Arc<AtomicU32>,
    /// Signals sent through this gateway that reached no receiver on any
    /// partition.
    unreached: Arc<std::sync::atomic::AtomicU64>,
    /// Signals given an id here so far (part of the next id).
    signals: Arc<std::sync::atomic::AtomicU64>,
}

impl Gw {
    fn next_turn(&self) -> u32 {
        self.turn.fetch_add(1, Ordering::Relaxed) % self.parts.count()
    }

    fn partition_of_key(&self, key: &str) -> u32 {
        match crate::partition::Partition::new(0, u64::from(self.parts.count())) {
            Ok(p) => p.of_key(key),
            Err(_) => 0,
        }
    }
}

/// The gateway as an axum router over `config`'s partitions.
pub fn router(config: GatewayConfig) -> Router {
    let gw = Gw {
        // `run` read the CA file before: a file gone since leaves the public
        // roots, which no partition's private certificate chains to
        parts: match &config.partitions_ca {
            Some(ca) => Partitions::with_ca(config.partitions.clone(), ca)
                .unwrap_or_else(|_| Partitions::new(config.partitions)),
            None => Partitions::new(config.partitions),
        },
        keys: super::auth::Keys::with_issuer(config.token, config.tokens, config.issuer),
        turn: Arc::new(AtomicU32::new(0)),
        unreached: Default::default(),
        signals: Default::default(),
    };
    let routes = Router::new()
        .route("/health/live", get(live))
        .route("/health/ready", get(ready))
        .route("/cluster/status", get(status))
        .fallback(forward);
    super::auth::face(routes, gw.keys.clone()).with_state(gw)
}

/// Serves the gateway on `addr` until `shutdown` resolves; `ready` is told
/// the bound address.
pub async fn run(
    config: GatewayConfig,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServerError> {
    if !addr.ip().is_loopback()
        && config.token.is_none()
        && config.tokens.is_empty()
        && config.issuer.is_none()
    {
        return Err(ServerError::Exposed(addr));
    }
    let acceptor = super::tls_of(addr, config.tls.as_ref(), config.insecure_plaintext)?;
    if let Some(ca) = &config.partitions_ca {
        super::tls::client_config(Some(ca)).map_err(ServerError::Config)?;
    }
    if config.partitions.is_empty() {
        return Err(ServerError::Config(
            "a gateway needs the URL of every partition".into(),
        ));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let bound = listener.local_addr().map_err(ServerError::Http)?;
    let limits = crate::config::HttpConfig::default()
        .checked()
        .map_err(ServerError::Config)?;
    let zeebe = zeebe_face(&config).await?;
    let app = router(config).layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
        std::time::Duration::from_millis(limits.1),
    ));
    ready(bound);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let zeebe = zeebe.map(|serve| serve(stop_rx.clone()));
    let mut stop_http = stop_rx;
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let served = super::serve(
        listener,
        app,
        std::time::Duration::from_millis(limits.0),
        limits.2,
        acceptor,
        async move {
            let _ = stop_http.changed().await;
        },
    )
    .await
    .map_err(ServerError::Http);
    if let Some(z) = zeebe {
        let _ = z.await; // it stopped with the API
    }
    served
}

/// Starts the Zeebe face when it is asked for: a task that serves until
/// its stop channel turns.
type ZeebeStart =
    Box<dyn FnOnce(tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<()> + Send>;

/// The Zeebe face of the gateway, bound, ready to serve (none: not asked
/// for, or the default address taken).
#[cfg(feature = "zeebe")]
async fn zeebe_face(config: &GatewayConfig) -> Result<Option<ZeebeStart>, ServerError> {
    let Some(addr) = config.zeebe_listen else {
        return Ok(None);
    };
    if config.partition_zeebe.len() != config.partitions.len() {
        return Err(ServerError::Config(format!(
            "the Zeebe face of a gateway of {} partitions needs --partition-zeebe I=HOST:PORT for each ({} given)",
            config.partitions.len(),
            config.partition_zeebe.len()
        )));
    }
    let face = super::zeebe::Forward::new(&config.partition_zeebe).map_err(ServerError::Config)?;
    let tls = config
        .tls
        .as_ref()
        .map(|files| super::tls::acceptor_for(files, b"h2"))
        .transpose()
        .map_err(ServerError::Config)?;
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(source) if config.zeebe_if_free => {
            eprintln!(
                "postfach: warning: {addr} is taken ({source}): Zeebe's gateway protocol is not served; give --zeebe-listen ADDR, or none"
            );
            return Ok(None);
        }
        Err(source) => return Err(ServerError::Bind { addr, source }),
    };
    eprintln!(
        "postfach: Zeebe gateway protocol (gRPC) on {addr}, for {} partitions",
        config.partition_zeebe.len()
    );
    Ok(Some(Box::new(move |mut stop| {
        tokio::spawn(async move {
            let stopped = async move {
                let _ = stop.changed().await;
            };
            if let Err(e) = super::zeebe::serve(listener, face, tls, stopped).await {
                tracing::error!(error = %e, "Zeebe gateway protocol stopped");
            }
        })
    })))
}

#[cfg(not(feature = "zeebe"))]
async fn zeebe_face(config: &GatewayConfig) -> Result<Option<ZeebeStart>, ServerError> {
    match config.zeebe_listen {
        None => Ok(None),
        Some(addr) => Err(ServerError::Config(format!(
            "Zeebe's gateway protocol on {addr} is asked for, but this build has no feature zeebe"
        ))),
    }
}

fn problem(status: StatusCode, message: String) -> Response {
    (status, Json(json!({"error": message}))).into_response()
}

fn missing_json(missing: &[Unreachable]) -> Value {
    Value::Array(
        missing
            .iter()
            .map(|u| json!({"partition": u.partition, "url": u.url, "error": u.reason}))
            .collect(),
    )
}

fn unreachable(u: &Unreachable) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"error": u.to_string(), "missing": missing_json(std::slice::from_ref(u))})),
    )
        .into_response()
}

fn respond(a: Answer) -> Response {
    let mut r = (a.status, a.body).into_response();
    r.headers_mut().extend(a.headers);
    r
}

fn json_response(status: StatusCode, v: Value) -> Response {
    (status, Json(v)).into_response()
}

/// Live, and a gateway of how many partitions (the console shows its cluster
/// view for a gateway only).
async fn live(State(gw): State<Gw>) -> Response {
    Json(json!({"status": "live", "gateway": true, "partitions": gw.parts.count()})).into_response()
}

/// The gateway is ready when it serves; which partitions are up is what
/// `/cluster/status` says (a partition that is down must not take the
/// gateway out of its Service, or the others' traffic would stop too).
async fn ready(State(gw): State<Gw>) -> Response {
    Json(json!({"status": "ready", "partitions": gw.parts.count()})).into_response()
}

/// One request as the gateway passes it on.
struct Passed {
    method: Method,
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
}

impl Passed {
    fn path_and_query(&self) -> String {
        match &self.query {
            Some(q) => format!("{}?{q}", self.path),
            None => self.path.clone(),
        }
    }
}

async fn forward(State(gw): State<Gw>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, super::http::MAX_MODEL_BODY).await {
        Ok(b) => b,
        Err(e) => {
            return problem(StatusCode::PAYLOAD_TOO_LARGE, format!("request body: {e}"));
        }
    };
    let p = Passed {
        method: parts.method,
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts.headers,
        body,
    };
    // the catalogue's placement of the operation, matched exhaustively
    let Some((placement, id)) = route::route(&p.method, &p.path) else {
        return any(&gw, &p).await;
    };
    match placement {
        Placement::ById(_) => match id {
            Some(id) => one(&gw, id % u64::from(gw.parts.count()), &p).await,
            // not a number: the partition's 400
            None => any(&gw, &p).await,
        },
        Placement::PartitionZero => one(&gw, 0, &p).await,
        Placement::ByKey => {
            let key = serde_json::from_slice::<Value>(&p.body)
                .ok()
                .and_then(|v| v.get("key").and_then(Value::as_str).map(str::to_string));
            // no key: partition 0 answers 400 as any partition would
            let owner = key.map(|k| gw.partition_of_key(&k)).unwrap_or(0);
            one(&gw, u64::from(owner), &p).await
        }
        Placement::Start => start(&gw, &p).await,
        Placement::Everywhere => everywhere(&gw, &p).await,
        Placement::Signal => signal(&gw, &p).await,
        Placement::Find => find(&gw, &p).await,
        Placement::Gather(list) => pages::page(&gw, list, &p).await,
        Placement::Processes => combined(&gw, &p, gather::processes).await,
        Placement::Statistics => combined(&gw, &p, gather::statistics).await,
        Placement::Alarms => alarms(&gw, &p).await,
        Placement::Acquire => acquire(&gw, &p).await,
        Placement::Metrics => metrics(&gw, &p).await,
        Placement::Summed => combined(&gw, &p, gather::merge).await,
        Placement::BackupSet => backup_set(&gw, p).await,
        // the gateway answers its health itself; forwarded, any would do
        Placement::Same | Placement::Local => any(&gw, &p).await,
    }
}

async fn one(gw: &Gw, partition: u64, p: &Passed) -> Response {
    let i = partition as u32;
    match send(gw, i, p, &p.body).await {
        Ok(a) => respond(a),
        Err(u) => unreachable(&u),
    }
}

async fn send(gw: &Gw, i: u32, p: &Passed, body: &Bytes) -> Result<Answer, Unreachable> {
    gw.parts
        .send(
            i,
            p.method.clone(),
            &p.path_and_query(),
            &p.headers,
            body.clone(),
        )
        .await
}

/// Sends the same request to every partition at once; answers by partition.
async fn all(gw: &Gw, p: &Passed) -> Vec<Result<Answer, Unreachable>> {
    all_with(gw, p, |_| p.path_and_query(), |_| p.body.clone(), |_| true)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Sends to every partition `ask` selects at once, each its own path and
/// body; answers by partition (none for a partition not asked).
async fn all_with(
    gw: &Gw,
    p: &Passed,
    path: impl Fn(u32) -> String,
    body: impl Fn(u32) -> Bytes,
    ask: impl Fn(usize) -> bool,
) -> Vec<Option<Result<Answer, Unreachable>>> {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..gw.parts.count() {
        if !ask(i as usize) {
            continue;
        }
        let (parts, method, headers) = (gw.parts.clone(), p.method.clone(), p.headers.clone());
        let (pq, b) = (path(i), body(i));
        set.spawn(async move { (i, parts.send(i, method, &pq, &headers, b).await) });
    }
    let mut out: Vec<Option<Result<Answer, Unreachable>>> =
        (0..gw.parts.count()).map(|_| None).collect();
    while let Some(done) = set.join_next().await {
        if let Ok((i, r)) = done {
            out[i as usize] = Some(r);
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(i, r)| match r {
            Some(r) => Some(r),
            None if ask(i) => Some(Err(Unreachable {
                partition: i as u32,
                url: gw.parts.url(i as u32).to_string(),
                reason: "the request was lost".into(),
            })),
            None => None,
        })
        .collect()
}

/// A start goes round-robin; a partition that does not own the instance's key
/// refuses it (421) naming the owner, before it writes anything.
async fn start(gw: &Gw, p: &Passed) -> Response {
    let first = gw.next_turn();
    let a = match send(gw, first, p, &p.body).await {
        Ok(a) => a,
        Err(u) => return start_elsewhere(gw, p, first, u).await,
    };
    if a.status == StatusCode::MISDIRECTED_REQUEST
        && let Some(owner) = a
            .json()
            .and_then(|v| v.get("partition").and_then(Value::as_u64))
        && owner < u64::from(gw.parts.count())
    {
        return one(gw, owner, p).await;
    }
    respond(a)
}

/// The first partition asked for a start did not answer: any other takes it
/// (or sends it on to the owner of its key).
async fn start_elsewhere(gw: &Gw, p: &Passed, first: u32, u: Unreachable) -> Response {
    let n = gw.parts.count();
    for step in 1..n {
        let i = (first + step) % n;
        if let Ok(a) = send(gw, i, p, &p.body).await {
            if a.status == StatusCode::MISDIRECTED_REQUEST
                && let Some(owner) = a
                    .json()
                    .and_then(|v| v.get("partition").and_then(Value::as_u64))
                && owner < u64::from(n)
            {
                return one(gw, owner, p).await;
            }
            return respond(a);
        }
    }
    unreachable(&u)
}

/// A deployment reaches every partition (idempotent by content there): the
/// answer is the first partition's when all took it; otherwise which did not.
async fn everywhere(gw: &Gw, p: &Passed) -> Response {
    let answers = all(gw, p).await;
    let ok: Vec<&Answer> = answers
        .iter()
        .filter_map(|a| a.as_ref().ok().filter(|a| a.status.is_success()))
        .collect();
    if ok.len() == answers.len() {
        let mut v = ok[0].json().unwrap_or(Value::Null);
        if let Value::Object(o) = &mut v {
            o.insert("partitions".into(), json!(answers.len()));
        }
        return json_response(ok[0].status, v);
    }
    // refused by a partition for what it is (a bad model): that answer
    if ok.is_empty()
        && let Some(Ok(a)) = answers.iter().find(|a| a.is_ok())
    {
        return respond(a.clone());
    }
    let (done, failed): (Vec<_>, Vec<_>) = answers
        .iter()
        .enumerate()
        .partition(|(_, a)| a.as_ref().is_ok_and(|a| a.status.is_success()));
    let reasons: Vec<Value> = failed
        .iter()
        .map(|(i, a)| match a {
            Ok(a) => json!({"partition": i, "status": a.status.as_u16(), "error": a.json().and_then(|v| v.get("error").cloned())}),
            Err(u) => json!({"partition": i, "url": u.url, "error": u.reason}),
        })
        .collect();
    json_response(
        StatusCode::BAD_GATEWAY,
        json!({
            "error": format!(
                "taken by partitions {:?} only; send it again (a deployment is idempotent by content)",
                done.iter().map(|(i, _)| *i).collect::<Vec<_>>()
            ),
            "failed": reasons,
        }),
    )
}

/// A signal reaches every partition with one id (given by the caller, or made
/// here), so each applies it once however often it is sent; `reached` is the
/// sum; a partition that could not be asked is named (502: send the same
/// body again, with the `id` of the answer). A signal that reached no
/// receiver anywhere is counted here (`/metrics`).
async fn signal(gw: &Gw, p: &Passed) -> Response {
    let Some(Value::Object(mut body)) = serde_json::from_slice::<Value>(&p.body).ok() else {
        return any(gw, p).await; // the partition's 400
    };
    let id = match body.get("id").and_then(Value::as_str) {
        Some(id) => id.to_string(),
        None => {
            let id = signal_id(gw);
            body.insert("id".into(), json!(id));
            id
        }
    };
    let bytes = Bytes::from(Value::Object(body).to_string());
    let answers = all_with(gw, p, |_| p.path_and_query(), |_| bytes.clone(), |_| true).await;
    let mut reached = 0u64;
    let mut missing = Vec::new();
    let mut first = None;
    for a in answers.into_iter().flatten() {
        match a {
            Ok(a) if a.status.is_success() => {
                let v = a.json().unwrap_or(Value::Null);
                reached += v.get("reached").and_then(Value::as_u64).unwrap_or(0);
                first.get_or_insert(v);
            }
            Ok(a) => return respond(a),
            Err(u) => missing.push(u),
        }
    }
    let Some(mut v) = first else {
        return unreachable(&missing[0]);
    };
    v["reached"] = json!(reached);
    v["id"] = json!(id);
    v["missing"] = missing_json(&missing);
    if !missing.is_empty() {
        return json_response(StatusCode::BAD_GATEWAY, v);
    }
    if reached == 0 {
        gw.unreached.fetch_add(1, Ordering::Relaxed);
    }
    json_response(StatusCode::OK, v)
}

/// A signal id no other gateway makes: `g-` + this process, the time and a
/// count.
fn signal_id(gw: &Gw) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = gw.signals.fetch_add(1, Ordering::Relaxed);
    format!("g-{:x}-{nanos:x}-{n:x}", std::process::id())
}

/// A parked message named by the publisher's id: the partition that has it
/// answers; the others answer 404 and change nothing.
async fn find(gw: &Gw, p: &Passed) -> Response {
    let answers = all(gw, p).await;
    let mut refused = None;
    let mut not_found = None;
    let mut missing = Vec::new();
    for a in answers {
        match a {
            Ok(a) if a.status.is_success() => return respond(a),
            Ok(a) if a.status == StatusCode::NOT_FOUND => {
                not_found.get_or_insert(a);
            }
            Ok(a) => {
                refused.get_or_insert(a);
            }
            Err(u) => missing.push(u),
        }
    }
    if let Some(a) = refused {
        return respond(a);
    }
    if !missing.is_empty() {
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": "no partition that answered has this message; it may be on one that did not", "missing": missing_json(&missing)}),
        );
    }
    not_found.map(respond).unwrap_or_else(|| {
        problem(
            StatusCode::NOT_FOUND,
            "no partition has this message".into(),
        )
    })
}

/// Any partition that answers.
async fn any(gw: &Gw, p: &Passed) -> Response {
    match any_answer(gw, p).await {
        Ok(a) => respond(a),
        Err(u) => unreachable(&u),
    }
}

/// The answer of the first partition in turn that answers, or why the last
/// one did not.
async fn any_answer(gw: &Gw, p: &Passed) -> Result<Answer, Unreachable> {
    let n = gw.parts.count();
    let first = gw.next_turn();
    let mut last = None;
    for step in 0..n {
        match send(gw, (first + step) % n, p, &p.body).await {
            Ok(a) => return Ok(a),
            Err(u) => last = Some(u),
        }
    }
    Err(last.unwrap_or_else(|| Unreachable {
        partition: 0,
        url: String::new(),
        reason: "the gateway has no partitions".into(),
    }))
}

/// Answers of every partition combined by `merge`; the partitions not
/// reached are named.
async fn combined(gw: &Gw, p: &Passed, merge: fn(&[Value]) -> Value) -> Response {
    let mut values = Vec::new();
    let mut missing = Vec::new();
    let mut not_found = None;
    for a in all(gw, p).await {
        match a {
            Ok(a) if a.status.is_success() => values.push(a.json().unwrap_or(Value::Null)),
            Ok(a) if a.status == StatusCode::NOT_FOUND => {
                not_found.get_or_insert(a);
            }
            Ok(a) => return respond(a),
            Err(u) => missing.push(u),
        }
    }
    if values.is_empty() {
        return match (not_found, missing.first()) {
            (Some(a), _) => respond(a),
            (None, Some(u)) => unreachable(u),
            (None, None) => problem(StatusCode::SERVICE_UNAVAILABLE, "no partitions".into()),
        };
    }
    let mut v = merge(&values);
    if let Value::Object(o) = &mut v {
        o.insert("missing".into(), missing_json(&missing));
    }
    json_response(StatusCode::OK, v)
}

/// A backup of every partition under one set id: the caller's, else the
/// gateway's instant; a body that is not a JSON object goes on as it is,
/// for the partitions' 400.
async fn backup_set(gw: &Gw, mut p: Passed) -> Response {
    let given = if p.body.is_empty() {
        Some(serde_json::Map::new())
    } else {
        serde_json::from_slice::<serde_json::Map<String, Value>>(&p.body).ok()
    };
    if let Some(mut body) = given {
        if body.get("id").is_none_or(Value::is_null) {
            let now = crate::clock::Clock::now(&crate::clock::SystemClock);
            body.insert("id".into(), json!(crate::backup::set_id(now)));
        }
        p.body = Bytes::from(Value::Object(body).to_string());
        p.headers.insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        );
    }
    combined(gw, &p, gather::merge).await
}

async fn alarms(gw: &Gw, p: &Passed) -> Response {
    let mut list = Vec::new();
    let mut missing = Vec::new();
    for (i, a) in all(gw, p).await.into_iter().enumerate() {
        match a {
            Ok(a) if a.status.is_success() => {
                let v = a.json().unwrap_or(Value::Null);
                for mut alarm in v
                    .get("alarms")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
                {
                    alarm["partition"] = json!(i);
                    list.push(alarm);
                }
            }
            Ok(a) => return respond(a),
            Err(u) => missing.push(u),
        }
    }
    json_response(
        StatusCode::OK,
        json!({"alarms": list, "missing": missing_json(&missing)}),
    )
}

/// Jobs acquired fairly: each request starts at the next partition in turn and
/// asks one partition after another for what is still missing of `max`.
async fn acquire(gw: &Gw, p: &Passed) -> Response {
    let Some(Value::Object(body)) = serde_json::from_slice::<Value>(&p.body).ok() else {
        return any(gw, p).await; // the partition's 400
    };
    let max = body.get("max").and_then(Value::as_u64).unwrap_or(1);
    let n = gw.parts.count();
    let first = gw.next_turn();
    let mut jobs = Vec::new();
    let mut missing = Vec::new();
    for step in 0..n {
        let remaining = max.saturating_sub(jobs.len() as u64);
        if remaining == 0 {
            break;
        }
        let mut b = body.clone();
        b.insert("max".into(), json!(remaining));
        let bytes = Bytes::from(Value::Object(b).to_string());
        match send(gw, (first + step) % n, p, &bytes).await {
            Ok(a) if a.status.is_success() => {
                let v = a.json().unwrap_or(Value::Null);
                jobs.extend(
                    v.get("jobs")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            Ok(a) => return respond(a),
            Err(u) => missing.push(u),
        }
    }
    json_response(
        StatusCode::OK,
        json!({"jobs": jobs, "missing": missing_json(&missing)}),
    )
}

/// Every partition's metrics, each sample labelled with its partition and
/// each family once, its samples together (as OpenMetrics and Prometheus'
/// parser require); a partition not reached shows as
/// `postfach_partition_up{partition="N"} 0`.
async fn metrics(gw: &Gw, p: &Passed) -> Response {
    let mut families = gather::Families::default();
    let mut up = String::from(
        "# HELP postfach_partition_up Whether the gateway reached the partition.\n# TYPE postfach_partition_up gauge\n",
    );
    let mut content_type = None;
    for (i, a) in all(gw, p).await.into_iter().enumerate() {
        match a {
            Ok(a) if a.status.is_success() => {
                families.add(&String::from_utf8_lossy(&a.body), i as u32);
                content_type = content_type.or(a.content_type().cloned());
                up.push_str(&format!("postfach_partition_up{{partition=\"{i}\"}} 1\n"));
            }
            Ok(a) => return respond(a),
            Err(_) => up.push_str(&format!("postfach_partition_up{{partition=\"{i}\"}} 0\n")),
        }
    }
    let mut text = families.render();
    text.push_str(&up);
    text.push_str(&format!(
        "# HELP postfach_cluster_signals_unreached Signals sent through this gateway that reached no receiver on any partition.\n# TYPE postfach_cluster_signals_unreached counter\npostfach_cluster_signals_unreached_total {}\n",
        gw.unreached.load(Ordering::Relaxed)
    ));
    text.push_str("# EOF\n");
    let mut r = text.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        content_type.unwrap_or(header::HeaderValue::from_static(
            super::metrics::CONTENT_TYPE,
        )),
    );
    r
}

/// `GET /cluster/status`: every partition's own `/partition` summary and
/// readiness, or why it could not be asked.
async fn status(State(gw): State<Gw>, headers: HeaderMap) -> Response {
    let p = Passed {
        method: Method::GET,
        path: "/partition".into(),
        query: None,
        headers,
        body: Bytes::new(),
    };
    let summaries = all(&gw, &p).await;
    let ready: Vec<_> = all_with(
        &gw,
        &p,
        |_| "/health/ready".into(),
        |_| Bytes::new(),
        |_| true,
    )
    .await
    .into_iter()
    .flatten()
    .collect();
    let list: Vec<Value> = summaries
        .into_iter()
        .zip(ready)
        .enumerate()
        .map(|(i, (s, r))| {
            let mut v = json!({"partition": i, "url": gw.parts.url(i as u32)});
            match s {
                Ok(a) if a.status.is_success() => {
                    if let Some(Value::Object(o)) = a.json() {
                        for (k, x) in o {
                            if k != "partition" {
                                v[k] = x;
                            }
                        }
                    }
                    v["up"] = json!(true);
                }
                Ok(a) => {
                    v["up"] = json!(true);
                    v["error"] = a
                        .json()
                        .and_then(|j| j.get("error").cloned())
                        .unwrap_or(json!(a.status.as_u16()));
                }
                Err(u) => {
                    v["up"] = json!(false);
                    v["error"] = json!(u.reason);
                }
            }
            v["ready"] = json!(r.as_ref().is_ok_and(|a| a.status.is_success()));
            if let Ok(a) = &r
                && !a.status.is_success()
            {
                v["not_ready"] = a
                    .json()
                    .and_then(|j| j.get("error").cloned())
                    .unwrap_or(Value::Null);
            }
            v
        })
        .collect();
    Json(json!({"partitions": list})).into_response()
}
