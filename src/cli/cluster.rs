//! The cluster's commands: `gateway` (the stateless front of the partitions),
//! `cluster status` (every partition, through a gateway) and `cluster up` (a
//! local cluster in the foreground, for trying it out). What a command sent
//! to a gateway does is its operation's placement in the catalogue.
//!
//! Invariant: a gateway is given every partition exactly once; a local
//! cluster's children are stopped when it stops.

use super::Cli;
use super::prelude::*;
use super::remote::client_of;
use super::serve::{Signals, check_exposure, server_token};
use super::values::correlation_keys;
use clap::{Args, Subcommand};
use postfach::server::gateway::GatewayConfig;
use serde_json::json;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub(crate) struct GatewayArgs {
    /// Where partition I of the cluster serves its API: I=http://HOST:PORT,
    /// once for every partition 0 … P-1 (or [cluster] partition_urls in
    /// --config).
    #[arg(
        long = "partition-url",
        value_name = "I=URL",
        required_unless_present = "config"
    )]
    pub(crate) partition_url: Vec<String>,
    /// postfach.toml: [cluster] partition_urls, and [pubsub] for routing.
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    /// Address of the gateway's HTTP API.
    #[arg(long, default_value = "127.0.0.1:7820")]
    pub(crate) listen: std::net::SocketAddr,
    /// File holding the bearer token callers must present (or $POSTFACH_TOKEN);
    /// it is passed on to the partitions, which require the same one.
    #[arg(long, value_name = "PATH")]
    pub(crate) token_file: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) route: RouteArgs,
    #[command(flatten)]
    pub(crate) tls: super::serve::TlsArgs,
    /// PEM CA certificate(s) an https:// partition's certificate must chain
    /// to (default: the public roots).
    #[arg(long, value_name = "PATH")]
    pub(crate) tls_ca: Option<PathBuf>,
    /// Where partition I serves Zeebe's gateway protocol: I=HOST:PORT, once
    /// for every partition; with them the gateway serves it too, on
    /// --zeebe-listen.
    #[arg(long = "partition-zeebe", value_name = "I=HOST:PORT")]
    pub(crate) partition_zeebe: Vec<String>,
    /// Serve Zeebe's gateway protocol for the cluster here, or `none`
    /// (default 127.0.0.1:26500 when --partition-zeebe is given, skipped
    /// with a warning when taken).
    #[arg(long, value_name = "ADDR|none")]
    pub(crate) zeebe_listen: Option<String>,
}

#[derive(Args, Debug)]
pub(crate) struct RouterArgs {
    /// Partitions in the cluster (1–1024).
    #[arg(long, value_name = "P")]
    pub(crate) partitions: u64,
    /// postfach.toml whose [pubsub] says how to reach Pub/Sub (default:
    /// $PUBSUB_EMULATOR_HOST, else Google's endpoint and credentials).
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) route: RouteArgs,
}

/// What a router consumes and where it forwards.
#[derive(Args, Debug, Default)]
pub(crate) struct RouteArgs {
    /// The shared subscription (`--subscription`, `--message`, `--key-from`,
    /// `--id-from`, `--streams`), decoded as a partition would.
    #[command(flatten)]
    pub(crate) shared: super::serve::SubscriptionArgs,
    /// The topic of partition I, with {partition} where I goes (default
    /// SUBSCRIPTION-{partition}).
    #[arg(long, value_name = "TEMPLATE", requires = "subscription")]
    pub(crate) forward_topic: Option<String>,
    /// The subscription partition I consumes, created with its topic on an
    /// emulator (default: named as its topic).
    #[arg(long, value_name = "TEMPLATE", requires = "subscription")]
    pub(crate) partition_subscription: Option<String>,
    /// A gateway whose slot map the router routes by, asked every 2 s (with
    /// $POSTFACH_TOKEN): needed once slots move; without it, the map the
    /// cluster started with, and a partition hands on what is no longer
    /// its own (run --forward-topic).
    #[arg(long, value_name = "URL", requires = "subscription")]
    pub(crate) slot_map: Option<String>,
    /// How long a delivery stays leased to a router that stopped answering
    /// before Pub/Sub hands it out again (10s … 10m; default 10s: a forward
    /// takes milliseconds, and a killed router's deliveries come back soon).
    #[arg(long, value_name = "DURATION", requires = "subscription")]
    pub(crate) max_lease_extension: Option<String>,
}

