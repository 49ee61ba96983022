//! The store traits. Every method is one round trip to the backend (one pipeline or one script
//! for Redis) unless its doc says otherwise.
//!
//! Holder tokens have the form `<node id>/<connection id>`: the node part tells the store which
//! node's inbox gets events and takeovers for that connection.

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::StoreError;
use crate::model::*;
use crate::rate::{Rate, RateDecision};
use crate::task::{Settled, TaskChange, TaskRecord};

/// Result alias of the store.
pub type StoreResult<T> = Result<T, StoreError>;

/// The node part of a holder token (`<node>/<conn>` → `<node>`).
pub fn holder_node(holder: &str) -> &str {
    holder.split_once('/').map(|(n, _)| n).unwrap_or(holder)
}

/// Session records and their lifetime.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Stores a new session unless the global session cap is reached. The record's expiry is
    /// `idle_ttl` from now. (Redis standalone and Sentinel: one script, the reservation in the
    /// session index and the record together. Redis Cluster, where the index lives in a slot of
    /// its own: two round trips, an atomic reservation in the index, then the record, so the cap
    /// is exact there too.)
    ///
    /// The same record stored again (a call sent twice: the Redis Cluster client sends a command
    /// again when its connection dropped after it ran) is one session: the session id is the
    /// call's token, a reservation of an id already in the index counts nothing again and passes
    /// every cap, and every sending answers `Created`.
    async fn create_session(&self, record: &SessionRecord) -> StoreResult<CreateOutcome>;

    /// The hot path of every request on a session, in one round trip: loads the record, pushes its
    /// expiry (and that of all its keys) to `idle_ttl` from now, and, when `inflight` is given,
    /// registers the request (request id → node; stream → running request and holder). A request
    /// id already in flight in the session is refused with [`BeginOutcome::DuplicateId`], unless
    /// its entry is this registration's own (same node and stream, and a stream id is one
    /// request's): the call was sent again after it ran, and is `Ready` without registering again.
    async fn begin(
        &self,
        sid: &str,
        inflight: Option<&InflightRequest>,
    ) -> StoreResult<BeginOutcome>;

    /// The hot path of a request, in one round trip: like [`SessionStore::begin`] with a request
    /// (load, touch, refuse an id registered in flight with [`BeginOutcome::DuplicateId`] and a
    /// session at `session.max_inflight` with [`BeginOutcome::Busy`]) but without
    /// registering it. A request answered at once never costs a second round trip; one that runs
    /// longer (its answer goes out as a stream) registers with [`SessionStore::register`] before
    /// its first event, and then counts as in flight on every node.
    ///
    /// `rates`: the request's rate limits ([`crate::rate`]), checked in the same round trip
    /// after the other checks passed (a request refused for its id or the cap uses no rate)
    /// when [`SessionStore::folds_rates`]; a refusal is [`BeginOutcome::Limited`]. A backend
    /// that cannot fold them (Redis Cluster: the rate keys live in other slots) ignores them:
    /// the caller checks them with [`SessionStore::take_rates`] at the same time.
    async fn check(
        &self,
        sid: &str,
        request_key: &str,
        rates: &[Rate],
    ) -> StoreResult<BeginOutcome>;

    /// [`SessionStore::begin`] registering `inflight`, with its `rates` checked in the same
    /// round trip after the other checks passed, as [`SessionStore::check`] checks them: the
    /// request registers only when it passed them all, a refusal is [`BeginOutcome::Limited`]
    /// and registers nothing. For requests registered with their admission (a 2025-03-26
    /// batch's members, the legacy HTTP+SSE and WebSocket transports' requests). Where
    /// [`SessionStore::folds_rates`] is `false` the rates are ignored, as by `check`. Sent again
    /// after it registered the request, it is `Ready` as `begin` is, its rates not taken again.
    async fn begin_rated(
        &self,
        sid: &str,
        inflight: &InflightRequest,
        rates: &[Rate],
    ) -> StoreResult<BeginOutcome>;

    /// Whether [`SessionStore::check`] and [`SessionStore::begin_rated`] check the rates they are
    /// given (memory, Redis standalone and Sentinel). Redis Cluster: `false`.
    fn folds_rates(&self) -> bool {
        true
    }

    /// Checks and takes `rates` on their own, for a request without a session (`initialize`) or
    /// beside [`SessionStore::check`] where that cannot fold them. One round trip (Redis Cluster:
    /// one script per [`Rate::tag`], sent at the same time). No rates: `Allowed`, no round trip.
    ///
    /// One call takes its rates at most once, even when the backend's client sends it again
    /// underneath: on Redis Cluster each call carries a take id, remembered with a take that
    /// passed for [`crate::redis::RESEND_WINDOW`]. (No other backend's client sends a command
    /// again, and an id costs Redis CPU on every take.)
    async fn take_rates(&self, rates: &[Rate]) -> StoreResult<RateDecision>;

    /// Registers a request admitted by [`SessionStore::check`] as in flight: request id → node,
    /// stream → running request and holder (what `begin` with a request does after its checks),
    /// and touches the session. The id entry is only written when no other request holds it.
    /// `false` when the session is gone.
    async fn register(&self, sid: &str, inflight: &InflightRequest) -> StoreResult<bool>;

    /// A request finished: removes its in-flight entry (and, when the answer went out as plain
    /// JSON, its stream's registration and log), and restarts the idle clock from now.
    async fn finish(
        &self,
        sid: &str,
        request_key: &str,
        json_stream: Option<&str>,
    ) -> StoreResult<()>;

    /// The requests registered in flight in the session (none when it is gone), without touching
    /// it. Used to find entries left by a node that died (they count toward
    /// `session.max_inflight` until removed).
    async fn in_flight(&self, sid: &str) -> StoreResult<Vec<InflightEntry>>;

    /// Removes the in-flight entry `entry` (as [`SessionStore::in_flight`] listed it) only if it is
    /// still there unchanged: a request sent again with the same id since has another stream and
    /// is left alone. `true` when removed.
    async fn forget_in_flight(&self, sid: &str, entry: &InflightEntry) -> StoreResult<bool>;

    /// Keeps a session alive while something is open on it (a stream, a running call): pushes the
    /// expiry to `idle_ttl` from now. `false` when the session is gone.
    async fn touch(&self, sid: &str) -> StoreResult<bool>;

    /// Whether the session exists, without touching it (its expiry stays as it is).
    async fn exists(&self, sid: &str) -> StoreResult<bool>;

    /// For each of `sids`, in order, the owners of its node-bound resources as recorded
    /// ([`SessionRecord::owners`]: upstream name → node), or `None` when the session is gone;
    /// nothing is touched. One round trip for all of them (Redis: a pipeline), so a node checks
    /// every session it holds something for at once.
    async fn owners_of(
        &self,
        sids: &[String],
    ) -> StoreResult<Vec<Option<std::collections::BTreeMap<String, String>>>>;

    /// Applies one change to the record. `false` when the session is gone.
    async fn update(&self, sid: &str, update: SessionUpdate) -> StoreResult<bool>;

    /// [`SessionStore::begin`] without a request (loads and touches the session) that also
    /// applies `update` when the session is bound to `principal`, in one round trip (for
    /// `notifications/initialized`, the second half of a session's handshake). The record comes
    /// back as it is after the update; a session bound to another principal is left unchanged
    /// and its record comes back as it is (the caller refuses it, as after `begin`). Missing:
    /// [`BeginOutcome::Missing`].
    async fn begin_update(
        &self,
        sid: &str,
        principal: &str,
        update: SessionUpdate,
    ) -> StoreResult<BeginOutcome> {
        let outcome = self.begin(sid, None).await?;
        let BeginOutcome::Ready(mut record) = outcome else {
            return Ok(outcome);
        };
        if record.principal == principal {
            if !self.update(sid, update.clone()).await? {
                return Ok(BeginOutcome::Missing);
            }
            record.apply(update);
        }
        Ok(BeginOutcome::Ready(record))
    }

    /// Compare-and-set of the owner of `upstream`'s node-bound resource in this session: when the
    /// recorded owner equals `expected` (`None`: no owner yet), this node becomes the owner.
    async fn claim_owner(
        &self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
    ) -> StoreResult<OwnerClaim>;

    /// Compare-and-set in the upstream-session map: when `upstream`'s entry equals `expected`
    /// (`None`: absent), applies `entries` in order (`None` removes one), all in one step.
    /// Otherwise stores nothing and answers the map as it is, so a node that lost a race to
    /// initialize an upstream session adopts the winner's; but a swap that sets `upstream`'s
    /// entry and finds every one of `entries` stored as given was applied already (sent again
    /// after it ran) and answers [`UpstreamSwap::Swapped`], so its node does not take its own
    /// upstream session for a winner's.
    async fn swap_upstream_sessions(
        &self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
        entries: Vec<(String, Option<String>)>,
    ) -> StoreResult<UpstreamSwap>;

    /// Ends a session now: removes every key of it and sends [`BusMessage::Terminated`] to every
    /// node. `false` when it did not exist.
    async fn delete_session(&self, sid: &str) -> StoreResult<bool>;

    /// Number of live sessions (may count expired ones until the reaper has run).
    async fn count_sessions(&self) -> StoreResult<u64>;

    /// One reaper pass, done by at most one node at a time cluster-wide: every session whose
    /// record has expired gets its remaining keys removed and [`BusMessage::Terminated`] sent to
    /// every node. Returns the reaped ids (at most `limit`); empty when another node holds the
    /// reaper lock.
    async fn reap(&self, limit: usize) -> StoreResult<Vec<String>>;
}

