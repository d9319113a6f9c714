//! The retransmit queue: sent skbs ordered by sequence (Linux's rb-tree
//! `tcp_rtx_queue`, seed 003, or the list before it: `experimental.rtx_queue`) with
//! the SACK scoreboard kept beside it.
//!
//! Every change of an skb goes through `RtxQueue::account` so that the counters
//! (`packets_out`, `sacked_out`, `lost_out`, `retrans_out`, ...) always equal the sums
//! over the skbs, whatever the storage; `check_invariants` verifies that in tests.
//!
//! SACK tagging, which splits and merges skbs, is in `sacktag.rs` beside this file;
//! loss marking (`tcp_timeout_mark_lost`, RACK's walk) in `queue/lost.rs` below it.

use super::skb::{
    self, DeliveredSkb, Skb, TxRate, EVER_RETRANS, LOST, SACKED_ACKED, SACKED_RETRANS, TSORTED_OUT,
};
use super::store::{Pos, Store};
use super::tsorted::{self, Tsorted};
pub use crate::config::RtxQueueKind;
use crate::tcp::consts::{SKB_OVERHEAD, TCP_NUM_SACKS};
use crate::time::Instant;

/// The retransmit queue and its scoreboard counters (in segments, as Linux counts).
#[derive(Debug)]
pub struct RtxQueue {
    pub(super) store: Store,
    /// `packets_out`: segments sent and not cumulatively acknowledged.
    pub packets_out: u32,
    /// `sacked_out`: segments SACKed.
    pub sacked_out: u32,
    /// `lost_out`: segments marked lost.
    pub lost_out: u32,
    /// `retrans_out`: retransmitted segments not yet acknowledged, as Linux counts
    /// them: the skbs marked `SACKED_RETRANS` plus [`RtxQueue::retrans_leaked`].
    pub retrans_out: u32,
    /// What `retrans_out` counts beyond the skbs marked `SACKED_RETRANS`:
    /// `tcp_retransmit_skb` adds an skb's segments whether or not it is still
    /// marked (FASTRETRANS_DEBUG's "retrans_out leaked"; see
    /// [`RtxQueue::count_retransmission`]), and every decrement follows the mark,
    /// so the excess stays until the counters are zeroed
    /// ([`RtxQueue::clear_leaked_counts`]).
    pub retrans_leaked: u32,
    /// `tp->lost`: segments ever marked lost (a lost retransmission counts again).
    pub lost: u64,
    /// Payload bytes SACKed (for RFC 6675's IsLost byte rule).
    pub sacked_bytes: u64,
    /// Total truesize of the queued skbs. Splits share an skb's truesize and merges
    /// add it up, so this total only changes on `push` and `clean` and stays equal to
    /// what the socket charged (`wmem_queued`).
    pub truesize: u64,
    /// Of `truesize`, what pure zerocopy skbs hold without a charge to the
    /// socket's reserve ([`Skb::uncharged`]).
    pub uncharged: u64,
    /// Payload bytes queued.
    pub(super) payload: u64,
    /// `recv_sack_cache`: the previous ACK's SACK blocks, sorted; `(0, 0)` is empty.
    pub(super) recv_sack_cache: [(u64, u64); TCP_NUM_SACKS],
    /// `(key, bytes)`: SACKed payload of the skbs starting before `key`, kept current
    /// by `account` (the `mark_lost_sacked_above` walk starts there without a scan).
    below: (u64, u64),
    /// `sk_sndbuf`, for the fragmentation bound.
    pub(super) sndbuf: u64,
    /// `tcp_highest_sack_seq`: the end of the highest SACKed skb (0: none), where
    /// a SACK walk may start without a search (`tp->highest_sack`).
    pub(super) highest_sack: u64,
    /// SACK blocks processed (`sacktag_blocks`), for the CPU cost model.
    pub(super) sack_blocks: u64,
    /// The skbs in flight by transmit time (`tsorted_sent_queue`), for RACK.
    tsorted: Tsorted,
    /// What the current ACK newly delivered (taken by the engine after each ACK).
    pub delivered: Delivered,
    /// Retransmitted skbs sent after this time are too recent to advance RACK
    /// (`tcp_rack_advance`: RTT below min_rtt is ambiguous); `now - min_rtt`.
    pub rack_cutoff: Instant,
    /// The ACK's echoed timestamp on our millisecond clock (TSecr minus the
    /// connection's offset), if it carries one: a retransmitted skb sent after it was
    /// acknowledged by an earlier transmission (`tcp_skb_spurious_retrans`).
    pub ack_ecr_ms: Option<u32>,
}

