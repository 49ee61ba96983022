//! Requests running on this node, the rule they run under, and server-to-client requests
//! waiting for the client's answer.
//!
//! - [`Calls`]: the bookkeeping. Keys are (session id, request id key) where the key is
//!   [`switchboard_protocol::RequestId::key`], so `"1"` and `1` stay apart (case C22).
//! - [`until_cancelled`]: ending a running request when it is cancelled
//!   (`notifications/cancelled`, the end of its session, a closed 2026-07-28 stream) without
//!   dropping its upstream call mid-way: the one rule every transport's call runs under.

use foldhash::HashMap;
use parking_lot::Mutex;

use serde_json::Value;
use switchboard_protocol::codes;
use switchboard_upstream::RpcError;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

type Key = (String, String);

/// Local bookkeeping of running calls and pending server requests.
#[derive(Default)]
pub struct Calls {
    running: Mutex<HashMap<Key, CancellationToken>>,
    waiters: Mutex<HashMap<Key, oneshot::Sender<Value>>>,
    sessions: Mutex<HashMap<String, CancellationToken>>,
}

impl Calls {
    /// Registers a running client request; its token fires on cancellation.
    pub fn start(&self, sid: &str, key: &str) -> CancellationToken {
        let token = CancellationToken::new();
        self.running
            .lock()
            .insert((sid.to_owned(), key.to_owned()), token.clone());
        token
    }

    /// Like [`Calls::start`], unless a request with the same id already runs here in the session:
    /// then `None` (a duplicate in-flight id, case C22), and nothing changes.
    pub fn try_start(&self, sid: &str, key: &str) -> Option<CancellationToken> {
        match self.running.lock().entry((sid.to_owned(), key.to_owned())) {
            std::collections::hash_map::Entry::Occupied(_) => None,
            std::collections::hash_map::Entry::Vacant(v) => {
                Some(v.insert(CancellationToken::new()).clone())
            }
        }
    }

    /// The request finished.
    pub fn end(&self, sid: &str, key: &str) {
        self.running
            .lock()
            .remove(&(sid.to_owned(), key.to_owned()));
    }

    /// Cancels a running request; `false` when it does not run here.
    pub fn cancel(&self, sid: &str, key: &str) -> bool {
        match self.running.lock().get(&(sid.to_owned(), key.to_owned())) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// A token that fires when the session ends on this node (for work not tied to a request,
    /// e.g. an upstream's standalone stream).
    pub fn session_token(&self, sid: &str) -> CancellationToken {
        self.sessions
            .lock()
            .entry(sid.to_owned())
            .or_default()
            .clone()
    }

    /// Cancels every request of a session and drops its waiters (the session ended).
    pub fn end_session(&self, sid: &str) {
        if let Some(t) = self.sessions.lock().remove(sid) {
            t.cancel();
        }
        for (k, t) in self.running.lock().iter() {
            if k.0 == sid {
                t.cancel();
            }
        }
        self.waiters.lock().retain(|k, _| k.0 != sid);
    }

    /// Sessions with a request running here.
    pub fn sessions(&self) -> Vec<String> {
        let mut v: Vec<String> = self.running.lock().keys().map(|k| k.0.clone()).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Number of requests running here.
    pub fn running_count(&self) -> usize {
        self.running.lock().len()
    }

    /// Waits for the client's answer to server-issued request `key`.
    pub fn add_waiter(&self, sid: &str, key: &str) -> oneshot::Receiver<Value> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .insert((sid.to_owned(), key.to_owned()), tx);
        rx
    }

    /// Hands the answer to its waiter; `false` when nobody here waits for it.
    pub fn answer(&self, sid: &str, key: &str, message: Value) -> bool {
        match self
            .waiters
            .lock()
            .remove(&(sid.to_owned(), key.to_owned()))
        {
            Some(tx) => tx.send(message).is_ok(),
            None => false,
        }
    }

    /// Stops waiting (timeout or cancellation).
    pub fn remove_waiter(&self, sid: &str, key: &str) {
        self.waiters
            .lock()
            .remove(&(sid.to_owned(), key.to_owned()));
    }
}

/// How long a cancelled request's upstream call may take to wind down (tell its server, e.g. a
/// stdio child or another node, with `notifications/cancelled`) before it is dropped.
pub const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `work` to its end, unless `cancel` fires: then `work` gets [`CANCEL_GRACE`] to notice the
/// cancellation itself (upstreams watch the same token and pass it on), and the outcome is the
/// cancellation error either way. Dropping `work` at once would skip that hand-on.
pub async fn until_cancelled<F>(work: F, cancel: &CancellationToken) -> Result<Value, RpcError>
where
    F: std::future::Future<Output = Result<Value, RpcError>>,
{
    tokio::pin!(work);
    tokio::select! {
        r = &mut work => r,
        _ = cancel.cancelled() => {
            let _ = tokio::time::timeout(CANCEL_GRACE, &mut work).await;
            Err(RpcError::new(codes::REQUEST_ABORTED, "request cancelled"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_and_number_ids_are_distinct_calls() {
        let c = Calls::default();
        let a = c.start("s", "\"1\"");
        let b = c.start("s", "1");
        assert!(c.cancel("s", "1"));
        assert!(b.is_cancelled() && !a.is_cancelled());
        c.end_session("s");
        assert!(a.is_cancelled());
    }

    #[tokio::test]
    async fn answers_reach_their_waiter_once() {
        let c = Calls::default();
        let rx = c.add_waiter("s", "\"s-1\"");
        assert!(c.answer("s", "\"s-1\"", serde_json::json!({"result": {}})));
        assert!(!c.answer("s", "\"s-1\"", serde_json::json!({})));
        assert_eq!(rx.await.unwrap(), serde_json::json!({"result": {}}));
    }
}
