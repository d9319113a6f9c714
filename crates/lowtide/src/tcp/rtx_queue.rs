//! The retransmit queue: sent skbs in a tree ordered by sequence (Linux's rb-tree
//! `tcp_rtx_queue`, seed 003) with the SACK scoreboard kept beside it.
//!
//! Every change of an skb's scoreboard bits goes through this type so that the
//! counters (`packets_out`, `sacked_out`, `lost_out`, `retrans_out`) always equal the
//! sums over the skbs; `check_invariants` verifies that in tests.

use super::skb::{self, Skb, EVER_RETRANS, LOST, SACKED_ACKED, SACKED_RETRANS};
use crate::time::Instant;
use std::collections::BTreeMap;

/// The retransmit queue and its scoreboard counters (in segments, as Linux counts).
#[derive(Debug, Default)]
pub struct RtxQueue {
    map: BTreeMap<u64, Skb>,
    /// `packets_out`: segments sent and not cumulatively acknowledged.
    pub packets_out: u32,
    /// `sacked_out`: segments SACKed.
    pub sacked_out: u32,
    /// `lost_out`: segments marked lost.
    pub lost_out: u32,
    /// `retrans_out`: retransmitted segments not yet acknowledged.
    pub retrans_out: u32,
    /// Payload bytes SACKed (for RFC 6675's IsLost byte rule).
    pub sacked_bytes: u64,
    /// Total truesize of the queued skbs.
    pub truesize: u64,
}

/// What a cumulative ACK removed (`tcp_clean_rtx_queue`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Cleaned {
    /// Segments newly acknowledged (`pkts_acked`), SACKed ones included.
    pub acked_segs: u32,
    /// Of those, segments that had been SACKed before.
    pub acked_sacked_segs: u32,
    /// Payload bytes acknowledged.
    pub acked_bytes: u64,
    /// Send time of the oldest acknowledged skb that was never retransmitted (Karn).
    pub first_tx: Option<Instant>,
    /// Send time of the newest acknowledged skb that was never retransmitted.
    pub last_tx: Option<Instant>,
    /// Some acknowledged skb had been retransmitted.
    pub acked_retrans: bool,
    /// Memory released.
    pub truesize: u64,
    /// A FIN was acknowledged.
    pub fin_acked: bool,
}

/// What one SACK block newly marked (`tcp_sacktag_walk`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Tagged {
    /// Segments newly SACKed.
    pub segs: u32,
    /// Send time of the newest newly SACKed skb that was never retransmitted.
    pub last_tx: Option<Instant>,
    /// Some newly SACKed skb had been retransmitted (D-SACK-less undo hint).
    pub retrans: bool,
}

impl RtxQueue {
    /// Number of skbs.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// True if nothing is outstanding.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// The lowest skb.
    pub fn first(&self) -> Option<&Skb> {
        self.map.values().next()
    }
    /// The highest skb.
    pub fn last(&self) -> Option<&Skb> {
        self.map.values().next_back()
    }
    /// The skb starting at `seq`.
    pub fn get(&self, seq: u64) -> Option<&Skb> {
        self.map.get(&seq)
    }
    /// Skbs from the one containing or following `seq`, in order.
    pub fn iter_from(&self, seq: u64) -> impl Iterator<Item = &Skb> {
        let start = self.start_key(seq).unwrap_or(u64::MAX);
        self.map.range(start..).map(|(_, s)| s)
    }

    /// Key of the skb containing `seq`, or else of the first one after it.
    fn start_key(&self, seq: u64) -> Option<u64> {
        if let Some((k, s)) = self.map.range(..=seq).next_back() {
            if s.end_seq > seq {
                return Some(*k);
            }
        }
        self.map.range(seq..).next().map(|(k, _)| *k)
    }

    fn account(&mut self, s: &Skb, add: bool) {
        let f = |c: &mut u32, n: u32| {
            if add {
                *c += n
            } else {
                *c -= n
            }
        };
        f(&mut self.packets_out, s.pcount);
        if s.has(SACKED_ACKED) {
            f(&mut self.sacked_out, s.pcount);
            if add {
                self.sacked_bytes += s.len() as u64;
            } else {
                self.sacked_bytes -= s.len() as u64;
            }
        }
        if s.has(LOST) {
            f(&mut self.lost_out, s.pcount);
        }
        if s.has(SACKED_RETRANS) {
            f(&mut self.retrans_out, s.pcount);
        }
        if add {
            self.truesize += s.truesize as u64;
        } else {
            self.truesize -= s.truesize as u64;
        }
    }

    fn remove(&mut self, seq: u64) -> Option<Skb> {
        let s = self.map.remove(&seq)?;
        self.account(&s, false);
        Some(s)
    }

    fn insert(&mut self, s: Skb) {
        self.account(&s, true);
        self.map.insert(s.seq, s);
    }

    /// Queues a newly sent skb (its `seq` must be past every queued skb).
    pub fn push(&mut self, s: Skb) {
        debug_assert!(self.last().is_none_or(|l| l.end_seq <= s.seq));
        self.insert(s);
    }

