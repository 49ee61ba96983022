//! Routing tools, prompts and completions by name; errors of members that are down.

use serde_json::json;
use switchboard_protocol::codes;

use super::{aggregate, ask, Fake};

fn text(result: &serde_json::Value) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

#[tokio::test]
async fn calls_are_routed_by_prefix_which_is_stripped() {
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a").tools(&["echo"])),
        ("b", Some("b"), Fake::new("b").tools(&["echo"])),
    ]);
    let params = json!({"name": "b__echo", "arguments": {"text": "hi"},
                        "_meta": {"progressToken": "tok"}});
    let out = ask(&agg, "tools/call", params).await.unwrap();
    assert_eq!(text(&out), "b:echo");
    // Everything but the name reaches the member unchanged (the progress token too).
    assert_eq!(
        fakes[1].calls(),
        [(
            "tools/call".to_owned(),
            json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "tok"}})
        )]
    );
    assert!(fakes[0].calls().is_empty());
}

#[tokio::test]
async fn unknown_names_are_invalid_params_naming_them() {
    let (agg, _) = aggregate(vec![
        ("a", Some("a"), Fake::new("a").tools(&["echo"])),
        ("b", Some("b"), Fake::new("b")),
    ]);
    for name in ["nope", "c__echo", "a__", "a_echo"] {
        let err = ask(&agg, "tools/call", json!({"name": name}))
            .await
            .unwrap_err();
        assert_eq!(err.code, codes::INVALID_PARAMS, "{name}");
        assert_eq!(err, crate::policy::unknown_tool(name));
    }
    let err = ask(&agg, "tools/call", json!({"arguments": {}}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::INVALID_PARAMS);
    // A prefixed name the member does not have: the member's own answer.
    let err = ask(&agg, "tools/call", json!({"name": "a__other"}))
        .await
        .unwrap_err();
    assert_eq!(err.message, "unknown: other");
    let err = ask(&agg, "prompts/get", json!({"name": "zzz"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("unknown prompt: zzz"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_single_unprefixed_member_owns_every_other_name() {
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a").tools(&["echo"])),
        (
            "plain",
            Some(""),
            Fake::new("plain").tools(&["search", "a_b"]),
        ),
    ]);
    let out = ask(&agg, "tools/call", json!({"name": "search"}))
        .await
        .unwrap();
    assert_eq!(text(&out), "plain:search");
    let out = ask(&agg, "tools/call", json!({"name": "a_b"}))
        .await
        .unwrap();
    assert_eq!(text(&out), "plain:a_b");
    assert_eq!(fakes[1].count("tools/list"), 0, "no lookup needed");
}

#[tokio::test]
async fn several_unprefixed_members_are_told_apart_by_their_lists() {
    let (agg, fakes) = aggregate(vec![
        ("x", None, Fake::new("x").tools(&["one", "both"])),
        (
            "y",
            None,
            Fake::new("y").tools(&["two", "both", "late"]).page(1),
        ),
    ]);
    for (name, owner) in [("two", "y"), ("one", "x"), ("both", "x"), ("late", "y")] {
        let out = ask(&agg, "tools/call", json!({"name": name}))
            .await
            .unwrap();
        assert_eq!(text(&out), format!("{owner}:{name}"));
    }
    // One lookup (all of y's pages), then the cache.
    assert_eq!(fakes[0].count("tools/list"), 1);
    assert_eq!(fakes[1].count("tools/list"), 3);
    // A miss looks again, then fails naming the tool.
    let err = ask(&agg, "tools/call", json!({"name": "ghost"}))
        .await
        .unwrap_err();
    assert_eq!(err, crate::policy::unknown_tool("ghost"));
    assert_eq!(fakes[0].count("tools/list"), 2);
}

#[tokio::test]
async fn prompts_and_completions_are_routed_like_tools() {
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a").prompts(&["greet"])),
        (
            "b",
            Some("b"),
            Fake::new("b")
                .prompts(&["greet"])
                .templates(&["b://{id}"], &["b://"]),
        ),
    ]);
    let got = ask(
        &agg,
        "prompts/get",
        json!({"name": "a__greet", "arguments": {"name": "Ada"}}),
    )
    .await
    .unwrap();
    assert_eq!(got["description"], "a:greet");
    assert_eq!(
        fakes[0].calls()[0].1,
        json!({"name": "greet", "arguments": {"name": "Ada"}})
    );

    let prompt_ref = json!({"ref": {"type": "ref/prompt", "name": "b__greet"},
                            "argument": {"name": "name", "value": "A"}});
    let out = ask(&agg, "completion/complete", prompt_ref).await.unwrap();
    assert_eq!(out["completion"]["values"], json!(["b"]));
    let (method, params) = fakes[1].calls().pop().unwrap();
    assert_eq!(method, "completion/complete");
    assert_eq!(
        params["ref"],
        json!({"type": "ref/prompt", "name": "greet"})
    );

    let resource_ref = json!({"ref": {"type": "ref/resource", "uri": "b://{id}"},
                              "argument": {"name": "id", "value": "1"}});
    let out = ask(&agg, "completion/complete", resource_ref)
        .await
        .unwrap();
    assert_eq!(out["completion"]["values"], json!(["b"]));

    for bad in [
        json!({"ref": {"type": "ref/resource", "uri": "zzz://{q}"}, "argument": {}}),
        json!({"ref": {"type": "ref/other"}, "argument": {}}),
        json!({"argument": {}}),
        json!({"ref": {"type": "ref/prompt", "name": "nope"}}),
    ] {
        let err = ask(&agg, "completion/complete", bad.clone())
            .await
            .unwrap_err();
        assert_eq!(err.code, codes::INVALID_PARAMS, "{bad}");
    }
}

#[tokio::test]
async fn a_down_member_is_named_and_the_others_keep_working() {
    let (agg, fakes) = aggregate(vec![
        ("weather", Some("w"), Fake::new("weather").tools(&["now"])),
        ("calc", Some("c"), Fake::new("calc").tools(&["add"])),
    ]);
    fakes[0].set_down(true);
    let err = ask(&agg, "tools/call", json!({"name": "w__now"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
    assert_eq!(
        err.message,
        "upstream `weather` is unavailable: connection refused"
    );
    assert_eq!(err.data, Some(json!({"upstream": "weather"})));
    let out = ask(&agg, "tools/call", json!({"name": "c__add"}))
        .await
        .unwrap();
    assert_eq!(text(&out), "calc:add");
}

#[test]
fn errors_that_already_name_the_member_are_kept() {
    use crate::aggregate::name_error;
    use crate::upstream::RpcError;
    let own = RpcError {
        data: Some(json!({"upstream": "w", "more": 1})),
        ..RpcError::new(
            codes::UPSTREAM_TIMEOUT,
            "upstream `w` did not answer within 5 ms",
        )
    };
    assert_eq!(name_error("w", own.clone()), own);
    let slow = name_error("w", RpcError::new(codes::UPSTREAM_TIMEOUT, "late"));
    assert_eq!(slow.message, "upstream `w` did not answer in time: late");
    let other = RpcError::new(codes::INTERNAL_ERROR, "boom");
    assert_eq!(
        name_error("w", other.clone()),
        other,
        "other errors are the member's own"
    );
}

#[tokio::test]
async fn a_name_two_unprefixed_members_share_is_listed_once_for_its_owner() {
    let (agg, _fakes) = aggregate(vec![
        ("x", None, Fake::new("x").tools(&["one", "both"])),
        ("y", None, Fake::new("y").tools(&["both", "two"])),
    ]);
    let list = ask(&agg, "tools/list", json!({})).await.unwrap();
    let names: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["one", "both", "two"],
        "the shadowed `both` of y is not published"
    );
    let out = ask(&agg, "tools/call", json!({"name": "both"}))
        .await
        .unwrap();
    assert_eq!(
        text(&out),
        "x:both",
        "calls go to the first member that lists it"
    );
}
