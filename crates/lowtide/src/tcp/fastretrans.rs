//! Loss recovery as tcp_input.c does it: `tcp_fastretrans_alert`, RFC 6675 loss
//! marking, PRR (RFC 6937), NewReno without SACK (RFC 6582), undo, and the RTO's
//! `tcp_enter_loss`. SACK processing is in `rtx/sacktag.rs`; RACK (Linux's
//! tcp_recovery.c) in `recovery.rs`.

use super::cong::{CaEvent, CaState, INFINITE_SSTHRESH};
use super::rtx::skb::{EVER_RETRANS, LOST, SACKED_RETRANS};
use super::sock::{Pending, Tcb};
use super::{Ctx, TcpState};
use crate::mib::Mib;
use core::time::Duration;
use lowtide_wire::tcp::TcpRepr;

/// The `FLAG_*` bits of one ACK that loss recovery looks at (tcp_input.c).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AckFlags {
    /// `FLAG_SND_UNA_ADVANCED`.
    pub snd_una_advanced: bool,
    /// `FLAG_DATA_SACKED`: new data SACKed.
    pub data_sacked: bool,
    /// `FLAG_NOT_DUP`: data, a window update or new data acknowledged.
    pub not_dup: bool,
    /// `FLAG_ORIG_SACK_ACKED`: a never-retransmitted skb below `high_seq` delivered.
    pub orig_sack_acked: bool,
    /// `FLAG_DSACK_TLP`.
    pub dsack_tlp: bool,
    /// `FLAG_LOST_RETRANS`: RACK found a retransmission lost.
    pub lost_retrans: bool,
    /// `FLAG_ECE`: the ACK echoes a congestion mark (RFC 3168, `tcp/ecn.rs`).
    pub ece: bool,
    /// `FLAG_SET_XMIT_TIMER`: rearm the TLP/RTO timer (cleared when RACK armed its
    /// reorder timer).
    pub set_xmit_timer: bool,
}

impl Tcb {
    /// `tcp_newreno_mark_lost`: without SACK, the head is lost after `reordering`
    /// duplicate ACKs, and again on each partial ACK in recovery
    /// ([RFC 6582 3.2](https://www.rfc-editor.org/rfc/rfc6582#section-3.2)).
    fn newreno_mark_lost(&mut self, snd_una_advanced: bool) {
        let st = self.ca_state;
        if (st < CaState::Recovery && self.sacked_out() >= self.reordering)
            || (st == CaState::Recovery && snd_una_advanced)
        {
            self.mark_head_lost();
        }
    }

    /// NewReno: the head segment is lost (`tcp_newreno_mark_lost`): a head of more
    /// than one segment is cut after its first, of its own segment size
    /// (`tcp_skb_mss`).
    fn mark_head_lost(&mut self) {
        let Some(head) = self.rtx.first() else { return };
        let (seq, pcount, lost, mss) = (head.seq, head.pcount, head.has(LOST), head.gso_size);
        if lost {
            return;
        }
        if pcount > 1 && head.len() > mss {
            self.wmem_queued += self.rtx.split_at(seq + mss as u64, mss);
        }
        self.rtx.update(seq, LOST, SACKED_RETRANS);
        self.retransmit_hint = self.retransmit_hint.min(seq);
    }

    /// `tcp_identify_packet_loss`: NewReno without SACK, else RACK, the only loss
    /// detection since Linux 6.17 (1c120191dcec "tcp: remove obsolete and unused
    /// RFC3517/RFC6675 loss recovery code": `tcp_recovery`'s bit 0x1 has no effect).
    fn identify_packet_loss(&mut self, ctx: &mut Ctx, fl: &mut AckFlags) {
        if self.rtx.is_empty() {
            return;
        }
        if !self.rx_opt.sack_ok {
            self.newreno_mark_lost(fl.snd_una_advanced);
        } else {
            let prior_retrans = self.rtx.retrans_out;
            if self.rack_mark_lost(ctx) {
                fl.set_xmit_timer = false;
            }
            if prior_retrans > self.rtx.retrans_out {
                fl.lost_retrans = true;
            }
        }
    }

    /// `tcp_fastretrans_alert`: the recovery state machine, run on every ACK that is
    /// "dubious" or while not Open; PRR (RFC 6937) paces the window in Recovery.
    /// `num_dupack`: 1 for a duplicate ACK (`tcp_ack`: neither advancing `snd_una`
    /// nor `FLAG_NOT_DUP` nor D-SACKing), else 0. Returns the segments duplicate
    /// ACKs delivered without SACK (`tcp_add_reno_sack`'s `tcp_count_delivered`).
    pub(crate) fn fastretrans_alert(
        &mut self,
        ctx: &mut Ctx,
        prior_snd_una: u64,
        num_dupack: u32,
        fl: &mut AckFlags,
    ) -> u32 {
        if self.rtx.packets_out == 0 && self.reno_sacked_out > 0 {
            self.reset_reno_sack();
        }
        // A. ECE, hence prohibit cwnd undoing: the reduction is required.
        if fl.ece {
            self.undo.prior_ssthresh = 0;
        }
        // B. In all the states check for reneging SACKs (tcp_check_sack_reneging): a
        // cumulative ACK that stops at SACKed data; the RTO, due soon, sends it again.
        if fl.snd_una_advanced && self.rtx.head_sacked() {
            let delay =
                Duration::from_micros(self.rtt.srtt_us as u64 / 2).max(Duration::from_millis(10));
            self.icsk.pending = Some((Pending::Retrans, ctx.now + delay));
            fl.set_xmit_timer = false;
            return 0;
        }
        self.fastretrans_states(ctx, prior_snd_una, num_dupack, fl)
    }

