//! Hostile peers (issue 12): forged or abusive segments against a live connection.
//! Each test checks that the victim answers as Linux does, that what it sends back
//! stays bounded, and that the connection's bytes arrive intact.

use crate::common::*;
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

/// [RFC 5961 section 4](https://www.rfc-editor.org/rfc/rfc5961#section-4) and 7: a flood of
/// in-window SYNs (a blind attacker's guesses) draws one challenge ACK per
/// `tcp_invalid_ratelimit` (500 ms), not one per SYN.
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

/// [RFC 5961 section 3](https://www.rfc-editor.org/rfc/rfc5961#section-3): RSTs in the
/// window but not at rcv_nxt get (limited) challenge ACKs and never reset the connection.
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

/// [RFC 5961 section 5](https://www.rfc-editor.org/rfc/rfc5961#section-5): in-window data
/// whose ACK is far outside the acceptable range (a blind injection) is dropped with a
/// challenge ACK, never delivered.
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

/// A window scale above 14 is used as 14
/// ([RFC 7323 section 2.3](https://www.rfc-editor.org/rfc/rfc7323#section-2.3)), and the
/// largest scaled window (about 1 GB) does not overflow anything.
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

// ---- SACK abuse (CVE-2019-11477/11478 style and lying receivers) -------------------

/// What a lying receiver knows when it rewrites one of its ACKs, in offsets from the
/// victim's first data byte: its real cumulative ACK, the end of the highest data the
/// victim sent, the victim's segment size, and which ACK this is.
struct AckView {
    ack: u32,
    snd_nxt: u32,
    mss: u32,
    n: u64,
}

/// The SACK blocks a liar puts in an ACK, `[start, end)` in the same offsets (any
/// values: the arithmetic wraps as sequence numbers do); `None` leaves the ACK as the
/// honest receiver sent it.
type Lie = Box<dyn FnMut(&AckView) -> Option<Vec<(u32, u32)>>>;

/// The liar's bookkeeping, shared by the wire filter and the arrival recorder.
#[derive(Default)]
struct LiarState {
    snd_nxt: u32,
    mss: u32,
    data_segs: u64,
    acks: u64,
    /// Arrival times of rewritten ACKs at the victim, with how many arrive then.
    arrivals: std::collections::BTreeMap<lowtide::Instant, u64>,
}

/// What a transfer to a lying receiver cost the victim.
struct LiarRun {
    p: Pair,
    /// The victim's socket on A.
    c: SocketHandle,
    /// ACKs that reached the victim; those and the data segments it sent in the
    /// same steps (each costs work: the ACK's SACK walk, the segment's queueing);
    /// and the retransmit-queue nodes A visited in those steps (the CPU cost model's
    /// measure of work).
    acks: u64,
    packets: u64,
    nodes: u64,
    /// The most nodes per packet in one step (its nodes over its ACKs and segments).
    max_nodes_per_packet: u64,
    /// Peaks of A's queued send memory and of the victim's unacknowledged segments.
    peak_wmem: u64,
    peak_unacked: u32,
    /// The most segments the victim held SACKed at once.
    peak_sacked: u32,
    /// Simulated time the victim's transfer took.
    took: Duration,
}

