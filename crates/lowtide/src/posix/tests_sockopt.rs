//! The socket layer's tests for the TCP options of issue 21: `TCP_WINDOW_CLAMP`,
//! `TCP_SAVE_SYN`/`TCP_SAVED_SYN`, `TCP_TIMESTAMP`, `TCP_TX_DELAY`, `IPV6_TCLASS`,
//! and audit item 12's: `SO_PRIORITY`, `SO_*BUFFORCE`, `IP_TTL`, `IP_MINTTL`, ...

use super::consts::*;
use super::tests::{host, host_with, A, B};
use super::tests_sock::{deliver, run};
use super::*;

fn get_int(h: &mut Host, fd: Fd, level: i32, name: i32) -> Result<i32, Errno> {
    let mut v = [0u8; 4];
    h.getsockopt(Instant::ZERO, fd, level, name, &mut v)?;
    Ok(i32::from_ne_bytes(v))
}

pub(super) fn set_int(h: &mut Host, fd: Fd, level: i32, name: i32, v: i32) -> Result<(), Errno> {
    h.setsockopt(Instant::ZERO, fd, level, name, &v.to_ne_bytes())
}

/// A listener on B:80 with `opts` set before `listen`, and a client on A that
/// connects to it; (a, b, client, listener, accepted).
pub(super) fn connected(listener_opts: impl FnOnce(&mut Host, Fd)) -> (Host, Host, Fd, Fd, Fd) {
    connected_with(crate::Config::default(), listener_opts)
}

/// [`connected`] between stacks of configuration `cfg`.
pub(super) fn connected_with(
    cfg: crate::Config,
    listener_opts: impl FnOnce(&mut Host, Fd),
) -> (Host, Host, Fd, Fd, Fd) {
    let (mut a, mut b) = (host_with(cfg.clone(), A, 1), host_with(cfg, B, 2));
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    listener_opts(&mut b, l);
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = connect_b80(&mut a, &mut b);
    let s = b.accept(l).unwrap().0;
    (a, b, c, l, s)
}

/// A client on `a` connected to B:80 (the handshake run to its end).
fn connect_b80(a: &mut Host, b: &mut Host) -> Fd {
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let to = SocketAddr::new(B.into(), 80);
    assert_eq!(
        a.connect(Instant::ZERO, c, to),
        Err(Errno(errno::EINPROGRESS))
    );
    run(a, b, Instant::ZERO);
    assert_eq!(a.connect(Instant::ZERO, c, to), Ok(()));
    c
}

/// tcp_set_window_clamp (Linux 6.18): 0 only in CLOSE, any other value at least
/// SOCK_MIN_RCVBUF / 2; a listener's clamp is its SYN-ACK's window and its child's
/// clamp; getsockopt reads window_clamp.
#[test]
fn window_clamp_as_tcp_set_window_clamp() {
    let (mut a, mut b, c, l, s) = connected(|b, l| {
        assert_eq!(get_int(b, l, SOL_TCP, TCP_WINDOW_CLAMP), Ok(0));
        assert_eq!(set_int(b, l, SOL_TCP, TCP_WINDOW_CLAMP, 0), Ok(()));
        set_int(b, l, SOL_TCP, TCP_WINDOW_CLAMP, -5).unwrap();
        assert_eq!(get_int(b, l, SOL_TCP, TCP_WINDOW_CLAMP), Ok(1152));
        set_int(b, l, SOL_TCP, TCP_WINDOW_CLAMP, 20_000).unwrap();
    });
    assert_eq!(
        set_int(&mut b, l, SOL_TCP, TCP_WINDOW_CLAMP, 0),
        Err(Errno(errno::EINVAL)),
        "a listener is not CLOSE"
    );
    assert_eq!(get_int(&mut b, l, SOL_TCP, TCP_WINDOW_CLAMP), Ok(20_000));
    assert_eq!(get_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP), Ok(20_000));
    assert_eq!(
        set_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP, 0),
        Err(Errno(errno::EINVAL))
    );
    // Shrink: rcv_ssthresh follows at once; the window offered never goes back on
    // its right edge, so it falls with the data that arrives.
    let now = Instant::ZERO;
    let h = b.conn(s).unwrap().unwrap();
    let info = b.stack.info(now, h).unwrap();
    assert_eq!(info.rcv_wnd, 18_824, "SYN-ACK: 20000 less 20000 % 1448");
    // tcp_measure_rcv_mss: the first segment measures scaling_ratio, and a new
    // ratio sets the clamp to the full space (tcp_set_window_clamp), the
    // listener's value gone.
    a.send(now, c, &[7; 1000], 0).unwrap();
    deliver(&mut a, &mut b, now);
    deliver(&mut b, &mut a, now);
    let full = get_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP).unwrap();
    assert!(full > 20_000, "the full space, {full}");
    let i = b.stack.info(now, h).unwrap();
    let mut edge = 1001 + i.rcv_wnd as u64;
    set_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP, 5000).unwrap();
    assert_eq!(get_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP), Ok(5000));
    assert_eq!(b.stack.info(now, h).unwrap().rcv_ssthresh, 5000);
    let mut sent = 1000u64;
    let mut now = now;
    while b.stack.info(now, h).unwrap().rcv_wnd > 5000 {
        assert!(sent < 1_000_000, "the window never came down to the clamp");
        a.send(now, c, &[7; 1000], 0).unwrap();
        deliver(&mut a, &mut b, now);
        sent += 1000;
        now += core::time::Duration::from_millis(50); // the delayed ACK
        b.handle_timeout(now);
        deliver(&mut b, &mut a, now);
        let mut sink = [0u8; 1000];
        b.recv(now, s, &mut sink, 0).unwrap();
        let i = b.stack.info(now, h).unwrap();
        let right = 1 + sent + i.rcv_wnd as u64;
        assert!(right >= edge, "the right edge never moves back");
        edge = right;
    }
    let i = b.stack.info(now, h).unwrap();
    assert_eq!(i.rcv_wnd, 5000, "down to the clamp, and held there");
    // Raise: rcv_ssthresh may reach the current window, then grows again.
    set_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP, 30_000).unwrap();
    assert_eq!(b.stack.info(now, h).unwrap().rcv_ssthresh, 5000);
}