    /// Steps D (state exit) and E (state processing) of `tcp_fastretrans_alert`.
    fn fastretrans_states(
        &mut self,
        ctx: &mut Ctx,
        prior_snd_una: u64,
        num_dupack: u32,
        fl: &mut AckFlags,
    ) -> u32 {
        let reno = !self.rx_opt.sack_ok;
        if self.ca_state == CaState::Open {
            self.undo.retrans_stamp = None;
        } else if self.snd_una >= self.high_seq {
            match self.ca_state {
                CaState::Cwr if self.snd_una != self.high_seq => {
                    self.end_cwnd_reduction(ctx);
                    self.set_ca_state(CaState::Open);
                }
                CaState::Recovery => {
                    if reno {
                        self.reset_reno_sack();
                    }
                    if self.try_undo_recovery(ctx) {
                        return 0;
                    }
                    self.end_cwnd_reduction(ctx);
                }
                _ => {}
            }
        }
        let mut delivered = 0;
        match self.ca_state {
            CaState::Recovery => {
                if !fl.snd_una_advanced {
                    if reno {
                        delivered = self.add_reno_sack(ctx, num_dupack);
                    }
                } else if self.try_undo_partial(ctx, prior_snd_una) {
                    return 0;
                }
                // tcp_try_keep_open, not tcp_try_to_open: the state (Open or
                // Disorder) and high_seq change, retrans_stamp stays and an ECE
                // enters no CWR here.
                if self.try_undo_dsack(ctx) {
                    self.try_keep_open();
                }
                self.identify_packet_loss(ctx, fl);
                if self.ca_state != CaState::Recovery {
                    // Undone, but loss is evident: a new recovery (reordering then loss).
                    if !self.time_to_recover() {
                        return delivered;
                    }
                    self.enter_recovery(ctx, fl.ece);
                }
                self.rexmit_lost = true;
            }
            CaState::Loss => {
                delivered = self.process_loss(ctx, fl, num_dupack);
                if self.ca_state != CaState::Loss {
                    self.update_rto_time(ctx.now);
                }
                self.identify_packet_loss(ctx, fl);
                if self.ca_state == CaState::Open || fl.lost_retrans {
                    delivered += self.open_or_disorder(ctx, fl, num_dupack);
                }
            }
            _ => delivered = self.open_or_disorder(ctx, fl, num_dupack),
        }
        delivered
    }

    /// The Open/Disorder/CWR branch of `tcp_fastretrans_alert`: duplicate ACKs
    /// counted without SACK, late D-SACK undo, loss detection, and entering
    /// Recovery once a loss is proven. Returns what the duplicate ACK delivered.
    fn open_or_disorder(&mut self, ctx: &mut Ctx, fl: &mut AckFlags, num_dupack: u32) -> u32 {
        let mut delivered = 0;
        if !self.rx_opt.sack_ok {
            if fl.snd_una_advanced {
                self.reset_reno_sack();
            }
            delivered = self.add_reno_sack(ctx, num_dupack);
        }
        if self.ca_state <= CaState::Disorder {
            self.try_undo_dsack(ctx);
        }
        self.identify_packet_loss(ctx, fl);
        if !self.time_to_recover() {
            self.try_to_open(fl.ece);
            return delivered;
        }
        // "MTU probe failure: don't reduce cwnd" (tcp/mtu_probe.rs).
        if self.mtup_probe_lost(ctx) {
            return delivered;
        }
        self.enter_recovery(ctx, fl.ece);
        self.rexmit_lost = true;
        delivered
    }

    /// `tcp_time_to_recover`: loss detection (RACK, or NewReno) marked a packet lost.
    fn time_to_recover(&self) -> bool {
        self.rtx.lost_out > 0
    }

    /// `tcp_any_retrans_done`.
    pub(super) fn any_retrans_done(&self) -> bool {
        self.rtx.retrans_out > 0 || self.rtx.first().is_some_and(|h| h.has(EVER_RETRANS))
    }

    /// `tcp_try_keep_open`: Disorder while anything is SACKed, lost or retransmitted.
    pub(crate) fn try_keep_open(&mut self) {
        let left_out = self.sacked_out() + self.rtx.lost_out;
        let st = if left_out > 0 || self.any_retrans_done() {
            CaState::Disorder
        } else {
            CaState::Open
        };
        if self.ca_state != st {
            self.set_ca_state(st);
            self.high_seq = self.snd_nxt;
        }
    }

    /// `tcp_try_to_open`: an ECE enters CWR (one reduction per window).
    fn try_to_open(&mut self, ece: bool) {
        if !self.any_retrans_done() {
            self.undo.retrans_stamp = None;
        }
        if ece {
            self.enter_cwr();
        }
        if self.ca_state != CaState::Cwr {
            self.try_keep_open();
        }
    }

    /// `tcp_process_loss`: in Loss state after an RTO, with F-RTO
    /// ([RFC 5682 section 3.1](https://www.rfc-editor.org/rfc/rfc5682#section-3.1), the
    /// SACK-enhanced variant Linux uses for `tcp_frto`). Returns what a duplicate ACK
    /// delivered without SACK.
    fn process_loss(&mut self, ctx: &mut Ctx, fl: &AckFlags, num_dupack: u32) -> u32 {
        let recovered = self.snd_una >= self.high_seq;
        // A Fast Open child still in its handshake tries the undo on any ACK: its
        // SYN-ACK timeout may prove spurious before snd_una moves (794200d66273).
        if (fl.snd_una_advanced || self.tfo.rsk.is_some()) && self.try_undo_loss(ctx, false) {
            return 0;
        }
        if self.frto {
            // Step 3.b: never-retransmitted data was delivered: the RTO was spurious.
            if fl.orig_sack_acked && self.try_undo_loss(ctx, true) {
                return 0;
            }
            if self.snd_nxt > self.high_seq {
                if fl.data_sacked || num_dupack > 0 {
                    self.frto = false; // Step 3.a: the loss was real.
                }
            } else if fl.snd_una_advanced && !recovered {
                self.high_seq = self.snd_nxt;
                // Step 2.b: send new data (after this ACK grew cwnd), not retransmissions.
                let wnd_end = self.snd_una + self.snd_wnd as u64;
                if !self.write_queue.is_empty() && wnd_end > self.snd_nxt {
                    self.frto_rexmit_new = true;
                    return 0;
                }
                self.frto = false;
            }
        }
        if recovered {
            // Step 2.a and the first part of 3.a: back to Open.
            self.try_undo_recovery(ctx);
            return 0;
        }
        self.rexmit_lost = true;
        if !self.rx_opt.sack_ok {
            // "A Reno DUPACK means new data in F-RTO step 2.b above are delivered.
            // Lower inflight to clock out (re)transmissions."
            if self.snd_nxt > self.high_seq && num_dupack > 0 {
                return self.add_reno_sack(ctx, num_dupack);
            } else if fl.snd_una_advanced {
                self.reset_reno_sack();
            }
        }
        0
    }

