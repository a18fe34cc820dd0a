//! The power goes while a durable batch is worked off: a cancel batch over
//! six orders, two items a slice, cut at every disk operation of its
//! run and with every fate of the unsynced writes. Opened again, the batch
//! goes on from its durable cursor to its end, and then every order was
//! cancelled exactly once: each item has its outcome, none was refused (an
//! item done twice would be, its instance having ended), and each order's
//! history says `instance_cancelled` once.

use super::check::check;
use super::workload::{Answered, Op, apply, deploy_all, options};
use super::{Unsynced, runtime};
use crate::commit::Command;
use crate::disk::sim::Disk;
use crate::ops::InstanceFilter;
use crate::store::batches::{BatchOp, BatchState};
use crate::{Postfach, Selection};
use std::collections::BTreeMap;

/// The orders, the batch and its slices; returns what was answered, the
/// batch (when its creation was answered) and the disk operations at which
/// its run began and ended.
async fn run(disk: &Disk) -> (Answered, Option<u64>, u64, u64) {
    let mut got = Answered::default();
    let Ok(pf) = Postfach::open_sim(disk, options(false)) else {
        return (got, None, 0, 0);
    };
    let (mut batch, mut span) = (None, (0, 0));
    let calls = async {
        deploy_all(&pf).await?;
        for k in 1..=6 {
            apply(&pf, &Op::Start(k), &mut got).await?;
        }
        apply(&pf, &Op::HandOver, &mut got).await?;
        span.0 = disk.ops();
        let filter = InstanceFilter {
            process: Some("auftrag-ausfuehrung".into()),
            ..InstanceFilter::default()
        };
        let b = pf
            .create_batch(BatchOp::Cancel, &Selection::Instances(filter))
            .await
            .map_err(|_| ())?;
        batch = Some(b.id);
        loop {
            let r = pf
                .submit(Command::RunBatch {
                    batch: b.id,
                    limit: 2,
                })
                .await
                .and_then(|r| r.batch())
                .map_err(|_| ())?;
            if r.state != BatchState::Running {
                break;
            }
        }
        span.1 = disk.ops();
        Ok::<(), ()>(())
    };
    let _ = calls.await;
    pf.close();
    (got, batch, span.0, span.1)
}

/// Opens what survived, works the batches off, and says what is wrong.
async fn resumed(files: BTreeMap<String, Vec<u8>>, answered: Option<u64>) -> Vec<String> {
    let disk = Disk::from_files(files, None);
    let pf = match Postfach::open_sim(&disk, options(false)) {
        Ok(pf) => pf,
        Err(e) => return vec![format!("does not open: {e}")],
    };
    let mut problems = Vec::new();
    if let Err(e) = pf.run_batches(|_| {}).await {
        problems.push(format!("the batch does not resume: {e}"));
    }
    let r = pf.reader().expect("a reader");
    let batches = r.batches().expect("batches");
    if answered.is_some() && batches.is_empty() {
        problems.push("the answered batch is gone".into());
    }
    for b in &batches {
        if (b.state, b.done + b.refused, b.refused) != (BatchState::Done, b.items, 0) {
            problems.push(format!("batch after resuming: {b:?}"));
        }
        let rows = r.batch_items(b.id).expect("item rows");
        if rows.len() as u64 != b.items || rows.iter().any(|i| i.outcome.is_none()) {
            problems.push(format!("item rows of {b:?}: {rows:?}"));
        }
        for row in rows {
            let crate::BatchItem::Instance(id) = row.item else {
                continue;
            };
            let cancelled = r.instance(id).ok().flatten().map_or(0, |v| {
                v.history
                    .iter()
                    .filter(|h| h.event.starts_with("instance_cancelled"))
                    .count()
            });
            if cancelled != 1 {
                problems.push(format!("order {id} cancelled {cancelled} times"));
            }
        }
    }
    pf.close();
    problems
}

#[test]
fn a_power_cut_during_a_batch_resumes_and_does_every_item_exactly_once() {
    let rt = runtime();
    rt.block_on(async {
        let dry = Disk::new(None);
        let (_, batch, begin, end) = run(&dry).await;
        // the batch's commands: its creation and three slices, each a log
        // append and its sync
        assert!(
            batch.is_some() && end >= begin + 8,
            "the batch runs: {begin}..{end}"
        );
        let mut resumed_midway = 0;
        for cut_at in begin..=end + 1 {
            let k = cut_at - begin;
            for fate in [Unsynced::Lost, Unsynced::Scattered(k + 3)] {
                let disk = Disk::new(Some(cut_at));
                let (got, answered, _, _) = run(&disk).await;
                let files = match fate {
                    Unsynced::Lost => disk.after_power_cut(&BTreeMap::new()),
                    Unsynced::Scattered(seed) => disk.after_power_cut_scattered(seed),
                    Unsynced::Prefix(_) => unreachable!("not drawn here"),
                };
                let problems = check(files.clone(), false, &got).await;
                assert!(
                    problems.is_empty(),
                    "cut at {cut_at} ({fate:?}): {problems:?}"
                );
                if answered.is_some() {
                    resumed_midway += 1;
                }
                let problems = resumed(files, answered).await;
                assert!(
                    problems.is_empty(),
                    "cut at {cut_at} ({fate:?}): {problems:?}"
                );
            }
        }
        assert!(
            resumed_midway >= 6,
            "{resumed_midway} cuts fell after the batch was answered"
        );
    });
}
