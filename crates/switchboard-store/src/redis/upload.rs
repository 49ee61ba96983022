//! Large events reach the append script in pieces.
//!
//! An event's data passed as a script argument is copied three times inside the node on its way
//! to Redis (the invocation's arguments, the packed command, the connection's write buffer), so
//! one SSE answer of N bytes raised a node's memory high-water mark by about 5 × N (issue 34,
//! case C48; `tests/tests/caps_memory.rs`). Data over [`UPLOAD_OVER`] is therefore written first
//! to a key of its own, in pieces of [`PIECE`] bytes (`SET … PX` then `APPEND`, one round trip
//! each), in the session's hash slot, and the script reads it from there and deletes it
//! (`ARGV[14]`, its length in `ARGV[15]`). The node then holds the event once, plus one piece.
//!
//! The key lives [`UPLOAD_TTL_MS`] at most: an upload whose script never ran (the node died, the
//! store failed) is gone soon after. An upload a failover lost (the pieces reached a primary
//! that was then replaced) is found short by the script, which stores nothing and answers
//! [`LOST`]; the append uploads again (same append id, so a script that ran already is not
//! logged twice).

use ::redis::{cmd, Value};

use super::keys::SessionKeys;
use super::RedisStore;
use crate::error::StoreError;
use crate::traits::StoreResult;

/// Data larger than this (bytes) goes to Redis in pieces instead of as a script argument.
pub(crate) const UPLOAD_OVER: usize = 256 << 10;
/// One piece (bytes).
pub(crate) const PIECE: usize = 64 << 10;
/// How long an upload's key lives at most (ms).
const UPLOAD_TTL_MS: u64 = 60_000;
/// The append script's answer when the upload it was given is not whole.
pub(crate) const LOST: i64 = -1;
/// Uploads tried for one append before it fails.
pub(crate) const ATTEMPTS: usize = 3;

impl RedisStore {
    /// Writes `data` to a new key in `sk`'s hash slot, piece by piece, and returns the key.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when a piece could not be written.
    pub(crate) async fn upload(&self, sk: &SessionKeys, data: &str) -> StoreResult<String> {
        let key = [sk.base.as_str(), "up:", &crate::rules::new_append_id()].concat();
        let mut conn = self.conn.clone();
        let mut pieces = data.as_bytes().chunks(PIECE);
        let first = pieces.next().unwrap_or_default();
        cmd("SET")
            .arg(&key)
            .arg(first)
            .arg("PX")
            .arg(UPLOAD_TTL_MS)
            .query_async::<()>(&mut conn)
            .await?;
        for piece in pieces {
            cmd("APPEND")
                .arg(&key)
                .arg(piece)
                .query_async::<i64>(&mut conn)
                .await?;
        }
        Ok(key)
    }
}

/// Whether an append script's reply says its upload was lost.
pub(crate) fn lost(reply: &Value) -> bool {
    matches!(reply, Value::Int(LOST))
}

/// The error of an append whose upload was lost [`ATTEMPTS`] times.
pub(crate) fn kept_losing() -> StoreError {
    StoreError::Backend(format!(
        "a large event's upload was lost {ATTEMPTS} times before the append script read it \
         (failovers under way?)"
    ))
}
