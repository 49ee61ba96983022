//! rmcp's [`SessionStore`] on switchboard-store's session records.
//!
//! rmcp keeps one thing of a session outside the process: the client's `initialize` params
//! ([`SessionState`]), which a replica that does not know the session replays into a fresh
//! handler. Here they are the record's `initialize_params` (Redis: field `init` of the hash
//! `<prefix>:{<sid>}:s`, one key of the session's hash tag, expiring `idle_ttl` after the last
//! request). Loading a session counts as activity: it pushes that expiry.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};
use serde_json::Value;
use switchboard_protocol::SessionId;
use switchboard_store::{BeginOutcome, CreateOutcome, SessionRecord, Store};
use switchboard_telemetry::trace::logged_session;

use crate::error::Error;

/// The principal every session of this crate is bound to: rmcp gives a session manager no
/// authenticated identity, so sessions are not bound to one (the gateway binds them).
pub(crate) const PRINCIPAL: &str = "anonymous";

/// rmcp's session store on a switchboard store. Set it as
/// `StreamableHttpServerConfig::session_store` (as
/// [`crate::ReplicatedSessionManager::http_config`] does) so that a replica which does not hold a
/// session restores it instead of answering 404.
pub struct StoreSessions {
    store: Arc<dyn Store>,
    /// Sessions a `DELETE` ended while the store failed: their deletion is retried in the
    /// background; meanwhile this process treats them as gone.
    deleting: Arc<Mutex<HashSet<String>>>,
    /// How long a failed deletion is retried: as long as the session could live.
    retry_limit: Duration,
}

/// The longest pause between two tries of a failed deletion.
const DELETE_PAUSE_MAX: Duration = Duration::from_secs(5);

impl StoreSessions {
    /// The session store over `store`; a failed `delete` is retried for 30 minutes (the default
    /// `idle_ttl`).
    pub fn new(store: Arc<dyn Store>) -> StoreSessions {
        StoreSessions::with_retry_limit(store, Duration::from_secs(30 * 60))
    }

    /// The session store over `store`; a failed `delete` is retried for `limit` (a replica's
    /// uses its `idle_ttl`: after that the session has expired anyway).
    pub fn with_retry_limit(store: Arc<dyn Store>, limit: Duration) -> StoreSessions {
        StoreSessions {
            store,
            deleting: Arc::default(),
            retry_limit: limit,
        }
    }

    /// Whether a `DELETE` of `sid` here is still being retried (the session counts as gone).
    pub(crate) fn is_deleting(&self, sid: &str) -> bool {
        self.deleting.lock().contains(sid)
    }

    /// Retries the deletion of `sid` in the background until it succeeds or `retry_limit` passes.
    fn retry_delete(&self, sid: &str) {
        if !self.deleting.lock().insert(sid.to_owned()) {
            return;
        }
        let (store, deleting, limit) =
            (self.store.clone(), self.deleting.clone(), self.retry_limit);
        let sid = sid.to_owned();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + limit;
            let mut pause = Duration::from_millis(200);
            loop {
                tokio::time::sleep(pause).await;
                match store.delete_session(&sid).await {
                    Ok(_) => break,
                    Err(e) if tokio::time::Instant::now() + pause > deadline => {
                        tracing::error!(error = %e, session = %logged_session(&sid), "a DELETE could not reach the store before the session's idle TTL; it expires instead");
                        break;
                    }
                    Err(e) => tracing::debug!(error = %e, "retrying a DELETE"),
                }
                pause = (pause * 2).min(DELETE_PAUSE_MAX);
            }
            deleting.lock().remove(&sid);
        });
    }
}

/// A session record for `sid` with the client's `initialize` params and the negotiated
/// `revision`.
pub(crate) fn record(sid: &str, revision: String, params: Value) -> SessionRecord {
    let created_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    SessionRecord {
        id: sid.to_owned(),
        revision,
        initialize_params: Arc::new(params),
        initialized: false,
        log_level: None,
        subscriptions: Vec::new(),
        subscription_upstreams: Default::default(),
        principal: PRINCIPAL.to_owned(),
        upstream_sessions: Default::default(),
        owners: Default::default(),
        created_ms,
    }
}

/// Stores a new session record; [`Error::AtCapacity`] when the store's session cap refuses it.
pub(crate) async fn create(store: &dyn Store, record: &SessionRecord) -> Result<(), Error> {
    match store.create_session(record).await? {
        CreateOutcome::Created => Ok(()),
        CreateOutcome::AtCapacity | CreateOutcome::PrincipalAtCapacity => Err(Error::AtCapacity),
    }
}

#[async_trait::async_trait]
impl SessionStore for StoreSessions {
    /// The session's `initialize` params, touching the session (one round trip). `None` when the
    /// id is not one this crate issues (32 lower-case hex digits, so no store lookup), when the
    /// session is gone, or when it has no params (a scope of [`crate::StoreEvents`]).
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        if SessionId::parse(session_id).is_none() || self.is_deleting(session_id) {
            return Ok(None);
        }
        let record = match self
            .store
            .begin(session_id, None)
            .await
            .map_err(Error::from)?
        {
            BeginOutcome::Missing => return Ok(None),
            BeginOutcome::Ready(r) | BeginOutcome::Busy(r) => r,
            BeginOutcome::DuplicateId { record, .. } | BeginOutcome::Limited { record, .. } => {
                record
            }
        };
        if !record.initialize_params.is_object() {
            return Ok(None);
        }
        let params =
            serde_json::from_value((*record.initialize_params).clone()).map_err(Error::from)?;
        Ok(Some(SessionState::new(params)))
    }

    /// Stores the session unless it exists. [`crate::ReplicatedSessionManager`] has stored it
    /// already, when it answered `initialize` (so that its session cap can refuse the session);
    /// with another session manager this creates it. One round trip, two when it creates.
    ///
    /// # Errors
    /// The store failed, or refused a new session at its cap ([`Error::AtCapacity`]); rmcp only
    /// logs these, and the session then lives in one process.
    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        if self.store.exists(session_id).await.map_err(Error::from)? {
            return Ok(());
        }
        let params = &state.initialize_params;
        let revision = params.protocol_version.to_string();
        let value = serde_json::to_value(params).map_err(Error::from)?;
        create(self.store.as_ref(), &record(session_id, revision, value)).await?;
        Ok(())
    }

    /// Ends the session everywhere (rmcp calls this for `DELETE` only): every key of it is removed
    /// and every replica is told over the bus, which closes its streams and its handler there.
    ///
    /// rmcp answers `DELETE` 202 whatever this returns (it only logs an error), so a store that
    /// fails does not make the `DELETE` fail: it is retried in the background until it succeeds
    /// (for at most the retry limit, `idle_ttl` in a replica), and meanwhile this process
    /// answers 404 for the session. Other replicas cannot be told before the store answers
    /// again: they serve the session until the retry succeeds.
    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        if SessionId::parse(session_id).is_none() {
            return Ok(());
        }
        if let Err(e) = self.store.delete_session(session_id).await {
            tracing::warn!(error = %e, session = %logged_session(session_id), "DELETE could not reach the store; retrying in the background");
            self.retry_delete(session_id);
            return Err(Error::from(e).into());
        }
        Ok(())
    }
}
