//! What an official SDK client's run against three replicas of switchboard-rmcp's `replicated`
//! example must show (issue 18): the summaries of `tests/ts/rmcp_replicated_scenario.mjs` and
//! `tests/python/rmcp_replicated_scenario.py`, which share one shape, checked request by request
//! and held against the event logs in the replicas' Redis; then the session's end.
//!
//! Replicas are `A`, `B`, `C` (indexes 0, 1, 2). The scripts send `initialize` to A,
//! `tools/list` to B, `test_simple_text` to C; `test_tool_with_progress` to A, whose stream they
//! cut after its first progress event, so the SDK resumes it with `Last-Event-ID` (on B);
//! `test_sampling` to C, whose sampling request the SDK answers in a POST to A.

use reqwest::StatusCode;
use serde_json::Value;

use crate::client::McpClient;
use crate::replicated::{assert_seen_is_logged, Logged, Replicas};

/// The prompt the scripts send with `test_sampling`.
const PROMPT: &str = "Say hi";

/// The requests of the summary.
fn requests(summary: &Value) -> Vec<&Value> {
    summary["requests"]
        .as_array()
        .map(|r| r.iter().collect())
        .unwrap_or_default()
}

/// The one request with `field` = `value`; panics when there is not exactly one.
fn only<'a>(summary: &'a Value, field: &str, value: &str) -> &'a Value {
    let found: Vec<&Value> = requests(summary)
        .into_iter()
        .filter(|r| r[field] == value)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one request with {field} {value}: {summary:#}"
    );
    found[0]
}

/// The events a request's response carried (messages only, no priming), as [`Logged`].
fn events_of(request: &Value) -> Vec<Logged> {
    let events = request["events"].as_array().cloned().unwrap_or_default();
    events
        .into_iter()
        .map(|e| Logged {
            id: e["id"]
                .as_str()
                .unwrap_or_else(|| panic!("an event without an id: {e}"))
                .to_owned(),
            message: e["message"].clone(),
            end: false,
        })
        .collect()
}

/// The stream an event id names.
fn stream_of(event_id: &str) -> &str {
    event_id.split_once('_').map_or(event_id, |(s, _)| s)
}

/// Checks a scenario summary (see the module docs); returns the session id.
pub fn check_summary(replicas: &Replicas, summary: &Value, sampled_text: &str) -> String {
    let show = format!("{summary:#}");
    assert_eq!(summary["ok"], true, "the SDK scenario failed: {show}");
    assert_eq!(summary["protocolVersion"], "2025-11-25", "{show}");
    assert_eq!(
        summary["serverName"], "switchboard-rmcp-replicated",
        "{show}"
    );
    let sid = summary["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session id: {show}"))
        .to_owned();

    // initialize, list and call, each on another replica.
    let init = only(summary, "rpc", "initialize");
    assert_eq!((&init["node"], &init["status"]), (&0.into(), &200.into()));
    let list = only(summary, "rpc", "tools/list");
    assert_eq!((&list["node"], &list["status"]), (&1.into(), &200.into()));
    let tools = summary["tools"].as_array().map_or(0, Vec::len);
    assert_eq!(tools, 14, "the example's tools: {show}");
    let simple = only(summary, "tool", "test_simple_text");
    assert_eq!(
        (&simple["node"], &simple["status"]),
        (&2.into(), &200.into())
    );
    let text = "This is a simple text response for testing.";
    assert_eq!(summary["simpleText"], text, "{show}");

    check_dropped_call(replicas, summary, &sid);
    check_sampling(replicas, summary, &sid, sampled_text);
    sid
}

