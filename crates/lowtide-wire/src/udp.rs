//! UDP (RFC 768) headers and their checksum over the IP pseudo-header (RFC 768;
//! RFC 8200 section 8.1 for IPv6, where it is mandatory).

use crate::{checksum, WireError};
use std::net::IpAddr;

/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = 8;

/// A parsed UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Parses the datagram `seg` (header and payload, as the IP header delimits it)
    /// sent from `src` to `dst`, and returns the header and the payload.
    ///
    /// As `__udp4_lib_rcv`/`udp6_csum_init`: the UDP length must be at least the
    /// header and at most `seg` (bytes past it are trimmed); with `verify`, the
    /// checksum must verify, where an IPv4 checksum of 0 means "none"
    /// (RFC 768). An IPv6 checksum of 0 is always refused (RFC 8200 section 8.1).
    pub fn parse(
        src: IpAddr,
        dst: IpAddr,
        seg: &[u8],
        verify: bool,
    ) -> Result<(UdpRepr, &[u8]), WireError> {
        if seg.len() < UDP_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let be16 = |o: usize| u16::from_be_bytes([seg[o], seg[o + 1]]);
        let ulen = be16(4) as usize;
        if ulen < UDP_HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if ulen > seg.len() {
            return Err(WireError::Truncated);
        }
        let seg = &seg[..ulen];
        let check = be16(6);
        if check == 0 && dst.is_ipv6() {
            return Err(WireError::BadChecksum);
        }
        if verify && check != 0 {
            let pseudo = checksum::pseudo_header(src, dst, PROTO_UDP, ulen as u32);
            if checksum::fold(checksum::sum(seg, pseudo)) != 0xffff {
                return Err(WireError::BadChecksum);
            }
        }
        let repr = UdpRepr {
            src_port: be16(0),
            dst_port: be16(2),
        };
        Ok((repr, &seg[UDP_HEADER_LEN..]))
    }

    /// Appends the header and `payload` to `out`, with the full checksum (a sum of
    /// 0 is sent as 0xffff: RFC 768). `payload` must fit the 16-bit length field
    /// (65535 - 8 bytes); the caller checks it.
    pub fn emit(&self, src: IpAddr, dst: IpAddr, payload: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        let ulen = (UDP_HEADER_LEN + payload.len()) as u16;
        out.extend_from_slice(&self.src_port.to_be_bytes());
        out.extend_from_slice(&self.dst_port.to_be_bytes());
        out.extend_from_slice(&ulen.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(payload);
        let pseudo = checksum::pseudo_header(src, dst, PROTO_UDP, ulen as u32);
        let sum = !checksum::fold(checksum::sum(&out[start..], pseudo));
        let sum = if sum == 0 { 0xffff } else { sum };
        out[start + 6..start + 8].copy_from_slice(&sum.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    fn v6(n: u16) -> IpAddr {
        IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, n))
    }

    #[test]
    fn emit_then_parse_both_families() {
        for (s, d) in [(A, B), (v6(1), v6(2))] {
            let mut out = Vec::new();
            let h = UdpRepr {
                src_port: 5353,
                dst_port: 53,
            };
            h.emit(s, d, b"query", &mut out);
            assert_eq!(out.len(), 13);
            let (got, payload) = UdpRepr::parse(s, d, &out, true).unwrap();
            assert_eq!((got, payload), (h, &b"query"[..]));
            // The checksum covers the pseudo-header: another destination fails.
            assert_eq!(
                UdpRepr::parse(s, s, &out, true),
                Err(WireError::BadChecksum)
            );
            // A flipped payload bit fails; unverified, it parses.
            out[10] ^= 1;
            assert_eq!(
                UdpRepr::parse(s, d, &out, true),
                Err(WireError::BadChecksum)
            );
            assert!(UdpRepr::parse(s, d, &out, false).is_ok());
        }
    }

    #[test]
    fn zero_checksum_is_none_on_ipv4_only() {
        let mut out = Vec::new();
        UdpRepr {
            src_port: 1,
            dst_port: 2,
        }
        .emit(A, B, b"x", &mut out);
        out[6..8].fill(0);
        assert!(UdpRepr::parse(A, B, &out, true).is_ok());
        assert_eq!(
            UdpRepr::parse(v6(1), v6(2), &out, true),
            Err(WireError::BadChecksum)
        );
    }

    #[test]
    fn lengths_are_checked_and_padding_trimmed() {
        let mut out = Vec::new();
        UdpRepr {
            src_port: 1,
            dst_port: 2,
        }
        .emit(A, B, b"abc", &mut out);
        let mut padded = out.clone();
        padded.extend_from_slice(&[0xaa; 5]);
        assert_eq!(UdpRepr::parse(A, B, &padded, true).unwrap().1, b"abc");
        for n in 0..out.len() {
            assert!(UdpRepr::parse(A, B, &out[..n], true).is_err(), "len {n}");
        }
        let mut short = out.clone();
        short[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(
            UdpRepr::parse(A, B, &short, false),
            Err(WireError::Malformed)
        );
    }
}
