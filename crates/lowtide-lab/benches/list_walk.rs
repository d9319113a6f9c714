//! The cost of one node of a walk of Linux's retransmit queue before seed 003: a
//! linked list of separately allocated `struct sk_buff` (232 bytes, among other
//! objects of the heap), linked in allocation order and in a random order
//! (`lowtide_lab::calibrate::workload::with_list`, whose docs say why). Criterion
//! reports the time of one full walk; the throughput line gives nodes per second
//! (1 / ns per node). `lowtide experiment calibrate` measures the same with
//! repetitions and gives the CPU model its points.
//!
//! `cargo bench -p lowtide-lab --bench list_walk`

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lowtide_lab::calibrate::workload::{with_list, ListOrder};
use std::time::Duration;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("list_walk");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in [1_000usize, 10_000, 30_000, 100_000, 300_000] {
        g.throughput(Throughput::Elements(n as u64));
        for (name, order) in [
            ("alloc_order", ListOrder::Alloc),
            ("shuffled", ListOrder::Shuffled),
        ] {
            with_list(n, order, |walk| {
                g.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                    b.iter(|| black_box(walk()))
                });
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
