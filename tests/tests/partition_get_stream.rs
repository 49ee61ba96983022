//! Issue 14, chaos scenario 5 (the upstream GET-stream part): a node cut off from Redis gives up
//! its listener on an upstream's GET stream once it fences itself (it could log none of the
//! stream's notifications); another node takes the lease `"<upstream>#get"` over on the next
//! request there and resumes with the stored `Last-Event-ID`, so the client's standalone stream
//! misses no notification; when the link comes back there is still one listener.
//!
//! Nodes `a` and `b` run on loopback, node `c` in a network namespace
//! ([`switchboard_tests::netns`], names and subnet `10.233.x` of its own, so it runs beside
//! `partition_leases.rs` and the chaos binary). The upstream
//! ([`switchboard_tests::ticker_upstream`]) listens on our end of the client link, which c
//! reaches throughout; only c's Redis link is cut.
//!
//! Needs root and `ip netns`; without them it prints that it skipped, or fails when `CI` is set.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::{always_for, eventually};
use switchboard_tests::netns::{can_make_netns, Layout, Netns};
use switchboard_tests::peers::available_or_skip;
use switchboard_tests::ticker_upstream::{assert_no_gap, start, ticks};
use switchboard_tests::upstreams::{start_cluster, Upstream};

const LAYOUT: Layout = Layout {
    name: "sbgets",
    links: "sg",
    net: "10.233",
};

/// `cluster.node_ttl` in ms.
const NODE_TTL_MS: u64 = 1500;
/// How long the link stays cut (issue 14: 10 s).
const PARTITION: Duration = Duration::from_secs(10);
/// One answer's limit.
const T: Duration = Duration::from_secs(20);

/// `tools/call echo` through `url`; whether it answered with a result.
async fn echo(client: &McpClient, url: &str, id: u64) -> bool {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {}}});
    let answer = client.post(url, &body).await.answer(json!(id), T).await;
    answer.response.get("result").is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_redis_gives_up_its_upstream_get_stream() {
    let needs = [("root and `ip netns`", can_make_netns())];
    if !available_or_skip("partition_get_stream", &needs) {
        return;
    }
    let netns = Netns::create(LAYOUT).expect("create the network namespace");
    let (up, url) = start(&format!("{}.2.1", LAYOUT.net)).await;
    let upstream = Upstream::http("ticker", &url).prefix("");
    let mut started = start_cluster(
        2,
        &[upstream],
        ClusterOptions::new().fast_liveness(NODE_TTL_MS),
    );
    let c = netns
        .add_node(&mut started.cluster)
        .expect("start node c in the namespace");
    let urls = started.cluster.urls();
    let (url_b, url_c) = (urls[1].clone(), urls[c].clone());
    let node_ttl = Duration::from_millis(NODE_TTL_MS);

    // The client's standalone stream is on b; its first request goes through c, which takes the
    // lease and opens the upstream's GET stream.
    let mut client = McpClient::new();
    client.initialize(&url_c, "2025-11-25").await;
    let mut on_b = client.get_stream(&url_b, None).await.sse();
    assert!(echo(&client, &url_c, 1).await, "echo through c");
    eventually("c to open the upstream's GET stream", T, || async {
        (up.open.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    let mut seen = ticks(&mut on_b, Duration::from_secs(2)).await;
    assert!(
        seen.len() >= 4,
        "ticks reach b's stream through c: {seen:?}"
    );

    // Cut c off Redis: it fences itself after two node_ttls and closes the upstream stream.
    netns.set_redis_link(false).expect("cut c's Redis link");
    let cut = Instant::now();
    eventually(
        "c to give up the upstream's GET stream",
        2 * node_ttl + Duration::from_secs(5),
        || async { (up.open.load(Ordering::SeqCst) == 0).then_some(()) },
    )
    .await;
    let closed = cut.elapsed();

    // The next requests through b take the lease over and resume where c had stored it.
    let mut id = 100;
    eventually("b to take the GET stream over", T, || {
        id += 1;
        let (client, url, up) = (&client, &url_b, &up);
        async move {
            let answered = echo(client, url, id).await;
            (answered && up.open.load(Ordering::SeqCst) == 1).then_some(())
        }
    })
    .await;
    let taken = cut.elapsed();
    let resumed_from = up.gets.lock().unwrap().last().cloned().flatten();
    assert!(
        resumed_from
            .as_deref()
            .is_some_and(|id| id.starts_with("e-")),
        "b resumed with Last-Event-ID: {resumed_from:?}"
    );
    seen.extend(ticks(&mut on_b, Duration::from_secs(2)).await);

    // For the rest of the partition and after it, one listener: c does not open another.
    let rest = PARTITION.saturating_sub(cut.elapsed());
    always_for("one GET stream while c is cut off", rest, || async {
        up.open.load(Ordering::SeqCst) <= 1
    })
    .await;
    netns.set_redis_link(true).expect("restore c's Redis link");
    let c_node = started.cluster.node(c);
    eventually("c to be ready again", Duration::from_secs(10), || async {
        let status = tokio::task::block_in_place(|| c_node.get_status("/readyz"));
        (status == Some(200)).then_some(())
    })
    .await;
    assert!(
        echo(&client, &url_c, 900).await,
        "echo through c after the rejoin"
    );
    always_for(
        "one GET stream after c rejoined",
        Duration::from_secs(3),
        || async { up.open.load(Ordering::SeqCst) == 1 },
    )
    .await;
    seen.extend(ticks(&mut on_b, Duration::from_secs(2)).await);

    // Nothing the upstream sent is missing from the client's stream (repeats from the stored
    // position on are allowed).
    let seen = assert_no_gap(seen, "the partition");
    let (first, last) = (seen[0], seen[seen.len() - 1]);
    let log = c_node.log_tail(1000);
    assert!(
        log.contains("fenced: stopping this node's listeners"),
        "c says why it closed the stream:\n{log}"
    );
    eprintln!(
        "partition_get_stream: cut → c closed the upstream stream {closed:?}, b held it {taken:?} (node_ttl {node_ttl:?}); {} ticks {first}..={last}, none missing",
        seen.len()
    );
}
