//! Rule evaluation and load-time checks of [`Policy`].

use super::*;

fn who(name: &str, scopes: &[&str]) -> Principal {
    Principal {
        id: format!(r#"["i","{name}"]"#),
        name: name.into(),
        scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn rule(principals: &[&str], scopes: &[&str]) -> PolicyRule {
    PolicyRule {
        principals: principals.iter().map(|s| (*s).to_owned()).collect(),
        scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn policy(default: PolicyDefault, rules: Vec<PolicyRule>) -> Policy {
    let config = PolicyConfig {
        default,
        rules,
        ..PolicyConfig::default()
    };
    Policy::new(config, &["demo", "web"]).expect("valid policy")
}

#[test]
fn globs_match_runs_of_characters() {
    assert!(glob("add", "add"));
    assert!(!glob("add", "adder"));
    assert!(glob("*", ""));
    assert!(glob("web__*", "web__fetch"));
    assert!(!glob("web__*", "demo__fetch"));
    assert!(glob("demo://*/secret", "demo://a/b/secret"));
    assert!(glob("a*b*c", "abc"));
    assert!(glob("a*b*c", "a-b-b-c"));
    assert!(!glob("a*a", "a"));
    assert!(!glob("*.txt", "notes.md"));
}

#[test]
fn off_and_internal_see_everything() {
    let off = Policy::default();
    assert!(off.is_off());
    assert!(off.view(&who("bob", &[])).is_unrestricted());
    let mut bob = rule(&["bob"], &[]);
    bob.deny_tools = strings(&["add"]);
    let on = policy(PolicyDefault::Deny, vec![bob]);
    assert!(!on.is_off());
    assert!(on.view(&Principal::internal()).allows(Kind::Tool, "add"));
    assert!(!on.view(&Principal::anonymous()).allows(Kind::Tool, "echo"));
}

#[test]
fn deny_wins_and_allow_lists_mean_only_these() {
    let mut bob = rule(&["bob"], &[]);
    bob.deny_tools = strings(&["add"]);
    bob.deny_upstreams = strings(&["web"]);
    let mut readers = rule(&[], &["read"]);
    readers.allow_tools = strings(&["echo", "add", "web__*"]);
    let mut everyone = rule(&["*"], &[]);
    everyone.deny_resources = strings(&["demo://secret/*"]);
    let p = policy(PolicyDefault::Allow, vec![bob, readers, everyone]);

    let alice = p.view(&who("alice", &[]));
    assert!(alice.allows(Kind::Tool, "countdown"));
    assert!(alice.allows_in("web", Kind::Tool, "web__fetch"));
    assert!(!alice.allows(Kind::Resource, "demo://secret/key"));
    assert!(alice.allows(Kind::Resource, "demo://greeting"));

    let bob = p.view(&who("bob", &["read"]));
    assert!(bob.allows(Kind::Tool, "echo"));
    assert!(
        !bob.allows(Kind::Tool, "add"),
        "deny wins over an allow list"
    );
    assert!(
        !bob.allows(Kind::Tool, "countdown"),
        "not in the allow list"
    );
    assert!(
        !bob.allows_in("web", Kind::Tool, "web__fetch"),
        "upstream denied"
    );
    assert!(bob.allows(Kind::Prompt, "greet"), "no prompt list: allowed");

    let carol = p.view(&who("carol", &["read", "write"]));
    assert!(carol.allows(Kind::Tool, "add"));
    assert!(!carol.allows(Kind::Tool, "countdown"));
}

#[test]
fn principals_and_scopes_must_both_match_and_default_decides_the_rest() {
    let mut admins = rule(&["ops-*"], &["admin"]);
    admins.allow_upstreams = strings(&["web"]);
    let p = policy(PolicyDefault::Deny, vec![admins]);
    let ops = p.view(&who("ops-1", &["admin"]));
    assert!(ops.allows(Kind::Upstream, "web"));
    assert!(!ops.allows(Kind::Upstream, "demo"));
    assert!(ops.allows_in("web", Kind::Tool, "web__fetch"));
    // Without the scope no rule matches: the default (deny).
    let plain = p.view(&who("ops-1", &["read"]));
    assert!(!plain.allows(Kind::Upstream, "web"));
    assert!(!plain.allows(Kind::Tool, "anything"));
}

#[test]
fn problems_name_their_keys() {
    let mut bad = rule(&[], &[]);
    bad.deny_upstreams = strings(&["nope"]);
    bad.allow_tools = strings(&["bad name", ""]);
    bad.deny_resources = strings(&[""]);
    let config = PolicyConfig {
        default: PolicyDefault::Allow,
        rules: vec![rule(&["ok"], &[]), bad],
        ..PolicyConfig::default()
    };
    let problems = config.problems(&["demo"]);
    assert_eq!(problems.len(), 5, "{problems:#?}");
    assert!(problems[0].starts_with("policy.rules[1] names neither"));
    assert!(problems[1].starts_with("policy.rules[1].deny_resources holds an empty string"));
    assert!(problems[2].starts_with("policy.rules[1].allow_tools `bad name`"));
    assert!(problems[4].contains("policy.rules[1].deny_upstreams names `nope`"));
    assert!(problems[4].contains("known: demo"));
    assert!(Policy::new(config, &["demo"]).is_err());
}

#[test]
fn refusals_have_the_unknown_shape() {
    let e = unknown_tool("add");
    assert_eq!((e.code, e.message.as_str()), (-32602, "unknown tool: add"));
    assert_eq!(e.data, Some(json!({"name": "add"})));
    assert_eq!(unknown_prompt("p").message, "unknown prompt: p");
    let r = resource_not_found("demo://x");
    assert_eq!((r.code, r.data), (-32002, Some(json!({"uri": "demo://x"}))));
}

/// Step-up (issue 35, case C40): an item hidden only for want of a scope names the scopes of the
/// rule that would show it; one a deny list hides, or nobody has, names none; a method of
/// `[policy.methods]` needs one of its scopes.
#[test]
fn a_scope_that_would_show_an_item_is_named_and_a_denial_stays_unknown() {
    let mut everyone = rule(&["*"], &[]);
    everyone.allow_tools = strings(&["echo"]);
    let mut writers = rule(&[], &["calc:write"]);
    writers.allow_tools = strings(&["add"]);
    let mut bob = rule(&["bob"], &[]);
    bob.deny_tools = strings(&["add"]);
    let mut config = PolicyConfig {
        rules: vec![everyone, writers, bob],
        ..PolicyConfig::default()
    };
    config
        .methods
        .insert("resources/read".into(), strings(&["files:read"]));
    let p = Policy::new(config, &["demo"]).expect("valid policy");
    let call = |name: &str| serde_json::json!({"name": name});
    let alice = who("alice", &["mcp:tools"]);
    assert_eq!(
        p.lacking_scopes(&alice, "tools/call", &call("add")),
        Some(strings(&["calc:write"]))
    );
    assert_eq!(p.lacking_scopes(&alice, "tools/call", &call("echo")), None);
    assert_eq!(
        p.lacking_scopes(&alice, "tools/call", &call("nothing")),
        None
    );
    assert!(
        !p.view(&alice).allows(Kind::Tool, "add"),
        "still hidden from lists"
    );
    let wide = who("alice", &["mcp:tools", "calc:write"]);
    assert_eq!(p.lacking_scopes(&wide, "tools/call", &call("add")), None);
    assert!(p.view(&wide).allows(Kind::Tool, "add"));
    // Denied to bob by name: no scope helps, so it stays unknown to him.
    let bob = who("bob", &["mcp:tools"]);
    assert_eq!(p.lacking_scopes(&bob, "tools/call", &call("add")), None);
    let read = serde_json::json!({"uri": "demo://greeting"});
    assert_eq!(
        p.lacking_scopes(&alice, "resources/read", &read),
        Some(strings(&["files:read"]))
    );
    let reader = who("alice", &["files:read"]);
    assert_eq!(p.lacking_scopes(&reader, "resources/read", &read), None);
    let complete = serde_json::json!({"ref": {"type": "ref/prompt", "name": "add"}});
    assert_eq!(
        p.lacking_scopes(&alice, "completion/complete", &complete),
        None,
        "a prompt, not the tool"
    );
}

/// A scoped rule's `*` pattern gives no step-up: made-up names matching it stay unknown, and so
/// cannot be told apart from a name a deny list hides (break-it finding, issue 35).
#[test]
fn a_pattern_in_a_scoped_rule_gives_no_challenge() {
    let mut everyone = rule(&["*"], &[]);
    everyone.allow_tools = strings(&["echo"]);
    everyone.allow_prompts = strings(&["none"]);
    let mut writers = rule(&[], &["x:write"]);
    writers.allow_tools = strings(&["ad*", "exact"]);
    writers.allow_prompts = strings(&["greet"]);
    let mut bob = rule(&["bob"], &[]);
    bob.deny_tools = strings(&["add"]);
    bob.deny_prompts = strings(&["greet"]);
    let p = policy(PolicyDefault::Allow, vec![everyone, writers, bob]);
    let call = |name: &str| serde_json::json!({"name": name});
    for who_ in [who("alice", &["mcp:tools"]), who("bob", &["mcp:tools"])] {
        for name in ["add", "addnonexistent"] {
            assert_eq!(
                p.lacking_scopes(&who_, "tools/call", &call(name)),
                None,
                "{name}"
            );
        }
    }
    let alice = who("alice", &["mcp:tools"]);
    assert_eq!(
        p.lacking_scopes(&alice, "tools/call", &call("exact")),
        Some(strings(&["x:write"]))
    );
    let greet = serde_json::json!({"ref": {"type": "ref/prompt", "name": "greet"}});
    assert_eq!(
        p.lacking_scopes(&alice, "completion/complete", &greet),
        Some(strings(&["x:write"]))
    );
    assert_eq!(
        p.lacking_scopes(&who("bob", &[]), "completion/complete", &greet),
        None
    );
}