/// What one ACK newly delivered (SACKed or cumulatively acknowledged, not SACKed
/// before): RACK's reference skb and the lowest original transmission, for
/// `tcp_rack_advance`, reordering detection and F-RTO's `FLAG_ORIG_SACK_ACKED`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// `(tx_time, end_seq)` of the most recently sent delivered skb RACK may use.
    pub rack: Option<(Instant, u64)>,
    /// `tx_time` of the last skb RACK took, in the order the ACK is processed (the
    /// newly SACKed by sequence, then the cumulatively acknowledged):
    /// `tcp_rack_advance` sets RACK.rtt from every skb it takes, so an older skb
    /// processed after the reference leaves its longer RTT.
    pub rack_rtt_tx: Option<Instant>,
    /// `(seq, end_seq)` of the lowest delivered skb never retransmitted.
    pub orig_low: Option<(u64, u64)>,
}

/// What a walk of `tcp_xmit_retransmit_queue` found ([`RtxQueue::next_lost_from_hint`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RtxWalk {
    /// The first lost skb not yet retransmitted: its `(seq, pcount)`.
    pub lost: Option<(u64, u32)>,
    /// The first hole before it (neither lost, SACKed nor retransmitted).
    pub hole: Option<u64>,
}

/// What one RACK pass over the time-sorted skbs found (`tcp_rack_detect_loss`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RackLoss {
    /// Segments newly marked lost.
    pub lost_segs: u32,
    /// Of those, retransmissions lost again (`TcpExtTCPLostRetransmit`).
    pub lost_retrans: u32,
    /// The lowest offset newly marked lost.
    pub first: Option<u64>,
    /// Longest wait, in microseconds, until an skb sent before the reference would
    /// expire (`reo_timeout`); 0 if none.
    pub reo_timeout_us: u64,
}

impl Default for RtxQueue {
    /// An empty tree-based queue.
    fn default() -> Self {
        RtxQueue::with_kind(RtxQueueKind::Tree)
    }
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
    /// The most recently sent skb acknowledged (`tcp_rate_skb_delivered`).
    pub rate: Option<DeliveredSkb>,
    /// The lowest acknowledged skb neither retransmitted nor SACKed (`reord` of
    /// `tcp_clean_rtx_queue`).
    pub reord: Option<u64>,
    /// The ACK ended inside an skb of several segments (`!fully_acked`:
    /// `tcp_tso_acked` trimmed it).
    pub partial: bool,
}

/// The fields of an skb the counters depend on.
#[derive(Clone, Copy)]
pub(super) struct Acct {
    seq: u64,
    pcount: u32,
    len: u32,
    sacked: u8,
    truesize: u32,
    uncharged: u32,
    tx_time: Instant,
    end_seq: u64,
}

impl Acct {
    pub(super) fn of(s: &Skb) -> Acct {
        Acct {
            seq: s.seq,
            pcount: s.pcount,
            len: s.len(),
            sacked: s.sacked,
            truesize: s.truesize,
            uncharged: s.uncharged,
            tx_time: s.tx_time,
            end_seq: s.end_seq,
        }
    }
}

/// `tcp_can_collapse`: may `s` be merged into the skb before it on retransmission?
/// Not an skb of several segments, nor one whose clone the device still holds
/// (`skb_cloned`: [`Skb::fclone`]; a device that orphans its packets, as tun,
/// frees them at once here), nor a SACKed one, nor one of a zerocopy sender's
/// bytes (`tcp_collapse_retrans`'s `skb_shift` refuses `skb_zcopy` skbs).
fn can_collapse(s: &Skb) -> bool {
    s.pcount <= 1 && s.fclone == 0 && !s.has(SACKED_ACKED) && s.zc.is_none()
}

