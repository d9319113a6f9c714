//! Slow start as packetdrill's tcp/slow_start scripts stage it, replayed on the
//! Pair harness (common::drill): the test plays the receiver, forging its ACKs at the
//! scripted times, and checks what Linux's `tcp_info` and the packets it sends show
//! there. Each test names the script it follows; the scripts are not copied.

use crate::common::drill::*;
use lowtide::{Config, Mib};

/// A CUBIC sender with packetdrill's defaults, 100 ms RTT, the receiver's window
/// `257 << 7`.
fn drill(cfg: Config) -> Drill {
    let mut d = Drill::new(cfg, ms(100));
    d.set_win(257 << 7);
    d
}

/// slow-start-ack-per-1pkt (tcp_tso_win_divisor=100): every ACK of one segment
/// opens two; cwnd 10 -> 20 over the first flight.
#[test]
fn ack_per_1pkt() {
    let mut d = drill(Config {
        tcp_tso_win_divisor: 100,
        ..Drill::cubic_cfg(1000)
    });
    d.write(30_000);
    assert_eq!(d.sent_ranges(), [(1, 10_001)]);
    assert_eq!(d.cwnd(), 10);
    let mut next = 10_001;
    for i in 1..=10u32 {
        d.ack(
            ms(if i == 1 {
                105
            } else if i % 2 == 1 {
                5
            } else {
                0
            }),
            1 + 1000 * i,
        );
        assert_eq!(d.sent_ranges(), [(next, next + 2000)], "ACK {i}");
        next += 2000;
    }
    assert_eq!(d.cwnd(), 20);
}

/// slow-start-ack-per-2pkt (tcp_tso_win_divisor=100): an ACK every two segments
/// opens four.
#[test]
fn ack_per_2pkt() {
    let mut d = drill(Config {
        tcp_tso_win_divisor: 100,
        ..Drill::cubic_cfg(1000)
    });
    d.write(30_000);
    assert_eq!(d.sent_ranges(), [(1, 10_001)]);
    assert_eq!(d.cwnd(), 10);
    let mut next = 10_001;
    for i in 1..=5u32 {
        d.ack(ms(if i == 1 { 105 } else { 5 }), 1 + 2000 * i);
        assert_eq!(d.sent_ranges(), [(next, next + 4000)], "ACK {i}");
        next += 4000;
    }
    assert_eq!(d.cwnd(), 20);
}

/// slow-start-ack-per-4pkt (tcp_tso_win_divisor=100): an ACK every four segments
/// opens eight; the last ACK covers two and opens four.
#[test]
fn ack_per_4pkt() {
    let mut d = drill(Config {
        tcp_tso_win_divisor: 100,
        ..Drill::cubic_cfg(1000)
    });
    d.write(30_000);
    assert_eq!(d.sent_ranges(), [(1, 10_001)]);
    assert_eq!(d.cwnd(), 10);
    d.ack(ms(110), 4001);
    assert_eq!(d.sent_ranges(), [(10_001, 18_001)]);
    d.ack(ms(10), 8001);
    assert_eq!(d.sent_ranges(), [(18_001, 26_001)]);
    d.ack(ms(5), 10_001);
    assert_eq!(d.sent_ranges(), [(26_001, 30_001)]);
    assert_eq!(d.cwnd(), 20);
}

/// slow-start-ack-per-2pkt-send-5pkt: a flight of 5 never fills cwnd 10, so slow
/// start does not grow it (`tcp_is_cwnd_limited`: cwnd < 2 * max_packets_out).
#[test]
fn ack_per_2pkt_send_5pkt() {
    let mut d = drill(Drill::cubic_cfg(1000));
    d.write(5000);
    assert_eq!(d.sent_ranges(), [(1, 5001)]);
    assert_eq!(d.cwnd(), 10);
    for ack in [2001, 4001, 5001] {
        d.ack(ms(0), ack);
        assert_eq!(d.cwnd(), 10, "ack {ack}");
    }
}

/// slow-start-app-limited: exactly IW10 sent and nothing more to send; the flight
/// filled cwnd, so each 2-segment ACK still adds 2 (12, 14, ..., 20).
#[test]
fn app_limited() {
    let mut d = drill(Drill::cubic_cfg(1000));
    d.write(10_000);
    assert_eq!(d.sent_ranges(), [(1, 10_001)]);
    assert_eq!(d.cwnd(), 10);
    for i in 1..=5u32 {
        d.ack(ms(if i == 1 { 105 } else { 5 }), 1 + 2000 * i);
        assert_eq!(d.cwnd(), 10 + 2 * i, "ACK {i}");
    }
}

