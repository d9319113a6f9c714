//! sch_htb.c: the Hierarchical Token Bucket, with one level of leaf classes under
//! one root class (`tc qdisc add ... root handle 1: htb default D`, `tc class add
//! ... parent 1: classid 1:1 htb rate R`, `tc class add ... parent 1:1 classid 1:N
//! htb rate r ceil c`). Each class has two token buckets, `rate` with `burst` bytes
//! and `ceil` with `cburst`: a class within its rate can send (`HTB_CAN_SEND`),
//! one over its rate but within its ceil may borrow from its parent
//! (`HTB_MAY_BORROW`), one over its ceil cannot (`HTB_CANT_SEND`). Dequeue serves
//! the leaves that can send first (level 0), lowest `prio` first and round robin
//! by `quantum` bytes (a deficit per level) among equals, then the leaves that
//! borrow, if the root can lend (level 1). A class's mode changes only when it is
//! charged for a packet or when the time its shortfall takes has passed (its entry
//! in the wait queue, `htb_do_events`). `htb_hysteresis` is 0, Linux's default.
//!
//! A packet goes to the leaf whose classid its `skb->priority` names, else to the
//! first leaf with a filter it matches (`tc filter ... u32 match ip src|dst ADDR
//! flowid 1:N`, written here as the class's `src=`/`dst=`), else to the `default`
//! leaf, else to the direct queue, which is served before any class and unshaped.
//!
//! Defaults as iproute2's q_htb.c and `htb_change_class`: `ceil` = `rate`, `burst`
//! = `rate / HZ + 1600` bytes with tc's HZ from /proc/net/psched, 10^9 on a
//! high-resolution-timer kernel (so about 1,600 bytes), `quantum` = `rate / r2q`
//! (r2q 10) kept within 1,000 and 200,000 bytes, leaves a pfifo of `txqueuelen`
//! packets, the direct queue `txqueuelen` packets (at least 2).

use super::fifo::Fifo;
use super::{NetXmit, Qdisc, QdiscStats, QueueItem, Skb};
use std::net::IpAddr;

/// `TC_HTB_NUMPRIO`: priorities 0 (served first) to 7.
pub const TC_HTB_NUMPRIO: u8 = 8;
/// iproute2's `mtu` for the default bursts (q_htb.c: "eth packet len").
const BURST_MTU: u64 = 1600;
/// tc's `get_hz()` on a kernel with high-resolution timers.
const PSCHED_HZ: u64 = 1_000_000_000;
/// `mbuffer`: at most 60 s of tokens are counted for an idle class.
const MBUFFER_NS: i64 = 60_000_000_000;

/// A filter steering packets to a class (`u32 match ip src|dst ADDR/32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HtbMatch {
    /// The packet's source address.
    Src(IpAddr),
    /// The packet's destination address.
    Dst(IpAddr),
}

/// One class as `tc class add ... htb` configures it (rates in bytes per second,
/// bursts in bytes; 0: iproute2's default).
#[derive(Debug, Clone, PartialEq)]
pub struct HtbClassConfig {
    /// The minor of its classid (`1:minor`).
    pub minor: u16,
    /// `rate`: what it may always send.
    pub rate: u64,
    /// `ceil`: what it may send borrowing (0: `rate`).
    pub ceil: u64,
    /// `burst` (bytes at `rate`).
    pub burst: u64,
    /// `cburst` (bytes at `ceil`).
    pub cburst: u64,
    /// `prio` (0 to 7): lower is served first.
    pub prio: u8,
    /// `quantum` (bytes; 0: `rate / r2q`).
    pub quantum: u32,
    /// The leaf pfifo's `limit` (packets; 0: `txqueuelen`).
    pub limit: u32,
    /// Filters that steer packets here.
    pub filters: Vec<HtbMatch>,
}

