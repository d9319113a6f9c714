//! IPv6 extension headers on input (net/ipv6/exthdrs.c, and the resubmit loop of
//! net/ipv6/ip6_input.c's `ip6_protocol_deliver_rcu`): the hop-by-hop options
//! right after the fixed header (`ipv6_parse_hopopts`, from `ip6_rcv_core`), then
//! destination options (`ipv6_destopt_rcv`), routing headers (`ipv6_rthdr_rcv`) and
//! fragments (stack/frag6.rs) in any order until the upper layer. Options are
//! parsed as `ip6_parse_tlv` does: padding of at most 7 bytes and PadN of zeroes,
//! at most `net.ipv6.max_hbh_opts_number` / `max_dst_opts_number` other options
//! (8; a negative value drops unknown ones silently), an unknown option acted on
//! by its two high bits (skip, drop, drop and answer, drop and answer unless the
//! destination is multicast: RFC 8200 section 4.2). This kernel's build is the
//! model: no Mobile IPv6 (a type 2 routing header or a home address option is
//! unknown), segment routing and RPL off (`seg6_enabled`, `rpl_seg_enabled` 0:
//! those headers are dropped), NetLabel with no CALIPSO DOI (a CALIPSO option
//! fails `calipso_validate`), IOAM off on the device (its option is skipped).

use super::icmp_out::IcmpError;
use super::Stack;
use crate::mib::Mib;
use crate::time::Instant;
use lowtide_wire::ip::{IpRepr, IPV6_HEADER_LEN};
use tracing::trace;

/// Next-header numbers of the extension headers (`NEXTHDR_*`).
pub(super) const NEXTHDR_HOP: u8 = 0;
pub(super) const NEXTHDR_ROUTING: u8 = 43;
pub(super) const NEXTHDR_FRAGMENT: u8 = 44;
const NEXTHDR_AUTH: u8 = 51;
pub(super) const NEXTHDR_DEST: u8 = 60;
/// Parameter problem codes (`ICMPV6_HDR_FIELD`, `ICMPV6_UNK_OPTION`).
pub(super) const ICMPV6_HDR_FIELD: u8 = 0;
const ICMPV6_UNK_OPTION: u8 = 2;
/// Option types (`IPV6_TLV_*`).
const IPV6_TLV_PAD1: u8 = 0;
const IPV6_TLV_PADN: u8 = 1;
const IPV6_TLV_ROUTERALERT: u8 = 5;
const IPV6_TLV_CALIPSO: u8 = 7;
const IPV6_TLV_IOAM: u8 = 49;
const IPV6_TLV_JUMBO: u8 = 0xc2;
/// The largest payload length field (`IPV6_MAXPLEN`).
pub(super) const IPV6_MAXPLEN: usize = 65535;
/// Segment routing and RPL routing header types (`IPV6_SRCRT_TYPE_4`, `_3`).
const IPV6_SRCRT_TYPE_3: u8 = 3;
const IPV6_SRCRT_TYPE_4: u8 = 4;

/// Where the walk of a packet's headers stands (`IP6CB(skb)` and the transport
/// offset): the next header, where its header starts, and where the byte that
/// named it is (`nhoff`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Cursor {
    pub nexthdr: u8,
    pub off: usize,
    pub nhoff: usize,
    /// The datagram was reassembled or was an atomic fragment
    /// (`IP6SKB_FRAGMENTED`): another fragment header is an error.
    pub fragmented: bool,
}

impl Cursor {
    /// Past the extension header at `self.off` of `len` bytes, whose first byte
    /// names the next.
    fn skip(&mut self, pkt: &[u8], len: usize) {
        (self.nexthdr, self.nhoff) = (pkt[self.off], self.off);
        self.off += len;
    }
}

/// `ipv6_optlen`: an options or routing header's length, `(hdrlen + 1) * 8`.
fn optlen(pkt: &[u8], off: usize) -> usize {
    (pkt[off + 1] as usize + 1) << 3
}

