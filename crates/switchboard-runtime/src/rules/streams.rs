//! The rules of one held stream: replay and live events each once and in order, the log re-read
//! writing what the bus missed, a gone log closing the stream, a dead replica's request ended.

use std::sync::Arc;
use std::time::Duration;

use switchboard_protocol::StreamId;
use switchboard_store::{InflightRequest, Replay, RunningRequest, Store};

use super::{answer, next_event, note, Host, Rig, NODE_TTL};
use crate::hub::StreamEvent;
use crate::replica::Replica;

/// The replay, then live events from the hub, each written once and in order (an event
/// delivered again is skipped), until the end event, which ends the stream.
///
/// # Panics
/// When the host breaks the rule.
pub async fn replay_then_live_events_each_once_in_order<H: Host>(host: &H) {
    let r = Rig::new(host, Duration::from_secs(60)).await;
    let stream = StreamId::generate().as_str().to_owned();
    r.append(&stream, &note(1), false).await;
    r.append(&stream, &note(2), false).await;
    let (mut rx, holder) = r.open(host, &stream, "0-0", None).await;
    assert_eq!(next_event(&mut rx).await, Some(note(1)));
    assert_eq!(next_event(&mut rx).await, Some(note(2)));
    let logged = match r.replica.store().replay(&r.sid, &stream, "0-0", 10).await {
        Ok(Replay::Events(logged)) => logged,
        other => panic!("the log: {other:?}"),
    };
    let hub = r.replica.hub();
    hub.deliver(
        &r.sid,
        &stream,
        &holder,
        StreamEvent::from(logged[1].clone()),
    );
    let live = |position: String, message: &serde_json::Value, end: bool| StreamEvent {
        position,
        data: message.to_string(),
        end,
    };
    let p3 = r.append(&stream, &note(3), false).await;
    hub.deliver(&r.sid, &stream, &holder, live(p3, &note(3), false));
    let p4 = r.append(&stream, &answer(4), true).await;
    hub.deliver(&r.sid, &stream, &holder, live(p4, &answer(4), true));
    assert_eq!(next_event(&mut rx).await, Some(note(3)), "2 again skipped");
    assert_eq!(next_event(&mut rx).await, Some(answer(4)));
    assert_eq!(next_event(&mut rx).await, None, "the end event ends it");
}

/// An event logged but never delivered by the bus is written at the next re-read of the log.
///
/// # Panics
/// When the host breaks the rule.
pub async fn a_recheck_writes_what_the_bus_did_not_deliver<H: Host>(host: &H) {
    let r = Rig::new(host, Duration::from_millis(50)).await;
    let stream = StreamId::generate().as_str().to_owned();
    r.append(&stream, &note(1), false).await;
    let (mut rx, _holder) = r.open(host, &stream, "0-0", None).await;
    assert_eq!(next_event(&mut rx).await, Some(note(1)));
    r.append(&stream, &note(2), false).await;
    assert_eq!(
        next_event(&mut rx).await,
        Some(note(2)),
        "missed by the bus"
    );
    r.append(&stream, &answer(3), true).await;
    assert_eq!(next_event(&mut rx).await, Some(answer(3)));
    assert_eq!(next_event(&mut rx).await, None);
}

/// A resumed stream whose log the store does not know (expired, or never there) closes at its
/// re-read, for its client to hear why when it resumes again.
///
/// # Panics
/// When the host breaks the rule.
pub async fn a_stream_whose_log_is_gone_closes<H: Host>(host: &H) {
    let r = Rig::new(host, Duration::from_millis(50)).await;
    let stream = StreamId::generate().as_str().to_owned();
    let (mut rx, _holder) = r.open(host, &stream, "5-0", None).await;
    assert_eq!(next_event(&mut rx).await, None, "closed");
}

/// A resumed request whose replica is dead (its heartbeat key missing while this replica has
/// reached the store for two `node_ttl`s) ends with error -32004 naming that replica, after
/// what it had logged.
///
/// # Panics
/// When the host breaks the rule.
pub async fn a_request_of_a_dead_replica_ends_with_its_error<H: Host>(host: &H) {
    let r = Rig::new(host, Duration::from_secs(60)).await;
    let stream = StreamId::generate().as_str().to_owned();
    let b: Arc<dyn Store> = r.memory.for_node("b");
    let inflight = InflightRequest {
        request_key: "7".into(),
        stream: stream.clone(),
        node: "b".into(),
        holder: "b/1".into(),
    };
    b.begin(&r.sid, Some(&inflight)).await.expect("b registers");
    r.append(&stream, &note(1), false).await;
    r.replica.health().answered(true, Duration::from_secs(60));
    wait_past_dead(&r).await;
    let watch = RunningRequest {
        node: "b".into(),
        request_key: "7".into(),
    };
    let (mut rx, _holder) = r.open(host, &stream, "0-0", Some(watch)).await;
    assert_eq!(next_event(&mut rx).await, Some(note(1)));
    let last = next_event(&mut rx).await.expect("the lost request's error");
    assert_eq!(last["id"], 7);
    assert_eq!(last["error"]["code"], -32004);
    let message = last["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("node b running it stopped"), "{message}");
    assert_eq!(next_event(&mut rx).await, None);
}

/// Waits until replica `b`, which never beat, counts as dead for replica `a` (bounded).
pub(super) async fn wait_past_dead<H: Host>(r: &Rig<H>) {
    let deadline = tokio::time::Instant::now() + super::WAIT;
    let replica: &dyn Replica = r.replica.as_ref();
    while !crate::liveness::is_dead(replica, "b").await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "b never counted dead"
        );
        tokio::time::sleep(NODE_TTL / 4).await;
    }
}
