//! One direction of a point-to-point link: a serializer at a fixed rate, a
//! propagation delay, and netem-like impairments (jitter, loss, reordering,
//! duplication, corruption), each direction with its own random stream.

use crate::event::EventQueue;
use bytes::Bytes;
use lowtide::Instant;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::Serialize;
use std::collections::VecDeque;

/// Bytes a frame costs on the wire beyond its IP packet: Ethernet header 14 + FCS 4 +
/// preamble and start delimiter 8 + inter-frame gap 12 = 38. A 1500-byte IP packet
/// occupies 1538 byte times, as on a real Ethernet.
pub const FRAMING_OVERHEAD: u64 = 38;

/// A segment on the wire: its headers, and its payload where the sending stack keeps
/// it (a slice of the GSO packet's payload, as a NIC's scatter-gather list reads an
/// skb's page fragments), so cutting a GSO packet copies no payload. A packet built
/// whole has an empty `body`.
#[derive(Debug, Clone, Default)]
pub struct WireSeg {
    /// The headers (the whole packet if `body` is empty), in a buffer with room for
    /// the whole segment when the device cut it.
    pub head: Vec<u8>,
    /// The payload kept apart.
    pub body: Bytes,
}

impl WireSeg {
    /// A packet built whole.
    pub fn whole(packet: Vec<u8>) -> WireSeg {
        WireSeg {
            head: packet,
            body: Bytes::new(),
        }
    }

    /// Bytes on the wire (the IP packet).
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// Whether the segment has no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The segment in one buffer: the payload copied behind the headers, in the
    /// head's buffer.
    pub fn flatten(mut self) -> Vec<u8> {
        if !self.body.is_empty() {
            self.head.extend_from_slice(&self.body);
        }
        self.head
    }
}

/// The settings of one link direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkConfig {
    /// Line rate in bits per second.
    pub rate_bps: u64,
    /// One-way propagation delay (ns).
    pub delay_ns: u64,
    /// Extra delay per packet, uniform in `0..jitter_ns` (ns). Like netem, jitter
    /// may reorder packets.
    pub jitter_ns: u64,
    /// Probability that a wire segment is lost (Bernoulli, or the long-run loss rate
    /// of the burst model when `loss_burst` > 1).
    pub loss: f64,
    /// Mean length of a loss burst in wire segments. Above 1, losses follow a
    /// two-state Gilbert model (netem's `loss gemodel p r`): a segment in the bad
    /// state is lost, the bad state is left with probability `r = 1/loss_burst` per
    /// segment and entered with `p = loss * r / (1 - loss)`, so the long-run loss
    /// rate stays `loss`. 1 or less: independent losses.
    pub loss_burst: f64,
    /// Probability that a wire segment is held back by `reorder_delay_ns`, so that
    /// later segments overtake it.
    pub reorder: f64,
    /// Extra delay of a reordered segment (ns); `None` means the default: half the
    /// one-way delay, or 100 µs if that is shorter (so that a short link still
    /// reorders by more than a few frames).
    pub reorder_delay_ns: Option<u64>,
    /// Probability that a wire segment arrives twice (the copy gets its own jitter).
    pub duplicate: f64,
    /// Probability that one random bit of a wire segment is flipped.
    pub corrupt: f64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_bps: 1_000_000_000,
            delay_ns: 10_000_000,
            jitter_ns: 0,
            loss: 0.0,
            loss_burst: 1.0,
            reorder: 0.0,
            reorder_delay_ns: None,
            duplicate: 0.0,
            corrupt: 0.0,
        }
    }
}

impl LinkConfig {
    /// The extra delay a reordered segment gets.
    pub fn effective_reorder_delay_ns(&self) -> u64 {
        self.reorder_delay_ns
            .unwrap_or((self.delay_ns / 2).max(100_000))
    }
}

/// What happened on one link direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LinkStats {
    /// Wire segments serialized onto the link.
    pub packets: u64,
    /// Wire bytes serialized (IP bytes plus framing overhead).
    pub wire_bytes: u64,
    /// Segments lost.
    pub lost: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Segments with a flipped bit.
    pub corrupted: u64,
    /// Segments held back for reordering.
    pub reordered: u64,
}

