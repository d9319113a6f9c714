//! The ACK path of tcp_input.c: `tcp_ack` (with its `no_queue:` and `old_ack:`
//! exits), `tcp_ack_update_window`, `tcp_clean_rtx_queue`'s RTT samples,
//! `tcp_ack_update_rtt`'s timestamp echo, `tcp_newly_delivered`, `tcp_cong_control`.

use super::accecn::AccEcnAck;
use super::cong::{AckSample, CaState, CcContext, CongestionOps, CA_ACK_ECE, CA_ACK_SLOWPATH};
use super::rate::{AckRate, RateSample};
use super::sock::Tcb;
use super::timer::RttSamples;
use super::Ctx;
use crate::mib::Mib;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};
use tracing::trace;

/// What `tcp_ack` made of a segment's ACK field.
pub(super) enum AckOutcome {
    /// Unacceptable: the segment is dropped (`SKB_DROP_REASON_TCP_ACK_UNSENT_DATA`,
    /// too old).
    Discard,
    /// Below `snd_una` (`old_ack:`): its SACK blocks were used, its data is kept.
    Old,
    /// At or above `snd_una`: processed.
    New,
}

impl Tcb {
    /// `tcp_ack`: window update, SACK, cumulative ACK, RTT, congestion control.
    /// Returns what it made of the ACK field.
    pub(super) fn ack(
        &mut self,
        ctx: &mut Ctx,
        th: &TcpRepr,
        payload_len: usize,
        hp: bool,
        syn_acked: bool,
    ) -> AckOutcome {
        // tcp_ack: int rexmit = REXMIT_NONE, for this ACK alone.
        self.rexmit_lost = false;
        let delta = super::seq::Seq(th.ack).diff(self.snd_seq(self.snd_una)) as i64;
        let ack = self.snd_una as i64 + delta;
        if ack > self.snd_nxt as i64 {
            // tcp_ack: SKB_DROP_REASON_TCP_ACK_UNSENT_DATA with a (rate-limited)
            // challenge ACK, in ESTABLISHED too since Linux 6.x (tcp_rcv_state_process
            // sends the same one in the other states).
            trace!(ack, snd_nxt = self.snd_nxt, "drop: ACK of unsent data");
            self.challenge_ack(ctx);
            return AckOutcome::Discard;
        }
        // tcp_ack: do not accept an ACK for bytes we never sent (Linux 6.x:
        // max_window = min(max_window, bytes_acked)).
        let max_window = (self.max_window as u64).min(self.bytes_acked) as i64;
        if ack < self.snd_una as i64 - max_window {
            // RFC 5961 section 5.2: too old to be acceptable.
            self.challenge_ack(ctx);
            return AckOutcome::Discard;
        }
        if ack < self.snd_una as i64 {
            // tcp_ack `old_ack:` (a reordered ACK); the segment's data is kept.
            if th.options.sack_len > 0 {
                self.old_ack(ctx, th, ack.max(0) as u64);
            }
            return AckOutcome::Old;
        }
        let ack = ack as u64;
        let is_sack_reneg = self.is_sack_reneg; // tcp_ack: as before this ACK
                                                // tcp_ack: the peer is alive; window probes count again from zero.
        self.icsk.probes_out = 0;
        self.sk_err_soft = None; // "something worked"
        self.rcv_tstamp = ctx.now;
        let prior_in_flight = self.packets_in_flight();
        let prior_packets = self.rtx.packets_out;
        let prior_una = self.snd_una;
        let prior_sacked = self.rtx.sacked_out;
        let prior_lost = self.rtx.lost;
        let prior_delivered = self.delivered;
        // tcp_rcv_state_process: the ACK that ends SYN-RECV goes through tcp_ack
        // before tcp_init_wl, with snd_wl1 still the peer's ISN (tcp_create_openreq_child,
        // tcp_rcv_synsent_state_process), so tcp_may_update_window takes it:
        // FLAG_WIN_UPDATE, never a duplicate ACK. (synrecv_acked set the window first.)
        let win_update = self.ack_update_window(ctx, th, ack) || syn_acked;
        let prior_fack = self.rack_ack_begin(ctx, th);
        let sack = self.sacktag(ctx, th, ack, ack);
        // FLAG_ECE of classic ECN, before the queue is cleaned; AccECN's comes after.
        let ece3168 = self.ecn_rcv_ecn_echo(th);
        // Linux 5.10+ accepts CWR on pure ACKs too (robustness against peers that
        // send it so), before cleaning the queue.
        self.ecn_accept_cwr(th, payload_len);
        let fast = hp && ack > prior_una;
        let ca_flags = self.ack_event_flags(ctx, th, payload_len, fast, win_update, ece3168);
        let acc = AccEcnAck {
            slowpath: !hp,
            syn_acked,
            ..AccEcnAck::default()
        };
        if prior_packets == 0 {
            let q = (prior_una, &sack, ece3168, ca_flags);
            return self.ack_no_queue(ctx, th, ack, q, acc, prior_delivered);
        }
        let cleaned = self.clean_rtx_queue(ctx, ack);
        // tcp_clean_rtx_queue: "Non-retransmitted hole got filled? That's reordering".
        if let Some(low) = cleaned
            .reord
            .filter(|&r| self.rx_opt.sack_ok && r < prior_fack)
        {
            self.check_sack_reordering(ctx, low, false);
        }
        let mut fl = self.rack_ack_delivered(ctx, ack > prior_una, &sack);
        // tcp_count_delivered(sack_delivered): newly SACKed segments and D-SACKed
        // duplicates, then what the cumulative ACK covers (tcp_clean_rtx_queue);
        // without SACK, tcp_remove_reno_sacks: the hole it filled and what exceeds
        // the duplicate ACKs counted.
        let acked_delivered = if self.rx_opt.sack_ok {
            cleaned.acked_segs.saturating_sub(cleaned.acked_sacked_segs)
        } else if cleaned.acked_segs > 0 {
            // "If any of the cumulatively ACKed segments was retransmitted, non-SACK
            // case cannot confirm that progress was due to original transmission".
            if cleaned.acked_retrans {
                fl.orig_sack_acked = false;
            }
            self.remove_reno_sacks(ctx, cleaned.acked_segs)
        } else {
            0
        };
        self.count_delivered(
            acked_delivered
                + sack.newly_sacked
                + sack.dsack_segs
                + prior_sacked
                    .saturating_sub(self.rtx.sacked_out)
                    .saturating_sub(cleaned.acked_sacked_segs),
            ece3168,
        );
        let skb = super::rtx::skb::DeliveredSkb::later(sack.rate, cleaned.rate);
        // tcp_clean_rtx_queue: "Conservatively mark a delayed ACK. It's typically
        // from a lone runt packet over the round trip to a receiver w/o
        // out-of-order or CE events" (FLAG_ACK_MAYBE_DELAYED). Its FLAG_CA_ALERT
        // test reads the function's own flags, which never hold FLAG_DATA_SACKED,
        // FLAG_ECE or FLAG_DSACKING_ACK (tcp_ack ORs them in): an ECE ACK counts.
        // Its tp->delivered has the skbs the walk counted (SACK), not yet what
        // tcp_remove_reno_sacks counts after it (no SACK).
        let reno_delivered = (!self.rx_opt.sack_ok) as u64 * acked_delivered as u64;
        let maybe_delayed = cleaned.first_tx.is_some()
            && !cleaned.acked_retrans
            && cleaned.acked_segs == 1
            && !cleaned.partial
            && prior_sacked == 0
            && ack - prior_una < self.mss_cache as u64
            && skb.is_some_and(|d| d.tx.delivered + 1 + reno_delivered == self.delivered);
        let (rtt_update, ca_rtt_us) = self.ack_rtt(ctx, th, &cleaned, &sack, maybe_delayed);
        // tcp_clean_rtx_queue: FLAG_SET_XMIT_TIMER when the ACK acknowledged
        // segments (FLAG_ACKED: not a partial ACK of a one-segment skb), or when its
        // SACK RTT sample comes from data sent before the head was last (re)sent.
        fl.set_xmit_timer = cleaned.acked_segs > 0
            || (rtt_update
                && sack
                    .first_tx
                    .zip(self.rtx.first())
                    .is_some_and(|(t, h)| t < h.tx_time));
        // rs->prior_delivered: tp->delivered when the most recently sent skb this
        // ACK delivered was sent (0: none).
        let rs_prior_delivered = skb.map_or(0, |d| d.tx.delivered);
        self.ca_pkts_acked(ctx, cleaned.acked_segs, ca_rtt_us, rs_prior_delivered);
        self.rack_update_reo_wnd(ctx, rs_prior_delivered);
        // tcp_accecn_process: ACE's CE count, read once the queue is cleaned.
        // tcp_clean_rtx_queue's sack->delivered_bytes: what snd_una advanced up to
        // the first skb left, if anything was ACKed; else what SACK newly covered.
        // (Only AccECN reads it: the queue walk is charged by the CPU model.)
        let delivered_bytes = match cleaned.acked_segs {
            _ if !self.ecn_mode_accecn() => 0,
            0 => sack.newly_sacked_bytes,
            _ => {
                let left = self.rtx.first().map_or(ack, |h| h.seq.min(ack));
                (left - prior_una) as u32
            }
        };
        let acc = AccEcnAck {
            delivered_pkts: (self.delivered - prior_delivered) as u32,
            delivered_bytes,
            progress: cleaned.acked_segs > 0 || sack.newly_sacked > 0,
            ..acc
        };
        let (ecn_count, ca_flags) = self.ack_accecn(th, acc, ca_flags);
        let ece = ece3168 || ecn_count > 0;
        fl.ece = ece;
        // tcp_in_ack_event (Linux 6.14+: after the queue is cleaned and the
        // deliveries counted, before the TLP check).
        let ca_ctx = self.ca_ctx(ctx.now);
        self.cc.in_ack_event(ca_flags, &ca_ctx);
        let mut rate = AckRate {
            skb,
            delivered: 0,
            rtt_us: ca_rtt_us,
            prior_in_flight,
            lost: 0,
            is_sack_reneg,
            is_ack_delayed: maybe_delayed,
        };
        // FLAG_NOT_DUP: the segment carries data (FLAG_DATA: seq != end_seq, a FIN
        // too), updates the window (FLAG_WIN_UPDATE: tcp_may_update_window) or
        // acknowledges data (FLAG_ACKED).
        let data = payload_len > 0 || th.flags.contains(TcpFlags::FIN);
        fl.not_dup = data || win_update || cleaned.acked_segs > 0;
        // tcp_ack: a duplicate ACK (RFC 5681 section 2) neither advances snd_una nor
        // is FLAG_NOT_DUP nor D-SACKs (FLAG_DSACKING_ACK).
        let is_dupack = ack == prior_una && !fl.not_dup && !sack.dsack;
        if self.tlp_high_seq.is_some() {
            self.process_tlp_ack(ctx, ack, &fl);
        }
        // tcp_ack_is_dubious: FLAG_CA_ALERT includes FLAG_ECE.
        let dubious = self.ca_state != CaState::Open
            || ece
            || sack.newly_sacked > 0
            || sack.dsack
            || self.rtx.sacked_out > 0
            || (!fl.not_dup && !self.rtx.is_empty());
        if dubious {
            let num_dupack = (is_dupack && self.rtx.packets_out > 0) as u32;
            let d = self.fastretrans_alert(ctx, prior_una, num_dupack, &mut fl);
            self.count_delivered(d, ece);
        }
        // Everything this ACK delivered, duplicate ACKs counted as SACKs included,
        // for PRR, the rate sample and the counters.
        let newly_acked_sacked = self.newly_delivered(ctx, prior_delivered, ece, ecn_count);
        rate.delivered = newly_acked_sacked;
        rate.lost = (self.rtx.lost - prior_lost) as u32;
        let rs = self.rate_gen(ctx.now, &rate);
        // tcp_cong_control: the congestion control's own cong_control, else PRR in
        // Recovery, or cwnd growth; then the default pacing rate.
        if !self.cong_control(ctx.now, &rs) {
            let ca_ctx = self.ca_ctx(ctx.now);
            // tcp_in_cwnd_reduction: PRR in CWR as in Recovery.
            if matches!(self.ca_state, CaState::Recovery | CaState::Cwr) {
                self.cwnd_reduction(newly_acked_sacked, rate.lost, fl.snd_una_advanced);
            } else if self.may_raise_cwnd(ctx.cfg, cleaned.acked_segs > 0, fl.data_sacked) {
                // acked_sacked: segments newly delivered by this ACK; those SACKed
                // earlier and now cumulatively ACKed grew nothing then and do not now.
                self.cc
                    .cong_avoid(&mut self.cw, newly_acked_sacked, &ca_ctx);
                self.snd_cwnd_stamp = ctx.now; // tcp_cong_avoid
            }
            self.update_pacing_rate(ctx.cfg);
        }
        if fl.set_xmit_timer {
            self.set_xmit_timer(ctx);
        }
        if ack > prior_una {
            self.on_snd_una_advanced(ctx, &cleaned);
        }
        AckOutcome::New
    }

