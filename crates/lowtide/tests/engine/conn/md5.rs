//! TCP-MD5 signatures (RFC 2385) between two lowtide stacks: `TCP_MD5SIG` keys on
//! the listener and the connecting socket, every segment signed
//! (`tcp_established_options`, `tcp_v4_md5_hash_skb`) and checked
//! (`tcp_inbound_hash`), and what each side counts when the keys disagree.

use crate::common::*;
use lowtide::tcp::md5::{hash_segment, Md5Cmd, Md5Key, Md5Keys};
use lowtide::tcp::sockopt::SockOptions;
use lowtide::{Config, Mib, RxChecksum, SocketHandle, TcpState};
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr, MD5SIG_DIGEST_OFFSET};
use std::net::IpAddr;
use std::time::Duration;

/// Socket options holding one key for the peer `peer`.
pub(super) fn keyed(peer: &str, key: &[u8]) -> SockOptions {
    let mut md5 = Md5Keys::default();
    let ip: IpAddr = peer.parse().unwrap();
    md5.apply(Md5Cmd::Add(Md5Key::for_host(ip, key).unwrap()), 0, 131_072)
        .unwrap();
    SockOptions {
        md5,
        ..SockOptions::default()
    }
}

/// A listens on nothing; B listens on port 80 with `b_key` for A; A connects with
/// `a_key` for B (either may be absent). Records the wire.
fn connect(a_key: Option<&[u8]>, b_key: Option<&[u8]>) -> (Pair, SocketHandle, SocketHandle) {
    let mut p = Pair::new(Config::default());
    p.record = true;
    let lopts = b_key.map_or_else(SockOptions::default, |k| keyed(A, k));
    let l = p.b.listen_with(addr(B, 80), 8, &lopts).unwrap();
    let copts = a_key.map_or_else(SockOptions::default, |k| keyed(B, k));
    let c =
        p.a.connect_with(p.now, addr(A, 0), addr(B, 80), &copts)
            .unwrap();
    (p, c, l)
}

/// The digest of a wire segment recomputed with `key`, and the one it carries.
pub(super) fn digests(pkt: &[u8], key: &[u8]) -> ([u8; 16], Option<[u8; 16]>) {
    let s = Seg::parse(pkt);
    let k = Md5Key::for_host(s.ip.dst, key).unwrap();
    let tcp = &pkt[s.ip.header_len..];
    let want = hash_segment(&k, (s.ip.src, s.ip.dst), tcp, &[&s.payload]);
    (want, s.th.options.md5sig)
}

/// The same key on both sides: the handshake and data both ways go through; every
/// segment carries the option first (`NOP NOP 19 18`) with the digest of its own
/// bytes; the SYN offers no timestamps, so none are used; nothing is dropped; each
/// transmission is one segment (`sk_gso_disable`).
#[test]
fn same_key_connects_and_every_segment_is_signed() {
    let (mut p, c, l) = connect(Some(b"sesame"), Some(b"sesame"));
    p.local_drop = Some(Box::new(|_, tx| {
        assert_eq!(tx.gso_segs, 1, "GSO is off on a signed socket");
        false
    }));
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    p.drive_for(Duration::from_millis(20));
    let s = p.b.accept(l).unwrap();
    let data = pattern(200_000, 3);
    assert_eq!(send_all(&mut p, true, c, s, &data), data);
    assert_eq!(send_all(&mut p, false, s, c, b"pong"), b"pong");
    p.drive_for(Duration::from_millis(500));
    // tcpi_snd_mss is mss_cache, which leaves the option out; tcp_current_mss
    // takes its 20 bytes off every segment.
    assert_eq!(p.a.info(p.now, c).unwrap().snd_mss, 1460);
    let mss = 1460 - 20;
    for (_, _, pkt) in &p.wire {
        let (want, got) = digests(pkt, b"sesame");
        assert_eq!(got, Some(want), "every segment signed with its digest");
        let ip = IpRepr::parse(pkt, false).unwrap();
        assert_eq!(
            &pkt[ip.header_len + 20..ip.header_len + 24],
            &[1, 1, 19, 18]
        );
        let seg = Seg::parse(pkt);
        assert_eq!(seg.th.options.timestamp, None, "no timestamps with MD5");
        assert!(seg.payload.len() <= mss, "{} > {mss}", seg.payload.len());
    }
    let syn = Seg::parse(&p.wire[0].2);
    assert!(syn.has(TcpFlags::SYN) && syn.th.options.sack_permitted);
    for st in [&p.a, &p.b] {
        for m in [
            Mib::TcpExtTCPMD5NotFound,
            Mib::TcpExtTCPMD5Unexpected,
            Mib::TcpExtTCPMD5Failure,
        ] {
            assert_eq!(st.counters().get(m), 0, "{m:?}");
        }
    }
    let full = p
        .wire
        .iter()
        .filter(|w| Seg::parse(&w.2).payload.len() == mss);
    assert!(full.count() > 100, "full segments are 1440 bytes");
}

