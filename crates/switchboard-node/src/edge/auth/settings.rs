//! The start-up checks of [`AuthSettings`] (the `[auth]` config section, defined in
//! `config::auth`): [`AuthSettings::problems`], every problem named by its dotted key, and what
//! the settings mean (the audience tokens need, whether the layer is on).

use super::{api_key, metadata, token};
use crate::config::auth::{AuthSettings, MIN_HS256_SECRET_BYTES, REDACTED};

impl AuthSettings {
    /// The audience tokens must name: `audience`, or the resource URL when that is empty.
    pub fn effective_audience(&self) -> &str {
        if self.audience.is_empty() {
            &self.resource_url
        } else {
            &self.audience
        }
    }

    /// Whether authorization is on: `resource_url` is set.
    pub fn is_on(&self) -> bool {
        !self.resource_url.is_empty()
    }

    /// These settings with every HS256 secret shown as [`REDACTED`] (API key hashes, public
    /// keys and URLs are not secrets and stay), for `switchboard config`.
    pub fn redacted(&self) -> AuthSettings {
        let secret = if self.introspection_client_secret.is_empty() {
            String::new()
        } else {
            REDACTED.to_owned()
        };
        AuthSettings {
            hs256_secrets: vec![REDACTED.to_owned(); self.hs256_secrets.len()],
            introspection_client_secret: secret,
            ..self.clone()
        }
    }

