//! Shared mode: one child for several sessions (case C03: sharing only as an explicit policy).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::*;
use crate::upstream::SessionHandle;

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

/// A session whose standalone stream is `standalone`, as the node's sessions have.
struct Attaching {
    local: LocalSession,
    standalone: Arc<Peer>,
}

#[async_trait]
impl SessionHandle for Attaching {
    fn session_id(&self) -> &str {
        self.local.session_id()
    }
    fn initialize_params(&self) -> &Value {
        self.local.initialize_params()
    }
    fn upstream_session(&self, upstream: &str) -> Option<String> {
        self.local.upstream_session(upstream)
    }
    fn standalone_peer(&self) -> Option<Arc<dyn ClientPeer>> {
        Some(self.standalone.clone())
    }
    async fn set_upstream_session(&self, upstream: &str, id: Option<String>) -> Result<(), String> {
        self.local.set_upstream_session(upstream, id).await
    }
}

/// A request of session `sid` on `peer` whose standalone stream is `standalone`.
fn attaching(sid: &str, peer: &Arc<Peer>, standalone: &Arc<Peer>) -> RequestContext {
    let mut ctx = ctx(sid, peer);
    ctx.session = Arc::new(Attaching {
        local: LocalSession::new(sid, client_init()),
        standalone: standalone.clone(),
    });
    ctx
}

