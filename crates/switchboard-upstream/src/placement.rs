//! Node-bound upstreams in a cluster.
//!
//! Some upstreams hold per-session state inside one process (a stdio child per client session,
//! a legacy SSE connection). The node that holds it is the session's *owner* of that upstream,
//! recorded in the session record. A request that lands on another node is forwarded to the
//! owner over the bus; its notifications and server-to-client requests come back to the client's
//! stream on the node where the client's POST is.
//!
//! ## Failover within the request (case C08)
//! When the owner cannot run a request, the node that has it claims ownership and runs it here
//! (starting the resource afresh: a stdio child gets the session's stored `initialize`), within
//! the same client request, so a rolling restart fails no request and shortens no list:
//! - the owner is **stopping** (draining after SIGTERM) or stopped: it answers the forward at once
//!   with [`Forwarded::Moved`] without running it, so any request, `tools/call` included, runs
//!   here;
//! - the owner **died** while the forward was out (its heartbeat lapsed, `cluster.node_ttl`):
//!   [`Forwarded::Lost`]. It may have run the request, so only requests that are safe to run
//!   twice ([`runs_again_safely`]: lists, reads, `prompts/get`, completions, `ping`, …) run
//!   again here; any other (`tools/call`) fails with -32006 naming the upstream, and the next
//!   request runs here.
//!
//! The whole request, hops included, is bounded by the upstream's `timeout_ms`: past it the
//! client gets -32005 naming the upstream (a forward still out is cancelled on its owner).
//!
//! ## A node that was taken over
//! A node that stalled (or lost the store) past `cluster.node_ttl` may be taken over while it
//! still holds the old resource. It stops what it holds once the session record names another
//! owner ([`Upstream::owned_sessions`]): the node checks at once when its heartbeat finds it
//! had lapsed, and on every sweep (`cluster.reaper_interval`), so a session never keeps two.
//!
//! ## What a move loses
//! The new resource starts from the stored `initialize` only: whatever the old child (or SSE
//! connection) kept in memory is gone, and so are resource subscriptions and a logging level the
//! client set on it, until the client sends them again. Requests already running on a stopping
//! owner finish there (its child lives until its drain ends); a request still running when an
//! owner dies fails with -32004 (`the request was lost`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use switchboard_protocol::codes;
use tokio::time::Instant;

// The service's interface lives beside `SessionHandle`, which hands it out (one module, no cycle).
pub use crate::upstream::{Forwarded, Owner, Placement};
use crate::upstream::{RequestContext, RpcError, SessionHandle, Upstream};
use switchboard_telemetry::trace::logged_session;

/// Whether a request may run again on another node after its owner died while running it: it
/// reads, or sets something to a value (MCP 2025-11-25: lists, `resources/read`, `prompts/get`,
/// `completion/complete`, `ping`, `logging/setLevel`, `resources/subscribe`/`unsubscribe`). Not
/// `tools/call`, whose effects may have happened.
pub fn runs_again_safely(method: &str) -> bool {
    matches!(
        method,
        "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "prompts/get"
            | "completion/complete"
            | "ping"
            | "logging/setLevel"
            | "resources/subscribe"
            | "resources/unsubscribe"
    )
}

/// Wraps an upstream whose per-session resources live in one process, so that every request of
/// a session runs on the node that owns them (see the module doc for failover).
pub struct NodeBound {
    inner: Arc<dyn Upstream>,
    timeout: Duration,
}

impl NodeBound {
    /// Wraps `inner`, whose requests may take `timeout` (its `timeout_ms`), forwarding and
    /// failover included.
    pub fn new(inner: Arc<dyn Upstream>, timeout: Duration) -> NodeBound {
        NodeBound { inner, timeout }
    }

    /// -32005 naming the upstream and its timeout.
    fn timed_out(&self, method: &str) -> RpcError {
        RpcError::new(
            codes::UPSTREAM_TIMEOUT,
            format!(
                "upstream `{}` did not answer {method} within {} ms",
                self.inner.name(),
                self.timeout.as_millis()
            ),
        )
    }

    /// Runs the request on the owner, following it when it moves. Each move is a node that
    /// claimed the resource from one that stopped, so the chain is as long as the nodes stopping
    /// meanwhile; the timeout bounds it.
    async fn placed(
        &self,
        placement: &dyn Placement,
        method: &str,
        params: Value,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        let name = self.inner.name();
        let deadline = Instant::now() + self.timeout;
        let mut owner = placement.owner(&*ctx.session, name).await?;
        loop {
            let node = match owner {
                Owner::Here => return self.inner.request(method, params, ctx).await,
                Owner::Node(node) => node,
            };
            let wait = deadline.saturating_duration_since(Instant::now());
            if wait.is_zero() {
                return Err(self.timed_out(method));
            }
            match placement
                .forward(&node, name, method, &params, &ctx, wait)
                .await
            {
                Forwarded::Answered(outcome) => return outcome,
                Forwarded::TimedOut => return Err(self.timed_out(method)),
                Forwarded::Moved => {
                    tracing::info!(upstream = name, method, node = %node, session = %logged_session(&ctx.session_id), "its owner node is stopping: running the request on another node");
                }
                Forwarded::Lost(_) if runs_again_safely(method) => {
                    tracing::warn!(upstream = name, method, node = %node, session = %logged_session(&ctx.session_id), "its owner node died while running the request: running it again on another node");
                }
                Forwarded::Lost(e) => return Err(e),
            }
            owner = placement.take_over(&*ctx.session, name, &node).await?;
        }
    }
}

#[async_trait]
impl Upstream for NodeBound {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn capabilities(&self) -> Value {
        self.inner.capabilities()
    }

    fn server_info(&self) -> Value {
        self.inner.server_info()
    }

    fn instructions(&self) -> Option<String> {
        self.inner.instructions()
    }

    fn members(&self) -> Vec<Arc<dyn Upstream>> {
        vec![self.inner.clone()]
    }

    async fn prepare(&self) {
        self.inner.prepare().await
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        match ctx.session.placement() {
            Some(placement) => self.placed(&*placement, method, params, ctx).await,
            None => self.inner.request(method, params, ctx).await,
        }
    }

    /// Goes to the owner of the session's resource (over the bus when that is another node);
    /// the inner upstream acts only on resources it holds (it must not start one for a
    /// notification).
    async fn notify(&self, method: &str, params: Value, session: Arc<dyn SessionHandle>) {
        if let Some(placement) = session.placement() {
            if placement
                .forward_notify(&*session, self.inner.name(), method, params.clone())
                .await
            {
                return;
            }
        }
        self.inner.notify(method, params, session).await;
    }

    async fn session_ended(&self, session_id: &str) {
        self.inner.session_ended(session_id).await
    }

    async fn shutdown(&self) {
        self.inner.shutdown().await
    }

    fn held_sessions(&self) -> Vec<String> {
        self.inner.held_sessions()
    }

    /// Everything the inner upstream holds here is held as the session's owner.
    fn owned_sessions(&self) -> Vec<(String, String)> {
        let name = self.inner.name();
        let held = self.inner.held_sessions().into_iter();
        held.map(|sid| (name.to_owned(), sid)).collect()
    }

    /// The inner upstream's (this node's children of it, when it is a stdio upstream).
    fn statuses(&self) -> Vec<crate::status::UpstreamStatus> {
        self.inner.statuses()
    }

    async fn refresh_statuses(&self) {
        self.inner.refresh_statuses().await;
    }
}
