//! One node's view of the cluster: its `CLUSTER NODES` reply, parsed.

/// One line of `CLUSTER NODES`: `<id> <ip:port@bus[,hostname]> <flags> <primary id or -> <ping
/// sent> <pong received> <config epoch> <link state> [<slot> …]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLine {
    /// The 40-hex node id.
    pub id: String,
    /// The client port (the part after `:` and before `@`).
    pub port: u16,
    /// The flags (`myself`, `master`, `slave`, `fail?`, `fail`, `handshake`, `noaddr`, …).
    pub flags: Vec<String>,
    /// The id of the primary it replicates, for a replica (`None` for `-`).
    pub primary_id: Option<String>,
    /// Whether it serves at least one slot (a slot or range after the link state).
    pub has_slots: bool,
}

impl NodeLine {
    /// Whether the flags hold `flag`.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Flagged `master`, and neither `fail` nor `fail?`.
    pub fn is_healthy_primary(&self) -> bool {
        self.has_flag("master") && !self.has_flag("fail") && !self.has_flag("fail?")
    }
}

/// Parses a whole `CLUSTER NODES` reply; lines that do not parse are left out.
pub fn parse_nodes(reply: &str) -> Vec<NodeLine> {
    reply.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<NodeLine> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return None;
    }
    let address = fields[1].split(',').next()?;
    let port = address
        .split('@')
        .next()?
        .rsplit_once(':')?
        .1
        .parse()
        .ok()?;
    Some(NodeLine {
        id: fields[0].to_owned(),
        port,
        flags: fields[2].split(',').map(str::to_owned).collect(),
        primary_id: (fields[3] != "-").then(|| fields[3].to_owned()),
        has_slots: fields.len() > 8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_primaries_replicas_and_failed_nodes() {
        let reply = "\
d0c3 127.0.0.1:22002@32002 master,fail - 0 1796 2 disconnected\n\
3e1e 127.0.0.1:22005@32005 myself,master - 0 1796 7 connected 5461-10922\n\
2f21 127.0.0.1:22006@32006,host slave f7e7 0 1796 3 connected\n\
garbage\n";
        let nodes = parse_nodes(reply);
        assert_eq!(nodes.len(), 3);
        assert_eq!(nodes[0].port, 22002);
        assert!(nodes[0].has_flag("fail") && !nodes[0].is_healthy_primary());
        assert!(!nodes[0].has_slots);
        assert!(nodes[1].is_healthy_primary() && nodes[1].has_slots);
        assert!(nodes[1].has_flag("myself"));
        assert_eq!(nodes[2].port, 22006);
        assert_eq!(nodes[2].primary_id.as_deref(), Some("f7e7"));
        assert!(nodes[2].has_flag("slave"));
    }
}
