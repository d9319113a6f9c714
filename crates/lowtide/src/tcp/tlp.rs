//! Tail loss probes
//! ([RFC 8985 section 7](https://www.rfc-editor.org/rfc/rfc8985#section-7); Linux
//! tcp_output.c `tcp_schedule_loss_probe`, `tcp_send_loss_probe`, tcp_input.c
//! `tcp_process_tlp_ack`): when the tail of a flight is lost no ACK comes back to trigger
//! RACK, so about two RTTs after the last send, one segment (new data, else the last one
//! again) is sent to draw an ACK (with SACK) that lets RACK repair the loss instead of an
//! RTO.

use super::cong::CaState;
use super::consts::TCP_TIMEOUT_INIT;
use super::nagle::TCP_NAGLE_OFF;
use super::sock::{Pending, Tcb};
use super::Ctx;
use crate::mib::Mib;
use crate::socket::TxRetrans;
use core::time::Duration;

/// What [`Tcb::loss_probe_xmit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// A segment went: new data or the last one again.
    Sent,
    /// Nothing went (held, or refused): the RTO is rearmed.
    NotSent,
    /// Nothing is in flight to probe (Linux's "invalid inflight" warning).
    NothingOut,
}

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
        self.reset_xmit_timer_paced(ctx.now, Pending::LossProbe, timeout);
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

    /// `tcp_send_loss_probe`: at most one probe per tail (`tlp_high_seq`): new
    /// data if the send head's first segment fits the peer's window, else the
    /// last skb's last segment again; a probe sent counts `TCPLossProbes` and
    /// records `snd_nxt`; then the RTO is rearmed (from now after a probe).
    pub(crate) fn send_loss_probe(&mut self, ctx: &mut Ctx) {
        if self.tlp_high_seq.is_none() {
            match self.loss_probe_xmit(ctx) {
                Probe::Sent => {
                    self.tlp_high_seq = Some(self.snd_nxt);
                    ctx.mib.inc(Mib::TcpExtTCPLossProbes);
                    self.icsk.pending = None;
                }
                Probe::NotSent => {}
                // "invalid inflight": nothing to probe, no timer either.
                Probe::NothingOut => {
                    self.icsk.pending = None;
                    return;
                }
            }
        }
        self.rearm_rto(ctx);
    }

    /// Sends the probe.
    fn loss_probe_xmit(&mut self, ctx: &mut Ctx) -> Probe {
        self.tlp_retrans = false;
        self.sync_dst_mtu(ctx); // tcp_current_mss
        let mss = self.current_mss(ctx.cfg, ctx.now);
        if let Some(head) = self.write_queue.front() {
            let (seq, len, end_seq) = (head.seq, head.data.len() as u64, head.end_seq());
            if self.snd_wnd_test(seq, len, end_seq, mss) {
                // tcp_write_xmit(sk, mss, TCP_NAGLE_OFF, 2): one TSO packet of up
                // to cwnd's quota (one segment when cwnd is full), not deferred,
                // not Nagle's nor a cork's to hold, but pacing and TCP Small
                // Queues still may; "if (tp->packets_out > pcount)" it was sent,
                // else no old segment goes instead.
                let prior_nxt = self.snd_nxt;
                let prior = self.push_nonagle.replace(TCP_NAGLE_OFF);
                self.tcp_write_xmit(ctx, 2);
                self.push_nonagle = prior;
                return match self.snd_nxt > prior_nxt {
                    true => Probe::Sent,
                    false => Probe::NotSent,
                };
            }
        }
        let Some(last) = self.rtx.last() else {
            return Probe::NothingOut;
        };
        let (seq, pcount, len) = (last.seq, last.pcount, last.len() as u64);
        // The last skb is still in the host's queue: no probe (the RTO is rearmed
        // from the head's transmission, `tcp_rearm_rto`).
        if self.still_in_host_queue(ctx, seq) {
            return Probe::NotSent;
        }
        // The last segment only: split off at (pcount - 1) * mss (tcp_fragment).
        let seq = if pcount > 1 && len > (pcount as u64 - 1) * mss as u64 {
            let at = seq + (pcount as u64 - 1) * mss as u64;
            self.wmem_queued += self.rtx.split_at(at, mss);
            at
        } else {
            seq
        };
        // __tcp_retransmit_skb with one segment: not counted in retrans_out nor as
        // a recovery retransmission; outside the window nothing goes.
        let Some((sent, _, _)) = self.retransmit_skb_once(ctx, seq, 1) else {
            return Probe::NotSent;
        };
        if let Some(token) = self.tx_token_mut(ctx, sent) {
            token.rtx = TxRetrans::LossProbe;
        }
        self.tlp_retrans = true;
        Probe::Sent
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::rtx::skb::{Skb, WriteSkb};
    use crate::tcp::{TcpState, TestStack};
    use crate::time::Instant;

    const NOW: Instant = Instant(1_000_000_000);

    /// Established with SACK, MSS 1000, a 1 MB peer window, a 64 KB TSO goal,
    /// cwnd `cwnd`, the skbs `out` (lengths, in segments of 1000) in flight from
    /// seq 1, a write queue of one skb of `queued` bytes, and the probe timer due.
    fn probing(cwnd: u32, out: &[u32], queued: usize) -> Tcb {
        let mut t = Tcb::for_test(&Config::default());
        t.state = TcpState::Established;
        t.rx_opt.sack_ok = true;
        t.mss_cache = 1000;
        t.cw.snd_cwnd = cwnd;
        t.snd_wnd = 1 << 20;
        t.pace.pacing_rate = 1 << 30;
        let mut seq = 1;
        for &segs in out {
            let len = segs as usize * 1000;
            t.rtx
                .push(Skb::sent_for_test(seq, len, segs, Instant::ZERO));
            seq += len as u64;
        }
        (t.snd_una, t.snd_nxt) = (1, seq);
        if queued > 0 {
            t.write_queue.push_back(WriteSkb::copied(
                seq,
                bytes::BytesMut::from(&vec![7u8; queued][..]).into(),
                0,
            ));
        }
        t.write_seq = seq + queued as u64;
        t.icsk.pending = Some((Pending::LossProbe, NOW));
        t
    }

    /// Fires the probe; returns the lengths of the packets sent.
    fn fire(t: &mut Tcb, st: &mut TestStack) -> Vec<u32> {
        let cfg = Config::default();
        t.send_loss_probe(&mut st.ctx(&cfg, NOW, false));
        st.out.iter().map(|tx| tx.token.len).collect()
    }

    #[test]
    fn new_data_goes_as_one_packet_of_cwnds_quota_or_one_segment_past_it() {
        // tcp_write_xmit(push_one = 2): cwnd_quota = tcp_cwnd_test (at most half
        // of cwnd), min max_segs, as one TSO packet (tcp_mss_split_point); with
        // cwnd full, cwnd_quota = 1: one segment all the same.
        for (cwnd, want) in [(10, 4_000), (6, 1_000)] {
            let mut st = TestStack::default();
            let mut t = probing(cwnd, &[1; 6], 6_000);
            assert_eq!(fire(&mut t, &mut st), [want], "cwnd {cwnd}");
            assert_eq!(t.snd_nxt, 6_001 + want as u64);
            assert_eq!(t.tlp_high_seq, Some(t.snd_nxt));
            assert!(!t.tlp_retrans);
            assert_eq!(st.mib.get(Mib::TcpExtTCPLossProbes), 1);
            // No loss probe scheduled for the probe itself: the RTO, from now.
            assert!(matches!(t.icsk.pending, Some((Pending::Retrans, _))));
        }
    }

    #[test]
    fn new_data_ignores_nagle_and_cork() {
        // TCP_NAGLE_OFF: a partial segment that a cork (or Minshall) holds goes.
        let mut st = TestStack::default();
        let mut t = probing(10, &[1], 500);
        t.cork = true;
        assert_eq!(fire(&mut t, &mut st), [500]);
        assert_eq!(st.mib.get(Mib::TcpExtTCPLossProbes), 1);
    }

    #[test]
    fn pacing_holds_the_new_data_and_then_there_is_no_probe() {
        // tcp_pacing_check stops tcp_write_xmit: packets_out did not grow, so
        // goto rearm_timer (no TCPLossProbes, no tlp_high_seq, no old segment).
        let mut st = TestStack::default();
        let mut t = probing(10, &[1; 6], 6_000);
        t.pace.pacing_needed = true;
        t.pace.wstamp = NOW + core::time::Duration::from_millis(1);
        assert!(fire(&mut t, &mut st).is_empty());
        assert!(t.pace.pacing_timer, "the pacing timer sends it later");
        assert_eq!(t.tlp_high_seq, None);
        assert_eq!(st.mib.get(Mib::TcpExtTCPLossProbes), 0);
        assert!(matches!(t.icsk.pending, Some((Pending::Retrans, _))));
    }

    #[test]
    fn the_rto_rearmed_behind_a_held_probe_waits_out_the_pacing_delay() {
        // tcp_send_loss_probe's rearm_timer: tcp_rearm_rto from the head's send
        // time (tcp_rto_delta_us: 1178 - 1000 ms) plus tcp_pacing_delay, whole
        // jiffies (tcp_reset_xmit_timer's pace_delay): no RTO while pacing holds
        // the data (wstamp 217.6 ms ahead).
        let mut st = TestStack::default();
        let mut t = probing(10, &[1; 6], 6_000);
        t.pace.pacing_needed = true;
        t.icsk.rto = Duration::from_millis(1_178);
        t.pace.wstamp = NOW + Duration::from_micros(217_600);
        assert!(fire(&mut t, &mut st).is_empty());
        let at = NOW + Duration::from_millis(178 + 217);
        assert_eq!(t.icsk.pending, Some((Pending::Retrans, at)));
    }

    #[test]
    fn the_probe_timeout_waits_out_the_pacing_delay_up_to_rto_max() {
        // tcp_schedule_loss_probe: 2 * srtt + TCP_TIMEOUT_MIN, then
        // tcp_reset_xmit_timer(.., true): plus the pacing delay, at most
        // tcp_rto_max (inet_csk_reset_xmit_timer).
        let cfg = Config::default();
        for (ahead_us, want) in [(0, 22), (5_900, 27), (500_000_000, 120_000)] {
            let mut st = TestStack::default();
            let mut t = probing(10, &[1; 6], 0);
            t.rtt.srtt_us = 10_000;
            t.icsk.rto = Duration::from_millis(210);
            t.pace.wstamp = NOW + Duration::from_micros(ahead_us);
            assert!(t.schedule_loss_probe(&st.ctx(&cfg, NOW, false), true));
            let at = NOW + Duration::from_millis(want);
            assert_eq!(t.icsk.pending, Some((Pending::LossProbe, at)), "{ahead_us}");
        }
    }

    #[test]
    fn without_room_in_the_window_the_last_segment_goes_again() {
        // The send head's first segment is past snd_una + snd_wnd: the last skb
        // (3 segments) is split at (pcount - 1) * mss and its last segment sent.
        let mut st = TestStack::default();
        let mut t = probing(10, &[1, 3], 2_000);
        t.snd_wnd = 4_000;
        assert_eq!(fire(&mut t, &mut st), [1_000]);
        assert_eq!(st.out[0].token.seq, 3_001);
        assert!(t.tlp_retrans);
        assert_eq!(t.tlp_high_seq, Some(4_001));
        assert_eq!(st.mib.get(Mib::TcpExtTCPLossProbes), 1);
        // At most one probe per tail: the next timeout only rearms the RTO.
        st.out.clear();
        t.icsk.pending = Some((Pending::LossProbe, NOW));
        assert!(fire(&mut t, &mut st).is_empty());
        assert_eq!(st.mib.get(Mib::TcpExtTCPLossProbes), 1);
    }

    #[test]
    fn nothing_in_flight_clears_the_timer() {
        // "invalid inflight": icsk_pending = 0 and return, no RTO.
        let mut st = TestStack::default();
        let mut t = probing(10, &[], 0);
        assert!(fire(&mut t, &mut st).is_empty());
        assert_eq!(t.icsk.pending, None);
    }
}
