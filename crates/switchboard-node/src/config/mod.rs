//! The node's settings (everything except the store's, which live in
//! [`switchboard_store::StoreConfig`]). Every limit is here with its unit and default.

pub mod auth;
pub mod rate_limits;

use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};

/// The smallest useful `max_request_head_bytes`: hyper's smallest read-buffer cap (its initial
/// read buffer; it panics below it), so the connection loop never sets less and the config
/// refuses less (`http.max_request_head`).
pub const MIN_REQUEST_HEAD_BYTES: usize = 8192;

/// Settings of one node's HTTP front. Defaults are what `Default` gives.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeConfig {
    /// Path of the MCP endpoint (default `/mcp`).
    pub endpoint_path: String,
    /// Path of the WebSocket transport (the `websocket` module, default `/ws`); empty: no WebSocket
    /// route (the path gets 404).
    pub websocket_path: String,
    /// Origins allowed besides loopback ones (`http(s)://localhost|127.0.0.1|[::1][:port]`, always
    /// allowed). Exact `scheme://host[:port]` strings; `*` allows any. A request whose `Origin` is
    /// not allowed gets 403 (MCP 2025-11-25, basic/transports, Security Warning). Default: empty.
    pub allowed_origins: Vec<String>,
    /// Hosts (without port) allowed in the `Host` header. Empty (the default) means: only loopback
    /// names when the node listens on a loopback address, any host otherwise. A refused Host gets
    /// 421 Misdirected Request (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// `Access-Control-Max-Age` of a CORS preflight answer: how long a browser may reuse it
    /// (default 2 h; browsers cap it, Chromium at 2 h).
    pub cors_max_age: Duration,
    /// Whether the node listens on a loopback address (set from the bound listener).
    pub loopback_only: bool,
    /// Interval of SSE comment keep-alives on every open stream and of WebSocket pings (a socket
    /// that left two unanswered is closed) (default 15 s).
    pub keepalive_interval: Duration,
    /// SSE `retry` sent to clients that negotiated 2025-11-25 or later, in ms (default 3000).
    pub sse_retry_ms: u64,
    /// A request whose answer is not ready within this time, or that sends anything before its
    /// answer, is answered as an SSE stream; otherwise as one `application/json` body
    /// (default 50 ms).
    pub sse_after: Duration,
    /// Tasks extension (2026-07-28): a `tools/call` from a client that declared
    /// `io.modelcontextprotocol/tasks` and has not finished within this time is answered with a
    /// task (`resultType: "task"`) and keeps running detached from its HTTP response (default 1 s).
    pub task_after: Duration,
    /// Lifetime of a task from its creation (`ttlMs`, default 1 h): then the node running it
    /// cancels its call if it still runs and ends the record, leaving a tombstone.
    pub task_ttl: Duration,
    /// How long an expired task's tombstone is kept (default 10 min): meanwhile `tasks/*` on it
    /// answer -32602 with `data.reason = "expired"`, then "unknown task".
    pub task_expired_grace: Duration,
    /// Most tasks one principal has running at once, cluster-wide (default 64); past it a call
    /// that would become a task is cancelled and refused with 503 and -32003.
    pub max_tasks_per_principal: usize,
    /// Polling interval suggested to clients in every task (`pollIntervalMs`, default 1 s).
    pub task_poll_interval: Duration,
    /// How long a server-to-client request (sampling, elicitation, roots, ping) waits for the
    /// client's answer before the upstream gets an error (default 60 s).
    pub client_request_timeout: Duration,
    /// Interval of this node's liveness heartbeat in the store (default 1 s); must be well under the
    /// store's `node_ttl`.
    pub heartbeat_interval: Duration,
    /// The store's `node_ttl` (`cluster.node_ttl`, default 5 s): a heartbeat not answered within
    /// it counts as failed, and a node none of whose heartbeats was answered for longer stops
    /// serving until one is (`replica`).
    pub node_ttl: Duration,
    /// Interval of the reaper pass (default 10 s). The pass runs on one node at a time; after it
    /// each node checks what its upstreams hold against the store (the `held` module).
    pub reaper_interval: Duration,
    /// A resumed stream whose request runs on another node checks that node's liveness this often
    /// (default 1 s); a dead node's request is answered with a JSON-RPC error.
    pub liveness_check_interval: Duration,
    /// Largest accepted POST body in bytes (default 4 MiB); larger gets 413. Also the largest
    /// WebSocket message (larger closes the socket with 1009).
    pub max_body_bytes: usize,
    /// Largest HTTP/1 request head (request line and headers) in bytes, and the cap on each
    /// connection's read buffer (default 16 KiB; values under hyper's minimum of 8 KiB count as 8
    /// KiB). A larger head gets 431. The buffer starts at 8 KiB and grows only when a read fills
    /// it (a large body arriving fast); the cap bounds what a connection keeps afterwards.
    pub max_request_head_bytes: usize,
    /// How long a request head (request line and headers) may take to arrive (default 30 s);
    /// then the connection is closed without an answer (a slowloris client). Also bounds how
    /// long an idle keep-alive connection waits for its next request.
    pub header_read_timeout: Duration,
    /// How long a POST body may take to arrive in full, counted from the end of its head
    /// (default 30 s); then the request gets 408 with JSON-RPC -32600 and `Connection: close`
    /// (a client that sends its body a byte at a time).
    pub body_read_timeout: Duration,
    /// Sessions one principal may hold at once (default 0: no cap; the store enforces it, see
    /// `StoreConfig::max_sessions_per_principal`); named in the 429 past it.
    pub max_sessions_per_principal: u64,
    /// `Retry-After` seconds sent with 503 when the session cap is reached (default 5).
    pub retry_after_secs: u64,
    /// Events queued per open stream connection (default 256). When full, the connection catches
    /// up from the event log instead of losing events.
    pub connection_queue: usize,
    /// Resource subscriptions one session may record (default 64); `resources/subscribe` past it
    /// gets -32602. Also the most URIs one `subscriptions/listen` may name.
    pub max_subscriptions: usize,
    /// Longest resource URI accepted for a subscription (session or listen), in bytes (default
    /// 2048); longer gets -32602.
    pub max_uri_bytes: usize,
    /// `subscriptions/listen` streams one node serves at once (default 10000); past it the
    /// request gets 503 with JSON-RPC -32003.
    pub max_listeners: usize,
    /// Most 2026-07-28 requests running at once on this node in an upstream session of their own
    /// (upstreams with per-session state: a stdio child or an upstream `initialize` each),
    /// parked ones included (default 256); past it such a request gets 503 with -32003.
    pub max_ephemeral_sessions: usize,
    /// Notifications queued per `subscriptions/listen` stream (default 64). A stream whose queue
    /// is full (a slow reader) is ended with its closing result; the others never wait for it.
    pub listen_queue: usize,
    /// Longest `_meta.progressToken` accepted, in bytes of its JSON text (default 256): every
    /// progress notification echoes it into the event log; longer gets -32602.
    pub max_progress_token_bytes: usize,
    /// Largest `initialize` params accepted, in bytes of their JSON text (default 64 KiB): they
    /// are kept in the session record for the session's life; larger gets -32602.
    pub max_initialize_params_bytes: usize,
    /// On SIGTERM the node stops accepting connections, closes standalone GET streams (clients
    /// reopen them on other nodes) and lets running requests finish and answer on their streams for
    /// at most this long (default 30 s); whatever still runs then is abandoned and fails on the
    /// node the client resumes on once this node's heartbeat lapses.
    pub drain_timeout: Duration,
    /// How often this node refreshes the expiry of sessions that have an open stream or a running
    /// call here (default 10 s; keep it well under the store's `idle_ttl`).
    pub session_touch_interval: Duration,
    /// The OAuth 2.1 resource-server layer ([`crate::edge::auth`]); `None` (the default): off, every
    /// session's principal is `anonymous`.
    pub auth: Option<auth::AuthSettings>,
    /// Path of the legacy HTTP+SSE transport's SSE endpoint (MCP 2024-11-05, basic/transports,
    /// HTTP with SSE; the `legacy_sse` module), default `/sse`. Empty: the legacy transport is off
    /// (both its paths get 404).
    pub legacy_sse_path: String,
    /// Path clients of the legacy transport POST their messages to (`?sessionId=<id>`), default
    /// `/messages`. Empty: the legacy transport is off.
    pub legacy_messages_path: String,
    /// Multi round-trip requests of the stateless era: the keys that seal `requestState`, its
    /// lifetime and size limit (the stateless MRTR module).
    pub mrtr: MrtrSettings,
    /// A listener of its own for `/metrics` and `/upstreamz` (then not served on the public
    /// listener); `None`: both beside the MCP endpoint.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Rate limits ([`crate::limits`]); none by default.
    pub rate_limits: rate_limits::RateLimitSettings,
    /// Redis's `maxmemory-policy` ([`switchboard_store::eviction`]): whether a policy that may
    /// evict keys is accepted (`redis.allow_eviction`, default no: the node refuses to start,
    /// and reports not ready when the policy changes to one) and how often it is read again
    /// (`redis.eviction_check_interval`, default 30 s).
    pub eviction: switchboard_store::eviction::EvictionSettings,
}

