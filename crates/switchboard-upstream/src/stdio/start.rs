//! Finding or starting the child of a session, and the `initialize` handshake
//! (MCP 2025-11-25, basic/lifecycle: `initialize` → result → `notifications/initialized`),
//! after which a session's child is given the client's log level and resource subscriptions
//! again ([`crate::client_state`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use switchboard_protocol::{codes, Revision};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::conn::{unavailable, Conn};
use super::restarts::Restarts;
use super::{process, StdioUpstream};
use crate::client_state;
use crate::upstream::{RequestContext, RpcError};
use switchboard_telemetry::trace::logged_session;

/// Where a session's child (or the shared child) is kept.
#[derive(Default)]
pub(super) struct Slot {
    conn: Mutex<Option<Arc<Conn>>>,
    /// Set by the first start tried here: later starts are restarts.
    attempted: AtomicBool,
    /// Held while a child is being started, so that concurrent first requests start one.
    starting: tokio::sync::Mutex<()>,
}

impl Slot {
    /// The child, running or not.
    pub(super) fn current(&self) -> Option<Arc<Conn>> {
        self.conn.lock().clone()
    }

    /// The child, when it is running.
    pub(super) fn live(&self) -> Option<Arc<Conn>> {
        self.current().filter(|c| c.alive())
    }

    fn set(&self, conn: Arc<Conn>) {
        *self.conn.lock() = Some(conn);
    }
}

/// What the server said about itself in `initialize`.
pub(super) struct Meta {
    /// `capabilities` of its `initialize` result.
    pub(super) capabilities: Value,
    /// `serverInfo` of its `initialize` result.
    pub(super) server_info: Value,
    /// `instructions` of its `initialize` result.
    pub(super) instructions: Option<String>,
    /// Whether a child has answered `initialize` yet.
    known: bool,
}

impl Meta {
    /// Before any child answered: no capabilities, the upstream's name as `serverInfo`.
    pub(super) fn defaults(name: &str) -> Meta {
        Meta {
            capabilities: json!({}),
            server_info: json!({"name": name, "version": "unknown"}),
            instructions: None,
            known: false,
        }
    }

    fn record(&mut self, result: &Value) {
        self.capabilities = result.get("capabilities").cloned().unwrap_or(json!({}));
        if let Some(info) = result.get("serverInfo") {
            self.server_info = info.clone();
        }
        self.instructions = result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.known = true;
    }
}

/// Switchboard's `clientInfo` towards children.
fn client_info() -> Value {
    json!({"name": "switchboard", "version": env!("CARGO_PKG_VERSION")})
}

/// The `initialize` params for a session's child: the client's as stored, with the required
/// members filled in when missing.
fn client_params(stored: &Value) -> Value {
    let mut params = stored.as_object().cloned().unwrap_or_default();
    params
        .entry("protocolVersion")
        .or_insert_with(|| Revision::LATEST.as_str().into());
    params.entry("capabilities").or_insert_with(|| json!({}));
    params.entry("clientInfo").or_insert_with(client_info);
    Value::Object(params)
}

/// The `initialize` params of the probe (a neutral identity that asks for nothing).
fn probe_params() -> Value {
    json!({"protocolVersion": Revision::LATEST.as_str(), "capabilities": {}, "clientInfo": client_info()})
}

/// The `initialize` params of the shared child: the first session's revision and capabilities
/// under switchboard's `clientInfo`.
fn shared_params(stored: &Value) -> Value {
    let mut params: Map<String, Value> = client_params(stored)
        .as_object()
        .cloned()
        .unwrap_or_default();
    params.insert("clientInfo".into(), client_info());
    Value::Object(params)
}

