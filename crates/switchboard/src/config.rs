//! The one typed config tree of a node: flat keys, units in the names, every default here.
//!
//! `load()` (the `load` module) merges defaults < TOML file < `SWITCHBOARD_*` environment < flags into a
//! [`Config`]; [`Config::validate`] checks what serde cannot; [`Config::node_config`] and
//! [`Config::store_config`] hand the values to the node and the store.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchboard_node::NodeConfig;
use switchboard_store::StoreConfig;
use switchboard_upstream::config::{UpstreamConfig, UpstreamsConfig};

/// Every setting of one node. Field docs give the unit, the default and what happens at the limit;
/// the README's config table says the same in one place.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Socket address the HTTP listener binds (default `127.0.0.1:8080`). A loopback address also
    /// restricts `Host` to loopback names unless `allowed_hosts` is set.
    pub listen: SocketAddr,
    /// Path of the MCP endpoint (default `/mcp`). Other paths get 404, except the node's own
    /// `/healthz`, `/readyz`, `/metrics` and `/upstreamz`, which it may not be.
    pub endpoint_path: String,
    /// Path of the legacy HTTP+SSE transport's SSE endpoint (MCP 2024-11-05), default `/sse`:
    /// a GET there opens a new session whose first event names where to POST. Empty turns the
    /// legacy transport off (with `legacy_messages_path` empty, or either: both paths then 404).
    pub legacy_sse_path: String,
    /// Path the legacy transport's clients POST their messages to, as `?sessionId=<id>` (default
    /// `/messages`); each POST gets 202 and its answers arrive on the SSE stream. Empty: off.
    pub legacy_messages_path: String,
    /// Path of the WebSocket transport (subprotocol `mcp`, one JSON-RPC message per text frame;
    /// default `/ws`). Empty turns it off (the path gets 404).
    pub websocket_path: String,
    /// This process's id in the cluster (default empty: 8 random hex characters at start-up).
    /// Must be unique per running process: a reused id makes a dead node's requests look alive.
    pub node_id: String,
    /// Redis URL of the cluster's store (default empty: the embedded memory store, one node only).
    pub redis_url: String,
    /// Prefix of every Redis key and channel (default `sb`), so clusters can share one Redis.
    pub key_prefix: String,
    /// A session with nothing in flight and no open stream ends this many ms after its last request
    /// finished (default 1800000 = 30 min); later requests on it get 404.
    pub idle_ttl_ms: u64,
    /// Cluster-wide cap on live sessions (default 100000); past it `initialize` gets 503 with
    /// `Retry-After`.
    pub max_sessions: u64,
    /// Events kept per stream log (default 1000); older ones are trimmed and a resume from before
    /// the oldest kept event cannot be replayed.
    pub max_events_per_stream: u64,
    /// A node whose heartbeat is older than this many ms is dead (default 5000); its in-flight
    /// requests are failed by the node the client resumes on.
    pub node_ttl_ms: u64,
    /// Interval of this node's heartbeat in ms (default 1000); must be below `node_ttl_ms`.
    pub heartbeat_interval_ms: u64,
    /// Interval of the reaper pass in ms (default 10000); expired sessions linger at most this long.
    /// Also how often each node checks what its upstreams hold against the store (resources of
    /// gone sessions, node-bound ones another node took over).
    pub reaper_interval_ms: u64,
    /// How often a resumed stream checks that the node running its request is alive, in ms
    /// (default 1000).
    pub liveness_check_interval_ms: u64,
    /// Origins allowed besides loopback ones: exact `scheme://host[:port]`, or `*` (default none).
    /// Any other `Origin` gets 403.
    pub allowed_origins: Vec<String>,
    /// Host names (no port) allowed in `Host` (default none: loopback names on a loopback
    /// listener, anything otherwise). Any other `Host` gets 421.
    pub allowed_hosts: Vec<String>,
    /// Interval of SSE keep-alive comments on open streams and of WebSocket pings (two unanswered
    /// close the socket), in ms (default 15000).
    pub keepalive_interval_ms: u64,
    /// SSE `retry` hint sent to 2025-11-25 clients, in ms (default 3000).
    pub sse_retry_ms: u64,
    /// An answer not ready within this many ms goes out as an SSE stream instead of one JSON body
    /// (default 50).
    pub sse_after_ms: u64,
    /// A 2026-07-28 `tools/call` from a client declaring the tasks extension that has not finished
    /// within this many ms is answered with a task and runs on detached (default 1000).
    pub task_after_ms: u64,
    /// Lifetime of a task record from its creation, in ms (`ttlMs`, default 3600000 = 1 h); then
    /// `tasks/get` answers "unknown task".
    pub task_ttl_ms: u64,
    /// Polling interval suggested in every task, in ms (`pollIntervalMs`, default 1000).
    pub task_poll_interval_ms: u64,
    /// How long a server-to-client request waits for the client's answer, in ms (default 60000);
    /// then the upstream gets a JSON-RPC error.
    pub client_request_timeout_ms: u64,
    /// Largest accepted POST body in bytes (default 4194304 = 4 MiB); larger gets 413. Also the
    /// largest WebSocket message; larger closes the socket with 1009.
    pub max_body_bytes: u64,
    /// Largest HTTP/1 request head (request line and headers) in bytes, and the cap on each
    /// connection's read buffer (default 16384 = 16 KiB, at least 8192); a larger head gets 431.
    pub max_request_head_bytes: u64,
    /// `Retry-After` seconds sent with 503 at the session cap (default 5).
    pub retry_after_secs: u64,
    /// Events queued per open stream connection (default 256); when full, the connection catches
    /// up from the event log instead of losing events.
    pub connection_queue: u64,
    /// How often this node pushes back the expiry of sessions with an open stream or a running
    /// call here, in ms (default 10000); must be below `idle_ttl_ms`.
    pub session_touch_interval_ms: u64,
    /// On SIGTERM, how long running requests may take to finish before the node exits anyway, in
    /// ms (default 30000). Standalone GET streams close at once; clients reopen them elsewhere.
    pub drain_timeout_ms: u64,
    /// Resource subscriptions one session may record (default 64); `resources/subscribe` past
    /// it gets JSON-RPC -32602. Also the most URIs one `subscriptions/listen` may name.
    pub max_subscriptions: u64,
    /// Longest resource URI accepted for a subscription (session or `subscriptions/listen`), in
    /// bytes (default 2048); longer gets -32602.
    pub max_uri_bytes: u64,
    /// `subscriptions/listen` streams one node serves at once (default 10000); past it the
    /// request gets 503 with JSON-RPC -32003.
    pub max_listeners: u64,
    /// Most 2026-07-28 requests running at once on one node in an upstream session of their own
    /// (upstreams with per-session state: a stdio child or an upstream `initialize` each, parked
    /// ones included; default 256); past it such a request gets 503 with -32003.
    pub max_ephemeral_sessions: u64,
    /// Notifications queued per `subscriptions/listen` stream (default 64); a stream whose queue
    /// is full (a slow reader) is ended with its closing result, never holding the others back.
    pub listen_queue: u64,
    /// Longest `_meta.progressToken` accepted, in bytes of its JSON text (default 256); longer
    /// gets -32602 (every progress notification echoes it into the event log).
    pub max_progress_token_bytes: u64,
    /// Requests one session may have in flight at once (default 64); past it a request gets
    /// JSON-RPC -32003 (retry when one has finished). Bounds a session's live streams and logs.
    pub max_inflight_per_session: u64,
    /// Session records a node keeps to skip reading them whole from Redis on every request
    /// (default 4096; 0 disables). Each is used only after Redis confirms its version in the same
    /// script that admits the request, so it is never stale; when full, an arbitrary entry is
    /// dropped. Costs about 1 KiB per entry.
    pub record_cache_entries: u64,
    /// Log line format, `text` or `json` (default `text`).
    pub log_format: LogFormat,
    /// Log filter, a level or `tracing` directives (default `info`). `RUST_LOG`, when set,
    /// replaces it.
    pub log_level: String,
    /// Between an upstream's prefix and a tool or prompt name (default `__`, as in
    /// `weather__forecast`): 1 to 16 of `A-Z a-z 0-9 _ - .` (MCP 2025-11-25 tool-name characters).
    pub tool_separator: String,
    /// Public URL of the MCP endpoint exactly as clients configure it (default empty:
    /// authorization off). Set, with a verification key, it turns on the OAuth 2.1
    /// resource-server layer: every request needs a bearer token; the RFC 9728 metadata names
    /// this as `resource` and is served at its path-inserted location and the root one.
    pub auth_resource_url: String,
    /// Issuer URLs of the authorization servers published in the metadata (default none; at
    /// least one when `auth_resource_url` is set).
    pub auth_authorization_servers: Vec<String>,
    /// `scopes_supported` published in the metadata (default none).
    pub auth_scopes_supported: Vec<String>,
    /// Scopes every request's token must carry (default none); a valid token lacking one gets
    /// 403 `insufficient_scope`. Named in the `scope` of every challenge.
    pub auth_required_scopes: Vec<String>,
    /// Required `iss` of tokens (default empty: not checked).
    pub auth_issuer: String,
    /// Required `aud` of tokens (default empty: `auth_resource_url`).
    pub auth_audience: String,
    /// Shared secrets that verify HS256 tokens, each at least 32 bytes (default none); any one
    /// verifies, so keys can rotate.
    pub auth_jwt_hs256_secrets: Vec<String>,
    /// RSA (RS256) and EC P-256 (ES256) public keys in PEM that verify tokens (default none).
    pub auth_jwt_public_keys_pem: Vec<String>,
    /// Keys that seal MRTR `requestState` (MCP 2026-07-28 multi round-trip requests), each 32
    /// bytes in standard base64 (e.g. `openssl rand -base64 32`). The first seals, every one
    /// opens, so keys rotate by putting a new key first. Default none: the nodes agree on one
    /// random key kept in the store (Redis key `<key_prefix>:secret:mrtr-request-state`).
    pub mrtr_state_keys: Vec<String>,
    /// How long an issued `requestState` can be retried, in ms (default 600,000).
    pub mrtr_state_ttl_ms: u64,
    /// Largest `requestState` a node issues, in bytes (default 65,536); a request that gathers
    /// more answers ends with a JSON-RPC error.
    pub mrtr_max_state_bytes: u64,
    /// Most 2026-07-28 requests parked on one node while their client answers a question
    /// (default 1,000; requests of upstreams that keep per-session state, each holding its
    /// upstream call); past it such a request fails with -32603.
    pub mrtr_max_parked: u64,
    /// The MCP servers behind the node: TOML `[[upstreams]]` tables only (a table, not a flat key:
    /// no environment variable or flag sets it). Empty (default): the built-in demo server alone,
    /// unprefixed. Fields: [`switchboard_upstream::config::UpstreamConfig`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstreams: Vec<UpstreamConfig>,
}

