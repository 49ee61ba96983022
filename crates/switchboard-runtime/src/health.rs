//! [`StoreHealth`]: how this replica's heartbeats have fared. Two rules read it:
//!
//! - **Another replica is dead** ([`crate::liveness`]) only when its heartbeat key is missing
//!   *and* this replica's own heartbeats have been answered without a gap for
//!   [`crate::liveness::CONFIRM_TTLS`] × `node_ttl` ([`StoreHealth::answering_for`]): after a
//!   store outage every key may have lapsed although every replica lives.
//! - **This replica is cut off** (the gateway's fence, `switchboard-node`'s background work)
//!   once no heartbeat has been answered for some multiple of `node_ttl`
//!   ([`StoreHealth::silent_for`]).
//!
//! A leaf: the background heartbeat ([`crate::background`]) feeds it.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How long the store has been answering this replica's heartbeats, and since when it has not.
#[derive(Debug)]
pub struct StoreHealth(Mutex<Health>);

#[derive(Debug)]
struct Health {
    /// Since when every heartbeat was answered (none: the last one failed, or none ran yet).
    ok_since: Option<Instant>,
    /// When the last one was answered (at first: when this replica started).
    last_ok: Instant,
    /// Whether a heartbeat failed since the last answered one.
    failed: bool,
}

impl Default for StoreHealth {
    fn default() -> StoreHealth {
        StoreHealth(Mutex::new(Health {
            ok_since: None,
            last_ok: Instant::now(),
            failed: false,
        }))
    }
}

impl StoreHealth {
    /// A heartbeat was answered; `live`: it found this replica's previous heartbeat key still
    /// there. One answered more than `gap` after the previous answered one, or one that found the
    /// key gone, restarts the count (something held the heartbeats back meanwhile). Returns
    /// whether a heartbeat had failed since the previous answered one.
    pub fn answered(&self, live: bool, gap: Duration) -> bool {
        let now = Instant::now();
        let mut h = self.0.lock();
        let gapped = h.ok_since.is_none() || now.duration_since(h.last_ok) > gap;
        if !live || gapped {
            h.ok_since = Some(now);
        }
        h.last_ok = now;
        std::mem::take(&mut h.failed)
    }

    /// A heartbeat failed: the count restarts, and the next answered heartbeat says so.
    pub fn failed(&self) {
        let mut h = self.0.lock();
        h.ok_since = None;
        h.failed = true;
    }

    /// A read of another replica's liveness failed: the count restarts (the store is not
    /// answering without a gap), but no heartbeat failed.
    pub fn read_failed(&self) {
        self.0.lock().ok_since = None;
    }

    /// How long the store has answered without a gap (zero after a failure).
    pub fn answering_for(&self) -> Duration {
        self.0
            .lock()
            .ok_since
            .map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// How long since the last answered heartbeat (since this replica started, when none was).
    pub fn silent_for(&self) -> Duration {
        self.0.lock().last_ok.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_a_gap_or_a_lapsed_key_restarts_the_count() {
        let h = StoreHealth::default();
        assert_eq!(h.answering_for(), Duration::ZERO, "nothing answered yet");
        assert!(!h.answered(true, Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(20));
        assert!(h.answering_for() >= Duration::from_millis(20));
        h.failed();
        assert_eq!(h.answering_for(), Duration::ZERO);
        assert!(h.silent_for() >= Duration::from_millis(20));
        assert!(h.answered(true, Duration::from_secs(60)), "after a failure");
        assert!(!h.answered(true, Duration::from_secs(60)), "told once");
        h.read_failed();
        assert_eq!(h.answering_for(), Duration::ZERO);
        assert!(
            !h.answered(true, Duration::from_secs(60)),
            "a failed read is no failed heartbeat"
        );
        std::thread::sleep(Duration::from_millis(20));
        h.answered(true, Duration::from_millis(1));
        assert!(
            h.answering_for() < Duration::from_millis(20),
            "an answer after a gap starts a new count"
        );
        std::thread::sleep(Duration::from_millis(20));
        h.answered(false, Duration::from_secs(60));
        assert!(
            h.answering_for() < Duration::from_millis(20),
            "a lapsed key"
        );
        assert!(h.silent_for() < Duration::from_millis(20));
    }
}
