//! A batch that fails to apply after its frame was logged: its caller gets
//! the error only once the abort record behind the frame is durable, the
//! next batch takes its number, and after a power cut the log replays the
//! batches that were applied and not the aborted one.
//!
//! The failure is a real one: the instance record the command reads is
//! spoiled on the disk, so the command fails the same way at every try —
//! a replay that applied it would refuse to open the database.

use super::runtime;
use super::workload::{deploy_all, options};
use crate::commit::Command;
use crate::disk::sim::Disk;
use crate::error::Error;
use crate::store::{INSTANCES, StoreError};
use crate::{Postfach, model::vars};
use std::collections::BTreeMap;
use std::path::Path;

/// Spoils instance `id`'s record: reading it fails to decode.
fn spoil_instance(disk: &Disk, id: u64) {
    let (db, _) = crate::store::open_db_sim(disk, Path::new("postfach.redb"), None).unwrap();
    let tx = db.begin_write().unwrap();
    tx.open_table(INSTANCES)
        .unwrap()
        .insert(id, [0xffu8; 3].as_slice())
        .unwrap();
    tx.commit().unwrap();
}

#[test]
fn a_batch_that_fails_to_apply_is_answered_with_its_error_and_never_replayed() {
    runtime().block_on(async {
        let disk = Disk::new(None);
        let pf = Postfach::open_sim(&disk, options(false)).unwrap();
        deploy_all(&pf).await.unwrap();
        let start = |k: &str| {
            let pf = pf.clone();
            let key = k.to_string();
            async move {
                pf.start(
                    "auftrag-ausfuehrung",
                    vars([("auftragId", key.into())]),
                    None,
                )
                .await
                .unwrap()
            }
        };
        let spoiled = start("A-1").await;
        pf.close();
        spoil_instance(&disk, spoiled);

        let pf = Postfach::open_sim(&disk, options(false)).unwrap();
        let refused = pf
            .submit(Command::AddToken {
                instance: spoiled,
                element: "auftragUebergeben".into(),
                force: true,
            })
            .await;
        assert!(
            matches!(refused, Err(Error::Store(StoreError::Aborted(_)))),
            "the batch is aborted: {:?}",
            refused.err()
        );
        // the power goes right after the refusal: its abort record is durable
        let at_refusal = disk.after_power_cut(&BTreeMap::new());
        let kept = {
            let pf = pf.clone();
            async move {
                pf.start(
                    "auftrag-ausfuehrung",
                    vars([("auftragId", "A-2".into())]),
                    None,
                )
                .await
                .unwrap()
            }
        }
        .await;
        let after_next = disk.after_power_cut(&BTreeMap::new());
        pf.close();

        for (files, want) in [(at_refusal, 0), (after_next, 1)] {
            let disk = Disk::from_files(files, None);
            let pf = Postfach::open_sim(&disk, options(false))
                .expect("the aborted batch is not replayed");
            assert_eq!(pf.recovery().replayed_batches, want, "batches replayed");
            let found = pf.reader().unwrap().instance(kept).unwrap();
            assert_eq!(
                found.is_some(),
                want == 1,
                "the batch after the aborted one took its number and was replayed"
            );
            pf.close();
        }
    });
}
