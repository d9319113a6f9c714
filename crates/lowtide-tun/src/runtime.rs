//! The real-time runtime: drives a sans-IO [`Stack`] on a TUN device through the
//! emulated path, with epoll (mio) on the device and a timerfd for the engine's
//! deadlines.
//!
//! Packets from the engine enter the egress [`PathDir`] (lowtide -> kernel), whose
//! serializer reports the TX completion to the engine when the packet has left the
//! queue and the serializer (so TCP Small Queues has a real device queue to work
//! against), and reach the device after the path's delay. Packets the kernel writes to
//! the device cross the ingress [`PathDir`] (kernel -> lowtide) before
//! [`Stack::handle_packet`]. With offload, both sides exchange 64 KB super-packets
//! with partial checksums; without it, the egress path segments in software and the
//! kernel segments and checksums before the device.
//!
//! The caller owns the application: it calls [`Runtime::turn`] in a loop and, between
//! turns, uses the stack's socket API through [`Runtime::stack`].

use crate::clock::Sleeper;
use crate::device::{Offload, Read, TunDevice, READ_BUDGET};
use crate::link::{Frame, PathConfig, PathDir, PathStats};
use crate::vnet::VnetHdr;
use lowtide::{Instant, RxChecksum, Stack};
use lowtide_link::PcapSink;
use lowtide_wire::gso;
use lowtide_wire::pool::{BufPool, POOL_BUF_LEN};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

/// How the runtime uses the device and the path.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// TSO and checksum offload on the device, or none.
    pub offload: Offload,
    /// lowtide -> kernel direction of the emulated path.
    pub egress: PathConfig,
    /// kernel -> lowtide direction.
    pub ingress: PathConfig,
    /// Seed of the path's loss and jitter draws.
    pub seed: u64,
    /// `net.core.busy_poll`: how long [`Runtime::turn`] polls the device before it
    /// sleeps (zero: it sleeps at once).
    pub busy_poll: Duration,
}

/// Counters of the runtime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Packets read from the device.
    pub rx_packets: u64,
    /// Of them, GSO super-packets (the kernel's TSO output).
    pub rx_gso_packets: u64,
    /// Packets written to the device.
    pub tx_packets: u64,
    /// Of them, GSO super-packets.
    pub tx_gso_packets: u64,
    /// Packets the device refused (write errors) or that did not parse.
    pub errors: u64,
    /// Event-loop wakeups.
    pub wakeups: u64,
    /// The path's counters, lowtide -> kernel.
    pub egress: PathStats,
    /// The path's counters, kernel -> lowtide.
    pub ingress: PathStats,
}

/// The engine, its device and the emulated path between them.
pub struct Runtime {
    stack: Stack,
    dev: TunDevice,
    offload: Offload,
    egress: PathDir,
    ingress: PathDir,
    sleeper: Sleeper,
    busy_poll: Duration,
    buf: Vec<u8>,
    /// Buffers of received packets, reused (the stack's own pool serves its sends).
    rx_pool: BufPool,
    /// Received buffers the stack's receive queue held, given back once read.
    returns: crate::lend::Returns,
    pcap: Option<PcapSink>,
    stats: RuntimeStats,
    /// Takes arrived packets that belong to another shard's stack ([`Handoff`]).
    handoff: Option<Handoff>,
}

/// Called with every packet that crossed the ingress path, before the stack sees it:
/// gives the packet back to be handled here, or keeps it (`None`) to hand it to
/// the shard that owns its connection ([`crate::shard`]).
pub type Handoff = Box<dyn FnMut(Frame) -> Option<Frame> + Send>;

