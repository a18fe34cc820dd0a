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

/// `GET /`: the page.
pub async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
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
            ],
            *bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such console file").into_response(),
    }
}