impl HtbClassConfig {
    /// A class of `rate` bytes/s with every other parameter by default.
    pub fn new(minor: u16, rate: u64) -> HtbClassConfig {
        HtbClassConfig {
            minor,
            rate,
            ceil: 0,
            burst: 0,
            cburst: 0,
            prio: 0,
            quantum: 0,
            limit: 0,
            filters: Vec::new(),
        }
    }
}

/// The qdisc: its root class `1:1` and its leaves.
#[derive(Debug, Clone, PartialEq)]
pub struct HtbConfig {
    /// The root class (minor 1 by convention; its prio and filters unused).
    pub root: HtbClassConfig,
    /// The leaves, children of the root.
    pub leaves: Vec<HtbClassConfig>,
    /// `default`: the minor of the class unclassified packets go to (0: none,
    /// they go to the direct queue).
    pub default: u16,
    /// `r2q`: `quantum = rate / r2q`.
    pub r2q: u32,
    /// `direct_qlen` (packets; 0: `txqueuelen`).
    pub direct_qlen: u32,
}

impl HtbConfig {
    /// Checks what `tc` and `htb_change_class` refuse.
    pub fn check(&self) -> Result<(), String> {
        if self.root.rate == 0 {
            return Err("rate is required (the root class 1:1)".into());
        }
        if self.leaves.is_empty() {
            return Err("at least one class=MINOR:rate=R[:...]".into());
        }
        for c in &self.leaves {
            if c.rate == 0 {
                return Err(format!("class {}: rate is required", c.minor));
            }
            if c.minor == self.root.minor || c.minor == 0 {
                return Err(format!("class {}: minor taken by the root", c.minor));
            }
            if self.leaves.iter().filter(|d| d.minor == c.minor).count() > 1 {
                return Err(format!("class {}: given twice", c.minor));
            }
        }
        Ok(())
    }
}

/// `enum htb_cmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HtbMode {
    /// `HTB_CANT_SEND`: over its ceil.
    CantSend,
    /// `HTB_MAY_BORROW`: over its rate, within its ceil.
    MayBorrow,
    /// `HTB_CAN_SEND`: within its rate.
    CanSend,
}

/// `struct htb_class`: a bucket pair and, for a leaf, its queue.
struct Class<T> {
    classid: u32,
    level: u8,
    rate: u64,
    ceil: u64,
    /// Bucket depths in ns at `rate` and `ceil`.
    buffer: i64,
    cbuffer: i64,
    tokens: i64,
    ctokens: i64,
    t_c: u64,
    mode: HtbMode,
    /// When it is due to be looked at again (its wait-queue key), while not
    /// `CanSend`.
    pq_key: Option<u64>,
    prio: u8,
    quantum: i64,
    deficit: [i64; 2],
    filters: Vec<HtbMatch>,
    q: Fifo<T>,
    lends: u64,
    borrows: u64,
    drops: u64,
}

/// `psched_l2t_ns`: the time `len` bytes take at `rate` bytes per second.
fn l2t_ns(rate: u64, len: u64) -> i64 {
    (len as u128 * 1_000_000_000 / rate.max(1) as u128).min(i64::MAX as u128) as i64
}

impl<T: QueueItem> Class<T> {
    fn new(c: &HtbClassConfig, level: u8, r2q: u32, txqueuelen: u32) -> Class<T> {
        let ceil = if c.ceil == 0 { c.rate } else { c.ceil };
        let burst = |b: u64, r: u64| if b == 0 { r / PSCHED_HZ + BURST_MTU } else { b };
        let (buffer, cbuffer) = (
            l2t_ns(c.rate, burst(c.burst, c.rate)),
            l2t_ns(ceil, burst(c.cburst, ceil)),
        );
        let quantum = match c.quantum {
            0 => (c.rate / r2q.max(1) as u64).clamp(1000, 200_000) as i64,
            q => q as i64,
        };
        let limit = if c.limit == 0 { txqueuelen } else { c.limit };
        Class {
            classid: 0x1_0000 | c.minor as u32,
            level,
            rate: c.rate,
            ceil,
            buffer,
            cbuffer,
            tokens: buffer,
            ctokens: cbuffer,
            t_c: 0,
            mode: HtbMode::CanSend,
            pq_key: None,
            prio: c.prio.min(TC_HTB_NUMPRIO - 1),
            quantum,
            deficit: [0; 2],
            filters: c.filters.clone(),
            q: Fifo::pfifo(limit),
            lends: 0,
            borrows: 0,
            drops: 0,
        }
    }

