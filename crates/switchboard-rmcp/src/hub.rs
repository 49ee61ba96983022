//! The SSE connections open on this replica, keyed by (session, stream).
//!
//! A stream has at most one holder in the whole cluster (recorded in the store with
//! [`switchboard_store::EventLog::claim`]); this hub maps the holders living here to their
//! connection tasks (the `conn` module). Events reach a connection through a bounded queue
//! (`connection_queue`); when it is full the event is not lost: the connection is flagged as
//! lagged and re-reads its stream's event log from the last event it sent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;

/// One event of a stream, as logged.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StreamEvent {
    /// Log position (`<ms>-<seq>`).
    pub position: String,
    /// The JSON-RPC message text.
    pub data: String,
    /// Whether it is the stream's last event (the response of its request).
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

/// What a connection task receives.
#[derive(Debug)]
pub(crate) enum Outbound {
    /// An event to send (boxed: an idle queue's slots stay one word wide).
    Event(Box<StreamEvent>),
    /// End the connection now (taken over, session ended, the handler closed it).
    Close,
    /// Live delivery may have missed events: re-read the log.
    CatchUp,
}

struct Conn {
    holder: String,
    tx: mpsc::Sender<Outbound>,
    lagged: Arc<AtomicBool>,
}

type Conns = Arc<Mutex<HashMap<String, HashMap<String, Conn>>>>;

/// The receiving end of one connection. Dropping it unregisters the connection if it is still
/// the registered one, however the connection ended.
pub(crate) struct ConnHandle {
    /// Events and signals.
    pub rx: mpsc::Receiver<Outbound>,
    /// Set when an event could not be queued: the connection re-reads its log.
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

fn lock(conns: &Conns) -> MutexGuard<'_, HashMap<String, HashMap<String, Conn>>> {
    // Every change is a single insert or remove, so a poisoned map is still consistent.
    conns.lock().unwrap_or_else(|p| p.into_inner())
}

fn remove_if_holder(conns: &Conns, sid: &str, stream: &str, holder: &str) -> Option<Conn> {
    let mut map = lock(conns);
    let streams = map.get_mut(sid)?;
    let removed = match streams.get(stream) {
        Some(c) if c.holder == holder => streams.remove(stream),
        _ => None,
    };
    if streams.is_empty() {
        map.remove(sid);
    }
    removed
}

/// The registry of connections open here.
pub(crate) struct Hub {
    conns: Conns,
    queue: usize,
}

impl Hub {
    /// An empty hub whose connections queue at most `queue` events each.
    pub fn new(queue: usize) -> Hub {
        Hub {
            conns: Arc::default(),
            queue: queue.max(1),
        }
    }

    /// Makes `holder` the local connection of the stream; a previous local connection of the same
    /// stream is told to close (it was taken over).
    pub fn register(&self, sid: &str, stream: &str, holder: &str) -> ConnHandle {
        let (tx, rx) = mpsc::channel(self.queue);
        let lagged = Arc::new(AtomicBool::new(false));
        let conn = Conn {
            holder: holder.to_owned(),
            tx,
            lagged: lagged.clone(),
        };
        let old = lock(&self.conns)
            .entry(sid.to_owned())
            .or_default()
            .insert(stream.to_owned(), conn);
        if let Some(old) = old {
            let _ = old.tx.try_send(Outbound::Close);
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

    /// Hands `event` to the stream's connection if `holder` is the one open here. `verify`: the
    /// event may follow events this replica missed, so the connection re-reads its log first.
    pub fn deliver(&self, sid: &str, stream: &str, holder: &str, event: StreamEvent, verify: bool) {
        let map = lock(&self.conns);
        let Some(conn) = map.get(sid).and_then(|s| s.get(stream)) else {
            return;
        };
        if conn.holder != holder {
            return;
        }
        if verify {
            conn.lagged.store(true, Ordering::SeqCst);
            let _ = conn.tx.try_send(Outbound::CatchUp);
        }
        if let Err(mpsc::error::TrySendError::Full(_)) =
            conn.tx.try_send(Outbound::Event(Box::new(event)))
        {
            conn.lagged.store(true, Ordering::SeqCst);
        }
    }

    /// Closes the stream's connection if it is `holder` (taken over by another replica).
    pub fn close(&self, sid: &str, stream: &str, holder: &str) {
        if let Some(c) = remove_if_holder(&self.conns, sid, stream, holder) {
            let _ = c.tx.try_send(Outbound::Close);
        }
    }

    /// Closes every connection of a session (it ended).
    pub fn close_session(&self, sid: &str) {
        let removed = lock(&self.conns).remove(sid);
        for c in removed.into_iter().flat_map(HashMap::into_values) {
            let _ = c.tx.try_send(Outbound::Close);
        }
    }

    /// Every connection re-reads its event log (the bus inbox reconnected).
    pub fn catch_up_all(&self) {
        for c in lock(&self.conns).values().flat_map(HashMap::values) {
            c.lagged.store(true, Ordering::SeqCst);
            let _ = c.tx.try_send(Outbound::CatchUp);
        }
    }

    /// Sessions with at least one connection open here.
    pub fn sessions(&self) -> Vec<String> {
        lock(&self.conns).keys().cloned().collect()
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
    async fn delivers_to_the_current_holder_only_and_flags_lag() {
        let hub = Hub::new(1);
        let mut h = hub.register("s", "get", "n/1");
        hub.deliver("s", "get", "n/2", ev("1-0"), false);
        hub.deliver("s", "get", "n/1", ev("1-1"), false);
        hub.deliver("s", "get", "n/1", ev("1-2"), false);
        assert!(
            h.lagged.load(Ordering::SeqCst),
            "a full queue flags the lag"
        );
        match h.rx.recv().await {
            Some(Outbound::Event(e)) => assert_eq!(e.position, "1-1"),
            other => panic!("{other:?}"),
        }
        let mut h2 = hub.register("s", "get", "n/3");
        assert!(matches!(h.rx.recv().await, Some(Outbound::Close)));
        hub.close_session("s");
        assert!(matches!(h2.rx.recv().await, Some(Outbound::Close)));
        assert!(hub.sessions().is_empty());
    }

    #[test]
    fn a_dropped_handle_leaves_its_successor_alone() {
        let hub = Hub::new(4);
        let first = hub.register("s", "x", "n/1");
        let _second = hub.register("s", "x", "n/2");
        drop(first);
        assert_eq!(hub.sessions(), vec!["s".to_owned()]);
        hub.close("s", "x", "n/1");
        assert_eq!(
            hub.sessions(),
            vec!["s".to_owned()],
            "n/1 no longer holds it"
        );
        hub.close("s", "x", "n/2");
        assert!(hub.sessions().is_empty());
    }
}
