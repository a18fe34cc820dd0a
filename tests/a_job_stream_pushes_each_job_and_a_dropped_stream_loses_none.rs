//! StreamActivatedJobs over Zeebe's gateway protocol: a worker that holds a
//! stream open is pushed each job of its type as it becomes due, without
//! asking again; a worker whose stream goes away mid-push loses nothing —
//! the job it was pushed is activated again once its timeout ran out, and
//! is completed by the next worker.
#![cfg(feature = "zeebe")]
use crate::common;
use common::server::Server;
use postfach::server::zeebe::proto;
use proto::gateway_client::GatewayClient;
use tonic::codegen::tokio_stream::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_stream_pushes_each_job_and_a_dropped_stream_loses_none() {
    let dir = tempfile::tempdir().unwrap();
    let zeebe = format!("127.0.0.1:{}", common::server::free_ports(1));
    let srv = Server::launch(dir.path(), &["--zeebe-listen".into(), zeebe.clone()], &[]);
    let mut c = GatewayClient::connect(format!("http://{zeebe}"))
        .await
        .unwrap();
    let model = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/bpmn/auftrag-zeebe.bpmn"
    ))
    .unwrap();
    c.deploy_resource(proto::DeployResourceRequest {
        resources: vec![proto::Resource {
            name: "auftrag-zeebe.bpmn".into(),
            content: model,
        }],
        ..Default::default()
    })
    .await
    .unwrap();
    let stream_for = |timeout: i64| proto::StreamActivatedJobsRequest {
        r#type: "auftragUebergeben".into(),
        worker: "streamer".into(),
        timeout,
        ..Default::default()
    };
    let create = |order: &str| proto::CreateProcessInstanceRequest {
        bpmn_process_id: "auftrag-zeebe".into(),
        variables: format!("{{\"auftragId\": \"{order}\"}}"),
        ..Default::default()
    };
    let wait = std::time::Duration::from_secs(20);

    // the stream is open before the orders exist: each job is pushed
    let mut jobs = c
        .stream_activated_jobs(stream_for(60_000))
        .await
        .unwrap()
        .into_inner();
    for order in ["S-1", "S-2"] {
        c.create_process_instance(create(order)).await.unwrap();
        let job = tokio::time::timeout(wait, jobs.next())
            .await
            .expect("pushed")
            .unwrap()
            .unwrap();
        assert!(job.variables.contains(order), "{job:?}");
        c.complete_job(proto::CompleteJobRequest {
            job_key: job.key,
            ..Default::default()
        })
        .await
        .unwrap();
    }
    drop(jobs);

    // a stream that goes away holding a job: the job comes back after its timeout
    let mut jobs = c
        .stream_activated_jobs(stream_for(1_000))
        .await
        .unwrap()
        .into_inner();
    c.create_process_instance(create("S-3")).await.unwrap();
    let lost = tokio::time::timeout(wait, jobs.next())
        .await
        .expect("pushed")
        .unwrap()
        .unwrap();
    drop(jobs);
    let again = c
        .activate_jobs(proto::ActivateJobsRequest {
            r#type: "auftragUebergeben".into(),
            worker: "next".into(),
            timeout: 60_000,
            max_jobs_to_activate: 5,
            request_timeout: 15_000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .next()
        .await
        .unwrap()
        .unwrap();
    let keys: Vec<i64> = again.jobs.iter().map(|j| j.key).collect();
    assert_eq!(
        keys,
        vec![lost.key],
        "the dropped stream's job, activated again"
    );
    c.complete_job(proto::CompleteJobRequest {
        job_key: lost.key,
        ..Default::default()
    })
    .await
    .unwrap();
    let (_, listed) = common::server::call(
        &srv.addr,
        "GET",
        "/instances?waiting_at=abgeschlossen",
        None,
        None,
    );
    for order in ["S-1", "S-2", "S-3"] {
        assert!(listed.contains(order), "{order} moved on: {listed}");
    }
    srv.stop();
}
