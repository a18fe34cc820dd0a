//! postfach.toml, the configuration of `postfach run`: alarms, Pub/Sub
//! connection, subscriptions, send-task topic bindings and correlation keys.
//!
//! Invariant: a configuration that parses is complete and valid — every
//! duration, source and reason is checked here, with the file and the field in
//! the error, before anything starts.

use crate::alarms::Condition;
use crate::backup::Place;
use crate::ingress::SubscriptionConfig;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[pubsub]`: how to reach Pub/Sub.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PubsubConfig {
    /// Project of short topic and subscription names (default
    /// `$GOOGLE_CLOUD_PROJECT`, else `postfach`).
    pub project: Option<String>,
    /// `http://HOST:PORT` of an emulator or `https://...` of a private endpoint.
    /// Default: `$PUBSUB_EMULATOR_HOST` when set (plaintext, no credentials, as
    /// Google's clients do), else Google's endpoint with application default
    /// credentials.
    pub endpoint: Option<String>,
    /// Create missing topics and subscriptions at start (default: only when
    /// talking to an emulator).
    pub create: Option<bool>,
}

/// `[storage]`: Cloud Storage for claim checks, both ways.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// `http://HOST:PORT` of an emulator or `https://...` of a private
    /// endpoint. Default: `$STORAGE_EMULATOR_HOST` when set (plaintext, no
    /// credentials), else Google's endpoint with application default credentials.
    pub endpoint: Option<String>,
    /// Create the claim-check bucket at start (default: only on an emulator).
    pub create: Option<bool>,
    /// Bucket of outgoing claim checks: a send task whose payload is larger
    /// than `claim_check_above` is uploaded here and published as a reference.
    /// Without it every payload is published whole.
    pub claim_check_bucket: Option<String>,
    /// Payload size in bytes above which a send task goes out as a claim check
    /// (default 1 MiB; 1 KiB to 9 MiB, below Pub/Sub's 10 MB request limit).
    pub claim_check_above: Option<u64>,
}

impl StorageConfig {
    /// The outgoing claim-check threshold, default applied.
    pub fn claim_check_above(&self) -> u64 {
        self.claim_check_above
            .unwrap_or(crate::limits::CLAIM_CHECK_ABOVE_DEFAULT)
    }

    fn check(&self) -> Result<(), String> {
        if let Some(b) = &self.claim_check_bucket {
            crate::objects::ObjectRef::new(b, "probe", None)
                .map_err(|e| format!("storage.claim_check_bucket: {e}"))?;
        }
        if let Some(n) = self.claim_check_above {
            let r = crate::limits::CLAIM_CHECK_ABOVE;
            if !r.contains(&n) {
                return Err(format!(
                    "storage.claim_check_above: {n} bytes is outside {}..={} (Pub/Sub takes at most 10 MB per request)",
                    r.start(),
                    r.end()
                ));
            }
        }
        if let Some(e) = &self.endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return Err(format!(
                "storage.endpoint: '{e}' is not an http:// or https:// URL"
            ));
        }
        Ok(())
    }
}

/// The configuration file of `postfach run`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `[alarms.NAME]`: conditions that fire an alarm.
    #[serde(default)]
    pub alarms: BTreeMap<String, Condition>,
    /// `[pubsub]`: how to reach Pub/Sub.
    #[serde(default)]
    pub pubsub: PubsubConfig,
    /// `[storage]`: Cloud Storage for claim checks.
    #[serde(default)]
    pub storage: StorageConfig,
    /// `[[subscriptions]]`: each consumed into the engine.
    #[serde(default)]
    pub subscriptions: Vec<SubscriptionConfig>,
    /// `[send_topics]`: send task id → topic its outbox publishes to.
    #[serde(default)]
    pub send_topics: BTreeMap<String, String>,
    /// `[correlation_keys]`: message name → key variable (as `--correlation-key`).
    #[serde(default)]
    pub correlation_keys: BTreeMap<String, String>,
    /// `[http]`: how long the API waits for a client, and how many it serves.
    #[serde(default)]
    pub http: HttpConfig,
    /// `[notifications]`: events about parked messages for the people who own them.
    #[serde(default)]
    pub notifications: NotificationsConfig,
    /// `[tracing]`: OpenTelemetry traces of the message path.
    #[serde(default)]
    pub tracing: TracingConfig,
    /// `[cluster]`: where the partitions of a cluster serve their API.
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// `[backup]`: where `POST /backups` writes.
    #[serde(default)]
    pub backup: BackupConfig,
    /// `[auth]`: who may call what.
    #[serde(default)]
    pub auth: AuthConfig,
}

