//! The SACK scoreboard (`tcp/rtx/`): random operations applied to the tree
//! and the list kind of [`RtxQueue`] and to a byte-level reference model; after every
//! operation the sacked, lost and retransmitted byte sets of all three must agree,
//! the two kinds must hold the same skbs, and each queue's counters must equal the
//! sums over its skbs (`check_invariants`).
//!
//! The model keeps one flag byte per byte of `[una, nxt)` and the segment grid: where
//! each MSS-sized segment starts (a pushed skb is cut from its start in MSS steps, the
//! last one possibly short; a split restarts the grid of both halves at their
//! starts, as `tcp_fragment` recounts `pcount`). A SACK block marks exactly the
//! segments it covers whole (`tcp_match_skb_to_sack` splits only at whole-MSS
//! boundaries), minus what the previous ACK's blocks covered (`recv_sack_cache`);
//! the walk past a cached block starts at the skb holding its end but matches
//! skbs against the block's own start, so an skb straddling that end that the
//! block covers whole is marked too.
//! Operations Linux defines per skb (retransmit, `IsLost`) take the skb boundaries
//! from the queue.
//!
//! Input: byte 0 picks the MSS; then 5-byte operations, `op[0] % 9`: push, SACK
//! blocks, cumulative ACK, retransmit, update bits, mark all lost, unmark lost,
//! RFC 6675 `IsLost` marking, split.

use crate::Bytes as Input;
use bytes::Bytes;
use lowtide::config::RtxQueueKind;
use lowtide::tcp::consts::SKB_OVERHEAD;
use lowtide::tcp::rtx::skb::TxRate;
use lowtide::tcp::rtx::skb::{self, Skb, LOST, SACKED_ACKED, SACKED_RETRANS};
use lowtide::tcp::rtx::RtxQueue;
use lowtide::Instant;
use std::collections::VecDeque;

/// Most bytes outstanding (keeps the byte model cheap).
const MAX_OUTSTANDING: u64 = 4 * 1024;
const MAX_OPS: usize = 300;
const MSS: [u32; 4] = [100, 1, 1448, 7];

/// The reference model of `[una, nxt)`.
struct Model {
    una: u64,
    /// Per byte: `SACKED_ACKED | LOST | SACKED_RETRANS`.
    flags: VecDeque<u8>,
    /// Per byte: a segment starts here.
    seg_start: VecDeque<bool>,
    /// The previous ACK's SACK blocks, sorted.
    cache: Vec<(u64, u64)>,
    mss: u64,
}

impl Model {
    fn nxt(&self) -> u64 {
        self.una + self.flags.len() as u64
    }

    fn idx(&self, seq: u64) -> usize {
        (seq - self.una) as usize
    }

    /// Restarts the segment grid of `[from, to)` at `from` (bytes below `una`, of
    /// a partly acked head skb, are no longer in the model).
    fn regrid(&mut self, from: u64, to: u64) {
        for (k, s) in (from..to).enumerate() {
            if s < self.una {
                continue;
            }
            let i = self.idx(s);
            self.seg_start[i] = (k as u64).is_multiple_of(self.mss);
        }
    }

    fn push(&mut self, len: u64) {
        let from = self.nxt();
        for _ in 0..len {
            self.flags.push_back(0);
            self.seg_start.push_back(false);
        }
        self.regrid(from, from + len);
    }

    /// `tcp_clean_rtx_queue`: drops `[una, ack)`; a partly acknowledged skb
    /// `[seq, end)` of several segments is trimmed and its grid restarts at `ack`
    /// (`tcp_tso_acked`, `tcp_trim_head`); one of a single segment stays whole.
    fn clean(&mut self, ack: u64, containing: Option<(u64, u64, u32)>) {
        if let Some((seq, end, _)) = containing.filter(|&(s, e, p)| s < ack && ack < e && p > 1) {
            self.regrid(seq, ack);
            self.regrid(ack, end);
        }
        while self.una < ack {
            self.flags.pop_front();
            self.seg_start.pop_front();
            self.una += 1;
        }
    }

