//! `tcp_write_xmit` and its tests, from tcp_output.c: `tcp_cwnd_test`,
//! `tcp_snd_wnd_test`, the Nagle and TSO deferral tests (in `nagle` and `pacing`),
//! and the new-data send of what passes them (`tso_fragment`,
//! `tcp_event_new_data_sent`), with `tcp_check_probe_timer` for what does not.

use super::consts::SKB_OVERHEAD;
use super::nagle::{TCP_NAGLE_OFF, TCP_NAGLE_PUSH};
use super::pacing::DeferredBy;
use super::rtx::skb::{self, Skb, FLAG_EOR, FLAG_FIN, FLAG_PSH, FLAG_SYN};
use super::sock::{Pending, Tcb};
use super::{Ctx, TcpState};
use crate::config::{Config, SizeGoalAt};
use crate::mib::Mib;
use crate::socket::TxToken;

impl Tcb {
    /// States in which data may be sent.
    fn can_send_data(&self) -> bool {
        matches!(
            self.state,
            TcpState::Established
                | TcpState::CloseWait
                | TcpState::FinWait1
                | TcpState::Closing
                | TcpState::LastAck
        ) || self.passive_fastopen()
    }

    /// `__tcp_push_pending_frames`: `tcp_write_xmit` ([`Tcb::tcp_write_xmit`]) with
    /// the push's `push_one` ([`Tcb::push_one`]: `tcp_push_one`'s 1, else 0),
    /// preceded by retransmissions of lost skbs only when the ACK just processed
    /// asked for them (`tcp_xmit_recovery`'s `REXMIT_LOST`, [`Tcb::rexmit_lost`]),
    /// or followed by them for F-RTO (`REXMIT_NEW`), then `tcp_check_probe_timer`. As
    /// `tcp_push_pending_frames` (`tcp_data_snd_check`, `tcp_push`, the socket
    /// options), it runs `tcp_write_xmit` only when something waits to be sent
    /// (`tcp_send_head`), or for F-RTO's new data (`REXMIT_NEW` calls
    /// `__tcp_push_pending_frames` directly): with nothing to send, no
    /// `tcp_cwnd_validate`, so a flight that fills cwnd with retransmissions
    /// alone does not make the window cwnd-limited.
    pub(crate) fn write_xmit(&mut self, ctx: &mut Ctx) {
        self.push_or_tsq_write(ctx, false);
    }

    /// `tcp_tsq_write` (a TCP Small Queues completion, the pacing timer):
    /// retransmissions, then `tcp_write_xmit` even with nothing queued, so that a
    /// full cwnd is validated as cwnd-limited.
    pub(crate) fn tsq_write(&mut self, ctx: &mut Ctx) {
        self.push_or_tsq_write(ctx, true);
    }

    /// [`Tcb::write_xmit`], or with `always` [`Tcb::tsq_write`].
    fn push_or_tsq_write(&mut self, ctx: &mut Ctx, always: bool) {
        let rexmit_lost = core::mem::take(&mut self.rexmit_lost);
        if !self.can_send_data() {
            return;
        }
        // F-RTO step 2.b (tcp_xmit_recovery with REXMIT_NEW): new data first.
        let frto_new = core::mem::take(&mut self.frto_rexmit_new);
        // tcp_xmit_recovery's REXMIT_LOST after an ACK; tcp_tsq_write's own test.
        // A push (__tcp_push_pending_frames) retransmits nothing: after an ACK that
        // asked for nothing (a SACK reneging, a partial undo, an ACK in Disorder),
        // lost skbs wait for the next ACK or timer while new data may go.
        let tsq_lost = always
            && self.rtx.lost_out > self.rtx.retrans_out
            && self.cw.snd_cwnd > self.packets_in_flight();
        if !frto_new && (rexmit_lost || tsq_lost) {
            self.xmit_retransmit_queue(ctx);
        }
        let push_one = self.push_one;
        // tcp_push_pending_frames calls tcp_current_mss only with a send head;
        // tcp_tsq_write and tcp_xmit_recovery's REXMIT_NEW always.
        if always || frto_new || self.write_queue.front().is_some() {
            self.sync_dst_mtu(ctx);
            // tcp_xmit_recovery: REXMIT_NEW pushes with TCP_NAGLE_OFF as its own
            // nonagle, so neither TCP_CORK nor Nagle holds F-RTO's new data.
            let prior = match frto_new {
                true => self.push_nonagle.replace(TCP_NAGLE_OFF),
                false => self.push_nonagle,
            };
            self.tcp_write_xmit(ctx, push_one);
            self.push_nonagle = prior;
        }
        if frto_new && self.snd_nxt <= self.high_seq {
            self.frto = false;
            self.xmit_retransmit_queue(ctx);
        }
        self.arm_probe0_if_stalled(ctx);
    }

