//! The routes a gateway answers by asking several partitions: a deployment
//! and a signal reach every one, a lookup by id asks until one has it, lists,
//! statistics, alarms, metrics and the cluster's status are gathered and
//! combined.
//!
//! Invariant: an answer combined from several partitions names those it
//! could not reach (`missing`), or fails naming them; it is never silently
//! shorter.

use super::*;

/// A deployment reaches every partition (idempotent by content there): the
/// answer is the first partition's when all took it; otherwise which did not.
pub(super) async fn everywhere(gw: &Gw, p: &Passed) -> Response {
    let answers = all(gw, p).await;
    let ok: Vec<&Answer> = answers
        .iter()
        .filter_map(|a| a.as_ref().ok().filter(|a| a.status.is_success()))
        .collect();
    if ok.len() == answers.len() {
        let mut v = ok[0].json().unwrap_or(Value::Null);
        if let Value::Object(o) = &mut v {
            o.insert("partitions".into(), json!(answers.len()));
        }
        return json_response(ok[0].status, v);
    }
    // refused by a partition for what it is (a bad model): that answer
    if ok.is_empty()
        && let Some(Ok(a)) = answers.iter().find(|a| a.is_ok())
    {
        return respond(a.clone());
    }
    let (done, failed): (Vec<_>, Vec<_>) = answers
        .iter()
        .enumerate()
        .partition(|(_, a)| a.as_ref().is_ok_and(|a| a.status.is_success()));
    let reasons: Vec<Value> = failed
        .iter()
        .map(|(i, a)| match a {
            Ok(a) => json!({"partition": i, "status": a.status.as_u16(), "error": a.json().and_then(|v| v.get("error").cloned())}),
            Err(u) => json!({"partition": i, "url": u.url, "error": u.reason}),
        })
        .collect();
    json_response(
        StatusCode::BAD_GATEWAY,
        json!({
            "error": format!(
                "taken by partitions {:?} only; send it again (a deployment is idempotent by content)",
                done.iter().map(|(i, _)| *i).collect::<Vec<_>>()
            ),
            "failed": reasons,
        }),
    )
}

/// A signal reaches every partition with one id (given by the caller, or made
/// here), so each applies it once however often it is sent; `reached` is the
/// sum; a partition that could not be asked is named (502: send the same
/// body again, with the `id` of the answer). A signal that reached no
/// receiver anywhere is counted here (`/metrics`).
pub(super) async fn signal(gw: &Gw, p: &Passed) -> Response {
    let Some(Value::Object(mut body)) = serde_json::from_slice::<Value>(&p.body).ok() else {
        return any(gw, p).await; // the partition's 400
    };
    let id = match body.get("id").and_then(Value::as_str) {
        Some(id) => id.to_string(),
        None => {
            let id = signal_id(gw);
            body.insert("id".into(), json!(id));
            id
        }
    };
    let bytes = Bytes::from(Value::Object(body).to_string());
    let answers = all_with(gw, p, |_| p.path_and_query(), |_| bytes.clone(), |_| true).await;
    let mut reached = 0u64;
    let mut missing = Vec::new();
    let mut first = None;
    for a in answers.into_iter().flatten() {
        match a {
            Ok(a) if a.status.is_success() => {
                let v = a.json().unwrap_or(Value::Null);
                reached += v.get("reached").and_then(Value::as_u64).unwrap_or(0);
                first.get_or_insert(v);
            }
            Ok(a) => return respond(a),
            Err(u) => missing.push(u),
        }
    }
    let Some(mut v) = first else {
        return unreachable(&missing[0]);
    };
    v["reached"] = json!(reached);
    v["id"] = json!(id);
    v["missing"] = missing_json(&missing);
    if !missing.is_empty() {
        return json_response(StatusCode::BAD_GATEWAY, v);
    }
    if reached == 0 {
        gw.unreached.fetch_add(1, Ordering::Relaxed);
    }
    json_response(StatusCode::OK, v)
}

/// A signal id no other gateway makes: `g-` + this process, the time and a
/// count.
fn signal_id(gw: &Gw) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = gw.signals.fetch_add(1, Ordering::Relaxed);
    format!("g-{:x}-{nanos:x}-{n:x}", std::process::id())
}

/// A parked message named by the publisher's id: the partition that has it
/// answers; the others answer 404 and change nothing.
pub(super) async fn find(gw: &Gw, p: &Passed) -> Response {
    let answers = all(gw, p).await;
    let mut refused = None;
    let mut not_found = None;
    let mut missing = Vec::new();
    for a in answers {
        match a {
            Ok(a) if a.status.is_success() => return respond(a),
            Ok(a) if a.status == StatusCode::NOT_FOUND => {
                not_found.get_or_insert(a);
            }
            Ok(a) => {
                refused.get_or_insert(a);
            }
            Err(u) => missing.push(u),
        }
    }
    if let Some(a) = refused {
        return respond(a);
    }
    if !missing.is_empty() {
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": "no partition that answered has this message; it may be on one that did not", "missing": missing_json(&missing)}),
        );
    }
    not_found.map(respond).unwrap_or_else(|| {
        problem(
            StatusCode::NOT_FOUND,
            "no partition has this message".into(),
        )
    })
}

