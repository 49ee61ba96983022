//! The tools that send requests to the client: sample, elicit, list_roots.

use serde_json::{json, Value};
use switchboard_protocol::codes;

use super::{assert_tool_error, call, ctx, text, FakePeer, Reply};
use crate::upstream::PeerError;

/// A JSON-RPC success response carrying `result`.
fn ok(result: Value) -> Reply {
    Reply::Answer(json!({"jsonrpc": "2.0", "id": "srv-1", "result": result}))
}

#[tokio::test]
async fn sample_returns_the_clients_answer() {
    let peer = FakePeer::answering(|_, _| {
        ok(
            json!({"role": "assistant", "content": {"type": "text", "text": "Paris"},
                  "model": "fake-1", "stopReason": "endTurn"}),
        )
    });
    let result = call(
        "sample",
        json!({"prompt": "Capital of France?"}),
        ctx(&peer, None),
    )
    .await
    .unwrap();
    assert_eq!(result["isError"], false);
    assert_eq!(text(&result), "Paris");
    assert_eq!(
        result["structuredContent"],
        json!({"text": "Paris", "model": "fake-1", "stopReason": "endTurn"})
    );
    let requests = peer.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].0, "sampling/createMessage");
    assert_eq!(
        requests[0].1,
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}],
               "maxTokens": 256})
    );
}

#[tokio::test]
async fn sample_passes_max_tokens_and_joins_content_arrays() {
    let peer = FakePeer::answering(|_, _| {
        ok(json!({"role": "assistant", "model": "m", "content": [
            {"type": "text", "text": "one"}, {"type": "image", "data": "", "mimeType": "image/png"},
            {"type": "text", "text": "two"}
        ]}))
    });
    let result = call(
        "sample",
        json!({"prompt": "p", "max_tokens": 10}),
        ctx(&peer, None),
    )
    .await
    .unwrap();
    assert_eq!(text(&result), "one\ntwo");
    assert_eq!(peer.requests()[0].1["maxTokens"], 10);
}

#[tokio::test]
async fn sample_without_text_is_a_tool_error() {
    let peer = FakePeer::answering(|_, _| {
        ok(
            json!({"role": "assistant", "model": "m", "content": {"type": "image", "data": "", "mimeType": "image/png"}}),
        )
    });
    let result = call("sample", json!({"prompt": "p"}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "no text content");
}

#[tokio::test]
async fn sample_reports_the_clients_error() {
    let peer = FakePeer::answering(|_, _| {
        Reply::Answer(
            json!({"jsonrpc": "2.0", "id": "srv-1", "error": {"code": -1, "message": "User rejected sampling request"}}),
        )
    });
    let result = call("sample", json!({"prompt": "p"}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(
        &result,
        "the client answered sampling/createMessage with error -1: User rejected sampling request",
    );
}

#[tokio::test]
async fn sample_reports_peer_failures() {
    let peer = FakePeer::answering(|_, _| Reply::Fail(PeerError::MissingCapability("sampling")));
    let result = call("sample", json!({"prompt": "p"}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(
        &result,
        "sampling/createMessage failed: the client did not declare the `sampling` capability",
    );
    let peer = FakePeer::answering(|_, _| Reply::Fail(PeerError::Timeout(30_000)));
    let result = call("sample", json!({"prompt": "p"}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "did not answer within 30000 ms");
    let peer = FakePeer::answering(|_, _| Reply::Answer(json!({"jsonrpc": "2.0", "id": 1})));
    let result = call("sample", json!({"prompt": "p"}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "neither `result` nor `error`");
}

#[tokio::test]
async fn a_cancelled_peer_request_aborts_the_call() {
    let peer = FakePeer::answering(|_, _| Reply::Fail(PeerError::Cancelled));
    let err = call("list_roots", json!({}), ctx(&peer, None))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::REQUEST_ABORTED);
}

#[tokio::test(start_paused = true)]
async fn cancel_while_waiting_for_the_client_stops_promptly() {
    let peer = FakePeer::answering(|_, _| Reply::Hang);
    let c = ctx(&peer, None);
    let cancel = c.cancel.clone();
    let task = tokio::spawn(call("sample", json!({"prompt": "p"}), c));
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert!(!task.is_finished());
    cancel.cancel();
    assert_eq!(
        task.await.unwrap().unwrap_err().code,
        codes::REQUEST_ABORTED
    );
}

#[tokio::test]
async fn elicit_returns_action_and_content() {
    let peer =
        FakePeer::answering(|_, _| ok(json!({"action": "accept", "content": {"answer": "blue"}})));
    let result = call(
        "elicit",
        json!({"message": "Favourite colour?"}),
        ctx(&peer, None),
    )
    .await
    .unwrap();
    assert_eq!(
        text(&result),
        r#"{"action":"accept","content":{"answer":"blue"}}"#
    );
    assert_eq!(
        result["structuredContent"],
        json!({"action": "accept", "content": {"answer": "blue"}})
    );
    let (method, params) = &peer.requests()[0];
    assert_eq!(method, "elicitation/create");
    assert_eq!(params["message"], "Favourite colour?");
    assert_eq!(params["requestedSchema"]["type"], "object");
    assert_eq!(
        params["requestedSchema"]["properties"]["answer"]["type"],
        "string"
    );
}

#[tokio::test]
async fn elicit_decline_and_malformed_answers() {
    let peer = FakePeer::answering(|_, _| ok(json!({"action": "decline"})));
    let result = call("elicit", json!({"message": "?"}), ctx(&peer, None))
        .await
        .unwrap();
    assert_eq!(text(&result), r#"{"action":"decline"}"#);
    let peer = FakePeer::answering(|_, _| ok(json!({"action": "maybe"})));
    let result = call("elicit", json!({"message": "?"}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "no valid `action`");
    let peer = FakePeer::answering(|_, _| Reply::Fail(PeerError::MissingCapability("elicitation")));
    let result = call("elicit", json!({"message": "?"}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "`elicitation` capability");
}

#[tokio::test]
async fn list_roots_returns_the_roots_as_json() {
    let roots = json!([{"uri": "file:///home/ada/project", "name": "project"}]);
    let answer = roots.clone();
    let peer = FakePeer::answering(move |_, _| ok(json!({"roots": answer})));
    let result = call("list_roots", json!({}), ctx(&peer, None))
        .await
        .unwrap();
    assert_eq!(serde_json::from_str::<Value>(text(&result)).unwrap(), roots);
    assert_eq!(result["structuredContent"], json!({"roots": roots}));
    assert_eq!(peer.requests()[0], ("roots/list".to_owned(), json!({})));
    let peer = FakePeer::answering(|_, _| ok(json!({})));
    let result = call("list_roots", json!({}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "no `roots` array");
}