/// do_tcp_getsockopt(TCP_TIMESTAMP): tcp_clock_ts + tsoffset with the low bit (the
/// usec flag) clear: the TSval the connection sends; without a connection the
/// offset is 0. do_tcp_setsockopt: EINVAL for a short value, then EPERM without
/// TCP_REPAIR.
#[test]
fn tcp_timestamp_is_the_tsval_clock() {
    let (mut a, mut b, c, _l, s) = connected(|b, l| {
        let now = Instant::from_nanos(12_345_678_901);
        let mut v = [0u8; 4];
        b.getsockopt(now, l, SOL_TCP, TCP_TIMESTAMP, &mut v)
            .unwrap();
        assert_eq!(i32::from_ne_bytes(v), 12_344, "12345 ms, the low bit clear");
    });
    assert_eq!(
        b.setsockopt(Instant::ZERO, s, SOL_TCP, TCP_TIMESTAMP, &[1, 2]),
        Err(Errno(errno::EINVAL))
    );
    assert_eq!(
        set_int(&mut b, s, SOL_TCP, TCP_TIMESTAMP, 1000),
        Err(Errno(errno::EPERM))
    );
    for ms in [1000u64, 1001] {
        let now = Instant::from_nanos(ms * 1_000_000);
        let mut v = [0u8; 4];
        a.getsockopt(now, c, SOL_TCP, TCP_TIMESTAMP, &mut v)
            .unwrap();
        a.send(now, c, &[1; 100], 0).unwrap();
        let sent = deliver(&mut a, &mut b, now);
        let tcp = &sent[0][20..];
        let ts = tcp[20..tcp[12] as usize / 4]
            .windows(10)
            .find(|w| w[0] == 8 && w[1] == 10)
            .map(|w| u32::from_be_bytes([w[2], w[3], w[4], w[5]]))
            .expect("a timestamp option");
        assert_eq!(u32::from_ne_bytes(v), ts & !1, "at {ms} ms");
        deliver(&mut b, &mut a, now);
    }
}

/// TCP_SAVE_SYN (0..=2) on a listener: its child's TCP_SAVED_SYN hands out the
/// SYN's IP and TCP headers, exactly as they came, once; a short buffer is EINVAL
/// and keeps them (saved_syn_len is what Linux writes to optlen); a listener, or a
/// child of a listener that did not save, reads length 0.
#[test]
fn saved_syn_hands_out_the_syn_headers_once() {
    let now = Instant::ZERO;
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        set_int(&mut b, l, SOL_TCP, TCP_SAVE_SYN, 3),
        Err(Errno(errno::EINVAL))
    );
    assert_eq!(
        set_int(&mut b, l, SOL_TCP, TCP_SAVE_SYN, -1),
        Err(Errno(errno::EINVAL))
    );
    set_int(&mut b, l, SOL_TCP, TCP_SAVE_SYN, 1).unwrap();
    assert_eq!(get_int(&mut b, l, SOL_TCP, TCP_SAVE_SYN), Ok(1));
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let to = SocketAddr::new(B.into(), 80);
    let _ = a.connect(now, c, to);
    let sent = run(&mut a, &mut b, now);
    let syn = &sent[0];
    let s = b.accept(l).unwrap().0;
    assert_eq!(
        get_int(&mut b, s, SOL_TCP, TCP_SAVE_SYN),
        Ok(1),
        "inherited"
    );
    let mut none = [0u8; 100];
    assert_eq!(
        b.getsockopt(now, l, SOL_TCP, TCP_SAVED_SYN, &mut none),
        Ok(0)
    );
    let mut short = vec![0u8; syn.len() - 1];
    assert_eq!(
        b.getsockopt(now, s, SOL_TCP, TCP_SAVED_SYN, &mut short),
        Err(Errno(errno::EINVAL))
    );
    assert_eq!(b.saved_syn_len(s), Ok(Some(syn.len())));
    let mut out = [0u8; 200];
    let n = b
        .getsockopt(now, s, SOL_TCP, TCP_SAVED_SYN, &mut out)
        .unwrap();
    assert_eq!(
        &out[..n],
        &syn[..],
        "the SYN as it came, IP and TCP headers"
    );
    assert_eq!(n, 20 + 40, "IPv4 header, TCP header with its options");
    assert_eq!(
        b.getsockopt(now, s, SOL_TCP, TCP_SAVED_SYN, &mut out),
        Ok(0)
    );
    assert_eq!(b.saved_syn_len(s), Ok(None));
}

/// TCP_TX_DELAY: 0 to 2^28 - 1 (EINVAL otherwise); the departure time of every
/// packet the socket sends, its listener's SYN-ACK and its reset included, is
/// pushed by the delay (tcp_add_tx_delay, tcp_transmit_time); children inherit it.
#[test]
fn tx_delay_pushes_departure_times() {
    let now = Instant::from_nanos(1_000_000_000);
    let ms = |n: u64| core::time::Duration::from_millis(n);
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    for bad in [-1, 1 << 28] {
        assert_eq!(
            set_int(&mut b, l, SOL_TCP, TCP_TX_DELAY, bad),
            Err(Errno(errno::EINVAL))
        );
    }
    set_int(&mut b, l, SOL_TCP, TCP_TX_DELAY, (1 << 28) - 1).unwrap();
    set_int(&mut b, l, SOL_TCP, TCP_TX_DELAY, 20_000).unwrap();
    assert_eq!(get_int(&mut b, l, SOL_TCP, TCP_TX_DELAY), Ok(20_000));
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let _ = a.connect(now, c, SocketAddr::new(B.into(), 80));
    let syn = a.poll_transmit(now).unwrap();
    assert_eq!(syn.tstamp, now, "no delay on the client");
    b.handle_packet(now, &syn.segments()[0], RxChecksum::Verify);
    let synack = b.poll_transmit(now).unwrap();
    assert_eq!(synack.tstamp, now + ms(20), "the listener's delay");
    a.handle_packet(now, &synack.segments()[0], RxChecksum::Verify);
    run(&mut a, &mut b, now);
    let s = b.accept(l).unwrap().0;
    assert_eq!(get_int(&mut b, s, SOL_TCP, TCP_TX_DELAY), Ok(20_000));
    set_int(&mut b, s, SOL_TCP, TCP_NODELAY, 1).unwrap();
    b.send(now, s, &[1; 100], 0).unwrap();
    assert_eq!(b.poll_transmit(now).unwrap().tstamp, now + ms(20));
    set_int(&mut b, s, SOL_TCP, TCP_TX_DELAY, 0).unwrap();
    // Larger than the first, still in the device: tcp_should_autocork would hold an
    // skb whose truesize sk_wmem_alloc (with its own reference) exceeds.
    b.send(now, s, &[1; 200], 0).unwrap();
    assert_eq!(b.poll_transmit(now).unwrap().tstamp, now);
    // tcp_send_active_reset goes through tcp_transmit_skb: delayed too.
    set_int(&mut b, s, SOL_TCP, TCP_TX_DELAY, 5000).unwrap();
    a.send(now, c, &[2; 10], 0).unwrap();
    deliver(&mut a, &mut b, now);
    while b.poll_transmit(now).is_some() {}
    b.close(now, s).unwrap();
    let rst = b.poll_transmit(now).unwrap();
    assert_eq!(rst.packet[20 + 13] & 0x04, 0x04, "a reset: unread data");
    assert_eq!(rst.tstamp, now + ms(5));
}

