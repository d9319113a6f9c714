//! Timers (tcp_timer.c) and the RTT estimator behind the RTO (RFC 6298, with
//! Linux's `tcp_rtt_estimator` bounds).

use super::cong::{CaState, INFINITE_SSTHRESH};
use super::consts::{
    TCP_RESOURCE_PROBE_INTERVAL, TCP_RTO_MIN, TCP_THIN_LINEAR_RETRIES, TCP_TIMEOUT_FALLBACK,
    TCP_TIMEOUT_INIT, TCP_TIMEOUT_MIN, TCP_TIMEWAIT_LEN,
};
use super::sock::{Pending, RttEstimator, Tcb};
use super::{Ctx, TcpState};
use crate::mib::Mib;
use crate::socket::{EventKind, SocketError, TxRetrans};
use crate::time::Instant;
use core::time::Duration;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};

impl Tcb {
    /// Puts each `timer_list` timer armed (or moved) since the last call on the
    /// wheel at `now` (`sk_reset_timer` -> `mod_timer`); the stack calls it after
    /// each turn of the connection, before [`Tcb::next_deadline`].
    pub(crate) fn sync_timers(&mut self, now: Instant) {
        let w = &mut self.wheel;
        w.xmit.sync(now, self.icsk.pending.map(|p| p.1));
        w.delack.sync(now, self.ack.timeout);
        w.keepalive.sync(now, self.keepalive_at);
        w.fin_wait2.sync(now, self.tw_at);
        w.resource.sync(now, self.resource_retry_at);
    }

    /// When each timer runs: `[retransmit, delayed ACK, keepalive, FIN-WAIT-2,
    /// local-drop retry]`.
    fn timer_runs(&self) -> [Option<Instant>; 5] {
        let w = &self.wheel;
        [
            w.xmit.runs(self.icsk.pending.map(|p| p.1)),
            w.delack.runs(self.ack.timeout),
            w.keepalive.runs(self.keepalive_at),
            w.fin_wait2.runs(self.tw_at),
            w.resource.runs(self.resource_retry_at),
        ]
    }

