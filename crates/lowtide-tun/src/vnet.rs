//! The `virtio_net_hdr` (`include/uapi/linux/virtio_net.h`) that precedes every packet
//! read from or written to an `IFF_VNET_HDR` TUN device: checksum offload
//! (`VIRTIO_NET_HDR_F_NEEDS_CSUM`) and segmentation offload (`gso_type`, `gso_size`).
//!
//! # Layout and byte order
//!
//! ```text
//! struct virtio_net_hdr {
//!     __u8   flags;        // VIRTIO_NET_HDR_F_*
//!     __u8   gso_type;     // VIRTIO_NET_HDR_GSO_*
//!     __u16  hdr_len;      // length of the headers (a hint, see below)
//!     __u16  gso_size;     // payload bytes per segment
//!     __u16  csum_start;   // checksum from this offset to the end of the packet ...
//!     __u16  csum_offset;  // ... is stored at csum_start + csum_offset
//! };                       // 10 bytes
//! ```
//!
//! The 16-bit fields are in the device's "vnet byte order": for a tun device, native
//! order (`virtio_legacy_is_little_endian()`), unless `TUNSETVNETLE`/`TUNSETVNETBE`
//! was used (`tun_is_little_endian()` in `drivers/net/tun.c`).
//! [`crate::device::TunDevice::open`] sets `TUNSETVNETLE`, so this module always reads
//! and writes **little-endian**, on every host.
//!
//! # The checksum convention
//!
//! With `NEEDS_CSUM`, the checksum field at `csum_start + csum_offset` holds the
//! *folded, uncomplemented* pseudo-header sum (Linux's `CHECKSUM_PARTIAL`:
//! `__tcp_v4_send_check` sets `th->check = ~tcp_v4_check(skb->len, saddr, daddr, 0)`,
//! and `tcp_v4_check` returns the complemented fold, so the stored value is the plain
//! fold). The pseudo-header length is the TCP length of the *whole* packet, even for a
//! GSO super-packet: `tcp_gso_segment` (`net/ipv4/tcp_offload.c`) subtracts the old
//! length and adds each segment's length. The device (here: the kernel) adds the sum
//! of the bytes from `csum_start` to the end and stores the complement. This is exactly
//! [`lowtide_wire::checksum::fill_tcp_partial`] and what lowtide's
//! [`lowtide::Transmit`] carries; `tests/device.rs` checks it by having the kernel
//! forward such packets to a device without offload, where it must finish them
//! (locally delivered `NEEDS_CSUM` packets are trusted without any check, so a
//! wrong partial sum would go unnoticed there).

use lowtide::RxChecksum;
use lowtide_wire::checksum::{self, TCP_CHECKSUM_OFFSET};
use lowtide_wire::gso;
use lowtide_wire::tcp::TcpFlags;
use lowtide_wire::WireError;
use std::net::IpAddr;

/// `flags`: the checksum at `csum_start + csum_offset` is partial (pseudo-header
/// only) and must be completed over `csum_start..` (Linux `CHECKSUM_PARTIAL`).
pub const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// `flags`: the checksums were verified by the device (Linux
/// `CHECKSUM_UNNECESSARY`).
pub const VIRTIO_NET_HDR_F_DATA_VALID: u8 = 2;
/// `gso_type`: not a GSO packet.
pub const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
/// `gso_type`: a TCP over IPv4 super-packet (`SKB_GSO_TCPV4`).
pub const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
/// `gso_type`: a UDP fragmentation-offload packet (`SKB_GSO_UDP`; lowtide never
/// negotiates it).
pub const VIRTIO_NET_HDR_GSO_UDP: u8 = 3;
/// `gso_type`: a TCP over IPv6 super-packet (`SKB_GSO_TCPV6`).
pub const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
/// `gso_type`: a UDP super-packet of several datagrams (`SKB_GSO_UDP_L4`, Linux
/// 6.2+ on TUN with `TUN_F_USO4`/`TUN_F_USO6`).
pub const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;
/// `gso_type` flag: the super-packet has CWR set on its first segment
/// (`SKB_GSO_TCP_ECN`).
pub const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

