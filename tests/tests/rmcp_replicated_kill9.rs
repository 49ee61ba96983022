//! A replica of switchboard-rmcp's `replicated` example killed with `kill -9` while one of its
//! calls streams (issue 18): the client resumes the call's stream with `Last-Event-ID` on
//! another replica and receives every event that was logged, once each, in order, and the
//! call's end: its answer, or, for a call the dead replica can no longer finish, the error
//! -32004 the crate promises ("a resumer of a stream whose replica died gets error -32004 as
//! that request's answer", logged so that every later resumer sees it too). What the client
//! saw is held against the stream's event log in the private Redis.
//!
//! The example's tools are the conformance suite's: `test_sampling` waits for the client's
//! answer (a call that is certainly still running when its replica dies), and
//! `test_tool_with_logging` streams three log messages 50 ms apart (killed after the first, so
//! it may or may not have logged the rest).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::msg;
use switchboard_tests::replicated::{assert_seen_is_logged, Logged, Options, Replicas};
use switchboard_tests::sse::SseStream;

const REVISION: &str = "2025-11-25";
/// Anything that involves no dead replica.
const WAIT: Duration = Duration::from_secs(10);
/// Until a resumer learns that a replica is dead: its liveness key lapses after the crate's
/// `node_ttl` (5 s by default), checked every second; with margin.
const DEAD_REPLICA_NOTICED: Duration = Duration::from_secs(20);
/// JSON-RPC error of a request that will not be finished (switchboard-protocol's
/// `REQUEST_ABORTED`).
const REQUEST_ABORTED: i64 = -32004;

/// Reads `stream` until the answer to request `id` (or `limit`); the events that carried a
/// message, as (event id, message), the answer last when it came.
async fn read_to_answer(stream: &mut SseStream, id: &Value, limit: Duration) -> Vec<Logged> {
    let got = stream.until_response(id, limit).await;
    got.events
        .iter()
        .filter_map(|e| {
            let message = e.json()?;
            let id =
                e.id.clone()
                    .unwrap_or_else(|| panic!("an event without an id: {e:?}"));
            Some(Logged {
                id,
                end: false,
                message,
            })
        })
        .collect()
}

/// A session made on replica 0 with the sampling capability.
async fn session(replicas: &Replicas) -> (McpClient, String) {
    let mut client = McpClient::new();
    let (sid, _) = client
        .initialize_with(&replicas.url(0), REVISION, json!({"sampling": {}}))
        .await;
    (client, sid)
}

/// The session still works after the kill: a call on `url` answers.
async fn still_served(client: &McpClient, url: &str) {
    let reply = client
        .call_tool(url, 9, "test_simple_text", json!({}))
        .await;
    let answer = reply.answer(json!(9), WAIT).await;
    assert_eq!(
        msg::result_text(&answer.response),
        "This is a simple text response for testing.",
        "{}",
        answer.response
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_on_a_killed_replica_ends_with_32004_elsewhere_and_loses_nothing_logged() {
    let mut replicas = Replicas::replicated(3, &Options::default());
    let (client, sid) = session(&replicas).await;
    let (a, b, c) = (replicas.url(0), replicas.url(1), replicas.url(2));

    // On A: the call asks the client to sample, and waits for an answer that never comes.
    let reply = client
        .call_tool(&a, 2, "test_sampling", json!({"prompt": "hi"}))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let mut on_a = reply.sse();
    let priming = on_a.next_event(WAIT).await.expect("the priming event");
    assert!(priming.is_priming(), "{priming:?}");
    let priming_id = priming.id.clone().expect("the priming event's id");
    let (event, asked) = on_a.next_message(WAIT).await.expect("A's first message");
    assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
    let mut seen = vec![Logged {
        id: event.id.expect("the request's event id"),
        message: asked,
        end: false,
    }];
    let before_kill = replicas.logged(&sid, &priming_id);
    assert_eq!(before_kill.len(), 1, "only the request is logged so far");
    assert_eq!(before_kill[0].message, seen[0].message);

    replicas.replica_mut(0).kill9();
    drop(on_a);

    // On B, after the request (the client's Last-Event-ID): -32004 for the call, logged.
    let reply = client.get_stream(&b, Some(&seen[0].id)).await;
    assert_eq!(reply.status, StatusCode::OK, "resume on B");
    let mut on_b = reply.sse();
    seen.extend(read_to_answer(&mut on_b, &json!(2), DEAD_REPLICA_NOTICED).await);
    let logged = replicas.logged(&sid, &priming_id);
    assert_seen_is_logged(&seen, &logged);
    assert_eq!(seen.len(), 2, "the request and the call's end: {seen:#?}");
    let answer = &seen[1].message;
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["error"]["code"], REQUEST_ABORTED, "{answer}");
    on_b.until_end(WAIT)
        .await
        .expect("the stream ends after its answer");

    // A client that lost everything resumes on C from the priming event: the whole log, once.
    let reply = client.get_stream(&c, Some(&priming_id)).await;
    assert_eq!(reply.status, StatusCode::OK, "resume on C");
    let mut on_c = reply.sse();
    let again = read_to_answer(&mut on_c, &json!(2), WAIT).await;
    assert_seen_is_logged(&again, &logged);
    on_c.until_end(WAIT).await.expect("and ends");

    still_served(&client, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_call_cut_by_kill9_resumes_elsewhere_with_every_logged_event_once() {
    let mut replicas = Replicas::replicated(3, &Options::default());
    let (client, sid) = session(&replicas).await;
    let (a, b) = (replicas.url(0), replicas.url(1));

    // On A: three log messages 50 ms apart on the call's stream; A dies after the first.
    let reply = client
        .call_tool(&a, 2, "test_tool_with_logging", json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let mut on_a = reply.sse();
    let (event, first) = on_a.next_message(WAIT).await.expect("the first message");
    replicas.replica_mut(0).kill9();
    drop(on_a);
    assert_eq!(first["method"], "notifications/message", "{first}");
    let first_id = event.id.expect("the first message's event id");

    // On B, after the first message: the rest of the log, then the call's end.
    let reply = client.get_stream(&b, Some(&first_id)).await;
    assert_eq!(reply.status, StatusCode::OK, "resume on B");
    let mut on_b = reply.sse();
    let mut seen = vec![Logged {
        id: first_id.clone(),
        message: first,
        end: false,
    }];
    seen.extend(read_to_answer(&mut on_b, &json!(2), DEAD_REPLICA_NOTICED).await);
    assert_seen_is_logged(&seen, &replicas.logged(&sid, &first_id));

    let (answer, notes) = seen.split_last().expect("events");
    let steps: Vec<&Value> = notes.iter().map(|n| &n.message["params"]["data"]).collect();
    let all = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    assert_eq!(
        steps,
        all[..steps.len()],
        "the messages, in order: {seen:#?}"
    );
    let answer = &answer.message;
    assert_eq!(answer["id"], 2, "{answer}");
    if answer["error"].is_null() {
        // A logged everything before it died.
        assert_eq!(steps.len(), 3, "{seen:#?}");
        let text = msg::result_text(answer);
        assert_eq!(text, "Tool with logging executed successfully", "{answer}");
        eprintln!("A finished the call before the kill landed: all 3 messages and the result");
    } else {
        assert_eq!(answer["error"]["code"], REQUEST_ABORTED, "{answer}");
        eprintln!(
            "killed mid-call: {} of 3 messages logged, then -32004",
            steps.len()
        );
    }
    on_b.until_end(WAIT)
        .await
        .expect("the stream ends after its answer");

    still_served(&client, &b).await;
}