    /// `tcp_ack`'s `no_queue:` path: nothing was in flight, so nothing is cleaned,
    /// and neither the recovery state machine nor congestion control sees the ACK (no
    /// cwnd growth, rate sample or pacing update: a receiver's every data segment
    /// comes this way). Only a D-SACK may still undo a reduction
    /// (`FLAG_DSACKING_ACK`), `tcp_ack_probe` looks at the window for the send
    /// head, and a TLP episode may end. The window update ran in `ack_update_window`.
    fn ack_no_queue(
        &mut self,
        ctx: &mut Ctx,
        th: &TcpRepr,
        ack: u64,
        (prior_una, sack, ece, ca_flags): (u64, &super::rtx::sacktag::SackResult, bool, u32),
        acc: AccEcnAck,
        prior_delivered: u64,
    ) -> AckOutcome {
        // tcp_ack counts sack_state.sack_delivered before it branches.
        self.count_delivered(sack.newly_sacked + sack.dsack_segs, ece);
        // no_queue: tcp_accecn_process, then tcp_in_ack_event.
        let acc = AccEcnAck {
            delivered_pkts: (self.delivered - prior_delivered) as u32,
            delivered_bytes: sack.newly_sacked_bytes,
            progress: sack.newly_sacked > 0,
            ..acc
        };
        let (ecn_count, ca_flags) = self.ack_accecn(th, acc, ca_flags);
        let ece = ece || ecn_count > 0;
        let ca_ctx = self.ca_ctx(ctx.now);
        self.cc.in_ack_event(ca_flags, &ca_ctx);
        let mut fl = self.rack_ack_delivered(ctx, false, sack);
        fl.ece = ece;
        if sack.dsack {
            let d = self.fastretrans_alert(ctx, prior_una, 0, &mut fl);
            self.count_delivered(d, ece);
            self.newly_delivered(ctx, prior_delivered, ece, ecn_count);
            // no_queue: no tcp_xmit_recovery, whatever rexmit says.
            self.rexmit_lost = false;
        }
        self.ack_probe(ctx);
        if self.tlp_high_seq.is_some() {
            self.process_tlp_ack(ctx, ack, &fl);
        }
        AckOutcome::New
    }

