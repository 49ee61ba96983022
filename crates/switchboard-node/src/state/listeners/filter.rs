//! The notification filter of a `subscriptions/listen` request (MCP 2026-07-28,
//! basic/patterns/subscriptions, Notification Filter; schema `SubscriptionFilter`): what the
//! client asked for, the subset this deployment agrees to, and whether a notification matches.
//!
//! Agreement follows the upstream's capabilities (schema `ServerCapabilities`): a
//! `*ListChanged` type only when the upstream declares `listChanged: true` for it (it never
//! raises one otherwise), `resourceSubscriptions` only when it declares `resources.subscribe`.
//! Everything else is left out of the acknowledgement and never sent (the server MUST NOT send
//! types the client did not ask for). `taskIds` (the tasks extension's) is agreed as asked when
//! the client declared the extension: the nodes raise `notifications/tasks` themselves. Other
//! fields we do not know are not agreed to.
//!
//! A `notifications/resources/updated` matches when its `uri` is one of the subscribed URIs,
//! compared exactly (the schema allows an update of a sub-resource to name the sub-resource; the
//! demo and the upstreams we know name the subscribed URI itself).

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

/// The notification methods a listen stream can carry.
pub const LISTENABLE: [&str; 4] = [
    TOOLS_LIST_CHANGED,
    PROMPTS_LIST_CHANGED,
    RESOURCES_LIST_CHANGED,
    RESOURCE_UPDATED,
];
const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
const RESOURCE_UPDATED: &str = "notifications/resources/updated";
/// Task status notifications of the tasks extension (raised by the nodes, never by upstreams:
/// not in [`LISTENABLE`]).
pub const TASK_STATUS: &str = "notifications/tasks";

/// Whether a server notification is one a listen stream may carry.
pub fn is_listenable(message: &Value) -> bool {
    message
        .get("method")
        .and_then(Value::as_str)
        .is_some_and(|m| LISTENABLE.contains(&m))
}

/// A set of notification types (requested or agreed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// `toolsListChanged`.
    pub tools: bool,
    /// `promptsListChanged`.
    pub prompts: bool,
    /// `resourcesListChanged`.
    pub resources: bool,
    /// `resourceSubscriptions`; `None` when absent (or not agreed).
    pub uris: Option<BTreeSet<String>>,
    /// `taskIds` (tasks extension): the tasks whose `notifications/tasks` the stream carries;
    /// `None` when absent (or not agreed).
    pub task_ids: Option<BTreeSet<String>>,
    /// Subscribed URIs the listener's principal may not see (`[policy]`): acknowledged as asked
    /// (so the acknowledgement does not tell them apart from URIs nobody has) and never
    /// delivered.
    pub hidden: BTreeSet<String>,
}

/// The bounds a requested filter must keep (`session.max_subscriptions`, `session.max_uri`).
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Most URIs in `resourceSubscriptions`.
    pub max_uris: usize,
    /// Longest URI, in bytes.
    pub max_uri_bytes: usize,
}

