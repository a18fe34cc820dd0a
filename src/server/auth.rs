//! Who may call, and what: the one authentication and authorization layer
//! of `postfach run`'s API and of `postfach gateway`, a middleware over the
//! router that answers 401 (no valid token) or 403 (a token whose roles do
//! not grant the operation's permission) before any handler runs.
//!
//! Tokens: the admin token of `--token-file` (or `$POSTFACH_TOKEN`), and the
//! named tokens of `[auth] tokens_file`, each kept as its SHA-256 with its
//! roles. The permission an operation needs is the catalogue's
//! ([`super::catalogue::Permission`]); what a role grants is one exhaustive
//! match ([`Role::grants`]).
//!
//! Invariant: with a token configured, no request reaches a handler without
//! `Authorization: Bearer TOKEN` (compared in constant time) whose roles
//! grant the permission of the operation it calls — a path outside the
//! catalogue needs `read` —, except the liveness probe and the console's own
//! page and files, which carry nothing of the data (the console sends the
//! token with its API calls). The caller is left in the request's
//! extensions as a [`Caller`].

use super::catalogue::Permission;
use axum::Json;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// A role a token carries: what it may call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Views and the console.
    Reader,
    /// A worker's part: acquire, complete, fail and extend jobs, user tasks.
    Worker,
    /// Start instances, publish and correlate messages, broadcast signals.
    Starter,
    /// Repairs, incident retries, requeue and discard, retention, views.
    Operator,
    /// Everything: deployments, decisions, backups, the cluster.
    Admin,
}

impl Role {
    /// Every role, in order.
    pub const ALL: [Role; 5] = [
        Role::Reader,
        Role::Worker,
        Role::Starter,
        Role::Operator,
        Role::Admin,
    ];

    /// Whether the role grants `p` — exhaustive over the permissions, so a
    /// new permission cannot compile without a decision here.
    pub fn grants(self, p: Permission) -> bool {
        use Role::*;
        match p {
            Permission::Open => true,
            Permission::Read => matches!(self, Reader | Operator | Admin),
            Permission::Work => matches!(self, Worker | Admin),
            Permission::Start => matches!(self, Starter | Admin),
            Permission::Operate => matches!(self, Operator | Admin),
            Permission::Admin => matches!(self, Admin),
        }
    }