impl Runtime {
    /// Drives `stack` on `dev` (already configured and up).
    pub fn new(mut stack: Stack, dev: TunDevice, cfg: RuntimeConfig) -> io::Result<Runtime> {
        dev.set_nonblocking(true)?;
        // GSO packets leave their payload in the send queue: the device write gathers
        // it (`TunDevice::send_apart`), the path's software GSO cuts from it.
        stack.set_tx_payload_apart(true);
        // The write to the tun descriptor copies each packet into the kernel, as
        // tun_net_xmit's skb_orphan_frags_rx does: zerocopy sends report COPIED.
        stack.set_tx_orphan_frags(true);
        let sleeper = Sleeper::new(crate::clock::Clock::start(), &[dev.as_raw_fd()])?;
        let split = cfg.offload == Offload::None;
        Ok(Runtime {
            stack,
            dev,
            offload: cfg.offload,
            egress: PathDir::new(cfg.egress, split, cfg.seed),
            ingress: PathDir::new(cfg.ingress, false, cfg.seed ^ 0x5eed),
            sleeper,
            busy_poll: cfg.busy_poll,
            buf: Vec::with_capacity(POOL_BUF_LEN),
            rx_pool: BufPool::new(),
            returns: Default::default(),
            pcap: None,
            stats: RuntimeStats::default(),
            handoff: None,
        })
    }

    /// Records what crosses the device (both directions, as the kernel sees it) to a
    /// pcap file (raw IP; checksums completed).
    pub fn capture(&mut self, path: &Path) -> io::Result<()> {
        let sink = PcapSink::create(path).map_err(io::Error::other)?;
        self.pcap = Some(sink);
        Ok(())
    }

    /// The engine, for the socket API.
    pub fn stack(&mut self) -> &mut Stack {
        &mut self.stack
    }

    /// The engine, read-only.
    pub fn stack_ref(&self) -> &Stack {
        &self.stack
    }

    /// The current time of the engine's clock.
    pub fn now(&self) -> Instant {
        self.sleeper.clock().now()
    }

    /// The clock the engine's instants count on.
    pub fn clock(&self) -> crate::clock::Clock {
        *self.sleeper.clock()
    }

    /// `net.core.busy_poll` of [`RuntimeConfig`].
    pub fn busy_poll(&self) -> Duration {
        self.busy_poll
    }

    /// The next time something is due (engine timers, the path), if any: a loop that
    /// waits outside [`Runtime::turn`] (a [`crate::shard`] thread) sleeps until then.
    pub fn poll_deadline(&mut self) -> Option<Instant> {
        self.next_deadline()
    }

    /// Packets read from and written to the device so far: a turn moved traffic if
    /// this changed.
    pub fn device_packets(&self) -> u64 {
        self.stats.rx_packets + self.stats.tx_packets
    }

    /// Sends arrived packets through `handoff` before the stack (see [`Handoff`]).
    pub fn set_handoff(&mut self, handoff: Handoff) {
        self.handoff = Some(handoff);
    }

    /// Hands the stack a packet another shard's device read (one its [`Handoff`]
    /// kept), as if it had arrived here.
    pub fn receive_handed(&mut self, frame: Frame) {
        let now = self.sleeper.clock().now();
        self.deliver(now, frame);
    }

    /// The device.
    pub fn device(&self) -> &TunDevice {
        &self.dev
    }

    /// Bytes (IP length) waiting in the egress path's queue now: lowtide's device
    /// queue, as `tc -s qdisc`'s backlog.
    pub fn egress_queue_bytes(&self) -> u64 {
        self.egress.queue_bytes()
    }

    /// Counters.
    pub fn stats(&self) -> RuntimeStats {
        RuntimeStats {
            egress: self.egress.stats(),
            ingress: self.ingress.stats(),
            wakeups: self.sleeper.wakeups,
            ..self.stats
        }
    }

