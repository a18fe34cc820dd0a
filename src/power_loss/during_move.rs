//! The power goes on either side of a slot move: partition 0 moves every
//! slot it owns — 34 orders waiting at their completion, one completed, one
//! completion buffered early — to partition 1, two slices of records, and
//! the power of the source, or of the target, is cut at every disk
//! operation of the move, with every fate of the unsynced writes. While the
//! slots are copied, a completion for an order already sent is taken on
//! the source (the move's delta). Opened again, the move goes on to its
//! end, and then everything is on exactly one partition: every order and
//! message record on the target, with its history — the completion taken
//! during the copy too, once it was acknowledged — none on the source, both
//! stores whole and the map saying so.

use super::workload::{deploy_all, options};
use super::{Unsynced, runtime};
use crate::disk::sim::Disk;
use crate::partition::Partition;
use crate::slots::SlotMap;
use crate::{Postfach, Publish};
use std::collections::BTreeMap;

const ORDERS: usize = 34;

/// The keys partition 0 of 2 owns, the first `n`.
fn keys(n: usize) -> Vec<String> {
    let map = SlotMap::new(2).expect("a map of 2");
    (0..)
        .map(|i| format!("A-{i}"))
        .filter(|k| map.partition_of_key(k) == 0)
        .take(n)
        .collect()
}

fn open(disk: &Disk, index: u64) -> Result<Postfach, crate::Error> {
    let mut o = options(false);
    o.partition = Some(Partition::new(index, 2).expect("a partition of 2"));
    Postfach::open_sim(disk, o)
}

/// Orders on the source, hand-overs done, one completion correlated and
/// one buffered; the move begun. `None` when the power went before.
async fn prepare(src: &Postfach, dst: &Postfach) -> Option<()> {
    deploy_all(src).await.ok()?;
    deploy_all(dst).await.ok()?;
    let keys = keys(ORDERS + 1);
    for k in &keys[..ORDERS] {
        let vars = crate::model::vars([("auftragId", k.as_str().into())]);
        src.start("auftrag-ausfuehrung", vars, None).await.ok()?;
    }
    src.run_continuations(100).await.ok()?;
    let jobs = src
        .lock_jobs("auftragUebergeben", 100, "provider", 60_000)
        .await
        .ok()?;
    for j in jobs {
        src.complete_job(j.task.job, Some(j.lease_token), Default::default())
            .await
            .ok()?;
    }
    for (k, id) in [(&keys[0], "done-0"), (&keys[ORDERS], "early")] {
        src.publish(Publish {
            name: super::workload::MESSAGE.into(),
            key: k.clone(),
            message_id: Some(id.into()),
            ..Publish::default()
        })
        .await
        .ok()?;
    }
    src.begin_slot_move(0, 4095, 1, "http://p1", None)
        .await
        .ok()?;
    Some(())
}

/// Drives the move until nothing leaves the source (or a step fails). With
/// `write`, after the first step — the slots still being copied — the
/// completion `during` of an order sent in that step is published on the
/// source, and `write` says once it was acknowledged.
async fn drive(src: &Postfach, dst: &Postfach, write: Option<&mut bool>) -> Result<(), String> {
    let mut write = write;
    for _ in 0..100 {
        let d = src.drive_moves(dst).await.map_err(|e| e.to_string())?;
        if let Some(acked) = write.take() {
            src.publish(Publish {
                name: super::workload::MESSAGE.into(),
                key: keys(2)[1].clone(),
                message_id: Some("during".into()),
                ..Publish::default()
            })
            .await
            .map_err(|e| e.to_string())?;
            *acked = true;
        }
        if d.left == 0 {
            return Ok(());
        }
    }
    Err("the move does not end".into())
}

