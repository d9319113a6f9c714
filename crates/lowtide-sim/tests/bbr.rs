//! BBR v1 on a 100 Mbit/s, 40 ms path with a deep queue: the bandwidth estimate
//! matches the bottleneck, the queue stays short, and random loss barely hurts.

mod common;

use common::*;
use lowtide_sim::{RunResults, Scenario, Workload};

/// One bulk BBR flow for 30 s over 100 Mbit/s, 40 ms RTT, 1000-packet queue.
fn bbr_path(seed: u64, loss: f64) -> Scenario {
    let mut sc = Scenario {
        seed,
        flows: 1,
        workload: Workload::Bulk {
            duration_ns: 30_000_000_000,
        },
        link_ab: link(100_000_000, 20_000),
        link_ba: link(100_000_000, 20_000),
        queue_limit: 1000,
        config: config(&["net.ipv4.tcp_congestion_control=bbr"]),
        ..Scenario::default()
    };
    sc.link_ab.loss = loss;
    sc
}

/// Payload bit/s the data direction can carry: link rate times the payload share of
/// each full segment on the wire (MSS 1448 with timestamps).
fn goodput_capacity(r: &RunResults) -> f64 {
    let s = &r.links[0].stats;
    let wire_per_segment = s.wire_bytes as f64 / s.packets as f64;
    100e6 * 1448.0 / wire_per_segment
}

#[test]
fn bbr_estimates_the_bottleneck_and_keeps_rtt_low() {
    let r = run_verified(&bbr_path(1, 0.0));
    let f = &r.per_flow[0];
    let cap = goodput_capacity(&r);
    let bw = f.bbr_bw_bps as f64;
    assert!(
        (bw - cap).abs() < 0.10 * cap,
        "bbr_bw {bw} vs capacity {cap}"
    );
    assert!(
        f.goodput_bps > 0.9 * cap,
        "goodput {} of {cap}",
        f.goodput_bps
    );
    // Mean over the whole run, startup included: within 25 % of the 40 ms path.
    assert!(f.mean_rtt_us < 50_000, "mean RTT {} us", f.mean_rtt_us);
    assert!(f.min_rtt_us >= 40_000 && f.min_rtt_us < 41_000);
    assert_eq!(r.drops.queue, 0, "the deep queue never overflows");
}

#[test]
fn bbr_keeps_goodput_under_random_loss() {
    let r = run_verified(&bbr_path(2, 0.01));
    let f = &r.per_flow[0];
    let cap = goodput_capacity(&r);
    assert!(r.drops.link_loss > 1000);
    // Loss-based CCs collapse to a few Mbit/s here (Reno: about 2.3 Mbit/s).
    assert!(
        f.goodput_bps > 0.7 * cap,
        "goodput {} of {cap}",
        f.goodput_bps
    );
    let bw = f.bbr_bw_bps as f64;
    assert!(
        (bw - cap).abs() < 0.10 * cap,
        "bbr_bw {bw} vs capacity {cap}"
    );
}

/// Seed 003's E4 path scaled to 200 Mbit/s: 150 ms RTT, 1 % loss, GRO off, buffers
/// large enough for the 3.75 MB BDP (the seed's hosts were tuned so). BBR ignores
/// random loss, so it needs only a receive window that keeps up with its startup
/// and with the holes loss leaves in the receive queue: the receiver autotunes from
/// its own RTT estimate and adds the sender's growth (`tcp_rcv_space_adjust`).
/// Before that the window lagged and BBR got 21 Mbit/s (bandwidth estimate 52).
#[test]
fn bbr_e4_long_lossy_path() {
    let mut sc = bbr_path(1, 0.01);
    sc.workload = Workload::Bulk {
        duration_ns: 10_000_000_000,
    };
    sc.link_ab = link(200_000_000, 75_000);
    sc.link_ab.loss = 0.01;
    sc.link_ba = link(200_000_000, 75_000);
    sc.gro = false;
    sc.config = config(&[
        "net.ipv4.tcp_congestion_control=bbr",
        "net.ipv4.tcp_rmem=4096 131072 67108864",
        "net.ipv4.tcp_wmem=4096 16384 67108864",
    ]);
    let r = run_verified(&sc);
    let f = &r.per_flow[0];
    // 10 s include a startup of about 10 round trips (1.5 s).
    assert!(f.goodput_bps > 120e6, "goodput {}", f.goodput_bps);
    assert!(f.bbr_bw_bps > 170_000_000, "bbr_bw {}", f.bbr_bw_bps);
}
