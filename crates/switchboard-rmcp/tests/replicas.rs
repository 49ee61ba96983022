//! Two replicas of one rmcp server in this test process, sharing one store (the memory store, and
//! a private `redis-server`), each on its own loopback port, spoken to over HTTP: what an rmcp
//! server must do to answer correctly on any replica.

mod common;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::eventually::eventually;
use switchboard_tests::msg;
use switchboard_tests::sse::SseStream;

use common::{sampled, session, text_of, Env, Kind, WAIT};

every_backend!(
    a_session_made_on_a_is_served_on_b,
    a_stream_resumes_on_b_after_events_logged_on_a,
    the_standalone_stream_on_a_gets_what_b_sends,
    the_standalone_stream_moves_to_b_with_rmcps_priming_id,
    a_client_answer_posted_to_b_reaches_a,
    a_made_up_last_event_id_does_not_take_the_stream,
    a_cancel_posted_to_b_stops_the_call_on_a,
    delete_on_b_ends_the_session_everywhere,
    a_call_cut_by_a_stopping_replica_ends_with_an_error_on_b,
    an_abandoned_session_leaves_no_key,
);

async fn a_session_made_on_a_is_served_on_b(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, _) = session(&a.url).await;
    let reply = client.call_tool(&b.url, 2, "whoami", json!({})).await;
    assert_eq!(reply.status, StatusCode::OK);
    let answer = reply.answer(json!(2), WAIT).await;
    assert_eq!(
        text_of(&answer.response),
        "replay",
        "B replayed the initialize stored by A: {}",
        answer.response
    );
}

async fn a_stream_resumes_on_b_after_events_logged_on_a(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, _) = session(&a.url).await;
    // The call closes its stream after the priming event, then logs three lines and its answer.
    let reply = client
        .call_tool(&a.url, 2, "chatter", json!({"n": 3, "close": true}))
        .await;
    let events = reply
        .sse()
        .until_end(WAIT)
        .await
        .expect("A closes the stream");
    let priming = events
        .iter()
        .find(|e| e.is_priming())
        .expect("a priming event");
    let first_id = priming.id.clone().expect("an id");

    // On B: everything after the priming event, in order, ending with the answer.
    let reply = client.get_stream(&b.url, Some(&first_id)).await;
    assert_eq!(reply.status, StatusCode::OK);
    let collected = reply.sse().until_response(&json!(2), WAIT).await;
    let lines: Vec<&Value> = collected.with_method("notifications/message");
    let data: Vec<&Value> = lines.iter().map(|m| &m["params"]["data"]).collect();
    assert_eq!(data, [&json!("line 1"), &json!("line 2"), &json!("line 3")]);
    let answer = collected.matched.expect("the answer, replayed on B");
    assert_eq!(text_of(&answer), "done");
    // Primed at the id it resumed from, like every stream (a client cut off before the next
    // event still holds a position).
    let primed = collected.events.first().expect("events on B");
    assert!(primed.is_priming(), "{primed:?}");
    assert_eq!(primed.id.as_deref(), Some(first_id.as_str()));
    let ids: Vec<String> = collected
        .events
        .iter()
        .filter(|e| !e.is_priming())
        .filter_map(|e| e.id.clone())
        .collect();
    assert_eq!(ids.len(), 4, "every event carries its id: {ids:?}");

    // After the second line: exactly the third and the answer, and the stream ends.
    let reply = client.get_stream(&b.url, Some(&ids[1])).await;
    let rest = reply
        .sse()
        .until_end(WAIT)
        .await
        .expect("the stream ends after its answer");
    let rest: Vec<Value> = rest.iter().filter_map(|e| e.json()).collect();
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert_eq!(rest[0]["params"]["data"], "line 3");
    assert_eq!(text_of(&rest[1]), "done");
}

