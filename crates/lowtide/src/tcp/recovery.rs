//! RACK loss detection
//! ([RFC 8985 section 6](https://www.rfc-editor.org/rfc/rfc8985#section-6); Linux
//! tcp_recovery.c): a packet is lost once a packet sent after it was delivered and more
//! than RTT plus a reordering window has passed since it was sent. Time, not sequence
//! distance, so it applies to retransmissions and tail losses alike and tolerates
//! reordering by waiting.

use super::cong::CaState;
use super::consts::{TCP_RACK_RECOVERY_THRESH, TCP_TIMEOUT_MIN};
use super::rtx::tsorted::sent_after;
use super::rtx::{Delivered, RackLoss};
use super::sock::{Pending, Tcb};
use super::Ctx;
use crate::config::{TCP_RACK_NO_DUPTHRESH, TCP_RACK_STATIC_REO_WND};
use crate::mib::Mib;
use crate::time::Instant;
use core::time::Duration;

impl Tcb {
    /// `tcp_rack_advance`
    /// ([RFC 8985 section 6.2](https://www.rfc-editor.org/rfc/rfc8985#section-6.2) step 2)
    /// for what one ACK delivered: the most recently sent skb becomes the reference,
    /// and RACK.rtt is the RTT of the last skb taken (Linux sets `rack.rtt_us` on
    /// every call, before it compares send times), not necessarily the reference's.
    pub(crate) fn rack_advance(&mut self, now: Instant, d: &Delivered) {
        let Some((tx, end)) = d.rack else { return };
        self.rack.advanced = true;
        let rtt_tx = d.rack_rtt_tx.unwrap_or(tx);
        self.rack.rtt_us = now.saturating_since(rtt_tx).as_micros() as u32;
        if sent_after(tx, end, self.rack.mstamp, self.rack.end_seq) {
            self.rack.mstamp = tx;
            self.rack.end_seq = end;
        }
    }

    /// `tcp_rack_reo_wnd`
    /// ([RFC 8985 section 6.2](https://www.rfc-editor.org/rfc/rfc8985#section-6.2) step 4),
    /// in microseconds: 0 while no reordering was seen and in recovery, or once
    /// `reordering` segments are SACKed (the dupthresh shortcut); else `min_rtt/4 * steps`,
    /// at most SRTT.
    pub(crate) fn rack_reo_wnd(&self, ctx: &Ctx) -> u32 {
        if self.reord_seen == 0 {
            if self.ca_state >= CaState::Recovery {
                return 0;
            }
            if self.sacked_out() >= self.reordering
                && ctx.cfg.tcp_recovery & TCP_RACK_NO_DUPTHRESH == 0
            {
                return 0;
            }
        }
        (self.rtt.min_rtt_us >> 2)
            .saturating_mul(self.rack.reo_wnd_steps)
            .min(self.rtt.srtt_us)
    }

    /// `tcp_rack_detect_loss`: marks lost what RACK says is lost.
    fn rack_detect_loss(&mut self, ctx: &mut Ctx) -> RackLoss {
        let reo_wnd = self.rack_reo_wnd(ctx) as i64;
        let rtt = self.rack.rtt_us as i64;
        let now = ctx.now;
        let (mstamp, end_seq) = (self.rack.mstamp, self.rack.end_seq);
        let r = self.rtx.rack_detect_loss(mstamp, end_seq, |tx| {
            rtt + reo_wnd - now.saturating_since(tx).as_micros() as i64
        });
        ctx.mib
            .add(Mib::TcpExtTCPLostRetransmit, r.lost_retrans as u64);
        if let Some(f) = r.first {
            self.retransmit_hint = self.retransmit_hint.min(f);
        }
        r
    }

    /// `tcp_rack_mark_lost`: scans only if the reference moved; arms the reorder
    /// timer (`ICSK_TIME_REO_TIMEOUT`) for skbs not lost yet but that will be once
    /// the window passes. Returns true if the timer was armed.
    pub(crate) fn rack_mark_lost(&mut self, ctx: &mut Ctx) -> bool {
        if !self.rack.advanced {
            return false;
        }
        self.rack.advanced = false;
        let r = self.rack_detect_loss(ctx);
        if r.reo_timeout_us == 0 {
            return false;
        }
        let t =
            (Duration::from_micros(r.reo_timeout_us) + TCP_TIMEOUT_MIN).min(self.rto_backed_off());
        self.icsk.pending = Some((Pending::ReoTimeout, ctx.now + t));
        true
    }

