//! The standalone server, `run`: its configuration, partition, bearer token
//! and exposure checks, and the graceful stop on the first signal.
//!
//! Invariant: everything that can refuse a start (token, exposure,
//! configuration, partition) is checked before the database is written.

use super::prelude::*;
use super::values::{MAX_CONFIG, MAX_TOKEN, correlation_keys, read_bounded, send_topics};
use clap::Args;
use postfach::Postfach;
use serde_json::json;
use std::path::PathBuf;

/// A Pub/Sub subscription and how its deliveries decode: what `run` consumes
/// and what a cluster's router routes.
#[derive(Debug, Args, Default)]
pub(crate) struct SubscriptionArgs {
    /// Consume this Pub/Sub subscription (short name in the configured
    /// project, or projects/P/subscriptions/S); see also [[subscriptions]].
    #[arg(long, value_name = "SUBSCRIPTION", requires_all = ["message", "key_from"])]
    pub(crate) subscription: Option<String>,
    /// The BPMN message name of the subscription's deliveries.
    #[arg(long, value_name = "MESSAGE", requires = "subscription")]
    pub(crate) message: Option<String>,
    /// Where the correlation key comes from: /json/pointer or attribute:NAME.
    #[arg(long, value_name = "SOURCE", requires = "subscription")]
    pub(crate) key_from: Option<String>,
    /// Where the message id comes from (default attribute:eventId, falling
    /// back to Pub/Sub's message_id, which a cluster's router keeps).
    #[arg(long, value_name = "SOURCE", requires = "subscription")]
    pub(crate) id_from: Option<String>,
    /// Streaming pulls opened on the subscription (1–32, default 8).
    #[arg(long, value_name = "N", requires = "subscription")]
    pub(crate) streams: Option<u32>,
}

impl SubscriptionArgs {
    /// The subscription the flags name, if any (not yet checked: the caller
    /// sets what else it knows and compiles it).
    pub(crate) fn config(&self) -> Option<postfach::ingress::SubscriptionConfig> {
        let (Some(sub), Some(message), Some(key)) =
            (&self.subscription, &self.message, &self.key_from)
        else {
            return None;
        };
        let mut s = postfach::ingress::SubscriptionConfig::new(sub, message, key);
        if let Some(id) = &self.id_from {
            s.message_id = id.clone();
        }
        if let Some(n) = self.streams {
            s.streams = n;
        }
        Some(s)
    }
}

/// TLS of a listener (`run`, `gateway`).
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct TlsArgs {
    /// PEM certificate chain to serve TLS with (with --tls-key); read again
    /// when the file changes.
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Serve plain HTTP on a non-loopback --listen, because a proxy in front
    /// terminates TLS.
    #[arg(long, conflicts_with = "tls_cert")]
    pub(crate) insecure_plaintext: bool,
}

impl TlsArgs {
    /// The files to serve TLS with, if given.
    pub(crate) fn files(&self) -> Option<postfach::server::tls::TlsFiles> {
        Some(postfach::server::tls::TlsFiles {
            cert: self.tls_cert.clone()?,
            key: self.tls_key.clone()?,
        })
    }

