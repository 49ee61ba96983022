//! The optional OAuth 2.1 resource-server layer of the MCP endpoint (off unless configured).
//!
//! When on, every POST, GET and DELETE on the endpoint must carry a credential: `Authorization:
//! Bearer <JWT or API key>`, or an API key in the `auth.api_key_header` header, checked before
//! anything reads the body (C34: an empty unauthenticated POST gets 401, not
//! 400). No token → 401 with `WWW-Authenticate: Bearer resource_metadata="…"` (and `scope`
//! when scopes are required); a bad token → 401 `error="invalid_token"`; a valid token lacking
//! a required scope → 403 `error="insufficient_scope"`. The RFC 9728 metadata document is served
//! without a token at its path-inserted location and at the root well-known path.
//!
//! The token's `iss` and `sub` (an API key's configured name: [`api_key`]) form the request's
//! principal. It runs with the request as a
//! task-local (`session::current_principal`), so `initialize` stores it in the new session's record and
//! every later session load compares it with the record it loaded anyway (no extra store round
//! trip): another principal's session is "not found" (404, -32001), never revealed. Without the
//! layer the principal is `session::ANONYMOUS`.
//!
//! Not done: token introspection (RFC 7662), acting as or proxying the
//! authorization server (`/.well-known/oauth-authorization-server/...` is the authorization
//! server's own and is 404 here), per-method scopes.
//!
//! Sources: MCP 2025-11-25, basic/authorization; RFC 9728 (protected-resource metadata); RFC 6750
//! §2.1, §3 (bearer tokens and challenges); MCP 2025-11-25 security best practices, Session
//! Hijacking (bind sessions to the user; never use sessions for authentication).
//!
//! Modules: [`metadata`] (document, locations, challenges), [`token`] (JWT validation),
//! [`jwks`] (the issuer's key set, fetched and refreshed), [`api_key`] (hashed API keys),
//! `settings` ([`AuthSettings`], the `[auth]` section).

pub mod api_key;
pub mod introspection;
pub mod jwks;
pub mod metadata;
mod settings;
pub mod token;

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use switchboard_upstream::Principal;

pub use crate::config::auth::{ApiKeyEntry, AuthSettings, MIN_HS256_SECRET_BYTES, REDACTED};
use crate::edge::error::HttpError;
use metadata::ChallengeKind;
use token::TokenCheck;

/// The layer's state: settings, keys, and the metadata and challenges prepared once.
pub struct Auth {
    settings: AuthSettings,
    verifier: token::Verifier,
    jwks: Option<Arc<jwks::Jwks>>,
    introspection: Option<introspection::Introspection>,
    refresher: Option<tokio::task::AbortHandle>,
    api_keys: api_key::ApiKeys,
    api_key_header: Option<HeaderName>,
    metadata: bytes::Bytes,
    missing: String,
    insufficient: String,
}

impl Drop for Auth {
    fn drop(&mut self) {
        if let Some(task) = &self.refresher {
            task.abort();
        }
    }
}

impl Auth {
    /// Prepares the layer. Keys that do not parse are left out (tokens for them are refused);
    /// start-up refuses such settings before this ([`AuthSettings::problems`]). With
    /// `jwks_url` (or `oidc_discovery`), called inside a Tokio runtime, it spawns the key-set refresher
    /// ([`jwks::Jwks::run`]), stopped when the layer is dropped.
    pub fn new(settings: AuthSettings) -> Auth {
        let (verifier, _) = token::Verifier::new(&settings);
        let metadata = metadata::document(&settings).to_string().into();
        let jwks = (!settings.jwks_url.is_empty() || settings.oidc_discovery)
            .then(|| Arc::new(jwks::Jwks::new(&settings)));
        let refresher = match (&jwks, tokio::runtime::Handle::try_current()) {
            (Some(jwks), Ok(rt)) => Some(rt.spawn(jwks.clone().run()).abort_handle()),
            (Some(_), Err(_)) => {
                tracing::warn!("no runtime runs: JWKS keys are fetched on demand only");
                None
            }
            _ => None,
        };
        Auth {
            missing: metadata::challenge(&settings, ChallengeKind::Missing),
            insufficient: metadata::challenge(&settings, ChallengeKind::InsufficientScope),
            verifier,
            jwks,
            introspection: introspection::Introspection::new(&settings),
            refresher,
            api_keys: api_key::ApiKeys::new(&settings.api_keys),
            api_key_header: HeaderName::from_bytes(settings.api_key_header.as_bytes()).ok(),
            metadata,
            settings,
        }
    }

