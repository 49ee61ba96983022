use std::time::Duration;

use super::*;

fn resolved() -> Config {
    Config::default().resolved()
}

#[test]
fn defaults_are_valid_with_or_without_a_random_id() {
    assert_eq!(Config::default().validate(), Vec::<String>::new());
    let config = resolved();
    assert_eq!(config.cluster.node_id.len(), 8);
    assert!(config
        .cluster
        .node_id
        .chars()
        .all(|c| c.is_ascii_hexdigit()));
    assert_eq!(config.validate(), Vec::<String>::new());
    let mut pinned = Config::default();
    pinned.cluster.node_id = "n1".into();
    let resolved = pinned.clone().resolved();
    let (label, suffix) = resolved
        .cluster
        .node_id
        .split_once('.')
        .expect("label.suffix");
    assert_eq!(label, "n1", "a set id is kept as the label");
    assert!(suffix.len() == 4 && suffix.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(
        resolved.cluster.node_id,
        pinned.clone().resolved().cluster.node_id,
        "each process its own id"
    );
    assert_eq!(resolved.validate(), Vec::<String>::new());
}

#[test]
fn problems_name_the_keys_they_are_about() {
    let mut config = Config::default();
    config.cluster.heartbeat_interval = NonZeroDuration::secs(6);
    config.http.max_request_head = Size::bytes(100);
    config.http.allowed_hosts = vec!["a.example:1".into()];
    let keys: Vec<Vec<&str>> = config.problems().into_iter().map(|p| p.keys).collect();
    assert_eq!(
        keys,
        [
            vec!["cluster.heartbeat_interval", "cluster.node_ttl"],
            vec!["http.max_request_head"],
            vec!["http.allowed_hosts"],
        ]
    );
}

#[test]
fn every_rule_names_its_key() {
    let mut config = Config::default();
    config.cluster.heartbeat_interval = NonZeroDuration::secs(5);
    config.session.touch_interval = NonZeroDuration::secs(3600);
    config.session.max_event_bytes = Size::mib(32);
    config.session.max_session_log_bytes = Size::mib(8);
    config.http.endpoint_path = "mcp".into();
    config.cluster.node_id = "a/b".into();
    config.redis.key_prefix = "{sb}".into();
    config.redis.url = "http://x".into();
    config.http.allowed_origins = vec!["https://a.example/".into()];
    config.http.allowed_hosts = vec!["a.example:443".into()];
    config.log.level = "loud".into();
    let problems = config.validate().join("\n");
    for key in [
        "cluster.heartbeat_interval",
        "session.touch_interval",
        "session.max_event_bytes",
        "session.max_session_log_bytes",
        "http.endpoint_path",
        "cluster.node_id",
        "redis.key_prefix",
        "redis.url",
        "http.allowed_origins",
        "http.allowed_hosts",
        "log.level",
    ] {
        assert!(problems.contains(key), "{key} not named in:\n{problems}");
    }
}

/// Browsers leave the scheme's default port out of `Origin` (RFC 6454 §6.1): an entry with it
/// could never match, so it is refused at start-up (fresh-user finding, issue 35).
#[test]
fn an_origin_with_its_default_port_is_refused() {
    for (origin, refused) in [
        ("http://app.example:80", true),
        ("https://app.example:443", true),
        ("https://app.example:8443", false),
        ("http://app.example:443", false),
    ] {
        let problem = super::http::check_origin(origin);
        assert_eq!(problem.is_some(), refused, "{origin}: {problem:?}");
    }
}

#[test]
fn endpoint_path_cannot_shadow_or_pattern() {
    for bad in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/upstreamz",
        "/{x}",
        "/*rest",
        "/:id",
        "/a b",
    ] {
        let mut config = resolved();
        config.http.endpoint_path = bad.into();
        let problems = config.validate();
        assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
        assert!(problems[0].starts_with("http.endpoint_path"), "{bad}");
    }
    for good in ["/", "/mcp", "/v1/mcp/"] {
        let mut config = resolved();
        config.http.endpoint_path = good.into();
        assert_eq!(config.validate(), Vec::<String>::new(), "{good}");
    }
}

#[test]
fn legacy_paths_are_off_or_distinct_routes() {
    let with = |sse: &str, messages: &str, endpoint: &str| {
        let mut config = resolved();
        config.transports.legacy_sse = LegacySseConfig {
            sse_path: sse.into(),
            messages_path: messages.into(),
        };
        config.http.endpoint_path = endpoint.into();
        config
    };
    for (sse, messages) in [
        ("/sse", "/messages"),
        ("", ""),
        ("", "/m"),
        ("/a/sse", "/a"),
    ] {
        assert!(
            with(sse, messages, "/mcp").validate().is_empty(),
            "{sse} {messages}"
        );
    }
    for (sse, messages, endpoint, key) in [
        (
            "/mcp",
            "/messages",
            "/mcp",
            "transports.legacy_sse.sse_path",
        ),
        ("/sse", "/sse", "/mcp", "transports.legacy_sse.sse_path"),
        (
            "/sse",
            "/healthz",
            "/mcp",
            "transports.legacy_sse.messages_path",
        ),
        (
            "/sse",
            "messages",
            "/mcp",
            "transports.legacy_sse.messages_path",
        ),
    ] {
        let problems = with(sse, messages, endpoint).validate();
        assert!(problems[0].starts_with(key), "{problems:?}");
    }
}

