//! The cookies an HTTP upstream sets, as the node logs them when it cannot keep them all
//! (`max_cookie_bytes`).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::counter::Replica;
use switchboard_tests::upstreams::{start_cluster, Upstream};

const T: Duration = Duration::from_secs(20);

/// What the node logs when it does not keep cookies the upstream set.
const NOT_KEPT: &str = "not keeping cookies the upstream set";

/// An upstream that sets ten 50-byte cookies on every answer, with `max_cookie_bytes = 100`
/// (one fits): over twenty calls of one client session the node warns once per upstream
/// session (the probe's and the client's), never twice for one. (`exp14_cookie_flood.py` saw
/// 484 warnings for 21 answers: one per cookie not kept, on every answer.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookies_not_kept_are_warned_about_once_per_upstream_session() {
    let replica = Replica::start(SocketAddr::from(([127, 0, 0, 1], 0)), "r0");
    replica.state().set_cookies(10, 50, false);
    let upstream = Upstream::http("counter", &replica.url())
        .prefix("")
        .set("max_cookie_bytes", 100);
    let started = start_cluster(1, &[upstream], ClusterOptions::new());
    let url = started.cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    for id in 1..=20 {
        let reply = client.call_tool(&url, id, "increment", json!({})).await;
        let response = reply.answer(json!(id), T).await.response;
        assert!(response.get("result").is_some(), "{response}");
    }
    let log = started.cluster.node(0).log_tail(10_000);
    let warnings: Vec<&str> = log
        .lines()
        .filter(|line| line.contains(NOT_KEPT) && line.contains("WARN"))
        .collect();
    let sessions: BTreeSet<&str> = warnings
        .iter()
        .filter_map(|line| line.split("upstream_session=").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .collect();
    assert!(
        !warnings.is_empty(),
        "the node warns about the cookies:\n{log}"
    );
    assert_eq!(
        sessions.len(),
        warnings.len(),
        "one warning per upstream session:\n{}",
        warnings.join("\n")
    );
    assert!(warnings.len() <= 2, "{}", warnings.join("\n"));
}
