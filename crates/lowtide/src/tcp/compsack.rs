//! SACK compression (Linux 4.18+, 5d9f4262b7ea "tcp: add SACK compression";
//! tcp_input.c `__tcp_ack_snd_check`, `tcp_sack_compress_send_ack`,
//! `tcp_sack_new_ofo_skb`; tcp_timer.c `tcp_compressed_ack_kick`): while
//! out-of-order data is held, a receiver sends the first three ACKs for one
//! `rcv_nxt` at once (the sender's duplicate-ACK threshold), then holds further ACKs
//! for 5 % of the RTT, at most `tcp_comp_sack_delay_ns` (1 ms), or until
//! `tcp_comp_sack_nr` (44) are held, or until a SACK block would leave the first
//! two of the ACK. Each ACK not sent counts in `TcpExtTCPAckCompressed`.

use super::consts::TCP_FASTRETRANS_THRESH;
use super::sock::Tcb;
use super::Ctx;
use crate::mib::Mib;
use core::time::Duration;

/// `TCP_SACK_BLOCKS_EXPECTED`: SACK blocks a sender is sure to see (4 fit, 3 with
/// timestamps; "given that SACK packets might be lost, be conservative and use 2").
pub(crate) const TCP_SACK_BLOCKS_EXPECTED: usize = 2;

impl Tcb {
    /// `__tcp_ack_snd_check`'s tail, with out-of-order data held and no reason to
    /// ACK at once: send now, or hold this ACK and arm the compression timer.
    pub(crate) fn ack_or_compress(&mut self, ctx: &mut Ctx) {
        if !self.rx_opt.sack_ok || self.comp_sack.held >= ctx.cfg.tcp_comp_sack_nr as u32 {
            return self.send_ack(ctx);
        }
        let c = &mut self.comp_sack;
        if c.rcv_nxt != self.rcv_nxt {
            c.rcv_nxt = self.rcv_nxt;
            c.dup_acks = 0;
        }
        if c.dup_acks < TCP_FASTRETRANS_THRESH {
            c.dup_acks += 1;
            return self.send_ack(ctx);
        }
        c.held += 1;
        if c.timer_at.is_some() {
            return;
        }
        let delay = self.comp_sack_delay(ctx.cfg.tcp_comp_sack_delay_ns);
        self.comp_sack.timer_at = Some(ctx.now + delay);
    }

    /// The compression timer's delay: 5 % of the receiver's RTT estimate (or of the
    /// smoothed RTT if smaller), at most `max_ns`.
    fn comp_sack_delay(&self, max_ns: u64) -> Duration {
        let mut rtt_us = (self.rcv_rtt.rtt_us8 >> 3) as u64;
        if self.rtt.srtt_us > 0 && (self.rtt.srtt_us as u64) < rtt_us {
            rtt_us = self.rtt.srtt_us as u64;
        }
        // rtt * (NSEC_PER_USEC >> 3) / 20 on the x8-scaled RTT: 5 % in ns.
        Duration::from_nanos((rtt_us * 8 * 125 / 20).min(max_ns))
    }

    /// `tcp_sack_compress_send_ack`: a SACK block is about to move past the first
    /// two, so the ACKs held go out now, as one.
    pub(crate) fn sack_compress_send_ack(&mut self, ctx: &mut Ctx) {
        if self.comp_sack.held == 0 {
            return;
        }
        self.comp_sack.timer_at = None;
        ctx.mib
            .add(Mib::TcpExtTCPAckCompressed, self.comp_sack.held as u64 - 1);
        self.comp_sack.held = 0;
        self.send_ack(ctx);
    }

    /// `tcp_compressed_ack_kick`: the timer sends one ACK for those held.
    pub(crate) fn comp_sack_timer(&mut self, ctx: &mut Ctx) {
        self.comp_sack.timer_at = None;
        if self.comp_sack.held > 0 {
            self.comp_sack.held -= 1;
            self.send_ack(ctx);
        }
    }

    /// `tcp_event_ack_sent`'s part: an ACK went out, so none is held any more.
    pub(crate) fn comp_sack_ack_sent(&mut self, mib: &mut crate::mib::Counters) {
        if self.comp_sack.held > 0 {
            mib.add(Mib::TcpExtTCPAckCompressed, self.comp_sack.held as u64);
            self.comp_sack.held = 0;
            self.comp_sack.timer_at = None;
        }
    }
}
