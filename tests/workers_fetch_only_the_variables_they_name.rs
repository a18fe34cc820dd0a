//! A worker that names the variables it needs gets only those in each job (as
//! Zeebe's `fetchVariables` and Camunda's `fetchAndLock` variables): an inner
//! instance of a multi-instance task its item and index, not the whole
//! collection copied into every job. The library, the HTTP API and the command
//! line take the list; without it a job carries every variable its token sees.
use crate::common;
#[cfg(feature = "server")]
use common::server::Server;
use common::*;
use serde_json::json;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:flowable="http://flowable.org/bpmn" targetNamespace="t">
  <process id="positionen" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="pruefen"/>
    <serviceTask id="pruefen">
      <multiInstanceLoopCharacteristics isSequential="false" flowable:collection="liste" flowable:elementVariable="position"/>
    </serviceTask>
    <sequenceFlow id="f2" sourceRef="pruefen" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::test]
async fn each_job_carries_only_the_named_variables_its_token_sees() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let liste: Vec<String> = (0..500).map(|i| format!("pos-{i}")).collect();
    let id = env
        .pf
        .start(
            "positionen",
            postfach::vars([
                ("liste", json!(liste)),
                ("auftragId", "4711".into()),
                ("gross", json!("x".repeat(10_000))),
            ]),
            None,
        )
        .await
        .unwrap();
    let names = [
        "position",
        "loopCounter",
        "auftragId",
        "nrOfInstances",
        "fehlt",
    ]
    .map(String::from)
    .to_vec();
    let jobs = env
        .pf
        .lock_jobs_fetching("pruefen", 1000, "w", 60_000, names)
        .await
        .unwrap();
    assert_eq!(jobs.len(), 500);
    let mut seen = std::collections::BTreeSet::new();
    for j in &jobs {
        let v = &j.task.variables;
        let keys: Vec<&str> = v.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["auftragId", "loopCounter", "nrOfInstances", "position"],
            "only what was named and exists"
        );
        assert_eq!(v["auftragId"], "4711");
        assert_eq!(v["nrOfInstances"], 500);
        let i = v["loopCounter"].as_u64().unwrap() as usize;
        assert_eq!(
            v["position"],
            json!(liste[i]),
            "each inner instance its own item"
        );
        seen.insert(i);
    }
    assert_eq!(seen.len(), 500);
    // the jobs run as usual
    for j in jobs {
        env.pf
            .complete_job(j.task.job, Some(j.lease_token), no_vars())
            .await
            .unwrap();
    }
    assert_eq!(env.state(id), "completed");

    // without a list, a job carries everything (the collection included)
    env.pf
        .start(
            "positionen",
            postfach::vars([("liste", json!(["a"]))]),
            None,
        )
        .await
        .unwrap();
    let all = env.lock("pruefen", 10, "w", 60_000).await;
    assert_eq!(all[0].task.variables["liste"], json!(["a"]));
    assert_eq!(all[0].task.variables["position"], "a");
    // an empty or blank name is refused, naming the field
    let e = env
        .pf
        .lock_jobs_fetching("pruefen", 1, "w", 60_000, vec![" ".into()])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("fetch_variables"), "{e}");
}

#[test]
#[cfg(feature = "server")]
fn http_and_command_line_take_the_list_of_variables() {
    let srv = Server::start("127.0.0.1:0", None);
    let (status, _) = srv.json(
        "POST",
        "/instances",
        Some(json!({"process": "auftrag-ausfuehrung",
                    "variables": {"auftragId": "4711", "notiz": "gross"}})),
    );
    assert_eq!(status, 201);
    srv.wait_for("/jobs", |v| {
        v["jobs"].as_array().is_some_and(|j| {
            j.iter()
                // the task job, not the asyncBefore continuation that
                // precedes it at the same element (acquiring then finds none)
                .any(|j| j["element"] == HAND_OVER && j["kind"] == "task" && j["state"] == "ready")
        })
    });
    let (status, got) = srv.json(
        "POST",
        "/jobs/acquire",
        Some(json!({"topic": HAND_OVER, "worker": "w", "lease_ms": 60000,
                    "fetch_variables": ["auftragId"]})),
    );
    assert_eq!(status, 200, "{got}");
    assert_eq!(
        got["jobs"][0]["variables"],
        json!({"auftragId": "4711"}),
        "{got}"
    );
    let (status, refused) = srv.json(
        "POST",
        "/jobs/acquire",
        Some(json!({"topic": HAND_OVER, "worker": "w", "lease_ms": 60000,
                    "fetch_variables": [""]})),
    );
    assert_eq!(status, 400, "{refused}");

    // the command line, against the same server
    let (_, _) = srv.json(
        "POST",
        "/instances",
        Some(json!({"process": "auftrag-ausfuehrung",
                    "variables": {"auftragId": "4712", "notiz": "gross"}})),
    );
    srv.wait_for("/jobs", |v| {
        v["jobs"].as_array().is_some_and(|j| {
            j.iter()
                .filter(|j| {
                    j["element"] == HAND_OVER && j["kind"] == "task" && j["state"] == "ready"
                })
                .count()
                == 1
        })
    });
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
        .args([
            "--server",
            &format!("http://{}", srv.addr),
            "--json",
            "acquire",
            HAND_OVER,
        ])
        .args(["--worker", "w", "--fetch-variable", "notiz"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["jobs"][0]["variables"], json!({"notiz": "gross"}), "{v}");
}
