//! tcp_minisocks.c `tcp_check_req` (Linux 6.18): a segment for a listener's child
//! still in its handshake, before the child's own processing. Linux keeps such a
//! child as a request sock (`TCP_NEW_SYN_RECV`) until the final ACK creates it, or
//! as a Fast Open child (`fastopen`) that exists from the SYN; lowtide keeps both as
//! a [`Tcb`] in SYN-RECV, and this is the request's side of them: a retransmitted SYN
//! gets the SYN-ACK again, a wrong ACK a reset from the listener, an out-of-window
//! segment or a reset not at `rcv_nxt` an ACK, a reset at `rcv_nxt` or a SYN in the
//! window ends the request (`embryonic_reset`), and the final ACK finds room in the listener's accept queue
//! or is dropped (`listen_overflow`, `tcp_abort_on_overflow`).

use super::consts::TCP_RTO_MAX;
use super::minisocks::{in_window, paws_reject};
use super::seq::Seq;
use super::sock::{ReqState, Tcb};
use super::{Ctx, TcpState};
use crate::config::Config;
use crate::mib::Mib;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};
use tracing::trace;

impl Tcb {
    /// A listener's child in its handshake: a request in SYN-RECV (it has a parent
    /// until accepted), or a Fast Open child while its request stays (SYN-RECV, or
    /// FIN-WAIT-1 if closed before the handshake ended: `tcp_rcv_state_process`).
    pub(crate) fn is_request_child(&self) -> bool {
        self.tfo.rsk.is_some() || self.is_request()
    }

    /// A listener's request in SYN-RECV (Linux's `TCP_NEW_SYN_RECV` request sock):
    /// not a Fast Open child, which exists from its SYN.
    pub(crate) fn is_request(&self) -> bool {
        self.state == TcpState::SynRecv && self.parent.is_some() && self.tfo.rsk.is_none()
    }

