//! Refusals answer with the request's id when the node read it (issue 32; JSON-RPC 2.0 §5: the
//! id of an error response is the request's, `null` only when it could not be read): a 503 while
//! Redis is down, and the fence's 503 to a request that waited for its answer when the node
//! lost the store, both with the request's id; a body that does not parse, a notification, and
//! the fence's 503 at once (made before the body is read), with `null`.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use switchboard_tests::client::{McpClient, Reply};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::eventually;
use switchboard_tests::msg;

const REVISION: &str = "2025-11-25";

/// Asserts a 503 with `Retry-After` and a JSON-RPC error whose id is `id`.
async fn unavailable(reply: Reply, id: &Value, what: &str) {
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{what}");
    assert!(reply.header("retry-after").is_some(), "{what}: Retry-After");
    let body = reply.json().await;
    assert!(body["error"]["code"].is_i64(), "{what}: {body}");
    assert_eq!(&body["id"], id, "{what}: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_while_redis_is_down_answers_with_the_request_id() {
    let mut cluster = Cluster::start(1, ClusterOptions::new());
    let url = cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, REVISION).await;
    let garbage = client.post_raw(&url, r#"{"jsonrpc":"2.0","id":5,"#).await;
    assert_eq!(garbage.status, StatusCode::BAD_REQUEST);
    let body = garbage.json().await;
    assert_eq!(body["error"]["code"], -32700, "{body}");
    assert_eq!(body["id"], Value::Null, "an unparsable body: {body}");

    cluster.backend_mut().server_mut().kill9();
    let list = msg::bare("ask-503", "tools/list");
    unavailable(
        client.post(&url, &list).await,
        &json!("ask-503"),
        "tools/list",
    )
    .await;
    let call = msg::call(7, "echo", json!({"text": "x"}));
    unavailable(client.post(&url, &call).await, &json!(7), "tools/call").await;
    let cancel = msg::cancelled(7);
    unavailable(
        client.post(&url, &cancel).await,
        &Value::Null,
        "a notification",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_nodes_503_answers_a_request_it_read_with_its_id() {
    // The node fences two node_ttls (2 × 1.5 s) after its last answered heartbeat.
    let mut cluster = Cluster::start(1, ClusterOptions::new().fast_liveness(1500));
    let url = cluster.url(0);
    let mut client = McpClient::new();
    let (sid, _) = client.initialize(&url, REVISION).await;
    // A JSON-only answer (no stream to close): the POST waits for it past `sse_after`, and is
    // registered in flight meanwhile.
    let headers = client.post_headers().set("Accept", "application/json");
    let call = msg::call(42, "countdown", json!({"n": 1, "interval_ms": 30_000}));
    let waiting = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            let body = Some(call.to_string());
            client.send(Method::POST, &url, &headers, body).await
        })
    };
    eventually(
        "the call registered in flight",
        Duration::from_secs(10),
        || {
            let node = cluster.in_flight_node(&sid, &json!(42));
            async move { node.map(|_| ()) }
        },
    )
    .await;
    cluster.backend_mut().server_mut().kill9();
    let reply = tokio::time::timeout(Duration::from_secs(12), waiting)
        .await
        .expect("the fence refuses the waiting request")
        .expect("the POST task");
    unavailable(reply, &json!(42), "the request waiting at the fence").await;
    let list = msg::bare(43, "tools/list");
    let at_once = client.post(&url, &list).await;
    unavailable(
        at_once,
        &Value::Null,
        "refused by the fence before its body was read",
    )
    .await;
}
