//! The event queue: events in virtual time, ties broken by insertion order, so a run
//! is a pure function of its inputs.

use lowtide::Instant;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    at: Instant,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest event first and,
    /// among events at the same time, the one scheduled first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// A priority queue of events keyed by (time, insertion sequence number).
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `event` at `at`.
    #[inline]
    pub fn push(&mut self, at: Instant, event: E) {
        let seq = self.seq;
        self.seq += 1;
        self.heap.push(Entry { at, seq, event });
    }

    /// Removes the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|e| e.at)
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// No pending events.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Events ever scheduled.
    pub fn scheduled(&self) -> u64 {
        self.seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_time_then_insertion_order() {
        let mut q = EventQueue::new();
        q.push(Instant(30), "c");
        q.push(Instant(10), "a1");
        q.push(Instant(20), "b");
        q.push(Instant(10), "a2");
        q.push(Instant(10), "a3");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        let names: Vec<_> = order.iter().map(|(_, n)| *n).collect();
        assert_eq!(names, ["a1", "a2", "a3", "b", "c"]);
        assert_eq!(order[0].0, Instant(10));
        assert!(q.is_empty());
    }

    #[test]
    fn same_inputs_same_order() {
        use rand_chacha::ChaCha8Rng;
        use rand_core::{RngCore, SeedableRng};
        let run = || {
            let mut q = EventQueue::new();
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            for i in 0..1000u32 {
                q.push(Instant(rng.next_u64() % 50), i);
            }
            std::iter::from_fn(|| q.pop()).collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        assert!(a
            .windows(2)
            .all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1)));
    }
}