impl RtxQueue {
    /// An empty queue stored as `kind` says.
    pub fn with_kind(kind: RtxQueueKind) -> RtxQueue {
        RtxQueue {
            store: Store::new(kind),
            packets_out: 0,
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            retrans_leaked: 0,
            lost: 0,
            sacked_bytes: 0,
            truesize: 0,
            uncharged: 0,
            payload: 0,
            recv_sack_cache: [(0, 0); TCP_NUM_SACKS],
            below: (0, 0),
            sndbuf: 4 << 20,
            highest_sack: 0,
            sack_blocks: 0,
            tsorted: Tsorted::default(),
            delivered: Delivered::default(),
            rack_cutoff: Instant::ZERO,
            ack_ecr_ms: None,
        }
    }

    /// How the skbs are stored.
    pub fn kind(&self) -> RtxQueueKind {
        self.store.kind()
    }

    /// Sets `sk_sndbuf`, which bounds how far SACK may fragment the queue.
    pub fn set_sndbuf(&mut self, sndbuf: u32) {
        self.sndbuf = sndbuf as u64;
    }

    /// Nodes of the queue visited so far, counted as Linux's tree or list would
    /// visit them (see `store::Store::visits`): the CPU cost model's measure.
    pub fn nodes_visited(&self) -> u64 {
        self.store.visits()
    }

    /// SACK blocks processed so far.
    pub fn sack_blocks(&self) -> u64 {
        self.sack_blocks
    }

    /// Number of skbs.
    pub fn len(&self) -> usize {
        self.store.len()
    }
    /// True if nothing is outstanding.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The lowest skb.
    pub fn first(&self) -> Option<&Skb> {
        self.store.first_pos().map(|p| self.store.get(p))
    }
    /// The highest skb.
    pub fn last(&self) -> Option<&Skb> {
        self.store.last()
    }
    /// The skb starting at `seq`.
    pub fn get(&self, seq: u64) -> Option<&Skb> {
        self.store.find(seq).map(|p| self.store.get(p))
    }
    /// Skbs from the one containing or following `seq`, in order.
    pub fn iter_from(&self, seq: u64) -> impl Iterator<Item = &Skb> {
        self.store.iter_from(self.store.seek(seq))
    }

    /// Adds (`add`) or removes an skb's share of every counter: the one place the
    /// counters change.
    pub(super) fn account(&mut self, a: Acct, add: bool) {
        fn f<T: core::ops::AddAssign + core::ops::SubAssign>(c: &mut T, n: T, add: bool) {
            if add {
                *c += n
            } else {
                *c -= n
            }
        }
        f(&mut self.packets_out, a.pcount, add);
        if a.sacked & SACKED_ACKED != 0 {
            f(&mut self.sacked_out, a.pcount, add);
            f(&mut self.sacked_bytes, a.len as u64, add);
            if a.seq < self.below.0 {
                f(&mut self.below.1, a.len as u64, add);
            }
        }
        if a.sacked & LOST != 0 {
            f(&mut self.lost_out, a.pcount, add);
        }
        if a.sacked & SACKED_RETRANS != 0 {
            f(&mut self.retrans_out, a.pcount, add);
        }
        f(&mut self.truesize, a.truesize as u64, add);
        f(&mut self.uncharged, a.uncharged as u64, add);
        f(&mut self.payload, a.len as u64, add);
        if tsorted::in_flight(a.sacked) {
            self.tsorted.set(a.tx_time, a.seq, a.end_seq, add);
        }
    }

    /// Changes the skb at `p` in place, keeping the counters right.
    pub(super) fn modify(&mut self, p: Pos, f: impl FnOnce(&mut Skb)) {
        let s = self.store.get_mut(p);
        let old = Acct::of(s);
        f(s);
        let new = Acct::of(s);
        // tcp_sum_lost: newly lost, or a retransmission lost again.
        if new.sacked & LOST != 0
            && (old.sacked & LOST == 0
                || (old.sacked & SACKED_RETRANS != 0 && new.sacked & SACKED_RETRANS == 0))
        {
            self.lost += new.pcount as u64;
        }
        self.account(old, false);
        self.account(new, true);
    }

    /// Removes the skb at `p`.
    pub(super) fn take(&mut self, p: Pos) -> Skb {
        let s = self.store.remove(p);
        self.account(Acct::of(&s), false);
        s
    }

