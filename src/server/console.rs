//! The operations console: static pages embedded in the binary and served at
//! `/` beside the API (console/ in the repository; bpmn-js vendored with its
//! licence under console/vendor/). The page reads everything through the API,
//! with the API's token.
//!
//! Invariant: only the files listed here are served, from memory — no path a
//! caller names ever reaches the file system — and they carry no data, so they
//! need no token; every figure on the page comes from an API call that does.
//! The one answer beside them, `/console/session`, tells the page how to sign
//! in (public facts of the issuer) and, for the token it is shown, only who
//! that token is and which permissions its roles grant.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// (path under /console/, content type, bytes)
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/app.js"),
    ),
    (
        "lib.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/lib.js"),
    ),
    (
        "session.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/session.js"),
    ),
    (
        "diagram.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/diagram.js"),
    ),
    (
        "overview.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/overview.js"),
    ),
    (
        "instances.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/instances.js"),
    ),
    (
        "messages.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/messages.js"),
    ),
    (
        "jobs.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/jobs.js"),
    ),
    (
        "tasks.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/tasks.js"),
    ),
    (
        "cluster.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/cluster.js"),
    ),
    (
        "batches.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/batches.js"),
    ),
    (
        "audit.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/audit.js"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_bytes!("../../console/favicon.svg"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_bytes!("../../console/app.css"),
    ),
    (
        "vendor/bpmn-navigated-viewer.production.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!(
            "../../console/vendor/bpmn-js-18.31.1/bpmn-navigated-viewer.production.min.js"
        ),
    ),
    (
        "vendor/diagram-js.css",
        "text/css; charset=utf-8",
        include_bytes!("../../console/vendor/bpmn-js-18.31.1/diagram-js.css"),
    ),
    (
        "vendor/bpmn-js.css",
        "text/css; charset=utf-8",
        include_bytes!("../../console/vendor/bpmn-js-18.31.1/bpmn-js.css"),
    ),
    (
        "vendor/LICENSE-bpmn-js.txt",
        "text/plain; charset=utf-8",
        include_bytes!("../../console/vendor/bpmn-js-18.31.1/LICENSE"),
    ),
];

const INDEX: &str = include_str!("../../console/index.html");

/// Whether a request path is the console's (served without a token).
pub fn is_console(path: &str) -> bool {
    path == "/" || path.starts_with("/console/")
}

/// What the page may load and run: its own scripts only (no inline script,
/// no foreign origin), styles from itself (bpmn-js positions shapes and
/// overlays with style attributes), images from itself or data URLs (the
/// bpmn.io watermark), requests to this server; no framing, no plugins.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
     font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// [`CONTENT_SECURITY_POLICY`], and with a console client configured the
/// issuer's origin among the places the page may send requests to (its
/// token endpoint, where the sign-in trades its code for a token).
pub fn content_security_policy(keys: &super::auth::Keys) -> std::sync::Arc<str> {
    let issuer = keys
        .issuer()
        .filter(|i| i.config().console_client.is_some() && i.config().jwks_file.is_none())
        .and_then(|i| super::oidc::origin(&i.config().issuer).map(str::to_string));
    match issuer {
        Some(o) => CONTENT_SECURITY_POLICY
            .replace("connect-src 'self'", &format!("connect-src 'self' {o}"))
            .into(),
        None => CONTENT_SECURITY_POLICY.into(),
    }
}

