//! The upstream session's lifecycle: initialize it for a client session on first use, again
//! after the upstream forgot it (404), giving each new one the client's log level and resource
//! subscriptions again ([`crate::client_state`]), and the start-up probe.
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
    unavailable, with_endpoint,
};
use super::cookies;
use super::session::{binding_name, UpstreamSession};
use super::wire::WireError;
use super::HttpUpstream;
use crate::client_state;
use crate::upstream::{RequestContext, RpcError, SessionHandle};
use switchboard_telemetry::trace::logged_session;

/// A new upstream session as one request got it.
pub(super) struct Initialized {
    /// The upstream session now recorded for the client session.
    pub session: UpstreamSession,
    /// Whether this request recorded it; `false`: another request (on this node or another)
    /// recorded one first and this request uses that. Only the winner takes the upstream's GET
    /// stream of it.
    pub won: bool,
}

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
        let expected = ctx.session.upstream_session(&self.name);
        Ok(self.start_session(ctx, expected).await?.session)
    }

    /// A new upstream session after `failed` was answered with 404, unless a concurrent request
    /// on this node already made one.
    pub(super) async fn reinitialize(
        &self,
        ctx: &RequestContext,
        failed: &UpstreamSession,
    ) -> Result<Initialized, RpcError> {
        let sid = ctx.session.session_id();
        let lock = self.known.lock_for(sid);
        let _one_at_a_time = lock.lock().await;
        if let Some(known) = self.known.get(sid).filter(|k| !k.same(failed)) {
            return Ok(Initialized {
                session: known,
                won: false,
            });
        }
        self.start_session(ctx, Some(failed.encode())).await
    }

    /// This upstream's session as stored in the client's session record, with its binding.
    pub(super) fn stored(&self, session: &dyn SessionHandle) -> Option<UpstreamSession> {
        let raw = session.upstream_session(&self.name)?;
        let decoded = UpstreamSession::decode(&raw);
        if decoded.is_none() {
            tracing::warn!(upstream = %self.name, session = %logged_session(session.session_id()), stored = raw,
                "unreadable upstream session in the session record; initializing a new one");
        }
        let binding = session.upstream_session(&binding_name(&self.name));
        decoded.map(|s| s.with_binding(binding.as_deref()))
    }

    /// Initializes an upstream session with the client's stored `initialize` params and records
    /// it in the session record (only while the record still holds `expected`: the value this
    /// request found, `None` for none) and in this process. When another node recorded one
    /// first, ours is deleted and theirs is used: one client session never has two upstream
    /// sessions in use at once (which would split its state).
    pub(super) async fn start_session(
        &self,
        ctx: &RequestContext,
        expected: Option<String>,
    ) -> Result<Initialized, RpcError> {
        let sid = ctx.session.session_id();
        let params = client_initialize_params(ctx.session.initialize_params(), ctx.revision);
        let (session, result) = self.handshake(&params).await.map_err(|e| match e {
            WireError::Rpc { at, error, .. } => with_endpoint(
                unavailable(
                    &self.name,
                    format!(
                        "it refused initialize at {}: {} ({})",
                        at.endpoint, error.message, error.code
                    ),
                ),
                &at.endpoint,
            ),
            other => self.error(other),
        })?;
        self.facts.learn(&result, false);
        self.restore(ctx, &session, &result).await;
        // The session and its binding in one write: a node that sees one sees the other (a
        // stale binding of an earlier session is removed with it).
        let entries = vec![
            (self.name.clone(), Some(session.encode())),
            (binding_name(&self.name), session.encode_binding()),
        ];
        let recorded = ctx
            .session
            .swap_upstream_sessions(&self.name, expected.as_deref(), entries)
            .await;
        if !matches!(recorded, Ok(true)) && session.id.is_some() {
            let _ = self.wire.delete(&session).await;
        }
        match recorded {
            Ok(true) => {}
            Ok(false) => {
                return self.adopt(ctx).map(|session| Initialized {
                    session,
                    won: false,
                })
            }
            Err(e) => {
                return Err(RpcError::new(
                    codes::INTERNAL_ERROR,
                    format!(
                        "could not record the session of upstream `{}`: {e}",
                        self.name
                    ),
                ))
            }
        }
        self.known.put(sid, session.clone());
        let revisions = &self.facts.revisions;
        revisions.negotiated(&self.name, sid, ctx.revision, &session.revision);
        tracing::info!(upstream = %self.name, session = %logged_session(sid), upstream_session = %session.id.as_deref().map_or("(none)".to_owned(), logged_session),
            revision = %session.revision, endpoint = ?session.endpoint, "initialized the upstream session");
        Ok(Initialized { session, won: true })
    }

    /// Sends the new upstream `session` what the client had asked this upstream's earlier
    /// sessions for (log level, resource subscriptions; [`client_state`]), before it is recorded:
    /// no request of the client's reaches it first, on any node.
    async fn restore(&self, ctx: &RequestContext, session: &UpstreamSession, result: &Value) {
        let capabilities = result.get("capabilities").cloned().unwrap_or_default();
        let send = |method: &'static str, params: Value| async move {
            match self.exchange(method, &params, session, ctx).await {
                Ok(response) => outcome(response),
                Err(e) => Err(self.error(e)),
            }
        };
        client_state::restore(&self.name, &capabilities, &*ctx.session, &ctx.peer, send).await;
    }

    /// The upstream session another node recorded while this one initialized its own.
    fn adopt(&self, ctx: &RequestContext) -> Result<UpstreamSession, RpcError> {
        let sid = ctx.session.session_id();
        let Some(theirs) = self.stored(&*ctx.session) else {
            return Err(RpcError::new(
                codes::INTERNAL_ERROR,
                format!(
                    "the session of upstream `{}` changed on another node at the same moment; \
                     send the request again",
                    self.name
                ),
            ));
        };
        tracing::info!(upstream = %self.name, session = %logged_session(sid), upstream_session = %theirs.id.as_deref().map_or("(none)".to_owned(), logged_session),
            "another node initialized the upstream session first; using its (ours was deleted)");
        self.known.put(sid, theirs.clone());
        Ok(theirs)
    }

    /// `initialize` with `params`, then `notifications/initialized`, both at one endpoint (a
    /// stateful upstream's pin: the next endpoint in turn, or the one after it when that one
    /// cannot be reached, see [`super::wire::Wire`]) and with the cookies the `initialize`
    /// answer set. Returns the new session (the `Mcp-Session-Id` the answer carried, if any, the
    /// negotiated revision and the binding) and the `InitializeResult`.
    pub(super) async fn handshake(
        &self,
        params: &Value,
    ) -> Result<(UpstreamSession, Value), WireError> {
        let stateful = !self.replication.stateless;
        let target = UpstreamSession::before_initialize(None);
        let id = next_request_id();
        let request = message(Some(&id), "initialize", params);
        let call = Call {
            wire: &self.wire,
            name: &self.name,
            session: Some(&target),
            peer: None,
        };
        let answered = call.run("initialize", &request, &id).await?;
        let init_at = answered.at.endpoint.clone();
        let result = outcome(answered.response).map_err(|error| WireError::Rpc {
            at: answered.at.clone(),
            status: reqwest::StatusCode::OK,
            error,
        })?;
        let revision = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                WireError::failed(
                    &answered.at,
                    "answered an initialize result without protocolVersion",
                )
            })?
            .to_owned();
        if Revision::parse(&revision).is_none() {
            tracing::warn!(upstream = %self.name, revision, "the upstream negotiated a revision switchboard does not know; passing messages through as they are");
        }
        let mut session = UpstreamSession::new(answered.session_id, revision);
        if stateful {
            session.endpoint = answered.endpoint;
            let set = answered.set_cookies.iter().map(String::as_str);
            let merged = cookies::merge(None, set, self.replication.max_cookie_bytes, &self.name);
            if !merged.dropped.is_empty() {
                self.cookies_not_kept(&session, &merged.dropped);
            }
            session.cookies = merged.jar.flatten();
        }
        let initialized = message(None, "notifications/initialized", &Value::Null);
        match self
            .wire
            .post("notifications/initialized", &initialized, Some(&session))
            .await
        {
            Ok(_) => Ok((session, result)),
            Err(WireError::Gone { at, status, .. }) => Err(WireError::Failed {
                why: self.split_handshake(&init_at, &at.endpoint, status),
                at: Some(at),
            }),
            Err(e) => Err(e),
        }
    }

    /// The error text for a `notifications/initialized` refused right after `initialize` made
    /// the session: the replicas share no sessions and the two requests reached different ones.
    /// What to do depends on `stateless`: when it is set, it is what is wrong.
    fn split_handshake(&self, init_at: &str, at: &str, status: reqwest::StatusCode) -> String {
        let same = if init_at == at {
            format!("the same address as `initialize`, {init_at}, so something in front of it (a balancer) sent the two to different replicas")
        } else {
            format!("`initialize` was answered at {init_at}")
        };
        let pin = "give the balancer cookie affinity (switchboard keeps the cookies it sets per \
                   upstream session), or use a name that resolves to every replica (a headless \
                   Service)";
        let advice = if self.replication.stateless {
            format!(
                "The upstream is declared `stateless = true`, but replicas that do not share \
                 sessions make it stateful: remove `stateless = true` and pin each session to \
                 one replica: {pin}"
            )
        } else {
            format!(
                "Pin each session to one replica: {pin}, or set `stateless = true` if the \
                 upstream keeps nothing per session"
            )
        };
        format!(
            "`notifications/initialized` answered HTTP {} at {at} for the session `initialize` had \
             just created ({same}); the upstream's replicas do not share sessions. {advice}",
            status.as_u16()
        )
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
