//! The timed workloads behind the CPU model's constants (`lowtide_sim::cpu`), shared
//! by `lowtide experiment calibrate` and the criterion benches of this crate
//! (`cargo bench -p lowtide-lab --bench engine|sack|list_walk`):
//! - [`Bulk`]: one bulk flow between two stacks over an ideal 10 ms path without
//!   loss; times host A's `handle_packet` per ACK and its `poll_transmit` plus TX
//!   completion per packet sent (the ACK path without SACK work);
//! - [`SackWorkload`]: a retransmit queue of N one-MSS skbs with 1 % of them lost,
//!   and the ACKs a receiver sends for the next N/10 arrivals (cumulative ACK at the
//!   first hole, up to three SACK blocks, newest first), each put through the seed's
//!   per-ACK scoreboard work: `sacktag_blocks`, `clean`, and `mark_lost_sacked_above`
//!   (RFC 6675 marking, `tcp_mark_head_lost` in the seed's Linux 4.15, which lowtide's
//!   engine ran until Linux 6.17's RACK-only loss detection was ported; the engine now
//!   runs RACK's walk instead, which this workload does not time yet);
//! - [`list_walk_ns`]: Linux's retransmit queue before seed 003, a linked list of
//!   separately allocated `struct sk_buff` (232 bytes, among other objects of the
//!   heap), walked as `tcp_sacktag_skip`/`tcp_for_write_queue` walked it: each step
//!   reads the node's `next` and `TCP_SKB_CB(skb)->end_seq`.

use lowtide::tcp::consts::SKB_OVERHEAD;
use lowtide::tcp::rtx::skb::Skb;
use lowtide::tcp::rtx::{RtxQueue, RtxQueueKind};
use lowtide::{Config, Instant, RxChecksum, SocketHandle, Stack};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Duration;

/// One-way delay of [`Bulk`]'s wire.
const DELAY_NS: u64 = 10_000_000;

/// Two stacks joined by a 10 ms one-way wire; A writes without end.
pub struct Bulk {
    now: Instant,
    a: Stack,
    b: Stack,
    h: SocketHandle,
    rx: Option<SocketHandle>,
    listener: SocketHandle,
    wire: BTreeMap<(u64, u64), (bool, Vec<u8>)>,
    seq: u64,
    buf: Vec<u8>,
    /// Wall time in A's ACK handling, and the ACKs handled.
    pub ack_time: Duration,
    /// ACKs handled by A.
    pub acks: u64,
    /// Wall time in A's transmit path (and TX completion), and the packets sent.
    pub tx_time: Duration,
    /// Packets A sent.
    pub txs: u64,
}

impl Default for Bulk {
    fn default() -> Bulk {
        Bulk::new()
    }
}

impl Bulk {
    /// A connection being set up, at time zero.
    pub fn new() -> Bulk {
        let cfg = Config::default();
        let (aa, ba): (SocketAddr, SocketAddr) = (
            "10.0.0.1:0".parse().expect("address"),
            "10.0.0.2:5001".parse().expect("address"),
        );
        let mut a = Stack::new(cfg.clone(), 1);
        a.add_address(aa.ip());
        let mut b = Stack::new(cfg, 2);
        b.add_address(ba.ip());
        let listener = b.listen(ba, 16).expect("listen");
        let h = a.connect(Instant::ZERO, aa, ba).expect("connect");
        Bulk {
            now: Instant::ZERO,
            a,
            b,
            h,
            rx: None,
            listener,
            wire: BTreeMap::new(),
            seq: 0,
            buf: vec![0x5a; 65536],
            ack_time: Duration::ZERO,
            acks: 0,
            tx_time: Duration::ZERO,
            txs: 0,
        }
    }

    /// Virtual time now (ns).
    pub fn now_ns(&self) -> u64 {
        self.now.as_nanos()
    }

    /// Puts what each stack sends on the wire (completed at once) and lets B's
    /// application read.
    fn flush(&mut self) {
        while self
            .a
            .send(self.now, self.h, &self.buf)
            .is_ok_and(|n| n > 0)
        {}
        for to_b in [true, false] {
            loop {
                let t0 = std::time::Instant::now();
                let st = if to_b { &mut self.a } else { &mut self.b };
                let Some(tx) = st.poll_transmit(self.now) else {
                    break;
                };
                st.handle_tx_complete(self.now, tx.token);
                if to_b {
                    self.tx_time += t0.elapsed();
                    self.txs += 1;
                }
                let at = self.now.as_nanos() + DELAY_NS;
                lowtide_wire::gso::segment(&tx.packet, tx.gso(), |s| {
                    self.seq += 1;
                    self.wire.insert((at, self.seq), (to_b, s));
                })
                .expect("segmentable");
            }
        }
        while self.a.poll_event().is_some() {}
        while self.b.poll_event().is_some() {}
        if self.rx.is_none() {
            self.rx = self.b.accept(self.listener).ok();
        }
        if let Some(r) = self.rx {
            let mut buf = [0u8; 65536];
            while self.b.recv(self.now, r, &mut buf).is_ok_and(|n| n > 0) {}
        }
    }

