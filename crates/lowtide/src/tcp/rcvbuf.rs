//! Receive-buffer autotuning (tcp_input.c `tcp_rcv_rtt_measure`,
//! `tcp_rcv_rtt_measure_ts`, `tcp_rcv_space_adjust`): the receiver estimates the RTT
//! itself (a pure receiver has no srtt of its own) and sizes the buffer each RTT to
//! twice what the application read in it, plus room for the sender's growth.
//!
//! The estimate matters once a queue builds: the window must cover the RTT as it is,
//! queueing included, or it caps the sender's flight at twice the bytes of the
//! handshake's RTT and no buffer ever fills.

use super::sock::Tcb;
use super::Ctx;
use crate::time::Instant;

/// `struct rcv_rtt_est`: the receiver's RTT estimate.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RcvRttEst {
    /// `rtt_us`, scaled by 8 (0: no sample yet).
    pub rtt_us8: u32,
    /// `seq`: the window-based sample ends when rcv_nxt reaches this.
    pub seq: u64,
    /// `time`: when the window-based sample began.
    pub time: Option<Instant>,
    /// `rcv_rtt_last_tsecr`: one timestamp sample per echoed TSval.
    pub last_tsecr: u32,
}

impl Tcb {
    /// `tcp_rcv_rtt_update`: the minimum of window-based samples (`win_dep`), a
    /// smoothed average of timestamp samples taken while the receive queue is empty.
    /// A peer's TSecr picks the sample (up to `INT_MAX / 1000` ms): the scaled
    /// estimate is a u32 that wraps, as Linux's `new_sample`.
    fn rcv_rtt_update(&mut self, sample_us: u32, win_dep: bool) {
        let old = self.rcv_rtt.rtt_us8;
        let m = sample_us.wrapping_mul(8);
        self.rcv_rtt.rtt_us8 = if old == 0 || m < old {
            m
        } else if win_dep || self.rcv_nxt != self.copied_seq {
            return;
        } else {
            (old - (old >> 3)).wrapping_add(sample_us)
        };
    }

    /// `tcp_rcv_rtt_measure` (from `tcp_event_data_recv`): the time to receive one
    /// window's worth of data is at least an RTT.
    pub(crate) fn rcv_rtt_measure(&mut self, now: Instant) {
        if let Some(t) = self.rcv_rtt.time {
            if self.rcv_nxt < self.rcv_rtt.seq {
                return;
            }
            let d = now.saturating_since(t).as_micros().max(1) as u32;
            self.rcv_rtt_update(d, true);
        }
        self.rcv_rtt.seq = self.rcv_nxt + self.rcv_wnd as u64;
        self.rcv_rtt.time = Some(now);
    }

    /// `tcp_rcv_rtt_measure_ts`: a full-sized in-order segment echoing one of our
    /// TSvals gives an RTT sample (ours, in ms ticks, as Linux's TCP_TS_HZ = 1000).
    pub(crate) fn rcv_rtt_measure_ts(&mut self, ctx: &Ctx, tsecr: u32, len: usize) {
        if tsecr == self.rcv_rtt.last_tsecr {
            return;
        }
        self.rcv_rtt.last_tsecr = tsecr;
        if len < self.rcv_mss as usize {
            return;
        }
        let delta_ms = self.tsval(ctx.now).wrapping_sub(tsecr);
        if delta_ms > 0 && delta_ms < i32::MAX as u32 / 1000 {
            self.rcv_rtt_update(delta_ms * 1000, false);
        }
    }

    /// `tcp_rcv_space_adjust`: once per receiver RTT, grow the buffer to hold
    /// `2 * copied + 16 * advmss` (losses need 2x), plus twice the growth over the
    /// previous RTT (a sender in slow start doubles per RTT); the window is half the
    /// buffer (`tcp_adv_win_scale` = 1).
    pub(crate) fn rcv_space_adjust(&mut self, ctx: &mut Ctx) {
        let rtt_us = (self.rcv_rtt.rtt_us8 >> 3) as u128;
        let elapsed = ctx.now.saturating_since(self.rcvq_space_time).as_micros();
        if rtt_us == 0 || elapsed < rtt_us {
            return;
        }
        let copied = (self.copied_seq - self.rcvq_space_seq) as u32;
        if copied > self.rcvq_space {
            if ctx.cfg.tcp_moderate_rcvbuf && !self.rcvbuf_locked {
                let space = self.rcvq_space.max(1) as u64;
                let mut rcvwin = 2 * copied as u64 + 16 * self.advmss as u64;
                let grow = rcvwin * (copied as u64 - space) / space;
                rcvwin += 2 * grow;
                let rcvbuf = (2 * rcvwin).min(ctx.cfg.tcp_rmem[2] as u64) as u32;
                self.rcvbuf = self.rcvbuf.max(rcvbuf);
            }
            self.rcvq_space = copied;
        }
        self.rcvq_space_seq = self.copied_seq;
        self.rcvq_space_time = ctx.now;
    }
}

#[cfg(test)]
mod tests {
    use super::super::sock::Tcb;

    #[test]
    fn window_samples_only_lower_the_estimate() {
        let mut t = Tcb::for_test(&crate::config::Config::default());
        t.rcv_rtt_update(40_000, true);
        assert_eq!(t.rcv_rtt.rtt_us8, 320_000);
        t.rcv_rtt_update(80_000, true);
        assert_eq!(t.rcv_rtt.rtt_us8, 320_000);
        t.rcv_rtt_update(30_000, true);
        assert_eq!(t.rcv_rtt.rtt_us8, 240_000);
    }

    #[test]
    fn timestamp_samples_follow_a_rising_rtt() {
        let mut t = Tcb::for_test(&crate::config::Config::default());
        t.copied_seq = t.rcv_nxt; // the application has read everything
        t.rcv_rtt_update(40_000, false);
        for _ in 0..40 {
            t.rcv_rtt_update(80_000, false);
        }
        let rtt = t.rcv_rtt.rtt_us8 >> 3;
        assert!(rtt > 79_000 && rtt <= 80_000, "{rtt}");
    }
}
