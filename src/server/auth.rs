//! Who may call: the one authentication layer of `postfach run`'s API and of
//! `postfach gateway`, a middleware over the router that answers 401 before
//! any handler runs.
//!
//! Invariant: with a token configured, no request reaches a handler without
//! `Authorization: Bearer TOKEN` (compared in constant time), except the
//! liveness probe and the console's own page and files, which carry nothing
//! of the data (the console sends the token with its API calls).

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::Arc;

/// The bearer token a router requires, if any.
pub type Token = Option<Arc<String>>;

/// Whether `path` is open without a token.
fn open(path: &str) -> bool {
    path == "/health/live" || super::console::is_console(path)
}

/// Whether the request carries `token` as its bearer token.
fn presents(req: &Request, token: &str) -> bool {
    use subtle::ConstantTimeEq;
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| bool::from(t.as_bytes().ct_eq(token.as_bytes())))
}

/// The middleware: `axum::middleware::from_fn_with_state(token, bearer)`.
pub async fn bearer(State(token): State<Token>, req: Request, next: Next) -> Response {
    if let Some(token) = &token
        && !presents(&req, token)
        && !open(req.uri().path())
    {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "a bearer token is required: Authorization: Bearer TOKEN"})),
        )
            .into_response();
    }
    next.run(req).await
}

/// An HTTP face of postfach (`run`'s API, a gateway): its routes, with the
/// console and the OpenAPI document beside them, behind this one layer.
pub(crate) fn face<S>(
    routes: axum::Router<S>,
    token: Option<std::sync::Arc<String>>,
) -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    use axum::routing::get;
    routes
        .route("/", get(super::console::index))
        .route("/console/{*file}", get(super::console::asset))
        .route("/openapi.json", get(super::http::openapi))
        .layer(axum::middleware::from_fn_with_state(token, bearer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    async fn status(token: Token, path: &str, auth: Option<&str>) -> StatusCode {
        let app = Router::new()
            .route("/instances", get(|| async { "data" }))
            .route("/health/live", get(|| async { "live" }))
            .layer(axum::middleware::from_fn_with_state(token, bearer));
        let mut req = Request::builder().uri(path);
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
        let t: Token = Some(Arc::new("s3cret".into()));
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
        assert_eq!(status(None, "/instances", None).await, StatusCode::OK);
    }
}