/// A `family` socket on `b` listening on the wildcard address, port 80.
fn listen_any(b: &mut Host, family: i32) -> Fd {
    let l = b.socket(family, SOCK_STREAM, 0).unwrap();
    let any: std::net::IpAddr = match family {
        AF_INET => std::net::Ipv4Addr::UNSPECIFIED.into(),
        _ => std::net::Ipv6Addr::UNSPECIFIED.into(),
    };
    b.bind(l, SocketAddr::new(any, 80)).unwrap();
    b.listen(l, 8).unwrap();
    l
}

/// After `s` on `b` sent 10 bytes to `c` on `a`: `a` reads them, `b` closes first,
/// then `a`; `a`'s FIN reaches `b` twice. The ACK `b`'s TIME-WAIT sends to the
/// second.
fn timewait_ack(a: &mut Host, b: &mut Host, c: Fd, s: Fd) -> Vec<u8> {
    let now = Instant::ZERO;
    run(a, b, now);
    a.recv(now, c, &mut [0u8; 10], 0).unwrap();
    b.close(now, s).unwrap();
    run(b, a, now);
    a.close(now, c).unwrap();
    let fin = a.poll_transmit(now).unwrap().segments().remove(0);
    assert_eq!(fin[33], 0x11, "FIN-ACK");
    b.handle_packet(now, &fin, RxChecksum::Verify);
    while b.poll_transmit(now).is_some() {}
    b.handle_packet(now, &fin, RxChecksum::Verify); // to the TIME-WAIT socket
    b.poll_transmit(now).unwrap().segments().remove(0)
}

/// TIME-WAIT's ACK carries tw_tos: the socket's IP_TOS (inet_twsk_alloc), which
/// tcp_time_wait overwrites with IPV6_TCLASS on an AF_INET6 socket (tw_tclass is
/// tw_tos), so that an IPv4-mapped connection's last ACKs carry its traffic class
/// (Linux 6.18: tests/packetdrill/ip-tos-synack-data-timewait-v4.pkt's last ACK).
#[test]
fn timewait_acks_carry_the_dsfield() {
    for family in [AF_INET, AF_INET6] {
        let (mut a, mut b) = (host(A, 1), host(B, 2));
        let now = Instant::ZERO;
        let l = listen_any(&mut b, family);
        let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        let _ = a.connect(now, c, SocketAddr::new(B.into(), 80));
        run(&mut a, &mut b, now);
        let s = b.accept(l).unwrap().0;
        set_int(&mut b, s, SOL_IP, IP_TOS, 0x48).unwrap();
        if family == AF_INET6 {
            set_int(&mut b, s, IPPROTO_IPV6, IPV6_TCLASS, 0x28).unwrap();
        }
        b.send(now, s, &[1; 10], 0).unwrap();
        let data = deliver(&mut b, &mut a, now);
        assert_eq!(data[0][1], 0x48, "IPv4 packets carry IP_TOS");
        let ack = timewait_ack(&mut a, &mut b, c, s);
        let want = if family == AF_INET6 { 0x28 } else { 0x48 };
        assert_eq!(ack[1], want, "family {family}");
    }
}

/// net.ipv4.tcp_reflect_tos: the child takes its SYN's TOS as its own IP_TOS
/// (tcp_v4_syn_recv_sock's newinet->tos), which its TIME-WAIT ACK carries (tw_tos);
/// an AF_INET6 listener's IPv4-mapped child keeps the listener's IPV6_TCLASS, which
/// tcp_time_wait writes over tw_tos (tw_tclass), so that its last ACK carries that
/// while its data carried the SYN's TOS (Linux 6.18 sends 0x00 there).
#[test]
fn reflected_tos_reaches_timewait_as_tw_tos() {
    for family in [AF_INET, AF_INET6] {
        let (mut a, mut b) = (host(A, 1), host(B, 2));
        let now = Instant::ZERO;
        b.stack
            .set_sysctl(now, "net.ipv4.tcp_reflect_tos", "1")
            .unwrap();
        let l = listen_any(&mut b, family);
        let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        set_int(&mut a, c, SOL_IP, IP_TOS, 0x48).unwrap();
        let _ = a.connect(now, c, SocketAddr::new(B.into(), 80));
        run(&mut a, &mut b, now);
        let s = b.accept(l).unwrap().0;
        assert_eq!(
            get_int(&mut b, s, SOL_IP, IP_TOS),
            Ok(0x48),
            "family {family}"
        );
        b.send(now, s, &[1; 10], 0).unwrap();
        let data = deliver(&mut b, &mut a, now);
        assert_eq!(data[0][1], 0x48, "the child's data carry the SYN's TOS");
        let ack = timewait_ack(&mut a, &mut b, c, s);
        let want = if family == AF_INET6 { 0x00 } else { 0x48 };
        assert_eq!(ack[1], want, "family {family}");
    }
}

/// IPV6_TCLASS: AF_INET6 only (ENOPROTOOPT on AF_INET, as ip_setsockopt answers
/// another level), -1 to 255 (-1 is 0), the ECN bits stay TCP's; IPv6 packets
/// carry it.
#[test]
fn ipv6_tclass_range_and_packets() {
    let mut a = host(A, 1);
    let v4 = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        set_int(&mut a, v4, IPPROTO_IPV6, IPV6_TCLASS, 0x20),
        Err(Errno(errno::ENOPROTOOPT))
    );
    let v6 = a.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    for bad in [-2, 256] {
        assert_eq!(
            set_int(&mut a, v6, IPPROTO_IPV6, IPV6_TCLASS, bad),
            Err(Errno(errno::EINVAL))
        );
    }
    set_int(&mut a, v6, IPPROTO_IPV6, IPV6_TCLASS, 0x23).unwrap();
    assert_eq!(get_int(&mut a, v6, IPPROTO_IPV6, IPV6_TCLASS), Ok(0x20));
    set_int(&mut a, v6, IPPROTO_IPV6, IPV6_TCLASS, -1).unwrap();
    assert_eq!(get_int(&mut a, v6, IPPROTO_IPV6, IPV6_TCLASS), Ok(0));
    let mut hdr = [0x60u8, 0x20, 0, 0]; // ECN bits 10 (ECT(0))
    lowtide_wire::ip::set_ipv6_tclass(&mut hdr, 0xb8);
    assert_eq!(hdr, [0x6b, 0xa0, 0, 0], "class 0xba: 0xb8 with ECT(0) kept");
}

