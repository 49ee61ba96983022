//! The issuer's signing keys from `auth.jwks_url` (RFC 7517 JWK Set), fetched and kept fresh
//! in the background, refetched on demand when a token names an unknown `kid`.
//!
//! - **Start.** The first fetch runs in the background: start-up never waits for the provider.
//!   Until a fetch succeeds, tokens that need a JWKS key are refused (`invalid_token`, "the
//!   signing keys of auth.jwks_url are not loaded yet").
//! - **Cache.** A fetched set is kept for the response's `Cache-Control: max-age`, bounded to
//!   `[auth.jwks_min_refresh, auth.jwks_max_refresh]` (without a max-age, or with `no-cache` /
//!   `no-store`: `jwks_min_refresh`), then fetched again.
//! - **Unknown `kid`.** A token whose `kid` is not in the set makes this node fetch again, at
//!   most once per `auth.jwks_refetch_interval` counted from the last fetch of any kind.
//!   Concurrent requests share one fetch (single flight: they wait for it and use its keys).
//!   A token without `kid` is tried against every key of its algorithm and never refetches.
//! - **Failures.** A fetch that fails (unreachable, timeout, non-2xx, not a JWK Set, larger
//!   than [`MAX_BYTES`], more than [`MAX_KEYS`] keys, or no usable key) keeps the keys already
//!   held and is retried after 1 s, doubling up to `jwks_min_refresh`; each failure logs a
//!   warning. A successful fetch replaces the set, so a withdrawn key stops verifying then.
//! - **Keys used.** `kty: RSA` as RS256 and `kty: EC` on P-256 as ES256; a key whose `use` is
//!   not `sig`, or whose `alg` names another algorithm, is skipped (so is any other kind).
//!   Redirects are not followed.
//!
//! - **Discovery.** With `auth.oidc_discovery`, the URL is the `jwks_uri` of the issuer's
//!   OpenID configuration ([`discovery`]), looked up before the first fetch and again after a
//!   fetch fails.
//!
//! Sources: RFC 7517 §4-5 (JWK parameters, JWK Set); RFC 7515 §4.1.4 (`kid`); RFC 9111 §5.2.2.1
//! (`max-age`); OpenID Connect Core §10.1.1 (rotation of signing keys via `kid`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use backon::{BackoffBuilder, ExponentialBuilder};
use parking_lot::RwLock;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

use super::AuthSettings;

pub mod discovery;

/// Longest one fetch may take, connection to last byte.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest key-set document accepted, in bytes.
pub const MAX_BYTES: usize = 512 * 1024;
/// Most keys one key set may hold.
pub const MAX_KEYS: usize = 100;
/// First wait before retrying a failed fetch (doubling up to `jwks_min_refresh`).
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// One usable signing key of the set.
pub struct Key {
    /// Its `kid`, if it has one.
    pub kid: Option<String>,
    /// The one algorithm it verifies (RS256 or ES256).
    pub alg: Algorithm,
    /// The key.
    pub key: DecodingKey,
}

/// The keys held now.
#[derive(Default)]
pub struct KeySet {
    keys: Vec<Key>,
    loaded: bool,
}

impl KeySet {
    /// Whether a key has this `kid`.
    pub fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }

    /// The keys that may verify a token of `alg` naming `kid` (all of `alg`'s without one).
    pub fn matching<'a>(
        &'a self,
        alg: Algorithm,
        kid: Option<&'a str>,
    ) -> impl Iterator<Item = &'a DecodingKey> + 'a {
        self.keys
            .iter()
            .filter(move |k| k.alg == alg && (kid.is_none() || k.kid.as_deref() == kid))
            .map(|k| &k.key)
    }
}

/// The fetcher and its cache; one per node.
pub struct Jwks {
    /// `auth.jwks_url`, or the last `jwks_uri` discovered (empty until then).
    url: parking_lot::Mutex<String>,
    /// The issuer whose discovery document names the URL (`auth.oidc_discovery`), if any.
    discover: Option<String>,
    client: reqwest::Client,
    min_refresh: Duration,
    max_refresh: Duration,
    refetch_interval: Duration,
    current: RwLock<Arc<KeySet>>,
    /// Fetches finished (successful or not); a waiter that sees it move knows one ran.
    attempts: AtomicU64,
    /// When the last fetch started; held while a fetch runs (the single flight).
    last_attempt: tokio::sync::Mutex<Option<Instant>>,
}

