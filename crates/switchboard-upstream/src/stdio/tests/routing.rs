//! Progress, sampling, cancellation, timeouts, notifications and ids (cases C22, C27–C29).

use std::time::Duration;

use serde_json::json;
use switchboard_protocol::codes;

use super::*;

const TEXT: &str = "naïve café — 日本語 🎉 Ω";

#[tokio::test]
async fn multi_byte_text_written_one_byte_at_a_time_survives() {
    let up = upstream(&["--dribble"]);
    let result = call(&up, ctx("s1", &Peer::new()), "echo", json!({"s": TEXT}))
        .await
        .unwrap();
    assert_eq!(text(&result), TEXT);
    up.shutdown().await;
}

#[tokio::test]
async fn an_emoji_across_a_64_kib_boundary_survives() {
    let up = upstream(&[]);
    let result = call(&up, ctx("s1", &Peer::new()), "straddle", json!({}))
        .await
        .unwrap();
    let s = text(&result);
    assert!(s.ends_with("🎉bbbbbbbbbb"), "{}", &s[s.len() - 20..]);
    assert!(!s.contains('\u{FFFD}'));
    up.shutdown().await;
}

#[tokio::test]
async fn invalid_utf8_in_an_answer_is_a_clear_error() {
    let up = upstream(&[]);
    let err = call(&up, ctx("s1", &Peer::new()), "bad_utf8", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
    assert!(err.message.contains("invalid UTF-8"), "{}", err.message);
    // The child is still usable.
    call(&up, ctx("s1", &Peer::new()), "echo", json!({}))
        .await
        .unwrap();
    up.shutdown().await;
}

#[tokio::test]
async fn banners_and_log_lines_on_stdout_are_skipped() {
    let up = upstream(&["--noisy"]);
    let peer = Peer::new();
    for s in ["one", "a\nb\tc", TEXT] {
        let result = call(&up, ctx("s1", &peer), "echo", json!({"s": s}))
            .await
            .unwrap();
        assert_eq!(text(&result), s);
    }
    up.shutdown().await;
}

#[tokio::test]
async fn a_child_writing_megabytes_to_stderr_keeps_answering() {
    let up = upstream(&[]);
    let peer = Peer::new();
    let big = call(&up, ctx("s1", &peer), "chatty", json!({"bytes": 2 << 20}));
    assert_eq!(text(&big.await.unwrap()), "ok");
    let no_newlines = json!({"bytes": 1 << 20, "newlines": false});
    for _ in 0..3 {
        let r = call(&up, ctx("s1", &peer), "chatty", no_newlines.clone()).await;
        assert_eq!(text(&r.unwrap()), "ok");
    }
    let calls = (0..5).map(|_| call(&up, ctx("s1", &peer), "chatty", json!({"bytes": 1 << 20})));
    for r in futures::future::join_all(calls).await {
        assert_eq!(text(&r.unwrap()), "ok");
    }
    up.shutdown().await;
}

#[tokio::test]
async fn an_over_long_line_kills_the_child_with_a_clear_error() {
    let up = upstream(&[]).with_max_line(64 * 1024);
    let peer = Peer::new();
    let pid = info(&up, "s1").await["pid"].as_u64().unwrap() as u32;
    let err = call(&up, ctx("s1", &peer), "huge", json!({"bytes": 100_000}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
    assert!(
        err.message
            .contains("sent a message larger than max_line_bytes (65536 bytes)"),
        "{}",
        err.message
    );
    assert_eq!(
        err.data,
        Some(json!({"upstream": "fx", "max_line_bytes": 65536}))
    );
    assert!(gone_within(pid, Duration::from_secs(5)).await);
    // A fresh child serves the next request.
    call(&up, ctx("s1", &peer), "echo", json!({}))
        .await
        .unwrap();
    up.shutdown().await;
}

#[tokio::test]
async fn progress_reaches_the_calling_request_with_its_token() {
    let up = upstream(&[]);
    let peer = Peer::new();
    let params = json!({"name": "slow", "arguments": {"seconds": 0.5, "tag": "P"},
                        "_meta": {"progressToken": "tok-1"}});
    let result = up
        .request("tools/call", params, ctx("s1", &peer))
        .await
        .unwrap();
    assert_eq!(text(&result), "P");
    let sent = peer.sent();
    assert!(sent.len() >= 2, "{sent:?}");
    for s in &sent {
        assert_eq!(s.route, "request");
        assert_eq!(s.message["method"], "notifications/progress");
        assert_eq!(s.message["params"]["progressToken"], "tok-1");
    }
    up.shutdown().await;
}

#[tokio::test]
async fn sampling_round_trip_keeps_the_childs_id() {
    let up = upstream(&[]);
    let peer = Peer::answering(|method, params| {
        assert_eq!(method, "sampling/createMessage");
        let prompt = params["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        Ok(json!({"jsonrpc": "2.0", "id": "s-xyz", "result": {
            "role": "assistant", "model": "m", "content": {"type": "text", "text": prompt + "!"}}}))
    });
    let result = call(&up, ctx("s1", &peer), "ask", json!({"prompt": "héllo"}))
        .await
        .unwrap();
    // What the child received: the client's result under the child's own id.
    let answer: Value = serde_json::from_str(text(&result)).unwrap();
    assert_eq!(answer["id"], result["server_id"]);
    assert_eq!(answer["id"], "srv-1");
    assert_eq!(answer["result"]["content"]["text"], "héllo!");
    assert_eq!(peer.requests().len(), 1);
    up.shutdown().await;
}