/// Per-stream event logs and who holds each stream's connection.
#[async_trait]
pub trait EventLog: Send + Sync {
    /// Appends an event to the stream's log (trimming the log to `session.max_events_per_stream`, pushing
    /// its expiry to `idle_ttl`), and delivers it to the holder's node inbox when the holder is on
    /// another node — or, for the standalone stream ([`switchboard_protocol::StreamId::STANDALONE`],
    /// which several nodes may write at once), to the holder's inbox even when that is this node, so
    /// that every event of that stream reaches its connection through one ordered path.
    /// `end` marks the final event (the response): the stream's running entry and the request's
    /// in-flight entry are removed with it. Registers the stream in the session if it was not.
    /// When the session is gone (deleted or expired) nothing is stored and the answer is
    /// [`Appended::not_stored`].
    ///
    /// One call logs the event at most once, even when the backend's client sends it again
    /// underneath (the Redis Cluster client resends a command whose connection dropped after it
    /// ran): on Redis Cluster the backend gives each call an append id of its own, as
    /// [`EventLog::append_once`] does with the caller's. (No other backend's client resends, and
    /// an id costs Redis CPU on every append.)
    async fn append(&self, sid: &str, stream: &str, data: &str, end: bool)
        -> StoreResult<Appended>;

    /// [`EventLog::append`] of an event the caller may append again after an error, when it
    /// cannot tell whether the event was stored (a dropped connection, a timeout, too few
    /// replicas confirming it): every call with the same `append_id` (one per event,
    /// `rules::new_append_id`) stores it at most once. A repeated call stores nothing
    /// and answers the position the event got, delivering it again as `append` would (a
    /// connection skips a position it has written). An id is remembered as long as its event is
    /// in the log.
    async fn append_once(
        &self,
        sid: &str,
        stream: &str,
        data: &str,
        end: bool,
        append_id: &str,
    ) -> StoreResult<Appended>;

