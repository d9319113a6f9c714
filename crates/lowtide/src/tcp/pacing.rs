//! The transmit-time limits of tcp_output.c: the pacing rate and earliest departure
//! times (`tcp_update_pacing_rate`, `tcp_update_skb_after_send`), TSO autosizing
//! (`tcp_tso_autosize`, seed 004), `tcp_tso_should_defer`, and TCP Small Queues
//! (`tcp_small_queue_check`, seed 002).

use super::cong::CaState;
use super::consts::{
    GSO_LEGACY_MAX_SIZE, GSO_MAX_SEGS, SKB_OVERHEAD, SK_GSO_MAX_SIZE, TCP_RESOURCE_PROBE_INTERVAL,
};
use super::rtx::skb::{FLAG_FIN, SACKED_RETRANS};
use super::sock::{Pending, Tcb};
use super::Ctx;
use crate::config::{Config, SizeGoalAt, TsqRule};
use crate::mib::Mib;
use crate::socket::{TxRetrans, TxToken};
use crate::time::Instant;
use core::time::Duration;

/// `sk_pacing_shift`: TSQ and autosizing aim at about 1 ms (2^-10 s) of data.
pub const SK_PACING_SHIFT: u32 = 10;
/// `sch_fq`/internal pacing leave the first 10 segments of a flow unpaced.
const UNPACED_SEGS: u64 = 10;
/// `tcp_max_tso_deferred_mss`: with `tcp_tso_win_divisor` 0, defer no packet that
/// more than 3 segments could fill ("Receiver should ACK every other full sized
/// frame").
const TCP_MAX_TSO_DEFERRED_MSS: u64 = 3;

/// What holds a TSO packet back in [`Tcb::tso_should_defer`]: its
/// `is_cwnd_limited`/`is_rwnd_limited` outputs, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeferredBy {
    /// cwnd is the smaller window and cannot take the whole skb.
    Cwnd,
    /// The peer's window is the smaller one (or equal) and cannot take it.
    Rwnd,
    /// Both could, but the skb may still grow: the application is the limit.
    App,
}

impl Tcb {
    /// `tcp_update_pacing_rate`: `mss * max(cwnd, packets_out) / srtt`, times 200 % in
    /// slow start (below half of ssthresh) or 120 % otherwise, capped by
    /// `SO_MAX_PACING_RATE`. Without an RTT sample Linux skips the division by
    /// srtt: `mss * max(cwnd, packets_out) * ratio * 8 * 10^4` (its srtt_us counts
    /// eighths of a microsecond).
    pub(crate) fn update_pacing_rate(&mut self, cfg: &Config) {
        let ratio = if self.cw.snd_cwnd < self.cw.snd_ssthresh / 2 {
            cfg.tcp_pacing_ss_ratio
        } else {
            cfg.tcp_pacing_ca_ratio
        } as u128;
        let segs = self.cw.snd_cwnd.max(self.rtx.packets_out) as u128;
        let rate = match self.rtt.srtt_us {
            0 => self.mss_cache as u128 * 80_000 * ratio * segs,
            srtt => self.mss_cache as u128 * 1_000_000 * ratio / 100 * segs / srtt as u128,
        };
        self.pace.pacing_rate = (rate.min(u64::MAX as u128) as u64).min(self.pace.max_pacing_rate);
    }

    /// `tcp_tso_autosize`: about 1 ms of data at the pacing rate per TSO packet, plus a
    /// bonus for close peers (`sk_gso_max_size >> (min_rtt >> tcp_tso_rtt_log)`),
    /// at most `sk_gso_max_size` ([`SK_GSO_MAX_SIZE`]), in whole segments, at least
    /// `min_tso_segs` (the congestion control's, e.g. BBR's, or the sysctl).
    pub(crate) fn tso_autosize(&self, cfg: &Config, mss: u32) -> u32 {
        let mut bytes = self.pace.pacing_rate >> SK_PACING_SHIFT;
        let r = self.rtt.min_rtt_us >> cfg.tcp_tso_rtt_log;
        // BITS_PER_TYPE(sk->sk_gso_max_size)
        if r < u32::BITS {
            bytes = bytes.saturating_add((SK_GSO_MAX_SIZE >> r) as u64);
        }
        let bytes = bytes.min(SK_GSO_MAX_SIZE as u64) as u32;
        let min_tso_segs = self
            .cc
            .min_tso_segs(self.pace.pacing_rate)
            .unwrap_or(cfg.tcp_min_tso_segs);
        (bytes / mss.max(1)).max(min_tso_segs)
    }

    /// `tcp_tso_segs`: segments one departure may carry, the autosize at most
    /// `sk_gso_max_segs` ([`GSO_MAX_SEGS`]). lowtide has no BIG TCP: an IP packet
    /// holds at most 64 KB, so a `min_tso_segs` goal beyond [`GSO_LEGACY_MAX_SIZE`]
    /// is cut to it (Linux would build a bigger skb). Before seed 004
    /// (`size_goal_at = write`) skbs were sized at write time (at most
    /// `sk_gso_max_size`) and sent whole.
    pub(crate) fn tso_segs(&self, cfg: &Config, mss: u32) -> u32 {
        // sk_gso_disable: a socket with TCP-MD5 keys sends one segment per skb
        // (tcp_md5sig_info_add, tcp_v4_syn_recv_sock), each signed on its own.
        if !self.md5.is_empty() {
            return 1;
        }
        match cfg.size_goal_at {
            SizeGoalAt::Transmit => self
                .tso_autosize(cfg, mss)
                .min(GSO_MAX_SEGS)
                .min(GSO_LEGACY_MAX_SIZE / mss.max(1)),
            SizeGoalAt::Write => SK_GSO_MAX_SIZE / mss.max(1),
        }
    }

    /// `SO_MAX_PACING_RATE` (`sk_setsockopt`): the cap, applied to
    /// `sk_pacing_rate` at once; any cap but `~0` asks for internal pacing
    /// (`SK_PACING_NONE` -> `SK_PACING_NEEDED`; an fq device still paces).
    pub(crate) fn set_max_pacing_rate(&mut self, rate: u64) {
        if rate != u64::MAX {
            self.pace.pacing_needed = true;
        }
        self.pace.max_pacing_rate = rate;
        self.pace.pacing_rate = self.pace.pacing_rate.min(rate);
    }

    /// True if internal pacing holds the next departure (`tcp_pacing_check`); arms
    /// the pacing timer then.
    pub(crate) fn pacing_check(&mut self, now: Instant) -> bool {
        if !self.pace.pacing_needed || self.pace.pacing_fq || self.pace.wstamp <= now {
            return false;
        }
        self.pace.pacing_timer = true;
        true
    }