    /// `tcp_packet_delayed`: the ACK echoes a timestamp older than the first
    /// retransmission, so an original was delivered (RFC 3522 Eifel detection); or
    /// nothing was retransmitted at all. Linux 6.16+: a zero `retrans_stamp` proves
    /// nothing without SACK once `snd_una` reached `high_seq` (NewReno's hold in
    /// `tcp_is_non_sack_preventing_reopen` clears it after retransmitting), nor in
    /// SYN-SENT (the SYN-ACK clears it).
    fn packet_delayed(&self) -> bool {
        match self.undo.retrans_stamp {
            Some(rs) => {
                self.rx_opt.tstamp_ok
                    && self.rx_opt.rcv_tsecr != 0
                    && (self.rx_opt.rcv_tsecr.wrapping_sub(self.tsval(rs)) as i32) < 0
            }
            None if !self.rx_opt.sack_ok && self.snd_una >= self.high_seq => false,
            None => self.state != TcpState::SynSent,
        }
    }

    /// `tcp_may_undo`: a reduction is pending undo and either D-SACKs covered every
    /// retransmission or the ACK shows the original arrived.
    fn may_undo(&self) -> bool {
        self.undo.marker.is_some() && (self.undo.retrans == 0 || self.packet_delayed())
    }

    /// `tcp_undo_cwnd_reduction`: restores cwnd (`undo_cwnd`) and ssthresh
    /// (`prior_ssthresh`); with `unmark_loss`, nothing is lost after all.
    fn undo_cwnd_reduction(&mut self, unmark_loss: bool, now: crate::time::Instant) {
        if unmark_loss {
            self.rtx.unmark_all_lost();
            self.retransmit_hint = self.snd_una;
        }
        if self.undo.prior_ssthresh > 0 {
            self.cw.snd_cwnd = self.cc.undo_cwnd(&self.cw, self.undo.prior_cwnd);
            if self.undo.prior_ssthresh > self.cw.snd_ssthresh {
                self.cw.snd_ssthresh = self.undo.prior_ssthresh;
                self.ecn_withdraw_cwr();
            }
        }
        self.snd_cwnd_stamp = now;
        self.undo.marker = None;
        self.rack.advanced = true;
    }

    /// `tcp_is_non_sack_preventing_reopen`: NewReno holds the state until data above
    /// `high_seq` is acknowledged (RFC 6582: no false fast retransmits).
    fn non_sack_preventing_reopen(&mut self) -> bool {
        if !self.rx_opt.sack_ok && self.snd_una == self.high_seq {
            if !self.any_retrans_done() {
                self.undo.retrans_stamp = None;
            }
            return true;
        }
        false
    }

    /// `tcp_retransmit_timer` on a full socket's SYN timeout (SYN-SENT, or a
    /// simultaneous open's SYN-RECV): `tcp_enter_loss` as for data (Loss, cwnd one,
    /// ssthresh from the congestion control, undo state at the first timeout; later
    /// ones find `high_seq` past `snd_una` in Loss and keep it), then
    /// `tcp_retransmit_skb`'s count of the retransmission in `undo_retrans`. The
    /// handshake's ACK leaves Loss ([`Tcb::syn_acked_alert`]) and `tcp_init_transfer`
    /// sets cwnd and ssthresh afresh.
    pub(crate) fn syn_timeout_loss(&mut self, ctx: &mut Ctx) {
        self.enter_loss(ctx);
        self.undo.retrans = self.undo.retrans.max(0) + 1;
    }

    /// `tcp_ack` on the ACK of our SYN when a SYN timeout left Loss: not Open, so
    /// "dubious", and `tcp_fastretrans_alert` runs `tcp_process_loss` with
    /// `FLAG_SND_UNA_ADVANCED`. Nothing is undone in SYN-SENT (the ACK cleared
    /// `retrans_stamp`, `tcp_packet_delayed`), so Open, except that NewReno holds Loss
    /// until data above `high_seq` is acknowledged; in a simultaneous open's SYN-RECV
    /// the cleared stamp proves nothing was retransmitted, so the loss is undone
    /// (`TCPLossUndo`). Fast Open data the SYN carried and never sent again
    /// (`FLAG_ORIG_SACK_ACKED`, with SACK) makes the timeout spurious (F-RTO).
    /// `tcp_xmit_recovery` sends nothing in SYN-SENT.
    pub(crate) fn syn_acked_alert(&mut self, ctx: &mut Ctx, prior_snd_una: u64) {
        if self.ca_state == CaState::Open {
            return;
        }
        let orig = self.rtx.delivered.orig_low;
        let mut fl = AckFlags {
            snd_una_advanced: true,
            not_dup: true,
            orig_sack_acked: self.rx_opt.sack_ok && orig.is_some_and(|(_, e)| e <= self.high_seq),
            ..Default::default()
        };
        self.fastretrans_alert(ctx, prior_snd_una, 0, &mut fl);
        if self.state == TcpState::SynSent {
            self.frto_rexmit_new = false;
            self.rexmit_lost = false;
        }
    }

