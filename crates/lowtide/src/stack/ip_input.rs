//! The IP layer's receive path (net/ipv4/ip_input.c, net/ipv6/ip6_input.c): a
//! packet from the device to its protocol (`ip_rcv`, `ip_local_deliver`), the drops
//! before a transport protocol sees a packet, each in the counter Linux gives it,
//! and the answer to a protocol no handler takes.

use super::exthdrs::{Cursor, NEXTHDR_DEST, NEXTHDR_FRAGMENT, NEXTHDR_HOP, NEXTHDR_ROUTING};
use super::frag6::Frag6;
use super::icmp_out::IcmpError;
use super::Stack;
use crate::mib::{ip_version, Mib};
use crate::time::Instant;
use crate::RxChecksum;
use lowtide_wire::ip::{
    ipv6_flowlabel, IpRepr, IPV4_HEADER_LEN, IPV6_HEADER_LEN, NEXTHDR_NONE, PROTO_TCP,
};
use lowtide_wire::WireError;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tracing::trace;

/// `ip6_rcv_core`'s address rules for a packet that arrived on a device (never
/// `IFF_LOOPBACK` here): RFC 4291 section 2.5.3, a loopback source or destination;
/// erratum 3480, an interface-local (scope 1) multicast destination; section 2.7, a
/// multicast destination of reserved scope 0, or a multicast source. Linux checks
/// them before the payload length, and counts them in `Ip6InHdrErrors`. False for
/// anything but a whole IPv6 header.
pub(super) fn ipv6_addrs_forbidden(packet: &[u8]) -> bool {
    if packet.len() < IPV6_HEADER_LEN || ip_version(packet) != 6 {
        return false;
    }
    let addr = |at: usize| {
        let mut o = [0u8; 16];
        o.copy_from_slice(&packet[at..at + 16]);
        Ipv6Addr::from(o)
    };
    let (src, dst) = (addr(8), addr(24));
    // IPV6_ADDR_MC_SCOPE: the low nibble of the second byte.
    let dst_scope = dst.octets()[1] & 0x0f;
    src.is_loopback()
        || dst.is_loopback()
        || dst.is_multicast() && dst_scope <= 1
        || src.is_multicast()
}

/// Which of an IPv4 packet's addresses `ip_route_input_slow` (or, to a multicast
/// group, `ip_mc_validate_source`) calls martian, `route_localnet` and
/// `accept_local` off as by default: the source if multicast, the limited
/// broadcast, in 0.0.0.0/8 (but to the limited broadcast, or to a link-local
/// group, 224.0.0.0/24) or loopback; the destination if in 0.0.0.0/8 or loopback
/// (`ipv4_is_zeronet`, `ipv4_is_loopback`; a loopback destination is checked
/// first). A source that is one of the stack's own addresses is martian too
/// (`fib_validate_source`); the caller checks that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Martian {
    /// `martian_source:` (`in_martian_src`).
    Source,
    /// `martian_destination:` (`in_martian_dst`).
    Destination,
}

pub(super) fn ipv4_martian(src: Ipv4Addr, dst: Ipv4Addr) -> Option<Martian> {
    let zeronet = |a: Ipv4Addr| a.octets()[0] == 0;
    if src.is_multicast() || src == Ipv4Addr::BROADCAST {
        return Some(Martian::Source);
    }
    let local_group = dst.octets()[..3] == [224, 0, 0];
    if dst == Ipv4Addr::BROADCAST || src.is_unspecified() && dst.is_unspecified() {
        return None; // brd_input
    }
    if zeronet(src) && !(dst.is_multicast() && local_group) {
        return Some(Martian::Source);
    }
    if zeronet(dst) || dst.is_loopback() {
        return Some(Martian::Destination);
    }
    src.is_loopback().then_some(Martian::Source)
}