/// One direction of a link.
pub struct LinkDir {
    cfg: LinkConfig,
    rng: ChaCha8Rng,
    /// The link is busy serializing until this time (ns).
    busy_until: u64,
    loss: Threshold,
    /// The burst model: (enter bad, leave bad) thresholds; `None` when losses are
    /// independent.
    burst: Option<(Threshold, Threshold)>,
    /// In the Gilbert model's bad state.
    bad: bool,
    reorder: Threshold,
    duplicate: Threshold,
    corrupt: Threshold,
    /// Counters.
    pub stats: LinkStats,
}

/// A probability as a threshold on a uniform u64, so that a draw is one compare.
#[derive(Clone, Copy)]
struct Threshold(Option<u64>);

impl Threshold {
    fn new(p: f64) -> Threshold {
        match p {
            p if p <= 0.0 || p.is_nan() => Threshold(None),
            p if p >= 1.0 => Threshold(Some(u64::MAX)),
            p => Threshold(Some((p * 2f64.powi(64)) as u64)),
        }
    }

    /// Draws from `rng` only if the probability is not zero, so an unused impairment
    /// leaves the random stream of the others unchanged.
    #[inline]
    fn hit(self, rng: &mut ChaCha8Rng) -> bool {
        match self.0 {
            None => false,
            Some(u64::MAX) => true,
            Some(t) => rng.next_u64() < t,
        }
    }
}

