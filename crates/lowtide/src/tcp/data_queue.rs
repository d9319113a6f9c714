//! The data path of tcp_input.c: `tcp_data_queue` (in order, duplicate, out of
//! window), `tcp_rcv_nxt_update`, `tcp_ofo_queue`, the connection's side of
//! `tcp_data_queue_ofo` (the queue itself is tcp/ofo.rs), `tcp_fin`, `tcp_data_ready`.

use super::consts::TCP_MAX_QUICKACKS;
use super::rcvqueue::Payload;
use super::sock::Tcb;
use super::{Ctx, TcpState};
use crate::mib::Mib;
use crate::socket::EventKind;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};

impl Tcb {
    /// `tcp_data_queue`: in-order data to the receive queue, out-of-order data to the
    /// OFO queue, duplicates answered with D-SACK; then the FIN.
    pub(crate) fn data_queue(&mut self, ctx: &mut Ctx, th: &TcpRepr, seq: u64, payload: Payload) {
        let fin = th.flags.contains(TcpFlags::FIN);
        let end_seq = seq + payload.len() as u64 + fin as u64;
        let after_fin = matches!(
            self.state,
            TcpState::CloseWait | TcpState::Closing | TcpState::LastAck
        );
        // tcp_rcv_state_process step 7 (RFC 9293 3.10.7.4): after the peer's FIN,
        // text at or above rcv_nxt is ignored (dropped, unanswered); TIME-WAIT is a
        // timewait socket's (tcp/minisocks.rs).
        if after_fin && seq >= self.rcv_nxt {
            // Not queued: tcp_rcv_state_process ends with tcp_drop_reason.
            return self.tcp_drop();
        }
        // From below rcv_nxt it goes on, as in FIN-WAIT-1/2: once the receive side
        // is shut (`sk_shutdown & RCV_SHUTDOWN`: the peer's FIN, shutdown(SHUT_RD) or
        // close(2)), new text resets the connection ("RFC 1122 says we MUST send a
        // reset"): TcpExtTCPAbortOnData, tcp_reset, and tcp_v4_do_rcv's `reset:`
        // answers with tcp_v4_send_reset built from the segment (seq = its ACK).
        let fin_wait = matches!(self.state, TcpState::FinWait1 | TcpState::FinWait2);
        if (after_fin || fin_wait)
            && (self.shut_rd || self.rcv_shutdown)
            && end_seq != seq
            && end_seq - fin as u64 > self.rcv_nxt
        {
            ctx.mib.inc(Mib::TcpExtTCPAbortOnData);
            let fl = self.reset_flow_label(ctx);
            super::reply::send_reset(ctx, (self.tuple, fl), th, payload.len(), self.md5_key());
            return self.tcp_reset(ctx);
        }
        if end_seq == seq {
            if th.flags.contains(TcpFlags::SYN) && seq < self.rcv_nxt {
                // The peer's SYN-ACK again, let through in SYN-RECV (simultaneous
                // open): its end_seq counts the SYN, so it is a duplicate, D-SACKed.
                self.old_data(ctx, seq, seq + 1);
            }
            return;
        }
        // "tp->rx_opt.dsack = 0": a D-SACK still unsent is forgotten.
        self.dsack = None;
        let rwin = self.receive_window() as u64;
        if seq == self.rcv_nxt {
            // In sequence but the window is closed: dropped, except a bare FIN
            // (some stacks send it in a loop at a zero window).
            if rwin == 0 && !(payload.is_empty() && fin) {
                ctx.mib.inc(Mib::TcpExtTCPZeroWindowDrop);
                return self.data_out_of_window();
            }
            return self.queue_and_out(ctx, th, seq, payload);
        }
        if end_seq <= self.rcv_nxt {
            // "A retransmit, 2nd most common case." (a FIN again included).
            return self.old_data(ctx, seq, end_seq);
        }
        if seq >= self.rcv_nxt + rwin {
            // Out of window, e.g. a zero-window probe (SKB_DROP_REASON_TCP_OVERWINDOW).
            return self.data_out_of_window();
        }
        if seq < self.rcv_nxt {
            // A partial duplicate: D-SACK its head, even if the tail is dropped.
            self.dsack_set(ctx, seq, self.rcv_nxt);
            if rwin == 0 {
                ctx.mib.inc(Mib::TcpExtTCPZeroWindowDrop);
                return self.data_out_of_window();
            }
            return self.queue_and_out(ctx, th, seq, payload);
        }
        self.ofo_data(ctx, th, seq, payload);
    }

