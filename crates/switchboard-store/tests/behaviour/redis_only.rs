//! Checks that only make sense against Redis: the data model on the wire, TTLs, the reaper lock,
//! script reloading and inbox reconnection.

use std::time::Duration;

use switchboard_store::*;

use crate::harness::*;

fn pttl(env: &Env, key: &str) -> i64 {
    env.redis()
        .query(&["PTTL", key])
        .expect("PTTL is an integer")
}

#[tokio::test]
async fn every_key_has_a_ttl_and_session_keys_share_the_hash_tag() {
    let env = Env::new(Kind::Redis, |c| c.max_events_per_stream = 2);
    let (a, b) = (env.node("a").await, env.node("b").await);
    let _rx = a.subscribe().await.unwrap();
    let id = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "b/1"))).await;
    for i in 0..3 {
        let once = rules::new_append_id();
        a.append_once(&id, &s, &format!("e{i}"), false, &once)
            .await
            .unwrap();
    }
    a.claim(&id, "get", "a/1").await.unwrap();
    // A plain append on standalone Redis carries no append id: no `ids:get` key.
    a.append(&id, "get", "n", false).await.unwrap();
    a.register_pending(&id, "p").await.unwrap();
    a.heartbeat().await.unwrap();
    assert!(b.reap(10).await.unwrap().is_empty());
    let keys = env.redis().all_keys();
    let tag = format!("{{{id}}}");
    let want = ["s", "st", "run", "inf", "pend", "bytes"]
        .iter()
        .map(|k| format!("sbt:{tag}:{k}"))
        .chain([
            format!("sbt:{tag}:log:{s}"),
            format!("sbt:{tag}:trim:{s}"),
            format!("sbt:{tag}:ids:{s}"),
            format!("sbt:{tag}:log:get"),
        ])
        .chain([
            "sbt:sessions".to_owned(),
            "sbt:node:a".to_owned(),
            "sbt:nodes".to_owned(),
        ]);
    let mut want: Vec<String> = want.collect();
    want.sort();
    assert_eq!(keys, want);
    for key in &keys {
        assert!(pttl(&env, key) > 0, "{key} has no TTL");
    }
    let len: i64 = env
        .redis()
        .query(&["XLEN", &format!("sbt:{tag}:log:{s}")])
        .unwrap();
    assert_eq!(len, 2, "the cap is exact");
    let ids: i64 = env
        .redis()
        .query(&["HLEN", &format!("sbt:{tag}:ids:{s}")])
        .unwrap();
    assert_eq!(ids, 2, "a trimmed event's append id is forgotten with it");
}

#[tokio::test]
async fn the_reaper_lock_keeps_other_nodes_out() {
    let env = Env::new(Kind::Redis, |c| c.idle_ttl = Duration::from_millis(200));
    let a = env.node("a").await;
    let id = new_session(&a).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held: String = env
        .redis()
        .query(&["SET", "sbt:reaper", "other-node", "PX", "10000"])
        .unwrap();
    assert_eq!(held, "OK");
    assert!(
        a.reap(10).await.unwrap().is_empty(),
        "another node holds the lock"
    );
    assert_eq!(
        env.redis().query::<String>(&["GET", "sbt:reaper"]).unwrap(),
        "other-node",
        "the lock is not ours to drop"
    );
    env.redis().query::<()>(&["DEL", "sbt:reaper"]).unwrap();
    assert_eq!(a.reap(10).await.unwrap(), vec![id]);
    let left: Vec<String> = env.redis().query(&["KEYS", "*"]).unwrap();
    assert_eq!(
        left,
        vec!["sbt:mbox:all".to_owned()],
        "the lock is released after a pass; the broadcast mailbox keeps the session's end for \
         bus.message_ttl"
    );
}

#[tokio::test]
async fn scripts_are_reloaded_after_a_flush() {
    let env = Env::new(Kind::Redis, |c| c.idle_ttl = Duration::from_millis(200));
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let gone = new_session(&a).await;
    env.redis().query::<()>(&["SCRIPT", "FLUSH"]).unwrap();
    assert!(
        a.delete_session(&id).await.unwrap(),
        "pipelined script after SCRIPT FLUSH"
    );
    env.redis().query::<()>(&["SCRIPT", "FLUSH"]).unwrap();
    begin_ok(&a, &gone, None).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    env.redis().query::<()>(&["SCRIPT", "FLUSH"]).unwrap();
    assert_eq!(a.reap(10).await.unwrap(), vec![gone]);
}

