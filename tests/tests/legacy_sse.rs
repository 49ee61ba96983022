//! The legacy HTTP+SSE transport (MCP 2024-11-05, basic/transports, HTTP with SSE) across three
//! nodes over plain HTTP: the SSE stream is held on node A, every POST lands on B or C, and each
//! answer (and a server-to-client request) arrives on A's stream; refusals; idle expiry.

use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::{always_for, eventually};
use switchboard_tests::legacy_sse::{exchange, next_message, open, open_session, post};
use switchboard_tests::msg;

const T: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_reach_the_stream_on_another_node() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let http = reqwest::Client::new();
    let (mut stream, path) = open(&http, &cluster.node(0).base_url()).await;
    let on = |i: usize| format!("{}{path}", cluster.node(i).base_url());
    // initialize on B: revision negotiated in the body, capabilities recorded.
    let init = msg::init("2024-11-05", json!({"sampling": {}}));
    let answer = exchange(&http, &mut stream, &on(1), init).await;
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["protocolVersion"], "2024-11-05");
    assert!(
        answer["result"]["serverInfo"]["name"].is_string(),
        "{answer}"
    );
    let (status, _) = post(&http, &on(2), &msg::inited().to_string()).await;
    assert_eq!(status, 202);
    let tools = exchange(&http, &mut stream, &on(2), msg::bare(2, "tools/list")).await;
    assert_eq!(tools["id"], 2);
    assert!(
        tools["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{tools}"
    );
    let echo = msg::call(3, "echo", json!({"text": "legacy hello"}));
    let echoed = exchange(&http, &mut stream, &on(1), echo).await;
    assert_eq!(
        (echoed["id"].clone(), msg::result_text(&echoed)),
        (json!(3), "legacy hello".into())
    );
    // sample on C: the sampling request arrives on A's stream; the answer goes to B.
    let call = msg::call(4, "sample", json!({"prompt": "Capital of France?"}));
    let request = exchange(&http, &mut stream, &on(2), call).await;
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    let reply = msg::result(
        &request["id"],
        json!({"role": "assistant", "content": {"type": "text", "text": "Paris."}, "model": "t"}),
    );
    let result = exchange(&http, &mut stream, &on(1), reply).await;
    assert_eq!(result["id"], 4, "{result}");
    assert!(msg::result_text(&result).contains("Paris."), "{result}");
    // A second initialize on the same session is refused on the stream.
    let again = exchange(
        &http,
        &mut stream,
        &on(2),
        msg::init("2024-11-05", json!({})),
    )
    .await;
    assert_eq!(again["error"]["code"], -32600, "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_idle_expiry() {
    // Keep-alives every 300 ms: a node notices a closed SSE connection when it next writes to it.
    let options = ClusterOptions::new()
        .idle_expiry(1500, 300)
        .set("http.keepalive_interval", "300ms");
    let cluster = Cluster::start(2, options);
    let baseline = cluster.baseline_keys().await;
    let http = reqwest::Client::new();
    let b = cluster.node(1).base_url();
    // The GET needs an Accept that allows an event stream; other methods get 405.
    let resp = http
        .get(format!("{b}/sse"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 406);
    let resp = http.delete(format!("{b}/sse")).send().await.unwrap();
    assert_eq!(resp.status(), 405);
    // sessionId missing or malformed: 400 with a JSON-RPC error; unknown: 404.
    let ping = msg::bare(1, "ping").to_string();
    for query in ["", "?sessionId=not-hex", "?other=1"] {
        let (status, text) = post(&http, &format!("{b}/messages{query}"), &ping).await;
        assert_eq!(status, 400, "{query}: {text}");
        let body: Value = serde_json::from_str(&text).expect("a JSON-RPC error body");
        assert_eq!(body["error"]["code"], -32600, "{body}");
    }
    let unknown = format!("{b}/messages?sessionId={}", "ab".repeat(16));
    assert_eq!(post(&http, &unknown, &ping).await.0, 404);
    // A live session: malformed JSON is 400 (-32700), a batch 400; ping before initialize works.
    let (mut stream, path) = open(&http, &cluster.node(0).base_url()).await;
    let url = format!("{b}{path}");
    let (status, text) = post(&http, &url, "{not json").await;
    assert_eq!(status, 400, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["error"]["code"],
        -32700
    );
    assert_eq!(post(&http, &url, &format!("[{ping}]")).await.0, 400);
    assert_eq!(
        exchange(&http, &mut stream, &url, msg::bare(1, "ping")).await["result"],
        json!({})
    );
    let early = exchange(&http, &mut stream, &url, msg::bare(2, "tools/list")).await;
    assert_eq!(
        early["error"]["code"], -32600,
        "requests wait for initialize: {early}"
    );
    // The open stream keeps the session alive past the idle TTL: idle on purpose for 2.5 s (the
    // wait is the thing under test), its keys there all along.
    let sid = path.rsplit('=').next().unwrap().to_owned();
    always_for(
        "the session's keys while its stream is open",
        Duration::from_millis(2500),
        || async { !cluster.session_keys(&sid).is_empty() },
    )
    .await;
    assert_eq!(
        exchange(&http, &mut stream, &url, msg::bare(3, "ping")).await["id"],
        3
    );
    // Closed, it idles out: 404 everywhere and no key left.
    assert!(!cluster.session_keys(&sid).is_empty());
    drop(stream);
    // (Polling with POSTs would keep it alive: watch its keys, and the reaper dropping it from
    // the session index, instead.)
    eventually(
        "the legacy session's keys expire",
        Duration::from_secs(15),
        || async {
            let gone = cluster.session_keys(&sid).is_empty();
            (gone && cluster.keys_beyond(&baseline).is_empty()).then_some(())
        },
    )
    .await;
    for node in [0, 1] {
        let url = format!("{}{path}", cluster.node(node).base_url());
        assert_eq!(
            post(&http, &url, &ping).await.0,
            404,
            "expired session on node {node}"
        );
    }
}

/// A request POSTed on node B, which dies while running it: the client's SSE stream on node A
/// gets the -32004 "request was lost" answer for it (the legacy client reads only that stream
/// and cannot resume the request's own), and exactly one; the id can then be used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_lost_with_its_node_is_answered_on_the_stream() {
    let options = ClusterOptions::new()
        .fast_liveness(600)
        .set("http.keepalive_interval", "300ms");
    let mut cluster = Cluster::start(2, options);
    let http = reqwest::Client::new();
    let (mut stream, path) = open_session(&http, &cluster.node(0).base_url()).await;
    let a = format!("{}{path}", cluster.node(0).base_url());
    let b = format!("{}{path}", cluster.node(1).base_url());
    let long = msg::call(7, "countdown", json!({"n": 100, "interval_ms": 200}));
    let (status, _) = post(&http, &b, &long.to_string()).await;
    assert_eq!(status, 202);
    // Running on B (in flight there), then kill B.
    let sid = path.rsplit('=').next().unwrap().to_owned();
    running_on(&cluster, &sid, 1, 1).await;
    cluster.kill9(1);
    let lost = next_message(&mut stream).await;
    assert_eq!(lost["id"], 7, "{lost}");
    assert_eq!(lost["error"]["code"], -32004, "{lost}");
    let text = lost["error"]["message"].as_str().unwrap_or_default();
    assert!(text.contains("lost"), "{lost}");
    // Exactly one answer for id 7: the next message is the answer to a new request.
    let echo = msg::call(7, "echo", json!({"text": "again"}));
    let again = exchange(&http, &mut stream, &a, echo).await;
    assert_eq!(
        (again["id"].clone(), msg::result_text(&again)),
        (json!(7), "again".into()),
        "{again}"
    );
}

/// Requests lost with node B are sent again on node C while node A, holding the SSE stream, looks
/// for lost requests at every keep-alive: each id gets exactly one -32004 (for the lost request)
/// and then its new answer, never the answer first or two errors (an adversarial run saw the
/// answer followed by a stale -32004).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_sent_again_after_their_node_died_get_one_error_then_their_answer() {
    let options = ClusterOptions::new()
        .fast_liveness(600)
        .set("http.keepalive_interval", "100ms");
    let mut cluster = Cluster::start(3, options);
    let http = reqwest::Client::new();
    let (mut stream, path) = open_session(&http, &cluster.node(0).base_url()).await;
    let [a, b, c] = [0, 1, 2].map(|i| format!("{}{path}", cluster.node(i).base_url()));
    let ids: Vec<u64> = (10..60).collect();
    for id in &ids {
        let long = msg::call(*id, "countdown", json!({"n": 100, "interval_ms": 200}));
        assert_eq!(post(&http, &b, &long.to_string()).await.0, 202);
    }
    let sid = path.rsplit('=').next().unwrap().to_owned();
    running_on(&cluster, &sid, 1, ids.len()).await;
    cluster.kill9(1);
    // Past B's heartbeat (its liveness key expired and A's keep-alive pass ended B's requests:
    // no in-flight entry names B), send every id again on C, quickly, while A's keep-alives run.
    let on_b = format!("{}.", cluster.node(1).id());
    eventually("B's requests to be ended as lost", T, || async {
        let gone = !cluster.liveness_key_present(1)
            && !cluster
                .in_flight_nodes(&sid)
                .iter()
                .any(|n| n.starts_with(&on_b));
        gone.then_some(())
    })
    .await;
    for id in ids.iter().rev() {
        let again = msg::call(*id, "echo", json!({"text": format!("again {id}")}));
        assert_eq!(post(&http, &c, &again.to_string()).await.0, 202);
        // Pacing, not a wait for anything: the re-sends spread over A's keep-alive passes.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut seen: std::collections::BTreeMap<u64, Vec<&'static str>> = Default::default();
    let done = |seen: &std::collections::BTreeMap<u64, Vec<&'static str>>| {
        ids.iter()
            .all(|id| seen.get(id).is_some_and(|v| v.contains(&"answer")))
    };
    while !done(&seen) {
        let m = next_message(&mut stream).await;
        let Some(id) = m["id"].as_u64() else {
            continue;
        };
        let kind = if m["error"]["code"] == -32004 {
            "lost"
        } else if msg::result_text(&m) == format!("again {id}") {
            "answer"
        } else {
            "other"
        };
        seen.entry(id).or_default().push(kind);
    }
    // A late error would follow its answer: whatever arrives in the next 500 ms is recorded (the
    // read window is the observation, not a race wait), then a marker request closes the check.
    let late = stream.until(Duration::from_millis(500), |_| false).await;
    for (ev, m) in &late.messages {
        // As `next_message` checks: a `message` event without an event id.
        assert_eq!(
            (ev.event.as_deref(), &ev.id),
            (Some("message"), &None),
            "{ev:?}"
        );
        if let Some(id) = m["id"].as_u64() {
            let kind = if m["error"]["code"] == -32004 {
                "lost"
            } else {
                "other"
            };
            seen.entry(id).or_default().push(kind);
        }
    }
    let (status, _) = post(
        &http,
        &a,
        &msg::call(99, "echo", json!({"text": "end"})).to_string(),
    )
    .await;
    assert_eq!(status, 202);
    loop {
        let m = next_message(&mut stream).await;
        if m["id"] == 99 {
            break;
        }
        if let Some(id) = m["id"].as_u64() {
            let kind = if m["error"]["code"] == -32004 {
                "lost"
            } else {
                "other"
            };
            seen.entry(id).or_default().push(kind);
        }
    }
    for id in &ids {
        assert_eq!(seen[id], vec!["lost", "answer"], "id {id}: {seen:?}");
    }
}

/// Waits until `n` requests of session `sid` are in flight on node `node` (registered in its
/// in-flight hash, which a POST does before its 202), so that killing the node loses them.
async fn running_on(cluster: &Cluster, sid: &str, node: usize, n: usize) {
    let prefix = format!("{}.", cluster.node(node).id());
    eventually("the requests in flight on the node", T, || async {
        let on_node = cluster
            .in_flight_nodes(sid)
            .iter()
            .filter(|owner| owner.starts_with(&prefix))
            .count();
        (on_node >= n).then_some(())
    })
    .await;
}