/// One problem [`Config::problems`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The keys whose values break the rule (the message names them).
    pub keys: Vec<&'static str>,
    /// What is wrong, naming the keys.
    pub message: String,
}

/// How log lines are written to stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            endpoint_path: "/mcp".into(),
            legacy_sse_path: "/sse".into(),
            legacy_messages_path: "/messages".into(),
            websocket_path: "/ws".into(),
            node_id: String::new(),
            redis_url: String::new(),
            key_prefix: "sb".into(),
            idle_ttl_ms: 1_800_000,
            max_sessions: 100_000,
            max_events_per_stream: 1000,
            node_ttl_ms: 5000,
            heartbeat_interval_ms: 1000,
            reaper_interval_ms: 10_000,
            liveness_check_interval_ms: 1000,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            keepalive_interval_ms: 15_000,
            sse_retry_ms: 3000,
            sse_after_ms: 50,
            task_after_ms: 1000,
            task_ttl_ms: 3_600_000,
            task_poll_interval_ms: 1000,
            client_request_timeout_ms: 60_000,
            max_body_bytes: 4 * 1024 * 1024,
            max_request_head_bytes: 16 * 1024,
            retry_after_secs: 5,
            connection_queue: 256,
            session_touch_interval_ms: 10_000,
            drain_timeout_ms: 30_000,
            max_subscriptions: 64,
            max_uri_bytes: 2048,
            max_listeners: 10_000,
            max_ephemeral_sessions: 256,
            listen_queue: 64,
            max_progress_token_bytes: 256,
            max_inflight_per_session: 64,
            record_cache_entries: 4096,
            log_format: LogFormat::Text,
            log_level: "info".into(),
            tool_separator: switchboard_upstream::aggregate::DEFAULT_SEPARATOR.into(),
            auth_resource_url: String::new(),
            auth_authorization_servers: Vec::new(),
            auth_scopes_supported: Vec::new(),
            auth_required_scopes: Vec::new(),
            auth_issuer: String::new(),
            auth_audience: String::new(),
            auth_jwt_hs256_secrets: Vec::new(),
            auth_jwt_public_keys_pem: Vec::new(),
            mrtr_state_keys: Vec::new(),
            mrtr_state_ttl_ms: 600_000,
            mrtr_max_state_bytes: 65_536,
            mrtr_max_parked: 1000,
            upstreams: Vec::new(),
        }
    }
}