/// slow-start-after-idle (tcp_slow_start_after_idle=1, tcp_min_tso_segs=10): cwnd
/// 10 -> 20 -> 36 (the second flight, 16 segments, was all the application wrote);
/// after 2 s idle the restart window is 10 (halved once per RTO, not below IW), and
/// the first burst is half of it (`tcp_cwnd_test`: at least two TSO packets per
/// window).
#[test]
fn after_idle() {
    let mut d = Drill::new(
        Config {
            tcp_slow_start_after_idle: true,
            tcp_min_tso_segs: 10,
            ..Drill::cubic_cfg(1000)
        },
        ms(100),
    );
    d.set_win(511 << 7);
    let out = |d: &Drill| d.p.a.counters().get(Mib::IpOutRequests);
    let before = out(&d);
    d.write(26_000);
    // Two TSO packets of 5 (`tcp_cwnd_test`: at most half of cwnd per packet).
    assert_eq!(out(&d) - before, 2);
    let first: Vec<_> = d.sent().iter().map(|s| (s.start, s.end)).collect();
    assert_eq!(first.first(), Some(&(1, 1001)));
    assert_eq!(first.last().map(|r| r.1), Some(10_001));
    assert_eq!(d.cwnd(), 10);
    d.ack(ms(100), 10_001);
    assert_eq!(d.cwnd(), 20);
    assert_eq!(d.sent_ranges(), [(10_001, 26_001)]);
    d.ack(ms(100), 26_001);
    assert_eq!(d.cwnd(), 36);
    d.wait(ms(2000));
    let before = out(&d);
    d.write(20_000);
    assert_eq!(d.cwnd(), 10);
    assert_eq!(out(&d) - before, 2);
    // 5 MSS now, the other 5 as a second TSO packet (the script checks the first).
    let burst = d.sent();
    assert_eq!(burst.first().map(|s| s.start), Some(26_001));
    assert_eq!(burst.last().map(|s| s.end), Some(36_001));
}

/// slow-start-fq-ack-per-2pkt (MSS 1460, tcp_min_tso_segs=2, pacing): cwnd grows
/// by 2 per 2-segment ACK while paced 2-segment packets keep leaving.
#[test]
fn paced_ack_per_2pkt() {
    let mut d = Drill::new(
        Config {
            tcp_min_tso_segs: 2,
            ..Drill::cubic_cfg(1460)
        },
        ms(100),
    );
    d.set_win(500 << 7);
    d.write(40_000);
    assert_eq!(d.sent_ranges(), [(1, 14_601)]);
    assert_eq!(d.cwnd(), 10);
    for (i, gap) in [105, 3, 2, 2].into_iter().enumerate() {
        d.ack(ms(gap), 1 + 2920 * (i as u32 + 1));
        assert_eq!(d.cwnd(), 12 + 2 * i as u32, "ACK {}", i + 1);
    }
    d.ack(ms(1), 14_601);
    d.wait(ms(20));
    assert_eq!(d.cwnd(), 20);
    // All that was written has left (cwnd 20 covers it).
    let sent = d.sent();
    assert_eq!(sent.last().map(|s| s.end), Some(40_001));
}

/// The qdisc of slow-start-fq-ack-per-2pkt (`tc qdisc replace dev tun0 root fq`, which
/// the packetdrill runner sets as `net.core.default_qdisc`): sch_fq paces every flow
/// at its sk_pacing_rate (SK_PACING_FQ) except its first 10 segments
/// (tcp_update_skb_after_send: "Original sch_fq does not pace first 10 MSS");
/// pfifo_fast does not pace CUBIC at all.
#[test]
fn fq_paces_cubic_after_ten_segments() {
    let run = |qdisc: &str| {
        let mut cfg = Drill::cubic_cfg(1000);
        cfg.default_qdisc = qdisc.into();
        let mut d = drill(cfg);
        d.write(30_000);
        let first = d.sent();
        d.ack(ms(100), 1 + 2000);
        d.wait(ms(50));
        (first, d.sent())
    };
    let times = |s: &[Sent]| {
        s.iter()
            .map(|s| s.at)
            .collect::<std::collections::BTreeSet<_>>()
    };
    let (first, next) = run("pfifo_fast");
    assert_eq!((first.len(), times(&first).len()), (10, 1));
    assert_eq!((next.len(), times(&next).len()), (4, 1), "{next:?}");
    let (first, next) = run("fq");
    assert_eq!((first.len(), times(&first).len()), (10, 1));
    // Two TSO packets of 2 segments (tcp_min_tso_segs), the second one a packet's
    // length at the pacing rate later.
    assert_eq!((next.len(), times(&next).len()), (4, 2), "{next:?}");
    let gap = next[2].at.saturating_since(next[0].at);
    assert!(gap > ms(1) && gap < ms(10), "{gap:?}");
}
