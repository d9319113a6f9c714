//! ECN end to end in the simulator (RFC 3168): a step-marking device queue marks the
//! packets of ECN flows CE instead of letting the queue grow; the receivers echo
//! ECE, the senders reduce cwnd once per window (CWR) without any retransmission.

mod common;

use common::*;
use lowtide::Mib;
use lowtide_sim::{Scenario, Workload};

/// Eight CUBIC flows for 3 s through host A's 50-packet device queue, which marks
/// CE from 10 packets on.
fn marked(tcp_ecn: &str) -> Scenario {
    Scenario {
        seed: 1,
        flows: 8,
        workload: Workload::Bulk {
            duration_ns: 3_000_000_000,
        },
        link_ab: link(100_000_000, 10_000),
        link_ba: link(100_000_000, 10_000),
        queue_limit: 50,
        ecn_mark_at: Some(10),
        config: config(&[tcp_ecn]),
        ..Scenario::default()
    }
}

#[test]
fn ecn_flows_are_marked_and_back_off_without_loss() {
    let r = run_verified(&marked("net.ipv4.tcp_ecn=1"));
    assert!(r.drops.ce_marked > 100, "marks {}", r.drops.ce_marked);
    assert_eq!(r.drops.queue, 0);
    let delivered_ce = r.counters.get(Mib::TcpExtTCPDeliveredCE);
    assert!(delivered_ce > 0, "the senders saw the receivers' ECE");
    assert_eq!(r.counters.get(Mib::TcpRetransSegs), 0, "a mark is no loss");
}

#[test]
fn flows_without_ecn_are_never_marked() {
    // tcp_ecn = 2 (Linux's default): the receivers would accept ECN, but nobody asks.
    let r = run_verified(&marked("net.ipv4.tcp_ecn=2"));
    assert_eq!(r.drops.ce_marked, 0);
    assert_eq!(r.counters.get(Mib::TcpExtTCPDeliveredCE), 0);
}

#[test]
fn marking_keeps_the_device_queue_shorter() {
    let with = run_verified(&marked("net.ipv4.tcp_ecn=1"));
    let without = run_verified(&marked("net.ipv4.tcp_ecn=2"));
    assert!(
        with.device_queue.mean_delay_us < without.device_queue.mean_delay_us,
        "{} vs {} us",
        with.device_queue.mean_delay_us,
        without.device_queue.mean_delay_us
    );
}
