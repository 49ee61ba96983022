//! Merged lists and their pagination.

use serde_json::{json, Value};
use switchboard_protocol::codes;

use super::{aggregate, ask, names, Fake};
use crate::aggregate::Aggregate;
use crate::upstream::RpcError;

/// Follows `nextCursor` from the first page to the last; every page, in order.
async fn walk(agg: &Aggregate, method: &str) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut params = json!({});
    for _ in 0..50 {
        let page = ask(agg, method, params.clone()).await.unwrap();
        let next = page.get("nextCursor").cloned();
        pages.push(page);
        match next {
            Some(cursor) => params = json!({"cursor": cursor}),
            None => return pages,
        }
    }
    panic!("more than 50 pages");
}

fn all_names(pages: &[Value], key: &str, field: &str) -> Vec<String> {
    pages.iter().flat_map(|p| names(p, key, field)).collect()
}

#[tokio::test]
async fn tools_are_merged_in_member_order_with_prefixes() {
    let (agg, _) = aggregate(vec![
        ("a", Some("a"), Fake::new("a").tools(&["echo", "add"])),
        ("none", None, Fake::new("none").tools(&["plain"])),
        ("b", Some("bee"), Fake::new("b").tools(&["echo"])),
    ]);
    let list = ask(&agg, "tools/list", json!({})).await.unwrap();
    assert_eq!(
        names(&list, "tools", "name"),
        ["a__echo", "a__add", "plain", "bee__echo"]
    );
    assert!(list.get("nextCursor").is_none());
    // Everything but the name is verbatim: schemas and unknown fields.
    assert_eq!(
        list["tools"][3],
        json!({"name": "bee__echo", "inputSchema": {"type": "object", "$defs": {"x": {"const": "echo"}}},
               "x-vendor": {"kept": true}})
    );
}

