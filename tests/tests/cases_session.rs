//! Session routing and lifecycle across nodes: cases C01 (a session made on one node works on the
//! others; DELETE ends it everywhere) and C05 (unknown, deleted or expired sessions get 404).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::eventually;
use switchboard_tests::expect;
use switchboard_tests::msg;
use switchboard_tests::sse::SseStream;

const T: Duration = Duration::from_secs(10);

/// Opens the standalone GET stream on `url` and asserts 200 `text/event-stream`.
async fn open_get(client: &McpClient, url: &str) -> SseStream {
    let reply = client.get_stream(url, None).await;
    assert_eq!(reply.status, StatusCode::OK, "GET {url}");
    assert!(
        reply.is_sse(),
        "GET {url}: content type {:?}",
        reply.header("content-type")
    );
    reply.sse()
}

/// C01 steps 1–6 on fixed nodes, with a notifier on the GET stream and a call still running at
/// DELETE time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c01_session_made_on_a_works_on_b_and_c_and_delete_ends_it_everywhere() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    let (sid, revision) = client.initialize(&urls[0], "2025-06-18").await;
    expect::session_id_shape(&sid);
    assert_eq!(revision, "2025-06-18");

    let listed = client
        .post(&urls[1], &msg::bare(2, "tools/list"))
        .await
        .answer(json!(2), T)
        .await;
    let names: Vec<&str> = listed.response["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for tool in ["echo", "add", "countdown", "sample", "notify"] {
        assert!(
            names.contains(&tool),
            "tools/list on B lacks {tool}: {names:?}"
        );
    }
    let echoed = client
        .call_tool(&urls[2], 3, "echo", json!({"text": "c01-hello"}))
        .await
        .answer(json!(3), T)
        .await;
    assert!(
        msg::result_text(&echoed.response).contains("c01-hello"),
        "echo on C: {}",
        echoed.response
    );

    let mut get_b = open_get(&client, &urls[1]).await;
    let notify = client
        .call_tool(
            &urls[2],
            4,
            "notify",
            json!({"count": 2, "interval_ms": 10}),
        )
        .await;
    notify.answer(json!(4), T).await;
    let got = get_b
        .until_method("notifications/resources/updated", T)
        .await;
    assert!(
        got.matched.is_some(),
        "GET stream on B: no resources/updated; got {:?}",
        got.events
    );
    assert_eq!(
        got.with_method("notifications/message").len(),
        2,
        "notifier messages on B: {:?}",
        got.messages
    );

    let token_call =
        msg::call_with_progress(5, "countdown", json!({"n": 100, "interval_ms": 100}), "c01");
    let running = client.post(&urls[0], &token_call).await;
    assert!(running.is_sse(), "a countdown with progress answers as SSE");
    let mut running = running.sse();
    let first = running.until_method("notifications/progress", T).await;
    assert!(
        first.matched.is_some(),
        "countdown on A sent no progress: {:?}",
        first.events
    );

    let deleted = client.delete(&urls[2]).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "DELETE on C");
    expect::session_gone_everywhere(&client, &urls).await;
    get_b
        .until_end(T)
        .await
        .unwrap_or_else(|ev| panic!("GET stream on B still open after DELETE; read {ev:?}"));
    let rest = running
        .until_end(T)
        .await
        .unwrap_or_else(|ev| panic!("countdown on A still open after DELETE: {ev:?}"));
    let finished = rest
        .iter()
        .filter_map(|e| e.json())
        .any(|m| msg::result_text(&m).contains("countdown finished"));
    assert!(
        !finished,
        "a deleted session's call must not finish normally: {rest:?}"
    );
    // Its stream ends with the request's -32004, not with nothing (the log is gone by then).
    let cancelled = rest.iter().filter_map(|e| e.json()).find(|m| m["id"] == 5);
    assert_eq!(
        cancelled.map(|m| m["error"].clone()),
        Some(json!({"code": -32004, "message": "request cancelled",
            "data": {"reason": "session_ended"}})),
        "the countdown's stream after DELETE: {rest:?}"
    );
    eventually("no Redis key of the deleted session", T, || async {
        cluster.session_keys(&sid).is_empty().then_some(())
    })
    .await;
}

