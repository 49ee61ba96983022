//! The Redis a test cluster's nodes share, in any of the three `redis.mode`s: one private
//! `redis-server`, a [`RedisCluster`] or a [`SentinelGroup`]. It tells the nodes how to reach it
//! and lets a test read keys wherever they live.

use std::time::Duration;

use redis::{FromRedisValue, RedisResult};

use crate::redis_cluster::{RedisCluster, RedisClusterOptions};
use crate::redis_sentinel::{SentinelGroup, SentinelOptions};
use crate::redis_server::RedisServer;

/// Which Redis deployment a test cluster runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RedisKind {
    /// One `redis-server` (`redis.url`).
    #[default]
    Standalone,
    /// Redis Cluster, 3 primaries with a replica each (`redis.mode = "cluster"`).
    Cluster,
    /// One primary, one replica, three sentinels (`redis.mode = "sentinel"`).
    Sentinel,
}

/// A running Redis of one of the kinds.
pub enum RedisBackend {
    /// One server.
    Standalone(RedisServer),
    /// Redis Cluster.
    Cluster(RedisCluster),
    /// A Sentinel group.
    Sentinel(SentinelGroup),
}

impl RedisBackend {
    /// Starts a Redis of `kind` with the fixtures' defaults.
    pub fn start(kind: RedisKind) -> RedisBackend {
        RedisBackend::start_with_replicas(kind, 1)
    }

    /// Starts a Redis of `kind` whose primaries have `replicas` replicas each (Cluster:
    /// [`RedisClusterOptions::replicas_per_primary`]; Sentinel: [`SentinelOptions::replicas`]),
    /// otherwise with the fixtures' defaults. Panics for a standalone server with replicas.
    pub fn start_with_replicas(kind: RedisKind, replicas: usize) -> RedisBackend {
        match kind {
            RedisKind::Standalone => {
                assert_eq!(
                    replicas, 1,
                    "a standalone Redis has no replicas to configure"
                );
                RedisBackend::Standalone(RedisServer::start())
            }
            RedisKind::Cluster => {
                RedisBackend::Cluster(RedisCluster::start_with(RedisClusterOptions {
                    replicas_per_primary: replicas,
                    ..RedisClusterOptions::default()
                }))
            }
            RedisKind::Sentinel => {
                RedisBackend::Sentinel(SentinelGroup::start_with(SentinelOptions {
                    replicas,
                    ..SentinelOptions::default()
                }))
            }
        }
    }

    /// The kind.
    pub fn kind(&self) -> RedisKind {
        match self {
            RedisBackend::Standalone(_) => RedisKind::Standalone,
            RedisBackend::Cluster(_) => RedisKind::Cluster,
            RedisBackend::Sentinel(_) => RedisKind::Sentinel,
        }
    }

    /// `redis.url` for the nodes (standalone only; `--redis-url`).
    pub fn url(&self) -> Option<String> {
        match self {
            RedisBackend::Standalone(r) => Some(r.url()),
            _ => None,
        }
    }

    /// The `--set key=value` settings that point a node at this Redis (besides [`Self::url`]).
    pub fn node_settings(&self) -> Vec<(String, String)> {
        let set = |k: &str, v: String| (k.to_owned(), v);
        match self {
            RedisBackend::Standalone(_) => Vec::new(),
            RedisBackend::Cluster(c) => vec![
                set("redis.mode", "cluster".into()),
                set("redis.nodes", c.seed_urls().join(",")),
            ],
            RedisBackend::Sentinel(s) => vec![
                set("redis.mode", "sentinel".into()),
                set("redis.nodes", s.sentinel_urls().join(",")),
                set("redis.master_name", s.master_name().to_owned()),
            ],
        }
    }

    /// The standalone server; panics for the other kinds.
    pub fn server(&self) -> &RedisServer {
        match self {
            RedisBackend::Standalone(r) => r,
            other => panic!(
                "this test reads the standalone Redis, not {:?}",
                other.kind()
            ),
        }
    }

    /// The standalone server, to stop or restart it; panics for the other kinds.
    pub fn server_mut(&mut self) -> &mut RedisServer {
        match self {
            RedisBackend::Standalone(r) => r,
            other => panic!(
                "this test stops the standalone Redis, not {:?}",
                other.kind()
            ),
        }
    }

    /// The Redis Cluster; panics for the other kinds.
    pub fn cluster(&self) -> &RedisCluster {
        match self {
            RedisBackend::Cluster(c) => c,
            other => panic!("this test needs Redis Cluster, not {:?}", other.kind()),
        }
    }