/// Whether the header of a packet that parse called `Truncated` is whole, so that
/// the packet is only shorter than its length field says (`ip_rcv_core`: `skb->len <
/// len`; `ip6_rcv_core`: `pkt_len + sizeof(struct ipv6hdr) > skb->len`).
fn header_whole(packet: &[u8]) -> bool {
    match ip_version(packet) {
        6 => packet.len() >= IPV6_HEADER_LEN,
        _ => packet.len() >= IPV4_HEADER_LEN && packet.len() >= (packet[0] & 0x0f) as usize * 4,
    }
}

impl Stack {
    /// [`Stack::handle_packet`] of a packet of `segs` segments (`gso_segs`), or as
    /// many as GRO's mark says (`None`: `lowtide_wire::gso::gro_segs`).
    pub(super) fn rcv_packet(
        &mut self,
        now: Instant,
        packet: &[u8],
        csum: RxChecksum,
        segs: Option<u16>,
    ) {
        let ver = crate::mib::ip_version(packet);
        let ip_mib = |m: Mib| m.for_ip_version(ver);
        self.mib.inc(ip_mib(Mib::IpInReceives));
        self.mib
            .add(ip_mib(Mib::IpExtInOctets), packet.len() as u64);
        self.count_in_ecn(packet, 0, segs);
        if ipv6_addrs_forbidden(packet) {
            self.mib.inc(Mib::Ip6InHdrErrors);
            trace!("drop: IPv6 address RFC 4291 forbids");
            return;
        }
        let verify = csum == RxChecksum::Verify;
        let (mut ip, frag) = match IpRepr::parse_input(packet, verify) {
            Ok(x) => x,
            Err(e) => return self.drop_ip(packet, e),
        };
        // ip6_rcv_core: the hop-by-hop options come before the route lookup.
        let mut at = Cursor {
            nexthdr: ip.protocol,
            off: ip.header_len,
            nhoff: 6,
            fragmented: false,
        };
        if ip.src.is_ipv6() && ip.protocol == NEXTHDR_HOP {
            match self.ipv6_parse_hopopts(now, &mut ip, packet) {
                Some(c) => at = c,
                None => return,
            }
        }
        if self.ip_route_martian(&ip) {
            return;
        }
        // ip_route_input: an IPv4 broadcast or multicast is delivered too (only
        // ICMP takes it here: lowtide joins no groups and has no UDP broadcast).
        let bcast = ip.protocol == super::icmp::PROTO_ICMP && super::icmp_out::broadcast_v4(ip.dst);
        if !self.addrs.contains(&ip.dst)
            && self.catch_all.is_none()
            && !self.udp_catch_all()
            && !bcast
        {
            self.mib.inc(ip_mib(Mib::IpInAddrErrors));
            trace!(dst = %ip.dst, "drop: not our address");
            return;
        }
        // ip_local_deliver: a fragment waits for its datagram (stack/defrag.rs).
        if let Some(frag) = frag {
            if let Some(whole) = self.ip_defrag(now, &ip, frag, packet) {
                if let Ok(ip) = IpRepr::parse(&whole, false) {
                    self.ip_local_deliver_finish(now, &ip, &whole, verify, 6);
                }
            }
            return;
        }
        if ip.src.is_ipv6() {
            return self.ip6_input_finish(now, ip, packet, verify, at);
        }
        self.ip_local_deliver_finish(now, &ip, packet, verify, 6);
    }

    /// `ip_route_input_noref`'s martians ([`ipv4_martian`], and a source that is
    /// one of ours): dropped before anything else sees them, `IpInReceives`
    /// their only Linux counter (the route cache's `in_martian_src` /
    /// `in_martian_dst` are lowtide's `LowtideInMartianSrc` / `LowtideInMartianDst`).
    fn ip_route_martian(&mut self, ip: &IpRepr) -> bool {
        let (IpAddr::V4(src), IpAddr::V4(dst)) = (ip.src, ip.dst) else {
            return false;
        };
        // fib_validate_source: one of our own addresses as the source
        // (inet_lookup_ifaddr_rcu), unless from 0.0.0.0.
        let own = !src.is_unspecified() && self.addrs.contains(&ip.src);
        let martian = ipv4_martian(src, dst).or(own.then_some(Martian::Source));
        match martian {
            None => return false,
            Some(Martian::Source) => self.mib.inc(Mib::LowtideInMartianSrc),
            Some(Martian::Destination) => self.mib.inc(Mib::LowtideInMartianDst),
        }
        trace!(%src, %dst, ?martian, "drop: martian (ip_route_input_slow)");
        true
    }