    /// `tcp_try_undo_spurious_syn`: a SYN or SYN-ACK timeout was spurious when the
    /// handshake's ACK echoes the timestamp of the first one (`retrans_stamp`): the
    /// undo state goes, so `tcp_init_transfer` keeps the initial window (Linux 5.2,
    /// RFC 3522 detection applied to the handshake).
    pub(crate) fn try_undo_spurious_syn(&mut self, th: &TcpRepr) {
        let (Some(stamp), Some((_, ecr))) = (self.undo.retrans_stamp, th.options.timestamp) else {
            return;
        };
        if self.undo.marker.is_some() && self.rx_opt.tstamp_ok && ecr == self.tsval(stamp) {
            self.undo.marker = None;
        }
    }

    /// `tcp_try_undo_recovery`: at the end of Recovery or Loss, undo if nothing
    /// needed retransmitting after all (`TCPFullUndo`/`TCPLossUndo`). True if NewReno
    /// holds the state.
    pub(crate) fn try_undo_recovery(&mut self, ctx: &mut Ctx) -> bool {
        if self.may_undo() {
            self.undo_cwnd_reduction(false, ctx.now);
            ctx.mib.inc(if self.ca_state == CaState::Loss {
                Mib::TcpExtTCPLossUndo
            } else {
                Mib::TcpExtTCPFullUndo
            });
        } else if self.rack.reo_wnd_persist > 0 {
            self.rack.reo_wnd_persist -= 1;
        }
        if self.non_sack_preventing_reopen() {
            return true;
        }
        self.set_ca_state(CaState::Open);
        self.is_sack_reneg = false;
        false
    }

    /// `tcp_try_undo_dsack`: D-SACKs acknowledged every retransmission
    /// (`TCPDSACKUndo`); the reordering window persists longer.
    fn try_undo_dsack(&mut self, ctx: &mut Ctx) -> bool {
        if self.undo.marker.is_some() && self.undo.retrans == 0 {
            self.rack.reo_wnd_persist =
                (self.rack.reo_wnd_persist + 1).min(super::consts::TCP_RACK_RECOVERY_THRESH);
            self.undo_cwnd_reduction(false, ctx.now);
            ctx.mib.inc(Mib::TcpExtTCPDSACKUndo);
            return true;
        }
        false
    }

    /// `tcp_try_undo_partial`: a partial ACK in Recovery filled by a delayed original:
    /// reordering, not loss (`TCPPartialUndo` once no retransmission is out). True
    /// if the ACK must not mark or retransmit more.
    fn try_undo_partial(&mut self, ctx: &mut Ctx, prior_snd_una: u64) -> bool {
        if self.undo.marker.is_none() || !self.packet_delayed() {
            return false;
        }
        self.check_sack_reordering(ctx, prior_snd_una, true);
        if self.rtx.retrans_out > 0 {
            return true;
        }
        if !self.any_retrans_done() {
            self.undo.retrans_stamp = None;
        }
        self.undo_cwnd_reduction(true, ctx.now);
        ctx.mib.inc(Mib::TcpExtTCPPartialUndo);
        self.try_keep_open();
        false
    }

    /// `tcp_try_undo_loss`: an RTO proven spurious by timestamps, D-SACKs or F-RTO
    /// (`frto_undo`, `TCPSpuriousRTOs`): restore the window, forget the losses.
    fn try_undo_loss(&mut self, ctx: &mut Ctx, frto_undo: bool) -> bool {
        if !frto_undo && !self.may_undo() {
            return false;
        }
        self.undo_cwnd_reduction(true, ctx.now);
        ctx.mib.inc(Mib::TcpExtTCPLossUndo);
        if frto_undo {
            ctx.mib.inc(Mib::TcpExtTCPSpuriousRTOs);
        }
        self.icsk.retransmits = 0;
        if self.non_sack_preventing_reopen() {
            return true;
        }
        if frto_undo || self.rx_opt.sack_ok {
            self.set_ca_state(CaState::Open);
            self.is_sack_reneg = false;
        }
        true
    }

    /// `tcp_init_undo`: remember where this reduction began, and how many
    /// retransmissions in flight must be shown spurious (D-SACKed) before it can be
    /// undone: the regular ones (`retrans_out`) and, since Linux 6.11 ("tcp: fix
    /// incorrect undo caused by DSACK of TLP retransmit"), a loss probe's
    /// retransmission still outstanding (`tlp_high_seq && tlp_retrans`), so that
    /// the probe's D-SACK alone does not undo a recovery that repaired a real loss.
    /// Never 0, which means "can undo now".
    fn init_undo(&mut self) {
        self.undo.marker = Some(self.snd_una);
        let tlp = (self.tlp_high_seq.is_some() && self.tlp_retrans) as i32;
        self.undo.retrans = match self.rtx.retrans_out as i32 + tlp {
            0 => -1,
            n => n,
        };
    }

    /// `tcp_in_cwnd_reduction`: CWR or Recovery, where PRR sets cwnd.
    pub(crate) fn in_cwnd_reduction(&self) -> bool {
        matches!(self.ca_state, CaState::Cwr | CaState::Recovery)
    }

    /// `tcp_current_ssthresh`.
    pub(crate) fn current_ssthresh(&self) -> u32 {
        if self.in_cwnd_reduction() {
            self.cw.snd_ssthresh
        } else {
            let c = self.cw.snd_cwnd;
            self.cw.snd_ssthresh.max((c >> 1) + (c >> 2))
        }
    }

