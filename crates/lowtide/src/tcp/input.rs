//! Segment processing: tcp_input.c's `tcp_rcv_state_process`,
//! `tcp_rcv_synsent_state_process`, `tcp_ack`, `tcp_data_queue` and ACK scheduling.

use super::cong::{AckSample, CaState, CcContext, CongestionOps};
use super::consts::TCP_MAX_QUICKACKS;
use super::rate::{AckRate, RateSample};
use super::rcvqueue::Payload;
use super::sock::Tcb;
use super::timer::RttSamples;
use super::validate::SegSpace;
use super::{Ctx, TcpState};
use crate::mib::Mib;
use crate::socket::{EventKind, SocketError};
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};
use tracing::trace;

/// What `tcp_ack` made of a segment's ACK field.
enum AckOutcome {
    /// Unacceptable: the segment is dropped (`SKB_DROP_REASON_TCP_ACK_UNSENT_DATA`,
    /// too old).
    Discard,
    /// Below `snd_una` (`old_ack:`): its SACK blocks were used, its data is kept.
    Old,
    /// At or above `snd_una`: processed.
    New,
}

impl Tcb {
    /// Active open: send the SYN (`tcp_connect`).
    pub(crate) fn connect(&mut self, ctx: &mut Ctx) {
        ctx.mib.inc(Mib::TcpActiveOpens);
        self.state = TcpState::SynSent;
        let init_rwnd = self.dst_connect_init(ctx.cfg);
        let mss = self.initial_window_mss();
        self.select_initial_window(ctx.cfg, mss, ctx.cfg.tcp_window_scaling, init_rwnd);
        self.write_seq = 1;
        self.ecn_send_syn(ctx.cfg);
        self.send_syn(ctx);
    }

    /// A SYN reached our listener: become its SYN-RECV child and answer with a
    /// SYN-ACK (`tcp_conn_request`); a Fast Open child (`tfo.rsk`) takes the SYN's
    /// data first, which the SYN-ACK then acknowledges.
    pub(crate) fn passive_open(
        &mut self,
        ctx: &mut Ctx,
        ip: &IpRepr,
        th: &TcpRepr,
        syn_data: &[u8],
    ) {
        self.ecn_create_request(ctx.cfg, ip, th);
        self.rx_pkt_len = (ip.header_len + ip.payload_len) as u32;
        self.irs = super::seq::Seq(th.seq);
        self.rcv_nxt = 1;
        self.rcv_wup = 1;
        self.init_window_from_syn(th); // max_window first: tcp_sync_mss bounds to it
        self.negotiate_options(ctx, th, false);
        self.state = TcpState::SynRecv;
        let init_rwnd = self.dst_connect_init(ctx.cfg); // tcp_openreq_init_rwin
        let mss = self.initial_window_mss();
        self.select_initial_window(ctx.cfg, mss, self.rx_opt.wscale_ok, init_rwnd);
        self.write_seq = 1;
        if self.tfo.rsk.is_some() {
            self.fastopen_create_child(ctx, syn_data);
        }
        self.send_syn(ctx);
    }

    /// Takes the peer's SYN options, keeping only what we offer too (`active`: the
    /// SYN answers our connect).
    fn negotiate_options(&mut self, ctx: &mut Ctx, th: &TcpRepr, active: bool) {
        let o = &th.options;
        self.rx_opt.sack_ok = o.sack_permitted && ctx.cfg.tcp_sack;
        self.rx_opt.tstamp_ok = o.timestamp.is_some() && ctx.cfg.tcp_timestamps;
        if let (true, Some((tsval, _))) = (self.rx_opt.tstamp_ok, o.timestamp) {
            self.rx_opt.ts_recent = tsval;
            self.rx_opt.ts_recent_stamp = ctx.now;
        }
        self.rx_opt.wscale_ok = o.wscale.is_some() && ctx.cfg.tcp_window_scaling;
        if self.rx_opt.wscale_ok {
            // RFC 7323 section 2.3: a shift above 14 is used as 14.
            self.rx_opt.snd_wscale = o.wscale.unwrap_or(0).min(14);
        } else {
            // tcp_rcv_synsent_state_process: no scaling, no window above 64 KB.
            self.rx_opt.snd_wscale = 0;
            self.rx_opt.rcv_wscale = 0;
            self.window_clamp = self.window_clamp.min(65535);
        }
        // RFC 9293 3.7.1: no MSS option (or 0, which Linux ignores) leaves the clamp
        // as it was: 536 (IPv4) / 1220 (IPv6) on a request (af_ops->mss_clamp) and on
        // a connect (tcp_v4_connect, tcp_v6_connect), TCP_MAXSEG's value on a connect
        // that set it (tcp_connect_init), tcp_send_syn_data's choice on a Fast Open
        // connect. net.ipv4.tcp_min_snd_mss is the floor (in sync_mss).
        let min_snd_mss = ctx.cfg.tcp_min_snd_mss;
        match o.mss.filter(|&m| m > 0) {
            Some(m) => self.set_peer_mss(m.into(), min_snd_mss),
            None if active && self.tfo.send_syn_data => {
                self.sync_mss(self.pmtu_cookie, min_snd_mss);
            }
            None if active && self.rx_opt.user_mss != 0 => {
                self.set_peer_mss(self.rx_opt.user_mss, min_snd_mss)
            }
            None if self.tuple.local.is_ipv6() => self.set_peer_mss(1220, min_snd_mss),
            None => self.set_peer_mss(536, min_snd_mss),
        }
        self.ack.rcv_mss = self.mss_cache.min(self.advmss);
    }

    /// The window in a SYN is never scaled
    /// ([RFC 7323 section 2.2](https://www.rfc-editor.org/rfc/rfc7323#section-2.2)).
    fn init_window_from_syn(&mut self, th: &TcpRepr) {
        self.snd_wnd = th.window as u32;
        self.max_window = self.snd_wnd;
        self.snd_wl1 = 0;
    }

    /// Entry point for every segment of this connection.
    pub(crate) fn rcv_segment(
        &mut self,
        ctx: &mut Ctx,
        ip: &IpRepr,
        th: &TcpRepr,
        payload: Payload,
    ) {
        self.segs_in += 1;
        self.rx_ip_ecn = ip.ecn;
        self.rx_pkt_len = (ip.header_len + ip.payload_len) as u32;
        match self.state {
            TcpState::Closed | TcpState::Listen => {}
            TcpState::SynSent => self.rcv_synsent(ctx, th, payload),
            _ => {
                let hdr_len = ip.payload_len.saturating_sub(payload.len());
                self.rcv_synchronized(ctx, th, payload, hdr_len)
            }
        }
    }

