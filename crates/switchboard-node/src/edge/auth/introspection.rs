//! Opaque bearer tokens checked with the authorization server's introspection endpoint
//! (RFC 7662), `auth.introspection_url`.
//!
//! - **Which tokens.** A bearer token that is neither a configured API key nor a JWT (not three
//!   base64url parts with a JSON header) is introspected; JWTs are verified locally as before.
//! - **The call.** `POST` of `token=<token>&token_type_hint=access_token` as a form, with HTTP
//!   Basic authentication as `auth.introspection_client_id` / `auth.introspection_client_secret`
//!   (RFC 7662 §2.1), within `auth.introspection_timeout`, no redirects followed.
//! - **The answer.** `active: false` (or anything but `true`) refuses the token as
//!   `invalid_token`. An active token must not be past its `exp`, must name our audience in
//!   `aud` when it carries one (a string or a list; `auth.audience`, default the resource URL),
//!   and must come from `auth.issuer` when both are set. Its principal is `sub` (else `username`,
//!   else `client_id`; one of them is required) of `iss` (else `auth.issuer`, else empty), as a
//!   JWT's is, and its scopes are `scope` (space-separated, or a list).
//! - **Cache.** Answers, active or not, are kept per token (under its SHA-256, never the token
//!   itself) for `auth.introspection_cache_ttl` (default 60 s), an active one at most until its
//!   `exp`; at most `auth.introspection_cache_size` tokens (default 10,000; the least used go
//!   first). A failed call (unreachable, timeout, non-2xx, not JSON) is not cached: the request
//!   is refused with 401 `invalid_token` saying the token could not be checked.
//! - **Revocation.** A token revoked at the authorization server keeps working on a node that
//!   has its answer cached until that entry expires: at most `auth.introspection_cache_ttl`
//!   (each node keeps its own cache). Set it lower for faster revocation, at the price of one
//!   introspection call per token and node per that interval.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::Value;

use super::AuthSettings;
use switchboard_upstream::Principal;

/// Largest introspection answer read.
const MAX_BYTES: usize = 64 * 1024;

/// An introspection answer as kept in the cache.
#[derive(Clone)]
enum Answer {
    /// The token's principal, and its `exp` (Unix seconds) when it has one.
    Active(Principal, Option<u64>),
    /// Refused, with why.
    Refused(String),
}

/// The introspection client and its cache.
pub struct Introspection {
    url: String,
    client_id: String,
    client_secret: String,
    issuer: String,
    audience: String,
    timeout: Duration,
    client: reqwest::Client,
    cache: moka::sync::Cache<[u8; 32], Answer>,
}

/// RFC 7662 §2.2: the members read from an introspection response.
#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    active: Value,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    aud: Option<Value>,
    #[serde(default)]
    exp: Option<u64>,
}

impl Introspection {
    /// The client for `settings.introspection_url`; `None` when it is empty.
    pub fn new(settings: &AuthSettings) -> Option<Introspection> {
        if settings.introspection_url.is_empty() {
            return None;
        }
        let client = reqwest::Client::builder()
            .timeout(settings.introspection_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            // Only a TLS back end that cannot start fails here; the timeout still bounds calls.
            .unwrap_or_default();
        let cache = moka::sync::Cache::builder()
            .max_capacity(settings.introspection_cache_size)
            .time_to_live(settings.introspection_cache_ttl)
            .build();
        Some(Introspection {
            url: settings.introspection_url.clone(),
            client_id: settings.introspection_client_id.clone(),
            client_secret: settings.introspection_client_secret.clone(),
            issuer: settings.issuer.clone(),
            audience: settings.effective_audience().to_owned(),
            timeout: settings.introspection_timeout,
            client,
            cache,
        })
    }

    /// The principal of opaque `token`, from the cache or the introspection endpoint.
    ///
    /// # Errors
    /// Why the token is refused (inactive, expired, another audience or issuer, no subject), or
    /// that it could not be checked (the endpoint failed).
    pub async fn principal(&self, token: &str) -> Result<Principal, String> {
        let key = digest(token);
        let answer = match self.cache.get(&key) {
            Some(answer) => answer,
            None => {
                let answer = self.ask(token).await?;
                self.cache.insert(key, answer.clone());
                answer
            }
        };
        match answer {
            Answer::Active(_, Some(exp)) if exp <= now() => {
                self.cache.invalidate(&key);
                Err("the token has expired".into())
            }
            Answer::Active(principal, _) => Ok(principal),
            Answer::Refused(why) => Err(why),
        }
    }

    /// One introspection call: the answer to cache, or why the token could not be checked.
    async fn ask(&self, token: &str) -> Result<Answer, String> {
        let unchecked = |why: String| {
            tracing::warn!(url = %self.url, error = %why, "token introspection failed");
            format!("the token could not be checked with the authorization server: {why}")
        };
        let form = [("token", token), ("token_type_hint", "access_token")];
        let reply = self
            .client
            .post(&self.url)
            .basic_auth(&self.client_id, Some(&self.client_secret))
            .header("accept", "application/json")
            .form(&form)
            .send()
            .await
            .map_err(|e| unchecked(self.failure(e)))?;
        let status = reply.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            tracing::warn!(url = %self.url, %status, "the introspection endpoint refused this node's client credentials: check auth.introspection_client_id and auth.introspection_client_secret");
        }
        if !status.is_success() {
            return Err(unchecked(format!("it answered {status}")));
        }
        let body = reply
            .bytes()
            .await
            .map_err(|e| unchecked(self.failure(e)))?;
        if body.len() > MAX_BYTES {
            return Err(unchecked(format!("its answer is over {MAX_BYTES} bytes")));
        }
        let response: Response =
            serde_json::from_slice(&body).map_err(|e| unchecked(format!("not JSON: {e}")))?;
        Ok(self.judge(response))
    }

    /// A failed call in words, without the endpoint's URL (the client reads this).
    fn failure(&self, e: reqwest::Error) -> String {
        if e.is_timeout() {
            return format!(
                "no answer within {:?} (auth.introspection_timeout)",
                self.timeout
            );
        }
        e.without_url().to_string()
    }

    /// What an introspection response says of the token.
    fn judge(&self, r: Response) -> Answer {
        if r.active != Value::Bool(true) {
            return Answer::Refused("the token is not active".into());
        }
        if r.exp.is_some_and(|exp| exp <= now()) {
            return Answer::Refused("the token has expired".into());
        }
        let ours = |a: &Value| a.as_str() == Some(self.audience.as_str());
        let aud_ok = match &r.aud {
            None => true,
            Some(Value::Array(list)) => list.iter().any(ours),
            Some(one) => ours(one),
        };
        if !aud_ok {
            return Answer::Refused("the token is for another audience".into());
        }
        if let (false, Some(iss)) = (self.issuer.is_empty(), &r.iss) {
            if *iss != self.issuer {
                return Answer::Refused("the token is from another issuer".into());
            }
        }
        let Some(subject) = r.sub.or(r.username).or(r.client_id) else {
            return Answer::Refused("the introspected token names no subject".into());
        };
        // As a JWT's: `iss`, else the configured issuer, else empty (so a JWT and an opaque
        // token of one subject without `iss` are one principal too).
        let issuer = r.iss.unwrap_or_else(|| self.issuer.clone());
        let scopes = r
            .scope
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let principal = Principal {
            id: serde_json::json!([issuer, subject]).to_string(),
            name: subject,
            scopes,
        };
        Answer::Active(principal, r.exp)
    }
}

/// The cache key of a token: its SHA-256.
fn digest(token: &str) -> [u8; 32] {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}