    /// `ip6_protocol_deliver_rcu`'s resubmit loop: the extension headers from
    /// `at` (stack/exthdrs.rs, stack/frag6.rs), then the upper layer.
    fn ip6_input_finish(&mut self, now: Instant, ip: IpRepr, pkt: &[u8], verify: bool, at: Cursor) {
        let (mut ip, mut at) = (ip, at);
        let mut whole: Option<Vec<u8>> = None;
        loop {
            let pkt = whole.as_deref().unwrap_or(pkt);
            let go_on = match at.nexthdr {
                NEXTHDR_DEST => self.ipv6_destopt_rcv(now, &ip, pkt, &mut at),
                NEXTHDR_ROUTING => self.ipv6_rthdr_rcv(now, &ip, pkt, &mut at),
                NEXTHDR_FRAGMENT => match self.ipv6_frag_rcv(now, &ip, pkt, &mut at) {
                    Frag6::Stop => false,
                    Frag6::Atomic => true,
                    Frag6::Whole(datagram, c) => {
                        ip.payload_len = datagram.len() - ip.header_len;
                        ip.ecn = (datagram[1] >> 4) & 3;
                        (whole, at) = (Some(datagram), c);
                        true
                    }
                },
                _ => {
                    let upper = IpRepr {
                        protocol: at.nexthdr,
                        header_len: at.off,
                        payload_len: ip.header_len + ip.payload_len - at.off,
                        ..ip
                    };
                    return self.ip_local_deliver_finish(now, &upper, pkt, verify, at.nhoff);
                }
            };
            if !go_on {
                return;
            }
        }
    }

    /// `ip_local_deliver_finish`: a datagram for us to its protocol; `nhoff`, for
    /// IPv6, where the byte naming it is.
    fn ip_local_deliver_finish(
        &mut self,
        now: Instant,
        ip: &IpRepr,
        packet: &[u8],
        verify: bool,
        nhoff: usize,
    ) {
        let ip_mib = |m: Mib| m.for_ip_version(crate::mib::ip_version(packet));
        let ip = *ip;
        let seg = &packet[ip.header_len..ip.header_len + ip.payload_len];
        if ip.protocol == super::icmp::PROTO_ICMP && ip.src.is_ipv4() {
            self.mib.inc(ip_mib(Mib::IpInDelivers));
            return self.icmp_rcv(now, &ip, packet, seg);
        }
        if ip.protocol == lowtide_wire::ip::PROTO_ICMPV6 && ip.src.is_ipv6() {
            self.mib.inc(ip_mib(Mib::IpInDelivers));
            return self.icmpv6_rcv(now, &ip, packet, seg);
        }
        if ip.protocol == lowtide_wire::udp::PROTO_UDP {
            self.mib.inc(ip_mib(Mib::IpInDelivers));
            return self.udp_rcv(now, &ip, packet, verify);
        }
        if ip.protocol != PROTO_TCP {
            return self.ip_deliver_unknown(now, &ip, packet, nhoff);
        }
        self.mib.inc(ip_mib(Mib::IpInDelivers));
        self.syn_headers.capture(packet, ip.header_len);
        self.rx_flowlabel = ip.src.is_ipv6().then(|| ipv6_flowlabel(packet));
        self.tcp_v4_rcv(now, &ip, seg, verify);
        self.rx_flowlabel = None;
    }

