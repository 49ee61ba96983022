//! `rediss://`: the store talks TLS to a `redis-server` whose certificate a private CA signed,
//! trusting that CA through `tls_ca_file`, and refuses the server without it.

use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use switchboard_store::redis::RedisTopology;
use switchboard_store::*;
use switchboard_tests::eventually::eventually;
use switchboard_tests::ports::free_port;
use switchboard_tests::redis_process::{redis_server_binary, RedisProcess};
use switchboard_tests::temp::TempDir;

use crate::harness::*;

/// A CA, and a certificate for 127.0.0.1 it signed: `ca.pem`, `server.pem`, `server.key` in `dir`.
fn certificates(dir: &std::path::Path) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&server_key, &issuer)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("server.pem"), server.pem()).unwrap();
    std::fs::write(dir.join("server.key"), server_key.serialize_pem()).unwrap();
}

/// `redis-server` listening with TLS only on a free port.
fn tls_server(dir: &std::path::Path) -> (RedisProcess, u16) {
    let port = free_port();
    let path = |f: &str| dir.join(f).to_str().unwrap().to_owned();
    let args = [
        "--port",
        "0",
        "--tls-port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--tls-cert-file",
        &path("server.pem"),
        "--tls-key-file",
        &path("server.key"),
        "--tls-ca-cert-file",
        &path("ca.pem"),
        "--tls-auth-clients",
        "no",
        "--save",
        "",
        "--appendonly",
        "no",
    ];
    let bin = redis_server_binary().expect("redis-server");
    let args = args.iter().map(|a| a.to_string()).collect();
    (
        RedisProcess::spawn(&bin, args, port, &dir.join("redis")),
        port,
    )
}

#[tokio::test]
async fn rediss_with_a_private_ca() {
    let dir = TempDir::new("sb-tls");
    certificates(dir.path());
    let (_server, port) = tls_server(dir.path());
    let trusting = RedisTopology {
        tls_ca_file: dir.path().join("ca.pem").to_str().unwrap().to_owned(),
        ..RedisTopology::standalone(&format!("rediss://127.0.0.1:{port}/"))
    };
    let config = StoreConfig::default_for("a");
    let a: Arc<dyn Store> = eventually("the TLS server to accept", Duration::from_secs(10), || {
        let (t, c) = (trusting.clone(), config.clone());
        async move { RedisStore::open(&t, c).await.ok() }
    })
    .await;
    let mut inbox = a.subscribe().await.unwrap();
    let id = new_session(&a).await;
    begin_ok(&a, &id, None).await;
    a.claim(&id, "get", "a/1").await.unwrap();
    let b = RedisStore::open(&trusting, StoreConfig::default_for("b"))
        .await
        .unwrap();
    b.append(&id, "get", "over tls", false).await.unwrap();
    match recv(&mut inbox).await {
        BusMessage::Event(e) => assert_eq!(e.data, "over tls"),
        other => panic!("{other:?}"),
    }
    let untrusting = RedisTopology {
        tls_ca_file: String::new(),
        ..trusting.clone()
    };
    let refused = RedisStore::open(&untrusting, StoreConfig::default_for("c")).await;
    let error = refused
        .err()
        .expect("the system's roots do not trust a private CA");
    assert!(error.to_string().contains("certificate"), "{error}");
    // A file that is not PEM (here the server's private key in DER would do the same): refused
    // when the store opens, naming the key (review of issue 14: it was taken as the CA).
    let not_pem = dir.path().join("ca.der");
    std::fs::write(&not_pem, [0x30u8, 0x82, 0x01, 0x0a]).unwrap();
    let wrong = RedisTopology {
        tls_ca_file: not_pem.to_str().unwrap().to_owned(),
        ..trusting.clone()
    };
    let error = RedisStore::open(&wrong, StoreConfig::default_for("e"))
        .await
        .err()
        .expect("a CA file without a PEM certificate is an error");
    assert!(
        error.to_string().contains("holds no PEM certificate"),
        "{error}"
    );
    let missing = RedisTopology {
        tls_ca_file: "/nonexistent/ca.pem".into(),
        ..trusting
    };
    let error = RedisStore::open(&missing, StoreConfig::default_for("d"))
        .await
        .err()
        .expect("an unreadable CA file is an error");
    assert!(error.to_string().contains("redis.tls_ca_file"), "{error}");
}

/// A `rediss://` URL at a server without TLS: the server reads the handshake as a partial
/// command and never answers, and the store said only "timed out" (review of issue 14). The
/// error now says what to check.
#[tokio::test]
async fn rediss_at_a_plain_server_says_to_check_tls() {
    let dir = TempDir::new("sb-tls-plain");
    certificates(dir.path());
    let plain = switchboard_tests::redis_server::RedisServer::start();
    let port = plain.port();
    let topology = RedisTopology {
        tls_ca_file: dir.path().join("ca.pem").to_str().unwrap().to_owned(),
        ..RedisTopology::standalone(&format!("rediss://127.0.0.1:{port}/"))
    };
    let error = RedisStore::open(&topology, StoreConfig::default_for("a"))
        .await
        .err()
        .expect("TLS to a plain server fails");
    assert!(
        error.to_string().contains("does the server speak TLS"),
        "{error}"
    );
}