    /// Its name in configuration.
    pub fn name(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Worker => "worker",
            Role::Starter => "starter",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

/// A role as a token carries it: a worker may be limited to one topic
/// (`worker:TOPIC`), only the jobs of that topic then; a starter to one
/// process (`starter:PROCESS`), starting it and sending only the messages
/// and signals its definitions catch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The role.
    pub role: Role,
    /// The one topic a worker, or process a starter, is limited to; none:
    /// no limit.
    pub scope: Option<String>,
}

impl Grant {
    /// `ROLE`, `worker:TOPIC` or `starter:PROCESS`.
    pub fn parse(s: &str) -> Result<Grant, String> {
        let (name, scope) = match s.split_once(':') {
            Some((n, t)) => (n, Some(t)),
            None => (s, None),
        };
        let role = Role::ALL
            .into_iter()
            .find(|r| r.name() == name)
            .ok_or_else(|| {
                format!("role '{name}' is not one of reader, worker, starter, operator, admin")
            })?;
        match (role, scope) {
            (_, None) => Ok(Grant { role, scope: None }),
            (Role::Worker | Role::Starter, Some(t)) if !t.is_empty() && t.len() <= 256 => {
                Ok(Grant {
                    role,
                    scope: Some(t.to_string()),
                })
            }
            (Role::Worker, Some(_)) => Err(format!("'{s}': a topic of 1 to 256 characters")),
            (Role::Starter, Some(_)) => Err(format!("'{s}': a process id of 1 to 256 characters")),
            (_, Some(_)) => Err(format!(
                "'{s}': only a worker (worker:TOPIC) or a starter (starter:PROCESS) is limited"
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Grant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Grant::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A named token of `[auth] tokens_file`: its name, the SHA-256 of the
/// token (lower-case hex; `printf %s "$TOKEN" | sha256sum`) and its roles.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedToken {
    /// Who holds it (1 … 64 printable characters), named in refusals.
    pub name: String,
    /// The token's SHA-256: the file holds no token itself.
    pub sha256: String,
    /// What it may do (at least one; `worker:TOPIC` limits a worker).
    pub roles: Vec<Grant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    #[serde(default)]
    token: Vec<NamedToken>,
}

/// The named tokens of a tokens file (`[[token]]` entries), each checked:
/// a name of 1 … 64 printable characters and used once, a SHA-256 of 64
/// hex digits used once, at least one role. Errors name the file and entry.
pub fn parse_tokens(file: &str, text: &str) -> Result<Vec<NamedToken>, String> {
    let parsed: TokensFile = toml::from_str(text).map_err(|e| format!("{file}: {e}"))?;
    let mut names = std::collections::BTreeSet::new();
    let mut sums = std::collections::BTreeSet::new();
    for (i, t) in parsed.token.iter().enumerate() {
        let at = format!("{file}: token {} ('{}')", i + 1, t.name);
        if t.name.is_empty() || t.name.len() > 64 || t.name.chars().any(|c| c.is_control()) {
            return Err(format!("{at}: name is not 1 to 64 printable characters"));
        }
        if t.sha256.len() != 64 || !t.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "{at}: sha256 is not 64 hex digits (printf %s \"$TOKEN\" | sha256sum)"
            ));
        }
        if t.roles.is_empty() {
            return Err(format!(
                "{at}: no roles (reader, worker, starter, operator, admin)"
            ));
        }
        if !names.insert(t.name.clone()) {
            return Err(format!("{at}: the name is given twice"));
        }
        if !sums.insert(t.sha256.to_ascii_lowercase()) {
            return Err(format!("{at}: the same token as an earlier entry"));
        }
    }
    Ok(parsed.token)
}

/// Who called, as the layer found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's name (`admin` for the token of `--token-file`).
    pub name: Arc<str>,
    /// Its roles.
    pub roles: Arc<[Grant]>,
    /// Its groups (from an issuer's token; a named token has none).
    pub groups: Arc<[String]>,
}

impl Caller {
    /// Whether one of its roles grants `p`.
    pub fn may(&self, p: Permission) -> bool {
        self.roles.iter().any(|g| g.role.grants(p))
    }

    /// Whether it may work on a job of `topic`: a role that grants `work`
    /// without a limit, or a worker limited to that topic.
    pub fn may_work_on(&self, topic: &str) -> bool {
        self.roles.iter().any(|g| {
            g.role.grants(Permission::Work) && g.scope.as_deref().is_none_or(|t| t == topic)
        })
    }
}

impl Caller {
    /// The processes its starts and sends are limited to: none when one of
    /// its roles grants `start` without a limit (a plain starter, an
    /// admin).
    pub fn started_processes(&self) -> Option<Vec<&str>> {
        let mut scoped = Vec::new();
        for g in self
            .roles
            .iter()
            .filter(|g| g.role.grants(Permission::Start))
        {
            match &g.scope {
                None => return None,
                Some(p) => scoped.push(p.as_str()),
            }
        }
        Some(scoped)
    }
}

/// What a starter sends or starts, for its limit to processes.
#[derive(Debug, Clone, Copy)]
pub enum Sent<'a> {
    /// An instance of this process.
    Start(&'a str),
    /// A message of this name.
    Message(&'a str),
    /// A signal of this name.
    Signal(&'a str),
}

/// A refusal (403) of `caller` for `what`, when its starters are limited
/// to processes none of which `catches` it (a start: is that process).
pub fn refuse_sent(
    caller: Option<&Caller>,
    what: Sent<'_>,
    mut catches: impl FnMut(&str) -> bool,
) -> Option<Response> {
    let caller = caller?;
    let processes = caller.started_processes()?;
    let allowed = match what {
        Sent::Start(p) => processes.contains(&p),
        Sent::Message(_) | Sent::Signal(_) => processes.iter().any(|p| catches(p)),
    };
    if allowed {
        return None;
    }
    let (kind, name) = match what {
        Sent::Start(p) => ("start process", p),
        Sent::Message(m) => ("send message", m),
        Sent::Signal(s) => ("broadcast signal", s),
    };
    Some(refuse(
        StatusCode::FORBIDDEN,
        json!({
            "error": format!(
                "token '{}' starts and sends for process(es) {} only: it may not {kind} '{name}', which none of them {}",
                caller.name,
                processes.join(", "),
                if matches!(what, Sent::Start(_)) { "is" } else { "catches" }
            ),
            "permission": Permission::Start.name(),
        }),
    ))
}

/// A refusal of `caller` (when there is one: none on an open API) for a job
/// of `topic` outside its workers' topics, as the layer refuses (403).
pub fn refuse_topic(caller: Option<&Caller>, topic: &str) -> Option<Response> {
    let caller = caller.filter(|c| !c.may_work_on(topic))?;
    let topics: Vec<&str> = caller
        .roles
        .iter()
        .filter(|g| g.role == Role::Worker)
        .filter_map(|g| g.scope.as_deref())
        .collect();
    Some(refuse(
        StatusCode::FORBIDDEN,
        json!({
            "error": format!(
                "token '{}' works on topic(s) {} only, not on '{topic}'",
                caller.name,
                topics.join(", ")
            ),
            "topic": topic,
            "permission": Permission::Work.name(),
        }),
    ))
}

/// The tokens a face accepts; none: it is open (loopback only).
#[derive(Debug, Clone, Default)]
pub struct Keys(Arc<KeysInner>);

#[derive(Debug, Default)]
struct KeysInner {
    admin: Option<String>,
    /// The OpenID Connect issuer whose tokens are accepted.
    issuer: Option<super::oidc::Issuer>,
    /// Each named token's SHA-256 and the caller it is (built once).
    named: Vec<([u8; 32], Caller)>,
}

fn unhex(s: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2).unwrap_or("00"), 16).unwrap_or(0);
    }
    out
}

