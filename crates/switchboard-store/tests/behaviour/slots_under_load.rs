//! Redis Cluster slots moved while a node is busy: Redis unsubscribes the moved slots' sharded
//! channels with an unsolicited `sunsubscribe` push, and the node's commands must not notice.
//! When subscriptions and commands shared one cluster connection, `redis` took such a push for
//! the reply of the oldest command waiting there, every later reply went to the wrong command
//! (`Incompatible type` errors, then a panic in the crate and every command timing out), and the
//! node fenced itself for good (found by a break-it review: 300 held streams, 30 slot moves).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchboard_store::redis::RedisTopology;
use switchboard_store::*;
use switchboard_tests::peers::available_or_skip;
use switchboard_tests::redis_cluster::RedisCluster;
use switchboard_tests::redis_process::*;

use crate::harness::*;

/// Sessions this node takes part in (each a subscribed channel), and how many of their slots
/// move.
const SESSIONS: usize = 40;
const MOVES: usize = 12;
/// Commands kept in flight at once while the slots move.
const LOAD: usize = 8;

async fn open(topology: &RedisTopology, node: &str) -> Arc<dyn Store> {
    let config = StoreConfig {
        key_prefix: "sbs".into(),
        ..StoreConfig::default_for(node)
    };
    RedisStore::open(topology, config).await.expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_moved_under_load_leave_commands_and_subscriptions_sound() {
    let tools = [
        ("redis-server", redis_server_binary().is_some()),
        ("redis-cli", redis_cli_binary().is_some()),
    ];
    if !available_or_skip("slots moved under load", &tools) {
        return;
    }
    let cluster = Arc::new(RedisCluster::start());
    let topology = RedisTopology::cluster(&cluster.seed_urls());
    let (a, b) = (open(&topology, "a").await, open(&topology, "b").await);
    let mut ra = a.subscribe().await.unwrap();
    a.heartbeat().await.unwrap();
    let mut sids = Vec::new();
    for _ in 0..SESSIONS {
        let sid = new_session(&a).await;
        takes_part(&a, &sid).await;
        sids.push(sid);
    }
    let sids = Arc::new(sids);

    // Commands in flight on a's connection the whole time.
    let (stop, done, failed) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let errors = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let load: Vec<_> = (0..LOAD)
        .map(|i| {
            let (a, sids) = (a.clone(), sids.clone());
            let (stop, done, failed) = (stop.clone(), done.clone(), failed.clone());
            let errors = errors.clone();
            tokio::spawn(async move {
                let mut n = i;
                while !stop.load(Ordering::SeqCst) {
                    match a.exists(&sids[n % sids.len()]).await {
                        Ok(true) => done.fetch_add(1, Ordering::SeqCst),
                        other => {
                            errors.lock().unwrap().push(format!("{other:?}"));
                            failed.fetch_add(1, Ordering::SeqCst)
                        }
                    };
                    n += LOAD;
                }
            })
        })
        .collect();

    // Move the slots of MOVES sessions, one after another, each to another primary.
    let moved: Vec<String> = sids.iter().take(MOVES).cloned().collect();
    let mover = {
        let (cluster, moved) = (cluster.clone(), moved.clone());
        tokio::task::spawn_blocking(move || {
            for sid in &moved {
                let slot = cluster.keyslot(&format!("sbs:{{{sid}}}:bus"));
                let owner = cluster.slot_owner(slot);
                let to = cluster
                    .primaries()
                    .into_iter()
                    .find(|p| *p != owner)
                    .expect("another primary");
                let step = cluster.move_slot(slot, to);
                cluster.wait_slot_agreed(&step);
            }
        })
    };
    mover.await.expect("slot moves");
    stop.store(true, Ordering::SeqCst);
    for task in load {
        task.await.expect("load task");
    }
    let (ok, bad) = (done.load(Ordering::SeqCst), failed.load(Ordering::SeqCst));
    assert!(ok > 0, "the load ran");
    // A redirection the cluster client gave up following while the slot map changed under it
    // (`Moved`, `Ask`, `TryAgain`) is Redis resharding, a 503 for that one request; any other
    // failure (a wrong reply type, a timeout, a dead connection) is the bug.
    let errors = errors.lock().unwrap().clone();
    let (redirected, broken): (Vec<_>, Vec<_>) = errors
        .iter()
        .partition(|e| ["Moved", "Ask", "TryAgain"].iter().any(|r| e.contains(r)));
    assert!(
        broken.is_empty(),
        "commands failed or got a wrong answer while slots moved ({ok} ok): {broken:?}"
    );
    assert!(
        (redirected.len() as u64) * 100 <= ok + bad,
        "redirections not followed: {} of {} ({redirected:?})",
        redirected.len(),
        ok + bad
    );

    // Every moved session's messages reach a again: a reply routed from b for each.
    for (i, sid) in moved.iter().enumerate() {
        let key = format!("r{i}");
        a.register_pending(sid, &key).await.unwrap();
        let routed = b.route_reply(sid, &key, &json!({"i": i})).await.unwrap();
        assert_eq!(routed, Routed::Delivered, "{sid}");
    }
    let mut got = 0;
    while got < moved.len() {
        match tokio::time::timeout(Duration::from_secs(5), ra.recv()).await {
            Ok(Some(BusMessage::Reply { .. })) => got += 1,
            Ok(Some(_)) => {}
            other => {
                let subscribers: Vec<String> = moved
                    .iter()
                    .map(|sid| {
                        let channel = format!("sbs:{{{sid}}}:bus");
                        let owner = cluster.slot_owner(cluster.keyslot(&channel));
                        format!("{:?}", cluster.shard_numsub(owner, &channel))
                    })
                    .collect();
                panic!(
                    "{got} of {} replies arrived, then {other:?}; subscribers of the moved channels on their owners: {subscribers:?}",
                    moved.len()
                )
            }
        }
    }
}