    /// `tcp_rack_reo_timeout`: the reorder timer fired; what is lost now starts or
    /// continues recovery and is retransmitted.
    pub(crate) fn rack_reo_timeout(&mut self, ctx: &mut Ctx) {
        let prior_inflight = self.packets_in_flight();
        let prior_lost = self.rtx.lost;
        self.rack_detect_loss(ctx);
        if prior_inflight != self.packets_in_flight() {
            if self.ca_state != CaState::Recovery {
                self.enter_recovery(ctx, false);
                if !self.cc.has_cong_control() {
                    let newly_lost = (self.rtx.lost - prior_lost) as u32;
                    self.cwnd_reduction(1, newly_lost, false);
                }
            }
            self.xmit_retransmit_queue(ctx);
        }
        if !matches!(self.icsk.pending, Some((Pending::Retrans, _))) {
            self.rearm_rto(ctx);
        }
    }

    /// `tcp_rack_update_reo_wnd`
    /// ([RFC 8985 section 7.2](https://www.rfc-editor.org/rfc/rfc8985#section-7.2)): one
    /// more step of min_rtt/4 per round in which D-SACKs arrived, kept for 16 recoveries,
    /// then back to 1.
    pub(crate) fn rack_update_reo_wnd(&mut self, ctx: &Ctx, prior_delivered: u64) {
        if ctx.cfg.tcp_recovery & TCP_RACK_STATIC_REO_WND != 0 || prior_delivered == 0 {
            return;
        }
        // "Disregard DSACK if a rtt has not passed since we adjusted reo_wnd".
        if prior_delivered < self.rack.last_delivered {
            self.rack.dsack_seen = false;
        }
        if self.rack.dsack_seen {
            self.rack.reo_wnd_steps = (self.rack.reo_wnd_steps + 1).min(0xff);
            self.rack.dsack_seen = false;
            self.rack.last_delivered = self.delivered;
            self.rack.reo_wnd_persist = TCP_RACK_RECOVERY_THRESH;
        } else if self.rack.reo_wnd_persist == 0 {
            self.rack.reo_wnd_steps = 1;
        }
    }

    /// `tcp_check_sack_reordering`: an original transmission at `low_seq` was
    /// delivered below `tcp_highest_sack_seq` as it stands now: the path reorders
    /// by that distance. `ts`: found by timestamps (`TCPTSReorder`), not SACKs.
    pub(crate) fn check_sack_reordering(&mut self, ctx: &mut Ctx, low_seq: u64, ts: bool) {
        let fack = self.highest_sack_seq();
        if low_seq >= fack {
            return;
        }
        let mss = self.mss_cache.max(1) as u64;
        let metric = fack - low_seq;
        if metric > self.reordering as u64 * mss {
            self.reordering = (metric.div_ceil(mss) as u32).min(ctx.cfg.tcp_max_reordering);
        }
        self.reord_seen += 1;
        ctx.mib.inc(match ts {
            true => Mib::TcpExtTCPTSReorder,
            false => Mib::TcpExtTCPSACKReorder,
        });
    }

    /// `tcp_highest_sack_seq`: the start of the skb after the highest SACKed one,
    /// `snd_una` when nothing is SACKed. Without SACK, when duplicate ACKs were
    /// counted, it is the start of `tp->highest_sack` as Linux keeps it for a
    /// connection that never SACKs: `tcp_event_new_data_sent` points it at the
    /// first skb sent while it is NULL and `tcp_clean_rtx_queue`'s
    /// `tcp_highest_sack_replace` moves it to the next skb as the one it points at is
    /// freed, so it is the head of the retransmit queue (`snd_nxt` once that is
    /// empty, `tcp_highest_sack_seq`'s NULL case). `tcp_try_undo_partial`'s
    /// timestamp reordering check (`tcp_check_sack_reordering`) measures to it.
    pub(crate) fn highest_sack_seq(&self) -> u64 {
        match self.rtx.highest_sack_seq() {
            Some(s) => s,
            None if self.reno_sacked_out > 0 => {
                self.rtx.first().map_or(self.snd_nxt, |skb| skb.seq)
            }
            None => self.snd_una,
        }
    }
}

impl Tcb {
    /// The segment's TSecr as `tcp_parse_options` leaves it in `rx_opt.rcv_tsecr`
    /// (0: none, or timestamps not negotiated), for undo checks and RACK.
    pub(crate) fn note_tsecr(&mut self, th: &lowtide_wire::tcp::TcpRepr) {
        self.rx_opt.rcv_tsecr = th
            .options
            .timestamp
            .filter(|_| self.rx_opt.tstamp_ok)
            .map_or(0, |(_, ecr)| ecr);
        // tcp_tsopt_ecr_before needs saw_tstamp and a non-zero rcv_tsecr.
        self.rtx.ack_ecr_ms = (self.rx_opt.rcv_tsecr != 0)
            .then(|| self.rx_opt.rcv_tsecr.wrapping_sub(self.ts_offset));
    }

