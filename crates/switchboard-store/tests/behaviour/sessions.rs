//! Session records: create, begin, finish, update, delete, the cap, liveness.

use std::collections::BTreeMap;
use std::time::Duration;

use switchboard_store::*;
use switchboard_tests::eventually::eventually;

use crate::harness::*;

pub async fn create_then_begin_returns_the_record(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = sid();
    let rec = record(&id);
    assert_eq!(
        a.create_session(&rec).await.unwrap(),
        CreateOutcome::Created
    );
    assert_eq!(
        a.begin(&id, None).await.unwrap(),
        BeginOutcome::Ready(rec.clone())
    );
    let b = env.node("b").await;
    assert_eq!(b.begin(&id, None).await.unwrap(), BeginOutcome::Ready(rec));
    assert_eq!(a.count_sessions().await.unwrap(), 1);
    assert_eq!(
        a.backend(),
        if kind == Kind::Memory {
            "memory"
        } else {
            "redis"
        }
    );
    assert_eq!(b.node_id(), "b");
}

pub async fn begin_on_an_unknown_session_is_missing(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = sid();
    assert_eq!(a.begin(&id, None).await.unwrap(), BeginOutcome::Missing);
    let req = inflight("1", &stream(), "a", "a/1");
    assert_eq!(
        a.begin(&id, Some(&req)).await.unwrap(),
        BeginOutcome::Missing
    );
    assert_eq!(env.keys_of(&id).await, 0, "a missing session gets no keys");
}

pub async fn duplicate_request_ids_are_refused_and_register_nothing(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let id = new_session(&a).await;
    let (s1, s2) = (stream(), stream());
    begin_ok(&a, &id, Some(&inflight("\"x\"", &s1, "a", "a/1"))).await;
    match b
        .begin(&id, Some(&inflight("\"x\"", &s2, "b", "b/1")))
        .await
        .unwrap()
    {
        BeginOutcome::DuplicateId { record: r, node } => {
            assert_eq!(r, record(&id));
            assert_eq!(node, "a");
        }
        other => panic!("expected DuplicateId, got {other:?}"),
    }
    assert_eq!(b.running(&id, &s2).await.unwrap(), None);
    assert_eq!(b.claim(&id, &s2, "b/2").await.unwrap(), Claim::Unknown);
    assert_eq!(
        b.replay(&id, &s2, "0-0", 1000).await.unwrap(),
        Replay::UnknownStream
    );
    let run = RunningRequest {
        node: "a".into(),
        request_key: "\"x\"".into(),
    };
    assert_eq!(b.running(&id, &s1).await.unwrap(), Some(run));
    // Another id is fine.
    begin_ok(&b, &id, Some(&inflight("2", &s2, "b", "b/1"))).await;
}

pub async fn finish_as_json_forgets_the_stream(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    assert!(a.running(&id, &s).await.unwrap().is_some());
    a.finish(&id, "1", Some(&s)).await.unwrap();
    assert_eq!(a.running(&id, &s).await.unwrap(), None);
    assert_eq!(
        a.replay(&id, &s, "0-0", 1000).await.unwrap(),
        Replay::UnknownStream
    );
    assert_eq!(a.claim(&id, &s, "a/2").await.unwrap(), Claim::Unknown);
    assert!(!a.route_cancel(&id, "1", None).await.unwrap());
    // The id is free again.
    begin_ok(&a, &id, Some(&inflight("1", &stream(), "a", "a/1"))).await;
    // Only the record, the registry, the running and the in-flight hashes remain.
    assert_eq!(env.keys_of(&id).await, 4);
}

pub async fn finish_after_streaming_keeps_the_log(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    a.append(&id, &s, "progress", false).await.unwrap();
    a.append(&id, &s, "result", true).await.unwrap();
    a.finish(&id, "1", None).await.unwrap();
    let got = events(&a, &id, &s, "0-0").await;
    assert_eq!(
        got.iter()
            .map(|e| (e.data.as_str(), e.end))
            .collect::<Vec<_>>(),
        [("progress", false), ("result", true)]
    );
    assert!(!a.route_cancel(&id, "1", None).await.unwrap());
}

