//! `bind(2)`, `connect(2)` and `socket(2)` with the caller's raw arguments, and reads
//! and writes of nothing: their checks in Linux 6.18's order (checked against it
//! with scripts/sockopt-diff.c's sibling harness and tests/packetdrill scripts).

use super::consts::*;
use super::tests::{host, A, B};
use super::tests_sock::{deliver, run};
use super::*;
use std::net::IpAddr;

const T0: Instant = Instant::ZERO;

fn raw(family: i32, len: usize, ip: [u8; 4], port: u16) -> UserSockAddr {
    let mut b = [0u8; 28];
    b[..2].copy_from_slice(&(family as u16).to_ne_bytes());
    b[2..4].copy_from_slice(&port.to_be_bytes());
    b[4..8].copy_from_slice(&ip);
    UserSockAddr::from_bytes(&b[..len.min(28)]).unwrap()
}

/// A socket whose `connect(2)` to B port 81 holds its SYN for the first write
/// (`TCP_FASTOPEN_CONNECT`, deferred without a cookie: `TCP_FASTOPEN_NO_COOKIE`).
fn deferred_no_cookie(a: &mut Host) -> Fd {
    let d = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let on = 1i32.to_ne_bytes();
    a.setsockopt(T0, d, SOL_TCP, TCP_FASTOPEN_CONNECT, &on)
        .unwrap();
    a.setsockopt(T0, d, SOL_TCP, TCP_FASTOPEN_NO_COOKIE, &on)
        .unwrap();
    assert_eq!(a.connect(T0, d, SocketAddr::new(B.into(), 81)), Ok(()));
    d
}

/// inet_bind_sk then __inet_bind: the length, the family (AF_UNSPEC with
/// INADDR_ANY is AF_INET), the address, and only then the state; __inet6_bind checks
/// the state before the address.
#[test]
fn bind_checks_in_linux_order() {
    let mut h = host(A, 1);
    let e = |r: Result<(), Errno>| r.map_err(|e| e.0);
    let fd = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        e(h.bind_user(fd, &raw(AF_INET, 15, A.octets(), 80))),
        Err(errno::EINVAL)
    );
    assert_eq!(
        e(h.bind_user(fd, &raw(AF_INET6, 16, A.octets(), 80))),
        Err(errno::EAFNOSUPPORT)
    );
    assert_eq!(
        e(h.bind_user(fd, &raw(AF_UNSPEC, 16, A.octets(), 80))),
        Err(errno::EAFNOSUPPORT)
    );
    assert_eq!(e(h.bind_user(fd, &raw(AF_UNSPEC, 16, [0; 4], 80))), Ok(()));
    assert_eq!(
        h.local_addr(fd).unwrap(),
        Some("0.0.0.0:80".parse().unwrap())
    );
    // Bound: an address it lacks is EADDRNOTAVAIL before the double bind's EINVAL.
    assert_eq!(
        e(h.bind_user(fd, &raw(AF_INET, 16, B.octets(), 81))),
        Err(errno::EADDRNOTAVAIL)
    );
    assert_eq!(
        e(h.bind_user(fd, &raw(AF_INET, 16, A.octets(), 81))),
        Err(errno::EINVAL)
    );
    let v6 = h.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        e(h.bind_user(v6, &raw(AF_INET6, 23, [0; 4], 80))),
        Err(errno::EINVAL)
    );
    assert_eq!(e(h.bind(v6, "[::]:82".parse().unwrap())), Ok(()));
    let lacks: SocketAddr = "[fd00::9]:83".parse().unwrap();
    assert_eq!(
        e(h.bind(v6, lacks)),
        Err(errno::EINVAL),
        "state before address"
    );
    // A sockaddr_in on an AF_INET6 socket is too short (SIN6_LEN_RFC2133).
    let v6b = h.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        e(h.bind(v6b, SocketAddr::new(A.into(), 84))),
        Err(errno::EINVAL)
    );
    assert_eq!(e(h.bind(v6b, lacks)), Err(errno::EADDRNOTAVAIL));
}