impl Keys {
    /// The admin token, if any, and the named tokens (checked by
    /// [`parse_tokens`]).
    pub fn new(admin: Option<String>, named: Vec<NamedToken>) -> Self {
        Self::with_issuer(admin, named, None)
    }

    /// As [`Keys::new`], and the tokens of an OpenID Connect issuer.
    pub fn with_issuer(
        admin: Option<String>,
        named: Vec<NamedToken>,
        issuer: Option<super::oidc::Issuer>,
    ) -> Self {
        let named = named
            .into_iter()
            .map(|t| {
                let caller = Caller {
                    name: t.name.as_str().into(),
                    roles: t.roles.into(),
                    groups: Arc::new([]),
                };
                (unhex(&t.sha256), caller)
            })
            .collect();
        Keys(Arc::new(KeysInner {
            admin,
            issuer,
            named,
        }))
    }

    /// The OpenID Connect issuer whose tokens are accepted, if any.
    pub fn issuer(&self) -> Option<&super::oidc::Issuer> {
        self.0.issuer.as_ref()
    }

    /// Whether no token is configured: every caller may do everything.
    pub fn is_open(&self) -> bool {
        self.0.admin.is_none() && self.0.named.is_empty() && self.0.issuer.is_none()
    }

    /// The caller a presented token is: an issuer's JWT (three parts, when
    /// an issuer is configured) verified against its keys, else one of the
    /// static tokens. The error says why a JWT was refused.
    pub(crate) async fn who(&self, presented: &str) -> Result<Caller, String> {
        if let Some(issuer) = &self.0.issuer
            && presented.bytes().filter(|b| *b == b'.').count() == 2
            && self.caller(presented).is_none()
        {
            return issuer.caller_of(presented).await.map_err(|e| e.to_string());
        }
        self.caller(presented)
            .ok_or_else(|| "a valid bearer token is required: Authorization: Bearer TOKEN".into())
    }

    /// The caller a presented token is, if it is one of the keys: every
    /// comparison in constant time, every key compared.
    fn caller(&self, presented: &str) -> Option<Caller> {
        use subtle::ConstantTimeEq;
        let mut found = None;
        if let Some(admin) = &self.0.admin
            && bool::from(presented.as_bytes().ct_eq(admin.as_bytes()))
        {
            found = Some(Caller {
                name: "admin".into(),
                roles: vec![Grant {
                    role: Role::Admin,
                    scope: None,
                }]
                .into(),
                groups: Arc::new([]),
            });
        }
        let sum: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        for (hash, caller) in &self.0.named {
            if bool::from(sum.ct_eq(hash)) && found.is_none() {
                found = Some(caller.clone());
            }
        }
        found
    }
}

/// Whether `path` is open without a token.
fn open(path: &str) -> bool {
    path == "/health/live" || super::console::is_console(path)
}

