//! The state shared by every node view of a [`super::MemoryStore`], and the operations on it.
//!
//! Each operation runs under one lock, so it is atomic like a Redis Lua script. Expiry works by
//! timestamps (`tokio::time::Instant`, so tests may pause time): an expired session is treated as
//! gone by every operation and removed by the reaper; an expired log is treated as absent.

use std::collections::{HashMap, VecDeque};

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::model::*;
use crate::rules::{self, order};
use crate::task::TaskRecord;
use crate::traits::holder_node;

/// Everything every node view sees.
#[derive(Default)]
pub(super) struct Shared {
    /// Sessions by id, including expired ones not reaped yet.
    pub sessions: HashMap<String, Session>,
    /// Node id → end of its liveness.
    pub nodes: HashMap<String, Instant>,
    /// Node id → its inbox (the unbounded half; a forwarder feeds the bounded receiver).
    pub inboxes: HashMap<String, mpsc::UnboundedSender<BusMessage>>,
    /// Agreed secrets by name ([`crate::Secrets`]).
    pub secrets: HashMap<String, Vec<u8>>,
    /// Task records by id, with when each expires (including expired ones not purged yet).
    pub tasks: HashMap<String, (TaskRecord, Instant)>,
    /// Tombstones of expired tasks: task id → (principal, until when it is kept).
    pub expired_tasks: HashMap<String, (String, Instant)>,
    /// Running-task slots: principal → task id → when the slot frees itself.
    pub task_slots: HashMap<String, HashMap<String, Instant>>,
    /// Rate-limit states ([`crate::rate`]).
    pub rates: super::rates::RateStates,
    /// The last log position handed out, `(ms, seq)`.
    last_position: (u64, u64),
}

/// One session: the record and its side tables (the Redis hashes `st`, `run`, `inf`, `pend`).
pub(super) struct Session {
    /// The record.
    pub record: SessionRecord,
    /// When the record expires.
    pub expires: Instant,
    /// Stream registry: stream id → holder token (`""` when released).
    pub streams: HashMap<String, String>,
    /// Stream id → request still running for it.
    pub running: HashMap<String, RunningRequest>,
    /// Client request id key → (node, stream).
    pub inflight: HashMap<String, (String, String)>,
    /// Server-issued request id key → node waiting for the answer.
    pub pending: HashMap<String, String>,
    /// Stream id → its event log.
    pub logs: HashMap<String, Log>,
    /// Whether an event was ever appended (the Redis backend then keeps a `bytes` hash).
    pub logged: bool,
}

/// One stream's event log.
pub(super) struct Log {
    /// Retained events, oldest first.
    pub events: VecDeque<LoggedEvent>,
    /// Position of the newest event trimmed away, if any.
    pub trimmed: Option<String>,
    /// `(position, append id)` of the retained events appended with one
    /// ([`crate::EventLog::append_once`]), oldest first.
    pub ids: VecDeque<(String, String)>,
    /// Bytes of event data retained (`max_stream_log_bytes`, `max_session_log_bytes`).
    pub bytes: u64,
    /// When the log expires (`idle_ttl` after its last append).
    pub expires: Instant,
}

impl Session {
    fn new(record: SessionRecord, expires: Instant) -> Session {
        Session {
            record,
            expires,
            streams: HashMap::new(),
            running: HashMap::new(),
            inflight: HashMap::new(),
            pending: HashMap::new(),
            logs: HashMap::new(),
            logged: false,
        }
    }

    /// Pushes the session's expiry (and its standalone stream's log, which lives as long as the
    /// session) to `until`.
    pub fn touch(&mut self, until: Instant) {
        self.expires = until;
        if let Some(log) = self
            .logs
            .get_mut(switchboard_protocol::StreamId::STANDALONE)
        {
            log.expires = log.expires.max(until);
        }
    }

    /// The stream's log unless it expired.
    pub fn log(&self, stream: &str, now: Instant) -> Option<&Log> {
        self.logs.get(stream).filter(|l| l.expires > now)
    }

    /// Whether the stream is known: the standalone stream always is; a POST stream from its
    /// registration while its request runs or its log is retained.
    pub fn known(&self, stream: &str, now: Instant) -> bool {
        rules::is_standalone(stream)
            || (self.streams.contains_key(stream)
                && (self.running.contains_key(stream) || self.log(stream, now).is_some()))
    }

