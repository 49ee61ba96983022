//! The legacy HTTP+SSE upstream (MCP 2024-11-05, basic/transports, HTTP with SSE): GET the SSE
//! URL, read the `endpoint` event (a URI relative to the SSE URL), POST messages there; answers
//! and server messages arrive on the SSE stream.
//!
//! Submodules:
//! - `connection`: one open connection (the held GET stream, the POST endpoint, matching answers
//!   to requests, routing server messages to the right client request).

mod connection;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;
use switchboard_protocol::codes;

use self::connection::Connection;
use crate::http::common::{
    bounded, cancelled_notification, client_initialize_params, message, next_request_id, outcome,
    probe_initialize_params, unavailable, CancelGuard, Facts, CONNECT_TIMEOUT,
};
use crate::http::wire::{exchange_error, Wire, WireError};
use crate::upstream::{RequestContext, RpcError, SessionHandle, Upstream};
use switchboard_telemetry::trace::logged_session;

/// A connection unused for this long is closed (its client session has most likely ended on
/// another node, which cannot tell this one).
const IDLE_CLOSE: Duration = Duration::from_secs(30 * 60);

/// A legacy HTTP+SSE MCP server behind the cluster.
///
/// **Node-bound state.** Each client session gets its own SSE connection, held open in THIS
/// process: the legacy transport ties the upstream session to that one GET stream, so it cannot
/// move between nodes. If this node dies (or the connection drops), the state inside the old
/// upstream session is lost: the next request of the client session, on whatever node, opens a
/// new connection and replays the client's stored `initialize` params (logged). In a cluster,
/// wrap it in [`crate::placement::NodeBound`] so a session's requests run on the node holding
/// its connection. The record gets `"legacy-sse|<revision>"` under the upstream's name once a
/// connection was initialized, which tells a later node that state was lost.
///
/// **Messages.** Requests carry our own ids (as for [`crate::HttpUpstream`]); the answer is
/// matched on the stream by id. The transport has one stream for everything, so a notification
/// goes to the request whose progress token it carries, else to the oldest running request of
/// the session, else to the client's standalone stream; a server-to-client request goes to the
/// oldest running request (a `ping` with none running is answered here). Cancellation, timeout
/// (-32005) and unavailable (-32006) errors are as for [`crate::HttpUpstream`]. Static headers go
/// on the GET and every POST; the client's `Authorization` is never forwarded.
pub struct SseUpstream {
    name: String,
    wire: Wire,
    timeout: Duration,
    facts: Facts,
    pool: Mutex<HashMap<String, Slot>>,
}

/// A client session's connection (or the lock of its opening).
#[derive(Default)]
struct Slot {
    conn: Option<Arc<Connection>>,
    opening: Arc<tokio::sync::Mutex<()>>,
}

