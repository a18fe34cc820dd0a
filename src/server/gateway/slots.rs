//! The cluster's slot map as a gateway holds it: gathered from the
//! partitions, each authoritative for the slots it owns, the rest taken from
//! the newest map any of them holds ([`crate::slots`]).
//!
//! Invariants: a gateway routes by the newest map it gathered; a partition
//! that answers "another partition owns this" (421) names the owner and its
//! map version, and the gateway sends the request there once and gathers the
//! map again — so a stale map costs a hop, never a write on the wrong
//! partition (the partition refuses before writing). A slot in a move is
//! answered 503 by its owner; the gateway retries that for a while before it
//! passes the 503 on.

use super::Gw;
use super::client::{Answer, Unreachable};
use crate::slots::{SlotMap, SlotRange};
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, header};
use serde_json::{Value, json};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// How long a gathered map is used before it is gathered again.
const FRESH: Duration = Duration::from_secs(2);
/// How long a write for a slot in a move is retried before its 503 is
/// passed on, and how often.
const MOVING_WAIT: Duration = Duration::from_secs(5);
const MOVING_RETRY: Duration = Duration::from_millis(50);

/// The map a gateway routes by, and when it was gathered.
#[derive(Default)]
pub(super) struct MapCache {
    held: RwLock<Option<(Arc<SlotMap>, Instant)>>,
}

impl MapCache {
    fn fresh(&self) -> Option<Arc<SlotMap>> {
        let held = self.held.read().ok()?;
        let (map, at) = held.as_ref()?;
        (at.elapsed() < FRESH).then(|| map.clone())
    }

    fn any(&self) -> Option<Arc<SlotMap>> {
        self.held.read().ok()?.as_ref().map(|(m, _)| m.clone())
    }

    /// The held map is gathered again before it is next used.
    pub(super) fn stale(&self) {
        if let Ok(mut held) = self.held.write()
            && let Some((_, at)) = held.as_mut()
        {
            *at = Instant::now() - FRESH;
        }
    }

    fn put(&self, map: Arc<SlotMap>) {
        if let Ok(mut held) = self.held.write() {
            *held = Some((map, Instant::now()));
        }
    }
}

/// One partition's answer to `GET /slots`.
struct Held {
    partition: u32,
    slots: u64,
    base: u32,
    version: u64,
    ranges: Vec<SlotRange>,
    moves: Vec<Value>,
}

