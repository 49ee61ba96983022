//! Records and messages kept in, and carried by, the store.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::bus::{BusSettings, Routed};

/// The full state of one MCP session (MCP 2025-11-25, basic/lifecycle and basic/transports,
/// Session Management). Any node rebuilds its view of the session from this alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The session id (32 hex characters).
    pub id: String,
    /// The negotiated revision, e.g. `"2025-11-25"`.
    pub revision: String,
    /// The `initialize` request's `params` as the client sent them (capabilities, clientInfo,
    /// protocolVersion); kept so an upstream can be re-initialized on another node. Shared, not
    /// copied, by every request's handle on the session.
    pub initialize_params: Arc<Value>,
    /// Whether `notifications/initialized` has arrived.
    pub initialized: bool,
    /// Level set by `logging/setLevel` (RFC 5424 name), if any.
    pub log_level: Option<String>,
    /// Resource URIs the client subscribed to (`resources/subscribe`).
    pub subscriptions: Vec<String>,
    /// Subscribed URI → the upstream (an aggregate's member name) that accepted the
    /// subscription, so that a new upstream session of that upstream (re-initialized, a new
    /// stdio child) is subscribed again, and no other is. A URI missing here (recorded by a node
    /// of an earlier version) is replayed nowhere.
    #[serde(default)]
    pub subscription_upstreams: BTreeMap<String, String>,
    /// The principal the session is bound to; `"anonymous"` until authentication exists.
    pub principal: String,
    /// Upstream name → that upstream's own `Mcp-Session-Id`.
    pub upstream_sessions: BTreeMap<String, String>,
    /// Upstream name → the node that owns this session's node-bound resource of it (a stdio
    /// child). Claimed with `SessionStore::claim_owner`; a dead owner's entry is taken over.
    #[serde(default)]
    pub owners: BTreeMap<String, String>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: u64,
}

impl SessionRecord {
    /// The client's declared capabilities (`initialize_params.capabilities`), or `{}`.
    pub fn client_capabilities(&self) -> &Value {
        self.initialize_params
            .get("capabilities")
            .unwrap_or(&Value::Null)
    }

    /// Applies one [`SessionUpdate`] (the memory store's update; the Redis backend does the same
    /// in Lua, and applies it here to a record it has cached at the version the update changed).
    pub fn apply(&mut self, update: SessionUpdate) {
        match update {
            SessionUpdate::Initialized => self.initialized = true,
            SessionUpdate::Initialize { revision, params } => {
                self.revision = revision;
                self.initialize_params = Arc::new(params);
            }
            SessionUpdate::LogLevel(level) => self.log_level = Some(level),
            SessionUpdate::Subscription {
                uri,
                subscribed: true,
                upstream,
            } => {
                match upstream {
                    Some(name) => self.subscription_upstreams.insert(uri.clone(), name),
                    None => self.subscription_upstreams.remove(&uri),
                };
                if !self.subscriptions.contains(&uri) {
                    self.subscriptions.push(uri);
                }
            }
            SessionUpdate::Subscription {
                uri,
                subscribed: false,
                ..
            } => {
                self.subscription_upstreams.remove(&uri);
                self.subscriptions.retain(|u| *u != uri);
            }
            SessionUpdate::UpstreamSession {
                upstream,
                session_id: Some(id),
            } => {
                self.upstream_sessions.insert(upstream, id);
            }
            SessionUpdate::UpstreamSession {
                upstream,
                session_id: None,
            } => {
                self.upstream_sessions.remove(&upstream);
            }
        }
    }
}

/// One change to a session record.
#[derive(Clone, Debug, PartialEq)]
pub enum SessionUpdate {
    /// `notifications/initialized` arrived.
    Initialized,
    /// `initialize` arrived on a session that already exists: the legacy HTTP+SSE transport (MCP
    /// 2024-11-05, basic/transports, HTTP with SSE) creates the session when the client opens its
    /// SSE stream, before the client says which revision it speaks and what it can do.
    Initialize {
        /// The negotiated revision.
        revision: String,
        /// The `initialize` request's `params`.
        params: Value,
    },
    /// `logging/setLevel`.
    LogLevel(String),
    /// `resources/subscribe` (true) or `resources/unsubscribe` (false) for a URI.
    Subscription {
        /// The resource URI.
        uri: String,
        /// Subscribe or unsubscribe.
        subscribed: bool,
        /// The upstream that accepted it (an aggregate's member name), when known: recorded
        /// with a subscription (replaced, or forgotten with `None`), ignored by an
        /// unsubscription, which forgets it.
        upstream: Option<String>,
    },
    /// An upstream minted (or re-minted) its own session id.
    UpstreamSession {
        /// The upstream's configured name.
        upstream: String,
        /// Its `Mcp-Session-Id`; `None` removes it.
        session_id: Option<String>,
    },
}