    /// `tcp_init_cwnd_reduction`.
    pub(crate) fn init_cwnd_reduction(&mut self) {
        self.high_seq = self.snd_nxt;
        self.tlp_high_seq = None;
        self.cw.snd_cwnd_cnt = 0;
        self.undo.prior_cwnd = self.cw.snd_cwnd;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.cw.snd_ssthresh = self.cc.ssthresh(&self.cw);
        self.ecn_queue_cwr();
    }

    /// `tcp_end_cwnd_reduction`: cwnd falls to ssthresh unless the reduction was
    /// undone.
    pub(crate) fn end_cwnd_reduction(&mut self, ctx: &Ctx) {
        if self.cc.has_cong_control() {
            return;
        }
        if self.cw.snd_ssthresh < INFINITE_SSTHRESH
            && (self.ca_state == CaState::Cwr || self.undo.marker.is_some())
        {
            self.cw.snd_cwnd = self.cw.snd_ssthresh.max(1);
            self.snd_cwnd_stamp = ctx.now;
        }
        let ca_ctx = self.ca_ctx(ctx.now);
        self.cc
            .cwnd_event(&mut self.cw, CaEvent::CompleteCwr, &ca_ctx);
    }

    /// `tcp_enter_cwr`: a cwnd reduction without loss recovery (a local drop, as
    /// `__tcp_transmit_skb` on `NET_XMIT_DROP`/`NET_XMIT_CN`), once per window.
    pub(crate) fn enter_cwr(&mut self) {
        self.undo.prior_ssthresh = 0;
        if matches!(self.ca_state, CaState::Open | CaState::Disorder) {
            self.undo.marker = None;
            self.init_cwnd_reduction();
            self.set_ca_state(CaState::Cwr);
        }
    }

    /// `tcp_enter_recovery` + `tcp_init_cwnd_reduction`. With no retransmission out,
    /// the undo and ETIMEDOUT clock restarts at this fast retransmit
    /// (`tcp_retrans_stamp_cleanup`, Linux 6.12+); an ACK that echoes congestion
    /// (`ece`) leaves nothing to undo (`prior_ssthresh` 0).
    pub(crate) fn enter_recovery(&mut self, ctx: &mut Ctx, ece: bool) {
        if !self.any_retrans_done() {
            self.undo.retrans_stamp = None;
        }
        ctx.mib.inc(if self.rx_opt.sack_ok {
            Mib::TcpExtTCPSackRecovery
        } else {
            Mib::TcpExtTCPRenoRecovery
        });
        self.undo.prior_ssthresh = 0;
        self.init_undo();
        if !self.in_cwnd_reduction() {
            if !ece {
                self.undo.prior_ssthresh = self.current_ssthresh();
            }
            self.init_cwnd_reduction();
        }
        self.set_ca_state(CaState::Recovery);
    }

    /// RFC 6937 PRR (`tcp_cwnd_reduction`): proportional while the flight exceeds
    /// ssthresh, then packet conservation, one more when snd_una advanced without a
    /// new loss (Linux 5.19's reduction bound, rfc6937bis).
    pub(crate) fn cwnd_reduction(
        &mut self,
        newly_acked_sacked: u32,
        newly_lost: u32,
        snd_una_advanced: bool,
    ) {
        if newly_acked_sacked == 0 {
            return;
        }
        self.prr_delivered += newly_acked_sacked;
        let in_flight = self.packets_in_flight() as i64;
        let ssthresh = self.cw.snd_ssthresh as i64;
        let delta = ssthresh - in_flight;
        let sndcnt = if delta < 0 {
            let dividend =
                ssthresh as u64 * self.prr_delivered as u64 + self.undo.prior_cwnd as u64 - 1;
            (dividend / self.undo.prior_cwnd.max(1) as u64) as i64 - self.prr_out as i64
        } else {
            let sndcnt =
                (self.prr_delivered as i64 - self.prr_out as i64).max(newly_acked_sacked as i64);
            let bonus = (snd_una_advanced && newly_lost == 0) as i64;
            delta.min(sndcnt + bonus)
        };
        // A fast retransmit must be able to go out.
        let sndcnt = sndcnt.max(if self.prr_out == 0 { 1 } else { 0 });
        self.cw.snd_cwnd = (in_flight + sndcnt).max(1) as u32;
    }

