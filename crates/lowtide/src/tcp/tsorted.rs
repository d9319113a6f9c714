//! The retransmit queue's second order, by last transmit time (Linux's
//! `tsorted_sent_queue`): RACK (RFC 8985 section 6.2) walks the skbs sent before the
//! most recently delivered one, oldest first, and stops at the first one sent after it.
//!
//! It holds the skbs that are still "in flight" as RACK sees them: not SACKed, and not
//! marked lost and waiting for a retransmission. A retransmission changes an skb's
//! transmit time, which moves it to the tail. [`super::rtx_queue::RtxQueue`] keeps the
//! index in step with every change of an skb (push, split, merge, clean, tag), so both
//! storage kinds get it. Keyed by `(tx_time, seq)`: `seq` breaks ties as
//! `tcp_rack_sent_after` does.

use super::skb::{LOST, SACKED_ACKED, SACKED_RETRANS};
use crate::time::Instant;
use std::collections::BTreeMap;

/// Skbs in flight, ordered by `(tx_time, seq)`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tsorted {
    /// `(tx_time, seq) -> end_seq`.
    map: BTreeMap<(Instant, u64), u64>,
}

/// Whether an skb with scoreboard bits `sacked` belongs in the index.
pub fn in_flight(sacked: u8) -> bool {
    sacked & SACKED_ACKED == 0 && (sacked & LOST == 0 || sacked & SACKED_RETRANS != 0)
}

impl Tsorted {
    /// Adds (`add`) or removes the skb `(tx_time, seq)` ending at `end_seq`.
    pub fn set(&mut self, tx_time: Instant, seq: u64, end_seq: u64, add: bool) {
        if add {
            self.map.insert((tx_time, seq), end_seq);
        } else {
            self.map.remove(&(tx_time, seq));
        }
    }

    /// Number of skbs indexed.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if no skb is in flight.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The transmit time of the most recently sent skb in flight.
    pub fn last_tx(&self) -> Option<Instant> {
        self.map.keys().next_back().map(|k| k.0)
    }

    /// `(tx_time, seq, end_seq)` of the skbs, oldest transmission first.
    pub fn iter(&self) -> impl Iterator<Item = (Instant, u64, u64)> + '_ {
        self.map.iter().map(|(&(t, s), &e)| (t, s, e))
    }
}

/// `tcp_rack_sent_after`: was `(t1, seq1)` sent after `(t2, seq2)`?
pub fn sent_after(t1: Instant, seq1: u64, t2: Instant, seq2: u64) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}
