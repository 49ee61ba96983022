//! Case C40 (issue 35): step-up authorization on three nodes sharing Redis. Everyone may use the
//! demo's tools but `add`, which a rule gives to tokens with scope `calc:write`; bob is denied
//! `add` by name; `resources/read` needs scope `files:read` (`[policy.methods]`).
//!
//! A token with `mcp:tools` only gets HTTP 403 for `add` with `WWW-Authenticate: Bearer
//! error="insufficient_scope", scope="mcp:tools calc:write", resource_metadata=…` and a JSON-RPC
//! body with the request's id, on every transport in its own form (a session-era POST, a
//! 2026-07-28 request, a legacy HTTP+SSE POST; a WebSocket frame answered with the error); the
//! same session goes on on another node with a wider token, and its `tools/list` then has
//! `add`. A tool denied by name stays "unknown tool" (-32602, 200) whatever the scopes. The
//! audience spot checks of the case: a list holding ours is accepted, ours with a trailing slash
//! or a sibling path is not.
//!
//! Before issue 35 the narrow token's call got 200 with -32602 "unknown tool: add", and a client
//! had no way to learn that a wider token would do.

use std::time::Duration;

use jsonwebtoken::get_current_timestamp;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use switchboard_tests::client::{Headers, McpClient, Reply};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::temp::TempDir;
use switchboard_tests::{legacy_sse, modern, msg, ws};

const T: Duration = Duration::from_secs(10);
const GW: &str = "https://gw.example.test/mcp";
const ISSUER: &str = "https://as.example.test";
const SECRET: &str = "c40-test-secret-0123456789abcdef-xyz";
const CHALLENGE: &str = r#"Bearer error="insufficient_scope", scope="mcp:tools calc:write", resource_metadata="https://gw.example.test/.well-known/oauth-protected-resource/mcp""#;

const POLICY: &str = r#"
[[policy.rules]]
principals = ["*"]
allow_tools = ["echo", "countdown", "notify", "sample", "elicit", "list_roots", "regional_echo"]

[[policy.rules]]
scopes = ["calc:write"]
allow_tools = ["add"]

[[policy.rules]]
principals = ["bob"]
deny_tools = ["add"]

[policy.methods]
"resources/read" = ["files:read"]
"#;

fn cluster() -> (Cluster, TempDir) {
    let dir = TempDir::new("sb-step-up");
    let path = dir.path().join("switchboard.toml");
    std::fs::write(&path, POLICY).expect("write switchboard.toml");
    let options = ClusterOptions::new()
        .config_file(&path)
        .set("auth.resource_url", GW)
        .set("auth.authorization_servers", ISSUER)
        .set("auth.scopes_supported", "mcp:tools,calc:write,files:read")
        .set("auth.required_scopes", "mcp:tools")
        .set("auth.issuer", ISSUER)
        .set("auth.jwt_hs256_secrets", SECRET);
    (Cluster::start(3, options), dir)
}

fn token_with(sub: &str, scope: &str, aud: Value) -> String {
    let claims = json!({
        "iss": ISSUER, "sub": sub, "aud": aud, "scope": scope,
        "exp": get_current_timestamp() as i64 + 600,
    });
    switchboard_tests::jwt::hs256(SECRET, &claims)
}

fn token(sub: &str, scope: &str) -> String {
    token_with(sub, scope, json!(GW))
}

fn bearer(h: Headers, token: &str) -> Headers {
    h.set("Authorization", &format!("Bearer {token}"))
}

async fn session(url: &str, token: &str) -> McpClient {
    let mut c = McpClient::new();
    let init = msg::init("2025-11-25", json!({})).to_string();
    let reply = c
        .send(
            Method::POST,
            url,
            &bearer(c.post_headers(), token),
            Some(init),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    c.session_id = reply.session_id();
    c.revision = Some("2025-11-25".into());
    let inited = msg::inited().to_string();
    let reply = c
        .send(
            Method::POST,
            url,
            &bearer(c.post_headers(), token),
            Some(inited),
        )
        .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    c
}

async fn post(c: &McpClient, url: &str, token: &str, body: &Value) -> Reply {
    let h = bearer(c.post_headers(), token);
    c.send(Method::POST, url, &h, Some(body.to_string())).await
}

/// The step-up refusal: 403, the challenge, a JSON-RPC error with the request's id.
async fn stepped_up(reply: Reply, id: Value, challenge: &str) {
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(reply.header("www-authenticate").as_deref(), Some(challenge));
    let body = reply.json().await;
    assert_eq!(body["id"], id, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("scope")),
        "{body}"
    );
}

fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c40_a_call_that_needs_a_wider_token_gets_the_scope_challenge_and_steps_up() {
    let (cluster, _dir) = cluster();
    let urls = cluster.urls();
    let (narrow, wide) = (
        token("alice", "mcp:tools"),
        token("alice", "mcp:tools calc:write"),
    );
    let c = session(&urls[0], &narrow).await;
    let add = |id: u64| msg::call(id, "add", json!({"a": 1, "b": 2}));

    let list = post(
        &c,
        &urls[0],
        &narrow,
        &msg::request(1, "tools/list", json!({})),
    )
    .await;
    let list = list.answer(json!(1), T).await.response;
    assert!(!tool_names(&list).contains(&"add".to_owned()), "{list}");
    stepped_up(
        post(&c, &urls[1], &narrow, &add(2)).await,
        json!(2),
        CHALLENGE,
    )
    .await;

    // The same session, a wider token, another node.
    let done = post(&c, &urls[2], &wide, &add(3))
        .await
        .answer(json!(3), T)
        .await;
    assert_eq!(
        done.response["result"]["structuredContent"]["sum"], 3,
        "{}",
        done.response
    );
    let list = post(
        &c,
        &urls[1],
        &wide,
        &msg::request(4, "tools/list", json!({})),
    )
    .await;
    assert!(tool_names(&list.answer(json!(4), T).await.response).contains(&"add".to_owned()));

    // A method that needs a scope.
    let read = msg::request(5, "resources/read", json!({"uri": "demo://greeting"}));
    let reader_challenge = CHALLENGE.replace("calc:write", "files:read");
    stepped_up(
        post(&c, &urls[0], &wide, &read).await,
        json!(5),
        &reader_challenge,
    )
    .await;
    let reader = token("alice", "mcp:tools files:read");
    let read = post(&c, &urls[0], &reader, &read)
        .await
        .answer(json!(5), T)
        .await;
    assert!(
        read.response["result"]["contents"].is_array(),
        "{}",
        read.response
    );

    // Denied by name: unknown, whatever the scopes.
    let bob = token("bob", "mcp:tools calc:write");
    let b = session(&urls[1], &bob).await;
    let denied = post(&b, &urls[2], &bob, &add(6)).await;
    assert_eq!(denied.status, StatusCode::OK);
    let denied = denied.answer(json!(6), T).await.response;
    assert_eq!(denied["error"]["code"], -32602, "{denied}");
    assert_eq!(denied["error"]["message"], "unknown tool: add", "{denied}");

    // 2026-07-28: the same refusal for a stateless request.
    let params = json!({"name": "add", "arguments": {"a": 1, "b": 2}});
    let body = modern::request(7, "tools/call", params, json!({}));
    let h = bearer(modern::headers("tools/call", Some("add")), &narrow);
    stepped_up(modern::post(&urls[2], &h, &body).await, json!(7), CHALLENGE).await;

    // Legacy HTTP+SSE: the POST of the message is refused.
    let mut auth = reqwest::header::HeaderMap::new();
    auth.insert("authorization", format!("Bearer {narrow}").parse().unwrap());
    let http = reqwest::Client::builder()
        .default_headers(auth)
        .build()
        .unwrap();
    let (_stream, path) = legacy_sse::open_session(&http, &cluster.node(0).base_url()).await;
    let reply = http
        .post(format!("{}{path}", cluster.node(1).base_url()))
        .header("content-type", "application/json")
        .body(add(8).to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(reply.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        reply.headers()["www-authenticate"].to_str().unwrap(),
        CHALLENGE
    );

    // WebSocket: the socket's token is fixed, so the frame gets the error, naming the scope.
    let auth = format!("Bearer {narrow}");
    let mut socket = ws::connect(
        &ws::ws_url(&cluster, 2),
        Some("mcp"),
        &[("authorization", &auth)],
    )
    .await
    .expect("upgrade");
    ws::open_session(&mut socket).await;
    ws::send(&mut socket, add(9)).await;
    let answer = ws::until_response(&mut socket, json!(9)).await;
    let error = &answer.last().expect("an answer")["error"];
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("calc:write")),
        "{error}"
    );
    // Logged like every answer on the socket (its event id in `error.data._meta`), so a resume
    // replays it.
    assert!(
        error["data"]["_meta"]["io.switchboard/eventId"].is_string(),
        "{error}"
    );
}

/// The case's audience spot checks: `aud` may be a list holding our resource; our resource with
/// a trailing slash, or a sibling path on the same host, is another audience (401).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c40_audiences_are_compared_exactly() {
    let (cluster, _dir) = cluster();
    let url = cluster.url(0);
    let init = msg::init("2025-11-25", json!({}));
    for (aud, status) in [
        (json!(["https://other.example", GW]), StatusCode::OK),
        (json!(format!("{GW}/")), StatusCode::UNAUTHORIZED),
        (
            json!("https://gw.example.test/other"),
            StatusCode::UNAUTHORIZED,
        ),
    ] {
        let c = McpClient::new();
        let t = token_with("alice", "mcp:tools", aud.clone());
        let reply = post(&c, &url, &t, &init).await;
        assert_eq!(reply.status, status, "aud {aud}");
    }
}
