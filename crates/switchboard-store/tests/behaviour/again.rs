//! Writes sent again: a store call whose reply was lost may reach the backend twice (the Redis
//! Cluster client sends a command again when its connection dropped or its reply came later than
//! the command timeout, see `resent.rs`). Here the second sending is a second call with the same
//! arguments, on every backend: it must take effect once and answer as the first did.

use switchboard_store::*;

use crate::harness::*;

/// A session created twice with one record is one session: both calls answer `Created`, it is
/// counted once under `session.max_sessions` and once under its principal's
/// `max_sessions_per_principal`, even when the first call took the last place.
pub async fn a_creation_sent_again_creates_one_session(kind: Kind) {
    let env = Env::new(kind, |c| {
        c.max_sessions = 2;
        c.max_sessions_per_principal = 2;
    });
    let a = env.node("a").await;
    let of = |principal: &str| SessionRecord {
        principal: principal.into(),
        ..record(&sid())
    };
    let first = of("alice");
    for sending in 1..=2 {
        let outcome = a.create_session(&first).await.unwrap();
        assert_eq!(outcome, CreateOutcome::Created, "sending {sending}");
    }
    assert_eq!(a.count_sessions().await.unwrap(), 1, "counted once");
    // Alice's second place is still free (her first session counted once), and it is the last.
    let second = of("alice");
    assert_eq!(
        a.create_session(&second).await.unwrap(),
        CreateOutcome::Created
    );
    let again = a.create_session(&second).await.unwrap();
    assert_eq!(again, CreateOutcome::Created, "the last place, sent again");
    assert_eq!(a.count_sessions().await.unwrap(), 2);
    assert_eq!(
        a.create_session(&of("bob")).await.unwrap(),
        CreateOutcome::AtCapacity
    );
    assert_eq!(begin_ok(&a, &second.id, None).await, second);
}

/// A request registered with its admission (`begin`, `begin_rated`) and sent again is admitted
/// again, not refused as a duplicate of itself: its in-flight entry (same id, node and stream)
/// is its own. It is registered once, and where the admission takes its rates (memory, Redis
/// standalone and Sentinel) they count once.
pub async fn a_registration_sent_again_is_admitted_once(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let rates = [Rate::new("principal", &sid(), "p", 0.01, 2)];
    let s1 = stream();
    let first = inflight("1", &s1, "a", &format!("a/{s1}"));
    for sending in 1..=2 {
        let outcome = a.begin_rated(&id, &first, &rates).await.unwrap();
        assert!(
            matches!(outcome, BeginOutcome::Ready(_)),
            "sending {sending}: {outcome:?}"
        );
    }
    let s2 = stream();
    let plain = inflight("2", &s2, "a", &format!("a/{s2}"));
    for sending in 1..=2 {
        let outcome = a.begin(&id, Some(&plain)).await.unwrap();
        assert!(
            matches!(outcome, BeginOutcome::Ready(_)),
            "begin, sending {sending}: {outcome:?}"
        );
    }
    let mut keys: Vec<String> = a
        .in_flight(&id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.request_key)
        .collect();
    keys.sort();
    assert_eq!(keys, ["1", "2"], "each registered once");
    // The rates' second place is still free where the admission took them.
    let s3 = stream();
    let next = inflight("3", &s3, "a", &format!("a/{s3}"));
    let outcome = a.begin_rated(&id, &next, &rates).await.unwrap();
    assert!(matches!(outcome, BeginOutcome::Ready(_)), "{outcome:?}");
    let s4 = stream();
    let over = inflight("4", &s4, "a", &format!("a/{s4}"));
    let outcome = a.begin_rated(&id, &over, &rates).await.unwrap();
    if a.folds_rates() {
        assert!(
            matches!(outcome, BeginOutcome::Limited { .. }),
            "{outcome:?}"
        );
    }
    // Another request with a running request's id is still a duplicate.
    let s5 = stream();
    let other = inflight("1", &s5, "a", &format!("a/{s5}"));
    let outcome = a.begin(&id, Some(&other)).await.unwrap();
    assert!(
        matches!(outcome, BeginOutcome::DuplicateId { .. }),
        "{outcome:?}"
    );
}

/// An upstream-session swap sent again after it was applied answers `Swapped` (the entries are
/// as it wrote them), not `Changed`: the node that made the upstream session must not take
/// itself for the loser of a race and delete it. Another node's different entries still make a
/// late swap `Changed`.
pub async fn an_upstream_swap_sent_again_is_swapped(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let id = new_session(&a).await;
    let entries = vec![
        ("files".to_owned(), Some("s1|2025-11-25".to_owned())),
        ("files#binding".to_owned(), Some("{}".to_owned())),
    ];
    for sending in 1..=2 {
        let swap = a.swap_upstream_sessions(&id, "files", None, entries.clone());
        assert_eq!(
            swap.await.unwrap(),
            UpstreamSwap::Swapped,
            "sending {sending}"
        );
    }
    let theirs = vec![("files".to_owned(), Some("s2|2025-11-25".to_owned()))];
    let swap = b.swap_upstream_sessions(&id, "files", None, theirs);
    match swap.await.unwrap() {
        UpstreamSwap::Changed(map) => {
            assert_eq!(map.get("files").map(String::as_str), Some("s1|2025-11-25"));
        }
        other => panic!("expected Changed, got {other:?}"),
    }
    let record = begin_ok(&b, &id, None).await;
    assert_eq!(
        record.upstream_sessions.get("files").map(String::as_str),
        Some("s1|2025-11-25")
    );
}
