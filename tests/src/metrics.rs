//! Reading a node's `/metrics` (Prometheus text).

/// The value of counter or gauge `name` in the `/metrics` of the node at `base_url` (panics,
/// with the text, when the endpoint fails or the metric is missing).
pub async fn counter(base_url: &str, name: &str) -> u64 {
    let text = reqwest::get(format!("{base_url}/metrics"))
        .await
        .and_then(|r| r.error_for_status())
        .unwrap_or_else(|e| panic!("GET {base_url}/metrics: {e}"))
        .text()
        .await
        .expect("metrics body");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} "))?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics of {base_url}:\n{text}"))
}
