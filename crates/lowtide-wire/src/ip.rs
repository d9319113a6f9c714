//! IPv4 (RFC 791) and IPv6 (RFC 8200) headers.

use crate::{checksum, WireError};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IPv6's next-header number for ICMPv6.
pub const PROTO_ICMPV6: u8 = 58;
/// Length of an IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = 20;
/// Length of the fixed IPv6 header.
pub const IPV6_HEADER_LEN: usize = 40;
/// IPv6's "no next header" (`NEXTHDR_NONE`, RFC 8200 section 4.7).
pub const NEXTHDR_NONE: u8 = 59;
/// The extension headers of `ipv6_ext_hdr` but "no next header": hop-by-hop
/// options, routing, fragment, authentication, destination options.
const IPV6_EXT_HEADERS: [u8; 5] = [0, 43, 44, 51, 60];

/// A parsed IPv4 or IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRepr {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Upper-layer protocol (IPv4 protocol / IPv6 next header).
    pub protocol: u8,
    /// TTL or hop limit.
    pub hop_limit: u8,
    /// The two ECN bits of the TOS / traffic class byte.
    pub ecn: u8,
    /// The TOS / traffic class byte less its ECN bits (the DSCP in its place,
    /// [RFC 2474 section 3](https://www.rfc-editor.org/rfc/rfc2474#section-3)): what
    /// Linux reads as `ip_hdr(skb)->tos` or `ipv6_get_dsfield` with `ecn` cleared.
    pub tos: u8,
    /// Header length in bytes (IPv4 IHL*4, including options; 40 for IPv6).
    pub header_len: usize,
    /// Length of the upper-layer payload in bytes.
    pub payload_len: usize,
}

impl IpRepr {
    /// Parses the IP header at the start of `packet` (version from the first nibble).
    ///
    /// Verifies the IPv4 header checksum when `verify_csum`. Bytes after the length the
    /// header claims (link padding) are ignored; a packet shorter than it is
    /// `Truncated`. IPv4 fragments ([`IpRepr::parse_input`] takes them) and IPv6
    /// extension headers (hop-by-hop, routing, fragment, authentication, destination
    /// options) are `Unsupported`; any other
    /// protocol or next header parses (the caller checks `protocol`).
    pub fn parse(packet: &[u8], verify_csum: bool) -> Result<IpRepr, WireError> {
        IpRepr::parse_apart(packet, 0, verify_csum)
    }

    /// [`IpRepr::parse`] for the IP layer's input, which follows what `parse`
    /// refuses: an IPv4 fragment (its header, and where the fragment's bytes go in
    /// the datagram, `None` for a whole datagram; the header's `payload_len` is the
    /// fragment's own), and an IPv6 packet with extension headers (`protocol` is
    /// then the fixed header's next header, `header_len` 40: the caller walks them).
    pub fn parse_input(
        packet: &[u8],
        verify_csum: bool,
    ) -> Result<(IpRepr, Option<Ipv4Frag>), WireError> {
        match packet.first().map(|b| b >> 4) {
            Some(4) => parse_v4_frag(packet, packet.len(), verify_csum),
            Some(6) => parse_v6_ext(packet, packet.len()).map(|ip| (ip, None)),
            _ => IpRepr::parse(packet, verify_csum).map(|ip| (ip, None)),
        }
    }

    /// [`IpRepr::parse`] for a packet whose last `apart` bytes are kept apart from
    /// `headers` (a payload referenced, not copied, behind its headers): the lengths
    /// are checked against `headers.len() + apart`.
    pub fn parse_apart(
        headers: &[u8],
        apart: usize,
        verify_csum: bool,
    ) -> Result<IpRepr, WireError> {
        let avail = headers.len() + apart;
        match headers.first().map(|b| b >> 4) {
            None => Err(WireError::Truncated),
            Some(4) => parse_v4(headers, avail, verify_csum),
            Some(6) => parse_v6(headers, avail),
            Some(_) => Err(WireError::Malformed),
        }
    }

