//! [`Observed`]: any [`Store`] with every operation timed and traced. Each call of a store
//! method (but `subscribe`, the inbox's long-lived subscription) is one child span of the
//! request that made it (target [`switchboard_telemetry::trace::TARGET`], kind client, named by
//! the operation, with `db.system.name` and `db.operation.name` of OpenTelemetry's database
//! conventions), one observation of `switchboard_store_operation_duration_seconds{operation}`,
//! and, when it fails, one count of `switchboard_store_operation_errors_total{operation}`.
//! With Redis an operation is its round trips (one script or pipeline for most).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde_json::Value;
use switchboard_telemetry::{metrics, trace};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::model::*;
use crate::task::{Settled, TaskChange, TaskRecord};
use crate::traits::*;

/// A store whose operations are timed and traced; otherwise exactly the inner store.
pub struct Observed {
    inner: Arc<dyn Store>,
    /// `db.system.name`: `redis` or `memory`.
    system: &'static str,
}

impl Observed {
    /// `inner`, observed.
    pub fn wrap(inner: Arc<dyn Store>) -> Arc<dyn Store> {
        let system = inner.backend();
        Arc::new(Observed { inner, system })
    }

    async fn op<T>(
        &self,
        operation: &'static str,
        work: impl Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let span = tracing::info_span!(
            target: trace::TARGET,
            "store",
            otel.name = operation,
            otel.kind = "client",
            db.system.name = self.system,
            db.operation.name = operation,
            error.type = tracing::field::Empty,
        );
        let started = Instant::now();
        let out = work.instrument(span.clone()).await;
        metrics::get().store_operation(operation, started, out.is_err());
        if out.is_err() {
            span.record("error.type", "store_error");
        }
        out
    }
}

#[async_trait]
impl SessionStore for Observed {
    async fn create_session(&self, record: &SessionRecord) -> StoreResult<CreateOutcome> {
        self.op("create_session", self.inner.create_session(record))
            .await
    }
    async fn begin(
        &self,
        sid: &str,
        inflight: Option<&InflightRequest>,
    ) -> StoreResult<BeginOutcome> {
        self.op("begin", self.inner.begin(sid, inflight)).await
    }
    async fn check(
        &self,
        sid: &str,
        request_key: &str,
        rates: &[crate::Rate],
    ) -> StoreResult<BeginOutcome> {
        self.op("admit", self.inner.check(sid, request_key, rates))
            .await
    }
    async fn begin_rated(
        &self,
        sid: &str,
        inflight: &InflightRequest,
        rates: &[crate::Rate],
    ) -> StoreResult<BeginOutcome> {
        self.op("begin", self.inner.begin_rated(sid, inflight, rates))
            .await
    }
    fn folds_rates(&self) -> bool {
        self.inner.folds_rates()
    }
    async fn take_rates(&self, rates: &[crate::Rate]) -> StoreResult<crate::RateDecision> {
        self.op("take_rates", self.inner.take_rates(rates)).await
    }
    async fn register(&self, sid: &str, inflight: &InflightRequest) -> StoreResult<bool> {
        self.op("register", self.inner.register(sid, inflight))
            .await
    }
    async fn finish(
        &self,
        sid: &str,
        request_key: &str,
        json_stream: Option<&str>,
    ) -> StoreResult<()> {
        let work = self.inner.finish(sid, request_key, json_stream);
        self.op("finish", work).await
    }
    async fn in_flight(&self, sid: &str) -> StoreResult<Vec<InflightEntry>> {
        self.op("in_flight", self.inner.in_flight(sid)).await
    }
    async fn forget_in_flight(&self, sid: &str, entry: &InflightEntry) -> StoreResult<bool> {
        self.op("forget_in_flight", self.inner.forget_in_flight(sid, entry))
            .await
    }
    async fn touch(&self, sid: &str) -> StoreResult<bool> {
        self.op("touch", self.inner.touch(sid)).await
    }
    async fn exists(&self, sid: &str) -> StoreResult<bool> {
        self.op("exists", self.inner.exists(sid)).await
    }
    async fn owners_of(
        &self,
        sids: &[String],
    ) -> StoreResult<Vec<Option<BTreeMap<String, String>>>> {
        self.op("owners_of", self.inner.owners_of(sids)).await
    }
    async fn update(&self, sid: &str, update: SessionUpdate) -> StoreResult<bool> {
        self.op("update", self.inner.update(sid, update)).await
    }
    async fn begin_update(
        &self,
        sid: &str,
        principal: &str,
        update: SessionUpdate,
    ) -> StoreResult<BeginOutcome> {
        let op = self.inner.begin_update(sid, principal, update);
        self.op("begin_update", op).await
    }
    async fn claim_owner(
        &self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
    ) -> StoreResult<OwnerClaim> {
        let work = self.inner.claim_owner(sid, upstream, expected);
        self.op("claim_owner", work).await
    }
    async fn swap_upstream_sessions(
        &self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
        entries: Vec<(String, Option<String>)>,
    ) -> StoreResult<UpstreamSwap> {
        let work = self
            .inner
            .swap_upstream_sessions(sid, upstream, expected, entries);
        self.op("swap_upstream_sessions", work).await
    }
    async fn delete_session(&self, sid: &str) -> StoreResult<bool> {
        self.op("delete_session", self.inner.delete_session(sid))
            .await
    }
    async fn count_sessions(&self) -> StoreResult<u64> {
        self.op("count_sessions", self.inner.count_sessions()).await
    }
    async fn reap(&self, limit: usize) -> StoreResult<Vec<String>> {
        self.op("reap", self.inner.reap(limit)).await
    }
}

