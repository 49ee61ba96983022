//! The `auth_*` keys: when they turn authorization on, and which combinations are refused at
//! start-up (each problem names its key). The rules on the values themselves live with the
//! layer ([`switchboard_node::auth::AuthSettings::problems`]), so the node and the config agree.

use switchboard_node::auth::{metadata, AuthSettings};

use super::Config;

impl Config {
    /// The layer's settings: `Some` when `auth_resource_url` is set (authorization on).
    pub fn auth_settings(&self) -> Option<AuthSettings> {
        (!self.auth_resource_url.is_empty()).then(|| AuthSettings {
            resource_url: self.auth_resource_url.clone(),
            authorization_servers: self.auth_authorization_servers.clone(),
            scopes_supported: self.auth_scopes_supported.clone(),
            required_scopes: self.auth_required_scopes.clone(),
            issuer: self.auth_issuer.clone(),
            audience: self.auth_audience.clone(),
            hs256_secrets: self.auth_jwt_hs256_secrets.clone(),
            public_keys_pem: self.auth_jwt_public_keys_pem.clone(),
        })
    }

    /// Problems of the `auth_*` keys, each with its key. Without `auth_resource_url` every
    /// other `auth_*` key must be empty: a key or scope that silently does nothing would look
    /// like protection that is not there.
    pub(super) fn auth_problems(&self) -> Vec<(&'static str, String)> {
        let Some(settings) = self.auth_settings() else {
            return self
                .auth_keys_set()
                .into_iter()
                .map(|key| {
                    let message = format!(
                        "{key} is set but auth_resource_url is empty: set auth_resource_url to turn authorization on, or unset {key}"
                    );
                    (key, message)
                })
                .collect();
        };
        let mut problems = settings.problems();
        let served = metadata::served_paths(&settings.resource_url);
        if served.contains(&self.endpoint_path) {
            problems.push((
                "endpoint_path",
                format!(
                    "endpoint_path `{}` is where the protected-resource metadata is served",
                    self.endpoint_path
                ),
            ));
        }
        problems
    }

    fn auth_keys_set(&self) -> Vec<&'static str> {
        let set = [
            (
                "auth_authorization_servers",
                !self.auth_authorization_servers.is_empty(),
            ),
            (
                "auth_scopes_supported",
                !self.auth_scopes_supported.is_empty(),
            ),
            (
                "auth_required_scopes",
                !self.auth_required_scopes.is_empty(),
            ),
            ("auth_issuer", !self.auth_issuer.is_empty()),
            ("auth_audience", !self.auth_audience.is_empty()),
            (
                "auth_jwt_hs256_secrets",
                !self.auth_jwt_hs256_secrets.is_empty(),
            ),
            (
                "auth_jwt_public_keys_pem",
                !self.auth_jwt_public_keys_pem.is_empty(),
            ),
        ];
        set.into_iter()
            .filter(|(_, s)| *s)
            .map(|(k, _)| k)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> Config {
        Config {
            auth_resource_url: "https://gw.example.test/servers/foo/mcp".into(),
            auth_authorization_servers: vec!["https://as.example.test".into()],
            auth_required_scopes: vec!["mcp:tools".into()],
            auth_jwt_hs256_secrets: vec!["0123456789abcdef0123456789abcdef".into()],
            ..Config::default()
        }
    }

    #[test]
    fn off_by_default_and_on_with_a_url_and_a_key() {
        assert_eq!(Config::default().auth_settings(), None);
        assert_eq!(Config::default().node_config(true).auth, None);
        let config = on();
        assert_eq!(config.validate(), Vec::<String>::new());
        let node = config.node_config(true).auth.expect("auth on");
        assert_eq!(node.resource_url, "https://gw.example.test/servers/foo/mcp");
        assert_eq!(node.required_scopes, ["mcp:tools"]);
    }

    #[test]
    fn contradictions_name_their_keys() {
        let orphan = Config {
            auth_jwt_hs256_secrets: vec!["0123456789abcdef0123456789abcdef".into()],
            auth_issuer: "https://as.example.test".into(),
            ..Config::default()
        };
        let keys: Vec<Vec<&str>> = orphan.problems().into_iter().map(|p| p.keys).collect();
        assert_eq!(keys, [vec!["auth_issuer"], vec!["auth_jwt_hs256_secrets"]]);
        let keyless = Config {
            auth_jwt_hs256_secrets: Vec::new(),
            ..on()
        };
        let problems = keyless.validate().join("\n");
        assert!(problems.contains("auth_jwt_hs256_secrets"), "{problems}");
        let no_servers = Config {
            auth_authorization_servers: Vec::new(),
            ..on()
        };
        assert!(no_servers.validate()[0].starts_with("auth_authorization_servers"));
        let shadowed = Config {
            endpoint_path: "/.well-known/oauth-protected-resource".into(),
            ..on()
        };
        assert!(shadowed.validate()[0].starts_with("endpoint_path"));
    }
}
