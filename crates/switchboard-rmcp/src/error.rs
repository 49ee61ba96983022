//! The crate's one error type.
//!
//! rmcp's `StreamableHttpService` turns every error of a session manager into HTTP 500 (and
//! logs it), except in `resume`, where it answers 200 with an empty stream; errors of its
//! session store are logged and otherwise ignored on `store` and `delete`, and answer 500 on
//! `load`. So no variant here has a status of its own: the doc of each says where it comes up.

use rmcp::transport::streamable_http_server::session::local::LocalSessionManagerError;
use switchboard_store::eviction::EvictionRefused;
use switchboard_store::StoreError;

/// What went wrong in a replica.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting a replica cannot run with ([`crate::ReplicatedConfig::validate`]).
    #[error("invalid setting: {0}")]
    Config(String),
    /// The store failed (Redis unreachable, a script error, corrupt data).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store could not be opened at start ([`crate::ReplicatedSessionManager::open`]):
    /// Redis unreachable, a URL that does not parse, credentials refused. `at` names the Redis
    /// given (URLs with any password shown as `***`).
    #[error("cannot open the store at {at}: {source}")]
    Open {
        /// The standalone URL, or the sentinels' or cluster seeds' URLs.
        at: String,
        /// Why.
        source: StoreError,
    },
    /// Redis's `maxmemory-policy` may evict keys and [`crate::ReplicatedConfig::eviction`]
    /// does not allow it: the constructors refuse to start the replica. The message names the
    /// Redis setting to change and the opt-in.
    #[error(transparent)]
    Eviction(#[from] EvictionRefused),
    /// rmcp's in-process session layer failed (the session's worker ended, a closed channel).
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// The session is not in the store any more (deleted, expired or reaped) although this
    /// replica still held it; it is closed here too.
    #[error("the session no longer exists")]
    SessionGone,
    /// A client's answer to a server-to-client request whose replica stopped (its heartbeat
    /// lapsed): the request that asked was lost with it, and nobody takes the answer. rmcp
    /// answers the `POST` that carried it with 500 (the client hears it at once rather than
    /// waiting on a call that can no longer end).
    #[error(
        "the request this answer was for was lost: replica {node}, which waited for it, stopped"
    )]
    AnswerLost {
        /// That replica.
        node: String,
    },
    /// `initialize` was refused: the store holds `max_sessions` sessions (rmcp answers 500).
    #[error("the session cap is reached: no new session now")]
    AtCapacity,
    /// A `Last-Event-ID` this crate did not issue, or whose stream the session does not know
    /// (rmcp answers the resumption with an empty stream).
    #[error("unknown event id: {0}")]
    EventId(String),
    /// rmcp's in-process layer answered something it never should (a fresh session id already
    /// in use).
    #[error("internal error: {0}")]
    Internal(String),
    /// A message could not be encoded or decoded as JSON.
    #[error("message encoding: {0}")]
    Json(#[from] serde_json::Error),
}
