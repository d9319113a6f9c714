//! sch_fifo.c: `pfifo` (a limit in packets) and `bfifo` (a limit in bytes); by
//! default the device's `txqueuelen` packets, or that many times `psched_mtu`
//! bytes. `pfifo_fast` (sch_generic.c) is pfifo for TCP: its three bands by TOS
//! priority each hold `txqueuelen` packets, and TCP's default TOS puts every packet
//! in band 1.

use super::{NetXmit, Qdisc, QdiscStats, QueueItem, Skb};
use std::collections::VecDeque;

/// What a fifo's limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `pfifo limit N`: packets (a GSO packet counts once).
    Packets(u32),
    /// `bfifo limit N`: bytes (`qdisc_pkt_len`).
    Bytes(u64),
}

/// A pfifo or bfifo.
pub struct Fifo<T> {
    queue: VecDeque<Skb<T>>,
    limit: Limit,
    /// Mark ECN-capable arrivals CE once this many packets wait (a step AQM, as
    /// `red min K max K ecn` or DCTCP's marking threshold); `None`: no marking.
    ecn_mark_at: Option<u32>,
    stats: QdiscStats,
}

impl<T: QueueItem> Fifo<T> {
    /// `pfifo limit N` (at least 1, as the simulator's device queue has always had).
    pub fn pfifo(limit: u32) -> Fifo<T> {
        Fifo::new(Limit::Packets(limit.max(1)))
    }

    /// `bfifo limit N` (bytes).
    pub fn bfifo(limit: u64) -> Fifo<T> {
        Fifo::new(Limit::Bytes(limit))
    }

    fn new(limit: Limit) -> Fifo<T> {
        let cap = match limit {
            Limit::Packets(n) => n.clamp(1, 4096) as usize,
            Limit::Bytes(_) => 64,
        };
        Fifo {
            queue: VecDeque::with_capacity(cap),
            limit,
            ecn_mark_at: None,
            stats: QdiscStats::default(),
        }
    }

    /// The step-marking option
    /// ([RFC 3168 section 5](https://www.rfc-editor.org/rfc/rfc3168#section-5)): an
    /// ECN-capable packet that arrives while at least `at` packets wait is marked CE and
    /// queued; packets that are not ECN-capable are only dropped when the queue is full.
    pub fn with_ecn_mark_at(mut self, at: Option<u32>) -> Fifo<T> {
        self.ecn_mark_at = at;
        self
    }

    /// The head packet's length (`qdisc_peek_head`), if any.
    pub fn peek_len(&self) -> Option<u32> {
        self.queue.front().map(|s| s.len)
    }

    /// `pfifo_enqueue` / `bfifo_enqueue`: room under the limit, or a tail drop.
    fn has_room(&self, len: u32) -> bool {
        match self.limit {
            Limit::Packets(n) => (self.queue.len() as u64) < n as u64,
            Limit::Bytes(n) => self.stats.backlog + len as u64 <= n,
        }
    }
}

impl<T: QueueItem> Qdisc<T> for Fifo<T> {
    fn kind(&self) -> &'static str {
        match self.limit {
            Limit::Packets(_) => "pfifo",
            Limit::Bytes(_) => "bfifo",
        }
    }

    fn enqueue(&mut self, _now: u64, mut skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> NetXmit {
        if !self.has_room(skb.len) {
            self.stats.drops += 1;
            dropped.push(skb);
            return NetXmit::Drop;
        }
        let marking = self
            .ecn_mark_at
            .is_some_and(|at| self.queue.len() as u64 >= at as u64);
        if marking && skb.item.mark_ce() {
            self.stats.ce_marks += 1;
        }
        self.stats.backlog += skb.len as u64;
        self.queue.push_back(skb);
        self.stats.qlen = self.queue.len() as u32;
        NetXmit::Success
    }

    fn dequeue(&mut self, _now: u64, _dropped: &mut Vec<Skb<T>>) -> Option<Skb<T>> {
        let skb = self.queue.pop_front()?;
        self.stats.backlog -= skb.len as u64;
        self.stats.qlen = self.queue.len() as u32;
        Some(skb)
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 packet of `len` bytes, not ECN-capable.
    fn skb(len: usize) -> Skb<Vec<u8>> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        Skb::new(p, 0)
    }

    /// sch_fifo.c pfifo_enqueue: `qlen < limit`, whatever the sizes.
    #[test]
    fn pfifo_counts_packets() {
        let mut q = Fifo::pfifo(2);
        let mut d = Vec::new();
        assert_eq!(q.enqueue(0, skb(65_000), &mut d), NetXmit::Success);
        assert_eq!(q.enqueue(0, skb(65_000), &mut d), NetXmit::Success);
        assert_eq!(q.enqueue(0, skb(40), &mut d), NetXmit::Drop);
        assert_eq!((d.len(), d[0].len), (1, 40), "the arrival comes back");
        let s = q.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (2, 130_000, 1));
        assert_eq!(q.dequeue(0, &mut d).unwrap().len, 65_000);
        assert_eq!(q.enqueue(0, skb(40), &mut d), NetXmit::Success);
    }

    /// sch_fifo.c bfifo_enqueue: `backlog + qdisc_pkt_len <= limit`.
    #[test]
    fn bfifo_counts_bytes() {
        let mut q = Fifo::bfifo(3000);
        let mut d = Vec::new();
        assert_eq!(q.enqueue(0, skb(1500), &mut d), NetXmit::Success);
        assert_eq!(q.enqueue(0, skb(1501), &mut d), NetXmit::Drop);
        assert_eq!(
            q.enqueue(0, skb(1500), &mut d),
            NetXmit::Success,
            "exactly full"
        );
        assert_eq!(q.enqueue(0, skb(1), &mut d), NetXmit::Drop);
        assert_eq!(q.stats().backlog, 3000);
        assert_eq!(q.kind(), "bfifo");
    }

    /// The step marker marks ECT arrivals once `at` packets wait, never not-ECT ones.
    #[test]
    fn step_marking_marks_ect_only_above_the_step() {
        let ect = || {
            let mut p = vec![0u8; 20];
            p[0] = 0x45;
            p[1] = 2; // ECT(0)
            Skb::new(p, 0)
        };
        let mut q = Fifo::pfifo(10).with_ecn_mark_at(Some(1));
        let mut d = Vec::new();
        q.enqueue(0, ect(), &mut d);
        q.enqueue(0, skb(20), &mut d); // not ECT: queued unmarked
        q.enqueue(0, ect(), &mut d);
        assert_eq!(q.stats().ce_marks, 1);
        let ecns: Vec<u8> = (0..3)
            .map(|_| q.dequeue(0, &mut d).unwrap().item.ecn())
            .collect();
        assert_eq!(ecns, vec![2, 0, 3]);
    }
}
