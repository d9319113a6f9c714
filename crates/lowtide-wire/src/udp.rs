//! UDP (RFC 768) headers and their checksum over the IP pseudo-header (RFC 768;
//! [RFC 8200 section 8.1](https://www.rfc-editor.org/rfc/rfc8200#section-8.1) for IPv6,
//! where it is mandatory).

use crate::ip::IpRepr;
use crate::{checksum, WireError};
use std::net::IpAddr;

/// `UDP_MAX_SEGMENTS`: the most datagrams one UDP GSO super-packet may carry.
pub const UDP_MAX_SEGMENTS: usize = 128;

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
    /// (RFC 768). An IPv6 checksum of 0 is always refused
    /// ([RFC 8200 section 8.1](https://www.rfc-editor.org/rfc/rfc8200#section-8.1)).
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

/// The UDP checksum field of a GSO super-packet (CHECKSUM_PARTIAL, as
/// `udp4_hwcsum`/`udp6_hwcsum_outgoing` leave it): the pseudo-header sum of the
/// whole UDP length, which `__udp_gso_segment` adjusts per segment.
pub fn partial_checksum(src: IpAddr, dst: IpAddr, udp_len: usize) -> u16 {
    checksum::fold(checksum::pseudo_header(src, dst, PROTO_UDP, udp_len as u32))
}

/// Cuts a UDP GSO super-packet (`SKB_GSO_UDP_L4`: one IPv4/IPv6 + UDP header, a
/// payload of several `gso_size` datagrams, the last maybe shorter) into its
/// datagrams, as `__udp_gso_segment` does: each keeps the IP header (IPv4: id
/// incremented per datagram, header checksum redone), gets its own lengths and a
/// complete UDP checksum (whatever the super-packet's checksum field held). A
/// payload no longer than `gso_size`, or `gso_size` 0, gives one datagram. Returns
/// the number of datagrams passed to `out`.
pub fn gso_segment(
    packet: &[u8],
    gso_size: u16,
    mut out: impl FnMut(Vec<u8>),
) -> Result<usize, WireError> {
    let ip = IpRepr::parse(packet, false)?;
    if ip.protocol != PROTO_UDP {
        return Err(WireError::Unsupported);
    }
    if ip.payload_len < UDP_HEADER_LEN {
        return Err(WireError::Truncated);
    }
    let hlen = ip.header_len;
    let payload = &packet[hlen + UDP_HEADER_LEN..hlen + ip.payload_len];
    let size = match gso_size as usize {
        0 => payload.len().max(1),
        n => n,
    };
    let udp = UdpRepr {
        src_port: u16::from_be_bytes([packet[hlen], packet[hlen + 1]]),
        dst_port: u16::from_be_bytes([packet[hlen + 2], packet[hlen + 3]]),
    };
    let v4 = ip.src.is_ipv4();
    let id = u16::from_be_bytes([packet[4], packet[5]]);
    let mut n = 0;
    // An empty payload is still one datagram.
    let chunks = payload
        .chunks(size)
        .chain(payload.is_empty().then_some(&[][..]));
    for (i, chunk) in chunks.enumerate() {
        let mut seg = Vec::with_capacity(hlen + UDP_HEADER_LEN + chunk.len());
        seg.extend_from_slice(&packet[..hlen]);
        match v4 {
            true => {
                let total = (hlen + UDP_HEADER_LEN + chunk.len()) as u16;
                seg[2..4].copy_from_slice(&total.to_be_bytes());
                seg[4..6].copy_from_slice(&id.wrapping_add(i as u16).to_be_bytes());
                seg[10..12].fill(0);
                let sum = !checksum::fold(checksum::sum(&seg[..hlen], 0));
                seg[10..12].copy_from_slice(&sum.to_be_bytes());
            }
            false => {
                // The IPv6 payload length counts extension headers too.
                let plen = (hlen - 40 + UDP_HEADER_LEN + chunk.len()) as u16;
                seg[4..6].copy_from_slice(&plen.to_be_bytes());
            }
        }
        udp.emit(ip.src, ip.dst, chunk, &mut seg);
        out(seg);
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    pub(super) fn v6(n: u16) -> IpAddr {
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

    /// A UDP GSO super-packet of `payload` from A to B (or v6), checksum partial.
    fn super_packet(v6: bool, payload: &[u8]) -> Vec<u8> {
        let (s, d) = if v6 {
            (super::tests::v6(1), super::tests::v6(2))
        } else {
            (A, B)
        };
        let ip = IpRepr {
            src: s,
            dst: d,
            protocol: PROTO_UDP,
            hop_limit: 64,
            ecn: 0,
            tos: 0,
            header_len: 0,
            payload_len: UDP_HEADER_LEN + payload.len(),
        };
        let mut p = vec![0; ip.emit_len()];
        ip.emit(&mut p, 100);
        let mut udp = Vec::new();
        UdpRepr {
            src_port: 4000,
            dst_port: 53,
        }
        .emit(s, d, payload, &mut udp);
        let partial = partial_checksum(s, d, udp.len());
        udp[6..8].copy_from_slice(&partial.to_be_bytes());
        p.extend_from_slice(&udp);
        p
    }

    #[test]
    fn gso_segment_cuts_datagrams_with_their_own_checksums() {
        let data: Vec<u8> = (0..2500u32).map(|i| (i % 251) as u8).collect();
        for v6 in [false, true] {
            let p = super_packet(v6, &data);
            let mut segs = Vec::new();
            assert_eq!(gso_segment(&p, 1000, |s| segs.push(s)).unwrap(), 3);
            let mut got = Vec::new();
            for (i, s) in segs.iter().enumerate() {
                let ip = IpRepr::parse(s, true).expect("valid IP header and length");
                assert_eq!(ip.header_len + ip.payload_len, s.len());
                let seg = &s[ip.header_len..];
                let (h, payload) = UdpRepr::parse(ip.src, ip.dst, seg, true).unwrap();
                assert_eq!((h.src_port, h.dst_port), (4000, 53));
                assert_eq!(payload.len(), [1000, 1000, 500][i]);
                if !v6 {
                    assert_eq!(u16::from_be_bytes([s[4], s[5]]), 100 + i as u16);
                }
                got.extend_from_slice(payload);
            }
            assert_eq!(got, data);
            // Fits one segment: one datagram; not UDP or cut short: an error.
            assert_eq!(gso_segment(&p, 4000, |_| ()).unwrap(), 1);
            assert!(gso_segment(&p[..p.len() - 1], 1000, |_| ()).is_err());
            assert!(gso_segment(&p[..20], 1000, |_| ()).is_err());
        }
    }
}