#[async_trait]
impl EventLog for Observed {
    async fn append(
        &self,
        sid: &str,
        stream: &str,
        data: &str,
        end: bool,
    ) -> StoreResult<Appended> {
        self.op("append", self.inner.append(sid, stream, data, end))
            .await
    }
    async fn append_once(
        &self,
        sid: &str,
        stream: &str,
        data: &str,
        end: bool,
        append_id: &str,
    ) -> StoreResult<Appended> {
        let appended = self.inner.append_once(sid, stream, data, end, append_id);
        self.op("append", appended).await
    }
    async fn replay(
        &self,
        sid: &str,
        stream: &str,
        after: &str,
        limit: usize,
    ) -> StoreResult<Replay> {
        self.op("replay", self.inner.replay(sid, stream, after, limit))
            .await
    }
    async fn claim(&self, sid: &str, stream: &str, holder: &str) -> StoreResult<Claim> {
        self.op("claim", self.inner.claim(sid, stream, holder))
            .await
    }
    async fn release(&self, sid: &str, stream: &str, holder: &str) -> StoreResult<()> {
        self.op("release", self.inner.release(sid, stream, holder))
            .await
    }
    async fn running(&self, sid: &str, stream: &str) -> StoreResult<Option<RunningRequest>> {
        self.op("running", self.inner.running(sid, stream)).await
    }
    async fn running_and_replay(
        &self,
        sid: &str,
        stream: &str,
        after: &str,
        limit: usize,
    ) -> StoreResult<(Option<RunningRequest>, Replay)> {
        let work = self.inner.running_and_replay(sid, stream, after, limit);
        self.op("running_and_replay", work).await
    }
    async fn abort_running(
        &self,
        sid: &str,
        stream: &str,
        node: &str,
        data: &str,
    ) -> StoreResult<Option<Appended>> {
        let work = self.inner.abort_running(sid, stream, node, data);
        self.op("abort_running", work).await
    }
}

