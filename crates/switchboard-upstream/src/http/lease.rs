//! Who listens on the upstream's GET stream of a client session: exactly one node, holding the
//! lease `"<upstream>#get"` through [`crate::placement::Placement::owner`], and this process's
//! running listeners.
//!
//! Source: MCP 2025-11-25, basic/transports, Listening for Messages from the Server and
//! Resumability and Redelivery. The upstream sees one client (one GET stream per upstream
//! session) however many nodes serve the session; the lease moves when its holder's heartbeat
//! lapses, and the new holder resumes with the stored `Last-Event-ID` (see [`super::listen`]).
//!
//! The check is off the hot path: a request looks at the lease at most once per
//! [`CHECK_EVERY`] per client session in this process, and not at all while the session record
//! names this process's own running listener.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::lifecycle::Initialized;
use super::listen::{decode_position, End, Listener};
use super::session::{lease_name, UpstreamSession};
use super::HttpUpstream;
use crate::placement::Owner;
use crate::upstream::SessionHandle;
use switchboard_telemetry::trace::logged_session;

/// How often at most a client session's lease is checked by this process.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(5);
/// How many client sessions the check throttle remembers; past that it starts afresh.
const CHECKED_CAPACITY: usize = 4096;
/// How long stopping a listener may take before it is left to finish on its own.
const STOP_WAIT: Duration = Duration::from_secs(3);
/// How long a request that re-initialized the upstream session waits at most for the upstream
/// to answer the new session's GET before the request's own answer goes out (never more than
/// half the upstream's `timeout_ms`, so the request still answers within it).
pub(crate) const OPEN_WAIT: Duration = Duration::from_secs(3);

/// One running listener.
struct Running {
    generation: u64,
    upstream: UpstreamSession,
    /// The owner the session record names while this listener runs (learned from a request
    /// after the claim); `None` until known.
    owner_id: Option<String>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
    /// Becomes `true` once the upstream answered its first GET.
    answered: tokio::sync::watch::Receiver<bool>,
}

/// This process's listeners of one upstream, by client session id.
#[derive(Default)]
pub(crate) struct Listeners {
    running: Mutex<HashMap<String, Running>>,
    /// When each client session's lease was last checked, and for which upstream session.
    checked: Mutex<HashMap<String, (Option<String>, Instant)>>,
    generation: AtomicU64,
    /// The upstream answered 405 to a GET: it has no GET stream, never try again.
    pub no_get: Arc<AtomicBool>,
    closed: AtomicBool,
}

/// What a request finds about its session's listener in this process.
enum Found {
    /// Ours runs for this upstream session and the record names us: nothing to do.
    Ours,
    /// Ours runs for another upstream session (it was re-initialized): restart it.
    Stale,
    /// Ours runs but the record names someone else or nobody yet, or none runs.
    Check,
}

impl Listeners {
    /// Client sessions with a listener running in this process.
    pub fn sessions(&self) -> Vec<String> {
        self.running.lock().keys().cloned().collect()
    }

    fn find(&self, sid: &str, upstream: &UpstreamSession, recorded: Option<&str>) -> Found {
        match self.running.lock().get(sid) {
            Some(r) if !r.upstream.same(upstream) => Found::Stale,
            Some(r) if r.owner_id.is_some() && r.owner_id.as_deref() == recorded => Found::Ours,
            _ => Found::Check,
        }
    }

    /// Whether the lease of `sid` is due for a check (and marks it checked now): not checked
    /// within [`CHECK_EVERY`] for this very upstream session.
    fn due(&self, sid: &str, upstream: &UpstreamSession) -> bool {
        let mut checked = self.checked.lock();
        let recent =
            |(id, at): &(Option<String>, Instant)| *id == upstream.id && at.elapsed() < CHECK_EVERY;
        if checked.get(sid).is_some_and(recent) {
            return false;
        }
        if checked.len() >= CHECKED_CAPACITY {
            checked.retain(|_, (_, at)| at.elapsed() < CHECK_EVERY);
            if checked.len() >= CHECKED_CAPACITY {
                checked.clear();
            }
        }
        checked.insert(sid.to_owned(), (upstream.id.clone(), Instant::now()));
        true
    }