/// Settings of a store. All durations are wall-clock.
#[derive(Clone, Debug, PartialEq)]
pub struct StoreConfig {
    /// This node's id (unique per process; appears in holder tokens and bus channels).
    pub node_id: String,
    /// Prefix of every Redis key and channel (default `sb`), so several clusters can share a Redis.
    pub key_prefix: String,
    /// A node whose heartbeat is older than this is dead (default 5 s); its in-flight requests are
    /// failed by whichever node the client resumes on.
    pub node_ttl: Duration,
    /// A session with no in-flight request and no open stream ends this long after its last
    /// request finished (default 30 min).
    pub idle_ttl: Duration,
    /// Global cap on live sessions; `create_session` answers [`CreateOutcome::AtCapacity`] past it.
    pub max_sessions: u64,
    /// Cap on the live sessions of one principal ([`SessionRecord::principal`]; default 0: no
    /// cap); `create_session` answers [`CreateOutcome::PrincipalAtCapacity`] past it. Counted like
    /// `max_sessions` (a session counts until it is deleted or reaped).
    pub max_sessions_per_principal: u64,
    /// Each stream's event log keeps at most this many events (oldest trimmed first).
    pub max_events_per_stream: u64,
    /// Each stream's event log keeps at most this many bytes of event data (default 16 MiB;
    /// oldest trimmed first, exactly as the count cap). At least `max_event_bytes`.
    pub max_stream_log_bytes: u64,
    /// All of a session's event logs together keep at most this many bytes (default 64 MiB);
    /// past it the session's oldest events, whichever stream holds them, are trimmed. At least
    /// `max_stream_log_bytes`.
    pub max_session_log_bytes: u64,
    /// The largest event stored as it is (default 4 MiB); a larger one is delivered live and the
    /// log keeps a stand-in (the `caps` module).
    pub max_event_bytes: u64,
    /// Requests one session may have in flight at once (default 64); `begin` answers
    /// [`BeginOutcome::Busy`] past it. Bounds the live streams and logs of a session.
    pub max_inflight_per_session: u64,
    /// Session records this node keeps to skip reading them whole on every request (default
    /// 4,096; 0 disables). A cached record is only used when Redis confirms its version in the
    /// request's own admission (the same round trip); with a cached record that admission needs
    /// no Lua script. When full, an arbitrary entry makes room. Redis backend only.
    pub record_cache_entries: usize,
    /// Replicas that must confirm an event append or a session creation before it counts as done
    /// (default 0: Redis's asynchronous replication alone). Above 0, each of those writes is
    /// followed, in the same pipeline, by `WAIT <n> <replicas_ack_timeout>`; fewer confirmations
    /// fail the write with [`crate::StoreError::NotReplicated`] (the primary keeps it). Redis
    /// backend only (the memory store has no replicas).
    pub min_replicas_acked: u32,
    /// How long one `WAIT` for `min_replicas_acked` replicas may take (default 500 ms).
    pub replicas_ack_timeout: Duration,
    /// How messages between nodes are kept until delivered ([`BusSettings`]).
    pub bus: BusSettings,
}

impl StoreConfig {
    /// The defaults for node `cluster.node_id`: key prefix `sb`, node TTL 5 s, idle TTL 30 min, at most
    /// 100 000 sessions and 1 000 events per stream.
    pub fn default_for(node_id: impl Into<String>) -> StoreConfig {
        StoreConfig {
            node_id: node_id.into(),
            key_prefix: "sb".to_owned(),
            node_ttl: Duration::from_secs(5),
            idle_ttl: Duration::from_secs(30 * 60),
            max_sessions: 100_000,
            max_sessions_per_principal: 0,
            max_events_per_stream: 1_000,
            max_stream_log_bytes: 16 << 20,
            max_session_log_bytes: 64 << 20,
            max_event_bytes: 4 << 20,
            max_inflight_per_session: 64,
            record_cache_entries: 4_096,
            min_replicas_acked: 0,
            replicas_ack_timeout: Duration::from_millis(500),
            bus: BusSettings::default(),
        }
    }
}