    /// Delivers the next arrival (and runs due timers).
    pub fn step(&mut self) {
        self.flush();
        let Some((&(at, s), _)) = self.wire.iter().next() else {
            return;
        };
        self.now = Instant(self.now.as_nanos().max(at));
        let (to_b, pkt) = self.wire.remove(&(at, s)).expect("present");
        if to_b {
            self.b
                .handle_packet(self.now, &pkt, RxChecksum::Unnecessary);
        } else {
            let t0 = std::time::Instant::now();
            self.a
                .handle_packet(self.now, &pkt, RxChecksum::Unnecessary);
            self.ack_time += t0.elapsed();
            self.acks += 1;
        }
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
    }
}

/// What [`bulk_time`] times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkPart {
    /// Host A's `handle_packet` per ACK.
    Ack,
    /// Host A's `poll_transmit` and TX completion per packet sent.
    Xmit,
}

/// Wall time of `n` of `part` in bulk flows past slow start's first rounds.
pub fn bulk_time(n: u64, part: BulkPart) -> Duration {
    let t = bulk_times(n, part);
    match part {
        BulkPart::Ack => t.ack,
        BulkPart::Xmit => t.xmit,
    }
}

/// What one [`bulk_times`] measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BulkTimes {
    /// Wall time in A's ACK handling.
    pub ack: Duration,
    /// ACKs handled.
    pub acks: u64,
    /// Wall time in A's transmit path.
    pub xmit: Duration,
    /// Packets sent.
    pub xmits: u64,
}

/// Runs bulk flows past slow start's first rounds (new connections as needed, at
/// most 200,000 per connection) until `n` of `part` happened; both parts' times and
/// counts over that stretch.
pub fn bulk_times(n: u64, part: BulkPart) -> BulkTimes {
    let count = |b: &Bulk| match part {
        BulkPart::Ack => b.acks,
        BulkPart::Xmit => b.txs,
    };
    let mut t = BulkTimes {
        ack: Duration::ZERO,
        acks: 0,
        xmit: Duration::ZERO,
        xmits: 0,
    };
    let mut left = n;
    while left > 0 {
        let mut b = Bulk::new();
        while b.now_ns() < 20 * DELAY_NS {
            b.step();
        }
        let (c0, a0, at0, x0, xt0) = (count(&b), b.acks, b.ack_time, b.txs, b.tx_time);
        while count(&b) - c0 < left.min(200_000) && b.now_ns() < 60_000_000_000 {
            b.step();
        }
        t.ack += b.ack_time - at0;
        t.acks += b.acks - a0;
        t.xmit += b.tx_time - xt0;
        t.xmits += b.txs - x0;
        left = left.saturating_sub((count(&b) - c0).max(1));
    }
    t
}

const MSS: u32 = 1448;
static PAYLOAD: [u8; MSS as usize] = [0; MSS as usize];

/// Received runs of segments, `[first, last]`.
type Runs = Vec<(u64, u64)>;

/// One ACK as the receiver sends it: cumulative ACK and SACK blocks.
#[derive(Debug, Clone)]
pub struct Ack {
    ack: u64,
    blocks: Vec<(u64, u64)>,
}

/// Stream offset of segment `i`.
fn off(i: u64) -> u64 {
    1 + i * MSS as u64
}

/// The SACK workload at one queue size (module docs).
pub struct SackWorkload {
    n: u64,
    lost: Vec<bool>,
    mid: u64,
    /// The timed ACKs: those for the arrivals of segments `n/2 .. n/2 + n/10`.
    pub acks: Vec<Ack>,
}

/// Work and time of a pass of [`SackWorkload`]'s ACKs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SackPass {
    /// Wall time of the ACKs' processing (queue set-up excluded).
    pub time: Duration,
    /// ACKs processed.
    pub acks: u64,
    /// Retransmit-queue nodes visited, as the engine counts them for the CPU model.
    pub nodes: u64,
    /// SACK blocks processed.
    pub blocks: u64,
}