    /// `tcp_write_xmit`: sends new data from the write queue while cwnd, the
    /// peer's window, Nagle, TSO deferral, pacing and TCP Small Queues allow, an
    /// MTU probe first. `push_one` is Linux's: 0 for a push, 1 for `tcp_push_one`
    /// (one TSO packet, no MTU probe, no deferral), 2 for a tail loss probe
    /// (`tcp_send_loss_probe`: as 1, but sent even with cwnd full, as one segment
    /// then, and no loss probe scheduled for it).
    pub(crate) fn tcp_write_xmit(&mut self, ctx: &mut Ctx, push_one: u8) {
        let prior_nxt = self.snd_nxt;
        // An MTU probe first; waiting for one sends nothing.
        if push_one == 0 && self.mtu_probe(ctx) == super::mtu_probe::ProbeResult::Wait {
            return;
        }
        // write_one raises cw.is_cwnd_limited when cwnd (or TSO deferral on cwnd)
        // stops it: collect that for this call only, as tcp_write_xmit's local flag.
        let prior_limited = core::mem::replace(&mut self.cw.is_cwnd_limited, false);
        self.rwnd_limited = false;
        while self.write_queue.front().is_some() {
            if !self.write_one(ctx, push_one) || push_one != 0 {
                break;
            }
        }
        // The receive-window chrono follows the last attempt.
        if core::mem::take(&mut self.rwnd_limited) {
            self.chrono_start(ctx.now, super::chrono::Chrono::RwndLimited);
        } else {
            self.chrono_stop(ctx.now, super::chrono::Chrono::RwndLimited);
        }
        let sent = self.snd_nxt > prior_nxt;
        let is_cwnd_limited = core::mem::replace(&mut self.cw.is_cwnd_limited, prior_limited)
            || self.packets_in_flight() >= self.cw.snd_cwnd;
        if sent || is_cwnd_limited {
            self.cwnd_validate(ctx, is_cwnd_limited);
        }
        // "Send one loss probe per tail loss episode": not for the probe itself.
        if sent && push_one != 2 {
            self.schedule_loss_probe(ctx, false);
        }
    }

    /// Sends (part of) the head of the write queue; false when something limits it.
    fn write_one(&mut self, ctx: &mut Ctx, push_one: u8) -> bool {
        let mss = self.current_mss(ctx.cfg, ctx.now);
        if self.pacing_check(ctx.now) {
            return false;
        }
        // A loss probe goes even with cwnd full: one segment then.
        let quota = match self.cwnd_test() {
            0 if push_one == 2 => 1,
            0 => {
                self.cw.is_cwnd_limited = true;
                return false;
            }
            q => q,
        };
        let max_segs = self.tso_segs(ctx.cfg, mss);
        let quota = quota.min(max_segs);
        self.grow_skb(ctx.cfg, quota as u64 * mss as u64);
        let head = self.write_queue.front().expect("caller checked");
        let len = head.data.len() as u64;
        let (seq, flags, end_seq) = (head.seq, head.flags, head.end_seq());
        if !self.snd_wnd_test(seq, len, end_seq, mss) {
            self.rwnd_limited = true;
            return false;
        }
        // tcp_write_xmit: tcp_nagle_test rules the write queue's last skb only;
        // the others can get no more data (TCP_NAGLE_PUSH).
        let is_tail = self.write_queue.len() == 1;
        let nonagle = match is_tail {
            true => self.nonagle(),
            false => TCP_NAGLE_PUSH,
        };
        if len <= mss as u64 {
            if !self.nagle_test(len, flags, mss, nonagle) {
                return false;
            }
        } else if push_one == 0 {
            // tcp_tso_should_defer: an skb that gets no more data (FIN, MSG_EOR)
            // is not held for more.
            let last = flags & (FLAG_FIN | FLAG_EOR) != 0;
            if let Some(by) = self.tso_should_defer(ctx, (seq, len), last, is_tail, max_segs) {
                match by {
                    DeferredBy::Cwnd => self.cw.is_cwnd_limited = true,
                    DeferredBy::Rwnd => self.rwnd_limited = true,
                    DeferredBy::App => {}
                }
                return false;
            }
        }
        // tcp_write_xmit: one segment at a time in urgent mode, else up to
        // tcp_mss_split_point within cwnd's quota and the TSO goal, with the
        // push's own nonagle whether or not the skb is the tail: a window-limited
        // send of any skb leaves out a partial last segment Nagle would hold.
        let limit = match len > mss as u64 && !self.urg_mode() {
            true => self.mss_split_point((seq, len), mss, quota, is_tail, self.nonagle()),
            false => mss as u64,
        };
        let send_len = len.min(limit) as usize;
        if self.small_queue_check(ctx.cfg, send_len as u32 + SKB_OVERHEAD, 0) {
            return false;
        }
        // "Argh, we hit an empty skb(), presumably a thread is sleeping in
        // sendmsg()/sk_stream_wait_memory()": no pure ACK from the write queue.
        if end_seq == seq {
            return false;
        }
        self.send_new(ctx, send_len, mss);
        self.minshall_update(send_len, mss);
        true
    }