impl SseUpstream {
    /// An upstream called `name` whose SSE endpoint is `url`, sending `headers` on the GET and
    /// every POST, with `timeout` for each call. Errors as [`crate::HttpUpstream::new`].
    pub fn new<K, V>(
        name: impl Into<String>,
        url: &str,
        headers: impl IntoIterator<Item = (K, V)>,
        timeout: Duration,
    ) -> Result<SseUpstream, String>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let name = name.into();
        let wire = Wire::new(url, headers).map_err(|e| format!("upstream `{name}`: {e}"))?;
        Ok(SseUpstream {
            facts: Facts::new(&name),
            name,
            wire,
            timeout,
            pool: Mutex::default(),
        })
    }

    /// An upstream from its `[[upstreams]]` table (`kind = "sse"`; `url` is the SSE endpoint).
    /// Header values are used as they are (the `build` step expands `${VAR}`).
    pub fn from_config(config: &crate::config::UpstreamConfig) -> Result<SseUpstream, String> {
        let name = &config.name;
        if config.kind != crate::config::UpstreamKind::Sse {
            return Err(format!(
                "upstream `{name}`: kind `{}` is not a legacy SSE upstream",
                config.kind.as_str()
            ));
        }
        let url = config
            .url
            .as_deref()
            .ok_or_else(|| format!("upstream `{name}`: kind `sse` needs a `url`"))?;
        let mut upstream = SseUpstream::new(
            name.clone(),
            url,
            &config.headers,
            Duration::from_millis(config.timeout_ms),
        )?;
        upstream.wire = upstream.wire.with_max_message(config.message_limit());
        Ok(upstream)
    }

    /// How many connections this process holds open.
    pub fn open_connections(&self) -> usize {
        let pool = self.pool.lock();
        pool.values()
            .filter(|s| s.conn.as_ref().is_some_and(|c| c.is_open()))
            .count()
    }

    /// One request on the client session's connection (opened on first use).
    async fn call(
        &self,
        method: &str,
        params: &Value,
        ctx: &RequestContext,
    ) -> Result<Value, RpcError> {
        let conn = self.connection_for(ctx).await?;
        let id = next_request_id();
        let request = message(Some(&id), method, params);
        let mut guard = {
            let conn = conn.clone();
            let note = cancelled_notification(
                &id,
                "cancelled by the client, or the upstream timeout passed",
            );
            CancelGuard::new(async move {
                let _ = tokio::time::timeout(
                    CONNECT_TIMEOUT,
                    conn.post("notifications/cancelled", &note),
                )
                .await;
            })
        };
        let answer = conn
            .request(
                method,
                &request,
                &id,
                Some(ctx.peer.clone()),
                ctx.progress_token.clone(),
            )
            .await;
        guard.disarm();
        let response = answer.map_err(|e| self.error(e))?;
        outcome(response)
    }

    /// The live connection of the request's client session, or a new one.
    async fn connection_for(&self, ctx: &RequestContext) -> Result<Arc<Connection>, RpcError> {
        let sid = ctx.session.session_id();
        let opening = {
            let mut pool = self.pool.lock();
            let slot = pool.entry(sid.to_owned()).or_default();
            if let Some(conn) = slot.conn.as_ref().filter(|c| c.is_open()) {
                return Ok(conn.clone());
            }
            slot.opening.clone()
        };
        let _one_at_a_time = opening.lock().await;
        if let Some(conn) = self.live(sid) {
            return Ok(conn);
        }
        if ctx.session.upstream_session(&self.name).is_some() {
            tracing::warn!(upstream = %self.name, session = %logged_session(sid),
                "the legacy SSE connection of this session is gone (node restart or dropped connection); \
                 opening a new one with the stored initialize: state inside the old upstream session is lost");
        }
        let params = client_initialize_params(ctx.session.initialize_params(), ctx.revision);
        let (conn, revision) = self.open(&params).await?;
        let revisions = &self.facts.revisions;
        revisions.negotiated(&self.name, sid, ctx.revision, &revision);
        let conn = Arc::new(conn);
        self.restore(ctx, &conn).await;
        ctx.session
            .set_upstream_session(&self.name, Some(format!("legacy-sse|{revision}")))
            .await
            .map_err(|e| {
                RpcError::new(
                    codes::INTERNAL_ERROR,
                    format!(
                        "could not record the session of upstream `{}`: {e}",
                        self.name
                    ),
                )
            })?;
        self.sweep();
        let mut pool = self.pool.lock();
        pool.entry(sid.to_owned()).or_default().conn = Some(conn.clone());
        Ok(conn)
    }

    /// Sends a new connection what the client had asked this upstream's earlier ones for (log
    /// level, resource subscriptions; [`crate::client_state`]), before any request of the
    /// client's.
    async fn restore(&self, ctx: &RequestContext, conn: &Connection) {
        let capabilities = self.capabilities();
        let send = |method: &'static str, params: Value| async move {
            let id = next_request_id();
            let request = message(Some(&id), method, &params);
            let answer = conn.request(method, &request, &id, None, None).await;
            outcome(answer.map_err(|e| self.error(e))?)
        };
        crate::client_state::restore(&self.name, &capabilities, &*ctx.session, &ctx.peer, send)
            .await;
    }

    fn live(&self, sid: &str) -> Option<Arc<Connection>> {
        let pool = self.pool.lock();
        pool.get(sid)?.conn.clone().filter(|c| c.is_open())
    }

    /// Forgets closed connections and closes idle ones.
    fn sweep(&self) {
        let mut pool = self.pool.lock();
        pool.retain(|_, slot| {
            let busy = Arc::strong_count(&slot.opening) > 1;
            let keep = slot
                .conn
                .as_ref()
                .is_some_and(|c| c.is_open() && c.last_used().elapsed() < IDLE_CLOSE);
            busy || keep
        });
    }

    /// Opens a connection and initializes it with `params` (then `notifications/initialized`).
    /// Returns it with the revision the upstream negotiated.
    async fn open(&self, params: &Value) -> Result<(Connection, String), RpcError> {
        let conn = Connection::open(&self.name, &self.wire)
            .await
            .map_err(|e| self.error(e))?;
        let id = next_request_id();
        let request = message(Some(&id), "initialize", params);
        let response = conn
            .request("initialize", &request, &id, None, None)
            .await
            .map_err(|e| self.error(e))?;
        let result = outcome(response).map_err(|e| {
            unavailable(
                &self.name,
                format!("it refused initialize: {} ({})", e.message, e.code),
            )
        })?;
        let revision = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("2024-11-05")
            .to_owned();
        let initialized = message(None, "notifications/initialized", &Value::Null);
        conn.post("notifications/initialized", &initialized)
            .await
            .map_err(|e| self.error(e))?;
        self.facts.learn(&result, false);
        Ok((conn, revision))
    }

    fn error(&self, e: WireError) -> RpcError {
        exchange_error(&self.name, e)
    }
}

