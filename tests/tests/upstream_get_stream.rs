//! A Streamable HTTP upstream's own GET stream behind three nodes (MCP 2025-11-25,
//! basic/transports, Listening for Messages from the Server; Resumability and Redelivery):
//! exactly one node holds it (the lease `"<upstream>#get"`), its notifications reach the
//! client's standalone GET stream on whichever node holds that, and when the holder is killed
//! the next request through another node takes the stream over, resuming with `Last-Event-ID`.
//!
//! The upstream is [`switchboard_tests::ticker_upstream`], in this process.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::{always_for, eventually};
use switchboard_tests::ticker_upstream::{assert_no_gap, start, ticks};
use switchboard_tests::upstreams::{start_cluster, Upstream};

const T: Duration = Duration::from_secs(20);

async fn echo(client: &McpClient, url: &str, id: u64) {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {}}});
    let answer = client.post(url, &body).await.answer(json!(id), T).await;
    assert!(
        answer.response.get("result").is_some(),
        "echo on {url}: {}",
        answer.response
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_holds_the_upstream_get_stream_and_another_resumes_it_after_a_crash() {
    let (up, url) = start("127.0.0.1").await;
    let upstream = Upstream::http("ticker", &url).prefix("");
    let mut started = start_cluster(3, &[upstream], ClusterOptions::new().fast_liveness(1500));
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    // The client's standalone stream is on B; its requests go to A (first: A takes the lease) and C.
    let mut b_stream = client.get_stream(&urls[1], None).await.sse();
    echo(&client, &urls[0], 1).await;
    echo(&client, &urls[2], 2).await;
    echo(&client, &urls[0], 3).await;
    echo(&client, &urls[2], 4).await;

    let mut before = ticks(&mut b_stream, Duration::from_secs(2)).await;
    assert!(before.len() >= 4, "ticks reach B's stream: {before:?}");
    assert!(
        before.windows(2).all(|w| w[0] < w[1]),
        "in order: {before:?}"
    );
    // Exactly one GET stream upstream, however many nodes serve the session.
    always_for("one holder", Duration::from_secs(2), || async {
        up.open.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(up.gets.lock().unwrap().len(), 1, "never reopened meanwhile");
    before.extend(ticks(&mut b_stream, Duration::from_millis(600)).await);
    let last_before = *before.last().expect("ticks keep coming");

    // A holds the lease: killing it closes the upstream's GET stream.
    started.cluster.kill9(0);
    eventually("A's GET stream to close", T, || async {
        (up.open.load(Ordering::SeqCst) == 0).then_some(())
    })
    .await;
    // The next requests through C take over once A's heartbeat lapsed.
    let mut id = 100;
    eventually("another node to take the GET stream over", T, || {
        id += 1;
        let (client, url, up) = (&client, &urls[2], &up);
        async move {
            echo(client, url, id).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            (up.open.load(Ordering::SeqCst) == 1).then_some(())
        }
    })
    .await;
    let resumed_from = up.gets.lock().unwrap()[1].clone();
    let resumed_seq: u64 = resumed_from
        .as_deref()
        .and_then(|id| id.strip_prefix("e-")?.parse().ok())
        .unwrap_or_else(|| panic!("resumed with Last-Event-ID: {resumed_from:?}"));
    assert!(
        resumed_seq >= 1 && resumed_seq <= last_before + 10,
        "{resumed_seq} vs {last_before}"
    );

    // B's stream continues: what was sent while nobody listened is replayed (some events may
    // come twice, from the last stored id on), then live ticks.
    let after = ticks(&mut b_stream, Duration::from_secs(3)).await;
    assert!(!after.is_empty(), "ticks after the takeover");
    assert_no_gap(
        before.iter().chain(&after).copied().collect(),
        "the takeover",
    );
    always_for(
        "one holder after the takeover",
        Duration::from_secs(1),
        || async { up.open.load(Ordering::SeqCst) == 1 },
    )
    .await;
}