    /// One turn of the loop: runs what is due, then waits until the device has
    /// packets, the next deadline (engine, path, or the caller's `wake`), or at most
    /// `max_wait`, then reads the device. The caller runs its application between turns.
    /// The wait polls the device for up to `busy_poll` first and sleeps only if
    /// nothing came (a sleeper is woken by an interrupt, in a VM an IPI, per batch).
    pub fn turn(&mut self, wake: Option<Instant>, max_wait: Duration) -> io::Result<()> {
        // Buffers the reader let go since the last turn, back in the pool for reads.
        self.returns.give_back(&mut self.rx_pool);
        self.pump()?;
        let now = self.sleeper.clock().now();
        let limit = now + max_wait;
        let deadline = self
            .next_deadline()
            .into_iter()
            .chain(wake)
            .fold(limit, Instant::min);
        let clock = *self.sleeper.clock();
        if clock.busy_poll((now + self.busy_poll).min(deadline), || self.read_device())? {
            return self.pump();
        }
        self.sleeper.sleep_until(deadline)?;
        self.read_device()?;
        self.pump()
    }

    /// Finishes the capture file, if any.
    pub fn finish(self) -> io::Result<()> {
        match self.pcap {
            Some(p) => p.finish().map_err(io::Error::other),
            None => Ok(()),
        }
    }

    fn next_deadline(&mut self) -> Option<Instant> {
        let engine = self.stack.poll_timeout();
        let path = [self.egress.next_event(), self.ingress.next_event()]
            .into_iter()
            .flatten()
            .min()
            .map(Instant);
        engine.into_iter().chain(path).min()
    }

    /// Reads up to a budget of packets from the device into the ingress path; true
    /// if it read any.
    fn read_device(&mut self) -> io::Result<bool> {
        for i in 0..READ_BUDGET {
            let frame = match self.dev.read_frame(&mut self.rx_pool, &mut self.buf)? {
                Read::Empty => return Ok(i > 0),
                Read::Malformed => {
                    self.stats.errors += 1;
                    continue;
                }
                Read::Frame(f) => f,
            };
            let now = self.sleeper.clock().now();
            self.stats.rx_packets += 1;
            self.stats.rx_gso_packets += (frame.gso_size > 0) as u64;
            if let Some(p) = self.pcap.as_mut() {
                record(p, now, &frame);
            }
            self.ingress.enqueue(now.as_nanos(), frame);
        }
        Ok(true)
    }

    /// Runs everything due now until nothing moves: engine timers, transmits into the
    /// egress path, path progress, arrivals, TX completions.
    fn pump(&mut self) -> io::Result<()> {
        loop {
            let now = self.sleeper.clock().now();
            self.stack.handle_timeout(now);
            let mut moved = self.drain_engine(now);
            let t = now.as_nanos();
            // Segments cut by the path come from the pools their packets go back to.
            let stack = &mut self.stack;
            self.egress.advance(t, &mut |n| stack.take_buffer(n));
            let rx_pool = &mut self.rx_pool;
            self.ingress.advance(t, &mut |n| rx_pool.take(n));
            while let Some(token) = self.egress.pop_dropped() {
                self.stack.handle_tx_dropped(now, token);
                moved = true;
            }
            while let Some(token) = self.egress.pop_completion(t) {
                self.stack.handle_tx_complete(now, token);
                moved = true;
            }
            while let Some(frame) = self.ingress.pop_arrived(t) {
                self.receive(now, frame);
                moved = true;
            }
            while let Some(frame) = self.egress.pop_arrived(t) {
                self.write_device(now, frame)?;
                moved = true;
            }
            while let Some(buf) = self.egress.pop_spent() {
                self.stack.recycle_buffer(buf);
            }
            if !moved {
                return Ok(());
            }
        }
    }

    /// An arrived packet: to the handoff, if any, then to the stack.
    fn receive(&mut self, now: Instant, frame: Frame) {
        let frame = match self.handoff.as_mut() {
            Some(h) => match h(frame) {
                Some(f) => f,
                None => return,
            },
            None => frame,
        };
        self.deliver(now, frame);
    }

