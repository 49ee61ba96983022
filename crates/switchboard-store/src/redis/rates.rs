//! Rate limits over Redis ([`crate::rate`]): the arguments that fold them into the `BEGIN`
//! script, and [`RedisStore::take_rates_now`], the `RATES` script on its own.
//!
//! Standalone and Sentinel: every rate key sits on the one primary, so one script takes them all
//! (atomically, with the session's admission). Redis Cluster: a script may only touch keys of
//! one slot, and a principal's keys must be shared by all its sessions, so the rates are taken by
//! one `RATES` script per [`crate::Rate::tag`] (the principal's own and per-tool limits share
//! the principal's tag; an upstream's has its own), sent at the same time as the admission: one
//! more command per tag on the wire, no extra sequential round trip. There, a request refused by
//! one tag's limits may still have moved another tag's.
//!
//! A take counts once however often it is sent. The Redis Cluster client sends a command again
//! when its connection dropped before the reply came (`RetryMethod::Reconnect`, redis 1.8.1
//! `cluster_handling/async_connection/request.rs`), and a take whose first sending ran then
//! counted twice against the client's limits. There each call gives its `RATES` scripts one take
//! id: a take that passed leaves `p:rlt:{<tag>}:<id>` for [`super::RESEND_WINDOW`], and a
//! sending that finds it takes nothing and answers `Allowed`. Standalone and Sentinel
//! connections never send a command again and the node does not retry a take, so there a take
//! carries no id (the `BEGIN` script's folded limits neither): an id costs Redis CPU on every
//! take (docs/redis.md, "What a failover can lose").

use ::redis::{ScriptInvocation, Value};

use super::scripts::RATES;
use super::{codec, RedisStore};
use crate::error::StoreError;
use crate::model::{BeginOutcome, SessionRecord};
use crate::rate::{Rate, RateDecision};
use crate::rules;
use crate::traits::StoreResult;

impl RedisStore {
    /// Adds `rates` to a `BEGIN` invocation: their keys after the session's, their count and
    /// (interval, tolerance) pairs after its other arguments (see `take_rates` in `scripts`).
    pub(super) fn rate_args(&self, inv: &mut ScriptInvocation<'_>, rates: &[Rate]) {
        add_rates(inv, rates, |r| self.keys.rate(r));
    }

    /// Checks and takes `rates` without a session: one `RATES` script per tag, all sent at once
    /// (standalone and Sentinel: one tag's worth is all of them, in one script).
    pub(super) async fn take_rates_now(&self, rates: &[Rate]) -> StoreResult<RateDecision> {
        if rates.is_empty() {
            return Ok(RateDecision::Allowed);
        }
        let groups: Vec<Vec<Rate>> = if self.keys.sharded() {
            let mut tags: Vec<&str> = rates.iter().map(|r| r.tag.as_str()).collect();
            tags.sort_unstable();
            tags.dedup();
            tags.iter()
                .map(|t| rates.iter().filter(|r| r.tag == *t).cloned().collect())
                .collect()
        } else {
            vec![rates.to_vec()]
        };
        let take = self
            .keys
            .sharded()
            .then(|| format!("{:016x}", rand::random::<u64>()));
        let runs = groups
            .iter()
            .map(|group| self.run_rates(group, take.as_deref()));
        let decisions = futures::future::try_join_all(runs).await?;
        Ok(longest(decisions))
    }

    /// One `RATES` script over `rates` (one tag's, on Redis Cluster), with the call's take id
    /// when it has one.
    async fn run_rates(&self, rates: &[Rate], take: Option<&str>) -> StoreResult<RateDecision> {
        let mut inv = RATES.prepare_invoke();
        add_rates(&mut inv, rates, |r| self.keys.rate(r));
        if let (Some(take), Some(first)) = (take, rates.first()) {
            inv.key(self.keys.rate_take(&first.tag, take))
                .arg(rules::millis(super::RESEND_WINDOW));
        }
        let reply: Vec<i64> = self.invoke(&inv).await?;
        match reply.as_slice() {
            [0] => Ok(RateDecision::Allowed),
            [index, wait] => Ok(refusal(rates, *index, *wait)),
            other => Err(StoreError::Corrupt(format!("rates reply {other:?}"))),
        }
    }
}

fn add_rates(inv: &mut ScriptInvocation<'_>, rates: &[Rate], key: impl Fn(&Rate) -> String) {
    inv.arg(rates.len());
    for r in rates {
        inv.key(key(r)).arg(r.interval_ms).arg(r.tolerance_ms);
    }
}

fn refusal(rates: &[Rate], index: i64, wait: i64) -> RateDecision {
    let i = usize::try_from(index - 1).unwrap_or(0).min(rates.len() - 1);
    RateDecision::Limited {
        limit: rates[i].name.clone(),
        retry_after_ms: u64::try_from(wait).unwrap_or(1).max(1),
    }
}

/// The refusal with the longest wait among `decisions`, or `Allowed`.
fn longest(decisions: Vec<RateDecision>) -> RateDecision {
    decisions
        .into_iter()
        .max_by_key(|d| match d {
            RateDecision::Allowed => 0,
            RateDecision::Limited { retry_after_ms, .. } => *retry_after_ms,
        })
        .unwrap_or(RateDecision::Allowed)
}

/// A `BEGIN` reply of status 4: `running` is `"<index> <wait ms>"`.
pub(super) fn limited(
    record: SessionRecord,
    running: &Value,
    rates: &[Rate],
) -> StoreResult<BeginOutcome> {
    let text = codec::string(running)?;
    let parsed = text
        .split_once(' ')
        .and_then(|(i, w)| Some((i.parse::<i64>().ok()?, w.parse::<i64>().ok()?)));
    let Some((index, wait)) = parsed.filter(|_| !rates.is_empty()) else {
        return Err(StoreError::Corrupt(format!("begin rate refusal {text:?}")));
    };
    let RateDecision::Limited {
        limit,
        retry_after_ms,
    } = refusal(rates, index, wait)
    else {
        unreachable!("refusal always refuses")
    };
    Ok(BeginOutcome::Limited {
        record,
        limit,
        retry_after_ms,
    })
}