    /// `tcp_rcv_synsent_state_process`
    /// ([RFC 9293 section 3.10.7.3](https://www.rfc-editor.org/rfc/rfc9293#section-3.10.7.3)).
    fn rcv_synsent(&mut self, ctx: &mut Ctx, th: &TcpRepr, payload: Payload) {
        let f = th.flags;
        // The ACK must cover the SYN and no more than was sent (Fast Open: data).
        let ack = super::seq::Seq(th.ack).diff(self.snd_seq(0)) as i64;
        if f.contains(TcpFlags::ACK) && !(1..=self.snd_nxt.max(1) as i64).contains(&ack) {
            if !f.contains(TcpFlags::RST) {
                super::output::send_reset(ctx, self.tuple, th, 0);
            }
            return;
        }
        // The TSecr of an acceptable ACK must echo a time since our first SYN
        // (retrans_stamp); else reset_and_undo: a reset, and SYN-SENT goes on.
        if f.contains(TcpFlags::ACK) && !self.synsent_tsecr_ok(ctx, th) {
            ctx.mib.inc(Mib::TcpExtPAWSActive);
            if !f.contains(TcpFlags::RST) {
                super::output::send_reset(ctx, self.tuple, th, 0);
            }
            return;
        }
        if f.contains(TcpFlags::RST) {
            if f.contains(TcpFlags::ACK) {
                ctx.mib.inc(Mib::TcpAttemptFails);
                self.set_error(ctx, SocketError::ConnectionRefused);
            }
            return;
        }
        if !f.contains(TcpFlags::SYN) {
            return;
        }
        self.irs = super::seq::Seq(th.seq);
        self.rcv_nxt = 1;
        self.rcv_wup = 1;
        self.copied_seq = 1;
        self.init_window_from_syn(th); // tcp_ack's window update before tcp_sync_mss
        self.negotiate_options(ctx, th, true);
        self.ecn_rcv_syn(th);
        if f.contains(TcpFlags::ACK) {
            self.try_undo_spurious_syn(th); // before tcp_ack clears retrans_stamp
            self.synsent_acked(ctx, th, ack as u64, payload);
        } else {
            // Simultaneous open (RFC 9293 figure 8): SYN-RECV, SYN-ACK.
            self.state = TcpState::SynRecv;
            self.send_syn(ctx);
        }
    }

    /// `tcp_rcv_synsent_state_process`'s PAWS test: a non-zero TSecr lies between
    /// our TSval at the first SYN (`retrans_stamp`) and now.
    fn synsent_tsecr_ok(&self, ctx: &Ctx, th: &TcpRepr) -> bool {
        let (Some((_, ecr)), Some(first)) = (th.options.timestamp, self.undo.retrans_stamp) else {
            return true;
        };
        let (lo, hi) = (self.tsval(first), self.tsval(ctx.now));
        ecr == 0 || ecr.wrapping_sub(lo) <= hi.wrapping_sub(lo)
    }

    /// The SYN-ACK acknowledged our SYN (and `ack - 1` bytes of Fast Open data):
    /// `tcp_ack`, `tcp_finish_connect`, then `tcp_rcv_fastopen_synack`.
    fn synsent_acked(&mut self, ctx: &mut Ctx, th: &TcpRepr, ack: u64, payload: Payload) {
        // tcp_finish_connect: data times start now (no cwnd restart on first data).
        self.ack.lrcvtime = ctx.now;
        self.lsndtime = ctx.now;
        self.rcv_tstamp = ctx.now; // tcp_ack on the SYN-ACK
        self.keepalive_on_establish(ctx); // tcp_finish_connect
        self.syn_skb_acked(ctx, th);
        if ack > 1 {
            let c = self.clean_rtx_queue(ctx, ack);
            self.delivered += c.acked_segs as u64;
        }
        self.handshake_rack_advance(ctx.now);
        self.syn_acked_alert(ctx, 0);
        self.snd_nxt = self.snd_nxt.max(1);
        self.state = TcpState::Established;
        self.fast_path_connected();
        self.icsk.pending = None;
        let synack_retrans = self.icsk.retransmits;
        self.icsk.retransmits = 0;
        self.icsk.backoff = 0;
        self.init_buffer_space(ctx);
        let fastopen = self.tfo.syn_fastopen || self.tfo.syn_data;
        self.icsk.retransmits = synack_retrans; // tcp_rcv_fastopen_synack reads it
        let fastopen_fail = fastopen && self.fastopen_synack(ctx, th, payload);
        self.icsk.retransmits = 0;
        if !fastopen_fail {
            self.synsent_ack(ctx);
        }
        self.notify(ctx, EventKind::Connected);
        self.write_xmit(ctx);
        if !self.rtx.is_empty() && self.icsk.pending.is_none() {
            self.rearm_rto(ctx);
        }
    }

    /// `tcp_ack` on the ACK of our queued SYN: `tcp_clean_rtx_queue` frees it
    /// (`FLAG_SYN_ACKED`: `retrans_stamp` cleared, the SYN delivered) and times it
    /// (Karn: not after a retransmission), `tcp_snd_una_update` counts it in
    /// `bytes_acked`.
    fn syn_skb_acked(&mut self, ctx: &mut Ctx, th: &TcpRepr) {
        let c = self.rtx.clean(1, self.mss_cache);
        self.wmem_queued = self.wmem_queued.saturating_sub(c.truesize);
        let sent = c.first_tx.filter(|_| !c.acked_retrans);
        self.synack_rtt_sample(ctx, th, sent);
        self.snd_una_update(1);
        self.undo.retrans_stamp = None;
        self.delivered += c.acked_segs as u64;
    }

    /// `tcp_clean_rtx_queue`'s `tcp_rack_advance` (SACK only) for what the
    /// handshake's ACK delivered: the SYN, and Fast Open data it covered.
    fn handshake_rack_advance(&mut self, now: crate::time::Instant) {
        if self.rx_opt.sack_ok {
            let d = self.rtx.delivered;
            self.rack_advance(now, &d);
        }
    }

    /// `tcp_synack_rtt_meas` (and `tcp_ack` on a SYN-ACK): the handshake's RTT from
    /// `sent`, the SYN or SYN-ACK's transmission unless it went again (Karn); else
    /// the echoed timestamp's, as `tcp_ack_update_rtt` takes it for `FLAG_SYN_ACKED`.
    fn synack_rtt_sample(
        &mut self,
        ctx: &mut Ctx,
        th: &TcpRepr,
        sent: Option<crate::time::Instant>,
    ) {
        let rtt = sent.map(|t| ctx.now.saturating_since(t).as_micros() as u32);
        let samples = RttSamples {
            seq_rtt_us: rtt,
            ca_rtt_us: rtt,
            acked: true,
            ..RttSamples::default()
        };
        let ts = self.ts_echo_rtt_us(ctx, th);
        self.ack_update_rtt(ctx, &samples, ts);
    }

    /// `tcp_init_transfer`: MTU probing's search (`tcp_mtup_init`), the initial
    /// cwnd (`tcp_init_cwnd`: the route's initcwnd; 1 when the SYN or SYN-ACK went
    /// more than twice and a timeout of it was not shown spurious (`undo_marker`),
    /// [RFC 5681 section 3.1](https://www.rfc-editor.org/rfc/rfc5681#section-3.1) as Linux
    /// reads it with RFC 6298's 1 s initial RTO), then `tcp_init_buffer_space`: send buffer
    /// sized for the initial window, receive window limits (`tcp/rcvwin.rs`).
    pub(super) fn init_buffer_space(&mut self, ctx: &mut Ctx) {
        self.mtup_init(ctx);
        self.init_metrics(ctx);
        self.cw.snd_cwnd = match self.total_retrans > 1 && self.undo.marker.is_some() {
            true => 1,
            false => self.init_cwnd(ctx.cfg),
        };
        self.update_pacing_rate(ctx.cfg);
        let (cc, mut c) = self.cc_context(ctx.now);
        cc.init(&mut c);
        self.sndbuf_expand(ctx);
        self.rcvq_space_time = ctx.now;
        self.init_rcv_buffer_space();
    }

    /// `tcp_sndbuf_expand`: room for `sndbuf_expand() * max(10, cwnd, reordering + 1)`
    /// segments of per-segment truesize, up to `tcp_wmem[2]`.
    pub(crate) fn sndbuf_expand(&mut self, ctx: &mut Ctx) {
        if self.sndbuf_locked {
            return;
        }
        // per_mss = roundup_pow_of_two(mss + MAX_TCP_HEADER + shinfo) + sk_buff.
        let per_mss =
            (self.mss_cache + super::consts::MAX_TCP_HEADER + 320).next_power_of_two() + 256;
        let segs = self.cw.snd_cwnd.max(10).max(self.reordering + 1);
        let sndmem = self.cc.sndbuf_expand() as u64 * segs as u64 * per_mss as u64;
        let sndmem = sndmem.min(ctx.cfg.tcp_wmem[2] as u64) as u32;
        self.sndbuf = self.sndbuf.max(sndmem);
    }

