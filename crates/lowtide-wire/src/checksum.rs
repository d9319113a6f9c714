//! The Internet checksum (RFC 1071) and the TCP pseudo-header
//! ([RFC 9293 section 3.1](https://www.rfc-editor.org/rfc/rfc9293#section-3.1)).
//!
//! Sums are carried in a `u64` and are only meaningful modulo `0xffff` (ones'
//! complement): any value returned by [`sum`] or [`pseudo_header`] may be passed as
//! `initial` to a further [`sum`], and [`fold`] reduces it to 16 bits.

use std::net::IpAddr;

/// Offset of the checksum field in the TCP header.
pub const TCP_CHECKSUM_OFFSET: usize = 16;

/// Adds `data` to a running ones'-complement sum (not folded, not complemented).
///
/// The data is summed 8 bytes per step as two native-endian `u32` loads into a `u64`
/// (no carry can be lost before 16 GiB), then folded and byte-swapped into network
/// order: [RFC 1071 section 2](https://www.rfc-editor.org/rfc/rfc1071#section-2)(B), the
/// sum is byte-order independent.
pub fn sum(data: &[u8], initial: u64) -> u64 {
    let native = fold(sum_native(data));
    // RFC 1071 section 2(B): swapping the bytes of the native sum gives the
    // network-order sum on little-endian machines.
    let network = u16::from_be(native) as u64;
    let (s, carry) = initial.overflowing_add(network);
    s + carry as u64
}

/// Sums `data` as native-endian 16-bit words into an unfolded `u64`.
#[inline]
fn sum_native(data: &[u8]) -> u64 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
        let hi = u32::from_ne_bytes([c[4], c[5], c[6], c[7]]);
        acc += lo as u64 + hi as u64;
    }
    let mut rest = chunks.remainder();
    if rest.len() >= 4 {
        acc += u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as u64;
        rest = &rest[4..];
    }
    if rest.len() >= 2 {
        acc += u16::from_ne_bytes([rest[0], rest[1]]) as u64;
        rest = &rest[2..];
    }
    if let Some(&b) = rest.first() {
        // RFC 1071 section 4.1: an odd trailing byte is padded with a zero byte.
        acc += u16::from_ne_bytes([b, 0]) as u64;
    }
    acc
}