    /// `tcp_enter_loss`: on RTO, the head and every unSACKed skb not sent too recently
    /// is lost (`tcp_timeout_mark_lost`); cwnd falls to what is still in flight plus one.
    /// Undo state is kept from the first timeout of an episode, CWR queued for an
    /// ECN peer, and F-RTO armed
    /// ([RFC 5682 section 3.1](https://www.rfc-editor.org/rfc/rfc5682#section-3.1) step 1)
    /// unless a recovery was underway or an MTU probe is out.
    pub(crate) fn enter_loss(&mut self, ctx: &mut Ctx) {
        let new_recovery = self.ca_state < CaState::Recovery;
        // tcp_timeout_mark_lost: a SACKed head means the receiver reneged;
        // tcp_enter_loss marks it (is_sack_reneg) until we recover from this loss.
        let reneg = self.rtx.head_sacked();
        if reneg {
            ctx.mib.inc(Mib::TcpExtTCPSACKReneging);
            self.rtx.clear_sacked();
            self.is_sack_reneg = true;
        } else if !self.rx_opt.sack_ok {
            self.reset_reno_sack();
        }
        // tcp_timeout_mark_lost: without reneging (which loses all), not what
        // tcp_rack_skb_timeout (reo_wnd 0) says was sent too recently.
        let rack = !reneg;
        let (rtt, now) = (self.rack.rtt_us as u64, ctx.now);
        let lost_retrans = self
            .rtx
            .mark_lost_on_timeout(|tx| rack && (now.saturating_since(tx).as_micros() as u64) < rtt);
        ctx.mib
            .add(Mib::TcpExtTCPLostRetransmit, lost_retrans as u64);
        self.retransmit_hint = self.snd_una;
        if self.ca_state <= CaState::Disorder
            || self.high_seq <= self.snd_una
            || (self.ca_state == CaState::Loss && self.icsk.retransmits == 0)
        {
            self.undo.prior_ssthresh = self.current_ssthresh();
            self.undo.prior_cwnd = self.cw.snd_cwnd;
            self.cw.snd_ssthresh = self.cc.ssthresh(&self.cw);
            let ca_ctx = self.ca_ctx(ctx.now);
            self.cc.cwnd_event(&mut self.cw, CaEvent::Loss, &ca_ctx);
            self.init_undo();
        }
        // What tcp_timeout_mark_lost left in flight (recently sent skbs, a TLP's
        // retransmission), plus one.
        self.cw.snd_cwnd = self.packets_in_flight() + 1;
        self.cw.snd_cwnd_cnt = 0;
        self.snd_cwnd_stamp = ctx.now;
        // "Timeout in disordered state after receiving substantial DUPACKs
        // suggests that the degree of reordering is over-estimated."
        if self.ca_state <= CaState::Disorder && self.sacked_out() >= ctx.cfg.tcp_reordering {
            self.reordering = self.reordering.min(ctx.cfg.tcp_reordering);
        }
        self.high_seq = self.snd_nxt;
        self.tlp_high_seq = None;
        self.set_ca_state(CaState::Loss);
        // tcp_enter_loss: the timeout is a cwnd reduction the peer hears of (CWR on
        // the next new data, RFC 3168).
        self.ecn_queue_cwr();
        // "Disable F-RTO on path MTU probing": not while a probe is out.
        self.frto = ctx.cfg.tcp_frto > 0
            && (new_recovery || self.icsk.retransmits > 0)
            && self.mtup.probe_size == 0;
        self.frto_rexmit_new = false;
    }

    /// `tcp_set_ca_state`: the congestion control hears of every call, a state it
    /// is already in too (an RTO in Loss resets CUBIC and counts as BBR's loss
    /// again), before `icsk_ca_state` changes.
    pub(crate) fn set_ca_state(&mut self, s: CaState) {
        let old = self.ca_state;
        self.cc.set_state(&mut self.cw, old, s);
        self.ca_state = s;
    }
}

#[cfg(test)]
mod prr_tests {
    use crate::config::Config;
    use crate::tcp::Tcb;

    fn tcb() -> Tcb {
        Tcb::for_test(&Config::default())
    }

    /// Sets the scoreboard so that `tcp_packets_in_flight` is `pipe`.
    fn set_pipe(t: &mut Tcb, pipe: u32) {
        t.rtx.packets_out = pipe;
        t.rtx.sacked_out = 0;
        t.rtx.lost_out = 0;
        t.rtx.retrans_out = 0;
    }

    #[test]
    fn prr_proportional_then_reduction_bound() {
        // RFC 6937 section 3: RecoverFS = prior_cwnd = 20, ssthresh = 10.
        let mut t = tcb();
        t.undo.prior_cwnd = 20;
        t.cw.snd_ssthresh = 10;
        // pipe 18 > ssthresh: sndcnt = ceil(prr_delivered * 10 / 20) - prr_out.
        set_pipe(&mut t, 18);
        t.cwnd_reduction(1, 0, false);
        assert_eq!(t.cw.snd_cwnd, 18 + 1); // ceil(1 * 10 / 20) - 0 = 1
        t.prr_out = 1;
        set_pipe(&mut t, 18);
        t.cwnd_reduction(1, 0, false);
        assert_eq!(t.cw.snd_cwnd, 18); // ceil(2 * 10 / 20) - 1 = 0
        t.cwnd_reduction(2, 0, false);
        assert_eq!(t.cw.snd_cwnd, 18 + 1); // ceil(4 * 10 / 20) - 1 = 1
                                           // pipe below ssthresh: sndcnt = min(ssthresh - pipe, max(prr_delivered -
                                           // prr_out, newly delivered) [+ 1 if snd_una advanced and nothing was newly lost]).
        t.prr_delivered = 11;
        t.prr_out = 5;
        set_pipe(&mut t, 8);
        t.cwnd_reduction(1, 0, true);
        // prr_delivered 12: min(10 - 8, max(12 - 5, 1) + 1) = 2.
        assert_eq!(t.cw.snd_cwnd, 10);
        set_pipe(&mut t, 2);
        t.cwnd_reduction(1, 0, true);
        // prr_delivered 13: min(8, max(8, 1) + 1) = 8.
        assert_eq!(t.cw.snd_cwnd, 10);
    }

    #[test]
    fn prr_conservation_without_cumulative_progress() {
        // A SACK (snd_una unchanged) or an ACK that also marked a loss earns no
        // extra segment: one out per one delivered once prr_out caught up.
        let mut t = tcb();
        t.undo.prior_cwnd = 10;
        t.cw.snd_ssthresh = 7;
        t.prr_delivered = 2;
        t.prr_out = 3;
        set_pipe(&mut t, 3);
        t.cwnd_reduction(1, 0, false);
        assert_eq!(t.cw.snd_cwnd, 3 + 1); // min(4, max(3 - 3, 1))
        t.cwnd_reduction(1, 1, true);
        assert_eq!(t.cw.snd_cwnd, 3 + 1); // min(4, max(4 - 3, 1)), a new loss: no bonus
        t.cwnd_reduction(1, 0, true);
        assert_eq!(t.cw.snd_cwnd, 3 + 2 + 1); // min(4, max(5 - 3, 1) + 1)
    }

