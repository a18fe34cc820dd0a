//! The gateway's connections to the partitions: one pooled HTTP/1 client,
//! every request bounded in time and answer size.
//!
//! Invariant: a partition that does not answer, answers too slowly or too much
//! is an [`Unreachable`] naming the partition, never a hang or a panic; the
//! caller's bearer token is what the partition sees.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// Largest answer taken from a partition (a page of 1,000 instances with their
/// variables stays far below it).
pub const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// How long a partition may take to answer one request.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// What a partition answered.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its content type, if it sent one.
    pub content_type: Option<HeaderValue>,
    /// Its body.
    pub body: Bytes,
}

impl Answer {
    /// The body as JSON, if it is.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// A partition that could not be asked.
#[derive(Debug, Clone, thiserror::Error)]
#[error("partition {partition} ({url}) did not answer: {reason}")]
pub struct Unreachable {
    /// Its number.
    pub partition: u32,
    /// Where it was asked.
    pub url: String,
    /// What went wrong.
    pub reason: String,
}

/// The partitions of a cluster, by number.
#[derive(Clone)]
pub struct Partitions {
    urls: std::sync::Arc<Vec<String>>,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Partitions {
    /// One client for partitions 0 … n-1 at `urls` (base URLs, `http://host:port`).
    pub fn new(urls: Vec<String>) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Partitions {
            urls: std::sync::Arc::new(urls),
            client,
        }
    }

    /// How many partitions the cluster has.
    pub fn count(&self) -> u32 {
        self.urls.len() as u32
    }

    /// Partition `i`'s base URL.
    pub fn url(&self, i: u32) -> &str {
        &self.urls[i as usize]
    }

    /// Sends one request to partition `i`: `path_and_query` below its base URL,
    /// the caller's `Authorization` and `Content-Type` passed on.
    pub async fn send(
        &self,
        i: u32,
        method: Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Answer, Unreachable> {
        let url = self.url(i).to_string();
        let fail = |reason: String| Unreachable {
            partition: i,
            url: url.clone(),
            reason,
        };
        let uri: Uri = format!("{}{}", url.trim_end_matches('/'), path_and_query)
            .parse()
            .map_err(|e| fail(format!("bad address: {e}")))?;
        let mut req = Request::builder().method(method).uri(uri);
        for name in [header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT] {
            if let Some(v) = headers.get(&name) {
                req = req.header(name, v.clone());
            }
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| fail(format!("request: {e}")))?;
        let exchange = async {
            let res = self
                .client
                .request(req)
                .await
                .map_err(|e| fail(connect_reason(&e)))?;
            let status = res.status();
            let content_type = res.headers().get(header::CONTENT_TYPE).cloned();
            let body = Limited::new(res.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| fail(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok(Answer {
                status,
                content_type,
                body,
            })
        };
        match tokio::time::timeout(TIMEOUT, exchange).await {
            Ok(r) => r,
            Err(_) => Err(fail(format!("no answer within {}s", TIMEOUT.as_secs()))),
        }
    }
}

/// The innermost cause of a failed request ("connection refused"), which is
/// what an operator needs, rather than hyper's outer "client error (Connect)".
fn connect_reason(e: &hyper_util::client::legacy::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = Some(e);
    let mut last = e.to_string();
    while let Some(s) = source {
        last = s.to_string();
        source = s.source();
    }
    last
}