/// IPV6_AUTOFLOWLABEL: AF_INET6 only, read as ip6_autoflowlabel (the socket's
/// choice, else net.ipv6.auto_flowlabels' default); SO_TXREHASH: -1 to 1, -1 the
/// sysctl's value.
#[test]
fn autoflowlabel_and_txrehash_options() {
    let mut a = host(A, 1);
    let v4 = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        set_int(&mut a, v4, IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, 0),
        Err(Errno(errno::ENOPROTOOPT))
    );
    let v6 = a.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    assert_eq!(get_int(&mut a, v6, IPPROTO_IPV6, IPV6_AUTOFLOWLABEL), Ok(1));
    set_int(&mut a, v6, IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, 0).unwrap();
    assert_eq!(get_int(&mut a, v6, IPPROTO_IPV6, IPV6_AUTOFLOWLABEL), Ok(0));
    set_int(&mut a, v6, IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, 7).unwrap();
    assert_eq!(get_int(&mut a, v6, IPPROTO_IPV6, IPV6_AUTOFLOWLABEL), Ok(1));
    assert_eq!(get_int(&mut a, v4, SOL_SOCKET, SO_TXREHASH), Ok(1));
    for bad in [-2, 2] {
        assert_eq!(
            set_int(&mut a, v4, SOL_SOCKET, SO_TXREHASH, bad),
            Err(Errno(errno::EINVAL))
        );
    }
    set_int(&mut a, v4, SOL_SOCKET, SO_TXREHASH, 0).unwrap();
    assert_eq!(get_int(&mut a, v4, SOL_SOCKET, SO_TXREHASH), Ok(0));
    set_int(&mut a, v4, SOL_SOCKET, SO_TXREHASH, -1).unwrap();
    assert_eq!(get_int(&mut a, v4, SOL_SOCKET, SO_TXREHASH), Ok(1));
}

/// A SYN cookie's SYN-ACK is the listener's (tcp_make_synack reads it): its
/// TCP_MAXSEG (the MSS offered, and the peer's MSS clamped before it is encoded:
/// tcp_parse_options' user_mss), TCP_WINDOW_CLAMP (the window and its scale),
/// IP_TOS. Linux 6.18: tests/packetdrill/syncookie-synack-listener-options-v4.pkt.
#[test]
fn cookie_synack_carries_the_listeners_options() {
    let now = Instant::ZERO;
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    b.stack
        .set_sysctl(now, "net.ipv4.tcp_syncookies", "2")
        .unwrap();
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    set_int(&mut b, l, SOL_IP, IP_TOS, 0x20).unwrap();
    set_int(&mut b, l, SOL_TCP, TCP_MAXSEG, 1000).unwrap();
    set_int(&mut b, l, SOL_TCP, TCP_WINDOW_CLAMP, 20_000).unwrap();
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let _ = a.connect(now, c, SocketAddr::new(B.into(), 80));
    deliver(&mut a, &mut b, now);
    let synack = b.poll_transmit(now).unwrap().segments().remove(0);
    assert_eq!(synack[1], 0x20, "the listener's TOS");
    let tcp = &synack[20..];
    assert_eq!(
        u16::from_be_bytes([tcp[14], tcp[15]]),
        20_000 - 20_000 % 988
    );
    assert_eq!((tcp[20], tcp[21]), (2, 4), "MSS option first");
    assert_eq!(u16::from_be_bytes([tcp[22], tcp[23]]), 1000);
    a.handle_packet(now, &synack, RxChecksum::Verify);
    run(&mut a, &mut b, now);
    let s = b.accept(l).unwrap().0;
    // The cookie encodes 536 (msstab's largest entry under 1000), as Linux's.
    assert_eq!(get_int(&mut b, s, SOL_TCP, TCP_MAXSEG), Ok(524));
}

/// sk_getsockopt's SO_ACCEPTCONN / SO_PROTOCOL / SO_DOMAIN; SO_PRIORITY kept as
/// set (any value: the process is taken to hold CAP_NET_ADMIN) and, from IP_TOS,
/// rt_tos2priority's, only when the TOS changes (__ip_sock_set_tos); children
/// inherit it. TCP_THIN_DUPACK takes 0 or 1 and reads 0. Linux 6.18:
/// tests/packetdrill/sockopt-priority-acceptconn-thin-dupack.pkt.
#[test]
fn socket_level_reads_priority_and_thin_dupack() {
    let (mut a, mut b, c, l, s) = connected(|b, l| {
        assert_eq!(get_int(b, l, SOL_SOCKET, SO_ACCEPTCONN), Ok(0));
        set_int(b, l, SOL_SOCKET, SO_PRIORITY, 5).unwrap();
    });
    assert_eq!(get_int(&mut b, l, SOL_SOCKET, SO_ACCEPTCONN), Ok(1));
    assert_eq!(get_int(&mut b, s, SOL_SOCKET, SO_ACCEPTCONN), Ok(0));
    assert_eq!(
        get_int(&mut b, s, SOL_SOCKET, SO_PRIORITY),
        Ok(5),
        "inherited"
    );
    assert_eq!(get_int(&mut a, c, SOL_SOCKET, SO_PROTOCOL), Ok(IPPROTO_TCP));
    assert_eq!(get_int(&mut a, c, SOL_SOCKET, SO_DOMAIN), Ok(AF_INET));
    let v6 = a.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    assert_eq!(get_int(&mut a, v6, SOL_SOCKET, SO_DOMAIN), Ok(AF_INET6));
    assert_eq!(
        a.setsockopt(Instant::ZERO, c, SOL_SOCKET, SO_PRIORITY, &[1, 0]),
        Err(Errno(errno::EINVAL))
    );
    set_int(&mut a, c, SOL_SOCKET, SO_PRIORITY, -3).unwrap();
    assert_eq!(get_int(&mut a, c, SOL_SOCKET, SO_PRIORITY), Ok(-3));
    for (tos, prio) in [(0x10, 6), (0x08, 2), (0x18, 4), (0xe3, 0), (0x04, 0)] {
        set_int(&mut a, c, SOL_IP, IP_TOS, tos).unwrap();
        assert_eq!(
            get_int(&mut a, c, SOL_SOCKET, SO_PRIORITY),
            Ok(prio),
            "{tos:#x}"
        );
    }
    set_int(&mut a, c, SOL_SOCKET, SO_PRIORITY, 7).unwrap();
    set_int(&mut a, c, SOL_IP, IP_TOS, 0x04).unwrap();
    assert_eq!(
        get_int(&mut a, c, SOL_SOCKET, SO_PRIORITY),
        Ok(7),
        "TOS unchanged"
    );
    for v in [0, 1] {
        assert_eq!(set_int(&mut a, c, SOL_TCP, TCP_THIN_DUPACK, v), Ok(()));
    }
    for v in [-1, 2] {
        let r = set_int(&mut a, c, SOL_TCP, TCP_THIN_DUPACK, v);
        assert_eq!(r, Err(Errno(errno::EINVAL)));
    }
    assert_eq!(get_int(&mut a, c, SOL_TCP, TCP_THIN_DUPACK), Ok(0));
}