    /// Every problem with these settings, each with the config key it is about. Start-up
    /// refuses settings with any. Off, every other key must be empty: a key or scope that
    /// silently does nothing would look like protection that is not there.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        if !self.is_on() {
            return self.keys_set_while_off();
        }
        let mut out = Vec::new();
        if let Some(why) = url_problem(&self.resource_url, "") {
            out.push(("auth.resource_url", format!("auth.resource_url {why}")));
        }
        if self.authorization_servers.is_empty() {
            out.push((
                "auth.authorization_servers",
                "auth.authorization_servers must list at least one issuer URL when auth.resource_url is set (RFC 9728 §2)".to_owned(),
            ));
        }
        for s in &self.authorization_servers {
            if let Some(why) = url_problem(s, " issuer") {
                out.push((
                    "auth.authorization_servers",
                    format!("auth.authorization_servers entry {why}"),
                ));
            }
        }
        out.extend(self.scope_problems());
        out.extend(self.key_problems());
        out.extend(self.jwks_problems());
        out.extend(api_key::problems(&self.api_keys, &self.api_key_header));
        out
    }

    fn key_problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if self.hs256_secrets.is_empty()
            && self.public_keys_pem.is_empty()
            && self.jwks_url.is_empty()
            && !self.oidc_discovery
            && self.api_keys.is_empty()
            && self.introspection_url.is_empty()
        {
            out.push(("auth.jwt_hs256_secrets", "auth.resource_url is set but no verification key is: set auth.jwt_hs256_secrets, auth.jwt_public_keys_pem, auth.jwks_url, auth.oidc_discovery, auth.api_keys or auth.introspection_url".to_owned()));
        }
        if !self.introspection_url.is_empty() {
            if let Some(why) = url_problem(&self.introspection_url, "") {
                out.push((
                    "auth.introspection_url",
                    format!("auth.introspection_url {why}"),
                ));
            }
            if self.introspection_client_id.is_empty() {
                out.push(("auth.introspection_client_id", "auth.introspection_url is set: set auth.introspection_client_id (and its secret), the client the node authenticates as (RFC 7662 §2.1)".to_owned()));
            }
            if self.introspection_client_secret.is_empty() {
                out.push(("auth.introspection_client_secret", "auth.introspection_url is set: set auth.introspection_client_secret, the secret of auth.introspection_client_id (HTTP Basic, RFC 7662 §2.1)".to_owned()));
            }
            if self.introspection_cache_size == 0 {
                out.push((
                    "auth.introspection_cache_size",
                    "auth.introspection_cache_size must be at least 1".to_owned(),
                ));
            }
        }
        for (i, s) in self.hs256_secrets.iter().enumerate() {
            if s.len() < MIN_HS256_SECRET_BYTES {
                out.push(("auth.jwt_hs256_secrets", format!("auth.jwt_hs256_secrets entry {} is shorter than {MIN_HS256_SECRET_BYTES} bytes (RFC 7518 §3.2)", i + 1)));
            }
        }
        out.extend(token::Verifier::new(self).1);
        out
    }

    fn jwks_problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !self.jwks_url.is_empty() {
            if let Some(why) = url_problem(&self.jwks_url, "") {
                out.push(("auth.jwks_url", format!("auth.jwks_url {why}")));
            }
        }
        if self.oidc_discovery && !self.jwks_url.is_empty() {
            out.push((
                "auth.oidc_discovery",
                "auth.oidc_discovery and auth.jwks_url are both set: set one (discovery finds the JWKS URL itself)".to_owned(),
            ));
        }
        if self.oidc_discovery {
            if let Some(why) = url_problem(&self.issuer, " issuer") {
                out.push((
                    "auth.oidc_discovery",
                    format!("auth.oidc_discovery needs auth.issuer to be the issuer's URL: auth.issuer {why}"),
                ));
            }
        }
        if self.jwks_min_refresh > self.jwks_max_refresh {
            out.push((
                "auth.jwks_min_refresh",
                format!(
                    "auth.jwks_min_refresh ({:?}) is longer than auth.jwks_max_refresh ({:?})",
                    self.jwks_min_refresh, self.jwks_max_refresh
                ),
            ));
        }
        out
    }

    /// The keys besides `resource_url` that are set, each with its problem (they do nothing
    /// while it is empty).
    fn keys_set_while_off(&self) -> Vec<(&'static str, String)> {
        let set = [
            (
                "auth.authorization_servers",
                !self.authorization_servers.is_empty(),
            ),
            ("auth.scopes_supported", !self.scopes_supported.is_empty()),
            ("auth.required_scopes", !self.required_scopes.is_empty()),
            ("auth.issuer", !self.issuer.is_empty()),
            ("auth.audience", !self.audience.is_empty()),
            ("auth.jwt_hs256_secrets", !self.hs256_secrets.is_empty()),
            ("auth.jwt_public_keys_pem", !self.public_keys_pem.is_empty()),
            ("auth.jwks_url", !self.jwks_url.is_empty()),
            ("auth.oidc_discovery", self.oidc_discovery),
            ("auth.api_keys", !self.api_keys.is_empty()),
            ("auth.api_key_header", !self.api_key_header.is_empty()),
            ("auth.introspection_url", !self.introspection_url.is_empty()),
            (
                "auth.introspection_client_id",
                !self.introspection_client_id.is_empty(),
            ),
            (
                "auth.introspection_client_secret",
                !self.introspection_client_secret.is_empty(),
            ),
        ];
        set.into_iter()
            .filter(|(_, set)| *set)
            .map(|(key, _)| {
                let message = format!(
                    "{key} is set but auth.resource_url is empty: set auth.resource_url to turn authorization on, or unset {key}"
                );
                (key, message)
            })
            .collect()
    }

    fn scope_problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let lists = [
            ("auth.scopes_supported", &self.scopes_supported),
            ("auth.required_scopes", &self.required_scopes),
        ];
        for (key, list) in lists {
            if let Some(bad) = list.iter().find(|s| !metadata::is_scope_token(s)) {
                out.push((key, format!("{key} entry `{bad}` is not a scope token (no spaces, quotes or backslashes)")));
            }
        }
        if !self.scopes_supported.is_empty() {
            if let Some(s) = self
                .required_scopes
                .iter()
                .find(|s| !self.scopes_supported.contains(s))
            {
                out.push((
                    "auth.required_scopes",
                    format!("auth.required_scopes entry `{s}` is not in auth.scopes_supported"),
                ));
            }
        }
        out
    }
}

/// An absolute `https://` URL (or `http://` on a loopback host, for local testing) with a host
/// and no query or fragment (RFC 9728 §1.2 for the resource; RFC 8414 §2 for issuers). `what`
/// names the kind in the message (`" issuer"` or empty).
pub(super) fn url_problem(url: &str, what: &str) -> Option<String> {
    let Some((origin, _)) = metadata::split_url(url) else {
        return Some(format!("`{url}` must be an absolute https://{what} URL"));
    };
    let (scheme, host) = origin.split_once("://").unwrap_or(("", ""));
    let host_name = host.rsplit_once(':').map_or(host, |(h, _)| h);
    let loopback = matches!(host_name, "localhost" | "127.0.0.1" | "[::1]");
    let ok = !host.is_empty()
        && !host.contains('@')
        && (scheme == "https" || scheme == "http" && loopback)
        && !url.contains(['?', '#', ' ', '"']);
    (!ok).then(|| {
        format!("`{url}` must be an absolute https://{what} URL with a host and no query, fragment, spaces or quotes (http:// only on loopback)")
    })
}
