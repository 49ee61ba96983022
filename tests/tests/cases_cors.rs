//! Case C39 (issue 35): browser clients. Three nodes on one Redis with authorization on,
//! `session.max_sessions_per_principal = 1`, `http.max_body = 64KiB` and
//! `session.max_sessions = 3`. A page's origin
//! (`http://localhost:6274`, loopback, allowed by default) gets a 204 preflight on every node
//! without a session being made, and `Access-Control-Allow-Origin` with the exposed headers on
//! every answer: 200 JSON and SSE, 202, 400, 401, 403, 404, 405, 406, 413, 415, 429 and 503. A
//! foreign origin gets 403 with no CORS header; the RFC 9728 document is readable from any
//! origin; the legacy SSE stream carries the headers too.
//!
//! Before issue 35 the preflight got 405 and no answer carried an `Access-Control-*` header.

use jsonwebtoken::get_current_timestamp;
use reqwest::{Method, StatusCode};
use serde_json::json;
use switchboard_tests::client::{Headers, McpClient, Reply};
use switchboard_tests::cluster::{Cluster, ClusterOptions};

const ORIGIN: &str = "http://localhost:6274";
const GW: &str = "https://gw.example.test/mcp";
const ISSUER: &str = "https://as.example.test";
const SECRET: &str = "c39-test-secret-0123456789abcdef-xyz";
const ASKED: &str = "content-type, accept, authorization, mcp-session-id, mcp-protocol-version, \
                     last-event-id";

fn cluster() -> Cluster {
    Cluster::start(
        3,
        ClusterOptions::new()
            .set("auth.resource_url", GW)
            .set("auth.authorization_servers", ISSUER)
            .set("auth.scopes_supported", "mcp:tools")
            .set("auth.required_scopes", "mcp:tools")
            .set("auth.issuer", ISSUER)
            .set("auth.jwt_hs256_secrets", SECRET)
            .set("session.max_sessions_per_principal", 1)
            .set("http.max_body", "64KiB")
            .set("session.max_sessions", 3),
    )
}

fn token(scope: &str) -> String {
    token_of("page", scope)
}

fn token_of(sub: &str, scope: &str) -> String {
    let claims = json!({
        "iss": ISSUER, "sub": sub, "aud": GW, "scope": scope,
        "exp": get_current_timestamp() as i64 + 600,
    });
    switchboard_tests::jwt::hs256(SECRET, &claims)
}

/// A request as the page's `fetch` sends it: with its `Origin` and the token.
fn from_page(h: Headers, token: &str) -> Headers {
    h.set("Origin", ORIGIN)
        .set("Authorization", &format!("Bearer {token}"))
}

/// The answer carries the CORS headers a page needs to read it.
fn readable(reply: &Reply, what: &str) {
    assert_eq!(
        reply.header("access-control-allow-origin").as_deref(),
        Some(ORIGIN),
        "{what} ({}): Access-Control-Allow-Origin",
        reply.status
    );
    let exposed = reply
        .header("access-control-expose-headers")
        .unwrap_or_default()
        .to_ascii_lowercase();
    for name in [
        "mcp-session-id",
        "mcp-protocol-version",
        "www-authenticate",
        "retry-after",
    ] {
        assert!(exposed.contains(name), "{what}: {name} exposed ({exposed})");
    }
}

