//! The `switchboard_upstream_*` series computed from each upstream's status at scrape time
//! ([`switchboard_upstream::status`]), every series labelled `upstream="NAME"`:
//! `switchboard_upstream_up` (1 when its state is `up` or `degraded`: it answers calls, maybe
//! not all of them; 0 when `down` or `unknown`), `switchboard_upstream_state` (1 for its one
//! state among `unknown`, `up`, `degraded`, `down`), `switchboard_upstream_children` (stdio
//! children running here), and the counters `switchboard_upstream_calls_total` and
//! `switchboard_upstream_restarts_total`. Errors by code are a metric of their own
//! (`switchboard_upstream_call_errors_total`, recorded as calls end).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use switchboard_upstream::status::{State, UpstreamStatus};

/// One scrape's snapshot of the upstreams' statuses.
#[derive(Debug)]
pub(crate) struct UpstreamSeries(pub Vec<UpstreamStatus>);

type Value = fn(&UpstreamStatus) -> u64;

/// Name, help (ending in a period), type, value.
const SERIES: [(&str, &str, MetricType, Value); 4] = [
    ("switchboard_upstream_up", "1 when the upstream answers calls as this node sees it (state up or degraded), else 0.", MetricType::Gauge, |s| u64::from(matches!(s.state, State::Up | State::Degraded))),
    ("switchboard_upstream_children", "stdio children of the upstream running on this node.", MetricType::Gauge, |s| s.children.len() as u64),
    ("switchboard_upstream_calls", "Calls of clients to the upstream through this node.", MetricType::Counter, |s| s.calls),
    ("switchboard_upstream_restarts", "stdio children of the upstream started on this node to replace one that exited or failed to start.", MetricType::Counter, |s| s.restarts),
];

impl Collector for UpstreamSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (name, help, kind, value) in SERIES {
            let mut family = encoder.encode_descriptor(name, help, None, kind)?;
            for s in &self.0 {
                let labels = [("upstream", s.name.as_str())];
                let metric = family.encode_family(&labels)?;
                match kind {
                    MetricType::Counter => ConstCounter::new(value(s)).encode(metric)?,
                    _ => ConstGauge::new(i64::try_from(value(s)).unwrap_or(i64::MAX))
                        .encode(metric)?,
                }
            }
        }
        let help = "1 for the upstream's state as this node sees it (unknown, up, degraded, down), 0 for the others.";
        let mut family = encoder.encode_descriptor(
            "switchboard_upstream_state",
            help,
            None,
            MetricType::Gauge,
        )?;
        for s in &self.0 {
            for state in State::ALL {
                let labels = [("upstream", s.name.as_str()), ("state", state.as_str())];
                let metric = family.encode_family(&labels)?;
                ConstGauge::new(i64::from(s.state == state)).encode(metric)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_each_upstream_with_escaped_labels() {
        let mut odd = UpstreamStatus::new("a\"b\\c\nd", "http");
        odd.state = State::Degraded;
        odd.calls = 3;
        let mut files = UpstreamStatus::new("files", "stdio");
        files.state = State::Up;
        files.restarts = 2;
        let mut gone = UpstreamStatus::new("gone", "http");
        gone.state = State::Down;
        let series = UpstreamSeries(vec![odd, files, gone]);
        let text = switchboard_telemetry::metrics::render(Some(Box::new(series)));
        for line in [
            "switchboard_upstream_up{upstream=\"gone\"} 0\n",
            "switchboard_upstream_up{upstream=\"a\\\"b\\\\c\\nd\"} 1\n",
            "switchboard_upstream_up{upstream=\"files\"} 1\n",
            "switchboard_upstream_calls_total{upstream=\"a\\\"b\\\\c\\nd\"} 3\n",
            "switchboard_upstream_restarts_total{upstream=\"files\"} 2\n",
            "switchboard_upstream_state{upstream=\"files\",state=\"up\"} 1\n",
            "switchboard_upstream_state{upstream=\"files\",state=\"down\"} 0\n",
            "# TYPE switchboard_upstream_restarts counter\n",
        ] {
            assert!(text.contains(line), "{line:?} missing in {text}");
        }
        assert_eq!(
            text.matches("# TYPE switchboard_upstream_").count(),
            5,
            "{text}"
        );
    }
}
