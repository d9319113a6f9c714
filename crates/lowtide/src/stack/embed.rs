//! Entry points for programs that embed the stack by hand: looping one stack's
//! output into another, the unfinished-checksum diagnostic, and the catch-all
//! listener of transparent proxies.

use super::{Sock, Stack};
use crate::mib::Mib;
use crate::socket::{RxChecksum, SocketError, SocketHandle, Transmit, TxPayload};
use crate::tcp::rcvqueue::Payload;
use crate::tcp::Listener;
use crate::time::Instant;
use lowtide_wire::checksum;
use lowtide_wire::ip::IpRepr;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

impl Stack {
    /// [`Stack::recv`] without the copy (Linux's `tcp_read_sock`, which splice and
    /// in-kernel readers use): hands up to `max` ready bytes to `read` where they lie
    /// in the receive queue (one slice per queued buffer, in stream order), then consumes them
    /// exactly as `recv` would (window update, receive-buffer autotuning). Returns the
    /// number of bytes read; `Ok(0)` is the end of the stream, or, with bytes still
    /// queued, the urgent mark: `tcp_read_sock` stops there for good (only
    /// [`Stack::recv`] goes past it).
    pub fn recv_with(
        &mut self,
        now: Instant,
        h: SocketHandle,
        max: usize,
        read: impl FnMut(&[u8]),
    ) -> Result<usize, SocketError> {
        let index = self.user_slot(h)?;
        self.with_tcb(now, index, |tcb, ctx| tcb.read_sock(ctx, max, read))
    }

    /// An empty buffer with room for `len` bytes from the stack's packet-buffer pool
    /// (see [`Stack::recycle_buffer`]), for a device that builds packets of its own
    /// (e.g. the segments of a GSO packet).
    pub fn take_buffer(&mut self, len: usize) -> Vec<u8> {
        self.pool.take(len)
    }

    /// The device's making of a pattern transmission's payload
    /// ([`TxPayload::Pattern`]), when it sends the packet: a single segment's bytes
    /// behind its headers in one pooled buffer ([`Transmit::packet`], then whole),
    /// a GSO packet's into a buffer carved from the stack's payload arenas, kept
    /// apart as a shared slice ([`TxPayload::Bytes`]: what a stored socket's send
    /// queue would have given). Any other packet is left as it is.
    pub fn make_tx_payload(&mut self, tx: &mut Transmit) {
        let TxPayload::Pattern(p) = &tx.payload else {
            return;
        };
        if tx.gso_segs <= 1 {
            let head = tx.packet.len();
            let mut whole = self.pool.take(head + p.len());
            whole.extend_from_slice(&tx.packet);
            whole.resize(head + p.len(), 0);
            p.fill(&mut whole[head..]);
            self.pool.give(core::mem::replace(&mut tx.packet, whole));
            tx.payload = TxPayload::default();
        } else {
            let mut buf = self.frag.take(p.len());
            buf.resize(p.len(), 0);
            p.fill(&mut buf);
            tx.payload = TxPayload::Bytes(buf.freeze());
        }
    }

    /// Gives back the buffer of a packet from [`Stack::poll_transmit`] (or any other
    /// packet buffer) once the device is done with it, for the next packet the stack
    /// builds: large buffers are reused instead of freed and allocated again per
    /// packet ([`lowtide_wire::pool`]). Optional: a buffer not given back is freed.
    pub fn recycle_buffer(&mut self, buf: Vec<u8>) {
        self.pool.give(buf);
    }

