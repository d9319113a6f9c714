//! A `struct sockaddr` as a caller hands it to `bind(2)`, `connect(2)` or
//! `sendto(2)`/`sendmsg(2)` (Fast Open's destination), checked in Linux's order:
//! `move_addr_to_kernel` (its length), then the family's own code (`inet_bind_sk` /
//! `inet6_bind_sk`, `__inet_stream_connect`, `tcp_v4_connect` / `tcp_v6_connect`),
//! each of which reads the length before the family.

use super::consts::{errno, AF_INET, AF_INET6};
use super::{err, Errno};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `AF_UNSPEC`.
pub const AF_UNSPEC: i32 = 0;
/// `sizeof(struct sockaddr_storage)`: the longest address `move_addr_to_kernel` takes.
pub const SOCKADDR_STORAGE_LEN: usize = 128;
/// `sizeof(struct sockaddr_in)`.
const SOCKADDR_IN_LEN: usize = 16;
/// `SIN6_LEN_RFC2133`: a `struct sockaddr_in6` without `sin6_scope_id`, the least
/// `inet6_bind_sk` and `tcp_v6_connect` take.
pub const SIN6_LEN_RFC2133: usize = 24;

/// The bytes of a caller's `struct sockaddr` (at most `sizeof(struct
/// sockaddr_storage)`) and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserSockAddr {
    bytes: [u8; SOCKADDR_STORAGE_LEN],
    len: usize,
}

impl UserSockAddr {
    /// `move_addr_to_kernel`: `EINVAL` for more than `sizeof(struct
    /// sockaddr_storage)` bytes (a negative `addrlen` too: take it as such).
    pub fn from_bytes(b: &[u8]) -> Result<UserSockAddr, Errno> {
        if b.len() > SOCKADDR_STORAGE_LEN {
            return err(errno::EINVAL);
        }
        let mut bytes = [0u8; SOCKADDR_STORAGE_LEN];
        bytes[..b.len()].copy_from_slice(b);
        Ok(UserSockAddr {
            bytes,
            len: b.len(),
        })
    }

    /// A whole `sockaddr_in` or `sockaddr_in6` (its scope id 0) for `addr`.
    pub fn from_socket_addr(addr: SocketAddr) -> UserSockAddr {
        let mut bytes = [0u8; SOCKADDR_STORAGE_LEN];
        let len = match addr {
            SocketAddr::V4(a) => {
                bytes[..2].copy_from_slice(&(AF_INET as u16).to_ne_bytes());
                bytes[4..8].copy_from_slice(&a.ip().octets());
                SOCKADDR_IN_LEN
            }
            SocketAddr::V6(a) => {
                bytes[..2].copy_from_slice(&(AF_INET6 as u16).to_ne_bytes());
                bytes[8..24].copy_from_slice(&a.ip().octets());
                28
            }
        };
        bytes[2..4].copy_from_slice(&addr.port().to_be_bytes());
        UserSockAddr { bytes, len }
    }

    /// `sa_family` (0 when the length does not reach it).
    pub fn family(&self) -> i32 {
        u16::from_ne_bytes([self.bytes[0], self.bytes[1]]) as i32
    }

    /// The length the caller gave.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the caller gave no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `connect(2)`'s `AF_UNSPEC` (`__inet_stream_connect`: `addr_len` reaches
    /// `sa_family`), which disconnects.
    pub fn is_unspec(&self) -> bool {
        self.len >= 2 && self.family() == AF_UNSPEC
    }

    fn port(&self) -> u16 {
        u16::from_be_bytes([self.bytes[2], self.bytes[3]])
    }

    fn sin_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.bytes[4], self.bytes[5], self.bytes[6], self.bytes[7])
    }

    fn sin6_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.bytes[8..24]);
        Ipv6Addr::from(a)
    }

    /// The address `bind(2)` reads on a socket of `family`: `inet_bind_sk` wants a
    /// `sockaddr_in` (`EINVAL` shorter) of `AF_INET`, or of `AF_UNSPEC` with
    /// `INADDR_ANY` ("compatibility games"), else `EAFNOSUPPORT`; `inet6_bind_sk` a
    /// `SIN6_LEN_RFC2133` one of `AF_INET6` (`__inet6_bind`).
    pub fn for_bind(&self, family: i32) -> Result<SocketAddr, Errno> {
        match family {
            AF_INET6 => self.inet6(),
            _ if self.len < SOCKADDR_IN_LEN => err(errno::EINVAL),
            _ => match self.family() {
                AF_INET => Ok(self.inet4()),
                AF_UNSPEC if self.sin_addr().is_unspecified() => Ok(self.inet4()),
                _ => err(errno::EAFNOSUPPORT),
            },
        }
    }

    /// The peer `connect(2)` reads on a socket of `family` once the state allows
    /// it: `tcp_v4_connect` wants a `sockaddr_in` of `AF_INET`, `tcp_v6_connect` a
    /// `SIN6_LEN_RFC2133` one of `AF_INET6` (`EINVAL` shorter, else `EAFNOSUPPORT`).
    pub fn for_connect(&self, family: i32) -> Result<SocketAddr, Errno> {
        match family {
            AF_INET6 => self.inet6(),
            _ if self.len < SOCKADDR_IN_LEN => err(errno::EINVAL),
            _ if self.family() != AF_INET => err(errno::EAFNOSUPPORT),
            _ => Ok(self.inet4()),
        }
    }

    fn inet4(&self) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(self.sin_addr()), self.port())
    }

    fn inet6(&self) -> Result<SocketAddr, Errno> {
        if self.len < SIN6_LEN_RFC2133 {
            return err(errno::EINVAL);
        }
        if self.family() != AF_INET6 {
            return err(errno::EAFNOSUPPORT);
        }
        Ok(SocketAddr::new(IpAddr::V6(self.sin6_addr()), self.port()))
    }
}

