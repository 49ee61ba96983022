//! The one typed config tree of a node: TOML sections that deserialize into typed structs, each
//! default written once. A section whose keys all belong to one crate's settings is that crate's
//! struct (`[auth]` is [`AuthSettings`], `[stateless.mrtr]` is
//! [`switchboard_node::mrtr::MrtrSettings`]); a section that feeds several crates is a struct of
//! its own whose `Default` reads the owners' defaults ([`NodeConfig::default`],
//! [`StoreConfig::default_for`]; the `owners` module), so no default number is written twice.
//!
//! `load()` (the `load` module) merges defaults < TOML file < `SWITCHBOARD_*` environment < flags into a
//! [`Config`]; serde refuses wrong types and zero where a key must be positive; [`Config::validate`]
//! checks what serde cannot; [`Config::node_config`] and [`Config::store_config`] hand the values
//! to the node and the store. `docs/configuration.md` is the reference (a test checks it against
//! [`Config::defaults`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use switchboard_node::auth::AuthSettings;
use switchboard_node::limits::RateLimitSettings;
use switchboard_node::units;
use switchboard_node::NodeConfig;
use switchboard_store::StoreConfig;
use switchboard_upstream::config::{UpstreamConfig, UpstreamsConfig};
use switchboard_upstream::policy::PolicyConfig;

pub use bus::BusConfig;
pub use cluster::ClusterConfig;
pub use http::HttpConfig;
pub use log::{LogConfig, LogFormat};
pub use moved::{moved_to, MOVED};
pub(crate) use rate_limits::open_path;
pub use redis::{redact_url, RedisConfig};
pub use rules::Problem;
pub use session::SessionConfig;
pub use stateless::{StatelessConfig, TasksConfig};
pub use telemetry::{MetricsConfig, OtelConfig};
pub use transports::{LegacySseConfig, TransportsConfig, WebSocketConfig};
pub use units::{NonZeroDuration, Size};

mod auth;
mod bus;
mod cluster;
mod http;
mod log;
mod moved;
mod owners;
mod rate_limits;
mod redis;
mod rules;
mod secrets;
mod session;
mod stateless;
mod telemetry;
mod transports;

/// Every setting of one node, one section per concern. Field docs give the unit and what happens
/// at the limit; `docs/configuration.md` lists every key with its default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Between an upstream's prefix and a tool or prompt name (default `__`, as in
    /// `weather__forecast`): 1 to 16 of `A-Z a-z 0-9 _ - .` (MCP 2025-11-25 tool-name characters).
    pub tool_separator: String,
    /// Most pages of one upstream in one walk of a merged list (`tools/list` and the like; default
    /// 1000, at least 1): past them, or at a `nextCursor` the upstream gave before in the walk, the
    /// list fails with an error naming the upstream (-32603).
    pub list_max_pages: u32,
    /// `[http]`: listener, endpoint, Origin/Host, connection limits and timings.
    pub http: HttpConfig,
    /// `[transports.legacy_sse]`, `[transports.websocket]`.
    pub transports: TransportsConfig,
    /// `[cluster]`: node id, heartbeat, liveness, reaper, drain.
    pub cluster: ClusterConfig,
    /// `[bus]`: how messages between nodes are kept until delivered.
    pub bus: BusConfig,
    /// `[redis]`: the store.
    pub redis: RedisConfig,
    /// `[session]`: session lifetime and limits.
    pub session: SessionConfig,
    /// `[stateless]`, `[stateless.mrtr]`, `[stateless.tasks]`.
    pub stateless: StatelessConfig,
    /// `[auth]`: the OAuth 2.1 resource-server layer, off while `auth.resource_url` is empty: the
    /// node's own settings struct ([`AuthSettings`]).
    pub auth: AuthSettings,
    /// `[rate_limits]`: rate limits per principal, per principal and tool, and per upstream,
    /// cluster-wide; none by default: the node's own settings struct ([`RateLimitSettings`]).
    pub rate_limits: RateLimitSettings,
    /// `[log]`.
    pub log: LogConfig,
    /// `[otel]`: OpenTelemetry traces over OTLP, off unless an endpoint is set.
    pub otel: OtelConfig,
    /// `[metrics]`: where `/metrics` is served, label caps.
    pub metrics: MetricsConfig,
    /// The MCP servers behind the node: TOML `[[upstreams]]` tables only (no environment variable
    /// or flag sets them). Empty (default): the built-in demo server alone, unprefixed. Fields:
    /// [`switchboard_upstream::config::UpstreamConfig`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub upstreams: Vec<UpstreamConfig>,
    /// `[policy]`: per-principal allow and deny lists (`policy.default`, and `[[policy.rules]]`
    /// tables, file only). Off by default: everyone sees everything. Fields and how rules
    /// combine: [`switchboard_upstream::policy`].
    pub policy: PolicyConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tool_separator: switchboard_upstream::aggregate::DEFAULT_SEPARATOR.into(),
            list_max_pages: switchboard_upstream::aggregate::DEFAULT_LIST_MAX_PAGES,
            http: HttpConfig::default(),
            transports: TransportsConfig::default(),
            cluster: ClusterConfig::default(),
            bus: BusConfig::default(),
            redis: RedisConfig::default(),
            session: SessionConfig::default(),
            stateless: StatelessConfig::default(),
            auth: AuthSettings::default(),
            rate_limits: RateLimitSettings::default(),
            log: LogConfig::default(),
            otel: OtelConfig::default(),
            metrics: MetricsConfig::default(),
            upstreams: Vec::new(),
            policy: PolicyConfig::default(),
        }
    }
}

