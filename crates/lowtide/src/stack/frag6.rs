//! IPv6 reassembly (net/ipv6/reassembly.c), on IPv4's queues (stack/defrag.rs):
//! the fragment header's handler, `ipv6_frag_rcv`. An atomic fragment (offset 0,
//! no more fragments: RFC 6946) goes on at once; a first fragment that does not
//! hold every header up to the upper layer's is refused with a parameter problem
//! (RFC 8200 section 4.5, `ipv6frag_thdr_truncated`); a fragment that is not a
//! multiple of 8 bytes long and not the last one, or that would end past 65535,
//! is answered with a parameter problem. The datagram is the first fragment's
//! headers up to its fragment header, that header's next header in its place,
//! then every fragment's bytes; the walk goes on after them
//! (`ip6_protocol_deliver_rcu`'s resubmit). Queues wait `net.ipv6.ip6frag_time`
//! (60 s); no `ip_frag_too_far` for IPv6.

use super::defrag::{frag_ecn, FragKey, Insert};
use super::exthdrs::{ipv6_skip_exthdr, Cursor, ICMPV6_HDR_FIELD, IPV6_MAXPLEN};
use super::Stack;
use crate::mib::Mib;
use crate::tcp::skbuff::rx_truesize;
use crate::time::Instant;
use lowtide_wire::ip::{IpRepr, IPV6_HEADER_LEN};
use tracing::trace;

/// `ICMPV6_HDR_INCOMP`: the first fragment lacks headers.
const ICMPV6_HDR_INCOMP: u8 = 3;
/// `IP6_MF`, `IP6_OFFSET`.
const IP6_MF: u16 = 0x0001;
const IP6_OFFSET: u16 = 0xfff8;
/// The first fragment's bytes kept for a timeout's ICMPv6 error, which quotes at
/// most `IPV6_MIN_MTU` less its headers.
const HEAD_KEEP: usize = 1280;
/// `offsetof(struct ipv6hdr, payload_len)`.
const PAYLOAD_LEN_FIELD: usize = 4;
/// The upper layers whose header the first fragment must hold whole.
const NEXTHDR_TCP: u8 = 6;
const NEXTHDR_UDP: u8 = 17;
const NEXTHDR_ICMP: u8 = 58;

/// What the fragment header's handler made of the packet.
pub(super) enum Frag6 {
    /// Dropped, queued or answered: the walk stops.
    Stop,
    /// An atomic fragment: the walk goes on past its header.
    Atomic,
    /// The datagram is whole: the walk goes on in it from this cursor.
    Whole(Vec<u8>, Cursor),
}

/// `ipv6frag_thdr_truncated`: whether a first fragment ends before the upper
/// layer's header (TCP's, UDP's, ICMPv6's fixed part, else one byte) from the
/// fragment header at `start`, walking as `ipv6_skip_exthdr` from the fixed
/// header's next header, as Linux does.
fn thdr_truncated(pkt: &[u8], start: usize, nexthdr: u8) -> bool {
    let Some((off, nh, frag_off)) = ipv6_skip_exthdr(pkt, start, nexthdr) else {
        return false;
    };
    if frag_off & IP6_OFFSET != 0 {
        return false;
    }
    let need = match nh {
        NEXTHDR_TCP => 20,
        NEXTHDR_UDP => 8,
        NEXTHDR_ICMP => 8,
        _ => 1,
    };
    off + need > pkt.len()
}

impl Stack {
    /// `ipv6_frag_rcv`: the fragment header at `c.off` of the datagram `pkt`.
    pub(super) fn ipv6_frag_rcv(
        &mut self,
        now: Instant,
        ip: &IpRepr,
        pkt: &[u8],
        c: &mut Cursor,
    ) -> Frag6 {
        let (at, end) = (c.off, IPV6_HEADER_LEN + ip.payload_len);
        let pkt = &pkt[..end];
        let plen_field = u16::from_be_bytes([pkt[4], pkt[5]]);
        if !c.fragmented {
            self.mib.inc(Mib::Ip6ReasmReqds);
        }
        // fail_hdr: a second fragment header, a jumbogram's, or one cut short.
        if c.fragmented || plen_field == 0 || end < at + 8 {
            self.mib.inc(Mib::Ip6InHdrErrors);
            self.param_prob6(now, ip, pkt, ICMPV6_HDR_FIELD, at);
            return Frag6::Stop;
        }
        let frag_off = u16::from_be_bytes([pkt[at + 2], pkt[at + 3]]);
        if frag_off & (IP6_OFFSET | IP6_MF) == 0 {
            self.mib.inc(Mib::Ip6ReasmOKs);
            c.skip_fragment(pkt);
            return Frag6::Atomic;
        }
        if thdr_truncated(pkt, at, pkt[6]) {
            self.mib.inc(Mib::Ip6InHdrErrors);
            self.param_prob6(now, ip, pkt, ICMPV6_HDR_INCOMP, 0);
            return Frag6::Stop;
        }
        let id = u32::from_be_bytes([pkt[at + 4], pkt[at + 5], pkt[at + 6], pkt[at + 7]]);
        let key = FragKey {
            src: ip.src,
            dst: ip.dst,
            id,
            protocol: 0,
        };
        if !self.ip_find(now, key) {
            self.mib.inc(Mib::Ip6ReasmFails);
            trace!(src = %ip.src, "drop: fragment memory above ip6frag_high_thresh");
            return Frag6::Stop;
        }
        match self.ip6_frag_queue(now, key, ip, pkt, c, frag_off) {
            Some(true) => self.ip6_frag_reasm(key),
            Some(false) => Frag6::Stop,
            None => {
                self.frag_discard(key);
                Frag6::Stop
            }
        }
    }

