//! Retransmission: tcp_output.c's `tcp_xmit_retransmit_queue`, `tcp_retransmit_skb`
//! and `__tcp_retransmit_skb` (the skb trimmed, fragmented or collapsed to what the
//! window and the MSS allow, then sent again).

use super::cong::CaState;
use super::consts::SKB_OVERHEAD;
use super::rtx::skb::{self, FLAG_SYN};
use super::sock::{Pending, Tcb};
use super::Ctx;
use crate::mib::Mib;
use crate::socket::TxRetrans;

impl Tcb {
    /// `tcp_xmit_retransmit_queue`: retransmits lost skbs while cwnd, pacing and the
    /// host queue allow, each as `tcp_retransmit_skb` with at most `tcp_tso_segs`
    /// segments; counts `TCPFastRetrans` (`TCPSlowStartRetrans` in Loss) per segment
    /// and restarts the RTO when the head went again.
    pub(crate) fn xmit_retransmit_queue(&mut self, ctx: &mut Ctx) {
        if self.rtx.packets_out == 0 {
            return;
        }
        let mss = self.current_mss(ctx.cfg, ctx.now);
        let max_segs = self.tso_segs(ctx.cfg, mss);
        let rtx_head = self.rtx.first().map(|s| s.seq);
        let prior_timer = self.icsk.pending;
        let mut rearm_timer = None;
        let mut from = self.retransmit_hint.max(self.snd_una);
        // The first hole walked past: the hint stays there for the next walk.
        let mut hole = None;
        // Linux stops once every lost segment is retransmitted, before walking on
        // (tcp_xmit_retransmit_queue: retrans_out >= lost_out).
        while self.rtx.retrans_out < self.rtx.lost_out {
            let w = self.rtx.next_lost_from_hint(from);
            hole = hole.or(w.hole);
            let Some((seq, _)) = w.lost else {
                break;
            };
            // The hint points at the skb before the checks stop the walk.
            from = seq;
            if self.pacing_check(ctx.now) {
                break;
            }
            let in_flight = self.packets_in_flight();
            if in_flight >= self.cw.snd_cwnd {
                break;
            }
            let segs = (self.cw.snd_cwnd - in_flight).min(max_segs).max(1);
            let truesize = self.rtx.get(seq).map_or(0, |s| s.truesize);
            if self.small_queue_check(ctx.cfg, truesize, 1) {
                break;
            }
            let Some((sent, end_seq, pcount)) = self.retransmit_skb(ctx, seq, segs) else {
                break;
            };
            let mib = match self.ca_state {
                CaState::Loss => Mib::TcpExtTCPSlowStartRetrans,
                _ => Mib::TcpExtTCPFastRetrans,
            };
            ctx.mib.add(mib, pcount as u64);
            if let Some(token) = self.tx_token_mut(ctx, sent) {
                token.rtx = TxRetrans::Queue { mib };
            }
            self.count_prr_out(ctx, sent, pcount);
            if Some(seq) == rtx_head && !matches!(self.icsk.pending, Some((Pending::ReoTimeout, _)))
            {
                rearm_timer = Some((sent, mib));
            }
            from = end_seq;
        }
        self.retransmit_hint = hole.unwrap_or(from);
        if let Some((head, mib)) = rearm_timer {
            // tcp_reset_xmit_timer(ICSK_TIME_RETRANS, icsk_rto, true).
            self.reset_xmit_timer_paced(ctx.now, Pending::Retrans, self.rto_backed_off());
            if let Some(token) = self.tx_token_mut(ctx, head) {
                let timer = prior_timer;
                token.rtx = TxRetrans::QueueHead { mib, timer };
            }
        }
    }

    /// `tcp_retransmit_skb`: `__tcp_retransmit_skb` of the skb at `seq` with at most
    /// `segs` segments, then counted as in flight again (`TCPCB_RETRANS`,
    /// `retrans_out`), the first retransmission's time and the D-SACKs that may undo
    /// it. Returns what went: `(seq, end_seq, pcount)`.
    pub(crate) fn retransmit_skb(
        &mut self,
        ctx: &mut Ctx,
        seq: u64,
        segs: u32,
    ) -> Option<(u64, u64, u32)> {
        let sent = self.retransmit_skb_once(ctx, seq, segs);
        if let Some((at, _, _)) = sent {
            // TCPCB_RETRANS, and retrans_out += tcp_skb_pcount(skb) even when the
            // skb was still marked ("retrans_out leaked").
            self.rtx.count_retransmission(at);
        }
        // "Save stamp of the first (attempted) retransmit": the skb's stamp, its
        // new departure time if it went, else its last one.
        if self.undo.retrans_stamp.is_none() {
            let at = sent.map_or(seq, |s| s.0);
            let stamp = self.rtx.get(at).map_or(ctx.now, |s| s.tx_time);
            self.undo.retrans_stamp = Some(stamp);
        }
        let pcount = sent.map_or_else(|| self.rtx.get(seq).map_or(0, |s| s.pcount), |s| s.2);
        // tcp_retransmit_skb: D-SACKs of this many retransmissions allow an undo.
        self.undo.retrans = self.undo.retrans.max(0) + pcount as i32;
        sent
    }