impl Jwks {
    /// The fetcher for `settings.jwks_url` (nothing is fetched until [`Jwks::run`]).
    pub fn new(settings: &AuthSettings) -> Jwks {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            // Fetches are minutes apart: a fresh connection each time, so nothing pooled
            // outlives the provider's own view of it.
            .pool_max_idle_per_host(0)
            .build()
            // Only a TLS back end that cannot start fails here; `get` still bounds the time.
            .unwrap_or_default();
        Jwks {
            url: parking_lot::Mutex::new(settings.jwks_url.clone()),
            discover: settings.oidc_discovery.then(|| settings.issuer.clone()),
            client,
            min_refresh: settings.jwks_min_refresh,
            max_refresh: settings.jwks_max_refresh,
            refetch_interval: settings.jwks_refetch_interval,
            current: RwLock::new(Arc::new(KeySet::default())),
            attempts: AtomicU64::new(0),
            last_attempt: tokio::sync::Mutex::new(None),
        }
    }

    /// Fetches the set now and again whenever it is due, forever (spawned by the layer and
    /// aborted with it).
    pub async fn run(self: Arc<Self>) {
        // After a failed fetch: FIRST_RETRY, doubling (with jitter) up to `min_refresh`.
        let retries = ExponentialBuilder::new()
            .with_jitter()
            .with_factor(2.0)
            .with_min_delay(FIRST_RETRY.min(self.min_refresh))
            .with_max_delay(self.min_refresh)
            .without_max_times();
        let mut retry = retries.build();
        loop {
            let fresh_for = {
                let mut last = self.last_attempt.lock().await;
                self.fetch_locked(&mut last).await
            };
            let wait = match fresh_for {
                Some(fresh_for) => {
                    retry = retries.build();
                    fresh_for
                }
                None => retry
                    .next()
                    .unwrap_or(self.min_refresh)
                    .min(self.min_refresh),
            };
            tokio::time::sleep(wait).await;
        }
    }

    fn snapshot(&self) -> Arc<KeySet> {
        self.current.read().clone()
    }

    /// The keys to verify a token naming `kid` with: the held set, fetched again first when
    /// `kid` is not in it (or the set is empty) and the refetch interval allows. Errors (an
    /// `invalid_token` description) while no set was ever loaded.
    pub async fn key_set_for(&self, kid: Option<&str>) -> Result<Arc<KeySet>, String> {
        let seen = self.attempts.load(Ordering::Acquire);
        let set = self.snapshot();
        let known = match kid {
            Some(kid) => set.has_kid(kid),
            None => !set.keys.is_empty(),
        };
        if known {
            return Ok(set);
        }
        self.refetch(seen).await;
        let set = self.snapshot();
        if !set.loaded {
            return Err("the signing keys of auth.jwks_url are not loaded yet".into());
        }
        Ok(set)
    }

    /// One on-demand fetch, unless one finished since `seen` was read (a concurrent request's:
    /// its keys are the answer) or the last one started less than the refetch interval ago.
    async fn refetch(&self, seen: u64) {
        let mut last = self.last_attempt.lock().await;
        if self.attempts.load(Ordering::Acquire) != seen {
            return;
        }
        if last.is_some_and(|t| t.elapsed() < self.refetch_interval) {
            tracing::debug!("token with an unknown kid; JWKS refetch interval not over");
            return;
        }
        self.fetch_locked(&mut last).await;
    }

    /// Fetches (the caller holds `last_attempt`); on success replaces the set and returns how
    /// long it is fresh; on failure keeps the held keys and logs a warning.
    async fn fetch_locked(&self, last: &mut Option<Instant>) -> Option<Duration> {
        *last = Some(Instant::now());
        let result = self.fetch().await;
        let fresh_for = match result {
            Ok((keys, max_age)) => {
                let kids: Vec<&str> = keys.iter().filter_map(|k| k.kid.as_deref()).collect();
                tracing::info!(url = %self.url(), keys = keys.len(), ?kids, "JWKS fetched");
                let set = Arc::new(KeySet { keys, loaded: true });
                *self.current.write() = set;
                let fresh = max_age.unwrap_or(self.min_refresh);
                Some(fresh.clamp(self.min_refresh, self.max_refresh))
            }
            Err(why) => {
                let held = self.snapshot().keys.len();
                let url = self.url();
                tracing::warn!(%url, error = %why, held, "JWKS fetch failed; keeping the keys held");
                if self.discover.is_some() {
                    // Look the URL up again next time: the provider may have moved it.
                    self.set_url(String::new());
                }
                None
            }
        };
        self.attempts.fetch_add(1, Ordering::Release);
        fresh_for
    }

