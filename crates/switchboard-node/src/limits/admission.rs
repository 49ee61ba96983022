//! Where the limits are taken: in a request's admission ([`check`], one store round trip with
//! the session's checks where the store folds them; Redis Cluster: the limits' scripts sent at
//! the same time), and for requests without a session ([`without_session`]: `initialize` and
//! 2026-07-28 requests). Every decision is counted (`switchboard_rate_limit_decisions_total`,
//! [`crate::telemetry`]).

use switchboard_store::{BeginOutcome, InflightRequest, Rate, RateDecision, StoreError};

use super::OnStoreError;
use crate::edge::error::HttpError;
use crate::state::App;
use crate::telemetry;

/// How a request of a session is admitted.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Admit<'a> {
    /// Checked without registering it (the request's key): a POST, which registers in flight
    /// only if its answer streams ([`switchboard_store::SessionStore::check`]).
    Check(&'a str),
    /// Checked and registered in flight in the same round trip (a 2025-03-26 batch's member,
    /// a legacy HTTP+SSE or WebSocket request: [`switchboard_store::SessionStore::begin_rated`]).
    Register(&'a InflightRequest),
}

impl Admit<'_> {
    /// The store's admission, taking `rates` where the store folds them.
    async fn run(self, app: &App, sid: &str, rates: &[Rate]) -> Result<BeginOutcome, StoreError> {
        match self {
            Admit::Check(key) => app.store.check(sid, key, rates).await,
            Admit::Register(req) => app.store.begin_rated(sid, req, rates).await,
        }
    }
}

/// The admission of a request on session `sid` with its limits `rates`: the store's `check` or
/// `begin_rated` (`admit`), which takes the rates in its own round trip where it can
/// ([`switchboard_store::SessionStore::folds_rates`]); else (Redis Cluster) the admission and
/// `take_rates` at the same time, so the limits add no sequential round trip (a registered
/// request the limits then refuse is unregistered again, one more round trip for a refusal
/// only). A limited request comes back as [`BeginOutcome::Limited`].
pub(crate) async fn check(
    app: &App,
    sid: &str,
    admit: Admit<'_>,
    rates: &[Rate],
) -> Result<BeginOutcome, HttpError> {
    if rates.is_empty() {
        return Ok(admit.run(app, sid, &[]).await?);
    }
    if app.store.folds_rates() {
        let outcome = admit.run(app, sid, rates).await;
        match &outcome {
            Ok(BeginOutcome::Ready(_)) => telemetry::rates_allowed(rates),
            Ok(BeginOutcome::Limited { limit, .. }) => telemetry::rate_limited(limit),
            Ok(_) => {}
            Err(_) => telemetry::rate_store_error(rates),
        }
        return Ok(outcome?);
    }
    let (outcome, decision) = tokio::join!(admit.run(app, sid, &[]), app.store.take_rates(rates));
    let outcome = outcome?;
    let decision = decided(app.cfg.rate_limits.on_store_error, rates, decision)?;
    Ok(match (outcome, decision) {
        (
            BeginOutcome::Ready(record),
            RateDecision::Limited {
                limit,
                retry_after_ms,
            },
        ) => {
            if let Admit::Register(req) = admit {
                // Registered by the admission: taken back, as a request answered at once is.
                let stream = Some(req.stream.as_str());
                app.store.finish(sid, &req.request_key, stream).await?;
            }
            BeginOutcome::Limited {
                record,
                limit,
                retry_after_ms,
            }
        }
        (outcome, _) => outcome,
    })
}

/// The limits of a request without a session, run as `principal`: `initialize` (its
/// `principal` limit only: per-tool and per-upstream limits do not apply to it) and 2026-07-28
/// requests (every limit `method` and `raw` choose, as in a session). Refused with
/// [`HttpError::RateLimited`] (429) at the limit. One store round trip (`take_rates`), only when
/// a limit applies to the request; none otherwise.
pub(crate) async fn without_session(
    app: &App,
    principal: &str,
    method: &str,
    raw: &serde_json::Value,
) -> Result<(), HttpError> {
    let limits = &app.cfg.rate_limits;
    let rates = limits.rates_for(principal, method, raw);
    if rates.is_empty() {
        return Ok(());
    }
    let decision = app.store.take_rates(&rates).await;
    match decided(limits.on_store_error, &rates, decision)? {
        RateDecision::Allowed => Ok(()),
        RateDecision::Limited {
            limit,
            retry_after_ms,
        } => {
            let policy = limits
                .spec_of(&limit)
                .map(|s| (u64::from(s.burst()), s.window_secs()));
            Err(HttpError::RateLimited {
                limit,
                retry_after_ms,
                policy,
            })
        }
    }
}

/// Counts a decision of `take_rates`; a store error is let through or refused as `policy`
/// (`rate_limits.on_store_error`) says.
fn decided(
    policy: OnStoreError,
    rates: &[Rate],
    decision: Result<RateDecision, StoreError>,
) -> Result<RateDecision, HttpError> {
    match decision {
        Ok(RateDecision::Allowed) => {
            telemetry::rates_allowed(rates);
            Ok(RateDecision::Allowed)
        }
        Ok(RateDecision::Limited {
            limit,
            retry_after_ms,
        }) => {
            telemetry::rate_limited(&limit);
            Ok(RateDecision::Limited {
                limit,
                retry_after_ms,
            })
        }
        Err(e) => {
            telemetry::rate_store_error(rates);
            match policy {
                OnStoreError::Open => {
                    tracing::warn!(error = %e, "rate limits not checked (store error); let through (rate_limits.on_store_error = \"open\")");
                    Ok(RateDecision::Allowed)
                }
                OnStoreError::Closed => Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_errors(limit: &str) -> u64 {
        let labels = switchboard_telemetry::metrics::RateDecisionLabels {
            decision: "store_error",
            limit: limit.to_owned(),
        };
        switchboard_telemetry::metrics::get()
            .rate_limit_decisions
            .get_or_create(&labels)
            .get()
    }

    #[test]
    fn a_store_error_is_let_through_or_refused_as_configured_and_counted() {
        let rates = [Rate::new("tool:decided-test", "p", "t", 1.0, 1)];
        let failed = || Err(StoreError::Corrupt("down".into()));
        let open = decided(OnStoreError::Open, &rates, failed());
        assert_eq!(open, Ok(RateDecision::Allowed));
        let closed = decided(OnStoreError::Closed, &rates, failed());
        assert!(matches!(closed, Err(HttpError::Store(_))), "{closed:?}");
        assert_eq!(store_errors("tool:decided-test"), 2);
        let limited = RateDecision::Limited {
            limit: "tool:decided-test".into(),
            retry_after_ms: 5,
        };
        let passed = decided(OnStoreError::Closed, &rates, Ok(limited.clone()));
        assert_eq!(passed, Ok(limited));
    }
}