impl Config {
    /// Fills in what is left to start-up: the node id this process runs as. A configured
    /// `node_id` is a label: the process runs as `<node_id>.<4 random hex>`, so a restarted
    /// process (same pod name, same flag) is never mistaken for the dead one whose requests,
    /// streams and stdio children the cluster is still failing over; an empty `node_id` becomes 8
    /// random hex characters. Only `serve` calls this (`run::run_on`); `switchboard
    /// config` prints the id as configured.
    pub fn resolved(mut self) -> Self {
        self.node_id = if self.node_id.is_empty() {
            format!("{:08x}", rand::random::<u32>())
        } else {
            format!("{}.{:04x}", self.node_id, rand::random::<u16>())
        };
        self
    }

    /// Every problem serde cannot see, one message per problem, each naming its key. Empty means
    /// valid. An empty `node_id` is valid (it means a random id at start-up).
    pub fn validate(&self) -> Vec<String> {
        self.problems().into_iter().map(|p| p.message).collect()
    }

    /// [`Config::validate`] with the keys each problem is about, so the loader can say where their
    /// values came from.
    pub fn problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut check = |ok: bool, keys: &[&'static str], message: String| {
            if !ok {
                let keys = keys.to_vec();
                problems.push(Problem { keys, message });
            }
        };
        for (key, value) in self.positive_keys() {
            check(value > 0, &[key], format!("{key} must be greater than 0"));
        }
        check(
            self.heartbeat_interval_ms < self.node_ttl_ms,
            &["heartbeat_interval_ms", "node_ttl_ms"],
            format!(
                "heartbeat_interval_ms ({}) must be less than node_ttl_ms ({}), or live nodes look dead",
                self.heartbeat_interval_ms, self.node_ttl_ms
            ),
        );
        check(
            self.session_touch_interval_ms < self.idle_ttl_ms,
            &["session_touch_interval_ms", "idle_ttl_ms"],
            format!(
                "session_touch_interval_ms ({}) must be less than idle_ttl_ms ({}), or busy sessions expire",
                self.session_touch_interval_ms, self.idle_ttl_ms
            ),
        );
        check(
            self.max_request_head_bytes >= MIN_REQUEST_HEAD_BYTES,
            &["max_request_head_bytes"],
            format!(
                "max_request_head_bytes ({}) must be at least {MIN_REQUEST_HEAD_BYTES} (the HTTP/1 server's smallest read buffer)",
                self.max_request_head_bytes
            ),
        );
        for (key, value) in [
            ("max_body_bytes", self.max_body_bytes),
            ("max_request_head_bytes", self.max_request_head_bytes),
            ("connection_queue", self.connection_queue),
            ("max_listeners", self.max_listeners),
            ("max_ephemeral_sessions", self.max_ephemeral_sessions),
            ("listen_queue", self.listen_queue),
        ] {
            check(
                usize::try_from(value).is_ok(),
                &[key],
                format!("{key} does not fit this platform's address size"),
            );
        }
        let node_id = (!self.node_id.is_empty())
            .then(|| check_name("node_id", &self.node_id, &[]))
            .flatten();
        let single = [
            ("endpoint_path", check_endpoint_path(&self.endpoint_path)),
            ("legacy_sse_path", self.check_legacy_path("legacy_sse_path")),
            (
                "legacy_messages_path",
                self.check_legacy_path("legacy_messages_path"),
            ),
            ("websocket_path", self.check_websocket_path()),
            ("node_id", node_id),
            (
                "key_prefix",
                check_name("key_prefix", &self.key_prefix, &[':']),
            ),
            ("redis_url", check_redis_url(&self.redis_url)),
        ];
        let origins = self
            .allowed_origins
            .iter()
            .map(|o| ("allowed_origins", check_origin(o)));
        let hosts = self
            .allowed_hosts
            .iter()
            .map(|h| ("allowed_hosts", check_host(h)));
        let level = [("log_level", check_log_level(&self.log_level))];
        let separator =
            switchboard_upstream::aggregate::names::check_separator(&self.tool_separator);
        let separator = [("tool_separator", separator.err())];
        let upstreams = self.upstreams_config().upstream_problems();
        let upstreams = upstreams.into_iter().map(|p| ("upstreams", Some(p)));
        let auth = self.auth_problems().into_iter().map(|(k, p)| (k, Some(p)));
        let mrtr = self
            .mrtr_problems()
            .into_iter()
            .map(|p| ("mrtr_state_keys", Some(p)));
        let rest = level
            .into_iter()
            .chain(separator)
            .chain(upstreams)
            .chain(auth)
            .chain(mrtr);
        for (key, problem) in single.into_iter().chain(origins).chain(hosts).chain(rest) {
            if let Some(message) = problem {
                check(false, &[key], message);
            }
        }
        problems
    }

    /// The upstreams and their separator, for [`switchboard_upstream::build::upstreams`].
    pub fn upstreams_config(&self) -> UpstreamsConfig {
        UpstreamsConfig {
            separator: self.tool_separator.clone(),
            upstreams: self.upstreams.clone(),
        }
    }

    /// The keys whose value must be greater than zero.
    fn positive_keys(&self) -> [(&'static str, u64); 26] {
        [
            ("idle_ttl_ms", self.idle_ttl_ms),
            ("max_sessions", self.max_sessions),
            ("max_events_per_stream", self.max_events_per_stream),
            ("node_ttl_ms", self.node_ttl_ms),
            ("heartbeat_interval_ms", self.heartbeat_interval_ms),
            ("reaper_interval_ms", self.reaper_interval_ms),
            (
                "liveness_check_interval_ms",
                self.liveness_check_interval_ms,
            ),
            ("keepalive_interval_ms", self.keepalive_interval_ms),
            ("client_request_timeout_ms", self.client_request_timeout_ms),
            ("task_after_ms", self.task_after_ms),
            ("task_ttl_ms", self.task_ttl_ms),
            ("task_poll_interval_ms", self.task_poll_interval_ms),
            ("max_body_bytes", self.max_body_bytes),
            ("connection_queue", self.connection_queue),
            ("session_touch_interval_ms", self.session_touch_interval_ms),
            ("drain_timeout_ms", self.drain_timeout_ms),
            ("max_subscriptions", self.max_subscriptions),
            ("max_uri_bytes", self.max_uri_bytes),
            ("max_listeners", self.max_listeners),
            ("max_ephemeral_sessions", self.max_ephemeral_sessions),
            ("listen_queue", self.listen_queue),
            ("max_progress_token_bytes", self.max_progress_token_bytes),
            ("max_inflight_per_session", self.max_inflight_per_session),
            ("mrtr_state_ttl_ms", self.mrtr_state_ttl_ms),
            ("mrtr_max_state_bytes", self.mrtr_max_state_bytes),
            ("mrtr_max_parked", self.mrtr_max_parked),
        ]
    }

    /// The node's settings; `loopback_only` comes from the address the listener actually bound.
    pub fn node_config(&self, loopback_only: bool) -> NodeConfig {
        NodeConfig {
            endpoint_path: self.endpoint_path.clone(),
            allowed_origins: self.allowed_origins.clone(),
            allowed_hosts: self.allowed_hosts.clone(),
            loopback_only,
            keepalive_interval: ms(self.keepalive_interval_ms),
            sse_retry_ms: self.sse_retry_ms,
            sse_after: ms(self.sse_after_ms),
            task_after: ms(self.task_after_ms),
            task_ttl: ms(self.task_ttl_ms),
            task_poll_interval: ms(self.task_poll_interval_ms),
            client_request_timeout: ms(self.client_request_timeout_ms),
            heartbeat_interval: ms(self.heartbeat_interval_ms),
            reaper_interval: ms(self.reaper_interval_ms),
            liveness_check_interval: ms(self.liveness_check_interval_ms),
            max_body_bytes: usize::try_from(self.max_body_bytes).unwrap_or(usize::MAX),
            max_request_head_bytes: usize::try_from(self.max_request_head_bytes)
                .unwrap_or(usize::MAX),
            retry_after_secs: self.retry_after_secs,
            connection_queue: usize::try_from(self.connection_queue).unwrap_or(usize::MAX),
            session_touch_interval: ms(self.session_touch_interval_ms),
            drain_timeout: ms(self.drain_timeout_ms),
            max_subscriptions: usize::try_from(self.max_subscriptions).unwrap_or(usize::MAX),
            max_uri_bytes: usize::try_from(self.max_uri_bytes).unwrap_or(usize::MAX),
            max_listeners: usize::try_from(self.max_listeners).unwrap_or(usize::MAX),
            max_ephemeral_sessions: usize::try_from(self.max_ephemeral_sessions)
                .unwrap_or(usize::MAX),
            listen_queue: usize::try_from(self.listen_queue).unwrap_or(usize::MAX),
            max_progress_token_bytes: usize::try_from(self.max_progress_token_bytes)
                .unwrap_or(usize::MAX),
            auth: self.auth_settings(),
            legacy_sse_path: self.legacy_sse_path.clone(),
            legacy_messages_path: self.legacy_messages_path.clone(),
            websocket_path: self.websocket_path.clone(),
            mrtr: self.mrtr_settings(),
        }
    }

    /// The store's settings.
    pub fn store_config(&self) -> StoreConfig {
        StoreConfig {
            node_id: self.node_id.clone(),
            key_prefix: self.key_prefix.clone(),
            node_ttl: ms(self.node_ttl_ms),
            idle_ttl: ms(self.idle_ttl_ms),
            max_sessions: self.max_sessions,
            max_events_per_stream: self.max_events_per_stream,
            max_inflight_per_session: self.max_inflight_per_session,
            record_cache_entries: usize::try_from(self.record_cache_entries).unwrap_or(usize::MAX),
        }
    }

    /// The config as a TOML document that `load()` reads back to the same value.
    pub fn to_toml(&self) -> String {
        // Strings, integers, string lists and `[[upstreams]]` tables of those always serialize.
        toml::to_string(self).expect("the config serializes as TOML")
    }

    /// Keys that hold TOML tables and are set only in the config file, never by environment
    /// variables or flags. [`Config::keys`] leaves them out.
    pub const TABLES: [&'static str; 1] = ["upstreams"];

    /// Names of every flat key (sorted by name): the ones environment variables and flags set.
    pub fn keys() -> Vec<String> {
        match toml::Value::try_from(Config::default()) {
            Ok(toml::Value::Table(table)) => table.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }
}

mod auth;
mod mrtr;

/// The smallest `max_request_head_bytes`: hyper's initial HTTP/1 read buffer, below which it
/// refuses to be configured.
const MIN_REQUEST_HEAD_BYTES: u64 = 8192;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The node's router also serves these paths; the MCP endpoint must not shadow them.
const RESERVED_PATHS: [&str; 4] = ["/healthz", "/readyz", "/metrics", "/upstreamz"];

/// The path becomes an axum route: no pattern characters (`{}`, `*`, `:`), no query or fragment.
fn check_endpoint_path(path: &str) -> Option<String> {
    let ok = path.starts_with('/')
        && !path.contains(['?', '#', '{', '}', '*', ':'])
        && !path.chars().any(|c| c.is_whitespace() || c.is_control());
    if !ok {
        return Some(format!(
            "endpoint_path `{path}` must start with `/` and have no spaces or any of ? # {{ }} * :"
        ));
    }
    RESERVED_PATHS
        .contains(&path)
        .then(|| format!("endpoint_path `{path}` is taken by the node's own {path} route"))
}

impl Config {
    /// A legacy transport path (`key` names it): empty (off), or a path like `endpoint_path`'s
    /// that no other route of the node has.
    fn check_legacy_path(&self, key: &str) -> Option<String> {
        let (path, other) = match key {
            "legacy_sse_path" => (&self.legacy_sse_path, &self.legacy_messages_path),
            _ => (&self.legacy_messages_path, &self.legacy_sse_path),
        };
        if path.is_empty() {
            return None;
        }
        if let Some(problem) = check_endpoint_path(path) {
            return Some(problem.replacen("endpoint_path", key, 1));
        }
        if path == &self.endpoint_path || path == other {
            return Some(format!(
                "{key} `{path}` is also endpoint_path or the other legacy path; choose another, or empty (off)"
            ));
        }
        None
    }
}

impl Config {
    /// `websocket_path`: empty (off), or a path like `endpoint_path`'s that no other route of the
    /// node has.
    fn check_websocket_path(&self) -> Option<String> {
        let path = &self.websocket_path;
        if path.is_empty() {
            return None;
        }
        if let Some(problem) = check_endpoint_path(path) {
            return Some(problem.replacen("endpoint_path", "websocket_path", 1));
        }
        let others = [
            &self.endpoint_path,
            &self.legacy_sse_path,
            &self.legacy_messages_path,
        ];
        others.contains(&path).then(|| {
            format!("websocket_path `{path}` is also endpoint_path or a legacy path; choose another, or empty (off)")
        })
    }
}

/// Ids and prefixes end up in Redis keys, channels and holder tokens (`<node>/<conn>`): keep them
/// to 1-64 of `[A-Za-z0-9._-]` plus `extra`.
fn check_name(key: &str, value: &str, extra: &[char]) -> Option<String> {
    let ok = (1..=64).contains(&value.len())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c) || extra.contains(&c));
    (!ok).then(|| {
        let extra: String = extra.iter().map(|c| format!(" {c}")).collect();
        format!("{key} `{value}` must be 1 to 64 characters of A-Z a-z 0-9 . _ -{extra}")
    })
}

