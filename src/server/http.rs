//! The HTTP admin API of `postfach run`: the command line's operations as JSON
//! resources, health checks and Prometheus metrics.
//!
//! Invariants: a thin edge over the library API (no engine logic here); errors map
//! to statuses by kind (400 bad input, 401 missing token, 404 unknown, 409 business
//! rejection or refused repair, 500 storage); bodies are size-limited; binding to a
//! non-loopback address requires a bearer token.

use crate::clock::rfc3339;
use crate::ops::{InstanceFilter, MessageFilter};
use crate::{EngineError, Error, Postfach, Publish, Reason, Vars};
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Largest request body accepted; larger ones get 413 while they are read.
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// Largest body of a request that carries a BPMN model (`/deployments`, `/cli`):
/// a model at the parser's cap, escaped as a JSON string.
pub const MAX_MODEL_BODY: usize = 2 * crate::model::MAX_SIZE + 64 * 1024;

#[derive(Clone)]
struct AppState {
    pf: Postfach,
    token: Option<Arc<String>>,
    alarms: Arc<crate::alarms::Alarms>,
    consumers: crate::ingress::Consumers,
    remote_cli: Option<super::RemoteCli>,
    objects: Option<Arc<dyn crate::objects::ObjectStore>>,
}

/// The API as an axum router. `token`: required bearer token, if any; `alarms`:
/// configured alarms whose state `/metrics` reports; `consumers`: the Pub/Sub
/// consumers whose state `/health/ready` and `/metrics` report; `remote_cli`:
/// what `/cli` runs (none: `/cli` answers 501); `objects`: where claim-check
/// objects are read (none: `/jobs/{id}/objects/…` answers 501).
pub fn router(
    pf: Postfach,
    token: Option<String>,
    alarms: Arc<crate::alarms::Alarms>,
    consumers: crate::ingress::Consumers,
    remote_cli: Option<super::RemoteCli>,
    objects: Option<Arc<dyn crate::objects::ObjectStore>>,
) -> Router {
    let state = AppState {
        pf,
        token: token.map(Arc::new),
        alarms,
        consumers,
        remote_cli,
        objects,
    };
    Router::new()
        .route("/", get(super::console::index))
        .route("/console/{*file}", get(super::console::asset))
        .route("/health/live", get(live))
        .route("/health/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .route(
            "/deployments",
            post(deploy).layer(DefaultBodyLimit::max(MAX_MODEL_BODY)),
        )
        .route("/instances", post(start).get(instances))
        .route("/instances/{id}", get(instance))
        .route("/instances/{id}/tokens", post(add_token))
        .route("/instances/{id}/tokens/{token}/move", post(move_token))
        .route("/instances/{id}/tokens/{token}/cancel", post(cancel_token))
        .route("/instances/{id}/tokens/{token}/trigger", post(trigger))
        .route("/messages", post(publish).get(messages))
        .route("/messages/correlate", post(correlate))
        .route("/messages/{id}/requeue", post(requeue))
        .route("/messages/{id}/discard", post(discard))
        .route("/signals", post(signal))
        .route("/jobs", get(jobs))
        .route("/jobs/acquire", post(acquire))
        .route("/jobs/{id}/complete", post(complete))
        .route("/jobs/{id}/extend", post(extend))
        .route("/jobs/{id}/fail", post(fail))
        .route("/jobs/{id}/bpmn-error", post(bpmn_error))
        .route("/jobs/{id}/retry", post(retry))
        .route("/jobs/{id}/objects/{variable}", get(job_object))
        .route("/processes", get(processes))
        .route("/processes/{id}/xml", get(process_xml))
        .route("/processes/{id}/statistics", get(statistics))
        .route("/alarms", get(alarm_states))
        .route("/tasks", get(tasks))
        .route("/tasks/{id}/{action}", post(task_action))
        .route(
            "/cli",
            post(cli).layer(DefaultBodyLimit::max(MAX_MODEL_BODY)),
        )
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

async fn auth(State(s): State<AppState>, req: Request, next: Next) -> Response {
    if let Some(token) = &s.token {
        let ok = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| t.as_bytes() == token.as_bytes());
        let open =
            req.uri().path() == "/health/live" || super::console::is_console(req.uri().path());
        if !ok && !open {
            return problem(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required: Authorization: Bearer TOKEN".into(),
            );
        }
    }
    next.run(req).await
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
        if let Error::Engine(EngineError::RepairRefused {
            message,
            key,
            existing_instance,
            existing_element,
        }) = &e
        {
            // the subscription the repair would duplicate, for a page to link to
            let conflict = json!({"message": message, "key": key,
                "instance": existing_instance.to_string(), "element": existing_element});
            return (
                status_of(&e),
                Json(json!({"error": text, "conflict": conflict})),
            )
                .into_response();
        }
        problem(status_of(&e), text)
    }
}

