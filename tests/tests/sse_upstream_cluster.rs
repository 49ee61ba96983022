//! A legacy HTTP+SSE upstream (`kind = "sse"`, MCP 2024-11-05) behind a cluster: one SSE
//! connection per client session, held by the session's owner node (node-bound, like a stdio
//! child). The rolling-restart and SIGKILL failover cases of C08 with it are in `merged_lists.rs`;
//! here, calls keep working through a live node once the connection's owner stopped, and an owner
//! that stalled past `cluster.node_ttl` and was taken over closes its old connection when it wakes.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::eventually;
use switchboard_tests::msg;
use switchboard_tests::sse_upstream::SseUpstream;
use switchboard_tests::upstreams::{start_cluster, Upstream};

const T: Duration = Duration::from_secs(20);

/// The fixture connection a `tools/call` of `echo` went through, or the JSON-RPC error.
async fn echo(client: &McpClient, url: &str, id: u64) -> Result<String, Value> {
    let reply = client.call_tool(url, id, "echo", json!({"s": "x"})).await;
    let response = reply.answer(json!(id), T).await.response;
    if let Some(error) = response.get("error") {
        return Err(error.clone());
    }
    let connection = response["result"]["structuredContent"]["connection"].as_str();
    Ok(connection
        .unwrap_or_else(|| panic!("no connection in {response}"))
        .to_owned())
}

/// C08: the node holding a session's legacy SSE connection gets SIGTERM and exits 0; the next
/// `tools/call`, through the other node, answers with no error, through a new connection that
/// node opened and initialized with the client's own `initialize` (`whoami` is the client's
/// `clientInfo`, "replay"), and the stopped node's connection is closed: the server has exactly
/// one open, the one the calls reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_keeps_working_after_the_owner_of_the_connection_stops() {
    let server = SseUpstream::start().await;
    let upstream = Upstream::sse("legacy", &server.url()).prefix("");
    let mut started = start_cluster(2, &[upstream], ClusterOptions::new());
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let old = echo(&client, &urls[0], 1).await.expect("a first call");

    started.cluster.node(0).terminate();
    let code = tokio::task::block_in_place(|| started.cluster.node_mut(0).wait_exit(T));
    assert_eq!(code, Some(0), "the owner drained and exited");
    let new = echo(&client, &urls[1], 2)
        .await
        .expect("a call after the stop");
    assert_ne!(new, old, "a new connection, on the live node");
    let whoami = client.call_tool(&urls[1], 3, "whoami", json!({})).await;
    let whoami = whoami.answer(json!(3), T).await.response;
    let info: Value = serde_json::from_str(&msg::result_text(&whoami)).expect("clientInfo");
    assert_eq!(
        info["name"], "replay",
        "the client's own initialize: {whoami}"
    );
    eventually("one connection left, the live node's", T, || async {
        (server.open_connections() == 1).then_some(())
    })
    .await;
    let again = echo(&client, &urls[1], 4).await.expect("a further call");
    assert_eq!(again, new, "the same connection serves the session");
}

/// C08: the node holding a session's legacy SSE connection stalls (SIGSTOP) past the node TTL,
/// B takes the session over with a new connection (the server then has two open for it); when A
/// wakes (SIGCONT) it closes its old one at once, long before its next sweep
/// (`cluster.reaper_interval` is a minute here): within 5 s the server has exactly one connection
/// open, B's, which requests through A reach. Before, both stayed open until the session ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_owner_closes_its_connection_once_another_node_took_the_session_over() {
    let server = SseUpstream::start().await;
    let upstream = Upstream::sse("legacy", &server.url()).prefix("");
    let options = ClusterOptions::new()
        .fast_liveness(1500)
        .set("cluster.reaper_interval", "60s");
    let started = start_cluster(2, &[upstream], options);
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let old = echo(&client, &urls[0], 1).await.expect("a first call");
    eventually("the probes' connections to close", T, || async {
        (server.open_connections() == 1).then_some(())
    })
    .await;

    let a = started.cluster.node(0);
    a.pause();
    let mut id = 10;
    let new = eventually("b to take the session over", T, || {
        id += 1;
        let (client, url) = (&client, &urls[1]);
        async move {
            match echo(client, url, id).await {
                Ok(connection) => Some(connection),
                Err(e) => {
                    assert_eq!(e["code"], -32006, "only the stalled owner shows: {e}");
                    None
                }
            }
        }
    })
    .await;
    assert_ne!(new, old, "a new connection, from b");
    assert_eq!(server.open_connections(), 2, "a's is still open");

    a.resume();
    let woke = Instant::now();
    eventually(
        "a to close its old connection",
        Duration::from_secs(5),
        || async { (server.open_connections() == 1).then_some(()) },
    )
    .await;
    let took = woke.elapsed();
    let via_a = echo(&client, &urls[0], 90).await.expect("a call through a");
    assert_eq!(via_a, new, "requests through a reach b's connection");
    assert_eq!(server.open_connections(), 1);
    eprintln!("a closed connection {old} {took:?} after SIGCONT; {new} (b's) is the one");
}