#[tokio::test]
async fn a_failing_client_gives_the_child_an_error() {
    let up = upstream(&[]);
    let peer = Peer::answering(|_, _| Err(PeerError::MissingCapability("sampling")));
    let result = call(&up, ctx("s1", &peer), "ask", json!({"prompt": "x"}))
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(text(&result)).unwrap();
    assert_eq!(answer["id"], "srv-1");
    assert_eq!(answer["error"]["code"], codes::METHOD_NOT_FOUND);
    up.shutdown().await;
}

#[tokio::test]
async fn cancellation_reaches_the_child_with_our_id() {
    let up = upstream(&[]);
    let peer = Peer::new();
    info(&up, "s1").await; // our ids: 1 initialize, 2 this call
    let c = ctx("s1", &peer);
    let cancel = c.cancel.clone();
    let started = tokio::time::Instant::now();
    let slow = call(&up, c, "slow", json!({"seconds": 20}));
    let (result, _) = tokio::join!(slow, async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    assert_eq!(result.unwrap_err().code, codes::REQUEST_ABORTED);
    assert!(started.elapsed() < Duration::from_secs(2));
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The child saw `notifications/cancelled` for our id of the slow call (3), not the client's.
    assert_eq!(info(&up, "s1").await["cancelled"], json!([3]));
    up.shutdown().await;
}

#[tokio::test]
async fn a_call_past_its_timeout_fails_naming_the_upstream() {
    let up = build(&[], false, Duration::from_millis(3000));
    let peer = Peer::new();
    // Start the child first (retried: on a loaded machine Python may start slowly).
    let mut echo_id = None;
    for _ in 0..5 {
        if let Ok(r) = call(&up, ctx("s1", &peer), "echo", json!({})).await {
            echo_id = r["seen_id"].as_u64();
            break;
        }
    }
    let slow_id = echo_id.expect("the child answers") + 1;
    let err = call(&up, ctx("s1", &peer), "slow", json!({"seconds": 10}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_TIMEOUT);
    assert_eq!(
        err.message,
        "upstream `fx` did not answer tools/call within 3000 ms"
    );
    // The child was told to stop working on it, under our id of the call.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancelled = info(&up, "s1").await["cancelled"].clone();
    assert_eq!(cancelled.as_array().unwrap().last(), Some(&json!(slow_id)));
    up.shutdown().await;
}

#[tokio::test]
async fn the_same_client_id_from_two_sessions_never_crosses() {
    // The client's id never reaches the child; two sessions with "id 1" each get their answer.
    let up = upstream(&[]);
    for _ in 0..3 {
        let (a, b) = (Peer::new(), Peer::new());
        let slow = call(
            &up,
            ctx("A", &a),
            "slow",
            json!({"seconds": 0.3, "tag": "A"}),
        );
        let echo = call(&up, ctx("B", &b), "echo", json!({"s": "B"}));
        let (ra, rb) = tokio::join!(slow, echo);
        assert_eq!(text(&ra.unwrap()), "A");
        assert_eq!(text(&rb.unwrap()), "B");
    }
    // Two in-flight calls of one session, too.
    let p = Peer::new();
    let slow = call(
        &up,
        ctx("A", &p),
        "slow",
        json!({"seconds": 0.3, "tag": "A2"}),
    );
    let echo = call(&up, ctx("A", &p), "echo", json!({"s": "A3"}));
    let (ra, rb) = tokio::join!(slow, echo);
    assert_eq!((text(&ra.unwrap()), text(&rb.unwrap())), ("A2", "A3"));
    assert_ne!(up.child_pid("A"), up.child_pid("B"));
    up.shutdown().await;
}

#[tokio::test]
async fn unsolicited_notifications_go_to_the_sessions_standalone_stream() {
    let up = upstream(&[]);
    let peer = Peer::new();
    call(&up, ctx("s1", &peer), "notify", json!({}))
        .await
        .unwrap();
    let sent = peer.sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].route, "standalone");
    assert_eq!(
        sent[0].message["method"],
        "notifications/tools/list_changed"
    );
    up.shutdown().await;
}

#[tokio::test]
async fn client_notifications_reach_the_sessions_child() {
    let up = upstream(&[]);
    let session: Arc<dyn crate::SessionHandle> = Arc::new(LocalSession::new("s1", client_init()));
    // No child yet: nothing is started for a notification.
    up.notify(
        "notifications/roots/list_changed",
        json!({}),
        session.clone(),
    )
    .await;
    assert!(!up.holds("s1"));
    info(&up, "s1").await;
    up.notify("notifications/roots/list_changed", Value::Null, session)
        .await;
    let received = info(&up, "s1").await["received"].clone();
    assert!(received
        .as_array()
        .unwrap()
        .contains(&json!("notifications/roots/list_changed")));
    up.shutdown().await;
}
