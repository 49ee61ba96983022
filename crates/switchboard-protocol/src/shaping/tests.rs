//! One test per row of `docs/revisions.md` ([`super::rows`]), each in both directions: the
//! construct reaches a client of an older revision converted or dropped, and a client of its own
//! revision or a newer one unchanged.

use serde_json::{json, Value};

use super::rows::{self, Row};
use super::{initialize_result, result, server_message, Outgoing};
use crate::revision::Revision;

/// The session-era revisions that lack `row`, and those that have it.
fn split(row: &Row) -> (Vec<Revision>, Vec<Revision>) {
    Revision::ALL.into_iter().partition(|r| row.lacks(*r))
}

/// `shape` applied to `sample` for every revision: unchanged from `row.since` on; for each older
/// one, `older` checks what came out. Both sides must be non-empty.
fn both_ways(
    row: &Row,
    sample: Value,
    shape: impl Fn(Revision, &mut Value),
    older: impl Fn(Revision, &Value),
) {
    let (lacking, having) = split(row);
    assert!(!lacking.is_empty() && !having.is_empty(), "row {}", row.id);
    for r in having {
        let mut v = sample.clone();
        shape(r, &mut v);
        assert_eq!(v, sample, "row {} must pass unchanged to {r}", row.id);
    }
    for r in lacking {
        let mut v = sample.clone();
        shape(r, &mut v);
        assert_ne!(v, sample, "row {} must change for {r}", row.id);
        older(r, &v);
    }
}

fn call(content: Value) -> Value {
    json!({"content": content, "isError": false})
}

fn tools_call(r: Revision, v: &mut Value) {
    result(r, "tools/call", v);
}

fn tools_list(r: Revision, v: &mut Value) {
    result(r, "tools/list", v);
}

fn initialize(r: Revision, v: &mut Value) {
    initialize_result(r, v);
}

#[test]
fn resource_link() {
    let link = json!({"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt",
        "description": "the file", "mimeType": "text/plain"});
    let sample = call(json!([{"type": "text", "text": "hi"}, link]));
    both_ways(&rows::RESOURCE_LINK, sample, tools_call, |_, v| {
        let block = &v["content"][1];
        assert_eq!(block["type"], "text");
        let text = block["text"].as_str().unwrap();
        assert!(
            text.contains("file:///a.txt") && text.contains("a.txt") && text.contains("the file")
        );
    });
    // In a prompt message too.
    let mut prompt = json!({"messages": [{"role": "user", "content": link}]});
    result(Revision::V2025_03_26, "prompts/get", &mut prompt);
    assert_eq!(prompt["messages"][0]["content"]["type"], "text");
}

