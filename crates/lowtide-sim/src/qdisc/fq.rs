//! fq (net/sched/sch_fq.c, as in Linux 6.18): one queue per socket (a packet of no
//! full socket, or of an unconnected one, goes under its flow hash), at most
//! `flow_limit` packets per flow and `limit` per priority band; three bands by
//! `skb->priority` served by weight, and in each, flows round robin with a
//! `quantum` of credit per round (a new flow starts with `initial_quantum`), new
//! flows before old ones; each packet leaves no earlier than its earliest departure
//! time (`skb->tstamp`, EDT) or, for a packet without one, the flow's pacing at its
//! socket's `sk_pacing_rate`; a departure time more than `horizon` ahead is dropped
//! (or capped with `horizon_drop` off). A packet that is due while no flow is
//! eligible takes the fast path (`q->internal`, at most 8 waiting), and a flow
//! detached for 3 s is freed when a lookup passes it (`fq_gc`).
//!
//! Kept out: the watchdog's `timer_slack` (the simulator fires it on time), the
//! `offload_horizon` (no simulated device offloads pacing: Linux refuses one above
//! the device's, 0 here) and `SO_MAX_PACING_RATE` of non-TCP sockets (the fast
//! path's third rule: every simulated socket is TCP).

use super::{inet_ecn_set_ce, NetXmit, Qdisc, QdiscStats, QueueItem, Skb, PSCHED_MTU};
use std::collections::{BTreeSet, VecDeque};

/// `FQ_BANDS`: priority bands.
pub const FQ_BANDS: usize = 3;

/// `sch_default_prio2band` (sch_generic.c): the band of each `skb->priority`
/// (`TC_PRIO_*`); TCP's default priority 0 (`TC_PRIO_BESTEFFORT`) is band 1.
pub const SCH_DEFAULT_PRIO2BAND: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];

/// `FQ_GC_AGE`: a flow detached this long is freed by the next lookup that passes
/// it (3 s).
const FQ_GC_AGE_NS: u64 = 3_000_000_000;
/// `FQ_GC_MAX`: flows freed per lookup.
const FQ_GC_MAX: usize = 8;
/// Packets the fast path queue may hold while others wait (`fq_fastpath_check`).
const FASTPATH_MAX: u32 = 8;
/// `GOLDEN_RATIO_64` of `hash_64`, which `hash_ptr` is on 64-bit.
const GOLDEN_RATIO_64: u64 = 0x61C8_8646_80B5_83EB;

/// sch_fq.c's parameters, with `fq_init`'s defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FqConfig {
    /// `limit` in packets per band (10000).
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
    /// `buckets`: log2 of the flow hash table's size (`fq_trees_log`, 10), which
    /// decides which flows a lookup passes for garbage collection.
    pub buckets_log: u32,
    /// `priomap`: the band of each priority ([`SCH_DEFAULT_PRIO2BAND`]).
    pub prio2band: [u8; 16],
    /// `weights`: each band's byte quantum per turn (589824, 196608, 65536).
    pub weights: [i32; FQ_BANDS],
    /// `offload_horizon` (0: see the module's doc).
    pub offload_horizon_ns: u64,
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
            buckets_log: 10,
            prio2band: SCH_DEFAULT_PRIO2BAND,
            weights: [9 << 16, 3 << 16, 1 << 16],
            offload_horizon_ns: 0,
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
    /// On a band's new or old list.
    Listed,
    /// In the delayed tree until `time_next_packet` (with its order of throttling).
    Throttled(u64),
    /// Freed by `fq_gc`; the slot waits for a new flow.
    Free,
}

/// A queued packet: `fq_skb_cb`'s time to send and band.
type Queued<T> = (u64, u8, Skb<T>);

/// `struct fq_flow`.
struct Flow<T> {
    /// Packets by time to send (a packet earlier than the tail is inserted in
    /// order, as Linux's per-flow rb-tree `t_root` beside the list keeps it).
    queue: VecDeque<Queued<T>>,
    /// `sk_hash` of the socket the flow was made for.
    socket_hash: u32,
    credit: i32,
    /// The band whose lists the flow goes on (`f->band`: the band of the last
    /// packet enqueued; 0 for a flow that never had one).
    band: u8,
    time_next_packet: u64,
    place: Place,
}

/// `struct fq_perband_flows`.
#[derive(Default)]
struct Band {
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    credit: i32,
    quantum: i32,
}

