//! Event logs, stream holders and delivery of events and takeovers.

use switchboard_store::*;

use crate::harness::*;

const START: &str = "0-0";

pub async fn appended_events_replay_in_order(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    let mut positions = Vec::new();
    for i in 0..5 {
        let ap = a
            .append(&id, &s, &format!("{{\"n\":{i}}}"), i == 4)
            .await
            .unwrap();
        assert!(ap.is_stored());
        assert_eq!(ap.holder.as_deref(), Some("a/1"));
        positions.push(ap.position);
    }
    let all = events(&a, &id, &s, START).await;
    assert_eq!(
        all.iter().map(|e| e.position.clone()).collect::<Vec<_>>(),
        positions
    );
    assert_eq!(all[2].data, "{\"n\":2}");
    assert!(all[4].end && !all[3].end);
    let ordered = positions.windows(2).all(|w| {
        switchboard_protocol::ids::position_order(&w[0])
            < switchboard_protocol::ids::position_order(&w[1])
    });
    assert!(ordered, "{positions:?}");
    let tail = events(&a, &id, &s, &positions[1]).await;
    assert_eq!(tail, all[2..].to_vec());
    assert!(events(&a, &id, &s, &positions[4]).await.is_empty());
}

pub async fn the_standalone_stream_is_always_known(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = new_session(&a).await;
    assert!(events(&a, &id, "get", START).await.is_empty());
    assert!(events(&a, &id, "get", "5-0").await.is_empty());
    let claimed = Claim::Claimed {
        previous: None,
        last_position: None,
    };
    assert_eq!(a.claim(&id, "get", "a/1").await.unwrap(), claimed);
    let ap = a.append(&id, "get", "n1", false).await.unwrap();
    let again = Claim::Claimed {
        previous: Some("a/1".into()),
        last_position: Some(ap.position.clone()),
    };
    assert_eq!(a.claim(&id, "get", "a/2").await.unwrap(), again);
    assert_eq!(events(&a, &id, "get", START).await.len(), 1);
}

pub async fn unknown_streams_stay_unknown(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let s = stream();
    assert_eq!(
        a.replay(&id, &s, START, 1000).await.unwrap(),
        Replay::UnknownStream
    );
    assert_eq!(a.claim(&id, &s, "a/1").await.unwrap(), Claim::Unknown);
    assert_eq!(
        a.replay(&id, &s, START, 1000).await.unwrap(),
        Replay::UnknownStream,
        "claim registers nothing"
    );
    assert_eq!(
        a.replay(&sid(), "get", START, 1000).await.unwrap(),
        Replay::UnknownStream,
        "no session"
    );
    // Appending registers the stream.
    let ap = a.append(&id, &s, "x", false).await.unwrap();
    assert_eq!(ap.holder, None);
    assert_eq!(events(&a, &id, &s, START).await.len(), 1);
}

pub async fn trimming_is_exact_and_detected(kind: Kind) {
    let env = Env::new(kind, |c| c.max_events_per_stream = 3);
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    let mut p = Vec::new();
    for i in 1..=10 {
        p.push(
            a.append(&id, &s, &format!("e{i}"), false)
                .await
                .unwrap()
                .position,
        );
    }
    // p[7], p[8], p[9] (events 8, 9, 10) are retained; events 1..=7 were trimmed.
    let oldest = Replay::Truncated {
        oldest: p[7].clone(),
    };
    assert_eq!(a.replay(&id, &s, START, 1000).await.unwrap(), oldest);
    assert_eq!(a.replay(&id, &s, &p[0], 1000).await.unwrap(), oldest);
    assert_eq!(a.replay(&id, &s, &p[5], 1000).await.unwrap(), oldest);
    let after7 = events(&a, &id, &s, &p[6]).await;
    assert_eq!(
        after7.iter().map(|e| e.data.as_str()).collect::<Vec<_>>(),
        ["e8", "e9", "e10"]
    );
    assert_eq!(events(&a, &id, &s, &p[7]).await.len(), 2);
    assert!(events(&a, &id, &s, &p[9]).await.is_empty());
}

pub async fn the_final_event_ends_the_request(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let id = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("9", &s, "a", "a/1"))).await;
    let run = RunningRequest {
        node: "a".into(),
        request_key: "9".into(),
    };
    assert_eq!(b.running(&id, &s).await.unwrap(), Some(run));
    a.append(&id, &s, "progress", false).await.unwrap();
    assert!(b.running(&id, &s).await.unwrap().is_some());
    a.append(&id, &s, "result", true).await.unwrap();
    assert_eq!(b.running(&id, &s).await.unwrap(), None);
    assert!(
        !b.route_cancel(&id, "9", None).await.unwrap(),
        "no longer in flight"
    );
    begin_ok(&b, &id, Some(&inflight("9", &stream(), "b", "b/1"))).await;
    // The stream stays resumable while its log is retained.
    assert!(matches!(
        b.claim(&id, &s, "b/2").await.unwrap(),
        Claim::Claimed { .. }
    ));
}