    /// `htb_class_mode` at `t_c + diff`: the mode, and for one that is not
    /// `CanSend` the time until its shortfall is made up.
    fn class_mode(&self, diff: i64) -> (HtbMode, i64) {
        let toks = self.ctokens + diff;
        if toks < 0 {
            return (HtbMode::CantSend, -toks);
        }
        let toks = self.tokens + diff;
        if toks >= 0 {
            return (HtbMode::CanSend, diff);
        }
        (HtbMode::MayBorrow, -toks)
    }

    /// `htb_accnt_tokens` / `htb_accnt_ctokens`: `diff` ns of tokens earned (capped
    /// at the bucket), `bytes` spent, the debt bounded by `mbuffer`.
    fn accnt(toks: i64, diff: i64, bucket: i64, rate: u64, bytes: u64) -> i64 {
        let t = (toks + diff).min(bucket) - l2t_ns(rate, bytes);
        if t <= -MBUFFER_NS {
            1 - MBUFFER_NS
        } else {
            t
        }
    }

    /// Whether the packet with IP header `head` matches one of its filters.
    fn matches(&self, head: &[u8]) -> bool {
        let Some((src, dst)) = ip_addrs(head) else {
            return false;
        };
        (self.filters.iter()).any(|m| {
            matches!(*m, HtbMatch::Src(a) if a == src) || matches!(*m, HtbMatch::Dst(a) if a == dst)
        })
    }
}

/// The source and destination of an IPv4 or IPv6 header.
fn ip_addrs(h: &[u8]) -> Option<(IpAddr, IpAddr)> {
    match h.first()? >> 4 {
        4 if h.len() >= 20 => {
            let a = |o: usize| IpAddr::from(<[u8; 4]>::try_from(&h[o..o + 4]).unwrap_or_default());
            Some((a(12), a(16)))
        }
        6 if h.len() >= 40 => {
            let a =
                |o: usize| IpAddr::from(<[u8; 16]>::try_from(&h[o..o + 16]).unwrap_or_default());
            Some((a(8), a(24)))
        }
        _ => None,
    }
}

/// The htb qdisc (`struct htb_sched`). Class 0 is the root, the others its leaves.
pub struct Htb<T> {
    classes: Vec<Class<T>>,
    default: u16,
    direct: Fifo<T>,
    direct_pkts: u64,
    /// `ptr` of row 0 (per prio) and of the root's feeds (per prio): the classid
    /// the round robin is at (`htb_id_find_next_upper` finds the first at or after).
    ptr: [[u32; TC_HTB_NUMPRIO as usize]; 2],
    overlimits: u64,
    drops: u64,
}

impl<T: QueueItem> Htb<T> {
    /// `htb_init` and `htb_change_class` for each class, on a device of
    /// `txqueuelen` packets, at time 0.
    pub fn new(cfg: &HtbConfig, txqueuelen: u32) -> Htb<T> {
        let mut classes = vec![Class::new(&cfg.root, 1, cfg.r2q, txqueuelen)];
        let mut leaves: Vec<&HtbClassConfig> = cfg.leaves.iter().collect();
        leaves.sort_by_key(|c| c.minor); // the rows are in classid order
        classes.extend(
            leaves
                .into_iter()
                .map(|c| Class::new(c, 0, cfg.r2q, txqueuelen)),
        );
        Htb {
            classes,
            default: cfg.default,
            direct: Fifo::pfifo(if cfg.direct_qlen == 0 {
                txqueuelen.max(2)
            } else {
                cfg.direct_qlen
            }),
            direct_pkts: 0,
            ptr: [[0; TC_HTB_NUMPRIO as usize]; 2],
            overlimits: 0,
            drops: 0,
        }
    }

