//! The Redis topology fixtures hold what the store and chaos tests will lean on: a Redis Cluster
//! (`tests/src/redis_cluster/`) spreads hash tags over its primaries, promotes a killed
//! primary's replica and takes the old primary back as a replica; a Sentinel group
//! (`tests/src/redis_sentinel/`) promotes its replica, turns the restarted old primary into a
//! replica of the new one, and with passwords refuses a client that has not authenticated
//! (and still fails over: its sentinels authenticate to each other).
//! Each test runs its own processes on free ports, so they run in parallel; the measured
//! failover times are printed (`--nocapture` shows them).
//!
//! Needs `redis-server` and `redis-cli` (Debian `redis-server`, `redis-tools`) and
//! `redis-sentinel` (Debian `redis-sentinel`); without them a test prints `SKIPPED`, or fails
//! when `CI` is set.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::cluster::ClusterClientBuilder;
use redis::Commands;
use switchboard_tests::eventually::eventually_sync;
use switchboard_tests::peers::available_or_skip;
use switchboard_tests::redis_cluster::{RedisCluster, RedisClusterOptions};
use switchboard_tests::redis_process::{
    query_port, redis_cli_binary, redis_sentinel_binary, redis_server_binary, role_of,
};
use switchboard_tests::redis_sentinel::{SentinelGroup, SentinelOptions};

/// How long a promotion may take (Cluster node timeout 1 s or Sentinel down-after 3 s, then
/// election and promotion).
const FAILOVER_LIMIT: Duration = Duration::from_secs(15);

/// How long a restarted node may take to be a linked replica again (a Sentinel group needs
/// 8–11 s: see `SentinelGroup::wait_replica_of`).
const REJOIN_LIMIT: Duration = Duration::from_secs(30);

fn cluster_tools_or_skip(test: &str) -> bool {
    available_or_skip(
        test,
        &[
            ("redis-server", redis_server_binary().is_some()),
            ("redis-cli", redis_cli_binary().is_some()),
        ],
    )
}

fn sentinel_tools_or_skip(test: &str) -> bool {
    available_or_skip(
        test,
        &[
            ("redis-server", redis_server_binary().is_some()),
            ("redis-sentinel", redis_sentinel_binary().is_some()),
        ],
    )
}

/// The tags `a`, `b`, `c` hash to slots 15495, 3300 and 7365: one in each third of the slots,
/// so on three different primaries of a 3-primary cluster; `d` (11298) shares a third with `a`.
const TAGS: [&str; 4] = ["a", "b", "c", "d"];