    /// The scheme the listener speaks.
    pub(crate) fn scheme(&self) -> &'static str {
        if self.tls_cert.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

/// A listener reachable from other machines speaks TLS, unless plain HTTP
/// is asked for.
pub(super) fn check_plaintext(listen: std::net::SocketAddr, tls: &TlsArgs) -> Result<(), Failure> {
    if !listen.ip().is_loopback() && tls.tls_cert.is_none() && !tls.insecure_plaintext {
        return Err(usage(format!(
            "--listen {listen} is reachable from other machines and would speak plain HTTP: give --tls-cert PATH --tls-key PATH, or --insecure-plaintext when a proxy in front terminates TLS"
        )));
    }
    Ok(())
}

// The arguments of `postfach run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The BPMN file to deploy (an unchanged file keeps its version).
    pub(crate) file: PathBuf,
    #[arg(long = "correlation-key", value_name = "MESSAGE=VARIABLE")]
    pub(crate) correlation_key: Vec<String>,
    /// Bind a send task to a Pub/Sub topic (outbox): ELEMENT=TOPIC (repeatable).
    #[arg(long = "send-topic", value_name = "ELEMENT=TOPIC")]
    pub(crate) send_topic: Vec<String>,
    #[command(flatten)]
    pub(crate) consume: SubscriptionArgs,
    /// Buffer TTL of the subscription's messages.
    #[arg(long, value_name = "DURATION", requires = "subscription")]
    pub(crate) message_ttl: Option<String>,
    /// Address of the HTTP API.
    #[arg(long, default_value = "127.0.0.1:7820")]
    pub(crate) listen: std::net::SocketAddr,
    /// File holding the bearer token the API requires (or $POSTFACH_TOKEN).
    /// Required when listening on a non-loopback address.
    #[arg(long, value_name = "PATH")]
    pub(crate) token_file: Option<PathBuf>,
    /// Issue invoices for `rechnungStellen` into this ledger file, once per
    /// idempotency key; the partitions of a cluster may share one file.
    #[arg(long, value_name = "PATH")]
    pub(crate) invoice_ledger: Option<PathBuf>,
    /// postfach.toml: alarms, [pubsub], [[subscriptions]], [send_topics],
    /// [correlation_keys] (see README).
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    /// Run as a partition of a cluster created with P partitions (1–1024);
    /// without it, unpartitioned.
    #[arg(long, value_name = "P")]
    pub(crate) partitions: Option<u64>,
    /// This process's partition number, 0 … P-1 (default: the number at
    /// the end of $HOSTNAME, as StatefulSet pods are named NAME-ORDINAL); P
    /// or above joins the cluster empty, to take slots `cluster grow` or
    /// `cluster move-slots` moves to it.
    #[arg(long, value_name = "I", requires = "partitions")]
    pub(crate) partition: Option<u64>,
    /// Where partition I of the cluster serves its API: I=http://HOST:PORT,
    /// once for every partition (this one too); the signals this partition's
    /// processes throw reach the others through them ([cluster] in --config).
    #[arg(long = "partition-url", value_name = "I=URL", requires = "partitions")]
    pub(crate) partition_url: Vec<String>,
    /// The topic of partition I, with {partition} where I goes (the
    /// router's --forward-topic): a delivery for a key whose slot moved to
    /// another partition goes on to that one's topic ([cluster]
    /// forward_topic in --config).
    #[arg(long, value_name = "TEMPLATE", requires = "partitions")]
    pub(crate) forward_topic: Option<String>,
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
    /// Serve Zeebe's gateway protocol (gRPC) for Camunda 8's clients and
    /// workers here, or `none` (default 127.0.0.1:26500, skipped with a
    /// warning when that port is taken).
    #[arg(long, value_name = "ADDR|none")]
    pub(crate) zeebe_listen: Option<String>,
}

/// The default address of Zeebe's gateway protocol, Zeebe's own port.
const ZEEBE_DEFAULT: &str = "127.0.0.1:26500";

/// Where `--zeebe-listen` asks for Zeebe's gateway protocol: an address,
/// `none`, or by default Zeebe's port when it is free (a build without the
/// feature serves it only when asked, and then refuses to start).
pub(super) fn zeebe_addr(
    arg: Option<&str>,
    tls: &TlsArgs,
) -> Result<Option<std::net::SocketAddr>, Failure> {
    let addr: std::net::SocketAddr = match arg {
        Some("none") => return Ok(None),
        Some(a) => a
            .parse()
            .map_err(|e| usage(format!("--zeebe-listen '{a}': {e} (HOST:PORT or none)")))?,
        None if !cfg!(feature = "zeebe") => return Ok(None),
        None => ZEEBE_DEFAULT.parse().expect("a socket address"),
    };
    if !addr.ip().is_loopback() && tls.tls_cert.is_none() && !tls.insecure_plaintext {
        return Err(usage(format!(
            "--zeebe-listen {addr} is reachable from other machines and would speak plain gRPC: give --tls-cert PATH --tls-key PATH (both listeners use them), or --insecure-plaintext when a proxy in front terminates TLS"
        )));
    }
    Ok(Some(addr))
}

