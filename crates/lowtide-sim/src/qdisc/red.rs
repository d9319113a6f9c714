//! RED (include/net/red.h, net/sched/sch_red.c): an EWMA of the backlog, `qavg`,
//! with weight 2^-Wlog; below `min` nothing happens, at or above `max` every packet
//! is dropped (or marked CE, with `ecn`), in between a packet is marked with a
//! probability that grows with `qavg` and with the packets since the last mark
//! (`max_p * (qavg - min) / (max - min)`, spread by the count as Floyd and
//! Jacobson's "uniform" variant). `adaptive` moves `max_p` every 500 ms to keep
//! `qavg` between 2/5 and 3/5 of the way from `min` to `max`. Packets that pass go
//! to a bfifo of `limit` bytes.
//!
//! Parameters are `tc qdisc add ... red`'s, with iproute2's defaults (q_red.c):
//! `max` = limit / 4, `min` = max / 3, `burst` = (2 min + max) / (3 avpkt), Wlog
//! from burst (`tc_red_eval_ewma`), `probability` 0.02, `bandwidth` 10 Mbit/s
//! (for the decay of `qavg` while the queue is idle, computed here directly where
//! tc precomputes a table, `Stab`, of the same decay).

use super::fifo::Fifo;
use super::{inet_ecn_set_ce, NetXmit, Qdisc, QdiscStats, QueueItem, Skb};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// sch_red.c's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RedConfig {
    /// `limit`: bytes the queue holds.
    pub limit: u64,
    /// `min`: bytes of average queue where marking starts.
    pub min: u32,
    /// `max`: bytes of average queue where every packet is marked.
    pub max: u32,
    /// `avpkt`: the average packet size (bytes).
    pub avpkt: u32,
    /// `burst`: packets the average lets through at once (0: iproute2's default).
    pub burst: u32,
    /// `probability`: `max_p`, the marking probability as `qavg` reaches `max`.
    pub probability: f64,
    /// `bandwidth` (bit/s), for the idle decay of `qavg`.
    pub bandwidth: u64,
    /// `ecn`: mark ECT packets CE instead of dropping them.
    pub ecn: bool,
    /// `harddrop`: drop above `max` even with `ecn`.
    pub harddrop: bool,
    /// `nodrop`: with `ecn`, queue not-ECT packets instead of dropping them.
    pub nodrop: bool,
    /// `adaptive`: adapt `max_p` (every 500 ms).
    pub adaptive: bool,
}

impl RedConfig {
    /// iproute2's defaults for a queue of `limit` bytes.
    pub fn with_limit(limit: u64) -> RedConfig {
        RedConfig {
            limit,
            min: 0,
            max: 0,
            avpkt: 1000,
            burst: 0,
            probability: 0.02,
            bandwidth: 10_000_000,
            ecn: false,
            harddrop: false,
            nodrop: false,
            adaptive: false,
        }
    }

    /// `min`, `max` and `burst` as iproute2 fills them in when not given.
    pub fn thresholds(&self) -> (u32, u32, u32) {
        let max = match (self.max, self.min) {
            (0, 0) => (self.limit / 4).min(u32::MAX as u64) as u32,
            (0, min) => min.saturating_mul(3),
            (max, _) => max,
        };
        let min = if self.min == 0 { max / 3 } else { self.min };
        let burst = match self.burst {
            0 => (2 * min as u64 + max as u64) / (3 * self.avpkt.max(1) as u64),
            b => b as u64,
        };
        (min, max, burst.max(1) as u32)
    }
}

/// `tc_red_eval_ewma`: the smallest Wlog whose average lets `burst` packets of
/// `avpkt` into an idle queue before it reaches `qmin`.
pub fn eval_ewma(qmin: u32, burst: u32, avpkt: u32) -> u8 {
    let a = burst as f64 + 1.0 - qmin as f64 / avpkt.max(1) as f64;
    let mut w = 0.5f64;
    for wlog in 1..32u8 {
        if a <= (1.0 - (1.0 - w).powi(burst as i32)) / w {
            return wlog;
        }
        w /= 2.0;
    }
    31
}

