//! SYN cookies (net.ipv4.tcp_syncookies = 1, Linux's default): a flood of spoofed
//! SYNs fills the SYN queue; from then on SYN-ACKs carry cookies and keep no state,
//! so a real client still connects at once, with its MSS, window scale and SACK.

use crate::common::*;
use lowtide::{Config, Mib, TcpState};
use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr};
use std::net::SocketAddr;
use std::time::Duration;

/// 5,000 SYNs from spoofed addresses to B's listener (backlog 128); their SYN-ACKs
/// go nowhere. Returns when the real client A starts connecting.
fn flood(cfg: Config) -> (Pair, lowtide::SocketHandle) {
    let mut p = Pair::new(cfg);
    p.record = true;
    let l = p.b.listen(addr(B, 80), 128).unwrap();
    for i in 0..5000u32 {
        p.inject(true, &spoofed_syn(i, 1024 + (i % 60000) as u16));
    }
    (p, l)
}

/// Spoofed SYN number `i` to B's port 80, from 172.16.x.y:`port`.
fn spoofed_syn(i: u32, port: u16) -> Vec<u8> {
    let src = SocketAddr::new(
        std::net::Ipv4Addr::new(172, 16, (i >> 8) as u8, i as u8).into(),
        port,
    );
    let th = TcpRepr {
        seq: i.wrapping_mul(2_654_435_761),
        flags: TcpFlags::SYN,
        window: 65535,
        options: TcpOptions {
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            timestamp: Some((i, 0)),
            ..Default::default()
        },
        ..Default::default()
    };
    build(src, addr(B, 80), &th, &[], 1)
}

#[test]
fn a_real_client_connects_through_a_syn_flood() {
    let (mut p, l) = flood(Config::default());
    let b = p.b.counters();
    assert!(
        b.get(Mib::TcpExtSyncookiesSent) > 4800,
        "{}",
        b.get(Mib::TcpExtSyncookiesSent)
    );
    // The SYN queue holds at most backlog + 1 children; the rest kept no state.
    assert!(p.b.connection_count() <= 129, "{}", p.b.connection_count());
    let start = p.now;
    let sent = |p: &Pair| {
        (
            p.b.counters().get(Mib::IpOutRequests),
            p.b.counters().get(Mib::TcpOutSegs),
        )
    };
    let before = sent(&p);
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    p.drive_for(Duration::from_millis(30));
    let s = p.b.accept(l).expect("the real client is accepted");
    // B sent the cookie's SYN-ACK and nothing else: the child the cookie rebuilds
    // sends no SYN-ACK of its own (cookie_v4_check), counted nowhere.
    let after = sent(&p);
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 1));
    // One RTT (20 ms) plus the ACK's trip: no SYN retransmission (1 s).
    assert!(p.now.saturating_since(start) < Duration::from_millis(100));
    assert_eq!(p.b.counters().get(Mib::TcpExtSyncookiesRecv), 1);
    // TcpPassiveOpens counts children made (tcp_create_openreq_child, at the final
    // ACK or a cookie's): the real client's, none for the flood's requests that
    // never completed (this machine's kernel under a 200,000-SYN flood: 1).
    assert_eq!(p.b.counters().get(Mib::TcpPassiveOpens), 1);
    // The options came back through the cookie: full-sized segments, SACK, scaling.
    let info = p.b.info(p.now, s).unwrap();
    assert_eq!(info.snd_mss, 1448, "MSS 1460 less timestamps");
    let data = pattern(2_000_000, 7);
    assert_eq!(send_all(&mut p, true, c, s, &data), data);
    let back = pattern(500_000, 8);
    assert_eq!(send_all(&mut p, false, s, c, &back), back);
}

