//! The out-of-order queue (`tp->out_of_order_queue`) and the SACK blocks the receiver
//! reports ([RFC 2018 section 4](https://www.rfc-editor.org/rfc/rfc2018#section-4), in
//! Linux's order: `tcp_sack_new_ofo_skb`).
//!
//! As Linux's rb-tree, the queue holds the segments as received ("skbs"), keyed by
//! start sequence, each with the memory it is charged (`truesize`): a segment costs
//! O(log n) plus its own bytes wherever it lands (`tcp_data_queue_ofo`). Segments may
//! overlap as Linux's do (a segment starting inside the one before it is queued
//! whole), but by `tcp_data_queue_ofo`'s rules their ends rise with their starts: one
//! that ends within its predecessor is dropped, and later ones it covers are dropped.
//! The contiguous runs they cover are kept beside them (start to end, no bytes) for
//! the SACK blocks.
//!
//! Memory is bounded by the caller (`tcp_try_rmem_schedule`, tcp/rmem.rs) through
//! [`OfoQueue::collapse`] (`tcp_collapse_ofo_queue`) and [`OfoQueue::pop_last`]
//! (`tcp_prune_ofo_queue`).

use super::consts::TCP_NUM_SACKS;
use super::rcvqueue::RxStamp;
use super::skbuff::{CoalesceTo, RxHead, RxSkb};
use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;

/// One queued skb: a segment's payload, with those of the segments coalesced into
/// it after it (`tcp_ooo_try_coalesce`), and the memory charged for it.
#[derive(Debug, Clone)]
pub struct OfoSkb {
    /// The first segment's payload, from the key's sequence on.
    data: Bytes,
    /// The payloads of the segments coalesced into it, in order.
    more: Vec<Bytes>,
    /// Payload bytes in all.
    len: usize,
    /// Memory charged (`skb->truesize`).
    pub truesize: u32,
    /// Its head, as `skb_try_coalesce` may take it into the skb before it.
    head: RxHead,
    /// The skb carried the peer's FIN, right after its payload (its `end_seq`
    /// counts it, so its SACK block covers it: `tcp_data_queue_ofo`).
    pub fin: bool,
    /// The skb as the next segment may join it (its frags, its tailroom).
    to: CoalesceTo,
    /// Its arrival stamp (tcp/rx_tstamp.rs); a later segment coalesced into it
    /// gives it its own (`tcp_ooo_try_coalesce`).
    pub stamp: RxStamp,
    /// `max(1, gso_segs)`: the packet's segments, with those of the packets
    /// `tcp_ooo_try_coalesce` joined to it ("in case tcp_drop_reason() is called
    /// later"), at most 0xFFFF; 1 for a buffer `tcp_collapse` made.
    pub segs: u32,
}

impl OfoSkb {
    /// An skb of one segment's payload, as `skb` was received.
    fn new(data: Bytes, skb: RxSkb, fin: bool, stamp: RxStamp) -> OfoSkb {
        OfoSkb {
            len: data.len(),
            data,
            more: Vec::new(),
            truesize: skb.truesize,
            head: skb.head,
            fin,
            to: skb.as_to(),
            stamp,
            segs: 1,
        }
    }

    /// `end_seq` of the skb queued at `seq`: its payload and its FIN.
    fn end(&self, seq: u64) -> u64 {
        seq + self.len as u64 + self.fin as u64
    }

    /// Payload bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The skb has no payload (a bare FIN).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The payload's buffers in order.
    fn pieces(&self) -> impl Iterator<Item = &Bytes> {
        std::iter::once(&self.data).chain(self.more.iter())
    }

    /// The payload from byte `skip` on, as buffers.
    fn pieces_from(&self, mut skip: usize) -> Vec<Bytes> {
        let mut out = Vec::with_capacity(1 + self.more.len());
        for p in self.pieces() {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            out.push(p.slice(skip..));
            skip = 0;
        }
        out
    }
}

/// An skb [`OfoQueue::pop_in_order`] hands over: its bytes at and after
/// `rcv_nxt`, its charge, and whether its FIN follows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InOrder {
    /// The payload not yet received in order, as buffers.
    pub data: Vec<Bytes>,
    /// Memory the skb was charged.
    pub truesize: u32,
    /// The peer's FIN follows `data` (`tcp_ofo_queue` then calls `tcp_fin`).
    pub fin: bool,
    /// The skb's arrival stamp.
    pub stamp: RxStamp,
    /// It started at `rcv_nxt` (`TCP_SKB_CB(skb)->seq`), so it may join the skb
    /// the receive queue ends with (`tcp_try_coalesce`: not one that overlaps it).
    pub at_rcv_nxt: bool,
    /// Its bytes below `rcv_nxt`, which it keeps queued in order (`skb->len`).
    pub pre: u32,
    /// The skb as `skb_try_coalesce` takes it into another (its head, its charge).
    pub skb: RxSkb,
    /// The skb as a later segment may join it (frags it holds, tailroom).
    pub to: CoalesceTo,
}

impl InOrder {
    /// Payload bytes.
    pub fn len(&self) -> usize {
        self.data.iter().map(Bytes::len).sum()
    }

    /// No payload (a bare FIN).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The payload in one buffer (copied if in several).
    pub fn bytes(&self) -> Bytes {
        match self.data.as_slice() {
            [one] => one.clone(),
            many => many.concat().into(),
        }
    }
}