    /// The Redis Cluster, to kill and restart its nodes; panics for the other kinds.
    pub fn cluster_mut(&mut self) -> &mut RedisCluster {
        match self {
            RedisBackend::Cluster(c) => c,
            other => panic!("this test needs Redis Cluster, not {:?}", other.kind()),
        }
    }

    /// The Sentinel group; panics for the other kinds.
    pub fn sentinel(&self) -> &SentinelGroup {
        match self {
            RedisBackend::Sentinel(s) => s,
            other => panic!("this test needs Sentinel, not {:?}", other.kind()),
        }
    }

    /// The Sentinel group, to kill and restart its servers; panics for the other kinds.
    pub fn sentinel_mut(&mut self) -> &mut SentinelGroup {
        match self {
            RedisBackend::Sentinel(s) => s,
            other => panic!("this test needs Sentinel, not {:?}", other.kind()),
        }
    }

    /// Every key matching the glob `pattern` (SCAN on the server, every cluster primary, or the
    /// current Sentinel primary), sorted.
    pub fn keys_matching(&self, pattern: &str) -> Vec<String> {
        match self {
            RedisBackend::Standalone(r) => r.keys_matching(pattern),
            RedisBackend::Cluster(c) => c.keys_matching(pattern),
            RedisBackend::Sentinel(s) => s.keys_matching(pattern),
        }
    }

    /// Every key, sorted.
    pub fn all_keys(&self) -> Vec<String> {
        self.keys_matching("*")
    }

    /// `DBSIZE` (summed over the cluster's primaries).
    pub fn dbsize(&self) -> i64 {
        match self {
            RedisBackend::Standalone(r) => r.dbsize(),
            RedisBackend::Cluster(c) => c.dbsize(),
            RedisBackend::Sentinel(s) => s.dbsize(),
        }
    }

    /// Sends one command with keys (`args[0]` is its name) to the server that holds them: the
    /// standalone server, the cluster node owning the key's slot, or the Sentinel primary.
    ///
    /// # Errors
    /// Connecting failed or timed out, Redis answered with an error, or the reply does not
    /// convert to `T`.
    pub fn query<T: FromRedisValue>(&self, args: &[&str]) -> RedisResult<T> {
        match self {
            RedisBackend::Standalone(r) => r.query(args),
            RedisBackend::Sentinel(s) => s.query_port(s.primary_port(), args),
            RedisBackend::Cluster(c) => {
                let (name, rest) = args.split_first().expect("a command name");
                let mut builder = redis::cluster::ClusterClientBuilder::new(c.seed_urls())
                    .connection_timeout(Duration::from_secs(5))
                    .response_timeout(Duration::from_secs(5));
                if let Some(pw) = c.password() {
                    builder = builder.password(pw);
                }
                let mut conn = builder.build()?.get_connection()?;
                redis::cmd(name).arg(rest).query(&mut conn)
            }
        }
    }

    /// Calls per command (`INFO commandstats`), summed over the cluster's primaries.
    pub fn commandstats(&self) -> std::collections::BTreeMap<String, u64> {
        match self {
            RedisBackend::Standalone(r) => {
                let info: String = r.query(&["INFO", "commandstats"]).expect("INFO");
                crate::redis_process::parse_commandstats(&info)
            }
            RedisBackend::Cluster(c) => c.commandstats(),
            RedisBackend::Sentinel(s) => s.commandstats(),
        }
    }

    /// `CONFIG RESETSTAT` (zeroes `INFO commandstats`) on the server, every current cluster
    /// primary, or the Sentinel primary. Panics when one does not answer.
    pub fn reset_stats(&self) {
        let reset = ["CONFIG", "RESETSTAT"];
        let fail =
            |port: u16, e: redis::RedisError| panic!("CONFIG RESETSTAT on redis:{port}: {e}");
        match self {
            RedisBackend::Standalone(r) => r.query::<()>(&reset).expect("CONFIG RESETSTAT"),
            RedisBackend::Cluster(c) => {
                for port in c.primaries() {
                    c.query_port::<()>(port, &reset)
                        .unwrap_or_else(|e| fail(port, e));
                }
            }
            RedisBackend::Sentinel(s) => {
                let port = s.primary_port();
                s.query_port::<()>(port, &reset)
                    .unwrap_or_else(|e| fail(port, e));
            }
        }
    }
}
