//! Store outages and dead replicas, on a private `redis-server` that the tests stop and restart
//! (and on the memory store where the fault is one of logic only): what a replica must do so that
//! a live replica's call is never cut, a request has at most one answer, and nothing of a dead
//! replica or a failed request wedges a session.

mod common;

use std::time::Duration;

use reqwest::StatusCode;
use rmcp::transport::streamable_http_server::SessionManager;
use serde_json::{json, Value};
use switchboard_protocol::{RequestId, StreamId};
use switchboard_rmcp::{ReplicatedConfig, ReplicatedSessionManager};
use switchboard_store::{BeginOutcome, InflightRequest};
use switchboard_tests::client::McpClient;
use switchboard_tests::eventually::eventually;
use switchboard_tests::redis_backend::{RedisBackend, RedisKind};

use common::{sampled, session, text_of, Env, Kind, WAIT};

/// Stops the env's Redis (after `SAVE`), keeps it down for `outage`, and starts it again from
/// its dump.
async fn redis_blip(env: &mut Env, outage: Duration) {
    let server = env.redis_server();
    let saved: String = server.query(&["SAVE"]).expect("SAVE");
    assert_eq!(saved, "OK");
    server.kill9();
    // The fault itself: Redis stays down this long (long enough for every heartbeat to lapse).
    tokio::time::sleep(outage).await;
    let restarted = tokio::task::block_in_place(|| server.restart());
    assert!(restarted, "redis-server came back");
}