pub async fn claim_and_release(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let mut ra = a.subscribe().await.unwrap();
    let id = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    let prev = |p: Option<&str>| Claim::Claimed {
        previous: p.map(str::to_owned),
        last_position: None,
    };
    assert_eq!(a.claim(&id, &s, "a/2").await.unwrap(), prev(Some("a/1")));
    quiet(&mut ra).await; // same node: the caller closes its own connection
    a.release(&id, &s, "a/1").await.unwrap(); // no longer the holder: no effect
    assert_eq!(a.claim(&id, &s, "a/3").await.unwrap(), prev(Some("a/2")));
    a.release(&id, &s, "a/3").await.unwrap();
    assert_eq!(a.claim(&id, &s, "a/4").await.unwrap(), prev(None));
    assert_eq!(a.claim(&id, &s, "a/4").await.unwrap(), prev(Some("a/4")));
    let ap = a.append(&id, &s, "x", false).await.unwrap();
    assert_eq!(ap.holder.as_deref(), Some("a/4"));
    quiet(&mut ra).await; // local holder of a POST stream: the caller delivers
}

pub async fn events_reach_the_holders_node(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let (mut ra, mut rb) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    let id = new_session(&a).await;
    takes_part(&b, &id).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "b/7"))).await;
    let mut sent = Vec::new();
    for i in 0..50 {
        let ap = a.append(&id, &s, &format!("m{i}"), i == 49).await.unwrap();
        assert_eq!(ap.holder.as_deref(), Some("b/7"));
        sent.push(ap.position);
    }
    for (i, position) in sent.into_iter().enumerate() {
        let want = BusMessage::Event(BusEvent {
            sid: id.clone(),
            stream: s.clone(),
            holder: "b/7".into(),
            position,
            data: format!("m{i}"),
            end: i == 49,
            verify: false,
        });
        assert_eq!(recv(&mut rb).await, want);
    }
    quiet(&mut ra).await;
}

/// An append sent again with its append id (its outcome unknown to the caller, e.g. after a
/// dropped connection) stores nothing more: it answers the event's position and delivers the
/// event again at that position. The id is remembered while its event is in the log.
pub async fn an_append_id_stores_its_event_once(kind: Kind) {
    let env = Env::new(kind, |c| c.max_events_per_stream = 2);
    let (a, b) = (env.node("a").await, env.node("b").await);
    let mut rb = b.subscribe().await.unwrap();
    let id = new_session(&a).await;
    takes_part(&b, &id).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "b/7"))).await;
    let once = rules::new_append_id();
    let first = a.append_once(&id, &s, "x", false, &once).await.unwrap();
    let again = a.append_once(&id, &s, "x", false, &once).await.unwrap();
    assert_eq!(again, first);
    let data = |e: Vec<LoggedEvent>| e.into_iter().map(|e| e.data).collect::<Vec<_>>();
    assert_eq!(data(events(&a, &id, &s, "0-0").await), ["x"]);
    for _ in 0..2 {
        match recv(&mut rb).await {
            BusMessage::Event(e) => {
                assert_eq!((e.position, e.data), (first.position.clone(), "x".into()))
            }
            other => panic!("expected the event, got {other:?}"),
        }
    }
    let y = a.append(&id, &s, "y", false).await.unwrap();
    a.append(&id, &s, "z", false).await.unwrap();
    // Trimmed away, the event and its id are gone: the id stores it anew.
    let later = a.append_once(&id, &s, "x", true, &once).await.unwrap();
    let order = switchboard_protocol::ids::position_order;
    assert!(order(&later.position) > order(&first.position));
    assert_eq!(data(events(&a, &id, &s, &y.position).await), ["z", "x"]);
}

pub async fn standalone_events_always_go_through_the_inbox(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let mut ra = a.subscribe().await.unwrap();
    let id = new_session(&a).await;
    a.claim(&id, "get", "a/1").await.unwrap();
    let ap = a.append(&id, "get", "note", false).await.unwrap();
    let want = BusMessage::Event(BusEvent {
        sid: id.clone(),
        stream: "get".into(),
        holder: "a/1".into(),
        position: ap.position,
        data: "note".into(),
        end: false,
        verify: false,
    });
    assert_eq!(recv(&mut ra).await, want);
}

pub async fn takeover_reaches_the_previous_holders_node(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let (mut ra, mut rb) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    let id = new_session(&a).await;
    a.claim(&id, "get", "a/1").await.unwrap();
    let got = b.claim(&id, "get", "b/1").await.unwrap();
    assert_eq!(
        got,
        Claim::Claimed {
            previous: Some("a/1".into()),
            last_position: None
        }
    );
    let want = BusMessage::Takeover {
        sid: id.clone(),
        stream: "get".into(),
        holder: "a/1".into(),
    };
    assert_eq!(recv(&mut ra).await, want);
    quiet(&mut rb).await;
}

