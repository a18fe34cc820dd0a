//! The operations console: static pages embedded in the binary and served at
//! `/` beside the API (console/ in the repository; bpmn-js vendored with its
//! licence under console/vendor/). The page reads everything through the API,
//! with the API's token.
//!
//! Invariant: only the files listed here are served, from memory — no path a
//! caller names ever reaches the file system — and they carry no data, so they
//! need no token; every figure on the page comes from an API call that does.

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

/// `GET /`: the page.
pub async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        INDEX,
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
        let r = index().await;
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