/// The length of the options or routing header at `at` when it lies whole before
/// `end` (the `pskb_may_pull`s of its handler: its first 8 bytes, then all of it).
fn whole_header(pkt: &[u8], at: usize, end: usize) -> Option<usize> {
    (end >= at + 8 && end >= at + optlen(pkt, at)).then(|| optlen(pkt, at))
}

/// Whether `ip` goes to a multicast address (`ipv6_addr_is_multicast`).
fn to_multicast(ip: &IpRepr) -> bool {
    matches!(ip.dst, std::net::IpAddr::V6(d) if d.is_multicast())
}

/// How an options header's parse failed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TlvFail {
    /// Dropped; `Some` counts what the option's own check counts first.
    Drop(Option<Mib>),
    /// Dropped and answered with a parameter problem (code, pointer).
    Param(u8, usize, Option<Mib>),
}

/// `ip6_tlvopt_unknown`: an unknown option at `off` by its two high bits.
fn tlvopt_unknown(pkt: &[u8], off: usize, disallow: bool, mcast: bool) -> Result<(), TlvFail> {
    if disallow {
        return Err(TlvFail::Drop(None));
    }
    match pkt[off] >> 6 {
        0 => Ok(()),
        1 => Err(TlvFail::Drop(None)),
        3 if mcast => Err(TlvFail::Drop(None)),
        _ => Err(TlvFail::Param(ICMPV6_UNK_OPTION, off, None)),
    }
}

/// The hop-by-hop options lowtide's model knows (`ipv6_hop_ra`, `ipv6_hop_ioam`,
/// `ipv6_hop_jumbo`, `ipv6_hop_calipso`); `Ok(Some(len))` for a valid jumbo
/// payload length.
fn hop_option(pkt: &[u8], off: usize, plen_field: usize) -> Result<Option<usize>, TlvFail> {
    let len = pkt[off + 1];
    match pkt[off] {
        IPV6_TLV_ROUTERALERT if len == 2 => Ok(None),
        IPV6_TLV_ROUTERALERT => Err(TlvFail::Drop(None)),
        // Misaligned: dropped; else skipped, IOAM being off on the device.
        IPV6_TLV_IOAM if off & 3 != 0 => Err(TlvFail::Drop(None)),
        IPV6_TLV_IOAM => Ok(None),
        IPV6_TLV_JUMBO => {
            let hdr = Some(Mib::Ip6InHdrErrors);
            if len != 4 || off & 3 != 2 {
                return Err(TlvFail::Drop(hdr));
            }
            let jumbo = u32::from_be_bytes([pkt[off + 2], pkt[off + 3], pkt[off + 4], pkt[off + 5]])
                as usize;
            if jumbo <= IPV6_MAXPLEN {
                return Err(TlvFail::Param(ICMPV6_HDR_FIELD, off + 2, hdr));
            }
            if plen_field != 0 {
                return Err(TlvFail::Param(ICMPV6_HDR_FIELD, off, hdr));
            }
            if jumbo > pkt.len() - IPV6_HEADER_LEN {
                return Err(TlvFail::Drop(Some(Mib::Ip6InTruncatedPkts)));
            }
            Ok(Some(jumbo))
        }
        // calipso_validate with NetLabel and no DOI configured refuses every one.
        IPV6_TLV_CALIPSO => Err(TlvFail::Drop(None)),
        _ => unreachable!("only known types come here"),
    }
}

