//! The in-process backend: one process, no Redis; the embedded default and the reference the Redis
//! backend is tested against.
//!
//! All node views made with [`MemoryStore::for_node`] share one state, so cross-node behaviour
//! (bus delivery, takeover, reply and cancel routing) works in-process exactly as over Redis.
//! Expiry works by timestamps (`tokio::time::Instant`): an expired session is gone for every
//! operation at once, and [`SessionStore::reap`] removes what is left of it.

mod admission;
mod liveness;
mod rates;
mod state;
mod tasks;

use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;
use switchboard_protocol::StreamId;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::error::StoreError;
use crate::model::*;
use crate::rules::INBOX_CAPACITY;
use crate::traits::*;
use state::Shared;

/// The in-process store: one node's view over state that may be shared with other node views.
pub struct MemoryStore {
    config: StoreConfig,
    /// The state every node view shares. A lock that does not poison: a panic while holding it
    /// leaves the maps consistent (every operation mutates in place step by step), so the state
    /// stays usable.
    shared: Arc<Mutex<Shared>>,
}

impl MemoryStore {
    /// A fresh, empty store seen from node `config.node_id`.
    pub fn new(config: StoreConfig) -> Arc<MemoryStore> {
        Arc::new(MemoryStore {
            config,
            shared: Arc::default(),
        })
    }

    /// Another node's view over the same shared state (same settings, node id `cluster.node_id`).
    pub fn for_node(&self, node_id: &str) -> Arc<MemoryStore> {
        let config = StoreConfig {
            node_id: node_id.to_owned(),
            ..self.config.clone()
        };
        Arc::new(MemoryStore {
            config,
            shared: self.shared.clone(),
        })
    }

    /// The settings of this view.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Debug aid for tests: how many keys the Redis backend would hold for session `sid` now
    /// (0 once it is deleted or reaped).
    #[doc(hidden)]
    pub async fn key_count_for(&self, sid: &str) -> usize {
        let now = Instant::now();
        self.shared
            .lock()
            .sessions
            .get(sid)
            .map(|s| s.key_count(now))
            .unwrap_or(0)
    }

    /// Debug aid for tests: how many streams the session's registry holds (0 when it is gone).
    #[doc(hidden)]
    pub async fn registered_streams(&self, sid: &str) -> usize {
        self.shared
            .lock()
            .sessions
            .get(sid)
            .map(|s| s.streams.len())
            .unwrap_or(0)
    }

