//! Tests of the store's tables: each index row follows its record.

use super::*;
use crate::store::MemoryStore;
use redb::ReadableTableMetadata;

fn message(seq: u64, state: MessageState) -> MessageRecord {
    MessageRecord {
        seq,
        message_id: format!("m{seq}"),
        name: "Done".into(),
        key: "k".into(),
        variables: Default::default(),
        state,
        reason: None,
        accepted_at: 5,
        expires_at: Some(100),
        candidates: Vec::new(),
        instance: None,
        element: None,
        raw: None,
        attributes: Vec::new(),
        settled_at: None,
        note: None,
        requeues: 0,
        candidate_elements: Vec::new(),
    }
}

/// Every database written by an earlier release (the fixtures of the
/// format tests) migrates on open to records and rows that pass the
/// store's own check: the derived index rows, the scopes, the
/// registrations each token keeps.
#[test]
fn every_older_format_migrates_to_a_consistent_store() {
    for name in [
        "format-v1.redb",
        "format-v2-scopes.redb",
        "format-v3-tokens.redb",
        "format-v4-registrations.redb",
        "format-v5-definitions.redb",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        std::fs::copy(fixtures.join(name), &path).unwrap();
        let (db, _) = super::super::open_db(&path, None).unwrap();
        let r = db.begin_read().unwrap();
        let problems = super::super::verify::verify(&r, true).unwrap();
        assert!(problems.is_empty(), "{name}: {problems:#?}");
        let format = r
            .open_table(META)
            .unwrap()
            .get(FORMAT_KEY)
            .unwrap()
            .unwrap()
            .value();
        assert_eq!(format, DB_FORMAT, "{name}");
    }
}

/// A process version of format 4 whose source is kept moves to that
/// source on open (the fixture of today's release before format 5 keeps
/// every source; a build without FEEL cannot parse its FEEL and keeps it);
/// one deployed before sources were kept stays as its model was stored.
/// Every version loads either way.
#[test]
fn definitions_move_to_their_source_where_it_gives_their_model_again() {
    let feel = cfg!(feature = "feel");
    for (name, moves) in [
        ("format-v1.redb", false),
        ("format-v5-definitions.redb", feel),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        std::fs::copy(fixtures.join(name), &path).unwrap();
        let (db, _) = super::super::open_db(&path, None).unwrap();
        let snap = super::super::begin_read(&db).unwrap();
        let r = db.begin_read().unwrap();
        let heads = r.open_table(DEFINITION_HEADS).unwrap().len().unwrap();
        let pinned = r.open_table(DEFINITIONS).unwrap().len().unwrap();
        if moves {
            assert!(
                heads > 0 && pinned == 0,
                "{name}: {heads} heads, {pinned} pinned"
            );
        } else {
            assert!(
                heads == 0 && pinned > 0,
                "{name}: {heads} heads, {pinned} pinned"
            );
        }
        let deployed = snap.deployed().unwrap();
        assert_eq!(
            deployed.iter().map(|(_, v)| v.len() as u64).sum::<u64>(),
            heads + pinned,
            "{name}"
        );
        for (process, versions) in deployed {
            for (version, _, _) in versions {
                let stored = snap.definition(&process, version).unwrap().unwrap();
                assert_eq!(
                    matches!(stored, StoredDefinition::Source { .. }),
                    moves,
                    "{name}: {process} {version}"
                );
                let rec = stored.load(&process, version).unwrap();
                assert_eq!(rec.process.id, process);
            }
        }
    }
}

#[test]
fn a_record_written_around_the_store_is_found_by_the_check() {
    let db = MemoryStore::new();
    db.write(|t| {
        let rec = message(1, MessageState::Buffered);
        t.messages
            .get_mut()
            .unwrap()
            .insert(1, codec::encode(&rec).unwrap().as_slice())
            .unwrap();
    });
    let problems = db.verify();
    assert!(
        problems.iter().any(|p| p.starts_with("buffer:"))
            && problems.iter().any(|p| p.starts_with("expiry:"))
            && problems.iter().any(|p| p.starts_with("dedup:")),
        "{problems:?}"
    );
}

