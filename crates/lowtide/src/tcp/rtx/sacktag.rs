//! SACK processing, Linux's `tcp_sacktag_write_queue` (tcp_input.c) and what it calls:
//! the socket's half (`Tcb::sacktag`: `tcp_check_dsack`, `tcp_dsack_seen`,
//! `tcp_is_sackblock_valid`) and the queue's half ([`RtxQueue::sacktag_blocks`]: the
//! `recv_sack_cache` skip, `tcp_sacktag_skip`/`tcp_sacktag_walk`, `tcp_sacktag_one`,
//! `tcp_match_skb_to_sack` and `tcp_shift_skb_data`).
//!
//! Blocks already seen in the previous ACK are skipped (`recv_sack_cache`); each skb
//! a block's walk visits is first offered to `tcp_shift_skb_data`, which moves it
//! (or its covered head) onto a SACKed skb just before it, so runs of SACKed skbs
//! become one skb of up to 65535 * 8 bytes and the queue stays short; where it falls
//! back, partly covered skbs are split only at boundaries of their own segments
//! (`tcp_skb_mss`, `tcp_match_skb_to_sack`) and only while the queue's memory stays under
//! `2 * sndbuf + 128 KB` (`tcp_fragment`, CVE-2019-11478).

use super::queue::{Acct, RtxQueue};
use super::skb::{
    self, DeliveredSkb, Skb, EVER_RETRANS, LOST, SACKED_ACKED, SACKED_RETRANS, TSORTED_OUT,
};
use super::store::Pos;
use crate::mib::Mib;
use crate::tcp::consts::{SKB_OVERHEAD, TCP_NUM_SACKS};
use crate::tcp::seq::Seq;
use crate::tcp::sock::Tcb;
use crate::tcp::Ctx;
use crate::time::Instant;
use lowtide_wire::tcp::TcpRepr;

/// Memory above twice the send buffer at which SACK may no longer split skbs
/// (`tcp_fragment`: `sk_wmem_queued >> 1 > sk_sndbuf + 0x20000`).
const FRAG_SLACK: u64 = 0x20000;
/// `tcp_skb_shift`: an skb a shift builds stays under 65535 segments of
/// `TCP_MIN_GSO_SIZE` (8) bytes, as `tcp_gso_segs` is 16 bits (CVE-2019-11477).
const SHIFT_MAX_LEN: u64 = 65535 * 8;
/// `tcp_skb_shift`: and holds at most 65535 segments.
const SHIFT_MAX_PCOUNT: u64 = 65535;

/// What SACK processing of one ACK found.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SackResult {
    /// Segments newly SACKed.
    pub newly_sacked: u32,
    /// Their bytes (`sack_state.delivered_bytes` before `tcp_clean_rtx_queue`).
    pub newly_sacked_bytes: u32,
    /// The first block was a D-SACK.
    pub dsack: bool,
    /// Segments a D-SACK that counts reported duplicated: delivered too
    /// (`tcp_dsack_seen` adds them to `sack_delivered`).
    pub dsack_segs: u32,
    /// Send time of the oldest newly SACKed never-retransmitted skb (`first_sackt`).
    pub first_tx: Option<Instant>,
    /// Send time of the newest newly SACKed never-retransmitted skb (RTT sample).
    pub last_tx: Option<Instant>,
    /// The most recently sent skb newly SACKed, for the rate sample.
    pub rate: Option<DeliveredSkb>,
    /// The D-SACK covers data up to the outstanding loss probe (`FLAG_DSACK_TLP`).
    pub dsack_tlp: bool,
}

/// What SACK blocks newly marked (`tcp_sacktag_walk`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tagged {
    /// Segments newly SACKed.
    pub segs: u32,
    /// Their bytes (`tcp_sacktag_one`'s `state->delivered_bytes`).
    pub bytes: u32,
    /// Send time of the oldest newly SACKed skb that was never retransmitted
    /// (`first_sackt`: the SACK RTT sample of `tcp_ack_update_rtt`).
    pub first_tx: Option<Instant>,
    /// Send time of the newest newly SACKed skb that was never retransmitted.
    pub last_tx: Option<Instant>,
    /// Some newly SACKed skb had been retransmitted (D-SACK-less undo hint).
    pub retrans: bool,
    /// Parts of skbs moved onto the SACKed skb before them (`TcpExtTCPSackShifted`).
    pub shifted: u32,
    /// Whole SACKed skbs merged into the one before them (`TcpExtTCPSackMerged`).
    pub merged: u32,
    /// Skbs a walk visited that `tcp_shift_skb_data` gave up on
    /// (`TcpExtTCPSackShiftFallback`).
    pub shift_fallback: u32,
    /// Splits refused because the queue used too much memory
    /// (`TcpExtTCPWqueueTooBig`).
    pub refused: u32,
    /// Memory the walk's splits charged (`tcp_fragment`: an skb each), for
    /// `sk_wmem_queued`.
    pub charged: u64,
    /// Memory the walk's merges freed (`tcp_shifted_skb`: what a merged skb held
    /// beyond the bytes it gave), for `sk_wmem_queued`.
    pub freed: u64,
    /// The most recently sent skb newly SACKed (`tcp_rate_skb_delivered`).
    pub rate: Option<DeliveredSkb>,
    /// `state->reord`: the lowest never-retransmitted skb newly SACKed below the
    /// highest SACKed one (a hole filled out of order), or the lowest SACKed
    /// retransmission a D-SACK covers.
    pub reord: Option<u64>,
    /// Segments of retransmitted skbs a D-SACK covers that end above
    /// `undo_marker`: spurious retransmissions, which `tp->undo_retrans` loses
    /// (`tcp_sacktag_one` with `dup_sack`).
    pub dsack_undo: u32,
}

/// The D-SACK among one ACK's SACK blocks, as `tcp_sacktag_write_queue` walks it
/// (`first_sack_index`, `dup_sack`), and what its `tcp_sacktag_one` reads of the
/// socket.
#[derive(Debug, Default, Clone, Copy)]
pub struct DsackWalk {
    /// Which of the blocks given is the D-SACK (`None`: none is).
    pub index: Option<usize>,
    /// `tp->snd_una` during the walk, already moved to this ACK's: an skb ending
    /// at or below it is counted, never tagged ("acked frame is about to be
    /// dropped").
    pub snd_una: u64,
    /// `tp->undo_marker`: only retransmissions ending above it count as spurious.
    pub undo_marker: Option<u64>,
}

/// One SACK block as the walk takes it: `[start, end)`, and whether it is the
/// ACK's D-SACK (`dup_sack`).
#[derive(Debug, Default, Clone, Copy)]
struct Block {
    start: u64,
    end: u64,
    dup: bool,
}

/// What every skb's tagging in one ACK's walk reads: the D-SACK's view of the
/// socket (segment sizes are each skb's own, `tcp_skb_mss`).
struct WalkCtx {
    snd_una: u64,
    undo_marker: Option<u64>,
}

impl WalkCtx {
    /// The walk's view for the D-SACK's `d`.
    fn new(d: DsackWalk) -> Self {
        WalkCtx {
            snd_una: d.snd_una,
            undo_marker: d.undo_marker,
        }
    }
}

/// The lower of two optional sequence offsets.
fn lowest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What `tcp_shift_skb_data` did with an skb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shift {
    /// `fallback`: `tcp_match_skb_to_sack` decides.
    Fallback,
    /// `noop`: the block covers no whole segment of it; left as it is.
    Noop,
    /// It, or its covered head, joined the SACKed skb before it, now at this
    /// position; the walk goes on after it.
    Shifted(Pos),
}

/// `tcp_skb_seglen`: a one-segment skb's length, else its segment size.
fn seglen(s: &Skb) -> u64 {
    s.seglen() as u64
}

/// `tcp_skb_shift`'s limits: `len` bytes of `pcount` segments may join `to`.
fn shift_fits(to: &Skb, len: u64, pcount: u64) -> bool {
    to.len() as u64 + len < SHIFT_MAX_LEN && to.pcount as u64 + pcount <= SHIFT_MAX_PCOUNT
}

