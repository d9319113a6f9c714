//! fq_codel (net/sched/sch_fq_codel.c): packets hashed into `flows` queues, each
//! under its own CoDel; flows served by deficit round robin of `quantum` bytes,
//! new flows (those that were empty) before old ones; over `limit` packets or
//! `memory_limit` bytes of `truesize`, up to `drop_batch` packets are dropped from
//! the head of the flow with the largest backlog, until half of it is gone.

use super::codel::{codel_dequeue, CodelParams, CodelQueue, CodelStats, CodelVars};
use super::{pop_head, NetXmit, Qdisc, QdiscStats, QueueItem, Skb, PSCHED_MTU};
use std::collections::VecDeque;

/// sch_fq_codel.c's parameters, with `fq_codel_init`'s defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FqCodelConfig {
    /// `limit` in packets (10240).
    pub limit: u32,
    /// `flows`: the number of hash buckets (1024).
    pub flows: u32,
    /// `quantum`: bytes a flow may send per round (`psched_mtu`, 1514).
    pub quantum: u32,
    /// `memory_limit`: bytes of `truesize` queued (32 MB).
    pub memory_limit: u32,
    /// `drop_batch`: most packets one overflow drops (64).
    pub drop_batch: u32,
    /// CoDel's target, interval, ce_threshold, and `ecn` (on by default here).
    pub params: CodelParams,
}

impl Default for FqCodelConfig {
    fn default() -> Self {
        FqCodelConfig {
            limit: 10 * 1024,
            flows: 1024,
            quantum: PSCHED_MTU,
            memory_limit: 32 << 20,
            drop_batch: 64,
            params: CodelParams {
                ecn: true,
                ..CodelParams::default()
            },
        }
    }
}

/// `struct fq_codel_flow`.
struct Flow<T> {
    queue: VecDeque<Skb<T>>,
    deficit: i32,
    cvars: CodelVars,
    /// On the new or old list (`!list_empty(&flow->flowchain)`).
    listed: bool,
}

/// The fq_codel qdisc.
pub struct FqCodel<T> {
    cfg: FqCodelConfig,
    flows: Vec<Flow<T>>,
    /// Bytes queued per flow (`q->backlogs`).
    backlogs: Vec<u32>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    memory_usage: u64,
    drop_overlimit: u64,
    drop_overmemory: u64,
    new_flow_count: u64,
    cstats: CodelStats,
    stats: QdiscStats,
}

/// One flow as CoDel sees it (`dequeue_func`): taking a packet lowers the flow's
/// backlog, the memory in use and the qdisc's length and backlog.
struct FlowPart<'a, T> {
    queue: &'a mut VecDeque<Skb<T>>,
    flow_backlog: &'a mut u32,
    memory_usage: &'a mut u64,
    stats: &'a mut QdiscStats,
}

impl<T> CodelQueue<T> for FlowPart<'_, T> {
    fn dequeue_head(&mut self) -> Option<Skb<T>> {
        let s = self.queue.pop_front()?;
        *self.flow_backlog -= s.len;
        *self.memory_usage -= s.truesize as u64;
        self.stats.qlen -= 1;
        self.stats.backlog -= s.len as u64;
        Some(s)
    }
    fn backlog(&self) -> u64 {
        self.stats.backlog
    }
}

impl<T: QueueItem> FqCodel<T> {
    /// `fq_codel_init` with `cfg` (`flows` within 1..=65536, `quantum` at least 256,
    /// `drop_batch` at least 1, as `fq_codel_change` takes them).
    pub fn new(mut cfg: FqCodelConfig) -> FqCodel<T> {
        cfg.flows = cfg.flows.clamp(1, 65536);
        cfg.quantum = cfg.quantum.max(256);
        cfg.drop_batch = cfg.drop_batch.max(1);
        cfg.memory_limit = cfg.memory_limit.min(1 << 31);
        FqCodel {
            flows: (0..cfg.flows)
                .map(|_| Flow {
                    queue: VecDeque::new(),
                    deficit: 0,
                    cvars: CodelVars::default(),
                    listed: false,
                })
                .collect(),
            backlogs: vec![0; cfg.flows as usize],
            cfg,
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            memory_usage: 0,
            drop_overlimit: 0,
            drop_overmemory: 0,
            new_flow_count: 0,
            cstats: CodelStats::default(),
            stats: QdiscStats::default(),
        }
    }

