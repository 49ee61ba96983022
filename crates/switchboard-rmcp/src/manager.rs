//! [`ReplicatedSessionManager`]: rmcp's `SessionManager` for a server that runs as several
//! replicas on one store. Each method says which store round trips it costs.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::SessionTransport;
use rmcp::transport::streamable_http_server::session::{
    EventStore, ServerSseMessage, SessionRestoreMarker,
};
use rmcp::transport::streamable_http_server::{
    RestoreOutcome, SessionId, SessionManager, StreamableHttpServerConfig,
};
use serde_json::Value;
use switchboard_protocol::{codes, EventId, RequestId, StreamId};
use switchboard_runtime::resume::{check_resumable, NotResumable};
use switchboard_store::eviction::Readiness;
use switchboard_store::redis::RedisTopology;
use switchboard_store::{Claim, InflightRequest, MemoryStore, RedisStore, Replay, Routed, Store};
use tokio_stream::wrappers::ReceiverStream;

use crate::config::ReplicatedConfig;
use crate::conn::{self, ResponseStream};
use crate::error::Error;
use crate::event_store::StoreEvents;
use crate::node::Node;
use crate::session_store::{self, StoreSessions};
use crate::{admission, recorder, routing};
use switchboard_runtime::pump::{OpenStream, REPLAY_PAGE};

/// The event id rmcp gives the priming event of a standalone stream when the session manager
/// has no event store.
const RMCP_STANDALONE_PRIMING: &str = "0";

/// rmcp's session manager for a replicated server: sessions, event logs and cross-replica
/// delivery in a switchboard store (Redis standalone, Sentinel or Cluster, or memory), the
/// handlers in rmcp's own in-process layer. See the crate docs for the design.
///
/// Build it with [`ReplicatedSessionManager::redis`] (or [`open`](Self::open),
/// [`memory`](Self::memory), [`with_store`](Self::with_store)) and hand it, with
/// [`http_config`](Self::http_config), to `StreamableHttpService::new`. Call
/// [`shutdown`](Self::shutdown) before the process exits.
pub struct ReplicatedSessionManager {
    node: Arc<Node>,
    sessions: Arc<StoreSessions>,
    events: Arc<StoreEvents>,
}

impl ReplicatedSessionManager {
    /// A replica on a standalone Redis at `url` (`redis://host:port/db`, `rediss://` for TLS).
    ///
    /// # Errors
    /// The settings are invalid, Redis cannot be reached now (later outages are followed), or
    /// its `maxmemory-policy` may evict keys and [`ReplicatedConfig::eviction`] does not allow
    /// it ([`Error::Eviction`], naming the Redis setting to change).
    pub async fn redis(url: &str, config: ReplicatedConfig) -> Result<Arc<Self>, Error> {
        Self::open(&RedisTopology::standalone(url), config).await
    }

    /// A replica on the Redis `topology` describes: standalone, Sentinel or Cluster.
    ///
    /// # Errors
    /// As [`ReplicatedSessionManager::redis`].
    pub async fn open(
        topology: &RedisTopology,
        config: ReplicatedConfig,
    ) -> Result<Arc<Self>, Error> {
        let config = config.for_this_process();
        config.validate()?;
        let store = RedisStore::open(topology, config.store.clone())
            .await
            .map_err(|source| Error::Open {
                at: described(topology),
                source,
            })?;
        Self::with_store(store, config).await
    }

    /// A replica on a fresh in-process store: one process, nothing shared (tests, development).
    ///
    /// # Errors
    /// The settings are invalid.
    pub async fn memory(config: ReplicatedConfig) -> Result<Arc<Self>, Error> {
        let config = config.for_this_process();
        config.validate()?;
        Self::with_store(MemoryStore::new(config.store.clone()), config).await
    }