/// The setting that accepts an evicting `maxmemory-policy`, as messages name it.
pub const EVICTION_OPT_IN: &str = "redis.allow_eviction = true";

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            endpoint_path: "/mcp".into(),
            websocket_path: "/ws".into(),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            cors_max_age: Duration::from_secs(7200),
            loopback_only: true,
            keepalive_interval: Duration::from_secs(15),
            sse_retry_ms: 3000,
            sse_after: Duration::from_millis(50),
            task_after: Duration::from_secs(1),
            task_ttl: Duration::from_secs(3600),
            task_expired_grace: Duration::from_secs(600),
            max_tasks_per_principal: 64,
            task_poll_interval: Duration::from_secs(1),
            client_request_timeout: Duration::from_secs(60),
            heartbeat_interval: Duration::from_secs(1),
            node_ttl: Duration::from_secs(5),
            reaper_interval: Duration::from_secs(10),
            liveness_check_interval: Duration::from_secs(1),
            max_body_bytes: 4 * 1024 * 1024,
            max_request_head_bytes: 16 * 1024,
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(30),
            max_sessions_per_principal: 0,
            retry_after_secs: 5,
            connection_queue: 256,
            max_subscriptions: 64,
            max_uri_bytes: 2048,
            max_listeners: 10_000,
            max_ephemeral_sessions: 256,
            listen_queue: 64,
            max_progress_token_bytes: 256,
            max_initialize_params_bytes: 64 * 1024,
            drain_timeout: Duration::from_secs(30),
            session_touch_interval: Duration::from_secs(10),
            auth: None,
            legacy_sse_path: "/sse".into(),
            legacy_messages_path: "/messages".into(),
            mrtr: Default::default(),
            metrics_listen: None,
            rate_limits: Default::default(),
            eviction: Default::default(),
        }
    }
}