/// Where `fq_classify` puts a packet.
#[derive(Clone, Copy)]
enum Target {
    /// The fast path queue (`q->internal`).
    Internal,
    /// A flow.
    Flow(u32),
}

/// The fq qdisc.
pub struct Fq<T> {
    cfg: FqConfig,
    flows: Vec<Flow<T>>,
    /// Slots of freed flows.
    free: Vec<u32>,
    /// The hash table (`fq_root`): per bucket, (key, flow) sorted by key.
    buckets: Vec<Vec<(u64, u32)>>,
    bands: [Band; FQ_BANDS],
    /// `band_nr`: the band being served.
    band_nr: usize,
    band_pkt_count: [u32; FQ_BANDS],
    /// `q->internal`: the fast path queue.
    internal: VecDeque<(u64, Skb<T>)>,
    /// Throttled flows by (time_next_packet, order of throttling, flow).
    delayed: BTreeSet<(u64, u64, u32)>,
    delayed_seq: u64,
    time_next_delayed_flow: u64,
    unthrottle_latency_ns: u64,
    /// `q->flows`: flows allocated.
    nr_flows: u32,
    inactive_flows: u32,
    throttled_flows: u32,
    stat_gc_flows: u64,
    stat_fastpath_packets: u64,
    stat_throttled: u64,
    stat_flows_plimit: u64,
    stat_band_drops: [u64; FQ_BANDS],
    stat_horizon_drops: u64,
    stat_horizon_caps: u64,
    stat_pkts_too_long: u64,
    stat_ce_mark: u64,
    stats: QdiscStats,
}

impl<T: QueueItem> Fq<T> {
    /// `fq_init` with `cfg`.
    pub fn new(cfg: FqConfig) -> Fq<T> {
        let buckets_log = cfg.buckets_log.clamp(1, 18);
        let mut bands: [Band; FQ_BANDS] = Default::default();
        for (b, w) in bands.iter_mut().zip(cfg.weights) {
            b.quantum = w;
        }
        Fq {
            cfg: FqConfig { buckets_log, ..cfg },
            flows: Vec::new(),
            free: Vec::new(),
            buckets: vec![Vec::new(); 1 << buckets_log],
            bands,
            band_nr: 0,
            band_pkt_count: [0; FQ_BANDS],
            internal: VecDeque::new(),
            delayed: BTreeSet::new(),
            delayed_seq: 0,
            time_next_delayed_flow: u64::MAX,
            unthrottle_latency_ns: 0,
            nr_flows: 0,
            inactive_flows: 0,
            throttled_flows: 0,
            stat_gc_flows: 0,
            stat_fastpath_packets: 0,
            stat_throttled: 0,
            stat_flows_plimit: 0,
            stat_band_drops: [0; FQ_BANDS],
            stat_horizon_drops: 0,
            stat_horizon_caps: 0,
            stat_pkts_too_long: 0,
            stat_ce_mark: 0,
            stats: QdiscStats::default(),
        }
    }

    /// Flows allocated (`flows`), and those with no packet (`inactive_flows`).
    pub fn flow_counts(&self) -> (usize, u32) {
        (self.nr_flows as usize, self.inactive_flows)
    }

    /// The flow key of `fq_classify` and whether the packet keeps its socket
    /// (`skb->sk == sk`): its socket's; for a packet no full socket owns (a
    /// listener's SYN-ACK, a TIME-WAIT socket's ACK or reset), or one of an
    /// unconnected socket (`TCP_CLOSE`), its hash under `orphan_mask` with the low
    /// bit set (socket ids are shifted left, so the two never collide).
    fn key(&self, skb: &Skb<T>) -> (u64, bool) {
        let orphan = (((skb.hash & self.cfg.orphan_mask) as u64) << 1) | 1;
        match skb.sk {
            Some(_) if skb.sk_unconnected => (orphan, false),
            Some(sk) => (sk << 1, true),
            None => (orphan, false),
        }
    }

    /// `hash_ptr(sk, fq_trees_log)`.
    fn bucket(&self, key: u64) -> usize {
        (key.wrapping_mul(GOLDEN_RATIO_64) >> (64 - self.cfg.buckets_log)) as usize
    }