    /// `tcp_pacing_delay`: how far the earliest departure time (`tcp_wstamp_ns`) is
    /// ahead of now, in whole jiffies (`nsecs_to_jiffies` truncates; HZ = 1000); zero
    /// when it is not ahead. Only a paced socket (internal pacing or fq) moves it past
    /// its last transmission.
    pub(crate) fn pacing_delay(&self, now: Instant) -> Duration {
        Duration::from_millis(self.pace.wstamp.saturating_since(now).as_millis() as u64)
    }

    /// `tcp_reset_xmit_timer(sk, what, when, true)`: `what` due `when` from now plus
    /// [`Tcb::pacing_delay`], at most `tcp_rto_max` (`inet_csk_reset_xmit_timer`), so
    /// that a timer does not fire while pacing holds the data it would act on. Linux
    /// 6.18 passes `pace_delay` for `tcp_rearm_rto`, `tcp_schedule_loss_probe`,
    /// `tcp_xmit_retransmit_queue`'s rearm, `tcp_send_probe0`, `tcp_ack_probe` and
    /// `tcp_check_probe_timer`; every other timer (the RTO handler's own, the
    /// reorder timer, SYN and SYN-ACK timers, reneging) is set without it.
    pub(crate) fn reset_xmit_timer_paced(&mut self, now: Instant, what: Pending, when: Duration) {
        let when = (when + self.pacing_delay(now)).min(self.icsk.rto_max);
        self.icsk.pending = Some((what, now + when));
    }

    /// `tcp_update_skb_after_send`: advance the earliest departure time by the
    /// packet's length at the pacing rate, minus up to half of it as credit for
    /// time already lost (OS jitter in Linux, event granularity here).
    pub(crate) fn update_after_send(&mut self, now: Instant, len: usize) {
        let prior = self.pace.wstamp;
        self.pace.wstamp = self.pace.wstamp.max(now);
        let rate = self.pace.pacing_rate;
        let paced = self.pace.pacing_needed || self.pace.pacing_fq;
        if !paced || rate == 0 || rate == u64::MAX || self.data_segs_out < UNPACED_SEGS {
            return;
        }
        let len_ns = (len as u128 * 1_000_000_000 / rate as u128) as u64;
        let credit = self.pace.wstamp.0 - prior.0;
        let len_ns = len_ns - (len_ns / 2).min(credit);
        self.pace.wstamp += Duration::from_nanos(len_ns);
    }

    /// `tcp_tso_should_defer` (John Heffner's rule, Linux 6.18): hold a TSO packet
    /// that cwnd or rwnd would cut short, hoping for a fuller one after the next
    /// ACK. It goes now in Recovery or Loss, when the last transmission
    /// (`tcp_wstamp_ns`) is more than 1 ms old, when a full-sized packet
    /// (`max_segs`) fits, when a skb in the middle of the queue fits whole, when a
    /// `1/tcp_tso_win_divisor` share of the window is open (divisor 0: more than
    /// `tcp_max_tso_deferred_mss` segments), with nothing in flight, when the next
    /// ACK is more than `min(srtt / 2, 1 ms)` away (295ce1eb36ae, "tcp: fix
    /// tcp_tso_should_defer() vs large RTT", in 6.18), or when the skb gets no more
    /// data (`last`: FIN or `MSG_EOR`). Returns what holds it: the
    /// `is_cwnd_limited`/`is_rwnd_limited` outputs, or the application.
    pub(crate) fn tso_should_defer(
        &self,
        ctx: &Ctx,
        (seq, len): (u64, u64),
        last: bool,
        is_tail: bool,
        max_segs: u32,
    ) -> Option<DeferredBy> {
        if self.ca_state >= CaState::Recovery {
            return None;
        }
        // "Avoid bursty behavior by allowing defer only if the last write was
        // recent (1 ms)"; tcp_wstamp_ns may be ahead of now (EDT).
        if ctx.now.saturating_since(self.pace.wstamp) > Duration::from_millis(1) {
            return None;
        }
        let mss = self.mss_cache as u64;
        let in_flight = self.packets_in_flight();
        let send_win = (self.snd_una + self.snd_wnd as u64).saturating_sub(seq);
        let cong_win = (self.cw.snd_cwnd.saturating_sub(in_flight)) as u64 * mss;
        let limit = send_win.min(cong_win);
        // A full-sized TSO packet can go; a skb in the middle of the queue gets no
        // more data, and fits whole.
        if limit >= max_segs as u64 * mss || (!is_tail && limit >= len) {
            return None;
        }
        let window = (self.snd_wnd as u64).min(self.cw.snd_cwnd as u64 * mss);
        match window.checked_div(ctx.cfg.tcp_tso_win_divisor as u64) {
            // "If at least some fraction of a window is available, just use it."
            Some(chunk) if limit >= chunk => return None,
            // Divisor 0: "try not to defer past a single ACK".
            None if limit > TCP_MAX_TSO_DEFERRED_MSS * mss => return None,
            _ => {}
        }
        if !self.ack_is_near(ctx.now) {
            return None;
        }
        // "Ok, it looks like it is advisable to defer": cwnd-, rwnd- or
        // application-limited.
        if cong_win < send_win {
            if cong_win <= len {
                return Some(DeferredBy::Cwnd);
            }
        } else if send_win <= len {
            return Some(DeferredBy::Rwnd);
        }
        // "If this packet won't get more data, do not wait."
        if last {
            return None;
        }
        Some(DeferredBy::App)
    }

    /// `tcp_tso_should_defer`'s ACK clock (295ce1eb36ae, Linux 6.18): the next ACK
    /// is expected one srtt (`tp->srtt_us`, eighths of a microsecond) after the
    /// retransmit queue's head was sent; deferring is worth it only if that is at
    /// most `min(srtt / 2, 1 ms)` away. False with nothing in flight.
    fn ack_is_near(&self, now: Instant) -> bool {
        let Some(head) = self.rtx.first() else {
            return false;
        };
        let srtt_ns = 125 * self.rtt.est.srtt8 as i128; // (NSEC_PER_USEC >> 3) * srtt_us
        let expected_ack = head.tx_time.0 as i128 + srtt_ns;
        let how_far = expected_ack - now.0 as i128;
        let threshold = (srtt_ns >> 1).min(1_000_000);
        how_far - threshold <= 0
    }