#[test]
fn cluster_spreads_hash_tags_fails_over_and_takes_the_old_primary_back() {
    if !cluster_tools_or_skip("redis_cluster_failover") {
        return;
    }
    let mut cluster = RedisCluster::start();
    assert_eq!(cluster.ports().len(), 6);
    assert_eq!(cluster.seed_urls().len(), 6);
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3, "{primaries:?}");
    for &p in &primaries {
        assert_eq!(cluster.replicas_of(p).len(), 1, "replicas of redis:{p}");
    }

    // Written through redis's cluster client: each key goes to the primary serving its slot.
    let client = ClusterClientBuilder::new(cluster.seed_urls())
        .connection_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .build()
        .expect("cluster client");
    let mut conn = client.get_connection().expect("cluster connection");
    let keys: Vec<String> = TAGS.iter().map(|t| format!("{{{t}}}:k")).collect();
    for (key, tag) in keys.iter().zip(TAGS) {
        let () = conn.set(key, tag).expect("SET through the cluster client");
    }
    let holders: BTreeMap<u16, Vec<String>> = primaries
        .iter()
        .map(|&p| (p, cluster.keys_on(p, "*:k")))
        .collect();
    let holder_of = |key: &str| -> Vec<u16> {
        let on = holders.iter().filter(|(_, ks)| ks.iter().any(|k| k == key));
        on.map(|(p, _)| *p).collect()
    };
    for key in &keys {
        assert_eq!(holder_of(key).len(), 1, "{key} on {holders:?}");
    }
    let distinct: Vec<u16> = keys[..3].iter().map(|k| holder_of(k)[0]).collect();
    assert_eq!(
        distinct
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        3,
        "{{a}}, {{b}}, {{c}} on three primaries: {holders:?}"
    );
    assert_eq!(holder_of(&keys[3]), holder_of(&keys[0]), "{holders:?}");
    assert_eq!(cluster.keys_matching("*:k"), keys);
    assert_eq!(cluster.dbsize(), 4);
    assert_eq!(cluster.commandstats().get("set"), Some(&4));

    // Kill the primary of {a}: its replica (which has the key) takes over.
    let victim = holder_of(&keys[0])[0];
    let replica = cluster.replicas_of(victim)[0];
    eventually_sync("the replica to hold {a}:k", Duration::from_secs(5), || {
        (cluster.keys_on(replica, "{a}:k") == [keys[0].clone()]).then_some(())
    });
    cluster.kill(victim);
    assert!(!cluster.is_up(victim));
    let (promoted, took) = cluster.wait_failover(victim, FAILOVER_LIMIT);
    println!("cluster failover: redis:{victim} killed, redis:{promoted} primary after {took:?}");
    assert_eq!(promoted, replica);
    let now = cluster.primaries();
    assert!(now.contains(&promoted) && !now.contains(&victim), "{now:?}");
    let fresh = ClusterClientBuilder::new(cluster.seed_urls())
        .connection_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .build()
        .expect("cluster client");
    let mut conn = fresh.get_connection().expect("cluster connection");
    let value: String = conn.get(&keys[0]).expect("GET {a}:k after the failover");
    assert_eq!(value, "a");

    // The old primary comes back on its port and nodes.conf as a replica of the promoted one.
    cluster.restart(victim);
    let (primary_of, took) = cluster.wait_rejoined(victim, REJOIN_LIMIT);
    println!(
        "cluster rejoin: redis:{victim} a linked replica of redis:{primary_of} after {took:?}"
    );
    assert_eq!(primary_of, promoted);
    cluster.wait_healthy(REJOIN_LIMIT);
    assert_eq!(cluster.replicas_of(promoted), vec![victim]);

    cluster.flushall();
    assert_eq!(cluster.dbsize(), 0);
    assert!(cluster.keys_matching("*").is_empty());
}

#[test]
fn cluster_with_a_password_refuses_a_client_without_it() {
    if !cluster_tools_or_skip("redis_cluster_password") {
        return;
    }
    let cluster = RedisCluster::start_with(RedisClusterOptions {
        password: Some("cluster-secret".into()),
        appendonly: true,
        ..RedisClusterOptions::default()
    });
    assert_eq!(cluster.password(), Some("cluster-secret"));
    let port = cluster.ports()[0];
    let refused = query_port::<String>(port, None, &["PING"]).expect_err("PING without AUTH");
    assert_eq!(refused.code(), Some("NOAUTH"), "{refused}");
    let aof: Vec<String> = cluster
        .query_port(port, &["CONFIG", "GET", "appendonly"])
        .expect("CONFIG GET with the password");
    assert_eq!(aof, ["appendonly", "yes"]);

    let client = ClusterClientBuilder::new(cluster.seed_urls())
        .password("cluster-secret")
        .connection_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .build()
        .expect("cluster client");
    let mut conn = client.get_connection().expect("cluster connection");
    let () = conn.set("{p}:k", "v").expect("SET with the password");
    assert_eq!(cluster.keys_matching("*"), ["{p}:k"]);
}

