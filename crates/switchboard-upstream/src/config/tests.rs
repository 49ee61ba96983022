//! Parsing, validation and environment expansion of `[[upstreams]]`.

use std::collections::BTreeMap;

use super::*;

/// Parses a TOML document into an [`UpstreamsConfig`].
fn parse(text: &str) -> Result<UpstreamsConfig, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

fn problems(text: &str) -> String {
    parse(text).expect("parses").problems().join("\n")
}

#[test]
fn a_full_config_parses_with_defaults_filled_in() {
    let config = parse(
        r#"
        [[upstreams]]
        name = "weather"
        kind = "http"
        url = "https://weather.example/mcp"
        headers = { Authorization = "Bearer ${TOKEN}" }

        [[upstreams]]
        name = "files"
        kind = "stdio"
        prefix = ""
        command = "mcp-files"
        args = ["/srv"]
        env = { LEVEL = "warn" }
        cwd = "/tmp"
        shared = true
        timeout_ms = 5000

        [[upstreams]]
        name = "demo"
        kind = "demo"
        prefix = "d"
        "#,
    )
    .unwrap();
    assert_eq!(config.separator, "__");
    let [weather, files, demo] = config.upstreams.as_slice() else {
        panic!("three upstreams");
    };
    assert_eq!(weather.kind, UpstreamKind::Http);
    assert_eq!(weather.timeout_ms, 60_000);
    assert_eq!(
        weather.effective_prefix(),
        Some("weather"),
        "default: the name"
    );
    assert_eq!(files.effective_prefix(), None, "\"\" is no prefix");
    assert_eq!(files.args, ["/srv"]);
    assert!(files.shared);
    assert_eq!(files.timeout_ms, 5000);
    assert_eq!(demo.effective_prefix(), Some("d"));
    assert_eq!(
        files.line_limit(),
        16 * 1024 * 1024,
        "default max_line_bytes"
    );
    assert_eq!(
        weather.message_limit(),
        32 * 1024 * 1024,
        "default max_message_bytes"
    );
    assert_eq!(config.problems(), Vec::<String>::new());
    // Serializes back to the same value (the binary prints its config as TOML).
    let again: UpstreamsConfig = toml::from_str(&toml::to_string(&config).unwrap()).unwrap();
    assert_eq!(again, config);
}

#[test]
fn unknown_keys_and_kinds_are_refused() {
    let err =
        parse("[[upstreams]]\nname = \"a\"\nkind = \"demo\"\nurl_typo = \"x\"\n").unwrap_err();
    assert!(err.contains("unknown field `url_typo`"), "{err}");
    let err = parse("[[upstreams]]\nname = \"a\"\nkind = \"grpc\"\n").unwrap_err();
    assert!(err.contains("unknown variant `grpc`"), "{err}");
    let err = parse("[[upstreams]]\nkind = \"demo\"\n").unwrap_err();
    assert!(err.contains("missing field `name`"), "{err}");
}