/// `GET /`: the page, under `policy` (see [`content_security_policy`]).
pub async fn index(policy: std::sync::Arc<str>) -> Response {
    let policy = header::HeaderValue::from_str(&policy)
        .unwrap_or(header::HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    (
        [
            (
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (
                header::CACHE_CONTROL,
                header::HeaderValue::from_static("no-cache"),
            ),
            (header::CONTENT_SECURITY_POLICY, policy),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                header::HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                header::HeaderValue::from_static("no-referrer"),
            ),
        ],
        INDEX,
    )
        .into_response()
}

/// `GET /console/session`: how the page signs in, and who the bearer token
/// it sends is. `auth` is `none` (no token configured: every action is
/// offered), `token` (the page asks for a token to paste) or `issuer` (it
/// signs in at `sign_in`); `caller` names the token's holder, its roles and
/// groups and the permissions they grant (`may`) — what the page offers —,
/// or is null with `refused` saying why the token was not accepted.
pub async fn session(keys: super::auth::Keys, headers: axum::http::HeaderMap) -> Response {
    use super::catalogue::Permission;
    let sign_in = match keys.issuer() {
        Some(i) => i.sign_in_now().await,
        None => None,
    };
    let auth = match (keys.is_open(), &sign_in) {
        (true, _) => "none",
        (false, Some(_)) => "issuer",
        (false, None) => "token",
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let (caller, refused) = match presented {
        Some(t) if !keys.is_open() => match keys.who(t).await {
            Ok(c) => {
                let may: Vec<&str> = Permission::ALL
                    .into_iter()
                    .filter(|p| *p != Permission::Open && c.may(*p))
                    .map(Permission::name)
                    .collect();
                let roles: Vec<String> = c
                    .roles
                    .iter()
                    .map(|g| match &g.scope {
                        Some(s) => format!("{}:{s}", g.role.name()),
                        None => g.role.name().to_string(),
                    })
                    .collect();
                let caller = serde_json::json!({"name": &*c.name, "roles": roles,
                    "groups": &*c.groups, "may": may});
                (caller, None)
            }
            Err(why) => (serde_json::Value::Null, Some(why)),
        },
        _ => (serde_json::Value::Null, None),
    };
    (
        [
            (header::CACHE_CONTROL, "no-store"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        axum::Json(serde_json::json!({
            "auth": auth,
            "sign_in": sign_in,
            "caller": caller,
            "refused": refused,
        })),
    )
        .into_response()
}

/// `GET /console/{*file}`: one of the embedded files, or 404.
pub async fn asset(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, kind, bytes)) => (
            [
                (header::CONTENT_TYPE, *kind),
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            *bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such console file").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_page_allows_only_its_own_scripts_and_no_framing() {
        let r = index(CONTENT_SECURITY_POLICY.into()).await;
        let csp = r.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .to_string();
        assert!(csp.contains("script-src 'self';"), "{csp}");
        assert!(
            !csp.contains("unsafe-eval") && !csp.contains("http"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        // the page's own markup holds no inline script the policy would refuse
        assert!(!INDEX.contains("<script>"), "an inline script");
        let handler = INDEX.split(" on").skip(1).find(|rest| {
            let name: String = rest.chars().take_while(char::is_ascii_lowercase).collect();
            !name.is_empty() && rest[name.len()..].starts_with('=')
        });
        assert_eq!(handler, None, "an inline event handler");
    }

    async fn session_of(keys: super::super::auth::Keys, token: Option<&str>) -> serde_json::Value {
        let mut headers = axum::http::HeaderMap::new();
        if let Some(t) = token {
            headers.insert(
                header::AUTHORIZATION,
                format!("Bearer {t}").parse().unwrap(),
            );
        }
        let r = session(keys, headers).await;
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn the_session_names_the_token_and_what_its_roles_grant() {
        use super::super::auth::{Grant, Keys, NamedToken};
        use sha2::Digest;
        let open = session_of(Keys::default(), Some("anything")).await;
        assert_eq!(open["auth"], "none");
        assert!(
            open["caller"].is_null() && open["refused"].is_null(),
            "{open}"
        );
        let named = NamedToken {
            name: "rita".into(),
            sha256: sha2::Sha256::digest(b"t-rita")
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
            roles: vec![
                Grant::parse("reader").unwrap(),
                Grant::parse("worker:rechnungStellen").unwrap(),
            ],
        };
        let keys = Keys::new(Some("root".into()), vec![named]);
        let s = session_of(keys.clone(), Some("t-rita")).await;
        assert_eq!(s["auth"], "token", "{s}");
        assert_eq!(s["caller"]["name"], "rita");
        assert_eq!(
            s["caller"]["roles"],
            serde_json::json!(["reader", "worker:rechnungStellen"])
        );
        assert_eq!(s["caller"]["may"], serde_json::json!(["read", "work"]));
        let admin = session_of(keys.clone(), Some("root")).await;
        assert_eq!(
            admin["caller"]["may"],
            serde_json::json!(["read", "work", "start", "operate", "admin"])
        );
        let wrong = session_of(keys.clone(), Some("t-rit")).await;
        assert!(wrong["caller"].is_null(), "{wrong}");
        assert!(
            wrong["refused"].as_str().unwrap().contains("bearer token"),
            "{wrong}"
        );
        let none = session_of(keys, None).await;
        assert!(
            none["caller"].is_null() && none["refused"].is_null(),
            "{none}"
        );
    }

    #[test]
    fn every_module_the_page_imports_is_served() {
        for (name, _, bytes) in ASSETS.iter().filter(|(n, _, _)| n.ends_with(".js")) {
            let text = String::from_utf8_lossy(bytes);
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let file = line
                    .rsplit("from '")
                    .next()
                    .and_then(|r| r.strip_prefix("./"))
                    .and_then(|r| r.split('\'').next())
                    .unwrap_or_else(|| panic!("{name}: {line}"));
                assert!(
                    ASSETS.iter().any(|(n, _, _)| *n == file),
                    "{name} imports {file}, which is not embedded"
                );
            }
        }
    }
}
