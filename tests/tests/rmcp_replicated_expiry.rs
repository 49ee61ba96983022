//! Abandoned sessions of switchboard-rmcp's `replicated` example expire with no Redis key left
//! (issue 18): three replicas on a private Redis with `--idle-ttl-secs 1`; sessions that were
//! used across replicas (a call's stream logged, the standalone stream opened and dropped, a
//! call's stream dropped mid-call and never resumed) are abandoned, and within a bounded wait
//! `SCAN` finds no key of theirs (nor any per-session key at all), the session index has no
//! entry for them, and every replica answers 404 for them.
//!
//! Not here: a session left with a call still running (say, waiting for a sampling answer that
//! never comes) is not abandoned in the crate's terms ("nothing open and nothing running"): its
//! replica keeps it alive while rmcp's handler lives, at least rmcp's 5 min keep-alive.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::eventually::eventually;
use switchboard_tests::msg;
use switchboard_tests::replicated::{Options, Replicas};

const REVISION: &str = "2025-11-25";
const WAIT: Duration = Duration::from_secs(10);
/// idle_ttl (1 s) plus a reaper pass (every idle_ttl) and a keep-alive round, with margin for a
/// loaded machine.
const EXPIRY_LIMIT: Duration = Duration::from_secs(30);

/// A session initialized on `url` with the sampling capability.
async fn session(url: &str) -> (McpClient, String) {
    let mut client = McpClient::new();
    let (sid, _) = client
        .initialize_with(url, REVISION, json!({"sampling": {}}))
        .await;
    (client, sid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_sessions_expire_with_no_redis_key_left() {
    let options = Options {
        idle_ttl_secs: Some(1),
    };
    let replicas = Replicas::replicated(3, &options);
    let (a, b, c) = (replicas.url(0), replicas.url(1), replicas.url(2));

    // Made on A and never used again.
    let (idle, idle_sid) = session(&a).await;

    // Made on A, a streaming call on B, the standalone stream opened on C and dropped.
    let (used, used_sid) = session(&a).await;
    let reply = used
        .call_tool(&b, 2, "test_tool_with_logging", json!({}))
        .await;
    let answer = reply.answer(json!(2), WAIT).await;
    assert_eq!(answer.with_method("notifications/message").len(), 3);
    let mut standalone = used.get_stream(&c, None).await.sse();
    // (rmcp may send a bare `retry:` event first; the replica's priming event carries an id.)
    loop {
        let event = standalone.next_event(WAIT).await.expect("a priming event");
        if event.is_priming() {
            break;
        }
        assert!(
            event.json().is_none(),
            "a message before priming: {event:?}"
        );
    }
    drop(standalone);

    // Made on B, a streaming call on C whose connection the client drops after the first
    // message (the call goes on and logs the rest), never resumed.
    let (cut, cut_sid) = session(&b).await;
    let mut call = cut
        .call_tool(&c, 2, "test_tool_with_logging", json!({}))
        .await
        .sse();
    let first = call.until_method("notifications/message", WAIT).await;
    assert!(
        first.matched.is_some(),
        "a first message: {:?}",
        first.events
    );
    drop(call);

    let sessions = [(&idle, &idle_sid), (&used, &used_sid), (&cut, &cut_sid)];
    for (_, sid) in sessions {
        let keys = replicas.session_keys(sid);
        assert!(!keys.is_empty(), "session {sid} is in Redis while used");
    }

    // Nothing more from any client: the sessions end and leave nothing behind.
    for (_, sid) in sessions {
        eventually(
            &format!("no Redis key of abandoned session {sid}"),
            EXPIRY_LIMIT,
            || async { replicas.session_keys(sid).is_empty().then_some(()) },
        )
        .await;
    }
    let left = replicas.redis().keys_matching("*{*}*");
    assert!(left.is_empty(), "per-session keys left in Redis: {left:?}");
    for (client, sid) in sessions {
        for url in [&a, &b, &c] {
            let reply = client.post(url, &msg::bare(3, "tools/list")).await;
            assert_eq!(reply.status, StatusCode::NOT_FOUND, "{sid} on {url}");
        }
    }
}