    /// `tcp_small_queue_check` (seed 002): may this socket hand `truesize` more bytes to
    /// the device? The limit is `max(2 * truesize, pacing_rate >> 10)` (about 1 ms),
    /// capped by `tcp_limit_output_bytes` for every socket, paced or not (Linux 6.16,
    /// c4221a8cc3a7 "tcp: always use tcp_limit_output_bytes limitation"), doubled
    /// for retransmissions (`factor` 1), plus, under `TCP_TX_DELAY`, the bytes the
    /// delay holds at the pacing rate, counted twice for skb overhead
    /// (`pacing_rate * tcp_tx_delay >> 19`). Throttled when `sk_wmem_alloc`, which
    /// holds one reference for the socket itself (`sk_alloc`) beside the truesize
    /// out, exceeds it, unless the retransmit queue is empty or holds one skb
    /// (`tcp_rtx_queue_empty_or_single_skb`). With `experimental.tsq_rule = fixed`,
    /// seed 002's own rule instead ([`TsqRule::Fixed`]). Returns true when throttled
    /// (`TSQ_THROTTLED` set).
    pub(crate) fn small_queue_check(&mut self, cfg: &Config, truesize: u32, factor: u32) -> bool {
        if !cfg.tsq {
            return false;
        }
        if cfg.tsq_rule == TsqRule::Fixed {
            // 46d3ceabd8d9 (Linux 3.6): tcp_write_xmit stops new data once
            // sk_wmem_alloc reaches tcp_limit_output_bytes; nothing else is checked.
            if factor > 0 || self.wmem_alloc < cfg.tcp_limit_output_bytes as u64 {
                return false;
            }
            return self.tsq_throttle();
        }
        let mut limit = (2 * truesize as u64).max(self.pace.pacing_rate >> SK_PACING_SHIFT);
        limit = limit.min(cfg.tcp_limit_output_bytes as u64);
        limit <<= factor;
        if self.tx_delay != 0 {
            // USEC_PER_SEC / 2 taken as 2^19, in u64 as Linux computes it (an unpaced
            // socket's ~0UL rate wraps).
            let extra = self.pace.pacing_rate.wrapping_mul(self.tx_delay as u64) >> (20 - 1);
            limit = limit.wrapping_add(extra);
        }
        // refcount_read(&sk->sk_wmem_alloc): the truesize out plus sk_alloc's one.
        let wmem_refs = self.wmem_alloc + 1;
        if wmem_refs <= limit || self.rtx.len() <= 1 {
            return false;
        }
        self.tsq_throttle()
    }

    /// Sets `TSQ_THROTTLED` (counted once per throttled spell); returns true.
    fn tsq_throttle(&mut self) -> bool {
        if !self.pace.tsq_throttled {
            self.pace.tsq_throttled_count += 1;
        }
        self.pace.tsq_throttled = true;
        true
    }

    /// TX completion (`tcp_wfree` → `tcp_tsq_handler`): release device memory, free
    /// the packet's skb's fast clone (tcp/host_queue.rs) and, if TSQ throttled the
    /// socket, transmit again.
    pub(crate) fn on_tx_complete(&mut self, ctx: &mut Ctx, token: &TxToken) {
        self.wmem_alloc = self.wmem_alloc.saturating_sub(token.truesize as u64);
        self.fclone_freed(token);
        self.zerocopy_tx_freed(ctx, token);
        if !self.local_drops.is_empty() {
            self.resend_local_drops(ctx);
        }
        if self.pace.tsq_throttled {
            self.pace.tsq_throttled = false;
            self.tsq_write(ctx);
            self.check_space(ctx);
        }
    }

    /// The device queue dropped a packet we sent (a qdisc's `NET_XMIT_DROP`): not a
    /// network loss, and congestion (`__tcp_transmit_skb`: `tcp_enter_cwr`, one PRR
    /// reduction per window, as for an ECN mark). What the packet added to `prr_out`
    /// (`prr`: segments, and the reduction's `high_seq`) is taken back: Linux counts
    /// an skb there only once `tcp_transmit_skb` has sent it. A retransmission failed
    /// ([`Tcb::retransmit_failed`]); new data was never sent ([`Tcb::first_send_dropped`]).
    pub(crate) fn on_tx_dropped(&mut self, ctx: &mut Ctx, token: &TxToken) {
        self.wmem_alloc = self.wmem_alloc.saturating_sub(token.truesize as u64);
        // kfree_skb of the clone: its skb's fast clone is free, its pages' reference
        // dropped.
        self.fclone_freed(token);
        self.zerocopy_tx_freed(ctx, token);
        let (counted, high_seq) = token.prr;
        if counted > 0 && self.in_cwnd_reduction() && self.high_seq == high_seq {
            self.prr_out = self.prr_out.saturating_sub(counted);
        }
        if token.rtx != TxRetrans::None {
            self.enter_cwr();
            self.retransmit_failed(ctx, token);
        } else {
            self.first_send_dropped(ctx, token);
        }
        // A throttled socket must not wait for completions that will not come.
        if self.pace.tsq_throttled && self.resource_retry_at.is_none() {
            self.resource_retry_at = Some(ctx.now + TCP_RESOURCE_PROBE_INTERVAL);
        }
    }

    /// A dropped packet of data sent for the first time. In Linux the skb of a failed
    /// `tcp_transmit_skb` stays unsent and goes out on the next TSQ completion or
    /// ACK, or from a timer (`tcp_check_probe_timer`, `TCP_RESOURCE_PROBE_INTERVAL`),
    /// with no loss recovery, no retransmission counted and no backoff. lowtide has
    /// handed later packets to the device already, so it sends the dropped range
    /// again as soon as it can, as a first transmission (RACK sees it sent now; no
    /// retransmission is counted).
    fn first_send_dropped(&mut self, ctx: &mut Ctx, token: &TxToken) {
        let (seq, len) = (token.seq, token.len);
        let (start, end) = (seq.max(self.snd_una), seq + len as u64);
        if len == 0 || end <= start {
            return;
        }
        self.enter_cwr();
        self.record_local_drop(start, end);
        let unsent: u32 = self
            .local_drops
            .iter()
            .flat_map(|&(s, e)| self.rtx.unsent_in(s, e))
            .map(|(_, n)| n)
            .sum();
        if unsent >= self.rtx.packets_out {
            // Nothing of ours left the host: no RTO or loss probe for data never
            // sent, but tcp_check_probe_timer's retry after tcp_probe0_base.
            if matches!(
                self.icsk.pending,
                Some((
                    Pending::Retrans | Pending::LossProbe | Pending::ReoTimeout,
                    _
                ))
            ) {
                self.icsk.pending = None;
            }
            self.resource_retry_at = Some(ctx.now + self.icsk.rto.max(self.rto_min()));
        } else {
            self.resource_retry_at = Some(ctx.now + TCP_RESOURCE_PROBE_INTERVAL);
        }
    }

