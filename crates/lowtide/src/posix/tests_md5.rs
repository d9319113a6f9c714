//! `TCP_MD5SIG` and `TCP_MD5SIG_EXT` through `setsockopt(2)`: the
//! `struct tcp_md5sig` and its errors as `tcp_v4_parse_md5_keys` and
//! `tcp_v6_parse_md5_keys` give them, and keys that make two hosts talk.

use super::consts::*;
use super::tests::{host, A, B};
use super::tests_sock::run;
use super::*;
use crate::tcp::md5::{TCP_MD5SIG_FLAG_IFINDEX, TCP_MD5SIG_FLAG_PREFIX};
use std::net::{IpAddr, Ipv6Addr};

/// A `struct tcp_md5sig`: `family` and `addr` in the sockaddr_storage, then
/// `tcpm_flags`, `tcpm_prefixlen`, `tcpm_keylen`, `tcpm_ifindex`, `tcpm_key`.
fn md5sig(addr: IpAddr, flags: u8, prefixlen: u8, keylen: u16, key: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; TCP_MD5SIG_LEN];
    match addr {
        IpAddr::V4(a) => {
            b[0..2].copy_from_slice(&(AF_INET as u16).to_ne_bytes());
            b[4..8].copy_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            b[0..2].copy_from_slice(&(AF_INET6 as u16).to_ne_bytes());
            b[8..24].copy_from_slice(&a.octets());
        }
    }
    b[128] = flags;
    b[129] = prefixlen;
    b[130..132].copy_from_slice(&keylen.to_ne_bytes());
    b[136..136 + key.len()].copy_from_slice(key);
    b
}

fn set(h: &mut Host, fd: Fd, name: i32, v: &[u8]) -> Result<(), Errno> {
    h.setsockopt(Instant::ZERO, fd, SOL_TCP, name, v)
}

const EINVAL: Result<(), Errno> = Err(Errno(errno::EINVAL));

/// tcp_v4_parse_md5_keys: a short struct, another family, a key over 80 bytes,
/// a prefix over 32 (with `TCP_MD5SIG_EXT` and the prefix flag only), a device
/// that is no L3 master are EINVAL; deleting a key that is not there is ENOENT.
#[test]
fn md5sig_errors_as_tcp_v4_parse_md5_keys() {
    let mut h = host(A, 1);
    let fd = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let b = IpAddr::V4(B);
    let ok = md5sig(b, 0, 0, 3, b"key");
    assert_eq!(
        set(&mut h, fd, TCP_MD5SIG, &ok[..TCP_MD5SIG_LEN - 1]),
        EINVAL
    );
    assert_eq!(set(&mut h, fd, TCP_MD5SIG, &ok), Ok(()));
    let v6 = md5sig(IpAddr::V6(Ipv6Addr::LOCALHOST), 0, 0, 3, b"key");
    assert_eq!(set(&mut h, fd, TCP_MD5SIG, &v6), EINVAL);
    assert_eq!(
        set(&mut h, fd, TCP_MD5SIG, &md5sig(b, 0, 0, 81, &[1; 80])),
        EINVAL
    );
    assert_eq!(
        set(&mut h, fd, TCP_MD5SIG, &md5sig(b, 0, 0, 80, &[1; 80])),
        Ok(())
    );
    let wide = md5sig(b, TCP_MD5SIG_FLAG_PREFIX, 33, 3, b"key");
    assert_eq!(set(&mut h, fd, TCP_MD5SIG_EXT, &wide), EINVAL);
    assert_eq!(set(&mut h, fd, TCP_MD5SIG, &wide), Ok(()), "flags ignored");
    let mut dev = md5sig(b, TCP_MD5SIG_FLAG_IFINDEX, 0, 3, b"key");
    dev[132..136].copy_from_slice(&5i32.to_ne_bytes());
    assert_eq!(set(&mut h, fd, TCP_MD5SIG_EXT, &dev), EINVAL);
    // Deletion: the entry of the same address and prefix.
    let net = md5sig(b, TCP_MD5SIG_FLAG_PREFIX, 24, 0, b"");
    assert_eq!(
        set(&mut h, fd, TCP_MD5SIG_EXT, &net),
        Err(Errno(errno::ENOENT))
    );
    let host_del = md5sig(b, 0, 0, 0, b"");
    assert_eq!(set(&mut h, fd, TCP_MD5SIG, &host_del), Ok(()));
    assert_eq!(
        set(&mut h, fd, TCP_MD5SIG, &host_del),
        Err(Errno(errno::ENOENT))
    );
}