fn instance(id: u64, version: u32, tokens: &[(&str, Millis)]) -> InstanceRecord {
    InstanceRecord {
        id,
        process: "p".into(),
        version,
        business_key: None,
        variables: Default::default(),
        tokens: tokens
            .iter()
            .enumerate()
            .map(|(i, (element, since))| Token {
                id: i as u64 + 1,
                element: element.to_string(),
                wait: Wait::Join { flow: 0 },
                since: *since,
                timers: Vec::new(),
                scope: 0,
                locals: Default::default(),
                boundary_messages: Vec::new(),
                boundary_signals: Vec::new(),
            })
            .collect(),
        next_token: tokens.len() as u64 + 1,
        activations: 0,
        history_len: 0,
        started_at: 0,
        ended_at: None,
        cancelled: false,
        expects: Vec::new(),
        top_level: tokens.len() as u64,
        called_by: None,
        new_history: Vec::new(),
    }
}

fn task(id: u64, element: &str, created_at: Millis) -> TaskRecord {
    TaskRecord {
        id,
        instance: 1,
        token: id,
        process: "p".into(),
        element: element.into(),
        name: None,
        assignee: None,
        candidate_users: Vec::new(),
        candidate_groups: Vec::new(),
        due: None,
        follow_up: None,
        priority: None,
        form_key: None,
        created_at,
    }
}

#[test]
fn history_is_appended_as_rows_and_leaves_with_its_instance() {
    let db = MemoryStore::new();
    let mut rec = instance(1, 1, &[("a", 10)]);
    rec.record("p", "instance_started", 10);
    rec.record("a", "activated", 10);
    db.write(|t| t.put_instance(&mut rec, &Resting::default(), None).unwrap());
    assert_eq!((rec.history_len, rec.new_history.len()), (2, 0));
    let stored = db.write(|t| t.instance_full(1).unwrap().unwrap());
    assert_eq!((stored.history_len, stored.new_history.len()), (2, 0));
    // a later step appends without reading or rewriting the earlier rows
    let mut later = stored.clone();
    later.record("a", "completed", 20);
    let resting = Resting::of(&stored);
    db.write(|t| t.put_instance(&mut later, &resting, None).unwrap());
    let events: Vec<String> = db
        .snapshot()
        .history(&later, None)
        .unwrap()
        .into_iter()
        .map(|h| h.event)
        .collect();
    assert_eq!(events, ["instance_started", "activated", "completed"]);
    assert_eq!(db.verify(), Vec::<String>::new());
    // verify notices a count that disagrees with the rows
    let mut wrong = later.clone();
    wrong.history_len = 7;
    db.write(|t| {
        t.instances
            .get_mut()
            .unwrap()
            .insert(1, super::super::encode_instance(&wrong).unwrap().as_slice())
            .unwrap();
    });
    assert!(
        db.verify().iter().any(|p| p.contains("counts 7 entries")),
        "{:?}",
        db.verify()
    );
    db.write(|t| t.remove_instance(&later).unwrap());
    assert_eq!(db.verify(), Vec::<String>::new(), "no row outlives it");
    assert!(db.snapshot().history(&later, None).unwrap().is_empty());
}

#[test]
fn the_scraped_summaries_come_from_gauges_and_index_heads_and_match_the_records() {
    let db = MemoryStore::new();
    db.write(|t| {
        // two versions with tokens at `a`, one at `b`
        t.put_instance(
            &mut instance(1, 1, &[("a", 50), ("b", 70)]),
            &Resting::default(),
            None,
        )
        .unwrap();
        t.put_instance(&mut instance(2, 2, &[("a", 30)]), &Resting::default(), None)
            .unwrap();
        t.put_task(&task(7, "review", 40)).unwrap();
        t.put_task(&task(8, "review", 20)).unwrap();
        let mut claimed = task(8, "review", 20);
        claimed.assignee = Some("anna".into());
        t.put_task(&claimed).unwrap(); // a claim counts the task once
        t.put_task(&task(9, "approve", 90)).unwrap();
    });
    let snap = db.snapshot();
    assert_eq!(
        snap.resting_summary().unwrap(),
        vec![("a".to_string(), 2, 30), ("b".to_string(), 1, 70)]
    );
    assert_eq!(
        snap.open_tasks_summary().unwrap(),
        vec![
            ("approve".to_string(), 1, 90),
            ("review".to_string(), 2, 20)
        ]
    );
    // (the tasks' tokens are not written here: only rows and gauges count)
    let derived = |db: &MemoryStore| -> Vec<String> {
        db.verify()
            .into_iter()
            .filter(|p| p.starts_with("tasks_at") || p.starts_with("gauges"))
            .collect()
    };
    assert_eq!(derived(&db), Vec::<String>::new());
    db.write(|t| {
        t.remove_task(8).unwrap();
        t.remove_task(9).unwrap();
        t.remove_task(9).unwrap(); // gone already: nothing moves
    });
    assert_eq!(
        db.snapshot().open_tasks_summary().unwrap(),
        vec![("review".to_string(), 1, 40)]
    );
    assert_eq!(derived(&db), Vec::<String>::new());
}

