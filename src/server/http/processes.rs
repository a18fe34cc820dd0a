//! Processes, decisions, alarms and user tasks over HTTP (`/processes…`,
//! `/decisions…`, `/alarms`, `/tasks…`).
//!
//! Invariant: only reads, except a task action, which acts as the person
//! it names (evaluating a decision stores nothing).

use super::*;

/// The operations on what is deployed (processes, decisions), alarms and
/// user tasks.
pub(super) const OPERATIONS: &[Operation] = &[
    op("decisions", Method::GET, "/decisions", Same, Read),
    op(
        "evaluate",
        Method::POST,
        "/decisions/{id}/evaluate",
        Same,
        Read,
    ),
    op("processes", Method::GET, "/processes", Processes, Read),
    op(
        "process_xml",
        Method::GET,
        "/processes/{id}/xml",
        Same,
        Read,
    ),
    op(
        "statistics",
        Method::GET,
        "/processes/{id}/statistics",
        Statistics,
        Read,
    ),
    op("alarm_states", Method::GET, "/alarms", Alarms, Read),
    op("tasks", Method::GET, "/tasks", Gather(List::Tasks), Read),
    op(
        "task_action",
        Method::POST,
        "/tasks/{id}/{action}",
        ById("id"),
        Work,
    ),
];

/// The routes of [`OPERATIONS`], with their OpenAPI documentation.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(decisions))
        .routes(routes!(evaluate))
        .routes(routes!(processes))
        .routes(routes!(process_xml))
        .routes(routes!(statistics))
        .routes(routes!(alarm_states))
        .routes(routes!(tasks))
        .routes(routes!(task_action))
}

/// The query of `statistics`.
#[derive(serde::Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StatisticsQuery {
    /// The definition version (default: the latest).
    pub version: Option<u32>,
}

#[utoipa::path(get, path = "/decisions", responses((status = 200, description = "Every deployed DMN decision with its latest version", body = serde_json::Value)))]
pub(super) async fn decisions(State(s): State<AppState>) -> ApiResult {
    Ok(Json(json!({"decisions": s.pf.reader()?.decisions()?})))
}

/// The body of `evaluate`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluateBody {
    /// The variables the decision reads.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub variables: Vars,
}

#[utoipa::path(post, path = "/decisions/{id}/evaluate", request_body = EvaluateBody, params(("id" = String, Path, description = "decision id")), responses((status = 200, description = "The latest version's value and the rules that matched; nothing is stored", body = serde_json::Value), (status = 404, description = "No such decision is deployed"), (status = 422, description = "The decision has no value for these variables")))]
pub(super) async fn evaluate(
    State(s): State<AppState>,
    Path(id): Path<String>,
    b: Result<Json<EvaluateBody>, JsonRejection>,
) -> ApiResult {
    let b = body(b)?;
    let d = s.pf.decide(&id, &b.variables)?;
    Ok(Json(serde_json::to_value(d).unwrap_or_default()))
}

#[utoipa::path(get, path = "/processes", responses((status = 200, description = "Every deployed process with its versions", body = serde_json::Value)))]
pub(super) async fn processes(State(s): State<AppState>) -> ApiResult {
    Ok(Json(json!({"processes": s.pf.reader()?.deployed()?})))
}