    /// The position of the event of `stream` appended with `append_id`, while it is retained.
    fn appended_as(&self, stream: &str, append_id: &str, now: Instant) -> Option<String> {
        let log = self.log(stream, now)?;
        let found = log.ids.iter().rev().find(|(_, id)| id == append_id);
        found.map(|(position, _)| position.clone())
    }

    /// Number of keys the Redis backend would hold for this session right now (its append
    /// gives every event an id, kept in one hash per log while the log holds an event).
    pub fn key_count(&self, now: Instant) -> usize {
        let live_logs = self.logs.values().filter(|l| l.expires > now);
        let logs: usize = live_logs
            .map(|l| 1 + usize::from(l.trimmed.is_some()) + usize::from(!l.events.is_empty()))
            .sum();
        usize::from(self.expires > now)
            + usize::from(!self.streams.is_empty())
            + usize::from(!self.running.is_empty())
            + usize::from(!self.inflight.is_empty())
            + usize::from(!self.pending.is_empty())
            + usize::from(self.logged && self.expires > now)
            + logs
    }

    /// Drops streams with no running request and no retained log (see [`rules::should_prune`]).
    pub fn prune_streams(&mut self, now: Instant) {
        if !rules::should_prune(self.streams.len()) {
            return;
        }
        let dead: Vec<String> = self
            .streams
            .keys()
            .filter(|s| !self.known(s, now))
            .cloned()
            .collect();
        for s in dead {
            self.streams.remove(&s);
            self.logs.remove(&s);
        }
    }

    /// Trims the session's oldest events, whichever live log holds them, until its live logs
    /// hold at most `cap` bytes (`max_session_log_bytes`; the Redis append script's
    /// `trim_session`).
    fn trim_session(&mut self, cap: u64, now: Instant) {
        let live = |l: &&mut Log| l.expires > now;
        let mut total: u64 = self.logs.values_mut().filter(live).map(|l| l.bytes).sum();
        while total > cap {
            let oldest = self
                .logs
                .values_mut()
                .filter(live)
                .filter(|l| !l.events.is_empty())
                .min_by_key(|l| l.events.front().map(|e| order(&e.position)));
            let Some(log) = oldest else { return };
            total -= log.pop_oldest();
        }
    }
}

impl Shared {
    /// The session if it exists and has not expired.
    pub fn live(&mut self, sid: &str, now: Instant) -> Option<&mut Session> {
        self.sessions.get_mut(sid).filter(|s| s.expires > now)
    }

    /// Sends `msg` to `node`'s inbox if it has one.
    pub fn deliver(&self, node: &str, msg: BusMessage) {
        if let Some(tx) = self.inboxes.get(node) {
            let _ = tx.send(msg);
        }
    }

    /// Sends `msg` to every inbox.
    pub fn broadcast(&self, msg: BusMessage) {
        for tx in self.inboxes.values() {
            let _ = tx.send(msg.clone());
        }
    }

    fn next_position(&mut self) -> String {
        let now = rules::now_ms();
        let (ms, seq) = self.last_position;
        self.last_position = if now > ms { (now, 0) } else { (ms, seq + 1) };
        format!("{}-{}", self.last_position.0, self.last_position.1)
    }

    /// [`crate::SessionStore::create_session`].
    pub fn create(
        &mut self,
        cfg: &StoreConfig,
        record: &SessionRecord,
        now: Instant,
    ) -> CreateOutcome {
        let known = self.sessions.contains_key(&record.id);
        if !known && self.sessions.len() as u64 >= cfg.max_sessions {
            return CreateOutcome::AtCapacity;
        }
        let cap = cfg.max_sessions_per_principal;
        let principal = &record.principal;
        if !known && cap > 0 {
            let theirs = self.sessions.values();
            let theirs = theirs.filter(|s| &s.record.principal == principal);
            if theirs.count() as u64 >= cap {
                return CreateOutcome::PrincipalAtCapacity;
            }
        }
        let session = Session::new(record.clone(), now + cfg.idle_ttl);
        self.sessions.insert(record.id.clone(), session);
        CreateOutcome::Created
    }

