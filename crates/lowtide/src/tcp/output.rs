//! Transmission: tcp_output.c's `tcp_transmit_skb` (`tcp_write_xmit` is in
//! `write_xmit`, `tcp_xmit_retransmit_queue` in `retransmit`), the SYN,
//! `tcp_write_wakeup`, ACKs, resets and window selection.

use super::accecn_opt::AccEcnFit;
use super::cong::CaEvent;
use super::consts::{MAX_TCP_WINDOW, SKB_OVERHEAD};
use super::md5::Md5Key;
use super::rtx::skb::{self, Skb, SkbData, FLAG_FIN, FLAG_PSH, FLAG_SYN};
use super::sock::{Pending, Tcb};
use super::{Ctx, FourTuple, TcpState};
use crate::config::Config;
use crate::mib::Mib;
use crate::socket::{Transmit, TxPayload, TxRetrans, TxToken};
use crate::Instant;
use lowtide_wire::checksum;
use lowtide_wire::ip::{IpRepr, PROTO_TCP};
use lowtide_wire::tcp::{AccEcnOption, SackBlock, TcpFlags, TcpOptions, TcpRepr};

/// What a TCP packet's IP header takes from its sender: the connection's
/// addresses, the TOS byte with the ECN bits, DF (IPv4), and what the IPv6 flow
/// label comes from.
pub(crate) type IpOut = (FourTuple, u8, bool, super::flowlabel::FlowLabel);

/// Builds one IP/TCP packet with a CHECKSUM_PARTIAL TCP checksum: headers built in
/// place in a pooled buffer, then stored payload copied behind them, or, with
/// `apart` (a GSO packet for a device that takes payload apart), left out and
/// returned as a shared slice for the device to copy into its segments. A pattern
/// payload is always returned apart, for the device to make. `tos` is the TOS byte
/// with the ECN bits; an IPv4 header gets DF as `df` says (`__ip_queue_xmit`), and
/// `ttl` as its TTL or hop limit, an IPv6 header the flow label `fl` makes
/// (`ip6_make_flowlabel`). With a TCP-MD5 `key` (and `th` carrying the
/// option), the digest is filled in (`tcp_v4_md5_hash_skb` / `tcp_v6_md5_hash_skb`).
pub(super) fn build_packet(
    ctx: &mut Ctx,
    (tuple, tos, df, fl): IpOut,
    th: &TcpRepr,
    (payload, apart): (TxPayload, bool),
    ttl: u8,
    key: Option<&Md5Key>,
) -> (Vec<u8>, TxPayload) {
    let thl = th.header_len();
    let ip = IpRepr {
        src: tuple.local.ip(),
        dst: tuple.remote.ip(),
        protocol: PROTO_TCP,
        hop_limit: ttl,
        ecn: tos & super::ecn::INET_ECN_MASK,
        tos: tos & !super::ecn::INET_ECN_MASK,
        header_len: 0,
        payload_len: thl + payload.len(),
    };
    let ihl = ip.emit_len();
    let copied = match &payload {
        TxPayload::Bytes(b) if !apart => Some(b),
        _ => None,
    };
    let mut pkt = ctx.pool.take(ihl + thl + copied.map_or(0, |b| b.len()));
    pkt.resize(ihl + thl, 0);
    ip.emit(&mut pkt[..ihl], *ctx.ip_id);
    if !df && !tuple.local.is_ipv6() {
        lowtide_wire::ip::set_ipv4_tos_df(&mut pkt[..ihl], tos, df);
    }
    if ip.src.is_ipv6() {
        let label = fl.make(ctx.cfg, ctx.flow_key, &tuple);
        lowtide_wire::ip::set_ipv6_flowlabel(&mut pkt[..ihl], label);
    }
    th.emit(&mut pkt[ihl..]);
    if let (Some(key), Some(_)) = (key, th.options.md5sig) {
        sign(key, (ip.src, ip.dst), &mut pkt[ihl..], &payload);
    }
    let tcp_len = thl + payload.len();
    checksum::fill_tcp_partial_len(ip.src, ip.dst, &mut pkt[ihl..], tcp_len);
    match copied {
        Some(b) => {
            pkt.extend_from_slice(b);
            (pkt, TxPayload::default())
        }
        None => (pkt, payload),
    }
}

/// Writes the TCP-MD5 digest of the segment whose header is `header` (with the
/// option in place, `tcp_options_write`'s `hash_location`) and payload `payload`.
fn sign(
    key: &Md5Key,
    addrs: (std::net::IpAddr, std::net::IpAddr),
    header: &mut [u8],
    payload: &TxPayload,
) {
    let digest = match payload {
        TxPayload::Bytes(b) => super::md5::hash_segment(key, addrs, header, &[b]),
        TxPayload::Pattern(_) => {
            super::md5::hash_segment(key, addrs, header, &[&payload.to_bytes()])
        }
    };
    let at = lowtide_wire::tcp::MD5SIG_DIGEST_OFFSET;
    header[at..at + 16].copy_from_slice(&digest);
}

/// Hands a packet to the device queue of the stack, counting it in the IP
/// counters (the caller counts `TcpOutSegs`, see [`Tcb::count_out_segs`]).
pub(super) fn push(
    ctx: &mut Ctx,
    (packet, apart): (Vec<u8>, TxPayload),
    (mss, tcp_accecn): (u32, bool),
    payload: usize,
    token: TxToken,
    tstamp: Instant,
) {
    let segs = payload.div_ceil(mss.max(1) as usize).max(1) as u16;
    let gso_size = if segs > 1 { mss as u16 } else { 0 };
    *ctx.ip_id = ctx.ip_id.wrapping_add(segs);
    let ver = crate::mib::ip_version(&packet);
    ctx.mib.inc(Mib::IpOutRequests.for_ip_version(ver));
    // ip_finish_output2's IP_UPD_PO_STATS(IPSTATS_MIB_OUT) (ip6_finish_output2's
    // IP6_UPD_PO_STATS): one transmit and the skb's length before GSO splits it,
    // so a GSO packet counts its headers once.
    ctx.mib.inc(Mib::IpOutTransmits.for_ip_version(ver));
    let octets = Mib::IpExtOutOctets.for_ip_version(ver);
    ctx.mib.add(octets, (packet.len() + apart.len()) as u64);
    // tcp_add_tx_delay / tcp_transmit_time: TCP_TX_DELAY pushes the departure
    // time of what goes out (the skb kept for RTT samples and pacing stays as it
    // was); only a qdisc that honours EDT, as sch_fq, holds the packet for it.
    let tstamp = tstamp + core::time::Duration::from_micros(ctx.tx_delay_us as u64);
    ctx.out.push_back(Transmit {
        packet,
        payload: apart,
        gso_size,
        gso_segs: segs,
        tcp_accecn,
        token,
        tstamp,
    });
}

/// Drops the packets queued on the device from `from` on, taking back what
/// [`push`] and [`Tcb::count_out_segs`] counted for each (IP requests, transmits
/// and octets; `TcpOutSegs`): they were never sent. Keep in step with [`push`].
pub(crate) fn unpush_from(ctx: &mut Ctx, from: usize) {
    while ctx.out.len() > from {
        let Some(t) = ctx.out.pop_back() else { break };
        let ver = crate::mib::ip_version(&t.packet);
        ctx.mib.take_back(Mib::IpOutRequests.for_ip_version(ver), 1);
        ctx.mib
            .take_back(Mib::IpOutTransmits.for_ip_version(ver), 1);
        let octets = (t.packet.len() + t.payload.len()) as u64;
        ctx.mib
            .take_back(Mib::IpExtOutOctets.for_ip_version(ver), octets);
        ctx.mib.take_back(Mib::TcpOutSegs, t.gso_segs.max(1) as u64);
    }
}

