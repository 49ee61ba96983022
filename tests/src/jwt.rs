//! HS256 tokens for the authorization tests.

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::Value;

/// `claims` signed with HS256 under `secret`.
pub fn hs256(secret: &str, claims: &Value) -> String {
    let key = EncodingKey::from_secret(secret.as_bytes()).expect("an HS256 key");
    encode(&Header::new(Algorithm::HS256), claims, &key).expect("an HS256 token")
}
