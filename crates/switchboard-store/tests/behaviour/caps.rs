//! The byte caps on the event log (issue 16): per stream, per session, and the largest event
//! stored as it is; both backends trim exactly the same events.

use serde_json::{json, Value};
use switchboard_store::caps::OVERSIZED_EVENT_CODE;
use switchboard_store::*;

use crate::harness::*;

const START: &str = "0-0";

/// An event of exactly `bytes` bytes.
fn sized(tag: char, bytes: usize) -> String {
    tag.to_string().repeat(bytes)
}

/// Ten 100-byte events into a stream capped at 350 bytes: the three newest are kept (300 bytes),
/// a resume from before them is told the log was trimmed, naming the oldest kept event.
pub async fn a_stream_keeps_at_most_max_stream_log_bytes(kind: Kind) {
    let env = Env::new(kind, |c| {
        c.max_stream_log_bytes = 350;
        c.max_event_bytes = 100;
    });
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    let mut p = Vec::new();
    for i in 0..10u8 {
        let ev = sized(char::from(b'a' + i), 100);
        p.push(a.append(&id, &s, &ev, false).await.unwrap().position);
    }
    let oldest = Replay::Truncated {
        oldest: p[7].clone(),
    };
    assert_eq!(a.replay(&id, &s, START, 1000).await.unwrap(), oldest);
    let kept = events(&a, &id, &s, &p[6]).await;
    let data: Vec<String> = kept.into_iter().map(|e| e.data).collect();
    assert_eq!(
        data,
        vec![sized('h', 100), sized('i', 100), sized('j', 100)]
    );
}

/// Two streams of one session capped at 500 bytes together: appending to the second trims the
/// first's oldest events (the session's oldest), not the second's; when every event of the first
/// is gone a resume of it is still told it was trimmed.
pub async fn a_session_keeps_at_most_max_session_log_bytes(kind: Kind) {
    let env = Env::new(kind, |c| {
        c.max_stream_log_bytes = 500;
        c.max_session_log_bytes = 500;
        c.max_event_bytes = 100;
    });
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let (s1, s2) = (stream(), stream());
    begin_ok(&a, &id, Some(&inflight("1", &s1, "a", "a/1"))).await;
    begin_ok(&a, &id, Some(&inflight("2", &s2, "a", "a/2"))).await;
    let mut first = Vec::new();
    for _ in 0..3 {
        let ap = a.append(&id, &s1, &sized('x', 100), false).await.unwrap();
        first.push(ap.position);
    }
    for _ in 0..3 {
        a.append(&id, &s2, &sized('y', 100), false).await.unwrap();
    }
    // 600 bytes asked: the first stream's oldest event went.
    assert_eq!(
        a.replay(&id, &s1, START, 1000).await.unwrap(),
        Replay::Truncated {
            oldest: first[1].clone()
        }
    );
    assert_eq!(events(&a, &id, &s1, &first[0]).await.len(), 2);
    assert_eq!(events(&a, &id, &s2, START).await.len(), 3);
    for _ in 0..2 {
        a.append(&id, &s2, &sized('y', 100), false).await.unwrap();
    }
    assert_eq!(
        a.replay(&id, &s1, START, 1000).await.unwrap(),
        Replay::Truncated {
            oldest: first[2].clone()
        },
        "the trim position names the newest event trimmed once the log is empty"
    );
    assert_eq!(events(&a, &id, &s2, START).await.len(), 5);
    // Another session is not affected.
    let other = new_session(&a).await;
    let s3 = stream();
    begin_ok(&a, &other, Some(&inflight("1", &s3, "a", "a/3"))).await;
    for _ in 0..5 {
        a.append(&other, &s3, &sized('z', 100), false)
            .await
            .unwrap();
    }
    assert_eq!(events(&a, &other, &s3, START).await.len(), 5);
}

