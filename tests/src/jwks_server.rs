//! A JWKS provider run inside the test process (the issuer's `jwks_uri`), and signing keys
//! made at test time: it serves `{"keys": [...]}` at `/jwks` with `Cache-Control: max-age`,
//! (and an OpenID configuration naming it at `/.well-known/openid-configuration`), counts every
//! key-set request, can change its keys (rotation), answer 503, or stop listening
//! (unreachable). Bound to a free port on 127.0.0.1; stopped when dropped.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

/// A signing key made for one test: its public JWK and the means to sign tokens with it.
pub struct TestKey {
    kid: String,
    alg: Algorithm,
    encoding: EncodingKey,
    jwk: Value,
}

impl TestKey {
    /// A fresh EC P-256 (ES256) key named `kid`.
    pub fn es256(kid: &str) -> TestKey {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).expect("EC key");
        let point = pair.public_key().as_ref().to_vec();
        let pkcs8 = pair.to_pkcs8v1().expect("PKCS#8");
        TestKey {
            kid: kid.to_owned(),
            alg: Algorithm::ES256,
            encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwk: json!({
                "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
            }),
        }
    }

    /// A fresh RSA 2048 (RS256) key named `kid`.
    pub fn rs256(kid: &str) -> TestKey {
        let pair = aws_lc_rs::rsa::KeyPair::generate(KeySize::Rsa2048).expect("RSA key");
        let public = pair.public_key();
        let der = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&pair).expect("PKCS#8");
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(der.as_ref())
        );
        TestKey {
            kid: kid.to_owned(),
            alg: Algorithm::RS256,
            encoding: EncodingKey::from_rsa_pem(pem.as_bytes()).expect("RSA PEM"),
            jwk: json!({
                "kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
                "n": URL_SAFE_NO_PAD.encode(public.modulus().big_endian_without_leading_zero()),
                "e": URL_SAFE_NO_PAD.encode(public.exponent().big_endian_without_leading_zero()),
            }),
        }
    }

    /// Its public JWK (with `kid`, `use: sig` and `alg`).
    pub fn jwk(&self) -> Value {
        self.jwk.clone()
    }

    /// A token with `claims`, its header naming this key's `kid` (or no `kid` when `with_kid`
    /// is false).
    pub fn sign(&self, claims: &Value, with_kid: bool) -> String {
        let mut header = Header::new(self.alg);
        if with_kid {
            header.kid = Some(self.kid.clone());
        }
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("sign")
    }
}

#[derive(Default)]
struct Shared {
    keys: Mutex<Vec<Value>>,
    hits: AtomicUsize,
    discovery_hits: AtomicUsize,
    issuer: Mutex<String>,
    failing: AtomicBool,
    max_age: AtomicUsize,
}

/// The running provider.
pub struct JwksServer {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

impl JwksServer {
    /// Starts a provider publishing `keys`, answering with `Cache-Control: max-age=<max_age>`.
    pub async fn start(keys: Vec<Value>, max_age_secs: usize) -> JwksServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared::default());
        *shared.keys.lock() = keys;
        shared.max_age.store(max_age_secs, Ordering::SeqCst);
        *shared.issuer.lock() = format!("http://{addr}");
        let app = axum::Router::new()
            .route("/jwks", axum::routing::get(answer))
            .route(
                "/.well-known/openid-configuration",
                axum::routing::get(configuration),
            )
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        JwksServer {
            addr,
            shared,
            task: Some(task),
        }
    }

    /// The key set's URL (`auth.jwks_url`).
    pub fn url(&self) -> String {
        format!("http://{}/jwks", self.addr)
    }

    /// Its issuer URL (`http://127.0.0.1:<port>`), whose discovery document names [`JwksServer::url`].
    pub fn issuer(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Key-set requests received so far.
    pub fn hits(&self) -> usize {
        self.shared.hits.load(Ordering::SeqCst)
    }

    /// Discovery-document requests received so far.
    pub fn discovery_hits(&self) -> usize {
        self.shared.discovery_hits.load(Ordering::SeqCst)
    }

    /// Publishes `keys` from the next request on.
    pub fn publish(&self, keys: Vec<Value>) {
        *self.shared.keys.lock() = keys;
    }

    /// From the next request on, answers 503 (`true`) or the key set (`false`).
    pub fn set_failing(&self, failing: bool) {
        self.shared.failing.store(failing, Ordering::SeqCst);
    }

    /// Stops listening: connections to its port are refused from now on (the node keeps no
    /// connection to it open between fetches).
    pub fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn answer(State(shared): State<Arc<Shared>>) -> Response {
    shared.hits.fetch_add(1, Ordering::SeqCst);
    if shared.failing.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let keys = shared.keys.lock().clone();
    let mut resp = axum::Json(json!({ "keys": keys })).into_response();
    let max_age = format!("public, max-age={}", shared.max_age.load(Ordering::SeqCst));
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_str(&max_age).expect("header value"),
    );
    resp
}

async fn configuration(State(shared): State<Arc<Shared>>) -> Response {
    shared.discovery_hits.fetch_add(1, Ordering::SeqCst);
    let issuer = shared.issuer.lock().clone();
    let jwks_uri = format!("{issuer}/jwks");
    axum::Json(json!({ "issuer": issuer, "jwks_uri": jwks_uri })).into_response()
}
