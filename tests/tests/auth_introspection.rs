//! Opaque tokens checked by RFC 7662 introspection (issue 35), on two nodes sharing Redis with an
//! introspection endpoint run in the test process (it checks the node's HTTP Basic credentials,
//! answers from a table the test changes, and counts calls).
//!
//! An active token opens a session on one node and uses it on the other; its answer is cached
//! (one call per node within `auth.introspection_cache_ttl`), so a token revoked at the
//! authorization server keeps working until then and is refused after. An inactive token, one
//! for another audience, and an endpoint that fails all get 401 `invalid_token`. JWTs are still
//! verified locally, never introspected, and a JWT of the same issuer and subject is the same
//! principal as the opaque token (the session goes on with it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use jsonwebtoken::get_current_timestamp;
use parking_lot::Mutex;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::eventually;
use switchboard_tests::msg;

const T: Duration = Duration::from_secs(10);
const GW: &str = "https://gw.example.test/mcp";
const ISSUER: &str = "https://as.example.test";
const SECRET: &str = "introspection-test-secret-0123456789";
/// `Basic` credentials of client `switchboard` with secret `s3cret`.
const BASIC: &str = "Basic c3dpdGNoYm9hcmQ6czNjcmV0";

/// What the endpoint answers per token, and how often it was asked.
#[derive(Default)]
struct Endpoint {
    answers: Mutex<HashMap<String, Value>>,
    calls: AtomicUsize,
    failing: std::sync::atomic::AtomicBool,
}

async fn introspect(
    State(e): State<Arc<Endpoint>>,
    headers: HeaderMap,
    body: String,
) -> (AxumStatus, axum::Json<Value>) {
    // `application/x-www-form-urlencoded`; the test's tokens need no percent-decoding.
    let form: HashMap<String, String> = body
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    e.calls.fetch_add(1, Ordering::SeqCst);
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(BASIC) {
        return (
            AxumStatus::UNAUTHORIZED,
            axum::Json(json!({"error": "invalid_client"})),
        );
    }
    if e.failing.load(Ordering::SeqCst) {
        return (AxumStatus::INTERNAL_SERVER_ERROR, axum::Json(json!({})));
    }
    assert_eq!(
        form.get("token_type_hint").map(String::as_str),
        Some("access_token")
    );
    let token = form.get("token").cloned().unwrap_or_default();
    let answer = e.answers.lock().get(&token).cloned();
    (
        AxumStatus::OK,
        axum::Json(answer.unwrap_or(json!({"active": false}))),
    )
}

async fn start_endpoint(e: Arc<Endpoint>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/introspect", listener.local_addr().expect("addr"));
    let app = axum::Router::new()
        .route("/introspect", axum::routing::post(introspect))
        .with_state(e);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

fn active(sub: &str, aud: &str) -> Value {
    json!({"active": true, "sub": sub, "iss": ISSUER, "aud": aud, "scope": "mcp:tools",
           "exp": get_current_timestamp() + 600})
}

fn jwt(sub: &str) -> String {
    let claims = json!({"iss": ISSUER, "sub": sub, "aud": GW, "scope": "mcp:tools",
                        "exp": get_current_timestamp() + 600});
    switchboard_tests::jwt::hs256(SECRET, &claims)
}

async fn post(
    c: &McpClient,
    url: &str,
    token: &str,
    body: &Value,
) -> switchboard_tests::client::Reply {
    let h = c
        .post_headers()
        .set("Authorization", &format!("Bearer {token}"));
    c.send(Method::POST, url, &h, Some(body.to_string())).await
}

fn description(reply: &switchboard_tests::client::Reply) -> String {
    reply.header("www-authenticate").unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opaque_tokens_are_introspected_cached_and_revoked_within_the_cache_ttl() {
    let endpoint = Arc::new(Endpoint::default());
    let url = start_endpoint(endpoint.clone()).await;
    let cluster = Cluster::start(
        2,
        ClusterOptions::new()
            .set("auth.resource_url", GW)
            .set("auth.authorization_servers", ISSUER)
            .set("auth.required_scopes", "mcp:tools")
            .set("auth.issuer", ISSUER)
            .set("auth.jwt_hs256_secrets", SECRET)
            .set("auth.introspection_url", &url)
            .set("auth.introspection_client_id", "switchboard")
            .set("auth.introspection_client_secret", "s3cret")
            .set("auth.introspection_cache_ttl", "2s"),
    );
    let urls = cluster.urls();
    {
        let mut answers = endpoint.answers.lock();
        answers.insert("opaque-alice".into(), active("alice", GW));
        answers.insert(
            "opaque-other-aud".into(),
            active("carol", "https://other.example"),
        );
    }
    let calls = || endpoint.calls.load(Ordering::SeqCst);

    // A session on node A, used on node B: one introspection call per node.
    let mut c = McpClient::new();
    let init = msg::init("2025-11-25", json!({}));
    let reply = post(&c, &urls[0], "opaque-alice", &init).await;
    assert_eq!(reply.status, StatusCode::OK);
    c.session_id = reply.session_id();
    c.revision = Some("2025-11-25".into());
    let list = |id: u64| msg::request(id, "tools/list", json!({}));
    for (i, url) in urls.iter().enumerate() {
        let reply = post(&c, url, "opaque-alice", &list(i as u64 + 2)).await;
        assert_eq!(reply.status, StatusCode::OK, "node {i}");
    }
    assert_eq!(calls(), 2, "one call per node, then the cache");

    // The same principal with a JWT (same iss and sub): verified locally, the session goes on.
    let reply = post(&c, &urls[1], &jwt("alice"), &list(9)).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(calls(), 2, "a JWT is not introspected");

    // Inactive, unknown and foreign-audience tokens: 401 invalid_token.
    for (token, why) in [
        ("opaque-nobody", "not active"),
        ("opaque-other-aud", "another audience"),
    ] {
        let reply = post(&McpClient::new(), &urls[0], token, &init).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{token}");
        let challenge = description(&reply);
        assert!(
            challenge.contains("invalid_token") && challenge.contains(why),
            "{challenge}"
        );
    }

    // Revoked at the authorization server: still good from the cache, refused once it lapses.
    endpoint
        .answers
        .lock()
        .insert("opaque-alice".into(), json!({"active": false}));
    let reply = post(&c, &urls[0], "opaque-alice", &list(10)).await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "cached for auth.introspection_cache_ttl"
    );
    eventually("the revoked token refused", T, || async {
        let reply = post(&c, &urls[0], "opaque-alice", &list(11)).await;
        (reply.status == StatusCode::UNAUTHORIZED).then_some(())
    })
    .await;

    // The endpoint failing: 401 saying the token could not be checked (nothing cached).
    endpoint.failing.store(true, Ordering::SeqCst);
    endpoint
        .answers
        .lock()
        .insert("opaque-dave".into(), active("dave", GW));
    let reply = post(&McpClient::new(), &urls[1], "opaque-dave", &init).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert!(
        description(&reply).contains("could not be checked"),
        "{}",
        description(&reply)
    );
    endpoint.failing.store(false, Ordering::SeqCst);
    let reply = post(&McpClient::new(), &urls[1], "opaque-dave", &init).await;
    assert_eq!(reply.status, StatusCode::OK, "not cached: asked again");
}
