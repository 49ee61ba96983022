//! An event append sent again after its first run landed: the event must be logged once.
//!
//! The chaos suite's `primary-kill` on Redis Cluster with `min_replicas_acked = 1` once saw a
//! `notify` message arrive twice under two event ids. An append is a pipeline of the append
//! script and `WAIT`; when its connection drops after the script ran (a primary killed while its
//! client waits in `WAIT`), the cluster client counts the request as never answered and sends it
//! again (`RetryMethod::Reconnect` for a dropped connection, in redis 1.8.1's
//! `cluster_handling/async_connection/request.rs`), so the script ran twice. Here the drop is
//! made deterministic: each primary has no replica, so `WAIT 1` blocks until its timeout, and the
//! test kills the waiting client with `CLIENT KILL` while it blocks.
//!
//! The other cases lose the reply of a command without a `WAIT` behind it ([`with_replies_lost`]):
//! a rate-limit take, a session creation (its reservation in the session index and its record)
//! and a request's registration must each take effect once and answer as the first sending would
//! have.

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_store::redis::RedisTopology;
use switchboard_store::*;
use switchboard_tests::peers::available_or_skip;
use switchboard_tests::redis_cluster::{RedisCluster, RedisClusterOptions};
use switchboard_tests::redis_process::*;

use crate::harness::*;

/// How long `WAIT` blocks (no replica ever confirms): the window in which the client is killed.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);

