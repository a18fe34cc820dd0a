//! The standalone server: its composition root [`run`] wires an open
//! [`Postfach`] to the HTTP API, the Pub/Sub edge, the job executor, alarms and
//! retention; beside it its configuration (postfach.toml) and alarms.
//!
//! Invariants:
//! - Nothing here changes state but through the [`Postfach`] facade: the server
//!   is I/O around the engine, never a second path into it.
//! - On shutdown the edge stops pulling and finishes its in-flight deliveries
//!   (commit, then ack) before [`run`] returns; whatever was not acked is
//!   redelivered by Pub/Sub.
//! - The server never reads a caller's paths: models and files come in as content.

pub use crate::{alarms, config};
pub mod auth;
pub mod backups;
pub mod catalogue;
pub mod client;
pub mod console;
pub mod documents;
pub mod gateway;
pub mod http;
pub mod metrics;
mod moves;
pub mod oidc;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod shelf;
mod signals;
pub mod tls;
#[cfg(feature = "zeebe")]
pub mod zeebe;

use crate::runtime::{Error, Postfach};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// How the server listens.
#[derive(Clone)]
pub struct Listen {
    /// Address of the HTTP API.
    pub addr: SocketAddr,
    /// The admin token the API accepts (none and no named tokens: only a
    /// loopback address is allowed); the signal forwarder calls the other
    /// partitions with it.
    pub token: Option<String>,
    /// The named tokens the API accepts, each with its roles (`[auth]
    /// tokens_file`).
    pub tokens: Vec<auth::NamedToken>,
    /// The OpenID Connect issuer whose access tokens the API accepts
    /// (`[auth] issuer`).
    pub issuer: Option<oidc::Issuer>,
    /// The certificate and key the API serves TLS with (none: plain HTTP).
    pub tls: Option<tls::TlsFiles>,
    /// Plain HTTP on an address reachable from other machines, because a
    /// proxy in front terminates TLS (`--insecure-plaintext`).
    pub insecure_plaintext: bool,
    /// Where Zeebe's gateway protocol is served for Camunda 8's clients
    /// (feature `zeebe`), under the same tokens; none: not served.
    pub zeebe: Option<SocketAddr>,
    /// `zeebe` is only the default address: when it is taken, the server
    /// warns and serves without the Zeebe face instead of refusing to start.
    pub zeebe_if_free: bool,
}

/// Where the server listens once it does: handed to `run`'s `ready`.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// The HTTP API's address (its real port when port 0 was asked for).
    pub http: SocketAddr,
    /// Where Zeebe's gateway protocol is served, if it is.
    pub zeebe: Option<SocketAddr>,
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A non-loopback address without a token.
    #[error("{0} is reachable from other machines and no bearer token was given")]
    Exposed(SocketAddr),
    /// A non-loopback address without TLS, and plain HTTP not asked for.
    #[error("{0} is reachable from other machines and would speak plain HTTP")]
    Plaintext(SocketAddr),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The configuration names subscriptions or send topics, but this build has no Pub/Sub.
    #[error(
        "the configuration consumes subscriptions, publishes send tasks or events about parked messages, but this build has no Pub/Sub support (feature `pubsub`)"
    )]
    NoPubsub,
    /// The Pub/Sub edge could not start.
    #[error("Pub/Sub: {0}")]
    Pubsub(String),
    /// The HTTP server failed.
    #[error("HTTP server: {0}")]
    Http(std::io::Error),
    /// A value of the configuration is out of its range.
    #[error("configuration: {0}")]
    Config(String),
    /// The engine failed while stopping.
    #[error(transparent)]
    Engine(#[from] Error),
}

/// What the server did while it ran.
#[derive(Debug, Clone, Copy, Default)]
pub struct Report {
    /// Jobs the in-process executor completed.
    pub tasks_completed: usize,
}

