//! A partition of a cluster: its database remembers which partition it is
//! (opening it as another is refused naming both), the ids it hands out
//! carry its number, and it accepts only the correlation keys and ids it
//! owns — a message, a start or a command meant for another partition is
//! refused before anything is written, naming the owner. In a cluster a
//! process must correlate all its messages by one variable, and timer
//! starts fire on partition 0 only.
use postfach::partition::Partition;
use postfach::{EngineError, Error, Options, Postfach, Publish, StoreError, Vars, vars};

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:postfach="https://postfach.dev/bpmn" targetNamespace="t">
  <message id="m" name="Fertig" postfach:correlationKey="auftragId"/>
  <process id="auftrag" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="arbeit"/>
    <serviceTask id="arbeit"/>
    <sequenceFlow id="f2" sourceRef="arbeit" targetRef="warten"/>
    <receiveTask id="warten" messageRef="m"/>
    <sequenceFlow id="f3" sourceRef="warten" targetRef="pruefen"/>
    <userTask id="pruefen"/>
    <sequenceFlow id="f4" sourceRef="pruefen" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

fn part(index: u64, count: u64) -> Partition {
    Partition::new(index, count).unwrap()
}

fn open_as(path: &std::path::Path, p: Option<Partition>) -> Result<Postfach, Error> {
    Postfach::open_with(
        path,
        Options {
            partition: p,
            ..Options::default()
        },
    )
}

/// A key partition `index` of 4 owns (the `n`-th such key).
fn key_of(index: u32, n: usize) -> String {
    let p = part(0, 4);
    (0..)
        .map(|i| format!("K-{i}"))
        .filter(|k| p.of_key(k) == index)
        .nth(n)
        .unwrap()
}

#[test]
fn a_database_stays_the_partition_it_was_created_as() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p1.redb");
    let pf = open_as(&path, Some(part(1, 4))).unwrap();
    assert_eq!(pf.partition(), part(1, 4));
    pf.close();
    // opened without saying: it is what it was created as
    let pf = open_as(&path, None).unwrap();
    assert_eq!(pf.partition(), part(1, 4));
    pf.close();
    let ro = Postfach::open_read_only(&path, Options::default()).unwrap();
    assert_eq!(ro.partition(), part(1, 4));
    ro.close();
    for other in [part(2, 4), part(1, 8), Partition::SINGLE] {
        let err = match open_as(&path, Some(other)) {
            Err(e) => e,
            Ok(_) => panic!("opened as {other}"),
        };
        assert!(
            matches!(err, Error::Store(StoreError::OtherPartition { .. })),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("p1.redb")
                && text.contains("is partition 1 of 4")
                && text.contains(&format!("opened as {other}")),
            "{text}"
        );
    }
}

#[tokio::test]
async fn an_unpartitioned_database_with_data_does_not_become_a_partition() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("single.redb");
    let pf = open_as(&path, None).unwrap();
    pf.deploy("a.bpmn", MODEL, Default::default())
        .await
        .unwrap();
    assert_eq!(pf.partition(), Partition::SINGLE);
    pf.close();
    let err = match open_as(&path, Some(part(0, 4))) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("an unpartitioned database became partition 0 of 4"),
    };
    assert!(
        err.contains("is unpartitioned") && err.contains("opened as partition 0 of 4"),
        "{err}"
    );
    // as the one partition it always was, it opens
    open_as(&path, Some(Partition::SINGLE)).unwrap().close();
}