    /// Changes the scoreboard bits of the skb at `seq`: sets `set`, clears `clear`.
    pub fn update(&mut self, seq: u64, set: u8, clear: u8) {
        if let Some(mut s) = self.remove(seq) {
            s.sacked = (s.sacked | set) & !clear;
            self.insert(s);
        }
    }

    /// Records a retransmission of the skb at `seq` at `now`.
    pub fn mark_retransmitted(&mut self, seq: u64, now: Instant) {
        if let Some(mut s) = self.remove(seq) {
            s.sacked |= SACKED_RETRANS | EVER_RETRANS;
            s.tx_time = now;
            self.insert(s);
        }
    }

    /// Splits the skb containing `at` so that an skb starts at `at`
    /// (`tcp_fragment`). Does nothing if `at` is already a boundary or is not inside
    /// any skb's payload.
    pub fn split_at(&mut self, at: u64, mss: u32) {
        let Some((&k, s)) = self.map.range(..at).next_back() else {
            return;
        };
        if at >= s.seq + s.len() as u64 {
            return;
        }
        let mut head = self.remove(k).expect("key exists");
        let tail = head.split_off(at, mss);
        self.insert(head);
        self.insert(tail);
    }

    /// Removes what the cumulative ACK `ack` covers (`tcp_clean_rtx_queue`), trimming a
    /// partly acknowledged head skb (`tcp_trim_head`).
    pub fn clean(&mut self, ack: u64, mss: u32) -> Cleaned {
        let mut c = Cleaned::default();
        self.split_at(ack, mss);
        while let Some((&k, s)) = self.map.iter().next() {
            if s.end_seq > ack {
                break;
            }
            let s = self.remove(k).expect("key exists");
            c.acked_segs += s.pcount;
            c.acked_bytes += s.len() as u64;
            c.truesize += s.truesize as u64;
            c.fin_acked |= s.flags & skb::FLAG_FIN != 0;
            if s.has(SACKED_ACKED) {
                c.acked_sacked_segs += s.pcount;
            }
            if s.has(EVER_RETRANS) {
                c.acked_retrans = true;
            } else if !s.has(SACKED_ACKED) {
                c.first_tx.get_or_insert(s.tx_time);
                c.last_tx = Some(s.tx_time);
            }
        }
        c
    }

    /// Marks `[start, end)` SACKed, splitting skbs at the block's edges
    /// (`tcp_sacktag_walk` with `tcp_match_skb_to_sack`). The block is assumed
    /// validated against `snd_una..snd_nxt` by the caller.
    pub fn sacktag(&mut self, start: u64, end: u64, mss: u32) -> Tagged {
        let mut t = Tagged::default();
        self.split_at(start, mss);
        self.split_at(end, mss);
        let mut cursor = match self.start_key(start) {
            Some(k) => k,
            None => return t,
        };
        while let Some((&k, s)) = self.map.range(cursor..).next() {
            if s.seq >= end || s.end_seq > end {
                break;
            }
            cursor = s.end_seq;
            if s.has(SACKED_ACKED) {
                continue;
            }
            let mut s = self.remove(k).expect("key exists");
            t.segs += s.pcount;
            if s.has(EVER_RETRANS) {
                t.retrans = true;
            } else {
                t.last_tx = Some(t.last_tx.map_or(s.tx_time, |x| x.max(s.tx_time)));
            }
            s.sacked = (s.sacked | SACKED_ACKED) & !(LOST | SACKED_RETRANS);
            self.insert(s);
        }
        t
    }

    /// RFC 6675 section 4 `IsLost`: marks lost every skb, from `from` on, that has more
    /// than `thresh_bytes` SACKed above it, and returns the offset where the rule
    /// stopped holding (the next call may start there: a hint, like Linux's
    /// `lost_skb_hint`). Returns the lowest newly marked offset, if any, too.
    pub fn mark_lost_sacked_above(&mut self, from: u64, thresh_bytes: u64) -> (u64, Option<u64>) {
        let mut sacked_below = self.sacked_below(from);
        let mut first_marked = None;
        let mut cursor = match self.start_key(from) {
            Some(k) => k,
            None => return (from, None),
        };
        while let Some((&k, s)) = self.map.range(cursor..).next() {
            let above = self.sacked_bytes
                - sacked_below
                - if s.has(SACKED_ACKED) {
                    s.len() as u64
                } else {
                    0
                };
            if above <= thresh_bytes {
                return (k, first_marked);
            }
            cursor = s.end_seq;
            if s.has(SACKED_ACKED) {
                sacked_below += s.len() as u64;
            } else if !s.has(LOST) {
                first_marked.get_or_insert(k);
                self.update(k, LOST, SACKED_RETRANS);
            }
        }
        (cursor, first_marked)
    }

    /// SACKed payload bytes below `seq`. Walks from the head; callers keep a hint so
    /// this walk stays short.
    fn sacked_below(&self, seq: u64) -> u64 {
        self.map
            .range(..seq)
            .filter(|(_, s)| s.has(SACKED_ACKED))
            .map(|(_, s)| s.len() as u64)
            .sum()
    }

