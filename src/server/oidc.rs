//! Identities from an OpenID Connect issuer: access tokens (JWTs) verified
//! against the issuer's published keys (`[auth] issuer`, `audience`,
//! `jwks_file`, `roles_claim`).
//!
//! Invariant: a token is accepted only when (1) its header names an
//! asymmetric algorithm (RS…, PS…, ES…, EdDSA) — `none` and every HMAC
//! algorithm are refused before any key is looked at —, (2) it is signed by
//! a key of the issuer's current key set whose type fits that algorithm,
//! (3) its `iss` is the configured issuer and its `aud` holds the
//! configured audience, and (4) the injected clock stands within
//! `[nbf − LEEWAY, exp + LEEWAY]`. The key set is read from the issuer's
//! discovery document (or the `jwks_file`) at start, again when it is older
//! than [`MAX_AGE`] (so a key the issuer removed stops working), and again
//! when a token names an unknown `kid` — at most once per [`REFETCH_EVERY`],
//! so a stream of forged `kid`s cannot make postfach hammer the issuer.

use super::auth::{Caller, Grant};
use crate::clock::{Clock, Millis};
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use std::sync::{Arc, RwLock};

/// Clock skew tolerated on `exp` and `nbf`.
pub const LEEWAY: Millis = 30_000;
/// A key set older than this is fetched again before the next token.
pub const MAX_AGE: Millis = 5 * 60_000;
/// The least time between two fetches a token's unknown `kid` causes.
pub const REFETCH_EVERY: Millis = 10_000;
/// The largest discovery document or key set read.
const MAX_DOCUMENT: u64 = 1 << 20;
/// How many verified tokens are remembered (the set is emptied when full).
const VERIFIED: usize = 10_000;
/// How long a fetch from the issuer may take.
const FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub use crate::config::IssuerConfig;

/// Why a token was refused (the edge answers 401 with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// Not three base64url parts with a JSON header.
    #[error("the token is not a JWT: {0}")]
    Malformed(String),
    /// `none`, an HMAC algorithm or one postfach does not know.
    #[error(
        "the token's algorithm '{0}' is refused: only RS256/384/512, PS256/384/512, ES256/384 and EdDSA"
    )]
    Algorithm(String),
    /// No key of the issuer's set has this id (or none fits without one).
    #[error("no key of the issuer has id '{0}'")]
    UnknownKey(String),
    /// The issuer's keys could not be had.
    #[error("the issuer's keys cannot be read: {0}")]
    NoKeys(String),
    /// Signature, issuer or audience wrong.
    #[error("the token does not verify: {0}")]
    Invalid(String),
    /// `exp` passed.
    #[error("the token expired at {0} (seconds since the epoch)")]
    Expired(u64),
    /// `nbf` not reached.
    #[error("the token is not valid before {0} (seconds since the epoch)")]
    NotYet(u64),
}

/// A key of the set: its id, the key, the algorithms it verifies.
struct Key {
    kid: Option<String>,
    key: DecodingKey,
    algorithms: Vec<Algorithm>,
}

/// The keys held, and when.
struct Ring {
    keys: Vec<Key>,
    /// When the set was read (0: never).
    fetched_at: Millis,
    /// Which set this is: a token verified against another is verified again.
    generation: u64,
}

/// A token verified before: who it is, its time window, the key set.
struct Verified {
    caller: Caller,
    exp: Millis,
    nbf: Millis,
    generation: u64,
}

/// A verifier of one issuer's tokens; clones share the keys.
#[derive(Clone)]
pub struct Issuer(Arc<Inner>);

struct Inner {
    config: IssuerConfig,
    clock: Arc<dyn Clock>,
    ring: RwLock<Arc<Ring>>,
    /// When a fetch was last tried, whatever it gave (0: never).
    tried_at: std::sync::atomic::AtomicU64,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
    /// How many times the keys were fetched (a test reads it).
    fetches: std::sync::atomic::AtomicU64,
    /// Tokens verified, by their SHA-256: a client presents the same token
    /// until it expires, and its signature is checked once per key set.
    verified: std::sync::Mutex<std::collections::HashMap<[u8; 32], Verified>>,
    /// The console's sign-in, from the last discovery document read.
    sign_in: RwLock<Option<SignIn>>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("issuer", &self.0.config.issuer)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
    authorization_endpoint: Option<String>,
    token_endpoint: Option<String>,
    end_session_endpoint: Option<String>,
}