    /// A replica on `store`, which should have been made with `config.store` (for two replicas
    /// in one process on the memory store: `MemoryStore::for_node`). The store's node id is used
    /// as it is: make it unique per process, as [`ReplicatedConfig::for_this_process`] does
    /// ([`redis`](Self::redis), [`open`](Self::open) and [`memory`](Self::memory) call it). Subscribes the replica's bus
    /// inbox, sends its first heartbeat and starts its background work.
    ///
    /// # Errors
    /// The settings are invalid, the store fails now, or Redis's `maxmemory-policy` may evict
    /// keys and `config.eviction` does not allow it ([`Error::Eviction`]).
    pub async fn with_store(
        store: Arc<dyn Store>,
        config: ReplicatedConfig,
    ) -> Result<Arc<Self>, Error> {
        config.validate()?;
        let node = Arc::new(Node::new(store.clone(), config));
        node.replica.eviction.check_at_start(&*node.store).await?;
        switchboard_runtime::background::start(node.clone(), node.stopped.clone()).await?;
        tracing::info!(
            node = node.id(),
            backend = store.backend(),
            "replica started"
        );
        Ok(Arc::new(ReplicatedSessionManager {
            sessions: Arc::new(StoreSessions::with_retry_limit(
                store.clone(),
                node.config.store.idle_ttl,
            )),
            events: Arc::new(StoreEvents::new(store)),
            node,
        }))
    }

    /// rmcp's default server settings with what a replica needs: [`StoreSessions`] as the
    /// session store (a replica that does not hold a session restores it), the `sse_retry`
    /// setting, and a cancellation token that [`shutdown`](Self::shutdown) cancels. Change the
    /// rest as usual (allowed hosts, body limit, keep-alive).
    pub fn http_config(&self) -> StreamableHttpServerConfig {
        let mut config = StreamableHttpServerConfig::default()
            .with_sse_retry(Some(self.node.config.sse_retry))
            .with_cancellation_token(self.node.stopped.child_token());
        config.session_store = Some(self.sessions.clone());
        config
    }

    /// The session store this manager's sessions live in (rmcp's `SessionStore` trait).
    pub fn sessions(&self) -> Arc<StoreSessions> {
        self.sessions.clone()
    }

    /// The event store of streams rmcp persists itself (rmcp's `EventStore` trait).
    pub fn events(&self) -> Arc<StoreEvents> {
        self.events.clone()
    }

    /// Whether this replica should take requests as far as Redis's `maxmemory-policy` goes (as
    /// last read, every [`ReplicatedConfig::eviction`] `check_interval`): for a server's own
    /// readiness probe. [`Readiness::NotReady`] once the policy changed to one that may evict
    /// keys without `eviction.allow`; [`Readiness::Warn`] with it, or when the policy could not
    /// be read.
    pub fn eviction_readiness(&self) -> Readiness {
        self.node.replica.eviction.readiness()
    }

    /// This replica's node id.
    pub fn node_id(&self) -> &str {
        self.node.id()
    }

    /// The store underneath.
    pub fn store(&self) -> Arc<dyn Store> {
        self.node.store.clone()
    }

    /// Stops the replica: standalone streams close at once (their clients reopen them on another
    /// replica); calls running here get up to `drain_timeout` to answer; then every session's
    /// handler here ends (a call still running logs error -32004 as its stream's last event),
    /// the background work stops and the replica is marked dead so that the others take over at
    /// once. The sessions stay in the store for the other replicas. Idempotent.
    pub async fn shutdown(&self) {
        let node = &self.node;
        node.draining.cancel();
        if tokio::time::timeout(node.config.drain_timeout, node.replica.calls.idle())
            .await
            .is_err()
        {
            tracing::warn!(
                calls = node.replica.calls.count(),
                "drain timeout: ending the calls still running"
            );
        }
        node.stopped.cancel();
        node.tasks.close();
        if tokio::time::timeout(Duration::from_secs(5), node.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("some streams did not finish logging before the stop");
        }
        if let Err(e) = node.store.retire().await {
            tracing::warn!(error = %e, "could not mark this replica stopped; others wait node_ttl");
        }
    }