    /// Before SACK processing of an ACK: the TSecr for undo checks, RACK's
    /// retransmission cutoff; returns `prior_fack` (`tcp_highest_sack_seq`).
    pub(crate) fn rack_ack_begin(&mut self, ctx: &Ctx, th: &lowtide_wire::tcp::TcpRepr) -> u64 {
        self.note_tsecr(th);
        let min_rtt = Duration::from_micros(self.rtt.min_rtt_us as u64);
        self.rtx.rack_cutoff =
            Instant(ctx.now.as_nanos().saturating_sub(min_rtt.as_nanos() as u64));
        self.rtx.delivered = Delivered::default();
        self.highest_sack_seq()
    }

    /// After SACK and cumulative ACK processing: `tcp_rack_advance` and reordering
    /// detection; returns the ACK's recovery flags (the main path of `tcp_ack` then
    /// runs `tcp_rack_update_reo_wnd`, its `old_ack:` path does not).
    pub(crate) fn rack_ack_delivered(
        &mut self,
        ctx: &mut Ctx,
        snd_una_advanced: bool,
        sack: &super::rtx::sacktag::SackResult,
    ) -> super::fastretrans::AckFlags {
        let d = core::mem::take(&mut self.rtx.delivered);
        // tcp_clean_rtx_queue advances RACK only "else if (tcp_is_sack(tp))": without
        // SACK, RACK keeps no RTT, and an RTO marks every skb lost.
        if self.rx_opt.sack_ok {
            self.rack_advance(ctx.now, &d);
        }
        super::fastretrans::AckFlags {
            snd_una_advanced,
            data_sacked: sack.newly_sacked > 0,
            orig_sack_acked: d.orig_low.is_some_and(|(_, e)| e <= self.high_seq),
            dsack_tlp: sack.dsack_tlp,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::mib::Counters;
    use crate::tcp::consts::SKB_OVERHEAD;
    use crate::tcp::rtx::skb::{Skb, LOST, SACKED_ACKED, SACKED_RETRANS};

    const MSS: u32 = 1000;

    fn tcb(cfg: &Config) -> Tcb {
        let mut tcb = Tcb::for_test(cfg);
        tcb.rx_opt.sack_ok = true;
        tcb.mss_cache = MSS;
        tcb.rtt.min_rtt_us = 40_000;
        tcb.rtt.srtt_us = 50_000;
        tcb
    }

    /// Runs `f` with a context at `now_ms`.
    fn with_ctx<R>(cfg: &Config, now_ms: u64, f: impl FnOnce(&mut Ctx) -> R) -> (R, Counters) {
        let mut st = crate::tcp::TestStack::default();
        let r = f(&mut st.ctx(cfg, Instant(now_ms * 1_000_000), false));
        (r, st.mib)
    }

    /// A socket with 20 segments out from 1 and duplicate ACKs counted, so that
    /// `tcp_highest_sack_seq` is `snd_nxt` (21,001).
    fn reordered(cfg: &Config) -> Tcb {
        let mut t = tcb(cfg);
        (t.snd_una, t.snd_nxt) = (1, 1 + 20 * MSS as u64);
        t.reno_sacked_out = 1;
        t
    }

    #[test]
    fn check_sack_reordering_measures_the_distance_to_the_highest_sack() {
        let cfg = Config::default();
        let mut t = reordered(&cfg);
        // Delivered at or above the highest SACK: no reordering.
        let (_, mib) = with_ctx(&cfg, 0, |ctx| {
            t.check_sack_reordering(ctx, t.snd_nxt, false)
        });
        assert_eq!((t.reordering, t.reord_seen), (3, 0));
        assert_eq!(mib.get(Mib::TcpExtTCPSACKReorder), 0);
        // 19.5 segments below it: the degree rounds up, to 20.
        let low = t.snd_nxt - 19 * MSS as u64 - 500;
        let (_, mib) = with_ctx(&cfg, 0, |ctx| t.check_sack_reordering(ctx, low, false));
        assert_eq!((t.reordering, t.reord_seen), (20, 1));
        assert_eq!(mib.get(Mib::TcpExtTCPSACKReorder), 1);
        // Less than the degree known: counted, the degree kept.
        let low = t.snd_nxt - 2 * MSS as u64;
        let (_, mib) = with_ctx(&cfg, 0, |ctx| t.check_sack_reordering(ctx, low, true));
        assert_eq!((t.reordering, t.reord_seen), (20, 2));
        assert_eq!(mib.get(Mib::TcpExtTCPTSReorder), 1);
    }

    #[test]
    fn check_sack_reordering_is_capped_by_tcp_max_reordering() {
        let mut cfg = Config::default();
        cfg.set("net.ipv4.tcp_max_reordering", "5").unwrap();
        let mut t = reordered(&cfg);
        with_ctx(&cfg, 0, |ctx| t.check_sack_reordering(ctx, 1, false));
        assert_eq!(t.reordering, 5);
        // A negative value is a huge u32 (min_t(u32, ...)): no cap.
        cfg.set("net.ipv4.tcp_max_reordering", "-1").unwrap();
        let mut t = reordered(&cfg);
        with_ctx(&cfg, 0, |ctx| t.check_sack_reordering(ctx, 1, false));
        assert_eq!(t.reordering, 20);
        assert_eq!(Config::default().tcp_max_reordering, 300);
    }

    /// Without SACK, `tp->highest_sack` is the head of the retransmit queue
    /// (`tcp_event_new_data_sent` sets it while NULL, `tcp_clean_rtx_queue`'s
    /// `tcp_highest_sack_replace` moves it on): with duplicate ACKs counted,
    /// `tcp_highest_sack_seq` is the head's start, and a timestamp-proven partial ACK
    /// measures reordering over what it covered (tests/packetdrill/
    /// newreno-ts-partial-undo-reordering-to-snd-una.pkt).
    #[test]
    fn without_sack_the_highest_sack_is_the_retransmit_queue_head() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        scoreboard(&mut t);
        assert_eq!(t.highest_sack_seq(), t.snd_una, "nothing counted");
        t.reno_sacked_out = 2;
        assert_eq!(t.highest_sack_seq(), 1);
        // Four segments acked: the head is now at 4,001.
        t.rtx.clean(4001);
        t.snd_una = 4001;
        assert_eq!(t.highest_sack_seq(), 4001);
        with_ctx(&cfg, 20, |ctx| t.check_sack_reordering(ctx, 1, true));
        assert_eq!((t.reordering, t.reord_seen), (4, 1));
    }

    /// Ten one-segment skbs sent 1 ms apart from t = 0.
    fn scoreboard(t: &mut Tcb) {
        for i in 0..10u64 {
            let seq = 1 + i * MSS as u64;
            t.rtx.push(Skb {
                seq,
                end_seq: seq + MSS as u64,
                data: bytes::Bytes::from(vec![0u8; MSS as usize]).into(),
                flags: 0,
                sacked: 0,
                pcount: 1,
                gso_size: 0,
                tx_time: Instant(i * 1_000_000),
                truesize: MSS + SKB_OVERHEAD,
                tx: Default::default(),
                fclone: 0,
                zc: None,
                uncharged: 0,
            });
        }
        t.snd_una = 1;
        t.snd_nxt = 1 + 10 * MSS as u64;
    }

    /// `tcp_timeout_mark_lost` with RACK: the RTO marks lost the head and what was
    /// sent more than `rack.rtt_us` ago (`tcp_rack_skb_timeout(tp, skb, 0) <= 0`);
    /// what was sent since stays in flight. `tcp_recovery` 0 changes nothing (Linux
    /// 6.17+: RACK is the only loss detection; before, everything was lost).
    #[test]
    fn rto_leaves_recently_sent_skbs_in_flight_under_rack() {
        let lost_after_rto = |tcp_recovery: u32| {
            let cfg = Config {
                tcp_recovery,
                ..Config::default()
            };
            let mut t = tcb(&cfg);
            scoreboard(&mut t);
            t.rtx.update(1 + 2 * MSS as u64, SACKED_ACKED, 0);
            // Sent at 0..9 ms; at 12 ms with a 5 ms RACK RTT, skbs sent at 7 ms
            // or before have timed out.
            t.rack.rtt_us = 5_000;
            with_ctx(&cfg, 12, |c| t.enter_loss(c));
            let lost: Vec<u64> = t
                .rtx
                .iter_from(1)
                .filter(|s| s.has(LOST))
                .map(|s| (s.seq - 1) / MSS as u64)
                .collect();
            (lost, t.rtx.lost_out)
        };
        assert_eq!(lost_after_rto(1), (vec![0, 1, 3, 4, 5, 6, 7], 7));
        assert_eq!(lost_after_rto(0), (vec![0, 1, 3, 4, 5, 6, 7], 7));
    }

    /// `tcp_enter_loss`: an RTO queues CWR for an RFC 3168 peer
    /// (`tcp_ecn_queue_cwr`), and arms F-RTO only when no MTU probe is out
    /// ("Disable F-RTO on path MTU probing").
    #[test]
    fn rto_queues_cwr_and_an_mtu_probe_keeps_frto_off() {
        let cfg = Config::default();
        let rto = |probe_size: u32, ecn: bool| {
            let mut t = tcb(&cfg);
            scoreboard(&mut t);
            t.mtup.probe_size = probe_size;
            if ecn {
                t.ecn_flags = crate::tcp::ecn::TCP_ECN_OK;
            }
            with_ctx(&cfg, 12, |c| t.enter_loss(c));
            (
                t.frto,
                t.ecn_flags & crate::tcp::ecn::TCP_ECN_QUEUE_CWR != 0,
            )
        };
        assert_eq!(rto(0, true), (true, true));
        assert_eq!(rto(1292, false), (false, false));
    }

    /// `tcp_mark_skb_lost` from `tcp_timeout_mark_lost`: the first RTO marks
    /// what was never sent again (no TCPLostRetransmit); a second RTO finds the
    /// head lost and retransmitted, so the retransmission is lost again: out of
    /// `retrans_out`, TCPLostRetransmit counted per segment.
    #[test]
    fn a_second_rto_counts_the_resent_head_lost_again() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        scoreboard(&mut t);
        let (_, mib) = with_ctx(&cfg, 12, |c| t.enter_loss(c));
        assert_eq!(mib.get(Mib::TcpExtTCPLostRetransmit), 0);
        t.rtx.mark_retransmitted(1, Instant(12_000_000));
        t.icsk.retransmits = 1;
        assert_eq!((t.rtx.retrans_out, t.rtx.lost_out), (1, 10));
        let (_, mib) = with_ctx(&cfg, 400, |c| t.enter_loss(c));
        assert_eq!(mib.get(Mib::TcpExtTCPLostRetransmit), 1);
        assert_eq!((t.rtx.retrans_out, t.rtx.lost_out), (0, 10));
    }