#[test]
fn bad_values_are_problems_naming_the_upstream() {
    let cases = [
        ("name = \"a b\"\nkind = \"demo\"", "upstream name `a b`"),
        ("name = \"a.b\"\nkind = \"demo\"", "upstream name `a.b`"),
        (
            "name = \"a\"\nkind = \"demo\"\nprefix = \"x y\"",
            "upstream `a`: prefix `x y`",
        ),
        (
            "name = \"a\"\nkind = \"demo\"\ntimeout_ms = 0",
            "upstream `a`: timeout_ms",
        ),
        (
            "name = \"a\"\nkind = \"stdio\"\ncommand = \"x\"\nmax_line_bytes = 0",
            "upstream `a`: max_line_bytes must be greater than 0",
        ),
        (
            "name = \"a\"\nkind = \"http\"\nurl = \"http://h/\"\nmax_message_bytes = 0",
            "upstream `a`: max_message_bytes must be greater than 0",
        ),
        (
            "name = \"a\"\nkind = \"http\"\nurl = \"http://h/\"\nmax_line_bytes = 9",
            "upstream `a`: `max_line_bytes` does not apply to kind `http`",
        ),
        (
            "name = \"a\"\nkind = \"stdio\"\ncommand = \"x\"\nmax_message_bytes = 9",
            "upstream `a`: `max_message_bytes` does not apply to kind `stdio`",
        ),
        (
            "name = \"a\"\nkind = \"stdio\"",
            "upstream `a`: kind `stdio` needs a `command`",
        ),
        (
            "name = \"a\"\nkind = \"http\"",
            "upstream `a`: kind `http` needs a `url`",
        ),
        (
            "name = \"a\"\nkind = \"sse\"\nurl = \"ftp://x\"",
            "kind `sse` needs a `url`",
        ),
        (
            "name = \"a\"\nkind = \"demo\"\ncommand = \"x\"",
            "`command` does not apply to kind `demo`",
        ),
        (
            "name = \"a\"\nkind = \"stdio\"\ncommand = \"x\"\nurl = \"http://x\"",
            "`url` does not apply to kind `stdio`",
        ),
        (
            "name = \"a\"\nkind = \"http\"\nurl = \"http://x\"\nheaders = { \"bad name\" = \"v\" }",
            "`bad name` is not a valid header name",
        ),
        (
            "name = \"a\"\nkind = \"http\"\nurl = \"http://x\"\nheaders = { X = \"${OPEN\" }",
            "header `X`: unclosed",
        ),
        (
            "name = \"a\"\nkind = \"http\"\nurl = \"http://x\"\nheaders = { X = \"${1A}\" }",
            "not a valid environment variable reference",
        ),
    ];
    for (table, needle) in cases {
        let found = problems(&format!("[[upstreams]]\n{table}\n"));
        assert!(
            found.contains(needle),
            "{table}:\n{found}\nshould contain {needle:?}"
        );
    }
}

#[test]
fn separators_names_and_prefixes_are_checked_together() {
    let two = |sep: &str, p1: &str, p2: &str| {
        problems(&format!(
            "separator = \"{sep}\"\n[[upstreams]]\nname = \"a\"\nkind = \"demo\"\nprefix = \"{p1}\"\n\
             [[upstreams]]\nname = \"b\"\nkind = \"demo\"\nprefix = \"{p2}\"\n"
        ))
    };
    assert_eq!(two("__", "a", "b"), "");
    assert_eq!(two(".", "a", ""), "");
    assert!(two("/", "a", "b").contains("tool separator `/`"));
    assert!(two("", "a", "b").contains("tool separator ``"));
    assert!(two("__", "x", "x").contains("overlapping prefixes"));
    assert!(two("_", "a", "a_b").contains("overlapping prefixes"));
    let dup = problems(
        "[[upstreams]]\nname = \"a\"\nkind = \"demo\"\n[[upstreams]]\nname = \"a\"\nkind = \"demo\"\n",
    );
    assert!(dup.contains("`a` is used twice"), "{dup}");
}

#[test]
fn header_values_expand_environment_variables() {
    let mut config = UpstreamConfig::new("api", UpstreamKind::Http);
    config.url = Some("https://api.example".into());
    config.headers = BTreeMap::from([
        ("Authorization".into(), "Bearer ${TOKEN}".into()),
        ("X-Mixed".into(), "$plain ${A}-${B_2}$".into()),
    ]);
    let env = |var: &str| match var {
        "TOKEN" => Some("s3cret".to_owned()),
        "A" => Some("1".to_owned()),
        "B_2" => Some("2".to_owned()),
        _ => None,
    };
    let expanded = config.expanded(env).unwrap();
    assert_eq!(expanded.headers["Authorization"], "Bearer s3cret");
    assert_eq!(expanded.headers["X-Mixed"], "$plain 1-2$");
    assert_eq!(
        config.headers["Authorization"], "Bearer ${TOKEN}",
        "the original is kept"
    );
    let err = config.expanded(|_| None).unwrap_err();
    assert_eq!(
        err,
        "upstream `api`: header `Authorization`: environment variable `TOKEN` is not set"
    );
}

