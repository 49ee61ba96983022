//! SSE streams: cases C11 (headers, no buffering, first byte, keep-alives), C14 (a second GET
//! replaces the first; one stream per message) and C15 (`Last-Event-ID` replays only the cut
//! stream of the same session).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use switchboard_tests::client::{McpClient, Reply};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::expect;
use switchboard_tests::msg;
use switchboard_tests::sse::{SseEvent, SseStream};

const T: Duration = Duration::from_secs(10);

/// Asserts the headers every SSE response must carry (C11) and returns the stream.
fn sse_with_proper_headers(reply: Reply, what: &str) -> SseStream {
    assert_eq!(reply.status, StatusCode::OK, "{what}: status");
    assert_eq!(
        reply.header("content-type").as_deref(),
        Some("text/event-stream"),
        "{what}: Content-Type"
    );
    let cache = reply.header("cache-control").unwrap_or_default();
    // `no-store` too: a browser must not keep a stream in its HTTP cache (issue 35).
    assert!(
        cache.contains("no-cache") && cache.contains("no-store"),
        "{what}: Cache-Control {cache:?}"
    );
    assert_eq!(
        reply.header("x-accel-buffering").as_deref(),
        Some("no"),
        "{what}: X-Accel-Buffering"
    );
    assert_eq!(
        reply.header("content-length"),
        None,
        "{what}: Content-Length"
    );
    assert_eq!(
        reply.header("content-encoding"),
        None,
        "{what}: Content-Encoding"
    );
    reply.sse()
}

/// Asserts `ev` is a 2025-11-25 priming event (`<stream>_0-0`, retry 3000, empty data) and
/// returns its stream id.
fn priming_stream(ev: &SseEvent, what: &str) -> String {
    assert!(
        ev.is_priming(),
        "{what}: first event must be a priming event, got {ev:?}"
    );
    assert_eq!(ev.retry, Some(3000), "{what}: priming retry");
    let id = ev.id.as_deref().unwrap_or_default();
    let stream = id
        .strip_suffix("_0-0")
        .unwrap_or_else(|| panic!("{what}: priming id {id:?}"));
    assert!(!stream.is_empty(), "{what}: priming id {id:?}");
    stream.to_owned()
}

/// `(stream, ms, seq)` of an event id `<stream>_<ms>-<seq>`.
fn parse_event_id(id: &str) -> (String, u64, u64) {
    let (stream, pos) = id
        .rsplit_once('_')
        .unwrap_or_else(|| panic!("event id {id:?}"));
    let (ms, seq) = pos
        .split_once('-')
        .unwrap_or_else(|| panic!("event id {id:?}"));
    (
        stream.to_owned(),
        ms.parse().expect("ms"),
        seq.parse().expect("seq"),
    )
}

/// Asserts the progress gaps show live delivery: no two events batched together, none late.
fn assert_spaced(times: &[std::time::Instant], interval: Duration, what: &str) {
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= interval / 3,
            "{what}: events arrived batched ({gap:?} apart; interval {interval:?})"
        );
        assert!(
            gap <= interval + Duration::from_secs(1),
            "{what}: event held back ({gap:?} apart)"
        );
    }
}

