//! The official Rust SDK (`rmcp`) as a real client of a 3-node cluster on one Redis. One rmcp
//! client is spread over the nodes by [`RoutedHttp`], which picks the node of every HTTP request
//! and records where each went and what every SSE stream carried.
// rmcp marks sampling deprecated (SEP-2577); the demo's `sample` tool still uses it.
#![allow(deprecated)]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientConfig, ClientRequest,
    CreateMessageRequestParams, CreateMessageResult, ProgressNotificationParam,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, RoleClient, RunningService,
};
use rmcp::{ClientHandler, ErrorData, ServiceExt};
use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::eventually;
use switchboard_tests::expect;
use switchboard_tests::msg;
use switchboard_tests::rmcp_route::{HttpKind, Policy, RoutedHttp, StreamEnd};

const T: Duration = Duration::from_secs(15);
const REVISION: &str = "2025-11-25";
const FIXED_ANSWER: &str = "Paris, says the fixed test model.";

/// A client handler that answers sampling with [`FIXED_ANSWER`] and records what it saw.
#[derive(Clone)]
struct Recorder {
    config: ClientConfig,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    prompts: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn new(capabilities: Value) -> Recorder {
        let config = json!({
            "protocolVersion": REVISION,
            "capabilities": capabilities,
            "clientInfo": {"name": "switchboard-rmcp-test", "version": "0"}
        });
        Recorder {
            config: serde_json::from_value(config).expect("client config"),
            progress: Arc::default(),
            prompts: Arc::default(),
        }
    }

    /// The progress values received for `token` (the handler runs each notification in its own
    /// task, so this is arrival order at the handler, not wire order).
    fn progress_for(&self, token: &Value) -> Vec<f64> {
        let all = self.progress.lock().unwrap();
        all.iter()
            .filter(|p| &json!(p.progress_token) == token)
            .map(|p| p.progress)
            .collect()
    }
}

impl ClientHandler for Recorder {
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
        self.prompts.lock().unwrap().push(prompt);
        let answer = json!({
            "role": "assistant",
            "content": {"type": "text", "text": FIXED_ANSWER},
            "model": "fixed-test-model",
            "stopReason": "endTurn"
        });
        serde_json::from_value(answer).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}

/// `fut`, or a panic naming `what` after [`T`].
async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    tokio::time::timeout(T, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {T:?}"))
}

async fn connect(router: &RoutedHttp, handler: Recorder) -> RunningService<RoleClient, Recorder> {
    within("rmcp initialize", handler.serve(router.transport()))
        .await
        .unwrap_or_else(|e| panic!("rmcp initialize failed: {e}; requests: {:#?}", router.log()))
}

fn call_params(name: &str, args: Value) -> CallToolRequestParams {
    serde_json::from_value(json!({"name": name, "arguments": args})).expect("tools/call params")
}

/// The text of a tool result (as JSON).
fn text_of(result: &Value) -> String {
    msg::result_text(&json!({ "result": result }))
}

/// Calls `countdown` with a progress token; returns the result, the token and the request id (as
/// JSON).
async fn countdown(peer: &Peer<RoleClient>, n: u64, interval_ms: u64) -> (Value, Value, Value) {
    let params = call_params("countdown", json!({"n": n, "interval_ms": interval_ms}));
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = within(
        "send countdown",
        peer.send_request_with_option(request, PeerRequestOptions::with_timeout(T)),
    )
    .await
    .expect("send countdown");
    let (token, id) = (json!(handle.progress_token), json!(handle.id));
    let result = within("countdown result", handle.await_response())
        .await
        .expect("countdown result");
    (json!(result), token, id)
}

/// The messages of one call on the wire, across its POST stream and any resumed streams, in
/// order: its progress notifications and its response. Each with the node that sent it.
fn call_messages(router: &RoutedHttp, token: &Value, id: &Value) -> Vec<(usize, Value)> {
    let ours = |m: &Value| {
        &m["params"]["progressToken"] == token || (m.get("method").is_none() && &m["id"] == id)
    };
    let streams = router.streams();
    streams
        .iter()
        .flat_map(|s| {
            s.messages
                .iter()
                .filter(|(_, m)| ours(m))
                .map(|(_, m)| (s.node, m.clone()))
        })
        .collect()
}

