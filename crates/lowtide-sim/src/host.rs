//! A simulated host: a lowtide [`Stack`], its NIC (transmit queue and receive ring)
//! and the table mapping its sockets to the applications that own them.
//!
//! Receive path: a NAPI poll runs one interrupt-coalescing window (`rx_usecs`, 20 µs
//! by default, like a NIC's `ethtool -C rx-usecs`) after the first arrival at an
//! idle host, takes every segment that has arrived by then from the incoming links'
//! pipes into the RX ring, and hands the whole batch to the stack. With GRO, a batch's in-order segments of one flow
//! are merged (as Linux's `napi_gro_receive`) after their checksums are verified;
//! segments that fail verification go to the stack unmerged, to be counted there.

use crate::link::WireSeg;
use crate::nic::NicQueue;
use lowtide::{Instant, RxChecksum, SocketHandle, Stack, TxToken};
use lowtide_wire::pool::BufPool;
use lowtide_wire::tcp::{four_tuple, four_tuple_apart};
use lowtide_wire::{checksum, gso, ip::IpRepr, ip::PROTO_TCP};
use std::net::IpAddr;

/// Largest GRO super-packet (IP length), as Linux's 64 KB `GRO_MAX_SIZE`.
pub const GRO_MAX_LEN: usize = 65_535;
/// Flows a NAPI poll holds for merging at once (Linux `MAX_GRO_SKBS`).
const GRO_MAX_HELD: usize = 8;

/// Which application a socket belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The listener accepting every flow.
    Listener,
    /// The sending end of a flow.
    Sender(u32),
    /// The receiving end of a flow.
    Receiver(u32),
}

/// One simulated host.
pub struct Host {
    /// The TCP/IP stack.
    pub stack: Stack,
    /// The host's address.
    pub addr: IpAddr,
    /// The device's transmit queue.
    pub nic: NicQueue,
    /// The link direction this host's NIC transmits on.
    pub tx_link: usize,
    /// The packet being serialized, whose TX completion is pending.
    pub tx_busy: Option<TxToken>,
    /// Wire segments received and not yet polled.
    pub rx_ring: Vec<WireSeg>,
    /// The time of the pending NAPI poll, if any.
    pub rx_poll_at: Option<Instant>,
    /// The link directions delivering to this host.
    pub rx_links: Vec<usize>,
    /// The time of the pending timer event, if any.
    pub timer_at: Option<Instant>,
    sockets: Vec<Option<(SocketHandle, Role)>>,
    gro_held: Vec<(FlowKey, Vec<u8>)>,
    /// TCP checksums of arriving packets are known good (no link corrupts): they are
    /// not summed again (`CHECKSUM_UNNECESSARY`).
    pub rx_csum_valid: bool,
    /// GRO accumulators, reused.
    pool: BufPool,
    /// Buffers of received packets the stack is done with, for the world to give back
    /// to the sending host's stack (`Stack::recycle_buffer`), whose pool builds its
    /// next packets and segments from them.
    pub spent: Vec<Vec<u8>>,
}

impl Host {
    /// A host with the given stack (the address is added to it).
    pub fn new(mut stack: Stack, addr: IpAddr, queue_limit: usize, tx_link: usize) -> Host {
        stack.add_address(addr);
        // The NIC copies payload from the send queue straight into the wire
        // segments (World::start_tx).
        stack.set_tx_payload_apart(true);
        Host {
            stack,
            addr,
            nic: NicQueue::new(queue_limit),
            tx_link,
            tx_busy: None,
            rx_ring: Vec::new(),
            rx_poll_at: None,
            rx_links: Vec::new(),
            timer_at: None,
            sockets: Vec::new(),
            gro_held: Vec::with_capacity(GRO_MAX_HELD),
            rx_csum_valid: false,
            pool: BufPool::new(),
            spent: Vec::new(),
        }
    }

