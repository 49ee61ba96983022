//! Traces across nodes (issue 15): two nodes on one Redis export spans over OTLP/HTTP to the
//! harness's receiver ([`switchboard_tests::otlp`]). A client traces one operation: a `tools/call`
//! of the demo's `sample` POSTed to node A with `traceparent`, whose upstream asks the client
//! (`sampling/createMessage`); the client POSTs its answer to node B with the same trace. The
//! receiver must hold one trace with spans from both nodes, correctly parented: A's call (child
//! of the client's span), A's admission (a store call), A's upstream call, A's wait for the
//! client, B's handling of the answer, B's `route_reply` (the Redis hop), and A's delivery of it
//! (child of B's `route_reply`). The session id never appears, only its hash.

use std::time::Duration;

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::msg;
use switchboard_tests::otlp::{ReceivedSpan, Receiver};

const T: Duration = Duration::from_secs(10);
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// Node options whose batch processor exports every 100 ms instead of every 5 s
/// (`OTEL_BSP_SCHEDULE_DELAY`, read by the nodes' SDK; set on the node processes, not on this
/// one, whose environment every test thread shares).
fn exporting_often() -> ClusterOptions {
    ClusterOptions::new().env("OTEL_BSP_SCHEDULE_DELAY", 100)
}

fn one<'a>(
    spans: &'a [ReceivedSpan],
    what: &str,
    pick: impl Fn(&ReceivedSpan) -> bool,
) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "{what}: {found:#?}\nall spans: {spans:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampling_round_trip_over_two_nodes_is_one_trace() {
    let receiver = Receiver::start().await;
    let cluster = Cluster::start(
        2,
        exporting_often().set("otel.endpoint", &receiver.endpoint),
    );
    let urls = cluster.urls();
    let (a, b) = (
        cluster.node(0).id().to_owned(),
        cluster.node(1).id().to_owned(),
    );
    let mut client = McpClient::new();
    let (sid, _) = client
        .initialize_with(&urls[0], "2025-11-25", msg::all_client_capabilities())
        .await;
    let traceparent = format!("00-{TRACE}-{CLIENT_SPAN}-01");
    let headers = client.post_headers().set("traceparent", &traceparent);
    let call = msg::call(7, "sample", json!({"prompt": "say ok"}));
    let reply = client
        .send(
            http::Method::POST,
            &urls[0],
            &headers,
            Some(call.to_string()),
        )
        .await;
    let mut stream = reply.sse();
    let asked = stream.until_method("sampling/createMessage", T).await;
    let request = asked
        .matched
        .expect("the sampling request on the call's stream");
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "ok-from-b"}, "model": "m"});
    let posted = client
        .send(
            http::Method::POST,
            &urls[1],
            &headers,
            Some(msg::result(&request["id"], answer).to_string()),
        )
        .await;
    assert_eq!(posted.status.as_u16(), 202, "the answer on B");
    let done = stream.until_response(&json!(7), T).await;
    let response = done.matched.expect("call 7's answer");
    assert!(
        msg::result_text(&response).contains("ok-from-b"),
        "{response}"
    );

    let spans = receiver
        .until(Duration::from_secs(15), |spans| {
            // Each node exports in its own batches: wait for the last span of each.
            let has = |name: &str| spans.iter().any(|s| s.trace_id == TRACE && s.name == name);
            [
                "tools/call sample",
                "deliver reply",
                "response",
                "route_reply",
            ]
            .iter()
            .all(|n| has(n))
        })
        .await;
    let ours: Vec<ReceivedSpan> = spans.into_iter().filter(|s| s.trace_id == TRACE).collect();
    let call = one(&ours, "A's tools/call span", |s| {
        s.name == "tools/call sample"
    });
    assert_eq!(call.instance, a, "{call:#?}");
    assert_eq!(
        call.parent_span_id, CLIENT_SPAN,
        "the client's span is the parent"
    );
    assert_eq!(call.kind, "Server");
    assert_eq!(call.attributes["mcp.method.name"], "tools/call");
    assert_eq!(call.attributes["gen_ai.tool.name"], "sample");
    assert_eq!(call.attributes["mcp.protocol.version"], "2025-11-25");
    assert_eq!(call.attributes["jsonrpc.request.id"], "7");
    let hash = &call.attributes["mcp.session.id"];
    assert_eq!(hash.len(), 16, "a hash, not the id: {hash}");
    assert!(!sid.contains(hash.as_str()) && hash != &sid);

    let admit = one(&ours, "A's admission", |s| {
        s.name == "admit" && s.instance == a
    });
    assert_eq!(
        admit.parent_span_id, call.span_id,
        "admission under the call"
    );
    assert_eq!(admit.attributes["db.system.name"], "redis");
    let upstream = one(&ours, "A's upstream call", |s| s.name == "tools/call demo");
    assert_eq!(upstream.parent_span_id, call.span_id);
    assert_eq!(upstream.kind, "Client");
    let wait = one(&ours, "A's wait for the client", |s| {
        s.name == "sampling/createMessage"
    });
    assert_eq!(wait.instance, a);
    assert_eq!(
        wait.parent_span_id, upstream.span_id,
        "asked by the upstream call"
    );

    let on_b = one(&ours, "B's span of the answer", |s| s.name == "response");
    assert_eq!(on_b.instance, b, "{on_b:#?}");
    assert_eq!(on_b.parent_span_id, CLIENT_SPAN);
    let hop = one(&ours, "B's route_reply", |s| s.name == "route_reply");
    assert_eq!(hop.instance, b);
    assert_eq!(hop.parent_span_id, on_b.span_id);
    let delivered = one(&ours, "A's delivery", |s| s.name == "deliver reply");
    assert_eq!(delivered.instance, a, "{delivered:#?}");
    assert_eq!(
        delivered.parent_span_id, hop.span_id,
        "continues B's Redis hop"
    );

    for span in &ours {
        for value in span.attributes.values() {
            assert!(!value.contains(&sid), "the session id in {span:#?}");
        }
    }
}

