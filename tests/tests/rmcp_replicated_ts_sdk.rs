//! The official TypeScript SDK client (`@modelcontextprotocol/sdk`, pinned in `tests/ts`) against
//! three replicas of switchboard-rmcp's `replicated` example on one private Redis (issue 18):
//! `tests/ts/rmcp_replicated_scenario.mjs` addresses the replicas directly, one request each
//! where the test says: initialize on A, list on B, call on C; a progress call on A whose stream
//! is cut after its first event and resumed by the SDK with `Last-Event-ID` on B; a sampling
//! request from a call on C answered by a POST to A. Its summary is checked request by request
//! (`switchboard_tests::replicated_sdk`), what the client saw of each stream against the stream's
//! log in Redis; then `DELETE` on C ends the session everywhere, with no key left.
//!
//! Needs `node` and `npm` (`npm ci` runs first when `tests/ts/node_modules` is missing); without
//! them the test prints that it skipped, or fails when `CI` is set.

use std::process::Command;
use std::time::Duration;

use switchboard_tests::peers::{available_or_skip, ensure_ts_sdk, on_path, run_bounded, ts_dir};
use switchboard_tests::replicated::{Options, Replicas};
use switchboard_tests::replicated_sdk::{check_summary, end_session};

const SCRIPT_LIMIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ts_sdk_client_across_three_replicas_resumes_a_dropped_call_and_answers_sampling_elsewhere()
{
    let tools = [("node", on_path("node")), ("npm", on_path("npm"))];
    if !available_or_skip("rmcp_replicated_ts_sdk", &tools) {
        return;
    }
    ensure_ts_sdk();
    let replicas = Replicas::replicated(3, &Options::default());
    let mut node = Command::new("node");
    node.current_dir(ts_dir())
        .arg("rmcp_replicated_scenario.mjs")
        .args(replicas.urls());
    let out = run_bounded(&mut node, SCRIPT_LIMIT, "node rmcp_replicated_scenario.mjs");
    let summary = out.json_summary("rmcp_replicated_scenario.mjs");
    assert!(
        out.status.success(),
        "the TS SDK scenario failed ({}): {summary:#}\nstderr:\n{}",
        out.status,
        out.stderr
    );
    let sid = check_summary(&replicas, &summary, "sampled by the TS SDK");
    end_session(&replicas, &sid).await;
}