impl Tcb {
    /// `tp->af_specific->md5_lookup(sk, sk)`: the key for this connection's peer,
    /// if any (`tcp_v4_md5_lookup`; an IPv4-mapped peer finds its IPv4 key).
    pub(crate) fn md5_key(&self) -> Option<&Md5Key> {
        match self.md5.is_empty() {
            true => None,
            false => self.md5.lookup(self.tuple.remote.ip()),
        }
    }

    /// `tcp_current_mss`: payload per segment with the options this segment carries:
    /// `mss_cache` (which has the floor and the timestamps' room already) less the
    /// room of a TCP-MD5 option, of this segment's SACK blocks and of its AccECN
    /// option (`tcp_established_options` sizes them as for the next segment), with
    /// no floor of its own.
    pub(crate) fn current_mss(&self, cfg: &Config, now: Instant) -> u32 {
        let md5 = self.md5_key().is_some();
        let (sack_blocks, accecn) = self.established_sizes(cfg, now, md5);
        let sack_len = match sack_blocks {
            0 => 0,
            n => 4 + 8 * n as u32,
        };
        let md5_len = if md5 {
            super::md5::TCPOLEN_MD5SIG_ALIGNED
        } else {
            0
        };
        let accecn_len = accecn.map_or(0, |(_, fit)| fit.size as u32);
        self.mss_cache
            .saturating_sub(sack_len + md5_len + accecn_len)
    }

    /// `tcp_established_options`: the SACK blocks (D-SACK first) that fit in the
    /// option space the TCP-MD5 option (`md5`) and the timestamps leave, then the
    /// AccECN option in what they leave (`tcp/accecn_opt.rs`), which may take a
    /// block's room: the blocks and the option's fit.
    fn established_sizes(
        &self,
        cfg: &Config,
        now: Instant,
        md5: bool,
    ) -> (usize, Option<(AccEcnOption, AccEcnFit)>) {
        let eff_sacks = match self.rx_opt.sack_ok {
            true => self.dsack.is_some() as usize + self.ofo.sack_blocks().count(),
            false => 0,
        };
        let sack_blocks = eff_sacks.min(self.sack_room(md5));
        let md5_len = if md5 { 20 } else { 0 };
        let ts_len = if self.rx_opt.tstamp_ok { 12 } else { 0 };
        let sack_len = match sack_blocks {
            0 => 0,
            n => 4 + 8 * n,
        };
        let accecn = self.established_accecn(cfg, now, md5_len + ts_len + sack_len, sack_blocks);
        let sack_blocks = accecn.map_or(sack_blocks, |(_, fit)| fit.sack_blocks);
        (sack_blocks, accecn)
    }

    /// `tcp_established_options`: how many SACK blocks fit in the option space
    /// the TCP-MD5 option (`md5`) and the timestamps leave, none if fewer than
    /// one block's and the base's bytes are left.
    fn sack_room(&self, md5: bool) -> usize {
        let md5 = if md5 { 20 } else { 0 };
        let ts = if self.rx_opt.tstamp_ok { 12 } else { 0 };
        let remaining = lowtide_wire::tcp::MAX_OPTIONS_LEN - md5 - ts;
        match remaining < 4 + 8 {
            true => 0,
            false => (remaining - 4) / 8,
        }
    }

    /// Once the peer's MSS and the options are known (`tcp_finish_connect`,
    /// `tcp_create_openreq_child`): the clamp is the peer's MSS, no more than
    /// `TCP_MAXSEG` (`tcp_parse_options`: `rx_opt.mss_clamp`; the MSS we advertise
    /// does not bound what we send), the MSS what the path MTU allows under it
    /// (`tcp_sync_mss`).
    pub(crate) fn set_peer_mss(&mut self, peer_mss: u32, min_snd_mss: u32) {
        self.rx_opt.mss_clamp = match self.rx_opt.user_mss {
            0 => peer_mss,
            user => peer_mss.min(user),
        };
        self.sync_mss(self.pmtu_cookie, min_snd_mss);
    }

    /// A SYN cookie's child (`tcp_create_openreq_child` from `cookie_v4_check` /
    /// `cookie_v6_check`): its clamp is the MSS the cookie decodes to (`req->mss`),
    /// not bounded by `TCP_MAXSEG` again, and its MSS what the path allows under it.
    pub(crate) fn cookie_mss_clamp(&mut self, ctx: &Ctx) {
        self.rx_opt.mss_clamp = self.req.cookie_mss;
        self.sync_mss(self.pmtu_cookie, ctx.cfg.tcp_min_snd_mss);
        self.initialize_rcv_mss(); // tcp_v4_syn_recv_sock / tcp_v6_syn_recv_sock
    }

    /// `tcp_select_window`: the window field to send (`__tcp_select_window`,
    /// `tcp/rcvwin.rs`), never shrinking the right edge
    /// ([RFC 9293 section 3.8.6.2.2](https://www.rfc-editor.org/rfc/rfc9293#section-3.8.6.2.2))
    /// unless `net.ipv4.tcp_shrink_window` is set and the window is scaled;
    /// `TcpExtTCPWantZeroWindowAdv` counts the zero windows it could not offer.
    pub(crate) fn select_window(&mut self, ctx: &mut Ctx) -> u16 {
        let old_win = self.rcv_wnd;
        if self.ack.nomem {
            // "Make the window 0 if we failed to queue the data because we are out
            // of memory" (Linux 6.5+).
            self.rcv_wnd = 0;
            self.rcv_wup = self.rcv_nxt;
            return 0;
        }
        let scale = self.rx_opt.rcv_wscale as u32;
        let cur_win = self.receive_window();
        let mut win = self.compute_window(ctx.mem, ctx.cfg);
        // "Never shrink the offered window", unless tcp_shrink_window allows it
        // and the window is scaled.
        if win < cur_win && (!ctx.cfg.tcp_shrink_window || scale == 0) {
            if win == 0 {
                ctx.mib.inc(Mib::TcpExtTCPWantZeroWindowAdv);
            }
            win = cur_win.div_ceil(1 << scale) << scale;
        }
        self.rcv_wnd = win;
        self.rcv_wup = self.rcv_nxt;
        // Never more than the field can say; 32767 unscaled for peers that read it
        // as signed (tcp_workaround_signed_windows).
        let max = if scale == 0 && ctx.cfg.tcp_workaround_signed_windows {
            MAX_TCP_WINDOW
        } else {
            65535 << scale
        };
        let new_win = win.min(max) >> scale;
        if new_win == 0 {
            // "If we advertise zero window, disable fast path."
            self.fast_path_off();
            if old_win != 0 {
                ctx.mib.inc(Mib::TcpExtTCPToZeroWindowAdv);
            }
        } else if old_win == 0 {
            ctx.mib.inc(Mib::TcpExtTCPFromZeroWindowAdv);
        }
        new_win as u16
    }

