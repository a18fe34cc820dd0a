//! In a cluster a signal reaches every partition at least once and is applied
//! once per partition: a signal with an id is applied once however often it
//! arrives (a repeat answers what the first reached and changes nothing); a
//! signal a process throws on one partition reaches the receivers there at
//! once, and is kept until every other partition took it — the partition's
//! forwarder sends it to each with its id. A signal that reaches nobody on
//! any partition is counted once, by the partition that threw it, when the
//! last one answered; through a gateway, by the gateway.
use crate::common;
use common::*;
use postfach::partition::Partition;

#[tokio::test]
async fn a_signal_with_an_id_is_applied_once() {
    let env = Env::new();
    env.deploy(SIGNALS).await;
    let first = env.pf.start("wartet", no_vars(), None).await.unwrap();
    assert_eq!(
        env.pf
            .signal_once("s-1", "Tarifwechsel", no_vars())
            .await
            .unwrap(),
        1
    );
    assert_eq!(env.state(first), "completed");
    // the same id again: the first answer, nothing applied
    let second = env.pf.start("wartet", no_vars(), None).await.unwrap();
    assert_eq!(
        env.pf
            .signal_once("s-1", "Tarifwechsel", no_vars())
            .await
            .unwrap(),
        1
    );
    assert_eq!(env.waiting_at(second), vec!["c"]);
    assert_eq!(
        env.pf
            .signal_once("s-2", "Tarifwechsel", no_vars())
            .await
            .unwrap(),
        1
    );
    assert_eq!(env.state(second), "completed");
    // still once after a reopen (the id is stored, not remembered)
    let mut env = env;
    env.reopen();
    let third = env.pf.start("wartet", no_vars(), None).await.unwrap();
    assert_eq!(
        env.pf
            .signal_once("s-2", "Tarifwechsel", no_vars())
            .await
            .unwrap(),
        1
    );
    assert_eq!(env.waiting_at(third), vec!["c"]);
    // an id out of range is refused, naming it
    let e = env
        .pf
        .signal_once("", "Tarifwechsel", no_vars())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("signal id"), "{e}");
}

#[tokio::test]
async fn a_thrown_signal_is_kept_for_the_other_partitions_and_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let pf = postfach::Postfach::open_with(
        dir.path().join("p0.redb"),
        postfach::Options {
            partition: Some(Partition::new(0, 2).unwrap()),
            ..postfach::Options::default()
        },
    )
    .unwrap();
    pf.deploy("signals.bpmn", SIGNALS, Default::default())
        .await
        .unwrap();
    pf.start("wirft", no_vars(), None).await.unwrap();
    pf.start("wirft", no_vars(), None).await.unwrap();
    let out = pf.reader().unwrap().signals_out(10).unwrap();
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(
        (out[0].id.as_str(), out[0].name.as_str(), out[0].reached),
        ("p0-s1", "Tarifwechsel", 0)
    );
    assert_eq!(out[1].id, "p0-s2");
    // nothing counted unreached yet: other partitions may have receivers
    let counters = pf.reader().unwrap().counters().unwrap();
    assert_eq!(counters.get("signals_unreached"), None);
    // every other partition took the first (reaching nobody) and the second (reaching one)
    let done = pf
        .signals_forwarded(vec![(out[0].seq, true), (out[1].seq, false)])
        .await
        .unwrap();
    assert_eq!(done, 2);
    assert!(pf.reader().unwrap().signals_out(10).unwrap().is_empty());
    assert_eq!(
        pf.reader().unwrap().counters().unwrap()["signals_unreached"],
        1
    );
    // a confirmation arriving twice counts nothing twice
    assert_eq!(
        pf.signals_forwarded(vec![(out[0].seq, true)])
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        pf.reader().unwrap().counters().unwrap()["signals_unreached"],
        1
    );
    pf.close();

    // unpartitioned, a thrown signal is nobody else's business
    let env = Env::new();
    env.deploy(SIGNALS).await;
    env.pf.start("wirft", no_vars(), None).await.unwrap();
    assert!(env.pf.reader().unwrap().signals_out(10).unwrap().is_empty());
}
