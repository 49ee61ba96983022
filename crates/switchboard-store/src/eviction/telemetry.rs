//! The eviction watch's domain events: each logs and counts here, once
//! ([`switchboard_telemetry::metrics`]: `switchboard_redis_evicting`,
//! `switchboard_heartbeats_evicted_total`).

use std::time::Duration;

use switchboard_telemetry::metrics::{self, labels};

use super::PolicyStatus;
use crate::model::MemoryPolicy;

/// Sets `switchboard_redis_evicting` to `status` (no series before the first read and on the
/// memory store).
pub(super) fn gauge(status: &PolicyStatus) {
    let m = metrics::get();
    match status {
        PolicyStatus::Pending | PolicyStatus::Read(MemoryPolicy::NotApplicable) => {
            m.redis_evicting.clear()
        }
        PolicyStatus::Read(MemoryPolicy::NoEviction) => {
            m.redis_policy(labels::maxmemory_policy("noeviction"), false)
        }
        PolicyStatus::Read(MemoryPolicy::Evicting { policy, .. }) => {
            m.redis_policy(labels::maxmemory_policy(policy), true)
        }
        PolicyStatus::Unchecked(_) => m.redis_policy(labels::UNREAD, false),
    }
}

/// The policy read at start, when the process starts with it (a refusal is the caller's to
/// report: it ends the start).
pub(super) fn policy_at_start(status: &PolicyStatus, opt_in: &str) {
    match status {
        PolicyStatus::Pending | PolicyStatus::Read(MemoryPolicy::NotApplicable) => {}
        PolicyStatus::Read(MemoryPolicy::NoEviction) => {
            tracing::info!(
                "Redis maxmemory-policy is noeviction: no key is evicted at its memory limit"
            )
        }
        PolicyStatus::Read(MemoryPolicy::Evicting { policy, server }) => tracing::warn!(
            policy = %policy,
            server = %server,
            "EVICTION ALLOWED: Redis has maxmemory-policy {policy} and will evict Switchboard's keys at its memory limit (heartbeats under volatile-ttl, so live nodes look dead; sessions and event logs otherwise); starting only because {opt_in}. Set `maxmemory-policy noeviction` on Redis"
        ),
        PolicyStatus::Unchecked(why) => tracing::warn!(
            error = %why,
            "could not check Redis's maxmemory-policy (INFO memory refused or renamed?): starting unchecked. It must be noeviction, or Redis evicts Switchboard's keys at its memory limit"
        ),
    }
}

/// The policy read periodically differs from the one before.
pub(super) fn policy_changed(before: &PolicyStatus, now: &PolicyStatus, allow: bool, opt_in: &str) {
    let was = describe(before);
    match now {
        PolicyStatus::Read(MemoryPolicy::Evicting { policy, server }) if allow => tracing::warn!(
            policy = %policy,
            server = %server,
            was = %was,
            "EVICTION ALLOWED: Redis's maxmemory-policy is now {policy}: it will evict Switchboard's keys at its memory limit; staying ready because {opt_in}. Set `maxmemory-policy noeviction` on Redis"
        ),
        PolicyStatus::Read(MemoryPolicy::Evicting { policy, server }) => tracing::error!(
            policy = %policy,
            server = %server,
            was = %was,
            "Redis's maxmemory-policy is now {policy}: it will evict Switchboard's keys at its memory limit (heartbeats under volatile-ttl, so live nodes look dead; sessions and event logs otherwise). NOT READY (/readyz 503) until `maxmemory-policy noeviction` is set on Redis, or {opt_in}"
        ),
        PolicyStatus::Read(MemoryPolicy::NoEviction) => tracing::warn!(
            was = %was,
            "Redis's maxmemory-policy is noeviction again"
        ),
        _ => {
            tracing::info!(was = %was, now = %describe(now), "Redis's maxmemory-policy reads differently")
        }
    }
}

/// This process's heartbeat key was gone `gap` after the previous heartbeat was sent, well
/// within `node_ttl`.
pub(super) fn heartbeat_evicted(gap: Duration, node_ttl: Duration, status: &PolicyStatus) {
    metrics::get().counters.heartbeats_evicted.inc();
    tracing::warn!(
        gap_ms = gap.as_millis() as u64,
        node_ttl_ms = node_ttl.as_millis() as u64,
        maxmemory_policy = %describe(status),
        "this process's heartbeat key was gone although the previous heartbeat was answered well within node_ttl: probably evicted by Redis (check maxmemory-policy, which must be noeviction, and evicted_keys in INFO stats), or lost in a Redis restart without persistence; other processes may have taken this one for dead meanwhile"
    );
}

/// A status as a log value: the policy, `unknown`, or `none` (no Redis).
fn describe(status: &PolicyStatus) -> String {
    match status {
        PolicyStatus::Pending => "not read".into(),
        PolicyStatus::Read(MemoryPolicy::NotApplicable) => "none (no Redis)".into(),
        PolicyStatus::Read(MemoryPolicy::NoEviction) => "noeviction".into(),
        PolicyStatus::Read(MemoryPolicy::Evicting { policy, .. }) => policy.clone(),
        PolicyStatus::Unchecked(_) => labels::UNREAD.into(),
    }
}