    /// Splits the skb at `p` so that a new skb starts at `at` (strictly inside its
    /// payload); returns the new skb's position (`tcp_fragment`). The new skb costs
    /// `SKB_OVERHEAD` more (`tcp_fragment`: `sk_wmem_queued_add(sk, buff->truesize)`),
    /// which the queue's `truesize` gains and the caller charges to the socket.
    pub(super) fn split(&mut self, p: Pos, at: u64, mss: u32) -> Pos {
        let old = Acct::of(self.store.get(p));
        let tail = self.store.get_mut(p).split_off(at, mss);
        let head = Acct::of(self.store.get(p));
        self.account(old, false);
        self.account(head, true);
        self.account(Acct::of(&tail), true);
        self.store.insert_after(p, tail)
    }

    /// Queues a newly sent skb (its `seq` must be past every queued skb).
    pub fn push(&mut self, s: Skb) {
        debug_assert!(self.last().is_none_or(|l| l.end_seq <= s.seq));
        self.account(Acct::of(&s), true);
        self.store.push_back(s);
    }

    /// Stores the delivery-rate snapshot of a retransmission of the skb at `seq`.
    pub fn set_tx_rate(&mut self, seq: u64, tx: TxRate) {
        if let Some(p) = self.store.find(seq) {
            self.store.get_mut(p).tx = tx;
        }
    }

    /// Changes the scoreboard bits of the skb at `seq`: sets `set`, clears `clear`.
    pub fn update(&mut self, seq: u64, set: u8, clear: u8) {
        if let Some(p) = self.store.find(seq) {
            self.modify(p, |s| s.sacked = (s.sacked | set) & !clear);
        }
    }

    /// `tcp_retransmit_skb` after the skb at `seq` went: marked `TCPCB_RETRANS`
    /// (`SACKED_RETRANS`) and its segments added to `retrans_out`, whether or not
    /// the mark was already there. It is when an undo (`tcp_undo_cwnd_reduction`
    /// with `unmark_loss`) left a retransmission in flight but not lost (R without
    /// L) and an RTO marks it lost again, keeping R (`tcp_mark_skb_lost` clears R
    /// only on an skb already lost), then sends it as the head: Linux counts it
    /// twice, a "retrans_out leaked" only FASTRETRANS_DEBUG's message notes (the
    /// only retransmissions of a marked skb: `tcp_xmit_retransmit_queue` skips
    /// them). The excess goes into [`RtxQueue::retrans_leaked`].
    pub fn count_retransmission(&mut self, seq: u64) {
        let Some(p) = self.store.find(seq) else {
            return;
        };
        let s = self.store.get(p);
        if s.has(SACKED_RETRANS) {
            self.retrans_out += s.pcount;
            self.retrans_leaked += s.pcount;
        } else {
            self.modify(p, |s| s.sacked |= SACKED_RETRANS);
        }
    }

    /// The end of `tcp_clean_rtx_queue` (FASTRETRANS_DEBUG > 0, which
    /// include/net/tcp.h defines as 1): with nothing left in flight and SACK on,
    /// `lost_out`, `sacked_out` and `retrans_out` are zeroed ("Leak l=/s=/r="),
    /// which forgets [`RtxQueue::retrans_leaked`]; the caller checks SACK. Without
    /// SACK the excess stays until `tcp_clear_retrans` (`tcp_disconnect`).
    pub fn clear_leaked_counts(&mut self) {
        if self.packets_out == 0 {
            self.lost_out = 0;
            self.sacked_out = 0;
            self.retrans_out = 0;
            self.retrans_leaked = 0;
        }
    }

    /// Records a retransmission of the skb at `seq` at `now`.
    pub fn mark_retransmitted(&mut self, seq: u64, now: Instant) {
        if let Some(p) = self.store.find(seq) {
            self.modify(p, |s| {
                s.sacked = (s.sacked | SACKED_RETRANS | EVER_RETRANS) & !TSORTED_OUT;
                s.tx_time = now;
            });
        }
    }