    /// Segment processing in SYN-RECV and every synchronized state
    /// (`tcp_rcv_established`'s slow path, `tcp_rcv_state_process`).
    fn rcv_synchronized(&mut self, ctx: &mut Ctx, th: &TcpRepr, payload: Payload, hdr_len: usize) {
        if self.tfo.rsk.is_some() && !self.fastopen_check_req(ctx, th, payload.len()) {
            return;
        }
        let f = th.flags;
        let seq = self.rcv_off(super::seq::Seq(th.seq));
        // A sequence number before the peer's ISN unwraps below offset 0, to near
        // u64::MAX; the end then overflows. Nothing valid lies there: out of window.
        let sp = SegSpace {
            seq,
            end: seq.checked_add(
                payload.len() as u64
                    + f.contains(TcpFlags::FIN) as u64
                    + f.contains(TcpFlags::SYN) as u64,
            ),
        };
        // tcp_rcv_established's header prediction (tcp/fastpath.rs), as armed on entry.
        let ack_off = self.snd_off(super::seq::Seq(th.ack));
        let hp = self.header_predicted(ctx, th, (hdr_len, seq, ack_off, payload.len()));
        if hp && !payload.is_empty() {
            ctx.mib.inc(Mib::TcpExtTCPHPHits);
        }
        // tcp_check_req: the peer sent its SYN again (our SYN-ACK was lost). Linux
        // answers with the SYN-ACK, not with the challenge ACK an out-of-window SYN
        // draws, which a SYN-SENT peer ignores.
        if self.state == TcpState::SynRecv
            && f == TcpFlags::SYN
            && seq == 0
            && th
                .options
                .timestamp
                .is_none_or(|(v, _)| !self.rx_opt.tstamp_ok || self.paws_check(ctx, v, 0))
        {
            return self.rtx_synack(ctx);
        }
        // Both paths drop a segment with none of ACK, RST and SYN first.
        if !f.intersects(TcpFlags::ACK | TcpFlags::RST | TcpFlags::SYN) {
            trace!("drop: no ACK, RST or SYN flag");
            return;
        }
        let established = self.state == TcpState::Established;
        let syn_inerr = established;
        if !self.validate_incoming(ctx, th, sp, syn_inerr) {
            return;
        }
        if self.state == TcpState::SynRecv && !self.synrecv_acked(ctx, th) {
            return;
        }
        if hp && !payload.is_empty() && ack_off == self.snd_una {
            return self.fast_path_data_same_ack(ctx, th, seq, payload);
        }
        let fin_wait1 = self.state == TcpState::FinWait1;
        match self.ack(ctx, th, payload.len(), hp) {
            AckOutcome::Discard => return,
            // tcp_ack returns at `old_ack:` before FLAG_UPDATE_TS_RECENT: the
            // segment's data is kept, its timestamp does not move ts_recent.
            AckOutcome::Old => {}
            // After tcp_ack accepted the ACK, as Linux's FLAG_UPDATE_TS_RECENT: a
            // segment dropped for an unacceptable ACK must not move ts_recent (else
            // PAWS rejects the peer's next valid segment; packetdrill
            // ts_recent/invalid_ack.pkt).
            AckOutcome::New => self.replace_ts_recent(ctx, th, seq),
        }
        if self.state == TcpState::Closed {
            return;
        }
        if fin_wait1 && self.state == TcpState::FinWait2 && self.shut_rd_by_close() {
            let new_data = sp
                .end
                .is_some_and(|e| e != seq && e - f.contains(TcpFlags::FIN) as u64 > self.rcv_nxt);
            if !self.orphan_fin_wait2(ctx, th, new_data) {
                return;
            }
        }
        self.data_rcv_rtt(ctx, th, seq, payload, established);
        // tcp_data_snd_check, then tcp_ack_snd_check: data we send carries the ACK;
        // data the device queue dropped goes first, as it is still unsent in Linux.
        if !self.local_drops.is_empty() {
            self.resend_local_drops(ctx);
        }
        self.write_xmit(ctx);
        self.check_space(ctx);
        self.ack_snd_check(ctx);
    }

    /// `tcp_rcv_established`'s fast path for in-order data whose ACK equals
    /// `snd_una` ("only one small jumplet in fast path"): no `tcp_ack` at all, so
    /// `rcv_tstamp`, `icsk_probes_out` and the soft error stay as they were; only
    /// `tcp_update_wl` and the timestamp (`tcp_store_ts_recent` at `rcv_wup`), then the
    /// data and `__tcp_ack_snd_check`, without `tcp_data_snd_check`.
    fn fast_path_data_same_ack(&mut self, ctx: &mut Ctx, th: &TcpRepr, seq: u64, payload: Payload) {
        self.snd_wl1 = seq;
        self.replace_ts_recent(ctx, th, seq);
        self.data_rcv_rtt(ctx, th, seq, payload, true);
        self.ack_snd_check(ctx);
    }

    /// `tcp_data_queue` with the receiver's RTT measurements around it: a timestamp
    /// sample before the segment is queued, the window-based one after it advanced
    /// rcv_nxt (`tcp_event_data_recv`). `tcp_rcv_established` (ESTABLISHED only; an
    /// established connection's state at entry) hands every segment `tcp_ack` kept
    /// to `tcp_rcv_rtt_measure_ts`, pure ACKs and out-of-order data included (a
    /// fast-path pure ACK sets `rcv_rtt_last_tsecr` itself, to the same effect).
    fn data_rcv_rtt(
        &mut self,
        ctx: &mut Ctx,
        th: &TcpRepr,
        seq: u64,
        payload: Payload,
        established: bool,
    ) {
        if established && self.rx_opt.tstamp_ok {
            if let Some((_, tsecr)) = th.options.timestamp {
                // end_seq - seq: the FIN counts.
                let len = payload.len() + th.flags.contains(TcpFlags::FIN) as usize;
                self.rcv_rtt_measure_ts(ctx, tsecr, len);
            }
        }
        // tcp_urg ("step 6: check the URG bit"), before the text is queued.
        if th.flags.contains(TcpFlags::URG) || self.urg.data == super::urg::TCP_URG_NOTYET {
            let mut scratch = Vec::new();
            self.urg(ctx, th, seq, payload.contiguous(&mut scratch));
        }
        let prior_nxt = self.rcv_nxt;
        self.data_queue(ctx, th, seq, payload);
        if self.rcv_nxt > prior_nxt {
            self.rcv_rtt_measure(ctx.now);
        }
    }