fn refuse(status: StatusCode, body: serde_json::Value) -> Response {
    (status, Json(body)).into_response()
}

/// The middleware: `axum::middleware::from_fn_with_state(keys, bearer)`.
pub async fn bearer(State(keys): State<Keys>, mut req: Request, next: Next) -> Response {
    if keys.is_open() || open(req.uri().path()) {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let found = match presented {
        Some(t) => keys.who(t).await,
        None => Err("a valid bearer token is required: Authorization: Bearer TOKEN".into()),
    };
    let caller = match found {
        Ok(c) => c,
        Err(why) => {
            let mut r = refuse(StatusCode::UNAUTHORIZED, json!({ "error": why }));
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return r;
        }
    };
    let op = super::catalogue::operation_at(req.method(), req.uri().path());
    let needs = op.map_or(Permission::Read, |o| o.permission);
    if !caller.may(needs) {
        let granting: Vec<&str> = Role::ALL
            .iter()
            .filter(|r| r.grants(needs))
            .map(|r| r.name())
            .collect();
        let roles: Vec<&str> = caller.roles.iter().map(|g| g.role.name()).collect();
        let what = op.map_or_else(|| req.uri().path().to_string(), |o| o.name.to_string());
        return refuse(
            StatusCode::FORBIDDEN,
            json!({
                "error": format!(
                    "token '{}' ({}) may not call {what}: it needs permission '{}', which {} grant(s)",
                    caller.name,
                    roles.join(", "),
                    needs.name(),
                    granting.join(", ")
                ),
                "operation": what,
                "permission": needs.name(),
            }),
        );
    }
    let who = caller.name.clone();
    req.extensions_mut().insert(caller);
    crate::audit::acting(who, next.run(req)).await
}

/// An HTTP face of postfach (`run`'s API, a gateway): its routes, with the
/// console and the OpenAPI document beside them, behind this one layer.
pub(crate) fn face<S>(routes: axum::Router<S>, keys: Keys) -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    use axum::routing::get;
    let policy = super::console::content_security_policy(&keys);
    let session = keys.clone();
    routes
        .route("/", get(move || super::console::index(policy.clone())))
        .route(
            "/console/session",
            get(move |headers: axum::http::HeaderMap| {
                super::console::session(session.clone(), headers)
            }),
        )
        .route("/console/{*file}", get(super::console::asset))
        .route("/openapi.json", get(super::http::openapi))
        .layer(axum::middleware::from_fn_with_state(keys, bearer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::http::Method;
    use axum::routing::get;
    use tower::ServiceExt;

    async fn status(token: Keys, path: &str, auth: Option<&str>) -> StatusCode {
        call(token, Method::GET, path, auth).await
    }

    async fn call(token: Keys, method: Method, path: &str, auth: Option<&str>) -> StatusCode {
        let app = Router::new()
            .route("/instances", get(|| async { "data" }))
            .route("/health/live", get(|| async { "live" }))
            .layer(axum::middleware::from_fn_with_state(token, bearer));
        let mut req = Request::builder().method(method).uri(path);
        if let Some(a) = auth {
            req = req.header(header::AUTHORIZATION, a);
        }
        app.oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap()
            .status()
    }

    #[tokio::test]
    async fn only_the_token_opens_the_api_and_the_probe_is_open() {
        let t = Keys::new(Some("s3cret".into()), vec![]);
        assert_eq!(
            status(t.clone(), "/instances", None).await,
            StatusCode::UNAUTHORIZED
        );
        for wrong in [
            "Bearer s3cre",
            "Bearer s3cretx",
            "s3cret",
            "Basic s3cret",
            "Bearer ",
        ] {
            assert_eq!(
                status(t.clone(), "/instances", Some(wrong)).await,
                StatusCode::UNAUTHORIZED,
                "{wrong}"
            );
        }
        assert_eq!(
            status(t.clone(), "/instances", Some("Bearer s3cret")).await,
            StatusCode::OK
        );
        assert_eq!(status(t, "/health/live", None).await, StatusCode::OK);
        assert_eq!(
            status(Keys::default(), "/instances", None).await,
            StatusCode::OK
        );
    }

    fn named(name: &str, token: &str, roles: &[Role]) -> NamedToken {
        NamedToken {
            name: name.into(),
            sha256: Sha256::digest(token.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
            roles: roles
                .iter()
                .map(|&role| Grant { role, scope: None })
                .collect(),
        }
    }

    /// Each role calls what it is granted and is refused the rest with 403,
    /// before any handler runs (the routes here do not exist: 404 means the
    /// layer let it through).
    #[tokio::test]
    async fn each_role_calls_only_what_it_is_granted() {
        let keys = Keys::new(
            None,
            vec![
                named("viewer", "r-token", &[Role::Reader]),
                named("rechnung", "w-token", &[Role::Worker]),
                named("shop", "s-token", &[Role::Starter]),
                named("ops", "o-token", &[Role::Operator]),
                named("root", "a-token", &[Role::Admin]),
            ],
        );
        let cases: &[(&str, Method, &str, &[&str])] = &[
            (
                "read instances",
                Method::GET,
                "/instances",
                &["r", "o", "a"],
            ),
            ("acquire jobs", Method::POST, "/jobs/acquire", &["w", "a"]),
            (
                "complete a job",
                Method::POST,
                "/jobs/7/complete",
                &["w", "a"],
            ),
            ("publish", Method::POST, "/messages", &["s", "a"]),
            ("start", Method::POST, "/instances", &["s", "a"]),
            (
                "move a token",
                Method::POST,
                "/instances/7/tokens/3/move",
                &["o", "a"],
            ),
            (
                "discard",
                Method::POST,
                "/messages/m-1/discard",
                &["o", "a"],
            ),
            ("deploy", Method::POST, "/deployments", &["a"]),
            ("back up", Method::POST, "/backups", &["a"]),
            (
                "off the catalogue",
                Method::GET,
                "/cluster/status",
                &["r", "o", "a"],
            ),
        ];
        for (what, method, path, allowed) in cases {
            for who in ["r", "w", "s", "o", "a"] {
                let auth = format!("Bearer {who}-token");
                let got = call(keys.clone(), method.clone(), path, Some(&auth)).await;
                if allowed.contains(&who) {
                    assert_ne!(got, StatusCode::FORBIDDEN, "{who} may {what}");
                    assert_ne!(got, StatusCode::UNAUTHORIZED, "{who} may {what}");
                } else {
                    assert_eq!(got, StatusCode::FORBIDDEN, "{who} may not {what}");
                }
            }
        }
        let unknown = call(
            keys.clone(),
            Method::GET,
            "/instances",
            Some("Bearer x-token"),
        );
        assert_eq!(unknown.await, StatusCode::UNAUTHORIZED);
        assert_eq!(
            call(keys, Method::GET, "/health/live", None).await,
            StatusCode::OK
        );
    }

    #[test]
    fn a_tokens_file_is_checked_entry_by_entry() {
        let sum = "a".repeat(64);
        let ok = format!(
            "[[token]]\nname = \"rechnung\"\nsha256 = \"{sum}\"\nroles = [\"worker\", \"reader\"]\n"
        );
        let t = parse_tokens("tokens.toml", &ok).unwrap();
        let roles: Vec<Role> = t[0].roles.iter().map(|g| g.role).collect();
        assert_eq!(roles, [Role::Worker, Role::Reader]);
        let scoped = parse_tokens("t", &ok.replace("\"worker\"", "\"worker:versand\"")).unwrap();
        assert_eq!(scoped[0].roles[0].scope.as_deref(), Some("versand"));
        for (text, says) in [
            (ok.replace("worker", "king"), "not one of"),
            (ok.replace("\"worker\"", "\"reader:x\""), "only a worker"),
            (ok.replace("\"worker\"", "\"starter:\""), "a process id"),
            (ok.replace("\"worker\"", "\"worker:\""), "a topic of"),
            (ok.replace(&sum, "abc"), "64 hex digits"),
            (ok.replace("\"worker\", \"reader\"", ""), "no roles"),
            (ok.replace("rechnung", ""), "1 to 64"),
            (format!("{ok}{ok}"), "twice"),
            (
                format!("{ok}{}", ok.replace("rechnung", "other")),
                "same token",
            ),
            (ok.replace("roles", "rollen"), "unknown field"),
        ] {
            let e = parse_tokens("tokens.toml", &text).unwrap_err();
            assert!(
                e.contains(says) && e.starts_with("tokens.toml"),
                "{says}: {e}"
            );
        }
    }
}
