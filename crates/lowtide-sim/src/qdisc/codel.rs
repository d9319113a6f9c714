//! CoDel (include/net/codel.h, codel_impl.h) and the `codel` qdisc built on it
//! (net/sched/sch_codel.c): packets whose sojourn time stays above `target` for
//! `interval` start a dropping state, in which the next drop (or CE mark, with
//! `ecn`) comes `interval / sqrt(count)` after the previous one.
//!
//! Time is CoDel's: nanoseconds >> 10 in a wrapping u32 (`codel_time_t`), and
//! `1/sqrt(count)` is kept as a Q0.16 number refined by one Newton step per drop,
//! as Linux does, so the drop times are Linux's to the 1024 ns unit.

use super::{inet_ecn_set_ce, NetXmit, Qdisc, QdiscStats, QueueItem, Skb, PSCHED_MTU};
use std::collections::VecDeque;

/// `codel_time_t`: ns >> [`CODEL_SHIFT`], wrapping.
pub type CodelTime = u32;
/// `CODEL_SHIFT`: CoDel's clock ticks every 1024 ns.
pub const CODEL_SHIFT: u32 = 10;
/// `CODEL_DISABLED_THRESHOLD`: no `ce_threshold`.
pub const CODEL_DISABLED_THRESHOLD: CodelTime = i32::MAX as u32;
/// `REC_INV_SQRT_SHIFT`: `rec_inv_sqrt` is the top 16 bits of a Q0.32 number.
const REC_INV_SQRT_SHIFT: u32 = 16;

/// `codel_get_time` of a time in ns.
pub fn codel_time(ns: u64) -> CodelTime {
    (ns >> CODEL_SHIFT) as u32
}

/// `codel_time_after(a, b)`: a is after b (serial number arithmetic).
fn after(a: CodelTime, b: CodelTime) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// `codel_time_after_eq(a, b)`.
fn after_eq(a: CodelTime, b: CodelTime) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// `struct codel_params`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CodelParams {
    /// `target` (default 5 ms).
    pub target: CodelTime,
    /// `ce_threshold`: mark CE on every ECT packet whose sojourn exceeds it
    /// (default [`CODEL_DISABLED_THRESHOLD`]).
    pub ce_threshold: CodelTime,
    /// `interval` (default 100 ms).
    pub interval: CodelTime,
    /// `mtu`: below this backlog (bytes) CoDel never drops (`psched_mtu`).
    pub mtu: u32,
    /// `ecn`: mark ECT packets instead of dropping them.
    pub ecn: bool,
}

impl Default for CodelParams {
    /// `codel_params_init`.
    fn default() -> Self {
        CodelParams {
            target: codel_time(5_000_000),
            ce_threshold: CODEL_DISABLED_THRESHOLD,
            interval: codel_time(100_000_000),
            mtu: PSCHED_MTU,
            ecn: false,
        }
    }
}

impl CodelParams {
    /// A time parameter given in µs, as `tc` passes it (`(us * 1000) >> 10`).
    pub fn from_us(us: u64) -> CodelTime {
        ((us * 1000) >> CODEL_SHIFT) as u32
    }
}

/// `struct codel_vars`: one queue's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodelVars {
    /// Drops (or marks) since the dropping state was entered.
    pub count: u32,
    /// `count` when the dropping state was last entered.
    pub lastcount: u32,
    /// In the dropping state.
    pub dropping: bool,
    /// `1/sqrt(count)`, Q0.16.
    pub rec_inv_sqrt: u16,
    /// When the sojourn went (or goes) above target for a whole interval; 0: below.
    pub first_above_time: CodelTime,
    /// Time of the next drop, or of the last one.
    pub drop_next: CodelTime,
    /// Sojourn time of the last dequeued packet.
    pub ldelay: CodelTime,
}

/// `struct codel_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodelStats {
    /// Largest packet seen.
    pub maxpacket: u32,
    /// Packets dropped by CoDel.
    pub drop_count: u64,
    /// Bytes dropped by CoDel.
    pub drop_len: u64,
    /// Packets marked CE instead of dropped.
    pub ecn_mark: u64,
    /// Packets marked CE for a sojourn above `ce_threshold`.
    pub ce_mark: u64,
}