/// The status of an error, by kind. Exhaustive, so a new kind of error gets a
/// status deliberately: 400 bad input, 404 unknown, 409 refused in the state the
/// engine is in, 503 not serving now, 500 a fault.
fn status_of(e: &Error) -> StatusCode {
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
            E::UnknownProcess(_)
            | E::UnknownInstance(_)
            | E::UnknownElement { .. }
            | E::UnknownJob(_)
            | E::UnknownMessageId(_)
            | E::UnknownToken { .. }
            | E::UnknownTask(_) => StatusCode::NOT_FOUND,
            E::NoStartEvent(_)
            | E::JobState { .. }
            | E::StaleLease(_)
            | E::AmbiguousMessageId { .. }
            | E::NotParked { .. }
            | E::RepairRefused { .. }
            | E::NoSingleScope { .. }
            | E::InstanceEnded(_)
            | E::NotTriggerable { .. }
            | E::TaskRefused { .. } => StatusCode::CONFLICT,
        },
    }
}

type ApiResult = Result<Json<Value>, ApiError>;

/// Unwraps a JSON body or answers 400 naming what is wrong.
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

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct DeployBody {
    file: Option<String>,
    xml: String,
    #[serde(default)]
    correlation_keys: BTreeMap<String, String>,
    /// Refuse a model with warnings (listeners, Java classes, mappings, skipped pools).
    #[serde(default)]
    strict: bool,
}

#[utoipa::path(post, path = "/deployments", request_body = DeployBody, responses((status = 200, description = "Deploy a BPMN model (new version unless unchanged)", body = serde_json::Value)))]
async fn deploy(
    State(s): State<AppState>,
    b: Result<Json<DeployBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    let d =
        s.pf.deploy_checked(
            b.file.as_deref().unwrap_or("api.bpmn"),
            &b.xml,
            b.correlation_keys,
            b.strict,
        )
        .await?;
    Ok(Json(crate::contract::deployment_json(&d)).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct StartBody {
    process: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    variables: Vars,
    business_key: Option<String>,
}

#[utoipa::path(post, path = "/instances", request_body = StartBody, responses((status = 201, description = "Start an instance; answers with the instance id", body = serde_json::Value)))]
async fn start(
    State(s): State<AppState>,
    b: Result<Json<StartBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    let id = s.pf.start(&b.process, b.variables, b.business_key).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"instance": id.to_string()})),
    )
        .into_response())
}

#[derive(Deserialize, Default, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
struct InstancesQuery {
    /// Only instances with a token at this element.
    waiting_at: Option<String>,
    /// `active`, `incident`, `completed` or `cancelled`.
    state: Option<String>,
    /// Only instances of this process.
    process: Option<String>,
    /// Only instances that wait for, expect or caught a message with this correlation key.
    key: Option<String>,
    /// With `value`: only instances whose variable of this name has that value.
    variable: Option<String>,
    /// The value `variable` must have (strings as is, others as JSON text).
    value: Option<String>,
    /// RFC 3339: started at or after.
    started_from: Option<String>,
    /// RFC 3339: started before.
    started_before: Option<String>,
    /// Only instances with (`true`) or without (`false`) an incident.
    has_incident: Option<bool>,
    /// The `next` cursor of the previous page.
    after: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    limit: Option<usize>,
    /// `newest` (default) or `oldest` first.
    order: Option<String>,
}

/// The most records one page of a list returns.
const MAX_PAGE: usize = 1000;

/// A page size from a query (`default` when absent), or 400 naming `limit`.
fn page_limit(limit: Option<usize>, default: usize) -> Result<usize, ApiError> {
    let limit = limit.unwrap_or(default);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit {limit}: expected 1 to {MAX_PAGE}"
        )));
    }
    Ok(limit)
}

