//! Backups and the log archive in Cloud Storage (`gs://BUCKET/PREFIX`): a
//! backup is written into a staging directory beside the database as it is
//! into any directory, then uploaded — its files first, its manifest last —
//! and removed locally; a restore downloads the files its manifest names
//! into a staging directory and restores from there with every check of a
//! local restore. The log's closed segments are uploaded as they close.
//! Objects are written, read and listed through Google's client and the
//! JSON API, with the credentials of [`CloudStorage`].
//!
//! Invariants: a backup without its manifest object is partial, never
//! listed as good nor restored; an object is uploaded with its CRC32C, so
//! the service refuses a damaged upload; a segment beside the log is
//! removed only once its object exists with its bytes.

use super::storage::CloudStorage;
use crate::backup::{self, BackupError, FileSum, Listed, MANIFEST, Manifest, Place};
use crate::config::StorageConfig;
use std::path::{Path, PathBuf};

/// A bucket's backups and archive, through one client.
#[derive(Clone, Debug)]
pub struct Bucket {
    storage: CloudStorage,
    http: reqwest::Client,
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> BackupError {
    BackupError::Remote {
        place: what.to_string(),
        reason: e.to_string(),
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// One object as listed: its name and size.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listing {
    name: String,
    size: u64,
}

impl Bucket {
    /// A client as `[storage]` says (else `$STORAGE_EMULATOR_HOST`, else
    /// Google with application default credentials).
    pub async fn connect(cfg: &StorageConfig) -> Result<Self, BackupError> {
        let storage = CloudStorage::connect(cfg)
            .await
            .map_err(|e| unavailable("Cloud Storage", e))?;
        let http = reqwest::Client::builder()
            .timeout(super::storage::CALL_TIMEOUT)
            .build()
            .map_err(|e| unavailable("Cloud Storage", e))?;
        Ok(Self { storage, http })
    }

    /// The objects under `prefix/` in `bucket`, every page.
    async fn list(&self, bucket: &str, prefix: &str) -> Result<Vec<Listing>, BackupError> {
        let place = format!("gs://{bucket}/{prefix}");
        let url = format!("{}/storage/v1/b/{bucket}/o", self.storage.describe());
        let prefix = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![
                ("prefix", prefix.clone()),
                ("fields", "items(name,size),nextPageToken".into()),
            ];
            if let Some(t) = &token {
                query.push(("pageToken", t.clone()));
            }
            let req = self.http.get(&url).query(&query);
            let resp = self
                .authorized(req)
                .await?
                .send()
                .await
                .map_err(|e| unavailable(&place, e))?;
            if resp.status() == reqwest::StatusCode::NOT_FOUND {
                return Err(unavailable(&place, "no such bucket"));
            }
            if !resp.status().is_success() {
                return Err(unavailable(&place, format!("list: HTTP {}", resp.status())));
            }
            let page: serde_json::Value = resp.json().await.map_err(|e| unavailable(&place, e))?;
            for item in page["items"].as_array().into_iter().flatten() {
                let name = item["name"].as_str().unwrap_or_default().to_string();
                let size = item["size"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .or_else(|| item["size"].as_u64())
                    .unwrap_or(0);
                out.push(Listing { name, size });
            }
            match page["nextPageToken"].as_str() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => break,
            }
        }
        Ok(out)
    }

    /// Deletes an object (one that is gone already counts as deleted).
    async fn delete(&self, bucket: &str, object: &str) -> Result<(), BackupError> {
        let place = format!("gs://{bucket}/{object}");
        let encoded: String =
            percent_encoding::utf8_percent_encode(object, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        let url = format!(
            "{}/storage/v1/b/{bucket}/o/{encoded}",
            self.storage.describe()
        );
        let resp = self
            .authorized(self.http.delete(&url))
            .await?
            .send()
            .await
            .map_err(|e| unavailable(&place, e))?;
        if resp.status().is_success() || resp.status() == reqwest::StatusCode::NOT_FOUND {
            Ok(())
        } else {
            Err(unavailable(
                &place,
                format!("delete: HTTP {}", resp.status()),
            ))
        }
    }

    /// The request with the client's credentials (none on an emulator).
    async fn authorized(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, BackupError> {
        match self.storage.auth_headers().await {
            Ok(Some(headers)) => Ok(req.headers(headers)),
            Ok(None) => Ok(req),
            Err(e) => Err(unavailable("Cloud Storage credentials", e)),
        }
    }

    /// Uploads the file `path` as `bucket/object`, with its CRC32C.
    async fn upload(&self, path: &Path, bucket: &str, object: &str) -> Result<(), BackupError> {
        let crc = {
            let path = path.to_path_buf();
            tokio::task::spawn_blocking(move || crc32c_of(&path))
                .await
                .map_err(|e| unavailable(object, e))??
        };
        let file = tokio::fs::File::open(path).await.map_err(io(path))?;
        self.storage
            .upload_file(bucket, object, file, crc)
            .await
            .map_err(|e| unavailable(&format!("gs://{bucket}/{object}"), e))
    }

    /// Downloads `bucket/object` as the file `path`.
    async fn download(&self, bucket: &str, object: &str, path: &Path) -> Result<(), BackupError> {
        let mut file = tokio::fs::File::create(path).await.map_err(io(path))?;
        self.storage
            .download_into(bucket, object, &mut file)
            .await
            .map_err(|e| match e {
                crate::objects::ObjectError::NotFound { reference } => BackupError::Damaged {
                    path: reference,
                    reason: "missing".into(),
                },
                e => unavailable(&format!("gs://{bucket}/{object}"), e),
            })?;
        file.sync_all().await.map_err(io(path))
    }

    /// Uploads the backup in the local directory `staged` (written by
    /// [`crate::Postfach::backup`]) under `prefix/ID/`: its files, then its
    /// manifest.
    pub async fn push(
        &self,
        staged: &Path,
        manifest: &Manifest,
        bucket: &str,
        prefix: &str,
    ) -> Result<(), BackupError> {
        let base = Place::object(prefix, &manifest.id);
        for f in &manifest.files {
            self.upload(&staged.join(&f.name), bucket, &format!("{base}/{}", f.name))
                .await?;
        }
        self.upload(
            &staged.join(MANIFEST),
            bucket,
            &format!("{base}/{MANIFEST}"),
        )
        .await
    }

    /// The backups under `prefix`, oldest first: each with its manifest
    /// and its objects' sizes checked against it (the content is checked by
    /// a restore, which downloads it).
    pub async fn backups(&self, bucket: &str, prefix: &str) -> Result<Vec<Listed>, BackupError> {
        let objects = self.list(bucket, prefix).await?;
        let strip = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        let mut dirs: std::collections::BTreeMap<String, Vec<Listing>> = Default::default();
        for o in objects {
            let Some(rest) = o.name.strip_prefix(&strip) else {
                continue;
            };
            if let Some((dir, file)) = rest.split_once('/')
                && !file.contains('/')
            {
                dirs.entry(dir.to_string()).or_default().push(Listing {
                    name: file.to_string(),
                    size: o.size,
                });
            }
        }
        let mut out = Vec::new();
        for (dir, files) in dirs {
            let checked = self
                .check(bucket, &Place::object(prefix, &dir), &files)
                .await;
            out.push((dir, checked));
        }
        Ok(out)
    }

    /// The manifest of the backup at `base` and its objects' sizes.
    async fn check(
        &self,
        bucket: &str,
        base: &str,
        files: &[Listing],
    ) -> Result<Manifest, BackupError> {
        let at = format!("gs://{bucket}/{base}");
        if !files.iter().any(|f| f.name == MANIFEST) {
            return Err(BackupError::Partial(at));
        }
        let manifest = self.manifest(bucket, base).await?;
        for f in &manifest.files {
            let path = format!("{at}/{}", f.name);
            match files.iter().find(|o| o.name == f.name) {
                None => {
                    return Err(BackupError::Damaged {
                        path,
                        reason: "missing".into(),
                    });
                }
                Some(o) if o.size != f.bytes => {
                    return Err(BackupError::Damaged {
                        path,
                        reason: format!(
                            "{} bytes, the manifest says {} (truncated or appended to)",
                            o.size, f.bytes
                        ),
                    });
                }
                Some(_) => {}
            }
        }
        Ok(manifest)
    }

    async fn manifest(&self, bucket: &str, base: &str) -> Result<Manifest, BackupError> {
        let path = format!("gs://{bucket}/{base}/{MANIFEST}");
        let r = crate::objects::ObjectRef::new(bucket, &format!("{base}/{MANIFEST}"), None)
            .map_err(|reason| BackupError::Manifest {
                path: path.clone(),
                reason,
            })?;
        let bytes = crate::objects::ObjectStore::read(&self.storage, &r)
            .await
            .map_err(|e| unavailable(&path, e))?;
        let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| BackupError::Manifest {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if m.files
            .iter()
            .any(|f| f.name.contains(['/', '\\']) || f.name.starts_with('.'))
        {
            return Err(BackupError::Manifest {
                path,
                reason: "a file name that is not a name in the backup".into(),
            });
        }
        Ok(m)
    }

    /// Downloads the backup `id` under `prefix` into `into/ID/` (created),
    /// its manifest and every file it names; returns the directory.
    pub async fn fetch(
        &self,
        bucket: &str,
        prefix: &str,
        id: &str,
        into: &Path,
    ) -> Result<PathBuf, BackupError> {
        let base = Place::object(prefix, id);
        let listed = self.list(bucket, &base).await?;
        let files: Vec<Listing> = listed
            .into_iter()
            .filter_map(|o| {
                let name = o.name.strip_prefix(&format!("{base}/"))?.to_string();
                (!name.contains('/')).then_some(Listing { name, size: o.size })
            })
            .collect();
        if files.is_empty() {
            return Err(BackupError::Damaged {
                path: format!("gs://{bucket}/{base}"),
                reason: "no such backup".into(),
            });
        }
        let manifest = self.check(bucket, &base, &files).await?;
        let dir = into.join(id);
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        for FileSum { name, .. } in &manifest.files {
            self.download(bucket, &format!("{base}/{name}"), &dir.join(name))
                .await?;
        }
        self.download(bucket, &format!("{base}/{MANIFEST}"), &dir.join(MANIFEST))
            .await?;
        Ok(dir)
    }

    /// Removes the good backups of `partition` under `prefix` beyond the
    /// newest `keep` (as [`backup::prune`] does in a directory); returns
    /// the ids removed.
    pub async fn prune(
        &self,
        bucket: &str,
        prefix: &str,
        partition: u32,
        keep: usize,
    ) -> Result<Vec<String>, BackupError> {
        let listed = self.backups(bucket, prefix).await?;
        let good: Vec<&Manifest> = listed
            .iter()
            .filter_map(|(_, m)| m.as_ref().ok())
            .filter(|m| m.partition == partition)
            .collect();
        let surplus = good.len().saturating_sub(keep);
        let mut removed = Vec::new();
        for m in &good[..surplus] {
            let base = Place::object(prefix, &m.id);
            // the manifest first: a half-removed backup is partial, not good
            self.delete(bucket, &format!("{base}/{MANIFEST}")).await?;
            for f in &m.files {
                self.delete(bucket, &format!("{base}/{}", f.name)).await?;
            }
            removed.push(m.id.clone());
        }
        Ok(removed)
    }

    /// Uploads the closed segments beside `log` under `prefix` as partition
    /// `partition`'s, each removed beside the log once its object exists
    /// with its size; returns the names uploaded.
    pub async fn ship(
        &self,
        log: &Path,
        bucket: &str,
        prefix: &str,
        partition: u32,
    ) -> Result<Vec<String>, BackupError> {
        let closed = crate::commit::wal::closed_segments(log).map_err(io(log))?;
        let mut shipped = Vec::new();
        for segment in closed {
            let Some((first, last)) = backup::archive::segment_range(&segment)? else {
                std::fs::remove_file(&segment).map_err(io(&segment))?;
                continue;
            };
            let name = backup::archive::segment_name(partition, first, last);
            let object = Place::object(prefix, &name);
            let size = std::fs::metadata(&segment).map_err(io(&segment))?.len();
            let there = self.list(bucket, &object).await.unwrap_or_default();
            match there.iter().find(|o| o.name == object) {
                Some(o) if o.size == size => {} // uploaded before the removal was
                Some(_) => {
                    return Err(BackupError::Damaged {
                        path: format!("gs://{bucket}/{object}"),
                        reason: format!(
                            "the archive holds other batches under this name than {}: archive a restored database to a place of its own",
                            segment.display()
                        ),
                    });
                }
                None => self.upload(&segment, bucket, &object).await?,
            }
            std::fs::remove_file(&segment).map_err(io(&segment))?;
            shipped.push(name);
        }
        Ok(shipped)
    }

    /// Downloads partition `partition`'s archived segments under `prefix`
    /// that hold a batch after `after` into the directory `into`, for
    /// [`backup::restore_until`] to replay from there.
    pub async fn fetch_archive(
        &self,
        bucket: &str,
        prefix: &str,
        partition: u32,
        after: u64,
        into: &Path,
    ) -> Result<(), BackupError> {
        std::fs::create_dir_all(into).map_err(io(into))?;
        let strip = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        for o in self.list(bucket, prefix).await? {
            let Some(name) = o.name.strip_prefix(&strip) else {
                continue;
            };
            if backup::archive::wanted(name, partition, after) {
                self.download(bucket, &o.name, &into.join(name)).await?;
            }
        }
        Ok(())
    }
}

/// The CRC32C of a file's content.
fn crc32c_of(path: &Path) -> Result<u32, BackupError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(io(path))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut crc = 0u32;
    loop {
        let n = f.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            return Ok(crc);
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
    }
}
