//! One test environment per case: a memory state, a private `redis-server`, or a fresh key prefix
//! on the Redis Cluster or Sentinel group shared by one suite run ([`Shared`]), and node views.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::json;
use switchboard_protocol::{SessionId, StreamId};
use switchboard_store::redis::RedisTopology;
use switchboard_store::*;
use switchboard_tests::redis_backend::{RedisBackend, RedisKind};
use switchboard_tests::redis_server::RedisServer;
use tokio::sync::mpsc;

/// Which backend a case runs against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Memory,
    /// A private standalone `redis-server` per case.
    Redis,
    /// The Redis Cluster of the running [`Shared`] suite (3 primaries, 3 replicas).
    Cluster,
    /// The Sentinel group of the running [`Shared`] suite (primary, replica, 3 sentinels).
    Sentinel,
}

/// Where a case's data lives.
enum Backend {
    Memory(Arc<MemoryStore>),
    /// Owned by this case (standalone) or shared by the suite run (Cluster, Sentinel).
    Redis(Arc<RedisBackend>),
}

/// A backend instance shared by the node views of one case.
pub struct Env {
    pub config: StoreConfig,
    backend: Backend,
}

static SHARED_CLUSTER: Mutex<Option<Arc<RedisBackend>>> = Mutex::new(None);
static SHARED_SENTINEL: Mutex<Option<Arc<RedisBackend>>> = Mutex::new(None);

fn slot(kind: Kind) -> &'static Mutex<Option<Arc<RedisBackend>>> {
    match kind {
        Kind::Cluster => &SHARED_CLUSTER,
        Kind::Sentinel => &SHARED_SENTINEL,
        other => panic!("{other:?} is not shared"),
    }
}

/// One Redis Cluster or Sentinel group for a whole suite run (starting one per case would take
/// seconds each); every case on it gets its own key prefix. Dropping this (also when a case
/// panics) stops its processes.
pub struct Shared(Kind);

impl Shared {
    /// Starts the topology of `kind` (`Cluster` or `Sentinel`) for the cases that follow.
    pub fn start(kind: Kind) -> Shared {
        let redis = match kind {
            Kind::Cluster => RedisKind::Cluster,
            _ => RedisKind::Sentinel,
        };
        *slot(kind).lock() = Some(Arc::new(RedisBackend::start(redis)));
        Shared(kind)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let taken = slot(self.0).lock().take();
        drop(taken);
    }
}

impl Env {
    /// Default settings (node id `a`), changed by `tweak`.
    pub fn new(kind: Kind, tweak: impl FnOnce(&mut StoreConfig)) -> Env {
        let mut config = StoreConfig::default_for("a");
        config.key_prefix = "sbt".into();
        tweak(&mut config);
        let backend = match kind {
            Kind::Memory => Backend::Memory(MemoryStore::new(config.clone())),
            Kind::Redis => Backend::Redis(Arc::new(RedisBackend::Standalone(RedisServer::start()))),
            Kind::Cluster | Kind::Sentinel => {
                config.key_prefix = format!("sbt{}", &sid()[..10]);
                let shared = slot(kind).lock().clone();
                Backend::Redis(shared.expect("a shared topology started by Shared::start"))
            }
        };
        Env { config, backend }
    }