    /// Records that socket `h` belongs to `role`.
    pub fn register(&mut self, h: SocketHandle, role: Role) {
        let i = h.index() as usize;
        if self.sockets.len() <= i {
            self.sockets.resize(i + 1, None);
        }
        self.sockets[i] = Some((h, role));
    }

    /// Forgets socket `h`.
    pub fn unregister(&mut self, h: SocketHandle) {
        if let Some(s) = self.sockets.get_mut(h.index() as usize) {
            if s.is_some_and(|(x, _)| x == h) {
                *s = None;
            }
        }
    }

    /// The owner of socket `h`, if it is registered.
    #[inline]
    pub fn role(&self, h: SocketHandle) -> Option<Role> {
        match self.sockets.get(h.index() as usize) {
            Some(Some((x, r))) if *x == h => Some(*r),
            _ => None,
        }
    }

    /// The NAPI poll: hands every segment in the RX ring to the stack, merged by
    /// GRO if `gro`.
    pub fn napi_poll(&mut self, now: Instant, gro: bool) {
        let mut ring = std::mem::take(&mut self.rx_ring);
        if gro {
            for pkt in ring.drain(..) {
                self.gro_receive(now, pkt);
            }
            self.gro_flush(now);
        } else {
            let csum = self.rx_checksum();
            for seg in ring.drain(..) {
                let pkt = seg.flatten();
                self.stack.handle_packet(now, &pkt, csum);
                self.spent.push(pkt);
            }
        }
        // Keep the ring's capacity for the next batch.
        self.rx_ring = ring;
    }

    /// `napi_gro_receive` for one segment. [`gso::gro_merge`] verifies the
    /// checksums of the segments it merges; a segment that starts a new super-packet
    /// is verified here, so each good segment is summed once.
    /// How the stack is to treat the checksums of packets that reach it unmerged.
    pub fn rx_checksum(&self) -> RxChecksum {
        match self.rx_csum_valid {
            true => RxChecksum::Unnecessary,
            false => RxChecksum::Verify,
        }
    }

    fn gro_receive(&mut self, now: Instant, seg: WireSeg) {
        if self.gro_merge_apart(&seg) {
            return self.spent.push(seg.head);
        }
        let pkt = seg.flatten();
        let key = flow_key(&pkt);
        let held = key.and_then(|k| self.gro_held.iter().position(|(h, _)| *h == k));
        if let Some(i) = held {
            self.grow_held(i);
            let acc = &mut self.gro_held[i].1;
            let merged = match self.rx_csum_valid {
                true => gso::gro_merge_csum_valid(acc, &pkt, GRO_MAX_LEN),
                false => gso::gro_merge(acc, &pkt, GRO_MAX_LEN),
            };
            if merged {
                return self.spent.push(pkt);
            }
        }
        let verify_tcp = !self.rx_csum_valid;
        let Some(key) = key.filter(|_| checksums_ok(&pkt, verify_tcp)) else {
            // Not verifiable: the stack verifies again and counts the error.
            self.stack.handle_packet(now, &pkt, RxChecksum::Verify);
            return self.spent.push(pkt);
        };
        if let Some(i) = held {
            let old = std::mem::replace(&mut self.gro_held[i].1, pkt);
            self.stack.handle_packet(now, &old, RxChecksum::Unnecessary);
            return self.done_with(old);
        }
        if self.gro_held.len() == GRO_MAX_HELD {
            let (_, oldest) = self.gro_held.remove(0);
            self.stack
                .handle_packet(now, &oldest, RxChecksum::Unnecessary);
            self.done_with(oldest);
        }
        self.gro_held.push((key, pkt));
    }

