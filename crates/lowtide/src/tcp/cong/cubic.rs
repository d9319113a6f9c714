//! CUBIC (RFC 9438) with HyStart, following Linux's net/ipv4/tcp_cubic.c.
//!
//! The window grows as `W(t) = C * (t - K)^3 + W_max` from the last loss, with a
//! Reno-emulation floor (`tcp_friendliness`) and multiplicative decrease by
//! `beta = 717/1024`. Slow start ends early when HyStart sees an ACK train as long as
//! half the minimum RTT or RTT samples rising by `clamp(min_rtt / 8, 4 ms, 16 ms)`.
//!
//! Arithmetic is Linux's, integer for integer: time in jiffies (`HZ` = 1000, so one
//! jiffy is 1 ms) and in `2^-BICTCP_HZ` s units, `C = bic_scale * 10 / 1024`, and
//! `cubic_root` by table lookup plus one Newton-Raphson step (not an exact cbrt), so
//! packetdrill's expected windows carry over unchanged.

use super::{AckSample, CaCtx, CaEvent, CaMib, CaState, CongestionOps, CwndState};
use crate::tcp::consts::SK_GSO_MAX_SIZE;
use crate::time::Instant;

/// `BICTCP_BETA_SCALE`: beta is in 1/1024.
pub const BICTCP_BETA_SCALE: u32 = 1024;
/// `BICTCP_HZ`: CUBIC's time unit is 2^-10 s.
pub const BICTCP_HZ: u32 = 10;
/// Linux `HZ` that `tcp_jiffies32` counts in (lowtide's [`crate::time::HZ`]).
pub const HZ: u32 = crate::time::HZ as u32;
/// `HYSTART_ACK_TRAIN` bit of `hystart_detect`.
pub const HYSTART_ACK_TRAIN: u32 = 0x1;
/// `HYSTART_DELAY` bit of `hystart_detect`.
pub const HYSTART_DELAY: u32 = 0x2;
/// `HYSTART_MIN_SAMPLES`: RTT samples per round before the delay test.
pub const HYSTART_MIN_SAMPLES: u8 = 8;
/// `HYSTART_DELAY_MIN`, microseconds.
pub const HYSTART_DELAY_MIN: u32 = 4000;
/// `HYSTART_DELAY_MAX`, microseconds.
pub const HYSTART_DELAY_MAX: u32 = 16000;

/// `HYSTART_DELAY_THRESH`.
fn hystart_delay_thresh(x: u32) -> u32 {
    x.clamp(HYSTART_DELAY_MIN, HYSTART_DELAY_MAX)
}

/// The module parameters of tcp_cubic.c, with Linux's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CubicParams {
    /// `fast_convergence`: release bandwidth faster when W_max shrinks.
    pub fast_convergence: bool,
    /// `beta`, in 1/1024 (717 = 0.7).
    pub beta: u32,
    /// `bic_scale`: C = bic_scale * 10 / 1024 (41 gives 0.4).
    pub bic_scale: u32,
    /// `tcp_friendliness`: never grow slower than Reno would.
    pub tcp_friendliness: bool,
    /// `hystart`: hybrid slow start on.
    pub hystart: bool,
    /// `hystart_detect`: [`HYSTART_ACK_TRAIN`] | [`HYSTART_DELAY`].
    pub hystart_detect: u32,
    /// `hystart_low_window`: HyStart acts only from this cwnd on.
    pub hystart_low_window: u32,
    /// `hystart_ack_delta_us`: ACKs this close belong to one train.
    pub hystart_ack_delta_us: u32,
    /// `initial_ssthresh`: with HyStart off, the ssthresh `cubictcp_init` sets (0:
    /// none).
    pub initial_ssthresh: u32,
}

impl Default for CubicParams {
    fn default() -> Self {
        CubicParams {
            fast_convergence: true,
            beta: 717,
            bic_scale: 41,
            tcp_friendliness: true,
            hystart: true,
            hystart_detect: HYSTART_ACK_TRAIN | HYSTART_DELAY,
            hystart_low_window: 16,
            hystart_ack_delta_us: 2000,
            initial_ssthresh: 0,
        }
    }
}

impl CubicParams {
    /// The writable module parameters as `cfg` has them; `beta` and `bic_scale`
    /// keep their defaults (`bic_scale` is read-only, and `beta_scale`, which
    /// `cubictcp_register` derives from `beta` when the module loads, would not
    /// follow a later `beta`).
    pub fn from_cfg(cfg: &crate::Config) -> CubicParams {
        CubicParams {
            fast_convergence: cfg.tcp_cubic_fast_convergence,
            tcp_friendliness: cfg.tcp_cubic_tcp_friendliness,
            hystart: cfg.tcp_cubic_hystart,
            hystart_detect: cfg.tcp_cubic_hystart_detect,
            hystart_low_window: cfg.tcp_cubic_hystart_low_window,
            hystart_ack_delta_us: cfg.tcp_cubic_hystart_ack_delta_us as u32,
            initial_ssthresh: cfg.tcp_cubic_initial_ssthresh,
            ..CubicParams::default()
        }
    }
    /// `beta_scale` (cubictcp_register): Reno-emulation slope, `8 * (1 + b) / 3 / (1 - b)`.
    pub fn beta_scale(&self) -> u32 {
        8 * (BICTCP_BETA_SCALE + self.beta) / 3 / (BICTCP_BETA_SCALE - self.beta)
    }
    /// `cube_rtt_scale` (cubictcp_register): 1024 * C.
    pub fn cube_rtt_scale(&self) -> u32 {
        self.bic_scale * 10
    }
    /// `cube_factor` (cubictcp_register): `2^(10 + 3 * BICTCP_HZ) / (bic_scale * 10)`,
    /// so that `K = cubic_root(cube_factor * (W_max - cwnd))` is in 2^-10 s.
    pub fn cube_factor(&self) -> u64 {
        (1u64 << (10 + 3 * BICTCP_HZ)) / (self.bic_scale as u64 * 10)
    }
}