    /// `tcp_skb_spurious_retrans` (tcp_clean_rtx_queue): a cumulative ACK whose TSecr
    /// is older than the retransmission of the skb it covers acknowledges the first
    /// transmission, so RACK does not take the retransmission's send time.
    #[test]
    fn an_ack_of_the_original_does_not_advance_rack_to_the_retransmission() {
        let cfg = Config::default();
        let rack_after_ack = |echo_ms: u32| {
            let mut t = tcb(&cfg);
            t.rx_opt.tstamp_ok = true;
            t.ts_offset = 1000;
            scoreboard(&mut t);
            // The head, first sent at 0 ms, was sent again at 20 ms.
            t.rtx.mark_retransmitted(1, Instant(20_000_000));
            let mut th = lowtide_wire::tcp::TcpRepr::default();
            th.options.timestamp = Some((7, 1000 + echo_ms));
            with_ctx(&cfg, 70, |c| {
                t.rack_ack_begin(c, &th);
                t.rtx.clean(1 + MSS as u64);
                t.rack_ack_delivered(c, true, &Default::default());
            });
            (t.rack.advanced, t.rack.mstamp)
        };
        // TSecr 0 ms: the original's echo, the retransmission was spurious.
        assert_eq!(rack_after_ack(0), (false, Instant::ZERO));
        // TSecr 20 ms: the retransmission's echo; RACK takes its send time.
        assert_eq!(rack_after_ack(20), (true, Instant(20_000_000)));
    }

