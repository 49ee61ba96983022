//! Issue 35, tested in a real browser: a page served on another origin runs the official
//! TypeScript SDK client (`@modelcontextprotocol/sdk`, bundled from the pinned npm package by
//! esbuild, `tests/browser`) in Debian's headless Chromium against two nodes sharing Redis, with
//! authorization on: connect, list, call, a streamed call with progress, the same session on the
//! other node, errors the page can read (an unknown session's 404 with its JSON-RPC body, a tool
//! error), a step-up (a call the token's scopes do not allow gets 403 with the
//! `insufficient_scope` challenge, then succeeds on the other node with a wider token), and
//! DELETE. A second page, on an origin the nodes do not allow, cannot call them at all.
//!
//! The page's origin is `http://app.example.test:<port>` (listed in `http.allowed_origins`), the
//! foreign one `http://evil.example.test:<port>`; Chromium maps both names to 127.0.0.1.
//!
//! Needs `node`, `npm` and `chromium` (else SKIPPED, or a failure under `CI`); `npm ci` runs in
//! `tests/browser` when `node_modules` is missing.

use std::process::Command;
use std::time::Duration;

use jsonwebtoken::get_current_timestamp;
use serde_json::json;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::inspector::chromium_binary;
use switchboard_tests::peers::{
    available_or_skip, browser_dir, ensure_browser_deps, on_path, run_bounded,
};
use switchboard_tests::ports::free_port;
use switchboard_tests::temp::TempDir;

const GW: &str = "https://gw.example.test/mcp";
const ISSUER: &str = "https://as.example.test";
const SECRET: &str = "browser-test-secret-0123456789abcdef";
const LIMIT: Duration = Duration::from_secs(120);

fn token(scope: &str) -> String {
    let claims = json!({
        "iss": ISSUER, "sub": "page-user", "aud": GW, "scope": scope,
        "exp": get_current_timestamp() as i64 + 600,
    });
    switchboard_tests::jwt::hs256(SECRET, &claims)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_another_origin_runs_the_typescript_sdk_against_two_nodes() {
    let chromium = chromium_binary();
    let tools = [
        ("node", on_path("node")),
        ("npm", on_path("npm")),
        ("chromium", chromium.is_some()),
    ];
    if !available_or_skip("browser_client", &tools) {
        return;
    }
    ensure_browser_deps();
    let dir = TempDir::new("sb-browser");
    let config_path = dir.path().join("switchboard.toml");
    std::fs::write(&config_path, POLICY).expect("write switchboard.toml");
    let allowed = format!("http://app.example.test:{}", free_port());
    let foreign = format!("http://evil.example.test:{}", free_port());
    let cluster = Cluster::start(
        2,
        ClusterOptions::new()
            .config_file(&config_path)
            .set("http.allowed_origins", &allowed)
            .set("auth.resource_url", GW)
            .set("auth.authorization_servers", ISSUER)
            .set("auth.scopes_supported", "mcp:tools,calc:write")
            .set("auth.issuer", ISSUER)
            .set("auth.jwt_hs256_secrets", SECRET),
    );
    let config = json!({
        "nodeA": cluster.url(0),
        "nodeB": cluster.url(1),
        "token": token("mcp:tools"),
        "wideToken": token("mcp:tools calc:write"),
        "allowedOrigin": allowed,
        "foreignOrigin": foreign,
    });
    let mut node = Command::new("node");
    node.current_dir(browser_dir())
        .env("CHROMIUM", chromium.expect("checked above"))
        .env("NO_PROXY", "*")
        .arg("drive.mjs")
        .arg(config.to_string());
    let out = tokio::task::spawn_blocking(move || run_bounded(&mut node, LIMIT, "node drive.mjs"))
        .await
        .expect("the browser runner");
    let summary = out.json_summary("drive.mjs");
    let show = format!("{summary:#}\nstderr:\n{}", out.stderr);
    assert!(summary["ok"] == true, "the pages did not run: {show}");
    let page = &summary["page"];

    let connect = &page["connect"];
    assert!(
        connect["sessionId"].is_string(),
        "the session id is readable: {show}"
    );
    assert_eq!(connect["protocolVersion"], "2025-11-25", "{show}");
    let listed = page["list"].as_array().expect("tools listed");
    assert!(listed.contains(&json!("echo")), "{show}");
    assert!(
        !listed.contains(&json!("add")),
        "add needs calc:write: {show}"
    );
    assert_eq!(page["call"], "from the page", "{show}");
    assert_eq!(page["progress"]["text"], "countdown finished", "{show}");
    assert_eq!(page["progress"]["progress"], json!([1, 2, 3]), "{show}");
    assert_eq!(
        page["otherNode"],
        json!({"status": 200, "text": "on node B"}),
        "{show}"
    );
    let unknown = &page["unknownSession"];
    assert_eq!(unknown["status"], 404, "{show}");
    assert_eq!(unknown["body"]["error"]["code"], -32001, "{show}");
    assert!(
        page["toolError"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("no_such_tool")),
        "{show}"
    );

    let step_up = &page["stepUp"];
    assert_eq!(step_up["first"]["status"], 403, "{show}");
    let challenge = step_up["first"]["challenge"].as_str().unwrap_or_default();
    assert!(
        challenge.contains(r#"error="insufficient_scope""#) && challenge.contains("calc:write"),
        "{show}"
    );
    assert_eq!(step_up["first"]["body"]["id"], "s1", "{show}");
    assert_eq!(step_up["retried"]["status"], 200, "{show}");
    assert_eq!(
        step_up["retried"]["body"]["result"]["structuredContent"]["sum"], 3,
        "{show}"
    );
    assert_eq!(page["delete"]["sessionId"], json!(null), "{show}");

    let blocked = summary["foreign"]["error"].as_str().unwrap_or_default();
    assert!(
        blocked.contains("Failed to fetch"),
        "the foreign page is blocked: {show}"
    );
    assert!(
        cluster.session_ids_in_redis().is_empty(),
        "DELETE ended the session"
    );
}

/// Every principal gets the demo's tools but `add`, which needs scope `calc:write`.
const POLICY: &str = r#"
[[policy.rules]]
principals = ["*"]
allow_tools = ["echo", "countdown", "notify", "sample", "elicit", "list_roots", "regional_echo"]

[[policy.rules]]
scopes = ["calc:write"]
allow_tools = ["add"]
"#;