/// The `after` cursor of a list paged by id, or 400 naming `after`.
fn id_cursor(after: Option<String>) -> Result<Option<u64>, ApiError> {
    after
        .map(|a| {
            a.parse::<u64>().map_err(|_| {
                ApiError::BadRequest(format!("after {a:?}: expected the `next` cursor of a page"))
            })
        })
        .transpose()
}

#[utoipa::path(get, path = "/instances", params(InstancesQuery), responses((status = 200, description = "One page of the instances that pass every filter given, newest first unless order=oldest; `next` is the cursor (`after`) of the following page, absent on the last; `waiting` lists the page's tokens at `waiting_at` with their age", body = serde_json::Value)))]
async fn instances(State(s): State<AppState>, Query(q): Query<InstancesQuery>) -> ApiResult {
    let variable = match (q.variable, q.value) {
        (Some(n), Some(v)) => Some((n, v)),
        (None, None) => None,
        _ => {
            return Err(ApiError::BadRequest(
                "variable and value go together: ?variable=NAME&value=VALUE".into(),
            ));
        }
    };
    if let Some(st) = &q.state
        && !["active", "incident", "completed", "cancelled"].contains(&st.as_str())
    {
        return Err(ApiError::BadRequest(format!(
            "state {st:?}: expected active, incident, completed or cancelled"
        )));
    }
    let newest_first = match q.order.as_deref() {
        None | Some("newest") => true,
        Some("oldest") => false,
        Some(o) => {
            return Err(ApiError::BadRequest(format!(
                "order {o:?}: expected newest or oldest"
            )));
        }
    };
    let limit = page_limit(q.limit, 100)?;
    let after = id_cursor(q.after)?;
    let filter = InstanceFilter {
        started_from: instant("started_from", q.started_from)?,
        started_before: instant("started_before", q.started_before)?,
        waiting_at: q.waiting_at.clone(),
        state: q.state,
        process: q.process,
        key: q.key,
        variable,
        has_incident: q.has_incident,
    };
    let r = s.pf.reader()?;
    let page = r.instance_page(
        &filter,
        crate::ops::InstancePaging {
            after,
            limit,
            newest_first,
        },
    )?;
    let waiting = match &q.waiting_at {
        Some(el) => {
            let listed: std::collections::HashSet<&str> =
                page.instances.iter().map(|i| i.instance.as_str()).collect();
            let rows: Vec<_> = r
                .waiting_at(el)?
                .into_iter()
                .filter(|w| listed.contains(w.instance.as_str()))
                .collect();
            serde_json::to_value(rows).unwrap_or(Value::Null)
        }
        None => Value::Null,
    };
    Ok(Json(json!({
        "instances": page.instances,
        "next": page.next,
        "examined": page.examined,
        "waiting": waiting,
    })))
}