#[tokio::test]
async fn ids_carry_the_slot_of_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let pf = open_as(&dir.path().join("p3.redb"), Some(part(3, 4))).unwrap();
    pf.deploy("a.bpmn", MODEL, Default::default())
        .await
        .unwrap();
    let mut instances = Vec::new();
    for n in 0..3 {
        let key = key_of(3, n);
        instances.push(
            pf.start("auftrag", vars([("auftragId", key.into())]), None)
                .await
                .unwrap(),
        );
    }
    let jobs = pf.lock_jobs("arbeit", 10, "w", 60_000).await.unwrap();
    assert_eq!(jobs.len(), 3);
    for j in &jobs {
        pf.complete_job(j.task.job, Some(j.lease_token), Vars::new())
            .await
            .unwrap();
    }
    let d = pf
        .publish(Publish {
            name: "Fertig".into(),
            key: key_of(3, 0),
            ..Default::default()
        })
        .await
        .unwrap();
    let tasks = pf.reader().unwrap().tasks(&Default::default()).unwrap();
    assert_eq!(tasks.len(), 1);
    let job_ids: Vec<u64> = jobs.iter().map(|j| j.task.job).collect();
    let task_ids: Vec<u64> = tasks.iter().map(|t| t.task.parse().unwrap()).collect();
    let record: u64 = d.message_id.trim_start_matches("pf-").parse().unwrap();
    let map = postfach::slots::SlotMap::new(4).unwrap();
    for id in instances
        .iter()
        .chain(&job_ids)
        .chain(&task_ids)
        .chain([&record])
    {
        assert_eq!(
            map.partition_of_id(*id),
            3,
            "id {id} names partition 3 (instances {instances:?}, jobs {job_ids:?}, tasks {task_ids:?}, message record {record})"
        );
        // slot s lies on s mod 4 until a move: id mod P still names it
        assert_eq!(id % 4, 3, "{id}");
    }
    assert_eq!(
        instances[0],
        4096 + u64::from(map.slot_of_key(&key_of(3, 0))),
        "the first instance is 1·S + the slot of its key"
    );
    // a job carries its instance's slot, the message record its key's
    assert_eq!(map.slot_of_id(job_ids[0]), map.slot_of_id(instances[0]));
    assert_eq!(map.slot_of_id(record), map.slot_of_key(&key_of(3, 0)));
    pf.close();
}

#[tokio::test]
async fn keys_and_ids_of_other_partitions_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let pf = open_as(&dir.path().join("p0.redb"), Some(part(0, 4))).unwrap();
    pf.deploy("a.bpmn", MODEL, Default::default())
        .await
        .unwrap();
    let mine = pf
        .start("auftrag", vars([("auftragId", key_of(0, 0).into())]), None)
        .await
        .unwrap();

    let theirs = key_of(2, 0);
    let refused = |e: Error, owner: u32, what: &str| match e {
        Error::Engine(EngineError::OtherPartition {
            owner: o,
            here: 0,
            version: 1,
            ..
        }) if o == owner => {
            assert!(e.to_string().contains(what), "{e}");
        }
        other => panic!("{what}: {other:?}"),
    };
    let e = pf
        .publish(Publish {
            name: "Fertig".into(),
            key: theirs.clone(),
            message_id: Some("m-1".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    refused(
        e,
        2,
        &format!("message key '{theirs}' belongs to partition 2 (slot map version 1)"),
    );
    let e = pf
        .start(
            "auftrag",
            vars([("auftragId", theirs.clone().into())]),
            None,
        )
        .await
        .unwrap_err();
    refused(
        e,
        2,
        "belongs to partition 2 (slot map version 1); this is partition 0",
    );
    let e = pf.start("auftrag", Vars::new(), None).await.unwrap_err();
    assert!(
        matches!(&e, Error::Engine(EngineError::KeyNeeded { variable, .. }) if variable == "auftragId"),
        "{e:?}"
    );
    // ids: an instance and a job another partition handed out
    let e = pf.cancel_token(mine + 1, 1).await.unwrap_err();
    refused(e, 1, &format!("instance {}", mine + 1));
    let e = pf
        .complete_job(4 * 7 + 3, None, Vars::new())
        .await
        .unwrap_err();
    refused(e, 3, "job 31");

    let r = pf.reader().unwrap();
    assert!(
        r.messages(&Default::default()).unwrap().is_empty(),
        "nothing was stored"
    );
    assert_eq!(r.instances(&Default::default()).unwrap().len(), 1);
    pf.close();
}

#[tokio::test]
async fn a_process_correlated_by_two_variables_is_refused_in_a_cluster_only() {
    let two_keys = MODEL
        .replace(
            r#"<message id="m" name="Fertig" postfach:correlationKey="auftragId"/>"#,
            r#"<message id="m" name="Fertig" postfach:correlationKey="auftragId"/>
  <message id="st" name="Storno" postfach:correlationKey="kundeId"/>"#,
        )
        .replace(
            r#"<sequenceFlow id="f4" sourceRef="pruefen" targetRef="e"/>"#,
            r#"<sequenceFlow id="f4" sourceRef="pruefen" targetRef="e"/>
    <boundaryEvent id="storniert" attachedToRef="pruefen"><messageEventDefinition messageRef="st"/></boundaryEvent>
    <sequenceFlow id="f5" sourceRef="storniert" targetRef="e"/>"#,
        );
    let dir = tempfile::tempdir().unwrap();
    let pf = open_as(&dir.path().join("p.redb"), Some(part(0, 2))).unwrap();
    let e = pf
        .deploy("zwei.bpmn", &two_keys, Default::default())
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, Error::Engine(EngineError::MixedKeys { .. })),
        "{e:?}"
    );
    for part in [
        "'auftrag'",
        "auftragId: 'Fertig' at warten",
        "kundeId: 'Storno' at storniert",
    ] {
        assert!(text.contains(part), "{part} in {text}");
    }
    assert!(
        pf.reader().unwrap().deployed().unwrap().is_empty(),
        "nothing deployed"
    );
    pf.close();
    let single = open_as(&dir.path().join("single.redb"), None).unwrap();
    single
        .deploy("zwei.bpmn", &two_keys, Default::default())
        .await
        .unwrap();
    single.close();
}

