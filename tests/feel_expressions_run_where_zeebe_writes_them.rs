//! FEEL (`=…`) wherever Zeebe models put an expression: sequence-flow
//! conditions, input and output mappings, multi-instance input collection,
//! output element and completion condition, timer values, the called
//! process, user task assignment and dates, and `zeebe:script` script tasks
//! the engine evaluates itself. `now()` and `today()` read the engine's
//! clock (the batch's instant). What FEEL cannot compute stops the token at
//! an incident naming the element, the expression and the reason; what does
//! not parse is refused at deploy naming the element and its line.
#![cfg(feature = "feel")]
use crate::common;
use common::*;
use postfach::vars;
use std::time::Duration;

/// The Zeebe namespace around a process body.
macro_rules! zeebe {
    ($body:literal) => {
        concat!(
            r#"<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">"#,
            $body,
            "</bpmn:definitions>"
        )
    };
}

const ORDERS: &str = zeebe!(
    r#"
  <bpmn:process id="order" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f0" sourceRef="s" targetRef="total"/>
    <bpmn:scriptTask id="total">
      <bpmn:extensionElements>
        <zeebe:script expression="=sum(for i in items return i.price * i.qty)" resultVariable="total"/>
        <zeebe:ioMapping>
          <zeebe:output source="=total" target="total"/>
          <zeebe:output source="=items[price &gt; 10].name" target="expensive"/>
        </zeebe:ioMapping>
      </bpmn:extensionElements>
    </bpmn:scriptTask>
    <bpmn:sequenceFlow id="f1" sourceRef="total" targetRef="route"/>
    <bpmn:exclusiveGateway id="route" default="auto"/>
    <bpmn:sequenceFlow id="manual" sourceRef="route" targetRef="review">
      <bpmn:conditionExpression>=total &gt; 1000 or count(expensive) &gt; 2</bpmn:conditionExpression>
    </bpmn:sequenceFlow>
    <bpmn:sequenceFlow id="auto" sourceRef="route" targetRef="book"/>
    <bpmn:userTask id="review">
      <bpmn:extensionElements>
        <zeebe:assignmentDefinition assignee="=if total &gt; 5000 then &quot;chef&quot; else &quot;team&quot;" candidateGroups="=[&quot;review&quot;, region]"/>
        <zeebe:taskSchedule dueDate="=string(now() + duration(&quot;P2D&quot;))"/>
      </bpmn:extensionElements>
    </bpmn:userTask>
    <bpmn:sequenceFlow id="f2" sourceRef="review" targetRef="e"/>
    <bpmn:serviceTask id="book">
      <bpmn:extensionElements>
        <zeebe:taskDefinition type="book"/>
        <zeebe:ioMapping><zeebe:input source="=upper case(region) + &quot;-&quot; + string(total)" target="reference"/></zeebe:ioMapping>
      </bpmn:extensionElements>
    </bpmn:serviceTask>
    <bpmn:sequenceFlow id="f3" sourceRef="book" targetRef="e"/>
    <bpmn:endEvent id="e"/>
  </bpmn:process>
"#
);

fn items(prices: &[(&str, f64, u32)]) -> serde_json::Value {
    prices
        .iter()
        .map(|(n, p, q)| serde_json::json!({"name": n, "price": p, "qty": q}))
        .collect()
}