    /// Receives a packet that a lowtide stack's [`Stack::poll_transmit`] produced,
    /// with no device in between (two stacks joined by hand, a channel, a loopback).
    ///
    /// Such a packet is CHECKSUM_PARTIAL: its TCP checksum field holds only the
    /// pseudo-header sum, and it may be a GSO super-packet. Linux trusts a
    /// CHECKSUM_PARTIAL skb that crosses veth or loopback unfinished
    /// (`skb_csum_unnecessary`); so does this call, and it takes a super-packet as a
    /// GRO packet. Passing `tx.packet` to [`Stack::handle_packet`] with
    /// [`RxChecksum::Verify`] instead drops every packet (counted in
    /// `TcpInCsumErrors` and `LowtideInCsumPartial`, with a warning): use this call, or
    /// finish the packet first with [`Transmit::segments`] as a device would.
    pub fn handle_transmit(&mut self, now: Instant, tx: &Transmit) {
        if tx.gso_segs > 1 && !tx.is_tcp() {
            // UDP GSO reaches a socket without UDP_GRO as its datagrams
            // (udp_unexpected_gso, udp_rcv_segment).
            for seg in tx.segments() {
                self.handle_packet(now, &seg, RxChecksum::Unnecessary);
            }
            return;
        }
        // The super-packet is one skb of gso_segs segments.
        let segs = Some(tx.gso_segs);
        if tx.payload.is_empty() {
            return self.rcv_packet(now, &tx.packet, RxChecksum::Unnecessary, segs);
        }
        let mut whole = tx.clone();
        whole.flatten();
        self.rcv_packet(now, &whole.packet, RxChecksum::Unnecessary, segs);
    }

    /// After a failed checksum: if the segment is an unfinished CHECKSUM_PARTIAL
    /// packet, count it and warn once, since every later packet of that path will
    /// fail too and connections would otherwise stall without a word.
    pub(super) fn check_csum_partial(&mut self, ip: &IpRepr, seg: &[u8]) {
        if !checksum::is_tcp_partial(ip.src, ip.dst, seg) {
            return;
        }
        self.mib.inc(Mib::LowtideInCsumPartial);
        if !self.warned_csum_partial {
            self.warned_csum_partial = true;
            tracing::warn!(
                src = %ip.src,
                "dropping packets with unfinished (CHECKSUM_PARTIAL) TCP checksums under \
                 RxChecksum::Verify: poll_transmit output must pass a device stage \
                 (Transmit::segments) or be received with Stack::handle_transmit"
            );
        }
    }

    /// [`Stack::handle_packet`] for a packet whose payload lies in shared buffers, as
    /// a GRO packet's page frags do (`skb_gro_receive` appends them without copying):
    /// `head` holds its IP and TCP headers, whose lengths count the bytes of `frags`.
    /// The in-order payload is queued by reference, so the reader's copy is its only
    /// one. Checksums are taken as verified (`CHECKSUM_UNNECESSARY`: a medium that
    /// cannot corrupt, or a device that checked them). Anything but a TCP packet the
    /// stack takes (one of its addresses, or any with the catch-all listener) is
    /// handed to [`Stack::handle_packet`] in one piece.
    pub fn handle_packet_frags(&mut self, now: Instant, head: &[u8], frags: &[bytes::Bytes]) {
        let apart: usize = frags.iter().map(|b| b.len()).sum();
        let ip = lowtide_wire::gso::tcp_headers_apart(head, apart)
            .ok()
            .filter(|ip| self.addrs.contains(&ip.dst) || self.catch_all.is_some())
            .filter(|_| !super::ip_input::ipv6_addrs_forbidden(head));
        let Some(ip) = ip else {
            let mut flat = head.to_vec();
            frags.iter().for_each(|b| flat.extend_from_slice(b));
            return self.handle_packet(now, &flat, RxChecksum::Unnecessary);
        };
        let ver = crate::mib::ip_version(head);
        self.mib.inc(Mib::IpInReceives.for_ip_version(ver));
        self.mib.add(
            Mib::IpExtInOctets.for_ip_version(ver),
            (head.len() + apart) as u64,
        );
        self.count_in_ecn(head, apart, None);
        self.mib.inc(Mib::IpInDelivers.for_ip_version(ver));
        let Some((th, _)) = self.parse_tcp(&head[ip.header_len..]) else {
            return;
        };
        self.syn_headers.capture(head, ip.header_len);
        self.rx_flowlabel = ip
            .src
            .is_ipv6()
            .then(|| lowtide_wire::ip::ipv6_flowlabel(head));
        self.tcp_rcv(now, &ip, &th, Payload::frags(frags));
        self.rx_flowlabel = None;
    }