/// What [`OfoQueue::insert`] did with a segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Inserted {
    /// The part already held, for a D-SACK
    /// ([RFC 2883 section 4](https://www.rfc-editor.org/rfc/rfc2883#section-4);
    /// `tcp_dsack_set`, extended by `tcp_dsack_extend`).
    pub dup: Option<(u64, u64)>,
    /// False if every byte was already held and the segment was dropped.
    pub queued: bool,
    /// Segments dropped for holding nothing new (`TcpExtTCPOFOMerge`).
    pub merged: u32,
    /// Joined to the segment ending where it starts (`tcp_ooo_try_coalesce`,
    /// `TcpExtTCPRcvCoalesce`).
    pub coalesced: bool,
    /// `[seq, end)` for `tcp_data_queue_ofo`'s `add_sack:` (`tcp_sack_new_ofo_skb`),
    /// left to [`OfoQueue::add_sack`] by [`OfoQueue::insert_seg_sack_later`]; `None`
    /// for the first segment, whose block is made at once.
    pub add_sack: Option<(u64, u64)>,
}

/// Out-of-order data keyed by stream offset, with the SACK blocks to report.
#[derive(Debug, Default)]
pub struct OfoQueue {
    skbs: BTreeMap<u64, OfoSkb>,
    /// Contiguous runs covered: start -> end.
    runs: BTreeMap<u64, u64>,
    /// The SACK blocks reported, most recently changed first (`selective_acks`,
    /// `rx_opt.num_sacks` of them): kept by Linux's rules, so a block may be
    /// narrower than the run of data around it.
    sacks: Vec<(u64, u64)>,
    bytes: u64,
    truesize: u64,
    /// Queue entries visited or moved and payload bytes copied, for tests of cost.
    work: u64,
    /// The gso_segs of the skbs dropped since [`OfoQueue::take_drops`] last ran
    /// (their `tcp_drop_reason`'s `sk_drops_skbadd`); `purge` leaves it.
    drops: u32,
    /// Truesize of the skbs ever freed here (dropped, pruned, collapsed, purged),
    /// each a `sk_mem_uncharge`; not those handed to the receive queue.
    freed: u64,
}

impl OfoQueue {
    /// Truesize of the skbs ever freed from the queue ([`OfoQueue::freed`]'s field).
    pub fn freed(&self) -> u64 {
        self.freed
    }
    /// True if no out-of-order data is held.
    pub fn is_empty(&self) -> bool {
        self.skbs.is_empty()
    }
    /// Payload bytes held (overlapping segments count each).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// Memory charged for what is held (the queue's part of `sk_rmem_alloc`).
    pub fn truesize(&self) -> u64 {
        self.truesize
    }
    /// Segments held.
    pub fn len(&self) -> usize {
        self.skbs.len()
    }
    /// Entries visited or moved and bytes copied so far (a cost measure for tests).
    pub fn work(&self) -> u64 {
        self.work
    }
    /// End of the highest data held (`ooo_last_skb`'s `end_seq`), if any.
    pub fn last_end(&self) -> Option<u64> {
        self.runs.iter().next_back().map(|(_, e)| *e)
    }
    /// Start of the highest segment (`ooo_last_skb`'s `seq`), if any.
    pub fn last_seq(&self) -> Option<u64> {
        self.skbs.keys().next_back().copied()
    }
    /// The queue holds one segment and it carries a FIN
    /// (`tcp_fastopen_active_disable_ofo_check`).
    pub fn lone_fin(&self) -> bool {
        self.skbs.len() == 1 && self.skbs.values().all(|s| s.fin)
    }
    /// Number of contiguous runs (holes above `rcv_nxt`).
    pub fn runs(&self) -> usize {
        self.runs.len()
    }
    /// The segments of the skbs dropped since the last call (tcp/drops.rs): an
    /// arriving one whose bytes were all there, those it replaced or covered
    /// (`TcpExtTCPOFOMerge`), those `pop_in_order` found wholly below `rcv_nxt`,
    /// and those `pop_last` pruned.
    pub fn take_drops(&mut self) -> u32 {
        std::mem::take(&mut self.drops)
    }

    /// Queues `data` at offset `seq` (above `rcv_nxt`), charged `truesize`, by
    /// `tcp_data_queue_ofo`'s rules: dropped if its predecessor holds all of it,
    /// replacing a predecessor at the same start that it covers, dropping the later
    /// segments it covers. A segment (`skb`) that starts where its predecessor ends
    /// is charged as coalesced into it if it may join it (`tcp_ooo_try_coalesce`,
    /// tcp/rmem.rs).
    pub fn insert(&mut self, seq: u64, data: Bytes, skb: RxSkb) -> Inserted {
        self.insert_seg(seq, data, false, skb, RxStamp::default(), 1)
    }

    /// [`OfoQueue::insert`] for a segment that may carry the peer's FIN after `data`:
    /// its sequence space (`[seq, end_seq)`, FIN counted) is what overlaps and
    /// what the SACK blocks cover, as in `tcp_data_queue_ofo`. `stamp` is its
    /// arrival stamp, `segs` its `max(1, gso_segs)`; the skbs dropped (the
    /// segment itself, or those it replaces) are added to [`OfoQueue::take_drops`].
    pub fn insert_seg(
        &mut self,
        seq: u64,
        data: Bytes,
        fin: bool,
        skb: RxSkb,
        stamp: RxStamp,
        segs: u32,
    ) -> Inserted {
        let r = self.insert_seg_sack_later(seq, data, fin, skb, stamp, segs);
        self.add_sack(&r);
        r
    }