/// C11 steps 2 and 4: a streamed call's response has the SSE headers (even when gzip is
/// offered), the priming event within 1 s, and each progress event as it happens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c11_progress_arrives_unbuffered_with_proper_sse_headers() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let mut client = McpClient::new();
    client.initialize(&cluster.url(0), "2025-11-25").await;
    let interval = Duration::from_millis(300);
    let call = msg::call_with_progress(5, "countdown", json!({"n": 5, "interval_ms": 300}), "p5");
    let headers = client
        .post_headers()
        .set("Accept-Encoding", "gzip, deflate, br");
    let reply = client
        .send(
            Method::POST,
            &cluster.url(1),
            &headers,
            Some(call.to_string()),
        )
        .await;
    let mut stream = sse_with_proper_headers(reply, "countdown response");
    let priming = stream
        .next_event(Duration::from_secs(1))
        .await
        .expect("first event within 1 s");
    let stream_id = priming_stream(&priming, "countdown response");
    let first_byte = stream.first_byte_at.expect("first byte") - stream.sent_at;
    assert!(
        first_byte < Duration::from_secs(1),
        "first byte after {first_byte:?}"
    );

    let got = stream.until_response(&json!(5), T).await;
    let response = got
        .matched
        .clone()
        .unwrap_or_else(|| panic!("no result; read {:?}", got.events));
    assert!(
        msg::result_text(&response).contains("countdown finished"),
        "{response}"
    );
    let progress: Vec<&(SseEvent, Value)> = got
        .messages
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 5, "progress events: {:?}", got.messages);
    let mut last = (0, 0);
    for (ev, m) in &progress {
        assert_eq!(m["params"]["progressToken"], "p5");
        let (stream, ms, seq) = parse_event_id(ev.id.as_deref().expect("progress event id"));
        assert_eq!(stream, stream_id, "event ids name their stream");
        assert!((ms, seq) > last, "event ids increase");
        last = (ms, seq);
    }
    let times: Vec<_> = progress.iter().map(|(ev, _)| ev.at).collect();
    assert_spaced(&times, interval, "countdown progress");
}

/// C11 steps 3 and 4: the GET stream has the SSE headers, a priming event, comment keep-alives
/// every `http.keepalive_interval`, and notifier messages as they happen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c11_get_stream_keepalives_and_live_notifications() {
    let cluster = Cluster::start(
        3,
        ClusterOptions::new().set("http.keepalive_interval", "200ms"),
    );
    let mut client = McpClient::new();
    client.initialize(&cluster.url(0), "2025-11-25").await;
    let headers = client
        .session_headers()
        .set("Accept", "text/event-stream")
        .set("Accept-Encoding", "gzip");
    let reply = client
        .send(Method::GET, &cluster.url(0), &headers, None)
        .await;
    let mut stream = sse_with_proper_headers(reply, "GET stream");
    let priming = stream
        .next_event(Duration::from_secs(1))
        .await
        .expect("priming event within 1 s");
    assert_eq!(priming_stream(&priming, "GET stream"), "get");

    assert!(
        stream
            .next_event(Duration::from_millis(1100))
            .await
            .is_none(),
        "no events without traffic"
    );
    assert!(
        stream.comments() >= 3,
        "keep-alives in 1.1 s at 200 ms: {}",
        stream.comments()
    );
    assert_spaced(
        stream.comment_times(),
        Duration::from_millis(200),
        "keep-alives",
    );

    let notify = client
        .call_tool(
            &cluster.url(1),
            2,
            "notify",
            json!({"count": 5, "interval_ms": 300}),
        )
        .await;
    let runner = tokio::spawn(notify.answer(json!(2), T));
    let got = stream
        .until_method("notifications/resources/updated", T)
        .await;
    assert!(
        got.matched.is_some(),
        "no resources/updated; read {:?}",
        got.events
    );
    let times: Vec<_> = got
        .messages
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/message")
        .map(|(ev, _)| ev.at)
        .collect();
    assert_eq!(times.len(), 5, "notifier messages: {:?}", got.messages);
    assert_spaced(&times, Duration::from_millis(300), "notifier messages");
    runner.await.expect("notify call");
}