    /// `tcp_check_req`: true when the segment goes on to the child's processing
    /// (`tcp_child_process`, which repeats the usual checks); false when it was
    /// answered here or dropped. `len` is the payload's length.
    pub(crate) fn check_req(&mut self, ctx: &mut Ctx, th: &TcpRepr, len: usize) -> bool {
        let fastopen = self.tfo.rsk.is_some();
        let f = th.flags;
        let rst = f.contains(TcpFlags::RST);
        let seq = self.rcv_off(Seq(th.seq));
        let space =
            len as u64 + f.contains(TcpFlags::SYN) as u64 + f.contains(TcpFlags::FIN) as u64;
        let end = seq.saturating_add(space);
        // tcp_parse_options(estab = 0): a timestamp counts when tcp_timestamps is on.
        let ts = th.options.timestamp.filter(|_| ctx.cfg.tcp_timestamps);
        let tsval = ts.map(|t| t.0);
        let paws_reject = tsval.is_some_and(|v| self.req_paws_reject(v, rst));
        // Linux 6.15+ ("tcp: be less liberal in TSEcr received while in SYN_RECV
        // state"): a TSecr must echo one of the request's SYN-ACKs.
        let tsecr_reject = match ts {
            // A first TSval of 0: no SYN-ACK of its own (a SYN cookie's child, which
            // in Linux never reaches tcp_check_req).
            Some((_, ecr)) if ecr != 0 && self.rx_opt.tstamp_ok && !fastopen => {
                let (first, last) = self.req.snt_tsval;
                first != 0 && last.wrapping_sub(first) < ecr.wrapping_sub(first)
            }
            _ => false,
        };
        // A pure retransmitted SYN: our SYN-ACK was lost (inet_rtx_syn_ack, rate
        // limited). "Pure" reads RST, SYN and ACK only (flg = tcp_flag_word(th) &
        // (TCP_FLAG_RST|TCP_FLAG_SYN|TCP_FLAG_ACK)): ECE, CWR, PSH, FIN may be set.
        let flg = TcpFlags(f.0 & (TcpFlags::RST | TcpFlags::SYN | TcpFlags::ACK).0);
        if seq == 0 && flg == TcpFlags::SYN && !paws_reject {
            self.rtx_synack(ctx);
            return self.check_req_drop();
        }
        // RFC 793 page 36: an ACK of something not sent, in a non-synchronized state,
        // draws a reset, which the listener sends (`return sk`; tcp_v4_send_reset
        // never answers a reset). A Fast Open child checks its ACK itself, as it may
        // have sent data.
        if f.contains(TcpFlags::ACK) && !fastopen && self.snd_off(Seq(th.ack)) != 1 {
            if !rst {
                self.listener_cookie_check(ctx, th);
                self.listener_reset(ctx, th, len);
            }
            // The listener's reset (tcp_v4_do_rcv's `reset:`): no sk_drops.
            return false;
        }
        // RFC 793: "first check sequence number", against the SYN-ACK's window
        // (tcp_synack_window).
        let s_win = self.rcv_seq(self.rcv_nxt);
        let (wire_seq, wire_end) = (Seq(th.seq), Seq(th.seq) + space as u32);
        let in_window = in_window(wire_seq, wire_end, s_win, s_win + self.synack_window());
        if paws_reject || tsecr_reject || !in_window {
            // Out of window: an ACK, and drop.
            if !rst && !self.oow_rate_limited(ctx, Mib::TcpExtTCPACKSkippedSynRecv) {
                self.req_send_ack(ctx);
            }
            if paws_reject {
                ctx.mib.inc(Mib::TcpExtPAWSEstab);
            } else if tsecr_reject {
                ctx.mib.inc(Mib::TcpExtTSEcrRejected);
            }
            return self.check_req_drop();
        }
        // RFC 5961 section 3.2 for a request too, as Linux 6.18 behaves (checked with
        // scripts/packetdrill --kernel; the copies of tcp_minisocks.c searched here
        // predate it): a reset in the window but not at rcv_nxt draws the request's
        // challenge ACK and is dropped; the request stays.
        if rst && seq != self.rcv_nxt {
            self.req_challenge_ack(ctx);
            return self.check_req_drop();
        }
        // A SYN at rcv_isn lies out of the window that starts after it: truncated.
        let syn = f.contains(TcpFlags::SYN) && seq != 0;
        // RFC 793: "second check the RST bit" and "fourth, check the SYN bit".
        if rst || syn {
            ctx.mib.inc(Mib::TcpAttemptFails);
            self.embryonic_reset(ctx, th, len);
            return self.check_req_drop();
        }
        // The ACK's sequence was checked above; without ACK, drop silently.
        if !f.contains(TcpFlags::ACK) {
            return self.check_req_drop();
        }
        // A Fast Open child is already the socket: nothing more here.
        if fastopen {
            return true;
        }
        // While TCP_DEFER_ACCEPT waits, a bare ACK (nothing after the SYN) is dropped
        // (req->num_timeout < rskq_defer_accept). Not a SYN cookie's: Linux makes
        // that child at once (cookie_v4_check -> tcp_get_cookie_sock ->
        // syn_recv_sock), without tcp_check_req.
        if !self.req.cookie && self.icsk.retransmits < self.req.defer_accept && end == 1 {
            self.req.acked = true;
            ctx.mib.inc(Mib::TcpExtTCPDeferAcceptDrop);
            return self.check_req_drop();
        }
        // syn_recv_sock: the child needs room in the accept queue (exit_overflow).
        if self.req.acceptq_full {
            ctx.mib.inc(Mib::TcpExtListenOverflows);
            return self.listen_overflow(ctx, th, len);
        }
        // syn_recv_sock's tcp_md5_key_copy: the child's copy of the listener's key
        // is a sock_kmalloc of its own, which optmem_max may refuse: the child is
        // dropped (put_and_exit: tcp_listendrop only).
        if self.md5.child_copy_fails(ctx.cfg.optmem_max) {
            return self.listen_overflow(ctx, th, len);
        }
        // The child takes the segment's timestamp only now that it is made: no
        // segment a request dropped moves ts_recent (8d52da23b6c6, "tcp: Defer
        // ts_recent changes until req is owned").
        if let Some(v) = tsval.filter(|_| seq <= self.rcv_nxt) {
            self.rx_opt.ts_recent = v;
            self.rx_opt.ts_recent_stamp = ctx.now;
        }
        true
    }

    /// tcp_ipv4.c `tcp_v4_cookie_check` on the listener that takes a request's
    /// wrong ACK (`tcp_v4_do_rcv` in LISTEN, before `tcp_rcv_state_process`'s
    /// reset): a segment without SYN or RST, after a recent overflow, is checked as
    /// a cookie and fails (`cookie_v4_check`: TcpExtSyncookiesFailed), the request's
    /// ISN being no cookie. An ACK forged to pass as a cookie for this 4-tuple,
    /// which Linux would make a child of only to drop it as a duplicate of the
    /// request (`inet_ehash_nolisten`), is not modelled.
    fn listener_cookie_check(&self, ctx: &mut Ctx, th: &TcpRepr) {
        let syn = th.flags.contains(TcpFlags::SYN);
        if !syn && self.req.cookie_check {
            ctx.mib.inc(Mib::TcpExtSyncookiesFailed);
        }
    }

