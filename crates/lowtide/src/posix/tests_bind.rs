//! The port rules of `bind(2)`, `listen(2)` and `connect(2)`: each branch of
//! `inet_bind_conflict`, `inet_csk_find_open_port` and `__inet_hash_connect`'s
//! bound-bucket skip.

use super::bind::{bind_conflict, Asker};
use super::consts::*;
use super::tests::{host, A, B};
use super::tests_sock::run;
use super::*;
use crate::stack::PortOwner;
use std::net::Ipv4Addr;

const T0: Instant = Instant::ZERO;

fn sa(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::new(ip.into(), port)
}

fn sock(h: &mut Host, reuse: bool, reuseport: bool) -> Fd {
    let fd = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let on = |b: bool| (b as i32).to_ne_bytes();
    h.setsockopt(T0, fd, SOL_SOCKET, SO_REUSEADDR, &on(reuse))
        .unwrap();
    h.setsockopt(T0, fd, SOL_SOCKET, SO_REUSEPORT, &on(reuseport))
        .unwrap();
    fd
}

fn owner(reuse: bool, reuseport: bool, listening: bool, timewait: bool) -> PortOwner {
    PortOwner {
        local: sa(A, 80),
        reuse,
        reuseport,
        v6only: false,
        bound_dev_if: 0,
        listening,
        timewait,
        handle: None,
    }
}

fn asker(reuse: bool, reuseport: bool) -> Asker {
    Asker {
        reuse,
        reuseport,
        v6only: false,
        bound_dev_if: 0,
    }
}

#[test]
fn inet_bind_conflict_branches() {
    // Both SO_REUSEADDR, sk2 not listening: shared with relax (an explicit port),
    // not without (bind(0)'s first search), nor by ip_autobind_reuse's relaxed
    // search when both also set SO_REUSEPORT.
    let o = owner(true, false, false, true);
    assert!(!bind_conflict(asker(true, false), &o, true, true));
    assert!(bind_conflict(asker(true, false), &o, false, false));
    assert!(!bind_conflict(asker(true, false), &o, true, false));
    let both = owner(true, true, false, false);
    assert!(bind_conflict(asker(true, true), &both, true, false));
    // sk2 listens: SO_REUSEADDR is not enough, SO_REUSEPORT on both is.
    let l = owner(true, false, true, false);
    assert!(bind_conflict(asker(true, false), &l, true, true));
    let lp = owner(false, true, true, false);
    assert!(!bind_conflict(asker(false, true), &lp, true, true));
    // SO_REUSEPORT is for explicit ports only, and needs both sockets.
    assert!(bind_conflict(asker(false, true), &lp, false, false));
    assert!(bind_conflict(asker(false, false), &lp, true, true));
    // Neither option: a conflict, TIME-WAIT or not.
    assert!(bind_conflict(
        asker(false, false),
        &owner(false, false, false, true),
        true,
        true
    ));
    assert!(bind_conflict(
        asker(true, false),
        &owner(false, false, false, true),
        true,
        true
    ));
}

