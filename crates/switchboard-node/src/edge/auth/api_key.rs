//! API keys: `[[auth.api_keys]]` entries, each the SHA-256 of a key (never the key itself), a
//! principal name and optional scopes.
//!
//! A presented key (`Authorization: Bearer <key>`, or the `auth.api_key_header` header) is
//! hashed and compared with every configured hash in constant time
//! (`aws_lc_rs::constant_time`, already the node's crypto library; no early exit on a match).
//! Its principal binds sessions exactly like a JWT's: the binding text is the JSON object
//! `{"api_key":"<name>"}` ([`principal_id`]), which can never equal a JWT's `["<iss>","<sub>"]`
//! array nor `"anonymous"`. Two keys with one principal name bind the same principal (so a key
//! can be rotated without ending its sessions).
//!
//! Make a hash with `printf %s "$KEY" | sha256sum`.

use std::sync::Arc;

use aws_lc_rs::digest::{digest, SHA256};
use switchboard_upstream::Principal;

pub use crate::config::auth::ApiKeyEntry;

use super::metadata::is_scope_token;

/// The text a session is bound to for an API key of principal `name`: `{"api_key":"<name>"}`.
pub fn principal_id(name: &str) -> String {
    serde_json::json!({ "api_key": name }).to_string()
}

/// The configured keys, hashes decoded, built once.
pub struct ApiKeys {
    keys: Vec<([u8; 32], Arc<Principal>)>,
}

impl ApiKeys {
    /// The usable entries of `entries` (ones whose hash does not decode are left out; start-up
    /// refuses them before this, [`problems`]).
    pub fn new(entries: &[ApiKeyEntry]) -> ApiKeys {
        let keys = entries
            .iter()
            .filter_map(|e| {
                let hash = decode_hex32(&e.sha256)?;
                let principal = Principal {
                    id: principal_id(&e.principal),
                    name: e.principal.clone(),
                    scopes: e.scopes.clone(),
                };
                Some((hash, Arc::new(principal)))
            })
            .collect();
        ApiKeys { keys }
    }

    /// Whether no key is configured.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The principal of the key `presented`, if it is one of the configured keys. Every hash is
    /// compared, in constant time, whatever matched.
    pub fn find(&self, presented: &str) -> Option<Arc<Principal>> {
        let hashed = digest(&SHA256, presented.as_bytes());
        let mut found = None;
        for (hash, principal) in &self.keys {
            let equal =
                aws_lc_rs::constant_time::verify_slices_are_equal(hash, hashed.as_ref()).is_ok();
            if equal && found.is_none() {
                found = Some(principal.clone());
            }
        }
        found
    }
}

fn decode_hex32(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let hi = char::from(pair[0]).to_digit(16)?;
        let lo = char::from(pair[1]).to_digit(16)?;
        out[i] = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}

