use serde_json::json;

use super::*;

fn settings(text: &str) -> RateLimitSettings {
    toml::from_str(text).unwrap()
}

#[test]
fn limits_apply_to_the_requests_the_module_doc_names() {
    let mut s = settings(
        r#"
        principal = { rate = 20 }
        tools.echo = { rate = 1, burst = 2 }
        upstreams.weather = { rate = 100, burst = 10 }
        "#,
    );
    s.tool_prefixes.insert("weather".into(), "weather__".into());
    assert_eq!(s.on_store_error, OnStoreError::Open);
    assert_eq!(s.principal.unwrap().burst(), 20);
    let call = |name: &str| json!({"params": {"name": name}});
    let names = |rates: Vec<Rate>| rates.into_iter().map(|r| r.name).collect::<Vec<_>>();
    assert_eq!(
        names(s.rates_for("alice", "ping", &json!({}))),
        ["principal"]
    );
    assert_eq!(
        names(s.rates_for("alice", "tools/call", &call("echo"))),
        ["principal", "tool:echo"]
    );
    let weather = s.rates_for("alice", "tools/call", &call("weather__now"));
    assert_eq!(names(weather.clone()), ["principal", "upstream:weather"]);
    assert_eq!(
        (weather[1].tag.as_str(), weather[1].key.as_str()),
        ("u:weather", "u")
    );
    let echo = s.rates_for("bob", "tools/call", &call("echo"));
    assert_eq!(
        (echo[1].tag.as_str(), echo[1].key.as_str()),
        ("bob", "t:echo")
    );
    assert_eq!(s.spec_of("tool:echo").unwrap().window_secs(), 2);
    assert!(s.spec_of("tool:nope").is_none());
    assert!(RateLimitSettings::default()
        .rates_for("a", "tools/call", &call("echo"))
        .is_empty());
}

#[test]
fn bad_limits_name_their_key() {
    let s = settings(
        r#"
        on_store_error = "closed"
        principal = { rate = 0 }
        tools.echo = { rate = 1, burst = 0 }
        "#,
    );
    assert_eq!(s.on_store_error, OnStoreError::Closed);
    let problems = s.problems();
    assert!(
        problems[0].starts_with("rate_limits.principal.rate"),
        "{problems:?}"
    );
    assert!(
        problems[1].starts_with("rate_limits.tools.echo.burst"),
        "{problems:?}"
    );
    assert!(toml::from_str::<RateLimitSettings>("on_store_error = \"maybe\"").is_err());
    assert!(toml::from_str::<RateLimitSettings>("principal = { rate = 1, brust = 2 }").is_err());
}