fn job(id: u64, kind: JobKind, state: JobState, due_at: Millis) -> JobRecord {
    JobRecord {
        id,
        instance: 1,
        token: id,
        element: "e".into(),
        kind,
        state,
        due_at,
        attempts: 0,
        last_error: None,
        idempotency_key: format!("1:e:{id}"),
        created_at: 0,
        lease: None,
        max_attempts: None,
        history: Vec::new(),
    }
}

#[test]
fn what_metrics_count_comes_from_indexes_and_gauges() {
    let db = MemoryStore::new();
    let topic = |t: &str| JobKind::Task { topic: t.into() };
    db.write(|t| {
        t.put_job(&job(1, topic("a"), JobState::Ready, 10)).unwrap();
        t.put_job(&job(2, topic("b"), JobState::Ready, 20)).unwrap();
        t.put_job(&job(3, topic("b"), JobState::Ready, 30)).unwrap();
        t.put_job(&job(4, topic("c"), JobState::Locked, 5)).unwrap();
        t.put_job(&job(5, JobKind::Continue, JobState::Ready, 15))
            .unwrap();
        t.put_job(&job(6, topic("d"), JobState::Incident, 1))
            .unwrap();
        t.put_job(&job(7, topic("d"), JobState::Incident, 1))
            .unwrap();
        let mut late = message(1, MessageState::Parked);
        late.reason = Some(Reason::Late);
        t.put_message(&late).unwrap();
        let mut old = message(2, MessageState::Buffered);
        old.accepted_at = 3;
        t.put_message(&old).unwrap();
        t.put_message(&message(3, MessageState::Buffered)).unwrap();
    });
    let s = db.snapshot();
    assert_eq!(
        s.due_count(20).unwrap(),
        3,
        "a@10, b@20, the continuation@15"
    );
    assert_eq!(s.due_count(4).unwrap(), 0);
    assert_eq!(s.due_count(u64::MAX).unwrap(), 4);
    assert_eq!(s.incident_count().unwrap(), 2);
    assert_eq!(s.parked_gauges().unwrap(), vec![("late".to_string(), 1)]);
    assert_eq!(s.oldest_buffered_at().unwrap(), Some(3));
    drop(s);
    db.write(|t| {
        // the incident is retried, the other removed; the oldest message correlates
        t.put_job(&job(6, topic("d"), JobState::Ready, 1)).unwrap();
        let gone = t.job(7).unwrap().unwrap();
        t.remove_job(&gone).unwrap();
        let mut m = t.message(2).unwrap().unwrap();
        m.state = MessageState::Correlated;
        t.put_message(&m).unwrap();
        let mut late = t.message(1).unwrap().unwrap();
        late.state = MessageState::Discarded;
        t.put_message(&late).unwrap();
    });
    let s = db.snapshot();
    assert_eq!(s.incident_count().unwrap(), 0);
    assert_eq!(s.due_count(20).unwrap(), 4, "the retried job is due");
    assert_eq!(s.parked_gauges().unwrap(), vec![]);
    assert_eq!(s.oldest_buffered_at().unwrap(), Some(5));
    drop(s);
    assert_eq!(db.verify(), Vec::<String>::new());
}

