//! The stdio upstream: an MCP server run as a child process that speaks newline-delimited
//! JSON-RPC on stdin/stdout (MCP 2025-11-25, basic/transports, stdio).
//!
//! ## Children
//! - **Per session** (default): one child per client session, started by the session's first
//!   request in this process. It is initialized with the client's stored `initialize` params
//!   ([`SessionHandle::initialize_params`]), then sent
//!   `notifications/initialized`, and only then sent requests (case C21). A child that exits
//!   fails its calls in flight at once with -32006 ("upstream \`NAME\` exited (exit status 3)");
//!   the session's next request starts a new child and replays the stored `initialize` (state
//!   inside the old child is lost, and a log line says so). When the session ends
//!   ([`Upstream::session_ended`]), its child is stopped in the background: stdin closed, then
//!   SIGTERM and SIGKILL to its process group, [`DEFAULT_KILL_GRACE`] apart (case C31).
//! - **Shared** (opt-in, `shared = true`): one child for every session of this process. Our
//!   request ids (a per-child counter) and progress tokens are unique across sessions, so no
//!   client sees another's answers or progress (case C03). The sessions whose requests used
//!   the child here are attached to it (`attached`, at most `max_attached_sessions`, removed
//!   when the session ends): `list_changed` notifications go to every attached session's
//!   standalone stream, `resources/updated` only to the sessions that subscribed to its URI
//!   through this child, log messages outside calls to every attached session (each at its own
//!   log level); what cannot be attributed is dropped, counted
//!   ([`StdioUpstream::dropped_notifications`]) and logged (`shared`, case C23). Requests from the child
//!   (sampling, …) are carried only when the calls in flight all belong to one session. The
//!   shared child is initialized with switchboard's `clientInfo` and the protocol version and
//!   capabilities of the first session that needs it; it outlives sessions until
//!   [`StdioUpstream::shutdown`]. Client notifications are not forwarded to it.
//!
//! ## Crashes and restarts (case C30)
//! A child that dies mid-call fails its calls at once with its exit status; the next call
//! starts a new one (the chosen behaviour: the client's session goes on, the old child's state
//! is lost). Starts that fail (spawn, handshake, or an exit within `restart_stable_ms`) back off
//! exponentially with jitter, per upstream in this process (`restarts`): during the wait a call
//! that needs a new child fails at once with -32006, `data.retry_after_ms` and `data.upstream`.
//! [`Upstream::statuses`] reports the children, restarts, last failure and back-off.
//!
//! ## Routing
//! See `inbound` for the child's stdout: responses, progress (to the call that used the token),
//! logging, `list_changed` (to the session's standalone stream, through the last
//! [`ClientPeer`](crate::ClientPeer) seen for the session: kept rather than the first one because
//! it carries the session's current log level), and requests such as sampling, sent to the client
//! through the most recent call's peer and answered to the child under its original id. `ping`
//! from the child is answered by us (we are its client), before and after `initialized`.
//! Cancelling a call sends `notifications/cancelled` with our id to the child; a call past its
//! timeout does the same and fails with -32005 naming the upstream. Client notifications
//! ([`Upstream::notify`], e.g. `notifications/roots/list_changed`) reach the session's child when
//! it is running here, and start none.
//!
//! ## Process
//! The child gets exactly the configured environment plus `PATH` and `HOME` inherited from the
//! node (nothing else of the node's environment, credentials included, leaks into it), and the
//! configured working directory. stderr is always drained into `tracing` (case C29). A stdout
//! line longer than `max_line_bytes` ([`DEFAULT_MAX_LINE_BYTES`] unless configured) fails the calls in
//! flight with -32006 naming the upstream and the limit, and stops the child (case C32).
//!
//! ## Cluster
//! Children live in this process only. [`StdioUpstream::holds`] tells whether a session's child
//! is here; a forwarding layer that routes a session's requests to the node holding its child
//! calls [`Upstream::request`] there.
//!
//! Submodules: `framing` (lines), `conn` (ids and calls of one child), `inbound` (routing of
//! stdout), `process` (spawn, stop, reap), `stderr` (drain), `start` (session → child),
//! `restarts` (failed starts and their back-off).