#[test]
fn revision_names_a_stateless_server_of_kind_http_only() {
    let ok = "[[upstreams]]\nname = \"m\"\nkind = \"http\"\nurl = \"http://127.0.0.1:1/mcp\"\n\
              revision = \"2026-07-28\"\n";
    assert_eq!(problems(ok), "");
    let config = parse(ok).unwrap();
    let built = crate::build::upstreams(&config).expect("builds");
    assert!(
        built.serves_stateless(),
        "a 2026-07-28 server keeps no session"
    );
    let old = ok.replace("2026-07-28", "2025-11-25");
    assert!(
        problems(&old).contains("not a stateless revision"),
        "{}",
        problems(&old)
    );
    let stdio = "[[upstreams]]\nname = \"s\"\nkind = \"stdio\"\ncommand = \"x\"\n\
                 revision = \"2026-07-28\"\n";
    assert!(
        problems(stdio).contains("`revision` does not apply"),
        "{}",
        problems(stdio)
    );
}

#[test]
fn stdio_restart_settings_have_defaults_and_are_checked() {
    let stdio = "[[upstreams]]\nname = \"kid\"\nkind = \"stdio\"\ncommand = \"x\"\n";
    let config = parse(stdio).unwrap();
    let policy = config.upstreams[0].restart_policy();
    assert_eq!(policy, super::RestartPolicy::default());
    assert_eq!(policy.backoff.as_millis(), 500);
    assert_eq!(policy.backoff_max.as_millis(), 30_000);
    assert_eq!(policy.stable.as_millis(), 10_000);
    let set = format!(
        "{stdio}restart_backoff_ms = 100\nrestart_backoff_max_ms = 800\nrestart_stable_ms = 50\n"
    );
    let config = parse(&set).unwrap();
    assert_eq!(config.problems(), Vec::<String>::new());
    let policy = config.upstreams[0].restart_policy();
    assert_eq!(
        (
            policy.backoff.as_millis(),
            policy.backoff_max.as_millis(),
            policy.stable.as_millis()
        ),
        (100, 800, 50)
    );
    let again: UpstreamsConfig = toml::from_str(&toml::to_string(&config).unwrap()).unwrap();
    assert_eq!(again, config, "printed and read back");
    for (extra, expected) in [
        ("restart_backoff_ms = 0", "upstream `kid`: restart_backoff_ms must be greater than 0"),
        ("restart_stable_ms = 0", "upstream `kid`: restart_stable_ms must be greater than 0"),
        (
            "restart_backoff_max_ms = 400",
            "upstream `kid`: restart_backoff_max_ms (400) must be at least restart_backoff_ms (500)",
        ),
    ] {
        assert_eq!(problems(&format!("{stdio}{extra}\n")), expected, "{extra}");
    }
    let http = "[[upstreams]]\nname = \"w\"\nkind = \"http\"\nurl = \"http://127.0.0.1:1/\"\nrestart_backoff_ms = 5\n";
    assert_eq!(
        problems(http),
        "upstream `w`: `restart_backoff_ms` does not apply to kind `http`"
    );
}

#[test]
fn max_attached_sessions_applies_to_shared_stdio_children_only() {
    let stdio = "[[upstreams]]\nname = \"hub\"\nkind = \"stdio\"\ncommand = \"x\"\n";
    let config = parse(stdio).unwrap();
    assert_eq!(config.upstreams[0].max_attached_sessions(), 10_000);
    let shared = format!("{stdio}shared = true\nmax_attached_sessions = 3\n");
    let config = parse(&shared).unwrap();
    assert_eq!(config.problems(), Vec::<String>::new());
    assert_eq!(config.upstreams[0].max_attached_sessions(), 3);
    assert_eq!(
        problems(&format!("{stdio}max_attached_sessions = 3\n")),
        "upstream `hub`: max_attached_sessions applies only with `shared = true`"
    );
    assert_eq!(
        problems(&format!(
            "{stdio}shared = true\nmax_attached_sessions = 0\n"
        )),
        "upstream `hub`: max_attached_sessions must be greater than 0"
    );
}