#[tokio::test]
async fn scripts_mappings_conditions_and_user_tasks_evaluate_feel() {
    let env = Env::new();
    env.deploy(ORDERS).await;
    // 2 × 400 + 1 × 15: no manual review; the service task's input is FEEL
    let small = env
        .pf
        .start(
            "order",
            vars([
                ("items", items(&[("a", 400.0, 2), ("b", 15.0, 1)])),
                ("region", "nord".into()),
            ]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(env.waiting_at(small), ["book"]);
    let job = &env.lock("book", 1, "w", 60_000).await[0];
    assert_eq!(job.task.variables["reference"], "NORD-815");
    assert!(has(&env.history(small), "total", "script_evaluated"));
    let v = env.pf.reader().unwrap().instance(small).unwrap().unwrap();
    assert_eq!(v.variables["total"], 815);
    assert_eq!(v.variables["expensive"], serde_json::json!(["a", "b"]));

    // two items above 10: manual review, assigned and due by FEEL
    let big = env
        .pf
        .start(
            "order",
            vars([
                ("items", items(&[("a", 3000.0, 2), ("b", 12.5, 2)])),
                ("region", "sued".into()),
            ]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(env.waiting_at(big), ["review"]);
    let tasks = env
        .pf
        .reader()
        .unwrap()
        .tasks(&postfach::ops::TaskFilter::default())
        .unwrap();
    let t = tasks.iter().find(|t| t.element == "review").unwrap();
    assert_eq!(t.assignee.as_deref(), Some("chef"));
    assert_eq!(t.candidate_groups, ["review", "sued"]);
    // the engine's clock (T0 = 2026-01-01T00:00:00Z) plus two days
    assert!(
        t.due.as_deref().unwrap().starts_with("2026-01-03T00:00:00"),
        "{:?}",
        t.due
    );
}

#[tokio::test]
async fn what_feel_cannot_compute_is_an_incident_naming_expression_and_reason() {
    let env = Env::new();
    env.deploy(ORDERS).await;
    // a price that is text: the script cannot multiply it
    let id = env
        .pf
        .start(
            "order",
            vars([
                (
                    "items",
                    serde_json::json!([{"name": "a", "price": "viel", "qty": 1}]),
                ),
                ("region", "nord".into()),
            ]),
            None,
        )
        .await
        .unwrap();
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    let at = v.tokens.iter().find(|t| t.element == "total").unwrap();
    assert!(at.waits_for.contains("an operator"), "{}", at.waits_for);
    assert!(
        at.waits_for
            .contains("sum(for i in items return i.price * i.qty)"),
        "{}",
        at.waits_for
    );
    assert!(has(&env.history(id), "total", "incident"));
    assert!(!v.variables.contains_key("total"), "no silent null is set");
}

const CONDITION_OVER_TEXT: &str = zeebe!(
    r#"
  <bpmn:process id="route" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f0" sourceRef="s" targetRef="g"/>
    <bpmn:exclusiveGateway id="g" default="low"/>
    <bpmn:sequenceFlow id="high" sourceRef="g" targetRef="a"><bpmn:conditionExpression>=amount &gt; 1000</bpmn:conditionExpression></bpmn:sequenceFlow>
    <bpmn:sequenceFlow id="low" sourceRef="g" targetRef="b"/>
    <bpmn:receiveTask id="a"/>
    <bpmn:receiveTask id="b"/>
  </bpmn:process>
"#
);

#[tokio::test]
async fn a_condition_that_is_not_true_or_false_never_takes_the_default_silently() {
    let env = Env::new();
    env.deploy(CONDITION_OVER_TEXT).await;
    let ok = env
        .pf
        .start("route", vars([("amount", 1500.into())]), None)
        .await
        .unwrap();
    assert_eq!(env.waiting_at(ok), ["a"]);
    // text compared with a number: FEEL gives null, which is no answer
    let bad = env
        .pf
        .start("route", vars([("amount", "viel".into())]), None)
        .await
        .unwrap();
    let v = env.pf.reader().unwrap().instance(bad).unwrap().unwrap();
    let at = v.tokens.iter().find(|t| t.element == "g").unwrap();
    assert!(at.waits_for.contains("amount > 1000"), "{}", at.waits_for);
    assert!(at.waits_for.contains("null"), "{}", at.waits_for);
}

const LOOPS_AND_TIMERS: &str = zeebe!(
    r#"
  <bpmn:process id="batch" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f0" sourceRef="s" targetRef="each"/>
    <bpmn:serviceTask id="each">
      <bpmn:extensionElements><zeebe:taskDefinition type="pack"/></bpmn:extensionElements>
      <bpmn:multiInstanceLoopCharacteristics>
        <bpmn:extensionElements>
          <zeebe:loopCharacteristics inputCollection="=orders[qty &gt; 0]" inputElement="o" outputCollection="packed" outputElement="=o.id + &quot;:&quot; + string(o.qty * 2)"/>
        </bpmn:extensionElements>
        <bpmn:completionCondition>=nrOfCompletedInstances &gt;= count(orders[qty &gt; 0]) - 1</bpmn:completionCondition>
      </bpmn:multiInstanceLoopCharacteristics>
    </bpmn:serviceTask>
    <bpmn:sequenceFlow id="f1" sourceRef="each" targetRef="wait"/>
    <bpmn:intermediateCatchEvent id="wait">
      <bpmn:timerEventDefinition><bpmn:timeDuration>=duration("PT" + string(minutes) + "M")</bpmn:timeDuration></bpmn:timerEventDefinition>
    </bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f2" sourceRef="wait" targetRef="until"/>
    <bpmn:intermediateCatchEvent id="until">
      <bpmn:timerEventDefinition><bpmn:timeDate>=string(now() + duration("PT1H"))</bpmn:timeDate></bpmn:timerEventDefinition>
    </bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f3" sourceRef="until" targetRef="e"/>
    <bpmn:endEvent id="e"/>
  </bpmn:process>
"#
);

#[tokio::test]
async fn multi_instance_and_timers_take_their_values_from_feel() {
    let env = Env::new();
    env.deploy(LOOPS_AND_TIMERS).await;
    let orders = serde_json::json!([
        {"id": "A", "qty": 1}, {"id": "B", "qty": 0}, {"id": "C", "qty": 3}, {"id": "D", "qty": 2}
    ]);
    let id = env
        .pf
        .start(
            "batch",
            vars([("orders", orders), ("minutes", 5.into())]),
            None,
        )
        .await
        .unwrap();
    // three orders with a quantity: three inner instances
    let jobs = env.lock("pack", 10, "w", 60_000).await;
    assert_eq!(jobs.len(), 3);
    // two done: the completion condition (≥ 3 - 1) holds
    for j in &jobs[..2] {
        env.pf
            .complete_job(j.task.job, Some(j.lease_token), Default::default())
            .await
            .unwrap();
    }
    assert_eq!(env.waiting_at(id), ["wait"]);
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(
        v.variables["packed"],
        serde_json::json!(["A:2", "C:6", null])
    );

    // the duration timer: 5 minutes by FEEL
    env.advance(Duration::from_secs(4 * 60));
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.waiting_at(id), ["wait"]);
    env.advance(Duration::from_secs(60));
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.waiting_at(id), ["until"]);
    // the date timer: one hour after the engine's clock when it started
    env.advance(Duration::from_secs(59 * 60));
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.waiting_at(id), ["until"]);
    env.advance(Duration::from_secs(60));
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.state(id), "completed");
}

