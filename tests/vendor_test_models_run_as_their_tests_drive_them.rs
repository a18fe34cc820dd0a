//! Test models of Camunda 7's and Flowable's own engine test classes, read
//! unchanged from `tests/fixtures/vendor/` (Apache License 2.0), driven as
//! those classes drive them: `CompensateEventTest` (a completed
//! multi-instance activity in a subprocess undone by `activityRef` on the
//! subprocess, once per inner instance), `TransactionSubProcessTest` (a
//! transaction cancelled or completed), `ReceiveTaskTest` (a wait state),
//! `SignalEventTest` (a signal start event), `IntermediateTimerEventTest`
//! (a timer read from an expression), `MessageStartEventTest` (a prefixed
//! QName `messageRef`) and `AdhocSubProcessTest` (a completion condition).
//! Java delegates and `${true}` expressions become jobs for a worker, as
//! the deploy warns; the tests complete them as that worker would.
use crate::common;
use common::*;
use postfach::{Publish, vars};
use std::time::Duration;

fn model(path: &str) -> String {
    let file = format!(
        "{}/tests/fixtures/vendor/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"))
}

async fn deploy(env: &Env, path: &str) {
    env.pf
        .deploy(path, &model(path), Default::default())
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
}

/// Completes the jobs of `topic` one at a time until none is due; returns how many.
async fn work_off(env: &Env, topic: &str) -> usize {
    let mut n = 0;
    loop {
        let done = env.complete_jobs(topic, no_vars()).await;
        if done == 0 {
            return n;
        }
        n += done;
    }
}

#[tokio::test]
async fn compensate_event_test_compensate_subprocess() {
    let env = Env::new();
    deploy(
        &env,
        "camunda7/CompensateEventTest.testCompensateSubprocess.bpmn20.xml",
    )
    .await;
    let id = env
        .pf
        .start("compensateProcess", no_vars(), None)
        .await
        .unwrap();
    // five sequential inner instances of bookHotel, then the throw names the subprocess
    assert_eq!(work_off(&env, "bookHotel").await, 5);
    // Camunda asserts the undo counter is 5: one handler per inner instance
    assert_eq!(work_off(&env, "undoBookHotel").await, 5);
    assert_eq!(env.waiting_at(id), ["beforeEnd"]);
    let t = env.token_at(id, "beforeEnd");
    env.pf.trigger(id, t, no_vars()).await.unwrap();
    assert_eq!(env.state(id), "completed");
}

/// Runs `testSimpleCase` until the customer answered `confirmed` and the
/// card was charged.
async fn transaction_answered(env: &Env, confirmed: bool) -> u64 {
    deploy(
        env,
        "camunda7/TransactionSubProcessTest.testSimpleCase.bpmn20.xml",
    )
    .await;
    let id = env
        .pf
        .start("transactionProcess", no_vars(), None)
        .await
        .unwrap();
    assert_eq!(work_off(env, "bookFlight").await, 1);
    assert_eq!(work_off(env, "bookHotel").await, 5);
    let task = env.task_at("askCustomer");
    env.pf
        .complete_task(task, "kermit", vars([("confirmed", confirmed.into())]))
        .await
        .unwrap();
    assert_eq!(work_off(env, "chargeCard").await, 1);
    id
}

#[tokio::test]
async fn transaction_sub_process_test_simple_case_cancelled() {
    let env = Env::new();
    let id = transaction_answered(&env, false).await;
    // the cancel end event compensates every completion in the transaction
    assert_eq!(work_off(&env, "undoChargeCard").await, 1);
    assert_eq!(work_off(&env, "undoBookHotel").await, 5);
    assert_eq!(work_off(&env, "undoBookFlight").await, 1);
    assert_eq!(env.waiting_at(id), ["afterCancellation"]);
}

#[tokio::test]
async fn transaction_sub_process_test_simple_case_successful() {
    let env = Env::new();
    let id = transaction_answered(&env, true).await;
    assert_eq!(env.waiting_at(id), ["afterSuccess"]);
    assert!(env.jobs().is_empty(), "nothing is undone");
}

#[tokio::test]
async fn receive_task_test_wait_state_behavior() {
    let env = Env::new();
    deploy(
        &env,
        "camunda7/ReceiveTaskTest.testWaitStateBehavior.bpmn20.xml",
    )
    .await;
    let id = env.pf.start("receiveTask", no_vars(), None).await.unwrap();
    assert_eq!(env.waiting_at(id), ["waitState"]);
    let t = env.token_at(id, "waitState");
    env.pf.trigger(id, t, no_vars()).await.unwrap();
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn signal_event_test_signal_start_event() {
    let env = Env::new();
    deploy(&env, "camunda7/SignalEventTest.signalStartEvent.bpmn20.xml").await;
    env.pf.signal("alert", no_vars()).await.unwrap();
    let started = env
        .pf
        .reader()
        .unwrap()
        .instances(&Default::default())
        .unwrap();
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].process, "startBySignal");
    assert_eq!(started[0].waiting_at, ["task"]);
}

#[tokio::test]
async fn intermediate_timer_event_test_expression() {
    let env = Env::new();
    deploy(
        &env,
        "camunda7/IntermediateTimerEventTest.testExpression.bpmn20.xml",
    )
    .await;
    // T0 is 2026-01-01T00:00:00Z; the timer is due an hour later
    let due = "2026-01-01T01:00:00Z";
    let id = env
        .pf
        .start(
            "intermediateTimerEventExample",
            vars([("dueDate", due.into())]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), ["timer"]);
    env.advance(Duration::from_secs(3599));
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.waiting_at(id), ["timer"]);
    env.advance(Duration::from_secs(1));
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn message_start_event_test_single_message_start_event() {
    let env = Env::new();
    deploy(
        &env,
        "flowable/MessageStartEventTest.testSingleMessageStartEvent.bpmn20.xml",
    )
    .await;
    // `messageRef="tns:newInvoice"` names the <message>, whose name is published
    let d = env
        .pf
        .publish(Publish {
            name: "newInvoiceMessage".into(),
            key: "invoice-1".into(),
            message_id: Some("m-1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = d.instance.expect("the message started an instance");
    assert_eq!(env.waiting_at(id), ["task"]);
}

#[tokio::test]
async fn adhoc_sub_process_test_simple_completion_condition() {
    let env = Env::new();
    deploy(
        &env,
        "flowable/AdhocSubProcessTest.testSimpleCompletionCondition.bpmn20.xml",
    )
    .await;
    let id = env
        .pf
        .start("simpleSubProcess", no_vars(), None)
        .await
        .unwrap();
    let holder = env.token_at(id, "adhocSubProcess");
    env.pf
        .ad_hoc(id, holder, Some("subProcessTask"))
        .await
        .unwrap();
    let task = env.task_at("subProcessTask");
    env.pf
        .complete_task(task, "kermit", vars([("completed", true.into())]))
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), ["afterTask"]);
}