#[derive(Args, Debug)]
pub(crate) struct ClusterArgs {
    #[command(subcommand)]
    pub(crate) action: ClusterCommand,
}

#[derive(Subcommand, Debug)]
pub(crate) enum ClusterCommand {
    /// Every partition of the cluster, asked through the gateway --server
    /// names: up, ready, version, waiting tokens and the oldest wait,
    /// buffered and parked messages, due jobs, incidents.
    ///
    /// Example: postfach --server http://127.0.0.1:7820 cluster status
    Status,
    /// A backup of every partition under one backup set id, through the
    /// gateway --server names; each partition writes into its own `[backup]
    /// to` as SET-pI/ at its own batch. Restore one with `postfach restore
    /// DIR/SET --partition I`.
    ///
    /// Example: postfach --server http://127.0.0.1:7820 cluster backup
    Backup {
        /// The set's id (default: the gateway's instant).
        #[arg(long, value_name = "ID")]
        id: Option<String>,
        /// How long to wait for slot moves in flight to end: a set is taken
        /// between moves.
        #[arg(long, value_name = "SECONDS", default_value_t = 600,
              value_parser = clap::value_parser!(u64).range(0..=86_400))]
        wait: u64,
    },
    /// The key slot of a correlation key and the partition that owns it:
    /// per the slot map of the cluster --server names (a gateway or a
    /// partition), or per the map a new cluster of --partitions P starts
    /// with.
    ///
    /// Example: postfach --server http://127.0.0.1:7820 cluster slot A-1
    Slot {
        /// The correlation key (its UTF-8 bytes are hashed).
        key: String,
        /// Without --server: the partitions the cluster started with.
        #[arg(long, value_name = "P")]
        partitions: Option<u64>,
    },
    /// Moves slots FIRST-LAST to partition --to, through the gateway
    /// --server names: every partition that owns slots of the range copies
    /// what they hold while they still take writes, then fences them for
    /// the writes made meanwhile, a batch each; followed until each is done
    /// unless --detach.
    ///
    /// Example: postfach --server http://127.0.0.1:7820 cluster move-slots 0-1023 --to 4
    MoveSlots {
        /// The slots, FIRST-LAST or one slot.
        range: String,
        /// The partition that takes them.
        #[arg(long, value_name = "P")]
        to: u32,
        /// Only the slots of the range this partition owns.
        #[arg(long, value_name = "P")]
        from: Option<u32>,
        /// Begin the moves and answer their batches without following them.
        #[arg(long)]
        detach: bool,
    },
    /// Grows the cluster to P' partitions, through the gateway --server
    /// names (which lists all of them): partitions P … P'-1 must be up and
    /// own no slot; every other partition gives its highest slots to them
    /// until each owns S / P', as moves followed to their end unless
    /// --detach.
    ///
    /// Example: postfach --server http://127.0.0.1:7820 cluster grow --partitions 6
    Grow {
        /// The partitions the cluster has afterwards.
        #[arg(long, value_name = "P")]
        partitions: u32,
        /// Begin the moves and answer their batches without following them.
        #[arg(long)]
        detach: bool,
    },
    /// Shrinks the cluster to P' partitions, through the gateway --server
    /// names: partitions P' and above give every slot they own to
    /// partitions 0 … P'-1 until each owns S / P', as moves followed to
    /// their end unless --detach; then they own nothing and can be stopped.
    ///
    /// Example: postfach --server http://127.0.0.1:7820 cluster shrink --partitions 4
    Shrink {
        /// The partitions that own slots afterwards.
        #[arg(long, value_name = "P")]
        partitions: u32,
        /// Begin the moves and answer their batches without following them.
        #[arg(long)]
        detach: bool,
    },
    /// A local cluster in the foreground, for trying it out: P partition
    /// processes (`run --partitions P --partition I`, each with its own
    /// database under --dir, on the ports after the gateway's) and a gateway
    /// on --listen, until SIGINT/SIGTERM.
    ///
    /// Example: postfach cluster up --partitions 4 bpmn/auftrag-ausfuehrung.bpmn --correlation-key AuftragAbgeschlossen=auftragId
    Up(Box<UpArgs>),
}