#[test]
fn without_cookies_the_flood_locks_the_client_out() {
    let cfg = Config {
        tcp_syncookies: 0,
        ..Config::default()
    };
    let (mut p, _l) = flood(cfg);
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_for(Duration::from_secs(5));
    assert_eq!(
        p.a.state(c),
        Ok(TcpState::SynSent),
        "SYNs dropped: queue full"
    );
    assert!(p.b.counters().get(Mib::TcpExtTCPReqQFullDrop) > 0);
}

/// tcp_syn_flood_action: with tcp_syncookies 2 every SYN asks it and counts
/// TcpExtTCPReqQFullDoCookies, before tcp_conn_request checks the accept queue: a
/// SYN that then finds it full (backlog 0, one child waiting) counts both that
/// and TcpExtListenOverflows, and gets no SYN-ACK.
#[test]
fn tcp_syncookies_2_counts_every_syn_as_a_flood_action() {
    let cfg = Config {
        tcp_syncookies: 2,
        ..Config::default()
    };
    let mut p = Pair::new(cfg);
    let _l = p.b.listen(addr(B, 80), 0).unwrap();
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    p.drive_for(Duration::from_millis(30));
    let b = p.b.counters();
    assert_eq!(b.get(Mib::TcpExtTCPReqQFullDoCookies), 1);
    assert_eq!(b.get(Mib::TcpExtSyncookiesSent), 1);
    p.inject(true, &spoofed_syn(1, 3000));
    let b = p.b.counters();
    assert_eq!(b.get(Mib::TcpExtTCPReqQFullDoCookies), 2);
    assert_eq!(b.get(Mib::TcpExtSyncookiesSent), 1, "dropped");
    assert_eq!(b.get(Mib::TcpExtListenOverflows), 1);
    assert_eq!(b.get(Mib::TcpExtListenDrops), 1);
    assert_eq!(b.get(Mib::TcpExtTCPReqQFullDrop), 0);
}

/// An ACK with a forged cookie is reset, never accepted.
#[test]
fn a_forged_cookie_is_refused() {
    let (mut p, l) = flood(Config::default());
    let th = TcpRepr {
        seq: 1001,
        ack: 0xdead_beef,
        flags: TcpFlags::ACK,
        window: 1000,
        ..Default::default()
    };
    p.inject(
        true,
        &build(addr("172.31.1.1", 999), addr(B, 80), &th, &[], 1),
    );
    assert_eq!(p.b.counters().get(Mib::TcpExtSyncookiesFailed), 1);
    assert!(p.b.accept(l).is_err());
}

/// The client's ACK and its one data byte are lost; its FIN (sequence ISN + 2)
/// reaches the listener first. The cookie must not validate against that sequence
/// and make a child whose stream starts one byte late (an empty stream that ends,
/// the real byte then dropped as old): it is refused and reset, as Linux resets an
/// ACK whose cookie fails (`tcp_v4_do_rcv` -> `tcp_rcv_state_process` on LISTEN).
#[test]
fn a_fin_past_the_first_byte_does_not_complete_a_cookie() {
    let (mut p, l) = flood(Config::default());
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    // Drop the first data segment from A (its handshake ACK is taken below).
    let mut dropped_data = false;
    p.filter = Some(Box::new(move |dir, pkt| {
        if dir != Dir::AtoB {
            return Verdict::Pass;
        }
        let s = Seg::parse(pkt);
        if s.th.flags.contains(TcpFlags::FIN) {
            return Verdict::Pass;
        }
        if !s.payload.is_empty() && !dropped_data {
            dropped_data = true;
            return Verdict::Drop;
        }
        Verdict::Pass
    }));
    p.take_in_flight(true); // the handshake's ACK, already on the wire
    assert_eq!(p.a.send(p.now, c, b"x"), Ok(1));
    p.flush();
    p.a.shutdown(p.now, c, lowtide::Shutdown::Write).unwrap();
    p.drive_for(Duration::from_secs(5));
    if let Ok(s) = p.b.accept(l) {
        assert_eq!(drain(&mut p.b, p.now, s), b"x", "a wrong stream");
    }
    assert_eq!(p.b.counters().get(Mib::TcpExtSyncookiesRecv), 0);
    assert!(p.b.counters().get(Mib::TcpExtSyncookiesFailed) >= 1);
    assert!(p.b.accept(l).is_err());
}

