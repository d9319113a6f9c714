//! `lowtide link`: the emulated path as a standalone bridge between two TUN devices
//! (typically in two network namespaces), so that kernel-to-kernel TCP crosses exactly
//! the path lowtide's own traffic crosses (netem is not available on this kernel;
//! mahimahi's shells work the same way).
//!
//! Whatever one device's kernel sends comes out of the other after the path; GSO
//! super-packets and partial checksums pass through with their virtio-net header,
//! unless the path cuts them into wire segments (loss, jitter), which then carry
//! complete checksums. Packets other than TCP pass too (ICMP, ND), whole.

use crate::clock::{Clock, Sleeper};
use crate::device::{Read, TunDevice, READ_BUDGET};
use crate::link::{PathConfig, PathDir, PathStats};
use crate::runtime::record;
use crate::vnet::VnetHdr;
use lowtide::Instant;
use lowtide_link::PcapSink;
use lowtide_wire::pool::{BufPool, POOL_BUF_LEN};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

/// Counters of a bridge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeStats {
    /// The A -> B direction.
    pub a_to_b: PathStats,
    /// The B -> A direction.
    pub b_to_a: PathStats,
    /// Packets that could not be parsed or written.
    pub errors: u64,
}

/// Two devices joined by an emulated path.
pub struct Bridge {
    devs: [TunDevice; 2],
    /// `paths[0]` carries A -> B, `paths[1]` B -> A.
    paths: [PathDir; 2],
    sleeper: Sleeper,
    /// How long a turn polls the devices before it sleeps.
    busy_poll: Duration,
    /// The buffer the next packet is read into ([`TunDevice::read_frame`]).
    buf: Vec<u8>,
    /// Packet buffers, reused instead of allocated per packet.
    pool: BufPool,
    pcap: Option<PcapSink>,
    errors: u64,
}

impl Bridge {
    /// Joins `a` and `b` (configured and up) with `a_to_b` and `b_to_a`.
    pub fn new(
        a: TunDevice,
        b: TunDevice,
        a_to_b: PathConfig,
        b_to_a: PathConfig,
        seed: u64,
    ) -> io::Result<Bridge> {
        a.set_nonblocking(true)?;
        b.set_nonblocking(true)?;
        let sleeper = Sleeper::new(Clock::start(), &[a.as_raw_fd(), b.as_raw_fd()])?;
        Ok(Bridge {
            devs: [a, b],
            paths: [
                PathDir::new(a_to_b, false, seed),
                PathDir::new(b_to_a, false, seed ^ 0x5eed),
            ],
            sleeper,
            busy_poll: Duration::ZERO,
            buf: Vec::with_capacity(POOL_BUF_LEN),
            pool: BufPool::new(),
            pcap: None,
            errors: 0,
        })
    }

    /// Records what enters the bridge from either device to a pcap file (checksums
    /// completed).
    pub fn capture(&mut self, path: &Path) -> io::Result<()> {
        self.pcap = Some(PcapSink::create(path).map_err(io::Error::other)?);
        Ok(())
    }

    /// Sets how long a turn polls the devices before it sleeps (zero, the default:
    /// it sleeps at once).
    pub fn set_busy_poll(&mut self, busy_poll: Duration) {
        self.busy_poll = busy_poll;
    }

    /// Counters.
    pub fn stats(&self) -> BridgeStats {
        BridgeStats {
            a_to_b: self.paths[0].stats(),
            b_to_a: self.paths[1].stats(),
            errors: self.errors,
        }
    }

    /// Forwards until `stop` returns true (checked at least every `max_wait`).
    pub fn run(&mut self, max_wait: Duration, mut stop: impl FnMut() -> bool) -> io::Result<()> {
        while !stop() {
            self.turn(max_wait)?;
        }
        Ok(())
    }

    /// One turn: deliver what is due, wait until a device is readable or the next
    /// path event (at most `max_wait`), read both devices. The wait polls the devices
    /// for up to the busy-poll time first and sleeps only if nothing came.
    pub fn turn(&mut self, max_wait: Duration) -> io::Result<()> {
        self.deliver()?;
        let now = self.sleeper.clock().now();
        let next = self.paths.iter().filter_map(|p| p.next_event()).min();
        let deadline = next
            .map(Instant)
            .unwrap_or(now + max_wait)
            .min(now + max_wait);
        let clock = *self.sleeper.clock();
        if clock.busy_poll((now + self.busy_poll).min(deadline), || self.read_both())? {
            return self.deliver();
        }
        self.sleeper.sleep_until(deadline)?;
        self.read_both()?;
        self.deliver()
    }

    /// Reads both devices; true if either had packets.
    fn read_both(&mut self) -> io::Result<bool> {
        let a = self.read(0)?;
        Ok(self.read(1)? || a)
    }

    /// Finishes the capture file, if any.
    pub fn finish(self) -> io::Result<()> {
        match self.pcap {
            Some(p) => p.finish().map_err(io::Error::other),
            None => Ok(()),
        }
    }

    fn read(&mut self, side: usize) -> io::Result<bool> {
        for i in 0..READ_BUDGET {
            let frame = match self.devs[side].read_frame(&mut self.pool, &mut self.buf)? {
                Read::Empty => return Ok(i > 0),
                Read::Malformed => {
                    self.errors += 1;
                    continue;
                }
                Read::Frame(f) => f,
            };
            let now = self.sleeper.clock().now();
            if let Some(p) = self.pcap.as_mut() {
                record(p, now, &frame);
            }
            self.paths[side].enqueue(now.as_nanos(), frame);
        }
        Ok(true)
    }

    fn deliver(&mut self) -> io::Result<()> {
        let t = self.sleeper.clock().now().as_nanos();
        for side in 0..2 {
            let pool = &mut self.pool;
            self.paths[side].advance(t, &mut |n| pool.take(n));
            while let Some(frame) = self.paths[side].pop_arrived(t) {
                let hdr = frame.vnet.unwrap_or_else(VnetHdr::plain);
                if !self.devs[1 - side].send_or_drop(&hdr, &frame.data)? {
                    self.errors += 1;
                }
                self.pool.give(frame.data);
            }
            while let Some(buf) = self.paths[side].pop_spent() {
                self.pool.give(buf);
            }
        }
        Ok(())
    }
}