    /// A dropped retransmission: `__tcp_retransmit_skb` returns `tcp_transmit_skb`'s
    /// error, counted in `TCPRetransFail`, and its callers count none of what a sent
    /// retransmission gets. The skb stays lost without `TCPCB_RETRANS`, out of
    /// `retrans_out` and so out of flight, and the next `tcp_xmit_retransmit_queue`
    /// starts at it (`tcp_retransmit_skb`; the walk stops there, its hint on it); no
    /// `TCPFastRetrans` or `TCPSlowStartRetrans`, no `prr_out` and no restart of the
    /// timer (`tcp_xmit_retransmit_queue`); no backoff, the timer again after
    /// `TCP_RESOURCE_PROBE_INTERVAL` (`tcp_retransmit_timer`); no probe state, the
    /// RTO from the head's send (`tcp_send_loss_probe`'s `rearm_timer`). Counted
    /// before the send, and so kept, as in Linux: `total_retrans`, `TcpRetransSegs`,
    /// `bytes_retrans`, `TCPCB_EVER_RETRANS`, the skb's send time, `retrans_stamp`,
    /// `undo_retrans`.
    pub(crate) fn retransmit_failed(&mut self, ctx: &mut Ctx, token: &TxToken) {
        let seq = token.seq;
        let pcount = match self.rtx.get(seq) {
            Some(s) => s.pcount,
            None => token.len.div_ceil(self.mss_cache.max(1)).max(1),
        };
        ctx.mib.add(Mib::TcpExtTCPRetransFail, pcount as u64);
        match token.rtx {
            TxRetrans::None => {}
            TxRetrans::Queue { mib } => {
                ctx.mib.take_back(mib, pcount as u64);
                self.retransmission_not_sent(seq);
            }
            TxRetrans::QueueHead { mib, timer } => {
                ctx.mib.take_back(mib, pcount as u64);
                self.retransmission_not_sent(seq);
                if matches!(self.icsk.pending, Some((Pending::Retrans, _))) {
                    self.icsk.pending = timer;
                }
            }
            TxRetrans::TimerZeroWindow => self.retransmission_not_sent(seq),
            TxRetrans::Timer { rto } => {
                self.retransmission_not_sent(seq);
                self.icsk.backoff = self.icsk.backoff.saturating_sub(1);
                self.icsk.rto = rto;
                let at = ctx.now + TCP_RESOURCE_PROBE_INTERVAL;
                self.icsk.pending = Some((Pending::Retrans, at));
            }
            TxRetrans::LossProbe if self.tlp_retrans => {
                self.tlp_retrans = false;
                self.tlp_high_seq = None;
                ctx.mib.take_back(Mib::TcpExtTCPLossProbes, 1);
                let rto = Duration::from_micros(self.rto_delta_us(ctx).max(1) as u64);
                self.reset_xmit_timer_paced(ctx.now, Pending::Retrans, rto);
            }
            TxRetrans::LossProbe => {}
        }
    }

    /// The skb at `seq` was not retransmitted after all: lost, not in flight, and
    /// where the next retransmission walk starts (`tcp_verify_retransmit_hint`).
    fn retransmission_not_sent(&mut self, seq: u64) {
        if self.rtx.get(seq).is_some_and(|s| s.has(SACKED_RETRANS)) {
            self.rtx.update(seq, 0, SACKED_RETRANS);
            self.retransmit_hint = self.retransmit_hint.min(seq);
        }
    }

