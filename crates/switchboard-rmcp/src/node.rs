//! What one replica shares between its session manager, its connections, its recorders and its
//! background work: the store, the local rmcp session layer, the open connections, the calls
//! running here, and the two stop signals.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::SessionManager;
use switchboard_protocol::StreamId;
use switchboard_runtime::{ReplicaState, StreamEvent};
use switchboard_store::eviction::EvictionWatch;
use switchboard_store::{holder_node, retry, Appended, Store};
use switchboard_telemetry::trace::logged_session;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{ReplicatedConfig, EVICTION_OPT_IN};

/// One replica's shared state.
pub(crate) struct Node {
    /// The store (memory or Redis), seen as this replica.
    pub store: Arc<dyn Store>,
    /// The settings.
    pub config: ReplicatedConfig,
    /// What this replica holds for the runtime: the connections open here, how long the store
    /// has answered its heartbeats (whether another replica whose heartbeat lapsed can be taken
    /// for dead: `switchboard_runtime::liveness::is_dead`), Redis's `maxmemory-policy` as last read, the loops' periods.
    pub replica: ReplicaState,
    /// rmcp's in-process sessions: the handler of each session this replica serves runs here.
    pub local: LocalSessionManager,
    /// Recorders and connection tasks, so that a shutdown can wait for them.
    pub tasks: TaskTracker,
    /// Cancelled when the replica starts draining: standalone streams close (their clients
    /// reopen them on another replica), no work is taken on.
    pub draining: CancellationToken,
    /// Cancelled when the replica stops: rmcp's sessions here end, every connection closes.
    pub stopped: CancellationToken,
    next_conn: AtomicU64,
    /// The lifetime number of each session's current rmcp handler here ([`Node::handler_started`]).
    handlers: Mutex<HashMap<String, u64>>,
    next_handler: AtomicU64,
    /// Requests running here that their client cancelled: (session, request key).
    cancelled: Mutex<HashSet<(String, String)>>,
}

impl Node {
    /// A replica over `store`. A session's handler here closes after [`local_keep_alive`]
    /// without a message (the store keeps the session for the other replicas).
    pub fn new(store: Arc<dyn Store>, config: ReplicatedConfig) -> Node {
        let mut session_config = SessionConfig::default();
        session_config.keep_alive = Some(local_keep_alive(&config));
        // Priming events and resumption are this crate's: the local layer keeps no cache.
        session_config.sse_retry = None;
        session_config.completed_cache_ttl = Duration::ZERO;
        let mut local = LocalSessionManager::default();
        local.session_config = session_config;
        Node {
            replica: ReplicaState::new(
                config.connection_queue,
                EvictionWatch::new(config.eviction.clone(), EVICTION_OPT_IN),
                config.timing(),
            ),
            store,
            config,
            local,
            tasks: TaskTracker::new(),
            draining: CancellationToken::new(),
            stopped: CancellationToken::new(),
            next_conn: AtomicU64::new(1),
            handlers: Mutex::default(),
            // Random start: even two processes that ended up with one node id number apart.
            next_handler: AtomicU64::new(u64::from(rand::random::<u32>()) + 1),
            cancelled: Mutex::default(),
        }
    }

    /// This replica's node id.
    pub fn id(&self) -> &str {
        self.store.node_id()
    }

    /// A fresh holder token for a connection opened here: `<node id>/<n>`.
    pub fn holder(&self) -> String {
        let n = self.next_conn.fetch_add(1, Ordering::Relaxed);
        format!("{}/{n}", self.id())
    }

    /// A handler of session `sid` has started here (rmcp ran its `initialize`, fresh or
    /// restored): its lifetime number, unique in this process, which the ids of its
    /// server-to-client requests carry (see `routing`).
    pub fn handler_started(&self, sid: &str) -> u64 {
        let n = self.next_handler.fetch_add(1, Ordering::Relaxed);
        self.handlers.lock().insert(sid.to_owned(), n);
        n
    }

