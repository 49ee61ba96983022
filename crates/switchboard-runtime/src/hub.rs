//! The stream connections held by this replica, keyed by (session, stream).
//!
//! A stream has at most one holder cluster-wide (recorded in the store with
//! [`switchboard_store::EventLog::claim`]); this hub maps the holders that live here to their
//! connection tasks. Events reach a connection through a bounded queue;
//! when it is full the event is not dropped from the client's view: the connection is flagged as
//! lagged and re-reads the stream's event log from its last delivered position.

use foldhash::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use switchboard_telemetry::trace::logged_session;

use switchboard_protocol::{codes, jsonrpc, RequestId, StreamId};
use switchboard_store::{holder_node, Appended};
use tokio::sync::mpsc;

/// One event for a connection.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamEvent {
    /// Log position (`<ms>-<seq>`).
    pub position: String,
    /// JSON-RPC message text.
    pub data: String,
    /// Whether it ends the stream.
    pub end: bool,
}

impl From<switchboard_store::LoggedEvent> for StreamEvent {
    fn from(e: switchboard_store::LoggedEvent) -> StreamEvent {
        StreamEvent {
            position: e.position,
            data: e.data,
            end: e.end,
        }
    }
}

/// What a connection task receives. Events are boxed so that the queue's slots stay one word
/// wide: an idle stream's queue allocates its first block of slots up front (issue 4, memory per
/// open stream).
#[derive(Debug)]
pub enum Outbound {
    /// An event to write.
    Event(Box<StreamEvent>),
    /// Close now (taken over elsewhere, session ended, replica draining).
    Close,
    /// Live delivery may have missed events: re-read the event log from the last position.
    CatchUp,
}

struct Conn {
    holder: String,
    tx: mpsc::Sender<Outbound>,
    lagged: Arc<AtomicBool>,
    /// The request whose POST stream this is: when the session ends while the connection is
    /// open, its -32004 is written as the last event instead of closing without a word.
    request: Option<RequestId>,
}

/// The position of an event written straight to a connection, past anything it has written:
/// its log is gone (the session ended), so it is never resumed from.
pub const PAST_THE_LOG: &str = "18446744073709551615-0";

type Conns = Arc<Mutex<HashMap<String, HashMap<String, Conn>>>>;

/// The receiving end a connection task owns. Dropping it unregisters the connection (if it is
/// still the registered one), whichever way the request ends — including a client that goes away
/// while its handler is still waiting.
pub struct ConnHandle {
    /// Events and close signals.
    pub rx: mpsc::Receiver<Outbound>,
    /// Set when an event could not be queued; the task then re-reads the log.
    pub lagged: Arc<AtomicBool>,
    conns: Conns,
    sid: String,
    stream: String,
    holder: String,
}

impl Drop for ConnHandle {
    fn drop(&mut self) {
        remove_if_holder(&self.conns, &self.sid, &self.stream, &self.holder);
    }
}

fn remove_if_holder(conns: &Conns, sid: &str, stream: &str, holder: &str) -> Option<Conn> {
    let mut map = conns.lock();
    let streams = map.get_mut(sid)?;
    let removed = if streams.get(stream).is_some_and(|c| c.holder == holder) {
        streams.remove(stream)
    } else {
        None
    };
    if streams.is_empty() {
        map.remove(sid);
    }
    removed
}

/// The answer of a request whose session ended while it ran (MCP gives no code for it; -32004
/// is this project's "did not finish", see the README's errors).
fn session_ended(id: &RequestId) -> serde_json::Value {
    let data = serde_json::json!({"reason": "session_ended"});
    jsonrpc::error_response(
        Some(id),
        codes::REQUEST_ABORTED,
        "request cancelled",
        Some(data),
    )
}

fn counters() -> &'static switchboard_telemetry::metrics::Counters {
    &switchboard_telemetry::metrics::get().counters
}

/// Local registry of held streams.
pub struct Hub {
    conns: Conns,
    queue: usize,
}

impl Hub {
    /// A hub whose connections queue at most `queue` events each.
    pub fn new(queue: usize) -> Hub {
        Hub {
            conns: Arc::new(Mutex::new(HashMap::default())),
            queue: queue.max(1),
        }
    }

    /// Streams held open here: `(request, standalone)`, a POST's answer stream against a
    /// session's standalone one (GET, legacy SSE, WebSocket). For `switchboard_streams_open`.
    pub fn open_counts(&self) -> (usize, usize) {
        let map = self.conns.lock();
        let conns = map.values().flat_map(HashMap::values);
        conns.fold((0, 0), |(r, s), c| {
            if c.request.is_some() {
                (r + 1, s)
            } else {
                (r, s + 1)
            }
        })
    }

