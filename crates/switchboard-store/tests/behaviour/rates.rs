//! Rate limits (GCRA, `switchboard_store::rate`): taken in a request's admission where the
//! backend folds them (memory, Redis standalone and Sentinel: the `BEGIN` script), else beside
//! it (Redis Cluster: `take_rates` at the same time, as the node does), shared by every node.

use std::sync::Arc;

use switchboard_store::*;

use crate::harness::*;

/// What the node does for a request: the admission with its rates folded in, or (Redis Cluster)
/// the admission and the rates at the same time.
async fn admit(store: &Arc<dyn Store>, sid: &str, key: &str, rates: &[Rate]) -> BeginOutcome {
    if store.folds_rates() {
        return store.check(sid, key, rates).await.unwrap();
    }
    let (outcome, decision) = tokio::join!(store.check(sid, key, &[]), store.take_rates(rates));
    match (outcome.unwrap(), decision.unwrap()) {
        (
            BeginOutcome::Ready(record),
            RateDecision::Limited {
                limit,
                retry_after_ms,
            },
        ) => BeginOutcome::Limited {
            record,
            limit,
            retry_after_ms,
        },
        (outcome, _) => outcome,
    }
}

/// What the node does for a request registered with its admission (a batch member, a legacy
/// HTTP+SSE or WebSocket request): `begin_rated`, or (Redis Cluster) `begin_rated` without the
/// rates and `take_rates` at the same time, a refused request's registration taken back.
async fn admit_registering(
    store: &Arc<dyn Store>,
    sid: &str,
    req: &InflightRequest,
    rates: &[Rate],
) -> BeginOutcome {
    if store.folds_rates() {
        return store.begin_rated(sid, req, rates).await.unwrap();
    }
    let admitted = store.begin_rated(sid, req, &[]);
    let (outcome, decision) = tokio::join!(admitted, store.take_rates(rates));
    match (outcome.unwrap(), decision.unwrap()) {
        (
            BeginOutcome::Ready(record),
            RateDecision::Limited {
                limit,
                retry_after_ms,
            },
        ) => {
            let stream = Some(req.stream.as_str());
            store.finish(sid, &req.request_key, stream).await.unwrap();
            BeginOutcome::Limited {
                record,
                limit,
                retry_after_ms,
            }
        }
        (outcome, _) => outcome,
    }
}

/// One request per second, burst 3, for a principal named by a fresh tag.
fn principal(tag: &str) -> Rate {
    Rate::new("principal", tag, "p", 1.0, 3)
}

/// A burst passes across two nodes, then the limit refuses with the wait until the next slot
/// (under a second at 1/s), naming itself; the session is still returned.
pub async fn a_burst_passes_then_the_limit_refuses_on_every_node(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let id = new_session(&a).await;
    let rates = [principal(&sid())];
    for (n, store) in [&a, &b, &a].into_iter().enumerate() {
        let outcome = admit(store, &id, &n.to_string(), &rates).await;
        assert!(
            matches!(outcome, BeginOutcome::Ready(_)),
            "{n}: {outcome:?}"
        );
    }
    match admit(&b, &id, "9", &rates).await {
        BeginOutcome::Limited {
            record: r,
            limit,
            retry_after_ms,
        } => {
            assert_eq!(r, record(&id));
            assert_eq!(limit, "principal");
            assert!((1..=1000).contains(&retry_after_ms), "{retry_after_ms}");
        }
        other => panic!("expected Limited, got {other:?}"),
    }
}

/// Without a session (`initialize`): `take_rates` alone; no rates pass without a round trip.
pub async fn rates_are_taken_without_a_session(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let rates = [Rate::new("principal", &sid(), "p", 0.5, 2)];
    assert_eq!(a.take_rates(&rates).await.unwrap(), RateDecision::Allowed);
    assert_eq!(b.take_rates(&rates).await.unwrap(), RateDecision::Allowed);
    match a.take_rates(&rates).await.unwrap() {
        RateDecision::Limited {
            limit,
            retry_after_ms,
        } => {
            assert_eq!(limit, "principal");
            assert!((1..=2000).contains(&retry_after_ms), "{retry_after_ms}");
        }
        other => panic!("expected Limited, got {other:?}"),
    }
    assert_eq!(a.take_rates(&[]).await.unwrap(), RateDecision::Allowed);
}

/// Limits of one tag pass together or not at all: a request refused by its tool's limit moves
/// its principal's limit neither. Another principal's limits are its own.
pub async fn a_refused_request_moves_no_limit(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let tag = sid();
    let loose = Rate::new("principal", &tag, "p", 0.1, 2);
    let tight = Rate::new("tool:echo", &tag, "t:echo", 0.1, 1);
    let both = [loose.clone(), tight];
    assert!(matches!(
        admit(&a, &id, "1", &both).await,
        BeginOutcome::Ready(_)
    ));
    match admit(&a, &id, "2", &both).await {
        BeginOutcome::Limited { limit, .. } => assert_eq!(limit, "tool:echo"),
        other => panic!("expected Limited, got {other:?}"),
    }
    // The principal's second slot is still free, then taken.
    let alone = [loose];
    assert!(matches!(
        admit(&a, &id, "3", &alone).await,
        BeginOutcome::Ready(_)
    ));
    assert!(matches!(
        admit(&a, &id, "4", &alone).await,
        BeginOutcome::Limited { .. }
    ));
    let other = [Rate::new("principal", &sid(), "p", 0.1, 1)];
    assert!(matches!(
        admit(&a, &id, "5", &other).await,
        BeginOutcome::Ready(_)
    ));
}

/// A missing session stays missing with rates; a duplicate id is refused as before.
pub async fn other_refusals_come_first(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let rates = [principal(&sid())];
    assert_eq!(admit(&a, &sid(), "1", &rates).await, BeginOutcome::Missing);
    let id = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", &format!("a/{s}")))).await;
    let outcome = admit(&a, &id, "1", &rates).await;
    assert!(
        matches!(outcome, BeginOutcome::DuplicateId { .. }),
        "{outcome:?}"
    );
}

/// A request registered with its admission (`begin_rated`) is registered only when its limits
/// pass: a refused one leaves no in-flight entry, so its id is free at once.
pub async fn begin_rated_registers_only_what_its_limits_let_through(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let id = new_session(&a).await;
    let rates = [Rate::new("principal", &sid(), "p", 0.1, 1)];
    let (s1, s2) = (stream(), stream());
    let first = inflight("1", &s1, "a", &format!("a/{s1}"));
    let outcome = admit_registering(&a, &id, &first, &rates).await;
    assert!(matches!(outcome, BeginOutcome::Ready(_)), "{outcome:?}");
    let second = inflight("2", &s2, "b", &format!("b/{s2}"));
    match admit_registering(&b, &id, &second, &rates).await {
        BeginOutcome::Limited {
            record: r, limit, ..
        } => {
            assert_eq!(r, record(&id));
            assert_eq!(limit, "principal");
        }
        other => panic!("expected Limited, got {other:?}"),
    }
    let listed = a.in_flight(&id).await.unwrap();
    let keys: Vec<&str> = listed.iter().map(|e| e.request_key.as_str()).collect();
    assert_eq!(keys, ["1"], "only the admitted request is in flight");
    let again = b.check(&id, "2", &[]).await.unwrap();
    assert!(matches!(again, BeginOutcome::Ready(_)), "{again:?}");
    let running = b.check(&id, "1", &[]).await.unwrap();
    assert!(
        matches!(running, BeginOutcome::DuplicateId { .. }),
        "{running:?}"
    );
}
