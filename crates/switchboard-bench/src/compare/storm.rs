//! The resume-storm phase of a comparison: two extra nodes on the private Redis (started with
//! `--set session.max_events_per_stream=20000`), then the `resume-storm` mode in process
//! ([`crate::modes::resume::resume_storm`]): N clients each log E events, drop, and all resume
//! at once on the other node. Once, not per round; bounded by its wait and replay limits.

use std::net::SocketAddr;
use std::time::Duration;

use super::table::{Check, TargetResult, Verdict};
use crate::modes::resume::{resume_storm, ResumeConfig, ResumeReport};

/// How the storm is run.
#[derive(Debug, Clone)]
pub struct StormPlan {
    /// Clients (one session and one `countdown` call each).
    pub clients: usize,
    /// Progress events per call.
    pub events: u64,
    /// The longest wait for every call to finish on the server before the resume.
    pub wait: Duration,
    /// Limit on every request and on each whole replay.
    pub request_timeout: Duration,
}

/// Runs the storm against `urls` (the two storm nodes) sharing `redis`.
pub async fn run(
    urls: Vec<String>,
    redis: SocketAddr,
    plan: &StormPlan,
) -> Result<ResumeReport, String> {
    let cfg = ResumeConfig {
        urls,
        clients: plan.clients,
        events: plan.events,
        redis_url: Some(format!("redis://{redis}")),
        key_prefix: "sb".into(),
        wait: plan.wait,
        request_timeout: plan.request_timeout,
    };
    resume_storm(cfg).await
}

/// Issue 17's three storm targets: whole replay p50 ≤ 2000 ms, first byte p99 ≤ 100 ms, every
/// replay exactly once and in order. Skipped with `skipped` when the storm was not run; FAIL
/// with `failed` when it did not finish.
pub fn targets(
    report: Option<&ResumeReport>,
    skipped: Option<&str>,
    failed: Option<&str>,
) -> Vec<TargetResult> {
    let size = report.map_or(String::new(), |r| {
        format!(" ({} clients × {} events)", r.clients, r.events)
    });
    let one = |v: Option<f64>| v.into_iter().collect::<Vec<f64>>();
    let specs = [
        (
            "whole replay (complete_ms) p50, ms",
            Check::AtMost,
            2000.0,
            one(report.map(|r| r.complete_ms.p50)),
        ),
        (
            "first replayed byte p99, ms",
            Check::AtMost,
            100.0,
            one(report.map(|r| r.first_byte_ms.p99)),
        ),
        (
            "every replay exactly once, in order",
            Check::Holds,
            1.0,
            one(report.map(|r| f64::from(u8::from(r.exactly_once_in_order && r.errors == 0)))),
        ),
    ];
    specs
        .into_iter()
        .map(|(what, check, bound, rounds)| {
            let what = format!("resume storm{size}: {what}");
            let mut t =
                TargetResult::new(17, what, check, bound, rounds, skipped.map(str::to_owned));
            if let Some(why) = failed {
                t.verdict = Verdict::Fail;
                t.note = Some(why.to_owned());
            }
            t
        })
        .collect()
}

/// The storm as Markdown.
pub fn markdown(r: &ResumeReport) -> String {
    let mut md = format!(
        "Resume storm (two nodes on the private Redis, `session.max_events_per_stream=20000`):\n\n\
         ```text\n{}\n```\n",
        r.lines()
    );
    for e in &r.error_samples {
        md.push_str(&format!("- error: {e}\n"));
    }
    md
}
