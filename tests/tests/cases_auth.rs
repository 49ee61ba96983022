//! Case C34 (authorization discovery) across two nodes with real HS256 tokens: every
//! unauthenticated request gets the same RFC 9728 challenge before its body is read, the
//! protected-resource metadata is served identically by every node at the path-inserted and root
//! locations, bad tokens get `invalid_token`, missing scopes `insufficient_scope`, and a session
//! is bound to the principal (`iss` + `sub`) that created it.

use std::time::Duration;

use jsonwebtoken::{encode, get_current_timestamp, Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::json;
use switchboard_tests::client::{Headers, McpClient, Reply};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::expect;
use switchboard_tests::msg;

const T: Duration = Duration::from_secs(10);
/// `@GW` of the case: the public URL; the nodes still listen on loopback.
const GW: &str = "https://gw.example.test/servers/foo/mcp";
const ISSUER: &str = "https://as.example.test/tenant";
const SECRET: &str = "c34-test-secret-0123456789abcdef-xyz";
const METADATA_PATH: &str = "/.well-known/oauth-protected-resource/servers/foo/mcp";
const METADATA_URL: &str =
    "https://gw.example.test/.well-known/oauth-protected-resource/servers/foo/mcp";
const DOCUMENT: &str = r#"{"resource":"https://gw.example.test/servers/foo/mcp","authorization_servers":["https://as.example.test/tenant"],"scopes_supported":["mcp:tools","mcp:admin"],"bearer_methods_supported":["header"]}"#;

fn challenge() -> String {
    format!(r#"Bearer resource_metadata="{METADATA_URL}", scope="mcp:tools""#)
}

fn cluster() -> Cluster {
    Cluster::start(
        2,
        ClusterOptions::new()
            .set("auth.resource_url", GW)
            .set("auth.authorization_servers", ISSUER)
            .set("auth.scopes_supported", "mcp:tools,mcp:admin")
            .set("auth.required_scopes", "mcp:tools")
            .set("auth.issuer", ISSUER)
            .set("auth.jwt_hs256_secrets", SECRET),
    )
}

fn token(sub: &str, scope: &str, exp_in: i64) -> String {
    let claims = json!({
        "iss": ISSUER, "sub": sub, "aud": GW, "scope": scope,
        "exp": get_current_timestamp() as i64 + exp_in,
    });
    let key = EncodingKey::from_secret(SECRET.as_bytes()).expect("key");
    encode(&Header::new(Algorithm::HS256), &claims, &key).expect("token")
}

fn with_token(h: Headers, token: Option<&str>) -> Headers {
    match token {
        Some(t) => h.set("Authorization", &format!("Bearer {t}")),
        None => h,
    }
}

async fn post(c: &McpClient, url: &str, body: &str, token: Option<&str>) -> Reply {
    let h = with_token(c.post_headers(), token);
    c.send(Method::POST, url, &h, Some(body.to_owned())).await
}

async fn get(c: &McpClient, url: &str, token: Option<&str>, last: Option<&str>) -> Reply {
    let mut h = with_token(
        c.session_headers().set("Accept", "text/event-stream"),
        token,
    );
    if let Some(id) = last {
        h = h.set("Last-Event-ID", id);
    }
    c.send(Method::GET, url, &h, None).await
}

async fn delete(c: &McpClient, url: &str, token: Option<&str>) -> Reply {
    let h = with_token(c.session_headers(), token);
    c.send(Method::DELETE, url, &h, None).await
}

/// Asserts `status`, `WWW-Authenticate` and a JSON-RPC error body (id null); returns the header.
async fn challenged(reply: Reply, status: StatusCode, what: &str) -> String {
    let header = reply
        .header("www-authenticate")
        .unwrap_or_else(|| panic!("{what}: no WWW-Authenticate"));
    expect::refused(reply, status, Some(expect::INVALID_REQUEST), what).await;
    header
}

async fn plain_get(url: &str) -> (StatusCode, String) {
    let reply = reqwest::get(url).await.expect("GET");
    let status = reply.status();
    (status, reply.text().await.expect("body"))
}

/// C34 steps 1, 2, 4, 5, 6: challenges and metadata, identical on both nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c34_challenges_and_metadata_are_exact_and_identical_on_every_node() {
    let cluster = cluster();
    let c = McpClient::new();
    let init = msg::init("2025-06-18", json!({})).to_string();
    let mut seen = Vec::new();
    for (i, url) in cluster.urls().iter().enumerate() {
        // Step 1: no token, empty body and INIT → 401 before the body is parsed.
        for body in ["", init.as_str()] {
            let what = format!("node {i}: POST {body:?} without a token");
            let h = challenged(
                post(&c, url, body, None).await,
                StatusCode::UNAUTHORIZED,
                &what,
            );
            assert_eq!(h.await, challenge(), "{what}");
        }
        // Step 5: GET and DELETE without a token → the same challenge.
        let h = challenged(
            get(&c, url, None, None).await,
            StatusCode::UNAUTHORIZED,
            "GET",
        );
        assert_eq!(h.await, challenge());
        let h = challenged(
            delete(&c, url, None).await,
            StatusCode::UNAUTHORIZED,
            "DELETE",
        );
        assert_eq!(h.await, challenge());
        // Step 4: invalid and expired tokens → invalid_token; lacking scope → 403.
        let bad = post(&c, url, &init, Some("not-a-jwt")).await;
        let h = challenged(bad, StatusCode::UNAUTHORIZED, "garbage token").await;
        assert!(
            h.starts_with(&format!(
                r#"Bearer error="invalid_token", scope="mcp:tools", resource_metadata="{METADATA_URL}", error_description=""#
            )),
            "{h}"
        );
        let expired = token("alice", "mcp:tools", -600);
        let h = post(&c, url, &init, Some(&expired)).await;
        let h = challenged(h, StatusCode::UNAUTHORIZED, "expired token").await;
        assert!(
            h.contains(r#"error="invalid_token""#) && h.contains("expired"),
            "{h}"
        );
        let unscoped = token("alice", "mcp:admin", 300);
        let h = post(&c, url, &init, Some(&unscoped)).await;
        let h = challenged(h, StatusCode::FORBIDDEN, "token lacking scope").await;
        assert_eq!(
            h,
            format!(
                r#"Bearer error="insufficient_scope", scope="mcp:tools", resource_metadata="{METADATA_URL}""#
            )
        );
        // Step 2: the metadata, path-inserted and root, same bytes; no token needed.
        let base = cluster.node(i).base_url();
        let inserted = plain_get(&format!("{base}{METADATA_PATH}")).await;
        assert_eq!(inserted, (StatusCode::OK, DOCUMENT.to_owned()), "node {i}");
        let root = plain_get(&format!("{base}/.well-known/oauth-protected-resource")).await;
        assert_eq!(root, inserted, "node {i}: root metadata");
        let with_slash = plain_get(&format!("{base}{METADATA_PATH}/")).await;
        assert_eq!(
            with_slash.0,
            StatusCode::NOT_FOUND,
            "no trailing-slash alias"
        );
        // Step 3 is not ours: the authorization server's metadata is not proxied.
        let as_meta = format!("{base}/.well-known/oauth-authorization-server/tenant");
        assert_eq!(plain_get(&as_meta).await.0, StatusCode::NOT_FOUND);
        seen.push((inserted.1, challenge()));
    }
    // Step 6: every node answers the same.
    assert_eq!(seen[0], seen[1]);
}

/// A session belongs to the principal that created it: another valid token gets 404 (-32001)
/// everywhere, the owner's token works on any node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c34_a_session_is_bound_to_its_principal_on_every_node() {
    let cluster = cluster();
    let (a, b) = (cluster.url(0), cluster.url(1));
    let alice = token("alice", "mcp:tools", 300);
    let bob = token("bob", "mcp:tools", 300);
    let mut c = McpClient::new();
    let init = msg::init("2025-11-25", json!({})).to_string();
    let reply = post(&c, &a, &init, Some(&alice)).await;
    let sid = reply.session_id().expect("Mcp-Session-Id");
    let answer = reply.answer(json!(1), T).await;
    let revision = answer.response["result"]["protocolVersion"]
        .as_str()
        .expect("revision")
        .to_owned();
    c = c.with_session(Some(&sid), Some(&revision));
    let inited = msg::inited().to_string();
    expect::accepted(post(&c, &b, &inited, Some(&alice)).await, "INITED on b").await;

    let list = msg::bare(2, "tools/list").to_string();
    let listed = post(&c, &b, &list, Some(&alice))
        .await
        .answer(json!(2), T)
        .await;
    assert!(
        listed.response["result"]["tools"].is_array(),
        "{:?}",
        listed.response
    );

    for url in [&a, &b] {
        let what = format!("bob's POST on {url}");
        expect::session_not_found(post(&c, url, &list, Some(&bob)).await, &what).await;
        let what = format!("bob's GET on {url}");
        expect::session_not_found(get(&c, url, Some(&bob), None).await, &what).await;
        let what = format!("bob's resume on {url}");
        let last = "get_0-0";
        expect::session_not_found(get(&c, url, Some(&bob), Some(last)).await, &what).await;
        let what = format!("bob's DELETE on {url}");
        expect::session_not_found(delete(&c, url, Some(&bob)).await, &what).await;
    }
    // The session survived bob's DELETE: alice still uses it on node a, then ends it on b.
    let listed = post(
        &c,
        &a,
        &msg::bare(3, "tools/list").to_string(),
        Some(&alice),
    )
    .await
    .answer(json!(3), T)
    .await;
    assert!(listed.response["result"]["tools"].is_array());
    let ended = delete(&c, &b, Some(&alice)).await;
    assert_eq!(ended.status, StatusCode::NO_CONTENT);
    let gone = post(&c, &a, &list, Some(&alice)).await;
    expect::session_not_found(gone, "after alice's DELETE").await;
}

/// A stranger's requests to a legacy (2024-11-05 HTTP+SSE) session are "not found" and leave no
/// trace in it: after 70 of bob's POSTs to alice's `/messages` endpoint (more than the session's
/// in-flight cap of 64), alice's own request with one of bob's ids is answered on her stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c34_a_stranger_leaves_no_trace_in_a_legacy_session() {
    let cluster = cluster();
    let alice = token("alice", "mcp:tools", 300);
    let bob = token("bob", "mcp:tools", 300);
    let base = |i: usize| cluster.url(i).trim_end_matches("/mcp").to_owned();
    let http = reqwest::Client::new();
    let resp = http
        .get(format!("{}/sse", base(0)))
        .header("accept", "text/event-stream")
        .bearer_auth(&alice)
        .send()
        .await
        .expect("GET /sse");
    assert_eq!(resp.status(), StatusCode::OK);
    let mut stream = switchboard_tests::sse::SseStream::new(resp, std::time::Instant::now());
    let endpoint = stream.next_event(T).await.expect("the endpoint event");
    let path = endpoint.data.expect("the POST path");
    let post_as = |who: &str, i: usize, body: serde_json::Value| {
        http.post(format!("{}{path}", base(i)))
            .header("content-type", "application/json")
            .bearer_auth(who)
            .body(body.to_string())
            .send()
    };
    let init = msg::init("2024-11-05", json!({}));
    assert_eq!(post_as(&alice, 1, init).await.expect("POST").status(), 202);
    let (_, answer) = stream.next_message(T).await.expect("initialize answer");
    assert!(answer["result"]["protocolVersion"].is_string(), "{answer}");
    for i in 0..70 {
        let call = msg::bare(1000 + i, "tools/list");
        let status = post_as(&bob, i as usize % 2, call)
            .await
            .expect("POST")
            .status();
        assert_eq!(status, StatusCode::NOT_FOUND, "bob's request {i}");
    }
    let mine = msg::bare(1000, "tools/list");
    assert_eq!(post_as(&alice, 1, mine).await.expect("POST").status(), 202);
    let (_, answer) = stream.next_message(T).await.expect("alice's answer");
    assert_eq!(answer["id"], 1000, "{answer}");
    assert!(answer["result"]["tools"].is_array(), "{answer}");
}
