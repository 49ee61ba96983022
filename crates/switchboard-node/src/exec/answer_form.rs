//! When and in which form a running request's answer goes out, the one rule of both eras (a
//! session-era POST and a 2026-07-28 request): the forms the client's `Accept` allows are the
//! edge's ([`Answers`], `edge::header_checks`); the wait for the first message, and an answer
//! that is ready at once, are here, next to the call.

use axum::response::Response;
use http::StatusCode;
use serde_json::Value;

use crate::edge::header_checks::Answers;
use crate::streams::sse;

impl Answers {
    /// An answer that is ready now: a JSON body, or for [`Answers::SseOnly`] (when `status` is
    /// 200) an SSE stream of that one message. Refusals with another status stay JSON, like
    /// every HTTP error of the endpoint.
    pub fn ready(self, status: StatusCode, body: Value) -> Response {
        if self == Answers::SseOnly && status == StatusCode::OK {
            let body = sse::data_stream(futures::stream::iter([body]));
            return sse::body_response(body, &[]);
        }
        crate::edge::json_body::json_response(status, body)
    }

    /// How long a running request's answer is waited for before its form is chosen, the one
    /// rule of both eras (a session-era POST and a 2026-07-28 request): an SSE-only client
    /// gets a stream at once ([`Waited::Stream`], `first` not polled); otherwise `first` (the
    /// request's first message) is awaited for at most `sse_after` ([`Waited::Came`]), after
    /// which the caller streams it, or for a JSON-only client keeps waiting ([`Waited::Late`]).
    pub async fn first_within<F: std::future::Future + Unpin>(
        self,
        sse_after: std::time::Duration,
        first: &mut F,
    ) -> Waited<F::Output> {
        if self == Answers::SseOnly {
            return Waited::Stream;
        }
        tokio::select! {
            came = first => Waited::Came(came),
            () = tokio::time::sleep(sse_after) => Waited::Late,
        }
    }
}

/// What [`Answers::first_within`] saw.
#[derive(Debug)]
pub enum Waited<T> {
    /// The client takes only SSE: stream now.
    Stream,
    /// The first message came within `sse_after`.
    Came(T),
    /// `sse_after` passed first.
    Late,
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header;

    #[test]
    fn ready_answers_follow_the_form() {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {}});
        let sse = Answers::SseOnly.ready(StatusCode::OK, body.clone());
        assert_eq!(sse.headers()[header::CONTENT_TYPE], "text/event-stream");
        let refusal = Answers::SseOnly.ready(StatusCode::NOT_FOUND, body.clone());
        assert_eq!(refusal.headers()[header::CONTENT_TYPE], "application/json");
        let json = Answers::JsonOnly.ready(StatusCode::OK, body);
        assert_eq!(json.headers()[header::CONTENT_TYPE], "application/json");
    }
}
