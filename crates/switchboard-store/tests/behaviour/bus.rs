//! Reply and cancel routing between nodes.

use std::collections::BTreeMap;

use serde_json::json;
use switchboard_store::*;

use crate::harness::*;

pub async fn replies_reach_the_waiting_node(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let (mut ra, mut rb) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    a.heartbeat().await.unwrap();
    let id = new_session(&a).await;
    a.register_pending(&id, "\"srv-1\"").await.unwrap();
    let answer = json!({"jsonrpc": "2.0", "id": "srv-1", "result": {"roots": []}});
    assert_eq!(
        b.route_reply(&id, "\"srv-1\"", &answer).await.unwrap(),
        Routed::Delivered
    );
    let want = BusMessage::Reply {
        sid: id.clone(),
        request_key: "\"srv-1\"".into(),
        message: answer.clone(),
        trace: None,
    };
    assert_eq!(recv(&mut ra).await, want);
    quiet(&mut rb).await;
    assert_eq!(
        b.route_reply(&id, "\"srv-1\"", &answer).await.unwrap(),
        Routed::NobodyWaits,
        "answered once"
    );
    // A reply to this very node also travels through its inbox.
    b.register_pending(&id, "2").await.unwrap();
    assert_eq!(
        b.route_reply(&id, "2", &json!({})).await.unwrap(),
        Routed::Delivered
    );
    assert!(
        matches!(recv(&mut rb).await, BusMessage::Reply { request_key, .. } if request_key == "2")
    );
    // A forgotten request has nobody waiting.
    a.register_pending(&id, "3").await.unwrap();
    a.forget_pending(&id, "3").await.unwrap();
    assert_eq!(
        b.route_reply(&id, "3", &json!({})).await.unwrap(),
        Routed::NobodyWaits
    );
    quiet(&mut ra).await;
    // The waiting node stopped: the answer can reach nobody, and its sender hears so.
    a.register_pending(&id, "4").await.unwrap();
    a.retire().await.unwrap();
    assert_eq!(
        b.route_reply(&id, "4", &json!({})).await.unwrap(),
        Routed::WaiterStopped { node: "a".into() }
    );
}

pub async fn cancellations_reach_the_running_node(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let (mut ra, mut rb) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    let id = new_session(&a).await;
    begin_ok(&a, &id, Some(&inflight("4", &stream(), "a", "a/1"))).await;
    assert!(b.route_cancel(&id, "4", Some("user stop")).await.unwrap());
    let want = BusMessage::Cancel {
        sid: id.clone(),
        request_key: "4".into(),
        reason: Some("user stop".into()),
    };
    assert_eq!(recv(&mut ra).await, want);
    assert!(
        b.route_cancel(&id, "4", None).await.unwrap(),
        "still in flight until it finishes"
    );
    let want = BusMessage::Cancel {
        sid: id.clone(),
        request_key: "4".into(),
        reason: None,
    };
    assert_eq!(recv(&mut ra).await, want);
    assert!(!b.route_cancel(&id, "5", None).await.unwrap());
    quiet(&mut rb).await;
    a.finish(&id, "4", None).await.unwrap();
    assert!(!b.route_cancel(&id, "4", None).await.unwrap());
}

pub async fn a_full_inbox_holds_messages_back_without_losing_them(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let mut rb = b.subscribe().await.unwrap();
    let id = new_session(&a).await;
    takes_part(&b, &id).await;
    a.claim(&id, "get", "b/1").await.unwrap();
    let total = INBOX_CAPACITY + 200;
    for i in 0..total {
        a.append(&id, "get", &i.to_string(), false).await.unwrap();
    }
    for i in 0..total {
        match recv(&mut rb).await {
            BusMessage::Event(e) => assert_eq!(e.data, i.to_string()),
            other => panic!("expected event {i}, got {other:?}"),
        }
    }
}

pub async fn owners_are_claimed_by_compare_and_set(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let id = new_session(&a).await;
    assert_eq!(
        a.claim_owner(&id, "files", None).await.unwrap(),
        OwnerClaim::Claimed
    );
    assert_eq!(
        b.claim_owner(&id, "files", None).await.unwrap(),
        OwnerClaim::Held("a".into())
    );
    let BeginOutcome::Ready(record) = b.begin(&id, None).await.unwrap() else {
        panic!("session is live")
    };
    assert_eq!(record.owners.get("files").map(String::as_str), Some("a"));
    // b takes over from a (e.g. a died) only by naming a as the expected owner.
    assert_eq!(
        b.claim_owner(&id, "files", Some("a")).await.unwrap(),
        OwnerClaim::Claimed
    );
    assert_eq!(
        a.claim_owner(&id, "files", Some("a")).await.unwrap(),
        OwnerClaim::Held("b".into())
    );
    assert_eq!(
        a.claim_owner(&id, "other", None).await.unwrap(),
        OwnerClaim::Claimed
    );
    a.delete_session(&id).await.unwrap();
    assert_eq!(
        a.claim_owner(&id, "files", Some("b")).await.unwrap(),
        OwnerClaim::Missing
    );
}

pub async fn owners_of_many_sessions_are_read_at_once(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let (one, two, gone) = (
        new_session(&a).await,
        new_session(&a).await,
        new_session(&a).await,
    );
    a.claim_owner(&one, "files", None).await.unwrap();
    b.claim_owner(&one, "tool", None).await.unwrap();
    a.delete_session(&gone).await.unwrap();
    let sids = [one.clone(), two.clone(), gone.clone(), sid()];
    let owners = b.owners_of(&sids).await.unwrap();
    let expected = BTreeMap::from([
        ("files".to_owned(), "a".to_owned()),
        ("tool".to_owned(), "b".to_owned()),
    ]);
    assert_eq!(
        owners,
        vec![Some(expected), Some(BTreeMap::new()), None, None],
        "owners of a live session (none claimed: empty); a deleted or unknown one is None"
    );
    // A takeover shows at once.
    a.claim_owner(&one, "tool", Some("b")).await.unwrap();
    let owners = b.owners_of(&sids[..1]).await.unwrap();
    assert_eq!(owners[0].as_ref().unwrap()["tool"], "a");
    assert!(b.owners_of(&[]).await.unwrap().is_empty());
}

pub async fn messages_reach_the_named_node(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let (mut ra, mut rb) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    let msg = BusMessage::ForwardDone {
        call: "7".into(),
        outcome: json!({"result": {}}),
    };
    a.send_to("b", &msg).await.unwrap();
    assert_eq!(recv(&mut rb).await, msg);
    quiet(&mut ra).await;
    // Nobody listens for a node that does not exist: nothing fails.
    a.send_to("zz", &msg).await.unwrap();
}

pub async fn broadcasts_reach_every_node(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let (mut ra, mut rb) = (a.subscribe().await.unwrap(), b.subscribe().await.unwrap());
    let msg = BusMessage::Notify {
        origin: "b".into(),
        message: json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        principal: None,
    };
    b.broadcast(&msg).await.unwrap();
    assert_eq!(recv(&mut ra).await, msg);
    assert_eq!(
        recv(&mut rb).await,
        msg,
        "the sender's own inbox gets it too"
    );
    quiet(&mut ra).await;
    quiet(&mut rb).await;
}