    /// Hands a packet to the stack. A TCP packet with payload whose checksum the
    /// kernel vouches for is lent as shared bytes: the receive queue keeps its payload
    /// by reference, so the reader's copy is its only one in user space.
    fn deliver(&mut self, now: Instant, frame: Frame) {
        let payload = match frame.csum_partial {
            true => gso::tcp_payload_range(&frame.data, false).ok(),
            false => None,
        };
        match payload.filter(|r| !r.is_empty()) {
            Some(r) => {
                let b = self.returns.lend(frame.data);
                self.stack
                    .handle_packet_frags(now, &b[..r.start], &[b.slice(r)]);
            }
            None => {
                let csum = match frame.csum_partial {
                    true => RxChecksum::Unnecessary,
                    false => RxChecksum::Verify,
                };
                self.stack.handle_packet(now, &frame.data, csum);
                self.rx_pool.give(frame.data);
            }
        }
    }

    fn drain_engine(&mut self, now: Instant) -> bool {
        let mut any = false;
        while let Some(mut tx) = self.stack.poll_transmit(now) {
            any = true;
            if !tx.is_tcp() {
                self.enqueue_datagrams(now, &tx);
                continue;
            }
            self.stack.make_tx_payload(&mut tx); // a pattern socket's: made now
            let frame = Frame {
                data: tx.packet,
                payload: tx.payload.to_bytes(),
                gso_size: if tx.gso_segs > 1 { tx.gso_size } else { 0 },
                csum_partial: true,
                token: Some(tx.token),
                vnet: None,
            };
            self.egress.enqueue(now.as_nanos(), frame);
        }
        any
    }

    /// UDP, ICMP and IP fragments: checksums complete, so plain frames (a UDP GSO
    /// super-packet as its datagrams). Before, they went out as TCP with a partial
    /// checksum, which the device refused: no echo reply ever left.
    fn enqueue_datagrams(&mut self, now: Instant, tx: &lowtide::Transmit) {
        for data in tx.segments() {
            let frame = Frame {
                data,
                payload: Default::default(),
                gso_size: 0,
                csum_partial: false,
                token: None,
                vnet: None,
            };
            self.egress.enqueue(now.as_nanos(), frame);
        }
    }

    /// Writes a packet that crossed the egress path to the device.
    fn write_device(&mut self, now: Instant, mut frame: Frame) -> io::Result<()> {
        let r = self.write_frame(now, &mut frame);
        // The packet was copied into the kernel (or dropped): its buffer serves the
        // stack's next packet, and its payload's share of the send queue is let go.
        self.stack.recycle_buffer(frame.data);
        r
    }

    fn write_frame(&mut self, now: Instant, frame: &mut Frame) -> io::Result<()> {
        let no_offload = self.offload == Offload::None;
        if no_offload {
            frame.flatten();
        }
        if frame.csum_partial && no_offload && gso::finish_checksum(&mut frame.data).is_err() {
            self.stats.errors += 1;
            return Ok(());
        }
        let hdr = match frame.csum_partial && !no_offload {
            true => VnetHdr::for_transmit_apart(&frame.data, frame.payload.len(), frame.gso_size),
            false => Ok(VnetHdr::plain()),
        };
        let Ok(hdr) = hdr else {
            self.stats.errors += 1;
            return Ok(());
        };
        if let Some(p) = self.pcap.as_mut() {
            record(p, now, frame);
        }
        // A packet the kernel refused is lost, as on a real device; TCP repairs it.
        match self
            .dev
            .send_apart_or_drop(&hdr, &frame.data, &frame.payload)?
        {
            true => {
                self.stats.tx_packets += 1;
                self.stats.tx_gso_packets += (frame.gso_size > 0) as u64;
            }
            false => self.stats.errors += 1,
        }
        Ok(())
    }
}

/// Writes a frame to the capture with a complete checksum.
pub(crate) fn record(p: &mut PcapSink, now: Instant, frame: &Frame) {
    if frame.csum_partial || !frame.payload.is_empty() {
        let mut copy = frame.data.clone();
        copy.extend_from_slice(&frame.payload);
        if frame.csum_partial {
            let _ = gso::finish_checksum(&mut copy);
        }
        p.write(now, &copy);
    } else {
        p.write(now, &frame.data);
    }
}