/// `[auth]` of postfach.toml.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// A file of named tokens, each kept as its SHA-256 with its roles
    /// (`[[token]] name, sha256, roles`); the admin token of
    /// `--token-file` works beside them.
    pub tokens_file: Option<std::path::PathBuf>,
    /// The OpenID Connect issuer whose access tokens are accepted: the
    /// expected `iss`, and where discovery of its keys starts.
    pub issuer: Option<String>,
    /// The audience its tokens must carry (`aud`); default `postfach`.
    pub audience: Option<String>,
    /// The issuer's keys from this JWK set file instead of discovery.
    pub jwks_file: Option<std::path::PathBuf>,
    /// The claim holding the roles (a list, or a space-separated string; a
    /// dotted path like `realm_access.roles` reaches into objects);
    /// default `roles`.
    pub roles_claim: Option<String>,
    /// The claim holding the caller's groups; default `groups`.
    pub groups_claim: Option<String>,
    /// The public client the console signs in with (authorization code
    /// with PKCE at the issuer); none: the console asks for a token.
    pub console_client: Option<String>,
}

impl AuthConfig {
    /// The issuer's settings, checked; none without `issuer`.
    pub fn issuer(&self) -> Result<Option<IssuerConfig>, String> {
        let Some(issuer) = &self.issuer else {
            for (field, set) in [
                ("audience", self.audience.is_some()),
                ("jwks_file", self.jwks_file.is_some()),
                ("roles_claim", self.roles_claim.is_some()),
                ("groups_claim", self.groups_claim.is_some()),
                ("console_client", self.console_client.is_some()),
            ] {
                if set {
                    return Err(format!(
                        "[auth] {field} is set but issuer is not: name the issuer whose tokens are accepted"
                    ));
                }
            }
            return Ok(None);
        };
        let c = IssuerConfig {
            issuer: issuer.clone(),
            audience: self.audience.clone().unwrap_or_else(|| "postfach".into()),
            jwks_file: self.jwks_file.clone(),
            roles_claim: self.roles_claim.clone().unwrap_or_else(|| "roles".into()),
            groups_claim: self.groups_claim.clone().unwrap_or_else(|| "groups".into()),
            console_client: self.console_client.clone(),
        };
        c.check()?;
        Ok(Some(c))
    }
}

/// What `[auth]` says about the issuer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerConfig {
    /// The expected `iss`, and where discovery starts
    /// (`ISSUER/.well-known/openid-configuration`).
    pub issuer: String,
    /// The audience a token must carry in `aud`.
    pub audience: String,
    /// Keys from this file (a JWK set) instead of discovery.
    pub jwks_file: Option<std::path::PathBuf>,
    /// The claim holding the roles: a list of names, or one space-separated
    /// string (scopes); a dotted path reaches into objects
    /// (`realm_access.roles`).
    pub roles_claim: String,
    /// The claim holding the caller's groups (for candidate groups of user
    /// tasks); a leading `/` of a group path is dropped.
    pub groups_claim: String,
    /// The public client id the console signs in with (authorization code
    /// with PKCE); none: the console asks for a token to paste.
    pub console_client: Option<String>,
}