    /// Remembers `[start, end)` to send again; past `MAX_LOCAL_DROPS` ranges the
    /// last one grows to cover the new one (resending a little more is harmless).
    fn record_local_drop(&mut self, start: u64, end: u64) {
        const MAX_LOCAL_DROPS: usize = 64;
        let full = self.local_drops.len() >= MAX_LOCAL_DROPS;
        match self.local_drops.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            Some(last) if full => {
                *last = (last.0.min(start), last.1.max(end));
            }
            _ => self.local_drops.push((start, end)),
        }
    }

    /// Sends again what the device queue dropped (TSQ permitting), then new data.
    pub(crate) fn resend_local_drops(&mut self, ctx: &mut Ctx) {
        self.pace.tsq_throttled = false;
        let drops = core::mem::take(&mut self.local_drops);
        let mut left = Vec::new();
        for (i, &(start, end)) in drops.iter().enumerate() {
            if end <= self.snd_una {
                continue;
            }
            let mut from = start.max(self.snd_una);
            // Only TSQ keeps a range waiting: skbs SACKed or marked lost since the
            // drop need nothing from here (tcp_write_xmit stops on
            // tcp_small_queue_check alone), and a range with nothing left to send
            // must not block the ones after it for good.
            let mut throttled = false;
            for (seq, pcount) in self.rtx.unsent_in(from, end) {
                let Some(s) = self.rtx.get(seq) else { continue };
                let (flags, data) = (s.flags, s.data.clone());
                let truesize = data.len() as u32 + SKB_OVERHEAD;
                if self.small_queue_check(ctx.cfg, truesize, 1) {
                    from = seq;
                    throttled = true;
                    break;
                }
                let tstamp = self.transmit(ctx, seq, flags, &data, truesize);
                self.fclone_sent(ctx, seq);
                self.rtx.mark_resent(seq, tstamp);
                let tx = self.rate_skb_sent(tstamp);
                self.rtx.set_tx_rate(seq, tx);
                // tcp_write_xmit: counted in prr_out now that it leaves.
                self.count_prr_out(ctx, seq, pcount);
                from = seq + data.len() as u64 + (flags & FLAG_FIN != 0) as u64;
            }
            if throttled {
                left.push((from, end));
                left.extend_from_slice(&drops[i + 1..]);
                break;
            }
        }
        self.local_drops = left;
        if self.local_drops.is_empty() {
            self.resource_retry_at = None;
            if self.icsk.pending.is_none() {
                self.rearm_rto(ctx);
            }
        } else if self.resource_retry_at.is_none_or(|t| t <= ctx.now) {
            self.resource_retry_at = Some(ctx.now + TCP_RESOURCE_PROBE_INTERVAL);
        }
        self.write_xmit(ctx);
        self.check_space(ctx);
    }

    /// The pacing timer fired (`tcp_pace_kick`).
    pub(crate) fn on_pacing_timer(&mut self, ctx: &mut Ctx) {
        self.pace.pacing_timer = false;
        self.tsq_write(ctx);
        self.check_space(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::rtx::skb::Skb;

    use bytes::Bytes;

    fn tcb(cfg: &Config) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.mss_cache = 1448;
        t
    }

    fn push_skbs(t: &mut Tcb, n: u64) {
        let base = t.rtx.len() as u64;
        for i in base..base + n {
            let len = 1448u32;
            t.rtx.push(Skb {
                seq: 1 + i * len as u64,
                end_seq: 1 + (i + 1) * len as u64,
                data: Bytes::from(vec![0; len as usize]).into(),
                flags: 0,
                sacked: 0,
                pcount: 1,
                gso_size: 0,
                tx_time: Instant::ZERO,
                truesize: len + SKB_OVERHEAD,
                tx: Default::default(),
                fclone: 0,
                zc: None,
                uncharged: 0,
            });
        }
    }

    #[test]
    fn pacing_rate_is_200_percent_in_slow_start_then_120() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        t.update_pacing_rate(&cfg);
        // Before an RTT sample Linux skips the division by srtt_us (in eighths of a
        // microsecond): mss * 200 % * cwnd * 8 * 10^4.
        assert_eq!(t.pace.pacing_rate, 1448 * 200 * 10 * 80_000);
        t.rtt.srtt_us = 10_000;
        t.update_pacing_rate(&cfg);
        assert_eq!(t.pace.pacing_rate, 1448 * 10 * 2 * 100); // 2,896,000 B/s
        t.cw.snd_ssthresh = 20; // cwnd 10 >= ssthresh / 2: "approaching end of slow start"
        t.update_pacing_rate(&cfg);
        assert_eq!(t.pace.pacing_rate, 1448 * 10 * 12 * 10); // 120 %
        t.pace.max_pacing_rate = 1_000_000;
        t.update_pacing_rate(&cfg);
        assert_eq!(t.pace.pacing_rate, 1_000_000, "SO_MAX_PACING_RATE caps it");
    }

    #[test]
    fn autosize_at_low_and_high_rates_and_rtts() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        // 1 MB/s, 20 ms: under one segment per ms, so tcp_min_tso_segs (2).
        t.pace.pacing_rate = 1_000_000;
        t.rtt.min_rtt_us = 20_000;
        assert_eq!(t.tso_autosize(&cfg, 1448), 2);
        // 10 MB/s, 20 ms: 9765 bytes per ms = 6 segments.
        t.pace.pacing_rate = 10_000_000;
        assert_eq!(t.tso_autosize(&cfg, 1448), 6);
        // Same rate, 1 ms min_rtt: r = 1000 >> 9 = 1, bonus 32 KB: 42533 bytes.
        t.rtt.min_rtt_us = 1_000;
        assert_eq!(t.tso_autosize(&cfg, 1448), 29);
        // 10 Gbit/s: capped at gso_max_size, 45 segments.
        t.pace.pacing_rate = 1_250_000_000;
        t.rtt.min_rtt_us = 20_000;
        assert_eq!(t.tso_autosize(&cfg, 1448), 45);
        // Before seed 004 skbs go whole: the transmit-time goal is gso_max_size.
        let mut w = cfg.clone();
        w.size_goal_at = SizeGoalAt::Write;
        t.pace.pacing_rate = 1_000_000;
        assert_eq!(t.tso_segs(&w, 1448), 45);
        assert_eq!(t.tso_segs(&cfg, 1448), 2);
    }

    /// tcp_tso_autosize's bonus and cap are sk_gso_max_size (65279 here): a min_rtt
    /// under 2^tcp_tso_rtt_log us gives all of it, each further doubling half;
    /// with no sample yet (min_rtt ~0U) there is none. At MSS 536 the cap is 121
    /// segments (65536 would be 122).
    #[test]
    fn autosize_bonus_and_cap_are_sk_gso_max_size() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        t.pace.pacing_rate = 1024 * 1000; // 1000 bytes per ms
        t.rtt.min_rtt_us = 300; // r = 0: the whole bonus, then the cap
        assert_eq!(t.tso_autosize(&cfg, 536), 121);
        assert_eq!(t.tso_segs(&cfg, 536), 121);
        t.rtt.min_rtt_us = 600; // r = 1: 1000 + 65279 / 2 = 33639 bytes
        assert_eq!(t.tso_autosize(&cfg, 536), 33639 / 536);
        t.rtt.min_rtt_us = 512 << 4; // r = 16: 1000 + 0 bytes, one segment
        assert_eq!(t.tso_autosize(&cfg, 536), 2, "tcp_min_tso_segs");
        t.rtt.min_rtt_us = u32::MAX; // no sample: r = 2^23, no bonus
        t.pace.pacing_rate = 1024 * 536 * 5;
        assert_eq!(t.tso_autosize(&cfg, 536), 5);
        t.pace.pacing_rate = u64::MAX;
        assert_eq!(t.tso_autosize(&cfg, 536), 121, "capped");
        // Before seed 004: skbs of at most sk_gso_max_size, sent whole.
        let w = Config {
            size_goal_at: SizeGoalAt::Write,
            ..cfg.clone()
        };
        assert_eq!(t.tso_segs(&w, 536), 121);
    }

    #[test]
    fn tsq_limit_exemption_and_retransmit_factor() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        t.pace.pacing_rate = 10_240_000; // >> 10 = 10000 bytes
        push_skbs(&mut t, 1);
        t.wmem_alloc = 50_000;
        // A single skb in the rtx queue is always sent (Linux f921a4a5).
        assert!(!t.small_queue_check(&cfg, 2000, 0));
        push_skbs(&mut t, 1);
        // limit = max(2 * 2000, 10000) = 10000 < 50000: throttled.
        assert!(t.small_queue_check(&cfg, 2000, 0));
        assert!(t.pace.tsq_throttled);
        assert_eq!(t.pace.tsq_throttled_count, 1);
        // One byte under the limit, not throttled: refcount_read(&sk_wmem_alloc)
        // counts the socket's own reference, `> limit` from wmem_alloc == limit.
        t.pace.tsq_throttled = false;
        t.wmem_alloc = 9_999;
        assert!(!t.small_queue_check(&cfg, 2000, 0));
        t.wmem_alloc = 10_000;
        assert!(t.small_queue_check(&cfg, 2000, 0));
        t.pace.tsq_throttled = false;
        // Retransmissions get twice the room.
        t.wmem_alloc = 15_000;
        assert!(t.small_queue_check(&cfg, 2000, 0));
        assert!(!t.small_queue_check(&cfg, 2000, 1));
        // tcp_limit_output_bytes caps every socket, paced ones too (Linux 6.16).
        let mut small = cfg.clone();
        small.tcp_limit_output_bytes = 1000;
        t.wmem_alloc = 5000;
        assert!(t.small_queue_check(&small, 2000, 0));
        t.pace.pacing_needed = true;
        assert!(t.small_queue_check(&small, 2000, 0));
        t.pace.pacing_needed = false;
        // The switch turns it off.
        let mut off = cfg.clone();
        off.tsq = false;
        t.wmem_alloc = 1 << 30;
        assert!(!t.small_queue_check(&off, 2000, 0));
    }

    /// tcp_small_queue_check under TCP_TX_DELAY: the limit grows by
    /// `pacing_rate * tcp_tx_delay >> 19` (the delay's bytes, twice), after the
    /// retransmission factor and the tcp_limit_output_bytes cap.
    #[test]
    fn tsq_limit_grows_by_the_tx_delay_at_the_pacing_rate() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        t.pace.pacing_rate = 10_240_000; // >> 10 = 10000 bytes
        push_skbs(&mut t, 2);
        t.wmem_alloc = 29_530;
        assert!(t.small_queue_check(&cfg, 2000, 0), "no delay: 10000");
        t.pace.tsq_throttled = false;
        // 10_240_000 * 1000 >> 19 = 19531: the limit is 29531.
        t.tx_delay = 1000;
        assert!(!t.small_queue_check(&cfg, 2000, 0));
        t.wmem_alloc = 29_531;
        assert!(t.small_queue_check(&cfg, 2000, 0));
        t.pace.tsq_throttled = false;
        // Retransmissions: 20000 + 19531.
        t.wmem_alloc = 39_530;
        assert!(!t.small_queue_check(&cfg, 2000, 1));
        // Above tcp_limit_output_bytes, which caps the base limit only.
        let small = Config {
            tcp_limit_output_bytes: 1000,
            ..cfg.clone()
        };
        t.wmem_alloc = 20_530;
        assert!(!t.small_queue_check(&small, 2000, 0));
        t.wmem_alloc = 20_531;
        assert!(t.small_queue_check(&small, 2000, 0));
    }

    #[test]
    fn edt_advances_by_length_at_pacing_rate_after_ten_segments() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        t.pace.pacing_needed = true;
        t.pace.pacing_rate = 1_000_000; // 1 byte per us
        t.data_segs_out = 5;
        t.update_after_send(Instant(1_000), 1000);
        assert_eq!(t.pace.wstamp, Instant(1_000), "first 10 segments unpaced");
        t.data_segs_out = 10;
        t.update_after_send(Instant(1_000), 1000);
        assert_eq!(t.pace.wstamp, Instant(1_001_000));
        assert!(t.pacing_check(Instant(2_000)));
        assert!(t.pace.pacing_timer);
        assert!(!t.pacing_check(Instant(1_001_000)));
    }

    /// SK_PACING_FQ (a device whose sch_fq paces the socket): TCP still advances
    /// its EDT time (`sk_pacing_status != SK_PACING_NONE`) but never holds a packet
    /// (`tcp_needs_internal_pacing` is false), whatever asked for internal pacing,
    /// and TSQ is capped by tcp_limit_output_bytes as an unpaced socket's (Linux 6.16).
    #[test]
    fn fq_paced_socket_stamps_and_never_holds() {
        let cfg = Config {
            default_qdisc: "fq".into(),
            device_fq: Some(true),
            ..Config::default()
        };
        let mut t = tcb(&cfg);
        assert!(t.pace.pacing_fq && !t.pace.pacing_needed);
        t.pace.pacing_needed = true; // BBR's or SO_MAX_PACING_RATE's cmpxchg loses to FQ
        t.pace.pacing_rate = 1_000_000;
        t.data_segs_out = 10;
        t.pace.wstamp = Instant(1_000);
        t.update_after_send(Instant(1_000), 1000);
        assert_eq!(t.pace.wstamp, Instant(1_001_000));
        assert!(!t.pacing_check(Instant(2_000)));
        let small = Config {
            tcp_limit_output_bytes: 1000,
            ..cfg.clone()
        };
        push_skbs(&mut t, 2);
        t.wmem_alloc = 3000;
        assert!(t.small_queue_check(&small, 2000, 0));
        // With no device fq, default_qdisc=fq is emulated by internal pacing.
        let emulated = Config {
            device_fq: None,
            ..cfg.clone()
        };
        let t = tcb(&emulated);
        assert!(t.pace.pacing_needed && !t.pace.pacing_fq);
        let t = tcb(&Config {
            device_fq: Some(false),
            ..cfg
        });
        assert!(!t.pace.pacing_needed && !t.pace.pacing_fq);
    }

    #[test]
    fn max_pacing_rate_caps_the_rate_at_once_and_asks_for_pacing_unless_unlimited() {
        // sk_setsockopt(SO_MAX_PACING_RATE): sk_pacing_rate = min(it, the cap) now,
        // not at the next tcp_update_pacing_rate; ~0 leaves SK_PACING_NONE.
        let mut t = tcb(&Config::default());
        assert_eq!(t.pace.pacing_rate, u64::MAX);
        t.set_max_pacing_rate(u64::MAX);
        assert!(!t.pace.pacing_needed);
        t.set_max_pacing_rate(20_000);
        assert_eq!(
            (t.pace.pacing_rate, t.pace.max_pacing_rate),
            (20_000, 20_000)
        );
        assert!(t.pace.pacing_needed);
        t.set_max_pacing_rate(u64::MAX);
        assert_eq!(t.pace.pacing_rate, 20_000, "raised only by the next update");
        assert!(t.pace.pacing_needed, "the status stays NEEDED");
    }
}

