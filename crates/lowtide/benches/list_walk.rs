//! The cost of one node of a walk of Linux's retransmit queue before seed 003: a
//! linked list of separately allocated `struct sk_buff` (about 232 bytes each, from
//! the `skbuff_head_cache` slab, among other objects), walked as
//! `tcp_sacktag_skip`/`tcp_sacktag_walk` and `tcp_for_write_queue` walk it: each step
//! reads the node's `next` pointer and `TCP_SKB_CB(skb)->end_seq` (one cache line).
//!
//! lowtide's list ablation is a `VecDeque` (contiguous skbs), so the CPU model of the
//! simulator (`lowtide_sim::cpu::CpuModel`) takes the list's per-node cost from this
//! bench instead. N nodes are allocated one by one, each followed by a filler of
//! 64-1024 bytes (other objects of the heap; half of them freed again, so the
//! allocator reuses their holes), then linked:
//! - `alloc_order`: in allocation order (a queue whose skbs were allocated as they
//!   were sent and never freed out of order: the most prefetch-friendly case);
//! - `shuffled`: in a random order (a long-lived flow's skbs come from a slab whose
//!   free list is refilled in the order skbs were freed, by ACKs, SACK merges and
//!   TX completions, so neighbours in sequence are not neighbours in memory).
//!
//! A list larger than the caches is walked cold: the time per node is the memory
//! latency. The nodes lie on 4 KB pages, so above a few thousand nodes a step also
//! misses the TLB, which the kernel's slabs (in its direct map of huge pages) do
//! not: at 30k nodes and more the figures are an upper bound of the kernel's on the
//! same machine (this VM backs no transparent huge pages, so the bench cannot
//! take that part out). Criterion reports the time of one full walk; the throughput line gives
//! nodes per second (1 / ns per node).
//!
//! `cargo bench -p lowtide --bench list_walk`

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use std::cell::Cell;
use std::time::Duration;

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

/// The nodes and the fillers that keep them apart in memory.
struct Heap<'a> {
    /// Boxed on purpose: one allocation per node, as one skb per slab object.
    #[allow(clippy::vec_box)]
    nodes: Vec<Box<Node<'a>>>,
    _fillers: Vec<Vec<u8>>,
}

fn heap<'a>(n: usize, rng: &mut rand_chacha::ChaCha8Rng) -> Heap<'a> {
    let mut nodes = Vec::with_capacity(n);
    let mut fillers = Vec::with_capacity(n);
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
    Heap {
        nodes,
        _fillers: fillers,
    }
}

/// Links `nodes` in the order `order`; returns the head.
fn link<'a>(nodes: &'a [Box<Node<'a>>], order: &[usize]) -> &'a Node<'a> {
    for w in order.windows(2) {
        let (a, b) = (&*nodes[w[0]], &*nodes[w[1]]);
        a.next.set(Some(b));
        b.prev.set(Some(a));
    }
    &nodes[order[0]]
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

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("list_walk");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in [1_000usize, 10_000, 30_000, 100_000, 300_000] {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(n as u64);
        let h = heap(n, &mut rng);
        let mut order: Vec<usize> = (0..n).collect();
        g.throughput(Throughput::Elements(n as u64));
        let head = link(&h.nodes, &order);
        g.bench_with_input(BenchmarkId::new("alloc_order", n), &head, |b, head| {
            b.iter(|| walk(black_box(head)))
        });
        for i in (1..n).rev() {
            order.swap(i, rng.next_u64() as usize % (i + 1));
        }
        for s in &h.nodes {
            s.next.set(None);
        }
        let head = link(&h.nodes, &order);
        g.bench_with_input(BenchmarkId::new("shuffled", n), &head, |b, head| {
            b.iter(|| walk(black_box(head)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
