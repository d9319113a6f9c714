//! `IP_RECVERR` and `IPV6_RECVERR` on TCP: `tcp_v4_err`'s last branch (a hard
//! error on a synchronized connection with the option, else a soft one), the
//! options themselves, and the offender address `ip_recv_error` reports.

use super::consts::*;
use super::tests::{host, A, B};
use super::tests_sock::run;
use super::*;
use crate::stack::icmp_tests::{icmp4, in_ipv4};
use std::net::Ipv4Addr;

const T0: Instant = Instant::ZERO;
const ROUTER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);

/// An established connection from A (fd) to B:80, with `IP_RECVERR` set to
/// `recverr` on A's socket before it connects, and `TCP_NODELAY`.
fn established(recverr: bool) -> (Host, Host, Fd) {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = a.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
    let on = (recverr as i32).to_ne_bytes();
    a.setsockopt(T0, c, SOL_IP, IP_RECVERR, &on).unwrap();
    // Each small write goes out at once, unacknowledged data or not.
    a.setsockopt(T0, c, SOL_TCP, TCP_NODELAY, &1i32.to_ne_bytes())
        .unwrap();
    a.connect(T0, c, SocketAddr::new(B.into(), 80)).unwrap_err();
    run(&mut a, &mut b, T0);
    (a, b, c)
}

/// A writes a segment that is not delivered; an ICMP unreachable of `code` from
/// the router quotes it.
fn unreachable_for_next_write(a: &mut Host, c: Fd, code: u8) {
    assert_eq!(a.send(T0, c, b"data", 0), Ok(4));
    let tx = a.poll_transmit(T0).expect("the data segment");
    let p = &tx.packet[20..];
    let seq = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
    a.handle_tx_complete(T0, tx.token);
    let (local, remote) = (
        a.local_addr(c).unwrap().unwrap(),
        a.peer_addr(c).unwrap().unwrap(),
    );
    let m = icmp4(3, code, local, remote, seq);
    a.handle_packet(
        T0,
        &in_ipv4(ROUTER.into(), A.into(), &m),
        RxChecksum::Verify,
    );
}

fn pollerr(a: &mut Host, c: Fd) -> bool {
    let mut fds = [PollFd {
        fd: c,
        events: POLLIN | POLLOUT,
        revents: 0,
    }];
    a.poll(&mut fds);
    fds[0].revents & POLLERR != 0
}

#[test]
fn with_ip_recverr_a_synchronized_error_is_hard_once() {
    let (mut a, _b, c) = established(true);
    unreachable_for_next_write(&mut a, c, 3);
    assert!(pollerr(&mut a, c));
    let mut buf = [0u8; 16];
    assert_eq!(a.recv(T0, c, &mut buf, 0), err(errno::ECONNREFUSED));
    assert_eq!(a.recv(T0, c, &mut buf, 0), err(errno::EAGAIN));
    assert!(!pollerr(&mut a, c), "taken by the read");
    // No error-queue entry: ip_icmp_error is for SYN-SENT and SYN-RECV.
    assert_eq!(
        a.recvmsg(T0, c, &mut buf, MSG_ERRQUEUE).map(|m| m.len),
        err(errno::EAGAIN)
    );
    // The next write takes a second one; the connection goes on.
    unreachable_for_next_write(&mut a, c, 1);
    assert_eq!(a.send(T0, c, b"more", 0), err(errno::EHOSTUNREACH));
    assert_eq!(a.send(T0, c, b"more", 0), Ok(4));
    assert_eq!(
        a.stack().state(a.conn(c).unwrap().unwrap()),
        Ok(TcpState::Established)
    );
}

#[test]
fn without_ip_recverr_it_stays_soft() {
    let (mut a, _b, c) = established(false);
    unreachable_for_next_write(&mut a, c, 3);
    assert!(!pollerr(&mut a, c));
    let mut buf = [0u8; 16];
    assert_eq!(a.recv(T0, c, &mut buf, 0), err(errno::EAGAIN));
    assert_eq!(a.send(T0, c, b"more", 0), Ok(4));
    let mut out = [0u8; 4];
    a.getsockopt(T0, c, SOL_SOCKET, SO_ERROR, &mut out).unwrap();
    assert_eq!(i32::from_ne_bytes(out), errno::ECONNREFUSED);
}

#[test]
fn the_options_and_the_families_they_belong_to() {
    let mut a = host(A, 1);
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let mut out = [0u8; 4];
    a.setsockopt(T0, c, SOL_IP, IP_RECVERR, &[1]).unwrap();
    a.getsockopt(T0, c, SOL_IP, IP_RECVERR, &mut out).unwrap();
    assert_eq!(i32::from_ne_bytes(out), 1);
    // IPV6_RECVERR is an IPv6 socket's (ip_setsockopt: ENOPROTOOPT).
    let one = 1i32.to_ne_bytes();
    assert_eq!(
        a.setsockopt(T0, c, SOL_IPV6, IPV6_RECVERR, &one),
        err(errno::ENOPROTOOPT)
    );
    let c6 = a.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    a.setsockopt(T0, c6, SOL_IPV6, IPV6_RECVERR, &one).unwrap();
    a.getsockopt(T0, c6, SOL_IPV6, IPV6_RECVERR, &mut out)
        .unwrap();
    assert_eq!(i32::from_ne_bytes(out), 1);
    a.getsockopt(T0, c6, SOL_IP, IP_RECVERR, &mut out).unwrap();
    assert_eq!(i32::from_ne_bytes(out), 0, "each family its own flag");
}

/// A failed connect's entry: the router as offender, a `sockaddr_in` on an
/// `AF_INET` socket; turning `IP_RECVERR` off purges it.
#[test]
fn the_offender_is_the_router_and_a_zero_purges_the_queue() {
    for purge in [false, true] {
        let mut a = host(A, 1);
        let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        a.fcntl_setfl(c, O_NONBLOCK).unwrap();
        a.connect(T0, c, SocketAddr::new(B.into(), 80)).unwrap_err();
        let syn = a.poll_transmit(T0).expect("SYN");
        let p = &syn.packet[20..];
        let isn = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
        a.handle_tx_complete(T0, syn.token);
        let local = a.local_addr(c).unwrap().unwrap();
        let m = icmp4(3, 1, local, SocketAddr::new(B.into(), 80), isn);
        a.handle_packet(
            T0,
            &in_ipv4(ROUTER.into(), A.into(), &m),
            RxChecksum::Verify,
        );
        if purge {
            a.setsockopt(T0, c, SOL_IP, IP_RECVERR, &0i32.to_ne_bytes())
                .unwrap();
        }
        let mut buf = [0u8; 0];
        let r = a.recvmsg(T0, c, &mut buf, MSG_ERRQUEUE);
        if purge {
            assert_eq!(r.map(|m| m.len), err(errno::EAGAIN));
            continue;
        }
        let m = r.unwrap();
        assert_eq!(m.flags, MSG_ERRQUEUE | MSG_TRUNC, "8 quoted bytes");
        let cm = &m.cmsgs[0];
        assert_eq!((cm.level, cm.kind, cm.data.len()), (SOL_IP, IP_RECVERR, 32));
        assert_eq!(
            u16::from_ne_bytes([cm.data[16], cm.data[17]]),
            AF_INET as u16
        );
        assert_eq!(&cm.data[20..24], &ROUTER.octets());
    }
}