impl SackWorkload {
    /// `n` segments in flight, 1 % lost at random positions (seeded by `n`).
    pub fn new(n: u64) -> SackWorkload {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(n);
        let lost = (0..n).map(|_| rng.next_u32() % 100 == 0).collect();
        let mut w = SackWorkload {
            n,
            lost,
            mid: n / 2,
            acks: Vec::new(),
        };
        w.acks = (w.acks_for(w.mid, w.mid + n / 10).into_iter())
            .map(|(a, _)| a)
            .collect();
        w
    }

    /// The cumulative ACK and the received runs above the first hole once segments
    /// `..=i` arrived.
    fn runs_upto(&self, i: u64) -> (u64, Runs) {
        let mut acks = self.acks_for(i, i + 1);
        match acks.pop() {
            Some((a, runs)) => (a.ack, runs),
            None => self.runs_upto(i - 1),
        }
    }

    /// The ACKs the receiver sends for the arrivals of segments `from..to` (the lost
    /// ones send none), the last with the runs behind it.
    fn acks_for(&self, from: u64, to: u64) -> Vec<(Ack, Runs)> {
        let mut out = Vec::new();
        let mut hole = None;
        let mut runs: Runs = Vec::new();
        for k in 0..to {
            if self.lost[k as usize] {
                hole.get_or_insert(k);
                continue;
            }
            if hole.is_some() {
                match runs.last_mut() {
                    Some(r) if r.1 + 1 == k => r.1 = k,
                    _ => runs.push((k, k)),
                }
            }
            if k >= from {
                let ack = off(hole.unwrap_or(k + 1));
                let blocks = (runs.iter().rev().take(3))
                    .map(|&(a, b)| (off(a), off(b + 1)))
                    .collect();
                let behind = match k + 1 == to {
                    true => runs.clone(),
                    false => Vec::new(),
                };
                out.push((Ack { ack, blocks }, behind));
            }
        }
        out
    }

    /// A queue of `kind` in the state reached after the ACKs of segments `..mid`,
    /// and the lost-marking hint.
    pub fn queue(&self, kind: RtxQueueKind) -> (RtxQueue, u64) {
        let mut q = RtxQueue::with_kind(kind);
        q.set_sndbuf(u32::MAX / 2);
        for i in 0..self.n {
            q.push(Skb {
                seq: off(i),
                end_seq: off(i + 1),
                data: bytes::Bytes::from_static(&PAYLOAD).into(),
                flags: 0,
                sacked: 0,
                pcount: 1,
                gso_size: 0,
                tx_time: Instant(i),
                truesize: MSS + SKB_OVERHEAD,
                tx: Default::default(),
                fclone: 0,
                zc: None,
                uncharged: 0,
            });
        }
        let (ack, runs) = self.runs_upto(self.mid - 1);
        q.clean(ack);
        for &(a, b) in &runs {
            q.sacktag(off(a), off(b + 1));
        }
        if let Some((a, _)) = self.acks_for(self.mid.saturating_sub(200), self.mid).pop() {
            q.sacktag_blocks(&a.blocks);
        }
        let (hint, _) = q.mark_lost_sacked_above(ack, 2 * MSS as u64);
        (q, hint)
    }

    /// The engine's per-ACK work for the first `k` timed ACKs on a fresh queue of
    /// `kind`.
    pub fn pass(&self, kind: RtxQueueKind, k: usize) -> SackPass {
        let (mut q, mut hint) = self.queue(kind);
        let (n0, b0) = (q.nodes_visited(), q.sack_blocks());
        let k = k.min(self.acks.len());
        let t0 = std::time::Instant::now();
        for a in &self.acks[..k] {
            let t = q.sacktag_blocks(&a.blocks);
            let c = q.clean(a.ack);
            let (h, m) = q.mark_lost_sacked_above(hint.max(a.ack), 2 * MSS as u64);
            hint = h;
            black_box((t, c.acked_segs, m));
        }
        SackPass {
            time: t0.elapsed(),
            acks: k as u64,
            nodes: q.nodes_visited() - n0,
            blocks: q.sack_blocks() - b0,
        }
    }
}

/// Bytes of a `struct sk_buff` on x86-64 (Linux 4.13: 232).
const SKB_SIZE: usize = 232;

/// A node laid out as an `sk_buff`: `next` at offset 0, `TCP_SKB_CB(skb)->seq` and
/// `end_seq` at `cb`'s offset 40, the rest padding.
#[repr(C)]
struct Node<'a> {
    next: Cell<Option<&'a Node<'a>>>,
    prev: Cell<Option<&'a Node<'a>>>,
    _head: [u64; 3],
    seq: u32,
    end_seq: u32,
    _rest: [u8; SKB_SIZE - 48],
}

