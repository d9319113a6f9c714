//! Karn's rule ([RFC 6298 section 3](https://www.rfc-editor.org/rfc/rfc6298#section-3),
//! Linux's tcp_clean_rtx_queue with FLAG_RETRANS_DATA_ACKED): an ACK that covers a
//! retransmitted segment yields no RTT sample from the send times of the segments it
//! covers, only from a timestamp echo.

use crate::common::drill::*;

/// Three segments, the first lost; the RTO retransmits it (cwnd 1) and one cumulative
/// ACK then covers the retransmission and the two never-retransmitted segments. The
/// send time of the second segment is an RTO old: taking it as an RTT sample (what
/// lowtide did) would inflate srtt from 100 ms to over 150 ms.
#[test]
fn ack_covering_a_retransmission_gives_no_rtt_sample() {
    let mut d = Drill::cubic(ms(100));
    d.set_win(65535);
    let srtt_before = d.info().rtt;
    d.write(3000);
    assert_eq!(d.sent_ranges(), [(1, 3001)]);
    // No ACK: the RTO (srtt + 4 * rttvar, at least 200 ms) retransmits the head only
    // (after a tail loss probe of the last segment).
    d.wait(ms(1500));
    let rexmit = d.sent_ranges();
    assert!(rexmit.contains(&(1, 1001)), "{rexmit:?}");
    assert!(!rexmit.contains(&(1001, 2001)), "{rexmit:?}");
    assert!(d.info().total_retrans >= 1);
    d.ack(ms(100), 3001);
    let i = d.info();
    assert_eq!(
        i.bytes_acked, 3001,
        "3000 bytes and the SYN (tcp_snd_una_update)"
    );
    assert_eq!(
        i.rtt, srtt_before,
        "no RTT sample from an ACK of retransmitted data"
    );
}

/// `tcpi_total_rto`, `_recoveries` and `_time` (Linux 6.7, `tcp_update_rto_stats` /
/// `tcp_update_rto_time`): every RTO counts, the first of a series opens a recovery
/// whose clock runs until the Loss state is left.
#[test]
fn rto_recoveries_are_counted_and_timed() {
    let mut d = Drill::cubic(ms(100));
    d.set_win(65535);
    assert_eq!((d.info().total_rto, d.info().total_rto_recoveries), (0, 0));
    d.write(3000);
    d.wait(ms(1500)); // a TLP, then RTOs
    let i = d.info();
    assert!(i.total_rto >= 2, "backed-off RTOs: {}", i.total_rto);
    assert_eq!(i.total_rto_recoveries, 1, "one series, one recovery");
    assert!(
        i.total_rto_time > 0,
        "an unfinished recovery counts its time so far"
    );
    d.ack(ms(100), 3001);
    let done = d.info();
    assert_eq!(done.ca_state, "Open");
    assert_eq!(done.total_rto_recoveries, 1);
    let t = done.total_rto_time;
    d.wait(ms(500));
    assert_eq!(
        d.info().total_rto_time,
        t,
        "the clock stopped when Loss was left"
    );
}