/// The router's configuration from its flags, when a subscription is given.
#[cfg(feature = "pubsub")]
fn router_config(
    route: &RouteArgs,
    partitions: u64,
    config: Option<&std::path::Path>,
) -> Result<
    Option<(
        postfach::pubsub::Connection,
        postfach::pubsub::router::RouterConfig,
    )>,
    Failure,
> {
    let Some(mut s) = route.shared.config() else {
        return Ok(None);
    };
    s.max_lease_extension = route
        .max_lease_extension
        .clone()
        .unwrap_or_else(|| "10s".into());
    let (topic, partition_subscription) = templates(route).unwrap_or_default();
    let cfg = postfach::pubsub::router::RouterConfig {
        subscription: s,
        partitions: u32::try_from(partitions).unwrap_or(u32::MAX),
        partition_subscription,
        topic,
        create: None,
        slot_map: route.slot_map.clone(),
    };
    cfg.check().map_err(|e| usage(e.to_string()))?;
    let file = super::serve::run_config(config)?;
    let mut cfg = cfg;
    cfg.create = file.pubsub.create;
    Ok(Some((postfach::pubsub::Connection::new(&file.pubsub), cfg)))
}

/// Starts the router the flags ask for, if any.
async fn start_router(
    route: &RouteArgs,
    partitions: u64,
    config: Option<&std::path::Path>,
) -> Result<Option<RunningRouter>, Failure> {
    #[cfg(feature = "pubsub")]
    {
        let Some((conn, cfg)) = router_config(route, partitions, config)? else {
            return Ok(None);
        };
        let r = postfach::pubsub::router::Router::start(conn, &cfg)
            .await
            .map_err(|e| Failure {
                code: 1,
                message: format!("router: {e}"),
                json: None,
            })?;
        Ok(Some(RunningRouter(r)))
    }
    #[cfg(not(feature = "pubsub"))]
    {
        let _ = (partitions, config);
        match route.shared.subscription {
            Some(_) => Err(usage(
                "--subscription: this build has no Pub/Sub support (feature `pubsub`)".into(),
            )),
            None => Ok(None),
        }
    }
}

/// A router started from the command line.
struct RunningRouter(#[cfg(feature = "pubsub")] postfach::pubsub::router::Router);

impl RunningRouter {
    async fn stop(self) {
        #[cfg(feature = "pubsub")]
        self.0.stop().await;
    }
}

/// `postfach router`: routes until SIGINT/SIGTERM.
pub(super) async fn router(args: &RouterArgs) -> Result<Output, Failure> {
    postfach::partition::Partition::new(0, args.partitions)
        .map_err(|e| usage(format!("--partitions {}: {e}", args.partitions)))?;
    if args.route.shared.subscription.is_none() {
        return Err(usage(
            "router needs the shared subscription: --subscription S --message M --key-from SOURCE"
                .into(),
        ));
    }
    let mut signals = Signals::listen();
    let Some(r) = start_router(&args.route, args.partitions, args.config.as_deref()).await? else {
        return Err(usage("router: no subscription to route".into()));
    };
    signals.next().await;
    eprintln!("postfach: router stopping (forwards in flight finish)");
    r.stop().await;
    Ok(out(json!({"stopped": true}), "router stopped".to_string()))
}

#[derive(Args, Debug)]
pub(crate) struct UpArgs {
    /// The BPMN model every partition deploys.
    pub(crate) file: PathBuf,
    /// Partitions (2–64 for a local cluster).
    #[arg(long, value_name = "P")]
    pub(crate) partitions: u64,
    /// Where the partitions keep their databases (partition-I.redb).
    #[arg(long, value_name = "DIR", default_value = "postfach-cluster")]
    pub(crate) dir: PathBuf,
    /// The gateway's address; partition I listens on its port + 1 + I.
    #[arg(long, default_value = "127.0.0.1:7820")]
    pub(crate) listen: std::net::SocketAddr,
    /// Correlation key of a message: MESSAGE=VARIABLE (repeatable).
    #[arg(long = "correlation-key", value_name = "MESSAGE=VARIABLE")]
    pub(crate) correlation_key: Vec<String>,
    /// postfach.toml every partition runs with ([pubsub] for the router too).
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    /// With --subscription: a router in this process forwards the shared
    /// subscription to the partitions' topics, and each partition consumes
    /// its own subscription with the same decoding rules.
    #[command(flatten)]
    pub(crate) route: RouteArgs,
}

/// A `--partition-url I=URL` list as the URL of every partition 0 … P-1,
/// each given exactly once.
pub(crate) fn partition_urls(given: &[String]) -> Result<Vec<String>, Failure> {
    let count = given.len();
    let urls = per_partition(
        "--partition-url",
        "I=URL (0=http://10.0.0.5:7820)",
        given,
        count,
        |url| {
            let url = super::values::parse_server_url(url)?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(
                    "a partition is reached over http:// or https:// (with --tls-ca)".into(),
                );
            }
            Ok(url)
        },
    )?;
    // as many as given, none twice: every partition has its URL
    Ok(urls.into_iter().map(Option::unwrap_or_default).collect())
}

