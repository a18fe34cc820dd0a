//! Cloud Storage at the edge, for claim checks: reads the object a lean
//! message refers to and writes the payload of a send task that is too large
//! to publish. Google's client (`google-cloud-storage`), with the endpoint and
//! anonymous credentials of an emulator the way the Pub/Sub connection does it
//! (`[storage] endpoint`, else `$STORAGE_EMULATOR_HOST`).
//!
//! Invariant: a missing object is [`ObjectError::NotFound`], any other failure
//! [`ObjectError::Unavailable`] — both fail the job that asked, never an empty
//! read; postfach never deletes an object (bucket lifecycle rules do).

use crate::config::StorageConfig;
use crate::objects::{MAX_OBJECT_BYTES, ObjectError, ObjectFuture, ObjectRef, ObjectStore};
use google_cloud_storage::client::Storage;
use std::time::Duration;

/// How long one read or write may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// A Cloud Storage client for claim-check objects.
#[derive(Clone, Debug)]
pub struct CloudStorage {
    client: Storage,
    endpoint: Option<String>,
    anonymous: bool,
    /// Application default credentials for calls of the JSON API, built
    /// on first use (never on an emulator).
    credentials: std::sync::Arc<
        std::sync::OnceLock<Result<google_cloud_auth::credentials::Credentials, String>>,
    >,
}

/// `http://HOST:PORT` of `$STORAGE_EMULATOR_HOST` (which Google's clients
/// accept with or without a scheme).
fn emulator_from_env() -> Option<String> {
    let h = std::env::var("STORAGE_EMULATOR_HOST").ok()?;
    let h = h.trim().trim_end_matches('/');
    if h.is_empty() {
        None
    } else if h.starts_with("http://") || h.starts_with("https://") {
        Some(h.to_string())
    } else {
        Some(format!("http://{h}"))
    }
}

impl CloudStorage {
    /// Connects as configured: `[storage] endpoint`, else
    /// `$STORAGE_EMULATOR_HOST`, else Google with application default
    /// credentials. Plaintext endpoints are emulators and take no credentials.
    pub async fn connect(cfg: &StorageConfig) -> Result<Self, super::PubsubError> {
        let endpoint = cfg.endpoint.clone().or_else(emulator_from_env);
        let anonymous = endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"));
        let mut b = Storage::builder();
        if let Some(e) = &endpoint {
            b = b.with_endpoint(e);
        }
        if anonymous {
            b = b.with_credentials(
                google_cloud_auth::credentials::anonymous::Builder::new().build(),
            );
        }
        let client = b
            .build()
            .await
            .map_err(|source| super::PubsubError::Client {
                endpoint: endpoint
                    .clone()
                    .unwrap_or_else(|| "https://storage.googleapis.com".into()),
                source,
            })?;
        Ok(Self {
            client,
            endpoint,
            anonymous,
            credentials: Default::default(),
        })
    }

    /// A client of the emulator at `http://HOST:PORT`.
    pub async fn emulator(endpoint: &str) -> Result<Self, super::PubsubError> {
        Self::connect(&StorageConfig {
            endpoint: Some(endpoint.to_string()),
            ..Default::default()
        })
        .await
    }

    /// Whether this talks to an emulator.
    pub fn is_emulator(&self) -> bool {
        self.anonymous
    }

    /// The endpoint, for logs.
    pub fn describe(&self) -> String {
        self.endpoint
            .clone()
            .unwrap_or_else(|| "https://storage.googleapis.com".into())
    }

