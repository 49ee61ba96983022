//! The Streamable HTTP upstream: one MCP server reached over Streamable HTTP (MCP 2025-03-26 …
//! 2025-11-25, basic/transports), stateful or stateless (a server that mints no
//! `Mcp-Session-Id`).
//!
//! Submodules:
//! - `wire`: the HTTP exchanges (POST, resuming GET, DELETE), where they connect and their
//!   headers (`static_headers`: the configured ones); `exchange`: why one failed, naming the
//!   message and the endpoint.
//! - `call`: one request's conversation (JSON or SSE answer, notifications, server-to-client
//!   requests, resumption).
//! - `lifecycle`: initializing an upstream session for a client session, re-initializing it on
//!   404, the start-up probe.
//! - `lease` and `listen`: the upstream's own GET stream of each client session, held by exactly
//!   one node through a lease and resumed with `Last-Event-ID` when the lease moves.
//! - `session`: the stored form of the upstream session (and its binding) and the node-local
//!   memory of it.
//! - `endpoints`: the addresses a replicated upstream's host resolves to, one pool each.
//! - `cookies`: the cookies an upstream sets per upstream session (balancer affinity).
//! - `loss`: what happens when a client session's upstream session is gone.
//! - `events`: reading SSE bodies (sse-stream behind a bounding line adapter; also used by
//!   [`crate::sse`]).
//! - `common`: what both network upstreams share (client, ids, errors, facts).

mod backoff;
mod call;
pub(crate) mod common;
pub(crate) mod cookies;
pub mod endpoints;
pub(crate) mod events;
mod exchange;
mod lease;
mod lifecycle;
mod listen;
mod loss;
pub mod modern;
mod session;
mod static_headers;
pub(crate) mod wire;

#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use self::call::Call;
use self::common::{
    bounded, cancelled_notification, message, next_request_id, outcome, CancelGuard, Facts,
};
use self::endpoints::Resolution;
pub(crate) use self::loss::REASON as LOST_SESSION_REASON;
use self::session::{binding_name, Known, UpstreamSession};
use self::wire::{exchange_error, Wire, WireError};
use crate::config::{parse_nameserver, OnUpstreamLoss};
use crate::status::{EndpointStatus, State, UpstreamStatus};
use crate::upstream::{RequestContext, RpcError, SessionHandle, Upstream};

/// How a Streamable HTTP upstream's sessions relate to its replicas: the settings
/// `stateless`, `on_upstream_loss`, `resolve_interval_ms`, `nameservers`, `max_endpoints` and
/// `max_cookie_bytes` of its `[[upstreams]]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replication {
    /// Nothing is kept per upstream session: requests spread freely, no pin, no cookie binding,
    /// and a forgotten session is re-initialized with the request retried once.
    pub stateless: bool,
    /// What happens when a (stateful) upstream session is lost.
    pub on_loss: OnUpstreamLoss,
    /// How the URL's host is resolved to endpoints.
    pub resolution: Resolution,
    /// At most this many bytes of cookies kept per upstream session.
    pub max_cookie_bytes: usize,
}

impl Default for Replication {
    fn default() -> Self {
        Replication {
            stateless: false,
            on_loss: OnUpstreamLoss::default(),
            resolution: Resolution::default(),
            max_cookie_bytes: cookies::DEFAULT_MAX_COOKIE_BYTES,
        }
    }
}