    /// [`crate::SessionStore::swap_upstream_sessions`]. A swap that sets `upstream`'s entry and
    /// finds every one of its entries as it gives them was made already (sent again): `Swapped`.
    pub fn swap_upstream(
        &mut self,
        sid: &str,
        upstream: &str,
        expected: Option<&str>,
        entries: Vec<(String, Option<String>)>,
        now: Instant,
    ) -> UpstreamSwap {
        let Some(s) = self.live(sid, now) else {
            return UpstreamSwap::Missing;
        };
        let map = &mut s.record.upstream_sessions;
        if map.get(upstream).map(String::as_str) != expected {
            let stored = |(name, id): &(String, Option<String>)| map.get(name) == id.as_ref();
            let again = entries.iter().any(|(name, _)| name == upstream);
            if again && entries.iter().all(stored) {
                return UpstreamSwap::Swapped;
            }
            return UpstreamSwap::Changed(map.clone());
        }
        for (name, id) in entries {
            match id {
                Some(id) => map.insert(name, id),
                None => map.remove(&name),
            };
        }
        UpstreamSwap::Swapped
    }

    /// [`crate::SessionStore::finish`].
    pub fn finish(
        &mut self,
        cfg: &StoreConfig,
        sid: &str,
        request_key: &str,
        json_stream: Option<&str>,
        now: Instant,
    ) {
        let Some(s) = self.sessions.get_mut(sid) else {
            return;
        };
        s.inflight.remove(request_key);
        if let Some(stream) = json_stream {
            s.running.remove(stream);
            s.streams.remove(stream);
            s.logs.remove(stream);
        }
        if s.expires > now {
            s.touch(now + cfg.idle_ttl);
        }
    }

    /// [`crate::SessionStore::delete_session`] and the reaper: removes everything of `sid`.
    pub fn remove(&mut self, sid: &str) -> bool {
        let existed = self.sessions.remove(sid).is_some();
        if existed {
            self.broadcast(BusMessage::Terminated {
                sid: sid.to_owned(),
            });
        }
        existed
    }

    /// [`crate::EventLog::append`] on a live session (also used by `abort_running`).
    pub fn append(
        &mut self,
        cfg: &StoreConfig,
        sid: &str,
        stream: &str,
        data: &str,
        end: bool,
        now: Instant,
    ) -> Option<Appended> {
        self.live(sid, now)?;
        let position = self.next_position();
        let s = self.live(sid, now)?;
        let expires = now + cfg.idle_ttl;
        let log = s
            .logs
            .entry(stream.to_owned())
            .or_insert_with(|| Log::empty(expires));
        if log.expires <= now {
            *log = Log::empty(expires);
        }
        let kept = crate::caps::stored_form(data, cfg).unwrap_or_else(|| data.to_owned());
        log.push(
            LoggedEvent {
                position: position.clone(),
                data: kept,
                end,
            },
            rules::max_events(cfg),
            cfg.max_stream_log_bytes,
        );
        log.expires = expires;
        s.logged = true;
        s.trim_session(cfg.max_session_log_bytes, now);
        let holder = s.streams.entry(stream.to_owned()).or_default().clone();
        if end {
            if let Some(run) = s.running.remove(stream) {
                if s.inflight
                    .get(&run.request_key)
                    .is_some_and(|(_, st)| st == stream)
                {
                    s.inflight.remove(&run.request_key);
                }
            }
        }
        let event = BusEvent {
            sid: sid.to_owned(),
            stream: stream.to_owned(),
            holder,
            position,
            data: data.to_owned(),
            end,
            verify: false,
        };
        Some(self.delivered(cfg, event))
    }

    /// [`crate::EventLog::append_once`]: [`Self::append`], unless the log retains the event
    /// appended with `append_id`; then nothing is stored and that event's position is answered
    /// (and the event delivered again). `event` names the session, stream, data and end; its
    /// holder and position are the store's to fill in.
    pub fn append_once(
        &mut self,
        cfg: &StoreConfig,
        event: BusEvent,
        append_id: &str,
        now: Instant,
    ) -> Option<Appended> {
        let s = self.live(&event.sid, now)?;
        if let Some(position) = s.appended_as(&event.stream, append_id, now) {
            let holder = s.streams.get(&event.stream).cloned().unwrap_or_default();
            return Some(self.delivered(
                cfg,
                BusEvent {
                    position,
                    holder,
                    ..event
                },
            ));
        }
        let (sid, stream) = (&event.sid, &event.stream);
        let appended = self.append(cfg, sid, stream, &event.data, event.end, now)?;
        let s = self.live(sid, now)?;
        if let Some(log) = s.logs.get_mut(stream.as_str()) {
            log.ids
                .push_back((appended.position.clone(), append_id.to_owned()));
        }
        Some(appended)
    }

