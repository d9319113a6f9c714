//! The emulated link, in process and in real time: one direction of a path between
//! lowtide's engine and the TUN device (or between two TUN devices, `lowtide link`).
//!
//! This kernel has no netem, so the path's impairments live here, with the simulator's
//! semantics because they are the simulator's code ([`lowtide_link::LinkDir`]):
//! a pfifo queue with a packet limit (a GSO packet counts once, as in a qdisc), a
//! serializer at the line rate (each wire segment costs its IP length plus 38 bytes of
//! Ethernet framing), one-way delay, jitter and Bernoulli loss per wire segment.
//!
//! Time is nanoseconds since the runtime's start. A packet's serialization starts at
//! `max(enqueue time, end of the previous one)`, whenever the runtime gets around to
//! it, so the rate holds even when the process wakes late. Without per-segment
//! impairments, and at rates where consecutive segments would reach the receiver
//! within one NAPI poll of each other ([`NAPI_WINDOW_NS`]), a GSO super-packet crosses
//! whole, when its last segment would have arrived (it is serialized as its segments
//! would be): as `netem rate` or `tbf` on a veth hand a GSO skb on whole, though a
//! physical NIC's GRO at such a rate would hand it up in pieces of one poll's worth
//! (the simulator's receiver does: at 1 Gbit/s about two segments per 20 µs poll,
//! where this path delivers up to 45 at once, ACKed once, ~0.5 ms after the first
//! would have arrived). Otherwise it is cut into wire segments first, each drawn for
//! loss and jitter on its own and delivered on its own.

use crate::vnet::VnetHdr;
use bytes::Bytes;
use lowtide::TxToken;
use lowtide_link::{EventQueue, LinkConfig, LinkDir, LinkStats, WireSeg, FRAMING_OVERHEAD};
use lowtide_wire::gso;
use std::collections::VecDeque;

/// Linux's default `txqueuelen` and the simulator's default device queue (packets).
pub const DEFAULT_QUEUE_LIMIT: usize = 1000;

/// The settings of one direction of the emulated path.
#[derive(Debug, Clone, PartialEq)]
pub struct PathConfig {
    /// Line rate (bit/s); `None` is unlimited (no serialization delay).
    pub rate_bps: Option<u64>,
    /// One-way propagation delay (ns).
    pub delay_ns: u64,
    /// Extra delay per wire segment, uniform in `0..jitter_ns` (may reorder).
    pub jitter_ns: u64,
    /// Probability that a wire segment is lost.
    pub loss: f64,
    /// Queue limit in packets (pfifo `limit`).
    pub queue_limit: usize,
}

impl Default for PathConfig {
    fn default() -> Self {
        PathConfig {
            rate_bps: None,
            delay_ns: 0,
            jitter_ns: 0,
            loss: 0.0,
            queue_limit: DEFAULT_QUEUE_LIMIT,
        }
    }
}

impl PathConfig {
    /// The simulator's link settings for this path.
    fn link_config(&self) -> LinkConfig {
        LinkConfig {
            // An unlimited rate serializes in 1 ns per packet.
            rate_bps: self.rate_bps.unwrap_or(u64::MAX),
            delay_ns: self.delay_ns,
            jitter_ns: self.jitter_ns,
            loss: self.loss,
            ..LinkConfig::default()
        }
    }

    /// Whether wire segments must be drawn one by one (loss, jitter).
    fn per_segment(&self) -> bool {
        self.loss > 0.0 || self.jitter_ns > 0
    }
}

/// A receiving NIC's interrupt-coalescing window (the simulator's `rx_usecs`
/// default, 20 us): segments that arrive further apart reach the stack one by one.
pub const NAPI_WINDOW_NS: u64 = 20_000;

/// Spent buffers a path keeps for its owner to collect ([`PathDir::pop_spent`]).
const MAX_SPENT: usize = 64;