    /// Registers `holder` as the local connection of the stream. A previous local connection of the
    /// same stream is told to close (it was taken over).
    pub fn register(&self, sid: &str, stream: &str, holder: &str) -> ConnHandle {
        self.register_ending(sid, stream, holder, None)
    }

    /// [`Hub::register`] for the POST stream of `request`: when the session ends while it is
    /// open ([`Hub::close_session`]), the request's -32004 `request cancelled` (with
    /// `data.reason = "session_ended"`) is its last event, since the stream's log is gone and
    /// the cancelled request can no longer log its own answer.
    pub fn register_request(
        &self,
        sid: &str,
        stream: &str,
        holder: &str,
        request: &RequestId,
    ) -> ConnHandle {
        self.register_ending(sid, stream, holder, Some(request.clone()))
    }

    fn register_ending(
        &self,
        sid: &str,
        stream: &str,
        holder: &str,
        request: Option<RequestId>,
    ) -> ConnHandle {
        let (tx, rx) = mpsc::channel(self.queue);
        let lagged = Arc::new(AtomicBool::new(false));
        let conn = Conn {
            holder: holder.to_owned(),
            tx,
            lagged: lagged.clone(),
            request,
        };
        let old = self
            .conns
            .lock()
            .entry(sid.to_owned())
            .or_default()
            .insert(stream.to_owned(), conn);
        if let Some(old) = old {
            let _ = old.tx.try_send(Outbound::Close);
            counters().streams_taken_over.inc();
            tracing::debug!(session = %logged_session(sid), stream, "stream taken over");
        }
        ConnHandle {
            rx,
            lagged,
            conns: self.conns.clone(),
            sid: sid.to_owned(),
            stream: stream.to_owned(),
            holder: holder.to_owned(),
        }
    }

    /// Whether the stream's connection here is `holder`'s.
    pub fn holds(&self, sid: &str, stream: &str, holder: &str) -> bool {
        self.conns
            .lock()
            .get(sid)
            .and_then(|s| s.get(stream))
            .is_some_and(|conn| conn.holder == holder)
    }

    /// Hands an event to the stream's connection if `holder` is still the one held here.
    pub fn deliver(&self, sid: &str, stream: &str, holder: &str, ev: StreamEvent) {
        let map = self.conns.lock();
        let Some(conn) = map.get(sid).and_then(|s| s.get(stream)) else {
            return;
        };
        if conn.holder != holder {
            return;
        }
        if let Err(mpsc::error::TrySendError::Full(_)) =
            conn.tx.try_send(Outbound::Event(Box::new(ev)))
        {
            conn.lagged.store(true, Ordering::SeqCst);
            counters().streams_lagged.inc();
            tracing::debug!(session = %logged_session(sid), stream, "connection lagged; will re-read the event log");
        }
    }

    /// Hands event `data` (`end`: the stream's last), just appended to `stream` of `sid` by
    /// replica `node_id` as `appended`, to its connection when that is held here. The store has
    /// delivered it itself, through the bus, when the stream is the standalone one or its holder
    /// is another replica's ([`switchboard_store::Appended::holder`]); nothing is done then.
    pub fn deliver_appended(
        &self,
        node_id: &str,
        (sid, stream): (&str, &str),
        appended: &Appended,
        data: String,
        end: bool,
    ) {
        let Some(holder) = &appended.holder else {
            return;
        };
        if stream == StreamId::STANDALONE || holder_node(holder) != node_id {
            return;
        }
        let event = StreamEvent {
            position: appended.position.clone(),
            data,
            end,
        };
        self.deliver(sid, stream, holder, event);
    }

    /// [`Hub::deliver`] of an event that may follow events this replica missed
    /// ([`switchboard_store::BusEvent::verify`]): the connection first re-reads its log from the
    /// last event it wrote, which brings the missed ones and this one in order; the event itself
    /// then arrives as already written.
    pub fn deliver_verified(&self, sid: &str, stream: &str, holder: &str, ev: StreamEvent) {
        if let Some(conn) = self.conns.lock().get(sid).and_then(|s| s.get(stream)) {
            if conn.holder == holder {
                conn.lagged.store(true, Ordering::SeqCst);
                let _ = conn.tx.try_send(Outbound::CatchUp);
            }
        }
        self.deliver(sid, stream, holder, ev);
    }

    /// Closes the stream's connection if it is `holder` (a takeover from another replica).
    pub fn close(&self, sid: &str, stream: &str, holder: &str) {
        if let Some(c) = remove_if_holder(&self.conns, sid, stream, holder) {
            let _ = c.tx.try_send(Outbound::Close);
        }
    }

    /// Takes the stream's connection out of the hub if it is `holder` here, returning the way to
    /// it: nothing reaches it through the hub any more (neither live events nor the close when
    /// its session ends), only what is sent on the returned sender. `None` when it is not held
    /// here.
    pub fn detach(&self, sid: &str, stream: &str, holder: &str) -> Option<mpsc::Sender<Outbound>> {
        remove_if_holder(&self.conns, sid, stream, holder).map(|c| c.tx)
    }

