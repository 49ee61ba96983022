//! The id of the request a refusal answers. JSON-RPC 2.0 §5: an error response's `id` is the
//! request's id; it is `null` only when the id could not be read (the body is not JSON, or not a
//! request with an id). So once a handler has parsed a request, every refusal of it carries its
//! id: the layers' too (the fence's 503 to a request that waited for its answer, `app.rs`), and
//! the handlers' own [`HttpError`]s (a store error's 503, a session not found, the stateless
//! path's store error). A refusal made before the body is read (Origin, the fence at once,
//! authentication, header checks, the body's size and deadline) has no id to carry: `null`.
//!
//! The edge gives each request a [`KnownId`] ([`answer_with_id`]); the handler that parses the
//! body fills it in ([`KnownId::read`]); an [`HttpError`] response built below the layer without
//! an id ([`HttpError::into_response`] marks it) is built again with the request's id on its way
//! out. Each refusal's status, code and headers stay declared once, in `edge::error`.

use std::sync::{Arc, OnceLock};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use switchboard_protocol::{Body, Message, RequestId};

use super::error::{HttpError, WithoutId};

/// The id of the request being served, once its handler has read it (shared between the edge
/// and the handler as a request extension).
#[derive(Clone, Debug, Default)]
pub struct KnownId(Arc<OnceLock<RequestId>>);

impl KnownId {
    /// Notes the id of `body` when it is one request (a batch, a notification or a response has
    /// no single request id to answer with).
    pub fn read(&self, body: &Body) {
        if let Body::Single(Message::Request { id, .. }) = body {
            let _ = self.0.set(id.clone());
        }
    }

    /// The id, once read.
    pub fn get(&self) -> Option<&RequestId> {
        self.0.get()
    }
}

/// The edge's layer: gives the request its [`KnownId`], and answers a refusal made without the
/// id with the id, when the handler read one.
pub(crate) async fn answer_with_id(mut req: Request, next: Next) -> Response {
    let known = KnownId::default();
    req.extensions_mut().insert(known.clone());
    let response = next.run(req).await;
    let refused: Option<&HttpError> = response.extensions().get::<WithoutId>().map(|w| &w.0);
    match (known.get(), refused) {
        (Some(id), Some(refusal)) => refusal.clone().answering(Some(id)),
        _ => response,
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body as HttpBody;
    use axum::routing::post;
    use axum::{Extension, Router};
    use serde_json::Value;
    use tower::ServiceExt;

    use super::*;

    /// A handler that reads its body as a POST does, then fails with `refusal`.
    fn app(refusal: HttpError) -> Router {
        let handler = move |Extension(known): Extension<KnownId>, body: String| {
            let refusal = refusal.clone();
            async move {
                if let Ok(parsed) = Body::parse(body.as_bytes()) {
                    known.read(&parsed);
                }
                refusal
            }
        };
        Router::new()
            .route("/", post(handler))
            .layer(axum::middleware::from_fn(answer_with_id))
    }

    async fn id_of(refusal: HttpError, body: &str) -> (u16, Value) {
        let req = http::Request::post("/")
            .body(HttpBody::from(body.to_owned()))
            .unwrap();
        let response = app(refusal).oneshot(req).await.unwrap();
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let json: Value = serde_json::from_slice(&bytes).unwrap();
        (status, json["id"].clone())
    }

    #[tokio::test]
    async fn a_refusal_after_the_parse_carries_the_requests_id() {
        let request = r#"{"jsonrpc":"2.0","id":"r-7","method":"tools/list"}"#;
        let store = HttpError::Store("down".into());
        assert_eq!(id_of(store.clone(), request).await, (503, "r-7".into()));
        let numeric = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
        assert_eq!(
            id_of(HttpError::UnknownSession, numeric).await,
            (404, 7.into())
        );
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(id_of(store.clone(), note).await, (503, Value::Null));
        let batch = format!("[{request}]");
        assert_eq!(id_of(store.clone(), &batch).await, (503, Value::Null));
        assert_eq!(id_of(store, "{not json").await, (503, Value::Null));
    }
}
