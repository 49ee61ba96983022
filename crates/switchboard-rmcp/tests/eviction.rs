//! Library mode on a Redis that may evict keys (case C38): a replica refuses to start unless
//! its config allows it, and notices a policy changed at runtime, as the gateway does (the rule
//! is `switchboard_store::eviction`), on a real `redis-server`.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard_rmcp::{Error, ReplicatedConfig, ReplicatedSessionManager};
use switchboard_store::eviction::Readiness;
use switchboard_tests::eventually::eventually;
use switchboard_tests::redis_server::{Persistence, RedisServer};

/// Log lines written while a test runs, for the replica's warnings.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Logs of this thread (the tests run on a current-thread runtime: the replica's background
/// work too) into the returned buffer while the guard lives.
fn capture_logs() -> (Captured, tracing::subscriber::DefaultGuard) {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

fn config() -> ReplicatedConfig {
    ReplicatedConfig::new("evict").with_key_prefix("sbe")
}

#[tokio::test]
async fn a_replica_refuses_an_evicting_redis_unless_its_config_allows_it() {
    let redis =
        RedisServer::start_with_args(Persistence::None, &["--maxmemory-policy", "volatile-ttl"]);
    let refused = ReplicatedSessionManager::redis(&redis.url(), config()).await;
    let Err(Error::Eviction(e)) = refused else {
        panic!("an evicting policy refuses the start");
    };
    let text = e.to_string();
    assert!(text.contains("maxmemory-policy volatile-ttl"), "{text}");
    assert!(text.contains("`maxmemory-policy noeviction`"), "{text}");
    assert!(
        text.contains("ReplicatedConfig::eviction.allow = true"),
        "{text}"
    );
    let heartbeats = redis.keys_matching("sbe:node:*");
    assert!(
        heartbeats.is_empty(),
        "a refused replica wrote nothing: {heartbeats:?}"
    );

    let (logs, _guard) = capture_logs();
    let manager = ReplicatedSessionManager::redis(&redis.url(), config().with_eviction_allowed())
        .await
        .expect("allowed");
    assert!(
        matches!(manager.eviction_readiness(), Readiness::Warn(w) if w.contains("volatile-ttl")),
        "{:?}",
        manager.eviction_readiness()
    );
    assert!(logs.text().contains("EVICTION ALLOWED"), "{}", logs.text());
    manager.shutdown().await;
}

#[tokio::test]
async fn a_policy_changed_at_runtime_is_noticed_and_logged() {
    let redis = RedisServer::start();
    let (logs, _guard) = capture_logs();
    let mut config = config();
    config.eviction.check_interval = Duration::from_millis(200);
    let manager = ReplicatedSessionManager::redis(&redis.url(), config)
        .await
        .expect("noeviction starts");
    assert_eq!(manager.eviction_readiness(), Readiness::Ready);
    let _: () = redis
        .query(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        .unwrap();
    let why = eventually(
        "the replica notices allkeys-lru",
        Duration::from_secs(5),
        || {
            let readiness = manager.eviction_readiness();
            async move {
                match readiness {
                    Readiness::NotReady(why) => Some(why),
                    _ => None,
                }
            }
        },
    )
    .await;
    assert!(why.contains("allkeys-lru"), "{why}");
    let text = logs.text();
    assert!(
        text.contains("ERROR") && text.contains("maxmemory-policy is now allkeys-lru"),
        "{text}"
    );
    manager.shutdown().await;
}
