//! The official Rust SDK (`rmcp` 3.x) as a 2026-07-28 client: with its `Auto` lifecycle it
//! probes `server/discover` first and, the cluster serving that revision, stays stateless. One
//! client spread round robin over three nodes ([`RoutedHttp`]): no `initialize`, no session id,
//! `Mcp-Method` on every POST, and the demo's `sample` tool completing through rmcp's own MRTR
//! helper (the `InputRequiredResult` answered by the client handler, the retry on another node).
//! The same client against a stdio upstream (parked MRTR) completes too.

// rmcp marks sampling deprecated (SEP-2577); the demo's `sample` tool still uses it.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ProtocolVersion,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, RequestContext, RoleClient, RunningService,
};
use rmcp::{ClientHandler, ErrorData};
use serde_json::{json, Value};
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::msg;
use switchboard_tests::rmcp_route::{HttpKind, Policy, RoutedHttp};
use switchboard_tests::upstreams::{start_cluster, stdio_fixture, Upstream};

const T: Duration = Duration::from_secs(20);

/// Answers sampling with a fixed text and records the prompts.
#[derive(Clone)]
struct Sampler {
    config: ClientConfig,
    prompts: Arc<Mutex<Vec<String>>>,
}

impl Sampler {
    fn new() -> Sampler {
        let config = json!({
            "protocolVersion": "2026-07-28",
            "capabilities": {"sampling": {}},
            "clientInfo": {"name": "switchboard-rmcp-stateless-test", "version": "0"}
        });
        Sampler {
            config: serde_json::from_value(config).expect("client config"),
            prompts: Arc::default(),
        }
    }
}

impl ClientHandler for Sampler {
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let params = json!(params);
        let prompt = params["messages"][0]["content"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.prompts.lock().unwrap().push(prompt.clone());
        let answer = json!({
            "role": "assistant",
            "content": {"type": "text", "text": format!("rmcp answers: {prompt}")},
            "model": "fixed-test-model",
            "stopReason": "endTurn"
        });
        serde_json::from_value(answer).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    serde_json::from_value(json!({"name": name, "arguments": args})).expect("tools/call params")
}

fn auto() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// An rmcp client of `handler` over `router` in the `Auto` lifecycle.
async fn connect(router: &RoutedHttp, handler: &Sampler) -> RunningService<RoleClient, Sampler> {
    tokio::time::timeout(
        T,
        handler
            .clone()
            .serve_with_lifecycle(router.transport(), auto()),
    )
    .await
    .expect("connect in time")
    .unwrap_or_else(|e| panic!("rmcp connect failed: {e}; requests: {:#?}", router.log()))
}

/// Every HTTP request the router sent was a stateless POST: no session id, never `initialize`.
fn assert_stateless(router: &RoutedHttp) {
    let log = router.log();
    assert!(!log.is_empty());
    for r in &log {
        assert_eq!(r.request.kind, HttpKind::Post, "{log:#?}");
        assert!(r.request.session_id.is_none(), "{log:#?}");
        assert_ne!(r.request.rpc.as_deref(), Some("initialize"), "{log:#?}");
    }
    assert_eq!(log[0].request.rpc.as_deref(), Some("server/discover"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_stays_stateless_across_nodes_and_drives_mrtr_itself() {
    let started = start_cluster(3, &[], ClusterOptions::new());
    let router = RoutedHttp::new(&started.cluster.urls(), Policy::RoundRobin);
    let handler = Sampler::new();
    let client = connect(&router, &handler).await;

    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "sample"), "{tools:?}");
    let echo = client
        .call_tool(call("echo", json!({"text": "stateless"})))
        .await
        .expect("echo");
    let echo = json!(echo);
    assert_eq!(msg::result_text(&json!({"result": echo})), "stateless");

    let sampled = tokio::time::timeout(
        T,
        client.call_tool(call("sample", json!({"prompt": "capital?"}))),
    )
    .await
    .expect("sample in time")
    .expect("sample");
    let sampled = json!(sampled);
    assert_eq!(
        sampled["structuredContent"]["text"], "rmcp answers: capital?",
        "{sampled}"
    );
    assert_eq!(*handler.prompts.lock().unwrap(), ["capital?"]);
    assert_stateless(&router);
    // The sample call and its retry went to different nodes (round robin).
    let calls: Vec<usize> = router.nodes_where(|r| r.is_call_of("sample"));
    assert_eq!(calls.len(), 2, "first round and retry: {:#?}", router.log());
    assert_ne!(calls[0], calls[1]);
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_answers_a_stdio_upstreams_question_through_a_parked_call() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let upstream = Upstream::stdio("fixture", &python, &[fixture.as_str()]).prefix("");
    let started = start_cluster(2, &[upstream], ClusterOptions::new());
    let router = RoutedHttp::new(&started.cluster.urls(), Policy::RoundRobin);
    let handler = Sampler::new();
    let client = connect(&router, &handler).await;
    let asked = tokio::time::timeout(T, client.call_tool(call("ask", json!({"prompt": "why?"}))))
        .await
        .expect("ask in time")
        .expect("ask");
    let asked = json!(asked);
    let text = msg::result_text(&json!({"result": asked}));
    assert!(text.contains("rmcp answers: why?"), "{asked}");
    assert_stateless(&router);
    let calls = router.nodes_where(|r| r.is_call_of("ask"));
    assert_eq!(calls.len(), 2, "{:#?}", router.log());
    assert_ne!(
        calls[0], calls[1],
        "the retry resumed the parked call from the other node"
    );
    client.cancel().await.expect("close");
}