    /// Forgets the connection if it is still `holder` (the connection ended by itself).
    pub fn unregister(&self, sid: &str, stream: &str, holder: &str) {
        remove_if_holder(&self.conns, sid, stream, holder);
    }

    /// Closes every connection of a session (it ended); the POST stream of a request
    /// ([`Hub::register_request`]) ends with that request's -32004 first.
    pub fn close_session(&self, sid: &str) {
        if let Some(streams) = self.conns.lock().remove(sid) {
            for c in streams.into_values() {
                let last = match c.request {
                    Some(id) => Outbound::Event(Box::new(StreamEvent {
                        position: PAST_THE_LOG.to_owned(),
                        data: session_ended(&id).to_string(),
                        end: true,
                    })),
                    None => Outbound::Close,
                };
                let _ = c.tx.try_send(last);
            }
        }
    }

    /// Closes every connection here, without a last event: their sessions and requests go on,
    /// and each client resumes its streams on another replica (this one was cut off from the
    /// store: the gateway node's fence).
    pub fn close_all(&self) {
        for (_, streams) in self.conns.lock().drain() {
            for c in streams.into_values() {
                let _ = c.tx.try_send(Outbound::Close);
            }
        }
    }

    /// Closes every standalone GET stream (the replica is draining; clients reopen them elsewhere).
    pub fn close_standalone(&self) {
        for streams in self.conns.lock().values_mut() {
            if let Some(c) = streams.remove(switchboard_protocol::StreamId::STANDALONE) {
                let _ = c.tx.try_send(Outbound::Close);
            }
        }
    }

    /// Every connection re-reads its event log (the bus inbox reconnected and may have missed
    /// live events).
    pub fn catch_up_all(&self) {
        for streams in self.conns.lock().values() {
            for c in streams.values() {
                c.lagged.store(true, Ordering::SeqCst);
                let _ = c.tx.try_send(Outbound::CatchUp);
            }
        }
    }

    /// Sessions with at least one connection here.
    pub fn sessions(&self) -> Vec<String> {
        self.conns.lock().keys().cloned().collect()
    }

    /// Number of open connections here.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.conns.lock().values().map(HashMap::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(p: &str) -> StreamEvent {
        StreamEvent {
            position: p.into(),
            data: "{}".into(),
            end: false,
        }
    }

    #[tokio::test]
    async fn a_verified_event_makes_its_connection_catch_up_first() {
        let hub = Hub::new(4);
        let mut h = hub.register("s", "get", "n/1");
        hub.deliver_verified("s", "get", "n/1", ev("1-5"));
        assert!(h.lagged.load(Ordering::SeqCst));
        assert!(matches!(h.rx.recv().await, Some(Outbound::CatchUp)));
        match h.rx.recv().await {
            Some(Outbound::Event(e)) => assert_eq!(e.position, "1-5"),
            other => panic!("{other:?}"),
        }
        hub.deliver_verified("s", "get", "n/2", ev("1-6"));
        assert!(
            h.rx.try_recv().is_err(),
            "another holder's event changes nothing"
        );
    }

    #[tokio::test]
    async fn delivers_only_to_the_current_holder_and_flags_lag() {
        let hub = Hub::new(1);
        let mut h = hub.register("s", "get", "n/1");
        hub.deliver("s", "get", "n/2", ev("1-0"));
        hub.deliver("s", "get", "n/1", ev("1-1"));
        hub.deliver("s", "get", "n/1", ev("1-2"));
        assert!(h.lagged.load(Ordering::SeqCst));
        match h.rx.recv().await {
            Some(Outbound::Event(e)) => assert_eq!(e.position, "1-1"),
            other => panic!("{other:?}"),
        }
        let mut h2 = hub.register("s", "get", "n/3");
        assert!(matches!(h.rx.recv().await, Some(Outbound::Close)));
        hub.close_session("s");
        assert!(matches!(h2.rx.recv().await, Some(Outbound::Close)));
        assert_eq!(hub.len(), 0);
    }

    #[test]
    fn dropping_a_handle_unregisters_it_but_not_its_successor() {
        let hub = Hub::new(4);
        let first = hub.register("s", "x", "n/1");
        drop(hub.register("s", "y", "n/2"));
        assert_eq!(
            hub.len(),
            1,
            "a handle dropped before use (client gone) leaves nothing behind"
        );
        let _second = hub.register("s", "x", "n/3");
        drop(first);
        assert_eq!(
            hub.len(),
            1,
            "the replaced handle does not remove its successor"
        );
        assert_eq!(hub.sessions(), vec!["s".to_owned()]);
    }
}