mod attached;
mod conn;
mod framing;
mod inbound;
mod process;
mod restarts;
mod shared;
mod start;
mod stderr;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;
use switchboard_protocol::codes;
use tokio::time::Instant;

use self::attached::Attached;
use self::conn::{notification, Call, Conn};
use self::process::{Limits, Spec};
use self::restarts::Restarts;
use self::start::{Meta, Slot};
use crate::config::{
    RestartPolicy, UpstreamConfig, UpstreamKind, DEFAULT_MAX_ATTACHED_SESSIONS,
    DEFAULT_MAX_LINE_BYTES,
};
use crate::status::{unix_ms, ChildStatus, UpstreamStatus};
use crate::upstream::{RequestContext, RpcError, SessionHandle, Upstream};

/// How long each step of stopping a child waits (stdin closed → SIGTERM → SIGKILL).
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);

/// An MCP server run as a child process per client session (or one shared child).
pub struct StdioUpstream {
    name: Arc<str>,
    spec: Spec,
    shared: bool,
    timeout: Duration,
    limits: Limits,
    meta: Mutex<Meta>,
    /// The revisions its children negotiated against their clients'.
    revisions: crate::revisions::RevisionWatch,
    /// Per-session mode: the child slot of each session seen here.
    sessions: Mutex<HashMap<String, Arc<Slot>>>,
    /// Shared mode: the one child slot.
    shared_slot: Arc<Slot>,
    /// Shared mode: the sessions attached to the child here (`attached`).
    attached: Arc<Attached>,
    /// Failed starts and the back-off they impose (`restarts`).
    restarts: Arc<Restarts>,
}

impl StdioUpstream {
    /// An upstream named `name` that runs `command args…` with `env` (plus the node's `PATH` and
    /// `HOME`) in `cwd`; one child per session, or one for all when `shared`. `timeout` bounds
    /// each request, including the start of a child.
    pub fn new(
        name: impl Into<String>,
        command: impl Into<String>,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
        shared: bool,
        timeout: Duration,
    ) -> StdioUpstream {
        let name: Arc<str> = Arc::from(name.into());
        StdioUpstream {
            restarts: Arc::new(Restarts::new(name.clone(), RestartPolicy::default())),
            meta: Mutex::new(Meta::defaults(&name)),
            revisions: Default::default(),
            name,
            spec: Spec {
                command: command.into(),
                args,
                env,
                cwd,
            },
            shared,
            timeout,
            limits: Limits {
                max_line: usize::try_from(DEFAULT_MAX_LINE_BYTES).unwrap_or(usize::MAX),
                kill_grace: DEFAULT_KILL_GRACE,
            },
            sessions: Mutex::default(),
            shared_slot: Arc::default(),
            attached: Arc::new(Attached::new(DEFAULT_MAX_ATTACHED_SESSIONS)),
        }
    }