/// __inet_stream_connect: an address short of sa_family is EINVAL, AF_UNSPEC
/// disconnects (tcp_disconnect), the state decides before tcp_v4_connect reads the
/// address; after a disconnect the socket connects again.
#[test]
fn connect_reads_the_state_first_and_af_unspec_disconnects() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let e = |r: Result<(), Errno>| r.map_err(|e| e.0);
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    // SO_REUSEADDR: the children it accepted keep port 80 when it listens again.
    let on = 1i32.to_ne_bytes();
    b.setsockopt(T0, l, SOL_SOCKET, SO_REUSEADDR, &on).unwrap();
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    // On a listener: EISCONN whatever the address, AF_UNSPEC stops it.
    assert_eq!(
        e(b.connect_user(T0, l, &raw(1, 16, [0; 4], 0))),
        Err(errno::EISCONN)
    );
    assert_eq!(
        e(b.connect_user(T0, l, &raw(AF_INET, 1, [0; 4], 0))),
        Err(errno::EINVAL)
    );
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        e(a.connect_user(T0, c, &raw(AF_UNSPEC, 2, [0; 4], 0))),
        Ok(()),
        "nothing to undo"
    );
    assert_eq!(
        e(a.connect_user(T0, c, &raw(AF_INET, 8, B.octets(), 80))),
        Err(errno::EINVAL)
    );
    assert_eq!(
        e(a.connect_user(T0, c, &raw(1, 16, B.octets(), 80))),
        Err(errno::EAFNOSUPPORT)
    );
    let to = raw(AF_INET, 16, B.octets(), 80);
    assert_eq!(e(a.connect_user(T0, c, &to)), Err(errno::EINPROGRESS));
    run(&mut a, &mut b, T0);
    assert_eq!(e(a.connect_user(T0, c, &to)), Ok(()));
    assert_eq!(
        e(a.connect_user(T0, c, &raw(1, 16, [0; 4], 0))),
        Err(errno::EISCONN)
    );
    let (s, _) = b.accept(l).unwrap();
    // AF_UNSPEC on the connection: a reset (tcp_need_reset), and the socket is free.
    assert_eq!(
        e(a.connect_user(T0, c, &raw(AF_UNSPEC, 16, [0; 4], 0))),
        Ok(())
    );
    run(&mut a, &mut b, T0);
    let mut buf = [0u8; 4];
    assert_eq!(b.recv(T0, s, &mut buf, 0), Err(Errno(errno::ECONNRESET)));
    // tcp_disconnect's sk_err: POLLERR, then reported once (SO_ERROR, a read or a
    // send), then TCP_CLOSE's answers.
    assert_eq!(a.poll_mask(c).unwrap() & POLLERR, POLLERR);
    assert_eq!(a.send(T0, c, b"x", 0), Err(Errno(errno::ECONNRESET)));
    assert_eq!(
        a.send(T0, c, b"x", 0),
        Err(Errno(errno::EPIPE)),
        "TCP_CLOSE"
    );
    assert_eq!(a.recv(T0, c, &mut buf, 0), Err(Errno(errno::ENOTCONN)));
    assert_eq!(a.poll_mask(c).unwrap() & POLLERR, 0);
    assert_eq!(e(a.connect_user(T0, c, &to)), Err(errno::EINPROGRESS));
    run(&mut a, &mut b, T0);
    assert_eq!(e(a.connect_user(T0, c, &to)), Ok(()));
    assert!(b.accept(l).is_ok());
    // SYN-SENT: no reset, but ECONNRESET for the caller (SO_ERROR reads it once).
    let c2 = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(e(a.connect_user(T0, c2, &to)), Err(errno::EINPROGRESS));
    while let Some(tx) = a.poll_transmit(T0) {
        a.handle_tx_complete(T0, tx.token); // the SYN, lost
    }
    assert_eq!(
        e(a.connect_user(T0, c2, &raw(AF_UNSPEC, 2, [0; 4], 0))),
        Ok(())
    );
    assert!(a.poll_transmit(T0).is_none(), "no reset from SYN-SENT");
    let mut v = [0u8; 4];
    assert_eq!(a.getsockopt(T0, c2, SOL_SOCKET, SO_ERROR, &mut v), Ok(4));
    assert_eq!(i32::from_ne_bytes(v), errno::ECONNRESET);
    assert_eq!(a.getsockopt(T0, c2, SOL_SOCKET, SO_ERROR, &mut v), Ok(4));
    assert_eq!(i32::from_ne_bytes(v), 0);
    assert_eq!(a.recv(T0, c2, &mut buf, 0), Err(Errno(errno::ENOTCONN)));
    // The listener stopped by AF_UNSPEC accepts no more and may listen again.
    assert_eq!(
        e(b.connect_user(T0, l, &raw(AF_UNSPEC, 2, [0; 4], 0))),
        Ok(())
    );
    assert_eq!(b.accept(l).map(|_| ()), Err(Errno(errno::EINVAL)));
    assert_eq!(e(b.listen(l, 8)), Ok(()));
}