/// sk_setsockopt: SO_SNDBUF / SO_RCVBUF compare the value unsigned with
/// net.core.wmem_max / rmem_max (a negative value is the maximum), then double it;
/// the FORCE variants skip the cap and take a negative value as 0.
#[test]
fn buffer_sizes_as_sk_setsockopt() {
    let mut a = host(A, 1);
    let now = Instant::ZERO;
    a.stack_mut()
        .set_sysctl(now, "net.core.rmem_max", "100000")
        .unwrap();
    let fd = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let cases = [
        (SO_SNDBUF, SO_SNDBUF, -1, 2 * 212_992),
        (SO_SNDBUF, SO_SNDBUF, 300_000, 2 * 212_992),
        (SO_SNDBUFFORCE, SO_SNDBUF, 300_000, 600_000),
        (SO_SNDBUFFORCE, SO_SNDBUF, -5, 4608),
        (SO_RCVBUF, SO_RCVBUF, -1, 200_000),
        (SO_RCVBUF, SO_RCVBUF, 60_000, 120_000),
        (SO_RCVBUFFORCE, SO_RCVBUF, 300_000, 600_000),
        (SO_RCVBUFFORCE, SO_RCVBUF, -5, 2304),
        (SO_RCVBUFFORCE, SO_RCVBUF, i32::MAX, i32::MAX - 1),
    ];
    for (set, get, v, want) in cases {
        set_int(&mut a, fd, SOL_SOCKET, set, v).unwrap();
        assert_eq!(get_int(&mut a, fd, SOL_SOCKET, get), Ok(want), "{set} {v}");
    }
}

/// IP_TTL (1..=255 or -1, a byte or an int) and IP_MINTTL (0..=255): the
/// listener's TTL is its SYN-ACK's and its child's, -1 is net.ipv4.ip_default_ttl;
/// resets go with the default. A segment below IP_MINTTL is dropped and counted
/// (TcpExtTCPMinTTLDrop). Linux 6.18: tests/packetdrill/ip-ttl-minttl-v4.pkt.
#[test]
fn ip_ttl_and_minttl() {
    let now = Instant::ZERO;
    let mut probe = host(A, 3);
    let fd = probe.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(get_int(&mut probe, fd, SOL_IP, IP_TTL), Ok(64));
    for bad in [0, 256, -2] {
        let r = set_int(&mut probe, fd, SOL_IP, IP_TTL, bad);
        assert_eq!(r, Err(Errno(errno::EINVAL)), "{bad}");
    }
    for bad in [-1, 256] {
        let r = set_int(&mut probe, fd, SOL_IP, IP_MINTTL, bad);
        assert_eq!(r, Err(Errno(errno::EINVAL)), "{bad}");
    }
    probe.setsockopt(now, fd, SOL_IP, IP_TTL, &[9]).unwrap();
    assert_eq!(get_int(&mut probe, fd, SOL_IP, IP_TTL), Ok(9));
    (probe
        .stack_mut()
        .set_sysctl(now, "net.ipv4.ip_default_ttl", "50"))
    .unwrap();
    set_int(&mut probe, fd, SOL_IP, IP_TTL, -1).unwrap();
    assert_eq!(get_int(&mut probe, fd, SOL_IP, IP_TTL), Ok(50));

    let (mut a, mut b, _, l, s) = connected(|b, l| {
        set_int(b, l, SOL_IP, IP_TTL, 33).unwrap();
        set_int(b, l, SOL_IP, IP_MINTTL, 64).unwrap();
    });
    // The listener's TTL is its SYN-ACK's (ip-ttl-minttl-v4.pkt) and its child's.
    set_int(&mut b, l, SOL_IP, IP_MINTTL, 65).unwrap();
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let _ = a.connect(now, c, SocketAddr::new(B.into(), 80));
    deliver(&mut a, &mut b, now);
    assert!(
        deliver(&mut b, &mut a, now).is_empty(),
        "the SYN's TTL 64 < 65"
    );
    assert_eq!(b.stack().counters().get(crate::Mib::TcpExtTCPMinTTLDrop), 1);
    assert_eq!(get_int(&mut b, s, SOL_IP, IP_TTL), Ok(33));
    set_int(&mut b, s, SOL_TCP, TCP_NODELAY, 1).unwrap();
    b.send(now, s, &[1; 10], 0).unwrap();
    assert_eq!(deliver(&mut b, &mut a, now)[0][8], 33, "the child's");
    set_int(&mut b, s, SOL_IP, IP_TTL, -1).unwrap();
    b.send(now, s, &[1; 10], 0).unwrap();
    assert_eq!(deliver(&mut b, &mut a, now)[0][8], 64, "the default again");
    // A reset for a closed port: the stack's default.
    let stray = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let _ = a.connect(now, stray, SocketAddr::new(B.into(), 81));
    deliver(&mut a, &mut b, now);
    assert_eq!(deliver(&mut b, &mut a, now)[0][8], 64);
}

