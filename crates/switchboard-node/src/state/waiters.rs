//! Server-to-client requests waiting for the client's answer ([`Waiters`]). The requests
//! running here are the runtime's ([`switchboard_runtime::Calls`], `AppState::replica`).
//!
//! Keys are (session id, request id key) where the key is
//! [`switchboard_protocol::RequestId::key`], so `"1"` and `1` stay apart (case C22).

use foldhash::HashMap;
use parking_lot::Mutex;

use serde_json::Value;
use tokio::sync::oneshot;

type Key = (String, String);

/// The server-issued requests of this node waiting for their client's answer.
#[derive(Default)]
pub struct Waiters(Mutex<HashMap<Key, oneshot::Sender<Value>>>);

impl Waiters {
    /// Waits for the client's answer to server-issued request `key` of session `sid`.
    pub fn wait(&self, sid: &str, key: &str) -> oneshot::Receiver<Value> {
        let (tx, rx) = oneshot::channel();
        self.0.lock().insert((sid.to_owned(), key.to_owned()), tx);
        rx
    }

    /// Hands the answer to its waiter; `false` when nobody here waits for it.
    pub fn answer(&self, sid: &str, key: &str, message: Value) -> bool {
        match self.0.lock().remove(&(sid.to_owned(), key.to_owned())) {
            Some(tx) => tx.send(message).is_ok(),
            None => false,
        }
    }

    /// Stops waiting (timeout or cancellation).
    pub fn stop(&self, sid: &str, key: &str) {
        self.0.lock().remove(&(sid.to_owned(), key.to_owned()));
    }

    /// Drops every waiter of a session (it ended): their receivers see the channel closed.
    pub fn end_session(&self, sid: &str) {
        self.0.lock().retain(|k, _| k.0 != sid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_reach_their_waiter_once() {
        let w = Waiters::default();
        let rx = w.wait("s", "\"s-1\"");
        assert!(w.answer("s", "\"s-1\"", serde_json::json!({"result": {}})));
        assert!(!w.answer("s", "\"s-1\"", serde_json::json!({})));
        assert_eq!(rx.await.unwrap(), serde_json::json!({"result": {}}));
    }

    #[tokio::test]
    async fn a_session_end_drops_its_waiters_only() {
        let w = Waiters::default();
        let ended = w.wait("s", "1");
        let other = w.wait("t", "1");
        w.end_session("s");
        assert!(ended.await.is_err());
        assert!(w.answer("t", "1", serde_json::json!({})));
        assert!(other.await.is_ok());
    }
}
