//! SACK processing cost per ACK, rb-tree retransmit queue vs the list before seed 003.
//!
//! N one-MSS skbs are in flight and 1 % of them (random positions) are lost. The
//! receiver ACKs every segment that arrives, as Linux does out of order: the
//! cumulative ACK stays at the first hole and up to 3 SACK blocks follow, the one
//! holding the newest segment first, then the older ones by recency. Each measured
//! ACK goes through what the engine runs per ACK: `sacktag_blocks`, `clean` and
//! `mark_lost_sacked_above`. The queue is first brought to the state of mid-stream
//! (everything below N/2 tagged), then the ACKs for the next N/10 segments are timed.
//!
//! `cargo bench -p lowtide --bench sack`

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use lowtide::tcp::consts::SKB_OVERHEAD;
use lowtide::tcp::rtx::skb::Skb;
use lowtide::tcp::rtx::{RtxQueue, RtxQueueKind};
use lowtide::time::Instant;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use std::time::Duration;

const MSS: u32 = 1448;
static PAYLOAD: [u8; MSS as usize] = [0; MSS as usize];

/// Received runs of segments, `[first, last]`.
type Runs = Vec<(u64, u64)>;

/// One ACK as the receiver sends it: cumulative ACK and SACK blocks.
struct Ack {
    ack: u64,
    blocks: Vec<(u64, u64)>,
}

/// Stream offset of segment `i`.
fn off(i: u64) -> u64 {
    1 + i * MSS as u64
}

/// The receiver's view of segments `0..n` arriving in order with `lost` missing.
struct Scenario {
    n: u64,
    lost: Vec<bool>,
}

impl Scenario {
    fn new(n: u64) -> Scenario {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(n);
        let lost = (0..n).map(|_| rng.next_u32() % 100 == 0).collect();
        Scenario { n, lost }
    }

    /// The cumulative ACK and the received runs `[first, last]` above the first hole
    /// once segments `..=i` arrived.
    fn runs_upto(&self, i: u64) -> (u64, Runs) {
        let mut acks = self.acks(i, i + 1);
        match acks.pop() {
            Some((a, runs)) => (a.ack, runs),
            None => self.runs_upto(i - 1),
        }
    }

    /// The ACKs the receiver sends for the arrivals of segments `from..to` (the lost
    /// ones send none), with the runs behind each.
    fn acks(&self, from: u64, to: u64) -> Vec<(Ack, Runs)> {
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
                let blocks = runs
                    .iter()
                    .rev()
                    .take(3)
                    .map(|&(a, b)| (off(a), off(b + 1)))
                    .collect();
                out.push((
                    Ack { ack, blocks },
                    if k + 1 == to {
                        runs.clone()
                    } else {
                        Vec::new()
                    },
                ));
            }
        }
        out
    }

    /// A queue of `n` skbs in the state reached after the ACKs of segments `..mid`,
    /// and the lost-marking hint.
    fn queue_at(&self, kind: RtxQueueKind, mid: u64) -> (RtxQueue, u64) {
        let mut q = RtxQueue::with_kind(kind);
        q.set_sndbuf(u32::MAX / 2);
        for i in 0..self.n {
            q.push(Skb {
                seq: off(i),
                end_seq: off(i + 1),
                data: bytes::Bytes::from_static(&PAYLOAD),
                flags: 0,
                sacked: 0,
                pcount: 1,
                tx_time: Instant(i),
                truesize: MSS + SKB_OVERHEAD,
                tx: Default::default(),
            });
        }
        let (ack, runs) = self.runs_upto(mid - 1);
        q.clean(ack, MSS);
        for &(a, b) in &runs {
            q.sacktag(off(a), off(b + 1), MSS);
        }
        let prev = self.acks(mid.saturating_sub(200), mid).pop();
        if let Some((a, _)) = prev {
            q.sacktag_blocks(&a.blocks, MSS);
        }
        let (hint, _) = q.mark_lost_sacked_above(ack, 2 * MSS as u64);
        (q, hint)
    }
}

/// The engine's per-ACK work on the retransmit queue.
fn on_ack(q: &mut RtxQueue, a: &Ack, hint: &mut u64) {
    let t = q.sacktag_blocks(&a.blocks, MSS);
    let c = q.clean(a.ack, MSS);
    let (h, m) = q.mark_lost_sacked_above((*hint).max(a.ack), 2 * MSS as u64);
    *hint = h;
    black_box((t, c.acked_segs, m));
}

fn sack(c: &mut Criterion) {
    let mut g = c.benchmark_group("sack_per_ack");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in [1_000u64, 10_000, 100_000] {
        let sc = Scenario::new(n);
        let mid = n / 2;
        let acks: Vec<Ack> = sc
            .acks(mid, mid + n / 10)
            .into_iter()
            .map(|(a, _)| a)
            .collect();
        for (name, kind) in [("tree", RtxQueueKind::Tree), ("list", RtxQueueKind::List)] {
            // The work the CPU model charges for (nodes visited, SACK blocks), per
            // ACK of the timed sequence, counted outside the timing.
            let (mut q, mut hint) = sc.queue_at(kind, mid);
            let (n0, b0) = (q.nodes_visited(), q.sack_blocks());
            for a in &acks {
                on_ack(&mut q, a, &mut hint);
            }
            let per = |x: u64| x as f64 / acks.len() as f64;
            eprintln!(
                "sack_per_ack/{name}/{n}: {:.1} nodes visited, {:.2} SACK blocks per ACK",
                per(q.nodes_visited() - n0),
                per(q.sack_blocks() - b0)
            );
            g.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut left = iters as usize;
                    while left > 0 {
                        let (mut q, mut hint) = sc.queue_at(kind, mid);
                        let k = left.min(acks.len());
                        let t0 = std::time::Instant::now();
                        for a in &acks[..k] {
                            on_ack(&mut q, a, &mut hint);
                        }
                        total += t0.elapsed();
                        left -= k;
                    }
                    total
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, sack);
criterion_main!(benches);
