//! `serve-axum`: the HTTP ceiling. Every POST on `/mcp` gets one small JSON-RPC result with the
//! request's id and an `Mcp-Session-Id` header, whatever the method, so `run` can complete its
//! handshake and loop `tools/call` against it; a POST without an id (a notification) gets
//! `202 Accepted`. The only work per request is reading the `id` out of the body.

use axum::body::Bytes;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde::Deserialize;
use serde_json::Value;

/// The session id every answer carries.
pub const SESSION_ID: &str = "axum-baseline";

/// Only the request id is read; the rest of the message is skipped.
#[derive(Deserialize)]
struct IdOnly {
    id: Option<Value>,
}

/// The router: `POST /mcp` → [`answer`].
pub fn router() -> Router {
    Router::new().route("/mcp", post(answer))
}

/// A tool result with one text block `"x"` (also accepted as an `initialize` result by `run`),
/// with the request's id; 202 for a notification, 400 for a body that is not a JSON object.
async fn answer(body: Bytes) -> Response {
    let Ok(msg) = serde_json::from_slice::<IdOnly>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(id) = msg.id else {
        return StatusCode::ACCEPTED.into_response();
    };
    let text = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":"x"}}],"isError":false}}}}"#,
        id
    );
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (
                header::HeaderName::from_static("mcp-session-id"),
                HeaderValue::from_static(SESSION_ID),
            ),
        ],
        text,
    )
        .into_response()
}
