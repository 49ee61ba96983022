//! Access-token validation for the resource server: signed JWTs checked with `jsonwebtoken`
//! (no crypto written here), against configured keys here and the issuer's JWKS keys
//! ([`super::jwks`], passed to [`Verifier::check`]); no introspection.
//!
//! Accepted: `HS256` with any of the shared secrets (several, so keys can rotate), `RS256` and
//! `ES256` with any of the configured public keys. Anything else, `alg: none` included, is an
//! invalid token. Checked claims: the signature, `exp` (required) and `nbf` with
//! [`LEEWAY_SECS`] of clock skew, `aud` (required, must name this resource: MCP 2025-06-18+,
//! basic/authorization, Token Handling; RFC 8707), `iss` when an issuer is configured, and `sub`
//! (required: with `iss` it names the principal a session is bound to).
//! Sources: MCP 2025-11-25, basic/authorization, Token Handling (validate per OAuth 2.1 §5.2;
//! invalid or expired → 401); RFC 6750 §3.1 (`invalid_token`); RFC 7519 §4.1 (claims).

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use super::AuthSettings;

/// Clock skew allowed on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECS: u64 = 30;

/// What a valid token says about its bearer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// `iss`, empty when the token has none (only possible without a configured issuer).
    pub issuer: String,
    /// `sub`.
    pub subject: String,
    /// Granted scopes, from `scope` (space-separated, RFC 8693 §4.2 / RFC 9068) or `scp`.
    pub scopes: Vec<String>,
}

impl Verified {
    /// The principal a session is bound to: `iss` and `sub` as a JSON array, so no pair of
    /// different claims can produce the same text and it never equals `"anonymous"`.
    pub fn principal(&self) -> String {
        serde_json::json!([self.issuer, self.subject]).to_string()
    }
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    iss: Option<String>,
    // Optional here so a token without it fails validation with "no sub claim" (required
    // below) rather than as a malformed document.
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<ScopeClaim>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScopeClaim {
    Text(String),
    List(Vec<String>),
}

/// The parts of a token's header that choose its keys.
pub struct TokenHeader {
    /// HS256, RS256 or ES256.
    pub alg: Algorithm,
    /// `kid`, if any.
    pub kid: Option<String>,
}

/// The token's header, if it is a JWT of an accepted algorithm (else the `invalid_token`
/// description).
pub fn read_header(token: &str) -> Result<TokenHeader, String> {
    let header = decode_header(token)
        .map_err(|_| "the token is not a JWT signed with HS256, RS256 or ES256".to_owned())?;
    match header.alg {
        Algorithm::HS256 | Algorithm::RS256 | Algorithm::ES256 => Ok(TokenHeader {
            alg: header.alg,
            kid: header.kid,
        }),
        other => Err(format!("tokens signed with {other:?} are not accepted")),
    }
}

/// How a token fared against a list of keys.
pub enum TokenCheck {
    /// A key verified it and its claims are valid.
    Verified(Verified),
    /// A key verified its signature but its claims are not valid (the description).
    Refused(String),
    /// No key verified its signature (or there was none).
    NoKeyVerified,
}

/// The configured keys and claim rules, built once at start-up.
pub struct Verifier {
    hs256: Vec<DecodingKey>,
    rs256: Vec<DecodingKey>,
    es256: Vec<DecodingKey>,
    issuer: String,
    audience: String,
}

impl Verifier {
    /// Builds the keys, skipping any that do not parse (a token for a skipped key is then
    /// refused: fail closed) and naming each in the returned problems, which start-up refuses
    /// (see [`super::AuthSettings::problems`]).
    pub fn new(settings: &AuthSettings) -> (Verifier, Vec<(&'static str, String)>) {
        let mut problems = Vec::new();
        let mut hs256 = Vec::new();
        for (i, secret) in settings.hs256_secrets.iter().enumerate() {
            match DecodingKey::from_secret(secret.as_bytes()) {
                Ok(k) => hs256.push(k),
                Err(e) => problems.push((
                    "auth.jwt_hs256_secrets",
                    format!("auth.jwt_hs256_secrets entry {} is unusable: {e}", i + 1),
                )),
            }
        }
        let (mut rs256, mut es256) = (Vec::new(), Vec::new());
        for (i, pem) in settings.public_keys_pem.iter().enumerate() {
            if let Ok(k) = DecodingKey::from_rsa_pem(pem.as_bytes()) {
                rs256.push(k);
            } else if let Ok(k) = DecodingKey::from_ec_pem(pem.as_bytes()) {
                es256.push(k);
            } else {
                problems.push((
                    "auth.jwt_public_keys_pem",
                    format!(
                        "auth.jwt_public_keys_pem entry {} is neither an RSA nor an EC (P-256) public key in PEM",
                        i + 1
                    ),
                ));
            }
        }
        let verifier = Verifier {
            hs256,
            rs256,
            es256,
            issuer: settings.issuer.clone(),
            audience: settings.effective_audience().to_owned(),
        };
        (verifier, problems)
    }

    /// The configured keys for `alg` (HS256 secrets, or the RS256 or ES256 PEMs).
    pub fn configured(&self, alg: Algorithm) -> &[DecodingKey] {
        match alg {
            Algorithm::HS256 => &self.hs256,
            Algorithm::RS256 => &self.rs256,
            Algorithm::ES256 => &self.es256,
            _ => &[],
        }
    }

    /// Checks `token` with the configured keys only; the error is the `error_description` of
    /// an `invalid_token` challenge.
    pub fn verify(&self, token: &str) -> Result<Verified, String> {
        let header = read_header(token)?;
        let keys = self.configured(header.alg);
        if keys.is_empty() {
            return Err(format!("no key for {:?} tokens is configured", header.alg));
        }
        match self.check(token, header.alg, keys) {
            TokenCheck::Verified(v) => Ok(v),
            TokenCheck::Refused(why) => Err(why),
            TokenCheck::NoKeyVerified => Err(describe(&ErrorKind::InvalidSignature)),
        }
    }

    /// Checks `token` (whose header says `alg`) against each of `keys` until one verifies its
    /// signature; then its claims decide.
    pub fn check<'k>(
        &self,
        token: &str,
        alg: Algorithm,
        keys: impl IntoIterator<Item = &'k DecodingKey>,
    ) -> TokenCheck {
        let validation = self.validation(alg);
        for key in keys {
            match decode::<Claims>(token, key, &validation) {
                // An empty subject names nobody: sessions bound to it would be shared.
                Ok(data) if data.claims.sub.as_deref().is_none_or(str::is_empty) => {
                    return TokenCheck::Refused("the token's sub claim is empty".into())
                }
                Ok(data) => return TokenCheck::Verified(verified(data.claims)),
                // Another key may have signed it (rotation): try the next one.
                Err(e) if *e.kind() == ErrorKind::InvalidSignature => {}
                Err(e) => return TokenCheck::Refused(describe(e.kind())),
            }
        }
        TokenCheck::NoKeyVerified
    }