/// A parsed `struct virtio_net_hdr`, fields in host order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_*` bits.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`, possibly with [`VIRTIO_NET_HDR_GSO_ECN`].
    pub gso_type: u8,
    /// Length of the headers (IP + TCP). Only a hint: on packets the kernel sends us,
    /// `virtio_net_hdr_from_skb` sets it to `skb_headlen()` (the linear part of the
    /// skb) for GSO packets and 0 otherwise. Observed: 0 on single packets, exactly
    /// IP + TCP header length on TSO super-packets.
    pub hdr_len: u16,
    /// Payload bytes per segment of a GSO packet (0 without GSO).
    pub gso_size: u16,
    /// Where checksumming starts (the IP header length for TCP), with `NEEDS_CSUM`.
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start` (16 for TCP), with `NEEDS_CSUM`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Size of `struct virtio_net_hdr` on the wire (the value given to
    /// `TUNSETVNETHDRSZ`).
    pub const LEN: usize = 10;

    /// Splits `buf` (as read from the device) into the header and the IP packet after
    /// it. Only the length is checked (`Truncated` below 10 bytes): the fields are
    /// taken as they are; [`finish_rx_checksum`] checks the checksum offsets against
    /// the packet.
    pub fn parse(buf: &[u8]) -> Result<(VnetHdr, &[u8]), WireError> {
        let (h, rest) = buf
            .split_first_chunk::<{ VnetHdr::LEN }>()
            .ok_or(WireError::Truncated)?;
        let le = |at: usize| u16::from_le_bytes([h[at], h[at + 1]]);
        let hdr = VnetHdr {
            flags: h[0],
            gso_type: h[1],
            hdr_len: le(2),
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
        };
        Ok((hdr, rest))
    }

    /// Writes the header (little-endian, see the module docs) into `out`.
    pub fn emit(&self, out: &mut [u8; VnetHdr::LEN]) {
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        out[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        out[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        out[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }

    /// The header as bytes (see [`VnetHdr::emit`]).
    pub fn to_bytes(&self) -> [u8; VnetHdr::LEN] {
        let mut b = [0; VnetHdr::LEN];
        self.emit(&mut b);
        b
    }

    /// The header for a packet whose checksums are complete and that is a single
    /// segment: all zero (no `NEEDS_CSUM`, `GSO_NONE`). What to send with
    /// [`crate::device::Offload::None`].
    pub fn plain() -> VnetHdr {
        VnetHdr::default()
    }

    /// The header for an IPv4/IPv6 + TCP packet from lowtide ([`lowtide::Transmit`]):
    /// its TCP checksum field holds the pseudo-header sum (see the module docs), so
    /// `NEEDS_CSUM` with `csum_start` = IP header length and `csum_offset` = 16.
    ///
    /// If `gso_size > 0` and the TCP payload is longer than `gso_size`, also
    /// `gso_type` TCPV4 or TCPV6 (by IP version, plus [`VIRTIO_NET_HDR_GSO_ECN`] if
    /// CWR is set, as `tcp_ecn_send` marks `SKB_GSO_TCP_ECN`) and `gso_size`;
    /// otherwise `GSO_NONE` (the kernel would treat a "GSO" packet that fits in one
    /// segment as a plain one anyway, see `virtio_net_hdr_to_skb`). `hdr_len` is the
    /// IP + TCP header length in both cases.
    ///
    /// Errors: the packet does not parse as IP (`IpRepr::parse`), is not TCP
    /// (`Unsupported`), or its TCP header is cut short (`Truncated`/`Malformed`).
    pub fn for_transmit(packet: &[u8], gso_size: u16) -> Result<VnetHdr, WireError> {
        VnetHdr::for_transmit_apart(packet, 0, gso_size)
    }

    /// [`VnetHdr::for_transmit`] for a packet whose last `apart` bytes (payload, a
    /// [`lowtide::Transmit::payload`]) are kept apart from `headers`, which must end
    /// exactly where that payload starts.
    pub fn for_transmit_apart(
        headers: &[u8],
        apart: usize,
        gso_size: u16,
    ) -> Result<VnetHdr, WireError> {
        let (ip, payload) = gso::tcp_layout(headers, apart)?;
        let tcp_start = ip.header_len;
        let mut hdr = VnetHdr {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_NONE,
            hdr_len: payload.start as u16,
            gso_size: 0,
            csum_start: tcp_start as u16,
            csum_offset: TCP_CHECKSUM_OFFSET as u16,
        };
        if gso_size > 0 && payload.len() > gso_size as usize {
            hdr.gso_type = match ip.src {
                IpAddr::V4(_) => VIRTIO_NET_HDR_GSO_TCPV4,
                IpAddr::V6(_) => VIRTIO_NET_HDR_GSO_TCPV6,
            };
            if headers[tcp_start + 13] & TcpFlags::CWR.0 as u8 != 0 {
                hdr.gso_type |= VIRTIO_NET_HDR_GSO_ECN;
            }
            hdr.gso_size = gso_size;
        }
        Ok(hdr)
    }

    /// True if `NEEDS_CSUM` is set: the packet's checksum is partial.
    pub fn needs_csum(&self) -> bool {
        self.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0
    }

    /// The header of a UDP GSO super-packet lowtide writes (`packet`: IP header,
    /// UDP header whose checksum field holds the pseudo-header sum, payload;
    /// [`lowtide::Transmit`] with `gso_segs` > 1): `NEEDS_CSUM` at the UDP
    /// checksum, `gso_type` UDP_L4 with `gso_size`, as `virtio_net_hdr_from_skb`
    /// describes an `SKB_GSO_UDP_L4` skb.
    pub fn for_udp_gso(packet: &[u8], gso_size: u16) -> Result<VnetHdr, WireError> {
        let ip = lowtide_wire::ip::IpRepr::parse(packet, false)?;
        if ip.protocol != lowtide_wire::udp::PROTO_UDP || ip.payload_len < 8 {
            return Err(WireError::Unsupported);
        }
        Ok(VnetHdr {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_UDP_L4,
            hdr_len: (ip.header_len + 8) as u16,
            gso_size,
            csum_start: ip.header_len as u16,
            csum_offset: 6,
        })
    }

    /// Whether this is a UDP GSO super-packet (`gso_type` UDP_L4): its datagrams
    /// come from [`lowtide_wire::udp::gso_segment`] with `gso_size`.
    pub fn is_udp_gso(&self) -> bool {
        self.gso_type & !VIRTIO_NET_HDR_GSO_ECN == VIRTIO_NET_HDR_GSO_UDP_L4
    }

    /// True if this is a GSO super-packet (`gso_type` other than `GSO_NONE`, ECN bit
    /// ignored).
    pub fn is_gso(&self) -> bool {
        self.gso_type & !VIRTIO_NET_HDR_GSO_ECN != VIRTIO_NET_HDR_GSO_NONE
    }

    /// How lowtide should treat the checksums of a received packet:
    /// `Unnecessary` if `NEEDS_CSUM` (the kernel built the packet and trusts it; its
    /// TCP checksum field holds only a partial sum, so verifying would fail) or
    /// `DATA_VALID` (already verified), else `Verify`.
    ///
    /// With `Unnecessary` on a `NEEDS_CSUM` packet the TCP checksum is still partial:
    /// call [`finish_rx_checksum`] first if the packet is to be written out (pcap,
    /// forwarding).
    pub fn rx_checksum(&self) -> RxChecksum {
        if self.flags & (VIRTIO_NET_HDR_F_NEEDS_CSUM | VIRTIO_NET_HDR_F_DATA_VALID) != 0 {
            RxChecksum::Unnecessary
        } else {
            RxChecksum::Verify
        }
    }
}

/// Completes the partial checksum of a packet received with `NEEDS_CSUM`, in place,
/// as a virtio device does: the ones'-complement sum of `packet[csum_start..]` (the
/// checksum field holding the partial pseudo-header sum counts as part of the data)
/// is complemented and stored at `csum_start + csum_offset`. Afterwards the packet is
/// an ordinary wire packet (e.g. for pcap). Does nothing without `NEEDS_CSUM`.
///
/// `packet` is the IP packet (after the vnet header), exactly as read: bytes after the
/// IP length, if any, would be summed too, so pass the IP packet only.
///
/// For a GSO super-packet this gives the checksum of the super-packet as one (oversize)
/// TCP segment, since the kernel's partial sum uses the whole length. To cut a
/// super-packet into wire segments, it is not needed: [`lowtide_wire::gso::segment`]
/// recomputes each segment's checksum from scratch and accepts a partial, complete or
/// stale checksum field alike.
///
/// Errors (`Malformed`, packet untouched): the checksum field (2 bytes at
/// `csum_start + csum_offset`) does not lie inside the packet (the bounds
/// `skb_partial_csum_set` enforces).
pub fn finish_rx_checksum(hdr: &VnetHdr, packet: &mut [u8]) -> Result<(), WireError> {
    if !hdr.needs_csum() {
        return Ok(());
    }
    let start = hdr.csum_start as usize;
    let field = start + hdr.csum_offset as usize;
    if field + 2 > packet.len() {
        return Err(WireError::Malformed);
    }
    let c = !checksum::fold(checksum::sum(&packet[start..], 0));
    packet[field..field + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lowtide_wire::ip::IpRepr;
    use lowtide_wire::tcp::{TcpOptions, TcpRepr};
    use lowtide_wire::testing::{tcp_packet, Csum};

    /// An IP + TCP packet with `payload` bytes and the pseudo-header sum in the
    /// checksum field, as lowtide's `Transmit` carries it.
    fn packet(v6: bool, flags: u8, payload: usize) -> Vec<u8> {
        let (src, dst) = match v6 {
            true => ("[fd00::1]:1234", "[fd00::2]:80"),
            false => ("10.0.0.1:1234", "10.0.0.2:80"),
        };
        let tcp = TcpRepr {
            seq: 1,
            ack: 2,
            flags: TcpFlags(flags.into()),
            window: 100,
            options: TcpOptions {
                timestamp: Some((1, 2)),
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        };
        let payload: Vec<u8> = (0..payload).map(|i| (i * 13) as u8).collect();
        let (src, dst) = (src.parse().unwrap(), dst.parse().unwrap());
        tcp_packet(src, dst, &tcp, &payload, 7, Csum::Partial)
    }

    #[test]
    fn parse_hand_built_header() {
        // NEEDS_CSUM, TCPV4|ECN, hdr_len 52, gso_size 1448, csum 20/16, LE fields.
        let raw = [1, 0x81, 52, 0, 0xa8, 0x05, 20, 0, 16, 0, 0x45, 0x00];
        let (h, rest) = VnetHdr::parse(&raw).unwrap();
        let want = VnetHdr {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        assert_eq!(h, want);
        assert_eq!(rest, &[0x45, 0x00]);
        assert!(h.is_gso() && h.needs_csum());
        assert_eq!(h.to_bytes(), raw[..10]);
    }

    #[test]
    fn parse_short_input() {
        for n in 0..VnetHdr::LEN {
            assert_eq!(VnetHdr::parse(&[0xff; 12][..n]), Err(WireError::Truncated));
        }
        let (h, rest) = VnetHdr::parse(&[0; 10]).unwrap();
        assert_eq!((h, rest.len()), (VnetHdr::plain(), 0));
    }

    #[test]
    fn emit_parse_round_trip() {
        let h = VnetHdr {
            flags: 3,
            gso_type: 4,
            hdr_len: 0x1234,
            gso_size: 0xfedc,
            csum_start: 40,
            csum_offset: 16,
        };
        let b = h.to_bytes();
        assert_eq!(&b[2..4], &[0x34, 0x12], "little-endian");
        assert_eq!(VnetHdr::parse(&b).unwrap().0, h);
    }

    #[test]
    fn rx_checksum_mapping() {
        let with = |flags| VnetHdr {
            flags,
            ..VnetHdr::default()
        };
        assert_eq!(with(0).rx_checksum(), RxChecksum::Verify);
        assert_eq!(with(1).rx_checksum(), RxChecksum::Unnecessary);
        assert_eq!(with(2).rx_checksum(), RxChecksum::Unnecessary);
        assert_eq!(with(3).rx_checksum(), RxChecksum::Unnecessary);
        assert_eq!(with(4).rx_checksum(), RxChecksum::Verify);
    }

    #[test]
    fn for_transmit_single_and_gso() {
        const ACK: u8 = 0x10;
        // 20 (IP) + 32 (TCP with timestamps) headers.
        let h = VnetHdr::for_transmit(&packet(false, ACK, 1000), 1000).unwrap();
        let single = VnetHdr {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_NONE,
            hdr_len: 52,
            gso_size: 0,
            csum_start: 20,
            csum_offset: 16,
        };
        assert_eq!(h, single);
        assert_eq!(
            VnetHdr::for_transmit(&packet(false, ACK, 3000), 0).unwrap(),
            single
        );
        let h = VnetHdr::for_transmit(&packet(false, ACK, 3000), 1000).unwrap();
        assert_eq!((h.gso_type, h.gso_size, h.hdr_len), (1, 1000, 52));
        let h = VnetHdr::for_transmit(&packet(true, ACK | 0x80, 1001), 1000).unwrap();
        assert_eq!((h.gso_type, h.gso_size), (4 | 0x80, 1000));
        assert_eq!((h.csum_start, h.hdr_len), (40, 72));
    }

    #[test]
    fn for_transmit_apart_matches_the_whole_packet() {
        for (v6, flags, payload, gso) in [(false, 0x10, 3000, 1000), (true, 0x90, 1001, 1000)] {
            let p = packet(v6, flags, payload);
            let split = p.len() - payload;
            let whole = VnetHdr::for_transmit(&p, gso).unwrap();
            let apart = VnetHdr::for_transmit_apart(&p[..split], payload, gso).unwrap();
            assert_eq!(apart, whole);
        }
        // Headers must end where the payload starts, and the lengths must count it.
        let p = packet(false, 0x10, 3000);
        assert!(VnetHdr::for_transmit_apart(&p[..60], 2992, 1000).is_err());
        assert!(VnetHdr::for_transmit_apart(&p[..52], 2999, 1000).is_err());
        assert!(VnetHdr::for_transmit_apart(&p[..40], 3012, 1000).is_err());
    }

    #[test]
    fn for_transmit_rejects_bad_packets() {
        let p = packet(false, 0x10, 10);
        assert_eq!(VnetHdr::for_transmit(&[], 0), Err(WireError::Truncated));
        let mut udp = p.clone();
        udp[9] = 17;
        assert_eq!(VnetHdr::for_transmit(&udp, 0), Err(WireError::Unsupported));
        let mut bad_off = p.clone();
        bad_off[20 + 12] = 0x20; // data offset 8 bytes
        assert_eq!(
            VnetHdr::for_transmit(&bad_off, 0),
            Err(WireError::Malformed)
        );
        // Every truncation is an error, never a panic.
        for n in 0..p.len() {
            assert!(VnetHdr::for_transmit(&p[..n], 100).is_err(), "len {n}");
        }
    }

    #[test]
    fn finish_completes_partial_checksum() {
        for v6 in [false, true] {
            let mut p = packet(v6, 0x18, 777);
            let h = VnetHdr::for_transmit(&p, 0).unwrap();
            let ip = IpRepr::parse(&p, true).unwrap();
            let hl = ip.header_len;
            assert!(!checksum::verify_tcp(ip.src, ip.dst, &p[hl..]));
            finish_rx_checksum(&h, &mut p).unwrap();
            assert!(checksum::verify_tcp(ip.src, ip.dst, &p[hl..]));
            // Same result as lowtide-wire's own completion.
            let mut q = packet(v6, 0x18, 777);
            gso::finish_checksum(&mut q).unwrap();
            assert_eq!(p, q);
        }
    }

    #[test]
    fn finish_gso_then_segment() {
        let mut p = packet(false, 0x10, 2500);
        let h = VnetHdr::for_transmit(&p, 1000).unwrap();
        finish_rx_checksum(&h, &mut p).unwrap();
        // A completed super-packet still segments into valid segments.
        let mut n = 0;
        gso::segment(&p, h.gso_size, |s| {
            let ip = IpRepr::parse(&s, true).unwrap();
            assert!(checksum::verify_tcp(ip.src, ip.dst, &s[ip.header_len..]));
            n += 1;
        })
        .unwrap();
        assert_eq!(n, 3);
    }

    #[test]
    fn finish_rejects_bad_offsets() {
        let p = packet(false, 0x10, 10);
        let good = VnetHdr::for_transmit(&p, 0).unwrap();
        let bad = [
            VnetHdr {
                csum_start: u16::MAX,
                ..good
            },
            VnetHdr {
                csum_offset: u16::MAX - 1,
                ..good
            },
            VnetHdr {
                csum_start: p.len() as u16 - 1,
                csum_offset: 0,
                ..good
            },
        ];
        for h in bad {
            let mut q = p.clone();
            assert_eq!(finish_rx_checksum(&h, &mut q), Err(WireError::Malformed));
            assert_eq!(q, p);
        }
        let mut q = p.clone();
        finish_rx_checksum(&VnetHdr::plain(), &mut q).unwrap();
        assert_eq!(q, p, "no NEEDS_CSUM: untouched");
    }
}