    /// One request's response stream: registers the request in flight, hands it to the handler,
    /// and starts its recorder and its connection. One round trip.
    async fn open_request(
        &self,
        id: &SessionId,
        mut message: ClientJsonRpcMessage,
    ) -> Result<ReceiverStream<ServerSseMessage>, Error> {
        let node = &self.node;
        let sid = id.to_string();
        let request_id = request_id(&message);
        let request_key = request_id.key();
        let stream = StreamId::generate().as_str().to_owned();
        let holder = node.holder();
        // Counts as running here before the store registers it, so that its entry is never
        // taken for one with no call behind it (`switchboard_runtime::lost`).
        let Some(running) = node.replica.calls.try_run(&sid, &request_key, &stream) else {
            let why = "a request with this id is already in flight in this session";
            return admission::refusal(&request_id, codes::INVALID_REQUEST, why);
        };
        let handle = node.replica.hub.register(&sid, &stream, &holder);
        let inflight = InflightRequest {
            request_key: request_key.clone(),
            stream: stream.clone(),
            node: node.id().to_owned(),
            holder: holder.clone(),
        };
        if let Some(refused) = admission::admit(node, &sid, &inflight, &request_id).await? {
            return Ok(refused);
        }
        if let ClientJsonRpcMessage::Request(request) = &mut message {
            let control = ResponseStream::new(node, &sid, &stream, &holder);
            request.request.extensions_mut().insert(control);
        }
        let local = match node.local.create_stream(id, message).await {
            Ok(local) => local,
            Err(e) => {
                let _ = node.store.finish(&sid, &request_key, Some(&stream)).await;
                return Err(e.into());
            }
        };
        // The handler that runs it: rmcp restored it (running its initialize) before this call.
        let handler = node.handler_of(&sid).unwrap_or(0);
        let record = recorder::record_request(
            node.clone(),
            sid.clone(),
            stream.clone(),
            request_key,
            handler,
            running,
            local,
        );
        node.tasks.spawn(record);
        let open = OpenStream {
            sid,
            stream,
            holder,
            conn: handle,
            replay: Vec::new(),
            after: EventId::START.to_owned(),
            watch: None,
            close_after_replay: false,
            resumed_at: None,
        };
        Ok(conn::spawn(node.clone(), open, true))
    }

    /// A connection resuming stream `event.stream` after `event.position`: checks that the
    /// position is one the stream has (the runtime's rule: a made-up, future or trimmed id is
    /// [`Error::EventId`], answered by rmcp with an empty stream, and the connection holding
    /// the stream keeps it), claims the stream (the previous holder, on any replica, closes) and
    /// reads its first page with whether its request still runs. Three or four round trips.
    async fn open_resumed(
        &self,
        sid: &str,
        event: EventId,
    ) -> Result<ReceiverStream<ServerSseMessage>, Error> {
        let node = &self.node;
        let stream = event.stream.as_str().to_owned();
        let store = node.store.as_ref();
        match check_resumable(store, sid, &stream, &event.position).await {
            Ok(()) => {}
            Err(NotResumable::Store(e)) => return Err(e.into()),
            Err(NotResumable::Unknown | NotResumable::Trimmed(_)) => {
                return Err(Error::EventId(event.to_string()));
            }
        }
        let holder = node.holder();
        let handle = node.replica.hub.register(sid, &stream, &holder);
        let claimed = node.store.claim(sid, &stream, &holder).await?;
        if let Claim::Unknown = claimed {
            return Err(Error::EventId(event.to_string()));
        }
        let read = node
            .store
            .running_and_replay(sid, &stream, &event.position, REPLAY_PAGE)
            .await;
        let replay = match read {
            Ok((running, Replay::Events(events))) => Ok((running, events)),
            Ok(_) => Err(Error::EventId(event.to_string())),
            Err(e) => Err(e.into()),
        };
        let (running, replay) = match replay {
            Ok(found) => found,
            Err(e) => {
                let _ = node.store.release(sid, &stream, &holder).await;
                return Err(e);
            }
        };
        let standalone = stream == StreamId::STANDALONE;
        let open = OpenStream {
            sid: sid.to_owned(),
            close_after_replay: !standalone && running.is_none(),
            watch: running.filter(|r| r.node != node.id()),
            stream,
            holder,
            conn: handle,
            replay,
            after: event.position,
            resumed_at: None,
        };
        Ok(conn::spawn(node.clone(), open, true))
    }

