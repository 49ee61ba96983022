//! The official conformance suite (`@modelcontextprotocol/conformance` 0.1.16, `--suite all`)
//! against switchboard-rmcp's example servers as real processes (issue 18, library mode):
//!
//! - three replicas of `replicated` sharing one private Redis, behind HAProxy (round robin per
//!   request, no stickiness): every check passes;
//! - the negative control: three `plain` servers (the same handler on rmcp's own in-memory
//!   `LocalSessionManager`) behind the same balancer fail every one of the 31 scenarios that
//!   use a session, each with the 404 "Session not found" of a server that did not make the
//!   session; only `dns-rebinding-protection` (no session) passes. One plain server alone passes
//!   every check, so the failure is the missing shared state, not the handler.
//!
//! Needs `node`, `npm` and `haproxy`; without them each test prints that it skipped, or fails
//! when `CI` is set.

use switchboard_tests::balancer::Balancer;
use switchboard_tests::conformance_suite::{assert_all_green, ready, run_suite, Scenario};
use switchboard_tests::replicated::{Options, Replicas};

/// The scenarios of `--suite all` (0.1.16) that initialize a session and use it afterwards: the
/// request after `initialize` (`notifications/initialized`) goes to the next server.
const NEED_A_SESSION: [&str; 31] = [
    "completion-complete",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "json-schema-2020-12",
    "logging-set-level",
    "ping",
    "prompts-get-embedded-resource",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-with-image",
    "prompts-list",
    "resources-list",
    "resources-read-binary",
    "resources-read-text",
    "resources-subscribe",
    "resources-templates-read",
    "resources-unsubscribe",
    "server-initialize",
    "server-sse-multiple-streams",
    "server-sse-polling",
    "tools-call-audio",
    "tools-call-elicitation",
    "tools-call-embedded-resource",
    "tools-call-error",
    "tools-call-image",
    "tools-call-mixed-content",
    "tools-call-sampling",
    "tools-call-simple-text",
    "tools-call-with-logging",
    "tools-call-with-progress",
    "tools-list",
];
/// The one scenario without a session (it checks `Host` validation only).
const SESSIONLESS: &str = "dns-rebinding-protection";
/// What rmcp answers (HTTP 404) for a session id the process does not hold, as the suite's
/// client reports it.
const NOT_FOUND: &str = "Session not found";

fn scenario<'a>(scenarios: &'a [Scenario], name: &str, report: &str) -> &'a Scenario {
    scenarios
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no result for scenario {name}\n{report}"))
}

#[test]
fn conformance_suite_all_green_through_three_replicated_rmcp_replicas() {
    if !ready("rmcp_replicated_conformance", true) {
        return;
    }
    let replicas = Replicas::replicated(3, &Options::default());
    let lb = Balancer::start(&replicas.ports());
    let (scenarios, report) = run_suite(&lb.url());
    assert_all_green("3 replicated rmcp replicas", &scenarios, &report);
    for name in NEED_A_SESSION.iter().chain([&SESSIONLESS]) {
        let s = scenario(&scenarios, name, &report);
        assert!(
            !s.with_status("SUCCESS").is_empty(),
            "{name}: no check passed\n{report}"
        );
    }
}

#[test]
fn conformance_suite_fails_through_three_plain_rmcp_servers_but_passes_against_one() {
    if !ready("rmcp_plain_conformance", true) {
        return;
    }
    let plain = Replicas::plain(3);

    // One plain server alone: the handler is conformant.
    let (alone, report) = run_suite(&plain.url(0));
    assert_all_green("1 plain rmcp server", &alone, &report);

    // Three behind round robin: every session-using scenario fails, on a 404 for its session.
    let lb = Balancer::start(&plain.ports());
    let (spread, report) = run_suite(&lb.url());
    let mut names: Vec<&str> = spread.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    let mut expected: Vec<&str> = NEED_A_SESSION
        .iter()
        .copied()
        .chain([SESSIONLESS])
        .collect();
    expected.sort_unstable();
    assert_eq!(names, expected, "the scenarios of --suite all\n{report}");
    for name in NEED_A_SESSION {
        let s = scenario(&spread, name, &report);
        let failed = s.with_status("FAILURE");
        assert!(
            !failed.is_empty(),
            "{name} passed through 3 plain rmcp servers: {:?}\n{report}",
            s.checks
        );
        for check in failed {
            let why = check["errorMessage"].as_str().unwrap_or_default();
            assert!(
                why.contains(NOT_FOUND),
                "{name}: failed for another reason than a session unknown to the server: {check}"
            );
        }
    }
    let s = scenario(&spread, SESSIONLESS, &report);
    assert!(
        s.with_status("FAILURE").is_empty() && !s.with_status("SUCCESS").is_empty(),
        "{SESSIONLESS} needs no session and should pass: {:?}",
        s.checks
    );
}
