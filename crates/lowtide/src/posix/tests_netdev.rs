//! `SO_BINDTODEVICE` / `SO_BINDTOIFINDEX`: the option rules of net/core/sock.c and
//! what a bound socket does (stack/netdev.rs): `inet_bind_conflict`'s device
//! test, `inet_lhash2_lookup`'s score and bucket order, `inet_match`, and the
//! route lookup of `connect`.

use super::consts::*;
use super::tests::{host, A, B};
use super::tests_sock::{deliver, run};
use super::*;
use crate::{DEVICE_IFINDEX, LOOPBACK_IFINDEX};

const T0: Instant = Instant::ZERO;

fn set(h: &mut Host, fd: Fd, name: i32, val: &[u8]) -> Result<(), Errno> {
    h.setsockopt(T0, fd, SOL_SOCKET, name, val)
}

fn ifindex(h: &mut Host, fd: Fd) -> i32 {
    let mut out = [0u8; 4];
    h.getsockopt(T0, fd, SOL_SOCKET, SO_BINDTOIFINDEX, &mut out)
        .unwrap();
    i32::from_ne_bytes(out)
}

fn on(v: i32) -> [u8; 4] {
    v.to_ne_bytes()
}

#[test]
fn sock_setbindtodevice_and_bindtoindex_rules() {
    let mut h = host(A, 1);
    let fd = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let e = |r| r == Err(Errno(errno::ENODEV));
    assert!(e(set(&mut h, fd, SO_BINDTODEVICE, b"nosuch0")));
    // Only optlen's bytes count: "et" names no device.
    assert!(e(set(&mut h, fd, SO_BINDTODEVICE, &b"eth0"[..2])));
    set(&mut h, fd, SO_BINDTODEVICE, b"eth0").unwrap();
    assert_eq!(ifindex(&mut h, fd), DEVICE_IFINDEX as i32);
    // A name with its NUL, and one cut at IFNAMSIZ - 1 bytes.
    set(&mut h, fd, SO_BINDTODEVICE, b"lo\0junk").unwrap();
    assert_eq!(ifindex(&mut h, fd), LOOPBACK_IFINDEX as i32);
    set(
        &mut h,
        fd,
        SO_BINDTODEVICE,
        b"eth0\0\0\0\0\0\0\0\0\0\0\0zzzz",
    )
    .unwrap();
    assert_eq!(ifindex(&mut h, fd), DEVICE_IFINDEX as i32);
    // An empty name or no bytes unbind.
    set(&mut h, fd, SO_BINDTODEVICE, b"").unwrap();
    assert_eq!(ifindex(&mut h, fd), 0);
    set(&mut h, fd, SO_BINDTODEVICE, b"lo").unwrap();
    set(&mut h, fd, SO_BINDTODEVICE, b"\0").unwrap();
    assert_eq!(ifindex(&mut h, fd), 0);
    // SO_BINDTOIFINDEX: any index >= 0, an int's bytes.
    set(&mut h, fd, SO_BINDTOIFINDEX, &on(99)).unwrap();
    assert_eq!(ifindex(&mut h, fd), 99);
    let inval = Err(Errno(errno::EINVAL));
    assert_eq!(set(&mut h, fd, SO_BINDTOIFINDEX, &on(-1)), inval);
    assert_eq!(set(&mut h, fd, SO_BINDTOIFINDEX, &[1, 0]), inval);
    assert_eq!(ifindex(&mut h, fd), 99);
}

#[test]
fn sock_getbindtodevice_lengths_and_errors() {
    let mut h = host(A, 1);
    let fd = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let mut out = [0xffu8; 16];
    let get = |h: &mut Host, out: &mut [u8]| h.getsockopt(T0, fd, SOL_SOCKET, SO_BINDTODEVICE, out);
    // Unbound: length 0 whatever the buffer.
    assert_eq!(get(&mut h, &mut out[..2]), Ok(0));
    h.stack_mut().set_device_name("tun0");
    set(&mut h, fd, SO_BINDTODEVICE, b"tun0").unwrap();
    assert_eq!(get(&mut h, &mut out[..15]), Err(Errno(errno::EINVAL)));
    assert_eq!(get(&mut h, &mut out), Ok(5));
    assert_eq!(&out[..5], b"tun0\0");
    // netdev_get_name: ENXIO for an index no device has.
    set(&mut h, fd, SO_BINDTOIFINDEX, &on(7)).unwrap();
    assert_eq!(get(&mut h, &mut out), Err(Errno(errno::ENXIO)));
}

/// A socket bound to B:80 on device `dev` (0: none), with `SO_REUSEPORT` as told.
fn bound(h: &mut Host, dev: i32, reuseport: bool) -> Result<Fd, Errno> {
    let fd = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    set(h, fd, SO_BINDTOIFINDEX, &on(dev)).unwrap();
    set(h, fd, SO_REUSEPORT, &on(reuseport as i32)).unwrap();
    h.bind(fd, SocketAddr::new(B.into(), 80)).map(|()| fd)
}