    /// SYN-RECV: an acceptable ACK completes the handshake
    /// ([RFC 9293 3.10.7.4](https://www.rfc-editor.org/rfc/rfc9293#section-3.10.7.4)). A
    /// Fast Open child may have sent data already: any ACK up to `snd_nxt` is acceptable
    /// (`tcp_ack` decides, then `tcp_rcv_synrecv_state_fastopen`).
    fn synrecv_acked(&mut self, ctx: &mut Ctx, th: &TcpRepr) -> bool {
        let ack = self.snd_off(super::seq::Seq(th.ack));
        let fastopen = self.tfo.rsk.is_some();
        // tcp_check_req for a request's child: exactly our ISN + 1; otherwise (a Fast
        // Open child, or a simultaneous open, which may ACK its SYN data too)
        // tcp_ack's: up to snd_nxt. An ACK of our ISN itself (tcp_ack's "old ACK" of
        // nothing) is refused here, where Linux would establish with the SYN unacked.
        let acceptable = match self.parent.is_some() && !fastopen {
            true => ack == 1,
            false => (1..=self.snd_nxt).contains(&ack),
        };
        if !acceptable {
            super::output::send_reset(ctx, self.tuple, th, 0);
            return false;
        }
        let child = self.parent.is_some() || fastopen;
        if child {
            // tcp_create_openreq_child: the child's data times start at the final
            // ACK (a Fast Open child's started at its SYN); tcp_rcv_state_process
            // restarts lsndtime.
            if !fastopen {
                self.ack.lrcvtime = ctx.now;
                // tcp_create_openreq_child: the SYN is the child's first segment in,
                // this ACK its second; the request sock's SYN-ACKs are not its own.
                self.segs_in = 2;
                self.segs_out = 0;
            }
            self.lsndtime = ctx.now;
        }
        self.rcv_tstamp = ctx.now; // tcp_ack on the handshake's final ACK
        self.keepalive_on_establish(ctx); // tcp_create_openreq_child
        if !child {
            self.syn_skb_acked(ctx, th); // simultaneous open: tcp_ack
            self.handshake_rack_advance(ctx.now);
        }
        self.delivered += 1; // tcp_rcv_state_process: SYN-ACK delivery, untracked by tcp_ack
        if self.rtt.srtt_us == 0 {
            // tcp_synack_rtt_meas: the request's SYN-ACK, sent when it was created.
            let sent = (child && self.icsk.retransmits == 0).then_some(self.created);
            self.synack_rtt_sample(ctx, th, sent);
        }
        if child {
            // tcp_create_openreq_child: a child starts with snd_una = ISN + 1, and
            // its SYN-ACK timeouts as one finished RTO recovery.
            self.snd_una = 1;
            self.update_rto_time(ctx.now);
        } else {
            self.syn_acked_alert(ctx, 0);
        }
        self.snd_nxt = self.snd_nxt.max(1);
        self.state = TcpState::Established;
        if self.parent.is_some() && !fastopen {
            self.openreq_child_undo();
        }
        if !fastopen {
            self.icsk.pending = None;
            self.icsk.retransmits = 0;
            self.icsk.backoff = 0;
        }
        self.snd_wnd = (th.window as u32) << self.rx_opt.snd_wscale;
        // tcp_create_openreq_child: a child made at this ACK has its window as the
        // largest; otherwise tcp_ack's window update. Either way tcp_sync_mss.
        if (child && !fastopen) || self.snd_wnd > self.max_window {
            self.max_window = self.snd_wnd;
            self.sync_mss(self.pmtu_cookie, ctx.cfg.tcp_min_snd_mss);
        }
        self.snd_wl1 = self.rcv_off(super::seq::Seq(th.seq));
        self.fast_path_on(); // tcp_rcv_state_process, SYN-RECV
        if fastopen {
            self.fastopen_synrecv_done(ctx, th);
        } else {
            // tcp_rcv_state_process, SYN-RECV.
            self.try_undo_spurious_syn(th);
            self.undo.retrans_stamp = None;
            self.init_buffer_space(ctx);
        }
        if self.parent.is_some() {
            self.accepted_ready = true;
        } else {
            self.notify(ctx, EventKind::Connected);
        }
        true
    }

    /// `tcp_create_openreq_child`: after a SYN-ACK timeout (`num_timeout`) the child
    /// starts with the undo state of the handshake: `undo_marker` at our ISN and
    /// `retrans_stamp` at the first SYN-ACK's time (`snt_synack`; lowtide's request
    /// sends it when it is created). SYN-ACKs resent only for the peer's repeated
    /// SYNs leave none: "packets are not lost but delayed".
    fn openreq_child_undo(&mut self) {
        if self.icsk.retransmits > 0 {
            self.undo.marker = Some(0);
            self.undo.retrans = 0;
            self.undo.retrans_stamp = Some(self.created);
        }
    }

