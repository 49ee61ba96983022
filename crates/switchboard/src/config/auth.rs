//! `[auth]`: when the keys turn authorization on, and which combinations are refused at
//! start-up (each problem names its key). The rules on the values themselves live with the
//! layer ([`switchboard_node::auth::AuthSettings::problems`]), so the node and the config agree.

use serde::{Deserialize, Serialize};
use switchboard_node::auth::{metadata, AuthSettings};

/// The OAuth 2.1 resource-server layer; off while `resource_url` is empty.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Public URL of the MCP endpoint exactly as clients configure it (empty: authorization
    /// off). Set, with a verification key, it turns on the resource-server layer: every request
    /// needs a bearer token; the RFC 9728 metadata names this as `resource` and is served at its
    /// path-inserted location and the root one.
    pub resource_url: String,
    /// Issuer URLs of the authorization servers published in the metadata (at least one when
    /// `resource_url` is set).
    pub authorization_servers: Vec<String>,
    /// `scopes_supported` published in the metadata.
    pub scopes_supported: Vec<String>,
    /// Scopes every request's token must carry; a valid token lacking one gets 403
    /// `insufficient_scope`. Named in the `scope` of every challenge.
    pub required_scopes: Vec<String>,
    /// Required `iss` of tokens (empty: not checked).
    pub issuer: String,
    /// Required `aud` of tokens (empty: `resource_url`).
    pub audience: String,
    /// Shared secrets that verify HS256 tokens, each at least 32 bytes; any one verifies, so
    /// keys can rotate.
    pub jwt_hs256_secrets: Vec<String>,
    /// RSA (RS256) and EC P-256 (ES256) public keys in PEM that verify tokens.
    pub jwt_public_keys_pem: Vec<String>,
}

/// The keys besides `resource_url`, which do nothing while it is empty.
const OTHER_KEYS: [&str; 7] = [
    "auth.authorization_servers",
    "auth.scopes_supported",
    "auth.required_scopes",
    "auth.issuer",
    "auth.audience",
    "auth.jwt_hs256_secrets",
    "auth.jwt_public_keys_pem",
];

impl AuthConfig {
    /// The layer's settings: `Some` when `resource_url` is set (authorization on).
    pub fn settings(&self) -> Option<AuthSettings> {
        (!self.resource_url.is_empty()).then(|| AuthSettings {
            resource_url: self.resource_url.clone(),
            authorization_servers: self.authorization_servers.clone(),
            scopes_supported: self.scopes_supported.clone(),
            required_scopes: self.required_scopes.clone(),
            issuer: self.issuer.clone(),
            audience: self.audience.clone(),
            hs256_secrets: self.jwt_hs256_secrets.clone(),
            public_keys_pem: self.jwt_public_keys_pem.clone(),
        })
    }

    /// Problems of the `[auth]` keys, each with its dotted key. Without `resource_url` every
    /// other key must be empty: a key or scope that silently does nothing would look like
    /// protection that is not there. `endpoint_path` must not be where the metadata is served.
    pub(super) fn problems(&self, endpoint_path: &str) -> Vec<(&'static str, String)> {
        let Some(settings) = self.settings() else {
            return self
                .keys_set()
                .into_iter()
                .map(|key| {
                    let message = format!(
                        "{key} is set but auth.resource_url is empty: set auth.resource_url to turn authorization on, or unset {key}"
                    );
                    (key, message)
                })
                .collect();
        };
        let mut problems = settings.problems();
        if metadata::served_paths(&settings.resource_url).contains(&endpoint_path.to_owned()) {
            problems.push((
                "http.endpoint_path",
                format!(
                    "http.endpoint_path `{endpoint_path}` is where the protected-resource metadata is served"
                ),
            ));
        }
        problems
    }

    fn keys_set(&self) -> Vec<&'static str> {
        let set = [
            !self.authorization_servers.is_empty(),
            !self.scopes_supported.is_empty(),
            !self.required_scopes.is_empty(),
            !self.issuer.is_empty(),
            !self.audience.is_empty(),
            !self.jwt_hs256_secrets.is_empty(),
            !self.jwt_public_keys_pem.is_empty(),
        ];
        OTHER_KEYS
            .into_iter()
            .zip(set)
            .filter(|(_, s)| *s)
            .map(|(key, _)| key)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn on() -> Config {
        Config {
            auth: AuthConfig {
                resource_url: "https://gw.example.test/servers/foo/mcp".into(),
                authorization_servers: vec!["https://as.example.test".into()],
                required_scopes: vec!["mcp:tools".into()],
                jwt_hs256_secrets: vec!["0123456789abcdef0123456789abcdef".into()],
                ..AuthConfig::default()
            },
            ..Config::default()
        }
    }

    #[test]
    fn off_by_default_and_on_with_a_url_and_a_key() {
        assert_eq!(Config::default().auth.settings(), None);
        assert_eq!(Config::default().node_config(true).auth, None);
        let config = on();
        assert_eq!(config.validate(), Vec::<String>::new());
        let node = config.node_config(true).auth.expect("auth on");
        assert_eq!(node.resource_url, "https://gw.example.test/servers/foo/mcp");
        assert_eq!(node.required_scopes, ["mcp:tools"]);
    }

    #[test]
    fn contradictions_name_their_keys() {
        let mut orphan = Config::default();
        orphan.auth.jwt_hs256_secrets = vec!["0123456789abcdef0123456789abcdef".into()];
        orphan.auth.issuer = "https://as.example.test".into();
        let keys: Vec<Vec<&str>> = orphan.problems().into_iter().map(|p| p.keys).collect();
        assert_eq!(keys, [vec!["auth.issuer"], vec!["auth.jwt_hs256_secrets"]]);
        let mut keyless = on();
        keyless.auth.jwt_hs256_secrets = Vec::new();
        let problems = keyless.validate().join("\n");
        assert!(problems.contains("auth.jwt_hs256_secrets"), "{problems}");
        assert!(!problems.contains("auth_"), "{problems}");
        let mut no_servers = on();
        no_servers.auth.authorization_servers = Vec::new();
        assert!(no_servers.validate()[0].starts_with("auth.authorization_servers"));
        let mut shadowed = on();
        shadowed.http.endpoint_path = "/.well-known/oauth-protected-resource".into();
        assert!(shadowed.validate()[0].starts_with("http.endpoint_path"));
    }
}