    /// The earliest time this connection needs [`Tcb::on_timer`].
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let pacing = self.pace.pacing_timer.then_some(self.pace.wstamp);
        let hrtimers = [self.comp_sack.timer_at, pacing];
        self.timer_runs()
            .into_iter()
            .chain(hrtimers)
            .flatten()
            .min()
    }

    /// The RTO as Linux keeps it in `icsk_rto`: set from the estimator by an RTT
    /// sample (`tcp_set_rto`) and doubled in place by each retransmission timeout
    /// (`tcp_retransmit_timer`), at most `tcp_rto_max` (120 s unless
    /// `net.ipv4.tcp_rto_max_ms` or `TCP_RTO_MAX_MS`). Zero-window probes back off
    /// with `icsk_backoff` alone and leave it as it is (`tcp_send_probe0`), so
    /// `tcpi_rto` shows the RTO, not the probe interval.
    pub(crate) fn rto_backed_off(&self) -> Duration {
        self.icsk.rto
    }

    /// `inet_csk_rto_backoff`: `icsk_rto` shifted by `icsk_backoff`, at most
    /// `max_when`.
    pub(crate) fn rto_backoff(&self, max_when: Duration) -> Duration {
        (self.icsk.rto * (1u32 << self.icsk.backoff.min(16))).min(max_when)
    }

    /// `tcp_retransmit_timer`'s `out_reset_timer` backoff: `icsk_backoff` up by one
    /// and `icsk_rto` doubled, at most `tcp_rto_max`.
    pub(super) fn backoff_rto(&mut self) {
        self.icsk.backoff += 1;
        self.icsk.rto = (self.icsk.rto * 2).min(self.icsk.rto_max);
    }

    /// `tcp_retransmit_timer`'s `out_reset_timer:` for an established connection: a
    /// thin stream (`tcp_stream_is_thin`: fewer than 4 packets out, past its initial
    /// slow start) with `tcp_thin_linear_timeouts` or `TCP_THIN_LINEAR_TIMEOUTS` keeps
    /// the estimator's RTO (`__tcp_set_rto`, bounded by `tcp_rto_min` and
    /// `tcp_rto_max`, no backoff) through its first `TCP_THIN_LINEAR_RETRIES`
    /// timeouts; otherwise the RTO doubles.
    fn backoff_rto_or_thin(&mut self, ctx: &Ctx) {
        let thin = self.rtx.packets_out < 4 && self.cw.snd_ssthresh < INFINITE_SSTHRESH;
        if self.state == TcpState::Established
            && (self.thin_lto || ctx.cfg.tcp_thin_linear_timeouts)
            && thin
            && self.icsk.retransmits <= TCP_THIN_LINEAR_RETRIES
        {
            self.icsk.backoff = 0;
            self.icsk.rto = self
                .rto_from_estimator()
                .clamp(self.rto_min(), self.icsk.rto_max);
        } else {
            self.backoff_rto();
        }
    }

    /// Restarts the retransmit timer from now (`tcp_rearm_rto`), or stops it when
    /// nothing is outstanding. Replacing a loss probe or reorder timer, the RTO keeps
    /// its deadline from the head's transmission (`tcp_rto_delta_us`).
    pub(crate) fn rearm_rto(&mut self, ctx: &Ctx) {
        if self.tfo.rsk.is_some() {
            return; // the timer serves the Fast Open SYN-ACK
        }
        if self.rtx.packets_out == 0 && self.snd_nxt == self.snd_una {
            if matches!(
                self.icsk.pending,
                Some((
                    Pending::Retrans | Pending::LossProbe | Pending::ReoTimeout,
                    _
                ))
            ) {
                self.icsk.pending = None;
            }
            return;
        }
        let rto = match self.icsk.pending {
            Some((Pending::LossProbe | Pending::ReoTimeout, _)) => {
                Duration::from_micros(self.rto_delta_us(ctx).max(1) as u64)
            }
            _ => self.rto_backed_off(),
        };
        self.reset_xmit_timer_paced(ctx.now, Pending::Retrans, rto);
    }

    /// `tcp_ack_update_rtt` with a valid sample: `tcp_rtt_estimator`, `tcp_set_rto`,
    /// and "RFC6298: only reset backoff on valid RTT measurement" (an ACK of a
    /// retransmission without a timestamp keeps the backed-off RTO, Karn).
    pub(crate) fn rtt_sample(&mut self, rtt_us: u32) {
        let min_us = self.rto_min().as_micros().min(u32::MAX as u128) as u32;
        let e = &mut self.rtt.est;
        e.sample(rtt_us, min_us, self.snd_una, self.snd_nxt);
        self.rtt.srtt_us = (e.srtt8 >> 3).max(1);
        self.rtt.rttvar_us = e.mdev >> 2;
        self.icsk.rto = self.rto_from_estimator();
        self.rtt_samples += 1;
        self.rtt_sum_us += rtt_us.max(1) as u64;
        self.icsk.backoff = 0;
    }

    /// `tcp_set_rto`: `__tcp_set_rto`, `usecs_to_jiffies(srtt + rttvar)` (HZ =
    /// 1000), bounded by `tcp_bound_rto`.
    pub(crate) fn rto_from_estimator(&self) -> Duration {
        let e = &self.rtt.est;
        let rto_us = (e.srtt8 >> 3) as u64 + e.rttvar as u64;
        Duration::from_millis(rto_us.div_ceil(1000)).min(self.icsk.rto_max)
    }

    /// `tcp_ack_update_rtt`: the sequence sample `seq_rtt_us` (else the SACK one),
    /// or with neither, when the ACK acknowledged segments (`FLAG_ACKED`), the
    /// echoed timestamp (RFC 7323 "RTTM": it then stands for `ca_rtt_us` too).
    /// A valid sample feeds the min filter with `ca_rtt_us`, the estimator and the
    /// RTO, and ends the backoff. Returns whether there was a valid sample, and the
    /// congestion control's RTT (`rs->rtt_us`), if any.
    pub(crate) fn ack_update_rtt(
        &mut self,
        ctx: &Ctx,
        s: &RttSamples,
        ts_rtt_us: Option<u32>,
    ) -> (bool, Option<u32>) {
        let (mut seq_rtt, mut ca_rtt) = (s.seq_rtt_us.or(s.sack_rtt_us), s.ca_rtt_us);
        if seq_rtt.is_none() && s.acked {
            if let Some(ts) = ts_rtt_us {
                (seq_rtt, ca_rtt) = (Some(ts), Some(ts));
            }
        }
        let Some(seq_rtt) = seq_rtt else {
            return (false, ca_rtt);
        };
        // ca_rtt_us comes with every sequence or SACK sample (and the TS one).
        let ca = ca_rtt.unwrap_or(seq_rtt);
        self.update_rtt_min(ctx, ca, s.maybe_delayed);
        self.rtt_sample(seq_rtt);
        (true, ca_rtt)
    }

    /// `tcp_init_metrics` without a cached RTT: "RFC6298: 5.7 We've failed to get a
    /// valid RTT sample from 3WHS" (a SYN or SYN-ACK went again): the RTO starts at
    /// `TCP_TIMEOUT_FALLBACK`, the deviation with it, not at the 1 s initial RTO.
    pub(crate) fn rto_fallback(&mut self) {
        let us = TCP_TIMEOUT_FALLBACK.as_micros() as u32;
        let e = &mut self.rtt.est;
        (e.rttvar, e.mdev, e.mdev_max) = (us, us, us);
        self.rtt.rttvar_us = us >> 2;
        self.icsk.rto = TCP_TIMEOUT_FALLBACK;
    }

    /// `tcp_update_rtt_min`: the windowed min filter over `tcp_min_rtt_wlen`
    /// seconds (jiffies, HZ = 1000), skipping an ACK that may have been delayed
    /// when it would raise the minimum (`FLAG_ACK_MAYBE_DELAYED`). A 0 us sample
    /// counts as one jiffy.
    pub(crate) fn update_rtt_min(&mut self, ctx: &Ctx, rtt_us: u32, maybe_delayed: bool) {
        if maybe_delayed && rtt_us > self.rtt.min_rtt_us {
            return;
        }
        let wlen = ctx.cfg.tcp_min_rtt_wlen.saturating_mul(1000);
        let now = ctx.now.as_millis() as u32;
        let v = if rtt_us == 0 { 1000 } else { rtt_us };
        // tcp_init_sock's minmax_reset(~0U): the first sample replaces it.
        self.rtt.min_rtt_us = if self.rtt.min_rtt_us == u32::MAX {
            self.rtt.rtt_min.reset(now, v)
        } else {
            self.rtt.rtt_min.running_min(wlen, now, v)
        };
    }

    /// Runs whichever timers are due.
    pub(crate) fn on_timer(&mut self, ctx: &mut Ctx) {
        let now = ctx.now;
        let due = self.timer_runs().map(|t| t.is_some_and(|t| t <= now));
        let [xmit_due, delack_due, keepalive_due, fin_wait2_due, resource_due] = due;
        if fin_wait2_due {
            self.tw_at = None;
            return self.fin_wait2_timer(ctx);
        }
        if delack_due {
            self.ack.timeout = None;
            if self.ack.pending {
                self.delack_missed(ctx.cfg);
                ctx.mib.inc(Mib::TcpExtDelayedACKs);
                self.send_ack(ctx);
            }
        }
        if self.comp_sack.timer_at.is_some_and(|t| t <= now) {
            self.comp_sack_timer(ctx);
        }
        if self.pace.pacing_timer && self.pace.wstamp <= now {
            self.on_pacing_timer(ctx);
        }
        if resource_due && self.resource_retry_at.is_some_and(|t| t <= now) {
            self.resource_retry_at = None;
            self.resend_local_drops(ctx);
        }
        if keepalive_due && self.keepalive_at.is_some_and(|t| t <= now) {
            self.keepalive_at = None;
            self.keepalive_timer(ctx);
        }
        if !xmit_due {
            return;
        }
        match self.icsk.pending {
            Some((Pending::Retrans, t)) if t <= now => {
                self.icsk.pending = None;
                self.retransmit_timer(ctx, t);
            }
            Some((Pending::Probe0, t)) if t <= now => {
                self.icsk.pending = None;
                self.probe_timer(ctx);
            }
            // tcp_write_timer_handler clears icsk_pending before the RTO and the
            // zero-window probe only: the reorder and loss-probe handlers run with
            // theirs still set, which tcp_xmit_retransmit_queue (no RTO restart for
            // the head) and tcp_rearm_rto (the RTO from the head's send,
            // tcp_rto_delta_us) read.
            Some((kind @ (Pending::ReoTimeout | Pending::LossProbe), t)) if t <= now => {
                match kind {
                    Pending::ReoTimeout => self.rack_reo_timeout(ctx),
                    _ => self.send_loss_probe(ctx),
                }
                // The timer has fired: a flag its handler left is no timer
                // (a Fast Open child's tcp_rearm_rto returns without one).
                if self.icsk.pending == Some((kind, t)) {
                    self.icsk.pending = None;
                }
            }
            _ => {}
        }
    }

    /// `tcp_retransmit_timer`; `expires` is the timer's `icsk_timeout`
    /// (`tcp_timeout_expires`), which the timer wheel ran late or on time.
    pub(super) fn retransmit_timer(&mut self, ctx: &mut Ctx, expires: Instant) {
        if self.tfo.rsk.is_some() {
            // Before the SYN-ACK is acknowledged, nothing else is retransmitted.
            return self.fastopen_synack_timer(ctx);
        }
        if self.is_request() {
            return self.reqsk_timer(ctx);
        }
        if self.rtx.is_empty() && !matches!(self.state, TcpState::SynSent | TcpState::SynRecv) {
            return;
        }
        if self.state.is_synchronized() && self.snd_wnd == 0 && !self.sock_dead() {
            return self.zero_window_rto(ctx, expires);
        }
        ctx.mib.inc(Mib::TcpExtTCPTimeouts);
        if self.write_timeout(ctx) {
            return;
        }
        self.count_rto_failure(ctx);
        if self.state.is_synchronized() {
            // tcp_enter_loss sees icsk_retransmits before this timeout counts, and
            // tlp_high_seq until tcp_init_undo has counted the probe (Linux 6.11+:
            // the timer no longer clears it first; tcp_enter_loss does, after).
            self.enter_loss(ctx);
            self.update_rto_stats(ctx.now);
            // The RTO before this timeout's backoff, for a local drop to restore.
            let rto = self.icsk.rto;
            self.backoff_rto_or_thin(ctx);
            self.retransmit_hint = self.snd_una;
            self.retransmit_head(ctx, TxRetrans::Timer { rto });
        } else {
            // A SYN, or a simultaneous open's SYN-ACK (a request's SYN-ACK timer is
            // reqsk_timer, tcp/check_req.rs).
            self.syn_timeout_loss(ctx);
            self.update_rto_stats(ctx.now);
            // A SYN's first tcp_syn_linear_timeouts timeouts keep the initial RTO.
            if self.state != TcpState::SynSent
                || self.total_rto > ctx.cfg.tcp_syn_linear_timeouts as u32
            {
                self.backoff_rto();
            }
            self.retransmit_syn(ctx);
        }
        let rto = self.clamp_rto_to_user_timeout(ctx, self.rto_backed_off());
        self.icsk.pending = Some((Pending::Retrans, ctx.now + rto));
    }

    /// `tcp_retransmit_timer`'s counter of the state the first RTO of an episode
    /// (`icsk_retransmits == 0`) found: Recovery (SACK or NewReno), Loss, or Disorder
    /// or SACKed data (SACK or NewReno); Open without SACKed data counts nothing.
    fn count_rto_failure(&self, ctx: &mut Ctx) {
        if self.icsk.retransmits != 0 {
            return;
        }
        let sack = self.rx_opt.sack_ok;
        let mib = match self.ca_state {
            CaState::Recovery if sack => Mib::TcpExtTCPSackRecoveryFail,
            CaState::Recovery => Mib::TcpExtTCPRenoRecoveryFail,
            CaState::Loss => Mib::TcpExtTCPLossFailures,
            CaState::Disorder if sack => Mib::TcpExtTCPSackFailures,
            CaState::Disorder => Mib::TcpExtTCPRenoFailures,
            _ if self.sacked_out() == 0 => return,
            _ if sack => Mib::TcpExtTCPSackFailures,
            _ => Mib::TcpExtTCPRenoFailures,
        };
        ctx.mib.inc(mib);
    }

    /// `tcp_retransmit_timer`'s `tcp_retransmit_skb` of the head, one segment: not
    /// a walk of the retransmit queue, so neither cwnd, pacing nor TSQ holds it and no
    /// `TCPSlowStartRetrans` counts it. Its token says `how` (a plain timeout, or
    /// one under a zero window that ignores the result), for a local drop to take
    /// back ([`Tcb::retransmit_failed`]).
    fn retransmit_head(&mut self, ctx: &mut Ctx, how: TxRetrans) {
        let Some(head) = self.rtx.first().map(|s| s.seq) else {
            return;
        };
        if let Some((sent, _, _)) = self.retransmit_skb(ctx, head, 1) {
            if let Some(token) = self.tx_token_mut(ctx, sent) {
                token.rtx = how;
            }
        }
    }

    /// `tcp_retransmit_timer` when the peer shrank its window to zero under data in
    /// flight ("receiver dastardly shrinks window"): the retransmissions are window
    /// probes, neither counted as timeouts (TcpExtTCPTimeouts, `tcp_update_rto_stats`)
    /// nor timing the connection out while the peer ACKs them
    /// (`tcp_rtx_probe0_timed_out`, Linux 6.7+). It ends at `out_reset_timer` as a
    /// plain timeout does: the RTO backs off and doubles, or, for a thin stream with
    /// linear timeouts, stays the estimator's (`icsk_retransmits` never counts here,
    /// so for as long as the window stays shut).
    fn zero_window_rto(&mut self, ctx: &mut Ctx, expires: Instant) {
        // retrans_stamp, else the head's last transmission (tcp_skb_timestamp_ts).
        let head_sent = self.rtx.first().map_or(self.lsndtime, |s| s.tx_time);
        let since = self.undo.retrans_stamp.unwrap_or(head_sent);
        let rtx_delta = ctx.now.saturating_since(since);
        if self.rtx_probe0_timed_out(expires, rtx_delta) {
            return self.write_err(ctx);
        }
        self.enter_loss(ctx);
        self.backoff_rto_or_thin(ctx);
        self.retransmit_hint = self.snd_una;
        self.retransmit_head(ctx, TxRetrans::TimerZeroWindow);
        let rto = self.clamp_rto_to_user_timeout(ctx, self.rto_backed_off());
        self.icsk.pending = Some((Pending::Retrans, ctx.now + rto));
    }

    /// `tcp_rtx_probe0_timed_out`: no ACK for twice `tcp_rto_max` (or for
    /// `TCP_USER_TIMEOUT`, if shorter) and the probes going on that long; with
    /// `TCP_USER_TIMEOUT`, also probes going on longer than it whatever the ACKs
    /// ("it does not want win 0 packets to 'reset the timer'"). The silence is
    /// measured to the timer's expiry (`tcp_timeout_expires`, Linux 6.11+), not to
    /// the wheel's later run of it, and may be negative (an ACK since).
    fn rtx_probe0_timed_out(&self, expires: Instant, rtx_delta: Duration) -> bool {
        let mut timeout = 2 * self.icsk.rto_max;
        if !self.icsk.user_timeout.is_zero() {
            if rtx_delta > self.icsk.user_timeout {
                return true;
            }
            timeout = timeout.min(self.icsk.user_timeout);
        }
        let rcv_delta = expires.saturating_since(self.rcv_tstamp);
        rcv_delta > timeout && rtx_delta > timeout
    }

    /// `tcp_write_timeout`: whether the connection gave up (and was failed with
    /// `ETIMEDOUT`). SYN states count retransmissions (`TCP_SYNCNT`, else
    /// `tcp_syn_retries`, plus `tcp_syn_linear_timeouts` in SYN-SENT) and time them
    /// from `TCP_TIMEOUT_INIT`; synchronized ones compare the time since the first
    /// retransmission with the time `tcp_retries2` backed-off RTOs from
    /// `TCP_RTO_MIN` take (`retransmits_timed_out`), or with `TCP_USER_TIMEOUT`.
    fn write_timeout(&mut self, ctx: &mut Ctx) -> bool {
        let syn = matches!(self.state, TcpState::SynSent | TcpState::SynRecv);
        let mut orphan_alive = None;
        let (boundary, rto_base, mut expired) = if syn {
            // retry_until = icsk_syn_retries (TCP_SYNCNT) ?: tcp_syn_retries, in
            // SYN-RECV too (a simultaneous open's: a request's SYN-ACK has its own
            // timer, reqsk_timer, and a Fast Open child's tcp_fastopen_synack_timer);
            // only SYN-SENT gets tcp_syn_linear_timeouts retransmissions more.
            let retry_until = match self.icsk.syn_retries {
                0 => ctx.cfg.tcp_syn_retries,
                n => n,
            };
            let linear = match self.state {
                TcpState::SynSent => ctx.cfg.tcp_syn_linear_timeouts,
                _ => 0,
            };
            let max_retransmits = retry_until.saturating_add(linear);
            (
                retry_until,
                TCP_TIMEOUT_INIT,
                self.icsk.retransmits >= max_retransmits,
            )
        } else if self.sock_dead() {
            let alive = self.icsk.rto < self.icsk.rto_max;
            orphan_alive = Some(alive);
            (self.orphan_retries(ctx, alive), TCP_RTO_MIN, false)
        } else {
            // tcp_write_timeout: after tcp_retries1 RTOs, black hole detection
            // (tcp_mtu_probing; the route's __dst_negative_advice has no effect here).
            let start = self.undo.retrans_stamp.unwrap_or(ctx.now);
            let retries1 =
                model_timeout(ctx.cfg.tcp_retries1 as u32, TCP_RTO_MIN, self.icsk.rto_max);
            if self.icsk.retransmits > 0 && ctx.now.saturating_since(start) >= retries1 {
                self.mtu_probing_blackhole(ctx);
            }
            (ctx.cfg.tcp_retries2, TCP_RTO_MIN, false)
        };
        if !expired && self.icsk.retransmits > 0 {
            let timeout = match self.icsk.user_timeout {
                t if t.is_zero() => model_timeout(boundary as u32, rto_base, self.icsk.rto_max),
                t => t,
            };
            let start = self.undo.retrans_stamp.unwrap_or(ctx.now);
            expired = ctx.now.saturating_since(start) >= timeout;
        }
        // An orphan: do_reset = alive || !retransmits_timed_out(retry_until).
        if orphan_alive.is_some_and(|alive| self.out_of_resources(ctx, alive || !expired)) {
            return true;
        }
        self.fastopen_detect_blackhole(ctx, expired);
        if expired {
            self.write_err(ctx);
        } else if self.rethink_txhash(ctx) {
            // sk_rethink_txhash: a new transmit hash (IPv6 flow label).
            self.timeout_rehash += 1;
            ctx.mib.inc(Mib::TcpExtTcpTimeoutRehash);
        }
        expired
    }

    /// `tcp_orphan_retries`: `net.ipv4.tcp_orphan_retries`, where 0 means 8 while the
    /// socket still sends with a backed-off RTO below 120 s (`alive`); an orphan
    /// past that with a soft error from ICMP ("we know from an ICMP that something
    /// is wrong") gets none.
    fn orphan_retries(&self, ctx: &Ctx, alive: bool) -> u8 {
        match ctx.cfg.tcp_orphan_retries {
            _ if self.sk_err_soft.is_some() && !alive => 0,
            0 if alive => 8,
            n => n,
        }
    }

    /// `tcp_write_err`: the connection timed out, with the soft error an ICMP
    /// message left if any, else `ETIMEDOUT` (`tcp_done_with_error`).
    pub(crate) fn write_err(&mut self, ctx: &mut Ctx) {
        ctx.mib.inc(Mib::TcpExtTCPAbortOnTimeout);
        let err = self.sk_err_soft.take().unwrap_or(SocketError::TimedOut);
        self.done_with_error(ctx, err);
    }

    /// `tcp_probe_timer`: probe a zero window, backing off like the RTO.
    /// [RFC 1122 section 4.2.2.17](https://www.rfc-editor.org/rfc/rfc1122#section-4.2.2.17):
    /// the sender stays open as long as the receiver answers the probes (each ACK resets
    /// `probes_out`); it gives up after `tcp_retries2` unanswered probes (an orphan after
    /// `tcp_orphan_retries`), or once the window has stayed closed for `TCP_USER_TIMEOUT`.
    fn probe_timer(&mut self, ctx: &mut Ctx) {
        if self.rtx.packets_out > 0 || self.write_queue.is_empty() {
            self.icsk.probes_out = 0;
            self.icsk.probes_tstamp = None;
            return;
        }
        match self.icsk.probes_tstamp {
            None => self.icsk.probes_tstamp = Some(ctx.now),
            Some(t)
                if !self.icsk.user_timeout.is_zero()
                    && ctx.now.saturating_since(t) >= self.icsk.user_timeout =>
            {
                return self.write_err(ctx);
            }
            Some(_) => {}
        }
        let mut max_probes = ctx.cfg.tcp_retries2;
        if self.sock_dead() {
            let alive = self.rto_backoff(self.icsk.rto_max) < self.icsk.rto_max;
            max_probes = self.orphan_retries(ctx, alive);
            if !alive && self.icsk.backoff >= max_probes as u32 {
                return self.write_err(ctx);
            }
            if self.out_of_resources(ctx, true) {
                return;
            }
        }
        if self.icsk.probes_out >= max_probes {
            return self.write_err(ctx);
        }
        self.send_probe0(ctx);
    }

    /// `tcp_update_rto_stats`: one more RTO; the first of a series starts an RTO
    /// recovery and its clock.
    pub(super) fn update_rto_stats(&mut self, now: Instant) {
        if self.icsk.retransmits == 0 {
            self.total_rto_recoveries = self.total_rto_recoveries.saturating_add(1);
            self.rto_stamp = Some(now);
        }
        self.icsk.retransmits = self.icsk.retransmits.saturating_add(1);
        self.total_rto = self.total_rto.saturating_add(1);
    }

    /// `tcp_update_rto_time`: an RTO recovery ended (the Loss state was left).
    pub(crate) fn update_rto_time(&mut self, now: Instant) {
        if let Some(t) = self.rto_stamp.take() {
            self.total_rto_time_ms += now.saturating_since(t).as_millis() as u64;
        }
    }

    /// `tcp_send_probe0`: a window probe (`tcp_write_wakeup`), then the next one
    /// after `tcp_probe0_when`, unless the probe opened the window (data in flight)
    /// or nothing waits any more, which ends probing.
    fn send_probe0(&mut self, ctx: &mut Ctx) {
        let sent = self.write_wakeup(ctx, crate::mib::Mib::TcpExtTCPWinProbe);
        if self.rtx.packets_out > 0 || self.write_queue.is_empty() {
            self.icsk.probes_out = 0;
            self.icsk.backoff = 0;
            self.icsk.probes_tstamp = None;
            return;
        }
        self.icsk.probes_out = self.icsk.probes_out.saturating_add(1);
        let when = if sent {
            if self.icsk.backoff < ctx.cfg.tcp_retries2 as u32 {
                self.icsk.backoff += 1;
            }
            self.probe0_when()
        } else {
            TCP_RESOURCE_PROBE_INTERVAL // local congestion: retry conservatively
        };
        let when = self.clamp_probe0_to_user_timeout(ctx, when);
        self.reset_xmit_timer_paced(ctx.now, Pending::Probe0, when);
    }

    /// `tcp_probe0_base`: `icsk_rto` (backed off by earlier retransmission
    /// timeouts, not by the probes), at least `TCP_RTO_MIN`.
    pub(crate) fn probe0_base(&self) -> Duration {
        self.icsk.rto.max(TCP_RTO_MIN)
    }

    /// `tcp_probe0_when`: the base shifted by `icsk_backoff` (at most
    /// `ilog2(TCP_RTO_MAX / TCP_RTO_MIN) + 1`, 10), at most `tcp_rto_max`.
    pub(crate) fn probe0_when(&self) -> Duration {
        (self.probe0_base() * (1u32 << self.icsk.backoff.min(10))).min(self.icsk.rto_max)
    }

    /// `tcp_clamp_probe0_to_user_timeout`: the next probe comes no later than the
    /// user timeout's end (at least `TCP_TIMEOUT_MIN` from now).
    pub(crate) fn clamp_probe0_to_user_timeout(&self, ctx: &Ctx, when: Duration) -> Duration {
        match self.user_timeout_left(ctx, self.icsk.probes_tstamp) {
            Some(left) => when.min(left.max(TCP_TIMEOUT_MIN)),
            None => when,
        }
    }

    /// `tcp_clamp_rto_to_user_timeout`: the next RTO comes no later than the user
    /// timeout's end, counted from the first retransmission; once it has passed,
    /// in one jiffy ("fire ASAP").
    fn clamp_rto_to_user_timeout(&self, ctx: &Ctx, rto: Duration) -> Duration {
        match self.user_timeout_left(ctx, self.undo.retrans_stamp) {
            Some(left) if left.is_zero() => Duration::from_millis(1),
            Some(left) => rto.min(left),
            None => rto,
        }
    }

    /// What is left of `TCP_USER_TIMEOUT` counted from `start`; `None` without a
    /// user timeout or a start.
    fn user_timeout_left(&self, ctx: &Ctx, start: Option<Instant>) -> Option<Duration> {
        let t = start.filter(|_| !self.icsk.user_timeout.is_zero())?;
        Some(
            self.icsk
                .user_timeout
                .saturating_sub(ctx.now.saturating_since(t)),
        )
    }

    /// `tcp_fin_time`: how long an orphan stays in FIN-WAIT-2: `TCP_LINGER2` or
    /// `tcp_fin_timeout`, at least 3.5 RTO.
    pub(crate) fn fin_time(&self, cfg: &crate::config::Config) -> Duration {
        let secs = match self.linger2 {
            v if v > 0 => v as u64,
            _ => cfg.tcp_fin_timeout as u64,
        };
        Duration::from_secs(secs).max(self.icsk.rto * 4 - self.icsk.rto / 2)
    }

    /// `tcp_rcv_state_process`, FIN-WAIT-1 when our FIN was acknowledged, for an
    /// orphan: with `TCP_LINGER2` negative, or when the segment brings data past
    /// `rcv_nxt` (an out-of-order FIN after close), the connection ends
    /// (`TcpExtTCPAbortOnData`) and the segment is answered with a reset. Else it
    /// waits `tcp_fin_time` for the peer's FIN: beyond `TCP_LINGER2`'s 60 s on its
    /// FIN-WAIT-2 timer first; with the FIN in this segment as it is (the FIN takes
    /// it to TIME-WAIT); otherwise as a FIN-WAIT-2 timewait socket at once, the
    /// segment consumed. False: the segment is consumed.
    pub(crate) fn orphan_fin_wait2(&mut self, ctx: &mut Ctx, th: &TcpRepr, new_data: bool) -> bool {
        if self.linger2 < 0 || new_data {
            if new_data && self.tfo.syn_fastopen && th.flags.contains(TcpFlags::FIN) {
                self.tfo.blackhole = true; // tcp_fastopen_active_disable
            }
            ctx.mib.inc(Mib::TcpExtTCPAbortOnData);
            self.set_closed(ctx);
            super::reply::send_reset(
                ctx,
                (self.tuple, self.reset_flow_label(ctx)),
                th,
                0,
                self.md5_key(),
            );
            return false;
        }
        let tmo = self.fin_time(ctx.cfg);
        if tmo > TCP_TIMEWAIT_LEN {
            self.reset_fin_wait2_timer(ctx.now + (tmo - TCP_TIMEWAIT_LEN));
        } else if th.flags.contains(TcpFlags::FIN) {
            self.reset_fin_wait2_timer(ctx.now + tmo);
        } else {
            self.time_wait(ctx, TcpState::FinWait2, tmo);
            return false;
        }
        true
    }

    /// `tcp_close` in FIN-WAIT-2 (`TCP_LINGER2` not negative): the orphan waits
    /// `tcp_fin_time`, beyond 60 s on its FIN-WAIT-2 timer first, else as a
    /// FIN-WAIT-2 timewait socket at once.
    pub(crate) fn close_fin_wait2(&mut self, ctx: &mut Ctx) {
        let tmo = self.fin_time(ctx.cfg);
        if tmo > TCP_TIMEWAIT_LEN {
            self.reset_fin_wait2_timer(ctx.now + (tmo - TCP_TIMEWAIT_LEN));
        } else {
            self.time_wait(ctx, TcpState::FinWait2, tmo);
        }
    }

    /// `inet_csk_reset_keepalive_timer` for an orphan's FIN-WAIT-2: the timer is
    /// `sk_timer`, the one keepalive runs on, so a keepalive time armed before is
    /// gone (no probe follows; `tcp_keepalive_timer` takes an orphan in FIN-WAIT-2
    /// to its FIN-WAIT-2 branch whenever it runs).
    fn reset_fin_wait2_timer(&mut self, at: Instant) {
        self.tw_at = Some(at);
        self.keepalive_at = None;
    }

    /// `tcp_keepalive_timer` for an orphan in FIN-WAIT-2 (the timer `tw_at` is):
    /// what is left of `tcp_fin_time` past 60 s as a FIN-WAIT-2 timewait socket,
    /// else a reset and the end.
    fn fin_wait2_timer(&mut self, ctx: &mut Ctx) {
        if self.state != TcpState::FinWait2 {
            return;
        }
        if self.linger2 >= 0 {
            let tmo = self.fin_time(ctx.cfg).saturating_sub(TCP_TIMEWAIT_LEN);
            if !tmo.is_zero() {
                return self.time_wait(ctx, TcpState::FinWait2, tmo);
            }
        }
        self.send_active_reset(ctx);
        self.set_closed(ctx);
    }

    /// `tcp_time_wait`: the connection leaves its `Tcb` for a timewait socket
    /// (`substate` TIME-WAIT for 60 s, or an orphan's FIN-WAIT-2 for `timeo`, at
    /// least 3.5 RTO), which the stack takes from `tw_handoff`; none once
    /// `tcp_max_tw_buckets` are taken (TcpExtTCPTimeWaitOverflow). Then `tcp_done`.
    pub(crate) fn time_wait(&mut self, ctx: &mut Ctx, substate: TcpState, timeo: Duration) {
        if !self.time_wait_overflow(ctx) {
            let rto = self.icsk.rto * 4 - self.icsk.rto / 2;
            let timeo = match substate {
                TcpState::TimeWait => TCP_TIMEWAIT_LEN,
                _ => timeo.max(rto),
            };
            let mut tw = super::minisocks::TimeWaitSock {
                tuple: self.tuple,
                substate,
                rcv_nxt: self.rcv_seq(self.rcv_nxt),
                snd_nxt: self.snd_seq(self.snd_nxt),
                rcv_wnd: self.receive_window(),
                rcv_wscale: self.rx_opt.rcv_wscale,
                ts_recent: self.rx_opt.ts_recent,
                ts_recent_stamp: self.rx_opt.tstamp_ok.then_some(self.rx_opt.ts_recent_stamp),
                ts_offset: self.ts_offset,
                tx_delay: self.tx_delay,
                txhash: self.txhash,
                flowlabel: self.flow_label,
                tos: match self.family_v6 {
                    true => self.tclass,
                    false => self.tos,
                } | self.tos_ecn,
                last_oow_ack_time: None,
                entry: ctx.now,
                expires: ctx.now,
                runs: ctx.now,
                family_v6: self.family_v6,
                bind: self.bind,
                md5_key: self.md5_key().copied(),
            };
            tw.schedule(ctx, timeo);
            self.tw_handoff = Some(Box::new(tw));
        }
        self.update_metrics(ctx);
        self.set_closed(ctx);
    }

    /// `tcp_time_wait(sk, TCP_TIME_WAIT, 0)`.
    pub(crate) fn enter_time_wait(&mut self, ctx: &mut Ctx) {
        self.time_wait(ctx, TcpState::TimeWait, Duration::ZERO);
    }

    /// Moves to CLOSED and stops every timer (`tcp_done`).
    pub(crate) fn set_closed(&mut self, ctx: &mut Ctx) {
        self.fastopen_remove(false);
        let was = self.state;
        self.state = TcpState::Closed;
        self.icsk.pending = None;
        self.ack.timeout = None;
        self.tw_at = None;
        self.keepalive_at = None;
        if matches!(was, TcpState::Established | TcpState::CloseWait) {
            // tcp_set_state(TCP_CLOSE), whatever the path: a reset, a timeout, an
            // abort on close.
            ctx.mib.inc(Mib::TcpEstabResets);
        }
        if was != TcpState::TimeWait && was != TcpState::Closed {
            // tcp_done: sk_shutdown = SHUTDOWN_MASK; reads end at EOF once the
            // queue and any error are taken.
            self.rcv_shutdown = true;
            self.notify(ctx, EventKind::HangUp);
        }
        self.zerocopy_purge(ctx);
    }

    /// `tcp_done_with_error`, the end of `tcp_reset`, `tcp_write_err` and a hard ICMP
    /// error while connecting: `tcp_done` counts `TcpAttemptFails` for a socket still
    /// in SYN-SENT or SYN-RECV (a simultaneous open's, a Fast Open child's), then the
    /// connection fails with `err`. (`tcp_disconnect` closes without `tcp_done`.)
    pub(crate) fn done_with_error(&mut self, ctx: &mut Ctx, err: SocketError) {
        if matches!(self.state, TcpState::SynSent | TcpState::SynRecv) {
            ctx.mib.inc(Mib::TcpAttemptFails);
        }
        self.set_error(ctx, err);
    }

    /// Fails the connection with `err`: `sk_err`, `tcp_write_queue_purge`, the error
    /// report, `tcp_done`'s close without its counter (`tcp_disconnect`'s; see
    /// [`Tcb::done_with_error`]).
    pub(crate) fn set_error(&mut self, ctx: &mut Ctx, err: SocketError) {
        self.sk_err = Some(err);
        self.write_queue_purge(ctx.now);
        self.notify(ctx, EventKind::Error(err));
        self.set_closed(ctx);
    }

    /// Queues an event for the application.
    pub(crate) fn notify(&self, ctx: &mut Ctx, kind: EventKind) {
        ctx.events.push_back(crate::socket::SocketEvent {
            socket: self.handle,
            kind,
        });
    }
}