    /// The header length `emit` writes for this address family (20 or 40).
    pub fn emit_len(&self) -> usize {
        match self.src {
            IpAddr::V4(_) => IPV4_HEADER_LEN,
            IpAddr::V6(_) => IPV6_HEADER_LEN,
        }
    }

    /// Writes the header into `buf[..self.emit_len()]`: the TOS / traffic class byte
    /// from `tos` and `ecn`; IPv4 with DF set, the given identification and a
    /// correct header checksum; IPv6 with flow label 0.
    /// `self.payload_len` gives the length fields.
    ///
    /// If `src` and `dst` are of different families, `dst` is converted to `src`'s
    /// (IPv4-mapped IPv6 addresses; an unmappable IPv6 address becomes 0.0.0.0).
    /// Panics if `buf` is shorter than `emit_len()`.
    pub fn emit(&self, buf: &mut [u8], ipv4_id: u16) {
        match self.src {
            IpAddr::V4(src) => self.emit_v4(&mut buf[..IPV4_HEADER_LEN], src, ipv4_id),
            IpAddr::V6(src) => self.emit_v6(&mut buf[..IPV6_HEADER_LEN], src),
        }
    }

    /// [RFC 791 section 3.1](https://www.rfc-editor.org/rfc/rfc791#section-3.1): the IPv4
    /// header without options.
    fn emit_v4(&self, buf: &mut [u8], src: Ipv4Addr, id: u16) {
        let dst = match self.dst {
            IpAddr::V4(d) => d,
            IpAddr::V6(d) => d.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED),
        };
        let total = (IPV4_HEADER_LEN + self.payload_len) as u16;
        buf[0] = 0x45;
        buf[1] = (self.tos & !0x03) | (self.ecn & 0x03);
        buf[2..4].copy_from_slice(&total.to_be_bytes());
        buf[4..6].copy_from_slice(&id.to_be_bytes());
        buf[6..8].copy_from_slice(&IPV4_DF.to_be_bytes());
        buf[8] = self.hop_limit;
        buf[9] = self.protocol;
        buf[10..12].fill(0);
        buf[12..16].copy_from_slice(&src.octets());
        buf[16..20].copy_from_slice(&dst.octets());
        fill_ipv4_checksum(buf);
    }

    /// [RFC 8200 section 3](https://www.rfc-editor.org/rfc/rfc8200#section-3): the fixed
    /// IPv6 header, traffic class from `tos` and `ecn`, flow label 0.
    fn emit_v6(&self, buf: &mut [u8], src: Ipv6Addr) {
        let dst = match self.dst {
            IpAddr::V6(d) => d,
            IpAddr::V4(d) => d.to_ipv6_mapped(),
        };
        // The traffic class straddles bytes 0 and 1.
        let tc = (self.tos & !0x03) | (self.ecn & 0x03);
        buf[0] = 0x60 | (tc >> 4);
        buf[1] = tc << 4;
        buf[2..4].fill(0);
        buf[4..6].copy_from_slice(&(self.payload_len as u16).to_be_bytes());
        buf[6] = self.protocol;
        buf[7] = self.hop_limit;
        buf[8..24].copy_from_slice(&src.octets());
        buf[24..40].copy_from_slice(&dst.octets());
    }
}

/// The IPv4 "don't fragment" flag in the flags/fragment-offset word.
pub const IPV4_DF: u16 = 0x4000;

/// Rewrites an emitted IPv6 header's traffic class for its socket
/// (`IPV6_TCLASS`): the six upper bits from `tclass`, the ECN bits staying. Anything
/// not an IPv6 header is left alone (IPv6 has no header checksum).
pub fn set_ipv6_tclass(header: &mut [u8], tclass: u8) {
    if header.len() < 2 || header[0] >> 4 != 6 {
        return;
    }
    let old = (header[0] << 4) | (header[1] >> 4);
    let tc = (tclass & !0x03) | (old & 0x03);
    header[0] = 0x60 | (tc >> 4);
    header[1] = (tc << 4) | (header[1] & 0x0f);
}

