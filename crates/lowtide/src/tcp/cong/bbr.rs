//! BBR v1 (Bottleneck Bandwidth and RTT), Linux's net/ipv4/tcp_bbr.c.
//!
//! On each ACK BBR updates a model of the path from the delivery-rate sample
//! ([`RateSample`], tcp_rate.c):
//! `bw = windowed_max(delivered / interval, 10 rounds)`,
//! `min_rtt = windowed_min(rtt, 10 s)`, then paces at `pacing_gain * bw` and caps
//! the flight at `cwnd_gain * bw * min_rtt` plus a quantization budget. A flow
//! starts in STARTUP (gain 2/ln 2), DRAINs the queue it built once the bandwidth
//! stops growing, then cycles PROBE_BW's pacing gains (5/4, 3/4, 1 x 6) and every
//! 10 s without a new min_rtt dips into PROBE_RTT (4 packets for 200 ms).
//!
//! Differences from Linux, all small: times are nanosecond [`Instant`]s rather than
//! jiffies and microsecond stamps; the per-connection random start phase comes from
//! a xorshift generator seeded with the ISS ([`CcContext::seed`]); hooks that Linux
//! gives the whole socket but lowtide does not (`set_state`, `undo_cwnd`) use the
//! `tcp_sock` values seen at the last ACK; `CA_EVENT_TX_START` reaches BBR through
//! [`CongestionOps::tx_start`], which gives it the socket view `bbr_cwnd_event` writes.

use super::minmax::MinMax;
use super::INFINITE_SSTHRESH;
use super::{CaCtx, CaEvent, CaState, CcContext, CongestionOps, CwndState, RateSample};
use crate::tcp::consts::{GSO_LEGACY_MAX_SIZE, MAX_TCP_HEADER, TCP_INIT_CWND};
use crate::time::Instant;
use core::time::Duration;

/// `BW_SCALE`: bandwidth is in packets per microsecond << 24.
const BW_SCALE: u32 = 24;
/// `BW_UNIT`.
const BW_UNIT: u64 = 1 << BW_SCALE;
/// `BBR_SCALE`: gains are fractions of 256.
const BBR_SCALE: u32 = 8;
/// `BBR_UNIT`: a gain of 1.0.
pub const BBR_UNIT: u32 = 1 << BBR_SCALE;

/// `CYCLE_LEN`: phases in the PROBE_BW gain cycle.
const CYCLE_LEN: usize = 8;
/// `bbr_bw_rtts`: window of the max-bandwidth filter, in rounds.
const BW_RTTS: u32 = CYCLE_LEN as u32 + 2;
/// `bbr_min_rtt_win_sec`: window of the min_rtt filter.
const MIN_RTT_WIN: Duration = Duration::from_secs(10);
/// `bbr_probe_rtt_mode_ms`: least time spent at 4 packets in PROBE_RTT.
const PROBE_RTT_MODE: Duration = Duration::from_millis(200);
/// `bbr_min_tso_rate`: below 1.2 Mbit/s, send single-segment packets.
const MIN_TSO_RATE_BPS: u64 = 1_200_000;
/// `bbr_pacing_margin_percent`: pace 1 % below the estimated bandwidth.
const PACING_MARGIN_PERCENT: u64 = 1;
/// `bbr_high_gain`: 2/ln(2), the smallest gain that doubles the rate every round.
pub const HIGH_GAIN: u32 = BBR_UNIT * 2885 / 1000 + 1;
/// `bbr_drain_gain`: 1/high_gain, to drain STARTUP's queue in about one round.
pub const DRAIN_GAIN: u32 = BBR_UNIT * 1000 / 2885;
/// `bbr_cwnd_gain`: steady-state cwnd, tolerant of delayed and stretched ACKs.
const CWND_GAIN: u32 = BBR_UNIT * 2;
/// `bbr_pacing_gain`: the PROBE_BW cycle (probe, drain, cruise x 6).
pub const PACING_GAIN: [u32; CYCLE_LEN] = [
    BBR_UNIT * 5 / 4,
    BBR_UNIT * 3 / 4,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
];
/// `bbr_cycle_rand`: the start phase is drawn among this many.
const CYCLE_RAND: u32 = 7;
/// `bbr_cwnd_min_target`: at least 4 packets, enough for ACK-every-other-packet.
const CWND_MIN_TARGET: u32 = 4;
/// `bbr_full_bw_thresh`: growth of 25 % means more bandwidth may be available.
const FULL_BW_THRESH: u32 = BBR_UNIT * 5 / 4;
/// `bbr_full_bw_cnt`: rounds without such growth before the pipe is deemed full.
const FULL_BW_CNT: u32 = 3;
/// `bbr_lt_intvl_min_rtts`: least rounds in a long-term sampling interval.
const LT_INTVL_MIN_RTTS: u32 = 4;
/// `bbr_lt_loss_thresh`: loss ratio (of 256) above which an interval is lossy.
const LT_LOSS_THRESH: u64 = 50;
/// `bbr_lt_bw_ratio`: two intervals within 1/8 of each other are consistent.
const LT_BW_RATIO: u64 = BBR_UNIT as u64 / 8;
/// `bbr_lt_bw_diff`: ... or within 4 kbit/s (in bytes per second).
const LT_BW_DIFF: u64 = 4000 / 8;
/// `bbr_lt_bw_max_rtts`: rounds to keep using the policed rate.
const LT_BW_MAX_RTTS: u32 = 48;
/// `bbr_extra_acked_gain`.
const EXTRA_ACKED_GAIN: u64 = BBR_UNIT as u64;
/// `bbr_extra_acked_win_rtts`: window of the ACK aggregation filter.
const EXTRA_ACKED_WIN_RTTS: u32 = 5;
/// `bbr_ack_epoch_acked_reset_thresh`.
const ACK_EPOCH_ACKED_RESET_THRESH: u32 = 1 << 20;
/// `bbr_extra_acked_max_us`: aggregation budget at most 100 ms of data.
const EXTRA_ACKED_MAX_US: u64 = 100_000;
/// `GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER`: the TSO goal's byte cap
/// (`bbr_tso_segs_goal` ignores the device's `sk_gso_max_size`).
const TSO_MAX_BYTES: u64 = (GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER) as u64;
/// `sk_pacing_shift` (10: about 1 ms of data per TSO packet).
const PACING_SHIFT: u32 = 10;

/// `enum bbr_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// `BBR_STARTUP`: ramp up the sending rate rapidly to fill the pipe.
    #[default]
    Startup,
    /// `BBR_DRAIN`: drain the queue STARTUP created.
    Drain,
    /// `BBR_PROBE_BW`: pace around the estimated bandwidth, cycling the gain.
    ProbeBw,
    /// `BBR_PROBE_RTT`: cut the flight to 4 packets to measure min_rtt.
    ProbeRtt,
}