/// `ip6_parse_tlv`: the options of the hop-by-hop or destination options header
/// at `start` (its length checked by the caller). `Ok(Some(len))` carries a jumbo
/// payload length.
pub(super) fn parse_tlv(
    hopbyhop: bool,
    pkt: &[u8],
    start: usize,
    max_count: i32,
    mcast: bool,
) -> Result<Option<usize>, TlvFail> {
    let bad = Err(TlvFail::Drop(None));
    let (disallow, max) = (max_count < 0, max_count.unsigned_abs());
    let plen_field = u16::from_be_bytes([pkt[4], pkt[5]]) as usize;
    let (mut off, mut len) = (start + 2, optlen(pkt, start) - 2);
    let (mut count, mut padlen, mut jumbo) = (0u32, 0usize, None);
    while len > 0 {
        if pkt[off] == IPV6_TLV_PAD1 {
            padlen += 1;
            if padlen > 7 {
                return bad;
            }
            (off, len) = (off + 1, len - 1);
            continue;
        }
        if len < 2 {
            return bad;
        }
        let opt = pkt[off + 1] as usize + 2;
        if opt > len {
            return bad;
        }
        if pkt[off] == IPV6_TLV_PADN {
            // RFC 4942 section 2.1.9.5: PadN aligns to 8, of zeroes only.
            padlen += opt;
            if padlen > 7 || pkt[off + 2..off + opt].iter().any(|&b| b != 0) {
                return bad;
            }
        } else {
            count += 1;
            if count > max {
                return bad;
            }
            let known = [
                IPV6_TLV_ROUTERALERT,
                IPV6_TLV_IOAM,
                IPV6_TLV_JUMBO,
                IPV6_TLV_CALIPSO,
            ];
            match hopbyhop && known.contains(&pkt[off]) {
                true => jumbo = hop_option(pkt, off, plen_field)?.or(jumbo),
                false => tlvopt_unknown(pkt, off, disallow, mcast)?,
            }
            padlen = 0;
        }
        (off, len) = (off + opt, len - opt);
    }
    Ok(jumbo)
}

/// `ipv6_skip_exthdr`: from the header `nexthdr` at `start`, past every extension
/// header to the upper layer's; `None` at "no next header" or a header cut short.
/// Returns its offset, its number, and the fragment offset field of a fragment
/// header met (a later fragment stops the walk there).
pub(super) fn ipv6_skip_exthdr(pkt: &[u8], start: usize, nexthdr: u8) -> Option<(usize, u8, u16)> {
    let (mut off, mut nh, mut frag_off) = (start, nexthdr, 0u16);
    while matches!(
        nh,
        NEXTHDR_HOP | NEXTHDR_ROUTING | NEXTHDR_FRAGMENT | NEXTHDR_AUTH
    ) || nh == NEXTHDR_DEST
        || nh == lowtide_wire::ip::NEXTHDR_NONE
    {
        if nh == lowtide_wire::ip::NEXTHDR_NONE || pkt.len() < off + 8 {
            return None;
        }
        let len = match nh {
            NEXTHDR_FRAGMENT => {
                frag_off = u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]);
                if frag_off & !0x7 != 0 {
                    break;
                }
                8
            }
            NEXTHDR_AUTH => (pkt[off + 1] as usize + 2) << 2,
            _ => optlen(pkt, off),
        };
        nh = pkt[off];
        off += len;
    }
    Some((off, nh, frag_off))
}

impl Stack {
    /// `ipv6_parse_hopopts` for `ip6_rcv_core`: the hop-by-hop options header right
    /// after the fixed one; the cursor past it, or `None` (dropped,
    /// `Ip6InHdrErrors`). A valid jumbo payload option sets `ip.payload_len`.
    pub(super) fn ipv6_parse_hopopts(
        &mut self,
        now: Instant,
        ip: &mut IpRepr,
        pkt: &[u8],
    ) -> Option<Cursor> {
        // ip6_rcv_core keeps a jumbogram's bytes (payload length 0) untrimmed.
        let end = match ip.payload_len {
            0 => pkt.len(),
            n => IPV6_HEADER_LEN + n,
        };
        let at = IPV6_HEADER_LEN;
        let max = i64::from(self.cfg.ipv6_max_hbh_length);
        let ok = whole_header(pkt, at, end).is_some_and(|len| len as i64 <= max);
        let parsed = match ok {
            true => parse_tlv(
                true,
                &pkt[..end],
                at,
                self.cfg.ipv6_max_hbh_opts,
                to_multicast(ip),
            ),
            false => Err(TlvFail::Drop(None)),
        };
        match parsed {
            Ok(jumbo) => {
                // A payload length of 0 with no jumbo option: untrimmed, as Linux.
                ip.payload_len = jumbo.unwrap_or(end - IPV6_HEADER_LEN);
                let mut c = Cursor {
                    nexthdr: NEXTHDR_HOP,
                    off: at,
                    nhoff: 6,
                    fragmented: false,
                };
                c.skip(pkt, optlen(pkt, at));
                Some(c)
            }
            Err(f) => {
                self.tlv_fail(now, ip, pkt, f);
                None
            }
        }
    }