/// `struct bictcp`: CUBIC's per-connection state.
#[derive(Debug, Clone, Default)]
pub struct Cubic {
    params: CubicParams,
    /// `cnt`: grow cwnd by one per `cnt` ACKed segments.
    pub cnt: u32,
    /// `last_max_cwnd`: W_max, the window before the last reduction.
    pub last_max_cwnd: u32,
    /// `last_cwnd`: cwnd at the last `bictcp_update`.
    pub last_cwnd: u32,
    /// `last_time`: jiffies of the last `bictcp_update`.
    pub last_time: u32,
    /// `bic_origin_point`: the plateau of the cubic curve.
    pub bic_origin_point: u32,
    /// `bic_K`: time from the epoch start to the plateau, in 2^-10 s.
    pub bic_k: u32,
    /// `delay_min`: minimum RTT seen, microseconds (0: none yet).
    pub delay_min: u32,
    /// `epoch_start`: jiffies when the current growth epoch began (Linux's 0 is None).
    pub epoch_start: Option<u32>,
    /// `ack_cnt`: segments ACKed, for the Reno estimate.
    pub ack_cnt: u32,
    /// `tcp_cwnd`: the window Reno would have now.
    pub tcp_cwnd: u32,
    /// `sample_cnt`: RTT samples in this HyStart round.
    pub sample_cnt: u8,
    /// `found`: HyStart found the exit point.
    pub found: bool,
    /// `round_start`: microsecond clock at the start of the round.
    pub round_start: u32,
    /// `end_seq`: the round ends when snd_una passes this.
    pub end_seq: u64,
    /// `last_ack`: microsecond clock of the last ACK of the current train.
    pub last_ack: u32,
    /// `curr_rtt`: minimum RTT of this round.
    pub curr_rtt: u32,
    /// `cubictcp_init` ran ([`CongestionOps::init`]); without it (a module driven
    /// directly, as in unit tests) the first ACK starts the HyStart round.
    inited: bool,
    /// The last context a hook saw; `set_state` gets none, and `tcp_enter_loss` always
    /// raises `CA_EVENT_LOSS` just before entering Loss.
    last_ctx: Option<CaCtx>,
    /// Counters `hystart_update` bumped, until the engine takes them.
    mib: CaMib,
}

/// `bictcp_clock_us`: `tcp_mstamp` as Linux's wrapping u32 microseconds.
fn clock_us(now: Instant) -> u32 {
    now.as_micros() as u32
}

/// `tcp_jiffies32`: the jiffies as Linux's wrapping u32.
fn jiffies32(now: Instant) -> u32 {
    now.jiffies() as u32
}

/// `usecs_to_jiffies` (rounds up).
fn usecs_to_jiffies(us: u32) -> u32 {
    let per = 1_000_000 / HZ;
    us.div_ceil(per)
}

/// `cubic_root`: cube root by a table of the 6 most significant bits and one
/// Newton-Raphson step (Willy Tarreau's; average error about 0.195 %).
pub fn cubic_root(a: u64) -> u32 {
    // v[x] = cbrt(x << 18) - 1 for x in 0..64, hand-refined; cbrt(x) = (v[x] + 10) >> 6.
    const V: [u8; 64] = [
        0, 54, 54, 54, 118, 118, 118, 118, 123, 129, 134, 138, 143, 147, 151, 156, 157, 161, 164,
        168, 170, 173, 176, 179, 181, 185, 187, 190, 192, 194, 197, 199, 200, 202, 204, 206, 209,
        211, 213, 215, 217, 219, 221, 222, 224, 225, 227, 229, 231, 232, 234, 236, 237, 239, 240,
        242, 244, 245, 246, 248, 250, 251, 252, 254,
    ];
    let b = 64 - a.leading_zeros(); // fls64
    if b < 7 {
        return (V[a as usize] as u32 + 35) >> 6;
    }
    let b = ((b * 84) >> 8) - 1;
    let shift = (a >> (b * 3)) as usize;
    let x = ((V[shift] as u32 + 10) << b) >> 6;
    // x' = (2x + a / x^2) / 3, with x * (x - 1) as Linux divides by.
    let x = 2 * x + (a / (x as u64 * (x as u64 - 1))) as u32;
    ((x as u64 * 341) >> 10) as u32
}

impl Cubic {
    /// CUBIC with Linux's default parameters.
    pub fn new() -> Cubic {
        Cubic::with_params(CubicParams::default())
    }

    /// CUBIC with the given module parameters.
    pub fn with_params(params: CubicParams) -> Cubic {
        Cubic {
            params,
            curr_rtt: u32::MAX,
            ..Default::default()
        }
    }

