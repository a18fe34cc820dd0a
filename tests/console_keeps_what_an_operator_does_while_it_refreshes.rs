//! The console refreshes its view every few seconds; what the person at the
//! screen does meanwhile survives it. A refresh whose answer is still on its
//! way when they begin typing variables, a discard reason or choosing where
//! to add a token does not redraw the rows under them once the answer
//! arrives; a problem an action caused (variables that are not an object)
//! stays on show through later refreshes and goes when another view opens.
//! The answers are held in the page (its `fetch` wrapped over WebDriver)
//! until the test has acted, so the order is fixed, not a matter of timing.
#![cfg(feature = "server")]
use crate::common;

use common::browser::Driver;
use common::server::Server;
use serde_json::json;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:bpmndi="http://www.omg.org/spec/BPMN/20100524/DI"
    xmlns:dc="http://www.omg.org/spec/DD/20100524/DC"
    xmlns:di="http://www.omg.org/spec/DD/20100524/DI"
    xmlns:flowable="http://flowable.org/bpmn">
  <process id="antrag" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="review"/>
    <userTask id="review" name="Antrag prüfen" flowable:candidateUsers="anna"/>
    <sequenceFlow id="f1" sourceRef="review" targetRef="e"/>
    <endEvent id="e"/>
  </process>
  <bpmndi:BPMNDiagram id="d">
    <bpmndi:BPMNPlane id="p" bpmnElement="antrag">
      <bpmndi:BPMNShape id="s_di" bpmnElement="s"><dc:Bounds x="100" y="100" width="36" height="36"/></bpmndi:BPMNShape>
      <bpmndi:BPMNShape id="review_di" bpmnElement="review"><dc:Bounds x="200" y="78" width="100" height="80"/></bpmndi:BPMNShape>
      <bpmndi:BPMNShape id="e_di" bpmnElement="e"><dc:Bounds x="360" y="100" width="36" height="36"/></bpmndi:BPMNShape>
      <bpmndi:BPMNEdge id="f0_di" bpmnElement="f0"><di:waypoint x="136" y="118"/><di:waypoint x="200" y="118"/></bpmndi:BPMNEdge>
      <bpmndi:BPMNEdge id="f1_di" bpmnElement="f1"><di:waypoint x="300" y="118"/><di:waypoint x="360" y="118"/></bpmndi:BPMNEdge>
    </bpmndi:BPMNPlane>
  </bpmndi:BPMNDiagram>
</definitions>"#;

/// Holds every GET whose path starts with `prefix` until `release`; the
/// page's own code is untouched, only the global `fetch` it calls.
fn hold(b: &Driver, prefix: &str) {
    b.execute(&format!(
        r#"window.realFetch = window.realFetch || window.fetch;
        window.holds = [];
        window.rendered = 0;
        window.gets = [];
        window.fetch = (path, init) => {{
          if (!(init && init.method)) window.gets.push(String(path));
          const answer = window.realFetch(path, init);
          if (!String(path).startsWith({prefix:?}) || (init && init.method)) return answer;
          // once the page has read the body, it renders in the same task:
          // the next task comes after that render
          const counted = answer.then((r) => {{
            const read = r.json.bind(r);
            r.json = async () => {{
              const v = await read();
              setTimeout(() => {{ window.rendered += 1; }}, 0);
              return v;
            }};
            return r;
          }});
          return new Promise((ok) => window.holds.push(() => ok(counted)));
        }};
        return null;"#
    ));
}

/// Starts a refresh of the current view (a change of the hash's `again`)
/// and waits until its request for the held path is on its way.
fn refresh_held(b: &Driver, hash: &str) {
    b.execute(&format!("location.hash = {hash:?}; return null;"));
    wait_until(b, "window.holds.length > 0");
}

/// Lets the held answers through and puts `fetch` back.
fn let_go(b: &Driver) {
    b.execute(
        "window.expected = window.holds.length; window.fetch = window.realFetch; \
         window.holds.splice(0).forEach((go) => go()); return null;",
    );
}

/// Lets the held JSON answers through and waits until the page has rendered
/// (or declined to render) what they said.
fn release(b: &Driver) {
    let_go(b);
    wait_until(b, "window.rendered >= window.expected");
}

/// Starts a refresh nothing holds and waits until it has run to its end.
fn refresh(b: &Driver, hash: &str) {
    b.execute(&format!(
        "document.getElementById('refreshed').textContent = ''; location.hash = {hash:?}; return null;"
    ));
    b.wait_for_text("#refreshed", "updated");
}