impl Default for StoreConfig {
    /// [`StoreConfig::default_for`] with a random node id `node-<8 hex digits>`.
    fn default() -> StoreConfig {
        StoreConfig::default_for(format!("node-{:08x}", rand::random::<u32>()))
    }
}

/// What the store's servers do with keys at their memory limit: Redis's `maxmemory-policy`
/// ([`Liveness::memory_policy`](crate::Liveness::memory_policy); the `eviction` module says why
/// it matters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemoryPolicy {
    /// No Redis: the memory backend keeps its state in this process and evicts nothing.
    NotApplicable,
    /// Every server asked runs `noeviction`: at its limit a write fails (`OOM`, a 503 for the
    /// request) and no key is taken away.
    NoEviction,
    /// A server may evict keys at its limit (every policy but `noeviction`).
    Evicting {
        /// Its policy (`volatile-ttl`, `allkeys-lru`, …), as Redis spells it.
        policy: String,
        /// Which server: its `host:port` (Sentinel's primary, a Cluster primary) or the
        /// standalone URL (password hidden).
        server: String,
    },
}

/// What `SessionStore::claim_owner` did.
#[derive(Clone, Debug, PartialEq)]
pub enum OwnerClaim {
    /// This node now owns it.
    Claimed,
    /// The owner was not the expected one: it is this node (the value).
    Held(String),
    /// The session is gone.
    Missing,
}

/// What `swap_upstream_sessions` did.
#[derive(Clone, Debug, PartialEq)]
pub enum UpstreamSwap {
    /// The entry was as expected: the new entries are stored.
    Swapped,
    /// The entry was not as expected (another node changed it first): nothing was stored; the
    /// upstream-session map as it is.
    Changed(std::collections::BTreeMap<String, String>),
    /// The session is gone.
    Missing,
}

/// What `create_session` did.
#[derive(Clone, Debug, PartialEq)]
pub enum CreateOutcome {
    /// The record is stored.
    Created,
    /// The global cap is reached; nothing was stored.
    AtCapacity,
    /// The record's principal has `max_sessions_per_principal` sessions; nothing was stored.
    PrincipalAtCapacity,
}

/// Registration of a request that is starting on a node, written in the same round trip as the
/// session load (see [`crate::SessionStore::begin`]).
#[derive(Clone, Debug, PartialEq)]
pub struct InflightRequest {
    /// [`switchboard_protocol::RequestId::key`] of the client's request id.
    pub request_key: String,
    /// The POST response stream this request answers on.
    pub stream: String,
    /// The node running the request (and, at first, holding the stream).
    pub node: String,
    /// The connection token holding the stream on that node.
    pub holder: String,
}

/// A client request registered in flight in a session (see [`crate::SessionStore::in_flight`]).
#[derive(Clone, Debug, PartialEq)]
pub struct InflightEntry {
    /// [`switchboard_protocol::RequestId::key`] of the client's request id.
    pub request_key: String,
    /// The node running it.
    pub node: String,
    /// The POST response stream it answers on.
    pub stream: String,
}

/// What `begin` found.
#[derive(Clone, Debug, PartialEq)]
pub enum BeginOutcome {
    /// No such session (never existed, expired or deleted): answer 404.
    Missing,
    /// The session, now touched; the in-flight request (if any) is registered.
    Ready(SessionRecord),
    /// The session already has `session.max_inflight` requests in flight; nothing was
    /// registered.
    Busy(SessionRecord),
    /// The session exists but a request with the same id is already in flight in it; nothing was
    /// registered. `node` is the node running it (it may be dead: check liveness).
    DuplicateId {
        /// The session record.
        record: SessionRecord,
        /// The node running the other request.
        node: String,
    },
    /// The session exists and the request passed the other checks, but one of its rate limits
    /// refused it ([`crate::rate`]); nothing was registered and no rate moved.
    Limited {
        /// The session record.
        record: SessionRecord,
        /// The refusing limit's name.
        limit: String,
        /// Milliseconds until the request would pass (at least 1).
        retry_after_ms: u64,
    },
}

