//! The engine's two orders over its decoding sequences — by admission, to preempt the
//! youngest, and by the decode step each finishes at — kept for what the engine asks of
//! them, in constant time per sequence.
//!
//! Both hold `(admitted, id)` entries and leave a sequence's entry behind when it stops
//! decoding (finished, preempted, cancelled): the engine tells a stale entry from a live one
//! by its admission number, which a sequence changes when it is admitted again. A search
//! for C* admits and finishes hundreds of thousands of sequences; a sorted map and a binary
//! heap cost a fifth of its time, these a few per cent.

use std::collections::VecDeque;

/// Decoding sequences in admission order, newest last.
#[derive(Debug, Default)]
pub(super) struct AdmissionOrder {
    entries: Vec<(u64, u64)>,
}

impl AdmissionOrder {
    /// Records sequence `id` admitted as number `admitted` (numbers only grow).
    pub fn push(&mut self, admitted: u64, id: u64) {
        self.entries.push((admitted, id));
    }

    /// Removes and returns the newest entry `live` accepts, dropping stale ones above it.
    pub fn pop_newest(&mut self, live: impl Fn(u64, u64) -> bool) -> Option<(u64, u64)> {
        while let Some((admitted, id)) = self.entries.pop() {
            if live(admitted, id) {
                return Some((admitted, id));
            }
        }
        None
    }

    /// Drops stale entries once they outnumber the `live_count` live ones, so that the list
    /// stays within twice the decoding set (each entry dropped once: constant time each).
    pub fn compact(&mut self, live_count: usize, live: impl Fn(u64, u64) -> bool) {
        if self.entries.len() > 2 * live_count + 64 {
            self.entries.retain(|&(admitted, id)| live(admitted, id));
        }
    }
}

/// Decoding sequences by the decode step they finish at: a bucket per step ahead, each in
/// admission order (sequences enter decoding in admission order, and a step's bucket is
/// filled as they enter).
#[derive(Debug, Default)]
pub(super) struct FinishingSteps {
    /// The decode step of `buckets[0]`.
    first: u64,
    buckets: VecDeque<Vec<(u64, u64)>>,
    /// Emptied buckets, reused.
    spare: Vec<Vec<(u64, u64)>>,
}

impl FinishingSteps {
    /// Records sequence `id` (admission number `admitted`) finishing at decode step `step`,
    /// which is after every step already taken.
    pub fn push(&mut self, step: u64, admitted: u64, id: u64) {
        let index = step.saturating_sub(self.first) as usize;
        while self.buckets.len() <= index {
            let bucket = self.spare.pop().unwrap_or_default();
            self.buckets.push_back(bucket);
        }
        self.buckets[index].push((admitted, id));
    }

    /// Moves the entries finishing at decode step `step` or before into `due`, by step and
    /// then admission — the order a heap of (step, admitted, id) pops them in.
    pub fn take_due(&mut self, step: u64, due: &mut Vec<(u64, u64)>) {
        while self.first <= step {
            let Some(mut bucket) = self.buckets.pop_front() else {
                self.first = step + 1;
                break;
            };
            due.append(&mut bucket);
            self.spare.push(bucket);
            self.first += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_live_entry_is_preempted_and_stale_ones_are_skipped() {
        let mut order = AdmissionOrder::default();
        for (admitted, id) in [(1, 10), (2, 11), (3, 12), (4, 13)] {
            order.push(admitted, id);
        }
        // 13 finished, 11 was preempted: the newest live one is 12.
        let live = |admitted: u64, _id: u64| admitted != 4 && admitted != 2;
        assert_eq!(order.pop_newest(live), Some((3, 12)));
        assert_eq!(order.pop_newest(live), Some((1, 10)));
        assert_eq!(order.pop_newest(live), None);
    }

    #[test]
    fn finishing_steps_come_out_by_step_then_admission() {
        let mut steps = FinishingSteps::default();
        steps.push(3, 1, 100);
        steps.push(1, 2, 101);
        steps.push(3, 3, 102);
        steps.push(2, 4, 103);
        let mut due = Vec::new();
        steps.take_due(1, &mut due);
        assert_eq!(due, vec![(2, 101)]);
        due.clear();
        steps.take_due(3, &mut due);
        assert_eq!(due, vec![(4, 103), (1, 100), (3, 102)]);
        due.clear();
        steps.push(5, 5, 104);
        steps.take_due(4, &mut due);
        assert!(due.is_empty());
        steps.take_due(5, &mut due);
        assert_eq!(due, vec![(5, 104)]);
    }
}
