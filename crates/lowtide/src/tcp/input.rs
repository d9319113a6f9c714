//! Segment input as tcp_input.c takes it in, and its state machine:
//! `tcp_rcv_state_process`, `tcp_rcv_synsent_state_process`, `tcp_rcv_established`'s
//! slow path, `tcp_finish_connect`, `tcp_init_transfer`; tcp_output.c `tcp_connect`.
//! The ACK path is tcp/ack.rs, the data path tcp/data_queue.rs.

use super::ack::AckOutcome;
use super::rcvqueue::Payload;
use super::sock::Tcb;
use super::timer::RttSamples;
use super::validate::SegSpace;
use super::{Ctx, TcpState};
use crate::mib::Mib;
use crate::socket::EventKind;
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};
use tracing::trace;

impl Tcb {
    /// Active open: send the SYN (`tcp_connect`).
    pub(crate) fn connect(&mut self, ctx: &mut Ctx) {
        ctx.mib.inc(Mib::TcpActiveOpens);
        self.state = TcpState::SynSent;
        let init_rwnd = self.connect_init(ctx);
        let mss = self.initial_window_mss();
        self.select_initial_window(ctx.cfg, mss, ctx.cfg.tcp_window_scaling, init_rwnd);
        self.write_seq = 1;
        self.ecn_send_syn(ctx.cfg);
        self.send_syn(ctx);
    }

