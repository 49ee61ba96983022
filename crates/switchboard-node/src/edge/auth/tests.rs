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

#[tokio::test]
async fn authenticate_maps_each_case_to_its_refusal() {
    let auth = Auth::new(settings());
    let principal = auth
        .authenticate(&with_auth(&format!(
            "Bearer {}",
            token("alice", "mcp:tools")
        )))
        .await
        .unwrap();
    assert_eq!(principal.id, r#"["https://as.example.test","alice"]"#);
    assert_eq!(principal.name, "alice");
    assert_eq!(principal.scopes, ["mcp:tools"]);
    // The scheme is case-insensitive (RFC 9110 §11.1).
    let lower = format!("bearer {}", token("alice", "mcp:tools"));
    assert!(auth.authenticate(&with_auth(&lower)).await.is_ok());

    let missing = auth.authenticate(&HeaderMap::new()).await.unwrap_err();
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    assert!(matches!(missing, HttpError::MissingToken { .. }));
    let basic = auth
        .authenticate(&with_auth("Basic YTpi"))
        .await
        .unwrap_err();
    assert!(matches!(basic, HttpError::MissingToken { .. }));
    for bad in ["Bearer ", "Bearer nope"] {
        let e = auth.authenticate(&with_auth(bad)).await.unwrap_err();
        assert!(matches!(e, HttpError::InvalidToken { .. }), "{bad}: {e:?}");
    }
    let scoped = format!("Bearer {}", token("alice", "mcp:admin"));
    let e = auth.authenticate(&with_auth(&scoped)).await.unwrap_err();
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

const API_KEY: &str = "sb-test-api-key-0123456789";

fn sha256_hex(key: &str) -> String {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn with_api_keys(header: &str) -> AuthSettings {
    AuthSettings {
        hs256_secrets: Vec::new(),
        api_keys: vec![
            api_key::ApiKeyEntry {
                sha256: sha256_hex(API_KEY),
                principal: "ci".into(),
                scopes: vec!["mcp:tools".into()],
            },
            api_key::ApiKeyEntry {
                sha256: sha256_hex("unscoped-key"),
                principal: "bot".into(),
                scopes: Vec::new(),
            },
        ],
        api_key_header: header.into(),
        ..settings()
    }
}

#[tokio::test]
async fn api_keys_authenticate_without_any_jwt_key() {
    let settings = with_api_keys("X-API-Key");
    assert_eq!(settings.problems(), Vec::new(), "API keys count as keys");
    let auth = Auth::new(settings);
    let bearer = auth
        .authenticate(&with_auth(&format!("Bearer {API_KEY}")))
        .await
        .unwrap();
    assert_eq!(bearer.id, r#"{"api_key":"ci"}"#);
    assert_eq!(bearer.name, "ci");
    assert_eq!(bearer.scopes, ["mcp:tools"]);
    let mut h = HeaderMap::new();
    h.insert("x-api-key", HeaderValue::from_static(API_KEY));
    assert_eq!(auth.authenticate(&h).await.unwrap(), bearer);

    let wrong = auth.authenticate(&with_auth("Bearer sb-wrong")).await;
    let Err(HttpError::InvalidToken { reason, .. }) = wrong else {
        panic!("{wrong:?}")
    };
    assert_eq!(
        reason,
        "the token is neither a valid JWT nor a known API key"
    );
    h.insert("x-api-key", HeaderValue::from_static("sb-wrong"));
    assert!(matches!(
        auth.authenticate(&h).await,
        Err(HttpError::InvalidToken { .. })
    ));
    let mut both = with_auth(&format!("Bearer {API_KEY}"));
    both.insert("x-api-key", HeaderValue::from_static(API_KEY));
    assert!(matches!(
        auth.authenticate(&both).await,
        Err(HttpError::InvalidToken { .. })
    ));
    let unscoped = auth.authenticate(&with_auth("Bearer unscoped-key")).await;
    assert!(
        matches!(unscoped, Err(HttpError::InsufficientScope { .. })),
        "{unscoped:?}"
    );
    // A JWT still needs a JWT key: none is configured here.
    let jwt = auth
        .authenticate(&with_auth(&format!(
            "Bearer {}",
            token("alice", "mcp:tools")
        )))
        .await;
    assert!(
        matches!(jwt, Err(HttpError::InvalidToken { .. })),
        "{jwt:?}"
    );
}

#[tokio::test]
async fn without_the_header_setting_the_header_is_ignored() {
    let auth = Auth::new(with_api_keys(""));
    let mut h = HeaderMap::new();
    h.insert("x-api-key", HeaderValue::from_static(API_KEY));
    assert!(matches!(
        auth.authenticate(&h).await,
        Err(HttpError::MissingToken { .. })
    ));
}

#[test]
fn redacted_hides_the_secrets_only() {
    let shown = with_api_keys("X-API-Key");
    let shown = AuthSettings {
        hs256_secrets: vec![SECRET.into()],
        ..shown
    }
    .redacted();
    assert_eq!(shown.hs256_secrets, [REDACTED]);
    assert_eq!(shown.api_keys[0].sha256, sha256_hex(API_KEY));
    assert_eq!(AuthSettings::default().redacted(), AuthSettings::default());
    let introspecting = AuthSettings {
        introspection_url: "https://as.example.test/introspect".into(),
        introspection_client_id: "gw".into(),
        introspection_client_secret: "s3cret".into(),
        ..settings()
    };
    let shown = introspecting.redacted();
    assert_eq!(shown.introspection_client_secret, REDACTED);
    assert_eq!(shown.introspection_client_id, "gw");
}

/// Introspection counts as a verification key; it needs a client id, an https (or loopback)
/// URL and a cache of at least one token; its keys are refused while authorization is off.
#[test]
fn introspection_settings_are_checked() {
    let only = AuthSettings {
        hs256_secrets: Vec::new(),
        introspection_url: "https://as.example.test/introspect".into(),
        introspection_client_id: "gw".into(),
        introspection_client_secret: "s3cret".into(),
        ..settings()
    };
    let no_secret = AuthSettings {
        introspection_client_secret: String::new(),
        ..only.clone()
    };
    let keys: Vec<&str> = no_secret.problems().into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["auth.introspection_client_secret"]);
    assert_eq!(only.problems(), Vec::new());
    let bad = AuthSettings {
        introspection_url: "http://as.example.test/introspect".into(),
        introspection_client_id: String::new(),
        introspection_cache_size: 0,
        ..only.clone()
    };
    let keys: Vec<&str> = bad.problems().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "auth.introspection_url",
            "auth.introspection_client_id",
            "auth.introspection_cache_size"
        ]
    );
    let off = AuthSettings {
        resource_url: String::new(),
        authorization_servers: Vec::new(),
        scopes_supported: Vec::new(),
        required_scopes: Vec::new(),
        hs256_secrets: Vec::new(),
        ..only
    };
    let keys: Vec<&str> = off.problems().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "auth.introspection_url",
            "auth.introspection_client_id",
            "auth.introspection_client_secret"
        ]
    );
}

