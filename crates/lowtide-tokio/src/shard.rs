//! One stack per queue of a multi-queue device, each with its own driver task:
//! lowtide-tokio on every worker thread (issue 26 §3).
//!
//! [`crate::Net::new_sharded`] runs one stack and one driver per queue (for a TUN
//! device, `TunDevice::open_queues`: one file descriptor per queue). Shards share
//! nothing but the interface, and a connection lives on one shard. The kernel
//! steers a flow's packets to the queue of its symmetric flow hash, or to the queue
//! lowtide last wrote the flow's packets on (`tun_automq_select_queue`; see
//! `lowtide_tun::shard` for the whole rule). So:
//!
//! - A connection the kernel opens lives on the shard whose queue got its SYN: every
//!   shard listens on a [`crate::TcpListener`]'s port, and the listener accepts from
//!   all of them.
//! - A connection lowtide opens goes to the shards in turn, each opening from its own
//!   slice of `net.ipv4.ip_local_port_range`. The kernel's SYN-ACK is steered by the
//!   hash alone (the flow is learnt only after it), so a packet whose local port is
//!   in another shard's slice is handed to that shard ([`Steer`]), as sharded stacks
//!   forward packets a NIC steered to the wrong core.
//! - UDP sockets live on the first shard, and UDP packets are handed to it.
//! - An ICMP error goes to the shard of the connection it quotes (the quoted
//!   packet's source port).
//!
//! The handing over copies the packet into the owner's [`Mailbox`] and wakes its
//! driver; mailboxes are locked alone (never while holding one), so two drivers
//! handing to each other cannot deadlock.

use lowtide::RxChecksum;
use lowtide_wire::ip::{IpRepr, PROTO_ICMPV6 as ICMPV6, PROTO_TCP as TCP};
use lowtide_wire::udp::PROTO_UDP as UDP;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;

/// `IPPROTO_ICMP` (include/uapi/linux/in.h).
const ICMP: u8 = 1;
/// ICMP error messages quote the original packet 8 bytes into the message
/// ([RFC 792](https://www.rfc-editor.org/rfc/rfc792),
/// [RFC 4443 section 2.1](https://www.rfc-editor.org/rfc/rfc4443#section-2.1)).
const ICMP_QUOTE_AT: usize = 8;

/// Packets another shard read for this one, and the waker of this shard's driver.
#[derive(Default)]
pub(crate) struct Mailbox {
    frames: Mutex<Vec<(Vec<u8>, RxChecksum)>>,
    driver: Mutex<Option<Waker>>,
    /// Packets handed to this shard so far.
    pub handed: AtomicU64,
}

impl Mailbox {
    /// Records the driver's waker, so that handed packets wake it.
    pub fn register(&self, w: &Waker) {
        let mut slot = self.driver.lock().unwrap_or_else(|e| e.into_inner());
        if !slot.as_ref().is_some_and(|s| s.will_wake(w)) {
            *slot = Some(w.clone());
        }
    }

    /// Takes the packets handed in so far.
    pub fn take(&self) -> Vec<(Vec<u8>, RxChecksum)> {
        std::mem::take(&mut *self.frames.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn post(&self, packet: &[u8], csum: RxChecksum) {
        (self.frames.lock().unwrap_or_else(|e| e.into_inner())).push((packet.to_vec(), csum));
        self.handed.fetch_add(1, Ordering::Relaxed);
        let w = self
            .driver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(w) = w {
            w.wake();
        }
    }
}

/// What one shard's driver needs to hand packets to the others.
pub(crate) struct Steer {
    /// This shard's index.
    pub me: usize,
    /// Every shard's ephemeral ports, by index.
    pub ports: Arc<[[u16; 2]]>,
    /// Every shard's mailbox, by index.
    pub mail: Arc<[Arc<Mailbox>]>,
}

impl Steer {
    /// This shard's mailbox.
    pub fn mine(&self) -> &Mailbox {
        &self.mail[self.me]
    }

    /// Hands `packet` to the shard that owns it, if that is another one; whether it
    /// did (the caller then drops its copy).
    pub fn hand_over(&self, packet: &[u8], csum: RxChecksum) -> bool {
        match owner(packet, &self.ports) {
            Some(k) if k != self.me => {
                self.mail[k].post(packet, csum);
                true
            }
            _ => false,
        }
    }
}

/// The shard that owns `packet` by the rules of the module's docs; `None`: the one
/// whose queue it arrived on (a connection the kernel opened, a ping, or a packet
/// too short to tell, which that stack's own input then drops and counts).
pub(crate) fn owner(packet: &[u8], ports: &[[u16; 2]]) -> Option<usize> {
    let ip = IpRepr::parse(packet, false).ok()?;
    let l4 = packet.get(ip.header_len..)?;
    match ip.protocol {
        TCP => by_port(port(l4, 2)?, ports),
        UDP => Some(0),
        ICMP | ICMPV6 if l4.first().is_some_and(|&t| is_error(ip.protocol, t)) => {
            let quoted = l4.get(ICMP_QUOTE_AT..)?;
            let q = IpRepr::parse(quoted, false).ok()?;
            match q.protocol {
                TCP => by_port(port(quoted.get(q.header_len..)?, 0)?, ports),
                UDP => Some(0),
                _ => None,
            }
        }
        _ => None,
    }
}

/// ICMP(v6) error types ([RFC 792](https://www.rfc-editor.org/rfc/rfc792): 3
/// unreachable, 4 source quench, 5 redirect, 11 time exceeded, 12 parameter problem;
/// [RFC 4443 section 2.1](https://www.rfc-editor.org/rfc/rfc4443#section-2.1): below 128).
fn is_error(protocol: u8, icmp_type: u8) -> bool {
    match protocol {
        ICMP => matches!(icmp_type, 3 | 4 | 5 | 11 | 12),
        _ => icmp_type < 128,
    }
}

/// The big-endian port at `at` of a TCP or UDP header.
fn port(l4: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*l4.get(at)?, *l4.get(at + 1)?]))
}