/// `--partition-zeebe I=HOST:PORT`, once for each of `count` partitions, in
/// partition order.
fn partition_zeebe(given: &[String], count: usize) -> Result<Vec<String>, Failure> {
    let addrs = per_partition(
        "--partition-zeebe",
        "I=HOST:PORT (0=10.0.0.5:26500)",
        given,
        count,
        |addr| {
            let addr = addr.trim();
            if addr.contains("://")
                || addr
                    .rsplit_once(':')
                    .is_none_or(|(_, p)| p.parse::<u16>().is_err())
            {
                return Err("expected HOST:PORT (plaintext gRPC)".into());
            }
            Ok(addr.to_string())
        },
    )?;
    addrs
        .into_iter()
        .enumerate()
        .map(|(i, a)| a.ok_or_else(|| usage(format!("--partition-zeebe: partition {i} is missing (one for each of the {count} partitions)"))))
        .collect()
}

/// `flag I=VALUE` options as the value of each of partitions 0 … `count`-1
/// (`None` where none is given): `I` a partition of the cluster, each at most
/// once, each value as `check` makes it.
fn per_partition(
    flag: &str,
    shape: &str,
    given: &[String],
    count: usize,
    check: impl Fn(&str) -> Result<String, String>,
) -> Result<Vec<Option<String>>, Failure> {
    let mut out: Vec<Option<String>> = vec![None; count];
    for g in given {
        let bad = |why: String| usage(format!("{flag} {g}: {why}"));
        let (i, value) = g
            .split_once('=')
            .ok_or_else(|| bad(format!("expected {shape}")))?;
        let i: usize = i
            .trim()
            .parse()
            .map_err(|_| bad(format!("'{i}' is not a partition number")))?;
        if i >= count {
            return Err(bad(format!(
                "partition {i} of a cluster of {count} (one {flag} per partition, numbered 0 … {})",
                count.saturating_sub(1)
            )));
        }
        if out[i].replace(check(value).map_err(bad)?).is_some() {
            return Err(bad(format!("partition {i} is given twice")));
        }
    }
    Ok(out)
}

/// Where the gateway serves Zeebe's gateway protocol, and whether that is
/// only the default address; none without --partition-zeebe.
fn gateway_zeebe(
    args: &GatewayArgs,
    count: usize,
) -> Result<(Option<std::net::SocketAddr>, bool, Vec<String>), Failure> {
    if args.partition_zeebe.is_empty() {
        return match args.zeebe_listen.as_deref() {
            None | Some("none") => Ok((None, false, Vec::new())),
            Some(a) => Err(usage(format!(
                "--zeebe-listen {a}: the gateway forwards Zeebe's gateway protocol to the partitions: give --partition-zeebe I=HOST:PORT for each"
            ))),
        };
    }
    let addrs = partition_zeebe(&args.partition_zeebe, count)?;
    let listen = super::serve::zeebe_addr(args.zeebe_listen.as_deref(), &args.tls)?;
    Ok((listen, args.zeebe_listen.is_none(), addrs))
}