    /// The refusal of a request the `[policy]` lets through only with `needed` scopes the
    /// credential lacks (step-up): 403 with an `insufficient_scope` challenge naming them
    /// ([`metadata::step_up_challenge`]).
    pub fn step_up(&self, needed: &[String]) -> HttpError {
        HttpError::InsufficientScope {
            challenge: metadata::step_up_challenge(&self.settings, needed),
            lacking: needed.join(" "),
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

    /// Checks the request's credential (a JWT or an API key, see [`Auth::credential`]) and
    /// the required scopes; the principal on success.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, HttpError> {
        let principal = match self.credential(headers) {
            Credential::Missing => {
                return Err(HttpError::MissingToken {
                    challenge: self.missing.clone(),
                })
            }
            Credential::Bad(why) => return Err(self.invalid(why)),
            Credential::ApiKey(key) => match self.api_keys.find(key) {
                Some(p) => Principal::clone(&p),
                None => return Err(self.invalid("the API key is not valid")),
            },
            Credential::Bearer(token) => self.bearer(token).await?,
        };
        let lacking: Vec<&str> = self
            .settings
            .required_scopes
            .iter()
            .filter(|s| !principal.scopes.contains(s))
            .map(String::as_str)
            .collect();
        if !lacking.is_empty() {
            return Err(HttpError::InsufficientScope {
                challenge: self.insufficient.clone(),
                lacking: lacking.join(" "),
            });
        }
        Ok(principal)
    }

    /// A bearer token is an API key when its hash is configured, else it must be a valid JWT.
    async fn bearer(&self, token: &str) -> Result<Principal, HttpError> {
        if let Some(p) = self.api_keys.find(token) {
            return Ok(Principal::clone(&p));
        }
        match self.verify_jwt(token).await {
            Ok(v) => Ok(Principal {
                id: v.principal(),
                name: v.subject,
                scopes: v.scopes,
            }),
            // Not a JWT: an opaque token, for the introspection endpoint when one is set.
            Err(_) if self.introspection.is_some() && token::read_header(token).is_err() => {
                let introspection = self.introspection.as_ref().expect("checked in the guard");
                introspection
                    .principal(token)
                    .await
                    .map_err(|why| self.invalid(&why))
            }
            // Not even a JWT: say no more than that it is invalid.
            Err(_) if !self.api_keys.is_empty() && token::read_header(token).is_err() => {
                Err(self.invalid("the token is neither a valid JWT nor a known API key"))
            }
            Err(why) => Err(self.invalid(&why)),
        }
    }

    /// Verifies a JWT with the configured keys, then (RS256, ES256) the JWKS keys.
    async fn verify_jwt(&self, token: &str) -> Result<token::Verified, String> {
        let header = token::read_header(token)?;
        let configured = self.verifier.configured(header.alg);
        match self.verifier.check(token, header.alg, configured) {
            TokenCheck::Verified(v) => return Ok(v),
            TokenCheck::Refused(why) => return Err(why),
            TokenCheck::NoKeyVerified => {}
        }
        let jwks = self
            .jwks
            .as_ref()
            .filter(|_| header.alg != jsonwebtoken::Algorithm::HS256);
        let Some(jwks) = jwks else {
            return Err(if configured.is_empty() {
                format!("no key for {:?} tokens is configured", header.alg)
            } else {
                "the token's signature does not verify".into()
            });
        };
        let kid = header.kid.as_deref();
        let set = jwks.key_set_for(kid).await?;
        match self
            .verifier
            .check(token, header.alg, set.matching(header.alg, kid))
        {
            TokenCheck::Verified(v) => Ok(v),
            TokenCheck::Refused(why) => Err(why),
            TokenCheck::NoKeyVerified => Err(match kid {
                Some(kid) if !set.has_kid(kid) => {
                    "the token's kid is not in the issuer's key set".into()
                }
                _ => "the token's signature does not verify".into(),
            }),
        }
    }

    /// The request's credential: `Authorization: Bearer`, or the `auth.api_key_header`
    /// header's API key; both at once is refused (RFC 6750 §2: one method per request).
    fn credential<'h>(&self, headers: &'h HeaderMap) -> Credential<'h> {
        let bearer = bearer_token(headers);
        let Some(name) = &self.api_key_header else {
            return bearer;
        };
        let mut values = headers.get_all(name).iter();
        let Some(value) = values.next() else {
            return bearer;
        };
        if !matches!(bearer, Credential::Missing) {
            return Credential::Bad("both Authorization and the API key header carry a credential");
        }
        if values.next().is_some() {
            return Credential::Bad("more than one API key header");
        }
        match value.to_str().map(str::trim) {
            Err(_) => Credential::Bad("the API key header is not ASCII"),
            Ok("") => Credential::Bad("the API key is empty"),
            Ok(key) => Credential::ApiKey(key),
        }
    }

    fn invalid(&self, why: &str) -> HttpError {
        HttpError::InvalidToken {
            challenge: metadata::challenge(&self.settings, ChallengeKind::InvalidToken(why)),
            reason: why.to_owned(),
        }
    }
}

enum Credential<'a> {
    Missing,
    Bad(&'static str),
    Bearer(&'a str),
    ApiKey(&'a str),
}

/// The token of `Authorization: Bearer <token>` (RFC 6750 §2.1; the scheme is
/// case-insensitive). Another scheme counts as no bearer credentials (RFC 6750 §3.1: no error
/// code); tokens are never read from the query string (MCP: MUST NOT).
fn bearer_token(headers: &HeaderMap) -> Credential<'_> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Credential::Missing;
    };
    if values.next().is_some() {
        return Credential::Bad("more than one Authorization header");
    }
    let Ok(value) = value.to_str() else {
        return Credential::Bad("the Authorization header is not ASCII");
    };
    let (scheme, rest) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Credential::Missing;
    }
    match rest.trim() {
        "" => Credential::Bad("the bearer token is empty"),
        token => Credential::Bearer(token),
    }
}

#[cfg(test)]
mod tests;
