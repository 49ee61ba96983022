//! A client session's upstream session is **lost**: the upstream answered 404 to its session id
//! (MCP 2025-11-25, basic/transports, Session Management item 3: the session is terminated and
//! the request was not processed), or the TypeScript SDK's 400 "No valid session ID" (see
//! [`super::wire::Wire::post`]), or the endpoint it is pinned to refuses connections and the
//! URL's host no longer resolves to it (the replica is gone). A pinned endpoint that still
//! resolves but cannot be reached is not a loss: the request fails with the usual -32006 naming
//! it, and the session is kept for when it comes back.
//!
//! **A 404 is confirmed when it may not be the server's.** MCP servers answer an unknown session
//! id with a JSON-RPC error body; that 404 (or 400) means lost at once. One without a JSON-RPC
//! error (`404 page not found` as text: an ingress or proxy in front of the upstream that has no
//! route for a moment, during a rollout or a reconfiguration) is sent again once after
//! [`CONFIRM_AFTER`] (250 ms): re-sending is safe, a 404 means the request was not processed.
//! Only when the second answer says the session is gone too is it lost; otherwise the request
//! goes on in the same upstream session. A blip longer than that is taken for a loss. The GET
//! listener confirms the same way before it stops.
//!
//! A stateful upstream never carries on silently in a new upstream session, which would split
//! the session's state over two replicas (case C02). `on_upstream_loss` decides:
//! - `reinitialize` (default): a new upstream session is initialized (on a live endpoint) and
//!   its GET stream opened, and the request in flight ends with -32006 saying the upstream's
//!   state for this session was lost, where, that the request was not run and that the next
//!   request runs in a new upstream session; `data`: `upstream`, `endpoint` (where it was lost),
//!   `reason: "upstream_session_lost"`. When initializing fails too, the stored session is
//!   forgotten so the next request initializes one; the client session id never changes.
//! - `end_session`: the client session ends cluster-wide ([`SessionHandle::end_session`], the
//!   same path as DELETE) and the request in flight gets -32006 saying so (`data` also has
//!   `session_ended: true`); the node ends the session before that answer can reach the client,
//!   so every node answers 404 to the requests the client sends after reading it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchboard_protocol::codes;

use super::session::{binding_name, UpstreamSession};
use super::wire::WireError;
use super::HttpUpstream;
use crate::config::OnUpstreamLoss;
use crate::upstream::{RequestContext, RpcError, SessionHandle};
use switchboard_telemetry::trace::logged_session;

/// The `data.reason` of the error a lost upstream session gives.
pub(crate) const REASON: &str = "upstream_session_lost";

/// How long after a 404 (or 400) without a JSON-RPC error body the request is sent once more,
/// to tell a moment without a route in front of the upstream from a lost session.
pub(crate) const CONFIRM_AFTER: Duration = Duration::from_millis(250);

/// How an upstream session was lost.
#[derive(Debug)]
pub(crate) struct Lost {
    /// Where: the endpoint that answered, or the pinned address that is gone.
    pub endpoint: String,
    /// What happened, e.g. "`tools/call` at 127.0.0.2:8080 answered HTTP 404 to the upstream
    /// session id".
    pub cause: String,
}

impl HttpUpstream {
    /// `Ok` when `failure` is a "session gone" answer without a JSON-RPC error (maybe not the
    /// server's): [`CONFIRM_AFTER`] has passed and the request should be sent once more.
    /// Otherwise `failure` back as it was.
    pub(super) async fn confirm_gone(&self, failure: WireError) -> Result<(), WireError> {
        if !matches!(
            failure,
            WireError::Gone {
                json_rpc: false,
                ..
            }
        ) {
            return Err(failure);
        }
        tracing::info!(upstream = %self.name, error = %failure.describe(), wait_ms = CONFIRM_AFTER.as_millis() as u64,
            "a 'session gone' answer without a JSON-RPC error (maybe from something in front of the upstream); sending the request again before taking the session for lost");
        tokio::time::sleep(CONFIRM_AFTER).await;
        Ok(())
    }