/// `postfach gateway`: serves until SIGINT/SIGTERM.
pub(super) async fn gateway(args: &GatewayArgs) -> Result<Output, Failure> {
    let file = super::serve::run_config(args.config.as_deref())?;
    let tokens = super::serve::named_tokens(&file)?;
    let issuer = super::serve::issuer(&file)?;
    let urls = if args.partition_url.is_empty() {
        if file.cluster.partition_urls.is_empty() {
            return Err(usage(
                "gateway: no partitions: give --partition-url I=URL for each, or [cluster] partition_urls in --config".into(),
            ));
        }
        file.cluster.partition_urls
    } else {
        partition_urls(&args.partition_url)?
    };
    let token = server_token(args.token_file.as_deref())?;
    check_exposure(args.listen, token.as_deref(), &tokens, issuer.is_some())?;
    super::serve::check_plaintext(args.listen, &args.tls)?;
    let count = urls.len();
    let zeebe = gateway_zeebe(args, count)?;
    let router = start_router(&args.route, count as u64, args.config.as_deref()).await?;
    let served = run_gateway(
        urls,
        (token, tokens, issuer),
        (args.listen, args.tls.clone(), args.tls_ca.clone()),
        zeebe,
    )
    .await;
    if let Some(r) = router {
        r.stop().await;
    }
    served?;
    Ok(out(
        json!({"stopped": true, "partitions": count}),
        "gateway stopped".to_string(),
    ))
}

/// Who may call a gateway: the admin token, named tokens, an issuer.
type Callers = (
    Option<String>,
    Vec<postfach::server::auth::NamedToken>,
    Option<postfach::server::oidc::Issuer>,
);

async fn run_gateway(
    urls: Vec<String>,
    (token, tokens, issuer): Callers,
    (listen, tls, ca): (std::net::SocketAddr, super::serve::TlsArgs, Option<PathBuf>),
    (zeebe_listen, zeebe_if_free, partition_zeebe): (
        Option<std::net::SocketAddr>,
        bool,
        Vec<String>,
    ),
) -> Result<(), Failure> {
    let count = urls.len();
    let scheme = tls.scheme();
    let mut signals = Signals::listen();
    postfach::server::gateway::run(
        GatewayConfig {
            partitions: urls,
            token,
            tokens,
            issuer,
            tls: tls.files(),
            insecure_plaintext: tls.insecure_plaintext,
            partitions_ca: ca,
            zeebe_listen,
            zeebe_if_free,
            partition_zeebe,
        },
        listen,
        async move { signals.next().await },
        |bound| eprintln!("postfach: gateway of {count} partitions on {scheme}://{bound}"),
    )
    .await
    .map_err(|e| Failure {
        code: 1,
        message: e.to_string(),
        json: None,
    })
}

/// `postfach cluster …`.
pub(super) async fn cluster(cli: &Cli, args: &ClusterArgs) -> Result<Output, Failure> {
    match &args.action {
        ClusterCommand::Status => super::slots::status(cli).await,
        ClusterCommand::Backup { id, wait } => backup(cli, id.clone(), *wait).await,
        ClusterCommand::Up(up_args) => up(up_args).await,
        ClusterCommand::Slot { key, partitions } => super::slots::slot(cli, key, *partitions).await,
        ClusterCommand::MoveSlots {
            range,
            to,
            from,
            detach,
        } => super::slots::move_slots(cli, range, *to, *from, *detach).await,
        ClusterCommand::Grow { partitions, detach } => {
            super::slots::balance(cli, *partitions, false, *detach).await
        }
        ClusterCommand::Shrink { partitions, detach } => {
            super::slots::balance(cli, *partitions, true, *detach).await
        }
    }
}