impl StdioUpstream {
    /// The running child of the request's session (or the shared child), started and
    /// initialized first when there is none. Concurrent first requests start one child. A start
    /// needs the restart back-off's leave (`restarts`): during a back-off this fails at once.
    pub(super) async fn conn_for(
        &self,
        ctx: &RequestContext,
        deadline: Instant,
    ) -> Result<Arc<Conn>, RpcError> {
        let sid = ctx.session_id.as_str();
        let slot = self.slot_or_new(sid);
        if let Some(conn) = slot.live() {
            return Ok(conn);
        }
        let _starting = tokio::select! {
            guard = slot.starting.lock() => guard,
            _ = ctx.cancel.cancelled() => return Err(RpcError::new(codes::REQUEST_ABORTED, "request cancelled")),
            _ = tokio::time::sleep_until(deadline) => return Err(RpcError::new(codes::UPSTREAM_TIMEOUT, "timed out")),
        };
        if let Some(conn) = slot.live() {
            return Ok(conn);
        }
        let _admission = self.restarts.admit(&ctx.cancel, deadline).await?;
        if let Some(old) = slot.current() {
            tracing::warn!(upstream = %self.name, session = %logged_session(&old.label), "the stdio child of this session is gone; starting a new one and replaying the client's initialize (state inside the old child is lost)");
        }
        let restart = slot.attempted.swap(true, Ordering::Relaxed);
        self.restarts.starting(restart);
        let (conn, result) = match self.start_child(ctx, deadline).await {
            Ok(started) => started,
            Err(e) if e.code == codes::REQUEST_ABORTED => return Err(e),
            Err(e) => {
                let e = self.name_timeout(e, "initialize");
                self.restarts.failed(&e);
                return Err(e);
            }
        };
        if !self.install(sid, &slot, &conn) {
            conn.stop.cancel();
            return Err(unavailable(format!(
                "upstream `{}`: the session ended",
                self.name
            )));
        }
        self.record_meta(&result, false);
        let revision = result.get("protocolVersion").and_then(Value::as_str);
        let revision = revision.unwrap_or(Revision::LATEST.as_str());
        self.revisions
            .negotiated(&self.name, sid, ctx.revision, revision);
        watch(self.restarts.clone(), conn.clone());
        Ok(conn)
    }

    /// Spawns and initializes a child for the request's session (or the shared child); stops it
    /// again when the handshake fails. Returns it with its `initialize` result.
    async fn start_child(
        &self,
        ctx: &RequestContext,
        deadline: Instant,
    ) -> Result<(Arc<Conn>, Value), RpcError> {
        let (label, params) = if self.shared {
            (
                "shared".to_owned(),
                shared_params(ctx.session.initialize_params()),
            )
        } else {
            (
                ctx.session_id.clone(),
                client_params(ctx.session.initialize_params()),
            )
        };
        let conn = process::spawn(
            &self.spec,
            self.name.clone(),
            label,
            self.shared,
            self.limits,
            self.attached.clone(),
        )?;
        if !self.shared {
            conn.set_session_peer(ctx.peer.clone());
        }
        match self.handshake(&conn, params, deadline, &ctx.cancel).await {
            Ok(result) => {
                if !self.shared {
                    self.restore(ctx, &conn, &result, deadline).await;
                }
                Ok((conn, result))
            }
            Err(e) => {
                conn.stop.cancel();
                Err(e)
            }
        }
    }

