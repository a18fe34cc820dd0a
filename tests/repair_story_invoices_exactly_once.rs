//! The article's repair story, through the engine instead of SQL: the hand-over
//! fails into an incident, the provider's completion meanwhile expires and is
//! parked, an operator's "add a token" is refused by the guard (it would build
//! the duplicate token of the next outage), the incident is retried, the parked
//! completion is requeued, and the order is invoiced exactly once.
use crate::common;
use common::*;
use postfach::{Config, Error, Outcome, Reason, Vars};
use std::time::Duration;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:flowable="http://flowable.org/bpmn" xmlns:postfach="https://postfach.dev/bpmn">
  <message id="m" name="AuftragAbgeschlossen" postfach:correlationKey="auftragId"/>
  <process id="auftrag" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="auftragUebergeben"/>
    <serviceTask id="auftragUebergeben" flowable:async="true"/>
    <sequenceFlow id="f2" sourceRef="auftragUebergeben" targetRef="warteAufAbschluss"/>
    <intermediateCatchEvent id="warteAufAbschluss"><messageEventDefinition messageRef="m"/></intermediateCatchEvent>
    <sequenceFlow id="f3" sourceRef="warteAufAbschluss" targetRef="rechnungStellen"/>
    <serviceTask id="rechnungStellen" flowable:async="true"/>
    <sequenceFlow id="f4" sourceRef="rechnungStellen" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::test]
async fn incident_expired_completion_refused_repair_retry_requeue_one_invoice() {
    let env = Env::with_config(Config {
        max_attempts: 2,
        default_ttl: 3_600_000,
        ..Config::default()
    });
    env.deploy(MODEL).await;
    let id = env
        .pf
        .start(
            "auftrag",
            postfach::vars([("auftragId", "4711".into())]),
            None,
        )
        .await
        .unwrap();
    env.pf.run_continuations(10).await.unwrap();

    // the provider's API is down: the hand-over fails twice and becomes an incident
    for _ in 0..2 {
        let j = env
            .lock("auftragUebergeben", 1, "uebergabe-worker", 60_000)
            .await
            .remove(0);
        env.pf
            .fail_job(j.task.job, Some(j.lease_token), "provider API 503")
            .await
            .unwrap();
        env.advance(Duration::from_secs(2));
    }
    let incident = &env.pf.reader().unwrap().jobs(true).unwrap()[0];
    assert_eq!(incident.element, "auftragUebergeben");

    // the completion arrives anyway (the provider had the order), waits, and expires
    assert_eq!(
        env.pf
            .publish(completion("4711", "evt-1"))
            .await
            .unwrap()
            .outcome,
        Outcome::Buffered
    );
    env.advance(Duration::from_secs(2 * 3600));
    env.pf.tick().await.unwrap();
    let parked = env.open_messages();
    assert_eq!(
        (parked[0].message_id.as_str(), parked[0].reason),
        ("evt-1", Some(Reason::Expired.as_str()))
    );

    // the operator's reflex: put a token before the hand-over. The guard refuses:
    // the incident token will reach the catch event once the incident is retried.
    let refused = env
        .pf
        .add_token(id, "auftragUebergeben", false)
        .await
        .unwrap_err();
    assert!(refused.is_rejection());
    assert!(
        matches!(&refused, Error::Engine(postfach::EngineError::RepairRefused { existing_element, .. }) if existing_element == "auftragUebergeben"),
        "{refused}"
    );

    // the right repair: retry the incident
    let job: u64 = incident.job.parse().unwrap();
    env.pf.retry_job(job).await.unwrap();
    let j = env
        .lock("auftragUebergeben", 1, "uebergabe-worker", 60_000)
        .await
        .remove(0);
    env.pf
        .complete_job(j.task.job, Some(j.lease_token), Vars::new())
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), vec!["warteAufAbschluss"]);
    // a second attempt at the token repair is still refused
    assert!(
        env.pf
            .add_token(id, "auftragUebergeben", false)
            .await
            .unwrap_err()
            .is_rejection()
    );

    // requeue the parked completion: it correlates now
    let d = env.pf.requeue("evt-1").await.unwrap();
    assert_eq!((d.outcome, d.instance), (Outcome::Correlated, Some(id)));

    // invoice through the idempotent ledger, with a crash-like retry in between
    let dir = tempfile::tempdir().unwrap();
    let ledger =
        postfach::reference::InvoiceLedger::open(&dir.path().join("invoices.tsv")).unwrap();
    env.pf.run_continuations(10).await.unwrap();
    let first = env
        .lock("rechnungStellen", 1, "rechnung", 60_000)
        .await
        .remove(0);
    assert!(ledger.issue(&first.task.idempotency_key, "4711").unwrap());
    env.pf
        .fail_job(
            first.task.job,
            Some(first.lease_token),
            "timeout after the invoice was written",
        )
        .await
        .unwrap();
    env.advance(Duration::from_secs(5));
    let again = env
        .lock("rechnungStellen", 1, "rechnung", 60_000)
        .await
        .remove(0);
    assert_eq!(again.task.idempotency_key, first.task.idempotency_key);
    assert!(
        !ledger.issue(&again.task.idempotency_key, "4711").unwrap(),
        "the retry does not invoice again"
    );
    env.pf
        .complete_job(again.task.job, Some(again.lease_token), Vars::new())
        .await
        .unwrap();

    assert_eq!(env.state(id), "completed");
    assert_eq!(
        postfach::reference::InvoiceLedger::entries(&dir.path().join("invoices.tsv"))
            .unwrap()
            .len(),
        1
    );
    assert!(env.open_messages().is_empty());
    assert_eq!(env.pf.reader().unwrap().jobs(false).unwrap().len(), 0);
}

#[tokio::test]
async fn move_and_cancel_tokens() {
    let env = Env::reference().await;
    let id = env.waiting_order("1").await;
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    let token = view.tokens[0].token;
    assert!(view.tokens[0].waits_for.contains("AuftragAbgeschlossen"));
    // moving the only waiting token back before the hand-over is fine: it is the one that waits
    let r = env
        .pf
        .move_token(id, token, "auftragUebergeben", false)
        .await
        .unwrap();
    assert_eq!(
        r.jobs_created.len(),
        1,
        "the move scheduled the async hand-over"
    );
    assert_eq!(
        env.pf.publish(completion("1", "e1")).await.unwrap().outcome,
        Outcome::Buffered,
        "not subscribed until the job runs"
    );
    env.hand_over().await;
    assert_eq!(env.waiting_at(id), vec!["rechnungStellen"]);
    // cancelling the last token cancels the instance
    let t = env
        .pf
        .reader()
        .unwrap()
        .instance(id)
        .unwrap()
        .unwrap()
        .tokens[0]
        .token;
    env.pf.cancel_token(id, t).await.unwrap();
    assert_eq!(env.state(id), "cancelled");
    assert!(
        env.pf.reader().unwrap().jobs(false).unwrap().is_empty(),
        "its job went with it"
    );
    assert!(matches!(
        env.pf.cancel_token(id, t).await,
        Err(Error::Engine(postfach::EngineError::InstanceEnded(_)))
    ));
}
