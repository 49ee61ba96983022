//! Nothing outlives its session: cases C09 (idle expiry, what keeps a session alive, the session
//! cap) and C10 (refused requests create nothing; DELETE removes everything), plus 1,000
//! sessions abandoned without DELETE.

use std::time::Duration;

use futures::stream::{self, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::json;
use switchboard_tests::client::{Headers, McpClient};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::eventually;
use switchboard_tests::expect;
use switchboard_tests::msg;

const T: Duration = Duration::from_secs(10);

/// Runs `count` handshakes (round robin over the nodes, `parallel` at a time, no DELETE) and
/// returns the session ids.
async fn abandon_sessions(urls: &[String], count: usize, parallel: usize) -> Vec<String> {
    let base = McpClient::new();
    stream::iter(0..count)
        .map(|i| {
            let mut client = base.with_session(None, None);
            let url = urls[i % urls.len()].clone();
            async move { client.initialize(&url, "2025-06-18").await.0 }
        })
        .buffer_unordered(parallel)
        .collect()
        .await
}

/// Waits until no per-session key is left and the key set is the baseline again.
async fn wait_back_to_baseline(cluster: &Cluster, baseline: &[String], limit: Duration) {
    eventually("Redis back to its baseline keys", limit, || async {
        let extra = cluster.keys_beyond(baseline);
        (cluster.all_session_keys().is_empty() && extra.is_empty()).then_some(())
    })
    .await;
}

/// Asserts 404 on every node for a sample of `sids` and that Redis has no key of theirs.
async fn assert_sample_gone(cluster: &Cluster, sids: &[String], sample: usize) {
    let step = (sids.len() / sample).max(1);
    for sid in sids.iter().step_by(step).take(sample) {
        let client = McpClient::new().with_session(Some(sid), Some("2025-06-18"));
        for url in cluster.urls() {
            let reply = client.post(&url, &msg::bare(9, "tools/list")).await;
            expect::session_not_found(reply, &format!("abandoned session {sid} on {url}")).await;
        }
        assert!(
            cluster.session_keys(sid).is_empty(),
            "keys of {sid}: {:?}",
            cluster.session_keys(sid)
        );
    }
}

/// C09 steps 1–3: 200 abandoned handshakes expire after the idle TTL and leave no key behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c09_abandoned_sessions_expire_and_leave_no_keys() {
    let cluster = Cluster::start(3, ClusterOptions::new().idle_expiry(1500, 300));
    let baseline = cluster.baseline_keys().await;
    let sids = abandon_sessions(&cluster.urls(), 200, 8).await;
    assert!(
        !cluster.session_keys(&sids[199]).is_empty(),
        "a live session has keys in Redis"
    );
    wait_back_to_baseline(&cluster, &baseline, Duration::from_secs(15)).await;
    assert_sample_gone(&cluster, &sids, 10).await;
}

/// The scenario 4: 1,000 sessions abandoned without DELETE are reaped cluster-wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_abandoned_sessions_are_reaped_everywhere() {
    let options = ClusterOptions::new()
        .idle_expiry(2000, 300)
        .set("session.max_sessions", 5000);
    let cluster = Cluster::start(3, options);
    let baseline = cluster.baseline_keys().await;
    let sids = abandon_sessions(&cluster.urls(), 1000, 16).await;
    let mut unique = sids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 1000, "session ids must be distinct");
    wait_back_to_baseline(&cluster, &baseline, Duration::from_secs(30)).await;
    assert_sample_gone(&cluster, &sids, 50).await;
    // Liveness keys and the node roster, and the agreed MRTR sealing key (one per cluster,
    // never per session).
    let cluster_wide = |k: &String| {
        k.starts_with("sb:node:") || k == "sb:nodes" || k == "sb:secret:mrtr-request-state"
    };
    assert!(
        baseline.iter().all(cluster_wide),
        "an idle cluster holds only liveness keys, the roster and its agreed secret: {baseline:?}"
    );
    let extra = cluster.keys_beyond(&baseline);
    assert!(
        extra.is_empty(),
        "DBSIZE back to baseline; extra keys: {extra:?}"
    );
}

/// C09 step 4: a running call keeps its session alive past the idle TTL, and idleness counts
/// from when it finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c09_running_call_keeps_the_session_alive() {
    let cluster = Cluster::start(3, ClusterOptions::new().idle_expiry(800, 200));
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-06-18").await;
    let call = msg::call_with_progress(2, "countdown", json!({"n": 6, "interval_ms": 400}), "c09");
    let answer = client.post(&urls[0], &call).await.answer(json!(2), T).await;
    assert!(
        msg::result_text(&answer.response).contains("countdown finished"),
        "{}",
        answer.response
    );
    assert_eq!(
        answer.with_method("notifications/progress").len(),
        6,
        "progress: {:?}",
        answer.messages
    );
    let after = client.post(&urls[1], &msg::bare(3, "tools/list")).await;
    assert_eq!(
        after.status,
        StatusCode::OK,
        "session alive right after a 2.4 s call (idle TTL 0.8 s)"
    );
}

