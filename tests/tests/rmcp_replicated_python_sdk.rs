//! The official Python SDK client (`mcp`, pinned in `tests/python/requirements.txt`, installed
//! into `tests/python/.venv` on first use) against three replicas of switchboard-rmcp's
//! `replicated` example on one private Redis (issue 18), in mode `legacy` (the initialize
//! handshake): `tests/python/rmcp_replicated_scenario.py` addresses the replicas directly
//! through an httpx2 transport: initialize on A, list on B, call on C; a progress call on A whose
//! stream is cut after its first event and resumed by the SDK with `Last-Event-ID` on B; a
//! sampling request from a call on C answered by a POST to A. Its summary is checked as the
//! TypeScript one is (`switchboard_tests::replicated_sdk`), what the client saw of each stream
//! against the stream's log in Redis; then `DELETE` on C ends the session everywhere, with no
//! key left.
//!
//! Needs `python3` with `venv` and `ensurepip`; without them the test prints that it skipped,
//! or fails when `CI` is set.

use std::process::Command;
use std::time::Duration;

use switchboard_tests::peers::{self, available_or_skip, on_path, run_bounded};
use switchboard_tests::replicated::{Options, Replicas};
use switchboard_tests::replicated_sdk::{check_summary, end_session};

const SCRIPT_LIMIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_across_three_replicas_resumes_a_dropped_call_and_answers_sampling_elsewhere(
) {
    let tools = [
        ("python3", on_path("python3")),
        ("python3 venv + ensurepip", peers::python_can_make_venv()),
    ];
    if !available_or_skip("rmcp_replicated_python_sdk", &tools) {
        return;
    }
    let python = peers::ensure_python_venv();
    let replicas = Replicas::replicated(3, &Options::default());
    let mut cmd = Command::new(python);
    cmd.current_dir(peers::python_dir())
        .arg("rmcp_replicated_scenario.py")
        .args(replicas.urls());
    let out = run_bounded(&mut cmd, SCRIPT_LIMIT, "python rmcp_replicated_scenario.py");
    let summary = out.json_summary("rmcp_replicated_scenario.py");
    assert!(
        out.status.success(),
        "the Python SDK scenario failed ({}): {summary:#}\nstderr:\n{}",
        out.status,
        out.stderr
    );
    let sid = check_summary(&replicas, &summary, "sampled by the Python SDK");
    end_session(&replicas, &sid).await;
}
