//! The retransmit queue's second order, by last transmit time (Linux's
//! `tsorted_sent_queue`): RACK
//! ([RFC 8985 section 6.2](https://www.rfc-editor.org/rfc/rfc8985#section-6.2)) walks the
//! skbs sent before the most recently delivered one, oldest first, and stops at the first
//! one sent after it.
//!
//! It holds the skbs that are still "in flight" as RACK sees them: not SACKed, and not
//! marked lost and waiting for a retransmission. A retransmission changes an skb's
//! transmit time, which moves it to the tail. [`super::queue::RtxQueue`] keeps the
//! index in step with every change of an skb (push, split, merge, clean, tag), so both
//! storage kinds get it. Keyed by `(tx_time, seq)`: `seq` breaks ties as
//! `tcp_rack_sent_after` does.

use super::skb::{LOST, SACKED_ACKED, SACKED_RETRANS, TSORTED_OUT};
use crate::time::Instant;
use std::collections::VecDeque;

/// Skbs in flight, ordered by `(tx_time, seq)`.
///
/// A sorted ring rather than a search tree: new transmissions join at the tail and
/// acknowledged skbs leave at the head, so in steady state it neither shifts entries
/// nor allocates (a `BTreeMap` allocated and freed a node every few skbs).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tsorted {
    /// `(tx_time, seq, end_seq)`, ascending by `(tx_time, seq)`.
    ring: VecDeque<(Instant, u64, u64)>,
}

/// Whether an skb with scoreboard bits `sacked` belongs in the index: not SACKed,
/// not lost unless retransmitted since (`tcp_rack_detect_loss` skips those), and
/// not unlinked by RACK's marking since its last transmission ([`TSORTED_OUT`]).
pub fn in_flight(sacked: u8) -> bool {
    sacked & (SACKED_ACKED | TSORTED_OUT) == 0
        && (sacked & LOST == 0 || sacked & SACKED_RETRANS != 0)
}

impl Tsorted {
    /// Adds (`add`) or removes the skb `(tx_time, seq)` ending at `end_seq`.
    pub fn set(&mut self, tx_time: Instant, seq: u64, end_seq: u64, add: bool) {
        let key = (tx_time, seq);
        let r = &mut self.ring;
        if add {
            if r.back().is_none_or(|b| (b.0, b.1) < key) {
                return r.push_back((tx_time, seq, end_seq));
            }
            match r.binary_search_by(|e| (e.0, e.1).cmp(&key)) {
                Ok(i) => r[i].2 = end_seq,
                Err(i) => r.insert(i, (tx_time, seq, end_seq)),
            }
        } else if r.front().is_some_and(|f| (f.0, f.1) == key) {
            r.pop_front();
        } else if let Ok(i) = r.binary_search_by(|e| (e.0, e.1).cmp(&key)) {
            r.remove(i);
        }
    }

    /// Number of skbs indexed.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// True if no skb is in flight.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// The transmit time of the most recently sent skb in flight.
    pub fn last_tx(&self) -> Option<Instant> {
        self.ring.back().map(|e| e.0)
    }

    /// `(tx_time, seq, end_seq)` of the skbs, oldest transmission first.
    pub fn iter(&self) -> impl Iterator<Item = (Instant, u64, u64)> + '_ {
        self.ring.iter().copied()
    }
}

/// `tcp_rack_sent_after`: was `(t1, seq1)` sent after `(t2, seq2)`?
pub fn sent_after(t1: Instant, seq1: u64, t2: Instant, seq2: u64) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// The ring keeps the order and contents of a map keyed by `(tx_time, seq)`.
        #[test]
        fn same_as_an_ordered_map(ops in prop::collection::vec((0u64..8, 0u64..16, any::<bool>()), 0..200)) {
            let (mut t, mut m) = (Tsorted::default(), BTreeMap::new());
            for (time, seq, add) in ops {
                let at = Instant::from_nanos(time);
                t.set(at, seq, seq + time, add);
                match add {
                    true => m.insert((at, seq), seq + time),
                    false => m.remove(&(at, seq)),
                };
                let want: Vec<_> = m.iter().map(|(&(a, s), &e)| (a, s, e)).collect();
                prop_assert_eq!(t.iter().collect::<Vec<_>>(), want);
                prop_assert_eq!(t.last_tx(), m.keys().next_back().map(|k| k.0));
            }
        }
    }
}
