//! Tail loss probes
//! ([RFC 8985 section 7](https://www.rfc-editor.org/rfc/rfc8985#section-7); Linux
//! tcp_output.c `tcp_schedule_loss_probe`, `tcp_send_loss_probe`, tcp_input.c
//! `tcp_process_tlp_ack`): when the tail of a flight is lost no ACK comes back to trigger
//! RACK, so about two RTTs after the last send, one segment (new data, else the last one
//! again) is sent to draw an ACK (with SACK) that lets RACK repair the loss instead of an
//! RTO.

use super::cong::CaState;
use super::consts::TCP_TIMEOUT_INIT;
use super::sock::{Pending, Tcb};
use super::Ctx;
use crate::mib::Mib;
use crate::socket::TxRetrans;
use core::time::Duration;

impl Tcb {
    /// `tcp_schedule_loss_probe`: arms the probe timeout (PTO) instead of the RTO
    /// for SACK flows in Open or CWR state with data outstanding. PTO = 2 * SRTT plus
    /// `TCP_TIMEOUT_MIN` (2 ms), or plus the minimum RTO when one packet is out (the
    /// peer may delay its ACK); never later than the RTO would fire.
    pub(crate) fn schedule_loss_probe(&mut self, ctx: &Ctx, advancing_rto: bool) -> bool {
        let er = ctx.cfg.tcp_early_retrans;
        if !(er == 3 || er == 4)
            || self.rtx.packets_out == 0
            || !self.rx_opt.sack_ok
            || !self.state.is_synchronized()
            || self.tfo.rsk.is_some()
            || !matches!(self.ca_state, CaState::Open | CaState::Cwr)
        {
            return false;
        }
        let mut timeout = if self.rtt.srtt_us > 0 {
            let extra = if self.rtx.packets_out == 1 {
                self.rto_min()
            } else {
                super::consts::TCP_TIMEOUT_MIN
            };
            Duration::from_micros(2 * self.rtt.srtt_us as u64) + extra
        } else {
            TCP_TIMEOUT_INIT
        };
        let rto_delta_us = if advancing_rto {
            self.rto_backed_off().as_micros() as i64
        } else {
            self.rto_delta_us(ctx)
        };
        if rto_delta_us > 0 {
            timeout = timeout.min(Duration::from_micros(rto_delta_us as u64));
        }
        self.icsk.pending = Some((Pending::LossProbe, ctx.now + timeout));
        true
    }

    /// `tcp_set_xmit_timer`: the loss probe if it applies, else the RTO.
    pub(crate) fn set_xmit_timer(&mut self, ctx: &Ctx) {
        if !self.schedule_loss_probe(ctx, true) {
            self.rearm_rto(ctx);
        }
    }

    /// `tcp_rto_delta_us`: time left until the RTO of the head skb.
    pub(crate) fn rto_delta_us(&self, ctx: &Ctx) -> i64 {
        let rto = self.rto_backed_off().as_micros() as i64;
        match self.rtx.first() {
            Some(h) => rto - ctx.now.saturating_since(h.tx_time).as_micros() as i64,
            None => rto,
        }
    }

    /// `tcp_send_loss_probe`: at most one probe per tail: new data if the window
    /// allows, else the last segment again; then the RTO is rearmed.
    pub(crate) fn send_loss_probe(&mut self, ctx: &mut Ctx) {
        if self.tlp_high_seq.is_none() && self.loss_probe_xmit(ctx) {
            self.tlp_high_seq = Some(self.snd_nxt);
            ctx.mib.inc(Mib::TcpExtTCPLossProbes);
            self.icsk.pending = None;
        }
        self.rearm_rto(ctx);
    }

    /// Sends the probe; true if something went out.
    fn loss_probe_xmit(&mut self, ctx: &mut Ctx) -> bool {
        self.tlp_retrans = false;
        let mss = self.current_mss();
        if let Some(head) = self.write_queue.front() {
            // tcp_write_xmit with push_one = 2 if the head's first segment fits the
            // window (tcp_snd_wnd_test): one segment, even past cwnd; a bare FIN
            // skb is one too; an empty skb (end_seq == seq) is not sent, and then
            // no old segment goes instead.
            let (seq, len, end_seq) = (head.seq, head.data.len() as u64, head.end_seq());
            if self.snd_wnd_test(seq, len, end_seq, mss) {
                // tcp_write_xmit: tcp_grow_skb with the forced quota of one
                // segment, then tcp_snd_wnd_test again on what it grew to.
                self.grow_skb(ctx.cfg, mss as u64);
                let head = self.write_queue.front().expect("still there");
                let (len, end_seq) = (head.data.len() as u64, head.end_seq());
                if end_seq == seq || !self.snd_wnd_test(seq, len, end_seq, mss) {
                    return false;
                }
                let n = head.data.len().min(mss as usize);
                self.send_new(ctx, n, mss);
                return true;
            }
        }
        let Some(last) = self.rtx.last() else {
            return false;
        };
        let (seq, pcount, len) = (last.seq, last.pcount, last.len() as u64);
        let seq = if pcount > 1 && len > (pcount as u64 - 1) * mss as u64 {
            let at = seq + (pcount as u64 - 1) * mss as u64;
            self.rtx.split_at(at, mss);
            at
        } else {
            seq
        };
        // __tcp_retransmit_skb with one segment: not counted in retrans_out nor as
        // a recovery retransmission; outside the window nothing goes.
        let Some((sent, _, _)) = self.retransmit_skb_once(ctx, seq, 1) else {
            return false;
        };
        if let Some(token) = self.tx_token_mut(ctx, sent) {
            token.rtx = TxRetrans::LossProbe;
        }
        self.tlp_retrans = true;
        true
    }

    /// `tcp_process_tlp_ack`: did the probe repair a loss? If the ACK covers the
    /// probe and more, the original was lost: reduce cwnd once (CWR) and count
    /// `TCPLossProbeRecovery`. A D-SACK of the probe or a pure duplicate ACK means
    /// both arrived: no loss.
    pub(crate) fn process_tlp_ack(
        &mut self,
        ctx: &mut Ctx,
        ack: u64,
        fl: &super::fastretrans::AckFlags,
    ) {
        let Some(high) = self.tlp_high_seq else {
            return;
        };
        if ack < high {
            return;
        }
        if !self.tlp_retrans || fl.dsack_tlp {
            self.tlp_high_seq = None;
        } else if ack > high {
            self.init_cwnd_reduction();
            self.set_ca_state(CaState::Cwr);
            self.end_cwnd_reduction(ctx);
            self.try_keep_open();
            ctx.mib.inc(Mib::TcpExtTCPLossProbeRecovery);
        } else if !(fl.snd_una_advanced || fl.not_dup || fl.data_sacked) {
            self.tlp_high_seq = None;
        }
    }
}