/// `cluster backup`: the catalogue's `backup` through a gateway, which
/// gives every partition the same set id.
/// `cluster backup`: a set is taken between slot moves; while the gateway
/// answers that moves are in flight (409 with `moves`), it is asked again
/// each second for up to `wait` seconds.
async fn backup(cli: &Cli, id: Option<String>, wait: u64) -> Result<Output, Failure> {
    if cli.server.is_none() {
        return Err(usage(
            "cluster backup asks a gateway: give --server URL (or $POSTFACH_SERVER)".into(),
        ));
    }
    let client = client_of(cli)?;
    let body = postfach::server::http::requests::BackupBody { id };
    let call = super::remote::Call::to("backup")?.body(&body);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(wait);
    let mut told = false;
    let doc = loop {
        let answer = client.answer(&call).await?;
        let moving = answer.status == 409 && answer.json().is_some_and(|d| d["moves"].is_array());
        if !moving || std::time::Instant::now() >= until {
            break client.call_answered(&answer)?;
        }
        if !told {
            eprintln!(
                "slot moves are in flight; the backup set waits for them (up to --wait {wait} s)"
            );
            told = true;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    };
    Ok(super::show::shown(doc, super::backups::backup_text))
}

/// `postfach cluster up`: the partitions as child processes, the gateway in
/// this one; on SIGINT/SIGTERM the gateway stops and every partition is
/// stopped gracefully.
async fn up(args: &UpArgs) -> Result<Output, Failure> {
    if !(2..=64).contains(&args.partitions) {
        return Err(usage(format!(
            "--partitions {}: a local cluster has 2 to 64 partitions",
            args.partitions
        )));
    }
    correlation_keys(&args.correlation_key)?;
    let base = args.listen.port();
    if u64::from(base) + args.partitions >= 65_536 {
        return Err(usage(format!(
            "--listen {}: the partitions need the {} ports after it",
            args.listen, args.partitions
        )));
    }
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| usage(format!("--dir {}: {e}", args.dir.display())))?;
    // the router first: on an emulator it creates the partitions' topics and
    // subscriptions before the partitions consume them
    let router = start_router(&args.route, args.partitions, args.config.as_deref()).await?;
    let exe = std::env::current_exe().map_err(|e| usage(format!("this program's path: {e}")))?;
    let mut children = Vec::new();
    let urls = urls_of(args);
    for i in 0..args.partitions {
        let addr = std::net::SocketAddr::new(args.listen.ip(), base + 1 + i as u16);
        let mut cmd = std::process::Command::new(&exe);
        cmd.arg("--db")
            .arg(args.dir.join(format!("partition-{i}.redb")))
            .arg("run")
            .arg(&args.file)
            .args(["--listen", &addr.to_string()])
            .args(["--partitions", &args.partitions.to_string()])
            .args(["--partition", &i.to_string()])
            // Zeebe's port is the cluster's to give (a gateway with --partition-zeebe)
            .args(["--zeebe-listen", "none"]);
        for k in &args.correlation_key {
            cmd.args(["--correlation-key", k]);
        }
        if let Some(sub) = partition_subscription(&args.route, i) {
            let r = &args.route.shared;
            cmd.args(["--subscription", &sub]);
            cmd.args(["--message", r.message.as_deref().unwrap_or_default()]);
            cmd.args(["--key-from", r.key_from.as_deref().unwrap_or_default()]);
            if let Some(id) = &r.id_from {
                cmd.args(["--id-from", id]);
            }
        }
        if let Some(c) = &args.config {
            cmd.arg("--config").arg(c);
        }
        for (j, url) in urls_of(args).iter().enumerate() {
            cmd.args(["--partition-url", &format!("{j}={url}")]);
        }
        let log_path = args.dir.join(format!("partition-{i}.log"));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| usage(format!("{}: {e}", log_path.display())))?;
        let log2 = log
            .try_clone()
            .map_err(|e| usage(format!("{}: {e}", log_path.display())))?;
        cmd.stdout(log).stderr(log2);
        eprintln!(
            "postfach: partition {i} on http://{addr}, log {}",
            log_path.display()
        );
        let child = cmd
            .spawn()
            .map_err(|e| usage(format!("starting partition {i}: {e}")))?;
        children.push(child);
    }
    if let Err(f) = await_partitions(&mut children, args).await {
        for c in &mut children {
            stop_child(c);
            let _ = c.wait();
        }
        if let Some(r) = router {
            r.stop().await;
        }
        return Err(f);
    }
    let token = server_token(None)?;
    let served = run_gateway(
        urls,
        (token, Vec::new(), None),
        (args.listen, Default::default(), None),
        (None, false, Vec::new()),
    )
    .await;
    if let Some(r) = router {
        r.stop().await;
    }
    for c in &mut children {
        stop_child(c);
    }
    for (i, c) in children.iter_mut().enumerate() {
        if let Ok(status) = c.wait()
            && !status.success()
        {
            eprintln!("postfach: partition {i} ended with {status}");
        }
    }
    served?;
    Ok(out(
        json!({"stopped": true, "partitions": args.partitions}),
        "cluster stopped".to_string(),
    ))
}