#[cfg(test)]
mod defer_tests {
    use super::*;
    use crate::tcp::rtx::skb::Skb;

    const MS: u64 = 1_000_000;
    /// The test's clock: half a millisecond before the head's ACK is due.
    const NOW: u64 = 9 * MS + MS / 2;

    /// MSS 1000, a 100 KB window, srtt 10 ms, and the retransmit queue's head (4
    /// segments, all in flight) sent at 0, so its ACK is due at 10 ms; cwnd 5, so
    /// one segment of cwnd is left, under a third of cwnd; the last transmission
    /// at 9 ms. Every rule but the one a test moves lets a tail skb at 4001 wait.
    fn deferring() -> (Config, Tcb) {
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.mss_cache = 1000;
        t.cw.snd_cwnd = 5;
        (t.snd_una, t.snd_nxt, t.snd_wnd) = (1, 4001, 100_000);
        t.rtt.est.srtt8 = 80_000; // tp->srtt_us: 10 ms in eighths of a microsecond
        t.pace.wstamp = Instant(9 * MS);
        t.rtx.push(Skb::sent_for_test(1, 4000, 4, Instant::ZERO));
        assert_eq!(t.packets_in_flight(), 4);
        (cfg, t)
    }

    /// `tcp_tso_should_defer` for a tail skb of `len` bytes at 4001 at `now`, with
    /// a 64-segment goal.
    fn defer(t: &Tcb, cfg: &Config, now: u64, len: u64, last: bool) -> Option<DeferredBy> {
        let mut st = crate::tcp::TestStack::default();
        let ctx = st.ctx(cfg, Instant(now), false);
        t.tso_should_defer(&ctx, (4001, len), last, true, 64)
    }

