//! Era bridging towards an upstream that keeps per-session state (a stdio child per session):
//! 2026-07-28 clients use it through ephemeral upstream sessions, one per request. When the
//! upstream asks the client something (`sampling/createMessage`), the call is parked on its node
//! and the client gets the question as an MRTR input request; the retry, on another node or the
//! same one, delivers the answer to the waiting upstream as the legacy response, and the call
//! completes where it was. A state resumes once; a parked call not resumed in time is dropped.

use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::eventually;
use switchboard_tests::metrics::counter;
use switchboard_tests::modern::{self, send};
use switchboard_tests::upstreams::{start_cluster, stdio_fixture, ConfiguredCluster, Upstream};

const T: Duration = Duration::from_secs(20);

fn cluster(options: ClusterOptions) -> ConfiguredCluster {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let upstream = Upstream::stdio("fixture", &python, &[stdio_fixture().as_str()]).prefix("");
    start_cluster(3, &[upstream], options)
}

async fn response(url: &str, body: &Value) -> Value {
    let id = body["id"].clone();
    send(url, body).await.answer(id, T).await.response
}

fn ask(id: i64, prompt: &str) -> Value {
    modern::request(
        id,
        "tools/call",
        json!({"name": "ask", "arguments": {"prompt": prompt}}),
        json!({"sampling": {}}),
    )
}

/// The one question of an `InputRequiredResult`: its key, after checking it.
fn question(asked: &Value, prompt: &str) -> String {
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let (key, q) = result["inputRequests"]
        .as_object()
        .and_then(|q| q.iter().next())
        .unwrap_or_else(|| panic!("{asked}"));
    assert_eq!(q["method"], "sampling/createMessage", "{asked}");
    assert_eq!(q["params"]["messages"][0]["content"]["text"], prompt);
    key.clone()
}

