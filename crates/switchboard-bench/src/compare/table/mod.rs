//! From the runs of a comparison to its table: medians per scenario, ratios against the rmcp
//! runs taken side by side with each candidate, the issue's targets (PASS/MISS), and Markdown.

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
    /// Median over its runs of the CPU time of its own server processes (the server; a node
    /// and its Redis; a hop) per successful call, in µs (`None` when `/proc` was unreadable).
    pub cpu_us_per_call: Option<f64>,
    /// The same for the rmcp upstream behind a proxy scenario (`None` for the others).
    pub upstream_cpu_us_per_call: Option<f64>,
}

/// How a target's value is checked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// The value must be at least the bound.
    AtLeast,
    /// The value must be above 0 and at most the bound.
    AtMost,
    /// A yes/no property (value 1 for yes): FAIL, not MISS, when it does not hold.
    Holds,
}

/// The verdict on one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// Met.
    Pass,
    /// Measured and not met.
    Miss,
    /// A property that must hold did not (exactly once, in order).
    Fail,
    /// Not measured (its scenario was not run; the reason is in `note`).
    Skipped,
}

/// One target of an issue (4 or 17) and whether the run met it.
#[derive(Debug, Clone, Serialize)]
pub struct TargetResult {
    /// The issue that set it.
    pub issue: u32,
    /// What is measured, e.g. `switchboard 1 node, Redis: req/s × rmcp, 64 clients`.
    pub what: String,
    /// The scenario it is about, when it is about one row of the table.
    pub scenario: Option<Scenario>,
    /// At how many clients, when that applies.
    pub clients: Option<usize>,
    /// How `value` is checked against `bound`.
    pub check: Check,
    /// The bound (`×` for ratios, ms for the resume storm's times).
    pub bound: f64,
    /// The measured value: the median over `rounds` (`None` when skipped).
    pub value: Option<f64>,
    /// The value of each round, in round order.
    pub rounds: Vec<f64>,
    /// PASS, MISS, FAIL or SKIPPED.
    pub verdict: Verdict,
    /// Why it was skipped, or what it was measured at.
    pub note: Option<String>,
}

impl TargetResult {
    /// A target whose value is the median of `rounds` (skipped with `why` when there are none).
    pub fn new(
        issue: u32,
        what: String,
        check: Check,
        bound: f64,
        rounds: Vec<f64>,
        why_skipped: Option<String>,
    ) -> TargetResult {
        let value = (!rounds.is_empty()).then(|| median(rounds.clone()));
        let verdict = match (value, check) {
            (None, _) => Verdict::Skipped,
            (Some(v), Check::AtLeast) if v >= bound => Verdict::Pass,
            (Some(v), Check::AtMost) if v > 0.0 && v <= bound => Verdict::Pass,
            (Some(v), Check::Holds) if v >= 1.0 => Verdict::Pass,
            (Some(_), Check::Holds) => Verdict::Fail,
            (Some(_), _) => Verdict::Miss,
        };
        let note = match verdict {
            Verdict::Skipped => why_skipped.or_else(|| Some("not measured".into())),
            _ => None,
        };
        TargetResult {
            issue,
            what,
            scenario: None,
            clients: None,
            check,
            bound,
            value,
            rounds,
            verdict,
            note,
        }
    }

    /// The same, about `scenario` at `clients`.
    pub fn about(mut self, scenario: Scenario, clients: usize) -> TargetResult {
        self.scenario = Some(scenario);
        self.clients = Some(clients);
        self
    }

    /// The bound as text, e.g. `≥ 1.50` or `≤ 2000 ms` or `holds`.
    pub fn bound_text(&self) -> String {
        let ms = self.what.ends_with(", ms");
        let n = if ms {
            format!("{:.0}", self.bound)
        } else {
            format!("{:.2}", self.bound)
        };
        match self.check {
            Check::AtLeast => format!("≥ {n}"),
            Check::AtMost => format!("≤ {n}"),
            Check::Holds => "holds".into(),
        }
    }

    /// The verdict as text, with the reason when skipped.
    pub fn verdict_text(&self) -> String {
        match (&self.verdict, &self.note) {
            (Verdict::Pass, _) => "PASS".into(),
            (Verdict::Miss, _) => "**MISS**".into(),
            (Verdict::Fail, Some(why)) => format!("**FAIL**: {why}"),
            (Verdict::Fail, None) => "**FAIL**".into(),
            (Verdict::Skipped, Some(why)) => format!("SKIPPED: {why}"),
            (Verdict::Skipped, None) => "SKIPPED".into(),
        }
    }

    /// A value as text (2 decimals for ratios, 1 for ms, yes/no for a property).
    pub fn format(&self, v: f64) -> String {
        match self.check {
            Check::Holds if v >= 1.0 => "yes".into(),
            Check::Holds => "no".into(),
            _ if self.what.ends_with(", ms") => format!("{v:.1}"),
            _ => format!("{v:.2}"),
        }
    }

