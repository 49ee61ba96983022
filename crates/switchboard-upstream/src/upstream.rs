//! The upstream and client-peer traits.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use switchboard_protocol::{codes, Revision};
use tokio_util::sync::CancellationToken;

/// A JSON-RPC error object (`code`, `message`, optional `data`), as an upstream returns it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}")]
pub struct RpcError {
    /// JSON-RPC error code (see [`switchboard_protocol::codes`]).
    pub code: i64,
    /// Human-readable message.
    pub message: String,
    /// Optional structured data.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with no data.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// -32602 Invalid params.
    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(codes::INVALID_PARAMS, message)
    }

    /// -32601 Method not found, naming the method.
    pub fn method_not_found(method: &str) -> RpcError {
        RpcError::new(
            codes::METHOD_NOT_FOUND,
            format!("method not found: {method}"),
        )
    }
}

/// Why a server-to-client request got no answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PeerError {
    /// The client did not declare the capability the request needs (e.g. `sampling`).
    #[error("the client did not declare the `{0}` capability")]
    MissingCapability(&'static str),
    /// No answer within the configured time.
    #[error("the client did not answer within {0} ms")]
    Timeout(u64),
    /// The request that this belongs to was cancelled, or the session ended.
    #[error("cancelled")]
    Cancelled,
    /// The store or bus failed.
    #[error("delivery failed: {0}")]
    Delivery(String),
    /// The client cannot be sent a request during this call, whatever it declared: the way it
    /// is connected has no stream for it (it accepts only `application/json`, or the call is
    /// part of a JSON-RPC batch). The text says why; the upstream gets it with -32601, as for a
    /// missing capability.
    #[error("{0}")]
    Unreachable(String),
}

/// The way back to the client during one request. Implemented by the node.
#[async_trait]
pub trait ClientPeer: Send + Sync {
    /// Sends a notification that relates to the current request (progress, log message) on the
    /// request's response stream. `message` is a whole JSON-RPC notification, as built by
    /// [`switchboard_protocol::jsonrpc::notification`]. `notifications/message` below the
    /// session's log level is dropped by the node (and counts as sent).
    async fn notify(&self, message: Value) -> Result<(), PeerError>;

    /// Sends a notification unrelated to the current request on the session's standalone GET
    /// stream (MCP 2025-11-25, basic/transports, Listening for Messages). Logged even when no GET
    /// stream is open, so a client resuming with `Last-Event-ID` receives it. `message` and the
    /// log-level rule are as for [`ClientPeer::notify`].
    async fn notify_standalone(&self, message: Value) -> Result<(), PeerError>;

    /// Sends a server-to-client request (`sampling/createMessage`, `elicitation/create`,
    /// `roots/list`, `ping`) on the current request's stream, with an id unique in the session,
    /// and waits for the client's answer, which may arrive on any node. Returns the whole JSON-RPC
    /// response (a `result` or an `error` member).
    ///
    /// Fails without sending anything with [`PeerError::MissingCapability`] when the method needs
    /// a client capability the client did not declare (`sampling/createMessage` → `sampling`,
    /// `elicitation/create` → `elicitation`, `roots/list` → `roots`); with
    /// [`PeerError::Timeout`] when no answer arrives in time; with [`PeerError::Cancelled`] when
    /// the request is cancelled or the session ends while waiting.
    async fn request(&self, method: &str, params: Value) -> Result<Value, PeerError>;

    /// Why no server-to-client request can be sent through this peer during the current call,
    /// whatever the client declared ([`PeerError::Unreachable`]); `None` when requests can go.
    /// A call forwarded to another node carries it along, so the peer there refuses the same.
    fn refuses_requests(&self) -> Option<String> {
        None
    }

    /// Puts a message produced on another node (a forwarded call's notification or
    /// server-to-client request, already filtered and with its final id) on the request's stream
    /// as is.
    async fn send_raw(&self, _message: Value) -> Result<(), PeerError> {
        Err(PeerError::Delivery(
            "this peer cannot relay messages".into(),
        ))
    }
}