#[test]
fn audio() {
    let sample = call(json!([{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]));
    both_ways(&rows::AUDIO, sample, tools_call, |_, v| {
        assert_eq!(v["content"][0]["type"], "text");
        assert!(v["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("audio/wav"));
        assert!(v["content"][0].get("data").is_none());
    });
    // In a sampling request too.
    let mut sampling = json!({"method": "sampling/createMessage", "params": {"maxTokens": 5,
        "messages": [{"role": "user", "content": {"type": "audio", "data": "A", "mimeType": "audio/wav"}}]}});
    assert_eq!(
        server_message(Revision::V2024_11_05, &mut sampling),
        Outgoing::Send
    );
    assert_eq!(sampling["params"]["messages"][0]["content"]["type"], "text");
}

#[test]
fn content_meta() {
    let sample = call(json!([{"type": "text", "text": "hi", "_meta": {"k": 1}},
        {"type": "resource", "resource": {"uri": "x:a", "text": "t", "_meta": {"k": 2}}}]));
    both_ways(&rows::CONTENT_META, sample, tools_call, |_, v| {
        assert!(v["content"][0].get("_meta").is_none());
        assert!(v["content"][1]["resource"].get("_meta").is_none());
        assert_eq!(v["content"][1]["resource"]["text"], "t");
    });
    let read = json!({"contents": [{"uri": "x:a", "text": "t", "_meta": {"k": 2}}]});
    both_ways(
        &rows::CONTENT_META,
        read,
        |r, v| result(r, "resources/read", v),
        |_, v| {
            assert_eq!(v["contents"][0], json!({"uri": "x:a", "text": "t"}));
        },
    );
}

#[test]
fn annotations_last_modified() {
    let ann =
        json!({"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-01T00:00:00Z"});
    let sample = call(json!([{"type": "text", "text": "hi", "annotations": ann}]));
    both_ways(&rows::LAST_MODIFIED, sample, tools_call, |_, v| {
        assert_eq!(
            v["content"][0]["annotations"],
            json!({"audience": ["user"], "priority": 0.5})
        );
    });
    let list = json!({"resources": [{"uri": "x:a", "name": "a", "annotations": {"lastModified": "2025-01-01T00:00:00Z"}}]});
    both_ways(
        &rows::LAST_MODIFIED,
        list,
        |r, v| result(r, "resources/list", v),
        |_, v| {
            assert!(v["resources"][0].get("annotations").is_none());
        },
    );
}

#[test]
fn structured_content() {
    let sample =
        json!({"content": [{"type": "text", "text": "{\"n\":1}"}], "structuredContent": {"n": 1}});
    both_ways(&rows::STRUCTURED_CONTENT, sample, tools_call, |_, v| {
        assert!(v.get("structuredContent").is_none());
        assert_eq!(v["content"], json!([{"type": "text", "text": "{\"n\":1}"}]));
    });
    // No text form in `content`: the JSON becomes one.
    let bare = json!({"content": [], "structuredContent": {"n": 1}});
    both_ways(&rows::STRUCTURED_CONTENT, bare, tools_call, |_, v| {
        assert_eq!(v["content"], json!([{"type": "text", "text": "{\"n\":1}"}]));
    });
}

#[test]
fn tool_title() {
    let sample =
        json!({"tools": [{"name": "t", "title": "The T", "inputSchema": {"type": "object"}}]});
    both_ways(&rows::TOOL_TITLE, sample, tools_list, |r, v| {
        let tool = &v["tools"][0];
        assert!(tool.get("title").is_none());
        match r {
            Revision::V2025_03_26 => assert_eq!(tool["annotations"]["title"], "The T"),
            _ => assert!(tool.get("annotations").is_none()),
        }
    });
    // An `annotations.title` already there wins.
    let mut set = json!({"tools": [{"name": "t", "title": "A", "annotations": {"title": "B"}, "inputSchema": {"type": "object"}}]});
    tools_list(Revision::V2025_03_26, &mut set);
    assert_eq!(set["tools"][0]["annotations"], json!({"title": "B"}));
}

#[test]
fn output_schema() {
    let sample = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"n": {"type": "number"}}}}]});
    both_ways(&rows::OUTPUT_SCHEMA, sample, tools_list, |_, v| {
        assert_eq!(
            v["tools"][0],
            json!({"name": "t", "inputSchema": {"type": "object"}})
        );
    });
}

#[test]
fn tool_annotations() {
    let sample = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}]});
    both_ways(&rows::TOOL_ANNOTATIONS, sample, tools_list, |_, v| {
        assert!(v["tools"][0].get("annotations").is_none());
    });
}

#[test]
fn item_title() {
    let prompts = json!({"prompts": [{"name": "p", "title": "P", "arguments": [{"name": "a", "title": "A"}]}]});
    both_ways(
        &rows::ITEM_TITLE,
        prompts,
        |r, v| result(r, "prompts/list", v),
        |_, v| {
            assert_eq!(
                v["prompts"][0],
                json!({"name": "p", "arguments": [{"name": "a"}]})
            );
        },
    );
    let templates =
        json!({"resourceTemplates": [{"uriTemplate": "x:{a}", "name": "x", "title": "X"}]});
    both_ways(
        &rows::ITEM_TITLE,
        templates,
        |r, v| result(r, "resources/templates/list", v),
        |_, v| {
            assert_eq!(
                v["resourceTemplates"][0],
                json!({"uriTemplate": "x:{a}", "name": "x"})
            );
        },
    );
}