/// Bytes of one MRTR state key (AES-256-GCM): what `stateless.mrtr.state_keys` entries decode to.
pub const KEY_LEN: usize = 32;

/// `[stateless.mrtr]`: multi round-trip requests of the stateless era (MCP 2026-07-28), read by
/// the stateless MRTR module. The config section is this struct: its keys are `state_keys`,
/// `state_ttl` (a duration), `max_state` (a size) and `max_parked`; the defaults below are the
/// only place they are written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MrtrSettings {
    /// Keys that seal `requestState` (`state_keys`), each 32 bytes in standard base64 (e.g.
    /// `openssl rand -base64 32`). The first seals, every one opens, so keys rotate by putting a
    /// new key first. Empty (the default): the nodes agree on one random key kept in the store
    /// (Redis key `<key_prefix>:secret:mrtr-request-state`). Keys that do not decode are refused
    /// at start-up ([`MrtrSettings::problems`]).
    #[serde(rename = "state_keys")]
    pub keys: Vec<StateKey>,
    /// How long an issued `requestState` can be retried (default 10 minutes).
    #[serde(with = "crate::units::positive_duration")]
    pub state_ttl: Duration,
    /// Largest sealed `requestState` the node issues, in bytes (`max_state`, default 64 KiB):
    /// answers are carried in it, so a run that gathers more ends with a JSON-RPC error instead.
    #[serde(rename = "max_state", with = "crate::units::size_bytes")]
    pub max_state_bytes: usize,
    /// Most requests parked on one node at once while their client answers a question (default
    /// 1000): each holds its upstream call (a stdio child, an upstream session) until its retry
    /// or `state_ttl`; past it a request that asks a question fails with -32603 instead of
    /// parking.
    #[serde(with = "crate::units::positive_count")]
    pub max_parked: usize,
}

impl Default for MrtrSettings {
    fn default() -> Self {
        MrtrSettings {
            keys: Vec::new(),
            state_ttl: Duration::from_secs(600),
            max_state_bytes: 64 * 1024,
            max_parked: 1000,
        }
    }
}

impl MrtrSettings {
    /// The keys that decode, in order (the ones [`MrtrSettings::problems`] does not name).
    pub fn decoded_keys(&self) -> Vec<[u8; KEY_LEN]> {
        self.keys.iter().filter_map(|k| k.bytes().ok()).collect()
    }

    /// One message per key that is not 32 bytes of standard base64, naming it by its dotted
    /// path (`stateless.mrtr.state_keys[1]: ...`). Start-up refuses settings with any.
    pub fn problems(&self) -> Vec<String> {
        self.keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| {
                k.bytes()
                    .err()
                    .map(|e| format!("stateless.mrtr.state_keys[{i}]: {e}"))
            })
            .collect()
    }
}

/// One `requestState` key as configured: its standard base64 text (a 32-byte key when valid).
/// `Debug` never shows it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StateKey(String);

impl StateKey {
    /// The key's 32 bytes, or why its text is not one.
    pub fn bytes(&self) -> Result<[u8; KEY_LEN], String> {
        let bytes = STANDARD.decode(self.0.trim()).map_err(|_| {
            "not standard base64 (make one with `openssl rand -base64 32`)".to_owned()
        })?;
        let n = bytes.len();
        bytes
            .try_into()
            .map_err(|_| format!("decodes to {n} bytes, a key has {KEY_LEN}"))
    }
}

impl From<String> for StateKey {
    /// A key from its base64 text (checked by [`StateKey::bytes`]).
    fn from(text: String) -> StateKey {
        StateKey(text)
    }
}

impl From<&str> for StateKey {
    /// A key from its base64 text (checked by [`StateKey::bytes`]).
    fn from(text: &str) -> StateKey {
        StateKey(text.to_owned())
    }
}

impl From<[u8; KEY_LEN]> for StateKey {
    /// A key from its bytes.
    fn from(key: [u8; KEY_LEN]) -> StateKey {
        StateKey(STANDARD.encode(key))
    }
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(<redacted>)")
    }
}