/// How a SACK block covers one skb (`tcp_match_skb_to_sack`).
#[derive(PartialEq, Eq)]
enum Match {
    /// Not (or not in whole segments) covered.
    Out,
    /// Covered whole.
    Whole,
    /// Its head was covered and split off (the tail stays unSACKed).
    Head,
    /// The split was refused (`tcp_fragment`'s `-ENOMEM`): the walk stops there.
    Refused,
}

impl Tcb {
    /// `tcp_sacktag_write_queue`, the socket's half: detects a D-SACK
    /// ([RFC 2883 section 4](https://www.rfc-editor.org/rfc/rfc2883#section-4),
    /// `tcp_check_dsack`, against the ACK's own `ack_seq`), validates the ACK's SACK blocks
    /// (`tcp_is_sackblock_valid`) and tags the retransmit queue. `ack` is the new `snd_una`
    /// (`ack_seq` itself, or today's `snd_una` for an old ACK); `self.snd_una` is still the
    /// prior one (lowtide moves it in `clean_rtx_queue`).
    pub(crate) fn sacktag(
        &mut self,
        ctx: &mut Ctx,
        th: &TcpRepr,
        ack_seq: u64,
        ack: u64,
    ) -> SackResult {
        let mut r = SackResult::default();
        let blocks = th.options.sack_blocks();
        if !self.rx_opt.sack_ok || blocks.is_empty() {
            return r;
        }
        let prior_una = self.snd_una;
        let edges = |t: &Tcb, i: usize| {
            let b = blocks[i];
            (t.snd_off(Seq(b.start)), t.snd_off(Seq(b.end)))
        };
        let found_dup = self.check_dsack(
            ctx,
            edges(self, 0),
            blocks.get(1).map(|_| edges(self, 1)),
            ack_seq,
            &mut r,
        );
        // tcp_sacktag_write_queue: with nothing outstanding it stops after
        // tcp_check_dsack (`goto out`): no block is validated, counted or cached.
        if self.rtx.packets_out == 0 {
            return r;
        }
        let mut valid = [(0u64, 0u64); TCP_NUM_SACKS];
        let mut n = 0;
        let mut dsack = None;
        for i in 0..blocks.len() {
            let (start, end) = edges(self, i);
            let dup = i == 0 && found_dup;
            if !self.is_sackblock_valid(dup, start, end, ack) {
                // tcp_sacktag_write_queue: "Don't count olds caused by ACK
                // reordering": an old ACK's block wholly below snd_una is no discard.
                if !dup && ack_seq != ack && end <= ack {
                    continue;
                }
                ctx.mib.inc(match (dup, self.undo.marker) {
                    (true, None) => Mib::TcpExtTCPDSACKIgnoredNoUndo,
                    (true, Some(_)) => Mib::TcpExtTCPDSACKIgnoredOld,
                    (false, _) => Mib::TcpExtTCPSACKDiscard,
                });
                continue;
            }
            // Ignore very old stuff early.
            if end <= prior_una {
                continue;
            }
            // The D-SACK is walked with the others (wholly below the new snd_una,
            // it only counts: tcp_is_sackblock_valid lets none cross it).
            if dup {
                dsack = Some(n);
            }
            valid[n] = (start, end);
            n += 1;
        }
        self.rtx.set_sndbuf(self.sndbuf);
        let walk = DsackWalk {
            index: dsack,
            snd_una: ack,
            undo_marker: self.undo.marker,
        };
        let t = self.rtx.sacktag_blocks_dsack(&valid[..n], walk);
        // tcp_sacktag_one with dup_sack, summed (each step clamps at 0 alike).
        if t.dsack_undo > 0 && self.undo.marker.is_some() && self.undo.retrans > 0 {
            self.undo.retrans = (self.undo.retrans - t.dsack_undo as i32).max(0);
        }
        // tcp_sacktag_write_queue: reordering, unless in Loss with nothing to undo.
        if let Some(low) = t.reord {
            if self.ca_state != crate::tcp::cong::CaState::Loss || self.undo.marker.is_some() {
                self.check_sack_reordering(ctx, low, false);
            }
        }
        r.newly_sacked = t.segs;
        r.newly_sacked_bytes = t.bytes;
        r.first_tx = t.first_tx;
        r.last_tx = t.last_tx;
        r.rate = t.rate;
        // tcp_fragment's and tcp_shifted_skb's sk_wmem_queued_add.
        self.wmem_queued += t.charged;
        self.wmem_free(t.freed);
        ctx.mib.add(Mib::TcpExtTCPSackShifted, t.shifted as u64);
        ctx.mib.add(Mib::TcpExtTCPSackMerged, t.merged as u64);
        ctx.mib
            .add(Mib::TcpExtTCPSackShiftFallback, t.shift_fallback as u64);
        r
    }

    /// `tcp_is_sackblock_valid`: a SACK block must lie above `snd_una` (`ack`, the
    /// new one; a block starting at it is "non-sensical") and end by `snd_nxt`; a
    /// D-SACK may also lie wholly below `snd_una`, down to `undo_marker` (or cross it
    /// by at most `max_window`), and only while a recovery could be undone.
    fn is_sackblock_valid(&self, dup: bool, start: u64, end: u64, ack: u64) -> bool {
        if end > self.snd_nxt || start >= end || start >= self.snd_nxt {
            return false;
        }
        if start > ack {
            return true;
        }
        let Some(marker) = self.undo.marker.filter(|_| dup) else {
            return false;
        };
        if end > ack {
            return false;
        }
        if start >= marker {
            return true;
        }
        end > marker && start + self.max_window as u64 >= end
    }

    /// `tcp_check_dsack`: the first block is a D-SACK when it lies below the ACK or
    /// inside the second block; it counts (`tcp_dsack_seen`) unless dubious. A D-SACK
    /// of data already cumulatively acknowledged (by `snd_una` before this ACK) takes
    /// its segments off `undo_retrans` here; one above is counted in the walk.
    fn check_dsack(
        &mut self,
        ctx: &mut Ctx,
        (start, end): (u64, u64),
        second: Option<(u64, u64)>,
        ack: u64,
        r: &mut SackResult,
    ) -> bool {
        if start < ack {
            ctx.mib.inc(Mib::TcpExtTCPDSACKRecv);
        } else if second.is_some_and(|(s2, e2)| start >= s2 && end <= e2) {
            ctx.mib.inc(Mib::TcpExtTCPDSACKOfoRecv);
        } else {
            return false;
        }
        let dup_segs = self.dsack_seen(start, end, r);
        if dup_segs == 0 {
            ctx.mib.inc(Mib::TcpExtTCPDSACKIgnoredDubious);
            return false;
        }
        ctx.mib.add(Mib::TcpExtTCPDSACKRecvSegs, dup_segs);
        r.dsack_segs = dup_segs as u32;
        let prior_una = self.snd_una;
        if self.undo.marker.is_some_and(|m| end > m) && self.undo.retrans > 0 && end <= prior_una {
            self.undo.retrans = (self.undo.retrans - dup_segs as i32).max(0);
        }
        true
    }

    /// `tcp_dsack_seen`: the segments a D-SACK reports duplicated, or 0 for a dubious
    /// one: longer than the largest window the peer offered, or, counted with every
    /// D-SACK before it, more duplicates than segments ever retransmitted (a receiver
    /// lying to have the sender undo its congestion window reductions).
    fn dsack_seen(&mut self, start: u64, end: u64, r: &mut SackResult) -> u64 {
        if start >= end {
            return 0;
        }
        let len = end - start;
        if len > self.max_window as u64 {
            return 0;
        }
        let mss = self.mss_cache.max(1) as u64;
        let dup_segs = if len > mss {
            len.div_ceil(mss)
        } else {
            // FLAG_DSACK_TLP: one segment ending exactly at the loss probe's
            // tlp_high_seq (set even if the D-SACK then proves dubious).
            if self.tlp_high_seq == Some(end) {
                r.dsack_tlp = true;
            }
            1
        };
        self.dsack_dups += dup_segs;
        if self.dsack_dups > self.total_retrans as u64 {
            return 0;
        }
        r.dsack = true;
        // Linux 5.15+ (tcp_dsack_seen, "more accurately check DSACKs to grow RACK
        // reordering window"): only a D-SACK that reordering may explain, not one
        // for a TLP, grows RACK's reordering window.
        if self.reord_seen > 0 && !r.dsack_tlp {
            self.rack.dsack_seen = true;
        }
        dup_segs
    }
}

