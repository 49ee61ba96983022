//! Building the node's upstream from `[[upstreams]]` tables.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;

/// Parses a TOML document into an [`UpstreamsConfig`].
fn parse(text: &str) -> Result<UpstreamsConfig, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

#[tokio::test]
async fn build_makes_the_demo_alone_or_an_aggregate() {
    let alone = upstreams(&UpstreamsConfig::default()).unwrap();
    assert_eq!(alone.name(), "demo");
    let config = parse(
        "[[upstreams]]\nname = \"a\"\nkind = \"demo\"\n[[upstreams]]\nname = \"b\"\nkind = \"demo\"\n",
    )
    .unwrap();
    let agg = upstreams(&config).unwrap();
    assert_eq!(agg.name(), "switchboard");
    assert_eq!(agg.members().len(), 2);
    let ctx = crate::aggregate::tests::ctx();
    let tools = agg.request("tools/list", json!({}), ctx).await.unwrap();
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"a__echo") && names.contains(&"b__echo"),
        "{names:?}"
    );
}

#[test]
fn every_built_upstream_says_its_timeout() {
    let default = std::time::Duration::from_millis(crate::config::DEFAULT_TIMEOUT_MS);
    assert_eq!(
        upstreams(&UpstreamsConfig::default()).unwrap().timeout(),
        Some(default)
    );
    let config = parse(
        "[[upstreams]]\nname = \"a\"\nkind = \"demo\"\ntimeout_ms = 2500\n\
         [[upstreams]]\nname = \"b\"\nkind = \"demo\"\ntimeout_ms = 900\n",
    )
    .unwrap();
    let agg = upstreams(&config).unwrap();
    let ms = std::time::Duration::from_millis;
    assert_eq!(agg.timeout(), Some(ms(2500)), "an aggregate: its longest");
    let b = &agg.members()[1];
    assert_eq!(b.timeout(), Some(ms(900)));
}

#[test]
fn build_refuses_bad_configs_and_unset_variables() {
    let bad = parse("[[upstreams]]\nname = \"a b\"\nkind = \"demo\"\n").unwrap();
    let err = upstreams(&bad).err().unwrap();
    assert!(err.contains("upstream name `a b`"), "{err}");
    let mut http = UpstreamConfig::new("web", UpstreamKind::Http);
    http.url = Some("http://127.0.0.1:9/mcp".into());
    http.headers = BTreeMap::from([(
        "Authorization".into(),
        "${SWITCHBOARD_TEST_SURELY_UNSET_VAR}".into(),
    )]);
    let err = upstream(&http).err().unwrap();
    assert!(
        err.contains("`SWITCHBOARD_TEST_SURELY_UNSET_VAR` is not set"),
        "{err}"
    );
}