    /// `tcp_ack_probe`, for an ACK with nothing in flight: "if this ack opens up a
    /// zero window, clear backoff. It was being used to time the probes". When the
    /// send head fits in the window, the probes end (`icsk_backoff` and the probe
    /// clock cleared, the probe timer stopped; `tcp_data_snd_check` sends it);
    /// otherwise the next probe is `tcp_probe0_when` from this ACK. `icsk_rto`
    /// is left as it is either way.
    fn ack_probe(&mut self, ctx: &Ctx) {
        let Some(head_end) = self.write_queue.front().map(|h| h.end_seq()) else {
            return;
        };
        if head_end <= self.snd_una + self.snd_wnd as u64 {
            self.icsk.backoff = 0;
            self.icsk.probes_tstamp = None;
            if matches!(self.icsk.pending, Some((super::sock::Pending::Probe0, _))) {
                self.icsk.pending = None;
            }
        } else {
            let when = self.clamp_probe0_to_user_timeout(ctx, self.probe0_when());
            self.reset_xmit_timer_paced(ctx.now, super::sock::Pending::Probe0, when);
        }
    }

    /// `tcp_ack`'s `old_ack:` path, for an ACK below `snd_una` with SACK blocks: they
    /// still tag the queue (`tcp_sacktag_write_queue`, blocks validated against
    /// today's `snd_una`, a D-SACK detected against this ACK's own `ack_seq`), then
    /// `tcp_fastretrans_alert` (no duplicate ACK counted), `tcp_newly_delivered` and
    /// `tcp_xmit_recovery`. No window update, RTT or rate sample, TLP check or
    /// `tcp_rack_update_reo_wnd`: those run on the main path only, and so does
    /// `tcp_count_delivered(sack_state.sack_delivered)`: what an old ACK SACKs is
    /// never counted delivered (`tcpi_delivered`, TcpExtTCPDelivered).
    fn old_ack(&mut self, ctx: &mut Ctx, th: &TcpRepr, ack_seq: u64) {
        let (una, prior_delivered) = (self.snd_una, self.delivered);
        self.rack_ack_begin(ctx, th);
        let sack = self.sacktag(ctx, th, ack_seq, una);
        let mut fl = self.rack_ack_delivered(ctx, false, &sack);
        let d = self.fastretrans_alert(ctx, una, 0, &mut fl);
        // FLAG_ECE is only looked at past `old_ack:`, so never here.
        self.count_delivered(d, false);
        self.newly_delivered(ctx, prior_delivered, false, 0);
    }