impl Config {
    /// Fills in what is left to start-up: the node id this process runs as. A configured
    /// `cluster.node_id` is a label: the process runs as `<node_id>.<4 random hex>`, so a
    /// restarted process (same pod name, same flag) is never mistaken for the dead one whose
    /// requests, streams and stdio children the cluster is still failing over; an empty one
    /// becomes 8 random hex characters. Only `serve` calls this (`startup::run_on`); `switchboard
    /// config` prints the id as configured.
    pub fn resolved(mut self) -> Self {
        let id = &mut self.cluster.node_id;
        *id = if id.is_empty() {
            format!("{:08x}", rand::random::<u32>())
        } else {
            format!("{id}.{:04x}", rand::random::<u16>())
        };
        self
    }

    /// The upstreams and their separator, for [`switchboard_upstream::build::upstreams`].
    pub fn upstreams_config(&self) -> UpstreamsConfig {
        UpstreamsConfig {
            separator: self.tool_separator.clone(),
            upstreams: self.upstreams.clone(),
            policy: self.policy.clone(),
            list_max_pages: self.list_max_pages,
        }
    }

    /// The node's settings; `loopback_only` comes from the address the listener actually bound.
    pub fn node_config(&self, loopback_only: bool) -> NodeConfig {
        let (http, cluster, session) = (&self.http, &self.cluster, &self.session);
        let (stateless, tasks) = (&self.stateless, &self.stateless.tasks);
        NodeConfig {
            endpoint_path: http.endpoint_path.clone(),
            allowed_origins: http.allowed_origins.clone(),
            allowed_hosts: http.allowed_hosts.clone(),
            cors_max_age: http.cors_max_age,
            loopback_only,
            keepalive_interval: http.keepalive_interval.get(),
            sse_retry_ms: u64::try_from(http.sse_retry.as_millis()).unwrap_or(u64::MAX),
            sse_after: http.sse_after,
            task_after: tasks.after.get(),
            task_ttl: tasks.ttl.get(),
            task_expired_grace: tasks.expired_grace.get(),
            max_tasks_per_principal: tasks.max_per_principal.get(),
            task_poll_interval: tasks.poll_interval.get(),
            client_request_timeout: session.client_request_timeout.get(),
            heartbeat_interval: cluster.heartbeat_interval.get(),
            node_ttl: cluster.node_ttl.get(),
            reaper_interval: cluster.reaper_interval.get(),
            liveness_check_interval: cluster.liveness_check_interval.get(),
            max_body_bytes: http.max_body.as_usize(),
            max_request_head_bytes: http.max_request_head.as_usize(),
            header_read_timeout: http.header_read_timeout.get(),
            body_read_timeout: http.body_read_timeout.get(),
            retry_after_secs: http.retry_after.as_secs(),
            max_sessions_per_principal: self.session.max_sessions_per_principal,
            connection_queue: http.connection_queue.get(),
            session_touch_interval: session.touch_interval.get(),
            drain_timeout: cluster.drain_timeout.get(),
            max_subscriptions: session.max_subscriptions.get(),
            max_uri_bytes: session.max_uri.as_usize(),
            max_listeners: stateless.max_listeners.get(),
            max_ephemeral_sessions: stateless.max_ephemeral_sessions.get(),
            listen_queue: stateless.listen_queue.get(),
            max_progress_token_bytes: session.max_progress_token.as_usize(),
            max_initialize_params_bytes: session.max_initialize_params.as_usize(),
            auth: self.auth.is_on().then(|| self.auth.clone()),
            legacy_sse_path: self.transports.legacy_sse.sse_path.clone(),
            legacy_messages_path: self.transports.legacy_sse.messages_path.clone(),
            websocket_path: self.transports.websocket.path.clone(),
            mrtr: stateless.mrtr.clone(),
            metrics_listen: self.metrics.listen_addr(),
            rate_limits: rate_limits::for_node(self),
            eviction: self.redis.eviction(),
        }
    }