/// One event of a stream's log.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedEvent {
    /// The log position (`<ms>-<seq>`).
    pub position: String,
    /// The JSON-RPC message text.
    pub data: String,
    /// Whether this event ends the stream (it carries the final response).
    pub end: bool,
}

/// Result of reading a stream's log after a position.
#[derive(Clone, Debug, PartialEq)]
pub enum Replay {
    /// The events after the given position, in order (maybe none).
    Events(Vec<LoggedEvent>),
    /// The stream is not known in this session (never existed, or its log has expired).
    UnknownStream,
    /// The position is older than the oldest retained event: events were trimmed away.
    Truncated {
        /// The oldest position still retained.
        oldest: String,
    },
}

/// Who is running the request of a POST response stream.
#[derive(Clone, Debug, PartialEq)]
pub struct RunningRequest {
    /// The node running it.
    pub node: String,
    /// [`switchboard_protocol::RequestId::key`] of the client's request id.
    pub request_key: String,
}

/// Result of claiming a stream.
#[derive(Clone, Debug, PartialEq)]
pub enum Claim {
    /// The stream is not known in this session; nothing changed.
    Unknown,
    /// `holder` now holds the stream.
    Claimed {
        /// The connection that held it before, if any.
        previous: Option<String>,
        /// The newest position in the stream's log, if it has any events.
        last_position: Option<String>,
    },
}

/// Result of appending an event.
#[derive(Clone, Debug, PartialEq)]
pub struct Appended {
    /// The new event's log position.
    pub position: String,
    /// The token of the connection holding the stream, if any. When it lives on another node (or
    /// the stream is the standalone one) the store has already delivered the event to that node's
    /// inbox; otherwise, when it lives on the calling node, the caller delivers it locally.
    pub holder: Option<String>,
}

impl Appended {
    /// What `append` answers when the session no longer exists: nothing was stored, the position
    /// is [`switchboard_protocol::EventId::START`] and there is no holder.
    pub fn not_stored() -> Appended {
        Appended {
            position: switchboard_protocol::EventId::START.to_owned(),
            holder: None,
        }
    }

    /// Whether the event was stored (false only for [`Appended::not_stored`]).
    pub fn is_stored(&self) -> bool {
        self.position != switchboard_protocol::EventId::START
    }
}