/// The `tcp_sock` values BBR last saw (for hooks called without them).
#[derive(Debug, Clone, Copy, Default)]
struct Tp {
    delivered: u64,
    lost: u64,
    delivered_mstamp: Instant,
    mss: u32,
}

/// `struct bbr`: the BBR state of one connection.
#[derive(Debug, Default)]
pub struct Bbr {
    min_rtt_us: u32,
    min_rtt_stamp: Instant,
    probe_rtt_done_stamp: Option<Instant>,
    bw: MinMax,
    rtt_cnt: u32,
    next_rtt_delivered: u64,
    cycle_mstamp: Instant,
    mode: Mode,
    prev_ca_state: Option<CaState>,
    packet_conservation: bool,
    round_start: bool,
    idle_restart: bool,
    probe_rtt_round_done: bool,
    lt_is_sampling: bool,
    lt_rtt_cnt: u32,
    lt_use_bw: bool,
    lt_bw: u32,
    lt_last_delivered: u64,
    lt_last_stamp_ms: u64,
    lt_last_lost: u64,
    pacing_gain: u32,
    cwnd_gain: u32,
    full_bw_reached: bool,
    full_bw_cnt: u32,
    cycle_idx: usize,
    has_seen_rtt: bool,
    prior_cwnd: u32,
    full_bw: u32,
    ack_epoch_mstamp: Instant,
    extra_acked: [u32; 2],
    ack_epoch_acked: u32,
    extra_acked_win_rtts: u32,
    extra_acked_win_idx: usize,
    /// xorshift32 state for the random start phase (`get_random_u32_below`).
    rng: u32,
    tp: Tp,
}

impl Bbr {
    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// The current pacing gain (of [`BBR_UNIT`]).
    pub fn pacing_gain(&self) -> u32 {
        self.pacing_gain
    }
    /// The current cwnd gain (of [`BBR_UNIT`]).
    pub fn cwnd_gain(&self) -> u32 {
        self.cwnd_gain
    }
    /// The min_rtt estimate in microseconds.
    pub fn min_rtt_us(&self) -> u32 {
        self.min_rtt_us
    }
    /// `bbr_full_bw_reached`: STARTUP is estimated to have filled the pipe.
    pub fn full_bw_reached(&self) -> bool {
        self.full_bw_reached
    }
    /// `bbr_max_bw`: the windowed max bandwidth, in packets/us << 24.
    pub fn max_bw(&self) -> u32 {
        self.bw.get()
    }
    /// `bbr_bw`: the bandwidth estimate in packets/us << 24 (the policed rate
    /// `lt_bw` when one was detected).
    pub fn bw(&self) -> u32 {
        if self.lt_use_bw {
            self.lt_bw
        } else {
            self.max_bw()
        }
    }

    fn prev_ca_state(&self) -> CaState {
        self.prev_ca_state.unwrap_or(CaState::Open)
    }

    /// `get_random_u32_below(n)` from a per-connection deterministic sequence.
    fn random_below(&mut self, n: u32) -> u32 {
        let mut x = self.rng.max(1);
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        ((x as u64 * n as u64) >> 32) as u32
    }

    /// `bbr_rate_bytes_per_sec`: a rate in packets/us << 24 to bytes per second,
    /// with `gain` and the 1 % pacing margin.
    fn rate_bytes_per_sec(mss: u32, rate: u64, gain: u32) -> u64 {
        let mut r = rate as u128 * mss as u128;
        r *= gain as u128;
        r >>= BBR_SCALE;
        r *= (1_000_000 / 100 * (100 - PACING_MARGIN_PERCENT)) as u128;
        (r >> BW_SCALE).min(u64::MAX as u128) as u64
    }

    /// `bbr_bw_to_pacing_rate`.
    fn bw_to_pacing_rate(ctx: &CcContext, bw: u32, gain: u32) -> u64 {
        Self::rate_bytes_per_sec(ctx.mss, bw as u64, gain).min(ctx.max_pacing_rate)
    }

    /// `bbr_init_pacing_rate_from_rtt`: high_gain * initial cwnd / RTT (1 ms nominal
    /// before any sample).
    fn init_pacing_rate_from_rtt(&mut self, ctx: &mut CcContext) {
        let rtt_us = if ctx.srtt_us > 0 {
            self.has_seen_rtt = true;
            ctx.srtt_us.max(1)
        } else {
            1000
        };
        let bw = ctx.cw.snd_cwnd as u64 * BW_UNIT / rtt_us as u64;
        *ctx.pacing_rate = Self::bw_to_pacing_rate(ctx, bw.min(u32::MAX as u64) as u32, HIGH_GAIN);
    }

    /// `bbr_set_pacing_rate`: pace at `gain * bw`; never slower before the pipe is
    /// estimated full.
    fn set_pacing_rate(&mut self, ctx: &mut CcContext, bw: u32, gain: u32) {
        let rate = Self::bw_to_pacing_rate(ctx, bw, gain);
        if !self.has_seen_rtt && ctx.srtt_us > 0 {
            self.init_pacing_rate_from_rtt(ctx);
        }
        if self.full_bw_reached || rate > *ctx.pacing_rate {
            *ctx.pacing_rate = rate;
        }
    }

    /// `bbr_min_tso_segs`.
    fn min_tso_segs_at(pacing_rate: u64) -> u32 {
        if pacing_rate < MIN_TSO_RATE_BPS >> 3 {
            1
        } else {
            2
        }
    }

    /// `bbr_tso_segs_goal`: about 1 ms of data at the pacing rate, in segments.
    pub fn tso_segs_goal(pacing_rate: u64, mss: u32) -> u32 {
        let bytes = (pacing_rate >> PACING_SHIFT).min(TSO_MAX_BYTES);
        let segs = ((bytes / mss.max(1) as u64) as u32).max(Self::min_tso_segs_at(pacing_rate));
        segs.min(0x7f)
    }

