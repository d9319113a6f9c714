//! Hostile peers (issue 12): forged or abusive segments against a live connection.
//! Each test checks that the victim answers as Linux does, that what it sends back
//! stays bounded, and that the connection's bytes arrive intact.

mod common;
use common::*;
use lowtide::{Config, Mib, SocketHandle};
use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr};
use std::net::SocketAddr;
use std::time::Duration;

/// Pure ACKs A sent since wire index `from`.
fn acks_from_a(p: &Pair, from: usize) -> usize {
    p.sent_since(from, Dir::AtoB)
        .iter()
        .filter(|s| s.is_pure_ack())
        .count()
}

fn still_carries(p: &mut Pair, c: SocketHandle, s: SocketHandle) {
    let data = pattern(200_000, 4);
    assert_eq!(send_all(p, true, c, s, &data), data);
    let back = pattern(50_000, 5);
    assert_eq!(send_all(p, false, s, c, &back), back);
}

/// RFC 5961 section 4 and 7: a flood of in-window SYNs (a blind attacker's guesses)
/// draws one challenge ACK per `tcp_invalid_ratelimit` (500 ms), not one per SYN.
#[test]
fn challenge_acks_are_rate_limited_per_socket() {
    let (mut p, c, s) = establish(Config::default());
    let forger = learn(&p, Dir::AtoB);
    let from = p.wire.len();
    for i in 0..1000u32 {
        let syn = forger.seg(TcpFlags::SYN, forger.seq.wrapping_add(i * 7), 0, &[]);
        p.inject(false, &syn);
    }
    assert_eq!(
        acks_from_a(&p, from),
        1,
        "one challenge ACK in the first 500 ms"
    );
    assert_eq!(p.a.counters().get(Mib::TcpExtTCPChallengeACK), 1);
    assert_eq!(p.a.counters().get(Mib::TcpExtTCPACKSkippedChallenge), 999);
    p.drive_for(Duration::from_millis(600));
    let from = p.wire.len();
    p.inject(false, &forger.seg(TcpFlags::SYN, forger.seq, 0, &[]));
    assert_eq!(acks_from_a(&p, from), 1, "the next window");
    still_carries(&mut p, c, s);
}

/// RFC 5961 section 3: RSTs in the window but not at rcv_nxt get (limited)
/// challenge ACKs and never reset the connection.
#[test]
fn blind_resets_in_window_do_not_reset() {
    let (mut p, c, s) = establish(Config::default());
    let forger = learn(&p, Dir::AtoB);
    let from = p.wire.len();
    for i in 1..=2000u32 {
        p.inject(
            false,
            &forger.seg(TcpFlags::RST, forger.seq.wrapping_add(i * 10), 0, &[]),
        );
    }
    assert!(acks_from_a(&p, from) <= 1);
    assert_eq!(p.a.socket_error(c), Ok(None));
    still_carries(&mut p, c, s);
}

/// `net.ipv4.tcp_challenge_ack_limit` set low bounds the challenge ACKs of the whole
/// stack per second, over many sockets.
#[test]
fn stack_wide_challenge_ack_limit() {
    let cfg = Config {
        tcp_challenge_ack_limit: 10,
        ..Config::default()
    };
    let mut p = Pair::new(cfg);
    p.record = true;
    let l = p.b.listen(addr(B, 80), 128).unwrap();
    let conns: Vec<SocketHandle> = (0..60)
        .map(|_| p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap())
        .collect();
    p.drive_for(Duration::from_millis(100));
    let accepted: Vec<SocketHandle> = std::iter::from_fn(|| p.b.accept(l).ok()).collect();
    assert_eq!(accepted.len(), conns.len());
    // One forged in-window SYN to each of B's sockets, within one second.
    let from = p.wire.len();
    let mut seen = std::collections::HashSet::new();
    for (_, d, pk) in p.wire.clone().iter().rev() {
        if *d != Dir::AtoB {
            continue;
        }
        let sg = Seg::parse(pk);
        if !seen.insert(sg.th.src_port) {
            continue;
        }
        let src = SocketAddr::new(sg.ip.src, sg.th.src_port);
        let dst = SocketAddr::new(sg.ip.dst, sg.th.dst_port);
        let th = TcpRepr {
            seq: sg.th.seq.wrapping_add(100),
            flags: TcpFlags::SYN,
            window: 1000,
            ..Default::default()
        };
        p.inject(true, &build(src, dst, &th, &[], 1));
    }
    let challenges = p.b.counters().get(Mib::TcpExtTCPChallengeACK);
    assert!(
        (5..15).contains(&challenges),
        "{challenges} of {}",
        seen.len()
    );
    let sent = p
        .sent_since(from, Dir::BtoA)
        .iter()
        .filter(|s| s.is_pure_ack())
        .count();
    assert_eq!(sent as u64, challenges);
}