    /// `ip6_frag_queue`: `Some(true)` when the datagram is whole, `Some(false)`
    /// while it waits (or the fragment alone was dropped or answered), `None` when
    /// the datagram is discarded (`discard_fq`).
    fn ip6_frag_queue(
        &mut self,
        now: Instant,
        key: FragKey,
        ip: &IpRepr,
        pkt: &[u8],
        c: &Cursor,
        frag_off: u16,
    ) -> Option<bool> {
        let at = c.off;
        let offset = u32::from(frag_off & IP6_OFFSET);
        let end = offset as usize + (pkt.len() - at - 8);
        if end > IPV6_MAXPLEN {
            self.mib.inc(Mib::Ip6InHdrErrors);
            self.param_prob6(now, ip, pkt, ICMPV6_HDR_FIELD, at + 2);
            return Some(false);
        }
        let end = end as u32;
        let q = self.defrag6.get_mut(&key).expect("found");
        if frag_off & IP6_MF == 0 {
            if end < q.len || q.last_in && end != q.len {
                return None;
            }
            q.last_in = true;
            q.len = end;
        } else {
            if end & 7 != 0 {
                // RFC 8200 section 4.5: a fragment not the last is a multiple of 8.
                self.mib.inc(Mib::Ip6InHdrErrors);
                self.param_prob6(now, ip, pkt, ICMPV6_HDR_FIELD, PAYLOAD_LEN_FIELD);
                return Some(false);
            }
            if end > q.len {
                if q.last_in {
                    return None;
                }
                q.len = end;
            }
        }
        if end == offset {
            return None;
        }
        match q.insert(offset, &pkt[at + 8..]) {
            Insert::Ok => {}
            Insert::Dup => return Some(false),
            Insert::Overlap => return None,
        }
        let truesize = u64::from(rx_truesize(pkt.len() as u32));
        q.meat += end - offset;
        q.ecn |= 1 << ip.ecn;
        q.truesize += truesize;
        q.max_size = q.max_size.max(pkt.len() as u32);
        if offset == 0 {
            q.first_in = true;
            q.nhoff = c.nhoff;
            q.unfrag = at;
            let keep = pkt.len().min(HEAD_KEEP.max(at + 8));
            let mut head = *ip;
            head.payload_len = pkt.len() - IPV6_HEADER_LEN;
            q.head = Some((head, pkt[..keep].to_vec()));
        }
        let whole = q.first_in && q.last_in && q.meat == q.len;
        self.defrag6.charge(truesize);
        Some(whole)
    }

    /// `ip6_frag_reasm`: the datagram of the whole queue `key`, the fragment
    /// header taken out; `IpReasmFails` (snmp6's) when the fragments' ECN disagree
    /// or the payload would pass 65535 bytes.
    fn ip6_frag_reasm(&mut self, key: FragKey) -> Frag6 {
        let Some(q) = self.defrag6.kill(&key) else {
            return Frag6::Stop;
        };
        let Some((_, head)) = q.head.as_ref() else {
            return Frag6::Stop;
        };
        let (unfrag, nhoff) = (q.unfrag, q.nhoff);
        let payload_len = unfrag - IPV6_HEADER_LEN + q.len as usize;
        let Some(ecn) = frag_ecn(q.ecn).filter(|_| payload_len <= IPV6_MAXPLEN) else {
            self.mib.inc(Mib::Ip6ReasmFails);
            trace!(src = %key.src, id = key.id, "drop: datagram, fragments' ECN or length");
            return Frag6::Stop;
        };
        let nexthdr = head[unfrag];
        let mut out = Vec::with_capacity(unfrag + q.len as usize);
        out.extend_from_slice(&head[..unfrag]);
        out.extend_from_slice(&q.payload());
        out[nhoff] = nexthdr;
        out[4..6].copy_from_slice(&(payload_len as u16).to_be_bytes());
        out[1] |= ecn << 4; // ipv6_change_dsfield(hdr, 0xff, ecn)
        self.mib.inc(Mib::Ip6ReasmOKs);
        let c = Cursor {
            nexthdr,
            off: unfrag,
            nhoff,
            fragmented: true,
        };
        Frag6::Whole(out, c)
    }
}

impl Cursor {
    /// Past an atomic fragment's header.
    fn skip_fragment(&mut self, pkt: &[u8]) {
        (self.nexthdr, self.nhoff) = (pkt[self.off], self.off);
        self.off += 8;
        self.fragmented = true;
    }
}