/// SO_RCVTIMEO / SO_SNDTIMEO (and the _NEW names) as sock_set_timeout and
/// sock_get_timeout: a 16-byte timeval, EDOM for tv_usec out of range, rounded up
/// to a jiffy; what a blocking caller reads from Host::rcvtimeo / sndtimeo, and
/// the accepted socket has the listener's (sk_clone_lock). Linux 6.18:
/// tests/packetdrill/so-rcvtimeo-read-accept-eagain.pkt.
#[test]
fn rcvtimeo_and_sndtimeo_as_sock_set_timeout() {
    use core::time::Duration;
    let tv = |sec: i64, usec: i64| [sec.to_ne_bytes(), usec.to_ne_bytes()].concat();
    let get = |h: &mut Host, fd: Fd, name: i32| {
        let mut b = [0u8; 16];
        let n = h
            .getsockopt(Instant::ZERO, fd, SOL_SOCKET, name, &mut b)
            .unwrap();
        assert_eq!(n, 16);
        b.to_vec()
    };
    let (mut a, mut b, c, l, s) = connected(|b, l| {
        assert_eq!(b.rcvtimeo(l), None, "no limit by default");
        assert_eq!(get(b, l, SO_RCVTIMEO), tv(0, 0));
        let now = Instant::ZERO;
        let set = |b: &mut Host, name: i32, v: &[u8]| b.setsockopt(now, l, SOL_SOCKET, name, v);
        assert_eq!(
            set(b, SO_RCVTIMEO, &tv(0, 1_000_000)),
            Err(Errno(errno::EDOM))
        );
        assert_eq!(set(b, SO_SNDTIMEO, &tv(0, -1)), Err(Errno(errno::EDOM)));
        assert_eq!(
            set(b, SO_RCVTIMEO, &tv(1, 0)[..8]),
            Err(Errno(errno::EINVAL))
        );
        set(b, SO_RCVTIMEO_NEW, &tv(0, 100_000)).unwrap();
        set(b, SO_SNDTIMEO, &tv(5, 999_999)).unwrap();
    });
    for fd in [l, s] {
        assert_eq!(get(&mut b, fd, SO_RCVTIMEO), tv(0, 100_000));
        assert_eq!(
            get(&mut b, fd, SO_SNDTIMEO_NEW),
            tv(6, 0),
            "rounded up to a jiffy"
        );
        assert_eq!(b.rcvtimeo(fd), Some(Duration::from_millis(100)));
        assert_eq!(b.sndtimeo(fd), Some(Duration::from_secs(6)));
    }
    // A negative tv_sec: no wait at all, read back as 0; 0: no limit again.
    let now = Instant::ZERO;
    b.setsockopt(now, s, SOL_SOCKET, SO_RCVTIMEO, &tv(-3, 0))
        .unwrap();
    assert_eq!(b.rcvtimeo(s), Some(Duration::ZERO));
    assert_eq!(get(&mut b, s, SO_RCVTIMEO), tv(0, 0));
    b.setsockopt(now, s, SOL_SOCKET, SO_RCVTIMEO, &tv(0, 0))
        .unwrap();
    assert_eq!(b.rcvtimeo(s), None);
    // One jiffy (1 ms at lowtide's HZ 1000) for a microsecond.
    a.setsockopt(now, c, SOL_SOCKET, SO_SNDTIMEO, &tv(0, 1))
        .unwrap();
    assert_eq!(get(&mut a, c, SO_SNDTIMEO), tv(0, 1000));
    assert_eq!(a.sndtimeo(c), Some(Duration::from_millis(1)));
}

/// SO_PEEK_OFF on TCP (Linux 6.10+): any int, -1 (off) by default and inherited;
/// MSG_PEEK reads from the offset and moves it on by what it copied (MSG_TRUNC
/// too), a read moves it back, not below 0. Linux 6.18:
/// tests/packetdrill/so-peek-off.pkt.
#[test]
fn peek_offset_as_sk_peek_offset() {
    let now = Instant::ZERO;
    let (mut a, mut b, c, l, s) = connected(|b, l| {
        assert_eq!(get_int(b, l, SOL_SOCKET, SO_PEEK_OFF), Ok(-1));
        assert_eq!(
            b.setsockopt(now, l, SOL_SOCKET, SO_PEEK_OFF, &[1, 0]),
            Err(Errno(errno::EINVAL))
        );
        set_int(b, l, SOL_SOCKET, SO_PEEK_OFF, 3).unwrap();
    });
    assert_eq!(get_int(&mut b, l, SOL_SOCKET, SO_PEEK_OFF), Ok(3));
    assert_eq!(get_int(&mut b, s, SOL_SOCKET, SO_PEEK_OFF), Ok(3));
    a.send(now, c, b"abcdefghij", 0).unwrap();
    deliver(&mut a, &mut b, now);
    deliver(&mut b, &mut a, now); // the ACK, so that Nagle lets the next send go
    let mut buf = [0u8; 100];
    let mut recv = |b: &mut Host, len: usize, flags: i32| {
        let n = b.recv(now, s, &mut buf[..len], flags);
        (
            n.map(|n| buf[..n].to_vec()),
            get_int(b, s, SOL_SOCKET, SO_PEEK_OFF).unwrap(),
        )
    };
    assert_eq!(recv(&mut b, 3, MSG_PEEK), (Ok(b"def".to_vec()), 6));
    assert_eq!(recv(&mut b, 3, MSG_PEEK), (Ok(b"ghi".to_vec()), 9));
    assert_eq!(recv(&mut b, 2, 0), (Ok(b"ab".to_vec()), 7));
    assert_eq!(
        b.recv(now, s, &mut [0u8; 100], MSG_PEEK | MSG_TRUNC),
        Ok(1),
        "one byte past the offset"
    );
    assert_eq!(get_int(&mut b, s, SOL_SOCKET, SO_PEEK_OFF), Ok(8));
    assert_eq!(recv(&mut b, 100, MSG_PEEK), (Err(Errno(errno::EAGAIN)), 8));
    let mut w = crate::posix::RecvWait::default();
    assert_eq!(
        b.recvmsg_wait(now, s, &mut [0u8; 100], MSG_PEEK, &mut w, true),
        crate::posix::RecvStep::Wait,
        "a blocking peek waits"
    );
    assert_eq!(recv(&mut b, 100, 0), (Ok(b"cdefghij".to_vec()), 0));
    // Off: peeks start at the front and move nothing.
    set_int(&mut b, s, SOL_SOCKET, SO_PEEK_OFF, -1).unwrap();
    a.send(now, c, b"xyz", 0).unwrap();
    deliver(&mut a, &mut b, now);
    assert_eq!(recv(&mut b, 2, MSG_PEEK), (Ok(b"xy".to_vec()), -1));
    assert_eq!(recv(&mut b, 2, MSG_PEEK), (Ok(b"xy".to_vec()), -1));
    assert_eq!(recv(&mut b, 1, 0), (Ok(b"x".to_vec()), -1));
}

