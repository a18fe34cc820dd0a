//! The REST face of Camunda 8's orchestration API (`/v2`): the routes
//! Camunda's 8.8+ clients call by default, written from Camunda's public
//! documentation. Each route reads its JSON, makes the gateway-protocol
//! request of the same call and hands it to [`Face`] — so a route needs the
//! same catalogue permission, refuses the same input and does the same as
//! its gRPC call — and writes the answer back as JSON, keys as strings.
//!
//! Invariant: no route has semantics of its own (only `messages/correlation`
//! and `incidents/search`, which have no gRPC call, reach the library, under
//! their catalogue operation's permission); a refusal is an RFC 9457 problem
//! with the status the gRPC code maps to; a request field postfach does not
//! serve is refused by name unless it is empty, never dropped silently.

use super::Face;
use super::proto::{self, gateway_server::Gateway};
use super::service::{TENANT, status, variables};
use axum::Json;
use axum::extract::{Multipart, Path, Request as HttpRequest, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, patch, post, put};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tonic::Status;

/// The `/v2` routes over `face`; they check their callers themselves.
pub fn routes(face: Face) -> axum::Router {
    axum::Router::new()
        .route("/v2/topology", get(topology))
        .route("/v2/deployments", post(deploy))
        .route("/v2/process-instances", post(create))
        .route(
            "/v2/process-instances/{key}/cancellation",
            post(cancel_instance),
        )
        .route("/v2/messages/publication", post(publish))
        .route("/v2/messages/correlation", post(correlate))
        .route("/v2/signals/broadcast", post(broadcast))
        .route("/v2/jobs/activation", post(activate))
        .route("/v2/jobs/{key}/completion", post(complete))
        .route("/v2/jobs/{key}/failure", post(fail))
        .route("/v2/jobs/{key}/error", post(throw_error))
        .route("/v2/jobs/{key}", patch(update_job))
        .route("/v2/incidents/{key}/resolution", post(resolve))
        .route("/v2/incidents/search", post(super::incidents::search))
        .route("/v2/decision-definitions/evaluation", post(evaluate))
        .route("/v2/element-instances/{key}/variables", put(set_variables))
        .route("/v2/{*rest}", any(not_served))
        .layer(axum::extract::DefaultBodyLimit::max(super::MAX_MESSAGE))
        .with_state(face)
}

/// What a route answers.
pub(super) type Answer = Result<Response, Problem>;

/// A refusal as an RFC 9457 problem document.
pub(super) struct Problem(StatusCode, String);

impl From<Status> for Problem {
    fn from(s: Status) -> Problem {
        use tonic::Code as C;
        let code = match s.code() {
            C::InvalidArgument | C::OutOfRange => StatusCode::BAD_REQUEST,
            C::NotFound => StatusCode::NOT_FOUND,
            C::AlreadyExists | C::FailedPrecondition | C::Aborted => StatusCode::CONFLICT,
            C::Unauthenticated => StatusCode::UNAUTHORIZED,
            C::PermissionDenied => StatusCode::FORBIDDEN,
            C::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            C::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            C::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            C::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Problem(code, s.message().to_string())
    }
}

impl Problem {
    pub(super) fn bad(detail: impl Into<String>) -> Problem {
        Problem(StatusCode::BAD_REQUEST, detail.into())
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = json!({
            "type": "about:blank",
            "title": self.0.canonical_reason().unwrap_or("Error").replace(' ', "_").to_uppercase(),
            "status": self.0.as_u16(),
            "detail": self.1,
        });
        let mut r = (self.0, Json(body)).into_response();
        r.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/problem+json"),
        );
        if self.0 == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        r
    }
}

/// The gRPC request of a route: `msg`, with the caller's bearer token.
pub(super) fn grpc<T>(headers: &HeaderMap, msg: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    if let Some(v) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
    {
        req.metadata_mut().insert("authorization", v);
    }
    req
}

/// A JSON body: an object, its fields taken one by one.
pub(super) struct Body(Map<String, Value>);