    /// `tcp_ack`: window update, SACK, cumulative ACK, RTT, congestion control.
    /// Returns false if the segment must be dropped.
    fn ack(&mut self, ctx: &mut Ctx, th: &TcpRepr, payload_len: usize, hp: bool) -> AckOutcome {
        let delta = super::seq::Seq(th.ack).diff(self.snd_seq(self.snd_una)) as i64;
        let ack = self.snd_una as i64 + delta;
        if ack > self.snd_nxt as i64 {
            // tcp_ack: SKB_DROP_REASON_TCP_ACK_UNSENT_DATA with a (rate-limited)
            // challenge ACK, in ESTABLISHED too since Linux 6.x (tcp_rcv_state_process
            // sends the same one in the other states).
            trace!(ack, snd_nxt = self.snd_nxt, "drop: ACK of unsent data");
            self.challenge_ack(ctx);
            return AckOutcome::Discard;
        }
        // tcp_ack: do not accept an ACK for bytes we never sent (Linux 6.x:
        // max_window = min(max_window, bytes_acked)).
        let max_window = (self.max_window as u64).min(self.bytes_acked) as i64;
        if ack < self.snd_una as i64 - max_window {
            // RFC 5961 section 5.2: too old to be acceptable.
            self.challenge_ack(ctx);
            return AckOutcome::Discard;
        }
        if ack < self.snd_una as i64 {
            // tcp_ack `old_ack:` (a reordered ACK); the segment's data is kept.
            if th.options.sack_len > 0 {
                self.old_ack(ctx, th, ack.max(0) as u64);
            }
            return AckOutcome::Old;
        }
        let ack = ack as u64;
        let is_sack_reneg = self.is_sack_reneg; // tcp_ack: as before this ACK
                                                // tcp_ack: the peer is alive; window probes count again from zero.
        self.icsk.probes_out = 0;
        self.sk_err_soft = None; // "something worked"
        self.rcv_tstamp = ctx.now;
        let prior_in_flight = self.packets_in_flight();
        let prior_packets = self.rtx.packets_out;
        let prior_una = self.snd_una;
        let prior_sacked = self.rtx.sacked_out;
        let prior_lost = self.rtx.lost;
        let prior_delivered = self.delivered;
        let win_update = self.ack_update_window(th, ack, ctx.cfg.tcp_min_snd_mss);
        let prior_fack = self.rack_ack_begin(ctx, th);
        let sack = self.sacktag(ctx, th, ack, ack);
        let ece = self.ecn_rcv_ecn_echo(th);
        // Linux 5.10+ accepts CWR on pure ACKs too (robustness against peers that
        // send it so), before cleaning the queue.
        self.ecn_accept_cwr(th, payload_len);
        let fast = hp && ack > prior_una;
        let ca_flags = self.ack_event_flags(ctx, th, payload_len, fast, win_update, ece);
        if prior_packets == 0 {
            return self.ack_no_queue(ctx, ack, prior_una, &sack, ece, ca_flags);
        }
        let cleaned = self.clean_rtx_queue(ctx, ack);
        // tcp_clean_rtx_queue: "Non-retransmitted hole got filled? That's reordering".
        if let Some(low) = cleaned
            .reord
            .filter(|&r| self.rx_opt.sack_ok && r < prior_fack)
        {
            self.check_sack_reordering(ctx, low, false);
        }
        let mut fl = self.rack_ack_delivered(ctx, ack > prior_una, &sack);
        fl.ece = ece;
        self.rack_update_reo_wnd(ctx, fl.delivered_any);
        // tcp_count_delivered(sack_delivered): newly SACKed segments and D-SACKed
        // duplicates, then what the cumulative ACK covers (tcp_clean_rtx_queue);
        // without SACK, tcp_remove_reno_sacks: the hole it filled and what exceeds
        // the duplicate ACKs counted.
        let acked_delivered = if self.rx_opt.sack_ok {
            cleaned.acked_segs.saturating_sub(cleaned.acked_sacked_segs)
        } else if cleaned.acked_segs > 0 {
            // "If any of the cumulatively ACKed segments was retransmitted, non-SACK
            // case cannot confirm that progress was due to original transmission".
            if cleaned.acked_retrans {
                fl.orig_sack_acked = false;
            }
            self.remove_reno_sacks(ctx, cleaned.acked_segs)
        } else {
            0
        };
        self.count_delivered(
            acked_delivered
                + sack.newly_sacked
                + sack.dsack_segs
                + prior_sacked
                    .saturating_sub(self.rtx.sacked_out)
                    .saturating_sub(cleaned.acked_sacked_segs),
            ece,
        );
        // tcp_in_ack_event (Linux 6.14+: after the queue is cleaned and the
        // deliveries counted, before the TLP check).
        let ca_ctx = self.ca_ctx(ctx.now);
        self.cc.in_ack_event(ca_flags, &ca_ctx);
        let skb = super::rtx::skb::DeliveredSkb::later(sack.rate, cleaned.rate);
        // tcp_clean_rtx_queue: "Conservatively mark a delayed ACK. It's typically
        // from a lone runt packet over the round trip to a receiver w/o
        // out-of-order or CE events" (FLAG_ACK_MAYBE_DELAYED).
        let maybe_delayed = cleaned.first_tx.is_some()
            && !cleaned.acked_retrans
            && cleaned.acked_segs == 1
            && !cleaned.partial
            && prior_sacked == 0
            && ack - prior_una < self.mss_cache as u64
            && skb.is_some_and(|d| d.tx.delivered + 1 == self.delivered)
            && !(sack.newly_sacked > 0 || ece || sack.dsack);
        let (rtt_update, ca_rtt_us) = self.ack_rtt(ctx, th, &cleaned, &sack, maybe_delayed);
        let mut rate = AckRate {
            skb,
            delivered: 0,
            rtt_us: ca_rtt_us,
            prior_in_flight,
            lost: 0,
            is_sack_reneg,
            is_ack_delayed: maybe_delayed,
        };
        // FLAG_NOT_DUP: the segment carries data (FLAG_DATA: seq != end_seq, a FIN
        // too), updates the window (FLAG_WIN_UPDATE: tcp_may_update_window) or
        // acknowledges data (FLAG_ACKED).
        let data = payload_len > 0 || th.flags.contains(TcpFlags::FIN);
        fl.not_dup = data || win_update || cleaned.acked_segs > 0;
        // tcp_ack: a duplicate ACK (RFC 5681 section 2) neither advances snd_una nor
        // is FLAG_NOT_DUP nor D-SACKs (FLAG_DSACKING_ACK).
        let is_dupack = ack == prior_una && !fl.not_dup && !sack.dsack;
        // tcp_clean_rtx_queue: FLAG_SET_XMIT_TIMER when the ACK acknowledged
        // segments (FLAG_ACKED: not a partial ACK of a one-segment skb), or when its
        // SACK RTT sample comes from data sent before the head was last (re)sent.
        fl.set_xmit_timer = cleaned.acked_segs > 0
            || (rtt_update
                && sack
                    .first_tx
                    .zip(self.rtx.first())
                    .is_some_and(|(t, h)| t < h.tx_time));
        if self.tlp_high_seq.is_some() {
            self.process_tlp_ack(ctx, ack, &fl);
        }
        // tcp_clean_rtx_queue ends with pkts_acked, before the recovery state
        // machine; its RTT is the congestion control's (ca_rtt_us), or none.
        let ca_ctx = self.ca_ctx(ctx.now);
        self.cc.pkts_acked(
            &mut self.cw,
            &AckSample {
                pkts_acked: cleaned.acked_segs,
                rtt_us: rate.rtt_us,
                in_flight: prior_in_flight,
                now: ctx.now,
            },
            &ca_ctx,
        );
        self.cc.take_mib().count(ctx.mib);
        // tcp_ack_is_dubious: FLAG_CA_ALERT includes FLAG_ECE.
        let dubious = self.ca_state != CaState::Open
            || ece
            || sack.newly_sacked > 0
            || sack.dsack
            || self.rtx.sacked_out > 0
            || (!fl.not_dup && !self.rtx.is_empty());
        if dubious {
            let num_dupack = (is_dupack && self.rtx.packets_out > 0) as u32;
            let d = self.fastretrans_alert(ctx, prior_una, num_dupack, &mut fl);
            self.count_delivered(d, ece);
        }
        // Everything this ACK delivered, duplicate ACKs counted as SACKs included,
        // for PRR, the rate sample and the counters.
        let newly_acked_sacked = self.newly_delivered(ctx, prior_delivered, ece);
        rate.delivered = newly_acked_sacked;
        rate.lost = (self.rtx.lost - prior_lost) as u32;
        let rs = self.rate_gen(ctx.now, &rate);
        // tcp_cong_control: the congestion control's own cong_control, else PRR in
        // Recovery, or cwnd growth; then the default pacing rate.
        if !self.cong_control(ctx.now, &rs) {
            let ca_ctx = self.ca_ctx(ctx.now);
            // tcp_in_cwnd_reduction: PRR in CWR as in Recovery.
            if matches!(self.ca_state, CaState::Recovery | CaState::Cwr) {
                self.cwnd_reduction(newly_acked_sacked, rate.lost, fl.snd_una_advanced);
            } else if self.may_raise_cwnd(ctx.cfg, cleaned.acked_segs > 0, fl.data_sacked) {
                // acked_sacked: segments newly delivered by this ACK; those SACKed
                // earlier and now cumulatively ACKed grew nothing then and do not now.
                self.cc
                    .cong_avoid(&mut self.cw, newly_acked_sacked, &ca_ctx);
                self.snd_cwnd_stamp = ctx.now; // tcp_cong_avoid
            }
            self.update_pacing_rate(ctx.cfg);
        }
        if fl.set_xmit_timer {
            self.set_xmit_timer(ctx);
        }
        if ack > prior_una {
            self.on_snd_una_advanced(ctx, &cleaned);
        }
        AckOutcome::New
    }

    /// `tcp_ack`'s `no_queue:` path: nothing was in flight, so nothing is cleaned,
    /// and neither the recovery state machine nor congestion control sees the ACK (no
    /// cwnd growth, rate sample or pacing update: a receiver's every data segment
    /// comes this way). Only a D-SACK may still undo a reduction
    /// (`FLAG_DSACKING_ACK`), and a TLP episode may end. The window update and
    /// `tcp_ack_probe` ran in `ack_update_window`.
    fn ack_no_queue(
        &mut self,
        ctx: &mut Ctx,
        ack: u64,
        prior_una: u64,
        sack: &super::rtx::sacktag::SackResult,
        ece: bool,
        ca_flags: u32,
    ) -> AckOutcome {
        let prior_delivered = self.delivered;
        // tcp_ack counts sack_state.sack_delivered before it branches.
        self.count_delivered(sack.newly_sacked + sack.dsack_segs, ece);
        // no_queue: tcp_in_ack_event first.
        let ca_ctx = self.ca_ctx(ctx.now);
        self.cc.in_ack_event(ca_flags, &ca_ctx);
        let mut fl = self.rack_ack_delivered(ctx, false, sack);
        fl.ece = ece;
        if sack.dsack {
            let d = self.fastretrans_alert(ctx, prior_una, 0, &mut fl);
            self.count_delivered(d, ece);
            self.newly_delivered(ctx, prior_delivered, ece);
        }
        if self.tlp_high_seq.is_some() {
            self.process_tlp_ack(ctx, ack, &fl);
        }
        AckOutcome::New
    }

