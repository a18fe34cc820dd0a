//! The cluster's partitions and key slots on the command line: `cluster
//! status` (every partition and the slot map), `cluster slot KEY` (where a
//! key lies), `cluster move-slots`, `cluster grow` and `cluster shrink` (slots moved, the
//! moves followed to their end).
//!
//! Invariant: a map read from a server is range-checked before it is used;
//! a move is begun only through a gateway, which knows every partition.

use super::Cli;
use super::prelude::*;
use super::remote::Call;
use super::remote::client_of;
use postfach::slots::SlotMap;
use serde_json::{Value, json};

/// `cluster slot KEY`: `{"key", "slot", "partition", "map_version"}`.
pub(super) async fn slot(cli: &Cli, key: &str, partitions: Option<u64>) -> Result<Output, Failure> {
    let map = match (&cli.server, partitions) {
        (Some(_), _) => {
            let client = client_of(cli)?;
            let v = client.call(&super::remote::Call::to("slots")?).await?;
            match SlotMap::from_json(&v)
                .map_err(|e| usage(format!("the slot map the server holds: {e}")))?
            {
                Some(map) => map,
                // unpartitioned: every key is on the one partition
                None => {
                    let v = json!({"key": key, "slot": null, "partition": 0, "map_version": 0});
                    return Ok(out(
                        v,
                        format!("{key}: unpartitioned, on the one partition"),
                    ));
                }
            }
        }
        (None, Some(p)) => SlotMap::new(u32::try_from(p).unwrap_or(u32::MAX))
            .map_err(|e| usage(format!("--partitions {p}: {e}")))?,
        (None, None) => {
            return Err(usage(
                "cluster slot needs the map: give --server URL (a gateway), or --partitions P for a new cluster's".into(),
            ));
        }
    };
    let slot = map.slot_of_key(key);
    let v = json!({
        "key": key,
        "slot": slot,
        "partition": map.owner(slot),
        "map_version": map.version(),
    });
    let text = format!(
        "{key}: slot {slot} of {}, on partition {} (slot map version {})",
        map.slots(),
        map.owner(slot),
        map.version()
    );
    Ok(out(v, text))
}

pub(super) async fn status(cli: &Cli) -> Result<Output, Failure> {
    if cli.server.is_none() {
        return Err(usage(
            "cluster status asks a gateway: give --server URL (or $POSTFACH_SERVER)".into(),
        ));
    }
    let client = client_of(cli)?;
    let url = format!("{}/cluster/status", client.server);
    let answer = client
        .exchange(axum::http::Method::GET, "/cluster/status", None)
        .await?;
    let status = answer.status.as_u16();
    let v = answer
        .json()
        .ok_or_else(|| usage(format!("{url} answered {status} without JSON")))?;
    if status != 200 {
        return Err(Failure {
            code: 1,
            message: format!(
                "{url} answered {status}: {} (is it a gateway? `postfach gateway` serves /cluster/status)",
                v["error"].as_str().unwrap_or("no reason given")
            ),
            json: None,
        });
    }
    let text = status_text(&v);
    let down = v["partitions"]
        .as_array()
        .map(|l| l.iter().filter(|p| p["ready"] != json!(true)).count())
        .unwrap_or(0);
    if down > 0 {
        return Err(Failure {
            code: 1,
            message: format!("{text}{down} partition(s) not ready"),
            json: Some(v),
        });
    }
    Ok(out(v, text))
}