/// `postfach run` against the open database.
pub(super) async fn run(pf: &Postfach, args: RunArgs) -> Result<Output, Failure> {
    let RunArgs {
        file,
        correlation_key,
        send_topic,
        consume,
        message_ttl,
        listen,
        token_file,
        invoice_ledger,
        config,
        partitions: _,
        partition: _,
        partition_url,
        forward_topic,
        tls,
        zeebe_listen,
    } = args;
    let mut config = run_config(config.as_deref())?;
    config
        .correlation_keys
        .extend(correlation_keys(&correlation_key)?);
    config.send_topics.extend(send_topics(&send_topic)?);
    if !partition_url.is_empty() {
        config.cluster.partition_urls = super::cluster::partition_urls(&partition_url)?;
    }
    if forward_topic.is_some() {
        config.cluster.forward_topic = forward_topic;
    }
    if let Some(mut s) = consume.config() {
        s.ttl = message_ttl;
        s.compile().map_err(usage)?;
        config.subscriptions.push(s);
    }
    let zeebe = zeebe_addr(zeebe_listen.as_deref(), &tls)?;
    let listen = (listen, tls, (zeebe, zeebe_listen.is_none()));
    serve(pf, file, listen, token_file, invoice_ledger, config).await
}

/// The configuration file `run --config` names (the defaults without one),
/// read within its size cap and checked; errors name the file and field.
pub(super) fn run_config(
    path: Option<&std::path::Path>,
) -> Result<postfach::server::config::ConfigFile, Failure> {
    match path {
        Some(p) => postfach::server::config::ConfigFile::parse(
            &p.display().to_string(),
            &read_bounded(p, MAX_CONFIG, "configuration file")?,
        )
        .map_err(usage),
        None => Ok(Default::default()),
    }
}

/// The partition `run --partitions P [--partition I]` asks for: I given, or
/// the ordinal at the end of `$HOSTNAME`.
pub(super) fn partition_of(
    partitions: Option<u64>,
    partition: Option<u64>,
) -> Result<Option<postfach::partition::Partition>, Failure> {
    let Some(count) = partitions else {
        return Ok(None);
    };
    let index = match partition {
        Some(i) => i,
        None => {
            let host = std::env::var("HOSTNAME").unwrap_or_default();
            ordinal_of(&host).ok_or_else(|| {
                usage(format!(
                    "--partitions {count} needs --partition I, or a $HOSTNAME that ends in the partition number (NAME-ORDINAL); $HOSTNAME is '{host}'"
                ))
            })?
        }
    };
    // a number at or above P joins the cluster empty, to take slots moved
    // to it (the pods a StatefulSet adds when it grows)
    postfach::partition::Partition::member(index, count)
        .map(Some)
        .map_err(|e| usage(format!("--partitions {count} --partition {index}: {e}")))
}

/// The number after the last `-` of a StatefulSet pod's name (`postfach-3` → 3).
pub(super) fn ordinal_of(host: &str) -> Option<u64> {
    let (_, n) = host.rsplit_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// The bearer token of `postfach run`: from --token-file, else $POSTFACH_TOKEN.
/// One that is empty or only whitespace is refused, never taken as "no token".
pub(super) fn server_token(
    token_file: Option<&std::path::Path>,
) -> Result<Option<String>, Failure> {
    let (token, from) = match token_file {
        Some(p) => (
            read_bounded(p, MAX_TOKEN, "token file")?,
            p.display().to_string(),
        ),
        None => match std::env::var_os("POSTFACH_TOKEN") {
            Some(t) => (
                t.into_string().map_err(|_| {
                    usage("$POSTFACH_TOKEN is not UTF-8: a bearer token is printable ASCII".into())
                })?,
                "$POSTFACH_TOKEN".to_string(),
            ),
            None => return Ok(None),
        },
    };
    checked_token(&token, &from).map(Some)
}

/// A bearer token as HTTP carries it: printable ASCII (spaces inside allowed),
/// white space around it trimmed. Empty, or with a control character (NUL, a
/// line break inside) or a non-ASCII one, it is refused naming where it came
/// from: no HTTP client could send it.
pub(super) fn checked_token(token: &str, from: &str) -> Result<String, Failure> {
    let token = token.trim();
    if token.is_empty() {
        return Err(usage(format!(
            "{from} is empty: give a bearer token of at least one non-blank character, or drop it"
        )));
    }
    if let Some((at, c)) = token
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_graphic() || *c == ' '))
    {
        return Err(usage(format!(
            "{from} holds {c:?} at byte {at}: a bearer token is printable ASCII (no control characters or line breaks inside)"
        )));
    }
    Ok(token.to_string())
}

