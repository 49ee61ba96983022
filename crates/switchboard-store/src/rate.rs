//! Rate limits: the generic cell rate algorithm (GCRA), shared by both backends.
//!
//! A limit of `rate` requests per second with a burst of `burst` has an emission interval
//! `T = 1000 / rate` ms and a tolerance `τ = (burst - 1) · T`. Its state is one number, the
//! theoretical arrival time (TAT, ms): a request at `now` is allowed when
//! `max(TAT, now) - now ≤ τ`, and then moves the TAT to `max(TAT, now) + T`; a refused request
//! changes nothing and may retry after `max(TAT, now) - now - τ` ms. So `burst` requests pass at
//! once after a quiet spell, and then one every `T`. A state whose TAT is in the past is the
//! same as no state, so it is stored with a time to live of `TAT - now` (the time it matters).
//!
//! Several limits checked together (a principal's, its tool's, the upstream's) pass only if
//! every one passes, and then all move; a refusal names the limit whose wait is longest.
//!
//! The Redis backend runs the same arithmetic in Lua on the Redis server's clock (`TIME`), so
//! nodes' clocks never matter; the memory backend runs [`decide`] on the process's monotonic
//! clock.

/// One limit to check for a request, as the node chose it from `rate_limits`.
#[derive(Clone, Debug, PartialEq)]
pub struct Rate {
    /// The limit's name for answers, logs and metrics (bounded: one per configured limit, e.g.
    /// `principal`, `tool:echo`, `upstream:weather`).
    pub name: String,
    /// The group of rates that share a Redis Cluster slot (e.g. the principal, for its own limit
    /// and its per-tool ones): the hash tag of the key. Any string.
    pub tag: String,
    /// The state's identity inside its group (e.g. `p` or `t:echo`). Any string.
    pub key: String,
    /// Emission interval `T` in ms (1000 / requests per second), above 0.
    pub interval_ms: f64,
    /// Tolerance `τ` in ms ((burst - 1) · `T`), 0 or more.
    pub tolerance_ms: f64,
}

impl Rate {
    /// A limit of `per_second` requests per second (above 0) with a burst of `burst` (at least
    /// 1; 0 is taken as 1).
    pub fn new(name: &str, tag: &str, key: &str, per_second: f64, burst: u32) -> Rate {
        let interval_ms = 1000.0 / per_second;
        Rate {
            name: name.to_owned(),
            tag: tag.to_owned(),
            key: key.to_owned(),
            interval_ms,
            tolerance_ms: interval_ms * f64::from(burst.max(1) - 1),
        }
    }
}

/// What checking a request's rates decided.
#[derive(Clone, Debug, PartialEq)]
pub enum RateDecision {
    /// Every limit passed (or there were none); their states moved.
    Allowed,
    /// A limit refused; nothing moved.
    Limited {
        /// The refusing limit's [`Rate::name`] (the longest wait when several refused).
        limit: String,
        /// Milliseconds until the request would pass (rounded up, at least 1).
        retry_after_ms: u64,
    },
}

/// GCRA for one limit: `Ok(new TAT)` when a request at `now` passes a state at `tat` (`None`: no
/// state), else `Err(wait in ms)` (above 0). All in ms on one clock.
pub fn gcra(tat: Option<f64>, now: f64, rate: &Rate) -> Result<f64, f64> {
    let tat = tat.map_or(now, |t| t.max(now));
    let ahead = tat - now;
    if ahead > rate.tolerance_ms {
        Err(ahead - rate.tolerance_ms)
    } else {
        Ok(tat + rate.interval_ms)
    }
}

/// GCRA for several limits checked together (see the module doc): the new TATs, in order, when
/// every one passes; else the refusal.
pub fn decide(tats: &[Option<f64>], now: f64, rates: &[Rate]) -> Result<Vec<f64>, RateDecision> {
    let mut new = Vec::with_capacity(rates.len());
    let mut worst: Option<(usize, f64)> = None;
    for (i, (tat, rate)) in tats.iter().zip(rates).enumerate() {
        match gcra(*tat, now, rate) {
            Ok(t) => new.push(t),
            Err(wait) if worst.is_none_or(|(_, w)| wait > w) => worst = Some((i, wait)),
            Err(_) => {}
        }
    }
    match worst {
        None => Ok(new),
        Some((i, wait)) => Err(RateDecision::Limited {
            limit: rates[i].name.clone(),
            retry_after_ms: wait_ms(wait),
        }),
    }
}

/// A wait in ms as the answers give it: whole milliseconds, rounded up, at least 1.
pub fn wait_ms(wait: f64) -> u64 {
    (wait.ceil() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(per_second: f64, burst: u32) -> Rate {
        Rate::new("principal", "alice", "p", per_second, burst)
    }

    /// Requests at `times` (ms); which passed.
    fn run(rate: &Rate, times: &[f64]) -> Vec<bool> {
        let mut tat = None;
        times
            .iter()
            .map(|&now| match gcra(tat, now, rate) {
                Ok(t) => {
                    tat = Some(t);
                    true
                }
                Err(_) => false,
            })
            .collect()
    }

    #[test]
    fn a_burst_passes_at_once_then_one_per_interval() {
        let rate = limit(10.0, 5);
        assert_eq!(rate.interval_ms, 100.0);
        assert_eq!(rate.tolerance_ms, 400.0);
        let at_once = run(&rate, &[0.0; 7]);
        assert_eq!(at_once, [true, true, true, true, true, false, false]);
    }

    #[test]
    fn the_steady_rate_is_the_configured_one() {
        // 20/s, burst 1, offered 60/s for 10 s: 200 pass (one per 50 ms), give or take the edge.
        let rate = limit(20.0, 1);
        let times: Vec<f64> = (0..600).map(|i| f64::from(i) * 1000.0 / 60.0).collect();
        let passed = run(&rate, &times).into_iter().filter(|p| *p).count();
        assert!((199..=201).contains(&passed), "{passed}");
    }

    #[test]
    fn retry_after_is_the_wait_until_the_request_would_pass() {
        let rate = limit(10.0, 2);
        let tat = gcra(None, 0.0, &rate).unwrap();
        let tat = gcra(Some(tat), 0.0, &rate).unwrap();
        assert_eq!(tat, 200.0);
        // Third at t=30: ahead 170 > τ 100, wait 70 ms.
        assert_eq!(gcra(Some(tat), 30.0, &rate), Err(70.0));
        // At t=100 it passes.
        assert_eq!(gcra(Some(tat), 100.0, &rate), Ok(300.0));
        assert_eq!(wait_ms(0.2), 1);
        assert_eq!(wait_ms(69.01), 70);
    }

    #[test]
    fn a_past_state_is_no_state() {
        let rate = limit(1.0, 1);
        assert_eq!(gcra(Some(-5000.0), 0.0, &rate), gcra(None, 0.0, &rate));
    }

    #[test]
    fn several_limits_pass_together_or_refuse_with_the_longest_wait() {
        let principal = limit(10.0, 1);
        let tool = Rate::new("tool:echo", "alice", "t:echo", 1.0, 1);
        let rates = [principal, tool];
        let first = decide(&[None, None], 0.0, &rates).unwrap();
        assert_eq!(first, vec![100.0, 1000.0]);
        let second = decide(&[Some(100.0), Some(1000.0)], 50.0, &rates);
        assert_eq!(
            second,
            Err(RateDecision::Limited {
                limit: "tool:echo".into(),
                retry_after_ms: 950
            })
        );
        assert_eq!(decide(&[], 0.0, &[]), Ok(vec![]));
    }
}