const CALLER: &str = zeebe!(
    r#"
  <bpmn:process id="caller" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f0" sourceRef="s" targetRef="call"/>
    <bpmn:callActivity id="call">
      <bpmn:extensionElements><zeebe:calledElement processId="=&quot;ship-&quot; + lower case(carrier)"/></bpmn:extensionElements>
    </bpmn:callActivity>
    <bpmn:sequenceFlow id="f1" sourceRef="call" targetRef="e"/>
    <bpmn:endEvent id="e"/>
  </bpmn:process>
  <bpmn:process id="ship-dhl" isExecutable="true">
    <bpmn:startEvent id="cs"/>
    <bpmn:sequenceFlow id="c0" sourceRef="cs" targetRef="label"/>
    <bpmn:receiveTask id="label"/>
  </bpmn:process>
"#
);

#[tokio::test]
async fn a_call_activity_calls_the_process_its_feel_expression_names() {
    let env = Env::new();
    env.deploy(CALLER).await;
    let id = env
        .pf
        .start("caller", vars([("carrier", "DHL".into())]), None)
        .await
        .unwrap();
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert!(
        v.tokens
            .iter()
            .any(|t| t.element == "call" && t.waits_for.contains("instance")),
        "{:?}",
        v.tokens
    );
    // a carrier without a process: an incident naming what was called
    let none = env
        .pf
        .start("caller", vars([("carrier", "UPS".into())]), None)
        .await
        .unwrap();
    let v = env.pf.reader().unwrap().instance(none).unwrap().unwrap();
    let at = v.tokens.iter().find(|t| t.element == "call").unwrap();
    assert!(at.waits_for.contains("ship-ups"), "{}", at.waits_for);
}

#[tokio::test]
async fn feel_that_does_not_parse_is_refused_at_deploy_naming_element_and_line() {
    let env = Env::new();
    let e = env
        .refusal(zeebe!(
            r#"
  <bpmn:process id="p" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f0" sourceRef="s" targetRef="t"/>
    <bpmn:scriptTask id="t">
      <bpmn:extensionElements><zeebe:script expression="=a +" resultVariable="x"/></bpmn:extensionElements>
    </bpmn:scriptTask>
  </bpmn:process>
"#
        ))
        .await;
    assert!(e.contains("'t'") || e.contains("t ("), "{e}");
    assert!(e.contains("line 5"), "{e}");
    assert!(e.contains("=a +"), "{e}");
    let e = env
        .refusal(zeebe!(
            r#"
  <bpmn:process id="p" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f0" sourceRef="s" targetRef="t"><bpmn:conditionExpression>=uuid() = x</bpmn:conditionExpression></bpmn:sequenceFlow>
    <bpmn:endEvent id="t"/>
  </bpmn:process>
"#
        ))
        .await;
    assert!(e.contains("uuid"), "{e}");
    assert!(e.contains("f0"), "{e}");
}

