//! `[stateless.mrtr]`: the keys that seal MRTR `requestState`, its lifetime and size limit
//! ([`switchboard_node::mrtr`]).

use std::num::NonZeroUsize;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use switchboard_node::mrtr::{MrtrSettings, KEY_LEN};

use super::units::{NonZeroDuration, Size};

/// Multi round-trip requests (MCP 2026-07-28).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MrtrConfig {
    /// Keys that seal `requestState`, each 32 bytes in standard base64 (e.g. `openssl rand
    /// -base64 32`). The first seals, every one opens, so keys rotate by putting a new key first.
    /// None: the nodes agree on one random key kept in the store (Redis key
    /// `<key_prefix>:secret:mrtr-request-state`).
    pub state_keys: Vec<String>,
    /// How long an issued `requestState` can be retried.
    pub state_ttl: NonZeroDuration,
    /// Largest `requestState` a node issues; a request that gathers more answers ends with a
    /// JSON-RPC error.
    pub max_state: Size,
    /// Most requests parked on one node while their client answers a question (requests of
    /// upstreams that keep per-session state, each holding its upstream call); past it such a
    /// request fails with -32603.
    pub max_parked: NonZeroUsize,
}

impl Default for MrtrConfig {
    fn default() -> Self {
        MrtrConfig {
            state_keys: Vec::new(),
            state_ttl: NonZeroDuration::secs(600),
            max_state: Size::kib(64),
            max_parked: NonZeroUsize::new(1000).expect("not zero"),
        }
    }
}

impl MrtrConfig {
    /// The node's MRTR settings; keys that do not decode are left out ([`super::Config::problems`]
    /// refuses them before a node starts).
    pub fn settings(&self) -> MrtrSettings {
        MrtrSettings {
            keys: self
                .state_keys
                .iter()
                .filter_map(|k| decode(k).ok())
                .collect(),
            state_ttl: self.state_ttl.get(),
            max_state_bytes: self.max_state.as_usize(),
            max_parked: self.max_parked.get(),
        }
    }

    /// One message per key of `state_keys` that is not 32 bytes of standard base64.
    pub(super) fn problems(&self) -> Vec<String> {
        self.state_keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| {
                decode(k)
                    .err()
                    .map(|e| format!("stateless.mrtr.state_keys[{i}]: {e}"))
            })
            .collect()
    }
}

/// A key from its standard base64 text.
fn decode(text: &str) -> Result<[u8; KEY_LEN], String> {
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|_| "not standard base64 (make one with `openssl rand -base64 32`)".to_owned())?;
    let n = bytes.len();
    bytes
        .try_into()
        .map_err(|_| format!("decodes to {n} bytes, a key has {KEY_LEN}"))
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    #[test]
    fn keys_must_be_32_bytes_of_base64() {
        let good = STANDARD.encode([5u8; KEY_LEN]);
        let mut config = Config::default();
        config.stateless.mrtr.state_keys =
            vec![good.clone(), "short".into(), STANDARD.encode([1u8; 16])];
        let problems = config.stateless.mrtr.problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("stateless.mrtr.state_keys[1]"));
        assert!(problems[1].contains("16 bytes"));
        let settings = config.stateless.mrtr.settings();
        assert_eq!(settings.keys, vec![[5u8; KEY_LEN]]);
        assert!(config
            .validate()
            .iter()
            .any(|p| p.contains("stateless.mrtr.state_keys[2]")));
        let fine = MrtrConfig {
            state_keys: vec![good],
            ..MrtrConfig::default()
        };
        assert!(fine.problems().is_empty());
    }
}