/// Runs the server on `pf` until `shutdown` resolves: HTTP API on
/// `listen`, the Pub/Sub subscriptions and send topics of `config`, the job
/// executor, alarms and retention every 5 s. `ready` is told the bound address
/// once the API accepts connections. Deploy models and register handlers
/// before calling it.
pub async fn run(
    pf: &Postfach,
    config: config::ConfigFile,
    listen: Listen,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(Bound),
) -> Result<Report, ServerError> {
    if !listen.addr.ip().is_loopback()
        && listen.token.is_none()
        && listen.tokens.is_empty()
        && listen.issuer.is_none()
    {
        return Err(ServerError::Exposed(listen.addr));
    }
    let acceptor = tls_of(listen.addr, listen.tls.as_ref(), listen.insecure_plaintext)?;
    let limits = config.http.checked().map_err(ServerError::Config)?;
    let peers = cluster_peers(pf, &config.cluster)?;
    let listener = tokio::net::TcpListener::bind(listen.addr)
        .await
        .map_err(|source| ServerError::Bind {
            addr: listen.addr,
            source,
        })?;
    let bound = listener.local_addr().map_err(ServerError::Http)?;
    let zeebe = zeebe_listener(listen.zeebe, listen.zeebe_if_free).await?;
    let zeebe_bound = zeebe_addr(zeebe.as_ref());
    let consumers = crate::ingress::Consumers::default();
    let edge = start_edge(pf, &config, &consumers).await?;
    let exec = pf.start_executor(crate::jobs::ExecutorConfig::default());
    let forwarder = peers.map(|urls| signals::spawn(pf.clone(), urls, listen.token.clone()));
    let alarms = Arc::new(alarms::Alarms::new(config.alarms));
    let backups = Arc::new(backups::Backups::new(
        &config.backup,
        &config.storage,
        pf.partition().index(),
    ));
    let watcher = spawn_watcher(pf.clone(), alarms.clone(), backups.clone());
    let batcher = spawn_batch_runner(pf.clone());
    let mover = moves::spawn_runner(pf.clone(), listen.token.clone());
    // one shutdown for both: the API stops accepting, the edge stops pulling
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (mut stop_http, mut stop_edge) = (stop_rx.clone(), stop_rx.clone());
    let stop_zeebe = stop_rx;
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let (header_ms, body_ms, max_connections) = limits;
    let schedule = config
        .backup
        .every_ms()
        .ok()
        .flatten()
        .map(|ms| backups::spawn_schedule(backups.clone(), pf.clone(), ms));
    let archiver = backups::spawn_archiver(
        backups.clone(),
        crate::commit::wal::Wal::path_for(pf.path()),
        pf.partition().index(),
    );
    let keys = auth::Keys::with_issuer(listen.token, listen.tokens, listen.issuer);
    let zeebe = match zeebe {
        Some(listener) => Some(serve_zeebe(
            listener,
            pf,
            &keys,
            listen.tls.as_ref(),
            stop_zeebe,
        )?),
        None => None,
    };
    #[cfg(feature = "zeebe")]
    let rest = zeebe::rest::routes(zeebe::Face::new(
        pf.clone(),
        keys.clone(),
        zeebe_bound.unwrap_or(bound),
    ));
    let app = http::router(pf.clone(), keys, alarms, consumers, edge.objects(), backups);
    #[cfg(feature = "zeebe")]
    let app = app.merge(rest);
    let app = app.layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
        std::time::Duration::from_millis(body_ms),
    ));
    ready(Bound {
        http: bound,
        zeebe: zeebe_bound,
    });
    let server = serve(
        listener,
        app,
        std::time::Duration::from_millis(header_ms),
        max_connections,
        acceptor,
        async move {
            let _ = stop_http.changed().await;
        },
    );
    let (served, ()) = tokio::join!(server, async move {
        let _ = stop_edge.changed().await;
        edge.stop().await;
    });
    watcher.abort();
    batcher.abort();
    mover.abort();
    if let Some(z) = zeebe {
        let _ = z.await; // it stopped with the API
    }
    for task in [schedule, archiver].into_iter().flatten() {
        task.abort(); // closed segments wait beside the log for the next start
    }
    if let Some(f) = forwarder {
        f.abort(); // what it had not handed on stays kept for the next start
    }
    let report = exec.stop().await?;
    served.map_err(ServerError::Http)?;
    Ok(Report {
        tasks_completed: report.tasks_completed,
    })
}

