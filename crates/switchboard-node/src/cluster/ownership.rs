//! The node's [`Placement`] service: who owns a session's node-bound upstream resource (a
//! compare-and-set in the session record, [`switchboard_store::SessionStore::claim_owner`]),
//! taking it over from a node that stopped, and running a request on the owner over the bus
//! (`crate::cluster::forward::origin`): the owner's outcome, "moved" when it is stopping, or lost when its
//! heartbeat lapsed first (see [`switchboard_upstream::placement`] for what the caller does).

use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use switchboard_protocol::codes;
use switchboard_store::{
    BusMessage, ForwardContext, ForwardNotification, ForwardRequest, OwnerClaim,
};
use switchboard_upstream::placement::{Forwarded, Owner, Placement};
use switchboard_upstream::{RequestContext, RpcError, SessionHandle};

use crate::cluster::forward::origin::{await_outcome, decode_forwarded, Awaited};
use crate::state::App;
use switchboard_telemetry::trace::logged_session;

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

    /// Claims ownership expecting `expected` (the owner the caller saw; `None`: nobody); follows
    /// one change of owner. `takeover`: `expected` stopped or is stopping, and a successful
    /// claim is logged as a takeover (state inside the old resource is lost).
    async fn claim(
        &self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
        takeover: bool,
    ) -> Result<Owner, RpcError> {
        let me = self.app.node_id();
        self.app.owner_claims.fetch_add(1, Ordering::SeqCst);
        match self
            .app
            .store
            .claim_owner(sid, upstream, expected)
            .await
            .map_err(Self::store_error)?
        {
            OwnerClaim::Claimed => {
                if let Some(from) = expected.filter(|_| takeover) {
                    tracing::warn!(session = %logged_session(sid), upstream, from_node = from, "taking over a node-bound upstream from a node that stopped or is stopping: state inside the old one is lost");
                }
                Ok(Owner::Here)
            }
            OwnerClaim::Held(n) if n == me => Ok(Owner::Here),
            OwnerClaim::Held(n) if n.is_empty() => {
                Box::pin(self.claim(sid, upstream, None, false)).await
            }
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
            None => self.claim(sid, upstream, None, false).await,
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
                    self.claim(sid, upstream, Some(&n), true).await
                }
            }
        }
    }

    /// Always a compare-and-set in the store, expecting the owner the record named when it was
    /// loaded, even when that is this node: another node may have claimed it since, and then
    /// this node must not act as the owner on its stale view.
    async fn take(&self, session: &dyn SessionHandle, upstream: &str) -> Result<Owner, RpcError> {
        let recorded = session.owner(upstream);
        self.claim(session.session_id(), upstream, recorded.as_deref(), false)
            .await
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
        let msg = BusMessage::ForwardNotify(ForwardNotification {
            sid: session.session_id().to_owned(),
            upstream: upstream.to_owned(),
            method: method.to_owned(),
            params,
        });
        if let Err(e) = self.app.store.send_to(&owner, &msg).await {
            tracing::warn!(error = %e, upstream, "could not forward a client notification to its owner node");
        }
        true
    }

    async fn take_over(
        &self,
        session: &dyn SessionHandle,
        upstream: &str,
        from: &str,
    ) -> Result<Owner, RpcError> {
        self.claim(session.session_id(), upstream, Some(from), true)
            .await
    }

    async fn forward(
        &self,
        node: &str,
        upstream: &str,
        method: &str,
        params: &Value,
        ctx: &RequestContext,
        wait: Duration,
    ) -> Forwarded {
        let app = &self.app;
        let (call, done) = app.forwards.start(ctx.peer.clone());
        let msg = BusMessage::Forward(Box::new(ForwardRequest {
            call: call.clone(),
            origin: app.node_id().to_owned(),
            sid: ctx.session_id.clone(),
            upstream: upstream.to_owned(),
            method: method.to_owned(),
            params: params.clone(),
            context: ForwardContext {
                revision: ctx.revision.as_str().to_owned(),
                capabilities: (*ctx.client_capabilities).clone(),
                progress_token: ctx.progress_token.clone(),
                no_requests: ctx.peer.refuses_requests(),
            },
            trace: switchboard_telemetry::trace::current(),
        }));
        let deadline = tokio::time::Instant::now() + wait;
        let awaited = await_outcome(app, node, &call, msg, done, &ctx.cancel, Some(deadline)).await;
        app.forwards.finish(&call);
        let unavailable = |why: String| {
            RpcError::new(
                codes::UPSTREAM_UNAVAILABLE,
                format!("upstream `{upstream}` is unavailable: {why}"),
            )
        };
        match awaited {
            Awaited::Done(outcome) => decode_forwarded(&outcome),
            Awaited::Cancelled => Forwarded::Answered(Err(RpcError::new(
                codes::REQUEST_ABORTED,
                "request cancelled",
            ))),
            Awaited::NotSent(why) => Forwarded::Answered(Err(unavailable(why))),
            Awaited::OwnerStopped(why) => Forwarded::Lost(unavailable(format!(
                "{why} before answering this request; the next request starts it again on a live node"
            ))),
            Awaited::TimedOut => Forwarded::TimedOut,
        }
    }
}
