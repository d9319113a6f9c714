//! Loss marking on the scoreboard: the walks that mark skbs lost (RFC 6675's
//! `IsLost` walk, kept for the lab and benches; `tcp_enter_loss` and
//! `tcp_timeout_mark_lost`; RACK's `tcp_rack_detect_loss` over the time-sorted
//! order) and `tcp_xmit_retransmit_queue`'s walk to the next lost skb. A child of
//! queue.rs, whose counters every mark goes through (`RtxQueue::modify`).

use super::super::skb::{Skb, EVER_RETRANS, LOST, SACKED_ACKED, SACKED_RETRANS, TSORTED_OUT};
use super::super::tsorted::{self, Tsorted};
use super::{Acct, RackLoss, RtxQueue, RtxWalk};
use crate::time::Instant;

impl RtxQueue {
    /// [RFC 6675 section 4](https://www.rfc-editor.org/rfc/rfc6675#section-4) `IsLost`:
    /// marks lost every skb, from `from` on, that has more than `thresh_bytes` SACKed above
    /// it, and returns the offset where the rule stopped holding (the next call may start
    /// there: a hint, like Linux's `lost_skb_hint`). Returns the lowest newly marked
    /// offset, if any, too. The engine no longer runs it (Linux 6.17 removed RFC 6675
    /// recovery; RACK alone detects losses): lowtide-lab's calibration workload and
    /// the queue benches keep it as a per-ACK walk of the scoreboard.
    pub fn mark_lost_sacked_above(&mut self, from: u64, thresh_bytes: u64) -> (u64, Option<u64>) {
        // From tp->lost_skb_hint, a pointer in Linux (no search from the head).
        let Some(mut p) = self.store.seek_hinted(from) else {
            return (from, None);
        };
        let mut sacked_below = self.sacked_below(self.store.get(p).seq);
        let mut first_marked = None;
        let cursor = loop {
            let s = self.store.get(p);
            let (k, end, sacked, len) = (s.seq, s.end_seq, s.has(SACKED_ACKED), s.len() as u64);
            let above = self.sacked_bytes - sacked_below - if sacked { len } else { 0 };
            if above <= thresh_bytes {
                self.below = (k, sacked_below);
                return (k, first_marked);
            }
            if sacked {
                sacked_below += len;
            } else if !s.has(LOST) {
                first_marked.get_or_insert(k);
                self.modify(p, |s| s.sacked = (s.sacked | LOST) & !SACKED_RETRANS);
            }
            match self.store.next(p) {
                Some(n) => p = n,
                None => break end,
            }
        };
        (cursor, first_marked)
    }

    /// SACKed payload bytes in the skbs starting below `seq`: kept for the last
    /// `mark_lost_sacked_above` stop and summed on from there when `seq` moved up
    /// (else from the head, short when `seq` is near `snd_una`).
    fn sacked_below(&mut self, seq: u64) -> u64 {
        if self.below.0 != seq {
            let (from, base) = if self.below.0 < seq {
                self.below
            } else {
                (0, 0)
            };
            let mut p = self.store.seek(from);
            if let Some(q) = p.filter(|&q| self.store.get(q).seq < from) {
                p = self.store.next(q);
            }
            let sum: u64 = self
                .store
                .iter_from(p)
                .take_while(|s| s.seq < seq)
                .filter(|s| s.has(SACKED_ACKED))
                .map(|s| s.len() as u64)
                .sum();
            self.below = (seq, base + sum);
        }
        self.below.1
    }

    /// `tcp_enter_loss`: marks every skb that is not SACKed lost and forgets which ones
    /// were retransmitted. Returns the retransmitted segments lost again, as
    /// [`RtxQueue::mark_lost_on_timeout`].
    pub fn mark_all_lost(&mut self) -> u32 {
        self.mark_lost_on_timeout(|_| false)
    }

    /// `tcp_timeout_mark_lost`: marks lost the head and every skb not SACKed except
    /// those sent at a time `not_yet` accepts (RACK: sent less than its RTT ago, "don't
    /// mark recently sent ones lost yet"), forgetting which ones were retransmitted.
    /// Returns the retransmitted segments lost again, which `tcp_mark_skb_lost`
    /// counts in `TcpExtTCPLostRetransmit` (a second RTO on a resent head does).
    pub fn mark_lost_on_timeout(&mut self, not_yet: impl Fn(Instant) -> bool) -> u32 {
        self.mark_lost_where(|head, s| head || !not_yet(s.tx_time))
    }

    /// `tcp_mark_skb_lost` on every skb not SACKed that `lost(is_head, skb)` picks:
    /// a skb not yet lost becomes lost (a retransmission not known lost, a TLP's,
    /// stays in flight); a lost one retransmitted is no longer counted as
    /// retransmitted (a retransmission lost again). Returns the segments of the
    /// latter ("Account for retransmits that are lost again").
    pub(super) fn mark_lost_where(&mut self, lost: impl Fn(bool, &Skb) -> bool) -> u32 {
        let mut lost_retrans = 0;
        let mut pos = self.store.first_pos();
        let head = pos;
        while let Some(p) = pos {
            let s = self.store.get(p);
            let changes = !s.has(LOST) || s.has(SACKED_RETRANS);
            if !s.has(SACKED_ACKED) && changes && lost(pos == head, s) {
                if s.has(LOST) {
                    lost_retrans += s.pcount;
                }
                self.modify(p, |s| {
                    s.sacked = if s.has(LOST) {
                        s.sacked & !SACKED_RETRANS
                    } else {
                        s.sacked | LOST
                    }
                });
            }
            pos = self.store.next(p);
        }
        lost_retrans
    }