    /// Options for a non-SYN segment stamped `tstamp` (`tcp_established_options`):
    /// timestamps, TSval from the stamp (`tcp_skb_timestamp_ts`), SACK blocks
    /// (D-SACK first) in the room a TCP-MD5 option (`md5`, written first) leaves,
    /// and the AccECN option when due (`tcp_options_write` then does its
    /// bookkeeping).
    fn data_options(
        &mut self,
        cfg: &Config,
        now: Instant,
        tstamp: Instant,
        md5: bool,
    ) -> TcpOptions {
        let mut o = TcpOptions::default();
        if md5 {
            o.md5sig = Some([0; 16]);
        }
        if self.rx_opt.tstamp_ok {
            o.timestamp = Some((self.tsval(tstamp), self.rx_opt.ts_recent));
        }
        let (max, accecn) = self.established_sizes(cfg, now, md5);
        o.accecn = accecn.map(|(opt, _)| opt);
        let dsack = self.dsack.is_some();
        if self.rx_opt.sack_ok {
            let mut n = 0;
            let dsack = self.dsack.take();
            for (s, e) in dsack.into_iter().chain(self.ofo.sack_blocks()) {
                if n == max {
                    break;
                }
                o.sack[n] = SackBlock {
                    start: self.rcv_seq(s).0,
                    end: self.rcv_seq(e).0,
                };
                n += 1;
            }
            o.sack_len = n as u8;
        }
        self.accecn_option_written(now, o.accecn.is_some(), dsack);
        o
    }

    /// `tcp_advertise_mss`: the MSS option of our SYN, at most what the route allows
    /// (`dst_metric_advmss`: the path MTU less 40 bytes of headers, 60 for IPv6, at
    /// least `ip_rt_min_advmss` 256), which then becomes `advmss`.
    fn advertise_mss(&mut self) -> u32 {
        let hdr = if self.tuple.local.is_ipv6() { 60 } else { 40 };
        let route = self.pmtu_cookie.saturating_sub(hdr).max(256);
        if self.pmtu_cookie > 0 && route < self.advmss {
            self.advmss = route;
        }
        self.advmss
    }

    /// Options for our SYN or SYN-ACK stamped `tstamp` (`tcp_syn_options`/
    /// `tcp_synack_options`). With a TCP-MD5 key (`md5`) the option goes first and a
    /// SYN offers no timestamps ("MD5 and timestamps don't fit"); a SYN-ACK's
    /// timestamps were given up for SACK already (`negotiate_options`). The SYN-ACK
    /// of a simultaneous open is our SYN sent again with ACK (`tcp_send_synack`), so
    /// `__tcp_transmit_skb` gives it `tcp_syn_options` too: the options the sysctls
    /// allow, whatever the peer's SYN offered, TSecr `ts_recent` (as a SYN's, which
    /// is 0 unless `connect` took over a TIME-WAIT socket's, `tcp_twsk_unique`).
    pub(super) fn syn_options(&mut self, ctx: &Ctx, tstamp: Instant, md5: bool) -> TcpOptions {
        let active = self.state == TcpState::SynSent;
        // tcp_syn_options, not tcp_synack_options: no request sock (a listener's
        // child, a Fast Open child, a SYN cookie's SYN-ACK) made this one.
        let syn = !(self.synack_of_request() || self.req.cookie);
        let mss = if syn {
            self.advertise_mss()
        } else {
            self.advmss
        };
        let mut o = TcpOptions {
            mss: Some(mss.min(65535) as u16),
            md5sig: md5.then_some([0; 16]),
            ..TcpOptions::default()
        };
        if (syn && ctx.cfg.tcp_window_scaling) || (!syn && self.rx_opt.wscale_ok) {
            o.wscale = Some(self.rx_opt.rcv_wscale);
        }
        o.sack_permitted = (syn && ctx.cfg.tcp_sack) || (!syn && self.rx_opt.sack_ok);
        let ts = match syn {
            true => ctx.cfg.tcp_timestamps && !md5,
            false => self.rx_opt.tstamp_ok,
        };
        if ts {
            let mut tsval = self.tsval(tstamp);
            if !syn {
                // tcp_synack_options: the range of TSvals the request sent (a first
                // TSval of 0 goes out as ~0, as 0 means none yet).
                if self.req.snt_tsval.0 == 0 {
                    if tsval == 0 {
                        tsval = !0;
                    }
                    self.req.snt_tsval.0 = tsval;
                }
                self.req.snt_tsval.1 = tsval;
            }
            o.timestamp = Some((tsval, self.rx_opt.ts_recent));
        }
        // tcp_syn_options / tcp_synack_options: a Fast Open cookie if it still fits;
        // a SYN that carries one marks the socket syn_fastopen (never cleared).
        if let Some(c) = self.tfo.syn_cookie {
            let used = TcpRepr {
                options: o,
                ..TcpRepr::default()
            }
            .header_len()
                - lowtide_wire::tcp::TCP_HEADER_LEN;
            if lowtide_wire::tcp::MAX_OPTIONS_LEN - used >= c.wire_len() {
                o.fastopen = Some(c);
                if active {
                    (self.tfo.syn_fastopen, self.tfo.syn_fastopen_exp) = (true, c.exp);
                }
            }
        }
        // The AccECN option last, in what the others leave (a SYN-ACK's only).
        if !active {
            o.accecn = self.synack_accecn(ctx.cfg, &o);
        }
        o
    }

    /// `__tcp_transmit_skb`: builds the segment(s) for `[seq, seq+payload)` and hands
    /// them to the device. `truesize` is charged to `sk_wmem_alloc` until completion.
    /// Returns the skb's stamp (`skb_mstamp_ns`), its earliest departure time:
    /// what its RTT samples, RACK and the delivery rate measure from.
    pub(crate) fn transmit(
        &mut self,
        ctx: &mut Ctx,
        seq: u64,
        flags: u8,
        payload: &SkbData,
        truesize: u32,
    ) -> Instant {
        let rcv_nxt = self.rcv_nxt;
        self.transmit_acking(ctx, seq, flags, payload, truesize, rcv_nxt)
    }