    /// Opens the catch-all listener of a transparent proxy: it accepts connections to
    /// *any* address and port that reach the stack and that no connection or
    /// specific listener takes, as tun2socks and tun2proxy do on a TUN device. Packets
    /// to addresses the stack does not own are then delivered instead of dropped.
    ///
    /// This is what Linux does for an `IP_TRANSPARENT` listener behind an iptables
    /// `TPROXY` rule matching all TCP (`nf_tproxy_get_sock_v4`): an accepted
    /// connection's local address ([`Stack::addresses`]) is the original destination
    /// the peer asked for, and the stack answers from that address. One catch-all
    /// listener serves IPv4 and IPv6; a second one is `EADDRINUSE`. Close it with
    /// [`Stack::close`].
    pub fn listen_catch_all(&mut self, backlog: u32) -> Result<SocketHandle, SocketError> {
        if self.catch_all.is_some() {
            return Err(SocketError::AddrInUse);
        }
        let backlog = backlog.min(self.cfg.somaxconn); // __sys_listen
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        let h = self.alloc(Sock::Listener(Box::new(Listener::new(any, backlog))));
        self.catch_all = Some(h.index);
        Ok(h)
    }
}

impl Transmit {
    /// The packets a device puts on the wire for this transmit: the super-packet
    /// cut into segments of at most `gso_size` payload bytes, each with a complete
    /// IP and TCP checksum (`tcp_gso_segment` plus the NIC's checksum offload, as
    /// [`lowtide_wire::gso::segment`] does). Empty only if the packet does not parse,
    /// which a stack's own output always does. A packet that is not TCP (UDP,
    /// ICMP: [`Transmit::is_tcp`]) is already complete: one segment, itself; but a
    /// UDP GSO super-packet (`gso_segs` > 1, [`Stack::udp_set_segment`]) gives its
    /// datagrams, each with its complete checksum (`__udp_gso_segment`).
    pub fn segments(&self) -> Vec<Vec<u8>> {
        let payload = self.payload.to_bytes();
        if !self.is_tcp() {
            let whole = [&self.packet[..], &payload[..]].concat();
            if self.gso_segs <= 1 {
                return vec![whole];
            }
            // A UDP GSO super-packet: its datagrams (__udp_gso_segment).
            let mut out = Vec::with_capacity(self.gso_segs as usize);
            let _ = lowtide_wire::udp::gso_segment(&whole, self.gso_size, |s| out.push(s));
            return out;
        }
        let mut out = Vec::with_capacity(self.gso_segs.max(1) as usize);
        let put = |s| out.push(s);
        let _ = match self.payload.is_empty() {
            true => lowtide_wire::gso::segment(&self.packet, self.gso(), put),
            false => lowtide_wire::gso::segment_apart_into(
                &self.packet,
                &payload,
                self.gso(),
                true,
                Vec::with_capacity,
                put,
            ),
        };
        out
    }

    /// Whether this is a TCP packet (CHECKSUM_PARTIAL, maybe a GSO super-packet).
    /// The stack's other packets (UDP datagrams, ICMP) carry complete checksums and
    /// are never GSO: a device sends them as they are (virtio-net: no `NEEDS_CSUM`).
    pub fn is_tcp(&self) -> bool {
        lowtide_wire::ip::IpRepr::parse_apart(&self.packet, self.payload.len(), false)
            .is_ok_and(|ip| ip.protocol == lowtide_wire::ip::PROTO_TCP)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Config, EventKind, Instant, Mib, RxChecksum, Stack, TcpState};
    use crate::{Transmit, TxPayload};
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use std::sync::Arc;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    fn stack(ip: IpAddr, seed: u64) -> Stack {
        let mut s = Stack::new(Config::default(), seed);
        s.add_address(ip);
        s
    }

