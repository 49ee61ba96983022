//! Issue 16, "Kept": sessions per principal. With `session.max_sessions_per_principal = 2` (and
//! authorization off, so every session is `anonymous`'s) a third `initialize` gets 429 with
//! `Retry-After` and a JSON-RPC error naming the key, on any node; after one session is deleted a
//! new one may be created.

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::{legacy_sse, msg};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_past_max_sessions_per_principal_gets_429() {
    let options = ClusterOptions::new()
        .set("session.max_sessions_per_principal", 2)
        .set("http.retry_after", "7s");
    let cluster = Cluster::start(2, options);
    let urls = cluster.urls();
    let mut first = McpClient::new();
    first.initialize(&urls[0], "2025-11-25").await;
    McpClient::new().initialize(&urls[1], "2025-11-25").await;
    let refused = McpClient::new()
        .post(&urls[1], &msg::init("2025-11-25", json!({})))
        .await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after").as_deref(), Some("7"));
    assert_eq!(refused.session_id(), None, "no session id");
    let body = refused.json().await;
    assert_eq!(
        body,
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32003, "message":
            "Too Many Requests: this principal has reached session.max_sessions_per_principal \
             (2 sessions); end one (DELETE) or retry later"}})
    );
    assert_eq!(first.delete(&urls[0]).await.status, 204);
    McpClient::new().initialize(&urls[1], "2025-11-25").await;
}

/// `initialize` params are kept in the session record for the session's life: past
/// `session.max_initialize_params` they get -32602 naming the key and no session is made, on the
/// streamable endpoint and on a legacy HTTP+SSE session; params within it still initialize.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_params_past_max_initialize_params_are_refused() {
    let options = ClusterOptions::new().set("session.max_initialize_params", "1KiB");
    let cluster = Cluster::start(1, options);
    let url = cluster.url(0);
    let padded = || {
        let mut init = msg::init("2025-11-25", json!({}));
        init["params"]["clientInfo"]["name"] = json!("x".repeat(2000));
        init
    };
    let refused = McpClient::new().post(&url, &padded()).await;
    assert_eq!(refused.session_id(), None, "no session id");
    let body = refused.json().await;
    assert_eq!(body["id"], 1, "{body}");
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("over session.max_initialize_params (1024 bytes)"),
        "{message}"
    );
    McpClient::new().initialize(&url, "2025-11-25").await;

    let http = reqwest::Client::new();
    let base = cluster.node(0).base_url();
    let (mut stream, path) = legacy_sse::open(&http, &base).await;
    let mut init = padded();
    init["params"]["protocolVersion"] = json!("2024-11-05");
    let answer = legacy_sse::exchange(&http, &mut stream, &format!("{base}{path}"), init).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("session.max_initialize_params"),
        "{message}"
    );
}
