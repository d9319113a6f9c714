//! CUBIC in front of a deep buffer (100 Mbit/s, 40 ms, a 1000-packet queue): a
//! loss-based sender fills whatever queue the path has, up to the receive window.
//! The receiver sizes that window from its own RTT estimate (`rcv_rtt_est`), which
//! follows the RTT as the queue grows; with the handshake's RTT instead the window
//! stopped at twice 40 ms worth of data and the queue at about 40 ms.

mod common;

use common::*;
use lowtide_sim::{Scenario, Workload};

/// One CUBIC bulk flow for 10 s; TSQ off so that the sender's NIC queue stands for
/// a bottleneck buffer further down the path (with TSQ the sender keeps it short).
fn deep_buffer(sysctls: &[&str]) -> Scenario {
    let mut all = vec![
        "net.ipv4.tcp_congestion_control=cubic",
        "experimental.tsq=false",
    ];
    all.extend_from_slice(sysctls);
    Scenario {
        seed: 1,
        flows: 1,
        workload: Workload::Bulk {
            duration_ns: 10_000_000_000,
        },
        link_ab: link(100_000_000, 20_000),
        link_ba: link(100_000_000, 20_000),
        queue_limit: 1000,
        config: config(&all),
        ..Scenario::default()
    }
}

#[test]
fn cubic_fills_the_buffer_up_to_the_receive_window() {
    let r = run_verified(&deep_buffer(&[]));
    let f = &r.per_flow[0];
    // tcp_rmem[2] = 32 MB: a window of up to about 21 MB, 0.5 MB of it the path, the
    // rest queue: about 250 ms of it at 100 Mbit/s by the end of the run.
    assert!(f.rtt_us > 200_000, "RTT at the end {} us", f.rtt_us);
    assert!(f.mean_rtt_us > 150_000, "mean RTT {} us", f.mean_rtt_us);
    assert!(f.goodput_bps > 85e6, "goodput {}", f.goodput_bps);
}

#[test]
fn a_smaller_tcp_rmem_caps_the_queue() {
    // tcp_rmem[2] = 2 MB: a window of about 1.27 MB (scaling_ratio 162/256; it was
    // half the buffer before Linux 6.5), about 60 ms of queue on top of 40 ms.
    let r = run_verified(&deep_buffer(&["net.ipv4.tcp_rmem=4096 131072 2000000"]));
    let f = &r.per_flow[0];
    assert!(
        f.rtt_us > 90_000 && f.rtt_us < 125_000,
        "RTT at the end {} us",
        f.rtt_us
    );
}