#[test]
fn item_meta() {
    let sample = json!({"resources": [{"uri": "x:a", "name": "a", "_meta": {"k": 1}}]});
    both_ways(
        &rows::ITEM_META,
        sample,
        |r, v| result(r, "resources/list", v),
        |_, v| {
            assert_eq!(v["resources"][0], json!({"uri": "x:a", "name": "a"}));
        },
    );
    let tools =
        json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "_meta": {"k": 1}}]});
    both_ways(&rows::ITEM_META, tools, tools_list, |_, v| {
        assert!(v["tools"][0].get("_meta").is_none())
    });
}

#[test]
fn icons() {
    let icons = json!([{"src": "https://example.com/i.png"}]);
    let sample =
        json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "icons": icons}]});
    both_ways(&rows::ICONS, sample, tools_list, |_, v| {
        assert!(v["tools"][0].get("icons").is_none())
    });
    let init = json!({"protocolVersion": "x", "capabilities": {}, "serverInfo": {"name": "s", "version": "1", "icons": icons}});
    both_ways(&rows::ICONS, init, initialize, |_, v| {
        assert_eq!(v["serverInfo"], json!({"name": "s", "version": "1"}));
    });
}

#[test]
fn tool_execution() {
    let sample = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}]});
    both_ways(&rows::TOOL_EXECUTION, sample, tools_list, |_, v| {
        assert!(v["tools"][0].get("execution").is_none());
    });
}

#[test]
fn server_info_title() {
    let sample = json!({"protocolVersion": "x", "capabilities": {}, "serverInfo": {"name": "s", "title": "S", "version": "1"}});
    both_ways(&rows::SERVER_TITLE, sample, initialize, |_, v| {
        assert_eq!(v["serverInfo"], json!({"name": "s", "version": "1"}));
    });
}

#[test]
fn server_info_details() {
    let sample = json!({"protocolVersion": "x", "capabilities": {}, "instructions": "use it",
        "serverInfo": {"name": "s", "version": "1", "description": "d", "websiteUrl": "https://example.com"}});
    both_ways(&rows::SERVER_DETAILS, sample, initialize, |_, v| {
        assert_eq!(v["serverInfo"], json!({"name": "s", "version": "1"}));
        // `instructions` is in every revision (2024-11-05 InitializeResult included).
        assert_eq!(v["instructions"], "use it");
    });
}

#[test]
fn capability_completions() {
    let sample = json!({"protocolVersion": "x", "capabilities": {"completions": {}, "tools": {}}, "serverInfo": {"name": "s", "version": "1"}});
    both_ways(&rows::CAP_COMPLETIONS, sample, initialize, |_, v| {
        assert_eq!(v["capabilities"], json!({"tools": {}}));
    });
}

#[test]
fn capability_tasks() {
    let sample = json!({"protocolVersion": "x", "capabilities": {"tasks": {"list": {}}, "tools": {}}, "serverInfo": {"name": "s", "version": "1"}});
    both_ways(&rows::CAP_TASKS, sample, initialize, |_, v| {
        assert_eq!(v["capabilities"], json!({"tools": {}}));
    });
}

/// A server message shaped as [`server_message`] does, `Undefined` recorded in the value so
/// that [`both_ways`] can compare.
fn outgoing(r: Revision, v: &mut Value) {
    if let Outgoing::Undefined(since) = server_message(r, v) {
        *v = json!({"undefined_before": since.as_str()});
    }
}