    /// Events of the stream after `after` (a position; [`switchboard_protocol::EventId::START`]
    /// for "from the beginning"). [`Replay::UnknownStream`] when the session is gone or the stream
    /// is not known (see [`EventLog::claim`]); [`Replay::Truncated`] when an event after `after`
    /// was trimmed away. If the log of a known stream has expired, only a replay of the standalone
    /// stream or from the start gives an (empty) list; any other position is unknown.
    /// At most `limit` events are returned (oldest first): a reader pages through a long log by
    /// asking again after the last position it got, so no node loads a whole log at once.
    async fn replay(
        &self,
        sid: &str,
        stream: &str,
        after: &str,
        limit: usize,
    ) -> StoreResult<Replay>;

    /// Makes `holder` the stream's connection, if the stream is known in the session (the
    /// standalone stream always is; a POST stream is known from `begin` until its log expires).
    /// Returns the previous holder and the log's newest position; if the previous holder was on
    /// another node that node gets a [`BusMessage::Takeover`]. An unknown stream is not registered
    /// and gives [`Claim::Unknown`].
    async fn claim(&self, sid: &str, stream: &str, holder: &str) -> StoreResult<Claim>;

    /// Clears the stream's holder if it is still `holder`.
    async fn release(&self, sid: &str, stream: &str, holder: &str) -> StoreResult<()>;

    /// The request still running for a POST response stream, if any.
    async fn running(&self, sid: &str, stream: &str) -> StoreResult<Option<RunningRequest>>;

    /// [`EventLog::running`], then [`EventLog::replay`]: the running entry is read no later than
    /// the log (an end event logged after the first read is then in the page or after it). A
    /// resumption's first page: the Redis backend reads both in one round trip.
    async fn running_and_replay(
        &self,
        sid: &str,
        stream: &str,
        after: &str,
        limit: usize,
    ) -> StoreResult<(Option<RunningRequest>, Replay)> {
        let running = self.running(sid, stream).await?;
        Ok((running, self.replay(sid, stream, after, limit).await?))
    }

