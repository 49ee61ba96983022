//! [`RateLimitSettings`], the `[rate_limits]` config section. Config only: which requests the
//! limits count and where they are taken is `limits`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `[rate_limits]`: every limit is off unless configured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitSettings {
    /// What a request gets when its limits cannot be checked because the store failed while the
    /// session itself was found (Redis Cluster, where the limits are a script of their own), or
    /// for a request without a session (`initialize`, 2026-07-28 requests): `open` (default) lets it through, `closed` refuses it with 503. Where the
    /// limits ride in the session's admission script (memory, Redis standalone and Sentinel) a
    /// store failure fails the admission itself, 503 either way.
    pub on_store_error: OnStoreError,
    /// Each principal's limit over all its requests; none by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<RateSpec>,
    /// Per principal and tool, by the tool's name as clients call it; none by default.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, RateSpec>,
    /// Per upstream (by its configured name) over every principal's `tools/call` of its tools;
    /// none by default. The upstream must have a prefix.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub upstreams: BTreeMap<String, RateSpec>,
    /// Set at start-up from `[[upstreams]]`: upstream name → the start of its tools' names
    /// (`<prefix><separator>`). Not a config key.
    #[serde(skip)]
    pub tool_prefixes: BTreeMap<String, String>,
}

/// What to do when the store cannot check a request's limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnStoreError {
    /// Let the request through (it is counted as `decision="store_error"`).
    #[default]
    Open,
    /// Refuse it with 503 (JSON-RPC -32603).
    Closed,
}

/// One limit: `rate` requests per second on average, `burst` of them at once.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateSpec {
    /// Requests per second (a number above 0, e.g. `0.5` for one every 2 s).
    pub rate: f64,
    /// Requests that may pass at once after a quiet spell (at least 1); default: one second's
    /// worth, `rate` rounded up (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}