async fn the_standalone_stream_on_a_gets_what_b_sends(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, _) = session(&a.url).await;
    let mut standalone = client.get_stream(&a.url, None).await.sse();
    // The priming event says the stream is open (claimed) before B sends anything.
    let first = standalone.next_event(WAIT).await.expect("a priming event");
    assert!(first.retry.is_some() || first.is_priming(), "{first:?}");
    let reply = client
        .call_tool(&b.url, 2, "announce", json!({"text": "hello A"}))
        .await;
    assert_eq!(
        text_of(&reply.answer(json!(2), WAIT).await.response),
        "announced"
    );
    let got = standalone.until_method("notifications/message", WAIT).await;
    let message = got.matched.expect("B's message on A's standalone stream");
    assert_eq!(message["params"]["data"], "hello A");
}

async fn the_standalone_stream_moves_to_b_with_rmcps_priming_id(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, _) = session(&a.url).await;
    let mut on_a = client.get_stream(&a.url, None).await.sse();
    let first = on_a.next_event(WAIT).await.expect("a priming event");
    assert_eq!(
        first.id.as_deref(),
        Some("0"),
        "rmcp's own priming id: {first:?}"
    );
    // A client that lost the stream right after it resumes with that id, on B.
    let mut on_b = client.get_stream(&b.url, Some("0")).await.sse();
    on_b.next_event(WAIT).await.expect("B's priming event");
    on_a.until_end(WAIT)
        .await
        .expect("A's stream was taken over");
    let reply = client
        .call_tool(&a.url, 2, "announce", json!({"text": "to B"}))
        .await;
    reply.answer(json!(2), WAIT).await;
    let got = on_b.until_method("notifications/message", WAIT).await;
    assert_eq!(
        got.matched.expect("the message on B")["params"]["data"],
        "to B"
    );
}

async fn a_client_answer_posted_to_b_reaches_a(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, _) = session(&a.url).await;
    let mut call = client
        .call_tool(&a.url, 2, "ask", json!({"text": "hi"}))
        .await
        .sse();
    let asked = call.until_method("sampling/createMessage", WAIT).await;
    let request = asked.matched.expect("A asks the client to sample");
    let id = request["id"].clone();
    assert!(
        id.as_str().is_some_and(|s| s.contains("@a/")),
        "a cluster-unique id: {id}"
    );
    let reply = client.post(&b.url, &sampled(&id, "from B")).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    let answered = call.until_response(&json!(2), WAIT).await;
    let answer = answered.matched.expect("the call answers on A");
    assert_eq!(text_of(&answer), "from B");
}

/// A `Last-Event-ID` naming a real stream at a position it never reached (a made-up or future
/// id) is refused before anything is claimed (the runtime's resume check): its GET gets an empty
/// stream at once, and the call's own stream on A keeps its connection and gets its answer.
/// Before, B claimed the stream and held the GET open with keep-alives only: the answer went
/// nowhere (the break-it pass of issue 33).
async fn a_made_up_last_event_id_does_not_take_the_stream(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, _) = session(&a.url).await;
    let mut call = client
        .call_tool(&a.url, 2, "ask", json!({"text": "hi"}))
        .await
        .sse();
    let asked = call.until_method("sampling/createMessage", WAIT).await;
    let request = asked.matched.expect("A asks the client to sample");
    let last = asked.events.iter().rev().find_map(|e| e.id.clone());
    let last = last.expect("an event id");
    let (stream, position) = last.rsplit_once('_').expect("<stream>_<position>");
    let ms: u64 = position
        .split('-')
        .next()
        .and_then(|m| m.parse().ok())
        .expect("ms");
    // Far in the future, and just past the newest event (a position no event has).
    for made_up in [
        format!("{stream}_99999999999999-0"),
        format!("{stream}_{}-0", ms + 1),
    ] {
        let reply = client.get_stream(&b.url, Some(&made_up)).await;
        let events = reply.sse().until_end(WAIT).await;
        let events = events.unwrap_or_else(|e| panic!("{made_up}: the GET is held open: {e:?}"));
        assert!(
            events.iter().all(|e| e.json().is_none()),
            "{made_up}: {events:?}"
        );
    }
    let reply = client
        .post(&a.url, &sampled(&request["id"], "still here"))
        .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    let answered = call.until_response(&json!(2), WAIT).await;
    let answer = answered.matched.expect("the answer on A's own connection");
    assert_eq!(text_of(&answer), "still here");
}

