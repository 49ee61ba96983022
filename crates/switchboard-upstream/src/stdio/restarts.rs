//! [`Restarts`]: the restart back-off of one stdio upstream's children in this process (case
//! C30), and what it tells the upstream's status.
//!
//! - **A failed start** is a child that could not be spawned, failed the `initialize` handshake
//!   (exited before answering, answered with an error or without a result, or did not answer
//!   within `timeout_ms`, or wrote a line over `max_line_bytes` before answering), or exited on
//!   its own less than `restart_stable_ms` after it was started. A child stopped for a line over
//!   `max_line_bytes` after its handshake is not one (a request's large result: the calls in
//!   flight fail and the next request starts a new child at once), nor is a start the client
//!   cancelled.
//! - **Back-off**: after the n-th consecutive failed start the next start waits a random time
//!   between d and 2d, where d = min(`restart_backoff_ms` × 2^(n−2), `restart_backoff_max_ms`) / 2
//!   (so at most `restart_backoff_max_ms`); the first failure after a stable run is retried at
//!   once (a one-off crash costs nothing). The arithmetic is `backon`'s exponential schedule with
//!   jitter. While the wait lasts, a call that needs a new child fails at once with -32006 naming
//!   the upstream and the last failure, with `data.retry_after_ms` and `data.upstream`; after it,
//!   one start is tried at a time until a child has run stably (the others wait for that trial).
//! - **Reset**: when a child has run for `restart_stable_ms`, the count of failures goes back to
//!   0 (a child that exits on its own after that is restarted at once on the next call).
//! - **Per upstream, per node**: a command that crashes on start usually does so for every
//!   session, so one failing session's child holds back the starts of every session's child in
//!   this process; children already running are not affected.

use std::time::{Duration, SystemTime};

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use parking_lot::Mutex;
use serde_json::json;
use switchboard_protocol::codes;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::RestartPolicy;
use crate::status::{unix_ms, LastError, State};
use crate::upstream::RpcError;

/// The waits of one streak of failures under `policy`, from the second failure on.
fn schedule(policy: &RestartPolicy) -> ExponentialBackoff {
    ExponentialBuilder::new()
        .with_jitter()
        .with_factor(2.0)
        .with_min_delay(policy.backoff / 2)
        .with_max_delay(policy.backoff_max / 2)
        .without_max_times()
        .build()
}

struct Streak {
    /// Consecutive failed starts since a child last ran stably.
    failures: u32,
    schedule: ExponentialBackoff,
    /// When the next start may be tried (set after a failure).
    next_start: Option<(Instant, SystemTime)>,
    last_failure: Option<LastError>,
    /// Whether any start (the probe included) was tried here.
    tried: bool,
    restarts: u64,
}

/// The restart state of one stdio upstream in this process (see the module doc).
pub(super) struct Restarts {
    upstream: std::sync::Arc<str>,
    policy: RestartPolicy,
    streak: Mutex<Streak>,
    /// Held by the one start tried at a time while failures are counted.
    trial: tokio::sync::Mutex<()>,
}

/// Leave to start a child; holds the trial slot while failures are counted.
pub(super) struct Admission<'a> {
    _trial: Option<tokio::sync::MutexGuard<'a, ()>>,
}

impl Restarts {
    pub(super) fn new(upstream: std::sync::Arc<str>, policy: RestartPolicy) -> Restarts {
        Restarts {
            upstream,
            streak: Mutex::new(Streak {
                failures: 0,
                schedule: schedule(&policy),
                next_start: None,
                last_failure: None,
                tried: false,
                restarts: 0,
            }),
            policy,
            trial: tokio::sync::Mutex::new(()),
        }
    }

    pub(super) fn policy(&self) -> RestartPolicy {
        self.policy
    }

