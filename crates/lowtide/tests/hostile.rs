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

/// A forged segment of `flags` from A to B with raw option bytes (padded to 4).
fn raw_segment(peer: &Peer, seq: u32, ack: u32, opts: &[u8], payload: &[u8]) -> Vec<u8> {
    let th = TcpRepr {
        seq,
        ack,
        flags: TcpFlags::ACK | TcpFlags::PSH,
        window: 65535,
        ..Default::default()
    };
    let mut pkt = build(peer.src, peer.dst, &th, &[], 1);
    // Rebuild with the options spliced in: IPv4 header 20 bytes, TCP header 20.
    let mut o = opts.to_vec();
    while !o.len().is_multiple_of(4) {
        o.push(1); // NOP
    }
    let tcp_start = 20;
    pkt.truncate(tcp_start + 20);
    pkt[tcp_start + 12] = (((20 + o.len()) / 4) as u8) << 4;
    pkt.extend_from_slice(&o);
    pkt.extend_from_slice(payload);
    let total = pkt.len() as u16;
    pkt[2..4].copy_from_slice(&total.to_be_bytes());
    lowtide_wire::ip::fill_ipv4_checksum(&mut pkt[..20]);
    pkt[tcp_start + 16] = 0;
    pkt[tcp_start + 17] = 0;
    let (src, dst) = (peer.src.ip(), peer.dst.ip());
    lowtide_wire::checksum::fill_tcp(src, dst, &mut pkt[tcp_start..]);
    pkt
}

/// RFC 5961 section 5: in-window data whose ACK is far outside the acceptable range
/// (a blind injection) is dropped with a challenge ACK, never delivered.
#[test]
fn blind_data_injection_is_not_delivered() {
    let (mut p, c, s) = establish(Config::default());
    let forger = learn(&p, Dir::BtoA);
    for k in [1u32 << 30, 1 << 31, (1 << 31) + 12345, 3 << 30] {
        let seg = forger.seg(
            TcpFlags::ACK | TcpFlags::PSH,
            forger.seq,
            forger.ack.wrapping_add(k),
            b"INJECTED",
        );
        p.inject(true, &seg);
    }
    assert!(drain(&mut p.b, p.now, s).is_empty());
    assert!(p.b.counters().get(Mib::TcpExtTCPChallengeACK) >= 1);
    still_carries(&mut p, c, s);
}

/// An ACK of data never sent draws a (rate-limited) challenge ACK and moves nothing;
/// a flood of them costs the victim no more than one ACK per 500 ms.
#[test]
fn acks_of_unsent_data_move_nothing() {
    let (mut p, c, s) = establish(Config::default());
    p.a.send(p.now, c, &pattern(20_000, 2)).unwrap();
    p.flush();
    let held = p.take_in_flight(true);
    let forger = learn(&p, Dir::AtoB);
    let before = p.a.info(p.now, c).unwrap().bytes_acked;
    let from = p.wire.len();
    for k in 1..=500u32 {
        p.inject(
            false,
            &forger.seg(
                TcpFlags::ACK,
                forger.seq,
                forger.ack.wrapping_add(k * 1000),
                &[],
            ),
        );
    }
    assert_eq!(p.a.info(p.now, c).unwrap().bytes_acked, before);
    assert!(acks_from_a(&p, from) <= 1);
    for pk in held {
        p.inject(true, &pk);
    }
    let mut got = Vec::new();
    p.drive_until(Duration::from_secs(30), |p| {
        got.extend(drain(&mut p.b, p.now, s));
        got.len() >= 20_000
    });
    assert_eq!(got, pattern(20_000, 2));
    still_carries(&mut p, c, s);
}

/// A window scale above 14 is used as 14 (RFC 7323 section 2.3), and the largest
/// scaled window (about 1 GB) does not overflow anything.
#[test]
fn window_scale_above_14_is_clamped() {
    let mut p = Pair::new(Config::default());
    p.record = true;
    let l = p.b.listen(addr(B, 80), 8).unwrap();
    let client = addr("10.0.0.9", 4000);
    for (i, ws) in [15u8, 30, 255].into_iter().enumerate() {
        let client = SocketAddr::new(client.ip(), 4000 + i as u16);
        let syn = TcpRepr {
            seq: 1000,
            flags: TcpFlags::SYN,
            window: 65535,
            options: TcpOptions {
                mss: Some(1460),
                wscale: Some(ws),
                ..Default::default()
            },
            ..Default::default()
        };
        let from = p.wire.len();
        p.inject(true, &build(client, addr(B, 80), &syn, &[], 1));
        let synack = p
            .sent_since(from, Dir::BtoA)
            .into_iter()
            .next()
            .expect("SYN-ACK");
        let ack = TcpRepr {
            seq: 1001,
            ack: synack.th.seq.wrapping_add(1),
            flags: TcpFlags::ACK,
            window: 65535,
            ..Default::default()
        };
        p.inject(true, &build(client, addr(B, 80), &ack, &[], 2));
        let s = p.b.accept(l).unwrap();
        assert_eq!(
            p.b.info(p.now, s).unwrap().snd_wnd,
            65535 << 14,
            "wscale {ws}"
        );
        p.b.send(p.now, s, &pattern(100_000, 3)).unwrap();
        p.flush();
    }
}