    /// `tcp_xmit_retransmit_queue`'s walk from `tp->retransmit_skb_hint` (a pointer
    /// in Linux, so reached without a search in either shape): the first skb from
    /// `hint` on that is lost and not yet retransmitted, and the first hole passed
    /// on the way, an skb neither lost, SACKed nor retransmitted, where Linux leaves
    /// the hint (`if (!hole) tp->retransmit_skb_hint = skb`) so that the next walk
    /// starts there again.
    pub fn next_lost_from_hint(&self, hint: u64) -> RtxWalk {
        let mut w = RtxWalk::default();
        for s in self.store.iter_from(self.store.at_hint(hint)) {
            if !s.has(LOST) {
                if w.hole.is_none() && !s.has(SACKED_RETRANS | SACKED_ACKED) {
                    w.hole = Some(s.seq);
                }
            } else if !s.has(SACKED_RETRANS | SACKED_ACKED) {
                w.lost = Some((s.seq, s.pcount));
                break;
            }
        }
        w
    }

    // ---- RACK (RFC 8985) over the time-sorted order -----------------------------

    /// The skbs in flight by transmit time (`tsorted_sent_queue`).
    pub fn tsorted(&self) -> &Tsorted {
        &self.tsorted
    }

    /// `tcp_skb_spurious_retrans`: `s` was retransmitted and the ACK's echoed
    /// timestamp is older than its last transmission (`tcp_tsopt_ecr_before`).
    pub(super) fn spurious_retrans(&self, s: &Skb) -> bool {
        let tx_ms = s.tx_time.as_millis() as u32;
        s.has(SACKED_RETRANS | EVER_RETRANS)
            && self
                .ack_ecr_ms
                .is_some_and(|ecr| (ecr.wrapping_sub(tx_ms) as i32) < 0)
    }

    /// Records a newly delivered skb in [`RtxQueue::delivered`] (`tcp_rack_advance`'s
    /// choice of reference, and the lowest original transmission delivered).
    pub(in crate::tcp::rtx) fn note_delivered(&mut self, a: Acct) {
        let retrans = a.sacked & (EVER_RETRANS | SACKED_RETRANS) != 0;
        let d = &mut self.delivered;
        // tcp_rack_advance: a retransmission acknowledged within min_rtt is
        // ambiguous and skipped; any other skb sets RACK.rtt, and the reference
        // only if sent after it.
        if !retrans || a.tx_time <= self.rack_cutoff {
            d.rack_rtt_tx = Some(a.tx_time);
            if d.rack
                .is_none_or(|(t, e)| tsorted::sent_after(a.tx_time, a.end_seq, t, e))
            {
                d.rack = Some((a.tx_time, a.end_seq));
            }
        }
        if !retrans && d.orig_low.is_none_or(|(s, _)| a.seq < s) {
            d.orig_low = Some((a.seq, a.end_seq));
        }
    }

    /// `tcp_rack_detect_loss`
    /// ([RFC 8985 section 6.2](https://www.rfc-editor.org/rfc/rfc8985#section-6.2) step 5):
    /// walks the skbs sent before the reference `(mstamp, end_seq)`, oldest first, and
    /// marks lost those whose `remaining(tx_time)` (microseconds until RTT + reordering
    /// window have passed since they were sent) is not positive; reports the longest wait
    /// among the others for the reorder timer.
    pub fn rack_detect_loss(
        &mut self,
        mstamp: Instant,
        end_seq: u64,
        remaining: impl Fn(Instant) -> i64,
    ) -> RackLoss {
        let mut r = RackLoss::default();
        let mut lost = Vec::new();
        for (tx, seq, end) in self.tsorted.iter() {
            if !tsorted::sent_after(mstamp, end_seq, tx, end) {
                break;
            }
            match remaining(tx) {
                w if w <= 0 => lost.push(seq),
                w => r.reo_timeout_us = r.reo_timeout_us.max(w as u64),
            }
        }
        for seq in lost {
            let Some(p) = self.store.find(seq) else {
                continue;
            };
            let s = self.store.get(p);
            r.lost_segs += s.pcount;
            // tcp_mark_skb_lost: a lost retransmission is lost again; any other
            // skb becomes lost, a retransmission not known lost (left by a loss
            // undo) keeping its mark.
            if s.has(LOST) {
                r.lost_retrans += s.pcount;
            }
            r.first = Some(r.first.map_or(seq, |f: u64| f.min(seq)));
            // tcp_rack_detect_loss: list_del_init(&skb->tcp_tsorted_anchor).
            self.modify(p, |s| match s.has(LOST) {
                true => s.sacked = (s.sacked & !SACKED_RETRANS) | TSORTED_OUT,
                false => s.sacked |= LOST | TSORTED_OUT,
            });
        }
        r
    }
}
