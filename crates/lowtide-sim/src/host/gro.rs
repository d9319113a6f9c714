//! The receiving host's GRO (`napi_gro_receive`, `napi_gro_flush`): consecutive
//! segments of a flow merged into one packet before the stack sees them.
//!
//! On a medium that cannot corrupt (`rx_csum_valid`), a segment whose payload lies
//! apart (a slice of the sender's send queue) starts a packet held as its headers plus
//! the payload slices of the segments that join it, as Linux's `skb_gro_receive`
//! appends page frags instead of copying; the stack queues those slices by reference
//! (`Stack::handle_packet_frags`), so the reader's copy is the payload's only one on
//! the receive side. Other packets are held whole in one buffer, merged by copying.

use super::SimHost;
use bytes::Bytes;
use lowtide::{Instant, RxChecksum};
use lowtide_link::WireSeg;
use lowtide_wire::tcp::{four_tuple, four_tuple_apart};
use lowtide_wire::{checksum, gso, ip::IpRepr, ip::PROTO_TCP};
use std::net::IpAddr;

/// Largest GRO super-packet (IP length), as Linux's 64 KB `GRO_MAX_SIZE`.
pub const GRO_MAX_LEN: usize = 65_535;

/// Flows a NAPI poll holds for merging at once (Linux `MAX_GRO_SKBS`); a new flow
/// flushes the oldest.
pub(super) const GRO_MAX_HELD: usize = 8;

/// A packet GRO holds: whole in `pkt`, or, when `frags` is not empty, its IP and TCP
/// headers in `pkt` and its payload in `frags` (`apart` bytes).
#[derive(Debug)]
pub(super) struct Held {
    pkt: Vec<u8>,
    frags: Vec<Bytes>,
    apart: usize,
}

impl SimHost {
    /// `napi_gro_receive` for one segment. [`gso::gro_merge`] verifies the
    /// checksums of the segments it merges; a segment that starts a new super-packet
    /// is verified here, so each good segment is summed once.
    pub(super) fn gro_receive(&mut self, now: Instant, mut seg: WireSeg) {
        if self.gro_merge_apart(&mut seg) {
            return self.spent.push(seg.head);
        }
        if let Some(key) = self.apart_key(&seg) {
            let mut frags = self.frag_lists.pop().unwrap_or_default();
            let apart = seg.body.len();
            frags.push(seg.body);
            let pkt = seg.head;
            return self.hold(now, key, Held { pkt, frags, apart });
        }
        let pkt = seg.flatten();
        let key = flow_key(&pkt);
        let held = key.and_then(|k| self.held_index(k));
        if let Some(i) = held {
            if self.merge_flat(i, &pkt) {
                return self.spent.push(pkt);
            }
        }
        let verify_tcp = !self.rx_csum_valid;
        let Some(key) = key.filter(|_| checksums_ok(&pkt, verify_tcp)) else {
            // Not verifiable: the stack verifies again and counts the error.
            self.stack.handle_packet(now, &pkt, RxChecksum::Verify);
            return self.spent.push(pkt);
        };
        let whole = Held {
            pkt,
            frags: Vec::new(),
            apart: 0,
        };
        self.hold(now, key, whole);
    }

    fn held_index(&self, key: FlowKey) -> Option<usize> {
        self.gro_held.iter().position(|(h, _)| *h == key)
    }

    /// Holds `h` as its flow's packet: the flow's packet held so far goes to the stack,
    /// or, with no room for another flow, the oldest held packet.
    fn hold(&mut self, now: Instant, key: FlowKey, h: Held) {
        if let Some(i) = self.held_index(key) {
            let old = std::mem::replace(&mut self.gro_held[i].1, h);
            return self.deliver(now, old);
        }
        if self.gro_held.len() == GRO_MAX_HELD {
            let (_, oldest) = self.gro_held.remove(0);
            self.deliver(now, oldest);
        }
        self.gro_held.push((key, h));
    }

    /// The flow of a data segment whose payload lies apart, if it may start a packet
    /// held as frags: a trusted medium, TCP, a good IPv4 header checksum (`ip_rcv`).
    fn apart_key(&self, seg: &WireSeg) -> Option<FlowKey> {
        if seg.body.is_empty() || !self.rx_csum_valid {
            return None;
        }
        let ip = IpRepr::parse_apart(&seg.head, seg.body.len(), true).ok()?;
        if ip.protocol != PROTO_TCP {
            return None;
        }
        four_tuple_apart(&seg.head, seg.body.len())
            .ok()
            .map(FlowKey::of)
    }

