//! Issue 16, "Kept": sessions per principal. With `session.max_sessions_per_principal = 2` (and
//! authorization off, so every session is `anonymous`'s) a third `initialize` gets 429 with
//! `Retry-After` and a JSON-RPC error naming the key, on any node; after one session is deleted a
//! new one may be created.

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::msg;

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
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32003, "message":
            "Too Many Requests: this principal has reached session.max_sessions_per_principal \
             (2 sessions); end one (DELETE) or retry later"}})
    );
    assert_eq!(first.delete(&urls[0]).await.status, 204);
    McpClient::new().initialize(&urls[1], "2025-11-25").await;
}