/// A connection from A:`port` to B:80, closed by A first: A's side is in
/// TIME-WAIT. `reuse` is the client socket's SO_REUSEADDR.
fn time_wait_on(port: u16, reuse: bool) -> (Host, Host) {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    b.bind(l, sa(B, 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = sock(&mut a, reuse, false);
    a.bind(c, sa(A, port)).unwrap();
    assert_eq!(a.connect(T0, c, sa(B, 80)), err(errno::EINPROGRESS));
    run(&mut a, &mut b, T0);
    let (s, _) = b.accept(l).unwrap();
    a.close(T0, c).unwrap();
    run(&mut a, &mut b, T0);
    b.close(T0, s).unwrap();
    run(&mut a, &mut b, T0);
    assert_eq!(
        a.stack().timewait_state(sa(A, port), sa(B, 80)),
        Some(TcpState::TimeWait)
    );
    (a, b)
}

#[test]
fn a_time_wait_socket_holds_its_port() {
    let (mut a, _b) = time_wait_on(40000, false);
    let fd = sock(&mut a, false, false);
    assert_eq!(a.bind(fd, sa(A, 40000)), err(errno::EADDRINUSE));
    // SO_REUSEADDR on the new socket alone is not enough: the timewait socket
    // keeps its connection's sk_reuse (tw_reuse).
    let fd = sock(&mut a, true, false);
    assert_eq!(a.bind(fd, sa(A, 40000)), err(errno::EADDRINUSE));
    // The wildcard overlaps it too; another port does not.
    let fd = sock(&mut a, false, false);
    assert_eq!(
        a.bind(fd, sa(Ipv4Addr::UNSPECIFIED, 40000)),
        err(errno::EADDRINUSE)
    );
    assert_eq!(a.bind(fd, sa(A, 40002)), Ok(()));

    let (mut a, _b) = time_wait_on(40000, true);
    let fd = sock(&mut a, false, false);
    assert_eq!(a.bind(fd, sa(A, 40000)), err(errno::EADDRINUSE));
    let fd = sock(&mut a, true, false);
    assert_eq!(a.bind(fd, sa(A, 40000)), Ok(()), "both SO_REUSEADDR");
}

#[test]
fn an_orphan_still_closing_holds_its_port() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    b.bind(l, sa(B, 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = sock(&mut a, false, false);
    a.bind(c, sa(A, 40000)).unwrap();
    a.connect(T0, c, sa(B, 80)).unwrap_err();
    run(&mut a, &mut b, T0);
    // Closed with its FIN unanswered (not delivered): FIN-WAIT-1, an orphan.
    a.close(T0, c).unwrap();
    let fd = sock(&mut a, false, false);
    assert_eq!(a.bind(fd, sa(A, 40000)), err(errno::EADDRINUSE));
}

#[test]
fn reuseaddr_sockets_share_until_one_listens() {
    let mut a = host(A, 1);
    let (x, y) = (sock(&mut a, true, false), sock(&mut a, true, false));
    a.bind(x, sa(A, 80)).unwrap();
    a.bind(y, sa(A, 80)).unwrap();
    let z = sock(&mut a, false, false);
    assert_eq!(
        a.bind(z, sa(A, 80)),
        err(errno::EADDRINUSE),
        "z has no SO_REUSEADDR"
    );
    a.listen(x, 8).unwrap();
    // inet_csk_listen_start takes the port again as a listener: y listens on it
    // no more, and no new SO_REUSEADDR socket binds it.
    assert_eq!(a.listen(y, 8), err(errno::EADDRINUSE));
    let w = sock(&mut a, true, false);
    assert_eq!(a.bind(w, sa(A, 80)), err(errno::EADDRINUSE));
    // A listener's port is free again once it closes and y leaves.
    a.close(T0, x).unwrap();
    a.close(T0, y).unwrap();
    assert_eq!(a.bind(w, sa(A, 80)), Ok(()));
}

#[test]
fn reuseport_listeners_share_a_port_and_its_syns() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let ls: Vec<Fd> = (0..2).map(|_| sock(&mut b, false, true)).collect();
    for &l in &ls {
        b.bind(l, sa(B, 80)).unwrap();
        b.listen(l, 64).unwrap();
    }
    // A socket without SO_REUSEPORT does not join.
    let other = sock(&mut b, false, false);
    assert_eq!(b.bind(other, sa(B, 80)), err(errno::EADDRINUSE));
    for _ in 0..16 {
        let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        a.connect(T0, c, sa(B, 80)).unwrap_err();
    }
    run(&mut a, &mut b, T0);
    let accepted: Vec<usize> = ls
        .iter()
        .map(|&l| std::iter::from_fn(|| b.accept(l).ok()).count())
        .collect();
    assert_eq!(accepted.iter().sum::<usize>(), 16);
    assert!(
        accepted.iter().all(|&n| n > 0),
        "spread by hash: {accepted:?}"
    );
}

fn port_of(h: &Host, fd: Fd) -> u16 {
    h.local_addr(fd).unwrap().unwrap().port()
}

#[test]
fn bind_zero_takes_an_odd_port_and_reuseaddr_the_lower_half() {
    let mut a = host(A, 1);
    for _ in 0..20 {
        let fd = sock(&mut a, false, false);
        a.bind(fd, sa(A, 0)).unwrap();
        let p = port_of(&a, fd);
        assert!((32768..=60999).contains(&p) && p % 2 == 1, "{p}");
        let fd = sock(&mut a, true, false);
        a.bind(fd, sa(A, 0)).unwrap();
        let p = port_of(&a, fd);
        // half = low + ((high - low) >> 2 << 1), high one past the range.
        assert!((32768..46884).contains(&p) && p % 2 == 1, "{p}");
    }
}

#[test]
fn bind_zero_takes_the_other_parity_then_fails_or_shares_with_autobind_reuse() {
    let mut a = host(A, 1);
    let cfg = a.stack_mut();
    cfg.set_sysctl(T0, "net.ipv4.ip_local_port_range", "40000 40001")
        .unwrap();
    let ports: Vec<u16> = (0..2)
        .map(|_| {
            let fd = sock(&mut a, true, false);
            a.bind(fd, sa(A, 0)).unwrap();
            port_of(&a, fd)
        })
        .collect();
    assert_eq!(ports, [40001, 40000], "odd first, then even");
    let fd = sock(&mut a, true, false);
    assert_eq!(a.bind(fd, sa(A, 0)), err(errno::EADDRINUSE));
    a.stack_mut()
        .set_sysctl(T0, "net.ipv4.ip_autobind_reuse", "1")
        .unwrap();
    assert_eq!(
        a.bind(fd, sa(A, 0)),
        Ok(()),
        "shared with SO_REUSEADDR sockets"
    );
    let fd = sock(&mut a, false, false);
    assert_eq!(
        a.bind(fd, sa(A, 0)),
        err(errno::EADDRINUSE),
        "not without it"
    );
}

#[test]
fn bind_zero_passes_over_reserved_ports() {
    let mut a = host(A, 1);
    let s = a.stack_mut();
    s.set_sysctl(T0, "net.ipv4.ip_local_port_range", "40000 40003")
        .unwrap();
    s.set_sysctl(T0, "net.ipv4.ip_local_reserved_ports", "40001,40003")
        .unwrap();
    for _ in 0..2 {
        let fd = sock(&mut a, false, false);
        a.bind(fd, sa(A, 0)).unwrap();
        assert_eq!(port_of(&a, fd) % 2, 0);
    }
    let fd = sock(&mut a, false, false);
    assert_eq!(a.bind(fd, sa(A, 0)), err(errno::EADDRINUSE));
}

#[test]
fn connect_passes_over_a_port_a_socket_bound() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    a.stack_mut()
        .set_sysctl(T0, "net.ipv4.ip_local_port_range", "40000 40001")
        .unwrap();
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    b.bind(l, sa(B, 80)).unwrap();
    b.listen(l, 8).unwrap();
    let bound = sock(&mut a, false, false);
    a.bind(bound, sa(A, 40001)).unwrap();
    let c1 = sock(&mut a, false, false);
    a.connect(T0, c1, sa(B, 80)).unwrap_err();
    assert_eq!(port_of(&a, c1), 40000);
    // The only other port is bound: no 4-tuple is left for this peer.
    let c2 = sock(&mut a, false, false);
    assert_eq!(a.connect(T0, c2, sa(B, 80)), err(errno::EADDRNOTAVAIL));
    // Once the bound socket closes, its port serves connect again.
    a.close(T0, bound).unwrap();
    assert_eq!(a.connect(T0, c2, sa(B, 80)), err(errno::EINPROGRESS));
    assert_eq!(port_of(&a, c2), 40001);
    run(&mut a, &mut b, T0);
}

#[test]
fn reserved_ports_sysctl_parses_lists_and_ranges() {
    let mut c = crate::Config::default();
    c.set("net.ipv4.ip_local_reserved_ports", "8080, 9000-9002")
        .unwrap();
    assert_eq!(c.ip_local_reserved_ports, [[8080, 8080], [9000, 9002]]);
    assert!(c.is_local_reserved_port(9001) && !c.is_local_reserved_port(9003));
    assert!(c.set("net.ipv4.ip_local_reserved_ports", "9-3").is_err());
    c.set("net.ipv4.ip_local_reserved_ports", "").unwrap();
    assert!(c.ip_local_reserved_ports.is_empty());
}
