//! The socket layer's tests for epoll's wakeup keys, the IP-level options and
//! `/proc/net/tcp`.

use super::consts::*;
use super::tests::{host, A, B};
use super::*;
use std::net::Ipv4Addr;

/// Moves every packet `from` sends to `to` (wire segments), returning them.
pub(super) fn deliver(from: &mut Host, to: &mut Host, now: Instant) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    while let Some(tx) = from.poll_transmit(now) {
        let mut segs = Vec::new();
        lowtide_wire::gso::segment(&tx.packet, tx.gso_size, |s| segs.push(s))
            .expect("valid packet");
        from.handle_tx_complete(now, tx.token);
        for s in segs {
            to.handle_packet(now, &s, RxChecksum::Verify);
            all.push(s);
        }
    }
    all
}

/// Runs both ways until quiet; the packets A sent.
pub(super) fn run(a: &mut Host, b: &mut Host, now: Instant) -> Vec<Vec<u8>> {
    let mut from_a = Vec::new();
    loop {
        let x = deliver(a, b, now);
        let y = deliver(b, a, now);
        if x.is_empty() && y.is_empty() {
            return from_a;
        }
        from_a.extend(x);
    }
}

/// A listener on B:80 and a client socket on A (not connected).
fn pair() -> (Host, Host, Fd, Fd) {
    let (a, mut b) = (host(A, 1), host(B, 2));
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    let mut a = a;
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    (a, b, c, l)
}

fn connect(a: &mut Host, b: &mut Host, c: Fd, l: Fd) -> (Fd, Vec<Vec<u8>>) {
    let to = SocketAddr::new(B.into(), 80);
    assert_eq!(
        a.connect(Instant::ZERO, c, to),
        Err(Errno(errno::EINPROGRESS))
    );
    let sent = run(a, b, Instant::ZERO);
    assert_eq!(a.connect(Instant::ZERO, c, to), Ok(()));
    (b.accept(l).unwrap().0, sent)
}

/// ep_poll_callback: a wakeup puts an item on the ready list only when its key
/// meets the item's events (or it has no key); what the item then reports is the
/// level found then.
#[test]
fn epoll_edges_are_keyed_wakeups() {
    let (mut a, mut b, c, l) = pair();
    let (s, _) = connect(&mut a, &mut b, c, l);
    let out_only = b.epoll_create(1).unwrap();
    let both = b.epoll_create(1).unwrap();
    b.epoll_ctl(out_only, EPOLL_CTL_ADD, s, POLLOUT | EPOLLET, 1)
        .unwrap();
    b.epoll_ctl(both, EPOLL_CTL_ADD, s, POLLIN | POLLOUT | EPOLLET, 2)
        .unwrap();
    for ep in [out_only, both] {
        assert_eq!(b.epoll_wait(ep, 4).unwrap().len(), 1, "writable at ADD");
        assert!(b.epoll_wait(ep, 4).unwrap().is_empty());
    }
    a.send(Instant::ZERO, c, &[1; 100], 0).unwrap();
    run(&mut a, &mut b, Instant::ZERO);
    assert!(
        b.epoll_wait(out_only, 4).unwrap().is_empty(),
        "sk_data_ready's EPOLLIN key does not wake an EPOLLOUT item"
    );
    let ev = b.epoll_wait(both, 4).unwrap();
    assert_eq!(ev[0].events, POLLIN | POLLOUT, "the level when woken");
    // A socket not ready at ADD is not on the ready list.
    let idle = b.epoll_create(1).unwrap();
    let mut buf = [0u8; 100];
    b.recv(Instant::ZERO, s, &mut buf, 0).unwrap();
    b.epoll_ctl(idle, EPOLL_CTL_ADD, s, POLLIN | EPOLLET, 3)
        .unwrap();
    assert!(b.epoll_wait(idle, 4).unwrap().is_empty());
}