/// Problems of `auth.api_keys` and `auth.api_key_header`, each naming its key and entry.
pub(super) fn problems(keys: &[ApiKeyEntry], header: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for (i, entry) in keys.iter().enumerate() {
        let n = i + 1;
        match decode_hex32(&entry.sha256) {
            None => out.push(("auth.api_keys", format!("auth.api_keys entry {n}: sha256 must be the SHA-256 of the key as 64 hexadecimal digits (printf %s \"$KEY\" | sha256sum), never the key itself"))),
            Some(h) if seen.contains(&h) => out.push(("auth.api_keys", format!("auth.api_keys entry {n}: the same sha256 as an earlier entry"))),
            Some(h) => seen.push(h),
        }
        if entry.principal.trim().is_empty() || entry.principal.chars().any(char::is_control) {
            out.push(("auth.api_keys", format!("auth.api_keys entry {n}: principal must be a non-empty name without control characters")));
        }
        if let Some(bad) = entry.scopes.iter().find(|s| !is_scope_token(s)) {
            out.push(("auth.api_keys", format!("auth.api_keys entry {n}: scope `{bad}` is not a scope token (no spaces, quotes or backslashes)")));
        }
    }
    if !header.is_empty() {
        match http::HeaderName::from_bytes(header.as_bytes()) {
            Err(_) => out.push(("auth.api_key_header", format!("auth.api_key_header `{header}` is not an HTTP header name"))),
            Ok(name) if name == http::header::AUTHORIZATION || name.as_str().starts_with("mcp-") => out.push(("auth.api_key_header", format!("auth.api_key_header `{header}` is a header the node reads for another purpose: choose another name (e.g. X-API-Key)"))),
            Ok(_) if keys.is_empty() => out.push(("auth.api_key_header", "auth.api_key_header is set but auth.api_keys is empty".to_owned())),
            Ok(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-test-0123456789";
    // printf %s sk-test-0123456789 | sha256sum
    fn hash(key: &str) -> String {
        digest(&SHA256, key.as_bytes())
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn entry(sha256: &str, principal: &str) -> ApiKeyEntry {
        ApiKeyEntry {
            sha256: sha256.into(),
            principal: principal.into(),
            scopes: vec!["mcp:tools".into()],
        }
    }

    #[test]
    fn a_key_finds_its_principal_and_nothing_else_does() {
        let keys = ApiKeys::new(&[
            entry(&hash("other"), "other"),
            entry(&hash(KEY).to_uppercase(), "ci"),
        ]);
        let p = keys.find(KEY).expect("found");
        assert_eq!(p.id, r#"{"api_key":"ci"}"#);
        assert_eq!(p.name, "ci");
        assert_eq!(p.scopes, ["mcp:tools"]);
        assert!(keys.find("sk-test-012345678").is_none());
        assert!(keys.find(&hash(KEY)).is_none(), "the hash is not the key");
        assert!(keys.find("").is_none());
    }

    #[test]
    fn the_binding_never_equals_a_jwt_principal() {
        let jwt = super::super::token::Verified {
            issuer: "api_key".into(),
            subject: "ci".into(),
            scopes: Vec::new(),
        };
        assert_ne!(principal_id("ci"), jwt.principal());
        assert_ne!(principal_id("anonymous"), "anonymous");
    }

    #[test]
    fn plain_keys_bad_names_and_headers_are_refused() {
        let settings = |keys: Vec<ApiKeyEntry>, header: &str| (keys, header.to_owned());
        let messages = |(keys, header): (Vec<ApiKeyEntry>, String)| -> Vec<String> {
            problems(&keys, &header)
                .into_iter()
                .map(|(_, m)| m)
                .collect()
        };
        assert!(messages(settings(vec![entry(&hash(KEY), "ci")], "X-API-Key")).is_empty());
        let plain = messages(settings(vec![entry(KEY, "ci")], ""));
        assert!(plain[0].contains("64 hexadecimal digits"), "{plain:?}");
        let not_hex = format!("{}zz", &hash(KEY)[..62]);
        assert_eq!(messages(settings(vec![entry(&not_hex, "ci")], "")).len(), 1);
        let twice = messages(settings(
            vec![entry(&hash(KEY), "a"), entry(&hash(KEY), "b")],
            "",
        ));
        assert!(twice[0].contains("entry 2"), "{twice:?}");
        assert_eq!(
            messages(settings(vec![entry(&hash(KEY), " ")], "")).len(),
            1
        );
        let mut scoped = entry(&hash(KEY), "ci");
        scoped.scopes = vec!["a b".into()];
        assert_eq!(messages(settings(vec![scoped], "")).len(), 1);
        for header in ["Authorization", "Mcp-Session-Id", "bad header", ""] {
            let n = usize::from(!header.is_empty());
            let got = messages(settings(vec![entry(&hash(KEY), "ci")], header));
            assert_eq!(got.len(), n, "{header}: {got:?}");
        }
        let orphan = messages(settings(Vec::new(), "X-API-Key"));
        assert!(orphan[0].contains("auth.api_keys is empty"), "{orphan:?}");
    }
}