    /// `bbr_save_cwnd`: remember the last good cwnd, to restore after recovery or
    /// PROBE_RTT.
    fn save_cwnd(&mut self, cw: &CwndState) {
        if self.prev_ca_state() < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = cw.snd_cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(cw.snd_cwnd);
        }
    }

    /// `bbr_bdp`: `ceil(bw * min_rtt * gain)` in packets.
    pub fn bdp(&self, bw: u32, gain: u32) -> u32 {
        if self.min_rtt_us == u32::MAX {
            return TCP_INIT_CWND; // no valid RTT sample yet
        }
        let w = bw as u64 * self.min_rtt_us as u64;
        let bdp = ((w as u128 * gain as u128) >> BBR_SCALE).div_ceil(BW_UNIT as u128);
        bdp.min(u32::MAX as u128) as u32
    }

    /// `bbr_quantization_budget`: room for full-sized skbs in the sender's qdisc and
    /// TSO engine and the receiver's GRO, rounded up to even (delayed ACKs), and two
    /// more packets in the probing phase so that small BDPs still probe.
    fn quantization_budget(&self, pacing_rate: u64, mss: u32, cwnd: u32) -> u32 {
        let mut cwnd = cwnd + 3 * Self::tso_segs_goal(pacing_rate, mss);
        cwnd = (cwnd + 1) & !1;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            cwnd += 2;
        }
        cwnd
    }

    /// `bbr_inflight`: the flight for `bw` and `gain`.
    fn inflight(&self, ctx: &CcContext, bw: u32, gain: u32) -> u32 {
        self.quantization_budget(*ctx.pacing_rate, ctx.mss, self.bdp(bw, gain))
    }

    /// `bbr_packets_in_net_at_edt`: packets in the network when the next packet
    /// departs, given what pacing has already scheduled.
    fn packets_in_net_at_edt(&self, ctx: &CcContext, inflight_now: u32) -> u32 {
        let edt = ctx.wstamp.max(ctx.now);
        let interval_us = edt.saturating_since(ctx.now).as_micros() as u64;
        let interval_delivered = (self.bw() as u64 * interval_us) >> BW_SCALE;
        let mut inflight_at_edt = inflight_now;
        if self.pacing_gain > BBR_UNIT {
            inflight_at_edt += Self::tso_segs_goal(*ctx.pacing_rate, ctx.mss);
        }
        if interval_delivered >= inflight_at_edt as u64 {
            return 0;
        }
        inflight_at_edt - interval_delivered as u32
    }

    /// `bbr_ack_aggregation_cwnd`: extra cwnd for ACK aggregation.
    fn ack_aggregation_cwnd(&self) -> u32 {
        if !self.full_bw_reached {
            return 0;
        }
        let max_aggr = self.bw() as u64 * EXTRA_ACKED_MAX_US / BW_UNIT;
        let extra = self.extra_acked[0].max(self.extra_acked[1]) as u64;
        ((EXTRA_ACKED_GAIN * extra) >> BBR_SCALE).min(max_aggr) as u32
    }

    /// `bbr_set_cwnd_to_recover_or_restore`: packet conservation in the first round
    /// of recovery, the saved cwnd back when recovery ends. Returns the cwnd and
    /// whether packet conservation decides it.
    fn set_cwnd_to_recover_or_restore(
        &mut self,
        ctx: &CcContext,
        rs: &RateSample,
        acked: u32,
    ) -> (u32, bool) {
        let (prev, state) = (self.prev_ca_state(), ctx.ca_state);
        let mut cwnd = ctx.cw.snd_cwnd;
        // An ACK for P packets should release at most 2P: first deduct the losses.
        if rs.losses > 0 {
            cwnd = cwnd.saturating_sub(rs.losses).max(1);
        }
        if state == CaState::Recovery && prev != CaState::Recovery {
            self.packet_conservation = true;
            self.next_rtt_delivered = ctx.delivered; // start the round now
                                                     // Cut unused cwnd left by the application, TSQ or TSO deferral.
            cwnd = ctx.packets_in_flight + acked;
        } else if prev >= CaState::Recovery && state < CaState::Recovery {
            cwnd = cwnd.max(self.prior_cwnd);
            self.packet_conservation = false;
        }
        self.prev_ca_state = Some(state);
        if self.packet_conservation {
            return (cwnd.max(ctx.packets_in_flight + acked), true);
        }
        (cwnd, false)
    }

    /// `bbr_set_cwnd`: slow start toward the target (bdp * gain + aggregation +
    /// quantization budget), or snap down to it once the pipe was filled.
    fn set_cwnd(&mut self, ctx: &mut CcContext, rs: &RateSample, acked: u32, bw: u32, gain: u32) {
        let mut cwnd = ctx.cw.snd_cwnd;
        if acked > 0 {
            let (c, conserving) = self.set_cwnd_to_recover_or_restore(ctx, rs, acked);
            cwnd = c;
            if !conserving {
                let target = self.bdp(bw, gain) + self.ack_aggregation_cwnd();
                let target = self.quantization_budget(*ctx.pacing_rate, ctx.mss, target);
                if self.full_bw_reached {
                    cwnd = (cwnd + acked).min(target);
                } else if cwnd < target || ctx.delivered < TCP_INIT_CWND as u64 {
                    cwnd += acked;
                }
                cwnd = cwnd.max(CWND_MIN_TARGET);
            }
        }
        ctx.cw.snd_cwnd = cwnd.min(ctx.cw.snd_cwnd_clamp);
        if self.mode == Mode::ProbeRtt {
            ctx.cw.snd_cwnd = ctx.cw.snd_cwnd.min(CWND_MIN_TARGET);
        }
    }

    /// `bbr_is_next_cycle_phase`: a phase lasts at least min_rtt; the probing phase
    /// also until the flight reaches 5/4 BDP (or a loss), the draining phase ends
    /// early once the flight is down to the BDP.
    fn is_next_cycle_phase(&self, ctx: &CcContext, rs: &RateSample) -> bool {
        let elapsed = ctx.delivered_mstamp.saturating_since(self.cycle_mstamp);
        let is_full_length = elapsed.as_micros() as u64 > self.min_rtt_us as u64;
        if self.pacing_gain == BBR_UNIT {
            return is_full_length;
        }
        let inflight = self.packets_in_net_at_edt(ctx, rs.prior_in_flight);
        let bw = self.max_bw();
        if self.pacing_gain > BBR_UNIT {
            return is_full_length
                && (rs.losses > 0 || inflight >= self.inflight(ctx, bw, self.pacing_gain));
        }
        is_full_length || inflight <= self.inflight(ctx, bw, BBR_UNIT)
    }

    /// `bbr_advance_cycle_phase`.
    fn advance_cycle_phase(&mut self, delivered_mstamp: Instant) {
        self.cycle_idx = (self.cycle_idx + 1) & (CYCLE_LEN - 1);
        self.cycle_mstamp = delivered_mstamp;
    }

    /// `bbr_reset_probe_bw_mode`: PROBE_BW from a random phase other than the
    /// draining one.
    fn reset_probe_bw_mode(&mut self, delivered_mstamp: Instant) {
        self.mode = Mode::ProbeBw;
        self.cycle_idx = CYCLE_LEN - 1 - self.random_below(CYCLE_RAND) as usize;
        self.advance_cycle_phase(delivered_mstamp);
    }

    /// `bbr_reset_mode`.
    fn reset_mode(&mut self, delivered_mstamp: Instant) {
        if self.full_bw_reached {
            self.reset_probe_bw_mode(delivered_mstamp);
        } else {
            self.mode = Mode::Startup;
        }
    }

    /// `bbr_update_bw`: count rounds and feed the max filter.
    fn update_bw(&mut self, ctx: &CcContext, rs: &RateSample) {
        self.round_start = false;
        if rs.delivered < 0 || rs.interval_us <= 0 {
            return; // not a valid observation
        }
        if rs.prior_delivered >= self.next_rtt_delivered {
            self.next_rtt_delivered = ctx.delivered;
            self.rtt_cnt += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        self.lt_bw_sampling(rs);
        let bw = (rs.delivered as u64 * BW_UNIT / rs.interval_us as u64).min(u32::MAX as u64);
        // App-limited samples count only if they raise the estimate.
        if !rs.is_app_limited || bw as u32 >= self.max_bw() {
            self.bw.running_max(BW_RTTS, self.rtt_cnt, bw as u32);
        }
    }

    /// `bbr_update_ack_aggregation`: the windowed max of data ACKed beyond what the
    /// estimated bandwidth explains.
    fn update_ack_aggregation(&mut self, ctx: &CcContext, rs: &RateSample) {
        if rs.acked_sacked == 0 || rs.delivered < 0 || rs.interval_us <= 0 {
            return;
        }
        if self.round_start {
            self.extra_acked_win_rtts = (self.extra_acked_win_rtts + 1).min(0x1f);
            if self.extra_acked_win_rtts >= EXTRA_ACKED_WIN_RTTS {
                self.extra_acked_win_rtts = 0;
                self.extra_acked_win_idx ^= 1;
                self.extra_acked[self.extra_acked_win_idx] = 0;
            }
        }
        let epoch_us = ctx
            .delivered_mstamp
            .saturating_since(self.ack_epoch_mstamp)
            .as_micros() as u64;
        let mut expected = (self.bw() as u64 * epoch_us / BW_UNIT) as u32;
        if self.ack_epoch_acked <= expected
            || self.ack_epoch_acked + rs.acked_sacked >= ACK_EPOCH_ACKED_RESET_THRESH
        {
            self.ack_epoch_acked = 0;
            self.ack_epoch_mstamp = ctx.delivered_mstamp;
            expected = 0;
        }
        self.ack_epoch_acked = (self.ack_epoch_acked + rs.acked_sacked).min(0xfffff);
        let extra = (self.ack_epoch_acked - expected).min(ctx.cw.snd_cwnd);
        let slot = &mut self.extra_acked[self.extra_acked_win_idx];
        *slot = (*slot).max(extra);
    }

    /// `bbr_update_cycle_phase`.
    fn update_cycle_phase(&mut self, ctx: &CcContext, rs: &RateSample) {
        if self.mode == Mode::ProbeBw && self.is_next_cycle_phase(ctx, rs) {
            self.advance_cycle_phase(ctx.delivered_mstamp);
        }
    }

    /// `bbr_check_full_bw_reached`: the pipe is full after 3 non-app-limited rounds
    /// without 25 % bandwidth growth.
    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.is_app_limited {
            return;
        }
        let bw_thresh = (self.full_bw as u64 * FULL_BW_THRESH as u64) >> BBR_SCALE;
        if self.max_bw() as u64 >= bw_thresh {
            self.full_bw = self.max_bw();
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_CNT;
    }

    /// `bbr_check_drain`: STARTUP -> DRAIN once full, DRAIN -> PROBE_BW once the
    /// flight is down to the BDP.
    fn check_drain(&mut self, ctx: &mut CcContext) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            ctx.cw.snd_ssthresh = self.inflight(ctx, self.max_bw(), BBR_UNIT);
        }
        if self.mode == Mode::Drain
            && self.packets_in_net_at_edt(ctx, ctx.packets_in_flight)
                <= self.inflight(ctx, self.max_bw(), BBR_UNIT)
        {
            self.reset_probe_bw_mode(ctx.delivered_mstamp);
        }
    }

    /// `bbr_check_probe_rtt_done`: after 200 ms and a round at 4 packets, restore
    /// the cwnd and return to PROBE_BW (or STARTUP).
    fn check_probe_rtt_done(&mut self, ctx: &mut CcContext) {
        if self.probe_rtt_done_stamp.is_none_or(|d| ctx.now <= d) {
            return;
        }
        self.min_rtt_stamp = ctx.now; // wait a while until the next PROBE_RTT
        ctx.cw.snd_cwnd = ctx.cw.snd_cwnd.max(self.prior_cwnd);
        self.reset_mode(ctx.delivered_mstamp);
    }

    /// `bbr_update_min_rtt`: the 10 s min_rtt filter, and PROBE_RTT when it expires.
    fn update_min_rtt(&mut self, ctx: &mut CcContext, rs: &RateSample) {
        let filter_expired = ctx.now > self.min_rtt_stamp + MIN_RTT_WIN;
        if rs.rtt_us >= 0
            && (rs.rtt_us < self.min_rtt_us as i64 || (filter_expired && !rs.is_ack_delayed))
        {
            self.min_rtt_us = rs.rtt_us.min(u32::MAX as i64) as u32;
            self.min_rtt_stamp = ctx.now;
        }
        if filter_expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt; // dip, drain the queue
            self.save_cwnd(ctx.cw);
            self.probe_rtt_done_stamp = None;
        }
        if self.mode == Mode::ProbeRtt {
            // Ignore low-rate samples during this mode.
            *ctx.app_limited = (ctx.delivered + ctx.packets_in_flight as u64).max(1);
            if self.probe_rtt_done_stamp.is_none() && ctx.packets_in_flight <= CWND_MIN_TARGET {
                self.probe_rtt_done_stamp = Some(ctx.now + PROBE_RTT_MODE);
                self.probe_rtt_round_done = false;
                self.next_rtt_delivered = ctx.delivered;
            } else if self.probe_rtt_done_stamp.is_some() {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(ctx);
                }
            }
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    /// `bbr_update_gains`.
    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw if self.lt_use_bw => (BBR_UNIT, CWND_GAIN),
            Mode::ProbeBw => (PACING_GAIN[self.cycle_idx], CWND_GAIN),
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
    }

    /// `bbr_update_model`.
    fn update_model(&mut self, ctx: &mut CcContext, rs: &RateSample) {
        self.update_bw(ctx, rs);
        self.update_ack_aggregation(ctx, rs);
        self.update_cycle_phase(ctx, rs);
        self.check_full_bw_reached(rs);
        self.check_drain(ctx);
        self.update_min_rtt(ctx, rs);
        self.update_gains();
    }
}

