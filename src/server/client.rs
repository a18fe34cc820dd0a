//! postfach's HTTP client: the one stack for its own calls — the gateway's
//! to its partitions and the command line's (`--server`) to a server. One
//! pooled HTTP/1 connection set per client, every request bounded in time
//! and answer size.
//!
//! Invariant: a peer that does not answer, answers too slowly or too much
//! is a [`Failed`] saying which phase failed, never a hang or a panic.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// Largest answer taken (a page of 1,000 instances with their variables
/// stays far below it).
pub const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// What a peer answered.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// The headers of it worth passing on ([`KEPT_HEADERS`]).
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
}

/// The headers of an answer that are kept: its content type, and the name
/// of a claim-check object it carries.
pub const KEPT_HEADERS: [&str; 2] = ["content-type", "x-postfach-object"];

impl Answer {
    /// Its content type, if it sent one.
    pub fn content_type(&self) -> Option<&HeaderValue> {
        self.headers.get(header::CONTENT_TYPE)
    }

    /// A header's value as text, if it sent it as text.
    pub fn body_header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    }

    /// The body as JSON, if it is.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// Why a request got no answer, by phase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failed {
    /// The address is not a URL.
    #[error("bad address: {0}")]
    Address(String),
    /// No connection within the connect timeout.
    #[error("no connection within {}", humantime::format_duration(*.0))]
    ConnectTimeout(Duration),
    /// The connection was refused or failed (the innermost cause).
    #[error("{0}")]
    Connect(String),
    /// Connected, but no whole answer within the answer timeout.
    #[error("no answer within {}", humantime::format_duration(*.0))]
    AnswerTimeout(Duration),
    /// The exchange broke off, or the answer was larger than the limit.
    #[error("{0}")]
    Exchange(String),
}

/// A pooled client with a connect and an answer timeout; `https://` URLs
/// over TLS (the public roots, or the CA of [`Http::with_tls`]).
#[derive(Clone)]
pub struct Http {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    connect: Duration,
    answer: Duration,
    limit: usize,
}

impl Http {
    /// A client that waits `connect` for a connection and `answer` for the
    /// whole answer once connected.
    pub fn new(connect: Duration, answer: Duration) -> Self {
        let public = super::tls::client_config(None).unwrap_or_else(|_| {
            rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("aws-lc-rs supports the default protocol versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth()
        });
        Self::with_tls(connect, answer, public)
    }

    /// A client whose `https://` peers are checked with `tls`.
    pub fn with_tls(connect: Duration, answer: Duration, tls: rustls::ClientConfig) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(connect));
        // plain http:// stays plain; https:// is TLS
        connector.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Http {
            client,
            connect,
            answer,
            limit: MAX_ANSWER,
        }
    }

    /// The same client taking answers of up to `bytes` (default
    /// [`MAX_ANSWER`]).
    pub fn limit(mut self, bytes: usize) -> Self {
        self.limit = bytes;
        self
    }

    /// Sends one request to `url` with the `Authorization`, `Content-Type`
    /// and `Accept` of `headers`.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Answer, Failed> {
        let uri: Uri = url.parse().map_err(|e| Failed::Address(format!("{e}")))?;
        let mut req = Request::builder().method(method).uri(uri);
        for name in [header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT] {
            if let Some(v) = headers.get(&name) {
                req = req.header(name, v.clone());
            }
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| Failed::Address(e.to_string()))?;
        let exchange = async {
            let res = self.client.request(req).await.map_err(|e| {
                let reason = innermost(&e);
                // the connector's own timeout, however the OS words it
                let timed_out = ["timed out", "deadline has elapsed"]
                    .iter()
                    .any(|t| reason.contains(t));
                if e.is_connect() && timed_out {
                    Failed::ConnectTimeout(self.connect)
                } else if e.is_connect() {
                    Failed::Connect(reason)
                } else {
                    Failed::Exchange(reason)
                }
            })?;
            let status = res.status();
            let mut headers = HeaderMap::new();
            for name in KEPT_HEADERS {
                if let Some(v) = res.headers().get(name) {
                    headers.insert(name, v.clone());
                }
            }
            let body = Limited::new(res.into_body(), self.limit)
                .collect()
                .await
                .map_err(|e| Failed::Exchange(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok(Answer {
                status,
                headers,
                body,
            })
        };
        // the connector bounds the connection; this bounds the rest
        match tokio::time::timeout(self.connect + self.answer, exchange).await {
            Ok(r) => r,
            Err(_) => Err(Failed::AnswerTimeout(self.answer)),
        }
    }
}

/// The innermost cause of a failed request ("connection refused"), which is
/// what an operator needs, rather than hyper's outer "client error (Connect)".
fn innermost(e: &hyper_util::client::legacy::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = Some(e);
    let mut last = e.to_string();
    while let Some(s) = source {
        last = s.to_string();
        source = s.source();
    }
    last
}