/// tcp_conn_request without cookies: "the last quarter of backlog is filled with
/// destinations, proven to be alive". With tcp_max_syn_backlog 64, requests are
/// taken while fewer than 48 + 1 wait (64 - queued >= 16); past that, a SYN from
/// a peer without an RTT in the metrics cache is dropped (TcpExtListenDrops), one
/// from a peer with one (tcp_peer_is_proven) still gets its SYN-ACK.
#[test]
fn without_cookies_the_last_quarter_of_tcp_max_syn_backlog_is_for_proven_peers() {
    let cfg = Config {
        tcp_syncookies: 0,
        tcp_max_syn_backlog: 64,
        ..Config::default()
    };
    let mut p = Pair::new(cfg);
    let l = p.b.listen(addr(B, 80), 4096).unwrap();
    // A's first connection ends well (B in LAST-ACK): B caches A's RTT.
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_for(Duration::from_millis(100));
    let s = p.b.accept(l).expect("accepted");
    p.a.close(p.now, c).unwrap();
    p.drive_for(Duration::from_millis(100));
    p.b.close(p.now, s).unwrap();
    p.drive_for(Duration::from_millis(200));
    let before = p.b.connection_count();
    for i in 0..100u32 {
        p.inject(true, &spoofed_syn(i, 2000 + i as u16));
    }
    assert_eq!(p.b.connection_count() - before, 49, "requests held");
    assert_eq!(p.b.counters().get(Mib::TcpExtListenDrops), 51);
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPReqQFullDrop), 0);
    // A, proven, still connects at once.
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_until(Duration::from_millis(500), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    assert_eq!(p.a.state(c), Ok(TcpState::Established));
    assert_eq!(p.b.counters().get(Mib::TcpExtListenDrops), 51);
}

/// `cookie_v4_check` redoes the window of the cookie's SYN-ACK for the child with
/// `req->mss`, the MSS the cookie decodes to, whole (no timestamp room taken off,
/// as `tcp_openreq_init_rwin` takes it): under a `TCP_WINDOW_CLAMP` of 20000 the
/// SYN-ACK offers 19760 (20 x 988, MSS 1000 less timestamps), the child
/// 19832 (37 x 536: the peer's 1000 falls to msstab's 536), as Linux 6.18's
/// (tests/packetdrill/syncookie-synack-listener-options-v4.pkt). Without the
/// clamp: 1460 x 184, where the SYN-ACK's multiple is 1448.
#[test]
fn a_cookie_child_window_is_a_multiple_of_the_cookie_mss() {
    let child_window = |clamp: u32, user_mss: u32| {
        let cfg = Config {
            tcp_syncookies: 2,
            ..Config::default()
        };
        let mut p = Pair::new(cfg);
        let opts = lowtide::tcp::sockopt::SockOptions {
            window_clamp: clamp,
            user_mss,
            ..Default::default()
        };
        let l = p.b.listen_with(addr(B, 80), 4, &opts).unwrap();
        let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
        p.drive_for(Duration::from_millis(100));
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
        assert_eq!(p.b.counters().get(Mib::TcpExtSyncookiesRecv), 1);
        let s = p.b.accept(l).expect("the cookie's child");
        let i = p.b.info(p.now, s).unwrap();
        (i.rcv_wnd, i.rcv_ssthresh)
    };
    assert_eq!(child_window(20000, 1000), (19832, 19832));
    let (wnd, _) = child_window(0, 0);
    assert_eq!(wnd % 1460, 0, "{wnd}");
    assert_ne!(wnd % 1448, 0, "{wnd}");
}