#[tokio::test]
async fn a_timer_start_is_scheduled_on_partition_0_only() {
    let timer = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" targetNamespace="t">
  <process id="taeglich" isExecutable="true">
    <startEvent id="s"><timerEventDefinition><timeCycle>R/PT1H</timeCycle></timerEventDefinition></startEvent>
    <sequenceFlow id="f1" sourceRef="s" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;
    let dir = tempfile::tempdir().unwrap();
    for (index, expected) in [(0, 1), (1, 0), (2, 0)] {
        let pf = open_as(
            &dir.path().join(format!("t{index}.redb")),
            Some(part(index, 3)),
        )
        .unwrap();
        pf.deploy("t.bpmn", timer, Default::default())
            .await
            .unwrap();
        let timers = pf
            .reader()
            .unwrap()
            .jobs(false)
            .unwrap()
            .into_iter()
            .filter(|j| j.instance.is_none())
            .count();
        assert_eq!(timers, expected, "partition {index}");
        pf.close();
    }
}

#[cfg(feature = "server")]
use crate::common;

/// `postfach run --partitions P` takes its partition number from
/// `--partition` or from the pod name at the end of `$HOSTNAME`, says which
/// it is, refuses to start its database as another partition, and answers
/// 421 to a start whose key another partition owns.
#[cfg(feature = "server")]
#[test]
fn run_takes_its_partition_from_the_flag_or_the_pod_name() {
    let dir = tempfile::tempdir().unwrap();
    let srv = common::server::Server::launch(
        dir.path(),
        &["--partitions".into(), "4".into()],
        &[("HOSTNAME", "postfach-3")],
    );
    assert!(
        srv.startup_log
            .iter()
            .any(|l| l.contains("partition 3 of 4 of the cluster")),
        "{:?}",
        srv.startup_log
    );
    let (status, body) = srv.json(
        "POST",
        "/instances",
        Some(serde_json::json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": key_of(1, 0)}})),
    );
    assert_eq!(status, 421, "{body}");
    let (status, body) = srv.json(
        "POST",
        "/instances",
        Some(serde_json::json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": key_of(3, 0)}})),
    );
    assert_eq!(status, 201, "{body}");
    srv.stop();

    let run = |args: &[&str], host: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .arg("--db")
            .arg(dir.path().join("run.redb"))
            .args([
                "run",
                "bpmn/auftrag-ausfuehrung.bpmn",
                "--correlation-key",
                "AuftragAbgeschlossen=auftragId",
                "--listen",
                "127.0.0.1:0",
            ])
            .args(args)
            .env("HOSTNAME", host)
            .output()
            .unwrap()
    };
    let o = run(&["--partitions", "4", "--partition", "2"], "x");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is partition 3 of 4; it was opened as partition 2 of 4"),
        "{err}"
    );
    // a number at or above P is a partition that joined to grow the
    // cluster: not this database either
    let o = run(&["--partitions", "4", "--partition", "9"], "x");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("it was opened as partition 9 (joined a cluster created with 4)"),
        "{err}"
    );
    let o = run(&["--partitions", "4", "--partition", "1024"], "x");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("partition 1024 does not exist in a cluster of 1024"),
        "{err}"
    );
    let o = run(&["--partitions", "4"], "web");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("$HOSTNAME is 'web'"), "{err}");
}

