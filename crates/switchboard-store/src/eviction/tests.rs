use std::time::{Duration, Instant};

use super::*;
use crate::{MemoryStore, StoreConfig};

const TTL: Duration = Duration::from_secs(5);

fn watch(allow: bool) -> EvictionWatch {
    let settings = EvictionSettings {
        allow,
        ..EvictionSettings::default()
    };
    EvictionWatch::new(settings, "redis.allow_eviction = true")
}

fn evicting() -> PolicyStatus {
    PolicyStatus::Read(MemoryPolicy::Evicting {
        policy: "volatile-ttl".into(),
        server: "127.0.0.1:6399".into(),
    })
}

#[tokio::test]
async fn the_memory_store_has_no_policy_to_watch() {
    let w = watch(false);
    assert!(w.applies(), "not read yet");
    let store = MemoryStore::new(StoreConfig::default_for("a"));
    w.check_at_start(store.as_ref()).await.unwrap();
    assert!(!w.applies());
    assert_eq!(w.readiness(), Readiness::Ready);
}

#[test]
fn readiness_follows_the_policy_and_the_opt_in() {
    let strict = watch(false);
    assert_eq!(strict.readiness(), Readiness::Ready, "nothing read yet");
    strict.set(PolicyStatus::Read(MemoryPolicy::NoEviction));
    assert_eq!(strict.readiness(), Readiness::Ready);
    strict.set(evicting());
    let Readiness::NotReady(why) = strict.readiness() else {
        panic!("an evicting policy without the opt-in is not ready");
    };
    assert!(why.contains("maxmemory-policy volatile-ttl"), "{why}");
    assert!(why.contains("maxmemory-policy noeviction"), "{why}");
    assert!(why.contains("redis.allow_eviction = true"), "{why}");
    let allowed = watch(true);
    allowed.set(evicting());
    assert!(matches!(allowed.readiness(), Readiness::Warn(w) if w.contains("volatile-ttl")));
    allowed.set(PolicyStatus::Unchecked("ERR unknown command 'INFO'".into()));
    assert!(
        matches!(allowed.readiness(), Readiness::Warn(w) if w.contains("could not be checked"))
    );
}

#[test]
fn a_heartbeat_gone_early_is_a_probable_eviction() {
    let w = watch(false);
    let counted = || {
        switchboard_telemetry::metrics::get()
            .counters
            .heartbeats_evicted
            .get()
    };
    assert_eq!(
        w.heartbeat_answered(Instant::now(), false, TTL),
        Lapse::Lapsed,
        "the first"
    );
    assert_eq!(w.heartbeat_answered(Instant::now(), true, TTL), Lapse::None);
    let before = counted();
    assert_eq!(
        w.heartbeat_answered(Instant::now(), false, TTL),
        Lapse::ProbablyEvicted,
        "gone a moment after an answered heartbeat"
    );
    assert!(counted() > before);
    w.heartbeat_failed();
    assert_eq!(
        w.heartbeat_answered(Instant::now(), false, TTL),
        Lapse::Lapsed,
        "after a failure nothing tells an eviction from a lapse"
    );
    let long_ago = Instant::now() - TTL;
    w.heartbeat_answered(long_ago, true, TTL);
    assert_eq!(
        w.heartbeat_answered(Instant::now(), false, TTL),
        Lapse::Lapsed,
        "silent for node_ttl: an ordinary lapse"
    );
}

#[test]
fn the_refusal_names_the_redis_setting_and_the_opt_in() {
    let refused = EvictionRefused {
        policy: "allkeys-lru".into(),
        server: "redis://127.0.0.1:6399/".into(),
        opt_in: "redis.allow_eviction = true",
    };
    let text = refused.to_string();
    for needle in [
        "maxmemory-policy allkeys-lru",
        "`maxmemory-policy noeviction`",
        "redis.allow_eviction = true",
        "redis://127.0.0.1:6399/",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
}
