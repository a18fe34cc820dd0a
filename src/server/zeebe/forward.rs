//! Zeebe's gateway protocol in front of a cluster (`postfach gateway
//! --zeebe-listen`): each call goes to the partitions' own gRPC ports
//! (`--partition-zeebe I=HOST:PORT`) by the partition its key names, the
//! way the HTTP gateway places an operation of the catalogue.
//!
//! Invariants: the gateway keeps no state and checks no token itself — it
//! passes the caller's `authorization` on, and each partition decides as
//! for a direct call; a call reaches the partition that owns what it names
//! (a job, instance or incident by its key's partition, a message by its
//! correlation key, a start by the owner a partition names when it refuses
//! one), every partition (a deployment, a signal, the topology), or is
//! answered `UNIMPLEMENTED` naming it.

use super::keys::{element_of, id_of};
use super::proto::{self, gateway_client::GatewayClient, gateway_server::Gateway};
use super::service::{OWNER, Stream, unimplemented};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// How often an `ActivateJobs` that found no job asks the partitions again.
const POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// The gateway's face: one client per partition.
#[derive(Clone)]
pub struct Forward {
    parts: Arc<Vec<GatewayClient<Channel>>>,
    turn: Arc<AtomicU32>,
}

impl Forward {
    /// Clients of the partitions' gRPC ports, in partition order (`HOST:PORT`,
    /// plaintext); connected when first called.
    pub fn new(addrs: &[String]) -> Result<Forward, String> {
        let parts = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| {
                Channel::from_shared(format!("http://{a}"))
                    .map(|c| {
                        GatewayClient::new(c.connect_lazy())
                            .max_decoding_message_size(super::MAX_MESSAGE)
                            .max_encoding_message_size(super::MAX_MESSAGE)
                    })
                    .map_err(|e| format!("--partition-zeebe {i}={a}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if parts.is_empty() {
            return Err("the Zeebe face of a gateway needs --partition-zeebe I=HOST:PORT for every partition".into());
        }
        Ok(Forward {
            parts: Arc::new(parts),
            turn: Arc::new(AtomicU32::new(0)),
        })
    }

    fn count(&self) -> u32 {
        self.parts.len() as u32
    }

    fn part(&self, i: u32) -> GatewayClient<Channel> {
        self.parts[i as usize % self.parts.len()].clone()
    }

    fn next_turn(&self) -> u32 {
        self.turn.fetch_add(1, Ordering::Relaxed) % self.count()
    }

    /// The partition a key of a job, instance or incident names.
    fn of_key(&self, field: &str, key: i64) -> Result<u32, Status> {
        match id_of(key) {
            Some((p, _)) if p < self.count() => Ok(p),
            Some((p, _)) => Err(Status::not_found(format!(
                "{field} {key} names partition {p}, and the cluster has {}",
                self.count()
            ))),
            None => Err(Status::not_found(format!(
                "{field} {key} is no key postfach gave out"
            ))),
        }
    }

    /// The partition that owns a correlation key.
    fn of_correlation(&self, key: &str) -> u32 {
        crate::partition::Partition::new(0, u64::from(self.count()))
            .map(|p| p.of_key(key))
            .unwrap_or(0)
    }
}

/// `msg` with the caller's token, for a partition.
fn pass<T, U>(from: &Request<T>, msg: U) -> Request<U> {
    let mut req = Request::new(msg);
    if let Some(v) = from.metadata().get("authorization") {
        req.metadata_mut().insert("authorization", v.clone());
    }
    req
}

/// The partition a refusal names as the owner, if it names one.
fn owner(s: &Status) -> Option<u32> {
    s.metadata().get(OWNER)?.to_str().ok()?.parse().ok()
}

/// Calls `call` on partition `at` — and once more on the owner a refusal
/// names (a start whose correlation key another partition owns).
macro_rules! placed {
    ($self:ident, $req:ident, $at:expr, $method:ident) => {{
        let msg = $req.get_ref().clone();
        match $self.part($at).$method(pass(&$req, msg.clone())).await {
            Err(s) if owner(&s).is_some_and(|o| o < $self.count()) => {
                let o = owner(&s).unwrap_or(0);
                $self.part(o).$method(pass(&$req, msg)).await
            }
            other => other,
        }
    }};
}

#[tonic::async_trait]
impl Gateway for Forward {
    type ActivateJobsStream = Stream<proto::ActivateJobsResponse>;
    type StreamActivatedJobsStream = Stream<proto::ActivatedJob>;

    async fn topology(
        &self,
        req: Request<proto::TopologyRequest>,
    ) -> Result<Response<proto::TopologyResponse>, Status> {
        let mut brokers = Vec::new();
        let mut version = String::new();
        for i in 0..self.count() {
            let t = self
                .part(i)
                .topology(pass(&req, proto::TopologyRequest {}))
                .await?
                .into_inner();
            version = t.gateway_version;
            brokers.extend(t.brokers);
        }
        Ok(Response::new(proto::TopologyResponse {
            brokers,
            cluster_size: self.count() as i32,
            partitions_count: self.count() as i32,
            replication_factor: 1,
            gateway_version: version,
            cluster_id: String::new(),
        }))
    }

    async fn deploy_resource(
        &self,
        req: Request<proto::DeployResourceRequest>,
    ) -> Result<Response<proto::DeployResourceResponse>, Status> {
        // every partition runs every process; partition 0's answer is told
        let mut first = None;
        for i in 0..self.count() {
            let r = self
                .part(i)
                .deploy_resource(pass(&req, req.get_ref().clone()))
                .await?;
            first.get_or_insert(r);
        }
        first.ok_or_else(|| Status::unavailable("no partition"))
    }

    async fn deploy_process(
        &self,
        req: Request<proto::DeployProcessRequest>,
    ) -> Result<Response<proto::DeployProcessResponse>, Status> {
        let mut first = None;
        for i in 0..self.count() {
            #[allow(deprecated)]
            let r = self
                .part(i)
                .deploy_process(pass(&req, req.get_ref().clone()))
                .await?;
            first.get_or_insert(r);
        }
        first.ok_or_else(|| Status::unavailable("no partition"))
    }

    async fn create_process_instance(
        &self,
        req: Request<proto::CreateProcessInstanceRequest>,
    ) -> Result<Response<proto::CreateProcessInstanceResponse>, Status> {
        placed!(self, req, self.next_turn(), create_process_instance)
    }

    async fn create_process_instance_with_result(
        &self,
        req: Request<proto::CreateProcessInstanceWithResultRequest>,
    ) -> Result<Response<proto::CreateProcessInstanceWithResultResponse>, Status> {
        placed!(
            self,
            req,
            self.next_turn(),
            create_process_instance_with_result
        )
    }

    async fn publish_message(
        &self,
        req: Request<proto::PublishMessageRequest>,
    ) -> Result<Response<proto::PublishMessageResponse>, Status> {
        let at = self.of_correlation(&req.get_ref().correlation_key);
        placed!(self, req, at, publish_message)
    }

    async fn broadcast_signal(
        &self,
        req: Request<proto::BroadcastSignalRequest>,
    ) -> Result<Response<proto::BroadcastSignalResponse>, Status> {
        let mut first = None;
        for i in 0..self.count() {
            let r = self
                .part(i)
                .broadcast_signal(pass(&req, req.get_ref().clone()))
                .await?;
            first.get_or_insert(r);
        }
        first.ok_or_else(|| Status::unavailable("no partition"))
    }

    async fn activate_jobs(
        &self,
        req: Request<proto::ActivateJobsRequest>,
    ) -> Result<Response<Self::ActivateJobsStream>, Status> {
        use tonic::codegen::tokio_stream::StreamExt;
        let want = req.get_ref().max_jobs_to_activate.max(0);
        let wait = super::service::wait_ms(req.get_ref().request_timeout);
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait);
        let start = self.next_turn();
        let mut jobs = Vec::new();
        loop {
            // partitions one after another, none waiting, until enough
            for n in 0..self.count() {
                let left = want - jobs.len() as i32;
                if left <= 0 {
                    break;
                }
                let mut ask = req.get_ref().clone();
                ask.max_jobs_to_activate = left;
                ask.request_timeout = -1;
                let mut s = self
                    .part(start + n)
                    .activate_jobs(pass(&req, ask))
                    .await?
                    .into_inner();
                while let Some(part) = s.next().await {
                    jobs.extend(part?.jobs);
                }
            }
            if !jobs.is_empty() || std::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
        let answer = proto::ActivateJobsResponse { jobs };
        let one = tonic::codegen::tokio_stream::once(Ok(answer));
        Ok(Response::new(Box::pin(one)))
    }

    async fn stream_activated_jobs(
        &self,
        req: Request<proto::StreamActivatedJobsRequest>,
    ) -> Result<Response<Self::StreamActivatedJobsStream>, Status> {
        // one stream from every partition, merged; a worker that goes away
        // closes the channel, and each partition's stream with it
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        for i in 0..self.count() {
            let mut s = self
                .part(i)
                .stream_activated_jobs(pass(&req, req.get_ref().clone()))
                .await?
                .into_inner();
            let tx = tx.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        item = s.message() => match item {
                            Ok(Some(job)) => {
                                if tx.send(Ok(job)).await.is_err() {
                                    break;
                                }
                            }
                            Ok(None) => break,
                            Err(e) => {
                                let _ = tx.send(Err(e)).await;
                                break;
                            }
                        },
                        () = tx.closed() => break,
                    }
                }
            });
        }
        let out = tonic::codegen::tokio_stream::wrappers::ReceiverStream::new(rx);
        Ok(Response::new(Box::pin(out)))
    }

    async fn complete_job(
        &self,
        req: Request<proto::CompleteJobRequest>,
    ) -> Result<Response<proto::CompleteJobResponse>, Status> {
        let at = self.of_key("jobKey", req.get_ref().job_key)?;
        placed!(self, req, at, complete_job)
    }

    async fn fail_job(
        &self,
        req: Request<proto::FailJobRequest>,
    ) -> Result<Response<proto::FailJobResponse>, Status> {
        let at = self.of_key("jobKey", req.get_ref().job_key)?;
        placed!(self, req, at, fail_job)
    }

    async fn throw_error(
        &self,
        req: Request<proto::ThrowErrorRequest>,
    ) -> Result<Response<proto::ThrowErrorResponse>, Status> {
        let at = self.of_key("jobKey", req.get_ref().job_key)?;
        placed!(self, req, at, throw_error)
    }

    async fn update_job_retries(
        &self,
        req: Request<proto::UpdateJobRetriesRequest>,
    ) -> Result<Response<proto::UpdateJobRetriesResponse>, Status> {
        let at = self.of_key("jobKey", req.get_ref().job_key)?;
        placed!(self, req, at, update_job_retries)
    }

    async fn update_job_timeout(
        &self,
        req: Request<proto::UpdateJobTimeoutRequest>,
    ) -> Result<Response<proto::UpdateJobTimeoutResponse>, Status> {
        let at = self.of_key("jobKey", req.get_ref().job_key)?;
        placed!(self, req, at, update_job_timeout)
    }

    async fn resolve_incident(
        &self,
        req: Request<proto::ResolveIncidentRequest>,
    ) -> Result<Response<proto::ResolveIncidentResponse>, Status> {
        let at = self.of_key("incidentKey", req.get_ref().incident_key)?;
        placed!(self, req, at, resolve_incident)
    }

    async fn cancel_process_instance(
        &self,
        req: Request<proto::CancelProcessInstanceRequest>,
    ) -> Result<Response<proto::CancelProcessInstanceResponse>, Status> {
        let at = self.of_key("processInstanceKey", req.get_ref().process_instance_key)?;
        placed!(self, req, at, cancel_process_instance)
    }

    async fn set_variables(
        &self,
        req: Request<proto::SetVariablesRequest>,
    ) -> Result<Response<proto::SetVariablesResponse>, Status> {
        let key = req.get_ref().element_instance_key;
        let at = match element_of(key) {
            Some((_, p, _)) if p < self.count() => p,
            _ => {
                return Err(Status::not_found(format!(
                    "elementInstanceKey {key} is no key of this cluster"
                )));
            }
        };
        placed!(self, req, at, set_variables)
    }

    async fn evaluate_decision(
        &self,
        req: Request<proto::EvaluateDecisionRequest>,
    ) -> Result<Response<proto::EvaluateDecisionResponse>, Status> {
        placed!(self, req, self.next_turn(), evaluate_decision)
    }

    async fn modify_process_instance(
        &self,
        _req: Request<proto::ModifyProcessInstanceRequest>,
    ) -> Result<Response<proto::ModifyProcessInstanceResponse>, Status> {
        unimplemented("ModifyProcessInstance")
    }

    async fn migrate_process_instance(
        &self,
        _req: Request<proto::MigrateProcessInstanceRequest>,
    ) -> Result<Response<proto::MigrateProcessInstanceResponse>, Status> {
        unimplemented("MigrateProcessInstance")
    }

    async fn delete_resource(
        &self,
        _req: Request<proto::DeleteResourceRequest>,
    ) -> Result<Response<proto::DeleteResourceResponse>, Status> {
        unimplemented("DeleteResource")
    }

    async fn evaluate_conditional(
        &self,
        _req: Request<proto::EvaluateConditionalRequest>,
    ) -> Result<Response<proto::EvaluateConditionalResponse>, Status> {
        unimplemented("EvaluateConditional")
    }
}