impl IssuerConfig {
    /// Checks what can be checked before any fetch: an issuer URL over
    /// https (http only on a loopback host), a non-empty audience and
    /// claim names.
    pub fn check(&self) -> Result<(), String> {
        let url = &self.issuer;
        let host = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .ok_or_else(|| format!("[auth] issuer '{url}' is not an https:// URL"))?;
        let authority = host.split('/').next().unwrap_or("");
        let host = match authority.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => authority.split(':').next().unwrap_or(""),
        };
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if url.starts_with("http://") && !loopback && self.jwks_file.is_none() {
            return Err(format!(
                "[auth] issuer '{url}' is plain http on another host: its keys could be swapped on the way; use https"
            ));
        }
        if host.is_empty() {
            return Err(format!("[auth] issuer '{url}' names no host"));
        }
        for (field, v) in [
            ("audience", &self.audience),
            ("roles_claim", &self.roles_claim),
            ("groups_claim", &self.groups_claim),
        ] {
            if v.is_empty() || v.len() > 256 {
                return Err(format!("[auth] {field} is not 1 to 256 characters"));
            }
        }
        if let Some(c) = &self.console_client
            && (c.is_empty()
                || c.len() > 256
                || !c
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b)))
        {
            return Err(format!(
                "[auth] console_client '{c}' is not 1 to 256 letters, digits, '-', '.', '_' or ':'"
            ));
        }
        Ok(())
    }
}

/// `[backup]` of postfach.toml.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackupConfig {
    /// The directory (or `gs://BUCKET/PREFIX`) `POST /backups` (and
    /// `postfach --server URL backup`) writes each backup into, as
    /// `DIR/SET-pI/`; the server writes nowhere a caller names. Without it
    /// the API takes no backups.
    pub to: Option<std::path::PathBuf>,
    /// Take one this often ("1h"; 1s … 7d); none: only when asked.
    pub every: Option<String>,
    /// Keep this many of the partition's good backups (1 … 10,000), the
    /// oldest removed after each new one; none: keep them all.
    pub keep: Option<usize>,
    /// The directory (or `gs://BUCKET/PREFIX`) the log's closed segments
    /// are shipped into, for a
    /// restore to a point in time (`restore --until T --archive DIR`);
    /// none: the log is emptied at each checkpoint.
    pub archive: Option<std::path::PathBuf>,
    /// Close the log as a segment for the archive at least this often
    /// ("1min"; 1s … 1h; default 1min), or at 16 MiB of records: how much
    /// of the newest work a lost disk can take with it.
    pub archive_every: Option<String>,
}

impl BackupConfig {
    /// Refuses an empty place or one that is neither a directory nor
    /// `gs://BUCKET/PREFIX`, a schedule or a count out of range, and a
    /// schedule without a place.
    pub fn check(&self) -> Result<(), String> {
        if let Some(to) = &self.to {
            place_here(&to.to_string_lossy()).map_err(|e| format!("backup.to: {e}"))?;
        }
        self.every_ms()?;
        if let Some(k) = self.keep
            && !crate::limits::BACKUPS_KEPT.contains(&k)
        {
            return Err(format!("backup.keep: {k} is outside 1..=10000"));
        }
        if self.to.is_none() && (self.every.is_some() || self.keep.is_some()) {
            return Err("backup.every and backup.keep need backup.to, the directory".into());
        }
        match &self.archive {
            Some(a) => {
                place_here(&a.to_string_lossy()).map_err(|e| format!("backup.archive: {e}"))?;
            }
            None if self.archive_every.is_some() => {
                return Err("backup.archive_every needs backup.archive, the directory".into());
            }
            None => {}
        }
        self.archiving()?;
        Ok(())
    }

    /// When the log is closed for the archive, if one is configured.
    pub fn archiving(&self) -> Result<Option<crate::Archive>, String> {
        if self.archive.is_none() {
            return Ok(None);
        }
        let every = self
            .archive_every
            .as_deref()
            .map(|e| crate::limits::ARCHIVE_EVERY.parse(e))
            .transpose()?;
        let mut a = crate::Archive::default();
        if let Some(ms) = every {
            a.every = std::time::Duration::from_millis(ms);
        }
        Ok(Some(a))
    }

    /// `every` in milliseconds, checked.
    pub fn every_ms(&self) -> Result<Option<u64>, String> {
        self.every
            .as_deref()
            .map(|e| crate::limits::BACKUP_EVERY.parse(e))
            .transpose()
    }
}