/// tcp_sendmsg_locked reads a send's destination only for Fast Open
/// (tcp_sendmsg_fastopen: AF_UNSPEC is EOPNOTSUPP), where __inet_stream_connect
/// finds one short of sa_family EINVAL, then lets the state answer before
/// tcp_v4_connect/tcp_v6_connect read the address; a deferred connect (DEFER_CONNECT)
/// sends its SYN before the length is checked.
#[test]
fn send_destination_is_read_for_fast_open_only() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let e = |r: Result<usize, Errno>| r.map_err(|e| e.0);
    let to = |u: UserSockAddr| SendTo::Name(u);
    let fo = MSG_FASTOPEN | MSG_DONTWAIT;
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let unix = to(raw(1, 16, B.octets(), 80));
    assert_eq!(e(a.sendto(T0, c, b"x", 0, unix)), Err(errno::EPIPE));
    let cases = [
        (raw(AF_UNSPEC, 16, [0; 4], 0), errno::EOPNOTSUPP),
        (raw(AF_UNSPEC, 1, [0; 4], 0), errno::EINVAL),
        (raw(AF_INET, 0, [0; 4], 0), errno::EINVAL),
        (raw(AF_INET, 15, B.octets(), 80), errno::EINVAL),
        (raw(1, 16, B.octets(), 80), errno::EAFNOSUPPORT),
    ];
    for (u, want) in cases {
        assert_eq!(e(a.sendto(T0, c, b"x", fo, to(u))), Err(want), "{u:?}");
    }
    assert_eq!(
        e(a.sendto(T0, c, b"x", fo, SendTo::None)),
        Err(errno::EINVAL)
    );
    let v6 = a.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    let v4 = to(raw(AF_INET, 16, B.octets(), 80));
    assert_eq!(
        e(a.sendto(T0, v6, b"x", fo, v4)),
        Err(errno::EINVAL),
        "16 < 24"
    );
    let v4 = to(raw(AF_INET, 24, B.octets(), 80));
    assert_eq!(e(a.sendto(T0, v6, b"x", fo, v4)), Err(errno::EAFNOSUPPORT));
    // Connecting: the state answers, the address is not read.
    let peer = raw(AF_INET, 16, B.octets(), 80);
    assert_eq!(
        e(a.sendto(T0, c, b"x", fo, to(peer))),
        Err(errno::EINPROGRESS)
    );
    assert_eq!(e(a.sendto(T0, c, b"x", fo, unix)), Err(errno::EALREADY));
    let short = to(raw(AF_INET, 1, [0; 4], 0));
    assert_eq!(e(a.sendto(T0, c, b"x", fo, short)), Err(errno::EINVAL));
    // TCP_FASTOPEN_CONNECT (deferred without a cookie: TCP_FASTOPEN_NO_COOKIE): the
    // first write sends the SYN, then the length fails.
    let d = deferred_no_cookie(&mut a);
    let empty = to(UserSockAddr::default());
    assert_eq!(
        e(a.sendto(T0, d, b"x", MSG_DONTWAIT, empty)),
        Err(errno::EINVAL)
    );
    let syns = deliver(&mut a, &mut b, T0);
    assert_eq!(syns.len(), 2, "c's SYN and d's");
}

/// A Fast Open send from a buffer that faults connects all the same
/// (`tcp_send_syn_data`'s fallback): `EINPROGRESS` non-blocking, `EAGAIN` for a
/// blocking caller to wait; the first write after `TCP_FASTOPEN_CONNECT` too.
/// Without Fast Open the state answers first (`EPIPE` unconnected), then `EFAULT`.
#[test]
fn a_faulting_fast_open_send_connects() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let e = |r: Result<usize, Errno>| r.map_err(|e| e.0);
    let peer = SendTo::Name(raw(AF_INET, 16, B.octets(), 80));
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(e(a.sendmsg_fault(T0, c, 9, 0, peer)), Err(errno::EPIPE));
    let fo = MSG_FASTOPEN | MSG_DONTWAIT;
    assert_eq!(
        e(a.sendmsg_fault(T0, c, 9, fo, peer)),
        Err(errno::EINPROGRESS)
    );
    let blocking = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        e(a.sendmsg_fault(T0, blocking, 9, MSG_FASTOPEN, peer)),
        Err(errno::EAGAIN)
    );
    let d = deferred_no_cookie(&mut a);
    assert_eq!(
        e(a.sendmsg_fault(T0, d, 9, MSG_DONTWAIT, SendTo::None)),
        Err(errno::EINPROGRESS)
    );
    let syns = deliver(&mut a, &mut b, T0);
    assert_eq!(syns.len(), 3, "c's SYN, the blocking one's and d's");
    // The deferred SYN went: d connects as any socket now.
    assert_eq!(
        e(a.sendmsg_fault(T0, d, 9, MSG_DONTWAIT, SendTo::None)),
        Err(errno::EAGAIN)
    );
}

