//! The node's seats for 2026-07-28 requests that run in an upstream session of their own
//! (upstreams with per-session state: a stdio child or an upstream `initialize` each), at most
//! `stateless.max_ephemeral_sessions` at once. A leaf: it knows nothing of the node's state.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The seats of one node: how many are taken, out of how many.
#[derive(Debug)]
pub struct Seats {
    taken: AtomicUsize,
    max: usize,
}

/// One taken seat, given back when dropped.
#[derive(Debug)]
pub struct Seat(Arc<Seats>);

impl Seats {
    /// `max` seats, none taken.
    pub fn new(max: usize) -> Seats {
        Seats {
            taken: AtomicUsize::new(0),
            max,
        }
    }

    /// A seat, or `None` when all `max` are taken.
    pub fn take(self: &Arc<Self>) -> Option<Seat> {
        self.taken
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| Seat(self.clone()))
    }

    /// How many seats are taken now.
    #[cfg(test)]
    pub fn taken(&self) -> usize {
        self.taken.load(Ordering::SeqCst)
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.taken.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seats_stop_at_the_maximum_and_come_back_when_dropped() {
        let seats = Arc::new(Seats::new(2));
        let a = seats.take().expect("first seat");
        let b = seats.take().expect("second seat");
        assert!(seats.take().is_none(), "a third seat past max 2");
        assert_eq!(seats.taken(), 2);
        drop(a);
        assert_eq!(seats.taken(), 1);
        let c = seats.take().expect("the seat given back");
        drop((b, c));
        assert_eq!(seats.taken(), 0);
    }
}