    /// `ip_rcv_core` / `ip6_rcv_core`: a packet whose version and header length
    /// pass (before its checksum is checked) counts its ECN codepoint
    /// (`IPSTATS_MIB_NOECTPKTS + (tos & INET_ECN_MASK)`) once per segment of a GRO
    /// packet (`max(1, gso_segs)`: `segs`, or as GRO marked it). `apart`: payload
    /// bytes not in `head`.
    pub(super) fn count_in_ecn(&mut self, head: &[u8], apart: usize, segs: Option<u16>) {
        let ecn = match head.first().map(|b| b >> 4) {
            Some(4) if head.len() >= 20 && head[0] & 0xf >= 5 => head[1] & 3,
            Some(6) if head.len() >= 40 => (head[1] >> 4) & 3,
            _ => return,
        };
        let mib = [
            Mib::IpExtInNoECTPkts,
            Mib::IpExtInECT1Pkts,
            Mib::IpExtInECT0Pkts,
            Mib::IpExtInCEPkts,
        ][ecn as usize];
        let segs = segs.unwrap_or_else(|| lowtide_wire::gso::gro_segs(head, apart));
        let ver = crate::mib::ip_version(head);
        self.mib.add(mib.for_ip_version(ver), segs.max(1) as u64);
    }

    /// `ip_rcv_core` / `ip6_rcv_core`: counts a packet whose header did not parse.
    /// One shorter than its length field says is `IpExtInTruncatedPkts`
    /// (`Ip6InTruncatedPkts`) alone; a bad IPv4 header checksum is
    /// `IpExtInCsumErrors` and `IpInHdrErrors`; any other header error (shorter than
    /// the header, a bad version or length field) `IpInHdrErrors`. IPv6 extension
    /// headers, which lowtide does not follow, count as unknown protocols (IPv4
    /// fragments are reassembled: stack/defrag.rs).
    pub(super) fn drop_ip(&mut self, packet: &[u8], e: WireError) {
        let ver = ip_version(packet);
        let mib = match e {
            WireError::Unsupported => Mib::IpInUnknownProtos,
            WireError::Truncated if header_whole(packet) => Mib::IpExtInTruncatedPkts,
            WireError::BadChecksum => {
                self.mib.inc(Mib::IpExtInCsumErrors);
                Mib::IpInHdrErrors
            }
            _ => Mib::IpInHdrErrors,
        };
        self.mib.inc(mib.for_ip_version(ver));
        trace!(error = %e, "drop: bad IP header");
    }

    /// `ip_protocol_deliver_rcu` / `ip6_protocol_deliver_rcu` for a protocol with no
    /// handler. IPv6's "no next header" is `ipv6_nodata_rcv`'s: delivered
    /// (`Ip6InDelivers`) and freed. Any other counts `IpInUnknownProtos`
    /// (`Ip6InUnknownProtos`) and is answered, within the ICMP rate limits, with a
    /// protocol unreachable (IPv6: a parameter problem, unknown next header, pointing
    /// at the byte that named it, `nhoff`).
    pub(super) fn ip_deliver_unknown(
        &mut self,
        now: Instant,
        ip: &IpRepr,
        packet: &[u8],
        nhoff: usize,
    ) {
        let ver = ip_version(packet);
        if ver == 6 && ip.protocol == NEXTHDR_NONE {
            self.mib.inc(Mib::Ip6InDelivers);
            return;
        }
        self.mib.inc(Mib::IpInUnknownProtos.for_ip_version(ver));
        trace!(protocol = ip.protocol, "drop: unknown protocol");
        let nhoff = nhoff as u32;
        self.icmp_send_error(now, ip, packet, IcmpError::ProtoUnreach { nhoff });
    }
}

#[cfg(test)]
mod tests {
    use super::ipv6_addrs_forbidden;
    use crate::stack::testutil::stack;
    use crate::{Instant, Mib, RxChecksum, Stack};
    use lowtide_wire::build::ip_packet;
    use lowtide_wire::checksum;
    use lowtide_wire::ip::{fill_ipv4_checksum, IpRepr};
    use std::net::IpAddr;

    const NOW: Instant = Instant::ZERO;

    /// An IP packet of `protocol` from `src` to `dst` with `len` payload bytes.
    fn packet(src: &str, dst: &str, protocol: u8, len: usize) -> Vec<u8> {
        let (src, dst): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
        ip_packet(src, dst, protocol, &vec![0xab; len], 1)
    }