pub async fn updates_change_the_record(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let id = new_session(&a).await;
    let up = |u: SessionUpdate| {
        let a = a.clone();
        let id = id.clone();
        async move { assert!(a.update(&id, u).await.unwrap()) }
    };
    up(SessionUpdate::Initialized).await;
    up(SessionUpdate::LogLevel("debug".into())).await;
    for uri in ["file:///a", "file:///b", "file:///a", "file:///c"] {
        up(SessionUpdate::Subscription {
            uri: uri.into(),
            subscribed: true,
            upstream: Some("one".into()),
        })
        .await;
    }
    up(SessionUpdate::Subscription {
        uri: "file:///b".into(),
        subscribed: false,
        upstream: None,
    })
    .await;
    up(SessionUpdate::Subscription {
        uri: "file:///zz".into(),
        subscribed: false,
        upstream: None,
    })
    .await;
    let upstream = |name: &str, sid: Option<&str>| SessionUpdate::UpstreamSession {
        upstream: name.into(),
        session_id: sid.map(str::to_owned),
    };
    up(upstream("one", Some("u-1"))).await;
    up(upstream("two", Some("u-2/x\"y"))).await;
    up(upstream("one", Some("u-1b"))).await;
    up(upstream("two", None)).await;
    // The legacy HTTP+SSE transport records `initialize` on a session made by its GET.
    let params =
        serde_json::json!({"protocolVersion": "2024-11-05", "capabilities": {"sampling": {}}});
    up(SessionUpdate::Initialize {
        revision: "2024-11-05".into(),
        params: params.clone(),
    })
    .await;
    let mut want = record(&id);
    want.revision = "2024-11-05".into();
    want.initialize_params = params.into();
    want.initialized = true;
    want.log_level = Some("debug".into());
    want.subscriptions = vec!["file:///a".into(), "file:///c".into()];
    want.subscription_upstreams = BTreeMap::from([
        ("file:///a".to_owned(), "one".to_owned()),
        ("file:///c".to_owned(), "one".to_owned()),
    ]);
    want.upstream_sessions = BTreeMap::from([("one".to_owned(), "u-1b".to_owned())]);
    assert_eq!(begin_ok(&b, &id, None).await, want);
    // Emptied collections read back empty.
    for uri in ["file:///a", "file:///c"] {
        up(SessionUpdate::Subscription {
            uri: uri.into(),
            subscribed: false,
            upstream: None,
        })
        .await;
    }
    up(upstream("one", None)).await;
    let got = begin_ok(&b, &id, None).await;
    assert!(
        got.subscriptions.is_empty()
            && got.subscription_upstreams.is_empty()
            && got.upstream_sessions.is_empty(),
        "{got:?}"
    );
    assert!(!a.update(&sid(), SessionUpdate::Initialized).await.unwrap());
}

/// `begin_update` (the handshake's `notifications/initialized`): the record as it is after the
/// update, on the node that made it (cached or not) and on every other; another principal's
/// update changes nothing.
pub async fn begin_update_loads_and_updates_for_the_own_principal_only(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let id = new_session(&a).await;
    let mut want = record(&id);
    let ready = |o: BeginOutcome| match o {
        BeginOutcome::Ready(r) => r,
        other => panic!("begin_update: {other:?}"),
    };
    let other = r#"["i","mallory"]"#;
    let got = ready(
        a.begin_update(&id, other, SessionUpdate::Initialized)
            .await
            .unwrap(),
    );
    assert_eq!(got, want, "another principal's update is not applied");
    assert_eq!(begin_ok(&b, &id, None).await, want);
    let got = ready(
        a.begin_update(&id, "anonymous", SessionUpdate::Initialized)
            .await
            .unwrap(),
    );
    want.initialized = true;
    assert_eq!(got, want);
    assert_eq!(begin_ok(&b, &id, None).await, want);
    assert_eq!(begin_ok(&a, &id, None).await, want);
    // A change made on another node since `a` read the record comes back with the next one.
    assert!(b
        .update(&id, SessionUpdate::LogLevel("info".into()))
        .await
        .unwrap());
    let sub = SessionUpdate::Subscription {
        uri: "file:///a".into(),
        subscribed: true,
        upstream: Some("one".into()),
    };
    let got = ready(a.begin_update(&id, "anonymous", sub).await.unwrap());
    want.log_level = Some("info".into());
    want.subscriptions = vec!["file:///a".into()];
    want.subscription_upstreams = BTreeMap::from([("file:///a".to_owned(), "one".to_owned())]);
    assert_eq!(got, want);
    assert_eq!(begin_ok(&a, &id, None).await, want);
    assert_eq!(begin_ok(&b, &id, None).await, want);
    let unknown = sid();
    let gone = a.begin_update(&unknown, "anonymous", SessionUpdate::Initialized);
    assert_eq!(gone.await.unwrap(), BeginOutcome::Missing);
}

