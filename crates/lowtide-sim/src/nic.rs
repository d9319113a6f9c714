//! A host's network device: a qdisc ([`crate::qdisc`]; by default a pfifo of
//! `txqueuelen` packets) in front of a transmitter that drains it at link rate.

use crate::qdisc::fifo::Fifo;
use crate::qdisc::{NetXmit, Qdisc, QdiscStats, Skb};
use lowtide::{Instant, Transmit};
use serde::Serialize;

pub use crate::qdisc::QueueItem;

/// The flow of a packet that belongs to no flow (see [`NicQueue::enqueue_flow`]).
pub const NO_FLOW: u32 = u32::MAX;

/// Queue statistics of one device (the `device_queue` figures of an experiment).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct QueueStats {
    /// Packets accepted into the queue (a GSO packet counts once).
    pub enqueued: u64,
    /// Packets the qdisc dropped (full, or by its AQM).
    pub drops: u64,
    /// ECN-capable packets the qdisc marked CE (a fifo's step marking, CoDel, RED, fq).
    pub ce_marked: u64,
    /// Most packets ever queued at once.
    pub peak_packets: u64,
    /// Most IP bytes ever queued at once.
    pub peak_bytes: u64,
    /// Time-weighted mean of the queued bytes, over the run.
    pub mean_bytes: f64,
    /// Mean time a packet waited in the queue before its transmission began (µs).
    pub mean_delay_us: f64,
    /// Longest such wait (µs).
    pub max_delay_us: f64,
    /// Most IP bytes one flow ever had queued at once (max over flows and time).
    pub peak_flow_bytes: u64,
    /// Time-weighted mean of the queued bytes that belong to some flow (all flows
    /// together; divide by the number of flows for a per-flow mean).
    pub mean_flow_bytes: f64,
}

/// A queue's counters at one moment ([`NicQueue::totals`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueTotals {
    /// Packets queued now.
    pub packets: u64,
    /// IP bytes queued now.
    pub bytes: u64,
    /// Packets dropped so far.
    pub drops: u64,
    /// Packets marked CE so far.
    pub ce_marks: u64,
    /// Packets that have left the queue so far.
    pub dequeued: u64,
    /// Their waits in the queue, summed (ns).
    pub delay_sum_ns: u128,
}

/// A device's transmit queue: a qdisc ([`crate::qdisc`]; a pfifo by default) and
/// the figures of what waited in it. What it holds is waiting for the transmitter.
pub struct NicQueue<T = Transmit> {
    qdisc: Box<dyn Qdisc<T>>,
    /// Packets the qdisc dropped in the call under way.
    dropped: Vec<Skb<T>>,
    /// Packets the qdisc dropped after taking them (or with `NET_XMIT_CN`), for
    /// their TX completions ([`NicQueue::take_freed`]).
    freed: Vec<T>,
    /// Enqueue order, to tell the arriving packet among the dropped.
    seq: u64,
    packets: usize,
    bytes: u64,
    /// Integral of `bytes` over time (byte·ns) up to `last_change`.
    byte_ns: u128,
    last_change: Instant,
    delay_sum_ns: u128,
    delay_max_ns: u64,
    dequeued: u64,
    /// Bytes queued per flow, indexed by flow id (grown on demand).
    flow_bytes: Vec<u64>,
    /// Sum of `flow_bytes`.
    flow_total: u64,
    /// Integral of `flow_total` over time (byte·ns) up to `last_change`.
    flow_byte_ns: u128,
    stats: QueueStats,
    /// Packets per wait bucket ([`delay_bucket`]).
    delay_hist: Vec<u64>,
    /// Packets dequeued per size bucket (IP length / [`SIZE_BUCKET`]).
    size_hist: Vec<u64>,
}

/// Width of a packet-size bucket (bytes of IP length).
pub const SIZE_BUCKET: usize = 1024;
/// Buckets per octave of the wait histogram.
const DELAY_BUCKETS_PER_OCTAVE: f64 = 8.0;

/// The wait-histogram bucket of a wait of `ns` nanoseconds: 0 for under 1 µs, then
/// eight buckets per doubling.
pub fn delay_bucket(ns: u64) -> usize {
    if ns < 1_000 {
        return 0;
    }
    1 + ((ns as f64 / 1_000.0).log2() * DELAY_BUCKETS_PER_OCTAVE) as usize
}

/// The upper edge of wait bucket `b` (µs).
pub fn delay_bucket_upper_us(b: usize) -> f64 {
    match b {
        0 => 1.0,
        b => (b as f64 / DELAY_BUCKETS_PER_OCTAVE).exp2(),
    }
}

