//! The session a request names: reading `Mcp-Session-Id`, loading and admitting it against the
//! store ([`LoadedSession`], [`admit`], [`load`]), ending requests lost with a dead node, and
//! [`NodeSession`], the node's [`SessionHandle`]: an upstream's view of the client session,
//! backed by the session record in the store so every node sees the same upstream session ids.
//! Creating a session is [`initialize`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use axum::extract::FromRequestParts;
use http::request::Parts;
use http::HeaderMap;
use serde_json::Value;
use switchboard_protocol::{headers, Revision, SessionId};
use switchboard_store::{
    BeginOutcome, InflightEntry, InflightRequest, SessionRecord, SessionUpdate, UpstreamSwap,
};
use switchboard_upstream::placement::Placement;
use switchboard_upstream::{ClientPeer, LocalSession, Principal, SessionHandle};

use crate::cluster::ownership::NodePlacement;
use crate::edge::error::HttpError;
use crate::exec::client_peer::{NodePeer, Route};
use crate::exec::outage::{call_wait, Deadline, Sequence};
pub(crate) use crate::limits::admission::Admit;
use crate::state::App;
use switchboard_telemetry::trace::logged_session;

pub mod initialize;

/// The `Mcp-Session-Id` header: 400 when absent or sent twice; 404 when it cannot be one of ours
/// (never touches the store then).
pub fn session_id(h: &HeaderMap) -> Result<SessionId, HttpError> {
    let raw = crate::edge::header_checks::single(h, headers::MCP_SESSION_ID)?
        .ok_or(HttpError::MissingSession)?;
    raw.to_str()
        .ok()
        .and_then(SessionId::parse)
        .ok_or(HttpError::UnknownSession)
}

// The principal a request runs as, and the sessions it may use. The authentication layer
// (`app.rs`, layer 3) sets it for the rest of the request; every session is bound to the
// principal that created it (MCP 2025-11-25 security best practices, Session Hijacking).

/// The principal of every session when authorization is off.
pub use switchboard_upstream::principal::ANONYMOUS;

tokio::task_local! {
    static PRINCIPAL: Arc<Principal>;
}

/// The principal of the request being handled: the one the auth layer set, else
/// [`Principal::anonymous`] (authorization off).
pub fn current() -> Arc<Principal> {
    PRINCIPAL
        .try_with(Clone::clone)
        .unwrap_or_else(|_| Principal::anonymous())
}

/// The text the request's principal binds sessions to ([`Principal::id`]; [`ANONYMOUS`] when
/// authorization is off).
pub fn current_principal() -> String {
    PRINCIPAL
        .try_with(|p| p.id.clone())
        .unwrap_or_else(|_| ANONYMOUS.to_owned())
}

/// Whether the request being handled may use a session bound to `principal`.
pub fn may_use(principal: &str) -> bool {
    PRINCIPAL
        .try_with(|p| p.id == principal)
        .unwrap_or(principal == ANONYMOUS)
}

/// Runs `fut` (the rest of the request) as `principal`.
pub async fn with_principal<F: std::future::Future>(
    principal: Arc<Principal>,
    fut: F,
) -> F::Output {
    PRINCIPAL.scope(principal, fut).await
}

/// The headers of a request to an existing session: `Mcp-Session-Id` ([`session_id`]: 400 when
/// absent, 404 when malformed), then the format of `MCP-Protocol-Version` (400; MCP 2025-11-25,
/// basic/transports, Protocol Version Header). Touches no store.
pub fn named(h: &HeaderMap) -> Result<SessionId, HttpError> {
    let sid = session_id(h)?;
    crate::edge::header_checks::protocol_version(h)?;
    Ok(sid)
}

/// Extractor: the session a request names, loaded and touched in one store round trip
/// ([`named`], then [`load`]); 404 for a missing session or another principal's. A handler
/// that takes it runs only with a session. A POST loads its session itself, after its body
/// said whether it needs one (`initialize` and 2026-07-28 requests do not) and with the
/// request's id for admission ([`admit`]).
pub struct LoadedSession(pub SessionRecord);

impl FromRequestParts<App> for LoadedSession {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, HttpError> {
        let sid = named(&parts.headers)?;
        let record = load(app, &sid, None).await?.unwrap_or_else(|(r, _)| r);
        Ok(LoadedSession(record))
    }
}

/// Why a request was not registered although its session exists.
#[derive(Debug, Clone, PartialEq)]
pub enum NotAdmitted {
    /// A request with the same id is already in flight in the session (case C22).
    DuplicateId,
    /// The session already has `session.max_inflight` requests in flight.
    Busy,
    /// A rate limit (`rate_limits`) refused it ([`crate::limits`]).
    Limited {
        /// The limit's name.
        limit: String,
        /// Milliseconds until it would pass.
        retry_after_ms: u64,
    },
}

