//! Reordering measured as `tcp_check_sack_reordering` does: from the lowest
//! never-retransmitted segment delivered in a hole to `tcp_highest_sack_seq` as it
//! stands after the ACK's SACK tagging (`tcp_sacktag_write_queue`) or after its
//! cumulative part (`tcp_clean_rtx_queue`, where no SACKed data left means
//! `snd_una`). Checked against Linux 6.18 (tests/packetdrill/sack-reordering-*.pkt).

use crate::common::drill::*;
use lowtide::Config;

/// Reno with SACK, MSS 1000: 10 segments out.
fn ten_out() -> Drill {
    let mut d = Drill::new(
        Config {
            tcp_congestion_control: "reno".into(),
            ..Drill::cubic_cfg(1000)
        },
        ms(100),
    );
    d.set_win(65535);
    d.write(10_000);
    assert_eq!(d.sent_ranges(), [(1, 10_001)]);
    d
}

fn reordering(d: &Drill) -> (u32, u32) {
    let i = d.info();
    (i.reordering, i.reord_seen)
}

#[test]
fn a_hole_filled_by_the_cumulative_ack_is_measured_to_snd_una() {
    let mut d = ten_out();
    d.ack_sack(ms(100), 1, &[(2001, 3001)]);
    d.ack_sack(ms(0), 1, &[(2001, 5001)]);
    assert_eq!(d.sent_ranges(), [(1, 1001)]);
    assert_eq!((d.ca_state(), reordering(&d)), ("Recovery", (3, 0)));
    // 1001:2001 was never retransmitted: it arrived late. Nothing SACKed is left,
    // so the distance runs from 1001 to snd_una 10001.
    d.ack(ms(100), 10_001);
    assert_eq!((d.ca_state(), reordering(&d)), ("Open", (9, 1)));
    // __tcp_transmit_skb counts the retransmitted bytes too.
    let i = d.info();
    assert_eq!((i.bytes_sent, i.bytes_retrans), (11_000, 1000));
}

#[test]
fn a_sacked_hole_is_measured_to_the_highest_sack_after_the_ack() {
    let mut d = ten_out();
    d.ack_sack(ms(100), 1, &[(2001, 3001)]);
    assert_eq!(reordering(&d), (3, 0));
    d.ack_sack(ms(0), 1, &[(1001, 3001), (6001, 7001)]);
    assert_eq!(reordering(&d), (6, 1));
}

#[test]
fn a_short_reordering_is_seen_without_raising_the_degree() {
    let mut d = ten_out();
    d.ack_sack(ms(100), 1, &[(3001, 4001)]);
    // 2001 to 4001: 2 segments, not more than tcp_reordering's 3.
    d.ack_sack(ms(0), 1, &[(2001, 4001)]);
    assert_eq!(reordering(&d), (3, 1));
}
