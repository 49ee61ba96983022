//! The self-check of a node's subscription: at every check it publishes a numbered probe on its
//! own inbox channel, and at the next it looks whether that probe came back. One that did not
//! means the subscription is gone although the connection looks alive (a server that dropped it,
//! a proxy that lost it), so the node subscribes again; a loss is found within two checks.

/// The probes sent and the last one that came back.
#[derive(Debug, Default)]
pub(crate) struct Prober {
    sent: u64,
    back: u64,
}

impl Prober {
    /// Whether every probe sent came back (true before the first).
    pub fn healthy(&self) -> bool {
        self.back >= self.sent
    }

    /// The number of the next probe (call only once it is published).
    pub fn sent(&mut self) -> u64 {
        self.sent += 1;
        self.sent
    }

    /// The number the next probe will carry.
    pub fn next(&self) -> u64 {
        self.sent + 1
    }

    /// Probe `n` came back.
    pub fn back(&mut self, n: u64) {
        self.back = self.back.max(n);
    }

    /// Forgets the probes in flight (after subscribing again: they may have been lost with the
    /// subscription they tested).
    pub fn reset(&mut self) {
        self.back = self.sent;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_not_back_by_the_next_check_is_a_loss() {
        let mut p = Prober::default();
        assert!(p.healthy());
        assert_eq!(p.next(), 1);
        assert_eq!(p.sent(), 1);
        assert!(!p.healthy());
        p.back(1);
        assert!(p.healthy());
        p.sent();
        assert!(!p.healthy());
        p.reset();
        assert!(p.healthy());
    }
}