    /// The skbs overlapping `[start, end)` that are neither SACKed nor marked lost:
    /// (seq, pcount) of each, in order.
    pub fn unsent_in(&self, start: u64, end: u64) -> Vec<(u64, u32)> {
        let from = self
            .store
            .last_before(start + 1)
            .map_or(start, |p| self.store.get(p).seq);
        self.iter_from(from)
            .take_while(|s| s.seq < end)
            .filter(|s| s.end_seq > start && !s.has(SACKED_ACKED | LOST))
            .map(|s| (s.seq, s.pcount))
            .collect()
    }

    /// The skb at `seq` left again at `now` as its first transmission: a local drop
    /// meant it never did (no retransmission flags; RACK's order moves).
    pub fn mark_resent(&mut self, seq: u64, now: Instant) {
        // Sent after everything already sent, even within one instant of the clock
        // (Linux's microsecond stamps would differ), so RACK orders it last.
        let t = match self.tsorted.last_tx() {
            Some(last) if last >= now => Instant(last.0 + 1),
            _ => now,
        };
        if let Some(p) = self.store.find(seq) {
            self.modify(p, |s| {
                s.sacked &= !TSORTED_OUT;
                s.tx_time = t;
            });
        }
    }

    /// Records a retransmission of the skb at `seq` at `now` with its delivery
    /// snapshot `tx` (`__tcp_retransmit_skb`: ever retransmitted; `retrans_out` is
    /// `tcp_retransmit_skb`'s, a loss probe's retransmission does not count there).
    pub fn mark_sent_again(&mut self, seq: u64, now: Instant, tx: TxRate) {
        if let Some(p) = self.store.find(seq) {
            self.modify(p, |s| {
                s.sacked = (s.sacked | EVER_RETRANS) & !TSORTED_OUT;
                s.tx_time = now;
                s.tx = tx;
            });
        }
    }

    /// Splits the skb containing `at` so that an skb starts at `at`
    /// (`tcp_fragment`). Does nothing if `at` is already a boundary or is not inside
    /// any skb's payload. Returns the memory the new skb costs, for `sk_wmem_queued`
    /// (`SKB_OVERHEAD`, or 0 without a split).
    pub fn split_at(&mut self, at: u64, mss: u32) -> u64 {
        let Some(p) = self.store.last_before(at) else {
            return 0;
        };
        let s = self.store.get(p);
        if at < s.seq + s.len() as u64 {
            self.split(p, at, mss);
            return SKB_OVERHEAD as u64;
        }
        0
    }

    /// Removes what the cumulative ACK `ack` covers (`tcp_clean_rtx_queue`), trimming a
    /// partly acknowledged head skb (`tcp_trim_head`: only the trimmed bytes' truesize
    /// is freed; `Cleaned::truesize` is the memory freed net).
    pub fn clean(&mut self, ack: u64) -> Cleaned {
        let mut c = Cleaned::default();
        // The split that models a trim charges one skb, freed with the trimmed part.
        let mut charged = 0;
        // One search for the head (skb_rb_first), then steps (skb_rb_next).
        let mut head = self.store.first_pos();
        while let Some(p) = head {
            let s = self.store.get(p);
            if s.end_seq > ack {
                // tcp_clean_rtx_queue: a one-segment skb the ACK reaches into stays
                // whole, its acknowledged head below snd_una until the skb is acked
                // or retransmitted (__tcp_retransmit_skb trims it then). A longer
                // one is trimmed to the ACK (after(end_seq, snd_una)), all of its
                // data too when only its FIN is left: the FIN alone stays.
                if s.pcount > 1 && s.seq < ack && ack <= s.seq + s.len() as u64 {
                    // tcp_tso_acked -> tcp_trim_head: the acked part goes, and counts
                    // as the segments the skb no longer holds (none when the rest
                    // needs as many).
                    let orig = s.pcount;
                    c.partial = true;
                    let rest = self.trim_split(p, ack);
                    charged += SKB_OVERHEAD as u64;
                    let acked = orig.saturating_sub(self.store.get(rest).pcount);
                    self.modify(p, |h| h.pcount = acked);
                    continue;
                }
                break;
            }
            let (s, next) = self.store.remove_first().expect("head exists");
            head = next;
            self.account(Acct::of(&s), false);
            c.acked_bytes += s.len() as u64;
            c.truesize += s.truesize as u64;
            if s.pcount == 0 {
                // tcp_clean_rtx_queue stops at a trim that acked no segment: bytes
                // and memory only, no delivery, RACK or RTT sample.
                break;
            }
            skb::skb_delivered(&mut c.rate, &s);
            // tcp_clean_rtx_queue: RACK advances on what the ACK newly delivers,
            // unless the TSecr shows it acknowledges an earlier transmission.
            if !s.has(SACKED_ACKED) && !self.spurious_retrans(&s) {
                self.note_delivered(Acct::of(&s));
            }
            c.acked_segs += s.pcount;
            c.fin_acked |= s.flags & skb::FLAG_FIN != 0;
            if s.has(SACKED_ACKED) {
                c.acked_sacked_segs += s.pcount;
            }
            if s.has(EVER_RETRANS) {
                c.acked_retrans = true;
            } else if !s.has(SACKED_ACKED) {
                c.reord.get_or_insert(s.seq);
                c.first_tx.get_or_insert(s.tx_time);
                c.last_tx = Some(s.tx_time);
            }
        }
        c.truesize = c.truesize.saturating_sub(charged);
        c
    }