#[test]
fn sentinel_promotes_the_replica_and_takes_the_old_primary_back() {
    if !sentinel_tools_or_skip("redis_sentinel_failover") {
        return;
    }
    let mut group = SentinelGroup::start();
    assert_eq!(group.sentinel_urls().len(), 3);
    let primary = group.primary_port();
    assert_eq!(primary, group.data_ports()[0]);
    let replica = group.replica_port();
    assert_eq!(group.linked_primary_of(replica), Some(primary));

    let () = group
        .query_port(primary, &["SET", "sb:k", "v"])
        .expect("SET on the primary");
    let get_on = |group: &SentinelGroup, port: u16| -> Option<String> {
        group.query_port(port, &["GET", "sb:k"]).ok().flatten()
    };
    eventually_sync("the replica to hold sb:k", Duration::from_secs(5), || {
        (get_on(&group, replica).as_deref() == Some("v")).then_some(())
    });
    assert_eq!(group.keys_matching("sb:*"), ["sb:k"]);
    assert_eq!(group.commandstats().get("set"), Some(&1));
    assert_eq!(group.dbsize(), 1);

    group.kill(primary);
    let (promoted, took) = group.wait_promotion(primary, FAILOVER_LIMIT);
    println!("sentinel failover: redis:{primary} killed, redis:{promoted} primary after {took:?}");
    assert_eq!(promoted, replica);
    assert_eq!(group.primary_port(), replica);
    assert_eq!(group.keys_matching("sb:*"), ["sb:k"]);

    // Restarted from its own config, the old primary is turned into a replica of the new one
    // and gets the data back from it (it had none: no RDB, no AOF).
    group.restart(primary);
    let took = group.wait_replica_of(primary, promoted, REJOIN_LIMIT);
    println!("sentinel rejoin: redis:{primary} a replica of redis:{promoted} after {took:?}");
    assert_eq!(group.replica_port(), primary);
    eventually_sync(
        "the old primary to hold sb:k",
        Duration::from_secs(5),
        || (get_on(&group, primary).as_deref() == Some("v")).then_some(()),
    );
    group.flushall();
    assert_eq!(group.dbsize(), 0);
}

#[test]
fn sentinel_with_passwords_refuses_clients_without_them() {
    if !sentinel_tools_or_skip("redis_sentinel_passwords") {
        return;
    }
    let mut group = SentinelGroup::start_with(SentinelOptions {
        password: Some("data-secret".into()),
        sentinel_password: Some("sentinel-secret".into()),
        appendonly: true,
        ..SentinelOptions::default()
    });
    assert_eq!(group.password(), Some("data-secret"));
    assert_eq!(group.sentinel_password(), Some("sentinel-secret"));
    let sentinel = group.sentinel_ports()[0];
    let name = group.master_name();
    let ask = ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name];
    let refused = query_port::<Vec<String>>(sentinel, None, &ask).expect_err("no AUTH");
    assert_eq!(refused.code(), Some("NOAUTH"), "{refused}");
    let wrong = query_port::<String>(sentinel, Some("data-secret"), &["PING"])
        .expect_err("the data password is not the sentinels'");
    assert_eq!(wrong.code(), Some("WRONGPASS"), "{wrong}");
    let primary = group.primary_port();
    assert_eq!(primary, group.data_ports()[0]);

    let refused = query_port::<String>(primary, None, &["PING"]).expect_err("no AUTH");
    assert_eq!(refused.code(), Some("NOAUTH"), "{refused}");
    let aof: Vec<String> = group
        .query_port(primary, &["CONFIG", "GET", "appendonly"])
        .expect("CONFIG GET with the password");
    assert_eq!(aof, ["appendonly", "yes"]);
    let replica = group.replica_port();
    assert_eq!(group.linked_primary_of(replica), Some(primary));
    assert_eq!(
        role_of(sentinel, group.sentinel_password()).expect("ROLE"),
        "sentinel"
    );

    // The sentinels agree the primary is down by asking each other, so a promotion shows they
    // authenticate to one another (with their requirepass) and to the data nodes (auth-pass).
    group.kill(primary);
    let (promoted, took) = group.wait_promotion(primary, FAILOVER_LIMIT);
    println!("sentinel failover with passwords: redis:{promoted} primary after {took:?}");
    assert_eq!(promoted, replica);
}