#[async_trait]
impl Bus for Observed {
    async fn subscribe(&self) -> StoreResult<mpsc::Receiver<BusMessage>> {
        self.inner.subscribe().await
    }
    async fn register_pending(&self, sid: &str, request_key: &str) -> StoreResult<()> {
        self.op(
            "register_pending",
            self.inner.register_pending(sid, request_key),
        )
        .await
    }
    async fn forget_pending(&self, sid: &str, request_key: &str) -> StoreResult<()> {
        self.op(
            "forget_pending",
            self.inner.forget_pending(sid, request_key),
        )
        .await
    }
    async fn route_reply(
        &self,
        sid: &str,
        request_key: &str,
        message: &Value,
    ) -> StoreResult<Routed> {
        let work = self.inner.route_reply(sid, request_key, message);
        self.op("route_reply", work).await
    }
    async fn send_within(
        &self,
        node: &str,
        msg: &BusMessage,
        within: std::time::Duration,
    ) -> StoreResult<()> {
        let work = self.inner.send_within(node, msg, within);
        self.op("send_to", work).await
    }
    async fn broadcast(&self, msg: &BusMessage) -> StoreResult<()> {
        self.op("broadcast", self.inner.broadcast(msg)).await
    }
    async fn route_cancel(
        &self,
        sid: &str,
        request_key: &str,
        reason: Option<&str>,
    ) -> StoreResult<bool> {
        let work = self.inner.route_cancel(sid, request_key, reason);
        self.op("route_cancel", work).await
    }
}

#[async_trait]
impl Liveness for Observed {
    fn node_id(&self) -> &str {
        self.inner.node_id()
    }
    async fn heartbeat(&self) -> StoreResult<bool> {
        self.op("heartbeat", self.inner.heartbeat()).await
    }
    async fn retire(&self) -> StoreResult<()> {
        self.op("retire", self.inner.retire()).await
    }
    async fn is_alive(&self, node: &str) -> StoreResult<bool> {
        self.op("is_alive", self.inner.is_alive(node)).await
    }
    async fn reachable(&self) -> StoreResult<()> {
        self.op("reachable", self.inner.reachable()).await
    }
    async fn memory_policy(&self) -> StoreResult<MemoryPolicy> {
        self.op("memory_policy", self.inner.memory_policy()).await
    }
}

#[async_trait]
impl Secrets for Observed {
    async fn agreed_secret(&self, name: &str, proposal: &[u8]) -> StoreResult<Vec<u8>> {
        self.op("agreed_secret", self.inner.agreed_secret(name, proposal))
            .await
    }
}

#[async_trait]
impl TaskStore for Observed {
    async fn create_task(&self, record: &TaskRecord) -> StoreResult<bool> {
        self.op("create_task", self.inner.create_task(record)).await
    }
    async fn get_task(&self, task_id: &str) -> StoreResult<Option<TaskRecord>> {
        self.op("get_task", self.inner.get_task(task_id)).await
    }
    async fn settle_task(&self, task_id: &str, change: &TaskChange) -> StoreResult<Settled> {
        self.op("settle_task", self.inner.settle_task(task_id, change))
            .await
    }
    async fn expire_task(&self, task_id: &str, principal: &str, grace_ms: u64) -> StoreResult<()> {
        let op = self.inner.expire_task(task_id, principal, grace_ms);
        self.op("expire_task", op).await
    }
    async fn expired_task(&self, task_id: &str) -> StoreResult<Option<String>> {
        self.op("expired_task", self.inner.expired_task(task_id))
            .await
    }
    async fn claim_task_slot(
        &self,
        principal: &str,
        task_id: &str,
        max: u64,
        ttl_ms: u64,
    ) -> StoreResult<bool> {
        let op = self.inner.claim_task_slot(principal, task_id, max, ttl_ms);
        self.op("claim_task_slot", op).await
    }
    async fn release_task_slot(&self, principal: &str, task_id: &str) -> StoreResult<()> {
        let op = self.inner.release_task_slot(principal, task_id);
        self.op("release_task_slot", op).await
    }
}

impl Store for Observed {
    fn backend(&self) -> &'static str {
        self.system
    }
}
