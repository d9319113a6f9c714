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

#[test]
fn accecn_flows_back_off_and_count_ce_packets() {
    // net.ipv4.tcp_ecn = 3 on both hosts: AccECN, every segment ECT(0), the CE count
    // fed back in ACE and turned into delivered_ce and cwnd reductions by the
    // senders (tcp_accecn_process).
    let acc = run_verified(&marked("net.ipv4.tcp_ecn=3"));
    let classic = run_verified(&marked("net.ipv4.tcp_ecn=1"));
    let none = run_verified(&marked("net.ipv4.tcp_ecn=2"));
    assert!(acc.drops.ce_marked > 100, "marks {}", acc.drops.ce_marked);
    assert_eq!(acc.drops.queue, 0);
    assert_eq!(
        acc.counters.get(Mib::TcpRetransSegs),
        0,
        "a mark is no loss"
    );
    assert!(
        acc.device_queue.mean_delay_us < none.device_queue.mean_delay_us,
        "the senders reduce: {} vs {} us",
        acc.device_queue.mean_delay_us,
        none.device_queue.mean_delay_us
    );
    // Every marked (GSO) packet is at least one CE segment, each reported once:
    // AccECN counts CE packets, where classic ECN counts every packet an ECE ACK
    // covered.
    let ce = acc.counters.get(Mib::TcpExtTCPDeliveredCE);
    assert!(
        ce >= acc.drops.ce_marked,
        "{ce} CE packets, {} marks",
        acc.drops.ce_marked
    );
    let classic_ce = classic.counters.get(Mib::TcpExtTCPDeliveredCE);
    assert!(ce < classic_ce, "{ce} vs classic ECN's {classic_ce}");
}