impl RtxQueue {
    /// The queue's half of `tcp_sacktag_write_queue`, for one ACK's blocks as
    /// `Tcb::sacktag` validated them (`[start, end)` stream offsets inside
    /// `snd_una..snd_nxt`), none of them a D-SACK: see
    /// [`RtxQueue::sacktag_blocks_dsack`].
    pub fn sacktag_blocks(&mut self, blocks: &[(u64, u64)]) -> Tagged {
        self.sacktag_blocks_dsack(blocks, DsackWalk::default())
    }

    /// The queue's half of `tcp_sacktag_write_queue`: sorts the blocks by their
    /// start ("to allow in order walk of the retrans queue", a D-SACK staying
    /// before a block of the same start), tags what the previous ACK's blocks
    /// (`recv_sack_cache`) did not already cover, then remembers these blocks for
    /// the next ACK. The D-SACK (`d.index`) is walked whole, never skipped by the
    /// cache, with `dup_sack`; the block sorted just before it walks the skbs the
    /// D-SACK covers with `dup_sack` too (`next_dup`, `tcp_maybe_skipping_dsack`),
    /// so that each is tagged as D-SACKed once, whichever walk meets it first.
    pub fn sacktag_blocks_dsack(&mut self, blocks: &[(u64, u64)], d: DsackWalk) -> Tagged {
        let mut sorted = [Block::default(); TCP_NUM_SACKS];
        let n = blocks.len().min(TCP_NUM_SACKS);
        for (i, &(start, end)) in blocks[..n].iter().enumerate() {
            let dup = d.index == Some(i);
            sorted[i] = Block { start, end, dup };
        }
        // Linux's bubble sort swaps on `after(start)` alone: a stable sort by start.
        sorted[..n].sort_by_key(|b| b.start);
        let dup_at = sorted[..n].iter().position(|b| b.dup);
        let w = WalkCtx::new(d);
        self.sack_blocks += n as u64;
        if self.sacked_out == 0 {
            self.highest_sack = 0; // tcp_highest_sack_reset
        }
        let mut t = Tagged::default();
        // tcp_sacktag_write_queue: with nothing SACKed the cache "is already past,
        // so skip checking against it": every block is walked whole.
        let cache = match self.sacked_out {
            0 => [(0, 0); TCP_NUM_SACKS],
            _ => self.recv_sack_cache,
        };
        // One in-order walk per ACK: the blocks are sorted and the walk goes on
        // from where the previous block left it (tcp_sacktag_write_queue).
        let mut cursor = None;
        for (i, &b) in sorted[..n].iter().enumerate() {
            let next_dup = (dup_at == Some(i + 1)).then(|| sorted[i + 1]);
            let mut from = b.start;
            // "Can skip some work by looking recv_sack_cache?": not for a D-SACK.
            let cached = if b.dup { &[][..] } else { &cache[..] };
            for &(cs, ce) in cached {
                if ce <= from || cs >= b.end {
                    continue;
                }
                if cs > from {
                    let head = Block { end: cs, ..b };
                    cursor = self.sacktag_from(cursor, from, head, next_dup, &w, &mut t);
                }
                from = from.max(ce);
                if from < b.end {
                    cursor = self.maybe_skipping_dsack(cursor, next_dup, ce, &w, &mut t);
                }
                // "...tail remains todo... but better entrypoint exists!": nothing
                // is SACKed above the cached end, so the rest of the block is
                // walked whole from there, past any later cached block.
                if from < b.end && self.highest_sack_seq() == Some(from) {
                    break;
                }
            }
            if from < b.end {
                let seek = self.tail_walk_from(b.start, from);
                cursor = self.sacktag_from(cursor, seek, b, next_dup, &w, &mut t);
            }
        }
        self.recv_sack_cache = [(0, 0); TCP_NUM_SACKS];
        for (c, b) in self.recv_sack_cache.iter_mut().zip(&sorted[..n]) {
            *c = (b.start, b.end);
        }
        t
    }

    /// `tcp_maybe_skipping_dsack`: where the cache skips a block's walk to
    /// `skip_to`, the D-SACK sorted after the block (`next_dup`), if it starts
    /// below there, is walked whole with `dup_sack`.
    fn maybe_skipping_dsack(
        &mut self,
        cursor: Option<Pos>,
        next_dup: Option<Block>,
        skip_to: u64,
        w: &WalkCtx,
        t: &mut Tagged,
    ) -> Option<Pos> {
        match next_dup {
            Some(nd) if nd.start < skip_to => self.sacktag_from(cursor, nd.start, nd, None, w, t),
            _ => cursor,
        }
    }

    /// Where `tcp_sacktag_write_queue` walks the rest of a block starting at `start`
    /// that `recv_sack_cache` said was done up to `from`: from `from` (the skb
    /// holding it, `tcp_sacktag_skip` to `cache->end_seq`, or `tp->highest_sack`
    /// when that is where it starts); but a block starting at or above
    /// `tcp_highest_sack_seq` is walked from `tcp_highest_sack`, and
    /// `tcp_sacktag_skip` to `start_seq` then finds the skb holding the block's own
    /// start: the walk covers the cached part again.
    fn tail_walk_from(&self, start: u64, from: u64) -> u64 {
        match self.highest_sack_seq() {
            Some(hss) if from > start && hss != from && start >= hss => start,
            _ => from,
        }
    }

    /// Marks `[start, end)` SACKed (`tcp_sacktag_walk`): finds the first skb by
    /// search, walks only over the skbs the block covers, shifts them onto SACKed
    /// skbs before them (`tcp_shift_skb_data`) or splits partly covered ones at
    /// whole segments. The block is assumed validated against `snd_una..snd_nxt`
    /// by the caller.
    pub fn sacktag(&mut self, start: u64, end: u64) -> Tagged {
        let mut t = Tagged::default();
        let b = Block {
            start,
            end,
            dup: false,
        };
        let w = WalkCtx::new(DsackWalk::default());
        self.sacktag_from(None, start, b, None, &w, &mut t);
        t
    }

    /// `tcp_sacktag_skip` + `tcp_sacktag_walk` from `cursor` (the skb where the
    /// previous block's walk stopped, `None` for the head): the walk starts at the
    /// skb holding `seek` (past what `recv_sack_cache` says was done) and matches
    /// skbs against the block's own `[start, end)`, as Linux walks with the block's
    /// `start_seq` after skipping to `cache->end_seq` (a segment split off by an
    /// earlier, smaller block is then covered whole). A walk at or above
    /// `tcp_highest_sack_seq` starts at `tp->highest_sack` instead, as Linux does in
    /// both shapes; returns where this walk stopped. An skb the D-SACK sorted
    /// next (`next_dup`) covers is tagged as D-SACKed without a shift.
    fn sacktag_from(
        &mut self,
        cursor: Option<Pos>,
        seek: u64,
        b: Block,
        next_dup: Option<Block>,
        w: &WalkCtx,
        t: &mut Tagged,
    ) -> Option<Pos> {
        let first = match self.highest_sack {
            h if h != 0 && seek >= h => self.store.seek_hinted(seek),
            _ => self.store.seek_from(cursor, seek),
        };
        let mut p = first?;
        loop {
            if self.store.get(p).seq >= b.end {
                break;
            }
            let mut dup = b.dup;
            let mut in_sack = Match::Out;
            if let Some(nd) = next_dup.filter(|nd| self.store.get(p).seq < nd.end) {
                in_sack = self.match_skb_to_sack(p, nd.start, nd.end, t);
                dup |= matches!(in_sack, Match::Whole | Match::Head);
            }
            // tcp_sacktag_walk: every skb visited, SACKed or not, is offered to
            // tcp_shift_skb_data first; tcp_match_skb_to_sack decides where it
            // falls back (and may split even a SACKed skb the block cuts).
            if in_sack == Match::Out {
                match self.shift_skb_data(p, b, dup, w, t) {
                    Shift::Shifted(q) => p = q,
                    Shift::Noop => {}
                    Shift::Fallback => {
                        t.shift_fallback += 1;
                        in_sack = self.match_skb_to_sack(p, b.start, b.end, t);
                    }
                }
            }
            match in_sack {
                Match::Refused => break,
                Match::Whole | Match::Head => self.sacktag_one(p, dup, w, t),
                Match::Out => {}
            }
            match self.store.next(p) {
                Some(n) => p = n,
                None => break,
            }
        }
        Some(p)
    }

