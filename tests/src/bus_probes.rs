//! The probes of the bus cases (C36, C37): each makes one node tell another something over the
//! bus and times its arrival. A sampling call on one node answered by a POST on another, a
//! `notify` on one node reaching a GET stream held on another, a node's id and inbox channel,
//! and the bus counters of its `/metrics`.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::client::McpClient;
use crate::cluster::Cluster;
use crate::msg;
use crate::sse::SseStream;

/// How long a probe waits for what comes before the part it times (a server request, a first
/// progress event).
const SETUP: Duration = Duration::from_secs(10);

/// The metric a node counts a resubscription in, by cause.
pub const HEALED: &str = "switchboard_bus_subscriptions_healed_total";

/// The metric a node counts messages taken from a mailbox in (their doorbell was missed).
pub const REDELIVERED: &str = "switchboard_bus_messages_redelivered_total";

/// The metric a node counts messages gone from its mailbox before it read them in.
pub const LOST: &str = "switchboard_bus_messages_lost_total";

/// The metric a node counts messages it dropped at their deadline in.
pub const EXPIRED: &str = "switchboard_bus_messages_expired_total";

/// A client bound to a new session made on `url` (2025-11-25) that declares `sampling`.
pub async fn sampling_session(url: &str) -> (McpClient, String) {
    let mut client = McpClient::new();
    let (sid, _) = client
        .initialize_with(url, "2025-11-25", json!({"sampling": {}}))
        .await;
    (client, sid)
}

/// A `sample` call whose `sampling/createMessage` has reached the client.
pub struct WaitingSample {
    /// The call's own stream (the server request went out on it; the result follows).
    pub stream: SseStream,
    /// The call's JSON-RPC id.
    pub call_id: Value,
    /// The id of the server's `sampling/createMessage`.
    pub request_id: Value,
}

impl WaitingSample {
    /// POSTs `sample` with `prompt` as request `id` to `url` and waits (10 s) for its
    /// `sampling/createMessage`. Panics when none comes.
    pub async fn start(client: &McpClient, url: &str, id: u64, prompt: &str) -> WaitingSample {
        let reply = client
            .call_tool(url, id, "sample", json!({"prompt": prompt}))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "sample {id} on {url}");
        assert!(reply.is_sse(), "a sampling call streams");
        let mut stream = reply.sse();
        let got = stream.until_method("sampling/createMessage", SETUP).await;
        let request = got
            .matched
            .unwrap_or_else(|| panic!("sample {id}: no sampling/createMessage: {:?}", got.events));
        WaitingSample {
            stream,
            call_id: json!(id),
            request_id: request["id"].clone(),
        }
    }

    /// POSTs the client's answer (a text `text`) to `url`; the future (which does not borrow
    /// the call, so the call's stream may be read meanwhile) returns when the answer was sent
    /// and the HTTP status it got (202 when it was taken).
    pub fn answer<'a>(
        &self,
        client: &'a McpClient,
        url: &'a str,
        text: &str,
    ) -> impl Future<Output = (Instant, u16)> + Send + 'a {
        let answer = json!({"role": "assistant", "model": "m",
            "content": {"type": "text", "text": text}});
        let body = msg::result(&self.request_id, answer);
        async move {
            let sent = Instant::now();
            let reply = client.post(url, &body).await;
            (sent, reply.status.as_u16())
        }
    }

    /// The call's response, if it arrives by `deadline`.
    pub async fn result_by(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.stream
            .until_response(&self.call_id, left)
            .await
            .matched
    }
}

/// One `notify` message seen on a GET stream: its `seq` and how long after its append it
/// arrived.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    /// `data.seq` of the message.
    pub seq: u64,
    /// From its append to its event log (the Redis server's clock, in its event id's position)
    /// to its arrival here.
    pub delay: Duration,
}

/// Reads `get` until `count` `notifications/message` carrying `data.tag == tag` arrived, or
/// `limit` passed; returns them in arrival order. Messages of other tags are skipped.
pub async fn tagged_arrivals(
    get: &mut SseStream,
    tag: &str,
    count: usize,
    limit: Duration,
) -> Vec<Arrival> {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    while seen.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some((event, message)) = get.next_message(left).await else {
            break;
        };
        let data = &message["params"]["data"];
        if message["method"] != "notifications/message" || data["tag"] != tag {
            continue;
        }
        let appended = event
            .id
            .as_deref()
            .and_then(appended_ms)
            .unwrap_or_else(|| panic!("no event id with a position: {event:?}"));
        let arrived = SystemTime::now() - event.at.elapsed();
        let arrived = arrived.duration_since(UNIX_EPOCH).expect("after 1970");
        seen.push(Arrival {
            seq: data["seq"].as_u64().expect("numeric seq"),
            delay: arrived.saturating_sub(Duration::from_millis(appended)),
        });
    }
    seen
}

/// The Redis server time (ms since the Unix epoch) in an event id `<stream>_<ms>-<n>`.
fn appended_ms(event_id: &str) -> Option<u64> {
    let (_, position) = event_id.rsplit_once('_')?;
    position.split_once('-')?.0.parse().ok()
}

/// The id node `i` of `cluster` runs under (`<name>.<suffix>`), from its liveness key
/// `sb:node:<id>`. Panics when there is not exactly one.
pub fn node_id(cluster: &Cluster, i: usize) -> String {
    let pattern = format!("sb:node:{}.*", cluster.node(i).id());
    let keys = cluster.backend().keys_matching(&pattern);
    match &keys[..] {
        [key] => key.trim_start_matches("sb:node:").to_owned(),
        other => panic!("liveness keys of node {i}: {other:?}"),
    }
}

/// The value of counter `name` (with its labels, e.g. `…_total{cause="probe"}`) in the
/// `/metrics` of the node at `base_url`; 0 when the node has not counted it yet (a labelled
/// counter is listed from its first count). Panics when `/metrics` fails.
pub async fn counter_or_zero(base_url: &str, name: &str) -> u64 {
    let text = reqwest::get(format!("{base_url}/metrics"))
        .await
        .and_then(|r| r.error_for_status())
        .unwrap_or_else(|e| panic!("GET {base_url}/metrics: {e}"))
        .text()
        .await
        .expect("metrics body");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} "))?.trim().parse().ok())
        .unwrap_or(0)
}

/// `HEALED{cause="<cause>"}`.
pub fn healed(cause: &str) -> String {
    format!("{HEALED}{{cause=\"{cause}\"}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_append_time_of_an_event_id() {
        assert_eq!(appended_ms("g1_1733570000123-4"), Some(1_733_570_000_123));
        assert_eq!(appended_ms("a_b_17-0"), Some(17));
        assert_eq!(appended_ms("nope"), None);
    }
}
