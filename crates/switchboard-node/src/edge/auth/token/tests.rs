use jsonwebtoken::{encode, get_current_timestamp, EncodingKey, Header};
use serde_json::{json, Value};

use super::*;

const SECRET: &str = "0123456789abcdef0123456789abcdef";
const OLD_SECRET: &str = "fedcba9876543210fedcba9876543210";
const RESOURCE: &str = "https://gw.example.test/servers/foo/mcp";
const ISSUER: &str = "https://as.example.test";

// A P-256 key pair made for these tests only.
const EC_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgVaSTRyj34kT8yMbH
qxCQkVaeK9RpoSt3kraJpU4G7AChRANCAAQl7oM2nyMtmT9zncnPUlzRgxj2BhFV
bL31FSCNdTHPpjNiGQ18fuZFIqEBgdtMtL55BteqBE/vbXGOL7rqqTHy
-----END PRIVATE KEY-----
";
const EC_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEJe6DNp8jLZk/c53Jz1Jc0YMY9gYR
VWy99RUgjXUxz6YzYhkNfH7mRSKhAYHbTLS+eQbXqgRP721xji+66qkx8g==
-----END PUBLIC KEY-----
";

fn settings() -> AuthSettings {
    AuthSettings {
        resource_url: RESOURCE.into(),
        authorization_servers: vec![ISSUER.into()],
        issuer: ISSUER.into(),
        hs256_secrets: vec![SECRET.into(), OLD_SECRET.into()],
        public_keys_pem: vec![EC_PUBLIC.into()],
        ..AuthSettings::default()
    }
}

fn verifier() -> Verifier {
    let (v, problems) = Verifier::new(&settings());
    assert!(problems.is_empty(), "{problems:?}");
    v
}

fn claims(extra: Value) -> Value {
    let mut c = json!({
        "iss": ISSUER, "sub": "alice", "aud": RESOURCE,
        "exp": get_current_timestamp() + 300, "scope": "mcp:tools mcp:read",
    });
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v.clone();
        }
    }
    c
}

fn hs(secret: &str, claims: &Value) -> String {
    let key = EncodingKey::from_secret(secret.as_bytes()).unwrap();
    encode(&Header::new(Algorithm::HS256), claims, &key).unwrap()
}

#[test]
fn valid_tokens_give_the_principal_and_scopes() {
    let v = verifier();
    let ok = v.verify(&hs(SECRET, &claims(json!({})))).unwrap();
    assert_eq!(ok.subject, "alice");
    assert_eq!(ok.scopes, ["mcp:tools", "mcp:read"]);
    assert_eq!(ok.principal(), r#"["https://as.example.test","alice"]"#);
    // A rotated-out key still verifies while configured.
    assert!(v.verify(&hs(OLD_SECRET, &claims(json!({})))).is_ok());
    // `scp` as a list (some authorization servers).
    let scp = v
        .verify(&hs(
            SECRET,
            &claims(json!({"scope": null, "scp": ["a", "b"]})),
        ))
        .unwrap();
    assert_eq!(scp.scopes, ["a", "b"]);
    // ES256 with the configured public key.
    let key = EncodingKey::from_ec_pem(EC_PRIVATE.as_bytes()).unwrap();
    let es = encode(&Header::new(Algorithm::ES256), &claims(json!({})), &key).unwrap();
    assert_eq!(v.verify(&es).unwrap().subject, "alice");
}

#[test]
fn bad_tokens_say_why() {
    let v = verifier();
    let now = get_current_timestamp();
    let cases = [
        (
            hs("another-secret-another-secret-xx", &claims(json!({}))),
            "signature",
        ),
        (hs(SECRET, &claims(json!({"exp": now - 120}))), "expired"),
        (
            hs(SECRET, &claims(json!({"nbf": now + 600}))),
            "not valid yet",
        ),
        (
            hs(SECRET, &claims(json!({"aud": "https://other.example/mcp"}))),
            "aud",
        ),
        (
            hs(SECRET, &claims(json!({"iss": "https://evil.example"}))),
            "iss",
        ),
        (hs(SECRET, &claims(json!({"exp": null}))), "exp"),
        (hs(SECRET, &claims(json!({"sub": null}))), "sub"),
        (hs(SECRET, &claims(json!({"aud": null}))), "aud"),
        ("not-a-jwt".to_owned(), "not a JWT"),
    ];
    for (token, want) in cases {
        let why = v.verify(&token).unwrap_err();
        assert!(why.contains(want), "{want}: got {why:?}");
    }
    // Within the leeway an expired token still passes.
    assert!(v
        .verify(&hs(SECRET, &claims(json!({"exp": now - 5}))))
        .is_ok());
}

#[test]
fn alg_none_and_unconfigured_algorithms_are_refused() {
    let v = verifier();
    let signed = hs(SECRET, &claims(json!({})));
    let payload = signed.split('.').nth(1).unwrap();
    // {"alg":"none","typ":"JWT"}
    let none = format!("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{payload}.");
    assert!(v.verify(&none).is_err());
    let hs384 = encode(
        &Header::new(Algorithm::HS384),
        &claims(json!({})),
        &EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap();
    assert!(v.verify(&hs384).unwrap_err().contains("HS384"));
    // No RSA key configured: an RS256 header finds no key.
    let (only_hs, _) = Verifier::new(&AuthSettings {
        public_keys_pem: Vec::new(),
        ..settings()
    });
    let rs_header = format!(
        "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.{payload}.{}",
        signed.split('.').nth(2).unwrap()
    );
    assert!(only_hs.verify(&rs_header).unwrap_err().contains("no key"));
}

#[test]
fn unparsable_public_keys_are_named() {
    let (_, problems) = Verifier::new(&AuthSettings {
        public_keys_pem: vec!["-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----".into()],
        ..settings()
    });
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].0, "auth.jwt_public_keys_pem");
}
