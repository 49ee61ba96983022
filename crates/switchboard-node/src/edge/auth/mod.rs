//! The optional OAuth 2.1 resource-server layer of the MCP endpoint (off unless configured).
//!
//! When on, every POST, GET and DELETE on the endpoint must carry `Authorization: Bearer <JWT>`,
//! checked before anything reads the body (C34: an empty unauthenticated POST gets 401, not
//! 400). No token → 401 with `WWW-Authenticate: Bearer resource_metadata="…"` (and `scope`
//! when scopes are required); a bad token → 401 `error="invalid_token"`; a valid token lacking
//! a required scope → 403 `error="insufficient_scope"`. The RFC 9728 metadata document is served
//! without a token at its path-inserted location and at the root well-known path.
//!
//! The token's `iss` and `sub` form the request's principal. It runs with the request as a
//! task-local (`session::current_principal`), so `initialize` stores it in the new session's record and
//! every later session load compares it with the record it loaded anyway (no extra store round
//! trip): another principal's session is "not found" (404, -32001), never revealed. Without the
//! layer the principal is `session::ANONYMOUS`.
//!
//! Not done: token introspection (RFC 7662), JWKS fetching, acting as or proxying the
//! authorization server (`/.well-known/oauth-authorization-server/...` is the authorization
//! server's own and is 404 here), per-method scopes.
//!
//! Sources: MCP 2025-11-25, basic/authorization; RFC 9728 (protected-resource metadata); RFC 6750
//! §2.1, §3 (bearer tokens and challenges); MCP 2025-11-25 security best practices, Session
//! Hijacking (bind sessions to the user; never use sessions for authentication).
//!
//! Modules: [`metadata`] (document, locations, challenges), [`token`] (JWT validation).

pub mod metadata;
pub mod token;

use axum::body::Body;
use axum::response::Response;
use http::{header, HeaderMap, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};

use crate::edge::error::HttpError;
use metadata::ChallengeKind;

/// The authorization settings: the `[auth]` config section itself (TOML keys are the field
/// names, except `jwt_hs256_secrets` and `jwt_public_keys_pem`). Off while `resource_url` is
/// empty (the default); [`crate::NodeConfig::auth`] holds them only when on.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthSettings {
    /// Public URL of the MCP endpoint exactly as clients configure it (empty: authorization
    /// off). Set, with a verification key, it turns on the resource-server layer: every request
    /// needs a bearer token; the RFC 9728 metadata names this as `resource` and is served at its
    /// path-inserted location and the root one (RFC 9728 §3.1).
    pub resource_url: String,
    /// Issuer URLs of the authorization servers published in the metadata (RFC 9728
    /// `authorization_servers`; at least one when `resource_url` is set).
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
    /// Shared secrets that verify HS256 tokens (key `jwt_hs256_secrets`), each at least 32
    /// bytes; any one verifies, so keys can rotate.
    #[serde(rename = "jwt_hs256_secrets")]
    pub hs256_secrets: Vec<String>,
    /// RSA (RS256) and EC P-256 (ES256) public keys in PEM that verify tokens (key
    /// `jwt_public_keys_pem`).
    #[serde(rename = "jwt_public_keys_pem")]
    pub public_keys_pem: Vec<String>,
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
            .finish()
    }
}

