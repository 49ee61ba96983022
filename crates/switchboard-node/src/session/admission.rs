//! Loading a request's session and admitting the request against the store, in one round trip
//! ([`LoadedSession`], [`load`], [`admit`]), and a new session's record.

use axum::extract::FromRequestParts;
use http::request::Parts;
use serde_json::Value;
use switchboard_protocol::{Revision, SessionId};
use switchboard_store::{BeginOutcome, InflightRequest, SessionRecord, SessionUpdate};

use super::headers::named;
use super::lost::ended_lost_requests;
use super::principal::current_principal;
use crate::edge::error::HttpError;
use crate::limits::admission::Admit;
use crate::state::App;

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
        subscription_upstreams: Default::default(),
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
