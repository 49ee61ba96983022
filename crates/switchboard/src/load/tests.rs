use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use std::time::Duration;

use super::*;
use crate::config::LogFormat;

/// A TOML file in the temp dir, removed on drop.
struct TempToml(PathBuf);

impl TempToml {
    fn new(text: &str) -> TempToml {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "sb-config-{}-{}.toml",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, text).expect("write temp config");
        TempToml(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempToml {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn flag(origin: &str, key: &str, raw: &str) -> Override {
    Override {
        origin: origin.into(),
        key: key.into(),
        raw: raw.into(),
    }
}

fn error_text(sources: &Sources) -> String {
    match load(sources) {
        Ok(config) => panic!("expected an error, got {config:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn defaults_alone_give_the_default_config() {
    let config = load(&Sources::default()).unwrap();
    assert_eq!(config, Config::default());
    assert_eq!(
        config.cluster.node_id, "",
        "the random id is picked at serve time"
    );
}

#[test]
fn precedence_is_file_then_env_then_flags() {
    let file = TempToml::new(
        "[session]\nidle_ttl = \"1m\"\nmax_sessions = 10\n[log]\nlevel = \"debug\"\n",
    );
    let sources = Sources {
        file: Some(file.path().into()),
        env: env(&[
            ("SWITCHBOARD_SESSION__MAX_SESSIONS", "20"),
            ("SWITCHBOARD_LOG__LEVEL", "warn"),
            ("SWITCHBOARD_REDIS__KEY_PREFIX", "env"),
        ]),
        overrides: vec![
            flag("--set log.level=trace", "log.level", "trace"),
            flag("--log-level", "log.level", "error"),
        ],
    };
    let config = load(&sources).unwrap();
    assert_eq!(
        config.session.idle_ttl.get(),
        Duration::from_secs(60),
        "file beats default"
    );
    assert_eq!(config.session.max_sessions.get(), 20, "env beats file");
    assert_eq!(config.redis.key_prefix, "env", "env beats default");
    assert_eq!(
        config.log.level, "error",
        "named flag beats --set, env and file"
    );
    assert_eq!(
        config.cluster.node_ttl.get(),
        Duration::from_secs(5),
        "untouched keys keep their default"
    );
}

#[test]
fn env_values_are_typed_by_their_key() {
    let sources = Sources {
        env: env(&[
            ("SWITCHBOARD_HTTP__ALLOWED_HOSTS", "a.example, b.example,"),
            (
                "SWITCHBOARD_HTTP__ALLOWED_ORIGINS",
                r#"["https://x.example"]"#,
            ),
            ("SWITCHBOARD_CLUSTER__NODE_ID", "123"),
            ("SWITCHBOARD_HTTP__ENDPOINT_PATH", r#""/quoted""#),
            ("SWITCHBOARD_LOG__FORMAT", "json"),
            ("SWITCHBOARD_HTTP__LISTEN", "0.0.0.0:9000"),
            ("SWITCHBOARD_HTTP__MAX_BODY", "64KiB"),
            ("SWITCHBOARD_HTTP__MAX_REQUEST_HEAD", "9000"),
            ("SWITCHBOARD_STATELESS__TASKS__TTL", "2h"),
            ("SWITCHBOARD_CONFIG", ""),
            ("HOME", "/root"),
        ]),
        ..Sources::default()
    };
    let config = load(&sources).unwrap();
    assert_eq!(config.http.allowed_hosts, ["a.example", "b.example"]);
    assert_eq!(config.http.allowed_origins, ["https://x.example"]);
    assert_eq!(config.cluster.node_id, "123");
    assert_eq!(config.http.endpoint_path, "/quoted");
    assert_eq!(config.log.format, LogFormat::Json);
    assert_eq!(config.http.listen.to_string(), "0.0.0.0:9000");
    assert_eq!(config.http.max_body.get(), 64 * 1024);
    assert_eq!(config.http.max_request_head.get(), 9000);
    assert_eq!(config.stateless.tasks.ttl.get(), Duration::from_secs(7200));
}

#[test]
fn an_empty_list_variable_clears_the_list() {
    let file = TempToml::new("[http]\nallowed_hosts = [\"a.example\"]\n");
    let sources = Sources {
        file: Some(file.path().into()),
        env: env(&[("SWITCHBOARD_HTTP__ALLOWED_HOSTS", "")]),
        ..Sources::default()
    };
    assert!(load(&sources).unwrap().http.allowed_hosts.is_empty());
}

#[test]
fn unknown_keys_are_named_with_their_source() {
    let file = TempToml::new("[session]\nidle_tll = \"5s\"\n[node]\nlisten = \"x\"\n");
    let sources = Sources {
        file: Some(file.path().into()),
        env: env(&[("SWITCHBOARD_SESSION__MAX_SESION", "3")]),
        overrides: vec![flag("--set bogus=1", "bogus", "1")],
    };
    let text = error_text(&sources);
    assert!(
        text.contains("unknown config key `session.idle_tll`"),
        "{text}"
    );
    assert!(text.contains("did you mean `session.idle_ttl`"), "{text}");
    assert!(text.contains(&file.path().display().to_string()), "{text}");
    assert!(text.contains("unknown config key `node`"), "{text}");
    assert!(
        text.contains(
            "`session.max_sesion` (from environment variable SWITCHBOARD_SESSION__MAX_SESION)"
        ),
        "{text}"
    );
    assert!(text.contains("`bogus` (from --set bogus=1)"), "{text}");
}

#[test]
fn bad_values_are_named_with_their_key_and_source() {
    let cases: [(&str, &str, &str); 8] = [
        ("session.idle_ttl", "abc", "session.idle_ttl"),
        ("session.idle_ttl", "0s", "session.idle_ttl"),
        ("http.listen", "nowhere", "http.listen"),
        ("log.format", "xml", "log.format"),
        ("session.max_sessions", "-1", "session.max_sessions"),
        ("session.max_sessions", "0", "session.max_sessions"),
        ("http.max_body", "0", "http.max_body"),
        ("http.max_body", "lots", "http.max_body"),
    ];
    for (key, raw, named) in cases {
        let name = env_name(key);
        let sources = Sources {
            env: env(&[(&name, raw)]),
            ..Sources::default()
        };
        let text = error_text(&sources);
        assert!(text.contains(named), "{key}={raw}: {text}");
        assert!(text.contains(&name), "{key}={raw} source not named: {text}");
    }
}

/// A value that is none of the allowed ones names them once each, quoted once: before,
/// `on_upstream_loss = "restart"` gave ``expected ``reinitialize` or `end_session```.
#[test]
fn an_unknown_value_lists_the_allowed_ones_quoted_once() {
    let file = TempToml::new(
        "[[upstreams]]\nname = \"web\"\nkind = \"http\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
         on_upstream_loss = \"restart\"\n",
    );
    let sources = Sources {
        file: Some(file.path().to_owned()),
        ..Sources::default()
    };
    let text = error_text(&sources);
    let expected = format!(
        "upstreams.0.on_upstream_loss (in {}): unknown value `restart`, expected \
         `reinitialize` or `end_session`",
        file.path().display()
    );
    assert!(text.contains(&expected), "{text}");
    let sources = Sources {
        env: env(&[("SWITCHBOARD_LOG__FORMAT", "xml")]),
        ..Sources::default()
    };
    let text = error_text(&sources);
    assert!(
        text.contains("unknown value `xml`, expected `text` or `json`"),
        "{text}"
    );
    assert_eq!(one_of(&["a", "b", "c"]), "`a`, `b` or `c`");
}

#[test]
fn validation_errors_come_after_a_clean_merge() {
    let sources = Sources {
        overrides: vec![flag(
            "--set cluster.heartbeat_interval=9s",
            "cluster.heartbeat_interval",
            "9s",
        )],
        ..Sources::default()
    };
    let text = error_text(&sources);
    assert!(
        text.contains("cluster.heartbeat_interval (9s) must be less than cluster.node_ttl (5s)"),
        "{text}"
    );
    let zero = Sources {
        overrides: vec![flag(
            "--set session.max_events_per_stream=0",
            "session.max_events_per_stream",
            "0",
        )],
        ..Sources::default()
    };
    let text = error_text(&zero);
    assert!(
        text.contains("session.max_events_per_stream (from --set session.max_events_per_stream=0)"),
        "{text}"
    );
    assert!(
        text.contains("expected an integer greater than 0"),
        "{text}"
    );
}

#[test]
fn validation_errors_say_where_each_value_came_from() {
    let file = TempToml::new("[cluster]\nnode_ttl = \"800ms\"\n");
    let sources = Sources {
        file: Some(file.path().into()),
        env: env(&[("SWITCHBOARD_REDIS__KEY_PREFIX", "a b")]),
        overrides: vec![flag(
            "--set session.touch_interval=2h",
            "session.touch_interval",
            "2h",
        )],
    };
    let text = error_text(&sources);
    let file = file.path().display();
    for expected in [
        "(from environment variable SWITCHBOARD_REDIS__KEY_PREFIX)".to_owned(),
        format!("(cluster.heartbeat_interval left at its default; cluster.node_ttl in {file})"),
        "(session.touch_interval from --set session.touch_interval=2h; session.idle_ttl left at its default)"
            .to_owned(),
    ] {
        assert!(text.contains(&expected), "lacks {expected}:\n{text}");
    }
}

#[test]
fn a_missing_or_broken_file_is_an_error_naming_it() {
    let missing = std::env::temp_dir().join("sb-config-does-not-exist.toml");
    let sources = Sources {
        file: Some(missing.clone()),
        ..Sources::default()
    };
    let err = load(&sources).unwrap_err();
    assert!(matches!(err, ConfigError::File { .. }), "{err}");
    assert!(err.to_string().contains("sb-config-does-not-exist.toml"));

    let broken = TempToml::new("[http]\nlisten = \n");
    let sources = Sources {
        file: Some(broken.path().into()),
        ..Sources::default()
    };
    let text = error_text(&sources);
    assert!(
        text.contains(&broken.path().display().to_string()),
        "{text}"
    );
}

#[test]
fn printed_config_reads_back_to_the_same_config() {
    let sources = Sources {
        overrides: vec![
            flag(
                "--set http.allowed_hosts=a.example",
                "http.allowed_hosts",
                "a.example",
            ),
            flag("--redis-url", "redis.url", "redis://127.0.0.1:6399"),
            flag("--log-format", "log.format", "json"),
            flag("--idle-ttl", "session.idle_ttl", "90s"),
        ],
        ..Sources::default()
    };
    let config = load(&sources).unwrap();
    let printed = TempToml::new(&config.to_toml());
    let again = load(&Sources {
        file: Some(printed.path().into()),
        ..Sources::default()
    })
    .unwrap();
    assert_eq!(again, config);
    let printed = config.to_toml();
    for key in Config::keys() {
        let (section, name) = key.rsplit_once('.').unwrap_or(("", &key));
        assert!(
            printed.contains(&format!("\n{name} = ")) || printed.starts_with(&format!("{name} = ")),
            "{key} not printed"
        );
        if !section.is_empty() {
            assert!(
                printed.contains(&format!("[{section}]\n")),
                "[{section}] not printed"
            );
        }
    }
}

#[test]
fn typo_suggestions_stay_close() {
    let known = Config::keys();
    assert_eq!(
        closest("redis.ur", &known).map(String::as_str),
        Some("redis.url")
    );
    assert_eq!(closest("completely_different", &known), None);
    assert_eq!(strsim::levenshtein("kitten", "sitting"), 3);
}

#[test]
fn reserved_variables_are_not_keys() {
    let sources = Sources {
        env: env(&[
            ("SWITCHBOARD_BIN", "/x/switchboard"),
            ("SWITCHBOARD_SERVICE_HOST", "10.0.0.1"),
            ("SWITCHBOARD_SERVICE_PORT_HTTP", "80"),
            ("SWITCHBOARD_PORT", "tcp://10.0.0.1:80"),
            ("SWITCHBOARD_PORT_80_TCP_ADDR", "10.0.0.1"),
        ]),
        ..Sources::default()
    };
    assert!(load(&sources).is_ok());
    for name in ["LISTEN", "SERVICE", "PORTS", "BINARY"] {
        assert!(!is_reserved(name), "{name}");
    }
}

#[test]
fn old_flat_keys_name_their_new_place_from_every_source() {
    let file = TempToml::new("max_sessions = 5\nidle_ttl_ms = 1000\n");
    let sources = Sources {
        file: Some(file.path().into()),
        env: env(&[("SWITCHBOARD_REDIS_URL", "redis://x")]),
        overrides: vec![flag("--set max_body_bytes=10", "max_body_bytes", "10")],
    };
    let text = error_text(&sources);
    for expected in [
        "`max_sessions` moved to `session.max_sessions`",
        "`idle_ttl_ms` moved to `session.idle_ttl` (now a duration",
        "`redis_url` moved to `redis.url` (from environment variable SWITCHBOARD_REDIS_URL); \
         its variable is now SWITCHBOARD_REDIS__URL",
        "`max_body_bytes` moved to `http.max_body` (now a size",
    ] {
        assert!(text.contains(expected), "lacks {expected}:\n{text}");
    }
    assert!(!text.contains("unknown field"), "{text}");
}

#[test]
fn env_names_spell_the_dotted_path() {
    assert_eq!(
        env_name("session.max_sessions"),
        "SWITCHBOARD_SESSION__MAX_SESSIONS"
    );
    assert_eq!(
        env_key("STATELESS__MRTR__STATE_TTL"),
        "stateless.mrtr.state_ttl"
    );
    for key in Config::keys() {
        let name = env_name(&key);
        assert_eq!(env_key(name.strip_prefix(ENV_PREFIX).unwrap()), key);
        assert!(
            !is_reserved(name.strip_prefix(ENV_PREFIX).unwrap()),
            "{name}"
        );
    }
}

#[test]
fn redis_topology_keys_come_from_env_and_flags() {
    let sources = Sources {
        env: env(&[
            ("SWITCHBOARD_REDIS__MODE", "sentinel"),
            (
                "SWITCHBOARD_REDIS__NODES",
                "redis://10.0.0.1:26379,redis://10.0.0.2:26379",
            ),
            ("SWITCHBOARD_REDIS__SENTINEL_PASSWORD", "s3"),
        ]),
        overrides: vec![flag("--set", "redis.master_name", "primary-a")],
        ..Sources::default()
    };
    let config = load(&sources).unwrap();
    let topology = config.redis.topology();
    assert_eq!(topology.mode, switchboard_store::redis::RedisMode::Sentinel);
    assert_eq!(
        topology.nodes,
        ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"]
    );
    assert_eq!(topology.master_name, "primary-a");
    assert_eq!(topology.sentinel_password, "s3");
    assert!(config.redis.uses_redis());
    assert!(
        !format!("{topology:?}").contains("s3"),
        "passwords never print"
    );
    let cluster = Sources {
        env: env(&[("SWITCHBOARD_REDIS__MODE", "shards")]),
        ..Sources::default()
    };
    let text = error_text(&cluster);
    assert!(
        text.contains("standalone") && text.contains("cluster"),
        "{text}"
    );
}

/// `[policy]`: rules come from the file only; a bad rule, an unknown key inside a rule and an
/// upstream nobody configured each name their key.
#[test]
fn policy_rules_are_checked_with_their_keys() {
    let file = TempToml::new(
        "[policy]\ndefault = \"deny\"\n\n[[policy.rules]]\nprincipals = [\"bob\"]\n\
         deny_upstreams = [\"wether\"]\n\n[[policy.rules]]\nscopes = [\"ro\"]\ndeny_tool = [\"x\"]\n",
    );
    let sources = Sources {
        file: Some(file.path().to_owned()),
        ..Sources::default()
    };
    let text = error_text(&sources);
    assert!(text.contains("policy.rules.1"), "{text}");
    assert!(text.contains("unknown key `deny_tool`"), "{text}");
    let file =
        TempToml::new("[[policy.rules]]\nprincipals = [\"bob\"]\ndeny_upstreams = [\"wether\"]\n");
    let sources = Sources {
        file: Some(file.path().to_owned()),
        ..Sources::default()
    };
    let text = error_text(&sources);
    assert!(
        text.contains("policy.rules[0].deny_upstreams names `wether`, which is not a configured upstream (known: demo)"),
        "{text}"
    );
    let good =
        TempToml::new("[policy]\ndefault = \"deny\"\n\n[[policy.rules]]\nprincipals = [\"*\"]\n");
    let config = load(&Sources {
        file: Some(good.path().to_owned()),
        ..Sources::default()
    })
    .expect("loads");
    assert_eq!(config.policy.rules.len(), 1);
    let config = load(&Sources {
        env: env(&[("SWITCHBOARD_POLICY__DEFAULT", "deny")]),
        ..Sources::default()
    })
    .expect("loads");
    assert!(!config.policy.is_off());
}