    /// `tcp_match_skb_to_sack`: whether `[start, end)` covers the skb at `p`; a
    /// multi-segment skb partly covered is split at a boundary of its own segments
    /// first (`tcp_skb_mss`; the start rounded up, the end rounded down), so a SACK
    /// never cuts a segment.
    fn match_skb_to_sack(&mut self, p: Pos, start: u64, end: u64, t: &mut Tagged) -> Match {
        let s = self.store.get(p);
        if start <= s.seq && end >= s.end_seq {
            return Match::Whole;
        }
        if s.pcount <= 1 || s.end_seq <= start {
            return Match::Out;
        }
        let mss = s.gso_size.max(1) as u64;
        let head_in = start <= s.seq;
        let mut pkt_len = if head_in {
            match end - s.seq {
                l if l < mss => return Match::Out,
                l => l,
            }
        } else {
            (start - s.seq).max(mss)
        };
        if pkt_len > mss {
            let rounded = pkt_len / mss * mss;
            pkt_len = if !head_in && rounded < pkt_len {
                rounded + mss
            } else {
                rounded
            };
        }
        if pkt_len >= s.len() as u64 {
            return Match::Out;
        }
        if !self.may_fragment() {
            t.refused += 1;
            return Match::Refused;
        }
        let at = s.seq + pkt_len;
        self.split(p, at, mss as u32);
        t.charged += SKB_OVERHEAD as u64;
        if head_in {
            Match::Head
        } else {
            Match::Out // the walk goes on to the tail, which starts inside the block
        }
    }

    /// `tcp_fragment`'s guard against hostile SACKs (CVE-2019-11478): the queue's
    /// memory as Linux charges it (payload plus one skb overhead per skb) may not pass
    /// twice the send buffer plus 128 KB because of SACK splits.
    fn may_fragment(&self) -> bool {
        let charged = self.payload + self.len() as u64 * SKB_OVERHEAD as u64;
        charged <= 2 * self.sndbuf + FRAG_SLACK
    }

    /// `tcp_sacktag_one` (with `tcp_rate_skb_delivered`) for the skb at `p`, which a
    /// block covers: under a D-SACK (`dup`), a retransmission counts as spurious
    /// (`dsack_undo`) and, SACKed before, as reordering; an skb already
    /// cumulatively acknowledged stops there; an unSACKed one is SACKed; a D-SACK
    /// then clears the retransmitted mark ("We can detect redundant
    /// retransmission in S|R and plain R frames and clear it").
    fn sacktag_one(&mut self, p: Pos, dup: bool, w: &WalkCtx, t: &mut Tagged) {
        let s = self.store.get(p);
        // "Account D-SACK for retransmitted packet."
        if dup && s.has(EVER_RETRANS | SACKED_RETRANS) {
            if w.undo_marker.is_some_and(|m| s.end_seq > m) {
                t.dsack_undo += s.pcount;
            }
            if s.has(SACKED_ACKED) {
                t.reord = lowest(t.reord, Some(s.seq));
            }
        }
        // "Nothing to do; acked frame is about to be dropped (was ACKed)."
        if s.end_seq <= w.snd_una {
            skb::skb_delivered(&mut t.rate, s);
            return;
        }
        if !s.has(SACKED_ACKED) {
            self.sacktag_new(p, t);
        }
        if dup && self.store.get(p).has(SACKED_RETRANS) {
            self.modify(p, |s| s.sacked &= !SACKED_RETRANS);
        }
    }

    /// `tcp_sacktag_one`'s SACKing of an unSACKed skb (with
    /// `tcp_rate_skb_delivered`): counts its segments, the reordering it shows and
    /// its RTT sample.
    fn sacktag_new(&mut self, p: Pos, t: &mut Tagged) {
        let s = self.store.get(p);
        let a = Acct::of(s);
        self.note_delivered(a);
        let s = self.store.get(p);
        skb::skb_delivered(&mut t.rate, s);
        t.segs += s.pcount;
        t.bytes = t.bytes.wrapping_add((s.end_seq - s.seq) as u32);
        // tcp_sacktag_one: "New sack for not retransmitted frame, which was in
        // hole. It is reordering" (below tcp_highest_sack_seq as it stands).
        if !s.has(EVER_RETRANS | SACKED_RETRANS) && self.sacked_out > 0 && s.seq < self.highest_sack
        {
            t.reord = lowest(t.reord, Some(s.seq));
        }
        // tcp_advance_highest_sack
        self.highest_sack = self.highest_sack.max(s.end_seq);
        if s.has(EVER_RETRANS) {
            t.retrans = true;
        } else {
            t.first_tx = Some(t.first_tx.map_or(s.tx_time, |f| f.min(s.tx_time)));
            t.last_tx = t.last_tx.max(Some(s.tx_time));
        }
        self.modify(p, |s| {
            s.sacked = sacked_one(s.sacked);
            // Counted now: not again when cumulatively ACKed.
            s.tx.delivered_mstamp = None;
        });
    }

