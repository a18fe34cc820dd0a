//! Migrating running instances to another version of their process: the
//! instances are chosen on a read snapshot by the filters of `instances`,
//! then migrated in slices, one command each, so live traffic interleaves.
//!
//! Invariant: each instance is checked again by the engine inside the write
//! that migrates it (one that ended or moved in between is refused there,
//! never migrated twice); a refused instance changes nothing.

use super::Postfach;
use crate::commit::Command;
use crate::engine::{MigrationPlan, MigrationReport};
use crate::error::Error;
use crate::ops::InstanceFilter;

/// Instances a migration moves within the call; a larger selection becomes
/// a durable batch (resumed after a crash, followed with `batch status`).
pub const MIGRATE_IN_CALL: usize = 1000;

impl Postfach {
    /// Migrates the running instances of version `plan.from` of
    /// `plan.process` that `filter` selects (its process, version and state
    /// are set here) to version `plan.to`, or with `dry_run` says what
    /// would happen to each. Each instance moves whole or is refused with
    /// its reason in the report. More than [`MIGRATE_IN_CALL`] instances
    /// (not a dry run) become a durable batch of exactly them, named in the
    /// report's `batch`, which whoever runs batches works off. Refused as a
    /// whole when either version is not deployed or both are the same.
    pub async fn migrate(
        &self,
        plan: MigrationPlan,
        filter: &InstanceFilter,
        dry_run: bool,
    ) -> Result<MigrationReport, Error> {
        crate::limits::check_name("process", &plan.process)?;
        for (old, new) in &plan.map {
            crate::limits::check_name("mapped element", old)?;
            crate::limits::check_name("mapped element", new)?;
        }
        let mut filter = filter.clone();
        filter.process = Some(plan.process.clone());
        filter.version = Some(plan.from);
        let mut ids = Vec::new();
        // running ones: active, and active with an incident
        for view in self.reader()?.instances(&filter)? {
            if matches!(view.state, "completed" | "cancelled") {
                continue;
            }
            ids.push(view.instance.parse::<u64>().map_err(|_| {
                Error::Store(crate::store::StoreError::Aborted(format!(
                    "instance id {:?} is not a number",
                    view.instance
                )))
            })?);
        }
        let mut report = MigrationReport::default();
        if !dry_run && ids.len() > MIGRATE_IN_CALL {
            let items = ids.into_iter().map(crate::BatchItem::Instance).collect();
            let b = self
                .submit(Command::CreateBatch {
                    op: crate::BatchOp::Migrate(plan),
                    items,
                })
                .await?
                .batch()?;
            report.batch = Some(b.id);
            return Ok(report);
        }
        // one command even for none: it checks that both versions exist
        for slice in ids
            .chunks(crate::BATCH_SLICE)
            .chain(ids.is_empty().then_some(&[][..]))
        {
            let r = self
                .submit(Command::Migrate {
                    plan: plan.clone(),
                    instances: slice.to_vec(),
                    dry_run,
                })
                .await?
                .migrated()?;
            report.migrated.extend(r.migrated);
            report.refused.extend(r.refused);
        }
        Ok(report)
    }
}
