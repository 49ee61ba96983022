//! `[redis]`: the cluster's store: one Redis, a Sentinel-managed primary, or a Redis Cluster.

use serde::{Deserialize, Serialize};
use switchboard_store::eviction::EvictionSettings;
use switchboard_store::redis::{RedisMode, RedisTopology};

use super::owners::{positive, store};
use super::units::NonZeroDuration;

/// Where the cluster's shared state lives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisConfig {
    /// `standalone` (one server at `url`), `sentinel` (the primary `master_name` as the
    /// sentinels at `nodes` name it) or `cluster` (Redis Cluster 7+, reached through the seed
    /// URLs `nodes`).
    pub mode: RedisMode,
    /// Redis URL (`redis://`, `rediss://`, `redis+unix://`, `unix://`); empty in standalone mode:
    /// the embedded memory store, one node only. Sentinel mode: optional, only its scheme
    /// (`rediss://`: TLS to the primary) and database number are used. Unused in cluster mode.
    pub url: String,
    /// Sentinel: the sentinels' URLs; cluster: seed node URLs (any reachable subset).
    pub nodes: Vec<String>,
    /// Sentinel: the name the sentinels monitor the primary under.
    pub master_name: String,
    /// ACL user on the data servers (empty: from the URL, or the default user).
    pub username: String,
    /// Password on the data servers (empty: from the URL, or none).
    pub password: String,
    /// ACL user on the sentinels (empty: none).
    pub sentinel_username: String,
    /// Password on the sentinels, separate from the data servers' (empty: none).
    pub sentinel_password: String,
    /// PEM file of the certificate authority that signs the Redis servers' (and sentinels') TLS
    /// certificates, for `rediss://` URLs (empty: the system's roots).
    pub tls_ca_file: String,
    /// Prefix of every Redis key and channel, so clusters can share one Redis.
    pub key_prefix: String,
    /// Session records a node keeps to skip reading them whole from Redis on every request
    /// (0 disables). Each is used only after Redis confirms its version in the same script that
    /// admits the request, so it is never stale; when full, an arbitrary entry is dropped. Costs
    /// about 1 KiB per entry.
    pub record_cache_entries: usize,
    /// Replicas that must confirm each event append and session creation (`WAIT`) before it
    /// counts as done; 0: none (Redis's asynchronous replication alone).
    pub min_replicas_acked: u32,
    /// How long that confirmation may take before the write fails; below 5 s (the longest one
    /// Redis command may take).
    pub replicas_ack_timeout: NonZeroDuration,
    /// Start, and stay ready, although Redis's `maxmemory-policy` may evict keys (anything but
    /// `noeviction`; default `false`: the node refuses to start, and `/readyz` answers 503 when
    /// the policy changes to one at runtime). Every key Switchboard writes has a TTL, so at
    /// Redis's memory limit heartbeats (`volatile-ttl`), sessions and event logs are evicted.
    pub allow_eviction: bool,
    /// How often each node reads Redis's `maxmemory-policy` again (`INFO memory`; every
    /// primary in Cluster mode), default 30 s: a change is noticed at most this late.
    pub eviction_check_interval: NonZeroDuration,
}

impl Default for RedisConfig {
    /// No URL (the memory store); the rest are the store's defaults ([`super::owners`]).
    fn default() -> Self {
        let store = store();
        let eviction = EvictionSettings::default();
        RedisConfig {
            mode: RedisMode::Standalone,
            url: String::new(),
            nodes: Vec::new(),
            master_name: String::new(),
            username: String::new(),
            password: String::new(),
            sentinel_username: String::new(),
            sentinel_password: String::new(),
            tls_ca_file: String::new(),
            key_prefix: store.key_prefix,
            record_cache_entries: store.record_cache_entries,
            min_replicas_acked: store.min_replicas_acked,
            replicas_ack_timeout: positive(store.replicas_ack_timeout),
            allow_eviction: eviction.allow,
            eviction_check_interval: positive(eviction.check_interval),
        }
    }
}

impl RedisConfig {
    /// Whether the cluster's state is in Redis (else the embedded memory store).
    pub fn uses_redis(&self) -> bool {
        self.mode != RedisMode::Standalone || !self.url.is_empty()
    }

    /// The store's view of these settings.
    pub fn topology(&self) -> RedisTopology {
        RedisTopology {
            mode: self.mode,
            url: self.url.clone(),
            nodes: self.nodes.clone(),
            master_name: self.master_name.clone(),
            username: self.username.clone(),
            password: self.password.clone(),
            sentinel_username: self.sentinel_username.clone(),
            sentinel_password: self.sentinel_password.clone(),
            tls_ca_file: self.tls_ca_file.clone(),
        }
    }

    /// The eviction watch's settings ([`switchboard_store::eviction`]).
    pub fn eviction(&self) -> EvictionSettings {
        EvictionSettings {
            allow: self.allow_eviction,
            check_interval: self.eviction_check_interval.get(),
        }
    }