/// `tcp_model_timeout`: how long `boundary` RTOs take, doubling from `rto_base` up
/// to `rto_max` (`tcp_rto_max`) then linear.
fn model_timeout(boundary: u32, rto_base: Duration, rto_max: Duration) -> Duration {
    let ratio = (rto_max.as_millis() / rto_base.as_millis().max(1)) as u32;
    let thresh = ratio.max(1).ilog2();
    if boundary <= thresh {
        rto_base * ((2u32 << boundary) - 1)
    } else {
        rto_base * ((2u32 << thresh) - 1) + rto_max * (boundary - thresh)
    }
}

/// The RTT samples one ACK gives `tcp_ack_update_rtt`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RttSamples {
    /// From the first newly acked skb never retransmitted (`seq_rtt_us`).
    pub(crate) seq_rtt_us: Option<u32>,
    /// From the first newly SACKed skb (`sack_rtt_us`).
    pub(crate) sack_rtt_us: Option<u32>,
    /// From the last newly (S)ACKed skb (`ca_rtt_us`).
    pub(crate) ca_rtt_us: Option<u32>,
    /// The ACK acknowledged segments (`FLAG_ACKED`).
    pub(crate) acked: bool,
    /// `FLAG_ACK_MAYBE_DELAYED`.
    pub(crate) maybe_delayed: bool,
}

