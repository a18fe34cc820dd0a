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
mod fanout;
pub mod gather;
mod pages;
pub mod route;
mod slots;

use super::ServerError;
use super::catalogue::Placement;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use client::{Answer, Partitions, Unreachable};
use fanout::{
    acquire, alarms, any, backup_set, combined, everywhere, find, metrics, signal, status,
};
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
    /// The slot map it routes by.
    map: Arc<slots::MapCache>,
    /// The admin token, for the gateway's own questions (the slot map).
    admin: Option<String>,
    /// Held for writing while a backup set is taken, for reading while a
    /// move begins: no move begins through this gateway during a set.
    sets: Arc<tokio::sync::RwLock<()>>,
}

impl Gw {
    fn next_turn(&self) -> u32 {
        self.turn.fetch_add(1, Ordering::Relaxed) % self.parts.count()
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
        admin: config.token.clone(),
        keys: super::auth::Keys::with_issuer(config.token, config.tokens, config.issuer),
        turn: Arc::new(AtomicU32::new(0)),
        unreached: Default::default(),
        signals: Default::default(),
        map: Default::default(),
        sets: Default::default(),
    };
    let routes = Router::new()
        .route("/health/live", get(live))
        .route("/health/ready", get(ready))
        .route("/cluster/status", get(status))
        .route("/slots", get(slot_map))
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
            Some(id) => {
                let at = slots::map(&gw, &p.headers).await.partition_of_id(id);
                by_map(&gw, at, &p).await
            }
            // not a number: the partition's 400
            None => any(&gw, &p).await,
        },
        Placement::ByPartitionId(_) => match id {
            Some(id) => match crate::slots::partition_of_partition_id(id) {
                i if i < gw.parts.count() => one(&gw, u64::from(i), &p).await,
                // a batch id of a partition the gateway does not know: the
                // partitions' 404 as any would give it
                _ => any(&gw, &p).await,
            },
            None => any(&gw, &p).await,
        },
        Placement::SlotMap => slot_map(State(gw.clone()), p.headers.clone()).await,
        Placement::MoveSlots => match slots::begin_moves(&gw, &p.headers, &p.body).await {
            Ok((status, v)) => json_response(status, v),
            Err((status, why)) => problem(status, why),
        },
        Placement::PartitionZero => one(&gw, 0, &p).await,
        Placement::ByKey => {
            let key = serde_json::from_slice::<Value>(&p.body)
                .ok()
                .and_then(|v| v.get("key").and_then(Value::as_str).map(str::to_string));
            // no key: partition 0 answers 400 as any partition would
            let at = match key {
                Some(k) => slots::map(&gw, &p.headers).await.partition_of_key(&k),
                None => 0,
            };
            by_map(&gw, at, &p).await
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

/// A request the slot map placed on partition `at` (see [`slots::placed`]).
async fn by_map(gw: &Gw, at: u32, p: &Passed) -> Response {
    let sent = slots::Sent {
        method: &p.method,
        path: &p.path_and_query(),
        headers: &p.headers,
        body: &p.body,
    };
    match slots::placed(gw, at, sent).await {
        Ok(a) => respond(a),
        Err(u) => unreachable(&u),
    }
}

/// `GET /slots` on a gateway: the cluster's map gathered now, with every
/// partition's moves in flight.
async fn slot_map(State(gw): State<Gw>, headers: HeaderMap) -> Response {
    match slots::gathered(&gw, &headers).await {
        (Some(map), moves) => Json(slots::map_json(&map, moves)).into_response(),
        (None, _) => Json(json!({"slot_count": null, "map_version": 0, "slots": [], "moves": []}))
            .into_response(),
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
        // the owner, and while its slot moves, until it is done
        return by_map(gw, owner as u32, p).await;
    }
    if a.status == StatusCode::SERVICE_UNAVAILABLE
        && a.json().is_some_and(|v| v.get("moving").is_some())
    {
        return by_map(gw, first, p).await;
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
                return by_map(gw, owner as u32, p).await;
            }
            return respond(a);
        }
    }
    unreachable(&u)
}
