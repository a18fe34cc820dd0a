//! Key slots over HTTP: the slot map a partition holds (`GET /slots`), a
//! move of its slots begun (`POST /slots/moves`), and the steps a move's
//! target applies, sent by its source (`POST /slots/steps`).
//!
//! Invariant: a thin edge over the library API; every value of a body is
//! range-checked before a command is formed, and `/slots/steps` takes only
//! the target's steps (`Import`, `Adopt`) in the log's own encoding
//! (base64 in JSON).

use super::*;
use crate::engine::MoveCommand;

/// The slot operations.
pub(super) const OPERATIONS: &[Operation] = &[
    op("slots", Method::GET, "/slots", SlotMap, Read),
    op("move_slots", Method::POST, "/slots/moves", MoveSlots, Admin),
    op("slot_step", Method::POST, "/slots/steps", Local, Admin),
];

/// The routes of [`OPERATIONS`], with their OpenAPI documentation.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(slots))
        .routes(routes!(move_slots))
        .routes(with_limit(routes!(slot_step), MAX_MODEL_BODY * 8))
}

#[utoipa::path(get, path = "/slots", responses((status = 200, description = "The slot map: on a partition the map it holds (`slot_count`, `map_version`, `slots`: `[[first, last, partition], …]`), the ranges it owns and its moves in flight; on a gateway the cluster's map gathered from every partition (what `cluster status` and `cluster slot` show)", body = serde_json::Value)))]
async fn slots(State(s): State<AppState>) -> ApiResult {
    Ok(Json(crate::ops::slots_json(
        s.pf.reader()?.slot_state()?.as_ref(),
    )))
}

/// The body of `move_slots`.
#[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct MoveBody {
    /// First slot of the range.
    pub first: u32,
    /// Last slot of the range (inclusive).
    pub last: u32,
    /// The partition that takes them.
    pub to: u32,
    /// Through a gateway: only the slots of the range this partition owns
    /// (default: every partition's). On a partition: must be it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<u32>,
    /// On a partition: where the target serves its API (a gateway fills it
    /// in from its partitions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_url: Option<String>,
    /// On a partition: the map version the move makes (a gateway gives
    /// each source its own; default one above the partition's map).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
}

#[utoipa::path(post, path = "/slots/moves", request_body = MoveBody, responses((status = 200, description = "Begin moving the slots of the range this partition owns to partition `to`: what they hold is fixed as a move batch the server copies a slice at a time while they still take writes, then sends the writes made meanwhile again and fences the slots (their writes answered 503) only for the last of those, until the target owns them; answers the batch (`batch status` follows it). Through a gateway every partition that owns slots of the range begins its part (`moves`: one batch per source)", body = serde_json::Value)))]
async fn move_slots(
    State(s): State<AppState>,
    b: Result<Json<MoveBody>, JsonRejection>,
) -> ApiResult {
    let b = body(b)?;
    let state = s.pf.reader()?.slot_state()?.ok_or_else(|| {
        Error::Engine(EngineError::BatchRefused {
            batch: 0,
            reason: "an unpartitioned server has no slots to move".into(),
        })
    })?;
    crate::slots::parse_range(&format!("{}-{}", b.first, b.last), state.map.slots())
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    if let Some(from) = b.from.filter(|f| *f != state.me) {
        return Err(ApiError::BadRequest(format!(
            "from: this is partition {}, not {from}",
            state.me
        )));
    }
    if b.to >= crate::partition::MAX_PARTITIONS {
        return Err(ApiError::BadRequest(format!(
            "to: partition {} is beyond the {} a cluster may have",
            b.to,
            crate::partition::MAX_PARTITIONS
        )));
    }
    let to_url = b.to_url.filter(|u| !u.trim().is_empty()).ok_or_else(|| {
        ApiError::BadRequest(
            "to_url: where partition `to` serves its API is needed on a partition (a gateway gives it)".into(),
        )
    })?;
    if !(to_url.starts_with("http://") || to_url.starts_with("https://")) {
        return Err(ApiError::BadRequest(format!(
            "to_url {to_url:?}: give http://HOST:PORT or https://HOST:PORT"
        )));
    }
    let rec =
        s.pf.begin_slot_move(b.first, b.last, b.to, &to_url, b.version)
            .await?;
    Ok(Json(crate::ops::batch_json(&rec, None)))
}

/// The body of `slot_step`: a step of a move as the log encodes it, in
/// base64 (sent by a move's source, never by a person).
#[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct SlotStepBody {
    /// The step's log encoding, base64 (standard alphabet, padded).
    pub step: String,
}

impl SlotStepBody {
    /// The body of `step`.
    pub fn of(step: &MoveCommand) -> Result<Self, crate::CodecError> {
        use base64::Engine;
        Ok(SlotStepBody {
            step: base64::engine::general_purpose::STANDARD.encode(crate::codec::encode(step)?),
        })
    }

    /// The step it carries; what is wrong with it, in words.
    pub fn step(&self) -> Result<MoveCommand, String> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(self.step.as_bytes())
            .map_err(|e| format!("step: not base64: {e}"))?;
        crate::codec::decode(&bytes).map_err(|e| format!("step: not a move step: {e}"))
    }
}

#[utoipa::path(post, path = "/slots/steps", request_body = SlotStepBody, responses((status = 200, description = "A step of a slot move this partition is the target of (`Import`: a slice of what the slots hold, written; `Adopt`: the slots are this partition's from now on), sent by the move's source, never by a person; a step said again changes nothing", body = serde_json::Value)))]
async fn slot_step(
    State(s): State<AppState>,
    b: Result<Json<SlotStepBody>, JsonRejection>,
) -> ApiResult {
    let step = body(b)?.step().map_err(ApiError::BadRequest)?;
    if !matches!(step, MoveCommand::Import { .. } | MoveCommand::Adopt { .. }) {
        return Err(ApiError::BadRequest(
            "only a move's target steps (import, adopt) are taken here".into(),
        ));
    }
    s.pf.slot_move_step(step).await?;
    Ok(Json(json!({"ok": true})))
}