    /// `tcp_shift_skb_data`: moves the skb at `p`, if `[start, end)` covers it whole,
    /// or the whole segments of its head the block covers, onto the skb before it,
    /// SACKing what it moves (`tcp_shifted_skb`); after a whole skb, the SACKed skb
    /// after it joins too ("Hole filled allows collapsing with the next as well").
    /// Falls back (`TcpExtTCPSackShiftFallback`) where the skb was retransmitted and
    /// is not lost ("Normally R but no L won't result in plain S"), holds no payload
    /// or zerocopy data (`skb_can_shift`, `skb_shift`), has no skb before it, the one
    /// before is not SACKed alone or may not take it (`tcp_skb_can_collapse`), the
    /// block starts inside it, the segment sizes differ (`tcp_skb_seglen`: a
    /// one-segment skb's length, else its `gso_size`, so two one-segment skbs of the
    /// same length join and the result keeps that length as its segment size), or
    /// the result would pass `tcp_skb_shift`'s limits; does nothing (`noop`) where
    /// the block covers none of it or less than a segment of a multi-segment skb.
    ///
    /// `skb_shift`'s own limit, `MAX_SKB_FRAGS` (17) page fragments, binds before
    /// `tcp_skb_shift`'s only when the data spans more than 17 pages: with
    /// `sk_page_frag`'s 32 KB pages filled in stream order (contiguous fragments of
    /// one page coalesce, `skb_can_coalesce`), an skb under 65535 * 8 bytes spans at
    /// most 17, so it is not modelled.
    fn shift_skb_data(
        &mut self,
        p: Pos,
        b: Block,
        dup: bool,
        w: &WalkCtx,
        t: &mut Tagged,
    ) -> Shift {
        let (start, end) = (b.start, b.end);
        let s = self.store.get(p);
        let r_not_l = s.sacked & (LOST | SACKED_RETRANS) == SACKED_RETRANS;
        if (r_not_l && !dup) || s.is_empty() || s.zc.is_some() {
            return Shift::Fallback;
        }
        // "This frame is about to be dropped (was ACKed)."
        if s.end_seq <= w.snd_una {
            return Shift::Fallback;
        }
        let Some(q) = self.store.prev(p) else {
            return Shift::Fallback;
        };
        let prev = self.store.get(q);
        if prev.sacked & (SACKED_ACKED | SACKED_RETRANS | LOST) != SACKED_ACKED
            || !skb::can_collapse_to(prev.flags)
            || prev.flags & (skb::FLAG_SYN | skb::FLAG_FIN) != 0
            || prev.zc.is_some()
        {
            return Shift::Fallback;
        }
        let (len, pcount, mss) = if start <= s.seq && end >= s.end_seq {
            let mss = seglen(s);
            if mss != seglen(prev) {
                return Shift::Fallback;
            }
            (s.len() as u64, s.pcount as u64, mss)
        } else {
            if s.end_seq <= start || s.pcount <= 1 {
                return Shift::Noop;
            }
            // tcp_skb_mss: a multi-segment skb's own segment size.
            let mss = s.gso_size.max(1) as u64;
            if start > s.seq || mss != seglen(prev) {
                return Shift::Fallback;
            }
            match (end - s.seq) / mss {
                0 => return Shift::Noop,
                n => (n * mss, n, mss),
            }
        };
        // "tcp_sacktag_one() won't SACK-tag ranges below snd_una".
        if s.seq + len <= w.snd_una || !shift_fits(prev, len, pcount) {
            return Shift::Fallback;
        }
        let (whole, seq) = (len == s.len() as u64, s.seq);
        // A part: cut off here (`skb_shift` moves page fragments and allocates no
        // skb, so no tcp_fragment memory bound applies). The rest keeps its segment
        // size, one segment left none (`tcp_shifted_skb`).
        if !whole {
            // The rest is Linux's skb: it keeps what the head's truesize held beyond
            // its bytes, and the head, freed by the merge, undoes the split's charge.
            self.split_keep_rest(p, seq + len, mss as u32);
            t.charged += SKB_OVERHEAD as u64;
        }
        // tcp_shifted_skb tags the moved range (`prev` takes no R from it).
        self.sacktag_one(p, dup, w, t);
        t.freed += self.shifted_skb(q, p, mss as u32);
        if !whole {
            t.shifted += 1; // the rest stays: no collapsing with the next
            return Shift::Shifted(q);
        }
        t.merged += 1;
        if let Some(n) = self.store.next(q) {
            let (prev, next) = (self.store.get(q), self.store.get(n));
            if next.sacked & (SACKED_ACKED | SACKED_RETRANS | LOST) == SACKED_ACKED
                && !next.is_empty()
                && next.zc.is_none()
                && seglen(next) == mss
                && skb::can_collapse_to(prev.flags)
                && shift_fits(prev, next.len() as u64, next.pcount as u64)
            {
                t.freed += self.shifted_skb(q, n, mss as u32);
                t.merged += 1;
            }
        }
        Shift::Shifted(q)
    }

    /// `tcp_shifted_skb`: the SACKed skb at `b` (the one after `a`, whole or the
    /// head cut off for the shift) joins `a`: its bytes, segments, flags (`eor` its
    /// own) and `TCPCB_EVER_RETRANS`; `a` keeps its send time and takes `mss` as its
    /// segment size if it had none (a one-segment skb). The truesize of its
    /// bytes moves with them (`skb_shift`: `skb_len_add(tgt, shiftlen)`), the rest is
    /// freed with the skb (`tcp_rtx_queue_unlink_and_free` -> `tcp_wmem_free_skb`)
    /// and returned, for `sk_wmem_queued`.
    ///
    /// The payloads are copied into one buffer: `Bytes` cannot join two slices, and a
    /// list of chunks per skb would make every reader of `Skb::data` pay for this
    /// rare case. The copy is amortized (the merged buffer is uniquely owned and
    /// grows by doubling, so each SACKed byte is copied about twice) and bounded by
    /// `SHIFT_MAX_LEN` per skb. The data is kept (not dropped) so that SACK reneging
    /// can still retransmit it.
    fn shifted_skb(&mut self, a: Pos, b: Pos, mss: u32) -> u64 {
        let y = self.take(b);
        let freed = y.truesize.saturating_sub(y.len()) as u64;
        self.modify(a, |x| {
            // Appends, reusing `x`'s buffer when it is ours alone.
            let cap = |n: usize| n.next_power_of_two().min(SHIFT_MAX_LEN as usize);
            x.data.concat(&y.data, true, cap);
            x.end_seq = y.end_seq;
            x.flags = (x.flags | y.flags) & !skb::FLAG_EOR | (y.flags & skb::FLAG_EOR);
            x.pcount += y.pcount;
            if x.gso_size == 0 {
                x.gso_size = mss;
            }
            x.sacked |= y.sacked & EVER_RETRANS;
            x.truesize += y.len();
            x.uncharged += y.uncharged;
        });
        freed
    }

    /// `tcp_highest_sack_seq`: where the skb after the highest SACKed one starts
    /// (`snd_nxt` if that was the last), `None` with nothing SACKed (`snd_una`).
    pub fn highest_sack_seq(&self) -> Option<u64> {
        (self.sacked_out > 0 && self.highest_sack > 0).then_some(self.highest_sack)
    }
}

/// `tcp_sacktag_one`'s marks for a newly SACKed skb: SACKed, no longer lost; a
/// retransmission not marked lost stays counted as retransmitted ("If the segment
/// is not tagged as lost, we do not clear RETRANS, believing that retransmission
/// is still in flight"), which only a loss undo leaves (`tcp_undo_cwnd_reduction`
/// unmarks every skb). A SACKed skb also leaves the time-sorted list
/// (`tcp_sacktag_walk`: `list_del_init(&skb->tcp_tsorted_anchor)`) until it is sent
/// again: if reneging takes the SACK back, an undo's unmarking does not relist it.
fn sacked_one(sacked: u8) -> u8 {
    let keep = match sacked & (LOST | SACKED_RETRANS) {
        SACKED_RETRANS => SACKED_RETRANS,
        _ => 0,
    };
    (sacked | SACKED_ACKED | TSORTED_OUT) & !(LOST | SACKED_RETRANS) | keep
}

#[cfg(test)]
mod tests {
    use super::super::queue::tests::{
        self as queue_tests, check_payload, queue_of, skb, storm, KINDS, MSS,
    };
    use super::*;
    use crate::tcp::rtx::RtxQueueKind;

    #[test]
    fn sack_splits_and_tags() {
        for kind in KINDS {
            let mut q = queue_of(kind, 2, 1000); // [1,1001) [1001,2001)
            assert_eq!(q.packets_out, 20);
            let t = q.sacktag(301, 501);
            assert_eq!(t.segs, 2);
            assert_eq!(q.sacked_out, 2);
            assert_eq!(q.len(), 4);
            q.check_invariants();
            // The same block again tags nothing.
            assert_eq!(q.sacktag(301, 501).segs, 0);
            // A block across the skb boundary: its part of the second skb is shifted
            // onto the SACKed [901,1001).
            let t = q.sacktag(901, 1201);
            assert_eq!(t.segs, 3);
            assert_eq!(t.shifted, 1);
            assert_eq!(q.get(901).unwrap().end_seq, 1201);
            q.check_invariants();
            check_payload(&q);
        }
    }