/// Long-term ("LT") bandwidth sampling: token-bucket policer detection.
impl Bbr {
    /// `bbr_reset_lt_bw_sampling_interval`.
    fn reset_lt_bw_sampling_interval(&mut self) {
        self.lt_last_stamp_ms = self.tp.delivered_mstamp.as_millis();
        self.lt_last_delivered = self.tp.delivered;
        self.lt_last_lost = self.tp.lost;
        self.lt_rtt_cnt = 0;
    }

    /// `bbr_reset_lt_bw_sampling`.
    fn reset_lt_bw_sampling(&mut self) {
        self.lt_bw = 0;
        self.lt_use_bw = false;
        self.lt_is_sampling = false;
        self.reset_lt_bw_sampling_interval();
    }

    /// `bbr_lt_bw_interval_done`: two consecutive lossy intervals with consistent
    /// throughput mean a policer: use their average rate.
    fn lt_bw_interval_done(&mut self, bw: u32) {
        if self.lt_bw != 0 {
            let diff = bw.abs_diff(self.lt_bw) as u64;
            if diff * BBR_UNIT as u64 <= LT_BW_RATIO * self.lt_bw as u64
                || Self::rate_bytes_per_sec(self.tp.mss, diff, BBR_UNIT) <= LT_BW_DIFF
            {
                self.lt_bw = ((bw as u64 + self.lt_bw as u64) >> 1) as u32;
                self.lt_use_bw = true;
                self.pacing_gain = BBR_UNIT; // try to avoid drops
                self.lt_rtt_cnt = 0;
                return;
            }
        }
        self.lt_bw = bw;
        self.reset_lt_bw_sampling_interval();
    }