/// Whichever script a pipeline carries, `NOSCRIPT` loads it: `abort_running` of a request
/// answered on the standalone stream, on a node that waits for replicas, runs
/// `ABORT_TO_STANDALONE` in a pipeline with `WAIT`, a script the recovery's fixed list of
/// scripts lacked (it failed with `NOSCRIPT` after every flush). No replica exists here, so the
/// script, once loaded and run, ends in `NotReplicated`, and the event is on the standalone log.
#[tokio::test]
async fn a_pipelined_script_is_loaded_after_a_flush_whichever_it_is() {
    let env = Env::new(Kind::Redis, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let waits = RedisStore::open(
        &switchboard_store::redis::RedisTopology::standalone(&env.redis().url()),
        StoreConfig {
            key_prefix: "sbt".into(),
            min_replicas_acked: 1,
            replicas_ack_timeout: Duration::from_millis(50),
            ..StoreConfig::default_for("c")
        },
    )
    .await
    .expect("connect");
    let id = new_session(&a).await;
    assert!(matches!(
        b.claim(&id, "get", "b/1").await.unwrap(),
        Claim::Claimed { .. }
    ));
    let s = switchboard_protocol::StreamId::generate_standalone_answered().to_string();
    begin_ok(&a, &id, Some(&inflight("5", &s, "a", ""))).await;
    env.redis().query::<()>(&["SCRIPT", "FLUSH"]).unwrap();
    let aborted = waits.abort_running(&id, &s, "a", "{\"error\":1}").await;
    assert!(
        matches!(
            aborted,
            Err(StoreError::NotReplicated {
                acked: 0,
                wanted: 1
            })
        ),
        "the script ran after its load: {aborted:?}"
    );
    let logged = events(&a, &id, "get", "0-0").await;
    assert_eq!(logged.len(), 1, "the abort's event on the standalone log");
}

#[tokio::test]
async fn the_inbox_resubscribes_after_its_connection_drops() {
    let env = Env::new(Kind::Redis, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let mut ra = a.subscribe().await.unwrap();
    a.heartbeat().await.unwrap();
    let id = new_session(&a).await;
    let killed: i64 = env
        .redis()
        .query(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .unwrap();
    assert_eq!(killed, 1);
    // Sent at once, while the inbox reconnects: its mailbox keeps it. The reader announces its
    // resubscription, so the node can catch its streams' live events up from their logs.
    a.register_pending(&id, "1").await.unwrap();
    assert_eq!(
        b.route_reply(&id, "1", &serde_json::json!({}))
            .await
            .unwrap(),
        Routed::Delivered
    );
    let (mut announced, mut replies) = (false, 0);
    while !(announced && replies == 1) {
        match recv(&mut ra).await {
            BusMessage::Resubscribed {} => announced = true,
            BusMessage::Reply { request_key, .. } if request_key == "1" => replies += 1,
            other => panic!("{other:?}"),
        }
    }
    quiet(&mut ra).await;
}

#[tokio::test]
async fn connecting_to_nothing_fails() {
    let port = switchboard_tests::ports::free_port();
    let url = format!("redis://127.0.0.1:{port}/");
    let result = RedisStore::connect(&url, StoreConfig::default_for("a")).await;
    assert!(matches!(result, Err(StoreError::Backend(_))));
}

#[test]
fn config_defaults() {
    let c = StoreConfig::default_for("n1");
    assert_eq!(c.node_id, "n1");
    assert_eq!(c.key_prefix, "sb");
    assert_eq!(c.node_ttl, Duration::from_secs(5));
    assert_eq!(c.idle_ttl, Duration::from_secs(1800));
    assert_eq!((c.max_sessions, c.max_events_per_stream), (100_000, 1_000));
    assert!(StoreConfig::default().node_id.starts_with("node-"));
}

/// A node whose liveness key is gone (evicted under an evicting `maxmemory-policy`, allowed with
/// `redis.allow_eviction`) is alive while the node roster has a heartbeat of it within
/// `node_ttl`; dead once that is older, or once it retired.
#[tokio::test]
async fn a_node_whose_liveness_key_was_evicted_is_still_alive() {
    let env = Env::new(Kind::Redis, |c| c.node_ttl = Duration::from_millis(600));
    let (a, b) = (env.node("a").await, env.node("b").await);
    a.heartbeat().await.unwrap();
    let _: i64 = env.redis().query(&["DEL", "sbt:node:a"]).unwrap();
    assert!(
        b.is_alive("a").await.unwrap(),
        "the roster's heartbeat is fresh"
    );
    let pttl = pttl(&env, "sbt:nodes");
    assert!(pttl > 0, "the roster has a TTL ({pttl})");
    // Silent past node_ttl: dead.
    switchboard_tests::eventually::eventually(
        "a's heartbeat to age out",
        Duration::from_secs(5),
        || {
            let b = b.clone();
            async move { (!b.is_alive("a").await.unwrap()).then_some(()) }
        },
    )
    .await;
    a.heartbeat().await.unwrap();
    assert!(b.is_alive("a").await.unwrap());
    a.retire().await.unwrap();
    assert!(!b.is_alive("a").await.unwrap(), "retired at once");
}

/// A large event's upload (`redis/upload.rs`) cut while under way, as a failover to a replica
/// that never got it would: the append script finds it short and stores nothing, the append
/// uploads it again, and the event is logged whole, once. The cut is a `DEL` of the upload's key
/// on its first `APPEND` (keyspace notifications), while most of its pieces are still to come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_upload_is_uploaded_again_and_logged_once() {
    use futures::StreamExt;
    let env = Env::new(Kind::Redis, |_| {});
    let a = env.node("a").await;
    let id = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    env.redis()
        .query::<()>(&["CONFIG", "SET", "notify-keyspace-events", "E$"])
        .unwrap();
    let client = ::redis::Client::open(env.redis().url()).unwrap();
    let mut events_of_keys = client.get_async_pubsub().await.unwrap();
    events_of_keys
        .subscribe("__keyevent@0__:append")
        .await
        .unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let cut = tokio::spawn(async move {
        let mut appends = events_of_keys.on_message();
        let key: String = appends.next().await.unwrap().get_payload().unwrap();
        ::redis::cmd("DEL")
            .arg(&key)
            .query_async::<i64>(&mut conn)
            .await
            .unwrap()
    });
    let data = "u".repeat(3 << 20);
    let once = rules::new_append_id();
    a.append_once(&id, &s, &data, false, &once).await.unwrap();
    assert_eq!(cut.await.unwrap(), 1, "the upload was cut while under way");
    let logged = events(&a, &id, &s, "0-0").await;
    assert_eq!(logged.len(), 1);
    assert!(logged[0].data == data, "logged whole");
    let keys = env.redis().all_keys();
    assert!(!keys.iter().any(|k| k.contains(":up:")), "{keys:?}");
}
