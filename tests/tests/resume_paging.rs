//! A stream resumed on another node with far more logged events than one replay page: every
//! event arrives once, in order (the node pages through the log instead of loading it whole).

use std::time::Duration;

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_standalone_log_replays_completely_across_pages() {
    let cluster = Cluster::start(2, ClusterOptions::new());
    let (a, b) = (cluster.url(0), cluster.url(1));
    let mut client = McpClient::new();
    client.initialize(&a, "2025-11-25").await;
    // 300 log messages (and one resources/updated) on the standalone stream, nobody listening.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "notify", "arguments": {"count": 300, "interval_ms": 0}}});
    let answer = client
        .post(&a, &call)
        .await
        .answer(json!(1), Duration::from_secs(30))
        .await;
    assert!(
        answer.response.get("result").is_some(),
        "{}",
        answer.response
    );

    let mut stream = client.get_stream(&b, Some("get_0-0")).await.sse();
    let mut seqs = Vec::new();
    let mut updated = 0;
    while seqs.len() < 300 || updated == 0 {
        let Some((_, msg)) = stream.next_message(Duration::from_secs(10)).await else {
            panic!("stream ended after {} of 300 messages", seqs.len());
        };
        match msg["method"].as_str() {
            Some("notifications/message") => {
                seqs.push(msg["params"]["data"]["seq"].as_u64().unwrap())
            }
            Some("notifications/resources/updated") => updated += 1,
            other => panic!("unexpected {other:?}: {msg}"),
        }
    }
    let first = seqs[0];
    let expected: Vec<u64> = (first..first + 300).collect();
    assert_eq!(seqs, expected, "every message once, in order");
    assert_eq!(updated, 1);
}

/// The `(ms, seq)` of an event id `<stream>_<ms>-<seq>`.
fn id_order(id: &str) -> (u64, u64) {
    let (_, pos) = id.rsplit_once('_').expect("event id has a stream");
    let (ms, seq) = pos.split_once('-').expect("position is ms-seq");
    (ms.parse().unwrap(), seq.parse().unwrap())
}

/// A standalone stream resumed from the start on another node with 1,000 logged messages (four
/// replay pages, each written as one chunk) while a second call sends 100 more, one every
/// 10 ms, some of them live while the replay is still paging: every message of both calls
/// arrives once, in order, with strictly increasing event ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_of_several_pages_with_live_events_during_it_is_exact() {
    let cluster = Cluster::start(
        2,
        ClusterOptions::new().set("session.max_events_per_stream", 5000),
    );
    let (a, b) = (cluster.url(0), cluster.url(1));
    let mut client = McpClient::new();
    client.initialize(&a, "2025-11-25").await;
    let notify = |id: u64, count: u64, interval_ms: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "notify", "arguments": {"count": count, "interval_ms": interval_ms}}})
    };
    let answer = client
        .post(&a, &notify(1, 1000, 0))
        .await
        .answer(json!(1), Duration::from_secs(60))
        .await;
    assert!(
        answer.response.get("result").is_some(),
        "{}",
        answer.response
    );

    // The second call runs while B replays the first one's messages.
    let live = {
        let session = client.with_session(client.session_id.as_deref(), client.revision.as_deref());
        let (client, a) = (session, a.clone());
        tokio::spawn(async move {
            client
                .post(&a, &notify(2, 100, 10))
                .await
                .answer(json!(2), Duration::from_secs(60))
                .await
        })
    };
    let mut stream = client.get_stream(&b, Some("get_0-0")).await.sse();
    let (mut seqs, mut updated, mut last) = (vec![Vec::new(), Vec::new()], 0, (0, 0));
    while seqs[1].len() < 100 || updated < 2 {
        let Some((ev, msg)) = stream.next_message(Duration::from_secs(20)).await else {
            panic!(
                "stream ended after {} + {} messages, {updated} updates",
                seqs[0].len(),
                seqs[1].len()
            );
        };
        let order = id_order(ev.id.as_deref().expect("replayed events carry ids"));
        assert!(order > last, "event id {:?} not after {last:?}", ev.id);
        last = order;
        match msg["method"].as_str() {
            Some("notifications/message") => {
                let data = &msg["params"]["data"];
                let call = usize::from(data["of"].as_u64() == Some(100));
                seqs[call].push(data["seq"].as_u64().unwrap());
            }
            Some("notifications/resources/updated") => updated += 1,
            other => panic!("unexpected {other:?}: {msg}"),
        }
    }
    let answer = live.await.unwrap();
    assert!(
        answer.response.get("result").is_some(),
        "{}",
        answer.response
    );
    assert_eq!(
        seqs[0],
        (1..=1000).collect::<Vec<u64>>(),
        "first call once, in order"
    );
    assert_eq!(
        seqs[1],
        (1..=100).collect::<Vec<u64>>(),
        "second call once, in order"
    );
    assert_eq!(updated, 2);
}

/// A POST stream resumed on another node while its call is still logging (countdown, 3,000
/// progress events, no pause): the replay pages through the log as it grows and the rest
/// comes live; every progress value arrives once, in order, then the response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_stream_resumed_while_it_logs_is_exact() {
    let cluster = Cluster::start(
        2,
        ClusterOptions::new().set("session.max_events_per_stream", 5000),
    );
    let (a, b) = (cluster.url(0), cluster.url(1));
    let mut client = McpClient::new();
    client.initialize(&a, "2025-11-25").await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "countdown", "arguments": {"n": 3000, "interval_ms": 0},
            "_meta": {"progressToken": "t"}}});
    let mut first = client.post(&a, &call).await.sse();
    let priming = first
        .next_event(Duration::from_secs(10))
        .await
        .expect("a priming event");
    assert!(priming.is_priming(), "{priming:?}");
    drop(first);

    let mut stream = client.get_stream(&b, priming.id.as_deref()).await.sse();
    let (mut expected, mut last) = (1u64, id_order(priming.id.as_deref().unwrap()));
    loop {
        let Some((ev, msg)) = stream.next_message(Duration::from_secs(20)).await else {
            panic!("stream ended after {} progress events", expected - 1);
        };
        let order = id_order(ev.id.as_deref().expect("replayed events carry ids"));
        assert!(order > last, "event id {:?} not after {last:?}", ev.id);
        last = order;
        if msg["method"] == "notifications/progress" {
            assert_eq!(msg["params"]["progress"].as_u64(), Some(expected), "{msg}");
            expected += 1;
        } else {
            assert_eq!(msg["id"], json!(1), "{msg}");
            assert!(msg.get("result").is_some(), "{msg}");
            break;
        }
    }
    assert_eq!(expected, 3001, "every progress event before the response");
}