/// What the traced HTTP upstream saw: the `traceparent` of every request it received.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// A small Streamable HTTP MCP server (JSON answers, no session) with one tool, `ping_up`, that
/// records the `traceparent` header of each POST.
async fn traced_upstream(seen: Seen) -> String {
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(
            move |headers: HeaderMap, axum::Json(msg): axum::Json<serde_json::Value>| {
                let seen = seen.clone();
                async move {
                    if let Some(tp) = headers.get("traceparent").and_then(|v| v.to_str().ok()) {
                        seen.lock().unwrap().push(tp.to_owned());
                    }
                    let Some(id) = msg.get("id").cloned() else {
                        return StatusCode::ACCEPTED.into_response();
                    };
                    let result = match msg["method"].as_str() {
                        Some("initialize") => json!({"protocolVersion": "2025-11-25",
                            "capabilities": {"tools": {}}, "serverInfo": {"name": "traced", "version": "1"}}),
                        Some("tools/list") => json!({"tools": [{"name": "ping_up",
                            "inputSchema": {"type": "object"}}]}),
                        Some("tools/call") => json!({"content": [{"type": "text", "text": "pong"}]}),
                        _ => json!({}),
                    };
                    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
                }
            },
        )
        .get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_traceparent_reaches_the_http_upstream_and_metrics_have_their_own_listener() {
    let receiver = Receiver::start().await;
    let seen = Seen::default();
    let upstream = traced_upstream(seen.clone()).await;
    let metrics_port = switchboard_tests::ports::free_port();
    let options = exporting_often()
        .set("otel.endpoint", &receiver.endpoint)
        .set("metrics.listen", format!("127.0.0.1:{metrics_port}"));
    let configured = switchboard_tests::upstreams::start_cluster(
        1,
        &[switchboard_tests::upstreams::Upstream::http("web", &upstream).prefix("")],
        options,
    );
    let url = configured.cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    // The client's context in `params._meta`, no header: MCP's own carrier.
    let (trace, parent) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let mut call = msg::call(3, "ping_up", json!({}));
    call["params"]["_meta"] = json!({"traceparent": format!("00-{trace}-{parent}-01")});
    let answer = client.post(&url, &call).await.answer(json!(3), T).await;
    assert!(
        msg::result_text(&answer.response).contains("pong"),
        "{}",
        answer.response
    );

    let spans = receiver
        .until(Duration::from_secs(15), |spans| {
            let has = |name: &str| spans.iter().any(|s| s.trace_id == trace && s.name == name);
            has("tools/call ping_up") && has("tools/call web")
        })
        .await;
    let ours: Vec<ReceivedSpan> = spans.into_iter().filter(|s| s.trace_id == trace).collect();
    let call = one(&ours, "the call", |s| s.name == "tools/call ping_up");
    assert_eq!(
        call.parent_span_id, parent,
        "_meta.traceparent is the parent"
    );
    let up = one(&ours, "the upstream call", |s| s.name == "tools/call web");
    assert_eq!(up.parent_span_id, call.span_id);
    let sent = format!("00-{trace}-{}-01", up.span_id);
    let got = seen.lock().unwrap().clone();
    assert!(
        got.contains(&sent),
        "the upstream's tools/call carries the upstream span's context {sent}: {got:?}"
    );

    // /metrics on its own listener, not on the public one.
    let base = url.trim_end_matches("/mcp");
    let public = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(
        public.status().as_u16(),
        404,
        "/metrics left the public listener"
    );
    let own = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await
        .unwrap();
    assert_eq!(own.status().as_u16(), 200);
    let text = own.text().await.unwrap();
    let line = "switchboard_upstream_call_duration_seconds_count{upstream=\"web\",method=\"tools/call\"} 1";
    assert!(text.contains(line), "{line} missing:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_go_out_over_grpc_too() {
    let receiver = Receiver::start_grpc().await;
    let options = exporting_often()
        .set("otel.endpoint", &receiver.endpoint)
        .set("otel.protocol", "grpc");
    let cluster = Cluster::start(1, options);
    let url = cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    let trace = "5b8aa5a2d2c872e8321cf37308d69df2";
    let headers = client
        .post_headers()
        .set("traceparent", &format!("00-{trace}-{CLIENT_SPAN}-01"));
    let call = msg::call(2, "echo", json!({"text": "over grpc"}));
    let reply = client
        .send(http::Method::POST, &url, &headers, Some(call.to_string()))
        .await;
    reply.answer(json!(2), T).await;
    let spans = receiver
        .until(Duration::from_secs(15), |spans| {
            spans
                .iter()
                .any(|s| s.trace_id == trace && s.name == "tools/call echo")
        })
        .await;
    let call = one(&spans, "the call over gRPC", |s| {
        s.trace_id == trace && s.name == "tools/call echo"
    });
    assert_eq!(call.parent_span_id, CLIENT_SPAN);
    assert_eq!(call.instance, cluster.node(0).id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_costs_only_the_spans() {
    // Accepts connections and holds them, never answering: exports wait for their timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = accepted.clone();
    let held = tokio::spawn(async move {
        let mut sockets = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            sockets.push(socket);
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let mut cluster = Cluster::start(1, exporting_often().set("otel.endpoint", &endpoint));
    let url = cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    for id in 0..30 {
        let started = std::time::Instant::now();
        let reply = client
            .call_tool(&url, id, "echo", json!({"text": "x"}))
            .await;
        reply.answer(json!(id), T).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "call {id} took {:?}",
            started.elapsed()
        );
    }
    // An export is under way (and hanging) before the node is told to stop.
    switchboard_tests::eventually::eventually("an export to connect", T, || {
        let n = accepted.load(std::sync::atomic::Ordering::SeqCst);
        async move { (n > 0).then_some(()) }
    })
    .await;
    let stopping = std::time::Instant::now();
    cluster.node(0).terminate();
    let code = cluster.node_mut(0).wait_exit(Duration::from_secs(20));
    let took = stopping.elapsed();
    assert_eq!(code, Some(0), "the node exits cleanly");
    assert!(
        took < Duration::from_secs(12),
        "SIGTERM to exit took {took:?} (drain + at most 3 s for the spans)"
    );
    let log = cluster.node(0).log_tail(40);
    assert!(
        log.contains("exiting without them") || log.contains("could not be exported"),
        "{log}"
    );
    held.abort();
}