    /// `tcp_grow_skb` (Linux 6.10, 8ee602c63520 "tcp: try to send bigger TSO
    /// packets", with `tcp_eat_one_skb` from 1bede0a12d3a): before the head of the
    /// write queue is tested and sent, up to `want` bytes in all (cwnd's quota, at
    /// most the TSO goal, in bytes), it takes the missing bytes from the skb after
    /// it, so that a leftover of an earlier split does not go as a small packet
    /// followed by a full one. Only from the next skb, and only when the head may
    /// take data (`tcp_skb_can_collapse`: no `MSG_EOR` on the head) and neither
    /// carries zerocopy fragments (`skb_shift` refuses them); a next skb emptied
    /// is eaten: its FIN, PSH and EOR, its transmit timestamp request
    /// (`tcp_skb_collapse_tstamp`) and its skb's memory (`tcp_wmem_free_skb`).
    /// Kernels before it sized skbs at write time only, so with
    /// `experimental.size_goal_at = write` (seed 004's "before") nothing grows.
    pub(crate) fn grow_skb(&mut self, cfg: &Config, want: u64) {
        if cfg.size_goal_at == SizeGoalAt::Write {
            return;
        }
        let mut it = self.write_queue.iter_mut();
        let (Some(head), Some(next)) = (it.next(), it.next()) else {
            return; // tcp_skb_is_last
        };
        let amount = want.saturating_sub(head.data.len() as u64);
        // A SYN never waits in Linux's write queue; lowtide's Fast Open SYN may.
        if !skb::can_collapse_to(head.flags)
            || head.flags & FLAG_SYN != 0
            || head.zc.is_some()
            || next.zc.is_some()
        {
            return;
        }
        let nlen = amount.min(next.data.len() as u64) as usize;
        if nlen == 0 {
            return;
        }
        let head_range = (head.seq, head.seq + head.data.len() as u64);
        head.data.shift_from(&mut next.data, nlen);
        next.seq += nlen as u64;
        if !next.data.is_empty() {
            return;
        }
        // tcp_eat_one_skb: the emptied skb's flags (FIN: end_seq follows) and EOR
        // go to the head, then it is freed.
        head.flags |= next.flags;
        let next_range = (head_range.1, head.seq + head.data.len() as u64);
        self.write_queue.remove(1);
        self.wmem_free(SKB_OVERHEAD as u64);
        self.collapse_tstamp(head_range, next_range);
    }

    /// `tcp_cwnd_test`: how many segments cwnd lets the send head go with now; 0
    /// when none. At most half of cwnd per TSO packet, so that at least two are in
    /// flight "for better scheduling". Since Linux 6.10 ("tcp: remove dubious FIN
    /// exception from tcp_cwnd_test()") a FIN skb is no exception: it waits for
    /// cwnd as data does (a loss probe may still force it out, `push_one == 2`).
    fn cwnd_test(&self) -> u32 {
        let (in_flight, cwnd) = (self.packets_in_flight(), self.cw.snd_cwnd);
        if in_flight >= cwnd {
            return 0;
        }
        (cwnd - in_flight).min((cwnd >> 1).max(1))
    }

    /// `tcp_snd_wnd_test`: the first segment of the skb at `seq` (`len` bytes,
    /// ending at `end_seq`) fits in the peer's window.
    pub(super) fn snd_wnd_test(&self, seq: u64, len: u64, end_seq: u64, mss: u32) -> bool {
        let first_end = match len > mss as u64 {
            true => seq + mss as u64,
            false => end_seq,
        };
        first_end <= self.snd_una + self.snd_wnd as u64
    }