/// A listener reachable from other machines needs a token.
pub(super) fn check_exposure(
    listen: std::net::SocketAddr,
    token: Option<&str>,
    tokens: &[postfach::server::auth::NamedToken],
    issuer: bool,
) -> Result<(), Failure> {
    if !listen.ip().is_loopback() && token.is_none() && tokens.is_empty() && !issuer {
        return Err(usage(format!(
            "--listen {listen} is reachable from other machines: give a bearer token with --token-file PATH or $POSTFACH_TOKEN, named tokens in [auth] tokens_file, or an [auth] issuer"
        )));
    }
    Ok(())
}

/// The named tokens of `[auth] tokens_file`, read and checked (none
/// without one).
pub(super) fn named_tokens(
    config: &postfach::server::config::ConfigFile,
) -> Result<Vec<postfach::server::auth::NamedToken>, Failure> {
    let Some(path) = &config.auth.tokens_file else {
        return Ok(Vec::new());
    };
    let text = read_bounded(path, MAX_CONFIG, "tokens file")?;
    postfach::server::auth::parse_tokens(&path.display().to_string(), &text).map_err(usage)
}

/// The OpenID Connect issuer of `[auth] issuer`, its keys read now: a
/// `jwks_file` that cannot be read stops the start; an issuer that cannot
/// be reached is warned about and asked again at the first token.
pub(super) fn issuer(
    config: &postfach::server::config::ConfigFile,
) -> Result<Option<postfach::server::oidc::Issuer>, Failure> {
    let Some(c) = config.auth.issuer().map_err(usage)? else {
        return Ok(None);
    };
    let name = c.issuer.clone();
    let (issuer, unreached) =
        postfach::server::oidc::Issuer::open(c, std::sync::Arc::new(postfach::clock::SystemClock))
            .map_err(|e| usage(format!("[auth] issuer '{name}': {e}")))?;
    if let Some(e) = unreached {
        eprintln!(
            "postfach: warning: the keys of issuer '{name}' cannot be read yet ({e}); its tokens are refused until they can"
        );
    }
    Ok(Some(issuer))
}

/// `postfach run`: deploy, executor, HTTP API, until SIGINT/SIGTERM.
pub(super) async fn serve(
    pf: &Postfach,
    file: PathBuf,
    (listen, tls, (zeebe, zeebe_listen_default)): (
        std::net::SocketAddr,
        TlsArgs,
        (Option<std::net::SocketAddr>, bool),
    ),
    token_file: Option<PathBuf>,
    invoice_ledger: Option<PathBuf>,
    config: postfach::server::config::ConfigFile,
) -> Result<Output, Failure> {
    let fail = |message: String| Failure {
        code: 1,
        message,
        json: None,
    };
    let token = server_token(token_file.as_deref())?;
    let tokens = named_tokens(&config)?;
    let issuer = issuer(&config)?;
    check_exposure(listen, token.as_deref(), &tokens, issuer.is_some())?;
    check_plaintext(listen, &tls)?;
    if let Some(z) = zeebe {
        check_exposure(z, token.as_deref(), &tokens, issuer.is_some())?;
    }
    let xml = read_bounded(&file, postfach::model::MAX_SIZE, "BPMN model")?;
    let deployment = pf
        .deploy_checked(&file.display().to_string(), &xml, config.overrides(), false)
        .await?;
    for w in &deployment.warnings {
        eprintln!(
            "postfach: warning: {}:{}: '{}': {}",
            file.display(),
            w.line,
            w.id,
            w.message
        );
    }
    let deployed = deployment.deployed;
    if let Some(path) = invoice_ledger {
        let ledger = postfach::reference::InvoiceLedger::open(&path)
            .map_err(|e| fail(format!("invoice ledger {}: {e}", path.display())))?;
        pf.register_handler(
            "rechnungStellen",
            postfach::reference::invoice_handler(ledger, std::time::Duration::ZERO),
        );
    }
    if pf.partition().is_clustered() {
        eprintln!("postfach: {} of the cluster", pf.partition());
    }
    for d in &deployed {
        eprintln!("postfach: {} version {} deployed", d.process, d.version);
    }
    // first SIGINT/SIGTERM: stop pulling, finish in-flight deliveries (commit,
    // then ack), stop the API and the executor; a second one exits at once
    // (Pub/Sub redelivers whatever was not acked)
    let (first_tx, first_rx) = tokio::sync::oneshot::channel::<()>();
    let mut signals = Signals::listen();
    tokio::spawn(async move {
        signals.next().await;
        eprintln!("postfach: stopping (a second signal exits at once)");
        let _ = first_tx.send(());
        signals.next().await;
        eprintln!("postfach: second signal, exiting now");
        std::process::exit(130);
    });
    let db = pf.path().display().to_string();
    let scheme = tls.scheme();
    let report = postfach::server::run(
        pf,
        config,
        postfach::server::Listen {
            addr: listen,
            token,
            tokens,
            issuer,
            tls: tls.files(),
            insecure_plaintext: tls.insecure_plaintext,
            zeebe,
            zeebe_if_free: zeebe_listen_default,
        },
        async move {
            let _ = first_rx.await;
        },
        |bound| {
            if let Some(z) = bound.zeebe {
                let over = if scheme == "https" { " over TLS" } else { "" };
                eprintln!("postfach: Zeebe gateway protocol (gRPC{over}) on {z}");
            }
            eprintln!(
                "postfach: HTTP API on {scheme}://{} (database {db})",
                bound.http
            )
        },
    )
    .await
    .map_err(|e| match e {
        postfach::server::ServerError::Engine(e) => Failure::from(e),
        postfach::server::ServerError::NoPubsub => usage(format!(
            "{e}: rebuild with default features, or drop [[subscriptions]] and [send_topics] from the configuration"
        )),
        postfach::server::ServerError::Config(_) => usage(e.to_string()),
        postfach::server::ServerError::Exposed(addr) => usage(format!(
            "--listen {addr} is reachable from other machines: give a bearer token with --token-file PATH or $POSTFACH_TOKEN"
        )),
        other => fail(other.to_string()),
    })?;
    Ok(out(
        json!({"stopped": true, "tasks_completed": report.tasks_completed}),
        format!(
            "stopped; {} job(s) completed while running",
            report.tasks_completed
        ),
    ))
}