    #[test]
    fn prr_ignores_acks_that_deliver_nothing() {
        let mut t = tcb();
        t.undo.prior_cwnd = 20;
        t.cw.snd_ssthresh = 10;
        t.cw.snd_cwnd = 17;
        set_pipe(&mut t, 15);
        t.cwnd_reduction(0, 0, false);
        assert_eq!(t.cw.snd_cwnd, 17);
        assert_eq!(t.prr_delivered, 0);
    }
}

#[cfg(test)]
mod syn_undo_tests {
    use crate::config::Config;
    use crate::mib::Mib;
    use crate::tcp::cong::CaState;
    use crate::tcp::{Tcb, TcpState, TestStack};
    use crate::Instant;
    use lowtide_wire::tcp::TcpRepr;

    fn ack_echoing(ecr: Option<u32>) -> TcpRepr {
        let mut th = TcpRepr::default();
        th.options.timestamp = ecr.map(|e| (7, e));
        th
    }

    /// A full socket after `timeouts` SYN timeouts (`tcp_retransmit_timer`'s
    /// `tcp_enter_loss` and `tcp_update_rto_stats`), in `state` with SACK or not.
    fn syn_timed_out(ts: &mut TestStack, state: TcpState, sack: bool, timeouts: u32) -> Tcb {
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        (t.state, t.snd_nxt, t.rx_opt.sack_ok) = (state, 1, sack);
        for _ in 0..timeouts {
            t.syn_timeout_loss(&mut ts.ctx(&cfg, Instant::ZERO, false));
            t.icsk.retransmits += 1;
        }
        t
    }

    /// The ACK of the SYN: `tcp_ack` advances `snd_una` and clears `retrans_stamp`.
    fn syn_acked(ts: &mut TestStack, t: &mut Tcb) {
        t.snd_una = 1;
        t.undo.retrans_stamp = None;
        t.syn_acked_alert(&mut ts.ctx(&Config::default(), Instant::ZERO, false), 0);
    }

    /// `tcp_enter_recovery`: `tcp_retrans_stamp_cleanup` restarts the undo and
    /// ETIMEDOUT clock when no retransmission is out (Linux 6.12+), and an ACK with
    /// ECE leaves `prior_ssthresh` 0 (nothing to undo).
    #[test]
    fn enter_recovery_restarts_the_retransmission_clock_and_honours_ece() {
        let mut ts = TestStack::default();
        let cfg = Config::default();
        let enter = |ts: &mut TestStack, retrans_out: u32, ece: bool| {
            let mut t = Tcb::for_test(&cfg);
            (t.snd_nxt, t.rx_opt.sack_ok) = (10, true);
            t.rtx.retrans_out = retrans_out;
            t.undo.retrans_stamp = Some(Instant::ZERO);
            t.enter_recovery(&mut ts.ctx(&cfg, Instant::ZERO, false), ece);
            assert_eq!(t.ca_state, CaState::Recovery);
            (t.undo.retrans_stamp, t.undo.prior_ssthresh)
        };
        let initial = Tcb::for_test(&cfg).current_ssthresh();
        assert_eq!(enter(&mut ts, 0, false), (None, initial));
        assert_eq!(enter(&mut ts, 1, false), (Some(Instant::ZERO), initial));
        assert_eq!(enter(&mut ts, 0, true), (None, 0));
    }

    /// `tcp_init_undo` (Linux 6.11+): a loss probe's retransmission still out
    /// (`tlp_high_seq` set, `tlp_retrans`) counts in `undo_retrans` beside
    /// `retrans_out`, for fast recovery and RTO alike; a probe of new data does not;
    /// with nothing to count it is -1, never 0. `tcp_enter_loss` clears
    /// `tlp_high_seq` only after.
    #[test]
    fn init_undo_counts_a_loss_probe_retransmission_in_flight() {
        let mut ts = TestStack::default();
        let cfg = Config::default();
        let undo_retrans =
            |ts: &mut TestStack, retrans_out: u32, probe: Option<bool>, rto: bool| {
                let mut t = Tcb::for_test(&cfg);
                (t.snd_nxt, t.rx_opt.sack_ok) = (10, true);
                t.rtx.retrans_out = retrans_out;
                t.tlp_high_seq = probe.map(|_| 10);
                t.tlp_retrans = probe.unwrap_or(false);
                let mut ctx = ts.ctx(&cfg, Instant::ZERO, false);
                if rto {
                    t.enter_loss(&mut ctx);
                    assert_eq!(t.tlp_high_seq, None);
                } else {
                    t.enter_recovery(&mut ctx, false);
                }
                t.undo.retrans
            };
        for rto in [false, true] {
            assert_eq!(undo_retrans(&mut ts, 0, None, rto), -1);
            assert_eq!(undo_retrans(&mut ts, 0, Some(true), rto), 1);
            assert_eq!(undo_retrans(&mut ts, 2, Some(true), rto), 3);
            // A probe of new data is no retransmission.
            assert_eq!(undo_retrans(&mut ts, 0, Some(false), rto), -1);
        }
    }

    #[test]
    fn syn_timeouts_enter_loss_once_and_count_retransmissions() {
        let mut ts = TestStack::default();
        // The first: Loss, cwnd 1 (the SYN is lost, nothing in flight), CUBIC's
        // ssthresh of the initial window (10 * 717 / 1024), undo state from here.
        let t = syn_timed_out(&mut ts, TcpState::SynSent, false, 1);
        assert_eq!(
            (t.ca_state, t.cw.snd_cwnd, t.cw.snd_ssthresh),
            (CaState::Loss, 1, 7)
        );
        assert_eq!((t.undo.marker, t.undo.retrans, t.high_seq), (Some(0), 1, 1));
        assert_eq!((t.undo.prior_cwnd, t.frto), (10, true));
        // Later ones find high_seq past snd_una in Loss: undo state and ssthresh kept.
        let t = syn_timed_out(&mut ts, TcpState::SynSent, false, 3);
        assert_eq!(
            (t.ca_state, t.cw.snd_cwnd, t.cw.snd_ssthresh),
            (CaState::Loss, 1, 7)
        );
        assert_eq!((t.undo.marker, t.undo.retrans), (Some(0), 3));
    }

