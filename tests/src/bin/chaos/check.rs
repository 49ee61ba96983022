//! What a client expected against what it received: the sequence checks.
//!
//! - `countdown` with `n` and a progress token sends `notifications/progress` with `progress`
//!   1, 2, …, `n` on the request's own stream, then the result.
//! - `notify` with `count` sends `notifications/message` with `data = {"seq": 1..=count, "of":
//!   count}` on the session's standalone stream, then `notifications/resources/updated`, then
//!   answers. A client runs one `notify` at a time and gives consecutive calls different counts,
//!   so the standalone stream splits into one run of events per call.
//!
//! A call answered with a result must have delivered every event. A call that did not finish
//! (-32004, a transport failure) may stop early: only gaps below the highest event received count
//! as lost there.

use std::collections::BTreeSet;

/// Loss, duplication and order of one sequence (or a sum of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqCounts {
    /// Events received (duplicates included).
    pub received: u64,
    /// Expected events never received.
    pub lost: u64,
    /// Events received more than once (each extra copy counts).
    pub duplicated: u64,
    /// Events received after a later one of the same sequence.
    pub out_of_order: u64,
}

impl SeqCounts {
    /// Adds `other` to `self`.
    pub fn add(&mut self, other: SeqCounts) {
        self.received += other.received;
        self.lost += other.lost;
        self.duplicated += other.duplicated;
        self.out_of_order += other.out_of_order;
    }
}

/// Checks the values `got` (in arrival order) of a sequence expected to be `1..=n`; `complete`
/// when the call answered with a result (then every value must be there).
pub fn check_sequence(got: &[u64], n: u64, complete: bool) -> SeqCounts {
    let mut seen = BTreeSet::new();
    let mut counts = SeqCounts {
        received: got.len() as u64,
        ..SeqCounts::default()
    };
    let mut max = 0;
    for &v in got {
        if !seen.insert(v) {
            counts.duplicated += 1;
            continue;
        }
        if v < max {
            counts.out_of_order += 1;
        }
        max = max.max(v);
    }
    let upto = if complete { n } else { max.min(n) };
    counts.lost = (1..=upto).filter(|v| !seen.contains(v)).count() as u64;
    counts
}

/// One event of the standalone stream, as `notify` sends them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standalone {
    /// `notifications/message` with `data.seq` and `data.of`.
    Message {
        /// `data.seq`.
        seq: u64,
        /// `data.of` (the call's `count`).
        of: u64,
        /// `data.tag`: the index of the call that sent it, when it was tagged.
        call: Option<usize>,
    },
    /// `notifications/resources/updated`: the end of one call's run.
    Updated {
        /// `_meta.tag`: the index of the call that sent it, when it was tagged.
        call: Option<usize>,
    },
}

/// One `notify` call as the client made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotifyCall {
    /// Its `count`.
    pub count: u64,
    /// Whether it answered with a result.
    pub complete: bool,
}

/// What [`check_standalone`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StandaloneReport {
    /// The counts over every call (the `resources/updated` closing each complete call counted
    /// as its last event).
    pub counts: SeqCounts,
    /// Events that belong to no call at or after the current one (by their `of`).
    pub stray: u64,
    /// Descriptions of the first problems, for the evidence.
    pub examples: Vec<String>,
}

/// Splits the standalone stream `got` into the runs of `calls` (in the order they were made) and
/// checks each run. A tagged event belongs to the call its tag names. An untagged message whose
/// `of` is not the current call's belongs to the next call with that count (calls skipped on the
/// way delivered nothing), an untagged `updated` to the current call.
pub fn check_standalone(got: &[Standalone], calls: &[NotifyCall]) -> StandaloneReport {
    let mut runs: Vec<(Vec<u64>, u64)> = vec![(Vec::new(), 0); calls.len()];
    let mut report = StandaloneReport::default();
    let mut current = 0;
    for (i, event) in got.iter().enumerate() {
        match *event {
            Standalone::Message { seq, of, call } => {
                let found = match call {
                    Some(c) => (c < calls.len() && calls[c].count == of).then_some(c),
                    None => (current..calls.len()).find(|&c| calls[c].count == of),
                };
                match found {
                    Some(c) => {
                        if call.is_none() {
                            current = c;
                        }
                        runs[c].0.push(seq);
                    }
                    None => {
                        report.stray += 1;
                        note(&mut report.examples, format!("event {i}: stray {seq}/{of}"));
                    }
                }
            }
            Standalone::Updated { call: Some(c) } if c < calls.len() => runs[c].1 += 1,
            Standalone::Updated { call: None } if current < calls.len() => runs[current].1 += 1,
            Standalone::Updated { .. } => report.stray += 1,
        }
    }
    for (c, (call, (seqs, updated))) in calls.iter().zip(runs).enumerate() {
        let mut counts = check_sequence(&seqs, call.count, call.complete);
        counts.received += updated;
        counts.duplicated += updated.saturating_sub(1);
        if call.complete && updated == 0 {
            counts.lost += 1;
        }
        if counts.lost + counts.duplicated + counts.out_of_order > 0 {
            let state = if call.complete {
                "answered"
            } else {
                "unfinished"
            };
            note(
                &mut report.examples,
                format!(
                    "notify #{c} (count {}, {state}): got {seqs:?}, {updated} updated",
                    call.count
                ),
            );
        }
        report.counts.add(counts);
    }
    report
}

