//! Per-principal policy (`[policy]`, issue 16) on real nodes with authorization on (HS256 tokens)
//! and two demo upstreams (`a` unprefixed, `b` prefixed `b`): alice may use everything; bob may
//! not use tool `add`, upstream `b`, or resource `demo://greeting`; a `readonly` scope sees only
//! `echo`. Lists differ accordingly, and bob's call of a denied tool and of a made-up one get the
//! same error body, on every transport: session-era POST, legacy HTTP+SSE, WebSocket, 2026-07-28
//! stateless requests and tasks, and `subscriptions/listen`.

use std::path::Path;
use std::time::Duration;

use jsonwebtoken::{encode, get_current_timestamp, Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use switchboard_tests::client::{Headers, McpClient};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::temp::TempDir;
use switchboard_tests::{legacy_sse, modern, msg, ws};

const T: Duration = Duration::from_secs(10);
const GW: &str = "https://gw.example.test/mcp";
const ISSUER: &str = "https://as.example.test";
const SECRET: &str = "policy-test-secret-0123456789abcdef";
const GREETING: &str = "demo://greeting";

const CONFIG: &str = r#"
[[upstreams]]
name = "a"
kind = "demo"
prefix = ""

[[upstreams]]
name = "b"
kind = "demo"
prefix = "b"

[[policy.rules]]
principals = ["bob"]
deny_tools = ["add"]
deny_upstreams = ["b"]
deny_resources = ["demo://greeting"]

[[policy.rules]]
scopes = ["readonly"]
allow_tools = ["echo"]
"#;

fn cluster(extra: &[(&str, &str)]) -> (Cluster, TempDir) {
    let dir = TempDir::new("sb-policy");
    let path = dir.path().join("switchboard.toml");
    std::fs::write(&path, CONFIG).expect("write switchboard.toml");
    let mut options = options(&path);
    for (k, v) in extra {
        options = options.set(k, v);
    }
    (Cluster::start(1, options), dir)
}

fn options(path: &Path) -> ClusterOptions {
    ClusterOptions::new()
        .config_file(path)
        .set("http.keepalive_interval", "300ms")
        .set("auth.resource_url", GW)
        .set("auth.authorization_servers", ISSUER)
        .set("auth.required_scopes", "mcp:tools")
        .set("auth.issuer", ISSUER)
        .set("auth.jwt_hs256_secrets", SECRET)
}

fn token(sub: &str, scope: &str) -> String {
    let claims = json!({
        "iss": ISSUER, "sub": sub, "aud": GW, "scope": scope,
        "exp": get_current_timestamp() as i64 + 600,
    });
    let key = EncodingKey::from_secret(SECRET.as_bytes()).expect("key");
    encode(&Header::new(Algorithm::HS256), &claims, &key).expect("token")
}

fn bearer(h: Headers, token: &str) -> Headers {
    h.set("Authorization", &format!("Bearer {token}"))
}

/// A session-era client of `url` initialized with `token`.
async fn session(url: &str, token: &str) -> McpClient {
    session_of("2025-11-25", url, token).await
}

/// A client of `url` initialized with `token` at `revision`.
async fn session_of(revision: &str, url: &str, token: &str) -> McpClient {
    let mut c = McpClient::new();
    let h = bearer(c.post_headers(), token);
    let init = msg::init(revision, json!({})).to_string();
    let reply = c.send(Method::POST, url, &h, Some(init)).await;
    assert_eq!(reply.status, StatusCode::OK);
    c.session_id = reply.session_id();
    c.revision = Some(revision.into());
    let h = bearer(c.post_headers(), token);
    let inited = c.send(Method::POST, url, &h, Some(msg::inited().to_string()));
    assert_eq!(inited.await.status, StatusCode::ACCEPTED);
    c
}

async fn ask(c: &McpClient, url: &str, token: &str, id: u64, method: &str, params: Value) -> Value {
    let h = bearer(c.post_headers(), token);
    let body = msg::request(id, method, params).to_string();
    let reply = c.send(Method::POST, url, &h, Some(body)).await;
    reply.answer(json!(id), T).await.response
}

fn names(response: &Value, key: &str, field: &str) -> Vec<String> {
    response["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {response}"))
        .iter()
        .map(|t| t[field].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The response without its id and `_meta`: what must be identical for a denied and a missing
/// item.
fn body_of(mut response: Value) -> String {
    let object = response.as_object_mut().expect("a response object");
    object.remove("id");
    object.remove("_meta");
    serde_json::to_string(&response).expect("serializes")
}

const DEMO_TOOLS: [&str; 8] = [
    "echo",
    "regional_echo",
    "add",
    "countdown",
    "notify",
    "sample",
    "elicit",
    "list_roots",
];

/// The `initialize` result `token`'s principal gets from `url`.
async fn initialize_result(url: &str, token: &str) -> Value {
    let c = McpClient::new();
    let h = bearer(c.post_headers(), token);
    let init = msg::init("2025-11-25", json!({})).to_string();
    let reply = c.send(Method::POST, url, &h, Some(init)).await;
    assert_eq!(reply.status, StatusCode::OK);
    reply.json().await["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_describes_only_the_upstreams_the_principal_may_use() {
    let (cluster, _dir) = cluster(&[]);
    let url = cluster.url(0);
    let alice = initialize_result(&url, &token("alice", "mcp:tools")).await;
    let text = alice["instructions"].as_str().expect("instructions");
    assert!(text.contains("## a\n") && text.contains("## b\n"), "{text}");
    let bob = initialize_result(&url, &token("bob", "mcp:tools")).await;
    let text = bob["instructions"].as_str().expect("instructions");
    assert!(text.contains("## a\n") && !text.contains("## b"), "{text}");
    assert_eq!(
        bob["capabilities"], alice["capabilities"],
        "a alone offers the same"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_era_lists_are_filtered_and_denied_calls_look_unknown() {
    let (cluster, _dir) = cluster(&[]);
    let url = cluster.url(0);
    let (alice, bob, carol) = (
        token("alice", "mcp:tools"),
        token("bob", "mcp:tools"),
        token("carol", "mcp:tools readonly"),
    );
    let a = session(&url, &alice).await;
    let tools = names(
        &ask(&a, &url, &alice, 2, "tools/list", json!({})).await,
        "tools",
        "name",
    );
    assert_eq!(tools.len(), 16, "{tools:?}");
    assert!(tools.contains(&"add".to_owned()) && tools.contains(&"b__add".to_owned()));
    let b = session(&url, &bob).await;
    let tools = names(
        &ask(&b, &url, &bob, 2, "tools/list", json!({})).await,
        "tools",
        "name",
    );
    let expected: Vec<&str> = DEMO_TOOLS.iter().copied().filter(|t| *t != "add").collect();
    assert_eq!(tools, expected);
    let resources = ask(&b, &url, &bob, 3, "resources/list", json!({})).await;
    assert!(
        names(&resources, "resources", "uri").is_empty(),
        "{resources}"
    );
    let c = session(&url, &carol).await;
    let tools = names(
        &ask(&c, &url, &carol, 2, "tools/list", json!({})).await,
        "tools",
        "name",
    );
    assert_eq!(tools, ["echo"]);

    // Bob: a denied tool, a denied upstream's tool and a made-up tool answer alike.
    let call = |name: &str| json!({"name": name, "arguments": {"a": 1, "b": 2}});
    let denied = ask(&b, &url, &bob, 9, "tools/call", call("add")).await;
    let missing = ask(&b, &url, &bob, 9, "tools/call", call("nope")).await;
    assert_eq!(denied["error"]["code"], -32602, "{denied}");
    assert_eq!(
        body_of(denied.clone()).replace("add", "X"),
        body_of(missing).replace("nope", "X"),
        "{denied}"
    );
    let hidden = ask(&b, &url, &bob, 10, "tools/call", call("b__echo")).await;
    let made_up = ask(&b, &url, &bob, 10, "tools/call", call("b__zzzz")).await;
    assert_eq!(
        body_of(hidden).replace("b__echo", "X"),
        body_of(made_up).replace("b__zzzz", "X")
    );
    let read = |uri: &str| json!({"uri": uri});
    let secret = ask(&b, &url, &bob, 11, "resources/read", read(GREETING)).await;
    let nothing = ask(&b, &url, &bob, 11, "resources/read", read("demo://none")).await;
    assert_eq!(secret["error"]["code"], -32002, "{secret}");
    assert_eq!(
        body_of(secret).replace(GREETING, "X"),
        body_of(nothing).replace("demo://none", "X")
    );
    let sub = ask(&b, &url, &bob, 12, "resources/subscribe", read(GREETING)).await;
    assert_eq!(sub["error"]["code"], -32002, "{sub}");
    // Alice may.
    let ok = ask(&a, &url, &alice, 9, "tools/call", call("add")).await;
    assert_eq!(ok["result"]["content"][0]["text"], "3", "{ok}");
    let ok = ask(&a, &url, &alice, 11, "resources/read", read(GREETING)).await;
    assert!(ok["result"]["contents"].is_array(), "{ok}");

    // A batch (2025-03-26) runs as its sender too.
    let b = session_of("2025-03-26", &url, &bob).await;
    let h = bearer(b.post_headers(), &bob);
    let batch = json!([
        msg::request(20, "tools/call", call("add")),
        msg::request(21, "tools/call", call("echo"))
    ]);
    let reply = b
        .send(Method::POST, &url, &h, Some(batch.to_string()))
        .await;
    let answer = reply.answer(json!(20), T).await.response;
    let first = answer.as_array().map_or(&answer, |all| &all[0]);
    assert_eq!(first["error"]["message"], "unknown tool: add", "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_and_websocket_clients_get_their_principals_view() {
    let (cluster, _dir) = cluster(&[]);
    let base = format!("http://127.0.0.1:{}", cluster.node(0).port());
    let bob = token("bob", "mcp:tools");
    let mut auth = reqwest::header::HeaderMap::new();
    auth.insert(
        "authorization",
        format!("Bearer {bob}").parse().expect("header"),
    );
    let http = reqwest::Client::builder()
        .default_headers(auth)
        .build()
        .expect("client");
    let (mut stream, path) = legacy_sse::open_session(&http, &base).await;
    let post = format!("{base}{path}");
    let list = msg::request(2, "tools/list", json!({}));
    let list = legacy_sse::exchange(&http, &mut stream, &post, list).await;
    assert_eq!(names(&list, "tools", "name").len(), 7, "{list}");
    let denied = msg::request(3, "tools/call", json!({"name": "add", "arguments": {}}));
    let denied = legacy_sse::exchange(&http, &mut stream, &post, denied).await;
    assert_eq!(denied["error"]["message"], "unknown tool: add", "{denied}");

    let auth = format!("Bearer {bob}");
    let mut socket = ws::connect(
        &ws::ws_url(&cluster, 0),
        Some("mcp"),
        &[("authorization", &auth)],
    )
    .await
    .expect("websocket");
    ws::open_session(&mut socket).await;
    ws::send(&mut socket, msg::request(2, "tools/list", json!({}))).await;
    let list = ws::until_response(&mut socket, json!(2)).await;
    let list = list.last().expect("a response").clone();
    assert_eq!(names(&list, "tools", "name").len(), 7, "{list}");
    ws::send(&mut socket, ws::call(3, "b__echo", json!({"text": "x"}))).await;
    let denied = ws::until_response(&mut socket, json!(3)).await;
    let denied = denied.last().expect("a response");
    assert_eq!(
        denied["error"]["message"], "unknown tool: b__echo",
        "{denied}"
    );
}

/// POSTs a 2026-07-28 request as `token`: the status and the body text.
async fn stateless(url: &str, token: &str, body: &Value) -> (StatusCode, String) {
    let method = body["method"].as_str().expect("method");
    let name = body["params"]["name"].as_str();
    let h = bearer(modern::headers(method, name), token);
    let reply = McpClient::new()
        .send(Method::POST, url, &h, Some(body.to_string()))
        .await;
    (reply.status, reply.text().await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_requests_tasks_and_listen_see_the_callers_view() {
    let (cluster, _dir) = cluster(&[("stateless.tasks.after", "200ms")]);
    let url = cluster.url(0);
    let (alice, bob) = (token("alice", "mcp:tools"), token("bob", "mcp:tools"));
    let list = modern::request(1, "tools/list", json!({}), json!({}));
    let (status, text) = stateless(&url, &bob, &list).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let list: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(names(&list, "tools", "name").len(), 7, "{list}");
    let (_, text) = stateless(&url, &alice, &list_body()).await;
    let list: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(names(&list, "tools", "name").len(), 16, "{list}");

    // A denied and a made-up tool: the same body, byte for byte, apart from the name.
    let call = |name: &str| {
        let args = json!({"name": name, "arguments": {"a": 1, "b": 2}});
        modern::request(5, "tools/call", args, json!({}))
    };
    let (s1, denied) = stateless(&url, &bob, &call("add")).await;
    let (s2, missing) = stateless(&url, &bob, &call("nop")).await;
    assert_eq!(
        (s1, s2),
        (StatusCode::OK, StatusCode::OK),
        "{denied} {missing}"
    );
    assert!(denied.contains("unknown tool: add"), "{denied}");
    assert_eq!(denied.replace("add", "nop"), missing);

    // Task-augmented: bob's denied call is refused at once; his allowed long call becomes a task.
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let countdown = |name: &str| {
        let args = json!({"name": name, "arguments": {"n": 3, "interval_ms": 200}});
        modern::request(6, "tools/call", args, tasks.clone())
    };
    let (_, refused) = stateless(&url, &bob, &countdown("b__countdown")).await;
    assert!(refused.contains("unknown tool: b__countdown"), "{refused}");
    let (_, task) = stateless(&url, &bob, &countdown("countdown")).await;
    assert!(task.contains("\"resultType\":\"task\""), "{task}");
    let (_, task) = stateless(&url, &alice, &countdown("b__countdown")).await;
    assert!(task.contains("\"resultType\":\"task\""), "{task}");

    // subscriptions/listen: bob's subscription to the hidden greeting is acknowledged as asked
    // but nothing is delivered; alice's listener gets the update.
    let bob_stream = listen(&url, &bob, 30).await;
    let mut alice_stream = listen(&url, &alice, 31).await;
    let raise = modern::request(
        7,
        "tools/call",
        json!({"name": "notify", "arguments": {"count": 0}}),
        json!({}),
    );
    let (status, text) = stateless(&url, &alice, &raise).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (_, update) = alice_stream.next_message(T).await.expect("alice's update");
    assert_eq!(
        update["method"], "notifications/resources/updated",
        "{update}"
    );
    let mut bob_stream = bob_stream;
    let quiet = bob_stream.next_message(Duration::from_millis(800)).await;
    assert!(quiet.is_none(), "bob got {quiet:?}");
}

fn list_body() -> Value {
    modern::request(2, "tools/list", json!({}), json!({}))
}

/// Opens a listen stream subscribed to the greeting as `token`; checks the acknowledgement.
async fn listen(url: &str, token: &str, id: u64) -> switchboard_tests::sse::SseStream {
    let filter = json!({"notifications": {"resourceSubscriptions": [GREETING]}});
    let body = modern::request(id, "subscriptions/listen", filter, json!({}));
    let h = bearer(modern::headers("subscriptions/listen", None), token);
    let reply = McpClient::new()
        .send(Method::POST, url, &h, Some(body.to_string()))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let mut stream = reply.sse();
    let (_, ack) = stream.next_message(T).await.expect("acknowledgement");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([GREETING]),
        "{ack}"
    );
    stream
}