impl<T: QueueItem + 'static> NicQueue<T> {
    /// An empty pfifo holding at most `limit` packets (at least 1).
    pub fn new(limit: usize) -> NicQueue<T> {
        let limit = limit.min(u32::MAX as usize) as u32;
        NicQueue::with_qdisc(Box::new(Fifo::pfifo(limit)))
    }

    /// An empty queue run by `qdisc`.
    pub fn with_qdisc(qdisc: Box<dyn Qdisc<T>>) -> NicQueue<T> {
        NicQueue {
            qdisc,
            dropped: Vec::new(),
            freed: Vec::new(),
            seq: 0,
            packets: 0,
            bytes: 0,
            byte_ns: 0,
            last_change: Instant::ZERO,
            delay_sum_ns: 0,
            delay_max_ns: 0,
            dequeued: 0,
            flow_bytes: Vec::new(),
            flow_total: 0,
            flow_byte_ns: 0,
            stats: QueueStats::default(),
            delay_hist: Vec::new(),
            size_hist: Vec::new(),
        }
    }

    /// The qdisc's `tc` name.
    pub fn kind(&self) -> &'static str {
        self.qdisc.kind()
    }

    /// Whether the qdisc sorts packets by flow (fq, fq_codel): their socket and
    /// hash are worth computing.
    pub fn classifies(&self) -> bool {
        self.qdisc.classifies()
    }

    /// The qdisc's own counters.
    pub fn qdisc_stats(&self) -> QdiscStats {
        self.qdisc.stats()
    }

    /// The qdisc's xstats by Linux's names.
    pub fn xstats(&self) -> Vec<(&'static str, u64)> {
        self.qdisc.xstats()
    }

    /// Queues a packet that belongs to no flow, or gives it back if the queue
    /// drops it (`NET_XMIT_DROP`, counted).
    pub fn enqueue(&mut self, now: Instant, tx: T) -> Result<(), T> {
        self.enqueue_flow(now, tx, NO_FLOW)
    }

    /// Queues a packet of `flow` (or [`NO_FLOW`]) with no other identity, or gives
    /// it back if the queue drops it. The flow only feeds the per-flow statistics.
    pub fn enqueue_flow(&mut self, now: Instant, tx: T, flow: u32) -> Result<(), T> {
        let mut skb = Skb::new(tx, now.as_nanos());
        skb.tag = flow;
        self.enqueue_skb(now, skb)
    }

    /// Queues `skb` (its `tag` is its flow for the statistics; its socket, hash
    /// and departure time are for the qdisc), or gives it back on `NET_XMIT_DROP`.
    /// Packets the qdisc drops otherwise wait in [`NicQueue::take_freed`].
    pub fn enqueue_skb(&mut self, now: Instant, mut skb: Skb<T>) -> Result<(), T> {
        self.seq += 1;
        let seq = self.seq;
        skb.enqueued_at = now.as_nanos();
        skb.seq = seq;
        let (len, flow) = (skb.len as u64, skb.tag);
        let mut dropped = std::mem::take(&mut self.dropped);
        let verdict = self.qdisc.enqueue(now.as_nanos(), skb, &mut dropped);
        let mut back = None;
        let mut arrived = true;
        for d in dropped.drain(..) {
            self.stats.drops += 1;
            if d.seq != seq {
                self.forget(now, &d);
                self.freed.push(d.item);
            } else {
                arrived = false;
                match verdict {
                    NetXmit::Drop => back = Some(d.item),
                    // `net_xmit_eval`: the sender counts it as sent.
                    NetXmit::Success | NetXmit::Cn => self.freed.push(d.item),
                }
            }
        }
        self.dropped = dropped;
        if let Some(item) = back {
            return Err(item);
        }
        if arrived {
            self.account(now);
            self.bytes += len;
            if flow != NO_FLOW {
                self.add_flow_bytes(flow, len);
            }
            self.packets += 1;
            self.stats.enqueued += 1;
            self.stats.peak_packets = self.stats.peak_packets.max(self.packets as u64);
            self.stats.peak_bytes = self.stats.peak_bytes.max(self.bytes);
        }
        Ok(())
    }

    /// Takes the head packet for transmission, if the qdisc gives one now.
    pub fn dequeue(&mut self, now: Instant) -> Option<T> {
        let mut dropped = std::mem::take(&mut self.dropped);
        let q = self.qdisc.dequeue(now.as_nanos(), &mut dropped);
        for d in dropped.drain(..) {
            self.stats.drops += 1;
            self.forget(now, &d);
            self.freed.push(d.item);
        }
        self.dropped = dropped;
        let q = q?;
        self.account(now);
        let len = q.len as u64;
        self.bytes -= len;
        self.packets -= 1;
        if q.tag != NO_FLOW {
            self.flow_bytes[q.tag as usize] -= len;
            self.flow_total -= len;
        }
        let wait = now.as_nanos().saturating_sub(q.enqueued_at);
        self.delay_sum_ns += wait as u128;
        self.delay_max_ns = self.delay_max_ns.max(wait);
        self.dequeued += 1;
        bump(&mut self.delay_hist, delay_bucket(wait));
        bump(&mut self.size_hist, len as usize / SIZE_BUCKET);
        Some(q.item)
    }

    /// When a queue that held its packets back at the last dequeue can give one
    /// (the qdisc's watchdog: fq's pacing).
    pub fn next_ready(&self) -> Option<Instant> {
        self.qdisc.next_ready().map(Instant)
    }

    /// Packets the qdisc dropped after taking them: each needs its TX completion,
    /// as `kfree_skb` runs the socket's destructor; the sender learns of the loss
    /// as of any other.
    pub fn take_freed(&mut self) -> std::vec::Drain<'_, T> {
        self.freed.drain(..)
    }

    /// Removes a queued packet the qdisc dropped from the figures.
    fn forget(&mut self, now: Instant, d: &Skb<T>) {
        self.account(now);
        self.bytes -= d.len as u64;
        self.packets -= 1;
        if d.tag != NO_FLOW {
            self.flow_bytes[d.tag as usize] -= d.len as u64;
            self.flow_total -= d.len as u64;
        }
    }

    fn add_flow_bytes(&mut self, flow: u32, len: u64) {
        let i = flow as usize;
        if self.flow_bytes.len() <= i {
            self.flow_bytes.resize(i + 1, 0);
        }
        self.flow_bytes[i] += len;
        self.flow_total += len;
        self.stats.peak_flow_bytes = self.stats.peak_flow_bytes.max(self.flow_bytes[i]);
    }

    /// Integrates the queued bytes over the time since the last change.
    fn account(&mut self, now: Instant) {
        let dt = now.as_nanos().saturating_sub(self.last_change.as_nanos()) as u128;
        self.byte_ns += self.bytes as u128 * dt;
        self.flow_byte_ns += self.flow_total as u128 * dt;
        self.last_change = now;
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.packets
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.packets == 0
    }

    /// IP bytes queued.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// IP bytes of `flow` queued.
    pub fn flow_bytes(&self, flow: u32) -> u64 {
        self.flow_bytes.get(flow as usize).copied().unwrap_or(0)
    }

    /// Packets sent per wait in the queue: index `b` counts waits up to
    /// [`delay_bucket_upper_us`]`(b)` (and above the previous bucket's edge).
    pub fn delay_histogram(&self) -> &[u64] {
        &self.delay_hist
    }

    /// Packets sent per size: index `b` counts IP lengths in
    /// `b * SIZE_BUCKET..(b + 1) * SIZE_BUCKET` (a GSO packet counts once, whole).
    pub fn size_histogram(&self) -> &[u64] {
        &self.size_hist
    }

    /// The queue's counters as they stand, for a time series
    /// ([`crate::network::series`]).
    pub fn totals(&self) -> QueueTotals {
        QueueTotals {
            packets: self.packets as u64,
            bytes: self.bytes,
            drops: self.stats.drops,
            ce_marks: self.qdisc.stats().ce_marks,
            dequeued: self.dequeued,
            delay_sum_ns: self.delay_sum_ns,
        }
    }

    /// Statistics up to `now` (time averages over `0..now`).
    pub fn stats(&self, now: Instant) -> QueueStats {
        let mut s = self.stats;
        s.ce_marked = self.qdisc.stats().ce_marks;
        let dt = now.as_nanos().saturating_sub(self.last_change.as_nanos()) as u128;
        let total = self.byte_ns + self.bytes as u128 * dt;
        let flow_total = self.flow_byte_ns + self.flow_total as u128 * dt;
        if now.as_nanos() > 0 {
            s.mean_bytes = total as f64 / now.as_nanos() as f64;
            s.mean_flow_bytes = flow_total as f64 / now.as_nanos() as f64;
        }
        if self.dequeued > 0 {
            s.mean_delay_us = self.delay_sum_ns as f64 / self.dequeued as f64 / 1e3;
        }
        s.max_delay_us = self.delay_max_ns as f64 / 1e3;
        s
    }
}

