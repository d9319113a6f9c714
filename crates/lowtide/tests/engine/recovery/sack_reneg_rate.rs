//! Linux's `tcp_rate_gen` (tcp_rate.c) with `is_sack_reneg` (issue 12): from an RTO
//! that found the receiver reneging on SACKed data until the connection recovers,
//! ACKs give no delivery-rate sample (`delivered` and `interval_us` -1): packets
//! SACKed before the reneging would inflate it. BBR consumes these samples.

use crate::common::drill::*;

#[test]
fn no_rate_sample_while_recovering_from_sack_reneging() {
    let mut d = Drill::cubic(ms(100));
    d.write(10_000);
    assert_eq!(d.sent_ranges(), vec![(1, 10_001)]);
    // 1:3001 missing, the rest SACKed; RACK marks the hole lost and resends it.
    d.ack_sack(ms(100), 1, &[(3001, 10_001)]);
    d.wait(ms(50));
    // The hole arrives; the receiver then reneges: snd_una stops at SACKed data.
    d.ack_sack(ms(100), 2001, &[(3001, 10_001)]);
    d.ack(ms(1), 3001);
    let before = d.info();
    assert!(before.delivery_rate > 0);
    // tcp_check_sack_reneging's timer (max(srtt/2, 10 ms)) runs tcp_enter_loss.
    d.wait(ms(200));
    let i = d.info();
    assert_eq!(i.ca_state, "Loss", "no RTO for the reneging");
    assert_eq!(d.p.a.counters().get(lowtide::Mib::TcpExtTCPSACKReneging), 1);
    // Packets, not merged ranges: the hole's retransmission 1:3001 precedes it.
    let resent: Vec<_> = d.sent().iter().map(|s| (s.start, s.end)).collect();
    assert!(resent.iter().any(|&(s, _)| s == 3001), "{resent:?}");
    // An ACK of the resent 3001:4001, a full RTT after: Linux takes no sample from
    // it (is_sack_reneg), so tcpi_delivery_rate keeps its last value.
    d.ack(ms(100), 4001);
    assert_eq!(
        d.info().delivery_rate,
        before.delivery_rate,
        "a rate sample was taken during SACK reneging"
    );
}
