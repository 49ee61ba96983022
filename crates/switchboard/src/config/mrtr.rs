//! The `mrtr_*` keys: the keys that seal MRTR `requestState`, its lifetime and size limit
//! ([`switchboard_node::mrtr`]).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use switchboard_node::mrtr::{MrtrSettings, KEY_LEN};

use super::{ms, Config};

impl Config {
    /// The node's MRTR settings; keys that do not decode are left out ([`Config::problems`]
    /// refuses them before a node starts).
    pub fn mrtr_settings(&self) -> MrtrSettings {
        MrtrSettings {
            keys: self
                .mrtr_state_keys
                .iter()
                .filter_map(|k| decode(k).ok())
                .collect(),
            state_ttl: ms(self.mrtr_state_ttl_ms),
            max_state_bytes: usize::try_from(self.mrtr_max_state_bytes).unwrap_or(usize::MAX),
            max_parked: usize::try_from(self.mrtr_max_parked).unwrap_or(usize::MAX),
        }
    }

    /// One message per key of `mrtr_state_keys` that is not 32 bytes of standard base64.
    pub(super) fn mrtr_problems(&self) -> Vec<String> {
        self.mrtr_state_keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| {
                decode(k)
                    .err()
                    .map(|e| format!("mrtr_state_keys[{i}]: {e}"))
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
    use super::*;

    #[test]
    fn keys_must_be_32_bytes_of_base64() {
        let good = STANDARD.encode([5u8; KEY_LEN]);
        let config = Config {
            mrtr_state_keys: vec![good.clone(), "short".into(), STANDARD.encode([1u8; 16])],
            ..Config::default()
        };
        let problems = config.mrtr_problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("mrtr_state_keys[1]"));
        assert!(problems[1].contains("16 bytes"));
        let settings = config.mrtr_settings();
        assert_eq!(settings.keys, vec![[5u8; KEY_LEN]]);
        assert!(config
            .validate()
            .iter()
            .any(|p| p.contains("mrtr_state_keys[2]")));
        let fine = Config {
            mrtr_state_keys: vec![good],
            ..Config::default()
        };
        assert!(fine.mrtr_problems().is_empty());
    }
}