    #[test]
    fn defers_a_packet_cwnd_would_cut_until_a_third_of_cwnd_is_open() {
        let (cfg, mut t) = deferring();
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), Some(DeferredBy::Cwnd));
        // cwnd 10: 6 segments left, a third of cwnd is 3,333 bytes: go.
        t.cw.snd_cwnd = 10;
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), None);
    }

    #[test]
    fn recovery_and_loss_send_now_cwr_and_disorder_may_defer() {
        let (cfg, mut t) = deferring();
        for (state, held) in [
            (CaState::Open, true),
            (CaState::Disorder, true),
            (CaState::Cwr, true),
            (CaState::Recovery, false),
            (CaState::Loss, false),
        ] {
            t.ca_state = state;
            let got = defer(&t, &cfg, NOW, 20_000, false);
            assert_eq!(got.is_some(), held, "{state:?}");
        }
    }

    #[test]
    fn the_last_transmission_must_be_at_most_1_ms_old() {
        let (cfg, mut t) = deferring();
        t.pace.wstamp = Instant(NOW - MS);
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), Some(DeferredBy::Cwnd));
        t.pace.wstamp = Instant(NOW - MS - 1);
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), None);
        // An EDT stamp ahead of now (paced packets still queued) is recent.
        t.pace.wstamp = Instant(NOW + 5 * MS);
        assert!(defer(&t, &cfg, NOW, 20_000, false).is_some());
    }

    #[test]
    fn a_pure_ack_is_a_transmission_too() {
        // __tcp_transmit_skb moves tcp_wstamp_ns to now for every skb, so an ACK
        // sent 0.2 ms ago makes the last transmission recent.
        let (cfg, mut t) = deferring();
        t.state = crate::tcp::TcpState::Established;
        t.pace.wstamp = Instant(NOW - 5 * MS);
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), None);
        let mut st = crate::tcp::TestStack::default();
        t.send_ack(&mut st.ctx(&cfg, Instant(NOW - MS / 5), false));
        assert_eq!(st.out.len(), 1);
        assert_eq!(t.pace.wstamp, Instant(NOW - MS / 5));
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), Some(DeferredBy::Cwnd));
    }

    #[test]
    fn a_full_sized_packet_or_a_whole_middle_skb_goes() {
        let (cfg, t) = deferring();
        let mut st = crate::tcp::TestStack::default();
        let ctx = st.ctx(&cfg, Instant(NOW), false);
        // One segment of cwnd left: with a 1-segment goal it is full-sized.
        assert_eq!(
            t.tso_should_defer(&ctx, (4001, 20_000), false, true, 1),
            None
        );
        assert!(t
            .tso_should_defer(&ctx, (4001, 20_000), false, true, 2)
            .is_some());
        // Not the tail ("Middle in queue won't get any more data") and it fits.
        assert_eq!(
            t.tso_should_defer(&ctx, (4001, 1_000), false, false, 64),
            None
        );
        assert!(t
            .tso_should_defer(&ctx, (4001, 1_500), false, false, 64)
            .is_some());
    }

    #[test]
    fn win_divisor_share_of_the_smaller_window_or_three_segments_with_zero() {
        let (mut cfg, mut t) = deferring();
        // Divisor 1, cwnd 7: 3 segments left of a 7-segment share: held.
        cfg.tcp_tso_win_divisor = 1;
        t.cw.snd_cwnd = 7;
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), Some(DeferredBy::Cwnd));
        // Divisor 3, cwnd 20, a window of 2,500 bytes past the skb: the share is a
        // third of the peer's window (2,166), not of cwnd (6,666): go.
        cfg.tcp_tso_win_divisor = 3;
        t.cw.snd_cwnd = 20;
        t.snd_wnd = 4_000 + 2_500;
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), None);
        t.snd_wnd = 100_000;
        // Divisor 0: held with up to 3 segments open, sent with more.
        cfg.tcp_tso_win_divisor = 0;
        t.cw.snd_cwnd = 7;
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), Some(DeferredBy::Cwnd));
        t.cw.snd_cwnd = 8;
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), None);
    }

    #[test]
    fn nothing_in_flight_sends() {
        // Divisor 0 and cwnd 3 pass the share test even with all of cwnd open; with
        // no retransmit queue head no ACK will come, so the skb goes.
        let (mut cfg, mut t) = deferring();
        cfg.tcp_tso_win_divisor = 0;
        t.cw.snd_cwnd = 3;
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), Some(DeferredBy::Cwnd));
        t.rtx = Default::default();
        t.snd_una = 4001;
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), None);
    }

    #[test]
    fn the_next_ack_must_be_due_within_half_srtt_and_1_ms() {
        // 295ce1eb36ae (Linux 6.18): "If next ACK is likely to come too late, ie in
        // more than min(1ms, half srtt), do not defer."
        let (cfg, mut t) = deferring();
        // srtt 10 ms, head sent at 0: the ACK is due at 10 ms.
        assert!(
            defer(&t, &cfg, 9 * MS, 20_000, false).is_some(),
            "1 ms away"
        );
        assert_eq!(defer(&t, &cfg, 9 * MS - 1, 20_000, false), None);
        // Large RTT: the rule before 6.18 waited once half of srtt had passed (60
        // ms of 100); 6.18 sends while the ACK is more than 1 ms away.
        t.rtt.est.srtt8 = 800_000;
        t.pace.wstamp = Instant(60 * MS);
        assert_eq!(defer(&t, &cfg, 60 * MS, 20_000, false), None);
        t.pace.wstamp = Instant(99 * MS);
        assert!(defer(&t, &cfg, 99 * MS, 20_000, false).is_some());
        // Small RTT: half of srtt is the bound (1 ms srtt: within 0.5 ms).
        t.rtt.est.srtt8 = 8_000;
        t.pace.wstamp = Instant(MS / 2);
        assert!(defer(&t, &cfg, MS / 2, 20_000, false).is_some());
        assert_eq!(defer(&t, &cfg, MS / 2 - 1, 20_000, false), None);
        // An ACK past due does not force the packet out.
        t.pace.wstamp = Instant(2 * MS);
        assert!(defer(&t, &cfg, 2 * MS, 20_000, false).is_some());
    }

    #[test]
    fn says_which_window_limits_or_waits_for_data_unless_none_will_come() {
        let (cfg, mut t) = deferring();
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), Some(DeferredBy::Cwnd));
        // The peer's window the smaller (or equal) one, shorter than the skb:
        // rwnd-limited (41727549de3e, "tcp: Do not underestimate rwnd_limited").
        t.snd_wnd = 4_000 + 1_000;
        assert_eq!(defer(&t, &cfg, NOW, 20_000, false), Some(DeferredBy::Rwnd));
        // Both windows take the skb, yet under a third of cwnd is open: the
        // application limits, unless the skb gets no more data (FIN, MSG_EOR).
        t.snd_wnd = 100_000;
        t.cw.snd_cwnd = 40;
        t.rtx.packets_out = 36;
        assert_eq!(defer(&t, &cfg, NOW, 2_000, false), Some(DeferredBy::App));
        assert_eq!(defer(&t, &cfg, NOW, 2_000, true), None);
    }
}