/// `codel_Newton_step`: one Newton iteration of `1/sqrt(count)`:
/// `x' = x/2 * (3 - count * x^2)` in Q0.32.
pub fn newton_step(vars: &mut CodelVars) {
    let invsqrt = (vars.rec_inv_sqrt as u32) << REC_INV_SQRT_SHIFT;
    let invsqrt2 = ((invsqrt as u64 * invsqrt as u64) >> 32) as u32;
    let mut val = (3u64 << 32).wrapping_sub(vars.count as u64 * invsqrt2 as u64);
    val >>= 2; // room for the multiply below
    val = (val.wrapping_mul(invsqrt as u64)) >> (32 - 2 + 1);
    vars.rec_inv_sqrt = (val >> REC_INV_SQRT_SHIFT) as u16;
}

/// `codel_control_law`: `t + interval / sqrt(count)`, with `1/sqrt(count)` from
/// `rec_inv_sqrt` (`reciprocal_scale`).
pub fn control_law(t: CodelTime, interval: CodelTime, rec_inv_sqrt: u16) -> CodelTime {
    let scale = (rec_inv_sqrt as u64) << REC_INV_SQRT_SHIFT;
    t.wrapping_add(((interval as u64 * scale) >> 32) as u32)
}

/// The queue [`codel_dequeue`] takes packets from (its `dequeue_func` and the
/// backlog it checks against `mtu`).
pub trait CodelQueue<T> {
    /// Takes the head packet, updating the queue's counts and backlogs.
    fn dequeue_head(&mut self) -> Option<Skb<T>>;
    /// The backlog compared with `mtu` (the whole qdisc's, after the dequeue).
    fn backlog(&self) -> u64;
}

/// `codel_should_drop`: whether the sojourn of `skb` has been above target for at
/// least an interval (and the backlog is above one MTU).
fn should_drop<T>(
    skb: Option<&Skb<T>>,
    vars: &mut CodelVars,
    params: &CodelParams,
    stats: &mut CodelStats,
    backlog: u64,
    now: CodelTime,
) -> bool {
    let Some(skb) = skb else {
        vars.first_above_time = 0;
        return false;
    };
    vars.ldelay = now.wrapping_sub(codel_time(skb.enqueued_at));
    stats.maxpacket = stats.maxpacket.max(skb.len);
    if !after_eq(vars.ldelay, params.target) || backlog <= params.mtu as u64 {
        // Went below: stay below for at least an interval.
        vars.first_above_time = 0;
        return false;
    }
    if vars.first_above_time == 0 {
        // Just went above: drop if it stays above for an interval.
        vars.first_above_time = now.wrapping_add(params.interval);
        false
    } else {
        after(now, vars.first_above_time)
    }
}

/// Drops `skb` (CoDel's `drop_func`): counted, handed to the caller.
fn drop<T>(skb: Skb<T>, stats: &mut CodelStats, dropped: &mut Vec<Skb<T>>) {
    stats.drop_len += skb.len as u64;
    stats.drop_count += 1;
    dropped.push(skb);
}

/// `codel_dequeue`: the next packet of `q` at `now` (ns) under CoDel's control;
/// the packets it drops go to `dropped`.
pub fn codel_dequeue<T: QueueItem, Q: CodelQueue<T>>(
    q: &mut Q,
    params: &CodelParams,
    vars: &mut CodelVars,
    stats: &mut CodelStats,
    now_ns: u64,
    dropped: &mut Vec<Skb<T>>,
) -> Option<Skb<T>> {
    let Some(first) = q.dequeue_head() else {
        vars.dropping = false;
        return None;
    };
    let now = codel_time(now_ns);
    let mut skb = Some(first);
    let drop_it = should_drop(skb.as_ref(), vars, params, stats, q.backlog(), now);
    if vars.dropping {
        if !drop_it {
            // Sojourn below target: leave the dropping state.
            vars.dropping = false;
        } else if after_eq(now, vars.drop_next) {
            // Time for the next drop(s): a large backlog may call for several now.
            while vars.dropping && after_eq(now, vars.drop_next) {
                vars.count = vars.count.wrapping_add(1);
                newton_step(vars);
                let Some(mut s) = skb.take() else { break };
                if params.ecn && inet_ecn_set_ce(&mut s.item) {
                    stats.ecn_mark += 1;
                    vars.drop_next =
                        control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                    skb = Some(s);
                    return finish(skb, params, vars, stats);
                }
                drop(s, stats, dropped);
                skb = q.dequeue_head();
                if !should_drop(skb.as_ref(), vars, params, stats, q.backlog(), now) {
                    vars.dropping = false;
                } else {
                    vars.drop_next =
                        control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                }
            }
        }
    } else if drop_it {
        enter_dropping(q, params, vars, stats, now, &mut skb, dropped);
    }
    finish(skb, params, vars, stats)
}

