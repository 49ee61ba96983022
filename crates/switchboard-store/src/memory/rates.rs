//! Rate-limit states of the memory backend: the TAT of each limit ([`crate::rate`]) on the
//! process's monotonic clock, so the limits hold per process.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::rate::{decide, Rate, RateDecision};

/// States past their TAT are dropped once the map holds this many (a past TAT is no state).
const PRUNE_AT: usize = 4096;

/// TAT by `(tag, key)`, in ms since `origin`.
#[derive(Default)]
pub(crate) struct RateStates {
    origin: Option<Instant>,
    tats: HashMap<(String, String), f64>,
}

impl RateStates {
    /// Checks `rates` together at `now` and, when all pass, moves them (GCRA, [`decide`]).
    pub fn take(&mut self, rates: &[Rate], now: Instant) -> RateDecision {
        if rates.is_empty() {
            return RateDecision::Allowed;
        }
        let origin = *self.origin.get_or_insert(now);
        let now_ms = now.duration_since(origin).as_secs_f64() * 1000.0;
        let ids: Vec<(String, String)> = rates
            .iter()
            .map(|r| (r.tag.clone(), r.key.clone()))
            .collect();
        let tats: Vec<Option<f64>> = ids.iter().map(|id| self.tats.get(id).copied()).collect();
        match decide(&tats, now_ms, rates) {
            Ok(new) => {
                if self.tats.len() >= PRUNE_AT {
                    self.tats.retain(|_, tat| *tat > now_ms);
                }
                self.tats.extend(ids.into_iter().zip(new));
                RateDecision::Allowed
            }
            Err(limited) => limited,
        }
    }
}