#[cfg(test)]
mod local_drop_tests {
    use super::*;
    use crate::tcp::rtx::skb::Skb;

    #[test]
    fn a_dropped_range_since_sacked_does_not_hold_back_the_rest() {
        // Two copies of one skb were sent (one range recorded per drop); one copy was
        // dropped and the other SACKed. Nothing of that range is left to send, so it
        // must not keep the range after it waiting for ever (the soak's stalled flow).
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.mss_cache = 1000;
        t.cw.snd_cwnd = 10;
        t.snd_wnd = 100_000;
        t.snd_una = 1;
        for i in 0..3u64 {
            t.rtx.push(Skb {
                seq: 1 + i * 1000,
                end_seq: 1001 + i * 1000,
                data: bytes::Bytes::from(vec![0; 1000]).into(),
                flags: 0,
                sacked: 0,
                pcount: 1,
                gso_size: 0,
                tx_time: Instant::ZERO,
                truesize: 1000 + SKB_OVERHEAD,
                tx: Default::default(),
                fclone: 0,
                zc: None,
                uncharged: 0,
            });
        }
        t.snd_nxt = 3001;
        t.rtx.sacktag(1001, 2001);
        t.local_drops = vec![(1001, 2001), (2001, 3001)];
        t.icsk.pending = None;
        let mut st = crate::tcp::TestStack::default();
        t.resend_local_drops(&mut st.ctx(&cfg, Instant(1_000_000), false));
        assert_eq!(t.local_drops, vec![], "every range resent or SACKed");
        assert_eq!(t.resource_retry_at, None);
        // tcp_rearm_rto: data is outstanding again, so the RTO is armed.
        assert!(matches!(t.icsk.pending, Some((Pending::Retrans, _))));
        assert_eq!(st.out.len(), 1, "the skb at 2001 went out again");
    }

    /// A tcb in CWR (`tcp_enter_cwr`, `high_seq` 1) with 2,000 bytes to send at 1.
    fn in_cwr(cfg: &Config) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        (t.mss_cache, t.cw.snd_cwnd, t.snd_wnd) = (1000, 10, 100_000);
        (t.snd_una, t.snd_nxt) = (1, 1);
        t.write_queue
            .push_back(crate::tcp::rtx::skb::WriteSkb::copied(
                1,
                bytes::BytesMut::from(&[0u8; 2000][..]).into(),
                0,
            ));
        t.enter_cwr();
        assert_eq!((t.ca_state, t.prr_out, t.high_seq), (CaState::Cwr, 0, 1));
        t
    }

    #[test]
    fn a_local_drop_counts_in_prr_out_once_when_it_finally_leaves() {
        // tcp_write_xmit counts an skb in prr_out (while tcp_in_cwnd_reduction) only
        // after tcp_transmit_skb sent it; one the qdisc dropped (NET_XMIT_DROP) stays
        // unsent and is counted when it leaves. lowtide hears of the drop later, so it
        // takes the count back and counts the resend.
        let cfg = Config::default();
        let mut t = in_cwr(&cfg);
        let mut st = crate::tcp::TestStack::default();
        let now = Instant(1_000_000);
        t.send_new(&mut st.ctx(&cfg, now, false), 2000, 1000);
        assert_eq!(t.prr_out, 2, "two segments sent in CWR");
        let tx = st.out.pop_front().expect("sent");
        t.on_tx_dropped(&mut st.ctx(&cfg, now, false), &tx.token);
        assert_eq!(t.prr_out, 0, "a local drop is not a send");
        assert_eq!(t.local_drops, vec![(1, 2001)]);
        t.resend_local_drops(&mut st.ctx(&cfg, now, false));
        assert_eq!(t.prr_out, 2, "counted once, as it finally leaves");
        let again = st.out.pop_front().expect("resent");
        assert!(st.out.is_empty());
        // Dropped again: taken back again, never below what was counted.
        t.on_tx_dropped(&mut st.ctx(&cfg, now, false), &again.token);
        assert_eq!(t.prr_out, 0);
    }

    #[test]
    fn the_prr_note_finds_its_packet_behind_a_later_one() {
        // A send path that pushes another packet after the one it counts (here a
        // pure ACK) still notes the count on the packet sent at `seq`.
        let cfg = Config::default();
        let mut t = in_cwr(&cfg);
        let mut st = crate::tcp::TestStack::default();
        let now = Instant(1_000_000);
        let mut ctx = st.ctx(&cfg, now, false);
        let data = crate::tcp::rtx::data::SkbData::from(bytes::Bytes::from(vec![0u8; 2000]));
        t.transmit(&mut ctx, 1, 0, &data, 2000 + SKB_OVERHEAD);
        t.snd_nxt = 2001;
        t.state = crate::tcp::TcpState::Established; // a closed socket sends no ACK
        t.send_ack(&mut ctx);
        t.count_prr_out(&mut ctx, 1, 2);
        assert_eq!(t.prr_out, 2);
        let (data, ack) = (
            st.out.pop_front().expect("data"),
            st.out.pop_front().expect("ack"),
        );
        assert_eq!((data.token.prr, ack.token.prr), ((2, t.high_seq), (0, 0)));
        t.on_tx_dropped(&mut st.ctx(&cfg, now, false), &data.token);
        assert_eq!(t.prr_out, 0, "the drop takes the count back");
    }

    #[test]
    fn a_drop_takes_back_only_its_own_reductions_count() {
        let cfg = Config::default();
        // Sent in Open: nothing counted; the drop enters CWR, and the resend is the
        // reduction's send.
        let mut t = in_cwr(&cfg);
        (t.ca_state, t.prr_out) = (CaState::Open, 0);
        let mut st = crate::tcp::TestStack::default();
        let now = Instant(1_000_000);
        t.send_new(&mut st.ctx(&cfg, now, false), 2000, 1000);
        let tx = st.out.pop_front().expect("sent");
        assert_eq!(tx.token.prr, (0, 0));
        t.on_tx_dropped(&mut st.ctx(&cfg, now, false), &tx.token);
        assert_eq!((t.ca_state, t.prr_out, t.high_seq), (CaState::Cwr, 0, 2001));
        t.resend_local_drops(&mut st.ctx(&cfg, now, false));
        assert_eq!(t.prr_out, 2);
        // Counted in an earlier reduction (another high_seq): this one keeps its own.
        let mut old = st.out.pop_front().expect("resent").token;
        old.prr.1 = 1;
        t.on_tx_dropped(&mut st.ctx(&cfg, now, false), &old);
        assert_eq!(t.prr_out, 2);
    }
}