/// Folds a running sum to 16 bits (not complemented).
pub fn fold(sum: u64) -> u16 {
    let mut s = (sum & 0xffff_ffff) + (sum >> 32);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// Sums the octets of an address as 16-bit words.
fn addr_sum(addr: IpAddr) -> u64 {
    match addr {
        IpAddr::V4(a) => {
            let o = a.octets();
            u16::from_be_bytes([o[0], o[1]]) as u64 + u16::from_be_bytes([o[2], o[3]]) as u64
        }
        IpAddr::V6(a) => a.segments().iter().map(|&w| w as u64).sum(),
    }
}

/// The pseudo-header sum for an upper-layer packet of `len` bytes.
///
/// IPv4 ([RFC 9293 section 3.1](https://www.rfc-editor.org/rfc/rfc9293#section-3.1)) and
/// IPv6 ([RFC 8200 section 8.1](https://www.rfc-editor.org/rfc/rfc8200#section-8.1)) give
/// the same sum: the addresses, the protocol and the length, as 16-bit words.
pub fn pseudo_header(src: IpAddr, dst: IpAddr, protocol: u8, len: u32) -> u64 {
    addr_sum(src) + addr_sum(dst) + protocol as u64 + (len >> 16) as u64 + (len & 0xffff) as u64
}

/// The TCP pseudo-header sum for a segment of `len` bytes.
fn tcp_pseudo(src: IpAddr, dst: IpAddr, len: usize) -> u64 {
    pseudo_header(src, dst, crate::ip::PROTO_TCP, len as u32)
}

/// True if the TCP segment (header + payload) checksums correctly under the
/// given pseudo-header addresses.
pub fn verify_tcp(src: IpAddr, dst: IpAddr, segment: &[u8]) -> bool {
    if segment.len() < crate::tcp::TCP_HEADER_LEN {
        return false;
    }
    fold(sum(segment, tcp_pseudo(src, dst, segment.len()))) == 0xffff
}

/// Writes the full TCP checksum into the segment's checksum field.
///
/// Does nothing if `segment` is too short to hold a checksum field.
pub fn fill_tcp(src: IpAddr, dst: IpAddr, segment: &mut [u8]) {
    if segment.len() < TCP_CHECKSUM_OFFSET + 2 {
        return;
    }
    let pseudo = tcp_pseudo(src, dst, segment.len());
    let c = !complete(segment, pseudo);
    write_csum(segment, c);
}

/// Writes the pseudo-header sum (folded, not complemented) into the checksum field,
/// as Linux's CHECKSUM_PARTIAL / virtio NEEDS_CSUM expects; the device finishes it.
///
/// Does nothing if `segment` is too short to hold a checksum field.
pub fn fill_tcp_partial(src: IpAddr, dst: IpAddr, segment: &mut [u8]) {
    if segment.len() < TCP_CHECKSUM_OFFSET + 2 {
        return;
    }
    write_csum(segment, fold(tcp_pseudo(src, dst, segment.len())));
}

/// [`fill_tcp_partial`] for a segment of which only the TCP header is at hand: `header`
/// starts the segment, `len` is the whole segment's length (header and payload).
pub fn fill_tcp_partial_len(src: IpAddr, dst: IpAddr, header: &mut [u8], len: usize) {
    if header.len() < TCP_CHECKSUM_OFFSET + 2 {
        return;
    }
    write_csum(header, fold(tcp_pseudo(src, dst, len)));
}

/// True if the checksum field of the TCP segment holds exactly what
/// [`fill_tcp_partial`] writes: the pseudo-header sum of a CHECKSUM_PARTIAL packet
/// that no device finished. Such a packet fails [`verify_tcp`]; this tells an
/// unfinished packet from a corrupted one (a corrupted packet matches by chance with
/// probability 2^-16).
pub fn is_tcp_partial(src: IpAddr, dst: IpAddr, segment: &[u8]) -> bool {
    if segment.len() < TCP_CHECKSUM_OFFSET + 2 {
        return false;
    }
    let field = u16::from_be_bytes([
        segment[TCP_CHECKSUM_OFFSET],
        segment[TCP_CHECKSUM_OFFSET + 1],
    ]);
    field == fold(tcp_pseudo(src, dst, segment.len()))
}

/// Folded sum of `segment` with its checksum field taken as zero, plus `initial`.
fn complete(segment: &mut [u8], initial: u64) -> u16 {
    write_csum(segment, 0);
    fold(sum(segment, initial))
}

/// Stores `value` in the TCP checksum field (caller checked the length).
fn write_csum(segment: &mut [u8], value: u16) {
    segment[TCP_CHECKSUM_OFFSET..TCP_CHECKSUM_OFFSET + 2].copy_from_slice(&value.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// RFC 1071 done the obvious way: big-endian words, odd byte padded.
    fn naive(data: &[u8], initial: u64) -> u16 {
        let mut acc: u128 = initial as u128;
        for pair in data.chunks(2) {
            let hi = pair[0] as u128;
            let lo = pair.get(1).copied().unwrap_or(0) as u128;
            acc += (hi << 8) | lo;
        }
        while acc >> 16 != 0 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    proptest! {
        #[test]
        fn sum_matches_naive(
            data in proptest::collection::vec(any::<u8>(), 0..2000),
            initial in any::<u64>(),
            skip in 0usize..8,
        ) {
            // Also exercise unaligned starting addresses.
            let d = &data[skip.min(data.len())..];
            prop_assert_eq!(fold(sum(d, initial)), naive(d, initial));
        }

        #[test]
        fn sum_is_chainable(
            a in proptest::collection::vec(any::<u8>(), 0..300),
            b in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            // Chaining is only valid on even boundaries (RFC 1071 section 2(C)).
            let mut a = a;
            if a.len() % 2 == 1 { a.pop(); }
            let whole: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
            prop_assert_eq!(fold(sum(&b, sum(&a, 0))), fold(sum(&whole, 0)));
        }
    }

    #[test]
    fn fold_edges() {
        assert_eq!(fold(0), 0);
        assert_eq!(fold(0xffff), 0xffff);
        assert_eq!(fold(0x1_0000), 1);
        assert_eq!(fold(u64::MAX), 0xffff);
        assert_eq!(fold(0x1_fffe), 0xffff);
    }

    /// [RFC 1071 section 3](https://www.rfc-editor.org/rfc/rfc1071#section-3)'s example: 00
    /// 01 f2 03 f4 f5 f6 f7 sums to ddf2.
    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data, 0)), 0xddf2);
    }

    /// A SYN from 10.0.0.1:12345 to 10.0.0.2:80, checksum worked by hand:
    /// pseudo 0a00+0001+0a00+0002+0006+0014 = 0x141d; header
    /// 3039+0050+0000+0001+0000+0000+5002+ffff+0000+0000 = 0x1_808b -> 0x808c;
    /// total 0x94a9, complement 0x6b56.
    #[test]
    fn known_tcp_packet() {
        let mut seg = [
            0x30, 0x39, 0x00, 0x50, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x50, 0x02,
            0xff, 0xff, 0x00, 0x00, 0x00, 0x00,
        ];
        let src = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let dst = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        fill_tcp(src, dst, &mut seg);
        assert_eq!(&seg[16..18], &[0x6b, 0x56]);
        assert!(verify_tcp(src, dst, &seg));
        seg[4] ^= 1;
        assert!(!verify_tcp(src, dst, &seg));
    }

    /// The IPv4 header from RFC 1071-era literature (Wikipedia's example):
    /// 4500 0073 0000 4000 4011 [b861] c0a8 0001 c0a8 00c7.
    #[test]
    fn known_ipv4_header() {
        let hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(fold(sum(&hdr, 0)), 0xffff);
    }

    fn v6(last: u16) -> IpAddr {
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last))
    }

    proptest! {
        #[test]
        fn fill_then_verify(
            mut seg in proptest::collection::vec(any::<u8>(), 20..600),
            a in any::<u32>(), b in any::<u32>(), use_v6 in any::<bool>(),
        ) {
            let (src, dst) = if use_v6 {
                (v6(a as u16), v6(b as u16))
            } else {
                (IpAddr::V4(a.into()), IpAddr::V4(b.into()))
            };
            fill_tcp(src, dst, &mut seg);
            prop_assert!(verify_tcp(src, dst, &seg));
        }

        #[test]
        fn partial_then_device_finish(
            mut seg in proptest::collection::vec(any::<u8>(), 20..600),
            a in any::<u32>(), b in any::<u32>(),
        ) {
            let (src, dst) = (IpAddr::V4(a.into()), IpAddr::V4(b.into()));
            fill_tcp_partial(src, dst, &mut seg);
            // A device sums from the TCP header with the partial sum in place.
            let c = !fold(sum(&seg, 0));
            seg[16..18].copy_from_slice(&c.to_be_bytes());
            prop_assert!(verify_tcp(src, dst, &seg));
        }
    }

    #[test]
    fn short_segments_do_not_panic() {
        let a = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let mut short = [0u8; 10];
        fill_tcp(a, a, &mut short);
        fill_tcp_partial(a, a, &mut short);
        assert!(!verify_tcp(a, a, &short));
    }
}