/// The length rules before any option's own (Linux 6.18, checked against it with
/// scripts/packetdrill --kernel): `sk_setsockopt` and `do_tcp_setsockopt` read an
/// int for every option but their strings, so a shorter one is `EINVAL` even for
/// an unknown or read-only option; `do_ip_setsockopt` reads a byte, or 0 from an
/// empty one, except where it checks `optlen < 1`; a negative `optlen` is `EINVAL`
/// after the descriptor's own errors.
#[test]
fn optlen_rules_come_before_the_options() {
    let mut h = host(A, 1);
    let fd = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let set = |h: &mut Host, level, name, v: &[u8]| h.setsockopt(Instant::ZERO, fd, level, name, v);
    let e = |r: Result<(), Errno>| r.map_err(|e| e.0);
    assert_eq!(
        e(set(&mut h, SOL_SOCKET, SO_TYPE, &[1, 0])),
        Err(errno::EINVAL)
    );
    assert_eq!(
        e(set(&mut h, SOL_SOCKET, SO_TYPE, &[1, 0, 0, 0])),
        Err(errno::ENOPROTOOPT)
    );
    assert_eq!(e(set(&mut h, SOL_SOCKET, 999, &[])), Err(errno::EINVAL));
    assert_eq!(e(set(&mut h, SOL_TCP, 999, &[1])), Err(errno::EINVAL));
    assert_eq!(
        e(set(&mut h, SOL_TCP, 999, &[1, 0, 0, 0])),
        Err(errno::ENOPROTOOPT)
    );
    assert_eq!(
        e(set(&mut h, SOL_TCP, TCP_INFO, &[1, 0])),
        Err(errno::EINVAL)
    );
    // TCP_CONGESTION: EINVAL empty, else at most 15 bytes of name.
    assert_eq!(
        e(set(&mut h, SOL_TCP, TCP_CONGESTION, b"")),
        Err(errno::EINVAL)
    );
    assert_eq!(
        e(set(&mut h, SOL_TCP, TCP_CONGESTION, b"cub")),
        Err(errno::ENOENT)
    );
    assert_eq!(e(set(&mut h, SOL_TCP, TCP_CONGESTION, b"reno")), Ok(()));
    assert_eq!(
        e(set(&mut h, SOL_TCP, TCP_CONGESTION, b"renorenorenoren\0")),
        Err(errno::ENOENT)
    );
    // SOL_IP: an empty IP_TOS is 0; IP_TTL, IP_MINTTL, IP_FREEBIND want a byte.
    assert_eq!(set_int(&mut h, fd, SOL_IP, IP_TOS, 0x20), Ok(()));
    assert_eq!(e(set(&mut h, SOL_IP, IP_TOS, &[])), Ok(()));
    assert_eq!(get_int(&mut h, fd, SOL_IP, IP_TOS), Ok(0));
    assert_eq!(e(set(&mut h, SOL_IP, IP_MTU_DISCOVER, &[])), Ok(()));
    assert_eq!(
        get_int(&mut h, fd, SOL_IP, IP_MTU_DISCOVER),
        Ok(IP_PMTUDISC_DONT)
    );
    for name in [IP_TTL, IP_MINTTL, IP_FREEBIND] {
        assert_eq!(
            e(set(&mut h, SOL_IP, name, &[])),
            Err(errno::EINVAL),
            "{name}"
        );
    }
    assert_eq!(e(set(&mut h, SOL_IP, IP_MINTTL, &[7])), Ok(()));
    // A negative optlen, after EBADF.
    assert_eq!(h.sockopt_len(fd, -1), Err(Errno(errno::EINVAL)));
    assert_eq!(h.sockopt_len(fd, 4), Ok(4));
    assert_eq!(h.sockopt_len(fd + 100, -1), Err(Errno(errno::EBADF)));
    assert_eq!(
        e(h.setsockopt(Instant::ZERO, fd + 100, SOL_TCP, 999, &[])),
        Err(errno::EBADF)
    );
}

/// sk_getsockopt of a socket without a connection: `SO_SNDLOWAT` reads 1 (and
/// cannot be set), `SO_MEMINFO` has `sk_rcvbuf` and `sk_sndbuf`; tcp_get_info's
/// `tcpi_delivery_rate_app_limited` is set (`tcp_init_sock`'s `rate_app_limited`).
#[test]
fn getsockopt_without_a_connection() {
    let mut h = host(A, 1);
    let fd = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(get_int(&mut h, fd, SOL_SOCKET, SO_SNDLOWAT), Ok(1));
    assert_eq!(
        set_int(&mut h, fd, SOL_SOCKET, SO_SNDLOWAT, 5),
        Err(Errno(errno::ENOPROTOOPT))
    );
    assert_eq!(set_int(&mut h, fd, SOL_SOCKET, SO_RCVBUF, 1500), Ok(()));
    let mut m = [0u8; 36];
    assert_eq!(
        h.getsockopt(Instant::ZERO, fd, SOL_SOCKET, SO_MEMINFO, &mut m),
        Ok(36)
    );
    let word = |k: usize| u32::from_ne_bytes(m[k * 4..k * 4 + 4].try_into().unwrap());
    let cfg = h.stack().config().clone();
    assert_eq!(
        (word(0), word(1), word(2), word(3)),
        (0, 3000, 0, cfg.tcp_wmem[1])
    );
    let mut info = [0u8; 8];
    assert_eq!(
        h.getsockopt(Instant::ZERO, fd, SOL_TCP, TCP_INFO, &mut info),
        Ok(8)
    );
    assert_eq!(
        (info[0], info[7]),
        (7, 1),
        "TCP_CLOSE, delivery_rate_app_limited"
    );
}

/// `SO_LINGER` with a negative `l_linger` is `MAX_SCHEDULE_TIMEOUT`: `close` waits
/// for the ACK of the FIN without a limit instead of aborting.
#[test]
fn negative_linger_waits_without_limit() {
    let (mut a, _b, c, _l, _s) = connected(|_, _| {});
    let lin: Vec<u8> = [1i32, -1].iter().flat_map(|v| v.to_ne_bytes()).collect();
    a.setsockopt(Instant::ZERO, c, SOL_SOCKET, SO_LINGER, &lin)
        .unwrap();
    assert_eq!(a.linger(c), Some(None));
    let (h, wait) = a.close_linger(Instant::ZERO, c).unwrap().expect("lingers");
    assert_eq!(wait, None);
    assert!(a.is_closing(h), "a FIN, not a reset");
}

