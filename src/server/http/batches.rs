//! Durable batches over HTTP: create one over the filters of the lists,
//! list them, follow one, stop one (`/batches…`).
//!
//! Invariant: a thin edge over the library API; the server's batch runner
//! works a created batch off, so creating answers at once.

use super::instances::InstancesQuery;
use super::messages::MessagesQuery;
use super::*;
use crate::store::batches::BatchOp;

/// The batch operations.
pub(super) const OPERATIONS: &[Operation] = &[
    op("create_batch", Method::POST, "/batches", Summed, Admin),
    op("batches", Method::GET, "/batches", Summed, Read),
    op(
        "batch",
        Method::GET,
        "/batches/{id}",
        ByPartitionId("id"),
        Read,
    ),
    op(
        "stop_batch",
        Method::POST,
        "/batches/{id}/stop",
        ByPartitionId("id"),
        Admin,
    ),
];

/// The routes of [`OPERATIONS`], with their OpenAPI documentation.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_batch, batches))
        .routes(routes!(batch))
        .routes(routes!(stop_batch))
}

/// The body of `create_batch`: the operation, what it needs, and which
/// items (the filters of `instances`, or of `messages` for `requeue` and
/// `discard`).
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct BatchBody {
    /// `cancel`, `retry`, `migrate`, `move-token`, `requeue`, `discard` or `delete`.
    pub operation: String,
    /// `migrate`: the version the instances run now.
    pub from_version: Option<u32>,
    /// `migrate`: the version they move to.
    pub to_version: Option<u32>,
    /// `migrate`: element ids of the old version mapped to the new.
    #[serde(default)]
    pub map: BTreeMap<String, String>,
    /// `move-token`: the element the token rests at.
    pub from: Option<String>,
    /// `move-token`: the element it moves to.
    pub to: Option<String>,
    /// `discard`: who discards.
    pub by: Option<String>,
    /// `discard`: why.
    pub why: Option<String>,
    /// Only instances of this process (`migrate`: the process migrated).
    pub process: Option<String>,
    /// Only instances with a token at this element.
    pub waiting_at: Option<String>,
    /// `active`, `incident`, `completed` or `cancelled`.
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
    /// `requeue`, `discard`: only parked messages with this reason.
    pub reason: Option<String>,
}

impl BatchBody {
    /// The operation and the selection; what is wrong names the field.
    pub fn batch(self) -> Result<(BatchOp, crate::Selection), String> {
        let need = |v: Option<String>, field: &str| {
            v.filter(|s| !s.trim().is_empty())
                .ok_or_else(|| format!("{field} is needed for a {} batch", self.operation))
        };
        let op = match self.operation.as_str() {
            "cancel" => BatchOp::Cancel,
            "retry" => BatchOp::Retry,
            "delete" => BatchOp::Delete,
            "requeue" => BatchOp::Requeue,
            "migrate" => BatchOp::Migrate(crate::MigrationPlan {
                process: need(self.process.clone(), "process")?,
                from: self
                    .from_version
                    .ok_or("from_version is needed for a migrate batch")?,
                to: self
                    .to_version
                    .ok_or("to_version is needed for a migrate batch")?,
                map: self.map.clone(),
            }),
            "move-token" => BatchOp::MoveToken {
                from: need(self.from.clone(), "from")?,
                to: need(self.to.clone(), "to")?,
            },
            "discard" => BatchOp::Discard {
                by: need(self.by.clone(), "by")?,
                why: need(self.why.clone(), "why")?,
            },
            other => {
                return Err(format!(
                    "operation {other:?}: expected cancel, retry, migrate, move-token, requeue, discard or delete"
                ));
            }
        };
        let selection = if op.on_messages() {
            crate::Selection::Messages(
                MessagesQuery {
                    parked: true,
                    reason: self.reason,
                    ..MessagesQuery::default()
                }
                .filter()?,
            )
        } else {
            crate::Selection::Instances(
                InstancesQuery {
                    waiting_at: self.waiting_at,
                    state: self.state,
                    process: self.process,
                    key: self.key,
                    variable: self.variable,
                    value: self.value,
                    started_from: self.started_from,
                    started_before: self.started_before,
                    has_incident: self.has_incident,
                    ..InstancesQuery::default()
                }
                .filter()?,
            )
        };
        Ok((op, selection))
    }
}

/// A batch's answer: its view, and its id in `batches` (a gateway's answer
/// lists every partition's there).
fn created(b: &crate::BatchRecord) -> Value {
    let mut v = crate::ops::batch_json(b, None);
    v["batches"] = json!([b.id.to_string()]);
    v
}

#[utoipa::path(post, path = "/batches", request_body = BatchBody, responses((status = 200, description = "Create a durable batch over the items the filters choose now; the server works it off a slice at a time", body = serde_json::Value)))]
pub(super) async fn create_batch(
    State(s): State<AppState>,
    b: Result<Json<BatchBody>, JsonRejection>,
) -> ApiResult {
    let (op, selection) = body(b)?.batch().map_err(ApiError::BadRequest)?;
    let rec = s.pf.create_batch(op, &selection).await?;
    Ok(Json(created(&rec)))
}

#[utoipa::path(get, path = "/batches", responses((status = 200, description = "Every batch, newest first, with its progress", body = serde_json::Value)))]
pub(super) async fn batches(State(s): State<AppState>) -> ApiResult {
    let list = s.pf.reader()?.batches()?;
    Ok(Json(json!({
        "batches": list.iter().map(|b| crate::ops::batch_json(b, None)).collect::<Vec<_>>(),
    })))
}

#[utoipa::path(get, path = "/batches/{id}", params(("id" = u64, Path, description = "batch id")), responses((status = 200, description = "A batch's progress with its refused items and their reasons; 404 for an unknown one", body = serde_json::Value)))]
pub(super) async fn batch(State(s): State<AppState>, Path(id): Path<u64>) -> ApiResult {
    let status =
        s.pf.reader()?
            .batch(id, crate::ops::REFUSED_SHOWN)?
            .ok_or(Error::Engine(EngineError::UnknownBatch(id)))?;
    Ok(Json(crate::ops::batch_json(&status.record, Some(&status))))
}

#[utoipa::path(post, path = "/batches/{id}/stop", params(("id" = u64, Path, description = "batch id")), responses((status = 200, description = "Stop a running batch; the items it did not reach keep no outcome (409 when it is not running)", body = serde_json::Value)))]
pub(super) async fn stop_batch(State(s): State<AppState>, Path(id): Path<u64>) -> ApiResult {
    let rec = s.pf.stop_batch(id).await?;
    Ok(Json(crate::ops::batch_json(&rec, None)))
}
