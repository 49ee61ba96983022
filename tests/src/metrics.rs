//! Reading a node's `/metrics` (Prometheus text) and `/upstreamz` (JSON).

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

/// The `GET /upstreamz` document of the node at `base_url` (panics when the endpoint fails).
pub async fn upstreamz(base_url: &str) -> serde_json::Value {
    reqwest::get(format!("{base_url}/upstreamz"))
        .await
        .and_then(|r| r.error_for_status())
        .unwrap_or_else(|e| panic!("GET {base_url}/upstreamz: {e}"))
        .json()
        .await
        .expect("/upstreamz is JSON")
}

/// The status of upstream `name` in the `/upstreamz` of the node at `base_url`.
pub async fn upstream_status(base_url: &str, name: &str) -> serde_json::Value {
    let doc = upstreamz(base_url).await;
    doc["upstreams"]
        .as_array()
        .and_then(|all| all.iter().find(|u| u["name"] == name).cloned())
        .unwrap_or_else(|| panic!("no upstream `{name}` in /upstreamz of {base_url}: {doc}"))
}
