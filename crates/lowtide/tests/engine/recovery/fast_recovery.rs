//! Fast recovery with PRR (RFC 6937) as packetdrill's tcp/fast_recovery and
//! tcp/fast_retransmit scripts stage it, replayed on the Pair harness
//! (common::drill): the test plays the receiver and checks the congestion state, the
//! window and the segments Linux sends at each step. Each test names the script it
//! follows; the scripts are not copied.

use crate::common::drill::*;
use lowtide::Config;

/// CUBIC sender with packetdrill's defaults, MSS 1000.
fn drill(rtt_ms: u64, win: u32) -> Drill {
    let mut d = Drill::cubic(ms(rtt_ms));
    d.set_win(win);
    d
}

/// prr-ss-10pkt-lost-1: 10 segments, the first lost. The third SACK starts fast
/// recovery (RACK: with 3 segments SACKed the reordering window is 0) with
/// ssthresh = cwnd = 10 * 0.7 = 7; while in-flight equals ssthresh PRR sends one new
/// segment per segment SACKed; recovery ends at the cumulative ACK with cwnd 7.
#[test]
fn prr_ss_10pkt_lost_1() {
    let mut d = drill(100, 320 << 7);
    d.write(10_000);
    assert_eq!(d.sent_ranges(), [(1, 10_001)]);
    d.ack_sack(ms(110), 1, &[(1001, 2001)]);
    d.ack_sack(ms(10), 1, &[(1001, 3001)]);
    assert_eq!(d.sent_ranges(), []);
    d.ack_sack(ms(10), 1, &[(1001, 4001)]);
    assert_eq!(d.sent_ranges(), [(1, 1001)], "fast retransmit");
    d.wait(ms(10));
    assert_eq!((d.ca_state(), d.cwnd(), d.ssthresh()), ("Recovery", 7, 7));
    d.wait(ms(10));
    d.write(7000);
    assert_eq!(d.sent_ranges(), []);
    let mut next = 10_001;
    for r in [5001, 6001, 7001, 8001, 9001, 10_001] {
        d.ack_sack(ms(10), 1, &[(1001, r)]);
        assert_eq!(d.sent_ranges(), [(next, next + 1000)], "SACK to {r}");
        next += 1000;
    }
    d.ack(ms(20), 10_001);
    assert_eq!(d.sent_ranges(), [(16_001, 17_001)]);
    d.wait(ms(10));
    assert_eq!((d.ca_state(), d.cwnd(), d.ssthresh()), ("Open", 7, 7));
}

/// prr-ss-30pkt-lost1_4: 10 segments, the first four lost. Recovery starts at the
/// third SACK; each further SACK releases one retransmission (1:1001 .. 3001:4001).
/// After the cumulative ACK the window is ssthresh = 7: a new write of 10 segments
/// sends 7 at once.
#[test]
fn prr_ss_30pkt_lost1_4() {
    // This script's handshake RTT is 10 ms.
    let mut d = drill(10, 320 << 7);
    d.write(10_000);
    assert_eq!(d.sent_ranges(), [(1, 10_001)]);
    d.ack_sack(ms(10), 1, &[(4001, 5001)]);
    d.ack_sack(ms(2), 1, &[(4001, 6001)]);
    assert_eq!(d.sent_ranges(), []);
    let mut rexmit = 1;
    for r in [7001, 8001, 9001, 10_001] {
        d.ack_sack(ms(0), 1, &[(4001, r)]);
        assert_eq!(d.sent_ranges(), [(rexmit, rexmit + 1000)], "SACK to {r}");
        rexmit += 1000;
    }
    d.ack_sack(ms(10), 1001, &[(4001, 10_001)]);
    d.ack_sack(ms(0), 2001, &[(4001, 10_001)]);
    d.ack_sack(ms(0), 3001, &[(4001, 10_001)]);
    d.ack(ms(0), 10_001);
    assert_eq!(d.sent_ranges(), []);
    d.wait(ms(10));
    d.write(10_000);
    assert_eq!(d.sent_ranges(), [(10_001, 17_001)]);
    assert_eq!(d.cwnd(), 7);
}

