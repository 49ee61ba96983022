use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

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
    assert_eq!(config.node_id, "", "the random id is picked at serve time");
}

#[test]
fn precedence_is_file_then_env_then_flags() {
    let file = TempToml::new("idle_ttl_ms = 60000\nmax_sessions = 10\nlog_level = \"debug\"\n");
    let sources = Sources {
        file: Some(file.path().into()),
        env: env(&[
            ("SWITCHBOARD_MAX_SESSIONS", "20"),
            ("SWITCHBOARD_LOG_LEVEL", "warn"),
            ("SWITCHBOARD_KEY_PREFIX", "env"),
        ]),
        overrides: vec![
            flag("--set log_level=trace", "log_level", "trace"),
            flag("--log-level", "log_level", "error"),
        ],
    };
    let config = load(&sources).unwrap();
    assert_eq!(config.idle_ttl_ms, 60000, "file beats default");
    assert_eq!(config.max_sessions, 20, "env beats file");
    assert_eq!(config.key_prefix, "env", "env beats default");
    assert_eq!(
        config.log_level, "error",
        "named flag beats --set, env and file"
    );
    assert_eq!(
        config.node_ttl_ms, 5000,
        "untouched keys keep their default"
    );
}

#[test]
fn env_values_are_typed_by_their_key() {
    let sources = Sources {
        env: env(&[
            ("SWITCHBOARD_ALLOWED_HOSTS", "a.example, b.example,"),
            ("SWITCHBOARD_ALLOWED_ORIGINS", r#"["https://x.example"]"#),
            ("SWITCHBOARD_NODE_ID", "123"),
            ("SWITCHBOARD_ENDPOINT_PATH", r#""/quoted""#),
            ("SWITCHBOARD_LOG_FORMAT", "json"),
            ("SWITCHBOARD_LISTEN", "0.0.0.0:9000"),
            ("SWITCHBOARD_CONFIG", ""),
            ("HOME", "/root"),
        ]),
        ..Sources::default()
    };
    let config = load(&sources).unwrap();
    assert_eq!(config.allowed_hosts, ["a.example", "b.example"]);
    assert_eq!(config.allowed_origins, ["https://x.example"]);
    assert_eq!(config.node_id, "123");
    assert_eq!(config.endpoint_path, "/quoted");
    assert_eq!(config.log_format, LogFormat::Json);
    assert_eq!(config.listen.to_string(), "0.0.0.0:9000");
}

#[test]
fn an_empty_list_variable_clears_the_list() {
    let file = TempToml::new("allowed_hosts = [\"a.example\"]\n");
    let sources = Sources {
        file: Some(file.path().into()),
        env: env(&[("SWITCHBOARD_ALLOWED_HOSTS", "")]),
        ..Sources::default()
    };
    assert!(load(&sources).unwrap().allowed_hosts.is_empty());
}

#[test]
fn unknown_keys_are_named_with_their_source() {
    let file = TempToml::new("idle_ttl = 5\n[node]\nlisten = \"x\"\n");
    let sources = Sources {
        file: Some(file.path().into()),
        env: env(&[("SWITCHBOARD_MAX_SESION", "3")]),
        overrides: vec![flag("--set bogus=1", "bogus", "1")],
    };
    let text = error_text(&sources);
    assert!(text.contains("unknown config key `idle_ttl`"), "{text}");
    assert!(text.contains("did you mean `idle_ttl_ms`"), "{text}");
    assert!(text.contains(&file.path().display().to_string()), "{text}");
    assert!(text.contains("unknown config key `node`"), "{text}");
    assert!(
        text.contains("`max_sesion` (from environment variable SWITCHBOARD_MAX_SESION)"),
        "{text}"
    );
    assert!(text.contains("`bogus` (from --set bogus=1)"), "{text}");
}

#[test]
fn bad_values_are_named_with_their_key_and_source() {
    let cases: [(&str, &str, &str); 4] = [
        ("idle_ttl_ms", "abc", "idle_ttl_ms"),
        ("listen", "nowhere", "listen"),
        ("log_format", "xml", "log_format"),
        ("max_sessions", "-1", "max_sessions"),
    ];
    for (key, raw, named) in cases {
        let name = format!("SWITCHBOARD_{}", key.to_uppercase());
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
        env: env(&[("SWITCHBOARD_LOG_FORMAT", "xml")]),
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
        overrides: vec![
            flag(
                "--set heartbeat_interval_ms=9000",
                "heartbeat_interval_ms",
                "9000",
            ),
            flag(
                "--set max_events_per_stream=0",
                "max_events_per_stream",
                "0",
            ),
        ],
        ..Sources::default()
    };
    let text = error_text(&sources);
    assert!(
        text.contains("heartbeat_interval_ms (9000) must be less than node_ttl_ms"),
        "{text}"
    );
    assert!(
        text.contains("max_events_per_stream must be greater than 0"),
        "{text}"
    );
}

#[test]
fn validation_errors_say_where_each_value_came_from() {
    let file = TempToml::new("node_ttl_ms = 800\n");
    let sources = Sources {
        file: Some(file.path().into()),
        env: env(&[("SWITCHBOARD_MAX_SESSIONS", "0")]),
        overrides: vec![flag(
            "--set session_touch_interval_ms=1900000",
            "session_touch_interval_ms",
            "1900000",
        )],
    };
    let text = error_text(&sources);
    let file = file.path().display();
    for expected in [
        "max_sessions must be greater than 0 (from environment variable SWITCHBOARD_MAX_SESSIONS)"
            .to_owned(),
        format!("(heartbeat_interval_ms by default; node_ttl_ms in {file})"),
        "(session_touch_interval_ms from --set session_touch_interval_ms=1900000; idle_ttl_ms by default)"
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

    let broken = TempToml::new("listen = \n");
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
                "--set allowed_hosts=a.example",
                "allowed_hosts",
                "a.example",
            ),
            flag("--redis-url", "redis_url", "redis://127.0.0.1:6399"),
            flag("--log-format", "log_format", "json"),
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
    for key in Config::keys() {
        assert!(
            config.to_toml().contains(&format!("{key} = ")),
            "{key} not printed"
        );
    }
}

#[test]
fn typo_suggestions_stay_close() {
    let known = Config::keys();
    assert_eq!(
        closest("redis_ur", &known).map(String::as_str),
        Some("redis_url")
    );
    assert_eq!(closest("completely_different", &known), None);
    assert_eq!(edit_distance("kitten", "sitting"), 3);
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
