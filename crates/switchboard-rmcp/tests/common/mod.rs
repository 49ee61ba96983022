//! What the tests of this crate share: a backend per test (the memory store, or a private
//! `redis-server` on a free port started through the workspace harness), replicas of a test
//! server on `127.0.0.1:0` over it, and a look at the keys a session still holds.

#![allow(dead_code)] // each test file uses part of it

pub mod server;

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::StreamableHttpService;
use switchboard_rmcp::{ReplicatedConfig, ReplicatedSessionManager};
use switchboard_store::{MemoryStore, RedisStore, Store, StoreConfig};
use switchboard_tests::redis_server::RedisServer;
use tokio_util::sync::CancellationToken;

/// Which store a test runs on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Memory,
    Redis,
}

/// One test's store: shared by every replica of the test.
pub struct Env {
    pub config: StoreConfig,
    memory: Option<Arc<MemoryStore>>,
    redis: Option<RedisServer>,
}

/// Generous bound for anything a test waits for.
pub const WAIT: Duration = Duration::from_secs(10);

impl Env {
    /// A fresh backend of `kind` whose sessions idle out after `idle_ttl`.
    pub fn new(kind: Kind, idle_ttl: Duration) -> Env {
        let mut config = StoreConfig::default_for("a");
        config.key_prefix = "sbt".into();
        config.idle_ttl = idle_ttl;
        config.node_ttl = Duration::from_secs(2);
        let (memory, redis) = match kind {
            Kind::Memory => (Some(MemoryStore::new(config.clone())), None),
            Kind::Redis => (None, Some(RedisServer::start())),
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
        let redis = self.redis.as_ref().expect("a backend");
        let config = StoreConfig {
            node_id: node.to_owned(),
            ..self.config.clone()
        };
        RedisStore::connect(&redis.url(), config)
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

    /// Keys (Redis) or their equivalent (memory) still held by session `sid`: every key with
    /// its hash tag, and its entry in the session index.
    pub async fn keys_of(&self, sid: &str) -> usize {
        if let Some(m) = &self.memory {
            return m.key_count_for(sid).await;
        }
        let redis = self.redis.as_ref().expect("a backend");
        let tagged = redis.keys_matching(&format!("*{{{sid}}}*")).len();
        let index = format!("{}:sessions", self.config.key_prefix);
        let indexed: Option<String> = redis.query(&["ZSCORE", &index, sid]).expect("ZSCORE");
        tagged + usize::from(indexed.is_some())
    }

    /// The private Redis, for Redis-only checks.
    pub fn redis(&self) -> Option<&RedisServer> {
        self.redis.as_ref()
    }
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

/// Generates `memory_<case>` and `redis_<case>` tests from `async fn case(kind: Kind)`.
#[macro_export]
macro_rules! both_backends {
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
    };
}