    /// Short text, e.g. `switchboard 1 node, Redis: req/s × rmcp, 64 clients ≥ 1.00: PASS (1.23)`.
    pub fn text(&self) -> String {
        let value = self.value.map_or("—".into(), |v| self.format(v));
        format!(
            "{} {}: {} ({value})",
            self.what,
            self.bound_text(),
            self.verdict_text()
        )
    }
}

/// One number of a run.
type Field = fn(&RunRecord) -> f64;

/// Req/s of a run.
fn rps(r: &RunRecord) -> f64 {
    r.report.requests_per_sec
}

/// p50 latency of a run, ms.
fn p50(r: &RunRecord) -> f64 {
    r.report.latency_ms.p50
}

/// p99 latency of a run, ms.
fn p99(r: &RunRecord) -> f64 {
    r.report.latency_ms.p99
}

/// The runs of candidate `s` at `clients` (not the rmcp runs paired with it), in round order.
fn candidate_runs(records: &[RunRecord], s: Scenario, clients: usize) -> Vec<&RunRecord> {
    let mut v: Vec<&RunRecord> = records
        .iter()
        .filter(|r| r.scenario == s && r.paired_with.is_none() && r.clients == clients)
        .collect();
    v.sort_by_key(|r| r.round);
    v
}

/// Per round, in round order: `f` of candidate `s` ÷ `f` of the rmcp run just before it.
pub fn pair_ratio_rounds(
    records: &[RunRecord],
    s: Scenario,
    clients: usize,
    f: Field,
) -> Vec<(usize, f64)> {
    candidate_runs(records, s, clients)
        .into_iter()
        .filter_map(|cand| {
            let base = records.iter().find(|r| {
                r.scenario == Scenario::Rmcp
                    && r.paired_with == Some(s)
                    && r.clients == clients
                    && r.round == cand.round
            })?;
            let b = f(base);
            (b > 0.0).then(|| (cand.round, f(cand) / b))
        })
        .collect()
}

fn pair_ratios(records: &[RunRecord], s: Scenario, clients: usize, f: Field) -> f64 {
    median(
        pair_ratio_rounds(records, s, clients, f)
            .into_iter()
            .map(|(_, v)| v)
            .collect(),
    )
}

/// Per round: `a`'s ratio to its rmcp run ÷ `b`'s ratio to its rmcp run (each candidate
/// normalised by the baseline taken next to it, so drift of the machine between the two runs
/// cancels), for the rounds both were measured in.
pub fn ratio_of_ratios(
    records: &[RunRecord],
    a: Scenario,
    b: Scenario,
    clients: usize,
    f: Field,
) -> Vec<f64> {
    let bs = pair_ratio_rounds(records, b, clients, f);
    pair_ratio_rounds(records, a, clients, f)
        .into_iter()
        .filter_map(|(round, ra)| {
            let (_, rb) = bs.iter().find(|(r, _)| *r == round)?;
            (*rb > 0.0).then(|| ra / rb)
        })
        .collect()
}

/// Per round: the own CPU per call of `a` ÷ that of `b` in the same round.
pub fn cpu_ratio_rounds(
    records: &[RunRecord],
    a: Scenario,
    b: Scenario,
    clients: usize,
) -> Vec<f64> {
    let own = |r: &RunRecord| r.cpu.as_ref().map(|c| c.own_us);
    let bs = candidate_runs(records, b, clients);
    candidate_runs(records, a, clients)
        .into_iter()
        .filter_map(|ra| {
            let rb = bs.iter().find(|r| r.round == ra.round)?;
            let (x, y) = (own(ra)?, own(rb)?);
            (y > 0.0).then(|| x / y)
        })
        .collect()
}