    #[test]
    fn the_syn_ack_leaves_loss_as_tcp_process_loss() {
        let mut ts = TestStack::default();
        // SYN-SENT with SACK: Open, nothing undone (retrans_stamp is gone).
        let mut t = syn_timed_out(&mut ts, TcpState::SynSent, true, 2);
        syn_acked(&mut ts, &mut t);
        assert_eq!(
            (t.ca_state, t.undo.marker, t.cw.snd_cwnd),
            (CaState::Open, Some(0), 1)
        );
        // NewReno holds Loss until data above high_seq is acknowledged.
        let mut t = syn_timed_out(&mut ts, TcpState::SynSent, false, 1);
        syn_acked(&mut ts, &mut t);
        assert_eq!((t.ca_state, t.undo.marker), (CaState::Loss, Some(0)));
        assert_eq!(ts.mib.get(Mib::TcpExtTCPLossUndo), 0);
        // A simultaneous open's SYN-RECV: no retrans_stamp proves no retransmission
        // (tcp_packet_delayed), so the loss is undone; NewReno (Linux 6.16+) proves
        // nothing so and holds Loss.
        let mut t = syn_timed_out(&mut ts, TcpState::SynRecv, true, 1);
        syn_acked(&mut ts, &mut t);
        assert_eq!(
            (t.ca_state, t.undo.marker, t.cw.snd_cwnd),
            (CaState::Open, None, 10)
        );
        assert_eq!(ts.mib.get(Mib::TcpExtTCPLossUndo), 1);
        let mut t = syn_timed_out(&mut ts, TcpState::SynRecv, false, 1);
        syn_acked(&mut ts, &mut t);
        assert_eq!((t.ca_state, t.undo.marker), (CaState::Loss, Some(0)));
        // Open already (no SYN timeout): nothing to do.
        let mut t = syn_timed_out(&mut ts, TcpState::SynSent, true, 0);
        syn_acked(&mut ts, &mut t);
        assert_eq!((t.ca_state, t.undo.marker), (CaState::Open, None));
    }

    #[test]
    fn spurious_syn_needs_an_echo_of_the_first_syn_timestamp() {
        let first = Instant::from_nanos(5_000_000);
        let setup = |ts_ok: bool| {
            let mut t = Tcb::for_test(&Config::default());
            t.rx_opt.tstamp_ok = ts_ok;
            t.undo.retrans_stamp = Some(first);
            t.syn_timeout_loss(&mut TestStack::default().ctx(&Config::default(), first, false));
            t
        };
        // The echo of the first SYN: the timeout was spurious.
        let mut t = setup(true);
        let ecr = t.tsval(first);
        t.try_undo_spurious_syn(&ack_echoing(Some(ecr)));
        assert_eq!(t.undo.marker, None);
        // An echo of a later SYN, no timestamp, or timestamps not negotiated: kept.
        for (ts_ok, ecr) in [(true, Some(ecr + 1000)), (true, None), (false, Some(ecr))] {
            let mut t = setup(ts_ok);
            t.try_undo_spurious_syn(&ack_echoing(ecr));
            assert_eq!(t.undo.marker, Some(0), "ts_ok {ts_ok} ecr {ecr:?}");
        }
        // No SYN timeout, nothing to undo; no retrans_stamp, nothing to compare.
        let mut t = Tcb::for_test(&Config::default());
        t.rx_opt.tstamp_ok = true;
        t.undo.retrans_stamp = Some(first);
        t.try_undo_spurious_syn(&ack_echoing(Some(ecr)));
        assert_eq!(t.undo.marker, None);
        let mut t = setup(true);
        t.undo.retrans_stamp = None;
        t.try_undo_spurious_syn(&ack_echoing(Some(ecr)));
        assert_eq!(t.undo.marker, Some(0));
    }
}

#[cfg(test)]
mod recovery_undo_tests {
    use super::AckFlags;
    use crate::config::Config;
    use crate::mib::Mib;
    use crate::tcp::cong::CaState;
    use crate::tcp::{Tcb, TestStack};
    use crate::Instant;

    /// `tcp_fastretrans_alert` in Recovery: a D-SACK that accounts for every
    /// retransmission undoes the reduction (`tcp_try_undo_dsack`) and then only
    /// `tcp_try_keep_open` runs: retrans_stamp stays (`tcp_try_to_open` would clear
    /// it with no retransmission left), and an ECE on that ACK changes nothing more.
    #[test]
    fn dsack_undo_in_recovery_keeps_open_only() {
        let cfg = Config::default();
        let mut ts = TestStack::default();
        let stamp = Instant::from_nanos(5_000_000);
        for ece in [false, true] {
            let mut ctx = ts.ctx(&cfg, Instant::from_nanos(9_000_000), false);
            let mut t = Tcb::for_test(&cfg);
            t.rx_opt.sack_ok = true;
            (t.snd_una, t.snd_nxt, t.high_seq) = (1001, 5001, 5001);
            t.ca_state = CaState::Recovery;
            (t.undo.marker, t.undo.retrans) = (Some(1), 0);
            t.undo.retrans_stamp = Some(stamp);
            let mut fl = AckFlags {
                ece,
                ..Default::default()
            };
            t.fastretrans_states(&mut ctx, 1001, 0, &mut fl);
            assert_eq!(t.ca_state, CaState::Open, "ece {ece}");
            assert_eq!(t.undo.retrans_stamp, Some(stamp), "ece {ece}");
            assert_eq!(t.high_seq, 5001);
        }
        assert_eq!(ts.mib.get(Mib::TcpExtTCPDSACKUndo), 2);
    }
}
