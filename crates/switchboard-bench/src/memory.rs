//! Memory figures: a node's resident set size from `/proc/<pid>/status`, and the Redis memory
//! of idle sessions (`MEMORY USAGE` over a session's keys, `INFO memory`).

use std::collections::HashSet;

use serde::Serialize;

/// `VmRSS` of process `pid` in KiB, from `/proc/<pid>/status`.
pub fn rss_kib(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("{path}: no VmRSS line"))
}

/// `VmRSS` of every pid, in KiB, in order.
pub fn rss_all(pids: &[u32]) -> Result<Vec<u64>, String> {
    pids.iter().map(|&p| rss_kib(p)).collect()
}

/// The soft limit on open files of this process, from `/proc/self/limits` (`None` when it
/// cannot be read, or is unlimited).
pub fn open_files_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Node RSS before and after something was opened, and the delta per opened thing.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RssDelta {
    /// Node PIDs sampled, in order.
    pub pids: Vec<u32>,
    /// `VmRSS` of each node before, in KiB.
    pub before_kib: Vec<u64>,
    /// `VmRSS` of each node after (and after the settle pause), in KiB.
    pub after_kib: Vec<u64>,
    /// Sum over nodes of `after - before`, in KiB (negative when memory was returned).
    pub delta_kib: i64,
    /// `delta_kib / count`: KiB per opened stream or session, over all nodes together.
    pub per_item_kib: f64,
}

impl RssDelta {
    /// The delta between two samples of the same `pids`, over `count` things opened.
    pub fn new(pids: &[u32], before: Vec<u64>, after: Vec<u64>, count: usize) -> RssDelta {
        let delta: i64 = before
            .iter()
            .zip(&after)
            .map(|(&b, &a)| a as i64 - b as i64)
            .sum();
        RssDelta {
            pids: pids.to_vec(),
            before_kib: before,
            after_kib: after,
            delta_kib: delta,
            per_item_kib: if count > 0 {
                delta as f64 / count as f64
            } else {
                0.0
            },
        }
    }
}

/// Redis memory of idle sessions (event logs excluded).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RedisMemory {
    /// Sessions whose keys were measured.
    pub sampled_sessions: usize,
    /// Keys found for them (excluding the event logs' `log:`, `trim:` and `ids:` keys).
    pub keys: usize,
    /// Mean over the sample of the summed `MEMORY USAGE <key> SAMPLES 0` of a session's keys,
    /// in bytes.
    pub keys_bytes_per_session: f64,
    /// `MEMORY USAGE` of the `<prefix>:sessions` sorted set divided by its member count, in
    /// bytes: the estimated share of one session.
    pub index_bytes_per_session: f64,
    /// `keys_bytes_per_session + index_bytes_per_session`.
    pub bytes_per_session: f64,
    /// `INFO memory` `used_memory` after minus before the sessions were created, divided by the
    /// sessions created, in bytes (includes the key space's own overhead, expiry entries and
    /// allocator rounding; `None` when the before figure was not taken).
    pub used_memory_delta_per_session: Option<f64>,
}

/// A connection to the Redis of the cluster.
pub struct RedisProbe {
    conn: redis::aio::MultiplexedConnection,
    prefix: String,
}

fn redis_err(e: redis::RedisError) -> String {
    format!("redis: {e}")
}

impl RedisProbe {
    /// Connects to `url`; `prefix` is the cluster's `redis.key_prefix` (default `sb`).
    pub async fn connect(url: &str, prefix: &str) -> Result<RedisProbe, String> {
        let client = redis::Client::open(url).map_err(redis_err)?;
        // The probe runs while the nodes load Redis (a storm's calls logging their events): the
        // client's default 500 ms reply timeout failed runs on a busy machine.
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(std::time::Duration::from_secs(30)));
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(redis_err)?;
        Ok(RedisProbe {
            conn,
            prefix: prefix.to_owned(),
        })
    }

    /// `used_memory` from `INFO memory`, in bytes.
    pub async fn used_memory(&mut self) -> Result<u64, String> {
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut self.conn)
            .await
            .map_err(redis_err)?;
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| "redis: no used_memory in INFO memory".to_owned())
    }

    /// Entries of a session's `run` hash (requests still running on some node).
    pub async fn running_requests(&mut self, sid: &str) -> Result<u64, String> {
        redis::cmd("HLEN")
            .arg(format!("{}:{{{sid}}}:run", self.prefix))
            .query_async(&mut self.conn)
            .await
            .map_err(redis_err)
    }

    async fn memory_usage(&mut self, key: &str) -> Result<u64, String> {
        let n: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut self.conn)
            .await
            .map_err(redis_err)?;
        Ok(n.unwrap_or(0))
    }

    /// The keys of the `sessions` (found with one `SCAN MATCH <prefix>:{*}:*` pass), event logs
    /// and trim markers excluded.
    async fn keys_of(&mut self, sessions: &HashSet<&str>) -> Result<Vec<String>, String> {
        let pattern = format!("{}:{{*}}:*", self.prefix);
        let mut cursor = 0u64;
        let mut found = Vec::new();
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut self.conn)
                .await
                .map_err(redis_err)?;
            for key in keys {
                let tag = key
                    .split_once('{')
                    .and_then(|(_, rest)| rest.split_once('}'));
                if let Some((sid, rest)) = tag {
                    let is_log = [":log:", ":trim:", ":ids:"]
                        .iter()
                        .any(|p| rest.starts_with(p));
                    if sessions.contains(sid) && !is_log {
                        found.push(key);
                    }
                }
            }
            if next == 0 {
                return Ok(found);
            }
            cursor = next;
        }
    }

    /// Measures the memory of the sampled sessions' keys and their share of the index.
    pub async fn session_memory(
        &mut self,
        sample: &[&str],
        used_before: Option<u64>,
        created: usize,
    ) -> Result<RedisMemory, String> {
        let wanted: HashSet<&str> = sample.iter().copied().collect();
        let keys = self.keys_of(&wanted).await?;
        let mut total = 0u64;
        for key in &keys {
            total += self.memory_usage(key).await?;
        }
        let index = format!("{}:sessions", self.prefix);
        let index_bytes = self.memory_usage(&index).await?;
        let members: u64 = redis::cmd("ZCARD")
            .arg(&index)
            .query_async(&mut self.conn)
            .await
            .map_err(redis_err)?;
        let per = |x: u64, n: u64| if n > 0 { x as f64 / n as f64 } else { 0.0 };
        let keys_per = per(total, sample.len() as u64);
        let index_per = per(index_bytes, members);
        let used_after = self.used_memory().await?;
        Ok(RedisMemory {
            sampled_sessions: sample.len(),
            keys: keys.len(),
            keys_bytes_per_session: keys_per,
            index_bytes_per_session: index_per,
            bytes_per_session: keys_per + index_per,
            used_memory_delta_per_session: used_before
                .map(|b| per(used_after.saturating_sub(b), created as u64)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_rss_and_limits_are_readable() {
        assert!(rss_kib(std::process::id()).unwrap() > 0);
        assert!(rss_kib(u32::MAX).is_err());
        assert!(open_files_limit().is_some_and(|n| n > 0));
    }

    #[test]
    fn rss_delta_sums_nodes_and_divides() {
        let d = RssDelta::new(&[1, 2], vec![1000, 2000], vec![1500, 2100], 100);
        assert_eq!(d.delta_kib, 600);
        assert_eq!(d.per_item_kib, 6.0);
        assert_eq!(RssDelta::new(&[], vec![], vec![], 0).per_item_kib, 0.0);
    }
}
