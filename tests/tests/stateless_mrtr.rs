//! Multi round-trip requests of MCP 2026-07-28 (revisions.md 3.5.9–3.5.13) on a cluster: a tool
//! that asks the client something answers `InputRequiredResult`, and the retry, with the
//! client's answers and the echoed `requestState`, completes on another node. Keys agreed
//! through Redis with no configuration; configured keys rotate (old states still open);
//! tampered, foreign and mismatched states are refused with -32602.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};
use switchboard_tests::cluster::{node_name, Cluster, ClusterOptions};
use switchboard_tests::modern::{self, send};
use switchboard_tests::node::Node;
use switchboard_tests::temp::TempDir;

const T: Duration = Duration::from_secs(10);

fn call(id: i64, tool: &str, args: Value, caps: Value) -> Value {
    modern::request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": args}),
        caps,
    )
}

/// `first` retried under `id` with `responses` and the `requestState` of `asked`.
fn retry(first: &Value, id: i64, asked: &Value, responses: Value) -> Value {
    let mut r = first.clone();
    r["id"] = json!(id);
    r["params"]["inputResponses"] = responses;
    r["params"]["requestState"] = asked["requestState"].clone();
    r
}

/// Posts `body` to `url` and returns the result (panics on an error response).
async fn result(url: &str, body: &Value) -> Value {
    let id = body["id"].clone();
    let r = send(url, body).await.answer(id, T).await.response;
    assert!(r.get("error").is_none(), "{r}");
    r["result"].clone()
}

/// Posts `body` and returns its JSON-RPC error.
async fn error(url: &str, body: &Value) -> Value {
    let id = body["id"].clone();
    let r = send(url, body).await.answer(id, T).await.response;
    r["error"].clone()
}