fn wait_until(b: &Driver, condition: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while b.execute(&format!("return Boolean({condition});")) != json!(true) {
        assert!(
            std::time::Instant::now() < deadline,
            "the page never had {condition}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn value(b: &Driver, css: &str) -> serde_json::Value {
    b.execute(&format!("return document.querySelector({css:?}).value;"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_operator_types_or_picks_survives_a_refresh_that_was_on_its_way() {
    let dir = tempfile::tempdir().unwrap();
    let pf = postfach::Postfach::open(dir.path().join("run.redb")).unwrap();
    pf.park_malformed(postfach::Malformed {
        name: "AuftragAbgeschlossen".into(),
        message_id: "kaputt-1".into(),
        raw: b"{\"auftragId\": ".to_vec(),
        attributes: vec![],
        error: "not JSON: EOF while parsing an object".into(),
    })
    .await
    .unwrap();
    pf.close();
    let srv = Server::launch(dir.path(), &[], &[]);
    let (status, body) = srv.json(
        "POST",
        "/deployments",
        Some(json!({"file": "antrag.bpmn", "xml": MODEL})),
    );
    assert_eq!(status, 200, "{body}");
    let (status, started) = srv.json(
        "POST",
        "/instances",
        Some(json!({"process": "antrag", "variables": {}})),
    );
    assert_eq!(status, 201, "{started}");
    let inst = started["instance"].as_str().unwrap().to_string();
    let base = format!("http://{}/", srv.addr);
    let b = Driver::start();

    // variables typed while the task list's answer was on its way
    b.open(&format!("{base}#view=tasks"));
    let vars = r#"#task-list tbody tr textarea.variables"#;
    b.find(vars);
    b.type_into("#task-who", "anna");
    hold(&b, "/tasks");
    refresh_held(&b, "view=tasks&again=1");
    b.type_into(vars, "[1, 2]");
    release(&b);
    assert_eq!(value(&b, vars), json!("[1, 2]"), "the typed variables stay");

    // their refusal stays on show through the next refresh
    b.click("#task-list tbody tr button.complete");
    b.wait_for_text("#problem", "must be a JSON object");
    refresh(&b, "view=tasks&again=2");
    let shown = b.text("#problem");
    assert!(shown.contains("must be a JSON object"), "{shown:?}");
    let (_, open) = srv.json("GET", "/tasks", None);
    assert_eq!(
        open["tasks"].as_array().unwrap().len(),
        1,
        "nothing was sent"
    );

    // another view: the tasks' problem is not its problem
    b.click(r#"nav a[data-view="messages"]"#);
    let why = r#"#parked tr[data-message="kaputt-1"] input.why"#;
    b.find(why);
    assert_eq!(
        b.execute("return document.getElementById('problem').hidden;"),
        json!(true),
        "{}",
        b.text("#problem")
    );

    // the hex an operator opened stays open through a redraw
    let hex = r#"#parked tr[data-message="kaputt-1"] details"#;
    b.click(&format!("{hex} summary"));
    refresh(&b, "view=messages&again=0");
    assert_eq!(
        b.execute(&format!("return document.querySelector({hex:?}).open;")),
        json!(true)
    );
    b.wait_for_text(&format!("{hex} .raw-hex"), "7b 22");

    // a discard reason typed while the parked list's answer was on its way
    hold(&b, "/messages?parked=true");
    refresh_held(&b, "view=messages&again=1");
    b.type_into(why, "Testnachricht");
    release(&b);
    assert_eq!(value(&b, why), json!("Testnachricht"), "the reason stays");

    // a refresh asked for while the instance view still draws its diagram
    // waits for that one: no rows shown beside a diagram not yet there
    hold(&b, "/processes/antrag/xml");
    refresh_held(&b, &format!("view=instance&id={inst}"));
    b.execute(&format!(
        "location.hash = 'view=instance&id={inst}&again=0'; return null;"
    ));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let asked = b.execute(&format!(
        "return window.gets.filter((p) => p.startsWith('/instances/{inst}')).length;"
    ));
    assert_eq!(asked, json!(1), "the second refresh waited");
    assert_eq!(
        b.execute("return document.querySelectorAll('#tokens tbody tr').length;"),
        json!(0)
    );
    let_go(&b);
    b.find("#instance-diagram .djs-element.pf-current");
    wait_until(
        &b,
        "document.querySelectorAll('#tokens tbody tr').length === 1",
    );

    // the element picked for a new token while the instance's answers were
    // on their way (the statistics are its last read before it redraws)
    let add_at = "#add-token select.add-at";
    b.find(add_at);
    hold(&b, "/processes/antrag/statistics");
    refresh_held(&b, &format!("view=instance&id={inst}&again=1"));
    b.select(add_at, "review");
    release(&b);
    assert_eq!(value(&b, add_at), json!("review"), "the pick stays");

    let errors = b.errors();
    assert!(errors.is_empty(), "the browser logged errors: {errors:#?}");
    drop(b);
    assert!(srv.stop().success());
}