    /// `__tcp_transmit_skb(..., rcv_nxt)`: the segment acknowledges `rcv_nxt`; one
    /// that acknowledges less than `tp->rcv_nxt` (DCTCP's ACK for the CE state
    /// before, `dctcp_ece_ack_update`) leaves the owed ACK owed
    /// (`tcp_event_ack_sent`).
    fn transmit_acking(
        &mut self,
        ctx: &mut Ctx,
        seq: u64,
        flags: u8,
        payload: &SkbData,
        truesize: u32,
        rcv_nxt: u64,
    ) -> Instant {
        // __tcp_transmit_skb: skb_mstamp_ns = tcp_wstamp_ns = max(tcp_wstamp_ns,
        // now), for every skb, pure ACKs too (the "last write"
        // tcp_tso_should_defer reads): the departure time pacing (sch_fq's or
        // TCP's own) gave it, ahead of now when paced. TSval is taken from it,
        // and so are the RTT, RACK and delivery-rate samples of the skb.
        let tstamp = self.pace.wstamp.max(ctx.now);
        self.dst_check(ctx); // ip_queue_xmit's __sk_dst_check
        let mut tf = TcpFlags::ACK;
        if flags & FLAG_SYN != 0 {
            tf = TcpFlags::SYN;
            if self.state == TcpState::SynRecv {
                tf |= TcpFlags::ACK;
            }
        }
        if flags & FLAG_FIN != 0 {
            tf |= TcpFlags::FIN;
        }
        // The skb's flags as they are (tcp_transmit_skb): a FIN left alone by a
        // partial ACK or a split keeps the PSH of the data it rode with.
        if flags & skb::FLAG_PSH != 0 {
            tf |= TcpFlags::PSH;
        }
        // The segment size (tcp_skb_mss): an MTU probe is one segment of its own
        // size (tcp_mtu_probe: tcp_init_tso_segs(nskb, nskb->len)).
        let mss = match core::mem::take(&mut self.mtup.probe_tx) {
            true => payload.len().max(1) as u32,
            false => self.current_mss(ctx.cfg, ctx.now),
        };
        // __tcp_transmit_skb: PSH on every GSO packet (tcp_skb_pcount > 1), to
        // expedite the receiver's GRO flush; 1-MSS packets keep their own flag.
        if payload.len() > mss as usize {
            tf |= TcpFlags::PSH;
        }
        // tcp_ecn_send_syn / tcp_ecn_make_synack, else tcp_ecn_send: ECT(0) and a
        // queued CWR on new data, ECE while a CE mark waits for CWR. A SYN or
        // SYN-ACK is ECT only when the congestion control needs ECN (the socket's
        // INET_ECN_xmit, tcp_ecn_send_syn / tcp_ecn_send_synack).
        let ip_ecn = if flags & FLAG_SYN != 0 {
            tf |= self.ecn_syn_flags(ctx.cfg);
            match self.cc.needs_ecn() {
                true => super::ecn::INET_ECN_ECT_0,
                false => super::ecn::INET_ECN_NOT_ECT,
            }
        } else {
            let (ecn, ef) = self.ecn_send(!payload.is_empty() && seq >= self.snd_nxt);
            tf |= ef;
            ecn
        };
        let key = self.md5_key().copied();
        let options = if flags & FLAG_SYN != 0 {
            let o = self.syn_options(ctx, tstamp, key.is_some());
            // tcp_options_write: a request's SYN-ACK has no tp to keep books in.
            if !self.synack_of_request() {
                self.accecn_option_written(ctx.now, o.accecn.is_some(), false);
            }
            o
        } else {
            self.data_options(ctx.cfg, ctx.now, tstamp, key.is_some())
        };
        let window = if flags & FLAG_SYN != 0 {
            // tcp_select_initial_window / tcp_make_synack: the window a SYN offers is
            // the one later segments are checked against (rsk_rcv_wnd -> rcv_wnd), so
            // out-of-order data arriving before our first ACK is in window.
            let w = self.rcv_wnd.min(65535);
            if self.state == TcpState::SynRecv {
                self.rcv_wup = self.rcv_nxt;
            }
            w as u16
        } else {
            self.select_window(ctx)
        };
        // __tcp_transmit_skb: URG and the urgent pointer while snd_up is ahead.
        let urgent = self.urgent_field(seq);
        if urgent.is_some() {
            tf |= TcpFlags::URG;
        }
        let th = TcpRepr {
            src_port: self.tuple.local.port(),
            dst_port: self.tuple.remote.port(),
            seq: self.snd_seq(seq).0,
            ack: if tf.contains(TcpFlags::ACK) {
                self.rcv_seq(rcv_nxt).0
            } else {
                0
            },
            flags: tf,
            window,
            urgent: urgent.unwrap_or(0),
            options,
        };
        // A single segment is built whole; a GSO packet's payload stays apart if the
        // device takes it so (Stack::set_tx_payload_apart). Pattern mode: the
        // device makes the bytes when it sends the packet, for this transmission
        // only. A zerocopy sender's bytes stay apart whatever the size: the stack
        // does not copy them (tcp/errqueue.rs), unless the device stopped taking
        // payload apart since they were written.
        let zc_id = payload.zerocopy_id();
        let apart = ctx.tx_apart && (payload.len() > mss as usize || zc_id.is_some());
        let zc = self.zerocopy_tx(ctx, zc_id);
        let ds = match flags & FLAG_SYN != 0 {
            true => self.synack_dsfield(ctx.cfg),
            false => self.dsfield(),
        };
        let ip = (
            self.tuple,
            ds | ip_ecn,
            self.ip_dont_fragment(),
            self.segment_flow_label(flags & FLAG_SYN != 0),
        );
        let offset = (seq + (flags & FLAG_SYN != 0) as u64).saturating_sub(1);
        let body = payload.for_device(self.payload_source.as_ref(), offset);
        let ttl = self.ip_ttl(ctx.cfg);
        let pkt = build_packet(ctx, ip, &th, (body, apart), ttl, key.as_ref());
        // __tcp_transmit_skb: tcp_event_ack_sent for segments carrying an ACK:
        // compressed SACKs are sent either way; "Special ACK sent by DCTCP to
        // reflect ECN" leaves the delayed ACK armed.
        if tf.contains(TcpFlags::ACK) {
            self.comp_sack_ack_sent(ctx.mib);
            if rcv_nxt == self.rcv_nxt {
                self.on_ack_sent();
            }
        }
        if !self.request_synack(flags) {
            self.segs_out += payload.len().div_ceil(mss as usize).max(1) as u64;
        }
        if !payload.is_empty() {
            self.data_segs_out += payload.len().div_ceil(mss as usize) as u64;
            self.bytes_sent += payload.len() as u64;
            if self.packets_in_flight() == 0 {
                // tcp_event_data_sent: first data after idle, before lsndtime moves.
                let ca_ctx = self.ca_ctx(ctx.now);
                self.cc.cwnd_event(&mut self.cw, CaEvent::TxStart, &ca_ctx);
                let (cc, mut c) = self.cc_context(ctx.now);
                cc.tx_start(&mut c);
            }
            self.event_data_sent(ctx.now);
            self.lsndtime = ctx.now;
        }
        if !ctx.tx_orphan {
            self.wmem_alloc += truesize as u64;
        }
        // Data then advances tcp_wstamp_ns at the pacing rate
        // (tcp_update_skb_after_send).
        match payload.is_empty() {
            true => self.pace.wstamp = tstamp,
            false => self.update_after_send(ctx.now, payload.len()),
        }
        let fin = (flags & FLAG_FIN != 0) as u32;
        let token = TxToken {
            index: self.handle.index,
            generation: self.handle.generation,
            truesize,
            seq,
            len: match flags & FLAG_SYN {
                0 => payload.len() as u32 + fin,
                _ => 0,
            },
            prr: (0, 0),
            rtx: TxRetrans::None,
            fclone: 0,
            zc,
        };
        let ip_len = pkt.0.len() + pkt.1.len();
        self.count_out_segs(ctx, seq, flags, payload.len(), mss);
        // tcp_ecn_send: an AccECN connection's packets are SKB_GSO_TCP_ACCECN.
        let accecn = flags & FLAG_SYN == 0 && self.ecn_mode_accecn();
        push(ctx, pkt, (mss, accecn), payload.len(), token, tstamp);
        if !payload.is_empty() {
            // dev_queue_xmit's SCM_TSTAMP_SCHED, the driver's SCM_TSTAMP_SND.
            let range = (seq, seq + payload.len() as u64);
            self.tstamp_sent(ctx, range, ip_len, tstamp);
        }
        tstamp
    }