/// What loading a session for a request found: the record, or the record and why the request is
/// refused.
pub type Loaded = Result<SessionRecord, (SessionRecord, NotAdmitted)>;

/// Loads and touches the session (one store round trip), registering `inflight` if given. A
/// request the store would not register comes back as `Ok(Err((record, why)))`.
pub async fn load(
    app: &App,
    sid: &SessionId,
    inflight: Option<&InflightRequest>,
) -> Result<Loaded, HttpError> {
    let outcome = app.store.begin(sid.as_str(), inflight).await?;
    if ended_lost_requests(app, sid, &outcome).await? {
        return loaded(app.store.begin(sid.as_str(), inflight).await?);
    }
    loaded(outcome)
}

/// [`load`] that also applies `update` to the record, in the same store round trip, when the
/// request's principal may use the session (for `notifications/initialized`). Never a request,
/// so nothing is refused but the session itself (missing, or another principal's: 404).
pub async fn load_updating(
    app: &App,
    sid: &SessionId,
    update: SessionUpdate,
) -> Result<SessionRecord, HttpError> {
    let principal = current_principal();
    let outcome = app.store.begin_update(sid.as_str(), &principal, update);
    Ok(loaded(outcome.await?)?.unwrap_or_else(|(r, _)| r))
}

/// The admission of every request of a session, whatever its transport: loads and touches the
/// session and checks the request (duplicate id, in-flight cap, then its rate limits,
/// [`crate::limits`]) in one store round trip (Redis Cluster: the limits' scripts at the same
/// time). `admit` says whether it registers in flight too: a POST's request does not (the hot
/// path: it registers later, only if its answer is not ready at once, see
/// `ResponseStream::register`); a batch member's, a legacy HTTP+SSE or a WebSocket request does
/// (`exec::call::start_call`). `method` and `raw` choose the limits.
pub(crate) async fn admit(
    app: &App,
    sid: &SessionId,
    admit: Admit<'_>,
    method: &str,
    raw: &Value,
) -> Result<Loaded, HttpError> {
    let rates = app
        .cfg
        .rate_limits
        .rates_for(&current_principal(), method, raw);
    let check = crate::limits::admission::check;
    let outcome = check(app, sid.as_str(), admit, &rates).await?;
    if ended_lost_requests(app, sid, &outcome).await? {
        return loaded(check(app, sid.as_str(), admit, &rates).await?);
    }
    loaded(outcome)
}

pub use switchboard_runtime::liveness::lost_request_event;

/// A refusal may come from requests lost with a node that has died since: a session at
/// `session.max_inflight` full of them (they would hold their slots until the session ends),
/// or the request's id still held by one (it would be refused as a duplicate for the rest of the
/// session). Those are ended ([`end_lost_requests`]); `true` when one was (the caller asks
/// again). Only for the session's own principal; a duplicate held by a live node is left alone.
async fn ended_lost_requests(
    app: &App,
    sid: &SessionId,
    outcome: &BeginOutcome,
) -> Result<bool, HttpError> {
    let (record, holder) = match outcome {
        BeginOutcome::Busy(record) => (record, None),
        BeginOutcome::DuplicateId { record, node } => (record, Some(node)),
        _ => return Ok(false),
    };
    if !crate::session::may_use(&record.principal) {
        return Ok(false);
    }
    if let Some(node) = holder {
        if node == app.node_id() || app.store.is_alive(node).await? {
            return Ok(false);
        }
    }
    Ok(end_lost_requests(app, sid.as_str(), holder.map(String::as_str)).await? > 0)
}

/// Ends every request of the session registered in flight on a node that has died: each gets
/// [`lost_request_event`] as the final event of its stream (a request answered on the session's
/// standalone stream, sent on the legacy HTTP+SSE transport or over a WebSocket, gets it there,
/// the only stream its client reads: see `abort_running`), and its in-flight entry is removed.
/// `known_dead` is a node the caller has just found dead (not asked again). Returns how many
/// entries of dead nodes it found (ended here, or meanwhile by another node). One store round
/// trip to list them, one per distinct other node to ask its liveness, one per request ended
/// (two when another node ended it first).
pub async fn end_lost_requests(
    app: &App,
    sid: &str,
    known_dead: Option<&str>,
) -> Result<usize, HttpError> {
    let mut dead: HashMap<String, bool> = known_dead
        .map(|n| (n.to_owned(), true))
        .into_iter()
        .collect();
    let mut ended = 0;
    for entry in app.store.in_flight(sid).await? {
        if entry.node == app.node_id() {
            continue;
        }
        let is_dead = match dead.get(&entry.node) {
            Some(d) => *d,
            None => {
                let d = !app.store.is_alive(&entry.node).await?;
                dead.insert(entry.node.clone(), d);
                d
            }
        };
        if is_dead {
            end_lost_request(app, sid, &entry).await?;
            ended += 1;
        }
    }
    Ok(ended)
}