/// A place this build can write: a bucket only with Cloud Storage (the
/// `pubsub` feature), refused when the file is read rather than at the
/// first backup.
fn place_here(s: &str) -> Result<Place, String> {
    match Place::parse(s)? {
        Place::Gcs { .. } if !cfg!(feature = "pubsub") => Err(format!(
            "'{s}' is in Cloud Storage, and this postfach is built without it (the `pubsub` feature)"
        )),
        p => Ok(p),
    }
}

/// `[cluster]` of postfach.toml.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The API of partition 0, 1, … (`http://HOST:PORT`, or `https://` for a
    /// partition serving TLS): a gateway routes to
    /// them, and a partition hands the signals its processes throw to the
    /// others. As `--partition-url I=URL` on the command line.
    #[serde(default)]
    pub partition_urls: Vec<String>,
    /// The topic of partition I, `{partition}` for I (what the router
    /// forwards to): a delivery for a key whose slot another partition owns
    /// — its slot moved since it was forwarded — goes on to that
    /// partition's topic. As `--forward-topic` on the command line.
    #[serde(default)]
    pub forward_topic: Option<String>,
}

impl ClusterConfig {
    /// Refuses a URL that is not `http://HOST:PORT` or `https://HOST:PORT`,
    /// naming it.
    pub fn check(&self) -> Result<(), String> {
        for (i, u) in self.partition_urls.iter().enumerate() {
            let ok = u
                .strip_prefix("http://")
                .or_else(|| u.strip_prefix("https://"))
                .and_then(|rest| rest.trim_end_matches('/').rsplit_once(':'))
                .is_some_and(|(host, port)| {
                    !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
                });
            if !ok {
                return Err(format!(
                    "cluster.partition_urls[{i}]: '{u}' is not http://HOST:PORT or https://HOST:PORT"
                ));
            }
        }
        Ok(())
    }
}

/// `[tracing]` of postfach.toml.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TracingConfig {
    /// Base URL of an OTLP/HTTP collector (`http://collector:4318`; spans go
    /// to `/v1/traces` under it). Without it, `$OTEL_EXPORTER_OTLP_ENDPOINT`
    /// decides; without either, no traces are exported.
    pub otlp_endpoint: Option<String>,
}

/// `[notifications]` of postfach.toml.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NotificationsConfig {
    /// Topic that gets one event per parked, expired, requeued and discarded
    /// message (name, key, reason, candidates, ids), published through an
    /// outbox under a stable `eventId`. Without it no events are kept.
    pub parked_topic: Option<String>,
    /// Put the message's variables into the event too (default false).
    #[serde(default)]
    pub payload: bool,
}

impl NotificationsConfig {
    /// The engine setting this section asks for.
    pub fn parked_events(&self) -> Option<crate::store::ParkedEvents> {
        self.parked_topic
            .as_ref()
            .map(|_| crate::store::ParkedEvents {
                payload: self.payload,
            })
    }
}

/// `[http]` of postfach.toml: bounds on what one HTTP client may hold.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// How long a client may take to send a request's headers (default 30s).
    pub header_timeout: String,
    /// How long a client may take to send a request's body (default 60s).
    pub body_timeout: String,
    /// Connections served at once; more wait to be accepted (default 1024).
    pub max_connections: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            header_timeout: "30s".into(),
            body_timeout: "60s".into(),
            max_connections: 1024,
        }
    }
}

/// The range of `[http]` timeouts: 1 ms … 1 hour.
const HTTP_TIMEOUT: crate::limits::Limit = crate::limits::Limit {
    field: "http timeout",
    min: 1,
    max: 3_600_000,
};

impl HttpConfig {
    /// (header timeout, body timeout) in milliseconds, each within 1ms … 1h,
    /// and `max_connections` within 1 … 65,536.
    pub fn checked(&self) -> Result<(u64, u64, usize), String> {
        let header = HTTP_TIMEOUT
            .named("http.header_timeout")
            .parse(&self.header_timeout)?;
        let body = HTTP_TIMEOUT
            .named("http.body_timeout")
            .parse(&self.body_timeout)?;
        let max =
            crate::limits::check_count("http.max_connections", self.max_connections, 1..=65_536)
                .map_err(|e| e.to_string())?;
        Ok((header, body, max))
    }
}

