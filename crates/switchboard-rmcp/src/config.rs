//! The settings of one replica: the store's own ([`StoreConfig`]: node id, key prefix, idle
//! TTL, caps) and what this crate adds (SSE retry hint, per-connection queue, periodic work).

use std::time::Duration;

use switchboard_store::eviction::EvictionSettings;
use switchboard_store::StoreConfig;

use crate::error::Error;

/// Settings of one replica. Every replica of one server should use the same values except
/// `store.node_id`, which must be unique per process.
#[derive(Clone, Debug)]
pub struct ReplicatedConfig {
    /// The store's settings. The ones that matter most here:
    /// - `node_id`: this replica's id label (holder tokens, bus inbox, liveness key); visible
    ///   ASCII without `/` or `@`. Default: `rmcp-<8 random hex digits>`. The process runs as
    ///   `<node_id>.<4 random hex digits>` ([`ReplicatedConfig::for_this_process`]).
    /// - `key_prefix`: start of every Redis key and channel (default `sb`), so several servers
    ///   can share one Redis.
    /// - `idle_ttl`: a session with nothing open and nothing running ends this long after its
    ///   last request (default 30 min); every key of it expires then.
    /// - `node_ttl`: a replica silent this long is dead (default 5 s): a request it was running
    ///   ends with error -32004 for a client that resumes its stream elsewhere. Another replica
    ///   takes it for dead only once its own heartbeats have been answered without a gap for
    ///   2 × `node_ttl` (after a store outage every heartbeat key may have lapsed).
    /// - caps: `max_sessions` (100 000; `initialize` fails past it), `max_events_per_stream`
    ///   (1 000; oldest trimmed first), `max_inflight_per_session` (64; the request is answered
    ///   with error -32003 past it), byte caps of the event logs.
    pub store: StoreConfig,
    /// The `retry` hint (SSE `retry:` field) sent with the priming event of every stream: how long
    /// a client waits before it reconnects a dropped stream. Default 3 s.
    pub sse_retry: Duration,
    /// Events queued for one open SSE connection on this replica (default 64). When full, the
    /// event is not dropped: the connection re-reads its stream's event log from the last event
    /// it sent.
    pub connection_queue: usize,
    /// How often every open stream re-reads its event log in case a bus doorbell (Redis
    /// pub/sub) was missed (default 15 s): an event missed that way reaches its client at most
    /// this late. The gateway re-reads at each keep-alive, by the same rule
    /// (`switchboard_runtime::pump`). A stream that cannot read its log for 5 s (a failing
    /// store) is closed, for its client to resume with `Last-Event-ID`.
    pub log_recheck_interval: Duration,
    /// How often a resumed stream whose request runs on another replica checks that replica's
    /// liveness (default 1 s); a dead replica's request ends with error -32004.
    pub liveness_check_interval: Duration,
    /// Whether responses to requests served without a session (MCP 2026-07-28) are logged
    /// through [`crate::StoreEvents`], so that their client can resume them on any replica
    /// (default `false`, rmcp's own default: such a stream ends with its connection). Each such
    /// stream then costs a scope in the store (a session record of its own, counted toward
    /// `max_sessions`, expiring `idle_ttl` after its last event) and two more round trips for
    /// its first event.
    pub log_stateless_streams: bool,
    /// How long [`crate::ReplicatedSessionManager::shutdown`] waits for calls still running here
    /// to log their last event (default 10 s).
    pub drain_timeout: Duration,
    /// Redis's `maxmemory-policy` ([`switchboard_store::eviction`]), read at start and every
    /// `eviction.check_interval` (default 30 s). A policy that may evict keys (anything but
    /// `noeviction`: every key of a replica has a TTL, so at Redis's memory limit heartbeats,
    /// sessions and event logs go) makes the constructors fail with [`Error::Eviction`] unless
    /// `eviction.allow` is set (default `false`); a change at runtime is logged, and
    /// [`crate::ReplicatedSessionManager::eviction_readiness`] says not ready.
    pub eviction: EvictionSettings,
}

/// The setting that accepts an evicting `maxmemory-policy`, as messages name it.
pub(crate) const EVICTION_OPT_IN: &str = "ReplicatedConfig::eviction.allow = true";

impl ReplicatedConfig {
    /// The defaults with node id `node_id`.
    pub fn new(node_id: impl Into<String>) -> ReplicatedConfig {
        ReplicatedConfig {
            store: StoreConfig::default_for(node_id),
            sse_retry: Duration::from_secs(3),
            connection_queue: 64,
            log_recheck_interval: Duration::from_secs(15),
            liveness_check_interval: Duration::from_secs(1),
            log_stateless_streams: false,
            drain_timeout: Duration::from_secs(10),
            eviction: EvictionSettings::default(),
        }
    }

    /// These settings with the node id made unique to this process: `<node id>.<4 random hex
    /// digits>`, as the gateway does with `cluster.node_id`. A replica restarted with the same
    /// configured id (same pod name, same flag) is then never taken for the process that died:
    /// answers, cancellations and liveness meant for the old one do not reach the new one.
    /// [`ReplicatedSessionManager::redis`](crate::ReplicatedSessionManager::redis),
    /// [`open`](crate::ReplicatedSessionManager::open) and
    /// [`memory`](crate::ReplicatedSessionManager::memory) call it.
    pub fn for_this_process(mut self) -> ReplicatedConfig {
        self.store.node_id = format!("{}.{:04x}", self.store.node_id, rand::random::<u16>());
        self
    }