    /// `tcp_ack`'s `old_ack:` path, for an ACK below `snd_una` with SACK blocks: they
    /// still tag the queue (`tcp_sacktag_write_queue`, blocks validated against
    /// today's `snd_una`, a D-SACK detected against this ACK's own `ack_seq`), then
    /// `tcp_fastretrans_alert` (no duplicate ACK counted), `tcp_newly_delivered` and
    /// `tcp_xmit_recovery`. No window update, RTT or rate sample, TLP check or
    /// `tcp_rack_update_reo_wnd`: those run on the main path only.
    fn old_ack(&mut self, ctx: &mut Ctx, th: &TcpRepr, ack_seq: u64) {
        let (una, prior_delivered) = (self.snd_una, self.delivered);
        self.rack_ack_begin(ctx, th);
        let sack = self.sacktag(ctx, th, ack_seq, una);
        let mut fl = self.rack_ack_delivered(ctx, false, &sack);
        self.delivered += sack.newly_sacked as u64;
        let d = self.fastretrans_alert(ctx, una, 0, &mut fl);
        // FLAG_ECE is only looked at past `old_ack:`, so never here.
        self.count_delivered(d, false);
        self.newly_delivered(ctx, prior_delivered, false);
    }

    /// `tcp_newly_delivered`: the segments delivered since `prior_delivered`, counted
    /// in `TcpExtTCPDelivered` (and `TcpExtTCPDeliveredCE` for an ECE ACK).
    fn newly_delivered(&mut self, ctx: &mut Ctx, prior_delivered: u64, ece: bool) -> u32 {
        let newly = self.delivered - prior_delivered;
        ctx.mib.add(Mib::TcpExtTCPDelivered, newly);
        if ece {
            super::ecn::count_delivered_ce(ctx, newly);
        }
        newly as u32
    }

    /// `tcp_count_delivered`: `delivered` more segments reached the peer, with an
    /// ECE ACK also `delivered_ce`.
    fn count_delivered(&mut self, delivered: u32, ece: bool) {
        self.delivered += delivered as u64;
        if ece {
            self.delivered_ce += delivered as u64;
        }
    }

    /// The `tcp_sock` view a congestion control's `cong_control` and `init` get.
    pub(crate) fn cc_context(
        &mut self,
        now: crate::time::Instant,
    ) -> (&mut dyn CongestionOps, CcContext<'_>) {
        let packets_in_flight = self.packets_in_flight();
        let c = CcContext {
            cw: &mut self.cw,
            pacing_rate: &mut self.pace.pacing_rate,
            pacing_needed: &mut self.pace.pacing_needed,
            app_limited: &mut self.rate.app_limited,
            max_pacing_rate: self.pace.max_pacing_rate,
            mss: self.mss_cache,
            srtt_us: self.rtt.srtt_us,
            min_rtt_us: self.rtt.min_rtt_us,
            delivered: self.delivered,
            delivered_mstamp: self.rate.delivered_mstamp,
            lost: self.rtx.lost,
            packets_in_flight,
            now,
            wstamp: self.pace.wstamp,
            ca_state: self.ca_state,
            seed: self.iss.0,
            ecn_ok: self.ecn_flags & super::ecn::TCP_ECN_OK != 0,
            snd_nxt: self.snd_nxt,
            rcv_nxt: self.rcv_nxt,
            delivered_ce: self.delivered_ce,
        };
        (self.cc.as_mut(), c)
    }

    /// `ca_ops->cong_control` with this ACK's rate sample; false if the congestion
    /// control has none.
    fn cong_control(&mut self, now: crate::time::Instant, rs: &RateSample) -> bool {
        let (cc, mut c) = self.cc_context(now);
        cc.cong_control(&mut c, rs)
    }

    /// `ca_rtt_us` of `tcp_clean_rtx_queue`: the RTT of the most recently sent
    /// packet this ACK (S)ACKed, never from a retransmission.
    fn ca_rtt_us(
        &self,
        ctx: &Ctx,
        c: &super::rtx::Cleaned,
        sack_tx: Option<crate::time::Instant>,
    ) -> Option<u32> {
        let last = sack_tx.or(c.last_tx.filter(|_| !c.acked_retrans))?;
        Some(ctx.now.saturating_since(last).as_micros() as u32)
    }

    /// `tcp_may_raise_cwnd` + `tcp_in_cwnd_reduction`: grow on in-order delivery
    /// (`FLAG_DATA_ACKED`, RFC 5681) or, once reordering exceeds
    /// `tcp_reordering`, on any forward progress (`FLAG_FORWARD_PROGRESS`: a SACK
    /// too).
    fn may_raise_cwnd(&self, cfg: &crate::config::Config, data_acked: bool, sacked: bool) -> bool {
        if matches!(self.ca_state, CaState::Recovery | CaState::Cwr) {
            return false;
        }
        if self.reordering > cfg.tcp_reordering {
            return data_acked || sacked;
        }
        data_acked
    }

    /// `tcp_ack_update_window`
    /// ([RFC 9293 3.10.7.4](https://www.rfc-editor.org/rfc/rfc9293#section-3.10.7.4)
    /// SND.WL1/WL2 rule, as `tcp_may_update_window`: from the same segment only a larger or
    /// zero window). True if the window was updated (`FLAG_WIN_UPDATE`).
    fn ack_update_window(&mut self, th: &TcpRepr, ack: u64, min_snd_mss: u32) -> bool {
        let seq = self.rcv_off(super::seq::Seq(th.seq));
        let nwin = (th.window as u32) << self.rx_opt.snd_wscale;
        if self.may_update_window(ack, seq, nwin) {
            self.snd_wl1 = seq;
            if nwin > self.snd_wnd
                && nwin > 0
                && self
                    .icsk
                    .pending
                    .is_some_and(|p| p.0 == super::sock::Pending::Probe0)
            {
                // tcp_ack_probe: the window opened.
                self.icsk.pending = None;
                self.icsk.backoff = 0;
                self.icsk.probes_tstamp = None;
            }
            if self.snd_wnd != nwin {
                // "the only place, where fast path is recovered for sending TCP".
                self.snd_wnd = nwin;
                self.fast_path_off();
                self.fast_path_check();
            }
            if nwin > self.max_window {
                self.max_window = nwin;
                self.sync_mss(self.pmtu_cookie, min_snd_mss);
            }
            return true;
        }
        false
    }

    /// `tcp_snd_una_update`: `tcpi_bytes_acked` grows by the sequence space the ACK
    /// covers, the SYN and the FIN included (Linux 4.1+, RFC 4898 tcpEStatsAppHCThruOctetsAcked).
    fn snd_una_update(&mut self, ack: u64) {
        self.bytes_acked += ack.saturating_sub(self.snd_una);
        self.snd_una = ack;
    }

    /// `tcp_clean_rtx_queue` around [`super::rtx::RtxQueue::clean`].
    pub(super) fn clean_rtx_queue(&mut self, ctx: &mut Ctx, ack: u64) -> super::rtx::Cleaned {
        let c = self.rtx.clean(ack, self.mss_cache);
        self.wmem_queued = self.wmem_queued.saturating_sub(c.truesize);
        if ack > self.snd_una {
            // tcp_ack: FLAG_SND_UNA_ADVANCED resets icsk_retransmits.
            self.icsk.retransmits = 0;
            let prior = self.snd_una;
            self.snd_una_update(ack);
            self.urg_acked(prior);
            self.tstamp_acked(ctx, prior, (ack - prior).min(u32::MAX as u64) as u32);
        }
        if c.acked_segs > 0 {
            self.mtup_probe_acked(ctx);
        }
        // The freed skbs release their MSG_ZEROCOPY references.
        self.zerocopy_acked(ctx);
        c
    }