/// One line per partition, then the slot map's version.
fn status_text(v: &Value) -> String {
    let mut text = String::from(
        "partition  up     ready  version   slots  waiting  oldest wait  buffered  parked  jobs due  incidents\n",
    );
    for p in v["partitions"].as_array().into_iter().flatten() {
        let n = |f: &str| p[f].as_u64().map_or("-".to_string(), |n| n.to_string());
        let oldest = p["oldest_wait_ms"].as_u64().map_or("-".to_string(), |ms| {
            humantime::format_duration(std::time::Duration::from_secs(ms / 1000)).to_string()
        });
        text.push_str(&format!(
            "{:<10} {:<6} {:<6} {:<9} {:<6} {:<8} {:<12} {:<9} {:<7} {:<9} {}\n",
            n("partition"),
            p["up"].as_bool().unwrap_or(false),
            p["ready"].as_bool().unwrap_or(false),
            p["version"].as_str().unwrap_or("-"),
            n("slots_owned"),
            n("tokens_waiting"),
            oldest,
            n("buffered"),
            n("parked"),
            n("jobs_due"),
            n("incidents"),
        ));
        if let Some(e) = p["error"].as_str().or(p["not_ready"].as_str()) {
            text.push_str(&format!("           {e}\n"));
        }
    }
    if let Some(version) = v["map_version"].as_u64() {
        text.push_str(&format!(
            "slot map version {version}: {} slots",
            v["slot_count"].as_u64().unwrap_or(0)
        ));
        let moves = v["moves"].as_array().map_or(0, Vec::len);
        if moves > 0 {
            text.push_str(&format!(", {moves} move(s) in flight"));
        }
        text.push('\n');
    }
    text
}

/// The slot map the server --server names holds (a usage error without
/// a server: moves go through a gateway; `None` unpartitioned).
async fn server_map(
    cli: &Cli,
    what: &str,
) -> Result<(super::remote::Client, Option<SlotMap>), Failure> {
    if cli.server.is_none() {
        return Err(usage(format!(
            "{what} goes through a gateway: give --server URL (or $POSTFACH_SERVER)"
        )));
    }
    let client = client_of(cli)?;
    let v = client.call(&Call::to("slots")?).await?;
    let map =
        SlotMap::from_json(&v).map_err(|e| usage(format!("the slot map the server holds: {e}")))?;
    Ok((client, map))
}

/// `cluster move-slots FIRST-LAST --to P [--from P]`: the gateway begins a
/// move on each partition that owns slots of the range; each is followed
/// to its end unless `detach`.
pub(super) async fn move_slots(
    cli: &Cli,
    range: &str,
    to: u32,
    from: Option<u32>,
    detach: bool,
) -> Result<Output, Failure> {
    // unpartitioned the server refuses the move itself
    let (client, map) = server_map(cli, "cluster move-slots").await?;
    let slots = map.map_or(postfach::slots::SLOTS, |m| m.slots());
    let (first, last) =
        postfach::slots::parse_range(range, slots).map_err(|e| usage(format!("{range}: {e}")))?;
    let body = postfach::server::http::requests::MoveBody {
        first,
        last,
        to,
        from,
        to_url: None,
        version: None,
    };
    let begun = client.call(&Call::to("move_slots")?.body(&body)).await?;
    let moves: Vec<Value> = begun["moves"].as_array().cloned().unwrap_or_default();
    if detach {
        let text = moves_text(&moves);
        return Ok(out(json!({"moves": moves}), text));
    }
    let ended = follow(&client, &moves).await?;
    let text = moves_text(&ended);
    Ok(out(json!({"moves": ended}), text))
}

/// How long following the moves bears a partition that does not answer.
const FOLLOW_PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);

