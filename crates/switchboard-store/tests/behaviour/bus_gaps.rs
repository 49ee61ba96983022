//! What the bus does through a gap in a node's subscription (case C37): messages posted while
//! its inbox cannot reconnect wait in its mailboxes and arrive once, in order; a lost doorbell is
//! made up for at the next check; a message past its deadline is dropped; a message posted twice
//! is taken once; a mailbox that began again is read from its start. Against a private
//! standalone Redis (the Cluster's slot moves and failovers: `tests/tests/cases_bus_slots.rs`).

use std::time::Duration;

use serde_json::json;
use switchboard_store::*;
use switchboard_tests::bus_drop;

use crate::harness::*;

/// A check every 200 ms, so the cases that wait for one stay short.
fn quick(config: &mut StoreConfig) {
    config.bus.check_interval = Duration::from_millis(200);
}

fn done(call: usize) -> BusMessage {
    BusMessage::ForwardDone {
        call: call.to_string(),
        outcome: json!({"result": {"n": call}}),
    }
}

/// A format 2 message as a node posts it, with message id `id`, due within a minute.
fn letter(id: &str, call: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    letter_until(id, call, now + 60_000)
}

/// [`letter`] with the deadline `deadline` (ms since the Unix epoch).
fn letter_until(id: &str, call: &str, deadline: u128) -> String {
    format!(
        r#"{{"_v":2,"_m":"{id}","_x":{deadline},"t":"forward_done","call":"{call}","outcome":{{}}}}"#
    )
}