/// The `else if (drop)` branch of `codel_dequeue`: drop (or mark) this packet and
/// enter the dropping state, starting from the last cycle's drop rate if that
/// cycle ended recently.
#[allow(clippy::too_many_arguments)]
fn enter_dropping<T: QueueItem, Q: CodelQueue<T>>(
    q: &mut Q,
    params: &CodelParams,
    vars: &mut CodelVars,
    stats: &mut CodelStats,
    now: CodelTime,
    skb: &mut Option<Skb<T>>,
    dropped: &mut Vec<Skb<T>>,
) {
    if let Some(mut s) = skb.take() {
        if params.ecn && inet_ecn_set_ce(&mut s.item) {
            stats.ecn_mark += 1;
            *skb = Some(s);
        } else {
            drop(s, stats, dropped);
            *skb = q.dequeue_head();
            // Its verdict is not used, only its update of ldelay and first_above_time.
            should_drop(skb.as_ref(), vars, params, stats, q.backlog(), now);
        }
    }
    vars.dropping = true;
    let delta = vars.count.wrapping_sub(vars.lastcount);
    let since = now.wrapping_sub(vars.drop_next);
    if delta > 1 && after(params.interval.wrapping_mul(16), since) {
        vars.count = delta;
        newton_step(vars);
    } else {
        vars.count = 1;
        vars.rec_inv_sqrt = (!0u32 >> REC_INV_SQRT_SHIFT) as u16;
    }
    vars.lastcount = vars.count;
    vars.drop_next = control_law(now, params.interval, vars.rec_inv_sqrt);
}

/// The end of `codel_dequeue`: the `ce_threshold` mark.
fn finish<T: QueueItem>(
    mut skb: Option<Skb<T>>,
    params: &CodelParams,
    vars: &CodelVars,
    stats: &mut CodelStats,
) -> Option<Skb<T>> {
    if let Some(s) = skb.as_mut() {
        if after(vars.ldelay, params.ce_threshold) && inet_ecn_set_ce(&mut s.item) {
            stats.ce_mark += 1;
        }
    }
    skb
}

/// A fifo as CoDel sees it (sch_codel.c's `dequeue_func` and backlog).
struct FifoPart<'a, T> {
    queue: &'a mut VecDeque<Skb<T>>,
    backlog: &'a mut u64,
}

impl<T> CodelQueue<T> for FifoPart<'_, T> {
    fn dequeue_head(&mut self) -> Option<Skb<T>> {
        let s = self.queue.pop_front()?;
        *self.backlog -= s.len as u64;
        Some(s)
    }
    fn backlog(&self) -> u64 {
        *self.backlog
    }
}

/// sch_codel.c's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CodelConfig {
    /// `limit` in packets (`DEFAULT_CODEL_LIMIT`, 1000).
    pub limit: u32,
    /// CoDel's parameters (`ecn` off by default in sch_codel).
    pub params: CodelParams,
}

impl Default for CodelConfig {
    fn default() -> Self {
        CodelConfig {
            limit: 1000,
            params: CodelParams::default(),
        }
    }
}

/// The `codel` qdisc: one fifo under CoDel.
pub struct Codel<T> {
    queue: VecDeque<Skb<T>>,
    cfg: CodelConfig,
    vars: CodelVars,
    cstats: CodelStats,
    drop_overlimit: u64,
    stats: QdiscStats,
}

impl<T: QueueItem> Codel<T> {
    /// `codel_init` with `cfg`.
    pub fn new(cfg: CodelConfig) -> Codel<T> {
        Codel {
            queue: VecDeque::new(),
            cfg,
            vars: CodelVars::default(),
            cstats: CodelStats::default(),
            drop_overlimit: 0,
            stats: QdiscStats::default(),
        }
    }

    /// CoDel's state.
    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }
}