    /// `tcp_send_challenge_ack`'s rules for a request's ACK (`req->rsk_ops->send_ack`),
    /// as Linux 6.18 answers a reset in a request's window (measured with
    /// scripts/packetdrill --kernel: TcpExtTCPChallengeACK, TcpExtTCPACKSkippedChallenge,
    /// and net.ipv4.tcp_challenge_ack_limit's budget applies): the request's own
    /// `tcp_invalid_ratelimit` first, then the stack-wide RFC 5961 budget.
    fn req_challenge_ack(&mut self, ctx: &mut Ctx) {
        if self.challenge_allowed(ctx) {
            self.req_send_ack(ctx);
        }
    }

    /// `reqsk_timer_handler` for a request (a Fast Open child has its own,
    /// `tcp_fastopen_synack_timer`): the timeout counts (`tcp_syn_ack_timeout`), then
    /// `syn_ack_recalc` decides: the request expires after `TCP_SYNCNT` or
    /// `tcp_synack_retries` timeouts, silently (`inet_csk_reqsk_queue_drop_and_put`:
    /// no error, no reset), or sends the SYN-ACK again and waits twice as long; with
    /// `TCP_DEFER_ACCEPT` a request whose bare ACK came (`acked`) waits for data
    /// without resending until its last deferred timeout.
    pub(crate) fn reqsk_timer(&mut self, ctx: &mut Ctx) {
        ctx.mib.inc(Mib::TcpExtTCPTimeouts);
        let max = match self.icsk.syn_retries {
            0 => ctx.cfg.tcp_synack_retries,
            n => n,
        };
        let max = prune_old_requests(max, self.req);
        let (expire, resend) = syn_ack_recalc(self.icsk.retransmits, max, self.req);
        if expire {
            trace!(tuple = ?self.tuple, "request expired");
            return self.set_closed(ctx);
        }
        self.update_rto_stats(ctx.now);
        self.reqsk_backoff();
        if resend {
            self.rtx_synack_rehash(ctx); // tcp_rtx_synack
            self.retransmit_syn(ctx);
        }
        let rto = self.rto_backed_off();
        self.icsk.pending = Some((super::sock::Pending::Retrans, ctx.now + rto));
    }

    /// `reqsk_timeout(req, TCP_RTO_MAX)` after one more timeout: `req->timeout`
    /// (`TCP_TIMEOUT_INIT`) shifted by `num_timeout`, at most `TCP_RTO_MAX`. Linux
    /// 6.18 does not bound a request's timer by `icsk_rto_max`
    /// (`net.ipv4.tcp_rto_max_ms`, the listener's `TCP_RTO_MAX_MS`), which bounds a
    /// Fast Open child's SYN-ACK timer only (`tcp_fastopen_synack_timer`).
    fn reqsk_backoff(&mut self) {
        self.icsk.backoff += 1;
        self.icsk.rto = (self.icsk.rto * 2).min(TCP_RTO_MAX);
    }

    /// `tcp_v4_reqsk_send_ack` / `tcp_v6_reqsk_send_ack`: a bare ACK from the request
    /// (`ip_send_unicast_reply`, no socket's state moves): `snd_nxt` (the request's
    /// ISN + 1, or a Fast Open child's own), `rcv_nxt`, the SYN-ACK's window
    /// (`tcp_synack_window`, never above 65535) scaled down, and the timestamps when
    /// there is a `ts_recent` to echo; no SACK blocks. It carries the TOS / traffic
    /// class of the segment it answers less ECN (`ip_hdr(skb)->tos &
    /// ~INET_ECN_MASK`, `ipv6_get_dsfield`), whatever `tcp_reflect_tos` says.
    fn req_send_ack(&self, ctx: &mut Ctx) {
        let ts = (self.rx_opt.tstamp_ok && self.rx_opt.ts_recent != 0)
            .then(|| (self.tsval(ctx.now), self.rx_opt.ts_recent));
        let window = (self.synack_window() >> self.rx_opt.rcv_wscale) as u16;
        let fields = (
            self.snd_seq(self.snd_nxt).0,
            self.rcv_seq(self.rcv_nxt).0,
            window,
        );
        // tcp_v6_reqsk_send_ack: label 0, the request's hash.
        let fl = super::flowlabel::FlowLabel {
            txhash: self.txhash,
            ..Default::default()
        };
        let ip = (self.tuple, ctx.rx_tos, self.ip_dont_fragment(), fl);
        super::reply::send_reply_ack(ctx, ip, fields, ts, self.md5_key());
    }