/// tcp_v6_parse_md5_keys: an AF_INET6 socket takes AF_INET6 addresses only; an
/// IPv4-mapped one is an IPv4 key, whose prefix is at most 32.
#[test]
fn md5sig_on_an_inet6_socket_maps_ipv4() {
    let mut h = host(A, 1);
    let fd = h.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    let mapped = IpAddr::V6(B.to_ipv6_mapped());
    let v4 = md5sig(IpAddr::V4(B), 0, 0, 3, b"key");
    assert_eq!(set(&mut h, fd, TCP_MD5SIG, &v4), EINVAL);
    let wide = md5sig(mapped, TCP_MD5SIG_FLAG_PREFIX, 33, 3, b"key");
    assert_eq!(set(&mut h, fd, TCP_MD5SIG_EXT, &wide), EINVAL);
    let v6 = md5sig(
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        TCP_MD5SIG_FLAG_PREFIX,
        128,
        3,
        b"k",
    );
    assert_eq!(set(&mut h, fd, TCP_MD5SIG_EXT, &v6), Ok(()));
    assert_eq!(
        set(&mut h, fd, TCP_MD5SIG, &md5sig(mapped, 0, 0, 3, b"key")),
        Ok(())
    );
    let key = h.sock(fd).unwrap().opts.md5.lookup(IpAddr::V4(B)).copied();
    assert_eq!(
        key.map(|k| (k.addr, k.prefixlen)),
        Some((IpAddr::V4(B), 32))
    );
}

/// A listener and a client with the same key connect and move data, signed; a
/// client with another key does not connect, and the listener's host counts
/// TcpExtTCPMD5Failure.
#[test]
fn keys_set_with_setsockopt_sign_the_connection() {
    for (client_key, connects) in [(b"same", true), (b"else", false)] {
        let (mut a, mut b) = (host(A, 1), host(B, 2));
        let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        set(
            &mut b,
            l,
            TCP_MD5SIG,
            &md5sig(IpAddr::V4(A), 0, 0, 4, b"same"),
        )
        .unwrap();
        b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
        b.listen(l, 8).unwrap();
        let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        set(
            &mut a,
            c,
            TCP_MD5SIG,
            &md5sig(IpAddr::V4(B), 0, 0, 4, client_key),
        )
        .unwrap();
        let to = SocketAddr::new(B.into(), 80);
        assert_eq!(
            a.connect(Instant::ZERO, c, to),
            Err(Errno(errno::EINPROGRESS))
        );
        let sent = run(&mut a, &mut b, Instant::ZERO);
        assert!(
            sent.iter().all(|p| p.len() >= 20 + 40),
            "each segment signed"
        );
        let failures = b.stack.counters().get(crate::Mib::TcpExtTCPMD5Failure);
        if !connects {
            assert!(b.accept(l).is_err());
            assert_eq!(failures, 1);
            continue;
        }
        assert_eq!(a.connect(Instant::ZERO, c, to), Ok(()));
        let s = b.accept(l).unwrap().0;
        assert_eq!(a.send(Instant::ZERO, c, b"signed", 0), Ok(6));
        run(&mut a, &mut b, Instant::ZERO);
        let mut buf = [0u8; 16];
        assert_eq!(b.recv(Instant::ZERO, s, &mut buf, 0), Ok(6));
        assert_eq!(&buf[..6], b"signed");
        assert_eq!(failures, 0);
    }
}