/// Where a browser signs in with the issuer: what the console needs for
/// the authorization code flow with PKCE, from the discovery document.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SignIn {
    /// The issuer.
    pub issuer: String,
    /// The console's public client id (`[auth] console_client`).
    pub client_id: String,
    /// Where the browser is sent to sign in.
    pub authorization_endpoint: String,
    /// Where the console trades the code (and later a refresh token) for
    /// an access token; on the issuer's origin, which the page's content
    /// security policy lets it reach.
    pub token_endpoint: String,
    /// Where the browser is sent to sign out, if the issuer has one.
    pub end_session_endpoint: Option<String>,
}

/// The origin (`scheme://host[:port]`) of a URL, if it has one.
pub fn origin(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let host_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    (host_len > 0).then(|| &url[..url.len() - rest.len() + host_len])
}

fn agent() -> ureq::Agent {
    let tls = ureq::tls::TlsConfig::builder()
        .provider(ureq::tls::TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
        .build();
    ureq::Agent::config_builder()
        .timeout_global(Some(FETCH_TIMEOUT))
        .tls_config(tls)
        .build()
        .into()
}

fn get_json<T: serde::de::DeserializeOwned>(agent: &ureq::Agent, url: &str) -> Result<T, String> {
    let mut resp = agent
        .get(url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let text = resp
        .body_mut()
        .with_config()
        .limit(MAX_DOCUMENT)
        .read_to_string()
        .map_err(|e| format!("GET {url}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("GET {url}: {e}"))
}

/// Reads the key set where the configuration says (blocking), and the
/// discovery document when it came from one.
fn fetch(config: &IssuerConfig) -> Result<(JwkSet, Option<Discovery>), String> {
    if let Some(path) = &config.jwks_file {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        return serde_json::from_str(&text)
            .map(|set| (set, None))
            .map_err(|e| format!("{}: {e}", path.display()));
    }
    let agent = agent();
    let base = config.issuer.trim_end_matches('/');
    let doc: Discovery = get_json(&agent, &format!("{base}/.well-known/openid-configuration"))?;
    if doc.issuer != config.issuer {
        return Err(format!(
            "the discovery document names issuer '{}', not '{}' as configured",
            doc.issuer, config.issuer
        ));
    }
    let set = get_json(&agent, &doc.jwks_uri)?;
    Ok((set, Some(doc)))
}

/// The algorithms a key of this type verifies (its own `alg` when given).
fn algorithms_of(jwk: &jsonwebtoken::jwk::Jwk) -> Vec<Algorithm> {
    use Algorithm::*;
    let family: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => vec![RS256, RS384, RS512, PS256, PS384, PS512],
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            jsonwebtoken::jwk::EllipticCurve::P256 => vec![ES256],
            jsonwebtoken::jwk::EllipticCurve::P384 => vec![ES384],
            _ => vec![],
        },
        AlgorithmParameters::OctetKeyPair(_) => vec![EdDSA],
        // a shared secret is no issuer's public key; a kind of key this
        // crate learns later is not trusted before it is looked at
        _ => vec![],
    };
    match jwk.common.key_algorithm {
        None => family,
        Some(ka) => family
            .into_iter()
            .filter(|a| key_algorithm(*a) == Some(ka))
            .collect(),
    }
}

fn key_algorithm(a: Algorithm) -> Option<KeyAlgorithm> {
    use Algorithm::*;
    Some(match a {
        RS256 => KeyAlgorithm::RS256,
        RS384 => KeyAlgorithm::RS384,
        RS512 => KeyAlgorithm::RS512,
        PS256 => KeyAlgorithm::PS256,
        PS384 => KeyAlgorithm::PS384,
        PS512 => KeyAlgorithm::PS512,
        ES256 => KeyAlgorithm::ES256,
        ES384 => KeyAlgorithm::ES384,
        EdDSA => KeyAlgorithm::EdDSA,
        _ => return None,
    })
}

/// The signing keys of a set: encryption keys and shared secrets left out.
fn keys_of(set: &JwkSet) -> Vec<Key> {
    set.keys
        .iter()
        .filter(|k| k.common.public_key_use != Some(PublicKeyUse::Encryption))
        .filter_map(|jwk| {
            let algorithms = algorithms_of(jwk);
            if algorithms.is_empty() {
                return None;
            }
            let key = DecodingKey::from_jwk(jwk).ok()?;
            Some(Key {
                kid: jwk.common.key_id.clone(),
                key,
                algorithms,
            })
        })
        .collect()
}

/// The asymmetric algorithm a header names, read before anything else.
fn header_algorithm(token: &str) -> Result<(Algorithm, Option<String>), Refused> {
    use base64::Engine;
    let head = token.split('.').next().unwrap_or("");
    if token.split('.').count() != 3 {
        return Err(Refused::Malformed("not three dot-separated parts".into()));
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(head)
        .map_err(|e| Refused::Malformed(format!("header: {e}")))?;
    #[derive(Deserialize)]
    struct Head {
        alg: String,
        kid: Option<String>,
    }
    let h: Head =
        serde_json::from_slice(&bytes).map_err(|e| Refused::Malformed(format!("header: {e}")))?;
    use Algorithm::*;
    let alg = match h.alg.as_str() {
        "RS256" => RS256,
        "RS384" => RS384,
        "RS512" => RS512,
        "PS256" => PS256,
        "PS384" => PS384,
        "PS512" => PS512,
        "ES256" => ES256,
        "ES384" => ES384,
        "EdDSA" => EdDSA,
        other => return Err(Refused::Algorithm(other.chars().take(32).collect())),
    };
    Ok((alg, h.kid))
}

/// What a token says about its holder, once verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `preferred_username`, else `client_id` (a service's token), else
    /// `sub`.
    pub name: String,
    /// The postfach roles among the roles claim's entries (others ignored).
    pub roles: Vec<Grant>,
    /// The groups claim's entries.
    pub groups: Vec<String>,
}

/// The value at a dotted path of the claims.
fn at_path<'a>(claims: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    if let Some(v) = claims.get(path) {
        return Some(v);
    }
    path.split('.').try_fold(claims, |v, part| v.get(part))
}

