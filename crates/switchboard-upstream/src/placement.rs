//! Node-bound upstreams in a cluster.
//!
//! Some upstreams hold per-session state inside one process (a stdio child per client session).
//! The node that holds it is the session's *owner* of that upstream, recorded in the session
//! record. A request that lands on another node is forwarded to the owner over the bus; its
//! notifications and server-to-client requests come back to the client's stream on the node
//! where the client's POST is. When the owner dies, the next request claims ownership and starts
//! the resource afresh (state inside the old one is lost).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::upstream::{RequestContext, RpcError, SessionHandle, Upstream};

/// Where a node-bound upstream's resource of one session lives.
#[derive(Clone, Debug, PartialEq)]
pub enum Owner {
    /// On this node (claimed now, or already ours).
    Here,
    /// On that live node.
    Node(String),
}

/// The cluster service node-bound upstreams use. Implemented by the node.
#[async_trait]
pub trait Placement: Send + Sync {
    /// Finds (claiming it when free, or when its owner is dead) the owner of `upstream`'s
    /// resource for this session.
    async fn owner(&self, session: &dyn SessionHandle, upstream: &str) -> Result<Owner, RpcError>;

    /// Claims `upstream`'s resource for this node even from a live owner (expecting the owner
    /// the session record named when it was loaded): for a resource the caller just made anew,
    /// such as the GET stream of a re-initialized upstream session. Answers the owner after the
    /// claim (another node when the record changed meanwhile). The default claims nothing and
    /// answers [`Owner::Here`].
    async fn take(&self, session: &dyn SessionHandle, upstream: &str) -> Result<Owner, RpcError> {
        let _ = (session, upstream);
        Ok(Owner::Here)
    }

    /// Runs `method` of member `upstream` on `node` and returns its result. Notifications and
    /// server-to-client requests it produces reach the client through `ctx.peer`; cancelling
    /// `ctx.cancel` cancels it there. Errors when the owner dies meanwhile.
    async fn forward(
        &self,
        node: &str,
        upstream: &str,
        method: &str,
        params: Value,
        ctx: &RequestContext,
    ) -> Result<Value, RpcError>;

    /// Sends a client notification for member `upstream` to the node that owns the session's
    /// resource of it. `false` when that is this node (or nobody yet): the caller delivers it here.
    async fn forward_notify(
        &self,
        session: &dyn SessionHandle,
        upstream: &str,
        method: &str,
        params: Value,
    ) -> bool {
        let _ = (session, upstream, method, params);
        false
    }
}

/// Wraps an upstream whose per-session resources live in one process, so that every request of
/// a session runs on the node that owns them.
pub struct NodeBound {
    inner: Arc<dyn Upstream>,
}

impl NodeBound {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Upstream>) -> NodeBound {
        NodeBound { inner }
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
        let Some(placement) = ctx.session.placement() else {
            return self.inner.request(method, params, ctx).await;
        };
        match placement.owner(&*ctx.session, self.inner.name()).await? {
            Owner::Here => self.inner.request(method, params, ctx).await,
            Owner::Node(node) => {
                placement
                    .forward(&node, self.inner.name(), method, params, &ctx)
                    .await
            }
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

    /// The inner upstream's (this node's children of it, when it is a stdio upstream).
    fn statuses(&self) -> Vec<crate::status::UpstreamStatus> {
        self.inner.statuses()
    }
}
