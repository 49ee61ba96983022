//! What the tests of this crate share: a backend per test (the memory store, or a private
//! `redis-server` on a free port started through the workspace harness), replicas of a test
//! server on `127.0.0.1:0` over it, and a look at the keys a session still holds.

#![allow(dead_code)] // each test file uses part of it

pub mod server;

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::StreamableHttpService;
use serde_json::{json, Value};
use switchboard_rmcp::{ReplicatedConfig, ReplicatedSessionManager};
use switchboard_store::redis::RedisTopology;
use switchboard_store::{MemoryStore, RedisStore, Store, StoreConfig};
use switchboard_tests::client::McpClient;
use switchboard_tests::redis_backend::{RedisBackend, RedisKind};
use switchboard_tests::redis_server::RedisServer;
use tokio_util::sync::CancellationToken;

/// Which store a test runs on.
#[derive(Clone)]
pub enum Kind {
    /// The in-process store.
    Memory,
    /// A private standalone `redis-server` for the test.
    Redis,
    /// A Redis Cluster or Sentinel group shared by several cases, each under its own key prefix.
    Shared(Arc<RedisBackend>),
}

/// One test's store: shared by every replica of the test.
pub struct Env {
    pub config: StoreConfig,
    memory: Option<Arc<MemoryStore>>,
    redis: Option<Arc<RedisBackend>>,
}

/// Generous bound for anything a test waits for.
pub const WAIT: Duration = Duration::from_secs(10);

/// The protocol revision the tests' clients speak.
pub const REVISION: &str = "2025-11-25";

/// A client of a fresh session, initialized on `url` with the sampling capability.
pub async fn session(url: &str) -> (McpClient, String) {
    let mut client = McpClient::new();
    let (sid, _) = client
        .initialize_with(url, REVISION, json!({"sampling": {}}))
        .await;
    (client, sid)
}