/// Writes the 20-bit flow label of an emitted IPv6 header (`ip6_flow_hdr`);
/// anything not an IPv6 header is left alone.
pub fn set_ipv6_flowlabel(header: &mut [u8], label: u32) {
    if header.len() < 4 || header[0] >> 4 != 6 {
        return;
    }
    header[1] = (header[1] & 0xf0) | ((label >> 16) & 0x0f) as u8;
    header[2] = (label >> 8) as u8;
    header[3] = label as u8;
}

/// The 20-bit flow label of an IPv6 header (`ip6_flowlabel`); 0 for anything
/// else.
pub fn ipv6_flowlabel(header: &[u8]) -> u32 {
    if header.len() < 4 || header[0] >> 4 != 6 {
        return 0;
    }
    u32::from_be_bytes([0, header[1] & 0x0f, header[2], header[3]])
}

/// Rewrites an emitted IPv4 header (`header[..20]`) for its socket: the TOS byte's
/// six upper bits from `tos` (the ECN bits stay), DF set or clear as `df`, and the
/// header checksum again. Anything not an IPv4 header is left alone.
pub fn set_ipv4_tos_df(header: &mut [u8], tos: u8, df: bool) {
    if header.len() < IPV4_HEADER_LEN || header[0] >> 4 != 4 {
        return;
    }
    header[1] = (tos & !0x03) | (header[1] & 0x03);
    let mut frag = u16::from_be_bytes([header[6], header[7]]) & !IPV4_DF;
    if df {
        frag |= IPV4_DF;
    }
    header[6..8].copy_from_slice(&frag.to_be_bytes());
    let ihl = ((header[0] & 0x0f) as usize * 4).clamp(IPV4_HEADER_LEN, header.len());
    fill_ipv4_checksum(&mut header[..ihl]);
}
/// The IPv4 "more fragments" flag.
const IPV4_MF: u16 = 0x2000;
/// The IPv4 fragment offset mask.
const IPV4_FRAG_OFFSET: u16 = 0x1fff;

/// Where an IPv4 fragment's bytes go in its datagram
/// ([RFC 791 section 3.2](https://www.rfc-editor.org/rfc/rfc791#section-3.2)): the
/// identification, the offset in bytes (the field's 8-byte units), and the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Frag {
    /// The identification field.
    pub id: u16,
    /// The fragment offset in bytes.
    pub offset: u32,
    /// More fragments follow (`IP_MF`).
    pub more: bool,
    /// Don't fragment (`IP_DF`), set on a fragment.
    pub df: bool,
}

impl Ipv4Frag {
    /// The fragment word of a whole IPv4 header, `None` if it is not a fragment
    /// (`ip_is_fragment`: MF or an offset). The caller checked the header's length.
    fn of(header: &[u8]) -> Option<Ipv4Frag> {
        let frag = be16(header, 6);
        (frag & (IPV4_MF | IPV4_FRAG_OFFSET) != 0).then_some(Ipv4Frag {
            id: be16(header, 4),
            offset: u32::from(frag & IPV4_FRAG_OFFSET) * 8,
            more: frag & IPV4_MF != 0,
            df: frag & IPV4_DF != 0,
        })
    }
}

