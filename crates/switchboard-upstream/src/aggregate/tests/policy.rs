//! The aggregate under a `[policy]`: lists filtered per principal, denied and missing items
//! answered alike, members a principal may not use never asked.

use std::sync::Arc;

use serde_json::{json, Value};
use switchboard_protocol::codes;

use super::{aggregate, ctx, Fake};
use crate::aggregate::Aggregate;
use crate::policy::{Policy, PolicyConfig, PolicyDefault, PolicyRule};
use crate::upstream::{RpcError, Upstream};
use crate::Principal;

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn who(name: &str) -> Arc<Principal> {
    Arc::new(Principal {
        id: format!(r#"["i","{name}"]"#),
        name: name.into(),
        scopes: Vec::new(),
    })
}

/// Member `a` (unprefixed, paginated by 2) and `b` (prefixed); bob may not use `add`, `b`, or a
/// secret resource.
fn setup(default: PolicyDefault) -> (Aggregate, Vec<Arc<Fake>>) {
    let a = Fake::new("a")
        .tools(&["add", "echo", "countdown"])
        .prompts(&["greet", "secret_prompt"])
        .resources(&["demo://public", "demo://secret/key"])
        .page(2);
    let b = Fake::new("b").tools(&["fetch"]).resources(&["web://page"]);
    let (agg, fakes) = aggregate(vec![("a", None, a), ("b", Some("b"), b)]);
    let rule = PolicyRule {
        principals: strings(&["bob"]),
        deny_tools: strings(&["add"]),
        deny_upstreams: strings(&["b"]),
        deny_resources: strings(&["demo://secret/*"]),
        deny_prompts: strings(&["secret_*"]),
        ..PolicyRule::default()
    };
    let alice = PolicyRule {
        principals: strings(&["alice"]),
        ..PolicyRule::default()
    };
    let config = PolicyConfig {
        default,
        rules: vec![rule, alice],
        ..PolicyConfig::default()
    };
    let policy = Policy::new(config, &["a", "b"]).expect("valid");
    (agg.with_policy(Arc::new(policy)), fakes)
}

async fn ask_as(
    agg: &Aggregate,
    who: &Arc<Principal>,
    method: &str,
    params: Value,
) -> Result<Value, RpcError> {
    let mut ctx = ctx();
    ctx.principal = who.clone();
    agg.request(method, params, ctx).await
}

/// Every entry's `field` over all pages.
async fn walk(
    agg: &Aggregate,
    who: &Arc<Principal>,
    method: &str,
    key: &str,
    field: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut params = json!({});
    for _ in 0..20 {
        let page = ask_as(agg, who, method, params).await.expect("list");
        for e in page[key].as_array().expect("entries") {
            out.push(e[field].as_str().unwrap_or_default().to_owned());
        }
        match page.get("nextCursor") {
            Some(c) => params = json!({"cursor": c}),
            None => return out,
        }
    }
    panic!("endless list");
}

#[tokio::test]
async fn lists_leave_out_what_the_principal_may_not_see_across_pages() {
    let (agg, fakes) = setup(PolicyDefault::Allow);
    let (alice, bob) = (who("alice"), who("bob"));
    assert_eq!(
        walk(&agg, &alice, "tools/list", "tools", "name").await,
        ["add", "echo", "countdown", "b__fetch"]
    );
    let before = fakes[1].count("tools/list");
    assert_eq!(
        walk(&agg, &bob, "tools/list", "tools", "name").await,
        ["echo", "countdown"]
    );
    assert_eq!(
        fakes[1].count("tools/list"),
        before,
        "b is never asked for bob"
    );
    assert_eq!(
        walk(&agg, &bob, "resources/list", "resources", "uri").await,
        ["demo://public"]
    );
    assert_eq!(
        walk(&agg, &bob, "prompts/list", "prompts", "name").await,
        ["greet"]
    );
}

#[tokio::test]
async fn a_denied_item_and_a_missing_one_get_the_same_error() {
    let (agg, _) = setup(PolicyDefault::Allow);
    let bob = who("bob");
    let err = |name: &str| {
        let (agg, bob) = (&agg, &bob);
        let name = name.to_owned();
        async move {
            ask_as(
                agg,
                bob,
                "tools/call",
                json!({"name": name, "arguments": {}}),
            )
            .await
            .expect_err("refused")
        }
    };
    let (denied, missing) = (err("add").await, err("zzz").await);
    assert_eq!(denied.code, codes::INVALID_PARAMS);
    assert_eq!(denied.message, "unknown tool: add");
    assert_eq!(missing.message, "unknown tool: zzz");
    assert_eq!(denied.data, Some(json!({"name": "add"})));
    // A denied upstream's tool, and one it does not have.
    assert_eq!(
        err("b__fetch").await,
        crate::policy::unknown_tool("b__fetch")
    );
    assert_eq!(err("b__nope").await, crate::policy::unknown_tool("b__nope"));
    // Alice calls `add`.
    let ok = ask_as(&agg, &who("alice"), "tools/call", json!({"name": "add"})).await;
    assert_eq!(ok.expect("alice may")["content"][0]["text"], "a:add");

    let read = |uri: &'static str| ask_as(&agg, &bob, "resources/read", json!({"uri": uri}));
    let (secret, nothing) = (read("demo://secret/key").await, read("demo://none").await);
    assert_eq!(
        secret,
        Err(crate::policy::resource_not_found("demo://secret/key"))
    );
    assert_eq!(
        nothing,
        Err(crate::policy::resource_not_found("demo://none"))
    );
    assert_eq!(
        read("web://page").await,
        Err(crate::policy::resource_not_found("web://page"))
    );
    let unsubscribe = ask_as(
        &agg,
        &bob,
        "resources/unsubscribe",
        json!({"uri": "demo://secret/key"}),
    );
    assert_eq!(unsubscribe.await, Ok(json!({})));

    let prompt = ask_as(&agg, &bob, "prompts/get", json!({"name": "secret_prompt"})).await;
    assert_eq!(prompt, Err(crate::policy::unknown_prompt("secret_prompt")));
    let complete = json!({"ref": {"type": "ref/prompt", "name": "secret_prompt"},
                          "argument": {"name": "x", "value": ""}});
    let complete = ask_as(&agg, &bob, "completion/complete", complete).await;
    assert_eq!(
        complete,
        Err(crate::policy::unknown_prompt("secret_prompt"))
    );
}

#[tokio::test]
async fn default_deny_hides_everything_from_unmatched_principals() {
    let (agg, _) = setup(PolicyDefault::Deny);
    let carol = who("carol");
    assert!(walk(&agg, &carol, "tools/list", "tools", "name")
        .await
        .is_empty());
    let call = ask_as(&agg, &carol, "tools/call", json!({"name": "echo"})).await;
    assert_eq!(call, Err(crate::policy::unknown_tool("echo")));
    // The node's own requests are never restricted.
    let internal = Principal::internal();
    assert_eq!(
        walk(&agg, &internal, "tools/list", "tools", "name")
            .await
            .len(),
        4
    );
}

#[tokio::test]
async fn the_one_members_other_methods_need_the_member() {
    let (agg, _) = aggregate(vec![("a", None, Fake::new("a"))]);
    let rule = PolicyRule {
        principals: strings(&["bob"]),
        deny_upstreams: strings(&["a"]),
        ..PolicyRule::default()
    };
    let config = PolicyConfig {
        default: PolicyDefault::Allow,
        rules: vec![rule],
        ..PolicyConfig::default()
    };
    let agg = agg.with_policy(Arc::new(Policy::new(config, &["a"]).expect("valid")));
    let bob = ask_as(&agg, &who("bob"), "custom/echo", json!({})).await;
    assert_eq!(bob.map_err(|e| e.code), Err(codes::METHOD_NOT_FOUND));
    let alice = ask_as(&agg, &who("alice"), "custom/echo", json!({})).await;
    assert_eq!(alice.expect("forwarded")["from"], "a");
}

#[test]
fn initialize_describes_only_the_members_a_principal_may_use() {
    let a = Fake::new("a")
        .tools(&["echo"])
        .caps(json!({"tools": {}}))
        .instructions("Use echo.");
    let b = Fake::new("b")
        .resources(&["web://page"])
        .caps(json!({"resources": {"subscribe": true}}))
        .instructions("Fetches the internal wiki.");
    let (agg, _) = aggregate(vec![("a", None, a), ("b", Some("b"), b)]);
    let rule = PolicyRule {
        principals: strings(&["bob"]),
        deny_upstreams: strings(&["b"]),
        ..PolicyRule::default()
    };
    let config = PolicyConfig {
        default: PolicyDefault::Allow,
        rules: vec![rule],
        ..PolicyConfig::default()
    };
    let agg = agg.with_policy(Arc::new(Policy::new(config, &["a", "b"]).expect("valid")));
    let bob = agg.instructions_for(&who("bob")).expect("a's instructions");
    assert!(bob.contains("Use echo."), "{bob}");
    assert!(!bob.contains("wiki") && !bob.contains("## b"), "{bob}");
    assert_eq!(agg.capabilities_for(&who("bob")), json!({"tools": {}}));
    let carol = agg.instructions_for(&who("carol")).expect("both");
    assert!(
        carol.contains("Use echo.") && carol.contains("wiki"),
        "{carol}"
    );
    assert_eq!(
        agg.capabilities_for(&who("carol")),
        json!({"tools": {}, "resources": {"subscribe": true}})
    );
    assert_eq!(agg.capabilities_for(&who("carol")), agg.capabilities());
}
