//! Building an aggregate, and what it says in `initialize`; methods that go to every member.

use std::sync::Arc;

use serde_json::{json, Value};
use switchboard_protocol::codes;

use super::{aggregate, ask, two_demos, Fake};
use crate::aggregate::{Aggregate, Member};
use crate::upstream::Upstream;

fn member(name: &str, prefix: Option<&str>) -> Member {
    Member {
        name: name.into(),
        prefix: prefix.map(str::to_owned),
        upstream: Arc::new(Fake::new(name)),
    }
}

fn build_error(members: Vec<Member>, separator: &str) -> String {
    match Aggregate::new(members, separator) {
        Ok(_) => panic!("should be refused"),
        Err(e) => e,
    }
}

#[test]
fn bad_configurations_are_refused_with_a_reason() {
    let cases: Vec<(Vec<Member>, &str, &str)> = vec![
        (vec![], "__", "at least one"),
        (
            vec![member("a", None), member("a", None)],
            "__",
            "`a` is used twice",
        ),
        (vec![member("a b", None)], "__", "upstream name `a b`"),
        (vec![member("a", Some("a"))], "", "tool separator ``"),
        (vec![member("a", Some("a"))], "/", "tool separator `/`"),
        (vec![member("a", Some("a"))], "::", "tool separator `::`"),
        (
            vec![member("a", Some("we ather"))],
            "__",
            "prefix `we ather`",
        ),
        (vec![member("a", Some("a/b"))], "__", "prefix `a/b`"),
        (vec![member("a", Some(&"x".repeat(126)))], "__", "no room"),
        (
            vec![member("a", Some("a")), member("b", Some("a__b"))],
            "__",
            "overlapping prefixes",
        ),
        (
            vec![member("a", Some("x")), member("b", Some("x"))],
            "__",
            "overlapping prefixes",
        ),
    ];
    for (members, separator, needle) in cases {
        let err = build_error(members, separator);
        assert!(err.contains(needle), "{err:?} should contain {needle:?}");
    }
}

#[test]
fn good_configurations_are_accepted() {
    let ok = [
        (vec![member("a", Some("a")), member("b", Some("ab"))], "__"),
        (vec![member("a", None), member("b", Some(""))], "__"),
        (
            vec![member("a", Some("a.v1")), member("b", Some("b-2"))],
            ".",
        ),
        (vec![member("a", Some(&"x".repeat(125)))], "__"),
    ];
    for (members, separator) in ok {
        assert!(Aggregate::new(members, separator).is_ok(), "{separator}");
    }
}

#[test]
fn capabilities_are_merged() {
    let (agg, _) = aggregate(vec![
        (
            "a",
            Some("a"),
            Fake::new("a").caps(json!({"tools": {"listChanged": false}, "logging": {}})),
        ),
        (
            "b",
            Some("b"),
            Fake::new("b").caps(json!({
                "tools": {"listChanged": true},
                "resources": {"subscribe": true},
                "completions": {},
                "experimental": {"x": {}}
            })),
        ),
        (
            "c",
            Some("c"),
            Fake::new("c").caps(json!({"resources": {"listChanged": false}, "prompts": {}})),
        ),
    ]);
    assert_eq!(
        agg.capabilities(),
        json!({
            "tools": {"listChanged": true},
            "prompts": {},
            "resources": {"subscribe": true, "listChanged": false},
            "logging": {},
            "completions": {}
        })
    );
}

#[test]
fn one_member_keeps_its_capabilities_whole() {
    let caps = json!({"tools": {}, "experimental": {"x": {}}, "tasks": {"list": {}}});
    let (agg, _) = aggregate(vec![("a", Some("a"), Fake::new("a").caps(caps.clone()))]);
    assert_eq!(agg.capabilities(), caps);
}