/// An answer over `max_event_bytes` reaches the holder's node whole, and the log keeps a
/// JSON-RPC error with its id instead; a notification over it is kept as a warning.
pub async fn an_event_over_max_event_bytes_is_delivered_whole_and_kept_as_a_stand_in(kind: Kind) {
    let env = Env::new(kind, |c| c.max_event_bytes = 1000);
    let (a, b) = (env.node("a").await, env.node("b").await);
    let mut rb = b.subscribe().await.unwrap();
    let id = new_session(&a).await;
    takes_part(&b, &id).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "b/7"))).await;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": 1, "progress": 1, "message": sized('n', 2000)}})
    .to_string();
    let answer =
        json!({"jsonrpc": "2.0", "id": 7, "result": {"text": sized('r', 5000)}}).to_string();
    let small = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": 1, "progress": 0}})
    .to_string();
    for (data, end) in [(&small, false), (&note, false), (&answer, true)] {
        a.append(&id, &s, data, end).await.unwrap();
        match recv(&mut rb).await {
            BusMessage::Event(ev) => assert_eq!(&ev.data, data, "delivered whole"),
            other => panic!("expected an event, got {other:?}"),
        }
    }
    let kept = events(&a, &id, &s, START).await;
    assert_eq!(kept.len(), 3);
    assert_eq!(kept[0].data, small, "a small event is kept as it is");
    let warning: Value = serde_json::from_str(&kept[1].data).unwrap();
    assert_eq!(warning["method"], "notifications/message");
    assert_eq!(warning["params"]["data"]["max_event_bytes"], 1000);
    let error: Value = serde_json::from_str(&kept[2].data).unwrap();
    assert_eq!(error["id"], 7);
    assert_eq!(error["error"]["code"], OVERSIZED_EVENT_CODE);
    assert_eq!(error["error"]["data"]["bytes"], answer.len() as u64);
    assert!(kept[2].end, "the stand-in still ends the request");
}

/// Events over 256 KiB reach Redis in pieces (issue 34, C48; `redis/upload.rs`): one under
/// `max_event_bytes` is kept and delivered whole, once however often its append id is sent; one
/// over it is delivered whole and kept as its stand-in.
pub async fn large_events_are_kept_and_delivered_whole(kind: Kind) {
    let env = Env::new(kind, |c| c.max_event_bytes = 2 << 20);
    let (a, b) = (env.node("a").await, env.node("b").await);
    let mut rb = b.subscribe().await.unwrap();
    let id = new_session(&a).await;
    takes_part(&b, &id).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "b/7"))).await;
    let kept = json!({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "info", "data": sized('k', (1 << 20) + 7)}})
    .to_string();
    let once = rules::new_append_id();
    let first = a.append_once(&id, &s, &kept, false, &once).await.unwrap();
    let again = a.append_once(&id, &s, &kept, false, &once).await.unwrap();
    assert_eq!(again, first, "one event for one append id");
    let answer =
        json!({"jsonrpc": "2.0", "id": 7, "result": {"text": sized('r', 3 << 20)}}).to_string();
    a.append(&id, &s, &answer, true).await.unwrap();
    for want in [&kept, &kept, &answer] {
        match recv(&mut rb).await {
            BusMessage::Event(ev) => assert!(&ev.data == want, "delivered whole"),
            other => panic!("expected an event, got {other:?}"),
        }
    }
    let logged = events(&a, &id, &s, START).await;
    assert_eq!(logged.len(), 2);
    assert!(logged[0].data == kept, "kept whole");
    let error: Value = serde_json::from_str(&logged[1].data).unwrap();
    assert_eq!(error["error"]["code"], OVERSIZED_EVENT_CODE);
    assert_eq!(error["error"]["data"]["bytes"], answer.len() as u64);
}

/// `max_sessions_per_principal = 2`: a principal's third session is refused (nothing stored)
/// while another principal's is created; once one of the first two is deleted the principal may
/// create one again.
pub async fn sessions_per_principal_are_capped(kind: Kind) {
    let env = Env::new(kind, |c| c.max_sessions_per_principal = 2);
    let a = env.node("a").await;
    let of = |principal: &str| SessionRecord {
        principal: principal.into(),
        ..record(&sid())
    };
    let first = of("alice");
    for r in [&first, &of("alice")] {
        assert_eq!(a.create_session(r).await.unwrap(), CreateOutcome::Created);
    }
    let third = of("alice");
    assert_eq!(
        a.create_session(&third).await.unwrap(),
        CreateOutcome::PrincipalAtCapacity
    );
    assert_eq!(env.keys_of(&third.id).await, 0);
    assert_eq!(
        a.create_session(&of("bob")).await.unwrap(),
        CreateOutcome::Created
    );
    assert_eq!(a.count_sessions().await.unwrap(), 3);
    assert!(a.delete_session(&first.id).await.unwrap());
    assert_eq!(
        a.create_session(&third).await.unwrap(),
        CreateOutcome::Created
    );
}
