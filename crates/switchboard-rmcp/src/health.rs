//! [`StoreHealth`]: how long the store has been answering this replica's heartbeats without a
//! gap, which the `liveness` module requires before it takes another replica for dead. A leaf: the
//! node holds one, the background heartbeat feeds it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the store has been answering this replica's heartbeats without a gap.
#[derive(Debug, Default)]
pub(crate) struct StoreHealth(Mutex<Health>);

#[derive(Debug, Default)]
struct Health {
    /// Since when every heartbeat was answered (none: the last one failed, or none ran yet).
    ok_since: Option<Instant>,
    /// When the last one was answered.
    last_ok: Option<Instant>,
}

impl StoreHealth {
    /// A heartbeat was answered. One answered more than `gap` after the previous answered one
    /// restarts the count (something held the heartbeats back meanwhile).
    pub fn answered(&self, gap: Duration) {
        let now = Instant::now();
        let mut h = self.lock();
        let gapped = h.last_ok.is_none_or(|t| now.duration_since(t) > gap);
        if h.ok_since.is_none() || gapped {
            h.ok_since = Some(now);
        }
        h.last_ok = Some(now);
    }

    /// A heartbeat (or a liveness read) failed.
    pub fn failed(&self) {
        self.lock().ok_since = None;
    }

    /// How long the store has answered without a gap (zero after a failure).
    pub fn answering_for(&self) -> Duration {
        self.lock().ok_since.map_or(Duration::ZERO, |t| t.elapsed())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Health> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_or_a_gap_restarts_the_count() {
        let h = StoreHealth::default();
        assert_eq!(h.answering_for(), Duration::ZERO, "nothing answered yet");
        h.answered(Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(20));
        assert!(h.answering_for() >= Duration::from_millis(20));
        h.failed();
        assert_eq!(h.answering_for(), Duration::ZERO);
        h.answered(Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(20));
        h.answered(Duration::from_millis(1));
        assert!(
            h.answering_for() < Duration::from_millis(20),
            "an answer after a gap starts a new count"
        );
    }
}