    /// Lets the next request check `sid` at once.
    fn forget_check(&self, sid: &str) {
        let mut checked = self.checked.lock();
        checked.remove(sid);
    }

    /// Whether a listener runs for `sid`.
    pub fn is_running(&self, sid: &str) -> bool {
        self.running.lock().contains_key(sid)
    }

    /// Stops the listener of `sid`, if any, and waits (a bounded time) until it stopped.
    pub async fn stop(&self, sid: &str) {
        let running = self.running.lock().remove(sid);
        self.forget_check(sid);
        if let Some(r) = running {
            r.cancel.cancel();
            let _ = tokio::time::timeout(STOP_WAIT, r.task).await;
        }
    }

    /// Stops every listener of upstream `name`; a later request starts one again where this
    /// node still holds the lease (the node was fenced: `Upstream::fenced`).
    pub async fn stop_for_fence(&self, name: &str) {
        let sessions = self.sessions();
        if !sessions.is_empty() {
            tracing::warn!(upstream = %name, listeners = sessions.len(), "fenced: stopping this node's listeners on the upstream's GET streams; the node that takes a lease over resumes it");
        }
        futures::future::join_all(sessions.iter().map(|sid| self.stop(sid))).await;
    }

    /// Stops every listener and refuses new ones.
    pub async fn stop_all(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let all: Vec<Running> = self.running.lock().drain().map(|(_, r)| r).collect();
        for r in &all {
            r.cancel.cancel();
        }
        let waits = all.into_iter().map(|r| r.task);
        let _ = tokio::time::timeout(STOP_WAIT, futures::future::join_all(waits)).await;
    }
}

impl HttpUpstream {
    /// Makes sure exactly one node listens on the upstream's GET stream of this client session
    /// (its upstream session is `upstream`): checks the lease at most once per [`CHECK_EVERY`],
    /// starts a listener here when this node holds it, stops ours when another node does.
    /// Without a standalone peer (outside a node) nothing listens; without placement (a single
    /// process) this process listens without a lease.
    pub(super) async fn ensure_listener(
        &self,
        session: &Arc<dyn SessionHandle>,
        upstream: &UpstreamSession,
    ) {
        let listeners = &self.listeners;
        if upstream.id.is_none()
            || listeners.no_get.load(Ordering::SeqCst)
            || listeners.closed.load(Ordering::SeqCst)
        {
            return;
        }
        let sid = session.session_id();
        let lease = lease_name(&self.name);
        let recorded = session.owner(&lease);
        match listeners.find(sid, upstream, recorded.as_deref()) {
            Found::Ours => return,
            Found::Stale => listeners.stop(sid).await,
            Found::Check => {}
        }
        if !listeners.due(sid, upstream) {
            return;
        }
        let here = match session.placement() {
            None => true,
            Some(placement) => match placement.owner(&**session, &lease).await {
                Ok(Owner::Here) => true,
                Ok(Owner::Node(_)) => false,
                Err(e) => {
                    tracing::info!(upstream = %self.name, session = %logged_session(sid), error = %e.message, "could not check who listens on the upstream's GET stream");
                    return;
                }
            },
        };
        if !here {
            // Another live node holds the lease (ours lapsed meanwhile, or never was).
            if listeners.is_running(sid) {
                tracing::info!(upstream = %self.name, session = %logged_session(sid), "another node holds the upstream's GET stream now; stopping ours");
                listeners.stop(sid).await;
            }
            return;
        }
        self.start_listener(session, upstream, recorded);
    }

