//! Jobs over HTTP: list, acquire, complete, extend, fail, throw a BPMN
//! error, retry, and read a claim-check object (`/jobs…`).
//!
//! Invariant: a thin edge over the library API; a worker's call carries the
//! lease token it holds.

use super::*;
use crate::server::auth::{Caller, refuse_topic};
use axum::Extension;

/// The job operations of workers and operators.
pub(super) const OPERATIONS: &[Operation] = &[
    op("jobs", Method::GET, "/jobs", Gather(List::Jobs), Read),
    op("acquire", Method::POST, "/jobs/acquire", Acquire, Work),
    op(
        "complete",
        Method::POST,
        "/jobs/{id}/complete",
        ById("id"),
        Work,
    ),
    op(
        "extend",
        Method::POST,
        "/jobs/{id}/extend",
        ById("id"),
        Work,
    ),
    op("fail", Method::POST, "/jobs/{id}/fail", ById("id"), Work),
    op(
        "bpmn_error",
        Method::POST,
        "/jobs/{id}/bpmn-error",
        ById("id"),
        Work,
    ),
    op(
        "retry",
        Method::POST,
        "/jobs/{id}/retry",
        ById("id"),
        Operate,
    ),
    op(
        "job_object",
        Method::GET,
        "/jobs/{id}/objects/{variable}",
        ById("id"),
        Work,
    ),
];

/// The routes of [`OPERATIONS`], with their OpenAPI documentation.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(jobs))
        .routes(routes!(acquire))
        .routes(routes!(complete))
        .routes(routes!(extend))
        .routes(routes!(fail))
        .routes(routes!(bpmn_error))
        .routes(routes!(retry))
        .routes(routes!(job_object))
}

/// The query of `jobs`.
#[derive(serde::Serialize, Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobsQuery {
    /// Only jobs in an incident (out of attempts).
    #[serde(default)]
    pub incidents: bool,
    /// The `next` cursor of the previous page.
    pub after: Option<String>,
    /// Page size, 1 to 1000 (default 500).
    pub limit: Option<usize>,
}

#[utoipa::path(get, path = "/jobs", params(JobsQuery), responses((status = 200, description = "One page of jobs, or only incidents, by id; `next` is the cursor (`after`) of the following page", body = serde_json::Value)))]
pub(super) async fn jobs(State(s): State<AppState>, Query(q): Query<JobsQuery>) -> ApiResult {
    let limit = page_limit(q.limit, 500)?;
    let after = id_cursor(q.after)?;
    let (jobs, next) = s.pf.reader()?.job_page(q.incidents, after, limit)?;
    Ok(Json(json!({"jobs": jobs, "next": next})))
}

/// The body of `acquire`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcquireBody {
    /// The topic of the jobs.
    pub topic: String,
    /// The worker's name, recorded on the lease.
    pub worker: String,
    #[serde(default = "one")]
    /// At most this many jobs (default 1).
    pub max: usize,
    /// Lease in milliseconds.
    pub lease_ms: u64,
    /// Only these variables in each job (default: every variable its token sees).
    pub fetch_variables: Option<Vec<String>>,
}

/// The refusal of a caller whose workers are limited to other topics than
/// job `id`'s (403); a job that is not there goes on to the handler's 404.
/// Every operation of this family that acts on one job asks it first.
fn outside_topics(
    s: &AppState,
    caller: Option<&Caller>,
    id: u64,
) -> Result<Option<Response>, ApiError> {
    let Some(caller) = caller else {
        return Ok(None);
    };
    let Some(job) = s.pf.reader()?.job(id)? else {
        return Ok(None);
    };
    Ok(refuse_topic(
        Some(caller),
        job.topic.as_deref().unwrap_or(""),
    ))
}

pub(super) fn one() -> usize {
    1
}

#[utoipa::path(post, path = "/jobs/acquire", request_body = AcquireBody, responses((status = 200, description = "External worker: lock due jobs of a topic under a lease", body = serde_json::Value)))]
pub(super) async fn acquire(
    State(s): State<AppState>,
    caller: Option<Extension<Caller>>,
    b: Result<Json<AcquireBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    if let Some(no) = refuse_topic(caller.as_deref(), &b.topic) {
        return Ok(no);
    }
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

/// The body of `complete`.
#[derive(serde::Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteBody {
    /// The lease token from `acquire` (none: an unlocked job completed by hand).
    pub lease_token: Option<u64>,
    #[serde(default)]
    #[schema(value_type = Object)]
    /// Variables merged into the instance.
    pub variables: Vars,
}