/// A packet on the path: an IP packet, possibly a GSO super-packet.
#[derive(Debug)]
pub struct Frame {
    /// IP header, TCP header and payload; only the headers if the payload is kept
    /// apart in [`Frame::payload`].
    pub data: Vec<u8>,
    /// The payload of a packet from lowtide's stack kept apart from its headers
    /// ([`lowtide::Transmit::payload`], a slice of the send queue): the device write
    /// gathers it, so it is never copied in user space. Empty otherwise.
    pub payload: Bytes,
    /// GSO segment size (0: a single segment).
    pub gso_size: u16,
    /// The TCP checksum holds only the pseudo-header sum (CHECKSUM_PARTIAL).
    pub csum_partial: bool,
    /// The engine's TX completion token, for packets from lowtide's stack.
    pub token: Option<TxToken>,
    /// The virtio-net header the packet came with (a bridged packet keeps it, unless
    /// the path cuts it into segments).
    pub vnet: Option<VnetHdr>,
}

impl Frame {
    /// Length of the whole IP packet, headers and payload.
    pub fn len(&self) -> usize {
        self.data.len() + self.payload.len()
    }

    /// Never true: a packet has headers.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Puts a payload kept apart behind the headers, where a whole packet is needed
    /// (a path that cuts it into wire segments, a capture).
    pub fn flatten(&mut self) {
        if !self.payload.is_empty() {
            self.data.extend_from_slice(&self.payload);
            self.payload = Bytes::new();
        }
    }

    /// A packet as read from a device (virtio-net header, then the IP packet); `None`
    /// if the header is cut short.
    pub fn from_device(raw: &[u8]) -> Option<Frame> {
        Frame::from_device_into(raw, Vec::new())
    }

    /// A packet read with [`crate::device::TunDevice::try_recv_split`]: its header's
    /// bytes and the IP packet, which the frame takes without a copy.
    pub fn from_parts(hdr: &[u8; VnetHdr::LEN], data: Vec<u8>) -> Frame {
        let (hdr, _) = VnetHdr::parse(hdr).expect("a whole header");
        Frame {
            data,
            payload: Bytes::new(),
            gso_size: gso_size_of(&hdr),
            csum_partial: hdr.rx_checksum() == lowtide::RxChecksum::Unnecessary,
            token: None,
            vnet: Some(hdr),
        }
    }

    /// [`Frame::from_device`], copying the packet into `buf` (cleared first; e.g. a
    /// buffer from a [`lowtide_wire::pool::BufPool`]) instead of a new allocation.
    pub fn from_device_into(raw: &[u8], mut buf: Vec<u8>) -> Option<Frame> {
        let (hdr, packet) = VnetHdr::parse(raw).ok()?;
        buf.clear();
        buf.extend_from_slice(packet);
        Some(Frame {
            data: buf,
            payload: Bytes::new(),
            gso_size: gso_size_of(&hdr),
            csum_partial: hdr.rx_checksum() == lowtide::RxChecksum::Unnecessary,
            token: None,
            vnet: Some(hdr),
        })
    }
}

/// What a wire segment carries besides its bytes: (csum_partial, token, vnet).
type SegmentMeta = (bool, Option<TxToken>, Option<VnetHdr>);

/// Counters of one path direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Packets that entered the queue.
    pub enqueued: u64,
    /// Packets dropped because the queue was full.
    pub queue_drops: u64,
    /// Packets (or segments) that arrived at the far end.
    pub delivered: u64,
    /// Most packets ever waiting in the queue at once.
    pub max_queue_packets: u64,
    /// Most bytes (IP length) ever waiting in the queue at once.
    pub max_queue_bytes: u64,
    /// The serializer's counters (wire segments, bytes, losses).
    pub link: LinkStats,
}