    /// Creates `bucket` unless it exists, through the JSON API (emulators:
    /// buckets of a real project are created by whoever owns the project).
    pub async fn ensure_bucket(&self, bucket: &str) -> Result<(), ObjectError> {
        let url = format!("{}/storage/v1/b?project=postfach", self.describe());
        let body = serde_json::json!({ "name": bucket });
        let reference = format!("gs://{bucket}");
        tokio::task::spawn_blocking(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(30)))
                .http_status_as_error(false)
                .build()
                .into();
            match agent.post(&url).send_json(&body) {
                Ok(r) if r.status().is_success() || r.status().as_u16() == 409 => Ok(()),
                Ok(r) => Err(ObjectError::Unavailable {
                    reference,
                    reason: format!("create bucket: HTTP {}", r.status()),
                }),
                Err(e) => Err(ObjectError::Unavailable {
                    reference,
                    reason: format!("create bucket: {e}"),
                }),
            }
        })
        .await
        .map_err(|e| ObjectError::Unavailable {
            reference: "bucket".into(),
            reason: e.to_string(),
        })?
    }

    /// The headers that authorize a call of the JSON API: none on an
    /// emulator, else those of the application default credentials.
    pub async fn auth_headers(&self) -> Result<Option<axum::http::HeaderMap>, String> {
        if self.anonymous {
            return Ok(None);
        }
        let creds = self
            .credentials
            .get_or_init(|| {
                google_cloud_auth::credentials::Builder::default()
                    .build()
                    .map_err(|e| e.to_string())
            })
            .clone()?;
        match creds
            .headers(axum::http::Extensions::new())
            .await
            .map_err(|e| e.to_string())?
        {
            google_cloud_auth::credentials::CacheableResource::New { data, .. } => Ok(Some(data)),
            google_cloud_auth::credentials::CacheableResource::NotModified => {
                Err("the credentials gave no headers".into())
            }
        }
    }

    /// Uploads an open file as `bucket/object`, its CRC32C sent with it (the
    /// service refuses a damaged upload), resumable on a reset connection.
    pub async fn upload_file(
        &self,
        bucket: &str,
        object: &str,
        file: tokio::fs::File,
        crc32c: u32,
    ) -> Result<(), String> {
        let upload = self
            .client
            .write_object(format!("projects/_/buckets/{bucket}"), object, file)
            .set_content_type("application/octet-stream")
            .with_known_crc32c(crc32c)
            .send_unbuffered();
        match tokio::time::timeout(CALL_TIMEOUT * 10, upload).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "no answer within {} s",
                CALL_TIMEOUT.as_secs() * 10
            )),
        }
    }

    /// Writes `bucket/object` into `out`, chunk by chunk.
    pub async fn download_into(
        &self,
        bucket: &str,
        object: &str,
        out: &mut tokio::fs::File,
    ) -> Result<(), ObjectError> {
        use tokio::io::AsyncWriteExt;
        let reference = format!("gs://{bucket}/{object}");
        let unavailable = |e: &dyn std::fmt::Display| ObjectError::Unavailable {
            reference: reference.clone(),
            reason: e.to_string(),
        };
        let mut resp = match self
            .client
            .read_object(format!("projects/_/buckets/{bucket}"), object)
            .send()
            .await
        {
            Ok(resp) => resp,
            Err(e) if not_found(&e) => {
                return Err(ObjectError::NotFound {
                    reference: reference.clone(),
                });
            }
            Err(e) => return Err(unavailable(&e)),
        };
        while let Some(chunk) = resp.next().await {
            let chunk = chunk.map_err(|e| unavailable(&e))?;
            out.write_all(&chunk).await.map_err(|e| unavailable(&e))?;
        }
        out.flush().await.map_err(|e| unavailable(&e))
    }

    async fn read_all(&self, r: &ObjectRef) -> Result<Vec<u8>, ObjectError> {
        let unavailable = |e: &dyn std::fmt::Display| ObjectError::Unavailable {
            reference: r.to_uri(),
            reason: e.to_string(),
        };
        let mut req = self
            .client
            .read_object(format!("projects/_/buckets/{}", r.bucket), &r.object);
        if let Some(g) = r.generation {
            let g = i64::try_from(g).map_err(|_| unavailable(&"generation out of range"))?;
            req = req.set_generation(g);
        }
        let mut resp = match req.send().await {
            Ok(resp) => resp,
            Err(e) if not_found(&e) => {
                return Err(ObjectError::NotFound {
                    reference: r.to_uri(),
                });
            }
            Err(e) => return Err(unavailable(&e)),
        };
        let size = u64::try_from(resp.object().size).unwrap_or(0);
        if size > MAX_OBJECT_BYTES {
            return Err(ObjectError::TooLarge {
                reference: r.to_uri(),
                limit: MAX_OBJECT_BYTES,
            });
        }
        let mut data = Vec::with_capacity(size as usize);
        while let Some(chunk) = resp.next().await {
            let chunk = chunk.map_err(|e| unavailable(&e))?;
            if (data.len() + chunk.len()) as u64 > MAX_OBJECT_BYTES {
                return Err(ObjectError::TooLarge {
                    reference: r.to_uri(),
                    limit: MAX_OBJECT_BYTES,
                });
            }
            data.extend_from_slice(&chunk);
        }
        Ok(data)
    }

    async fn write_all(
        &self,
        bucket: &str,
        object: &str,
        data: Vec<u8>,
    ) -> Result<ObjectRef, ObjectError> {
        let target =
            ObjectRef::new(bucket, object, None).map_err(|reason| ObjectError::Unavailable {
                reference: format!("gs://{bucket}/{object}"),
                reason,
            })?;
        // the checksum goes with the request, so the service refuses a damaged
        // upload (and the client sends no trailing checksum part, which
        // emulators store as data)
        let crc = crc32c::crc32c(&data);
        let written = self
            .client
            .write_object(
                format!("projects/_/buckets/{bucket}"),
                object,
                bytes::Bytes::from(data),
            )
            .set_content_type("application/json")
            .with_known_crc32c(crc)
            .send_unbuffered()
            .await
            .map_err(|e| ObjectError::Unavailable {
                reference: target.to_uri(),
                reason: e.to_string(),
            })?;
        Ok(ObjectRef {
            generation: u64::try_from(written.generation).ok().filter(|g| *g > 0),
            ..target
        })
    }
}

fn not_found(e: &google_cloud_storage::Error) -> bool {
    e.http_status_code() == Some(404)
        || e.status()
            .is_some_and(|s| s.code == google_cloud_gax::error::rpc::Code::NotFound)
}

async fn timed<T>(
    what: String,
    f: impl std::future::Future<Output = Result<T, ObjectError>>,
) -> Result<T, ObjectError> {
    match tokio::time::timeout(CALL_TIMEOUT, f).await {
        Ok(r) => r,
        Err(_) => Err(ObjectError::Unavailable {
            reference: what,
            reason: format!("no answer within {} s", CALL_TIMEOUT.as_secs()),
        }),
    }
}

impl ObjectStore for CloudStorage {
    fn read<'a>(&'a self, reference: &'a ObjectRef) -> ObjectFuture<'a, Vec<u8>> {
        Box::pin(timed(reference.to_uri(), self.read_all(reference)))
    }

    fn write<'a>(
        &'a self,
        bucket: &'a str,
        object: &'a str,
        data: Vec<u8>,
    ) -> ObjectFuture<'a, ObjectRef> {
        Box::pin(timed(
            format!("gs://{bucket}/{object}"),
            self.write_all(bucket, object, data),
        ))
    }
}
