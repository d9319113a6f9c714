//! The sending MSS as `tcp_sync_mss` sets it: `tcp_mtu_to_mss` (the peer's MSS, no
//! less than `net.ipv4.tcp_min_snd_mss`, then less the options every segment
//! carries) and `tcp_bound_to_half_wnd` (no more than half the peer's largest
//! window); `tcp_current_mss` takes off only the room this segment's extra options
//! need, with no floor of its own.

use crate::common::*;
use lowtide::{Config, SocketHandle};
use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr};

/// B accepts a connection from a forged client whose SYN offers `mss`, timestamps
/// if `ts`, and `window`; returns the pair and B's socket.
fn accept_from(cfg: Config, mss: u16, ts: bool, window: u16) -> (Pair, SocketHandle) {
    let mut p = Pair::new(cfg);
    p.record = true;
    let l = p.b.listen(addr(B, 80), 8).unwrap();
    let (client, server) = (addr("10.0.0.9", 4000), addr(B, 80));
    let syn = TcpRepr {
        seq: 1000,
        flags: TcpFlags::SYN,
        window,
        options: TcpOptions {
            mss: Some(mss),
            timestamp: ts.then_some((100, 0)),
            ..Default::default()
        },
        ..Default::default()
    };
    p.inject(true, &build(client, server, &syn, &[], 1));
    let synack = p.sent_since(0, Dir::BtoA).pop().expect("SYN-ACK");
    let ack = TcpRepr {
        seq: 1001,
        ack: synack.th.seq.wrapping_add(1),
        flags: TcpFlags::ACK,
        window,
        options: TcpOptions {
            timestamp: synack.th.options.timestamp.map(|(v, _)| (101, v)),
            ..Default::default()
        },
        ..Default::default()
    };
    p.inject(true, &build(client, server, &ack, &[], 2));
    let s = p.b.accept(l).unwrap();
    (p, s)
}

/// Payload sizes of B's first flight of `n` bytes.
fn flight(p: &mut Pair, s: SocketHandle, n: usize) -> Vec<usize> {
    let from = p.wire.len();
    p.b.send(p.now, s, &pattern(n, 1)).unwrap();
    p.flush();
    let sizes: Vec<usize> = p
        .sent_since(from, Dir::BtoA)
        .iter()
        .map(|s| s.payload.len())
        .filter(|&n| n > 0)
        .collect();
    assert!(!sizes.is_empty());
    sizes
}

/// `net.ipv4.tcp_min_snd_mss`: a peer announcing a tiny MSS (CVE-2019-11479 style)
/// gets segments of the floor less the timestamps' room, if negotiated.
#[test]
fn the_min_snd_mss_floor_comes_before_the_timestamps_room() {
    // Peer MSS 48 or 1 with timestamps: 48 - 12 = 36 bytes a segment (Linux sends
    // 36 and tcpi_snd_mss says 36); a higher floor moves both.
    let cases = [
        (1u16, 48u32, false, 48usize),
        (1, 536, false, 536),
        (48, 48, true, 36),
        (1, 48, true, 36),
        (48, 536, true, 524),
    ];
    for (peer_mss, floor, ts, want) in cases {
        let cfg = Config {
            tcp_min_snd_mss: floor,
            ..Config::default()
        };
        let (mut p, s) = accept_from(cfg, peer_mss, ts, 65535);
        assert_eq!(p.b.info(p.now, s).unwrap().snd_mss as usize, want);
        let sizes = flight(&mut p, s, 9 * want);
        let case = (peer_mss, floor, ts);
        assert!(sizes.iter().all(|&n| n == want), "{case:?}: {sizes:?}");
    }
}

#[test]
fn segments_are_bounded_to_half_the_peers_largest_window() {
    // tcp_bound_to_half_wnd: above 536 bytes, half the window; at or below it, all.
    for (window, want) in [(1000u16, 500usize), (500, 500), (65535, 1448)] {
        let (mut p, s) = accept_from(Config::default(), 1460, true, window);
        assert_eq!(
            p.b.info(p.now, s).unwrap().snd_mss as usize,
            want,
            "{window}"
        );
        let sizes = flight(&mut p, s, 3 * want);
        assert_eq!(sizes[0], want, "{window}: {sizes:?}");
    }
}

/// ip_output's `IP_UPD_PO_STATS` counts an skb's length before GSO splits it: a
/// GSO packet adds its headers to `IpExtOutOctets` once, however many segments it
/// becomes on the wire.
#[test]
fn out_octets_count_a_gso_packets_headers_once() {
    let (mut p, c, _s) = establish(Config::default());
    let octets = |p: &Pair| {
        let m = p.a.counters();
        (
            m.get(lowtide::Mib::IpExtOutOctets),
            m.get(lowtide::Mib::IpOutRequests),
        )
    };
    let (o0, r0) = octets(&p);
    let from = p.wire.len();
    p.a.send(p.now, c, &[7u8; 10 * 1448]).unwrap();
    p.flush();
    let (o1, r1) = octets(&p);
    let segs = p.sent_since(from, Dir::AtoB);
    let wire: usize = segs.iter().map(|s| 52 + s.payload.len()).sum();
    let packets = (r1 - r0) as usize;
    assert!(
        packets < segs.len(),
        "{packets} packets for {} segments",
        segs.len()
    );
    assert_eq!((o1 - o0) as usize, wire - (segs.len() - packets) * 52);
}