    /// `tcp_rtx_queue_purge`: every skb is unlinked and freed (`tcp_wmem_free_skb`),
    /// without `tcp_skb_pcount` accounting, so `sacked_out`, `lost_out`,
    /// `retrans_out` and `tp->lost` stay as they were; no highest SACK is left.
    /// Returns the truesize freed.
    pub fn purge(&mut self) -> u64 {
        let keep = (self.sacked_out, self.lost_out, self.retrans_out);
        let mut freed = 0;
        while let Some(p) = self.store.first_pos() {
            freed += self.take(p).truesize as u64;
        }
        (self.sacked_out, self.lost_out, self.retrans_out) = keep;
        self.highest_sack = 0;
        freed
    }

    /// `tcp_timeout_mark_lost` on SACK reneging (the head is SACKed when the RTO
    /// fires: the receiver dropped what it had SACKed): forgets every SACK mark so
    /// that every skb is marked lost and sent again.
    pub fn clear_sacked(&mut self) {
        let mut pos = self.store.first_pos();
        while let Some(p) = pos {
            if self.store.get(p).has(SACKED_ACKED) {
                self.modify(p, |s| s.sacked &= !SACKED_ACKED);
            }
            pos = self.store.next(p);
        }
        self.recv_sack_cache = [(0, 0); TCP_NUM_SACKS];
        self.highest_sack = 0;
    }

    /// The head skb is SACKed: a cumulative ACK stopped at data the receiver had
    /// SACKed (`FLAG_SACK_RENEGING` in `tcp_clean_rtx_queue`).
    pub fn head_sacked(&self) -> bool {
        self.first().is_some_and(|s| s.has(SACKED_ACKED))
    }

    /// `tcp_trim_head` at retransmission (`__tcp_retransmit_skb`): drops the bytes
    /// of the skb at `seq` below `to` (acknowledged since it was sent) and returns
    /// the memory freed, their truesize (`__pskb_trim_head`'s `delta_truesize`). The
    /// rest keeps the skb's marks; a multi-segment skb is counted again in its own
    /// segment size (`tcp_set_skb_tso_segs(skb, tcp_skb_mss(skb))`). An skb whose data is all acked
    /// but whose FIN is not keeps the FIN alone (`TCP_SKB_CB(skb)->seq` moves to
    /// `snd_una`, the end stays).
    pub fn trim_head(&mut self, seq: u64, to: u64) -> u64 {
        let Some(p) = self.store.find(seq) else {
            return 0;
        };
        let s = self.store.get(p);
        if to <= s.seq || to >= s.end_seq {
            return 0;
        }
        self.trim_split(p, to);
        (self.take(p).truesize as u64).saturating_sub(SKB_OVERHEAD as u64)
    }

    /// [`RtxQueue::split`] for `tcp_trim_head`: the part from `at` on is the skb
    /// Linux keeps (its head pulled), so it keeps the fast clone the device may
    /// hold and the truesize beyond the bytes (`skb->truesize -= delta_truesize`);
    /// the part before goes with `SKB_OVERHEAD` and its bytes, so that freeing it
    /// undoes the split's charge and frees the trimmed bytes.
    ///
    /// The rest is counted again in its own segment size (`tcp_trim_head`:
    /// `tcp_set_skb_tso_segs(skb, tcp_skb_mss(skb))` if it had more than one
    /// segment); a one-segment skb stays one.
    fn trim_split(&mut self, p: Pos, at: u64) -> Pos {
        let mss = match self.store.get(p) {
            s if s.pcount > 1 => s.gso_size,
            _ => u32::MAX,
        };
        let rest = self.split_keep_rest(p, at, mss);
        let fclone = core::mem::take(&mut self.store.get_mut(p).fclone);
        self.store.get_mut(rest).fclone = fclone;
        rest
    }