/// Reads a big-endian `u16` at `at` (caller checked the length).
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Recomputes the header checksum of the IPv4 header `header` (all of it, options
/// included; [RFC 791 section 3.1](https://www.rfc-editor.org/rfc/rfc791#section-3.1)).
/// Does nothing if shorter than 20 bytes.
pub fn fill_ipv4_checksum(header: &mut [u8]) {
    if header.len() < IPV4_HEADER_LEN {
        return;
    }
    header[10..12].fill(0);
    let c = !checksum::fold(checksum::sum(header, 0));
    header[10..12].copy_from_slice(&c.to_be_bytes());
}

/// [RFC 791 section 3.1](https://www.rfc-editor.org/rfc/rfc791#section-3.1); `avail` bytes
/// of packet exist (`packet` holds at least the header).
fn parse_v4(packet: &[u8], avail: usize, verify_csum: bool) -> Result<IpRepr, WireError> {
    match parse_v4_frag(packet, avail, verify_csum)? {
        (ip, None) => Ok(ip),
        (_, Some(_)) => Err(WireError::Unsupported),
    }
}

/// [`parse_v4`] that returns a fragment's place in its datagram instead of refusing
/// it.
fn parse_v4_frag(
    packet: &[u8],
    avail: usize,
    verify_csum: bool,
) -> Result<(IpRepr, Option<Ipv4Frag>), WireError> {
    if packet.len() < IPV4_HEADER_LEN {
        return Err(WireError::Truncated);
    }
    let header_len = (packet[0] & 0x0f) as usize * 4;
    if header_len < IPV4_HEADER_LEN {
        return Err(WireError::Malformed);
    }
    if packet.len() < header_len {
        return Err(WireError::Truncated);
    }
    // ip_rcv_core's order: the header checksum, then the total length.
    if verify_csum && checksum::fold(checksum::sum(&packet[..header_len], 0)) != 0xffff {
        return Err(WireError::BadChecksum);
    }
    let total = be16(packet, 2) as usize;
    if total > avail {
        return Err(WireError::Truncated);
    }
    if total < header_len {
        return Err(WireError::Malformed);
    }
    let frag = Ipv4Frag::of(packet);
    let addr =
        |at: usize| Ipv4Addr::new(packet[at], packet[at + 1], packet[at + 2], packet[at + 3]);
    let ip = IpRepr {
        src: IpAddr::V4(addr(12)),
        dst: IpAddr::V4(addr(16)),
        protocol: packet[9],
        hop_limit: packet[8],
        ecn: packet[1] & 0x03,
        tos: packet[1] & !0x03,
        header_len,
        payload_len: total - header_len,
    };
    Ok((ip, frag))
}

/// [RFC 8200 section 3](https://www.rfc-editor.org/rfc/rfc8200#section-3); the upper
/// layer directly after the fixed header (no extension header) is handled.
fn parse_v6(packet: &[u8], avail: usize) -> Result<IpRepr, WireError> {
    let ip = parse_v6_ext(packet, avail)?;
    // An extension header is not followed here (the stack's input walks them:
    // ipv6_parse_hopopts, ip6_protocol_deliver_rcu's resubmit); any other next
    // header is the upper layer's, for the stack to deliver or answer as unknown.
    if IPV6_EXT_HEADERS.contains(&ip.protocol) {
        return Err(WireError::Unsupported);
    }
    Ok(ip)
}

/// [`parse_v6`] that leaves extension headers to the caller.
fn parse_v6_ext(packet: &[u8], avail: usize) -> Result<IpRepr, WireError> {
    if packet.len() < IPV6_HEADER_LEN {
        return Err(WireError::Truncated);
    }
    let payload_len = be16(packet, 4) as usize;
    if IPV6_HEADER_LEN + payload_len > avail {
        return Err(WireError::Truncated);
    }
    let addr = |at: usize| {
        let mut o = [0u8; 16];
        o.copy_from_slice(&packet[at..at + 16]);
        Ipv6Addr::from(o)
    };
    Ok(IpRepr {
        src: IpAddr::V6(addr(8)),
        dst: IpAddr::V6(addr(24)),
        protocol: packet[6],
        hop_limit: packet[7],
        ecn: (packet[1] >> 4) & 0x03,
        tos: ((packet[0] << 4) | (packet[1] >> 4)) & !0x03,
        header_len: IPV6_HEADER_LEN,
        payload_len,
    })
}

/// `INET_ECN_set_ce`: a router's AQM marks Congestion Experienced
/// ([RFC 3168 section 5](https://www.rfc-editor.org/rfc/rfc3168#section-5)) on an
/// ECN-capable packet instead of dropping it. Sets CE on an IPv4 or IPv6 packet whose ECN
/// field is ECT(0) or ECT(1), fixing the IPv4 header checksum; false (nothing changed) for
/// a not-ECT or already-CE packet or a buffer too short to hold the header.
pub fn mark_ce(packet: &mut [u8]) -> bool {
    match packet.first().map(|b| b >> 4) {
        Some(4) if packet.len() >= IPV4_HEADER_LEN => {
            let ecn = packet[1] & 0x03;
            if ecn == 0 || ecn == 3 {
                return false;
            }
            packet[1] |= 0x03;
            let ihl = ((packet[0] & 0x0f) as usize * 4).clamp(IPV4_HEADER_LEN, packet.len());
            fill_ipv4_checksum(&mut packet[..ihl]);
            true
        }
        Some(6) if packet.len() >= IPV6_HEADER_LEN => {
            let ecn = (packet[1] >> 4) & 0x03;
            if ecn == 0 || ecn == 3 {
                return false;
            }
            packet[1] |= 0x30;
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn mark_ce_marks_only_ect_packets_and_keeps_the_checksum_valid() {
        for v6 in [false, true] {
            for (ecn, marked) in [(0u8, false), (1, true), (2, true), (3, false)] {
                let ip = IpRepr {
                    src: if v6 {
                        "::1".parse().unwrap()
                    } else {
                        "10.0.0.1".parse().unwrap()
                    },
                    dst: if v6 {
                        "::2".parse().unwrap()
                    } else {
                        "10.0.0.2".parse().unwrap()
                    },
                    protocol: PROTO_TCP,
                    hop_limit: 64,
                    ecn,
                    tos: 0,
                    header_len: 0,
                    payload_len: 0,
                };
                let mut buf = vec![0u8; ip.emit_len()];
                ip.emit(&mut buf, 7);
                assert_eq!(mark_ce(&mut buf), marked, "v6 {v6} ecn {ecn}");
                let back = IpRepr::parse(&buf, true).expect("checksum still valid");
                assert_eq!(back.ecn, if marked { 3 } else { ecn });
            }
        }
        assert!(!mark_ce(&mut [0x45, 0x02]), "too short");
    }
    use super::*;
    use proptest::prelude::*;

    fn v4_repr() -> IpRepr {
        IpRepr {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            protocol: PROTO_TCP,
            hop_limit: 64,
            ecn: 2,
            tos: 0,
            header_len: IPV4_HEADER_LEN,
            payload_len: 8,
        }
    }

    fn emitted(repr: &IpRepr) -> Vec<u8> {
        let mut buf = vec![0u8; repr.emit_len() + repr.payload_len];
        repr.emit(&mut buf, 0x1234);
        buf
    }

    fn arb_repr() -> impl Strategy<Value = IpRepr> {
        let v4 = (
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
            any::<u8>(),
            0u8..4,
            0usize..1500,
            0u8..64,
        )
            .prop_map(|(s, d, proto, hop, ecn, len, dscp)| IpRepr {
                src: IpAddr::V4(s.into()),
                dst: IpAddr::V4(d.into()),
                protocol: proto,
                hop_limit: hop,
                ecn,
                tos: dscp << 2,
                header_len: IPV4_HEADER_LEN,
                payload_len: len,
            });
        let v6 = (
            any::<u128>(),
            any::<u128>(),
            any::<u8>(),
            0u8..4,
            0usize..1500,
            0u8..64,
        )
            .prop_map(|(s, d, hop, ecn, len, dscp)| IpRepr {
                src: IpAddr::V6(s.into()),
                dst: IpAddr::V6(d.into()),
                protocol: PROTO_TCP,
                hop_limit: hop,
                ecn,
                tos: dscp << 2,
                header_len: IPV6_HEADER_LEN,
                payload_len: len,
            });
        prop_oneof![v4, v6]
    }

    proptest! {
        #[test]
        fn round_trip(repr in arb_repr(), padding in 0usize..8) {
            let mut buf = emitted(&repr);
            buf.extend(std::iter::repeat_n(0xaa, padding));
            prop_assert_eq!(IpRepr::parse(&buf, true), Ok(repr));
        }

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = IpRepr::parse(&data, true);
            let _ = IpRepr::parse(&data, false);
        }

        #[test]
        fn mutations_never_panic(
            repr in arb_repr(), at in any::<prop::sample::Index>(), byte in any::<u8>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut buf = emitted(&repr);
            let i = at.index(buf.len());
            buf[i] = byte;
            buf.truncate(cut.index(buf.len() + 1));
            if let Ok(r) = IpRepr::parse(&buf, false) {
                prop_assert!(r.header_len + r.payload_len <= buf.len());
            }
        }
    }

    #[test]
    fn ipv6_flowlabel_round_trips_beside_the_traffic_class() {
        let mut h = vec![0u8; 40];
        h[0] = 0x6b;
        h[1] = 0x80; // traffic class 0xb8
        set_ipv6_flowlabel(&mut h, 0xfedcb);
        assert_eq!(ipv6_flowlabel(&h), 0xfedcb);
        assert_eq!((h[0], h[1] & 0xf0), (0x6b, 0x80), "traffic class kept");
        let mut v4 = vec![0x45u8; 20];
        set_ipv6_flowlabel(&mut v4, 1);
        assert_eq!(v4, vec![0x45u8; 20]);
        assert_eq!(ipv6_flowlabel(&v4), 0);
    }

    #[test]
    fn emit_v4_fields() {
        let buf = emitted(&v4_repr());
        assert_eq!(&buf[..10], &[0x45, 2, 0, 28, 0x12, 0x34, 0x40, 0, 64, 6]);
        assert_eq!(checksum::fold(checksum::sum(&buf[..20], 0)), 0xffff);
    }

    #[test]
    fn v4_errors() {
        let good = emitted(&v4_repr());
        assert_eq!(IpRepr::parse(&[], false), Err(WireError::Truncated));
        assert_eq!(IpRepr::parse(&good[..19], false), Err(WireError::Truncated));
        // Claims 28 bytes, has 27.
        assert_eq!(IpRepr::parse(&good[..27], false), Err(WireError::Truncated));
        let mut b = good.clone();
        b[0] = 0x55;
        assert_eq!(IpRepr::parse(&b, false), Err(WireError::Malformed));
        let mut b = good.clone();
        b[0] = 0x44;
        assert_eq!(IpRepr::parse(&b, false), Err(WireError::Malformed));
        let mut b = good.clone();
        b[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(IpRepr::parse(&b, false), Err(WireError::Malformed));
        let mut b = good.clone();
        b[8] = 63;
        assert_eq!(IpRepr::parse(&b, true), Err(WireError::BadChecksum));
        assert!(IpRepr::parse(&b, false).is_ok());
    }

    #[test]
    fn tos_and_df_rewrite_keeps_ecn_and_checksum() {
        let mut b = vec![0u8; 20];
        v4_repr().emit(&mut b, 7);
        let ecn = b[1] & 3;
        set_ipv4_tos_df(&mut b, 0x10 | 3, false);
        assert_eq!(b[1], 0x10 | ecn, "TOS bits taken, ECN bits kept");
        assert_eq!(u16::from_be_bytes([b[6], b[7]]) & IPV4_DF, 0);
        assert!(IpRepr::parse(&[&b[..], &[0u8; 64][..]].concat(), true).is_ok());
        set_ipv4_tos_df(&mut b, 0, true);
        assert_eq!(u16::from_be_bytes([b[6], b[7]]), IPV4_DF);
        assert_eq!(b[1], ecn);
        let mut v6 = vec![0x60u8; 40];
        set_ipv4_tos_df(&mut v6, 0xfc, false);
        assert_eq!(v6, vec![0x60u8; 40], "IPv6 untouched");
    }

    #[test]
    fn v4_fragments_unsupported() {
        for frag in [IPV4_MF, 1, IPV4_DF | 0x10, IPV4_MF | IPV4_DF] {
            let mut b = emitted(&v4_repr());
            b[6..8].copy_from_slice(&frag.to_be_bytes());
            fill_ipv4_checksum(&mut b[..20]);
            assert_eq!(
                IpRepr::parse(&b, true),
                Err(WireError::Unsupported),
                "{frag:#x}"
            );
            let (ip, f) = IpRepr::parse_input(&b, true).unwrap();
            assert_eq!(ip, IpRepr::parse(&emitted(&v4_repr()), true).unwrap());
            let f = f.expect("a fragment");
            assert_eq!(
                f.offset,
                u32::from(frag & IPV4_FRAG_OFFSET) * 8,
                "{frag:#x}"
            );
            assert_eq!((f.more, f.df), (frag & IPV4_MF != 0, frag & IPV4_DF != 0));
        }
        let whole = emitted(&v4_repr());
        assert_eq!(IpRepr::parse_input(&whole, true).unwrap().1, None);
    }

    #[test]
    fn v4_options_accepted() {
        let mut b = emitted(&v4_repr());
        // Insert four option bytes (NOP NOP NOP EOL) after the fixed header.
        b.splice(20..20, [1, 1, 1, 0]);
        b[0] = 0x46;
        b[2..4].copy_from_slice(&32u16.to_be_bytes());
        fill_ipv4_checksum(&mut b[..24]);
        let r = IpRepr::parse(&b, true).unwrap();
        assert_eq!((r.header_len, r.payload_len), (24, 8));
        // IHL past the buffer.
        b[0] = 0x4f;
        assert_eq!(IpRepr::parse(&b, false), Err(WireError::Truncated));
    }

    #[test]
    fn v6_errors() {
        let repr = IpRepr {
            src: IpAddr::V6(Ipv6Addr::LOCALHOST),
            dst: IpAddr::V6(Ipv6Addr::LOCALHOST),
            header_len: IPV6_HEADER_LEN,
            ..v4_repr()
        };
        let good = emitted(&repr);
        assert_eq!(good[0], 0x60);
        assert_eq!(good[1], 0x20);
        assert_eq!(IpRepr::parse(&good[..39], false), Err(WireError::Truncated));
        assert_eq!(IpRepr::parse(&good[..47], false), Err(WireError::Truncated));
        for nh in [0u8, 43, 44, 51, 60] {
            let mut b = good.clone();
            b[6] = nh;
            assert_eq!(IpRepr::parse(&b, false), Err(WireError::Unsupported));
        }
        // An upper layer lowtide has no handler for parses: the stack answers it.
        for nh in [PROTO_ICMPV6, crate::udp::PROTO_UDP, NEXTHDR_NONE, 1, 41, 47] {
            let mut b = good.clone();
            b[6] = nh;
            assert_eq!(IpRepr::parse(&b, false).map(|r| r.protocol), Ok(nh));
        }
    }

    #[test]
    fn mixed_families_do_not_panic() {
        let mut r = v4_repr();
        r.dst = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let b = emitted(&r);
        assert_eq!(&b[16..20], &[0, 0, 0, 0]);
        r.src = IpAddr::V6(Ipv6Addr::LOCALHOST);
        r.dst = IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4));
        let b = emitted(&r);
        assert_eq!(
            IpRepr::parse(&b, false).unwrap().dst,
            IpAddr::V6("::ffff:1.2.3.4".parse().unwrap())
        );
    }
}
