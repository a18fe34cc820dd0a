//! What crosses the edge of Zeebe's gateway protocol, either way: postfach's
//! errors as the gRPC statuses Zeebe documents, variables documents, wait
//! times and millisecond counts a client sends, the one tenant, the caller a
//! call acts as.
//!
//! Invariant: every value a client sends is range-checked here before a
//! library call sees it, and a refusal names the field.

use crate::server::auth::Caller;
use crate::{Error, Vars};
use tonic::Status;

/// How long an `ActivateJobs` without jobs waits when the client asks for
/// the server's default (`requestTimeout` 0).
const LONG_POLL_DEFAULT_MS: i64 = 10_000;
/// The longest wait a client may ask for.
const LONG_POLL_MAX_MS: i64 = 5 * 60_000;

/// The tenant of everything (postfach has one).
pub(super) const TENANT: &str = "<default>";

/// A postfach error as the gRPC status Zeebe documents for its kind: the
/// HTTP API's one exhaustive mapping, translated.
pub(super) fn status(e: Error) -> Status {
    use axum::http::StatusCode as S;
    let code = match crate::server::http::status_of(&e) {
        S::BAD_REQUEST | S::PAYLOAD_TOO_LARGE => tonic::Code::InvalidArgument,
        S::NOT_FOUND => tonic::Code::NotFound,
        S::CONFLICT | S::UNPROCESSABLE_ENTITY | S::MISDIRECTED_REQUEST => {
            tonic::Code::FailedPrecondition
        }
        S::SERVICE_UNAVAILABLE => tonic::Code::Unavailable,
        _ => tonic::Code::Internal,
    };
    let owner = match &e {
        Error::Engine(crate::engine::EngineError::OtherPartition { owner, .. }) => Some(*owner),
        _ => None,
    };
    let mut s = Status::new(code, e.to_string());
    if let Some(owner) = owner {
        // a gateway sends the call on to the owner (0-based, as postfach counts)
        s.metadata_mut().insert(OWNER, owner.into());
    }
    s
}

/// The metadata of a refusal that names the partition owning what was
/// addressed.
pub const OWNER: &str = "postfach-owner";

/// A variables document: empty, or a JSON object.
pub(super) fn variables(field: &str, text: &str) -> Result<Vars, Status> {
    if text.trim().is_empty() {
        return Ok(Vars::new());
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err(Status::invalid_argument(format!(
            "{field} must be a JSON object, like {{\"auftragId\": \"4711\"}}"
        ))),
        Err(e) => Err(Status::invalid_argument(format!(
            "{field} is not JSON: {e}"
        ))),
    }
}

/// How long a call that waits (long polling, a start with result) waits
/// for a client's `requestTimeout`: 0 the default, negative not at all.
pub(super) fn wait_ms(request_timeout: i64) -> u64 {
    match request_timeout {
        0 => LONG_POLL_DEFAULT_MS as u64,
        t if t < 0 => 0,
        t => t.min(LONG_POLL_MAX_MS) as u64,
    }
}

/// Runs `f` as `caller` acts, so that the audited commands it submits name
/// the caller (no caller: no token is configured).
pub(super) async fn as_caller<F: std::future::Future>(caller: Option<&Caller>, f: F) -> F::Output {
    match caller {
        Some(c) => crate::audit::acting(c.name.clone(), f).await,
        None => f.await,
    }
}

/// The answer to a call postfach does not serve, naming it.
pub(super) fn unimplemented<T>(call: &str) -> Result<T, Status> {
    Err(Status::unimplemented(format!(
        "postfach does not serve {call} of Zeebe's gateway protocol"
    )))
}

/// A millisecond count a client sent, range-checked.
pub(super) fn millis(
    limit: crate::limits::Limit,
    field: &'static str,
    v: i64,
) -> Result<u64, Status> {
    let ms = u64::try_from(v)
        .map_err(|_| Status::invalid_argument(format!("{field} {v} is negative")))?;
    limit
        .named(field)
        .check(ms)
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    Ok(ms)
}
