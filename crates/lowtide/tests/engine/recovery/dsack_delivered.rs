//! A D-SACKed duplicate counts as delivered, as Linux counts it: `tcp_dsack_seen`
//! adds the duplicate's segments to `sack_delivered`, which `tcp_ack` hands to
//! `tcp_count_delivered`, so `tp->delivered` (tcpi_delivered), the rate sample that
//! BBR reads and PRR's `newly_acked_sacked` all include a spurious retransmission
//! that arrived. A dubious D-SACK (more duplicates than retransmissions) does not.

use crate::common::drill::{ms, Drill};

/// Ten segments out, a tail loss probe resends the last, then the peer ACKs all ten
/// with `dsack` as a D-SACK: tcpi_delivered's growth and the retransmissions.
fn delivered_by_final_ack(dsack: (u32, u32)) -> (u64, u32) {
    let mut d = Drill::cubic(ms(100));
    d.write(10_000);
    d.wait(ms(60));
    assert_eq!(d.sent().len(), 10, "paced out in 50 ms");
    d.wait(ms(400));
    let resent = d.sent_ranges();
    assert_eq!(
        resent,
        [(9001, 10001)],
        "the loss probe resent the tail once"
    );
    let before = d.info().delivered;
    d.ack_sack(ms(1), 10_001, &[dsack]);
    (d.info().delivered - before, d.info().total_retrans)
}

#[test]
fn a_dsacked_spurious_retransmission_is_delivered() {
    let (delivered, retrans) = delivered_by_final_ack((9001, 10001));
    assert_eq!(retrans, 1);
    assert_eq!(
        delivered,
        10 + 1,
        "ten segments acked and one D-SACKed duplicate"
    );
}

#[test]
fn a_dubious_dsack_adds_nothing() {
    // Three duplicates reported for one retransmission: tcp_dsack_seen ignores it.
    let (delivered, _) = delivered_by_final_ack((7001, 10001));
    assert_eq!(delivered, 10);
}
