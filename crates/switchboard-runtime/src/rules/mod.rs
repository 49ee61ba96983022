//! The runtime's rules as one test suite that each host runs through its own replica and its
//! real [`Sink`](crate::pump::Sink) (feature `rules`, for tests only): the gateway node frames
//! SSE bytes, library mode hands rmcp typed messages, and both must come out the same.
//!
//! A host implements [`Host`] (its replica over a memory store, its stream task, and a decoder
//! of what its sink wrote into [`Written`]) and expands [`rules_tests!`](crate::rules_tests)
//! with it, which makes one `#[tokio::test]` per rule.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchboard_protocol::SessionId;
use switchboard_store::{MemoryStore, Replay, RunningRequest, SessionRecord, Store, StoreConfig};
use tokio::sync::mpsc;

use crate::pump::OpenStream;
use crate::replica::Replica;

mod lost;
#[cfg(test)]
mod recorder;
mod streams;

pub use lost::{a_lost_request_of_this_replica_is_ended, a_running_request_is_left_alone};
pub use streams::{
    a_recheck_writes_what_the_bus_did_not_deliver, a_request_of_a_dead_replica_ends_with_its_error,
    a_stream_whose_log_is_gone_closes, replay_then_live_events_each_once_in_order,
};

/// How long any one expected write may take.
pub const WAIT: Duration = Duration::from_secs(5);

/// The replicas' `node_ttl` in the rules.
pub const NODE_TTL: Duration = Duration::from_millis(100);

/// The periods a host's replica is built with.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// `node_ttl` (the store's is the same).
    pub node_ttl: Duration,
    /// Between two re-reads of a held stream's log.
    pub recheck: Duration,
    /// Between two checks of a resumed request's replica.
    pub liveness_check: Duration,
}

/// What a host's sink wrote, decoded by the host.
#[derive(Clone, Debug, PartialEq)]
pub enum Written {
    /// One event's message, parsed as JSON.
    Event(Value),
    /// A keep-alive (the node's SSE comment; library mode writes none).
    Keepalive,
    /// Anything else: a priming event, a legacy stream's `endpoint` event.
    Other,
}

/// One host of the runtime, as the rules drive it.
pub trait Host: Send + Sync + 'static {
    /// The host's replica.
    type Replica: Replica;
    /// The host's replica, named `a`, over `store`, with `settings`.
    fn replica(&self, store: Arc<dyn Store>, settings: Settings) -> Arc<Self::Replica>;
    /// Opens held stream `open` the host's way (its stream task, its real sink); what the sink
    /// writes comes out decoded, and the channel ends when the stream does.
    fn open(
        &self,
        replica: &Arc<Self::Replica>,
        open: OpenStream,
    ) -> mpsc::UnboundedReceiver<Written>;
}

/// A host's replica `a` with one session in a memory store.
pub struct Rig<H: Host> {
    /// The store all replicas of the rule share.
    pub memory: Arc<MemoryStore>,
    /// Replica `a`.
    pub replica: Arc<H::Replica>,
    /// The session.
    pub sid: String,
}

impl<H: Host> Rig<H> {
    /// Replica `a` of `host` with `recheck` between two log re-reads, and a fresh session.
    pub async fn new(host: &H, recheck: Duration) -> Rig<H> {
        let mut config = StoreConfig::default_for("a");
        config.node_ttl = NODE_TTL;
        let memory = MemoryStore::new(config);
        let store: Arc<dyn Store> = memory.for_node("a");
        let sid = SessionId::generate().as_str().to_owned();
        store.create_session(&record(&sid)).await.expect("create");
        let settings = Settings {
            node_ttl: NODE_TTL,
            recheck,
            liveness_check: Duration::from_millis(50),
        };
        let replica = host.replica(store, settings);
        Rig {
            memory,
            replica,
            sid,
        }
    }

    /// Opens `stream` through the host (claimed for a fresh holder, replayed after `after`),
    /// watching `watch`'s replica; returns what the sink writes and the holder.
    pub async fn open(
        &self,
        host: &H,
        stream: &str,
        after: &str,
        watch: Option<RunningRequest>,
    ) -> (mpsc::UnboundedReceiver<Written>, String) {
        let holder = format!("a/{}", rand::random::<u32>());
        let conn = self.replica.hub().register(&self.sid, stream, &holder);
        let store = self.replica.store();
        let _ = store.claim(&self.sid, stream, &holder).await;
        let replay = match store.replay(&self.sid, stream, after, 256).await {
            Ok(Replay::Events(events)) => events,
            _ => Vec::new(),
        };
        let open = OpenStream {
            sid: self.sid.clone(),
            stream: stream.to_owned(),
            holder: holder.clone(),
            conn,
            replay,
            after: after.to_owned(),
            watch,
            close_after_replay: false,
            resumed_at: None,
        };
        (host.open(&self.replica, open), holder)
    }

    /// Appends `message` to the stream's log; returns its position.
    pub async fn append(&self, stream: &str, message: &Value, end: bool) -> String {
        let data = message.to_string();
        let appended = self.replica.store().append(&self.sid, stream, &data, end);
        appended.await.expect("append").position
    }
}

/// A JSON-RPC notification numbered `n`, as an event's message (a log message: every host's
/// typed messages carry it as it is).
pub fn note(n: u64) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "data": n}})
}

/// An empty JSON-RPC result for request `id`, a request stream's end event.
pub fn answer(id: u64) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}})
}

/// The next event written (keep-alives and other writes skipped), within [`WAIT`]; `None` once
/// the stream has ended.
///
/// # Panics
/// Nothing but keep-alives or other writes within [`WAIT`].
pub async fn next_event(rx: &mut mpsc::UnboundedReceiver<Written>) -> Option<Value> {
    let next = async {
        loop {
            match rx.recv().await {
                Some(Written::Event(v)) => return Some(v),
                Some(_) => continue,
                None => return None,
            }
        }
    };
    match tokio::time::timeout(WAIT, next).await {
        Ok(v) => v,
        Err(_) => panic!("no event and no end within {WAIT:?}"),
    }
}

fn record(sid: &str) -> SessionRecord {
    SessionRecord {
        id: sid.to_owned(),
        revision: "2025-11-25".into(),
        initialize_params: Arc::new(serde_json::json!({"capabilities": {}})),
        initialized: true,
        log_level: None,
        subscriptions: Vec::new(),
        subscription_upstreams: Default::default(),
        principal: "anonymous".into(),
        upstream_sessions: Default::default(),
        owners: Default::default(),
        created_ms: 0,
    }
}

/// One `#[tokio::test]` per rule for host `$host` (an expression building the [`Host`]).
#[macro_export]
macro_rules! rules_tests {
    ($host:expr) => {
        $crate::rules_tests!(@each $host;
            replay_then_live_events_each_once_in_order,
            a_recheck_writes_what_the_bus_did_not_deliver,
            a_stream_whose_log_is_gone_closes,
            a_request_of_a_dead_replica_ends_with_its_error,
            a_lost_request_of_this_replica_is_ended,
            a_running_request_is_left_alone,
        );
    };
    (@each $host:expr; $($rule:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $rule() {
                $crate::rules::$rule(&$host).await;
            }
        )+
    };
}