    /// `tcp_clean_rtx_queue`'s RTT samples (Karn,
    /// [RFC 6298 section 3](https://www.rfc-editor.org/rfc/rfc6298#section-3): none from
    /// the cumulative ACK when it acknowledged a retransmission), then `tcp_ack_update_rtt`. Returns
    /// whether the RTT was updated (`rtt_update`) and the congestion control's
    /// sample (`rs->rtt_us`).
    fn ack_rtt(
        &mut self,
        ctx: &mut Ctx,
        th: &TcpRepr,
        c: &super::rtx::Cleaned,
        sack: &super::rtx::sacktag::SackResult,
        maybe_delayed: bool,
    ) -> (bool, Option<u32>) {
        let since = |t: crate::time::Instant| ctx.now.saturating_since(t).as_micros() as u32;
        let samples = RttSamples {
            seq_rtt_us: c.first_tx.filter(|_| !c.acked_retrans).map(since),
            sack_rtt_us: sack.first_tx.map(since),
            ca_rtt_us: self.ca_rtt_us(ctx, c, sack.last_tx),
            acked: c.acked_segs > 0,
            maybe_delayed,
        };
        let ts = self.ts_echo_rtt_us(ctx, th);
        self.ack_update_rtt(ctx, &samples, ts)
    }

    /// `tcp_rtt_tsopt_us`: the RTT the echoed timestamp gives (RFC 7323 section 4.1:
    /// valid for a retransmission's echo too), if timestamps are on.
    fn ts_echo_rtt_us(&self, ctx: &Ctx, th: &TcpRepr) -> Option<u32> {
        th.options
            .timestamp
            .filter(|&(_, ecr)| self.rx_opt.tstamp_ok && ecr != 0)
            .and_then(|(_, ecr)| ts_rtt_us(self.tsval(ctx.now), ecr))
    }

    /// After `snd_una` moved: timers, FIN states, send buffer and write space.
    fn on_snd_una_advanced(&mut self, ctx: &mut Ctx, c: &super::rtx::Cleaned) {
        self.lost_hint = self.lost_hint.max(self.snd_una);
        self.retransmit_hint = self.retransmit_hint.max(self.snd_una);
        // tcp_clean_rtx_queue: an emptied retransmit queue stops the busy chrono.
        if self.rtx.is_empty() {
            self.chrono_stop(ctx.now, super::chrono::Chrono::Busy);
        }
        if c.fin_acked {
            self.our_fin_acked(ctx);
        }
        // The send buffer grows in tcp_check_space, after the push that follows the
        // ACK (tcp_data_snd_check), not here.
        self.check_space(ctx);
    }