    /// An ACK from the peer carrying the D-SACK `[start, end)` (stream offsets).
    fn dsack_ack(t: &Tcb, start: u64, end: u64) -> lowtide_wire::tcp::TcpRepr {
        let mut th = lowtide_wire::tcp::TcpRepr::default();
        th.options.sack[0] = lowtide_wire::tcp::SackBlock {
            start: t.snd_seq(start).0,
            end: t.snd_seq(end).0,
        };
        th.options.sack_len = 1;
        th
    }

    /// tcp_dsack_seen (Linux 5.15+): a D-SACK sets rack.dsack_seen only once
    /// reordering was seen and only when it is not for the loss probe
    /// (FLAG_DSACK_TLP: one segment ending exactly at tlp_high_seq).
    #[test]
    fn dsack_grows_reo_wnd_only_after_reordering_and_not_for_a_tlp() {
        let cfg = Config::default();
        let seg = |i: u64| (1 + i * MSS as u64, 1 + (i + 1) * MSS as u64);
        let run = |reord_seen: u32, tlp_high: Option<u64>, (s, e): (u64, u64)| {
            let mut t = tcb(&cfg);
            scoreboard(&mut t);
            t.max_window = 65535;
            t.total_retrans = 4;
            t.reord_seen = reord_seen;
            t.tlp_high_seq = tlp_high;
            t.tlp_retrans = tlp_high.is_some();
            let th = dsack_ack(&t, s, e);
            let ack = seg(2).0; // the D-SACK lies below this ACK
            let (r, _) = with_ctx(&cfg, 10, |c| t.sacktag(c, &th, ack, ack));
            assert!(r.dsack, "the D-SACK was not accepted");
            (t.rack.dsack_seen, r.dsack_tlp)
        };
        // No reordering seen: a D-SACK leaves RACK's window alone.
        assert_eq!(run(0, None, seg(0)), (false, false));
        assert_eq!(run(1, None, seg(0)), (true, false));
        // The D-SACK of the probe itself (it ends at tlp_high_seq): FLAG_DSACK_TLP.
        assert_eq!(run(1, Some(seg(1).1), seg(1)), (false, true));
        // A D-SACK of an earlier segment below tlp_high_seq is not the probe's.
        assert_eq!(run(1, Some(seg(9).1), seg(0)), (true, false));
        // Nor is one longer than a segment.
        assert_eq!(run(1, Some(seg(1).1), (seg(0).0, seg(1).1)), (true, false));
    }