    /// `__tcp_retransmit_skb`: sends the skb at `seq` again. Bytes acknowledged
    /// since it was sent are trimmed first (`tcp_trim_head`: a cumulative ACK does
    /// not trim a one-segment skb); outside the peer's window it stays unsent
    /// (`-EAGAIN`) unless it is the head, which then goes as a window probe of one
    /// MSS. At most `segs` segments of the current MSS go (`tcp_fragment`); a
    /// shorter skb takes the one-segment skbs after it (`tcp_retrans_try_collapse`).
    /// Marks it ever retransmitted, sent now. A queued SYN goes as a SYN
    /// (`tcp_transmit_skb` builds a SYN's options), counted in
    /// `TcpExtTCPSynRetrans`. Returns `(seq, end_seq, pcount)` of what went.
    pub(crate) fn retransmit_skb_once(
        &mut self,
        ctx: &mut Ctx,
        seq: u64,
        segs: u32,
    ) -> Option<(u64, u64, u32)> {
        // Inconclusive MTU probe.
        self.mtup.probe_size = 0;
        // -EBUSY: the last transmission still waits in the host's queue.
        if self.still_in_host_queue(ctx, seq) {
            return None;
        }
        let mut seq = seq;
        if seq < self.snd_una {
            if self.rtx.get(seq)?.end_seq <= self.snd_una {
                return None;
            }
            let freed = self.rtx.trim_head(seq, self.snd_una);
            self.wmem_free(freed);
            seq = self.snd_una;
        }
        self.sync_dst_mtu(ctx); // __tcp_retransmit_skb's tcp_current_mss
        let cur_mss = self.current_mss(ctx.cfg, ctx.now).max(1) as i64;
        let wnd_end = self.snd_una + self.snd_wnd as u64;
        let mut avail_wnd = wnd_end as i64 - seq as i64;
        // "If receiver has shrunk his window, and skb is out of new window, do not
        // retransmit it", unless it serves as a zero window probe.
        if avail_wnd <= 0 {
            if seq != self.snd_una {
                return None;
            }
            avail_wnd = cur_mss;
        }
        let mut len = cur_mss * segs.max(1) as i64;
        if len > avail_wnd {
            len = avail_wnd / cur_mss * cur_mss;
            if len == 0 {
                len = avail_wnd;
            }
        }
        let s = self.rtx.get(seq)?;
        let (skb_len, segs) = (s.len() as i64, (s.pcount, s.gso_size));
        if skb_len > len {
            self.wmem_queued += self.rtx.split_at(seq + len as u64, cur_mss as u32);
        } else {
            // tcp_set_skb_tso_segs on the skb in hand: no second search unless
            // its count changes.
            if segs != skb::tso_segs(skb_len as u32, cur_mss as u32) {
                self.rtx.set_tso_segs(seq, cur_mss as u32);
            }
            let space = avail_wnd.min(cur_mss);
            if skb_len < space && ctx.cfg.tcp_retrans_collapse {
                let freed = self.rtx.retrans_try_collapse(seq, space, wnd_end);
                self.wmem_free(freed);
            }
        }
        let s = self.rtx.get(seq)?;
        let (flags, data, pcount, end_seq) = (s.flags, s.data.clone(), s.pcount, s.end_seq);
        let truesize = data.len() as u32 + SKB_OVERHEAD;
        ctx.mib.add(Mib::TcpRetransSegs, pcount as u64);
        let syn = flags & FLAG_SYN != 0;
        if syn {
            ctx.mib.inc(Mib::TcpExtTCPSynRetrans);
            // RFC 3168 section 6.1.1.1's fallback (tcp_ecn_clear_syn) reads the
            // SYN as sent again before it goes.
            self.rtx.update(seq, skb::EVER_RETRANS, 0);
        }
        self.total_retrans += pcount;
        self.bytes_retrans += data.len() as u64;
        let tstamp = self.transmit(ctx, seq, flags, &data, truesize);
        self.fclone_sent(ctx, seq);
        // tcp_rate_skb_sent, after the transmission, from its stamp; a SYN's
        // snapshot keeps the zero delivered_mstamp: nothing was delivered yet
        // (connect_queue_skb).
        let mut tx = self.rate_skb_sent(tstamp);
        if syn {
            tx.delivered_mstamp = None;
        }
        self.rtx.mark_sent_again(seq, tstamp, tx);
        Some((seq, end_seq, pcount))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, RtxQueueKind};
    use crate::tcp::rtx::skb::Skb;
    use crate::tcp::rtx::skb::{LOST, SACKED_ACKED, SACKED_RETRANS};
    use crate::tcp::rtx::RtxQueue;
    use crate::tcp::TcpState;
    use crate::time::Instant;

