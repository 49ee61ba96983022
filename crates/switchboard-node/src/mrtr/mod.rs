//! Multi round-trip requests (MCP 2026-07-28, basic/patterns/mrtr): how a 2026-07-28 request
//! whose upstream asks the client something (`sampling/createMessage`, `elicitation/create`,
//! `roots/list`) is answered without server-initiated requests and without server memory.
//!
//! Round 1: the upstream runs; when it sends a request to the client, the node parks it, gives
//! concurrent ones [`GATHER`] to arrive, stops the run and answers `resultType: "input_required"`
//! with `inputRequests` (one entry per question) and a sealed `requestState`.
//! Round n: the client retries (new JSON-RPC id, same params, `inputResponses`, the echoed
//! `requestState`) on any node. The node opens the state, checks it, and runs the request again
//! from the start; every question the upstream asks again is answered from the state and the
//! responses at once, and a question still unanswered gives a fresh `InputRequiredResult`
//! (the spec's SHOULD for missing input).
//!
//! Re-running is what makes the retry land anywhere: it suits upstreams that keep no
//! per-session state ([`switchboard_upstream::Upstream::serves_stateless`]). Requests of the
//! others park instead ([`InputMode::Park`], the `park` module), and a task's questions wait for
//! `tasks/update` ([`InputMode::Task`]). Questions are keyed by what they ask: `<method>-<8 hex of the
//! SHA-256 of method and params>-<n>` (the n-th identical question of the run), so an upstream
//! that asks the same things in the same order meets its answers again.
//!
//! The sealed state ([`seal`]) holds the principal, an expiry, a digest of the method and params
//! (without `_meta`, `inputResponses`, `requestState`), the answers gathered so far and the keys
//! still open; each is verified on receipt (Server Requirements: principal, short TTL, request
//! identifier). A state is not single-use: replaying it within its TTL re-runs the same request
//! with the same answers.

pub mod seal;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::digest::{digest, SHA256};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use switchboard_protocol::meta;
use tokio::sync::{oneshot, Notify};

pub use crate::config::{MrtrSettings, StateKey};
pub use seal::{key_ring, random_key, KeyRing, SealError, KEY_LEN};

/// How long a run that asked a question waits for concurrent questions before it stops.
pub const GATHER: Duration = Duration::from_millis(20);

/// The client requests that may be answered with an `InputRequiredResult` (MCP 2026-07-28,
/// basic/patterns/mrtr, Supported Requests; MUST NOT on any other).
pub const SUPPORTED: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// The retry's params members that carry MRTR data and are not passed to the upstream.
const RETRY_MEMBERS: [&str; 2] = ["inputResponses", "requestState"];

/// The name the cluster's agreed key is stored under ([`switchboard_store::Secrets`]).
pub const SECRET_NAME: &str = "mrtr-request-state";

/// What the sealed `requestState` carries (short names: it travels on every retry).
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Payload {
    /// Format version.
    v: u8,
    /// The principal the state was issued to.
    p: String,
    /// Expiry, ms since the Unix epoch.
    e: u64,
    /// Digest of the method and params ([`request_digest`]).
    d: String,
    /// Answers gathered in earlier rounds, by question key.
    a: Map<String, Value>,
    /// Keys asked in the last round.
    k: Vec<String>,
    /// Park mode: the node holding the parked call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    n: Option<String>,
    /// Park mode: the parked call's id on that node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    r: Option<String>,
}

/// Why a retry's MRTR data was refused (answered as -32602, invalid params).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryError {
    /// The sealed blob did not open.
    #[error(transparent)]
    Seal(#[from] SealError),
    /// `requestState` is not a JSON string.
    #[error("requestState is not a string")]
    NotAString,
    /// It opened but is not a state of ours (format version or shape).
    #[error("requestState is unreadable")]
    Unreadable,
    /// Presented after its TTL (`stateless.mrtr.state_ttl`).
    #[error("requestState has expired")]
    Expired,
    /// Issued to another principal.
    #[error("requestState belongs to another principal")]
    OtherPrincipal,
    /// Issued for another method or other params.
    #[error("requestState belongs to another request (method or params differ)")]
    OtherRequest,
    /// `inputResponses` is not a map of result objects.
    #[error("inputResponses must be an object whose values are objects")]
    BadResponses,
}