    /// `tcp_ack`'s `tcp_accecn_process` on an AccECN connection, with
    /// `FLAG_TS_PROGRESS` (the timestamp would advance `ts_recent`:
    /// `tcp_replace_ts_recent`, which lowtide runs after `tcp_ack`): the CE packets
    /// newly reported (0 on other connections), and the congestion control's ACK
    /// flags with `CA_ACK_ECE` for them on the slow path (`tcp_in_ack_event`).
    fn ack_accecn(&mut self, th: &TcpRepr, acc: AccEcnAck, ca_flags: u32) -> (u32, u32) {
        if !self.ecn_mode_accecn() {
            return (0, ca_flags);
        }
        let seq = self.rcv_off(super::seq::Seq(th.seq));
        let ts_progress = th
            .options
            .timestamp
            .filter(|_| self.rx_opt.tstamp_ok)
            .is_some_and(|(tsval, _)| {
                seq <= self.rcv_wup && (tsval.wrapping_sub(self.rx_opt.ts_recent) as i32) > 0
            });
        let acc = AccEcnAck {
            progress: acc.progress || ts_progress,
            ..acc
        };
        let ecn_count = self.accecn_process(th, &acc);
        match ecn_count > 0 && ca_flags & CA_ACK_SLOWPATH != 0 {
            true => (ecn_count, ca_flags | CA_ACK_ECE),
            false => (ecn_count, ca_flags),
        }
    }

    /// `tcp_newly_delivered`: the segments delivered since `prior_delivered`, counted
    /// in `TcpExtTCPDelivered`; for an ECE ACK also in `TcpExtTCPDeliveredCE`: all of
    /// them with classic ECN, the `ecn_count` CE packets ACE reported with AccECN.
    pub(super) fn newly_delivered(
        &mut self,
        ctx: &mut Ctx,
        prior_delivered: u64,
        ece: bool,
        ecn_count: u32,
    ) -> u32 {
        let newly = self.delivered - prior_delivered;
        ctx.mib.add(Mib::TcpExtTCPDelivered, newly);
        if ece {
            let ce = match self.ecn_mode_rfc3168() {
                true => newly,
                false => ecn_count as u64,
            };
            super::ecn::count_delivered_ce(ctx, ce);
        }
        newly as u32
    }