    const MSS: u32 = 1000;
    const N: u64 = 1000;

    fn seq_of(i: u64) -> u64 {
        1 + i * MSS as u64
    }

    /// A list-shaped retransmit queue of `N` one-segment skbs, every one SACKed but
    /// `holes` (still in flight) and `lost` (marked lost, not yet retransmitted).
    fn tcb_with(cfg: &Config, holes: &[u64], lost: &[u64]) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = TcpState::Established;
        t.rx_opt.sack_ok = true;
        t.mss_cache = MSS;
        t.rtx = RtxQueue::with_kind(RtxQueueKind::List);
        for i in 0..N {
            t.rtx.push(Skb {
                seq: seq_of(i),
                end_seq: seq_of(i + 1),
                data: bytes::Bytes::from(vec![0u8; MSS as usize]).into(),
                flags: 0,
                sacked: 0,
                pcount: 1,
                gso_size: 0,
                tx_time: Instant::ZERO,
                truesize: MSS + SKB_OVERHEAD,
                tx: Default::default(),
                fclone: 0,
                zc: None,
                uncharged: 0,
            });
        }
        for i in (0..N).filter(|i| !holes.contains(i)) {
            let bit = if lost.contains(&i) {
                LOST
            } else {
                SACKED_ACKED
            };
            t.rtx.update(seq_of(i), bit, 0);
        }
        t.snd_una = seq_of(0);
        t.snd_nxt = seq_of(N);
        t.snd_wnd = 1 << 30;
        t.cw.snd_cwnd = 10_000;
        t
    }

    fn xmit_retransmit_queue_at(t: &mut Tcb, cfg: &Config) {
        let mut st = crate::tcp::TestStack::default();
        t.xmit_retransmit_queue(&mut st.ctx(cfg, Instant(1_000_000_000), false));
    }

    /// `tp->retransmit_skb_hint` is a pointer: the list walks on from the hinted skb,
    /// not from the head to it (Linux 4.14's `tcp_xmit_retransmit_queue`).
    #[test]
    fn list_retransmit_walk_starts_at_the_hint() {
        let cfg = Config::default();
        let mut t = tcb_with(&cfg, &[], &[995]);
        t.retransmit_hint = seq_of(995);
        let before = t.rtx.nodes_visited();
        xmit_retransmit_queue_at(&mut t, &cfg);
        assert!(t.rtx.get(seq_of(995)).unwrap().has(SACKED_RETRANS));
        let walked = t.rtx.nodes_visited() - before;
        assert!(
            walked < 10,
            "{walked} nodes for one retransmission at the hint"
        );
    }

    /// The hint stays at the first hole the walk passed (`if (!hole)
    /// tp->retransmit_skb_hint = skb`): the next walk starts there again.
    #[test]
    fn retransmit_hint_stays_at_the_first_hole() {
        let cfg = Config::default();
        let mut t = tcb_with(&cfg, &[10], &[990]);
        xmit_retransmit_queue_at(&mut t, &cfg);
        assert!(t.rtx.get(seq_of(990)).unwrap().has(SACKED_RETRANS));
        assert_eq!(t.retransmit_hint, seq_of(10));
        // The next loss above is found by a walk from that hole.
        t.rtx.update(seq_of(995), LOST, SACKED_ACKED);
        let before = t.rtx.nodes_visited();
        xmit_retransmit_queue_at(&mut t, &cfg);
        assert!(t.rtx.get(seq_of(995)).unwrap().has(SACKED_RETRANS));
        assert!(t.rtx.nodes_visited() - before > 980);
    }

    /// Only `tcp_xmit_recovery` (an ACK whose `tcp_fastretrans_alert` set
    /// `REXMIT_LOST`) and `tcp_tsq_write` (lost beyond retransmitted, room in cwnd)
    /// retransmit: a push (`__tcp_push_pending_frames`: `tcp_data_snd_check` after
    /// an ACK that asked for nothing, such as a SACK reneging, or a write) sends new
    /// data only.
    #[test]
    fn a_push_retransmits_nothing_unless_the_ack_asked() {
        let cfg = Config::default();
        let resent = |rexmit: bool, tsq: bool| {
            let mut t = tcb_with(&cfg, &[], &[3, 4]);
            t.rtx.packets_out = N as u32;
            let mut st = crate::tcp::TestStack::default();
            let ctx = &mut st.ctx(&cfg, Instant(1_000_000_000), false);
            t.rexmit_lost = rexmit;
            match tsq {
                false => t.write_xmit(ctx),
                true => t.tsq_write(ctx),
            }
            assert!(!t.rexmit_lost, "taken by the push");
            [3, 4].map(|i| t.rtx.get(seq_of(i)).unwrap().has(SACKED_RETRANS))
        };
        assert_eq!(resent(false, false), [false, false], "a push alone");
        assert_eq!(resent(true, false), [true, true], "after REXMIT_LOST");
        assert_eq!(resent(false, true), [true, true], "tcp_tsq_write");
    }
}