/// A Streamable HTTP MCP server behind the cluster.
///
/// **One upstream session per client session, kept in the client's session record.** On the
/// first request of a client session this upstream POSTs `initialize` with the client's own
/// stored `initialize` params (its capabilities, clientInfo and protocolVersion, so the upstream
/// sees the real client), then `notifications/initialized`, and records
/// `"<upstream Mcp-Session-Id>|<negotiated revision>"` with
/// [`SessionHandle::set_upstream_session`] (empty id for a server that mints none), so any node
/// continues the session. Later requests carry `Mcp-Session-Id` and `MCP-Protocol-Version: <the
/// revision the upstream negotiated>` (MCP 2025-11-25, basic/transports, Session Management and
/// Protocol Version Header).
///
/// **Replicas** ([`Replication`]): when the URL's host resolves to several endpoints (a
/// headless Service, several A records), a new upstream session is initialized on one of them
/// and every request of it (`initialize`, `notifications/initialized`, calls, the GET stream,
/// DELETE) connects to exactly that address; the binding is stored beside the session
/// (`"<name>#pin"`, see `session`) so every node honours it. Behind a balancer (one address,
/// several backends) the cookies the upstream sets are kept per upstream session and sent back,
/// which is what balancers' cookie affinity needs. When the upstream session is **lost** (404 to
/// it, the TypeScript SDK's 400 "No valid session ID", or its endpoint refuses connections and
/// no longer resolves), `on_upstream_loss` decides: re-initialize on a live endpoint and fail
/// the request in flight with an error saying the state was lost, or end the client session.
/// One session's state is never split silently over two replicas. A `stateless` upstream keeps
/// nothing per session: its requests spread freely and a lost session is initialized again from
/// the stored params with the failed request retried once, transparently.
///
/// **Requests** are POSTed with our own ids (`"sb-<process tag>-<n>"`, never the client's, so
/// concurrent clients cannot collide: case C22) and `Accept: application/json,
/// text/event-stream`. On an event-stream answer, notifications go to the client through
/// [`crate::ClientPeer::notify`] and server-to-client requests through
/// [`crate::ClientPeer::request`]; the
/// client's answer is POSTed back with the upstream's original id (a JSON-RPC error when the
/// client cannot answer). Progress tokens pass through unchanged. A stream that breaks after
/// events with ids is resumed with `Last-Event-ID` (up to 3 times in a row, waiting the
/// upstream's `retry`, at most 5 s).
///
/// **Errors:** no answer within the configured timeout → -32005 naming the upstream; an
/// unreachable or failing upstream → -32006 `upstream `NAME` is unavailable: <reason>`; a 401 or
/// 403 → -32006 naming the refused credentials, with the status and `WWW-Authenticate` in its
/// data (case C33). When the client cancels (or the timeout passes) the upstream is sent
/// `notifications/cancelled` with our request id and the call ends with -32004 at once.
///
/// **Headers:** the configured static headers go on every request; the client's own
/// `Authorization` header never reaches this type, so it is never forwarded (no token
/// passthrough: MCP 2025-06-18, basic/security_best_practices).
///
/// **The upstream's own GET stream** (MCP 2025-11-25, basic/transports, Listening for Messages
/// from the Server): for each client session with a stateful upstream session, exactly one node
/// holds it open, the holder of the lease `"<name>#get"`
/// ([`crate::placement::Placement::owner`]). A request checks the lease at most once per 5 s
/// per client session on each node (never while the record names this node's running listener)
/// and the holder starts a listener: GET with `Mcp-Session-Id`, `MCP-Protocol-Version` and the
/// stored `Last-Event-ID`. Its notifications go to the client's standalone GET stream
/// ([`crate::SessionHandle::standalone_peer`]) in order; its server-to-client requests are asked
/// there and answered upstream with the upstream's own id. A stream that ends is reopened
/// (waiting `retry`, or a backoff from 0.5 s, at most 5 s); 405 means the upstream has no GET
/// stream (never tried again by this process); 404 stops the listener until the next request
/// has initialized a new upstream session. The last event id is stored in the session record
/// (`"<name>#get"` = `"<upstream session id> <event id>"`) at most once per second and when the
/// listener stops. **Takeover:** when the holder dies, the next request through any node claims
/// the lease after the holder's heartbeat lapsed and resumes from the last stored event id:
/// events after it (at most about a second's worth) may reach the client twice, and are lost if
/// the upstream does not support resumption. Outside a node (no standalone peer) nothing
/// listens; without placement (one process) the process listens without a lease.
pub struct HttpUpstream {
    name: String,
    wire: Arc<Wire>,
    timeout: Duration,
    facts: Facts,
    known: Known,
    listeners: Arc<lease::Listeners>,
    replication: Replication,
    cookie_warnings: Arc<cookies::Warned>,
}