#[test]
fn websocket_path_is_off_or_a_distinct_route() {
    let with = |ws: &str| {
        let mut config = resolved();
        config.transports.websocket.path = ws.into();
        config
    };
    for good in ["/ws", "", "/mcp/ws"] {
        assert!(with(good).validate().is_empty(), "{good}");
    }
    for bad in ["/mcp", "/sse", "/messages", "/metrics", "ws", "/w s"] {
        let problems = with(bad).validate();
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("transports.websocket.path")),
            "{bad}: {problems:?}"
        );
    }
}

#[test]
fn good_origins_and_hosts_pass() {
    let mut config = resolved();
    config.http.allowed_origins = vec!["*".into(), "https://app.example:8443".into()];
    config.http.allowed_hosts = vec!["mcp.example".into(), "[::1]".into(), "10.0.0.1".into()];
    config.log.level = "info,switchboard_node=debug".into();
    config.redis.url = "redis://:secret@redis:6379/0".into();
    assert_eq!(config.validate(), Vec::<String>::new());
}

#[test]
fn maps_onto_node_and_store_settings() {
    let mut config = Config::default();
    config.cluster.node_id = "n1".into();
    config.session.idle_ttl = NonZeroDuration::millis(1234);
    let node = config.node_config(false);
    assert_eq!(
        node,
        NodeConfig {
            loopback_only: false,
            ..NodeConfig::default()
        }
    );
    let store = config.store_config();
    assert_eq!(store.node_id, "n1");
    assert_eq!(store.idle_ttl, Duration::from_millis(1234));
    assert_eq!(store.node_ttl, Duration::from_secs(5));
    assert_eq!(store.key_prefix, "sb");
    let defaults = StoreConfig::default_for("n1");
    assert_eq!(
        StoreConfig {
            idle_ttl: defaults.idle_ttl,
            ..store
        },
        defaults,
        "the store's own defaults agree with the config's"
    );
}

#[test]
fn every_old_flat_key_names_its_new_place() {
    let keys = Config::keys();
    for (old, new) in MOVED {
        let known = keys.iter().any(|k| k == new) || Config::TABLES.contains(&new);
        assert!(known, "MOVED names `{new}`, which is not a key");
        if old != new {
            let message = moved_to(old).expect("moved");
            assert!(message.contains(new), "{message}");
        }
    }
    assert_eq!(MOVED.len(), 54, "the flat config had 54 keys");
    assert_eq!(moved_to("session.max_sessions"), None);
    assert_eq!(moved_to("tool_separator"), None);
}

#[test]
fn mrtr_keys_must_be_32_bytes_of_base64() {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use switchboard_node::mrtr::{MrtrSettings, KEY_LEN};

    let good = STANDARD.encode([5u8; KEY_LEN]);
    let mut config = Config::default();
    config.stateless.mrtr.keys = vec![
        good.clone().into(),
        "short".into(),
        STANDARD.encode([1u8; 16]).into(),
    ];
    let problems = config.stateless.mrtr.problems();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].starts_with("stateless.mrtr.state_keys[1]"));
    assert!(problems[1].contains("16 bytes"));
    let settings = config.node_config(true).mrtr;
    assert_eq!(settings.decoded_keys(), vec![[5u8; KEY_LEN]]);
    assert!(config
        .validate()
        .iter()
        .any(|p| p.contains("stateless.mrtr.state_keys[2]")));
    let fine = MrtrSettings {
        keys: vec![good.into()],
        ..MrtrSettings::default()
    };
    assert!(fine.problems().is_empty());
}

/// The sections' defaults are the owners' (the node's and the store's): the conversion in
/// `node_config`/`store_config` hands back exactly the owners' `Default`, so the two can never
/// drift. Only what start-up sets differs: `loopback_only` (from the bound listener; the default
/// listener is loopback, like the node's default) and the store's node id.
#[test]
fn defaults_are_the_owners_defaults() {
    let config = Config::default();
    assert!(config.http.listen.ip().is_loopback());
    assert_eq!(config.node_config(true), NodeConfig::default());
    assert_eq!(config.store_config(), StoreConfig::default_for(""));
    let resolved = config.resolved();
    let id = resolved.cluster.node_id.clone();
    assert_eq!(resolved.store_config(), StoreConfig::default_for(id));
    assert_eq!(resolved.node_config(true), NodeConfig::default());
}
