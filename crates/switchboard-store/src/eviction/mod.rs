//! Redis eviction (`maxmemory-policy`): the rule the gateway node and library mode
//! (`switchboard-rmcp`) both apply, so it lives once, here.
//!
//! Nearly every key the store writes has a TTL (session records and logs, the session index,
//! node heartbeats, tasks). Under any `maxmemory-policy` but `noeviction` Redis takes such keys
//! away at its memory limit: `volatile-ttl` takes the heartbeats first (the shortest TTL), and
//! the other nodes then take a live node for dead (its requests end with -32004, its tasks
//! fail); the LRU, LFU and random policies take sessions in use (404) and events of logs. So
//! (case C38, after taskforcesh/bullmq#1046 and sidekiq/sidekiq#5562):
//!
//! - at start ([`EvictionWatch::check_at_start`]) a policy that may evict refuses the start,
//!   with a message naming the Redis setting and the opt-in ([`EvictionSettings::allow`]); with
//!   the opt-in it starts and warns. A policy that cannot be read (`INFO` refused) starts with a
//!   warning that it was not checked;
//! - every [`EvictionSettings::check_interval`] ([`EvictionWatch::recheck`]) the policy is read
//!   again; a change is logged, and an evicting policy without the opt-in makes the process not
//!   ready ([`EvictionWatch::readiness`]) rather than ending it;
//! - a heartbeat that finds its predecessor gone although that one was answered well within
//!   `node_ttl` ([`EvictionWatch::heartbeat_answered`]) is logged as a probable eviction and
//!   counted.
//!
//! Modules: `telemetry`, the domain events (logged and counted there).

mod telemetry;

use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::model::MemoryPolicy;
use crate::traits::Liveness;

/// When a process checks the store's `maxmemory-policy` and what it accepts. The gateway's
/// `redis.allow_eviction` and `redis.eviction_check_interval`; library mode's
/// `ReplicatedConfig::eviction`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictionSettings {
    /// Start and stay ready even when Redis may evict keys (default `false`: refuse to start,
    /// and report not ready when the policy changes to one that evicts). Only for a Redis whose
    /// policy cannot be changed and that never reaches its memory limit: at the limit it takes
    /// heartbeats, sessions and event logs away.
    pub allow: bool,
    /// How often the policy is read again after the start (default 30 s). A change is noticed
    /// at most this late.
    pub check_interval: Duration,
}

impl Default for EvictionSettings {
    fn default() -> EvictionSettings {
        EvictionSettings {
            allow: false,
            check_interval: Duration::from_secs(30),
        }
    }
}

/// What is known of the store's `maxmemory-policy`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyStatus {
    /// Not read yet (before [`EvictionWatch::check_at_start`]).
    Pending,
    /// As the servers answered last.
    Read(MemoryPolicy),
    /// It could not be read (why: `INFO` refused, renamed away, or without the field).
    Unchecked(String),
}

/// Whether the process should take requests, as far as eviction goes (`/readyz`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Nothing to say: `noeviction`, no Redis, or not read yet.
    Ready,
    /// Ready, with something the operator should know (an evicting policy allowed by the
    /// opt-in, or a policy that could not be checked).
    Warn(String),
    /// Not ready: Redis may evict keys and the opt-in is off.
    NotReady(String),
}

/// What a heartbeat found of its predecessor ([`EvictionWatch::heartbeat_answered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lapse {
    /// It was still there.
    None,
    /// It was gone, and nothing says it lapsed early: the first heartbeat, one after a failed
    /// one, or one more than 3/4 of `node_ttl` after the previous answered one (this process was
    /// silent that long).
    Lapsed,
    /// It was gone although the previous heartbeat was sent less than 3/4 of `node_ttl` before
    /// this one was answered, with no failure between: something took the key away before its
    /// TTL (eviction; or a Redis restart without persistence, a `FLUSHALL`).
    ProbablyEvicted,
}

/// The start refusal: Redis may evict keys and the opt-in is off. Its text names the Redis
/// setting to change and the opt-in.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Redis at {server} has maxmemory-policy {policy}, which evicts keys at its memory limit, and every key Switchboard writes has a TTL (node heartbeats go first under volatile-ttl, so live nodes look dead to the others; then sessions and event logs). Set `maxmemory-policy noeviction` on that Redis (redis.conf, CONFIG SET, or the managed service's parameter group), or set {opt_in} to start anyway")]
pub struct EvictionRefused {
    /// The policy found.
    pub policy: String,
    /// The server that has it.
    pub server: String,
    /// The opt-in setting, as the reader sets it (`redis.allow_eviction = true`).
    pub opt_in: &'static str,
}

/// One process's view of the store's `maxmemory-policy` and of its own heartbeat (a leaf:
/// the process holds one, its start and background work feed it).
#[derive(Debug)]
pub struct EvictionWatch {
    settings: EvictionSettings,
    opt_in: &'static str,
    status: RwLock<PolicyStatus>,
    /// When the last answered heartbeat was sent; `None` before the first and after a failure.
    last_answered: Mutex<Option<Instant>>,
}