    /// `sk_wmem_queued` through SACK: a split costs a new skb (`tcp_fragment`:
    /// `SKB_OVERHEAD`), a merge frees the merged skb (`tcp_shifted_skb` ->
    /// `tcp_rtx_queue_unlink_and_free`) while its bytes' truesize moves with them
    /// (`skb_shift`), and shifting whole segments off an skb's head costs nothing.
    #[test]
    fn sack_splits_charge_and_merges_free_an_skb() {
        const OH: u64 = SKB_OVERHEAD as u64;
        for kind in KINDS {
            let mut q = queue_of(kind, 3, 2 * MSS); // [1,201) [201,401) [401,601)
            let ts = q.truesize;
            // The first skb whole: nothing before it, tagged alone.
            let t = q.sacktag(1, 201);
            assert_eq!((t.segs, t.charged, t.freed, q.truesize), (2, 0, 0, ts));
            // The second whole: merged into the first, its overhead freed.
            let t = q.sacktag(1, 401);
            assert_eq!((t.segs, t.merged, t.charged, t.freed), (2, 1, 0, OH));
            assert_eq!((q.len(), q.truesize), (2, ts - OH));
            // The third's first segment: shifted (split off and merged), no cost.
            let t = q.sacktag(1, 501);
            assert_eq!((t.segs, t.shifted, t.charged, t.freed), (1, 1, OH, OH));
            assert_eq!((q.len(), q.truesize), (2, ts - OH));
            assert_eq!(q.get(1).unwrap().truesize as u64, 5 * MSS as u64 + OH);
            assert_eq!(q.get(501).unwrap().truesize as u64, MSS as u64 + OH);
            // A block inside an unSACKed skb splits it: one skb more.
            let mut q = queue_of(kind, 1, 4 * MSS); // [1,401)
            let t = q.sacktag(201, 301);
            assert_eq!((t.segs, t.charged, t.freed), (1, 2 * OH, 0));
            assert_eq!((q.len(), q.truesize), (3, 4 * MSS as u64 + 3 * OH));
            q.check_invariants();
            check_payload(&q);
        }
    }

    #[test]
    fn sack_rounds_to_whole_segments() {
        for kind in KINDS {
            let mut q = queue_of(kind, 1, 1000); // [1,1001), 10 segments
                                                 // Covers segment [201,301) whole and parts of its neighbours.
            let t = q.sacktag(150, 350);
            assert_eq!(t.segs, 1);
            assert_eq!(q.get(201).unwrap().end_seq, 301);
            assert_eq!(q.sacked_bytes, 100);
            // Less than a segment: nothing.
            assert_eq!(q.sacktag(420, 500).segs, 0);
            q.check_invariants();
            // A one-segment skb partly covered is neither split nor tagged.
            let mut q = queue_of(kind, 3, 100);
            assert_eq!(q.sacktag(150, 301).segs, 1);
            assert_eq!(q.len(), 3);
            q.check_invariants();
        }
    }

    #[test]
    fn adjacent_sacked_skbs_merge() {
        for kind in KINDS {
            let mut q = queue_of(kind, 10, 100);
            let t = q.sacktag(301, 601);
            assert_eq!((t.segs, t.merged), (3, 2));
            assert_eq!(q.len(), 8);
            // Filling the hole below joins the run below and the run above.
            q.sacktag(101, 201);
            let t = q.sacktag(201, 301);
            assert_eq!((t.segs, t.merged), (1, 2));
            assert_eq!(q.len(), 6); // [1) [101..601) [601) [701) [801) [901)
            let s = q.get(101).unwrap();
            assert_eq!((s.end_seq, s.pcount), (601, 5));
            q.check_invariants();
            check_payload(&q);
            // The merged skb is cleaned like its parts.
            let c = q.clean(401);
            assert_eq!((c.acked_segs, c.acked_sacked_segs), (4, 3));
            q.check_invariants();
            check_payload(&q);
        }
    }

    /// tcp_sacktag_one: SACKed retransmissions not marked lost keep their mark
    /// (S|R) and merge with nothing (tcp_shift_skb_data's "R but no L" fallback,
    /// and a SACKed skb before must be plain S); a D-SACK of one clears it.
    #[test]
    fn sacked_retransmissions_not_lost_stay_retransmitted() {
        for kind in KINDS {
            let mut q = queue_of(kind, 10, 100);
            q.update(301, SACKED_RETRANS, 0);
            q.update(401, SACKED_RETRANS, 0);
            q.update(501, SACKED_RETRANS | LOST, 0);
            let t = q.sacktag(301, 601);
            assert_eq!((t.segs, t.merged), (3, 0));
            assert_eq!((q.retrans_out, q.lost_out, q.len()), (2, 0, 10));
            assert!(q.get(301).unwrap().has(SACKED_ACKED | SACKED_RETRANS));
            let t = q.sacktag_blocks_dsack(&[(301, 401)], dsack_at(0, 1, Some(1)));
            assert_eq!(q.retrans_out, 1);
            assert!(!q.get(301).unwrap().has(SACKED_RETRANS));
            // Spurious (above undo_marker), and a D-SACKed retransmission of
            // SACKed data shows reordering.
            assert_eq!((t.dsack_undo, t.reord, t.segs), (1, Some(301), 0));
            q.check_invariants();
        }
    }

    fn dsack_at(index: usize, snd_una: u64, undo_marker: Option<u64>) -> DsackWalk {
        DsackWalk {
            index: Some(index),
            snd_una,
            undo_marker,
        }
    }

    /// tcp_sacktag_write_queue: a D-SACK inside the ACK's second block is sorted
    /// after it (`first_sack_index`), and the second block's walk tags the skbs it
    /// covers with `dup_sack` (`next_dup`): the retransmission not marked lost is
    /// SACKed, its R mark cleared, counted spurious, no reordering (it was not
    /// SACKed before); the one outside the D-SACK keeps R.
    #[test]
    fn a_dsack_inside_the_next_block_is_tagged_by_that_walk() {
        for kind in KINDS {
            let mut q = queue_of(kind, 10, 100);
            q.update(301, SACKED_RETRANS | EVER_RETRANS, 0);
            q.update(401, SACKED_RETRANS | EVER_RETRANS, 0);
            let blocks = [(301, 401), (101, 601)];
            let t = q.sacktag_blocks_dsack(&blocks, dsack_at(0, 1, Some(1)));
            assert_eq!((t.segs, t.dsack_undo, t.reord), (5, 1, None));
            assert!(!q.get(301).unwrap().has(SACKED_RETRANS));
            assert!(q.get(401).unwrap().has(SACKED_RETRANS));
            assert_eq!((q.sacked_out, q.retrans_out), (5, 1));
            // Both blocks are cached, in the walk's order.
            assert_eq!(q.recv_sack_cache[..2], [(101, 601), (301, 401)]);
            q.check_invariants();
        }
    }

    /// tcp_sacktag_one: a D-SACK wholly below the ACK's new snd_una counts its
    /// retransmissions and tags nothing; tcp_shift_skb_data falls back on each skb
    /// ("This frame is about to be dropped").
    #[test]
    fn a_dsack_below_the_new_snd_una_counts_and_tags_nothing() {
        for kind in KINDS {
            let mut q = queue_of(kind, 10, 100);
            q.update(101, EVER_RETRANS, 0);
            q.update(201, EVER_RETRANS, 0);
            let t = q.sacktag_blocks_dsack(&[(101, 301)], dsack_at(0, 301, Some(1)));
            assert_eq!((t.segs, t.dsack_undo, t.shift_fallback), (0, 2, 2));
            assert_eq!(q.sacked_out, 0);
            // Only retransmissions above undo_marker are spurious.
            let t = q.sacktag_blocks_dsack(&[(101, 301)], dsack_at(0, 301, Some(201)));
            assert_eq!(t.dsack_undo, 1);
            q.check_invariants();
        }
    }

    /// tcp_shift_skb_data: "R but no L" falls back only without `dup_sack`; a
    /// D-SACKed retransmission after a SACKed skb joins it, its R mark cleared.
    #[test]
    fn a_dsacked_retransmission_shifts_onto_a_sacked_skb() {
        for kind in KINDS {
            let mut q = queue_of(kind, 4, 100);
            q.sacktag(1, 101);
            q.update(101, SACKED_RETRANS | EVER_RETRANS, 0);
            let t = q.sacktag_blocks_dsack(&[(101, 201)], dsack_at(0, 1, Some(1)));
            assert_eq!(
                (t.segs, t.merged, t.shift_fallback, t.dsack_undo),
                (1, 1, 0, 1)
            );
            let head = q.iter_from(0).next().unwrap();
            assert_eq!(
                (head.end_seq, head.sacked & !TSORTED_OUT),
                (201, SACKED_ACKED | EVER_RETRANS)
            );
            assert_eq!((q.retrans_out, q.sacked_out), (0, 2));
            q.check_invariants();
        }
    }

