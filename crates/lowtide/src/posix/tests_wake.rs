//! The socket layer's tests for the wakeups Linux's TCP gives a socket's waiters
//! outside the data and write-space paths (`sk_state_change` in FIN-WAIT-1,
//! `tcp_disconnect`'s `sk_error_report`), for the ones it does not give (a sysctl
//! write), and for where the send buffer grows (`tcp_check_space` after the push).

use super::consts::*;
use super::tests::{host, A, B};
use super::tests_sock::{deliver, run};
use super::*;

const T0: Instant = Instant::ZERO;

/// A listener on B:80 (made after `sysctls` are set on B) and a client on A,
/// connected; the accepted socket on B.
fn connected(sysctls: &[(&str, &str)]) -> (Host, Host, Fd, Fd) {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    for (k, v) in sysctls {
        b.stack_mut().set_sysctl(T0, k, v).unwrap();
    }
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let to = SocketAddr::new(B.into(), 80);
    assert_eq!(a.connect(T0, c, to), Err(Errno(errno::EINPROGRESS)));
    run(&mut a, &mut b, T0);
    assert_eq!(a.connect(T0, c, to), Ok(()));
    let s = b.accept(l).unwrap().0;
    (a, b, c, s)
}

/// An epoll instance with one `EPOLLET` item for `fd`, its first report taken.
fn edge(h: &mut Host, fd: Fd, events: u32) -> Fd {
    let ep = h.epoll_create(1).unwrap();
    h.epoll_ctl(ep, EPOLL_CTL_ADD, fd, events | EPOLLET, 1)
        .unwrap();
    h.epoll_wait(ep, 4).unwrap();
    assert!(h.epoll_wait(ep, 4).unwrap().is_empty());
    ep
}

/// tcp_rcv_state_process, FIN-WAIT-1: the ACK of the FIN of a socket shut with
/// shutdown(2) (not orphaned) calls sk_state_change, a wakeup without a key, so an
/// EPOLLET item reports again though its mask is unchanged.
#[test]
fn fin_wait2_wakes_a_live_socket() {
    let (mut a, mut b, _c, s) = connected(&[]);
    let ep = edge(&mut b, s, POLLOUT);
    b.shutdown(T0, s, SHUT_WR).unwrap();
    assert_eq!(
        b.epoll_wait(ep, 4).unwrap()[0].events,
        POLLOUT,
        "shutdown's"
    );
    assert!(b.epoll_wait(ep, 4).unwrap().is_empty());
    deliver(&mut b, &mut a, T0); // the FIN, whose ACK A delays
    let t = a.poll_timeout().unwrap();
    a.handle_timeout(t);
    deliver(&mut a, &mut b, t);
    assert_eq!(b.tcp_info(T0, s).unwrap().state, "FIN_WAIT2");
    assert_eq!(
        b.epoll_wait(ep, 4).unwrap()[0].events,
        POLLOUT,
        "FIN-WAIT-2's"
    );
    assert!(b.epoll_wait(ep, 4).unwrap().is_empty());
}

/// tcp_disconnect (connect(2) with AF_UNSPEC) ends with sk_error_report, keyed
/// EPOLLERR, which every epoll item takes: an EPOLLIN item reports the error and
/// the hangup; a socket that never connected is woken too.
#[test]
fn disconnect_wakes_every_epoll_item() {
    let (mut a, _b, c, _s) = connected(&[]);
    let ep = edge(&mut a, c, POLLIN);
    let unspec = UserSockAddr::from_bytes(&[0; 16]).unwrap();
    a.connect_user(T0, c, &unspec).unwrap();
    assert_eq!(a.epoll_wait(ep, 4).unwrap()[0].events, POLLERR | POLLHUP);
    assert!(a.epoll_wait(ep, 4).unwrap().is_empty());
    let fresh = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let ep2 = edge(&mut a, fresh, POLLOUT);
    a.connect_user(T0, fresh, &unspec).unwrap();
    assert_eq!(a.epoll_wait(ep2, 4).unwrap()[0].events, POLLOUT | POLLHUP);
}

/// Writes until the send buffer is full (`SOCK_NOSPACE` set by the refused write).
fn fill(h: &mut Host, fd: Fd) {
    while h.send(T0, fd, &[7; 100_000], 0).is_ok() {}
    assert_eq!(h.send(T0, fd, &[7; 1], 0), Err(Errno(errno::EAGAIN)));
}

/// A sysctl write wakes nobody: a writer out of room that a higher
/// net.ipv4.tcp_notsent_lowat makes writable is woken by the next tcp_check_space
/// (after an ACK's push), not by the write.
#[test]
fn a_notsent_lowat_sysctl_write_wakes_nobody() {
    let sysctls = [
        ("net.ipv4.tcp_wmem", "4096 262144 4194304"),
        ("net.ipv4.tcp_notsent_lowat", "8000"),
    ];
    let (mut a, mut b, _c, s) = connected(&sysctls);
    let ep = edge(&mut b, s, POLLOUT);
    fill(&mut b, s);
    let lowat = "net.ipv4.tcp_notsent_lowat";
    b.stack_mut().set_sysctl(T0, lowat, "1000000").unwrap();
    assert!(b.epoll_wait(ep, 4).unwrap().is_empty(), "no wakeup");
    assert_eq!(b.poll_mask(s).unwrap() & POLLOUT, POLLOUT, "but writable");
    run(&mut b, &mut a, T0);
    assert_eq!(b.epoll_wait(ep, 4).unwrap()[0].events, POLLOUT, "the ACK's");
}

/// tcp_ack does not call tcp_check_space: the send buffer of a writer out of room
/// grows (tcp_should_expand_sndbuf: the flight below cwnd) only after the push
/// that follows the ACK. The first ACK's push fills cwnd (11) at once, so
/// SO_SNDBUF stays tcp_wmem[1] (tcp_ack's own check would have seen 9 of 11 in
/// flight and grown it to 2 * 11 * 2304).
#[test]
fn the_send_buffer_does_not_grow_in_tcp_ack() {
    let wmem = [("net.ipv4.tcp_wmem", "4096 50000 4194304")];
    let (mut a, mut b, _c, s) = connected(&wmem);
    let sndbuf = |b: &mut Host| {
        let mut v = [0u8; 4];
        b.getsockopt(T0, s, SOL_SOCKET, SO_SNDBUF, &mut v).unwrap();
        i32::from_ne_bytes(v)
    };
    assert_eq!(sndbuf(&mut b), 50000);
    fill(&mut b, s);
    deliver(&mut b, &mut a, T0); // cwnd 10: ten segments
    let ack = a.poll_transmit(T0).expect("the first segment's ACK");
    a.handle_tx_complete(T0, ack.token);
    b.handle_packet(T0, &ack.packet, RxChecksum::Verify);
    assert_eq!(sndbuf(&mut b), 50000, "not grown by tcp_ack");
}
