//! Fairness: 4 flows of one congestion control share a 100 Mbit/s, 40 ms bottleneck;
//! Jain's index over the last half of a 60 s (simulated) run is at least 0.95.

mod common;

use common::*;
use lowtide_sim::{Scenario, Workload};

#[test]
fn four_flows_share_fairly_for_each_cc() {
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
        assert!(r.jain_index >= 0.95, "{cc}: Jain's index {}", r.jain_index);
        assert!(r.goodput_bps > 85e6, "{cc}: total {}", r.goodput_bps);
    }
}
