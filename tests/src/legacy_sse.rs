//! A client of the legacy HTTP+SSE transport (MCP 2024-11-05, basic/transports, HTTP with SSE):
//! the SSE stream with its `endpoint` event, and the POSTs whose answers arrive on it.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::sse::SseStream;

const T: Duration = Duration::from_secs(10);

/// Opens `GET <base>/sse` and reads the `endpoint` event: the stream and the POST URL.
pub async fn open(http: &reqwest::Client, base: &str) -> (SseStream, String) {
    let resp = http
        .get(format!("{base}/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("GET /sse");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut stream = SseStream::new(resp, Instant::now());
    let first = stream.next_event(T).await.expect("the endpoint event");
    assert_eq!(first.event.as_deref(), Some("endpoint"), "{first:?}");
    assert_eq!(first.id, None, "2024-11-05 streams carry no event ids");
    let path = first.data.expect("endpoint data");
    assert!(path.starts_with("/messages?sessionId="), "{path}");
    (stream, path)
}

/// Opens the stream on `base` and initializes its session there (2024-11-05, no client
/// capabilities): `initialize` answered with id 1 on the stream, then `notifications/initialized`
/// (202). The stream and the POST path.
pub async fn open_session(http: &reqwest::Client, base: &str) -> (SseStream, String) {
    let (mut stream, path) = open(http, base).await;
    let url = format!("{base}{path}");
    let init = crate::msg::init("2024-11-05", serde_json::json!({}));
    assert_eq!(exchange(http, &mut stream, &url, init).await["id"], 1);
    let inited = crate::msg::inited().to_string();
    assert_eq!(post(http, &url, &inited).await.0, 202, "initialized");
    (stream, path)
}

/// POSTs `body` to `url` as JSON: the status and the body text.
pub async fn post(http: &reqwest::Client, url: &str, body: &str) -> (u16, String) {
    let resp = http
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .expect("POST");
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap_or_default())
}

/// POSTs `body` to `url` (expecting 202 and no body) and reads the next `message` event.
pub async fn exchange(
    http: &reqwest::Client,
    stream: &mut SseStream,
    url: &str,
    body: Value,
) -> Value {
    let (status, text) = post(http, url, &body.to_string()).await;
    assert_eq!((status, text.as_str()), (202, ""), "POST {body}");
    next_message(stream).await
}

/// The next `message` event of `stream` (it carries no event id in 2024-11-05), as JSON.
pub async fn next_message(stream: &mut SseStream) -> Value {
    let (ev, m) = stream.next_message(T).await.expect("a message event");
    assert_eq!(ev.event.as_deref(), Some("message"), "{ev:?}");
    assert_eq!(ev.id, None);
    m
}
