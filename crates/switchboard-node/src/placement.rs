//! The node's [`Placement`] service: who owns a session's node-bound upstream resource, and
//! running a request on that owner.

use async_trait::async_trait;
use serde_json::{json, Value};
use switchboard_protocol::codes;
use switchboard_store::{BusMessage, OwnerClaim};
use switchboard_upstream::placement::{Owner, Placement};
use switchboard_upstream::{RequestContext, RpcError, SessionHandle};

use crate::forward::{decode_outcome, Awaited};
use crate::state::App;

/// Placement backed by the store (owner records, liveness) and the bus.
pub struct NodePlacement {
    app: App,
}

impl NodePlacement {
    /// The service for this node.
    pub fn new(app: App) -> NodePlacement {
        NodePlacement { app }
    }

    fn store_error(e: switchboard_store::StoreError) -> RpcError {
        RpcError::new(codes::INTERNAL_ERROR, format!("session store error: {e}"))
    }

    /// Claims ownership expecting `expected`; follows one change of owner.
    async fn claim(
        &self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
    ) -> Result<Owner, RpcError> {
        let me = self.app.node_id();
        match self
            .app
            .store
            .claim_owner(sid, upstream, expected)
            .await
            .map_err(Self::store_error)?
        {
            OwnerClaim::Claimed => {
                if let Some(dead) = expected {
                    tracing::warn!(session = sid, upstream, dead_node = dead, "taking over a node-bound upstream from a stopped node: state inside the old one is lost");
                }
                Ok(Owner::Here)
            }
            OwnerClaim::Held(n) if n == me => Ok(Owner::Here),
            OwnerClaim::Held(n) if n.is_empty() => Box::pin(self.claim(sid, upstream, None)).await,
            OwnerClaim::Held(n) => Ok(Owner::Node(n)),
            OwnerClaim::Missing => Err(RpcError::new(
                codes::INVALID_REQUEST,
                "the session has ended",
            )),
        }
    }
}

#[async_trait]
impl Placement for NodePlacement {
    async fn owner(&self, session: &dyn SessionHandle, upstream: &str) -> Result<Owner, RpcError> {
        let sid = session.session_id();
        match session.owner(upstream) {
            None => self.claim(sid, upstream, None).await,
            Some(n) if n == self.app.node_id() => Ok(Owner::Here),
            Some(n) => {
                if self
                    .app
                    .store
                    .is_alive(&n)
                    .await
                    .map_err(Self::store_error)?
                {
                    Ok(Owner::Node(n))
                } else {
                    self.claim(sid, upstream, Some(&n)).await
                }
            }
        }
    }

    async fn take(&self, session: &dyn SessionHandle, upstream: &str) -> Result<Owner, RpcError> {
        let sid = session.session_id();
        let me = self.app.node_id();
        let expected = session.owner(upstream);
        if expected.as_deref() == Some(me) {
            return Ok(Owner::Here);
        }
        let claim = self
            .app
            .store
            .claim_owner(sid, upstream, expected.as_deref())
            .await
            .map_err(Self::store_error)?;
        match claim {
            OwnerClaim::Claimed => Ok(Owner::Here),
            OwnerClaim::Held(n) if n == me => Ok(Owner::Here),
            OwnerClaim::Held(n) if n.is_empty() => self.claim(sid, upstream, None).await,
            OwnerClaim::Held(n) => Ok(Owner::Node(n)),
            OwnerClaim::Missing => Err(RpcError::new(
                codes::INVALID_REQUEST,
                "the session has ended",
            )),
        }
    }

    async fn forward_notify(
        &self,
        session: &dyn SessionHandle,
        upstream: &str,
        method: &str,
        params: Value,
    ) -> bool {
        let Some(owner) = session.owner(upstream).filter(|o| o != self.app.node_id()) else {
            return false;
        };
        let msg = BusMessage::ForwardNotify {
            sid: session.session_id().to_owned(),
            upstream: upstream.to_owned(),
            method: method.to_owned(),
            params: params.to_string(),
        };
        if let Err(e) = self.app.store.send_to(&owner, &msg).await {
            tracing::warn!(error = %e, upstream, "could not forward a client notification to its owner node");
        }
        true
    }

    async fn forward(
        &self,
        node: &str,
        upstream: &str,
        method: &str,
        params: Value,
        ctx: &RequestContext,
    ) -> Result<Value, RpcError> {
        let app = &self.app;
        let (call, done) = app.forwards.start(ctx.peer.clone());
        let msg = BusMessage::Forward {
            call: call.clone(),
            origin: app.node_id().to_owned(),
            sid: ctx.session_id.clone(),
            upstream: upstream.to_owned(),
            request: json!({"method": method, "params": params}).to_string(),
            context: json!({"revision": ctx.revision.as_str(), "capabilities": ctx.client_capabilities, "progress_token": ctx.progress_token}).to_string(),
        };
        let outcome = self
            .await_outcome(node, upstream, &call, msg, done, ctx)
            .await;
        app.forwards.finish(&call);
        outcome
    }
}

impl NodePlacement {
    async fn await_outcome(
        &self,
        node: &str,
        upstream: &str,
        call: &str,
        msg: BusMessage,
        done: tokio::sync::oneshot::Receiver<String>,
        ctx: &RequestContext,
    ) -> Result<Value, RpcError> {
        let unavailable = |why: String| {
            RpcError::new(
                codes::UPSTREAM_UNAVAILABLE,
                format!("upstream `{upstream}` is unavailable: {why}"),
            )
        };
        match crate::forward::await_outcome(&self.app, node, call, msg, done, &ctx.cancel).await {
            Awaited::Done(text) => decode_outcome(&text),
            Awaited::Cancelled => Err(RpcError::new(codes::REQUEST_ABORTED, "request cancelled")),
            Awaited::Unavailable(why) => Err(unavailable(why)),
        }
    }
}