#[utoipa::path(get, path = "/processes/{id}/xml", params(("id" = String, Path, description = "process id"), StatisticsQuery), responses((status = 200, description = "The BPMN XML the version was deployed from (application/xml)"), (status = 404, description = "No such process or version, or deployed before sources were kept")))]
pub(super) async fn process_xml(
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
pub(super) async fn alarm_states(State(s): State<AppState>) -> ApiResult {
    let list: Vec<Value> = s
        .alarms
        .active()
        .into_iter()
        .map(|(name, active)| json!({"name": name, "active": active}))
        .collect();
    Ok(Json(json!({"alarms": list})))
}

#[utoipa::path(get, path = "/processes/{id}/statistics", params(("id" = String, Path, description = "process id"), StatisticsQuery), responses((status = 200, description = "Per element of the definition version: tokens waiting and the oldest wait, ready jobs, incidents, buffered and parked messages of the element's message; from gauges and index heads, not scans", body = serde_json::Value), (status = 404, description = "No such process or version")))]
pub(super) async fn statistics(
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

/// The query of `tasks`: every filter given must hold.
#[derive(serde::Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TasksQuery {
    /// Only tasks held by this user.
    pub assignee: Option<String>,
    /// Only tasks this user may claim.
    pub candidate_user: Option<String>,
    /// Only tasks this group may claim.
    pub candidate_group: Option<String>,
    /// Only tasks of this process.
    pub process: Option<String>,
    /// Only tasks at this element.
    pub element: Option<String>,
    /// RFC 3339.
    pub created_before: Option<String>,
    /// RFC 3339.
    pub due_before: Option<String>,
}

impl TasksQuery {
    /// The filter it asks for; what is wrong names the field.
    pub fn filter(self) -> Result<crate::ops::TaskFilter, String> {
        Ok(crate::ops::TaskFilter {
            created_before: instant("created_before", self.created_before)?,
            due_before: instant("due_before", self.due_before)?,
            assignee: self.assignee,
            candidate_user: self.candidate_user,
            candidate_group: self.candidate_group,
            process: self.process,
            element: self.element,
        })
    }
}

/// An RFC 3339 query value as milliseconds; what is wrong names the field.
pub(super) fn instant(field: &str, v: Option<String>) -> Result<Option<u64>, String> {
    v.map(|s| crate::model::iso::instant(&s).map_err(|e| format!("{field}: {e}")))
        .transpose()
}

#[utoipa::path(get, path = "/tasks", params(TasksQuery), responses((status = 200, description = "Open user tasks; every filter given must hold", body = serde_json::Value)))]
pub(super) async fn tasks(State(s): State<AppState>, Query(q): Query<TasksQuery>) -> ApiResult {
    let filter = q.filter().map_err(ApiError::BadRequest)?;
    Ok(Json(documents::tasks(&s.pf.reader()?.tasks(&filter)?)))
}

/// The body of `task_action`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskBody {
    /// Who acts. With tokens configured a caller acts as the name its
    /// token carries (an operator may act for anyone); on an open loopback
    /// API the caller says who it is.
    pub user: String,
    /// `assign`: the new holder.
    pub to: Option<String>,
    /// `complete`: variables merged into the instance.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub variables: Vars,
}

/// Why a caller known by its token may not take `action` on task `id` as
/// `user` (403), if it may not: it acts as itself unless it may operate;
/// assigning is an operator's; claiming and completing need the caller to
/// hold the task, or — unassigned — to be a candidate user or a member of a
/// candidate group (or the task names none).
fn task_refusal(
    s: &AppState,
    c: &crate::server::auth::Caller,
    id: u64,
    action: &str,
    user: &str,
) -> Result<Option<Response>, ApiError> {
    if c.may(P::Operate) {
        return Ok(None);
    }
    let refuse = |m: String| Ok(Some(problem(StatusCode::FORBIDDEN, m)));
    if *c.name != *user {
        return refuse(format!(
            "token '{}' acts on user tasks as '{}', not as '{user}'",
            c.name, c.name
        ));
    }
    match action {
        "assign" => refuse(format!(
            "token '{}' may not assign user tasks: assigning is an operator's (permission 'operate')",
            c.name
        )),
        "claim" | "complete" => match s.pf.reader()?.task_open_to(id, user, &c.groups)? {
            Some(false) => refuse(format!(
                "'{user}' may not {action} task {id}: someone else holds it, or '{user}' is neither a candidate user nor in a candidate group"
            )),
            Some(true) | None => Ok(None),
        },
        _ => Ok(None),
    }
}

#[utoipa::path(post, path = "/tasks/{id}/{action}", request_body = TaskBody, params(("id" = u64, Path, description = "task id"), ("action" = String, Path, description = "claim, unclaim, assign or complete")), responses((status = 200, description = "Act on a user task; 409 when someone else holds it", body = serde_json::Value)))]
pub(super) async fn task_action(
    State(s): State<AppState>,
    caller: Option<axum::Extension<crate::server::auth::Caller>>,
    Path((id, action)): Path<(u64, String)>,
    b: Result<Json<TaskBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    if let Some(c) = caller.as_deref()
        && let Some(no) = task_refusal(&s, c, id, &action, &b.user)?
    {
        return Ok(no);
    }
    match action.as_str() {
        "claim" => s.pf.claim_task(id, &b.user).await?,
        "unclaim" => s.pf.unclaim_task(id, &b.user).await?,
        "assign" => {
            let to = b.to.as_deref().ok_or_else(|| {
                ApiError::BadRequest("assign needs \"to\": the new holder".into())
            })?;
            s.pf.assign_task(id, to, &b.user).await?
        }
        "complete" => s.pf.complete_task(id, &b.user, b.variables).await?,
        other => {
            return Err(ApiError::BadRequest(format!(
                "'{other}' is not one of claim, unclaim, assign, complete"
            )));
        }
    }
    Ok(Json(documents::task_done(id, &action, &b.user, b.to.as_deref())).into_response())
}