async fn a_cancel_posted_to_b_stops_the_call_on_a(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, _) = session(&a.url).await;
    let mut call = client.call_tool(&a.url, 7, "slow", json!({})).await.sse();
    let priming = call
        .next_event(WAIT)
        .await
        .expect("the priming event: the call is registered");
    let resume_from = priming.id.expect("the priming event's id");
    let cancel = json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "changed my mind"},
    });
    assert_eq!(
        client.post(&b.url, &cancel).await.status,
        StatusCode::ACCEPTED
    );
    // Well before the tool's 10 s the stream ends, with no answer (MCP: none for a cancelled
    // request), and so does a resumption of it on B.
    let ended = call.until_end(Duration::from_secs(5)).await;
    let events = ended.expect("the cancelled call's stream ends at once");
    let answers: Vec<Value> = events.iter().filter_map(|e| e.json()).collect();
    assert!(answers.is_empty(), "no answer: {answers:?}");
    let mut resumed = client.get_stream(&b.url, Some(&resume_from)).await.sse();
    let events = resumed.until_end(WAIT).await.expect("the resumption ends");
    let answers: Vec<Value> = events.iter().filter_map(|e| e.json()).collect();
    assert!(answers.is_empty(), "no answer on B either: {answers:?}");
}

/// A session opened on `open_on` with something in Redis: a `chatter` call answered on
/// `call_on` (its stream logged) and the standalone stream open on `open_on`.
async fn with_logs(env: &Env, open_on: &str, call_on: &str) -> (McpClient, String, SseStream) {
    let (client, sid) = session(open_on).await;
    let reply = client
        .call_tool(call_on, 2, "chatter", json!({"n": 2, "close": false}))
        .await;
    reply.answer(json!(2), WAIT).await;
    let mut standalone = client.get_stream(open_on, None).await.sse();
    standalone
        .next_event(WAIT)
        .await
        .expect("the standalone stream opens");
    assert!(env.keys_of(&sid).await > 0);
    (client, sid, standalone)
}

async fn delete_on_b_ends_the_session_everywhere(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, sid, mut standalone) = with_logs(&env, &a.url, &a.url).await;

    assert_eq!(client.delete(&b.url).await.status, StatusCode::ACCEPTED);
    standalone
        .until_end(WAIT)
        .await
        .expect("A's standalone stream closes");
    for url in [&a.url, &b.url] {
        let reply = client.post(url, &msg::bare(3, "tools/list")).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{url} after DELETE");
    }
    assert_eq!(env.keys_of(&sid).await, 0, "no key of the session is left");
}

async fn a_call_cut_by_a_stopping_replica_ends_with_an_error_on_b(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, _) = session(&a.url).await;
    let mut call = client.call_tool(&a.url, 5, "slow", json!({})).await.sse();
    let priming = call.next_event(WAIT).await.expect("the priming event");
    let resume_from = priming.id.expect("an event id");
    // A drains (1 s in these tests), then ends the call it still runs, and stops.
    a.stop().await;
    let reply = client.get_stream(&b.url, Some(&resume_from)).await;
    assert_eq!(reply.status, StatusCode::OK);
    let ended = reply.sse().until_response(&json!(5), WAIT).await;
    let answer = ended.matched.expect("the cut call's error, from the log");
    assert_eq!(answer["error"]["code"], -32004, "{answer}");
    // The session itself lives on.
    let reply = client.call_tool(&b.url, 6, "whoami", json!({})).await;
    assert_eq!(
        text_of(&reply.answer(json!(6), WAIT).await.response),
        "replay"
    );
}

async fn an_abandoned_session_leaves_no_key(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(1));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, sid, standalone) = with_logs(&env, &a.url, &b.url).await;
    drop(standalone);
    // Nothing more from the client: after idle_ttl, and the reaper's pass, nothing is left.
    eventually("the abandoned session to leave no key", WAIT, || async {
        (env.keys_of(&sid).await == 0).then_some(())
    })
    .await;
    let reply = client.post(&a.url, &msg::bare(3, "tools/list")).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
}