    /// [`OfoQueue::insert_seg`] up to `tcp_data_queue_ofo`'s `add_sack:`, which the
    /// caller runs with [`OfoQueue::add_sack`]: in between, Linux has set the D-SACK
    /// (`tcp_dsack_set`) that an ACK sent by `tcp_sack_new_ofo_skb`'s
    /// `tcp_sack_compress_send_ack` carries, with the blocks as they were.
    pub fn insert_seg_sack_later(
        &mut self,
        seq: u64,
        data: Bytes,
        fin: bool,
        skb: RxSkb,
        stamp: RxStamp,
        segs: u32,
    ) -> Inserted {
        let end = seq + data.len() as u64 + fin as u64;
        let mut r = Inserted::default();
        if end == seq {
            return r;
        }
        self.work += 1;
        let was_empty = self.skbs.is_empty();
        let mut joins = None;
        if let Some((&ps, p)) = self.skbs.range(..=seq).next_back() {
            let pend = p.end(ps);
            // A bare FIN joins too (tcp_ooo_try_coalesce: skb_try_coalesce takes a
            // zero-length skb into any skb).
            if pend == seq && !p.fin {
                let mut joined = p.to;
                if let Some(charge) = skb.coalesce_into(&mut joined, data.len() as u32) {
                    joins = Some((ps, charge, joined));
                    r.coalesced = true;
                }
            }
            if seq < pend {
                if end <= pend {
                    // "All the bits are present. Drop."
                    r.dup = Some((seq, end));
                    r.merged = 1;
                    self.drops += segs;
                    r.add_sack = Some((seq, end)); // `add_sack:` all the same
                    return r;
                }
                if ps < seq {
                    // Partial overlap: both kept.
                    r.dup = Some((seq, pend));
                } else {
                    // Same start, covering it: replaces it.
                    extend_dsack(&mut r.dup, ps, pend);
                    let old = self.remove(ps).expect("the skb it replaces");
                    self.count_drop(&old);
                    r.merged += 1;
                }
            }
        }
        r.merged += self.merge_right(seq, end, &mut r.dup);
        self.bytes += data.len() as u64;
        match joins {
            // tcp_ooo_try_coalesce: the segment's bytes join the skb before it,
            // charged what skb_try_coalesce adds; it takes the segment's stamp
            // (tcp_try_coalesce) and FIN.
            Some((ps, charge, joined)) => {
                let p = self.skbs.get_mut(&ps).expect("the skb it joins");
                p.len += data.len();
                if !data.is_empty() {
                    p.more.push(data);
                }
                (p.truesize, p.to, p.fin) = (p.truesize + charge, joined, fin);
                p.stamp.join(stamp);
                p.segs = (p.segs + segs.max(1)).min(0xFFFF);
                self.truesize += charge as u64;
            }
            None => {
                self.truesize += skb.truesize as u64;
                let mut s = OfoSkb::new(data, skb, fin, stamp);
                s.segs = segs.max(1);
                self.skbs.insert(seq, s);
            }
        }
        self.cover(seq, end);
        if was_empty {
            // tcp_data_queue_ofo, "Initial out of order segment, build 1 SACK".
            self.sacks.clear();
            self.sacks.push((seq, end));
        } else {
            r.add_sack = Some((seq, end));
        }
        r.queued = true;
        r
    }

    /// `tcp_data_queue_ofo`'s `add_sack:` for what [`OfoQueue::insert_seg_sack_later`]
    /// queued or dropped (`tcp_sack_new_ofo_skb`).
    pub fn add_sack(&mut self, r: &Inserted) {
        if let Some((seq, end)) = r.add_sack {
            self.sack_new_ofo_skb(seq, end);
        }
    }

    /// `tcp_data_queue_ofo`'s `merge_right`: drops the segments after `seq` that
    /// `[seq, end)` covers; returns how many.
    fn merge_right(&mut self, seq: u64, end: u64, dup: &mut Option<(u64, u64)>) -> u32 {
        let mut n = 0;
        while let Some((&ns, next)) = self.skbs.range(seq + 1..).next() {
            self.work += 1;
            let nend = next.end(ns);
            if end <= ns {
                break;
            }
            if end < nend {
                extend_dsack(dup, ns, end);
                break;
            }
            extend_dsack(dup, ns, nend);
            let gone = self.remove(ns).expect("segment exists");
            self.count_drop(&gone);
            n += 1;
        }
        n
    }

    /// A removed skb dropped (`tcp_drop_reason`): its segments counted as drops,
    /// its truesize as freed.
    fn count_drop(&mut self, s: &OfoSkb) {
        self.drops += s.segs;
        self.freed += s.truesize as u64;
    }

    /// Takes the segment at `seq` out of the queue (its coverage is left to the
    /// caller).
    fn remove(&mut self, seq: u64) -> Option<OfoSkb> {
        let s = self.skbs.remove(&seq)?;
        self.bytes -= s.len as u64;
        self.truesize -= s.truesize as u64;
        Some(s)
    }

    /// Adds `[seq, end)` to the runs covered, merging the runs it touches.
    fn cover(&mut self, seq: u64, end: u64) {
        let mut start = seq;
        let mut stop = end;
        if let Some((&ps, &pe)) = self.runs.range(..=seq).next_back() {
            if pe >= seq {
                start = ps;
                stop = stop.max(pe);
            }
        }
        let touching: Vec<(u64, u64)> = self
            .runs
            .range(start..=stop)
            .map(|(s, e)| (*s, *e))
            .collect();
        for (s, e) in touching {
            self.work += 1;
            self.runs.remove(&s);
            stop = stop.max(e);
        }
        self.runs.insert(start, stop);
    }

    /// `tcp_sack_new_ofo_skb`: out-of-order data `[seq, end)` extends the first
    /// block it overlaps or adjoins, which moves to the front and absorbs the blocks
    /// it now reaches (`tcp_sack_maybe_coalesce`); else it opens a block at the
    /// front, the oldest falling out past [`TCP_NUM_SACKS`]. A block that fell out
    /// is not reported again, even when new data joins the run it was part of.
    fn sack_new_ofo_skb(&mut self, seq: u64, end: u64) {
        let slot = self.sack_slot(seq, end);
        if slot < self.sacks.len() {
            let b = &mut self.sacks[slot];
            *b = (b.0.min(seq), b.1.max(end)); // tcp_sack_extend
            self.sacks[..=slot].rotate_right(1);
            self.sack_maybe_coalesce();
            return;
        }
        self.sacks.truncate(TCP_NUM_SACKS - 1);
        self.sacks.insert(0, (seq, end));
    }

