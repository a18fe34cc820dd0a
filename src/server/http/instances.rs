//! Instances over HTTP: deploy, start, list and show instances, and the
//! token repairs (`/deployments`, `/instances…`).
//!
//! Invariant: a thin edge over the library API; bad input is a 400 naming
//! the field.

use super::*;

/// The instance operations: deploy, start, list, look, repair.
pub(super) const OPERATIONS: &[Operation] = &[
    op("deploy", Method::POST, "/deployments", Everywhere, Admin),
    op("start", Method::POST, "/instances", Start, P::Start),
    op(
        "conditions",
        Method::POST,
        "/conditions",
        PartitionZero,
        P::Start,
    ),
    op(
        "instances",
        Method::GET,
        "/instances",
        Gather(List::Instances),
        Read,
    ),
    op("instance", Method::GET, "/instances/{id}", ById("id"), Read),
    op(
        "add_token",
        Method::POST,
        "/instances/{id}/tokens",
        ById("id"),
        Operate,
    ),
    op(
        "move_token",
        Method::POST,
        "/instances/{id}/tokens/{token}/move",
        ById("id"),
        Operate,
    ),
    op(
        "cancel_token",
        Method::POST,
        "/instances/{id}/tokens/{token}/cancel",
        ById("id"),
        Operate,
    ),
    op(
        "cancel_instance",
        Method::POST,
        "/instances/{id}/cancel",
        ById("id"),
        Operate,
    ),
    op(
        "set_variables",
        Method::PUT,
        "/instances/{id}/variables",
        ById("id"),
        Operate,
    ),
    op(
        "trigger",
        Method::POST,
        "/instances/{id}/tokens/{token}/trigger",
        ById("id"),
        Operate,
    ),
    op(
        "activate",
        Method::POST,
        "/instances/{id}/tokens/{token}/activate",
        ById("id"),
        Operate,
    ),
    op("migrate", Method::POST, "/migrations", Summed, Admin),
    op(
        "complete_ad_hoc",
        Method::POST,
        "/instances/{id}/tokens/{token}/complete",
        ById("id"),
        Operate,
    ),
];

/// The routes of [`OPERATIONS`], with their OpenAPI documentation.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(with_limit(routes!(deploy), MAX_MODEL_BODY))
        .routes(routes!(start, instances))
        .routes(routes!(conditions))
        .routes(routes!(instance))
        .routes(routes!(add_token))
        .routes(routes!(move_token))
        .routes(routes!(cancel_token))
        .routes(routes!(cancel_instance))
        .routes(routes!(set_variables))
        .routes(routes!(trigger))
        .routes(routes!(activate))
        .routes(routes!(complete_ad_hoc))
        .routes(routes!(migrate))
}

/// The body of `deploy`: a BPMN or DMN model and how to read it.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeployBody {
    /// The name the model is deployed under (default `api.bpmn`).
    pub file: Option<String>,
    /// The model's XML.
    pub xml: String,
    #[serde(default)]
    /// Correlation key variable per message name.
    pub correlation_keys: BTreeMap<String, String>,
    /// Refuse a model with warnings (listeners, Java classes, mappings, skipped pools).
    #[serde(default)]
    pub strict: bool,
}

#[utoipa::path(post, path = "/deployments", request_body = DeployBody, responses((status = 200, description = "Deploy a BPMN model (new version unless unchanged)", body = serde_json::Value)))]
pub(super) async fn deploy(
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

/// The body of `start`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    /// The process id; its latest version starts.
    pub process: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    /// The instance's first variables.
    pub variables: Vars,
    /// A business key stored with the instance.
    pub business_key: Option<String>,
}

#[utoipa::path(post, path = "/instances", request_body = StartBody, responses((status = 201, description = "Start an instance; answers with the instance id", body = serde_json::Value)))]
pub(super) async fn start(
    State(s): State<AppState>,
    caller: Option<axum::Extension<crate::server::auth::Caller>>,
    b: Result<Json<StartBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    let what = crate::server::auth::Sent::Start(&b.process);
    if let Some(no) = outside_processes(&s, caller.as_deref(), what)? {
        return Ok(no);
    }
    let id = s.pf.start(&b.process, b.variables, b.business_key).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"instance": id.to_string()})),
    )
        .into_response())
}

/// The body of `conditions`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConditionsBody {
    /// Only this process's conditional start events (default: every process's).
    pub process: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    /// The variables offered to the conditions.
    pub variables: Vars,
}