    fn url(&self) -> String {
        self.url.lock().clone()
    }

    fn set_url(&self, url: String) {
        *self.url.lock() = url;
    }

    /// The key-set URL: configured, known from discovery, or discovered now.
    async fn key_set_url(&self) -> Result<String, String> {
        let url = self.url();
        let Some(issuer) = self.discover.as_deref().filter(|_| url.is_empty()) else {
            return Ok(url);
        };
        let (_, body) = self
            .get(&discovery::document_url(issuer), "application/json")
            .await?;
        let url = discovery::jwks_uri(&body, issuer).map_err(|e| format!("discovery: {e}"))?;
        tracing::info!(%url, "jwks_uri discovered");
        self.set_url(url.clone());
        Ok(url)
    }

    async fn fetch(&self) -> Result<(Vec<Key>, Option<Duration>), String> {
        let url = self.key_set_url().await?;
        let accept = "application/jwk-set+json, application/json";
        let (headers, body) = self.get(&url, accept).await?;
        Ok((parse(&body)?, max_age(&headers)))
    }

    /// GET `url`: the headers and body of a 2xx answer of at most [`MAX_BYTES`], within
    /// [`FETCH_TIMEOUT`] (also enforced here, whatever client was built).
    async fn get(&self, url: &str, accept: &str) -> Result<(http::HeaderMap, Vec<u8>), String> {
        tokio::time::timeout(FETCH_TIMEOUT, self.get_unbounded(url, accept))
            .await
            .map_err(|_| format!("no answer within {FETCH_TIMEOUT:?}"))?
    }

    async fn get_unbounded(
        &self,
        url: &str,
        accept: &str,
    ) -> Result<(http::HeaderMap, Vec<u8>), String> {
        let mut resp = self
            .client
            .get(url)
            .header(http::header::ACCEPT, accept)
            .send()
            .await
            .map_err(|e| format!("request failed: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("answered {}", resp.status()));
        }
        let too_large = || format!("the answer is larger than {MAX_BYTES} bytes");
        if resp.content_length().is_some_and(|n| n > MAX_BYTES as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| format!("reading: {e}"))? {
            if body.len() + chunk.len() > MAX_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok((resp.headers().clone(), body))
    }
}

/// The usable keys of a JWK Set document; errors when it is not one, holds more than
/// [`MAX_KEYS`] keys, or none is usable.
pub fn parse(body: &[u8]) -> Result<Vec<Key>, String> {
    #[derive(Deserialize)]
    struct RawSet {
        keys: Vec<serde_json::Value>,
    }
    let raw: RawSet = serde_json::from_slice(body).map_err(|e| format!("not a JWK Set: {e}"))?;
    if raw.keys.len() > MAX_KEYS {
        return Err(format!(
            "the key set has {} keys, more than {MAX_KEYS}",
            raw.keys.len()
        ));
    }
    let total = raw.keys.len();
    let keys: Vec<Key> = raw
        .keys
        .into_iter()
        .filter_map(|v| usable(&serde_json::from_value::<Jwk>(v).ok()?))
        .collect();
    if keys.is_empty() {
        return Err(format!(
            "none of its {total} keys is an RS256 or ES256 signing key"
        ));
    }
    Ok(keys)
}

/// The key as RS256 or ES256, if it is one that may sign tokens.
fn usable(jwk: &Jwk) -> Option<Key> {
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    let (alg, named) = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => (Algorithm::RS256, KeyAlgorithm::RS256),
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => {
            (Algorithm::ES256, KeyAlgorithm::ES256)
        }
        _ => return None,
    };
    if jwk.common.key_algorithm.is_some_and(|a| a != named) {
        return None;
    }
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        key: DecodingKey::from_jwk(jwk).ok()?,
    })
}

/// `max-age` of `Cache-Control` (none with `no-cache` or `no-store`).
fn max_age(headers: &http::HeaderMap) -> Option<Duration> {
    let mut age = None;
    for value in headers.get_all(http::header::CACHE_CONTROL) {
        for directive in value.to_str().ok()?.split(',') {
            let directive = directive.trim().to_ascii_lowercase();
            if directive == "no-cache" || directive == "no-store" {
                return None;
            }
            if let Some(n) = directive.strip_prefix("max-age=") {
                age = n.trim_matches('"').parse().ok().map(Duration::from_secs);
            }
        }
    }
    age
}

#[cfg(test)]
mod tests;