    /// `tcp_data_queue`'s `queue_and_out:`: a segment that reaches `rcv_nxt` goes to
    /// the receive queue (its new bytes), its FIN to `tcp_fin`, and the out-of-order
    /// data it reaches follows (`tcp_ofo_queue`).
    fn queue_and_out(&mut self, ctx: &mut Ctx, th: &TcpRepr, seq: u64, payload: Payload) {
        let fin = th.flags.contains(TcpFlags::FIN);
        // tcp_rcv_established's fast path queues without tcp_try_rmem_schedule: its
        // skb fits sk_forward_alloc (even past sk_rcvbuf, the prediction having been
        // armed while there was room).
        // The segment's skb, for tcp_try_rmem_schedule and tcp_event_data_recv.
        let skb = self.rx_skb(ctx.cfg, payload.len() as u32);
        if !self.rx_fast_data && !self.try_rmem_schedule(ctx, seq, skb.truesize) {
            // ICSK_ACK_NOMEM | ICSK_ACK_NOW; dropped if the application has data to
            // read, else queued all the same (sk_forced_mem_schedule); a bare FIN is
            // always taken.
            self.schedule_ack_now();
            self.ack.nomem = true;
            // "sk->sk_data_ready(sk)" before the drop: the reader is woken even
            // though nothing new is queued (Linux 6.18 tcp_data_queue).
            self.sk_data_ready(ctx);
            if !self.rcv_queue.is_empty() && !payload.is_empty() {
                ctx.mib.inc(Mib::TcpExtTCPRcvQDrop);
                return self.tcp_drop(); // SKB_DROP_REASON_PROTO_MEM
            }
        }
        let fresh = payload.skip((self.rcv_nxt - seq) as usize);
        if !fresh.is_empty() {
            // tcp_try_coalesce: "Its possible this segment overlaps with prior
            // segment in queue": one that starts below rcv_nxt joins nothing.
            self.queue_skb_in_order(ctx, fresh, (self.rcv_nxt - seq) as u32);
        } else if fin && payload.is_empty() {
            self.queue_bare_fin(ctx);
        }
        if !payload.is_empty() {
            // tcp_event_data_recv on the whole segment: tcp_measure_rcv_mss, then
            // ato; tcp_grow_window.
            let len = payload.len() as u32;
            let seg = self.rx_gso_size(ctx.cfg, len);
            self.measure_rcv_mss(th, len, seg, skb.truesize);
            self.event_data_recv(ctx.now);
            self.save_lrcv_flowlabel(ctx); // tcp_event_data_recv
            self.ecn_check_ce(ctx, self.rx_ip_ecn);
            if len >= 128 {
                // tcp_grow_window(sk, skb, true): truesize_adjust leaves a buffer
                // with payload in its head (every one either device makes) whole.
                self.grow_window(ctx, len, skb.truesize, 0);
            }
        }
        if fin {
            self.fin_seq.get_or_insert(self.rcv_nxt);
            // tcp_fin purges the out-of-order queue.
            return self.try_consume_fin(ctx);
        }
        let had_ofo = !self.ofo.is_empty();
        // tcp_ofo_queue: what the queue held below the new rcv_nxt is a duplicate,
        // D-SACKed (tcp_dsack_extend, from dsack_high = rcv_nxt on entry).
        let dsack_high = self.rcv_nxt;
        let mut dup = self.dsack;
        let mut fin_taken = false;
        while let Some(s) = self
            .ofo
            .pop_in_order_dsack(self.rcv_nxt, dsack_high, &mut dup)
        {
            self.ofo_dsack_extend(ctx, &mut dup);
            // tcp_ofo_queue: the skb joins the receive queue's tail if it can
            // (tcp_try_coalesce: it starts at the tail's end and skb_try_coalesce
            // takes it), else it becomes the tail.
            let len = s.len();
            let (charge, joined) =
                self.rcv_queue
                    .coalesced_skb_charge(s.skb, len as u32, Some(s.to), s.at_rcv_nxt);
            if joined {
                ctx.mib.inc(Mib::TcpExtTCPRcvCoalesce);
                // kfree_skb_partial of a charged skb: sock_rfree uncharges it.
                self.uncharged += s.truesize as u64;
            }
            if len == 0 && !joined {
                // A FIN-only skb that joined no tail: queued and charged as it is.
                self.rcv_queue.push_fin(charge);
            }
            let pre = if joined { 0 } else { s.pre };
            self.rcv_queue.push_skb(s.data, (charge, joined), pre);
            self.rcv_queue.stamp(len, s.stamp, joined);
            if len > 0 {
                self.rcv_nxt_advance(ctx, len);
            }
            if s.fin {
                self.fin_seq.get_or_insert(self.rcv_nxt);
                // tcp_fin resets the SACK state, the D-SACK block with it.
                fin_taken = true;
                self.try_consume_fin(ctx);
                break;
            }
        }
        // tcp_ofo_queue's tcp_drop_reason of the skbs wholly below rcv_nxt.
        self.ofo_drops();
        // Segments dropped wholly below rcv_nxt on the walk's last step.
        if !fin_taken {
            self.ofo_dsack_extend(ctx, &mut dup);
        }
        if had_ofo && self.ofo.is_empty() {
            // RFC 5681 section 4.2: ACK at once when the gap is filled (tcp_data_queue:
            // ICSK_ACK_NOW once the out-of-order queue is empty; a partial fill moves
            // rcv_nxt, which tcp_ack_snd_check answers at once or, with data still
            // held, as the first ACK for the new rcv_nxt).
            self.schedule_ack_now();
        }
        self.fast_path_check();
    }

