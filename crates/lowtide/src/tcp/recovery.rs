//! Loss recovery: SACK processing (`tcp_sacktag_write_queue`), RFC 6675 loss marking,
//! `tcp_fastretrans_alert`, PRR (RFC 6937), NewReno without SACK (RFC 6582), and the
//! RTO's `tcp_enter_loss`.

use super::cong::{CaEvent, CaState};
use super::skb::LOST;
use super::sock::Tcb;
use super::Ctx;
use crate::mib::Mib;
use lowtide_wire::tcp::TcpRepr;

/// What SACK processing of one ACK found.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SackResult {
    /// Segments newly SACKed.
    pub newly_sacked: u32,
    /// The first block was a D-SACK.
    pub dsack: bool,
    /// Send time of the newest newly SACKed never-retransmitted skb (RTT sample).
    pub last_tx: Option<crate::time::Instant>,
    /// The most recently sent skb newly SACKed, for the rate sample.
    pub rate: Option<super::rate::DeliveredSkb>,
}

impl Tcb {
    /// `tcp_sacktag_write_queue`: validates the ACK's SACK blocks, detects a D-SACK
    /// (RFC 2883 section 4) and tags the retransmit queue.
    pub(crate) fn sacktag(&mut self, ctx: &mut Ctx, th: &TcpRepr, ack: u64) -> SackResult {
        let mut r = SackResult::default();
        let blocks = th.options.sack_blocks();
        if !self.sack_ok || blocks.is_empty() {
            return r;
        }
        let mss = self.mss_cache;
        let mut valid = [(0u64, 0u64); super::rtx_queue::TCP_NUM_SACKS];
        let mut n = 0;
        for (i, b) in blocks.iter().enumerate() {
            let start = self.snd_off(lowtide_wire_seq(b.start));
            let end = self.snd_off(lowtide_wire_seq(b.end));
            if start >= end || end - start > u32::MAX as u64 / 2 {
                ctx.mib.inc(Mib::TcpExtTCPSACKDiscard);
                continue;
            }
            // D-SACK: first block below the ACK, or inside the second block.
            let is_dsack = i == 0
                && (start < ack
                    || blocks.get(1).is_some_and(|b2| {
                        let s2 = self.snd_off(lowtide_wire_seq(b2.start));
                        let e2 = self.snd_off(lowtide_wire_seq(b2.end));
                        start >= s2 && end <= e2
                    }));
            if is_dsack {
                r.dsack = true;
                ctx.mib.inc(Mib::TcpExtTCPDSACKRecv);
                continue;
            }
            if start < self.snd_una || end > self.snd_nxt || n == valid.len() {
                ctx.mib.inc(Mib::TcpExtTCPSACKDiscard);
                continue;
            }
            valid[n] = (start, end);
            n += 1;
        }
        self.rtx.set_sndbuf(self.sndbuf);
        let t = self.rtx.sacktag_blocks(&valid[..n], mss);
        r.newly_sacked = t.segs;
        r.last_tx = t.last_tx;
        r.rate = t.rate;
        ctx.mib.add(Mib::TcpExtTCPSackShifted, t.shifted as u64);
        ctx.mib.add(Mib::TcpExtTCPSackMerged, t.merged as u64);
        r
    }

    /// RFC 6675 `IsLost` over the scoreboard; resets the retransmit hint below any
    /// newly lost skb.
    fn mark_lost(&mut self) {
        if self.sack_ok {
            let thresh = (self.reordering.saturating_sub(1) as u64) * self.mss_cache as u64;
            let from = self.lost_hint.max(self.snd_una);
            let (hint, first) = self.rtx.mark_lost_sacked_above(from, thresh);
            self.lost_hint = hint;
            if let Some(f) = first {
                self.retransmit_hint = self.retransmit_hint.min(f);
            }
        } else if self.reno_dupacks >= self.reordering {
            self.mark_head_lost();
        }
    }

    /// NewReno: the head segment is lost (`tcp_mark_head_lost` with one packet).
    fn mark_head_lost(&mut self) {
        let mss = self.mss_cache;
        let Some(head) = self.rtx.first() else { return };
        let (seq, pcount, lost) = (head.seq, head.pcount, head.has(LOST));
        if lost {
            return;
        }
        if pcount > 1 {
            self.rtx.split_at(seq + mss as u64, mss);
        }
        self.rtx.update(seq, LOST, 0);
        self.retransmit_hint = self.retransmit_hint.min(seq);
    }