/// Kills the first client of the Redis at `port` found blocked in `WAIT` (polling `CLIENT LIST`
/// for at most 5 s); panics when none shows up.
fn kill_the_waiting_client(cluster: &RedisCluster, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let list: String = cluster.query_port(port, &["CLIENT", "LIST"]).unwrap();
        let waiting = list.lines().find(|l| l.contains(" cmd=wait "));
        if let Some(id) = waiting.and_then(|l| l.strip_prefix("id=")) {
            let id = id.split_whitespace().next().unwrap();
            let _: i64 = cluster
                .query_port(port, &["CLIENT", "KILL", "ID", id])
                .unwrap();
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("no client blocked in WAIT on :{port}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_sent_again_after_its_connection_dropped_is_logged_once() {
    let test = "an_append_sent_again_after_its_connection_dropped_is_logged_once";
    let Some(cluster) = cluster_or_skip(test) else {
        return;
    };
    // The session is made without waiting for replicas (there are none); only the append waits.
    let setup = store_on(&cluster, |_| {}).await;
    let id = new_session(&setup).await;
    let s = stream();
    begin_ok(&setup, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    // The shard knows the append script from then on: the killed attempt runs it.
    assert!(setup
        .append(&id, &s, "before", false)
        .await
        .unwrap()
        .is_stored());
    let a = store_on(&cluster, |c| {
        c.min_replicas_acked = 1;
        c.replicas_ack_timeout = ACK_TIMEOUT;
    })
    .await;
    let port = cluster.primary_serving(&format!("sbr:{{{id}}}:s"));
    let killer = {
        let cluster = Arc::clone(&cluster);
        tokio::task::spawn_blocking(move || kill_the_waiting_client(&cluster, port))
    };
    // Every attempt ends unconfirmed (no replica): the store says so, whatever it stored.
    let appended = a.append(&id, &s, "once", false).await;
    killer.await.unwrap();
    assert!(
        matches!(appended, Err(StoreError::NotReplicated { .. })),
        "{appended:?}"
    );
    let waits = cluster.commandstats().get("wait").copied().unwrap_or(0);
    assert!(
        waits >= 2,
        "the cluster client sent the append again ({waits} WAITs)"
    );
    // `a` shows nothing its replicas do not hold: with none, its log reads are refused too.
    assert!(
        matches!(
            a.replay(&id, &s, "0-0", 10).await,
            Err(StoreError::NotReplicated { acked: 0, .. })
        ),
        "a log read confirmed by no replica"
    );
    let logged = match setup.replay(&id, &s, "0-0", 10).await.unwrap() {
        Replay::Events(events) => events,
        other => panic!("the stream's log is gone: {other:?}"),
    };
    let data: Vec<&str> = logged.iter().map(|e| e.data.as_str()).collect();
    assert_eq!(
        data,
        ["before", "once"],
        "the event is logged once: {logged:?}"
    );
}

/// A Redis Cluster of 3 primaries without replicas, or `None` (the test skips) without
/// `redis-server` and `redis-cli`.
fn cluster_or_skip(test: &str) -> Option<Arc<RedisCluster>> {
    let tools = [
        ("redis-server", redis_server_binary().is_some()),
        ("redis-cli", redis_cli_binary().is_some()),
    ];
    available_or_skip(test, &tools).then(|| {
        Arc::new(RedisCluster::start_with(RedisClusterOptions {
            replicas_per_primary: 0,
            ..RedisClusterOptions::default()
        }))
    })
}

/// A store on `cluster` (key prefix `sbr`, node `a`) with `tweak` applied to its settings.
async fn store_on(cluster: &RedisCluster, tweak: impl FnOnce(&mut StoreConfig)) -> Arc<dyn Store> {
    let mut config = StoreConfig {
        key_prefix: "sbr".into(),
        ..StoreConfig::default_for("a")
    };
    tweak(&mut config);
    let topology = RedisTopology::cluster(&cluster.seed_urls());
    RedisStore::open(&topology, config).await.unwrap()
}

/// How long a primary's writes are held at most (the pause lapses by itself after this).
const HOLD_LIMIT: Duration = Duration::from_secs(10);

/// Runs `call` so that the first write it sends to each primary of `lost` (its port, and a key
/// of the slot it writes there) runs but its reply is lost, as when a connection drops after its
/// command ran: each such primary holds its writes (`CLIENT PAUSE … WRITE`) until a write
/// waits there; a transaction queued behind it (it writes the key) kills that client
/// (`CLIENT KILL`) once its command has run, before its reply goes out; then the pause ends.
/// The cluster client sends the command again.
async fn with_replies_lost<T>(
    cluster: &Arc<RedisCluster>,
    lost: &[(u16, String)],
    call: impl std::future::Future<Output = T>,
) -> T {
    let ms = HOLD_LIMIT.as_millis().to_string();
    let killers: Vec<_> = lost
        .iter()
        .map(|(port, key)| {
            let () = cluster
                .query_port(*port, &["CLIENT", "PAUSE", &ms, "WRITE"])
                .unwrap();
            let (cluster, port, key) = (Arc::clone(cluster), *port, key.clone());
            tokio::task::spawn_blocking(move || kill_once_it_ran(&cluster, port, &key))
        })
        .collect();
    let out = call.await;
    for killer in killers {
        killer.await.unwrap();
    }
    out
}

/// See [`with_replies_lost`]: on the paused primary at `port`, kills the first client whose write
/// waits, right after that write has run.
fn kill_once_it_ran(cluster: &RedisCluster, port: u16, key: &str) {
    let victim = waiting_client(cluster, port, None);
    let killer = {
        let (url, key) = (format!("redis://127.0.0.1:{port}/"), key.to_owned());
        std::thread::spawn(move || {
            let mut conn = ::redis::Client::open(url)
                .unwrap()
                .get_connection()
                .unwrap();
            // Held behind the victim's write (a paused server runs them in order), it kills the
            // victim before the victim's reply is written.
            ::redis::pipe()
                .atomic()
                .cmd("DEL")
                .arg(key)
                .ignore()
                .cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(victim)
                .ignore()
                .query::<()>(&mut conn)
                .unwrap();
        })
    };
    waiting_client(cluster, port, Some(victim));
    let () = cluster.query_port(port, &["CLIENT", "UNPAUSE"]).unwrap();
    killer.join().unwrap();
}

/// The id of a client of the Redis at `port` held by its pause (flag `b`), other than `besides`
/// (polling `CLIENT LIST` for at most [`HOLD_LIMIT`]); panics when none shows up.
fn waiting_client(cluster: &RedisCluster, port: u16, besides: Option<u64>) -> u64 {
    let deadline = Instant::now() + HOLD_LIMIT;
    while Instant::now() < deadline {
        let list: String = cluster.query_port(port, &["CLIENT", "LIST"]).unwrap();
        let held = list.lines().filter_map(|line| {
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            };
            let id = field("id")?.parse::<u64>().ok()?;
            (field("flags")?.contains('b') && Some(id) != besides).then_some(id)
        });
        if let Some(id) = held.into_iter().next() {
            return id;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("no write held on :{port}");
}

/// How many times `command` (`INFO commandstats`'s name, e.g. `evalsha`) has run on `port`.
fn runs_of(cluster: &RedisCluster, port: u16, command: &str) -> u64 {
    let stats = commandstats_of(port, cluster.password());
    stats.get(command).copied().unwrap_or(0)
}

/// A rate-limit take sent twice (its first sending ran, its reply was lost) counts once: with a
/// burst of 2, a second take still passes and only a third is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_take_sent_again_counts_once() {
    let Some(cluster) = cluster_or_skip("a_rate_take_sent_again_counts_once") else {
        return;
    };
    let store = store_on(&cluster, |_| {}).await;
    let tag = sid();
    // One take per 100 s, burst 2; a limit of the same tag makes the shard know the script.
    let rates = [Rate::new("principal", &tag, "p", 0.01, 2)];
    let warm = [Rate::new("warm", &tag, "w", 0.01, 2)];
    assert_eq!(
        store.take_rates(&warm).await.unwrap(),
        RateDecision::Allowed
    );
    let port = cluster.primary_serving(&format!("sbr:rl:{{{tag}}}:p"));
    let before = runs_of(&cluster, port, "evalsha");
    let lost = [(port, format!("{{{tag}}}:probe"))];
    let first = with_replies_lost(&cluster, &lost, store.take_rates(&rates)).await;
    let sendings = runs_of(&cluster, port, "evalsha") - before;
    assert_eq!(first.unwrap(), RateDecision::Allowed);
    assert_eq!(sendings, 2, "the take was sent again");
    let second = store.take_rates(&rates).await.unwrap();
    assert_eq!(second, RateDecision::Allowed, "the first take counted once");
    let third = store.take_rates(&rates).await.unwrap();
    assert!(matches!(third, RateDecision::Limited { .. }), "{third:?}");
}

/// A session creation sent twice (its reservation in the session index, then its record, each
/// run twice) creates one session and answers `Created`, though its first reservation took the
/// last place under `session.max_sessions`; its principal's sessions count it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_creation_sent_again_creates_one_session() {
    let Some(cluster) = cluster_or_skip("a_session_creation_sent_again_creates_one_session") else {
        return;
    };
    let store = store_on(&cluster, |c| {
        c.max_sessions = 2;
        c.max_sessions_per_principal = 1;
    })
    .await;
    // Another principal's session takes the first place (and loads the reservation script).
    new_session(&store).await;
    let index = cluster.primary_serving("sbr:sessions");
    // A session whose record lives on another primary than the index, so each can be held.
    let ours = loop {
        let candidate = SessionRecord {
            principal: "alice".into(),
            ..record(&sid())
        };
        if cluster.primary_serving(&format!("sbr:{{{}}}:s", candidate.id)) != index {
            break candidate;
        }
    };
    let home = cluster.primary_serving(&format!("sbr:{{{}}}:s", ours.id));
    let (reserved, written) = (
        runs_of(&cluster, index, "evalsha"),
        runs_of(&cluster, home, "hset"),
    );
    let lost = [
        (index, "{sbr:sessions}:probe".to_owned()),
        (home, format!("{{{}}}:probe", ours.id)),
    ];
    let outcome = with_replies_lost(&cluster, &lost, store.create_session(&ours)).await;
    let reservations = runs_of(&cluster, index, "evalsha") - reserved;
    let writes = runs_of(&cluster, home, "hset") - written;
    assert_eq!(outcome.unwrap(), CreateOutcome::Created);
    assert_eq!(reservations, 2, "the reservation was sent again");
    assert_eq!(writes, 2, "the record was sent again");
    assert_eq!(store.count_sessions().await.unwrap(), 2, "counted once");
    let alices: i64 = cluster
        .query_port(index, &["ZCARD", "{sbr:sessions}:principal:alice"])
        .unwrap();
    assert_eq!(alices, 1, "one session of its principal");
    assert_eq!(begin_ok(&store, &ours.id, None).await, ours);
}

/// A request registered with its admission, sent twice, is admitted (not refused as a
/// duplicate of itself) and registered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_sent_again_is_admitted_once() {
    let Some(cluster) = cluster_or_skip("a_registration_sent_again_is_admitted_once") else {
        return;
    };
    let store = store_on(&cluster, |_| {}).await;
    let id = new_session(&store).await;
    // The session's shard knows the admission script from then on.
    let s0 = stream();
    begin_ok(&store, &id, Some(&inflight("0", &s0, "a", "a/0"))).await;
    let port = cluster.primary_serving(&format!("sbr:{{{id}}}:s"));
    let s = stream();
    let req = inflight("1", &s, "a", "a/1");
    let before = runs_of(&cluster, port, "evalsha");
    let lost = [(port, format!("{{{id}}}:probe"))];
    let outcome = with_replies_lost(&cluster, &lost, store.begin_rated(&id, &req, &[])).await;
    let sendings = runs_of(&cluster, port, "evalsha") - before;
    assert!(matches!(outcome, Ok(BeginOutcome::Ready(_))), "{outcome:?}");
    assert_eq!(sendings, 2, "the admission was sent again");
    let keys: Vec<String> = store
        .in_flight(&id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.request_key)
        .filter(|k| k != "0")
        .collect();
    assert_eq!(keys, ["1"]);
}