/// The Pub/Sub edge of `config`: its subscriptions, send topics and parked
/// notifications.
#[cfg(feature = "pubsub")]
async fn start_edge(
    pf: &Postfach,
    config: &config::ConfigFile,
    consumers: &crate::ingress::Consumers,
) -> Result<crate::pubsub::Edge, ServerError> {
    crate::pubsub::Edge::start(pf, config, consumers)
        .await
        .map_err(|e| ServerError::Pubsub(e.to_string()))
}

/// Without Pub/Sub there is no edge: a configuration that asks for one is
/// refused.
#[cfg(not(feature = "pubsub"))]
async fn start_edge(
    _pf: &Postfach,
    config: &config::ConfigFile,
    _consumers: &crate::ingress::Consumers,
) -> Result<NoEdge, ServerError> {
    if !config.subscriptions.is_empty()
        || !config.send_topics.is_empty()
        || config.notifications.parked_topic.is_some()
    {
        return Err(ServerError::NoPubsub);
    }
    Ok(NoEdge)
}

/// Every 5 s: the alarms evaluated, and retention in small batches, each its
/// own commit.
fn spawn_watcher(
    pf: Postfach,
    alarms: Arc<alarms::Alarms>,
    backups: Arc<backups::Backups>,
) -> tokio::task::JoinHandle<()> {
    let started = pf.now();
    tokio::spawn(async move {
        loop {
            if let Ok(r) = pf.reader() {
                let facts = alarms::Facts {
                    started,
                    last_backup: backups.last_good_ms(),
                };
                let _ = alarms.evaluate(&r, &facts);
            }
            while let Ok((_, _, true)) = pf.cleanup(1000).await {}
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        }
    })
}

/// Works off the durable batches: every running one a slice at a time,
/// looking for new ones every 200 ms (a batch a crash interrupted goes on
/// from its cursor once the server runs again).
fn spawn_batch_runner(pf: Postfach) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(e) = pf.run_batches(|_| {}).await {
                tracing::warn!(error = %e, "a batch slice failed; it is tried again");
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    })
}

/// The listener of Zeebe's gateway protocol at `addr`, if asked for; the
/// default address (`if_free`) taken is a warning, and then none.
#[cfg(feature = "zeebe")]
async fn zeebe_listener(
    addr: Option<SocketAddr>,
    if_free: bool,
) -> Result<Option<tokio::net::TcpListener>, ServerError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => Ok(Some(l)),
        Err(source) if if_free => {
            tracing::warn!(%addr, error = %source, "Zeebe's port is taken: its gateway protocol is not served");
            eprintln!(
                "postfach: warning: {addr} is taken ({source}): Zeebe's gateway protocol is not served; give --zeebe-listen ADDR, or none"
            );
            Ok(None)
        }
        Err(source) => Err(ServerError::Bind { addr, source }),
    }
}

#[cfg(not(feature = "zeebe"))]
async fn zeebe_listener(
    addr: Option<SocketAddr>,
    _: bool,
) -> Result<Option<std::convert::Infallible>, ServerError> {
    match addr {
        None => Ok(None),
        Some(addr) => Err(ServerError::Config(format!(
            "Zeebe's gateway protocol on {addr} is asked for, but this build has no feature zeebe"
        ))),
    }
}

#[cfg(feature = "zeebe")]
fn zeebe_addr(l: Option<&tokio::net::TcpListener>) -> Option<SocketAddr> {
    l.and_then(|l| l.local_addr().ok())
}

#[cfg(not(feature = "zeebe"))]
fn zeebe_addr(l: Option<&std::convert::Infallible>) -> Option<SocketAddr> {
    l.map(|never| match *never {})
}