/// What a request's MRTR data asks for.
pub enum Retry {
    /// A first request, or a retry of a request that is re-run: run it with these inputs.
    Run(Inputs),
    /// A retry of a request parked on `node` (its upstream keeps per-session state, so the call
    /// waits there for the answers instead of being re-run).
    Resume(Resume),
}

/// Where a parked request waits and the answers the retry brings it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    /// The node holding the parked call.
    pub node: String,
    /// The parked call's id on that node.
    pub park: String,
    /// The answers to its questions that the retry carries, by question key.
    pub answers: Map<String, Value>,
}

/// What [`Inputs::answer_or_ask`] tells the peer.
pub enum Ask {
    /// The answer is known: use it.
    Answer(Value),
    /// Re-run mode: the question is recorded; wait until the run is stopped.
    Stop,
    /// Park mode: the question is recorded; its answer arrives on this receiver.
    Wait(oneshot::Receiver<Value>),
}

/// What happens to a question the upstream asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputMode {
    /// It stops the run, which answers `InputRequiredResult`; the retry re-runs the request.
    Rerun,
    /// It parks the run, which answers `InputRequiredResult`; the retry resumes it.
    Park,
    /// It waits while a task shows it in `inputRequests`; `tasks/update` answers it
    /// (the `tasks` module).
    Task,
}

/// One request's view of MRTR: the answers it may use and the questions it asked.
pub struct Inputs {
    answers: Map<String, Value>,
    seen: Mutex<HashMap<String, u32>>,
    asked: Mutex<Vec<(String, Value)>>,
    /// Park mode: questions waiting for their answers (request, answer sender).
    waiting: Mutex<HashMap<String, (Value, oneshot::Sender<Value>)>>,
    mode: InputMode,
    notify: Notify,
    digest: String,
}

