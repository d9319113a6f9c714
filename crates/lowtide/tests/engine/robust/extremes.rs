//! Peer-controlled fields at their extremes (issue 12, defect 2): timestamps, windows,
//! SACK edges, MSS, window scale and the urgent pointer, in debug builds where an
//! arithmetic overflow panics. Each test forges segments from one side of a live
//! connection and then checks the connection still carries every byte.

use crate::common::*;
use lowtide::Config;
use lowtide_wire::tcp::{SackBlock, TcpFlags, TcpOptions, TcpRepr};
use std::time::Duration;

/// A connection A -> B with 3000 bytes delivered, and a forger of A's segments to B.
fn scene() -> (Pair, lowtide::SocketHandle, lowtide::SocketHandle, Peer) {
    let (mut p, c, s) = establish(Config::default());
    let data = pattern(3000, 1);
    assert_eq!(send_all(&mut p, true, c, s, &data), data);
    p.drive_for(Duration::from_millis(100));
    let peer = learn(&p, Dir::BtoA);
    (p, c, s, peer)
}

fn forge(peer: &Peer, seq: u32, tsval: u32, tsecr: u32, payload: &[u8]) -> Vec<u8> {
    let th = TcpRepr {
        seq,
        ack: peer.ack,
        flags: TcpFlags::ACK | TcpFlags::PSH,
        window: 65535,
        options: TcpOptions {
            timestamp: Some((tsval, tsecr)),
            ..Default::default()
        },
        ..Default::default()
    };
    build(peer.src, peer.dst, &th, payload, 11)
}

/// The connection still works both ways after the hostile segments.
fn still_carries(p: &mut Pair, c: lowtide::SocketHandle, s: lowtide::SocketHandle) {
    let data = pattern(50_000, 9);
    assert_eq!(send_all(p, true, c, s, &data), data);
    let back = pattern(20_000, 8);
    assert_eq!(send_all(p, false, s, c, &back), back);
}

/// Receive-buffer autotuning's timestamp RTT (`tcp_rcv_rtt_measure_ts`) on echoes
/// just inside its `INT_MAX / 1000` bound: the smoothed estimate must not overflow.
#[test]
fn tsecr_near_the_rtt_bound_in_full_sized_segments() {
    let (mut p, c, s, peer) = scene();
    let mut seq = peer.seq;
    let mut tsval = peer.ts_val;
    // Our clock moved on since `peer.ts_ecr`: sweep echoes across the bound, then the
    // far past (a wrapped, "future" echo), zero and the present.
    let sweep = (2_147_300u32..2_147_484)
        .rev()
        .chain([u32::MAX, 1 << 31, 0, 1]);
    for back in sweep {
        let payload = pattern(1460, back as u8);
        let tsecr = peer.ts_ecr.wrapping_sub(back);
        p.inject(true, &forge(&peer, seq, tsval, tsecr, &payload));
        seq = seq.wrapping_add(payload.len() as u32);
        tsval = tsval.wrapping_add(1);
        let got = drain(&mut p.b, p.now, s);
        assert_eq!(got, payload);
    }
    // The forged bytes are A's stream now: A's own next bytes would be old data to B.
    let _ = c;
}

/// A mid-transfer sender (A) gets forged ACKs of nothing new whose TSecr, window and
/// SACK edges take every extreme value; then the transfer still completes intact.
#[test]
fn acks_with_extreme_tsecr_window_and_sack_edges() {
    let (mut p, c, s, _) = scene();
    // Data in flight, held back from B so it stays outstanding at A.
    p.a.send(p.now, c, &pattern(30_000, 3)).unwrap();
    p.flush();
    let held = p.take_in_flight(true);
    assert!(!held.is_empty());
    p.drive_for(Duration::from_millis(1));
    let mut forger = learn(&p, Dir::AtoB);
    let last_b = p
        .wire
        .iter()
        .rev()
        .find(|(_, d, _)| *d == Dir::BtoA)
        .map(|(_, _, pk)| Seg::parse(pk))
        .unwrap();
    let a_una = last_b.th.ack;
    forger.ack = a_una;
    let edges = [
        0u32,
        1,
        u32::MAX,
        1 << 31,
        (1 << 31) - 1,
        a_una,
        a_una.wrapping_sub(1),
        a_una.wrapping_add(1),
        a_una.wrapping_add(1448),
        a_una.wrapping_add(30_000),
        a_una.wrapping_add(1 << 31),
        a_una.wrapping_sub(1 << 31),
    ];
    let ecrs = [0u32, 1, u32::MAX, 1 << 31, forger.ts_ecr.wrapping_add(1)];
    let mut n = 0u32;
    for &l in &edges {
        for &r in &edges {
            let mut options = TcpOptions {
                timestamp: Some((forger.ts_val, ecrs[n as usize % ecrs.len()])),
                ..Default::default()
            };
            options.sack[0] = SackBlock { start: l, end: r };
            options.sack[1] = SackBlock { start: r, end: l };
            options.sack_len = 2;
            let th = TcpRepr {
                seq: forger.seq,
                ack: a_una,
                flags: TcpFlags::ACK,
                window: if n.is_multiple_of(3) { 0 } else { u16::MAX },
                urgent: u16::MAX,
                options,
                ..Default::default()
            };
            p.inject(false, &build(forger.src, forger.dst, &th, &[], 3));
            n += 1;
        }
    }
    let discarded = p.a.counters().get(lowtide::Mib::TcpExtTCPSACKDiscard);
    assert!(
        discarded > 100,
        "SACK blocks checked: {discarded} discarded"
    );
    // Reopen the window, release the held data and finish.
    let th = TcpRepr {
        seq: forger.seq,
        ack: a_una,
        flags: TcpFlags::ACK,
        window: u16::MAX,
        options: TcpOptions {
            timestamp: Some((forger.ts_val, forger.ts_ecr)),
            ..Default::default()
        },
        ..Default::default()
    };
    p.inject(false, &build(forger.src, forger.dst, &th, &[], 4));
    for pk in held {
        p.inject(true, &pk);
    }
    let mut got = Vec::new();
    p.drive_until(Duration::from_secs(120), |p| {
        got.extend(drain(&mut p.b, p.now, s));
        got.len() >= 30_000
    });
    assert_eq!(got, pattern(30_000, 3));
    still_carries(&mut p, c, s);
}

/// URG with the largest urgent pointer, in order: the bytes are data (lowtide keeps
/// urgent data inline, as `SO_OOBINLINE`), nothing overflows.
#[test]
fn urgent_pointer_at_its_maximum() {
    let (mut p, c, s, peer) = scene();
    let payload = pattern(100, 5);
    let th = TcpRepr {
        seq: peer.seq,
        ack: peer.ack,
        flags: TcpFlags::ACK | TcpFlags::URG | TcpFlags::PSH,
        window: 65535,
        urgent: u16::MAX,
        options: TcpOptions {
            timestamp: Some((peer.ts_val, peer.ts_ecr)),
            ..Default::default()
        },
        ..Default::default()
    };
    p.inject(true, &build(peer.src, peer.dst, &th, &payload, 5));
    assert_eq!(drain(&mut p.b, p.now, s), payload);
    let _ = c;
}