    /// `tcp_v4_send_synack` / `tcp_v6_send_synack`: the DS field of a SYN or
    /// SYN-ACK, ECN bits aside (the caller adds them). A request's SYN-ACK (a Fast
    /// Open child's too) carries, with `net.ipv4.tcp_reflect_tos`, its SYN's less ECN
    /// (`tcp_rsk(req)->syn_tos & ~INET_ECN_MASK`); otherwise, and on an active
    /// open's SYN or a simultaneous open's SYN-ACK (no request), the socket's
    /// `IP_TOS` / `IPV6_TCLASS`.
    pub(crate) fn synack_dsfield(&self, cfg: &Config) -> u8 {
        match (cfg.tcp_reflect_tos, self.req.syn_tos) {
            (true, Some(tos)) => tos & !crate::tcp::ecn::INET_ECN_MASK,
            _ => self.dsfield(),
        }
    }

    /// `tcp_v4_syn_recv_sock` / `tcp_v6_syn_recv_sock` with `net.ipv4.tcp_reflect_tos`:
    /// the child takes the request's `syn_tos` less ECN as its TOS (`newinet->tos`,
    /// for IPv4 packets, an AF_INET6 listener's IPv4-mapped child included) or its
    /// traffic class (`newnp->tclass`, IPv6 packets); the other stays the
    /// listener's. Its TIME-WAIT inherits it (`tw_tos`, `tw_tclass`).
    pub(crate) fn syn_recv_sock_tos(&mut self, cfg: &Config) {
        let Some(tos) = self.req.syn_tos.filter(|_| cfg.tcp_reflect_tos) else {
            return;
        };
        let tos = tos & !crate::tcp::ecn::INET_ECN_MASK;
        match self.tuple.local.is_ipv6() {
            true => self.tclass = tos,
            false => self.tos = tos,
        }
    }

    /// `tcp_synack_window`: the window the SYN-ACK offered, unscaled (RFC 7323
    /// section 2.2), so at most 65535.
    fn synack_window(&self) -> u32 {
        self.rcv_wnd.min(65535)
    }

    /// `tcp_paws_reject` as `tcp_check_req` sets it up: `ts_recent` is the request's,
    /// its stamp as old as the request's current SYN-ACK timeout, so a reset passes
    /// PAWS once that timeout reaches `TCP_PAWS_MSL`.
    fn req_paws_reject(&self, tsval: u32, rst: bool) -> bool {
        let age = self.icsk.rto.min(TCP_RTO_MAX).as_secs();
        paws_reject(self.rx_opt.ts_recent, tsval, rst, age)
    }

    /// The reset a request's listener answers a segment with (`tcp_v4_send_reset`
    /// with the listener: its flow label, the request's TCP-MD5 key).
    fn listener_reset(&mut self, ctx: &mut Ctx, th: &TcpRepr, len: usize) {
        let fl = self.listener_flow_label(ctx);
        super::reply::send_reset(ctx, (self.tuple, fl), th, len, self.md5_key());
    }

    /// `embryonic_reset:` a bad SYN is answered with a reset; a request ends without
    /// a word to anyone (`inet_csk_reqsk_queue_drop`); a Fast Open child keeps going
    /// after a bad SYN (no spoofed resets of a socket that may hold data) and is
    /// reset by a valid reset (`reqsk_fastopen_remove`, `tcp_reset`).
    fn embryonic_reset(&mut self, ctx: &mut Ctx, th: &TcpRepr, len: usize) {
        let rst = th.flags.contains(TcpFlags::RST);
        if !rst {
            self.listener_reset(ctx, th, len);
        }
        if self.tfo.rsk.is_some() {
            if rst {
                // tcp_reset: tcp_done counts TcpAttemptFails a second time.
                self.fastopen_remove(true);
                self.done_with_error(ctx, crate::socket::SocketError::ConnectionReset);
            }
            return;
        }
        ctx.mib.inc(Mib::TcpExtEmbryonicRsts);
        trace!(tuple = ?self.tuple, rst, "request ended");
        self.set_closed(ctx);
    }

    /// `listen_overflow:` `syn_recv_sock` made no child for the final ACK: the
    /// accept queue was full (`tcp_v4_syn_recv_sock`'s `exit_overflow`, which the
    /// caller counts as TcpExtListenOverflows) or the child's TCP-MD5 key found no
    /// option memory (`put_and_exit`); either way `tcp_listendrop`. With
    /// `tcp_abort_on_overflow` 0 the ACK is dropped and the request stays (`acked`):
    /// its SYN-ACK timer sends the SYN-ACK again, and the peer's answer may find
    /// room; otherwise the request ends with a reset. Always false.
    fn listen_overflow(&mut self, ctx: &mut Ctx, th: &TcpRepr, len: usize) -> bool {
        ctx.mib.inc(Mib::TcpExtListenDrops);
        self.req.listener_drops += 1; // tcp_listendrop's sk_drops_inc
        trace!(tuple = ?self.tuple, "drop final ACK: no child");
        if ctx.cfg.tcp_abort_on_overflow != 0 {
            self.embryonic_reset(ctx, th, len);
        } else {
            self.req.acked = true;
        }
        self.check_req_drop()
    }