#[test]
fn replication_settings_parse_and_apply_to_session_era_http_only() {
    let config = parse(
        r#"
        [[upstreams]]
        name = "counter"
        kind = "http"
        url = "http://counter.test:8080/mcp"
        on_upstream_loss = "end_session"
        resolve_interval_ms = 2000
        nameservers = ["127.0.0.1:5353", "10.0.0.10"]
        max_endpoints = 8
        max_cookie_bytes = 512

        [[upstreams]]
        name = "spread"
        kind = "http"
        url = "http://spread.test/mcp"
        stateless = true
        "#,
    )
    .unwrap();
    assert!(config.problems().is_empty(), "{:?}", config.problems());
    let counter = &config.upstreams[0];
    assert_eq!(counter.on_upstream_loss, Some(OnUpstreamLoss::EndSession));
    assert_eq!(counter.resolve_interval_ms, Some(2000));
    assert!(config.upstreams[1].stateless);
    assert!(crate::build::upstreams(&config).is_ok());
    let text = problems(
        r#"
        [[upstreams]]
        name = "s"
        kind = "sse"
        url = "http://x.test/sse"
        stateless = true

        [[upstreams]]
        name = "m"
        kind = "http"
        url = "http://x.test/mcp"
        revision = "2026-07-28"
        nameservers = ["127.0.0.1"]

        [[upstreams]]
        name = "both"
        kind = "http"
        url = "http://x.test/mcp"
        stateless = true
        on_upstream_loss = "reinitialize"
        resolve_interval_ms = 0
        max_endpoints = 0
        nameservers = ["dns.example"]
        "#,
    );
    for needle in [
        "upstream `s`: `stateless` applies only to kind `http` without `revision`",
        "upstream `m`: `nameservers` applies only to kind `http` without `revision`",
        "upstream `both`: `on_upstream_loss` does not apply to a `stateless` upstream",
        "upstream `both`: resolve_interval_ms must be greater than 0",
        "upstream `both`: max_endpoints must be greater than 0",
        "upstream `both`: nameserver `dns.example` is not an IP address",
    ] {
        assert!(text.contains(needle), "{needle:?} in:\n{text}");
    }
    assert!(parse("[[upstreams]]\nname = \"x\"\nkind = \"http\"\nurl = \"http://a/\"\non_upstream_loss = \"retry\"\n").is_err());
}

/// `nameservers` on a URL whose host is an IP address would do nothing (an IP address is not
/// resolved): it is refused, naming the key and the host; a host name with the same
/// nameservers is accepted. Before, it was accepted silently.
#[test]
fn nameservers_for_an_ip_address_url_are_refused() {
    let text = problems(
        r#"
        [[upstreams]]
        name = "v4"
        kind = "http"
        url = "http://127.0.0.1:3001/mcp"
        nameservers = ["127.0.0.1:5353"]

        [[upstreams]]
        name = "v6"
        kind = "http"
        url = "http://[::1]:3001/mcp"
        nameservers = ["127.0.0.1:5353"]
        "#,
    );
    for host in [
        "v4`: `nameservers` does nothing here: the `url`'s host 127.0.0.1 is",
        "v6`: `nameservers` does nothing here: the `url`'s host [::1] is",
    ] {
        let needle = format!("upstream `{host} an IP address, which is not resolved");
        assert!(text.contains(&needle), "{needle:?} in:\n{text}");
    }
    let named = parse(
        "[[upstreams]]\nname = \"n\"\nkind = \"http\"\nurl = \"http://mcp.test:3001/mcp\"\nnameservers = [\"127.0.0.1:5353\"]\n",
    )
    .unwrap();
    assert!(named.problems().is_empty(), "{:?}", named.problems());
}