    /// The store's settings.
    pub fn store_config(&self) -> StoreConfig {
        StoreConfig {
            node_id: self.cluster.node_id.clone(),
            key_prefix: self.redis.key_prefix.clone(),
            node_ttl: self.cluster.node_ttl.get(),
            idle_ttl: self.session.idle_ttl.get(),
            max_sessions: self.session.max_sessions.get(),
            max_sessions_per_principal: self.session.max_sessions_per_principal,
            max_events_per_stream: self.session.max_events_per_stream.get(),
            max_stream_log_bytes: self.session.max_stream_log_bytes.get(),
            max_session_log_bytes: self.session.max_session_log_bytes.get(),
            max_event_bytes: self.session.max_event_bytes.get(),
            max_inflight_per_session: self.session.max_inflight.get(),
            record_cache_entries: self.redis.record_cache_entries,
            min_replicas_acked: self.redis.min_replicas_acked,
            replicas_ack_timeout: self.redis.replicas_ack_timeout.get(),
            bus: self.bus.settings(),
        }
    }

    /// This config with every secret shown as `***` (the Redis passwords:
    /// [`RedisConfig::redacted`]; the HS256 secrets: [`AuthSettings::redacted`]; the keys
    /// sealing MRTR `requestState`; upstream header and environment values and URL passwords:
    /// `secrets`), for `switchboard config`.
    pub fn redacted(&self) -> Config {
        let mut stateless = self.stateless.clone();
        for key in &mut stateless.mrtr.keys {
            *key = switchboard_node::auth::REDACTED.into();
        }
        Config {
            redis: self.redis.redacted(),
            auth: self.auth.redacted(),
            stateless,
            upstreams: self
                .upstreams
                .iter()
                .map(secrets::redacted_upstream)
                .collect(),
            ..self.clone()
        }
    }

    /// The config as a TOML document of sections that `load()` reads back to the same value.
    pub fn to_toml(&self) -> String {
        // Strings, integers, string lists and `[[upstreams]]` tables of those always serialize.
        toml::to_string(self).expect("the config serializes as TOML")
    }

    /// Keys that hold TOML tables and are set only in the config file, never by environment
    /// variables or flags. [`Config::keys`] leaves them out.
    pub const TABLES: [&'static str; 3] = ["upstreams", "policy.rules", "policy.methods"];

    /// Every key's dotted path (`session.max_sessions`, sorted) with its default as a TOML value
    /// (`"30m"`, `100000`, `[]`): the keys environment variables and flags set.
    pub fn defaults() -> BTreeMap<String, toml::Value> {
        let mut out = BTreeMap::new();
        if let Ok(toml::Value::Table(table)) = toml::Value::try_from(Config::default()) {
            flatten("", table, &mut out);
        }
        out
    }

    /// The dotted paths of every key (sorted): the ones environment variables and flags set.
    pub fn keys() -> Vec<String> {
        Config::defaults().into_keys().collect()
    }
}

/// Puts every leaf of `table` into `out` under its dotted path below `prefix`.
fn flatten(prefix: &str, table: toml::Table, out: &mut BTreeMap<String, toml::Value>) {
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(inner) => flatten(&path, inner, out),
            leaf => {
                out.insert(path, leaf);
            }
        }
    }
}

#[cfg(test)]
mod tests;