/// A read or readv of nothing is 0 whatever the state (sock_read_iter, vfs_readv),
/// a writev of nothing too (vfs_writev); write(2) of nothing reaches the socket.
#[test]
fn io_of_nothing_is_zero_after_the_files_checks() {
    let mut h = host(A, 1);
    let fd = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(h.io_of_nothing(fd, true), Ok(0));
    assert_eq!(h.io_of_nothing(fd, false), Ok(0));
    assert_eq!(h.send(T0, fd, b"", 0), Err(Errno(errno::EPIPE)));
    assert_eq!(h.io_of_nothing(fd + 50, true), Err(Errno(errno::EBADF)));
    let (r, w) = h.pipe(0).unwrap();
    assert_eq!(h.io_of_nothing(r, true), Ok(0));
    assert_eq!(
        h.io_of_nothing(w, true),
        Err(Errno(errno::EBADF)),
        "FMODE_READ"
    );
    assert_eq!(
        h.io_of_nothing(r, false),
        Err(Errno(errno::EBADF)),
        "FMODE_WRITE"
    );
}

/// __sys_socket_create and __sock_create: unknown flags or a type past SOCK_MAX are
/// EINVAL before the family; inet_create: a protocol out of range is EINVAL.
#[test]
fn socket_argument_errors_in_linux_order() {
    let mut h = host(A, 1);
    let e = |r: Result<Fd, Errno>| r.map(|_| ()).map_err(|e| e.0);
    assert_eq!(e(h.socket(AF_INET, -1, 0)), Err(errno::EINVAL));
    assert_eq!(e(h.socket(99, -1, 0)), Err(errno::EINVAL));
    assert_eq!(e(h.socket(AF_INET, 11, 0)), Err(errno::EINVAL));
    assert_eq!(e(h.socket(99, SOCK_STREAM, 0)), Err(errno::EAFNOSUPPORT));
    assert_eq!(e(h.socket(AF_INET, SOCK_STREAM, -1)), Err(errno::EINVAL));
    assert_eq!(
        e(h.socket(AF_INET, SOCK_STREAM, IPPROTO_MAX)),
        Err(errno::EINVAL)
    );
    assert_eq!(
        e(h.socket(AF_INET, SOCK_STREAM, 17)),
        Err(errno::EPROTONOSUPPORT)
    );
    assert_eq!(
        e(h.socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 6)),
        Ok(())
    );
}

fn int_opt(h: &mut Host, fd: Fd, level: i32, name: i32) -> i32 {
    let mut v = [0u8; 4];
    assert_eq!(h.getsockopt(T0, fd, level, name, &mut v), Ok(4));
    i32::from_ne_bytes(v)
}

fn port(h: &Host, fd: Fd) -> u16 {
    h.local_addr(fd).unwrap().unwrap().port()
}

/// Hosts A and B (nothing listening on B:80) and a socket on A with TCP_MAXSEG 1000.
fn mss_1000_client() -> (Host, Host, Fd) {
    let (mut a, b) = (host(A, 1), host(B, 2));
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let mss = 1000i32.to_ne_bytes();
    a.setsockopt(T0, c, SOL_TCP, TCP_MAXSEG, &mss).unwrap();
    (a, b, c)
}