/// inet_shutdown ends with sk_state_change, a wakeup without a key: an EPOLLET
/// item reports the socket again after shutdown(2), whichever events it waits for,
/// and so does one on a socket never connected (ENOTCONN).
#[test]
fn shutdown_wakes_every_epoll_item() {
    let (mut a, mut b, c, l) = pair();
    let now = Instant::ZERO;
    let (s, _) = connect(&mut a, &mut b, c, l);
    let ep = b.epoll_create(1).unwrap();
    b.epoll_ctl(ep, EPOLL_CTL_ADD, s, POLLOUT | EPOLLET, 1)
        .unwrap();
    assert_eq!(b.epoll_wait(ep, 4).unwrap().len(), 1, "writable at ADD");
    assert!(b.epoll_wait(ep, 4).unwrap().is_empty());
    b.shutdown(now, s, SHUT_WR).unwrap();
    assert_eq!(b.epoll_wait(ep, 4).unwrap()[0].events, POLLOUT);
    assert!(b.epoll_wait(ep, 4).unwrap().is_empty());
    let fresh = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    b.epoll_ctl(ep, EPOLL_CTL_ADD, fresh, POLLOUT | EPOLLET, 2)
        .unwrap();
    assert_eq!(b.epoll_wait(ep, 4).unwrap().len(), 1);
    assert_eq!(b.shutdown(now, fresh, SHUT_RD), Err(Errno(errno::ENOTCONN)));
    assert_eq!(b.epoll_wait(ep, 4).unwrap()[0].data, 2);
}

/// inet_shutdown on a listener: `SHUT_WR` does nothing; `SHUT_RD` is
/// `tcp_disconnect`, which stops it (its unaccepted child is reset) and leaves it
/// closed but bound: `accept` fails with `EINVAL`, a second shutdown with
/// `ENOTCONN`, and `listen` starts it again.
#[test]
fn shutdown_of_a_listener_stops_it_on_shut_rd_only() {
    let (mut a, mut b, c, l) = pair();
    let now = Instant::ZERO;
    assert_eq!(b.shutdown(now, l, SHUT_WR), Ok(()));
    let to = SocketAddr::new(B.into(), 80);
    assert_eq!(a.connect(now, c, to), Err(Errno(errno::EINPROGRESS)));
    run(&mut a, &mut b, now);
    assert_eq!(a.connect(now, c, to), Ok(()), "the listener still answers");
    assert_eq!(b.shutdown(now, l, SHUT_RD), Ok(()));
    run(&mut a, &mut b, now);
    let mut buf = [0u8; 4];
    assert_eq!(
        a.recv(now, c, &mut buf, 0),
        Err(Errno(errno::ECONNRESET)),
        "the unaccepted child is reset"
    );
    assert_eq!(b.accept(l).map(|_| ()), Err(Errno(errno::EINVAL)));
    assert_eq!(b.shutdown(now, l, SHUT_RD), Err(Errno(errno::ENOTCONN)));
    assert_eq!(b.listen(l, 8), Ok(()));
    assert_eq!(b.poll_mask(l), Ok(0), "listening again, nothing to accept");
}

/// inet_shutdown in TCP_CLOSE fails with ENOTCONN but sets sk_shutdown, which a
/// listener's children inherit (sk_clone_lock): with SEND_SHUTDOWN the child sends
/// its FIN when the handshake completes (tcp_rcv_state_process, SYN-RECV) and fails
/// sends with EPIPE. A connection made from such a socket keeps the bits but sends
/// no FIN (tcp_finish_connect has no such step): reads end at once (RCV_SHUTDOWN),
/// sends fail, and close() sends the FIN of ESTABLISHED.
#[test]
fn shutdown_bits_of_an_unconnected_socket_outlive_listen_and_connect() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let now = Instant::ZERO;
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(b.shutdown(now, l, SHUT_WR), Err(Errno(errno::ENOTCONN)));
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(a.shutdown(now, c, SHUT_RD), Err(Errno(errno::ENOTCONN)));
    let (s, _) = connect(&mut a, &mut b, c, l);
    let state = |h: &mut Host, fd: Fd| {
        let mut i = [0u8; sockopt::TCP_INFO_LEN];
        h.getsockopt(now, fd, SOL_TCP, TCP_INFO, &mut i).unwrap();
        i[0]
    };
    assert_eq!(state(&mut b, s), 4, "FIN-WAIT-1: the child sent its FIN");
    assert_eq!(state(&mut a, c), 8, "CLOSE-WAIT");
    assert_eq!(
        b.send(now, s, &[1; 10], MSG_NOSIGNAL),
        Err(Errno(errno::EPIPE))
    );
    let mut buf = [0u8; 10];
    assert_eq!(
        a.recv(now, c, &mut buf, 0),
        Ok(0),
        "RCV_SHUTDOWN and the FIN"
    );
    assert_eq!(a.send(now, c, &[1; 10], 0), Ok(10), "no SEND_SHUTDOWN on A");
    run(&mut a, &mut b, now);
    assert_eq!(b.recv(now, s, &mut buf, 0), Ok(10));
    // The connecting side: SEND_SHUTDOWN kept, no FIN until close().
    let (mut a, mut b, c, l) = pair();
    assert_eq!(a.shutdown(now, c, SHUT_WR), Err(Errno(errno::ENOTCONN)));
    let (s, _) = connect(&mut a, &mut b, c, l);
    assert_eq!(state(&mut a, c), 1, "ESTABLISHED, no FIN");
    assert_eq!(
        a.send(now, c, &[1; 10], MSG_NOSIGNAL),
        Err(Errno(errno::EPIPE))
    );
    a.close(now, c).unwrap();
    run(&mut a, &mut b, now);
    assert_eq!(b.recv(now, s, &mut buf, 0), Ok(0), "close() sent the FIN");
}

