//! A seed sweep: hundreds of short randomized runs, each of which must deliver every
//! byte intact. `LOWTIDE_SWEEP=N` changes the number of runs (default 300).

mod common;

use common::*;
use lowtide_sim::payload::splitmix64;

struct Pick(u64);

impl Pick {
    fn next(&mut self) -> u64 {
        self.0 = splitmix64(self.0);
        self.0
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    fn prob(&mut self, max_pct: u64) -> f64 {
        self.range(0, max_pct * 10) as f64 / 1000.0
    }
}

#[test]
fn seed_sweep() {
    let runs: u64 = std::env::var("LOWTIDE_SWEEP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    for seed in 0..runs {
        let mut p = Pick(seed ^ 0x5eed);
        let flows = p.range(1, 8) as u32;
        let bytes = if p.chance(0.3) {
            p.range(1, 3_000)
        } else {
            p.range(1, 600_000)
        };
        let mut sc = transfer(seed, flows, bytes);
        let rate = [10_000_000, 100_000_000, 1_000_000_000][p.range(0, 2) as usize];
        let delay_us = p.range(50, 20_000);
        sc.link_ab = link(rate, delay_us);
        sc.link_ba = link(rate, delay_us);
        sc.link_ab.loss = if p.chance(0.6) { p.prob(10) } else { 0.0 };
        sc.link_ba.loss = if p.chance(0.3) { p.prob(5) } else { 0.0 };
        if p.chance(0.3) {
            sc.link_ab.jitter_ns = p.range(0, delay_us * 500);
        }
        if p.chance(0.2) {
            sc.link_ab.reorder = p.prob(5);
            sc.link_ab.duplicate = p.prob(5);
            sc.link_ab.corrupt = p.prob(5);
        }
        sc.gro = p.chance(0.7);
        sc.queue_limit = [1000, 50, 5][p.range(0, 2) as usize];
        if p.chance(0.2) {
            sc.config.mtu = p.range(300, 1500) as u32;
        }
        run_verified(&sc);
    }
}
