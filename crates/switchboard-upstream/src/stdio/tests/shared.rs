//! Shared mode: one child for several sessions (case C03: sharing only as an explicit policy).

use std::time::Duration;

use serde_json::json;

use super::*;

fn shared() -> StdioUpstream {
    build(&[], true, Duration::from_secs(20))
}

#[tokio::test]
async fn sessions_share_one_child_and_each_gets_its_own_answers() {
    let up = shared();
    let (a, b) = (Peer::new(), Peer::new());
    for round in 0..3 {
        let tag_a = format!("A{round}");
        let tag_b = format!("B{round}");
        let slow = call(
            &up,
            ctx("A", &a),
            "slow",
            json!({"seconds": 0.2, "tag": tag_a}),
        );
        let echo = call(&up, ctx("B", &b), "echo", json!({"s": tag_b}));
        let (ra, rb) = tokio::join!(slow, echo);
        assert_eq!(text(&ra.unwrap()), tag_a);
        assert_eq!(text(&rb.unwrap()), tag_b);
    }
    assert_eq!(up.running_children(), 1);
    assert!(up.is_shared() && up.holds("A") && up.holds("anyone"));
    assert_eq!(up.child_pid("A"), up.child_pid("B"));
    // The ids the child saw are ours, unique across the sessions.
    let seen = call(&up, ctx("A", &a), "echo", json!({})).await.unwrap()["seen_id"].clone();
    let seen2 = call(&up, ctx("B", &b), "echo", json!({})).await.unwrap()["seen_id"].clone();
    assert_ne!(seen, seen2);
    up.shutdown().await;
}

#[tokio::test]
async fn equal_progress_tokens_of_two_sessions_stay_apart() {
    let up = shared();
    let (a, b) = (Peer::new(), Peer::new());
    let params = |tag: &str| {
        json!({"name": "slow", "arguments": {"seconds": 0.4, "tag": tag},
               "_meta": {"progressToken": 1}})
    };
    let ra = up.request("tools/call", params("A"), ctx("A", &a));
    let rb = up.request("tools/call", params("B"), ctx("B", &b));
    let (ra, rb) = tokio::join!(ra, rb);
    assert_eq!((text(&ra.unwrap()), text(&rb.unwrap())), ("A", "B"));
    for peer in [&a, &b] {
        let sent = peer.sent();
        assert!(sent.len() >= 2, "{sent:?}");
        for s in sent {
            assert_eq!(s.route, "request");
            // The client's token comes back unchanged.
            assert_eq!(s.message["params"]["progressToken"], 1);
        }
    }
    // Each call's progress counts its own steps (0, 4, …), never a mix of both.
    let steps = |p: &Arc<Peer>| -> Vec<Value> {
        p.sent()
            .iter()
            .map(|s| s.message["params"]["progress"].clone())
            .collect()
    };
    assert_eq!(steps(&a)[..2], [json!(0), json!(4)]);
    assert_eq!(steps(&b)[..2], [json!(0), json!(4)]);
    up.shutdown().await;
}

#[tokio::test]
async fn unattributable_notifications_are_dropped_and_counted() {
    let up = shared();
    let peer = Peer::new();
    call(&up, ctx("A", &peer), "notify", json!({}))
        .await
        .unwrap();
    assert!(peer.sent().is_empty());
    assert_eq!(up.dropped_notifications(), 1);
    up.shutdown().await;
}

#[tokio::test]
async fn state_is_shared_and_the_child_outlives_sessions() {
    let up = shared();
    for sid in ["A", "A", "B"] {
        call(&up, ctx(sid, &Peer::new()), "increment", json!({}))
            .await
            .unwrap();
    }
    let got = call(&up, ctx("C", &Peer::new()), "get", json!({}))
        .await
        .unwrap();
    assert_eq!(text(&got), "3");
    let pid = up.child_pid("A").unwrap();
    up.session_ended("A").await;
    assert!(up.holds("B"));
    up.shutdown().await;
    assert!(gone_within(pid, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn sampling_from_the_shared_child_reaches_the_only_caller() {
    let up = shared();
    let peer = Peer::answering(|_, _| {
        Ok(
            json!({"jsonrpc": "2.0", "id": "x", "result": {"role": "assistant", "model": "m",
            "content": {"type": "text", "text": "ok"}}}),
        )
    });
    let result = call(&up, ctx("A", &peer), "ask", json!({"prompt": "p"}))
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(text(&result)).unwrap();
    assert_eq!(answer["result"]["content"]["text"], "ok");
    up.shutdown().await;
}