#[test]
fn instance_messages_and_incident_jobs_follow_their_records_and_are_rebuilt_on_upgrade() {
    let db = MemoryStore::new();
    let of = |db: &MemoryStore, inst| -> Vec<u64> {
        db.snapshot()
            .messages_of_instance(inst)
            .unwrap()
            .iter()
            .map(|m| m.seq)
            .collect()
    };
    db.write(|t| {
        let mut m = message(1, MessageState::Parked);
        m.candidates = vec![10, 11];
        t.put_message(&m).unwrap();
    });
    assert_eq!((of(&db, 10), of(&db, 11)), (vec![1], vec![1]));
    db.write(|t| {
        let mut m = t.message(1).unwrap().unwrap();
        m.state = MessageState::Correlated;
        m.candidates.clear();
        m.instance = Some(11);
        t.put_message(&m).unwrap();
    });
    assert_eq!((of(&db, 10), of(&db, 11)), (vec![], vec![1]));
    assert_eq!(db.verify(), Vec::<String>::new());
    db.write(|t| {
        let mut j = job(3, JobKind::Task { topic: "t".into() }, JobState::Ready, 1);
        t.put_job(&j).unwrap();
        j.state = JobState::Incident;
        t.put_job(&j).unwrap();
    });
    assert_eq!(db.snapshot().incident_jobs().unwrap().len(), 1);
    assert_eq!(db.verify(), Vec::<String>::new());
    // a database from before the indexes gets their rows when it is opened
    db.write(|t| {
        t.incident_jobs.get_mut().unwrap().remove(3).unwrap();
        t.instance_messages
            .get_mut()
            .unwrap()
            .remove((11, 1))
            .unwrap();
        t.meta.insert(INDEX_VERSION_KEY, 3).unwrap();
    });
    assert!(!db.verify().is_empty());
    db.write(|t| t.upgrade_indexes().unwrap());
    assert_eq!(db.verify(), Vec::<String>::new());
    assert_eq!(of(&db, 11), vec![1]);
    assert_eq!(db.snapshot().incident_jobs().unwrap()[0].id, 3);
    db.write(|t| {
        let m = t.message(1).unwrap().unwrap();
        t.remove_message(&m).unwrap();
    });
    assert_eq!(of(&db, 11), Vec::<u64>::new());
    assert_eq!(db.verify(), Vec::<String>::new());
}

#[test]
fn message_and_job_rows_follow_every_state_change() {
    let db = MemoryStore::new();
    db.write(|t| {
        let mut m = message(1, MessageState::Buffered);
        t.put_message(&m).unwrap();
        m.state = MessageState::Parked;
        t.put_message(&m).unwrap();
        t.put_message(&message(2, MessageState::Buffered)).unwrap();
    });
    assert_eq!(db.verify(), Vec::<String>::new());
    db.write(|t| {
        let m = t.message(2).unwrap().unwrap();
        t.remove_message(&m).unwrap();
        let mut job = JobRecord {
            id: 7,
            instance: 1,
            token: 1,
            element: "e".into(),
            kind: JobKind::Task { topic: "t".into() },
            state: JobState::Ready,
            due_at: 10,
            attempts: 0,
            last_error: None,
            idempotency_key: "1:e:1".into(),
            created_at: 0,
            lease: None,
            max_attempts: None,
            history: Vec::new(),
        };
        t.put_job(&job).unwrap();
        assert_eq!(t.due_tasks("t", 10, 5).unwrap(), vec![7]);
        job.state = JobState::Locked;
        job.lease = Some(Lease {
            owner: "w".into(),
            token: 1,
            until: 50,
            in_process: false,
        });
        t.put_job(&job).unwrap();
        assert_eq!(t.due_tasks("t", 10, 5).unwrap(), Vec::<u64>::new());
        assert_eq!(t.leases_until(50).unwrap(), vec![(50, 7)]);
        job.attempt_failed(20, "boom".into());
        job.state = JobState::Ready;
        job.due_at = 30;
        t.put_job(&job).unwrap();
        assert_eq!(t.leases_until(u64::MAX).unwrap(), Vec::new());
        assert_eq!(t.due_tasks("t", 30, 5).unwrap(), vec![7]);
    });
    assert_eq!(db.verify(), Vec::<String>::new());
}

