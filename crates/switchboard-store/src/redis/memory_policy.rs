//! `maxmemory-policy` of the servers the store writes to ([`Liveness::memory_policy`]), read
//! from `INFO memory` rather than `CONFIG GET`: managed services (ElastiCache, MemoryStore, …)
//! rename `CONFIG` away, and BullMQ's start-up check broke on exactly that
//! (taskforcesh/bullmq#1437). `INFO` is what they leave.
//!
//! [`Liveness::memory_policy`]: crate::Liveness::memory_policy

use redis::{RedisResult, Value};

use super::connection::{self, Conn};
use super::RedisStore;
use crate::model::MemoryPolicy;
use crate::traits::StoreResult;

/// The policy under which Redis evicts nothing.
const NO_EVICTION: &str = "noeviction";

impl RedisStore {
    /// `INFO memory` of the server, the sentinels' primary, or every Cluster primary, read as
    /// one [`MemoryPolicy`].
    pub(super) async fn read_memory_policy(&self) -> StoreResult<MemoryPolicy> {
        let info = || {
            let mut cmd = redis::cmd("INFO");
            cmd.arg("memory");
            cmd
        };
        let answers: Vec<(String, Value)> = match &self.conn {
            Conn::Cluster(cluster) => connection::on_every_primary(cluster, &info()).await?,
            Conn::Sentinel(primary) => {
                let mut conn = self.conn.clone();
                let answer = info().query_async(&mut conn).await?;
                vec![(primary.address(), answer)]
            }
            Conn::Single(_) => {
                let mut conn = self.conn.clone();
                vec![(self.server.clone(), info().query_async(&mut conn).await?)]
            }
        };
        let mut policies = Vec::with_capacity(answers.len());
        for (server, answer) in answers {
            let text = info_text(answer)?;
            let Some(policy) = policy_in(&text) else {
                return Err(crate::StoreError::Backend(format!(
                    "INFO memory of {server} has no maxmemory_policy"
                )));
            };
            policies.push((server, policy.to_owned()));
        }
        Ok(combined(policies))
    }
}

/// The text of an `INFO` answer (an error reply as the error it is).
fn info_text(answer: Value) -> RedisResult<String> {
    if let Value::ServerError(e) = answer {
        return Err(e.into());
    }
    Ok(redis::from_redis_value(answer)?)
}

/// The `maxmemory_policy` field of an `INFO` text (`maxmemory_policy:volatile-ttl`).
pub(crate) fn policy_in(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|line| line.trim_end().strip_prefix("maxmemory_policy:"))
        .filter(|policy| !policy.is_empty())
}

/// One policy for every server asked: the first that may evict (in the order given), else
/// `noeviction`.
fn combined(policies: Vec<(String, String)>) -> MemoryPolicy {
    policies
        .into_iter()
        .find(|(_, policy)| policy != NO_EVICTION)
        .map_or(MemoryPolicy::NoEviction, |(server, policy)| {
            MemoryPolicy::Evicting { policy, server }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_read_from_the_info_text() {
        let info = "# Memory\r\nused_memory:1000\r\nmaxmemory:0\r\nmaxmemory_policy:volatile-ttl\r\nallocator_frag_ratio:1.0\r\n";
        assert_eq!(policy_in(info), Some("volatile-ttl"));
        assert_eq!(policy_in("# Memory\r\nused_memory:1\r\n"), None);
        assert_eq!(policy_in("maxmemory_policy:\r\n"), None);
    }

    #[test]
    fn one_evicting_server_makes_the_store_evicting() {
        let all_safe = vec![
            ("a:1".to_owned(), NO_EVICTION.to_owned()),
            ("b:2".to_owned(), NO_EVICTION.to_owned()),
        ];
        assert_eq!(combined(all_safe), MemoryPolicy::NoEviction);
        let one = vec![
            ("a:1".to_owned(), NO_EVICTION.to_owned()),
            ("b:2".to_owned(), "allkeys-lru".to_owned()),
            ("c:3".to_owned(), "volatile-lru".to_owned()),
        ];
        assert_eq!(
            combined(one),
            MemoryPolicy::Evicting {
                policy: "allkeys-lru".into(),
                server: "b:2".into()
            }
        );
    }
}