/// `struct red_parms` and `struct red_vars`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RedState {
    /// `qth_min << Wlog`.
    pub qth_min: u64,
    /// `qth_max << Wlog`.
    pub qth_max: u64,
    /// `qth_max - qth_min` (bytes, at least 1).
    pub qth_delta: u32,
    /// The EWMA weight is 2^-Wlog.
    pub wlog: u8,
    /// `max_P`: the probability at `max`, in units of 2^-32.
    pub max_p: u32,
    /// `max_P / qth_delta` (at least 1), the divisor of `red_random`.
    pub max_p_delta: u32,
    /// `target_min`, `target_max` of the adaptive algorithm (bytes).
    pub target_min: u32,
    /// See `target_min`.
    pub target_max: u32,
    /// `qavg << Wlog`.
    pub qavg: u64,
    /// Packets since the last mark, -1 below `min`.
    pub qcount: i32,
    /// The random threshold of the current mark.
    pub qr: u32,
    /// When the queue went idle (`qidlestart`), if it is.
    pub idle_since: Option<u64>,
}

/// `red_set_parms`.
pub fn red_set_parms(qth_min: u32, qth_max: u32, wlog: u8, max_p: u32) -> RedState {
    let delta = qth_max.saturating_sub(qth_min).max(1);
    let fifth = delta / 5;
    RedState {
        qth_min: (qth_min as u64) << wlog,
        qth_max: (qth_max as u64) << wlog,
        qth_delta: delta,
        wlog,
        max_p,
        max_p_delta: (max_p / delta).max(1),
        target_min: qth_min + 2 * fifth,
        target_max: qth_min + 3 * fifth,
        qavg: 0,
        qcount: -1,
        qr: 0,
        idle_since: None,
    }
}

/// What `red_action` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedAction {
    /// `RED_DONT_MARK`.
    DontMark,
    /// `RED_PROB_MARK`: an early mark (or drop).
    ProbMark,
    /// `RED_HARD_MARK`: `qavg` at or above `max`.
    HardMark,
}

impl RedState {
    /// `red_calc_qavg_no_idle_time`: `qavg += backlog - qavg * 2^-Wlog`.
    pub fn calc_qavg_no_idle_time(&self, backlog: u64) -> u64 {
        (self.qavg.wrapping_add(backlog)).wrapping_sub(self.qavg >> self.wlog)
    }

    /// `red_calc_qavg_from_idle_time`: the average decays as if packets of `avpkt`
    /// had arrived at an empty queue at line rate during the idle time:
    /// `qavg * (1 - W)^m` for `m` such packets.
    pub fn calc_qavg_from_idle_time(&self, now: u64, avpkt: u32, bandwidth: u64) -> u64 {
        let idle = now.saturating_sub(self.idle_since.unwrap_or(now)) as f64;
        let ptc = avpkt.max(1) as f64 * 8.0 * 1e9 / bandwidth.max(1) as f64;
        let m = idle / ptc;
        let w = (-(self.wlog as f64)).exp2();
        (self.qavg as f64 * (1.0 - w).powf(m)) as u64
    }

    /// `red_mark_probability`: mark when `(qavg - min) * qcount >= qR`.
    fn mark_probability(&self, qavg: u64) -> bool {
        let over = (qavg - self.qth_min) >> self.wlog;
        over.saturating_mul(self.qcount as u64) >= self.qr as u64
    }

    /// `red_random`: a threshold uniform in `0 .. delta / max_p`.
    fn random(&self, rng: &mut ChaCha8Rng) -> u32 {
        rng.next_u32() / self.max_p_delta
    }

    /// `red_action` for the average `qavg`.
    pub fn action(&mut self, qavg: u64, rng: &mut ChaCha8Rng) -> RedAction {
        if qavg < self.qth_min {
            self.qcount = -1;
            return RedAction::DontMark;
        }
        if qavg >= self.qth_max {
            self.qcount = -1;
            return RedAction::HardMark;
        }
        self.qcount += 1;
        if self.qcount != 0 {
            if self.mark_probability(qavg) {
                self.qcount = 0;
                self.qr = self.random(rng);
                return RedAction::ProbMark;
            }
        } else {
            self.qr = self.random(rng);
        }
        RedAction::DontMark
    }

    /// `red_adaptative_algo`: `max_p` up by min(1 %, max_p / 4) while `qavg` is
    /// above `target_max` (to at most 50 %), down by a tenth while below
    /// `target_min` (to at least 1 %).
    pub fn adapt(&mut self, qavg_bytes: u64) {
        const ONE_PERCENT: u32 = ((1u64 << 32) / 100) as u32;
        let (min_p, max_p) = (ONE_PERCENT, 50 * ONE_PERCENT);
        if qavg_bytes > self.target_max as u64 && self.max_p <= max_p {
            self.max_p += min_p.min(self.max_p / 4);
        } else if qavg_bytes < self.target_min as u64 && self.max_p >= min_p {
            self.max_p = (self.max_p / 10) * 9;
        }
        let d = self.qth_delta;
        self.max_p_delta = ((self.max_p + d / 2) / d).max(1);
    }
}