    /// `check` and `begin_rated` under one lock ([`state::Shared::admit`]).
    fn admit(
        &self,
        sid: &str,
        request_key: &str,
        rates: &[crate::Rate],
        register: Option<&InflightRequest>,
    ) -> BeginOutcome {
        let now = Instant::now();
        self.shared
            .lock()
            .admit(&self.config, sid, request_key, rates, register, now)
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn create_session(&self, record: &SessionRecord) -> StoreResult<CreateOutcome> {
        Ok(self
            .shared
            .lock()
            .create(&self.config, record, Instant::now()))
    }

    async fn begin(
        &self,
        sid: &str,
        inflight: Option<&InflightRequest>,
    ) -> StoreResult<BeginOutcome> {
        Ok(self
            .shared
            .lock()
            .begin(&self.config, sid, inflight, Instant::now()))
    }

    /// The rates are checked under the same lock, after the other checks passed.
    async fn check(
        &self,
        sid: &str,
        request_key: &str,
        rates: &[crate::Rate],
    ) -> StoreResult<BeginOutcome> {
        Ok(self.admit(sid, request_key, rates, None))
    }

    /// The same checks as `check`, under one lock; registers only a request that passed them
    /// all.
    async fn begin_rated(
        &self,
        sid: &str,
        inflight: &InflightRequest,
        rates: &[crate::Rate],
    ) -> StoreResult<BeginOutcome> {
        Ok(self.admit(sid, &inflight.request_key, rates, Some(inflight)))
    }

    async fn take_rates(&self, rates: &[crate::Rate]) -> StoreResult<crate::RateDecision> {
        Ok(self.shared.lock().rates.take(rates, Instant::now()))
    }

    async fn register(&self, sid: &str, inflight: &InflightRequest) -> StoreResult<bool> {
        Ok(self
            .shared
            .lock()
            .register(&self.config, sid, inflight, Instant::now()))
    }

    async fn finish(
        &self,
        sid: &str,
        request_key: &str,
        json_stream: Option<&str>,
    ) -> StoreResult<()> {
        self.shared
            .lock()
            .finish(&self.config, sid, request_key, json_stream, Instant::now());
        Ok(())
    }

    async fn in_flight(&self, sid: &str) -> StoreResult<Vec<InflightEntry>> {
        let mut shared = self.shared.lock();
        let Some(s) = shared.live(sid, Instant::now()) else {
            return Ok(Vec::new());
        };
        Ok(s.inflight
            .iter()
            .map(|(key, (node, stream))| InflightEntry {
                request_key: key.clone(),
                node: node.clone(),
                stream: stream.clone(),
            })
            .collect())
    }

    async fn forget_in_flight(&self, sid: &str, entry: &InflightEntry) -> StoreResult<bool> {
        let mut shared = self.shared.lock();
        let Some(s) = shared.live(sid, Instant::now()) else {
            return Ok(false);
        };
        let listed = (entry.node.clone(), entry.stream.clone());
        if s.inflight.get(&entry.request_key) != Some(&listed) {
            return Ok(false);
        }
        s.inflight.remove(&entry.request_key);
        Ok(true)
    }

    async fn touch(&self, sid: &str) -> StoreResult<bool> {
        let now = Instant::now();
        let mut shared = self.shared.lock();
        let Some(s) = shared.live(sid, now) else {
            return Ok(false);
        };
        s.touch(now + self.config.idle_ttl);
        Ok(true)
    }

    async fn exists(&self, sid: &str) -> StoreResult<bool> {
        Ok(self.shared.lock().live(sid, Instant::now()).is_some())
    }

    async fn owners_of(
        &self,
        sids: &[String],
    ) -> StoreResult<Vec<Option<std::collections::BTreeMap<String, String>>>> {
        let now = Instant::now();
        let mut shared = self.shared.lock();
        Ok(sids
            .iter()
            .map(|sid| shared.live(sid, now).map(|s| s.record.owners.clone()))
            .collect())
    }

    async fn update(&self, sid: &str, update: SessionUpdate) -> StoreResult<bool> {
        let mut shared = self.shared.lock();
        let Some(s) = shared.live(sid, Instant::now()) else {
            return Ok(false);
        };
        s.record.apply(update);
        Ok(true)
    }

    /// Under one lock: the load and touch of `begin`, then the update.
    async fn begin_update(
        &self,
        sid: &str,
        principal: &str,
        update: SessionUpdate,
    ) -> StoreResult<BeginOutcome> {
        let now = Instant::now();
        let mut shared = self.shared.lock();
        let Some(s) = shared.live(sid, now) else {
            return Ok(BeginOutcome::Missing);
        };
        s.touch(now + self.config.idle_ttl);
        if s.record.principal == principal {
            s.record.apply(update);
        }
        Ok(BeginOutcome::Ready(s.record.clone()))
    }

    async fn claim_owner(
        &self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
    ) -> StoreResult<OwnerClaim> {
        let mut shared = self.shared.lock();
        let Some(s) = shared.live(sid, Instant::now()) else {
            return Ok(OwnerClaim::Missing);
        };
        let current = s.record.owners.get(upstream).cloned();
        if current.as_deref() != expected {
            return Ok(OwnerClaim::Held(current.unwrap_or_default()));
        }
        s.record
            .owners
            .insert(upstream.to_owned(), self.config.node_id.clone());
        Ok(OwnerClaim::Claimed)
    }

    async fn swap_upstream_sessions(
        &self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
        entries: Vec<(String, Option<String>)>,
    ) -> StoreResult<UpstreamSwap> {
        let now = Instant::now();
        Ok(self
            .shared
            .lock()
            .swap_upstream(sid, upstream, expected, entries, now))
    }

    async fn delete_session(&self, sid: &str) -> StoreResult<bool> {
        Ok(self.shared.lock().remove(sid))
    }

    async fn count_sessions(&self) -> StoreResult<u64> {
        Ok(self.shared.lock().sessions.len() as u64)
    }

    async fn reap(&self, limit: usize) -> StoreResult<Vec<String>> {
        let now = Instant::now();
        let mut shared = self.shared.lock();
        let mut expired: Vec<(Instant, String)> = shared
            .sessions
            .iter()
            .filter(|(_, s)| s.expires <= now)
            .map(|(id, s)| (s.expires, id.clone()))
            .collect();
        expired.sort();
        expired.truncate(limit);
        let ids: Vec<String> = expired.into_iter().map(|(_, id)| id).collect();
        for id in &ids {
            shared.remove(id);
        }
        Ok(ids)
    }
}

/// Records `upstream`'s entry of the upstream-session map (`None` removes it).
#[async_trait]
impl EventLog for MemoryStore {
    async fn append(
        &self,
        sid: &str,
        stream: &str,
        data: &str,
        end: bool,
    ) -> StoreResult<Appended> {
        let appended =
            self.shared
                .lock()
                .append(&self.config, sid, stream, data, end, Instant::now());
        Ok(appended.unwrap_or_else(Appended::not_stored))
    }