pub async fn upstream_sessions_swap_only_when_as_expected(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let b = env.node("b").await;
    let id = new_session(&a).await;
    let entries = |v: &str| {
        vec![
            ("up".to_owned(), Some(v.to_owned())),
            ("up#pin".to_owned(), Some(format!("pin of {v}"))),
        ]
    };
    // The first initialization expects nothing there.
    let first = a
        .swap_upstream_sessions(&id, "up", None, entries("s1|r"))
        .await
        .unwrap();
    assert_eq!(first, UpstreamSwap::Swapped);
    // A second node that also saw nothing loses the race and reads the winner's entries.
    let late = b
        .swap_upstream_sessions(&id, "up", None, entries("s2|r"))
        .await
        .unwrap();
    let current = BTreeMap::from([
        ("up".to_owned(), "s1|r".to_owned()),
        ("up#pin".to_owned(), "pin of s1|r".to_owned()),
    ]);
    assert_eq!(late, UpstreamSwap::Changed(current.clone()));
    assert_eq!(begin_ok(&b, &id, None).await.upstream_sessions, current);
    // Replacing the session it expects works; a removal among the entries removes, and the
    // entries apply in order (a name set then removed is gone).
    let swap = vec![
        ("up".to_owned(), Some("s3|r".to_owned())),
        ("up#pin".to_owned(), None),
        ("gone".to_owned(), Some("x".to_owned())),
        ("gone".to_owned(), None),
    ];
    let replaced = b
        .swap_upstream_sessions(&id, "up", Some("s1|r"), swap)
        .await
        .unwrap();
    assert_eq!(replaced, UpstreamSwap::Swapped);
    assert_eq!(
        begin_ok(&a, &id, None).await.upstream_sessions,
        BTreeMap::from([("up".to_owned(), "s3|r".to_owned())])
    );
    let stale = a
        .swap_upstream_sessions(&id, "up", Some("s1|r"), entries("s4|r"))
        .await;
    assert!(matches!(stale.unwrap(), UpstreamSwap::Changed(_)));
    assert_eq!(
        a.swap_upstream_sessions(&sid(), "up", None, entries("x|r"))
            .await
            .unwrap(),
        UpstreamSwap::Missing
    );
}

pub async fn the_session_cap_is_exact(kind: Kind) {
    let env = Env::new(kind, |c| c.max_sessions = 2);
    let a = env.node("a").await;
    let first = new_session(&a).await;
    new_session(&a).await;
    let third = sid();
    assert_eq!(
        a.create_session(&record(&third)).await.unwrap(),
        CreateOutcome::AtCapacity
    );
    assert_eq!(a.begin(&third, None).await.unwrap(), BeginOutcome::Missing);
    assert_eq!(env.keys_of(&third).await, 0);
    assert_eq!(a.count_sessions().await.unwrap(), 2);
    assert!(a.delete_session(&first).await.unwrap());
    assert_eq!(a.count_sessions().await.unwrap(), 1);
    assert_eq!(
        a.create_session(&record(&third)).await.unwrap(),
        CreateOutcome::Created
    );
}

pub async fn delete_removes_every_key_and_tells_every_node(kind: Kind) {
    let env = Env::new(kind, |c| c.max_events_per_stream = 2);
    let (a, b) = (env.node("a").await, env.node("b").await);
    let (mut ra, mut rb) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    let id = new_session(&a).await;
    takes_part(&b, &id).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    for i in 0..4 {
        a.append(&id, &s, &format!("e{i}"), false).await.unwrap();
    }
    a.append(&id, "get", "note", false).await.unwrap();
    a.register_pending(&id, "srv-1").await.unwrap();
    assert!(
        env.keys_of(&id).await >= 8,
        "record, st, run, inf, pend, 2 logs, a trim marker"
    );
    assert!(b.delete_session(&id).await.unwrap());
    let gone = BusMessage::Terminated { sid: id.clone() };
    assert_eq!(recv(&mut ra).await, gone);
    assert_eq!(recv(&mut rb).await, gone);
    assert_eq!(env.keys_of(&id).await, 0);
    assert!(!a.delete_session(&id).await.unwrap());
    quiet(&mut ra).await;
    assert_eq!(a.begin(&id, None).await.unwrap(), BeginOutcome::Missing);
    assert_eq!(a.count_sessions().await.unwrap(), 0);
}