/// What the client asked one upstream to keep for its session, as the session record holds it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientState {
    /// The level of the client's last `logging/setLevel`, if any.
    pub log_level: Option<String>,
    /// The URIs the client subscribed to through this upstream, in the order subscribed.
    pub subscriptions: Vec<String>,
}

impl ClientState {
    /// Whether there is nothing to replay.
    pub fn is_empty(&self) -> bool {
        self.log_level.is_none() && self.subscriptions.is_empty()
    }
}

/// The cluster-wide state of one client session that upstreams may read and extend. Implemented
/// by the node over the session record in the store, so whatever an upstream keeps here (its own
/// `Mcp-Session-Id`) is visible to every node.
#[async_trait]
pub trait SessionHandle: Send + Sync {
    /// The client's session id.
    fn session_id(&self) -> &str;

    /// The client's `initialize` params as sent (protocolVersion, capabilities, clientInfo); an
    /// upstream replays them to initialize (or re-initialize) its own side of the session.
    fn initialize_params(&self) -> &Value;

    /// The upstream session id that `upstream` minted for this client session, if any.
    fn upstream_session(&self, upstream: &str) -> Option<String>;

    /// The node that owns this session's node-bound resource of `upstream` (a stdio child), as
    /// recorded when the session was loaded; `None` when nobody claimed it yet.
    fn owner(&self, _upstream: &str) -> Option<String> {
        None
    }

    /// A peer for the session's standalone GET stream, not tied to any request: for an upstream's
    /// unsolicited notifications and server-to-client requests (its own GET stream). `None` outside
    /// a node. Its `cancel` fires when the session ends on this node.
    fn standalone_peer(&self) -> Option<Arc<dyn ClientPeer>> {
        None
    }

    /// The cluster's placement service, when running inside a node; `None` in a single process
    /// (tests, tools), where node-bound upstreams simply run here.
    fn placement(&self) -> Option<Arc<dyn Placement>> {
        None
    }

    /// Records (or, with `None`, forgets) `upstream`'s session id for this client session.
    /// Errors when the store fails or the client session has ended.
    async fn set_upstream_session(&self, upstream: &str, id: Option<String>) -> Result<(), String>;

    /// Compare-and-set: when `upstream`'s entry is `expected` (`None`: absent), records
    /// `entries` in order (`None` forgets one) and answers `true`; in a node, in one store round
    /// trip, so every node sees all of them or none (an upstream session and its binding).
    /// Otherwise records nothing, answers `false`, and this view now shows the entries as they
    /// are (another node initialized the upstream session first: use its). Errors when the store
    /// fails or the client session has ended. The default compares with this view and writes
    /// the entries one by one with [`SessionHandle::set_upstream_session`].
    async fn swap_upstream_sessions(
        &self,
        upstream: &str,
        expected: Option<&str>,
        entries: Vec<(String, Option<String>)>,
    ) -> Result<bool, String> {
        if self.upstream_session(upstream).as_deref() != expected {
            return Ok(false);
        }
        for (name, id) in entries {
            self.set_upstream_session(&name, id).await?;
        }
        Ok(true)
    }

    /// What the client asked `upstream` to keep for this session (its log level, the resource
    /// subscriptions that upstream accepted), as recorded when the session was loaded: replayed
    /// into every new upstream session of it ([`crate::client_state`]). The default: nothing.
    fn client_state(&self, upstream: &str) -> ClientState {
        let _ = upstream;
        ClientState::default()
    }

    /// Notes that `upstream` (an aggregate's member) served the current request, for a request
    /// whose state the node records with the upstream that accepted it (`resources/subscribe`).
    /// The default: forgotten.
    fn served_by(&self, upstream: &str) {
        let _ = upstream;
    }

