//! `tools/list`, `tools/call` dispatch and the local tools.

use serde_json::{json, Value};
use switchboard_protocol::{codes, Revision};

use super::{assert_tool_error, call, ctx, send, text, FakePeer, Sent};
use crate::upstream::PeerError;

#[tokio::test]
async fn tools_list_publishes_every_tool_with_a_schema() {
    let list = send("tools/list", Value::Null, ctx(&FakePeer::quiet(), None))
        .await
        .unwrap();
    let tools = list["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "echo",
            "regional_echo",
            "add",
            "countdown",
            "notify",
            "sample",
            "elicit",
            "list_roots"
        ]
    );
    for tool in tools {
        assert!(
            tool["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{tool}"
        );
        let schema = &tool["inputSchema"];
        assert_eq!(schema["type"], "object", "{tool}");
        let properties = schema["properties"].as_object().unwrap();
        for required in schema["required"].as_array().unwrap() {
            assert!(
                properties.contains_key(required.as_str().unwrap()),
                "{tool}"
            );
        }
        if let Some(output) = tool.get("outputSchema") {
            assert_eq!(output["type"], "object", "{tool}");
        }
    }
    assert!(list.get("nextCursor").is_none());
}

#[tokio::test]
async fn echo_returns_the_text() {
    let result = call(
        "echo",
        json!({"text": "hello"}),
        ctx(&FakePeer::quiet(), None),
    )
    .await
    .unwrap();
    assert_eq!(
        result,
        json!({"content": [{"type": "text", "text": "hello"}], "isError": false})
    );
}

#[tokio::test]
async fn invalid_arguments_are_tool_errors() {
    let peer = FakePeer::quiet();
    let result = call("echo", json!({}), ctx(&peer, None)).await.unwrap();
    assert_tool_error(
        &result,
        "invalid arguments for `echo`: missing required argument `text`",
    );
    let result = call("echo", json!({"text": 5}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "`text` must be a string");
    let result = call("echo", json!({"text": "a", "txt": "b"}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "unknown argument `txt`");
    let result = call("countdown", json!({"n": 100001}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "`n` must be at most 100000");
    let result = call("countdown", json!({"interval_ms": -1}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "`interval_ms` must be at least 0");
    let result = call("notify", json!({"level": "loud"}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "`level` must be one of");
    assert!(peer.sent().is_empty());
}

#[tokio::test]
async fn malformed_calls_and_unknown_tools_are_invalid_params() {
    let peer = FakePeer::quiet();
    let err = call("frobnicate", json!({}), ctx(&peer, None))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::INVALID_PARAMS);
    assert!(err.message.contains("frobnicate"));
    assert_eq!(err.data, Some(json!({"name": "frobnicate"})));
    let err = send("tools/call", json!({"arguments": {}}), ctx(&peer, None))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::INVALID_PARAMS);
    let err = send(
        "tools/call",
        json!({"name": "echo", "arguments": ["x"]}),
        ctx(&peer, None),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, codes::INVALID_PARAMS);
    // Absent arguments are an empty object.
    let result = send(
        "tools/call",
        json!({"name": "list_roots"}),
        ctx(&peer, None),
    )
    .await
    .unwrap();
    assert_tool_error(&result, "roots/list failed");
}

#[tokio::test]
async fn add_sums_integers_and_floats() {
    let peer = FakePeer::quiet();
    let result = call("add", json!({"a": 2, "b": 3}), ctx(&peer, None))
        .await
        .unwrap();
    assert_eq!(text(&result), "5");
    assert_eq!(result["structuredContent"], json!({"sum": 5}));
    assert_eq!(result["isError"], false);
    let result = call("add", json!({"a": 0.5, "b": -2}), ctx(&peer, None))
        .await
        .unwrap();
    assert_eq!(text(&result), "-1.5");
    assert_eq!(result["structuredContent"], json!({"sum": -1.5}));
    let result = call("add", json!({"a": i64::MAX, "b": 1}), ctx(&peer, None))
        .await
        .unwrap();
    assert_eq!(
        result["structuredContent"]["sum"].as_f64(),
        Some(i64::MAX as f64 + 1.0)
    );
    let result = call("add", json!({"a": 1e308, "b": 1e308}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "not a finite number");
    let result = call("add", json!({"a": "1", "b": 2}), ctx(&peer, None))
        .await
        .unwrap();
    assert_tool_error(&result, "`a` must be a number");
}

/// The first `sent` progress notifications of a countdown of `n` with token `"t"`, stamped
/// `every` ms apart.
fn expected_progress(sent: u64, n: u64, every: u128) -> Vec<Sent> {
    (1..=sent)
        .map(|i| Sent {
            route: "request",
            at_ms: every * u128::from(i),
            message: json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                "progressToken": "t", "progress": i, "total": n,
                "message": format!("{i} of {n} done, {} to go", n - i)
            }}),
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn countdown_reports_progress_once_per_interval() {
    let peer = FakePeer::quiet();
    let result = call(
        "countdown",
        json!({"n": 3, "interval_ms": 250}),
        ctx(&peer, Some(json!("t"))),
    )
    .await
    .unwrap();
    assert_eq!(
        result,
        json!({"content": [{"type": "text", "text": "countdown finished"}], "isError": false})
    );
    assert_eq!(peer.sent(), expected_progress(3, 3, 250));
}

#[tokio::test(start_paused = true)]
async fn countdown_defaults_to_five_steps_a_second_apart() {
    let peer = FakePeer::quiet();
    call("countdown", json!({}), ctx(&peer, Some(json!("t"))))
        .await
        .unwrap();
    assert_eq!(peer.sent(), expected_progress(5, 5, 1000));
}

#[tokio::test(start_paused = true)]
async fn countdown_without_a_token_sends_no_progress() {
    let peer = FakePeer::quiet();
    let start = tokio::time::Instant::now();
    let result = call("countdown", json!({"n": 3}), ctx(&peer, None))
        .await
        .unwrap();
    assert_eq!(text(&result), "countdown finished");
    assert_eq!(start.elapsed().as_millis(), 3000);
    assert!(peer.sent().is_empty());
}

#[tokio::test(start_paused = true)]
async fn countdown_keeps_numeric_tokens_and_omits_message_for_2024_11_05() {
    let peer = FakePeer::quiet();
    let mut c = ctx(&peer, Some(json!(7)));
    c.revision = Revision::V2024_11_05;
    call("countdown", json!({"n": 1, "interval_ms": 0}), c)
        .await
        .unwrap();
    let params = &peer.sent()[0].message["params"];
    assert_eq!(
        params,
        &json!({"progressToken": 7, "progress": 1, "total": 1})
    );
}

#[tokio::test(start_paused = true)]
async fn countdown_stops_promptly_on_cancel() {
    let peer = FakePeer::quiet();
    let c = ctx(&peer, Some(json!("t")));
    let cancel = c.cancel.clone();
    let task = tokio::spawn(call("countdown", json!({"n": 10}), c));
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    let start = tokio::time::Instant::now();
    cancel.cancel();
    let err = task.await.unwrap().unwrap_err();
    assert_eq!(err.code, codes::REQUEST_ABORTED);
    assert_eq!(start.elapsed().as_millis(), 0);
    assert_eq!(peer.sent(), expected_progress(3, 10, 1000));
}

#[tokio::test(start_paused = true)]
async fn notify_sends_messages_then_resource_updated_on_the_standalone_stream() {
    let peer = FakePeer::quiet();
    let args = json!({"count": 3, "interval_ms": 100, "level": "warning"});
    let result = call("notify", args, ctx(&peer, Some(json!("t"))))
        .await
        .unwrap();
    assert_eq!(text(&result), "sent 3 messages");
    let mut expected: Vec<Sent> = (1..=3u64)
        .map(|seq| Sent {
            route: "standalone",
            at_ms: 100 * u128::from(seq),
            message: json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {
                "level": "warning", "logger": "demo", "data": {"seq": seq, "of": 3}
            }}),
        })
        .collect();
    expected.push(Sent {
        route: "standalone",
        at_ms: 300,
        message: json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                        "params": {"uri": "demo://greeting"}}),
    });
    assert_eq!(peer.sent(), expected);
}

