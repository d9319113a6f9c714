//! TCP-MD5 and the resets `tcp_v4_send_reset` / `tcp_v6_send_reset` send for a
//! segment no connection takes (Linux 6.18, tcp_ipv4.c, tcp_ipv6.c): a listener that
//! refuses a segment signs its reset with its key for the peer; with no full socket
//! (none at all, or a TIME-WAIT one) a signed segment is answered only if the
//! listener on its destination address and its *source* port holds a key for its
//! source with which its digest verifies, and that key signs the reset. Also IPv6
//! and IPv4-mapped keys end to end.

use super::md5::{digests, keyed};
use crate::common::*;
use lowtide::tcp::md5::{Md5Cmd, Md5Key};
use lowtide::tcp::sockopt::SockOptions;
use lowtide::{Config, Mib, RxChecksum, SocketHandle, TcpState};
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr, MD5SIG_DIGEST_OFFSET};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// A segment `src` -> `dst` with `flags`, `seq` and `ack`, signed with `key` (no
/// option at all if `None`).
fn segment(
    (src, dst): (SocketAddr, SocketAddr),
    flags: TcpFlags,
    (seq, ack): (u32, u32),
    key: Option<&[u8]>,
) -> Vec<u8> {
    let th = TcpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
        seq,
        ack,
        flags,
        window: 1000,
        options: TcpOptions {
            md5sig: key.map(|_| [0; 16]),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut pkt = build(src, dst, &th, &[], 1);
    if let Some(key) = key {
        let (want, _) = digests(&pkt, key);
        let ip = IpRepr::parse(&pkt, false).unwrap();
        let at = ip.header_len + MD5SIG_DIGEST_OFFSET;
        pkt[at..at + 16].copy_from_slice(&want);
        lowtide_wire::checksum::fill_tcp(ip.src, ip.dst, &mut pkt[ip.header_len..]);
    }
    pkt
}

/// What B answers `pkt` with, if anything.
fn answer(p: &mut Pair, pkt: &[u8]) -> Option<Vec<u8>> {
    let from = p.wire.len();
    p.b.handle_packet(p.now, pkt, RxChecksum::Unnecessary);
    p.flush();
    let out: Vec<_> = p.wire[from..].iter().map(|w| w.2.clone()).collect();
    assert!(out.len() <= 1, "one answer at most");
    out.into_iter().next()
}

/// A reset with sequence number `seq`, signed with `key` (or not signed).
fn assert_reset(pkt: &[u8], seq: u32, key: Option<&[u8]>) {
    let seg = Seg::parse(pkt);
    assert!(seg.has(TcpFlags::RST), "a reset");
    assert_eq!(seg.th.seq, seq);
    match key {
        Some(k) => {
            let (want, got) = digests(pkt, k);
            assert_eq!(got, Some(want), "signed with the listener's key");
        }
        None => assert_eq!(seg.th.options.md5sig, None, "not signed"),
    }
}

/// No socket on B's port 80, which a segment from A's port 4000 is for
/// (`tcp_v4_send_reset(NULL, skb)`), with B's listener on port 4000 holding `k`
/// for A: a segment signed with `k` draws a reset signed with `k`; one signed with
/// another key, or from a port no listener is on, or signed while the listener on
/// its source port has no key for A, draws none, and none of it is counted; an
/// unsigned one draws an unsigned reset. `local`/`peer` are B's and A's addresses
/// (IPv4, IPv6, or IPv4 with the listener on `::` keyed for the IPv4-mapped
/// address).
fn no_socket_case(local: &str, peer: &str, listen_on: &str, key_for: &str) {
    let mut p = Pair::new(Config::default());
    p.record = true;
    p.b.add_address(local.parse::<IpAddr>().unwrap());
    p.b.listen_with(addr(listen_on, 4000), 8, &keyed(key_for, b"k"))
        .unwrap();
    p.b.listen_with(addr(listen_on, 4001), 8, &keyed(key_for, b"other"))
        .unwrap();
    let to80 = |sport| (addr(peer, sport), addr(local, 80));
    let ack = TcpFlags::ACK;
    let rst = answer(&mut p, &segment(to80(4000), ack, (7, 5000), Some(b"k")));
    assert_reset(&rst.expect("a reset"), 5000, Some(b"k"));
    let pkt = segment(to80(4000), ack, (7, 5000), Some(b"x"));
    assert_eq!(answer(&mut p, &pkt), None, "the digest does not verify");
    let pkt = segment(to80(4002), ack, (7, 5000), Some(b"k"));
    assert_eq!(answer(&mut p, &pkt), None, "no listener on port 4002");
    let pkt = segment(to80(4001), ack, (7, 5000), Some(b"k"));
    assert_eq!(answer(&mut p, &pkt), None, "that listener's key is another");
    let syn = segment(to80(4000), TcpFlags::SYN, (7, 0), Some(b"k"));
    let rst = answer(&mut p, &syn).expect("a reset to the SYN");
    assert_reset(&rst, 0, Some(b"k"));
    assert_eq!(Seg::parse(&rst).th.ack, 8, "RST|ACK of the SYN");
    let rst = answer(&mut p, &segment(to80(4000), ack, (7, 5000), None));
    assert_reset(&rst.expect("a reset"), 5000, None);
    for m in [
        Mib::TcpExtTCPMD5NotFound,
        Mib::TcpExtTCPMD5Unexpected,
        Mib::TcpExtTCPMD5Failure,
    ] {
        assert_eq!(p.b.counters().get(m), 0, "{m:?}");
    }
}

#[test]
fn no_socket_signed_segment_is_reset_through_the_listener_on_its_source_port() {
    no_socket_case(B, A, B, A);
    no_socket_case(B6, A6, B6, A6);
    // An AF_INET6 listener on :: keyed for ::ffff:10.0.0.1 (tcp_v6_parse_md5_keys
    // keeps it as an AF_INET key), found for an IPv4 segment.
    no_socket_case(B, A, "::", "::ffff:10.0.0.1");
}

/// A bare ACK to a listener holding a key for its source, signed with it, passes
/// `tcp_inbound_hash` and is refused (`tcp_rcv_state_process`: `if (th->ack)
/// return 1`): the listener's reset (`tcp_v4_send_reset(rsk, skb)`, a full socket)
/// is signed with its key for the peer. Signed with another key it is dropped
/// (TcpExtTCPMD5Failure) and not answered.
#[test]
fn an_ack_to_a_keyed_listener_draws_a_signed_reset() {
    for (local, peer) in [(B, A), (B6, A6)] {
        let mut p = Pair::new(Config::default());
        p.record = true;
        p.b.add_address(local.parse::<IpAddr>().unwrap());
        p.b.listen_with(addr(local, 80), 8, &keyed(peer, b"k"))
            .unwrap();
        let to80 = (addr(peer, 4000), addr(local, 80));
        let pkt = segment(to80, TcpFlags::ACK, (7, 5000), Some(b"k"));
        assert_reset(&answer(&mut p, &pkt).expect("a reset"), 5000, Some(b"k"));
        let pkt = segment(to80, TcpFlags::ACK, (7, 5000), Some(b"x"));
        assert_eq!(answer(&mut p, &pkt), None);
        assert_eq!(p.b.counters().get(Mib::TcpExtTCPMD5Failure), 1);
    }
}

/// A's connection to B:80, keyed `k` both ways, closed by A and acknowledged by B:
/// A's FIN-WAIT-2 timewait socket. B's new data (signed with `k`) draws its reset
/// (`tcp_timewait_state_process`: TCP_TW_RST). A timewait socket is not a full
/// one, so `tcp_v4_send_reset` does not take `tw_md5_key`: the reset goes out only
/// if A's listener on port 80 (B's source port) has a key for B with which B's
/// digest verifies, and is signed with it. With that listener keyed `k`: a signed
/// reset; keyed `L`, or no listener: none.
#[test]
fn a_fin_wait2_timewait_reset_takes_the_listener_key() {
    for listener_key in [Some(&b"k"[..]), Some(b"L"), None] {
        let mut p = Pair::new(Config::default());
        p.record = true;
        let l = p.b.listen_with(addr(B, 80), 8, &keyed(A, b"k")).unwrap();
        if let Some(k) = listener_key {
            p.a.listen_with(addr(A, 80), 8, &keyed(B, k)).unwrap();
        }
        let c =
            p.a.connect_with(p.now, addr(A, 0), addr(B, 80), &keyed(B, b"k"))
                .unwrap();
        p.drive_until(Duration::from_secs(1), |p| {
            p.a.state(c) == Ok(TcpState::Established)
        });
        p.drive_for(Duration::from_millis(20));
        let s: SocketHandle = p.b.accept(l).unwrap();
        let (local, remote) = p.a.addresses(c).unwrap();
        p.a.close(p.now, c).unwrap();
        p.drive_for(Duration::from_millis(100));
        assert_eq!(p.a.timewait_state(local, remote), Some(TcpState::FinWait2));
        let from = p.wire.len();
        p.b.send(p.now, s, b"more").unwrap();
        p.drive_for(Duration::from_millis(100));
        let resets: Vec<_> = p.wire[from..]
            .iter()
            .filter(|w| w.1 == Dir::AtoB && Seg::parse(&w.2).has(TcpFlags::RST))
            .collect();
        if listener_key == Some(b"k") {
            assert_eq!(resets.len(), 1, "A's reset to B's data");
            let (want, got) = digests(&resets[0].2, b"k");
            assert_eq!(got, Some(want), "signed with the listener's key");
            assert!(p.b.state(s).is_err() || p.b.state(s) == Ok(TcpState::Closed));
        } else {
            assert!(
                resets.is_empty(),
                "no key the digest verifies with: no reset"
            );
        }
        assert_eq!(
            p.a.counters().get(Mib::TcpExtTCPMD5Failure),
            0,
            "not counted"
        );
    }
}

/// IPv6 and IPv4-mapped keys end to end: an IPv6 pair keyed both ways connects and
/// every segment carries the IPv6 digest (`tcp_v6_md5_hash_skb`); an AF_INET6
/// listener on `::` keyed for `::ffff:10.0.0.1` takes an IPv4 client keyed for it,
/// every segment signed with the IPv4 pseudo-header.
#[test]
fn ipv6_and_ipv4_mapped_keys_sign_and_verify() {
    for (a, b, listen_on, key_for) in [(A6, B6, B6, A6), (A, B, "::", "::ffff:10.0.0.1")] {
        let mut p = Pair::new(Config::default());
        p.record = true;
        p.a.add_address(a.parse::<IpAddr>().unwrap());
        p.b.add_address(b.parse::<IpAddr>().unwrap());
        let l =
            p.b.listen_with(addr(listen_on, 80), 8, &keyed(key_for, b"k"))
                .unwrap();
        let c =
            p.a.connect_with(p.now, addr(a, 0), addr(b, 80), &keyed(b, b"k"))
                .unwrap();
        p.drive_until(Duration::from_secs(1), |p| {
            p.a.state(c) == Ok(TcpState::Established)
        });
        p.drive_for(Duration::from_millis(20));
        let s = p.b.accept(l).unwrap();
        assert_eq!(send_all(&mut p, true, c, s, b"ping"), b"ping");
        assert_eq!(send_all(&mut p, false, s, c, b"pong"), b"pong");
        assert!(p.wire.len() >= 6);
        for (_, _, pkt) in &p.wire {
            let (want, got) = digests(pkt, b"k");
            assert_eq!(got, Some(want), "every segment signed");
        }
        assert_eq!(p.b.counters().get(Mib::TcpExtTCPMD5Failure), 0);
    }
}

/// A keyed SYN with the options given, signed with `k`, from A:4000 to B's keyed
/// listener on port 80 under `cfg`; B's SYN-ACK.
fn keyed_synack(cfg: Config, sack: bool, ts: bool) -> Seg {
    let mut p = Pair::new(cfg);
    p.record = true;
    p.b.listen_with(addr(B, 80), 8, &keyed(A, b"k")).unwrap();
    let th = TcpRepr {
        src_port: 4000,
        dst_port: 80,
        seq: 100,
        flags: TcpFlags::SYN,
        window: 65535,
        options: TcpOptions {
            mss: Some(1460),
            sack_permitted: sack,
            timestamp: ts.then_some((7, 0)),
            wscale: Some(7),
            md5sig: Some([0; 16]),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut pkt = build(addr(A, 4000), addr(B, 80), &th, &[], 1);
    let (want, _) = digests(&pkt, b"k");
    let ip = IpRepr::parse(&pkt, false).unwrap();
    let at = ip.header_len + MD5SIG_DIGEST_OFFSET;
    pkt[at..at + 16].copy_from_slice(&want);
    let out = answer(&mut p, &pkt).expect("a SYN-ACK");
    let (want, got) = digests(&out, b"k");
    assert_eq!(got, Some(want), "the SYN-ACK is signed");
    let s = Seg::parse(&out);
    assert!(s.has(TcpFlags::SYN | TcpFlags::ACK));
    s
}

/// `tcp_synack_options` with a key: the option takes 20 bytes and, unless the
/// SYN-ACK is a cookie's, `tstamp_ok &= !sack_ok`. A SYN without SACK keeps its
/// timestamps; one with both keeps SACK only; a cookie SYN-ACK (tcp_syncookies=2)
/// keeps both (MD5 20 + MSS 4 + timestamps 12, SACK-permitted in their NOPs,
/// window scale 4: 40 bytes). The MSS is never reduced by the option.
#[test]
fn keyed_synack_options_as_tcp_synack_options() {
    let s = keyed_synack(Config::default(), false, true);
    assert_eq!(s.th.options.timestamp.map(|t| t.1), Some(7));
    assert!(!s.th.options.sack_permitted);
    assert_eq!(s.th.options.mss, Some(1460));
    let s = keyed_synack(Config::default(), true, true);
    assert_eq!(s.th.options.timestamp, None);
    assert!(s.th.options.sack_permitted);
    let cookies = Config {
        tcp_syncookies: 2,
        ..Config::default()
    };
    let s = keyed_synack(cookies, true, true);
    assert_eq!(s.th.options.timestamp.map(|t| t.1), Some(7));
    assert!(s.th.options.sack_permitted);
    assert!(s.th.options.wscale.is_some());
    assert_eq!(s.th.options.mss, Some(1460));
}

/// A keyed active open with tcp_timestamps=1: the SYN offers no timestamps
/// (`tcp_syn_options`) and announces MSS 1460 (`tcp_advertise_mss`, not reduced by
/// the option; 6.18's `tcp_connect_init` and `tcp_create_openreq_child` no longer
/// count the option in tcp_header_len). Established without timestamps
/// tcpi_snd_mss (mss_cache) is 1460, and every data segment 1440
/// (`tcp_current_mss` takes the option's 20 bytes).
#[test]
fn keyed_active_open_mss_as_tcp_connect_init() {
    let mut p = Pair::new(Config::default());
    p.record = true;
    let l = p.b.listen_with(addr(B, 80), 8, &keyed(A, b"k")).unwrap();
    let c =
        p.a.connect_with(p.now, addr(A, 0), addr(B, 80), &keyed(B, b"k"))
            .unwrap();
    p.flush();
    let syn = Seg::parse(&p.wire[0].2);
    assert_eq!(syn.th.options.timestamp, None);
    assert_eq!(syn.th.options.mss, Some(1460));
    assert!(syn.th.options.sack_permitted);
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    p.drive_for(Duration::from_millis(20));
    assert_eq!(p.a.info(p.now, c).unwrap().snd_mss, 1460);
    let s = p.b.accept(l).unwrap();
    let data = pattern(20_000, 5);
    assert_eq!(send_all(&mut p, true, c, s, &data), data);
    let biggest = p.wire.iter().map(|w| Seg::parse(&w.2).payload.len()).max();
    assert_eq!(biggest, Some(1440));
}

/// A SYN that reopens a TIME-WAIT connection (`tcp_timewait_state_process`:
/// TCP_TW_SYN) goes to the listener through `tcp_v4_rcv`'s `process:` label, so
/// `tcp_inbound_hash` checks it with the listener's key: B's connection with A,
/// keyed `k`, closed by B first (B's TIME-WAIT), then a new SYN from A's port
/// with a higher sequence number. Unsigned, it is dropped (TcpExtTCPMD5NotFound)
/// and the timewait socket is gone all the same (`inet_twsk_deschedule_put`
/// comes first); signed with `k`, it draws a signed SYN-ACK.
#[test]
fn a_syn_reopening_time_wait_is_checked_with_the_listener_key() {
    for signed in [false, true] {
        let mut p = Pair::new(Config::default());
        p.record = true;
        let l = p.b.listen_with(addr(B, 80), 8, &keyed(A, b"k")).unwrap();
        let c =
            p.a.connect_with(p.now, addr(A, 0), addr(B, 80), &keyed(B, b"k"))
                .unwrap();
        p.drive_until(Duration::from_secs(1), |p| {
            p.a.state(c) == Ok(TcpState::Established)
        });
        p.drive_for(Duration::from_millis(20));
        let s = p.b.accept(l).unwrap();
        let (a_local, b_local) = p.a.addresses(c).unwrap();
        p.b.close(p.now, s).unwrap();
        p.drive_for(Duration::from_millis(100));
        p.a.close(p.now, c).unwrap();
        p.drive_for(Duration::from_millis(100));
        assert_eq!(
            p.b.timewait_state(b_local, a_local),
            Some(TcpState::TimeWait)
        );
        let seq = Seg::parse(&p.wire.last().unwrap().2)
            .th
            .ack
            .wrapping_add(100_000);
        let key = signed.then_some(&b"k"[..]);
        let syn = segment((a_local, b_local), TcpFlags::SYN, (seq, 0), key);
        let out = answer(&mut p, &syn);
        assert_eq!(
            p.b.timewait_state(b_local, a_local),
            None,
            "TIME-WAIT ended"
        );
        if signed {
            let out = out.expect("a SYN-ACK");
            assert!(Seg::parse(&out).has(TcpFlags::SYN | TcpFlags::ACK));
            let (want, got) = digests(&out, b"k");
            assert_eq!(got, Some(want));
            assert_eq!(p.b.counters().get(Mib::TcpExtTCPMD5NotFound), 0);
        } else {
            assert_eq!(out, None, "dropped by the listener's check");
            assert_eq!(p.b.counters().get(Mib::TcpExtTCPMD5NotFound), 1);
        }
    }
}

/// The same `process:` label applies the listener's `IP_MINTTL` to a SYN that
/// reopens TIME-WAIT: B's TIME-WAIT as above (no keys), then B's port-80 listener
/// replaced by one with min_ttl 255; the reopening SYN (TTL 64) is dropped
/// (TcpExtTCPMinTTLDrop) and not answered.
#[test]
fn a_syn_reopening_time_wait_meets_the_listener_min_ttl() {
    let mut p = Pair::new(Config::default());
    p.record = true;
    let l = p.b.listen(addr(B, 80), 8).unwrap();
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    p.drive_for(Duration::from_millis(20));
    let s = p.b.accept(l).unwrap();
    let (a_local, b_local) = p.a.addresses(c).unwrap();
    p.b.close(p.now, s).unwrap();
    p.drive_for(Duration::from_millis(100));
    p.a.close(p.now, c).unwrap();
    p.drive_for(Duration::from_millis(100));
    assert_eq!(
        p.b.timewait_state(b_local, a_local),
        Some(TcpState::TimeWait)
    );
    p.b.close(p.now, l).unwrap();
    let opts = SockOptions {
        min_ttl: 255,
        ..SockOptions::default()
    };
    p.b.listen_with(addr(B, 80), 8, &opts).unwrap();
    let seq = Seg::parse(&p.wire.last().unwrap().2)
        .th
        .ack
        .wrapping_add(100_000);
    let syn = segment((a_local, b_local), TcpFlags::SYN, (seq, 0), None);
    assert_eq!(
        answer(&mut p, &syn),
        None,
        "dropped by the listener's min_ttl"
    );
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPMinTTLDrop), 1);
    assert_eq!(
        p.b.timewait_state(b_local, a_local),
        None,
        "TIME-WAIT ended"
    );
}

/// A request (`TCP_NEW_SYN_RECV`) is checked and signs with its listener's keys as
/// they are when each segment comes (`tcp_v4_rcv` runs `tcp_inbound_hash` with
/// `sk = req->rsk_listener`; `tcp_make_synack` and `tcp_v4_reqsk_send_ack` look
/// the key up on the listener; `tcp_v4_syn_recv_sock` copies it into the child):
/// B's listener holds `k` for A when A's SYN comes, then `k2` before A's final
/// ACK, signed with `k`, arrives: it is dropped (TcpExtTCPMD5Failure), no child is
/// made, and the SYN-ACK retransmitted is signed with `k2`.
#[test]
fn a_request_follows_its_listener_keys() {
    let mut p = Pair::new(Config::default());
    p.record = true;
    let l = p.b.listen_with(addr(B, 80), 8, &keyed(A, b"k")).unwrap();
    let c =
        p.a.connect_with(p.now, addr(A, 0), addr(B, 80), &keyed(B, b"k"))
            .unwrap();
    p.flush();
    // A's SYN reaches B; B's SYN-ACK is on the wire when the key changes.
    p.step();
    let k2 = Md5Key::for_host(A.parse().unwrap(), b"k2").unwrap();
    p.b.socket(l).set_md5sig(Md5Cmd::Add(k2)).unwrap();
    p.drive_for(Duration::from_millis(1500));
    assert!(p.b.accept(l).is_err(), "no child");
    assert!(p.b.counters().get(Mib::TcpExtTCPMD5Failure) >= 1);
    let synacks: Vec<_> = p
        .wire
        .iter()
        .filter(|w| w.1 == Dir::BtoA && Seg::parse(&w.2).has(TcpFlags::SYN))
        .collect();
    assert!(synacks.len() >= 2, "the SYN-ACK was retransmitted");
    let (want, got) = digests(&synacks[0].2, b"k");
    assert_eq!(got, Some(want), "the first SYN-ACK under k");
    let (want, got) = digests(&synacks[1].2, b"k2");
    assert_eq!(got, Some(want), "its retransmission under k2");
    let _ = c;
}
