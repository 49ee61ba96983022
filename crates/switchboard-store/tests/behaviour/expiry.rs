//! Idle expiry, the reaper, log expiry and registry pruning.

use std::collections::BTreeSet;
use std::time::Duration;

use switchboard_store::*;
use switchboard_tests::eventually::eventually;

use crate::harness::*;

fn short(ms: u64) -> impl FnOnce(&mut StoreConfig) {
    move |c| c.idle_ttl = Duration::from_millis(ms)
}

async fn wait_missing(store: &std::sync::Arc<dyn Store>, sid: &str) {
    eventually("the session to expire", Duration::from_secs(5), || {
        let (store, sid) = (store.clone(), sid.to_owned());
        // `replay` reads without touching (polling with `begin` would keep the session alive).
        async move {
            (store.replay(&sid, "get", "0-0", 1000).await.unwrap() == Replay::UnknownStream)
                .then_some(())
        }
    })
    .await;
}

pub async fn idle_sessions_expire_and_are_reaped(kind: Kind) {
    let env = Env::new(kind, short(300));
    let (a, b) = (env.node("a").await, env.node("b").await);
    let (mut ra, mut rb) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    let id = new_session(&a).await;
    takes_part(&b, &id).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    a.append(&id, &s, "x", false).await.unwrap();
    a.append(&id, "get", "y", false).await.unwrap();
    a.register_pending(&id, "p").await.unwrap();
    wait_missing(&a, &id).await;
    assert_eq!(a.begin(&id, None).await.unwrap(), BeginOutcome::Missing);
    assert_eq!(
        a.replay(&id, &s, "0-0", 1000).await.unwrap(),
        Replay::UnknownStream
    );
    assert_eq!(a.count_sessions().await.unwrap(), 1, "counted until reaped");
    let reaped = eventually("the reaper to take it", Duration::from_secs(5), || {
        let a = a.clone();
        async move { Some(a.reap(100).await.unwrap()).filter(|r| !r.is_empty()) }
    })
    .await;
    assert_eq!(reaped, vec![id.clone()]);
    let gone = BusMessage::Terminated { sid: id.clone() };
    assert_eq!(recv(&mut ra).await, gone);
    assert_eq!(recv(&mut rb).await, gone);
    assert_eq!(env.keys_of(&id).await, 0);
    assert_eq!(a.count_sessions().await.unwrap(), 0);
    assert!(a.reap(100).await.unwrap().is_empty());
}

pub async fn activity_keeps_a_session_alive(kind: Kind) {
    let env = Env::new(kind, short(400));
    let a = env.node("a").await;
    let id = new_session(&a).await;
    keep_alive(&a, &id, Duration::from_millis(1000)).await;
    begin_ok(&a, &id, None).await;
    assert!(
        a.reap(100).await.unwrap().is_empty(),
        "a touched session is not reaped"
    );
    assert_eq!(a.count_sessions().await.unwrap(), 1);
    wait_missing(&a, &id).await;
    let reaped = eventually("the reaper to take it", Duration::from_secs(5), || {
        let a = a.clone();
        async move { Some(a.reap(100).await.unwrap()).filter(|r| !r.is_empty()) }
    })
    .await;
    assert_eq!(reaped, vec![id]);
}