    /// `sacktag_blocks`: each block minus the cached ones, whole segments only.
    ///
    /// Linux walks the sorted ranges of one ACK in a single pass that never goes back
    /// (`tcp_sacktag_skip` returns the current skb if it starts after the range), so
    /// a later range starting inside an skb the walk already passed may SACK less.
    /// The first range is exact; for the later ones the model takes, segment by
    /// segment, what the queue did (`queue_sacked`) but never more than the range
    /// covers whole, which `check` then holds the queue to.
    ///
    /// A range that starts past a cached block's end is walked from the skb holding
    /// that end (`skb_start`: where it starts in the queue before or after the
    /// operation, whichever is lower) and matched against the block's start, so it
    /// reaches back to that skb's start, not below the block's; a block starting at
    /// or above the highest SACKed byte is walked from its own start
    /// (`tcp_highest_sack`, then `tcp_sacktag_skip` to `start_seq`); the model then
    /// takes what the queue did there too. With nothing SACKed when the ACK comes,
    /// the cache is not consulted at all ("It's already past"). Cached parts past
    /// the first cached block of a block are walked too when nothing is SACKed above
    /// that block's end ("better entrypoint"), which the model allows, not demands.
    fn sack(
        &mut self,
        blocks: &[(u64, u64)],
        queue_sacked: &dyn Fn(u64) -> bool,
        skb_start: &dyn Fn(u64) -> u64,
    ) {
        let mut sorted = blocks.to_vec();
        sorted.sort_unstable();
        let cache = std::mem::take(&mut self.cache);
        let cache = match self.sacked_in(self.una, self.nxt()) {
            0 => Vec::new(),
            _ => cache,
        };
        // (block start, walk from, walk to, only what the queue did)
        let mut ranges = Vec::new();
        for &(start, end) in &sorted {
            let mut from = start;
            for &(cs, ce) in &cache {
                if ce <= from || cs >= end {
                    continue;
                }
                if cs > from {
                    ranges.push((start, from, cs, from > start));
                }
                if from > start {
                    ranges.push((start, cs.max(from), ce.min(end), true));
                }
                from = from.max(ce);
            }
            if from < end {
                ranges.push((start, from, end, false));
            }
        }
        for (i, &(start, from, to, lenient)) in ranges.iter().enumerate() {
            let reach = match from > start {
                true => skb_start(from)
                    .max(start)
                    .min(self.highest_sacked_end().max(start)),
                false => from,
            };
            self.tag(reach, to, i > 0 || reach < from || lenient, queue_sacked);
        }
        self.cache = sorted;
    }

    /// The end of the highest SACKed byte (`una` if none).
    fn highest_sacked_end(&self) -> u64 {
        let top = self.flags.iter().rposition(|f| f & SACKED_ACKED != 0);
        top.map_or(self.una, |i| self.una + i as u64 + 1)
    }

    /// Marks SACKed every unSACKed segment inside `[start, end)` (only those the
    /// queue SACKed, if `follow`).
    fn tag(&mut self, start: u64, end: u64, follow: bool, queue_sacked: &dyn Fn(u64) -> bool) {
        let (una, nxt) = (self.una, self.nxt());
        let mut s = start.max(una);
        while s < end.min(nxt) {
            if !self.seg_start[self.idx(s)] {
                s += 1;
                continue;
            }
            let mut e = s + 1;
            while e < nxt && !self.seg_start[self.idx(e)] {
                e += 1;
            }
            let take = !follow || queue_sacked(s);
            if e <= end && take && self.flags[self.idx(s)] & SACKED_ACKED == 0 {
                for b in s..e {
                    let i = self.idx(b);
                    // tcp_sacktag_one: a retransmission not marked lost stays
                    // retransmitted.
                    let keep = match self.flags[i] & (LOST | SACKED_RETRANS) {
                        SACKED_RETRANS => SACKED_RETRANS,
                        _ => 0,
                    };
                    self.flags[i] = SACKED_ACKED | keep;
                }
            }
            s = e;
        }
    }

    fn set(&mut self, from: u64, to: u64, f: impl Fn(u8) -> u8) {
        for b in from.max(self.una)..to {
            let i = self.idx(b);
            self.flags[i] = f(self.flags[i]);
        }
    }

    fn sacked_in(&self, from: u64, to: u64) -> u64 {
        (from..to)
            .filter(|&b| self.flags[self.idx(b)] & SACKED_ACKED != 0)
            .count() as u64
    }
}

