use super::*;

use crate::compare::cpu::CpuPerCall;
use crate::stats::{ErrorCounts, LatencySummary, RunReport};

fn run(
    scenario: Scenario,
    paired_with: Option<Scenario>,
    clients: usize,
    round: usize,
    rps: f64,
    p50: f64,
    cpu: Option<f64>,
) -> RunRecord {
    RunRecord {
        scenario,
        paired_with,
        clients,
        round,
        report: RunReport {
            mode: "run",
            urls: Vec::new(),
            clients,
            tool: "echo".into(),
            duration_secs: 1.0,
            elapsed_secs: 1.0,
            sessions: clients,
            requests: rps as u64,
            requests_per_sec: rps,
            errors: 0,
            errors_by_kind: ErrorCounts::default(),
            latency_ms: LatencySummary {
                p50,
                p99: 2.0 * p50,
                ..LatencySummary::default()
            },
        },
        cpu: cpu.map(|own_us| CpuPerCall {
            per_process_us: Vec::new(),
            processes: Vec::new(),
            own_us,
            upstream_us: None,
        }),
    }
}

/// Two rounds at 8 clients: rmcp, proxy, rmcp, forward, rmcp, agentgateway.
fn records() -> Vec<RunRecord> {
    use Scenario::*;
    let mut v = Vec::new();
    for (round, base) in [(1, 1000.0), (2, 2000.0)] {
        v.push(run(Rmcp, Some(Proxy), 8, round, base, 1.0, None));
        v.push(run(Proxy, None, 8, round, 0.4 * base, 2.0, Some(90.0)));
        // The machine is twice as fast for the forward pair: the ratios cancel that.
        v.push(run(Rmcp, Some(Forward), 8, round, 2.0 * base, 0.5, None));
        v.push(run(Forward, None, 8, round, base, 0.8, Some(40.0)));
        v.push(run(Rmcp, Some(Agentgateway), 8, round, base, 1.0, None));
        let agw_cpu = if round == 1 { 400.0 } else { 900.0 };
        v.push(run(
            Agentgateway,
            None,
            8,
            round,
            0.3 * base,
            3.0,
            Some(agw_cpu),
        ));
    }
    v
}

#[test]
fn hop_ratios_are_normalised_by_each_hops_own_baseline() {
    let r = records();
    // (0.4 / 1) ÷ (1 / 2) = 0.8 in both rounds, though the raw ratio is 0.4.
    let v = ratio_of_ratios(&r, Scenario::Proxy, Scenario::Forward, 8, rps);
    assert_eq!(v, vec![0.8, 0.8]);
    // p50: (2 / 1) ÷ (0.8 / 0.5) = 1.25.
    let v = ratio_of_ratios(&r, Scenario::Proxy, Scenario::Forward, 8, p50);
    assert!(v.iter().all(|x| (x - 1.25).abs() < 1e-9), "{v:?}");
    assert!(ratio_of_ratios(&r, Scenario::Proxy, Scenario::Haproxy, 8, rps).is_empty());
    assert_eq!(
        cpu_ratio_rounds(&r, Scenario::Proxy, Scenario::Agentgateway, 8),
        vec![90.0 / 400.0, 90.0 / 900.0]
    );
}

#[test]
fn targets_carry_rounds_issue_and_verdict() {
    let r = records();
    let t = targets(&r, 8, None);
    assert_eq!(t.iter().filter(|t| t.issue == 4).count(), 5);
    assert_eq!(t.iter().filter(|t| t.issue == 17).count(), 6);
    let hop = t
        .iter()
        .find(|t| t.what.contains("req/s × `serve-forward`"))
        .unwrap();
    assert_eq!((hop.value, hop.verdict), (Some(0.8), Verdict::Miss));
    assert_eq!(hop.rounds, vec![0.8, 0.8]);
    let cpu: Vec<&TargetResult> = t.iter().filter(|t| t.what.contains("CPU")).collect();
    // Rounds 0.225 and 0.1: median 0.1625 > 0.15 at 8 clients; nothing at 1 client.
    assert_eq!(cpu[0].verdict, Verdict::Miss);
    assert!((cpu[0].value.unwrap() - 0.1625).abs() < 1e-9);
    assert_eq!(cpu[1].verdict, Verdict::Skipped);
    let skipped = targets(&r, 8, Some("no --agentgateway BIN given"));
    let cpu = skipped.iter().find(|t| t.what.contains("CPU")).unwrap();
    assert_eq!(
        cpu.verdict,
        Verdict::Miss,
        "measured rounds win over a reason"
    );
    let none = targets(&[], 8, Some("no --agentgateway BIN given"));
    let cpu = none.iter().find(|t| t.what.contains("CPU")).unwrap();
    assert_eq!(cpu.verdict, Verdict::Skipped);
    assert!(
        cpu.text().contains("SKIPPED: no --agentgateway BIN given"),
        "{}",
        cpu.text()
    );
    let md = markdown_targets(&t);
    assert!(md.contains("| 17 | rmcp behind 1 node, Redis (proxy): req/s × `serve-forward`'s, 8 clients | ≥ 0.85 | 0.80 | 0.80, 0.80 | **MISS** |"), "{md}");
}

#[test]
fn verdicts() {
    let t = |check, bound, rounds: Vec<f64>| {
        TargetResult::new(17, "x, ms".into(), check, bound, rounds, None).verdict
    };
    assert_eq!(t(Check::AtMost, 100.0, vec![99.0]), Verdict::Pass);
    assert_eq!(t(Check::AtMost, 100.0, vec![101.0]), Verdict::Miss);
    assert_eq!(t(Check::AtMost, 100.0, vec![0.0]), Verdict::Miss);
    assert_eq!(t(Check::AtLeast, 2.0, vec![1.0, 3.0, 2.5]), Verdict::Pass);
    assert_eq!(t(Check::Holds, 1.0, vec![1.0]), Verdict::Pass);
    assert_eq!(t(Check::Holds, 1.0, vec![0.0]), Verdict::Fail);
    assert_eq!(t(Check::Holds, 1.0, vec![]), Verdict::Skipped);
}

#[test]
fn medians() {
    assert_eq!(median(vec![]), 0.0);
    assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
}