/// C01 step 7: the whole flow repeated with a new TCP connection per request, each request going
/// to the next node in turn (a round-robin balancer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c01_every_request_on_a_new_connection_and_the_next_node() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut turn = 0usize;
    let mut next = || {
        turn += 1;
        urls[turn % urls.len()].clone()
    };
    for round in 0..20 {
        let mut client = McpClient::new_connections();
        let (sid, _) = client
            .initialize_only(&next(), "2025-06-18", json!({}))
            .await;
        expect::accepted(client.post(&next(), &msg::inited()).await, "INITED").await;
        let listed = client
            .post(&next(), &msg::bare(2, "tools/list"))
            .await
            .answer(json!(2), T)
            .await;
        assert!(
            listed.response["result"]["tools"].is_array(),
            "round {round}: {}",
            listed.response
        );
        let echo = client
            .call_tool(&next(), 3, "echo", json!({"text": format!("r{round}")}))
            .await;
        let echo = echo.answer(json!(3), T).await;
        assert!(
            msg::result_text(&echo.response).contains(&format!("r{round}")),
            "round {round}: {}",
            echo.response
        );
        let mut get = open_get(&client, &next()).await;
        let deleted = client.delete(&next()).await;
        assert_eq!(
            deleted.status,
            StatusCode::NO_CONTENT,
            "round {round}: DELETE"
        );
        let url = next();
        expect::session_not_found(
            client.post(&url, &msg::bare(4, "tools/list")).await,
            "POST after DELETE",
        )
        .await;
        get.until_end(T)
            .await
            .unwrap_or_else(|_| panic!("round {round}: GET stream still open after DELETE"));
        assert!(
            cluster.session_keys(&sid).is_empty(),
            "round {round}: keys left: {:?}",
            cluster.session_keys(&sid)
        );
    }
}

/// C05 steps 1–3 and 5: an id the cluster does not know is 404 on POST, GET and DELETE on every
/// node; no id at all is 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c05_unknown_session_is_404_everywhere_and_missing_session_is_400() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    for unknown in [
        "00000000-dead-beef-0000-000000000000",
        "0123456789abcdef0123456789abcdef",
    ] {
        let client = McpClient::new().with_session(Some(unknown), Some("2025-06-18"));
        expect::session_gone_everywhere(&client, &urls).await;
        for url in &urls {
            let what = format!("DELETE {unknown} on {url}");
            expect::session_not_found(client.delete(url).await, &what).await;
            let what = format!("notifications/cancelled with {unknown} on {url}");
            expect::session_not_found(client.post(url, &msg::cancelled(12345)).await, &what).await;
        }
    }
    let anonymous = McpClient::new();
    for url in &urls {
        let reply = anonymous.post(url, &msg::bare(2, "tools/list")).await;
        // Refused once the body was read: with the request's id (JSON-RPC 2.0 §5).
        let what = "tools/list without a session";
        expect::refused_with_id(reply, StatusCode::BAD_REQUEST, None, &json!(2), what).await;
    }
    assert!(
        cluster.all_session_keys().is_empty(),
        "refused requests made keys: {:?}",
        cluster.all_session_keys()
    );
}

/// C05 step 4: a session idle past its TTL is 404 on another node, and its keys are reaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c05_expired_session_is_404_on_every_node() {
    let cluster = Cluster::start(3, ClusterOptions::new().idle_expiry(1000, 200));
    let urls = cluster.urls();
    let mut client = McpClient::new();
    let (sid, _) = client.initialize(&urls[0], "2025-06-18").await;
    let alive = client.post(&urls[1], &msg::bare(2, "tools/list")).await;
    assert_eq!(alive.status, StatusCode::OK, "a fresh session works on B");
    alive.answer(json!(2), T).await;
    // Timing is the subject here: any request would restart the idle clock, so wait without one.
    tokio::time::sleep(Duration::from_millis(1000 + 1200)).await;
    let reply = client.post(&urls[1], &msg::bare(3, "tools/list")).await;
    expect::session_not_found(reply, "tools/list on B after the idle TTL").await;
    expect::session_gone_everywhere(&client, &urls).await;
    eventually("expired session's keys reaped", T, || async {
        cluster.session_keys(&sid).is_empty().then_some(())
    })
    .await;
}

/// C05 step 6: `initialize` carrying a stale or unknown `Mcp-Session-Id` makes a fresh session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c05_initialize_with_a_stale_session_id_makes_a_fresh_session() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut old = McpClient::new();
    let (stale, _) = old.initialize(&urls[0], "2025-06-18").await;
    assert_eq!(old.delete(&urls[0]).await.status, StatusCode::NO_CONTENT);
    for carried in [
        stale.as_str(),
        "ffffffffffffffffffffffffffffffff",
        "00000000-dead-beef-0000-000000000000",
    ] {
        let client = McpClient::new().with_session(Some(carried), Some("2025-06-18"));
        let reply = client
            .post(&urls[1], &msg::init("2025-06-18", json!({})))
            .await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "initialize carrying {carried}"
        );
        let fresh = reply.session_id().expect("fresh Mcp-Session-Id");
        expect::session_id_shape(&fresh);
        assert_ne!(fresh, carried, "initialize must not revive {carried}");
        reply.answer(json!(1), T).await;
        let client = client.with_session(Some(&fresh), Some("2025-06-18"));
        expect::accepted(
            client.post(&urls[2], &msg::inited()).await,
            "INITED for the fresh session",
        )
        .await;
        let listed = client
            .post(&urls[0], &msg::bare(2, "tools/list"))
            .await
            .answer(json!(2), T)
            .await;
        assert!(
            listed.response["result"]["tools"].is_array(),
            "fresh session on A: {}",
            listed.response
        );
    }
    expect::session_gone_everywhere(&old, &urls).await;
}