    /// `fq_codel_hash`: `reciprocal_scale(skb_get_hash(skb), flows)`.
    pub fn classify(&self, hash: u32) -> u32 {
        ((hash as u64 * self.cfg.flows as u64) >> 32) as u32
    }

    /// The flows on the new and on the old list (`new_flows_len`, `old_flows_len`).
    pub fn list_lens(&self) -> (usize, usize) {
        (self.new_flows.len(), self.old_flows.len())
    }

    /// Flow `idx`'s deficit and CoDel state.
    pub fn flow_state(&self, idx: u32) -> (i32, CodelVars) {
        let f = &self.flows[idx as usize];
        (f.deficit, f.cvars)
    }

    /// `fq_codel_drop`: drops from the head of the fattest flow until half its
    /// backlog is gone or `max_packets` are; returns the flow.
    fn drop_fattest(&mut self, max_packets: u32, dropped: &mut Vec<Skb<T>>) -> u32 {
        let (mut idx, mut maxbacklog) = (0usize, 0u32);
        for (i, &b) in self.backlogs.iter().enumerate() {
            if b > maxbacklog {
                (idx, maxbacklog) = (i, b);
            }
        }
        let threshold = maxbacklog >> 1;
        let flow = &mut self.flows[idx];
        let (mut len, mut mem, mut i) = (0u32, 0u64, 0u32);
        while let Some(s) = flow.queue.pop_front() {
            len += s.len;
            mem += s.truesize as u64;
            dropped.push(s);
            i += 1;
            if i >= max_packets || len >= threshold {
                break;
            }
        }
        // Tell CoDel to increase its signal strength too.
        flow.cvars.count = flow.cvars.count.wrapping_add(i);
        self.backlogs[idx] -= len;
        self.memory_usage -= mem;
        self.stats.drops += i as u64;
        self.stats.backlog -= len as u64;
        self.stats.qlen -= i;
        idx as u32
    }
}