/// Different keys: B's listener finds every SYN's digest wrong
/// (TcpExtTCPMD5Failure) and answers none; A never connects.
#[test]
fn different_keys_never_connect() {
    let (mut p, c, l) = connect(Some(b"one"), Some(b"two"));
    p.drive_for(Duration::from_secs(4));
    assert_eq!(p.a.state(c), Ok(TcpState::SynSent));
    assert!(p.b.accept(l).is_err());
    assert!(p.b.counters().get(Mib::TcpExtTCPMD5Failure) >= 2);
    assert!(
        p.wire.iter().all(|(_, d, _)| *d == Dir::AtoB),
        "B said nothing"
    );
}

/// A key on the connecting side only: B's listener drops the signed SYNs
/// (TcpExtTCPMD5Unexpected). A key on the listener only: it drops the unsigned
/// SYNs (TcpExtTCPMD5NotFound).
#[test]
fn a_key_on_one_side_only_counts_unexpected_or_not_found() {
    let (mut p, c, _) = connect(Some(b"k"), None);
    p.drive_for(Duration::from_secs(2));
    assert_eq!(p.a.state(c), Ok(TcpState::SynSent));
    assert!(p.b.counters().get(Mib::TcpExtTCPMD5Unexpected) >= 1);
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPMD5NotFound), 0);
    let (mut p, c, _) = connect(None, Some(b"k"));
    p.drive_for(Duration::from_secs(2));
    assert_eq!(p.a.state(c), Ok(TcpState::SynSent));
    assert!(p.b.counters().get(Mib::TcpExtTCPMD5NotFound) >= 1);
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPMD5Unexpected), 0);
}

/// Once established, a segment whose digest was altered on the way is dropped
/// (TcpExtTCPMD5Failure) and its data never delivered; the sender's
/// retransmission, intact, is.
#[test]
fn a_tampered_segment_is_dropped_and_the_retransmission_delivered() {
    let (mut p, c, l) = connect(Some(b"k"), Some(b"k"));
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    p.drive_for(Duration::from_millis(20));
    let s = p.b.accept(l).unwrap();
    let mut spoiled = false;
    p.filter = Some(Box::new(move |d, pkt| {
        let ip = IpRepr::parse(pkt, false).unwrap();
        if d == Dir::AtoB && !spoiled && pkt.len() > ip.header_len + 44 {
            spoiled = true;
            pkt[ip.header_len + MD5SIG_DIGEST_OFFSET] ^= 1;
            // The checksum covers the digest: keep it right, so only MD5 fails.
            lowtide_wire::checksum::fill_tcp(ip.src, ip.dst, &mut pkt[ip.header_len..]);
        }
        Verdict::Pass
    }));
    assert_eq!(send_all(&mut p, true, c, s, b"payload"), b"payload");
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPMD5Failure), 1);
    assert!(p.a.counters().get(Mib::TcpRetransSegs) >= 1);
}

/// A SYN offering timestamps and SACK with a good signature (as a peer may send
/// it): the SYN-ACK keeps SACK and gives up the timestamps
/// (`tcp_synack_options`: `tstamp_ok &= !sack_ok`), and carries the option first.
#[test]
fn synack_gives_up_timestamps_for_sack() {
    let mut p = Pair::new(Config::default());
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
            sack_permitted: true,
            timestamp: Some((7, 0)),
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
    p.b.handle_packet(p.now, &pkt, RxChecksum::Unnecessary);
    p.flush();
    let synack = p.wire.last().map(|w| Seg::parse(&w.2)).expect("a SYN-ACK");
    assert!(synack.has(TcpFlags::SYN | TcpFlags::ACK));
    assert!(synack.th.options.sack_permitted);
    assert_eq!(synack.th.options.timestamp, None);
    let (want, got) = digests(&p.wire.last().unwrap().2, b"k");
    assert_eq!(got, Some(want));
    // Without a key for this peer the listener would have dropped it.
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPMD5Failure), 0);
}

/// An established signed pair (A's socket, B's accepted one), recording.
fn signed_pair() -> (Pair, SocketHandle, SocketHandle) {
    let (mut p, c, l) = connect(Some(b"k"), Some(b"k"));
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    p.drive_for(Duration::from_millis(20));
    let s = p.b.accept(l).unwrap();
    (p, c, s)
}