/// [`end_lost_requests`] from a stream's periodic work: failures are logged, not returned.
pub async fn end_lost_requests_logged(app: &App, sid: &str) {
    if let Err(e) = end_lost_requests(app, sid, None).await {
        tracing::warn!(error = %e, session = %logged_session(sid), "could not look for requests lost with a dead node");
    }
}

/// Ends one request lost with its dead node (see [`end_lost_requests`]); when it has already
/// ended (another node got there first), only removes its entry if that is still as listed.
async fn end_lost_request(app: &App, sid: &str, entry: &InflightEntry) -> Result<(), HttpError> {
    let data = lost_request_event(&entry.request_key, &entry.node);
    let aborted = app
        .store
        .abort_running(sid, &entry.stream, &entry.node, &data)
        .await?;
    if aborted.is_none() {
        // Ended meanwhile (here or by another node): drop the entry only if it is still the one
        // listed; the client may already have sent the id again.
        app.store.forget_in_flight(sid, entry).await?;
        return Ok(());
    }
    switchboard_runtime::liveness::count_aborted(sid, &entry.stream, &entry.node);
    Ok(())
}

fn loaded(outcome: BeginOutcome) -> Result<Loaded, HttpError> {
    let loaded = match outcome {
        BeginOutcome::Missing => return Err(HttpError::UnknownSession),
        BeginOutcome::Ready(r) => Ok(r),
        BeginOutcome::DuplicateId { record, .. } => Err((record, NotAdmitted::DuplicateId)),
        BeginOutcome::Busy(record) => Err((record, NotAdmitted::Busy)),
        BeginOutcome::Limited {
            record,
            limit,
            retry_after_ms,
        } => Err((
            record,
            NotAdmitted::Limited {
                limit,
                retry_after_ms,
            },
        )),
    };
    // A session bound to another principal is "not found", never revealed (C34; MCP 2025-11-25
    // security best practices, Session Hijacking), checked on the record loaded anyway.
    let (Ok(record) | Err((record, _))) = &loaded;
    if !crate::session::may_use(&record.principal) {
        return Err(HttpError::UnknownSession);
    }
    Ok(loaded)
}

/// A new session's record: revision `revision`, the client's `initialize` params (`null` until a
/// legacy SSE client sends them), bound to the request's principal ("anonymous" when
/// authorization is off, see [`crate::edge::auth`]), created now.
pub fn new_record(
    sid: &SessionId,
    revision: &str,
    initialize_params: std::sync::Arc<serde_json::Value>,
) -> SessionRecord {
    SessionRecord {
        id: sid.to_string(),
        revision: revision.to_owned(),
        initialize_params,
        initialized: false,
        log_level: None,
        subscriptions: Vec::new(),
        principal: crate::session::current_principal(),
        upstream_sessions: Default::default(),
        owners: Default::default(),
        created_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    }
}

/// The session's revision, parsed (records only hold revisions we speak).
pub fn revision(record: &SessionRecord) -> Revision {
    Revision::parse(&record.revision).unwrap_or(Revision::LATEST)
}

/// A session record loaded for one request: the in-process view ([`LocalSession`]) plus what
/// only a node knows (owners, log level), writing upstream session ids through to the store.
pub struct NodeSession {
    local: LocalSession,
    owners: BTreeMap<String, String>,
    log_level: Option<String>,
    app: App,
    /// Set when an upstream asked to end the session during a request: the request's runner
    /// ends it once the answer went out ([`end_now`]). `None` outside a request: at once.
    ending: Option<Arc<OnceLock<String>>>,
}

impl NodeSession {
    /// Wraps a loaded record for one request: [`SessionHandle::end_session`] only records the
    /// reason in `ending`, for the runner to end the session after the answer.
    pub fn for_request(
        record: &SessionRecord,
        app: &App,
        ending: Arc<OnceLock<String>>,
    ) -> Arc<NodeSession> {
        let mut session = NodeSession::build(record, app);
        session.ending = Some(ending);
        Arc::new(session)
    }

    /// Wraps a loaded record.
    pub fn new(record: &SessionRecord, app: &App) -> Arc<NodeSession> {
        Arc::new(NodeSession::build(record, app))
    }

    fn build(record: &SessionRecord, app: &App) -> NodeSession {
        let local = LocalSession::with_upstream_sessions(
            record.id.clone(),
            record.initialize_params.clone(),
            record.upstream_sessions.clone(),
        );
        NodeSession {
            local,
            owners: record.owners.clone(),
            log_level: record.log_level.clone(),
            app: app.clone(),
            ending: None,
        }
    }
}