    /// The session's standalone stream from its newest event on: claims it (a previous holder
    /// on any replica closes). One round trip.
    async fn open_standalone(
        &self,
        id: &SessionId,
    ) -> Result<ReceiverStream<ServerSseMessage>, Error> {
        let node = &self.node;
        let holder = node.holder();
        let handle = node.replica.hub.register(id, StreamId::STANDALONE, &holder);
        let after = match node.store.claim(id, StreamId::STANDALONE, &holder).await? {
            Claim::Unknown => return Err(Error::SessionGone),
            Claim::Claimed { last_position, .. } => {
                last_position.unwrap_or_else(|| EventId::START.to_owned())
            }
        };
        let open = OpenStream {
            sid: id.to_string(),
            stream: StreamId::STANDALONE.to_owned(),
            holder,
            conn: handle,
            replay: Vec::new(),
            after,
            watch: None,
            close_after_replay: false,
            resumed_at: None,
        };
        Ok(conn::spawn(node.clone(), open, true))
    }

    /// After `initialize` succeeded here (fresh or restored): what the handler sends outside any
    /// request goes to the session's standalone log from now on.
    async fn record_standalone(&self, id: &SessionId) -> Result<(), Error> {
        let local = self.node.local.create_standalone_stream(id).await?;
        let node = self.node.clone();
        let handler = node.handler_started(id);
        let record = recorder::record_standalone(node, id.to_string(), handler, local);
        self.node.tasks.spawn(record);
        Ok(())
    }
}