pub async fn liveness_follows_heartbeats(kind: Kind) {
    let env = Env::new(kind, |c| c.node_ttl = Duration::from_millis(300));
    let (a, b) = (env.node("a").await, env.node("b").await);
    assert!(!b.is_alive("a").await.unwrap());
    assert!(
        !a.heartbeat().await.unwrap(),
        "the first heartbeat follows none"
    );
    assert!(b.is_alive("a").await.unwrap());
    assert!(!b.is_alive("b").await.unwrap());
    assert!(
        a.heartbeat().await.unwrap(),
        "the previous one is still live"
    );
    eventually("node a to be dead", Duration::from_secs(3), || {
        let b = b.clone();
        async move { (!b.is_alive("a").await.unwrap()).then_some(()) }
    })
    .await;
    assert!(
        !a.heartbeat().await.unwrap(),
        "a heartbeat after a lapse says so: other nodes may have taken over"
    );
    assert!(b.is_alive("a").await.unwrap());
}

pub async fn the_first_proposed_secret_is_agreed_by_every_node(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let first = a.agreed_secret("mrtr", b"key of a").await.unwrap();
    assert_eq!(first, b"key of a");
    assert_eq!(b.agreed_secret("mrtr", b"key of b").await.unwrap(), first);
    assert_eq!(a.agreed_secret("mrtr", b"again").await.unwrap(), first);
    let other = b.agreed_secret("other", b"second name").await.unwrap();
    assert_eq!(other, b"second name", "names are independent");
}

pub async fn a_node_subscribes_once(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let _rx = a.subscribe().await.unwrap();
    assert!(a.subscribe().await.is_err());
}

pub async fn in_flight_requests_per_session_are_capped(kind: Kind) {
    let env = Env::new(kind, |c| c.max_inflight_per_session = 2);
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let (s1, s2, s3) = (stream(), stream(), stream());
    begin_ok(&a, &id, Some(&inflight("1", &s1, "a", "a/1"))).await;
    begin_ok(&a, &id, Some(&inflight("2", &s2, "a", "a/2"))).await;
    match a
        .begin(&id, Some(&inflight("3", &s3, "a", "a/3")))
        .await
        .unwrap()
    {
        BeginOutcome::Busy(r) => assert_eq!(r.id, id),
        other => panic!("expected Busy, got {other:?}"),
    }
    assert_eq!(
        a.running(&id, &s3).await.unwrap(),
        None,
        "nothing registered"
    );
    // A plain load is never refused, and a finished request frees its place.
    assert!(matches!(
        a.begin(&id, None).await.unwrap(),
        BeginOutcome::Ready(_)
    ));
    a.finish(&id, "1", Some(&s1)).await.unwrap();
    begin_ok(&a, &id, Some(&inflight("3", &s3, "a", "a/3"))).await;
}

/// `in_flight` lists what is registered; `forget_in_flight` removes an entry only while it is the
/// one listed: the same id registered again since (another stream) is left alone.
pub async fn in_flight_entries_are_listed_and_forgotten_only_as_listed(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let (s1, s2) = (stream(), stream());
    begin_ok(&a, &id, Some(&inflight("1", &s1, "b", "b/1"))).await;
    let listed = a.in_flight(&id).await.unwrap();
    let expected = InflightEntry {
        request_key: "1".into(),
        node: "b".into(),
        stream: s1.clone(),
    };
    assert_eq!(listed, vec![expected.clone()]);
    // Ended elsewhere, then sent again with the same id: the stale listing must not remove it.
    a.finish(&id, "1", None).await.unwrap();
    begin_ok(&a, &id, Some(&inflight("1", &s2, "a", "a/1"))).await;
    assert!(!a.forget_in_flight(&id, &expected).await.unwrap());
    let now = a.in_flight(&id).await.unwrap();
    assert_eq!(now.len(), 1, "{now:?}");
    assert_eq!(
        (now[0].node.as_str(), now[0].stream.as_str()),
        ("a", s2.as_str())
    );
    // As listed: removed.
    assert!(a.forget_in_flight(&id, &now[0]).await.unwrap());
    assert!(a.in_flight(&id).await.unwrap().is_empty());
    // A gone session lists nothing.
    assert!(a
        .in_flight("0123456789abcdef0123456789abcdef")
        .await
        .unwrap()
        .is_empty());
}