    /// `__tcp_transmit_skb`'s `TCP_MIB_OUTSEGS`: only an skb that sends something
    /// new (its end past `snd_nxt`: new data, a first SYN or FIN) or nothing in
    /// sequence space (an ACK, a reset, a window probe) counts, by its segments;
    /// a retransmission counts in `TcpRetransSegs` alone. A request's SYN-ACK
    /// counts every time it is sent (`tcp_make_synack`).
    pub(crate) fn count_out_segs(&self, ctx: &mut Ctx, seq: u64, flags: u8, len: usize, mss: u32) {
        let syn = flags & FLAG_SYN != 0;
        let end_seq = seq + len as u64 + syn as u64 + (flags & FLAG_FIN != 0) as u64;
        let counts = (syn && self.synack_of_request()) || end_seq > self.snd_nxt || end_seq == seq;
        if counts {
            let segs = len.div_ceil(mss.max(1) as usize).max(1);
            ctx.mib.add(Mib::TcpOutSegs, segs as u64);
        }
    }

    /// `tcp_event_ack_sent`: any segment we send carries the ACK we owed.
    fn on_ack_sent(&mut self) {
        self.dec_quickack_mode();
        self.ack.pending = false;
        self.ack.now = false;
        self.ack.nomem = false;
        self.ack.pushed = 0;
        self.ack.timeout = None;
    }

    /// `tcp_send_ack`: a pure ACK now.
    pub(crate) fn send_ack(&mut self, ctx: &mut Ctx) {
        let rcv_nxt = self.rcv_nxt;
        self.send_ack_for(ctx, rcv_nxt);
    }

    /// `__tcp_send_ack(sk, rcv_nxt)`: a pure ACK of `rcv_nxt` now.
    pub(crate) fn send_ack_for(&mut self, ctx: &mut Ctx, rcv_nxt: u64) {
        if self.state == TcpState::Closed {
            return;
        }
        let nxt = self.snd_nxt;
        self.transmit_acking(ctx, nxt, 0, &SkbData::EMPTY, 0, rcv_nxt);
    }

    /// Sends our SYN or SYN-ACK (offset 0) and arms the retransmit timer.
    pub(crate) fn send_syn(&mut self, ctx: &mut Ctx) {
        if self.state == TcpState::SynSent {
            // tcp_connect: SYN timeouts count from here (retransmits_timed_out).
            self.undo.retrans_stamp = Some(ctx.now);
            if self.rtx.is_empty() {
                self.connect_queue_skb(ctx.now, 0, SkbData::EMPTY, FLAG_SYN, SKB_OVERHEAD);
            }
        }
        let tstamp = self.transmit(ctx, 0, FLAG_SYN, &SkbData::EMPTY, 0);
        // The queued SYN (tcp_connect's, or the one tcp_send_synack reuses) went in
        // its fast clone.
        if self.syn_queued() {
            self.fclone_sent(ctx, 0);
        }
        if self.state != TcpState::SynSent && self.syn_queued() {
            // tcp_send_synack (a simultaneous open): the queued SYN goes as the
            // SYN-ACK, stamped with this transmission (tcp_transmit_skb).
            self.rtx.mark_resent(0, tstamp);
        }
        self.tfo.syn_cookie = None; // retransmissions carry no Fast Open option
        self.snd_nxt = self.snd_nxt.max(1);
        // tcp_fastopen_create_child arms a Fast Open child's SYN-ACK timer with
        // the request's timeout (tcp_timeout_init), not the child's RTO, which
        // tcp_init_transfer may have set to TCP_TIMEOUT_FALLBACK already.
        let rto = match self.tfo.rsk.is_some() {
            true => super::consts::TCP_TIMEOUT_INIT,
            false => self.icsk.rto,
        };
        self.icsk.pending = Some((Pending::Retrans, ctx.now + rto));
    }

    /// `tcp_connect_queue_skb`: an active open's SYN (and a Fast Open SYN's data, in
    /// an skb of its own: `tcp_send_syn_data`) stays in the retransmit queue until
    /// acknowledged: counted in `packets_out` (`tcpi_unacked`) and in
    /// `sk_wmem_queued`, marked lost and retransmitted as data is, cleaned by the
    /// SYN-ACK (`tcp_clean_rtx_queue`, `FLAG_SYN_ACKED`). `tcp_rate_skb_sent` finds
    /// `packets_out` counting the SYN already, so no send phase starts: the snapshot
    /// keeps `tcp_init_sock`'s zero `delivered_mstamp` and `tcp_rate_skb_delivered`
    /// skips the skb.
    pub(crate) fn connect_queue_skb(
        &mut self,
        now: Instant,
        seq: u64,
        data: SkbData,
        flags: u8,
        truesize: u32,
    ) {
        let len = data.len() as u32;
        let tx = skb::TxRate {
            delivered: self.delivered,
            delivered_mstamp: None,
            first_tx_mstamp: self.rate.first_tx_mstamp,
            is_app_limited: self.rate.app_limited != 0,
        };
        self.rtx.push(Skb {
            seq,
            end_seq: seq + len as u64 + u64::from(flags & FLAG_SYN != 0),
            data,
            flags,
            sacked: 0,
            pcount: skb::tso_segs(len, self.mss_cache).0,
            gso_size: skb::tso_segs(len, self.mss_cache).1,
            tx_time: now,
            truesize,
            tx,
            fclone: 0,
            zc: None,
            uncharged: 0,
        });
        self.wmem_queued += truesize as u64;
    }

    /// A SYN-ACK of a request (a plain or cookie child's, or a Fast Open child's and
    /// its resends: `tcp_rtx_synack`) leaves through `tcp_v4_send_synack` /
    /// `tcp_v6_send_synack`, not `__tcp_transmit_skb`: no segment of the child's
    /// (`tcpi_segs_out`). A simultaneous open's SYN-ACK is its queued SYN
    /// (`tcp_send_synack`), which counts.
    pub(crate) fn request_synack(&self, flags: u8) -> bool {
        flags & FLAG_SYN != 0 && self.state != TcpState::SynSent && !self.syn_queued()
    }

    /// The retransmit queue's head is our SYN (an active open not yet acknowledged).
    pub(crate) fn syn_queued(&self) -> bool {
        self.rtx.first().is_some_and(|s| s.flags & FLAG_SYN != 0)
    }

    /// The queued SYN went again (`__tcp_retransmit_skb` marks it
    /// `TCPCB_EVER_RETRANS` before it leaves; `tcp_ecn_clear_syn` drops its ECN
    /// flags then).
    pub(crate) fn syn_sent_again(&self) -> bool {
        self.rtx
            .first()
            .is_some_and(|s| s.flags & FLAG_SYN != 0 && s.has(skb::EVER_RETRANS))
    }

    /// The SYN (or SYN-ACK) again; the caller rearms its timer. A queued SYN (an
    /// active open's, or a simultaneous open's SYN-ACK: `tcp_send_synack` reuses
    /// it) is the retransmit queue's head, sent again as any skb is
    /// (`tcp_retransmit_timer`'s `tcp_retransmit_skb`); a request's or a Fast Open
    /// child's SYN-ACK is built afresh (`tcp_rtx_synack`: `TcpRetransSegs`,
    /// `TcpExtTCPSynRetrans`; a Fast Open child's `total_retrans`, which a child
    /// of a request also starts from, `tcp_create_openreq_child`).
    pub(crate) fn retransmit_syn(&mut self, ctx: &mut Ctx) {
        if self.syn_queued() {
            self.retransmit_skb(ctx, 0, 1);
            return;
        }
        ctx.mib.inc(Mib::TcpExtTCPSynRetrans);
        ctx.mib.inc(Mib::TcpRetransSegs);
        self.total_retrans += 1;
        self.transmit(ctx, 0, FLAG_SYN, &SkbData::EMPTY, 0);
    }