fn row(records: &[RunRecord], s: Scenario, clients: usize, axum_rps: f64) -> Row {
    let runs: Vec<&RunRecord> = records
        .iter()
        .filter(|r| r.scenario == s && r.clients == clients)
        .collect();
    let med = |f: Field| median(runs.iter().map(|r| f(r)).collect());
    let med_opt = |f: fn(&RunRecord) -> Option<f64>| {
        let v: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
        (!v.is_empty()).then(|| median(v))
    };
    let rps = med(rps);
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
        rps_vs_rmcp: vs(self::rps),
        p50_vs_rmcp: vs(p50),
        p99_vs_rmcp: vs(p99),
        rps_vs_axum: if axum_rps > 0.0 { rps / axum_rps } else { 0.0 },
        cpu_us_per_call: med_opt(|r| r.cpu.as_ref().map(|c| c.own_us)),
        upstream_cpu_us_per_call: med_opt(|r| r.cpu.as_ref().and_then(|c| c.upstream_us)),
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

/// Why the agentgateway targets were not measured (`None` when they were).
pub type Skipped<'a> = Option<&'a str>;

/// The request targets of issue 4 and issue 17, per round, from the runs (`many` is the high
/// client count; `agw_skipped` says why there are no agentgateway runs, if there are none).
pub fn targets(records: &[RunRecord], many: usize, agw_skipped: Skipped) -> Vec<TargetResult> {
    let vs_rmcp = |s: Scenario, clients: usize, f: Field| -> Vec<f64> {
        pair_ratio_rounds(records, s, clients, f)
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    };
    let c = |n: usize| {
        if n == 1 {
            "1 client".to_owned()
        } else {
            format!("{n} clients")
        }
    };
    let (redis1, proxy) = (Scenario::Redis1.label(), Scenario::Proxy.label());
    let mut out = Vec::new();
    // Issue 4, as it set them: ratios to the rmcp run next to each candidate.
    for (s, clients, f, what, check, bound) in [
        (
            Scenario::Redis1,
            many,
            rps as Field,
            "req/s × rmcp",
            Check::AtLeast,
            1.0,
        ),
        (
            Scenario::Redis1,
            many,
            p99 as Field,
            "p99 × rmcp",
            Check::AtMost,
            1.5,
        ),
        (
            Scenario::Memory,
            many,
            rps as Field,
            "req/s × rmcp",
            Check::AtLeast,
            1.5,
        ),
        (
            Scenario::Proxy,
            many,
            rps as Field,
            "req/s × rmcp",
            Check::AtLeast,
            0.5,
        ),
        (
            Scenario::Proxy,
            1,
            p50 as Field,
            "p50 × rmcp",
            Check::AtMost,
            2.0,
        ),
    ] {
        let what = format!("{}: {what}, {}", s.label(), c(clients));
        let rounds = vs_rmcp(s, clients, f);
        out.push(TargetResult::new(4, what, check, bound, rounds, None).about(s, clients));
    }
    // Issue 17: the proxy against the bare hop in its own stack, run in the same rounds.
    let fwd = "`serve-forward`";
    out.push(
        TargetResult::new(
            17,
            format!("{proxy}: req/s × {fwd}'s, {}", c(many)),
            Check::AtLeast,
            0.85,
            ratio_of_ratios(records, Scenario::Proxy, Scenario::Forward, many, rps),
            None,
        )
        .about(Scenario::Proxy, many),
    );
    out.push(
        TargetResult::new(
            17,
            format!("{proxy}: p50 × {fwd}'s, 1 client"),
            Check::AtMost,
            1.1,
            ratio_of_ratios(records, Scenario::Proxy, Scenario::Forward, 1, p50),
            None,
        )
        .about(Scenario::Proxy, 1),
    );
    out.push(
        TargetResult::new(
            17,
            format!("{redis1}: req/s × rmcp, {}", c(many)),
            Check::AtLeast,
            1.5,
            vs_rmcp(Scenario::Redis1, many, rps),
            None,
        )
        .about(Scenario::Redis1, many),
    );
    out.push(
        TargetResult::new(
            17,
            format!("{redis1}: p99 × rmcp, {}", c(many)),
            Check::AtMost,
            1.0,
            vs_rmcp(Scenario::Redis1, many, p99),
            None,
        )
        .about(Scenario::Redis1, many),
    );
    for (clients, bound) in [(many, 0.15), (1, 0.3)] {
        let why = agw_skipped.map(str::to_owned);
        out.push(
            TargetResult::new(
                17,
                format!(
                    "{proxy}: CPU per call (node + Redis) × agentgateway's, {}",
                    c(clients)
                ),
                Check::AtMost,
                bound,
                cpu_ratio_rounds(records, Scenario::Proxy, Scenario::Agentgateway, clients),
                why,
            )
            .about(Scenario::Proxy, clients),
        );
    }
    out
}

/// The rows as a Markdown table, with the CPU time of the servers per call.
pub fn markdown_rows(rows: &[Row]) -> String {
    let mut md = String::from(
        "| scenario | clients | req/s | p50 ms | p99 ms | errors | req/s × rmcp | p50 × rmcp \
         | p99 × rmcp | req/s × axum | CPU µs/call | + rmcp µs/call |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let us = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{v:.1}"));
    for r in rows {
        md.push_str(&format!(
            "| {} | {} | {:.0} | {:.2} | {:.2} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} |\n",
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
            us(r.cpu_us_per_call),
            us(r.upstream_cpu_us_per_call),
        ));
    }
    md
}

/// Every target as one Markdown table: issue, what, bound, value (the median), each round's
/// value, verdict.
pub fn markdown_targets(targets: &[TargetResult]) -> String {
    let mut md = String::from(
        "| issue | target | bound | value | rounds | result |\n|---:|---|---|---:|---|---|\n",
    );
    for t in targets {
        let value = t.value.map_or("—".into(), |v| t.format(v));
        let rounds: Vec<String> = t.rounds.iter().map(|&v| t.format(v)).collect();
        md.push_str(&format!(
            "| {} | {} | {} | {value} | {} | {} |\n",
            t.issue,
            t.what,
            t.bound_text(),
            rounds.join(", "),
            t.verdict_text()
        ));
    }
    md
}

#[cfg(test)]
mod tests;