    /// Ends the client session cluster-wide, as a DELETE from the client would: afterwards every
    /// node answers 404 for it, its streams close, its requests end and every upstream session
    /// is deleted. An upstream calls this when it lost the session's state and the configured
    /// policy is to make the client start over (`on_upstream_loss = "end_session"`); `reason`
    /// goes to the log. Inside a node's request, the session ends when that request answers:
    /// before the answer can reach the client (so no request the client sends after reading it
    /// is admitted anywhere), and the answer still reaches it, so the client reads why. Errors
    /// when the store fails; the default (no cluster) refuses.
    async fn end_session(&self, reason: &str) -> Result<(), String> {
        let _ = reason;
        Err("this session cannot be ended from here".into())
    }
}

/// What an upstream knows about the request it is serving.
#[derive(Clone)]
pub struct RequestContext {
    /// The client's session id.
    pub session_id: String,
    /// The session's negotiated revision.
    pub revision: Revision,
    /// The client's declared capabilities (from `initialize`), shared by the request's
    /// context and its peer, not copied per request.
    pub client_capabilities: Arc<Value>,
    /// `params._meta.progressToken` of the request, if any.
    pub progress_token: Option<Value>,
    /// Fires when the client cancels the request or the session ends.
    pub cancel: CancellationToken,
    /// The way back to the client.
    pub peer: Arc<dyn ClientPeer>,
    /// The client session's shared state.
    pub session: Arc<dyn SessionHandle>,
    /// Who the request runs as ([`crate::Principal::anonymous`] when authorization is off;
    /// [`crate::Principal::internal`] for the node's own requests and on the owner node of a
    /// forwarded request, whose origin applied the per-principal rules).
    pub principal: Arc<crate::Principal>,
}

/// One MCP server behind the cluster.
#[async_trait]
pub trait Upstream: Send + Sync {
    /// The configured name (used in logs and errors).
    fn name(&self) -> &str;

    /// The server capabilities to advertise in `initialize` (MCP 2025-11-25, basic/lifecycle).
    fn capabilities(&self) -> Value;

    /// `serverInfo` for `initialize`.
    fn server_info(&self) -> Value;

    /// Optional `instructions` for `initialize`.
    fn instructions(&self) -> Option<String> {
        None
    }

    /// [`Upstream::capabilities`] as `principal` may see them: an aggregate under a policy
    /// ([`crate::policy`]) leaves out the members the principal may not use. The default: the
    /// capabilities as they are.
    fn capabilities_for(&self, principal: &crate::Principal) -> Value {
        let _ = principal;
        self.capabilities()
    }

    /// [`Upstream::instructions`] as `principal` may see them: an aggregate under a policy
    /// leaves out the instructions of the members the principal may not use. The default: the
    /// instructions as they are.
    fn instructions_for(&self, principal: &crate::Principal) -> Option<String> {
        let _ = principal;
        self.instructions()
    }

    /// The longest one request to this upstream may take: its `timeout_ms` (the configured
    /// upstream's [`crate::tracked::Tracked`] knows it). The node bounds by it how long a call's
    /// messages may wait for its store (a promotion, a restart; the node's `exec::outage`). The
    /// default: the longest of [`Upstream::members`]' (an aggregate's calls go to one member,
    /// which ends a call at its own timeout anyway); `None` when no member says.
    fn timeout(&self) -> Option<std::time::Duration> {
        self.members().iter().filter_map(|m| m.timeout()).max()
    }

    /// Whether this upstream keeps no per-session state, so that a request without a session
    /// (MCP 2026-07-28, stateless) may be re-run from the start on any node (MRTR re-run mode).
    /// `false` (the default) for upstreams that keep it (a stdio child per session, an upstream
    /// session id): their stateless requests get an ephemeral upstream session each, and a
    /// question parks the call on its node.
    fn serves_stateless(&self) -> bool {
        false
    }