    /// Moves the first `send_len` bytes of the write queue head to the rtx queue and
    /// transmits them (`tso_fragment` + `tcp_event_new_data_sent`), as
    /// `tcp_write_xmit` does (for TLP's new data and an MTU probe too), which counts
    /// them in `prr_out` while `tcp_in_cwnd_reduction` (CWR or Recovery): PRR's
    /// "sent during the reduction" (RFC 6937), without which a reduction grows cwnd.
    pub(crate) fn send_new(&mut self, ctx: &mut Ctx, send_len: usize, mss: u32) {
        self.send_new_marked(ctx, send_len, mss, 0);
    }

    /// [`Tcb::send_new`] with `extra` flags on the part sent (an MTU probe's PSH
    /// from the skbs it took whole).
    pub(crate) fn send_new_marked(&mut self, ctx: &mut Ctx, send_len: usize, mss: u32, extra: u8) {
        let seq = self.snd_nxt;
        let pcount = self.send_new_flagged(ctx, send_len, mss, extra, false);
        self.count_prr_out(ctx, seq, pcount);
    }

    /// `tcp_write_xmit`'s and `tcp_xmit_retransmit_queue`'s `prr_out += pcount`
    /// while `tcp_in_cwnd_reduction`, for the packet at `seq` just handed to the
    /// device. Linux counts only what `tcp_transmit_skb` sent; lowtide hears of a
    /// local drop later, so the count is noted on the packet's TX token, and
    /// [`Tcb::on_tx_dropped`] takes it back. The packet is this socket's newest at
    /// `seq` in the device queue: the one just built, even when the send path put
    /// another packet (a pure ACK, whose `seq` is `snd_nxt`) after it.
    pub(crate) fn count_prr_out(&mut self, ctx: &mut Ctx, seq: u64, pcount: u32) {
        if !self.in_cwnd_reduction() {
            return;
        }
        self.prr_out += pcount;
        let high_seq = self.high_seq;
        if let Some(token) = self.tx_token_mut(ctx, seq) {
            token.prr = (pcount, high_seq);
        }
    }

