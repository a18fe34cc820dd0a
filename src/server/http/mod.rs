//! The HTTP admin API of `postfach run`: the command line's operations as JSON
//! resources, health checks and Prometheus metrics.
//!
//! Invariants: a thin edge over the library API (no engine logic here); errors map
//! to statuses by kind (400 bad input, 401 missing token, 404 unknown, 409 business
//! rejection or refused repair, 500 storage); bodies are size-limited; binding to a
//! non-loopback address requires a bearer token.

mod batches;
mod instances;
mod jobs;
mod messages;
mod processes;
mod slots;

pub use instances::MAX_PAGE;

use crate::ops::{InstanceFilter, MessageFilter};
use crate::{EngineError, Error, Postfach, Publish, Reason, Vars};
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
// helpers the families share
use instances::{id_cursor, page_limit};
use processes::instant;

use super::catalogue::Permission::{self as P, Admin, Open, Operate, Read, Work};
use super::catalogue::Placement::*;
use super::catalogue::{Operation, op};
use super::documents;
use super::gateway::route::List;
use axum::http::Method;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use utoipa_axum::{router::OpenApiRouter, routes};

/// Largest request body accepted; larger ones get 413 while they are read.
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// Largest body of a request that carries a BPMN model (`/deployments`):
/// a model at the parser's cap, escaped as a JSON string.
pub const MAX_MODEL_BODY: usize = 2 * crate::model::MAX_SIZE + 64 * 1024;

#[derive(Clone)]
struct AppState {
    pf: Postfach,
    keys: super::auth::Keys,
    alarms: Arc<crate::alarms::Alarms>,
    consumers: crate::ingress::Consumers,
    objects: Option<Arc<dyn crate::objects::ObjectStore>>,
    /// Where `POST /backups` writes (`[backup] to`), and how backups went.
    backups: Arc<super::backups::Backups>,
}

/// The API as an axum router. `keys`: the tokens it accepts (none: open); `alarms`:
/// configured alarms whose state `/metrics` reports; `consumers`: the Pub/Sub
/// consumers whose state `/health/ready` and `/metrics` report; `objects`: where claim-check
/// objects are read (none: `/jobs/{id}/objects/…` answers 501).
pub fn router(
    pf: Postfach,
    keys: super::auth::Keys,
    alarms: Arc<crate::alarms::Alarms>,
    consumers: crate::ingress::Consumers,
    objects: Option<Arc<dyn crate::objects::ObjectStore>>,
    backups: Arc<super::backups::Backups>,
) -> Router {
    let state = AppState {
        pf,
        keys,
        alarms,
        consumers,
        objects,
        backups,
    };
    let (api, _) = api().split_for_parts();
    super::auth::face(Router::new().merge(api), state.keys.clone())
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

fn problem(status: StatusCode, message: String) -> Response {
    (status, Json(json!({"error": message}))).into_response()
}

enum ApiError {
    Engine(Error),
    BadRequest(String),
    TooLarge(String),
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError::Engine(e)
    }
}