    fn count(s: &Stack, m: Mib) -> u64 {
        s.counters().get(m)
    }

    /// A SYN from `src` (port 40000) to `dst`.
    fn syn(src: &str, dst: &str) -> Vec<u8> {
        use lowtide_wire::build::{syn_options, tcp_packet, Csum};
        use lowtide_wire::tcp::{TcpFlags, TcpRepr};
        let th = TcpRepr {
            src_port: 0,
            dst_port: 0,
            seq: 1,
            ack: 0,
            flags: TcpFlags::SYN,
            window: 65535,
            urgent: 0,
            options: syn_options(1),
        };
        let src = std::net::SocketAddr::new(src.parse().unwrap(), 40000);
        tcp_packet(src, dst.parse().unwrap(), &th, &[], 1, Csum::Full)
    }

    /// ip6_rcv_core's RFC 4291 rules: each forbidden address is a header error
    /// (before any length check), counted as received with its ECN codepoint; a
    /// global multicast destination and unicast addresses pass.
    #[test]
    fn ipv6_forbidden_addresses_are_header_errors() {
        let us = "fd00::2";
        let bad = [
            ("::1", us),
            ("fd00::1", "::1"),
            ("ff02::1", us),
            ("fd00::1", "ff01::1"),
            ("fd00::1", "ff00::1"),
            ("fd00::1", "ff11::1"),
        ];
        for (src, dst) in bad {
            let mut s = stack(us);
            let mut p = packet(src, dst, 6, 20);
            assert!(ipv6_addrs_forbidden(&p), "{src} > {dst}");
            p.truncate(50); // also shorter than its payload length: not truncated
            s.handle_packet(NOW, &p, RxChecksum::Verify);
            assert_eq!(count(&s, Mib::Ip6InHdrErrors), 1, "{src} > {dst}");
            assert_eq!(count(&s, Mib::Ip6InTruncatedPkts), 0);
            assert_eq!(count(&s, Mib::Ip6InReceives), 1);
            assert_eq!(count(&s, Mib::Ip6InNoECTPkts), 1);
        }
        for (src, dst) in [
            ("fd00::1", us),
            ("fd00::1", "ff02::1"),
            ("fd00::1", "ff0e::1"),
        ] {
            assert!(
                !ipv6_addrs_forbidden(&packet(src, dst, 6, 20)),
                "{src} > {dst}"
            );
        }
        assert!(!ipv6_addrs_forbidden(&packet(
            "127.0.0.1",
            "10.0.0.2",
            6,
            20
        )));
        assert!(!ipv6_addrs_forbidden(&packet("::1", us, 6, 0)[..39]));
    }

    /// A forbidden source does not take the frags path to TCP either.
    #[test]
    fn ipv6_forbidden_source_is_dropped_on_the_frags_path() {
        let us = "fd00::2";
        let mut s = stack(us);
        s.listen("[fd00::2]:80".parse().unwrap(), 8).unwrap();
        let mut syn = packet("ff02::1", us, 6, 20);
        syn[40 + 12] = 5 << 4; // data offset
        syn[40 + 13] = 0x02; // SYN
        syn[40 + 3] = 80;
        s.handle_packet_frags(NOW, &syn, &[]);
        assert_eq!(count(&s, Mib::Ip6InHdrErrors), 1);
        assert_eq!(count(&s, Mib::Ip6InDelivers), 0);
        assert!(s.poll_transmit(NOW).is_none());
    }