/// Keeps the first few problem descriptions.
pub fn note(examples: &mut Vec<String>, what: String) {
    if examples.len() < 8 {
        examples.push(what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(seq: u64, of: u64) -> Standalone {
        Standalone::Message {
            seq,
            of,
            call: None,
        }
    }

    fn tagged(seq: u64, of: u64, call: usize) -> Standalone {
        Standalone::Message {
            seq,
            of,
            call: Some(call),
        }
    }

    const UPDATED: Standalone = Standalone::Updated { call: None };

    #[test]
    fn a_clean_sequence_counts_nothing() {
        let c = check_sequence(&[1, 2, 3], 3, true);
        assert_eq!(
            c,
            SeqCounts {
                received: 3,
                ..SeqCounts::default()
            }
        );
    }

    #[test]
    fn losses_duplicates_and_reordering_are_counted() {
        let c = check_sequence(&[1, 3, 2, 3, 5], 6, true);
        assert_eq!((c.lost, c.duplicated, c.out_of_order), (2, 1, 1));
        // Unfinished: only the gap below the highest value received is lost.
        let c = check_sequence(&[1, 3], 6, false);
        assert_eq!(c.lost, 1);
        assert_eq!(check_sequence(&[], 6, false).lost, 0);
    }

    #[test]
    fn the_standalone_stream_splits_into_calls() {
        let calls = [
            NotifyCall {
                count: 2,
                complete: true,
            },
            NotifyCall {
                count: 3,
                complete: false,
            },
            NotifyCall {
                count: 4,
                complete: true,
            },
        ];
        let got = [
            msg(1, 2),
            msg(2, 2),
            UPDATED,
            msg(1, 3),
            msg(1, 4),
            msg(2, 4),
            msg(3, 4),
            msg(4, 4),
            UPDATED,
        ];
        let r = check_standalone(&got, &calls);
        assert_eq!(r.counts.lost + r.counts.duplicated + r.stray, 0, "{r:?}");
        assert_eq!(r.counts.received, 9);
    }

    #[test]
    fn a_missing_event_or_end_is_lost_and_a_replay_is_duplicated() {
        let calls = [
            NotifyCall {
                count: 2,
                complete: true,
            },
            NotifyCall {
                count: 3,
                complete: true,
            },
        ];
        let got = [
            msg(1, 2),
            msg(2, 2),
            msg(1, 3),
            msg(3, 3),
            msg(3, 3),
            UPDATED,
        ];
        let r = check_standalone(&got, &calls);
        // Call 0 never got its `updated`; call 1 lost seq 2 and got seq 3 twice.
        assert_eq!(r.counts.lost, 2, "{r:?}");
        assert_eq!(r.counts.duplicated, 1);
        assert_eq!(check_standalone(&[msg(1, 9)], &calls).stray, 1);
    }

    #[test]
    fn a_late_event_of_a_failed_call_is_its_own_when_tagged() {
        // Call 0 failed after its first message was logged; that message arrives only after call
        // 1 and 2 delivered theirs. Untagged, it would make calls 1 and 2 look empty.
        let calls = [
            NotifyCall {
                count: 4,
                complete: false,
            },
            NotifyCall {
                count: 2,
                complete: true,
            },
            NotifyCall {
                count: 4,
                complete: true,
            },
        ];
        let mut got = vec![tagged(1, 2, 1), tagged(2, 2, 1)];
        got.push(Standalone::Updated { call: Some(1) });
        got.push(tagged(1, 4, 0));
        got.extend((1..=4).map(|s| tagged(s, 4, 2)));
        got.push(Standalone::Updated { call: Some(2) });
        let r = check_standalone(&got, &calls);
        assert_eq!(r.counts.lost + r.counts.duplicated + r.stray, 0, "{r:?}");
        assert_eq!(check_standalone(&[tagged(1, 3, 1)], &calls).stray, 1);
    }
}
