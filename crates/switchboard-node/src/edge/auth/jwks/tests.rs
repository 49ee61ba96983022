use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use http::{HeaderMap, HeaderValue};
use serde_json::{json, Value};

use super::*;

/// A fresh P-256 public key as a JWK with `kid` (and `extra` fields merged in).
fn ec_jwk(kid: &str, extra: Value) -> Value {
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
    let point = pair.public_key().as_ref();
    let mut jwk = json!({
        "kty": "EC", "crv": "P-256", "kid": kid,
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
        "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
    });
    for (k, v) in extra.as_object().unwrap() {
        jwk[k] = v.clone();
    }
    jwk
}

fn parsed(keys: Vec<Value>) -> Result<Vec<Key>, String> {
    parse(json!({ "keys": keys }).to_string().as_bytes())
}

#[test]
fn usable_keys_are_kept_and_the_rest_skipped() {
    let keys = parsed(vec![
        ec_jwk("a", json!({})),
        ec_jwk("b", json!({"use": "sig", "alg": "ES256"})),
        ec_jwk("enc", json!({"use": "enc"})),
        ec_jwk("other-alg", json!({"alg": "ES384"})),
        json!({"kty": "oct", "k": "c2VjcmV0", "kid": "oct"}),
        json!({"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": "ed"}),
        json!({"kty": "RSA", "alg": "RSA-OAEP-256", "n": "AQAB", "e": "AQAB", "kid": "weird"}),
        json!({"kty": "who-knows"}),
    ])
    .unwrap();
    let kids: Vec<_> = keys.iter().map(|k| k.kid.as_deref().unwrap()).collect();
    assert_eq!(kids, ["a", "b"]);
    assert!(keys.iter().all(|k| k.alg == Algorithm::ES256));
    let set = KeySet { keys, loaded: true };
    assert!(set.has_kid("a") && !set.has_kid("enc"));
    assert_eq!(set.matching(Algorithm::ES256, Some("b")).count(), 1);
    assert_eq!(set.matching(Algorithm::ES256, None).count(), 2);
    assert_eq!(set.matching(Algorithm::RS256, None).count(), 0);
}

#[test]
fn bad_documents_are_errors() {
    assert!(parse(b"not json").is_err());
    assert!(parse(b"{\"nokeys\": []}").is_err());
    let none = parsed(vec![ec_jwk("enc", json!({"use": "enc"}))])
        .err()
        .unwrap();
    assert!(none.contains("none of its 1 keys"), "{none}");
    let many = (0..=MAX_KEYS)
        .map(|i| json!({"kty": "x", "kid": i}))
        .collect();
    let many = parsed(many).err().unwrap();
    assert!(many.contains("more than 100"), "{many}");
}

#[test]
fn max_age_is_read_from_cache_control() {
    let of = |v: &str| {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::CACHE_CONTROL,
            HeaderValue::from_str(v).unwrap(),
        );
        max_age(&h)
    };
    assert_eq!(of("public, max-age=300"), Some(Duration::from_secs(300)));
    assert_eq!(
        of("MAX-AGE=7, must-revalidate"),
        Some(Duration::from_secs(7))
    );
    assert_eq!(of("max-age=300, no-cache"), None);
    assert_eq!(of("no-store"), None);
    assert_eq!(of("max-age=soon"), None);
    assert_eq!(max_age(&HeaderMap::new()), None);
}

#[tokio::test]
async fn an_unreachable_provider_refuses_with_a_clear_reason() {
    // A port nothing listens on: bind, read the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let jwks = Jwks::new(&AuthSettings {
        jwks_url: format!("http://127.0.0.1:{port}/jwks"),
        ..AuthSettings::default()
    });
    let why = jwks.key_set_for(Some("k1")).await.err().unwrap();
    assert!(why.contains("not loaded yet"), "{why}");
    assert_eq!(jwks.attempts.load(Ordering::Acquire), 1);
    // Within the refetch interval no second fetch runs.
    assert!(jwks.key_set_for(Some("k1")).await.is_err());
    assert_eq!(jwks.attempts.load(Ordering::Acquire), 1);
}

/// A provider on a free loopback port: `/jwks` (one key, `Cache-Control: <cache>`), `/big`
/// (a body over [`MAX_BYTES`] with a length), `/big-stream` (the same, streamed without one).
async fn provider(cache: &'static str) -> String {
    use axum::response::IntoResponse;
    let keys = json!({ "keys": [ec_jwk("k1", json!({}))] }).to_string();
    let big = || "x".repeat(MAX_BYTES + 1);
    let app = axum::Router::new()
        .route(
            "/jwks",
            axum::routing::get(move || async move {
                ([(http::header::CACHE_CONTROL, cache)], keys).into_response()
            }),
        )
        .route("/big", axum::routing::get(move || async move { big() }))
        .route(
            "/big-stream",
            axum::routing::get(move || async move {
                let chunks = (0..=MAX_BYTES / 1024)
                    .map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b'x'; 1024])));
                axum::body::Body::from_stream(futures::stream::iter(chunks))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn fetcher(url: String) -> Jwks {
    Jwks::new(&AuthSettings {
        jwks_url: url,
        jwks_min_refresh: Duration::from_secs(60),
        jwks_max_refresh: Duration::from_secs(600),
        ..AuthSettings::default()
    })
}

#[tokio::test]
async fn max_age_is_bounded_and_oversized_answers_refused() {
    for (cache, fresh) in [
        ("max-age=5", 60),
        ("max-age=300", 300),
        ("max-age=999999", 600),
        ("no-store", 60),
    ] {
        let jwks = fetcher(format!("{}/jwks", provider(cache).await));
        let mut last = None;
        let got = jwks.fetch_locked(&mut last).await;
        assert_eq!(got, Some(Duration::from_secs(fresh)), "{cache}");
        assert!(jwks.snapshot().has_kid("k1"));
    }
    let base = provider("max-age=300").await;
    let jwks = fetcher(format!("{base}/jwks"));
    for path in ["/big", "/big-stream"] {
        let why = jwks
            .get(&format!("{base}{path}"), "*/*")
            .await
            .err()
            .unwrap();
        assert!(why.contains("larger than 524288 bytes"), "{path}: {why}");
    }
}