/// The adaptive algorithm's period (`HZ / 2`).
const ADAPT_PERIOD_NS: u64 = 500_000_000;

/// The red qdisc.
pub struct Red<T> {
    cfg: RedConfig,
    state: RedState,
    child: Fifo<T>,
    rng: ChaCha8Rng,
    next_adapt: u64,
    prob_drop: u64,
    prob_mark: u64,
    forced_drop: u64,
    forced_mark: u64,
    pdrop: u64,
    stats: QdiscStats,
}

impl<T: QueueItem> Red<T> {
    /// `red_change` with `cfg`; `seed` seeds its random thresholds.
    pub fn new(cfg: RedConfig, seed: u64) -> Red<T> {
        let (min, max, burst) = cfg.thresholds();
        let wlog = eval_ewma(min, burst, cfg.avpkt);
        let max_p = (cfg.probability.clamp(0.0, 1.0) * 2f64.powi(32)).min(u32::MAX as f64) as u32;
        Red {
            state: red_set_parms(min, max, wlog, max_p),
            child: Fifo::bfifo(cfg.limit),
            cfg,
            rng: ChaCha8Rng::seed_from_u64(seed),
            next_adapt: ADAPT_PERIOD_NS,
            prob_drop: 0,
            prob_mark: 0,
            forced_drop: 0,
            forced_mark: 0,
            pdrop: 0,
            stats: QdiscStats::default(),
        }
    }

    /// RED's averages and thresholds.
    pub fn state(&self) -> &RedState {
        &self.state
    }

    /// The adaptive timer's runs due by `now`.
    fn run_adapt_timer(&mut self, now: u64) {
        while self.cfg.adaptive && now >= self.next_adapt {
            let at = self.next_adapt;
            let qavg = match self.state.idle_since {
                Some(_) => self.idle_qavg(at),
                None => self.state.qavg,
            };
            self.state.adapt(qavg >> self.state.wlog);
            self.next_adapt += ADAPT_PERIOD_NS;
        }
    }

    fn idle_qavg(&self, now: u64) -> u64 {
        (self.state).calc_qavg_from_idle_time(now, self.cfg.avpkt, self.cfg.bandwidth)
    }

    /// The `congestion_drop` of `red_enqueue`.
    fn congestion_drop(&mut self, skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> NetXmit {
        self.stats.drops += 1;
        dropped.push(skb);
        NetXmit::Cn
    }
}

impl<T: QueueItem> Qdisc<T> for Red<T> {
    fn kind(&self) -> &'static str {
        "red"
    }