    /// `fq_fastpath_check`: a packet due now may skip the flows when the qdisc is
    /// empty, or when no flow is eligible and the fast path holds fewer than 8;
    /// not with a `maxrate`, nor from a non-TCP socket with `SO_MAX_PACING_RATE`
    /// (since Linux 4.20 TCP stamps every packet with its EDT time: a packet of
    /// a socket with a rate and no time is such a socket's).
    fn fastpath_check(&self, skb: &Skb<T>, time_to_send: u64, now: u64) -> bool {
        let horizon = now.saturating_add(self.cfg.offload_horizon_ns);
        if time_to_send > horizon {
            return false;
        }
        if self.stats.qlen != 0
            && (self.nr_flows != self.inactive_flows + self.throttled_flows
                || self.internal.len() as u32 >= FASTPATH_MAX
                || self.time_next_delayed_flow <= horizon)
        {
            return false;
        }
        let paced_by_fq = skb.sk.is_some() && skb.tstamp == 0 && skb.pacing_rate != u64::MAX;
        !paced_by_fq && self.cfg.flow_max_rate == u64::MAX
    }

    /// `fq_classify`: the fast path, or the flow of `skb`, created (detached, with
    /// `initial_quantum` of credit) if it has none.
    fn classify(&mut self, now: u64, skb: &Skb<T>, time_to_send: u64) -> Target {
        let (key, own) = self.key(skb);
        if self.fastpath_check(skb, time_to_send, now) {
            self.stat_fastpath_packets += 1;
            return Target::Internal;
        }
        let b = self.bucket(key);
        self.gc(now, b, key);
        let bucket = &self.buckets[b];
        if let Ok(at) = bucket.binary_search_by_key(&key, |e| e.0) {
            let idx = bucket[at].1;
            // A socket reallocated under the same identity starts afresh.
            if own && self.flows[idx as usize].socket_hash != skb.sk_hash {
                self.flows[idx as usize].credit = self.cfg.initial_quantum as i32;
                self.flows[idx as usize].socket_hash = skb.sk_hash;
                if let Place::Throttled(_) = self.flows[idx as usize].place {
                    self.unset_throttled(idx);
                }
                self.flows[idx as usize].time_next_packet = 0;
            }
            return Target::Flow(idx);
        }
        let flow = Flow {
            queue: VecDeque::new(),
            socket_hash: if own { skb.sk_hash } else { 0 },
            credit: self.cfg.initial_quantum as i32,
            band: 0,
            time_next_packet: 0,
            place: Place::Detached(now),
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.flows[i as usize] = flow;
                i
            }
            None => {
                self.flows.push(flow);
                self.flows.len() as u32 - 1
            }
        };
        let bucket = &mut self.buckets[b];
        let at = bucket.partition_point(|e| e.0 < key);
        bucket.insert(at, (key, idx));
        self.nr_flows += 1;
        self.inactive_flows += 1;
        Target::Flow(idx)
    }

    /// `fq_gc`: frees up to 8 flows detached for 3 s among those the lookup of
    /// `key` in bucket `b` passes (Linux walks an rb-tree; here a binary search
    /// over the bucket's sorted keys, the path of a balanced tree).
    fn gc(&mut self, now: u64, b: usize, key: u64) {
        let bucket = &self.buckets[b];
        let (mut lo, mut hi) = (0, bucket.len());
        let mut tofree: Vec<usize> = Vec::new();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (k, idx) = bucket[mid];
            if k == key {
                break;
            }
            if let Place::Detached(age) = self.flows[idx as usize].place {
                if now > age + FQ_GC_AGE_NS {
                    tofree.push(mid);
                    if tofree.len() == FQ_GC_MAX {
                        break;
                    }
                }
            }
            match k < key {
                true => lo = mid + 1,
                false => hi = mid,
            }
        }
        if tofree.is_empty() {
            return;
        }
        tofree.sort_unstable();
        for &at in tofree.iter().rev() {
            let (_, idx) = self.buckets[b].remove(at);
            self.flows[idx as usize].place = Place::Free;
            self.free.push(idx);
        }
        let n = tofree.len() as u32;
        self.nr_flows -= n;
        self.inactive_flows -= n;
        self.stat_gc_flows += n as u64;
    }

    /// `fq_flow_add_tail`: to the tail of the new or old list of the flow's band.
    fn add_tail(&mut self, idx: u32, new: bool) {
        let f = &mut self.flows[idx as usize];
        f.place = Place::Listed;
        let band = &mut self.bands[f.band as usize];
        match new {
            true => band.new_flows.push_back(idx),
            false => band.old_flows.push_back(idx),
        }
    }

    /// `fq_flow_set_throttled`.
    fn set_throttled(&mut self, idx: u32) {
        let f = &mut self.flows[idx as usize];
        f.place = Place::Throttled(self.delayed_seq);
        self.delayed
            .insert((f.time_next_packet, self.delayed_seq, idx));
        self.delayed_seq += 1;
        self.throttled_flows += 1;
        self.stat_throttled += 1;
        self.time_next_delayed_flow = self.time_next_delayed_flow.min(f.time_next_packet);
    }

    /// `fq_flow_unset_throttled`: out of the delayed tree, onto the old list.
    fn unset_throttled(&mut self, idx: u32) {
        let f = &self.flows[idx as usize];
        if let Place::Throttled(seq) = f.place {
            self.delayed.remove(&(f.time_next_packet, seq, idx));
        }
        self.throttled_flows -= 1;
        self.add_tail(idx, false);
    }

    /// `fq_check_throttled`: flows whose time has come go to the old list.
    fn check_throttled(&mut self, now: u64) {
        if self.time_next_delayed_flow > now.saturating_add(self.cfg.offload_horizon_ns) {
            return;
        }
        // The unthrottle latency EWMA (1/8), for diagnosing timer latency.
        let sample = now.wrapping_sub(self.time_next_delayed_flow) as i64;
        if sample > 0 {
            self.unthrottle_latency_ns -= self.unthrottle_latency_ns >> 3;
            self.unthrottle_latency_ns += sample as u64 >> 3;
        }
        let now = now.saturating_add(self.cfg.offload_horizon_ns);
        self.time_next_delayed_flow = u64::MAX;
        while let Some(&(t, _, idx)) = self.delayed.first() {
            if t > now {
                self.time_next_delayed_flow = t;
                break;
            }
            self.unset_throttled(idx);
        }
    }

    /// `fq_pband_head_select`: whether band `b` serves its new list (true) or its
    /// old list (false), if it has credit and a flow.
    fn head_select(&self, b: usize) -> Option<bool> {
        let band = &self.bands[b];
        if band.credit <= 0 {
            return None;
        }
        match (band.new_flows.is_empty(), band.old_flows.is_empty()) {
            (false, _) => Some(true),
            (true, false) => Some(false),
            (true, true) => None,
        }
    }

    /// The next band with credit once band `band_nr` has none or no flow (the
    /// retry loop of `fq_dequeue`: each band in turn gets its weight back, up to
    /// one weight); `None` after a round of bands with credit and no flow.
    fn next_band(&mut self, retry: &mut usize) -> Option<usize> {
        loop {
            *retry += 1;
            if *retry > FQ_BANDS {
                return None;
            }
            self.band_nr = (self.band_nr + 1) % FQ_BANDS;
            let band = &mut self.bands[self.band_nr];
            band.credit = (band.credit + band.quantum).min(band.quantum);
            if band.credit > 0 {
                return Some(self.band_nr);
            }
            *retry = 0;
        }
    }

    /// Drops the arriving `skb` (`qdisc_drop`).
    fn drop_arrival(&mut self, skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> NetXmit {
        self.stats.drops += 1;
        dropped.push(skb);
        NetXmit::Drop
    }

    /// `flow_queue_add` into `queue`: in order of time to send, after packets of
    /// the same time.
    fn queue_add<E>(queue: &mut VecDeque<E>, time_to_send: u64, e: E, time: impl Fn(&E) -> u64) {
        match queue.back() {
            Some(last) if time_to_send < time(last) => {
                let at = queue.partition_point(|x| time(x) <= time_to_send);
                queue.insert(at, e);
            }
            _ => queue.push_back(e),
        }
    }

    /// The pacing after a packet of `plen` bytes left flow `idx` at `now` (the end
    /// of `fq_dequeue`): the flow's next packet waits `plen / rate`.
    fn pace(&mut self, now: u64, idx: u32, skb: &Skb<T>, mut plen: u32) {
        let mut rate = self.cfg.flow_max_rate;
        let f = &mut self.flows[idx as usize];
        // With an EDT time the sender paces: only a qdisc max rate applies.
        if skb.tstamp == 0 {
            // An orphaned packet (`skb_orphan`) has no socket rate.
            if skb.sk.is_some() {
                rate = rate.min(skb.pacing_rate);
            }
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
            let drift = now.wrapping_sub(f.time_next_packet) as i64;
            if drift > 0 {
                len -= (len / 2).min(drift as u64);
            }
        }
        f.time_next_packet = now + len;
    }

    /// Takes the head packet of flow `idx` (the band serving it is `b`), updating
    /// the counts; the ECN mark of a packet sent `ce_threshold` late.
    fn dequeue_from(&mut self, now: u64, idx: u32, b: usize, time_next_packet: u64) -> Skb<T> {
        let f = &mut self.flows[idx as usize];
        let (_, band, mut skb) = f.queue.pop_front().expect("peeked");
        if f.queue.is_empty() {
            self.inactive_flows += 1;
        }
        self.stats.qlen -= 1;
        self.stats.backlog -= skb.len as u64;
        let late = now as i128 - time_next_packet as i128 - self.cfg.ce_threshold_ns as i128;
        if late > 0 && inet_ecn_set_ce(&mut skb.item) {
            self.stat_ce_mark += 1;
            self.stats.ce_marks += 1;
        }
        self.band_pkt_count[band as usize] -= 1;
        let plen = skb.len as i32;
        self.flows[idx as usize].credit -= plen;
        self.bands[b].credit -= plen;
        skb
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
    fn enqueue(&mut self, now: u64, mut skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> NetXmit {
        let band = self.cfg.prio2band[(skb.priority & 15) as usize] as usize % FQ_BANDS;
        if self.band_pkt_count[band] >= self.cfg.limit {
            self.stat_band_drops[band] += 1;
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
        let idx = match self.classify(now, &skb, time_to_send) {
            Target::Internal => {
                self.stats.backlog += skb.len as u64;
                self.stats.qlen += 1;
                Self::queue_add(&mut self.internal, time_to_send, (time_to_send, skb), |e| {
                    e.0
                });
                return NetXmit::Success;
            }
            Target::Flow(idx) => idx,
        };
        if self.flows[idx as usize].queue.len() >= self.cfg.flow_limit as usize {
            self.stat_flows_plimit += 1;
            return self.drop_arrival(skb, dropped);
        }
        if let Place::Detached(age) = self.flows[idx as usize].place {
            // On the lists of the flow's band so far (0 for a flow never used):
            // `f->band` is set below, as Linux does.
            self.add_tail(idx, true);
            let f = &mut self.flows[idx as usize];
            if now > age + self.cfg.flow_refill_delay_ns {
                f.credit = f.credit.max(self.cfg.quantum as i32);
            }
        }
        let f = &mut self.flows[idx as usize];
        f.band = band as u8;
        self.band_pkt_count[band] += 1;
        if f.queue.is_empty() {
            self.inactive_flows -= 1;
        }
        self.stats.backlog += skb.len as u64;
        self.stats.qlen += 1;
        Self::queue_add(
            &mut f.queue,
            time_to_send,
            (time_to_send, band as u8, skb),
            |e| e.0,
        );
        NetXmit::Success
    }

    /// `fq_dequeue`.
    fn dequeue(&mut self, now: u64, _dropped: &mut Vec<Skb<T>>) -> Option<Skb<T>> {
        if self.stats.qlen == 0 {
            return None;
        }
        if let Some((_, skb)) = self.internal.pop_front() {
            self.stats.qlen -= 1;
            self.stats.backlog -= skb.len as u64;
            return Some(skb);
        }
        self.check_throttled(now);
        let mut retry = 0;
        let mut b = self.band_nr;
        loop {
            let Some(from_new) = self.head_select(b) else {
                // Nothing eligible: the watchdog fires at time_next_delayed_flow.
                b = self.next_band(&mut retry)?;
                continue;
            };
            let band = &mut self.bands[b];
            let idx = *match from_new {
                true => band.new_flows.front(),
                false => band.old_flows.front(),
            }
            .expect("selected");
            retry = 0;
            let pop_head = |band: &mut Band| match from_new {
                true => band.new_flows.pop_front(),
                false => band.old_flows.pop_front(),
            };
            let f = &mut self.flows[idx as usize];
            if f.credit <= 0 {
                f.credit += self.cfg.quantum as i32;
                pop_head(band);
                self.add_tail(idx, false);
                continue;
            }
            let Some(&(time_to_send, _, _)) = f.queue.front() else {
                pop_head(band);
                // Force a pass through the old flows, so that none starves.
                match from_new {
                    true => self.add_tail(idx, false),
                    false => f.place = Place::Detached(now),
                }
                continue;
            };
            let time_next_packet = time_to_send.max(f.time_next_packet);
            if now.saturating_add(self.cfg.offload_horizon_ns) < time_next_packet {
                pop_head(band);
                f.time_next_packet = time_next_packet;
                self.set_throttled(idx);
                continue;
            }
            let skb = self.dequeue_from(now, idx, b, time_next_packet);
            if self.cfg.rate_enable {
                self.pace(now, idx, &skb, skb.len);
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

    /// `fq_dump_stats` (`struct tc_fq_qd_stats`'s names; the always-zero
    /// `highprio_packets`, `tcp_retrans` and `allocation_errors` left out).
    fn xstats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("flows", self.nr_flows as u64),
            ("inactive_flows", self.inactive_flows as u64),
            ("throttled_flows", self.throttled_flows as u64),
            ("gc_flows", self.stat_gc_flows),
            ("fastpath_packets", self.stat_fastpath_packets),
            ("throttled", self.stat_throttled),
            ("unthrottle_latency_ns", self.unthrottle_latency_ns),
            ("flows_plimit", self.stat_flows_plimit),
            ("pkts_too_long", self.stat_pkts_too_long),
            ("horizon_drops", self.stat_horizon_drops),
            ("horizon_caps", self.stat_horizon_caps),
            ("ce_mark", self.stat_ce_mark),
            ("band0_drops", self.stat_band_drops[0]),
            ("band1_drops", self.stat_band_drops[1]),
            ("band2_drops", self.stat_band_drops[2]),
            ("band0_pkts", self.band_pkt_count[0] as u64),
            ("band1_pkts", self.band_pkt_count[1] as u64),
            ("band2_pkts", self.band_pkt_count[2] as u64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_pkt::pkt;
    use super::*;
    use std::collections::HashMap;

    const MS: u64 = 1_000_000;

    fn fq(cfg: FqConfig) -> Fq<Vec<u8>> {
        Fq::new(cfg)
    }

    /// A `maxrate` too high to delay any packet: it turns the fast path off
    /// (`fq_fastpath_check`'s fourth rule), so that every packet goes to its flow.
    fn no_fastpath() -> FqConfig {
        FqConfig {
            flow_max_rate: u64::MAX - 1,
            ..FqConfig::default()
        }
    }

    /// A packet of socket `sk` with departure time `tstamp`.
    fn edt(len: usize, sk: u64, tstamp: u64) -> Skb<Vec<u8>> {
        let mut s = pkt(len, 0, sk as u32, Some(sk));
        s.tstamp = tstamp;
        s
    }

    fn xstats(q: &Fq<Vec<u8>>) -> HashMap<&'static str, u64> {
        q.xstats().into_iter().collect()
    }

    /// fq_enqueue: at most flow_limit packets per flow (others still get in), and
    /// limit per band; packets on the fast path count in neither.
    #[test]
    fn per_flow_and_band_limits() {
        let mut q = fq(FqConfig {
            limit: 150,
            ..FqConfig::default()
        });
        let mut d = Vec::new();
        // Nothing queued: the first 8 go by the fast path.
        for _ in 0..8 {
            assert_eq!(q.enqueue(0, edt(100, 1, 0), &mut d), NetXmit::Success);
        }
        assert_eq!(q.flow_counts(), (0, 0));
        for _ in 0..100 {
            assert_eq!(q.enqueue(0, edt(100, 1, 0), &mut d), NetXmit::Success);
        }
        assert_eq!(q.enqueue(0, edt(100, 1, 0), &mut d), NetXmit::Drop);
        for _ in 0..50 {
            assert_eq!(q.enqueue(0, edt(100, 2, 0), &mut d), NetXmit::Success);
        }
        assert_eq!(q.enqueue(0, edt(100, 3, 0), &mut d), NetXmit::Drop, "limit");
        // Another band has its own limit (priority 6, TC_PRIO_INTERACTIVE: band 0).
        let mut hi = edt(100, 4, 0);
        hi.priority = 6;
        assert_eq!(q.enqueue(0, hi, &mut d), NetXmit::Success);
        let xs = xstats(&q);
        assert_eq!(
            (xs["flows_plimit"], xs["band1_drops"], q.stats().drops),
            (1, 1, 2)
        );
        assert_eq!((xs["band0_pkts"], xs["band1_pkts"]), (1, 150));
        assert_eq!((xs["fastpath_packets"], q.stats().qlen), (8, 159));
    }

    /// fq_fastpath_check: a due packet skips the flows when nothing is queued, or
    /// when no flow is eligible (all empty or throttled) and fewer than 8 wait on
    /// the fast path; it leaves first.
    #[test]
    fn fast_path_when_no_flow_is_eligible() {
        let mut q = fq(FqConfig::default());
        let mut d = Vec::new();
        q.enqueue(0, edt(100, 1, MS), &mut d); // not due: flow 1
        q.enqueue(0, edt(200, 2, 0), &mut d); // flow 1 is eligible: flow 2
        assert_eq!(xstats(&q)["fastpath_packets"], 0);
        assert_eq!(q.dequeue(0, &mut d).unwrap().len, 200);
        assert!(q.dequeue(0, &mut d).is_none(), "flow 1 throttled");
        // Now no flow is eligible: due packets take the fast path.
        for sk in 3..20 {
            q.enqueue(0, edt(300, sk, 0), &mut d);
        }
        let xs = xstats(&q);
        assert_eq!((xs["fastpath_packets"], xs["throttled_flows"]), (8, 1));
        assert_eq!(q.flow_counts().0, 2 + 9, "the 9th and later go to flows");
        for _ in 0..8 {
            assert_eq!(q.dequeue(0, &mut d).unwrap().len, 300);
        }
        // A maxrate turns the fast path off.
        let mut q = fq(no_fastpath());
        q.enqueue(0, edt(100, 1, 0), &mut d);
        assert_eq!((xstats(&q)["fastpath_packets"], q.flow_counts().0), (0, 1));
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
            NetXmit::Drop
        );
        assert_eq!(
            q.enqueue(now, edt(100, 1, now + 10_000 * MS), &mut d),
            NetXmit::Success
        );
        assert_eq!(xstats(&q)["horizon_drops"], 1);
        let mut q = fq(FqConfig {
            horizon_ns: 100 * MS,
            horizon_drop: false,
            ..FqConfig::default()
        });
        assert_eq!(
            q.enqueue(now, edt(100, 1, now + 900 * MS), &mut d),
            NetXmit::Success
        );
        assert!(q.dequeue(now, &mut d).is_none());
        assert_eq!(q.next_ready(), Some(now + 100 * MS));
        let s = q.dequeue(now + 100 * MS, &mut d).unwrap();
        assert_eq!(s.tstamp, now + 100 * MS);
        assert_eq!(xstats(&q)["horizon_caps"], 1);
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
        // Dequeued 100 µs late: the unthrottle latency EWMA takes 1/8 of it.
        assert_eq!(q.dequeue(3 * MS + MS / 10, &mut d).unwrap().tstamp, 3 * MS);
        let xs = xstats(&q);
        assert!(xs["throttled"] >= 2);
        assert_eq!(xs["unthrottle_latency_ns"], 100_000 / 8);
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
        assert_eq!(xstats(&q)["fastpath_packets"], 0, "a rate and no EDT time");
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
        let mut q = fq(no_fastpath());
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

    /// Bands: backlogged flows of the three bands share by the bands' weights,
    /// 9 : 3 : 1 (priority 6 is band 0, 0 band 1, 1 band 2: sch_default_prio2band).
    #[test]
    fn bands_share_by_weight() {
        let mut q = fq(FqConfig {
            flow_limit: 100_000,
            ..no_fastpath()
        });
        let mut d = Vec::new();
        for (sk, prio) in [(1, 6), (2, 0), (3, 1)] {
            for _ in 0..9000 {
                let mut s = edt(1000, sk, 0);
                s.priority = prio;
                assert_eq!(q.enqueue(0, s, &mut d), NetXmit::Success);
            }
        }
        let mut bytes = [0u64; 4];
        for _ in 0..13 * 600 {
            let s = q.dequeue(0, &mut d).unwrap();
            bytes[s.sk.unwrap() as usize] += s.len as u64;
        }
        let unit = bytes[3] as f64;
        let (r1, r2) = (bytes[1] as f64 / unit, bytes[2] as f64 / unit);
        assert!(
            (r1 - 9.0).abs() < 0.2 && (r2 - 3.0).abs() < 0.1,
            "{bytes:?}"
        );
    }

    /// fq_classify: packets of no socket, or of an unconnected one, share a flow
    /// per orphan_mask bucket of their hash.
    #[test]
    fn orphans_and_unconnected_by_masked_hash() {
        let mut q = fq(no_fastpath());
        let mut d = Vec::new();
        q.enqueue(0, pkt(100, 0, 5, None), &mut d);
        q.enqueue(0, pkt(100, 0, 5 + 1024, None), &mut d);
        q.enqueue(0, pkt(100, 0, 6, None), &mut d);
        q.enqueue(0, pkt(100, 0, 5, Some(5)), &mut d);
        assert_eq!(q.flow_counts(), (3, 0));
        let mut udp = pkt(100, 0, 7, Some(5));
        udp.sk_unconnected = true;
        q.enqueue(0, udp, &mut d);
        let mut udp = pkt(100, 0, 5, Some(5));
        udp.sk_unconnected = true;
        q.enqueue(0, udp, &mut d);
        assert_eq!(q.flow_counts(), (4, 0), "hash 7 is new, hash 5 an orphan's");
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
                ..no_fastpath()
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

    /// Detaches the flows of sockets `sks` at `at`: each sends one packet, and
    /// the dequeue passes made for a backlogged socket's packets (an empty qdisc
    /// makes none) find them empty, on the new list and then on the old.
    fn detach_all(q: &mut Fq<Vec<u8>>, sks: std::ops::Range<u64>, at: u64) {
        let mut d = Vec::new();
        for sk in sks.clone() {
            q.enqueue(at, edt(100, sk, 0), &mut d);
        }
        for _ in 0..100 {
            q.enqueue(at, edt(1000, 1000, 0), &mut d);
        }
        while q.dequeue(at, &mut d).is_some() {}
        assert!(sks.into_iter().all(|sk| {
            let key = sk << 1;
            let b = &q.buckets[q.bucket(key)];
            let idx = b[b.binary_search_by_key(&key, |e| e.0).unwrap()].1;
            q.flows[idx as usize].place == Place::Detached(at)
        }));
    }

    /// fq_gc: a lookup frees the flows detached for more than 3 s that it passes
    /// (at most 8); a freed socket's flow comes back new, with initial_quantum.
    #[test]
    fn gc_frees_flows_detached_for_3_s() {
        let mut q = fq(FqConfig {
            buckets_log: 1,
            ..no_fastpath()
        });
        let mut d = Vec::new();
        detach_all(&mut q, 1..33, 0);
        assert_eq!(q.flow_counts(), (33, 33));
        q.enqueue(2_000 * MS, edt(100, 100, 0), &mut d);
        assert_eq!(xstats(&q)["gc_flows"], 0, "detached for 2 s: kept");
        while q.dequeue(2_000 * MS, &mut d).is_some() {}
        q.enqueue(3_001 * MS, edt(100, 101, 0), &mut d);
        let gc = xstats(&q)["gc_flows"];
        assert!((1..=8).contains(&gc), "{gc}");
        assert_eq!(q.flow_counts().0 as u64, 35 - gc);
        // More go as lookups pass them; each freed socket comes back as a new flow
        // (initial_quantum), the others keep what they had (one packet spent).
        for sk in 1..33 {
            q.enqueue(3_001 * MS, edt(100, sk, MS * 4000), &mut d);
        }
        let gc = xstats(&q)["gc_flows"];
        let credit = |sk: u64| {
            let b = &q.buckets[q.bucket(sk << 1)];
            q.flows[b[b.binary_search_by_key(&(sk << 1), |e| e.0).unwrap()].1 as usize].credit
        };
        let fresh = (1..33).filter(|&sk| credit(sk) == 10 * 1514).count() as u64;
        assert!(gc > 8 && (1..33).all(|sk| [15_140, 15_040].contains(&credit(sk))));
        assert_eq!(fresh, gc);
    }

    /// fq_classify: a socket id that comes back with another sk_hash (a socket
    /// reallocated) starts again with initial_quantum and no pacing delay.
    #[test]
    fn reallocated_socket_starts_afresh() {
        let mut q = fq(no_fastpath());
        let mut d = Vec::new();
        for _ in 0..20 {
            q.enqueue(0, edt(1500, 1, 0), &mut d);
        }
        for _ in 0..11 {
            q.dequeue(0, &mut d);
        }
        assert!(q.flows[0].credit < 0);
        let mut s = edt(1500, 1, 0);
        s.sk_hash = 77;
        q.enqueue(0, s, &mut d);
        assert_eq!((q.flows[0].credit, q.flows[0].socket_hash), (10 * 1514, 77));
    }
}