/// Asserts the wire carried progress 1..=n exactly once each, in order, then the response once.
fn assert_progress_then_result(wire: &[(usize, Value)], n: u64) {
    let (last, before) = wire
        .split_last()
        .unwrap_or_else(|| panic!("no message of the countdown on the wire"));
    assert!(
        last.1.get("result").is_some(),
        "the countdown's last message must be its result: {wire:#?}"
    );
    let progress: Vec<f64> = before
        .iter()
        .map(|(_, m)| m["params"]["progress"].as_f64().unwrap_or(-1.0))
        .collect();
    let expected: Vec<f64> = (1..=n).map(|k| k as f64).collect();
    assert_eq!(
        progress, expected,
        "progress on the wire, in order and once each: {wire:#?}"
    );
    assert!(
        before
            .iter()
            .all(|(_, m)| m["method"] == "notifications/progress"),
        "{wire:#?}"
    );
}

/// Waits until the handler has seen the n progress values of `token`.
async fn handler_saw_progress(handler: &Recorder, token: &Value, n: u64) {
    let mut seen = eventually(
        "the handler received every progress notification",
        T,
        || async {
            let seen = handler.progress_for(token);
            (seen.len() as u64 >= n).then_some(seen)
        },
    )
    .await;
    seen.sort_by(f64::total_cmp);
    assert_eq!(
        seen,
        (1..=n).map(|k| k as f64).collect::<Vec<_>>(),
        "progress values at the handler"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_initialize_on_a_list_on_b_echo_on_c() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let policy = Policy::custom(|r| match () {
        _ if r.is_rpc("initialize") => 0,
        _ if r.is_rpc("tools/list") => 1,
        _ if r.is_rpc("tools/call") => 2,
        _ => r.seq,
    });
    let router = RoutedHttp::new(&cluster.urls(), policy);
    let client = connect(&router, Recorder::new(json!({}))).await;
    let info = client.peer_info().expect("server info after initialize");
    assert_eq!(
        info.protocol_version.as_str(),
        REVISION,
        "negotiated revision"
    );

    let tools = within("tools/list", client.list_tools(None))
        .await
        .expect("tools/list");
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_ref()).collect();
    for tool in ["echo", "add", "countdown", "sample", "notify"] {
        assert!(names.contains(&tool), "tools/list lacks {tool}: {names:?}");
    }
    let echoed = within(
        "echo",
        client.call_tool(call_params("echo", json!({"text": "rmcp-hello"}))),
    )
    .await;
    assert_eq!(text_of(&json!(echoed.expect("echo"))), "rmcp-hello");

    assert_eq!(
        router.nodes_where(|r| r.is_rpc("initialize")),
        [0],
        "initialize went to A"
    );
    assert_eq!(
        router.nodes_where(|r| r.is_rpc("tools/list")),
        [1],
        "tools/list went to B"
    );
    assert_eq!(
        router.nodes_where(|r| r.is_call_of("echo")),
        [2],
        "echo went to C"
    );
    for r in router
        .log()
        .iter()
        .filter(|r| r.request.kind == HttpKind::Post)
    {
        assert!(matches!(r.outcome, Some(Ok(_))), "POST failed: {r:?}");
    }
    within("rmcp close", client.cancel()).await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_round_robin_every_request_on_the_next_node() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let router = RoutedHttp::new(&cluster.urls(), Policy::RoundRobin);
    let client = connect(&router, Recorder::new(json!({}))).await;
    for i in 0..4 {
        let text = format!("round-{i}");
        let echoed = within(
            "echo",
            client.call_tool(call_params("echo", json!({"text": text}))),
        )
        .await;
        assert_eq!(text_of(&json!(echoed.expect("echo"))), text);
    }
    let added = within(
        "add",
        client.call_tool(call_params("add", json!({"a": 2, "b": 40}))),
    )
    .await
    .expect("add");
    assert_eq!(
        json!(added)["structuredContent"]["sum"],
        json!(42),
        "add: {}",
        json!(added)
    );

    let log = router.log();
    for r in &log {
        assert_eq!(r.node, r.request.seq % 3, "round robin: {r:?}");
        assert!(
            matches!(r.outcome, Some(Ok(_)) | None),
            "request failed: {r:?}"
        );
    }
    let mut call_nodes = router.nodes_where(|r| r.is_rpc("tools/call"));
    call_nodes.sort();
    call_nodes.dedup();
    assert!(
        call_nodes.len() >= 2,
        "tools/call POSTs should have hit several nodes: {log:#?}"
    );
    within("rmcp close", client.cancel()).await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_sampling_call_on_a_answer_posted_to_b() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let policy = Policy::custom(|r| match () {
        _ if r.is_rpc("tools/call") => 0,
        _ if r.is_rpc("response") || r.is_rpc("error") => 1,
        _ => 2,
    });
    let router = RoutedHttp::new(&cluster.urls(), policy);
    let handler = Recorder::new(json!({"sampling": {}}));
    let client = connect(&router, handler.clone()).await;

    let call = client.call_tool(call_params(
        "sample",
        json!({"prompt": "Capital of France?"}),
    ));
    let result = json!(within("sample", call).await.expect("sample"));
    assert_eq!(text_of(&result), FIXED_ANSWER, "sample result: {result}");
    assert_eq!(
        result["structuredContent"]["text"], FIXED_ANSWER,
        "sample result: {result}"
    );
    assert_eq!(
        *handler.prompts.lock().unwrap(),
        ["Capital of France?"],
        "prompts the handler saw"
    );

    // B publishes the answer before it sends its 202, so the call's result can reach the client
    // through A before the router has seen B's reply: wait for that reply, bounded.
    let log = eventually("B's reply to the answer POST", T, || async {
        let log = router.log();
        let answered = log
            .iter()
            .filter(|r| r.request.is_rpc("response"))
            .all(|r| r.outcome.is_some());
        answered.then_some(log)
    })
    .await;
    let call = log
        .iter()
        .find(|r| r.request.is_call_of("sample"))
        .expect("the sample call");
    assert_eq!(call.node, 0, "the tool call went to A");
    let answers: Vec<_> = log
        .iter()
        .filter(|r| r.request.is_rpc("response"))
        .collect();
    assert_eq!(answers.len(), 1, "one answer POST: {log:#?}");
    assert_eq!(answers[0].node, 1, "the answer went to B");
    assert_eq!(
        answers[0].outcome,
        Some(Ok("accepted".into())),
        "the answer POST on B: {:?}",
        answers[0]
    );
    let streams = router.streams();
    let on_a = streams
        .iter()
        .find(|s| s.seq == call.request.seq)
        .expect("the call's SSE stream on A");
    let asked = on_a.with_method("sampling/createMessage");
    assert_eq!(
        asked.len(),
        1,
        "sampling request on the call's stream: {:?}",
        on_a.messages
    );
    assert_eq!(
        answers[0].request.id.as_ref(),
        Some(&asked[0]["id"]),
        "the answer carries the request's id"
    );
    within("rmcp close", client.cancel()).await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_delete_on_b_closes_the_get_stream_on_a_and_every_node_answers_404() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let policy = Policy::custom(|r| match r.kind {
        HttpKind::Delete => 1,
        HttpKind::Get => 0,
        HttpKind::Post if r.is_rpc("initialize") => 0,
        HttpKind::Post => 2,
    });
    let router = RoutedHttp::new(&urls, policy);
    router.hold_get_streams();
    let client = connect(&router, Recorder::new(json!({}))).await;
    let sid = router.session_id().expect("Mcp-Session-Id from initialize");

    let get_seq = eventually("rmcp opened its standalone GET stream on A", T, || async {
        let log = router.log();
        log.iter()
            .find(|r| r.request.is_standalone_get() && r.outcome.is_some())
            .map(|r| (r.request.seq, r.clone()))
    })
    .await;
    assert_eq!(
        (get_seq.1.node, get_seq.1.outcome),
        (0, Some(Ok("stream".into()))),
        "standalone GET on A"
    );
    let echoed = within(
        "echo on C",
        client.call_tool(call_params("echo", json!({"text": "before-delete"}))),
    )
    .await;
    assert_eq!(text_of(&json!(echoed.expect("echo"))), "before-delete");
    assert!(
        router
            .streams()
            .iter()
            .any(|s| s.seq == get_seq.0 && s.end.is_none()),
        "GET stream on A still open"
    );

    within("rmcp close (DELETE)", client.cancel())
        .await
        .expect("close");
    let log = router.log();
    let deletes: Vec<_> = log
        .iter()
        .filter(|r| r.request.kind == HttpKind::Delete)
        .collect();
    assert_eq!(
        deletes.len(),
        1,
        "rmcp sends one DELETE when it closes: {log:#?}"
    );
    assert_eq!(
        (deletes[0].node, deletes[0].outcome.clone()),
        (1, Some(Ok("deleted".into()))),
        "DELETE on B"
    );
    assert_eq!(deletes[0].request.session_id.as_deref(), Some(sid.as_str()));

    let limit = Duration::from_secs(5);
    let end = eventually(
        "the server ends the GET stream on A after DELETE on B",
        limit,
        || async {
            router
                .streams()
                .into_iter()
                .find(|s| s.seq == get_seq.0)
                .and_then(|s| s.end)
        },
    )
    .await;
    assert!(
        matches!(end.0, StreamEnd::Closed | StreamEnd::Error(_)),
        "GET stream on A ended by {:?}",
        end.0
    );
    let raw = McpClient::new().with_session(Some(&sid), Some(REVISION));
    expect::session_gone_everywhere(&raw, &urls).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_countdown_progress_arrives_in_order_then_the_result() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let router = RoutedHttp::new(&cluster.urls(), Policy::RoundRobin);
    let handler = Recorder::new(json!({}));
    let client = connect(&router, handler.clone()).await;

    let (result, token, id) = countdown(&client, 5, 100).await;
    assert_eq!(
        text_of(&result),
        "countdown finished",
        "countdown result: {result}"
    );
    assert_progress_then_result(&call_messages(&router, &token, &id), 5);
    handler_saw_progress(&handler, &token, 5).await;
    within("rmcp close", client.cancel()).await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_countdown_cut_after_two_events_resumes_on_another_node() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let policy = Policy::custom(|r| match () {
        _ if r.is_rpc("tools/call") => 0,
        _ if r.is_resume() => 1,
        _ => 2,
    });
    let router = RoutedHttp::new(&cluster.urls(), policy);
    router.arm_cut("countdown", 2);
    let handler = Recorder::new(json!({}));
    let client = connect(&router, handler.clone()).await;

    let (result, token, id) = countdown(&client, 6, 300).await;
    assert_eq!(
        text_of(&result),
        "countdown finished",
        "countdown result: {result}"
    );
    let wire = call_messages(&router, &token, &id);
    assert_progress_then_result(&wire, 6);
    assert!(
        wire[..2].iter().all(|(node, _)| *node == 0),
        "first two progress events from A: {wire:?}"
    );
    assert!(
        wire[2..].iter().all(|(node, _)| *node == 1),
        "the rest replayed/streamed by B: {wire:?}"
    );

    let log = router.log();
    let call = log
        .iter()
        .find(|r| r.request.is_call_of("countdown"))
        .expect("the countdown call");
    let streams = router.streams();
    let posted = streams
        .iter()
        .find(|s| s.seq == call.request.seq)
        .expect("the call's stream on A");
    assert_eq!(
        posted.end.as_ref().map(|e| e.0.clone()),
        Some(StreamEnd::Cut),
        "the POST stream was cut"
    );
    let resumes: Vec<_> = log.iter().filter(|r| r.request.is_resume()).collect();
    assert!(
        !resumes.is_empty(),
        "rmcp resumed with Last-Event-ID: {log:#?}"
    );
    assert_eq!(resumes[0].node, 1, "the resumption went to B");
    assert_eq!(
        resumes[0].request.last_event_id.as_ref(),
        posted.event_ids.last(),
        "Last-Event-ID = last id seen"
    );
    handler_saw_progress(&handler, &token, 6).await;
    within("rmcp close", client.cancel()).await.expect("close");
}