/// Any partition that answers.
pub(super) async fn any(gw: &Gw, p: &Passed) -> Response {
    match any_answer(gw, p).await {
        Ok(a) => respond(a),
        Err(u) => unreachable(&u),
    }
}

/// The answer of the first partition in turn that answers, or why the last
/// one did not.
async fn any_answer(gw: &Gw, p: &Passed) -> Result<Answer, Unreachable> {
    let n = gw.parts.count();
    let first = gw.next_turn();
    let mut last = None;
    for step in 0..n {
        match send(gw, (first + step) % n, p, &p.body).await {
            Ok(a) => return Ok(a),
            Err(u) => last = Some(u),
        }
    }
    Err(last.unwrap_or_else(|| Unreachable {
        partition: 0,
        url: String::new(),
        reason: "the gateway has no partitions".into(),
    }))
}

/// Answers of every partition combined by `merge`; the partitions not
/// reached are named.
pub(super) async fn combined(gw: &Gw, p: &Passed, merge: fn(&[Value]) -> Value) -> Response {
    let mut values = Vec::new();
    let mut missing = Vec::new();
    let mut not_found = None;
    for a in all(gw, p).await {
        match a {
            Ok(a) if a.status.is_success() => values.push(a.json().unwrap_or(Value::Null)),
            Ok(a) if a.status == StatusCode::NOT_FOUND => {
                not_found.get_or_insert(a);
            }
            Ok(a) => return respond(a),
            Err(u) => missing.push(u),
        }
    }
    if values.is_empty() {
        return match (not_found, missing.first()) {
            (Some(a), _) => respond(a),
            (None, Some(u)) => unreachable(u),
            (None, None) => problem(StatusCode::SERVICE_UNAVAILABLE, "no partitions".into()),
        };
    }
    let mut v = merge(&values);
    if let Value::Object(o) = &mut v {
        o.insert("missing".into(), missing_json(&missing));
    }
    json_response(StatusCode::OK, v)
}

/// A backup of every partition under one set id: the caller's, else the
/// gateway's instant; a body that is not a JSON object goes on as it is,
/// for the partitions' 400. A set is taken between slot moves — with moves
/// in flight it is refused (409 with the moves; the caller waits), and no
/// move begins through this gateway while it is taken — so that a restored
/// set holds each slot on one partition: a set taken across a move could
/// bring a slot back on both sides, or on none.
pub(super) async fn backup_set(gw: &Gw, mut p: Passed) -> Response {
    let _set = gw.sets.write().await;
    let (_, moves) = super::slots::gathered(gw, &p.headers).await;
    if !moves.is_empty() {
        let named: Vec<String> = moves
            .iter()
            .filter(|m| m["phase"] != json!("importing"))
            .map(|m| {
                format!(
                    "move {} of slots {}-{} from partition {} to {} ({})",
                    m["move"].as_str().unwrap_or("?"),
                    m["first"],
                    m["last"],
                    m["from"],
                    m["to"],
                    m["phase"].as_str().unwrap_or("?")
                )
            })
            .collect();
        let mut r = json_response(
            StatusCode::CONFLICT,
            json!({
                "error": format!(
                    "{} in flight: a backup set is taken between slot moves, so that no slot is restored on two partitions or on none; take it once they are done",
                    named.join(", ")
                ),
                "moves": moves,
            }),
        );
        r.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("1"),
        );
        return r;
    }
    let given = if p.body.is_empty() {
        Some(serde_json::Map::new())
    } else {
        serde_json::from_slice::<serde_json::Map<String, Value>>(&p.body).ok()
    };
    if let Some(mut body) = given {
        if body.get("id").is_none_or(Value::is_null) {
            let now = crate::clock::Clock::now(&crate::clock::SystemClock);
            body.insert("id".into(), json!(crate::backup::set_id(now)));
        }
        p.body = Bytes::from(Value::Object(body).to_string());
        p.headers.insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        );
    }
    combined(gw, &p, gather::merge).await
}

pub(super) async fn alarms(gw: &Gw, p: &Passed) -> Response {
    let mut list = Vec::new();
    let mut missing = Vec::new();
    for (i, a) in all(gw, p).await.into_iter().enumerate() {
        match a {
            Ok(a) if a.status.is_success() => {
                let v = a.json().unwrap_or(Value::Null);
                for mut alarm in v
                    .get("alarms")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
                {
                    alarm["partition"] = json!(i);
                    list.push(alarm);
                }
            }
            Ok(a) => return respond(a),
            Err(u) => missing.push(u),
        }
    }
    json_response(
        StatusCode::OK,
        json!({"alarms": list, "missing": missing_json(&missing)}),
    )
}