impl EvictionWatch {
    /// A watch with nothing read yet. `opt_in` is the setting that allows eviction, as the
    /// operator writes it (`redis.allow_eviction = true`): messages name it.
    pub fn new(settings: EvictionSettings, opt_in: &'static str) -> EvictionWatch {
        EvictionWatch {
            settings,
            opt_in,
            status: RwLock::new(PolicyStatus::Pending),
            last_answered: Mutex::new(None),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &EvictionSettings {
        &self.settings
    }

    /// What is known now.
    pub fn status(&self) -> PolicyStatus {
        self.status.read().clone()
    }

    /// Whether there is a policy to watch: `false` on the memory store (after the start check).
    pub fn applies(&self) -> bool {
        self.status() != PolicyStatus::Read(MemoryPolicy::NotApplicable)
    }

    /// Reads the policy once, at start, and logs it: `noeviction` (or no Redis) quietly, an
    /// evicting one allowed by the opt-in and one that cannot be read with a warning.
    ///
    /// # Errors
    /// [`EvictionRefused`] when Redis may evict keys and [`EvictionSettings::allow`] is off.
    pub async fn check_at_start(&self, store: &dyn Liveness) -> Result<(), EvictionRefused> {
        let status = match store.memory_policy().await {
            Ok(policy) => PolicyStatus::Read(policy),
            Err(e) => PolicyStatus::Unchecked(e.to_string()),
        };
        self.set(status.clone());
        if let PolicyStatus::Read(MemoryPolicy::Evicting { policy, server }) = &status {
            if !self.settings.allow {
                return Err(EvictionRefused {
                    policy: policy.clone(),
                    server: server.clone(),
                    opt_in: self.opt_in,
                });
            }
        }
        telemetry::policy_at_start(&status, self.opt_in);
        Ok(())
    }

    /// Reads the policy again; a change is logged (loudly when it may evict). A read that
    /// fails keeps what was known (a store outage says nothing of the policy; a policy never
    /// read stays unchecked).
    pub async fn recheck(&self, store: &dyn Liveness) {
        let now = match store.memory_policy().await {
            Ok(policy) => PolicyStatus::Read(policy),
            Err(e) => {
                tracing::debug!(error = %e, "could not read Redis's maxmemory-policy; keeping what was known");
                return;
            }
        };
        let before = self.set(now.clone());
        if before != now {
            telemetry::policy_changed(&before, &now, self.settings.allow, self.opt_in);
        }
    }

    /// Readiness as far as eviction goes (see [`Readiness`]).
    pub fn readiness(&self) -> Readiness {
        match self.status() {
            PolicyStatus::Pending | PolicyStatus::Read(MemoryPolicy::NotApplicable) => {
                Readiness::Ready
            }
            PolicyStatus::Read(MemoryPolicy::NoEviction) => Readiness::Ready,
            PolicyStatus::Read(MemoryPolicy::Evicting { policy, server }) if self.settings.allow => {
                Readiness::Warn(format!(
                    "Redis at {server} has maxmemory-policy {policy} and may evict Switchboard's keys at its memory limit (allowed by {})",
                    self.opt_in
                ))
            }
            PolicyStatus::Read(MemoryPolicy::Evicting { policy, server }) => {
                Readiness::NotReady(format!(
                    "Redis at {server} has maxmemory-policy {policy}, which evicts keys at its memory limit; set `maxmemory-policy noeviction` on it, or set {} to accept it",
                    self.opt_in
                ))
            }
            PolicyStatus::Unchecked(why) => Readiness::Warn(format!(
                "Redis's maxmemory-policy could not be checked ({why}); it must be noeviction"
            )),
        }
    }

    /// A heartbeat sent at `sent` was answered; `live`: its predecessor's key was still there.
    /// Tells a predecessor gone before its TTL from one that lapsed ([`Lapse`]) and logs and
    /// counts the first as a probable eviction; the caller handles both as a lapse (other
    /// processes may have taken this one for dead meanwhile).
    pub fn heartbeat_answered(&self, sent: Instant, live: bool, node_ttl: Duration) -> Lapse {
        let previous = self.last_answered.lock().replace(sent);
        if live {
            return Lapse::None;
        }
        let Some(previous) = previous else {
            return Lapse::Lapsed;
        };
        let gap = previous.elapsed();
        if gap >= node_ttl * 3 / 4 {
            return Lapse::Lapsed;
        }
        telemetry::heartbeat_evicted(gap, node_ttl, &self.status());
        Lapse::ProbablyEvicted
    }

    /// A heartbeat failed or was not answered in time: the next one that finds its predecessor
    /// gone cannot tell an eviction from a lapse.
    pub fn heartbeat_failed(&self) {
        *self.last_answered.lock() = None;
    }

    /// Stores `status` and sets the gauge; the status before.
    fn set(&self, status: PolicyStatus) -> PolicyStatus {
        telemetry::gauge(&status);
        let mut held = self.status.write();
        std::mem::replace(&mut held, status)
    }
}

#[cfg(test)]
mod tests;