/// Sends `bytes` from A to B while B's ACKs of that connection are rewritten to carry
/// the SACK blocks `lie` makes (their cumulative ACK stays true, so the transfer can
/// end), every `drop_every`th data segment of it is lost (0: none), and another
/// connection carries 1 MB from B to A at the same time. Panics unless both transfers
/// deliver every byte intact within 10 simulated minutes.
fn sack_liar(cfg: Config, bytes: usize, drop_every: u64, mut lie: Lie) -> LiarRun {
    use std::cell::RefCell;
    use std::rc::Rc;
    let (mut p, c, s) = establish(cfg);
    let base = learn(&p, Dir::AtoB).ack; // the victim's first data byte
    let l2 = p.b.listen(addr(B, 81), 8).unwrap();
    let c2 = p.a.connect(p.now, addr(A, 0), addr(B, 81)).unwrap();
    p.drive_for(Duration::from_millis(50));
    let s2 = p.b.accept(l2).unwrap();
    let port = p.a.addresses(c).unwrap().0.port();
    p.record = false;
    let st = Rc::new(RefCell::new(LiarState::default()));
    let f = st.clone();
    p.filter = Some(Box::new(move |d, pk| {
        let sg = Seg::parse(pk);
        let mut st = f.borrow_mut();
        if d == Dir::AtoB && sg.th.src_port == port && !sg.payload.is_empty() {
            st.data_segs += 1;
            if drop_every > 0 && st.data_segs.is_multiple_of(drop_every) {
                return Verdict::Drop;
            }
            let end = sg
                .th
                .seq
                .wrapping_add(sg.payload.len() as u32)
                .wrapping_sub(base);
            st.snd_nxt = st.snd_nxt.max(end);
            st.mss = st.mss.max(sg.payload.len() as u32);
        }
        if d == Dir::BtoA && sg.th.dst_port == port && sg.is_pure_ack() {
            let view = AckView {
                ack: sg.th.ack.wrapping_sub(base),
                snd_nxt: st.snd_nxt,
                mss: st.mss.max(1),
                n: st.acks,
            };
            st.acks += 1;
            let mut th = sg.th;
            let Some(blocks) = lie(&view) else {
                return Verdict::Pass;
            };
            th.options.sack_len = blocks.len().min(4) as u8;
            for (slot, (a, b)) in th.options.sack.iter_mut().zip(blocks) {
                *slot = lowtide_wire::tcp::SackBlock {
                    start: a.wrapping_add(base),
                    end: b.wrapping_add(base),
                };
            }
            let src = SocketAddr::new(sg.ip.src, sg.th.src_port);
            let dst = SocketAddr::new(sg.ip.dst, sg.th.dst_port);
            *pk = build(src, dst, &th, &[], 9);
        }
        Verdict::Pass
    }));
    let f = st.clone();
    let delay = p.delay;
    p.extra_delay = Some(Box::new(move |now, d, pk| {
        if d == Dir::BtoA && Seg::parse(pk).th.dst_port == port {
            *f.borrow_mut().arrivals.entry(now + delay).or_default() += 1;
        }
        Duration::ZERO
    }));
    let (data, other) = (pattern(bytes, 11), pattern(1_000_000, 12));
    let (mut sent, mut sent_other) = (0, 0);
    let (mut got, mut got_other) = (Vec::new(), Vec::new());
    let start = p.now;
    let mut run = LiarRun {
        c,
        acks: 0,
        packets: 0,
        nodes: 0,
        max_nodes_per_packet: 0,
        peak_wmem: 0,
        peak_unacked: 0,
        peak_sacked: 0,
        took: Duration::ZERO,
        p,
    };
    let p = &mut run.p;
    while got.len() < data.len() || got_other.len() < other.len() {
        assert!(
            p.now < start + Duration::from_secs(600),
            "victim at {} of {} bytes, other at {}: {:?}",
            got.len(),
            data.len(),
            got_other.len(),
            p.a.info(p.now, c)
                .map(|i| (i.unacked, i.sacked, i.lost, i.retrans))
        );
        if let Ok(n) = p.a.send(p.now, c, &data[sent..]) {
            sent += n;
        }
        if let Ok(n) = p.b.send(p.now, s2, &other[sent_other..]) {
            sent_other += n;
        }
        let before = p.a.rtx_work().nodes_visited;
        let segs_before = st.borrow().data_segs;
        assert!(p.step(), "idle");
        let visited = p.a.rtx_work().nodes_visited - before;
        let mut st = st.borrow_mut();
        let due: Vec<_> = st.arrivals.range(..=p.now).map(|(t, _)| *t).collect();
        let acks: u64 = due.iter().map(|t| st.arrivals.remove(t).unwrap()).sum();
        if acks > 0 {
            let packets = acks + st.data_segs - segs_before;
            run.acks += acks;
            run.packets += packets;
            run.nodes += visited;
            run.max_nodes_per_packet = run.max_nodes_per_packet.max(visited / packets);
        }
        run.peak_wmem = run.peak_wmem.max(p.a.tcp_memory().wmem_queued);
        if let Ok(i) = p.a.info(p.now, c) {
            run.peak_unacked = run.peak_unacked.max(i.unacked);
            run.peak_sacked = run.peak_sacked.max(i.sacked);
        }
        got.extend(drain(&mut p.b, p.now, s));
        got_other.extend(drain(&mut p.a, p.now, c2));
        if got.len() == data.len() && run.took.is_zero() {
            run.took = p.now - start;
        }
    }
    assert!(got == data, "the victim's stream arrived corrupt");
    assert!(
        got_other == other,
        "the other connection's stream arrived corrupt"
    );
    run
}