    /// If the stream's request is still recorded as running on `node`, atomically appends `data`
    /// as the stream's final event (delivering it like [`EventLog::append`]; for a stream named by
    /// [`switchboard_protocol::StreamId::generate_standalone_answered`], whose client reads only
    /// the session's standalone stream, `data` goes there instead, as an ordinary event, and the
    /// request's own registration is dropped) and clears the running
    /// entry and the in-flight entry. `None` when it was not running there (someone else finished
    /// it first).
    async fn abort_running(
        &self,
        sid: &str,
        stream: &str,
        node: &str,
        data: &str,
    ) -> StoreResult<Option<Appended>>;
}

/// Cross-node delivery of replies, cancellations and control messages.
///
/// What must arrive does: every message another node must act on (a client's answer, a
/// cancellation, a forwarded call and its messages and outcome, task input, a session's end, a
/// broadcast) is kept where its receiver reads it after any gap in its subscription (Redis: a
/// mailbox per node, per session in Cluster, and for broadcasts), and a receiver takes each
/// message once, in the order its sender sent it, as long as the message's deadline allows
/// (docs/redis.md, "What the bus guarantees"). Only live events travel without such a copy:
/// their event log is their durable copy, and a node whose subscription lapsed re-reads it
/// ([`BusMessage::Resubscribed`]).
#[async_trait]
pub trait Bus: Send + Sync {
    /// This node's inbox. Call once per node; later calls may return `Err`. Messages arrive
    /// each once, in the order they were sent to this node (broadcasts in theirs; a broadcast
    /// and a message to this node may pass each other; in Redis Cluster so may two sessions'
    /// messages).
    ///
    /// The receiver holds [`crate::INBOX_CAPACITY`] messages; when it is full the reader feeding
    /// it waits (backpressure), the store never drops a message itself. While the backend
    /// connection is down messages wait for this node (Redis: in its mailboxes, up to
    /// `bus.mailbox_len` each and `bus.message_ttl`); the reader reconnects and resubscribes by
    /// itself, reads what waited, and hands [`BusMessage::Resubscribed`] so that held streams
    /// catch up on their live events from their logs. Replies and cancellations always travel
    /// through the inbox, even to this node; events and takeovers only as [`EventLog::append`]
    /// and [`EventLog::claim`] say.
    async fn subscribe(&self) -> StoreResult<mpsc::Receiver<BusMessage>>;

    /// Records that this node waits for the client's answer to server-issued request `request_key`.
    /// Nothing is recorded when the session is gone.
    async fn register_pending(&self, sid: &str, request_key: &str) -> StoreResult<()>;

    /// Forgets a pending server-issued request (answered locally, timed out, or cancelled).
    async fn forget_pending(&self, sid: &str, request_key: &str) -> StoreResult<()>;

    /// Sends the client's response `message` to the node waiting for `request_key` and forgets the
    /// pending entry. [`Routed::NobodyWaits`] when nobody waits for it (or the session is gone);
    /// [`Routed::WaiterStopped`] when the node that waited has stopped (the answer can reach
    /// nobody: its client should hear so at once).
    async fn route_reply(
        &self,
        sid: &str,
        request_key: &str,
        message: &Value,
    ) -> StoreResult<Routed>;

    /// Sends `msg` to `node`'s inbox, to be taken within `within` (at most `bus.message_ttl`)
    /// or never: a message its receiver reads later is dropped unread (counted as expired). `Ok`
    /// once it is kept for `node` (Redis: in its mailbox); a node that is dead never takes it
    /// (check [`Liveness::is_alive`] where that matters).
    async fn send_within(
        &self,
        node: &str,
        msg: &BusMessage,
        within: std::time::Duration,
    ) -> StoreResult<()>;

    /// [`Bus::send_within`] `bus.message_ttl`.
    async fn send_to(&self, node: &str, msg: &BusMessage) -> StoreResult<()> {
        self.send_within(node, msg, std::time::Duration::MAX).await
    }

    /// Sends `msg` to every node's inbox, this node's included: every node subscribed when it
    /// is sent, or subscribing again after a gap, takes it once within `bus.message_ttl`.
    async fn broadcast(&self, msg: &BusMessage) -> StoreResult<()>;

    /// Sends `notifications/cancelled` for client request `request_key` to the node running it.
    /// `false` when no such request is in flight (or the session is gone).
    async fn route_cancel(
        &self,
        sid: &str,
        request_key: &str,
        reason: Option<&str>,
    ) -> StoreResult<bool>;
}

/// Node liveness.
#[async_trait]
pub trait Liveness: Send + Sync {
    /// This node's id.
    fn node_id(&self) -> &str;