/// A signal reaches every partition, but a process it starts is started
/// once in the cluster: on partition 0, as timer starts.
#[tokio::test]
async fn a_signal_start_starts_on_partition_0_only() {
    let model = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" targetNamespace="t">
  <signal id="tw" name="Tarifwechsel"/>
  <process id="aufSignal" isExecutable="true">
    <startEvent id="los"><signalEventDefinition signalRef="tw"/></startEvent>
    <sequenceFlow id="a1" sourceRef="los" targetRef="pruefen"/>
    <userTask id="pruefen"/>
    <sequenceFlow id="a2" sourceRef="pruefen" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;
    let dir = tempfile::tempdir().unwrap();
    for (index, expected) in [(0, 1), (1, 0)] {
        let pf = open_as(
            &dir.path().join(format!("s{index}.redb")),
            Some(part(index, 2)),
        )
        .unwrap();
        pf.deploy("s.bpmn", model, Default::default())
            .await
            .unwrap();
        assert_eq!(
            pf.signal("Tarifwechsel", Vars::new()).await.unwrap(),
            expected,
            "partition {index}"
        );
        assert_eq!(
            pf.reader()
                .unwrap()
                .instances(&Default::default())
                .unwrap()
                .len(),
            expected
        );
        pf.close();
    }
}

/// Variables offered to conditional start events start instances on
/// partition 0 (the gateway sends them there); another partition refuses,
/// naming partition 0, and starts nothing.
#[tokio::test]
async fn conditional_starts_happen_on_partition_0_only() {
    let model = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" targetNamespace="t">
  <process id="aufBedingung" isExecutable="true">
    <startEvent id="los"><conditionalEventDefinition><condition>${betrag > 100}</condition></conditionalEventDefinition></startEvent>
    <sequenceFlow id="a1" sourceRef="los" targetRef="pruefen"/>
    <userTask id="pruefen"/>
    <sequenceFlow id="a2" sourceRef="pruefen" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;
    let dir = tempfile::tempdir().unwrap();
    let offered = || postfach::vars([("betrag", 500.into())]);
    let p0 = open_as(&dir.path().join("c0.redb"), Some(part(0, 2))).unwrap();
    p0.deploy("c.bpmn", model, Default::default())
        .await
        .unwrap();
    assert_eq!(
        p0.start_by_conditions(None, offered()).await.unwrap().len(),
        1
    );
    p0.close();
    let p1 = open_as(&dir.path().join("c1.redb"), Some(part(1, 2))).unwrap();
    p1.deploy("c.bpmn", model, Default::default())
        .await
        .unwrap();
    let e = p1.start_by_conditions(None, offered()).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Engine(EngineError::OtherPartition {
                owner: 0,
                here: 1,
                ..
            })
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().contains(
            "a conditional start belongs to partition 0 (slot map version 1); this is partition 1"
        ),
        "{e}"
    );
    assert!(
        p1.reader()
            .unwrap()
            .instances(&Default::default())
            .unwrap()
            .is_empty()
    );
    p1.close();
}