    fn validation(&self, alg: Algorithm) -> Validation {
        let mut v = Validation::new(alg);
        v.leeway = LEEWAY_SECS;
        v.validate_exp = true;
        v.validate_nbf = true;
        v.set_audience(&[&self.audience]);
        let mut required = vec!["exp", "sub", "aud"];
        if !self.issuer.is_empty() {
            v.set_issuer(&[&self.issuer]);
            required.push("iss");
        }
        v.set_required_spec_claims(&required);
        v
    }
}

fn verified(claims: Claims) -> Verified {
    let mut scopes: Vec<String> = Vec::new();
    if let Some(s) = &claims.scope {
        scopes.extend(s.split_whitespace().map(str::to_owned));
    }
    match claims.scp {
        Some(ScopeClaim::Text(s)) => scopes.extend(s.split_whitespace().map(str::to_owned)),
        Some(ScopeClaim::List(l)) => scopes.extend(l),
        None => {}
    }
    Verified {
        issuer: claims.iss.unwrap_or_default(),
        subject: claims.sub.unwrap_or_default(),
        scopes,
    }
}

fn describe(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidAudience => "the token was not issued for this resource (aud)".into(),
        ErrorKind::InvalidIssuer => "the token's issuer (iss) is not accepted".into(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(c) => format!("the token has no {c} claim"),
        ErrorKind::InvalidClaimFormat(c) => format!("the token's {c} claim is malformed"),
        _ => "the token is malformed".into(),
    }
}

#[cfg(test)]
mod tests;
