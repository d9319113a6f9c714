//! The sender's CPU cost per packet on this machine, for the simulator's CPU model
//! (lowtide_sim::cpu): time spent in host A's `handle_packet` per ACK
//! and in its `poll_transmit` per packet sent, one bulk flow over an ideal 10 ms
//! path without loss (the ACK path without SACK work; `sack.rs` measures that part).
//!
//! `cargo bench -p lowtide --bench engine`

use criterion::{criterion_group, criterion_main, Criterion};
use lowtide::{Config, Instant, RxChecksum, SocketHandle, Stack};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Two stacks joined by a 10 ms one-way wire; A writes without end.
struct Bulk {
    now: Instant,
    a: Stack,
    b: Stack,
    h: SocketHandle,
    rx: Option<SocketHandle>,
    listener: SocketHandle,
    wire: BTreeMap<(u64, u64), (bool, Vec<u8>)>,
    seq: u64,
    buf: Vec<u8>,
    /// Wall time in A's ACK handling and A's transmit path, and their counts.
    ack_time: Duration,
    acks: u64,
    tx_time: Duration,
    txs: u64,
}

const DELAY_NS: u64 = 10_000_000;

impl Bulk {
    fn new() -> Bulk {
        let cfg = Config::default();
        let (aa, ba): (SocketAddr, SocketAddr) = (
            "10.0.0.1:0".parse().unwrap(),
            "10.0.0.2:5001".parse().unwrap(),
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

    /// Puts what each stack sends on the wire (completed at once).
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
                lowtide_wire::gso::segment(&tx.packet, tx.gso_size, |s| {
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
    fn step(&mut self) {
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

/// Runs bulk exchanges until `n` of what `count` counts happened; returns the time
/// `time` accumulated.
fn measure(n: u64, count: fn(&Bulk) -> u64, time: fn(&Bulk) -> Duration) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = n;
    while left > 0 {
        let mut b = Bulk::new();
        // Past slow start's first rounds.
        while b.now.as_nanos() < 200 * DELAY_NS / 10 {
            b.step();
        }
        let (c0, t0) = (count(&b), time(&b));
        while count(&b) - c0 < left.min(200_000) && b.now.as_nanos() < 60_000_000_000 {
            b.step();
        }
        let done = count(&b) - c0;
        total += time(&b) - t0;
        left = left.saturating_sub(done.max(1));
    }
    total
}

fn engine(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_per_packet");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("ack", |b| {
        b.iter_custom(|iters| measure(iters, |b| b.acks, |b| b.ack_time))
    });
    g.bench_function("xmit", |b| {
        b.iter_custom(|iters| measure(iters, |b| b.txs, |b| b.tx_time))
    });
    g.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
