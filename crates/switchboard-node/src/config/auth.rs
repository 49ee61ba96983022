//! [`AuthSettings`], the `[auth]` config section, with its `[[auth.api_keys]]` entries
//! ([`ApiKeyEntry`]). Config only: the start-up checks and what the settings mean at run time
//! are the edge's (`edge::auth`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One `[[auth.api_keys]]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyEntry {
    /// The SHA-256 of the key as 64 hexadecimal digits (either case).
    pub sha256: String,
    /// The principal name the key authenticates as (non-empty, no control characters).
    pub principal: String,
    /// Scopes the key grants (RFC 6749 §3.3 scope tokens; default none).
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// The authorization settings: the `[auth]` config section itself (TOML keys are the field
/// names, except `jwt_hs256_secrets` and `jwt_public_keys_pem`). Off while `resource_url` is
/// empty (the default); [`crate::NodeConfig::auth`] holds them only when on.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthSettings {
    /// Public URL of the MCP endpoint exactly as clients configure it (empty: authorization
    /// off). Set, with a verification key or an API key, it turns on the resource-server layer:
    /// every request needs a bearer token; the RFC 9728 metadata names this as `resource` and
    /// is served at its path-inserted location and the root one (RFC 9728 §3.1).
    pub resource_url: String,
    /// Issuer URLs of the authorization servers published in the metadata (RFC 9728
    /// `authorization_servers`; at least one when `resource_url` is set).
    pub authorization_servers: Vec<String>,
    /// `scopes_supported` published in the metadata.
    pub scopes_supported: Vec<String>,
    /// Scopes every request's token or API key must carry; a valid credential lacking one gets
    /// 403 `insufficient_scope`. Named in the `scope` of every challenge.
    pub required_scopes: Vec<String>,
    /// Required `iss` of tokens (empty: not checked).
    pub issuer: String,
    /// Required `aud` of tokens (empty: `resource_url`).
    pub audience: String,
    /// Shared secrets that verify HS256 tokens (key `jwt_hs256_secrets`), each at least 32
    /// bytes; any one verifies, so keys can rotate.
    #[serde(rename = "jwt_hs256_secrets")]
    pub hs256_secrets: Vec<String>,
    /// RSA (RS256) and EC P-256 (ES256) public keys in PEM that verify tokens (key
    /// `jwt_public_keys_pem`).
    #[serde(rename = "jwt_public_keys_pem")]
    pub public_keys_pem: Vec<String>,
    /// The issuer's JWKS (RFC 7517 key set) URL: `https://`, or `http://` on loopback (empty:
    /// none). Its RS256 and ES256 keys verify tokens beside the configured ones; see
    /// `edge::auth::jwks` for fetching, caching and refetching.
    pub jwks_url: String,
    /// Shortest time a fetched key set is kept before it is fetched again, whatever the
    /// response's `Cache-Control: max-age` says (default 60 s); also the wait when the response
    /// has no max-age, and the longest wait between retries while the provider fails.
    #[serde(with = "crate::units::positive_duration")]
    pub jwks_min_refresh: Duration,
    /// Longest time a fetched key set is kept before it is fetched again (default 1 h).
    #[serde(with = "crate::units::positive_duration")]
    pub jwks_max_refresh: Duration,
    /// A token whose `kid` is not in the key set makes the node fetch it again, at most once
    /// per this interval (default 30 s); tokens in between are refused.
    #[serde(with = "crate::units::positive_duration")]
    pub jwks_refetch_interval: Duration,
    /// Look the JWKS URL up in the issuer's OpenID configuration
    /// (`{issuer}/.well-known/openid-configuration`, its `jwks_uri`) instead of `jwks_url`
    /// (default off; needs `issuer`).
    pub oidc_discovery: bool,
    /// API keys (`[[auth.api_keys]]`), stored as SHA-256 hashes only; see `edge::auth::api_key`.
    pub api_keys: Vec<ApiKeyEntry>,
    /// A request header that may carry an API key instead of `Authorization: Bearer` (e.g.
    /// `X-API-Key`; empty, the default: only `Authorization`).
    pub api_key_header: String,
    /// The authorization server's token introspection endpoint (RFC 7662): `https://`, or
    /// `http://` on loopback (empty, the default: none). Opaque bearer tokens (not JWTs) are
    /// checked there; see `edge::auth::introspection`.
    pub introspection_url: String,
    /// The client id the node authenticates to the introspection endpoint with (HTTP Basic).
    pub introspection_client_id: String,
    /// Its secret (shown as `***` by `switchboard config`).
    pub introspection_client_secret: String,
    /// How long an introspection answer is kept per token (default 60 s; an active token's at
    /// most until its `exp`): also the longest a revoked token keeps working on a node.
    #[serde(with = "crate::units::positive_duration")]
    pub introspection_cache_ttl: Duration,
    /// Most tokens whose answers are kept per node (default 10000); the least used go first.
    pub introspection_cache_size: u64,
    /// How long one introspection call may take (default 5 s); then the request gets 401.
    #[serde(with = "crate::units::positive_duration")]
    pub introspection_timeout: Duration,
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            resource_url: String::new(),
            authorization_servers: Vec::new(),
            scopes_supported: Vec::new(),
            required_scopes: Vec::new(),
            issuer: String::new(),
            audience: String::new(),
            hs256_secrets: Vec::new(),
            public_keys_pem: Vec::new(),
            jwks_url: String::new(),
            jwks_min_refresh: Duration::from_secs(60),
            jwks_max_refresh: Duration::from_secs(3600),
            jwks_refetch_interval: Duration::from_secs(30),
            oidc_discovery: false,
            api_keys: Vec::new(),
            api_key_header: String::new(),
            introspection_url: String::new(),
            introspection_client_id: String::new(),
            introspection_client_secret: String::new(),
            introspection_cache_ttl: Duration::from_secs(60),
            introspection_cache_size: 10_000,
            introspection_timeout: Duration::from_secs(5),
        }
    }
}

impl std::fmt::Debug for AuthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthSettings")
            .field("resource_url", &self.resource_url)
            .field("authorization_servers", &self.authorization_servers)
            .field("scopes_supported", &self.scopes_supported)
            .field("required_scopes", &self.required_scopes)
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field(
                "hs256_secrets",
                &format!("<{} redacted>", self.hs256_secrets.len()),
            )
            .field("public_keys_pem", &self.public_keys_pem.len())
            .field("jwks_url", &self.jwks_url)
            .field("jwks_min_refresh", &self.jwks_min_refresh)
            .field("jwks_max_refresh", &self.jwks_max_refresh)
            .field("jwks_refetch_interval", &self.jwks_refetch_interval)
            .field("oidc_discovery", &self.oidc_discovery)
            .field("api_keys", &self.api_keys)
            .field("api_key_header", &self.api_key_header)
            .field("introspection_url", &self.introspection_url)
            .field("introspection_client_id", &self.introspection_client_id)
            .field("introspection_client_secret", &"<redacted>")
            .field("introspection_cache_ttl", &self.introspection_cache_ttl)
            .field("introspection_cache_size", &self.introspection_cache_size)
            .field("introspection_timeout", &self.introspection_timeout)
            .finish()
    }
}

/// Shortest HS256 secret accepted, in bytes (RFC 7518 §3.2: at least the hash size).
pub const MIN_HS256_SECRET_BYTES: usize = 32;

/// What `switchboard config` shows instead of a secret.
pub const REDACTED: &str = "***";