#[utoipa::path(post, path = "/conditions", request_body = ConditionsBody, responses((status = 200, description = "Offer variables to the conditional start events: an instance starts at each one whose condition holds; answers with the instances started", body = serde_json::Value)))]
pub(super) async fn conditions(
    State(s): State<AppState>,
    b: Result<Json<ConditionsBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    let ids =
        s.pf.start_by_conditions(b.process.as_deref(), b.variables)
            .await?;
    Ok(Json(documents::started(&ids)).into_response())
}

/// The query of `instances`: every filter given must hold.
#[derive(serde::Serialize, Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct InstancesQuery {
    /// Only instances with a token at this element.
    pub waiting_at: Option<String>,
    /// `active`, `incident`, `completed` or `cancelled`.
    pub state: Option<String>,
    /// Only instances of this process.
    pub process: Option<String>,
    /// Only instances that wait for, expect or caught a message with this correlation key.
    pub key: Option<String>,
    /// With `value`: only instances whose variable of this name has that value.
    pub variable: Option<String>,
    /// The value `variable` must have (strings as is, others as JSON text).
    pub value: Option<String>,
    /// RFC 3339: started at or after.
    pub started_from: Option<String>,
    /// RFC 3339: started before.
    pub started_before: Option<String>,
    /// Only instances with (`true`) or without (`false`) an incident.
    pub has_incident: Option<bool>,
    /// The `next` cursor of the previous page.
    pub after: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    pub limit: Option<usize>,
    /// `newest` (default) or `oldest` first.
    pub order: Option<String>,
}

impl InstancesQuery {
    /// The filter it asks for (paging aside); what is wrong names the field.
    pub fn filter(&self) -> Result<InstanceFilter, String> {
        let variable = match (&self.variable, &self.value) {
            (Some(n), Some(v)) => Some((n.clone(), v.clone())),
            (None, None) => None,
            _ => return Err("variable and value go together: ?variable=NAME&value=VALUE".into()),
        };
        if let Some(st) = &self.state
            && !["active", "incident", "completed", "cancelled"].contains(&st.as_str())
        {
            return Err(format!(
                "state {st:?}: expected active, incident, completed or cancelled"
            ));
        }
        Ok(InstanceFilter {
            started_from: instant("started_from", self.started_from.clone())?,
            started_before: instant("started_before", self.started_before.clone())?,
            waiting_at: self.waiting_at.clone(),
            state: self.state.clone(),
            process: self.process.clone(),
            version: None,
            key: self.key.clone(),
            variable,
            has_incident: self.has_incident,
        })
    }
}

/// The most records one page of a list returns.
/// Largest page of a list.
pub const MAX_PAGE: usize = 1000;

/// A page size from a query (`default` when absent), or 400 naming `limit`.
pub(super) fn page_limit(limit: Option<usize>, default: usize) -> Result<usize, ApiError> {
    let limit = limit.unwrap_or(default);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit {limit}: expected 1 to {MAX_PAGE}"
        )));
    }
    Ok(limit)
}

/// The `after` cursor of a list paged by id, or 400 naming `after`.
pub(super) fn id_cursor(after: Option<String>) -> Result<Option<u64>, ApiError> {
    after
        .map(|a| {
            a.parse::<u64>().map_err(|_| {
                ApiError::BadRequest(format!("after {a:?}: expected the `next` cursor of a page"))
            })
        })
        .transpose()
}

#[utoipa::path(get, path = "/instances", params(InstancesQuery), responses((status = 200, description = "One page of the instances that pass every filter given, newest first unless order=oldest; `next` is the cursor (`after`) of the following page, absent on the last; `waiting` lists the page's tokens at `waiting_at` with their age", body = serde_json::Value)))]
pub(super) async fn instances(
    State(s): State<AppState>,
    Query(q): Query<InstancesQuery>,
) -> ApiResult {
    let filter = q.filter().map_err(ApiError::BadRequest)?;
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
pub(super) async fn instance(State(s): State<AppState>, Path(id): Path<u64>) -> ApiResult {
    let v =
        s.pf.reader()?
            .instance_detail(id)?
            .ok_or_else(|| Error::from(EngineError::UnknownInstance(id)))?;
    Ok(Json(serde_json::to_value(v).unwrap_or(Value::Null)))
}

/// The body of `add_token` and `move_token`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenBody {
    /// The element the token is placed before.
    pub element: String,
    #[serde(default)]
    /// Add it even where it opens a second subscription for a message and key.
    pub force: bool,
}

