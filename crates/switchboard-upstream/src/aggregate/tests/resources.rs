//! Routing by URI: exact URIs, templates, the try-in-order fallback, the cache.

use serde_json::json;
use switchboard_protocol::codes;

use super::{aggregate, ask, Fake};

fn reader(answer: &serde_json::Value) -> &str {
    answer["contents"][0]["text"].as_str().unwrap()
}

#[tokio::test]
async fn exact_uris_go_to_the_member_that_lists_them() {
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a").resources(&["file:///a"])),
        (
            "b",
            Some("b"),
            Fake::new("b").resources(&["file:///b", "file:///c"]),
        ),
    ]);
    let out = ask(&agg, "resources/read", json!({"uri": "file:///b"}))
        .await
        .unwrap();
    assert_eq!(reader(&out), "b");
    assert_eq!(
        out["contents"][0]["uri"], "file:///b",
        "URIs are not rewritten"
    );
    assert_eq!(fakes[0].count("resources/read"), 0, "a was not asked");
    // The lookup filled the cache: the next URI needs no listing.
    let lists = fakes[1].count("resources/list");
    let out = ask(&agg, "resources/read", json!({"uri": "file:///c"}))
        .await
        .unwrap();
    assert_eq!(reader(&out), "b");
    assert_eq!(fakes[1].count("resources/list"), lists);
    // Subscriptions follow the same routes.
    ask(&agg, "resources/subscribe", json!({"uri": "file:///a"}))
        .await
        .unwrap();
    ask(&agg, "resources/unsubscribe", json!({"uri": "file:///a"}))
        .await
        .unwrap();
    assert_eq!(fakes[0].count("resources/subscribe"), 1);
    assert_eq!(fakes[0].count("resources/unsubscribe"), 1);
    assert_eq!(fakes[1].count("resources/subscribe"), 0);
}

#[tokio::test]
async fn templates_route_uris_nobody_lists() {
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a").serves("weather://")),
        (
            "b",
            Some("b"),
            Fake::new("b").templates(&["weather://{city}/now"], &["weather://"]),
        ),
    ]);
    // a could serve it too, but b's template claims it.
    let out = ask(
        &agg,
        "resources/read",
        json!({"uri": "weather://paris/now"}),
    )
    .await
    .unwrap();
    assert_eq!(reader(&out), "b");
    assert_eq!(fakes[0].count("resources/read"), 0);
    // Nothing claims it: members are tried in order.
    let out = ask(&agg, "resources/read", json!({"uri": "weather://x/y/z"}))
        .await
        .unwrap();
    assert_eq!(reader(&out), "a");
}

#[tokio::test]
async fn the_fallback_tries_members_until_one_has_it() {
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a")),
        ("b", Some("b"), Fake::new("b").serves("hidden://")),
    ]);
    let out = ask(&agg, "resources/read", json!({"uri": "hidden://1"}))
        .await
        .unwrap();
    assert_eq!(reader(&out), "b");
    assert_eq!(
        fakes[0].count("resources/read"),
        1,
        "a said not found first"
    );
    // Cached: a is not asked again.
    ask(&agg, "resources/read", json!({"uri": "hidden://1"}))
        .await
        .unwrap();
    assert_eq!(fakes[0].count("resources/read"), 1);
    assert_eq!(fakes[1].count("resources/read"), 2);
}

#[tokio::test]
async fn unknown_uris_are_not_found() {
    let (agg, _) = aggregate(vec![
        ("a", Some("a"), Fake::new("a").resources(&["file:///a"])),
        ("b", Some("b"), Fake::new("b")),
    ]);
    let err = ask(&agg, "resources/read", json!({"uri": "nope://x"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::RESOURCE_NOT_FOUND);
    assert_eq!(err.data, Some(json!({"uri": "nope://x"})));
    let err = ask(&agg, "resources/read", json!({})).await.unwrap_err();
    assert_eq!(err.code, codes::INVALID_PARAMS);
}

#[tokio::test]
async fn a_cached_owner_that_is_down_answers_for_itself() {
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a").serves("moving://")),
        ("b", Some("b"), Fake::new("b").resources(&["moving://1"])),
    ]);
    // b lists it, so b owns it although a could serve it too.
    let out = ask(&agg, "resources/read", json!({"uri": "moving://1"}))
        .await
        .unwrap();
    assert_eq!(reader(&out), "b");
    fakes[1].set_down(true);
    let err = ask(&agg, "resources/read", json!({"uri": "moving://1"}))
        .await
        .unwrap_err();
    assert_eq!(
        err.code,
        codes::UPSTREAM_UNAVAILABLE,
        "the cached owner answers for itself"
    );
    assert!(err.message.contains("`b`"), "{}", err.message);
    // Another URI nobody lists: b is down, a has it.
    let out = ask(&agg, "resources/read", json!({"uri": "moving://2"}))
        .await
        .unwrap();
    assert_eq!(reader(&out), "a");
}

#[tokio::test]
async fn a_down_member_is_reported_when_nobody_else_has_the_uri() {
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a")),
        ("gone", Some("g"), Fake::new("gone")),
    ]);
    fakes[1].set_down(true);
    let err = ask(&agg, "resources/read", json!({"uri": "x://1"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
    assert!(
        err.message.starts_with("upstream `gone` is unavailable"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_cached_owner_that_lost_the_uri_is_forgotten() {
    // The cache says a, but a no longer has it: a is asked once, refuses, is forgotten, and
    // the URI is found again.
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a")),
        ("b", Some("b"), Fake::new("b").serves("m://")),
    ]);
    agg.uris.insert("m://1", 0);
    let out = ask(&agg, "resources/read", json!({"uri": "m://1"}))
        .await
        .unwrap();
    assert_eq!(reader(&out), "b");
    assert_eq!(
        fakes[0].count("resources/read"),
        1,
        "a was asked once, from the cache"
    );
    assert_eq!(agg.uris.get("m://1"), Some(1));
}

#[test]
fn the_uri_cache_is_capped() {
    let cache = crate::aggregate::resources::UriCache::default();
    for i in 0..10_000 {
        cache.insert(&format!("u{i}"), 0);
    }
    assert_eq!(cache.get("u9999"), Some(0));
    cache.insert("one-more", 1);
    assert_eq!(cache.get("u0"), None, "a full cache starts over");
    assert_eq!(cache.get("one-more"), Some(1));
    cache.fill((0..20_000).map(|i| (format!("f{i}"), 0)));
    assert_eq!(cache.map.lock().len(), 10_000);
}
