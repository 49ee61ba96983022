//! The rules serde cannot check: keys compared with each other, names that end up in Redis keys,
//! paths that become routes. Each problem names its keys by their dotted paths.

use super::cluster::check_name;
use super::http::{check_host, check_origin, check_path, MIN_REQUEST_HEAD_BYTES};
use super::log::check_log_level;
use super::Config;

/// One problem [`Config::problems`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The dotted keys whose values break the rule (the message names them).
    pub keys: Vec<&'static str>,
    /// What is wrong, naming the keys.
    pub message: String,
}

impl Config {
    /// Every problem serde cannot see, one message per problem, each naming its key. Empty means
    /// valid. An empty `cluster.node_id` is valid (it means a random id at start-up).
    pub fn validate(&self) -> Vec<String> {
        self.problems().into_iter().map(|p| p.message).collect()
    }

    /// [`Config::validate`] with the keys each problem is about, so the loader can say where their
    /// values came from.
    pub fn problems(&self) -> Vec<Problem> {
        let mut problems = self.compared();
        let endpoint = &self.http.endpoint_path;
        let node_id = &self.cluster.node_id;
        let node_id = (!node_id.is_empty())
            .then(|| check_name("cluster.node_id", node_id, &[]))
            .flatten();
        let prefix = check_name("redis.key_prefix", &self.redis.key_prefix, &[':']);
        let single = [
            (
                "http.endpoint_path",
                check_path("http.endpoint_path", endpoint),
            ),
            ("cluster.node_id", node_id),
            ("redis.key_prefix", prefix),
        ];
        let redis = self.redis.problems().into_iter().map(|(k, p)| (k, Some(p)));
        let transports = self.transports.problems(endpoint);
        let origins = self.http.allowed_origins.iter().map(|o| check_origin(o));
        let origins = origins.map(|p| ("http.allowed_origins", p));
        let hosts = self.http.allowed_hosts.iter().map(|h| check_host(h));
        let hosts = hosts.map(|p| ("http.allowed_hosts", p));
        let level = [("log.level", check_log_level(&self.log.level))];
        let separator =
            switchboard_upstream::aggregate::names::check_separator(&self.tool_separator);
        let pages =
            (self.list_max_pages == 0).then(|| "list_max_pages must be at least 1".to_owned());
        let separator = [
            ("tool_separator", separator.err()),
            ("list_max_pages", pages),
        ];
        let upstreams = self.upstreams_config().upstream_problems();
        let upstreams = upstreams.into_iter().map(|p| ("upstreams", Some(p)));
        let upstreams_config = self.upstreams_config();
        let policy = self.policy.problems(&upstreams_config.member_names());
        let upstreams = upstreams.chain(policy.into_iter().map(|p| ("policy.rules", Some(p))));
        let auth = super::auth::problems(&self.auth, endpoint);
        let mrtr = self.stateless.mrtr.problems().into_iter();
        let mrtr = mrtr.map(|p| ("stateless.mrtr.state_keys", Some(p)));
        let telemetry = self.otel.problems().into_iter();
        let telemetry = telemetry.chain(self.metrics.problems(self.http.listen));
        let telemetry = telemetry.map(|(k, p)| (k, Some(p)));
        let limits = super::rate_limits::problems(self).into_iter();
        let limits = limits.map(|p| ("rate_limits", Some(p)));
        let rest = single
            .into_iter()
            .chain(transports.into_iter().map(|(k, p)| (k, Some(p))))
            .chain(redis)
            .chain(origins)
            .chain(hosts)
            .chain(level)
            .chain(separator)
            .chain(upstreams)
            .chain(auth.into_iter().map(|(k, p)| (k, Some(p))))
            .chain(mrtr)
            .chain(limits)
            .chain(telemetry);
        for (key, problem) in rest {
            if let Some(message) = problem {
                problems.push(Problem {
                    keys: vec![key],
                    message,
                });
            }
        }
        problems
    }

    /// The rules that compare keys with each other or with a floor.
    fn compared(&self) -> Vec<Problem> {
        let (cluster, session) = (&self.cluster, &self.session);
        let head = self.http.max_request_head.get();
        let rules = [
            (
                cluster.heartbeat_interval < cluster.node_ttl,
                vec!["cluster.heartbeat_interval", "cluster.node_ttl"],
                format!(
                    "cluster.heartbeat_interval ({}) must be less than cluster.node_ttl ({}), or live nodes look dead",
                    cluster.heartbeat_interval, cluster.node_ttl
                ),
            ),
            (
                session.touch_interval < session.idle_ttl,
                vec!["session.touch_interval", "session.idle_ttl"],
                format!(
                    "session.touch_interval ({}) must be less than session.idle_ttl ({}), or busy sessions expire",
                    session.touch_interval, session.idle_ttl
                ),
            ),
            (
                session.max_event_bytes <= session.max_stream_log_bytes,
                vec!["session.max_event_bytes", "session.max_stream_log_bytes"],
                format!(
                    "session.max_event_bytes ({}) must be at most session.max_stream_log_bytes ({}), or a stored event would not fit its log",
                    session.max_event_bytes, session.max_stream_log_bytes
                ),
            ),
            (
                session.max_stream_log_bytes <= session.max_session_log_bytes,
                vec!["session.max_stream_log_bytes", "session.max_session_log_bytes"],
                format!(
                    "session.max_stream_log_bytes ({}) must be at most session.max_session_log_bytes ({}), or one stream's log would not fit its session",
                    session.max_stream_log_bytes, session.max_session_log_bytes
                ),
            ),
            (
                head >= MIN_REQUEST_HEAD_BYTES,
                vec!["http.max_request_head"],
                format!(
                    "http.max_request_head ({head}) must be at least {MIN_REQUEST_HEAD_BYTES} bytes (the HTTP/1 server's smallest read buffer)"
                ),
            ),
        ];
        rules
            .into_iter()
            .filter(|(ok, _, _)| !ok)
            .map(|(_, keys, message)| Problem { keys, message })
            .collect()
    }
}
