//! TLS of postfach's listeners (`--tls-cert`, `--tls-key`) and of its own
//! calls — the gateway's to its partitions (`--tls-ca`) — with rustls on
//! aws-lc-rs.
//!
//! Invariant: a listener given certificate files speaks TLS only (a plain
//! request fails the handshake and reaches no handler); the certificate is
//! read again when either file changes — looked at on every handshake —
//! and a pair that does not load keeps the one before, logged; a peer's
//! certificate must chain to the CA file when one is given, else to the
//! public roots.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The certificate chain and private key a listener serves (PEM files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's own first.
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Reads the pair; errors name the file and what is wrong.
fn load(files: &TlsFiles) -> Result<Arc<CertifiedKey>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", files.cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{}: no certificate (PEM \"BEGIN CERTIFICATE\")",
            files.cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| format!("{}: {e}", files.key.display()))?;
    CertifiedKey::from_der(certs, key, &provider())
        .map(Arc::new)
        .map_err(|e| format!("{} with {}: {e}", files.cert.display(), files.key.display()))
}

/// The served pair, read again when a file's modification time changes.
#[derive(Debug)]
struct Reloading {
    files: TlsFiles,
    current: Mutex<(Arc<CertifiedKey>, Option<SystemTime>, Option<SystemTime>)>,
}

impl rustls::server::ResolvesServerCert for Reloading {
    fn resolve(&self, _: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let stamps = (modified(&self.files.cert), modified(&self.files.key));
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if (current.1, current.2) != stamps {
            match load(&self.files) {
                Ok(pair) => {
                    tracing::info!(cert = %self.files.cert.display(), "TLS certificate read again");
                    *current = (pair, stamps.0, stamps.1);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the changed TLS certificate does not load; the one before is served");
                    current.1 = stamps.0;
                    current.2 = stamps.1;
                }
            }
        }
        Some(current.0.clone())
    }
}

/// The acceptor of a listener serving `files`; the pair is read now, so a
/// bad file stops the start.
pub fn acceptor(files: &TlsFiles) -> Result<tokio_rustls::TlsAcceptor, String> {
    acceptor_for(files, b"http/1.1")
}

/// As [`acceptor`], offering the application protocol `alpn` (`h2` for
/// gRPC, whose clients insist on it).
pub fn acceptor_for(files: &TlsFiles, alpn: &[u8]) -> Result<tokio_rustls::TlsAcceptor, String> {
    let stamps = (modified(&files.cert), modified(&files.key));
    let pair = load(files)?;
    let resolver = Reloading {
        files: files.clone(),
        current: Mutex::new((pair, stamps.0, stamps.1)),
    };
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// The client side of postfach's own calls: peers must chain to the
/// certificates of `ca` (PEM) when given, else to the public roots.
pub fn client_config(ca: Option<&Path>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!("{}: no certificate", path.display()));
            }
            for c in certs {
                roots
                    .add(c)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