/// Strings of a claim: a list, or one space-separated string.
fn strings(v: Option<&serde_json::Value>) -> Vec<String> {
    match v {
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        Some(serde_json::Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

/// The identity verified claims describe; none when they name nobody
/// (no `preferred_username`, `client_id` or `sub`).
pub fn identity(config: &IssuerConfig, claims: &serde_json::Value) -> Option<Identity> {
    let name: String = ["preferred_username", "client_id", "sub"]
        .iter()
        .filter_map(|c| claims.get(*c).and_then(|v| v.as_str()))
        .map(|n| {
            n.chars()
                .filter(|c| !c.is_control())
                .take(128)
                .collect::<String>()
        })
        .find(|n| !n.trim().is_empty())?;
    let roles = strings(at_path(claims, &config.roles_claim))
        .iter()
        .filter_map(|r| Grant::parse(r).ok())
        .collect();
    let groups = strings(at_path(claims, &config.groups_claim))
        .into_iter()
        .map(|g| g.trim_start_matches('/').to_string())
        .filter(|g| !g.is_empty() && g.len() <= 256)
        .collect();
    Some(Identity {
        name,
        roles,
        groups,
    })
}

impl Issuer {
    /// A verifier of `config`'s issuer on `clock`; its keys are read now
    /// (blocking) — from a `jwks_file` an error stops the start, from
    /// discovery it is returned beside the verifier, which tries again at
    /// the first token (the Pub/Sub ingress needs no issuer).
    pub fn open(
        config: IssuerConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<(Issuer, Option<String>), String> {
        config.check()?;
        let issuer = Issuer(Arc::new(Inner {
            config,
            clock,
            ring: RwLock::new(Arc::new(Ring {
                keys: Vec::new(),
                fetched_at: 0,
                generation: 0,
            })),
            tried_at: Default::default(),
            fetching: tokio::sync::Mutex::new(()),
            fetches: Default::default(),
            verified: Default::default(),
            sign_in: RwLock::new(None),
        }));
        let first = fetch(&issuer.0.config);
        let now = issuer.0.clock.now();
        issuer
            .0
            .fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // the start's fetch does not count against REFETCH_EVERY: a key
        // rotated in just after the start is found at once
        match first {
            Ok((set, doc)) => {
                issuer.store(keys_of(&set), doc.as_ref(), now);
                Ok((issuer, None))
            }
            Err(e) if issuer.0.config.jwks_file.is_some() => Err(e),
            Err(e) => Ok((issuer, Some(e))),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &IssuerConfig {
        &self.0.config
    }

    /// How many times the keys were read so far.
    pub fn fetches(&self) -> u64 {
        self.0.fetches.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn ring(&self) -> Arc<Ring> {
        self.0
            .ring
            .read()
            .map(|r| r.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Where the console signs in: known once a discovery document named
    /// both endpoints, the token endpoint on the issuer's origin, and a
    /// `console_client` is configured.
    pub fn sign_in(&self) -> Option<SignIn> {
        self.0
            .sign_in
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// [`Issuer::sign_in`], reading the discovery document once more
    /// (rate-limited as for unknown keys) when it is not known yet.
    pub async fn sign_in_now(&self) -> Option<SignIn> {
        if self.0.config.console_client.is_none() || self.0.config.jwks_file.is_some() {
            return None;
        }
        if self.sign_in().is_none() {
            let _ = self.refetch().await;
        }
        self.sign_in()
    }

    fn store(&self, keys: Vec<Key>, doc: Option<&Discovery>, now: Millis) {
        if let (Some(doc), Some(client)) = (doc, &self.0.config.console_client) {
            let same_origin = |url: &str| origin(url) == origin(&self.0.config.issuer);
            let sign_in = match (&doc.authorization_endpoint, &doc.token_endpoint) {
                (Some(auth), Some(token)) if same_origin(token) => Some(SignIn {
                    issuer: self.0.config.issuer.clone(),
                    client_id: client.clone(),
                    authorization_endpoint: auth.clone(),
                    token_endpoint: token.clone(),
                    end_session_endpoint: doc.end_session_endpoint.clone(),
                }),
                _ => {
                    tracing::warn!(issuer = %self.0.config.issuer, "the discovery document names no authorization and token endpoint on the issuer's origin: the console cannot sign in with it and asks for a token");
                    None
                }
            };
            match self.0.sign_in.write() {
                Ok(mut s) => *s = sign_in,
                Err(p) => *p.into_inner() = sign_in,
            }
        }
        let generation = self.ring().generation + 1;
        let ring = Arc::new(Ring {
            keys,
            fetched_at: now,
            generation,
        });
        match self.0.ring.write() {
            Ok(mut r) => *r = ring,
            Err(p) => *p.into_inner() = ring,
        }
    }

    fn tried(&self, now: Millis) {
        self.0
            .tried_at
            .store(now.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Fetches the keys again unless a fetch was tried less than
    /// [`REFETCH_EVERY`] ago (then nothing happens); the old keys stay
    /// when the fetch fails.
    async fn refetch(&self) -> Result<(), String> {
        let _one = self.0.fetching.lock().await;
        let now = self.0.clock.now();
        let tried = self.0.tried_at.load(std::sync::atomic::Ordering::Relaxed);
        if tried != 0 && now.saturating_sub(tried) < REFETCH_EVERY {
            return Ok(());
        }
        self.tried(now);
        let config = self.0.config.clone();
        self.0
            .fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let got = tokio::task::spawn_blocking(move || fetch(&config))
            .await
            .map_err(|e| e.to_string())?;
        match got {
            Ok((set, doc)) => {
                self.store(keys_of(&set), doc.as_ref(), now);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(issuer = %self.0.config.issuer, error = %e, "the issuer's keys could not be fetched again; the old ones stay");
                Err(e)
            }
        }
    }

    /// The caller a token proves, or why it proves none: a token verified
    /// against the current key set before is looked up (its time window is
    /// checked again), any other is verified.
    pub async fn caller_of(&self, token: &str) -> Result<Caller, Refused> {
        use sha2::Digest;
        let now = self.0.clock.now();
        if now.saturating_sub(self.ring().fetched_at) >= MAX_AGE {
            let _ = self.refetch().await;
        }
        let sum: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let generation = self.ring().generation;
        if let Some(hit) = self.remembered(&sum, generation, now) {
            return hit;
        }
        let (identity, exp, nbf) = self.verified(token, now).await?;
        let caller = Issuer::caller(identity);
        let mut cache = self.0.verified.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= VERIFIED {
            cache.clear();
        }
        cache.insert(
            sum,
            Verified {
                caller: caller.clone(),
                exp,
                nbf,
                generation: self.ring().generation,
            },
        );
        Ok(caller)
    }

    fn remembered(
        &self,
        sum: &[u8; 32],
        generation: u64,
        now: Millis,
    ) -> Option<Result<Caller, Refused>> {
        let cache = self.0.verified.lock().unwrap_or_else(|p| p.into_inner());
        let v = cache.get(sum).filter(|v| v.generation == generation)?;
        Some(if now > v.exp.saturating_add(LEEWAY) {
            Err(Refused::Expired(v.exp / 1000))
        } else if now.saturating_add(LEEWAY) < v.nbf {
            Err(Refused::NotYet(v.nbf / 1000))
        } else {
            Ok(v.caller.clone())
        })
    }

    /// The identity a token proves, or why it proves none (always checked
    /// against the keys).
    pub async fn verify(&self, token: &str) -> Result<Identity, Refused> {
        let now = self.0.clock.now();
        if now.saturating_sub(self.ring().fetched_at) >= MAX_AGE {
            let _ = self.refetch().await;
        }
        self.verified(token, now).await.map(|(id, _, _)| id)
    }

    /// The identity and time window (`exp`, `nbf` in ms) a token proves.
    async fn verified(
        &self,
        token: &str,
        now: Millis,
    ) -> Result<(Identity, Millis, Millis), Refused> {
        let (alg, kid) = header_algorithm(token)?;
        let found = |ring: &Ring| -> Option<DecodingKey> {
            let fits = |k: &&Key| k.algorithms.contains(&alg);
            match &kid {
                Some(id) => ring
                    .keys
                    .iter()
                    .filter(fits)
                    .find(|k| k.kid.as_deref() == Some(id))
                    .map(|k| k.key.clone()),
                None => {
                    let mut fitting = ring.keys.iter().filter(fits);
                    match (fitting.next(), fitting.next()) {
                        (Some(k), None) => Some(k.key.clone()),
                        _ => None,
                    }
                }
            }
        };
        let key = match found(&self.ring()) {
            Some(k) => k,
            None => {
                let fetched = self.refetch().await;
                let ring = self.ring();
                match found(&ring) {
                    Some(k) => k,
                    None if ring.keys.is_empty() => {
                        return Err(Refused::NoKeys(
                            fetched
                                .err()
                                .unwrap_or_else(|| "the set holds no signing key".into()),
                        ));
                    }
                    None => {
                        return Err(Refused::UnknownKey(kid.unwrap_or_else(|| "(none)".into())));
                    }
                }
            }
        };
        self.check(token, alg, &key, now)
    }

    fn check(
        &self,
        token: &str,
        alg: Algorithm,
        key: &DecodingKey,
        now: Millis,
    ) -> Result<(Identity, Millis, Millis), Refused> {
        let mut v = Validation::new(alg);
        v.set_issuer(&[&self.0.config.issuer]);
        v.set_audience(&[&self.0.config.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        // time is checked below against the injected clock
        v.validate_exp = false;
        v.validate_nbf = false;
        let data = jsonwebtoken::decode::<serde_json::Value>(token, key, &v)
            .map_err(|e| Refused::Invalid(e.to_string()))?;
        let claims = data.claims;
        let secs = |c: &str| claims.get(c).and_then(|v| v.as_u64());
        let exp = secs("exp").ok_or_else(|| Refused::Invalid("exp is not a number".into()))?;
        if now > exp.saturating_mul(1000).saturating_add(LEEWAY) {
            return Err(Refused::Expired(exp));
        }
        let nbf = secs("nbf").unwrap_or(0);
        if now.saturating_add(LEEWAY) < nbf.saturating_mul(1000) {
            return Err(Refused::NotYet(nbf));
        }
        let id = identity(&self.0.config, &claims).ok_or_else(|| {
            Refused::Invalid("it names nobody: no preferred_username, client_id or sub".into())
        })?;
        Ok((id, exp.saturating_mul(1000), nbf.saturating_mul(1000)))
    }

    /// The caller an identity is.
    pub fn caller(identity: Identity) -> Caller {
        Caller {
            name: identity.name.into(),
            roles: identity.roles.into(),
            groups: identity.groups.into(),
        }
    }
}

#[cfg(test)]
mod tests;