    /// ip_rcv_core / ip6_rcv_core: a packet shorter than its length field is a
    /// truncated packet alone; shorter than its header, a header error; a bad IPv4
    /// header checksum both a checksum and a header error.
    #[test]
    fn truncated_short_and_bad_checksum_packets_count_apart() {
        for (us, them, hlen) in [("10.0.0.2", "10.0.0.1", 20), ("fd00::2", "fd00::1", 40)] {
            let v6 = hlen == 40;
            let m = |m: Mib| m.for_ip_version(if v6 { 6 } else { 4 });
            let mut s = stack(us);
            let p = packet(them, us, 6, 20);
            s.handle_packet(NOW, &p[..hlen + 19], RxChecksum::Verify);
            assert_eq!(count(&s, m(Mib::IpExtInTruncatedPkts)), 1);
            assert_eq!(count(&s, m(Mib::IpInHdrErrors)), 0);
            s.handle_packet(NOW, &p[..hlen - 1], RxChecksum::Verify);
            assert_eq!(count(&s, m(Mib::IpInHdrErrors)), 1);
            assert_eq!(count(&s, m(Mib::IpExtInTruncatedPkts)), 1);
            if v6 {
                continue;
            }
            // IHL 6: the header (24 bytes) is not whole in 22.
            let mut o = packet(them, us, 6, 20);
            o[0] = 0x46;
            s.handle_packet(NOW, &o[..22], RxChecksum::Verify);
            assert_eq!(count(&s, Mib::IpInHdrErrors), 2);
            // A bad checksum is found before the length (ip_rcv_core's order).
            let mut c = packet(them, us, 6, 20);
            c[8] ^= 1;
            s.handle_packet(NOW, &c[..30], RxChecksum::Verify);
            assert_eq!(count(&s, Mib::IpExtInCsumErrors), 1);
            assert_eq!(count(&s, Mib::IpInHdrErrors), 3);
            assert_eq!(count(&s, Mib::IpExtInTruncatedPkts), 1);
            fill_ipv4_checksum(&mut c[..20]);
            s.handle_packet(NOW, &c[..30], RxChecksum::Verify);
            assert_eq!(count(&s, Mib::IpExtInTruncatedPkts), 2);
        }
    }

    /// ip_route_input_slow's martians: dropped before TCP sees them (no reset,
    /// no ICMP), each counted as received and in lowtide's own martian counters.
    #[test]
    fn ipv4_martians_are_dropped() {
        use super::{ipv4_martian, Martian::*};
        let a = |s: &str| s.parse::<std::net::Ipv4Addr>().unwrap();
        for (src, dst, want) in [
            ("224.0.0.5", "10.0.0.2", Some(Source)),
            ("255.255.255.255", "10.0.0.2", Some(Source)),
            ("0.1.2.3", "10.0.0.2", Some(Source)),
            ("0.0.0.0", "10.0.0.2", Some(Source)),
            ("127.0.0.1", "10.0.0.2", Some(Source)),
            ("10.0.0.1", "127.0.0.1", Some(Destination)),
            ("127.0.0.1", "127.0.0.1", Some(Destination)),
            ("10.0.0.1", "0.0.0.9", Some(Destination)),
            ("0.0.0.0", "255.255.255.255", None),
            ("0.0.0.0", "224.0.0.1", None),
            ("0.0.0.0", "239.1.1.1", Some(Source)),
            ("10.0.0.1", "10.0.0.2", None),
        ] {
            assert_eq!(ipv4_martian(a(src), a(dst)), want, "{src} -> {dst}");
        }
        let mut s = stack("10.0.0.2");
        s.listen("10.0.0.2:80".parse().unwrap(), 8).unwrap();
        for src in ["127.0.0.1", "10.0.0.2", "0.0.0.7"] {
            let syn = syn(src, "10.0.0.2:80");
            s.handle_packet(NOW, &syn, RxChecksum::Verify);
            assert!(
                s.poll_transmit(NOW).is_none(),
                "{src}: no SYN-ACK, no reset"
            );
        }
        assert_eq!(count(&s, Mib::LowtideInMartianSrc), 3);
        assert_eq!(count(&s, Mib::IpInReceives), 3);
        assert_eq!(count(&s, Mib::TcpInSegs), 0);
        let to_lo = syn("10.0.0.1", "127.0.0.1:80");
        s.handle_packet(NOW, &to_lo, RxChecksum::Verify);
        assert_eq!(count(&s, Mib::LowtideInMartianDst), 1);
        let ok = syn("10.0.0.1", "10.0.0.2:80");
        s.handle_packet(NOW, &ok, RxChecksum::Verify);
        assert!(s.poll_transmit(NOW).is_some(), "a SYN-ACK");
    }