    /// `tcp_dsack_extend` for `tcp_ofo_queue`: `dup` is the D-SACK block as the
    /// walk left it; with none before, it is set (`tcp_dsack_set`, counted),
    /// else the one kept is widened.
    fn ofo_dsack_extend(&mut self, ctx: &mut Ctx, dup: &mut Option<(u64, u64)>) {
        if *dup == self.dsack {
            return;
        }
        match (self.dsack, *dup) {
            (Some(_), d) => self.dsack_moved(d),
            (None, Some((s, e))) => {
                self.dsack_set(ctx, s, e);
                *dup = self.dsack;
            }
            (None, None) => {}
        }
    }

    /// The D-SACK block set or widened to `block` outside [`Tcb::dsack_set`]: its
    /// start is `tp->duplicate_sack[0].start_seq`, which `tcp_rcv_spurious_retrans`
    /// compares a duplicate's sequence with (tcp/accecn_opt.rs).
    fn dsack_moved(&mut self, block: Option<(u64, u64)>) {
        self.dsack = block;
        if let Some((s, _)) = block {
            self.accecn.last_dsack_start = Some(s);
        }
    }

    /// Queues in-order `data`, charged as received segments (tcp/rmem.rs).
    pub(super) fn queue_in_order(&mut self, ctx: &mut Ctx, data: Payload) {
        self.queue_skb_in_order(ctx, data, 0);
    }

    /// `tcp_queue_rcv`: in-order `data` of a segment that started at `rcv_nxt` or
    /// `pre` bytes below it (queued whole, those bytes a duplicate), joined to the
    /// receive queue's tail skb if `tcp_try_coalesce` takes it.
    fn queue_skb_in_order(&mut self, ctx: &mut Ctx, data: Payload, pre: u32) {
        let skb = self.rx_skb(ctx.cfg, data.len() as u32);
        let (truesize, coalesced) =
            self.rcv_queue
                .coalesced_skb_charge(skb, data.len() as u32, None, pre == 0);
        if coalesced {
            ctx.mib.inc(Mib::TcpExtTCPRcvCoalesce); // tcp_try_coalesce
        }
        self.rcv_queue
            .push_payload(ctx.frag, data, (truesize, coalesced), pre);
        let stamp = super::rcvqueue::RxStamp::arrival(ctx);
        self.rcv_queue.stamp(data.len(), stamp, coalesced);
        self.rcv_nxt_advance(ctx, data.len());
    }

    /// `tcp_queue_rcv` for a bare FIN at `rcv_nxt`: `tcp_try_coalesce` merges the
    /// zero-length skb into the receive queue's tail (its flags, its stamp), counted
    /// as any other; on an empty queue it is queued as it is, charged its truesize
    /// until a read takes the end of the stream. `tcp_fin` follows.
    fn queue_bare_fin(&mut self, ctx: &mut Ctx) {
        let skb = self.rx_skb(ctx.cfg, 0);
        let (charge, coalesced) = self.rcv_queue.coalesced_skb_charge(skb, 0, None, true);
        if coalesced {
            ctx.mib.inc(Mib::TcpExtTCPRcvCoalesce); // tcp_try_coalesce
        } else {
            // tcp_add_receive_queue and skb_set_owner_r: an skb of its own, charged.
            self.rcv_queue.push_fin(charge);
        }
        let stamp = super::rcvqueue::RxStamp::arrival(ctx);
        self.rcv_queue.stamp(0, stamp, coalesced);
    }

    /// `tcp_rcv_nxt_update` for `len` bytes just queued in order, and the reader's
    /// wakeup.
    fn rcv_nxt_advance(&mut self, ctx: &mut Ctx, len: usize) {
        self.rcv_nxt += len as u64;
        self.bytes_received += len as u64;
        self.ack.pending = true;
        // tcp_data_ready even after shutdown(SHUT_RD): the data stays queued and
        // readable (tcp_recvmsg returns queued data before it looks at RCV_SHUTDOWN).
        self.data_ready(ctx);
    }

    /// `tcp_data_ready`: wake the reader (`sk_data_ready`) once `tcp_epollin_ready`
    /// holds for `sk_rcvlowat`, or the stream is done (`SOCK_DONE`).
    pub(crate) fn data_ready(&mut self, ctx: &mut Ctx) {
        let target = self.rcvlowat as usize;
        if !(self.epollin_ready(target, ctx.mem.under_pressure()) || self.sock_done()) {
            return;
        }
        self.sk_data_ready(ctx);
    }

