//! A transaction subprocess as Camunda 7's `TransactionSubProcessTest`
//! drives it: completed normally it is left by its outgoing flow; a cancel
//! end event inside it withdraws everything else in it, compensates its
//! completed activities (handlers that wait are waited for) and then leaves
//! it by its cancel boundary event. Cancel events outside a transaction are
//! refused by name.
use crate::common;
use common::*;
use postfach::vars;

const BUCHUNG: &str = bpmn!(
    r#"
  <process id="buchung" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="tx"/>
    <transaction id="tx">
      <startEvent id="txStart"/>
      <sequenceFlow id="t1" sourceRef="txStart" targetRef="fork"/>
      <parallelGateway id="fork"/>
      <sequenceFlow id="t2" sourceRef="fork" targetRef="bookHotel"/>
      <sequenceFlow id="t3" sourceRef="fork" targetRef="bookFlight"/>
      <task id="bookHotel"/>
      <task id="bookFlight"/>
      <boundaryEvent id="cHotel" attachedToRef="bookHotel"><compensateEventDefinition/></boundaryEvent>
      <boundaryEvent id="cFlight" attachedToRef="bookFlight"><compensateEventDefinition/></boundaryEvent>
      <serviceTask id="undoBookHotel" isForCompensation="true"/>
      <serviceTask id="undoBookFlight" isForCompensation="true"/>
      <parallelGateway id="join"/>
      <sequenceFlow id="t4" sourceRef="bookHotel" targetRef="join"/>
      <sequenceFlow id="t5" sourceRef="bookFlight" targetRef="join"/>
      <sequenceFlow id="t6" sourceRef="join" targetRef="askCustomer"/>
      <receiveTask id="askCustomer"/>
      <sequenceFlow id="t7" sourceRef="askCustomer" targetRef="confirmed"/>
      <exclusiveGateway id="confirmed"/>
      <sequenceFlow id="t8" sourceRef="confirmed" targetRef="success">
        <conditionExpression>${confirmed}</conditionExpression>
      </sequenceFlow>
      <sequenceFlow id="t9" sourceRef="confirmed" targetRef="failure">
        <conditionExpression>${confirmed == false}</conditionExpression>
      </sequenceFlow>
      <endEvent id="success"/>
      <endEvent id="failure"><cancelEventDefinition/></endEvent>
      <association id="a1" sourceRef="cHotel" targetRef="undoBookHotel"/>
      <association id="a2" sourceRef="cFlight" targetRef="undoBookFlight"/>
    </transaction>
    <boundaryEvent id="catchCancelTx" attachedToRef="tx"><cancelEventDefinition/></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="catchCancelTx" targetRef="afterCancellation"/>
    <receiveTask id="afterCancellation"/>
    <sequenceFlow id="f3" sourceRef="tx" targetRef="afterSuccess"/>
    <receiveTask id="afterSuccess"/>
    <sequenceFlow id="f4" sourceRef="afterCancellation" targetRef="e"/>
    <sequenceFlow id="f5" sourceRef="afterSuccess" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

async fn ask(env: &Env, id: u64, confirmed: bool) {
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    let t = v
        .tokens
        .iter()
        .find(|t| t.element == "askCustomer")
        .unwrap()
        .token;
    env.pf
        .trigger(id, t, vars([("confirmed", confirmed.into())]))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_cancel_end_event_compensates_the_transaction_and_leaves_by_its_cancel_boundary() {
    let env = Env::new();
    env.deploy(BUCHUNG).await;
    let id = env.pf.start("buchung", no_vars(), None).await.unwrap();
    assert_eq!(sorted(env.waiting_at(id)), ["askCustomer", "tx"]);
    // the instance view lists what a compensation would undo
    let d = env
        .pf
        .reader()
        .unwrap()
        .instance_detail(id)
        .unwrap()
        .unwrap();
    let mut open: Vec<(String, Option<String>)> = d
        .compensable
        .iter()
        .map(|c| (c.element.clone(), c.handler.clone()))
        .collect();
    open.sort();
    assert_eq!(
        open,
        [
            ("bookFlight".to_string(), Some("undoBookFlight".to_string())),
            ("bookHotel".to_string(), Some("undoBookHotel".to_string()))
        ]
    );
    ask(&env, id, false).await;
    // both bookings are undone by handlers that wait; the transaction stays
    // open until they are done
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["failure", "tx", "undoBookFlight", "undoBookHotel"]
    );
    let h = env.history(id);
    assert!(
        has(&h, "failure", "transaction_cancelled handlers=2"),
        "{h:#?}"
    );
    assert_eq!(env.complete_jobs("undoBookHotel", no_vars()).await, 1);
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["failure", "tx", "undoBookFlight"]
    );
    assert_eq!(env.complete_jobs("undoBookFlight", no_vars()).await, 1);
    assert_eq!(env.waiting_at(id), ["afterCancellation"]);
    let h = env.history(id);
    assert!(has(&h, "catchCancelTx", "transaction_left"), "{h:#?}");
    assert!(!has(&h, "tx", "completed"), "{h:#?}");
    let d = env
        .pf
        .reader()
        .unwrap()
        .instance_detail(id)
        .unwrap()
        .unwrap();
    assert!(d.compensable.is_empty(), "{:?}", d.compensable);
}

#[tokio::test]
async fn a_transaction_that_completes_is_left_by_its_flow_and_undoes_nothing() {
    let env = Env::new();
    env.deploy(BUCHUNG).await;
    let id = env.pf.start("buchung", no_vars(), None).await.unwrap();
    ask(&env, id, true).await;
    assert_eq!(env.waiting_at(id), ["afterSuccess"]);
    assert!(env.jobs().is_empty());
    let h = env.history(id);
    assert!(has(&h, "tx", "completed"), "{h:#?}");
    assert!(!h.iter().any(|(_, ev)| ev.starts_with("compensating")));
}

#[tokio::test]
async fn cancel_events_outside_a_transaction_are_refused_by_name() {
    let env = Env::new();
    let outside = bpmn!(
        r#"
  <process id="p" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="sp"/>
    <subProcess id="sp">
      <startEvent id="ss"/>
      <sequenceFlow id="g1" sourceRef="ss" targetRef="stop"/>
      <endEvent id="stop"><cancelEventDefinition/></endEvent>
    </subProcess>
    <boundaryEvent id="onCancel" attachedToRef="sp"><cancelEventDefinition/></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="sp" targetRef="e"/>
    <sequenceFlow id="f3" sourceRef="onCancel" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
    );
    let e = env.refusal(outside).await;
    assert!(
        e.contains("'stop': cancel end event outside a transaction"),
        "{e}"
    );
    assert!(
        e.contains("'onCancel': cancel boundary event on 'sp', which is not a transaction"),
        "{e}"
    );
    let without_boundary = BUCHUNG.replace(
        r#"<boundaryEvent id="catchCancelTx" attachedToRef="tx"><cancelEventDefinition/></boundaryEvent>"#,
        "",
    );
    let without_boundary = without_boundary.replace(
        r#"<sequenceFlow id="f2" sourceRef="catchCancelTx" targetRef="afterCancellation"/>"#,
        "",
    );
    let e = env.refusal(&without_boundary).await;
    assert!(
        e.contains("'failure': transaction 'tx' has no cancel boundary event"),
        "{e}"
    );
}