#[utoipa::path(get, path = "/instances/{id}", params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "One instance with tokens, variables and history, the subscriptions its tokens hold open, its jobs, and the messages correlated into it or parked naming it", body = serde_json::Value)))]
async fn instance(State(s): State<AppState>, Path(id): Path<u64>) -> ApiResult {
    let v =
        s.pf.reader()?
            .instance_detail(id)?
            .ok_or_else(|| Error::from(EngineError::UnknownInstance(id)))?;
    Ok(Json(serde_json::to_value(v).unwrap_or(Value::Null)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct TokenBody {
    element: String,
    #[serde(default)]
    force: bool,
}

#[utoipa::path(post, path = "/instances/{id}/tokens", request_body = TokenBody, params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "Repair: add a token before an element; 409 if it would duplicate a subscription", body = serde_json::Value)))]
async fn add_token(
    State(s): State<AppState>,
    Path(id): Path<u64>,
    b: Result<Json<TokenBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    let r = s.pf.add_token(id, &b.element, b.force).await?;
    Ok(Json(crate::contract::repair_json(id, &r)).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    name: String,
    key: String,
    id: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    variables: Vars,
    /// TTL like "24h"; "0s" disables buffering.
    ttl: Option<String>,
}

impl MessageBody {
    fn into_publish(self) -> Result<Publish, ApiError> {
        let ttl = match self
            .ttl
            .as_deref()
            .map(|t| crate::limits::MESSAGE_TTL.parse(t))
        {
            Some(Err(e)) => return Err(ApiError::BadRequest(e)),
            Some(Ok(t)) => Some(t),
            None => None,
        };
        Ok(Publish {
            name: self.name,
            key: self.key,
            message_id: self.id,
            variables: self.variables,
            ttl,
            attributes: Vec::new(),
        })
    }
}

#[utoipa::path(post, path = "/messages", request_body = MessageBody, responses((status = 200, description = "Publish (buffered path): correlated, buffered, duplicate or parked", body = serde_json::Value)))]
async fn publish(
    State(s): State<AppState>,
    b: Result<Json<MessageBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let p = body(b)?.into_publish()?;
    let d = s.pf.publish(p).await?;
    Ok(Json(crate::contract::delivery_json(&d)).into_response())
}

#[utoipa::path(post, path = "/messages/correlate", request_body = MessageBody, responses((status = 200, description = "Correlate synchronously; 409 with the reason when rejected", body = serde_json::Value)))]
async fn correlate(
    State(s): State<AppState>,
    b: Result<Json<MessageBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let p = body(b)?.into_publish()?;
    let id = p.message_id.clone().unwrap_or_default();
    match s.pf.correlate(p).await {
        Ok(d) => Ok(Json(crate::contract::delivery_json(&d)).into_response()),
        Err(Error::Rejected { reason, candidates, .. }) => Ok((
            StatusCode::CONFLICT,
            Json(json!({
                "outcome": "rejected", "message_id": id, "instance": null, "element": null,
                "reason": reason, "candidates": candidates.iter().map(u64::to_string).collect::<Vec<_>>(), "expires_at": null,
            })),
        )
            .into_response()),
        Err(e) => Err(e.into()),
    }
}

#[derive(Deserialize, Default, utoipa::IntoParams)]
struct MessagesQuery {
    #[serde(default)]
    buffered: bool,
    #[serde(default)]
    parked: bool,
    reason: Option<String>,
    /// The `next` cursor of the previous page.
    after: Option<String>,
    /// Page size, 1 to 1000 (default 200).
    limit: Option<usize>,
}

#[utoipa::path(get, path = "/messages", params(MessagesQuery), responses((status = 200, description = "One page of buffered and parked messages (both unless one is asked for): parked ones by sequence, then buffered ones oldest first, each with its expiry, reason, candidates, attributes and raw payload; `next` is the cursor (`after`) of the following page", body = serde_json::Value)))]
async fn messages(
    State(s): State<AppState>,
    Query(q): Query<MessagesQuery>,
) -> Result<Response, ApiError> {
    let reason = match q.reason.as_deref().map(Reason::parse_or_list) {
        Some(Err(e)) => return Err(ApiError::BadRequest(e)),
        Some(Ok(r)) => Some(r),
        None => None,
    };
    let limit = page_limit(q.limit, 200)?;
    let filter = MessageFilter {
        buffered: q.buffered,
        parked: q.parked,
        reason,
    };
    let page = match s
        .pf
        .reader()?
        .message_page(&filter, q.after.as_deref(), limit)
    {
        Ok(page) => page,
        Err(crate::ops::MessageCursorError::Cursor(c)) => {
            return Err(ApiError::BadRequest(format!(
                "after {c:?}: expected the `next` cursor of a page of messages"
            )));
        }
        Err(crate::ops::MessageCursorError::Store(e)) => return Err(e.into()),
    };
    Ok(Json(json!({"messages": page.messages, "next": page.next})).into_response())
}

#[utoipa::path(post, path = "/messages/{id}/requeue", params(("id" = String, Path, description = "message id (or NAME/ID)")), responses((status = 200, description = "Evaluate a parked message again", body = serde_json::Value)))]
async fn requeue(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let d = s.pf.requeue(&id).await?;
    Ok(Json(crate::contract::delivery_json(&d)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct DiscardBody {
    why: String,
    /// Who discards it (recorded).
    by: String,
}

#[utoipa::path(post, path = "/messages/{id}/discard", request_body = DiscardBody, params(("id" = String, Path, description = "message id (or NAME/ID)")), responses((status = 200, description = "End a parked message; who and why are recorded", body = serde_json::Value)))]
async fn discard(
    State(s): State<AppState>,
    Path(id): Path<String>,
    b: Result<Json<DiscardBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    s.pf.discard(&id, &b.by, &b.why).await?;
    Ok(
        Json(json!({"message_id": id, "state": "discarded", "why": b.why, "by": b.by}))
            .into_response(),
    )
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct SignalBody {
    name: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    variables: Vars,
}

#[utoipa::path(post, path = "/signals", request_body = SignalBody, responses((status = 200, description = "Broadcast a signal; returns how many subscriptions it reached", body = serde_json::Value)))]
async fn signal(
    State(s): State<AppState>,
    b: Result<Json<SignalBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    let n = s.pf.signal(&b.name, b.variables).await?;
    Ok(Json(json!({"signal": b.name, "reached": n})).into_response())
}

#[derive(Deserialize, Default, utoipa::IntoParams)]
struct JobsQuery {
    /// Only jobs in an incident (out of attempts).
    #[serde(default)]
    incidents: bool,
    /// The `next` cursor of the previous page.
    after: Option<String>,
    /// Page size, 1 to 1000 (default 500).
    limit: Option<usize>,
}

#[utoipa::path(get, path = "/jobs", params(JobsQuery), responses((status = 200, description = "One page of jobs, or only incidents, by id; `next` is the cursor (`after`) of the following page", body = serde_json::Value)))]
async fn jobs(State(s): State<AppState>, Query(q): Query<JobsQuery>) -> ApiResult {
    let limit = page_limit(q.limit, 500)?;
    let after = id_cursor(q.after)?;
    let (jobs, next) = s.pf.reader()?.job_page(q.incidents, after, limit)?;
    Ok(Json(json!({"jobs": jobs, "next": next})))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
struct StatisticsQuery {
    /// The definition version (default: the latest).
    version: Option<u32>,
}

#[utoipa::path(get, path = "/processes", responses((status = 200, description = "Every deployed process with its versions", body = serde_json::Value)))]
async fn processes(State(s): State<AppState>) -> ApiResult {
    Ok(Json(json!({"processes": s.pf.reader()?.deployed()?})))
}

#[utoipa::path(get, path = "/processes/{id}/xml", params(("id" = String, Path, description = "process id"), StatisticsQuery), responses((status = 200, description = "The BPMN XML the version was deployed from (application/xml)"), (status = 404, description = "No such process or version, or deployed before sources were kept")))]
async fn process_xml(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<StatisticsQuery>,
) -> Result<Response, ApiError> {
    match s.pf.reader()?.source(&id, q.version)? {
        Some(xml) => Ok((
            [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
            xml,
        )
            .into_response()),
        None => Ok(problem(
            StatusCode::NOT_FOUND,
            format!(
                "no BPMN source of process '{id}'{}: not deployed, or deployed before postfach kept sources (deploy it again)",
                q.version
                    .map(|v| format!(" version {v}"))
                    .unwrap_or_default()
            ),
        )),
    }
}

#[utoipa::path(get, path = "/alarms", responses((status = 200, description = "Every configured alarm and whether it fires", body = serde_json::Value)))]
async fn alarm_states(State(s): State<AppState>) -> ApiResult {
    let list: Vec<Value> = s
        .alarms
        .active()
        .into_iter()
        .map(|(name, active)| json!({"name": name, "active": active}))
        .collect();
    Ok(Json(json!({"alarms": list})))
}

#[utoipa::path(get, path = "/processes/{id}/statistics", params(("id" = String, Path, description = "process id"), StatisticsQuery), responses((status = 200, description = "Per element of the definition version: tokens waiting and the oldest wait, ready jobs, incidents, buffered and parked messages of the element's message; from gauges and index heads, not scans", body = serde_json::Value), (status = 404, description = "No such process or version")))]
async fn statistics(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<StatisticsQuery>,
) -> Result<Response, ApiError> {
    match s.pf.reader()?.statistics(&id, q.version)? {
        Some(st) => Ok(Json(st).into_response()),
        None => Ok(problem(
            StatusCode::NOT_FOUND,
            match q.version {
                Some(v) => format!("process '{id}' has no deployed version {v}"),
                None => format!("process '{id}' is not deployed"),
            },
        )),
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
struct TasksQuery {
    assignee: Option<String>,
    candidate_user: Option<String>,
    candidate_group: Option<String>,
    process: Option<String>,
    element: Option<String>,
    /// RFC 3339.
    created_before: Option<String>,
    /// RFC 3339.
    due_before: Option<String>,
}

/// An RFC 3339 query value as milliseconds, or 400 naming the field.
fn instant(field: &str, v: Option<String>) -> Result<Option<u64>, ApiError> {
    v.map(|s| {
        crate::model::iso::instant(&s).map_err(|e| ApiError::BadRequest(format!("{field}: {e}")))
    })
    .transpose()
}

#[utoipa::path(get, path = "/tasks", params(TasksQuery), responses((status = 200, description = "Open user tasks; every filter given must hold", body = serde_json::Value)))]
async fn tasks(State(s): State<AppState>, Query(q): Query<TasksQuery>) -> ApiResult {
    let filter = crate::ops::TaskFilter {
        created_before: instant("created_before", q.created_before)?,
        due_before: instant("due_before", q.due_before)?,
        assignee: q.assignee,
        candidate_user: q.candidate_user,
        candidate_group: q.candidate_group,
        process: q.process,
        element: q.element,
    };
    Ok(Json(json!({"tasks": s.pf.reader()?.tasks(&filter)?})))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct TaskBody {
    /// Who acts (authorization is not modelled: the caller says who it is).
    user: String,
    /// `assign`: the new holder.
    to: Option<String>,
    /// `complete`: variables merged into the instance.
    #[serde(default)]
    #[schema(value_type = Object)]
    variables: Vars,
}

#[utoipa::path(post, path = "/tasks/{id}/{action}", request_body = TaskBody, params(("id" = u64, Path, description = "task id"), ("action" = String, Path, description = "claim, unclaim, assign or complete")), responses((status = 200, description = "Act on a user task; 409 when someone else holds it", body = serde_json::Value)))]
async fn task_action(
    State(s): State<AppState>,
    Path((id, action)): Path<(u64, String)>,
    b: Result<Json<TaskBody>, JsonRejection>,
) -> ApiResult {
    let b = body(b)?;
    match action.as_str() {
        "claim" => s.pf.claim_task(id, &b.user).await?,
        "unclaim" => s.pf.unclaim_task(id, &b.user).await?,
        "assign" => {
            let to = b.to.ok_or_else(|| {
                ApiError::BadRequest("assign needs \"to\": the new holder".into())
            })?;
            s.pf.assign_task(id, &to, &b.user).await?
        }
        "complete" => s.pf.complete_task(id, &b.user, b.variables).await?,
        other => {
            return Err(ApiError::BadRequest(format!(
                "'{other}' is not one of claim, unclaim, assign, complete"
            )));
        }
    }
    Ok(Json(json!({"task": id.to_string(), "done": action})))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    topic: String,
    worker: String,
    #[serde(default = "one")]
    max: usize,
    /// Lease in milliseconds.
    lease_ms: u64,
    /// Only these variables in each job (default: every variable its token sees).
    fetch_variables: Option<Vec<String>>,
}

fn one() -> usize {
    1
}

#[utoipa::path(post, path = "/jobs/acquire", request_body = AcquireBody, responses((status = 200, description = "External worker: lock due jobs of a topic under a lease", body = serde_json::Value)))]
async fn acquire(
    State(s): State<AppState>,
    b: Result<Json<AcquireBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    crate::limits::LEASE.named("lease_ms").check(b.lease_ms)?;
    let jobs = match b.fetch_variables {
        Some(fetch) => {
            s.pf.lock_jobs_fetching(&b.topic, b.max, &b.worker, b.lease_ms, fetch)
                .await?
        }
        None => {
            s.pf.lock_jobs(&b.topic, b.max, &b.worker, b.lease_ms)
                .await?
        }
    };
    let list: Vec<Value> = jobs.iter().map(crate::contract::locked_job_json).collect();
    Ok(Json(json!({"jobs": list})).into_response())
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct CompleteBody {
    lease_token: Option<u64>,
    #[serde(default)]
    #[schema(value_type = Object)]
    variables: Vars,
}

#[utoipa::path(post, path = "/jobs/{id}/complete", request_body = CompleteBody, params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "Complete a task job (with the lease token of a worker)", body = serde_json::Value)))]
async fn complete(
    State(s): State<AppState>,
    Path(id): Path<u64>,
    b: Result<Json<CompleteBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    s.pf.complete_job(id, b.lease_token, b.variables).await?;
    Ok(Json(json!({"job": id.to_string(), "state": "completed"})).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct ExtendBody {
    lease_token: u64,
    by_ms: u64,
}

#[utoipa::path(post, path = "/jobs/{id}/extend", request_body = ExtendBody, params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "Extend a worker lease", body = serde_json::Value)))]
async fn extend(
    State(s): State<AppState>,
    Path(id): Path<u64>,
    b: Result<Json<ExtendBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    crate::limits::LEASE_EXTENSION
        .named("by_ms")
        .check(b.by_ms)?;
    let until = s.pf.extend_lease(id, b.lease_token, b.by_ms).await?;
    Ok(Json(json!({"job": id.to_string(), "lease_until": rfc3339(until)})).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct FailBody {
    lease_token: Option<u64>,
    error: String,
    retries: Option<u32>,
    retry_delay_ms: Option<u64>,
}

#[utoipa::path(post, path = "/jobs/{id}/fail", request_body = FailBody, params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "Record a failed attempt (retries, delay)", body = serde_json::Value)))]
async fn fail(
    State(s): State<AppState>,
    Path(id): Path<u64>,
    b: Result<Json<FailBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    if let Some(d) = b.retry_delay_ms {
        crate::limits::RETRY_DELAY
            .named("retry_delay_ms")
            .check(d)?;
    }
    let state =
        s.pf.fail_job_with(id, b.lease_token, &b.error, b.retries, b.retry_delay_ms)
            .await?;
    let state = if state == crate::JobState::Incident {
        "incident"
    } else {
        "ready"
    };
    Ok(Json(json!({"job": id.to_string(), "state": state})).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct BpmnErrorBody {
    lease_token: Option<u64>,
    code: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    variables: Vars,
}

#[utoipa::path(post, path = "/jobs/{id}/bpmn-error", request_body = BpmnErrorBody, params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "Throw a BPMN error: the error boundary event takes it, else 409 and an incident", body = serde_json::Value)))]
async fn bpmn_error(
    State(s): State<AppState>,
    Path(id): Path<u64>,
    b: Result<Json<BpmnErrorBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    let caught =
        s.pf.throw_error(id, b.lease_token, &b.code, &b.message, b.variables)
            .await?;
    let status = if caught {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    };
    Ok((status, Json(json!({"job": id.to_string(), "caught": caught, "state": if caught { "completed" } else { "incident" }}))).into_response())
}

#[utoipa::path(post, path = "/jobs/{id}/retry", params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "Make an incident runnable again", body = serde_json::Value)))]
async fn retry(State(s): State<AppState>, Path(id): Path<u64>) -> ApiResult {
    // the executor runs here: give it a moment to take the job
    let wait = std::time::Duration::from_secs(2);
    Ok(Json(crate::contract::retried(&s.pf, id, wait).await?))
}

#[utoipa::path(get, path = "/jobs/{id}/objects/{variable}", params(("id" = u64, Path, description = "job id"), ("variable" = String, Path, description = "instance variable holding the claim-check reference")), responses((status = 200, description = "The claim-check object's bytes (application/octet-stream); header x-postfach-object names it"), (status = 404, description = "Unknown job, or the object does not exist: fail the job so it is retried"), (status = 422, description = "The variable holds no reference"), (status = 501, description = "No object store configured ([storage])"), (status = 502, description = "The object store failed")))]
async fn job_object(
    State(s): State<AppState>,
    Path((id, variable)): Path<(u64, String)>,
) -> Result<Response, ApiError> {
    use crate::objects::ObjectError as O;
    let reference = match s.pf.reader()?.claim_check(id, &variable)? {
        None => return Err(Error::from(EngineError::UnknownJob(id)).into()),
        Some(Ok(r)) => r,
        Some(Err(e)) => return Ok(problem(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())),
    };
    let Some(store) = &s.objects else {
        return Ok(problem(
            StatusCode::NOT_IMPLEMENTED,
            "no object store is configured: give postfach.toml a [storage] section (or set STORAGE_EMULATOR_HOST)".into(),
        ));
    };
    match store.read(&reference).await {
        Ok(bytes) => Ok((
            [
                (header::CONTENT_TYPE, "application/octet-stream".to_string()),
                (
                    header::HeaderName::from_static("x-postfach-object"),
                    reference.to_uri(),
                ),
            ],
            bytes,
        )
            .into_response()),
        Err(e @ O::NotFound { .. }) => Ok((
            StatusCode::NOT_FOUND,
            Json(json!({
                "error": format!("{e}: fail job {id} so it is retried, or repair the reference"),
                "reason": "object_missing",
            })),
        )
            .into_response()),
        Err(e @ O::TooLarge { .. }) => Ok(problem(StatusCode::PAYLOAD_TOO_LARGE, e.to_string())),
        Err(e) => Ok(problem(StatusCode::BAD_GATEWAY, e.to_string())),
    }
}

#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus metrics", body = serde_json::Value)))]
async fn metrics(State(s): State<AppState>) -> Result<Response, ApiError> {
    let text = super::metrics::render(
        &s.pf.reader()?,
        &s.alarms,
        s.pf.commit_stats(),
        s.pf.recovery(),
        &s.consumers,
    )?;
    Ok(([(header::CONTENT_TYPE, super::metrics::CONTENT_TYPE)], text).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct CliBody {
    args: Vec<String>,
    /// Contents of the files the command line names, by path as given (the
    /// server never opens a caller's path).
    #[serde(default)]
    files: BTreeMap<String, String>,
}

/// Runs a command line inside the server, so `postfach --server URL ...` prints
/// exactly what it would print against the database itself.
#[utoipa::path(post, path = "/cli", request_body = CliBody, responses((status = 200, description = "Run a postfach command line inside the server (what --server uses)", body = serde_json::Value)))]
async fn cli(
    State(s): State<AppState>,
    b: Result<Json<CliBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    let Some(remote) = &s.remote_cli else {
        return Ok(problem(
            StatusCode::NOT_IMPLEMENTED,
            "this server runs no command line: it was started by a host, not by `postfach run`"
                .into(),
        ));
    };
    Ok(Json(remote(s.pf.clone(), b.args, b.files).await).into_response())
}

#[utoipa::path(post, path = "/instances/{id}/tokens/{token}/move", request_body = TokenBody, params(("id" = u64, Path, description = "instance or job id"), ("token" = u64, Path, description = "token id")), responses((status = 200, description = "Repair: move a token; 409 if it would duplicate a subscription", body = serde_json::Value)))]
async fn move_token(
    State(s): State<AppState>,
    Path((id, token)): Path<(u64, u64)>,
    b: Result<Json<TokenBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    let r = s.pf.move_token(id, token, &b.element, b.force).await?;
    Ok(Json(crate::contract::repair_json(id, &r)).into_response())
}

#[utoipa::path(post, path = "/instances/{id}/tokens/{token}/cancel", params(("id" = u64, Path, description = "instance or job id"), ("token" = u64, Path, description = "token id")), responses((status = 200, description = "Repair: remove a token (the last one cancels the instance)", body = serde_json::Value)))]
async fn cancel_token(State(s): State<AppState>, Path((id, token)): Path<(u64, u64)>) -> ApiResult {
    let r = s.pf.cancel_token(id, token).await?;
    Ok(Json(crate::contract::repair_json(id, &r)))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct TriggerBody {
    /// The element's result, merged as a completed task's.
    #[serde(default)]
    #[schema(value_type = Object)]
    variables: Vars,
}

#[utoipa::path(post, path = "/instances/{id}/tokens/{token}/trigger", request_body = TriggerBody, params(("id" = u64, Path, description = "instance id"), ("token" = u64, Path, description = "token id")), responses((status = 200, description = "Move a token on from its wait state (a receive task or catch event without an event definition); 409 when it waits for anything else", body = serde_json::Value)))]
async fn trigger(
    State(s): State<AppState>,
    Path((id, token)): Path<(u64, u64)>,
    b: Result<Json<TriggerBody>, JsonRejection>,
) -> ApiResult {
    let b = body(b)?;
    let t = s.pf.trigger(id, token, b.variables).await?;
    Ok(Json(json!({
        "instance": id.to_string(),
        "token": token,
        "triggered": t.element,
        "waiting_at": t.waiting_at,
    })))
}

/// The OpenAPI document of this API, generated from the handlers above.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "postfach",
        description = "Admin API of postfach run: instances, messages, jobs, repair, metrics."
    ),
    paths(
        live,
        ready,
        deploy,
        start,
        instances,
        instance,
        add_token,
        move_token,
        cancel_token,
        trigger,
        publish,
        correlate,
        messages,
        requeue,
        discard,
        signal,
        jobs,
        acquire,
        complete,
        extend,
        fail,
        bpmn_error,
        retry,
        job_object,
        statistics,
        processes,
        process_xml,
        alarm_states,
        tasks,
        task_action,
        metrics,
        cli
    )
)]
pub struct ApiDoc;

async fn openapi() -> Response {
    use utoipa::OpenApi;
    match ApiDoc::openapi().to_json() {
        Ok(doc) => ([(header::CONTENT_TYPE, "application/json")], doc).into_response(),
        Err(e) => problem(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