    /// `tcp_connect_init` up to the initial window (returned: the route's
    /// `initrwnd`): "we'll fix this up when we get a response from the other end".
    /// The header counts the timestamp option if `tcp_timestamps` offers it; the
    /// clamp is `TCP_MAXSEG`, else what `tcp_v4_connect` / `tcp_v6_connect` leave
    /// (`TCP_MSS_DEFAULT` 536, or 1220 for `IPV6_MIN_MTU`); `tcp_mtup_init` and
    /// `tcp_sync_mss` with the route's MTU set `mss_cache` (524 on IPv4 with
    /// timestamps); then the route's congestion control, window clamp and `advmss`
    /// (`dst_connect_init`) and `tcp_initialize_rcv_mss`, before any receive window
    /// (so `TCP_MIN_MSS`). `rcvq_space` waits for `tcp_init_buffer_space`.
    pub(crate) fn connect_init(&mut self, ctx: &Ctx) -> u32 {
        self.connect_ts = ctx.cfg.tcp_timestamps;
        self.rx_opt.mss_clamp = match (self.rx_opt.user_mss, self.tuple.local.is_ipv6()) {
            (0, false) => 536,
            (0, true) => 1220,
            (user, _) => user,
        };
        self.max_window = 0;
        self.mtup_init(ctx);
        self.sync_mss(self.pmtu_cookie, ctx.cfg.tcp_min_snd_mss);
        let init_rwnd = self.dst_connect_init(ctx.cfg);
        self.initialize_rcv_mss();
        self.rcvq_space = 0;
        init_rwnd
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
        self.req.syn_tos = Some(ip.tos | ip.ecn);
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
        // tcp_v4_syn_recv_sock / tcp_v6_syn_recv_sock: the child guesses its
        // receive MSS from the request's window (a Fast Open child keeps the guess
        // until its handshake completes).
        self.initialize_rcv_mss();
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
        self.connect_ts = false; // tcp_header_len from what the peer sent
        self.rx_opt.sack_ok = o.sack_permitted && ctx.cfg.tcp_sack;
        self.rx_opt.tstamp_ok = o.timestamp.is_some() && ctx.cfg.tcp_timestamps;
        if let (true, Some((tsval, _))) = (self.rx_opt.tstamp_ok, o.timestamp) {
            self.rx_opt.ts_recent = tsval;
            self.rx_opt.ts_recent_stamp = ctx.now;
        }
        if !active && !self.req.cookie && self.md5_key().is_some() {
            // tcp_synack_options: "We can't fit any SACK blocks in a packet with
            // MD5 + TS options": the request gives up its timestamps for SACK
            // (ireq->tstamp_ok &= !ireq->sack_ok), and so does its child.
            self.rx_opt.tstamp_ok &= !self.rx_opt.sack_ok;
        }
        self.rx_opt.wscale_ok = o.wscale.is_some() && ctx.cfg.tcp_window_scaling;
        if self.rx_opt.wscale_ok {
            // RFC 7323 section 2.3: a shift above 14 is used as 14.
            self.rx_opt.snd_wscale = o.wscale.unwrap_or(0).min(14);
        } else if !active || th.flags.contains(TcpFlags::ACK) {
            // tcp_rcv_synsent_state_process on a SYN-ACK: no scaling, no window
            // above 64 KB (a request's window is chosen afresh, passive_open).
            self.rx_opt.snd_wscale = 0;
            self.rx_opt.rcv_wscale = 0;
            self.window_clamp = self.window_clamp.min(65535);
        } else {
            // A crossed SYN (simultaneous open) leaves rcv_wscale as tcp_connect_init
            // chose it: its branch of tcp_rcv_synsent_state_process has no such
            // reset, so our windows stay scaled (and our SYN-ACK offers the scale,
            // tcp_syn_options) though the peer's SYN offered none.
            self.rx_opt.snd_wscale = 0;
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
    }

    /// The window in a SYN is never scaled
    /// ([RFC 7323 section 2.2](https://www.rfc-editor.org/rfc/rfc7323#section-2.2)).
    fn init_window_from_syn(&mut self, th: &TcpRepr) {
        self.snd_wnd = th.window as u32;
        self.max_window = self.snd_wnd;
        self.snd_wl1 = 0;
    }

    /// Entry point for every segment of this connection. `segs` is the skb's
    /// `max(1, gso_segs)` as the stack counted it for `TcpInSegs`
    /// ([`super::drops::rx_gso_segs`]): what its drops count.
    pub(crate) fn rcv_segment(
        &mut self,
        ctx: &mut Ctx,
        ip: &IpRepr,
        th: &TcpRepr,
        payload: Payload,
        segs: u32,
    ) {
        // tcp_segs_in (tcp_v4_rcv, tcp_child_process): every segment the socket
        // gets, before any check can drop it; data_segs_in those with a payload.
        self.segs_in += 1;
        self.data_segs_in += !payload.is_empty() as u64;
        self.rx_ip_ecn = ip.ecn;
        self.rx_ttl = ip.hop_limit;
        self.rx_pkt_len = (ip.header_len + ip.payload_len) as u32;
        self.rx_segs = segs;
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
            // "Previous FIN/ACK or RST/ACK might be ignored": before any timeout,
            // the SYN goes again in TCP_TIMEOUT_MIN, not after the RTO.
            if self.icsk.retransmits == 0 {
                let at = ctx.now + super::consts::TCP_TIMEOUT_MIN;
                self.icsk.pending = Some((super::inet_connection_sock::Pending::Retrans, at));
            }
            if !f.contains(TcpFlags::RST) {
                super::reply::send_reset(
                    ctx,
                    (self.tuple, self.reset_flow_label(ctx)),
                    th,
                    0,
                    self.md5_key(),
                );
            }
            return;
        }
        // The TSecr of an acceptable ACK must echo a time since our first SYN
        // (retrans_stamp); else reset_and_undo: a reset, and SYN-SENT goes on.
        if f.contains(TcpFlags::ACK) && !self.synsent_tsecr_ok(ctx, th) {
            ctx.mib.inc(Mib::TcpExtPAWSActive);
            if !f.contains(TcpFlags::RST) {
                super::reply::send_reset(
                    ctx,
                    (self.tuple, self.reset_flow_label(ctx)),
                    th,
                    0,
                    self.md5_key(),
                );
            }
            return;
        }
        if f.contains(TcpFlags::RST) {
            match f.contains(TcpFlags::ACK) {
                true => self.tcp_reset(ctx), // ECONNREFUSED in SYN-SENT
                // "Otherwise (no ACK) drop the segment": discard_and_undo.
                false => self.tcp_drop(),
            }
            return;
        }
        if !f.contains(TcpFlags::SYN) {
            // discard_and_undo: an acceptable ACK without SYN, or neither SYN nor
            // RST ("fifth, ... drop the segment and return").
            self.tcp_drop();
            return;
        }
        // A SYN without ACK (crossed SYNs): the PAWS check against the peer's
        // timestamp this connection took over from TIME-WAIT (tcp_twsk_unique;
        // Linux's ts_recent_stamp is 0 otherwise): an older TSval is an old
        // duplicate, dropped (discard_and_undo, SKB_DROP_REASON_TCP_RFC7323_PAWS).
        if !f.contains(TcpFlags::ACK) && self.synsent_paws_reject(ctx, th) {
            self.tcp_drop();
            return;
        }
        self.irs = super::seq::Seq(th.seq);
        self.rcv_nxt = 1;
        self.rcv_wup = 1;
        self.copied_seq = 1;
        self.init_window_from_syn(th); // tcp_ack's window update before tcp_sync_mss
        self.negotiate_options(ctx, th, true);
        self.ecn_rcv_syn(ctx.cfg, th, self.rx_ip_ecn);
        if f.contains(TcpFlags::ACK) {
            self.try_undo_spurious_syn(th); // before tcp_ack clears retrans_stamp
            self.synsent_acked(ctx, th, ack as u64, payload);
        } else {
            // Simultaneous open (RFC 9293 figure 8): SYN-RECV, SYN-ACK.
            // tcp_rcv_synsent_state_process: tcp_sync_mss (set_peer_mss), then
            // tcp_initialize_rcv_mss from our SYN's window.
            self.initialize_rcv_mss();
            self.state = TcpState::SynRecv;
            self.send_syn(ctx);
        }
    }

