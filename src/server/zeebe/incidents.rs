//! `POST /v2/incidents/search`: the incidents of jobs, as Camunda's REST API
//! lists them — the only way Camunda's Java client learns an incident's key
//! (which here is its job's key, so `ResolveIncident` finds the job).
//!
//! Invariant: read-only, under the permission of the catalogue's `jobs`;
//! a filter field postfach cannot apply is refused by name, never dropped.
//! Incidents of tokens (a gateway without a way out, a failed mapping) are
//! not jobs: they are repaired by the token operations and not listed here.

use super::Face;
use super::rest::{Answer, Body, Problem, grpc, k};
use super::service::{TENANT, status};
use axum::Json;
use axum::extract::{Request as HttpRequest, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use serde_json::{Value, json};

/// Most incidents one page lists.
const PAGE_MAX: usize = 1000;

/// The filter fields postfach applies, each an exact match.
#[derive(Default)]
struct Filter {
    incident: Option<i64>,
    job: Option<i64>,
    instance: Option<i64>,
    element: Option<String>,
    process: Option<String>,
}

/// A filter value: the value itself, or `{"$eq": value}`.
fn exact(field: &str, v: Value) -> Result<Value, Problem> {
    match v {
        Value::Object(mut o) if o.len() == 1 && o.contains_key("$eq") => {
            Ok(o.remove("$eq").unwrap_or(Value::Null))
        }
        Value::Object(_) => Err(Problem::bad(format!(
            "filter.{field}: only an exact value or {{\"$eq\": value}} is served"
        ))),
        v => Ok(v),
    }
}

fn key_value(field: &str, v: Value) -> Result<i64, Problem> {
    let v = exact(field, v)?;
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .ok_or_else(|| Problem::bad(format!("filter.{field}: {v} is no key")))
}

fn text_value(field: &str, v: Value) -> Result<String, Problem> {
    match exact(field, v)? {
        Value::String(s) => Ok(s),
        v => Err(Problem::bad(format!("filter.{field}: {v} is no string"))),
    }
}

impl Filter {
    fn read(v: Option<Value>) -> Result<Filter, Problem> {
        let mut f = Filter::default();
        let fields = match v {
            None | Some(Value::Null) => return Ok(f),
            Some(Value::Object(o)) => o,
            Some(v) => return Err(Problem::bad(format!("filter must be an object, not {v}"))),
        };
        for (name, v) in fields {
            if v.is_null() {
                continue;
            }
            match name.as_str() {
                "incidentKey" => f.incident = Some(key_value(&name, v)?),
                "jobKey" => f.job = Some(key_value(&name, v)?),
                "processInstanceKey" => f.instance = Some(key_value(&name, v)?),
                "elementId" => f.element = Some(text_value(&name, v)?),
                "processDefinitionId" => f.process = Some(text_value(&name, v)?),
                "state" => {
                    let s = text_value(&name, v)?;
                    if s != "ACTIVE" {
                        return Err(Problem::bad(format!(
                            "filter.state '{s}': postfach lists the active incidents only"
                        )));
                    }
                }
                "tenantId" => super::rest::tenant_ok(&text_value(&name, v)?)?,
                other => {
                    return Err(Problem::bad(format!(
                        "filter.{other} is not served by postfach: filter by incidentKey, jobKey, processInstanceKey, elementId, processDefinitionId, state or tenantId"
                    )));
                }
            }
        }
        Ok(f)
    }
}

/// The page asked for: how many, from where.
fn page(v: Option<Value>) -> Result<(usize, usize), Problem> {
    let Some(Value::Object(o)) = v else {
        return Ok((100, 0));
    };
    let mut b = Body::parse(Value::Object(o).to_string().as_bytes())?;
    let limit = match b.int("limit")? {
        0 => 100,
        n if (1..=PAGE_MAX as i64).contains(&n) => n as usize,
        n => {
            return Err(Problem::bad(format!(
                "page.limit {n} is not within 1..={PAGE_MAX}"
            )));
        }
    };
    let from =
        usize::try_from(b.int("from")?).map_err(|_| Problem::bad("page.from is negative"))?;
    b.done()?;
    Ok((limit, from))
}

pub(super) async fn search(State(f): State<Face>, headers: HeaderMap, req: HttpRequest) -> Answer {
    let bytes = axum::body::to_bytes(req.into_body(), super::MAX_MESSAGE)
        .await
        .map_err(|e| Problem::bad(format!("the body could not be read: {e}")))?;
    let mut b = Body::parse(&bytes)?;
    let filter = Filter::read(b.take("filter"))?;
    let (limit, from) = page(b.take("page"))?;
    b.done()?;
    f.caller(&grpc(&headers, ()), "jobs").await?;
    let reader = f.pf.reader().map_err(status)?;
    let jobs = reader.jobs(true).map_err(|e| status(e.into()))?;
    let partition = f.pf.partition().index();
    let mut items = Vec::new();
    for j in jobs {
        let Some(instance) = j.instance.as_deref().and_then(|i| i.parse::<u64>().ok()) else {
            continue;
        };
        let id: u64 = j.job.parse().unwrap_or(0);
        let (job_key, instance_key) = (f.key(id), f.key(instance));
        let process = reader
            .instance_record(instance)
            .map_err(|e| status(e.into()))?
            .map(|i| (i.process, i.version))
            .unwrap_or_default();
        let keep = filter.incident.is_none_or(|x| x == job_key)
            && filter.job.is_none_or(|x| x == job_key)
            && filter.instance.is_none_or(|x| x == instance_key)
            && filter.element.as_ref().is_none_or(|e| *e == j.element)
            && filter.process.as_ref().is_none_or(|p| *p == process.0);
        if !keep {
            continue;
        }
        let created = j.history.last().map_or(j.due_at.clone(), |a| a.at.clone());
        items.push(json!({
            "incidentKey": k(job_key),
            "jobKey": k(job_key),
            "processInstanceKey": k(instance_key),
            "rootProcessInstanceKey": k(instance_key),
            "processDefinitionId": process.0,
            "processDefinitionKey": k(f.definition_key(&process.0, process.1)),
            "elementId": j.element,
            "elementInstanceKey": k(super::keys::element_key_of(partition, id)),
            "errorType": "JOB_NO_RETRIES",
            "errorMessage": j.error.unwrap_or_default(),
            "creationTime": created,
            "state": "ACTIVE",
            "tenantId": TENANT,
        }));
    }
    let total = items.len();
    let items: Vec<Value> = items.into_iter().skip(from).take(limit).collect();
    Ok(Json(json!({
        "items": items,
        "page": {"totalItems": total, "hasMoreTotalItems": false},
    }))
    .into_response())
}