#[test]
fn jwks_settings_are_checked() {
    let jwks_only = AuthSettings {
        hs256_secrets: Vec::new(),
        jwks_url: "https://as.example.test/jwks.json".into(),
        ..settings()
    };
    assert_eq!(jwks_only.problems(), Vec::new());
    let bad = AuthSettings {
        jwks_url: "http://as.example.test/jwks.json".into(),
        jwks_min_refresh: std::time::Duration::from_secs(7200),
        ..jwks_only.clone()
    };
    let keys: Vec<&str> = bad.problems().into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["auth.jwks_url", "auth.jwks_min_refresh"]);
    let off = AuthSettings {
        jwks_url: "https://as.example.test/jwks.json".into(),
        ..AuthSettings::default()
    };
    assert_eq!(off.problems()[0].0, "auth.jwks_url");
    let discovering = AuthSettings {
        hs256_secrets: Vec::new(),
        issuer: "https://as.example.test".into(),
        oidc_discovery: true,
        ..settings()
    };
    assert_eq!(
        discovering.problems(),
        Vec::new(),
        "discovery counts as a key"
    );
    let both = AuthSettings {
        jwks_url: "https://as.example.test/jwks.json".into(),
        ..discovering.clone()
    };
    assert_eq!(both.problems()[0].0, "auth.oidc_discovery");
    let no_issuer = AuthSettings {
        issuer: String::new(),
        ..discovering
    };
    assert_eq!(no_issuer.problems()[0].0, "auth.oidc_discovery");
}
