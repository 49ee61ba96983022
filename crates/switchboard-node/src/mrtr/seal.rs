//! Sealing MRTR `requestState` with AEAD (AES-256-GCM) under a key ring shared by every replica,
//! so a retry can be opened on any node (MCP 2026-07-28, basic/patterns/mrtr, Server
//! Requirements: state that influences the request MUST be integrity-protected and state that
//! fails verification MUST be rejected).
//!
//! Sealed form: base64url (no padding) of `kid (4 bytes) ‖ nonce (12 bytes) ‖ ciphertext ‖ tag
//! (16 bytes)`. `kid` is the first 4 bytes of SHA-256 over a label and the key, so opening picks
//! the right key at once. The first key of the ring seals; every key opens, so keys rotate by
//! putting the new key first and dropping the old one once its states have expired.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::digest::{digest, SHA256};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// Bytes of one key (the config's, where keys are read).
pub use crate::config::KEY_LEN;
/// Additional authenticated data: binds sealed blobs to this use and format version.
const AAD: &[u8] = b"switchboard/mrtr-request-state/v1";
const KID_LEN: usize = 4;

/// Why a sealed state could not be opened. Deliberately coarse: a client learns only that its
/// state is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Not base64url, or too short to hold a key id, nonce and tag.
    #[error("requestState is malformed")]
    Malformed,
    /// Sealed by a key this node does not hold (rotated out, or another cluster's).
    #[error("requestState was sealed by an unknown key")]
    UnknownKey,
    /// Tampered with, or not sealed by us.
    #[error("requestState failed verification")]
    Forged,
}

/// The keys that seal (the first) and open (all) request states.
pub struct KeyRing {
    keys: Vec<([u8; KID_LEN], LessSafeKey)>,
}

impl KeyRing {
    /// A ring of `keys`, the first of which seals. Panics on an empty list: the node always has
    /// at least the cluster's agreed key.
    pub fn new(keys: &[[u8; KEY_LEN]]) -> KeyRing {
        assert!(!keys.is_empty(), "an MRTR key ring needs at least one key");
        let keys = keys
            .iter()
            .map(|k| {
                let unbound = UnboundKey::new(&AES_256_GCM, k).expect("32-byte AES-256 key");
                (kid(k), LessSafeKey::new(unbound))
            })
            .collect();
        KeyRing { keys }
    }

    /// Seals `plain` under the first key with a fresh random nonce.
    pub fn seal(&self, plain: &[u8]) -> String {
        let (kid, key) = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).expect("system random source");
        let mut body = plain.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(AAD),
            &mut body,
        )
        .expect("AES-GCM sealing of an in-memory buffer");
        let mut out = Vec::with_capacity(KID_LEN + NONCE_LEN + body.len());
        out.extend_from_slice(kid);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&body);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// Opens a state sealed by any key of the ring.
    pub fn open(&self, sealed: &str) -> Result<Vec<u8>, SealError> {
        let raw = URL_SAFE_NO_PAD
            .decode(sealed)
            .map_err(|_| SealError::Malformed)?;
        let tag = AES_256_GCM.tag_len();
        if raw.len() < KID_LEN + NONCE_LEN + tag {
            return Err(SealError::Malformed);
        }
        let (kid, rest) = raw.split_at(KID_LEN);
        let (nonce, body) = rest.split_at(NONCE_LEN);
        let key = self
            .keys
            .iter()
            .find(|(k, _)| k.as_slice() == kid)
            .map(|(_, key)| key)
            .ok_or(SealError::UnknownKey)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Malformed)?;
        let mut body = body.to_vec();
        let plain = key
            .open_in_place(nonce, Aad::from(AAD), &mut body)
            .map_err(|_| SealError::Forged)?;
        Ok(plain.to_vec())
    }
}

/// The key id of `key`.
fn kid(key: &[u8; KEY_LEN]) -> [u8; KID_LEN] {
    let mut input = b"switchboard/mrtr-kid/".to_vec();
    input.extend_from_slice(key);
    let d = digest(&SHA256, &input);
    let mut out = [0u8; KID_LEN];
    out.copy_from_slice(&d.as_ref()[..KID_LEN]);
    out
}

/// The ring of `keys`, or of one random key of this process when there are none.
pub fn key_ring(keys: &[[u8; KEY_LEN]]) -> KeyRing {
    if keys.is_empty() {
        return KeyRing::new(&[random_key()]);
    }
    KeyRing::new(keys)
}

/// A fresh random key.
pub fn random_key() -> [u8; KEY_LEN] {
    let mut key = [0u8; KEY_LEN];
    aws_lc_rs::rand::fill(&mut key).expect("system random source");
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; KEY_LEN] = [1; KEY_LEN];
    const B: [u8; KEY_LEN] = [2; KEY_LEN];

    #[test]
    fn sealed_states_open_under_any_key_of_the_ring() {
        let old = KeyRing::new(&[A]);
        let rotated = KeyRing::new(&[B, A]);
        let sealed = old.seal(b"state");
        assert_eq!(rotated.open(&sealed).unwrap(), b"state");
        let new = rotated.seal(b"newer");
        assert_eq!(old.open(&new), Err(SealError::UnknownKey));
        assert_ne!(
            rotated.seal(b"state"),
            rotated.seal(b"state"),
            "fresh nonces"
        );
    }

    #[test]
    fn tampering_and_garbage_are_refused() {
        let ring = KeyRing::new(&[A]);
        let sealed = ring.seal(b"{\"p\":\"alice\"}");
        let mut raw = URL_SAFE_NO_PAD.decode(&sealed).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        assert_eq!(
            ring.open(&URL_SAFE_NO_PAD.encode(&raw)),
            Err(SealError::Forged)
        );
        raw[last] ^= 1;
        raw[KID_LEN + NONCE_LEN] ^= 0x80;
        assert_eq!(
            ring.open(&URL_SAFE_NO_PAD.encode(&raw)),
            Err(SealError::Forged)
        );
        assert_eq!(ring.open("not base64!"), Err(SealError::Malformed));
        assert_eq!(ring.open("AAAA"), Err(SealError::Malformed));
    }
}