    /// These settings with every secret shown as `***`: `password`, `sentinel_password`, and
    /// the password in `url` and in each of `nodes` ([`redact_url`]). What `switchboard config`
    /// prints.
    pub fn redacted(&self) -> RedisConfig {
        let hide = |secret: &str| {
            if secret.is_empty() {
                String::new()
            } else {
                "***".to_owned()
            }
        };
        RedisConfig {
            url: redact_url(&self.url),
            nodes: self.nodes.iter().map(|n| redact_url(n)).collect(),
            password: hide(&self.password),
            sentinel_password: hide(&self.sentinel_password),
            ..self.clone()
        }
    }

    /// What is wrong with the mode's keys, by key.
    pub(super) fn problems(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        if self.mode != RedisMode::Sentinel {
            for (key, value) in [
                ("redis.master_name", &self.master_name),
                ("redis.sentinel_username", &self.sentinel_username),
                ("redis.sentinel_password", &self.sentinel_password),
            ] {
                if !value.is_empty() {
                    problems.push((
                        key,
                        format!(
                            "{key} is only for redis.mode = \"sentinel\" (redis.mode is \"{}\")",
                            self.mode
                        ),
                    ));
                }
            }
        }
        // A config read back from `switchboard config` holds the placeholder, not the secret: it
        // would fail only later, at Redis' login.
        let urls = std::iter::once(("redis.url", &self.url))
            .chain(self.nodes.iter().map(|n| ("redis.nodes", n)))
            .filter(|(_, url)| url.contains(":***@"))
            .map(|(key, _)| (key, "the password in it"));
        let secrets = [
            ("redis.password", &self.password),
            ("redis.sentinel_password", &self.sentinel_password),
        ]
        .into_iter()
        .filter(|(_, value)| value.as_str() == "***")
        .map(|(key, _)| (key, "it"));
        for (key, what) in secrets.chain(urls) {
            problems.push((
                key,
                format!(
                    "{key}: {what} is \"***\", the placeholder `switchboard config` prints for a secret; set the real value"
                ),
            ));
        }
        if let Some(p) = check_redis_url(&self.url) {
            problems.push(("redis.url", p));
        } else if let Some(p) = (!self.url.is_empty())
            .then(|| switchboard_store::redis::url_problem(&self.url))
            .flatten()
        {
            problems.push(("redis.url", format!("redis.url {p}")));
        }
        for node in &self.nodes {
            let scheme = ["redis://", "rediss://"]
                .iter()
                .any(|s| node.starts_with(s) && node.len() > s.len());
            if !scheme {
                problems.push((
                    "redis.nodes",
                    format!(
                        "redis.nodes entry `{}` must be a redis:// or rediss:// URL with a host",
                        redact_url(node)
                    ),
                ));
            } else if let Some(p) = switchboard_store::redis::url_problem(node) {
                problems.push(("redis.nodes", format!("redis.nodes entry {p}")));
            }
        }
        let mode = self.mode;
        match mode {
            RedisMode::Standalone if !self.nodes.is_empty() => problems.push((
                "redis.nodes",
                "redis.nodes is for redis.mode = \"sentinel\" or \"cluster\"; standalone uses redis.url".into(),
            )),
            RedisMode::Sentinel | RedisMode::Cluster if self.nodes.is_empty() => problems.push((
                "redis.nodes",
                format!("redis.mode = \"{mode}\" needs redis.nodes (the {})", if mode == RedisMode::Sentinel { "sentinels' URLs" } else { "cluster's seed URLs" }),
            )),
            _ => {}
        }
        if mode == RedisMode::Sentinel && self.master_name.is_empty() {
            problems.push((
                "redis.master_name",
                "redis.mode = \"sentinel\" needs redis.master_name (the name the sentinels monitor)".into(),
            ));
        }
        let limit = switchboard_store::redis::RESPONSE_TIMEOUT;
        if self.replicas_ack_timeout.get() >= limit {
            problems.push((
                "redis.replicas_ack_timeout",
                format!(
                    "redis.replicas_ack_timeout must be below {} s, the longest one Redis command may take (a longer WAIT would fail as a timeout)",
                    limit.as_secs()
                ),
            ));
        }
        if mode == RedisMode::Cluster && !self.url.is_empty() {
            problems.push((
                "redis.url",
                "redis.url is not used in redis.mode = \"cluster\"; put the seed URLs in redis.nodes".into(),
            ));
        }
        problems
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

pub use switchboard_store::redis::redact_url;

#[cfg(test)]
mod tests {
    use super::*;

    fn problem_keys(config: &RedisConfig) -> Vec<&'static str> {
        config.problems().into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn each_mode_needs_its_keys() {
        let mut sentinel = RedisConfig {
            mode: RedisMode::Sentinel,
            ..RedisConfig::default()
        };
        assert_eq!(
            problem_keys(&sentinel),
            ["redis.nodes", "redis.master_name"]
        );
        sentinel.nodes = vec!["redis://s1:26379".into()];
        sentinel.master_name = "main".into();
        assert_eq!(problem_keys(&sentinel), Vec::<&str>::new());
        let cluster = RedisConfig {
            mode: RedisMode::Cluster,
            url: "redis://h:6379".into(),
            nodes: vec!["redis://h:7000".into(), "http://h:7001".into()],
            ..RedisConfig::default()
        };
        assert_eq!(problem_keys(&cluster), ["redis.nodes", "redis.url"]);
        let standalone = RedisConfig {
            nodes: vec!["redis://h:7000".into()],
            ..RedisConfig::default()
        };
        assert_eq!(problem_keys(&standalone), ["redis.nodes"]);
        // Sentinel keys outside Sentinel mode were accepted and ignored (review of issue 14).
        let stray = RedisConfig {
            mode: RedisMode::Cluster,
            nodes: vec!["redis://h:7000".into()],
            master_name: "main".into(),
            sentinel_password: "pw".into(),
            ..RedisConfig::default()
        };
        assert_eq!(
            problem_keys(&stray),
            ["redis.master_name", "redis.sentinel_password"]
        );
        // A URL with the right scheme that does not parse (review of issue 14: it failed at
        // connect time with exit code 1 and no key named).
        let unparsed = RedisConfig {
            mode: RedisMode::Cluster,
            nodes: vec![
                "redis://127.0.0.1:notaport".into(),
                "unix:///tmp/r.sock".into(),
            ],
            ..RedisConfig::default()
        };
        assert_eq!(problem_keys(&unparsed), ["redis.nodes", "redis.nodes"]);
        let bad_url = RedisConfig {
            url: "redis://127.0.0.1:99999".into(),
            ..RedisConfig::default()
        };
        assert_eq!(problem_keys(&bad_url), ["redis.url"]);
        assert!(!RedisConfig::default().uses_redis());
    }

    #[test]
    fn a_wait_must_end_before_a_command_times_out() {
        let long = RedisConfig {
            replicas_ack_timeout: NonZeroDuration::secs(5),
            ..RedisConfig::default()
        };
        assert_eq!(problem_keys(&long), ["redis.replicas_ack_timeout"]);
        let fine = RedisConfig {
            replicas_ack_timeout: NonZeroDuration::millis(4900),
            ..RedisConfig::default()
        };
        assert_eq!(problem_keys(&fine), Vec::<&str>::new());
    }

    #[test]
    fn redacted_hides_every_secret_and_keeps_the_rest() {
        let config = RedisConfig {
            mode: RedisMode::Sentinel,
            url: "rediss://:urlpw@primary/2".into(),
            nodes: vec![
                "redis://u:nodepw@s1:26379".into(),
                "redis://s2:26379".into(),
            ],
            master_name: "main".into(),
            username: "app".into(),
            password: "datapw".into(),
            sentinel_password: "sentpw".into(),
            ..RedisConfig::default()
        };
        let shown = config.redacted();
        let text = format!("{shown:?}");
        for secret in ["urlpw", "nodepw", "datapw", "sentpw"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(shown.url, "rediss://:***@primary/2");
        assert_eq!(shown.nodes, ["redis://u:***@s1:26379", "redis://s2:26379"]);
        assert_eq!(
            (shown.password.as_str(), shown.sentinel_password.as_str()),
            ("***", "***")
        );
        assert_eq!(
            (shown.username.as_str(), shown.master_name.as_str()),
            ("app", "main")
        );
        assert_eq!(RedisConfig::default().redacted(), RedisConfig::default());
    }

    #[test]
    fn the_redaction_placeholder_is_refused_as_a_secret() {
        let config = RedisConfig {
            url: "redis://:***@127.0.0.1:6379".into(),
            password: "***".into(),
            ..RedisConfig::default()
        };
        let keys: Vec<&str> = config.problems().iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            ["redis.password", "redis.url"],
            "{:?}",
            config.problems()
        );
        let shown = RedisConfig {
            password: "real".into(),
            ..RedisConfig::default()
        }
        .redacted();
        assert!(shown.problems().iter().any(|(k, _)| *k == "redis.password"));
        assert!(RedisConfig::default().problems().is_empty());
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact_url("redis://:pw@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(redact_url("rediss://u:pw@h"), "rediss://u:***@h");
        assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
        // Unescaped `/` or `@` in the password, and no scheme at all (review of issue 14).
        assert_eq!(
            redact_url("redis://:se/cret@127.0.0.1:16499"),
            "redis://:***@127.0.0.1:16499"
        );
        assert_eq!(redact_url("redis://u:a@b@h/0"), "redis://u:***@h/0");
        assert_eq!(
            redact_url("default:secret@127.0.0.1:6379"),
            "default:***@127.0.0.1:6379"
        );
    }
}
