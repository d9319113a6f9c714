//! Address families of a socket, as Linux's `inet_bind`/`__inet6_bind`,
//! `tcp_v4_connect`/`tcp_v6_connect`, `inet6_getname` and the bind-conflict checks
//! (`inet_rcv_saddr_equal`, `ipv6_rcv_saddr_equal`).
//!
//! An `AF_INET6` socket talks IPv4 through IPv4-mapped addresses (`::ffff:a.b.c.d`,
//! [RFC 4291 section 2.5.5.2](https://www.rfc-editor.org/rfc/rfc4291#section-2.5.5.2))
//! unless `IPV6_V6ONLY` is set: the engine sees the IPv4 address (its packets are IPv4),
//! the caller sees the mapped one. A socket bound to one specific IPv6 address is IPv6-only
//! from then on, as Linux sets `sk_ipv6only` in `__inet6_bind`. The default of
//! `IPV6_V6ONLY` is Linux's `net.ipv6.bindv6only` default, 0.

use super::consts::{errno, AF_INET, AF_INET6};
use super::Errno;
use std::net::{IpAddr, SocketAddr};

/// The IPv4 address of an IPv4-mapped `addr` (`ipv6_addr_v4mapped`), as an engine
/// address; any other address as it is.
fn unmapped(addr: SocketAddr) -> SocketAddr {
    match addr.ip().to_canonical() {
        v4 @ IpAddr::V4(_) => SocketAddr::new(v4, addr.port()),
        IpAddr::V6(_) => addr,
    }
}

/// What a socket of `family` shows for the engine address `addr`
/// (`inet6_getname`: an IPv4 address on an `AF_INET6` socket is mapped).
pub(crate) fn user_addr(family: i32, addr: SocketAddr) -> SocketAddr {
    match (family, addr) {
        (AF_INET6, SocketAddr::V4(v4)) => {
            SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
        }
        _ => addr,
    }
}

/// `bind(2)`'s address for the engine, and whether the bind makes the socket
/// IPv6-only. `inet_bind` wants `AF_INET`, `__inet6_bind` `AF_INET6`
/// (`EAFNOSUPPORT`); a mapped address on an IPv6-only socket is `EINVAL`.
pub(crate) fn bind_addr(
    family: i32,
    v6only: bool,
    addr: SocketAddr,
) -> Result<(SocketAddr, bool), Errno> {
    match (family, addr) {
        (AF_INET, SocketAddr::V4(_)) => Ok((addr, false)),
        (AF_INET6, SocketAddr::V6(v6)) => match v6.ip().to_ipv4_mapped() {
            Some(_) if v6only => Err(Errno(errno::EINVAL)),
            Some(_) => Ok((unmapped(addr), false)),
            None => Ok((addr, !v6.ip().is_unspecified())),
        },
        _ => Err(Errno(errno::EAFNOSUPPORT)),
    }
}

/// `connect(2)`'s peer for the engine. `tcp_v4_connect` wants `AF_INET`,
/// `tcp_v6_connect` `AF_INET6` (`EAFNOSUPPORT`); a mapped peer goes through
/// `tcp_v4_connect` unless the socket is IPv6-only (`ENETUNREACH`), and a socket
/// bound to a mapped (IPv4) address has no IPv6 source for an IPv6 peer
/// (`ENETUNREACH`).
pub(crate) fn connect_addr(
    family: i32,
    v6only: bool,
    bound: Option<SocketAddr>,
    remote: SocketAddr,
) -> Result<SocketAddr, Errno> {
    match (family, remote) {
        (AF_INET, SocketAddr::V4(_)) => Ok(remote),
        (AF_INET6, SocketAddr::V6(v6)) => match v6.ip().to_ipv4_mapped() {
            Some(_) if v6only => Err(Errno(errno::ENETUNREACH)),
            Some(_) => Ok(unmapped(remote)),
            None if matches!(bound, Some(SocketAddr::V4(_))) => Err(Errno(errno::ENETUNREACH)),
            None => Ok(remote),
        },
        _ => Err(Errno(errno::EAFNOSUPPORT)),
    }
}

/// The wildcard address of `family` with `port` (`inet_autobind`, an unbound listen).
pub(crate) fn any(family: i32, port: u16) -> SocketAddr {
    match family {
        AF_INET6 => SocketAddr::new(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), port),
        _ => SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), port),
    }
}