    /// `sk->sk_data_ready` (`sock_def_readable`) itself: every call wakes the
    /// socket's waiters (an `EPOLLET` item is put on the ready list and reports what
    /// `tcp_poll` finds then), whatever `SO_RCVLOWAT` says. `tcp_data_ready` calls it
    /// once the reader can be satisfied; `tcp_data_queue` and `tcp_data_queue_ofo`
    /// call it directly when a segment finds no memory, dropped or not.
    pub(crate) fn sk_data_ready(&mut self, ctx: &mut Ctx) {
        self.data_ready_count += 1;
        if !self.readable_signaled && !self.rcv_queue.is_empty() {
            self.readable_signaled = true;
            self.notify(ctx, EventKind::Readable);
        }
    }

    /// Data wholly below `rcv_nxt`: a duplicate
    /// ([RFC 2883 section 4](https://www.rfc-editor.org/rfc/rfc2883#section-4): D-SACK it).
    fn old_data(&mut self, ctx: &mut Ctx, seq: u64, end: u64) {
        // tcp_data_queue: "a retransmit, 2nd most common case. Force an immediate ack."
        self.rehash_on_duplicate_data(ctx);
        self.rcv_spurious_retrans(seq);
        ctx.mib.inc(Mib::TcpExtDelayedACKLost);
        self.dsack_set(ctx, seq, end);
        self.data_out_of_window();
    }

    /// `tcp_data_queue`'s `out_of_window:`: the segment is dropped and answered at
    /// once, in quick-ACK mode (`tcp_enter_quickack_mode`, `inet_csk_schedule_ack`).
    fn data_out_of_window(&mut self) {
        self.enter_quickack_mode(TCP_MAX_QUICKACKS);
        self.ack.pending = true;
        self.tcp_drop(); // `drop:`
    }

    /// Data above a hole (`tcp_data_queue_ofo`), its FIN with it: to the OFO queue if
    /// memory allows (tcp/rmem.rs; else dropped, not ACKed), the ACK left to
    /// `tcp_ack_snd_check`.
    pub(crate) fn ofo_data(&mut self, ctx: &mut Ctx, th: &TcpRepr, seq: u64, payload: Payload) {
        let fin = th.flags.contains(TcpFlags::FIN);
        let len = payload.len() as u32;
        self.save_lrcv_flowlabel(ctx);
        self.ecn_check_ce(ctx, self.rx_ip_ecn);
        let skb = self.rx_skb(ctx.cfg, len);
        if !self.try_rmem_schedule(ctx, seq, skb.truesize) {
            ctx.mib.inc(Mib::TcpExtTCPOFODrop);
            // tcp_data_queue_ofo wakes the reader before the drop.
            self.sk_data_ready(ctx);
            return self.tcp_drop(); // SKB_DROP_REASON_PROTO_MEM
        }
        // tcp_data_queue_ofo measures the segment once memory took it (Linux 6.17,
        // "tcp: call tcp_measure_rcv_mss() for ooo packets"): one dropped above
        // leaves rcv_mss and scaling_ratio, which tcp_collapse judged by, alone.
        let seg = self.rx_gso_size(ctx.cfg, len);
        self.measure_rcv_mss(th, len, seg, skb.truesize);
        ctx.mib.inc(Mib::TcpExtTCPOFOQueue);
        // tcp_data_queue_ofo: header prediction off; inet_csk_schedule_ack, before
        // the segment is queued: an ACK that tcp_sack_new_ofo_skb sends below takes
        // it (tcp_event_ack_sent), else tcp_ack_snd_check decides (tcp/compsack.rs).
        self.fast_path_off();
        self.ack.pending = true;
        // tcp_data_queue_ofo: max(1, gso_segs) of the packet.
        self.rcv_ooopack += self.rx_gso_segs(ctx.cfg, len);
        // In one piece, in a buffer of its own as Linux's skb: a slice of the shared
        // arenas would keep a whole arena alive for as long as a peer keeps one
        // segment above a hole.
        let mut own = Vec::with_capacity(payload.len());
        payload.for_each_chunk(|c| own.extend_from_slice(c));
        let stamp = super::rcvqueue::RxStamp::arrival(ctx);
        let segs = self.rx_segs;
        let ins = self
            .ofo
            .insert_seg_sack_later(seq, own.into(), fin, skb, stamp, segs);
        ctx.mib.add(Mib::TcpExtTCPOFOMerge, ins.merged as u64);
        self.ofo_drops();
        if ins.coalesced {
            ctx.mib.inc(Mib::TcpExtTCPRcvCoalesce); // tcp_ooo_try_coalesce
        }
        // tcp_dsack_set / tcp_dsack_extend: the segment's block (none is pending on
        // entry: tcp_data_queue forgot it), counted once.
        if let Some((s, e)) = ins.dup {
            self.dsack_set(ctx, s, e);
        }
        // tcp_data_queue_ofo: data above a hole opens the window too, except without
        // SACK ("do not grow window to force DUPACK") or when all of it was there:
        // a segment joined to the one before it at `coalesce_done:` (charged by
        // tcp_try_coalesce), before `add_sack:`; one queued on its own after it,
        // at `end:`, before skb_set_owner_r charges it.
        let grow = self.rx_opt.sack_ok && ins.queued && len > 0;
        if grow && ins.coalesced {
            self.grow_window(ctx, len, skb.truesize, 0);
        }
        // `add_sack:` tcp_sack_new_ofo_skb: ACKs held back go out (with the D-SACK
        // just set, and the blocks as they were) before the block this data extends
        // or opens moves past the first two (their news would be lost).
        if let Some((s, e)) = ins.add_sack {
            let slot = self.ofo.sack_slot(s, e);
            if self.rx_opt.sack_ok && slot >= super::compsack::TCP_SACK_BLOCKS_EXPECTED {
                self.sack_compress_send_ack(ctx);
            }
        }
        self.ofo.add_sack(&ins);
        if grow && !ins.coalesced {
            self.grow_window(ctx, len, skb.truesize, skb.truesize);
        }
        // tcp_data_queue_ofo (Linux 6.16+): provision the buffer for the OFO span,
        // "do not grow rcvbuf for not-yet-accepted or orphaned sockets" (no
        // sk->sk_socket: a child still in its listener's queue, or after close).
        if self.parent.is_none() && !self.errq.dead {
            self.rcvbuf_grow(ctx, self.rcvq_space);
        }
    }

