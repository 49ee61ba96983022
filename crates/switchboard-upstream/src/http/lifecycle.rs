//! The upstream session's lifecycle: initialize it for a client session on first use, again
//! after the upstream forgot it (404), and the start-up probe.
//!
//! Source: MCP 2025-11-25, basic/lifecycle (Initialization: `initialize`, then
//! `notifications/initialized`; Version Negotiation) and basic/transports (Session Management:
//! the server MAY assign `Mcp-Session-Id` on the `InitializeResult`; after a 404 the client MUST
//! start a new session with a fresh `initialize`).

use serde_json::Value;
use switchboard_protocol::{codes, Revision};

use super::call::Call;
use super::common::{
    client_initialize_params, message, next_request_id, outcome, probe_initialize_params,
    unavailable,
};
use super::session::UpstreamSession;
use super::wire::WireError;
use super::HttpUpstream;
use crate::upstream::{RequestContext, RpcError, SessionHandle};

impl HttpUpstream {
    /// The upstream session of the request's client session, initializing it on first use.
    pub(super) async fn session_for(
        &self,
        ctx: &RequestContext,
    ) -> Result<UpstreamSession, RpcError> {
        let sid = ctx.session.session_id();
        if let Some(stored) = self.stored(&*ctx.session) {
            self.known.put(sid, stored.clone());
            return Ok(stored);
        }
        let lock = self.known.lock_for(sid);
        let _one_at_a_time = lock.lock().await;
        // A concurrent first request on this node may have initialized it meanwhile.
        if let Some(known) = self.known.get(sid) {
            return Ok(known);
        }
        self.start_session(ctx).await
    }

    /// A new upstream session after `failed` was answered with 404, unless a concurrent request
    /// on this node already made one.
    pub(super) async fn reinitialize(
        &self,
        ctx: &RequestContext,
        failed: &UpstreamSession,
    ) -> Result<UpstreamSession, RpcError> {
        let sid = ctx.session.session_id();
        let lock = self.known.lock_for(sid);
        let _one_at_a_time = lock.lock().await;
        if let Some(known) = self.known.get(sid).filter(|k| k != failed) {
            return Ok(known);
        }
        self.start_session(ctx).await
    }

    /// This upstream's session as stored in the client's session record.
    pub(super) fn stored(&self, session: &dyn SessionHandle) -> Option<UpstreamSession> {
        let raw = session.upstream_session(&self.name)?;
        let decoded = UpstreamSession::decode(&raw);
        if decoded.is_none() {
            tracing::warn!(upstream = %self.name, session = session.session_id(), stored = raw,
                "unreadable upstream session in the session record; initializing a new one");
        }
        decoded
    }

    /// Initializes an upstream session with the client's stored `initialize` params and records
    /// it in the session record and in this process.
    async fn start_session(&self, ctx: &RequestContext) -> Result<UpstreamSession, RpcError> {
        let sid = ctx.session.session_id();
        let params = client_initialize_params(ctx.session.initialize_params(), ctx.revision);
        let (session, result) = self.handshake(&params).await.map_err(|e| match e {
            WireError::Rpc(e) => unavailable(
                &self.name,
                format!("it refused initialize: {} ({})", e.message, e.code),
            ),
            other => self.error(other),
        })?;
        self.facts.learn(&result, false);
        if let Err(e) = ctx
            .session
            .set_upstream_session(&self.name, Some(session.encode()))
            .await
        {
            if session.id.is_some() {
                let _ = self.wire.delete(&session).await;
            }
            return Err(RpcError::new(
                codes::INTERNAL_ERROR,
                format!(
                    "could not record the session of upstream `{}`: {e}",
                    self.name
                ),
            ));
        }
        self.known.put(sid, session.clone());
        tracing::info!(upstream = %self.name, session = sid, upstream_session = session.id.as_deref().unwrap_or("(none)"),
            revision = %session.revision, "initialized the upstream session");
        Ok(session)
    }

    /// `initialize` with `params`, then `notifications/initialized`. Returns the new session
    /// (the `Mcp-Session-Id` the answer carried, if any, and the negotiated revision) and the
    /// `InitializeResult`.
    pub(super) async fn handshake(
        &self,
        params: &Value,
    ) -> Result<(UpstreamSession, Value), WireError> {
        let id = next_request_id();
        let request = message(Some(&id), "initialize", params);
        let call = Call {
            wire: &self.wire,
            name: &self.name,
            session: None,
            peer: None,
        };
        let (response, session_id) = call.run(&request, &id).await?;
        let result = outcome(response).map_err(WireError::Rpc)?;
        let revision = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                WireError::Failed("its initialize result has no protocolVersion".into())
            })?
            .to_owned();
        if Revision::parse(&revision).is_none() {
            tracing::warn!(upstream = %self.name, revision, "the upstream negotiated a revision switchboard does not know; passing messages through as they are");
        }
        let session = UpstreamSession {
            id: session_id,
            revision,
        };
        let initialized = message(None, "notifications/initialized", &Value::Null);
        self.wire.post(&initialized, Some(&session)).await?;
        Ok((session, result))
    }

    /// The start-up probe: `initialize` with a neutral identity, record what the server says
    /// about itself, DELETE the probe's session.
    pub(super) async fn probe(&self) {
        let attempt =
            tokio::time::timeout(self.timeout, self.handshake(&probe_initialize_params())).await;
        let (session, result) = match attempt {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => {
                tracing::warn!(upstream = %self.name, url = self.url(), error = %self.error(e).message,
                    "could not probe the upstream; default capabilities until a client session initializes it");
                return;
            }
            Err(_) => {
                tracing::warn!(upstream = %self.name, url = self.url(), timeout_ms = self.timeout.as_millis() as u64,
                    "probing the upstream timed out; default capabilities until a client session initializes it");
                return;
            }
        };
        self.facts.learn(&result, true);
        let server = result.get("serverInfo").cloned().unwrap_or(Value::Null);
        tracing::info!(upstream = %self.name, url = self.url(), server = %server,
            revision = %session.revision, "probed the upstream");
        if session.id.is_some() {
            if let Err(e) = self.wire.delete(&session).await {
                tracing::debug!(upstream = %self.name, error = e, "could not delete the probe's session");
            }
        }
    }

    /// Whether the server's capabilities were learned (by the probe or a client session).
    pub fn probed(&self) -> bool {
        self.facts.learned()
    }
}