    /// Answers one client request (method and params as sent; `params` is `Value::Null` when the
    /// request has none, which an upstream treats like `{}`). Returns the `result` value or a
    /// JSON-RPC error. Must return promptly with an error once `ctx.cancel` fires.
    async fn request(
        &self,
        method: &str,
        params: Value,
        ctx: RequestContext,
    ) -> Result<Value, RpcError>;

    /// The member upstreams behind this one (an aggregate lists its members; a plain upstream
    /// none). The node uses it to find a node-bound member by name when a request for it is
    /// forwarded from another node.
    fn members(&self) -> Vec<Arc<dyn Upstream>> {
        Vec::new()
    }

    /// Called once when the node starts, before it serves: an upstream may probe its server here
    /// (initialize, read capabilities) so that [`Upstream::capabilities`] is known. Must not fail
    /// the node: an unreachable server is logged and retried later.
    async fn prepare(&self) {}

    /// A client notification other than the session-level ones (e.g.
    /// `notifications/roots/list_changed`), with the session it belongs to.
    async fn notify(&self, _method: &str, _params: Value, _session: Arc<dyn SessionHandle>) {}

    /// The session ended (DELETE or expiry): release whatever is held for it.
    async fn session_ended(&self, _session_id: &str) {}

    /// Whether `principal` may see item `name` of `kind` (the `[policy]`, [`crate::policy`]): the
    /// node asks it for what it filters itself (the URIs of a 2026-07-28 `subscriptions/listen`).
    /// `true` (the default) for an upstream without a policy.
    fn visible(
        &self,
        _principal: &crate::Principal,
        _kind: crate::item::Kind,
        _name: &str,
    ) -> bool {
        true
    }

    /// The scopes `principal`'s credential lacks for request `method` with `params`, when a
    /// wider token would let it through (the `[policy]`'s step-up, [`crate::policy::Policy::lacking_scopes`]):
    /// the node refuses the request with 403 and an `insufficient_scope` challenge naming them.
    /// `None` (the default, and for an upstream without a policy): nothing lacks.
    fn lacking_scopes(
        &self,
        _principal: &crate::Principal,
        _method: &str,
        _params: &Value,
    ) -> Option<Vec<String>> {
        None
    }

    /// Client sessions for which this upstream holds something in this process (a stdio child, a
    /// legacy SSE connection, a GET-stream listener). The node checks them now and then and ends
    /// those whose session is gone from the store (e.g. lost with a Redis restart), so nothing
    /// outlives its session.
    fn held_sessions(&self) -> Vec<String> {
        Vec::new()
    }

    /// `(upstream name, client session)` of every node-bound resource this process holds under
    /// an ownership claim (a per-session stdio child, a legacy SSE connection: see
    /// the `placement` module). The node stops those whose session record names another owner
    /// now (a node that stalled past `cluster.node_ttl` and was taken over), by
    /// [`Upstream::session_ended`] of the member of that name. The default: every member's.
    fn owned_sessions(&self) -> Vec<(String, String)> {
        self.members()
            .iter()
            .flat_map(|m| m.owned_sessions())
            .collect()
    }

    /// The node is fenced: it has not reached the store for two `cluster.node_ttl`s, so the
    /// other nodes take it for dead (the node's `replica`). Stop what another node
    /// resumes and what only holds messages back here: an http upstream stops its GET-stream
    /// listeners (a cut-off listener could log none of its notifications, and an upstream sends
    /// each message on one stream only, so it could keep choosing this one); the node that takes
    /// the lease over resumes from the stored `Last-Event-ID`, and this node starts its listener
    /// again on a later request if it still holds the lease. Stdio children and legacy SSE
    /// connections keep running (their state is not resumable; a node that took them over stops
    /// them once this node reaches the store again). The default passes it to
    /// [`Upstream::members`].
    async fn fenced(&self) {
        let members = self.members();
        futures::future::join_all(members.iter().map(|m| m.fenced())).await;
    }