/// A format-4 row moves to its source only when that source parses to the
/// very model stored: a source edited since (here a task renamed) leaves the
/// row as it was stored; the head of the moved one keeps the correlation
/// keys its model was parsed with.
#[test]
fn a_source_that_no_longer_gives_its_model_leaves_the_row_pinned() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/format-v4-definitions.json"
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let hex = |v: &serde_json::Value| -> Option<Vec<u8>> {
        let h = v.as_str()?;
        Some(
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect(),
        )
    };
    // a row whose model has a task with a name, so that an edit shows
    let row = rows
        .iter()
        .find(|r| r["xml"].as_str().unwrap().contains("serviceTask id=\"t\""))
        .unwrap_or(&rows[0]);
    let xml = row["xml"].as_str().unwrap().to_string();
    let process = row["process"].as_str().unwrap().to_string();
    let definition = hex(&row["definition"]).unwrap();
    let extras = hex(&row["extras"]);
    let db = MemoryStore::new();
    let edited = xml.replacen("id=\"", "id=\"x", 1);
    assert_ne!(edited, xml);
    for (version, source) in [(1u32, xml.as_str()), (2, edited.as_str())] {
        db.write(|t| {
            let key = (process.as_str(), version);
            t.definitions
                .get_mut()
                .unwrap()
                .insert(key, definition.as_slice())
                .unwrap();
            if let Some(x) = &extras {
                t.definition_extras
                    .get_mut()
                    .unwrap()
                    .insert(key, x.as_slice())
                    .unwrap();
            }
            t.definition_sources
                .get_mut()
                .unwrap()
                .insert(key, source.as_bytes())
                .unwrap();
        });
    }
    let (moved, kept) = db.write(|t| t.store_definitions_as_sources().unwrap());
    assert_eq!((moved, kept), (1, 1));
    db.write(|t| {
        let Some(StoredDefinition::Source { head, .. }) = t.definition(&process, 1).unwrap() else {
            panic!("version 1 moved to its source");
        };
        let moved = StoredDefinition::Source {
            head: head.clone(),
            xml: xml.clone(),
        }
        .load(&process, 1)
        .unwrap();
        for (message, key) in &moved.process.correlation_keys {
            assert_eq!(head.overrides.get(message), Some(key));
        }
        let pinned = t.definition(&process, 2).unwrap().unwrap();
        assert!(matches!(pinned, StoredDefinition::Pinned(_)));
        // the pinned row still runs as stored, not as the edited source reads
        let rec = pinned.load(&process, 2).unwrap();
        let today = crate::model::parse("x.bpmn", &xml, &Default::default())
            .unwrap()
            .into_iter()
            .find(|p| p.id == process)
            .unwrap();
        assert!(rec.process.same_model(&today));
    });
}

/// A batch opens only the tables it touches: buffering a message opens the
/// message tables and their index rows, not those of jobs, user tasks,
/// instances or decisions; a later write to a job opens the job tables.
#[test]
fn a_batch_opens_only_the_tables_it_touches() {
    let db = MemoryStore::new();
    db.write(|t| {
        assert!(!t.messages.is_open(), "nothing is opened before it is used");
        t.put_message(&message(1, MessageState::Buffered)).unwrap();
        assert!(t.messages.is_open() && t.buffer.is_open() && t.expiry.is_open());
        for (name, open) in [
            ("jobs", t.jobs.is_open()),
            ("cont_due", t.cont_due.is_open()),
            ("tasks", t.tasks.is_open()),
            ("instances", t.instances.is_open()),
            ("tokens", t.tokens.is_open()),
            ("decisions", t.decisions.is_open()),
            ("definition_sources", t.definition_sources.is_open()),
        ] {
            assert!(!open, "a buffered message opened {name}");
        }
        t.put_job(&job(7, JobKind::ContinueAfter, JobState::Ready, 10))
            .unwrap();
        assert!(t.jobs.is_open() && t.cont_due.is_open());
    });
    assert_eq!(db.verify(), Vec::<String>::new());
}