/// The send memory a victim may hold: its send buffer (the largest `tcp_wmem`,
/// autotuned) and the queue's charged overhead, which SACK splits may push to
/// `2 * sndbuf + 128 KB` and no further (`tcp_fragment`, CVE-2019-11478).
fn wmem_bound() -> u64 {
    2 * Config::default().tcp_wmem[2] as u64 + 0x20000 + 65536
}

/// The same transfer and losses with an honest receiver: what recovery costs anyway.
fn honest_run(cfg: Config, bytes: usize, drop_every: u64) -> LiarRun {
    sack_liar(cfg, bytes, drop_every, Box::new(|_: &AckView| None))
}

/// Checks a liar's run against the honest one: the victim's send memory within
/// `tcp_fragment`'s cap, and its work (retransmit-queue nodes visited, the CPU cost
/// model's measure) per packet it handled (an ACK in, a segment out) within a small
/// factor of the honest run's, on average and in the worst step: no walk that grows
/// with the transfer or the number of blocks. (A liar can make the victim send more
/// packets, e.g. retransmit every piece between its blocks as RACK marks them lost,
/// as Linux would; each still costs a bounded amount.)
fn assert_bounded(liar: &LiarRun, honest: &LiarRun, factor: u64) {
    assert!(
        liar.peak_wmem <= wmem_bound(),
        "{} bytes queued",
        liar.peak_wmem
    );
    let mean = |r: &LiarRun| r.nodes.div_ceil(r.packets.max(1));
    // The figures BENCHMARKS.md quotes (`-- --nocapture`).
    for (who, r) in [("liar", liar), ("honest", honest)] {
        eprintln!(
            "{who}: {} ACKs, {} packets, {} nodes ({} per packet, at most {} in a step), \
             peak {} bytes queued, {} segments unacknowledged, done in {:?}",
            r.acks,
            r.packets,
            r.nodes,
            mean(r),
            r.max_nodes_per_packet,
            r.peak_wmem,
            r.peak_unacked,
            r.took
        );
    }
    assert!(
        mean(liar) <= factor * mean(honest)
            && liar.max_nodes_per_packet <= factor * honest.max_nodes_per_packet,
        "nodes per packet: liar {} on average, {} at most ({} ACKs); honest {} and {} ({} ACKs)",
        mean(liar),
        liar.max_nodes_per_packet,
        liar.acks,
        mean(honest),
        honest.max_nodes_per_packet,
        honest.acks
    );
}

