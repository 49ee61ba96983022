//! The edge's layers, driven through the router without a listener.

use std::sync::Arc;

use axum::body::Body;
use serde_json::Value;
use switchboard_protocol::codes;
use switchboard_store::memory::MemoryStore;
use switchboard_store::StoreConfig;
use switchboard_upstream::demo::DemoUpstream;
use tower::ServiceExt;

use super::*;
use crate::state::AppState;
use crate::NodeConfig;

fn router_with_max_body(max_body_bytes: usize) -> Router {
    let config = NodeConfig {
        max_body_bytes,
        ..NodeConfig::default()
    };
    let store = MemoryStore::new(StoreConfig::default_for("edge"));
    router(AppState::new(config, store, Arc::new(DemoUpstream::new())))
}

fn post(body: Body, length: Option<usize>) -> http::Request<Body> {
    let mut req = http::Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(n) = length {
        req = req.header("content-length", n);
    }
    req.body(body).unwrap()
}

async fn json_rpc_413(response: Response) {
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["error"]["code"], codes::INVALID_REQUEST, "{body}");
    assert!(body["id"].is_null(), "{body}");
}

#[tokio::test]
async fn a_body_declared_too_large_gets_a_json_rpc_413_before_it_is_read() {
    let text = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","pad":"{}"}}"#,
        "x".repeat(200)
    );
    let response = router_with_max_body(64)
        .oneshot(post(Body::from(text.clone()), Some(text.len())))
        .await
        .unwrap();
    json_rpc_413(response).await;
}

#[tokio::test]
async fn a_streamed_body_that_grows_too_large_gets_a_json_rpc_413() {
    let chunks = (0..10).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b' '; 32])));
    let body = Body::from_stream(futures::stream::iter(chunks));
    let response = router_with_max_body(64)
        .oneshot(post(body, None))
        .await
        .unwrap();
    json_rpc_413(response).await;
}

#[tokio::test]
async fn a_method_without_a_route_meets_the_edge_before_its_405() {
    let foreign = http::Request::put("/mcp")
        .header("host", "127.0.0.1")
        .header("origin", "http://evil.example")
        .body(Body::empty())
        .unwrap();
    let response = router_with_max_body(1024).oneshot(foreign).await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    // The 403 carries no `Allow` (axum's method router would add its own list).
    assert_eq!(response.headers().get(http::header::ALLOW), None);
    let plain = http::Request::put("/mcp")
        .header("host", "127.0.0.1")
        .body(Body::empty())
        .unwrap();
    let response = router_with_max_body(1024).oneshot(plain).await.unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let allow = response.headers().get(http::header::ALLOW).unwrap();
    assert_eq!(allow, "GET, POST, DELETE");
}

/// A body that fails while it is read for another cause than its length (hyper's error for
/// a malformed chunk size, here an I/O error) gets 400, not 413 (RFC 9112 §7.1).
#[tokio::test]
async fn a_body_that_is_not_framed_right_gets_400() {
    let chunks = [Err(std::io::Error::other("invalid chunk size line"))];
    let body = Body::from_stream(futures::stream::iter(
        chunks.map(|c: Result<bytes::Bytes, _>| c),
    ));
    let response = router_with_max_body(1024)
        .oneshot(post(body, None))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(response.headers()["connection"], "close");
}

fn preflight(origin: &str) -> http::Request<Body> {
    http::Request::options("/mcp")
        .header("host", "127.0.0.1")
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type, authorization, mcp-session-id, mcp-param-region",
        )
        .body(Body::empty())
        .unwrap()
}

/// Case C39 at the edge: a preflight from an allowed (loopback) origin gets 204 with the
/// CORS headers; a refusal to that origin carries `Access-Control-Allow-Origin` and the
/// exposed headers; a foreign origin's preflight gets 403 with none; an `OPTIONS` that is
/// not a preflight keeps its 405.
#[tokio::test]
async fn allowed_origins_get_cors_and_others_do_not() {
    let origin = "http://localhost:6274";
    let response = router_with_max_body(1024)
        .oneshot(preflight(origin))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let h = response.headers();
    assert_eq!(h["access-control-allow-origin"], origin);
    assert_eq!(h["access-control-allow-methods"], "GET,POST,DELETE");
    let asked = h["access-control-allow-headers"].to_str().unwrap();
    assert!(
        asked.contains("mcp-session-id") && asked.contains("mcp-param-region"),
        "{asked}"
    );
    assert_eq!(h["access-control-max-age"], "7200");
    assert!(h
        .get_all("vary")
        .iter()
        .any(|v| v.to_str().unwrap().contains("origin")));

    let mut refused = post(
        Body::from(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
        None,
    );
    refused
        .headers_mut()
        .insert("origin", origin.parse().unwrap());
    let response = router_with_max_body(1024).oneshot(refused).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let h = response.headers();
    assert_eq!(h["access-control-allow-origin"], origin);
    let exposed = h["access-control-expose-headers"].to_str().unwrap();
    for name in crate::edge::cors::EXPOSED {
        assert!(exposed.contains(name), "{name} in {exposed}");
    }

    let response = router_with_max_body(1024)
        .oneshot(preflight("https://evil.example"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());

    let plain = http::Request::options("/mcp")
        .header("host", "127.0.0.1")
        .header("origin", origin)
        .body(Body::empty())
        .unwrap();
    let response = router_with_max_body(1024).oneshot(plain).await.unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(response.headers()["access-control-allow-origin"], origin);
}

#[tokio::test]
async fn a_body_within_the_limit_reaches_the_handler() {
    // No session and no `initialize`: the handler's own 400 shows the edge let it through.
    let text = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let response = router_with_max_body(1024)
        .oneshot(post(Body::from(text), Some(text.len())))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}