/// `net.ipv4.tcp_min_snd_mss`: a peer announcing MSS 1 (CVE-2019-11479 style) gets
/// segments of at least the configured floor.
#[test]
fn tiny_peer_mss_is_clamped_to_tcp_min_snd_mss() {
    for (floor, want) in [(48u32, 48usize), (536, 536)] {
        let cfg = Config {
            tcp_min_snd_mss: floor,
            tcp_timestamps: false,
            ..Config::default()
        };
        let mut p = Pair::new(cfg);
        p.record = true;
        let l = p.b.listen(addr(B, 80), 8).unwrap();
        let client = addr("10.0.0.9", 4000);
        let server = addr(B, 80);
        let syn = TcpRepr {
            seq: 1000,
            flags: TcpFlags::SYN,
            window: 65535,
            options: TcpOptions {
                mss: Some(1),
                ..Default::default()
            },
            ..Default::default()
        };
        p.inject(true, &build(client, server, &syn, &[], 1));
        let synack = p
            .sent_since(0, Dir::BtoA)
            .into_iter()
            .find(|s| s.has(TcpFlags::SYN))
            .expect("SYN-ACK");
        let ack = TcpRepr {
            seq: 1001,
            ack: synack.th.seq.wrapping_add(1),
            flags: TcpFlags::ACK,
            window: 65535,
            ..Default::default()
        };
        p.inject(true, &build(client, server, &ack, &[], 2));
        let s = p.b.accept(l).unwrap();
        let from = p.wire.len();
        p.b.send(p.now, s, &pattern(9 * want, 1)).unwrap();
        p.flush();
        let sizes: Vec<usize> = p
            .sent_since(from, Dir::BtoA)
            .iter()
            .map(|s| s.payload.len())
            .filter(|&n| n > 0)
            .collect();
        assert!(!sizes.is_empty());
        assert!(sizes.iter().all(|&n| n == want), "floor {floor}: {sizes:?}");
    }
}

/// The receiver's window starts as its SYN-ACK offered it: when the first data
/// segment is lost, the next one (out of order, before the receiver sent any ACK
/// after its SYN-ACK) is queued and SACKed, not dropped as out of window (lowtide
/// left rcv_wnd at 0 until its first ACK, so it dropped that segment).
#[test]
fn first_out_of_order_segment_after_the_handshake_is_sacked() {
    let (mut p, c, s) = establish(Config::default());
    let mut n = 0;
    p.filter = Some(Box::new(move |d, pk| {
        if d == Dir::AtoB && pk.len() > 200 {
            n += 1;
            if n == 1 {
                return Verdict::Drop;
            }
        }
        Verdict::Pass
    }));
    let from = p.wire.len();
    let data = pattern(30_000, 1);
    assert_eq!(send_all(&mut p, true, c, s, &data), data);
    let first_ack = p
        .sent_since(from, Dir::BtoA)
        .into_iter()
        .next()
        .expect("an ACK");
    assert_eq!(first_ack.th.options.sack_len, 1, "{:?}", first_ack.th);
    assert_eq!(p.a.counters().get(Mib::TcpExtTCPTimeouts), 0);
}
