//! The store's one error type.

/// A store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend could not be reached or answered with an error (Redis down, script error).
    #[error("store backend error: {0}")]
    Backend(String),
    /// A stored value could not be decoded (corrupt or written by an incompatible version).
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A write reached the primary but fewer replicas than `min_replicas_acked` confirmed it
    /// within `replicas_ack_timeout` (`WAIT`): it may be lost in a failover.
    #[error(
        "write confirmed by {acked} of the {wanted} replicas redis.min_replicas_acked requires"
    )]
    NotReplicated {
        /// Replicas that confirmed it.
        acked: u32,
        /// `min_replicas_acked`.
        wanted: u32,
    },
}

impl From<::redis::RedisError> for StoreError {
    fn from(e: ::redis::RedisError) -> Self {
        StoreError::Backend(e.to_string())
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}