    /// Marks this node alive for `node_ttl`. Call it regularly (well within `node_ttl`): the Redis
    /// backend also keeps its session index alive with it. `true` when the previous heartbeat
    /// was still live; `false` on the first one and after a lapse (the node stalled, or could not
    /// reach the store, for longer than `node_ttl`), when other nodes may have found this one dead
    /// and taken over what it owned.
    async fn heartbeat(&self) -> StoreResult<bool>;

    /// Marks this node stopped at once (it drained and is exiting), so other nodes take over
    /// what it owned without waiting for `node_ttl`. The caller stops heartbeating first.
    async fn retire(&self) -> StoreResult<()>;

    /// Whether `node` has sent a heartbeat within `node_ttl`.
    async fn is_alive(&self, node: &str) -> StoreResult<bool>;

    /// `Ok` when every server the store writes to answers now (Redis: `PING` on the server or
    /// the sentinels' primary; in Redis Cluster on every primary, so a shard without a primary,
    /// while its failover runs, makes this fail); with `min_replicas_acked` above 0, also that
    /// the primary (each primary) has that many replicas (an error naming
    /// `redis.min_replicas_acked` otherwise). Behind `/readyz`.
    async fn reachable(&self) -> StoreResult<()>;

    /// What the servers the store writes to do at their memory limit (the `eviction` module
    /// holds the rule that uses it). Redis: `maxmemory_policy` from `INFO memory` (not `CONFIG
    /// GET`, which managed services rename away), on the server, the sentinels' current primary,
    /// or every primary `CLUSTER SLOTS` names (each by address, concurrently); the first server
    /// that may evict, by address, when any does. The memory backend:
    /// [`MemoryPolicy::NotApplicable`].
    ///
    /// # Errors
    /// A server refused `INFO` (an ACL, `rename-command INFO`), its answer has no
    /// `maxmemory_policy`, or it could not be reached.
    async fn memory_policy(&self) -> StoreResult<MemoryPolicy>;
}

/// Secrets every node of the cluster must agree on without configuration (e.g. the key that
/// seals MRTR `requestState`, MCP 2026-07-28, basic/patterns/mrtr).
#[async_trait]
pub trait Secrets: Send + Sync {
    /// The cluster's secret named `name`: `proposal` if none was stored yet (it is stored, with no
    /// expiry), else the one stored first. Every node that asks gets the same bytes.
    async fn agreed_secret(&self, name: &str, proposal: &[u8]) -> StoreResult<Vec<u8>>;
}

/// Task records of the tasks extension, one per task, each expiring `ttl_ms` after creation.
/// Any node reads and changes any task; a terminal status never changes again.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Stores a new task that expires `record.ttl_ms` from now. `false` (nothing written) when a
    /// task with that id exists. When this returns, [`TaskStore::get_task`] on any node finds the
    /// task (Redis: the write is acknowledged by the primary every node reads from).
    async fn create_task(&self, record: &TaskRecord) -> StoreResult<bool>;

    /// The task, unless it never existed or has expired.
    async fn get_task(&self, task_id: &str) -> StoreResult<Option<TaskRecord>>;

    /// Atomically applies `change` if the task exists and is not terminal; its expiry stays.
    async fn settle_task(&self, task_id: &str, change: &TaskChange) -> StoreResult<Settled>;

    /// Ends task `task_id` of `principal` at its TTL: deletes its record, whatever its state,
    /// and leaves a tombstone naming `principal` for `grace_ms`, so that
    /// [`TaskStore::expired_task`] tells an expired task from one that never existed. Needs no
    /// record (it may have expired already).
    async fn expire_task(&self, task_id: &str, principal: &str, grace_ms: u64) -> StoreResult<()>;

    /// The principal of task `task_id` if it expired within its grace period (its tombstone).
    async fn expired_task(&self, task_id: &str) -> StoreResult<Option<String>>;

    /// Atomically takes one of `principal`'s `max` running-task slots for task `task_id`, held
    /// at most `ttl_ms` (a slot whose holder never gives it back frees itself then). `false`,
    /// nothing taken, when `max` slots are held.
    async fn claim_task_slot(
        &self,
        principal: &str,
        task_id: &str,
        max: u64,
        ttl_ms: u64,
    ) -> StoreResult<bool>;

    /// Gives back the slot task `task_id` of `principal` holds (nothing when it holds none).
    async fn release_task_slot(&self, principal: &str, task_id: &str) -> StoreResult<()>;
}

/// Everything a node needs from shared state.
pub trait Store:
    SessionStore + EventLog + Bus + Liveness + Secrets + TaskStore + Send + Sync + 'static
{
    /// The backend's name for logs and health (`"memory"` or `"redis"`).
    fn backend(&self) -> &'static str;
}
