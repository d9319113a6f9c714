//! A simulated host: a lowtide [`Stack`], its NIC (transmit queue and receive ring)
//! and the table mapping its sockets to the applications that own them.
//!
//! Receive path: a NAPI poll runs one interrupt-coalescing window (`rx_usecs`, 20 µs
//! by default, like a NIC's `ethtool -C rx-usecs`) after the first arrival at an
//! idle host, takes every segment that has arrived by then from the incoming links'
//! pipes into the RX ring, and hands the whole batch to the stack. With GRO, a batch's in-order segments of one flow
//! are merged (as Linux's `napi_gro_receive`) after their checksums are verified;
//! segments that fail verification go to the stack unmerged, to be counted there.

mod gro;

use crate::nic::NicQueue;
pub use gro::GRO_MAX_LEN;
use gro::{FlowKey, Held, GRO_MAX_HELD};
use lowtide::{Instant, RxChecksum, SocketHandle, Stack, TxToken};
use lowtide_link::WireSeg;
use lowtide_wire::pool::BufPool;
use std::net::IpAddr;

/// Which application a socket belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketRole {
    /// The listener accepting every flow.
    Listener,
    /// The sending end of a flow.
    Sender(u32),
    /// The receiving end of a flow.
    Receiver(u32),
    /// A connection of the hostile peer, accepted and never read.
    Hostile,
}

/// One simulated host: a machine with a NIC (not [`lowtide::posix::Host`], the
/// socket layer over a [`Stack`]).
pub struct SimHost {
    /// The TCP/IP stack.
    pub stack: Stack,
    /// The host's address.
    pub addr: IpAddr,
    /// The device's transmit queue.
    pub nic: NicQueue,
    /// The link direction this host's NIC transmits on.
    pub tx_link: usize,
    /// A packet is being serialized (the transmitter is busy until its end).
    pub tx_busy: bool,
    /// The TX completion still owed for the packet being serialized
    /// ([`crate::scenario::TxCompletion::Wire`]; given at dequeue otherwise).
    pub tx_owed: Option<TxToken>,
    /// Wire segments received and not yet polled.
    pub rx_ring: Vec<WireSeg>,
    /// The time of the pending NAPI poll, if any.
    pub rx_poll_at: Option<Instant>,
    /// The link directions delivering to this host.
    pub rx_links: Vec<usize>,
    /// The time of the pending timer event, if any.
    pub timer_at: Option<Instant>,
    /// The time of the pending qdisc watchdog (fq's pacing), if any.
    pub qdisc_wake_at: Option<Instant>,
    sockets: Vec<Option<(SocketHandle, SocketRole)>>,
    gro_held: Vec<(FlowKey, Held)>,
    /// Frag lists of packets GRO held, reused.
    frag_lists: Vec<Vec<bytes::Bytes>>,
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

impl SimHost {
    /// A host with the given stack (the address is added to it).
    pub fn new(mut stack: Stack, addr: IpAddr, queue_limit: usize, tx_link: usize) -> SimHost {
        stack.add_address(addr);
        // The NIC copies payload from the send queue straight into the wire
        // segments (World::start_tx).
        stack.set_tx_payload_apart(true);
        SimHost {
            stack,
            addr,
            nic: NicQueue::new(queue_limit),
            tx_link,
            tx_busy: false,
            tx_owed: None,
            rx_ring: Vec::new(),
            rx_poll_at: None,
            rx_links: Vec::new(),
            timer_at: None,
            qdisc_wake_at: None,
            sockets: Vec::new(),
            gro_held: Vec::with_capacity(GRO_MAX_HELD),
            frag_lists: Vec::new(),
            rx_csum_valid: false,
            pool: BufPool::new(),
            spent: Vec::new(),
        }
    }

    /// Records that socket `h` belongs to `role`.
    pub fn register(&mut self, h: SocketHandle, role: SocketRole) {
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
    pub fn role(&self, h: SocketHandle) -> Option<SocketRole> {
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

    /// How the stack is to treat the checksums of packets that reach it unmerged.
    pub fn rx_checksum(&self) -> RxChecksum {
        match self.rx_csum_valid {
            true => RxChecksum::Unnecessary,
            false => RxChecksum::Verify,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::gro::{checksums_ok, flow_key};
    use lowtide_wire::tcp::{TcpFlags, TcpRepr};
    use lowtide_wire::testing::{tcp_packet, Csum};
    use std::net::SocketAddr;

    fn packet(src_port: u16, payload: &[u8]) -> Vec<u8> {
        let tcp = TcpRepr {
            seq: 1000,
            ack: 1,
            flags: TcpFlags::ACK,
            window: 1000,
            ..TcpRepr::default()
        };
        let src = SocketAddr::new("10.0.0.1".parse().unwrap(), src_port);
        let dst = "10.0.0.2:5001".parse().unwrap();
        tcp_packet(src, dst, &tcp, payload, 7, Csum::Full)
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