#[tokio::test]
async fn pagination_walks_every_page_of_every_member() {
    let (agg, fakes) = aggregate(vec![
        (
            "a",
            Some("a"),
            Fake::new("a")
                .tools(&["t1", "t2", "t3", "t4", "t5"])
                .page(2),
        ),
        ("b", Some("b"), Fake::new("b").tools(&["u1"])),
        (
            "c",
            Some("c"),
            Fake::new("c").tools(&["v1", "v2", "v3"]).page(2),
        ),
        ("d", Some("d"), Fake::new("d").tools(&[])),
    ]);
    let pages = walk(&agg, "tools/list").await;
    assert_eq!(
        all_names(&pages, "tools", "name"),
        ["a__t1", "a__t2", "a__t3", "a__t4", "a__t5", "b__u1", "c__v1", "c__v2", "c__v3"]
    );
    // a: 3 pages; its last page is merged with b's and c's first; then c's second page, with d.
    let sizes: Vec<usize> = pages
        .iter()
        .map(|p| p["tools"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [2, 2, 4, 1]);
    // Resuming asks only the cursor's member until it is done.
    assert_eq!(fakes[0].count("tools/list"), 3);
    assert_eq!(
        fakes[1].count("tools/list"),
        2,
        "once at the start, once after a"
    );
    assert_eq!(fakes[2].count("tools/list"), 3);
    assert_eq!(fakes[3].count("tools/list"), 3);
    // Cursors are opaque: not the member's own.
    let first = pages[0]["nextCursor"].as_str().unwrap();
    assert_ne!(first, "p2");
}

#[tokio::test]
async fn resources_and_templates_keep_their_uris() {
    let (agg, _) = aggregate(vec![
        (
            "a",
            Some("a"),
            Fake::new("a")
                .resources(&["file:///x", "file:///y"])
                .page(1),
        ),
        (
            "b",
            Some("b"),
            Fake::new("b").templates(&["w://{city}"], &[]),
        ),
        ("c", Some("c"), Fake::new("c").resources(&["mem://z"])),
    ]);
    let pages = walk(&agg, "resources/list").await;
    assert_eq!(
        all_names(&pages, "resources", "uri"),
        ["file:///x", "file:///y", "mem://z"]
    );
    let templates = ask(&agg, "resources/templates/list", json!({}))
        .await
        .unwrap();
    assert_eq!(
        names(&templates, "resourceTemplates", "uriTemplate"),
        ["w://{city}"]
    );
}

#[tokio::test]
async fn prompts_are_prefixed() {
    let (agg, _) = aggregate(vec![
        ("a", Some("a"), Fake::new("a").prompts(&["greet"])),
        ("b", None, Fake::new("b").prompts(&["greet"])),
    ]);
    let list = ask(&agg, "prompts/list", json!({})).await.unwrap();
    assert_eq!(names(&list, "prompts", "name"), ["a__greet", "greet"]);
}

/// The error of a list that `down` (each failing with the fakes' "connection refused") could not
/// answer.
fn refused(method: &str, down: &[&str]) -> RpcError {
    let causes: Vec<String> = down
        .iter()
        .map(|n| format!("upstream `{n}` is unavailable: connection refused"))
        .collect();
    let errors: Vec<Value> = down
        .iter()
        .zip(&causes)
        .map(|(n, c)| json!({"upstream": n, "code": -32006, "message": c, "data": {"upstream": n}}))
        .collect();
    RpcError {
        code: codes::UPSTREAM_UNAVAILABLE,
        message: format!("{method} cannot be answered in full: {}", causes.join("; ")),
        data: Some(json!({"upstream": down[0], "upstreams": down, "errors": errors})),
    }
}

/// C08: a member that is down fails the list with an error naming it, never a shorter list; once
/// it is back the next list has it (no cool-down); a member that goes down in the middle of a
/// walk fails the page it was due on, instead of being skipped from there on.
#[tokio::test]
async fn a_down_member_fails_the_list_naming_it() {
    let (agg, fakes) = aggregate(vec![
        ("a", Some("a"), Fake::new("a").tools(&["x"])),
        ("b", Some("b"), Fake::new("b").tools(&["y", "z"]).page(1)),
        ("c", Some("c"), Fake::new("c").tools(&["w"])),
    ]);
    fakes[0].set_down(true);
    let err = ask(&agg, "tools/list", json!({})).await.unwrap_err();
    assert_eq!(err, refused("tools/list", &["a"]));
    // Back up: the next list asks it again and has its tools.
    fakes[0].set_down(false);
    let first = ask(&agg, "tools/list", json!({})).await.unwrap();
    assert_eq!(names(&first, "tools", "name"), ["a__x", "b__y"]);
    // b goes down in the middle of the walk: the page it is due on fails, naming it.
    fakes[1].set_down(true);
    let resume = json!({"cursor": first["nextCursor"]});
    let err = ask(&agg, "tools/list", resume.clone()).await.unwrap_err();
    assert_eq!(err, refused("tools/list", &["b"]));
    // b back, c down: b's last page is followed by c's, which fails.
    fakes[1].set_down(false);
    fakes[2].set_down(true);
    let err = ask(&agg, "tools/list", resume.clone()).await.unwrap_err();
    assert_eq!(err, refused("tools/list", &["c"]));
    fakes[2].set_down(false);
    let rest = ask(&agg, "tools/list", resume).await.unwrap();
    assert_eq!(names(&rest, "tools", "name"), ["b__z", "c__w"]);
    assert!(rest.get("nextCursor").is_none());
}

/// C08: every member that failed the page is named, each with its cause, whatever the list; a
/// member after the one whose page ends the answer does not count (it is asked again when the
/// client resumes).
#[tokio::test]
async fn every_failed_member_of_a_page_is_named() {
    let (agg, fakes) = aggregate(vec![
        (
            "a",
            Some("a"),
            Fake::new("a")
                .tools(&["x"])
                .prompts(&["p"])
                .resources(&["r://a"]),
        ),
        ("b", Some("b"), Fake::new("b").tools(&["t1", "t2"]).page(1)),
        (
            "c",
            Some("c"),
            Fake::new("c").tools(&["w"]).templates(&["c://{x}"], &[]),
        ),
    ]);
    fakes[0].set_down(true);
    fakes[2].set_down(true);
    for method in ["prompts/list", "resources/list", "resources/templates/list"] {
        let err = ask(&agg, method, json!({})).await.unwrap_err();
        assert_eq!(err, refused(method, &["a", "c"]), "{method}");
    }
    // b's first tools page ends the answer (it has more), so c is not in it.
    let err = ask(&agg, "tools/list", json!({})).await.unwrap_err();
    assert_eq!(err, refused("tools/list", &["a"]));
    // a up: the first page answers; resuming reaches b's last page and then c, still down.
    fakes[0].set_down(false);
    let first = ask(&agg, "tools/list", json!({})).await.unwrap();
    assert_eq!(names(&first, "tools", "name"), ["a__x", "b__t1"]);
    let resume = json!({"cursor": first["nextCursor"]});
    let err = ask(&agg, "tools/list", resume.clone()).await.unwrap_err();
    assert_eq!(err, refused("tools/list", &["c"]));
    fakes[2].set_down(false);
    let second = ask(&agg, "tools/list", resume).await.unwrap();
    assert_eq!(names(&second, "tools", "name"), ["b__t2", "c__w"]);
}

#[tokio::test]
async fn members_without_the_capability_are_not_asked() {
    let (agg, fakes) = aggregate(vec![
        (
            "a",
            Some("a"),
            Fake::new("a").tools(&["x"]).caps(json!({"tools": {}})),
        ),
        (
            "b",
            Some("b"),
            Fake::new("b").prompts(&["p"]).caps(json!({"prompts": {}})),
        ),
    ]);
    let tools = ask(&agg, "tools/list", json!({})).await.unwrap();
    assert_eq!(names(&tools, "tools", "name"), ["a__x"]);
    assert_eq!(fakes[1].count("tools/list"), 0);
    let prompts = ask(&agg, "prompts/list", json!({})).await.unwrap();
    assert_eq!(names(&prompts, "prompts", "name"), ["b__p"]);
    assert_eq!(fakes[0].count("prompts/list"), 0);
}

#[tokio::test]
async fn bad_cursors_are_invalid_params() {
    let (agg, _) = aggregate(vec![(
        "a",
        Some("a"),
        Fake::new("a").tools(&["x", "y"]).page(1),
    )]);
    for cursor in [json!("garbage"), json!(7), json!("eyJtIjo5LCJ1IjoienoifQ")] {
        let err = ask(&agg, "tools/list", json!({"cursor": cursor}))
            .await
            .unwrap_err();
        assert_eq!(err.code, codes::INVALID_PARAMS, "{cursor}");
    }
}

#[tokio::test]
async fn members_get_the_clients_params_with_their_own_cursor() {
    let (agg, fakes) = aggregate(vec![(
        "a",
        Some("a"),
        Fake::new("a").tools(&["x", "y"]).page(1),
    )]);
    let first = ask(&agg, "tools/list", json!({"_meta": {"k": 1}}))
        .await
        .unwrap();
    ask(
        &agg,
        "tools/list",
        json!({"cursor": first["nextCursor"], "_meta": {"k": 2}}),
    )
    .await
    .unwrap();
    let params: Vec<Value> = fakes[0].calls().into_iter().map(|(_, p)| p).collect();
    assert_eq!(
        params,
        [
            json!({"_meta": {"k": 1}}),
            json!({"_meta": {"k": 2}, "cursor": "p1"})
        ]
    );
}

/// Walks `method` until an error; the pages read before it and the error.
async fn walk_to_error(agg: &Aggregate, method: &str) -> (usize, RpcError) {
    let mut params = json!({});
    for pages in 0..20 {
        match ask(agg, method, params.clone()).await {
            Ok(page) => match page.get("nextCursor") {
                Some(cursor) => params = json!({"cursor": cursor}),
                None => panic!("the walk ended without an error after {} pages", pages + 1),
            },
            Err(e) => return (pages, e),
        }
    }
    panic!("no error within 20 pages");
}

/// Case C43: a member whose `nextCursor` is the one it was asked with, or one it gave earlier
/// in the walk, fails the list naming it, after no more pages than it really has.
#[tokio::test]
async fn a_member_whose_cursors_go_round_ends_the_walk_with_an_error_naming_it() {
    for (tools, pages_before) in [
        (&["t1", "t2", "t3"][..], 1),
        (&["t1", "t2", "t3", "t4", "t5"][..], 2),
    ] {
        let (agg, _) = aggregate(vec![
            ("ok", Some("ok"), Fake::new("ok").tools(&["x"])),
            ("a", Some("a"), Fake::new("a").tools(tools).page(2).wraps()),
        ]);
        let (read, e) = walk_to_error(&agg, "tools/list").await;
        assert_eq!(read, pages_before, "{tools:?}");
        assert_eq!(e.code, codes::INTERNAL_ERROR);
        assert!(
            e.message.contains("upstream `a`") && e.message.contains("circle"),
            "{}",
            e.message
        );
        assert_eq!(e.data.as_ref().unwrap()["upstream"], "a");
    }
}

/// A member with more pages than `list_max_pages` fails the list naming it: that many pages are
/// delivered, and the request for the next one gets the error.
#[tokio::test]
async fn a_member_with_more_pages_than_the_bound_fails_the_list() {
    let nine = ["1", "2", "3", "4", "5", "6", "7", "8", "9"];
    let (agg, _) = aggregate(vec![("a", Some("a"), Fake::new("a").tools(&nine).page(2))]);
    let agg = agg.with_max_list_pages(3);
    let (read, e) = walk_to_error(&agg, "tools/list").await;
    assert_eq!(
        read, 3,
        "three pages, then the request for the fourth is refused"
    );
    assert!(e.message.contains("more than 3 pages"), "{}", e.message);
    let (agg, _) = aggregate(vec![("a", Some("a"), Fake::new("a").tools(&nine).page(2))]);
    assert_eq!(
        walk(&agg.with_max_list_pages(5), "tools/list").await.len(),
        5,
        "exactly at the bound"
    );
}
