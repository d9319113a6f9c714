//! A retransmission of a packet that still waits in the sender's own device queue
//! would only queue a duplicate behind its original: Linux does not make it
//! (tcp_output.c `skb_still_in_host_queue`), and counts
//! `TcpExtTCPSpuriousRtxHostQueues` instead. Here the first hop is the bottleneck,
//! host A's NIC queue (a pfifo of 1000 packets), with no loss anywhere: a loss
//! probe that fires while the tail still waits there must not send it again.

mod common;

use common::*;
use lowtide::Mib::{TcpExtTCPLossProbes, TcpExtTCPSpuriousRtxHostQueues, TcpRetransSegs};
use lowtide_sim::{RunResults, Scenario};

/// `flows` transfers of `bytes` through a 2 ms RTT path whose first hop runs at
/// `rate_bps`.
fn slow_first_hop(flows: u32, bytes: u64, rate_bps: u64, sysctls: &[&str]) -> Scenario {
    let mut sc = transfer(1, flows, bytes);
    sc.link_ab = link(rate_bps, 1_000);
    sc.link_ba = link(rate_bps, 1_000);
    sc.config = config(sysctls);
    sc
}

fn assert_no_retransmission(r: &RunResults) {
    let c = |m| r.counters.get(m);
    assert_eq!(
        c(TcpRetransSegs),
        0,
        "a lossless path needs no retransmission"
    );
    assert!(
        c(TcpExtTCPSpuriousRtxHostQueues) > 0,
        "none refused: the test staged nothing"
    );
}

/// Eight 10 KB transfers share a 10 Mbit/s device. The handshakes measured an RTT
/// of about 2 ms, so each flow's loss-probe timeout is a few ms; its initial window
/// waits behind the other flows' in the NIC queue for longer than that. With TSQ
/// (the default) a flow keeps about a millisecond of data there, so some flows
/// have no new data to probe with: the probe would be the last segment again,
/// while the original is still queued.
#[test]
fn a_loss_probe_waits_for_a_tail_still_in_a_shared_device_queue() {
    let r = run_verified(&slow_first_hop(8, 10_000, 10_000_000, &[]));
    assert_no_retransmission(&r);
}

/// One 10 KB transfer at 1 Mbit/s with TSQ off: the whole initial window goes to
/// the NIC queue at once and takes 80 ms to drain, while the loss-probe timeout
/// (2 SRTT + 2 ms) fires after a few ms with nothing new to send.
#[test]
fn a_loss_probe_waits_for_its_own_burst_to_leave_the_device() {
    let r = run_verified(&slow_first_hop(
        1,
        10_000,
        1_000_000,
        &["experimental.tsq=false"],
    ));
    assert_no_retransmission(&r);
    // The probe is not sent later either: the ACKs came first.
    assert_eq!(r.counters.get(TcpExtTCPLossProbes), 0);
}