/// The methods `peer` received on its standalone route.
fn standalone_methods(peer: &Peer) -> Vec<String> {
    let sent = peer.sent();
    sent.iter()
        .filter(|s| s.route == "standalone")
        .map(|s| s.message["method"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// C23: list changes reach every session attached to the shared child, `resources/updated`
/// only its subscribers, log messages the one caller (in a call) or everyone (outside calls);
/// what belongs to nobody is dropped and counted; an ended session is detached.
#[tokio::test]
async fn notifications_of_the_shared_child_reach_the_sessions_they_belong_to() {
    let up = shared();
    let (ra, rb) = (Peer::new(), Peer::new());
    let (sa, sb) = (Peer::new(), Peer::new());
    let a = || attaching("A", &ra, &sa);
    let b = || attaching("B", &rb, &sb);
    call(&up, a(), "echo", json!({})).await.unwrap();
    call(&up, b(), "echo", json!({})).await.unwrap();
    let subscribe = json!({"uri": "fx://a"});
    up.request("resources/subscribe", subscribe, a())
        .await
        .unwrap();

    call(&up, a(), "notify", json!({})).await.unwrap();
    let changed = "notifications/tools/list_changed";
    assert_eq!(standalone_methods(&sa), [changed]);
    assert_eq!(standalone_methods(&sb), [changed]);

    let updated = json!({"method": "notifications/resources/updated", "params": {"uri": "fx://a"}});
    call(&up, b(), "notify", updated.clone()).await.unwrap();
    assert_eq!(
        standalone_methods(&sa),
        [changed, "notifications/resources/updated"]
    );
    assert_eq!(standalone_methods(&sb), [changed], "B did not subscribe");
    up.request("resources/unsubscribe", json!({"uri": "fx://a"}), a())
        .await
        .unwrap();
    call(&up, b(), "notify", updated).await.unwrap();
    assert_eq!(standalone_methods(&sa).len(), 2, "unsubscribed");
    assert_eq!(
        up.dropped_notifications(),
        1,
        "an update nobody subscribed to"
    );

    let log = json!({"method": "notifications/message", "params": {"level": "info", "data": "in"}});
    call(&up, b(), "notify", log).await.unwrap();
    let in_call: Vec<Sent> = rb
        .sent()
        .into_iter()
        .filter(|s| s.route == "request")
        .collect();
    assert_eq!(in_call.len(), 1, "on the one caller's stream: {in_call:?}");
    assert_eq!(
        standalone_methods(&sa).len(),
        2,
        "A saw nothing of B's call"
    );

    let later = json!({"seconds": 0.05, "method": "notifications/message",
        "params": {"level": "info", "data": "out"}});
    call(&up, a(), "notify_later", later).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while standalone_methods(&sb).len() < 2 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let message = "notifications/message";
    assert_eq!(
        standalone_methods(&sa)[2..],
        [message],
        "outside calls: everyone"
    );
    assert_eq!(standalone_methods(&sb)[1..], [message]);

    up.session_ended("B").await;
    assert_eq!(up.held_sessions(), ["A"]);
    call(&up, a(), "notify", json!({})).await.unwrap();
    assert_eq!(standalone_methods(&sb).len(), 2, "B is detached");
    assert_eq!(standalone_methods(&sa).len(), 4);
    let custom = json!({"method": "notifications/custom"});
    call(&up, a(), "notify", custom).await.unwrap();
    assert_eq!(
        up.dropped_notifications(),
        2,
        "a notification of no known kind"
    );
    up.shutdown().await;
}

#[tokio::test]
async fn attached_sessions_are_capped_least_recently_active_first() {
    let up = shared().with_max_attached_sessions(2);
    let peers: Vec<(Arc<Peer>, Arc<Peer>)> = (0..3).map(|_| (Peer::new(), Peer::new())).collect();
    for (sid, (request, standalone)) in ["A", "B", "C"].iter().zip(&peers) {
        call(&up, attaching(sid, request, standalone), "echo", json!({}))
            .await
            .unwrap();
    }
    let mut held = up.held_sessions();
    held.sort();
    assert_eq!(
        held,
        ["B", "C"],
        "A, the least recently active, was detached"
    );
    let (request, standalone) = &peers[2];
    call(
        &up,
        attaching("C", request, standalone),
        "notify",
        json!({}),
    )
    .await
    .unwrap();
    let told: Vec<usize> = peers
        .iter()
        .map(|(_, s)| standalone_methods(s).len())
        .collect();
    assert_eq!(told, [0, 1, 1]);
    up.shutdown().await;
}

/// C23: a session detached at `max_attached_sessions` keeps its subscriptions through the child
/// (which still holds them): when its next request attaches it again, `resources/updated` of its
/// URI reaches it again; kept subscriptions go when the session ends. Before, it came back with
/// none and got list changes but no updates.
#[tokio::test]
async fn a_detached_session_gets_its_subscriptions_back_when_it_attaches_again() {
    let up = shared().with_max_attached_sessions(2);
    let peers: Vec<(Arc<Peer>, Arc<Peer>)> = (0..3).map(|_| (Peer::new(), Peer::new())).collect();
    let session = |k: usize| {
        let (request, standalone) = &peers[k];
        attaching(["A", "B", "C"][k], request, standalone)
    };
    call(&up, session(0), "echo", json!({})).await.unwrap();
    let subscribe = json!({"uri": "fx://a"});
    up.request("resources/subscribe", subscribe, session(0))
        .await
        .unwrap();
    call(&up, session(1), "echo", json!({})).await.unwrap();
    call(&up, session(2), "echo", json!({})).await.unwrap();
    let mut held = up.held_sessions();
    held.sort();
    assert_eq!(
        held,
        ["A", "B", "C"],
        "A is detached, its subscription kept"
    );

    // A's next request attaches it again (detaching B, now the least recent).
    call(&up, session(0), "echo", json!({})).await.unwrap();
    let updated = json!({"method": "notifications/resources/updated", "params": {"uri": "fx://a"}});
    call(&up, session(2), "notify", updated).await.unwrap();
    assert_eq!(
        standalone_methods(&peers[0].1),
        ["notifications/resources/updated"],
        "A hears of its resource again"
    );
    assert!(
        standalone_methods(&peers[2].1).is_empty(),
        "C did not subscribe"
    );
    assert_eq!(up.dropped_notifications(), 0);

    up.session_ended("A").await;
    call(&up, session(2), "echo", json!({})).await.unwrap();
    let mut held = up.held_sessions();
    held.sort();
    assert_eq!(held, ["C"], "nothing is kept for an ended session");
    up.shutdown().await;
}

/// The subscriptions of at most `max_attached_sessions` detached sessions are kept: past it those
/// of the one detached longest are forgotten.
#[tokio::test]
async fn kept_subscriptions_are_bounded_by_max_attached_sessions() {
    let up = shared().with_max_attached_sessions(1);
    let peers: Vec<(Arc<Peer>, Arc<Peer>)> = (0..3).map(|_| (Peer::new(), Peer::new())).collect();
    let session = |k: usize| {
        let (request, standalone) = &peers[k];
        attaching(["A", "B", "C"][k], request, standalone)
    };
    for (k, uri) in [(0, "fx://a"), (1, "fx://b")] {
        up.request("resources/subscribe", json!({"uri": uri}), session(k))
            .await
            .unwrap();
    }
    // C detaches B, whose subscription is kept instead of A's.
    call(&up, session(2), "echo", json!({})).await.unwrap();
    let mut held = up.held_sessions();
    held.sort();
    assert_eq!(held, ["B", "C"]);
    for k in [0, 1] {
        call(&up, session(k), "echo", json!({})).await.unwrap();
        let uri = ["fx://a", "fx://b"][k];
        let updated = json!({"method": "notifications/resources/updated", "params": {"uri": uri}});
        call(&up, session(k), "notify", updated).await.unwrap();
    }
    assert!(
        standalone_methods(&peers[0].1).is_empty(),
        "A's was forgotten"
    );
    assert_eq!(
        standalone_methods(&peers[1].1),
        ["notifications/resources/updated"]
    );
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