    /// The mode of class `1:minor`, if it exists.
    pub fn mode(&self, minor: u16) -> Option<HtbMode> {
        let id = 0x1_0000 | minor as u32;
        self.classes
            .iter()
            .find(|c| c.classid == id)
            .map(|c| c.mode)
    }

    /// `htb_classify`: the leaf (index) for `skb`, or `None` for the direct queue.
    fn classify(&self, skb: &Skb<T>) -> Option<usize> {
        if skb.priority == 0x1_0000 {
            return None; // X:0, the direct flow
        }
        let leaf = |i: &usize| self.classes[*i].level == 0;
        let by_prio = (0..self.classes.len()).find(|&i| self.classes[i].classid == skb.priority);
        if let Some(i) = by_prio.filter(leaf) {
            return Some(i);
        }
        let head = skb.item.ip_head();
        if let Some(i) = (1..self.classes.len()).find(|&i| self.classes[i].matches(head)) {
            return Some(i);
        }
        let def = 0x1_0000 | self.default as u32;
        (0..self.classes.len()).find(|&i| self.classes[i].classid == def && leaf(&i))
    }

    /// `htb_change_class_mode` with the mode `class_mode` computed at `now`;
    /// the class waits (its `pq_key`) unless it can send.
    fn change_mode(&mut self, i: usize, now: u64, diff: i64) {
        let (mode, wait) = self.classes[i].class_mode(diff);
        let c = &mut self.classes[i];
        if mode != c.mode && mode == HtbMode::CantSend {
            self.overlimits += 1;
        }
        c.mode = mode;
        // htb_add_to_wait_tree: now + delay, never now itself.
        c.pq_key = (mode != HtbMode::CanSend).then_some(now + wait.max(1) as u64);
    }

    /// `htb_do_events`: every class whose wait is over has its mode recomputed.
    fn do_events(&mut self, now: u64) {
        for i in 0..self.classes.len() {
            if self.classes[i].pq_key.is_some_and(|k| k <= now) {
                let diff = (now - self.classes[i].t_c).min(MBUFFER_NS as u64) as i64;
                self.change_mode(i, now, diff);
            }
        }
    }

    /// `htb_charge_class`: the leaf `i` sent `bytes` at `level`; it and the root pay.
    fn charge(&mut self, i: usize, level: u8, bytes: u64, now: u64) {
        for j in [i, 0] {
            let c = &mut self.classes[j];
            let diff = (now.saturating_sub(c.t_c)).min(MBUFFER_NS as u64) as i64;
            if c.level >= level {
                if c.level == level {
                    c.lends += 1;
                }
                c.tokens = Class::<T>::accnt(c.tokens, diff, c.buffer, c.rate, bytes);
            } else {
                c.borrows += 1;
                c.tokens += diff; // "we moved t_c; update tokens"
            }
            c.ctokens = Class::<T>::accnt(c.ctokens, diff, c.cbuffer, c.ceil, bytes);
            c.t_c = now;
            let old = c.mode;
            let (mode, _) = c.class_mode(0);
            if mode != old {
                self.change_mode(j, now, 0);
            }
        }
    }