    /// `bbr_lt_bw_sampling`.
    fn lt_bw_sampling(&mut self, rs: &RateSample) {
        if self.lt_use_bw {
            if self.mode == Mode::ProbeBw && self.round_start {
                self.lt_rtt_cnt += 1;
                if self.lt_rtt_cnt >= LT_BW_MAX_RTTS {
                    self.reset_lt_bw_sampling();
                    self.reset_probe_bw_mode(self.tp.delivered_mstamp);
                }
            }
            return;
        }
        // Start at the first loss, once the policer's tokens are exhausted.
        if !self.lt_is_sampling {
            if rs.losses == 0 {
                return;
            }
            self.reset_lt_bw_sampling_interval();
            self.lt_is_sampling = true;
        }
        if rs.is_app_limited {
            return self.reset_lt_bw_sampling(); // would underestimate
        }
        if self.round_start {
            self.lt_rtt_cnt += 1;
        }
        if self.lt_rtt_cnt < LT_INTVL_MIN_RTTS {
            return;
        }
        if self.lt_rtt_cnt > 4 * LT_INTVL_MIN_RTTS {
            return self.reset_lt_bw_sampling(); // too long
        }
        if rs.losses == 0 {
            return; // end intervals at a loss
        }
        let lost = self.tp.lost - self.lt_last_lost;
        let delivered = self.tp.delivered - self.lt_last_delivered;
        if delivered == 0 || (lost << BBR_SCALE) < LT_LOSS_THRESH * delivered {
            return;
        }
        let t_ms = self.tp.delivered_mstamp.as_millis() as i64 - self.lt_last_stamp_ms as i64;
        if t_ms < 1 {
            return;
        }
        if t_ms >= (u32::MAX / 1000) as i64 {
            return self.reset_lt_bw_sampling();
        }
        let bw = delivered * BW_UNIT / (t_ms as u64 * 1000);
        self.lt_bw_interval_done(bw.min(u32::MAX as u64) as u32);
    }
}