impl Default for UserSockAddr {
    /// No bytes: what `tcp_v4_connect`/`tcp_v6_connect` see for no address.
    fn default() -> UserSockAddr {
        UserSockAddr {
            bytes: [0; SOCKADDR_STORAGE_LEN],
            len: 0,
        }
    }
}

impl From<SocketAddr> for UserSockAddr {
    fn from(a: SocketAddr) -> UserSockAddr {
        UserSockAddr::from_socket_addr(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(family: i32, len: usize, addr: &[u8]) -> UserSockAddr {
        let mut b = vec![0u8; len.max(24)];
        b[..2].copy_from_slice(&(family as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&80u16.to_be_bytes());
        let at = if family == AF_INET6 { 8 } else { 4 };
        b[at..at + addr.len()].copy_from_slice(addr);
        UserSockAddr::from_bytes(&b[..len]).unwrap()
    }

    #[test]
    fn lengths_before_families_as_linux_reads_them() {
        let e = |r: Result<SocketAddr, Errno>| r.map_err(|e| e.0);
        assert_eq!(
            UserSockAddr::from_bytes(&[0; 129]),
            Err(Errno(errno::EINVAL))
        );
        assert!(UserSockAddr::from_bytes(&[0; 128]).is_ok());
        // inet_bind_sk: the length first, then AF_INET or AF_UNSPEC + INADDR_ANY.
        assert_eq!(
            e(raw(AF_INET, 15, &[1, 2, 3, 4]).for_bind(AF_INET)),
            Err(errno::EINVAL)
        );
        assert_eq!(
            e(raw(AF_INET6, 15, &[]).for_bind(AF_INET)),
            Err(errno::EINVAL)
        );
        assert_eq!(
            e(raw(1, 16, &[]).for_bind(AF_INET)),
            Err(errno::EAFNOSUPPORT)
        );
        assert_eq!(
            e(raw(AF_UNSPEC, 16, &[]).for_bind(AF_INET)),
            Ok("0.0.0.0:80".parse().unwrap())
        );
        assert_eq!(
            e(raw(AF_UNSPEC, 16, &[1, 2, 3, 4]).for_bind(AF_INET)),
            Err(errno::EAFNOSUPPORT)
        );
        assert_eq!(
            e(raw(AF_INET, 16, &[1, 2, 3, 4]).for_bind(AF_INET)),
            Ok("1.2.3.4:80".parse().unwrap())
        );
        // inet6_bind_sk: SIN6_LEN_RFC2133 first, then AF_INET6 only.
        assert_eq!(
            e(raw(AF_INET6, 23, &[]).for_bind(AF_INET6)),
            Err(errno::EINVAL)
        );
        assert_eq!(
            e(raw(AF_INET, 24, &[]).for_bind(AF_INET6)),
            Err(errno::EAFNOSUPPORT)
        );
        assert_eq!(
            e(raw(AF_UNSPEC, 24, &[]).for_bind(AF_INET6)),
            Err(errno::EAFNOSUPPORT)
        );
        assert_eq!(
            e(raw(AF_INET6, 24, &[]).for_bind(AF_INET6)),
            Ok("[::]:80".parse().unwrap())
        );
        // tcp_v4_connect: no AF_UNSPEC games (that one disconnects before).
        assert_eq!(
            e(raw(AF_UNSPEC, 16, &[]).for_connect(AF_INET)),
            Err(errno::EAFNOSUPPORT)
        );
        assert_eq!(
            e(raw(AF_INET, 8, &[]).for_connect(AF_INET)),
            Err(errno::EINVAL)
        );
        assert!(raw(AF_UNSPEC, 2, &[]).is_unspec());
        assert!(!raw(AF_UNSPEC, 1, &[]).is_unspec());
        let a: SocketAddr = "[fd00::1]:9".parse().unwrap();
        assert_eq!(UserSockAddr::from(a).for_connect(AF_INET6), Ok(a));
        let b: SocketAddr = "192.0.2.1:9".parse().unwrap();
        assert_eq!(UserSockAddr::from(b).for_bind(AF_INET), Ok(b));
        assert_eq!(
            e(UserSockAddr::from(b).for_bind(AF_INET6)),
            Err(errno::EINVAL),
            "16 < 24"
        );
    }
}