/// The queue's skbs as `(seq, end_seq, sacked bits, pcount)`.
fn skbs(q: &RtxQueue) -> Vec<(u64, u64, u8, u32)> {
    q.iter_from(0)
        .map(|s| (s.seq, s.end_seq, s.sacked, s.pcount))
        .collect()
}

/// The tree, the list and the model agree.
fn check(tree: &RtxQueue, list: &RtxQueue, m: &Model) {
    tree.check_invariants();
    list.check_invariants();
    let t = skbs(tree);
    assert_eq!(t, skbs(list), "tree and list differ");
    let mut at = m.una;
    for (i, &(seq, end, sacked, pcount)) in t.iter().enumerate() {
        // tcp_clean_rtx_queue: a one-segment head skb partly acked stays whole
        // (f4496bc); its acked bytes are no longer in the model. SACKed, it may
        // take the SACKed skbs after it (tcp_shift_skb_data shifts into any
        // SACKed prev whose end is past snd_una) and so hold several segments.
        let partly_acked =
            i == 0 && seq < at && at < end && (pcount == 1 || sacked & SACKED_ACKED != 0);
        assert!(
            seq == at || partly_acked,
            "skbs not contiguous from una: {seq} vs {at}"
        );
        for b in seq.max(at)..end {
            let want = m.flags[m.idx(b)];
            let got = sacked & (SACKED_ACKED | LOST | SACKED_RETRANS);
            assert_eq!(
                got, want,
                "scoreboard bits of byte {b} differ from the model"
            );
        }
        at = end;
    }
    assert_eq!(at, m.nxt(), "queue does not end at nxt");
    // The queue counts an skb's bytes whole: a SACKed one-segment head skb that a
    // cumulative ACK reaches into still counts its acked head (Linux's sacked_out
    // counts it as one packet until it is acked whole or trimmed).
    let head_below_una = t
        .first()
        .filter(|&&(seq, _, sacked, _)| seq < m.una && sacked & SACKED_ACKED != 0)
        .map_or(0, |&(seq, ..)| m.una - seq);
    assert_eq!(
        tree.sacked_bytes,
        m.sacked_in(m.una, m.nxt()) + head_below_una,
        "sacked_bytes"
    );
}

/// One fuzz case (panics on a finding).
pub fn run(data: &[u8]) {
    let mut inp = Input::new(data);
    let mss = MSS[(inp.u8() % 4) as usize];
    let mut tree = RtxQueue::with_kind(RtxQueueKind::Tree);
    let mut list = RtxQueue::with_kind(RtxQueueKind::List);
    let mut m = Model {
        una: 0,
        flags: VecDeque::new(),
        seg_start: VecDeque::new(),
        cache: Vec::new(),
        mss: mss as u64,
    };
    let mut ops = 0;
    while !inp.is_empty() && ops < MAX_OPS {
        let op = [inp.u8(), inp.u8(), inp.u8(), inp.u8(), inp.u8()];
        let now = Instant::from_nanos(ops as u64 * 1000);
        step(&mut tree, &mut list, &mut m, &op, mss, now);
        check(&tree, &list, &m);
        ops += 1;
    }
}

/// The `k`-th skb (mod the count) that is not SACKed, as `(seq, end_seq)`.
fn pick_unsacked(q: &RtxQueue, k: u8) -> Option<(u64, u64)> {
    let v: Vec<(u64, u64)> = q
        .iter_from(0)
        .filter(|s| !s.has(SACKED_ACKED))
        .map(|s| (s.seq, s.end_seq))
        .collect();
    (!v.is_empty()).then(|| v[k as usize % v.len()])
}

