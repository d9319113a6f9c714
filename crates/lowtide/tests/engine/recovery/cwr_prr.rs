//! CWR (`tcp_enter_cwr` on an ACK with ECE, RFC 3168 section 6.1.2) reduces cwnd
//! with PRR (RFC 6937) exactly as Recovery does: `tcp_write_xmit` counts the new
//! data it sends in `prr_out` while `tcp_in_cwnd_reduction` (CWR or Recovery), so
//! over the window in flight when the reduction began the sender sends at most
//! `ceil(ssthresh * prr_delivered / RecoverFS)` segments (RFC 6937 section 3) and
//! ends at ssthresh. Counting only in Recovery let each CWR ACK release as many
//! segments as PRR allowed since the start, and cwnd grew during the reduction.

use crate::common::drill::*;

/// 10 segments in flight, the first ACK echoing a CE mark: ssthresh = 10 * 0.7 = 7
/// (CUBIC), RecoverFS = prior_cwnd = 10; as the other nine are ACKed one by one the
/// sender may have sent ceil(7 k / 10) new segments after k ACKs, 7 in all.
#[test]
fn an_ece_reduces_cwnd_by_prr_counting_new_data() {
    let mut cfg = Drill::cubic_cfg(1000);
    cfg.tcp_ecn = 1;
    let mut d = Drill::new(cfg, ms(100));
    d.set_win(320 << 7);
    d.write(40_000);
    assert_eq!(d.sent_ranges(), [(1, 10_001)]);
    d.ack_ece(ms(110), 1001);
    assert_eq!((d.ca_state(), d.ssthresh()), ("CWR", 7));
    let mut sent = d.sent().len() as u32;
    assert_eq!(sent, 1, "PRR: ceil(7 * 1 / 10) - 0");
    for k in 2..=10u32 {
        d.ack(ms(10), k * 1000 + 1);
        sent += d.sent().len() as u32;
        assert!(sent <= (7 * k).div_ceil(10), "after {k} ACKs: {sent} sent");
        assert!(d.cwnd() <= 10, "after {k} ACKs: cwnd {}", d.cwnd());
    }
    assert_eq!((sent, d.cwnd(), d.ca_state()), (7, 7, "CWR"));
}