    /// The upstream of a `kind = "stdio"` table: `command`, `args`, `env`, `cwd`, `shared`,
    /// `max_line_bytes`, `timeout_ms` and the `restart_*` settings. Errors naming the upstream
    /// when the kind is another or `command` is missing.
    pub fn from_config(config: &UpstreamConfig) -> Result<StdioUpstream, String> {
        let name = &config.name;
        if config.kind != UpstreamKind::Stdio {
            return Err(format!(
                "upstream `{name}`: kind `{}` is not stdio",
                config.kind.as_str()
            ));
        }
        let command = config
            .command
            .as_deref()
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| format!("upstream `{name}`: kind `stdio` needs a `command`"))?;
        if config.timeout_ms == 0 {
            return Err(format!(
                "upstream `{name}`: timeout_ms must be greater than 0"
            ));
        }
        Ok(StdioUpstream::new(
            name.clone(),
            command,
            config.args.clone(),
            config.env.clone(),
            config.cwd.as_ref().map(PathBuf::from),
            config.shared,
            Duration::from_millis(config.timeout_ms),
        )
        .with_restart_policy(config.restart_policy())
        .with_max_attached_sessions(config.max_attached_sessions())
        .with_max_line(config.line_limit()))
    }

    /// Shared mode: sets the most sessions attached to the child here (default
    /// [`DEFAULT_MAX_ATTACHED_SESSIONS`]; see `attached`).
    pub fn with_max_attached_sessions(mut self, max: usize) -> StdioUpstream {
        self.attached = Arc::new(Attached::new(max));
        self
    }

    /// Sets the restart back-off (default [`RestartPolicy::default`]: 500 ms, at most 30 s,
    /// stable after 10 s).
    pub fn with_restart_policy(mut self, policy: RestartPolicy) -> StdioUpstream {
        self.restarts = Arc::new(Restarts::new(self.name.clone(), policy));
        self
    }

    /// Sets the longest stdout line a child may write, in bytes (default
    /// [`DEFAULT_MAX_LINE_BYTES`]).
    pub fn with_max_line(mut self, bytes: usize) -> StdioUpstream {
        self.limits.max_line = bytes;
        self
    }

    /// Sets how long each stopping step waits (default [`DEFAULT_KILL_GRACE`]).
    pub fn with_kill_grace(mut self, grace: Duration) -> StdioUpstream {
        self.limits.kill_grace = grace;
        self
    }

    /// Whether this is a shared-mode upstream (one child for all sessions; nothing to forward).
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// Whether this process holds a running child for session `sid` (in shared mode: whether the
    /// shared child is running, whatever `sid`).
    pub fn holds(&self, sid: &str) -> bool {
        self.live(sid).is_some()
    }

    /// The process id of session `sid`'s running child (shared mode: of the shared child).
    pub fn child_pid(&self, sid: &str) -> Option<u32> {
        self.live(sid).and_then(|c| c.pid)
    }

    /// How many children are running in this process.
    pub fn running_children(&self) -> usize {
        self.all_conns().iter().filter(|c| c.alive()).count()
    }

    /// Shared mode: how many notifications of the child were dropped because no session could
    /// be told (see the module doc).
    pub fn dropped_notifications(&self) -> u64 {
        self.attached.dropped.load(Ordering::Relaxed)
    }

    /// Stops every child (per session and shared) and waits until all are gone, for a node that
    /// drains before exiting.
    pub async fn stop_all(&self) {
        let conns = self.all_conns();
        self.sessions.lock().clear();
        for conn in &conns {
            conn.stop.cancel();
        }
        for conn in conns {
            conn.gone.cancelled().await;
        }
    }

    fn slot(&self, sid: &str) -> Option<Arc<Slot>> {
        if self.shared {
            return Some(self.shared_slot.clone());
        }
        let sessions = self.sessions.lock();
        sessions.get(sid).cloned()
    }

    fn live(&self, sid: &str) -> Option<Arc<Conn>> {
        self.slot(sid)?.live()
    }

    fn all_conns(&self) -> Vec<Arc<Conn>> {
        let sessions = self.sessions.lock();
        sessions
            .values()
            .chain(std::iter::once(&self.shared_slot))
            .filter_map(|s| s.current())
            .collect()
    }

    /// The error of a call that ran out of time, naming the upstream and the limit.
    fn timed_out(&self, method: &str) -> RpcError {
        RpcError::new(
            codes::UPSTREAM_TIMEOUT,
            format!(
                "upstream `{}` did not answer {method} within {} ms",
                self.name,
                self.timeout.as_millis()
            ),
        )
    }
}

impl std::fmt::Debug for StdioUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioUpstream")
            .field("name", &self.name)
            .field("spec", &self.spec)
            .field("shared", &self.shared)
            .field("timeout", &self.timeout)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Drop for StdioUpstream {
    fn drop(&mut self) {
        for conn in self.all_conns() {
            conn.stop.cancel();
        }
    }
}

#[async_trait]
impl Upstream for StdioUpstream {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Value {
        self.meta.lock().capabilities.clone()
    }

    fn server_info(&self) -> Value {
        self.meta.lock().server_info.clone()
    }