    /// The lifetime number of session `sid`'s current handler here.
    pub fn handler_of(&self, sid: &str) -> Option<u64> {
        self.handlers.lock().get(sid).copied()
    }

    /// Handler `handler` of session `sid` has ended here (its standalone channel closed).
    pub fn handler_ended(&self, sid: &str, handler: u64) {
        let mut handlers = self.handlers.lock();
        if handlers.get(sid) == Some(&handler) {
            handlers.remove(sid);
        }
    }

    /// The client cancelled request `request_key` of `sid`, running here.
    pub fn mark_cancelled(&self, sid: &str, request_key: &str) {
        let key = (sid.to_owned(), request_key.to_owned());
        self.cancelled.lock().insert(key);
    }

    /// Whether request `request_key` of `sid` was cancelled by its client; forgets it.
    pub fn take_cancelled(&self, sid: &str, request_key: &str) -> bool {
        let key = (sid.to_owned(), request_key.to_owned());
        let mut cancelled = self.cancelled.lock();
        cancelled.remove(&key)
    }

    /// Appends an event (not a stream's final one: see [`Node::append_final`]) to a stream's log
    /// and, when the stream's holder is a connection here and the store did not deliver it itself
    /// (see [`Appended::holder`]), hands it to that connection. A failing store (a Redis
    /// promotion, a restart) is tried again as the answer is ([`Node::through_outage`]), with one
    /// append id for every attempt, so the event is logged once; its recorder waits meanwhile, so
    /// the stream's later messages stay behind it. [`Appending::Lost`] when the store kept
    /// failing (logged): the event is not in the log, and a client would see a gap after it.
    pub async fn append(&self, sid: &str, stream: &str, data: String) -> Appending {
        let once = switchboard_store::rules::new_append_id();
        let attempt = || self.store.append_once(sid, stream, &data, false, &once);
        match self.through_outage(attempt).await {
            Ok(appended) if appended.is_stored() => {
                self.deliver_here(sid, stream, &appended, data, false);
                Appending::Logged
            }
            Ok(_) => Appending::SessionGone,
            Err(why) => {
                tracing::error!(error = %why, session = %logged_session(sid), stream, "event lost: the store kept failing");
                Appending::Lost
            }
        }
    }

    /// Logs a request's answer (or the error that ends it) as its stream's final event, but
    /// only while the request is still recorded as running on this replica (the store's
    /// `abort_running`, which checks and appends in one step): a stream that another replica has
    /// ended already (it took this one for dead) never gets a second final event, and an attempt
    /// that looked failed but ran is not logged again by the next.
    ///
    /// A failing store is tried again ([`Node::through_outage`]): the request stays registered
    /// until its end is logged, so giving up early would leave it in flight with nobody to end it
    /// and its resumers waiting.
    pub async fn append_final(&self, sid: &str, stream: &str, data: String) -> Final {
        let attempt = || self.store.abort_running(sid, stream, self.id(), &data);
        match self.through_outage(attempt).await {
            Ok(Some(appended)) => {
                self.deliver_here(sid, stream, &appended, data, true);
                Final::Logged
            }
            Ok(None) => {
                tracing::warn!(session = %logged_session(sid), stream, "a request's end came after its stream had ended (another replica took this one for dead, or the session ended); not logged");
                Final::AlreadyEnded
            }
            Err(why) => {
                tracing::error!(error = %why, session = %logged_session(sid), stream, "a request's end not logged: the store kept failing; its registration is ended once the store answers again (by this replica's next refusal in the session, or as a dead replica's)");
                Final::Failed
            }
        }
    }

    /// Runs one write through a store outage, the gateway's rule (`switchboard_store::retry`:
    /// jittered attempts 100 ms to 1 s apart) for as long as a session could live (`idle_ttl`)
    /// while the replica runs (an rmcp call has no deadline of its own); once it stops, one more
    /// attempt, then the write is given up.
    async fn through_outage<T, F, Fut>(&self, attempt: F) -> Result<T, String>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = switchboard_store::StoreResult<T>>,
    {
        let deadline = tokio::time::Instant::now() + self.config.store.idle_ttl;
        tokio::select! {
            tried = retry::until(deadline, &attempt) => tried.map_err(|o| o.to_string()),
            () = self.stopped.cancelled() => attempt().await.map_err(|e| e.to_string()),
        }
    }