#[utoipa::path(post, path = "/instances/{id}/tokens", request_body = TokenBody, params(("id" = u64, Path, description = "instance or job id")), responses((status = 200, description = "Repair: add a token before an element; 409 if it would duplicate a subscription", body = serde_json::Value)))]
pub(super) async fn add_token(
    State(s): State<AppState>,
    Path(id): Path<u64>,
    b: Result<Json<TokenBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    let r = s.pf.add_token(id, &b.element, b.force).await?;
    Ok(Json(crate::contract::repair_json(id, &r)).into_response())
}

#[utoipa::path(post, path = "/instances/{id}/tokens/{token}/move", request_body = TokenBody, params(("id" = u64, Path, description = "instance or job id"), ("token" = u64, Path, description = "token id")), responses((status = 200, description = "Repair: move a token; 409 if it would duplicate a subscription", body = serde_json::Value)))]
pub(super) async fn move_token(
    State(s): State<AppState>,
    Path((id, token)): Path<(u64, u64)>,
    b: Result<Json<TokenBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    let r = s.pf.move_token(id, token, &b.element, b.force).await?;
    Ok(Json(crate::contract::repair_json(id, &r)).into_response())
}

#[utoipa::path(post, path = "/instances/{id}/tokens/{token}/cancel", params(("id" = u64, Path, description = "instance or job id"), ("token" = u64, Path, description = "token id")), responses((status = 200, description = "Repair: remove a token (the last one cancels the instance)", body = serde_json::Value)))]
pub(super) async fn cancel_token(
    State(s): State<AppState>,
    Path((id, token)): Path<(u64, u64)>,
) -> ApiResult {
    let r = s.pf.cancel_token(id, token).await?;
    Ok(Json(crate::contract::repair_json(id, &r)))
}

#[utoipa::path(post, path = "/instances/{id}/cancel", params(("id" = u64, Path, description = "instance id")), responses((status = 200, description = "End a running instance as cancelled with everything inside it (jobs, timers, subscriptions, user tasks, called instances); 409 when it has ended", body = serde_json::Value)))]
pub(super) async fn cancel_instance(State(s): State<AppState>, Path(id): Path<u64>) -> ApiResult {
    s.pf.cancel_instance(id).await?;
    Ok(Json(
        json!({"instance": id.to_string(), "state": "cancelled"}),
    ))
}

/// The body of `set_variables`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VariablesBody {
    /// The variables to set.
    #[schema(value_type = Object)]
    pub variables: Vars,
    /// Set them as this token writes them (a variable local to a scope
    /// around it changes there); none: in the instance.
    #[serde(default)]
    pub token: Option<u64>,
    /// Set them on the token itself.
    #[serde(default)]
    pub local: bool,
}

#[utoipa::path(put, path = "/instances/{id}/variables", request_body = VariablesBody, params(("id" = u64, Path, description = "instance id")), responses((status = 200, description = "Set variables of a running instance (conditions that read them are asked); 404 for an unknown token, 409 when the instance has ended", body = serde_json::Value)))]
pub(super) async fn set_variables(
    State(s): State<AppState>,
    Path(id): Path<u64>,
    b: Result<Json<VariablesBody>, JsonRejection>,
) -> ApiResult {
    let b = body(b)?;
    if b.local && b.token.is_none() {
        return Err(ApiError::BadRequest(
            "local: set variables locally on a token: give its id in token".into(),
        ));
    }
    let names: Vec<String> = b.variables.keys().cloned().collect();
    let token = b.token.unwrap_or(0);
    s.pf.set_variables(id, token, b.local, b.variables).await?;
    Ok(Json(json!({
        "instance": id.to_string(),
        "token": b.token,
        "variables": names,
    })))
}

/// The body of `activate`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActivateBody {
    /// The activity of the ad-hoc subprocess to run.
    pub element: String,
}

#[utoipa::path(post, path = "/instances/{id}/tokens/{token}/activate", request_body = ActivateBody, params(("id" = u64, Path, description = "instance id"), ("token" = u64, Path, description = "the token holding the ad-hoc subprocess")), responses((status = 200, description = "Run an activity of an ad-hoc subprocess; 409 when it cannot be activated", body = serde_json::Value)))]
pub(super) async fn activate(
    State(s): State<AppState>,
    Path((id, token)): Path<(u64, u64)>,
    b: Result<Json<ActivateBody>, JsonRejection>,
) -> ApiResult {
    let b = body(b)?;
    let t = s.pf.ad_hoc(id, token, Some(&b.element)).await?;
    Ok(Json(json!({
        "instance": id.to_string(),
        "token": token,
        "activated": t.element,
        "waiting_at": t.waiting_at,
    })))
}

