//! Assertions shared by the case tests: exact statuses with JSON-RPC error bodies, and "this
//! session is gone everywhere".

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::client::{McpClient, Reply};
use crate::msg;

/// JSON-RPC "Session not found" code the node answers with HTTP 404.
pub const SESSION_NOT_FOUND: i64 = -32001;
/// JSON-RPC parse error.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC invalid request.
pub const INVALID_REQUEST: i64 = -32600;

/// Asserts `body` is a JSON-RPC error object with `code` and returns its message.
pub fn rpc_error(body: &Value, code: i64) -> String {
    assert_eq!(body["jsonrpc"], "2.0", "not a JSON-RPC message: {body}");
    assert_eq!(body["error"]["code"], json!(code), "error code in {body}");
    body["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("error without message: {body}"))
        .to_owned()
}

/// Asserts the status, that no `Mcp-Session-Id` is set, and that the body is a JSON-RPC error
/// with `code` (when given) and a null id. Returns the body.
pub async fn refused(reply: Reply, status: StatusCode, code: Option<i64>, what: &str) -> Value {
    refused_with_id(reply, status, code, &Value::Null, what).await
}

/// [`refused`] with the error's `id` expected to be `id` (null: absent or null). JSON-RPC 2.0 §5:
/// an invalid request whose id could be read is answered with that id.
pub async fn refused_with_id(
    reply: Reply,
    status: StatusCode,
    code: Option<i64>,
    id: &Value,
    what: &str,
) -> Value {
    assert_eq!(reply.status, status, "{what}: status");
    assert_eq!(
        reply.session_id(),
        None,
        "{what}: a refused request must not carry Mcp-Session-Id"
    );
    let body = reply.json().await;
    assert_eq!(body["jsonrpc"], "2.0", "{what}: body {body}");
    assert!(
        body["error"]["code"].is_i64(),
        "{what}: no JSON-RPC error in {body}"
    );
    if let Some(code) = code {
        rpc_error(&body, code);
    }
    if id.is_null() {
        assert!(
            body.get("id").is_none_or(Value::is_null),
            "{what}: id must be null: {body}"
        );
    } else {
        assert_eq!(&body["id"], id, "{what}: id: {body}");
    }
    body
}

/// Asserts the status and that no `Mcp-Session-Id` is set; reads and returns the body as text.
pub async fn refused_plain(reply: Reply, status: StatusCode, what: &str) -> String {
    assert_eq!(reply.status, status, "{what}: status");
    assert_eq!(
        reply.session_id(),
        None,
        "{what}: a refused request must not carry Mcp-Session-Id"
    );
    reply.text().await
}

/// Asserts 404 with `{"jsonrpc":"2.0","id":<id>,"error":{"code":-32001,...}}`, the id being the
/// POSTed request's (JSON-RPC 2.0 §5: the node read it before it looked the session up), `null`
/// for a GET, a DELETE, a notification or a response.
pub async fn session_not_found(reply: Reply, what: &str) {
    let id = reply.sent_id().clone();
    let code = Some(SESSION_NOT_FOUND);
    refused_with_id(reply, StatusCode::NOT_FOUND, code, &id, what).await;
}

/// Asserts that every node answers 404 (-32001) for `client`'s session on POST, GET and DELETE.
pub async fn session_gone_everywhere(client: &McpClient, urls: &[String]) {
    for url in urls {
        let what = format!("POST tools/list on {url} for a gone session");
        session_not_found(client.post(url, &msg::bare(99, "tools/list")).await, &what).await;
        let what = format!("GET on {url} for a gone session");
        session_not_found(client.get_stream(url, None).await, &what).await;
    }
    let url = &urls[0];
    session_not_found(
        client.delete(url).await,
        &format!("DELETE on {url} for a gone session"),
    )
    .await;
}

/// Asserts 202 with an empty body.
pub async fn accepted(reply: Reply, what: &str) {
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{what}: status");
    let body = reply.text().await;
    assert!(
        body.is_empty(),
        "{what}: 202 must have an empty body, got {body:?}"
    );
}

/// Asserts 405 with `Allow: GET, POST, DELETE` and no session header.
pub async fn method_not_allowed(
    client: &McpClient,
    method: Method,
    url: &str,
    origin: Option<&str>,
) {
    let mut headers = client.session_headers();
    if let Some(o) = origin {
        headers = headers
            .set("Origin", o)
            .set("Access-Control-Request-Method", "POST");
    }
    let reply = client.send(method.clone(), url, &headers, None).await;
    let what = format!("{method} {url} (Origin {origin:?})");
    assert_eq!(
        reply.status,
        StatusCode::METHOD_NOT_ALLOWED,
        "{what}: status"
    );
    assert_eq!(
        reply.header("allow").as_deref(),
        Some("GET, POST, DELETE"),
        "{what}: Allow"
    );
    assert_eq!(reply.session_id(), None, "{what}: Mcp-Session-Id");
}

/// Asserts `sid` is 32 lower-case hex characters.
pub fn session_id_shape(sid: &str) {
    let ok = sid.len() == 32
        && sid
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    assert!(
        ok,
        "Mcp-Session-Id must be 32 lower-case hex characters, got {sid:?}"
    );
}