/// Follows each move's batch (through the gateway, which routes a batch id
/// to its partition) until none runs, with one progress bar for all.
async fn follow(client: &super::remote::Client, moves: &[Value]) -> Result<Vec<Value>, Failure> {
    let ids: Vec<String> = moves
        .iter()
        .filter_map(|m| m["batch"].as_str().map(str::to_string))
        .collect();
    let bar =
        indicatif::ProgressBar::with_draw_target(Some(0), indicatif::ProgressDrawTarget::stderr());
    // a partition restarting in the middle is asked again, for a while
    let mut failing_since: Option<std::time::Instant> = None;
    loop {
        let mut docs = Vec::new();
        let mut failed = None;
        for id in &ids {
            match client.call(&Call::to("batch")?.at(id)).await {
                Ok(d) => docs.push(d),
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            let since = *failing_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() > FOLLOW_PATIENCE {
                bar.finish_and_clear();
                return Err(e);
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            continue;
        }
        failing_since = None;
        let sum = |k: &str| docs.iter().map(|d| d[k].as_u64().unwrap_or(0)).sum::<u64>();
        bar.set_length(sum("items"));
        bar.set_position(sum("reached"));
        bar.set_message(format!("{} move(s)", ids.len()));
        if docs.iter().all(|d| d["state"] != "running") {
            bar.finish_and_clear();
            return Ok(docs);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn moves_text(moves: &[Value]) -> String {
    let mut text = String::new();
    for m in moves {
        match m["error"].as_str() {
            Some(e) => text.push_str(&format!("partition {}: {e}\n", m["partition"])),
            None => text.push_str(&format!(
                "batch {} move-slots {}: {} of {} items sent\n",
                m["batch"].as_str().unwrap_or("?"),
                m["state"].as_str().unwrap_or("?"),
                m["reached"],
                m["items"]
            )),
        }
    }
    text.trim_end().to_string()
}

/// `cluster grow --partitions P'` (`shrink`: false) or `cluster shrink
/// --partitions P'` (`shrink`: true). Growing, the new partitions must be
/// among the gateway's and ready; shrinking, every partition that owns
/// slots must be ready. The plan's moves are begun (each its source and
/// range) and followed to their end unless `detach`.
pub(super) async fn balance(
    cli: &Cli,
    partitions: u32,
    shrink: bool,
    detach: bool,
) -> Result<Output, Failure> {
    let verb = if shrink { "shrink" } else { "grow" };
    let (client, map) = server_map(cli, &format!("cluster {verb}")).await?;
    let Some(map) = map else {
        return Err(Failure {
            code: 1,
            message: format!(
                "cluster {verb}: the server is unpartitioned; a cluster created with --partitions grows and shrinks"
            ),
            json: None,
        });
    };
    let now = map.owning();
    if (!shrink && partitions <= now) || (shrink && (partitions >= now || partitions == 0)) {
        let names = if shrink { "fewer, at least 1" } else { "more" };
        return Err(usage(format!(
            "--partitions {partitions}: {now} partitions own slots; {verb} names {names}"
        )));
    }
    let status = client
        .exchange(axum::http::Method::GET, "/cluster/status", None)
        .await?
        .json()
        .unwrap_or(Value::Null);
    let listed = status["partitions"].as_array().map_or(0, Vec::len) as u32;
    if listed < partitions {
        return Err(usage(format!(
            "--partitions {partitions}: the gateway knows {listed}; start partitions {now} … {} and give the gateway --partition-url for each",
            partitions - 1
        )));
    }
    let needed = if shrink { 0..now } else { now..partitions };
    for p in status["partitions"].as_array().into_iter().flatten() {
        let i = p["partition"].as_u64().unwrap_or(0) as u32;
        if needed.contains(&i) && p["ready"] != json!(true) {
            let why = if shrink {
                "every partition that owns slots must be up while a cluster shrinks"
            } else {
                "the partitions a cluster grows to must be up"
            };
            return Err(Failure {
                code: 1,
                message: format!("partition {i} is not ready: {why}"),
                json: None,
            });
        }
    }
    let plan = postfach::slots::balance_plan(&map, partitions)
        .map_err(|e| usage(format!("--partitions {partitions}: {e}")))?;
    let mut moves = Vec::new();
    for mv in &plan {
        let body = postfach::server::http::requests::MoveBody {
            first: mv.first,
            last: mv.last,
            to: mv.to,
            from: Some(mv.from),
            to_url: None,
            version: None,
        };
        let begun = client.call(&Call::to("move_slots")?.body(&body)).await?;
        moves.extend(begun["moves"].as_array().cloned().unwrap_or_default());
    }
    let ended = if detach {
        moves
    } else {
        follow(&client, &moves).await?
    };
    let text = format!(
        "{} move(s) to {verb} from {now} to {partitions} partitions\n{}",
        plan.len(),
        moves_text(&ended)
    );
    Ok(out(json!({"partitions": partitions, "moves": ended}), text))
}