    /// The end of `tcp_clean_rtx_queue`: the congestion control's `pkts_acked`
    /// with this ACK's `ack_sample`, before `tcp_rack_update_reo_wnd`,
    /// `tcp_in_ack_event`, `tcp_process_tlp_ack` and the recovery state machine (so
    /// CUBIC sees the state from before a loss probe's CWR). Its RTT is the
    /// congestion control's (`rs->rtt_us`), and `in_flight` is in bytes:
    /// `mss_cache` times what was delivered since the most recently sent of the
    /// skbs this ACK delivered went out.
    fn ca_pkts_acked(&mut self, ctx: &mut Ctx, pkts_acked: u32, rtt_us: Option<u32>, prior: u64) {
        let in_flight = self.mss_cache as u64 * self.delivered.wrapping_sub(prior);
        let sample = AckSample {
            pkts_acked,
            rtt_us,
            in_flight: in_flight.min(u32::MAX as u64) as u32,
            now: ctx.now,
        };
        let ca_ctx = self.ca_ctx(ctx.now);
        self.cc.pkts_acked(&mut self.cw, &sample, &ca_ctx);
        self.cc.take_mib().count(ctx.mib);
    }

    /// `tcp_count_delivered`: `delivered` more segments reached the peer, with an
    /// ECE ACK of classic ECN also `delivered_ce` (AccECN counts its own in
    /// `tcp_accecn_process`).
    fn count_delivered(&mut self, delivered: u32, ece: bool) {
        self.delivered += delivered as u64;
        if ece && self.ecn_mode_rfc3168() {
            self.delivered_ce += delivered as u64;
        }
    }

    /// The `tcp_sock` view a congestion control's `cong_control` and `init` get.
    pub(crate) fn cc_context(
        &mut self,
        now: crate::time::Instant,
    ) -> (&mut dyn CongestionOps, CcContext<'_>) {
        let packets_in_flight = self.packets_in_flight();
        let c = CcContext {
            cw: &mut self.cw,
            pacing_rate: &mut self.pace.pacing_rate,
            pacing_needed: &mut self.pace.pacing_needed,
            app_limited: &mut self.rate.app_limited,
            max_pacing_rate: self.pace.max_pacing_rate,
            mss: self.mss_cache,
            srtt_us: self.rtt.srtt_us,
            min_rtt_us: self.rtt.min_rtt_us,
            delivered: self.delivered,
            delivered_mstamp: self.rate.delivered_mstamp,
            lost: self.rtx.lost,
            packets_in_flight,
            now,
            wstamp: self.pace.wstamp,
            ca_state: self.ca_state,
            seed: self.iss.0,
            ecn_ok: self.ecn_flags & super::ecn::TCP_ECN_MODE_ANY != 0,
            snd_nxt: self.snd_nxt,
            rcv_nxt: self.rcv_nxt,
            delivered_ce: self.delivered_ce,
        };
        (self.cc.as_mut(), c)
    }

    /// `ca_ops->cong_control` with this ACK's rate sample; false if the congestion
    /// control has none.
    fn cong_control(&mut self, now: crate::time::Instant, rs: &RateSample) -> bool {
        let (cc, mut c) = self.cc_context(now);
        cc.cong_control(&mut c, rs)
    }

    /// `ca_rtt_us` of `tcp_clean_rtx_queue`: the RTT of the most recently sent
    /// packet this ACK (S)ACKed, never from a retransmission.
    fn ca_rtt_us(
        &self,
        ctx: &Ctx,
        c: &super::rtx::Cleaned,
        sack_tx: Option<crate::time::Instant>,
    ) -> Option<u32> {
        let last = sack_tx.or(c.last_tx.filter(|_| !c.acked_retrans))?;
        Some(ctx.now.saturating_since(last).as_micros() as u32)
    }

    /// `tcp_may_raise_cwnd` + `tcp_in_cwnd_reduction`: grow on in-order delivery
    /// (`FLAG_DATA_ACKED`, RFC 5681) or, once reordering exceeds
    /// `tcp_reordering`, on any forward progress (`FLAG_FORWARD_PROGRESS`: a SACK
    /// too).
    fn may_raise_cwnd(&self, cfg: &crate::config::Config, data_acked: bool, sacked: bool) -> bool {
        if matches!(self.ca_state, CaState::Recovery | CaState::Cwr) {
            return false;
        }
        if self.reordering > cfg.tcp_reordering {
            return data_acked || sacked;
        }
        data_acked
    }