impl RttEstimator {
    /// `tcp_rtt_estimator` with the sample `rtt_us`, `tcp_rto_min_us` `rto_min_us`.
    pub(crate) fn sample(&mut self, rtt_us: u32, rto_min_us: u32, snd_una: u64, snd_nxt: u64) {
        let mut m = rtt_us as i64;
        let mut srtt = self.srtt8 as i64;
        if srtt != 0 {
            m -= srtt >> 3; // m is now error in rtt est
            srtt += m; // rtt = 7/8 rtt + 1/8 new
            if m < 0 {
                m = -m - (self.mdev as i64 >> 2);
                // A falling RTT moves mdev with a finer gain (Eifel-like).
                if m > 0 {
                    m >>= 3;
                }
            } else {
                m -= self.mdev as i64 >> 2;
            }
            self.mdev = (self.mdev as i64 + m).max(0) as u32; // mdev = 3/4 mdev + 1/4 new
            if self.mdev > self.mdev_max {
                self.mdev_max = self.mdev;
                if self.mdev_max > self.rttvar {
                    self.rttvar = self.mdev_max;
                }
            }
            if snd_una > self.rtt_seq {
                if self.mdev_max < self.rttvar {
                    self.rttvar -= (self.rttvar - self.mdev_max) >> 2;
                }
                self.rtt_seq = snd_nxt;
                self.mdev_max = rto_min_us;
            }
        } else {
            // No previous measure: rto = 3 * rtt, at least rtt + tcp_rto_min.
            srtt = m << 3;
            self.mdev = (m << 1) as u32;
            self.rttvar = self.mdev.max(rto_min_us);
            self.mdev_max = self.rttvar;
            self.rtt_seq = snd_nxt;
        }
        self.srtt8 = srtt.clamp(1, u32::MAX as i64) as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::consts::TCP_RTO_MAX;

    #[test]
    fn model_timeout_as_linux() {
        // tcp_retries2 = 15 from TCP_RTO_MIN: 924.6 s (Documentation/networking/ip-sysctl).
        assert_eq!(
            model_timeout(15, TCP_RTO_MIN, TCP_RTO_MAX),
            Duration::from_millis(924_600)
        );
        assert_eq!(
            model_timeout(3, TCP_RTO_MIN, TCP_RTO_MAX),
            Duration::from_millis(3000)
        );
        // tcp_syn_retries = 6 from the 1 s initial RTO: 127 s.
        assert_eq!(
            model_timeout(6, TCP_TIMEOUT_INIT, TCP_RTO_MAX),
            Duration::from_secs(127)
        );
    }

    fn tcb() -> Tcb {
        Tcb::for_test(&Config::default())
    }

    /// SOCK_DEAD is close(2)'s (`sock_orphan`), not shutdown(SHUT_RDWR)'s: a socket
    /// shut both ways keeps a live socket's FIN-WAIT-2 (no `tcp_fin_time`), its
    /// `tcp_retries2` and its zero-window RTO
    /// (tests/packetdrill/shutdown-rdwr-*.pkt, passed by Linux 6.18 too).
    #[test]
    fn shut_both_ways_is_no_orphan() {
        let cfg = Config::default();
        let mut ts = crate::tcp::TestStack::default();
        let mut ctx = ts.ctx(&cfg, Instant::ZERO, false);
        let mut t = tcb();
        (t.shut_rd, t.shut_wr) = (true, true);
        assert!(!t.sock_dead());
        t.close(&mut ctx, false);
        assert!(t.sock_dead());
    }

    /// A close with `SO_LINGER` and a time orphans the socket only when its wait
    /// ends (`__tcp_close`: `sk_stream_wait_close`, then `adjudge_to_death`);
    /// tests/packetdrill/linger-close-zero-window-not-orphan-yet.pkt.
    #[test]
    fn a_lingering_close_orphans_after_its_wait() {
        let cfg = Config::default();
        let mut ts = crate::tcp::TestStack::default();
        let mut ctx = ts.ctx(&cfg, Instant::ZERO, false);
        let mut t = tcb();
        t.state = TcpState::Established;
        assert!(t.close_lingering(&mut ctx, false, true));
        assert_eq!(t.state, TcpState::FinWait1);
        assert!(!t.sock_dead() && t.adjudge_pending);
        t.adjudge_to_death(&mut ctx);
        assert!(t.sock_dead() && !t.adjudge_pending);
        // Without a linger wait, at once.
        let mut t = tcb();
        t.state = TcpState::Established;
        assert!(!t.close_lingering(&mut ctx, false, false));
        assert!(t.sock_dead());
    }

    /// `__tcp_close`: an orphan left in FIN-WAIT-2 on its timer (`tcp_fin_time`
    /// beyond 60 s) meets `tcp_check_oom` as one still closing does: over
    /// `tcp_max_orphans` it is reset (TcpExtTCPAbortOnMemory); one whose wait fits
    /// in 60 s is a timewait socket already.
    #[test]
    fn an_orphan_waiting_in_fin_wait2_meets_tcp_check_oom() {
        let cfg = Config {
            tcp_max_orphans: 0,
            ..Config::default()
        };
        let mut ts = crate::tcp::TestStack::default();
        for (linger2, closed, aborts) in [(90, true, 1), (30, true, 0)] {
            let mut ctx = ts.ctx(&cfg, Instant::ZERO, false);
            ctx.death_row.orphans = 1;
            let mut t = tcb();
            t.state = TcpState::FinWait2;
            (t.linger2, t.icsk.rto) = (linger2, Duration::from_millis(200));
            t.adjudge_to_death(&mut ctx);
            assert_eq!(t.state == TcpState::Closed, closed, "linger2 {linger2}");
            assert_eq!(t.tw_handoff.is_some(), aborts == 0, "linger2 {linger2}");
        }
        assert_eq!(ts.mib.get(Mib::TcpExtTCPAbortOnMemory), 1);
    }

    #[test]
    fn fin_time_is_linger2_or_the_sysctl_at_least_three_and_a_half_rto() {
        let cfg = Config::default();
        let mut t = tcb();
        t.icsk.rto = Duration::from_millis(200);
        assert_eq!(
            t.fin_time(&cfg),
            Duration::from_secs(cfg.tcp_fin_timeout as u64)
        );
        t.linger2 = 5;
        assert_eq!(t.fin_time(&cfg), Duration::from_secs(5));
        t.icsk.rto = Duration::from_secs(2);
        assert_eq!(
            t.fin_time(&cfg),
            Duration::from_secs(7),
            "(rto << 2) - (rto >> 1)"
        );
        t.linger2 = -1;
        t.icsk.rto = Duration::from_millis(200);
        assert_eq!(
            t.fin_time(&cfg),
            Duration::from_secs(cfg.tcp_fin_timeout as u64)
        );
    }

    #[test]
    fn orphan_fin_wait2_waits_or_aborts() {
        let cfg = Config::default();
        let mut ts = crate::tcp::TestStack::default();
        let mut ctx = ts.ctx(&cfg, Instant::ZERO, false);
        let th = TcpRepr {
            flags: TcpFlags::ACK,
            ..Default::default()
        };
        let mut t = tcb();
        t.state = TcpState::FinWait2;
        (t.linger2, t.icsk.rto) = (3, Duration::from_millis(200));
        // tcp_fin_time within 60 s: a FIN-WAIT-2 timewait socket at once, the
        // segment consumed.
        assert!(!t.orphan_fin_wait2(&mut ctx, &th, false));
        assert_eq!(t.state, TcpState::Closed);
        let tw = t.tw_handoff.take().expect("a timewait socket");
        assert_eq!(tw.substate, TcpState::FinWait2);
        assert_eq!(tw.expires, Instant::ZERO + Duration::from_secs(3));
        assert_eq!(ctx.mib.get(Mib::TcpExtTWKilled), 1, "3 s: tw_kill");
        // Beyond 60 s, or with a FIN in the segment, the Tcb waits on its timer.
        let mut t = tcb();
        t.state = TcpState::FinWait2;
        (t.linger2, t.icsk.rto) = (90, Duration::from_millis(200));
        // The timer is sk_timer, keepalive's: an armed keepalive time goes
        // (tests/packetdrill/fin-wait2-orphan-timer-replaces-keepalive.pkt).
        t.keepalive_at = Some(Instant::ZERO + Duration::from_secs(1));
        assert!(t.orphan_fin_wait2(&mut ctx, &th, false));
        assert_eq!(t.tw_at, Some(Instant::ZERO + Duration::from_secs(30)));
        assert_eq!(t.keepalive_at, None, "inet_csk_reset_keepalive_timer");
        let fin = TcpRepr {
            flags: TcpFlags::ACK | TcpFlags::FIN,
            ..Default::default()
        };
        t.linger2 = 3;
        assert!(t.orphan_fin_wait2(&mut ctx, &fin, false));
        assert_eq!(t.tw_at, Some(Instant::ZERO + Duration::from_secs(3)));
        let mut t = tcb();
        t.state = TcpState::FinWait2;
        (t.linger2, t.icsk.rto) = (3, Duration::from_millis(200));
        // New data after close: the orphan ends, the segment draws a reset.
        assert!(!t.orphan_fin_wait2(&mut ctx, &th, true));
        assert_eq!(t.state, TcpState::Closed);
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPAbortOnData), 1);
        assert_eq!(ctx.out.len(), 1);
        // TCP_LINGER2 negative: no FIN-WAIT-2 for an orphan.
        let mut t = tcb();
        t.state = TcpState::FinWait2;
        t.linger2 = -1;
        assert!(!t.orphan_fin_wait2(&mut ctx, &th, false));
        assert_eq!(t.state, TcpState::Closed);
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPAbortOnData), 2);
    }

    /// An established connection with 1000 bytes in flight, an RTO of 300 ms from
    /// its estimator (srtt 100 ms, rttvar 200 ms), the peer's window shut.
    fn zero_window_sender(cfg: &Config, st: &mut crate::tcp::TestStack) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = TcpState::Established;
        t.mss_cache = 1000;
        (t.snd_una, t.snd_nxt, t.write_seq) = (1, 1, 1);
        (t.max_window, t.snd_wnd, t.sndbuf) = (1 << 20, 1 << 20, 1 << 20);
        t.cw.snd_cwnd = 10;
        let data = [7u8; 1000];
        let flags = crate::socket::SendFlags::default();
        let sent = t.sendmsg(&mut st.ctx(cfg, Instant::ZERO, false), &data, &[], flags);
        assert_eq!(sent, Ok(1000));
        (t.rtt.est.srtt8, t.rtt.est.rttvar) = (100_000 << 3, 200_000);
        (t.icsk.rto, t.snd_wnd) = (t.rto_from_estimator(), 0);
        assert_eq!(t.icsk.rto, Duration::from_millis(300));
        t
    }

    /// `tcp_retransmit_timer`'s zero-window branch goes to `out_reset_timer`: with
    /// `tcp_thin_linear_timeouts` a thin stream (its ssthresh set by the first
    /// timeout's `tcp_enter_loss`) keeps the estimator's RTO every time, as this
    /// branch never counts `icsk_retransmits`; without, the RTO doubles
    /// (tests/packetdrill/zero-window-rto-thin-linear-timeouts.pkt, passed by Linux
    /// 6.18 too).
    #[test]
    fn a_zero_window_rto_stays_linear_for_a_thin_stream() {
        for (thin, rtos) in [(true, [300, 300, 300]), (false, [600, 1200, 2400])] {
            let cfg = Config {
                tcp_thin_linear_timeouts: thin,
                ..Config::default()
            };
            let mut st = crate::tcp::TestStack::default();
            let mut t = zero_window_sender(&cfg, &mut st);
            let mut now = Instant::ZERO + Duration::from_millis(300);
            for rto in rtos {
                t.retransmit_timer(&mut st.ctx(&cfg, now, false), now);
                let rto = Duration::from_millis(rto);
                assert_eq!(t.icsk.rto, rto, "thin {thin}");
                assert_eq!(t.icsk.pending, Some((Pending::Retrans, now + rto)));
                assert_eq!(t.icsk.retransmits, 0);
                assert_eq!(t.icsk.backoff == 0, thin);
                now += rto;
            }
            assert_eq!(st.mib.get(Mib::TcpExtTCPTimeouts), 0);
        }
    }

    /// `tcp_rtx_probe0_timed_out` measures the peer's silence to the timer's expiry
    /// (`tcp_timeout_expires`), not to the wheel's later run of it: a timer due
    /// just at twice `tcp_rto_max` of silence keeps probing, one due after gives up.
    #[test]
    fn zero_window_silence_is_measured_to_the_timers_expiry() {
        let cfg = Config::default();
        let mut st = crate::tcp::TestStack::default();
        let mut t = zero_window_sender(&cfg, &mut st);
        t.rcv_tstamp = Instant::ZERO;
        let limit = Instant::ZERO + 2 * t.icsk.rto_max;
        let late = limit + Duration::from_millis(64);
        assert!(!t.rtx_probe0_timed_out(limit, late.saturating_since(Instant::ZERO)));
        assert!(t.rtx_probe0_timed_out(
            limit + Duration::from_millis(1),
            late.saturating_since(Instant::ZERO)
        ));
        // Run late by the wheel, the timer due at the limit still probes.
        t.retransmit_timer(&mut st.ctx(&cfg, late, false), limit);
        assert_eq!(t.state, TcpState::Established);
        assert_eq!(st.mib.get(Mib::TcpExtTCPAbortOnTimeout), 0);
        let at = limit + Duration::from_millis(1);
        t.retransmit_timer(&mut st.ctx(&cfg, late, false), at);
        assert_eq!(t.state, TcpState::Closed);
        assert_eq!(st.mib.get(Mib::TcpExtTCPAbortOnTimeout), 1);
    }

    /// tcp_clamp_rto_to_user_timeout: the RTO up to what is left of the user
    /// timeout since the first retransmission, one jiffy once it is past;
    /// tcp_clamp_probe0_to_user_timeout: the probe timer likewise from the first
    /// probe, but never under TCP_TIMEOUT_MIN.
    #[test]
    fn user_timeout_clamps_the_rto_and_the_probe_timer() {
        let cfg = Config::default();
        let mut ts = crate::tcp::TestStack::default();
        let now = Instant::ZERO + Duration::from_secs(10);
        let ago = |d: Duration| Instant::ZERO + (Duration::from_secs(10) - d);
        let ctx = ts.ctx(&cfg, now, false);
        let mut t = tcb();
        let rto = Duration::from_millis(800);
        assert_eq!(
            t.clamp_rto_to_user_timeout(&ctx, rto),
            rto,
            "no user timeout"
        );
        t.icsk.user_timeout = Duration::from_millis(1500);
        assert_eq!(
            t.clamp_rto_to_user_timeout(&ctx, rto),
            rto,
            "no retransmission"
        );
        t.undo.retrans_stamp = Some(ago(Duration::from_millis(1000)));
        assert_eq!(
            t.clamp_rto_to_user_timeout(&ctx, rto),
            Duration::from_millis(500)
        );
        t.undo.retrans_stamp = Some(ago(Duration::from_micros(1_499_500)));
        assert_eq!(
            t.clamp_rto_to_user_timeout(&ctx, rto),
            Duration::from_micros(500),
            "no TCP_TIMEOUT_MIN floor for the RTO"
        );
        t.undo.retrans_stamp = Some(ago(Duration::from_secs(2)));
        assert_eq!(
            t.clamp_rto_to_user_timeout(&ctx, rto),
            Duration::from_millis(1),
            "past: fire ASAP"
        );
        t.icsk.probes_tstamp = Some(ago(Duration::from_micros(1_499_500)));
        assert_eq!(t.clamp_probe0_to_user_timeout(&ctx, rto), TCP_TIMEOUT_MIN);
        t.icsk.probes_tstamp = Some(ago(Duration::from_millis(1000)));
        assert_eq!(
            t.clamp_probe0_to_user_timeout(&ctx, rto),
            Duration::from_millis(500)
        );
    }

    /// tcp_orphan_retries: the sysctl, 8 for 0 while alive, none for an orphan no
    /// longer alive once an ICMP left a soft error.
    #[test]
    fn orphan_retries_follow_the_sysctl_liveness_and_soft_errors() {
        let mut cfg = Config::default();
        let mut ts = crate::tcp::TestStack::default();
        let mut t = tcb();
        {
            let ctx = ts.ctx(&cfg, Instant::ZERO, false);
            assert_eq!(t.orphan_retries(&ctx, true), 8);
            assert_eq!(t.orphan_retries(&ctx, false), 0);
        }
        cfg.tcp_orphan_retries = 3;
        let ctx = ts.ctx(&cfg, Instant::ZERO, false);
        assert_eq!(t.orphan_retries(&ctx, false), 3);
        t.sk_err_soft = Some(SocketError::HostUnreachable);
        assert_eq!(t.orphan_retries(&ctx, true), 3);
        assert_eq!(t.orphan_retries(&ctx, false), 0);
    }

    #[test]
    fn a_timeout_reports_the_soft_error_if_any() {
        // tcp_write_err: sk_err = sk_err_soft ?: ETIMEDOUT.
        let cfg = Config::default();
        let mut ts = crate::tcp::TestStack::default();
        for (soft, want) in [
            (
                Some(SocketError::HostUnreachable),
                SocketError::HostUnreachable,
            ),
            (None, SocketError::TimedOut),
        ] {
            let mut t = tcb();
            t.sk_err_soft = soft;
            t.write_err(&mut ts.ctx(&cfg, Instant::ZERO, false));
            assert_eq!((t.sk_err, t.state), (Some(want), TcpState::Closed));
        }
    }

    #[test]
    fn tcp_done_counts_attempt_fails_in_the_syn_states_only() {
        // tcp_done: TcpAttemptFails for SYN-SENT and SYN-RECV, on every path that
        // ends there (tcp_reset, tcp_write_err, an ICMP error); tcp_disconnect's
        // close (set_error alone) counts nothing.
        let cfg = Config::default();
        for (state, want) in [
            (TcpState::SynSent, 1),
            (TcpState::SynRecv, 1),
            (TcpState::Established, 0),
            (TcpState::CloseWait, 0),
        ] {
            let mut ts = crate::tcp::TestStack::default();
            let mut t = tcb();
            t.state = state;
            t.done_with_error(
                &mut ts.ctx(&cfg, Instant::ZERO, false),
                SocketError::ConnectionReset,
            );
            assert_eq!(ts.mib.get(Mib::TcpAttemptFails), want, "{state:?}");
            assert_eq!(t.state, TcpState::Closed);
            let mut ts = crate::tcp::TestStack::default();
            let mut t = tcb();
            t.state = state;
            t.set_error(
                &mut ts.ctx(&cfg, Instant::ZERO, false),
                SocketError::ConnectionReset,
            );
            assert_eq!(ts.mib.get(Mib::TcpAttemptFails), 0, "{state:?}");
        }
    }

    #[test]
    fn a_reset_in_syn_recv_of_a_simultaneous_open_counts_attempt_fails() {
        // tcp_reset -> tcp_done_with_error -> tcp_done, in SYN-RECV without a
        // listener (a simultaneous open).
        let cfg = Config::default();
        let mut ts = crate::tcp::TestStack::default();
        let mut t = tcb();
        t.state = TcpState::SynRecv;
        assert!(t.parent.is_none());
        t.tcp_reset(&mut ts.ctx(&cfg, Instant::ZERO, false));
        assert_eq!(t.sk_err, Some(SocketError::ConnectionReset));
        assert_eq!(ts.mib.get(Mib::TcpAttemptFails), 1);
    }

    #[test]
    fn syn_states_give_up_after_syncnt_else_tcp_syn_retries() {
        // tcp_write_timeout: retry_until = icsk_syn_retries ?: tcp_syn_retries in
        // SYN-SENT and SYN-RECV alike (tcp_synack_retries is a request's), plus
        // tcp_syn_linear_timeouts (4) in SYN-SENT only; tcp_done counts
        // TcpAttemptFails in both states.
        let cfg = Config {
            tcp_syn_retries: 2,
            tcp_synack_retries: 5,
            ..Config::default()
        };
        let (recv, sent) = (TcpState::SynRecv, TcpState::SynSent);
        for (state, syncnt, retransmits, want) in [
            (recv, 0, 1, false),
            (recv, 0, 2, true),
            (recv, 3, 2, false),
            (recv, 3, 3, true),
            (sent, 0, 5, false),
            (sent, 0, 6, true),
            (sent, 1, 5, true),
        ] {
            let mut ts = crate::tcp::TestStack::default();
            let mut t = tcb();
            (t.state, t.icsk.syn_retries, t.icsk.retransmits) = (state, syncnt, retransmits);
            t.undo.retrans_stamp = Some(Instant::ZERO);
            // One second in: long before any tcp_model_timeout.
            let now = Instant::ZERO + Duration::from_secs(1);
            let case = (state, syncnt, retransmits);
            assert_eq!(
                t.write_timeout(&mut ts.ctx(&cfg, now, false)),
                want,
                "{case:?}"
            );
            assert_eq!(t.state == TcpState::Closed, want, "{case:?}");
            assert_eq!(ts.mib.get(Mib::TcpAttemptFails), want as u64, "{case:?}");
        }
        // retransmits_timed_out(retry_until) from TCP_TIMEOUT_INIT: for 2, 7 s since
        // the first retransmission (not tcp_synack_retries' 63 s), in SYN-RECV too.
        for (secs, want) in [(6, false), (7, true)] {
            let mut ts = crate::tcp::TestStack::default();
            let mut t = tcb();
            (t.state, t.icsk.retransmits) = (TcpState::SynRecv, 1);
            t.undo.retrans_stamp = Some(Instant::ZERO);
            let now = Instant::ZERO + Duration::from_secs(secs);
            assert_eq!(t.write_timeout(&mut ts.ctx(&cfg, now, false)), want);
        }
    }

    #[test]
    fn initial_rto_is_one_second() {
        assert_eq!(tcb().icsk.rto, Duration::from_secs(1));
    }

    #[test]
    fn rto_has_linux_floor() {
        let mut t = tcb();
        for i in 0..50 {
            t.snd_nxt = i + 1; // one sample per RTT: rttvar decays each time
            t.snd_una = i + 1;
            t.rtt_sample(10_000);
        }
        // srtt 10 ms, rttvar decays toward mdev_max = tcp_rto_min: 10 ms + 200 ms.
        assert_eq!(t.rtt.srtt_us, 10_000);
        assert_eq!(t.icsk.rto, Duration::from_millis(210));
    }

    /// tcp_rtt_estimator's first sample: mdev = 2 x rtt (tcpi_rttvar = rtt / 2),
    /// rttvar = max(mdev, tcp_rto_min): RTO = 100 ms + 200 ms.
    #[test]
    fn first_sample_sets_rttvar_half() {
        let mut t = tcb();
        t.rtt_sample(100_000);
        assert_eq!(t.rtt.rttvar_us, 50_000);
        assert_eq!(t.icsk.rto, Duration::from_millis(300));
    }

    /// tcp_rtt_estimator: a falling RTT moves mdev by an eighth of the usual gain,
    /// a rising one by the full quarter; within one RTT (snd_una not past rtt_seq)
    /// rttvar only grows; the RTO rounds up to a jiffy (usecs_to_jiffies).
    #[test]
    fn rtt_estimator_follows_linux() {
        let mut t = tcb();
        t.snd_nxt = 10;
        t.rtt_sample(100_000); // srtt8 800000, mdev 200000, rttvar 200000
        t.rtt_sample(20_000); // m = -80000 -> 80000 - 50000 = 30000 >> 3 = 3750
        assert_eq!(t.rtt.est.srtt8, 720_000);
        assert_eq!(t.rtt.est.mdev, 203_750);
        assert_eq!((t.rtt.srtt_us, t.rtt.rttvar_us), (90_000, 50_937));
        // mdev_max 203750 > rttvar 200000: the RTO grows, 90 ms + 203.75 ms, rounded up.
        assert_eq!(t.icsk.rto, Duration::from_millis(294));
        let mut u = tcb();
        u.snd_nxt = 10;
        u.rtt_sample(100_000);
        u.rtt_sample(180_000); // m = 80000 - 50000: mdev + 30000
        assert_eq!(u.rtt.est.mdev, 230_000);
        // snd_una past rtt_seq: the next sample ends the RTT and rttvar decays
        // toward mdev_max, which restarts at tcp_rto_min.
        u.snd_una = 11;
        u.snd_nxt = 20;
        u.rtt_sample(110_000);
        assert_eq!(u.rtt.est.rtt_seq, 20);
        assert_eq!(u.rtt.est.mdev_max, 200_000);
    }

    /// tcp_update_rtt_min: a windowed minimum over tcp_min_rtt_wlen seconds; an
    /// ACK that may have been delayed does not raise it; 0 us counts as a jiffy.
    #[test]
    fn min_rtt_is_windowed_and_skips_delayed_acks() {
        let mut t = tcb();
        let cfg = Config {
            tcp_min_rtt_wlen: 10,
            ..Config::default()
        };
        let mut st = super::super::TestStack::default();
        let at = |ms: u64| Instant::from_nanos(ms * 1_000_000);
        t.update_rtt_min(&st.ctx(&cfg, at(0), false), 0, false);
        assert_eq!(t.rtt.min_rtt_us, 1000, "a jiffy");
        t.update_rtt_min(&st.ctx(&cfg, at(1), false), 5_000, false);
        assert_eq!(t.rtt.min_rtt_us, 1000);
        // A delayed ACK's larger sample is skipped, even after the window.
        t.update_rtt_min(&st.ctx(&cfg, at(20_000), true), 9_000, true);
        assert_eq!(t.rtt.min_rtt_us, 1000);
        // Any other sample after the window replaces the old minimum.
        t.update_rtt_min(&st.ctx(&cfg, at(20_000), false), 9_000, false);
        assert_eq!(t.rtt.min_rtt_us, 9_000);
        // A delayed ACK's smaller sample counts.
        t.update_rtt_min(&st.ctx(&cfg, at(20_001), false), 7_000, true);
        assert_eq!(t.rtt.min_rtt_us, 7_000);
    }

    /// tcp_ack_update_rtt: the sequence sample, else the SACK one, else (with
    /// FLAG_ACKED only) the timestamp echo, which also stands for ca_rtt_us.
    #[test]
    fn ack_update_rtt_takes_samples_in_linux_order() {
        let cfg = Config::default();
        let mut st = super::super::TestStack::default();
        let ctx = st.ctx(&cfg, Instant::from_nanos(1), false);
        let mut t = tcb();
        let s = RttSamples {
            sack_rtt_us: Some(30_000),
            ca_rtt_us: Some(20_000),
            ..RttSamples::default()
        };
        assert_eq!(
            t.ack_update_rtt(&ctx, &s, Some(50_000)),
            (true, Some(20_000))
        );
        assert_eq!((t.rtt.srtt_us, t.rtt.min_rtt_us), (30_000, 20_000));
        let mut t = tcb();
        let none = RttSamples::default();
        assert_eq!(t.ack_update_rtt(&ctx, &none, Some(50_000)), (false, None));
        assert_eq!(t.rtt.srtt_us, 0, "no FLAG_ACKED: no timestamp sample");
        let acked = RttSamples {
            acked: true,
            ..RttSamples::default()
        };
        assert_eq!(
            t.ack_update_rtt(&ctx, &acked, Some(50_000)),
            (true, Some(50_000))
        );
        assert_eq!((t.rtt.srtt_us, t.rtt.min_rtt_us), (50_000, 50_000));
    }

    /// tcp_init_metrics: no RTT sample from the handshake, the RTO starts at 3 s
    /// (RFC 6298 section 5.7); the first sample then sets the estimator afresh.
    #[test]
    fn handshake_without_sample_falls_back_to_three_seconds() {
        let mut t = tcb();
        t.rto_fallback();
        assert_eq!(
            (t.icsk.rto, t.rtt.rttvar_us),
            (TCP_TIMEOUT_FALLBACK, 750_000)
        );
        t.rtt_sample(100_000);
        assert_eq!(
            (t.rtt.rttvar_us, t.icsk.rto),
            (50_000, Duration::from_millis(300))
        );
    }

    /// tcp_ack_update_rtt: only a valid RTT sample resets the backoff.
    #[test]
    fn rtt_sample_resets_backoff() {
        let mut t = tcb();
        t.icsk.backoff = 3;
        t.rtt_sample(10_000);
        assert_eq!(t.icsk.backoff, 0);
    }

    /// out_reset_timer: each timeout doubles icsk_rto in place, up to 120 s.
    #[test]
    fn backoff_caps_at_120s() {
        let mut t = tcb();
        for _ in 0..2 {
            t.backoff_rto();
        }
        assert_eq!(
            (t.icsk.backoff, t.rto_backed_off()),
            (2, Duration::from_secs(4))
        );
        for _ in 0..8 {
            t.backoff_rto();
        }
        assert_eq!((t.icsk.backoff, t.rto_backed_off()), (10, TCP_RTO_MAX));
        assert_eq!(t.rto_backoff(TCP_RTO_MAX), TCP_RTO_MAX);
    }

    /// inet_csk_rto_backoff shifts icsk_rto by icsk_backoff (the orphan probe
    /// timer's `alive`), bounded by its argument, without changing either.
    #[test]
    fn rto_backoff_shifts_without_changing_icsk_rto() {
        let mut t = tcb();
        t.icsk.backoff = 2;
        assert_eq!(t.rto_backoff(TCP_RTO_MAX), Duration::from_secs(4));
        assert_eq!(
            t.rto_backoff(Duration::from_secs(3)),
            Duration::from_secs(3)
        );
        assert_eq!(t.icsk.rto, Duration::from_secs(1));
    }

    /// tcp_probe0_when: the base (icsk_rto, at least TCP_RTO_MIN) shifted by at most
    /// ilog2(TCP_RTO_MAX / TCP_RTO_MIN) + 1 = 10, bounded by tcp_rto_max.
    #[test]
    fn probe0_when_shifts_the_base_by_the_backoff() {
        let mut t = tcb();
        t.icsk.rto = Duration::from_millis(150);
        assert_eq!(t.probe0_base(), TCP_RTO_MIN, "at least TCP_RTO_MIN");
        t.icsk.rto = Duration::from_millis(300);
        t.icsk.backoff = 3;
        assert_eq!(t.probe0_when(), Duration::from_millis(2_400));
        t.icsk.rto_max = Duration::from_secs(120);
        t.icsk.backoff = 15;
        assert_eq!(t.probe0_when(), TCP_RTO_MAX);
    }

    /// Linux 6.15's tcp_rto_max: the backoff, a new sample's RTO and
    /// tcp_model_timeout's doubling all stop at the socket's icsk_rto_max.
    #[test]
    fn rto_max_bounds_backoff_samples_and_model_timeout() {
        let mut t = tcb();
        t.icsk.rto_max = Duration::from_secs(1);
        t.backoff_rto();
        assert_eq!(t.rto_backed_off(), Duration::from_secs(1));
        t.rtt_sample(900_000);
        assert_eq!(t.icsk.rto, Duration::from_secs(1), "tcp_bound_rto");
        // ilog2(1000 / 200) = 2: 200 ms x 7, then 1 s for each of the other 13.
        let m = model_timeout(15, TCP_RTO_MIN, Duration::from_secs(1));
        assert_eq!(m, Duration::from_millis(1_400 + 13_000));
    }
}