/// Adds one to `h[i]`, growing `h` as needed.
fn bump(h: &mut Vec<u64>, i: usize) {
    if h.len() <= i {
        h.resize(i + 1, 0);
    }
    h[i] += 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_in_packets_drops_when_full() {
        let mut q: NicQueue<Vec<u8>> = NicQueue::new(3);
        for i in 0..3 {
            // A 64 KB GSO packet counts as one packet, like in a qdisc.
            assert!(q.enqueue(Instant(i), vec![0; 65_000]).is_ok());
        }
        let back = q.enqueue(Instant(3), vec![7; 10]).unwrap_err();
        assert_eq!(back, vec![7; 10], "a dropped packet is handed back");
        assert_eq!(q.len(), 3);
        assert_eq!(q.bytes(), 195_000);
        let s = q.stats(Instant(3));
        assert_eq!((s.enqueued, s.drops, s.peak_packets), (3, 1, 3));
        q.dequeue(Instant(4)).unwrap();
        assert!(q.enqueue(Instant(5), vec![1; 10]).is_ok());
        assert_eq!(q.stats(Instant(5)).drops, 1);
    }

    #[test]
    fn fifo_order_and_delay_and_mean_bytes() {
        let mut q: NicQueue<Vec<u8>> = NicQueue::new(10);
        q.enqueue(Instant(0), vec![1; 100]).unwrap();
        q.enqueue(Instant(0), vec![2; 300]).unwrap();
        assert_eq!(q.dequeue(Instant(1_000)).unwrap()[0], 1);
        assert_eq!(q.dequeue(Instant(3_000)).unwrap()[0], 2);
        assert!(q.dequeue(Instant(3_000)).is_none());
        let s = q.stats(Instant(4_000));
        // 400 B for 1 µs, 300 B for 2 µs, then empty for 1 µs: 1000 B·µs / 4 µs.
        assert!((s.mean_bytes - 250.0).abs() < 1e-9, "{}", s.mean_bytes);
        assert!((s.mean_delay_us - 2.0).abs() < 1e-9);
        assert!((s.max_delay_us - 3.0).abs() < 1e-9);
        assert_eq!(s.peak_bytes, 400);
    }

    #[test]
    fn per_flow_bytes_and_delays_of_a_toy_sequence() {
        let mut q: NicQueue<Vec<u8>> = NicQueue::new(10);
        q.enqueue_flow(Instant(0), vec![0; 1000], 0).unwrap();
        q.enqueue_flow(Instant(0), vec![1; 500], 1).unwrap();
        q.enqueue_flow(Instant(0), vec![0; 2000], 0).unwrap();
        q.enqueue(Instant(0), vec![9; 100]).unwrap();
        assert_eq!(
            (q.flow_bytes(0), q.flow_bytes(1), q.flow_bytes(7)),
            (3000, 500, 0)
        );
        assert_eq!(q.dequeue(Instant(1_000)).unwrap().len(), 1000); // waited 1 µs
        assert_eq!(q.dequeue(Instant(2_000)).unwrap().len(), 500); // 2 µs
        q.enqueue_flow(Instant(2_000), vec![1; 300], 1).unwrap();
        assert_eq!(q.dequeue(Instant(4_000)).unwrap().len(), 2000); // 4 µs
        assert_eq!(q.dequeue(Instant(5_000)).unwrap().len(), 100); // 5 µs
        assert_eq!(q.dequeue(Instant(6_000)).unwrap().len(), 300); // 4 µs
        assert_eq!((q.flow_bytes(0), q.flow_bytes(1)), (0, 0));
        let s = q.stats(Instant(8_000));
        // Flow 0 held 3000 B at t = 0: the largest of any flow at any time.
        assert_eq!(s.peak_flow_bytes, 3000);
        assert_eq!(s.peak_bytes, 3600);
        // Bytes of flows: 3500 for 1 µs, 2500 for 1 µs, 2300 for 2 µs, 300 for 2 µs,
        // then none for 2 µs: 11,200 B·µs over 8 µs.
        assert!(
            (s.mean_flow_bytes - 1400.0).abs() < 1e-9,
            "{}",
            s.mean_flow_bytes
        );
        // All bytes: the flows' plus 100 B for 5 µs.
        assert!((s.mean_bytes - 1462.5).abs() < 1e-9, "{}", s.mean_bytes);
        // Waits 1, 2, 4, 5 and 4 µs.
        assert!((s.mean_delay_us - 3.2).abs() < 1e-9, "{}", s.mean_delay_us);
        assert!((s.max_delay_us - 5.0).abs() < 1e-9);
    }

    #[test]
    fn a_dropped_packet_leaves_no_flow_bytes() {
        let mut q: NicQueue<Vec<u8>> = NicQueue::new(1);
        q.enqueue_flow(Instant(0), vec![0; 10], 3).unwrap();
        assert!(q.enqueue_flow(Instant(0), vec![0; 20], 3).is_err());
        assert_eq!(q.flow_bytes(3), 10);
        assert_eq!(q.stats(Instant(1)).peak_flow_bytes, 10);
    }
}