/// Jobs acquired fairly: each request starts at the next partition in turn and
/// asks one partition after another for what is still missing of `max`.
pub(super) async fn acquire(gw: &Gw, p: &Passed) -> Response {
    let Some(Value::Object(body)) = serde_json::from_slice::<Value>(&p.body).ok() else {
        return any(gw, p).await; // the partition's 400
    };
    let max = body.get("max").and_then(Value::as_u64).unwrap_or(1);
    let n = gw.parts.count();
    let first = gw.next_turn();
    let mut jobs = Vec::new();
    let mut missing = Vec::new();
    for step in 0..n {
        let remaining = max.saturating_sub(jobs.len() as u64);
        if remaining == 0 {
            break;
        }
        let mut b = body.clone();
        b.insert("max".into(), json!(remaining));
        let bytes = Bytes::from(Value::Object(b).to_string());
        match send(gw, (first + step) % n, p, &bytes).await {
            Ok(a) if a.status.is_success() => {
                let v = a.json().unwrap_or(Value::Null);
                jobs.extend(
                    v.get("jobs")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            Ok(a) => return respond(a),
            Err(u) => missing.push(u),
        }
    }
    json_response(
        StatusCode::OK,
        json!({"jobs": jobs, "missing": missing_json(&missing)}),
    )
}

/// Every partition's metrics, each sample labelled with its partition and
/// each family once, its samples together (as OpenMetrics and Prometheus'
/// parser require); a partition not reached shows as
/// `postfach_partition_up{partition="N"} 0`.
pub(super) async fn metrics(gw: &Gw, p: &Passed) -> Response {
    let mut families = gather::Families::default();
    let mut up = String::from(
        "# HELP postfach_partition_up Whether the gateway reached the partition.\n# TYPE postfach_partition_up gauge\n",
    );
    let mut content_type = None;
    for (i, a) in all(gw, p).await.into_iter().enumerate() {
        match a {
            Ok(a) if a.status.is_success() => {
                families.add(&String::from_utf8_lossy(&a.body), i as u32);
                content_type = content_type.or(a.content_type().cloned());
                up.push_str(&format!("postfach_partition_up{{partition=\"{i}\"}} 1\n"));
            }
            Ok(a) => return respond(a),
            Err(_) => up.push_str(&format!("postfach_partition_up{{partition=\"{i}\"}} 0\n")),
        }
    }
    let mut text = families.render();
    text.push_str(&up);
    text.push_str(&format!(
        "# HELP postfach_cluster_signals_unreached Signals sent through this gateway that reached no receiver on any partition.\n# TYPE postfach_cluster_signals_unreached counter\npostfach_cluster_signals_unreached_total {}\n",
        gw.unreached.load(Ordering::Relaxed)
    ));
    text.push_str("# EOF\n");
    let mut r = text.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        content_type.unwrap_or(header::HeaderValue::from_static(
            crate::server::metrics::CONTENT_TYPE,
        )),
    );
    r
}

/// `GET /cluster/status`: every partition's own `/partition` summary and
/// readiness, or why it could not be asked.
pub(super) async fn status(State(gw): State<Gw>, headers: HeaderMap) -> Response {
    let p = Passed {
        method: Method::GET,
        path: "/partition".into(),
        query: None,
        headers,
        body: Bytes::new(),
    };
    let summaries = all(&gw, &p).await;
    let ready: Vec<_> = all_with(
        &gw,
        &p,
        |_| "/health/ready".into(),
        |_| Bytes::new(),
        |_| true,
    )
    .await
    .into_iter()
    .flatten()
    .collect();
    let list: Vec<Value> = summaries
        .into_iter()
        .zip(ready)
        .enumerate()
        .map(|(i, (s, r))| {
            let mut v = json!({"partition": i, "url": gw.parts.url(i as u32)});
            match s {
                Ok(a) if a.status.is_success() => {
                    if let Some(Value::Object(o)) = a.json() {
                        for (k, x) in o {
                            if k != "partition" {
                                v[k] = x;
                            }
                        }
                    }
                    v["up"] = json!(true);
                }
                Ok(a) => {
                    v["up"] = json!(true);
                    v["error"] = a
                        .json()
                        .and_then(|j| j.get("error").cloned())
                        .unwrap_or(json!(a.status.as_u16()));
                }
                Err(u) => {
                    v["up"] = json!(false);
                    v["error"] = json!(u.reason);
                }
            }
            v["ready"] = json!(r.as_ref().is_ok_and(|a| a.status.is_success()));
            if let Ok(a) = &r
                && !a.status.is_success()
            {
                v["not_ready"] = a
                    .json()
                    .and_then(|j| j.get("error").cloned())
                    .unwrap_or(Value::Null);
            }
            v
        })
        .collect();
    let mut doc = json!({"partitions": list});
    // the cluster's slot map beside them: `slots`, `map_version`, `moves`
    let (map, moves) = super::slots::gathered(&gw, &p.headers).await;
    if let Some(map) = map
        && let Value::Object(o) = super::slots::map_json(&map, moves)
    {
        for (k, v) in o {
            doc[k] = v;
        }
    }
    Json(doc).into_response()
}