    /// Right after a request found its upstream session lost and got `fresh` in its place. When
    /// this request recorded it (`fresh.won`), this node takes the lease of the upstream's GET
    /// stream in the store (whoever held it listened on the old session, which is gone; its
    /// listener stops on the 404, when the endpoint no longer resolves, or when it sees the
    /// lease elsewhere) and opens the stream of the new session now, waiting until the upstream
    /// answered that GET (at most [`OPEN_WAIT`], and half the upstream's `timeout_ms`), so no
    /// notification the upstream sends once the request has answered is missed (case C06).
    /// When another request recorded it first, that one's node listens: this node only stops
    /// its own listener of the old session. A node whose claim of the lease loses (the record
    /// changed since it was loaded) stops its listener too, so one node listens. Without a
    /// standalone peer nothing listens.
    pub(super) async fn listen_after_reinitialize(
        &self,
        session: &Arc<dyn SessionHandle>,
        fresh: &Initialized,
    ) {
        let listeners = &self.listeners;
        let sid = session.session_id();
        if matches!(listeners.find(sid, &fresh.session, None), Found::Stale) {
            listeners.stop(sid).await;
        }
        if !fresh.won
            || fresh.session.id.is_none()
            || listeners.no_get.load(Ordering::SeqCst)
            || listeners.closed.load(Ordering::SeqCst)
        {
            return;
        }
        let fresh = &fresh.session;
        let lease = lease_name(&self.name);
        if let Some(placement) = session.placement() {
            match placement.take(&**session, &lease).await {
                Ok(Owner::Here) => {}
                Ok(Owner::Node(n)) => {
                    tracing::info!(upstream = %self.name, session = %logged_session(sid), node = n, "another node took the upstream's GET stream of the new session");
                    listeners.stop(sid).await;
                    return;
                }
                Err(e) => {
                    tracing::info!(upstream = %self.name, session = %logged_session(sid), error = %e.message, "could not take the upstream's GET stream of the new session");
                    return;
                }
            }
        }
        listeners.forget_check(sid);
        let Some(mut answered) = self.start_listener(session, fresh, None) else {
            return;
        };
        let wait = OPEN_WAIT.min(self.timeout / 2);
        let opened = tokio::time::timeout(wait, answered.wait_for(|done| *done)).await;
        if opened.is_err() {
            tracing::info!(upstream = %self.name, session = %logged_session(sid), wait_ms = wait.as_millis() as u64,
                "the upstream has not answered the new session's GET yet; answering the request anyway");
        }
    }

    /// Starts the listener of `session` unless one runs; records `owner_id` on a running one.
    /// Answers what becomes `true` once the upstream answered the listener's first GET (`None`
    /// when nothing listens: no standalone peer).
    fn start_listener(
        &self,
        session: &Arc<dyn SessionHandle>,
        upstream: &UpstreamSession,
        owner_id: Option<String>,
    ) -> Option<tokio::sync::watch::Receiver<bool>> {
        let sid = session.session_id().to_owned();
        let mut running = self.listeners.running.lock();
        if let Some(r) = running.get_mut(&sid) {
            if owner_id.is_some() {
                r.owner_id = owner_id;
            }
            return Some(r.answered.clone());
        }
        let peer = session.standalone_peer()?;
        let (answered_tx, answered) = tokio::sync::watch::channel(false);
        let last_event_id = session
            .upstream_session(&lease_name(&self.name))
            .and_then(|stored| decode_position(upstream, &stored));
        let cancel = CancellationToken::new();
        let generation = self.listeners.generation.fetch_add(1, Ordering::SeqCst);
        let listener = Listener {
            wire: self.wire.clone(),
            name: self.name.clone(),
            upstream: upstream.clone(),
            session: session.clone(),
            peer,
            cancel: cancel.clone(),
            last_event_id,
            no_get: self.listeners.no_get.clone(),
            answered: answered_tx,
        };
        tracing::info!(upstream = %self.name, session = %logged_session(&sid), resume_after = ?listener.last_event_id, "listening on the upstream's GET stream for this session");
        let listeners = Arc::downgrade(&self.listeners);
        let key = sid.clone();
        let task = tokio::spawn(async move {
            let end = listener.run().await;
            // Forget it (unless it was replaced meanwhile); after a 404 the next request checks
            // at once and listens on the new upstream session.
            if let Some(listeners) = listeners.upgrade() {
                let mut running = listeners.running.lock();
                if running
                    .get(&sid)
                    .is_some_and(|r| r.generation == generation)
                {
                    running.remove(&sid);
                }
                drop(running);
                if end == End::Gone {
                    listeners.forget_check(&sid);
                }
            }
        });
        running.insert(
            key,
            Running {
                generation,
                upstream: upstream.clone(),
                owner_id,
                cancel,
                task,
                answered: answered.clone(),
            },
        );
        Some(answered)
    }
}