    /// Leave to start a child now, or the back-off error. While failures are counted, waits for
    /// the start being tried by another request (until `deadline` or `cancel`), then looks again.
    pub(super) async fn admit(
        &self,
        cancel: &CancellationToken,
        deadline: Instant,
    ) -> Result<Admission<'_>, RpcError> {
        if self.streak.lock().failures == 0 {
            return Ok(Admission { _trial: None });
        }
        self.refuse_while_waiting()?;
        let trial = tokio::select! {
            guard = self.trial.lock() => guard,
            _ = cancel.cancelled() => return Err(RpcError::new(codes::REQUEST_ABORTED, "request cancelled")),
            _ = tokio::time::sleep_until(deadline) => return Err(RpcError::new(codes::UPSTREAM_TIMEOUT, "timed out")),
        };
        self.refuse_while_waiting()?;
        Ok(Admission {
            _trial: Some(trial),
        })
    }

    /// The back-off error while the wait after the last failure lasts.
    fn refuse_while_waiting(&self) -> Result<(), RpcError> {
        let streak = self.streak.lock();
        let Some((at, _)) = streak.next_start else {
            return Ok(());
        };
        let now = Instant::now();
        if at <= now {
            return Ok(());
        }
        let wait = at - now;
        let retry_after_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
        let last = streak
            .last_failure
            .as_ref()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        let mut error = RpcError::new(
            codes::UPSTREAM_UNAVAILABLE,
            format!(
                "upstream `{}` is not started again yet after {} failed starts (last: {last}); next try in {retry_after_ms} ms",
                self.upstream, streak.failures
            ),
        );
        error.data = Some(json!({
            "upstream": &*self.upstream,
            "retry_after_ms": retry_after_ms,
            "failures": streak.failures,
            "last_failure": last,
        }));
        Err(error)
    }

    /// A start is being tried; `restart` when it replaces a child that exited or failed to start.
    pub(super) fn starting(&self, restart: bool) {
        let mut streak = self.streak.lock();
        streak.tried = true;
        if restart {
            streak.restarts += 1;
        }
    }

    /// A start failed (see the module doc), or a child exited on its own before it ran stably.
    pub(super) fn failed(&self, error: &RpcError) {
        let mut streak = self.streak.lock();
        streak.tried = true;
        streak.failures = streak.failures.saturating_add(1);
        let wait = if streak.failures == 1 {
            Duration::ZERO
        } else {
            streak.schedule.next().unwrap_or(self.policy.backoff_max)
        };
        let wait = wait.min(self.policy.backoff_max);
        streak.next_start = Some((Instant::now() + wait, SystemTime::now() + wait));
        streak.last_failure = Some(LastError::now(error.message.clone()));
        let failures = streak.failures;
        drop(streak);
        tracing::warn!(upstream = %self.upstream, failures, wait_ms = wait.as_millis() as u64, error = %error.message, "stdio child failed to start or exited early; next start backs off");
    }

    /// A child exited on its own after running stably, or was stopped after its handshake for a
    /// line over `max_line_bytes`: remembered, not counted as a failure.
    pub(super) fn crashed(&self, error: &RpcError) {
        self.streak.lock().last_failure = Some(LastError::now(error.message.clone()));
    }

    /// A child has run for the stable time: the failures are forgotten.
    pub(super) fn ran_stably(&self) {
        let mut streak = self.streak.lock();
        if streak.failures > 0 {
            tracing::info!(upstream = %self.upstream, failures = streak.failures, "stdio child ran stably; restart back-off reset");
        }
        streak.failures = 0;
        streak.schedule = schedule(&self.policy);
        streak.next_start = None;
    }

    /// State, last failure, restarts and next start time (when in the future), with `running`
    /// children in this process.
    pub(super) fn report(&self, running: usize) -> (State, Option<LastError>, u64, Option<u64>) {
        let streak = self.streak.lock();
        let state = match (streak.tried, streak.failures, running) {
            (false, _, 0) => State::Unknown,
            (_, 0, _) => State::Up,
            (_, _, 0) => State::Down,
            _ => State::Degraded,
        };
        let next = streak
            .next_start
            .filter(|(at, _)| *at > Instant::now())
            .map(|(_, wall)| unix_ms(wall));
        (state, streak.last_failure.clone(), streak.restarts, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn restarts(backoff_ms: u64, max_ms: u64) -> Restarts {
        let policy = RestartPolicy {
            backoff: Duration::from_millis(backoff_ms),
            backoff_max: Duration::from_millis(max_ms),
            stable: Duration::from_secs(10),
        };
        Restarts::new("kid".into(), policy)
    }

    fn retry_after(r: &Restarts) -> Option<u64> {
        r.refuse_while_waiting()
            .err()
            .map(|e| e.data.unwrap()["retry_after_ms"].as_u64().unwrap())
    }

    #[tokio::test]
    async fn waits_grow_with_jitter_up_to_the_cap_and_reset_after_a_stable_run() {
        let r = restarts(1000, 8000);
        let exit = RpcError::new(
            codes::UPSTREAM_UNAVAILABLE,
            "upstream `kid` exited (exit status 1)",
        );
        assert_eq!(r.report(0).0, State::Unknown);
        r.failed(&exit);
        assert_eq!(
            retry_after(&r),
            None,
            "the first failure is retried at once"
        );
        assert_eq!(r.report(0).0, State::Down);
        let mut waits = Vec::new();
        for _ in 0..6 {
            r.failed(&exit);
            waits.push(retry_after(&r).expect("in back-off"));
        }
        let ranges = [
            (500, 1000),
            (1000, 2000),
            (2000, 4000),
            (4000, 8000),
            (4000, 8000),
            (4000, 8000),
        ];
        for (wait, (low, high)) in waits.iter().zip(ranges) {
            assert!(
                (low - 5..=high).contains(wait),
                "{wait} in {low}..{high}: {waits:?}"
            );
        }
        let error = r.refuse_while_waiting().unwrap_err();
        assert_eq!(error.code, codes::UPSTREAM_UNAVAILABLE);
        assert!(
            error.message.contains("`kid`") && error.message.contains("exit status 1"),
            "{}",
            error.message
        );
        let data = error.data.unwrap();
        assert_eq!(
            (data["upstream"].clone(), data["failures"].clone()),
            (json!("kid"), json!(7))
        );
        let (state, last, _, next) = r.report(1);
        assert_eq!(state, State::Degraded, "a child still runs");
        assert!(last.unwrap().message.contains("exit status 1"));
        assert!(next.unwrap() > unix_ms(SystemTime::now()));

        r.ran_stably();
        assert_eq!(retry_after(&r), None);
        assert_eq!(r.report(0).0, State::Up);
        r.failed(&exit);
        r.failed(&exit);
        let wait = retry_after(&r).unwrap();
        assert!(
            (495..=1000).contains(&wait),
            "the schedule starts over: {wait}"
        );
    }

    #[tokio::test]
    async fn a_second_start_waits_for_the_trial_and_is_refused_when_it_failed() {
        let r = std::sync::Arc::new(restarts(60_000, 60_000));
        let exit = RpcError::new(
            codes::UPSTREAM_UNAVAILABLE,
            "upstream `kid` exited (exit status 1)",
        );
        r.failed(&exit);
        let cancel = CancellationToken::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        let trial = r
            .admit(&cancel, deadline)
            .await
            .expect("the first retry is tried");
        let second = {
            let r = r.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move { r.admit(&cancel, deadline).await.err() })
        };
        tokio::task::yield_now().await;
        r.failed(&exit);
        drop(trial);
        let refused = second
            .await
            .unwrap()
            .expect("refused after the trial failed");
        assert!(refused.data.unwrap()["retry_after_ms"].as_u64().unwrap() > 20_000);
    }
}