/// A connect refused by a reset: tcp_done frees the port unless the user bound it
/// (tcp_set_state's inet_put_port without SOCK_BINDPORT_LOCK); the connect that
/// reports the error is __inet_stream_connect's sock_error path, tcp_disconnect:
/// its option resets, the source address unless the user bound it
/// (inet_reset_saddr), no error left; getsockname still names the old port, the
/// next connect takes a new one, bind is allowed again (inet_num 0).
#[test]
fn refused_connect_is_disconnected_and_frees_its_port() {
    let (mut a, mut b, c) = mss_1000_client();
    let to = SocketAddr::new(B.into(), 80);
    let e = |r: Result<(), Errno>| r.map_err(|e| e.0);
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINPROGRESS));
    let p1 = port(&a, c);
    run(&mut a, &mut b, T0);
    assert_eq!(
        a.local_addr(c).unwrap(),
        Some(SocketAddr::new(A.into(), p1))
    );
    assert_eq!(int_opt(&mut a, c, SOL_TCP, TCP_MAXSEG), 1000, "not yet");
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::ECONNREFUSED));
    assert_eq!(int_opt(&mut a, c, SOL_SOCKET, SO_ERROR), 0);
    assert_eq!(int_opt(&mut a, c, SOL_TCP, TCP_MAXSEG), 988, "mss_cache");
    let any: SocketAddr = format!("0.0.0.0:{p1}").parse().unwrap();
    assert_eq!(a.local_addr(c).unwrap(), Some(any));
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINPROGRESS));
    let p2 = port(&a, c);
    assert_ne!(p2, p1, "a new port");
    run(&mut a, &mut b, T0);
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::ECONNREFUSED));
    assert_eq!(e(a.bind(c, "0.0.0.0:7000".parse().unwrap())), Ok(()));
    // A bound address stays, a port bound by bind(2)'s own pick does not.
    let d = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    a.bind(d, SocketAddr::new(A.into(), 0)).unwrap();
    let pb = port(&a, d);
    assert_eq!(e(a.connect(T0, d, to)), Err(errno::EINPROGRESS));
    assert_eq!(port(&a, d), pb);
    run(&mut a, &mut b, T0);
    assert_eq!(e(a.connect(T0, d, to)), Err(errno::ECONNREFUSED));
    assert_eq!(
        a.local_addr(d).unwrap(),
        Some(SocketAddr::new(A.into(), pb))
    );
    assert_eq!(e(a.connect(T0, d, to)), Err(errno::EINPROGRESS));
    assert_eq!(a.local_addr(d).unwrap().unwrap().ip(), IpAddr::from(A));
    assert_ne!(port(&a, d), pb);
    // An explicit port stays the socket's (SOCK_BINDPORT_LOCK).
    let f = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    a.bind(f, "0.0.0.0:5555".parse().unwrap()).unwrap();
    assert_eq!(e(a.connect(T0, f, to)), Err(errno::EINPROGRESS));
    run(&mut a, &mut b, T0);
    assert_eq!(e(a.connect(T0, f, to)), Err(errno::ECONNREFUSED));
    assert_eq!(
        a.local_addr(f).unwrap(),
        Some("0.0.0.0:5555".parse().unwrap())
    );
    assert_eq!(e(a.connect(T0, f, to)), Err(errno::EINPROGRESS));
    assert_eq!(port(&a, f), 5555);
}

/// inet_shutdown of an SS_CONNECTING socket: in SYN-SENT it is tcp_disconnect
/// (its resets, ECONNRESET, SS_UNCONNECTED: the next connect is new); in CLOSE
/// (the connect failed, not yet reported) ENOTCONN and SS_DISCONNECTING (connect
/// EINVAL until AF_UNSPEC); once established, SS_CONNECTED (connect EISCONN).
#[test]
fn shutdown_of_a_connecting_socket_by_state() {
    let (mut a, mut b, c) = mss_1000_client();
    let to = SocketAddr::new(B.into(), 80);
    let e = |r: Result<(), Errno>| r.map_err(|e| e.0);
    let zero = 0i32.to_ne_bytes();
    a.setsockopt(T0, c, SOL_TCP, TCP_QUICKACK, &zero).unwrap();
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINPROGRESS));
    let p1 = port(&a, c);
    assert_eq!(e(a.shutdown(T0, c, SHUT_WR)), Ok(()));
    assert!(a.poll_transmit(T0).is_some(), "the SYN");
    assert!(a.poll_transmit(T0).is_none(), "no FIN, no RST");
    assert_eq!(int_opt(&mut a, c, SOL_SOCKET, SO_ERROR), errno::ECONNRESET);
    assert_eq!(int_opt(&mut a, c, SOL_TCP, TCP_MAXSEG), 988);
    assert_eq!(int_opt(&mut a, c, SOL_TCP, TCP_QUICKACK), 1);
    let any: SocketAddr = format!("0.0.0.0:{p1}").parse().unwrap();
    assert_eq!(a.local_addr(c).unwrap(), Some(any));
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINPROGRESS));
    run(&mut a, &mut b, T0);
    // Refused, not yet reported: SS_DISCONNECTING.
    assert_eq!(e(a.shutdown(T0, c, SHUT_WR)), Err(errno::ENOTCONN));
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINVAL));
    assert_eq!(
        int_opt(&mut a, c, SOL_SOCKET, SO_ERROR),
        errno::ECONNREFUSED
    );
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINVAL));
    let unspec = UserSockAddr::from_bytes(&[0; 16]).unwrap();
    assert_eq!(e(a.connect_user(T0, c, &unspec)), Ok(()));
    // Established but not asked again: shutdown makes it SS_CONNECTED.
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    b.bind(l, to).unwrap();
    b.listen(l, 8).unwrap();
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINPROGRESS));
    run(&mut a, &mut b, T0);
    assert_eq!(e(a.shutdown(T0, c, SHUT_WR)), Ok(()));
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EISCONN));
}