/// One direction of the emulated path.
pub struct PathDir {
    cfg: PathConfig,
    link: LinkDir,
    /// Split GSO packets into wire segments before serializing them: needed for
    /// per-segment impairments, and for a device without TSO (software GSO).
    split: bool,
    queue: VecDeque<(u64, Frame)>,
    /// Serialized, waiting for the propagation delay.
    pipe: EventQueue<Frame>,
    /// TX completions, by the time serialization ends.
    completions: VecDeque<(u64, TxToken)>,
    /// Tokens of packets the full queue dropped, for `handle_tx_dropped`.
    dropped: Vec<TxToken>,
    /// Buffers of packets the path is done with (cut into segments or dropped), for
    /// reuse ([`PathDir::pop_spent`]); at most [`MAX_SPENT`].
    spent: Vec<Vec<u8>>,
    /// The segments of the GSO packet being cut (the list kept between packets).
    segs: Vec<Vec<u8>>,
    /// The serializer is busy until this time (ns).
    busy_until: u64,
    queue_drops: u64,
    enqueued: u64,
    delivered: u64,
    queue_bytes: u64,
    max_queue_packets: u64,
    max_queue_bytes: u64,
}

impl PathDir {
    /// A path direction; `split_gso` forces software segmentation (for a far end that
    /// cannot take GSO packets). `seed` seeds the loss and jitter draws.
    pub fn new(cfg: PathConfig, split_gso: bool, seed: u64) -> PathDir {
        PathDir {
            link: LinkDir::new(cfg.link_config(), seed),
            split: split_gso || cfg.per_segment(),
            cfg,
            queue: VecDeque::new(),
            pipe: EventQueue::new(),
            completions: VecDeque::new(),
            dropped: Vec::new(),
            spent: Vec::new(),
            segs: Vec::new(),
            busy_until: 0,
            queue_drops: 0,
            enqueued: 0,
            delivered: 0,
            queue_bytes: 0,
            max_queue_packets: 0,
            max_queue_bytes: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &PathConfig {
        &self.cfg
    }

    /// Queues a packet at `now` (ns). A full queue drops it (its token comes back from
    /// [`PathDir::pop_dropped`], as a qdisc drop frees the skb at once); returns
    /// whether it was queued.
    pub fn enqueue(&mut self, now: u64, frame: Frame) -> bool {
        if self.queue.len() >= self.cfg.queue_limit.max(1) {
            self.queue_drops += 1;
            if let Some(t) = frame.token {
                self.dropped.push(t);
            }
            self.spend(frame.data);
            return false;
        }
        self.enqueued += 1;
        self.queue_bytes += frame.len() as u64;
        self.queue.push_back((now, frame));
        self.max_queue_packets = self.max_queue_packets.max(self.queue.len() as u64);
        self.max_queue_bytes = self.max_queue_bytes.max(self.queue_bytes);
        true
    }

    /// Moves every packet whose serialization has started by `now` onto the wire.
    pub fn advance(&mut self, now: u64, take: &mut dyn FnMut(usize) -> Vec<u8>) {
        while let Some((enq, _)) = self.queue.front() {
            if self.next_start(*enq) > now {
                break;
            }
            let (enq, frame) = self.queue.pop_front().expect("front exists");
            self.queue_bytes -= frame.len() as u64;
            self.transmit(enq, frame, take);
        }
    }

    /// When a packet queued at `enq` starts serializing: once the link is free.
    fn next_start(&self, enq: u64) -> u64 {
        enq.max(self.busy_until)
    }

    /// Whether a GSO packet's segments leave the link too far apart for the
    /// receiver's NIC to hand them up as one: one segment's serialization time is
    /// longer than [`NAPI_WINDOW_NS`], so a real receiver's GRO would see them one by
    /// one (the simulator's receiver does, `lowtide_sim::host`).
    fn spaced_apart(&self, gso_size: u16) -> bool {
        let rate = self.cfg.rate_bps.unwrap_or(u64::MAX) as u128;
        let bits = (gso_size as u128 + 40 + FRAMING_OVERHEAD as u128) * 8;
        gso_size > 0 && bits * 1_000_000_000 > NAPI_WINDOW_NS as u128 * rate
    }

    /// Serializes a packet (whole, or cut into wire segments) and puts it in flight.
    fn transmit(&mut self, enq: u64, mut frame: Frame, take: &mut dyn FnMut(usize) -> Vec<u8>) {
        let split = self.split || self.spaced_apart(frame.gso_size);
        let end = if split && frame.gso_size > 0 {
            self.transmit_segments(enq, frame, take)
        } else if self.split {
            frame.flatten();
            let meta = (frame.csum_partial, frame.token, frame.vnet);
            self.transmit_segment(enq, frame.data, meta)
        } else {
            self.transmit_whole(enq, frame)
        };
        self.busy_until = end;
    }

    /// A super-packet crosses as one, taking as long as its wire segments would.
    fn transmit_whole(&mut self, enq: u64, frame: Frame) -> u64 {
        let (_, end) = self.link.serialize(enq, wire_equivalent_len(&frame));
        if let Some(t) = frame.token {
            self.completions.push_back((end, t));
        }
        let at = end + self.cfg.delay_ns;
        self.pipe.push(lowtide::Instant(at), frame);
        end
    }

    /// Cuts a GSO packet into wire segments (software GSO, complete checksums) in
    /// buffers from `take`; the token completes with the last one. A packet that
    /// does not parse is dropped.
    fn transmit_segments(
        &mut self,
        enq: u64,
        frame: Frame,
        take: &mut dyn FnMut(usize) -> Vec<u8>,
    ) -> u64 {
        let mut segs = std::mem::take(&mut self.segs);
        // Each segment's payload is copied once, from wherever it lies.
        let cut = match frame.payload.is_empty() {
            true => gso::segment_into(&frame.data, frame.gso_size, true, take, |s| segs.push(s)),
            false => gso::segment_apart_into(
                &frame.data,
                &frame.payload,
                frame.gso_size,
                true,
                take,
                |s| segs.push(s),
            ),
        };
        if cut.is_err() || segs.is_empty() {
            segs.clear();
            self.segs = segs;
            // Not a queue drop (resending would fail the same way): a completion.
            if let Some(t) = frame.token {
                self.completions.push_back((self.busy_until.max(enq), t));
            }
            return self.busy_until;
        }
        let last = segs.len() - 1;
        let token = frame.token;
        self.spend(frame.data);
        let mut end = self.busy_until;
        for (i, seg) in segs.drain(..).enumerate() {
            let token = if i == last { token } else { None };
            end = self.transmit_segment(enq, seg, (false, token, None));
            self.busy_until = end;
        }
        // Keep the list's capacity for the next packet.
        self.segs = segs;
        end
    }

    /// One wire segment: serialized, then lost or delayed (with jitter) as drawn.
    /// `meta` is the segment's (csum_partial, token, vnet).
    fn transmit_segment(&mut self, enq: u64, data: Vec<u8>, meta: SegmentMeta) -> u64 {
        let (csum_partial, token, vnet) = meta;
        let (_, end) = self.link.serialize(enq, data.len());
        if let Some(t) = token {
            self.completions.push_back((end, t));
        }
        let pipe = &mut self.pipe;
        self.link.propagate(end, WireSeg::whole(data), |at, seg| {
            let frame = Frame {
                data: seg.flatten(),
                payload: Bytes::new(),
                gso_size: 0,
                csum_partial,
                token: None,
                vnet,
            };
            pipe.push(lowtide::Instant(at), frame);
        });
        end
    }

    /// A TX completion due by `now`, if any.
    pub fn pop_completion(&mut self, now: u64) -> Option<TxToken> {
        match self.completions.front() {
            Some((at, _)) if *at <= now => self.completions.pop_front().map(|(_, t)| t),
            _ => None,
        }
    }

    /// The token of a packet the full queue dropped, if any: for
    /// `Stack::handle_tx_dropped` (a qdisc's `NET_XMIT_DROP`, not a network loss).
    pub fn pop_dropped(&mut self) -> Option<TxToken> {
        self.dropped.pop()
    }

    /// The buffer of a packet the path is done with (cut into wire segments, or
    /// dropped by the full queue), for reuse (`Stack::recycle_buffer`), if any.
    pub fn pop_spent(&mut self) -> Option<Vec<u8>> {
        self.spent.pop()
    }

    fn spend(&mut self, buf: Vec<u8>) {
        if self.spent.len() < MAX_SPENT {
            self.spent.push(buf);
        }
    }

    /// A packet that has arrived at the far end by `now`, if any.
    pub fn pop_arrived(&mut self, now: u64) -> Option<Frame> {
        if self.pipe.peek_time()?.as_nanos() > now {
            return None;
        }
        self.delivered += 1;
        self.pipe.pop().map(|(_, f)| f)
    }

    /// When this direction next has something to do (ns): a serialization start, a
    /// TX completion or an arrival.
    pub fn next_event(&self) -> Option<u64> {
        let start = self.queue.front().map(|(enq, _)| self.next_start(*enq));
        let completion = match self.dropped.is_empty() {
            true => self.completions.front().map(|(at, _)| *at),
            false => Some(0),
        };
        let arrival = self.pipe.peek_time().map(|t| t.as_nanos());
        [start, completion, arrival].into_iter().flatten().min()
    }

    /// Packets waiting in the queue.
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Bytes (IP length) waiting in the queue: the backlog `tc -s qdisc` shows.
    pub fn queue_bytes(&self) -> u64 {
        self.queue_bytes
    }

    /// Counters.
    pub fn stats(&self) -> PathStats {
        PathStats {
            enqueued: self.enqueued,
            queue_drops: self.queue_drops,
            delivered: self.delivered,
            max_queue_packets: self.max_queue_packets,
            max_queue_bytes: self.max_queue_bytes,
            link: self.link.stats,
        }
    }
}

/// The IP length that costs a whole super-packet's serialization time: its wire
/// segments' IP bytes plus the framing of every segment but one (which
/// [`LinkDir::serialize`] adds itself).
fn wire_equivalent_len(frame: &Frame) -> usize {
    let len = frame.len();
    let Some(hdr) = header_len(&frame.data) else {
        return len;
    };
    let payload = len.saturating_sub(hdr);
    let mss = frame.gso_size as usize;
    if mss == 0 || payload <= mss {
        return len;
    }
    let segs = payload.div_ceil(mss);
    len + (segs - 1) * (hdr + FRAMING_OVERHEAD as usize)
}

/// The GSO segment size a received packet's virtio-net header gives (0: not GSO).
pub fn gso_size_of(hdr: &VnetHdr) -> u16 {
    match hdr.is_gso() {
        true => hdr.gso_size,
        false => 0,
    }
}

/// IP plus TCP header length of a packet, if it looks like one.
fn header_len(p: &[u8]) -> Option<usize> {
    let ip = match p.first()? >> 4 {
        4 => ((p[0] & 0x0f) as usize) * 4,
        6 => 40,
        _ => return None,
    };
    let tcp = ((*p.get(ip + 12)? >> 4) as usize) * 4;
    Some(ip + tcp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lowtide_wire::pool::BufPool;
    use lowtide_wire::tcp::{TcpFlags, TcpRepr};
    use lowtide_wire::testing::{tcp_packet, Csum};

    /// An IPv4 + TCP packet with `payload` bytes (20-byte headers, no options).
    fn packet(payload: usize) -> Vec<u8> {
        let tcp = TcpRepr {
            flags: TcpFlags::ACK,
            ..TcpRepr::default()
        };
        let (src, dst) = ("10.0.0.1:0".parse().unwrap(), "10.0.0.2:0".parse().unwrap());
        tcp_packet(src, dst, &tcp, &vec![0; payload], 0, Csum::Full)
    }

    fn frame(payload: usize, gso_size: u16) -> Frame {
        Frame {
            data: packet(payload),
            payload: Bytes::new(),
            gso_size,
            csum_partial: false,
            token: None,
            vnet: None,
        }
    }

    /// Runs the direction to completion; returns arrival times (ns) and sizes.
    fn drain(dir: &mut PathDir) -> Vec<(u64, usize)> {
        let mut out = Vec::new();
        while let Some(t) = dir.next_event() {
            dir.advance(t, &mut Vec::with_capacity);
            while let Some(f) = dir.pop_arrived(t) {
                out.push((t, f.len()));
            }
        }
        out
    }

    #[test]
    fn rate_and_delay_as_the_simulator() {
        // 1460-byte payload: 1500 IP bytes + 38 framing = 12,304 bits = 12.304 µs at
        // 1 Gbit/s; delay 5 ms.
        let cfg = PathConfig {
            rate_bps: Some(1_000_000_000),
            delay_ns: 5_000_000,
            ..PathConfig::default()
        };
        let mut dir = PathDir::new(cfg, false, 1);
        for _ in 0..3 {
            assert!(dir.enqueue(0, frame(1460, 0)));
        }
        let got = drain(&mut dir);
        let times: Vec<u64> = got.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, vec![5_012_304, 5_024_608, 5_036_912]);
    }

    #[test]
    fn segments_are_cut_into_buffers_of_the_owners_pool() {
        let mut split = PathDir::new(PathConfig::default(), true, 1);
        assert!(split.enqueue(0, frame(4 * 1460, 1460)));
        let mut pool = BufPool::new();
        let mine: Vec<Vec<u8>> = (0..4).map(|_| pool.take(1500)).collect();
        let ptrs: Vec<*const u8> = mine.iter().map(|b| b.as_ptr()).collect();
        mine.into_iter().for_each(|b| pool.give(b));
        split.advance(0, &mut |n| pool.take(n));
        let mut got = Vec::new();
        while let Some(f) = split.pop_arrived(u64::MAX) {
            got.push(f.data.as_ptr());
        }
        got.sort();
        let mut want = ptrs;
        want.sort();
        assert_eq!(
            got, want,
            "every segment in a pooled buffer, none allocated"
        );
    }

    /// `frame(payload, gso_size)` with its payload kept apart, as the runtime
    /// queues lowtide's GSO packets.
    fn frame_apart(payload: usize, gso_size: u16) -> Frame {
        let mut f = frame(payload, gso_size);
        f.payload = Bytes::from(f.data.split_off(40));
        f
    }

    #[test]
    fn a_payload_kept_apart_crosses_as_the_whole_packet() {
        for split in [false, true] {
            let mut flat = PathDir::new(PathConfig::default(), split, 1);
            let mut apart = PathDir::new(PathConfig::default(), split, 1);
            assert!(flat.enqueue(0, frame(4 * 1460 + 7, 1460)));
            assert!(apart.enqueue(0, frame_apart(4 * 1460 + 7, 1460)));
            assert_eq!(apart.queue_bytes(), flat.queue_bytes());
            flat.advance(0, &mut Vec::with_capacity);
            apart.advance(0, &mut Vec::with_capacity);
            let mut n = 0;
            while let Some(mut f) = flat.pop_arrived(u64::MAX) {
                let mut g = apart.pop_arrived(u64::MAX).expect("as many");
                assert_eq!(g.payload.is_empty(), split, "cut segments are whole");
                f.flatten();
                g.flatten();
                assert_eq!(g.data, f.data);
                n += 1;
            }
            assert_eq!(n, if split { 5 } else { 1 });
            assert!(apart.pop_arrived(u64::MAX).is_none());
        }
    }

    #[test]
    fn cut_and_dropped_packets_hand_their_buffers_back() {
        let cfg = PathConfig {
            queue_limit: 1,
            ..PathConfig::default()
        };
        let mut split = PathDir::new(cfg, true, 1);
        let f = frame(4 * 1460, 1460);
        let ptr = f.data.as_ptr();
        assert!(split.enqueue(0, f));
        assert!(!split.enqueue(0, frame(100, 0)), "the queue holds one");
        assert_eq!(
            split.pop_spent().map(|b| b.len()),
            Some(140),
            "the dropped one"
        );
        assert_eq!(split.pop_spent(), None);
        assert_eq!(drain(&mut split).len(), 4);
        let spent = split.pop_spent().expect("the cut super-packet's buffer");
        assert_eq!(spent.as_ptr(), ptr);
        assert_eq!(split.pop_spent(), None);
    }

    #[test]
    fn a_super_packet_takes_as_long_as_its_segments() {
        let cfg = PathConfig {
            rate_bps: Some(1_000_000_000),
            ..PathConfig::default()
        };
        let mut whole = PathDir::new(cfg.clone(), false, 1);
        whole.enqueue(0, frame(4 * 1460, 1460));
        let mut split = PathDir::new(cfg, true, 1);
        split.enqueue(0, frame(4 * 1460, 1460));
        let w = drain(&mut whole);
        let s = drain(&mut split);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].1, 40 + 4 * 1460);
        assert_eq!(s.len(), 4);
        assert!(s.iter().all(|(_, len)| *len == 1500));
        assert_eq!(w[0].0, s[3].0, "same serialization time in total");
        assert_eq!(s[3].0, 4 * 12_304);
    }