    /// An options header's failure: the option's own counter, its answer, then
    /// the header error its handler counts (`ip6_rcv_core`, `ipv6_destopt_rcv`).
    fn tlv_fail(&mut self, now: Instant, ip: &IpRepr, pkt: &[u8], f: TlvFail) {
        let (answer, extra) = match f {
            TlvFail::Drop(extra) => (None, extra),
            TlvFail::Param(code, at, extra) => (Some((code, at)), extra),
        };
        if let Some(m) = extra {
            self.mib.inc(m);
        }
        trace!(src = %ip.src, "drop: IPv6 options header");
        if let Some((code, at)) = answer {
            self.param_prob6(now, ip, pkt, code, at);
        }
        self.mib.inc(Mib::Ip6InHdrErrors);
    }

    /// `icmpv6_param_prob`: a parameter problem about `pkt`.
    pub(super) fn param_prob6(
        &mut self,
        now: Instant,
        ip: &IpRepr,
        pkt: &[u8],
        code: u8,
        at: usize,
    ) {
        let err = IcmpError::ParamProb6 {
            code,
            pointer: at as u32,
        };
        self.icmp_send_error(now, ip, pkt, err);
    }

    /// The length of the extension header at `at` if it lies whole before `end`,
    /// else a header error (`ipv6_destopt_rcv`'s and `ipv6_rthdr_rcv`'s
    /// `pskb_may_pull` failures).
    fn ext_header(&mut self, pkt: &[u8], at: usize, end: usize) -> Option<usize> {
        let len = whole_header(pkt, at, end);
        if len.is_none() {
            self.mib.inc(Mib::Ip6InHdrErrors);
        }
        len
    }

    /// `ipv6_destopt_rcv`: a destination options header; false when dropped.
    pub(super) fn ipv6_destopt_rcv(
        &mut self,
        now: Instant,
        ip: &IpRepr,
        pkt: &[u8],
        c: &mut Cursor,
    ) -> bool {
        let (at, end) = (c.off, IPV6_HEADER_LEN + ip.payload_len);
        let Some(len) = self.ext_header(pkt, at, end) else {
            return false;
        };
        if len as i64 > i64::from(self.cfg.ipv6_max_dst_opts_length) {
            trace!(len, "drop: destination options above max_dst_opts_length");
            return false;
        }
        let mcast = to_multicast(ip);
        match parse_tlv(false, &pkt[..end], at, self.cfg.ipv6_max_dst_opts, mcast) {
            Ok(_) => {
                c.skip(pkt, len);
                true
            }
            Err(f) => {
                self.tlv_fail(now, ip, pkt, f);
                false
            }
        }
    }

    /// `ipv6_rthdr_rcv`: a routing header with no segments left is skipped; one
    /// with segments left is of a type this kernel does not route (type 0 is gone,
    /// type 2 needs Mobile IPv6): a parameter problem at its type; segment routing
    /// and RPL headers are dropped while those are off. False when dropped.
    pub(super) fn ipv6_rthdr_rcv(
        &mut self,
        now: Instant,
        ip: &IpRepr,
        pkt: &[u8],
        c: &mut Cursor,
    ) -> bool {
        let (at, end) = (c.off, IPV6_HEADER_LEN + ip.payload_len);
        let Some(len) = self.ext_header(pkt, at, end) else {
            return false;
        };
        if to_multicast(ip) {
            self.mib.inc(Mib::Ip6InAddrErrors);
            return false;
        }
        let (kind, segments_left) = (pkt[at + 2], pkt[at + 3]);
        if kind == IPV6_SRCRT_TYPE_4 || kind == IPV6_SRCRT_TYPE_3 {
            trace!(kind, "drop: segment routing header, seg6/rpl off");
            return false;
        }
        if segments_left == 0 {
            c.skip(pkt, len);
            return true;
        }
        self.mib.inc(Mib::Ip6InHdrErrors);
        self.param_prob6(now, ip, pkt, ICMPV6_HDR_FIELD, at + 2);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, RxChecksum};
    use core::time::Duration;
    use lowtide_wire::checksum;
    use lowtide_wire::ip::PROTO_ICMPV6;
    use std::net::IpAddr;