/// Whether two engine addresses bound by sockets with these `IPV6_V6ONLY` values
/// claim the same port on a common address (`inet_rcv_saddr_equal` with
/// `ipv6_rcv_saddr_equal`): within a family, the same address or a wildcard; across
/// families, only an IPv6 wildcard that also takes IPv4.
pub(crate) fn conflict(a: SocketAddr, a_v6only: bool, b: SocketAddr, b_v6only: bool) -> bool {
    if a.port() != b.port() {
        return false;
    }
    let either_any = a.ip().is_unspecified() || b.ip().is_unspecified();
    match (a.ip(), b.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
            a.ip() == b.ip() || either_any
        }
        (IpAddr::V4(_), IpAddr::V6(y)) => y.is_unspecified() && !b_v6only,
        (IpAddr::V6(x), IpAddr::V4(_)) => x.is_unspecified() && !a_v6only,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn bind_follows_the_family_and_v6only() {
        let mapped = sa("[::ffff:192.168.0.1]:80");
        assert_eq!(
            bind_addr(AF_INET6, false, mapped),
            Ok((sa("192.168.0.1:80"), false))
        );
        assert_eq!(bind_addr(AF_INET6, true, mapped), Err(Errno(errno::EINVAL)));
        assert_eq!(
            bind_addr(AF_INET6, false, sa("[::]:80")),
            Ok((sa("[::]:80"), false))
        );
        let own = sa("[fd00::1]:80");
        assert_eq!(
            bind_addr(AF_INET6, false, own),
            Ok((own, true)),
            "sk_ipv6only"
        );
        let v4 = sa("192.168.0.1:80");
        assert_eq!(bind_addr(AF_INET, false, v4), Ok((v4, false)));
        for (fam, a) in [(AF_INET, own), (AF_INET6, v4)] {
            assert_eq!(bind_addr(fam, false, a), Err(Errno(errno::EAFNOSUPPORT)));
        }
    }

    #[test]
    fn connect_maps_ipv4_unless_v6only() {
        let peer = sa("[::ffff:192.0.2.1]:8080");
        assert_eq!(
            connect_addr(AF_INET6, false, None, peer),
            Ok(sa("192.0.2.1:8080"))
        );
        assert_eq!(
            connect_addr(AF_INET6, true, None, peer),
            Err(Errno(errno::ENETUNREACH))
        );
        let v6 = sa("[fd00::2]:8080");
        assert_eq!(
            connect_addr(AF_INET6, false, Some(sa("[::]:9")), v6),
            Ok(v6)
        );
        let bound4 = Some(sa("192.168.0.1:9"));
        assert_eq!(
            connect_addr(AF_INET6, false, bound4, v6),
            Err(Errno(errno::ENETUNREACH))
        );
        assert_eq!(
            connect_addr(AF_INET, false, None, v6),
            Err(Errno(errno::EAFNOSUPPORT))
        );
        assert_eq!(
            connect_addr(AF_INET6, false, None, sa("192.0.2.1:1")),
            Err(Errno(errno::EAFNOSUPPORT))
        );
    }

    #[test]
    fn names_show_mapped_addresses_on_ipv6_sockets() {
        let v4 = sa("192.0.2.1:8080");
        assert_eq!(user_addr(AF_INET6, v4), sa("[::ffff:192.0.2.1]:8080"));
        assert_eq!(user_addr(AF_INET, v4), v4);
        let v6 = sa("[fd00::2]:1");
        assert_eq!(user_addr(AF_INET6, v6), v6);
    }

    #[test]
    fn conflicts_across_families_only_through_a_dual_wildcard() {
        let (any4, any6) = (sa("0.0.0.0:80"), sa("[::]:80"));
        let (one4, one6) = (sa("192.168.0.1:80"), sa("[fd00::1]:80"));
        assert!(conflict(any4, false, one4, false));
        assert!(!conflict(one4, false, sa("192.168.0.2:80"), false));
        assert!(!conflict(one4, false, sa("192.168.0.1:81"), false));
        assert!(conflict(one6, true, any6, false));
        assert!(conflict(one4, false, any6, false), "[::] takes IPv4 too");
        assert!(!conflict(one4, false, any6, true), "IPV6_V6ONLY");
        assert!(conflict(any6, false, any4, false));
        assert!(!conflict(one6, true, any4, false));
        assert!(!conflict(any4, false, one6, true));
    }
}