    #[test]
    fn a_slow_link_delivers_segments_one_by_one() {
        // At 100 Mbit/s a 1500-byte segment takes 123 us: a receiver's NAPI poll
        // (20 us) sees them apart, so the path delivers them apart; at 1 Gbit/s
        // (12 us) the super-packet stays whole.
        for (rate, pieces) in [(100_000_000u64, 4usize), (1_000_000_000, 1)] {
            let cfg = PathConfig {
                rate_bps: Some(rate),
                ..PathConfig::default()
            };
            let mut dir = PathDir::new(cfg, false, 1);
            dir.enqueue(0, frame(4 * 1460, 1460));
            assert_eq!(drain(&mut dir).len(), pieces, "at {rate} bit/s");
        }
    }

    #[test]
    fn late_processing_keeps_the_rate() {
        // Both packets queued at 0 but processed only at 1 ms: they still leave
        // back to back from time 0.
        let cfg = PathConfig {
            rate_bps: Some(1_000_000_000),
            ..PathConfig::default()
        };
        let mut dir = PathDir::new(cfg, false, 1);
        dir.enqueue(0, frame(1460, 0));
        dir.enqueue(0, frame(1460, 0));
        dir.advance(1_000_000, &mut Vec::with_capacity);
        assert_eq!(dir.pop_arrived(12_303).map(|f| f.data.len()), None);
        assert!(dir.pop_arrived(12_304).is_some());
        assert!(dir.pop_arrived(24_608).is_some());
    }

