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

use super::{AckSample, CaCtx, CaEvent, CaState, CongestionOps, CwndState};
use crate::time::Instant;

/// `BICTCP_BETA_SCALE`: beta is in 1/1024.
pub const BICTCP_BETA_SCALE: u32 = 1024;
/// `BICTCP_HZ`: CUBIC's time unit is 2^-10 s.
pub const BICTCP_HZ: u32 = 10;
/// Linux `HZ` that `tcp_jiffies32` counts in (CONFIG_HZ=1000).
pub const HZ: u32 = 1000;
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
/// `sk_gso_max_size` used by `hystart_ack_delay` (`GSO_LEGACY_MAX_SIZE`).
const GSO_MAX_SIZE: u64 = super::super::sock::GSO_MAX_SIZE as u64;

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
        }
    }
}

impl CubicParams {
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
    /// `cubictcp_init` ran (lowtide has no init hook: the first ACK runs it).
    inited: bool,
    /// The last context a hook saw; `set_state` gets none, and `tcp_enter_loss` always
    /// raises `CA_EVENT_LOSS` just before entering Loss.
    last_ctx: Option<CaCtx>,
}

/// `bictcp_clock_us`: `tcp_mstamp` as Linux's wrapping u32 microseconds.
fn clock_us(now: Instant) -> u32 {
    now.as_micros() as u32
}

/// `tcp_jiffies32` with HZ = 1000.
fn jiffies32(now: Instant) -> u32 {
    now.as_millis() as u32
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
    (x as u64 * 341 >> 10) as u32
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
        self.round_start = clock_us(ctx.now);
        self.last_ack = self.round_start;
        self.end_seq = ctx.snd_nxt;
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
        let k = self.bic_k as u64;
        let offs = t.abs_diff(k);
        // C * (t - K)^3, with C = cube_rtt_scale / 2^10 and time in 2^-10 s.
        let delta = ((self.params.cube_rtt_scale() as u64)
            .wrapping_mul(offs)
            .wrapping_mul(offs)
            .wrapping_mul(offs)
            >> (10 + 3 * BICTCP_HZ)) as u32;
        let bic_target = if t < k {
            self.bic_origin_point.wrapping_sub(delta)
        } else {
            self.bic_origin_point.wrapping_add(delta)
        };
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

    /// `tcp_friendliness` in `bictcp_update` (RFC 9438 section 4.3, Reno-friendly
    /// region): Reno's window grows one segment per `cwnd * beta_scale / 8` ACKs; if
    /// it is ahead of cwnd, grow at least as fast.
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
    /// GSO packets at the pacing rate, capped at 1 ms.
    fn hystart_ack_delay(ctx: &CaCtx) -> u32 {
        if ctx.pacing_rate == 0 {
            return 0;
        }
        (GSO_MAX_SIZE * 4 * 1_000_000 / ctx.pacing_rate).min(1000) as u32
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
                cw.snd_ssthresh = cw.snd_cwnd;
            }
        }
    }
}

impl CongestionOps for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
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
        if !cw.is_cwnd_limited {
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
    fn set_state(&mut self, _cw: &mut CwndState, new: CaState) {
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
            // cubictcp_init: Linux runs it when the connection is established; the
            // round it starts would end at this first ACK anyway.
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

    /// `tcp_reno_undo_cwnd`, as Linux's cubictcp uses.
    fn undo_cwnd(&mut self, cw: &CwndState, prior_cwnd: u32) -> u32 {
        cw.snd_cwnd.max(prior_cwnd)
    }
}