    /// `inet_rtx_syn_ack` for a retransmitted SYN (`tcp_check_req`): the SYN-ACK again,
    /// at most once per `tcp_invalid_ratelimit` (`tcp_oow_rate_limited`), and the
    /// SYN-ACK timer pushed back to a backed-off RTO from now (`mod_timer_pending`).
    pub(crate) fn rtx_synack(&mut self, ctx: &mut Ctx) {
        if self.oow_rate_limited(ctx, Mib::TcpExtTCPACKSkippedSynRecv) {
            return;
        }
        self.rtx_synack_rehash(ctx); // tcp_rtx_synack
        self.retransmit_syn(ctx);
        if matches!(self.icsk.pending, Some((Pending::Retrans, _))) {
            self.icsk.pending = Some((Pending::Retrans, ctx.now + self.rto_backed_off()));
        }
    }

    /// `tcp_send_active_reset`: "no TCP options attached" to the skb, but
    /// `tcp_transmit_skb` gives it what every segment of the connection carries:
    /// the timestamps and SACK blocks of `tcp_established_options`, the window of
    /// `tcp_select_window`, the urgent pointer; its sequence number is
    /// `tcp_acceptable_seq`. As a segment without data it takes `tcp_ecn_send`'s
    /// marks: classic ECN's ECE while a CE mark waits for CWR, AccECN's ECT(0) and
    /// ACE ([`Tcb::ecn_send`]).
    pub(crate) fn send_active_reset(&mut self, ctx: &mut Ctx) {
        // Stamped as any skb __tcp_transmit_skb sends (TSval from the stamp).
        let tstamp = self.pace.wstamp.max(ctx.now);
        self.pace.wstamp = tstamp;
        let seq = self.acceptable_seq();
        let urgent = self.urgent_field(seq);
        let urg = match urgent {
            Some(_) => TcpFlags::URG,
            None => TcpFlags::default(),
        };
        let key = self.md5_key().copied();
        // __tcp_transmit_skb: tcp_ecn_send for every skb but a SYN.
        let (ip_ecn, ecn_flags) = self.ecn_send(false);
        let th = TcpRepr {
            src_port: self.tuple.local.port(),
            dst_port: self.tuple.remote.port(),
            seq: self.snd_seq(seq).0,
            ack: self.rcv_seq(self.rcv_nxt).0,
            flags: TcpFlags::RST | TcpFlags::ACK | urg | ecn_flags,
            window: self.select_window(ctx),
            urgent: urgent.unwrap_or(0),
            options: self.data_options(ctx.cfg, ctx.now, tstamp, key.is_some()),
        };
        // tcp_transmit_skb: the socket's own TOS and DF.
        let fl = self.flow_label();
        let ip = (
            self.tuple,
            self.dsfield() | ip_ecn,
            self.ip_dont_fragment(),
            fl,
        );
        super::reply::push_reset(ctx, ip, self.ip_ttl(ctx.cfg), &th, key.as_ref());
        // __tcp_transmit_skb counts every skb it sends, the reset too (tcpi_segs_out).
        self.segs_out += 1;
    }

    /// `tcp_acceptable_seq`: `snd_nxt`, unless the peer shrank its window below it
    /// (by more than one unit of our receive scale, with window scaling): then the
    /// window's right edge, which the peer still accepts.
    fn acceptable_seq(&self) -> u64 {
        let wnd_end = self.snd_una + self.snd_wnd as u64;
        let scale_slack = self.rx_opt.wscale_ok
            && self.snd_nxt.saturating_sub(wnd_end) < 1 << self.rx_opt.rcv_wscale;
        if self.snd_nxt <= wnd_end || scale_slack {
            self.snd_nxt
        } else {
            wnd_end
        }
    }

    /// `tcp_write_wakeup`: a window or keepalive probe from a timer. The send
    /// head's part inside the window (at most one MSS if the head does not fit
    /// whole or is larger) goes out marked PSH; with nothing sendable, a bare ACK
    /// one below `snd_una` (`tcp_xmit_probe_skb`, counted as `mib`) makes the peer
    /// answer with its window. False if nothing could be sent (a closed socket).
    ///
    /// "Fits whole" is about the skb's sequence space (`seg_size <
    /// TCP_SKB_CB(skb)->end_seq - TCP_SKB_CB(skb)->seq`), FIN included: when the
    /// window ends exactly where the FIN starts, the head is fragmented after its
    /// data (`tcp_fragment` keeps FIN and PSH on the tail), the probe carries the
    /// data alone and the FIN waits for window.
    pub(crate) fn write_wakeup(&mut self, ctx: &mut Ctx, mib: Mib) -> bool {
        if self.state == TcpState::Closed {
            return false;
        }
        let wnd_end = self.snd_una + self.snd_wnd as u64;
        if self.write_queue.front().is_some_and(|h| h.seq < wnd_end) {
            self.sync_dst_mtu(ctx); // tcp_write_wakeup's tcp_current_mss
        }
        let mss = self.current_mss(ctx.cfg, ctx.now);
        if let Some(head) = self.write_queue.front_mut() {
            if head.seq < wnd_end {
                let len = head.data.len() as u64;
                let seq_space = head.end_seq() - head.seq;
                let seg_size = wnd_end - head.seq;
                self.pushed_seq = self.pushed_seq.max(head.end_seq());
                // PSH is set before the split, so the tail keeps it too.
                head.flags |= FLAG_PSH;
                // "We are probing the opening of a window but the window size is
                // != 0, must have been a result SWS avoidance (sender)".
                let split = seg_size < seq_space || len > mss as u64;
                let n = match split {
                    true => seg_size.min(mss as u64),
                    false => len,
                };
                self.send_new_psh(ctx, n as usize, mss, split);
                return true;
            }
        }
        // tcp_write_wakeup: an urgent pointer within reach gets its own probe at
        // snd_una first (tcp_xmit_probe_skb(sk, 1, mib)).
        if self.urg_probe_due() {
            ctx.mib.inc(mib);
            self.transmit(ctx, self.snd_una, 0, &SkbData::EMPTY, 0);
        }
        ctx.mib.inc(mib);
        let probe_seq = self.snd_una.saturating_sub(1);
        self.transmit(ctx, probe_seq, 0, &SkbData::EMPTY, 0);
        true
    }
}