    /// These settings with the session idle TTL set to `ttl` (see [`StoreConfig::idle_ttl`]).
    pub fn with_idle_ttl(mut self, ttl: Duration) -> ReplicatedConfig {
        self.store.idle_ttl = ttl;
        self
    }

    /// These settings with the Redis key prefix set to `prefix`.
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> ReplicatedConfig {
        self.store.key_prefix = prefix.into();
        self
    }

    /// These settings accepting a Redis whose `maxmemory-policy` may evict keys (see
    /// [`ReplicatedConfig::eviction`]): the replica starts with a warning instead of failing.
    pub fn with_eviction_allowed(mut self) -> ReplicatedConfig {
        self.eviction.allow = true;
        self
    }

    /// Checks the values a replica cannot run with.
    ///
    /// # Errors
    /// [`Error::Config`] naming the setting: an empty node id or one with `/`, `@` or a
    /// character outside visible ASCII; a zero `idle_ttl`, `node_ttl`, `connection_queue` or
    /// `eviction.check_interval`.
    pub fn validate(&self) -> Result<(), Error> {
        let id = &self.store.node_id;
        let visible = id.bytes().all(|b| b.is_ascii_graphic());
        if id.is_empty() || !visible || id.contains(['/', '@']) {
            return Err(Error::Config(format!(
                "store.node_id must be visible ASCII without '/' or '@', got {id:?}"
            )));
        }
        if self.store.idle_ttl.is_zero() || self.store.node_ttl.is_zero() {
            return Err(Error::Config(
                "store.idle_ttl and store.node_ttl must be above zero".into(),
            ));
        }
        if self.connection_queue == 0 {
            return Err(Error::Config("connection_queue must be at least 1".into()));
        }
        if self.eviction.check_interval.is_zero() {
            return Err(Error::Config(
                "eviction.check_interval must be above zero".into(),
            ));
        }
        Ok(())
    }

    /// The periods of this replica's background loops (the runtime's heartbeat, keep-alive and
    /// reaper).
    pub(crate) fn timing(&self) -> switchboard_runtime::Timing {
        switchboard_runtime::Timing {
            node_ttl: self.store.node_ttl,
            heartbeat: self.heartbeat_interval(),
            keep_alive: self.touch_interval(),
            reaper: self.reaper_interval(),
        }
    }

    /// How often this replica marks itself alive: a third of `node_ttl`.
    pub(crate) fn heartbeat_interval(&self) -> Duration {
        at_least_10ms(self.store.node_ttl / 3)
    }

    /// How often sessions with a stream open or a call running here are kept alive: a third of
    /// `idle_ttl`, at most 10 s.
    pub(crate) fn touch_interval(&self) -> Duration {
        at_least_10ms((self.store.idle_ttl / 3).min(Duration::from_secs(10)))
    }

    /// How often a reaper pass runs (one replica at a time does the work): `idle_ttl`, at
    /// most 10 s.
    pub(crate) fn reaper_interval(&self) -> Duration {
        at_least_10ms(self.store.idle_ttl.min(Duration::from_secs(10)))
    }
}

impl Default for ReplicatedConfig {
    /// [`ReplicatedConfig::new`] with node id `rmcp-<8 random hex digits>`.
    fn default() -> ReplicatedConfig {
        ReplicatedConfig::new(format!("rmcp-{:08x}", rand::random::<u32>()))
    }
}

fn at_least_10ms(d: Duration) -> Duration {
    d.max(Duration::from_millis(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_that_would_break_tokens_are_refused() {
        assert!(ReplicatedConfig::new("a.1").validate().is_ok());
        for bad in ["", "a/b", "a@b", "a b", "é"] {
            assert!(ReplicatedConfig::new(bad).validate().is_err(), "{bad:?}");
        }
        let mut zero = ReplicatedConfig::new("a");
        zero.connection_queue = 0;
        assert!(zero.validate().is_err());
    }

    #[test]
    fn each_process_gets_its_own_node_id() {
        let a = ReplicatedConfig::new("a").for_this_process();
        assert!(a.store.node_id.starts_with("a.") && a.store.node_id.len() == 6);
        assert!(a.validate().is_ok());
        let ids: std::collections::HashSet<String> = (0..20)
            .map(|_| ReplicatedConfig::new("a").for_this_process().store.node_id)
            .collect();
        assert!(ids.len() > 1, "random per process");
    }

    #[test]
    fn periodic_work_follows_the_ttls() {
        let c = ReplicatedConfig::new("a").with_idle_ttl(Duration::from_secs(3));
        assert_eq!(c.touch_interval(), Duration::from_secs(1));
        assert_eq!(c.reaper_interval(), Duration::from_secs(3));
        assert!(c.heartbeat_interval() < c.store.node_ttl);
        let long = ReplicatedConfig::new("a");
        assert_eq!(long.touch_interval(), Duration::from_secs(10));
    }
}