    /// `tcp_sacktag_write_queue` stops after `tcp_check_dsack` when nothing is
    /// outstanding (`!tp->packets_out`, `goto out`): the D-SACK of a loss probe that
    /// arrives after its ACK counts (TCPDSACKRecv) but is not validated, so it is not
    /// "ignored" either; with data outstanding and no undo_marker it is.
    #[test]
    fn a_dsack_with_nothing_outstanding_is_counted_but_not_validated() {
        let cfg = Config::default();
        let run = |outstanding: bool| {
            let mut t = tcb(&cfg);
            scoreboard(&mut t);
            t.max_window = 65535;
            t.total_retrans = 1;
            let una = 1 + 5 * MSS as u64;
            if !outstanding {
                t.rtx.clean(t.snd_nxt);
                t.snd_una = t.snd_nxt;
            }
            let th = dsack_ack(&t, 1 + 4 * MSS as u64, una);
            let ack = t.snd_una.max(una);
            let (r, mib) = with_ctx(&cfg, 10, |c| t.sacktag(c, &th, ack, ack));
            assert!(r.dsack);
            (
                mib.get(Mib::TcpExtTCPDSACKRecv),
                mib.get(Mib::TcpExtTCPDSACKIgnoredNoUndo),
            )
        };
        assert_eq!(run(false), (1, 0));
        assert_eq!(run(true), (1, 1));
    }

    /// `tcp_sacktag_write_queue`: "Don't count olds caused by ACK reordering": an
    /// old ACK's (ack_seq below snd_una) block wholly below snd_una is skipped
    /// without TCPSACKDiscard; on a current ACK the same block is a discard.
    #[test]
    fn an_old_acks_stale_block_is_no_sack_discard() {
        let cfg = Config::default();
        let discards = |ack_seq: u64| {
            let mut t = tcb(&cfg);
            scoreboard(&mut t);
            t.max_window = 65535;
            t.snd_una = 1 + 5 * MSS as u64;
            // A valid block, then one below snd_una (not a D-SACK: the first block
            // lies above the ACK and not inside the second).
            let mut th = dsack_ack(&t, 1 + 6 * MSS as u64, 1 + 7 * MSS as u64);
            th.options.sack[1] = lowtide_wire::tcp::SackBlock {
                start: t.snd_seq(1 + 3 * MSS as u64).0,
                end: t.snd_seq(1 + 4 * MSS as u64).0,
            };
            th.options.sack_len = 2;
            let (_, mib) = with_ctx(&cfg, 10, |c| t.sacktag(c, &th, ack_seq, t.snd_una));
            mib.get(Mib::TcpExtTCPSACKDiscard)
        };
        assert_eq!(discards(1 + 2 * MSS as u64), 0);
        assert_eq!(discards(1 + 5 * MSS as u64), 1);
    }