/// C11 with revisions §2 (priming is gated by version): sessions before 2025-11-25 get no
/// priming event and no `retry`, on POST streams and on the GET stream; a POST stream ends after
/// its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c11_older_revisions_get_no_priming_and_no_retry() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    for revision in ["2025-03-26", "2025-06-18"] {
        let mut client = McpClient::new();
        client.initialize(&cluster.url(0), revision).await;
        let args = json!({"n": 2, "interval_ms": 50});
        let call = msg::call_with_progress(1, "countdown", args, "old");
        let reply = client.post(&cluster.url(1), &call).await;
        let mut stream = sse_with_proper_headers(reply, revision);
        let events = stream
            .until_end(T)
            .await
            .expect("a POST stream ends after its result");
        let plain = events
            .iter()
            .all(|e| e.retry.is_none() && e.json().is_some());
        assert!(
            plain,
            "{revision}: only JSON events, no priming, no retry: {events:?}"
        );
        assert_eq!(
            events.len(),
            3,
            "{revision}: two progress events and the result"
        );

        let get = client.get_stream(&cluster.url(2), None).await;
        let mut get = sse_with_proper_headers(get, revision);
        let args = json!({"count": 1, "interval_ms": 0});
        client
            .call_tool(&cluster.url(0), 2, "notify", args)
            .await
            .answer(json!(2), T)
            .await;
        let first = get.next_event(T).await.expect("the notifier message");
        assert!(
            first.retry.is_none(),
            "{revision}: no retry on GET: {first:?}"
        );
        let message = first
            .json()
            .unwrap_or_else(|| panic!("{revision}: first GET event {first:?}"));
        assert_eq!(
            message["method"], "notifications/message",
            "{revision}: {message}"
        );
    }
}

/// C14: a second GET (on another node) replaces the first, a third replaces the second; the
/// session keeps working and each message reaches exactly one stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c14_second_get_replaces_the_first_and_messages_reach_one_stream() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-06-18").await;
    let open = |url: String| {
        let client = client.clone();
        async move { sse_with_proper_headers(client.get_stream(&url, None).await, "GET") }
    };
    let mut stale = open(urls[0].clone()).await; // never read: a black-holed stream
    let mut second = open(urls[1].clone()).await;
    let stale_events = stale
        .until_end(T)
        .await
        .unwrap_or_else(|e| panic!("first stream not replaced: {e:?}"));
    let mut third = open(urls[0].clone()).await;
    let second_events = second
        .until_end(T)
        .await
        .unwrap_or_else(|e| panic!("second stream not replaced: {e:?}"));

    let notify = client
        .call_tool(
            &urls[2],
            2,
            "notify",
            json!({"count": 5, "interval_ms": 20}),
        )
        .await;
    notify.answer(json!(2), T).await;
    let got = third
        .until_method("notifications/resources/updated", T)
        .await;
    assert!(
        got.matched.is_some(),
        "third stream: no resources/updated; read {:?}",
        got.events
    );
    let delivered = got.with_method("notifications/message");
    assert_eq!(
        delivered.len(),
        5,
        "each message once on the live stream: {:?}",
        got.messages
    );
    for (name, events) in [("first", stale_events), ("second", second_events)] {
        let leaked: Vec<Value> = events.iter().filter_map(SseEvent::json).collect();
        assert!(
            leaked.is_empty(),
            "{name} stream got messages meant for the live one: {leaked:?}"
        );
    }
    assert!(
        third.next_event(Duration::from_millis(300)).await.is_none(),
        "no duplicate after the series"
    );
    let echo = client
        .call_tool(&urls[2], 3, "echo", json!({"text": "still here"}))
        .await
        .answer(json!(3), T)
        .await;
    assert!(
        msg::result_text(&echo.response).contains("still here"),
        "{}",
        echo.response
    );
}