/// A message from the bus to one node's inbox.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum BusMessage {
    /// A new event on a stream whose connection `holder` is on the receiving node (also
    /// published by the Redis append script, as `{"t": "event", …}`).
    Event(BusEvent),
    /// Another connection took the stream over: connection `holder` must close.
    Takeover {
        /// Session id.
        sid: String,
        /// Stream id.
        stream: String,
        /// The connection that lost the stream.
        holder: String,
    },
    /// The client answered server-to-client request `request_key`; `message` is its JSON-RPC
    /// response.
    Reply {
        /// Session id.
        sid: String,
        /// [`switchboard_protocol::RequestId::key`] of the server-issued id.
        request_key: String,
        /// The JSON-RPC response message, as the client sent it.
        message: Value,
        /// The `traceparent` of the span that routed it (W3C Trace Context), when tracing is
        /// on: the waiting node's span continues that trace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
    },
    /// `notifications/cancelled` for client request `request_key`.
    Cancel {
        /// Session id.
        sid: String,
        /// The cancelled request's id key.
        request_key: String,
        /// The reason the client gave.
        reason: Option<String>,
    },
    /// Run a request of a node-bound upstream on the node that owns it (sent to the owner).
    Forward(Box<ForwardRequest>),
    /// A notification or server-to-client request the owner produced for a forwarded call (sent
    /// to the origin, which puts it on the client's stream as is).
    ForwardMessage {
        /// Call id.
        call: String,
        /// The JSON-RPC message.
        message: Value,
    },
    /// A client notification for a node-bound upstream (sent to the owner of its resource).
    ForwardNotify(ForwardNotification),
    /// A forwarded call finished (sent to the origin).
    ForwardDone {
        /// Call id.
        call: String,
        /// `{"result": …}`, `{"error": {code, message, data?}}` or `{"moved": <node>}` (the
        /// owner was stopping); a resumed parked request sends its JSON-RPC response as is.
        /// (A `Value`, not an enum: these four shapes are read by `decode_forwarded` and
        /// `resume_here`.)
        outcome: Value,
    },
    /// The client cancelled a forwarded call (sent to the owner).
    ForwardCancel {
        /// Call id.
        call: String,
        /// The origin node (call ids are unique per origin).
        origin: String,
    },
    /// A 2026-07-28 retry resumes a request parked on the receiving node (MRTR with an upstream
    /// that keeps per-session state): deliver `answers` to its questions and stream what the
    /// call produces next back to `origin` as `ForwardMessage`s and one `ForwardDone` for
    /// `call`.
    Resume {
        /// Call id on the origin.
        call: String,
        /// The node holding the client's retry.
        origin: String,
        /// The parked request's id on the receiving node.
        park: String,
        /// The answers (`inputResponses` of the asked keys).
        answers: serde_json::Map<String, Value>,
    },
    /// `tasks/update` answers for a task whose call runs on the receiving node.
    TaskInput {
        /// The task id.
        task: String,
        /// Its `inputResponses`.
        answers: serde_json::Map<String, Value>,
    },
    /// Local only, never published: this node's inbox was disconnected and has resubscribed, so
    /// messages sent to it meanwhile may be lost. Held streams catch up from their event logs.
    Resubscribed {},
    /// The session ended (DELETE or expiry): close its streams and stop its calls. Sent to every
    /// node.
    Terminated {
        /// Session id.
        sid: String,
    },
    /// A server notification for the `subscriptions/listen` streams of every node (MCP
    /// 2026-07-28, basic/patterns/subscriptions). Sent to every node, the origin included.
    Notify {
        /// The node it was raised on (for logs).
        origin: String,
        /// The JSON-RPC notification, as the upstream raised it (no subscription id yet).
        message: Value,
        /// Set for a notification only its principal's listeners may get (`notifications/tasks`:
        /// the task's principal); `None`: any listener whose filter matches.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        principal: Option<String>,
    },
}

/// A new event on a stream, for the connection `holder` on the receiving node
/// ([`BusMessage::Event`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BusEvent {
    /// Session id.
    pub sid: String,
    /// Stream id.
    pub stream: String,
    /// Connection token that should get it.
    pub holder: String,
    /// Log position.
    pub position: String,
    /// JSON-RPC text, as logged.
    pub data: String,
    /// Final event of the stream.
    pub end: bool,
    /// Set by this node's inbox (never sent): the event may follow events this node missed (its
    /// subscriptions were lost and restored shortly before), so the connection re-reads its log
    /// up to this event instead of writing it as is, which would move the stream past them.
    #[serde(default, skip_serializing)]
    pub verify: bool,
}

/// A request of a node-bound upstream sent to the node that owns it ([`BusMessage::Forward`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForwardRequest {
    /// Call id, unique on the origin node.
    pub call: String,
    /// The origin node (where the client's POST is).
    pub origin: String,
    /// Session id.
    pub sid: String,
    /// The member upstream's configured name.
    pub upstream: String,
    /// The JSON-RPC method.
    pub method: String,
    /// Its params.
    pub params: Value,
    /// What the owner needs of the request's context.
    pub context: ForwardContext,
    /// The `traceparent` of the origin's span that forwarded it (W3C Trace Context), when
    /// tracing is on: the owner's run continues that trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// What the owner of a node-bound upstream needs of a forwarded request's context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForwardContext {
    /// The session's protocol revision (e.g. `2025-11-25`).
    pub revision: String,
    /// The client's capabilities (`initialize` params).
    pub capabilities: Value,
    /// The request's `_meta.progressToken`, if any.
    pub progress_token: Option<Value>,
    /// Why the client cannot take server-to-client requests on this call (`None`: it can).
    pub no_requests: Option<String>,
}

/// A client notification for a node-bound upstream, sent to the owner of its resource
/// ([`BusMessage::ForwardNotify`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForwardNotification {
    /// Session id.
    pub sid: String,
    /// The member upstream's configured name.
    pub upstream: String,
    /// The notification's method.
    pub method: String,
    /// Its params.
    pub params: Value,
}