    /// `tcp_ack_update_window`
    /// ([RFC 9293 3.10.7.4](https://www.rfc-editor.org/rfc/rfc9293#section-3.10.7.4)
    /// SND.WL1/WL2 rule, as `tcp_may_update_window`: from the same segment only a larger or
    /// zero window). True if the window was updated (`FLAG_WIN_UPDATE`). A new
    /// window with data waiting to be sent may restart cwnd after idle, as a new
    /// skb would (`tcp_slow_start_after_idle_check`, before `snd_una` moves: a
    /// zero window that held the data for over an RTO).
    pub(super) fn ack_update_window(&mut self, ctx: &mut Ctx, th: &TcpRepr, ack: u64) -> bool {
        let seq = self.rcv_off(super::seq::Seq(th.seq));
        let nwin = self.ack_window(th);
        if self.may_update_window(ack, seq, nwin) {
            self.snd_wl1 = seq;
            if self.snd_wnd != nwin {
                // "the only place, where fast path is recovered for sending TCP".
                self.snd_wnd = nwin;
                self.fast_path_off();
                self.fast_path_check();
                if !self.write_queue.is_empty() {
                    self.slow_start_after_idle_check(ctx);
                }
                self.grow_max_window(ctx, nwin);
            }
            return true;
        }
        false
    }

    /// `tcp_ack_update_window`'s `nwin`: the segment's window, scaled unless the
    /// segment is a SYN (RFC 7323: a SYN's window is never scaled; a simultaneous
    /// open's SYN-ACK comes here).
    pub(super) fn ack_window(&self, th: &TcpRepr) -> u32 {
        match th.flags.contains(TcpFlags::SYN) {
            true => th.window as u32,
            false => (th.window as u32) << self.rx_opt.snd_wscale,
        }
    }

    /// `tcp_ack_update_window`, once the window changed: a larger one than ever is
    /// `max_window`, which `tcp_sync_mss` bounds the MSS to (half of it). A window
    /// that did not change never raises it.
    pub(super) fn grow_max_window(&mut self, ctx: &Ctx, nwin: u32) {
        if nwin > self.max_window {
            self.max_window = nwin;
            self.sync_mss(self.pmtu_cookie, ctx.cfg.tcp_min_snd_mss);
        }
    }

    /// `tcp_snd_una_update`: `tcpi_bytes_acked` grows by the sequence space the ACK
    /// covers, the SYN and the FIN included (Linux 4.1+, RFC 4898 tcpEStatsAppHCThruOctetsAcked).
    pub(super) fn snd_una_update(&mut self, ack: u64) {
        self.bytes_acked += ack.saturating_sub(self.snd_una);
        self.snd_una = ack;
    }

    /// `tcp_clean_rtx_queue` around [`super::rtx::RtxQueue::clean`].
    pub(super) fn clean_rtx_queue(&mut self, ctx: &mut Ctx, ack: u64) -> super::rtx::Cleaned {
        // The skbs holding marked bytes, before they go (tcp_ack_tstamp's clones).
        let holders = self.tstamp_ack_holders(ack);
        let c = self.rtx.clean(ack);
        self.wmem_free(c.truesize);
        if ack > self.snd_una {
            // tcp_ack: FLAG_SND_UNA_ADVANCED resets icsk_retransmits.
            self.icsk.retransmits = 0;
            let prior = self.snd_una;
            self.snd_una_update(ack);
            self.urg_acked(prior);
            self.tstamp_acked(ctx, prior, &holders);
        }
        if c.acked_segs > 0 {
            self.mtup_probe_acked(ctx);
        }
        // The freed skbs release their MSG_ZEROCOPY references.
        self.zerocopy_release(ctx);
        // FASTRETRANS_DEBUG's end of tcp_clean_rtx_queue: "if (!tp->packets_out &&
        // tcp_is_sack(tp))" the scoreboard counters are zeroed, a leaked
        // retrans_out with them.
        if self.rx_opt.sack_ok {
            self.rtx.clear_leaked_counts();
        }
        c
    }

    /// `tcp_clean_rtx_queue`'s RTT samples (Karn,
    /// [RFC 6298 section 3](https://www.rfc-editor.org/rfc/rfc6298#section-3): none from
    /// the cumulative ACK when it acknowledged a retransmission), then `tcp_ack_update_rtt`. Returns
    /// whether the RTT was updated (`rtt_update`) and the congestion control's
    /// sample (`rs->rtt_us`).
    fn ack_rtt(
        &mut self,
        ctx: &mut Ctx,
        th: &TcpRepr,
        c: &super::rtx::Cleaned,
        sack: &super::rtx::sacktag::SackResult,
        maybe_delayed: bool,
    ) -> (bool, Option<u32>) {
        let since = |t: crate::time::Instant| ctx.now.saturating_since(t).as_micros() as u32;
        let samples = RttSamples {
            seq_rtt_us: c.first_tx.filter(|_| !c.acked_retrans).map(since),
            sack_rtt_us: sack.first_tx.map(since),
            ca_rtt_us: self.ca_rtt_us(ctx, c, sack.last_tx),
            acked: c.acked_segs > 0,
            maybe_delayed,
        };
        let ts = self.ts_echo_rtt_us(ctx, th);
        self.ack_update_rtt(ctx, &samples, ts)
    }