/// The shard whose ephemeral slice holds `port`.
fn by_port(port: u16, ports: &[[u16; 2]]) -> Option<usize> {
    ports.iter().position(|r| (r[0]..=r[1]).contains(&port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    const PORTS: [[u16; 2]; 2] = [[32768, 46883], [46884, 60999]];

    /// An IP packet from `src` to `dst` carrying `l4`.
    fn ip(src: &str, dst: &str, protocol: u8, l4: &[u8]) -> Vec<u8> {
        let (src, dst): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
        lowtide_wire::build::ip_packet(src, dst, protocol, l4, 1)
    }

    /// A TCP (or UDP) header's first 20 bytes with these ports.
    fn ports(from: u16, to: u16) -> Vec<u8> {
        let mut h = vec![0; 20];
        h[..2].copy_from_slice(&from.to_be_bytes());
        h[2..4].copy_from_slice(&to.to_be_bytes());
        h
    }

    /// An ICMP message of `icmp_type` quoting `quoted`.
    fn icmp(icmp_type: u8, quoted: &[u8]) -> Vec<u8> {
        let mut m = vec![icmp_type, 0, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(quoted);
        m
    }

    #[test]
    fn tcp_goes_to_the_slice_of_its_local_port() {
        let syn_ack = ip("10.0.0.1", "10.0.0.2", TCP, &ports(80, 50000));
        assert_eq!(owner(&syn_ack, &PORTS), Some(1));
        let to_listener = ip("10.0.0.1", "10.0.0.2", TCP, &ports(40000, 80));
        assert_eq!(owner(&to_listener, &PORTS), None);
        let v6 = ip("fd::1", "fd::2", TCP, &ports(80, 33000));
        assert_eq!(owner(&v6, &PORTS), Some(0));
    }

    #[test]
    fn udp_goes_to_the_first_shard_and_icmp_errors_to_the_quoted_flow() {
        let udp = ip("10.0.0.1", "10.0.0.2", UDP, &ports(53, 50000));
        assert_eq!(owner(&udp, &PORTS), Some(0));
        // Fragmentation needed, quoting lowtide's segment from port 50000.
        let quoted = ip("10.0.0.2", "10.0.0.1", TCP, &ports(50000, 80));
        let err = ip("10.0.0.1", "10.0.0.2", ICMP, &icmp(3, &quoted));
        assert_eq!(owner(&err, &PORTS), Some(1));
        let quoted6 = ip("fd::2", "fd::1", TCP, &ports(33000, 80));
        let too_big = ip("fd::1", "fd::2", ICMPV6, &icmp(2, &quoted6));
        assert_eq!(owner(&too_big, &PORTS), Some(0));
        let echo = ip("10.0.0.1", "10.0.0.2", ICMP, &icmp(8, &[0; 8]));
        assert_eq!(owner(&echo, &PORTS), None);
        let echo6 = ip("fd::1", "fd::2", ICMPV6, &icmp(128, &[0; 8]));
        assert_eq!(owner(&echo6, &PORTS), None);
        assert_eq!(owner(&[0x45, 0], &PORTS), None);
    }
}