    /// GRO for a segment whose payload lies apart (a trusted medium only): joined to
    /// its flow's held packet if it continues it, by reference to a packet held as
    /// frags, by copy to one held whole.
    fn gro_merge_apart(&mut self, seg: &mut WireSeg) -> bool {
        if seg.body.is_empty() || !self.rx_csum_valid {
            return false;
        }
        let Ok(tuple) = four_tuple_apart(&seg.head, seg.body.len()) else {
            return false;
        };
        let Some(i) = self.held_index(FlowKey::of(tuple)) else {
            return false;
        };
        let h = &mut self.gro_held[i].1;
        if !h.frags.is_empty() {
            let len = seg.body.len();
            if !gso::gro_merge_frags_csum_valid(&mut h.pkt, h.apart, &seg.head, len, GRO_MAX_LEN) {
                return false;
            }
            h.apart += len;
            h.frags.push(std::mem::take(&mut seg.body));
            return true;
        }
        self.grow_held(i);
        let acc = &mut self.gro_held[i].1.pkt;
        gso::gro_merge_apart_csum_valid(acc, &seg.head, &seg.body, GRO_MAX_LEN)
    }

    /// GRO for a segment in one buffer into held packet `i`.
    fn merge_flat(&mut self, i: usize, pkt: &[u8]) -> bool {
        let h = &mut self.gro_held[i].1;
        if !h.frags.is_empty() {
            // Held as frags only on a trusted medium: the payload joins as a copy.
            let Ok(std::ops::Range { start: hl, end }) = gso::tcp_payload_range(pkt, true) else {
                return false;
            };
            let len = end - hl;
            let head = &pkt[..hl];
            if !gso::gro_merge_frags_csum_valid(&mut h.pkt, h.apart, head, len, GRO_MAX_LEN) {
                return false;
            }
            h.apart += len;
            h.frags.push(Bytes::copy_from_slice(&pkt[hl..end]));
            return true;
        }
        self.grow_held(i);
        let acc = &mut self.gro_held[i].1.pkt;
        match self.rx_csum_valid {
            true => gso::gro_merge_csum_valid(acc, pkt, GRO_MAX_LEN),
            false => gso::gro_merge(acc, pkt, GRO_MAX_LEN),
        }
    }

    /// Gives held packet `i`, held whole, a 64 KB pooled buffer before it first grows,
    /// so that merging never reallocates; the segment it held goes back to its sender.
    fn grow_held(&mut self, i: usize) {
        let acc = &mut self.gro_held[i].1.pkt;
        // Only a packet with payload can grow (gso::merge's first rule).
        if acc.capacity() < GRO_MAX_LEN && gso::merged_segment_size(acc).is_some() {
            let mut big = self.pool.take(GRO_MAX_LEN);
            big.extend_from_slice(acc);
            let first = std::mem::replace(acc, big);
            self.spent.push(first);
        }
    }

    /// Hands a held packet to the stack; its buffers are kept for the next ones (a
    /// GRO accumulator, the frag list) or go back to their sender (headers, a plain
    /// segment).
    fn deliver(&mut self, now: Instant, h: Held) {
        let Held { pkt, mut frags, .. } = h;
        if frags.is_empty() {
            self.stack.handle_packet(now, &pkt, RxChecksum::Unnecessary);
            return match pkt.capacity() >= GRO_MAX_LEN {
                true => self.pool.give(pkt),
                false => self.spent.push(pkt),
            };
        }
        self.stack.handle_packet_frags(now, &pkt, &frags);
        frags.clear();
        self.frag_lists.push(frags);
        self.spent.push(pkt);
    }

    /// `napi_gro_flush`: hands every held packet to the stack.
    pub(super) fn gro_flush(&mut self, now: Instant) {
        let mut held = std::mem::take(&mut self.gro_held);
        for (_, h) in held.drain(..) {
            self.deliver(now, h);
        }
        self.gro_held = held;
    }
}

/// Addresses and ports of a TCP packet: what GRO matches segments by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FlowKey {
    src: IpAddr,
    dst: IpAddr,
    ports: u32,
}

/// The flow of a TCP packet, read without verifying anything.
pub(super) fn flow_key(pkt: &[u8]) -> Option<FlowKey> {
    four_tuple(pkt).ok().map(FlowKey::of)
}

impl FlowKey {
    /// The key of a packet from `src` to `dst`.
    fn of((src, dst): (std::net::SocketAddr, std::net::SocketAddr)) -> FlowKey {
        FlowKey {
            src: src.ip(),
            dst: dst.ip(),
            ports: (src.port() as u32) << 16 | dst.port() as u32,
        }
    }
}

/// The IPv4 header checksum (if any) and the TCP checksum verify.
/// With `verify_tcp` false, the TCP checksum is taken as good (only the IPv4 header's
/// is checked, as `ip_rcv` always does).
pub(super) fn checksums_ok(pkt: &[u8], verify_tcp: bool) -> bool {
    let Ok(ip) = IpRepr::parse(pkt, true) else {
        return false;
    };
    match pkt.get(ip.header_len..ip.header_len + ip.payload_len) {
        Some(seg) if ip.protocol == PROTO_TCP => {
            !verify_tcp || checksum::verify_tcp(ip.src, ip.dst, seg)
        }
        _ => false,
    }
}