    /// `bictcp_reset`: everything up to `unused` in `struct bictcp`, and `found`.
    fn reset(&mut self) {
        *self = Cubic {
            sample_cnt: self.sample_cnt,
            round_start: self.round_start,
            end_seq: self.end_seq,
            last_ack: self.last_ack,
            curr_rtt: self.curr_rtt,
            last_ctx: self.last_ctx,
            inited: self.inited,
            ..Cubic::with_params(self.params)
        };
    }

    /// `bictcp_hystart_reset`: a new HyStart round starts now and ends at snd_nxt.
    fn hystart_reset(&mut self, ctx: &CaCtx) {
        self.hystart_reset_at(ctx.now, ctx.snd_nxt);
    }

    /// [`Cubic::hystart_reset`] from `now` to `snd_nxt`.
    fn hystart_reset_at(&mut self, now: Instant, snd_nxt: u64) {
        self.round_start = clock_us(now);
        self.last_ack = self.round_start;
        self.end_seq = snd_nxt;
        self.curr_rtt = u32::MAX;
        self.sample_cnt = 0;
    }

    /// `bictcp_update`: recomputes `cnt`, the ACKs per one-segment increase, from the
    /// cubic curve and the Reno estimate.
    pub fn update(&mut self, cwnd: u32, acked: u32, now: Instant) {
        let jiffies = jiffies32(now);
        self.ack_cnt = self.ack_cnt.wrapping_add(acked);
        // At most every HZ/32 for an unchanged window (Linux 6.x "at least once per RTT").
        if self.last_cwnd == cwnd
            && (jiffies.wrapping_sub(self.last_time) as i32) <= (HZ / 32) as i32
        {
            return;
        }
        // The cubic function updates cnt at most once per jiffy.
        if !(self.epoch_start.is_some() && jiffies == self.last_time) {
            self.last_cwnd = cwnd;
            self.last_time = jiffies;
            self.cubic_cnt(cwnd, acked, jiffies);
        }
        if self.params.tcp_friendliness {
            self.friendliness(cwnd);
        }
        // At most one segment per two ACKed: cwnd grows at most 1.5x per RTT.
        self.cnt = self.cnt.max(2);
    }

    /// The cubic part of `bictcp_update`: starts an epoch if needed, then sets `cnt`
    /// so that cwnd reaches W(t + delay_min) in one RTT.
    fn cubic_cnt(&mut self, cwnd: u32, acked: u32, jiffies: u32) {
        let epoch_start = *self.epoch_start.get_or_insert_with(|| {
            self.ack_cnt = acked;
            self.tcp_cwnd = cwnd;
            if self.last_max_cwnd <= cwnd {
                self.bic_k = 0;
                self.bic_origin_point = cwnd;
            } else {
                // K = cbrt((W_max - cwnd) / C), in 2^-10 s.
                let diff = (self.last_max_cwnd - cwnd) as u64;
                self.bic_k = cubic_root(self.params.cube_factor() * diff);
                self.bic_origin_point = self.last_max_cwnd;
            }
            jiffies
        });
        // t = elapsed + min RTT, in 2^-10 s.
        let mut t = jiffies.wrapping_sub(epoch_start) as i32 as i64 as u64;
        t += usecs_to_jiffies(self.delay_min) as u64;
        t = (t << BICTCP_HZ) / HZ as u64;
        let bic_target = self.bic_target(t);
        self.cnt = if bic_target > cwnd {
            cwnd / (bic_target - cwnd)
        } else {
            100 * cwnd // very small increment
        };
        // Before any loss the bandwidth is unknown: grow at least 5 % per RTT.
        if self.last_max_cwnd == 0 && self.cnt > 20 {
            self.cnt = 20;
        }
    }

    /// W(t) = C * (t - K)^3 + origin (RFC 9438 eq. 1), `t` in 2^-10 s since the epoch
    /// start; C = cube_rtt_scale / 2^10, computed as Linux does in 64 bits.
    pub fn bic_target(&self, t: u64) -> u32 {
        let k = self.bic_k as u64;
        let offs = t.abs_diff(k);
        let delta = ((self.params.cube_rtt_scale() as u64)
            .wrapping_mul(offs)
            .wrapping_mul(offs)
            .wrapping_mul(offs)
            >> (10 + 3 * BICTCP_HZ)) as u32;
        if t < k {
            self.bic_origin_point.wrapping_sub(delta)
        } else {
            self.bic_origin_point.wrapping_add(delta)
        }
    }

    /// `tcp_friendliness` in `bictcp_update`
    /// ([RFC 9438 section 4.3](https://www.rfc-editor.org/rfc/rfc9438#section-4.3),
    /// Reno-friendly region): Reno's window grows one segment per `cwnd * beta_scale / 8`
    /// ACKs; if it is ahead of cwnd, grow at least as fast.
    fn friendliness(&mut self, cwnd: u32) {
        let delta = ((cwnd * self.params.beta_scale()) >> 3).max(1);
        // Linux loops `while (ack_cnt > delta)`; the same by division (as bpf_cubic).
        if self.ack_cnt > delta {
            let n = (self.ack_cnt - 1) / delta;
            self.ack_cnt -= n * delta;
            self.tcp_cwnd += n;
        }
        if self.tcp_cwnd > cwnd {
            let max_cnt = cwnd / (self.tcp_cwnd - cwnd);
            self.cnt = self.cnt.min(max_cnt);
        }
    }