impl<T: QueueItem> Qdisc<T> for FqCodel<T> {
    fn kind(&self) -> &'static str {
        "fq_codel"
    }

    fn classifies(&self) -> bool {
        true
    }

    /// `fq_codel_enqueue`.
    fn enqueue(&mut self, _now: u64, skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> NetXmit {
        let idx = self.classify(skb.hash);
        let (len, truesize) = (skb.len, skb.truesize as u64);
        let quantum = self.cfg.quantum as i32;
        let flow = &mut self.flows[idx as usize];
        flow.queue.push_back(skb);
        self.backlogs[idx as usize] += len;
        self.stats.backlog += len as u64;
        if !flow.listed {
            flow.listed = true;
            flow.deficit = quantum;
            self.new_flows.push_back(idx);
            self.new_flow_count += 1;
        }
        self.memory_usage += truesize;
        let memory_limited = self.memory_usage > self.cfg.memory_limit as u64;
        self.stats.qlen += 1;
        if self.stats.qlen <= self.cfg.limit && !memory_limited {
            return NetXmit::Success;
        }
        let prev_qlen = self.stats.qlen;
        // Dropping one packet would need this linear search per packet: drop up
        // to half of the fat flow's backlog at once.
        let fat = self.drop_fattest(self.cfg.drop_batch, dropped);
        let n = (prev_qlen - self.stats.qlen) as u64;
        self.drop_overlimit += n;
        if memory_limited {
            self.drop_overmemory += n;
        }
        match fat == idx {
            true => NetXmit::Cn,
            false => NetXmit::Success,
        }
    }

    /// `fq_codel_dequeue`.
    fn dequeue(&mut self, now: u64, dropped: &mut Vec<Skb<T>>) -> Option<Skb<T>> {
        loop {
            let (from_new, idx) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (true, i),
                (None, Some(&i)) => (false, i),
                (None, None) => return None,
            };
            let flow = &mut self.flows[idx as usize];
            if flow.deficit <= 0 {
                flow.deficit += self.cfg.quantum as i32;
                pop_head(&mut self.new_flows, &mut self.old_flows, from_new);
                self.old_flows.push_back(idx);
                continue;
            }
            let before = dropped.len();
            let mut part = FlowPart {
                queue: &mut flow.queue,
                flow_backlog: &mut self.backlogs[idx as usize],
                memory_usage: &mut self.memory_usage,
                stats: &mut self.stats,
            };
            let p = &self.cfg.params;
            let skb = codel_dequeue(
                &mut part,
                p,
                &mut flow.cvars,
                &mut self.cstats,
                now,
                dropped,
            );
            self.stats.drops += (dropped.len() - before) as u64;
            self.stats.ce_marks = self.cstats.ecn_mark + self.cstats.ce_mark;
            let Some(skb) = skb else {
                pop_head(&mut self.new_flows, &mut self.old_flows, from_new);
                // Force a pass through the old flows, so that none starves.
                if from_new && !self.old_flows.is_empty() {
                    self.old_flows.push_back(idx);
                } else {
                    flow.listed = false;
                }
                continue;
            };
            flow.deficit -= skb.len as i32;
            return Some(skb);
        }
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn xstats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("maxpacket", self.cstats.maxpacket as u64),
            ("drop_overlimit", self.drop_overlimit),
            ("drop_overmemory", self.drop_overmemory),
            ("new_flow_count", self.new_flow_count),
            ("ecn_mark", self.cstats.ecn_mark),
            ("ce_mark", self.cstats.ce_mark),
            ("memory_used", self.memory_usage),
            ("new_flows_len", self.new_flows.len() as u64),
            ("old_flows_len", self.old_flows.len() as u64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_pkt::pkt;
    use super::*;

    /// The hash that lands in bucket `idx` of 1024.
    fn bucket(idx: u32) -> u32 {
        idx << 22
    }

    fn q(cfg: FqCodelConfig) -> FqCodel<Vec<u8>> {
        FqCodel::new(cfg)
    }

    /// Buckets served by `n` dequeues at time 0.
    fn order(q: &mut FqCodel<Vec<u8>>, n: usize) -> Vec<u32> {
        let mut d = Vec::new();
        (0..n)
            .filter_map(|_| q.dequeue(0, &mut d).map(|s| q.classify(s.hash)))
            .collect()
    }

    /// fq_codel_hash: reciprocal_scale(hash, flows), the top bits of the hash.
    #[test]
    fn classify_scales_the_hash() {
        let q = q(FqCodelConfig::default());
        assert_eq!(q.classify(0), 0);
        assert_eq!(q.classify(u32::MAX), 1023);
        assert_eq!(q.classify(bucket(7) | 0x3f_ffff), 7);
    }

    /// fq_codel_dequeue: a flow that was empty goes on the new list and is served
    /// before the old flows; one that used its deficit goes to the old list's tail.
    #[test]
    fn new_flows_before_old_flows() {
        let mut q = q(FqCodelConfig::default());
        let mut d = Vec::new();
        for _ in 0..20 {
            q.enqueue(0, pkt(1000, 0, bucket(1), None), &mut d);
        }
        // Flow 1 sends two packets (deficit 1514 - 2000 < 0) and turns old.
        assert_eq!(order(&mut q, 2), vec![1, 1]);
        q.dequeue(0, &mut d); // moves flow 1 to the old list, serves it again
        assert_eq!(q.list_lens(), (0, 1));
        q.enqueue(0, pkt(1000, 0, bucket(2), None), &mut d);
        assert_eq!(q.list_lens(), (1, 1));
        assert_eq!(order(&mut q, 1), vec![2], "the new flow goes first");
        // Flow 2 is empty: it passes through the old list once (no starvation of
        // the old flows by flows that keep coming back new).
        assert_eq!(order(&mut q, 1), vec![1]);
        assert_eq!(q.list_lens(), (0, 2));
        let xs: std::collections::HashMap<_, _> = q.xstats().into_iter().collect();
        assert_eq!(xs["new_flow_count"], 2);
    }

    /// Deficit round robin: a flow sends while its deficit is positive, then gets
    /// a quantum more at the tail of the old list; long-run bytes are equal.
    #[test]
    fn quantum_deficit_round_robin() {
        let mut q = q(FqCodelConfig::default());
        let mut d = Vec::new();
        for _ in 0..200 {
            q.enqueue(0, pkt(300, 0, bucket(1), None), &mut d);
            q.enqueue(0, pkt(700, 0, bucket(2), None), &mut d);
        }
        let o = order(&mut q, 120);
        // First turns: deficit 1514 is spent by ceil(1514/300) = 6 packets of 300
        // and by ceil(1514/700) = 3 packets of 700.
        assert_eq!(&o[..9], &[1, 1, 1, 1, 1, 1, 2, 2, 2]);
        let (mut b1, mut b2) = (0i64, 0i64);
        for (i, f) in o.iter().enumerate() {
            match f {
                1 => b1 += 300,
                _ => b2 += 700,
            }
            if i > 0 && o[i - 1] != *f && *f == 1 {
                // At the start of each round the two have sent within a quantum.
                assert!((b1 - b2).abs() <= 1514 + 700, "round at {i}: {b1} vs {b2}");
            }
        }
        let (d1, _) = q.flow_state(q.classify(bucket(1)));
        assert!(d1 <= 1514);
    }

    /// fq_codel_drop: over `limit`, drop from the head of the fattest flow until
    /// half its backlog is gone (at most `drop_batch`); NET_XMIT_CN if that flow is
    /// the arriving packet's; CoDel's count grows by the drops.
    #[test]
    fn overlimit_batch_drops_from_the_fattest_flow() {
        let mut q = q(FqCodelConfig {
            limit: 10,
            ..FqCodelConfig::default()
        });
        let mut d = Vec::new();
        for _ in 0..8 {
            q.enqueue(0, pkt(1000, 0, bucket(1), None), &mut d);
        }
        q.enqueue(0, pkt(1000, 0, bucket(2), None), &mut d);
        q.enqueue(0, pkt(1000, 0, bucket(2), None), &mut d);
        assert!(d.is_empty());
        // An 11th packet, of flow 2: flow 1 (8000 B) is the fattest; 4 packets
        // reach half of it.
        assert_eq!(
            q.enqueue(0, pkt(1000, 0, bucket(2), None), &mut d),
            NetXmit::Success
        );
        assert_eq!(d.len(), 4);
        assert!(d.iter().all(|s| q.classify(s.hash) == 1));
        assert_eq!(q.flow_state(1).1.count, 4);
        let s = q.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (7, 7000, 4));
        // Now flow 1 is fattest again only if it grows: make it, and send to it.
        for _ in 0..3 {
            q.enqueue(0, pkt(1000, 0, bucket(1), None), &mut d);
        }
        d.clear();
        assert_eq!(
            q.enqueue(0, pkt(1000, 0, bucket(1), None), &mut d),
            NetXmit::Cn
        );
        assert!(!d.is_empty());
    }

    /// drop_batch caps one overflow's drops; memory_limit counts truesize.
    #[test]
    fn drop_batch_and_memory_limit() {
        let mut q = q(FqCodelConfig {
            limit: 100,
            drop_batch: 2,
            memory_limit: 10_000,
            ..FqCodelConfig::default()
        });
        let mut d = Vec::new();
        for _ in 0..10 {
            q.enqueue(0, pkt(1000, 0, bucket(3), None), &mut d);
        }
        assert!(d.is_empty(), "10,000 bytes: at the limit, not over");
        assert_eq!(
            q.enqueue(0, pkt(1000, 0, bucket(3), None), &mut d),
            NetXmit::Cn
        );
        assert_eq!(d.len(), 2, "half of 11 packets, but at most drop_batch");
        let xs: std::collections::HashMap<_, _> = q.xstats().into_iter().collect();
        assert_eq!((xs["drop_overlimit"], xs["drop_overmemory"]), (2, 2));
        assert_eq!(xs["memory_used"], 9000);
    }

    /// Each flow has its own CoDel: a standing queue in one flow is dropped while a
    /// sparse flow's packets, never waiting, pass.
    #[test]
    fn codel_per_flow() {
        let mut q = q(FqCodelConfig {
            params: CodelParams {
                ecn: false,
                ..CodelParams::default()
            },
            ..FqCodelConfig::default()
        });
        let mut d = Vec::new();
        let ms = 1_000_000u64;
        for _ in 0..2000 {
            q.enqueue(0, pkt(1500, 0, bucket(1), None), &mut d);
        }
        let mut sparse_sent = 0;
        for k in 0..1000u64 {
            let now = k * ms / 2;
            let mut s = pkt(100, 0, bucket(2), None);
            s.enqueued_at = now;
            if k % 10 == 0 {
                q.enqueue(now, s, &mut d);
            }
            if let Some(s) = q.dequeue(now, &mut d) {
                sparse_sent += (q.classify(s.hash) == 2) as u32;
            }
        }
        assert_eq!(sparse_sent, 100);
        assert!(!d.is_empty() && d.iter().all(|s| q.classify(s.hash) == 1));
    }
}