    #[test]
    fn a_full_queue_drops() {
        let cfg = PathConfig {
            rate_bps: Some(1_000_000),
            queue_limit: 2,
            ..PathConfig::default()
        };
        let mut dir = PathDir::new(cfg, false, 1);
        assert!(dir.enqueue(0, frame(100, 0)));
        assert!(dir.enqueue(0, frame(100, 0)));
        assert!(!dir.enqueue(0, frame(100, 0)));
        assert_eq!(dir.stats().queue_drops, 1);
        assert_eq!(drain(&mut dir).len(), 2);
    }

    #[test]
    fn loss_is_per_wire_segment() {
        let cfg = PathConfig {
            loss: 0.1,
            ..PathConfig::default()
        };
        let mut dir = PathDir::new(cfg, false, 7);
        for _ in 0..1000 {
            dir.enqueue(0, frame(10 * 100, 100));
            let _ = drain(&mut dir);
        }
        let st = dir.stats().link;
        assert_eq!(st.packets, 10_000);
        assert!((800..1200).contains(&st.lost), "lost {}", st.lost);
    }

    #[test]
    fn garbage_is_dropped_not_panicked_on() {
        let mut dir = PathDir::new(PathConfig::default(), true, 1);
        let bad = Frame {
            data: vec![0x45, 0, 0],
            payload: Bytes::new(),
            gso_size: 100,
            csum_partial: true,
            token: None,
            vnet: None,
        };
        dir.enqueue(0, bad);
        assert!(drain(&mut dir).is_empty());
    }
}