impl LinkDir {
    /// A link direction with its own random stream.
    pub fn new(cfg: LinkConfig, seed: u64) -> LinkDir {
        assert!(cfg.rate_bps > 0, "link rate must be positive");
        LinkDir {
            loss: Threshold::new(cfg.loss),
            burst: burst_thresholds(&cfg),
            bad: false,
            reorder: Threshold::new(cfg.reorder),
            duplicate: Threshold::new(cfg.duplicate),
            corrupt: Threshold::new(cfg.corrupt),
            cfg,
            rng: ChaCha8Rng::seed_from_u64(seed),
            busy_until: 0,
            stats: LinkStats::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Time to serialize an IP packet of `ip_len` bytes (ns, rounded up).
    #[inline]
    pub fn serialization_ns(&self, ip_len: usize) -> u64 {
        let bits = (ip_len as u64 + FRAMING_OVERHEAD) * 8;
        ((bits as u128 * 1_000_000_000).div_ceil(self.cfg.rate_bps as u128)) as u64
    }

    /// Serializes a packet of `ip_len` bytes starting no earlier than `now` (ns);
    /// returns (start, end) of its serialization.
    #[inline]
    pub fn serialize(&mut self, now: u64, ip_len: usize) -> (u64, u64) {
        let start = now.max(self.busy_until);
        let end = start + self.serialization_ns(ip_len);
        self.busy_until = end;
        self.stats.packets += 1;
        self.stats.wire_bytes += ip_len as u64 + FRAMING_OVERHEAD;
        (start, end)
    }

    /// Applies the impairments to a segment whose serialization ended at `end` (ns)
    /// and hands each surviving copy to `deliver` with its arrival time (ns).
    pub fn propagate(&mut self, end: u64, mut pkt: WireSeg, mut deliver: impl FnMut(u64, WireSeg)) {
        if self.lost() {
            self.stats.lost += 1;
            return;
        }
        if self.duplicate.hit(&mut self.rng) {
            self.stats.duplicated += 1;
            let at = end + self.delay();
            deliver(at, pkt.clone());
        }
        if self.corrupt.hit(&mut self.rng) && !pkt.is_empty() {
            self.stats.corrupted += 1;
            let mut whole = std::mem::take(&mut pkt).flatten();
            self.flip_bit(&mut whole);
            pkt = WireSeg::whole(whole);
        }
        let at = end + self.delay();
        deliver(at, pkt);
    }

    /// Whether the next segment is lost: a Bernoulli draw, or a step of the Gilbert
    /// model (which draws only when `loss` is strictly between 0 and 1, so a
    /// loss-free link leaves the random stream alone).
    #[inline]
    fn lost(&mut self) -> bool {
        match self.burst {
            Some((enter, leave)) => {
                let flip = if self.bad { leave } else { enter };
                if flip.hit(&mut self.rng) {
                    self.bad = !self.bad;
                }
                self.bad
            }
            None => self.loss.hit(&mut self.rng),
        }
    }

    /// One-way delay plus this packet's jitter and reordering hold.
    #[inline]
    fn delay(&mut self) -> u64 {
        let mut d = self.cfg.delay_ns;
        if self.cfg.jitter_ns > 0 {
            d += self.rng.next_u64() % self.cfg.jitter_ns;
        }
        if self.reorder.hit(&mut self.rng) {
            self.stats.reordered += 1;
            d += self.cfg.effective_reorder_delay_ns();
        }
        d
    }

    /// netem's corruption: one random bit of one random byte.
    fn flip_bit(&mut self, pkt: &mut [u8]) {
        let r = self.rng.next_u64();
        let byte = (r >> 3) as usize % pkt.len();
        pkt[byte] ^= 1 << (r & 7);
    }
}

/// The Gilbert model's transition thresholds for `cfg`, if it has bursty loss with a
/// loss rate strictly between 0 and 1 (0 and 1 need no model).
fn burst_thresholds(cfg: &LinkConfig) -> Option<(Threshold, Threshold)> {
    let (loss, burst) = (cfg.loss, cfg.loss_burst);
    if burst.is_nan() || burst <= 1.0 || loss.is_nan() || loss <= 0.0 || loss >= 1.0 {
        return None;
    }
    let leave = 1.0 / burst;
    let enter = (loss * leave / (1.0 - loss)).min(1.0);
    Some((Threshold::new(enter), Threshold::new(leave)))
}

/// Segments propagating on a link direction, by arrival time. Without jitter or
/// reordering, arrivals come in sending order and a FIFO suffices; otherwise a
/// priority queue keyed by (arrival time, sending order) keeps ties deterministic.
pub enum Pipe {
    /// Arrival times never decrease.
    Fifo(VecDeque<(u64, WireSeg)>),
    /// Arrival times may decrease (jitter, reordering).
    Sorted(EventQueue<WireSeg>),
}

impl Pipe {
    /// The pipe a link direction with `cfg` needs.
    pub fn for_config(cfg: &LinkConfig) -> Pipe {
        match cfg.jitter_ns == 0 && cfg.reorder <= 0.0 {
            true => Pipe::Fifo(VecDeque::new()),
            false => Pipe::Sorted(EventQueue::new()),
        }
    }

    /// A segment that arrives at `at` (ns).
    #[inline]
    pub fn push(&mut self, at: u64, pkt: WireSeg) {
        match self {
            Pipe::Fifo(q) => {
                debug_assert!(q.back().is_none_or(|(t, _)| *t <= at));
                q.push_back((at, pkt));
            }
            Pipe::Sorted(q) => q.push(Instant(at), pkt),
        }
    }

    /// The earliest arrival time (ns).
    #[inline]
    pub fn head_time(&self) -> Option<u64> {
        match self {
            Pipe::Fifo(q) => q.front().map(|(t, _)| *t),
            Pipe::Sorted(q) => q.peek_time().map(|t| t.as_nanos()),
        }
    }

    /// Takes the earliest segment if it has arrived by `now` (ns).
    #[inline]
    pub fn pop_arrived(&mut self, now: u64) -> Option<WireSeg> {
        if self.head_time()? > now {
            return None;
        }
        match self {
            Pipe::Fifo(q) => q.pop_front().map(|(_, p)| p),
            Pipe::Sorted(q) => q.pop().map(|(_, p)| p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(cfg: LinkConfig) -> LinkDir {
        LinkDir::new(cfg, 99)
    }

    fn send_many(l: &mut LinkDir, n: usize) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        for i in 0..n {
            let (_, end) = l.serialize(0, 100);
            let seg = WireSeg::whole(vec![i as u8; 100]);
            l.propagate(end, seg, |at, p| out.push((at, p.flatten())));
        }
        out
    }

    #[test]
    fn serialization_time_follows_rate_and_framing() {
        let l = link(LinkConfig {
            rate_bps: 1_000_000_000,
            ..Default::default()
        });
        // 1538 bytes at 1 Gbit/s = 12304 ns.
        assert_eq!(l.serialization_ns(1500), 12_304);
        let l = link(LinkConfig {
            rate_bps: 3,
            ..Default::default()
        });
        // 39 * 8 bits at 3 bit/s = 104 s exactly.
        assert_eq!(l.serialization_ns(1), 104_000_000_000);
    }

    #[test]
    fn back_to_back_then_delay() {
        let mut l = link(LinkConfig {
            rate_bps: 10_000_000_000,
            delay_ns: 1_000_000,
            ..Default::default()
        });
        let (s1, e1) = l.serialize(0, 1500);
        let (s2, e2) = l.serialize(0, 1500);
        assert_eq!((s1, e1), (0, 1231));
        assert_eq!((s2, e2), (1231, 2462));
        let (s3, _) = l.serialize(10_000, 40);
        assert_eq!(s3, 10_000, "idle link starts at once");
        let mut got = vec![];
        l.propagate(e2, WireSeg::whole(vec![1]), |at, p| {
            got.push((at, p.flatten()))
        });
        assert_eq!(got, vec![(1_002_462, vec![1])]);
    }

    #[test]
    fn loss_fraction_within_tolerance() {
        let mut l = link(LinkConfig {
            loss: 0.05,
            ..Default::default()
        });
        let n = 100_000;
        let got = send_many(&mut l, n).len();
        let lost = (n - got) as f64 / n as f64;
        assert!((lost - 0.05).abs() < 0.005, "lost {lost}");
        assert_eq!(l.stats.lost as usize, n - got);
        assert_eq!(l.stats.packets as usize, n);
    }

    /// The burst model keeps the long-run loss rate and makes losses cluster: the mean
    /// run of consecutive losses is near `loss_burst` (about 1 for independent loss).
    #[test]
    fn bursty_loss_rate_and_burst_length() {
        let runs = |burst: f64| {
            let mut l = link(LinkConfig {
                loss: 0.1,
                loss_burst: burst,
                ..Default::default()
            });
            let n = 200_000;
            let mut lost_flags = Vec::with_capacity(n);
            for i in 0..n {
                let mut got = false;
                l.propagate(0, WireSeg::whole(vec![i as u8]), |_, _| got = true);
                lost_flags.push(!got);
            }
            let lost = lost_flags.iter().filter(|&&x| x).count();
            let bursts = lost_flags
                .windows(2)
                .filter(|w| w[1] && !w[0])
                .count()
                .max(1);
            (lost as f64 / n as f64, lost as f64 / bursts as f64)
        };
        let (rate, mean) = runs(5.0);
        assert!((rate - 0.1).abs() < 0.01, "bursty loss rate {rate}");
        assert!((mean - 5.0).abs() < 0.5, "mean burst {mean}");
        let (rate, mean) = runs(1.0);
        assert!((rate - 0.1).abs() < 0.01, "independent loss rate {rate}");
        assert!(mean < 1.2, "independent losses cluster: {mean}");
    }

    #[test]
    fn duplicates_and_corruption_are_applied() {
        let mut l = link(LinkConfig {
            duplicate: 0.1,
            corrupt: 0.1,
            ..Default::default()
        });
        let n = 20_000;
        let out = send_many(&mut l, n);
        assert_eq!(out.len(), n + l.stats.duplicated as usize);
        let dup = l.stats.duplicated as f64 / n as f64;
        assert!((dup - 0.1).abs() < 0.01, "dup {dup}");
        let bad = out
            .iter()
            .filter(|(_, p)| {
                p.iter().map(|b| b.count_ones()).sum::<u32>() % 2 != 0 || {
                    let first = p[0];
                    p.iter().any(|&b| b != first)
                }
            })
            .count();
        assert_eq!(bad as u64, l.stats.corrupted);
        assert!((l.stats.corrupted as f64 / n as f64 - 0.1).abs() < 0.01);
    }

    #[test]
    fn jitter_and_reorder_bounds() {
        let mut l = link(LinkConfig {
            delay_ns: 1000,
            jitter_ns: 500,
            reorder: 0.2,
            reorder_delay_ns: Some(10_000),
            ..Default::default()
        });
        let mut extras = vec![];
        for _ in 0..1000 {
            l.propagate(0, WireSeg::whole(vec![0]), |at, _| extras.push(at - 1000));
        }
        assert!(extras
            .iter()
            .all(|&e| e < 500 || (10_000..10_500).contains(&e)));
        assert!(l.stats.reordered > 150 && l.stats.reordered < 250);
    }

    /// netem's `delay D J` without a table (seed 003: `delay 150ms 200us`) draws each
    /// delay uniformly in `D - J .. D + J` and its tfifo releases by time to send: at
    /// 10 Gbit/s (1.23 us per 1500-byte packet) 400 us of spread moves packets by
    /// about 80 positions on average (at most 325, the spread over the spacing), and
    /// about half of them arrive before one sent earlier.
    /// The link with `jitter_ns` = 2J and its sorted pipe do the same.
    #[test]
    fn jitter_reorders_back_to_back_packets_like_netem_tfifo() {
        let mut l = LinkDir::new(
            LinkConfig {
                rate_bps: 10_000_000_000,
                delay_ns: 1_000_000 - 200_000,
                jitter_ns: 400_000,
                ..Default::default()
            },
            7,
        );
        let mut pipe = Pipe::for_config(l.config());
        let n = 20_000u32;
        for i in 0..n {
            let (_, end) = l.serialize(0, 1500);
            l.propagate(end, WireSeg::whole(i.to_be_bytes().to_vec()), |at, p| {
                pipe.push(at, p)
            });
        }
        let mut order = Vec::new();
        let mut last = 0;
        while let Some(at) = pipe.head_time() {
            assert!(at >= last, "released by arrival time");
            last = at;
            let p = pipe.pop_arrived(at).expect("arrived");
            order.push(u32::from_be_bytes(p.head[..4].try_into().unwrap()));
        }
        assert_eq!(order.len(), n as usize);
        let moved: Vec<u64> = order
            .iter()
            .enumerate()
            .map(|(pos, &i)| (pos as i64 - i as i64).unsigned_abs())
            .collect();
        let max = *moved.iter().max().unwrap();
        let mean = moved.iter().sum::<u64>() as f64 / n as f64;
        let spacing = l.serialization_ns(1500); // 1231 ns
        assert!(max <= 400_000 / spacing + 1, "max displacement {max}");
        assert!(max > 100, "max displacement {max}");
        assert!(mean > 30.0 && mean < 150.0, "mean displacement {mean}");
        let overtaken = order.windows(2).filter(|w| w[1] < w[0]).count();
        let frac = overtaken as f64 / n as f64;
        assert!(
            (frac - 0.5).abs() < 0.02,
            "arrive after a later packet: {frac}"
        );
    }

    #[test]
    fn pipes_release_in_arrival_order() {
        let mut fifo = Pipe::for_config(&LinkConfig::default());
        let mut sorted = Pipe::for_config(&LinkConfig {
            jitter_ns: 1,
            ..Default::default()
        });
        assert!(matches!(fifo, Pipe::Fifo(_)) && matches!(sorted, Pipe::Sorted(_)));
        for (at, tag) in [(10, 1u8), (10, 2), (20, 3)] {
            fifo.push(at, WireSeg::whole(vec![tag]));
        }
        for (at, tag) in [(20, 3u8), (10, 1), (10, 2)] {
            sorted.push(at, WireSeg::whole(vec![tag]));
        }
        for pipe in [&mut fifo, &mut sorted] {
            let mut pop = |now| pipe.pop_arrived(now).map(WireSeg::flatten);
            assert_eq!(pop(9), None);
            assert_eq!(pop(15), Some(vec![1]));
            assert_eq!(pop(15), Some(vec![2]));
            assert_eq!(pop(15), None);
            assert_eq!(pipe.head_time(), Some(20));
            assert_eq!(pipe.pop_arrived(20).map(WireSeg::flatten), Some(vec![3]));
        }
    }

    #[test]
    fn same_seed_same_fates() {
        let cfg = LinkConfig {
            loss: 0.3,
            jitter_ns: 1000,
            ..Default::default()
        };
        let a = send_many(&mut LinkDir::new(cfg.clone(), 5), 500);
        let b = send_many(&mut LinkDir::new(cfg.clone(), 5), 500);
        let c = send_many(&mut LinkDir::new(cfg, 6), 500);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