/// The client's answer to the sampling request `id`: an assistant message of `text`.
pub fn sampled(id: &Value, text: &str) -> Value {
    let result =
        json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"});
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The text of a `tools/call` result.
pub fn text_of(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

impl Env {
    /// A fresh backend of `kind` (on a shared one, a fresh key prefix) whose sessions idle out
    /// after `idle_ttl`.
    pub fn new(kind: Kind, idle_ttl: Duration) -> Env {
        let mut config = StoreConfig::default_for("a");
        config.key_prefix = "sbt".into();
        config.idle_ttl = idle_ttl;
        config.node_ttl = Duration::from_secs(2);
        let (memory, redis) = match kind {
            Kind::Memory => (Some(MemoryStore::new(config.clone())), None),
            Kind::Redis => {
                let server = RedisBackend::Standalone(RedisServer::start());
                (None, Some(Arc::new(server)))
            }
            Kind::Shared(backend) => {
                config.key_prefix = format!("sbt{:08x}", rand_u32());
                (None, Some(backend))
            }
        };
        Env {
            config,
            memory,
            redis,
        }
    }

    /// The store as node `node` sees it.
    pub async fn store(&self, node: &str) -> Arc<dyn Store> {
        if let Some(m) = &self.memory {
            return m.for_node(node);
        }
        let config = StoreConfig {
            node_id: node.to_owned(),
            ..self.config.clone()
        };
        let topology = match self.redis.as_deref().expect("a backend") {
            RedisBackend::Standalone(r) => RedisTopology::standalone(&r.url()),
            RedisBackend::Cluster(c) => RedisTopology::cluster(&c.seed_urls()),
            RedisBackend::Sentinel(s) => {
                RedisTopology::sentinel(&s.sentinel_urls(), s.master_name())
            }
        };
        RedisStore::open(&topology, config)
            .await
            .expect("connect to redis")
    }

    /// A replica `node` of the test server, served on a free loopback port.
    pub async fn replica(&self, node: &str) -> Replica {
        let mut config = ReplicatedConfig::new(node);
        config.store = StoreConfig {
            node_id: node.to_owned(),
            ..self.config.clone()
        };
        config.drain_timeout = Duration::from_secs(1);
        let manager = ReplicatedSessionManager::with_store(self.store(node).await, config)
            .await
            .expect("a replica starts");
        let service = StreamableHttpService::new(
            || Ok(server::TestServer::new()),
            manager.clone(),
            manager.http_config(),
        );
        let app = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        let stop = CancellationToken::new();
        let serve =
            axum::serve(listener, app).with_graceful_shutdown(stop.clone().cancelled_owned());
        tokio::spawn(std::future::IntoFuture::into_future(serve));
        Replica { manager, url, stop }
    }

    /// The test's private `redis-server` (a [`Kind::Redis`] env), to stop and restart it.
    pub fn redis_server(&mut self) -> &mut RedisServer {
        match self.backend_mut() {
            RedisBackend::Standalone(server) => server,
            _ => panic!("not a standalone Redis"),
        }
    }

    /// The test's Redis, when the env alone holds it (a [`Kind::Redis`] env, or a
    /// [`Kind::Shared`] one given the only handle), to kill and restart its servers.
    pub fn backend_mut(&mut self) -> &mut RedisBackend {
        let backend = self.redis.as_mut().expect("a Redis backend");
        Arc::get_mut(backend).expect("a private Redis")
    }

    /// Keys (Redis, on whichever server holds them) or their equivalent (memory) still held by
    /// session `sid`: every key with its hash tag, and its entry in the session index.
    pub async fn keys_of(&self, sid: &str) -> usize {
        if let Some(m) = &self.memory {
            return m.key_count_for(sid).await;
        }
        let redis = self.redis.as_deref().expect("a backend");
        let prefix = &self.config.key_prefix;
        let tagged = redis.keys_matching(&format!("{prefix}:{{{sid}}}*")).len();
        let index = format!("{prefix}:sessions");
        let indexed: Option<String> = redis.query(&["ZSCORE", &index, sid]).expect("ZSCORE");
        tagged + usize::from(indexed.is_some())
    }
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish() as u32
}

/// One replica: its session manager and the URL of its `/mcp` endpoint.
pub struct Replica {
    pub manager: Arc<ReplicatedSessionManager>,
    pub url: String,
    stop: CancellationToken,
}

impl Replica {
    /// Stops taking connections and shuts the replica down.
    pub async fn stop(&self) {
        self.stop.cancel();
        self.manager.shutdown().await;
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Runs `cases` in turn on one shared Redis of `kind` (starting a Cluster or a Sentinel group
/// per case would take seconds each), each case under its own key prefix.
pub async fn every_case_on<F, Fut>(kind: RedisKind, cases: &[(&str, F)])
where
    F: Fn(Kind) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let backend = Arc::new(tokio::task::block_in_place(|| RedisBackend::start(kind)));
    for (name, case) in cases {
        eprintln!("{kind:?}: {name}");
        case(Kind::Shared(backend.clone())).await;
    }
}

/// Generates, from `async fn case(kind: Kind)`, the tests `memory::<case>` and `redis::<case>`,
/// and `on_cluster::every_case` and `on_sentinel::every_case`, which run every case on one
/// shared Redis Cluster (3 primaries, a replica each) and one Sentinel group.
#[macro_export]
macro_rules! every_backend {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                super::$case(super::common::Kind::Memory).await
            })*
        }
        mod redis {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                super::$case(super::common::Kind::Redis).await
            })*
        }
        mod on_cluster {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_case() {
                use super::common::{every_case_on, Kind};
                use switchboard_tests::redis_backend::RedisKind;
                type Case = fn(Kind) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
                let cases: &[(&str, Case)] = &[$((stringify!($case), |k| Box::pin(super::$case(k)))),*];
                every_case_on(RedisKind::Cluster, cases).await
            }
        }
        mod on_sentinel {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_case() {
                use super::common::{every_case_on, Kind};
                use switchboard_tests::redis_backend::RedisKind;
                type Case = fn(Kind) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
                let cases: &[(&str, Case)] = &[$((stringify!($case), |k| Box::pin(super::$case(k)))),*];
                every_case_on(RedisKind::Sentinel, cases).await
            }
        }
    };
}