    /// `tcp_sack_maybe_coalesce`: the first block absorbs every later block it
    /// overlaps or adjoins.
    fn sack_maybe_coalesce(&mut self) {
        let mut i = 1;
        while i < self.sacks.len() {
            let ((s0, e0), (s, e)) = (self.sacks[0], self.sacks[i]);
            if s <= e0 && s0 <= e {
                self.sacks[0] = (s0.min(s), e0.max(e));
                self.sacks.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// `tcp_sack_remove` as `rcv_nxt` advances: the blocks it reaches go, and all of
    /// them once the queue is empty.
    fn sack_remove(&mut self, rcv_nxt: u64) {
        if self.skbs.is_empty() {
            self.sacks.clear();
        }
        self.sacks.retain(|&(s, _)| s > rcv_nxt);
    }

    /// Where `tcp_sack_new_ofo_skb` finds data `[seq, end)`: the index of the first
    /// reported block (most recent first) that it overlaps or adjoins
    /// (`tcp_sack_extend`), or the number of blocks if it opens a new one.
    pub fn sack_slot(&self, seq: u64, end: u64) -> usize {
        self.sacks
            .iter()
            .position(|&(s, e)| seq <= e && s <= end)
            .unwrap_or(self.sacks.len())
    }

    /// Takes the next segment that `rcv_nxt` reaches, if any, with its bytes at and
    /// after `rcv_nxt` (`tcp_ofo_queue`). Segments wholly below `rcv_nxt` (FIN
    /// counted) are dropped on the way.
    pub fn pop_in_order(&mut self, rcv_nxt: u64) -> Option<InOrder> {
        self.pop_in_order_dsack(rcv_nxt, 0, &mut None)
    }

    /// [`OfoQueue::pop_in_order`] as `tcp_ofo_queue` walks the queue: each segment
    /// taken or dropped that starts below `dsack_high` (`rcv_nxt` when the walk
    /// began) widens the D-SACK block `dup` with its part below it
    /// (`tcp_dsack_extend`).
    pub fn pop_in_order_dsack(
        &mut self,
        rcv_nxt: u64,
        dsack_high: u64,
        dup: &mut Option<(u64, u64)>,
    ) -> Option<InOrder> {
        loop {
            let (&k, _) = self.skbs.iter().next()?;
            if k > rcv_nxt {
                return None;
            }
            self.work += 1;
            let s = self.remove(k).expect("segment exists");
            let end = s.end(k);
            if k < dsack_high {
                extend_dsack(dup, k, end.min(dsack_high));
            }
            self.uncover_below(rcv_nxt.max(end));
            self.sack_remove(rcv_nxt.max(end));
            if end <= rcv_nxt {
                self.count_drop(&s); // tcp_ofo_queue's SKB_DROP_REASON_TCP_OFO_DROP
            }
            if end > rcv_nxt {
                let skip = ((rcv_nxt - k) as usize).min(s.len);
                return Some(InOrder {
                    data: s.pieces_from(skip),
                    truesize: s.truesize,
                    fin: s.fin,
                    stamp: s.stamp,
                    at_rcv_nxt: k == rcv_nxt,
                    pre: skip as u32,
                    skb: RxSkb {
                        truesize: s.truesize,
                        head: s.head,
                    },
                    to: s.to,
                });
            }
        }
    }

    /// Forgets the runs that end at or below `upto`, and the start of one it cuts.
    fn uncover_below(&mut self, upto: u64) {
        while let Some((&s, &e)) = self.runs.iter().next() {
            if s >= upto {
                break;
            }
            self.runs.remove(&s);
            if e > upto {
                self.runs.insert(upto, e);
                break;
            }
        }
    }

    /// Drops the highest segment (`tcp_prune_ofo_queue`, one step) and returns it.
    /// The SACK blocks are left as they are: the caller resets them once it has
    /// pruned (`tcp_sack_reset`).
    pub fn pop_last(&mut self) -> Option<(u64, OfoSkb)> {
        let seq = self.last_seq()?;
        self.work += 1;
        let s = self.remove(seq)?;
        self.count_drop(&s); // tcp_prune_ofo_queue's tcp_drop_reason
                             // Ends rise with starts: what is left ends at the new last segment's end.
        let top = self.skbs.iter().next_back().map_or(0, |(k, v)| v.end(*k));
        while let Some((&rs, &re)) = self.runs.iter().next_back() {
            if re <= top {
                break;
            }
            self.runs.remove(&rs);
            if rs < top {
                self.runs.insert(rs, top);
                break;
            }
        }
        Some((seq, s))
    }

    /// `tcp_sack_reset`: no SACK blocks until new out-of-order data arrives.
    pub fn reset_sacks(&mut self) {
        self.sacks.clear();
    }

    /// The SACK blocks to report, most recent first, as offsets `[start, end)`.
    pub fn sack_blocks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.sacks.iter().copied()
    }

    /// Drops everything; returns the payload bytes freed.
    pub fn purge(&mut self) -> u64 {
        let b = self.bytes;
        self.skbs.clear();
        self.runs.clear();
        self.sacks.clear();
        self.bytes = 0;
        self.freed += std::mem::take(&mut self.truesize);
        b
    }

    /// `tcp_collapse_ofo_queue`: each run of more than one segment, or of a page's
    /// worth of bytes, is copied into fewer, fuller buffers (`OfoQueue::collapse_run`);
    /// single small segments are left, and once they add up to an eighth of `rcvbuf`
    /// the walk stops. `bloated(truesize, len)` is `tcp_win_from_space(truesize) >
    /// len`, `alloc(len)` a new buffer of `len` bytes (`alloc_skb`). Returns the
    /// skbs freed (`TcpExtTCPRcvCollapsed`).
    pub fn collapse(
        &mut self,
        rcvbuf: u32,
        bloated: impl Fn(u32, u32) -> bool,
        alloc: impl Fn(u32) -> RxSkb,
    ) -> u32 {
        // One ordered walk over runs and segments together, as Linux's rb_next walk
        // (a map search per run would cost O(log n) each, and the walk reaches up to
        // an eighth of the buffer in tiny segments every time a segment does not
        // fit). The runs chosen are collapsed after the walk: collapsing one keeps
        // its span and leaves the others as they were.
        let mut sum_tiny = 0u64;
        let mut chosen = Vec::new();
        let mut skbs = self.skbs.iter().peekable();
        for (&start, &end) in &self.runs {
            self.work += 1;
            while skbs.next_if(|(k, _)| **k < start).is_some() {}
            let head = skbs
                .next_if(|(k, _)| **k < end)
                .map_or(0, |(_, s)| s.truesize);
            let more = skbs.peek().is_some_and(|(k, _)| **k < end);
            if more || end - start >= super::skbuff::SKB_MAX_ORDER0 as u64 {
                chosen.push((start, end));
            } else {
                sum_tiny += head as u64;
                if sum_tiny > (rcvbuf >> 3) as u64 {
                    break;
                }
            }
        }
        chosen
            .into_iter()
            .map(|(start, end)| self.collapse_run(start, end, &bloated, &alloc))
            .sum()
    }

    /// `tcp_collapse` on the run `[start, end)`: segments that carry their overhead
    /// well and adjoin the next exactly are kept; from the first that does not, the
    /// rest of the run is copied into buffers of at most `SKB_MAX_ORDER(0, 0)` bytes.
    fn collapse_run(
        &mut self,
        mut start: u64,
        end: u64,
        bloated: &impl Fn(u32, u32) -> bool,
        alloc: &impl Fn(u32) -> RxSkb,
    ) -> u32 {
        // tcp_collapse leaves a segment with a FIN (and what follows it) alone.
        let keys: Vec<u64> = self
            .skbs
            .range(start..end)
            .take_while(|(_, s)| !s.fin)
            .map(|(k, _)| *k)
            .collect();
        let mut from = None;
        for (i, &k) in keys.iter().enumerate() {
            let s = &self.skbs[&k];
            let kend = k + s.len as u64;
            let overlaps_next = keys.get(i + 1).is_some_and(|&n| n != kend);
            if bloated(s.truesize, s.len as u32) || k < start || overlaps_next {
                from = Some(i);
                break;
            }
            start = kend;
        }
        let Some(from) = from else { return 0 };
        let mut old = Vec::with_capacity(keys.len() - from);
        for &k in &keys[from..] {
            let s = self.remove(k).expect("segment exists");
            self.freed += s.truesize as u64;
            old.push((k, s));
        }
        let mut at = start;
        let mut idx = 0;
        while at < end {
            let key = at;
            // tcp_collapse: nskb->cb is the skb's it starts in; no tstamp.
            let has = old
                .iter()
                .any(|(k, s)| (*k..k + s.len as u64).contains(&at) && s.stamp.has);
            let copy = (end - at).min(super::skbuff::SKB_MAX_ORDER0 as u64) as usize;
            let mut buf = BytesMut::with_capacity(copy);
            while buf.len() < copy {
                let Some((k, s)) = old.get(idx) else { break };
                let kend = k + s.len as u64;
                if kend <= at {
                    idx += 1;
                    continue;
                }
                if *k > at {
                    break; // a hole: runs have none, but never read past one
                }
                let mut off = (at - k) as usize;
                for p in s.pieces() {
                    if buf.len() == copy {
                        break;
                    }
                    if off >= p.len() {
                        off -= p.len();
                        continue;
                    }
                    let take = (p.len() - off).min(copy - buf.len());
                    buf.extend_from_slice(&p[off..off + take]);
                    at += take as u64;
                    off = 0;
                }
            }
            if buf.is_empty() {
                break;
            }
            self.work += buf.len() as u64;
            let nskb = alloc(buf.len() as u32);
            self.bytes += buf.len() as u64;
            self.truesize += nskb.truesize as u64;
            let stamp = RxStamp { has, at: None };
            self.skbs
                .insert(key, OfoSkb::new(buf.freeze(), nskb, false, stamp));
        }
        old.len() as u32
    }
}

/// `tcp_dsack_extend`: set the D-SACK block if none, else widen it when `[s, e)`
/// overlaps or adjoins it (`tcp_sack_extend`).
fn extend_dsack(dup: &mut Option<(u64, u64)>, s: u64, e: u64) {
    match dup {
        None => *dup = Some((s, e)),
        Some((ds, de)) if s <= *de && *ds <= e => {
            *ds = (*ds).min(s);
            *de = (*de).max(e);
        }
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::skbuff::RxSkb;
    use proptest::prelude::*;

    fn bytes(range: core::ops::Range<u64>) -> Bytes {
        range.map(|i| i as u8).collect::<Vec<u8>>().into()
    }

    /// A collapsed buffer charged `truesize`, no tailroom.
    fn nskb(truesize: u32) -> RxSkb {
        RxSkb {
            truesize,
            head: RxHead::Linear { tailroom: 0 },
        }
    }

    /// Inserts `[s, e)` with the pattern bytes, charged 1000 per segment.
    fn put(q: &mut OfoQueue, s: u64, e: u64) -> Inserted {
        q.insert(s, bytes(s..e), RxSkb::page_frag(1000, false))
    }

    #[test]
    fn runs_merge_and_report_recent_first() {
        let mut q = OfoQueue::default();
        assert_eq!(put(&mut q, 100, 200).dup, None);
        assert_eq!(put(&mut q, 300, 400).dup, None);
        assert_eq!(
            q.sack_blocks().collect::<Vec<_>>(),
            vec![(300, 400), (100, 200)]
        );
        assert_eq!(put(&mut q, 200, 300).dup, None);
        assert_eq!(q.sack_blocks().collect::<Vec<_>>(), vec![(100, 400)]);
        assert_eq!(
            (q.runs(), q.len(), q.bytes(), q.truesize()),
            (1, 3, 300, 3000)
        );
    }

    /// `tcp_data_queue_ofo`'s branches: all present (dropped, D-SACK, block rotated
    /// first), partial overlap with the predecessor (both kept), same start covering
    /// it (replaced), later segments covered (dropped) or partly covered (kept).
    #[test]
    fn overlaps_follow_tcp_data_queue_ofo() {
        let mut q = OfoQueue::default();
        put(&mut q, 100, 200);
        put(&mut q, 300, 400);
        let r = put(&mut q, 120, 180);
        assert_eq!((r.dup, r.queued, r.merged), (Some((120, 180)), false, 1));
        assert_eq!(q.sack_blocks().next(), Some((100, 200)), "rotated first");
        let r = put(&mut q, 150, 250);
        assert_eq!((r.dup, r.queued, q.len()), (Some((150, 200)), true, 3));
        let r = put(&mut q, 300, 450);
        assert_eq!((r.dup, r.merged, q.len()), (Some((300, 400)), 1, 3));
        // [50, 460) covers [100,200), [150,250) and [300,450): all dropped.
        let r = put(&mut q, 50, 460);
        assert_eq!((r.merged, q.len(), q.truesize()), (3, 1, 1000));
        assert_eq!(r.dup, Some((100, 250)), "extended while adjoining");
        let r = put(&mut q, 40, 100);
        assert_eq!((r.dup, r.merged, q.len()), (Some((50, 100)), 0, 2));
        assert_eq!(q.sack_blocks().collect::<Vec<_>>(), vec![(40, 460)]);
    }

    /// What `tcp_drop_reason` adds to `sk_drops` for each skb the queue drops: its
    /// `max(1, gso_segs)`, which `tcp_ooo_try_coalesce` sums into the skb it joins.
    #[test]
    fn dropped_skbs_count_their_segments() {
        let mut q = OfoQueue::default();
        let frag = || RxSkb::page_frag(1000, true);
        let seg = |q: &mut OfoQueue, s: u64, e: u64, segs: u32| {
            q.insert_seg(s, bytes(s..e), false, frag(), RxStamp::default(), segs)
        };
        // A GRO packet of 3 and one of 2 joined to it: one skb of 5 segments.
        seg(&mut q, 100, 400, 3);
        assert!(seg(&mut q, 400, 600, 2).coalesced);
        assert_eq!((q.len(), q.take_drops()), (1, 0));
        // All its bytes there: the arriving packet's 2 segments.
        assert_eq!(seg(&mut q, 150, 250, 2).merged, 1);
        assert_eq!(q.take_drops(), 2);
        // The same start, covering it: the skb of 5 is replaced.
        assert_eq!(seg(&mut q, 100, 700, 1).merged, 1);
        assert_eq!(q.take_drops(), 5);
        // Covered later skbs (merge_right), then a pruned one.
        seg(&mut q, 800, 900, 1);
        seg(&mut q, 950, 1000, 4);
        assert_eq!(seg(&mut q, 750, 1000, 1).merged, 2);
        assert_eq!(q.take_drops(), 5);
        q.pop_last();
        assert_eq!(q.take_drops(), 1);
        // tcp_ofo_queue: an skb wholly below rcv_nxt is dropped ([100, 700) under
        // 800); purge (tcp_fin's skb_rbtree_purge) drops nothing that counts.
        seg(&mut q, 2000, 2100, 3);
        assert!(q.pop_in_order(800).is_none());
        assert_eq!(q.take_drops(), 1);
        q.purge();
        assert_eq!(q.take_drops(), 0);
    }

    #[test]
    fn pop_in_order_trims_and_drops_what_is_below() {
        let mut q = OfoQueue::default();
        put(&mut q, 100, 200);
        put(&mut q, 150, 260);
        assert!(q.pop_in_order(50).is_none());
        let s = q.pop_in_order(120).unwrap();
        assert_eq!(
            (s.bytes(), s.truesize, s.fin),
            (bytes(120..200), 1000, false)
        );
        let s = q.pop_in_order(200).unwrap();
        assert_eq!(s.bytes(), bytes(200..260));
        assert!(q.is_empty());
        assert_eq!(
            (q.sack_blocks().count(), q.truesize(), q.bytes()),
            (0, 0, 0)
        );
        put(&mut q, 300, 310);
        put(&mut q, 320, 330);
        assert_eq!(q.pop_in_order(400), None, "wholly below: dropped");
        assert!(q.is_empty() && q.runs() == 0);
    }

    /// `tcp_ofo_queue`: each segment taken or dropped that starts below the
    /// `rcv_nxt` the walk began at (`dsack_high`) widens the D-SACK block with its
    /// part below it (`tcp_dsack_extend`): set if none, widened where it overlaps
    /// or adjoins, kept otherwise; one starting at `dsack_high` adds nothing.
    #[test]
    fn pop_in_order_dsacks_what_lies_below_where_the_walk_began() {
        let mut q = OfoQueue::default();
        put(&mut q, 300, 450);
        let mut dup = None;
        let s = q.pop_in_order_dsack(350, 350, &mut dup).unwrap();
        assert_eq!((s.bytes(), dup), (bytes(350..450), Some((300, 350))));
        // A D-SACK already set elsewhere is kept; an adjoining one is widened.
        put(&mut q, 500, 600);
        let mut dup = Some((100, 200));
        q.pop_in_order_dsack(550, 550, &mut dup).unwrap();
        assert_eq!(dup, Some((100, 200)));
        put(&mut q, 700, 800);
        let mut dup = Some((650, 700));
        q.pop_in_order_dsack(750, 750, &mut dup).unwrap();
        assert_eq!(dup, Some((650, 750)));
        // Wholly below: dropped, D-SACKed whole.
        put(&mut q, 900, 950);
        let mut dup = None;
        assert!(q.pop_in_order_dsack(1000, 1000, &mut dup).is_none());
        assert_eq!(dup, Some((900, 950)));
        // Starting at dsack_high (rcv_nxt moved on by the walk itself): nothing.
        put(&mut q, 1000, 1100);
        let mut dup = None;
        q.pop_in_order_dsack(1000, 1000, &mut dup).unwrap();
        assert_eq!(dup, None);
    }

    /// A FIN rides with its segment (`tcp_data_queue_ofo` keys on `end_seq`): its
    /// SACK block covers the FIN, a bare FIN is queued alone, a segment ending at a
    /// queued FIN's sequence is no duplicate of it, and the FIN comes out with the
    /// last bytes (or alone once they were read).
    #[test]
    fn a_fin_is_queued_with_its_segment() {
        let skb = || RxSkb::page_frag(1000, false);
        let mut q = OfoQueue::default();
        let r = q.insert_seg(200, bytes(200..300), true, skb(), RxStamp::default(), 1);
        assert!(r.queued);
        assert_eq!(q.sack_blocks().collect::<Vec<_>>(), vec![(200, 301)]);
        assert_eq!(q.last_end(), Some(301));
        let r = put(&mut q, 150, 250);
        assert_eq!((r.dup, r.queued, q.len()), (Some((200, 250)), true, 2));
        let s = q.pop_in_order(150).unwrap();
        assert_eq!((s.len(), s.fin), (100, false));
        let s = q.pop_in_order(250).unwrap();
        assert_eq!((s.bytes(), s.fin), (bytes(250..300), true));
        assert!(q.is_empty() && q.runs() == 0);
        // A bare FIN, then the same FIN again: all present.
        let mut q = OfoQueue::default();
        assert!(
            q.insert_seg(500, Bytes::new(), true, skb(), RxStamp::default(), 1)
                .queued
        );
        let r = q.insert_seg(500, Bytes::new(), true, skb(), RxStamp::default(), 1);
        assert_eq!((r.queued, r.dup), (false, Some((500, 501))));
        assert_eq!(q.sack_blocks().collect::<Vec<_>>(), vec![(500, 501)]);
        let s = q.pop_in_order(500).unwrap();
        assert_eq!((s.len(), s.fin), (0, true));
        // tcp_collapse leaves the FIN's segment alone.
        let mut q = OfoQueue::default();
        for s in (1000..2000).step_by(10) {
            put(&mut q, s, s + 10);
        }
        q.insert_seg(2000, bytes(2000..2010), true, skb(), RxStamp::default(), 1);
        let freed = q.collapse(1 << 20, |t, l| t / 2 > l, |l| nskb(l + 1000));
        assert_eq!((freed, q.len()), (100, 2));
        assert_eq!(q.sack_blocks().collect::<Vec<_>>(), vec![(1000, 2011)]);
        assert!(q
            .pop_in_order(1000)
            .is_some_and(|s| !s.fin && s.len() == 1000));
        assert!(q.pop_in_order(2000).is_some_and(|s| s.fin));
    }

    #[test]
    fn at_most_four_blocks() {
        let mut q = OfoQueue::default();
        for i in 0..6u64 {
            put(&mut q, 100 + i * 20, 110 + i * 20);
        }
        let b: Vec<_> = q.sack_blocks().collect();
        assert_eq!(b.len(), TCP_NUM_SACKS);
        assert_eq!(b[0], (200, 210));
    }

    /// `tcp_prune_ofo_queue`'s step: the highest segment goes, and the runs shrink to
    /// what the rest covers (the SACK blocks are the caller's to reset).
    #[test]
    fn pop_last_trims_the_runs() {
        let mut q = OfoQueue::default();
        put(&mut q, 100, 200);
        put(&mut q, 150, 300);
        put(&mut q, 400, 500);
        assert_eq!(q.pop_last().unwrap().0, 400);
        assert_eq!((q.runs(), q.last_end()), (1, Some(300)));
        assert_eq!(q.pop_last().unwrap().0, 150);
        assert_eq!(q.last_end(), Some(200));
        q.pop_last();
        assert!(q.is_empty() && q.runs() == 0 && q.pop_last().is_none());
    }

    /// `tcp_sack_new_ofo_skb` keeps blocks, not runs: a block that fell out of the
    /// four is not reported again when data joins its run (the new data extends the
    /// block it adjoins, which moves first and absorbs what it reaches), and
    /// `tcp_sack_remove` drops only the blocks `rcv_nxt` reaches.
    #[test]
    fn sack_blocks_as_tcp_sack_new_ofo_skb_keeps_them() {
        let mut q = OfoQueue::default();
        for s in [2000, 4000, 6000, 8000, 10000] {
            put(&mut q, s, s + 1000);
        }
        let blocks = |q: &OfoQueue| q.sack_blocks().collect::<Vec<_>>();
        assert_eq!(
            blocks(&q),
            vec![(10000, 11000), (8000, 9000), (6000, 7000), (4000, 5000)]
        );
        assert_eq!(q.sack_slot(3000, 4000), 3, "adjoins the fourth block");
        put(&mut q, 3000, 4000);
        assert_eq!(
            blocks(&q),
            vec![(3000, 5000), (10000, 11000), (8000, 9000), (6000, 7000)],
            "2000..3000 fell out and stays out"
        );
        assert_eq!(q.runs(), 4);
        put(&mut q, 5000, 6000);
        assert_eq!(
            blocks(&q),
            vec![(3000, 7000), (10000, 11000), (8000, 9000)],
            "coalesced with the block it reached"
        );
        assert!(q.pop_in_order(1000).is_none());
        assert_eq!(blocks(&q).len(), 3, "rcv_nxt below every block");
        let mut next = 2000;
        while let Some(s) = q.pop_in_order(next) {
            next += s.len() as u64;
        }
        assert_eq!(next, 7000);
        assert_eq!(blocks(&q), vec![(10000, 11000), (8000, 9000)]);
    }

    /// `tcp_collapse_ofo_queue`: a run of small segments becomes page-sized buffers
    /// (same bytes, less charge); a lone small segment is left.
    #[test]
    fn collapse_copies_runs_of_small_segments() {
        let mut q = OfoQueue::default();
        for s in (1000..11_000).step_by(10) {
            put(&mut q, s, s + 10);
        }
        put(&mut q, 20_000, 20_001);
        let bloated = |t: u32, l: u32| t / 2 > l;
        let freed = q.collapse(1 << 20, bloated, |l| nskb(l + 1000));
        assert_eq!(freed, 1000);
        // 10,000 bytes in ceil(10000 / 3776) = 3 buffers, plus the lone segment.
        assert_eq!(q.len(), 4);
        assert_eq!(q.truesize(), 10_000 + 3 * 1000 + 1000);
        let mut next = 1000;
        while let Some(b) = q.pop_in_order(next).map(|s| s.bytes()) {
            assert_eq!(b, bytes(next..next + b.len() as u64));
            next += b.len() as u64;
        }
        assert_eq!(next, 11_000);
    }

    /// An skb is what Linux's is: a segment coalesced into the one before it
    /// (`tcp_ooo_try_coalesce`) is part of it, so `tcp_collapse_ofo_queue` sees one
    /// skb (a lone tiny one is left), `tcp_prune_ofo_queue` drops it whole, and the
    /// in-order walk hands it over whole; a buffer `tcp_collapse` allocates
    /// (`alloc_skb`) keeps the rest of its head as tailroom, which the next
    /// segment is copied into (Linux 6.18: tests/packetdrill/rcv-ofo-prune-coalesce.pkt).
    #[test]
    fn coalesced_segments_are_one_skb_and_collapsed_buffers_take_more() {
        use crate::tcp::skbuff::{alloc_skb, tun_skb};
        let mut q = OfoQueue::default();
        // A 1000-byte tun packet's head has 624 bytes of tailroom: two 300-byte
        // segments join it, a third does not.
        q.insert(1000, bytes(1000..2000), tun_skb(1040));
        assert!(q.insert(2000, bytes(2000..2300), tun_skb(340)).coalesced);
        assert!(q.insert(2300, bytes(2300..2600), tun_skb(340)).coalesced);
        assert!(!q.insert(2600, bytes(2600..2900), tun_skb(340)).coalesced);
        assert_eq!((q.len(), q.truesize()), (2, 2304 + 1280));
        let s = q.pop_last().expect("the last skb").1;
        assert_eq!((s.len(), q.len(), q.truesize()), (300, 1, 2304));
        let s = q.pop_in_order(1000).expect("the first skb");
        assert_eq!((s.bytes(), s.truesize), (bytes(1000..2600), 2304));
        assert_eq!(s.to.tailroom, Some(24));
        // Four 100-byte skbs collapse into one buffer with tailroom
        // (alloc_skb(400): 1024 - 320 - 400), which takes the next 100 bytes.
        let mut q = OfoQueue::default();
        for seq in (5000..5400).step_by(100) {
            q.insert(seq, bytes(seq..seq + 100), tun_skb(140));
        }
        assert_eq!(q.collapse(1 << 20, |_, _| true, alloc_skb), 4);
        assert_eq!((q.len(), q.truesize()), (1, 1280));
        assert!(q.insert(5400, bytes(5400..5500), tun_skb(140)).coalesced);
        assert_eq!((q.len(), q.truesize()), (1, 1280));
        let s = q.pop_in_order(5000).expect("the collapsed skb");
        assert_eq!(
            (s.bytes(), s.truesize, s.at_rcv_nxt),
            (bytes(5000..5500), 1280, true)
        );
        assert_eq!(s.to.tailroom, Some(1024 - 320 - 500));
    }

    /// Issue 27 item 2: 201-byte segments each one byte before the last, against a
    /// 2.4 MB run, cost a few entries each, not the run (the old queue rebuilt the
    /// run: 2,400,250 bytes moved per segment).
    #[test]
    fn prepend_costs_log_n_not_the_run() {
        let mut q = OfoQueue::default();
        let top = 1_000_000 + 2_400_000u64;
        for s in (1_000_000..top).step_by(1448) {
            q.insert(
                s,
                Bytes::from(vec![0u8; (top - s).min(1448) as usize]),
                RxSkb::page_frag(2304, true),
            );
        }
        let before = q.work();
        for i in 1..=1000u64 {
            q.insert(
                1_000_000 - i,
                Bytes::from(vec![0u8; 201]),
                RxSkb::page_frag(1024, true),
            );
        }
        let per = (q.work() - before) / 1000;
        assert!(per <= 6, "{per} entries per prepended segment");
        assert_eq!(q.sack_blocks().next(), Some((999_000, top)));
    }

    proptest! {
        #[test]
        fn reassembles_any_arrival_order(segs in proptest::collection::vec((0u64..1000, 1u64..200), 1..40)) {
            let mut q = OfoQueue::default();
            let mut have = vec![false; 1200];
            for (s, l) in segs {
                let s = s + 1;
                put(&mut q, s, s + l);
                for i in s..s + l { have[i as usize] = true; }
            }
            // Runs cover exactly the received bytes.
            let covered: u64 = q.runs.iter().map(|(s, e)| e - s).sum();
            prop_assert_eq!(covered, have.iter().filter(|h| **h).count() as u64);
            // Segments hold the right values; ends rise with starts.
            let mut count = 0u64;
            let mut next = 1u64;
            while let Some(run) = q.pop_in_order(next).map(|s| s.bytes()) {
                for (i, b) in run.iter().enumerate() {
                    prop_assert_eq!(*b, (next + i as u64) as u8);
                }
                next += run.len() as u64;
                count += run.len() as u64;
            }
            let contiguous = have[1..].iter().take_while(|h| **h).count() as u64;
            prop_assert_eq!(count, contiguous);
        }
    }
}