/// C15 step 1: two concurrent calls; the first one's stream is cut after its first progress
/// event and resumed on B: the rest of call 1 arrives, nothing of call 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c15_resume_replays_only_the_cut_stream() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let args = json!({"n": 6, "interval_ms": 250});
    let (call_one, call_two) = (
        msg::call_with_progress(1, "countdown", args.clone(), "one"),
        msg::call_with_progress(2, "countdown", args, "two"),
    );
    let (one, two) = tokio::join!(
        client.post(&urls[0], &call_one),
        client.post(&urls[0], &call_two)
    );
    let (mut one, mut two) = (
        sse_with_proper_headers(one, "call 1"),
        sse_with_proper_headers(two, "call 2"),
    );
    let first = one.until_method("notifications/progress", T).await;
    let first_msg = first.matched.expect("first progress of call 1");
    assert_eq!(first_msg["params"]["progressToken"], "one");
    let e1 = first
        .events
        .last()
        .and_then(|e| e.id.clone())
        .expect("progress event id");
    drop(one);

    let resumed = client.get_stream(&urls[1], Some(&e1)).await;
    let mut resumed = sse_with_proper_headers(resumed, "resumed call 1");
    let got = resumed.until_response(&json!(1), T).await;
    let response = got
        .matched
        .clone()
        .unwrap_or_else(|| panic!("no result for 1 after resume: {:?}", got.events));
    assert!(
        msg::result_text(&response).contains("countdown finished"),
        "{response}"
    );
    let mut values = vec![first_msg["params"]["progress"].clone()];
    for (ev, m) in &got.messages {
        assert_eq!(
            m["params"]["progressToken"], "one",
            "a message of another stream was replayed: {m}"
        );
        assert_eq!(
            parse_event_id(ev.id.as_deref().unwrap()).0,
            parse_event_id(&e1).0,
            "same stream"
        );
        values.push(m["params"]["progress"].clone());
    }
    let numbers: Vec<f64> = values
        .iter()
        .map(|v| v.as_f64().expect("numeric progress"))
        .collect();
    assert_eq!(
        numbers.len(),
        6,
        "progress of call 1 exactly once each: {values:?}"
    );
    assert!(
        numbers.windows(2).all(|w| w[0] < w[1]),
        "progress strictly increasing, no repeats: {values:?}"
    );

    let other = two.until_response(&json!(2), T).await;
    assert!(other.matched.is_some(), "call 2 unaffected");
    assert_eq!(other.with_method("notifications/progress").len(), 6);
    assert!(other
        .messages
        .iter()
        .all(|(_, m)| m["params"]["progressToken"] == "two"));
}

/// Reads one countdown with progress to its end and returns the event ids of its progress events.
async fn progress_ids(client: &McpClient, url: &str, id: i64, n: u64) -> Vec<String> {
    let call = msg::call_with_progress(id, "countdown", json!({"n": n, "interval_ms": 20}), "ids");
    let mut stream = sse_with_proper_headers(client.post(url, &call).await, "countdown");
    let got = stream.until_response(&json!(id), T).await;
    assert!(got.matched.is_some(), "countdown {id} finished");
    got.messages
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/progress")
        .filter_map(|(e, _)| e.id.clone())
        .collect()
}

/// C15 steps 2–3: event ids of another session, guessed variants, unknown and malformed ids are
/// refused (400, JSON-RPC error) and never replay anything; a finished stream of the session
/// itself replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c15_event_ids_of_other_sessions_and_unknown_ids_are_refused() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut s = McpClient::new();
    s.initialize(&urls[0], "2025-11-25").await;
    let ids = progress_ids(&s, &urls[0], 1, 3).await;
    let (stream, ms, seq) = parse_event_id(&ids[0]);
    let mut t = McpClient::new();
    t.initialize(&urls[1], "2025-11-25").await;
    let guesses = [
        ids[0].clone(),
        ids[2].clone(),
        format!("{stream}_{ms}-{}", seq + 1),
        format!("{stream}_0-0"),
        "zzzzzzzzzzzz_1-0".to_owned(),
    ];
    for guess in &guesses {
        let reply = t.get_stream(&urls[2], Some(guess)).await;
        expect::refused(
            reply,
            StatusCode::BAD_REQUEST,
            None,
            &format!("T resuming {guess}"),
        )
        .await;
    }
    for bad in ["_GET_stream:1", "garbage", "get_12", "GET_1-1"] {
        let reply = s.get_stream(&urls[1], Some(bad)).await;
        expect::refused(
            reply,
            StatusCode::BAD_REQUEST,
            None,
            &format!("malformed Last-Event-ID {bad:?}"),
        )
        .await;
    }
    let reply = s.get_stream(&urls[1], Some("zzzzzzzzzzzz_1-0")).await;
    expect::refused(
        reply,
        StatusCode::BAD_REQUEST,
        None,
        "S resuming an unknown stream",
    )
    .await;

    let replayed = s.get_stream(&urls[2], Some(&ids[0])).await;
    let mut replayed = sse_with_proper_headers(replayed, "S resuming its own finished stream");
    let got = replayed.until_response(&json!(1), T).await;
    assert!(
        got.matched.is_some(),
        "own finished stream replays its result: {:?}",
        got.events
    );
    assert_eq!(
        got.with_method("notifications/progress").len(),
        2,
        "progress after the first: {:?}",
        got.messages
    );
    let listed = t
        .post(&urls[0], &msg::bare(5, "tools/list"))
        .await
        .answer(json!(5), T)
        .await;
    assert!(
        listed.response["result"]["tools"].is_array(),
        "T still works"
    );
}