/// Ends session `sid` cluster-wide on an upstream's request, over the same path as DELETE (the
/// store removes every key and tells every node, which close its streams, stop its calls and
/// delete its upstream sessions).
pub async fn end_now(app: &App, sid: &str, reason: &str) -> Result<(), String> {
    match app.store.delete_session(sid).await {
        Ok(existed) => {
            if existed {
                tracing::warn!(
                    session = %logged_session(sid),
                    reason,
                    "ended the session on an upstream's request"
                );
                crate::telemetry::session_deleted(sid);
            }
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

#[async_trait]
impl SessionHandle for NodeSession {
    fn session_id(&self) -> &str {
        self.local.session_id()
    }

    fn initialize_params(&self) -> &Value {
        self.local.initialize_params()
    }

    fn owner(&self, upstream: &str) -> Option<String> {
        self.owners.get(upstream).cloned()
    }

    fn standalone_peer(&self) -> Option<Arc<dyn ClientPeer>> {
        let sid = self.session_id().to_owned();
        let peer = NodePeer {
            app: self.app.clone(),
            sid: sid.clone(),
            capabilities: Arc::new(
                self.initialize_params()
                    .get("capabilities")
                    .cloned()
                    .unwrap_or_default(),
            ),
            log_level: self.log_level.clone(),
            route: Route::Standalone,
            // Ends with the session on this node (the dispatcher ends its calls).
            cancel: self.app.calls.session_token(&sid),
            no_requests: None,
            // Not a call's: each message may wait for the store as long as a call of the
            // upstream may take.
            sequence: Arc::new(Sequence::new(Deadline::Each(call_wait(&self.app)))),
        };
        Some(Arc::new(peer))
    }

    fn placement(&self) -> Option<Arc<dyn Placement>> {
        Some(Arc::new(NodePlacement::new(self.app.clone())))
    }

    fn upstream_session(&self, upstream: &str) -> Option<String> {
        self.local.upstream_session(upstream)
    }

    /// Written to the session record first (so every node sees it), then to this view.
    async fn set_upstream_session(&self, upstream: &str, id: Option<String>) -> Result<(), String> {
        let update = SessionUpdate::UpstreamSession {
            upstream: upstream.to_owned(),
            session_id: id.clone(),
        };
        match self.app.store.update(self.session_id(), update).await {
            Ok(true) => self.local.set_upstream_session(upstream, id).await,
            Ok(false) => Err("the client session has ended".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// One store round trip; on a lost race this view takes the entries as stored.
    async fn swap_upstream_sessions(
        &self,
        upstream: &str,
        expected: Option<&str>,
        entries: Vec<(String, Option<String>)>,
    ) -> Result<bool, String> {
        let sid = self.session_id();
        let swap = self
            .app
            .store
            .swap_upstream_sessions(sid, upstream, expected, entries.clone())
            .await
            .map_err(|e| e.to_string())?;
        match swap {
            UpstreamSwap::Swapped => {
                for (name, id) in entries {
                    self.local.set_upstream_session(&name, id).await?;
                }
                Ok(true)
            }
            UpstreamSwap::Changed(current) => {
                let names = entries.into_iter().map(|(n, _)| n);
                for name in names.chain(std::iter::once(upstream.to_owned())) {
                    let value = current.get(&name).cloned();
                    self.local.set_upstream_session(&name, value).await?;
                }
                Ok(false)
            }
            UpstreamSwap::Missing => Err("the client session has ended".into()),
        }
    }

    async fn end_session(&self, reason: &str) -> Result<(), String> {
        match &self.ending {
            Some(ending) => {
                let _ = ending.set(reason.to_owned());
                Ok(())
            }
            None => end_now(&self.app, self.session_id(), reason).await,
        }
    }
}

#[cfg(test)]
mod principal_tests {
    use super::*;

    #[tokio::test]
    async fn principal_runs_with_the_request() {
        assert_eq!(current_principal(), ANONYMOUS);
        assert!(may_use(ANONYMOUS));
        assert!(!may_use(r#"["i","alice"]"#));
        let alice = Arc::new(Principal {
            id: r#"["i","alice"]"#.to_owned(),
            name: "alice".to_owned(),
            scopes: vec!["mcp:tools".to_owned()],
        });
        with_principal(alice, async {
            assert_eq!(current().scopes, ["mcp:tools"]);
            assert_eq!(current_principal(), r#"["i","alice"]"#);
            assert!(may_use(r#"["i","alice"]"#));
            assert!(!may_use(r#"["i","bob"]"#));
            assert!(!may_use(ANONYMOUS));
        })
        .await;
    }
}
