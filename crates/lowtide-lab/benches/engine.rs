//! The sender's CPU cost per packet on this machine, for the simulator's CPU model
//! (lowtide_sim::cpu): time in host A's `handle_packet` per ACK and in its
//! `poll_transmit` per packet sent, one bulk flow over an ideal 10 ms path without
//! loss (`lowtide_lab::calibrate::workload::Bulk`; `lowtide experiment calibrate`
//! measures the same with repetitions and stores it).
//!
//! `cargo bench -p lowtide-lab --bench engine`

use criterion::{criterion_group, criterion_main, Criterion};
use lowtide_lab::calibrate::workload::{bulk_time, BulkPart};
use std::time::Duration;

fn engine(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_per_packet");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("ack", |b| b.iter_custom(|n| bulk_time(n, BulkPart::Ack)));
    g.bench_function("xmit", |b| b.iter_custom(|n| bulk_time(n, BulkPart::Xmit)));
    g.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