impl Filter {
    /// Reads `params.notifications`; the message says what is wrong (answered as -32602).
    pub fn parse(params: &Value, bounds: Bounds) -> Result<Filter, String> {
        let Some(n) = params.get("notifications").and_then(Value::as_object) else {
            return Err("params.notifications (an object) is required".into());
        };
        let flag = |name: &str| match n.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("notifications.{name} must be a boolean")),
        };
        let uris = match n.get("resourceSubscriptions") {
            None | Some(Value::Null) => None,
            Some(v) => Some(parse_uris(v, bounds)?),
        };
        let task_ids = match n.get("taskIds") {
            None | Some(Value::Null) => None,
            Some(v) => Some(parse_list(v, bounds, "taskIds")?),
        };
        Ok(Filter {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            uris,
            task_ids,
            hidden: BTreeSet::new(),
        })
    }

    /// The subset of this (requested) filter that an upstream with `capabilities` can honour;
    /// `taskIds` are the nodes' own, agreed as asked (the caller checks the client declared the
    /// tasks extension).
    pub fn agree(&self, capabilities: &Value) -> Filter {
        let on = |path: &str| capabilities.pointer(path) == Some(&Value::Bool(true));
        Filter {
            tools: self.tools && on("/tools/listChanged"),
            prompts: self.prompts && on("/prompts/listChanged"),
            resources: self.resources && on("/resources/listChanged"),
            uris: self.uris.clone().filter(|_| on("/resources/subscribe")),
            task_ids: self.task_ids.clone(),
            hidden: self.hidden.clone(),
        }
    }

    /// Whether a stream with this (agreed) filter can ever carry a notification: some type is
    /// on, or some URI is subscribed (hidden ones count: a stream must not tell them apart).
    pub fn can_deliver(&self) -> bool {
        self.tools
            || self.prompts
            || self.resources
            || self.uris.as_ref().is_some_and(|u| !u.is_empty())
            || self.task_ids.as_ref().is_some_and(|t| !t.is_empty())
    }

    /// The filter as the `notifications` member of `notifications/subscriptions/acknowledged`:
    /// only what is on.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        for (on, name) in [
            (self.tools, "toolsListChanged"),
            (self.prompts, "promptsListChanged"),
            (self.resources, "resourcesListChanged"),
        ] {
            if on {
                out.insert(name.into(), Value::Bool(true));
            }
        }
        if let Some(uris) = &self.uris {
            out.insert("resourceSubscriptions".into(), json!(uris));
        }
        if let Some(ids) = &self.task_ids {
            out.insert("taskIds".into(), json!(ids));
        }
        Value::Object(out)
    }

    /// Whether server notification `message` belongs on a stream with this (agreed) filter.
    pub fn matches(&self, message: &Value) -> bool {
        match message.get("method").and_then(Value::as_str) {
            Some(TOOLS_LIST_CHANGED) => self.tools,
            Some(PROMPTS_LIST_CHANGED) => self.prompts,
            Some(RESOURCES_LIST_CHANGED) => self.resources,
            Some(RESOURCE_UPDATED) => {
                let uri = message.pointer("/params/uri").and_then(Value::as_str);
                match (&self.uris, uri) {
                    (Some(uris), Some(uri)) => uris.contains(uri) && !self.hidden.contains(uri),
                    _ => false,
                }
            }
            Some(TASK_STATUS) => {
                let task = message.pointer("/params/taskId").and_then(Value::as_str);
                match (&self.task_ids, task) {
                    (Some(ids), Some(task)) => ids.contains(task),
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

fn parse_uris(v: &Value, bounds: Bounds) -> Result<BTreeSet<String>, String> {
    parse_list(v, bounds, "resourceSubscriptions")
}

/// A list of strings (`resourceSubscriptions`, `taskIds`) within `bounds`.
fn parse_list(v: &Value, bounds: Bounds, field: &str) -> Result<BTreeSet<String>, String> {
    let Some(list) = v.as_array() else {
        return Err(format!("notifications.{field} must be an array of strings"));
    };
    if list.len() > bounds.max_uris {
        return Err(format!(
            "notifications.{field} names {} items; at most {} are accepted",
            list.len(),
            bounds.max_uris
        ));
    }
    let mut items = BTreeSet::new();
    for item in list {
        let Some(text) = item.as_str() else {
            return Err(format!("notifications.{field} must hold strings"));
        };
        if text.len() > bounds.max_uri_bytes {
            return Err(format!(
                "an item of notifications.{field} is longer than {} bytes",
                bounds.max_uri_bytes
            ));
        }
        items.insert(text.to_owned());
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Bounds = Bounds {
        max_uris: 2,
        max_uri_bytes: 16,
    };

    fn note(method: &str, uri: Option<&str>) -> Value {
        match uri {
            Some(u) => json!({"jsonrpc": "2.0", "method": method, "params": {"uri": u}}),
            None => json!({"jsonrpc": "2.0", "method": method}),
        }
    }

    #[test]
    fn parses_the_schema_fields_and_refuses_bad_ones() {
        let f = Filter::parse(
            &json!({"notifications": {"toolsListChanged": true,
                "resourceSubscriptions": ["demo://a", "demo://a"], "taskIds": ["t"]}}),
            B,
        )
        .unwrap();
        assert_eq!(f.task_ids.as_ref().map(BTreeSet::len), Some(1));
        assert!(f.tools && !f.prompts && !f.resources);
        assert_eq!(f.uris.as_ref().map(BTreeSet::len), Some(1));
        for bad in [
            json!({}),
            json!({"notifications": []}),
            json!({"notifications": {"toolsListChanged": "yes"}}),
            json!({"notifications": {"resourceSubscriptions": "demo://a"}}),
            json!({"notifications": {"resourceSubscriptions": [1]}}),
            json!({"notifications": {"resourceSubscriptions": ["a", "b", "c"]}}),
            json!({"notifications": {"resourceSubscriptions": ["demo://much-too-long"]}}),
        ] {
            assert!(Filter::parse(&bad, B).is_err(), "{bad}");
        }
    }

    #[test]
    fn agrees_only_to_what_the_upstream_can_raise() {
        let asked = Filter {
            tools: true,
            prompts: true,
            resources: true,
            uris: Some(BTreeSet::from(["demo://greeting".to_owned()])),
            task_ids: None,
            hidden: BTreeSet::new(),
        };
        let demo = json!({"tools": {"listChanged": false},
            "resources": {"subscribe": true, "listChanged": false}, "prompts": {}});
        let agreed = asked.agree(&demo);
        assert_eq!(
            agreed.to_json(),
            json!({"resourceSubscriptions": ["demo://greeting"]})
        );
        let all = json!({"tools": {"listChanged": true}, "prompts": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true}});
        assert_eq!(asked.agree(&all), asked);
        assert_eq!(Filter::default().agree(&all).to_json(), json!({}));
        assert!(agreed.can_deliver() && asked.can_deliver());
        let lists_only = Filter {
            uris: None,
            ..asked.clone()
        };
        assert!(!lists_only.agree(&demo).can_deliver(), "case C42");
        let none_subscribed = Filter {
            uris: Some(BTreeSet::new()),
            ..Filter::default()
        };
        assert!(!none_subscribed.can_deliver());
    }

    #[test]
    fn matches_only_asked_types_and_subscribed_uris() {
        let resources = Filter {
            uris: Some(BTreeSet::from(["demo://greeting".to_owned()])),
            ..Filter::default()
        };
        let tools = Filter {
            tools: true,
            ..Filter::default()
        };
        let updated = note(RESOURCE_UPDATED, Some("demo://greeting"));
        assert!(resources.matches(&updated));
        assert!(!tools.matches(&updated));
        let hidden = Filter {
            hidden: BTreeSet::from(["demo://greeting".to_owned()]),
            ..resources.clone()
        };
        assert!(!hidden.matches(&updated));
        assert_eq!(hidden.to_json(), resources.to_json());
        assert!(!resources.matches(&note(RESOURCE_UPDATED, Some("demo://other"))));
        assert!(!resources.matches(&note(RESOURCE_UPDATED, None)));
        assert!(tools.matches(&note(TOOLS_LIST_CHANGED, None)));
        assert!(!resources.matches(&note(TOOLS_LIST_CHANGED, None)));
        assert!(!tools.matches(&note(PROMPTS_LIST_CHANGED, None)));
        assert!(!tools.matches(&note("notifications/message", None)));
        assert!(is_listenable(&updated) && !is_listenable(&note("notifications/message", None)));
        let tasks = Filter {
            task_ids: Some(BTreeSet::from(["t1".to_owned()])),
            ..Filter::default()
        };
        let status = |id: &str| json!({"method": TASK_STATUS, "params": {"taskId": id}});
        assert!(tasks.matches(&status("t1")) && tasks.can_deliver());
        assert!(!tasks.matches(&status("t2")) && !resources.matches(&status("t1")));
        assert!(!is_listenable(&status("t1")), "upstreams cannot raise it");
    }
}