#[utoipa::path(post, path = "/jobs/{id}/complete", request_body = CompleteBody, params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "Complete a task job (with the lease token of a worker)", body = serde_json::Value)))]
pub(super) async fn complete(
    State(s): State<AppState>,
    caller: Option<Extension<Caller>>,
    Path(id): Path<u64>,
    b: Result<Json<CompleteBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    if let Some(no) = outside_topics(&s, caller.as_deref(), id)? {
        return Ok(no);
    }
    let b = body(b)?;
    s.pf.complete_job(id, b.lease_token, b.variables).await?;
    Ok(Json(documents::job_completed(id)).into_response())
}

/// The body of `extend`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtendBody {
    /// The lease token from `acquire`.
    pub lease_token: u64,
    /// How much longer the lease runs, in milliseconds.
    pub by_ms: u64,
}

#[utoipa::path(post, path = "/jobs/{id}/extend", request_body = ExtendBody, params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "Extend a worker lease", body = serde_json::Value)))]
pub(super) async fn extend(
    State(s): State<AppState>,
    caller: Option<Extension<Caller>>,
    Path(id): Path<u64>,
    b: Result<Json<ExtendBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    if let Some(no) = outside_topics(&s, caller.as_deref(), id)? {
        return Ok(no);
    }
    let b = body(b)?;
    crate::limits::LEASE_EXTENSION
        .named("by_ms")
        .check(b.by_ms)?;
    let until = s.pf.extend_lease(id, b.lease_token, b.by_ms).await?;
    Ok(Json(documents::lease(id, until)).into_response())
}

/// The body of `fail`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailBody {
    /// The lease token from `acquire`, if the worker holds one.
    pub lease_token: Option<u64>,
    /// What went wrong, shown on the job and its incident.
    pub error: String,
    /// How many attempts are left (default: the job's own count less one).
    pub retries: Option<u32>,
    /// Wait this long before the next attempt, in milliseconds (default: backoff).
    pub retry_delay_ms: Option<u64>,
}

#[utoipa::path(post, path = "/jobs/{id}/fail", request_body = FailBody, params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "Record a failed attempt (retries, delay)", body = serde_json::Value)))]
pub(super) async fn fail(
    State(s): State<AppState>,
    caller: Option<Extension<Caller>>,
    Path(id): Path<u64>,
    b: Result<Json<FailBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    if let Some(no) = outside_topics(&s, caller.as_deref(), id)? {
        return Ok(no);
    }
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

/// The body of `bpmn_error`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BpmnErrorBody {
    /// The lease token from `acquire`, if the worker holds one.
    pub lease_token: Option<u64>,
    /// The BPMN error code an error boundary event catches.
    pub code: String,
    #[serde(default)]
    /// The error's message.
    pub message: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    /// Variables merged into the instance when it is caught.
    pub variables: Vars,
}

#[utoipa::path(post, path = "/jobs/{id}/bpmn-error", request_body = BpmnErrorBody, params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "Throw a BPMN error: the error boundary event takes it, else 409 and an incident", body = serde_json::Value)))]
pub(super) async fn bpmn_error(
    State(s): State<AppState>,
    caller: Option<Extension<Caller>>,
    Path(id): Path<u64>,
    b: Result<Json<BpmnErrorBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    if let Some(no) = outside_topics(&s, caller.as_deref(), id)? {
        return Ok(no);
    }
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
pub(super) async fn retry(State(s): State<AppState>, Path(id): Path<u64>) -> ApiResult {
    // the executor runs here: give it a moment to take the job
    let wait = std::time::Duration::from_secs(2);
    Ok(Json(crate::contract::retried(&s.pf, id, wait).await?))
}

#[utoipa::path(get, path = "/jobs/{id}/objects/{variable}", params(("id" = u64, Path, description = "job id"), ("variable" = String, Path, description = "instance variable holding the claim-check reference")), responses((status = 200, description = "The claim-check object's bytes (application/octet-stream); header x-postfach-object names it"), (status = 404, description = "Unknown job, or the object does not exist: fail the job so it is retried"), (status = 422, description = "The variable holds no reference"), (status = 501, description = "No object store configured ([storage])"), (status = 502, description = "The object store failed")))]
pub(super) async fn job_object(
    State(s): State<AppState>,
    caller: Option<Extension<Caller>>,
    Path((id, variable)): Path<(u64, String)>,
) -> Result<Response, ApiError> {
    if let Some(no) = outside_topics(&s, caller.as_deref(), id)? {
        return Ok(no);
    }
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