    /// How a hand-made loop hands packets over.
    #[derive(Clone, Copy)]
    enum Hand {
        /// `tx.packet` to `handle_packet(Verify)`: the trap.
        RawVerify,
        /// `handle_transmit`.
        Transmit,
        /// `tx.segments()` to `handle_packet(Verify)`.
        Segments,
    }

    /// Moves packets between `a` and `b` until quiet, at `now`.
    fn exchange(a: &mut Stack, b: &mut Stack, now: Instant, hand: Hand) {
        for _ in 0..100 {
            if !(hand_over(a, b, now, hand) | hand_over(b, a, now, hand)) {
                return;
            }
        }
    }

    /// Hands everything `src` has to send to `dst`; true if anything moved.
    fn hand_over(src: &mut Stack, dst: &mut Stack, now: Instant, hand: Hand) -> bool {
        let mut moved = false;
        while let Some(tx) = src.poll_transmit(now) {
            moved = true;
            match hand {
                Hand::RawVerify => dst.handle_packet(now, &tx.packet, RxChecksum::Verify),
                Hand::Transmit => dst.handle_transmit(now, &tx),
                Hand::Segments => {
                    for s in tx.segments() {
                        dst.handle_packet(now, &s, RxChecksum::Verify);
                    }
                }
            }
            src.handle_tx_complete(now, tx.token);
        }
        moved
    }

    /// Connects A to B:80 and sends 100 kB; returns what B received.
    fn transfer(hand: Hand) -> (Stack, Vec<u8>) {
        let (mut a, mut b) = (stack(A, 1), stack(B, 2));
        let now = Instant::ZERO;
        let l = b.listen(SocketAddr::new(B, 80), 8).unwrap();
        let c = a
            .connect(now, SocketAddr::new(A, 0), SocketAddr::new(B, 80))
            .unwrap();
        exchange(&mut a, &mut b, now, hand);
        let Ok(s) = b.accept(l) else {
            return (b, Vec::new());
        };
        let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut sent = 0;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        for _ in 0..1000 {
            if sent < data.len() {
                sent += a.send(now, c, &data[sent..]).unwrap_or(0);
            }
            exchange(&mut a, &mut b, now, hand);
            while let Ok(n) = b.recv(now, s, &mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            if got.len() == data.len() {
                break;
            }
        }
        assert_eq!(got, data[..got.len()]);
        (b, got)
    }

    /// `ip_rcv_core` counts a packet's ECN codepoint once per segment: a GSO
    /// packet handed over whole (`handle_transmit`) as many times as its segments,
    /// which then count once each (`Transmit::segments`); `ip_finish_output2`
    /// counts every packet sent, a GSO packet once (IpOutTransmits).
    #[test]
    fn ecn_in_counts_segments_and_transmits_count_packets() {
        let mut noect = Vec::new();
        for hand in [Hand::Transmit, Hand::Segments] {
            let (b, got) = transfer(hand);
            assert_eq!(got.len(), 100_000);
            let c = b.counters();
            let n = c.get(Mib::IpExtInNoECTPkts);
            if matches!(hand, Hand::Segments) {
                assert_eq!(n, c.get(Mib::IpInReceives));
            } else {
                assert!(n > c.get(Mib::IpInReceives), "GSO packets counted whole");
            }
            assert_eq!(c.get(Mib::IpOutTransmits), c.get(Mib::IpOutRequests));
            assert_eq!(c.get(Mib::IpExtInECT0Pkts) + c.get(Mib::IpExtInCEPkts), 0);
            noect.push(n);
        }
        assert_eq!(noect[0], noect[1], "the same segments either way");
    }

    /// How the second of two lockstep senders sends (the first stores, whole).
    #[derive(Clone, Copy, PartialEq)]
    enum Mode {
        /// Stored bytes, GSO payload apart ([`Stack::set_tx_payload_apart`]).
        Apart,
        /// Pattern mode, from [`Sevens`], with the payload apart as the simulator
        /// sets it.
        Pattern,
    }

    /// The stream the lockstep test sends: byte `o` is `7 o` (mod 256).
    #[derive(Debug)]
    struct Sevens;
    impl crate::PayloadSource for Sevens {
        fn fill(&self, offset: u64, buf: &mut [u8]) {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = ((offset + i as u64) * 7) as u8;
            }
        }
    }

