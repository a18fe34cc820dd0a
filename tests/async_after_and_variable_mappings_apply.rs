//! `asyncAfter` is a durable boundary after an element: it has completed (its
//! result is in the instance), and the token takes its outgoing flows only when
//! that job runs. Input mappings (`camunda:inputParameter`, `zeebe:input`) are
//! what a worker sees beside the instance's variables; output mappings decide
//! what of a job's, a user task's or a message's result reaches the instance.
use crate::common;
use common::*;
use postfach::{Publish, vars};

const CAMUNDA: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:camunda="http://camunda.org/schema/1.0/bpmn">
  <process id="billing" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="invoice"/>
    <serviceTask id="invoice" camunda:type="external" camunda:topic="invoices" camunda:asyncAfter="true">
      <extensionElements>
        <camunda:inputOutput>
          <camunda:inputParameter name="customer">${order.customer}</camunda:inputParameter>
          <camunda:inputParameter name="currency">EUR</camunda:inputParameter>
          <camunda:outputParameter name="invoiceNo">${number}</camunda:outputParameter>
          <camunda:outputParameter name="billedIn">${currency}</camunda:outputParameter>
        </camunda:inputOutput>
      </extensionElements>
    </serviceTask>
    <sequenceFlow id="f1" sourceRef="invoice" targetRef="archive"/>
    <serviceTask id="archive" camunda:type="external" camunda:topic="archive"/>
    <sequenceFlow id="f2" sourceRef="archive" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::test]
async fn inputs_reach_the_worker_outputs_decide_the_result_and_async_after_holds_the_token() {
    let env = Env::new();
    let d = env
        .pf
        .deploy_checked("billing.bpmn", CAMUNDA, Default::default(), true)
        .await
        .expect("a strict deploy: nothing here is left unapplied");
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    let order = serde_json::json!({"customer": "ACME", "id": 7});
    let id = env
        .pf
        .start("billing", vars([("order", order)]), None)
        .await
        .unwrap();

    let job = env.lock("invoices", 1, "w", 60_000).await.remove(0);
    assert_eq!(job.task.variables["customer"], "ACME", "input from a path");
    assert_eq!(job.task.variables["currency"], "EUR", "a constant input");
    env.pf
        .complete_job(
            job.task.job,
            Some(job.lease_token),
            vars([("number", "R-17".into()), ("scratch", true.into())]),
        )
        .await
        .unwrap();

    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(
        view.variables["invoiceNo"], "R-17",
        "mapped from the result"
    );
    assert_eq!(view.variables["billedIn"], "EUR", "mapped from an input");
    for unmapped in ["number", "scratch", "customer", "currency"] {
        assert!(
            !view.variables.contains_key(unmapped),
            "{unmapped} stays local: {:?}",
            view.variables
        );
    }
    // completed, but the token rests after it until the async-after job runs
    assert_eq!(env.waiting_at(id), vec!["invoice"]);
    let jobs = env.pf.reader().unwrap().jobs(false).unwrap();
    assert_eq!(
        jobs.iter().map(|j| j.kind).collect::<Vec<_>>(),
        vec!["async_after"]
    );
    assert!(
        view.history
            .iter()
            .any(|h| h.element == "invoice" && h.event == "completed")
    );
    assert!(env.lock("archive", 1, "w", 60_000).await.is_empty());

    // a restart in between loses nothing: the boundary is durable
    let mut env = env;
    env.reopen();
    assert_eq!(env.pf.run_continuations(10).await.unwrap(), 1);
    assert_eq!(env.waiting_at(id), vec!["archive"]);
}

const ZEEBE: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <message id="m" name="Lieferung">
    <extensionElements><zeebe:subscription correlationKey="=auftragId"/></extensionElements>
  </message>
  <process id="delivery" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="wait"/>
    <intermediateCatchEvent id="wait">
      <extensionElements>
        <zeebe:ioMapping>
          <zeebe:output source="=positions" target="delivered"/>
          <zeebe:output source="=&quot;complete&quot;" target="status"/>
        </zeebe:ioMapping>
      </extensionElements>
      <messageEventDefinition messageRef="m"/>
    </intermediateCatchEvent>
    <sequenceFlow id="f1" sourceRef="wait" targetRef="check"/>
    <serviceTask id="check">
      <extensionElements><zeebe:taskDefinition type="check"/></extensionElements>
    </serviceTask>
    <sequenceFlow id="f2" sourceRef="check" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::test]
async fn a_zeebe_output_mapping_takes_what_it_names_from_the_message() {
    let env = Env::new();
    env.deploy(ZEEBE).await;
    let id = env.start_keyed("delivery", "A-1").await;
    env.pf
        .publish(Publish {
            name: "Lieferung".into(),
            key: "A-1".into(),
            message_id: Some("l-1".into()),
            variables: vars([("positions", 1200.into()), ("noise", 1.into())]),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), vec!["check"]);
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(view.variables["delivered"], 1200);
    assert_eq!(
        view.variables["status"], "complete",
        "a FEEL string constant"
    );
    assert!(!view.variables.contains_key("positions"));
    assert!(!view.variables.contains_key("noise"));
}

#[tokio::test]
async fn a_mapping_postfach_cannot_evaluate_is_named_and_strict_refuses_it() {
    let model = CAMUNDA.replace("${order.customer}", "${order.customer.toUpperCase()}");
    let env = Env::new();
    let d = env
        .pf
        .deploy_checked("billing.bpmn", &model, Default::default(), false)
        .await
        .unwrap();
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    assert_eq!(d.warnings[0].id, "invoice");
    assert!(
        d.warnings[0]
            .message
            .contains("input 'customer' is not applied"),
        "{}",
        d.warnings[0].message
    );
    assert!(
        env.pf
            .deploy_checked("b2.bpmn", &model, Default::default(), true)
            .await
            .is_err()
    );
}