    /// Sends a new session's child what the client had asked the session's earlier children for
    /// (log level, resource subscriptions; [`client_state`]), before any request of the
    /// client's reaches it.
    async fn restore(&self, ctx: &RequestContext, conn: &Conn, result: &Value, deadline: Instant) {
        let capabilities = result.get("capabilities").cloned().unwrap_or_default();
        let send = |method: &'static str, params: Value| async move {
            conn.request(method, params, None, deadline, &ctx.cancel)
                .await
        };
        client_state::restore(&self.name, &capabilities, &*ctx.session, &ctx.peer, send).await;
    }

    /// Puts a started child in its slot; `false` when the session ended meanwhile (its slot was
    /// removed). Done under the sessions lock, so `session_ended` sees the child or none.
    fn install(&self, sid: &str, slot: &Arc<Slot>, conn: &Arc<Conn>) -> bool {
        if self.shared {
            self.attached.forget_subscriptions();
            slot.set(conn.clone());
            return true;
        }
        let sessions = self.sessions.lock();
        let current = sessions.get(sid).is_some_and(|s| Arc::ptr_eq(s, slot));
        if current {
            slot.set(conn.clone());
        }
        current
    }

    fn slot_or_new(&self, sid: &str) -> Arc<Slot> {
        if self.shared {
            return self.shared_slot.clone();
        }
        let mut sessions = self.sessions.lock();
        sessions.entry(sid.to_owned()).or_default().clone()
    }

    /// `initialize` (never cancelled towards the child, per basic/lifecycle), then
    /// `notifications/initialized`. Returns the `initialize` result.
    async fn handshake(
        &self,
        conn: &Conn,
        params: Value,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Value, RpcError> {
        let requested = params.get("protocolVersion").cloned();
        let result = conn
            .request("initialize", params, None, deadline, cancel)
            .await
            .map_err(|e| match e.code {
                codes::REQUEST_ABORTED | codes::UPSTREAM_TIMEOUT | codes::UPSTREAM_UNAVAILABLE => e,
                _ => unavailable(format!(
                    "upstream `{}` refused initialize: {}",
                    self.name, e.message
                )),
            })?;
        if !result.is_object() {
            return Err(unavailable(format!(
                "upstream `{}` answered initialize without a result object",
                self.name
            )));
        }
        if result.get("protocolVersion") != requested.as_ref() {
            tracing::info!(upstream = %self.name, session = %logged_session(&conn.label), requested = ?requested, answered = ?result.get("protocolVersion"), "stdio child chose another protocol revision");
        }
        conn.finish_handshake().await?;
        Ok(result)
    }

    /// Starts a probe child with a neutral identity, records what it says about itself, and
    /// stops it. A command that fails is logged; the defaults stay.
    pub(super) async fn probe(&self) {
        self.restarts.starting(false);
        let conn = match process::spawn(
            &self.spec,
            self.name.clone(),
            "probe".into(),
            false,
            self.limits,
            self.attached.clone(),
        ) {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!(upstream = %self.name, error = %e.message, "stdio upstream probe failed; advertising no capabilities until a child answers");
                self.restarts.failed(&e);
                return;
            }
        };
        let deadline = Instant::now() + self.timeout;
        let never = CancellationToken::new();
        match self
            .handshake(&conn, probe_params(), deadline, &never)
            .await
        {
            Ok(result) => self.record_meta(&result, true),
            Err(e) => {
                let e = self.name_timeout(e, "initialize");
                tracing::warn!(upstream = %self.name, error = %e.message, "stdio upstream probe failed; advertising no capabilities until a child answers");
                self.restarts.failed(&e);
            }
        }
        conn.stop.cancel();
        conn.gone.cancelled().await;
    }

    /// Records capabilities, serverInfo and instructions: always from the probe, from a
    /// session's child only while nothing is known yet.
    fn record_meta(&self, result: &Value, probe: bool) {
        let mut meta = self.meta.lock();
        if probe || !meta.known {
            meta.record(result);
        }
    }
}

/// Follows a started child (its handshake is done): once it has run for the stable time the
/// back-off is reset; when it exits on its own, that is a failed start if it ran shorter, else
/// only remembered. A child stopped for a stdout line over `max_line_bytes` is only remembered
/// however long it ran: one large answer says nothing about whether the command starts (its
/// calls in flight failed; the next request starts a new child at once).
fn watch(restarts: Arc<Restarts>, conn: Arc<Conn>) {
    tokio::spawn(async move {
        let stable = restarts.policy().stable;
        let left = stable.saturating_sub(conn.started.elapsed());
        let ran_stably = tokio::time::timeout(left, conn.gone.cancelled())
            .await
            .is_err();
        if ran_stably {
            restarts.ran_stably();
            conn.gone.cancelled().await;
        }
        if conn.stopped_by_us.load(Ordering::Acquire) {
            return;
        }
        let error = conn.failure();
        if ran_stably || conn.overflowed.load(Ordering::Acquire) {
            restarts.crashed(&error);
        } else {
            restarts.failed(&error);
        }
    });
}