impl From<crate::limits::OutOfRange> for ApiError {
    fn from(e: crate::limits::OutOfRange) -> Self {
        ApiError::BadRequest(e.to_string())
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        ApiError::Engine(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let e = match self {
            ApiError::BadRequest(m) => return problem(StatusCode::BAD_REQUEST, m),
            ApiError::TooLarge(m) => return problem(StatusCode::PAYLOAD_TOO_LARGE, m),
            ApiError::Engine(e) => e,
        };
        let mut text = e.to_string();
        if let Error::Engine(EngineError::Parse(p)) = &e {
            let missing = p.missing_keys();
            if !missing.is_empty() {
                let pairs: Vec<String> = missing
                    .iter()
                    .map(|m| format!("\"{m}\": \"VARIABLE\""))
                    .collect();
                text.push_str(&format!(
                    " (give the key in the request: \"correlation_keys\": {{{}}})",
                    pairs.join(", ")
                ));
            }
        }
        let mut doc = json!({"error": text});
        if let Error::Engine(EngineError::RepairRefused {
            message,
            key,
            existing_instance,
            existing_element,
        }) = &e
        {
            // the subscription the repair would duplicate, for a page to link to
            doc["conflict"] = json!({"message": message, "key": key,
                "instance": existing_instance.to_string(), "element": existing_element});
        }
        if let Error::Engine(EngineError::OtherPartition { owner, version, .. }) = &e {
            // the owner, for a gateway to send it on
            doc["partition"] = json!(owner);
            doc["map_version"] = json!(version);
        }
        if let Error::Engine(EngineError::SlotMoving { slot, to, .. }) = &e {
            doc["moving"] = json!({"slot": slot, "to": to});
        }
        if e.is_rejection() {
            // refused by the rules (exit 3 on the command line), not a fault
            doc["rejected"] = json!(true);
        }
        let mut response = (status_of(&e), Json(doc)).into_response();
        if matches!(&e, Error::Engine(EngineError::SlotMoving { .. })) {
            // a move takes a moment: the caller retries, a gateway for it
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}

/// The status of an error, by kind. Exhaustive, so a new kind of error gets a
/// status deliberately: 400 bad input, 404 unknown, 409 refused in the state the
/// engine is in, 503 not serving now, 500 a fault.
pub(crate) fn status_of(e: &Error) -> StatusCode {
    use crate::store::StoreError as S;
    use EngineError as E;
    let store = |s: &S| match s {
        S::Closed | S::ReadOnly | S::Locked { .. } => StatusCode::SERVICE_UNAVAILABLE,
        S::Open { .. }
        | S::Redb(_)
        | S::Codec(_)
        | S::Aborted(_)
        | S::Io(_)
        | S::LogDamaged { .. }
        | S::NewerFormat { .. }
        | S::OtherPartition { .. }
        | S::UnreadableDefinition { .. }
        | S::Damaged { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    match e {
        Error::Rejected { .. } => StatusCode::CONFLICT,
        Error::OutOfRange(_) => StatusCode::BAD_REQUEST,
        Error::Task(_) => StatusCode::INTERNAL_SERVER_ERROR,
        Error::Store(s) => store(s),
        Error::Engine(engine) => match engine {
            E::Store(s) => store(s),
            E::Parse(_) | E::KeyNeeded { .. } | E::MixedKeys { .. } => StatusCode::BAD_REQUEST,
            // sent to a partition that does not own it: the gateway routes
            E::OtherPartition { .. } => StatusCode::MISDIRECTED_REQUEST,
            // its slot is moving to another partition: nothing written, retry
            E::SlotMoving { .. } => StatusCode::SERVICE_UNAVAILABLE,
            E::UnknownProcess(_)
            | E::UnknownInstance(_)
            | E::UnknownElement { .. }
            | E::UnknownJob(_)
            | E::UnknownMessageId(_)
            | E::UnknownToken { .. }
            | E::UnknownTask(_)
            | E::UnknownDecision(_)
            | E::UnknownBatch(_) => StatusCode::NOT_FOUND,
            // the variables given leave the decision without a value
            E::DecisionFailed { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            E::NoStartEvent(_)
            | E::JobState { .. }
            | E::StaleLease(_)
            | E::AmbiguousMessageId { .. }
            | E::NotParked { .. }
            | E::RepairRefused { .. }
            | E::NoSingleScope { .. }
            | E::InstanceEnded(_)
            | E::NotTriggerable { .. }
            | E::AdHocRefused { .. }
            | E::MigrationRefused { .. }
            | E::BatchRefused { .. }
            | E::NoIncident(_)
            | E::NoSingleToken { .. }
            | E::InstanceRunning(_)
            | E::TaskRefused { .. } => StatusCode::CONFLICT,
        },
    }
}

type ApiResult = Result<Json<Value>, ApiError>;

/// Unwraps a JSON body or answers 400 naming what is wrong.
/// The refusal of a starter limited to processes for `what` (403), asked
/// by start, publish, correlate and signal before they act.
fn outside_processes(
    s: &AppState,
    caller: Option<&super::auth::Caller>,
    what: super::auth::Sent<'_>,
) -> Result<Option<Response>, ApiError> {
    use super::auth::Sent;
    if caller.and_then(|c| c.started_processes()).is_none() {
        return Ok(None);
    }
    let reader = s.pf.reader()?;
    let mut failed = None;
    let refusal = super::auth::refuse_sent(caller, what, |process| {
        let caught = reader.any_element(process, |k| match what {
            Sent::Message(m) => k.catches_message() == Some(m),
            Sent::Signal(n) => k.catches_signal() == Some(n),
            Sent::Start(_) => false,
        });
        caught.unwrap_or_else(|e| {
            failed = Some(e);
            false
        })
    });
    match failed {
        Some(e) => Err(ApiError::from(Error::from(e))),
        None => Ok(refusal),
    }
}

fn body<T>(b: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    b.map(|Json(v)| v).map_err(|r| {
        let text = format!("request body: {}", r.body_text());
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge(text)
        } else {
            ApiError::BadRequest(text)
        }
    })
}

#[utoipa::path(get, path = "/health/live", responses((status = 200, description = "The process serves HTTP (nothing else is asked)", body = serde_json::Value)))]
async fn live() -> Json<serde_json::Value> {
    Json(json!({"status": "live"}))
}

#[utoipa::path(get, path = "/health/ready", responses((status = 200, description = "Database open and serving", body = serde_json::Value)))]
async fn ready(State(s): State<AppState>) -> Response {
    if let Err(e) = s.pf.reader() {
        return problem(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
    }
    let waiting = s.consumers.not_ready();
    if !waiting.is_empty() {
        return problem(StatusCode::SERVICE_UNAVAILABLE, waiting.join("; "));
    }
    Json(json!({"status": "ready", "consumers": s.consumers.all().len()})).into_response()
}

#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus metrics", body = serde_json::Value)))]
async fn metrics(State(s): State<AppState>) -> Result<Response, ApiError> {
    let text = super::metrics::render(
        &s.pf.reader()?,
        &s.backups,
        &s.alarms,
        s.pf.commit_stats(),
        s.pf.recovery(),
        &s.consumers,
    )?;
    Ok(([(header::CONTENT_TYPE, super::metrics::CONTENT_TYPE)], text).into_response())
}

#[utoipa::path(get, path = "/partition", responses((status = 200, description = "This partition of its cluster (0 of 1 unpartitioned), the build's version, and what it holds: waiting tokens and the oldest wait, buffered and parked messages, due jobs, incidents, open tasks and the engine's counters (what `cluster status` shows)", body = serde_json::Value)))]
async fn partition(State(s): State<AppState>) -> ApiResult {
    let r = s.pf.reader()?;
    let p = s.pf.partition();
    let waiting = r.waiting_summary()?;
    let oldest = waiting.iter().map(|(_, _, since)| *since).min();
    let (jobs_due, incidents) = r.job_counts()?;
    let slots = r.slot_state()?;
    Ok(Json(json!({
        "partition": p.index(),
        "partitions": p.count(),
        "slots_owned": slots.as_ref().map(|s| s.map.count_owned(s.me)),
        "map_version": slots.as_ref().map_or(0, |s| s.map.version()),
        "version": env!("CARGO_PKG_VERSION"),
        "tokens_waiting": waiting.iter().map(|(_, n, _)| n).sum::<u64>(),
        "oldest_wait_ms": oldest.map(|o| r.now().saturating_sub(o)),
        "buffered": r.buffered_count()?,
        "parked": r.parked_by_reason()?.values().sum::<u64>(),
        "jobs_due": jobs_due,
        "incidents": incidents,
        "tasks_open": r.open_tasks_summary()?.iter().map(|(_, n, _)| n).sum::<u64>(),
        "counters": r.counters()?,
    })))
}

#[utoipa::path(post, path = "/cleanup", responses((status = 200, description = "Retention: remove completed instances and settled messages past the retention period, in small batches; answers how many of each", body = serde_json::Value)))]
async fn cleanup(State(s): State<AppState>) -> ApiResult {
    Ok(Json(crate::contract::cleanup(&s.pf).await?))
}

#[utoipa::path(post, path = "/work", responses((status = 200, description = "One pass of the server's job executor until nothing is due; answers what it ran and how many task jobs wait for a worker", body = serde_json::Value)))]
async fn work(State(s): State<AppState>) -> ApiResult {
    Ok(Json(crate::contract::work_pass(&s.pf).await?))
}

/// The body of `backup` (optional).
#[derive(serde::Serialize, serde::Deserialize, Debug, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackupBody {
    /// The backup set's id (1 … 64 letters, digits, `-`, `_`): the backup
    /// is written as `ID-pI/`, `I` the partition — what a gateway gives
    /// every partition so that one id names the cluster's backup. Default:
    /// the instant, `YYYYMMDDTHHMMSSmmmZ`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

#[utoipa::path(post, path = "/backups", request_body(content = Option<BackupBody>, description = "Optional: the backup set's id"), responses((status = 200, description = "A backup of the database at one batch of the log, written to `[backup] to` as DIR/SET-pI/ with its manifest (partition, batch, checksums): `{\"backups\": [manifest]}`, one per partition under one set id through a gateway; writers do not wait for the copy", body = serde_json::Value), (status = 400, description = "The set id cannot name a directory"), (status = 409, description = "This set already has a backup of this partition"), (status = 501, description = "No `[backup] to` is configured: the server writes nowhere a caller names")))]
async fn backup(
    State(s): State<AppState>,
    b: Option<Json<BackupBody>>,
) -> Result<Response, ApiError> {
    let set = b.and_then(|Json(b)| b.id);
    let Some(taken) = s.backups.take(&s.pf, set).await else {
        return Ok(problem(
            StatusCode::NOT_IMPLEMENTED,
            "this server takes no backups: give it `[backup] to = \"DIR\"` in postfach.toml".into(),
        ));
    };
    match taken {
        Ok((m, path)) => {
            let mut doc = serde_json::to_value(m).unwrap_or_default();
            doc["path"] = json!(path);
            Ok(Json(json!({ "backups": [doc] })).into_response())
        }
        Err(e @ crate::backup::BackupError::BadId(_)) => {
            Ok(problem(StatusCode::BAD_REQUEST, e.to_string()))
        }
        Err(e @ crate::backup::BackupError::Taken(_)) => Ok(problem(
            StatusCode::CONFLICT,
            format!("{e}: give another id"),
        )),
        Err(e) => Ok(problem(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    }
}

/// The query of `audit`.
#[derive(serde::Serialize, Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only entries at or after this instant (RFC 3339).
    pub since: Option<String>,
    /// Only this principal's entries.
    pub who: Option<String>,
    /// At most this many, newest first (1 … 1000, default 1000).
    pub limit: Option<usize>,
}

impl AuditQuery {
    /// The filter it asks for; what is wrong names the field.
    pub fn filter(self) -> Result<crate::audit::AuditFilter, String> {
        if let Some(n) = self.limit
            && !(1..=crate::audit::AUDIT_PAGE).contains(&n)
        {
            return Err(format!(
                "limit: {n} is not 1 to {}",
                crate::audit::AUDIT_PAGE
            ));
        }
        Ok(crate::audit::AuditFilter {
            since: instant("since", self.since)?,
            who: self.who,
            limit: self.limit,
        })
    }
}

#[utoipa::path(get, path = "/audit", params(AuditQuery), responses((status = 200, description = "The audit trail, newest first: who deployed, repaired, requeued, discarded, retried, cleaned up or acted on a user task, when, on what (`{\"audit\": [{seq, at, who, operation, target}]}`)", body = serde_json::Value)))]
async fn audit(State(s): State<AppState>, Query(q): Query<AuditQuery>) -> ApiResult {
    let filter = q.filter().map_err(ApiError::BadRequest)?;
    Ok(Json(documents::audit(&s.pf.reader()?.audit(&filter)?)))
}

/// The server's own operations: health, metrics, this partition,
/// retention, a pass of the executor, a backup and the audit trail.
const OPERATIONS: &[Operation] = &[
    op("live", Method::GET, "/health/live", Local, Open),
    op("ready", Method::GET, "/health/ready", Local, Open),
    op("metrics", Method::GET, "/metrics", Metrics, Read),
    op("partition", Method::GET, "/partition", Same, Read),
    op("cleanup", Method::POST, "/cleanup", Summed, Operate),
    op("work", Method::POST, "/work", Summed, Operate),
    op("backup", Method::POST, "/backups", BackupSet, Admin),
    op("audit", Method::GET, "/audit", Summed, Read),
];

/// The catalogue's families (`super::catalogue`), each beside its handlers.
pub(crate) fn families() -> [&'static [Operation]; 7] {
    [
        OPERATIONS,
        batches::OPERATIONS,
        slots::OPERATIONS,
        instances::OPERATIONS,
        messages::OPERATIONS,
        jobs::OPERATIONS,
        processes::OPERATIONS,
    ]
}

/// Every operation's route with its OpenAPI documentation, family by family.
fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(<ApiDoc as utoipa::OpenApi>::openapi())
        .routes(routes!(live))
        .routes(routes!(ready))
        .routes(routes!(metrics))
        .routes(routes!(partition))
        .routes(routes!(cleanup))
        .routes(routes!(work))
        .routes(routes!(backup))
        .routes(routes!(audit))
        .merge(instances::routes())
        .merge(messages::routes())
        .merge(jobs::routes())
        .merge(processes::routes())
        .merge(batches::routes())
        .merge(slots::routes())
}

/// `routes` with a body limit of `limit` bytes (a model's size) instead of
/// the API's.
fn with_limit(
    served: utoipa_axum::router::UtoipaMethodRouter<AppState>,
    limit: usize,
) -> utoipa_axum::router::UtoipaMethodRouter<AppState> {
    let (schemas, paths, method_router) = served;
    (
        schemas,
        paths,
        method_router.layer(DefaultBodyLimit::max(limit)),
    )
}

/// The OpenAPI document of the API: the catalogue's routes as served.
pub fn api_doc() -> utoipa::openapi::OpenApi {
    api().split_for_parts().1
}

/// The OpenAPI document's title and description; its paths come from the
/// routes ([`api_doc`]).
#[derive(utoipa::OpenApi)]
#[openapi(info(
    title = "postfach",
    description = "Admin API of postfach run: instances, messages, jobs, repair, metrics."
))]
pub struct ApiDoc;

pub(super) async fn openapi() -> Response {
    match api_doc().to_json() {
        Ok(doc) => ([(header::CONTENT_TYPE, "application/json")], doc).into_response(),
        Err(e) => problem(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// The typed requests of the catalogue's operations — bodies and queries —
/// as a client sends them (the command line with `--server` builds these):
/// one type per request for the handler that reads it and the client that
/// writes it.
pub mod requests {
    pub use super::batches::BatchBody;
    pub use super::instances::{
        ActivateBody, ConditionsBody, DeployBody, InstancesQuery, MigrationBody, StartBody,
        TokenBody, TriggerBody, VariablesBody,
    };
    pub use super::jobs::{
        AcquireBody, BpmnErrorBody, CompleteBody, ExtendBody, FailBody, JobsQuery,
    };
    pub use super::messages::{DiscardBody, MessageBody, MessagesQuery, SignalBody};
    pub use super::processes::{EvaluateBody, StatisticsQuery, TaskBody, TasksQuery};
    pub use super::slots::{MoveBody, SlotStepBody};
    pub use super::{AuditQuery, BackupBody};
}