fn check_redis_url(url: &str) -> Option<String> {
    const SCHEMES: [&str; 4] = ["redis://", "rediss://", "redis+unix://", "unix://"];
    let ok = url.is_empty()
        || SCHEMES
            .iter()
            .any(|s| url.starts_with(s) && url.len() > s.len());
    (!ok).then(|| {
        format!(
            "redis_url `{}` must start with redis://, rediss://, redis+unix:// or unix:// (or be empty for the memory store)",
            redact_url(url)
        )
    })
}

/// Origins are compared exactly with the `Origin` header, which never has a path or a trailing
/// slash (RFC 6454): refuse entries that could never match.
fn check_origin(origin: &str) -> Option<String> {
    if origin == "*" {
        return None;
    }
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    let ok = rest.is_some_and(|r| !r.is_empty() && !r.contains(['/', ' ', '?', '#']));
    (!ok).then(|| {
        format!("allowed_origins entry `{origin}` must be `*` or `http(s)://host[:port]` with no path or trailing slash")
    })
}

/// `Host` is matched without its port, so an entry with a port could never match.
fn check_host(host: &str) -> Option<String> {
    let bracketed_v6 = host.starts_with('[') && host.ends_with(']') && host.len() > 2;
    let ok = !host.is_empty()
        && !host.contains(['/', ' ', '@'])
        && (bracketed_v6 || !host.contains(':'));
    (!ok).then(|| {
        format!("allowed_hosts entry `{host}` must be a host name without scheme or port (IPv6 in brackets)")
    })
}