/// SIGINT and SIGTERM, caught from the moment this is made: made before a
/// server says it listens, so a signal sent right after that line never
/// meets the default action (which would end the process without a
/// graceful stop).
pub(super) struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Installs the handlers now (inside a runtime).
    pub(super) fn listen() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The next SIGINT or SIGTERM.
    pub(super) async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn one(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            if self.term.is_none() && self.int.is_none() {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
            tokio::select! {
                _ = one(&mut self.term) => {}
                _ = one(&mut self.int) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// What `run` checks and sets before the database is opened: refused before
/// anything is written (no database file, no deploy). Returns the archive of
/// the log, if one is configured.
pub(super) fn prepare(
    args: &RunArgs,
    options: &mut postfach::Options,
) -> Result<Option<postfach::server::shelf::Shelf>, Failure> {
    let token = server_token(args.token_file.as_deref())?;
    let config = run_config(args.config.as_deref())?;
    check_exposure(
        args.listen,
        token.as_deref(),
        &named_tokens(&config)?,
        config.auth.issuer.is_some(),
    )?;
    check_plaintext(args.listen, &args.tls)?;
    options.partition = partition_of(args.partitions, args.partition)?;
    // the server decides whether parked messages leave events; the
    // database keeps the setting for the commands run between servers
    options.parked_events = Some(config.notifications.parked_events());
    // with an archive the log is closed as segments instead of emptied
    options.archive = config.backup.archiving().map_err(super::failure::usage)?;
    let archive = match &config.backup.archive {
        Some(a) => Some(postfach::server::shelf::Shelf::new(
            postfach::backup::Place::parse(&a.to_string_lossy()).map_err(super::failure::usage)?,
            config.storage.clone(),
        )),
        None => None,
    };
    Ok(archive)
}

/// `[tracing] otlp_endpoint` of the configuration `run` was given, for the
/// exporter set up before anything runs (a file that does not parse is
/// reported by `run` itself, naming the field).
#[cfg(feature = "otlp")]
pub fn otlp_endpoint(cli: &super::Cli) -> Option<String> {
    let super::Command::Run(args) = &cli.command else {
        return None;
    };
    run_config(Some(args.config.as_deref()?))
        .ok()?
        .tracing
        .otlp_endpoint
}

/// Whether the command runs long enough to export traces: the server and a
/// foreground worker.
#[cfg(feature = "otlp")]
pub fn traces_wanted(cli: &super::Cli) -> bool {
    use super::Command;
    matches!(cli.command, Command::Run(_) | Command::Work(_))
}