    /// `tcp_rcv_synsent_state_process`'s PAWS check of a SYN without ACK:
    /// `tp->rx_opt.ts_recent_stamp && saw_tstamp && tcp_paws_reject(&tp->rx_opt, 0)`.
    /// A socket in SYN-SENT has a `ts_recent_stamp` only when its `connect` took a
    /// TIME-WAIT socket's place (`RxOpt::ts_recent_from_tw`); the timestamp counts
    /// while `net.ipv4.tcp_timestamps` is on (`tcp_parse_options` with `estab` 0).
    fn synsent_paws_reject(&self, ctx: &Ctx, th: &TcpRepr) -> bool {
        let Some((tsval, _)) = th.options.timestamp.filter(|_| ctx.cfg.tcp_timestamps) else {
            return false;
        };
        self.rx_opt.ts_recent_from_tw && !self.paws_check(ctx, tsval, 0)
    }

    /// `tcp_rcv_synsent_state_process`'s PAWS test: a non-zero TSecr lies between
    /// our TSval at the first SYN (`retrans_stamp`) and now. The timestamp counts
    /// only while `net.ipv4.tcp_timestamps` is on (`saw_tstamp`: `tcp_parse_options`
    /// with `estab` 0), whatever our SYN carried.
    fn synsent_tsecr_ok(&self, ctx: &Ctx, th: &TcpRepr) -> bool {
        let ts = th.options.timestamp.filter(|_| ctx.cfg.tcp_timestamps);
        let (Some((_, ecr)), Some(first)) = (ts, self.undo.retrans_stamp) else {
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
        let prior_delivered = self.delivered;
        self.syn_skb_acked(ctx, th);
        if ack > 1 {
            let c = self.clean_rtx_queue(ctx, ack);
            self.delivered += c.acked_segs as u64;
        }
        self.handshake_rack_advance(ctx.now);
        // tcp_ack's tcp_accecn_process on the SYN-ACK (tcp_ecn_rcv_synack ran first):
        // FLAG_SYN_ACKED stops it before ACE, but what it delivered starts
        // pkts_acked_ewma.
        if self.ecn_mode_accecn() {
            let a = super::accecn::AccEcnAck {
                delivered_pkts: (self.delivered - prior_delivered) as u32,
                delivered_bytes: ack as u32,
                slowpath: true,
                progress: true,
                syn_acked: true,
            };
            self.accecn_process(th, &a);
        }
        self.syn_acked_alert(ctx, 0);
        self.synack_ack_end(ctx, prior_delivered);
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
        // tcp_rcv_state_process, SYN-SENT: "Do step6 onward by hand".
        self.data_snd_check(ctx);
        if !self.rtx.is_empty() && self.icsk.pending.is_none() {
            self.rearm_rto(ctx);
        }
    }

    /// The end of `tcp_ack` on the SYN-ACK. `tcp_newly_delivered` counts what it
    /// delivered (the SYN, and Fast Open data) in `TcpExtTCPDelivered`.
    /// `tcp_rate_gen` takes no sample (every skb of SYN-SENT went out with the SYN
    /// in flight, so with no delivery timestamp) but ends the application-limited
    /// bubble `tcp_init_sock` left and stamps the delivery. `tcp_cong_control` sets
    /// the pacing rate from the SYN-SENT window, which `tcp_init_transfer` then
    /// replaces by the initial one without a new rate. Its other effects (cwnd
    /// growth on acked Fast Open data, the congestion control's `pkts_acked` or
    /// `cong_control`) are undone there: cwnd set afresh, the module's `init`.
    fn synack_ack_end(&mut self, ctx: &mut Ctx, prior_delivered: u64) {
        let delivered = self.newly_delivered(ctx, prior_delivered, false, 0);
        let rate = super::rate::AckRate {
            delivered,
            ..Default::default()
        };
        self.rate_gen(ctx.now, &rate);
        if !self.cc.has_cong_control() {
            self.update_pacing_rate(ctx.cfg);
        }
    }

    /// `tcp_ack` on the ACK of our queued SYN: `tcp_clean_rtx_queue` frees it
    /// (`FLAG_SYN_ACKED`: `retrans_stamp` cleared, the SYN delivered) and times it
    /// (Karn: not after a retransmission), `tcp_snd_una_update` counts it in
    /// `bytes_acked`.
    fn syn_skb_acked(&mut self, ctx: &mut Ctx, th: &TcpRepr) {
        let c = self.rtx.clean(1);
        self.wmem_free(c.truesize);
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
        let (cc, mut c) = self.cc_context(ctx.now);
        cc.init(&mut c);
        self.sndbuf_expand(ctx);
        self.rcvq_space_time = ctx.now;
        self.init_rcv_buffer_space(ctx.cfg);
    }

    /// Segment processing in SYN-RECV and every synchronized state
    /// (`tcp_rcv_established`'s slow path, `tcp_rcv_state_process`).
    fn rcv_synchronized(&mut self, ctx: &mut Ctx, th: &TcpRepr, payload: Payload, hdr_len: usize) {
        if self.is_request_child() && !self.check_req(ctx, th, payload.len()) {
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
        // Both paths drop a segment with none of ACK, RST and SYN first.
        if !f.intersects(TcpFlags::ACK | TcpFlags::RST | TcpFlags::SYN) {
            trace!("drop: no ACK, RST or SYN flag");
            self.tcp_drop(); // SKB_DROP_REASON_TCP_FLAGS
            return;
        }
        let established = self.state == TcpState::Established;
        let syn_inerr = established;
        if !self.validate_incoming(ctx, th, sp, syn_inerr) {
            return;
        }
        // tcp_rcv_established, both paths (the slow one at step 5): every segment's
        // IP-ECN field, pure ACKs too, counts for AccECN (tcp_ecn_received_counters).
        if established {
            self.ecn_received_counters(self.rx_ip_ecn, payload.len());
        }
        // A Fast Open child's request (SYN-RECV, or FIN-WAIT-1 closed before the
        // handshake ended) stays through tcp_ack, which may undo with it.
        let tfo_req = self.tfo.rsk.is_some();
        // FLAG_SYN_ACKED: this ACK covers our SYN-ACK (whose ACE is the handshake's).
        let syn_acked = self.state == TcpState::SynRecv;
        if syn_acked && !self.synrecv_acked(ctx, th, payload.len()) {
            return;
        }
        // Data the fast path takes is queued on the reserve it fits in (its check in
        // header_predicted), not through tcp_try_rmem_schedule.
        let fast_data = hp && !payload.is_empty();
        if fast_data && ack_off == self.snd_una {
            return self.fast_path_data_same_ack(ctx, th, seq, payload);
        }
        let fin_wait1 = self.state == TcpState::FinWait1;
        let accepted = match self.ack(ctx, th, payload.len(), hp, syn_acked) {
            // tcp_rcv_established's and tcp_rcv_state_process's `discard:`; in
            // SYN-RECV the reason goes back for tcp_v4_do_rcv's reset, uncounted.
            AckOutcome::Discard => {
                if !syn_acked {
                    self.tcp_drop();
                }
                return;
            }
            // tcp_ack returns at `old_ack:` before FLAG_UPDATE_TS_RECENT: the
            // segment's data is kept, its timestamp does not move ts_recent.
            AckOutcome::Old => false,
            // After tcp_ack accepted the ACK, as Linux's FLAG_UPDATE_TS_RECENT: a
            // segment dropped for an unacceptable ACK must not move ts_recent (else
            // PAWS rejects the peer's next valid segment; packetdrill
            // ts_recent/invalid_ack.pkt).
            AckOutcome::New => {
                self.replace_ts_recent(ctx, th, seq);
                true
            }
        };
        // tcp_rcv_state_process, SYN-RECV and FIN-WAIT-1, once tcp_ack accepted the
        // ACK: tcp_rcv_synrecv_state_fastopen.
        if tfo_req && accepted && self.tfo.rsk.is_some() && self.state != TcpState::Closed {
            self.fastopen_synrecv_done(ctx, th);
        }
        // tcp_rcv_state_process, SYN-RECV, after tcp_ack: a socket with
        // SEND_SHUTDOWN (a child that inherited it from its listener, or a Fast Open
        // child or simultaneous open shut in SYN-RECV, where tcp_shutdown sends
        // nothing) sends its FIN now (tcp_shutdown: ESTABLISHED to FIN-WAIT-1); the
        // ACK that established it never sees the FIN in flight (no duplicate ACK).
        if syn_acked && self.state == TcpState::Established && self.shut_wr && !self.fin_queued {
            self.send_fin(ctx);
        }
        if self.state == TcpState::Closed {
            return;
        }
        if fin_wait1 && self.state == TcpState::FinWait2 && self.sock_dead() {
            let new_data = sp
                .end
                .is_some_and(|e| e != seq && e - f.contains(TcpFlags::FIN) as u64 > self.rcv_nxt);
            if !self.orphan_fin_wait2(ctx, th, new_data) {
                return;
            }
        }
        self.rx_fast_data = fast_data;
        self.data_rcv_rtt(ctx, th, seq, payload, established);
        self.rx_fast_data = false;
        // tcp_data_snd_check, then tcp_ack_snd_check: data we send carries the ACK;
        // data the device queue dropped goes first, as it is still unsent in Linux.
        if !self.local_drops.is_empty() {
            self.resend_local_drops(ctx);
        }
        self.data_snd_check(ctx);
        self.ack_snd_check(ctx);
    }

    /// `tcp_data_snd_check`: what may go now goes (`tcp_push_pending_frames`), then
    /// `tcp_check_space` grows the send buffer and wakes the writer.
    fn data_snd_check(&mut self, ctx: &mut Ctx) {
        self.write_xmit(ctx);
        self.check_space(ctx);
    }

    /// `tcp_rcv_established`'s fast path for in-order data whose ACK equals
    /// `snd_una` ("only one small jumplet in fast path"): no `tcp_ack` at all, so
    /// `rcv_tstamp`, `icsk_probes_out` and the soft error stay as they were; only
    /// `tcp_update_wl` and the timestamp (`tcp_store_ts_recent` at `rcv_wup`), then the
    /// data and `__tcp_ack_snd_check`, without `tcp_data_snd_check`.
    fn fast_path_data_same_ack(&mut self, ctx: &mut Ctx, th: &TcpRepr, seq: u64, payload: Payload) {
        self.snd_wl1 = seq;
        self.replace_ts_recent(ctx, th, seq);
        self.rx_fast_data = true;
        self.data_rcv_rtt(ctx, th, seq, payload, true);
        self.rx_fast_data = false;
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
    fn synrecv_acked(&mut self, ctx: &mut Ctx, th: &TcpRepr, payload_len: usize) -> bool {
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
            // A request's reset is the listener's.
            let fl = match self.parent.is_some() && !fastopen {
                true => self.listener_flow_label(ctx),
                false => self.reset_flow_label(ctx),
            };
            super::reply::send_reset(ctx, (self.tuple, fl), th, 0, self.md5_key());
            return false;
        }
        let child = self.parent.is_some() || fastopen;
        if child {
            // tcp_create_openreq_child: the child's data times start at the final
            // ACK (a Fast Open child's started at its SYN); tcp_rcv_state_process
            // restarts lsndtime.
            if !fastopen {
                // tcp_create_openreq_child counts the child it makes here (a cookie's
                // too); requests that never complete count nothing.
                ctx.mib.inc(Mib::TcpPassiveOpens);
                self.ack.lrcvtime = ctx.now;
                if self.repflow {
                    // tcp_v6_syn_recv_sock: the child reflects the final ACK's label.
                    self.flow_label = ctx.rx_flowlabel.unwrap_or(0);
                }
                // tcp_create_openreq_child: the SYN is the child's first segment in,
                // this ACK its second; the request sock's SYN-ACKs are not its own.
                self.segs_in = 2;
                self.segs_out = 0;
            }
            self.lsndtime = ctx.now;
        }
        // tcp_ecn_openreq_child and tcp_rcv_state_process's SYN-RECV: the third ACK
        // of AccECN checks the peer's feedback; the child counts it as received.
        if self.ecn_mode_accecn() {
            self.accecn_third_ack(ctx.cfg, th, payload_len);
            // tcp_check_req: the third ACK's AccECN option (tcp_accecn_option_init).
            if let Some(opt) = th.options.accecn.as_ref() {
                self.accecn_option_seen(opt);
            }
            if child {
                // tcp_ecn_openreq_child: the child's first segment carries the
                // option.
                self.accecn.opt_demand = 1;
                self.ecn_received_counters(self.rx_ip_ecn, payload_len);
            }
        }
        self.rcv_tstamp = ctx.now; // tcp_ack on the handshake's final ACK
        self.keepalive_on_establish(ctx); // tcp_create_openreq_child
        if !child {
            // Simultaneous open: tcp_ack frees our SYN, which its
            // tcp_newly_delivered counts (the SYN-ACK's delivery below is not).
            let prior = self.delivered;
            self.syn_skb_acked(ctx, th);
            ctx.mib.add(Mib::TcpExtTCPDelivered, self.delivered - prior);
            self.handshake_rack_advance(ctx.now);
        }
        self.delivered += 1; // tcp_rcv_state_process: SYN-ACK delivery, untracked by tcp_ack
        if self.rtt.srtt_us == 0 {
            // tcp_synack_rtt_meas: the request's SYN-ACK, sent when it was created,
            // unless it went again (req->num_retrans: a timeout's resend or a
            // retransmitted SYN's, Karn), or a cookie's child (no request timed it).
            let once = self.total_retrans == 0 && !self.req.cookie;
            let sent = (child && once).then_some(self.created);
            self.synack_rtt_sample(ctx, th, sent);
        }
        if child {
            // tcp_create_openreq_child: a child starts with snd_una = ISN + 1. A
            // Fast Open child's SYN-ACK timeouts end as an RTO recovery
            // (tcp_rcv_synrecv_state_fastopen: tcp_update_rto_time); a request's
            // child takes them in openreq_child_undo.
            self.snd_una = 1;
            if fastopen {
                self.update_rto_time(ctx.now);
            }
        } else {
            self.syn_acked_alert(ctx, 0);
        }
        self.snd_nxt = self.snd_nxt.max(1);
        self.state = TcpState::Established;
        if self.parent.is_some() && !fastopen {
            self.openreq_child_undo(ctx.now);
            self.syn_recv_sock_tos(ctx.cfg);
        }
        if !fastopen {
            self.icsk.pending = None;
            self.icsk.retransmits = 0;
            self.icsk.backoff = 0;
        }
        let wnd = (th.window as u32) << self.rx_opt.snd_wscale;
        if child && !fastopen {
            // tcp_create_openreq_child: a child made at this ACK has its window as
            // the largest (tcp_sync_mss).
            self.max_window = wnd;
            self.sync_mss(self.pmtu_cookie, ctx.cfg.tcp_min_snd_mss);
        } else {
            // tcp_ack's tcp_ack_update_window first (the ACK covers our SYN or
            // follows the peer's, so it may update the window): a SYN-ACK's window
            // unscaled, max_window raised only by a changed window. Then
            // tcp_rcv_state_process sets snd_wnd, scaled, and leaves max_window.
            let nwin = self.ack_window(th);
            if self.snd_wnd != nwin {
                self.grow_max_window(ctx, nwin);
            }
        }
        self.snd_wnd = wnd;
        self.snd_wl1 = self.rcv_off(super::seq::Seq(th.seq));
        self.fast_path_on(); // tcp_rcv_state_process, SYN-RECV
                             // A Fast Open child's request goes after tcp_ack (rcv_synchronized).
        if !fastopen {
            // tcp_rcv_state_process, SYN-RECV.
            self.try_undo_spurious_syn(th);
            self.undo.retrans_stamp = None;
            self.init_buffer_space(ctx);
        }
        // tcp_rcv_state_process, SYN-RECV: the pacing rate from the initial window
        // (a congestion control with cong_control, BBR, sets its own in init).
        if !self.cc.has_cong_control() {
            self.update_pacing_rate(ctx.cfg);
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
    /// SYNs leave none: "packets are not lost but delayed". A cookie's child has
    /// none either: its request is made at the ACK (`num_timeout` 0). The timeouts
    /// are one RTO recovery, over: `total_rto` is `num_timeout` (counted as each
    /// struck), `total_rto_recoveries` 1, and `total_rto_time` the ms from the
    /// first SYN-ACK to now (`tcp_clock_ms() - snt_synack`), not from the first
    /// timeout; the child has no recovery open (`rto_stamp` 0).
    fn openreq_child_undo(&mut self, now: crate::time::Instant) {
        if self.icsk.retransmits > 0 && !self.req.cookie {
            self.undo.marker = Some(0);
            self.undo.retrans = 0;
            self.undo.retrans_stamp = Some(self.created);
            self.rto_stamp = None;
            self.total_rto_time_ms = now.as_millis().saturating_sub(self.created.as_millis());
        }
    }

    /// Our FIN was acknowledged
    /// ([RFC 9293 3.10.7.4](https://www.rfc-editor.org/rfc/rfc9293#section-3.10.7.4),
    /// FIN-WAIT-1/CLOSING/LAST-ACK).
    pub(super) fn our_fin_acked(&mut self, ctx: &mut Ctx) {
        match self.state {
            // An orphan's FIN-WAIT-2 is timed by rcv_synchronized (orphan_fin_wait2).
            TcpState::FinWait1 => {
                self.state = TcpState::FinWait2;
                // tcp_rcv_state_process, FIN-WAIT-1: "Wake up lingering close()":
                // sk_state_change, for a socket not yet orphaned.
                if !self.sock_dead() {
                    self.notify(ctx, EventKind::StateChange);
                }
            }
            TcpState::Closing => self.enter_time_wait(ctx),
            TcpState::LastAck => {
                self.update_metrics(ctx);
                self.set_closed(ctx);
            }
            _ => {}
        }
    }

    /// `sock_flag(sk, SOCK_DEAD)`: the application closed the socket (`tcp_close`'s
    /// `sock_orphan`). Not `sk_shutdown == SHUTDOWN_MASK`: a socket shut both ways
    /// with shutdown(2) is no orphan (no FIN-WAIT-2 timeout, no orphan retries, the
    /// zero-window RTO of a live socket).
    pub(crate) fn sock_dead(&self) -> bool {
        self.errq.dead
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::time::Instant;
    use lowtide_wire::tcp::TcpOptions;

    /// `tcp_rcv_synsent_state_process`'s PAWS test of a SYN-ACK: a non-zero TSecr
    /// outside our first SYN's TSval..now fails, but only while
    /// `net.ipv4.tcp_timestamps` lets `tcp_parse_options` see the timestamp
    /// (tests/packetdrill/syn-sent-paws-needs-tcp-timestamps.pkt).
    #[test]
    fn synsent_paws_test_needs_tcp_timestamps() {
        let mut cfg = Config::default();
        let mut st = crate::tcp::TestStack::default();
        let first = Instant(1_000_000_000);
        let now = Instant(1_020_000_000);
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::SynSent;
        t.undo.retrans_stamp = Some(first);
        let synack = |ecr: u32| TcpRepr {
            flags: TcpFlags::SYN | TcpFlags::ACK,
            options: TcpOptions {
                timestamp: Some((7000, ecr)),
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        };
        let (lo, hi) = (t.tsval(first), t.tsval(now));
        let cases = [
            (lo, true),
            (hi, true),
            (0, true),
            (lo.wrapping_sub(1), false),
        ];
        for (ecr, ok) in cases.into_iter().chain([(hi + 1, false)]) {
            let ctx = st.ctx(&cfg, now, false);
            assert_eq!(t.synsent_tsecr_ok(&ctx, &synack(ecr)), ok, "ecr {ecr}");
        }
        cfg.tcp_timestamps = false;
        let ctx = st.ctx(&cfg, now, false);
        assert!(
            t.synsent_tsecr_ok(&ctx, &synack(hi + 5000)),
            "no saw_tstamp"
        );
    }
}