/// Requests admitted by `check` (the hot path, answered from a cached record after the first)
/// touch the session: used every 100 ms, it outlives its 400 ms idle TTL three times over, and
/// expires once they stop.
pub async fn checked_requests_keep_a_session_alive(kind: Kind) {
    let env = Env::new(kind, short(400));
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(1200);
    let mut n = 0;
    while tokio::time::Instant::now() < deadline {
        match a.check(&id, &n.to_string(), &[]).await.unwrap() {
            BeginOutcome::Ready(r) => assert_eq!(r.id, id),
            other => panic!("request {n}: expected Ready, got {other:?}"),
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        a.touch(&id).await.unwrap(),
        "alive after {n} checked requests"
    );
    wait_missing(&a, &id).await;
    assert_eq!(
        a.check(&id, "last", &[]).await.unwrap(),
        BeginOutcome::Missing
    );
}

pub async fn finish_restarts_the_idle_clock(kind: Kind) {
    let env = Env::new(kind, short(600));
    let a = env.node("a").await;
    let id = new_session(&a).await;
    begin_ok(&a, &id, Some(&inflight("1", &stream(), "a", "a/1"))).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    a.finish(&id, "1", None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    begin_ok(&a, &id, None).await; // 800 ms after begin, 400 ms after finish
}

pub async fn reaping_a_thousand_sessions_takes_a_few_passes(kind: Kind) {
    let env = Env::new(kind, short(300));
    let a = env.node("a").await;
    let mut ids = BTreeSet::new();
    for i in 0..1000 {
        let id = new_session(&a).await;
        if i % 10 == 0 {
            a.append(&id, &stream(), "x", false).await.unwrap();
        }
        ids.insert(id);
    }
    assert_eq!(a.count_sessions().await.unwrap(), 1000);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut reaped = BTreeSet::new();
    let mut passes = 0;
    while reaped.len() < ids.len() {
        passes += 1;
        assert!(
            passes <= 10,
            "reaped {} of 1000 in {passes} passes",
            reaped.len()
        );
        let batch = a.reap(400).await.unwrap();
        assert!(batch.len() <= 400);
        reaped.extend(batch);
        if reaped.len() < ids.len() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(reaped, ids);
    assert!(passes <= 4, "{passes} passes");
    assert_eq!(a.count_sessions().await.unwrap(), 0);
    for id in ids.iter().step_by(10) {
        assert_eq!(env.keys_of(id).await, 0);
    }
}

pub async fn reaping_respects_the_limit(kind: Kind) {
    let env = Env::new(kind, short(200));
    let a = env.node("a").await;
    for _ in 0..5 {
        new_session(&a).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(a.reap(2).await.unwrap().len(), 2);
    assert_eq!(a.reap(2).await.unwrap().len(), 2);
    assert_eq!(a.reap(2).await.unwrap().len(), 1);
    assert!(a.reap(2).await.unwrap().is_empty());
}

pub async fn logs_expire_after_their_last_event(kind: Kind) {
    let env = Env::new(kind, short(400));
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    let p = a.append(&id, &s, "done", true).await.unwrap().position;
    a.finish(&id, "1", None).await.unwrap();
    a.append(&id, "get", "n", false).await.unwrap();
    keep_alive(&a, &id, Duration::from_millis(700)).await;
    assert_eq!(
        a.replay(&id, &s, &p, 1000).await.unwrap(),
        Replay::UnknownStream
    );
    assert_eq!(
        a.replay(&id, &s, "0-0", 1000).await.unwrap(),
        Replay::UnknownStream
    );
    assert_eq!(a.claim(&id, &s, "a/2").await.unwrap(), Claim::Unknown);
    assert_eq!(
        events(&a, &id, "get", "0-0").await.len(),
        1,
        "the standalone stream's log lives as long as its session"
    );
}

pub async fn the_stream_registry_is_pruned(kind: Kind) {
    let env = Env::new(kind, short(500));
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let old: Vec<String> = (0..64).map(|_| stream()).collect();
    for (i, s) in old.iter().enumerate() {
        let key = i.to_string();
        begin_ok(&a, &id, Some(&inflight(&key, s, "a", "a/1"))).await;
        a.append(&id, s, "r", true).await.unwrap();
        a.finish(&id, &key, None).await.unwrap();
    }
    let live = stream();
    begin_ok(&a, &id, Some(&inflight("live", &live, "a", "a/1"))).await;
    assert_eq!(env.registered_streams(&id).await, 65);
    keep_alive(&a, &id, Duration::from_millis(800)).await;
    // 65 registered: not a pruning point yet; the next registration brings 66 …
    let mut n = 65;
    while n % 16 != 0 {
        begin_ok(
            &a,
            &id,
            Some(&inflight(&format!("n{n}"), &stream(), "a", "a/1")),
        )
        .await;
        n += 1;
    }
    assert_eq!(env.registered_streams(&id).await, 80);
    begin_ok(&a, &id, Some(&inflight("last", &stream(), "a", "a/1"))).await;
    // Only the running ones are left: "live", the 15 just begun and "last".
    assert_eq!(env.registered_streams(&id).await, 17);
    assert_eq!(
        a.replay(&id, &old[0], "0-0", 1000).await.unwrap(),
        Replay::UnknownStream
    );
    assert!(events(&a, &id, &live, "0-0").await.is_empty());
}