#[cfg(test)]
mod write_wakeup_tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::TestStack;
    use crate::time::Instant;
    use lowtide_wire::ip::IpRepr;

    const NOW: Instant = Instant(1_000_000_000);

    /// An established socket with `queued` bytes corked in its write queue.
    fn corked(cfg: &Config, st: &mut TestStack, queued: usize) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = TcpState::Established;
        t.mss_cache = 1000;
        (t.snd_una, t.snd_nxt, t.write_seq) = (1, 1, 1); // the SYN is acked
        t.max_window = 1 << 20;
        t.sndbuf = 1 << 20;
        t.snd_wnd = 0; // held back whole
        let flags = crate::socket::SendFlags::default();
        let n = t.sendmsg(&mut st.ctx(cfg, NOW, false), &vec![7u8; queued], &[], flags);
        assert_eq!(n, Ok(queued));
        assert!(st.out.is_empty(), "corked");
        t
    }

    /// (sequence offset from `snd_una`, payload length, PSH) of the packets sent.
    fn sent(t: &Tcb, st: &mut TestStack) -> Vec<(u32, usize, bool)> {
        let all = sent_fin(t, st).into_iter();
        all.map(|(off, len, _, psh)| (off, len, psh)).collect()
    }

    #[test]
    fn a_head_within_one_mss_goes_whole_with_psh() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = corked(&cfg, &mut st, 40);
        t.snd_wnd = 1 << 20;
        assert!(t.write_wakeup(&mut st.ctx(&cfg, NOW, false), Mib::TcpExtTCPWinProbe));
        assert_eq!(sent(&t, &mut st), vec![(0, 40, true)]);
        assert!(t.write_queue.is_empty());
        assert_eq!(
            st.mib.get(Mib::TcpExtTCPWinProbe),
            0,
            "data is no bare probe"
        );
    }

    #[test]
    fn a_head_larger_than_the_mss_or_the_window_sends_a_psh_fragment() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = corked(&cfg, &mut st, 3000);
        t.snd_wnd = 1 << 20;
        t.write_wakeup(&mut st.ctx(&cfg, NOW, false), Mib::TcpExtTCPWinProbe);
        assert_eq!(sent(&t, &mut st), vec![(0, 1000, true)]);
        // The window now ends 300 bytes past snd_nxt: only those go, marked PSH.
        t.snd_wnd = (t.snd_nxt - t.snd_una) as u32 + 300;
        t.write_wakeup(&mut st.ctx(&cfg, NOW, false), Mib::TcpExtTCPWinProbe);
        assert_eq!(sent(&t, &mut st), vec![(1000, 300, true)]);
        assert_eq!(t.write_queue.front().map(|h| h.data.len()), Some(1700));
    }

    /// (sequence offset from `snd_una`, payload length, FIN, PSH) of the packets sent.
    fn sent_fin(t: &Tcb, st: &mut TestStack) -> Vec<(u32, usize, bool, bool)> {
        st.out
            .drain(..)
            .map(|tx| {
                let ip = IpRepr::parse(&tx.packet, false).expect("ip");
                let (th, thl) = TcpRepr::parse(&tx.packet[ip.header_len..]).expect("tcp");
                let (fin, psh) = (
                    th.flags.contains(TcpFlags::FIN),
                    th.flags.contains(TcpFlags::PSH),
                );
                let off = th.seq.wrapping_sub(t.snd_seq(t.snd_una).0);
                (off, ip.payload_len - thl, fin, psh)
            })
            .collect()
    }

    /// [`corked`], then `shutdown(SHUT_WR)`: the FIN joins the queued skb.
    fn corked_fin(cfg: &Config, st: &mut TestStack, queued: usize) -> Tcb {
        let mut t = corked(cfg, st, queued);
        let how = crate::socket::Shutdown::Write;
        t.shutdown(&mut st.ctx(cfg, NOW, false), how)
            .expect("shutdown");
        t
    }

    /// The window is compared with the skb's sequence space, FIN included
    /// (`seg_size < end_seq - seq`): a window ending exactly at the FIN sends the
    /// data without it, and the FIN (keeping the PSH set before the split) waits.
    #[test]
    fn a_window_ending_at_the_fin_sends_the_data_and_leaves_the_fin() {
        let (cfg, mut st) = (Config::default(), TestStack::default());
        let mut t = corked_fin(&cfg, &mut st, 1000);
        assert!(st.out.is_empty(), "the window is closed");
        t.snd_wnd = 1000;
        assert!(t.write_wakeup(&mut st.ctx(&cfg, NOW, false), Mib::TcpExtTCPWinProbe));
        assert_eq!(sent_fin(&t, &mut st), vec![(0, 1000, false, true)]);
        assert_eq!(t.snd_nxt, 1001);
        assert_eq!(t.pushed_seq, 1002, "the skb's end_seq, FIN included");
        let tail = t.write_queue.front().expect("the FIN waits");
        assert_eq!((tail.seq, tail.end_seq(), tail.data.len()), (1001, 1002, 0));
        assert_eq!(tail.flags & (FLAG_FIN | FLAG_PSH), FLAG_FIN | FLAG_PSH);
        // One more byte of window: the FIN goes alone, with PSH.
        t.snd_una = 1001;
        t.snd_wnd = 1;
        assert!(t.write_wakeup(&mut st.ctx(&cfg, NOW, false), Mib::TcpExtTCPWinProbe));
        assert_eq!(sent_fin(&t, &mut st), vec![(0, 0, true, true)]);
        assert!(t.write_queue.is_empty());
    }

    /// With room for the FIN too, data and FIN go together.
    #[test]
    fn a_window_past_the_fin_sends_data_and_fin_together() {
        let (cfg, mut st) = (Config::default(), TestStack::default());
        let mut t = corked_fin(&cfg, &mut st, 1000);
        t.snd_wnd = 1001;
        assert!(t.write_wakeup(&mut st.ctx(&cfg, NOW, false), Mib::TcpExtTCPWinProbe));
        assert_eq!(sent_fin(&t, &mut st), vec![(0, 1000, true, true)]);
        assert!(t.write_queue.is_empty());
        assert_eq!(t.snd_nxt, 1002);
    }

    #[test]
    fn a_closed_window_gets_a_bare_probe_below_snd_una() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = corked(&cfg, &mut st, 500);
        assert!(t.write_wakeup(&mut st.ctx(&cfg, NOW, false), Mib::TcpExtTCPWinProbe));
        assert_eq!(sent(&t, &mut st), vec![(u32::MAX, 0, false)], "snd_una - 1");
        assert_eq!(st.mib.get(Mib::TcpExtTCPWinProbe), 1);
        t.state = TcpState::Closed;
        assert!(!t.write_wakeup(&mut st.ctx(&cfg, NOW, false), Mib::TcpExtTCPWinProbe));
        assert!(st.out.is_empty());
    }
}

