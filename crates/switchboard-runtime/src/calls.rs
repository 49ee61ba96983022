//! The calls running on this replica ([`Calls`]): what a cancellation reaches, what the session
//! keep-alive must not let expire, what a drain waits for, and which of this replica's in-flight
//! entries in the store still have a call behind them (one without is lost: [`crate::lost`]).
//!
//! A call is keyed by (session id, request id key), the key being
//! [`switchboard_protocol::RequestId::key`], so `"1"` and `1` stay apart (case C22). A host
//! starts a call **before** the store registers it in flight and ends it only **after** the
//! store has its final event, so an entry of this replica with no call here has none anywhere.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use foldhash::HashMap;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

type Key = (String, String);

/// One running call: its cancellation, and the stream its in-flight entry names, when it has one.
struct Call {
    cancel: CancellationToken,
    stream: Option<String>,
}

/// The calls running here, and the sessions with work here that is not a call (an upstream's
/// standalone stream: [`Calls::session_token`]).
#[derive(Default)]
pub struct Calls {
    running: Mutex<HashMap<Key, Call>>,
    sessions: Mutex<HashMap<String, CancellationToken>>,
    /// Told when the last running call ends.
    idle: Notify,
}

impl Calls {
    /// Counts request `key` of session `sid` as running here until [`Calls::end`]; its token
    /// fires on cancellation. Replaces a call with the same key (one started by a peer replica's
    /// forward, whose id the origin has already admitted).
    pub fn start(&self, sid: &str, key: &str) -> CancellationToken {
        let cancel = CancellationToken::new();
        let call = Call {
            cancel: cancel.clone(),
            stream: None,
        };
        self.running
            .lock()
            .insert((sid.to_owned(), key.to_owned()), call);
        cancel
    }

    /// Like [`Calls::start`] for a call whose in-flight entry (if it gets one) names `stream`,
    /// unless a request with the same id already runs here in the session: then `None` (a
    /// duplicate in-flight id, case C22), and nothing changes.
    pub fn try_start(&self, sid: &str, key: &str, stream: &str) -> Option<CancellationToken> {
        match self.running.lock().entry((sid.to_owned(), key.to_owned())) {
            Entry::Occupied(_) => None,
            Entry::Vacant(v) => {
                let cancel = CancellationToken::new();
                let stream = Some(stream.to_owned());
                let call = v.insert(Call { cancel, stream });
                Some(call.cancel.clone())
            }
        }
    }

    /// [`Calls::try_start`] whose call ends when the returned [`Running`] is dropped.
    pub fn try_run(self: &Arc<Self>, sid: &str, key: &str, stream: &str) -> Option<Running> {
        let cancel = self.try_start(sid, key, stream)?;
        Some(Running {
            calls: self.clone(),
            key: (sid.to_owned(), key.to_owned()),
            cancel,
        })
    }

    /// Request `key` of session `sid` finished here.
    pub fn end(&self, sid: &str, key: &str) {
        let mut running = self.running.lock();
        running.remove(&(sid.to_owned(), key.to_owned()));
        if running.is_empty() {
            self.idle.notify_waiters();
        }
    }

    /// Whether the in-flight entry of request `key` of session `sid` naming `stream` has its call
    /// running here: one with that key runs, on that stream (or on one not told, taken to be it).
    /// A call sent again with the id of a lost entry has another stream: the entry is still lost.
    pub fn runs(&self, sid: &str, key: &str, stream: &str) -> bool {
        let running = self.running.lock();
        running
            .get(&(sid.to_owned(), key.to_owned()))
            .is_some_and(|call| call.stream.as_deref().is_none_or(|s| s == stream))
    }

    /// Cancels a running request; `false` when it does not run here.
    pub fn cancel(&self, sid: &str, key: &str) -> bool {
        match self.running.lock().get(&(sid.to_owned(), key.to_owned())) {
            Some(call) => {
                call.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// A token that fires when the session ends here (for work not tied to a request, e.g. an
    /// upstream's standalone stream).
    pub fn session_token(&self, sid: &str) -> CancellationToken {
        self.sessions
            .lock()
            .entry(sid.to_owned())
            .or_default()
            .clone()
    }

    /// The session ended: cancels every request of it running here and its session token. The
    /// calls still end themselves ([`Calls::end`]), after writing their final event.
    pub fn end_session(&self, sid: &str) {
        if let Some(t) = self.sessions.lock().remove(sid) {
            t.cancel();
        }
        for (k, call) in self.running.lock().iter() {
            if k.0 == sid {
                call.cancel.cancel();
            }
        }
    }

    /// Sessions with a request running here, sorted, each once.
    pub fn sessions(&self) -> Vec<String> {
        let mut v: Vec<String> = self.running.lock().keys().map(|k| k.0.clone()).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Number of requests running here.
    pub fn count(&self) -> usize {
        self.running.lock().len()
    }

    /// Returns once no request runs here (at once when none does).
    pub async fn idle(&self) {
        loop {
            let told = self.idle.notified();
            if self.count() == 0 {
                return;
            }
            told.await;
        }
    }
}

/// One running call from [`Calls::try_run`]; dropping it ends the call.
pub struct Running {
    calls: Arc<Calls>,
    key: Key,
    cancel: CancellationToken,
}

impl Running {
    /// Fires when the call is cancelled (its session ended here, or a cancellation reached it).
    pub fn cancelled(&self) -> &CancellationToken {
        &self.cancel
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.calls.end(&self.key.0, &self.key.1);
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
        assert_eq!(c.sessions(), vec!["s".to_owned()]);
    }

    #[test]
    fn a_duplicate_id_does_not_start_and_does_not_end_the_first() {
        let c = Arc::new(Calls::default());
        let first = c.try_run("s", "7", "x").expect("starts");
        assert!(c.try_run("s", "7", "y").is_none());
        assert!(c.runs("s", "7", "x"));
        assert!(!c.runs("s", "7", "y"), "a lost entry with the same id");
        drop(first);
        assert!(!c.runs("s", "7", "x"));
        assert!(c.try_run("s", "7", "y").is_some());
        let _forwarded = c.start("s", "8");
        assert!(
            c.runs("s", "8", "any"),
            "a stream not told is taken to be it"
        );
    }

    #[tokio::test]
    async fn idle_waits_for_the_last_call() {
        let c = Arc::new(Calls::default());
        c.idle().await;
        let one = c.try_run("s", "1", "x").unwrap();
        let two = c.try_run("t", "1", "x").unwrap();
        let waiting = tokio::spawn({
            let c = c.clone();
            async move { c.idle().await }
        });
        drop(one);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(two);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("idle once no call runs")
            .unwrap();
    }
}
