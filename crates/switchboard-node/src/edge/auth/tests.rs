use http::HeaderValue;
use jsonwebtoken::{encode, get_current_timestamp, Algorithm, EncodingKey, Header};
use serde_json::json;

use super::*;

const SECRET: &str = "0123456789abcdef0123456789abcdef";
const RESOURCE: &str = "https://gw.example.test/servers/foo/mcp";

fn settings() -> AuthSettings {
    AuthSettings {
        resource_url: RESOURCE.into(),
        authorization_servers: vec!["https://as.example.test".into()],
        scopes_supported: vec!["mcp:tools".into(), "mcp:admin".into()],
        required_scopes: vec!["mcp:tools".into()],
        hs256_secrets: vec![SECRET.into()],
        ..AuthSettings::default()
    }
}

fn token(sub: &str, scope: &str) -> String {
    let claims = json!({
        "iss": "https://as.example.test", "sub": sub, "aud": RESOURCE,
        "exp": get_current_timestamp() + 300, "scope": scope,
    });
    let key = EncodingKey::from_secret(SECRET.as_bytes()).unwrap();
    encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap()
}

fn with_auth(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
    h
}

#[test]
fn authenticate_maps_each_case_to_its_refusal() {
    let auth = Auth::new(settings());
    let principal = auth
        .authenticate(&with_auth(&format!(
            "Bearer {}",
            token("alice", "mcp:tools")
        )))
        .unwrap();
    assert_eq!(principal.id, r#"["https://as.example.test","alice"]"#);
    assert_eq!(principal.name, "alice");
    assert_eq!(principal.scopes, ["mcp:tools"]);
    // The scheme is case-insensitive (RFC 9110 §11.1).
    let lower = format!("bearer {}", token("alice", "mcp:tools"));
    assert!(auth.authenticate(&with_auth(&lower)).is_ok());

    let missing = auth.authenticate(&HeaderMap::new()).unwrap_err();
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    assert!(matches!(missing, HttpError::MissingToken { .. }));
    let basic = auth.authenticate(&with_auth("Basic YTpi")).unwrap_err();
    assert!(matches!(basic, HttpError::MissingToken { .. }));
    for bad in ["Bearer ", "Bearer nope"] {
        let e = auth.authenticate(&with_auth(bad)).unwrap_err();
        assert!(matches!(e, HttpError::InvalidToken { .. }), "{bad}: {e:?}");
    }
    let scoped = format!("Bearer {}", token("alice", "mcp:admin"));
    let e = auth.authenticate(&with_auth(&scoped)).unwrap_err();
    assert_eq!(e.status(), StatusCode::FORBIDDEN);
    let HttpError::InsufficientScope { challenge, lacking } = e else {
        panic!("{e:?}")
    };
    assert_eq!(lacking, "mcp:tools");
    assert!(challenge.starts_with(r#"Bearer error="insufficient_scope", scope="mcp:tools""#));
}

#[test]
fn metadata_is_served_exactly() {
    let auth = Auth::new(settings());
    assert_eq!(
        auth.metadata_paths(),
        [
            "/.well-known/oauth-protected-resource/servers/foo/mcp",
            "/.well-known/oauth-protected-resource"
        ]
    );
    let resp = auth.metadata_response();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
}

#[test]
fn settings_problems_name_their_keys() {
    assert_eq!(settings().problems(), Vec::new());
    let bad = AuthSettings {
        resource_url: "http://gw.example.test/mcp?x=1".into(),
        authorization_servers: vec!["as.example.test".into()],
        scopes_supported: vec!["a b".into()],
        required_scopes: vec!["mcp:write".into()],
        hs256_secrets: vec!["short".into()],
        ..AuthSettings::default()
    };
    let keys: Vec<&str> = bad.problems().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "auth.resource_url",
            "auth.authorization_servers",
            "auth.scopes_supported",
            "auth.required_scopes",
            "auth.jwt_hs256_secrets"
        ]
    );
    let keyless = AuthSettings {
        hs256_secrets: Vec::new(),
        ..settings()
    };
    assert_eq!(keyless.problems()[0].0, "auth.jwt_hs256_secrets");
    let loopback = AuthSettings {
        resource_url: "http://127.0.0.1:8080/mcp".into(),
        ..settings()
    };
    assert_eq!(loopback.problems(), Vec::new());
    assert_eq!(settings().effective_audience(), RESOURCE);
    assert!(
        !format!("{:?}", settings()).contains(SECRET),
        "secrets redacted"
    );
}