impl Body {
    async fn read(req: HttpRequest) -> Result<Body, Problem> {
        let bytes = axum::body::to_bytes(req.into_body(), super::MAX_MESSAGE)
            .await
            .map_err(|e| Problem::bad(format!("the body could not be read: {e}")))?;
        Body::parse(&bytes)
    }

    pub(super) fn parse(bytes: &[u8]) -> Result<Body, Problem> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Body(Map::new()));
        }
        match serde_json::from_slice(bytes) {
            Ok(Value::Object(m)) => Ok(Body(m)),
            Ok(_) => Err(Problem::bad("the body must be a JSON object")),
            Err(e) => Err(Problem::bad(format!("the body is not JSON: {e}"))),
        }
    }

    pub(super) fn take(&mut self, field: &str) -> Option<Value> {
        self.0.remove(field).filter(|v| !v.is_null())
    }

    pub(super) fn text(&mut self, field: &str) -> Result<String, Problem> {
        match self.take(field) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s),
            Some(v) => Err(Problem::bad(format!("{field} must be a string, not {v}"))),
        }
    }

    pub(super) fn int(&mut self, field: &str) -> Result<i64, Problem> {
        match self.take(field) {
            None => Ok(0),
            Some(v) => v
                .as_i64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .ok_or_else(|| Problem::bad(format!("{field} must be a whole number, not {v}"))),
        }
    }

    fn flag(&mut self, field: &str) -> Result<bool, Problem> {
        match self.take(field) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(b),
            Some(v) => Err(Problem::bad(format!(
                "{field} must be true or false, not {v}"
            ))),
        }
    }

    /// A key: a string of digits (as Camunda's clients send keys) or a number.
    pub(super) fn key(&mut self, field: &str) -> Result<i64, Problem> {
        self.int(field)
    }

    /// A variables object, as the text the gRPC request carries.
    fn vars(&mut self, field: &str) -> Result<String, Problem> {
        match self.take(field) {
            None => Ok(String::new()),
            Some(v @ Value::Object(_)) => Ok(v.to_string()),
            Some(v) => Err(Problem::bad(format!(
                "{field} must be a JSON object, like {{\"auftragId\": \"4711\"}}, not {v}"
            ))),
        }
    }

    fn texts(&mut self, field: &str) -> Result<Vec<String>, Problem> {
        match self.take(field) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    v => Err(Problem::bad(format!("{field}: {v} is no string"))),
                })
                .collect(),
            Some(v) => Err(Problem::bad(format!(
                "{field} must be a list of strings, not {v}"
            ))),
        }
    }

    /// The tenant: postfach has one, `<default>`.
    fn tenant(&mut self) -> Result<(), Problem> {
        tenant_ok(&self.text("tenantId")?)
    }

    /// Fields taken and ignored because they change nothing here.
    fn ignore(&mut self, fields: &[&str]) {
        for f in fields {
            self.0.remove(*f);
        }
    }

    /// Every field was taken: one left over with a value is refused by name.
    pub(super) fn done(self) -> Result<(), Problem> {
        match self.0.into_iter().find(|(_, v)| !is_empty(v)) {
            None => Ok(()),
            Some((k, v)) => Err(Problem::bad(format!(
                "{k} ({v}) is not served by postfach: leave it out"
            ))),
        }
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

pub(super) fn tenant_ok(t: &str) -> Result<(), Problem> {
    if t.is_empty() || t == TENANT {
        Ok(())
    } else {
        Err(Problem::bad(format!(
            "tenantId '{t}': postfach has one tenant, '{TENANT}'"
        )))
    }
}

/// A key in a path.
fn path_key(field: &str, raw: &str) -> Result<i64, Problem> {
    raw.parse()
        .map_err(|_| Problem::bad(format!("{field} '{raw}' is no key (a whole number)")))
}

/// A key as Camunda's REST API writes keys: a string.
pub(super) fn k(key: i64) -> Value {
    Value::String(key.to_string())
}

fn ok(body: Value) -> Answer {
    Ok(Json(body).into_response())
}

fn no_content() -> Answer {
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A JSON text the gRPC answer carries, as JSON again.
fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

async fn topology(State(f): State<Face>, headers: HeaderMap) -> Answer {
    let t = f
        .topology(grpc(&headers, proto::TopologyRequest {}))
        .await?
        .into_inner();
    let brokers: Vec<Value> = t
        .brokers
        .iter()
        .map(|b| {
            json!({
                "nodeId": b.node_id, "host": b.host, "port": b.port, "version": b.version,
                "partitions": b.partitions.iter().map(|p| json!({
                    "partitionId": p.partition_id, "role": "leader", "health": "healthy",
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    ok(json!({
        "brokers": brokers,
        "clusterSize": t.cluster_size,
        "partitionsCount": t.partitions_count,
        "replicationFactor": t.replication_factor,
        "gatewayVersion": t.gateway_version,
    }))
}

async fn deploy(State(f): State<Face>, headers: HeaderMap, mut form: Multipart) -> Answer {
    let mut resources = Vec::new();
    while let Some(field) = form
        .next_field()
        .await
        .map_err(|e| Problem::bad(format!("the multipart body is broken: {e}")))?
    {
        let name = field.name().unwrap_or_default().to_string();
        let file = field.file_name().map(str::to_string);
        let bytes = field
            .bytes()
            .await
            .map_err(|e| Problem::bad(format!("part '{name}' could not be read: {e}")))?;
        match name.as_str() {
            "resources" => resources.push(proto::Resource {
                name: file.unwrap_or_else(|| "resource.bpmn".into()),
                content: bytes.to_vec(),
            }),
            "tenantId" => tenant_ok(&String::from_utf8_lossy(&bytes))?,
            other => {
                return Err(Problem::bad(format!(
                    "part '{other}' is not served: send the models as parts named resources"
                )));
            }
        }
    }
    let d = f
        .deploy_resource(grpc(
            &headers,
            proto::DeployResourceRequest {
                resources,
                tenant_id: String::new(),
            },
        ))
        .await?
        .into_inner();
    use proto::deployment::Metadata;
    let deployments: Vec<Value> = d
        .deployments
        .iter()
        .filter_map(|m| match &m.metadata {
            Some(Metadata::Process(p)) => Some(json!({"processDefinition": {
                "processDefinitionId": p.bpmn_process_id,
                "processDefinitionVersion": p.version,
                "processDefinitionKey": k(p.process_definition_key),
                "resourceName": p.resource_name,
                "tenantId": TENANT,
            }})),
            Some(Metadata::Decision(x)) => Some(json!({"decisionDefinition": {
                "decisionDefinitionId": x.dmn_decision_id,
                "name": x.dmn_decision_name,
                "version": x.version,
                "decisionDefinitionKey": k(x.decision_key),
                "decisionRequirementsId": x.dmn_decision_requirements_id,
                "decisionRequirementsKey": k(x.decision_requirements_key),
                "tenantId": TENANT,
            }})),
            Some(Metadata::DecisionRequirements(_) | Metadata::Form(_)) | None => None,
        })
        .collect();
    ok(json!({"deploymentKey": k(d.key), "tenantId": TENANT, "deployments": deployments}))
}

async fn create(State(f): State<Face>, headers: HeaderMap, req: HttpRequest) -> Answer {
    let mut b = Body::read(req).await?;
    let start = proto::CreateProcessInstanceRequest {
        bpmn_process_id: b.text("processDefinitionId")?,
        process_definition_key: b.key("processDefinitionKey")?,
        version: {
            let v = b.int("processDefinitionVersion")?;
            i32::try_from(v)
                .map_err(|_| Problem::bad(format!("processDefinitionVersion {v} is no version")))?
        },
        variables: b.vars("variables")?,
        ..Default::default()
    };
    b.tenant()?;
    b.ignore(&["operationReference"]);
    let wait = b.flag("awaitCompletion")?;
    let timeout = b.int("requestTimeout")?;
    let fetch = b.texts("fetchVariables")?;
    b.done()?;
    let fields = |key: i64, process: &str, version: i32| {
        json!({
            "processInstanceKey": k(key),
            "processDefinitionId": process,
            "processDefinitionVersion": version,
            "processDefinitionKey": k(f.definition_key(process, version.max(0) as u32)),
            "tenantId": TENANT,
        })
    };
    if wait {
        let r = f
            .create_process_instance_with_result(grpc(
                &headers,
                proto::CreateProcessInstanceWithResultRequest {
                    request: Some(start),
                    request_timeout: timeout,
                    fetch_variables: fetch,
                },
            ))
            .await?
            .into_inner();
        let mut out = fields(r.process_instance_key, &r.bpmn_process_id, r.version);
        out["variables"] = parsed(&r.variables);
        return ok(out);
    }
    let r = f
        .create_process_instance(grpc(&headers, start))
        .await?
        .into_inner();
    let mut out = fields(r.process_instance_key, &r.bpmn_process_id, r.version);
    out["variables"] = json!({});
    ok(out)
}

async fn cancel_instance(
    State(f): State<Face>,
    Path(key): Path<String>,
    headers: HeaderMap,
    req: HttpRequest,
) -> Answer {
    let mut b = Body::read(req).await?;
    b.ignore(&["operationReference"]);
    b.done()?;
    let process_instance_key = path_key("processInstanceKey", &key)?;
    f.cancel_process_instance(grpc(
        &headers,
        proto::CancelProcessInstanceRequest {
            process_instance_key,
            ..Default::default()
        },
    ))
    .await?;
    no_content()
}

async fn publish(State(f): State<Face>, headers: HeaderMap, req: HttpRequest) -> Answer {
    let mut b = Body::read(req).await?;
    let m = proto::PublishMessageRequest {
        name: b.text("name")?,
        correlation_key: b.text("correlationKey")?,
        time_to_live: b.int("timeToLive")?,
        message_id: b.text("messageId")?,
        variables: b.vars("variables")?,
        tenant_id: String::new(),
    };
    b.tenant()?;
    b.done()?;
    let r = f.publish_message(grpc(&headers, m)).await?.into_inner();
    ok(json!({"messageKey": k(r.key), "tenantId": TENANT}))
}

async fn correlate(State(f): State<Face>, headers: HeaderMap, req: HttpRequest) -> Answer {
    let mut b = Body::read(req).await?;
    let name = b.text("name")?;
    let key = b.text("correlationKey")?;
    let vars = variables("variables", &b.vars("variables")?)?;
    b.tenant()?;
    b.done()?;
    let caller = f.caller(&grpc(&headers, ()), "correlate").await?;
    let msg = crate::Publish {
        name: name.clone(),
        key,
        message_id: None,
        variables: vars,
        ttl: None,
        attributes: Default::default(),
    };
    let d = super::service::as_caller(caller.as_ref(), f.pf.correlate(msg))
        .await
        .map_err(status)?;
    let instance = d.instance.map(|i| k(f.key(i)));
    ok(json!({
        "messageKey": k(super::keys::key_of_name(f.pf.partition().index(), &d.message_id)),
        "processInstanceKey": instance,
        "tenantId": TENANT,
    }))
}

async fn broadcast(State(f): State<Face>, headers: HeaderMap, req: HttpRequest) -> Answer {
    let mut b = Body::read(req).await?;
    let s = proto::BroadcastSignalRequest {
        signal_name: b.text("signalName")?,
        variables: b.vars("variables")?,
        tenant_id: String::new(),
    };
    b.tenant()?;
    b.done()?;
    let r = f.broadcast_signal(grpc(&headers, s)).await?.into_inner();
    ok(json!({"signalKey": k(r.key), "tenantId": TENANT}))
}

async fn activate(State(f): State<Face>, headers: HeaderMap, req: HttpRequest) -> Answer {
    use tonic::codegen::tokio_stream::StreamExt;
    let mut b = Body::read(req).await?;
    let a = proto::ActivateJobsRequest {
        r#type: b.text("type")?,
        worker: b.text("worker")?,
        timeout: b.int("timeout")?,
        max_jobs_to_activate: b.int("maxJobsToActivate")?.clamp(-1, i32::MAX as i64) as i32,
        fetch_variable: b.texts("fetchVariable")?,
        request_timeout: b.int("requestTimeout")?,
        ..Default::default()
    };
    for t in b.texts("tenantIds")? {
        tenant_ok(&t)?;
    }
    b.ignore(&["tenantFilter"]);
    b.done()?;
    let mut stream = f.activate_jobs(grpc(&headers, a)).await?.into_inner();
    let mut jobs = Vec::new();
    while let Some(part) = stream.next().await {
        jobs.extend(part?.jobs.iter().map(job_json));
    }
    ok(json!({ "jobs": jobs }))
}

/// An activated job as the REST API writes it.
fn job_json(j: &proto::ActivatedJob) -> Value {
    json!({
        "jobKey": k(j.key),
        "type": j.r#type,
        "processInstanceKey": k(j.process_instance_key),
        "rootProcessInstanceKey": k(j.process_instance_key),
        "processDefinitionId": j.bpmn_process_id,
        "processDefinitionVersion": j.process_definition_version,
        "processDefinitionKey": k(j.process_definition_key),
        "elementId": j.element_id,
        "elementInstanceKey": k(j.element_instance_key),
        "customHeaders": parsed(&j.custom_headers),
        "worker": j.worker,
        "retries": j.retries,
        "deadline": j.deadline,
        "variables": parsed(&j.variables),
        "tenantId": TENANT,
        "kind": "BPMN_ELEMENT",
        "listenerEventType": "UNSPECIFIED",
        "tags": [],
    })
}

async fn complete(
    State(f): State<Face>,
    Path(key): Path<String>,
    headers: HeaderMap,
    req: HttpRequest,
) -> Answer {
    let mut b = Body::read(req).await?;
    let c = proto::CompleteJobRequest {
        job_key: path_key("jobKey", &key)?,
        variables: b.vars("variables")?,
        result: None,
    };
    b.done()?;
    f.complete_job(grpc(&headers, c)).await?;
    no_content()
}

async fn fail(
    State(f): State<Face>,
    Path(key): Path<String>,
    headers: HeaderMap,
    req: HttpRequest,
) -> Answer {
    let mut b = Body::read(req).await?;
    let x = proto::FailJobRequest {
        job_key: path_key("jobKey", &key)?,
        retries: b.int("retries")?.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
        error_message: b.text("errorMessage")?,
        retry_back_off: b.int("retryBackOff")?,
        variables: b.vars("variables")?,
    };
    b.done()?;
    f.fail_job(grpc(&headers, x)).await?;
    no_content()
}

async fn throw_error(
    State(f): State<Face>,
    Path(key): Path<String>,
    headers: HeaderMap,
    req: HttpRequest,
) -> Answer {
    let mut b = Body::read(req).await?;
    let x = proto::ThrowErrorRequest {
        job_key: path_key("jobKey", &key)?,
        error_code: b.text("errorCode")?,
        error_message: b.text("errorMessage")?,
        variables: b.vars("variables")?,
    };
    b.done()?;
    f.throw_error(grpc(&headers, x)).await?;
    no_content()
}

/// The body of `PATCH /v2/jobs/{key}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Changeset {
    retries: Option<i32>,
    timeout: Option<i64>,
}

async fn update_job(
    State(f): State<Face>,
    Path(key): Path<String>,
    headers: HeaderMap,
    req: HttpRequest,
) -> Answer {
    let mut b = Body::read(req).await?;
    let changes = b
        .take("changeset")
        .ok_or_else(|| Problem::bad("changeset: name retries or timeout"))?;
    b.ignore(&["operationReference"]);
    b.done()?;
    let changes: Changeset =
        serde_json::from_value(changes).map_err(|e| Problem::bad(format!("changeset: {e}")))?;
    let job_key = path_key("jobKey", &key)?;
    if changes.retries.is_none() && changes.timeout.is_none() {
        return Err(Problem::bad("changeset: name retries or timeout"));
    }
    if let Some(retries) = changes.retries {
        f.update_job_retries(grpc(
            &headers,
            proto::UpdateJobRetriesRequest {
                job_key,
                retries,
                ..Default::default()
            },
        ))
        .await?;
    }
    if let Some(timeout) = changes.timeout {
        f.update_job_timeout(grpc(
            &headers,
            proto::UpdateJobTimeoutRequest {
                job_key,
                timeout,
                ..Default::default()
            },
        ))
        .await?;
    }
    no_content()
}

async fn resolve(
    State(f): State<Face>,
    Path(key): Path<String>,
    headers: HeaderMap,
    req: HttpRequest,
) -> Answer {
    let mut b = Body::read(req).await?;
    b.ignore(&["operationReference"]);
    b.done()?;
    let incident_key = path_key("incidentKey", &key)?;
    f.resolve_incident(grpc(
        &headers,
        proto::ResolveIncidentRequest {
            incident_key,
            ..Default::default()
        },
    ))
    .await?;
    no_content()
}

async fn evaluate(State(f): State<Face>, headers: HeaderMap, req: HttpRequest) -> Answer {
    let mut b = Body::read(req).await?;
    let e = proto::EvaluateDecisionRequest {
        decision_id: b.text("decisionDefinitionId")?,
        decision_key: b.key("decisionDefinitionKey")?,
        variables: b.vars("variables")?,
        tenant_id: String::new(),
    };
    b.tenant()?;
    b.done()?;
    let r = f.evaluate_decision(grpc(&headers, e)).await?.into_inner();
    let evaluated: Vec<Value> = r
        .evaluated_decisions
        .iter()
        .map(|d| {
            json!({
                "decisionDefinitionId": d.decision_id,
                "decisionDefinitionKey": k(d.decision_key),
                "decisionDefinitionName": d.decision_name,
                "decisionDefinitionVersion": d.decision_version,
                "decisionDefinitionType": d.decision_type,
                "output": d.decision_output,
                "tenantId": TENANT,
                "matchedRules": [],
                "evaluatedInputs": [],
            })
        })
        .collect();
    ok(json!({
        "decisionDefinitionId": r.decision_id,
        "decisionDefinitionKey": k(r.decision_key),
        "decisionDefinitionName": r.decision_name,
        "decisionDefinitionVersion": r.decision_version,
        "decisionRequirementsId": r.decision_requirements_id,
        "decisionRequirementsKey": k(r.decision_requirements_key),
        "decisionInstanceKey": k(r.decision_instance_key),
        "decisionEvaluationKey": k(r.decision_evaluation_key),
        "output": r.decision_output,
        "failedDecisionDefinitionId": r.failed_decision_id,
        "failureMessage": r.failure_message,
        "tenantId": TENANT,
        "evaluatedDecisions": evaluated,
    }))
}

async fn set_variables(
    State(f): State<Face>,
    Path(key): Path<String>,
    headers: HeaderMap,
    req: HttpRequest,
) -> Answer {
    let mut b = Body::read(req).await?;
    let s = proto::SetVariablesRequest {
        element_instance_key: path_key("elementInstanceKey", &key)?,
        variables: b.vars("variables")?,
        local: b.flag("local")?,
        ..Default::default()
    };
    b.ignore(&["operationReference"]);
    b.done()?;
    f.set_variables(grpc(&headers, s)).await?;
    no_content()
}

async fn not_served(Path(rest): Path<String>) -> Problem {
    Problem(
        StatusCode::NOT_IMPLEMENTED,
        format!("postfach does not serve /v2/{rest} of Camunda's REST API"),
    )
}
