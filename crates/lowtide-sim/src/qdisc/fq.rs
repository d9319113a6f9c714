//! fq (net/sched/sch_fq.c): one queue per socket (an orphan packet goes under its
//! flow hash), at most `flow_limit` packets per flow and `limit` in all; flows
//! served round robin with a `quantum` of credit per round (a new flow starts with
//! `initial_quantum`), new flows before old ones; each packet leaves no earlier
//! than its earliest departure time (`skb->tstamp`, EDT) or, for a packet without
//! one, the flow's pacing at its socket's `sk_pacing_rate`; a departure time more
//! than `horizon` ahead is dropped (or capped with `horizon_drop` off).
//!
//! Simplified, as said in the README: one band (fq's three priority bands and
//! their weights: TCP's packets all go to band 1), no fast path (`q->internal`,
//! which lets a packet that is due when no flow is eligible skip the flow queues),
//! and no garbage collection of detached flows (Linux frees a flow idle for 3 s
//! when a lookup passes it; here a flow stays, idle, with its credit).

use super::{inet_ecn_set_ce, pop_head, Qdisc, QdiscStats, QueueItem, Skb, Verdict, PSCHED_MTU};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// sch_fq.c's parameters, with `fq_init`'s defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FqConfig {
    /// `limit` in packets (10000).
    pub limit: u32,
    /// `flow_limit`: packets per flow (100).
    pub flow_limit: u32,
    /// `quantum`: credit per round (2 * `psched_mtu`).
    pub quantum: u32,
    /// `initial_quantum`: a new flow's credit (10 * `psched_mtu`).
    pub initial_quantum: u32,
    /// `flow_refill_delay`: a flow idle this long gets a full quantum back (40 ms).
    pub flow_refill_delay_ns: u64,
    /// `maxrate`: a cap on every flow's rate (bytes/s; `u64::MAX`: none).
    pub flow_max_rate: u64,
    /// Pacing on (`rate_enable`, default on; `nopacing` turns it off).
    pub rate_enable: bool,
    /// `low_rate_threshold`: below this rate (bytes/s) a flow sends one packet per
    /// pacing slot (550 kbit/s).
    pub low_rate_threshold: u64,
    /// `horizon` (10 s).
    pub horizon_ns: u64,
    /// `horizon_drop`: drop packets beyond the horizon (on), or cap their time.
    pub horizon_drop: bool,
    /// `orphan_mask`: buckets of orphan packets' hashes (1023).
    pub orphan_mask: u32,
    /// `ce_threshold`: mark ECT packets sent this late (default ~4295 s: never).
    pub ce_threshold_ns: u64,
}

impl Default for FqConfig {
    fn default() -> Self {
        FqConfig {
            limit: 10_000,
            flow_limit: 100,
            quantum: 2 * PSCHED_MTU,
            initial_quantum: 10 * PSCHED_MTU,
            flow_refill_delay_ns: 40_000_000,
            flow_max_rate: u64::MAX,
            rate_enable: true,
            low_rate_threshold: 550_000 / 8,
            horizon_ns: 10_000_000_000,
            horizon_drop: true,
            orphan_mask: 1024 - 1,
            ce_threshold_ns: 1000 * u32::MAX as u64,
        }
    }
}

impl FqConfig {
    /// Defaults for a device whose `psched_mtu` is `mtu`.
    pub fn for_mtu(mtu: u32) -> FqConfig {
        FqConfig {
            quantum: 2 * mtu,
            initial_quantum: 10 * mtu,
            ..FqConfig::default()
        }
    }
}

/// Where a flow is (`fq_flow_is_detached`, `fq_flow_is_throttled`, or on a list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// On no list; emptied at this time (`f->age`).
    Detached(u64),
    /// On the new or old list.
    Listed,
    /// In the delayed tree until `time_next_packet`.
    Throttled,
}

/// `struct fq_flow`.
struct Flow<T> {
    /// Packets by time to send (a packet earlier than the tail is inserted in
    /// order, as Linux's per-flow rb-tree keeps it).
    queue: VecDeque<(u64, Skb<T>)>,
    credit: i32,
    time_next_packet: u64,
    place: Place,
}