    /// tcp_shift_skb_data: an skb that ends a MSG_EOR record takes no SACKed
    /// neighbour after it (tcp_skb_can_collapse), but may itself join the skb
    /// before it, which then ends the record (tcp_shifted_skb).
    #[test]
    fn sacked_skbs_do_not_merge_past_a_record_end() {
        for kind in KINDS {
            let mut q = RtxQueue::with_kind(kind);
            for i in 0..4u64 {
                let mut s = skb(1 + i * 100, 100);
                if i == 1 {
                    s.flags = skb::FLAG_EOR;
                }
                q.push(s);
            }
            let t = q.sacktag(1, 401);
            assert_eq!((t.segs, t.merged), (4, 2));
            assert_eq!(q.len(), 2); // [1..201) ends the record, [201..401)
            let s = q.get(1).unwrap();
            assert_eq!((s.end_seq, s.flags), (201, skb::FLAG_EOR));
            q.check_invariants();
            check_payload(&q);
        }
    }

    /// `tcp_shift_skb_data` as Linux 6.18 runs it: the first skb of a run falls
    /// back (no SACKed skb before it), the next ones of the same segment size are
    /// shifted onto it whole, a shorter last one (`tcp_skb_seglen` differs) falls
    /// back and is tagged alone; a block over SACKed skbs shifts them too (the walk
    /// offers every skb it visits), and a SACKed skb after a whole shift joins
    /// ("Hole filled allows collapsing with the next as well").
    #[test]
    fn shift_or_fall_back_as_tcp_shift_skb_data() {
        for kind in KINDS {
            let mut q = queue_of(kind, 4, 100);
            q.push(queue_tests::skb(401, 50));
            let t = q.sacktag(101, 451);
            assert_eq!((t.segs, t.merged, t.shift_fallback), (4, 2, 2));
            let lens: Vec<u64> = q.iter_from(0).map(|s| s.end_seq - s.seq).collect();
            assert_eq!(
                lens,
                [100, 300, 50],
                "[101, 401) one skb, the 50 bytes apart"
            );
            // The hole below the run: it falls back, then the SACKed run is
            // shifted onto it whole; the 50 bytes keep their own segment size.
            let t = q.sacktag(1, 451);
            assert_eq!((t.segs, t.merged, t.shift_fallback), (1, 1, 2));
            assert_eq!(q.len(), 2);
            // Two SACKed runs with a hole between: filling the hole joins both.
            let mut q = queue_of(kind, 6, 100);
            q.sacktag(1, 201);
            q.sacktag(301, 601);
            assert_eq!(q.len(), 3);
            let t = q.sacktag(201, 301);
            assert_eq!((t.segs, t.merged, t.shift_fallback), (1, 2, 0));
            assert_eq!((q.len(), q.sacked_out), (1, 6));
            q.check_invariants();
            check_payload(&q);
        }
    }

    /// `tcp_skb_seglen` is an skb's own: a one-segment skb's length, else its
    /// `gso_size` (`tcp_skb_mss`), whatever the connection's MSS. Two SACKed
    /// one-segment skbs of 400 bytes (sent at an MSS of 1000) join, the result
    /// keeps 400 as its segment size (`tcp_shifted_skb`), so a later 400-byte skb
    /// joins it and a 300-byte one falls back; a multi-segment skb's covered head
    /// is shifted in its own segments (`tcp_skb_mss`), and a block cutting one
    /// whose skb before is not SACKed splits it at its own segment boundary
    /// (`tcp_match_skb_to_sack`).
    /// Each skb's (length, pcount, gso_size), head first.
    fn layout(q: &RtxQueue) -> Vec<(u64, u32, u32)> {
        q.iter_from(0)
            .map(|s| (s.end_seq - s.seq, s.pcount, s.gso_size))
            .collect()
    }

    #[test]
    fn shifts_compare_each_skbs_own_segment_size() {
        let short = |seq: u64, len: u32, mss: u32| {
            let mut s = queue_tests::skb(seq, len);
            s.set_tso_segs(mss);
            s
        };
        for kind in KINDS {
            let mut q = RtxQueue::with_kind(kind);
            for i in 0..5 {
                q.push(short(1 + i * 400, 400, 1000));
            }
            q.push(short(2001, 300, 1000));
            // B and D: an unSACKed skb before each, both fall back.
            for (start, end) in [(401, 801), (1201, 1601)] {
                let t = q.sacktag(start, end);
                assert_eq!((t.segs, t.merged, t.shift_fallback), (1, 0, 1));
            }
            // C joins B and D joins after it (hole filled), E joins them: 400 is
            // now the merged skb's segment size; F's 300 bytes fall back.
            let t = q.sacktag(401, 2301);
            assert_eq!((t.segs, t.merged, t.shift_fallback), (3, 3, 2));
            assert_eq!(layout(&q), [(400, 1, 0), (1600, 4, 400), (300, 1, 0)]);
            q.check_invariants();
            check_payload(&q);

            // A SACKed 400-byte skb, then one of 1200 bytes cut at 400 (3
            // segments) under an MSS of 1000: a block over 900 of its bytes
            // shifts its first two segments (800 bytes), the rest keeps one.
            let mut q = RtxQueue::with_kind(kind);
            q.push(short(1, 400, 1000));
            q.push(short(401, 1200, 400));
            q.sacktag(1, 401);
            let t = q.sacktag(401, 1301);
            assert_eq!((t.segs, t.shifted, t.merged), (2, 1, 0));
            assert_eq!(layout(&q), [(1200, 3, 400), (400, 1, 0)]);
            q.check_invariants();
            check_payload(&q);

            // With no SACKed skb before it, the same block splits it at 800
            // (its own segments), not at the connection's MSS.
            let mut q = RtxQueue::with_kind(kind);
            q.push(short(1, 1200, 400));
            let t = q.sacktag(1, 901);
            assert_eq!((t.segs, t.shift_fallback), (2, 1));
            assert_eq!(layout(&q), [(800, 2, 400), (400, 1, 0)]);
            q.check_invariants();
        }
    }

    /// `tcp_shift_skb_data` asks only that the skb before be SACKed alone
    /// (`TCPCB_TAGBITS`): a retransmitted skb SACKed joins a never-retransmitted
    /// one, which takes `TCPCB_EVER_RETRANS` (`tcp_shifted_skb`); one retransmitted
    /// and not lost falls back ("Normally R but no L won't result in plain S") and
    /// keeps R when tagged (`tcp_sacktag_one`), so the skb after it falls back too
    /// (its prev's `TCPCB_TAGBITS` are not `TCPCB_SACKED_ACKED` alone).
    #[test]
    fn retransmitted_skbs_shift_onto_sacked_ones() {
        for kind in KINDS {
            let mut q = queue_of(kind, 4, 100);
            q.sacktag(1, 101);
            q.update(101, LOST | SACKED_RETRANS | EVER_RETRANS, 0);
            q.update(201, SACKED_RETRANS | EVER_RETRANS, 0);
            let t = q.sacktag(101, 401);
            assert_eq!((t.segs, t.merged, t.shift_fallback), (3, 1, 2));
            let runs: Vec<(u64, u8)> = q
                .iter_from(0)
                .map(|s| (s.end_seq, s.sacked & !TSORTED_OUT))
                .collect();
            let s = SACKED_ACKED | EVER_RETRANS;
            let sr = s | SACKED_RETRANS;
            assert_eq!(runs, [(201, s), (301, sr), (401, SACKED_ACKED)]);
            q.check_invariants();
        }
    }