#[test]
fn server_info_and_instructions() {
    let (agg, _) = aggregate(vec![
        (
            "w",
            Some("weather"),
            Fake::new("w").instructions("Ask about weather."),
        ),
        ("n", None, Fake::new("n")),
        ("f", Some(""), Fake::new("f").instructions("Files.")),
    ]);
    assert_eq!(
        agg.server_info(),
        json!({"name": "switchboard", "version": env!("CARGO_PKG_VERSION")})
    );
    assert_eq!(
        agg.instructions().unwrap(),
        "## w\nIts tools and prompts are named `weather__<name>`.\nAsk about weather.\n\n## f\nFiles."
    );
    let (quiet, _) = aggregate(vec![("n", None, Fake::new("n"))]);
    assert_eq!(quiet.instructions(), None);
    assert_eq!(agg.members().len(), 3);
    assert_eq!(agg.member_list()[0].name, "w");
}

#[tokio::test]
async fn prepare_notify_and_session_end_reach_every_member() {
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a")),
        ("b", None, Fake::new("b")),
    ]);
    agg.prepare().await;
    let session = Arc::new(crate::LocalSession::new("s9", json!({})));
    agg.notify("notifications/roots/list_changed", json!({"k": 1}), session)
        .await;
    agg.session_ended("s9").await;
    for fake in &fakes {
        assert_eq!(
            fake.calls(),
            vec![
                ("(prepare)".to_owned(), Value::Null),
                (
                    "(notify) notifications/roots/list_changed".to_owned(),
                    json!({"k": 1})
                ),
                ("(ended)".to_owned(), json!("s9")),
            ]
        );
    }
}

#[tokio::test]
async fn set_level_goes_to_members_that_log() {
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a")),
        ("b", Some("b"), Fake::new("b").caps(json!({"tools": {}}))),
        ("c", Some("c"), Fake::new("c")),
    ]);
    fakes[2].set_down(true);
    let out = ask(&agg, "logging/setLevel", json!({"level": "debug"})).await;
    assert_eq!(
        out.unwrap(),
        json!({}),
        "a failing member does not fail the call"
    );
    assert_eq!(
        fakes[0].calls(),
        vec![("logging/setLevel".to_owned(), json!({"level": "debug"}))]
    );
    assert_eq!(
        fakes[1].count("logging/setLevel"),
        0,
        "b does not declare logging"
    );
}

#[tokio::test]
async fn other_methods_go_to_a_single_member_only() {
    let (one, _) = aggregate(vec![("a", Some("a"), Fake::new("a"))]);
    let out = ask(&one, "custom/echo", json!({"x": 1})).await.unwrap();
    assert_eq!(out, json!({"from": "a", "params": {"x": 1}}));
    let (two, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a")),
        ("b", None, Fake::new("b")),
    ]);
    let err = ask(&two, "custom/echo", json!({})).await.unwrap_err();
    assert_eq!(err.code, codes::METHOD_NOT_FOUND);
    assert!(err.message.contains("custom/echo"), "{}", err.message);
    assert!(fakes.iter().all(|f| f.calls().is_empty()));
}

#[tokio::test]
async fn two_demo_servers_side_by_side() {
    let agg = two_demos();
    let tools = ask(&agg, "tools/list", json!({})).await.unwrap();
    let names = super::names(&tools, "tools", "name");
    assert!(names.contains(&"a__echo".to_owned()) && names.contains(&"b__echo".to_owned()));
    assert_eq!(names.len(), 16, "{names:?}");
    let out = ask(
        &agg,
        "tools/call",
        json!({"name": "b__add", "arguments": {"a": 2, "b": 3}}),
    )
    .await
    .unwrap();
    assert_eq!(out["structuredContent"], json!({"sum": 5}));
    let greeting = ask(&agg, "resources/read", json!({"uri": "demo://greeting"}))
        .await
        .unwrap();
    assert_eq!(greeting["contents"][0]["uri"], "demo://greeting");
    let resources = ask(&agg, "resources/list", json!({})).await.unwrap();
    assert_eq!(
        resources["resources"].as_array().unwrap().len(),
        2,
        "one per member"
    );
}