#[test]
fn elicitation_create() {
    let sample = json!({"jsonrpc": "2.0", "id": "s-1", "method": "elicitation/create",
        "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}});
    both_ways(&rows::ELICITATION, sample, outgoing, |_, v| {
        assert_eq!(v["undefined_before"], "2025-06-18");
    });
}

#[test]
fn elicitation_url() {
    let url = json!({"jsonrpc": "2.0", "id": "s-2", "method": "elicitation/create",
        "params": {"mode": "url", "elicitationId": "el-1", "url": "https://example.test/auth",
                   "message": "open this"}});
    both_ways(&rows::ELICITATION_URL, url, outgoing, |_, v| {
        assert_eq!(v["undefined_before"], "2025-11-25");
    });
    // Form mode named explicitly: 2025-06-18 gets it without `mode`.
    let form = json!({"jsonrpc": "2.0", "id": "s-3", "method": "elicitation/create",
        "params": {"mode": "form", "message": "name?", "requestedSchema": {"type": "object"}}});
    let mut v = form.clone();
    outgoing(Revision::V2025_06_18, &mut v);
    assert_eq!(
        v["params"],
        json!({"message": "name?", "requestedSchema": {"type": "object"}})
    );
    let mut v = form.clone();
    outgoing(Revision::V2025_11_25, &mut v);
    assert_eq!(v, form);
}

#[test]
fn sampling_2025_11_25() {
    let text = |t: &str| json!({"type": "text", "text": t});
    let request = |content: Value, extra: Value| {
        let mut params =
            json!({"messages": [{"role": "user", "content": content}], "maxTokens": 9});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"jsonrpc": "2.0", "id": "s-4", "method": "sampling/createMessage", "params": params})
    };
    for refused in [
        request(json!([text("a"), text("b")]), json!({})),
        request(
            text("a"),
            json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}),
        ),
        request(text("a"), json!({"toolChoice": {"mode": "auto"}})),
    ] {
        both_ways(&rows::SAMPLING_2025_11_25, refused, outgoing, |_, v| {
            assert_eq!(v["undefined_before"], "2025-11-25");
        });
    }
    // One block in an array: older clients get the block itself.
    let one = request(json!([text("a")]), json!({}));
    both_ways(&rows::SAMPLING_2025_11_25, one, outgoing, |_, v| {
        assert_eq!(v["params"]["messages"][0]["content"], text("a"));
    });
}

#[test]
fn progress_message() {
    let sample = json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 1, "total": 2, "message": "half"}});
    both_ways(&rows::PROGRESS_MESSAGE, sample, outgoing, |_, v| {
        assert_eq!(
            v["params"],
            json!({"progressToken": 1, "progress": 1, "total": 2})
        );
    });
}

#[test]
fn notifications_2025_11_25() {
    for method in [
        "notifications/elicitation/complete",
        "notifications/tasks/status",
    ] {
        let sample = json!({"jsonrpc": "2.0", "method": method, "params": {}});
        both_ways(&rows::NEW_NOTIFICATIONS, sample, outgoing, |_, v| {
            assert_eq!(v["undefined_before"], "2025-11-25");
        });
    }
}

#[test]
fn the_newest_client_and_other_methods_are_left_alone() {
    assert!(rows::ALL.iter().all(|row| row.since <= Revision::LATEST));
    let mut v = json!({"content": [{"type": "resource_link", "uri": "x:a", "name": "a"}], "structuredContent": {}});
    let before = v.clone();
    result(Revision::LATEST, "tools/call", &mut v);
    result(Revision::V2024_11_05, "completion/complete", &mut v);
    assert_eq!(v, before);
    let mut ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(
        server_message(Revision::V2024_11_05, &mut ping),
        Outgoing::Send
    );
}

/// `docs/revisions.md` and [`rows::ALL`] name the same rows in the same order, each with its
/// revision, and each row has a test above (its id is a test's name).
#[test]
fn the_docs_table_is_the_rows() {
    let page = include_str!("../../../../docs/revisions.md");
    let documented: Vec<(String, String)> = page
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].trim_matches('`').to_owned(), cells[3].to_owned())
        })
        .collect();
    let coded: Vec<(String, String)> = rows::ALL
        .iter()
        .map(|r| (r.id.to_owned(), r.since.as_str().to_owned()))
        .collect();
    assert_eq!(documented, coded);
    let this = include_str!("tests.rs");
    for row in rows::ALL {
        assert!(
            this.contains(&format!("fn {}()", row.id)),
            "no test for row {}",
            row.id
        );
    }
}