    /// [`RtxQueue::split`] where the part before `at` is to leave the queue (a trim,
    /// or a SACK shift onto the skb before): it holds `SKB_OVERHEAD` and its bytes'
    /// truesize, the part from `at` on, Linux's skb, keeps the rest.
    pub(super) fn split_keep_rest(&mut self, p: Pos, at: u64, mss: u32) -> Pos {
        let rest = self.split(p, at, mss);
        let head = self.store.get(p);
        let extra = head.truesize.saturating_sub(SKB_OVERHEAD + head.len());
        if extra > 0 {
            self.modify(p, |h| h.truesize -= extra);
            self.modify(rest, |r| r.truesize += extra);
        }
        rest
    }

    /// `skb_fclone_busy` of the skb at `seq`: the id of the fast clone of its last
    /// transmission while the device holds it, else 0. Linux has the skb in hand:
    /// no node is charged.
    pub fn fclone(&self, seq: u64) -> u32 {
        let s = self.store.at_hint(seq).map(|p| self.store.get(p));
        s.filter(|s| s.seq == seq).map_or(0, |s| s.fclone)
    }

    /// The skb at `seq` takes a reference to the `MSG_ZEROCOPY` range `id`
    /// (`skb_zcopy_set`: a Fast Open SYN's data skb, `tcp_send_syn_data`).
    pub fn set_zc(&mut self, seq: u64, id: u32) {
        if let Some(p) = self.store.find(seq) {
            self.store.get_mut(p).zc = Some(id);
        }
    }

    /// The skb at `seq` went to the device in its fast clone `id` (`tcp_transmit_skb`'s
    /// `skb_clone` of an skb whose clone was free). No node is charged.
    pub fn set_fclone(&mut self, seq: u64, id: u32) {
        if let Some(p) = self.store.at_hint(seq) {
            let s = self.store.get_mut(p);
            if s.seq == seq {
                s.fclone = id;
            }
        }
    }

    /// TX completion of the fast clone `id` that a transmission from `seq` went in
    /// (`kfree_skb` of `skb2`: `fclone_ref` falls to one): the skb that sent it, the
    /// one at `seq` or, trimmed since (`tcp_trim_head`), the first after it, has its
    /// clone free again; nothing if it was acknowledged and freed meanwhile. The
    /// clone finds its skb in Linux: no node is charged.
    pub fn fclone_freed(&mut self, seq: u64, id: u32) {
        if let Some(p) = self.store.at_hint(seq) {
            let s = self.store.get_mut(p);
            if s.fclone == id {
                s.fclone = 0;
            }
        }
    }

    /// `tcp_set_skb_tso_segs` + `tcp_adjust_pcount`: the skb at `seq` is counted in
    /// segments of `mss` (and keeps `mss` as its segment size if it has more than
    /// one).
    pub fn set_tso_segs(&mut self, seq: u64, mss: u32) {
        if let Some(p) = self.store.find(seq) {
            let s = self.store.get(p);
            if (s.pcount, s.gso_size) != skb::tso_segs(s.len(), mss) {
                self.modify(p, |s| s.set_tso_segs(mss));
            }
        }
    }

