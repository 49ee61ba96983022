//! [`RestartPolicy`]: the restart back-off settings of a stdio upstream (`restart_backoff_ms`,
//! `restart_backoff_max_ms`, `restart_stable_ms`) and their defaults. What they do is
//! documented in the `stdio` module (`stdio::restarts`, which applies them); they live here, with
//! the fields they come from, so the config imports nothing from `stdio`.

use std::time::Duration;

/// Default first back-off step, in ms.
pub const DEFAULT_RESTART_BACKOFF_MS: u64 = 500;
/// Default longest back-off, in ms.
pub const DEFAULT_RESTART_BACKOFF_MAX_MS: u64 = 30_000;
/// Default run time after which a child counts as stable, in ms.
pub const DEFAULT_RESTART_STABLE_MS: u64 = 10_000;

/// The back-off settings of one stdio upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartPolicy {
    /// The wait after the second consecutive failed start (`restart_backoff_ms`).
    pub backoff: Duration,
    /// The longest wait (`restart_backoff_max_ms`).
    pub backoff_max: Duration,
    /// How long a child must run to reset the count of failures (`restart_stable_ms`).
    pub stable: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            backoff: Duration::from_millis(DEFAULT_RESTART_BACKOFF_MS),
            backoff_max: Duration::from_millis(DEFAULT_RESTART_BACKOFF_MAX_MS),
            stable: Duration::from_millis(DEFAULT_RESTART_STABLE_MS),
        }
    }
}