#[tokio::test(start_paused = true)]
async fn notify_defaults_to_five_info_messages_half_a_second_apart() {
    let peer = FakePeer::quiet();
    let result = call("notify", json!({}), ctx(&peer, None)).await.unwrap();
    assert_eq!(text(&result), "sent 5 messages");
    let sent = peer.sent();
    assert_eq!(sent.len(), 6);
    for (i, s) in sent[..5].iter().enumerate() {
        assert_eq!(s.at_ms, 500 * (i as u128 + 1));
        assert_eq!(s.message["params"]["level"], "info");
    }
    let result = call(
        "notify",
        json!({"count": 1, "interval_ms": 0}),
        ctx(&peer, None),
    )
    .await
    .unwrap();
    assert_eq!(text(&result), "sent 1 message");
}

#[tokio::test(start_paused = true)]
async fn notify_stops_on_cancel_without_announcing_the_update() {
    let peer = FakePeer::quiet();
    let c = ctx(&peer, None);
    let cancel = c.cancel.clone();
    let task = tokio::spawn(call("notify", json!({"count": 10, "interval_ms": 1000}), c));
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    cancel.cancel();
    assert_eq!(
        task.await.unwrap().unwrap_err().code,
        codes::REQUEST_ABORTED
    );
    let sent = peer.sent();
    assert_eq!(sent.len(), 2);
    assert!(sent
        .iter()
        .all(|s| s.message["method"] == "notifications/message"));
}

#[tokio::test(start_paused = true)]
async fn undeliverable_notifications_are_internal_errors() {
    let peer = FakePeer::failing_notifications(PeerError::Delivery("bus down".into()));
    let err = call("notify", json!({"count": 1}), ctx(&peer, None))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::INTERNAL_ERROR);
    assert!(err.message.contains("bus down"));
    let peer = FakePeer::failing_notifications(PeerError::Cancelled);
    let err = call("countdown", json!({"n": 1}), ctx(&peer, Some(json!(1))))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::REQUEST_ABORTED);
}