    /// GRO for a segment whose payload lies apart (a trusted medium only): appended
    /// to its flow's held packet straight from where it lies, if it continues it.
    fn gro_merge_apart(&mut self, seg: &WireSeg) -> bool {
        if seg.body.is_empty() || !self.rx_csum_valid {
            return false;
        }
        let Ok(tuple) = four_tuple_apart(&seg.head, seg.body.len()) else {
            return false;
        };
        let key = FlowKey::of(tuple);
        let Some(i) = self.gro_held.iter().position(|(h, _)| *h == key) else {
            return false;
        };
        self.grow_held(i);
        let acc = &mut self.gro_held[i].1;
        gso::gro_merge_apart_csum_valid(acc, &seg.head, &seg.body, GRO_MAX_LEN)
    }

    /// Gives held packet `i` a 64 KB pooled buffer before it first grows, so that
    /// merging never reallocates; the segment it held goes back to its sender.
    fn grow_held(&mut self, i: usize) {
        let acc = &mut self.gro_held[i].1;
        // Only a packet with payload can grow (gso::merge's first rule).
        if acc.capacity() < GRO_MAX_LEN && gso::merged_segment_size(acc).is_some() {
            let mut big = self.pool.take(GRO_MAX_LEN);
            big.extend_from_slice(acc);
            let first = std::mem::replace(acc, big);
            self.spent.push(first);
        }
    }

    /// A held packet went to the stack: a GRO accumulator stays for the next one, a
    /// plain segment goes back to its sender.
    fn done_with(&mut self, pkt: Vec<u8>) {
        match pkt.capacity() >= GRO_MAX_LEN {
            true => self.pool.give(pkt),
            false => self.spent.push(pkt),
        }
    }

    /// `napi_gro_flush`: hands every held packet to the stack.
    fn gro_flush(&mut self, now: Instant) {
        let mut held = std::mem::take(&mut self.gro_held);
        for (_, pkt) in held.drain(..) {
            self.stack.handle_packet(now, &pkt, RxChecksum::Unnecessary);
            self.done_with(pkt);
        }
        self.gro_held = held;
    }
}

/// Addresses and ports of a TCP packet: what GRO matches segments by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FlowKey {
    src: IpAddr,
    dst: IpAddr,
    ports: u32,
}

/// The flow of a TCP packet, read without verifying anything.
fn flow_key(pkt: &[u8]) -> Option<FlowKey> {
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
fn checksums_ok(pkt: &[u8], verify_tcp: bool) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr};

    fn packet(src_port: u16, payload: &[u8]) -> Vec<u8> {
        let (src, dst): (IpAddr, IpAddr) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let tcp = TcpRepr {
            src_port,
            dst_port: 5001,
            seq: 1000,
            ack: 1,
            flags: TcpFlags::ACK,
            window: 1000,
            urgent: 0,
            options: TcpOptions::default(),
        };
        let ip = IpRepr {
            src,
            dst,
            protocol: PROTO_TCP,
            hop_limit: 64,
            ecn: 0,
            header_len: 20,
            payload_len: tcp.header_len() + payload.len(),
        };
        let mut p = vec![0u8; 20 + tcp.header_len()];
        ip.emit(&mut p, 7);
        tcp.emit(&mut p[20..]);
        p.extend_from_slice(payload);
        checksum::fill_tcp(src, dst, &mut p[20..]);
        p
    }

    #[test]
    fn checksums_catch_every_single_bit_flip() {
        let p = packet(40000, &[0xab; 64]);
        assert!(checksums_ok(&p, true));
        for byte in 0..p.len() {
            for bit in 0..8 {
                let mut q = p.clone();
                q[byte] ^= 1 << bit;
                assert!(
                    !checksums_ok(&q, true),
                    "flip of bit {bit} of byte {byte} not caught"
                );
            }
        }
    }

    #[test]
    fn flow_keys_tell_flows_apart() {
        let a = flow_key(&packet(40000, b"x")).unwrap();
        let b = flow_key(&packet(40001, b"x")).unwrap();
        assert_ne!(a, b);
        assert_eq!(a, flow_key(&packet(40000, b"yz")).unwrap());
        assert_eq!(flow_key(&[0x45, 0]), None);
    }
}