/// The one key of an `InputRequiredResult`'s `inputRequests`, checking its method.
fn only_question(asked: &Value, method: &str) -> String {
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    assert!(asked["requestState"].is_string(), "{asked}");
    assert!(
        asked.get("ttlMs").is_none(),
        "input_required is never cached"
    );
    let questions = asked["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(questions.len(), 1, "{asked}");
    let (key, question) = questions.iter().next().unwrap();
    assert_eq!(question["method"], method, "{asked}");
    key.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_travel_as_input_requests_and_retries_complete_on_other_nodes() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let caps = json!({"sampling": {}, "elicitation": {}, "roots": {}});

    // sampling/createMessage: asked on node a, answered by a retry on node b.
    let first = call(
        1,
        "sample",
        json!({"prompt": "Capital of France?"}),
        caps.clone(),
    );
    let asked = result(&urls[0], &first).await;
    let key = only_question(&asked, "sampling/createMessage");
    let question = &asked["inputRequests"][&key]["params"];
    assert_eq!(
        question["messages"][0]["content"]["text"], "Capital of France?",
        "{asked}"
    );
    let answer = json!({
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "test-model",
        "stopReason": "endTurn"
    });
    let done = result(&urls[1], &retry(&first, 2, &asked, json!({&key: answer}))).await;
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(done["structuredContent"]["text"], "Paris", "{done}");
    assert_eq!(done["structuredContent"]["model"], "test-model", "{done}");

    // A retry without the answer is asked the same question again (on node c).
    let again = result(&urls[2], &retry(&first, 3, &asked, json!({}))).await;
    assert_eq!(only_question(&again, "sampling/createMessage"), key);
    // Unknown keys are ignored, not an error.
    let extra = retry(&first, 4, &asked, json!({"no-such-key": {"x": 1}}));
    let still = result(&urls[0], &extra).await;
    assert_eq!(still["resultType"], "input_required", "{still}");

    // elicitation/create from node c, answered on node a.
    let first = call(
        5,
        "elicit",
        json!({"message": "Favourite number?"}),
        caps.clone(),
    );
    let asked = result(&urls[2], &first).await;
    let key = only_question(&asked, "elicitation/create");
    let reply = json!({"action": "accept", "content": {"answer": "42"}});
    let done = result(&urls[0], &retry(&first, 6, &asked, json!({&key: reply}))).await;
    assert_eq!(done["structuredContent"]["action"], "accept", "{done}");
    assert_eq!(done["structuredContent"]["content"]["answer"], "42");

    // roots/list from node b, answered on node c.
    let first = call(7, "list_roots", json!({}), caps.clone());
    let asked = result(&urls[1], &first).await;
    let key = only_question(&asked, "roots/list");
    let roots = json!({"roots": [{"uri": "file:///work", "name": "work"}]});
    let done = result(&urls[2], &retry(&first, 8, &asked, json!({&key: roots}))).await;
    assert_eq!(done["structuredContent"]["roots"][0]["uri"], "file:///work");

    // Refusals, each -32602: tampered state, another tool's state, other arguments, bad
    // inputResponses, a state that is not a string.
    let first = call(9, "sample", json!({"prompt": "a"}), caps.clone());
    let asked = result(&urls[0], &first).await;
    let key = only_question(&asked, "sampling/createMessage");
    let mut tampered = retry(&first, 10, &asked, json!({}));
    let state = asked["requestState"].as_str().unwrap();
    let flipped = if state.ends_with('A') { 'B' } else { 'A' };
    tampered["params"]["requestState"] = json!(format!("{}{flipped}", &state[..state.len() - 1]));
    let e = error(&urls[1], &tampered).await;
    assert_eq!(e["code"], -32602, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("requestState"),
        "{e}"
    );
    let elsewhere = retry(
        &call(11, "elicit", json!({"message": "a"}), caps.clone()),
        11,
        &asked,
        json!({}),
    );
    assert_eq!(error(&urls[1], &elsewhere).await["code"], -32602);
    let other_args = retry(
        &call(12, "sample", json!({"prompt": "b"}), caps.clone()),
        12,
        &asked,
        json!({}),
    );
    let e = error(&urls[2], &other_args).await;
    assert!(
        e["message"].as_str().unwrap().contains("another request"),
        "{e}"
    );
    let bad = retry(&first, 13, &asked, json!({&key: "Paris"}));
    assert_eq!(error(&urls[0], &bad).await["code"], -32602);
    let mut not_string = retry(&first, 14, &asked, json!({}));
    not_string["params"]["requestState"] = json!({"forged": true});
    assert_eq!(error(&urls[0], &not_string).await["code"], -32602);

    // Every node agreed on one key, kept in Redis under the key prefix.
    let keys = cluster.redis().keys_matching("*secret*");
    assert_eq!(
        keys,
        vec!["sb:secret:mrtr-request-state".to_owned()],
        "{keys:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_keys_rotate_and_states_expire() {
    let (k1, k2) = (STANDARD.encode([1u8; 32]), STANDARD.encode([2u8; 32]));
    let ring = |keys: &[&str]| {
        let quoted: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
        format!("[{}]", quoted.join(", "))
    };
    let cluster = Cluster::start(0, ClusterOptions::new());
    let logs = TempDir::new("sb-mrtr");
    let spawn = |i: usize, settings: &[(&str, String)]| {
        let settings: Vec<(String, String)> = settings
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        let mut node = Node::spawn(
            &node_name(i),
            Some(&cluster.redis().url()),
            &settings,
            logs.path(),
        );
        assert!(node.wait_ready(), "{}", node.log_tail(40));
        node
    };
    let old = spawn(0, &[("stateless.mrtr.state_keys", ring(&[&k1]))]);
    let rotated = spawn(1, &[("stateless.mrtr.state_keys", ring(&[&k2, &k1]))]);
    let new = spawn(2, &[("stateless.mrtr.state_keys", ring(&[&k2]))]);
    let short = spawn(
        3,
        &[
            ("stateless.mrtr.state_keys", ring(&[&k1])),
            ("stateless.mrtr.state_ttl", "300ms".into()),
        ],
    );
    let caps = json!({"sampling": {}});
    let answer = json!({"content": {"type": "text", "text": "ok"}});

    // Sealed with k1 before the rotation: opens on the rotated node.
    let first = call(1, "sample", json!({"prompt": "p"}), caps.clone());
    let asked = result(&old.url(), &first).await;
    let key = only_question(&asked, "sampling/createMessage");
    let done = retry(&first, 2, &asked, json!({&key: answer}));
    assert_eq!(
        result(&rotated.url(), &done).await["structuredContent"]["text"],
        "ok"
    );
    // Sealed with k2 after it: opens where k2 is known, refused where it is not.
    let asked = result(&rotated.url(), &first).await;
    let done = retry(&first, 3, &asked, json!({&key: answer}));
    assert_eq!(
        result(&new.url(), &done).await["structuredContent"]["text"],
        "ok"
    );
    let e = error(&old.url(), &done).await;
    assert_eq!(e["code"], -32602, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("unknown key"),
        "{e}"
    );
    // A state past its TTL is refused.
    let asked = result(&short.url(), &first).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let late = retry(&first, 4, &asked, json!({&key: answer}));
    let e = error(&short.url(), &late).await;
    assert!(e["message"].as_str().unwrap().contains("expired"), "{e}");
}