    /// `hystart_ack_delay`: allowance for TSO/GRO aggregation, the time to send four
    /// GSO packets of `sk_gso_max_size` ([`SK_GSO_MAX_SIZE`]) at the pacing rate,
    /// capped at 1 ms.
    fn hystart_ack_delay(ctx: &CaCtx) -> u32 {
        if ctx.pacing_rate == 0 {
            return 0;
        }
        (SK_GSO_MAX_SIZE as u64 * 4 * 1_000_000 / ctx.pacing_rate).min(1000) as u32
    }

    /// `hystart_update`: looks for the slow start exit point; sets ssthresh to cwnd
    /// there.
    fn hystart_update(&mut self, cw: &mut CwndState, delay: u32, ctx: &CaCtx) {
        if ctx.snd_una > self.end_seq {
            self.hystart_reset(ctx);
        }
        if cw.snd_cwnd < self.params.hystart_low_window {
            return;
        }
        if self.params.hystart_detect & HYSTART_ACK_TRAIN != 0 {
            let now = clock_us(ctx.now);
            // First detector: the ACK train of one round lasts past delay_min / 2.
            if (now.wrapping_sub(self.last_ack) as i32) <= self.params.hystart_ack_delta_us as i32 {
                self.last_ack = now;
                let mut threshold = self.delay_min + Self::hystart_ack_delay(ctx);
                // Pacing may have spread the train over up to RTT/2 in slow start.
                if !ctx.paced {
                    threshold >>= 1;
                }
                if (now.wrapping_sub(self.round_start) as i32) > threshold as i32 {
                    self.found = true;
                    self.mib.hystart_train_cwnd = Some(cw.snd_cwnd);
                    cw.snd_ssthresh = cw.snd_cwnd;
                }
            }
        }
        if self.params.hystart_detect & HYSTART_DELAY != 0 {
            // Second detector: the round's minimum RTT rose over delay_min + eta.
            self.curr_rtt = self.curr_rtt.min(delay);
            if self.sample_cnt < HYSTART_MIN_SAMPLES {
                self.sample_cnt += 1;
            } else if self.curr_rtt > self.delay_min + hystart_delay_thresh(self.delay_min >> 3) {
                self.found = true;
                self.mib.hystart_delay_cwnd = Some(cw.snd_cwnd);
                cw.snd_ssthresh = cw.snd_cwnd;
            }
        }
    }
}