/// A receiver that SACKs every other MSS-sized piece (a maximally fragmented
/// scoreboard, CVE-2019-11478's shape), cycling through all the pieces in flight,
/// three per ACK, while one data segment in 41 is really lost, so that lies cover
/// real holes. Linux finds those out as SACK reneging (`tcp_check_sack_reneging`,
/// then `tcp_timeout_mark_lost` forgets the SACK marks): lowtide did not, and left a
/// SACKed hole unsent for good (each RTO marked only unSACKed skbs lost). The other
/// connection's bytes and the victim's arrive intact; memory and work stay bounded.
#[test]
fn sack_every_other_mss_keeps_the_victim_bounded() {
    let lie: Lie = Box::new(|v: &AckView| {
        let m = v.mss;
        let lo = (v.ack / m).saturating_sub(1).div_ceil(2);
        let hi = match (v.snd_nxt / m) / 2 {
            0 => return Some(Vec::new()),
            h => h - 1,
        };
        if hi < lo {
            return Some(Vec::new());
        }
        let span = (hi - lo + 1) as u64;
        Some(
            (0..3u64)
                .map(|j| {
                    let k = lo + ((3 * v.n + j) % span) as u32;
                    ((2 * k + 1) * m, (2 * k + 2) * m)
                })
                .collect(),
        )
    });
    let honest = honest_run(Config::default(), 2_000_000, 41);
    let mut run = sack_liar(Config::default(), 2_000_000, 41, lie);
    let ctr = |m| run.p.a.counters().get(m);
    assert!(ctr(Mib::TcpExtTCPSACKReneging) > 0, "lies over real holes");
    // Worst step 50 nodes against the honest run's 11 (mean 13 against 7): since an
    // RTO leaves RACK-young skbs in flight (tcp_timeout_mark_lost), RACK marks them
    // later in one more walk of the (75-segment) queue; still no growth with size.
    assert_bounded(&run, &honest, 5);
    assert_eq!(run.p.a.socket_error(run.c), Ok(None));
}

/// A xorshift generator for the liars' choices (deterministic, no dependency).
fn xorshift(x: &mut u64, n: u32) -> u32 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    (*x % n.max(1) as u64) as u32
}

/// A receiver whose blocks move, overlap and shrink from one ACK to the next (so
/// the previous ACK's blocks, `recv_sack_cache`, rarely save a walk), with every
/// other first block a D-SACK lie below the ACK (reporting duplicates of data never
/// sent twice, to have the sender undo its window reductions), over real losses.
/// Linux ignores a D-SACK as dubious once the duplicates reported pass the segments
/// ever retransmitted (`tcp_dsack_seen`, `TCPDSACKIgnoredDubious`): lowtide took
/// every one. The transfers complete; memory and work stay bounded.
#[test]
fn sack_blocks_that_shift_overlap_shrink_and_lie_about_duplicates() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let lie: Lie = Box::new(move |v: &AckView| {
        let win = v.snd_nxt.saturating_sub(v.ack).max(1);
        let mut b = Vec::new();
        if xorshift(&mut x, 2) == 0 && v.ack > 0 {
            let s = v.ack.saturating_sub(1 + xorshift(&mut x, 8 * v.mss));
            b.push((s, s + 1 + xorshift(&mut x, 2 * v.mss)));
        }
        while b.len() < 3 {
            let s = v
                .ack
                .wrapping_sub(win / 4)
                .wrapping_add(xorshift(&mut x, win + win / 2));
            b.push((s, s.wrapping_add(1 + xorshift(&mut x, win / 2 + 1))));
        }
        Some(b)
    });
    let honest = honest_run(Config::default(), 2_000_000, 41);
    let mut run = sack_liar(Config::default(), 2_000_000, 41, lie);
    let total_retrans = run.p.a.info(run.p.now, run.c).unwrap().total_retrans as u64;
    let ctr = |m| run.p.a.counters().get(m);
    assert!(ctr(Mib::TcpExtTCPDSACKIgnoredDubious) > 0);
    assert!(
        ctr(Mib::TcpExtTCPDSACKRecvSegs) <= total_retrans,
        "{} duplicate segments believed, {total_retrans} ever retransmitted",
        ctr(Mib::TcpExtTCPDSACKRecvSegs)
    );
    assert!(ctr(Mib::TcpExtTCPSACKDiscard) > 0);
    assert_bounded(&run, &honest, 4);
    assert_eq!(run.p.a.socket_error(run.c), Ok(None));
}

