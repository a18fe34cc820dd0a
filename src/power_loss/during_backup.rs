//! The power goes while a backup is written (onto the same simulated disk,
//! under `backups/`), at every few of its disk operations and with every
//! fate of the unsynced writes: the database opens with every call answered
//! before the cut (the same check as every other cut), a backup whose
//! directory got its final name restores, and an interrupted one
//! (`.partial-ID`, or files without a manifest) is refused by `restore` as
//! partial.

use super::check::check;
use super::workload::{Answered, Op, apply, deploy_all, options};
use super::{Unsynced, runtime};
use crate::Postfach;
use crate::backup::{self, BackupError};
use crate::disk::sim::Disk;
use std::collections::BTreeMap;
use std::path::Path;

const BACKUPS: &str = "backups";

/// The calls before the backup, and after it.
fn before() -> Vec<Op> {
    vec![
        Op::Start(1),
        Op::Start(2),
        Op::HandOver,
        Op::Publish(1, 1),
        Op::Publish(3, 3),
    ]
}

/// Runs the calls, a backup, and a call after it; returns what was
/// answered and the disk operations at which the backup began and ended.
async fn run(disk: &Disk) -> (Answered, u64, u64) {
    let mut got = Answered::default();
    let Ok(pf) = Postfach::open_sim(disk, options(false)) else {
        return (got, 0, 0);
    };
    let mut span = (0, 0);
    let calls = async {
        deploy_all(&pf).await?;
        got.calls += 1;
        for op in before() {
            apply(&pf, &op, &mut got).await?;
        }
        span.0 = disk.ops();
        let files = Box::new(crate::backup::SimFiles(disk.clone()));
        let taken = pf.backup_on(files, Path::new(BACKUPS), None).await;
        span.1 = disk.ops();
        taken.map_err(|_| ())?;
        apply(&pf, &Op::Start(4), &mut got).await
    };
    let _ = calls.await;
    pf.close();
    (got, span.0, span.1)
}

/// A directory of its own under the system's, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("postfach-backup-cut-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temp dir");
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What `restore` says of each backup directory left on the disk, written
/// out to a real directory: (its name, whether it restored).
fn restore_each(files: &BTreeMap<String, Vec<u8>>) -> Vec<(String, Result<(), BackupError>)> {
    let tmp = TempDir::new();
    let mut dirs = std::collections::BTreeSet::new();
    for (name, bytes) in files {
        let Some(rest) = name.strip_prefix(&format!("{BACKUPS}/")) else {
            continue;
        };
        let path = tmp.path().join(rest);
        std::fs::create_dir_all(path.parent().expect("in a directory")).expect("dir");
        std::fs::write(&path, bytes).expect("write");
        dirs.insert(rest.split('/').next().unwrap_or_default().to_string());
    }
    dirs.into_iter()
        .map(|d| {
            let target = tmp.path().join(format!("{d}.restored.redb"));
            let restored =
                backup::restore(&tmp.path().join(&d), &target, Some(0), false).and_then(|_| {
                    Postfach::open(&target)
                        .map(|pf| pf.close())
                        .map_err(|e| BackupError::Damaged {
                            path: target.display().to_string(),
                            reason: format!("restored, but it does not open: {e}"),
                        })
                });
            (d, restored)
        })
        .collect()
}

#[test]
fn a_power_cut_during_a_backup_leaves_the_database_whole_and_the_backup_refused() {
    let rt = runtime();
    rt.block_on(async {
        let dry = Disk::new(None);
        let (_, begin, end) = run(&dry).await;
        assert!(end > begin + 10, "the backup writes: {begin}..{end}");
        let (mut complete, mut partial) = (0, 0);
        let steps = 12;
        // evenly through the copy, and each of the last steps (manifest,
        // its sync, the directory's sync, the rename, the last sync)
        let cuts = (0..=steps)
            .map(|k| begin + (end - begin) * k / steps)
            .chain((1..=5).map(|d| end - d));
        for (k, cut_at) in cuts.enumerate() {
            let k = k as u64;
            for fate in [
                Unsynced::Lost,
                Unsynced::Prefix(k + 1),
                Unsynced::Scattered(k + 7),
            ] {
                let disk = Disk::new(Some(cut_at));
                let (got, _, _) = run(&disk).await;
                let files = match fate {
                    Unsynced::Lost => disk.after_power_cut(&BTreeMap::new()),
                    Unsynced::Scattered(seed) => disk.after_power_cut_scattered(seed),
                    Unsynced::Prefix(seed) => {
                        let keep = disk
                            .pending()
                            .into_iter()
                            .map(|(name, n)| (name, (n / 2 + (seed as usize % 2), 3)))
                            .collect();
                        disk.after_power_cut(&keep)
                    }
                };
                for (dir, restored) in restore_each(&files) {
                    match restored {
                        Ok(()) => {
                            assert!(!dir.starts_with(".partial-"), "{dir} restored");
                            complete += 1;
                        }
                        Err(BackupError::Partial(_)) => partial += 1,
                        Err(e) => panic!("cut at {cut_at} ({fate:?}): {dir}: {e}"),
                    }
                }
                let problems = check(files, false, &got).await;
                assert!(
                    problems.is_empty(),
                    "cut at {cut_at} of the backup's {begin}..{end} ({fate:?}): {problems:?}"
                );
            }
        }
        // the cuts fell both before the backup was whole and after
        assert!(
            partial > 0 && complete > 0,
            "{partial} partial, {complete} complete"
        );
    });
}