    /// `tcp_skb_shift`: a run of SACKed skbs becomes one skb of up to 65535 * 8
    /// bytes (`skb_shift`'s 17 fragments of 32 KB pages bind no sooner), not 64 KB.
    #[test]
    fn shifts_build_skbs_up_to_tcp_skb_shift_limit() {
        const MSS_1448: u32 = 1448;
        for kind in KINDS {
            let mut q = RtxQueue::with_kind(kind);
            for i in 0..400u64 {
                let mut s = queue_tests::skb(1 + i * MSS_1448 as u64, MSS_1448);
                s.set_tso_segs(MSS_1448);
                q.push(s);
            }
            let t = q.sacktag(1, 1 + 400 * MSS_1448 as u64);
            assert_eq!((t.segs, t.merged, t.shift_fallback), (400, 398, 2));
            let segs: Vec<u32> = q.iter_from(0).map(|s| s.pcount).collect();
            assert_eq!(
                segs,
                [362, 38],
                "524176 bytes, the next segment would pass 524280"
            );
            q.check_invariants();
            check_payload(&q);
        }
    }

    /// Linux before seed 003 (`tcp_sacktag_write_queue`, Linux 3.18): a block at or
    /// above `tcp_highest_sack_seq` starts at `tp->highest_sack`, so a SACK growing
    /// at the top costs a few nodes in the list too, not a walk from the head.
    #[test]
    fn list_sack_at_the_top_starts_at_highest_sack() {
        let off = |i: u64| 1 + i * MSS as u64;
        for kind in [RtxQueueKind::List, RtxQueueKind::Tree] {
            let mut q = storm(kind);
            assert!(q.len() > 5_000);
            let before = q.nodes_visited();
            for k in 5_002..5_102 {
                q.sacktag_blocks(&[(off(5_001), off(k)), (off(4_991), off(5_000))]);
            }
            let per_ack = (q.nodes_visited() - before) / 100;
            // Without the hint the list walked past the 1,000 skbs below.
            assert!(per_ack < 40, "{kind:?}: {per_ack} nodes per ACK");
            q.check_invariants();
        }
    }

    /// Where no hint applies (a block opening in the middle, as when a
    /// retransmission fills a hole), the list walks from its head and the tree
    /// searches: about 500 skbs passed vs about log2(6,000).
    #[test]
    fn list_sack_in_the_middle_walks_from_the_head() {
        let off = |i: u64| 1 + i * MSS as u64;
        let mut visits = Vec::new();
        for kind in [RtxQueueKind::List, RtxQueueKind::Tree] {
            let mut q = storm(kind);
            let before = q.nodes_visited();
            // Hole 2,500 filled: its block joins the runs either side.
            q.sacktag_blocks(&[(off(2_491), off(2_510))]);
            visits.push(q.nodes_visited() - before);
            q.check_invariants();
        }
        assert!(visits[0] > 450, "list: {} nodes", visits[0]);
        assert!(visits[1] < 60, "tree: {} nodes", visits[1]);
    }

    #[test]
    fn recv_sack_cache_skips_known_blocks() {
        for kind in KINDS {
            let mut q = queue_of(kind, 20, 100);
            let t = q.sacktag_blocks(&[(501, 701)]);
            assert_eq!(t.segs, 2);
            // The same block grown on the right and a new block: only the new parts.
            let t = q.sacktag_blocks(&[(501, 901), (1101, 1201)]);
            assert_eq!(t.segs, 3);
            assert_eq!(q.sacked_out, 5);
            q.check_invariants();
        }
    }

    /// `recv_sack_cache`: a block grown on the right is walked from the cached end
    /// but matched against its own start (`tcp_sacktag_walk` with `start_seq`), so
    /// the segment that the earlier block (covering no whole segment) split off is
    /// SACKed whole, as Linux 6.18 does
    /// (tests/packetdrill/sack-cached-block-grown-covers-split-segment.pkt).
    #[test]
    fn a_grown_block_is_matched_from_its_own_start() {
        for kind in KINDS {
            let mut q = queue_of(kind, 3, 2 * MSS);
            let t = q.sacktag_blocks(&[(265, 353)]);
            assert_eq!((t.segs, q.len()), (0, 4), "split at 301, nothing SACKed");
            let t = q.sacktag_blocks(&[(265, 601)]);
            assert_eq!((t.segs, q.sacked_out), (3, 3));
            q.check_invariants();
        }
    }

    /// `tcp_sacktag_write_queue`: with nothing SACKed when an ACK comes, the previous
    /// ACK's blocks are not consulted ("It's already past"): a block the cache
    /// holds is walked again, so marks cleared since (here by hand) come back.
    #[test]
    fn nothing_sacked_walks_cached_blocks_again() {
        for kind in KINDS {
            let mut q = queue_of(kind, 4, 100);
            assert_eq!(q.sacktag_blocks(&[(101, 301)]).segs, 2);
            q.update(101, 0, SACKED_ACKED);
            q.update(201, 0, SACKED_ACKED);
            assert_eq!(q.sacked_out, 0);
            let t = q.sacktag_blocks(&[(101, 301)]);
            assert_eq!((t.segs, q.sacked_out), (2, 2));
            // With something SACKed the cache holds: the same block adds nothing.
            q.update(201, 0, SACKED_ACKED);
            assert_eq!(q.sacktag_blocks(&[(101, 301)]).segs, 0);
            q.check_invariants();
        }
    }

    /// CVE-2019-11478: SACKs of every other byte SACK nothing (no whole segment is
    /// covered), but each block that starts inside a multi-segment skb splits it at
    /// the next MSS boundary, as `tcp_match_skb_to_sack` does (a later block may then
    /// cover the tail whole): the queue ends as one skb per segment, each new skb
    /// charged `SKB_OVERHEAD` (`tcp_fragment`), as the walk reports.
    #[test]
    fn hostile_every_other_byte() {
        for kind in KINDS {
            let mut q = queue_of(kind, 20, 64 * MSS);
            let (len, truesize) = (q.len(), q.truesize);
            let (mut x, mut charged) = (2, 0);
            while x < 20 * 64 * MSS as u64 {
                let blocks: Vec<(u64, u64)> = (0..4).map(|i| (x + 2 * i, x + 2 * i + 1)).collect();
                let t = q.sacktag_blocks(&blocks);
                assert_eq!((t.segs, t.freed), (0, 0));
                charged += t.charged;
                x += 8;
            }
            assert_eq!(len, 20);
            let split = (20 * 64 - 20) * SKB_OVERHEAD as u64;
            assert_eq!(charged, split);
            assert_eq!(
                (q.len(), q.truesize, q.sacked_out),
                (20 * 64, truesize + split, 0)
            );
            q.check_invariants();
        }
    }

    /// CVE-2019-11478/11479: at the minimum MSS, random tiny blocks may cut the queue
    /// into 48-byte segments only until its charged memory reaches 2 * sndbuf + 128 KB.
    #[test]
    fn hostile_tiny_blocks_stay_bounded() {
        use rand_chacha::rand_core::{RngCore, SeedableRng};
        const MIN_MSS: u32 = 48;
        const SNDBUF: u64 = 1_500_000;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for kind in KINDS {
            let mut q = RtxQueue::with_kind(kind);
            q.set_sndbuf(SNDBUF as u32);
            let (n, len) = (40u64, 65_520u32); // 1365 segments of 48 bytes each
            for i in 0..n {
                let mut s = queue_tests::skb(1 + i * len as u64, len);
                s.pcount = skb::pcount(len, MIN_MSS);
                q.push(s);
            }
            let truesize = q.truesize;
            let limit = 2 * SNDBUF + FRAG_SLACK + SKB_OVERHEAD as u64;
            let mut refused = 0;
            for _ in 0..5000 {
                let blocks: Vec<(u64, u64)> = (0..4)
                    .map(|_| {
                        let s = 1 + rng.next_u64() % (n * len as u64 - 200);
                        (s, s + 1 + rng.next_u64() % 150)
                    })
                    .collect();
                refused += q.sacktag_blocks(&blocks).refused;
                assert!(q.payload + q.len() as u64 * SKB_OVERHEAD as u64 <= limit);
            }
            assert!(refused > 0);
            assert!(q.len() as u64 > n && q.len() < 1000, "{} skbs", q.len());
            assert_eq!(
                q.truesize,
                truesize + (q.len() as u64 - n) * SKB_OVERHEAD as u64
            );
            q.check_invariants();
            check_payload(&q);
        }
    }
}