impl ConfigFile {
    /// Parses postfach.toml; errors name the file and what is wrong.
    pub fn parse(file: &str, text: &str) -> Result<Self, String> {
        let c: ConfigFile = toml::from_str(text).map_err(|e| format!("{file}: {e}"))?;
        for (name, cond) in &c.alarms {
            cond.check()
                .map_err(|e| format!("{file}: alarm '{name}': {e}"))?;
        }
        c.storage.check().map_err(|e| format!("{file}: {e}"))?;
        c.cluster.check().map_err(|e| format!("{file}: {e}"))?;
        c.backup.check().map_err(|e| format!("{file}: {e}"))?;
        c.auth.issuer().map_err(|e| format!("{file}: {e}"))?;
        c.http.checked().map_err(|e| format!("{file}: {e}"))?;
        for s in &c.subscriptions {
            s.compile().map_err(|e| format!("{file}: {e}"))?;
        }
        for (element, topic) in &c.send_topics {
            if topic.trim().is_empty() {
                return Err(format!("{file}: send_topics.{element}: the topic is empty"));
            }
            crate::limits::check_name(&format!("send_topics.{element}"), topic)
                .map_err(|e| format!("{file}: {e}"))?;
        }
        if let Some(topic) = &c.notifications.parked_topic {
            if topic.trim().is_empty() {
                return Err(format!(
                    "{file}: notifications.parked_topic: the topic is empty"
                ));
            }
            crate::limits::check_name("notifications.parked_topic", topic)
                .map_err(|e| format!("{file}: {e}"))?;
        } else if c.notifications.payload {
            return Err(format!(
                "{file}: notifications.payload is set but notifications.parked_topic is not: name the topic the events go to"
            ));
        }
        if let Some(e) = &c.tracing.otlp_endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return Err(format!(
                "{file}: tracing.otlp_endpoint: '{e}' is not an http:// or https:// URL (OTLP over HTTP, like http://collector:4318)"
            ));
        }
        for (message, variable) in &c.correlation_keys {
            crate::limits::check_name(&format!("correlation_keys.{message}"), variable)
                .map_err(|e| format!("{file}: {e}"))?;
        }
        Ok(c)
    }

    /// The deploy-time overrides: correlation keys and send-task topics.
    pub fn overrides(&self) -> BTreeMap<String, String> {
        let mut m = self.correlation_keys.clone();
        for (element, topic) in &self.send_topics {
            m.insert(crate::model::send_topic_override(element), topic.clone());
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_postfach_toml_parses() {
        let c = ConfigFile::parse("postfach.toml", include_str!("../postfach.toml")).unwrap();
        assert_eq!(
            c.subscriptions[0].topic.as_deref(),
            Some("auftrag-abgeschlossen")
        );
        assert_eq!(c.send_topics["auftragUebergeben"], "auftraege");
        assert_eq!(c.alarms.len(), 2);
    }

    #[test]
    fn full_file_parses_and_errors_name_the_field() {
        let c = ConfigFile::parse(
            "postfach.toml",
            r#"
[pubsub]
project = "shop"

[[subscriptions]]
subscription = "auftrag-abgeschlossen-sub"
message = "AuftragAbgeschlossen"
key = "/auftragId"
ttl = "24h"

[send_topics]
auftragUebergeben = "auftraege"

[correlation_keys]
AuftragAbgeschlossen = "auftragId"
"#,
        )
        .unwrap();
        assert_eq!(c.subscriptions.len(), 1);
        assert_eq!(c.subscriptions[0].message_id, "attribute:eventId");
        assert_eq!(
            c.overrides()
                .get("sendTask:auftragUebergeben")
                .map(String::as_str),
            Some("auftraege")
        );
        let e = ConfigFile::parse(
            "p.toml",
            "[[subscriptions]]\nsubscription = \"s\"\nmessage = \"M\"\nkey = \"auftragId\"\n",
        )
        .unwrap_err();
        assert!(e.starts_with("p.toml: subscription 's': key:"), "{e}");
        let e =
            ConfigFile::parse("p.toml", "[[subscriptions]]\nsubscription = \"s\"\n").unwrap_err();
        assert!(e.contains("message"), "{e}");
    }

    #[test]
    fn the_archive_is_a_directory_closed_on_time() {
        let parse = |t: &str| ConfigFile::parse("p.toml", t).map(|c| c.backup.archiving());
        let a = parse("[backup]\narchive = \"/a\"\n")
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(a, crate::Archive::default());
        let a = parse("[backup]\narchive = \"/a\"\narchive_every = \"5s\"\n");
        assert_eq!(a.unwrap().unwrap().unwrap().every.as_secs(), 5);
        assert_eq!(parse("").unwrap().unwrap(), None);
        let gs = parse("[backup]\nto = \"gs://my-bucket/b\"\narchive = \"gs://my-bucket/a/\"\n");
        assert!(gs.unwrap().unwrap().is_some(), "a bucket is a place");
        for (text, says) in [
            ("[backup]\narchive_every = \"5s\"\n", "needs backup.archive"),
            ("[backup]\narchive = \"gs://b/p\"\n", "not a bucket name"),
            (
                "[backup]\narchive = \"s3://bucket/p\"\n",
                "neither a directory nor gs://",
            ),
            ("[backup]\nto = \"gs://bucket/../p\"\n", "'..'"),
            ("[backup]\narchive = \"\"\n", "empty"),
            (
                "[backup]\narchive = \"/a\"\narchive_every = \"2h\"\n",
                "archive_every",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(says) && e.starts_with("p.toml"), "{text}: {e}");
        }
    }

    #[test]
    fn notifications_name_their_topic() {
        let c = ConfigFile::parse(
            "p.toml",
            "[notifications]\nparked_topic = \"postfach-parked\"\n",
        )
        .unwrap();
        assert_eq!(
            c.notifications.parked_events(),
            Some(crate::store::ParkedEvents { payload: false })
        );
        assert_eq!(ConfigFile::default().notifications.parked_events(), None);
        let err = |text: &str| ConfigFile::parse("p.toml", text).unwrap_err();
        assert!(
            err("[notifications]\nparked_topic = \" \"\n")
                .contains("notifications.parked_topic: the topic is empty")
        );
        assert!(err("[notifications]\npayload = true\n").contains("name the topic"));
        assert!(err("[notifications]\nparked_topik = \"x\"\n").contains("parked_topik"));
        assert!(
            err("[tracing]\notlp_endpoint = \"collector:4317\"\n")
                .contains("tracing.otlp_endpoint: 'collector:4317' is not an http")
        );
    }

    #[test]
    fn storage_settings_are_range_checked_with_their_field() {
        let ok = ConfigFile::parse(
            "p.toml",
            "[storage]\nendpoint = \"http://127.0.0.1:4443\"\nclaim_check_bucket = \"postfach-auftraege\"\nclaim_check_above = 65536\n",
        )
        .unwrap();
        assert_eq!(ok.storage.claim_check_above(), 65536);
        assert_eq!(
            ConfigFile::default().storage.claim_check_above(),
            crate::limits::CLAIM_CHECK_ABOVE_DEFAULT
        );
        let err = |text: &str| ConfigFile::parse("p.toml", text).unwrap_err();
        let e = err("[storage]\nclaim_check_above = 20000000\n");
        assert!(
            e.contains(
                "p.toml: storage.claim_check_above: 20000000 bytes is outside 1024..=9437184"
            ),
            "{e}"
        );
        let e = err("[storage]\nclaim_check_above = 10\n");
        assert!(e.contains("claim_check_above"), "{e}");
        let e = err("[storage]\nclaim_check_bucket = \"Gross Buchstaben\"\n");
        assert!(
            e.contains("storage.claim_check_bucket: bucket 'Gross Buchstaben'"),
            "{e}"
        );
        let e = err("[storage]\nendpoint = \"localhost:4443\"\n");
        assert!(e.contains("storage.endpoint"), "{e}");
        let e = err("[storage]\nbucket = \"x\"\n");
        assert!(e.contains("unknown field"), "{e}");
    }
}