/// fr-4pkt-sack (MSS 1460): 4 segments, the first lost; three SACKs, then the fast
/// retransmission of exactly the first segment.
#[test]
fn fr_4pkt_sack() {
    let mut d = Drill::new(Drill::cubic_cfg(1460), ms(100));
    d.set_win(257 << 7);
    d.write(5840);
    assert_eq!(d.sent_ranges(), [(1, 5841)]);
    d.ack_sack(ms(100), 1, &[(1461, 2921)]);
    d.ack_sack(ms(0), 1, &[(1461, 4381)]);
    assert_eq!(d.sent_ranges(), []);
    d.ack_sack(ms(0), 1, &[(1461, 5841)]);
    assert_eq!(d.sent_ranges(), [(1, 1461)]);
    d.ack(ms(100), 5841);
    d.wait(ms(100));
    assert_eq!(d.sent_ranges(), []);
    assert_eq!(d.ca_state(), "Open");
}

/// fr-4pkt (MSS 1460, no SACK): three duplicate ACKs, then the fast retransmission
/// of the first segment (NewReno).
#[test]
fn fr_4pkt_no_sack() {
    let mut d = Drill::new(
        Config {
            tcp_sack: false,
            ..Drill::cubic_cfg(1460)
        },
        ms(100),
    );
    d.set_win(257 << 7);
    d.write(5840);
    assert_eq!(d.sent_ranges(), [(1, 5841)]);
    d.ack(ms(100), 1);
    d.ack(ms(0), 1);
    assert_eq!(d.sent_ranges(), []);
    d.ack(ms(0), 1);
    assert_eq!(d.sent_ranges(), [(1, 1461)]);
    d.ack(ms(100), 5841);
    d.wait(ms(100));
    assert_eq!(d.sent_ranges(), []);
    // snd_una == high_seq: NewReno holds Recovery until data above it is ACKed
    // (tcp_is_non_sack_preventing_reopen; Linux 6.18 says ca_state 3 here too).
    assert_eq!(d.ca_state(), "Recovery");
}

/// fr-4pkt-fack-last-byte: a SACK of only the last byte of the 4th segment is no
/// reason for fast recovery (Linux's tcp_match_skb_to_sack does not SACK a partial
/// segment). The tail loss probe resends 3001:4001 one 2*RTT later, the RTO
/// (RTT + 200 ms) resends 1:1001; after the RTO cwnd is 1, then 2 (slow start).
#[test]
fn fr_4pkt_fack_last_byte() {
    let mut d = drill(100, 320 << 7);
    d.write(4000);
    assert_eq!(d.sent_ranges(), [(1, 4001)]);
    d.ack_sack(ms(100), 1, &[(4000, 4001)]);
    assert_eq!(d.sent_ranges(), []);
    assert_eq!(d.ca_state(), "Open");
    let sack_at = d.p.now;
    // TLP at +100..105 ms, which the timer wheel runs up to 8 ms later (level 1).
    d.wait(ms(120));
    let probe = d.sent();
    assert_eq!(probe.len(), 1);
    assert_eq!((probe[0].start, probe[0].end), (3001, 4001), "loss probe");
    let tlp = probe[0].at.saturating_since(sack_at);
    assert!(tlp >= ms(100) && tlp <= ms(113), "probe after {tlp:?}");
    // RTO at +300..310 ms after the probe (and up to 8 ms of the wheel's).
    d.wait(ms(400));
    let rto = d.sent();
    assert_eq!(rto.len(), 1);
    assert_eq!((rto[0].start, rto[0].end), (1, 1001), "RTO");
    let after = rto[0].at.saturating_since(probe[0].at);
    assert!(after >= ms(300) && after <= ms(318), "RTO after {after:?}");
    let rto_at = rto[0].at;
    let since = d.p.now.saturating_since(rto_at);
    assert_eq!(d.cwnd(), 1);
    d.ack_sack(ms(500) - since, 1001, &[(4000, 4001)]);
    assert_eq!(d.sent_ranges(), [(1001, 3001)]);
    assert_eq!(d.cwnd(), 2);
    d.ack_sack(ms(100), 3001, &[(4000, 4001)]);
    assert_eq!(d.sent_ranges(), [(3001, 4001)]);
    d.ack(ms(100), 4001);
    assert_eq!(d.ca_state(), "Open");
}
