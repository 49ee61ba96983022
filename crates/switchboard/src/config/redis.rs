//! `[redis]`: the cluster's store. The Sentinel and Cluster topologies will add their keys here.

use serde::{Deserialize, Serialize};

use super::owners::store;

/// Where the cluster's shared state lives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisConfig {
    /// Redis URL (`redis://`, `rediss://`, `redis+unix://`, `unix://`); empty: the embedded
    /// memory store, one node only.
    pub url: String,
    /// Prefix of every Redis key and channel, so clusters can share one Redis.
    pub key_prefix: String,
    /// Session records a node keeps to skip reading them whole from Redis on every request
    /// (0 disables). Each is used only after Redis confirms its version in the same script that
    /// admits the request, so it is never stale; when full, an arbitrary entry is dropped. Costs
    /// about 1 KiB per entry.
    pub record_cache_entries: usize,
}

impl Default for RedisConfig {
    /// No URL (the memory store); the rest are the store's defaults ([`super::owners`]).
    fn default() -> Self {
        let store = store();
        RedisConfig {
            url: String::new(),
            key_prefix: store.key_prefix,
            record_cache_entries: store.record_cache_entries,
        }
    }
}

pub(super) fn check_redis_url(url: &str) -> Option<String> {
    const SCHEMES: [&str; 4] = ["redis://", "rediss://", "redis+unix://", "unix://"];
    let ok = url.is_empty()
        || SCHEMES
            .iter()
            .any(|s| url.starts_with(s) && url.len() > s.len());
    (!ok).then(|| {
        format!(
            "redis.url `{}` must start with redis://, rediss://, redis+unix:// or unix:// (or be empty for the memory store)",
            redact_url(url)
        )
    })
}

/// The URL with any password replaced by `***`, fit for logs and error messages.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split_once(':').map_or(&rest[..at], |(u, _)| u);
            format!("{scheme}://{user}:***{}", &rest[at..])
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact_url("redis://:pw@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(redact_url("rediss://u:pw@h"), "rediss://u:***@h");
        assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
    }
}