    /// `SOCK_DONE`: the peer's FIN was taken (`tcp_fin` sets it; a reset's
    /// `tcp_done` shuts the socket, `rcv_shutdown`, without it).
    pub(crate) fn sock_done(&self) -> bool {
        self.fin_seq.is_some_and(|fin| self.rcv_nxt > fin)
    }

    /// Once all data before the peer's FIN is in, take the FIN (`tcp_fin`).
    pub(super) fn try_consume_fin(&mut self, ctx: &mut Ctx) {
        let Some(fin) = self.fin_seq else { return };
        // A FIN again is a duplicate (data_queue's old data); one above a hole waits.
        if fin != self.rcv_nxt || self.rcv_shutdown {
            return;
        }
        self.rcv_nxt += 1;
        self.bytes_received += 1; // tcp_rcv_nxt_update: the FIN's sequence number counts
        self.rcv_shutdown = true;
        // tcp_data_queue's tcp_data_ready after tcp_fin: SOCK_DONE wakes the reader.
        self.data_ready_count += 1;
        self.notify(ctx, EventKind::ReadHangUp);
        // tcp_fin: in SYN-RECV and ESTABLISHED the ACK is only scheduled and the
        // connection enters pingpong mode (the application's reply, often its own
        // FIN, may carry it); in FIN-WAIT-1 and 2 it goes at once, a pure ACK
        // before any data the same segment lets out (tcp_data_snd_check comes after).
        match self.state {
            TcpState::SynRecv | TcpState::Established => {
                self.ack.pending = true;
                self.enter_pingpong_mode(ctx.cfg);
                self.state = TcpState::CloseWait;
            }
            TcpState::FinWait1 => {
                // tcp_fin: "simultaneous close": tcp_send_ack, then CLOSING.
                self.send_ack(ctx);
                self.state = TcpState::Closing;
            }
            TcpState::FinWait2 => {
                // tcp_fin: tcp_send_ack, then tcp_time_wait.
                self.send_ack(ctx);
                self.enter_time_wait(ctx);
            }
            _ => self.schedule_ack_now(),
        }
        // tcp_fin, after the ACK above (which still carries the SACK blocks): "It
        // _is_ possible, that we have something out-of-order _after_ FIN. [...] For
        // now drop them.", and tcp_sack_reset (the D-SACK too).
        self.ofo.purge();
        if self.rx_opt.sack_ok {
            self.dsack = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::rcvqueue::Payload;
    use crate::tcp::skbuff::RxAlloc;

    /// In-order data past `sk_rcvbuf` while other data waits unread: the slow path
    /// (`tcp_data_queue`) drops it after `tcp_prune_queue` (`TcpExtTCPRcvQDrop`),
    /// the fast path queues it on the reserve header prediction found for it
    /// (`tcp_queue_rcv`), as Linux 6.18 does
    /// (tests/packetdrill/rcvbuf-lowered-fast-path-queues-on-reserve.pkt).
    #[test]
    fn the_fast_path_queues_past_rcvbuf_the_slow_path_drops() {
        let cfg = Config::default();
        for fast in [false, true] {
            let mut t = Tcb::for_test(&cfg);
            t.state = TcpState::Established;
            (t.rcv_nxt, t.rcv_wup, t.rcv_wnd) = (1001, 1001, 65535);
            (t.rcvbuf, t.rcvbuf_locked) = (1000, true);
            t.rcv_queue.push(vec![0u8; 1000].into(), 1100);
            let mut st = crate::tcp::TestStack::default();
            let mut ctx = st.ctx(&cfg, crate::time::Instant(1_000_000_000), false);
            t.rx_fast_data = fast;
            let th = TcpRepr::default();
            t.data_queue(&mut ctx, &th, 1001, Payload::Flat(&[0u8; 1000]));
            let drops = ctx.mib.get(Mib::TcpExtTCPRcvQDrop);
            let expect = if fast { (2001, 0) } else { (1001, 1) };
            assert_eq!((t.rcv_nxt, drops), expect, "fast path {fast}");
        }
    }

    /// A receiver through packetdrill's tun (`RxAlloc::Tun`) after the handshake,
    /// SACK on.
    fn tun_established(cfg: &Config) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = TcpState::SynRecv;
        t.rx_opt.sack_ok = true;
        (t.rcv_nxt, t.rcv_wup, t.advmss, t.mss_cache) = (1, 1, 1460, 1000);
        let mss = t.initial_window_mss();
        t.select_initial_window(cfg, mss, true, 0);
        t.state = TcpState::Established;
        t.init_rcv_buffer_space(cfg);
        t
    }

    /// A stack whose segments come through packetdrill's tun, at 1 s.
    struct TunRx {
        cfg: Config,
        st: crate::tcp::TestStack,
    }

    impl TunRx {
        fn new() -> Self {
            let cfg = Config {
                rx_alloc: RxAlloc::Tun,
                ..Config::default()
            };
            let st = crate::tcp::TestStack::default();
            TunRx { cfg, st }
        }

        /// [`tun_established`] with `SO_RCVBUF` locked at 8192 bytes.
        fn small_locked_rcvbuf(&self) -> Tcb {
            let mut t = tun_established(&self.cfg);
            (t.rcvbuf, t.rcvbuf_locked) = (8192, true);
            t
        }

        /// `len` bytes of data at `seq`, in a packet with 40 bytes of headers;
        /// returns the stack's `counter` after it.
        fn feed(&mut self, t: &mut Tcb, seq: u64, len: usize, counter: Mib) -> u64 {
            let mut ctx = self
                .st
                .ctx(&self.cfg, crate::time::Instant(1_000_000_000), false);
            t.rx_pkt_len = len as u32 + 40;
            let th = TcpRepr::default();
            t.data_queue(&mut ctx, &th, seq, Payload::Flat(&vec![7u8; len]));
            ctx.mib.get(counter)
        }
    }

    /// `tcp_prune_queue`'s "Massive buffer overcommit" (Linux 6.18,
    /// tests/packetdrill/rcv-prune-fails-fast-path-off.pkt): a segment that pruning
    /// cannot make room for (TcpExtRcvPruned) turns header prediction off, which
    /// `tcp_fast_path_check` does not turn back on while memory is past `sk_rcvbuf`.
    #[test]
    fn a_failed_prune_turns_header_prediction_off() {
        let mut rx = TunRx::new();
        let mut t = rx.small_locked_rcvbuf();
        t.fast_path_on(); // tcp_rcv_state_process, SYN-RECV
        let mut feed = |t: &mut Tcb, seq| rx.feed(t, seq, 1000, Mib::TcpExtRcvPruned);
        for seq in [1, 1001, 2001, 3001] {
            assert_eq!(feed(&mut t, seq), 0);
        }
        assert_eq!(t.rmem_alloc(), 4 * 2304, "past sk_rcvbuf");
        assert!(t.pred_wnd.is_some(), "nothing turned it off yet");
        assert_eq!(feed(&mut t, 5001), 1, "out of order: pruning frees nothing");
        assert_eq!((t.pred_wnd, t.rcv_nxt), (None, 4001));
        t.fast_path_check();
        assert_eq!(t.pred_wnd, None, "memory is still past sk_rcvbuf");
    }

    /// `tcp_data_queue_ofo` (Linux 6.18, tests/packetdrill/rcv-ofo-drop-unmeasured.pkt):
    /// an out-of-order segment is measured (`tcp_measure_rcv_mss`: `rcv_mss`,
    /// `scaling_ratio`) only once `tcp_try_rmem_schedule` took it, so one too big for
    /// the buffer is dropped (TcpExtTCPOFODrop) with both as they were, and
    /// `tcp_collapse` judges the queued skbs by the old ratio (not bloated: nothing
    /// freed for it). Measured first, the bigger segment's ratio made them look
    /// bloated and collapsing them made room.
    #[test]
    fn an_ofo_segment_dropped_for_memory_is_not_measured() {
        let mut rx = TunRx::new();
        let mut t = rx.small_locked_rcvbuf();
        let mut feed = |t: &mut Tcb, seq, len| rx.feed(t, seq, len, Mib::TcpExtTCPOFODrop);
        for seq in [1, 1001, 2001, 3001] {
            assert_eq!(feed(&mut t, seq, 1000), 0);
        }
        let (mss, ratio) = (t.ack.rcv_mss, t.scaling_ratio);
        assert_eq!((mss, t.rmem_alloc()), (1000, 4 * 2304));
        assert_eq!(feed(&mut t, 5001, 1400), 1, "no room: dropped");
        assert_eq!((t.ack.rcv_mss, t.scaling_ratio), (mss, ratio));
        assert_eq!((t.rmem_alloc(), t.ofo.is_empty()), (4 * 2304, true));
    }

    /// `tcp_data_queue_ofo`'s D-SACK (tests/packetdrill/rcv-ofo-dsack-forgotten-per-segment.pkt):
    /// set by `tcp_dsack_set` or `tcp_dsack_extend`, counted once, and its start is
    /// `duplicate_sack[0].start_seq` (what `tcp_rcv_spurious_retrans` compares a
    /// duplicate with); the next segment forgets an unsent block on entry.
    #[test]
    fn an_ofo_dsack_moves_the_duplicate_sack_start() {
        let mut rx = TunRx::new();
        let mut t = tun_established(&rx.cfg);
        let sent = Mib::TcpExtTCPDSACKOfoSent;
        assert_eq!(rx.feed(&mut t, 1001, 1000, sent), 0);
        assert_eq!(rx.feed(&mut t, 3001, 1000, sent), 0);
        assert_eq!(rx.feed(&mut t, 1001, 500, sent), 1, "wholly present: set");
        assert_eq!(
            (t.dsack, t.accecn.last_dsack_start),
            (Some((1001, 1501)), Some(1001))
        );
        // Same start, covering the skb at 3001: tcp_dsack_extend finds no block
        // (forgotten on entry) and sets one.
        assert_eq!(rx.feed(&mut t, 3001, 1500, sent), 2);
        assert_eq!(
            (t.dsack, t.accecn.last_dsack_start),
            (Some((3001, 4001)), Some(3001))
        );
        // New data above the holes: no D-SACK, the last start kept.
        assert_eq!(rx.feed(&mut t, 6001, 100, sent), 2);
        assert_eq!((t.dsack, t.accecn.last_dsack_start), (None, Some(3001)));
    }

    /// `tcp_ofo_queue` -> `tcp_try_coalesce` (Linux 6.18,
    /// tests/packetdrill/rcv-ofo-prune-coalesce.pkt): the out-of-order skb a filled
    /// hole reaches joins the receive queue's tail when `skb_try_coalesce` takes it
    /// (here: copied into the tailroom, charged nothing, its own charge freed),
    /// counted TcpExtTCPRcvCoalesce, and the tail it joined stays the tail; one
    /// that does not fit becomes the tail. A segment that starts below `rcv_nxt`
    /// joins nothing ("this segment overlaps with prior segment in queue").
    #[test]
    fn a_filled_hole_joins_out_of_order_skbs_to_the_tail() {
        let mut rx = TunRx::new();
        let mut t = tun_established(&rx.cfg);
        let mut feed = |t: &mut Tcb, seq, len| rx.feed(t, seq, len, Mib::TcpExtTCPRcvCoalesce);
        // A 1040-byte packet: a 2048-byte head, 624 bytes of tailroom.
        assert_eq!(feed(&mut t, 1, 1000), 0);
        assert_eq!(feed(&mut t, 1101, 100), 0);
        assert_eq!(feed(&mut t, 1201, 600), 0);
        let ofo = t.ofo.truesize();
        assert_eq!((t.rmem_alloc(), ofo), (2304 + 832 + 1280, 832 + 1280));
        // 100 bytes and the 100 after them fit; the 600 after those do not.
        assert_eq!(feed(&mut t, 1001, 100), 2);
        assert_eq!((t.rcv_nxt, t.rcv_queue.len()), (1801, 1800));
        assert_eq!(t.rmem_alloc(), 2304 + 1280, "the joined skb's charge freed");
        // The 600-byte skb is the tail now: 1024 - 320 - 64 - 640 = 0 tailroom
        // (the counts add up).
        assert_eq!(feed(&mut t, 1801, 10), 2);
        // A partial duplicate (1811 below rcv_nxt) joins nothing, though the
        // 10-byte skb before it has room.
        assert_eq!(feed(&mut t, 1806, 20), 2);
        assert_eq!(t.rcv_nxt, 1826);
        assert_eq!(t.rcv_queue.truesize(), 2304 + 1280 + 2 * 576 + 2 * 256);
    }

    /// `tcp_queue_rcv` / `tcp_ofo_queue` / `tcp_data_queue_ofo` ->
    /// `tcp_try_coalesce` for a bare FIN (Linux 6.18,
    /// tests/packetdrill/rcv-coalesce-bare-fin.pkt): `skb_try_coalesce` takes a
    /// zero-length skb into any skb (its tailroom, 0 for a paged one, fits
    /// nothing), so a FIN at `rcv_nxt` joins the unread tail (counted
    /// TcpExtTCPRcvCoalesce, its stamp taken); on an empty queue it joins nothing;
    /// above a hole it joins the out-of-order skb before it, and that skb the
    /// tail once the hole fills.
    #[test]
    fn a_bare_fin_joins_the_skb_before_it() {
        for rx_alloc in [RxAlloc::Tun, RxAlloc::PageFrag] {
            let cfg = Config {
                rx_alloc,
                ..Config::default()
            };
            // Receive timestamps on: stamped skbs.
            let mut st = crate::tcp::TestStack {
                netstamp: true,
                ..Default::default()
            };
            let data = TcpRepr::default();
            let fin = TcpRepr {
                flags: TcpFlags::FIN | TcpFlags::ACK,
                ..TcpRepr::default()
            };
            let mut feed = |t: &mut Tcb, th: &TcpRepr, seq: u64, len: usize, ms: u64| {
                let now = crate::time::Instant(ms * 1_000_000);
                let mut ctx = st.ctx(&cfg, now, false);
                t.rx_pkt_len = len as u32 + 40;
                t.data_queue(&mut ctx, th, seq, Payload::Flat(&vec![7u8; len]));
                ctx.mib.get(Mib::TcpExtTCPRcvCoalesce)
            };
            // Unread data, then the FIN: it joins, and the data reads with the
            // FIN's stamp.
            let mut t = tun_established(&cfg);
            assert_eq!(feed(&mut t, &data, 1, 1000, 1), 0);
            assert_eq!(feed(&mut t, &fin, 1001, 0, 2), 1, "{rx_alloc:?}");
            assert_eq!((t.rcv_nxt, t.rcv_shutdown), (1002, true));
            let two = crate::time::Instant(2_000_000);
            assert_eq!(t.rcv_queue.rx_tstamp(0, 10), Some(Some(two)));
            // All read: nothing to join (the counter is the stack's: it stays 1).
            let mut t = tun_established(&cfg);
            feed(&mut t, &data, 1, 1000, 1);
            t.rcv_queue.read(usize::MAX, |_| {});
            assert_eq!(feed(&mut t, &fin, 1001, 0, 2), 1);
            assert_eq!(t.rcv_nxt, 1002);
            // Above a hole: the FIN joins the skb before it. The filled hole then
            // joins the tail, and the out-of-order skb after it, as frags of a
            // NIC's page fragments; a tun head has too little tailroom left for
            // 100 bytes and is locked: nothing joins.
            let mut t = tun_established(&cfg);
            feed(&mut t, &data, 1, 100, 1);
            feed(&mut t, &data, 201, 100, 1);
            assert_eq!(feed(&mut t, &fin, 301, 0, 1), 2);
            let joined = feed(&mut t, &data, 101, 100, 1);
            let expect = if rx_alloc == RxAlloc::Tun { 2 } else { 4 };
            assert_eq!((joined, t.rcv_nxt), (expect, 302), "{rx_alloc:?}");
        }
    }
    /// `tcp_queue_rcv` of a bare FIN that finds no tail skb (Linux 6.18,
    /// tests/packetdrill/rcv-bare-fin-skb-charged-until-read.pkt): queued as an
    /// skb of its own (`tcp_add_receive_queue`) and charged its truesize
    /// (`skb_set_owner_r`: `SK_MEMINFO_RMEM_ALLOC` 832 through the tun) while no
    /// byte is readable (`tcp_inq` 0); a peek leaves it, the read that returns
    /// the end of the stream frees it (`found_fin_ok`, `tcp_eat_recv_skb`).
    #[test]
    fn a_bare_fin_on_an_empty_queue_is_charged_until_read() {
        let cfg = Config {
            rx_alloc: RxAlloc::Tun,
            ..Config::default()
        };
        let mut st = crate::tcp::TestStack::default();
        let mut t = tun_established(&cfg);
        let fin = TcpRepr {
            flags: TcpFlags::FIN | TcpFlags::ACK,
            ..TcpRepr::default()
        };
        let mut ctx = st.ctx(&cfg, crate::time::Instant(1_000_000_000), false);
        t.rx_pkt_len = 1052;
        t.data_queue(
            &mut ctx,
            &TcpRepr::default(),
            1,
            Payload::Flat(&[7u8; 1000]),
        );
        let mut buf = [0u8; 2000];
        assert_eq!(t.recvmsg(&mut ctx, &mut buf), Ok(1000));
        assert_eq!(t.rmem_alloc(), 0);
        t.rx_pkt_len = 52;
        t.data_queue(&mut ctx, &fin, 1001, Payload::Flat(&[]));
        assert_eq!((t.rcv_nxt, t.rcv_queue.len()), (1002, 0));
        assert_eq!(t.rmem_alloc(), 832, "the FIN's skb is charged");
        assert_eq!(t.peek(0, &mut buf), Ok(0));
        assert_eq!(t.rmem_alloc(), 832, "a peek leaves it");
        assert_eq!(t.recvmsg(&mut ctx, &mut buf), Ok(0));
        assert_eq!(t.rmem_alloc(), 0, "the end of the stream read frees it");
        assert_eq!(t.recvmsg(&mut ctx, &mut buf), Ok(0));
    }
}