    /// `red_enqueue`.
    fn enqueue(&mut self, now: u64, mut skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> NetXmit {
        self.run_adapt_timer(now);
        let backlog = self.child.stats().backlog;
        self.state.qavg = match self.state.idle_since {
            Some(_) => self.idle_qavg(now),
            None => self.state.calc_qavg_no_idle_time(backlog),
        };
        self.state.idle_since = None;
        let (ecn, nodrop) = (self.cfg.ecn, self.cfg.nodrop);
        match self.state.action(self.state.qavg, &mut self.rng) {
            RedAction::DontMark => {}
            RedAction::ProbMark => {
                self.stats.overlimits += 1;
                if ecn && inet_ecn_set_ce(&mut skb.item) {
                    self.prob_mark += 1;
                } else if !ecn || !nodrop {
                    self.prob_drop += 1;
                    return self.congestion_drop(skb, dropped);
                }
            }
            RedAction::HardMark => {
                self.stats.overlimits += 1;
                if ecn && !self.cfg.harddrop && inet_ecn_set_ce(&mut skb.item) {
                    self.forced_mark += 1;
                } else if !ecn || self.cfg.harddrop || !nodrop {
                    self.forced_drop += 1;
                    return self.congestion_drop(skb, dropped);
                }
            }
        }
        let v = self.child.enqueue(now, skb, dropped);
        if v == NetXmit::Drop {
            self.pdrop += 1;
            self.stats.drops += 1;
        }
        self.stats.ce_marks = self.prob_mark + self.forced_mark;
        v
    }

    /// `red_dequeue`: an empty child starts an idle period.
    fn dequeue(&mut self, now: u64, dropped: &mut Vec<Skb<T>>) -> Option<Skb<T>> {
        self.run_adapt_timer(now);
        let skb = self.child.dequeue(now, dropped);
        if skb.is_none() && self.state.idle_since.is_none() {
            self.state.idle_since = Some(now);
        }
        skb
    }

    fn stats(&self) -> QdiscStats {
        let c = self.child.stats();
        QdiscStats {
            qlen: c.qlen,
            backlog: c.backlog,
            ..self.stats
        }
    }

    fn xstats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("prob_drop", self.prob_drop),
            ("prob_mark", self.prob_mark),
            ("forced_drop", self.forced_drop),
            ("forced_mark", self.forced_mark),
            ("pdrop", self.pdrop),
            ("qavg", self.state.qavg >> self.state.wlog),
            ("max_p", self.state.max_p as u64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_pkt::pkt;
    use super::*;

    fn red(cfg: RedConfig) -> Red<Vec<u8>> {
        Red::new(cfg, 7)
    }

    /// iproute2 q_red.c: max = limit/4, min = max/3, burst = (2 min + max) /
    /// (3 avpkt); tc_red_eval_ewma: the smallest Wlog whose average of `burst`
    /// packets from empty stays under min.
    #[test]
    fn iproute2_defaults_and_wlog() {
        let c = RedConfig::with_limit(400_000);
        assert_eq!(c.thresholds(), (33_333, 100_000, 55));
        for (qmin, burst, avpkt) in [
            (33_333u32, 55u32, 1000u32),
            (30_000, 20, 1000),
            (5_000, 5, 1500),
        ] {
            let w = eval_ewma(qmin, burst, avpkt);
            let a = burst as f64 + 1.0 - qmin as f64 / avpkt as f64;
            let fits = |wlog: u8| {
                let w = (-(wlog as f64)).exp2();
                a <= (1.0 - (1.0 - w).powi(burst as i32)) / w
            };
            assert!(
                fits(w) && (w == 1 || !fits(w - 1)),
                "{qmin} {burst} {avpkt}: {w}"
            );
        }
    }

    /// red_calc_qavg_no_idle_time: qavg += backlog - qavg/2^Wlog, so a constant
    /// backlog B is approached as B (1 - (1 - W)^n).
    #[test]
    fn qavg_is_an_ewma_of_the_backlog() {
        let mut s = red_set_parms(10_000, 30_000, 4, 1 << 26);
        let b = 20_000u64;
        for n in 1..=40 {
            s.qavg = s.calc_qavg_no_idle_time(b);
            let want = b as f64 * (1.0 - (1.0 - 1.0 / 16.0f64).powi(n));
            let got = (s.qavg >> 4) as f64;
            assert!((got - want).abs() <= 16.0, "n {n}: {got} vs {want}");
        }
    }

    /// red_action: below min never, at or above max always (drop, or with ecn a
    /// CE mark; harddrop drops anyway), counting forced drops and marks.
    #[test]
    fn below_min_never_above_max_always() {
        let cfg = RedConfig {
            min: 2000,
            max: 4000,
            burst: 2,
            ..RedConfig::with_limit(1_000_000)
        };
        let mut d = Vec::new();
        let mut q = red(cfg);
        q.enqueue(0, pkt(1000, 2, 0, None), &mut d);
        assert!(d.is_empty() && q.state().qavg < q.state().qth_min);
        // Fill far above max and keep enqueueing: qavg climbs above max.
        for _ in 0..400 {
            q.enqueue(0, pkt(1000, 0, 0, None), &mut d);
        }
        assert!(q.state().qavg >= q.state().qth_max);
        let xs = |q: &Red<Vec<u8>>| {
            q.xstats()
                .into_iter()
                .collect::<std::collections::HashMap<_, _>>()
        };
        let before = xs(&q)["forced_drop"];
        assert_eq!(q.enqueue(0, pkt(1000, 2, 0, None), &mut d), NetXmit::Cn);
        assert_eq!(xs(&q)["forced_drop"], before + 1);
        // The same with ecn: ECT is marked and queued; not-ECT dropped.
        let mut q = red(RedConfig { ecn: true, ..cfg });
        for _ in 0..400 {
            q.enqueue(0, pkt(1000, 1, 0, None), &mut d);
        }
        let (m, dr) = (xs(&q)["forced_mark"], xs(&q)["forced_drop"]);
        assert_eq!(
            q.enqueue(0, pkt(1000, 2, 0, None), &mut d),
            NetXmit::Success
        );
        assert_eq!(xs(&q)["forced_mark"], m + 1);
        assert_eq!(q.enqueue(0, pkt(1000, 0, 0, None), &mut d), NetXmit::Cn);
        assert_eq!(xs(&q)["forced_drop"], dr + 1);
        let mut q = red(RedConfig {
            ecn: true,
            harddrop: true,
            ..cfg
        });
        for _ in 0..400 {
            q.enqueue(0, pkt(1000, 2, 0, None), &mut d);
        }
        assert_eq!(q.enqueue(0, pkt(1000, 2, 0, None), &mut d), NetXmit::Cn);
    }

    /// red_mark_probability with red_random: between min and max, the packets
    /// between two marks are uniform in 1..1/p_b, p_b = max_p (qavg - min) /
    /// (max - min): on average 1/(2 p_b).
    #[test]
    fn marking_probability_between_thresholds() {
        let max_p = (0.1 * 2f64.powi(32)) as u32;
        let mut s = red_set_parms(10_000, 30_000, 2, max_p);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for avg in [15_000u64, 20_000, 25_000] {
            let qavg = avg << 2;
            let pb = 0.1 * (avg - 10_000) as f64 / 20_000.0;
            let (mut marks, n) = (0u64, 200_000);
            for _ in 0..n {
                marks += (s.action(qavg, &mut rng) == RedAction::ProbMark) as u64;
            }
            let gap = n as f64 / marks as f64;
            let want = 1.0 / (2.0 * pb);
            assert!(
                (gap - want).abs() / want < 0.08,
                "avg {avg}: gap {gap}, want {want}"
            );
        }
        assert_eq!(s.action(9_999 << 2, &mut rng), RedAction::DontMark);
        assert_eq!(s.qcount, -1);
    }

    /// red_calc_qavg_from_idle_time: idle for the time of m packets of avpkt at
    /// the bandwidth, qavg decays by (1 - W)^m.
    #[test]
    fn idle_decay() {
        let cfg = RedConfig {
            min: 20_000,
            max: 60_000,
            avpkt: 1000,
            bandwidth: 8_000_000, // 1 ms per 1000-byte packet
            ..RedConfig::with_limit(1_000_000)
        };
        let mut q = red(cfg);
        let mut d = Vec::new();
        for _ in 0..50 {
            q.enqueue(0, pkt(1000, 0, 0, None), &mut d);
        }
        while q.dequeue(0, &mut d).is_some() {}
        let (w, before) = (q.state().wlog, q.state().qavg);
        q.enqueue(20_000_000, pkt(1000, 0, 0, None), &mut d); // idle 20 ms: m = 20
        let want = before as f64 * (1.0 - (-(w as f64)).exp2()).powi(20);
        assert!((q.state().qavg as f64 - want).abs() <= 1.0 + want * 1e-9);
        assert!(q.state().idle_since.is_none());
    }

    /// red_adaptative_algo: every 500 ms, max_p grows while qavg is above
    /// target_max and shrinks by a tenth while it is below target_min.
    #[test]
    fn adaptive_moves_max_p() {
        let mut s = red_set_parms(10_000, 20_000, 3, (0.1 * 2f64.powi(32)) as u32);
        assert_eq!((s.target_min, s.target_max), (14_000, 16_000));
        let p0 = s.max_p;
        s.adapt(17_000);
        assert_eq!(s.max_p, p0 + ((1u64 << 32) / 100) as u32);
        s.adapt(13_000);
        assert_eq!(s.max_p, ((p0 + ((1u64 << 32) / 100) as u32) / 10) * 9);
        let p = s.max_p;
        s.adapt(15_000);
        assert_eq!(s.max_p, p, "between the targets: unchanged");
        // Through the qdisc: its timer runs every 500 ms of queue activity.
        let mut q = red(RedConfig {
            min: 10_000,
            max: 20_000,
            adaptive: true,
            ..RedConfig::with_limit(1_000_000)
        });
        let mut d = Vec::new();
        let p0 = q.state().max_p;
        for k in 0..200u64 {
            q.enqueue(k * 5_000_000, pkt(1000, 0, 0, None), &mut d);
        }
        assert!(
            q.state().max_p > p0,
            "a standing queue above target raises max_p"
        );
    }
}