    /// `tcp_fastretrans_alert` with PRR: the recovery state machine, run on every ACK
    /// that is "dubious" or while not Open.
    pub(crate) fn fastretrans_alert(
        &mut self,
        ctx: &mut Ctx,
        newly_acked_sacked: u32,
        is_dupack: bool,
    ) {
        if !self.sack_ok && is_dupack {
            // tcp_add_reno_sack: count duplicate ACKs as SACKed segments.
            self.reno_dupacks =
                (self.reno_dupacks + 1).min(self.rtx.packets_out.saturating_sub(1).max(1));
        }
        self.try_end_recovery(ctx);
        self.mark_lost();
        match self.ca_state {
            CaState::Open | CaState::Disorder => {
                if self.rtx.lost_out > 0 {
                    self.enter_recovery(ctx);
                } else if self.rtx.sacked_out > 0 || self.reno_dupacks > 0 {
                    self.set_ca_state(CaState::Disorder);
                } else {
                    self.set_ca_state(CaState::Open);
                }
            }
            _ => {}
        }
        // With its own cong_control (BBR) the congestion control sets cwnd in
        // recovery too (Linux runs PRR only without one).
        if self.ca_state == CaState::Recovery && !self.cc.has_cong_control() {
            self.cwnd_reduction(newly_acked_sacked);
        }
    }

    /// Leaves Recovery or Loss once everything sent before it is acknowledged
    /// (`tcp_try_undo_recovery`/`tcp_end_cwnd_reduction` without undo).
    fn try_end_recovery(&mut self, ctx: &mut Ctx) {
        if self.snd_una < self.high_seq {
            if self.ca_state == CaState::Recovery && !self.sack_ok {
                // NewReno partial ACK (RFC 6582 section 3.2 step 3): the next hole is lost.
                self.mark_head_lost();
            }
            return;
        }
        match self.ca_state {
            // tcp_end_cwnd_reduction: not with a cong_control of its own.
            CaState::Recovery | CaState::Cwr if self.cc.has_cong_control() => {
                self.set_ca_state(CaState::Open);
            }
            CaState::Recovery | CaState::Cwr => {
                self.cw.snd_cwnd = self.cw.snd_ssthresh.max(1);
                let ca_ctx = self.ca_ctx(ctx.now);
                self.cc
                    .cwnd_event(&mut self.cw, CaEvent::CompleteCwr, &ca_ctx);
                self.set_ca_state(CaState::Open);
            }
            CaState::Loss => self.set_ca_state(CaState::Open),
            _ => return,
        }
        self.reno_dupacks = 0;
        let _ = ctx;
    }

    /// `tcp_enter_recovery` + `tcp_init_cwnd_reduction`.
    fn enter_recovery(&mut self, ctx: &mut Ctx) {
        ctx.mib.inc(if self.sack_ok {
            Mib::TcpExtTCPSackRecovery
        } else {
            Mib::TcpExtTCPRenoRecovery
        });
        self.high_seq = self.snd_nxt;
        self.prior_cwnd = self.cw.snd_cwnd;
        self.cw.snd_ssthresh = self.cc.ssthresh(&self.cw);
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.set_ca_state(CaState::Recovery);
    }

    /// RFC 6937 PRR (`tcp_cwnd_reduction`), with the slow-start reduction bound.
    fn cwnd_reduction(&mut self, newly_acked_sacked: u32) {
        if newly_acked_sacked == 0 {
            return;
        }
        self.prr_delivered += newly_acked_sacked;
        let in_flight = self.packets_in_flight() as i64;
        let ssthresh = self.cw.snd_ssthresh as i64;
        let delta = ssthresh - in_flight;
        let sndcnt = if delta < 0 {
            let dividend = ssthresh as u64 * self.prr_delivered as u64 + self.prior_cwnd as u64 - 1;
            (dividend / self.prior_cwnd.max(1) as u64) as i64 - self.prr_out as i64
        } else {
            let ssrb = (self.prr_delivered as i64 - self.prr_out as i64)
                .max(newly_acked_sacked as i64)
                + 1;
            delta.min(ssrb)
        };
        // A fast retransmit must be able to go out.
        let sndcnt = sndcnt.max(if self.prr_out == 0 { 1 } else { 0 });
        self.cw.snd_cwnd = (in_flight + sndcnt).max(1) as u32;
    }

    /// `tcp_enter_loss`: on RTO, every unSACKed skb is lost; cwnd falls to one segment.
    pub(crate) fn enter_loss(&mut self, ctx: &mut Ctx) {
        if self.ca_state < CaState::Loss || self.high_seq <= self.snd_una {
            self.prior_cwnd = self.cw.snd_cwnd;
            self.cw.snd_ssthresh = self.cc.ssthresh(&self.cw);
            let ca_ctx = self.ca_ctx(ctx.now);
            self.cc.cwnd_event(&mut self.cw, CaEvent::Loss, &ca_ctx);
        }
        self.cw.snd_cwnd = 1;
        self.cw.snd_cwnd_cnt = 0;
        self.rtx.mark_all_lost();
        self.lost_hint = self.snd_una;
        self.retransmit_hint = self.snd_una;
        self.high_seq = self.snd_nxt;
        self.reno_dupacks = 0;
        self.set_ca_state(CaState::Loss);
        let _ = ctx;
    }

    /// `tcp_set_ca_state`.
    pub(crate) fn set_ca_state(&mut self, s: CaState) {
        if self.ca_state != s {
            self.cc.set_state(&mut self.cw, s);
            self.ca_state = s;
        }
    }
}

fn lowtide_wire_seq(x: u32) -> super::seq::Seq {
    super::seq::Seq(x)
}