impl<T: QueueItem> Qdisc<T> for Codel<T> {
    fn kind(&self) -> &'static str {
        "codel"
    }

    /// `codel_qdisc_enqueue`: tail drop above `limit`.
    fn enqueue(&mut self, _now: u64, skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> NetXmit {
        if self.queue.len() >= self.cfg.limit as usize {
            self.drop_overlimit += 1;
            self.stats.drops += 1;
            dropped.push(skb);
            return NetXmit::Drop;
        }
        self.stats.backlog += skb.len as u64;
        self.queue.push_back(skb);
        self.stats.qlen = self.queue.len() as u32;
        NetXmit::Success
    }

    /// `codel_qdisc_dequeue`.
    fn dequeue(&mut self, now: u64, dropped: &mut Vec<Skb<T>>) -> Option<Skb<T>> {
        let before = dropped.len();
        let mut part = FifoPart {
            queue: &mut self.queue,
            backlog: &mut self.stats.backlog,
        };
        let p = &self.cfg.params;
        let skb = codel_dequeue(&mut part, p, &mut self.vars, &mut self.cstats, now, dropped);
        self.stats.drops += (dropped.len() - before) as u64;
        self.stats.qlen = self.queue.len() as u32;
        self.stats.ce_marks = self.cstats.ecn_mark + self.cstats.ce_mark;
        skb
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn xstats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("maxpacket", self.cstats.maxpacket as u64),
            ("count", self.vars.count as u64),
            ("lastcount", self.vars.lastcount as u64),
            (
                "ldelay_us",
                ((self.vars.ldelay as u64) << CODEL_SHIFT) / 1000,
            ),
            ("drop_overlimit", self.drop_overlimit),
            ("ecn_mark", self.cstats.ecn_mark),
            ("ce_mark", self.cstats.ce_mark),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_pkt::pkt_at;
    use super::*;

    const MS: u64 = 1_000_000;

    /// A codel qdisc with `n` packets of 1500 bytes enqueued at 0.
    fn loaded(n: usize, ecn: bool, ect: u8) -> Codel<Vec<u8>> {
        let mut q = Codel::new(CodelConfig {
            limit: 10_000,
            params: CodelParams {
                ecn,
                ..CodelParams::default()
            },
        });
        let mut d = Vec::new();
        for _ in 0..n {
            assert_eq!(
                q.enqueue(0, pkt_at(1500, ect, 0, 0), &mut d),
                NetXmit::Success
            );
        }
        q
    }

    /// codel_impl.h codel_Newton_step / codel_control_law: successive Newton steps
    /// as count grows keep rec_inv_sqrt near 1/sqrt(count), so the next drop comes
    /// interval/sqrt(count) later.
    #[test]
    fn control_law_is_interval_over_sqrt_count() {
        let interval = CodelParams::default().interval;
        let mut v = CodelVars {
            count: 1,
            rec_inv_sqrt: (!0u32 >> REC_INV_SQRT_SHIFT) as u16,
            ..CodelVars::default()
        };
        assert!(control_law(1000, interval, v.rec_inv_sqrt).abs_diff(1000 + interval) <= 2);
        // The same iteration in floating point: x' = x/2 * (3 - count * x^2).
        let mut x = 1.0f64;
        for count in 2..=1000u32 {
            v.count = count;
            newton_step(&mut v);
            x = x / 2.0 * (3.0 - count as f64 * x * x);
            let got = v.rec_inv_sqrt as f64 / 65536.0;
            assert!((got - x).abs() < 1e-3, "count {count}: {got} vs {x}");
            // One step per drop tracks 1/sqrt(count) once count has grown.
            let want = 1.0 / (count as f64).sqrt();
            if count >= 16 {
                assert!(
                    (got - want).abs() / want < 0.02,
                    "count {count}: {got} vs {want}"
                );
                let gap = control_law(0, interval, v.rec_inv_sqrt) as f64;
                assert!(
                    (gap - interval as f64 * want).abs() / gap < 0.02,
                    "count {count}"
                );
            }
        }
        // Serial-number compares survive the u32 wrap of CoDel's clock.
        assert!(after(5, u32::MAX - 5) && !after(u32::MAX - 5, 5));
    }

    /// codel_should_drop: below target, or with at most one MTU queued, never.
    #[test]
    fn no_drop_below_target_or_mtu() {
        let mut q = loaded(2000, false, 0);
        let mut d = Vec::new();
        // Every dequeue within 4 ms of the enqueue: sojourn below the 5 ms target.
        for k in 0..1000u64 {
            assert!(q.dequeue(k * 4_000, &mut d).is_some());
        }
        assert!(d.is_empty() && q.vars().first_above_time == 0);
        // One packet left (one MTU of backlog) however long it waited.
        let mut q = loaded(2, false, 0);
        q.dequeue(0, &mut d);
        assert!(q.dequeue(10_000 * MS, &mut d).is_some());
        assert!(d.is_empty());
    }

    /// codel_dequeue: the first drop once the sojourn stayed above target for an
    /// interval; then drop n+1 comes interval/sqrt(n) after drop n.
    #[test]
    fn drops_follow_the_control_law() {
        let mut q = loaded(9000, false, 0);
        let mut d = Vec::new();
        let mut drop_times = Vec::new();
        let mut above_since = None;
        for k in 0..8000u64 {
            let now = k * MS / 4;
            let before = d.len();
            q.dequeue(now, &mut d);
            if above_since.is_none() && q.vars().first_above_time != 0 {
                above_since = Some(now);
            }
            // At most one drop per dequeue at this pace.
            assert!(d.len() - before <= 1);
            if d.len() > before {
                drop_times.push(now);
            }
        }
        let above = above_since.expect("went above target");
        // Packets all entered at 0: the sojourn is the time, above 5 ms from 5 ms.
        assert!((5 * MS..5 * MS + MS / 4).contains(&above), "{above}");
        let first = drop_times[0];
        // first_above_time is kept in 1024 ns units: within one unit of 100 ms.
        assert!(first + 1024 > above + 100 * MS && first <= above + 100 * MS + MS / 4);
        // Drop n+1 comes interval * rec_inv_sqrt after drop n, rec_inv_sqrt being
        // one Newton step per drop towards 1/sqrt(n): 1, 0.5, 0.5625, 0.488, ...
        let mut x = 1.0f64;
        for (n, w) in drop_times.windows(2).enumerate().take(20) {
            let count = n as f64 + 1.0;
            if n > 0 {
                x = x / 2.0 * (3.0 - count * x * x);
            }
            let gap = (w[1] - w[0]) as f64 / MS as f64;
            let want = 100.0 * x;
            assert!(
                (gap - want).abs() <= 0.35,
                "drop {}: gap {gap} ms, want {want}",
                n + 2
            );
        }
        assert!(drop_times.len() > 20);
        assert_eq!(q.stats().drops, drop_times.len() as u64);
    }

    /// With ecn, an ECT packet is marked CE instead of dropped (and still sent);
    /// a not-ECT packet is dropped as without ecn.
    #[test]
    fn ecn_marks_instead_of_dropping() {
        let mut q = loaded(3000, true, 2);
        let mut d = Vec::new();
        let mut marked = 0;
        for k in 0..2000u64 {
            if let Some(s) = q.dequeue(k * MS / 4, &mut d) {
                marked += (s.item[1] & 3 == 3) as u64;
            }
        }
        assert!(d.is_empty(), "ECT packets are never dropped");
        assert!(marked >= 3 && marked == q.cstats.ecn_mark, "{marked}");
        assert_eq!(q.stats().ce_marks, marked);
        let mut q = loaded(3000, true, 0);
        for k in 0..2000u64 {
            q.dequeue(k * MS / 4, &mut d);
        }
        assert!(!d.is_empty() && q.cstats.ecn_mark == 0);
    }

    /// ce_threshold: every ECT packet that waited longer is marked, no drop state.
    #[test]
    fn ce_threshold_marks_late_ect_packets() {
        let mut q = loaded(100, false, 1);
        q.cfg.params.ce_threshold = CodelParams::from_us(1000);
        let mut d = Vec::new();
        let a = q.dequeue(MS / 2, &mut d).unwrap();
        let b = q.dequeue(2 * MS, &mut d).unwrap();
        assert_eq!((a.item[1] & 3, b.item[1] & 3), (1, 3));
        assert_eq!(q.cstats.ce_mark, 1);
    }

    /// sch_codel.c codel_qdisc_enqueue: tail drop at `limit` packets.
    #[test]
    fn limit_tail_drops() {
        let mut q = Codel::new(CodelConfig {
            limit: 2,
            ..CodelConfig::default()
        });
        let mut d = Vec::new();
        q.enqueue(0, pkt_at(100, 0, 0, 0), &mut d);
        q.enqueue(0, pkt_at(100, 0, 0, 0), &mut d);
        assert_eq!(q.enqueue(0, pkt_at(100, 0, 0, 0), &mut d), NetXmit::Drop);
        assert_eq!((q.stats().qlen, q.drop_overlimit), (2, 1));
    }
}