/// Shortest HS256 secret accepted, in bytes (RFC 7518 §3.2: at least the hash size).
pub const MIN_HS256_SECRET_BYTES: usize = 32;

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

    /// Every problem with these settings, each with the config key it is about. Start-up
    /// refuses settings with any. Off, every other key must be empty: a key or scope that
    /// silently does nothing would look like protection that is not there.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        if !self.is_on() {
            return self.keys_set_while_off();
        }
        let mut out = Vec::new();
        if let Some(why) = url_problem(&self.resource_url, true) {
            out.push(("auth.resource_url", format!("auth.resource_url {why}")));
        }
        if self.authorization_servers.is_empty() {
            out.push((
                "auth.authorization_servers",
                "auth.authorization_servers must list at least one issuer URL when auth.resource_url is set (RFC 9728 §2)".to_owned(),
            ));
        }
        for s in &self.authorization_servers {
            if let Some(why) = url_problem(s, false) {
                out.push((
                    "auth.authorization_servers",
                    format!("auth.authorization_servers entry {why}"),
                ));
            }
        }
        out.extend(self.scope_problems());
        if self.hs256_secrets.is_empty() && self.public_keys_pem.is_empty() {
            out.push(("auth.jwt_hs256_secrets", "auth.resource_url is set but no verification key is: set auth.jwt_hs256_secrets or auth.jwt_public_keys_pem".to_owned()));
        }
        for (i, s) in self.hs256_secrets.iter().enumerate() {
            if s.len() < MIN_HS256_SECRET_BYTES {
                out.push(("auth.jwt_hs256_secrets", format!("auth.jwt_hs256_secrets entry {} is shorter than {MIN_HS256_SECRET_BYTES} bytes (RFC 7518 §3.2)", i + 1)));
            }
        }
        out.extend(token::Verifier::new(self).1);
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
            // RFC 6749 §3.3 scope-token: %x21 / %x23-5B / %x5D-7E.
            let bad = list.iter().find(|s| {
                s.is_empty()
                    || !s
                        .bytes()
                        .all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
            });
            if let Some(bad) = bad {
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
/// and no query or fragment (RFC 9728 §1.2 for the resource; RFC 8414 §2 for issuers).
fn url_problem(url: &str, is_resource: bool) -> Option<String> {
    let what = if is_resource { "" } else { " issuer" };
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

/// The layer's state: settings, keys, and the metadata and challenges prepared once.
pub struct Auth {
    settings: AuthSettings,
    verifier: token::Verifier,
    metadata: bytes::Bytes,
    missing: String,
    insufficient: String,
}

impl Auth {
    /// Prepares the layer. Keys that do not parse are left out (tokens for them are refused);
    /// start-up refuses such settings before this ([`AuthSettings::problems`]).
    pub fn new(settings: AuthSettings) -> Auth {
        let (verifier, _) = token::Verifier::new(&settings);
        let metadata = metadata::document(&settings).to_string().into();
        Auth {
            missing: metadata::challenge(&settings, ChallengeKind::Missing),
            insufficient: metadata::challenge(&settings, ChallengeKind::InsufficientScope),
            verifier,
            metadata,
            settings,
        }
    }

    /// The paths the metadata document is served on (see [`metadata::served_paths`]).
    pub fn metadata_paths(&self) -> Vec<String> {
        metadata::served_paths(&self.settings.resource_url)
    }

    /// 200 with the metadata document (the same bytes on every node with the same config).
    pub fn metadata_response(&self) -> Response {
        let mut resp = Response::new(Body::from(self.metadata.clone()));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        *resp.status_mut() = StatusCode::OK;
        resp
    }

    /// Checks the request's bearer token and scopes; the principal on success.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
    ) -> Result<switchboard_upstream::Principal, HttpError> {
        let token = match bearer_token(headers) {
            Bearer::Missing => {
                return Err(HttpError::MissingToken {
                    challenge: self.missing.clone(),
                })
            }
            Bearer::Bad(why) => return Err(self.invalid(why)),
            Bearer::Token(t) => t,
        };
        let verified = self
            .verifier
            .verify(token)
            .map_err(|why| self.invalid(&why))?;
        let lacking: Vec<&str> = self
            .settings
            .required_scopes
            .iter()
            .filter(|s| !verified.scopes.contains(s))
            .map(String::as_str)
            .collect();
        if !lacking.is_empty() {
            return Err(HttpError::InsufficientScope {
                challenge: self.insufficient.clone(),
                lacking: lacking.join(" "),
            });
        }
        Ok(switchboard_upstream::Principal {
            id: verified.principal(),
            name: verified.subject,
            scopes: verified.scopes,
        })
    }

    fn invalid(&self, why: &str) -> HttpError {
        HttpError::InvalidToken {
            challenge: metadata::challenge(&self.settings, ChallengeKind::InvalidToken(why)),
            reason: why.to_owned(),
        }
    }
}

enum Bearer<'a> {
    Missing,
    Bad(&'static str),
    Token(&'a str),
}

/// The token of `Authorization: Bearer <token>` (RFC 6750 §2.1; the scheme is
/// case-insensitive). Another scheme counts as no bearer credentials (RFC 6750 §3.1: no error
/// code); tokens are never read from the query string (MCP: MUST NOT).
fn bearer_token(headers: &HeaderMap) -> Bearer<'_> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Bearer::Missing;
    };
    if values.next().is_some() {
        return Bearer::Bad("more than one Authorization header");
    }
    let Ok(value) = value.to_str() else {
        return Bearer::Bad("the Authorization header is not ASCII");
    };
    let (scheme, rest) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Bearer::Missing;
    }
    match rest.trim() {
        "" => Bearer::Bad("the bearer token is empty"),
        token => Bearer::Token(token),
    }
}

#[cfg(test)]
mod tests;