    /// The node is about to exit (after its drain): stop every process and connection this
    /// upstream holds, and wait until they are gone (no orphaned children, MCP stdio transport).
    async fn shutdown(&self) {}

    /// What this node knows of the health of the configured upstreams behind this one
    /// ([`crate::status`]): an aggregate returns its members', a wrapper its inner one's, a
    /// stdio upstream its children, restarts and back-off. The default, none: the `Tracked`
    /// wrapper (`tracked`), which the `build` step puts around every configured upstream,
    /// makes one from its call counters.
    fn statuses(&self) -> Vec<crate::status::UpstreamStatus> {
        Vec::new()
    }

    /// Brings what [`Upstream::statuses`] reports up to date where that needs I/O, before a
    /// status is read: an http upstream whose last resolution of its host is older than its
    /// `resolve_interval_ms` resolves it again, so a replica that left the name is not shown as
    /// current. The caller bounds the wait. The default does nothing; an aggregate or a wrapper
    /// passes it on.
    async fn refresh_statuses(&self) {}
}

/// Where a node-bound upstream's resource of one session lives.
#[derive(Clone, Debug, PartialEq)]
pub enum Owner {
    /// On this node (claimed now, or already ours).
    Here,
    /// On that live node.
    Node(String),
}

/// How a request sent to its owner node ended ([`Placement::forward`]).
#[derive(Debug)]
pub enum Forwarded {
    /// The owner ran it (or it was cancelled): its outcome.
    Answered(Result<Value, RpcError>),
    /// The wait ran out first; the request was cancelled on the owner.
    TimedOut,
    /// The owner did not run it, and will not: it is stopping or has stopped, and said so. The
    /// request may run on another node.
    Moved,
    /// The owner stopped heartbeating before it answered: it may have run the request in part
    /// or in full. The error (-32006) names the upstream and the node.
    Lost(RpcError),
}

/// The cluster service node-bound upstreams use (the `placement` module: owners, forwarding,
/// failover). Implemented by the node.
#[async_trait]
pub trait Placement: Send + Sync {
    /// Finds (claiming it when free, or when its owner is dead) the owner of `upstream`'s
    /// resource for this session.
    async fn owner(&self, session: &dyn SessionHandle, upstream: &str) -> Result<Owner, RpcError>;

    /// Claims `upstream`'s resource for this node even from a live owner (a compare-and-set in
    /// the store expecting the owner the session record named when it was loaded, even when
    /// that was this node): for a resource the caller just made anew, such as the GET stream of
    /// a re-initialized upstream session. Answers the owner after the claim (another node when
    /// the record changed meanwhile: the caller must then leave the resource to it). The
    /// default claims nothing and answers [`Owner::Here`].
    async fn take(&self, session: &dyn SessionHandle, upstream: &str) -> Result<Owner, RpcError> {
        let _ = (session, upstream);
        Ok(Owner::Here)
    }

    /// Claims the owner of `upstream`'s resource for this session from node `from`, which
    /// answered [`Forwarded::Moved`] or [`Forwarded::Lost`]: [`Owner::Here`] when this node now
    /// owns it, or the node that took it over from `from` first.
    async fn take_over(
        &self,
        session: &dyn SessionHandle,
        upstream: &str,
        from: &str,
    ) -> Result<Owner, RpcError>;

    /// Runs `method` of member `upstream` on `node`, waiting at most `wait` for its outcome (then
    /// it is cancelled there: [`Forwarded::TimedOut`]). Notifications and server-to-client
    /// requests it produces reach the client through `ctx.peer`; cancelling `ctx.cancel` cancels
    /// it there.
    async fn forward(
        &self,
        node: &str,
        upstream: &str,
        method: &str,
        params: &Value,
        ctx: &RequestContext,
        wait: Duration,
    ) -> Forwarded;

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
