//! The calls running on this replica, per session: the sessions the keep-alive must not let
//! expire, what a shutdown waits for, and which in-flight entries of this replica in the store
//! still have a call behind them (one without is an orphan: see `liveness`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// The calls running here: per session, the streams of those whose recorder runs here (or is
/// about to: a request counts from before its registration in the store).
#[derive(Default)]
pub(crate) struct Running(Arc<Calls>);

#[derive(Default)]
pub(crate) struct Calls {
    map: Mutex<HashMap<String, HashSet<String>>>,
    /// Told when the last running call finishes.
    idle: Notify,
}

/// One running call; dropping it counts it as finished.
pub(crate) struct RunningGuard {
    calls: Arc<Calls>,
    sid: String,
    stream: String,
}

impl Running {
    /// Counts the call of `sid` answering on `stream` as running until the guard is dropped.
    pub fn start(&self, sid: &str, stream: &str) -> RunningGuard {
        let mut map = self.0.map.lock();
        map.entry(sid.to_owned())
            .or_default()
            .insert(stream.to_owned());
        RunningGuard {
            calls: self.0.clone(),
            sid: sid.to_owned(),
            stream: stream.to_owned(),
        }
    }

    /// Whether the call answering on `stream` of `sid` runs here.
    pub fn has(&self, sid: &str, stream: &str) -> bool {
        self.0
            .map
            .lock()
            .get(sid)
            .is_some_and(|s| s.contains(stream))
    }

    /// Returns once no call runs here.
    pub async fn idle(&self) {
        loop {
            let told = self.0.idle.notified();
            if self.count() == 0 {
                return;
            }
            told.await;
        }
    }

    /// Sessions with at least one call running here.
    pub fn sessions(&self) -> Vec<String> {
        self.0.map.lock().keys().cloned().collect()
    }

    /// Calls running here in all.
    pub fn count(&self) -> usize {
        self.0.map.lock().values().map(HashSet::len).sum()
    }
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let mut map = self.calls.map.lock();
        if let Some(streams) = map.get_mut(&self.sid) {
            streams.remove(&self.stream);
            if streams.is_empty() {
                map.remove(&self.sid);
            }
        }
        if map.is_empty() {
            self.calls.idle.notify_waiters();
        }
    }
}