impl Inputs {
    /// What a request's MRTR data says: its `requestState` and `inputResponses` when it is a
    /// retry, else a first run. `principal` is the authenticated principal (or the anonymous
    /// one); `parking` chooses park mode for the run (an upstream with per-session state).
    pub fn from_request(
        ring: &KeyRing,
        method: &str,
        params: &Value,
        principal: &str,
        parking: bool,
    ) -> Result<Retry, RetryError> {
        let digest = request_digest(method, params);
        let mut answers = Map::new();
        if let Some(state) = params.get("requestState") {
            let sealed = state.as_str().ok_or(RetryError::NotAString)?;
            let payload: Payload =
                serde_json::from_slice(&ring.open(sealed)?).map_err(|_| RetryError::Unreadable)?;
            if payload.v != 1 {
                return Err(RetryError::Unreadable);
            }
            if payload.e <= now_ms() {
                return Err(RetryError::Expired);
            }
            if payload.p != principal {
                return Err(RetryError::OtherPrincipal);
            }
            if payload.d != digest {
                return Err(RetryError::OtherRequest);
            }
            let responses = match params.get("inputResponses") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) if m.values().all(Value::is_object) => m.clone(),
                Some(_) => return Err(RetryError::BadResponses),
            };
            // Only answers to questions we asked count; anything else is ignored (Error
            // Handling: unexpected members SHOULD be ignored).
            let mut given = Map::new();
            for key in payload.k {
                if let Some(answer) = responses.get(&key) {
                    given.insert(key, answer.clone());
                }
            }
            if let (Some(node), Some(park)) = (payload.n, payload.r) {
                return Ok(Retry::Resume(Resume {
                    node,
                    park,
                    answers: given,
                }));
            }
            answers = payload.a;
            answers.extend(given);
        }
        let mode = if parking {
            InputMode::Park
        } else {
            InputMode::Rerun
        };
        Ok(Retry::Run(Inputs::with(answers, digest, mode)))
    }

    /// The inputs of a request that is not a retry (no answers), in re-run mode.
    pub fn none(method: &str, params: &Value) -> Inputs {
        Inputs::with(Map::new(), request_digest(method, params), InputMode::Rerun)
    }

    /// The inputs of a call that may become a task: its questions wait for `tasks/update`.
    pub fn for_task(method: &str, params: &Value) -> Inputs {
        Inputs::with(Map::new(), request_digest(method, params), InputMode::Task)
    }

    fn with(answers: Map<String, Value>, digest: String, mode: InputMode) -> Inputs {
        Inputs {
            answers,
            seen: Mutex::default(),
            asked: Mutex::default(),
            waiting: Mutex::default(),
            mode,
            notify: Notify::new(),
            digest,
        }
    }

    /// Whether questions park the call (see [`Retry::Resume`]) rather than stop it.
    pub fn parking(&self) -> bool {
        self.mode == InputMode::Park
    }

    /// What a question does.
    pub fn mode(&self) -> InputMode {
        self.mode
    }

    /// Task mode: the questions still waiting for an answer, by key.
    pub fn waiting(&self) -> Map<String, Value> {
        self.waiting
            .lock()
            .iter()
            .map(|(k, (request, _))| (k.clone(), request.clone()))
            .collect()
    }

    /// A question the upstream asks: its answer when known, else recorded as asked.
    pub fn answer_or_ask(&self, method: &str, params: &Value) -> Ask {
        let base = question_key(method, params);
        let n = {
            let mut seen = self.seen.lock();
            let n = seen.entry(base.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let key = format!("{base}-{n}");
        if let Some(answer) = self.answers.get(&key) {
            return Ask::Answer(answer.clone());
        }
        let request = json!({"method": method, "params": params});
        self.asked.lock().push((key.clone(), request.clone()));
        self.notify.notify_one();
        if self.mode == InputMode::Rerun {
            return Ask::Stop;
        }
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().insert(key, (request, tx));
        Ask::Wait(rx)
    }

    /// Resolves once a question was asked (and not yet taken).
    pub async fn asked(&self) {
        loop {
            let notified = self.notify.notified();
            if !self.asked.lock().is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// Park mode: the questions asked since the last call, by key.
    pub fn take_asked(&self) -> Vec<(String, Value)> {
        std::mem::take(&mut *self.asked.lock())
    }

    /// Park mode: hands `answers` to the waiting questions. Questions left unanswered are asked
    /// again (they are recorded as asked once more).
    pub fn deliver(&self, answers: &Map<String, Value>) {
        let mut waiting = self.waiting.lock();
        let keys: Vec<String> = waiting.keys().cloned().collect();
        let mut again = Vec::new();
        for key in keys {
            match answers.get(&key) {
                Some(answer) => {
                    if let Some((_, tx)) = waiting.remove(&key) {
                        let _ = tx.send(answer.clone());
                    }
                }
                None => again.push((key.clone(), waiting[&key].0.clone())),
            }
        }
        drop(waiting);
        if !again.is_empty() {
            self.asked.lock().extend(again);
            self.notify.notify_one();
        }
    }

    /// Re-run mode: the `InputRequiredResult` when the run asked questions (see
    /// [`Inputs::result`]).
    pub fn input_required(
        &self,
        ring: &KeyRing,
        settings: &MrtrSettings,
        principal: &str,
    ) -> Option<Result<Value, String>> {
        let asked = self.asked.lock().clone();
        if asked.is_empty() {
            return None;
        }
        Some(self.result(ring, settings, principal, &asked, None))
    }

    /// An `InputRequiredResult` with `questions` as `inputRequests` and a sealed
    /// `requestState` valid for `settings.state_ttl`, naming `parked` (node, park id) when the
    /// call waits there. `Err` when the state would exceed `settings.max_state_bytes`.
    pub fn result(
        &self,
        ring: &KeyRing,
        settings: &MrtrSettings,
        principal: &str,
        questions: &[(String, Value)],
        parked: Option<(&str, &str)>,
    ) -> Result<Value, String> {
        let mut requests = Map::new();
        for (key, request) in questions {
            requests.insert(key.clone(), request.clone());
        }
        let payload = Payload {
            v: 1,
            p: principal.to_owned(),
            e: now_ms() + settings.state_ttl.as_millis() as u64,
            d: self.digest.clone(),
            a: if parked.is_some() {
                Map::new()
            } else {
                self.answers.clone()
            },
            k: questions.iter().map(|(k, _)| k.clone()).collect(),
            n: parked.map(|(node, _)| node.to_owned()),
            r: parked.map(|(_, park)| park.to_owned()),
        };
        let plain = serde_json::to_vec(&payload).expect("payload serializes");
        let sealed = ring.seal(&plain);
        if sealed.len() > settings.max_state_bytes {
            return Err(format!(
                "the answers gathered so far need a requestState of {} bytes, over this \
                 server's limit of {} (stateless.mrtr.max_state)",
                sealed.len(),
                settings.max_state_bytes
            ));
        }
        Ok(json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": sealed,
        }))
    }
}

/// `config` with its MRTR keys settled: unchanged when keys are configured, else the cluster's
/// agreed key from the store (the first node to ask proposes a random one), so every replica
/// seals and opens with the same key without configuration.
pub async fn settle_keys(
    mut config: crate::NodeConfig,
    store: &dyn switchboard_store::Store,
) -> Result<crate::NodeConfig, String> {
    if !config.mrtr.keys.is_empty() {
        return Ok(config);
    }
    let agreed = store
        .agreed_secret(SECRET_NAME, &random_key())
        .await
        .map_err(|e| format!("could not agree on the MRTR key through the store: {e}"))?;
    let key: [u8; KEY_LEN] = agreed.as_slice().try_into().map_err(|_| {
        format!(
            "the store's MRTR key has {} bytes, not {KEY_LEN}; delete it or set stateless.mrtr.state_keys",
            agreed.len()
        )
    })?;
    config.mrtr.keys = vec![key.into()];
    Ok(config)
}

/// `params` as the upstream sees them: without the retry's MRTR members, and without the
/// 2026-07-28 request `_meta` (version, client capabilities and info, log level), which a
/// session-era upstream refuses on its connection (the Python SDK does) and a 2026-07-28
/// upstream gets anew ([`switchboard_upstream::http::modern`]). Other `_meta` members (e.g.
/// `progressToken`) pass; an emptied `_meta` is removed.
pub fn upstream_params(mut params: Value) -> Value {
    if let Some(obj) = params.as_object_mut() {
        for member in RETRY_MEMBERS {
            obj.remove(member);
        }
        if let Some(m) = obj.get_mut("_meta").and_then(Value::as_object_mut) {
            for key in [
                meta::PROTOCOL_VERSION,
                meta::CLIENT_CAPABILITIES,
                meta::CLIENT_INFO,
                meta::LOG_LEVEL,
            ] {
                m.remove(key);
            }
            if m.is_empty() {
                obj.remove("_meta");
            }
        }
    }
    params
}

/// Hex SHA-256 of the method and the canonical JSON of `params` without `_meta` and the retry
/// members: the same for the first request and every retry of it.
fn request_digest(method: &str, params: &Value) -> String {
    let mut salient = upstream_params(params.clone());
    if let Some(obj) = salient.as_object_mut() {
        obj.remove("_meta");
    }
    hex_digest(&format!("{method}\n{}", canonical(&salient)))
}

/// The key of a question, without its occurrence number.
fn question_key(method: &str, params: &Value) -> String {
    let tail = method.rsplit('/').next().unwrap_or(method);
    let d = hex_digest(&format!("{method}\n{}", canonical(params)));
    format!("{tail}-{}", &d[..8])
}

fn hex_digest(text: &str) -> String {
    digest(&SHA256, text.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// JSON with object members sorted by name at every level, so member order does not matter.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let members: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", members.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