fn step(
    tree: &mut RtxQueue,
    list: &mut RtxQueue,
    m: &mut Model,
    op: &[u8; 5],
    mss: u32,
    now: Instant,
) {
    let w = u16::from_le_bytes([op[1], op[2]]) as u64;
    let w2 = u16::from_le_bytes([op[3], op[4]]) as u64;
    let span = m.nxt() - m.una;
    let both = |tree: &mut RtxQueue, list: &mut RtxQueue, f: &dyn Fn(&mut RtxQueue)| {
        f(tree);
        f(list);
    };
    match op[0] % 9 {
        0 => {
            let len = (w % (4 * mss as u64 + 1)).max(1);
            if span + len > MAX_OUTSTANDING {
                return;
            }
            let seq = m.nxt();
            both(tree, list, &|q| q.push(new_skb(seq, len as u32, mss, now)));
            m.push(len);
        }
        1 => {
            if span == 0 {
                return;
            }
            let n = 1 + op[0] as usize / 9 % 4;
            let blocks: Vec<(u64, u64)> = (0..n)
                .map(|i| {
                    let a = w.wrapping_mul(i as u64 + 1) ^ w2.rotate_left(i as u32 * 5);
                    let start = m.una + a % span;
                    let end = start + 1 + w2.wrapping_add(i as u64 * 977) % (m.nxt() - start);
                    (start, end)
                })
                .collect();
            let before = skbs(tree);
            both(tree, list, &|q| {
                let _ = q.sacktag_blocks(&blocks);
            });
            let after = skbs(tree);
            let sacked = |b: u64| {
                let i = after.partition_point(|&(_, end, _, _)| end <= b);
                after
                    .get(i)
                    .is_some_and(|&(seq, _, bits, _)| seq <= b && bits & SACKED_ACKED != 0)
            };
            // Where the skb holding `b` starts, before the walk split it or after
            // it merged it, whichever is lower.
            let skb_start = |b: u64| {
                let at = |q: &[(u64, u64, u8, u32)]| {
                    let i = q.partition_point(|&(_, end, _, _)| end <= b);
                    q.get(i).map_or(b, |&(seq, ..)| seq.min(b))
                };
                at(&before).min(at(&after))
            };
            m.sack(&blocks, &sacked, &skb_start);
        }
        2 => {
            let ack = m.una + w % (span + 1);
            let containing = tree
                .iter_from(ack)
                .next()
                .map(|s| (s.seq, s.end_seq, s.pcount));
            both(tree, list, &|q| {
                let _ = q.clean(ack);
            });
            m.clean(ack, containing);
        }
        3 => {
            let Some((seq, end)) = pick_unsacked(tree, op[1]) else {
                return;
            };
            both(tree, list, &|q| q.mark_retransmitted(seq, now));
            m.set(seq, end, |f| f | SACKED_RETRANS);
        }
        4 => {
            let Some((seq, end)) = pick_unsacked(tree, op[1]) else {
                return;
            };
            let bits = [LOST, SACKED_RETRANS, LOST | SACKED_RETRANS, 0];
            let (set, clear) = (bits[(op[3] % 4) as usize], bits[(op[4] % 4) as usize]);
            both(tree, list, &|q| q.update(seq, set, clear));
            m.set(seq, end, |f| (f | set) & !clear);
        }
        5 => {
            both(tree, list, &|q| {
                q.mark_all_lost();
            });
            let n = m.nxt();
            let una = m.una;
            // tcp_mark_skb_lost on each skb not SACKed: a lost one loses its
            // retransmitted mark (lost again), any other becomes lost and keeps it
            // (a TLP's retransmission stays in flight).
            m.set(una, n, |f| match (f & SACKED_ACKED, f & LOST) {
                (0, 0) => f | LOST,
                (0, _) => f & !SACKED_RETRANS,
                _ => f,
            });
        }
        6 => {
            both(tree, list, &|q| q.unmark_all_lost());
            let (una, n) = (m.una, m.nxt());
            m.set(una, n, |f| f & !LOST);
        }
        7 => {
            let from = m.una + w % (span + 1);
            let thresh = w2 % (3 * mss as u64 + 1);
            let walk: Vec<(u64, u64, bool)> = tree
                .iter_from(from)
                .map(|s| (s.seq, s.end_seq, s.has(SACKED_ACKED | LOST)))
                .collect();
            both(tree, list, &|q| {
                let _ = q.mark_lost_sacked_above(from, thresh);
            });
            let nxt = m.nxt();
            for (seq, end, skip) in walk {
                if m.sacked_in(end, nxt) <= thresh {
                    break;
                }
                if !skip {
                    m.set(seq, end, |f| (f | LOST) & !SACKED_RETRANS);
                }
            }
        }
        _ => {
            let at = m.una + w % (span + 1);
            let containing = tree.iter_from(at).next().map(|s| (s.seq, s.end_seq));
            // A partly acked one-segment head skb is never fragmented: Linux's
            // callers of tcp_fragment split skbs of several segments, and
            // __tcp_retransmit_skb trims that skb to snd_una first.
            if containing.is_some_and(|(seq, _)| seq < m.una) {
                return;
            }
            both(tree, list, &|q| {
                q.split_at(at, mss);
            });
            if let Some((seq, end)) = containing.filter(|&(s, e)| s < at && at < e) {
                if m.flags[m.idx(seq.max(m.una))] & SACKED_ACKED == 0 {
                    m.regrid(seq, at);
                    m.regrid(at, end);
                }
            }
        }
    }
}

