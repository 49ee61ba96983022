//! The stdio fixture's children as the tests see them: the pid a call reports, the live children
//! of a node process (`/proc`), and which node the session record names as the child's owner.

use serde_json::Value;

use crate::upstreams::ConfiguredCluster;

/// The fixture's pid, as its `echo` (or `info`) result reports it; panics when there is none.
pub fn child_pid(result: &Value) -> u64 {
    let pid = result["content"][0]["pid"]
        .as_u64()
        .or_else(|| result["structuredContent"]["pid"].as_u64());
    pid.or_else(|| result["pid"].as_u64())
        .unwrap_or_else(|| panic!("no pid in {result}"))
}

/// The live (not zombie) fixture children of process `parent`, sorted.
pub fn fixture_children(parent: u32) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u64> = entries
        .flatten()
        .filter_map(|e| {
            let pid: u64 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 2..];
            let mut fields = rest.split(' ');
            let (state, ppid) = (fields.next()?, fields.next()?);
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let fixture = String::from_utf8_lossy(&cmdline).contains("stdio_server.py");
            (state != "Z" && ppid == parent.to_string() && fixture).then_some(pid)
        })
        .collect();
    pids.sort();
    pids
}

/// The node owning session `sid`'s child of upstream `fixture`: that entry of the record's `own`
/// field (empty when none).
pub fn fixture_owner(started: &ConfiguredCluster, sid: &str) -> String {
    let key = format!("sb:{{{sid}}}:s");
    let reply = started
        .cluster
        .redis()
        .query::<Option<String>>(&["HGET", &key, "own"]);
    let owners: Value = reply
        .ok()
        .flatten()
        .and_then(|r| serde_json::from_str(&r).ok())
        .unwrap_or_default();
    owners["fixture"].as_str().unwrap_or_default().to_owned()
}