#[cfg(test)]
mod syn_retransmit_tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::TestStack;
    use lowtide_wire::ip::IpRepr;

    const NOW: Instant = Instant(1_000_000_000);

    /// The TCP header and payload length of each packet sent.
    fn sent(st: &mut TestStack) -> Vec<(TcpRepr, usize)> {
        st.out
            .drain(..)
            .map(|tx| {
                let ip = IpRepr::parse(&tx.packet, false).expect("ip");
                let (th, thl) = TcpRepr::parse(&tx.packet[ip.header_len..]).expect("tcp");
                (th, ip.payload_len - thl)
            })
            .collect()
    }

    /// An active open in SYN-SENT with its SYN queued and sent once.
    fn syn_sent(cfg: &Config) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = TcpState::SynSent;
        (t.snd_una, t.snd_nxt, t.write_seq) = (0, 1, 1);
        t.connect_queue_skb(NOW, 0, SkbData::EMPTY, FLAG_SYN, SKB_OVERHEAD);
        t
    }

    /// `tcp_syn_options` for a SYN and for a simultaneous open's SYN-ACK (the SYN
    /// sent again with ACK): the options the sysctls allow, TSecr `ts_recent`,
    /// which a SYN-SENT socket has only from a TIME-WAIT it took over.
    #[test]
    fn syn_and_simultaneous_synack_options_follow_tcp_syn_options() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let ctx = st.ctx(&cfg, NOW, false);
        let mut t = syn_sent(&cfg);
        t.rx_opt.ts_recent = 5810; // tcp_twsk_unique's copy of tw_ts_recent
        let o = t.syn_options(&ctx, NOW, false);
        assert_eq!(o.timestamp.map(|(_, ecr)| ecr), Some(5810));
        // A crossed SYN without any option: SYN-RECV, the SYN's options all the same.
        t.state = TcpState::SynRecv;
        t.rx_opt.ts_recent = 0;
        (t.rx_opt.tstamp_ok, t.rx_opt.sack_ok, t.rx_opt.wscale_ok) = (false, false, false);
        let o = t.syn_options(&ctx, NOW, false);
        assert_eq!(o.timestamp.map(|(_, ecr)| ecr), Some(0));
        assert!(o.sack_permitted && o.wscale == Some(t.rx_opt.rcv_wscale));
        // With a TCP-MD5 key a SYN carries no timestamps.
        assert_eq!(t.syn_options(&ctx, NOW, true).timestamp, None);
    }

    #[test]
    fn a_queued_syn_goes_again_as_a_syn_through_tcp_retransmit_skb() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = syn_sent(&cfg);
        let r = t.retransmit_skb(&mut st.ctx(&cfg, NOW, false), 0, 1);
        assert_eq!(r, Some((0, 1, 1)));
        let out = sent(&mut st);
        assert_eq!(out.len(), 1);
        let (th, len) = &out[0];
        assert_eq!((th.flags, *len), (TcpFlags::SYN, 0), "a bare SYN");
        assert!(th.options.mss.is_some(), "with a SYN's options");
        assert_eq!(st.mib.get(Mib::TcpExtTCPSynRetrans), 1);
        assert_eq!(st.mib.get(Mib::TcpRetransSegs), 1);
        assert_eq!(
            (t.rtx.retrans_out, t.total_retrans, t.undo.retrans),
            (1, 1, 1)
        );
        assert!(t.syn_sent_again());
    }

    #[test]
    fn retransmit_syn_takes_the_queued_syn_or_builds_a_synack() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = syn_sent(&cfg);
        t.retransmit_syn(&mut st.ctx(&cfg, NOW, false));
        assert_eq!(t.rtx.retrans_out, 1, "the queued SYN, retransmitted");
        // A request's SYN-ACK (tcp_rtx_synack): nothing queued, counted alike.
        let mut r = Tcb::for_test(&cfg);
        r.state = TcpState::SynRecv;
        r.retransmit_syn(&mut st.ctx(&cfg, NOW, false));
        let out = sent(&mut st);
        let flags: Vec<_> = out.iter().map(|(th, _)| th.flags).collect();
        assert_eq!(flags, [TcpFlags::SYN, TcpFlags::SYN | TcpFlags::ACK]);
        assert_eq!(st.mib.get(Mib::TcpExtTCPSynRetrans), 2);
        assert_eq!((r.rtx.retrans_out, r.total_retrans), (0, 1));
    }

    #[test]
    fn data_in_syn_recv_goes_again_as_data() {
        // A Fast Open child's recovery before its handshake ends retransmits its
        // data, not a SYN-ACK: the generic path sends the skb it is given.
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::SynRecv;
        (t.snd_una, t.snd_nxt, t.write_seq) = (0, 1001, 1001);
        (t.mss_cache, t.snd_wnd) = (1000, 65535);
        t.connect_queue_skb(
            NOW,
            1,
            SkbData::from(bytes::Bytes::from(vec![7u8; 1000])),
            0,
            1832,
        );
        let r = t.retransmit_skb(&mut st.ctx(&cfg, NOW, false), 1, 1);
        assert_eq!(r, Some((1, 1001, 1)));
        let out = sent(&mut st);
        assert_eq!(out.len(), 1);
        assert!(!out[0].0.flags.contains(TcpFlags::SYN));
        assert_eq!(out[0].1, 1000);
        assert_eq!(st.mib.get(Mib::TcpExtTCPSynRetrans), 0);
    }

    #[test]
    fn a_segment_is_stamped_with_and_timed_from_its_departure_time() {
        // __tcp_transmit_skb: skb_mstamp_ns = tcp_wstamp_ns = max(tcp_wstamp_ns,
        // now). Under sch_fq (SK_PACING_FQ) a paced skb leaves after it is built:
        // its TSval, the stamp its RTT and RACK samples start from (the
        // retransmit queue's tx_time), tcp_rate_skb_sent's send phase and
        // tcp_retransmit_skb's retrans_stamp are that departure time, not now.
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::Established;
        t.rx_opt.tstamp_ok = true;
        (t.mss_cache, t.snd_wnd, t.cw.snd_cwnd) = (1000, 1 << 20, 10);
        (t.snd_una, t.snd_nxt, t.write_seq) = (1, 1, 4001);
        (t.pace.pacing_fq, t.pace.pacing_rate, t.data_segs_out) = (true, 1_000_000, 10);
        let edt = NOW + core::time::Duration::from_millis(5);
        t.pace.wstamp = edt;
        t.write_queue.push_back(skb::WriteSkb::copied(
            1,
            bytes::BytesMut::from(&[7u8; 4000][..]).into(),
            0,
        ));
        t.write_xmit(&mut st.ctx(&cfg, NOW, false));
        let tokens: Vec<_> = st.out.iter().map(|tx| tx.token).collect();
        let out = sent(&mut st);
        // Two 2-segment packets (tcp_tso_autosize at 1 MB/s), the second 2 ms
        // (2000 bytes at the pacing rate) after the first.
        let second = edt + core::time::Duration::from_millis(2);
        let tsvals: Vec<_> = out
            .iter()
            .map(|(th, _)| th.options.timestamp.map(|ts| ts.0))
            .collect();
        assert_eq!(tsvals, [Some(t.tsval(edt)), Some(t.tsval(second))]);
        let stamps: Vec<_> = t.rtx.iter_from(1).map(|s| s.tx_time).collect();
        assert_eq!(stamps, [edt, second]);
        assert_eq!(
            (t.rate.first_tx_mstamp, t.rate.delivered_mstamp),
            (edt, edt)
        );
        // Once the device has sent them (their TX completions: before, the skb
        // would still be in the host's queue), a retransmission is stamped anew,
        // and its stamp is retrans_stamp.
        let later = NOW + core::time::Duration::from_millis(1);
        for token in &tokens {
            t.on_tx_complete(&mut st.ctx(&cfg, later, false), token);
        }
        let third = second + core::time::Duration::from_millis(2);
        t.retransmit_skb(&mut st.ctx(&cfg, later, false), 1, 2);
        assert_eq!(t.rtx.first().map(|s| s.tx_time), Some(third));
        assert_eq!(t.undo.retrans_stamp, Some(third));
        // A pure ACK's TSval too (tcp_wstamp_ns is ahead by then).
        st.out.clear();
        t.send_ack(&mut st.ctx(&cfg, later, false));
        let fourth = third + core::time::Duration::from_millis(2);
        assert_eq!(
            sent(&mut st)[0].0.options.timestamp.map(|ts| ts.0),
            Some(t.tsval(fourth))
        );
    }
}