/// tcp_get_info without a connection: tcp_init_sock's values for a new socket
/// (TCP_CLOSE); for a listener the fields of every state, tcpi_unacked the
/// children ready for accept and tcpi_sacked the backlog.
#[test]
fn tcp_info_of_a_new_socket_and_of_a_listener() {
    let (mut a, mut b, c, l) = pair();
    let now = Instant::ZERO;
    let u32_at = |b: &[u8], off: usize| u32::from_ne_bytes(b[off..off + 4].try_into().unwrap());
    let u64_at = |b: &[u8], off: usize| u64::from_ne_bytes(b[off..off + 8].try_into().unwrap());
    let mut i = [0u8; sockopt::TCP_INFO_LEN];
    a.getsockopt(now, c, SOL_TCP, TCP_INFO, &mut i).unwrap();
    assert_eq!(i[0], 7, "TCP_CLOSE");
    let (rto, mss, rttvar) = (u32_at(&i, 8), u32_at(&i, 16), u32_at(&i, 72));
    assert_eq!((rto, mss, rttvar), (1_000_000, 536, 250_000));
    let (ssthresh, cwnd, reordering) = (u32_at(&i, 76), u32_at(&i, 80), u32_at(&i, 88));
    assert_eq!((ssthresh, cwnd, reordering), (0x7fff_ffff, 10, 3));
    assert_eq!(u32_at(&i, 148), u32::MAX, "tcpi_min_rtt: no sample");
    assert_eq!((u64_at(&i, 104), u64_at(&i, 112)), (u64::MAX, u64::MAX));
    connect(&mut a, &mut b, c, l);
    let c2 = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let to = SocketAddr::new(B.into(), 80);
    assert_eq!(a.connect(now, c2, to), Err(Errno(errno::EINPROGRESS)));
    run(&mut a, &mut b, now);
    b.getsockopt(now, l, SOL_TCP, TCP_INFO, &mut i).unwrap();
    assert_eq!(i[0], 10, "TCP_LISTEN");
    assert_eq!((u32_at(&i, 24), u32_at(&i, 28)), (1, 8), "queued, backlog");
    assert_eq!((u32_at(&i, 80), u32_at(&i, 88), u32_at(&i, 8)), (10, 3, 0));
}

/// Linux 6.18's struct tcp_info ends with two __u16s: tcpi_accecn_fail_mode at
/// 276, tcpi_accecn_opt_seen at 278.
#[test]
fn tcp_info_ends_with_accecn_fail_mode_and_opt_seen() {
    let mut info = crate::TcpInfo::without_connection(&crate::Config::default(), 0, 0);
    info.accecn_fail_mode = 0b0100; // TCP_ACCECN_OPT_FAIL_SEND
    info.accecn_opt_seen = 2; // TCP_ACCECN_OPT_COUNTER_SEEN
    let b = sockopt::encode_tcp_info(&info, 1);
    let u16_at = |off: usize| u16::from_ne_bytes(b[off..off + 2].try_into().unwrap());
    assert_eq!((u16_at(276), u16_at(278)), (0b0100, 2));
}

