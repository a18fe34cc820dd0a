//! The statistics of a definition version — per element: tokens waiting and
//! the oldest wait, ready jobs, incidents, buffered and parked messages of the
//! element's message — follow every change, keep versions apart, and agree
//! with the listings they summarise. They come from gauges and index heads
//! (the store keeps them with its rows; `verify` checks them in the
//! engine-level property tests).
use crate::common;
use common::*;
use postfach::{Outcome, Publish};
use std::time::Duration;

fn completion(key: &str, id: &str) -> Publish {
    Publish {
        name: MESSAGE.into(),
        key: key.into(),
        message_id: Some(id.into()),
        ..Default::default()
    }
}

fn at(st: &postfach::ops::ProcessStatistics, id: &str) -> postfach::ops::ElementStatistics {
    st.elements
        .iter()
        .find(|e| e.element == id)
        .unwrap_or_else(|| panic!("{id} is an element"))
        .clone()
}

#[tokio::test]
async fn statistics_follow_tokens_jobs_incidents_and_messages_per_version() {
    let env = Env::reference().await;
    for a in ["A-1", "A-2", "A-3"] {
        env.waiting_order(a).await;
    }
    env.advance(Duration::from_secs(3600));
    // A-1 correlates; its invoice ends in an incident (a BPMN error nothing catches)
    assert_eq!(
        env.pf
            .publish(completion("A-1", "done-1"))
            .await
            .unwrap()
            .outcome,
        Outcome::Correlated
    );
    // A-2 correlates and is invoiced; a second completion for it comes late
    assert_eq!(
        env.pf
            .publish(completion("A-2", "done-2"))
            .await
            .unwrap()
            .outcome,
        Outcome::Correlated
    );
    env.pf.run_continuations(10).await.unwrap();
    let mut jobs = env.lock("rechnungStellen", 10, "invoicer", 60_000).await;
    jobs.sort_by_key(|j| j.task.variables["auftragId"].as_str().unwrap().to_string());
    env.pf
        .throw_error(
            jobs[0].task.job,
            Some(jobs[0].lease_token),
            "KAPUTT",
            "no invoice",
            Default::default(),
        )
        .await
        .unwrap();
    env.pf
        .complete_job(
            jobs[1].task.job,
            Some(jobs[1].lease_token),
            Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        env.pf
            .publish(completion("A-2", "again-2"))
            .await
            .unwrap()
            .outcome,
        Outcome::Parked
    );
    // an early completion for an order that does not exist yet waits in the buffer
    assert_eq!(
        env.pf
            .publish(completion("A-9", "early-9"))
            .await
            .unwrap()
            .outcome,
        Outcome::Buffered
    );

    let r = env.pf.reader().unwrap();
    let v1 = r.statistics(PROCESS, None).unwrap().unwrap();
    assert_eq!((v1.version, v1.latest_version), (1, 1));
    let wait = at(&v1, "warteAufAbschluss");
    assert_eq!(wait.waiting, 1, "A-3 waits");
    assert_eq!(wait.oldest_wait_ms, Some(3_600_000));
    assert_eq!(wait.message.as_deref(), Some(MESSAGE));
    assert_eq!(wait.buffered, 1, "early-9");
    assert_eq!(
        wait.parked.get("late"),
        Some(&1),
        "again-2: {:?}",
        wait.parked
    );
    let invoice = at(&v1, "rechnungStellen");
    assert_eq!(
        (invoice.waiting, invoice.jobs_ready, invoice.incidents),
        (1, 0, 1)
    );
    // the figures agree with the listings they summarise
    assert_eq!(
        r.waiting_at("warteAufAbschluss").unwrap().len() as u64,
        wait.waiting
    );
    assert_eq!(r.jobs(true).unwrap().len() as u64, invoice.incidents);
    assert_eq!(at(&v1, "auftragEingegangen").waiting, 0);
    drop(r);

    // a new version counts apart from the old one
    let v2_xml = REFERENCE.replace("name=\"Rechnung stellen\"", "name=\"Rechnung schreiben\"");
    assert_ne!(v2_xml, REFERENCE, "the model changes");
    let d = env
        .pf
        .deploy(
            "v2.bpmn",
            &v2_xml,
            [(MESSAGE.to_string(), "auftragId".to_string())].into(),
        )
        .await
        .unwrap();
    assert_eq!(d[0].version, 2);
    env.waiting_order("A-5").await;
    let r = env.pf.reader().unwrap();
    let v2 = r.statistics(PROCESS, None).unwrap().unwrap();
    assert_eq!((v2.version, v2.latest_version), (2, 2));
    assert_eq!(at(&v2, "warteAufAbschluss").waiting, 1, "A-5");
    assert_eq!(at(&v2, "warteAufAbschluss").oldest_wait_ms, Some(0));
    assert_eq!(at(&v2, "rechnungStellen").incidents, 0);
    assert_eq!(
        at(
            &r.statistics(PROCESS, Some(1)).unwrap().unwrap(),
            "warteAufAbschluss"
        )
        .waiting,
        1
    );
    assert!(r.statistics(PROCESS, Some(7)).unwrap().is_none());
    assert!(r.statistics("gibt-es-nicht", None).unwrap().is_none());
    drop(r);

    // retry turns the incident into a ready job; correlating A-9's order empties the buffer
    env.pf.retry_job(jobs[0].task.job).await.unwrap();
    env.start_order("A-9").await;
    env.hand_over().await;
    let r = env.pf.reader().unwrap();
    let v2 = r.statistics(PROCESS, None).unwrap().unwrap();
    let v1 = r.statistics(PROCESS, Some(1)).unwrap().unwrap();
    let invoice = at(&v1, "rechnungStellen");
    assert_eq!(
        (invoice.waiting, invoice.jobs_ready, invoice.incidents),
        (1, 1, 0)
    );
    assert_eq!(at(&v2, "warteAufAbschluss").buffered, 0);
    assert_eq!(
        at(&v2, "rechnungStellen").waiting,
        1,
        "A-9 went on to its invoice"
    );
}