impl CongestionOps for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    /// `bbr_ssthresh`: entering recovery saves cwnd; ssthresh is left alone.
    fn ssthresh(&mut self, cw: &CwndState) -> u32 {
        self.save_cwnd(cw);
        cw.snd_ssthresh
    }

    /// BBR has no `cong_avoid`: [`Bbr::cong_control`] sets the window.
    fn cong_avoid(&mut self, _cw: &mut CwndState, _acked: u32, _ctx: &CaCtx) {}

    /// `bbr_set_state`: an RTO ends the round and counts as a loss for the policer
    /// detector.
    fn set_state(&mut self, _cw: &mut CwndState, _old: CaState, new: CaState) {
        if new == CaState::Loss {
            self.prev_ca_state = Some(CaState::Loss);
            self.full_bw = 0;
            self.round_start = true;
            let rs = RateSample {
                losses: 1,
                ..RateSample::default()
            };
            self.lt_bw_sampling(&rs);
        }
    }

    /// `bbr_cwnd_event` for every event but `CA_EVENT_TX_START` (see `tx_start`):
    /// nothing.
    fn cwnd_event(&mut self, _cw: &mut CwndState, _ev: CaEvent, _ctx: &CaCtx) {}

    /// `bbr_cwnd_event(CA_EVENT_TX_START)`: sending again after an app-limited idle
    /// is an idle restart (no PROBE_RTT entry and a fresh ACK-aggregation epoch until
    /// data is delivered); in PROBE_BW pace at the estimated bandwidth, "to avoid
    /// pointless buffer overflows", and in PROBE_RTT see whether it is done.
    fn tx_start(&mut self, ctx: &mut CcContext) {
        if *ctx.app_limited == 0 {
            return;
        }
        self.idle_restart = true;
        self.ack_epoch_mstamp = ctx.now;
        self.ack_epoch_acked = 0;
        match self.mode {
            Mode::ProbeBw => {
                let bw = self.bw();
                self.set_pacing_rate(ctx, bw, BBR_UNIT);
            }
            Mode::ProbeRtt => self.check_probe_rtt_done(ctx),
            _ => {}
        }
    }

    /// `bbr_undo_cwnd`: a spurious slow-down; restart full-pipe detection.
    fn undo_cwnd(&mut self, cw: &CwndState, _prior_cwnd: u32) -> u32 {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.reset_lt_bw_sampling();
        cw.snd_cwnd
    }

    /// `bbr_sndbuf_expand`: 3 * cwnd, since BBR may slow-start even in recovery.
    fn sndbuf_expand(&self) -> u32 {
        3
    }

    /// `bbr_init`.
    fn init(&mut self, ctx: &mut CcContext) {
        *self = Bbr {
            rng: ctx.seed | 1,
            tp: Tp {
                delivered: ctx.delivered,
                lost: ctx.lost,
                delivered_mstamp: ctx.delivered_mstamp,
                mss: ctx.mss,
            },
            ..Bbr::default()
        };
        ctx.cw.snd_ssthresh = INFINITE_SSTHRESH;
        self.next_rtt_delivered = ctx.delivered;
        self.min_rtt_us = ctx.min_rtt_us;
        self.min_rtt_stamp = ctx.now;
        self.bw.reset(0, 0);
        self.init_pacing_rate_from_rtt(ctx);
        self.reset_lt_bw_sampling();
        self.mode = Mode::Startup;
        self.update_gains();
        self.ack_epoch_mstamp = ctx.now;
        *ctx.pacing_needed = true;
    }

    fn has_cong_control(&self) -> bool {
        true
    }

    /// `bbr_main`.
    fn cong_control(&mut self, ctx: &mut CcContext, rs: &RateSample) -> bool {
        self.tp = Tp {
            delivered: ctx.delivered,
            lost: ctx.lost,
            delivered_mstamp: ctx.delivered_mstamp,
            mss: ctx.mss,
        };
        self.update_model(ctx, rs);
        let bw = self.bw();
        self.set_pacing_rate(ctx, bw, self.pacing_gain);
        self.set_cwnd(ctx, rs, rs.acked_sacked, bw, self.cwnd_gain);
        true
    }

    fn min_tso_segs(&self, pacing_rate: u64) -> Option<u32> {
        Some(Self::min_tso_segs_at(pacing_rate))
    }

    /// `tcp_bbr_info.bbr_bw` (bytes per second), times 8.
    fn bw_estimate_bps(&self) -> Option<u64> {
        let bytes = (self.bw() as u128 * self.tp.mss as u128 * 1_000_000) >> BW_SCALE;
        Some((bytes * 8).min(u64::MAX as u128) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;
    /// 10 packets per ms (10 MB/s at MSS 1000) in BBR's unit: 0.01 * 2^24.
    const BW_10PPMS: u32 = 167_772;

    /// The `tcp_sock` side of the hooks.
    struct H {
        cw: CwndState,
        pacing_rate: u64,
        pacing_needed: bool,
        app_limited: u64,
        delivered: u64,
        now: Instant,
        in_flight: u32,
        ca_state: CaState,
    }

    impl H {
        fn new() -> H {
            H {
                cw: CwndState::new(10),
                pacing_rate: 0,
                pacing_needed: false,
                app_limited: 0,
                delivered: 0,
                now: Instant(1_000_000_000),
                in_flight: 0,
                ca_state: CaState::Open,
            }
        }
        fn ctx(&mut self) -> CcContext<'_> {
            CcContext {
                cw: &mut self.cw,
                pacing_rate: &mut self.pacing_rate,
                pacing_needed: &mut self.pacing_needed,
                app_limited: &mut self.app_limited,
                max_pacing_rate: u64::MAX,
                mss: MSS,
                srtt_us: 40_000,
                min_rtt_us: 40_000,
                delivered: self.delivered,
                delivered_mstamp: self.now,
                lost: 0,
                packets_in_flight: self.in_flight,
                now: self.now,
                wstamp: self.now,
                ca_state: self.ca_state,
                seed: 7,
                ecn_ok: false,
                snd_nxt: 0,
                rcv_nxt: 0,
                delivered_ce: 0,
            }
        }
        /// One ACK delivering `acked` packets with a sample of `delivered` packets
        /// over `interval_us` that starts a new round, RTT 40 ms.
        fn ack(&mut self, b: &mut Bbr, acked: u32, delivered: i64, interval_us: i64) {
            let prior_delivered = self.delivered;
            self.delivered += acked as u64;
            let rs = RateSample {
                delivered,
                interval_us,
                prior_delivered,
                acked_sacked: acked,
                prior_in_flight: self.in_flight,
                rtt_us: 40_000,
                prior_mstamp: Some(self.now),
                ..RateSample::default()
            };
            b.cong_control(&mut self.ctx(), &rs);
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A BBR in PROBE_BW at 10 packets/ms and min_rtt 40 ms, cwnd 500.
    fn probe_bw(h: &mut H) -> Bbr {
        let mut b = Bbr::default();
        b.init(&mut h.ctx());
        b.full_bw_reached = true;
        b.bw.reset(0, BW_10PPMS);
        b.mode = Mode::ProbeBw;
        b.cycle_idx = 0;
        b.cycle_mstamp = h.now;
        b.update_gains();
        h.pacing_rate = 9_899_990;
        h.cw.snd_cwnd = 500;
        h.in_flight = 500;
        b
    }

    #[test]
    fn tx_start_after_app_limited_idle_restarts() {
        let mut h = H::new();
        let mut b = probe_bw(&mut h);
        h.pacing_rate = 12_374_987; // pacing_gain 1.25
        b.ack_epoch_acked = 77;
        // Not app-limited: nothing.
        b.tx_start(&mut h.ctx());
        assert!(!b.idle_restart);
        assert_eq!((h.pacing_rate, b.ack_epoch_acked), (12_374_987, 77));
        // App-limited in PROBE_BW: pace at the estimate (gain 1), new ACK epoch.
        h.app_limited = 5;
        h.now += ms(300);
        b.tx_start(&mut h.ctx());
        assert!(b.idle_restart);
        assert_eq!((h.pacing_rate, b.ack_epoch_acked), (9_899_990, 0));
        assert_eq!(b.ack_epoch_mstamp, h.now);
        // App-limited in PROBE_RTT past its done stamp: the cwnd comes back.
        b.mode = Mode::ProbeRtt;
        b.prior_cwnd = 600;
        h.cw.snd_cwnd = 4;
        b.probe_rtt_done_stamp = Some(h.now);
        h.now += ms(1);
        b.tx_start(&mut h.ctx());
        assert_eq!(h.cw.snd_cwnd, 600);
        assert_ne!(b.mode, Mode::ProbeRtt);
    }

    #[test]
    fn constants_match_linux() {
        assert_eq!(HIGH_GAIN, 739);
        assert_eq!(DRAIN_GAIN, 88);
        assert_eq!(PACING_GAIN, [320, 192, 256, 256, 256, 256, 256, 256]);
    }

    #[test]
    fn cwnd_and_pacing_from_bw_and_min_rtt() {
        let mut h = H::new();
        let mut b = probe_bw(&mut h);
        // bdp = ceil(167772 * 40000 / 2^24) = ceil(399.99) = 400 packets; gain 2: 800.
        assert_eq!(b.bdp(BW_10PPMS, BBR_UNIT), 400);
        assert_eq!(b.bdp(BW_10PPMS, 2 * BBR_UNIT), 800);
        // Pacing at gain 1: 167772 * 1000 B * 0.99 * 1e6 >> 24 = 9,899,990 B/s.
        let c = h.ctx();
        assert_eq!(Bbr::bw_to_pacing_rate(&c, BW_10PPMS, BBR_UNIT), 9_899_990);
        // TSO goal: 9,899,990 >> 10 = 9667 bytes = 9 segments.
        assert_eq!(Bbr::tso_segs_goal(9_899_990, MSS), 9);
        // Target flight in the cruising phase: 800 + 3 * 9 = 827, rounded up to 828.
        b.cycle_idx = 2;
        assert_eq!(b.inflight(&c, BW_10PPMS, 2 * BBR_UNIT), 828);
        // In the probing phase two more: 830.
        b.cycle_idx = 0;
        assert_eq!(b.inflight(&c, BW_10PPMS, 2 * BBR_UNIT), 830);
        // No RTT sample yet: the initial window.
        b.min_rtt_us = u32::MAX;
        assert_eq!(b.bdp(BW_10PPMS, 2 * BBR_UNIT), TCP_INIT_CWND);
    }

    #[test]
    fn cwnd_snaps_down_to_target_and_paces_at_gain() {
        let mut h = H::new();
        let mut b = probe_bw(&mut h);
        b.cycle_idx = 2;
        b.update_gains();
        h.cw.snd_cwnd = 2000;
        // 100 packets over 10 ms: exactly the filter's 10 packets/ms. The target is
        // 800 + 10 (this ACK's 10 packets are all "extra": a new aggregation epoch)
        // + 3 * 9 = 837, rounded up to 838.
        h.ack(&mut b, 10, 100, 10_000);
        assert_eq!(h.cw.snd_cwnd, 838);
        assert_eq!(h.pacing_rate, 9_899_990);
        assert!(h.pacing_needed, "init asks for internal pacing");
    }

    #[test]
    fn min_tso_segs_below_1_2_mbit() {
        let b = Bbr::default();
        assert_eq!(b.min_tso_segs(149_999), Some(1));
        assert_eq!(b.min_tso_segs(150_000), Some(2));
        assert_eq!(Bbr::tso_segs_goal(100_000, MSS), 1);
        assert_eq!(
            Bbr::tso_segs_goal(1_000_000_000, 100),
            0x7f,
            "capped at 127"
        );
    }

    #[test]
    fn gain_cycle_order_and_advance_rules() {
        let mut h = H::new();
        let mut b = probe_bw(&mut h);
        let t0 = h.now;
        let rs = |in_flight: u32, losses: u32| RateSample {
            prior_in_flight: in_flight,
            losses,
            ..RateSample::default()
        };
        // Phase 0 (5/4) lasts at least min_rtt (40 ms) ...
        h.now = t0 + ms(30);
        b.update_cycle_phase(&h.ctx(), &rs(600, 0));
        assert_eq!(b.cycle_idx, 0);
        // ... and until the flight reaches 5/4 BDP: 500 + 3 * 9 -> 528, + 2 = 530
        // (with the EDT skb's 9 segments counted).
        h.now = t0 + ms(41);
        b.update_cycle_phase(&h.ctx(), &rs(520, 0));
        assert_eq!(b.cycle_idx, 0);
        b.update_cycle_phase(&h.ctx(), &rs(520, 1));
        assert_eq!(b.cycle_idx, 1, "a loss ends the probe");
        (b.cycle_idx, b.cycle_mstamp) = (0, t0);
        b.update_cycle_phase(&h.ctx(), &rs(521, 0));
        assert_eq!(b.cycle_idx, 1, "521 + 9 = 530 reached the probe target");
        b.update_gains();
        assert_eq!(b.pacing_gain, BBR_UNIT * 3 / 4);
        // Phase 1 (3/4) ends early once the flight is down to the BDP + budget (428).
        h.now += ms(1);
        b.update_cycle_phase(&h.ctx(), &rs(429, 0));
        assert_eq!(b.cycle_idx, 1);
        b.update_cycle_phase(&h.ctx(), &rs(428, 0));
        assert_eq!(b.cycle_idx, 2);
        // Phases 2..7 (1.0) last exactly one min_rtt of wall-clock time.
        for idx in 2..8 {
            let start = h.now;
            b.update_gains();
            assert_eq!(b.pacing_gain, BBR_UNIT);
            h.now = start + ms(40);
            b.update_cycle_phase(&h.ctx(), &rs(0, 0));
            assert_eq!(b.cycle_idx, idx, "not more than min_rtt yet");
            h.now = start + ms(40) + Duration::from_micros(1);
            b.update_cycle_phase(&h.ctx(), &rs(0, 0));
        }
        assert_eq!(b.cycle_idx, 0, "wrapped around to the probing phase");
    }

    #[test]
    fn random_start_phase_is_deterministic_and_never_draining() {
        let mut h = H::new();
        let mut a = probe_bw(&mut h);
        let mut b = probe_bw(&mut h);
        let mut seen = [false; CYCLE_LEN];
        for _ in 0..200 {
            a.reset_probe_bw_mode(h.now);
            b.reset_probe_bw_mode(h.now);
            assert_eq!(a.cycle_idx, b.cycle_idx, "same seed, same phases");
            seen[a.cycle_idx] = true;
        }
        // 7 - rand(0..7) + 1: every phase but 1 (the 3/4 drain).
        assert_eq!(seen, [true, false, true, true, true, true, true, true]);
    }

    #[test]
    fn full_bw_after_three_rounds_without_growth() {
        let mut h = H::new();
        let mut b = Bbr::default();
        b.init(&mut h.ctx());
        assert_eq!(
            (b.mode(), b.pacing_gain(), b.cwnd_gain()),
            (Mode::Startup, 739, 739)
        );
        h.in_flight = 1000;
        // Rounds at 1, 2, 2.22, 2.22 packets/ms: the third is < 25 % above the second.
        for interval in [10_000, 5_000, 4_500, 4_500] {
            h.now += ms(40);
            h.ack(&mut b, 10, 10, interval);
            assert_eq!(b.mode(), Mode::Startup);
        }
        assert_eq!(b.full_bw, 33_554, "2 packets/ms");
        assert_eq!(b.full_bw_cnt, 2);
        // An app-limited round does not count.
        h.now += ms(40);
        let prior = h.delivered;
        h.delivered += 10;
        let rs = RateSample {
            delivered: 10,
            interval_us: 4_500,
            prior_delivered: prior,
            acked_sacked: 10,
            is_app_limited: true,
            ..RateSample::default()
        };
        b.cong_control(&mut h.ctx(), &rs);
        assert_eq!(b.full_bw_cnt, 2);
        // The third round without growth: DRAIN, ssthresh = BDP + budget at 37282
        // (2.22 packets/ms): ceil(88.9) = 89, + 3 * 6 (TSO goal at the STARTUP
        // pacing rate 6,350,661 B/s) = 107, rounded up to 108.
        h.now += ms(40);
        h.ack(&mut b, 10, 10, 4_500);
        assert!(b.full_bw_reached());
        assert_eq!(b.mode(), Mode::Drain);
        assert_eq!(b.max_bw(), 37_282);
        assert_eq!(h.cw.snd_ssthresh, 108);
        assert_eq!(b.pacing_gain(), DRAIN_GAIN);
        // Once the flight is down to the BDP + budget at the drain pacing rate
        // (6,350,661 * 88 / 739 B/s: TSO goal 2): 89 + 6 = 95 -> 96, PROBE_BW.
        h.in_flight = 97;
        h.now += ms(1);
        h.ack(&mut b, 1, -1, -1);
        assert_eq!(b.mode(), Mode::Drain);
        h.in_flight = 96;
        h.now += ms(1);
        h.ack(&mut b, 1, -1, -1);
        assert_eq!(b.mode(), Mode::ProbeBw);
        assert_ne!(b.cycle_idx, 1);
    }

    #[test]
    fn growth_resets_the_count() {
        let mut h = H::new();
        let mut b = Bbr::default();
        b.init(&mut h.ctx());
        h.in_flight = 1000;
        for interval in [10_000, 9_000, 9_000, 7_000, 7_000, 7_000] {
            h.now += ms(40);
            h.ack(&mut b, 10, 10, interval);
        }
        // 1.0 -> 1.11 (no growth, 1) -> (2) -> 1.43 (+43 %, reset) -> (1) -> (2).
        assert_eq!(b.full_bw_cnt, 2);
        assert_eq!(b.mode(), Mode::Startup);
    }

    #[test]
    fn min_rtt_expiry_enters_probe_rtt_then_restores() {
        let mut h = H::new();
        let mut b = probe_bw(&mut h);
        b.cycle_idx = 2;
        let t0 = h.now;
        // 10 s after the min_rtt sample the filter has not expired yet.
        h.now = t0 + ms(10_000);
        h.ack(&mut b, 10, 100, 10_000);
        assert_eq!(b.mode(), Mode::ProbeBw);
        let cwnd = h.cw.snd_cwnd;
        // Past 10 s: a larger RTT replaces min_rtt, and PROBE_RTT caps cwnd at 4.
        h.now += ms(1);
        let prior = h.delivered;
        h.delivered += 10;
        let rs = RateSample {
            delivered: 100,
            interval_us: 10_000,
            prior_delivered: prior,
            acked_sacked: 10,
            rtt_us: 45_000,
            prior_in_flight: h.in_flight,
            ..RateSample::default()
        };
        b.cong_control(&mut h.ctx(), &rs);
        assert_eq!(b.mode(), Mode::ProbeRtt);
        assert_eq!(b.min_rtt_us(), 45_000);
        assert_eq!(h.cw.snd_cwnd, 4);
        assert_eq!(b.prior_cwnd, cwnd);
        assert_eq!(
            h.app_limited,
            h.delivered + 500,
            "PROBE_RTT samples are app-limited"
        );
        assert_eq!((b.pacing_gain(), b.cwnd_gain()), (BBR_UNIT, BBR_UNIT));
        // The flight drains to 4: 200 ms start now.
        h.in_flight = 4;
        h.now += ms(40);
        h.ack(&mut b, 2, 100, 10_000);
        let done = h.now + ms(200);
        assert_eq!(b.probe_rtt_done_stamp, Some(done));
        // A round later, but before 200 ms: still probing.
        h.now += ms(100);
        h.ack(&mut b, 4, 100, 10_000);
        assert_eq!(b.mode(), Mode::ProbeRtt);
        assert_eq!(h.cw.snd_cwnd, 4);
        // After 200 ms: back to PROBE_BW with the saved cwnd (plus this ACK).
        h.now = done + Duration::from_micros(1);
        h.ack(&mut b, 4, 100, 10_000);
        assert_eq!(b.mode(), Mode::ProbeBw);
        assert_eq!(b.min_rtt_stamp, h.now);
        assert_eq!(h.cw.snd_cwnd, cwnd + 4);
    }

    #[test]
    fn packet_conservation_in_recovery_then_restore() {
        let mut h = H::new();
        let mut b = probe_bw(&mut h);
        b.cycle_idx = 2;
        h.in_flight = 480;
        // tcp_enter_recovery: ssthresh saves cwnd and keeps ssthresh.
        let ss = h.cw.snd_ssthresh;
        assert_eq!(b.ssthresh(&h.cw), ss);
        assert_eq!(b.prior_cwnd, 500);
        h.ca_state = CaState::Recovery;
        let rs = |prior_delivered: u64, acked: u32, losses: u32| RateSample {
            prior_delivered,
            acked_sacked: acked,
            losses,
            ..RateSample::default()
        };
        // First recovery ACK: cwnd = in flight + acked (480 + 2).
        h.delivered += 2;
        b.cong_control(&mut h.ctx(), &rs(0, 2, 1));
        assert_eq!(h.cw.snd_cwnd, 482);
        // Still the first round: never below in flight + acked, never grown.
        h.in_flight = 470;
        h.delivered += 3;
        b.cong_control(&mut h.ctx(), &rs(0, 3, 0));
        assert_eq!(h.cw.snd_cwnd, 482);
        // Recovery over: the saved 500 comes back.
        h.ca_state = CaState::Open;
        h.delivered += 1;
        b.cong_control(&mut h.ctx(), &rs(0, 1, 0));
        assert_eq!(h.cw.snd_cwnd, 501);
    }

    #[test]
    fn rto_counts_as_round_and_loss() {
        let mut h = H::new();
        let mut b = probe_bw(&mut h);
        b.full_bw = 123;
        b.set_state(&mut h.cw, CaState::Open, CaState::Loss);
        assert_eq!(b.full_bw, 0);
        assert!(b.round_start);
        assert!(b.lt_is_sampling, "the RTO's loss starts long-term sampling");
        assert_eq!(b.sndbuf_expand(), 3);
    }

    #[test]
    fn bandwidth_estimate_in_bits_per_second() {
        let mut h = H::new();
        let mut b = probe_bw(&mut h);
        b.cycle_idx = 2;
        h.ack(&mut b, 10, 100, 10_000);
        // 167772 * 1000 * 1e6 >> 24 = 9,999,990 B/s, times 8.
        assert_eq!(b.bw_estimate_bps(), Some(79_999_920));
    }
}