/// TIME-WAIT keeps the connection's key (`tw_md5_key`, `tcp_time_wait_init`): the
/// ACK it sends to B's retransmitted FIN is signed (`tcp_v4_send_ack`), and B
/// takes it. An abort's reset is signed too (`tcp_send_active_reset` through
/// `tcp_transmit_skb`), and B takes that.
#[test]
fn time_wait_acks_and_resets_are_signed() {
    let (mut p, c, s) = signed_pair();
    let (local, remote) = p.a.addresses(c).unwrap();
    p.a.shutdown(p.now, c, lowtide::Shutdown::Write).unwrap();
    p.drive_for(Duration::from_millis(100));
    let mut dropped = false;
    p.filter = Some(Box::new(move |d, pkt| {
        let seg = Seg::parse(pkt);
        if d == Dir::AtoB && !dropped && seg.is_pure_ack() {
            dropped = true; // A's ACK of B's FIN: B sends its FIN again
            return Verdict::Drop;
        }
        Verdict::Pass
    }));
    let from = p.wire.len();
    p.b.close(p.now, s).unwrap();
    p.drive_for(Duration::from_secs(3));
    assert_eq!(p.a.timewait_state(local, remote), Some(TcpState::TimeWait));
    let acks: Vec<_> = p.wire[from..].iter().filter(|w| w.1 == Dir::AtoB).collect();
    assert_eq!(acks.len(), 1, "the TIME-WAIT ACK (the first was dropped)");
    let (want, got) = digests(&acks[0].2, b"k");
    assert_eq!(got, Some(want));
    let fins = p.wire[from..]
        .iter()
        .filter(|w| w.1 == Dir::BtoA && Seg::parse(&w.2).has(TcpFlags::FIN))
        .count();
    assert_eq!(fins, 2, "B took the TIME-WAIT ACK: no third FIN");
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPMD5NotFound), 0);

    let (mut p, c, s) = signed_pair();
    let from = p.wire.len();
    p.a.abort(p.now, c).unwrap();
    p.drive_for(Duration::from_millis(100));
    let rst = Seg::parse(&p.wire[from].2);
    assert!(rst.has(TcpFlags::RST));
    let (want, got) = digests(&p.wire[from].2, b"k");
    assert_eq!(got, Some(want));
    assert!(p.b.state(s).is_err() || p.b.state(s) == Ok(TcpState::Closed));
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPMD5NotFound), 0);
}

/// `sk_omem_alloc` (`SK_MEMINFO_OPTMEM`) of keyed sockets: the listener's key and
/// the connecting socket's are one `struct tcp_md5sig_key` each (136 bytes,
/// `__tcp_md5_do_add`'s `sock_kmalloc`), and the child holds its own copy of the
/// listener's key for its peer (`tcp_md5_key_copy`): 136 too.
#[test]
fn each_keyed_socket_holds_its_keys_in_optmem() {
    let (mut p, c, l) = connect(Some(b"sesame"), Some(b"sesame"));
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    p.drive_for(Duration::from_millis(20));
    let s = p.b.accept(l).unwrap();
    assert_eq!(p.a.socket_ref(c).optmem(), Ok(136));
    assert_eq!(p.b.socket_ref(l).optmem(), Ok(136));
    assert_eq!(p.b.socket_ref(s).optmem(), Ok(136));
    let del = Md5Cmd::Del {
        addr: A.parse().unwrap(),
        prefixlen: 32,
        l3index: 0,
        flags: 0,
    };
    p.b.socket(l).set_md5sig(del).unwrap();
    assert_eq!(p.b.socket_ref(l).optmem(), Ok(0));
    assert_eq!(
        p.b.socket_ref(s).optmem(),
        Ok(136),
        "the child's copy is its own"
    );
}

/// With `net.core.optmem_max` at one key's 136 bytes, `tcp_md5_key_copy`'s
/// `sock_kmalloc` on the child finds no room (the sum must stay below the limit):
/// `tcp_v4_syn_recv_sock` drops the child (`put_and_exit`: TcpExtListenDrops, no
/// TcpExtListenOverflows) and the final ACK, and the request stays (`acked`). A
/// socket that already holds a key past the limit keeps it; a new one is ENOMEM.
#[test]
fn a_child_without_room_for_its_key_is_dropped() {
    let cfg = Config {
        optmem_max: 136,
        ..Config::default()
    };
    let mut p = Pair::new(cfg);
    let l = p.b.listen_with(addr(B, 80), 8, &keyed(A, b"k")).unwrap();
    let c =
        p.a.connect_with(p.now, addr(A, 0), addr(B, 80), &keyed(B, b"k"))
            .unwrap();
    p.drive_for(Duration::from_millis(200));
    assert_eq!(p.a.state(c), Ok(TcpState::Established));
    assert!(p.b.accept(l).is_err(), "no child");
    assert_eq!(p.b.counters().get(Mib::TcpExtListenDrops), 1);
    assert_eq!(p.b.counters().get(Mib::TcpExtListenOverflows), 0);
    let other = Md5Key::for_host("10.9.9.9".parse().unwrap(), b"x").unwrap();
    assert_eq!(
        p.b.socket(l).set_md5sig(Md5Cmd::Add(other)),
        Err(lowtide::SocketError::NoMemory)
    );
}