impl HttpUpstream {
    /// An upstream called `name` at `url`, sending `headers` (name, value) on every request, with
    /// `timeout` for each call and the default [`Replication`]. Errors on an invalid URL or
    /// header, or a header switchboard sets itself (`Accept`, `Content-Type`, `Mcp-Session-Id`,
    /// `MCP-Protocol-Version`, `Last-Event-ID`). A configured `Cookie` is sent with the
    /// cookies the upstream set in the session after it.
    pub fn new<K, V>(
        name: impl Into<String>,
        url: &str,
        headers: impl IntoIterator<Item = (K, V)>,
        timeout: Duration,
    ) -> Result<HttpUpstream, String>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        HttpUpstream::replicated(name, url, headers, timeout, Replication::default())
    }

    /// [`HttpUpstream::new`] with `replication` settings. Errors also naming the upstream when
    /// the resolver of its host cannot be set up.
    pub fn replicated<K, V>(
        name: impl Into<String>,
        url: &str,
        headers: impl IntoIterator<Item = (K, V)>,
        timeout: Duration,
        replication: Replication,
    ) -> Result<HttpUpstream, String>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let name = name.into();
        let wire = Wire::new(url, headers)
            .and_then(|w| w.with_endpoints(replication.resolution.clone()))
            .map_err(|e| format!("upstream `{name}`: {e}"))?;
        Ok(HttpUpstream {
            facts: Facts::new(&name),
            name,
            wire: Arc::new(wire),
            timeout,
            known: Known::default(),
            listeners: Arc::default(),
            replication,
            cookie_warnings: Arc::default(),
        })
    }

    /// The endpoints of the URL's host as this node knows them, for the status API: the last
    /// resolution's addresses, those a request reached since, and those the upstream sessions
    /// this node remembers are pinned to (`resolved: false` when they left the name). Empty for
    /// an IP address.
    pub fn endpoints(&self) -> Vec<EndpointStatus> {
        let Some(endpoints) = self.wire.endpoints() else {
            return Vec::new();
        };
        let pinned = self.known.pinned();
        let mut listed = endpoints.status();
        // An address that left the name while sessions this node remembers are pinned to it.
        for addr in pinned.keys() {
            if !listed.iter().any(|(a, ..)| a == addr) {
                listed.push((*addr, false, endpoints.reached_of(*addr)));
            }
        }
        listed.sort();
        listed
            .into_iter()
            .map(|(addr, resolved, reached)| EndpointStatus {
                address: addr.to_string(),
                state: match reached {
                    None => State::Unknown,
                    Some(true) => State::Up,
                    Some(false) => State::Down,
                },
                resolved,
                sessions: pinned.get(&addr).copied().unwrap_or(0),
            })
            .collect()
    }

    /// An upstream from its `[[upstreams]]` table (`kind = "http"`): `name`, `url`, `headers`,
    /// `max_message_bytes`, the replication settings and `timeout_ms`. Header values are used
    /// as they are: the `build` step expands `${VAR}` before calling this. Errors naming the upstream on another kind, a
    /// missing or invalid URL, or an invalid header.
    pub fn from_config(config: &crate::config::UpstreamConfig) -> Result<HttpUpstream, String> {
        let name = &config.name;
        if config.kind != crate::config::UpstreamKind::Http {
            return Err(format!(
                "upstream `{name}`: kind `{}` is not a Streamable HTTP upstream",
                config.kind.as_str()
            ));
        }
        let url = config
            .url
            .as_deref()
            .ok_or_else(|| format!("upstream `{name}`: kind `http` needs a `url`"))?;
        let nameservers = config
            .nameservers
            .iter()
            .map(|n| parse_nameserver(n).map_err(|e| format!("upstream `{name}`: {e}")))
            .collect::<Result<Vec<_>, String>>()?;
        let defaults = Resolution::default();
        let replication = Replication {
            stateless: config.stateless,
            on_loss: config.on_upstream_loss.unwrap_or_default(),
            resolution: Resolution {
                interval: config
                    .resolve_interval_ms
                    .map(Duration::from_millis)
                    .unwrap_or(defaults.interval),
                nameservers,
                max_endpoints: config.max_endpoints.unwrap_or(defaults.max_endpoints),
            },
            max_cookie_bytes: config
                .max_cookie_bytes
                .unwrap_or(cookies::DEFAULT_MAX_COOKIE_BYTES),
        };
        HttpUpstream::replicated(
            name.clone(),
            url,
            &config.headers,
            Duration::from_millis(config.timeout_ms),
            replication,
        )
        .map(|u| u.with_max_message_bytes(config.message_limit()))
    }

    /// Sets the largest message read from the server, in bytes (default
    /// [`crate::config::DEFAULT_MAX_MESSAGE_BYTES`]).
    pub fn with_max_message_bytes(mut self, bytes: usize) -> HttpUpstream {
        self.wire = Arc::new(self.wire.with_max_message(bytes));
        self
    }

    /// The upstream's URL.
    pub fn url(&self) -> &str {
        self.wire.url().as_str()
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// One request, initializing the upstream session on first use. When the upstream session
    /// is lost, a stateless upstream re-initializes it and retries the request once; a
    /// stateful one applies `on_upstream_loss` (see [`loss`]).
    async fn call(
        &self,
        method: &str,
        params: &Value,
        ctx: &RequestContext,
    ) -> Result<Value, RpcError> {
        let session = self.session_for(ctx).await?;
        self.ensure_listener(&ctx.session, &session).await;
        let failure = match self.exchange(method, params, &session, ctx).await {
            Ok(response) => return outcome(response),
            Err(e) => e,
        };
        let failure = match self.confirm_gone(failure).await {
            Ok(()) => match self.exchange(method, params, &session, ctx).await {
                Ok(response) => return outcome(response),
                Err(e) => e,
            },
            Err(failure) => failure,
        };
        let Some(lost) = self.lost(&failure, &session).await else {
            return Err(self.error(failure));
        };
        if !self.replication.stateless {
            return Err(self.on_loss(ctx, &session, lost).await);
        }
        tracing::info!(upstream = %self.name, session = %crate::logged_session(ctx.session.session_id()), cause = %lost.cause,
            "the upstream lost its session (stateless upstream); initializing it again with the \
             client's stored initialize and retrying the request once");
        let fresh = self.reinitialize(ctx, &session).await?;
        self.listen_after_reinitialize(&ctx.session, &fresh).await;
        match self.exchange(method, params, &fresh.session, ctx).await {
            Ok(response) => outcome(response),
            Err(e @ WireError::Gone { .. }) => Err(exchange_error(
                &self.name,
                WireError::Failed {
                    why: format!(
                        "it lost the session again right after it was initialized: {}",
                        e.describe()
                    ),
                    at: e.at().cloned(),
                },
            )),
            Err(e) => Err(self.error(e)),
        }
    }

    /// POSTs one request in `session` and returns the whole JSON-RPC response. Until the answer
    /// arrives, dropping this future sends `notifications/cancelled` for it. Cookies the answer
    /// sets are kept with the session's binding.
    async fn exchange(
        &self,
        method: &str,
        params: &Value,
        session: &UpstreamSession,
        ctx: &RequestContext,
    ) -> Result<Value, WireError> {
        let id = next_request_id();
        let message = message(Some(&id), method, params);
        let mut guard = self.cancel_guard(session, &id);
        let call = Call {
            wire: &self.wire,
            name: &self.name,
            session: Some(session),
            peer: Some(&ctx.peer),
        };
        let result = call.run(method, &message, &id).await;
        // Finished either way (answered, or failed with the stream): only abandoning the call
        // (client cancel, timeout, the node dropping it) sends a cancellation.
        guard.disarm();
        let answered = result?;
        if !answered.set_cookies.is_empty() {
            self.keep_cookies(ctx, session, &answered.set_cookies).await;
        }
        Ok(answered.response)
    }

    /// Records the cookies an answer in `session` set, when they change its jar, and only while
    /// the record still holds `session` (a compare-and-set): a call of an upstream session that
    /// was re-initialized meanwhile answers with cookies of a session nobody uses any more, and
    /// writing its binding would unpin the new one. Those cookies are dropped.
    async fn keep_cookies(&self, ctx: &RequestContext, session: &UpstreamSession, set: &[String]) {
        if self.replication.stateless || session.id.is_none() {
            return;
        }
        let max = self.replication.max_cookie_bytes;
        let merged = cookies::merge(
            session.cookies.as_deref(),
            set.iter().map(String::as_str),
            max,
            &self.name,
        );
        if !merged.dropped.is_empty() {
            self.cookies_not_kept(session, &merged.dropped);
        }
        let Some(jar) = merged.jar else {
            return;
        };
        let mut updated = session.clone();
        updated.cookies = jar;
        let sid = ctx.session.session_id();
        let entries = vec![(binding_name(&self.name), updated.encode_binding())];
        let stored = ctx
            .session
            .swap_upstream_sessions(&self.name, Some(&session.encode()), entries)
            .await;
        match stored {
            Ok(true) => self.known.put(sid, updated),
            Ok(false) => {
                tracing::debug!(upstream = %self.name, session = %crate::logged_session(sid), "not keeping the cookies of a superseded upstream session (it was initialized again meanwhile)")
            }
            Err(e) => {
                tracing::warn!(upstream = %self.name, session = %crate::logged_session(sid), error = e, "could not record the cookies the upstream set")
            }
        }
    }

    /// Logs the cookies of upstream session `session` not kept ([`cookies::Warned::not_kept`]).
    fn cookies_not_kept(&self, session: &UpstreamSession, dropped: &[String]) {
        let id = session.id.as_deref().unwrap_or_default();
        let max = self.replication.max_cookie_bytes;
        self.cookie_warnings.not_kept(&self.name, id, dropped, max);
    }

    /// The `notifications/cancelled` sent if a call is abandoned before its answer.
    fn cancel_guard(&self, session: &UpstreamSession, id: &Value) -> CancelGuard {
        let wire = self.wire.clone();
        let session = session.clone();
        let id = id.clone();
        let name = self.name.clone();
        // Built only when the call is abandoned: most calls disarm the guard.
        CancelGuard::new(async move {
            let note = cancelled_notification(
                &id,
                "cancelled by the client, or the upstream timeout passed",
            );
            let post = wire.post("notifications/cancelled", &note, Some(&session));
            match tokio::time::timeout(common::CONNECT_TIMEOUT, post).await {
                Ok(Ok(_)) => tracing::debug!(upstream = name, "sent notifications/cancelled"),
                Ok(Err(e)) => {
                    tracing::debug!(upstream = name, error = ?e, "could not send notifications/cancelled")
                }
                Err(_) => {
                    tracing::debug!(upstream = name, "sending notifications/cancelled timed out")
                }
            }
        })
    }

    /// The JSON-RPC error the client gets for a failed exchange.
    fn error(&self, e: WireError) -> RpcError {
        exchange_error(&self.name, e)
    }
}