    async fn append_once(
        &self,
        sid: &str,
        stream: &str,
        data: &str,
        end: bool,
        append_id: &str,
    ) -> StoreResult<Appended> {
        let event = BusEvent {
            sid: sid.to_owned(),
            stream: stream.to_owned(),
            holder: String::new(),
            position: String::new(),
            data: data.to_owned(),
            end,
            verify: false,
        };
        let now = Instant::now();
        let appended = self
            .shared
            .lock()
            .append_once(&self.config, event, append_id, now);
        Ok(appended.unwrap_or_else(Appended::not_stored))
    }

    async fn replay(
        &self,
        sid: &str,
        stream: &str,
        after: &str,
        limit: usize,
    ) -> StoreResult<Replay> {
        Ok(self
            .shared
            .lock()
            .replay(sid, stream, after, limit, Instant::now()))
    }

    async fn claim(&self, sid: &str, stream: &str, holder: &str) -> StoreResult<Claim> {
        Ok(self
            .shared
            .lock()
            .claim(&self.config, sid, stream, holder, Instant::now()))
    }

    async fn release(&self, sid: &str, stream: &str, holder: &str) -> StoreResult<()> {
        let mut shared = self.shared.lock();
        let current = shared
            .sessions
            .get_mut(sid)
            .and_then(|s| s.streams.get_mut(stream));
        if let Some(current) = current.filter(|c| c.as_str() == holder) {
            current.clear();
        }
        Ok(())
    }

    async fn running(&self, sid: &str, stream: &str) -> StoreResult<Option<RunningRequest>> {
        let mut shared = self.shared.lock();
        Ok(shared
            .live(sid, Instant::now())
            .and_then(|s| s.running.get(stream).cloned()))
    }

