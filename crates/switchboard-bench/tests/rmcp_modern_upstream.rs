//! The `rmcp` 3.x server (`serve-rmcp`: stateful Streamable HTTP, one `echo` tool) as a
//! 2026-07-28 upstream behind two nodes (`revision = "2026-07-28"`): rmcp serves that revision
//! statelessly, so the node sends it self-contained requests. A session-era client and a
//! 2026-07-28 client both reach its tool, on either node.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::modern::{self, send};
use switchboard_tests::msg;
use switchboard_tests::ports::free_port;
use switchboard_tests::upstreams::{start_cluster, Upstream};

const T: Duration = Duration::from_secs(15);

/// `serve-rmcp` on a free loopback port; killed by PID on drop.
struct RmcpServer(Child);

impl Drop for RmcpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rmcp_server() -> (RmcpServer, String) {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_switchboard-bench"))
        .args(["serve-rmcp", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start serve-rmcp");
    let server = RmcpServer(child);
    let deadline = Instant::now() + T;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "serve-rmcp never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_both_eras_use_an_rmcp_server_of_the_stateless_revision() {
    let (_server, url) = rmcp_server();
    let member = Upstream::http("rs", &url).revision("2026-07-28");
    let started = start_cluster(2, &[member], ClusterOptions::new());
    let urls = started.cluster.urls();

    let mut client = McpClient::new();
    let (_, revision) = client.initialize(&urls[0], "2025-11-25").await;
    assert_eq!(revision, "2025-11-25");
    let reply = client
        .call_tool(&urls[1], 2, "rs__echo", json!({"text": "session era"}))
        .await;
    let r = reply.answer(json!(2), T).await.response;
    assert_eq!(msg::result_text(&r), "session era", "{r}");

    let call = modern::request(
        3,
        "tools/call",
        json!({"name": "rs__echo", "arguments": {"text": "stateless"}}),
        json!({}),
    );
    for url in &urls {
        let r = send(url, &call).await.answer(json!(3), T).await.response;
        assert_eq!(r["result"]["content"][0]["text"], "stateless", "{r}");
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
    }
    // server/discover of the cluster shows what rmcp declared (its tools capability).
    let discover = modern::request(4, "server/discover", json!({}), json!({}));
    let r = send(&urls[0], &discover)
        .await
        .answer(json!(4), T)
        .await
        .response;
    assert!(r["result"]["capabilities"]["tools"].is_object(), "{r}");
    // The nodes spoke 2026-07-28 to it: discovered, never initialized.
    for i in 0..urls.len() {
        let log = started.cluster.node(i).log_tail(400);
        assert!(log.contains("discovered the upstream"), "{log}");
        assert!(!log.contains("initialized the upstream session"), "{log}");
    }
}