async fn send(c: &McpClient, method: Method, url: &str, h: &Headers, body: &str) -> Reply {
    let body = (!body.is_empty()).then(|| body.to_owned());
    c.send(method, url, h, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c39_a_page_on_an_allowed_origin_can_read_every_answer() {
    let cluster = cluster();
    let urls = cluster.urls();
    let anonymous = McpClient::new();

    // Preflights on every node: 204, nothing made.
    for url in &urls {
        let h = Headers::default()
            .set("Origin", ORIGIN)
            .set("Access-Control-Request-Method", "POST")
            .set("Access-Control-Request-Headers", ASKED);
        let reply = anonymous.send(Method::OPTIONS, url, &h, None).await;
        assert_eq!(reply.status, StatusCode::NO_CONTENT, "preflight on {url}");
        assert_eq!(
            reply.header("access-control-allow-origin").as_deref(),
            Some(ORIGIN)
        );
        let methods = reply.header("access-control-allow-methods").unwrap();
        for m in ["GET", "POST", "DELETE"] {
            assert!(methods.contains(m), "{methods}");
        }
        let allowed = reply.header("access-control-allow-headers").unwrap();
        for name in ASKED.split(", ") {
            assert!(allowed.contains(name), "{name} in {allowed}");
        }
        let vary = reply
            .header("vary")
            .unwrap_or_default()
            .to_ascii_lowercase();
        assert!(vary.contains("origin"), "{vary}");
        assert!(reply.header("access-control-max-age").is_some());
    }
    assert!(cluster.session_ids_in_redis().is_empty(), "no session made");

    let wide = token("mcp:tools");
    let mut page = McpClient::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "page", "version": "0"}}})
    .to_string();

    // 401 without a token, 403 with one lacking the required scope.
    let h = page.post_headers().set("Origin", ORIGIN);
    let reply = send(&page, Method::POST, &urls[0], &h, &init).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    readable(&reply, "401");
    let h = from_page(page.post_headers(), &token("other"));
    let reply = send(&page, Method::POST, &urls[1], &h, &init).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    readable(&reply, "403 (scope)");

    // 200 JSON: the session id can be read.
    let h = from_page(page.post_headers(), &wide);
    let reply = send(&page, Method::POST, &urls[2], &h, &init).await;
    assert_eq!(reply.status, StatusCode::OK);
    readable(&reply, "200 initialize");
    let sid = reply.session_id().expect("Mcp-Session-Id");
    page = page.with_session(Some(&sid), Some("2025-11-25"));

    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let h = from_page(page.post_headers(), &wide);
    let reply = send(&page, Method::POST, &urls[0], &h, initialized).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    readable(&reply, "202");

    let sse = from_page(page.session_headers(), &wide).set("Accept", "text/event-stream");
    let reply = send(&page, Method::GET, &urls[1], &sse, "").await;
    assert_eq!(reply.status, StatusCode::OK);
    readable(&reply, "200 SSE");
    drop(reply);

    let add = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "add", "arguments": {"a": 1, "b": 2}}})
        .to_string()
    };
    let reply = send(&page, Method::POST, &urls[2], &h, &add(2)).await;
    assert_eq!(reply.status, StatusCode::OK);
    readable(&reply, "200 call");
    // 429: the page's principal may hold one session.
    let h2 = from_page(McpClient::new().post_headers(), &wide);
    let reply = send(&page, Method::POST, &urls[0], &h2, &init).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    readable(&reply, "429");

    let refusals: Vec<(StatusCode, Headers, Method, String)> = vec![
        (
            StatusCode::BAD_REQUEST,
            from_page(McpClient::new().post_headers(), &wide),
            Method::POST,
            add(4),
        ),
        (
            StatusCode::NOT_FOUND,
            h.clone().set("Mcp-Session-Id", "no-such-session"),
            Method::POST,
            add(5),
        ),
        (
            StatusCode::METHOD_NOT_ALLOWED,
            from_page(Headers::default(), &wide)
                .set("Accept", "text/event-stream")
                .set("MCP-Protocol-Version", "2026-07-28"),
            Method::GET,
            String::new(),
        ),
        (
            StatusCode::NOT_ACCEPTABLE,
            h.clone().set("Accept", "text/plain"),
            Method::POST,
            add(6),
        ),
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            h.clone(),
            Method::POST,
            format!(r#"{{"pad":"{}"}}"#, "x".repeat(70_000)),
        ),
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            h.clone().set("Content-Type", "text/plain"),
            Method::POST,
            add(7),
        ),
    ];
    for (i, (status, headers, method, body)) in refusals.into_iter().enumerate() {
        let reply = send(&page, method, &urls[i % 3], &headers, &body).await;
        assert_eq!(reply.status, status);
        readable(&reply, status.as_str());
    }

    // 503 at the session cap (3): the page's session and two of other principals.
    for (i, url) in urls.iter().enumerate() {
        let mut other = McpClient::new();
        let h = from_page(
            other.post_headers(),
            &token_of(&format!("other-{i}"), "mcp:tools"),
        );
        let reply = send(&other, Method::POST, url, &h, &init).await;
        if i < 2 {
            assert_eq!(reply.status, StatusCode::OK);
            other.session_id = reply.session_id();
            continue;
        }
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
        readable(&reply, "503");
    }

    // A foreign origin: 403, no CORS header, preflight or not.
    for method in [Method::OPTIONS, Method::POST] {
        let h = from_page(page.post_headers(), &wide)
            .set("Origin", "https://evil.example.test")
            .set("Access-Control-Request-Method", "POST");
        let reply = send(&page, method.clone(), &urls[1], &h, &add(8)).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{method}");
        assert!(reply.header("access-control-allow-origin").is_none());
    }

    // The RFC 9728 document, from any origin, without a token.
    let metadata = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        cluster.node(0).base_url()
    );
    let any = "https://any.example.test";
    let reply = anonymous
        .send(
            Method::GET,
            &metadata,
            &Headers::default().set("Origin", any),
            None,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        reply.header("access-control-allow-origin").as_deref(),
        Some(any)
    );

    // The legacy HTTP+SSE stream (its own session: the cap is reached, so first end one).
    let h = from_page(page.session_headers(), &wide);
    let reply = send(&page, Method::DELETE, &urls[2], &h, "").await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT);
    readable(&reply, "204 DELETE");
    let legacy = format!("{}/sse", cluster.node(1).base_url());
    let h = from_page(Headers::default().set("Accept", "text/event-stream"), &wide);
    let reply = anonymous.send(Method::GET, &legacy, &h, None).await;
    assert_eq!(reply.status, StatusCode::OK);
    readable(&reply, "legacy SSE");
}
