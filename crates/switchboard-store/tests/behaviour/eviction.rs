//! Redis's `maxmemory-policy` (case C38): read from `INFO memory` on every backend, also where
//! `CONFIG` is renamed away; the eviction watch's start refusal, periodic re-read and its
//! telling of an evicted heartbeat from a lapsed one, on a real `redis-server`.

use std::sync::Arc;
use std::time::Instant;

use switchboard_store::eviction::{EvictionSettings, EvictionWatch, Lapse, Readiness};
use switchboard_store::*;
use switchboard_tests::redis_server::{Persistence, RedisServer};

use crate::harness::*;

const OPT_IN: &str = "redis.allow_eviction = true";

fn watch(allow: bool) -> EvictionWatch {
    let settings = EvictionSettings {
        allow,
        ..EvictionSettings::default()
    };
    EvictionWatch::new(settings, OPT_IN)
}

/// A store (node `a`) on a `redis-server` started with `args`.
async fn on_redis(args: &[&str]) -> (RedisServer, Arc<RedisStore>) {
    let redis = RedisServer::start_with_args(Persistence::None, args);
    let store = RedisStore::connect(&redis.url(), StoreConfig::default_for("a"))
        .await
        .expect("connect to redis");
    (redis, store)
}

/// Every backend answers: no policy on the memory store, Redis's default `noeviction`
/// elsewhere (Cluster: every primary; Sentinel: the primary).
pub async fn the_memory_policy_is_read(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let store = env.node("a").await;
    let want = match kind {
        Kind::Memory => MemoryPolicy::NotApplicable,
        _ => MemoryPolicy::NoEviction,
    };
    assert_eq!(store.memory_policy().await.unwrap(), want);
}

#[tokio::test]
async fn an_evicting_policy_refuses_the_start_unless_allowed() {
    let (redis, store) = on_redis(&["--maxmemory-policy", "volatile-ttl"]).await;
    let MemoryPolicy::Evicting { policy, server } = store.memory_policy().await.unwrap() else {
        panic!("volatile-ttl evicts");
    };
    assert_eq!(policy, "volatile-ttl");
    assert!(server.contains(&redis.port().to_string()), "{server}");
    let refused = watch(false).check_at_start(store.as_ref()).await;
    let text = refused.expect_err("refused without the opt-in").to_string();
    assert!(text.contains("`maxmemory-policy noeviction`"), "{text}");
    assert!(text.contains(OPT_IN), "{text}");
    let allowed = watch(true);
    allowed.check_at_start(store.as_ref()).await.unwrap();
    assert!(matches!(allowed.readiness(), Readiness::Warn(w) if w.contains("volatile-ttl")));
}

#[tokio::test]
async fn the_policy_is_read_where_config_is_renamed_away() {
    let (redis, store) = on_redis(&[
        "--maxmemory-policy",
        "allkeys-lru",
        "--rename-command",
        "CONFIG",
        "",
    ])
    .await;
    let refused = redis.query::<Vec<String>>(&["CONFIG", "GET", "maxmemory-policy"]);
    assert!(refused.is_err(), "CONFIG is renamed away: {refused:?}");
    assert!(matches!(
        store.memory_policy().await.unwrap(),
        MemoryPolicy::Evicting { policy, .. } if policy == "allkeys-lru"
    ));
}

#[tokio::test]
async fn a_refused_info_starts_unchecked_with_a_warning() {
    let (_redis, store) = on_redis(&["--rename-command", "INFO", ""]).await;
    assert!(store.memory_policy().await.is_err());
    let w = watch(false);
    w.check_at_start(store.as_ref())
        .await
        .expect("an unreadable policy does not stop the start");
    assert!(
        matches!(w.readiness(), Readiness::Warn(why) if why.contains("could not be checked")),
        "{:?}",
        w.readiness()
    );
}

#[tokio::test]
async fn a_policy_changed_at_runtime_is_noticed_by_the_next_check() {
    let (redis, store) = on_redis(&[]).await;
    let w = watch(false);
    w.check_at_start(store.as_ref()).await.unwrap();
    assert_eq!(w.readiness(), Readiness::Ready);
    let _: () = redis
        .query(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"])
        .unwrap();
    w.recheck(store.as_ref()).await;
    assert!(
        matches!(w.readiness(), Readiness::NotReady(why) if why.contains("volatile-lru")),
        "{:?}",
        w.readiness()
    );
    let _: () = redis
        .query(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        .unwrap();
    w.recheck(store.as_ref()).await;
    assert_eq!(w.readiness(), Readiness::Ready);
}

/// Redis evicts every key with a TTL (`maxmemory` 1 byte for a moment under `volatile-ttl`):
/// the next heartbeat finds its predecessor gone a moment after it was answered, which the
/// watch tells from a lapse.
#[tokio::test]
async fn an_evicted_heartbeat_is_told_from_a_lapse() {
    let (redis, store) = on_redis(&["--maxmemory-policy", "volatile-ttl"]).await;
    let w = watch(true);
    let ttl = store.config().node_ttl;
    let sent = Instant::now();
    let first = store.heartbeat().await.unwrap();
    assert_eq!(
        w.heartbeat_answered(sent, first, ttl),
        Lapse::Lapsed,
        "the first"
    );
    // Both `CONFIG SET`s run the eviction before they run: the first with the old limit
    // (nothing to do), the second with 1 byte (every key with a TTL goes).
    for limit in ["1", "0"] {
        let _: () = redis.query(&["CONFIG", "SET", "maxmemory", limit]).unwrap();
    }
    let stats: String = redis.query(&["INFO", "stats"]).unwrap();
    assert!(
        !stats.contains("evicted_keys:0\r"),
        "Redis evicted: {stats}"
    );
    let sent = Instant::now();
    let live = store.heartbeat().await.unwrap();
    assert!(!live, "the heartbeat key was evicted");
    assert_eq!(
        w.heartbeat_answered(sent, live, ttl),
        Lapse::ProbablyEvicted
    );
}