/// A GET that resumes `last_event_id` on `url`, asked again while the replica's store
/// connection is still coming back (answers 500 meanwhile).
async fn resume(
    client: &McpClient,
    url: &str,
    last_event_id: &str,
) -> switchboard_tests::sse::SseStream {
    eventually("a resumption answered 200", WAIT, || async {
        let reply = client.get_stream(url, Some(last_event_id)).await;
        (reply.status == StatusCode::OK).then(|| reply.sse())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_replicas_call_survives_a_redis_restart() {
    let mut env = Env::new(Kind::Redis, Duration::from_secs(60));
    let node_ttl = env.config.node_ttl;
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, _) = session(&a.url).await;
    let mut call = client
        .call_tool(&a.url, 2, "ask", json!({"text": "hi"}))
        .await
        .sse();
    let priming = call.next_event(WAIT).await.expect("the priming event");
    let resume_from = priming.id.expect("an event id");
    let asked = call.until_method("sampling/createMessage", WAIT).await;
    let request_id = asked.matched.expect("A asks the client to sample")["id"].clone();

    // Every heartbeat key lapses while Redis is down (the dump keeps their old expiry).
    redis_blip(&mut env, 2 * node_ttl + Duration::from_secs(1)).await;
    let mut on_b = resume(&client, &b.url, &resume_from).await;
    let early = on_b
        .until_response(&json!(2), 2 * node_ttl + Duration::from_secs(2))
        .await;
    assert!(
        early.matched.is_none(),
        "A lives: its call must not be ended: {:?}",
        early.matched
    );

    // The call goes on: the client's answer, posted to B, reaches A, whose answer reaches B.
    let reply = client
        .post(&b.url, &sampled(&request_id, "after the blip"))
        .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    let answered = on_b.until_response(&json!(2), WAIT).await;
    let answer = answered.matched.expect("the call's one answer");
    assert_eq!(text_of(&answer), "after the blip", "{answer}");

    // The log holds exactly one answer.
    let mut again = resume(&client, &b.url, &resume_from).await;
    let events = again
        .until_end(WAIT)
        .await
        .expect("the ended stream closes");
    let answers = events
        .iter()
        .filter_map(|e| e.json())
        .filter(|m| m["id"] == json!(2))
        .count();
    assert_eq!(answers, 1, "{events:?}");
    drop(a);
}

/// The sampling request a call of `ask` sends: its wire id.
async fn asked(call: &mut switchboard_tests::sse::SseStream) -> Value {
    let asked = call.until_method("sampling/createMessage", WAIT).await;
    asked.matched.expect("the call asks the client to sample")["id"].clone()
}

/// rmcp numbers server-to-client requests from 0 per handler: a handler restored after the
/// previous one ended (rmcp's keep-alive, here `close_session`) must not receive an answer meant
/// for the previous one's request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_answer_never_reaches_a_later_handlers_request() {
    let env = Env::new(Kind::Memory, Duration::from_secs(60));
    let a = env.replica("a").await;
    let (client, sid) = session(&a.url).await;
    let mut first = client
        .call_tool(&a.url, 2, "ask", json!({"text": "A"}))
        .await
        .sse();
    let id_a = asked(&mut first).await;
    // The session's handler here ends (as when rmcp's keep-alive ends it); its call with it.
    a.manager.close_session(&sid.clone().into()).await.unwrap();
    first
        .until_end(WAIT)
        .await
        .expect("the first call's stream ends");

    let mut second = client
        .call_tool(&a.url, 3, "ask", json!({"text": "B"}))
        .await
        .sse();
    let id_b = asked(&mut second).await;
    assert_ne!(
        id_a, id_b,
        "a restored handler's request gets a new wire id"
    );
    let late = client
        .post(&a.url, &sampled(&id_a, "late answer meant for A"))
        .await;
    assert_eq!(late.status, StatusCode::ACCEPTED);
    let reply = client.post(&a.url, &sampled(&id_b, "for B")).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    let answered = second.until_response(&json!(3), WAIT).await;
    let answer = answered.matched.expect("the second call answers");
    assert_eq!(text_of(&answer), "for B", "{answer}");
}

/// Two processes started with the same configured node id run under different ids.
#[tokio::test]
async fn a_restarted_replica_runs_under_a_new_node_id() {
    let first = ReplicatedSessionManager::memory(ReplicatedConfig::new("a"))
        .await
        .unwrap();
    first.shutdown().await;
    let second = ReplicatedSessionManager::memory(ReplicatedConfig::new("a"))
        .await
        .unwrap();
    assert!(first.node_id().starts_with("a.") && second.node_id().starts_with("a."));
    assert_ne!(first.node_id(), second.node_id());
    second.shutdown().await;
}

/// Registers requests `ids` in flight in session `sid` as replica `node` does, each on a stream
/// no call runs behind (as a replica killed with -9 leaves them, or a POST that failed after the
/// store registered it).
async fn register_orphans(env: &Env, node: &str, sid: &str, ids: impl Iterator<Item = i64>) {
    let store = env.store(node).await;
    for id in ids {
        let inflight = InflightRequest {
            request_key: RequestId(json!(id)).key(),
            stream: StreamId::generate().as_str().to_owned(),
            node: node.to_owned(),
            holder: format!("{node}/{id}"),
        };
        let outcome = store.begin(sid, Some(&inflight)).await.expect("begin");
        assert!(matches!(outcome, BeginOutcome::Ready(_)), "{outcome:?}");
    }
}

/// Whether `whoami` with request id `id` is answered with a result (not refused).
async fn served(client: &McpClient, url: &str, id: i64) -> Option<()> {
    let reply = client.call_tool(url, id, "whoami", json!({})).await;
    let answer = reply.answer(json!(id), WAIT).await;
    answer.response.get("result").map(|_| ())
}

async fn a_dead_replicas_requests_do_not_wedge_the_session(kind: Kind) {
    let env = Env::new(kind, Duration::from_secs(60));
    let a = env.replica("a").await;
    // 64 calls (the session's cap) on replica c, killed with -9: nobody ended them.
    let (client, sid) = session(&a.url).await;
    register_orphans(&env, "c", &sid, 100..164).await;
    // Refused (-32003) only while A cannot tell that c is dead yet.
    eventually("a request past the dead replica's calls", WAIT, || {
        served(&client, &a.url, 5)
    })
    .await;
    // Another session: the id of c's call, sent again (-32600 while c counts as alive).
    let (client, sid) = session(&a.url).await;
    register_orphans(&env, "c", &sid, 9..10).await;
    eventually("the dead replica's request id, sent again", WAIT, || {
        served(&client, &a.url, 9)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_requests_do_not_wedge_the_session_memory() {
    a_dead_replicas_requests_do_not_wedge_the_session(Kind::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_requests_do_not_wedge_the_session_redis() {
    a_dead_replicas_requests_do_not_wedge_the_session(Kind::Redis).await;
}

/// A POST that failed (HTTP 500) after the store registered its request leaves no call behind
/// the registration: the next request refused for it ends it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_posts_registration_is_ended_by_the_next_refusal() {
    let env = Env::new(Kind::Memory, Duration::from_secs(60));
    let a = env.replica("a").await;
    let (client, sid) = session(&a.url).await;
    register_orphans(&env, "a", &sid, 9..10).await;
    assert_eq!(
        served(&client, &a.url, 9).await,
        Some(()),
        "id 9 is free again"
    );
    register_orphans(&env, "a", &sid, 100..164).await;
    assert_eq!(
        served(&client, &a.url, 5).await,
        Some(()),
        "the cap is free again"
    );
}

/// A call whose answer comes while Redis is down: the answer is logged once Redis is back (the
/// append is retried while the replica lives), and a client resuming elsewhere gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_produced_during_an_outage_is_logged_after_it() {
    let mut env = Env::new(Kind::Redis, Duration::from_secs(60));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, _) = session(&a.url).await;
    let mut call = client
        .call_tool(&a.url, 2, "wait", json!({"ms": 300}))
        .await
        .sse();
    let priming = call.next_event(WAIT).await.expect("the priming event");
    let resume_from = priming.id.expect("an event id");
    // Longer than a promotion: the answer waits for Redis.
    redis_blip(&mut env, Duration::from_secs(5)).await;
    let mut on_b = resume(&client, &b.url, &resume_from).await;
    let answered = on_b.until_response(&json!(2), WAIT).await;
    let answer = answered
        .matched
        .expect("the answer, logged after the outage");
    assert_eq!(text_of(&answer), "waited", "{answer}");
    // The request is no longer in flight: its id can be used again.
    assert_eq!(served(&client, &b.url, 2).await, Some(()));
    drop(a);
}

/// A `DELETE` while Redis is down is not lost: it is retried until Redis answers, the replica
/// that took it answers 404 meanwhile, and afterwards every replica does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_during_an_outage_takes_effect_after_it() {
    let mut env = Env::new(Kind::Redis, Duration::from_secs(60));
    let (a, b) = (env.replica("a").await, env.replica("b").await);
    let (client, _) = session(&a.url).await;
    let server = env.redis_server();
    let saved: String = server.query(&["SAVE"]).expect("SAVE");
    assert_eq!(saved, "OK");
    server.kill9();
    let deleted = client.delete(&a.url).await;
    assert_eq!(deleted.status, StatusCode::ACCEPTED);
    let list = switchboard_tests::msg::bare(3, "tools/list");
    assert_eq!(
        client.post(&a.url, &list).await.status,
        StatusCode::NOT_FOUND,
        "A knows at once"
    );
    let restarted = tokio::task::block_in_place(|| env.redis_server().restart());
    assert!(restarted);
    for url in [&a.url, &b.url] {
        eventually("the session gone on every replica", WAIT, || async {
            let status = client.post(url, &list).await.status;
            (status == StatusCode::NOT_FOUND).then_some(())
        })
        .await;
    }
    drop((a, b));
}

/// A call's progress notifications while its Redis has no primary (a Sentinel promotion, about
/// 4 s): each is tried again until the replica is promoted, with one append id, and the recorder
/// keeps the later ones behind it, so the call answers and its client gets every progress event
/// once, in order. Before, an event was given up after about 3 s and the call ended with -32004.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_notifications_ride_out_a_sentinel_promotion() {
    let backend = std::sync::Arc::new(RedisBackend::start(RedisKind::Sentinel));
    let mut env = Env::new(Kind::Shared(backend), Duration::from_secs(60));
    let a = env.replica("a").await;
    let (client, _) = session(&a.url).await;
    let args = json!({"n": 20, "ms": 150});
    let call = switchboard_tests::msg::call_with_progress(2, "progress", args, "promo");
    let mut stream = client.post(&a.url, &call).await.sse();
    let third = |m: &Value| m["params"]["progress"].as_f64() == Some(3.0);
    let before = stream.until(WAIT, third).await;
    assert!(before.matched.is_some(), "three steps: {:?}", before.events);
    let group = env.backend_mut().sentinel_mut();
    let old = group.primary_port();
    let promotion = tokio::task::block_in_place(|| {
        group.kill(old);
        group.wait_promotion(old, Duration::from_secs(20)).1
    });
    let after = stream
        .until_response(&json!(2), Duration::from_secs(30))
        .await;
    let answer = after
        .matched
        .clone()
        .unwrap_or_else(|| panic!("no answer: {:?}", after.events));
    println!(
        "== rmcp, Sentinel: promotion {} ms after the kill; answered {} ms after the call ==",
        promotion.as_millis(),
        stream.sent_at.elapsed().as_millis()
    );
    assert_eq!(text_of(&answer), "counted", "{answer}");
    let steps: Vec<f64> = (before.messages.iter().map(|(_, m)| m))
        .chain(&before.matched)
        .chain(after.messages.iter().map(|(_, m)| m))
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_f64().expect("progress"))
        .collect();
    let mut sorted = steps.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!(steps, sorted, "in order");
    let expected: Vec<f64> = (1..=20).map(f64::from).collect();
    assert_eq!(sorted, expected, "every step once");
}
