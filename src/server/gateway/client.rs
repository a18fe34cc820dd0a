//! The gateway's connections to the partitions: postfach's one HTTP client
//! ([`crate::server::client`]), every request bounded in time and answer size.
//!
//! Invariant: a partition that does not answer, answers too slowly or too much
//! is an [`Unreachable`] naming the partition, never a hang or a panic; the
//! caller's bearer token is what the partition sees.

use crate::server::client::Http;
pub use crate::server::client::{Answer, MAX_ANSWER};
use axum::body::Bytes;
use axum::http::{HeaderMap, Method};
use std::time::Duration;

/// How long a partition may take to answer one request.
pub const TIMEOUT: Duration = Duration::from_secs(30);

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
    client: Http,
}

impl Partitions {
    /// One client for partitions 0 … n-1 at `urls` (base URLs, `http://host:port`).
    pub fn new(urls: Vec<String>) -> Self {
        let client = Http::new(Duration::from_secs(2), TIMEOUT);
        Partitions {
            urls: std::sync::Arc::new(urls),
            client,
        }
    }

    /// As [`Partitions::new`], an `https://` partition's certificate
    /// checked against the CA file `ca`.
    pub fn with_ca(urls: Vec<String>, ca: &std::path::Path) -> Result<Self, String> {
        let tls = crate::server::tls::client_config(Some(ca))?;
        Ok(Partitions {
            urls: std::sync::Arc::new(urls),
            client: Http::with_tls(Duration::from_secs(2), TIMEOUT, tls),
        })
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
        let full = format!("{}{}", url.trim_end_matches('/'), path_and_query);
        self.client
            .send(method, &full, headers, body)
            .await
            .map_err(|e| Unreachable {
                partition: i,
                url,
                reason: e.to_string(),
            })
    }
}
