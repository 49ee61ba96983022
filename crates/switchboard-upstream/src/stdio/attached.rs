//! [`Attached`]: the client sessions attached to a shared stdio child in this process, and the
//! resources each subscribed to through it (case C23).
//!
//! A session is attached by each of its requests that reaches the shared child here (refreshing
//! its standalone peer, which carries the session's current log level), and detached when the
//! session ends ([`crate::Upstream::session_ended`], also for sessions found gone from the
//! store). At most `max` sessions are attached: past it the one whose last request is oldest is
//! detached (logged and counted), so it no longer receives the child's broadcasts.
//! `resources/subscribe` and `resources/unsubscribe` that the child accepted are recorded per
//! session (the node caps them per session with `max_subscriptions`); they belong to the child
//! that accepted them and are forgotten when a new shared child starts.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::upstream::ClientPeer;

/// Default most sessions attached to one shared child.
pub const DEFAULT_MAX_ATTACHED_SESSIONS: usize = 10_000;

struct Entry {
    /// The session's standalone stream.
    peer: Arc<dyn ClientPeer>,
    /// URIs it subscribed to through the child.
    uris: HashSet<String>,
    /// When it last used the child (a sequence number).
    used: u64,
}

/// The sessions a shared child talks to, and what could not be delivered to any.
pub(crate) struct Attached {
    max: usize,
    sessions: Mutex<HashMap<String, Entry>>,
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Attaches session `sid` (or refreshes its peer); detaches the least recently used one
    /// when that makes more than `max`.
    pub(crate) fn attach(&self, upstream: &str, sid: &str, peer: Arc<dyn ClientPeer>) {
        let used = self.seq.fetch_add(1, Ordering::Relaxed);
        let mut sessions = self.lock();
        if let Some(entry) = sessions.get_mut(sid) {
            entry.peer = peer;
            entry.used = used;
            return;
        }
        if sessions.len() >= self.max {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(s, _)| s.clone());
            if let Some(oldest) = oldest {
                sessions.remove(&oldest);
                self.evicted.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(upstream, session = %oldest, max = self.max, "max_attached_sessions reached: the least recently active session no longer receives the shared child's notifications");
            }
        }
        let uris = HashSet::new();
        sessions.insert(sid.to_owned(), Entry { peer, uris, used });
    }

    /// Forgets session `sid`.
    pub(crate) fn detach(&self, sid: &str) {
        self.lock().remove(sid);
    }

    /// Records that `sid` subscribed to `uri` (or, with `subscribed` false, unsubscribed).
    pub(crate) fn subscription(&self, sid: &str, uri: &str, subscribed: bool) {
        if let Some(entry) = self.lock().get_mut(sid) {
            if subscribed {
                entry.uris.insert(uri.to_owned());
            } else {
                entry.uris.remove(uri);
            }
        }
    }

    /// A new child: the subscriptions made through the old one are gone with it.
    pub(crate) fn forget_subscriptions(&self) {
        for entry in self.lock().values_mut() {
            entry.uris.clear();
        }
    }

    /// Every attached session with its standalone peer.
    pub(crate) fn peers(&self) -> Vec<(String, Arc<dyn ClientPeer>)> {
        let sessions = self.lock();
        sessions
            .iter()
            .map(|(s, e)| (s.clone(), e.peer.clone()))
            .collect()
    }

    /// The standalone peer of `sid`, when attached.
    pub(crate) fn peer(&self, sid: &str) -> Option<Arc<dyn ClientPeer>> {
        self.lock().get(sid).map(|e| e.peer.clone())
    }

    /// The sessions that subscribed to `uri` through the child, with their peers.
    pub(crate) fn subscribers(&self, uri: &str) -> Vec<(String, Arc<dyn ClientPeer>)> {
        let sessions = self.lock();
        sessions
            .iter()
            .filter(|(_, e)| e.uris.contains(uri))
            .map(|(s, e)| (s.clone(), e.peer.clone()))
            .collect()
    }

    /// The attached sessions' ids.
    pub(crate) fn sessions(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }
}
