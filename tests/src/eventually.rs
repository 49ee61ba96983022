//! Bounded ways to wait: for a condition to become true ([`eventually`], [`eventually_sync`],
//! [`eventually_ok`]), or to check that it stays true for a while ([`always_for`]).

use std::future::Future;
use std::time::{Duration, Instant};

/// How often the helpers poll their check.
const POLL: Duration = Duration::from_millis(50);

/// Polls `check` every 50 ms until it returns `Some`, or panics with `what` after `limit`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for: {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`eventually`] for a blocking `check` outside async code: polls it every 50 ms (blocking the
/// thread in between) until it returns `Some`, or panics with `what` after `limit`.
pub fn eventually_sync<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for: {what}");
        }
        std::thread::sleep(POLL);
    }
}

/// [`eventually_sync`] for a check that says why it is not there yet: polls `check` every 50 ms
/// until it returns `Ok`, or panics with `what` and the last `Err` reason after `limit`.
pub fn eventually_ok<T>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        match check() {
            Ok(v) => return v,
            Err(why) if Instant::now() >= deadline => {
                panic!("timed out after {limit:?} waiting for: {what} (last: {why})")
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Checks that `check` holds for the whole of `duration`: polls it every 50 ms (and once more at
/// the end) and panics with `what` the first time it returns `false`. For "nothing else
/// happens" assertions, where the wait itself is the observation window.
pub async fn always_for<F, Fut>(what: &str, duration: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    let deadline = start + duration;
    loop {
        if !check().await {
            panic!(
                "stopped holding after {:?} (of {duration:?}): {what}",
                start.elapsed()
            );
        }
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        tokio::time::sleep(POLL.min(deadline - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventually_sync_returns_the_first_some() {
        let mut n = 0;
        let got = eventually_sync("n to reach 3", Duration::from_secs(5), || {
            n += 1;
            (n == 3).then_some(n)
        });
        assert_eq!(got, 3);
    }

    #[test]
    #[should_panic(expected = "timed out")]
    fn eventually_sync_panics_at_the_limit() {
        eventually_sync("never", Duration::from_millis(120), || None::<()>);
    }

    #[test]
    #[should_panic(expected = "last: not yet 2")]
    fn eventually_ok_names_the_last_reason() {
        let mut n = 0;
        eventually_ok(
            "never",
            Duration::from_millis(120),
            || -> Result<(), String> {
                n += 1;
                Err(format!("not yet {}", n.min(2)))
            },
        );
    }

    #[tokio::test]
    async fn always_for_polls_until_the_end() {
        let started = Instant::now();
        let mut polls = 0;
        always_for("true", Duration::from_millis(200), || {
            polls += 1;
            async { true }
        })
        .await;
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert!(polls >= 3, "{polls}");
    }

    #[tokio::test]
    #[should_panic(expected = "stopped holding")]
    async fn always_for_panics_when_the_check_fails() {
        let mut polls = 0;
        always_for("the first two polls", Duration::from_secs(5), || {
            polls += 1;
            let ok = polls < 3;
            async move { ok }
        })
        .await;
    }
}