    async fn abort_running(
        &self,
        sid: &str,
        stream: &str,
        node: &str,
        data: &str,
    ) -> StoreResult<Option<Appended>> {
        let now = Instant::now();
        let mut shared = self.shared.lock();
        let runs_there = shared
            .live(sid, now)
            .and_then(|s| s.running.get(stream))
            .is_some_and(|r| r.node == node);
        if !runs_there {
            return Ok(None);
        }
        if !StreamId::is_standalone_answered(stream) {
            return Ok(shared.append(&self.config, sid, stream, data, true, now));
        }
        // Its client reads only the standalone stream: the request's own entries go, the event
        // goes there (as `ABORT_TO_STANDALONE` does in Redis).
        if let Some(s) = shared.live(sid, now) {
            if let Some(run) = s.running.remove(stream) {
                if s.inflight
                    .get(&run.request_key)
                    .is_some_and(|(_, st)| st == stream)
                {
                    s.inflight.remove(&run.request_key);
                }
            }
            s.streams.remove(stream);
        }
        Ok(shared.append(&self.config, sid, StreamId::STANDALONE, data, false, now))
    }
}

#[async_trait]
impl Bus for MemoryStore {
    async fn subscribe(&self) -> StoreResult<mpsc::Receiver<BusMessage>> {
        let (inbox, mut queued) = mpsc::unbounded_channel();
        {
            let mut shared = self.shared.lock();
            if shared
                .inboxes
                .get(&self.config.node_id)
                .is_some_and(|tx| !tx.is_closed())
            {
                return Err(StoreError::Backend(format!(
                    "node {} is already subscribed",
                    self.config.node_id
                )));
            }
            shared.inboxes.insert(self.config.node_id.clone(), inbox);
        }
        let (tx, rx) = mpsc::channel(INBOX_CAPACITY);
        tokio::spawn(async move {
            while let Some(msg) = queued.recv().await {
                if tx.send(msg).await.is_err() {
                    break;
                }
            }
        });
        Ok(rx)
    }

    /// Delivered at once within the process (nothing to wait for).
    async fn send_within(
        &self,
        node: &str,
        msg: &BusMessage,
        _within: std::time::Duration,
    ) -> StoreResult<()> {
        self.shared.lock().deliver(node, msg.clone());
        Ok(())
    }

    async fn broadcast(&self, msg: &BusMessage) -> StoreResult<()> {
        self.shared.lock().broadcast(msg.clone());
        Ok(())
    }

    async fn register_pending(&self, sid: &str, request_key: &str) -> StoreResult<()> {
        let mut shared = self.shared.lock();
        if let Some(s) = shared.live(sid, Instant::now()) {
            s.pending
                .insert(request_key.to_owned(), self.config.node_id.clone());
        }
        Ok(())
    }

    async fn forget_pending(&self, sid: &str, request_key: &str) -> StoreResult<()> {
        if let Some(s) = self.shared.lock().sessions.get_mut(sid) {
            s.pending.remove(request_key);
        }
        Ok(())
    }

    async fn route_reply(
        &self,
        sid: &str,
        request_key: &str,
        message: &Value,
    ) -> StoreResult<Routed> {
        let mut shared = self.shared.lock();
        let now = Instant::now();
        let Some(node) = shared
            .live(sid, now)
            .and_then(|s| s.pending.remove(request_key))
        else {
            return Ok(Routed::NobodyWaits);
        };
        let alive = node == self.config.node_id
            || shared.nodes.get(&node).is_some_and(|until| *until > now);
        let msg = BusMessage::Reply {
            sid: sid.to_owned(),
            request_key: request_key.to_owned(),
            message: message.clone(),
            trace: switchboard_telemetry::trace::current(),
        };
        shared.deliver(&node, msg);
        Ok(if alive {
            Routed::Delivered
        } else {
            Routed::WaiterStopped { node }
        })
    }

    async fn route_cancel(
        &self,
        sid: &str,
        request_key: &str,
        reason: Option<&str>,
    ) -> StoreResult<bool> {
        let mut shared = self.shared.lock();
        let target = shared
            .live(sid, Instant::now())
            .and_then(|s| s.inflight.get(request_key));
        let Some((node, _)) = target.cloned() else {
            return Ok(false);
        };
        let msg = BusMessage::Cancel {
            sid: sid.to_owned(),
            request_key: request_key.to_owned(),
            reason: reason.map(str::to_owned),
        };
        shared.deliver(&node, msg);
        Ok(true)
    }
}

impl Store for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }
}