    /// `tcp_rtt_tsopt_us`: the RTT the echoed timestamp gives (RFC 7323 section 4.1:
    /// valid for a retransmission's echo too), if timestamps are on.
    pub(super) fn ts_echo_rtt_us(&self, ctx: &Ctx, th: &TcpRepr) -> Option<u32> {
        th.options
            .timestamp
            .filter(|&(_, ecr)| self.rx_opt.tstamp_ok && ecr != 0)
            .and_then(|(_, ecr)| ts_rtt_us(self.tsval(ctx.now), ecr))
    }

    /// After `snd_una` moved: the retransmit hint, the busy chrono, FIN states.
    fn on_snd_una_advanced(&mut self, ctx: &mut Ctx, c: &super::rtx::Cleaned) {
        self.retransmit_hint = self.retransmit_hint.max(self.snd_una);
        // tcp_clean_rtx_queue: an emptied retransmit queue stops the busy chrono.
        if self.rtx.is_empty() {
            self.chrono_stop(ctx.now, super::chrono::Chrono::Busy);
        }
        if c.fin_acked {
            self.our_fin_acked(ctx);
        }
        // No tcp_check_space in tcp_ack: the send buffer grows and the writer is
        // woken after the push that follows (tcp_data_snd_check, and each skb it
        // sends: tcp_event_new_data_sent), once the flight counts what went.
    }
}

/// The RTT in microseconds a timestamp echo `ecr` gives at our clock `tsval` (ms
/// ticks), as `tcp_ack_update_rtt`: none when the echo is from the future or too old
/// (`delta >= INT_MAX / 1000`, a forged or stale TSecr), at least one tick.
pub(crate) fn ts_rtt_us(tsval: u32, ecr: u32) -> Option<u32> {
    let delta = tsval.wrapping_sub(ecr);
    (delta < i32::MAX as u32 / 1000).then(|| delta.max(1) * 1000)
}

#[cfg(test)]
mod ts_rtt_tests {
    use super::ts_rtt_us;

    #[test]
    fn echo_bounds_as_tcp_ack_update_rtt() {
        assert_eq!(ts_rtt_us(1000, 1000), Some(1000), "at least one tick");
        assert_eq!(ts_rtt_us(1000, 960), Some(40_000));
        // From the future, or older than INT_MAX / 1000 ticks: no sample.
        assert_eq!(ts_rtt_us(1000, 1001), None);
        assert_eq!(ts_rtt_us(0, 1), None);
        assert_eq!(ts_rtt_us(0, u32::MAX), Some(1000), "across the wrap");
        assert_eq!(ts_rtt_us(i32::MAX as u32 / 1000, 0), None);
        let d = i32::MAX as u32 / 1000 - 1;
        assert_eq!(ts_rtt_us(d, 0), Some(d * 1000));
    }
}

#[cfg(test)]
mod pkts_acked_order_tests {
    use crate::config::Config;
    use crate::tcp::cong::{AckSample, CaCtx, CaState, CongestionOps, CwndState};
    use crate::tcp::rtx::skb::Skb;
    use crate::tcp::{Tcb, TcpState, TestStack};
    use crate::time::Instant;
    use lowtide_wire::tcp::TcpRepr;
    use std::sync::{Arc, Mutex};

    /// A congestion control that logs its hooks, with the state `pkts_acked` saw.
    #[derive(Debug, Default)]
    struct Spy(Arc<Mutex<Vec<String>>>);

    impl Spy {
        fn log(&self, s: String) {
            self.0.lock().expect("not poisoned").push(s);
        }
    }