    /// Delivers `event` to its holder's inbox when the store does that
    /// ([`rules::delivers_event`]); what `append` answers.
    fn delivered(&self, cfg: &StoreConfig, event: BusEvent) -> Appended {
        let (position, holder) = (event.position.clone(), event.holder.clone());
        if rules::delivers_event(&holder, &event.stream, &cfg.node_id) {
            self.deliver(holder_node(&holder), BusMessage::Event(event));
        }
        Appended {
            position,
            holder: rules::some_holder(holder),
        }
    }

    /// [`crate::EventLog::replay`].
    pub fn replay(
        &mut self,
        sid: &str,
        stream: &str,
        after: &str,
        limit: usize,
        now: Instant,
    ) -> Replay {
        let Some(s) = self.live(sid, now) else {
            return Replay::UnknownStream;
        };
        if !s.known(stream, now) {
            return Replay::UnknownStream;
        }
        let Some(log) = s.log(stream, now) else {
            let empty = rules::is_standalone(stream) || rules::is_start(after);
            return if empty {
                Replay::Events(Vec::new())
            } else {
                Replay::UnknownStream
            };
        };
        let from = order(after);
        if let Some(cut) = log.trimmed.as_ref().filter(|cut| order(cut) > from) {
            // A log emptied by `max_session_log_bytes` names its trim position.
            let first = log.events.front().map(|e| &e.position);
            return Replay::Truncated {
                oldest: first.unwrap_or(cut).clone(),
            };
        }
        Replay::Events(
            log.events
                .iter()
                .filter(|e| order(&e.position) > from)
                .take(limit.max(1))
                .cloned()
                .collect(),
        )
    }

    /// [`crate::EventLog::claim`].
    pub fn claim(
        &mut self,
        cfg: &StoreConfig,
        sid: &str,
        stream: &str,
        holder: &str,
        now: Instant,
    ) -> Claim {
        let Some(s) = self.live(sid, now).filter(|s| s.known(stream, now)) else {
            return Claim::Unknown;
        };
        let last_position = s
            .log(stream, now)
            .and_then(|l| l.events.back())
            .map(|e| e.position.clone());
        let prev = s
            .streams
            .insert(stream.to_owned(), holder.to_owned())
            .unwrap_or_default();
        if !prev.is_empty() && prev != holder && holder_node(&prev) != cfg.node_id {
            let msg = BusMessage::Takeover {
                sid: sid.to_owned(),
                stream: stream.to_owned(),
                holder: prev.clone(),
            };
            self.deliver(holder_node(&prev), msg);
        }
        Claim::Claimed {
            previous: rules::some_holder(prev),
            last_position,
        }
    }
}

impl Log {
    fn empty(expires: Instant) -> Log {
        Log {
            events: VecDeque::new(),
            trimmed: None,
            ids: VecDeque::new(),
            bytes: 0,
            expires,
        }
    }

    /// Appends `event`, then trims the oldest events until at most `cap` events and
    /// `byte_cap` bytes are left (never the event just appended: `byte_cap` is at least
    /// `max_event_bytes`).
    fn push(&mut self, event: LoggedEvent, cap: u64, byte_cap: u64) {
        self.bytes += event.data.len() as u64;
        self.events.push_back(event);
        while self.events.len() > 1 && (self.events.len() as u64 > cap || self.bytes > byte_cap) {
            self.pop_oldest();
        }
    }

    /// Trims the oldest event, recording its position; returns its bytes (0 when empty).
    fn pop_oldest(&mut self) -> u64 {
        let Some(old) = self.events.pop_front() else {
            return 0;
        };
        let bytes = old.data.len() as u64;
        self.bytes -= bytes;
        if self.ids.front().is_some_and(|(p, _)| *p == old.position) {
            self.ids.pop_front();
        }
        self.trimmed = Some(old.position);
        bytes
    }
}