impl CongestionOps for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    /// The module parameters are globals that every hook reads live.
    fn module_params_changed(&mut self, cfg: &crate::Config) {
        self.params = CubicParams::from_cfg(cfg);
    }

    /// `cubictcp_init` (`tcp_init_congestion_control`, when the connection is
    /// established or gets CUBIC by `TCP_CONGESTION`): everything reset, a HyStart
    /// round from now to `snd_nxt`; with HyStart off, `initial_ssthresh` if set.
    fn init(&mut self, ctx: &mut super::CcContext) {
        self.reset();
        self.inited = true;
        if self.params.hystart {
            self.hystart_reset_at(ctx.now, ctx.snd_nxt);
        } else if self.params.initial_ssthresh != 0 {
            ctx.cw.snd_ssthresh = self.params.initial_ssthresh;
        }
    }

    /// `cubictcp_recalc_ssthresh`: W_max (lowered further by fast convergence when the
    /// window did not regain the last W_max), then `cwnd * beta`.
    fn ssthresh(&mut self, cw: &CwndState) -> u32 {
        let cwnd = cw.snd_cwnd;
        self.epoch_start = None; // end of epoch
        self.last_max_cwnd = if cwnd < self.last_max_cwnd && self.params.fast_convergence {
            (cwnd as u64 * (BICTCP_BETA_SCALE + self.params.beta) as u64
                / (2 * BICTCP_BETA_SCALE) as u64) as u32
        } else {
            cwnd
        };
        ((cwnd as u64 * self.params.beta as u64 / BICTCP_BETA_SCALE as u64) as u32).max(2)
    }

    /// `cubictcp_cong_avoid`: slow start, then one segment per `cnt` ACKed.
    fn cong_avoid(&mut self, cw: &mut CwndState, acked: u32, ctx: &CaCtx) {
        self.last_ctx = Some(*ctx);
        if !cw.is_cwnd_limited() {
            return;
        }
        let mut acked = acked;
        if cw.in_slow_start() {
            acked = cw.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        self.update(cw.snd_cwnd, acked, ctx.now);
        cw.cong_avoid_ai(self.cnt, acked);
    }

    /// `cubictcp_state`: an RTO forgets everything but the HyStart round.
    fn set_state(&mut self, _cw: &mut CwndState, _old: CaState, new: CaState) {
        if new == CaState::Loss {
            self.reset();
            if let Some(ctx) = self.last_ctx {
                self.hystart_reset(&ctx);
            }
        }
    }

    /// `cubictcp_cwnd_event`: on the first transmission after idle, shift the epoch by
    /// the idle time so the curve does not jump ahead.
    fn cwnd_event(&mut self, _cw: &mut CwndState, ev: CaEvent, ctx: &CaCtx) {
        self.last_ctx = Some(*ctx);
        if ev != CaEvent::TxStart {
            return;
        }
        let now = jiffies32(ctx.now);
        let delta = now.wrapping_sub(jiffies32(ctx.lsndtime)) as i32;
        if let Some(start) = self.epoch_start.as_mut() {
            if delta > 0 {
                *start = start.wrapping_add(delta as u32);
                if (start.wrapping_sub(now) as i32) > 0 {
                    *start = now; // after(epoch_start, now)
                }
            }
        }
    }

    /// `cubictcp_acked`: tracks delay_min and runs HyStart in slow start.
    fn pkts_acked(&mut self, cw: &mut CwndState, sample: &AckSample, ctx: &CaCtx) {
        self.last_ctx = Some(*ctx);
        if !self.inited {
            // No cubictcp_init ran: the round it would have started ends at this
            // first ACK anyway.
            self.inited = true;
            self.hystart_reset(ctx);
        }
        let Some(rtt_us) = sample.rtt_us else { return };
        // Discard delay samples right after fast recovery.
        if let Some(start) = self.epoch_start {
            if (jiffies32(ctx.now).wrapping_sub(start) as i32) < HZ as i32 {
                return;
            }
        }
        let delay = rtt_us.max(1);
        if self.delay_min == 0 || self.delay_min > delay {
            self.delay_min = delay;
        }
        if !self.found && cw.in_slow_start() && self.params.hystart {
            self.hystart_update(cw, delay, ctx);
        }
    }

    fn take_mib(&mut self) -> CaMib {
        core::mem::take(&mut self.mib)
    }

    /// `tcp_reno_undo_cwnd`, as Linux's cubictcp uses.
    fn undo_cwnd(&mut self, cw: &CwndState, prior_cwnd: u32) -> u32 {
        cw.snd_cwnd.max(prior_cwnd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::time::Duration;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn ctx(now: Instant, snd_una: u64, snd_nxt: u64) -> CaCtx {
        CaCtx {
            now,
            snd_una,
            snd_nxt,
            ..Default::default()
        }
    }

    fn exact_cbrt(a: u64) -> f64 {
        (a as f64).cbrt()
    }

    /// hystart_ack_delay: four sk_gso_max_size (65279-byte) packets at the pacing
    /// rate, at most 1 ms; none without a rate.
    #[test]
    fn hystart_ack_delay_is_four_sk_gso_max_size_packets() {
        let rated = |pacing_rate| CaCtx {
            pacing_rate,
            ..Default::default()
        };
        assert_eq!(Cubic::hystart_ack_delay(&rated(0)), 0);
        // 65279 * 4 / 10^9 s = 261.1 us (65536 would give 262).
        assert_eq!(Cubic::hystart_ack_delay(&rated(1_000_000_000)), 261);
        assert_eq!(Cubic::hystart_ack_delay(&rated(261_116_000)), 1000);
        assert_eq!(Cubic::hystart_ack_delay(&rated(100_000_000)), 1000);
    }

    /// A connection that lost at cwnd 100 and is now at its ssthresh (70).
    fn after_loss_at_100(params: CubicParams) -> (Cubic, CwndState) {
        let mut c = Cubic::with_params(params);
        let mut cw = CwndState::new(100);
        cw.is_cwnd_limited = true;
        cw.snd_ssthresh = c.ssthresh(&cw);
        cw.snd_cwnd = cw.snd_ssthresh;
        (c, cw)
    }

    #[test]
    fn register_constants() {
        let p = CubicParams::default();
        // 8 * 1741 / 3 = 4642, / 307 = 15.
        assert_eq!(p.beta_scale(), 15);
        assert_eq!(p.cube_rtt_scale(), 410);
        // 2^40 / 410.
        assert_eq!(p.cube_factor(), 2_681_735_677);
    }

    #[test]
    fn ssthresh_is_cwnd_times_717_over_1024() {
        for (cwnd, want) in [(10, 7), (100, 70), (1000, 700), (2, 2), (1, 2), (48, 33)] {
            let mut c = Cubic::new();
            let mut cw = CwndState::new(cwnd);
            cw.snd_cwnd = cwnd;
            assert_eq!(c.ssthresh(&cw), want, "cwnd {cwnd}");
            assert_eq!(c.last_max_cwnd, cwnd);
            assert_eq!(c.epoch_start, None);
        }
    }

    #[test]
    fn cubic_root_is_within_linux_error() {
        // Small values come straight from the table.
        assert_eq!(cubic_root(0), 0);
        assert_eq!(cubic_root(1), 1);
        assert_eq!(cubic_root(8), 2);
        assert_eq!(cubic_root(27), 3);
        assert_eq!(cubic_root(64), 4);
        assert_eq!(cubic_root(1_000_000), 100);
        // Small arguments are coarse (cubic_root(100) = 5, exact 4.64); CUBIC's are at
        // least cube_factor = 2.7e9.
        assert_eq!(cubic_root(100), 5);
        let mut a = 1u64 << 31;
        while a < 1 << 60 {
            let got = cubic_root(a) as f64;
            let want = exact_cbrt(a);
            assert!(
                (got - want).abs() / want < 0.01,
                "cbrt({a}) = {got}, exact {want}"
            );
            a = a * 7 / 3;
        }
    }

    #[test]
    fn k_for_wmax_100() {
        // W_max = 100, beta 0.7 -> cwnd 70; RFC 9438: K = cbrt(W_max (1 - beta) / C)
        // = cbrt(30 / 0.4) = 4.217 s. Linux's C is 410/1024 = 0.4004, so in units of
        // 2^-10 s K = cbrt(2681735677 * 30) = 4316.97 (4.2158 s).
        let (mut c, cw) = after_loss_at_100(CubicParams::default());
        assert_eq!(cw.snd_cwnd, 70);
        c.update(70, 1, at(1000));
        let exact = exact_cbrt(2_681_735_677 * 30);
        assert!((exact - 4316.97).abs() < 0.01, "{exact}");
        let k = c.bic_k as f64;
        assert!((k - exact).abs() / exact < 0.002, "bic_K {k} vs {exact}");
        assert_eq!(c.bic_k, cubic_root(2_681_735_677 * 30));
        assert!((k / 1024.0 - 4.217).abs() < 0.01, "K = {} s", k / 1024.0);
        assert_eq!(c.bic_origin_point, 100);
        assert_eq!(c.epoch_start, Some(1000));
    }

    #[test]
    fn w_of_t_follows_the_cubic() {
        let (mut c, _) = after_loss_at_100(CubicParams::default());
        c.update(70, 1, at(0));
        let k = c.bic_k as u64;
        // W(t) = 100 + 0.4004 (t - K)^3, t in seconds, floored like Linux.
        assert_eq!(c.bic_target(k), 100);
        assert_eq!(c.bic_target(k + 1024), 100); // +0.40
        assert_eq!(c.bic_target(k + 2048), 103); // +3.20
        assert_eq!(c.bic_target(k + 3 * 1024), 110); // +10.81
        assert_eq!(c.bic_target(k + 5 * 1024), 150); // +50.05
        assert_eq!(c.bic_target(k - 2048), 97); // -3.20
        assert_eq!(c.bic_target(k - 3 * 1024), 90); // -10.81
                                                    // At the epoch start the curve is back at cwnd (100 - 0.4004 * K^3 = 70).
        let w0 = c.bic_target(0);
        assert!((69..=71).contains(&w0), "W(0) = {w0}");
    }

    #[test]
    fn cnt_reaches_target_in_one_rtt() {
        // Epoch starts at cwnd 90 under W_max 100: K = cbrt(10 / 0.4004) = 2.923 s.
        // 5 s later with a 100 ms RTT, cnt aims at W(5.1 s) = 100 + 0.4004 *
        // (5.1 - 2.923)^3 = 104.1 -> 104, so cnt = 90 / (104 - 90) = 6.
        let (mut c, _) = after_loss_at_100(CubicParams::default());
        c.delay_min = 100_000;
        c.update(90, 1, at(0));
        assert!(
            (c.bic_k as f64 / 1024.0 - 2.923).abs() < 0.01,
            "K {}",
            c.bic_k
        );
        c.update(90, 1, at(5000));
        let t = (5000 + 100) * 1024 / 1000;
        assert_eq!(c.bic_target(t), 104);
        assert_eq!(c.cnt, 6);
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut c = Cubic::new();
        let mut cw = CwndState::new(100);
        assert_eq!(c.ssthresh(&cw), 70);
        assert_eq!(c.last_max_cwnd, 100);
        // Lost again before regaining W_max: W_max = 90 * (1 + 0.7) / 2 = 76.5 -> 76.
        cw.snd_cwnd = 90;
        assert_eq!(c.ssthresh(&cw), 63);
        assert_eq!(c.last_max_cwnd, 76);
        // Without fast convergence W_max is the window at the loss.
        let mut c = Cubic::with_params(CubicParams {
            fast_convergence: false,
            ..Default::default()
        });
        cw.snd_cwnd = 100;
        c.ssthresh(&cw);
        cw.snd_cwnd = 90;
        assert_eq!(c.ssthresh(&cw), 63);
        assert_eq!(c.last_max_cwnd, 90);
    }

    #[test]
    fn reno_friendly_region_single_update() {
        // Epoch start at cwnd 70 (W_max 100), then 300 ACKs 40 ms later: the cubic
        // curve has barely moved (cnt >= 70) but Reno's estimate grew by
        // 300 / (70 * 15 / 8 = 131) = 2 segments, so cnt = 70 / 2 = 35.
        let (mut c, _) = after_loss_at_100(CubicParams::default());
        c.update(70, 1, at(0));
        c.update(70, 300, at(40));
        assert_eq!(c.tcp_cwnd, 72);
        assert_eq!(c.ack_cnt, 301 - 2 * 131);
        assert_eq!(c.cnt, 35);
        let (mut c, _) = after_loss_at_100(CubicParams {
            tcp_friendliness: false,
            ..Default::default()
        });
        c.update(70, 1, at(0));
        c.update(70, 300, at(40));
        assert!(c.cnt >= 70, "cnt {}", c.cnt);
    }

    /// Runs `rtts` round trips of `rtt_ms`, each ACKing one window.
    fn run_ca(params: CubicParams, rtt_ms: u64, rtts: u64) -> u32 {
        let (mut c, mut cw) = after_loss_at_100(params);
        for i in 0..rtts {
            let x = ctx(at(10_000 + i * rtt_ms), 0, 0);
            for _ in 0..cw.snd_cwnd {
                c.cong_avoid(&mut cw, 1, &x);
            }
        }
        cw.snd_cwnd
    }

    #[test]
    fn reno_friendly_region_takes_over_at_small_rtt() {
        // 200 RTTs of 1 ms: the cubic curve gives W(0.2 s) = 100 - 0.4 * 4.0^3 = 74,
        // Reno with beta 0.7 (RFC 9438 alpha = 3 * 0.3 / 1.7 = 0.53 per RTT) gives
        // 70 + 0.53 * 200 = 176.
        let on = run_ca(CubicParams::default(), 1, 200);
        let off = run_ca(
            CubicParams {
                tcp_friendliness: false,
                ..Default::default()
            },
            1,
            200,
        );
        assert!((165..=185).contains(&on), "friendly cwnd {on}");
        assert!((70..=76).contains(&off), "pure cubic cwnd {off}");
        // At 100 ms RTT, 60 RTTs = 6 s: the cubic curve (100 + 0.4 * 1.8^3 = 102) is
        // ahead of Reno (70 + 0.53 * 60 = 102) or level; both end near 102.
        let on = run_ca(CubicParams::default(), 100, 60);
        assert!((100..=106).contains(&on), "cwnd {on}");
    }

    #[test]
    fn hystart_ack_train_exits_slow_start() {
        let mut c = Cubic::new();
        let mut cw = CwndState::new(32);
        let s = |rtt| AckSample {
            pkts_acked: 2,
            rtt_us: Some(rtt),
            in_flight: 32,
            now: Instant::ZERO,
        };
        // First ACK at 1000 ms starts the round (ends at snd_nxt 64_000); min RTT 10 ms.
        c.pkts_acked(&mut cw, &s(10_000), &ctx(at(1000), 2_000, 64_000));
        // ACKs 1 ms apart (< hystart_ack_delta_us): the train passes delay_min / 2 =
        // 5 ms at the ACK 6 ms after the round start.
        for i in 1..=5 {
            c.pkts_acked(
                &mut cw,
                &s(10_000),
                &ctx(at(1000 + i), 2_000 + i * 2000, 64_000),
            );
            assert_eq!(cw.snd_ssthresh, super::super::INFINITE_SSTHRESH, "ack {i}");
        }
        assert_eq!(c.take_mib(), CaMib::default());
        c.pkts_acked(&mut cw, &s(10_000), &ctx(at(1006), 14_000, 64_000));
        assert!(c.found);
        assert_eq!(cw.snd_ssthresh, 32);
        assert!(!cw.in_slow_start());
        // TcpExtTCPHystartTrainDetect and TrainCwnd, once.
        let m = c.take_mib();
        assert_eq!(
            (m.hystart_train_cwnd, m.hystart_delay_cwnd),
            (Some(32), None)
        );
        assert_eq!(c.take_mib(), CaMib::default());
    }

    /// Eight ACKs `gap` ms apart with 10 ms RTT samples at a window of `cwnd`;
    /// returns the window after them.
    fn ack_train(c: &mut Cubic, cwnd: u32, gap: u64) -> CwndState {
        let mut cw = CwndState::new(cwnd);
        let s = AckSample {
            pkts_acked: 1,
            rtt_us: Some(10_000),
            in_flight: cwnd,
            now: Instant::ZERO,
        };
        for i in 0..8 {
            c.pkts_acked(&mut cw, &s, &ctx(at(1000 + i * gap), 1 + i, 1_000_000));
        }
        cw
    }

    #[test]
    fn hystart_ack_train_needs_close_acks_and_low_window() {
        // ACKs 3 ms apart are not a train; below hystart_low_window nothing happens.
        for (gap, cwnd) in [(3, 32), (1, 15)] {
            let mut c = Cubic::new();
            let cw = ack_train(&mut c, cwnd, gap);
            assert!(!c.found, "gap {gap} cwnd {cwnd}");
            assert!(cw.in_slow_start());
        }
    }

    /// `hystart_low_window` and `hystart_ack_delta_us` are module parameters read
    /// at each ACK: a 15-segment window or ACKs 3 ms apart make a train with them
    /// lowered or raised.
    #[test]
    fn hystart_low_window_and_ack_delta_are_live_module_parameters() {
        for (gap, cwnd, cfg) in [
            (1, 15, ("module.tcp_cubic.hystart_low_window", "8")),
            (3, 32, ("module.tcp_cubic.hystart_ack_delta_us", "4000")),
        ] {
            let mut c = Cubic::new();
            let mut conf = crate::Config::default();
            conf.set(cfg.0, cfg.1).unwrap();
            c.module_params_changed(&conf);
            let cw = ack_train(&mut c, cwnd, gap);
            assert!(c.found, "{cfg:?}");
            assert_eq!(cw.snd_ssthresh, cwnd);
        }
    }

    /// `cubictcp_init` through the engine's `init` hook.
    fn init_at(c: &mut Cubic, cw: &mut CwndState, now: Instant, snd_nxt: u64) {
        super::super::with_test_cc_context(cw, now, (snd_nxt, 0), false, |cc| c.init(cc));
    }

    #[test]
    fn init_resets_and_starts_a_round_or_sets_initial_ssthresh() {
        let mut c = Cubic::new();
        let mut cw = CwndState::new(10);
        c.delay_min = 5_000;
        c.epoch_start = Some(3);
        init_at(&mut c, &mut cw, at(2000), 1);
        assert_eq!((c.delay_min, c.epoch_start), (0, None));
        assert_eq!((c.round_start, c.end_seq), (2_000_000, 1));
        assert_eq!(cw.snd_ssthresh, super::super::INFINITE_SSTHRESH);
        // initial_ssthresh applies only with HyStart off.
        let mut conf = crate::Config::default();
        conf.set("module.tcp_cubic.initial_ssthresh", "20").unwrap();
        let mut c = Cubic::with_params(CubicParams::from_cfg(&conf));
        init_at(&mut c, &mut cw, at(2000), 1);
        assert_eq!(cw.snd_ssthresh, super::super::INFINITE_SSTHRESH);
        conf.set("module.tcp_cubic.hystart", "0").unwrap();
        let mut c = Cubic::with_params(CubicParams::from_cfg(&conf));
        init_at(&mut c, &mut cw, at(2000), 1);
        assert_eq!(cw.snd_ssthresh, 20);
    }

    /// One round of `n` ACKs 5 ms apart (no train) with the given RTT; the round
    /// ends at `end`.
    fn delay_round(c: &mut Cubic, cw: &mut CwndState, t0: u64, una0: u64, n: u64, rtt: u32) {
        for i in 0..n {
            let s = AckSample {
                pkts_acked: 1,
                rtt_us: Some(rtt),
                in_flight: cw.snd_cwnd,
                now: Instant::ZERO,
            };
            c.pkts_acked(cw, &s, &ctx(at(t0 + i * 5), una0 + i, una0 + 1000));
        }
    }

    #[test]
    fn hystart_delay_exits_slow_start() {
        let mut c = Cubic::new();
        let mut cw = CwndState::new(20);
        // Round 1: min RTT 10 ms, so eta = clamp(10 / 8, 4, 16) = 4 ms.
        delay_round(&mut c, &mut cw, 1000, 1, 10, 10_000);
        assert_eq!(c.delay_min, 10_000);
        assert!(!c.found);
        // Round 2 (snd_una passed end_seq): RTT 15 ms > 10 + 4. The first 8 samples
        // only count; the 9th makes the check.
        delay_round(&mut c, &mut cw, 2000, 2000, 8, 15_000);
        assert!(!c.found);
        assert_eq!(c.sample_cnt, 8);
        assert_eq!(c.take_mib(), CaMib::default());
        delay_round(&mut c, &mut cw, 2100, 2100, 1, 15_000);
        assert!(c.found);
        assert_eq!(cw.snd_ssthresh, 20);
        let m = c.take_mib();
        assert_eq!(
            (m.hystart_train_cwnd, m.hystart_delay_cwnd),
            (None, Some(20))
        );
        // 13.9 ms would not have been enough.
        let mut c = Cubic::new();
        let mut cw = CwndState::new(20);
        delay_round(&mut c, &mut cw, 1000, 1, 10, 10_000);
        delay_round(&mut c, &mut cw, 2000, 2000, 20, 13_900);
        assert!(!c.found);
    }

    #[test]
    fn hystart_delay_threshold_clamps() {
        assert_eq!(hystart_delay_thresh(200_000 >> 3), 16_000);
        assert_eq!(hystart_delay_thresh(40_000 >> 3), 5_000);
        assert_eq!(hystart_delay_thresh(1_000 >> 3), 4_000);
    }

    #[test]
    fn tx_start_after_idle_shifts_epoch() {
        let mut c = Cubic::new();
        let mut cw = CwndState::new(10);
        c.epoch_start = Some(100);
        let idle = CaCtx {
            now: at(1200),
            lsndtime: at(200),
            ..Default::default()
        };
        c.cwnd_event(&mut cw, CaEvent::TxStart, &idle);
        assert_eq!(c.epoch_start, Some(1100));
        // Never past now.
        c.epoch_start = Some(1150);
        c.cwnd_event(&mut cw, CaEvent::TxStart, &idle);
        assert_eq!(c.epoch_start, Some(1200));
        // No epoch: nothing to shift.
        c.epoch_start = None;
        c.cwnd_event(&mut cw, CaEvent::TxStart, &idle);
        assert_eq!(c.epoch_start, None);
    }

    #[test]
    fn loss_state_resets_all_but_the_round() {
        let (mut c, mut cw) = after_loss_at_100(CubicParams::default());
        c.found = true;
        c.delay_min = 5000;
        c.update(70, 1, at(10));
        let x = ctx(at(3000), 500, 9000);
        c.cwnd_event(&mut cw, CaEvent::Loss, &x);
        c.set_state(&mut cw, CaState::Open, CaState::Loss);
        assert_eq!(c.last_max_cwnd, 0);
        assert_eq!(c.epoch_start, None);
        assert_eq!(c.delay_min, 0);
        assert!(!c.found);
        assert_eq!(c.end_seq, 9000);
        assert_eq!(c.round_start, 3_000_000);
        assert_eq!(c.curr_rtt, u32::MAX);
    }

    #[test]
    fn before_any_loss_cnt_is_at_most_20() {
        // last_max_cwnd 0: grow at least 5 % per RTT.
        let mut c = Cubic::new();
        c.update(100, 1, at(0));
        c.update(101, 1, at(100));
        assert_eq!(c.cnt, 20);
    }

    #[test]
    fn slow_start_then_at_most_one_per_two_acks() {
        let mut c = Cubic::new();
        let mut cw = CwndState::new(10);
        cw.is_cwnd_limited = true;
        cw.snd_ssthresh = 12;
        c.cong_avoid(&mut cw, 4, &ctx(at(0), 0, 0));
        assert_eq!(cw.snd_cwnd, 12);
        // Far below the curve (W_max 1000, plateau reached): cnt = max(12 / 988, 2).
        c.last_max_cwnd = 1000;
        c.bic_origin_point = 1000;
        c.bic_k = 0;
        c.cong_avoid(&mut cw, 1, &ctx(at(50), 0, 0));
        assert_eq!(c.cnt, 2);
    }
}
