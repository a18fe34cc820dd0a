//! Messages and signals over HTTP: publish, correlate, list, requeue,
//! discard, signal (`/messages…`, `/signals`).
//!
//! Invariant: a thin edge over the library API; a publish answers only once
//! the message is durable.

use super::*;
use crate::server::auth::{Caller, Sent};

/// The message operations: publish, correlate, list, requeue, discard, and
/// signals.
pub(super) const OPERATIONS: &[Operation] = &[
    op("publish", Method::POST, "/messages", ByKey, P::Start),
    op(
        "correlate",
        Method::POST,
        "/messages/correlate",
        ByKey,
        P::Start,
    ),
    op(
        "messages",
        Method::GET,
        "/messages",
        Gather(List::Messages),
        Read,
    ),
    op(
        "requeue",
        Method::POST,
        "/messages/{id}/requeue",
        Find,
        Operate,
    ),
    op(
        "discard",
        Method::POST,
        "/messages/{id}/discard",
        Find,
        Operate,
    ),
    op("signal", Method::POST, "/signals", Signal, P::Start),
];

/// The routes of [`OPERATIONS`], with their OpenAPI documentation.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(publish, messages))
        .routes(routes!(correlate))
        .routes(routes!(requeue))
        .routes(routes!(discard))
        .routes(routes!(signal))
}

/// The body of `publish` and `correlate`: one message.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageBody {
    /// The message name.
    pub name: String,
    /// The correlation key.
    pub key: String,
    /// The publisher's message id (deduplication).
    pub id: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    /// The message's variables.
    pub variables: Vars,
    /// TTL like "24h"; "0s" disables buffering.
    pub ttl: Option<String>,
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
pub(super) async fn publish(
    State(s): State<AppState>,
    caller: Option<axum::Extension<Caller>>,
    b: Result<Json<MessageBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let p = body(b)?.into_publish()?;
    if let Some(no) = outside_processes(&s, caller.as_deref(), Sent::Message(&p.name))? {
        return Ok(no);
    }
    let d = s.pf.publish(p).await?;
    Ok(Json(crate::contract::delivery_json(&d)).into_response())
}

#[utoipa::path(post, path = "/messages/correlate", request_body = MessageBody, responses((status = 200, description = "Correlate synchronously; 409 with the reason when rejected", body = serde_json::Value)))]
pub(super) async fn correlate(
    State(s): State<AppState>,
    caller: Option<axum::Extension<Caller>>,
    b: Result<Json<MessageBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let p = body(b)?.into_publish()?;
    if let Some(no) = outside_processes(&s, caller.as_deref(), Sent::Message(&p.name))? {
        return Ok(no);
    }
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

/// The query of `messages`.
#[derive(serde::Serialize, Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessagesQuery {
    #[serde(default)]
    /// Only buffered messages.
    pub buffered: bool,
    #[serde(default)]
    /// Only parked messages.
    pub parked: bool,
    /// Only parked messages with this reason.
    pub reason: Option<String>,
    /// The `next` cursor of the previous page.
    pub after: Option<String>,
    /// Page size, 1 to 1000 (default 200).
    pub limit: Option<usize>,
}

impl MessagesQuery {
    /// The filter it asks for (paging aside); an unknown reason names the
    /// reasons there are.
    pub fn filter(&self) -> Result<MessageFilter, String> {
        Ok(MessageFilter {
            buffered: self.buffered,
            parked: self.parked,
            reason: self
                .reason
                .as_deref()
                .map(Reason::parse_or_list)
                .transpose()?,
        })
    }
}

#[utoipa::path(get, path = "/messages", params(MessagesQuery), responses((status = 200, description = "One page of buffered and parked messages (both unless one is asked for): parked ones by sequence, then buffered ones oldest first, each with its expiry, reason, candidates, attributes and raw payload; `next` is the cursor (`after`) of the following page", body = serde_json::Value)))]
pub(super) async fn messages(
    State(s): State<AppState>,
    Query(q): Query<MessagesQuery>,
) -> Result<Response, ApiError> {
    let filter = q.filter().map_err(ApiError::BadRequest)?;
    let limit = page_limit(q.limit, 200)?;
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
pub(super) async fn requeue(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let d = s.pf.requeue(&id).await?;
    Ok(Json(crate::contract::delivery_json(&d)))
}

/// The body of `discard`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscardBody {
    /// Why it is discarded (recorded).
    pub why: String,
    /// Who discards it (recorded).
    pub by: String,
}

#[utoipa::path(post, path = "/messages/{id}/discard", request_body = DiscardBody, params(("id" = String, Path, description = "message id (or NAME/ID)")), responses((status = 200, description = "End a parked message; who and why are recorded", body = serde_json::Value)))]
pub(super) async fn discard(
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

/// The body of `signal`.
#[derive(serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalBody {
    /// The signal name.
    pub name: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    /// The variables the signal carries.
    pub variables: Vars,
    /// With an id the signal is applied once here, however often it is sent
    /// (a gateway and a partition's forwarder send one).
    pub id: Option<String>,
}

#[utoipa::path(post, path = "/signals", request_body = SignalBody, responses((status = 200, description = "Broadcast a signal; returns how many subscriptions it reached (with an id: applied once, a repeat answers what the first reached)", body = serde_json::Value)))]
pub(super) async fn signal(
    State(s): State<AppState>,
    caller: Option<axum::Extension<Caller>>,
    b: Result<Json<SignalBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let b = body(b)?;
    if let Some(no) = outside_processes(&s, caller.as_deref(), Sent::Signal(&b.name))? {
        return Ok(no);
    }
    let n = match &b.id {
        Some(id) => s.pf.signal_once(id, &b.name, b.variables).await?,
        None => s.pf.signal(&b.name, b.variables).await?,
    };
    Ok(Json(documents::signal(&b.name, n, b.id.as_deref())).into_response())
}
