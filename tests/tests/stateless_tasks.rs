//! The tasks extension (`io.modelcontextprotocol/tasks`, revisions.md 6.2, 1.7.3, 5.13) on
//! clusters sharing one Redis: a slow `tools/call` from a declaring client becomes a task that
//! every node reads and cancels; cancelling really stops the call on its node; a client without
//! the extension gets its result synchronously; the header and method rules; a task bound to its
//! principal; and a task whose node died is failed instead of staying `working`.

use std::time::Duration;

use jsonwebtoken::{encode, get_current_timestamp, Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use switchboard_tests::client::{Headers, McpClient};
use switchboard_tests::cluster::{Cluster, ClusterOptions, RedisKind};
use switchboard_tests::eventually;
use switchboard_tests::metrics::counter;

const T: Duration = Duration::from_secs(10);
const EXT: &str = "io.modelcontextprotocol/tasks";

fn tasks_caps() -> Value {
    json!({"extensions": {EXT: {}}})
}

/// A 2026-07-28 request with `caps` as its client capabilities.
fn modern(id: i64, method: &str, params: Value, caps: Value) -> Value {
    switchboard_tests::modern::request(id, method, params, caps)
}

fn hdrs(method: &str, name: Option<&str>, token: Option<&str>) -> Headers {
    let h = switchboard_tests::modern::headers(method, name);
    match token {
        Some(t) => h.set("Authorization", &format!("Bearer {t}")),
        None => h,
    }
}

/// POSTs `body` and returns the HTTP status and the JSON-RPC response.
async fn send(url: &str, h: &Headers, body: &Value) -> (StatusCode, Value) {
    let reply = McpClient::new()
        .send(Method::POST, url, h, Some(body.to_string()))
        .await;
    let status = reply.status;
    if status != StatusCode::OK {
        return (status, reply.json().await);
    }
    (status, reply.answer(body["id"].clone(), T).await.response)
}

/// `countdown` of `n` steps of `interval_ms`.
async fn countdown(url: &str, n: u64, interval_ms: u64, caps: Value, token: Option<&str>) -> Value {
    let args = json!({"name": "countdown", "arguments": {"n": n, "interval_ms": interval_ms}});
    let body = modern(1, "tools/call", args, caps);
    send(url, &hdrs("tools/call", Some("countdown"), token), &body)
        .await
        .1
}

/// A task method on `task_id` (Mcp-Name = the id); status and response.
async fn task_call(
    url: &str,
    method: &str,
    task_id: &str,
    token: Option<&str>,
) -> (StatusCode, Value) {
    let body = modern(7, method, json!({"taskId": task_id}), tasks_caps());
    send(url, &hdrs(method, Some(task_id), token), &body).await
}

/// `tasks/update` of `task_id` with `responses` as its `inputResponses`.
async fn update(url: &str, task_id: &str, responses: Value) -> (StatusCode, Value) {
    let params = json!({"taskId": task_id, "inputResponses": responses});
    let body = modern(8, "tasks/update", params, tasks_caps());
    send(url, &hdrs("tasks/update", Some(task_id), None), &body).await
}

async fn get(url: &str, task_id: &str) -> Value {
    let (status, r) = task_call(url, "tasks/get", task_id, None).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    r
}

/// The `CreateTaskResult` of a call; asserts its shape and returns the task id.
fn created(r: &Value) -> String {
    let t = &r["result"];
    assert_eq!(t["resultType"], "task", "{r}");
    assert_eq!(t["status"], "working", "{r}");
    for field in ["createdAt", "lastUpdatedAt"] {
        assert!(
            t[field].as_str().is_some_and(|s| s.ends_with('Z')),
            "{field}: {r}"
        );
    }
    assert_eq!(t["ttlMs"], 600_000, "{r}");
    assert_eq!(t["pollIntervalMs"], 200, "{r}");
    let id = t["taskId"].as_str().expect("taskId").to_owned();
    assert!(id.len() >= 32, "128 bits at least: {id}");
    id
}

async fn eventually_status(url: &str, task_id: &str, status: &str) -> Value {
    eventually::eventually(&format!("task {task_id} {status}"), T, || async {
        let r = get(url, task_id).await;
        (r["result"]["status"] == status).then_some(r)
    })
    .await
}

/// Tasks of 300 ms and more; the keep-alive sweep every 300 ms must leave task calls alone.
fn options() -> ClusterOptions {
    ClusterOptions::new()
        .set("session.touch_interval", "300ms")
        .set("stateless.tasks.after", "300ms")
        .set("stateless.tasks.ttl", "600s")
        .set("stateless.tasks.poll_interval", "200ms")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_call_becomes_a_task_that_every_node_serves() {
    let cluster = Cluster::start(3, options());
    let urls = cluster.urls();

    let discover = modern(1, "server/discover", json!({}), json!({}));
    let (_, r) = send(&urls[1], &hdrs("server/discover", None, None), &discover).await;
    assert_eq!(
        r["result"]["capabilities"]["extensions"][EXT],
        json!({}),
        "{r}"
    );

    let r = countdown(&urls[0], 8, 200, tasks_caps(), None).await;
    let id = created(&r);
    // Durable before the answer: another node finds it at once.
    let r = get(&urls[1], &id).await;
    assert_eq!(r["result"]["status"], "working", "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["taskId"], id.as_str());

    let done = eventually_status(&urls[2], &id, "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "countdown finished",
        "{done}"
    );
    assert!(done["result"].get("error").is_none());

    let (status, r) = task_call(&urls[1], "tasks/cancel", &id, None).await;
    assert_eq!(
        (status, &r["error"]["code"]),
        (StatusCode::OK, &json!(-32602)),
        "{r}"
    );
    let (_, r) = task_call(&urls[0], "tasks/update", &id, None).await;
    assert_eq!(
        r["error"]["code"], -32602,
        "inputResponses is required: {r}"
    );
    let (_, r) = update(&urls[0], &id, json!({"stray": {"x": 1}})).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");
    let (_, r) = task_call(
        &urls[0],
        "tasks/get",
        "0123456789abcdef0123456789abcdef",
        None,
    )
    .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // Mcp-Name must be the task id (1.7.3).
    let body = modern(9, "tasks/get", json!({"taskId": id}), tasks_caps());
    let (status, r) = send(&urls[1], &hdrs("tasks/get", Some("other"), None), &body).await;
    assert_eq!(
        (status, &r["error"]["code"]),
        (StatusCode::BAD_REQUEST, &json!(-32020)),
        "{r}"
    );
    let (status, r) = send(&urls[1], &hdrs("tasks/get", None, None), &body).await;
    assert_eq!(
        (status, &r["error"]["code"]),
        (StatusCode::BAD_REQUEST, &json!(-32020)),
        "{r}"
    );
    // tasks/result and tasks/list are gone in 2026-07-28.
    for gone in ["tasks/result", "tasks/list"] {
        let body = modern(10, gone, json!({"taskId": id}), tasks_caps());
        let (status, r) = send(&urls[2], &hdrs(gone, Some(&id), None), &body).await;
        assert_eq!(
            (status, &r["error"]["code"]),
            (StatusCode::NOT_FOUND, &json!(-32601)),
            "{gone}: {r}"
        );
    }

    // Without the extension the same slow call answers synchronously; a fast call with it too.
    let r = countdown(&urls[1], 3, 200, json!({}), None).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(
        r["result"]["content"][0]["text"], "countdown finished",
        "{r}"
    );
    let r = countdown(&urls[2], 1, 10, tasks_caps(), None).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_on_another_node_stops_the_call() {
    task_cancelled_elsewhere(RedisKind::Standalone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_on_another_node_stops_the_call_on_redis_cluster() {
    task_cancelled_elsewhere(RedisKind::Cluster).await;
}

async fn task_cancelled_elsewhere(kind: RedisKind) {
    let cluster = Cluster::start(3, options().redis(kind));
    let urls = cluster.urls();
    let running_node = cluster.node(0).base_url();
    let before = counter(&running_node, "switchboard_stateless_cancelled_total").await;

    let id = created(&countdown(&urls[0], 50, 200, tasks_caps(), None).await);
    let (status, r) = task_call(&urls[1], "tasks/cancel", &id, None).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");
    let r = get(&urls[2], &id).await;
    assert_eq!(r["result"]["status"], "cancelled", "{r}");

    // The call on node a really stopped: the bus delivered the cancellation and the call
    // ended with it (the counter moves only when the call's token fired and the call returned).
    eventually::eventually("node a stops the task's call", T, || async {
        let stopped = counter(&running_node, "switchboard_tasks_cancelled_total").await == 1;
        let ended = counter(&running_node, "switchboard_stateless_cancelled_total").await > before;
        (stopped && ended).then_some(())
    })
    .await;
    let r = get(&urls[0], &id).await;
    assert_eq!(r["result"]["status"], "cancelled", "terminal stays: {r}");
    let (_, r) = task_call(&urls[0], "tasks/cancel", &id, None).await;
    assert_eq!(
        r["error"]["code"], -32602,
        "cancelling a terminal task: {r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_node_died_is_failed_not_working_forever() {
    let mut cluster = Cluster::start(2, options().fast_liveness(1200));
    let urls = cluster.urls();
    let id = created(&countdown(&urls[0], 300, 100, tasks_caps(), None).await);
    assert_eq!(get(&urls[1], &id).await["result"]["status"], "working");
    cluster.kill9(0);
    let r = eventually_status(&urls[1], &id, "failed").await;
    assert_eq!(r["result"]["error"]["code"], -32603, "{r}");
    let message = r["result"]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("stopped"), "{r}");
    assert!(r["result"]["statusMessage"].is_string(), "{r}");
}

const GW: &str = "https://gw.example.test/mcp";
const ISSUER: &str = "https://as.example.test/tenant";
const SECRET: &str = "tasks-test-secret-0123456789abcdef-xyz";

fn token(sub: &str) -> String {
    let claims = json!({
        "iss": ISSUER, "sub": sub, "aud": GW, "scope": "mcp:tools",
        "exp": get_current_timestamp() as i64 + 600,
    });
    let key = EncodingKey::from_secret(SECRET.as_bytes()).expect("key");
    encode(&Header::new(Algorithm::HS256), &claims, &key).expect("token")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_bound_to_its_principal() {
    let options = options()
        .set("auth.resource_url", GW)
        .set("auth.authorization_servers", ISSUER)
        .set("auth.issuer", ISSUER)
        .set("auth.jwt_hs256_secrets", SECRET);
    let cluster = Cluster::start(2, options);
    let urls = cluster.urls();
    let (alice, bob) = (token("alice"), token("bob"));

    let id = created(&countdown(&urls[0], 40, 200, tasks_caps(), Some(&alice)).await);
    let (_, r) = task_call(&urls[1], "tasks/get", &id, Some(&alice)).await;
    assert_eq!(r["result"]["status"], "working", "{r}");

    let (_, unknown) = task_call(
        &urls[1],
        "tasks/get",
        "00000000000000000000000000000000",
        Some(&bob),
    )
    .await;
    for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
        let (status, r) = task_call(&urls[1], method, &id, Some(&bob)).await;
        assert_eq!(status, StatusCode::OK, "{method}: {r}");
        assert_eq!(
            r["error"], unknown["error"],
            "{method}: same answer as an unknown id"
        );
    }
    let (_, r) = task_call(&urls[0], "tasks/get", &id, Some(&alice)).await;
    assert_eq!(
        r["result"]["status"], "working",
        "bob's cancel did nothing: {r}"
    );
    let (_, r) = task_call(&urls[0], "tasks/cancel", &id, Some(&alice)).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_asks_for_input_and_tasks_update_on_another_node_answers_it() {
    task_input_answered_elsewhere(RedisKind::Standalone).await;
}

/// The same on Redis Cluster: the task's record in its own slot, the input delivered to the
/// running node's inbox over sharded pub/sub.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_asks_for_input_and_tasks_update_on_another_node_answers_it_on_redis_cluster() {
    task_input_answered_elsewhere(RedisKind::Cluster).await;
}

async fn task_input_answered_elsewhere(kind: RedisKind) {
    let cluster = Cluster::start(3, options().redis(kind));
    let urls = cluster.urls();
    let mut caps = tasks_caps();
    caps["sampling"] = json!({});
    let args = json!({"name": "sample", "arguments": {"prompt": "Which colour?"}});
    let body = modern(1, "tools/call", args, caps);
    let (_, r) = send(&urls[0], &hdrs("tools/call", Some("sample"), None), &body).await;
    let id = created(&r);

    let waiting = eventually_status(&urls[1], &id, "input_required").await;
    let questions = waiting["result"]["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("{waiting}"))
        .clone();
    assert_eq!(questions.len(), 1, "{waiting}");
    let (key, question) = questions.iter().next().unwrap();
    assert_eq!(question["method"], "sampling/createMessage", "{waiting}");
    assert_eq!(
        question["params"]["messages"][0]["content"]["text"],
        "Which colour?"
    );

    // An answer to a key not asked is ignored: still waiting.
    let (_, r) = update(&urls[2], &id, json!({"not-asked": {"x": 1}})).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");
    let r = get(&urls[2], &id).await;
    assert_eq!(r["result"]["status"], "input_required", "{r}");

    let answer =
        json!({"role": "assistant", "content": {"type": "text", "text": "teal"}, "model": "m"});
    let (_, r) = update(&urls[2], &id, json!({key: "not a result"})).await;
    assert_eq!(
        r["error"]["code"], -32602,
        "answers are result objects: {r}"
    );
    let (_, r) = update(&urls[2], &id, json!({key: answer})).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");
    let done = eventually_status(&urls[1], &id, "completed").await;
    assert_eq!(
        done["result"]["result"]["structuredContent"]["text"], "teal",
        "{done}"
    );
    assert!(done["result"].get("inputRequests").is_none(), "{done}");
    assert!(
        done["result"].get("statusMessage").is_none(),
        "no stale message: {done}"
    );
}

/// The first `notifications/tasks` of `stream` with `status`.
async fn status_note(stream: &mut switchboard_tests::sse::SseStream, status: &str) -> Value {
    let got = stream
        .until(T, |m| {
            m["method"] == "notifications/tasks" && m["params"]["status"] == status
        })
        .await;
    got.matched
        .unwrap_or_else(|| panic!("no notifications/tasks {status}: {:?}", got.messages))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_tasks_reach_a_listener_on_another_node() {
    let cluster = Cluster::start(2, options());
    let urls = cluster.urls();
    let id = created(&countdown(&urls[0], 8, 200, tasks_caps(), None).await);

    // taskIds need the extension declared.
    let filter = json!({"notifications": {"taskIds": [id]}});
    let body = modern(20, "subscriptions/listen", filter.clone(), json!({}));
    let (status, r) = send(&urls[1], &hdrs("subscriptions/listen", None, None), &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{r}");
    assert_eq!(r["error"]["code"], -32021, "{r}");

    let body = modern(21, "subscriptions/listen", filter, tasks_caps());
    let reply = McpClient::new()
        .send(
            Method::POST,
            &urls[1],
            &hdrs("subscriptions/listen", None, None),
            Some(body.to_string()),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let mut stream = reply.sse();
    let (_, ack) = stream.next_message(T).await.expect("acknowledgement");
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [id]}));
    // Raised on node a, where the task runs; delivered by node b.
    let done = status_note(&mut stream, "completed").await;
    let params = &done["params"];
    assert_eq!(params["taskId"], id.as_str(), "{done}");
    assert_eq!(
        params["result"]["content"][0]["text"], "countdown finished",
        "{done}"
    );
    assert_eq!(
        params["_meta"]["io.modelcontextprotocol/subscriptionId"],
        21
    );
    assert!(params.get("resultType").is_none(), "{done}");
    assert!(!stream.is_ended(), "the stream stays open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_principal_cap_refuses_the_next_task_and_frees_a_slot_when_one_ends() {
    let cluster = Cluster::start(2, options().set("stateless.tasks.max_per_principal", 2));
    let urls = cluster.urls();
    let a = created(&countdown(&urls[0], 100, 200, tasks_caps(), None).await);
    let _b = created(&countdown(&urls[1], 100, 200, tasks_caps(), None).await);

    let args = json!({"name": "countdown", "arguments": {"n": 100, "interval_ms": 200}});
    let body = modern(1, "tools/call", args, tasks_caps());
    let (status, r) = send(
        &urls[0],
        &hdrs("tools/call", Some("countdown"), None),
        &body,
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{r}");
    assert_eq!(r["error"]["code"], -32003, "{r}");
    let refused = counter(
        &cluster.node(0).base_url(),
        "switchboard_tasks_refused_total",
    )
    .await;
    assert_eq!(refused, 1);
    // A call that finishes in time needs no slot.
    let r = countdown(&urls[1], 1, 10, tasks_caps(), None).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");

    let (_, r) = task_call(&urls[1], "tasks/cancel", &a, None).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    eventually::eventually("a slot freed by the cancelled task", T, || async {
        let r = countdown(&urls[1], 100, 200, tasks_caps(), None).await;
        (r["result"]["resultType"] == "task").then_some(())
    })
    .await;
}

/// A task's call goes on sending progress after its `CreateTaskResult`; nothing carries it (the
/// client reads progress with `tasks/get`), so each is dropped and counted in
/// `switchboard_notifications_dropped_total` on the node that runs it, not dropped unseen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_late_progress_is_counted_as_dropped() {
    let cluster = Cluster::start(3, options());
    let urls = cluster.urls();
    let running_node = cluster.node(0).base_url();
    let name = "switchboard_notifications_dropped_total";
    let before = counter(&running_node, name).await;

    let args = json!({
        "name": "countdown",
        "arguments": {"n": 8, "interval_ms": 200},
        "_meta": {"progressToken": "late"},
    });
    let body = modern(1, "tools/call", args, tasks_caps());
    let (_, r) = send(
        &urls[0],
        &hdrs("tools/call", Some("countdown"), None),
        &body,
    )
    .await;
    let id = created(&r);
    eventually_status(&urls[1], &id, "completed").await;
    // 8 steps of 200 ms, a task from 300 ms: 6 or 7 come after the task's answer (4 allows for a
    // slow machine that creates the task late); none is counted twice.
    let dropped = counter(&running_node, name).await - before;
    assert!((4..=8).contains(&dropped), "{dropped} dropped");
}
