//! A backup is consistent at one batch of the log and is taken while
//! writers go on: taken while 64 publishers and the reference scenario run,
//! and restored into a new file, every call answered before the backup began
//! is there with its outcome, the store's check holds and the orders run to
//! their end. A partial, damaged, truncated, foreign-partition or
//! newer-format backup is refused naming what is wrong, and a restore never
//! replaces a database unless told to (and then keeps it).
use crate::common;
use common::{Env, completion};
use postfach::backup::{self, BackupError, Manifest};
use postfach::{Options, Postfach};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Publishes `n` completions for orders nobody waits for yet, from 64
/// callers, recording each id once its publish was answered.
async fn publish_from_64(pf: Postfach, n: usize, answered: Arc<Mutex<Vec<String>>>) {
    let mut tasks = Vec::new();
    for caller in 0..64 {
        let (pf, answered) = (pf.clone(), answered.clone());
        tasks.push(tokio::spawn(async move {
            for i in (caller..n).step_by(64) {
                let id = format!("m-{i}");
                let d = pf
                    .publish(completion(&format!("A-{i}"), &id))
                    .await
                    .unwrap();
                assert_eq!(d.outcome.as_str(), "buffered");
                answered.lock().unwrap().push(id);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_under_load_restores_every_call_answered_before_it() {
    let env = Env::reference().await;
    let pf = env.pf.clone();
    // orders waiting for their completion while the publishers run
    let mut orders = Vec::new();
    for i in 0..20 {
        orders.push(env.waiting_order(&format!("W-{i}")).await);
    }
    let answered = Arc::new(Mutex::new(Vec::new()));
    let load = tokio::spawn(publish_from_64(pf.clone(), 4000, answered.clone()));
    // wait until the publishers are well under way
    while answered.lock().unwrap().len() < 1000 {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let before: BTreeSet<String> = answered.lock().unwrap().iter().cloned().collect();
    let dir = env.dir.path().join("backups");
    let manifest = pf.backup(&dir).await.unwrap();
    load.await.unwrap();
    assert!(answered.lock().unwrap().len() == 4000);

    let restored = env.dir.path().join("restored.redb");
    let done = backup::restore(&dir.join(&manifest.id), &restored, Some(0), false).unwrap();
    assert_eq!(done.manifest, manifest);
    assert!(done.kept.is_empty());
    let copy = Postfach::open_with(&restored, Options::default()).unwrap();
    // every publish answered before the backup began is there, buffered
    let buffered: BTreeSet<String> = copy
        .reader()
        .unwrap()
        .messages(&Default::default())
        .unwrap()
        .into_iter()
        .map(|m| m.message_id)
        .collect();
    let lost: Vec<&String> = before.difference(&buffered).collect();
    assert!(
        lost.is_empty(),
        "answered before the backup, not in it: {lost:?}"
    );
    assert!(
        buffered.len() < 4000,
        "the snapshot was taken while the publishers ran: {}",
        buffered.len()
    );
    // the copy is a database that runs: its waiting orders complete
    for (i, &id) in orders.iter().enumerate() {
        let d = copy
            .publish(completion(&format!("W-{i}"), &format!("done-{i}")))
            .await
            .unwrap();
        assert_eq!(d.outcome.as_str(), "correlated", "order {id}");
        assert_eq!(d.instance, Some(id));
    }
    copy.work_until_idle().await.unwrap();
    copy.close();
}

fn backup_of(env: &Env) -> (std::path::PathBuf, Manifest) {
    let rt = tokio::runtime::Handle::current();
    let dir = env.dir.path().join("backups");
    let m = tokio::task::block_in_place(|| rt.block_on(env.pf.backup(&dir))).unwrap();
    (dir.join(&m.id), m)
}

fn refused(dir: &Path, target: &Path) -> String {
    backup::restore(dir, target, None, false)
        .unwrap_err()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_that_is_not_whole_is_refused_by_name() {
    let env = Env::reference().await;
    env.waiting_order("A-1").await;
    let (dir, manifest) = backup_of(&env);
    let target = env.dir.path().join("t.redb");
    let db = dir.join(backup::DATABASE);
    let whole = std::fs::read(&db).unwrap();

    // damaged: one byte flipped in the middle
    let mut bytes = whole.clone();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&db, &bytes).unwrap();
    let e = refused(&dir, &target);
    assert!(e.contains("postfach.redb") && e.contains("SHA-256"), "{e}");
    // truncated
    std::fs::write(&db, &whole[..whole.len() - 4096]).unwrap();
    let e = refused(&dir, &target);
    assert!(e.contains("bytes, the manifest says"), "{e}");
    std::fs::write(&db, &whole).unwrap();
    assert!(!target.exists(), "nothing written while refusing");

    // another partition, a newer format
    let e = backup::restore(&dir, &target, Some(1), false).unwrap_err();
    assert!(
        matches!(e, BackupError::WrongPartition { wanted: 1, .. }),
        "{e}"
    );
    let manifest_path = dir.join(backup::MANIFEST);
    let original = std::fs::read_to_string(&manifest_path).unwrap();
    let mut newer = manifest.clone();
    newer.db_format += 1;
    std::fs::write(&manifest_path, serde_json::to_string(&newer).unwrap()).unwrap();
    assert!(matches!(
        backup::restore(&dir, &target, None, false).unwrap_err(),
        BackupError::NewerFormat { .. }
    ));
    // a manifest that is not one
    std::fs::write(&manifest_path, "{\"id\": 1}").unwrap();
    let e = refused(&dir, &target);
    assert!(e.contains("manifest.json"), "{e}");
    // partial: the manifest never written
    std::fs::remove_file(&manifest_path).unwrap();
    let e = refused(&dir, &target);
    assert!(e.contains("partial backup"), "{e}");
    std::fs::write(&manifest_path, original).unwrap();

    // listed, each checked
    let listed = backup::list(dir.parent().unwrap()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].1.as_ref().unwrap(), &manifest);

    // restored once; not again over it, unless told to — then kept aside
    backup::restore(&dir, &target, None, false).unwrap();
    let e = refused(&dir, &target);
    assert!(e.contains("exists"), "{e}");
    let again = backup::restore(&dir, &target, None, true).unwrap();
    assert_eq!(again.kept.len(), 1, "{:?}", again.kept);
    assert!(again.kept[0].exists());
    let copy = Postfach::open_with(&target, Options::default()).unwrap();
    assert_eq!(
        copy.reader()
            .unwrap()
            .instances(&Default::default())
            .unwrap()
            .len(),
        1
    );
    copy.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_the_backup_does_not_know_stops_it() {
    let mut env = Env::reference().await;
    env.pf.close();
    {
        let db = redb::Database::create(env.dir.path().join("test.redb")).unwrap();
        let tx = db.begin_write().unwrap();
        {
            let stray: redb::TableDefinition<u64, u64> = redb::TableDefinition::new("stray");
            tx.open_table(stray).unwrap().insert(1, 1).unwrap();
        }
        tx.commit().unwrap();
    }
    env.reopen();
    let e = env
        .pf
        .backup(env.dir.path().join("backups"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("'stray'"), "{e}");
}

/// A backup killed while it copies leaves a `.partial-…` directory that is
/// listed as not restorable and refused by `restore`; the database it was
/// copying from is untouched. (The command line is built with `server`.)
#[cfg(feature = "server")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_killed_while_it_copies_is_refused_and_the_database_is_intact() {
    let mut env = Env::reference().await;
    let answered = Arc::new(Mutex::new(Vec::new()));
    publish_from_64(env.pf.clone(), 40_000, answered).await;
    let db = env.dir.path().join("test.redb");
    env.pf.close();
    let backups = env.dir.path().join("backups");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(&db)
        .args(["backup", "--to"])
        .arg(&backups)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // killed as soon as the copy has begun
    let partial = loop {
        let found = std::fs::read_dir(&backups).ok().and_then(|mut d| {
            d.find_map(|e| {
                let e = e.ok()?;
                let name = e.file_name().to_string_lossy().into_owned();
                (name.starts_with(".partial-") && e.path().join(backup::DATABASE).exists())
                    .then(|| e.path())
            })
        });
        if let Some(p) = found {
            child.kill().unwrap();
            break p;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the backup ended before it could be interrupted"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    child.wait().unwrap();
    assert!(!partial.join(backup::MANIFEST).exists());
    let listed = backup::list(&backups).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        matches!(listed[0].1, Err(BackupError::Partial(_))),
        "{listed:?}"
    );
    let e = refused(&partial, &env.dir.path().join("r.redb"));
    assert!(e.contains("partial backup"), "{e}");
    // the database is as it was: every message there, the store's check clean
    env.reopen();
    let held = env
        .pf
        .reader()
        .unwrap()
        .messages(&Default::default())
        .unwrap()
        .len();
    assert_eq!(held, 40_000);
    let again = env.pf.backup(&backups).await.unwrap();
    assert!(backup::check(&backups.join(&again.id)).is_ok());
}