/// __sys_listen / __inet_listen_sk: a negative backlog is net.core.somaxconn (the
/// comparison is unsigned), 0 stays 0, and listen() on a listener changes only the
/// backlog (tcpi_sacked).
#[test]
fn listen_backlog_negative_is_somaxconn_and_zero_stays() {
    let (_a, mut b, _c, l) = pair();
    let now = Instant::ZERO;
    let backlog = |b: &mut Host| {
        let mut i = [0u8; sockopt::TCP_INFO_LEN];
        b.getsockopt(now, l, SOL_TCP, TCP_INFO, &mut i).unwrap();
        u32::from_ne_bytes(i[28..32].try_into().unwrap())
    };
    assert_eq!(backlog(&mut b), 8);
    b.listen(l, -1).unwrap();
    assert_eq!(backlog(&mut b), 4096);
    b.listen(l, 0).unwrap();
    assert_eq!(backlog(&mut b), 0);
    b.listen(l, i32::MAX).unwrap();
    assert_eq!(backlog(&mut b), 4096);
}

fn tos_and_df(pkt: &[u8]) -> (u8, bool) {
    (pkt[1], u16::from_be_bytes([pkt[6], pkt[7]]) & 0x4000 != 0)
}

/// do_ip_setsockopt/do_ip_getsockopt: IP_TOS keeps TCP's ECN bits, IP_MTU_DISCOVER
/// takes IP_PMTUDISC_DONT..=OMIT and decides DF (ip_dont_fragment), IP_MTU needs a
/// route, one-byte values are taken and given back.
#[test]
fn ip_tos_mtu_discover_and_mtu() {
    let (mut a, mut b, c, l) = pair();
    let now = Instant::ZERO;
    let mut v = [0u8; 4];
    assert_eq!(
        a.getsockopt(now, c, SOL_IP, IP_MTU, &mut v),
        Err(Errno(errno::ENOTCONN))
    );
    assert_eq!(a.getsockopt(now, c, SOL_IP, IP_MTU_DISCOVER, &mut v), Ok(4));
    assert_eq!(i32::from_ne_bytes(v), IP_PMTUDISC_WANT, "the default");
    let bad = a.setsockopt(now, c, SOL_IP, IP_MTU_DISCOVER, &6i32.to_ne_bytes());
    assert_eq!(bad, Err(Errno(errno::EINVAL)));
    // do_ip_setsockopt: an empty optlen leaves val 0 (Linux 6.18 takes it).
    assert_eq!(a.setsockopt(now, c, SOL_IP, IP_TOS, &[]), Ok(()));
    a.setsockopt(now, c, SOL_IP, IP_MTU_DISCOVER, &[IP_PMTUDISC_DONT as u8])
        .unwrap();
    a.setsockopt(now, c, SOL_IP, IP_TOS, &0x13i32.to_ne_bytes())
        .unwrap();
    let mut one = [0u8; 1];
    assert_eq!(a.getsockopt(now, c, SOL_IP, IP_TOS, &mut one), Ok(1));
    assert_eq!(one[0], 0x10, "the ECN bits stay TCP's");
    let (_s, sent) = connect(&mut a, &mut b, c, l);
    assert!(
        sent.iter().all(|p| tos_and_df(p) == (0x10, false)),
        "no DF with DONT"
    );
    assert_eq!(a.getsockopt(now, c, SOL_IP, IP_MTU, &mut v), Ok(4));
    assert_eq!(i32::from_ne_bytes(v), 1500);
    a.setsockopt(
        now,
        c,
        SOL_IP,
        IP_MTU_DISCOVER,
        &IP_PMTUDISC_DO.to_ne_bytes(),
    )
    .unwrap();
    a.setsockopt(now, c, SOL_IP, IP_TOS, &0i32.to_ne_bytes())
        .unwrap();
    a.send(now, c, &[1; 10], 0).unwrap();
    let sent = run(&mut a, &mut b, now);
    assert_eq!(tos_and_df(&sent[0]), (0, true));
}