    /// `tcp_check_req` returned `NULL`: the segment is dropped, on the listener's
    /// count for a request, on the Fast Open child's own (tcp/drops.rs). False.
    fn check_req_drop(&mut self) -> bool {
        self.req_drop();
        false
    }
}

/// `reqsk_timer_handler`'s pruning: "we reserve half of room for young embrions;
/// and abort old ones without pity, if old ones are about to clog our table". Once
/// requests fill more than half of the queue (at least 8), each halving of the
/// young ones' share below the whole takes one retry off, down to 2.
fn prune_old_requests(mut max: u8, req: ReqState) -> u8 {
    let qlen = req.qlen;
    if (qlen << 1) > req.max_ack_backlog.max(8) {
        let mut young = req.young_qlen << 1;
        while max > 2 && qlen >= young {
            max -= 1;
            young <<= 1;
        }
    }
    max
}

/// `syn_ack_recalc` (inet_connection_sock.c): (expire, resend) at a SYN-ACK timeout
/// after `num_timeout` earlier ones.
fn syn_ack_recalc(num_timeout: u8, max: u8, req: ReqState) -> (bool, bool) {
    let defer = req.defer_accept;
    if defer == 0 {
        return (num_timeout >= max, true);
    }
    let expire = num_timeout >= max && (!req.acked || num_timeout >= defer);
    // "Do not resend while waiting for data after ACK, start to resend on end of
    // deferring period to give last chance for data or ACK to create established
    // socket."
    let resend = !req.acked || num_timeout >= defer - 1;
    (expire, resend)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(acked: bool, defer_accept: u8) -> ReqState {
        ReqState {
            acked,
            defer_accept,
            ..ReqState::default()
        }
    }

    fn queue(qlen: u32, young_qlen: u32, max_ack_backlog: u32) -> ReqState {
        ReqState {
            qlen,
            young_qlen,
            max_ack_backlog,
            ..ReqState::default()
        }
    }

    #[test]
    fn old_requests_lose_retries_once_they_clog_half_the_queue() {
        // Half full or less (at least 8): untouched.
        assert_eq!(prune_old_requests(5, queue(4, 0, 8)), 5);
        assert_eq!(prune_old_requests(5, queue(64, 0, 128)), 5);
        // 100 of 128, all young: qlen < 2 * young, untouched.
        assert_eq!(prune_old_requests(5, queue(100, 100, 128)), 5);
        // 100 requests, 40 young: 100 >= 80 takes one, 100 < 160 stops.
        assert_eq!(prune_old_requests(5, queue(100, 40, 128)), 4);
        // None young: down to 2, never below.
        assert_eq!(prune_old_requests(5, queue(100, 0, 128)), 2);
        assert_eq!(prune_old_requests(1, queue(100, 0, 128)), 1);
    }

    #[test]
    fn without_defer_accept_a_request_resends_until_its_retries_are_spent() {
        assert_eq!(syn_ack_recalc(0, 5, req(false, 0)), (false, true));
        assert_eq!(syn_ack_recalc(4, 5, req(true, 0)), (false, true));
        assert_eq!(syn_ack_recalc(5, 5, req(true, 0)), (true, true));
    }

    #[test]
    fn an_acked_deferred_request_waits_silently_until_its_last_deferred_timeout() {
        // TCP_DEFER_ACCEPT of 3 timeouts, the bare ACK seen.
        assert_eq!(syn_ack_recalc(0, 5, req(true, 3)), (false, false));
        assert_eq!(syn_ack_recalc(1, 5, req(true, 3)), (false, false));
        assert_eq!(syn_ack_recalc(2, 5, req(true, 3)), (false, true));
        // Not acked: resends as without deferral.
        assert_eq!(syn_ack_recalc(0, 5, req(false, 3)), (false, true));
        // A deferral longer than the retries keeps an acked request past them.
        assert_eq!(syn_ack_recalc(5, 5, req(true, 8)), (false, false));
        assert_eq!(syn_ack_recalc(8, 5, req(true, 8)), (true, true));
        assert_eq!(syn_ack_recalc(5, 5, req(false, 8)), (true, true));
    }
}