/// Option garbage: zero and one-byte lengths, lengths past the header, unknown kinds,
/// SACK blocks of odd length, in-window segments with and without data. Dropped (and
/// counted) or parsed; nothing hangs or panics, and the connection carries on.
#[test]
fn option_garbage_is_dropped_or_ignored() {
    let (mut p, c, s) = establish(Config::default());
    let forger = learn(&p, Dir::BtoA);
    let garbage: [&[u8]; 9] = [
        &[2, 0],
        &[2, 1],
        &[8, 40, 0, 0],
        &[255, 2, 254, 3, 0],
        &[5, 7, 1, 2, 3, 4, 5],
        &[5, 2],
        &[3, 3, 200],
        &[8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 5, 34],
        &[1, 1, 1, 0, 2, 4, 0, 0],
    ];
    let before_bad = p.b.counters().get(Mib::TcpExtTCPBadOptions);
    for o in garbage {
        p.inject(
            true,
            &raw_segment(
                &forger,
                forger.seq.wrapping_add(100_000),
                forger.ack,
                o,
                &[],
            ),
        );
        p.inject(
            true,
            &raw_segment(&forger, forger.seq.wrapping_sub(5), forger.ack, o, b"zz"),
        );
    }
    assert!(p.b.counters().get(Mib::TcpExtTCPBadOptions) > before_bad);
    assert!(drain(&mut p.b, p.now, s).is_empty());
    still_carries(&mut p, c, s);
}

/// Overlapping segments, as a peer's repacketized retransmissions produce them:
/// every arrangement of overlaps over a hole delivers the stream exactly once.
#[test]
fn overlapping_segments_deliver_the_stream_once() {
    let (mut p, c, s) = establish(Config::default());
    let forger = learn(&p, Dir::BtoA);
    let data = pattern(10_000, 6);
    // (start, end) pieces in arrival order: duplicates, supersets, subsets, a piece
    // bridging two runs, and the hole at 0 filled last.
    let pieces = [
        (3000, 4000),
        (3500, 5000),
        (3000, 5000),
        (7000, 8000),
        (6000, 9000),
        (4800, 6100),
        (9000, 10_000),
        (3100, 3200),
        (1000, 2500),
        (2000, 3100),
        (0, 1200),
        (0, 10_000),
    ];
    let mut tsval = forger.ts_val;
    for (a, b) in pieces {
        let th = TcpRepr {
            seq: forger.seq.wrapping_add(a),
            ack: forger.ack,
            flags: TcpFlags::ACK,
            window: 65535,
            options: TcpOptions {
                timestamp: Some((tsval, forger.ts_ecr)),
                ..Default::default()
            },
            ..Default::default()
        };
        tsval = tsval.wrapping_add(1);
        p.inject(
            true,
            &build(
                forger.src,
                forger.dst,
                &th,
                &data[a as usize..b as usize],
                1,
            ),
        );
    }
    assert_eq!(drain(&mut p.b, p.now, s), data);
    let _ = c;
}

/// Optimistic ACKs (a receiver acknowledging data before it arrived, to make the
/// sender speed up): Linux has no defense and neither has lowtide, but the victim's
/// memory stays within its send buffer, and another connection on the same stack
/// delivers every byte.
#[test]
fn optimistic_acks_stay_within_the_send_buffer() {
    let (mut p, c, s) = establish(Config::default());
    let l2 = p.b.listen(addr(B, 81), 8).unwrap();
    let c2 = p.a.connect(p.now, addr(A, 0), addr(B, 81)).unwrap();
    p.drive_for(Duration::from_millis(50));
    let s2 = p.b.accept(l2).unwrap();
    // The victim connection's real receiver is cut off: a forger acknowledges
    // everything A has sent, as soon as it is sent.
    let victim_port = p.a.addresses(c).unwrap().0.port();
    let mut b_tsval = learn(&p, Dir::AtoB).ts_val;
    p.filter = Some(Box::new(move |_, pk| {
        let sg = Seg::parse(pk);
        match sg.th.src_port == victim_port || sg.th.dst_port == victim_port {
            true => Verdict::Drop,
            false => Verdict::Pass,
        }
    }));
    let mut peak = 0u64;
    let other = pattern(3_000_000, 9);
    let mut sent_other = 0;
    let mut got_other = Vec::new();
    let mut last_a: Option<Seg> = None;
    while got_other.len() < other.len() {
        let _ = p.a.send(p.now, c, &pattern(65536, 1));
        if let Ok(n) = p.a.send(p.now, c2, &other[sent_other..]) {
            sent_other += n;
        }
        p.wire.clear();
        for (_, d, pk) in p.dropped.drain(..) {
            let sg = Seg::parse(&pk);
            if d == Dir::AtoB && sg.th.src_port == victim_port {
                last_a = Some(sg);
            }
        }
        if let Some(a) = &last_a {
            let forger = Peer {
                src: SocketAddr::new(a.ip.dst, a.th.dst_port),
                dst: SocketAddr::new(a.ip.src, a.th.src_port),
                seq: a.th.ack,
                ack: a.th.seq.wrapping_add(a.payload.len() as u32),
                ts_ecr: a.th.options.timestamp.map_or(0, |t| t.0),
                ts_val: b_tsval,
            };
            b_tsval = b_tsval.wrapping_add(1);
            p.inject(false, &forger.now(TcpFlags::ACK, &[]));
        }
        got_other.extend(drain(&mut p.b, p.now, s2));
        peak = peak.max(p.a.tcp_memory().wmem_queued);
        assert!(p.step(), "idle");
    }
    assert_eq!(got_other, other);
    // The victim believed megabytes delivered that its receiver never saw.
    let acked = p.a.info(p.now, c).unwrap().bytes_acked;
    assert!(acked > 1_000_000, "{acked}");
    assert!(drain(&mut p.b, p.now, s).is_empty());
    let sndbuf_max = Config::default().tcp_wmem[2] as u64;
    assert!(peak <= 2 * sndbuf_max + 2 * 65536, "{peak}");
}
