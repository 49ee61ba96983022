//! The wait before reconnecting to an upstream (its GET stream, or a request's response stream
//! that dropped): `backon`'s exponential schedule with jitter, so that the nodes which lost an
//! upstream together do not come back to it in lockstep.
//!
//! Attempt n (from 0) waits a random time in [d, 2d), d = min(`base` × 2^n, `max` / 2), so never
//! less than `base` (an upstream's SSE `retry` is honoured as the shortest wait) and never more
//! than `max`.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// The wait before attempt `attempt` (0 for the first reconnect after a failure).
pub(super) fn reconnect_delay(base: Duration, max: Duration, attempt: u32) -> Duration {
    let cap = max / 2;
    ExponentialBuilder::new()
        .with_jitter()
        .with_factor(2.0)
        .with_min_delay(base.min(cap))
        .with_max_delay(cap)
        .without_max_times()
        .build()
        .nth(attempt.min(16) as usize)
        .map_or(max, |d| d.min(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_from_base_with_jitter_and_stay_under_max() {
        let (base, max) = (Duration::from_millis(100), Duration::from_secs(5));
        for _ in 0..50 {
            let first = reconnect_delay(base, max, 0);
            assert!(first >= base && first < base * 2, "{first:?}");
            let second = reconnect_delay(base, max, 1);
            assert!(second >= base * 2 && second < base * 4, "{second:?}");
            let late = reconnect_delay(base, max, 30);
            assert!(late >= max / 2 && late <= max, "{late:?}");
            let huge = reconnect_delay(Duration::from_secs(60), max, 0);
            assert!(huge >= max / 2 && huge <= max, "{huge:?}");
        }
        // Jitter: fifty first waits are not all the same.
        let waits: std::collections::HashSet<Duration> =
            (0..50).map(|_| reconnect_delay(base, max, 0)).collect();
        assert!(waits.len() > 1, "{waits:?}");
    }
}