fn new_skb(seq: u64, len: u32, mss: u32, now: Instant) -> Skb {
    let data = Bytes::from(
        (0..len)
            .map(|i| (seq + i as u64) as u8)
            .collect::<Vec<u8>>(),
    );
    Skb {
        seq,
        end_seq: seq + len as u64,
        truesize: len + SKB_OVERHEAD,
        data: data.into(),
        flags: 0,
        sacked: 0,
        pcount: skb::tso_segs(len, mss).0,
        gso_size: skb::tso_segs(len, mss).1,
        tx_time: now,
        tx: TxRate::default(),
        fclone: 0,
        zc: None,
        uncharged: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's rules on a hand-made case: whole segments only, the previous
    /// ACK's blocks skipped, a partial cumulative ACK restarting the grid.
    #[test]
    fn model_follows_the_sack_rules() {
        let mut m = Model {
            una: 0,
            flags: VecDeque::new(),
            seg_start: VecDeque::new(),
            cache: Vec::new(),
            mss: 100,
        };
        m.push(1000);
        let none = |_: u64| false;
        let itself = |b: u64| b;
        m.sack(&[(150, 450)], &none, &itself);
        assert_eq!(m.sacked_in(0, 1000), 200, "segments 200..400 only");
        m.sack(&[(150, 450), (450, 1000)], &none, &itself);
        assert_eq!(
            m.sacked_in(0, 1000),
            200 + 500,
            "the cached block adds nothing"
        );
        m.clean(50, Some((0, 200, 2)));
        m.sack(&[(50, 160)], &none, &itself);
        assert_eq!(m.sacked_in(50, 1000), 700 + 100, "the grid restarted at 50");
        // A block grown past the cached one is walked from the skb holding the
        // cached end (skbs of two segments: [1200, 1400)) and matched against its
        // own start: that skb is covered whole.
        m.push(1000);
        m.sack(&[(1150, 1250)], &none, &itself);
        assert_eq!(m.sacked_in(1000, 2000), 0, "no whole segment");
        let skb_start = |b: u64| b / 200 * 200;
        let queue = |b: u64| (1200..1400).contains(&b);
        m.sack(&[(1150, 1450)], &queue, &skb_start);
        assert_eq!(
            m.sacked_in(1000, 2000),
            200,
            "1200..1400, from the skb's start"
        );
    }

    /// The queues and the model agree on a sequence of every operation, and the
    /// check notices a queue that disagrees with the model.
    #[test]
    fn queues_match_the_model_and_a_mismatch_is_caught() {
        let mut input = vec![0u8];
        for op in 0..9u8 {
            for k in 0..4u8 {
                input.extend_from_slice(&[op + 9 * k, 37 * k + op, 3, 201 - k, op]);
            }
        }
        run(&input);
        let mut tree = RtxQueue::with_kind(RtxQueueKind::Tree);
        let mut list = RtxQueue::with_kind(RtxQueueKind::List);
        let mut m = Model {
            una: 0,
            flags: VecDeque::new(),
            seg_start: VecDeque::new(),
            cache: Vec::new(),
            mss: 100,
        };
        step(
            &mut tree,
            &mut list,
            &mut m,
            &[0, 144, 1, 0, 0],
            100,
            Instant::ZERO,
        );
        check(&tree, &list, &m);
        m.set(0, 10, |_| LOST);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&tree, &list, &m)));
        assert!(r.is_err(), "a wrong LOST bit went unnoticed");
    }
}