impl std::fmt::Debug for SseUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseUpstream")
            .field("name", &self.name)
            .field("url", &self.wire.url().as_str())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Upstream for SseUpstream {
    fn name(&self) -> &str {
        &self.name
    }

    /// The capabilities from the probe (or the first connection's `initialize`); until then
    /// `{"tools":{},"resources":{},"prompts":{}}`.
    fn capabilities(&self) -> Value {
        self.facts.capabilities()
    }

    fn server_info(&self) -> Value {
        self.facts.server_info()
    }

    fn instructions(&self) -> Option<String> {
        self.facts.instructions()
    }

    /// The revisions its connections negotiated against their clients'; the state and last
    /// error come from the calls ([`crate::tracked::Tracked`]).
    fn statuses(&self) -> Vec<crate::status::UpstreamStatus> {
        let mut status = crate::status::UpstreamStatus::new(&self.name, "sse");
        status.revisions_seen = self.facts.revisions.seen();
        vec![status]
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

    /// Probes the server once (connect, `initialize` with a neutral identity, record what it
    /// says about itself, close). An unreachable server is logged; defaults stay until a client
    /// session's connection initializes.
    async fn prepare(&self) {
        let probe = tokio::time::timeout(self.timeout, self.open(&probe_initialize_params())).await;
        match probe {
            Ok(Ok((_conn, revision))) => {
                tracing::info!(upstream = %self.name, url = %self.wire.url(), revision, "probed the legacy SSE upstream");
            }
            Ok(Err(e)) => {
                tracing::warn!(upstream = %self.name, error = %e.message, "could not probe the upstream; default capabilities for now")
            }
            Err(_) => {
                tracing::warn!(upstream = %self.name, "probing the upstream timed out; default capabilities for now")
            }
        }
    }

    /// Forwards a client notification on the session's connection, if this process holds one.
    async fn notify(&self, method: &str, params: Value, session: Arc<dyn SessionHandle>) {
        if method == "notifications/cancelled" {
            return;
        }
        let Some(conn) = self.live(session.session_id()) else {
            return;
        };
        let note = message(None, method, &params);
        if let Ok(Err(e)) = tokio::time::timeout(self.timeout, conn.post(method, &note)).await {
            tracing::warn!(upstream = %self.name, method, error = ?e, "could not forward a notification");
        }
    }

    /// Closes the session's connection (which ends the legacy session at the server).
    fn held_sessions(&self) -> Vec<String> {
        self.pool.lock().keys().cloned().collect()
    }

    async fn session_ended(&self, session_id: &str) {
        let slot = self.pool.lock().remove(session_id);
        drop(slot);
    }
}