#[test]
fn inet_bind_conflict_passes_over_other_devices_only() {
    let mut h = host(B, 2);
    let lo = bound(&mut h, LOOPBACK_IFINDEX as i32, false).unwrap();
    h.listen(lo, 4).unwrap();
    let dev = bound(&mut h, DEVICE_IFINDEX as i32, false).unwrap();
    h.listen(dev, 4).unwrap();
    // Unbound, or on the same device: in use.
    let in_use = Err(Errno(errno::EADDRINUSE));
    assert_eq!(bound(&mut h, 0, false), in_use);
    assert_eq!(bound(&mut h, DEVICE_IFINDEX as i32, false), in_use);
    // Another device, even one no device has, does not conflict.
    assert!(bound(&mut h, 9, false).is_ok());
}

/// Connects A to B:80 and returns B's accepted socket, from the listener that
/// took it.
fn connect_to_b(a: &mut Host, b: &mut Host, listeners: &[Fd]) -> Option<(Fd, Fd)> {
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let _ = a.connect(T0, c, SocketAddr::new(B.into(), 80));
    run(a, b, T0);
    listeners
        .iter()
        .find_map(|&l| b.accept(l).ok().map(|(fd, _)| (l, fd)))
}

#[test]
fn a_listener_on_lo_takes_no_syn_from_the_device() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let lo = bound(&mut b, LOOPBACK_IFINDEX as i32, false).unwrap();
    b.listen(lo, 4).unwrap();
    assert_eq!(connect_to_b(&mut a, &mut b, &[lo]), None);
    // A listener on the device takes the next, and its child inherits the device.
    let dev = bound(&mut b, DEVICE_IFINDEX as i32, false).unwrap();
    b.listen(dev, 4).unwrap();
    let (l, child) = connect_to_b(&mut a, &mut b, &[lo, dev]).unwrap();
    assert_eq!(l, dev);
    assert_eq!(ifindex(&mut b, child), DEVICE_IFINDEX as i32);
}

#[test]
fn lhash2_walk_answers_from_the_first_reuseport_group_met() {
    // AF_INET listeners go first in the bucket: the newest one is met first.
    for bound_first in [true, false] {
        let (mut a, mut b) = (host(A, 1), host(B, 2));
        let devs = match bound_first {
            true => [DEVICE_IFINDEX as i32, 0],
            false => [0, DEVICE_IFINDEX as i32],
        };
        let ls: Vec<Fd> = devs
            .iter()
            .map(|&d| {
                let fd = bound(&mut b, d, true).unwrap();
                b.listen(fd, 4).unwrap();
                fd
            })
            .collect();
        let (l, _) = connect_to_b(&mut a, &mut b, &ls).unwrap();
        assert_eq!(l, ls[1], "bound first: {bound_first}");
    }
}

#[test]
fn a_bucket_on_other_devices_falls_through_to_the_wildcard() {
    // The exact address's bucket holds only a listener on lo: the SYN from the
    // device passes it over for the wildcard's (__inet_lookup_listener's second
    // inet_lhash2_lookup).
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let lo = bound(&mut b, LOOPBACK_IFINDEX as i32, true).unwrap();
    b.listen(lo, 4).unwrap();
    let any = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    set(&mut b, any, SO_REUSEPORT, &on(1)).unwrap();
    b.bind(any, "0.0.0.0:80".parse().unwrap()).unwrap();
    b.listen(any, 4).unwrap();
    let (l, _) = connect_to_b(&mut a, &mut b, &[lo, any]).unwrap();
    assert_eq!(l, any);
}

#[test]
fn connect_on_a_device_the_host_lacks_or_on_lo() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let l = bound(&mut b, 0, false).unwrap();
    b.listen(l, 4).unwrap();
    let to = SocketAddr::new(B.into(), 80);
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    set(&mut a, c, SO_BINDTOIFINDEX, &on(99)).unwrap();
    assert_eq!(a.connect(T0, c, to), Err(Errno(errno::ENODEV)));
    // On lo the SYN leaves on loopback: nothing reaches the device.
    set(&mut a, c, SO_BINDTODEVICE, b"lo").unwrap();
    assert_eq!(a.connect(T0, c, to), Err(Errno(errno::EINPROGRESS)));
    assert!(deliver(&mut a, &mut b, T0).is_empty());
    // IPv6 has no on-link guess: ENETUNREACH for lo and for a missing device.
    a.stack_mut().add_address("2001:db8::1".parse().unwrap());
    let c6 = a.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    set(&mut a, c6, SO_BINDTODEVICE, b"lo").unwrap();
    let to6: SocketAddr = "[2001:db8::2]:80".parse().unwrap();
    assert_eq!(a.connect(T0, c6, to6), Err(Errno(errno::ENETUNREACH)));
}

#[test]
fn an_established_connection_rebound_to_lo_sends_into_loopback_until_unbound() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let l = bound(&mut b, 0, false).unwrap();
    b.listen(l, 4).unwrap();
    let (_, child) = connect_to_b(&mut a, &mut b, &[l]).unwrap();
    set(&mut b, child, SO_BINDTODEVICE, b"lo").unwrap();
    assert_eq!(b.send(T0, child, b"hello", 0), Ok(5));
    assert!(deliver(&mut b, &mut a, T0).is_empty(), "sent into loopback");
    // Unbound, it sends on the device again (its retransmission at the RTO).
    set(&mut b, child, SO_BINDTODEVICE, b"").unwrap();
    let later = T0 + core::time::Duration::from_secs(2);
    b.handle_timeout(later);
    assert!(!deliver(&mut b, &mut a, later).is_empty());
}