fn held_of(v: &Value) -> Option<Held> {
    let ranges = v
        .get("slots")?
        .as_array()?
        .iter()
        .map(|r| {
            let n = |i: usize| r.get(i).and_then(Value::as_u64).map(|x| x as u32);
            Some(SlotRange {
                first: n(0)?,
                last: n(1)?,
                partition: n(2)?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Held {
        partition: v.get("partition")?.as_u64()? as u32,
        slots: v.get("slot_count")?.as_u64()?,
        base: v.get("base_partitions")?.as_u64()? as u32,
        version: v.get("map_version")?.as_u64()?,
        ranges,
        moves: v
            .get("moves")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    })
}

/// The cluster's map from what the partitions hold: every slot on the
/// partition that claims it at the highest version (a partition's own slots
/// are authoritative), slots no answering partition claims as the newest
/// map says. `None` when no partition holds a map (unpartitioned).
pub(super) fn merge(answers: &[Value]) -> Option<(SlotMap, Vec<Value>)> {
    let held: Vec<Held> = answers.iter().filter_map(held_of).collect();
    let newest = held.iter().max_by_key(|h| h.version)?;
    let slots = newest.slots;
    let version = held.iter().map(|h| h.version).max().unwrap_or(1);
    // (owner, version it is claimed at, claimed by the owner itself)
    let mut owner: Vec<(u32, u64, bool)> = vec![(0, 0, false); slots as usize];
    for r in &newest.ranges {
        for s in r.first..=r.last.min(slots as u32 - 1) {
            owner[s as usize] = (r.partition, newest.version, false);
        }
    }
    for h in held.iter().filter(|h| h.slots == slots) {
        for r in h.ranges.iter().filter(|r| r.partition == h.partition) {
            for s in r.first..=r.last.min(slots as u32 - 1) {
                let o = &mut owner[s as usize];
                if !o.2 || h.version > o.1 {
                    *o = (h.partition, h.version, true);
                }
            }
        }
    }
    let mut ranges: Vec<SlotRange> = Vec::new();
    for (s, (p, _, _)) in owner.iter().enumerate() {
        match ranges.last_mut() {
            Some(r) if r.partition == *p => r.last = s as u32,
            _ => ranges.push(SlotRange {
                first: s as u32,
                last: s as u32,
                partition: *p,
            }),
        }
    }
    let map = SlotMap::from_ranges(slots, version, newest.base, &ranges).ok()?;
    let moves = held.iter().flat_map(|h| h.moves.clone()).collect();
    Some((map, moves))
}

/// The headers of the gateway's own questions: its admin token when it
/// has one, else the caller's.
fn own_headers(gw: &Gw, caller: &HeaderMap) -> HeaderMap {
    match &gw.admin {
        Some(t) => {
            let mut h = HeaderMap::new();
            if let Ok(v) = header::HeaderValue::from_str(&format!("Bearer {t}")) {
                h.insert(header::AUTHORIZATION, v);
            }
            h
        }
        None => caller.clone(),
    }
}

/// Asks every partition for the map it holds; the answers that came.
async fn gather(gw: &Gw, headers: &HeaderMap) -> Vec<Value> {
    let headers = own_headers(gw, headers);
    let mut set = tokio::task::JoinSet::new();
    for i in 0..gw.parts.count() {
        let (parts, headers) = (gw.parts.clone(), headers.clone());
        set.spawn(async move {
            parts
                .send(i, Method::GET, "/slots", &headers, Bytes::new())
                .await
        });
    }
    let mut out = Vec::new();
    while let Some(done) = set.join_next().await {
        if let Ok(Ok(a)) = done
            && a.status.is_success()
            && let Some(v) = a.json()
        {
            out.push(v);
        }
    }
    out
}

/// The map to route by: the one held while fresh, else gathered now (the
/// one held, or the contiguous map of the gateway's partitions, when no
/// partition answers).
pub(super) async fn map(gw: &Gw, headers: &HeaderMap) -> Arc<SlotMap> {
    if let Some(m) = gw.map.fresh() {
        return m;
    }
    refresh(gw, headers).await
}

/// Gathers the map again.
pub(super) async fn refresh(gw: &Gw, headers: &HeaderMap) -> Arc<SlotMap> {
    if let Some((m, _)) = merge(&gather(gw, headers).await) {
        let m = Arc::new(m);
        gw.map.put(m.clone());
        return m;
    }
    gw.map.any().unwrap_or_else(|| {
        Arc::new(
            SlotMap::new(gw.parts.count().max(1))
                .unwrap_or_else(|_| SlotMap::new(1).expect("one partition is always a map")),
        )
    })
}

/// The cluster's map gathered now (and held for routing) with every
/// partition's moves in flight; no map when no partition holds one.
pub(super) async fn gathered(gw: &Gw, headers: &HeaderMap) -> (Option<Arc<SlotMap>>, Vec<Value>) {
    match merge(&gather(gw, headers).await) {
        Some((map, moves)) => {
            let map = Arc::new(map);
            gw.map.put(map.clone());
            (Some(map), moves)
        }
        None => (None, Vec::new()),
    }
}

/// The map in the shape `cluster status --json` and `GET /slots` share.
pub(super) fn map_json(map: &SlotMap, moves: Vec<Value>) -> Value {
    json!({
        "slot_count": map.slots(),
        "base_partitions": map.base(),
        "map_version": map.version(),
        "slots": map.to_json(),
        "moves": moves,
    })
}

/// A request as the gateway passes it on: method, path with query,
/// headers and body.
pub(super) struct Sent<'a> {
    pub(super) method: &'a Method,
    pub(super) path: &'a str,
    pub(super) headers: &'a HeaderMap,
    pub(super) body: &'a Bytes,
}

/// Sends a request placed on partition `at` by the map: a 421 naming
/// another owner is sent there (a few hops at most; the map is gathered
/// again before its next use), a 503 for a slot in a move is retried until
/// the move is done or [`MOVING_WAIT`] passed.
pub(super) async fn placed(gw: &Gw, at: u32, r: Sent<'_>) -> Result<Answer, Unreachable> {
    let started = Instant::now();
    let mut at = at;
    // an owner named by a refusal is followed a few times at most: a move
    // hands a slot on once, a stale map needs one hop
    let mut hops = 0;
    loop {
        let a = gw
            .parts
            .send(at, r.method.clone(), r.path, r.headers, r.body.clone())
            .await?;
        if a.status == StatusCode::MISDIRECTED_REQUEST
            && hops < 3
            && let Some(owner) = a
                .json()
                .and_then(|v| v.get("partition").and_then(Value::as_u64))
            && owner < u64::from(gw.parts.count())
            && owner != u64::from(at)
        {
            hops += 1;
            at = owner as u32;
            gw.map.stale();
            continue;
        }
        // the slot is moving: its writes wait until the move is done, when
        // the old owner names the new one (421, above)
        if a.status == StatusCode::SERVICE_UNAVAILABLE
            && a.json().is_some_and(|v| v.get("moving").is_some())
            && started.elapsed() < MOVING_WAIT
        {
            tokio::time::sleep(MOVING_RETRY).await;
            continue;
        }
        return Ok(a);
    }
}

/// `POST /slots/moves` through a gateway: the range's slots move to
/// partition `to` — every partition that owns slots of it begins its part,
/// with `to`'s address and a map version of its own. Refused (nothing
/// begun) when `to` is not one of the gateway's partitions or does not
/// answer ready, or when no other partition owns a slot of the range.
pub(super) async fn begin_moves(
    gw: &Gw,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(StatusCode, Value), (StatusCode, String)> {
    let bad = |why: String| (StatusCode::BAD_REQUEST, why);
    let _set = gw.sets.try_read().map_err(|_| {
        (
            StatusCode::CONFLICT,
            "a backup set is being taken; begin the move once it is done".to_string(),
        )
    })?;
    let b: crate::server::http::requests::MoveBody =
        serde_json::from_slice(body).map_err(|e| bad(format!("request body: {e}")))?;
    if b.to >= gw.parts.count() {
        return Err(bad(format!(
            "to: partition {} is not one of the gateway's {} partitions (give it --partition-url {}=URL)",
            b.to,
            gw.parts.count(),
            b.to
        )));
    }
    let answers = gather(gw, headers).await;
    let (map, in_flight) = match merge(&answers) {
        Some((m, moves)) => (Arc::new(m), moves),
        None if answers.is_empty() => {
            return Err((
                StatusCode::SERVICE_UNAVAILABLE,
                "no partition answered with its slot map".into(),
            ));
        }
        None => {
            return Err((
                StatusCode::CONFLICT,
                "the cluster is unpartitioned: it has no slots to move".into(),
            ));
        }
    };
    gw.map.put(map.clone());
    // each move makes a version of its own, above every one in flight
    let base = in_flight
        .iter()
        .filter_map(|m| m["version"].as_u64())
        .fold(map.version(), u64::max);
    crate::slots::parse_range(&format!("{}-{}", b.first, b.last), map.slots())
        .map_err(|e| bad(e.to_string()))?;
    target_ready(gw, b.to, headers).await?;
    let mut sources: Vec<u32> = map
        .ranges()
        .iter()
        .filter(|r| r.last >= b.first && r.first <= b.last && r.partition != b.to)
        .filter(|r| b.from.is_none_or(|f| f == r.partition))
        .map(|r| r.partition)
        .collect();
    sources.sort_unstable();
    sources.dedup();
    if sources.is_empty() {
        return Err((
            StatusCode::CONFLICT,
            match b.from {
                Some(f) => format!("partition {f} owns none of slots {}-{}", b.first, b.last),
                None => format!(
                    "slots {}-{} are on partition {} already",
                    b.first, b.last, b.to
                ),
            },
        ));
    }
    let mut moves = Vec::new();
    let mut failed = None;
    for (k, src) in sources.iter().enumerate() {
        let part = crate::server::http::requests::MoveBody {
            first: b.first,
            last: b.last,
            to: b.to,
            from: Some(*src),
            to_url: Some(gw.parts.url(b.to).to_string()),
            version: Some(base + 1 + k as u64),
        };
        let sent = serde_json::to_vec(&part).unwrap_or_default();
        let mut h = headers.clone();
        h.insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        match gw
            .parts
            .send(*src, Method::POST, "/slots/moves", &h, Bytes::from(sent))
            .await
        {
            Ok(a) if a.status.is_success() => {
                let mut v = a.json().unwrap_or(Value::Null);
                v["partition"] = json!(src);
                moves.push(v);
            }
            Ok(a) => {
                let why = a
                    .json()
                    .and_then(|v| v["error"].as_str().map(str::to_string))
                    .unwrap_or_else(|| a.status.to_string());
                moves.push(json!({"partition": src, "error": why}));
                failed.get_or_insert(a.status);
            }
            Err(u) => {
                moves.push(json!({"partition": src, "error": u.to_string()}));
                failed.get_or_insert(StatusCode::SERVICE_UNAVAILABLE);
            }
        }
    }
    gw.map.stale();
    Ok((
        failed.unwrap_or(StatusCode::OK),
        json!({"moves": moves, "map_version": map.version()}),
    ))
}

/// Refuses a move whose target does not answer ready.
async fn target_ready(gw: &Gw, to: u32, headers: &HeaderMap) -> Result<(), (StatusCode, String)> {
    match gw
        .parts
        .send(to, Method::GET, "/health/ready", headers, Bytes::new())
        .await
    {
        Ok(a) if a.status.is_success() => Ok(()),
        Ok(a) => Err((
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "partition {to} is not ready ({}): a move needs its target up",
                a.status
            ),
        )),
        Err(u) => Err((
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{u}: a move needs its target up"),
        )),
    }
}
