//! SACK processing cost per ACK, rb-tree retransmit queue vs the list before seed 003
//! (`lowtide_lab::calibrate::workload::SackWorkload`: N one-MSS skbs in flight, 1 %
//! lost, the ACKs for the next N/10 arrivals through `sacktag_blocks`, `clean` and
//! `mark_lost_sacked_above`, the seed-era RFC 6675 marking that lowtide's engine no
//! longer runs since it follows Linux 6.17's RACK-only loss detection).
//! `lowtide experiment calibrate` derives the model's
//! per-SACK-block and per-tree-node costs from the same workload.
//!
//! `cargo bench -p lowtide-lab --bench sack`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use lowtide::tcp::rtx::RtxQueueKind;
use lowtide_lab::calibrate::workload::SackWorkload;
use std::time::Duration;

fn sack(c: &mut Criterion) {
    let mut g = c.benchmark_group("sack_per_ack");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in [1_000u64, 10_000, 100_000] {
        let w = SackWorkload::new(n);
        for (name, kind) in [("tree", RtxQueueKind::Tree), ("list", RtxQueueKind::List)] {
            // The work the CPU model charges for, per ACK, counted outside the timing.
            let p = w.pass(kind, w.acks.len());
            eprintln!(
                "sack_per_ack/{name}/{n}: {:.1} nodes visited, {:.2} SACK blocks per ACK",
                p.nodes as f64 / p.acks as f64,
                p.blocks as f64 / p.acks as f64
            );
            g.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut left = iters as usize;
                    while left > 0 {
                        let p = w.pass(kind, left);
                        total += p.time;
                        left -= (p.acks as usize).max(1).min(left);
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
