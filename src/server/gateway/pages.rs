//! A list gathered from every partition, one page at a time: each
//! partition asked for its share from its own position, the answers merged
//! in the list's order, the cursor the positions after them.
//!
//! Invariant: an item is on one page only, whichever partitions answer; a
//! partition that was down is named, with the cursor to read it from later.

use super::*;

/// One page of a list: each partition that is not read to its end asked for
/// its share of `limit` from its own position; the items merged in the
/// list's order; the next cursor the positions after them — null once every
/// partition that answered is read to its end, with `resume` (the cursor to
/// read the partitions that were down from) when some were not.
pub(super) async fn page(gw: &Gw, list: List, p: &Passed) -> Response {
    let count = gw.parts.count();
    let mut pairs: Vec<(String, String)> = p.query.as_deref().map(url_pairs).unwrap_or_default();
    let after = take(&mut pairs, "after");
    let limit = take(&mut pairs, "limit");
    let oldest = pairs.iter().any(|(k, v)| k == "order" && v == "oldest");
    let cursor = match after {
        Some(a) => match gather::Cursor::parse(&a, count) {
            Ok(c) => c,
            Err(e) => return problem(StatusCode::BAD_REQUEST, e),
        },
        None => gather::Cursor::start(count),
    };
    let default = match list {
        List::Instances => 100,
        List::Messages => 200,
        List::Jobs => 500,
        List::Tasks => 0,
    };
    let limit = match limit.map(|l| l.parse::<usize>()) {
        None => default,
        Some(Ok(l)) if (1..=crate::server::http::MAX_PAGE).contains(&l) => l,
        Some(_) => {
            return problem(
                StatusCode::BAD_REQUEST,
                format!("limit: expected 1 to {}", crate::server::http::MAX_PAGE),
            );
        }
    };
    let shares = gather::shares(&cursor, limit);
    let paged = list != List::Tasks;
    let query_of = |i: u32| {
        let mut q = pairs.clone();
        if paged {
            q.push(("limit".into(), shares[i as usize].to_string()));
            if let gather::Position::After(c) = &cursor.0[i as usize] {
                q.push(("after".into(), c.clone()));
            }
        }
        let encoded = encode_pairs(&q);
        if encoded.is_empty() {
            p.path.clone()
        } else {
            format!("{}?{encoded}", p.path)
        }
    };
    let mut next = cursor.clone();
    let mut items = Vec::new();
    let mut rest = Vec::new();
    let mut missing = Vec::new();
    // a partition read to its end, or without a share of this page, is not asked
    let asked = |i: usize| cursor.0[i].live() && (!paged || shares[i] > 0);
    let answers = all_with(gw, p, query_of, |_| Bytes::new(), asked).await;
    for (i, a) in answers.into_iter().enumerate() {
        let Some(a) = a else { continue };
        match a {
            Ok(a) if a.status.is_success() => {
                let mut v = a.json().unwrap_or(Value::Null);
                if let Some(Value::Array(mine)) = v.get_mut(list.field()).map(Value::take) {
                    items.extend(mine);
                }
                next.0[i] = match v.get("next").and_then(Value::as_str) {
                    Some(c) if paged => gather::Position::After(c.to_string()),
                    _ => gather::Position::Done,
                };
                if let Value::Object(o) = &mut v {
                    o.remove("next");
                    o.remove(list.field());
                }
                rest.push(v);
            }
            Ok(a) => return respond(a),
            Err(u) => {
                next.0[i] = next.0[i].down();
                missing.push(u);
            }
        }
    }
    gather::sort(list, &mut items, oldest);
    let mut v = gather::merge(&rest);
    if !v.is_object() {
        v = json!({});
    }
    v[list.field()] = Value::Array(items);
    if paged {
        // the walk ends once every partition that answered is read to its
        // end: one that was down is skipped (it would keep `next` from ever
        // being null), and the last page says where to resume it
        v["next"] = if next.live() {
            Value::String(next.encode())
        } else {
            Value::Null
        };
        let skipped = next.skipped();
        if !next.live() && !skipped.is_empty() {
            v["resume"] = Value::String(next.resumed().encode());
            v["resume_partitions"] = json!(skipped);
        }
    }
    v["missing"] = missing_json(&missing);
    json_response(StatusCode::OK, v)
}

fn take(pairs: &mut Vec<(String, String)>, key: &str) -> Option<String> {
    let i = pairs.iter().position(|(k, _)| k == key)?;
    Some(pairs.remove(i).1)
}

/// The pairs of a query string, decoded (a query that does not decode has
/// none: the partition then answers for what it lacks).
fn url_pairs(q: &str) -> Vec<(String, String)> {
    serde_urlencoded::from_str(q).unwrap_or_default()
}

/// A query string of `pairs`, encoded as `application/x-www-form-urlencoded`.
fn encode_pairs(pairs: &[(String, String)]) -> String {
    serde_urlencoded::to_string(pairs).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{encode_pairs, url_pairs};

    /// What the gateway passes on to a partition is what the caller asked:
    /// a filter value with spaces, `&`, `=`, `+`, `%` or non-ASCII survives
    /// encoding and decoding again.
    #[test]
    fn a_query_passes_through_unchanged() {
        let pairs: Vec<(String, String)> = vec![
            ("variable".into(), "kunde".into()),
            ("value".into(), "Müller & Söhne = 100% + x".into()),
            ("waiting_at".into(), "warte Auf/Abschluss?".into()),
        ];
        let encoded = encode_pairs(&pairs);
        assert!(
            !encoded.contains(' ') && !encoded.contains('ü'),
            "{encoded}"
        );
        assert_eq!(url_pairs(&encoded), pairs);
    }
}