/// The fq qdisc.
pub struct Fq<T> {
    cfg: FqConfig,
    flows: Vec<Flow<T>>,
    index: FxHashMap<u64, u32>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    /// Throttled flows by (time_next_packet, order of throttling).
    delayed: BinaryHeap<Reverse<(u64, u64, u32)>>,
    delayed_seq: u64,
    time_next_delayed_flow: u64,
    inactive_flows: u32,
    stat_throttled: u64,
    stat_flows_plimit: u64,
    stat_horizon_drops: u64,
    stat_horizon_caps: u64,
    stat_pkts_too_long: u64,
    stat_ce_mark: u64,
    stats: QdiscStats,
}

impl<T: QueueItem> Fq<T> {
    /// `fq_init` with `cfg`.
    pub fn new(cfg: FqConfig) -> Fq<T> {
        Fq {
            cfg,
            flows: Vec::new(),
            index: FxHashMap::default(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            delayed: BinaryHeap::new(),
            delayed_seq: 0,
            time_next_delayed_flow: u64::MAX,
            inactive_flows: 0,
            stat_throttled: 0,
            stat_flows_plimit: 0,
            stat_horizon_drops: 0,
            stat_horizon_caps: 0,
            stat_pkts_too_long: 0,
            stat_ce_mark: 0,
            stats: QdiscStats::default(),
        }
    }

    /// Flows allocated (`flows`), and those with no packet (`inactive_flows`).
    pub fn flow_counts(&self) -> (usize, u32) {
        (self.flows.len(), self.inactive_flows)
    }

    /// The flow key of `fq_classify`: the socket, or for a packet no full socket
    /// owns, its hash under `orphan_mask` with the low bit set (socket ids are
    /// shifted left, so the two never collide).
    fn key(&self, skb: &Skb<T>) -> u64 {
        match skb.sk {
            Some(sk) => sk << 1,
            None => (((skb.hash & self.cfg.orphan_mask) as u64) << 1) | 1,
        }
    }

    /// `fq_classify`: the flow of `skb`, created (detached, with
    /// `initial_quantum` of credit) if it has none.
    fn classify(&mut self, now: u64, skb: &Skb<T>) -> u32 {
        let key = self.key(skb);
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.flows.len() as u32;
        self.flows.push(Flow {
            queue: VecDeque::new(),
            credit: self.cfg.initial_quantum as i32,
            time_next_packet: 0,
            place: Place::Detached(now),
        });
        self.index.insert(key, i);
        self.inactive_flows += 1;
        i
    }

    /// `fq_flow_set_throttled`.
    fn set_throttled(&mut self, idx: u32) {
        let f = &mut self.flows[idx as usize];
        f.place = Place::Throttled;
        self.delayed
            .push(Reverse((f.time_next_packet, self.delayed_seq, idx)));
        self.delayed_seq += 1;
        self.stat_throttled += 1;
        self.time_next_delayed_flow = self.time_next_delayed_flow.min(f.time_next_packet);
    }

    /// `fq_check_throttled`: flows whose time has come go to the old list.
    fn check_throttled(&mut self, now: u64) {
        if self.time_next_delayed_flow > now {
            return;
        }
        self.time_next_delayed_flow = u64::MAX;
        while let Some(&Reverse((t, _, idx))) = self.delayed.peek() {
            if t > now {
                self.time_next_delayed_flow = t;
                break;
            }
            self.delayed.pop();
            self.flows[idx as usize].place = Place::Listed;
            self.old_flows.push_back(idx);
        }
    }

    /// Drops the arriving `skb` (`qdisc_drop`).
    fn drop_arrival(&mut self, skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> Verdict {
        self.stats.drops += 1;
        dropped.push(skb);
        Verdict::Drop
    }

    /// The pacing after a packet of `plen` bytes left flow `idx` at `now` (the end
    /// of `fq_dequeue`): the flow's next packet waits `plen / rate`.
    fn pace(&mut self, now: u64, idx: u32, skb_tstamp: u64, pacing_rate: u64, mut plen: u32) {
        let mut rate = self.cfg.flow_max_rate;
        let f = &mut self.flows[idx as usize];
        // With an EDT time the sender paces: only a qdisc max rate applies.
        if skb_tstamp == 0 {
            rate = rate.min(pacing_rate);
            if rate <= self.cfg.low_rate_threshold {
                f.credit = 0;
            } else {
                plen = plen.max(self.cfg.quantum);
                if f.credit > 0 {
                    return;
                }
            }
        }
        if rate == u64::MAX {
            return;
        }
        let len = plen as u64 * 1_000_000_000;
        let mut len = len.checked_div(rate).unwrap_or(len);
        // The socket's rate may change: clamp the delay to a second.
        if len > 1_000_000_000 {
            len = 1_000_000_000;
            self.stat_pkts_too_long += 1;
        }
        // Credit up to half of it for lateness of this dequeue.
        if f.time_next_packet != 0 {
            len -= (len / 2).min(now.saturating_sub(f.time_next_packet));
        }
        f.time_next_packet = now + len;
    }
}

impl<T: QueueItem> Qdisc<T> for Fq<T> {
    fn kind(&self) -> &'static str {
        "fq"
    }

    fn classifies(&self) -> bool {
        true
    }

    /// `fq_enqueue`.
    fn enqueue(&mut self, now: u64, mut skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> Verdict {
        if self.stats.qlen >= self.cfg.limit {
            return self.drop_arrival(skb, dropped);
        }
        let time_to_send = match skb.tstamp {
            0 => now,
            t if t > now.saturating_add(self.cfg.horizon_ns) => {
                if self.cfg.horizon_drop {
                    self.stat_horizon_drops += 1;
                    return self.drop_arrival(skb, dropped);
                }
                self.stat_horizon_caps += 1;
                skb.tstamp = now + self.cfg.horizon_ns;
                skb.tstamp
            }
            t => t,
        };
        let idx = self.classify(now, &skb);
        let (quantum, refill) = (self.cfg.quantum as i32, self.cfg.flow_refill_delay_ns);
        if self.flows[idx as usize].queue.len() >= self.cfg.flow_limit as usize {
            self.stat_flows_plimit += 1;
            return self.drop_arrival(skb, dropped);
        }
        let f = &mut self.flows[idx as usize];
        if let Place::Detached(age) = f.place {
            f.place = Place::Listed;
            self.new_flows.push_back(idx);
            if now > age + refill {
                f.credit = f.credit.max(quantum);
            }
        }
        if f.queue.is_empty() {
            self.inactive_flows -= 1;
        }
        self.stats.backlog += skb.len as u64;
        self.stats.qlen += 1;
        // flow_queue_add: in order of time to send, after packets of the same time.
        match f.queue.back() {
            Some((t, _)) if time_to_send < *t => {
                let at = f.queue.partition_point(|(t, _)| *t <= time_to_send);
                f.queue.insert(at, (time_to_send, skb));
            }
            _ => f.queue.push_back((time_to_send, skb)),
        }
        Verdict::Success
    }

    /// `fq_dequeue`.
    fn dequeue(&mut self, now: u64, _dropped: &mut Vec<Skb<T>>) -> Option<Skb<T>> {
        if self.stats.qlen == 0 {
            return None;
        }
        self.check_throttled(now);
        loop {
            let (from_new, idx) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (true, i),
                (None, Some(&i)) => (false, i),
                // Nothing eligible: the watchdog fires at time_next_delayed_flow.
                (None, None) => return None,
            };
            let f = &mut self.flows[idx as usize];
            if f.credit <= 0 {
                f.credit += self.cfg.quantum as i32;
                pop_head(&mut self.new_flows, &mut self.old_flows, from_new);
                self.old_flows.push_back(idx);
                continue;
            }
            let Some(&(time_to_send, _)) = f.queue.front() else {
                pop_head(&mut self.new_flows, &mut self.old_flows, from_new);
                // Force a pass through the old flows, so that none starves.
                match from_new {
                    true => self.old_flows.push_back(idx),
                    false => f.place = Place::Detached(now),
                }
                continue;
            };
            let time_next_packet = time_to_send.max(f.time_next_packet);
            if now < time_next_packet {
                pop_head(&mut self.new_flows, &mut self.old_flows, from_new);
                f.time_next_packet = time_next_packet;
                self.set_throttled(idx);
                continue;
            }
            let (_, mut skb) = f.queue.pop_front().expect("peeked");
            self.stats.qlen -= 1;
            self.stats.backlog -= skb.len as u64;
            let late = now as i128 - time_next_packet as i128 - self.cfg.ce_threshold_ns as i128;
            if late > 0 && inet_ecn_set_ce(&mut skb.item) {
                self.stat_ce_mark += 1;
                self.stats.ce_marks += 1;
            }
            if f.queue.is_empty() {
                self.inactive_flows += 1;
            }
            f.credit -= skb.len as i32;
            if self.cfg.rate_enable {
                self.pace(now, idx, skb.tstamp, skb.pacing_rate, skb.len);
            }
            return Some(skb);
        }
    }

    fn next_ready(&self) -> Option<u64> {
        (self.stats.qlen > 0 && self.time_next_delayed_flow != u64::MAX)
            .then_some(self.time_next_delayed_flow)
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn xstats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("flows", self.flows.len() as u64),
            ("inactive", self.inactive_flows as u64),
            ("throttled", self.stat_throttled),
            ("flows_plimit", self.stat_flows_plimit),
            ("pkts_too_long", self.stat_pkts_too_long),
            ("horizon_drops", self.stat_horizon_drops),
            ("horizon_caps", self.stat_horizon_caps),
            ("ce_mark", self.stat_ce_mark),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_pkt::pkt;
    use super::*;

    const MS: u64 = 1_000_000;

    fn fq(cfg: FqConfig) -> Fq<Vec<u8>> {
        Fq::new(cfg)
    }

    /// A packet of socket `sk` with departure time `tstamp`.
    fn edt(len: usize, sk: u64, tstamp: u64) -> Skb<Vec<u8>> {
        let mut s = pkt(len, 0, sk as u32, Some(sk));
        s.tstamp = tstamp;
        s
    }

    /// fq_enqueue: at most flow_limit packets per flow (others still get in), and
    /// limit in all.
    #[test]
    fn per_flow_and_total_limits() {
        let mut q = fq(FqConfig {
            limit: 150,
            ..FqConfig::default()
        });
        let mut d = Vec::new();
        for _ in 0..100 {
            assert_eq!(q.enqueue(0, edt(100, 1, 0), &mut d), Verdict::Success);
        }
        assert_eq!(q.enqueue(0, edt(100, 1, 0), &mut d), Verdict::Drop);
        for _ in 0..50 {
            assert_eq!(q.enqueue(0, edt(100, 2, 0), &mut d), Verdict::Success);
        }
        assert_eq!(q.enqueue(0, edt(100, 3, 0), &mut d), Verdict::Drop, "limit");
        let xs: std::collections::HashMap<_, _> = q.xstats().into_iter().collect();
        assert_eq!(
            (xs["flows_plimit"], q.stats().drops, q.stats().qlen),
            (1, 2, 150)
        );
    }

    /// fq_packet_beyond_horizon: a departure time more than `horizon` ahead is
    /// dropped, or with horizon_drop off, sent at now + horizon.
    #[test]
    fn horizon_drops_or_caps() {
        let mut q = fq(FqConfig::default());
        let mut d = Vec::new();
        let now = 5 * MS;
        assert_eq!(
            q.enqueue(now, edt(100, 1, now + 10_000 * MS + 1), &mut d),
            Verdict::Drop
        );
        assert_eq!(
            q.enqueue(now, edt(100, 1, now + 10_000 * MS), &mut d),
            Verdict::Success
        );
        let mut q = fq(FqConfig {
            horizon_ns: 100 * MS,
            horizon_drop: false,
            ..FqConfig::default()
        });
        assert_eq!(
            q.enqueue(now, edt(100, 1, now + 900 * MS), &mut d),
            Verdict::Success
        );
        assert!(q.dequeue(now, &mut d).is_none());
        assert_eq!(q.next_ready(), Some(now + 100 * MS));
        let s = q.dequeue(now + 100 * MS, &mut d).unwrap();
        assert_eq!(s.tstamp, now + 100 * MS);
    }

    /// EDT: a packet leaves no earlier than its timestamp; the flow is throttled
    /// meanwhile and others go; the watchdog time is the earliest such packet.
    #[test]
    fn edt_timestamps_hold_packets() {
        let mut q = fq(FqConfig::default());
        let mut d = Vec::new();
        q.enqueue(0, edt(100, 1, 3 * MS), &mut d);
        q.enqueue(0, edt(100, 2, 0), &mut d);
        q.enqueue(0, edt(100, 1, 2 * MS), &mut d); // earlier than its flow's tail
        let s = q.dequeue(0, &mut d).unwrap();
        assert_eq!(s.sk, Some(2));
        assert!(q.dequeue(MS, &mut d).is_none());
        assert_eq!(
            q.next_ready(),
            Some(2 * MS),
            "the earliest packet of flow 1"
        );
        assert_eq!(q.dequeue(2 * MS, &mut d).unwrap().tstamp, 2 * MS);
        assert!(q.dequeue(2 * MS, &mut d).is_none());
        assert_eq!(q.dequeue(3 * MS, &mut d).unwrap().tstamp, 3 * MS);
        let xs: std::collections::HashMap<_, _> = q.xstats().into_iter().collect();
        assert!(xs["throttled"] >= 2);
    }

    /// Without EDT, a flow is paced at its socket's sk_pacing_rate once its credit
    /// is spent: over a second it sends about that rate.
    #[test]
    fn pacing_at_the_socket_rate() {
        let mut q = fq(FqConfig::default());
        let mut d = Vec::new();
        let rate = 1_000_000u64; // bytes/s
        let mut now = 0;
        let mut sent = 0u64;
        while now < 1_000 * MS {
            while q.stats().qlen < 50 {
                let mut s = pkt(1500, 0, 9, Some(9));
                s.pacing_rate = rate;
                q.enqueue(now, s, &mut d);
            }
            match q.dequeue(now, &mut d) {
                Some(s) => sent += s.len as u64,
                None => now = q.next_ready().expect("throttled"),
            }
        }
        // The initial quantum (10 * 1514) goes at once, then the rate holds.
        let want = rate + 10 * 1514;
        assert!(
            sent.abs_diff(want) < 2 * 3028,
            "sent {sent}, want about {want}"
        );
        // Below low_rate_threshold each packet waits its own slot.
        let mut q = fq(FqConfig::default());
        for _ in 0..3 {
            let mut s = pkt(1500, 0, 9, Some(9));
            s.pacing_rate = 50_000;
            q.enqueue(0, s, &mut d);
        }
        assert!(q.dequeue(0, &mut d).is_some());
        assert!(q.dequeue(0, &mut d).is_none());
        assert_eq!(q.next_ready(), Some(1500 * 1_000_000_000 / 50_000));
    }

    /// Round robin: backlogged flows share by bytes, a new flow starting with
    /// initial_quantum and then a quantum per round.
    #[test]
    fn round_robin_shares_bytes() {
        let mut q = fq(FqConfig::default());
        let mut d = Vec::new();
        for _ in 0..100 {
            q.enqueue(0, edt(1500, 1, 0), &mut d);
            q.enqueue(0, edt(500, 2, 0), &mut d);
        }
        let mut bytes = [0u64; 3];
        let mut first = Vec::new();
        for _ in 0..130 {
            let s = q.dequeue(0, &mut d).unwrap();
            bytes[s.sk.unwrap() as usize] += s.len as u64;
            first.push(s.sk.unwrap());
        }
        // Flow 1 spends its 15,140 bytes of initial credit first: 11 packets.
        assert_eq!(first.iter().take_while(|&&f| f == 1).count(), 11);
        assert!(bytes[1].abs_diff(bytes[2]) <= 2 * 3028, "{bytes:?}");
    }

    /// fq_classify: packets of no socket share a flow per orphan_mask bucket.
    #[test]
    fn orphans_by_masked_hash() {
        let mut q = fq(FqConfig::default());
        let mut d = Vec::new();
        q.enqueue(0, pkt(100, 0, 5, None), &mut d);
        q.enqueue(0, pkt(100, 0, 5 + 1024, None), &mut d);
        q.enqueue(0, pkt(100, 0, 6, None), &mut d);
        q.enqueue(0, pkt(100, 0, 5, Some(5)), &mut d);
        assert_eq!(q.flow_counts(), (3, 0));
    }

    /// A flow that stayed detached for flow_refill_delay gets at least a quantum
    /// of credit back when it comes back; back sooner, it keeps what it had.
    #[test]
    fn refill_after_idle() {
        // Flow 1 spends all but 28 bytes of a quantum at 0 and is detached at 1 ms
        // (a dequeue pass that finds it empty on the old list).
        let detached = || {
            let mut q = fq(FqConfig {
                initial_quantum: 0,
                ..FqConfig::default()
            });
            let mut d = Vec::new();
            q.enqueue(0, edt(3000, 1, 0), &mut d);
            assert!(q.dequeue(0, &mut d).is_some());
            q.enqueue(MS, edt(100, 2, 0), &mut d);
            assert_eq!(q.dequeue(MS, &mut d).unwrap().sk, Some(2));
            assert_eq!(q.flows[0].place, Place::Detached(MS));
            assert_eq!(q.flows[0].credit, 28);
            q
        };
        let mut d = Vec::new();
        let mut q = detached();
        q.enqueue(10 * MS, edt(100, 1, 0), &mut d);
        assert_eq!(q.flows[0].credit, 28, "back within 40 ms: no refill");
        let mut q = detached();
        q.enqueue(100 * MS, edt(100, 1, 0), &mut d);
        assert_eq!(q.flows[0].credit, 3028, "back after 40 ms: a quantum");
    }
}
