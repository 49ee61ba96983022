//! The rules of lost requests ([`crate::lost`]): one of this replica with no call behind it is
//! ended, and its held stream hears so at once; one with a call running here is left alone.

use std::time::Duration;

use switchboard_protocol::StreamId;
use switchboard_store::InflightRequest;

use super::{next_event, note, Host, Rig};
use crate::lost::end_lost_requests;
use crate::replica::Replica;

fn inflight(stream: &str, key: &str) -> InflightRequest {
    InflightRequest {
        request_key: key.into(),
        stream: stream.to_owned(),
        node: "a".into(),
        holder: "a/0".into(),
    }
}

/// A request of this replica registered in flight with no call running here (its POST failed
/// after the store applied the registration) is ended: its held stream gets error -32004 at
/// once (no re-read needed) and ends, and the id is free again.
///
/// # Panics
/// When the host breaks the rule.
pub async fn a_lost_request_of_this_replica_is_ended<H: Host>(host: &H) {
    let r = Rig::new(host, Duration::from_secs(60)).await;
    let stream = StreamId::generate().as_str().to_owned();
    let store = r.replica.store();
    store
        .begin(&r.sid, Some(&inflight(&stream, "\"x\"")))
        .await
        .expect("begin");
    r.append(&stream, &note(1), false).await;
    let (mut rx, _holder) = r.open(host, &stream, "0-0", None).await;
    assert_eq!(next_event(&mut rx).await, Some(note(1)));
    let replica: &dyn Replica = r.replica.as_ref();
    let ended = end_lost_requests(replica, &r.sid, None)
        .await
        .expect("store");
    assert_eq!(ended, 1);
    let last = next_event(&mut rx).await.expect("the lost request's error");
    assert_eq!(last["id"], "x");
    assert_eq!(last["error"]["code"], -32004);
    assert_eq!(next_event(&mut rx).await, None);
    assert!(store.in_flight(&r.sid).await.expect("store").is_empty());
}

/// A request of this replica whose call runs here is not lost, and is left as it is.
///
/// # Panics
/// When the host breaks the rule.
pub async fn a_running_request_is_left_alone<H: Host>(host: &H) {
    let r = Rig::new(host, Duration::from_secs(60)).await;
    let stream = StreamId::generate().as_str().to_owned();
    let calls = r.replica.calls();
    let _running = calls.try_start(&r.sid, "1", &stream).expect("starts");
    let store = r.replica.store();
    store
        .begin(&r.sid, Some(&inflight(&stream, "1")))
        .await
        .expect("begin");
    let replica: &dyn Replica = r.replica.as_ref();
    let ended = end_lost_requests(replica, &r.sid, None)
        .await
        .expect("store");
    assert_eq!(ended, 0);
    assert_eq!(store.in_flight(&r.sid).await.expect("store").len(), 1);
    calls.end(&r.sid, "1");
}
