//! A request admitted just before Redis goes away (RELIABILITY.md, finding 1): its answer outlives
//! `http.sse_after`, so the node answers with SSE, but it cannot register the request's stream
//! while Redis is down. Every event id the client is given must be one a resume can use: no
//! priming event (`<stream>_0-0`) for a stream the store does not know, and once Redis is back
//! the request registers before its next event, which then carries an id any node resumes from.
//! Before the fix the priming id was sent anyway and `GET` with it as `Last-Event-ID` got 400
//! ("names no stream of this session").

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::eventually_sync;
use switchboard_tests::msg;
use switchboard_tests::redis_backend::RedisBackend;
use switchboard_tests::redis_process::commandstats_of;
use switchboard_tests::redis_server::{Persistence, RedisServer};

/// Commands Redis ran, bar the ones this test and the node's liveness probe send themselves.
fn commands_run(stats: &BTreeMap<String, u64>) -> u64 {
    stats
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "info" | "ping"))
        .map(|(_, calls)| calls)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_registered_only_after_an_outage_gives_only_resumable_event_ids() {
    // Nothing but this test's requests reaches Redis in the window the test watches. AOF with
    // fsync on every write: the session outlives the restart.
    let options = ClusterOptions::new()
        .set("http.sse_after", "500ms")
        .set("cluster.heartbeat_interval", "60s")
        .set("cluster.node_ttl", "180s")
        .set("session.touch_interval", "60s")
        .set("cluster.reaper_interval", "60s");
    let redis = RedisServer::start_with(Persistence::AofAlways);
    let mut cluster = Cluster::start_on(RedisBackend::Standalone(redis), 1, options);
    let url = cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    let port = cluster.redis().port();
    let before = commands_run(&commandstats_of(port, None));

    // Two progress notifications, 3 s apart, then the result: nothing is sent before 3 s, so the
    // node switches to SSE at `sse_after` (0.5 s), while Redis is down.
    let call = {
        let client = client.clone();
        let url = url.clone();
        tokio::spawn(async move {
            let body = msg::call_with_progress(
                2,
                "countdown",
                json!({"n": 2, "interval_ms": 3000}),
                "outage",
            );
            client.post(&url, &body).await
        })
    };
    // The admission is the call's one store round trip before `sse_after` passes.
    eventually_sync("the call admitted in Redis", Duration::from_secs(1), || {
        (commands_run(&commandstats_of(port, None)) > before).then_some(())
    });
    let RedisBackend::Standalone(redis) = cluster.backend_mut() else {
        unreachable!("the cluster runs on the standalone Redis started above")
    };
    redis.kill9();

    let reply = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the POST's headers within 10 s")
        .expect("the POST task");
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.is_sse(), "an answer past sse_after streams");
    // The stream is open and Redis still down: bring it back before the first progress event.
    assert!(redis.restart(), "redis-server came back with its AOF");

    let mut sse = reply.sse();
    let got = sse.until_response(&json!(2), Duration::from_secs(30)).await;
    let response = got.matched.clone().unwrap_or_else(|| {
        panic!(
            "no response to the call within 30 s; events: {:?}",
            got.events
        )
    });
    assert_eq!(
        response["result"]["content"][0]["text"], "countdown finished",
        "the call ran to its end once Redis was back: {response}"
    );
    assert_eq!(
        got.with_method("notifications/progress").len(),
        2,
        "both progress notifications reached the stream: {:?}",
        got.events
    );

    let ids: Vec<String> = got.events.iter().filter_map(|e| e.id.clone()).collect();
    assert!(
        !ids.is_empty(),
        "the events logged after the outage carry ids: {:?}",
        got.events
    );
    for id in &ids {
        let resumed = client.get_stream(&url, Some(id)).await;
        let status = resumed.status;
        if status != StatusCode::OK {
            panic!(
                "Last-Event-ID {id} (an id the client was given) must resume, got {status}: {}",
                resumed.text().await
            );
        }
    }
}