/// inet_csk_listen_start's inet_csk_delack_init forgets a TCP_QUICKACK 0 set
/// before listen(); tcp_disconnect (a listener's SHUT_RD) resets user_mss,
/// window_clamp, icsk_rto_min, the delayed-ACK state and sk_peek_off, and keeps
/// the other options (Linux 6.18, tests/packetdrill/listen-and-disconnect-reset-options.pkt).
#[test]
fn listen_and_disconnect_reset_what_linux_resets() {
    let mut h = host(B, 2);
    let l = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(set_int(&mut h, l, SOL_TCP, TCP_QUICKACK, 0), Ok(()));
    assert_eq!(get_int(&mut h, l, SOL_TCP, TCP_QUICKACK), Ok(0));
    h.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    h.listen(l, 8).unwrap();
    assert_eq!(get_int(&mut h, l, SOL_TCP, TCP_QUICKACK), Ok(1));
    for (level, name, v) in [
        (SOL_TCP, TCP_QUICKACK, 0),
        (SOL_TCP, TCP_MAXSEG, 1000),
        (SOL_TCP, TCP_WINDOW_CLAMP, 20000),
        (SOL_TCP, TCP_RTO_MIN_US, 100_000),
        (SOL_TCP, TCP_USER_TIMEOUT, 3000),
        (SOL_SOCKET, SO_PEEK_OFF, 5),
    ] {
        assert_eq!(set_int(&mut h, l, level, name, v), Ok(()), "{name}");
    }
    assert_eq!(get_int(&mut h, l, SOL_TCP, TCP_QUICKACK), Ok(0));
    h.shutdown(Instant::ZERO, l, SHUT_RD).unwrap();
    for (level, name, v) in [
        (SOL_TCP, TCP_QUICKACK, 1),
        (SOL_TCP, TCP_MAXSEG, 536),
        (SOL_TCP, TCP_WINDOW_CLAMP, 0),
        (SOL_TCP, TCP_RTO_MIN_US, 200_000),
        (SOL_TCP, TCP_USER_TIMEOUT, 3000),
        (SOL_SOCKET, SO_PEEK_OFF, -1),
    ] {
        assert_eq!(get_int(&mut h, l, level, name), Ok(v), "{name}");
    }
}

/// do_tcp_setsockopt's Fast Open options by state: TCP_FASTOPEN and
/// TCP_FASTOPEN_NO_COOKIE in TCP_CLOSE or TCP_LISTEN, TCP_FASTOPEN_CONNECT in
/// TCP_CLOSE only, a socket whose connection was refused being in TCP_CLOSE;
/// fastopen_queue_tune clamps to somaxconn when set; a child has
/// inet_csk_clone_lock's zeroed accept queue (no queue length, no keys of its own,
/// no TCP_DEFER_ACCEPT)
/// and the listener's tcp_sock bits; TCP_FASTOPEN_KEY reads the socket's own keys
/// only (tcp_fastopen_get_cipher with its icsk).
#[test]
fn fast_open_options_by_state_and_on_a_child() {
    let mut n = super::tests::HostPair::new();
    let c = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    set_int(&mut n.a, c, SOL_TCP, TCP_FASTOPEN_CONNECT, 1).unwrap();
    let to = SocketAddr::new(B.into(), 9);
    assert_eq!(n.a.connect(n.now, c, to), Err(Errno(errno::EINPROGRESS)));
    assert_eq!(n.a.in_tcp_close(c), Ok(false), "SYN-SENT");
    assert_eq!(
        set_int(&mut n.a, c, SOL_TCP, TCP_FASTOPEN_NO_COOKIE, 1),
        Err(Errno(errno::EINVAL))
    );
    let d = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(n.a.connect(n.now, d, to), Err(Errno(errno::EINPROGRESS)));
    n.run();
    assert_eq!(n.a.in_tcp_close(d), Ok(true), "refused: TCP_CLOSE");
    for (name, v) in [
        (TCP_FASTOPEN_NO_COOKIE, 1),
        (TCP_FASTOPEN_CONNECT, 1),
        (TCP_FASTOPEN, 5),
    ] {
        assert_eq!(set_int(&mut n.a, d, SOL_TCP, name, v), Ok(()));
        assert_eq!(get_int(&mut n.a, d, SOL_TCP, name), Ok(v));
    }
    let key = [7u8; 16];
    let (mut a, mut b, _c, l, s) = connected(|b, l| {
        set_int(b, l, SOL_TCP, TCP_FASTOPEN_NO_COOKIE, 1).unwrap();
        set_int(b, l, SOL_TCP, TCP_FASTOPEN, 100).unwrap();
        b.setsockopt(Instant::ZERO, l, SOL_TCP, TCP_FASTOPEN_KEY, &key)
            .unwrap();
        b.stack_mut()
            .set_sysctl(Instant::ZERO, "net.core.somaxconn", "10")
            .unwrap();
        assert_eq!(
            get_int(b, l, SOL_TCP, TCP_FASTOPEN),
            Ok(100),
            "clamped when set, not when read"
        );
        set_int(b, l, SOL_TCP, TCP_FASTOPEN, 100).unwrap();
    });
    assert_eq!(get_int(&mut b, l, SOL_TCP, TCP_FASTOPEN), Ok(10));
    assert_eq!(
        set_int(&mut b, l, SOL_TCP, TCP_FASTOPEN_CONNECT, 1),
        Err(Errno(errno::EINVAL)),
        "TCP_LISTEN"
    );
    let mut out = [0u8; 32];
    assert_eq!(
        b.getsockopt(Instant::ZERO, l, SOL_TCP, TCP_FASTOPEN_KEY, &mut out),
        Ok(16)
    );
    assert_eq!(out[..16], key);
    assert_eq!(get_int(&mut b, s, SOL_TCP, TCP_FASTOPEN), Ok(0));
    // TCP_DEFER_ACCEPT on the listener: a child made by data reads 0.
    set_int(&mut b, l, SOL_TCP, TCP_DEFER_ACCEPT, 1).unwrap();
    let c2 = connect_b80(&mut a, &mut b);
    assert_eq!(a.send(Instant::ZERO, c2, b"x", 0), Ok(1));
    run(&mut a, &mut b, Instant::ZERO);
    let s2 = b.accept(l).unwrap().0;
    assert_eq!(get_int(&mut b, l, SOL_TCP, TCP_DEFER_ACCEPT), Ok(1));
    assert_eq!(get_int(&mut b, s2, SOL_TCP, TCP_DEFER_ACCEPT), Ok(0));
    assert_eq!(get_int(&mut b, s, SOL_TCP, TCP_FASTOPEN_NO_COOKIE), Ok(1));
    assert_eq!(
        b.getsockopt(Instant::ZERO, s, SOL_TCP, TCP_FASTOPEN_KEY, &mut out),
        Ok(0)
    );
    // The stack's key is no socket's own.
    a.stack_mut()
        .set_sysctl(Instant::ZERO, "net.ipv4.tcp_fastopen_key", "1-2-3-4")
        .unwrap();
    let e = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        a.getsockopt(Instant::ZERO, e, SOL_TCP, TCP_FASTOPEN_KEY, &mut out),
        Ok(0)
    );
}
