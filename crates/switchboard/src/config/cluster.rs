//! `[cluster]`: who this node is among the others and how nodes notice each other's death.

use serde::{Deserialize, Serialize};

use super::owners::{node, positive, store};
use super::units::NonZeroDuration;

/// Membership and liveness of one node in the cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// This process's id label (empty: 8 random hex characters at start-up; set: the process
    /// runs as `<node_id>.<4 random hex>`). 1 to 64 of `A-Z a-z 0-9 . _ -`.
    pub node_id: String,
    /// Interval of this node's heartbeat; must be below `node_ttl`.
    pub heartbeat_interval: NonZeroDuration,
    /// A node whose heartbeat is older than this is dead; its in-flight requests are failed by
    /// the node the client resumes on.
    pub node_ttl: NonZeroDuration,
    /// How often a resumed stream checks that the node running its request is alive.
    pub liveness_check_interval: NonZeroDuration,
    /// Interval of the reaper pass; expired sessions linger at most this long. Also how often
    /// each node checks what its upstreams hold against the store.
    pub reaper_interval: NonZeroDuration,
    /// On SIGTERM, how long running requests may take to finish before the node exits anyway.
    /// Standalone GET streams close at once; clients reopen them elsewhere.
    pub drain_timeout: NonZeroDuration,
}

impl Default for ClusterConfig {
    /// The node's and the store's defaults ([`super::owners`]).
    fn default() -> Self {
        let (node, store) = (node(), store());
        ClusterConfig {
            node_id: String::new(),
            heartbeat_interval: positive(node.heartbeat_interval),
            node_ttl: positive(store.node_ttl),
            liveness_check_interval: positive(node.liveness_check_interval),
            reaper_interval: positive(node.reaper_interval),
            drain_timeout: positive(node.drain_timeout),
        }
    }
}

/// Ids and prefixes end up in Redis keys, channels and holder tokens (`<node>/<conn>`): keep them
/// to 1-64 of `[A-Za-z0-9._-]` plus `extra`.
pub(super) fn check_name(key: &str, value: &str, extra: &[char]) -> Option<String> {
    let ok = (1..=64).contains(&value.len())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c) || extra.contains(&c));
    (!ok).then(|| {
        let extra: String = extra.iter().map(|c| format!(" {c}")).collect();
        format!("{key} `{value}` must be 1 to 64 characters of A-Z a-z 0-9 . _ -{extra}")
    })
}