    /// Our FIN was acknowledged
    /// ([RFC 9293 3.10.7.4](https://www.rfc-editor.org/rfc/rfc9293#section-3.10.7.4),
    /// FIN-WAIT-1/CLOSING/LAST-ACK).
    fn our_fin_acked(&mut self, ctx: &mut Ctx) {
        match self.state {
            // An orphan's FIN-WAIT-2 is timed by rcv_synchronized (orphan_fin_wait2).
            TcpState::FinWait1 => self.state = TcpState::FinWait2,
            TcpState::Closing => self.enter_time_wait(ctx),
            TcpState::LastAck => {
                self.update_metrics(ctx);
                self.set_closed(ctx);
            }
            _ => {}
        }
    }

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
            return;
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
            super::output::send_reset(ctx, self.tuple, th, payload.len());
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
        self.data_segs_in += !payload.is_empty() as u64;
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
        if !self.try_rmem_schedule(ctx, seq, payload.len() as u32) {
            // ICSK_ACK_NOMEM | ICSK_ACK_NOW; dropped if the application has data to
            // read, else queued all the same (sk_forced_mem_schedule); a bare FIN is
            // always taken.
            self.schedule_ack_now();
            self.ack.nomem = true;
            if !self.rcv_queue.is_empty() && !payload.is_empty() {
                ctx.mib.inc(Mib::TcpExtTCPRcvQDrop);
                return;
            }
        }
        let fresh = payload.skip((self.rcv_nxt - seq) as usize);
        if !fresh.is_empty() {
            self.queue_in_order(ctx, fresh);
        }
        if !payload.is_empty() {
            // tcp_event_data_recv on the whole segment: tcp_measure_rcv_mss, then
            // ato; tcp_grow_window.
            let len = payload.len() as u32;
            let truesize = self.rx_skb(ctx.cfg, len).truesize;
            self.measure_rcv_mss(th, len, len.min(self.advmss), truesize);
            self.event_data_recv(ctx.now);
            self.ecn_check_ce(ctx, self.rx_ip_ecn);
            if len >= 128 {
                self.grow_window(ctx, len, truesize);
            }
        }
        if fin {
            self.fin_seq.get_or_insert(self.rcv_nxt);
            // tcp_fin purges the out-of-order queue.
            return self.try_consume_fin(ctx);
        }
        let had_ofo = !self.ofo.is_empty();
        while let Some(s) = self.ofo.pop_in_order(self.rcv_nxt) {
            let len = s.data.len();
            self.rcv_queue.push(s.data, s.truesize);
            if len > 0 {
                self.rcv_nxt_advance(ctx, len);
            }
            if s.fin {
                self.fin_seq.get_or_insert(self.rcv_nxt);
                self.try_consume_fin(ctx);
                break;
            }
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

    /// Queues in-order `data`, charged as received segments (tcp/rmem.rs).
    pub(super) fn queue_in_order(&mut self, ctx: &mut Ctx, data: Payload) {
        let skb = self.rx_skb(ctx.cfg, data.len() as u32);
        let truesize = self.rcv_queue.coalesced_charge(skb, data.len() as u32);
        self.rcv_queue.push_payload(ctx.frag, data, truesize);
        self.rcv_nxt_advance(ctx, data.len());
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
        if !(self.epollin_ready(target, ctx.mem.under_pressure()) || self.rcv_shutdown) {
            return;
        }
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
        ctx.mib.inc(Mib::TcpExtDelayedACKLost);
        self.dsack_set(ctx, seq, end);
        self.data_out_of_window();
    }

    /// `tcp_data_queue`'s `out_of_window:`: the segment is dropped and answered at
    /// once, in quick-ACK mode (`tcp_enter_quickack_mode`, `inet_csk_schedule_ack`).
    fn data_out_of_window(&mut self) {
        self.enter_quickack_mode(TCP_MAX_QUICKACKS);
        self.ack.pending = true;
    }

    /// Data above a hole (`tcp_data_queue_ofo`), its FIN with it: to the OFO queue if
    /// memory allows (tcp/rmem.rs; else dropped, not ACKed), the ACK left to
    /// `tcp_ack_snd_check`.
    pub(crate) fn ofo_data(&mut self, ctx: &mut Ctx, th: &TcpRepr, seq: u64, payload: Payload) {
        let fin = th.flags.contains(TcpFlags::FIN);
        let len = payload.len() as u32;
        // tcp_data_queue_ofo measures the segment first (Linux 6.17, "tcp: call
        // tcp_measure_rcv_mss() for ooo packets").
        let skb = self.rx_skb(ctx.cfg, len);
        self.measure_rcv_mss(th, len, len.min(self.advmss), skb.truesize);
        self.ecn_check_ce(ctx, self.rx_ip_ecn);
        if !self.try_rmem_schedule(ctx, seq, len) {
            ctx.mib.inc(Mib::TcpExtTCPOFODrop);
            return;
        }
        ctx.mib.inc(Mib::TcpExtTCPOFOQueue);
        self.fast_path_off(); // tcp_data_queue_ofo
                              // tcp_data_queue_ofo: max(1, gso_segs) of the (GRO) packet.
        self.rcv_ooopack += payload
            .len()
            .div_ceil(self.ack.rcv_mss.max(1) as usize)
            .max(1) as u64;
        // tcp_sack_new_ofo_skb: ACKs held back go out before the block this data
        // extends or opens moves past the first two (their news would be lost).
        let end_seq = seq + payload.len() as u64 + fin as u64;
        let slot = self.ofo.sack_slot(seq, end_seq);
        if self.rx_opt.sack_ok && slot >= super::compsack::TCP_SACK_BLOCKS_EXPECTED {
            self.sack_compress_send_ack(ctx);
        }
        // In one piece, in a buffer of its own as Linux's skb: a slice of the shared
        // arenas would keep a whole arena alive for as long as a peer keeps one
        // segment above a hole.
        let mut own = Vec::with_capacity(payload.len());
        payload.for_each_chunk(|c| own.extend_from_slice(c));
        let ins = self.ofo.insert_seg(seq, own.into(), fin, skb);
        ctx.mib.add(Mib::TcpExtTCPOFOMerge, ins.merged as u64);
        if let Some(d) = ins.dup {
            if self.rx_opt.sack_ok && ctx.cfg.tcp_dsack {
                self.dsack = Some(d);
                ctx.mib.inc(Mib::TcpExtTCPDSACKOfoSent);
            }
        }
        // tcp_data_queue_ofo: data above a hole opens the window too, except without
        // SACK ("do not grow window to force DUPACK") or when all of it was there.
        if self.rx_opt.sack_ok && ins.queued && len > 0 {
            self.grow_window(ctx, len, skb.truesize);
        }
        // tcp_data_queue_ofo (Linux 6.16+): provision the buffer for the OFO span.
        self.rcvbuf_grow(ctx, self.rcvq_space);
        // inet_csk_schedule_ack: tcp_ack_snd_check decides (tcp/compsack.rs).
        self.ack.pending = true;
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
        // tcp_fin: "It _is_ possible, that we have something out-of-order _after_
        // FIN. [...] For now drop them.", and tcp_sack_reset (the D-SACK too).
        self.ofo.purge();
        if self.rx_opt.sack_ok {
            self.dsack = None;
        }
        self.notify(ctx, EventKind::ReadHangUp);
        // tcp_fin: in SYN-RECV and ESTABLISHED the ACK is only scheduled and the
        // connection enters pingpong mode (the application's reply, often its own
        // FIN, may carry it); in the other states it goes at once.
        match self.state {
            TcpState::SynRecv | TcpState::Established => {
                self.ack.pending = true;
                self.enter_pingpong_mode(ctx.cfg);
                self.state = TcpState::CloseWait;
            }
            TcpState::FinWait1 => {
                self.schedule_ack_now();
                self.state = TcpState::Closing;
            }
            TcpState::FinWait2 => {
                // tcp_fin: tcp_send_ack, then tcp_time_wait.
                self.send_ack(ctx);
                self.enter_time_wait(ctx);
            }
            _ => self.schedule_ack_now(),
        }
    }

    /// Schedules an immediate ACK (`ICSK_ACK_NOW`, or `tcp_send_ack` at once).
    pub(crate) fn schedule_ack_now(&mut self) {
        self.ack.pending = true;
        self.ack.now = true;
    }

    /// `__tcp_ack_snd_check`: ACK now if more than one full segment is unacknowledged
    /// or in quick-ACK mode; with out-of-order data held, now or compressed
    /// (`tcp/compsack.rs`); otherwise delay by `tcp_send_delayed_ack`'s timeout
    /// (`tcp/delack.rs`).
    pub(crate) fn ack_snd_check(&mut self, ctx: &mut Ctx) {
        if !self.ack.pending {
            return;
        }
        let unacked = self.rcv_nxt - self.rcv_wup;
        // "... and right edge of window advances far enough. [...] If application
        // uses SO_RCVLOWAT, we want send ack now if we have not received enough
        // bytes to satisfy the condition."
        let now_needed = unacked > self.ack.rcv_mss as u64
            && (self.rcv_nxt - self.copied_seq < self.rcvlowat as u64
                || self.compute_window(ctx.mem, ctx.cfg) >= self.rcv_wnd)
            || self.in_quickack_mode(ctx.cfg)
            || self.ack.now;
        if now_needed {
            self.send_ack(ctx);
        } else if !self.ofo.is_empty() {
            self.ack_or_compress(ctx);
        } else {
            self.send_delayed_ack(ctx);
        }
    }

    /// Whether the application closed the socket (so reads are impossible).
    pub(crate) fn shut_rd_by_close(&self) -> bool {
        self.shut_rd && self.shut_wr
    }

    /// `tcp_check_space`: only for a writer that ran out of space (`SOCK_NOSPACE`),
    /// `tcp_new_space`: grow the send buffer if `tcp_should_expand_sndbuf`, then
    /// `sk_write_space`. Linux calls it after each push and each new skb sent
    /// (`tcp_event_new_data_sent`), so a queue that fills cwnd does not grow the
    /// buffer.
    pub(crate) fn check_space(&mut self, ctx: &mut Ctx) {
        if !self.nospace || !self.state.is_synchronized() {
            return;
        }
        if self.should_expand_sndbuf(ctx) {
            self.sndbuf_expand(ctx);
        }
        self.write_space(ctx);
    }

    /// `tcp_should_expand_sndbuf` (the lock is `sndbuf_expand`'s): not under
    /// memory pressure nor past `tcp_mem[0]`, and while the flight is below cwnd.
    fn should_expand_sndbuf(&self, ctx: &Ctx) -> bool {
        ctx.mem.below_low(ctx.cfg) && self.packets_in_flight() < self.cw.snd_cwnd
    }

    /// `sk_stream_write_space`: wake a writer that ran out of space once writable.
    pub(crate) fn write_space(&mut self, ctx: &mut Ctx) {
        if self.nospace && self.state.is_synchronized() && self.is_writeable(ctx.cfg) {
            self.nospace = false;
            self.chrono_stop(ctx.now, super::chrono::Chrono::SndbufLimited);
            self.wakeups += 1;
            self.notify(ctx, EventKind::Writable);
        }
    }
}

/// The RTT in microseconds a timestamp echo `ecr` gives at our clock `tsval` (ms
/// ticks), as `tcp_ack_update_rtt`: none when the echo is from the future or too old
/// (`delta >= INT_MAX / 1000`, a forged or stale TSecr), at least one tick.
pub(crate) fn ts_rtt_us(tsval: u32, ecr: u32) -> Option<u32> {
    let delta = tsval.wrapping_sub(ecr);
    (delta < i32::MAX as u32 / 1000).then(|| delta.max(1) * 1000)
}

#[cfg(test)]
mod ts_rtt_tests {
    use super::ts_rtt_us;

    #[test]
    fn echo_bounds_as_tcp_ack_update_rtt() {
        assert_eq!(ts_rtt_us(1000, 1000), Some(1000), "at least one tick");
        assert_eq!(ts_rtt_us(1000, 960), Some(40_000));
        // From the future, or older than INT_MAX / 1000 ticks: no sample.
        assert_eq!(ts_rtt_us(1000, 1001), None);
        assert_eq!(ts_rtt_us(0, 1), None);
        assert_eq!(ts_rtt_us(0, u32::MAX), Some(1000), "across the wrap");
        assert_eq!(ts_rtt_us(i32::MAX as u32 / 1000, 0), None);
        let d = i32::MAX as u32 / 1000 - 1;
        assert_eq!(ts_rtt_us(d, 0), Some(d * 1000));
    }
}