/// Everything on exactly one partition, both stores whole; the completion
/// taken during the copy on the target when it was `acked`.
fn problems(src: &Postfach, dst: &Postfach, acked: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (name, pf) in [("source", src), ("target", dst)] {
        for p in pf.store_problems().unwrap_or_else(|e| vec![e.to_string()]) {
            out.push(format!("{name}: {p}"));
        }
    }
    let (rs, rd) = (
        src.reader().expect("a reader"),
        dst.reader().expect("a reader"),
    );
    let on = |r: &crate::ops::Reader| r.instances(&Default::default()).expect("instances").len();
    if (on(&rs), on(&rd)) != (0, ORDERS) {
        out.push(format!(
            "orders on source {}, on target {}",
            on(&rs),
            on(&rd)
        ));
    }
    for v in rd.instances(&Default::default()).expect("instances") {
        let id: u64 = v.instance.parse().unwrap_or(0);
        let detail = rd.instance(id).ok().flatten();
        if detail.is_none_or(|d| d.history.len() < 3) {
            out.push(format!("order {id} arrived without its history"));
        }
    }
    for m in ["done-0", "early", "during"] {
        let (a, b) = (
            rs.message(m).unwrap_or_default().len(),
            rd.message(m).unwrap_or_default().len(),
        );
        let lost_unacked = m == "during" && !acked && (a, b) == (0, 0);
        if (a, b) != (0, 1) && !lost_unacked {
            out.push(format!("message {m}: {a} on the source, {b} on the target"));
        }
    }
    let (ss, sd) = (
        rs.slot_state().ok().flatten(),
        rd.slot_state().ok().flatten(),
    );
    match (ss, sd) {
        (Some(s), Some(d)) => {
            if !s.moves.is_empty() || !d.moves.is_empty() {
                let left = |m: &[crate::slots::SlotMove]| {
                    m.iter().map(|m| (m.id, m.phase)).collect::<Vec<_>>()
                };
                out.push(format!(
                    "moves left: on the source {:?}, on the target {:?}",
                    left(&s.moves),
                    left(&d.moves)
                ));
            }
            if s.map.count_owned(0) != 0 || d.map.count_owned(1) != 4096 {
                out.push("the maps do not give every slot to the target".into());
            }
        }
        other => out.push(format!("slot states: {other:?}")),
    }
    out
}

/// One case: the source (`side` 0) or the target (1) loses its power at
/// disk operation `cut_at`; opened again, the move is driven to its end.
/// The problems found, whether the cut fell in the move, and the disk
/// operations of `side` at which the move's drive began and ended.
async fn case(side: usize, cut_at: Option<u64>, fate: Unsynced) -> (Vec<String>, bool, (u64, u64)) {
    let disks = [
        Disk::new(if side == 0 { cut_at } else { None }),
        Disk::new(if side == 1 { cut_at } else { None }),
    ];
    let (Ok(src), Ok(dst)) = (open(&disks[0], 0), open(&disks[1], 1)) else {
        return (vec!["does not open".into()], false, (0, 0));
    };
    if prepare(&src, &dst).await.is_none() {
        src.close();
        dst.close();
        return (Vec::new(), false, (0, 0));
    }
    let begin = disks[side].ops();
    let mut acked = false;
    let cut = drive(&src, &dst, Some(&mut acked)).await.is_err();
    let span = (begin, disks[side].ops());
    let mut pfs = [Some(src), Some(dst)];
    if cut {
        pfs[side].take().expect("the side cut").close();
        let files = match fate {
            Unsynced::Lost => disks[side].after_power_cut(&BTreeMap::new()),
            Unsynced::Scattered(seed) => disks[side].after_power_cut_scattered(seed),
            Unsynced::Prefix(_) => unreachable!("not drawn here"),
        };
        match open(&Disk::from_files(files, None), side as u64) {
            Ok(pf) => pfs[side] = Some(pf),
            Err(e) => return (vec![format!("side {side} does not open: {e}")], true, span),
        }
        let [Some(src), Some(dst)] = &pfs else {
            unreachable!("both open")
        };
        if let Err(e) = drive(src, dst, None).await {
            return (vec![format!("the move does not resume: {e}")], true, span);
        }
    }
    let [Some(src), Some(dst)] = &pfs else {
        unreachable!("both open")
    };
    let found = problems(src, dst, acked);
    for pf in pfs.into_iter().flatten() {
        pf.close();
    }
    (found, cut, span)
}

#[test]
fn a_power_cut_on_either_side_of_a_slot_move_resumes_and_leaves_everything_on_one_partition() {
    let rt = runtime();
    rt.block_on(async {
        for side in 0..2 {
            // a dry run: where the move's disk operations lie on this side
            let (found, _, (begin, end)) = case(side, None, Unsynced::Lost).await;
            assert!(found.is_empty(), "without a cut: {found:?}");
            assert!(
                end > begin + 2,
                "side {side}: the move writes ({begin}..{end})"
            );
            let mut cut_in_move = 0;
            for cut_at in begin + 1..=end + 1 {
                for fate in [Unsynced::Lost, Unsynced::Scattered(cut_at)] {
                    let (found, cut, _) = case(side, Some(cut_at), fate).await;
                    assert!(
                        found.is_empty(),
                        "side {side}, cut at {cut_at} ({fate:?}): {found:?}"
                    );
                    cut_in_move += usize::from(cut);
                }
            }
            assert!(
                cut_in_move as u64 >= end - begin,
                "side {side}: {cut_in_move} cuts fell in the move ({begin}..{end})"
            );
        }
    });
}
