//! `[auth]`: the section is the node's [`AuthSettings`] (its rules, and its defaults, live with
//! it: [`AuthSettings::problems`]). What is left here is the one rule that compares it with
//! another section: the MCP endpoint must not be where the metadata is served.

use switchboard_node::auth::{metadata, AuthSettings};

/// Problems of the `[auth]` keys, each with its dotted key: the settings' own
/// ([`AuthSettings::problems`]), and, when on, `endpoint_path` must not be a path the
/// protected-resource metadata is served on.
pub(super) fn problems(auth: &AuthSettings, endpoint_path: &str) -> Vec<(&'static str, String)> {
    let mut problems = auth.problems();
    if auth.is_on()
        && metadata::served_paths(&auth.resource_url).contains(&endpoint_path.to_owned())
    {
        problems.push((
            "http.endpoint_path",
            format!(
                "http.endpoint_path `{endpoint_path}` is where the protected-resource metadata is served"
            ),
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn on() -> Config {
        Config {
            auth: AuthSettings {
                resource_url: "https://gw.example.test/servers/foo/mcp".into(),
                authorization_servers: vec!["https://as.example.test".into()],
                required_scopes: vec!["mcp:tools".into()],
                hs256_secrets: vec!["0123456789abcdef0123456789abcdef".into()],
                ..AuthSettings::default()
            },
            ..Config::default()
        }
    }

    #[test]
    fn off_by_default_and_on_with_a_url_and_a_key() {
        assert!(!Config::default().auth.is_on());
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
        orphan.auth.hs256_secrets = vec!["0123456789abcdef0123456789abcdef".into()];
        orphan.auth.issuer = "https://as.example.test".into();
        let keys: Vec<Vec<&str>> = orphan.problems().into_iter().map(|p| p.keys).collect();
        assert_eq!(keys, [vec!["auth.issuer"], vec!["auth.jwt_hs256_secrets"]]);
        let mut keyless = on();
        keyless.auth.hs256_secrets = Vec::new();
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