pub async fn abort_running_finishes_a_dead_nodes_request(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b, c) = (
        env.node("a").await,
        env.node("b").await,
        env.node("c").await,
    );
    let mut rb = b.subscribe().await.unwrap();
    let id = new_session(&a).await;
    takes_part(&b, &id).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("5", &s, "a", "b/1"))).await;
    assert_eq!(
        c.abort_running(&id, &s, "b", "err").await.unwrap(),
        None,
        "not running on b"
    );
    let ap = c
        .abort_running(&id, &s, "a", "{\"error\":1}")
        .await
        .unwrap()
        .expect("aborted");
    assert_eq!(ap.holder.as_deref(), Some("b/1"));
    let want = BusMessage::Event(BusEvent {
        sid: id.clone(),
        stream: s.clone(),
        holder: "b/1".into(),
        position: ap.position,
        data: "{\"error\":1}".into(),
        end: true,
        verify: false,
    });
    assert_eq!(recv(&mut rb).await, want, "the final event");
    assert_eq!(c.running(&id, &s).await.unwrap(), None);
    assert!(!c.route_cancel(&id, "5", None).await.unwrap());
    assert_eq!(
        c.abort_running(&id, &s, "a", "again").await.unwrap(),
        None,
        "finished already"
    );
    let last = events(&c, &id, &s, START).await;
    assert_eq!(last.len(), 1);
    assert!(last[0].end);
}

/// A request answered on the standalone stream (legacy HTTP+SSE, WebSocket): aborting it puts
/// the event on the standalone stream, delivered to its holder and not final, and leaves nothing
/// of the request's own stream behind; only once.
pub async fn abort_running_of_a_standalone_answered_request_goes_to_the_standalone_stream(
    kind: Kind,
) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let mut rb = b.subscribe().await.unwrap();
    let id = new_session(&a).await;
    assert!(matches!(
        b.claim(&id, "get", "b/1").await.unwrap(),
        Claim::Claimed { .. }
    ));
    let s = switchboard_protocol::StreamId::generate_standalone_answered().to_string();
    begin_ok(&a, &id, Some(&inflight("5", &s, "a", ""))).await;
    let ap = b
        .abort_running(&id, &s, "a", "{\"error\":1}")
        .await
        .unwrap()
        .expect("aborted");
    assert_eq!(ap.holder.as_deref(), Some("b/1"));
    let want = BusMessage::Event(BusEvent {
        sid: id.clone(),
        stream: "get".into(),
        holder: "b/1".into(),
        position: ap.position,
        data: "{\"error\":1}".into(),
        end: false,
        verify: false,
    });
    assert_eq!(
        recv(&mut rb).await,
        want,
        "an event on the standalone stream, not final"
    );
    assert_eq!(b.running(&id, &s).await.unwrap(), None);
    assert!(b.in_flight(&id).await.unwrap().is_empty());
    assert_eq!(
        b.replay(&id, &s, "0-0", 10).await.unwrap(),
        Replay::UnknownStream,
        "nothing left of the request's own stream"
    );
    assert_eq!(b.abort_running(&id, &s, "a", "again").await.unwrap(), None);
    let got = events(&b, &id, "get", START).await;
    assert_eq!(got.len(), 1, "{got:?}");
}

pub async fn a_gone_session_takes_no_writes(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let mut ra = a.subscribe().await.unwrap();
    let id = sid();
    let s = stream();
    assert_eq!(
        a.append(&id, &s, "x", true).await.unwrap(),
        Appended::not_stored()
    );
    assert_eq!(a.claim(&id, "get", "a/1").await.unwrap(), Claim::Unknown);
    a.register_pending(&id, "1").await.unwrap();
    assert_eq!(
        a.route_reply(&id, "1", &serde_json::json!({}))
            .await
            .unwrap(),
        Routed::NobodyWaits
    );
    assert!(!a.route_cancel(&id, "1", None).await.unwrap());
    assert_eq!(a.running(&id, &s).await.unwrap(), None);
    assert_eq!(a.abort_running(&id, &s, "a", "x").await.unwrap(), None);
    assert!(!a.touch(&id).await.unwrap());
    a.release(&id, &s, "a/1").await.unwrap();
    a.finish(&id, "1", Some(&s)).await.unwrap();
    a.forget_pending(&id, "1").await.unwrap();
    assert_eq!(env.keys_of(&id).await, 0);
    quiet(&mut ra).await;
}

pub async fn replay_pages_through_a_long_log(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let mut written = Vec::new();
    for i in 0..25 {
        written.push(
            a.append(&id, "get", &format!("e{i}"), false)
                .await
                .unwrap()
                .position,
        );
    }
    let mut after = START.to_owned();
    let mut read = Vec::new();
    loop {
        let Replay::Events(page) = a.replay(&id, "get", &after, 10).await.unwrap() else {
            panic!("the standalone stream is known")
        };
        assert!(page.len() <= 10, "a page holds at most the limit");
        let Some(last) = page.last() else { break };
        after = last.position.clone();
        read.extend(page.into_iter().map(|e| e.position));
    }
    assert_eq!(read, written, "every event once, in order, across pages");
}