    const US: &str = "fd00::2";
    const THEM: &str = "fd00::1";

    fn stack() -> Stack {
        let mut s = Stack::new(Config::default(), 1);
        s.add_address(US.parse().unwrap());
        s
    }

    /// An ICMPv6 echo request of `len` data bytes, its checksum over the
    /// upper-layer length (RFC 8200 section 8.1).
    fn echo(len: usize) -> Vec<u8> {
        let (src, dst): (IpAddr, IpAddr) = (THEM.parse().unwrap(), US.parse().unwrap());
        let mut msg = vec![128u8, 0, 0, 0, 0x12, 0x34, 0, 1];
        msg.extend((0..len).map(|i| i as u8));
        let pseudo = checksum::pseudo_header(src, dst, PROTO_ICMPV6, msg.len() as u32);
        let sum = !checksum::fold(checksum::sum(&msg, pseudo));
        msg[2..4].copy_from_slice(&sum.to_be_bytes());
        msg
    }

    /// An IPv6 packet from THEM to US: `first` as the fixed header's next header,
    /// then `rest` (extension headers and the upper layer) as they are.
    fn packet(first: u8, rest: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, first, 64];
        p[4..6].copy_from_slice(&(rest.len() as u16).to_be_bytes());
        p.extend_from_slice(&THEM.parse::<std::net::Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(&US.parse::<std::net::Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(rest);
        p
    }

    /// An 8-byte options header naming `next`, holding `opts` (6 bytes).
    fn opts(next: u8, opts: [u8; 6]) -> Vec<u8> {
        let mut h = vec![next, 0];
        h.extend(opts);
        h
    }

    fn count(s: &Stack, m: Mib) -> u64 {
        s.counters().get(m)
    }

    /// The ICMPv6 message the stack sent, if any: (type, code, the word after the
    /// checksum).
    fn sent(s: &mut Stack) -> Option<(u8, u8, u32)> {
        let t = s.poll_transmit(Instant::ZERO)?;
        let m = &t.packet[IPV6_HEADER_LEN..];
        Some((m[0], m[1], u32::from_be_bytes([m[4], m[5], m[6], m[7]])))
    }

    /// Hop-by-hop, destination options and a routing header with no segments
    /// left are walked to the upper layer, which answers; padding and a
    /// skippable unknown option (action 00) are passed.
    #[test]
    fn extension_headers_reach_the_upper_layer() {
        let mut rest = opts(NEXTHDR_DEST, [1, 4, 0, 0, 0, 0]); // hop-by-hop: PadN
        rest.extend(opts(NEXTHDR_ROUTING, [0x1e, 2, 0, 0, 1, 0])); // unknown 00, Pad1
        rest.extend([PROTO_ICMPV6, 0, 0, 0, 0, 0, 0, 0]); // routing, type 0, none left
        rest.extend(echo(16));
        let mut s = stack();
        s.handle_packet(
            Instant::ZERO,
            &packet(NEXTHDR_HOP, &rest),
            RxChecksum::Verify,
        );
        assert_eq!(sent(&mut s).map(|m| m.0), Some(129), "an echo reply");
        assert_eq!(count(&s, Mib::Ip6InDelivers), 1);
        assert_eq!(count(&s, Mib::Ip6InHdrErrors), 0);
    }

    /// `ip6_tlvopt_unknown`: action 01 drops silently, 10 answers with a
    /// parameter problem (code 2) at the option; bad padding drops; too many
    /// options drop; every drop is a header error.
    #[test]
    fn options_are_judged_as_ip6_parse_tlv() {
        type Answer = Option<(u8, u8, u32)>;
        let cases: [([u8; 6], Answer); 4] = [
            ([0x5e, 0, 1, 2, 0, 0], None),             // 01: drop
            ([0x9e, 0, 1, 2, 0, 0], Some((4, 2, 42))), // 10: answer
            ([1, 4, 0, 0, 9, 0], None),                // PadN not zero
            ([0, 0, 0, 0, 0, 0], None),                // six Pad1 and the header's two: 6 pads ok
        ];
        for (o, answer) in cases {
            let mut rest = opts(PROTO_ICMPV6, o);
            rest.extend(echo(8));
            let mut s = stack();
            s.handle_packet(
                Instant::ZERO,
                &packet(NEXTHDR_DEST, &rest),
                RxChecksum::Verify,
            );
            let ok = o == [0; 6];
            assert_eq!(count(&s, Mib::Ip6InHdrErrors), u64::from(!ok), "{o:?}");
            match ok {
                true => assert_eq!(sent(&mut s).map(|m| m.0), Some(129)),
                false => assert_eq!(sent(&mut s), answer, "{o:?}"),
            }
        }
        let mut cfg = Config::default();
        cfg.set("net.ipv6.max_dst_opts_number", "1").unwrap();
        let mut s = Stack::new(cfg, 1);
        s.add_address(US.parse().unwrap());
        let mut rest = opts(PROTO_ICMPV6, [0x1e, 0, 0x1e, 0, 1, 0]);
        rest.extend(echo(8));
        s.handle_packet(
            Instant::ZERO,
            &packet(NEXTHDR_DEST, &rest),
            RxChecksum::Verify,
        );
        assert_eq!(
            count(&s, Mib::Ip6InHdrErrors),
            1,
            "two options over a limit of 1"
        );
    }

    /// A routing header with segments left is one this kernel does not route: a
    /// parameter problem at its type; segment routing is dropped while off; an
    /// unknown next header past the extension headers is answered at the byte
    /// that named it; a hop-by-hop header not first is such an unknown one.
    #[test]
    fn routing_headers_and_unknown_next_headers() {
        let mut s = stack();
        let mut rest = vec![PROTO_ICMPV6, 0, 0, 1, 0, 0, 0, 0];
        rest.extend(echo(8));
        s.handle_packet(
            Instant::ZERO,
            &packet(NEXTHDR_ROUTING, &rest),
            RxChecksum::Verify,
        );
        assert_eq!(sent(&mut s), Some((4, 0, 42)));
        assert_eq!(count(&s, Mib::Ip6InHdrErrors), 1);
        rest[2] = 4; // segment routing
        s.handle_packet(
            Instant::ZERO,
            &packet(NEXTHDR_ROUTING, &rest),
            RxChecksum::Verify,
        );
        assert_eq!(sent(&mut s), None);
        let mut rest = opts(NEXTHDR_HOP, [1, 4, 0, 0, 0, 0]);
        rest.extend(opts(PROTO_ICMPV6, [1, 4, 0, 0, 0, 0]));
        rest.extend(echo(8));
        s.handle_packet(
            Instant::ZERO,
            &packet(NEXTHDR_DEST, &rest),
            RxChecksum::Verify,
        );
        assert_eq!(
            sent(&mut s),
            Some((4, 1, 40)),
            "unknown next header, named at 40"
        );
        assert_eq!(count(&s, Mib::Ip6InUnknownProtos), 1);
    }

    /// The fragment header of an echo request in two fragments, an atomic
    /// fragment, a first fragment without the upper header, a fragment not a
    /// multiple of 8, and a timeout's time exceeded.
    #[test]
    fn fragments_reassemble_and_are_judged_as_ipv6_frag_rcv() {
        let msg = echo(100);
        let frag = |off: usize, more: bool, data: &[u8]| {
            let mut h = vec![PROTO_ICMPV6, 0, 0, 0, 0, 0, 0, 7];
            h[2..4].copy_from_slice(&((off as u16) | u16::from(more)).to_be_bytes());
            h.extend_from_slice(data);
            packet(NEXTHDR_FRAGMENT, &h)
        };
        let mut s = stack();
        s.handle_packet(
            Instant::ZERO,
            &frag(48, false, &msg[48..]),
            RxChecksum::Verify,
        );
        s.handle_packet(
            Instant::ZERO,
            &frag(0, true, &msg[..48]),
            RxChecksum::Verify,
        );
        assert_eq!(
            sent(&mut s).map(|m| m.0),
            Some(129),
            "the datagram answered"
        );
        assert_eq!(count(&s, Mib::Ip6ReasmReqds), 2);
        assert_eq!(count(&s, Mib::Ip6ReasmOKs), 1);
        assert_eq!(s.defrag6.next_expiry(), None);
        s.handle_packet(Instant::ZERO, &frag(0, false, &msg), RxChecksum::Verify);
        assert_eq!(sent(&mut s).map(|m| m.0), Some(129), "an atomic fragment");
        assert_eq!(count(&s, Mib::Ip6ReasmOKs), 2);
        s.handle_packet(Instant::ZERO, &frag(0, true, &msg[..4]), RxChecksum::Verify);
        assert_eq!(sent(&mut s), Some((4, 3, 0)), "headers incomplete");
        s.handle_packet(
            Instant::ZERO,
            &frag(0, true, &msg[..44]),
            RxChecksum::Verify,
        );
        assert_eq!(sent(&mut s), Some((4, 0, 4)), "not a multiple of 8");
        assert_eq!(count(&s, Mib::Ip6InHdrErrors), 2);
        s.handle_packet(
            Instant::ZERO,
            &frag(0, true, &msg[..48]),
            RxChecksum::Verify,
        );
        let at = s.poll_timeout().expect("the queue's timer");
        // ip6frag_time (60 s), as the timer wheel runs it: level 4, 4096-jiffy
        // buckets, so 61.44 s.
        assert_eq!(at, Instant::ZERO + Duration::from_millis(61_440));
        s.handle_timeout(at);
        assert_eq!(sent(&mut s).map(|m| (m.0, m.1)), Some((3, 1)));
        assert_eq!(count(&s, Mib::Ip6ReasmTimeout), 1);
        assert_eq!(count(&s, Mib::Icmp6OutTimeExcds), 1);
    }

    proptest::proptest! {
        /// Hostile extension headers and fragments (any next header chain, any
        /// lengths, any payload length field, IPv4 fragments too) never panic, and
        /// the queues' memory returns to 0 once their timers ran.
        #[test]
        fn hostile_headers_never_panic(
            pkts in proptest::collection::vec(
                (proptest::sample::select(vec![0u8, 43, 44, 51, 59, 60, 6, 58]),
                 proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120),
                 0u16..200, proptest::prelude::any::<bool>()),
                1..12)
        ) {
            let mut s = stack();
            for (first, rest, plen, v4) in pkts {
                let mut p = packet(first, &rest);
                p[4..6].copy_from_slice(&plen.to_be_bytes());
                if v4 {
                    // The same bytes as an IPv4 fragment of protocol `first`.
                    let mut h = vec![0x45, 0, 0, 0, 0, 9, 0x20, 0, 64, first, 0, 0];
                    h.extend([10, 0, 0, 1, 10, 0, 0, 2]);
                    h[6..8].copy_from_slice(&(0x2000 | (plen & 0x1fff)).to_be_bytes());
                    h.extend_from_slice(&rest);
                    let total = h.len() as u16;
                    h[2..4].copy_from_slice(&total.to_be_bytes());
                    lowtide_wire::ip::fill_ipv4_checksum(&mut h[..20]);
                    s.add_address("10.0.0.2".parse().unwrap());
                    s.handle_packet(Instant::ZERO, &h, RxChecksum::Verify);
                }
                s.handle_packet(Instant::ZERO, &p, RxChecksum::Verify);
                while s.poll_transmit(Instant::ZERO).is_some() {}
            }
            // ip6frag_time's 60 s timer runs at 61.44 s (the wheel's level 4).
            s.handle_timeout(Instant::ZERO + Duration::from_millis(61_440));
            proptest::prop_assert_eq!(s.defrag.mem + s.defrag6.mem, 0);
        }
    }
}