/// The forward topic and partition subscription templates of a routed
/// subscription: as given, else `SUBSCRIPTION-{partition}` for the topic and
/// the topic's name for the subscription.
fn templates(route: &RouteArgs) -> Option<(String, String)> {
    let sub = route.shared.subscription.as_deref()?;
    let short = sub.rsplit('/').next().unwrap_or(sub);
    let topic = route
        .forward_topic
        .clone()
        .unwrap_or_else(|| format!("{short}-{{partition}}"));
    let subscription = route
        .partition_subscription
        .clone()
        .unwrap_or_else(|| topic.clone());
    Some((topic, subscription))
}

/// The subscription partition `i` consumes when the shared one is routed.
fn partition_subscription(route: &RouteArgs, i: u64) -> Option<String> {
    templates(route).map(|(_, s)| s.replace("{partition}", &i.to_string()))
}

/// The URL of every partition of a local cluster: the ports after the
/// gateway's.
fn urls_of(args: &UpArgs) -> Vec<String> {
    (0..args.partitions)
        .map(|i| {
            let port = args.listen.port() as u64 + 1 + i;
            format!(
                "http://{}",
                std::net::SocketAddr::new(args.listen.ip(), port as u16)
            )
        })
        .collect()
}

/// Waits until every partition accepts connections (at most 60 s); a
/// partition that ends before that fails the cluster, naming its log.
async fn await_partitions(
    children: &mut [std::process::Child],
    args: &UpArgs,
) -> Result<(), Failure> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let base = args.listen.port();
    loop {
        let mut up = 0;
        for (i, c) in children.iter_mut().enumerate() {
            let log = args.dir.join(format!("partition-{i}.log"));
            if let Ok(Some(status)) = c.try_wait() {
                return Err(Failure {
                    code: 1,
                    message: format!(
                        "partition {i} ended ({status}) before it served: see {}",
                        log.display()
                    ),
                    json: None,
                });
            }
            let addr = std::net::SocketAddr::new(args.listen.ip(), base + 1 + i as u16);
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                up += 1;
            }
        }
        if up == children.len() {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(Failure {
                code: 1,
                message: format!(
                    "only {up} of {} partitions serve after 60 s: see the logs in {}",
                    children.len(),
                    args.dir.display()
                ),
                json: None,
            });
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Asks a partition to stop as SIGTERM does (it finishes in-flight work);
/// where `kill` cannot be run, it is killed.
fn stop_child(c: &mut std::process::Child) {
    let term = std::process::Command::new("kill")
        .args(["-TERM", &c.id().to_string()])
        .status();
    if !term.is_ok_and(|s| s.success()) {
        let _ = c.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn partition_urls_name_every_partition_once() {
        let ok = partition_urls(&s(&["1=https://b:2", "0=http://a:1"])).unwrap();
        assert_eq!(ok, vec!["http://a:1", "https://b:2"]);
        for bad in [
            vec!["0=http://a:1", "0=http://b:2"],
            vec!["0=http://a:1", "2=http://b:2"],
            vec!["x=http://a:1"],
            vec!["http://a:1"],
            vec!["0=ftp://a:1"],
        ] {
            let e = partition_urls(&s(&bad)).unwrap_err();
            assert!(e.message.starts_with("--partition-url"), "{}", e.message);
        }
    }
}
