//! The end of an RTO recovery: NewReno (no SACK) holds the Loss state while
//! `snd_una == high_seq` (`tcp_is_non_sack_preventing_reopen`, RFC 6582), and the
//! `retrans_stamp` that hold clears proves no spurious RTO afterwards
//! (`tcp_packet_delayed`, Linux 6.16+). With SACK the state opens at once. Checked
//! against Linux 6.18 (tests/packetdrill/loss-newreno-hold-then-idle-ssthresh.pkt).

use crate::common::drill::*;
use lowtide::Config;

/// Reno sender, MSS 1000, F-RTO off, SACK `sack`; 10 segments out, all lost: the RTO
/// retransmits the first with cwnd 1 and ssthresh 5 (with SACK after a tail loss
/// probe of the last).
fn after_rto(sack: bool) -> Drill {
    let mut d = Drill::new(
        Config {
            tcp_congestion_control: "reno".into(),
            tcp_sack: sack,
            tcp_frto: 0,
            ..Drill::cubic_cfg(1000)
        },
        ms(100),
    );
    d.set_win(65535);
    d.write(10_000);
    assert_eq!(d.sent_ranges(), [(1, 10_001)]);
    while d.ca_state() != "Loss" {
        d.wait(ms(10));
    }
    assert_eq!(d.sent_ranges().last(), Some(&(1, 1001)));
    assert_eq!((d.ca_state(), d.cwnd(), d.ssthresh()), ("Loss", 1, 5));
    d
}

#[test]
fn newreno_holds_loss_at_high_seq_and_then_does_not_undo() {
    let mut d = after_rto(false);
    // The ACK of high_seq ends the loss, but NewReno stays in Loss; cwnd grows (slow
    // start to 5, then 5 acks in congestion avoidance).
    d.ack(ms(100), 10_001);
    assert_eq!((d.ca_state(), d.cwnd(), d.ssthresh()), ("Loss", 6, 5));
    d.write(6000);
    assert_eq!(d.sent_ranges(), [(10_001, 16_001)]);
    // Data above high_seq acknowledged: Open, and the reduction stays (the hold's
    // cleared retrans_stamp is no proof that nothing was retransmitted).
    d.ack(ms(100), 16_001);
    assert_eq!((d.ca_state(), d.cwnd(), d.ssthresh()), ("Open", 7, 5));
}

#[test]
fn sack_opens_at_high_seq() {
    let mut d = after_rto(true);
    d.ack(ms(100), 10_001);
    assert_eq!((d.ca_state(), d.cwnd(), d.ssthresh()), ("Open", 6, 5));
}