/// Serves Zeebe's gateway protocol until `stop` turns true; a failure is
/// logged (the HTTP API serves on).
#[cfg(feature = "zeebe")]
fn serve_zeebe(
    listener: tokio::net::TcpListener,
    pf: &Postfach,
    keys: &auth::Keys,
    tls: Option<&tls::TlsFiles>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, ServerError> {
    let tls = tls
        .map(|files| tls::acceptor_for(files, b"h2"))
        .transpose()
        .map_err(ServerError::Config)?;
    let addr = listener.local_addr().ok();
    let face = zeebe::Face::new(
        pf.clone(),
        keys.clone(),
        addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 26500))),
    );
    tracing::info!(addr = ?addr, tls = tls.is_some(), "Zeebe gateway protocol served");
    Ok(tokio::spawn(async move {
        let stopped = async move {
            let _ = stop.changed().await;
        };
        if let Err(e) = zeebe::serve(listener, face, tls, stopped).await {
            tracing::error!(error = %e, "Zeebe gateway protocol stopped");
        }
    }))
}

#[cfg(not(feature = "zeebe"))]
fn serve_zeebe(
    listener: std::convert::Infallible,
    _: &Postfach,
    _: &auth::Keys,
    _: Option<&tls::TlsFiles>,
    _: tokio::sync::watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, ServerError> {
    match listener {}
}

/// The other partitions' URLs of a partition of a cluster (`[cluster]
/// partition_urls`, one per partition), for the signals its processes throw;
/// none unpartitioned. A list of another length is refused; none at all in a
/// cluster is a warning: thrown signals then stay kept here.
fn cluster_peers(
    pf: &Postfach,
    cluster: &config::ClusterConfig,
) -> Result<Option<Vec<String>>, ServerError> {
    let p = pf.partition();
    if !p.is_clustered() {
        return Ok(None);
    }
    let urls = &cluster.partition_urls;
    if urls.is_empty() {
        tracing::warn!(
            partition = p.index(),
            "no [cluster] partition_urls (--partition-url): signals that processes throw here reach this partition only, and stay kept until the others are named"
        );
        return Ok(None);
    }
    if urls.len() != p.count() as usize {
        return Err(ServerError::Config(format!(
            "cluster.partition_urls names {} partitions; this is {p} (one URL per partition, by number)",
            urls.len()
        )));
    }
    cluster.check().map_err(ServerError::Config)?;
    Ok(Some(urls.clone()))
}

/// Serves `app` on `listener` until `stop` resolves, then lets the open
/// connections finish. A client gets `header_timeout` to send a request's
/// headers (then its connection is closed); at most `max_connections` are
/// served at once, further ones wait in the listen queue.
/// The TLS acceptor of a listener on `addr`: its files read now; none for
/// plain HTTP, which a non-loopback address gets only when asked for.
fn tls_of(
    addr: SocketAddr,
    files: Option<&tls::TlsFiles>,
    insecure_plaintext: bool,
) -> Result<Option<tokio_rustls::TlsAcceptor>, ServerError> {
    match files {
        Some(f) => tls::acceptor(f).map(Some).map_err(ServerError::Config),
        None if !addr.ip().is_loopback() && !insecure_plaintext => {
            Err(ServerError::Plaintext(addr))
        }
        None => Ok(None),
    }
}

async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    header_timeout: std::time::Duration,
    max_connections: usize,
    tls: Option<tokio_rustls::TlsAcceptor>,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let permits = Arc::new(tokio::sync::Semaphore::new(max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut stop => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // out of file descriptors and the like: back off, go on
                    tracing::warn!(error = %e, "accepting an HTTP connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let watcher = graceful.watcher();
        let builder = builder.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => {
                    let conn =
                        builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                    let _ = watcher.watch(conn.into_owned()).await;
                }
                Some(acceptor) => {
                    // the handshake is bounded like a request's header
                    let shaken =
                        tokio::time::timeout(header_timeout, acceptor.accept(stream)).await;
                    let Ok(Ok(stream)) = shaken else {
                        drop(permit);
                        return;
                    };
                    let conn =
                        builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                    let _ = watcher.watch(conn.into_owned()).await;
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

#[cfg(not(feature = "pubsub"))]
struct NoEdge;
#[cfg(not(feature = "pubsub"))]
impl NoEdge {
    async fn stop(self) {}
    fn objects(&self) -> Option<Arc<dyn crate::objects::ObjectStore>> {
        None
    }
}