impl std::fmt::Debug for HttpUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpUpstream")
            .field("name", &self.name)
            .field("url", &self.url())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Upstream for HttpUpstream {
    fn name(&self) -> &str {
        &self.name
    }

    /// The capabilities from the probe (or the first client session's `initialize`); until
    /// then `{"tools":{},"resources":{},"prompts":{}}`.
    fn capabilities(&self) -> Value {
        self.facts.capabilities()
    }

    fn server_info(&self) -> Value {
        self.facts.server_info()
    }

    fn instructions(&self) -> Option<String> {
        self.facts.instructions()
    }

    /// Its endpoints ([`HttpUpstream::endpoints`]); the state and last error come from the
    /// calls ([`crate::tracked::Tracked`]).
    fn statuses(&self) -> Vec<UpstreamStatus> {
        let mut status = UpstreamStatus::new(&self.name, "http");
        status.endpoints = self.endpoints();
        status.resolved_at_ms = self
            .wire
            .endpoints()
            .and_then(|e| e.resolved_at())
            .map(crate::status::unix_ms);
        status.revisions_seen = self.facts.revisions.seen();
        vec![status]
    }

    /// Resolves the host again when the last resolution is older than `resolve_interval_ms`.
    async fn refresh_statuses(&self) {
        if let Some(endpoints) = self.wire.endpoints() {
            endpoints.refresh_if_stale().await;
        }
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        bounded(
            &self.name,
            self.timeout,
            &ctx.cancel,
            self.call(method, &params, &ctx),
        )
        .await
    }

    /// Probes the server once: `initialize` with a neutral identity, record its capabilities,
    /// serverInfo and instructions, then DELETE that session. An unreachable server is logged;
    /// the defaults stay until a client session's `initialize` succeeds.
    async fn prepare(&self) {
        self.probe().await
    }

    /// Forwards a client notification (e.g. `notifications/roots/list_changed`) into the
    /// client session's upstream session, if it has one yet (otherwise the upstream starts
    /// fresh later and needs none). `notifications/cancelled` is not forwarded: the node cancels
    /// the running call, which sends the upstream its own cancellation with our request id.
    async fn notify(&self, method: &str, params: Value, session: Arc<dyn SessionHandle>) {
        if method == "notifications/cancelled" {
            return;
        }
        let sid = session.session_id();
        let Some(upstream) = self.stored(&*session).or_else(|| self.known.get(sid)) else {
            tracing::debug!(upstream = %self.name, method, "no upstream session yet; notification not forwarded");
            return;
        };
        let note = message(None, method, &params);
        let post = self.wire.post(method, &note, Some(&upstream));
        match tokio::time::timeout(self.timeout, post).await {
            Ok(Ok(_)) => {}
            Ok(Err(WireError::Gone { .. })) => {
                tracing::debug!(upstream = %self.name, method, "the upstream session is gone; the next request initializes it again");
            }
            Ok(Err(e)) => {
                tracing::warn!(upstream = %self.name, method, error = ?e, "could not forward a notification")
            }
            Err(_) => {
                tracing::warn!(upstream = %self.name, method, "forwarding a notification timed out")
            }
        }
    }

    fn held_sessions(&self) -> Vec<String> {
        self.listeners.sessions()
    }

    /// Stops this process's listener on the upstream's GET stream for `session_id`, then DELETEs
    /// the upstream session when this process knows it (best effort: a session last used on
    /// another node is left to the upstream's own expiry).
    async fn session_ended(&self, session_id: &str) {
        self.listeners.stop(session_id).await;
        let Some(upstream) = self.known.remove(session_id) else {
            return;
        };
        if upstream.id.is_none() {
            return;
        }
        let why = match tokio::time::timeout(self.timeout, self.wire.delete(&upstream)).await {
            Ok(Ok(())) => {
                return tracing::debug!(upstream = %self.name, session = %crate::logged_session(session_id), "deleted the upstream session");
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "timed out".to_owned(),
        };
        tracing::info!(upstream = %self.name, session = %crate::logged_session(session_id), error = %why, "could not delete the upstream session");
    }

    /// Stops every listener on the upstream's GET streams ([`Upstream::fenced`]).
    async fn fenced(&self) {
        self.listeners.stop_for_fence(&self.name).await;
    }

    /// Stops every listener (each stores its last event id: the next holder resumes there).
    async fn shutdown(&self) {
        self.listeners.stop_all().await;
    }
}