    fn instructions(&self) -> Option<String> {
        self.meta.lock().instructions.clone()
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        if ctx.cancel.is_cancelled() {
            return Err(RpcError::new(codes::REQUEST_ABORTED, "request cancelled"));
        }
        let deadline = Instant::now() + self.timeout;
        let conn = self
            .conn_for(&ctx, deadline)
            .await
            .map_err(|e| self.name_timeout(e, "initialize"))?;
        if !self.shared {
            conn.set_session_peer(ctx.peer.clone());
        } else if let Some(peer) = ctx.session.standalone_peer() {
            self.attached.attach(&self.name, &ctx.session_id, peer);
        }
        let subscription = self.shared.then(|| subscription(method, &params)).flatten();
        let call = Call {
            peer: ctx.peer.clone(),
            session: ctx.session_id.clone(),
            client_token: None,
            child_token: None,
        };
        let outcome = conn
            .request(method, params, Some(call), deadline, &ctx.cancel)
            .await
            .map_err(|e| self.name_timeout(e, method));
        if let (Some((uri, subscribed)), Ok(_)) = (subscription, &outcome) {
            self.attached
                .subscription(&ctx.session_id, &uri, subscribed);
        }
        outcome
    }

    async fn prepare(&self) {
        self.probe().await;
    }

    async fn notify(&self, method: &str, params: Value, session: Arc<dyn SessionHandle>) {
        if self.shared {
            tracing::debug!(upstream = %self.name, method, "client notification not forwarded to the shared child");
            return;
        }
        if let Some(conn) = self.live(session.session_id()) {
            // Awaited, so that a request sent after it reaches the child after it; bounded, so
            // that a child that stopped reading stdin does not hold the caller.
            let sent = conn.send(notification(method, params));
            let _ = tokio::time::timeout(self.timeout, sent).await;
        }
    }

    async fn shutdown(&self) {
        self.stop_all().await
    }

    /// Its children running in this process, with the state, last failure, restarts and next
    /// start time of its restart back-off (see [`crate::status`]).
    fn statuses(&self) -> Vec<UpstreamStatus> {
        let mut status = UpstreamStatus::new(self.name.as_ref(), "stdio");
        status.children = self
            .all_conns()
            .iter()
            .filter(|c| c.alive())
            .map(|c| ChildStatus {
                // The session id is a credential: `/upstreamz` shows its hash, as logs do.
                session: switchboard_telemetry::trace::logged_session(&c.label),
                pid: c.pid,
                started_at_ms: unix_ms(c.started_at),
            })
            .collect();
        let (state, last_error, restarts, next) = self.restarts.report(status.children.len());
        status.state = state;
        status.last_error = last_error;
        status.restarts = restarts;
        status.next_start_at_ms = next;
        status.revisions_seen = self.revisions.seen();
        vec![status]
    }

    /// Per session: the sessions with a child here. Shared: the sessions attached to the child,
    /// and detached ones whose subscriptions through it are kept (`attached`).
    fn held_sessions(&self) -> Vec<String> {
        if self.shared {
            return self.attached.sessions();
        }
        self.sessions.lock().keys().cloned().collect()
    }

    async fn session_ended(&self, session_id: &str) {
        if self.shared {
            self.attached.detach(session_id);
            return;
        }
        let slot = self.sessions.lock().remove(session_id);
        if let Some(conn) = slot.and_then(|s| s.current()) {
            // The supervisor stops and reaps it in the background (up to two grace periods), so
            // that ending a session never waits for a stubborn child.
            conn.stop.cancel();
        }
    }
}

impl StdioUpstream {
    fn name_timeout(&self, error: RpcError, method: &str) -> RpcError {
        if error.code == codes::UPSTREAM_TIMEOUT {
            self.timed_out(method)
        } else {
            error
        }
    }
}

/// `resources/subscribe` or `resources/unsubscribe`: its URI and whether it subscribes.
fn subscription(method: &str, params: &Value) -> Option<(String, bool)> {
    let subscribed = match method {
        "resources/subscribe" => true,
        "resources/unsubscribe" => false,
        _ => return None,
    };
    let uri = params.get("uri")?.as_str()?;
    Some((uri.to_owned(), subscribed))
}