/// Resuming from an event the capped log has already dropped is 410; from a retained one, 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c15_resume_from_trimmed_history_is_410() {
    let cluster = Cluster::start(
        3,
        ClusterOptions::new().set("session.max_events_per_stream", 3),
    );
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let ids = progress_ids(&client, &urls[0], 1, 8).await;
    assert_eq!(ids.len(), 8);
    let reply = client.get_stream(&urls[1], Some(&ids[0])).await;
    expect::refused(reply, StatusCode::GONE, None, "resume from a trimmed event").await;
    let reply = client.get_stream(&urls[2], Some(&ids[6])).await;
    let mut stream = sse_with_proper_headers(reply, "resume from a retained event");
    let got = stream.until_response(&json!(1), T).await;
    assert!(
        got.matched.is_some(),
        "retained tail replays the result: {:?}",
        got.events
    );
    assert_eq!(
        got.with_method("notifications/progress").len(),
        1,
        "{:?}",
        got.messages
    );
}

/// A resumed stream is primed too (issue 34): a GET with `Last-Event-ID` starts with a priming
/// event whose id is the one resumed from, so a client cut off before the next event still holds
/// a position; resumed again from it on a third node, every progress event arrives once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_stream_is_primed_and_a_cut_before_its_next_event_loses_nothing() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let call = msg::call_with_progress(1, "countdown", json!({"n": 4, "interval_ms": 400}), "p");
    let mut first = sse_with_proper_headers(client.post(&urls[0], &call).await, "call");
    let got = first.until_method("notifications/progress", T).await;
    let progress = got.matched.expect("the first progress event");
    let e1 = got
        .events
        .last()
        .and_then(|e| e.id.clone())
        .expect("its id");
    drop(first);

    let mut cut = sse_with_proper_headers(client.get_stream(&urls[1], Some(&e1)).await, "B");
    let primed = cut
        .next_event(T)
        .await
        .expect("an event on the resumed stream");
    assert!(
        primed.is_priming(),
        "resumed stream starts primed: {primed:?}"
    );
    assert_eq!(
        primed.id.as_deref(),
        Some(e1.as_str()),
        "primed at the id resumed from"
    );
    assert_eq!(primed.retry, Some(3000), "with the retry hint");
    drop(cut);

    let again = client.get_stream(&urls[2], primed.id.as_deref()).await;
    let mut again = sse_with_proper_headers(again, "C");
    let got = again.until_response(&json!(1), T).await;
    assert!(
        got.matched.is_some(),
        "the call's result after the second resume"
    );
    let first_event = got.events.first().expect("events");
    assert!(first_event.is_priming(), "primed again: {first_event:?}");
    let mut values = vec![progress["params"]["progress"].as_f64().expect("number")];
    for m in got.with_method("notifications/progress") {
        values.push(m["params"]["progress"].as_f64().expect("number"));
    }
    assert_eq!(values.len(), 4, "every progress event once: {values:?}");
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "in order: {values:?}"
    );
}