    /// Two identical pairs, the first sender storing its bytes in whole packets,
    /// the second sending as `mode` says, in lockstep: `check` sees each
    /// transmission of the second sender (and that sender) beside the first's,
    /// which it must make equal; both receivers get the whole stream. Returns how
    /// many of the second sender's packets had payload apart.
    fn lockstep(mode: Mode, mut check: impl FnMut(&mut Stack, &Transmit, &mut Transmit)) -> usize {
        let mut pairs = [None, Some(mode)].map(|m| {
            let (mut a, mut b) = (stack(A, 1), stack(B, 2));
            a.set_tx_payload_apart(m.is_some());
            let l = b.listen(SocketAddr::new(B, 80), 8).unwrap();
            let (local, remote) = (SocketAddr::new(A, 0), SocketAddr::new(B, 80));
            let c = a.connect(Instant::ZERO, local, remote).unwrap();
            if m == Some(Mode::Pattern) {
                a.socket(c).set_payload_source(Arc::new(Sevens)).unwrap();
            }
            exchange(&mut a, &mut b, Instant::ZERO, Hand::Transmit);
            let s = b.accept(l).unwrap();
            (a, b, c, s)
        });
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
        let (mut sent, mut got, mut apart_seen) = (0, [Vec::new(), Vec::new()], 0);
        let mut buf = vec![0u8; 65536];
        for ms in 0..2000 {
            let now = Instant::from_nanos(ms * 1_000_000);
            let [(a0, b0, c0, _), (a1, b1, c1, _)] = &mut pairs;
            let n0 = a0.send(now, *c0, &data[sent..]).unwrap_or(0);
            let n1 = match mode {
                Mode::Apart => a1.send(now, *c1, &data[sent..]),
                Mode::Pattern => a1.send_pattern(now, *c1, data.len() - sent),
            };
            assert_eq!(n0, n1.unwrap_or(0));
            sent += n0;
            loop {
                let (t0, t1) = (a0.poll_transmit(now), a1.poll_transmit(now));
                let (Some(t0), Some(mut t1)) = (t0, t1) else {
                    break;
                };
                apart_seen += !t1.payload.is_empty() as usize;
                check(a1, &t0, &mut t1);
                b1.handle_transmit(now, &t1);
                assert_eq!(t1, t0);
                b0.handle_transmit(now, &t0);
                a0.handle_tx_complete(now, t0.token);
                a1.handle_tx_complete(now, t1.token);
            }
            for ((a, b, _, s), got) in pairs.iter_mut().zip(&mut got) {
                hand_over(b, a, now, Hand::Transmit);
                while let Ok(n) = b.recv(now, *s, &mut buf) {
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
            }
            if got[1].len() == data.len() {
                break;
            }
        }
        assert_eq!(got, [data.clone(), data]);
        apart_seen
    }

    /// A sender keeping payload apart: each of its packets, flattened, is byte for
    /// byte the other's, and so are its segments.
    #[test]
    fn payload_apart_makes_the_same_packets() {
        let apart = lockstep(Mode::Apart, |_, t0, t1| {
            assert_eq!((t1.len(), t1.segments()), (t0.len(), t0.segments()));
            t1.flatten();
        });
        assert!(apart > 10, "{apart} packets with payload apart");
    }

    /// A pattern sender hands the device each payload as a description, its
    /// packet holding the headers only (what waits in a device queue); the device
    /// makes the stored sender's bytes from it, with the stack's buffers
    /// (`make_tx_payload`) or without (`flatten`).
    #[test]
    fn pattern_payload_is_made_by_the_device() {
        // The payload bytes of a whole IPv4 packet.
        let payload_len = |p: &[u8]| {
            let ihl = (p[0] & 0xf) as usize * 4;
            p.len() - ihl - (p[ihl + 12] >> 4) as usize * 4
        };
        let mut described = 0;
        lockstep(Mode::Pattern, |a, t0, t1| {
            let data = payload_len(&t0.packet);
            let TxPayload::Pattern(p) = &t1.payload else {
                return assert_eq!((data, t1.len()), (0, t1.packet.len()), "no payload");
            };
            described += 1;
            assert_eq!((p.len(), t1.packet.len() + p.len()), (data, t0.len()));
            assert!(
                t1.packet.len() <= lowtide_wire::pool::POOL_TINY_LEN,
                "headers only"
            );
            let (mut whole, mut t0_whole) = (t1.clone(), t0.clone());
            whole.flatten();
            t0_whole.flatten();
            assert_eq!(whole, t0_whole);
            assert_eq!(t1.segments(), t0.segments());
            a.make_tx_payload(t1);
            assert!(matches!(t1.payload, TxPayload::Bytes(_)));
            t1.flatten();
        });
        assert!(described > 10, "{described} pattern packets");
    }

    #[test]
    fn raw_transmit_output_under_verify_is_dropped_and_flagged() {
        let (b, got) = transfer(Hand::RawVerify);
        assert!(got.is_empty());
        let c = b.counters();
        assert!(c.get(Mib::LowtideInCsumPartial) >= 1);
        assert_eq!(
            c.get(Mib::LowtideInCsumPartial),
            c.get(Mib::TcpInCsumErrors)
        );
    }

    #[test]
    fn handle_transmit_and_segments_carry_a_transfer() {
        for hand in [Hand::Transmit, Hand::Segments] {
            let (b, got) = transfer(hand);
            assert_eq!(got.len(), 100_000);
            assert_eq!(b.counters().get(Mib::TcpInCsumErrors), 0);
        }
    }

    #[test]
    fn corrupted_packets_are_not_flagged_as_partial() {
        let (mut a, mut b) = (stack(A, 1), stack(B, 2));
        let now = Instant::ZERO;
        b.listen(SocketAddr::new(B, 80), 8).unwrap();
        a.connect(now, SocketAddr::new(A, 0), SocketAddr::new(B, 80))
            .unwrap();
        let tx = a.poll_transmit(now).unwrap();
        let mut seg = tx.segments().remove(0);
        let last = seg.len() - 1;
        seg[last] ^= 0x40;
        b.handle_packet(now, &seg, RxChecksum::Verify);
        assert_eq!(b.counters().get(Mib::TcpInCsumErrors), 1);
        assert_eq!(b.counters().get(Mib::LowtideInCsumPartial), 0);
    }

    #[test]
    fn catch_all_accepts_any_destination_and_keeps_it() {
        // A "client" stack owning 10.0.0.1 talks to addresses B does not own.
        let (mut a, mut b) = (stack(A, 1), Stack::new(Config::default(), 2));
        let now = Instant::ZERO;
        let l = b.listen_catch_all(16).unwrap();
        assert!(b.listen_catch_all(16).is_err());
        let dsts: [SocketAddr; 2] = [
            "93.184.216.34:443".parse().unwrap(),
            "1.1.1.1:53".parse().unwrap(),
        ];
        let mut conns = Vec::new();
        for d in dsts {
            conns.push(a.connect(now, SocketAddr::new(A, 0), d).unwrap());
        }
        exchange(&mut a, &mut b, now, Hand::Transmit);
        for (c, d) in conns.iter().zip(dsts) {
            assert_eq!(a.state(*c).unwrap(), TcpState::Established);
            let s = b.accept(l).unwrap();
            let (local, remote) = b.addresses(s).unwrap();
            assert_eq!(local, d, "the original destination");
            assert_eq!(remote, a.addresses(*c).unwrap().0);
        }
        assert!(b.accept(l).is_err());
        let mut events = Vec::new();
        while let Some(e) = b.poll_event() {
            events.push(e.kind);
        }
        assert!(events.contains(&EventKind::Acceptable));
        // Closed, the stack drops foreign addresses again.
        b.close(now, l).unwrap();
        let c = a.connect(now, SocketAddr::new(A, 0), dsts[0]).unwrap();
        exchange(&mut a, &mut b, now, Hand::Transmit);
        assert_eq!(a.state(c).unwrap(), TcpState::SynSent);
        assert!(b.counters().get(Mib::IpInAddrErrors) >= 1);
    }

    /// IPv6 packets count in snmp6's `Ip6*` counters, received whole
    /// (`handle_packet`) or with their payload apart (`handle_transmit`), sent
    /// (`ip6_xmit`), and a foreign destination in `Ip6InAddrErrors` (`ip6_forward`);
    /// IPv4 ones stay in `Ip*`.
    #[test]
    fn ipv6_packets_count_in_ip6_counters() {
        let (a6, b6): (IpAddr, IpAddr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        for hand in [Hand::Segments, Hand::Transmit] {
            let (mut a, mut b) = (stack(a6, 1), stack(b6, 2));
            let now = Instant::ZERO;
            b.listen(SocketAddr::new(b6, 80), 8).unwrap();
            a.connect(now, SocketAddr::new(a6, 0), SocketAddr::new(b6, 80))
                .unwrap();
            a.connect(now, SocketAddr::new(a6, 0), "[fd00::9]:80".parse().unwrap())
                .unwrap();
            exchange(&mut a, &mut b, now, hand);
            let (ac, bc) = (a.counters(), b.counters());
            // SYN, ACK (and the foreign SYN) from a; the SYN-ACK from b.
            assert_eq!(ac.get(Mib::Ip6OutRequests), 3);
            assert_eq!(bc.get(Mib::Ip6InReceives), 3);
            assert_eq!(bc.get(Mib::Ip6InAddrErrors), 1);
            assert_eq!(bc.get(Mib::Ip6InDelivers), 2);
            assert_eq!(bc.get(Mib::Ip6OutRequests), 1);
            assert!(bc.get(Mib::Ip6InOctets) >= 3 * 60 && ac.get(Mib::Ip6OutOctets) >= 3 * 60);
            for m in [Mib::IpInReceives, Mib::IpInDelivers, Mib::IpOutRequests] {
                assert_eq!((ac.get(m), bc.get(m)), (0, 0), "{m:?}");
            }
            assert_eq!(bc.get(Mib::IpExtInOctets) + ac.get(Mib::IpExtOutOctets), 0);
        }
    }

    #[test]
    fn without_catch_all_foreign_destinations_are_dropped() {
        let (mut a, mut b) = (stack(A, 1), stack(B, 2));
        let now = Instant::ZERO;
        b.listen(SocketAddr::new(B, 80), 8).unwrap();
        let c = a
            .connect(now, SocketAddr::new(A, 0), "1.1.1.1:80".parse().unwrap())
            .unwrap();
        exchange(&mut a, &mut b, now, Hand::Transmit);
        assert_eq!(a.state(c).unwrap(), TcpState::SynSent);
        assert_eq!(b.counters().get(Mib::IpInAddrErrors), 1);
    }
}