/// IP_FREEBIND lets bind take an address the host does not have
/// (inet_can_nonlocal_bind).
#[test]
fn ip_freebind_binds_a_foreign_address() {
    let mut a = host(A, 1);
    let now = Instant::ZERO;
    let s = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let foreign = SocketAddr::new(Ipv4Addr::new(10, 9, 9, 9).into(), 80);
    assert_eq!(a.bind(s, foreign), Err(Errno(errno::EADDRNOTAVAIL)));
    a.setsockopt(now, s, SOL_IP, IP_FREEBIND, &1i32.to_ne_bytes())
        .unwrap();
    assert_eq!(a.bind(s, foreign), Ok(()));
}

/// tcp4_seq_show/tcp6_seq_show: a header, a line per socket in its family's file,
/// lines padded to 149 characters in /proc/net/tcp.
#[test]
fn proc_net_tcp_lists_sockets_as_linux_prints_them() {
    let (mut a, mut b, c, l) = pair();
    let (s, _) = connect(&mut a, &mut b, c, l);
    let t = b.proc_net_tcp(Instant::ZERO, false);
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].starts_with("  sl  local_address rem_address   st tx_queue"));
    assert!(lines.iter().all(|l| l.len() == 149), "{t}");
    assert!(
        lines[1].starts_with("   0: 0200000A:0050 00000000:0000 0A 00000000:00000000 00:00000000")
    );
    assert!(lines[2].starts_with("   1: 0200000A:0050 0100000A:"));
    assert!(lines[2].contains(" 01 00000000:00000000 "), "{}", lines[2]);
    b.send(Instant::ZERO, s, &[1; 10], 0).unwrap();
    let t = b.proc_net_tcp(Instant::ZERO, false);
    let conn = t.lines().nth(2).unwrap();
    // tx_queue 10, retransmit timer (tr 1) an RTO (200 ms: 20 clock ticks) away.
    assert!(
        conn.contains(" 01 0000000A:00000000 01:00000014 "),
        "{conn}"
    );
    assert_eq!(b.proc_net_tcp(Instant::ZERO, true).lines().count(), 1);
    // An AF_INET6 listener is in tcp6.
    let l6 = b.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    b.bind(l6, "[::]:81".parse().unwrap()).unwrap();
    b.listen(l6, 1).unwrap();
    let t6 = b.proc_net_tcp(Instant::ZERO, true);
    assert!(
        t6.lines().nth(1).unwrap().starts_with(
            "   0: 00000000000000000000000000000000:0051 00000000000000000000000000000000:0000 0A "
        ),
        "{t6}"
    );
}

/// Descriptors start where the embedding asks, lowest free from there.
#[test]
fn fd_base_moves_the_first_descriptor() {
    let mut a = host(A, 1);
    a.set_fd_base(1000);
    let s = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(s, 1000);
    assert_eq!(a.epoll_create(1), Ok(1001));
    a.close(Instant::ZERO, s).unwrap();
    assert_eq!(a.socket(AF_INET, SOCK_STREAM, 0), Ok(1000));
}

/// tcp_init_sock reads net.ipv4.tcp_reordering when socket(2) runs: a closed
/// socket and a listener report that value (tcp_get_info), the listener's child
/// and the client keep it whatever the sysctl says at connect(2) or at the SYN, and
/// a socket made after the sysctl moved reads the new one.
#[test]
fn tcp_reordering_is_read_when_the_socket_is_made() {
    let (mut a, mut b, c, l) = pair();
    let now = Instant::ZERO;
    for h in [&mut a, &mut b] {
        let s = h.stack_mut();
        s.set_sysctl(now, "net.ipv4.tcp_reordering", "10").unwrap();
    }
    let reordering = |h: &mut Host, fd: Fd| {
        let mut i = [0u8; sockopt::TCP_INFO_LEN];
        h.getsockopt(now, fd, SOL_TCP, TCP_INFO, &mut i).unwrap();
        u32::from_ne_bytes(i[88..92].try_into().unwrap())
    };
    assert_eq!((reordering(&mut a, c), reordering(&mut b, l)), (3, 3));
    let (s, _) = connect(&mut a, &mut b, c, l);
    assert_eq!((reordering(&mut a, c), reordering(&mut b, s)), (3, 3));
    let c2 = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(reordering(&mut a, c2), 10);
}