const KEYED: &str = zeebe!(
    r#"
  <bpmn:message id="m" name="Paid">
    <bpmn:extensionElements><zeebe:subscription correlationKey="=&quot;order-&quot; + string(order.no)"/></bpmn:extensionElements>
  </bpmn:message>
  <bpmn:process id="keyed" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f0" sourceRef="s" targetRef="paid"/>
    <bpmn:intermediateCatchEvent id="paid"><bpmn:messageEventDefinition messageRef="m"/></bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f1" sourceRef="paid" targetRef="e"/>
    <bpmn:endEvent id="e"/>
  </bpmn:process>
"#
);

#[tokio::test]
async fn a_correlation_key_computed_by_feel_correlates() {
    let env = Env::new();
    env.deploy(KEYED).await;
    let id = env
        .pf
        .start(
            "keyed",
            vars([("order", serde_json::json!({"no": 42}))]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), ["paid"]);
    let d = env
        .pf
        .publish(postfach::Publish {
            name: "Paid".into(),
            key: "order-42".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(d.outcome, postfach::Outcome::Correlated);
    assert_eq!(env.state(id), "completed");
    // a key must not depend on when it is asked
    let e = env
        .refusal(&KEYED.replace("string(order.no)", "string(today())"))
        .await;
    assert!(e.contains("may not read the clock"), "{e}");
}

/// A multi-instance `zeebe:script` task over the items with a quantity,
/// parallel or sequential as `sequential` says (`true`/`false`).
fn items_script(sequential: bool) -> String {
    format!(
        r#"<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <bpmn:process id="lines" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f0" sourceRef="s" targetRef="line"/>
    <bpmn:scriptTask id="line">
      <bpmn:extensionElements>
        <zeebe:script expression="=item.id + &quot;:&quot; + string(item.qty * 2)" resultVariable="r"/>
      </bpmn:extensionElements>
      <bpmn:multiInstanceLoopCharacteristics isSequential="{sequential}">
        <bpmn:extensionElements>
          <zeebe:loopCharacteristics inputCollection="=items[qty &gt; 0]" inputElement="item" outputCollection="results" outputElement="=r"/>
        </bpmn:extensionElements>
      </bpmn:multiInstanceLoopCharacteristics>
    </bpmn:scriptTask>
    <bpmn:sequenceFlow id="f1" sourceRef="line" targetRef="done"/>
    <bpmn:receiveTask id="done"/>
  </bpmn:process>
</bpmn:definitions>"#
    )
}

/// The output collection and the process's variables of one run of
/// [`items_script`] over `items`.
async fn run_items_script(sequential: bool, items: serde_json::Value) -> serde_json::Value {
    let env = Env::new();
    env.deploy(&items_script(sequential)).await;
    let id = env
        .pf
        .start("lines", vars([("items", items)]), None)
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), ["done"]);
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    serde_json::to_value(&v.variables).unwrap()
}

#[tokio::test]
async fn each_inner_instance_of_a_script_task_keeps_its_own_result() {
    let items =
        serde_json::json!([{"id": "a", "qty": 1}, {"id": "b", "qty": 0}, {"id": "c", "qty": 3}]);
    for sequential in [false, true] {
        let v = run_items_script(sequential, items.clone()).await;
        assert_eq!(
            v["results"],
            serde_json::json!(["a:2", "c:6"]),
            "sequential {sequential}"
        );
        // the result variable is the inner instance's: nothing leaks out
        assert!(v.get("r").is_none(), "sequential {sequential}: {v}");
    }
}

mod parallel_and_sequential {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        /// Parallel and sequential inner instances of a script task give
        /// the same output collection, whatever the items.
        #[test]
        fn give_the_same_output_collection(
            items in proptest::collection::vec(("[a-z]{1,3}", 0u32..4), 0..7)
        ) {
            let items: Vec<serde_json::Value> = items
                .into_iter()
                .map(|(id, qty)| serde_json::json!({"id": id, "qty": qty}))
                .collect();
            let expected: Vec<String> = items
                .iter()
                .filter(|i| i["qty"].as_u64().unwrap() > 0)
                .map(|i| format!("{}:{}", i["id"].as_str().unwrap(), i["qty"].as_u64().unwrap() * 2))
                .collect();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let items = serde_json::Value::Array(items);
            let parallel = rt.block_on(run_items_script(false, items.clone()));
            let sequential = rt.block_on(run_items_script(true, items));
            prop_assert_eq!(&parallel["results"], &sequential["results"]);
            prop_assert_eq!(&parallel["results"], &serde_json::json!(expected));
        }
    }
}