    /// `tcp_enter_loss`: marks every skb that is not SACKed lost and forgets which ones
    /// were retransmitted.
    pub fn mark_all_lost(&mut self) {
        let keys: Vec<u64> = self.map.keys().copied().collect();
        for k in keys {
            let s = &self.map[&k];
            if !s.has(SACKED_ACKED) && (!s.has(LOST) || s.has(SACKED_RETRANS)) {
                self.update(k, LOST, SACKED_RETRANS);
            }
        }
    }

    /// The first skb from `from` on that is lost and not yet retransmitted.
    pub fn next_lost(&self, from: u64) -> Option<&Skb> {
        self.iter_from(from)
            .find(|s| s.has(LOST) && !s.has(SACKED_RETRANS | SACKED_ACKED))
    }

    /// Checks that the counters equal the sums over the skbs (tests only).
    pub fn check_invariants(&self) {
        let mut c = RtxQueue::default();
        let mut prev_end = None;
        for s in self.map.values() {
            assert!(prev_end.is_none_or(|e| e <= s.seq), "overlapping skbs");
            prev_end = Some(s.end_seq);
            c.account(s, true);
        }
        assert_eq!(c.packets_out, self.packets_out, "packets_out");
        assert_eq!(c.sacked_out, self.sacked_out, "sacked_out");
        assert_eq!(c.lost_out, self.lost_out, "lost_out");
        assert_eq!(c.retrans_out, self.retrans_out, "retrans_out");
        assert_eq!(c.sacked_bytes, self.sacked_bytes, "sacked_bytes");
        assert_eq!(c.truesize, self.truesize, "truesize");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;

    const MSS: u32 = 100;

    fn skb(seq: u64, len: u32) -> Skb {
        Skb {
            seq,
            end_seq: seq + len as u64,
            data: Bytes::from(vec![0u8; len as usize]),
            flags: 0,
            sacked: 0,
            pcount: skb::pcount(len, MSS),
            tx_time: Instant(seq),
            truesize: len + skb::SKB_OVERHEAD,
        }
    }

    fn queue(n: u64, len: u32) -> RtxQueue {
        let mut q = RtxQueue::default();
        for i in 0..n {
            q.push(skb(1 + i * len as u64, len));
        }
        q
    }

    #[test]
    fn sack_splits_and_tags() {
        let mut q = queue(2, 1000); // [1,1001) [1001,2001)
        assert_eq!(q.packets_out, 20);
        let t = q.sacktag(301, 501, MSS);
        assert_eq!(t.segs, 2);
        assert_eq!(q.sacked_out, 2);
        assert_eq!(q.len(), 4);
        q.check_invariants();
        // The same block again tags nothing.
        assert_eq!(q.sacktag(301, 501, MSS).segs, 0);
        // A block across the skb boundary.
        let t = q.sacktag(901, 1201, MSS);
        assert_eq!(t.segs, 3);
        q.check_invariants();
    }

    #[test]
    fn clean_trims_head() {
        let mut q = queue(2, 1000);
        let c = q.clean(551, MSS);
        assert_eq!(c.acked_bytes, 550);
        assert_eq!(q.first().unwrap().seq, 551);
        q.check_invariants();
        let c = q.clean(2001, MSS);
        assert_eq!(c.acked_bytes, 1450);
        assert!(q.is_empty());
        assert_eq!(q.packets_out, 0);
        assert_eq!(q.truesize, 0);
    }

    #[test]
    fn rfc6675_marks_holes_below_three_sacked_segments() {
        let mut q = queue(10, 100); // ten 1-MSS skbs at 1, 101, ...
        q.sacktag(201, 301, MSS); // third SACKed: 1 segment above the first two
        let (_, m) = q.mark_lost_sacked_above(1, 2 * MSS as u64);
        assert_eq!(m, None);
        q.sacktag(301, 501, MSS); // three segments SACKed above the head
        let (hint, m) = q.mark_lost_sacked_above(1, 2 * MSS as u64);
        assert_eq!(m, Some(1));
        assert_eq!(q.lost_out, 2);
        assert_eq!(hint, 201);
        assert_eq!(q.next_lost(0).unwrap().seq, 1);
        q.check_invariants();
    }

    #[test]
    fn enter_loss_marks_unsacked() {
        let mut q = queue(5, 100);
        q.sacktag(201, 301, MSS);
        q.mark_retransmitted(1, Instant(9));
        q.mark_all_lost();
        assert_eq!(q.lost_out, 4);
        assert_eq!(q.retrans_out, 0);
        q.check_invariants();
    }

    proptest! {
        #[test]
        fn random_sacks_keep_invariants(blocks in proptest::collection::vec((0u64..5000, 1u64..800), 1..30), ack in 0u64..5000) {
            let mut q = queue(5, 1000);
            for (s, l) in blocks {
                let start = 1 + s;
                let end = (start + l).min(5001);
                if start < end {
                    q.sacktag(start, end, MSS);
                    q.check_invariants();
                }
            }
            q.mark_lost_sacked_above(1, 300);
            q.check_invariants();
            q.clean(1 + ack, MSS);
            q.check_invariants();
        }
    }
}