/// C09 step 4: an open GET stream with no traffic keeps its session alive past the idle TTL;
/// once it closes, the session expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c09_open_get_stream_keeps_the_session_alive() {
    let cluster = Cluster::start(3, ClusterOptions::new().idle_expiry(800, 200));
    let urls = cluster.urls();
    let mut client = McpClient::new();
    let (sid, _) = client.initialize(&urls[0], "2025-06-18").await;
    let get = client.get_stream(&urls[0], None).await;
    assert_eq!(get.status, StatusCode::OK);
    let mut stream = get.sse();
    // Timing is the subject: hold the stream open, without requests, for three idle TTLs.
    tokio::time::sleep(Duration::from_millis(2400)).await;
    assert!(
        stream.next_event(Duration::from_millis(1)).await.is_none() && !stream.is_ended(),
        "stream ended early"
    );
    let alive = client.post(&urls[1], &msg::bare(2, "tools/list")).await;
    assert_eq!(
        alive.status,
        StatusCode::OK,
        "session alive while its GET stream is open"
    );
    alive.answer(json!(2), T).await;
    drop(stream);
    eventually("session expired after its stream closed", T, || async {
        cluster.session_keys(&sid).is_empty().then_some(())
    })
    .await;
    expect::session_gone_everywhere(&client, &urls).await;
}

/// C09 step 5: past `session.max_sessions`, `initialize` gets 503 with `Retry-After` and no session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c09_sessions_past_the_cap_get_503() {
    let cluster = Cluster::start(3, ClusterOptions::new().set("session.max_sessions", 5));
    let urls = cluster.urls();
    let mut first = McpClient::new();
    first.initialize(&urls[0], "2025-06-18").await;
    for i in 1..5 {
        McpClient::new()
            .initialize(&urls[i % 3], "2025-06-18")
            .await;
    }
    for url in &urls {
        let reply = McpClient::new()
            .post(url, &msg::init("2025-06-18", json!({})))
            .await;
        assert!(
            reply
                .header("retry-after")
                .is_some_and(|v| v.parse::<u64>().is_ok()),
            "503 without Retry-After"
        );
        expect::refused_plain(
            reply,
            StatusCode::SERVICE_UNAVAILABLE,
            "initialize past session.max_sessions",
        )
        .await;
    }
    assert_eq!(
        cluster.session_ids_in_redis().len(),
        5,
        "refused initializes must not store sessions"
    );
    assert_eq!(first.delete(&urls[1]).await.status, StatusCode::NO_CONTENT);
    eventually("a slot frees up after DELETE", T, || async {
        let reply = McpClient::new()
            .post(&urls[2], &msg::init("2025-06-18", json!({})))
            .await;
        (reply.status == StatusCode::OK).then_some(())
    })
    .await;
}

/// C10 steps 1, 2 and 4: refused requests (each kind 100 times, rotating nodes, new connections)
/// carry no `Mcp-Session-Id` and leave no key in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c10_refused_requests_create_no_session() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let baseline = cluster.baseline_keys().await;
    let client = McpClient::new_connections();
    let init = msg::init("2025-06-18", json!({})).to_string();
    let post = client.post_headers();
    let sse = Headers::default().set("Accept", "text/event-stream");
    let kinds: Vec<(Method, Headers, Option<String>, StatusCode)> = vec![
        (Method::GET, sse, None, StatusCode::BAD_REQUEST),
        (
            Method::HEAD,
            Headers::default(),
            None,
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            Method::OPTIONS,
            Headers::default(),
            None,
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            Method::DELETE,
            Headers::default(),
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::POST,
            post.clone().set("Accept", "text/html"),
            Some(init.clone()),
            StatusCode::NOT_ACCEPTABLE,
        ),
        (
            Method::POST,
            post.clone().set("Content-Type", "text/plain"),
            Some(init),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            Method::POST,
            post,
            Some("{".into()),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for i in 0..100 {
        for (k, (method, headers, body, status)) in kinds.iter().enumerate() {
            let url = &urls[(i + k) % urls.len()];
            let reply = client
                .send(method.clone(), url, headers, body.clone())
                .await;
            let what = format!("{method} {url} ({headers:?}, body {body:?})");
            if body.as_deref() == Some("{") {
                expect::refused(reply, *status, Some(expect::PARSE_ERROR), &what).await;
            } else {
                expect::refused_plain(reply, *status, &what).await;
            }
        }
    }
    assert!(
        cluster.all_session_keys().is_empty(),
        "refusals made keys: {:?}",
        cluster.all_session_keys()
    );
    let extra = cluster.keys_beyond(&baseline);
    assert!(extra.is_empty(), "refusals added Redis keys: {extra:?}");
}

/// C10 step 3: 100 handshakes each followed by DELETE on another node leave no key, and every
/// node answers 404 afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c10_handshake_then_delete_leaves_nothing() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let baseline = cluster.baseline_keys().await;
    let mut sids = Vec::new();
    for i in 0..100 {
        let mut client = McpClient::new();
        let (sid, _) = client.initialize(&urls[i % 3], "2025-06-18").await;
        let deleted = client.delete(&urls[(i + 1) % 3]).await;
        assert_eq!(deleted.status, StatusCode::NO_CONTENT, "DELETE {sid}");
        sids.push(sid);
    }
    wait_back_to_baseline(&cluster, &baseline, T).await;
    assert_sample_gone(&cluster, &sids, 10).await;
}