/// A receiver that fills every ACK with the most blocks it can carry (four, without
/// timestamps), all invalid: beyond `snd_nxt` (by 2^30), ending past it, reversed, empty,
/// wrapping around the sequence space, spanning 2^31, below `snd_una`, and starting
/// exactly at `snd_una` (Linux's `tcp_is_sackblock_valid` calls that
/// "non-sensical" and discards it; lowtide took it and SACKed the head). Nothing is
/// tagged, every block is counted (`TCPSACKDiscard`, or as a dubious or old D-SACK),
/// and the work per packet stays that of an honest receiver's. Then 20,000 forged
/// ACKs with two SACK options each (the last one counts, as in Linux's
/// `tcp_parse_options`) or an option too long for the header cost a few nodes each.
#[test]
fn sack_block_floods_outside_the_window_tag_nothing() {
    let cfg = Config {
        tcp_timestamps: false,
        ..Config::default()
    };
    let half = 1u32 << 31;
    // Past anything the victim can have sent when the ACK arrives.
    let far = 1u32 << 30;
    let lie: Lie = Box::new(move |v: &AckView| {
        let (a, n, m) = (v.ack, v.snd_nxt, v.mss);
        let bad = [
            (a, a + m),
            (n + far, n + far + m),
            (n.wrapping_sub(10), n + far),
            (a + 2 * m, a + m),
            (a + m, a + m),
            (a.wrapping_add(half + 7), a + 100),
            (a.wrapping_sub(half), a + m),
            (a.wrapping_sub(5000), a.wrapping_sub(100)),
        ];
        let k = (v.n % 2) as usize * 4;
        Some(bad[k..k + 4].to_vec())
    });
    let honest = honest_run(cfg.clone(), 1_000_000, 0);
    let mut run = sack_liar(cfg, 1_000_000, 0, lie);
    assert_eq!(run.peak_sacked, 0, "an invalid block tagged data");
    let ctr = |m| run.p.a.counters().get(m);
    let counted = ctr(Mib::TcpExtTCPSACKDiscard)
        + ctr(Mib::TcpExtTCPDSACKIgnoredDubious)
        + ctr(Mib::TcpExtTCPDSACKIgnoredNoUndo)
        + ctr(Mib::TcpExtTCPDSACKIgnoredOld);
    assert!(
        counted >= 3 * run.acks,
        "{counted} blocks counted for {} ACKs",
        run.acks
    );
    assert_bounded(&run, &honest, 2);
    // Keep data in flight, then flood.
    let p = &mut run.p;
    p.filter = Some(Box::new(|d, _| match d {
        Dir::BtoA => Verdict::Drop,
        Dir::AtoB => Verdict::Pass,
    }));
    p.record = true;
    p.a.send(p.now, run.c, &pattern(50_000, 3)).unwrap();
    p.flush();
    let forger = learn(p, Dir::AtoB);
    let una = forger.ack.wrapping_sub(50_000);
    let block = |s: u32, e: u32| [s.to_be_bytes(), e.to_be_bytes()].concat();
    let two_options: Vec<u8> = [
        vec![5, 18],
        block(una + 2000, una + 3000),
        block(una.wrapping_sub(9), una + 1),
        vec![5, 18],
        block(una + 50_001, una + 60_000),
        block(una + 10, una + 9),
    ]
    .concat();
    let mut too_long = vec![5, 42];
    too_long.extend((0..5).flat_map(|i| block(una + 1000 * i, una + 1000 * i + 500)));
    let discards = p.a.counters().get(Mib::TcpExtTCPSACKDiscard);
    let before = (p.a.rtx_work().nodes_visited, discards);
    for i in 0..20_000u32 {
        let opts = if i % 2 == 0 { &two_options } else { &too_long };
        p.inject(false, &raw_segment(&forger, forger.seq, una, opts, &[]));
    }
    let per_ack = (p.a.rtx_work().nodes_visited - before.0) / 20_000;
    eprintln!("forged ACKs: {per_ack} nodes each");
    assert!(per_ack <= 32, "{per_ack} nodes per forged ACK");
    assert_eq!(p.a.info(p.now, run.c).unwrap().sacked, 0);
    assert_eq!(
        p.a.counters().get(Mib::TcpExtTCPSACKDiscard) - before.1,
        2 * 10_000,
        "the second option's two blocks, on every other ACK"
    );
    assert_eq!(p.a.socket_error(run.c), Ok(None));
}