    /// The TX token of this socket's latest packet at `seq` still waiting for the
    /// device in `ctx.out`: where a send notes what a local drop takes back.
    pub(crate) fn tx_token_mut<'c>(&self, ctx: &'c mut Ctx, seq: u64) -> Option<&'c mut TxToken> {
        let me = (self.handle.index, self.handle.generation, seq);
        ctx.out
            .iter_mut()
            .rev()
            .map(|tx| &mut tx.token)
            .find(|t| (t.index, t.generation, t.seq) == me)
    }

    /// [`Tcb::send_new`] with PSH on the part sent even when the head is split
    /// (`tcp_write_wakeup` marks the fragment it sends, and counts no `prr_out`).
    /// With `split`, the head is fragmented after `send_len` bytes even when that
    /// is all its data (`tcp_fragment(skb, len = skb->len)`): its FIN, PSH and
    /// EOR stay on the empty tail left in the write queue.
    pub(super) fn send_new_psh(&mut self, ctx: &mut Ctx, send_len: usize, mss: u32, split: bool) {
        self.send_new_flagged(ctx, send_len, mss, FLAG_PSH, split);
    }

    /// Sends the head's first `send_len` bytes (the whole head unless `split` or
    /// `send_len` is less than its data); returns their segments.
    fn send_new_flagged(
        &mut self,
        ctx: &mut Ctx,
        send_len: usize,
        mss: u32,
        extra: u8,
        split: bool,
    ) -> u32 {
        let head = self.write_queue.front_mut().expect("caller checked");
        let whole = send_len == head.data.len() && !split;
        let seq = head.seq;
        // tso_fragment's skb_split: the part sent references the uarg too, is
        // pure if the skb was, and keeps the truesize beyond the bytes moved.
        let (zc, slack) = (head.zc, head.slack);
        let unch_before = head.uncharged();
        let (data, flags) = if whole {
            let w = self.write_queue.pop_front().expect("exists");
            (w.data.freeze(), w.flags)
        } else {
            let d = head.data.split_to(send_len);
            head.seq += send_len as u64;
            head.slack = 0;
            // The fragment costs its own skb (Linux allocates one in tso_fragment).
            self.wmem_queued += SKB_OVERHEAD as u64;
            (d, head.flags & FLAG_SYN)
        };
        let unch_left = self.write_queue.front().filter(|_| !whole);
        let uncharged = (unch_before - unch_left.map_or(0, |w| w.uncharged())) as u32;
        self.wq_uncharged -= uncharged as u64;
        let flags = flags | extra;
        let fin = flags & FLAG_FIN != 0;
        let truesize = data.len() as u32 + SKB_OVERHEAD + slack;
        let end_seq = seq + data.len() as u64 + fin as u64;
        let tstamp = self.transmit(ctx, seq, flags, &data, truesize);
        // tcp_init_tso_segs / tso_fragment: tcp_set_skb_tso_segs at mss_now.
        let (pcount, gso_size) = skb::tso_segs(data.len() as u32, mss);
        // Stamped with its departure time (skb_mstamp_ns), as tcp_rate_skb_sent's
        // snapshot is.
        let tx = self.rate_skb_sent(tstamp);
        self.rtx.push(Skb {
            seq,
            end_seq,
            data,
            flags,
            sacked: 0,
            pcount,
            gso_size,
            tx_time: tstamp,
            truesize,
            tx,
            fclone: 0,
            zc,
            uncharged,
        });
        self.fclone_sent(ctx, seq);
        self.snd_nxt = end_seq;
        if matches!(
            self.icsk.pending,
            None | Some((Pending::Probe0 | Pending::LossProbe, _))
        ) {
            self.rearm_rto(ctx);
        }
        // tcp_event_new_data_sent: TCPOrigDataSent, tcp_check_space.
        ctx.mib.add(Mib::TcpExtTCPOrigDataSent, pcount as u64);
        self.check_space(ctx);
        pcount
    }

    /// `tcp_check_probe_timer`: arms the zero-window probe timer, at
    /// `tcp_probe0_base`, when data waits, nothing is in flight and no timer is set.
    fn arm_probe0_if_stalled(&mut self, ctx: &mut Ctx) {
        if self.rtx.packets_out == 0 && !self.write_queue.is_empty() && self.icsk.pending.is_none()
        {
            let base = self.probe0_base();
            self.reset_xmit_timer_paced(ctx.now, Pending::Probe0, base);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// A socket with `cwnd` and `in_flight` segments out.
    fn with_flight(cwnd: u32, in_flight: u32) -> Tcb {
        let mut t = Tcb::for_test(&Config::default());
        t.cw.snd_cwnd = cwnd;
        t.rtx.packets_out = in_flight;
        t
    }

    #[test]
    fn cwnd_test_gives_nothing_once_in_flight_reaches_cwnd() {
        assert_eq!(with_flight(10, 10).cwnd_test(), 0);
        assert_eq!(
            with_flight(10, 12).cwnd_test(),
            0,
            "cwnd cut below the flight"
        );
        assert_eq!(with_flight(1, 1).cwnd_test(), 0);
    }

    #[test]
    fn cwnd_test_gives_the_room_left_at_most_half_of_cwnd() {
        assert_eq!(
            with_flight(10, 0).cwnd_test(),
            5,
            "half: two TSO packets in flight"
        );
        assert_eq!(with_flight(10, 7).cwnd_test(), 3, "the room left");
        assert_eq!(with_flight(11, 0).cwnd_test(), 5);
        assert_eq!(with_flight(1, 0).cwnd_test(), 1, "at least one");
        assert_eq!(with_flight(2, 1).cwnd_test(), 1);
    }

    #[test]
    fn a_fin_skb_waits_for_cwnd_like_data() {
        // Linux 6.10 dropped "Don't be strict about the congestion window for the
        // final FIN": the test no longer looks at the skb.
        let cfg = Config::default();
        let mut st = crate::tcp::TestStack::default();
        let mut t = with_flight(10, 10);
        t.state = TcpState::FinWait1;
        t.mss_cache = 1000;
        (t.snd_una, t.snd_nxt, t.write_seq) = (1, 10_001, 10_001);
        t.snd_wnd = 1 << 20;
        t.write_queue.push_back(skb::WriteSkb::copied(
            10_001,
            bytes::BytesMut::new().into(),
            FLAG_FIN,
        ));
        t.write_xmit(&mut st.ctx(&cfg, crate::Instant(1_000_000_000), false));
        assert!(st.out.is_empty(), "held by a full cwnd");
        assert!(t.cw.is_cwnd_limited);
        t.rtx.packets_out = 9;
        t.write_xmit(&mut st.ctx(&cfg, crate::Instant(1_000_000_000), false));
        assert_eq!(st.out.len(), 1, "sent once cwnd has room");
        assert!(t.write_queue.is_empty());
        assert_eq!(t.snd_nxt, 10_002);
    }

    /// `tcp_push_pending_frames` runs `tcp_write_xmit` only with a send head: an
    /// ACK's push with nothing queued leaves `tcp_cwnd_validate` alone, though
    /// retransmissions fill cwnd (so slow start does not grow on a flight that
    /// never filled it); `tcp_tsq_write` (TSQ completion, pacing timer) runs it
    /// anyway and a full cwnd is cwnd-limited.
    #[test]
    fn an_empty_write_queue_is_not_validated_as_cwnd_limited_but_by_tsq() {
        let cfg = Config::default();
        let mut st = crate::tcp::TestStack::default();
        let mut validated = |tsq: bool| {
            let mut t = with_flight(10, 10);
            t.state = TcpState::Established;
            (t.snd_una, t.snd_nxt, t.write_seq) = (1, 10_001, 10_001);
            let ctx = &mut st.ctx(&cfg, crate::Instant(1_000_000_000), false);
            match tsq {
                false => t.write_xmit(ctx),
                true => t.tsq_write(ctx),
            }
            (t.cw.is_cwnd_limited, t.cw.max_packets_out)
        };
        assert_eq!(validated(false), (false, 0));
        assert_eq!(validated(true), (true, 10));
    }

    #[test]
    fn a_tso_deferral_on_the_peers_window_runs_the_rwnd_limited_chrono() {
        // tcp_write_xmit: tcp_tso_should_defer's is_rwnd_limited starts
        // TCP_CHRONO_RWND_LIMITED (tcpi_rwnd_limited) as a failed tcp_snd_wnd_test
        // does (41727549de3e "tcp: Do not underestimate rwnd_limited").
        let cfg = Config::default();
        let mut st = crate::tcp::TestStack::default();
        let mut t = with_flight(5, 0);
        t.state = TcpState::Established;
        t.mss_cache = 1000;
        (t.snd_una, t.snd_nxt, t.write_seq) = (1, 4001, 24_001);
        t.snd_wnd = 5_000; // one segment past snd_nxt: the first fits, no more
        t.rtt.est.srtt8 = 80_000; // 10 ms: the head's ACK is due at 10 ms
        t.rtx
            .push(Skb::sent_for_test(1, 4000, 4, crate::Instant::ZERO));
        t.write_queue.push_back(skb::WriteSkb::copied(
            4001,
            bytes::BytesMut::from(&[0u8; 20_000][..]).into(),
            0,
        ));
        let now = crate::Instant(9_500_000);
        t.pace.wstamp = crate::Instant(9_000_000);
        t.write_xmit(&mut st.ctx(&cfg, now, false));
        assert!(st.out.is_empty(), "deferred");
        assert_eq!(t.chrono.kind, super::super::chrono::Chrono::RwndLimited);
        assert!(!t.cw.is_cwnd_limited);
    }

    /// A write queue of skbs of these lengths from seq 1, with these flags.
    fn queued(t: &mut Tcb, skbs: &[(usize, u8)]) {
        let mut seq = 1;
        for &(len, flags) in skbs {
            t.write_queue.push_back(skb::WriteSkb::copied(
                seq,
                bytes::BytesMut::from(&vec![7u8; len][..]).into(),
                flags,
            ));
            t.wmem_queued += len as u64 + SKB_OVERHEAD as u64;
            seq += len as u64 + u64::from(flags & FLAG_FIN != 0);
        }
        t.write_seq = seq;
    }

    fn lens(t: &Tcb) -> Vec<(u64, usize, u8)> {
        t.write_queue
            .iter()
            .map(|w| (w.seq, w.data.len(), w.flags))
            .collect()
    }

    #[test]
    fn grow_skb_moves_the_missing_bytes_from_the_next_skb_only() {
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        queued(&mut t, &[(1_500, 0), (1_000, FLAG_PSH), (3_000, 0)]);
        let wmem = t.wmem_queued;
        // 4,000 wanted: 2,500 missing, the next skb has 1,000; the third is not
        // touched (one skb per call, as Linux).
        t.grow_skb(&cfg, 4_000);
        assert_eq!(lens(&t), vec![(1, 2_500, FLAG_PSH), (2_501, 3_000, 0)]);
        assert_eq!(
            t.wmem_queued,
            wmem - SKB_OVERHEAD as u64,
            "the eaten skb freed"
        );
        // Partly: the next skb keeps the rest and its own flags.
        t.write_queue[1].flags = FLAG_FIN;
        t.grow_skb(&cfg, 3_000);
        assert_eq!(
            lens(&t),
            vec![(1, 3_000, FLAG_PSH), (3_001, 2_500, FLAG_FIN)]
        );
        assert_eq!(t.write_queue[1].end_seq(), 5_502);
        // Nothing missing, or no next skb: nothing moves.
        t.grow_skb(&cfg, 3_000);
        assert_eq!(t.write_queue[0].data.len(), 3_000);
        // The rest with its FIN: end_seq follows.
        t.grow_skb(&cfg, 64_000);
        assert_eq!(lens(&t), vec![(1, 5_500, FLAG_PSH | FLAG_FIN)]);
        assert_eq!(t.write_queue[0].end_seq(), 5_502);
        t.grow_skb(&cfg, 64_000);
        assert_eq!(lens(&t), vec![(1, 5_500, FLAG_PSH | FLAG_FIN)]);
        let data = match &t.write_queue[0].data {
            skb::WriteData::Stored(b) => b.clone(),
            _ => unreachable!(),
        };
        assert!(
            data.iter().all(|&b| b == 7),
            "the bytes moved with their count"
        );
    }

    #[test]
    fn grow_skb_leaves_records_zerocopy_and_the_write_time_variant_alone() {
        let cfg = Config::default();
        for (head_flags, zc) in [
            (FLAG_EOR, (None, None)),
            (0, (Some(1), None)),
            (0, (None, Some(1))),
        ] {
            let mut t = Tcb::for_test(&cfg);
            queued(&mut t, &[(1_000, head_flags), (1_000, 0)]);
            (t.write_queue[0].zc, t.write_queue[1].zc) = zc;
            t.grow_skb(&cfg, 4_000);
            assert_eq!(t.write_queue.len(), 2, "{head_flags} {zc:?}");
        }
        // An EOR on the next skb does not stop it: it comes over when eaten.
        let mut t = Tcb::for_test(&cfg);
        queued(&mut t, &[(1_000, 0), (1_000, FLAG_EOR)]);
        t.grow_skb(&cfg, 4_000);
        assert_eq!(lens(&t), vec![(1, 2_000, FLAG_EOR)]);
        // Seed 004's "before" (size_goal_at = write): kernels without tcp_grow_skb.
        let write = Config {
            size_goal_at: SizeGoalAt::Write,
            ..Config::default()
        };
        let mut t = Tcb::for_test(&write);
        queued(&mut t, &[(1_000, 0), (1_000, 0)]);
        t.grow_skb(&write, 4_000);
        assert_eq!(t.write_queue.len(), 2);
    }

    #[test]
    fn an_eaten_skbs_timestamp_request_replaces_the_heads() {
        // tcp_skb_collapse_tstamp: one tskey per skb, the eaten skb's wins.
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.tstamp.flags = 0xffff;
        let keys = |t: &Tcb| t.tstamp.marks.iter().map(|m| m.key).collect::<Vec<_>>();
        queued(&mut t, &[(1_000, 0)]);
        t.tx_timestamp(); // the head's last byte: key 1000
        let mut more = Tcb::for_test(&cfg);
        queued(&mut more, &[(1_000, 0), (1_000, 0), (1_000, 0)]);
        t.write_queue
            .push_back(more.write_queue.remove(1).expect("second"));
        t.tx_timestamp(); // key 2000
        t.write_queue
            .push_back(more.write_queue.remove(1).expect("third"));
        assert_eq!(keys(&t), vec![1_000, 2_000]);
        // Partly: the next skb keeps its request, the head its own.
        t.grow_skb(&cfg, 1_500);
        assert_eq!(keys(&t), vec![1_000, 2_000]);
        // Eaten: the head's request gives way to the eaten skb's.
        t.grow_skb(&cfg, 4_000);
        assert_eq!(keys(&t), vec![2_000]);
        // An eaten skb with no request leaves the head's.
        t.grow_skb(&cfg, 4_000);
        assert_eq!((t.write_queue.len(), keys(&t)), (1, vec![2_000]));
    }

    #[test]
    fn write_xmit_sends_the_grown_head_as_one_packet() {
        // A 1,000-byte leftover ahead of a 20,000-byte skb, cwnd 10 and nothing in
        // flight: cwnd's quota is 5 segments, so 5,000 bytes go as one packet
        // instead of 1,000 then 4,000.
        let cfg = Config::default();
        for (at, first) in [(SizeGoalAt::Transmit, 5_000), (SizeGoalAt::Write, 1_000)] {
            let cfg = Config {
                size_goal_at: at,
                ..cfg.clone()
            };
            let mut st = crate::tcp::TestStack::default();
            let mut t = with_flight(10, 0);
            t.state = TcpState::Established;
            t.mss_cache = 1000;
            t.snd_wnd = 1 << 20;
            t.pace.pacing_rate = 1 << 30; // a 64 KB TSO goal
            queued(&mut t, &[(1_000, 0), (20_000, 0)]);
            t.write_xmit(&mut st.ctx(&cfg, crate::Instant(1_000_000_000), false));
            let sent: Vec<u32> = st.out.iter().map(|tx| tx.token.len).collect();
            assert_eq!(sent[0], first, "{at:?}: {sent:?}");
        }
    }

    #[test]
    fn a_push_syncs_the_route_mtu_only_with_a_send_head() {
        // tcp_push_pending_frames calls tcp_current_mss (which syncs a stale
        // icsk_pmtu_cookie to the route's MTU) only with a send head: an ACK with
        // nothing queued leaves the MSS; tcp_tsq_write syncs it always.
        let cfg = Config::default();
        let mut st = crate::tcp::TestStack::default();
        let mut t = with_flight(10, 0);
        t.state = TcpState::Established;
        (t.mss_cache, t.pmtu_cookie, t.dst.mtu) = (1460, 1500, 1000);
        t.write_xmit(&mut st.ctx(&cfg, crate::Instant(1_000_000_000), false));
        assert_eq!((t.pmtu_cookie, t.mss_cache), (1500, 1460), "nothing queued");
        t.tsq_write(&mut st.ctx(&cfg, crate::Instant(1_000_000_000), false));
        assert_eq!((t.pmtu_cookie, t.mss_cache), (1000, 960), "tcp_tsq_write");
        let mut t = with_flight(10, 0);
        t.state = TcpState::Established;
        (t.mss_cache, t.pmtu_cookie, t.dst.mtu, t.snd_wnd) = (1460, 1500, 1000, 1 << 20);
        queued(&mut t, &[(1_000, 0)]);
        t.write_xmit(&mut st.ctx(&cfg, crate::Instant(1_000_000_000), false));
        assert_eq!((t.pmtu_cookie, t.mss_cache), (1000, 960), "a send head");
    }

    /// `tcp_write_xmit` hands `tcp_mss_split_point` its own `nonagle` for every
    /// skb (only `tcp_nagle_test` takes `TCP_NAGLE_PUSH` for one that is not the
    /// tail): a send the peer's window ends stops at the last whole segment of an
    /// skb in the middle of the queue too, behind an unacked partial segment
    /// (Minshall) or corked, and goes to the window's edge with `TCP_NODELAY`.
    #[test]
    fn a_window_limited_middle_skb_leaves_out_the_partial_segment_nagle_holds() {
        let cfg = Config::default();
        for (what, sml, cork, nodelay, sent) in [
            ("minshall", 1_501, false, false, 2_000),
            ("no partial segment out", 1, false, false, 2_500),
            ("corked", 1, true, false, 2_000),
            ("nodelay", 1_501, false, true, 2_500),
        ] {
            let mut st = crate::tcp::TestStack::default();
            let mut t = with_flight(10, 0);
            t.state = TcpState::Established;
            t.mss_cache = 1000;
            t.pace.pacing_rate = 1 << 30; // a 64 KB TSO goal
            (t.cork, t.nodelay, t.snd_sml) = (cork, nodelay, sml);
            queued(&mut t, &[(5_000, 0), (5_000, 0)]);
            // 1,500 bytes out (1..1501), the queue from 1501; a window to 4001.
            for w in t.write_queue.iter_mut() {
                w.seq += 1_500;
            }
            (t.snd_una, t.snd_nxt, t.write_seq) = (1, 1_501, 11_501);
            t.snd_wnd = 4_000;
            t.rtx
                .push(Skb::sent_for_test(1, 1_500, 2, crate::Instant::ZERO));
            t.write_xmit(&mut st.ctx(&cfg, crate::Instant(1_000_000_000), false));
            assert_eq!(t.snd_nxt - 1_501, sent, "{what}");
            assert_eq!(t.write_queue.len(), 2, "{what}: the head is not the tail");
        }
    }

    #[test]
    fn snd_wnd_test_takes_the_first_segment_only() {
        let mut t = Tcb::for_test(&Config::default());
        (t.snd_una, t.snd_wnd) = (1, 1000);
        assert!(t.snd_wnd_test(1, 3000, 3001, 1000), "first segment fits");
        assert!(!t.snd_wnd_test(2, 3000, 3002, 1000));
        assert!(
            t.snd_wnd_test(1, 999, 1001, 1000),
            "a FIN on 999 bytes fits"
        );
        assert!(!t.snd_wnd_test(1, 1000, 1002, 1000), "its FIN does not");
    }
}