/// The walk: every node's `next` and `end_seq`.
fn walk(head: &Node) -> u64 {
    let mut sum = 0u64;
    let mut skb = Some(head);
    while let Some(s) = skb {
        sum = sum.wrapping_add(s.end_seq as u64);
        skb = s.next.get();
    }
    sum
}

/// How [`list_walk_ns`] links its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListOrder {
    /// In allocation order (a queue whose skbs were allocated as they were sent and
    /// never freed out of order: the hardware prefetcher's best case).
    Alloc,
    /// In a random order (a long-lived flow's skbs come from a slab whose free list
    /// is refilled in the order skbs were freed, by ACKs, SACK merges and TX
    /// completions, so neighbours in sequence are not neighbours in memory).
    Shuffled,
}

/// Walks a list of `n` separately allocated skb-sized nodes, linked in `order`,
/// `reps` times after one warm-up walk; returns each walk's time per node (ns).
///
/// The nodes are allocated one by one, each followed by a filler of 64-1024 bytes
/// (other objects of the heap; half of them freed again, so the allocator reuses
/// their holes). A list larger than the caches is walked cold: the time per node is
/// the memory latency. The nodes lie on this process's pages, so above a few
/// thousand nodes a step also misses the TLB, which the kernel's slabs (in its
/// direct map of huge pages) do not: at 30k nodes and more the figures bound the
/// kernel's from above on the same machine.
pub fn list_walk_ns(n: usize, order: ListOrder, reps: usize) -> Vec<f64> {
    with_list(n, order, |walk_once| {
        black_box(walk_once());
        (0..reps)
            .map(|_| {
                let t0 = std::time::Instant::now();
                black_box(walk_once());
                t0.elapsed().as_nanos() as f64 / n.max(1) as f64
            })
            .collect()
    })
}

/// Builds the list of [`list_walk_ns`] and hands `f` a walk of it (which returns
/// a checksum to keep it from being optimized away).
pub fn with_list<R>(n: usize, order: ListOrder, f: impl FnOnce(&dyn Fn() -> u64) -> R) -> R {
    let n = n.max(1);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(n as u64);
    // One allocation per node, as one skb per slab object.
    #[allow(clippy::vec_box)]
    let mut nodes: Vec<Box<Node>> = Vec::with_capacity(n);
    let mut fillers: Vec<Vec<u8>> = Vec::with_capacity(n);
    for i in 0..n {
        let seq = i as u32 * 1448;
        nodes.push(Box::new(Node {
            next: Cell::new(None),
            prev: Cell::new(None),
            _head: [0; 3],
            seq,
            end_seq: seq + 1448,
            _rest: [0; SKB_SIZE - 48],
        }));
        let len = 64 + (rng.next_u32() % 961) as usize;
        fillers.push(vec![i as u8; len]);
        if rng.next_u32().is_multiple_of(2) {
            fillers.pop();
        }
    }
    let mut idx: Vec<usize> = (0..n).collect();
    if order == ListOrder::Shuffled {
        for i in (1..n).rev() {
            idx.swap(i, rng.next_u64() as usize % (i + 1));
        }
    }
    for w in idx.windows(2) {
        let (a, b) = (&*nodes[w[0]], &*nodes[w[1]]);
        a.next.set(Some(b));
        b.prev.set(Some(a));
    }
    let head: &Node = &nodes[idx[0]];
    debug_assert_eq!(head.seq % 1448, 0);
    let r = f(&|| walk(head));
    drop(fillers);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workloads_do_their_work() {
        assert!(bulk_time(200, BulkPart::Ack) > Duration::ZERO);
        let w = SackWorkload::new(1_000);
        let list = w.pass(RtxQueueKind::List, 50);
        let tree = w.pass(RtxQueueKind::Tree, 50);
        assert_eq!(list.acks, 50);
        assert_eq!(
            list.blocks, tree.blocks,
            "the same SACK blocks in both shapes"
        );
        // In order the hints hold: the list visits a few nodes per ACK, the tree
        // descends from its root.
        assert!(
            list.nodes > 0 && tree.nodes > list.nodes,
            "{list:?} {tree:?}"
        );
        let ns = list_walk_ns(2_000, ListOrder::Shuffled, 3);
        assert_eq!(ns.len(), 3);
        assert!(ns.iter().all(|&x| x > 0.0 && x < 10_000.0), "{ns:?}");
    }
}
