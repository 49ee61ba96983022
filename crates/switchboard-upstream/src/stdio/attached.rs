//! [`Attached`]: the client sessions attached to a shared stdio child in this process, and the
//! resources each subscribed to through it (case C23).
//!
//! A session is attached by each of its requests that reaches the shared child here (refreshing
//! its standalone peer, which carries the session's current log level), and detached when the
//! session ends ([`crate::Upstream::session_ended`], also for sessions found gone from the
//! store). At most `max` sessions are attached: past it the one whose last request is oldest is
//! detached (logged and counted), so it no longer receives the child's broadcasts.
//! `resources/subscribe` and `resources/unsubscribe` that the child accepted are recorded per
//! session (the node caps them per session with `session.max_subscriptions`); they belong to the child
//! that accepted them and are forgotten when a new shared child starts.
//!
//! A detached session's subscriptions are kept (the child still holds them: it has one
//! connection for everyone and was told nothing) and given back when the session attaches again,
//! so its `resources/updated` resume with its next request here. They are kept for at most `max`
//! detached sessions; past it those of the one detached longest are forgotten (logged). The
//! session record's `subscriptions` cannot serve instead: they list the URIs of every upstream
//! and every node's shared child, not the ones this child accepted.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::upstream::ClientPeer;
use switchboard_telemetry::trace::logged_session;

struct Entry {
    /// The session's standalone stream.
    peer: Arc<dyn ClientPeer>,
    /// URIs it subscribed to through the child.
    uris: HashSet<String>,
    /// When it last used the child (a sequence number).
    used: u64,
}

/// The URIs a detached session subscribed to through the child.
struct Parked {
    uris: HashSet<String>,
    /// When it last used the child.
    used: u64,
}

#[derive(Default)]
struct Sessions {
    attached: HashMap<String, Entry>,
    /// Detached sessions with subscriptions (at most `max`).
    parked: HashMap<String, Parked>,
}

/// The sessions a shared child talks to, and what could not be delivered to any.
pub(crate) struct Attached {
    max: usize,
    sessions: Mutex<Sessions>,
    seq: AtomicU64,
    /// Sessions detached because `max` was reached.
    pub(crate) evicted: AtomicU64,
    /// Notifications of a child that no session could be told (nobody attached, nobody
    /// subscribed, or several sessions' calls in flight for a log message).
    pub(crate) dropped: AtomicU64,
}

impl Attached {
    pub(crate) fn new(max: usize) -> Attached {
        Attached {
            max: max.max(1),
            sessions: Mutex::default(),
            seq: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Attaches session `sid` (or refreshes its peer), with the subscriptions it had when it was
    /// detached; detaches the least recently used one when that makes more than `max`.
    pub(crate) fn attach(&self, upstream: &str, sid: &str, peer: Arc<dyn ClientPeer>) {
        let used = self.seq.fetch_add(1, Ordering::Relaxed);
        let mut sessions = self.sessions.lock();
        if let Some(entry) = sessions.attached.get_mut(sid) {
            entry.peer = peer;
            entry.used = used;
            return;
        }
        if sessions.attached.len() >= self.max {
            self.evict_oldest(upstream, &mut sessions);
        }
        let uris = match sessions.parked.remove(sid) {
            Some(parked) => {
                tracing::debug!(upstream, session = %logged_session(sid), subscriptions = parked.uris.len(), "a detached session attached again: its subscriptions through the shared child are back");
                parked.uris
            }
            None => HashSet::new(),
        };
        let entry = Entry { peer, uris, used };
        sessions.attached.insert(sid.to_owned(), entry);
    }

    /// Detaches the least recently used session, keeping its subscriptions for when it comes
    /// back (forgetting those of the session detached longest when `max` are kept).
    fn evict_oldest(&self, upstream: &str, sessions: &mut Sessions) {
        let oldest = sessions
            .attached
            .iter()
            .min_by_key(|(_, e)| e.used)
            .map(|(s, _)| s.clone());
        let Some((oldest, entry)) = oldest.and_then(|s| sessions.attached.remove_entry(&s)) else {
            return;
        };
        self.evicted.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(upstream, session = %logged_session(&oldest), max = self.max, "max_attached_sessions reached: the least recently active session no longer receives the shared child's notifications until its next request here");
        if entry.uris.is_empty() {
            return;
        }
        if sessions.parked.len() >= self.max {
            let longest = sessions
                .parked
                .iter()
                .min_by_key(|(_, p)| p.used)
                .map(|(s, _)| s.clone());
            if let Some(longest) = longest {
                sessions.parked.remove(&longest);
                tracing::info!(upstream, session = %logged_session(&longest), max = self.max, "forgot the subscriptions of the session detached longest from the shared child");
            }
        }
        let parked = Parked {
            uris: entry.uris,
            used: entry.used,
        };
        sessions.parked.insert(oldest, parked);
    }

    /// Forgets session `sid`.
    pub(crate) fn detach(&self, sid: &str) {
        let mut sessions = self.sessions.lock();
        sessions.attached.remove(sid);
        sessions.parked.remove(sid);
    }

    /// Records that `sid` subscribed to `uri` (or, with `subscribed` false, unsubscribed).
    pub(crate) fn subscription(&self, sid: &str, uri: &str, subscribed: bool) {
        if let Some(entry) = self.sessions.lock().attached.get_mut(sid) {
            if subscribed {
                entry.uris.insert(uri.to_owned());
            } else {
                entry.uris.remove(uri);
            }
        }
    }

    /// A new child: the subscriptions made through the old one are gone with it.
    pub(crate) fn forget_subscriptions(&self) {
        let mut sessions = self.sessions.lock();
        sessions.parked.clear();
        for entry in sessions.attached.values_mut() {
            entry.uris.clear();
        }
    }

    /// Every attached session with its standalone peer.
    pub(crate) fn peers(&self) -> Vec<(String, Arc<dyn ClientPeer>)> {
        let sessions = self.sessions.lock();
        sessions
            .attached
            .iter()
            .map(|(s, e)| (s.clone(), e.peer.clone()))
            .collect()
    }

    /// The standalone peer of `sid`, when attached.
    pub(crate) fn peer(&self, sid: &str) -> Option<Arc<dyn ClientPeer>> {
        self.sessions
            .lock()
            .attached
            .get(sid)
            .map(|e| e.peer.clone())
    }

    /// The attached sessions that subscribed to `uri` through the child, with their peers.
    pub(crate) fn subscribers(&self, uri: &str) -> Vec<(String, Arc<dyn ClientPeer>)> {
        let sessions = self.sessions.lock();
        sessions
            .attached
            .iter()
            .filter(|(_, e)| e.uris.contains(uri))
            .map(|(s, e)| (s.clone(), e.peer.clone()))
            .collect()
    }

    /// The sessions something is kept for: the attached ones, and detached ones whose
    /// subscriptions are kept.
    pub(crate) fn sessions(&self) -> Vec<String> {
        let sessions = self.sessions.lock();
        let attached = sessions.attached.keys();
        attached.chain(sessions.parked.keys()).cloned().collect()
    }
}