    /// tcp_v6_conn_request: a SYN from an IPv4-mapped IPv6 source is a header
    /// error, neither answered nor a listen drop; from another source, a SYN-ACK.
    #[test]
    fn ipv6_syn_from_a_v4_mapped_source_is_dropped() {
        let mut s = stack("fd00::2");
        s.listen("[::]:80".parse().unwrap(), 8).unwrap();
        s.handle_packet(
            NOW,
            &syn("::ffff:10.0.0.1", "[fd00::2]:80"),
            RxChecksum::Verify,
        );
        assert!(s.poll_transmit(NOW).is_none());
        assert_eq!(count(&s, Mib::Ip6InHdrErrors), 1);
        assert_eq!(count(&s, Mib::TcpExtListenDrops), 0);
        s.handle_packet(NOW, &syn("fd00::1", "[fd00::2]:80"), RxChecksum::Verify);
        assert!(s.poll_transmit(NOW).is_some(), "a SYN-ACK");
    }

    /// An unknown protocol to us is counted and answered: IPv4 with a protocol
    /// unreachable, IPv6 with a parameter problem pointing at the next header; IPv6's
    /// "no next header" is delivered silently; to a foreign address, an address
    /// error and nothing more.
    #[test]
    fn unknown_protocols_are_answered() {
        for (us, them) in [("10.0.0.2", "10.0.0.1"), ("fd00::2", "fd00::1")] {
            let v6 = us.contains(':');
            let m = |m: Mib| m.for_ip_version(if v6 { 6 } else { 4 });
            let mut s = stack(us);
            let p = packet(them, us, 41, 64);
            s.handle_packet(NOW, &p, RxChecksum::Verify);
            assert_eq!(count(&s, m(Mib::IpInUnknownProtos)), 1);
            assert_eq!(count(&s, m(Mib::IpInDelivers)), 0);
            let err = s.poll_transmit(NOW).expect("an ICMP error").packet;
            let ip = IpRepr::parse(&err, true).unwrap();
            assert_eq!(
                (ip.src, ip.dst),
                (us.parse().unwrap(), them.parse().unwrap())
            );
            let msg = &err[ip.header_len..];
            assert_eq!(&msg[8..], &p[..], "the whole packet quoted");
            let (out, mib) = match v6 {
                false => ([3u8, 2, 0, 0, 0, 0], Mib::IcmpOutDestUnreachs),
                true => ([4u8, 1, 0, 0, 0, 6], Mib::Icmp6OutParmProblems),
            };
            assert_eq!((msg[0], msg[1]), (out[0], out[1]));
            assert_eq!(&msg[4..8], &out[2..]);
            let pseudo = match v6 {
                false => 0,
                true => checksum::pseudo_header(ip.src, ip.dst, 58, msg.len() as u32),
            };
            assert_eq!(checksum::fold(checksum::sum(msg, pseudo)), 0xffff);
            assert_eq!(count(&s, mib), 1);
            assert_eq!(count(&s, m(Mib::IpOutRequests)), 1);
            let foreign = if v6 { "fd00::9" } else { "10.0.0.9" };
            s.handle_packet(NOW, &packet(them, foreign, 41, 64), RxChecksum::Verify);
            assert_eq!(count(&s, m(Mib::IpInAddrErrors)), 1);
            assert_eq!(count(&s, m(Mib::IpInUnknownProtos)), 1);
            s.handle_packet(NOW, &packet(them, us, 59, 8), RxChecksum::Verify);
            assert_eq!(count(&s, m(Mib::IpInDelivers)), u64::from(v6));
            assert_eq!(count(&s, m(Mib::IpInUnknownProtos)), 1 + u64::from(!v6));
            assert_eq!(s.poll_transmit(NOW).is_some(), !v6, "59 is IPv4's unknown");
        }
    }
}
