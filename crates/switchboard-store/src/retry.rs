//! Writing through a store outage: the one rule the gateway node and library mode follow when an
//! event must reach its log while Redis cannot take it for a while (a Sentinel or Cluster
//! promotion, about 2–5 s; a Redis restart).
//!
//! - The attempts follow `backon`'s exponential schedule with jitter ([`Backoff`]): attempt n
//!   waits a random time in [d, 2d), d = min(100 ms × 2^n, 500 ms), so the writers that lost a
//!   primary together do not come back to the new one in lockstep, and a promotion costs an
//!   event at most about a second more than the promotion itself.
//! - They stop at the caller's deadline (a call's own, see the node's `exec::outage`): the last
//!   one starts at it and none after it, so a write that cannot be done in time fails with an
//!   [`Outage`] naming the store and how long it was tried.
//! - Every attempt of one event carries the same append id ([`append_until`],
//!   [`crate::EventLog::append_once`]): an attempt that looked failed may have been stored all the
//!   same (its reply lost with the primary, or too few replicas confirming it), and the next one
//!   must not log it a second time.
//! - Only errors a later attempt can cure are retried ([`retryable`]): the backend failing or
//!   too few replicas confirming; a corrupt record is not.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio::time::Instant;

use crate::error::StoreError;
use crate::model::Appended;
use crate::traits::EventLog;

/// The shortest wait between two attempts (before jitter).
pub const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest wait between two attempts before jitter (with it, below twice this).
pub const MAX_PAUSE: Duration = Duration::from_millis(500);

/// The schedule of attempts of one write, until a deadline.
#[derive(Debug)]
pub struct Backoff {
    deadline: Instant,
    started: Instant,
    attempts: u32,
    pauses: ExponentialBackoff,
}

impl Backoff {
    /// A schedule whose attempts start no later than `deadline` (the first one always runs).
    pub fn until(deadline: Instant) -> Backoff {
        let pauses = ExponentialBuilder::new()
            .with_jitter()
            .with_factor(2.0)
            .with_min_delay(FIRST_PAUSE)
            .with_max_delay(MAX_PAUSE)
            .without_max_times()
            .build();
        Backoff {
            deadline,
            started: Instant::now(),
            attempts: 0,
            pauses,
        }
    }

    /// Counts a failed attempt and answers the pause before the next one (shortened so that
    /// the last attempt starts at the deadline), or `None` once the deadline has passed.
    pub fn failed(&mut self) -> Option<Duration> {
        self.attempts += 1;
        let pause = self.pauses.next().unwrap_or(MAX_PAUSE * 2);
        let left = self.deadline.checked_duration_since(Instant::now())?;
        (!left.is_zero()).then(|| pause.min(left))
    }

    /// The failed attempts so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The [`Outage`] of a write given up after `error`.
    pub fn outage(&self, error: StoreError) -> Outage {
        Outage {
            waited: self.started.elapsed(),
            attempts: self.attempts,
            error,
        }
    }
}

/// Whether a later attempt may succeed where this one failed: the backend was unreachable or
/// answered with an error (no primary yet, `READONLY`, `LOADING`, `MOVED`, a timeout), or too few
/// replicas confirmed the write. A corrupt record stays corrupt.
pub fn retryable(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::Backend(_) | StoreError::NotReplicated { .. }
    )
}

/// A write given up: the store kept failing until the deadline (or failed in a way no retry
/// cures).
#[derive(Debug, thiserror::Error)]
#[error(
    "the session store was unreachable: tried {attempts} times over {} ms; last error: {error}",
    waited.as_millis()
)]
pub struct Outage {
    /// From the first attempt to the last one's failure.
    pub waited: Duration,
    /// The attempts made.
    pub attempts: u32,
    /// The last attempt's error.
    pub error: StoreError,
}

/// Runs `attempt` until it succeeds, it fails with an error no retry cures, or `deadline` has
/// passed (the last attempt starts at it; see the module doc for the schedule). Failures are logged at
/// debug level; the caller logs the [`Outage`].
///
/// # Errors
/// The [`Outage`] of the last failed attempt.
pub async fn until<T, F, Fut>(deadline: Instant, mut attempt: F) -> Result<T, Outage>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut schedule = Backoff::until(deadline);
    loop {
        let error = match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let pause = if retryable(&error) {
            schedule.failed()
        } else {
            schedule.attempts += 1;
            None
        };
        let Some(pause) = pause else {
            return Err(schedule.outage(error));
        };
        tracing::debug!(error = %error, attempt = schedule.attempts(), retry_in = ?pause, "a store write failed; retrying");
        tokio::time::sleep(pause).await;
    }
}

/// [`EventLog::append`] through an outage: [`EventLog::append_once`] with one new append id,
/// attempted as [`until`] says, so the event is logged at most once however many attempts it
/// takes.
///
/// # Errors
/// The [`Outage`] when the store kept failing until `deadline`.
pub async fn append_until(
    log: &dyn EventLog,
    sid: &str,
    stream: &str,
    data: &str,
    end: bool,
    deadline: Instant,
) -> Result<Appended, Outage> {
    let id = crate::rules::new_append_id();
    until(deadline, || log.append_once(sid, stream, data, end, &id)).await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn down() -> StoreError {
        StoreError::Backend("connection refused".into())
    }

    #[test]
    fn pauses_grow_with_jitter_and_stay_under_twice_the_max() {
        let far = Instant::now() + Duration::from_secs(3600);
        let mut waits = std::collections::HashSet::new();
        for _ in 0..30 {
            let mut b = Backoff::until(far);
            let first = b.failed().unwrap();
            assert!(first >= FIRST_PAUSE && first < FIRST_PAUSE * 2, "{first:?}");
            waits.insert(first);
            for _ in 0..20 {
                let p = b.failed().unwrap();
                assert!(p >= FIRST_PAUSE && p < MAX_PAUSE * 2, "{p:?}");
            }
            assert_eq!(b.attempts(), 21);
        }
        assert!(waits.len() > 1, "jitter: {waits:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn retries_until_the_store_answers() {
        let calls = AtomicU32::new(0);
        let deadline = Instant::now() + Duration::from_secs(10);
        let got = until(deadline, || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0..=3 => Err(down()),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(got.unwrap(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_at_the_deadline_naming_the_store() {
        let start = Instant::now();
        let deadline = start + Duration::from_secs(3);
        let outage = until(deadline, || async { Err::<(), _>(down()) })
            .await
            .unwrap_err();
        assert_eq!(
            Instant::now(),
            deadline,
            "the last attempt at the deadline, none after"
        );
        assert!(outage.attempts > 3, "{outage:?}");
        let text = outage.to_string();
        assert!(
            text.contains("session store was unreachable") && text.contains("refused"),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_corrupt_record_is_not_retried_and_one_attempt_runs_past_the_deadline() {
        let calls = AtomicU32::new(0);
        let corrupt = until(Instant::now() + Duration::from_secs(5), || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(StoreError::Corrupt("x".into()))
        })
        .await
        .unwrap_err();
        assert_eq!((calls.load(Ordering::SeqCst), corrupt.attempts), (1, 1));
        let past = Instant::now() - Duration::from_secs(1);
        let late = until(past, || async { Ok::<_, StoreError>(7) }).await;
        assert_eq!(late.unwrap(), 7, "the first attempt always runs");
    }
}