/// The progress call, cut on A after its first progress event and resumed by the SDK on
/// another replica: the client got every logged event once, in order, and the result.
fn check_dropped_call(replicas: &Replicas, summary: &Value, sid: &str) {
    let show = format!("{summary:#}");
    let progress: Vec<f64> = summary["progress"]
        .as_array()
        .map(|p| p.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    assert_eq!(
        progress,
        [0.0, 50.0, 100.0],
        "progress once each, in order: {show}"
    );
    let result = summary["progressResult"].as_str().unwrap_or_default();
    assert!(result.starts_with("Progress done (token "), "{show}");

    let call = only(summary, "tool", "test_tool_with_progress");
    let cut = &summary["cut"];
    assert_eq!(
        (&cut["node"], &call["node"]),
        (&0.into(), &0.into()),
        "{show}"
    );
    let cut_at = cut["afterEventId"].as_str().expect("the cut's event id");
    let on_a = events_of(call);
    assert_eq!(
        on_a.last().map(|e| e.id.as_str()),
        Some(cut_at),
        "cut there: {show}"
    );
    let resumes: Vec<&Value> = requests(summary)
        .into_iter()
        .filter(|r| r["http"] == "GET")
        .filter(|r| r["lastEventId"].as_str().map(stream_of) == Some(stream_of(cut_at)))
        .collect();
    assert!(
        !resumes.is_empty(),
        "the SDK resumed with Last-Event-ID: {show}"
    );
    // What the SDK took from A: the events up to the one its first resumption names (the
    // priming event's position `0-0` names none: an event still in flight when the connection
    // dropped never reached it).
    let last_taken = resumes[0]["lastEventId"].as_str().unwrap_or_default();
    let taken = match on_a.iter().position(|e| e.id == last_taken) {
        Some(i) => i + 1,
        None => {
            let priming = format!("{}_0-0", stream_of(cut_at));
            assert_eq!(
                last_taken, priming,
                "resumed after an event never sent: {show}"
            );
            0
        }
    };
    let mut seen = on_a[..taken].to_vec();
    for resume in &resumes {
        assert_ne!(
            resume["node"], cut["node"],
            "resumed where it was cut: {show}"
        );
        assert_eq!(resume["status"], 200, "{show}");
        seen.extend(events_of(resume));
    }
    assert_seen_is_logged(&seen, &replicas.logged(sid, cut_at));
    assert_eq!(seen.len(), 4, "3 progress events and the result: {seen:#?}");
    let methods: Vec<&Value> = seen.iter().map(|e| &e.message["method"]).collect();
    let progress_note = Value::from("notifications/progress");
    assert_eq!(methods[..3], [&progress_note; 3], "{seen:#?}");
    assert_eq!(seen[3].message["id"], call["id"], "{seen:#?}");
}

/// The sampling call on C: its sampling request (an id naming C) answered by a POST to another
/// replica, and the call's result carrying the answer.
fn check_sampling(replicas: &Replicas, summary: &Value, sid: &str, sampled_text: &str) {
    let show = format!("{summary:#}");
    let call = only(summary, "tool", "test_sampling");
    assert_eq!((&call["node"], &call["status"]), (&2.into(), &200.into()));
    let seen = events_of(call);
    let asked = seen
        .iter()
        .find(|e| e.message["method"] == "sampling/createMessage")
        .unwrap_or_else(|| panic!("no sampling request on the call's stream: {show}"));
    let id = asked.message["id"].as_str().unwrap_or_default();
    // `<rmcp id>@<node id>/<handler>`; the node id is the replica's `--node-id` (`rmcp-c`),
    // with a per-process suffix after a dot.
    let node = id.rsplit_once('@').and_then(|(_, n)| n.split('/').next());
    let from_c = node.is_some_and(|n| n == "rmcp-c" || n.starts_with("rmcp-c."));
    assert!(from_c, "a request id naming C: {id}");
    let answer = only(summary, "rpc", "response");
    assert_eq!(answer["id"], id, "{show}");
    assert_ne!(
        answer["node"], call["node"],
        "answered where the call runs: {show}"
    );
    assert_eq!(answer["status"], 202, "{show}");
    assert_eq!(summary["samplingPrompt"], PROMPT, "{show}");
    let expected = format!("LLM response: {sampled_text}");
    assert_eq!(summary["samplingResult"], expected.as_str(), "{show}");
    assert_seen_is_logged(&seen, &replicas.logged(sid, &asked.id));
}

/// Ends session `sid` with `DELETE` on C: every replica answers 404 for it afterwards and Redis
/// holds no key of it.
pub async fn end_session(replicas: &Replicas, sid: &str) {
    let client = McpClient::new().with_session(Some(sid), Some("2025-11-25"));
    let reply = client.delete(&replicas.url(2)).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "DELETE on C");
    for url in replicas.urls() {
        let reply = client.post(&url, &crate::msg::bare(9, "tools/list")).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{url} after DELETE");
    }
    let left = replicas.session_keys(sid);
    assert!(left.is_empty(), "keys of the deleted session: {left:?}");
}