    /// The leaves of `prio` that may send at `level`, in classid order: at level 0
    /// those within their rate (row 0), at level 1 those borrowing from a root that
    /// can lend (the root's feed).
    fn row(&self, level: u8, prio: u8) -> impl Iterator<Item = usize> + '_ {
        let lend = level == 0 || self.classes[0].mode == HtbMode::CanSend;
        let want = match level {
            0 => HtbMode::CanSend,
            _ => HtbMode::MayBorrow,
        };
        (1..self.classes.len()).filter(move |&i| {
            let c = &self.classes[i];
            lend && c.prio == prio && c.mode == want && c.q.stats().qlen > 0
        })
    }

    /// `htb_lookup_leaf`: the row's class at or after its pointer, else its first.
    fn lookup_leaf(&self, level: u8, prio: u8) -> Option<usize> {
        let at = self.ptr[level as usize][prio as usize];
        let mut row = self.row(level, prio);
        let first = row.next()?;
        let found = (self.classes[first].classid >= at).then_some(first);
        found
            .or_else(|| row.find(|&i| self.classes[i].classid >= at))
            .or(Some(first))
    }

    /// `htb_dequeue_tree`: the row's current leaf sends its head; past its quantum
    /// the round robin moves on (`htb_next_rb_node`).
    fn dequeue_tree(
        &mut self,
        level: u8,
        prio: u8,
        now: u64,
        dropped: &mut Vec<Skb<T>>,
    ) -> Option<Skb<T>> {
        let i = self.lookup_leaf(level, prio)?;
        let skb = self.classes[i].q.dequeue(now, dropped)?;
        let c = &mut self.classes[i];
        let l = level as usize;
        c.deficit[l] -= skb.len as i64;
        if c.deficit[l] < 0 {
            c.deficit[l] += c.quantum;
            self.ptr[l][prio as usize] = c.classid + 1;
        }
        self.charge(i, level, skb.len as u64, now);
        Some(skb)
    }
}

