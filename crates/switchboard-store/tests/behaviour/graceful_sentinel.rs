//! `SENTINEL FAILOVER` (planned: the old primary stays up) with `min_replicas_acked` counting every
//! replica (RELIABILITY.md, finding 8). Nothing acknowledged is lost, and writes go on as soon as
//! the node follows the new primary, not only once the sentinels have turned the old primary into
//! a replica (8–10 s later: until then the new primary has one replica fewer than before).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ::redis::Value;
use switchboard_store::redis::RedisTopology;
use switchboard_store::*;
use switchboard_tests::eventually::{eventually, eventually_sync};
use switchboard_tests::peers::available_or_skip;
use switchboard_tests::redis_process::*;
use switchboard_tests::redis_sentinel::{SentinelGroup, SentinelOptions};

use crate::harness::*;

/// How long the switch and the old primary's conversion may take (measured: 1–2 s, then 8–11 s).
const LIMIT: Duration = Duration::from_secs(60);

/// How often the writer appends.
const PACE: Duration = Duration::from_millis(40);

/// The events acknowledged to the writer, each with when.
type Acked = Arc<Mutex<Vec<(String, Instant)>>>;

/// Appends `e<n>` every [`PACE`] until `stop`, `e<n>` again until it is acknowledged.
async fn write_until(
    store: Arc<dyn Store>,
    sid: String,
    stream: String,
    acked: Acked,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(PACE);
    let mut n = 0;
    while !*stop.borrow() {
        tick.tick().await;
        let data = format!("e{n}");
        if let Ok(a) = store.append(&sid, &stream, &data, false).await {
            if a.is_stored() {
                acked.lock().unwrap().push((data, Instant::now()));
                n += 1;
            }
        }
    }
}

/// The role `port` answers `ROLE` with.
fn role_of(group: &SentinelGroup, port: u16) -> Option<String> {
    match group.query_port::<Value>(port, &["ROLE"]).ok()? {
        Value::Array(parts) => match parts.first()? {
            Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
            _ => None,
        },
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_sentinel_failover_waiting_for_every_replica_loses_nothing_and_goes_on() {
    let tools = [
        ("redis-server", redis_server_binary().is_some()),
        ("redis-sentinel", redis_sentinel_binary().is_some()),
    ];
    if !available_or_skip("a_graceful_sentinel_failover_…", &tools) {
        return;
    }
    let group = Arc::new(SentinelGroup::start_with(SentinelOptions {
        replicas: 2,
        ..SentinelOptions::default()
    }));
    let topology = RedisTopology::sentinel(&group.sentinel_urls(), group.master_name());
    let config = StoreConfig {
        key_prefix: "sbg".into(),
        min_replicas_acked: 2,
        replicas_ack_timeout: Duration::from_millis(500),
        max_events_per_stream: 100_000,
        ..StoreConfig::default_for("a")
    };
    let a: Arc<dyn Store> = RedisStore::open(&topology, config).await.expect("connect");
    let sid = new_session(&a).await;
    let s = stream();
    begin_ok(&a, &sid, Some(&inflight("1", &s, "a", "a/1"))).await;

    let acked: Acked = Arc::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let writer = tokio::spawn(write_until(
        a.clone(),
        sid.clone(),
        s.clone(),
        acked.clone(),
        stopped,
    ));
    eventually("appends confirmed by both replicas", LIMIT, || {
        let n = acked.lock().unwrap().len();
        async move { (n >= 10).then_some(()) }
    })
    .await;

    let g = group.clone();
    let (switch, demoted_at) = tokio::task::spawn_blocking(move || {
        let switch = g.graceful_failover(LIMIT);
        eventually_sync("the old primary to answer ROLE as a replica", LIMIT, || {
            (role_of(&g, switch.old).as_deref() == Some("slave")).then_some(())
        });
        (switch, Instant::now())
    })
    .await
    .unwrap();
    let count_at_demotion = acked.lock().unwrap().len();
    eventually("appends confirmed after the demotion", LIMIT, || {
        let n = acked.lock().unwrap().len();
        async move { (n >= count_at_demotion + 10).then_some(()) }
    })
    .await;
    stop.send(true).unwrap();
    writer.await.unwrap();

    let acked = acked.lock().unwrap().clone();
    let between: Vec<&(String, Instant)> = acked
        .iter()
        .filter(|(_, at)| *at > switch.seen_at && *at < demoted_at)
        .collect();
    let longest_wait = acked
        .windows(2)
        .map(|w| w[1].1 - w[0].1)
        .max()
        .unwrap_or_default();

    eprintln!(
        "switch after {:?}; old primary a replica {:?} after the switch; {} of {} appends \
         confirmed in between; longest time between two confirmed appends {longest_wait:?}",
        switch.took,
        demoted_at - switch.seen_at,
        between.len(),
        acked.len()
    );
    assert!(
        !between.is_empty(),
        "no append was confirmed between the switch and the old primary's demotion ({:?}): \
         writes waited for a replica that was not replicating",
        demoted_at - switch.seen_at
    );

    // Every acknowledged event is in the log, in order (a write that failed may be there too:
    // the writer sent it again).
    let logged: Vec<String> = match a.replay(&sid, &s, "0-0", 100_000).await.unwrap() {
        Replay::Events(events) => events.into_iter().map(|e| e.data).collect(),
        other => panic!("the stream's log is gone: {other:?}"),
    };
    let mut rest = logged.iter();
    for (data, _) in &acked {
        assert!(
            rest.any(|l| l == data),
            "acknowledged event {data} is not in the log (in order): {} logged, {} acknowledged",
            logged.len(),
            acked.len()
        );
    }
}