    /// Whether `failure` means `session` is lost.
    pub(super) async fn lost(
        &self,
        failure: &WireError,
        session: &UpstreamSession,
    ) -> Option<Lost> {
        match failure {
            WireError::Gone { at, .. } => Some(Lost {
                endpoint: at.endpoint.clone(),
                cause: failure.describe(),
            }),
            WireError::Unreachable {
                pinned: Some(addr),
                why,
                ..
            } if session.endpoint == Some(*addr) => {
                if !self.wire.endpoint_gone(*addr).await {
                    return None;
                }
                let host = self.wire.url().host_str().unwrap_or_default().to_owned();
                Some(Lost {
                    endpoint: addr.to_string(),
                    cause: format!(
                        "its endpoint {addr} refuses connections ({why}) and `{host}` no longer \
                         resolves to it"
                    ),
                })
            }
            _ => None,
        }
    }

    /// Applies `on_upstream_loss` to the lost `failed` session; the error for the request in
    /// flight.
    pub(super) async fn on_loss(
        &self,
        ctx: &RequestContext,
        failed: &UpstreamSession,
        lost: Lost,
    ) -> RpcError {
        let sid = ctx.session.session_id();
        tracing::warn!(upstream = %self.name, session = %logged_session(sid), cause = %lost.cause,
            policy = self.replication.on_loss.as_str(), "the upstream lost this session's state");
        let what = format!(
            "upstream `{}` lost this session's state: {}; the request was not run",
            self.name, lost.cause
        );
        match self.replication.on_loss {
            OnUpstreamLoss::Reinitialize => match self.reinitialize(ctx, failed).await {
                Ok(fresh) => {
                    self.listen_after_reinitialize(&ctx.session, &fresh).await;
                    let at = fresh
                        .session
                        .endpoint
                        .map(|e| format!(" (at {e})"))
                        .unwrap_or_default();
                    lost_error(
                        &self.name,
                        &lost,
                        format!("{what}; the next request runs in a new upstream session{at}"),
                        false,
                    )
                }
                Err(e) => {
                    self.forget(&ctx.session, failed).await;
                    lost_error(
                        &self.name,
                        &lost,
                        format!(
                            "{what}; initializing a new upstream session failed too ({}); the \
                             next request tries again",
                            e.message
                        ),
                        false,
                    )
                }
            },
            OnUpstreamLoss::EndSession => {
                let reason = format!("upstream `{}`: {}", self.name, lost.cause);
                match ctx.session.end_session(&reason).await {
                    Ok(()) => lost_error(
                        &self.name,
                        &lost,
                        format!(
                            "{what}; the client session has ended (on_upstream_loss = \
                             \"end_session\"): initialize a new session"
                        ),
                        true,
                    ),
                    Err(e) => {
                        self.forget(&ctx.session, failed).await;
                        lost_error(
                            &self.name,
                            &lost,
                            format!(
                                "{what}; ending the client session failed ({e}), so the next \
                                 request runs in a new upstream session"
                            ),
                            false,
                        )
                    }
                }
            }
        }
    }

    /// Forgets the stored upstream session `failed` and its binding (unless another node has
    /// replaced it already), so the next request initializes a new one.
    async fn forget(&self, session: &Arc<dyn SessionHandle>, failed: &UpstreamSession) {
        let entries = vec![(self.name.clone(), None), (binding_name(&self.name), None)];
        let expected = failed.encode();
        if let Err(e) = session
            .swap_upstream_sessions(&self.name, Some(&expected), entries)
            .await
        {
            tracing::warn!(upstream = %self.name, session = %logged_session(session.session_id()), error = e,
                "could not forget the lost upstream session");
        }
        self.known.remove(session.session_id());
    }
}

/// -32006 with `message`, `data.upstream`, `data.endpoint`, `data.reason` and, when the client
/// session ended, `data.session_ended`.
fn lost_error(name: &str, lost: &Lost, message: String, ended: bool) -> RpcError {
    let mut data = json!({"upstream": name, "endpoint": lost.endpoint, "reason": REASON});
    if ended {
        data["session_ended"] = json!(true);
    }
    RpcError {
        code: codes::UPSTREAM_UNAVAILABLE,
        message,
        data: Some(data),
    }
}
