//! The cluster's key slots on the command line: `cluster slot KEY` (where a
//! key lies, per the map a server holds or a new cluster's).
//!
//! Invariant: a map read from a server is range-checked before it is used.

use super::Cli;
use super::prelude::*;
use super::remote::client_of;
use serde_json::json;

/// `cluster slot KEY`: `{"key", "slot", "partition", "map_version"}`.
pub(super) async fn slot(cli: &Cli, key: &str, partitions: Option<u64>) -> Result<Output, Failure> {
    use postfach::slots::{SlotMap, SlotRange};
    let map = match (&cli.server, partitions) {
        (Some(_), _) => {
            let client = client_of(cli)?;
            let v = client.call(&super::remote::Call::to("slots")?).await?;
            let ranges: Option<Vec<SlotRange>> = v["slots"].as_array().map(|l| {
                l.iter()
                    .filter_map(|r| {
                        Some(SlotRange {
                            first: r[0].as_u64()? as u32,
                            last: r[1].as_u64()? as u32,
                            partition: r[2].as_u64()? as u32,
                        })
                    })
                    .collect()
            });
            match (v["slot_count"].as_u64(), ranges) {
                (Some(count), Some(ranges)) => SlotMap::from_ranges(
                    count,
                    v["map_version"].as_u64().unwrap_or(1),
                    v["base_partitions"].as_u64().unwrap_or(1) as u32,
                    &ranges,
                )
                .map_err(|e| usage(format!("the slot map the server holds: {e}")))?,
                // unpartitioned: every key is on the one partition
                _ => {
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