/// Receives until `n` messages other than `Resubscribed` arrived (5 s each at most).
async fn next_messages(
    rx: &mut tokio::sync::mpsc::Receiver<BusMessage>,
    n: usize,
) -> Vec<BusMessage> {
    let mut got = Vec::new();
    while got.len() < n {
        match recv(rx).await {
            BusMessage::Resubscribed {} => {}
            other => got.push(other),
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_posted_while_the_inbox_is_held_off_arrive_once_in_order() {
    let env = Env::new(Kind::Redis, quick);
    let (a, b) = (env.node("a").await, env.node("b").await);
    let mut ra = a.subscribe().await.unwrap();
    let id = new_session(&a).await;
    a.register_pending(&id, "\"s1\"").await.unwrap();
    begin_ok(&a, &id, Some(&inflight("7", &stream(), "a", "a/1"))).await;

    let (mut held, killed) = bus_drop::hold_off(env.redis().port(), None);
    assert_eq!(killed, 1, "a's inbox connection");
    for call in 0..10 {
        b.send_to("a", &done(call)).await.unwrap();
    }
    let answer = json!({"jsonrpc": "2.0", "id": "s1", "result": {"role": "assistant"}});
    a.heartbeat().await.unwrap();
    assert_eq!(
        b.route_reply(&id, "\"s1\"", &answer).await.unwrap(),
        Routed::Delivered
    );
    assert!(b.route_cancel(&id, "7", Some("stop")).await.unwrap());
    let notice = BusMessage::Notify {
        origin: "b".into(),
        message: json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        principal: None,
    };
    b.broadcast(&notice).await.unwrap();
    // Read from the mailboxes over the command connection while the inbox still cannot
    // reconnect (a `Resubscribed` comes with each such read, for held streams).
    let got = next_messages(&mut ra, 13).await;
    let subscribers = held.numsub("sbt:inbox:a");
    held.release();
    assert_eq!(subscribers, 0, "delivered while the inbox was held off");
    let mut want: Vec<BusMessage> = (0..10).map(done).collect();
    want.push(BusMessage::Reply {
        sid: id.clone(),
        request_key: "\"s1\"".into(),
        message: answer,
        trace: None,
    });
    want.push(BusMessage::Cancel {
        sid: id.clone(),
        request_key: "7".into(),
        reason: Some("stop".into()),
    });
    // Broadcasts have a mailbox of their own: in order among themselves.
    let (broadcasts, direct): (Vec<_>, Vec<_>) = got
        .into_iter()
        .partition(|m| matches!(m, BusMessage::Notify { .. }));
    assert_eq!(direct, want, "each once, in the order sent");
    assert_eq!(broadcasts, vec![notice]);
    // And once it reconnects the inbox works as before.
    b.send_to("a", &done(99)).await.unwrap();
    assert_eq!(next_messages(&mut ra, 1).await, vec![done(99)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_doorbell_is_made_up_for_at_the_next_check() {
    let env = Env::new(Kind::Redis, quick);
    let a = env.node("a").await;
    let mut ra = a.subscribe().await.unwrap();
    // Posted with no doorbell at all, as if its PUBLISH had reached nobody.
    let _: String = env
        .redis()
        .query(&[
            "XADD",
            "sbt:mbox:a",
            "0-*",
            "m",
            &letter("00000000000000aa", "x"),
        ])
        .unwrap();
    let started = std::time::Instant::now();
    let got = recv(&mut ra).await;
    assert!(
        matches!(&got, BusMessage::ForwardDone { call, .. } if call == "x"),
        "{got:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "within a check or two, took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_posted_twice_is_taken_once() {
    let env = Env::new(Kind::Redis, quick);
    let a = env.node("a").await;
    let mut ra = a.subscribe().await.unwrap();
    let twice = letter("00000000000000bb", "twice");
    for _ in 0..2 {
        let _: String = env
            .redis()
            .query(&["XADD", "sbt:mbox:a", "0-*", "m", &twice])
            .unwrap();
    }
    assert!(matches!(recv(&mut ra).await, BusMessage::ForwardDone { call, .. } if call == "twice"));
    quiet(&mut ra).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_past_its_deadline_is_dropped_and_counted() {
    let env = Env::new(Kind::Redis, quick);
    let a = env.node("a").await;
    let mut ra = a.subscribe().await.unwrap();
    let expired = || switchboard_telemetry::metrics::get().bus.expired.get();
    let before = expired();
    // Read after its deadline, as a message waiting out a long gap would be.
    let late = letter_until("00000000000000cc", "late", 1_000);
    for text in [late, letter("00000000000000dd", "on time")] {
        let _: String = env
            .redis()
            .query(&["XADD", "sbt:mbox:a", "0-*", "m", &text])
            .unwrap();
    }
    assert!(
        matches!(recv(&mut ra).await, BusMessage::ForwardDone { call, .. } if call == "on time")
    );
    quiet(&mut ra).await;
    assert!(expired() > before, "the dropped message is counted");
}

/// A deadline shorter than `bus.message_ttl` travels with the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_senders_deadline_travels_with_its_message() {
    let env = Env::new(Kind::Redis, quick);
    let b = env.node("b").await;
    b.send_within("a", &done(1), Duration::from_millis(1500))
        .await
        .unwrap();
    let posted: Vec<(String, Vec<String>)> = env
        .redis()
        .query(&["XRANGE", "sbt:mbox:a", "-", "+"])
        .unwrap();
    assert_eq!(posted[0].0, "0-1", "a mailbox numbers its messages from 1");
    let text = &posted[0].1[1];
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let deadline = v["_x"].as_u64().unwrap();
    assert!(
        deadline > now && deadline <= now + 1500,
        "{deadline} vs {now}"
    );
    assert_eq!(v["_v"], 2);
    assert_eq!(v["t"], "forward_done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mailbox_that_began_again_is_read_from_its_start() {
    let env = Env::new(Kind::Redis, quick);
    let (a, b) = (env.node("a").await, env.node("b").await);
    let mut ra = a.subscribe().await.unwrap();
    for call in 0..3 {
        b.send_to("a", &done(call)).await.unwrap();
    }
    assert_eq!(
        next_messages(&mut ra, 3).await,
        (0..3).map(done).collect::<Vec<_>>()
    );
    // Redis lost it (a restart without persistence, an eviction): numbering starts at 1 again.
    let _: i64 = env.redis().query(&["DEL", "sbt:mbox:a"]).unwrap();
    b.send_to("a", &done(3)).await.unwrap();
    b.send_to("a", &done(4)).await.unwrap();
    assert_eq!(next_messages(&mut ra, 2).await, vec![done(3), done(4)]);
    quiet(&mut ra).await;
}

/// The same with a mailbox that held one message: its next message is numbered `0-1` again, the
/// number the receiver's cursor already names (found by a break run: in Redis Cluster a session's
/// mailbox expires `bus.message_ttl` after its last message while the nodes keep their cursor,
/// and the second sampling answer of a session, a minute after its first, was lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mailbox_that_began_again_at_the_receivers_cursor_is_read_from_its_start() {
    let env = Env::new(Kind::Redis, quick);
    let (a, b) = (env.node("a").await, env.node("b").await);
    let mut ra = a.subscribe().await.unwrap();
    b.send_to("a", &done(0)).await.unwrap();
    assert_eq!(next_messages(&mut ra, 1).await, vec![done(0)]);
    let _: i64 = env.redis().query(&["DEL", "sbt:mbox:a"]).unwrap();
    b.send_to("a", &done(1)).await.unwrap();
    assert_eq!(next_messages(&mut ra, 1).await, vec![done(1)]);
    quiet(&mut ra).await;
}

/// A doorbell whose message its mailbox no longer holds (evicted, or lost with a demoted
/// primary) delivers the copy it carries: after a gap, and after the mailbox began again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doorbell_whose_mailbox_lost_its_message_delivers_its_copy() {
    let env = Env::new(Kind::Redis, quick);
    let (a, b) = (env.node("a").await, env.node("b").await);
    let mut ra = a.subscribe().await.unwrap();
    for call in 0..3 {
        b.send_to("a", &done(call)).await.unwrap();
    }
    assert_eq!(
        next_messages(&mut ra, 3).await,
        (0..3).map(done).collect::<Vec<_>>()
    );
    // Rung as the post script rings, but the mailbox does not hold the message: a gap (number
    // 9 after 3), then an earlier number once the mailbox is gone (it began again).
    let ring = |number: &str, id: &str, call: &str| {
        let text = letter(id, call);
        let payload = format!("{{\"_q\":\"{number}\",{}", &text[1..]);
        let _: i64 = env
            .redis()
            .query(&["PUBLISH", "sbt:inbox:a", &payload])
            .unwrap();
    };
    ring("0-9", "00000000000000e1", "gap");
    let got = recv(&mut ra).await;
    assert!(
        matches!(&got, BusMessage::ForwardDone { call, .. } if call == "gap"),
        "{got:?}"
    );
    let _: i64 = env.redis().query(&["DEL", "sbt:mbox:a"]).unwrap();
    ring("0-1", "00000000000000e2", "began again");
    let got = recv(&mut ra).await;
    assert!(
        matches!(&got, BusMessage::ForwardDone { call, .. } if call == "began again"),
        "{got:?}"
    );
    quiet(&mut ra).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mailboxes_are_capped_and_expire() {
    let env = Env::new(Kind::Redis, |c| {
        c.bus.mailbox_len = 5;
        c.bus.message_ttl = Duration::from_secs(30);
    });
    let b = env.node("b").await;
    for call in 0..200 {
        b.send_to("a", &done(call)).await.unwrap();
    }
    let len: i64 = env.redis().query(&["XLEN", "sbt:mbox:a"]).unwrap();
    assert!(len < 200, "MAXLEN ~ trims (kept {len})");
    let pttl: i64 = env.redis().query(&["PTTL", "sbt:mbox:a"]).unwrap();
    assert!(
        pttl > 0 && pttl <= 30_000,
        "a mailbox expires with bus.message_ttl ({pttl})"
    );
}