    impl CongestionOps for Spy {
        fn name(&self) -> &'static str {
            "spy"
        }
        fn ssthresh(&mut self, cw: &CwndState) -> u32 {
            self.log("ssthresh".into());
            (cw.snd_cwnd / 2).max(2)
        }
        fn cong_avoid(&mut self, _cw: &mut CwndState, _acked: u32, _ctx: &CaCtx) {}
        fn set_state(&mut self, _cw: &mut CwndState, _old: CaState, new: CaState) {
            self.log(format!("set_state {new:?}"));
        }
        fn in_ack_event(&mut self, _flags: u32, _ctx: &CaCtx) {
            self.log("in_ack_event".into());
        }
        fn pkts_acked(&mut self, cw: &mut CwndState, s: &AckSample, _ctx: &CaCtx) {
            let (c, ss) = (cw.snd_cwnd, cw.snd_ssthresh);
            self.log(format!(
                "pkts_acked {} {:?} {} cwnd {c} ssthresh {ss}",
                s.pkts_acked, s.rtt_us, s.in_flight
            ));
        }
    }

    /// `tcp_ack` on the ACK that covers a loss probe's retransmission and new data
    /// sent after it (`tcp_process_tlp_ack`: a loss was repaired, CWR): the end of
    /// `tcp_clean_rtx_queue` gives `pkts_acked` its sample first, with the
    /// window and state from before the reduction, then come `tcp_in_ack_event`
    /// and the reduction (ssthresh, CWR, then Open via `tcp_try_keep_open`).
    #[test]
    fn pkts_acked_runs_before_in_ack_event_and_the_loss_probe_reduction() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = Tcb::for_test(&cfg);
        let seen = Arc::new(Mutex::new(Vec::new()));
        t.cc = Box::new(Spy(seen.clone()));
        t.state = TcpState::Established;
        t.rx_opt.sack_ok = true;
        t.mss_cache = 1000;
        t.snd_wnd = 1 << 20;
        (t.cw.snd_cwnd, t.cw.snd_ssthresh) = (10, u32::MAX >> 1);
        let sent = Instant::from_nanos(1_000_000_000);
        for i in 0..4u64 {
            t.rtx.push(Skb::sent_for_test(1 + i * 1000, 1000, 1, sent));
        }
        // The probe resent 3001:4001 (tlp_high_seq 4001), then 4001:5001 went.
        t.tlp_high_seq = Some(4001);
        t.tlp_retrans = true;
        let new_data = Instant::from_nanos(1_040_000_000);
        t.rtx.push(Skb::sent_for_test(4001, 1000, 1, new_data));
        (t.snd_una, t.snd_nxt) = (1, 5001);
        let th = TcpRepr {
            ack: t.snd_seq(5001).0,
            window: u16::MAX,
            ..Default::default()
        };
        let now = Instant::from_nanos(1_050_000_000);
        t.ack(&mut st.ctx(&cfg, now, false), &th, 0, false, false);
        let log = seen.lock().expect("not poisoned").clone();
        // RTT of the newest (never resent) skb: 10 ms; in_flight: mss times what
        // was delivered since it was sent (5 segments; none stamped before).
        let first = format!(
            "pkts_acked 5 Some(10000) {} cwnd 10 ssthresh 2147483647",
            5 * t.mss_cache
        );
        assert_eq!(log[0], first, "{log:?}");
        assert_eq!(
            &log[1..],
            [
                "in_ack_event",
                "ssthresh",
                "set_state Cwr",
                "set_state Open"
            ],
        );
        assert_eq!((t.cw.snd_cwnd, t.cw.snd_ssthresh), (5, 5));
        assert_eq!(t.tlp_high_seq, None);
    }
}

#[cfg(test)]
mod maybe_delayed_tests {
    use crate::config::Config;
    use crate::tcp::rtx::skb::Skb;
    use crate::tcp::{Tcb, TcpState, TestStack};
    use crate::time::Instant;
    use lowtide_wire::tcp::TcpRepr;

    /// `tcp_min_rtt_wlen` 1 s; a 10 ms minimum taken at 0; a lone 100-byte
    /// segment sent at 1.96 s (nothing delivered since) ACKed at 2 s, with or
    /// without SACK and ECE. Returns `tcpi_min_rtt` after.
    fn min_rtt_after_runt_ack(sack: bool, ece: bool) -> u32 {
        let cfg = Config {
            tcp_min_rtt_wlen: 1,
            ..Config::default()
        };
        let mut st = TestStack::default();
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::Established;
        t.rx_opt.sack_ok = sack;
        t.mss_cache = 1000;
        t.snd_wnd = 1 << 20;
        t.update_rtt_min(&st.ctx(&cfg, Instant::ZERO, false), 10_000, false);
        if ece {
            t.ecn_flags = crate::tcp::ecn::TCP_ECN_OK;
        }
        t.delivered = 1;
        let sent = Instant::from_nanos(1_960_000_000);
        let mut skb = Skb::sent_for_test(1, 100, 1, sent);
        (skb.tx.delivered, skb.tx.delivered_mstamp) = (1, Some(Instant::ZERO));
        t.rtx.push(skb);
        (t.snd_una, t.snd_nxt) = (1, 101);
        let mut th = TcpRepr {
            ack: t.snd_seq(101).0,
            window: u16::MAX,
            ..Default::default()
        };
        if ece {
            th.flags |= lowtide_wire::tcp::TcpFlags::ECE;
        }
        let now = Instant::from_nanos(2_000_000_000);
        t.ack(&mut st.ctx(&cfg, now, false), &th, 0, false, false);
        t.rtt.min_rtt_us
    }

    /// `tcp_clean_rtx_queue`'s FLAG_ACK_MAYBE_DELAYED: with SACK the runt's ACK is
    /// maybe delayed, ECE or not (the FLAG_CA_ALERT test reads the function's own
    /// flags), so its 40 ms skips `tcp_update_rtt_min`; without SACK the test reads
    /// `tp->delivered` before `tcp_remove_reno_sacks` counts the segment, so it is
    /// not, and past the window 40 ms is the minimum.
    #[test]
    fn runt_ack_maybe_delayed_as_tcp_clean_rtx_queue_tests_it() {
        assert_eq!(min_rtt_after_runt_ack(true, false), 10_000);
        assert_eq!(min_rtt_after_runt_ack(true, true), 10_000);
        assert_eq!(min_rtt_after_runt_ack(false, false), 40_000);
    }
}