    /// Hands a just-appended event to its connection when that is open here and the store did
    /// not deliver it itself.
    pub fn deliver_here(
        &self,
        sid: &str,
        stream: &str,
        appended: &Appended,
        data: String,
        end: bool,
    ) {
        let Some(holder) = &appended.holder else {
            return;
        };
        // The store delivers events of the standalone stream, and events for other replicas,
        // through the bus itself.
        if stream == StreamId::STANDALONE || holder_node(holder) != self.id() {
            return;
        }
        let event = StreamEvent {
            position: appended.position.clone(),
            data,
            end,
        };
        self.replica.hub.deliver(sid, stream, holder, event);
    }

    /// The session ended (deleted, expired, or gone from the store): closes its rmcp session
    /// and its connections here.
    pub async fn end_session_here(&self, sid: &str) {
        self.replica.hub.close_session(sid);
        if let Err(e) = self.local.close_session(&sid.into()).await {
            tracing::debug!(error = %e, session = %logged_session(sid), "closing a local session");
        }
    }
}

/// What became of an event ([`Node::append`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Appending {
    /// In the log.
    Logged,
    /// Not logged: the session is gone.
    SessionGone,
    /// Not logged: the store kept failing.
    Lost,
}

/// What became of a request's answer ([`Node::append_final`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Final {
    /// Logged as its stream's final event.
    Logged,
    /// Not logged: the stream had ended already (or the session is gone).
    AlreadyEnded,
    /// Not logged: the store kept failing.
    Failed,
}

/// How long a session's rmcp handler here lives without a message in or out: the larger of
/// `idle_ttl` and rmcp's default (5 min). rmcp ends a handler after that long even while a call
/// runs silently, so it must not be short; a session that ends earlier in the store is closed
/// here when the bus says so (or at its next request here).
pub(crate) fn local_keep_alive(config: &ReplicatedConfig) -> Duration {
    config.store.idle_ttl.max(SessionConfig::DEFAULT_KEEP_ALIVE)
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("id", &self.id()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use switchboard_store::{EventLog, InflightRequest, MemoryStore, Replay};

    /// A request that another replica ended (it took this one for dead) gets no second final
    /// event when its answer comes after all.
    #[tokio::test]
    async fn an_answer_after_the_stream_ended_is_not_logged() {
        let config = ReplicatedConfig::new("a");
        let memory = MemoryStore::new(config.store.clone());
        let node = Node::new(memory.for_node("a"), config);
        let sid = switchboard_protocol::SessionId::generate()
            .as_str()
            .to_owned();
        let record = crate::session_store::record(&sid, "2025-11-25".into(), Value::Null);
        crate::session_store::create(node.store.as_ref(), &record)
            .await
            .unwrap();
        let stream = StreamId::generate().as_str().to_owned();
        let inflight = InflightRequest {
            request_key: "n:1".into(),
            stream: stream.clone(),
            node: "a".into(),
            holder: "a/1".into(),
        };
        node.store.begin(&sid, Some(&inflight)).await.unwrap();
        let other = memory.for_node("b");
        let ended = other
            .abort_running(&sid, &stream, "a", "{\"ended\":1}")
            .await;
        assert!(ended.unwrap().is_some(), "B ends A's request");
        let late = node
            .append_final(&sid, &stream, "{\"late\":1}".into())
            .await;
        assert_eq!(late, Final::AlreadyEnded);
        let Ok(Replay::Events(events)) = node.store.replay(&sid, &stream, "0-0", 10).await else {
            panic!("the log");
        };
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(events[0].data.contains("ended"));
    }
}
