//! `tcp_cleanup_rbuf`: a read that opens the receive window sends a window update at
//! once, even when the buffer holds less than two segments, so the sender does not
//! wait for a zero-window probe (found by `lowtide sim soak`, seed 3 run 1599).

use crate::common::*;
use lowtide::{Config, Mib};
use std::time::Duration;

#[test]
fn a_read_reopening_a_small_window_sends_a_window_update() {
    // A 4 KB receive buffer: the window (half the buffer) holds one 1448-byte
    // segment, less than the two that a window update needed before.
    let cfg = Config {
        tcp_rmem: [4096, 4096, 4096],
        tcp_moderate_rcvbuf: false,
        ..Config::default()
    };
    let (mut p, c, s) = establish(cfg);
    let data = pattern(300_000, 5);
    let mut sent = 0;
    let mut got = Vec::new();
    let start = p.now;
    p.drive_until(Duration::from_secs(120), |p| {
        if sent < data.len() {
            if let Ok(k) = p.a.send(p.now, c, &data[sent..]) {
                sent += k;
            }
        }
        got.extend(drain(&mut p.b, p.now, s));
        got.len() == data.len()
    });
    assert!(got == data);
    let probes = p.a.counters().get(Mib::TcpExtTCPWinProbe);
    let took = p.now.saturating_since(start);
    // 208 segments, one window each: a window update per read gives one segment
    // per round trip (20 ms); waiting for zero-window probes instead took 14 s.
    assert_eq!(probes, 0, "zero-window probes: {probes}, took {took:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}