    /// The store as seen from node `id`.
    pub async fn node(&self, id: &str) -> Arc<dyn Store> {
        let redis = match &self.backend {
            Backend::Memory(m) => return m.for_node(id),
            Backend::Redis(r) => r,
        };
        let config = StoreConfig {
            node_id: id.to_owned(),
            ..self.config.clone()
        };
        let topology = match redis.as_ref() {
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

    /// The private standalone Redis, for Redis-only checks.
    pub fn redis(&self) -> &RedisServer {
        match &self.backend {
            Backend::Redis(r) => r.server(),
            Backend::Memory(_) => panic!("a redis env"),
        }
    }

    /// Keys (Redis, on every server that holds some) or their equivalent (memory) still held
    /// for `sid`.
    pub async fn keys_of(&self, sid: &str) -> usize {
        match &self.backend {
            Backend::Memory(m) => m.key_count_for(sid).await,
            Backend::Redis(r) => r.keys_matching(&format!("*{{{sid}}}*")).len(),
        }
    }

    /// Streams in the session's registry.
    pub async fn registered_streams(&self, sid: &str) -> usize {
        match &self.backend {
            Backend::Memory(m) => m.registered_streams(sid).await,
            Backend::Redis(r) => {
                let key = format!("{}:{{{sid}}}:st", self.config.key_prefix);
                let len: i64 = r.query(&["HLEN", &key]).expect("HLEN is an integer");
                len as usize
            }
        }
    }
}

/// A fresh session id.
pub fn sid() -> String {
    SessionId::generate().to_string()
}

/// A fresh POST stream id.
pub fn stream() -> String {
    StreamId::generate().to_string()
}

/// A record with every field set to something non-default.
pub fn record(sid: &str) -> SessionRecord {
    SessionRecord {
        id: sid.to_owned(),
        revision: "2025-11-25".into(),
        initialize_params: json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"sampling": {}, "roots": {"listChanged": true}},
            "clientInfo": {"name": "t/1", "version": "1.0"},
            "z": 1.5, "a": [1, "two", null]
        })
        .into(),
        initialized: false,
        log_level: None,
        subscriptions: vec![],
        subscription_upstreams: Default::default(),
        principal: "anonymous".into(),
        upstream_sessions: BTreeMap::new(),
        owners: BTreeMap::new(),
        created_ms: 1_700_000_000_123,
    }
}

/// Creates a session and returns its id.
/// Node `store` takes a part in session `sid` (as holding one of its streams there would, which
/// keeps it alive with `touch`). In Redis Cluster a session's messages reach only the nodes that
/// take a part in it (they subscribe to its sharded channel); elsewhere this only touches.
pub async fn takes_part(store: &Arc<dyn Store>, sid: &str) {
    assert!(store.touch(sid).await.unwrap(), "session {sid} exists");
}

pub async fn new_session(store: &Arc<dyn Store>) -> String {
    let id = sid();
    assert_eq!(
        store.create_session(&record(&id)).await.unwrap(),
        CreateOutcome::Created
    );
    id
}

/// An in-flight registration.
pub fn inflight(key: &str, stream: &str, node: &str, holder: &str) -> InflightRequest {
    InflightRequest {
        request_key: key.into(),
        stream: stream.into(),
        node: node.into(),
        holder: holder.into(),
    }
}

/// `begin` that must succeed.
pub async fn begin_ok(
    store: &Arc<dyn Store>,
    sid: &str,
    req: Option<&InflightRequest>,
) -> SessionRecord {
    match store.begin(sid, req).await.unwrap() {
        BeginOutcome::Ready(r) => r,
        other => panic!("begin: expected Ready, got {other:?}"),
    }
}

/// The next inbox message (at most 5 s).
pub async fn recv(rx: &mut mpsc::Receiver<BusMessage>) -> BusMessage {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a bus message within 5 s")
        .expect("inbox open")
}

/// Asserts nothing arrives for a short while.
pub async fn quiet(rx: &mut mpsc::Receiver<BusMessage>) {
    if let Ok(msg) = tokio::time::timeout(Duration::from_millis(250), rx.recv()).await {
        panic!("expected no bus message, got {msg:?}");
    }
}

/// Events of a replay that must succeed.
pub async fn events(
    store: &Arc<dyn Store>,
    sid: &str,
    stream: &str,
    after: &str,
) -> Vec<LoggedEvent> {
    match store.replay(sid, stream, after, 1000).await.unwrap() {
        Replay::Events(e) => e,
        other => panic!("replay {stream} after {after}: expected events, got {other:?}"),
    }
}

/// Keeps `sid` alive (touch every 100 ms) for `total`, heartbeating like a running node does.
pub async fn keep_alive(store: &Arc<dyn Store>, sid: &str, total: Duration) {
    let deadline = tokio::time::Instant::now() + total;
    while tokio::time::Instant::now() < deadline {
        store.heartbeat().await.unwrap();
        assert!(
            store.touch(sid).await.unwrap(),
            "session {sid} expired while kept alive"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