/// A bare word must be a level (a bare word is otherwise read as a target name and silently
/// filters everything else out); anything with `=` or `,` must parse as `tracing` directives.
fn check_log_level(filter: &str) -> Option<String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let ok = if filter.contains(['=', ',']) {
        tracing_subscriber::EnvFilter::try_new(filter).is_ok()
    } else {
        LEVELS.contains(&filter.trim().to_ascii_lowercase().as_str())
    };
    (!ok).then(|| {
        format!("log_level `{filter}` is not a level (off, error, warn, info, debug, trace) or tracing directives like `info,switchboard_node=debug`")
    })
}

/// The URL with any password replaced by `***`, fit for logs and error messages.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split_once(':').map_or(&rest[..at], |(u, _)| u);
            format!("{scheme}://{user}:***{}", &rest[at..])
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_with_or_without_a_random_id() {
        assert_eq!(Config::default().validate(), Vec::<String>::new());
        let config = Config::default().resolved();
        assert_eq!(config.node_id.len(), 8);
        assert!(config.node_id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(config.validate(), Vec::<String>::new());
        let pinned = Config {
            node_id: "n1".into(),
            ..Config::default()
        };
        let resolved = pinned.clone().resolved();
        let (label, suffix) = resolved.node_id.split_once('.').expect("label.suffix");
        assert_eq!(label, "n1", "a set id is kept as the label");
        assert!(suffix.len() == 4 && suffix.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(
            resolved.node_id,
            pinned.clone().resolved().node_id,
            "each process its own id"
        );
        assert_eq!(resolved.validate(), Vec::<String>::new());
    }

    #[test]
    fn problems_name_the_keys_they_are_about() {
        let config = Config {
            heartbeat_interval_ms: 6000,
            drain_timeout_ms: 0,
            allowed_hosts: vec!["a.example:1".into()],
            ..Config::default()
        };
        let keys: Vec<Vec<&str>> = config.problems().into_iter().map(|p| p.keys).collect();
        assert_eq!(
            keys,
            [
                vec!["drain_timeout_ms"],
                vec!["heartbeat_interval_ms", "node_ttl_ms"],
                vec!["allowed_hosts"],
            ]
        );
    }

    #[test]
    fn every_rule_names_its_key() {
        let config = Config {
            heartbeat_interval_ms: 5000,
            max_sessions: 0,
            endpoint_path: "mcp".into(),
            node_id: "a/b".into(),
            key_prefix: "{sb}".into(),
            redis_url: "http://x".into(),
            allowed_origins: vec!["https://a.example/".into()],
            allowed_hosts: vec!["a.example:443".into()],
            log_level: "loud".into(),
            ..Config::default()
        };
        let problems = config.validate().join("\n");
        for key in [
            "heartbeat_interval_ms",
            "max_sessions",
            "endpoint_path",
            "node_id",
            "key_prefix",
            "redis_url",
            "allowed_origins",
            "allowed_hosts",
            "log_level",
        ] {
            assert!(problems.contains(key), "{key} not named in:\n{problems}");
        }
    }

    #[test]
    fn endpoint_path_cannot_shadow_or_pattern() {
        for bad in [
            "/healthz",
            "/readyz",
            "/metrics",
            "/upstreamz",
            "/{x}",
            "/*rest",
            "/:id",
            "/a b",
        ] {
            let config = Config {
                endpoint_path: bad.into(),
                ..Config::default().resolved()
            };
            let problems = config.validate();
            assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
            assert!(problems[0].starts_with("endpoint_path"), "{bad}");
        }
        for good in ["/", "/mcp", "/v1/mcp/"] {
            let config = Config {
                endpoint_path: good.into(),
                ..Config::default().resolved()
            };
            assert_eq!(config.validate(), Vec::<String>::new(), "{good}");
        }
    }

    #[test]
    fn legacy_paths_are_off_or_distinct_routes() {
        let with = |sse: &str, messages: &str, endpoint: &str| Config {
            legacy_sse_path: sse.into(),
            legacy_messages_path: messages.into(),
            endpoint_path: endpoint.into(),
            ..Config::default().resolved()
        };
        for (sse, messages) in [
            ("/sse", "/messages"),
            ("", ""),
            ("", "/m"),
            ("/a/sse", "/a"),
        ] {
            assert!(
                with(sse, messages, "/mcp").validate().is_empty(),
                "{sse} {messages}"
            );
        }
        for (sse, messages, endpoint, key) in [
            ("/mcp", "/messages", "/mcp", "legacy_sse_path"),
            ("/sse", "/sse", "/mcp", "legacy_sse_path"),
            ("/sse", "/healthz", "/mcp", "legacy_messages_path"),
            ("/sse", "messages", "/mcp", "legacy_messages_path"),
        ] {
            let problems = with(sse, messages, endpoint).validate();
            assert!(problems[0].starts_with(key), "{problems:?}");
        }
    }

    #[test]
    fn websocket_path_is_off_or_a_distinct_route() {
        let with = |ws: &str| Config {
            websocket_path: ws.into(),
            ..Config::default().resolved()
        };
        for good in ["/ws", "", "/mcp/ws"] {
            assert!(with(good).validate().is_empty(), "{good}");
        }
        for bad in ["/mcp", "/sse", "/messages", "/metrics", "ws", "/w s"] {
            let problems = with(bad).validate();
            assert!(
                problems.iter().any(|p| p.starts_with("websocket_path")),
                "{bad}: {problems:?}"
            );
        }
    }

    #[test]
    fn good_origins_and_hosts_pass() {
        let config = Config {
            allowed_origins: vec!["*".into(), "https://app.example:8443".into()],
            allowed_hosts: vec!["mcp.example".into(), "[::1]".into(), "10.0.0.1".into()],
            log_level: "info,switchboard_node=debug".into(),
            redis_url: "redis://:secret@redis:6379/0".into(),
            ..Config::default().resolved()
        };
        assert_eq!(config.validate(), Vec::<String>::new());
    }

    #[test]
    fn maps_onto_node_and_store_settings() {
        let config = Config {
            node_id: "n1".into(),
            idle_ttl_ms: 1234,
            ..Config::default()
        };
        let node = config.node_config(false);
        assert_eq!(
            node,
            NodeConfig {
                loopback_only: false,
                ..NodeConfig::default()
            }
        );
        let store = config.store_config();
        assert_eq!(store.node_id, "n1");
        assert_eq!(store.idle_ttl, Duration::from_millis(1234));
        assert_eq!(store.node_ttl, Duration::from_secs(5));
        assert_eq!(store.key_prefix, "sb");
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact_url("redis://:pw@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(redact_url("rediss://u:pw@h"), "rediss://u:***@h");
        assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
    }
}