/// The client's request id as switchboard-protocol's id (its key names it in the store).
fn request_id(message: &ClientJsonRpcMessage) -> RequestId {
    let id = match message {
        ClientJsonRpcMessage::Request(r) => serde_json::to_value(&r.id).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    RequestId(id)
}

/// Whether rmcp replays this `initialize` to restore a session known to the store.
fn is_restore(message: &ClientJsonRpcMessage) -> bool {
    match message {
        ClientJsonRpcMessage::Request(r) => r
            .request
            .extensions()
            .get::<SessionRestoreMarker>()
            .is_some(),
        _ => false,
    }
}

impl SessionManager for ReplicatedSessionManager {
    type Error = Error;
    type Transport = SessionTransport;

    /// A fresh session id (128 random bits, 32 hex digits) and its handler's transport, in this
    /// process only: the store learns of the session once `initialize` succeeds. No round trip.
    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Error> {
        let id: SessionId = switchboard_protocol::SessionId::generate().as_str().into();
        match self.node.local.restore_session(id.clone()).await? {
            RestoreOutcome::Restored(transport) => Ok((id, transport)),
            _ => Err(Error::Internal(
                "a fresh session id was already in use".into(),
            )),
        }
    }

    /// Runs `initialize` in the handler; on success stores the session (the client's params,
    /// the negotiated revision; one round trip, refused at `max_sessions` with
    /// [`Error::AtCapacity`]) unless rmcp is restoring it, and starts logging the handler's
    /// standalone messages.
    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Error> {
        let fresh = !is_restore(&message);
        let params = serde_json::to_value(&message)?["params"].take();
        let response = self.node.local.initialize_session(id, message).await?;
        let result = serde_json::to_value(&response)?["result"].take();
        if result.is_null() {
            return Ok(response);
        }
        if fresh {
            let revision = result["protocolVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let record = session_store::record(id, revision, params);
            if let Err(e) = session_store::create(self.node.store.as_ref(), &record).await {
                let _ = self.node.local.close_session(id).await;
                return Err(e);
            }
        }
        self.record_standalone(id).await?;
        Ok(response)
    }

    /// Whether this replica serves the session now. A session held here is checked (and kept
    /// alive) in the store, one round trip: one that ended elsewhere is closed here and answers
    /// `false`. One not held here answers `false` at once; rmcp then restores it from
    /// [`StoreSessions`] if the store has it.
    async fn has_session(&self, id: &SessionId) -> Result<bool, Error> {
        if self.sessions.is_deleting(id) {
            // A DELETE here is still being retried against the store.
            self.node.end_session_here(id).await;
            return Ok(false);
        }
        if !self.node.local.has_session(id).await? {
            return Ok(false);
        }
        if self.node.store.touch(id).await? {
            return Ok(true);
        }
        self.node.end_session_here(id).await;
        Ok(false)
    }

    /// Closes the session's handler in this process only: rmcp calls this when a handler ends
    /// (idle, server stopping) as well as on `DELETE`, and only the latter ends the session;
    /// that part is [`StoreSessions`]'s `delete`. No round trip.
    async fn close_session(&self, id: &SessionId) -> Result<(), Error> {
        self.node.local.close_session(id).await?;
        Ok(())
    }

    /// A client request: its response stream (see the crate docs). One round trip; a session at
    /// `max_inflight_per_session` answers error -32003, a request id already in flight in the
    /// session -32600.
    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Error> {
        self.open_request(id, message).await
    }

    /// A client notification or answer. An answer to a server-to-client request goes to the
    /// replica waiting for it, a `notifications/cancelled` to the one running the request (one
    /// round trip each, over the bus even when that is this replica); anything else goes to the
    /// handler here.
    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Error> {
        let node = &self.node;
        let value = serde_json::to_value(&message)?;
        if routing::is_response(&value) {
            let key = RequestId(value["id"].clone()).key();
            match node.store.route_reply(id, &key, &value).await? {
                Routed::Delivered => {}
                Routed::NobodyWaits => routing::deliver_reply(node, id, value).await,
                Routed::WaiterStopped { node } => return Err(Error::AnswerLost { node }),
            }
            return Ok(());
        }
        if value["method"] == "notifications/cancelled" {
            let params = &value["params"];
            let key = RequestId(params["requestId"].clone()).key();
            let reason = params["reason"].as_str();
            if node.store.route_cancel(id, &key, reason).await? {
                return Ok(());
            }
        }
        node.local.accept_message(id, message).await?;
        Ok(())
    }

    /// The session's standalone stream (`GET`), from now on: claims it (a previous holder on any
    /// replica closes). Messages the handler sends outside a request, on any replica, arrive
    /// here. One round trip.
    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Error> {
        self.open_standalone(id).await
    }

    /// `GET` with `Last-Event-ID`: the events of that stream after it, then live ones until the
    /// stream's answer (a POST stream) or the client leaves. Two round trips. An id this crate
    /// did not issue, or of a stream the session does not know, is [`Error::EventId`].
    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Error> {
        // rmcp primes a standalone stream with id `0` itself when there is no event store: that
        // id names the standalone stream as a fresh GET would open it.
        if last_event_id == RMCP_STANDALONE_PRIMING {
            return self.open_standalone(id).await;
        }
        let event = EventId::parse(&last_event_id).ok_or(Error::EventId(last_event_id))?;
        self.open_resumed(id, event).await
    }

    /// A handler for a session the store knows and this process does not; rmcp replays the
    /// stored `initialize` into it. No round trip.
    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Error> {
        Ok(self.node.local.restore_session(id).await?)
    }

    /// [`StoreEvents`] when `log_stateless_streams` is set. rmcp uses it only for requests
    /// served without a session: this manager logs its sessions' streams itself.
    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        let store: Arc<dyn EventStore> = self.events.clone();
        self.node.config.log_stateless_streams.then_some(store)
    }
}

/// The Redis a topology names, for an error message: the URL (standalone) or the nodes' URLs,
/// passwords hidden.
fn described(topology: &RedisTopology) -> String {
    use switchboard_store::redis::redact_url;
    if topology.nodes.is_empty() {
        return redact_url(&topology.url);
    }
    let nodes: Vec<String> = topology.nodes.iter().map(|n| redact_url(n)).collect();
    nodes.join(", ")
}