    /// `tcp_retrans_try_collapse` (sysctl `tcp_retrans_collapse`): before the
    /// one-segment skb at `seq` is sent again, the skbs after it join it while the
    /// bytes fit in `space` (`min(avail_wnd, cur_mss)`) and end inside the peer's
    /// window (`wnd_end`), each merge by `tcp_collapse_retrans`. An skb may join
    /// only as `tcp_can_collapse` allows (one segment, not SACKed) and only onto an
    /// skb that ends no `MSG_EOR` record (`tcp_skb_can_collapse`). Returns the
    /// memory freed.
    pub fn retrans_try_collapse(&mut self, seq: u64, mut space: i64, wnd_end: u64) -> u64 {
        let Some(to) = self.store.find(seq) else {
            return 0;
        };
        let first = self.store.get(to);
        if first.flags & skb::FLAG_SYN != 0
            || !can_collapse(first)
            || !skb::can_collapse_to(first.flags)
        {
            return 0;
        }
        space -= first.len() as i64;
        let mut freed = 0;
        while let Some(n) = self.store.next(to) {
            let (head, next) = (self.store.get(to), self.store.get(n));
            if !can_collapse(next) || !skb::can_collapse_to(head.flags) {
                break;
            }
            space -= next.len() as i64;
            // tcp_skb_shift: at most 65535 * TCP_MIN_GSO_SIZE bytes in one skb.
            if space < 0 || next.end_seq > wnd_end || head.len() + next.len() >= 65535 * 8 {
                break;
            }
            freed += self.collapse_retrans(to, n);
        }
        freed
    }

    /// `tcp_collapse_retrans`: the skb at `n` (the one after `to`) joins `to`: its
    /// bytes, its end, its flags (PSH, FIN, the record end) and its
    /// `TCPCB_EVER_RETRANS`; it is unlinked and its segment no longer counts
    /// (`tcp_adjust_pcount`). Returns the memory freed (its overhead: the bytes move).
    fn collapse_retrans(&mut self, to: Pos, n: Pos) -> u64 {
        let next = self.take(n);
        self.modify(to, |s| {
            // A new buffer of both (tcp_collapse_retrans copies `next` in).
            s.data.concat(&next.data, false, |n| n);
            s.end_seq = next.end_seq;
            s.flags = (s.flags & !skb::FLAG_EOR) | next.flags;
            s.sacked |= next.sacked & EVER_RETRANS;
            s.truesize += next.len();
        });
        next.truesize.saturating_sub(next.len()) as u64
    }

    /// `tcp_simple_retransmit`'s walk after the path MTU fell: every skb not SACKed
    /// with a segment longer than `mss` (`tcp_skb_seglen`: a one-segment skb's
    /// length, else its `gso_size`) is lost (`tcp_mark_skb_lost`), since the path
    /// drops it. Returns the retransmitted segments lost again, as
    /// [`RtxQueue::mark_all_lost`].
    pub fn mark_lost_longer_than(&mut self, mss: u32) -> u32 {
        self.mark_lost_where(|_, s| s.seglen() > mss)
    }

    /// `tcp_undo_cwnd_reduction` with `unmark_loss`: nothing is lost after all.
    pub fn unmark_all_lost(&mut self) {
        let mut pos = self.store.first_pos();
        while let Some(p) = pos {
            if self.store.get(p).has(LOST) {
                self.modify(p, |s| s.sacked &= !LOST);
            }
            pos = self.store.next(p);
        }
    }

    /// Checks that the counters equal the sums over the skbs (tests only).
    pub fn check_invariants(&self) {
        let mut c = RtxQueue::with_kind(self.kind());
        c.below.0 = self.below.0;
        let mut prev_end = None;
        for s in self.store.iter_from(self.store.first_pos()) {
            assert!(prev_end.is_none_or(|e| e <= s.seq), "overlapping skbs");
            prev_end = Some(s.end_seq);
            c.account(Acct::of(s), true);
        }
        assert_eq!(c.packets_out, self.packets_out, "packets_out");
        assert_eq!(c.sacked_out, self.sacked_out, "sacked_out");
        assert_eq!(c.lost_out, self.lost_out, "lost_out");
        assert_eq!(
            c.retrans_out + self.retrans_leaked,
            self.retrans_out,
            "retrans_out"
        );
        assert_eq!(c.sacked_bytes, self.sacked_bytes, "sacked_bytes");
        assert_eq!(c.truesize, self.truesize, "truesize");
        assert_eq!(c.uncharged, self.uncharged, "uncharged");
        assert_eq!(c.payload, self.payload, "payload");
        assert_eq!(c.below, self.below, "sacked below the lost hint");
        assert_eq!(c.tsorted, self.tsorted, "time-sorted index");
    }
}

mod lost;

#[cfg(test)]
pub(super) mod tests;