#[utoipa::path(post, path = "/instances/{id}/tokens/{token}/complete", params(("id" = u64, Path, description = "instance id"), ("token" = u64, Path, description = "the token holding the ad-hoc subprocess")), responses((status = 200, description = "Complete an ad-hoc subprocess with nothing running in it; 409 while activities run", body = serde_json::Value)))]
pub(super) async fn complete_ad_hoc(
    State(s): State<AppState>,
    Path((id, token)): Path<(u64, u64)>,
) -> ApiResult {
    let t = s.pf.ad_hoc(id, token, None).await?;
    Ok(Json(json!({
        "instance": id.to_string(),
        "token": token,
        "completed": t.element,
        "waiting_at": t.waiting_at,
    })))
}

/// The body of `trigger`.
#[derive(serde::Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerBody {
    /// The element's result, merged as a completed task's.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub variables: Vars,
}

#[utoipa::path(post, path = "/instances/{id}/tokens/{token}/trigger", request_body = TriggerBody, params(("id" = u64, Path, description = "instance id"), ("token" = u64, Path, description = "token id")), responses((status = 200, description = "Move a token on from its wait state (a receive task or catch event without an event definition); 409 when it waits for anything else", body = serde_json::Value)))]
pub(super) async fn trigger(
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

/// The body of `migrate`: the plan, and which instances of the old version
/// (the filters of `instances`; all running ones when none is given).
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MigrationBody {
    /// The process id.
    pub process: String,
    /// The version the instances run now.
    pub from_version: u32,
    /// The version they move to.
    pub to_version: u32,
    /// Element ids of the old version mapped to ids of the new; an element
    /// not named keeps its id.
    #[serde(default)]
    pub map: BTreeMap<String, String>,
    /// Only instances with a token at this element.
    pub waiting_at: Option<String>,
    /// `active` (default) or `incident`.
    pub state: Option<String>,
    /// Only instances that wait for, expect or caught a message with this correlation key.
    pub key: Option<String>,
    /// With `value`: only instances whose variable of this name has that value.
    pub variable: Option<String>,
    /// The value `variable` must have.
    pub value: Option<String>,
    /// RFC 3339: started at or after.
    pub started_from: Option<String>,
    /// RFC 3339: started before.
    pub started_before: Option<String>,
    /// Only instances with (`true`) or without (`false`) an incident.
    pub has_incident: Option<bool>,
    /// Only say what would happen to each instance.
    #[serde(default)]
    pub dry_run: bool,
}

impl MigrationBody {
    /// The plan, the filter of the instances and whether it is a dry run;
    /// what is wrong names the field.
    pub fn plan(self) -> Result<(crate::MigrationPlan, InstanceFilter, bool), String> {
        if let Some(st) = &self.state
            && !["active", "incident"].contains(&st.as_str())
        {
            return Err(format!(
                "state {st:?}: only running instances migrate (active or incident)"
            ));
        }
        let filter = InstancesQuery {
            waiting_at: self.waiting_at,
            state: self.state,
            key: self.key,
            variable: self.variable,
            value: self.value,
            started_from: self.started_from,
            started_before: self.started_before,
            has_incident: self.has_incident,
            ..InstancesQuery::default()
        }
        .filter()?;
        let plan = crate::MigrationPlan {
            process: self.process,
            from: self.from_version,
            to: self.to_version,
            map: self.map,
        };
        Ok((plan, filter, self.dry_run))
    }
}

#[utoipa::path(post, path = "/migrations", request_body = MigrationBody, responses((status = 200, description = "Migrate running instances of one version to another: each moves whole or is refused with its reason (dry_run: only says what would happen)", body = serde_json::Value)))]
pub(super) async fn migrate(
    State(s): State<AppState>,
    b: Result<Json<MigrationBody>, JsonRejection>,
) -> ApiResult {
    let (plan, filter, dry_run) = body(b)?.plan().map_err(ApiError::BadRequest)?;
    let report = s.pf.migrate(plan, &filter, dry_run).await?;
    Ok(Json(crate::contract::migration_json(&report, dry_run)))
}