/// `check` admits a request without registering it (the hot path's single round trip); a later
/// `register` makes it visible to every node: duplicate ids are refused, its stream delivers to
/// its holder, and the final event frees the id.
pub async fn check_admits_without_registering_until_register(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let id = new_session(&a).await;
    let keys = env.keys_of(&id).await;
    let s = stream();
    for store in [&a, &b] {
        match store.check(&id, "1", &[]).await.unwrap() {
            BeginOutcome::Ready(r) => assert_eq!(r, record(&id)),
            other => panic!("expected Ready, got {other:?}"),
        }
    }
    assert_eq!(env.keys_of(&id).await, keys, "check writes no key");
    assert_eq!(a.running(&id, &s).await.unwrap(), None);

    assert!(a
        .register(&id, &inflight("1", &s, "a", "a/1"))
        .await
        .unwrap());
    match b.check(&id, "1", &[]).await.unwrap() {
        BeginOutcome::DuplicateId { node, .. } => assert_eq!(node, "a"),
        other => panic!("expected DuplicateId, got {other:?}"),
    }
    let run = RunningRequest {
        node: "a".into(),
        request_key: "1".into(),
    };
    assert_eq!(b.running(&id, &s).await.unwrap(), Some(run));
    let appended = b.append(&id, &s, "result", true).await.unwrap();
    assert_eq!(appended.holder.as_deref(), Some("a/1"));
    assert!(matches!(
        b.check(&id, "1", &[]).await.unwrap(),
        BeginOutcome::Ready(_)
    ));
}

/// `register` on a session that is gone says so and leaves nothing behind.
pub async fn register_on_a_missing_session_writes_nothing(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = sid();
    assert!(!a
        .register(&id, &inflight("1", &stream(), "a", "a/1"))
        .await
        .unwrap());
    assert_eq!(a.check(&id, "1", &[]).await.unwrap(), BeginOutcome::Missing);
    assert_eq!(env.keys_of(&id).await, 0);
}

/// `check` refuses at the in-flight cap, counting registered requests only; a late `register`
/// that races a duplicate keeps the first one's id entry but still registers its own stream.
pub async fn check_counts_registered_requests_and_late_duplicates_keep_the_first(kind: Kind) {
    let env = Env::new(kind, |c| c.max_inflight_per_session = 2);
    let (a, b) = (env.node("a").await, env.node("b").await);
    let id = new_session(&a).await;
    let (s1, s2, s3) = (stream(), stream(), stream());
    assert!(a
        .register(&id, &inflight("1", &s1, "a", "a/1"))
        .await
        .unwrap());
    assert!(b
        .register(&id, &inflight("1", &s2, "b", "b/1"))
        .await
        .unwrap());
    match b.check(&id, "1", &[]).await.unwrap() {
        BeginOutcome::DuplicateId { node, .. } => assert_eq!(node, "a"),
        other => panic!("expected DuplicateId, got {other:?}"),
    }
    assert_eq!(
        a.running(&id, &s2).await.unwrap().map(|r| r.node),
        Some("b".to_owned())
    );
    assert!(a
        .register(&id, &inflight("2", &s3, "a", "a/2"))
        .await
        .unwrap());
    match b.check(&id, "3", &[]).await.unwrap() {
        BeginOutcome::Busy(r) => assert_eq!(r.id, id),
        other => panic!("expected Busy, got {other:?}"),
    }
}

/// A node that has loaded a record before (and may hold it cached) sees every change another node
/// makes to it at its next load, and a deleted session as missing.
pub async fn a_reloaded_record_reflects_changes_made_elsewhere(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let id = new_session(&a).await;
    let first = begin_ok(&a, &id, None).await;
    assert_eq!(begin_ok(&a, &id, None).await, first, "an unchanged record");
    assert!(b
        .update(&id, SessionUpdate::LogLevel("debug".into()))
        .await
        .unwrap());
    let after_level = begin_ok(&a, &id, None).await;
    assert_eq!(after_level.log_level.as_deref(), Some("debug"));
    b.claim_owner(&id, "tool", None).await.unwrap();
    match a.check(&id, "7", &[]).await.unwrap() {
        BeginOutcome::Ready(r) => assert_eq!(r.owners.get("tool").map(String::as_str), Some("b")),
        other => panic!("expected Ready, got {other:?}"),
    }
    assert!(b.delete_session(&id).await.unwrap());
    assert_eq!(a.begin(&id, None).await.unwrap(), BeginOutcome::Missing);
}