    #[test]
    fn reo_wnd_is_min_rtt_over_four_once_reordering_seen() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        // No reordering seen yet: min_rtt/4 in Open with few SACKs ...
        let (w, _) = with_ctx(&cfg, 0, |c| t.rack_reo_wnd(c));
        assert_eq!(w, 10_000);
        // ... but 0 in recovery (be aggressive when reordering was never seen).
        t.ca_state = CaState::Recovery;
        assert_eq!(with_ctx(&cfg, 0, |c| t.rack_reo_wnd(c)).0, 0);
        t.reord_seen = 1;
        assert_eq!(with_ctx(&cfg, 0, |c| t.rack_reo_wnd(c)).0, 10_000);
    }

    #[test]
    fn reo_wnd_steps_on_dsack_and_caps_at_srtt() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        t.reord_seen = 1;
        for round in 1..=6u64 {
            t.rack.dsack_seen = true;
            // The ACK delivered an skb sent when `delivered` was where the last
            // adjustment left it: a new round.
            let prior = t.rack.last_delivered.max(1);
            t.delivered = prior + 10;
            with_ctx(&cfg, round * 100 + 1, |c| t.rack_update_reo_wnd(c, prior));
            assert_eq!(t.rack.last_delivered, prior + 10);
        }
        assert_eq!(t.rack.reo_wnd_steps, 7);
        assert_eq!(t.rack.reo_wnd_persist, TCP_RACK_RECOVERY_THRESH);
        // 7 * 10 ms exceeds srtt (50 ms): capped.
        assert_eq!(with_ctx(&cfg, 0, |c| t.rack_reo_wnd(c)).0, 50_000);
        // A D-SACK on an ACK whose newest delivered skb was sent before the last
        // adjustment (tx.delivered below rack.last_delivered) is forgotten.
        t.rack.dsack_seen = true;
        let last = t.rack.last_delivered;
        t.delivered = last + 5;
        with_ctx(&cfg, 700, |c| t.rack_update_reo_wnd(c, last - 1));
        assert_eq!((t.rack.reo_wnd_steps, t.rack.dsack_seen), (7, false));
        assert_eq!(t.rack.last_delivered, last);
        // An ACK that delivered nothing (rs->prior_delivered 0) keeps a D-SACK
        // pending.
        t.rack.dsack_seen = true;
        with_ctx(&cfg, 750, |c| t.rack_update_reo_wnd(c, 0));
        assert!(t.rack.dsack_seen);
        t.rack.dsack_seen = false;
        // After 16 recoveries without D-SACK the window falls back to one step.
        for _ in 0..16 {
            t.ca_state = CaState::Recovery;
            t.undo.marker = None;
            with_ctx(&cfg, 800, |c| t.try_undo_recovery(c));
        }
        with_ctx(&cfg, 900, |c| t.rack_update_reo_wnd(c, last));
        assert_eq!(t.rack.reo_wnd_steps, 1);
    }

    #[test]
    fn static_reo_wnd_sysctl_stops_adaptation() {
        let cfg = Config {
            tcp_recovery: crate::config::TCP_RACK_LOSS_DETECTION | TCP_RACK_STATIC_REO_WND,
            ..Config::default()
        };
        let mut t = tcb(&cfg);
        t.rack.dsack_seen = true;
        with_ctx(&cfg, 1, |c| t.rack_update_reo_wnd(c, 1));
        assert_eq!(t.rack.reo_wnd_steps, 1);
    }

    #[test]
    fn detect_loss_marks_skbs_sent_before_the_delivered_one_after_the_window() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        t.reord_seen = 1; // reo_wnd = 10 ms
        scoreboard(&mut t);
        // The skb sent at 6 ms is SACKed at 46 ms: RACK.rtt = 40 ms.
        t.rtx.sacktag(1 + 6 * MSS as u64, 1 + 7 * MSS as u64);
        let d = core::mem::take(&mut t.rtx.delivered);
        t.rack_advance(Instant(46_000_000), &d);
        assert_eq!(t.rack.rtt_us, 40_000);
        // At 46 ms nothing is lost yet (skb 0 expires at 0 + 40 + 10 = 50 ms); the
        // reorder timer waits for the longest (skb 5: 9 ms) plus 2 ms slack.
        let (armed, _) = with_ctx(&cfg, 46, |c| t.rack_mark_lost(c));
        assert!(armed);
        assert_eq!(t.rtx.lost_out, 0);
        assert_eq!(
            t.icsk.pending,
            Some((Pending::ReoTimeout, Instant(46_000_000 + 11_000_000)))
        );
        // At 52.5 ms skbs 0..2 (sent at 0, 1, 2 ms) have expired; 3..5 not yet; those
        // sent after the SACKed one are never judged by it.
        let mut st = crate::tcp::TestStack::default();
        let l = t.rack_detect_loss(&mut st.ctx(&cfg, Instant(52_500_000), false));
        assert_eq!(l.lost_segs, 3);
        assert_eq!(l.first, Some(1));
        let lost: Vec<u64> = t
            .rtx
            .iter_from(0)
            .filter(|s| s.has(LOST))
            .map(|s| s.seq)
            .collect();
        assert_eq!(lost, vec![1, 1001, 2001]);
        assert!(t.rtx.get(6001).unwrap().has(SACKED_ACKED));
        // Lost and SACKed skbs leave the time-sorted order.
        assert_eq!(t.rtx.tsorted().len(), 6);
        t.rtx.check_invariants();
    }

    /// After a loss undo left retransmissions unmarked (R without L), as Linux 6.18
    /// shows (tests/packetdrill/rto-undo-retransmission-sacked-and-lost.pkt):
    /// `tcp_sacktag_one` keeps a SACKed one in `retrans_out`, and
    /// `tcp_mark_skb_lost` makes an unSACKed one lost with its mark (L|R: no
    /// TCPLostRetransmit, still in `retrans_out`, not sent again). RACK's marking
    /// also unlinks it from the time-sorted list (`list_del_init`), so a later pass
    /// does not see it: it is not lost again (R cleared, TCPLostRetransmit) unless it
    /// is sent once more.
    #[test]
    fn a_retransmission_left_by_an_undo_is_sacked_and_lost_as_linux_does() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        t.reord_seen = 1; // reo_wnd = 10 ms
        scoreboard(&mut t);
        t.rtx.mark_retransmitted(1, Instant(20_000_000));
        t.rtx
            .mark_retransmitted(1 + MSS as u64, Instant(20_000_000));
        t.rtx.rack_cutoff = Instant(30_000_000);
        t.rtx.sacktag(1 + MSS as u64, 1 + 2 * MSS as u64);
        let s = t.rtx.get(1 + MSS as u64).unwrap();
        assert!(s.has(SACKED_ACKED | SACKED_RETRANS), "S|R");
        assert_eq!((t.rtx.retrans_out, t.rtx.sacked_out), (2, 1));
        let d = core::mem::take(&mut t.rtx.delivered);
        t.rack_advance(Instant(70_000_000), &d);
        let (_, mib) = with_ctx(&cfg, 80, |c| t.rack_detect_loss(c));
        assert_eq!(mib.get(Mib::TcpExtTCPLostRetransmit), 0);
        assert!(t.rtx.get(1).unwrap().has(LOST | SACKED_RETRANS), "L|R");
        assert_eq!((t.rtx.retrans_out, t.rtx.lost_out), (2, 9));
        let (_, mib) = with_ctx(&cfg, 200, |c| t.rack_detect_loss(c));
        assert_eq!(mib.get(Mib::TcpExtTCPLostRetransmit), 0);
        assert_eq!((t.rtx.retrans_out, t.rtx.lost_out), (2, 9));
        t.rtx.check_invariants();
    }

    /// tcp_rack_advance sets RACK.rtt on every skb it takes, in the order the ACK is
    /// processed: an original sent before the reference (here the retransmission)
    /// but delivered after it in sequence order leaves its own, longer RTT, so the
    /// skbs sent between them are not judged lost by the reference's short one.
    #[test]
    fn rack_rtt_is_the_last_skb_taken_not_the_reference() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        scoreboard(&mut t);
        t.rtx.update(1, LOST, 0);
        t.rtx.mark_retransmitted(1, Instant(20_000_000));
        // At 70 ms the retransmission (sent at 20 ms) is past min_rtt (40 ms).
        t.rtx.rack_cutoff = Instant(30_000_000);
        t.rtx.sacktag(1, 1 + 2 * MSS as u64);
        let d = core::mem::take(&mut t.rtx.delivered);
        assert_eq!(d.rack, Some((Instant(20_000_000), 1 + MSS as u64)));
        t.rack_advance(Instant(70_000_000), &d);
        assert_eq!(t.rack.mstamp, Instant(20_000_000), "the reference");
        assert_eq!(t.rack.rtt_us, 69_000, "the skb sent at 1 ms, taken last");
    }

    #[test]
    fn retransmission_moves_to_the_tail_of_the_time_order() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        scoreboard(&mut t);
        t.rtx.update(1, LOST, 0);
        assert_eq!(t.rtx.tsorted().len(), 9);
        t.rtx.mark_retransmitted(1, Instant(20_000_000));
        let order: Vec<u64> = t.rtx.tsorted().iter().map(|(_, s, _)| s).collect();
        assert_eq!(order.last(), Some(&1));
        assert_eq!(order.first(), Some(&1001));
        t.rtx.check_invariants();
        // A retransmission SACKed sooner than min_rtt after it was sent is ambiguous
        // (the original may have arrived): RACK does not advance on it.
        t.rtx.rack_cutoff = Instant::ZERO; // now (30 ms) - min_rtt (40 ms), saturated
        t.rtx.sacktag(1, 1001);
        assert_eq!(t.rtx.delivered.rack, None);
    }
}