impl<T: QueueItem> Qdisc<T> for Htb<T> {
    fn kind(&self) -> &'static str {
        "htb"
    }

    /// `htb_enqueue`: into the class `htb_classify` picks, or the direct queue.
    fn enqueue(&mut self, now: u64, skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> NetXmit {
        let Some(i) = self.classify(&skb) else {
            let v = self.direct.enqueue(now, skb, dropped);
            match v {
                NetXmit::Drop => self.drops += 1,
                _ => self.direct_pkts += 1,
            }
            return v;
        };
        let v = self.classes[i].q.enqueue(now, skb, dropped);
        if v == NetXmit::Drop {
            self.drops += 1;
            self.classes[i].drops += 1;
        }
        v
    }

    /// `htb_dequeue`: the direct queue first, then level 0 (classes within their
    /// rate) and level 1 (classes borrowing), each by prio, after the events due.
    fn dequeue(&mut self, now: u64, dropped: &mut Vec<Skb<T>>) -> Option<Skb<T>> {
        if let Some(skb) = self.direct.dequeue(now, dropped) {
            return Some(skb);
        }
        self.do_events(now);
        for level in 0..2 {
            for prio in 0..TC_HTB_NUMPRIO {
                if let Some(skb) = self.dequeue_tree(level, prio, now, dropped) {
                    return Some(skb);
                }
            }
        }
        None
    }

    /// The watchdog: the earliest class event while packets wait.
    fn next_ready(&self) -> Option<u64> {
        if self.stats().qlen == 0 {
            return None;
        }
        self.classes.iter().filter_map(|c| c.pq_key).min()
    }

    fn stats(&self) -> QdiscStats {
        let mut s = QdiscStats {
            drops: self.drops,
            overlimits: self.overlimits,
            ..self.direct.stats()
        };
        for c in &self.classes[1..] {
            let q = c.q.stats();
            s.qlen += q.qlen;
            s.backlog += q.backlog;
        }
        s
    }

    fn xstats(&self) -> Vec<(&'static str, u64)> {
        let (lends, borrows) =
            (self.classes[1..].iter()).fold((0, 0), |(l, b), c| (l + c.lends, b + c.borrows));
        vec![
            ("direct_packets_stat", self.direct_pkts),
            ("lends", lends),
            ("borrows", borrows),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::test_pkt::pkt;

    const MS: u64 = 1_000_000;

    /// Root 1:1 at 1,000,000 bytes/s (8 Mbit/s); leaves 1:10 and 1:20 (minors 0x10
    /// and 0x20, as tc reads them) each with `rate` and `ceil` (bytes/s); packets
    /// to 10.0.0.10 go to 1:10, the rest to the default 1:20.
    fn htb(r10: (u64, u64), r20: (u64, u64)) -> Htb<Vec<u8>> {
        let leaf = |minor, (rate, ceil): (u64, u64)| HtbClassConfig {
            ceil,
            ..HtbClassConfig::new(minor, rate)
        };
        let mut a = leaf(0x10, r10);
        a.filters = vec![HtbMatch::Dst("10.0.0.10".parse().unwrap())];
        let cfg = HtbConfig {
            root: HtbClassConfig::new(1, 1_000_000),
            leaves: vec![a, leaf(0x20, r20)],
            default: 0x20,
            r2q: 10,
            direct_qlen: 0,
        };
        cfg.check().unwrap();
        Htb::new(&cfg, 1000)
    }

    /// A 1,000-byte packet to 10.0.0.`dst`.
    fn to(dst: u8) -> Skb<Vec<u8>> {
        let mut s = pkt(1000, 0, 0, None);
        s.item[16..20].copy_from_slice(&[10, 0, 0, dst]);
        s
    }

    /// Keeps both leaves backlogged for `secs` seconds, dequeuing whenever htb
    /// lets a packet go at a line rate of `line` bytes/s; bytes sent per leaf.
    fn run(q: &mut Htb<Vec<u8>>, line: u64, secs: u64, both: bool) -> (u64, u64) {
        let (mut now, mut sent) = (0u64, (0u64, 0u64));
        let d = &mut Vec::new();
        while now < secs * 1000 * MS {
            while q.classes[1].q.stats().qlen < 20 {
                q.enqueue(now, to(10), d);
            }
            while both && q.classes[2].q.stats().qlen < 20 {
                q.enqueue(now, to(20), d);
            }
            match q.dequeue(now, d) {
                Some(s) if s.item[19] == 10 => sent.0 += s.len as u64,
                Some(s) => sent.1 += s.len as u64,
                None => {
                    now = q.next_ready().unwrap();
                    continue;
                }
            }
            now += 1_000_000_000 * 1000 / line; // the serializer
        }
        sent
    }

    /// Classification: a filter, else the default class; with no default class,
    /// the direct queue, served first and unshaped.
    #[test]
    fn filters_then_default_then_direct() {
        let mut q = htb((300_000, 300_000), (300_000, 300_000));
        let d = &mut Vec::new();
        q.enqueue(0, to(10), d);
        q.enqueue(0, to(99), d);
        assert_eq!(
            (q.classes[1].q.stats().qlen, q.classes[2].q.stats().qlen),
            (1, 1)
        );
        q.default = 0;
        q.enqueue(0, to(99), d);
        assert_eq!(q.xstats()[0], ("direct_packets_stat", 1));
        assert_eq!(q.dequeue(0, d).unwrap().item[19], 99, "direct first");
        let mut p = to(99);
        p.priority = 0x1_0010; // skb->priority names class 1:10
        q.enqueue(0, p, d);
        assert_eq!(q.classes[1].q.stats().qlen, 2);
    }

    /// Each leaf within its rate and ceil: a leaf whose ceil equals its rate
    /// never exceeds it though the link is idle otherwise (no borrowing).
    #[test]
    fn ceil_equal_to_rate_caps_a_lone_class() {
        let mut q = htb((300_000, 300_000), (700_000, 700_000));
        let (a, b) = run(&mut q, 10_000_000, 2, false);
        let rate = a as f64 / 2.0;
        assert!((rate - 300_000.0).abs() < 3_000.0, "{rate}");
        assert_eq!(b, 0);
        assert!(q.stats().overlimits > 0);
    }

    /// Borrowing: a lone class with ceil at the root's rate takes the whole root
    /// rate (its own rate, then what it borrows); with both busy, each gets its
    /// rate and they share the rest by quantum.
    #[test]
    fn a_lone_class_borrows_up_to_its_ceil() {
        let mut q = htb((300_000, 1_000_000), (200_000, 1_000_000));
        let (a, _) = run(&mut q, 10_000_000, 2, false);
        let rate = a as f64 / 2.0;
        assert!((rate - 1_000_000.0).abs() < 10_000.0, "{rate}");
        assert!(q.xstats()[2].1 > 0, "borrows");
        let mut q = htb((300_000, 1_000_000), (200_000, 1_000_000));
        let (a, b) = run(&mut q, 10_000_000, 4, true);
        let (ra, rb) = (a as f64 / 4.0, b as f64 / 4.0);
        assert!((ra + rb - 1_000_000.0).abs() < 10_000.0, "{ra} {rb}");
        // Rates 300k and 200k, the 500k left shared in proportion to the quanta
        // (rate / r2q: 30,000 and 20,000 bytes): 600k and 400k.
        assert!((ra - 600_000.0).abs() < 15_000.0, "{ra}");
        assert!((rb - 400_000.0).abs() < 15_000.0, "{rb}");
    }

    /// The modes as `htb_class_mode` defines them: CanSend while tokens >= 0,
    /// MayBorrow while only ctokens >= 0, CantSend below; a class that cannot send
    /// is looked at again when its shortfall is made up.
    #[test]
    fn modes_follow_the_two_buckets() {
        use HtbMode::*;
        // Rate 100,000 B/s with the default burst, 1,600 bytes (16 ms); ceil
        // 200,000 B/s with 4,000 bytes (20 ms); a 500-byte packet costs 5 ms of
        // rate tokens, 2.5 ms of ceil tokens. The root's buckets are deep.
        let leaf = HtbClassConfig {
            ceil: 200_000,
            cburst: 4000,
            ..HtbClassConfig::new(0x10, 100_000)
        };
        let cfg = HtbConfig {
            root: HtbClassConfig {
                burst: 100_000,
                cburst: 100_000,
                ..HtbClassConfig::new(1, 1_000_000)
            },
            leaves: vec![leaf],
            default: 0x10,
            r2q: 10,
            direct_qlen: 0,
        };
        let mut q: Htb<Vec<u8>> = Htb::new(&cfg, 1000);
        let d = &mut Vec::new();
        for _ in 0..10 {
            q.enqueue(0, pkt(500, 0, 0, None), d);
        }
        let modes: Vec<HtbMode> = (0..9)
            .map(|_| {
                assert!(q.dequeue(0, d).is_some());
                q.mode(0x10).unwrap()
            })
            .collect();
        // Tokens 11, 6, 1, -4 ms: the fourth overdraws the rate; the next five
        // borrow (ctokens 10, 7.5, 5, 2.5, 0, -2.5 ms).
        let want = [CanSend, CanSend, CanSend, MayBorrow, MayBorrow];
        assert_eq!(modes[..5], want);
        assert_eq!(modes[5..], [MayBorrow, MayBorrow, MayBorrow, CantSend]);
        assert_eq!(q.xstats()[2], ("borrows", 5));
        assert_eq!(q.stats().overlimits, 1);
        // -2.5 ms of ceil tokens: 2.5 ms to wait.
        assert_eq!(q.next_ready(), Some(2_500_000));
        assert!(q.dequeue(2_499_999, d).is_none());
        // At 2.5 ms: ctokens 0 (MayBorrow again), the root lends the last packet.
        assert!(q.dequeue(2_500_000, d).is_some());
        assert_eq!((q.mode(0x10), q.xstats()[2].1), (Some(CantSend), 6));
        assert_eq!(q.next_ready(), None, "nothing left");
    }
}
