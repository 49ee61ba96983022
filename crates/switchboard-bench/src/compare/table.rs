//! From the runs of a comparison to its table: medians per scenario, ratios against the rmcp
//! runs taken side by side with each candidate, the targets (PASS/MISS), and Markdown.

use serde::Serialize;

use super::measure::{RunRecord, Scenario};

/// Median of `v` (the mean of the middle two for an even count); 0 for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One line of the table: the medians of a scenario at one client count, and its ratios.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The scenario.
    pub scenario: Scenario,
    /// Virtual clients.
    pub clients: usize,
    /// Runs the medians are over.
    pub runs: usize,
    /// Median requests per second.
    pub rps: f64,
    /// Median of the runs' p50 latency, ms.
    pub p50_ms: f64,
    /// Median of the runs' p99 latency, ms.
    pub p99_ms: f64,
    /// Failed requests over all its runs.
    pub errors: u64,
    /// Median over rounds of (this run's req/s ÷ the paired rmcp run's); 1 for rmcp itself.
    pub rps_vs_rmcp: f64,
    /// The same for p50.
    pub p50_vs_rmcp: f64,
    /// The same for p99.
    pub p99_vs_rmcp: f64,
    /// Median req/s ÷ the axum baseline's median req/s at the same client count.
    pub rps_vs_axum: f64,
}

/// Which ratio a target bounds.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// `rps_vs_rmcp`, at least the bound.
    RpsAtLeast,
    /// `p50_vs_rmcp`, at most the bound.
    P50AtMost,
    /// `p99_vs_rmcp`, at most the bound.
    P99AtMost,
}

/// One target of issue 4 and whether the run met it.
#[derive(Debug, Clone, Serialize)]
pub struct TargetResult {
    /// The scenario it is about.
    pub scenario: Scenario,
    /// At how many clients.
    pub clients: usize,
    /// The ratio it bounds.
    pub metric: Metric,
    /// The bound.
    pub bound: f64,
    /// The measured ratio.
    pub ratio: f64,
    /// Met?
    pub pass: bool,
}

impl TargetResult {
    /// Short text, e.g. `req/s ≥ 1.0× rmcp: PASS (1.23)`.
    pub fn text(&self) -> String {
        let what = match self.metric {
            Metric::RpsAtLeast => "req/s ≥",
            Metric::P50AtMost => "p50 ≤",
            Metric::P99AtMost => "p99 ≤",
        };
        let verdict = if self.pass { "PASS" } else { "MISS" };
        format!(
            "{what} {:.1}× rmcp: {verdict} ({:.2})",
            self.bound, self.ratio
        )
    }
}

/// One number of a run.
type Field = fn(&RunRecord) -> f64;

fn pair_ratios(records: &[RunRecord], s: Scenario, clients: usize, f: Field) -> f64 {
    let at = |scenario: Scenario, paired: Option<Scenario>, round: usize| {
        records.iter().find(|r| {
            r.scenario == scenario
                && r.paired_with == paired
                && r.clients == clients
                && r.round == round
        })
    };
    let ratios = records
        .iter()
        .filter(|r| r.scenario == s && r.paired_with.is_none() && r.clients == clients)
        .filter_map(|cand| {
            let base = at(Scenario::Rmcp, Some(s), cand.round)?;
            let b = f(base);
            (b > 0.0).then(|| f(cand) / b)
        })
        .collect();
    median(ratios)
}

fn row(records: &[RunRecord], s: Scenario, clients: usize, axum_rps: f64) -> Row {
    let runs: Vec<&RunRecord> = records
        .iter()
        .filter(|r| r.scenario == s && r.clients == clients)
        .collect();
    let med = |f: Field| median(runs.iter().map(|r| f(r)).collect());
    let rps = med(|r| r.report.requests_per_sec);
    let p50: Field = |r| r.report.latency_ms.p50;
    let p99: Field = |r| r.report.latency_ms.p99;
    let vs = |f: Field| {
        if s == Scenario::Rmcp {
            1.0
        } else {
            pair_ratios(records, s, clients, f)
        }
    };
    Row {
        scenario: s,
        clients,
        runs: runs.len(),
        rps,
        p50_ms: med(p50),
        p99_ms: med(p99),
        errors: runs.iter().map(|r| r.report.errors).sum(),
        rps_vs_rmcp: vs(|r| r.report.requests_per_sec),
        p50_vs_rmcp: vs(p50),
        p99_vs_rmcp: vs(p99),
        rps_vs_axum: if axum_rps > 0.0 { rps / axum_rps } else { 0.0 },
    }
}

/// The rows: for each client count (in `client_counts` order), rmcp, axum, then the other
/// candidates.
pub fn rows(records: &[RunRecord], client_counts: &[usize]) -> Vec<Row> {
    let mut out = Vec::new();
    for &c in client_counts {
        let axum = median(
            records
                .iter()
                .filter(|r| r.scenario == Scenario::Axum && r.clients == c)
                .map(|r| r.report.requests_per_sec)
                .collect(),
        );
        out.push(row(records, Scenario::Rmcp, c, axum));
        for s in Scenario::CANDIDATES {
            let measured = records.iter().any(|r| r.scenario == s && r.clients == c);
            if measured {
                out.push(row(records, s, c, axum));
            }
        }
    }
    out
}

/// The targets of issue 4, checked against `rows` (`many` is the high client count).
pub fn targets(rows: &[Row], many: usize) -> Vec<TargetResult> {
    let specs = [
        (Scenario::Redis1, many, Metric::RpsAtLeast, 1.0),
        (Scenario::Redis1, many, Metric::P99AtMost, 1.5),
        (Scenario::Memory, many, Metric::RpsAtLeast, 1.5),
        (Scenario::Proxy, many, Metric::RpsAtLeast, 0.5),
        (Scenario::Proxy, 1, Metric::P50AtMost, 2.0),
    ];
    specs
        .iter()
        .filter_map(|&(scenario, clients, metric, bound)| {
            let r = rows
                .iter()
                .find(|r| r.scenario == scenario && r.clients == clients)?;
            let (ratio, pass) = match metric {
                Metric::RpsAtLeast => (r.rps_vs_rmcp, r.rps_vs_rmcp >= bound),
                Metric::P50AtMost => (r.p50_vs_rmcp, r.p50_vs_rmcp > 0.0 && r.p50_vs_rmcp <= bound),
                Metric::P99AtMost => (r.p99_vs_rmcp, r.p99_vs_rmcp > 0.0 && r.p99_vs_rmcp <= bound),
            };
            Some(TargetResult {
                scenario,
                clients,
                metric,
                bound,
                ratio,
                pass,
            })
        })
        .collect()
}

/// The rows as a Markdown table, each with the texts of its targets.
pub fn markdown_rows(rows: &[Row], targets: &[TargetResult]) -> String {
    let mut md = String::from(
        "| scenario | clients | req/s | p50 ms | p99 ms | errors | req/s × rmcp | p50 × rmcp \
         | p99 × rmcp | req/s × axum | targets |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        let t: Vec<String> = targets
            .iter()
            .filter(|t| t.scenario == r.scenario && t.clients == r.clients)
            .map(TargetResult::text)
            .collect();
        md.push_str(&format!(
            "| {} | {} | {:.0} | {:.2} | {:.2} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} |\n",
            r.scenario.label(),
            r.clients,
            r.rps,
            r.p50_ms,
            r.p99_ms,
            r.errors,
            r.rps_vs_rmcp,
            r.p50_vs_rmcp,
            r.p99_vs_rmcp,
            r.rps_vs_axum,
            t.join("; ")
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
