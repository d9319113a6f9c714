//! Sharing: 4 flows of one congestion control from one host through its own
//! 100 Mbit/s device (40 ms RTT) for 60 s (simulated): the link is full and no flow
//! is starved (each gets at least half an equal share).
//!
//! Not Jain's index near 1: the bottleneck is the sending host's own device queue,
//! and with TCP Small Queues no queue ever fills, every flow is TSQ-limited and so
//! not cwnd-limited, and cwnd stays where slow start left it
//! (`tcp_is_cwnd_limited`); the shares are set by where each flow's HyStart exited.
//! Linux does the same: 4 kernel CUBIC flows (`iperf3 -P 4`) through an htb 100
//! Mbit/s + pfifo 1000 on their own veth got 13.5, 27.4, 27.4, 27.4 Mbit/s with 0
//! drops (2026-11-25, Linux 6.18).

mod common;

use common::*;
use lowtide_sim::{Scenario, Workload};

#[test]
fn four_flows_fill_the_link_and_none_is_starved_for_each_cc() {
    for cc in ["reno", "cubic", "bbr"] {
        let sc = Scenario {
            flows: 4,
            workload: Workload::Bulk {
                duration_ns: 60_000_000_000,
            },
            link_ab: link(100_000_000, 20_000),
            link_ba: link(100_000_000, 20_000),
            config: config(&[&format!("net.ipv4.tcp_congestion_control={cc}")]),
            ..Scenario::default()
        };
        let r = run_verified(&sc);
        assert!(r.goodput_bps > 85e6, "{cc}: total {}", r.goodput_bps);
        let fair = r.goodput_bps / 4.0;
        for f in &r.per_flow {
            assert!(
                f.goodput_bps >= fair / 2.0,
                "{cc}: a flow starved: {} of {}",
                f.goodput_bps,
                r.goodput_bps
            );
        }
        assert!(r.jain_index >= 0.75, "{cc}: Jain's index {}", r.jain_index);
    }
}
