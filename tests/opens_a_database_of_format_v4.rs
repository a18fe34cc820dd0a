//! A database written by the release before every boundary subscription was
//! kept with its token (tests/fixtures/format-v4-registrations.redb, made by
//! `cargo run --example write_fixture_v4` on that release: the signal
//! boundaries' subscriptions were `signal_subs` rows only) opens, the
//! subscriptions move onto their tokens, and every wait opened before the
//! upgrade still catches — and closes exactly, leaving no row behind.
use postfach::{ManualClock, Options, Outcome, Postfach, Publish, Reason, Vars};

fn open(path: &std::path::Path) -> Postfach {
    Postfach::open_with(
        path,
        Options {
            clock: ManualClock::new(1_767_225_600_000 + 60_000),
            ..Options::default()
        },
    )
    .unwrap()
}

fn subscriptions(pf: &Postfach, id: u64) -> Vec<String> {
    let d = pf.reader().unwrap().instance_detail(id).unwrap().unwrap();
    let mut out: Vec<String> = d
        .subscriptions
        .iter()
        .map(|s| format!("{} {} {} {:?}", s.element, s.kind, s.name, s.key))
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn the_format_v4_fixture_keeps_its_boundary_subscriptions_with_their_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v4.redb");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/format-v4-registrations.redb"
        ),
        &path,
    )
    .unwrap();

    // looking first: the read-only open migrates in memory and changes no byte
    let bytes = std::fs::read(&path).unwrap();
    let ro = Postfach::open_read_only(&path, Options::default()).unwrap();
    assert_eq!(
        ro.reader().unwrap().instance(1).unwrap().unwrap().state,
        "active"
    );
    ro.close();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "read-only changed nothing"
    );

    let pf = open(&path);
    assert_eq!(
        subscriptions(&pf, 1),
        [
            "gestoppt signal Stopp None",
            "innen signal Weiter None",
            "notiz signal Hinweis None",
            "storniert message Storno Some(\"G-1\")",
            "wahl signal Weiter None",
        ]
        .map(String::from),
        "the boundary signals are shown at their boundary events"
    );

    // the non-interrupting boundary of the subprocess fires and stays open
    assert_eq!(pf.signal("Hinweis", Vars::new()).await.unwrap(), 2);
    assert!(subscriptions(&pf, 1).contains(&"notiz signal Hinweis None".to_string()));

    // the interrupting one on the user task ends it, and takes the message
    // boundary with it: a later Storno is late, not caught
    assert_eq!(pf.signal("Stopp", Vars::new()).await.unwrap(), 2);
    let open_tasks = pf.reader().unwrap().tasks(&Default::default()).unwrap();
    assert!(open_tasks.is_empty(), "{open_tasks:?}");
    let d = pf
        .publish(Publish {
            name: "Storno".into(),
            key: "G-1".into(),
            message_id: Some("storno-g1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::Parked, Some(Reason::Late)),
        "{d:?}"
    );
    assert_eq!(
        pf.signal("Stopp", Vars::new()).await.unwrap(),
        0,
        "closed exactly"
    );

    // the catch inside the subprocess and the event-based gateway: both
    // instances complete
    assert_eq!(pf.signal("Weiter", Vars::new()).await.unwrap(), 4);
    for id in [1, 2] {
        assert_eq!(
            pf.reader().unwrap().instance(id).unwrap().unwrap().state,
            "completed"
        );
    }
    pf.close();

    // nothing is left subscribed once the instances completed
    let pf = open(&path);
    for signal in ["Hinweis", "Stopp", "Weiter"] {
        assert_eq!(pf.signal(signal, Vars::new()).await.unwrap(), 0, "{signal}");
    }
    pf.close();
}

/// A database written by a newer release (a format this build does not
/// know) is refused by name and format before postfach writes to it; the command line
/// says what to do.
#[test]
fn a_database_of_a_newer_format_is_refused_naming_file_and_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("newer.redb");
    Postfach::open(&path).unwrap().close();
    {
        let db = redb::Database::open(&path).unwrap();
        let tx = db.begin_write().unwrap();
        {
            let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
            tx.open_table(meta)
                .unwrap()
                .insert("format_version", 99)
                .unwrap();
        }
        tx.commit().unwrap();
    }
    let err = match Postfach::open(&path) {
        Err(e) => e,
        Ok(_) => panic!("a database of format 99 opened"),
    };
    let text = err.to_string();
    assert!(
        matches!(
            err,
            postfach::Error::Store(postfach::StoreError::NewerFormat { found: 99, .. })
        ),
        "{err:?}"
    );
    assert!(
        text.contains("newer.redb") && text.contains("format 99"),
        "{text}"
    );
    assert!(Postfach::open_read_only(&path, Options::default()).is_err());
    // redb's own open may touch its header; what postfach stores is as it was
    let db = redb::Database::builder().open_read_only(&path).unwrap();
    let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
    let r = redb::ReadableDatabase::begin_read(&db).unwrap();
    let format = r
        .open_table(meta)
        .unwrap()
        .get("format_version")
        .unwrap()
        .unwrap()
        .value();
    assert_eq!(format, 99, "the file keeps its format");
    drop(r);
    drop(db);

    #[cfg(feature = "server")]
    {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
            .arg("--db")
            .arg(&path)
            .arg("messages")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("format 99") && stderr.contains("release that wrote it"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