fn retry(first: &Value, id: i64, asked: &Value, key: &str, text: &str) -> Value {
    let mut r = first.clone();
    r["id"] = json!(id);
    r["params"]["requestState"] = asked["result"]["requestState"].clone();
    r["params"]["inputResponses"] = json!({key: {
        "role": "assistant", "content": {"type": "text", "text": text}, "model": "m"
    }});
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_client_answers_a_session_upstreams_question_on_any_node() {
    let configured = cluster(ClusterOptions::new());
    let urls = configured.cluster.urls();

    // Plain requests run in an ephemeral child each.
    let echo = modern::request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"s": "plain"}}),
        json!({}),
    );
    let r = response(&urls[0], &echo).await;
    assert_eq!(r["result"]["content"][0]["text"], "plain", "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let list = modern::request(2, "tools/list", json!({}), json!({}));
    let r = response(&urls[1], &list).await;
    assert!(
        r["result"]["tools"].as_array().is_some_and(|t| t.len() > 3),
        "{r}"
    );

    // Parked on node a, resumed from node b: the answer reaches the waiting child.
    let first = ask(3, "remote?");
    let asked = response(&urls[0], &first).await;
    let key = question(&asked, "remote?");
    let done = response(&urls[1], &retry(&first, 4, &asked, &key, "from-b")).await;
    assert_eq!(done["id"], 4, "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("from-b"),
        "the legacy response carried the answer: {done}"
    );
    // The state was used: resuming it again is refused.
    let again = response(&urls[2], &retry(&first, 5, &asked, &key, "twice")).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no longer waits"),
        "{again}"
    );

    // Parked on node c, resumed on node c itself.
    let first = ask(6, "local?");
    let asked = response(&urls[2], &first).await;
    let key = question(&asked, "local?");
    let done = response(&urls[2], &retry(&first, 7, &asked, &key, "from-c")).await;
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("from-c"), "{done}");

    // A retry without the answer is asked again (the call still waits), then completes.
    let first = ask(8, "patient?");
    let asked = response(&urls[0], &first).await;
    let key = question(&asked, "patient?");
    let mut empty = retry(&first, 9, &asked, &key, "");
    empty["params"]["inputResponses"] = json!({});
    let asked = response(&urls[1], &empty).await;
    let key2 = question(&asked, "patient?");
    assert_eq!(key2, key, "the same question, still open");
    let done = response(&urls[2], &retry(&first, 10, &asked, &key, "at-last")).await;
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("at-last"), "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_call_not_resumed_in_time_is_dropped() {
    let configured = cluster(ClusterOptions::new().set("stateless.mrtr.state_ttl", "800ms"));
    let urls = configured.cluster.urls();
    let first = ask(1, "late?");
    let asked = response(&urls[0], &first).await;
    let key = question(&asked, "late?");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let late = response(&urls[1], &retry(&first, 2, &asked, &key, "too late")).await;
    assert_eq!(late["error"]["code"], -32602, "{late}");
    assert!(
        late["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{late}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_retry_stream_on_another_node_cancels_the_parked_call() {
    let configured = cluster(ClusterOptions::new());
    let cluster = &configured.cluster;
    let urls = cluster.urls();
    let first = modern::request(
        1,
        "tools/call",
        json!({"name": "ask_slow", "arguments": {"prompt": "slow?", "seconds": 30}}),
        json!({"sampling": {}}),
    );
    let asked = response(&urls[0], &first).await;
    let key = question(&asked, "slow?");
    let holder = cluster.node(0).base_url();
    let before = counter(&holder, "switchboard_stateless_cancelled_total").await;
    // The retry streams from node b while the call (now slow) runs on node a; then b's client
    // goes away.
    let retry = retry(&first, 2, &asked, &key, "go");
    let reply = send(&urls[1], &retry).await;
    assert!(reply.is_sse(), "a slow resumed call streams");
    drop(reply);
    eventually("node a to cancel the resumed call", T, || {
        let holder = holder.clone();
        async move {
            (counter(&holder, "switchboard_stateless_cancelled_total").await > before).then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_round_ends_its_stream_and_parking_is_capped() {
    let configured = cluster(ClusterOptions::new().set("stateless.mrtr.max_parked", 1));
    let urls = configured.cluster.urls();
    // The first round's answer ends its stream at once, though the call waits (600 s TTL).
    let first = ask(1, "first?");
    let body = tokio::time::timeout(Duration::from_secs(5), send(&urls[0], &first).await.text())
        .await
        .expect("the parked round's stream ends at once");
    assert!(body.contains("input_required"), "{body}");
    // The node holds one parked call already: the next question on it fails instead.
    let second = response(&urls[0], &ask(2, "second?")).await;
    assert_eq!(second["error"]["code"], -32603, "{second}");
    let message = second["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("stateless.mrtr.max_parked"), "{second}");
    // Another node has room.
    let third = response(&urls[1], &ask(3, "third?")).await;
    question(&third, "third?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_sessions_of_stateless_requests_are_capped_per_node() {
    let configured = cluster(ClusterOptions::new().set("stateless.max_ephemeral_sessions", 1));
    let urls = configured.cluster.urls();
    // A parked call keeps its upstream session (and its seat) while it waits.
    let first = ask(1, "holding?");
    let asked = response(&urls[0], &first).await;
    let key = question(&asked, "holding?");
    let echo = modern::request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"s": "full"}}),
        json!({}),
    );
    let reply = send(&urls[0], &echo).await;
    assert_eq!(reply.status, reqwest::StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.header("retry-after").as_deref(), Some("1"));
    let body = reply.json().await;
    assert_eq!(body["error"]["code"], -32003, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("stateless.max_ephemeral_sessions"));
    // Another node has its own seats; once the parked call ends the seat is free again.
    let r = response(&urls[1], &echo).await;
    assert_eq!(r["result"]["content"][0]["text"], "full", "{r}");
    let done = response(&urls[1], &retry(&first, 3, &asked, &key, "released")).await;
    assert!(done["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("released"));
    eventually("node a's seat to be free again", T, || {
        let (url, echo) = (urls[0].clone(), echo.clone());
        async move {
            let reply = send(&url, &echo).await;
            (reply.status == reqwest::StatusCode::OK).then_some(())
        }
    })
    .await;
}
