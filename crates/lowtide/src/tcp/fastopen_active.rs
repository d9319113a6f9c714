//! Active TCP Fast Open on a connection (tcp_output.c `tcp_send_syn_data`,
//! tcp_input.c `tcp_rcv_fastopen_synack`, tcp_fastopen.c's blackhole checks): the
//! SYN with a cookie (or a cookie request) and data, and what the SYN-ACK says of it.

use super::consts::SKB_OVERHEAD;
use super::fastopen::TfoClientFail;
use super::rcvqueue::Payload;
use super::rtx::skb;
pub(crate) use super::sock::CacheUpdate;
use super::sock::Tcb;
use super::{Ctx, TcpState};
use crate::mib::Mib;
use crate::socket::UserBytes;
use bytes::Bytes;
use lowtide_wire::tcp::{FastOpenOption, TcpFlags, TcpRepr};

/// `MAX_TCP_OPTION_SPACE`: the option room a SYN with data keeps free.
const MAX_TCP_OPTION_SPACE: u32 = 40;

/// What `tcp_fastopen_cookie_check` found for a SYN about to leave (the stack
/// holds the cache and the blackhole state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CookieCheck {
    /// Data may go in the SYN.
    pub ok: bool,
    /// The option to send: a cookie, a request (`len == 0`), or none.
    pub cookie: Option<FastOpenOption>,
    /// The server's MSS as cached (0: none).
    pub mss: u16,
    /// A blackhole pause had expired (`syn_fastopen_ch`).
    pub ch: bool,
}

impl Tcb {
    /// `tcp_connect` with a Fast Open request (`tcp_send_syn_data`): the SYN carries
    /// the cookie and as much of `data` as fits in one segment with the option room
    /// kept free; without a usable cookie a plain SYN asks for one. Returns the bytes
    /// sent in the SYN (`fastopen_req->copied`).
    ///
    /// With `zerocopy` (`MSG_ZEROCOPY` on a `SO_ZEROCOPY` socket) the data takes a
    /// notification id first (`tcp_sendmsg_locked`'s `msg_zerocopy_realloc`), which
    /// the SYN's data skb holds (`tcp_send_syn_data`: `skb_zcopy_set(syn_data,
    /// fo->uarg)`) until it is acknowledged; a SYN without data gives it back
    /// (`net_zcopy_put_abort` on `out_err`).
    ///
    /// Data whose copy faults ([`UserBytes::Fault`]) makes the SYN fall back to a
    /// cookie request as if no cookie were cached (`tcp_send_syn_data`), though the
    /// cookie check passed (no `TFO_COOKIE_UNAVAILABLE`).
    pub(crate) fn connect_fastopen(
        &mut self,
        ctx: &mut Ctx,
        data: UserBytes<'_>,
        fo: CookieCheck,
        zerocopy: bool,
    ) -> usize {
        let zc = match zerocopy {
            true => self.zerocopy_begin(ctx, data.len()).ok().flatten(),
            false => None,
        };
        let copied = self.connect_fastopen_data(ctx, data, fo);
        if let Some(id) = zc {
            if copied > 0 {
                self.rtx.set_zc(1, id); // skb_zcopy_set(syn_data, fo->uarg)
            }
            // lowtide copies the caller's bytes: SO_EE_CODE_ZEROCOPY_COPIED.
            self.errq.sent(copied, self.write_seq, true);
            self.zerocopy_release(ctx);
        }
        copied
    }

    fn connect_fastopen_data(
        &mut self,
        ctx: &mut Ctx,
        data: UserBytes<'_>,
        fo: CookieCheck,
    ) -> usize {
        ctx.mib.inc(Mib::TcpActiveOpens);
        self.state = TcpState::SynSent;
        let init_rwnd = self.connect_init(ctx);
        let mss = self.initial_window_mss();
        self.select_initial_window(ctx.cfg, mss, ctx.cfg.tcp_window_scaling, init_rwnd);
        self.write_seq = 1;
        // tcp_connect: tcp_ecn_send_syn on every SYN, then tcp_send_syn_data
        // copies the SYN's control block (its ECE|CWR) to the SYN with data.
        self.ecn_send_syn(ctx.cfg);
        // tcp_fastopen_active_should_disable only ever sets it.
        self.tfo.syn_fastopen_ch |= fo.ch;
        // tcp_send_syn_data: "if MSS is not cached", the MSS we advertise; the
        // cache's MSS otherwise (tcp_fastopen_cookie_check reads the cache before it
        // decides), even when the SYN falls back to a cookie request.
        self.rx_opt.mss_clamp = match fo.mss {
            0 => self.advmss,
            cached => cached as u32,
        };
        self.tfo.send_syn_data = true;
        self.tfo.defer_connect = false;
        if !fo.ok {
            if fo.cookie.is_some() {
                self.tfo.client_fail = TfoClientFail::CookieUnavailable;
            }
            self.syn_data_fallback(ctx, fo);
            return 0;
        }
        if self.rx_opt.user_mss != 0 && self.rx_opt.user_mss < self.rx_opt.mss_clamp {
            self.rx_opt.mss_clamp = self.rx_opt.user_mss; // tcp_mss_clamp
        }
        let min = ctx.cfg.tcp_min_snd_mss;
        self.mss_cache = self.mtu_to_mss(self.pmtu_cookie, min);
        // __tcp_mtu_to_mss without option room, less MAX_TCP_OPTION_SPACE.
        let net = if self.tuple.local.is_ipv6() { 60 } else { 40 };
        let full = self
            .pmtu_cookie
            .saturating_sub(net)
            .min(self.rx_opt.mss_clamp)
            .max(min);
        let space = (full.saturating_sub(MAX_TCP_OPTION_SPACE) as usize).min(data.len());
        let data = match data {
            UserBytes::Bytes(b) => &b[..space],
            UserBytes::Fault(_) if space == 0 => &[][..],
            // tcp_send_syn_data: "if (unlikely(!space))" after copy_page_from_iter:
            // the data skb is freed, "goto fallback".
            UserBytes::Fault(_) => {
                self.syn_data_fallback(ctx, fo);
                return 0;
            }
        };
        self.tfo.syn_cookie = fo.cookie;
        self.send_syn_data(ctx, data);
        space
    }

    /// `tcp_send_syn_data`'s fallback: a regular SYN with a cookie request in place
    /// of a cached cookie ("if (fo->cookie.len > 0) fo->cookie.len = 0"), or no
    /// option at all without cookies (`syn_fastopen` then as it was:
    /// `tcp_syn_options` only ever sets it).
    fn syn_data_fallback(&mut self, ctx: &mut Ctx, fo: CookieCheck) {
        self.tfo.syn_cookie = fo.cookie.map(|c| FastOpenOption::request(c.exp));
        self.send_syn(ctx);
    }

    /// `tcp_fastopen_defer_connect` said yes: SYN-SENT with the SYN held back
    /// (`DEFER_CONNECT`) until the first write brings data for it.
    pub(crate) fn defer_connect(&mut self) {
        self.state = TcpState::SynSent;
        self.tfo.defer_connect = true;
    }

    /// Sends the SYN with `data` (sequence 1 on) and keeps both in the retransmit
    /// queue, the data in an skb of its own (`tcp_send_syn_data`: one even when no
    /// data fits, so the SYN counts as two packets); SYN retransmissions carry
    /// neither data nor cookie.
    fn send_syn_data(&mut self, ctx: &mut Ctx, data: &[u8]) {
        let payload = skb::SkbData::from(Bytes::copy_from_slice(data));
        let truesize = data.len() as u32 + SKB_OVERHEAD;
        self.undo.retrans_stamp = Some(ctx.now); // tcp_connect
        self.connect_queue_skb(ctx.now, 0, skb::SkbData::EMPTY, skb::FLAG_SYN, SKB_OVERHEAD);
        self.transmit(ctx, 0, skb::FLAG_SYN, &payload, truesize);
        self.tfo.syn_cookie = None;
        self.tfo.syn_data = !data.is_empty(); // "tp->syn_data = (fo->copied > 0)"
        if self.tfo.syn_data {
            self.chrono_start(ctx.now, super::chrono::Chrono::Busy);
        }
        self.connect_queue_skb(ctx.now, 1, payload, skb::FLAG_PSH, truesize);
        ctx.mib.inc(Mib::TcpExtTCPOrigDataSent); // the data skb, even when empty
        self.write_seq = 1 + data.len() as u64;
        self.snd_nxt = self.write_seq;
        self.icsk.pending = Some((super::sock::Pending::Retrans, ctx.now + self.icsk.rto));
    }

    /// `tcp_rcv_fastopen_synack`, after the SYN-ACK was acknowledged: the cache
    /// learns the server's MSS and cookie (and whether the SYN data seems lost); data
    /// the SYN-ACK did not cover is retransmitted at once, without a congestion
    /// response. True when that happened (`fastopen_fail`: no pure ACK follows).
    pub(crate) fn fastopen_synack(
        &mut self,
        ctx: &mut Ctx,
        th: &TcpRepr,
        payload: Payload,
    ) -> bool {
        // The clamp is the SYN-ACK's MSS unless TCP_MAXSEG set it: then the SYN-ACK's
        // own MSS option (0 if none) is what the cache learns.
        let mss = match self.rx_opt.mss_clamp {
            m if m == self.rx_opt.user_mss => th.options.mss.map_or(0, u32::from),
            m => m,
        };
        let mut cookie = th.options.fastopen.filter(|c| c.len > 0);
        let unacked = self.tfo.syn_data && !self.rtx.is_empty();
        let (mut syn_lost, mut try_exp) = (false, 0);
        if !self.tfo.syn_fastopen {
            cookie = None; // unsolicited
        } else if self.total_retrans > 0 || self.icsk.retransmits > 0 {
            syn_lost = cookie.is_none() && unacked;
        } else if cookie.is_none() && !self.tfo.syn_data {
            try_exp = if self.tfo.syn_fastopen_exp { 2 } else { 1 };
        }
        self.tfo.cache_update = Some(CacheUpdate {
            mss: mss.min(u16::MAX as u32) as u16,
            cookie,
            syn_lost,
            try_exp,
        });
        if unacked {
            self.tfo.client_fail = match self.icsk.retransmits > 0 || self.total_retrans > 0 {
                true => TfoClientFail::SynRetransmitted,
                false => TfoClientFail::DataNotAcked,
            };
            let lost_retrans = self.rtx.mark_lost_on_timeout(|_| false);
            ctx.mib
                .add(Mib::TcpExtTCPLostRetransmit, lost_retrans as u64);
            self.retransmit_hint = self.snd_una; // tcp_verify_retransmit_hint
            self.non_congestion_loss_retransmit(ctx);
            ctx.mib.inc(Mib::TcpExtTCPFastOpenActiveFail);
            return true;
        }
        self.tfo.syn_data_acked = self.tfo.syn_data;
        if self.tfo.syn_data_acked {
            ctx.mib.inc(Mib::TcpExtTCPFastOpenActive);
            // SYN-data is counted as two packets in tcp_ack.
            if self.delivered > 1 {
                self.delivered -= 1;
            }
        }
        // tcp_fastopen_add_skb: data in the SYN-ACK, and its FIN (tcp_fin: CLOSE-WAIT,
        // the ACK scheduled in pingpong mode, so tcp_rcv_synsent_state_process saves
        // it too).
        let fin = th.flags.contains(TcpFlags::FIN);
        if !payload.is_empty() || fin {
            // tcp_fastopen_add_skb: "reset segs_in to 0 before calling
            // tcp_segs_in() to avoid double counting", written for the server's
            // child (segs_in 1 from tcp_create_openreq_child); on the client it drops
            // every segment counted before and counts the SYN-ACK again, so segs_in
            // is 1 and data_segs_in counts a SYN-ACK with data twice.
            self.segs_in = 1;
            self.data_segs_in += !payload.is_empty() as u64;
            let len = payload.len() as u64;
            if !payload.is_empty() {
                self.queue_in_order(ctx, payload);
            }
            self.tfo.syn_data_acked = true;
            if fin {
                self.fin_seq.get_or_insert(self.rcv_nxt);
                self.try_consume_fin(ctx);
            }
            // rcv_nxt jumps to end_seq, FIN included, and bytes_received is the
            // skb's length: a FIN counts no byte here (tcp_rcv_nxt_update is not run).
            self.bytes_received = len;
        }
        false
    }

    /// `tcp_fastopen_active_disable_ofo_check` (from `tcp_disconnect` and
    /// `tcp_v4_destroy_sock`, before the out-of-order queue goes): on an active Fast
    /// Open socket that received no data, a lone FIN out of order hints at a
    /// middlebox that dropped the data before it, so the stack pauses active Fast
    /// Open ([`TfoSock`](super::sock::TfoSock)`::blackhole`); on one opened after a
    /// pause had run out (`syn_fastopen_ch`) that did receive data over a route
    /// other than loopback, Fast Open works again and the stack counts its pauses
    /// from 0 (`active_worked`).
    pub(crate) fn fastopen_active_disable_ofo_check(&mut self) {
        if !self.tfo.syn_fastopen {
            return;
        }
        if self.data_segs_in == 0 {
            if self.ofo.lone_fin() {
                self.tfo.blackhole = true;
            }
        } else if self.tfo.syn_fastopen_ch && !via_loopback(self.tuple) {
            self.tfo.active_worked = true;
        }
    }

    /// `tcp_fastopen_active_detect_blackhole` on a retransmission timeout: a Fast
    /// Open connection timing out a third time in a row (or giving up before) hints
    /// at a middlebox dropping Fast Open. True: pause active Fast Open (the stack
    /// does, counting `TCPFastOpenBlackhole`); `TCPFastOpenActiveFail` is counted here.
    pub(crate) fn fastopen_detect_blackhole(&mut self, ctx: &mut Ctx, expired: bool) -> bool {
        let t = &self.tfo;
        let fastopen = t.syn_fastopen || t.syn_data || t.syn_data_acked;
        if fastopen && (self.icsk.retransmits == 2 || (self.icsk.retransmits < 2 && expired)) {
            ctx.mib.inc(Mib::TcpExtTCPFastOpenActiveFail);
            self.tfo.blackhole = true;
            return true;
        }
        false
    }
}

/// Whether Linux would route the connection over the loopback device
/// (`dst->dev->flags & IFF_LOOPBACK`): a loopback peer, or one of our own addresses
/// (the local table's routes).
fn via_loopback(tuple: super::FourTuple) -> bool {
    let loopback = |ip: std::net::IpAddr| match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    };
    loopback(tuple.remote.ip()) || tuple.remote.ip() == tuple.local.ip()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::TestStack;
    use crate::time::Instant;

    /// An active Fast Open connection, ESTABLISHED, nothing received yet.
    fn tfo_established(cfg: &Config) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = TcpState::Established;
        (t.rcv_nxt, t.rcv_wup, t.rcv_wnd) = (1, 1, 10_000);
        (t.snd_una, t.snd_nxt) = (1001, 1001);
        t.rx_opt.sack_ok = true;
        t.tfo.syn_fastopen = true;
        t
    }

    fn seg(t: &Tcb, flags: TcpFlags, seq: u64) -> TcpRepr {
        TcpRepr {
            seq: t.rcv_seq(seq).0,
            ack: t.snd_seq(t.snd_una).0,
            flags,
            window: 65535,
            ..Default::default()
        }
    }

    fn queue(t: &mut Tcb, ctx: &mut Ctx, flags: TcpFlags, seq: u64, data: &[u8]) {
        let th = seg(t, TcpFlags::ACK | flags, seq);
        t.data_segs_in += !data.is_empty() as u64; // tcp_segs_in, as rcv_segment
        t.data_queue(ctx, &th, seq, Payload::Flat(data));
    }

    /// tcp_fastopen_active_disable_ofo_check's first branch: no data in, and the
    /// out-of-order queue holds a FIN and nothing else.
    #[test]
    fn lone_ofo_fin_without_data_is_a_blackhole() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        let mut t = tfo_established(&cfg);
        queue(&mut t, &mut ctx, TcpFlags::FIN, 501, &[]);
        t.fastopen_active_disable_ofo_check();
        assert!(t.tfo.blackhole);
        // Not a Fast Open SYN: nothing.
        let mut t = tfo_established(&cfg);
        t.tfo.syn_fastopen = false;
        queue(&mut t, &mut ctx, TcpFlags::FIN, 501, &[]);
        t.fastopen_active_disable_ofo_check();
        assert!(!t.tfo.blackhole);
        // Another segment out of order besides the FIN: not lone (data_segs_in
        // forced back to 0 to reach the test).
        let mut t = tfo_established(&cfg);
        queue(&mut t, &mut ctx, TcpFlags::ACK, 201, &[7; 10]);
        queue(&mut t, &mut ctx, TcpFlags::FIN, 501, &[]);
        t.data_segs_in = 0;
        t.fastopen_active_disable_ofo_check();
        assert!(!t.tfo.blackhole, "two segments out of order");
        // Data arrived (out of order, with the FIN): the other branch.
        let mut t = tfo_established(&cfg);
        queue(&mut t, &mut ctx, TcpFlags::FIN, 501, &[7; 100]);
        assert_eq!((t.data_segs_in, t.ofo.len()), (1, 1));
        t.fastopen_active_disable_ofo_check();
        assert!(!t.tfo.blackhole && !t.tfo.active_worked);
        // tcp_disconnect looks, then purges: a second look finds nothing.
        let mut t = tfo_established(&cfg);
        queue(&mut t, &mut ctx, TcpFlags::FIN, 501, &[]);
        t.disconnect(&mut ctx);
        assert!(t.tfo.blackhole && t.ofo.is_empty());
        t.tfo.blackhole = false;
        t.fastopen_active_disable_ofo_check();
        assert!(!t.tfo.blackhole);
    }

    /// tcp_syn_options: a SYN's Fast Open option goes only where it fits, and only
    /// then marks the socket syn_fastopen (and syn_fastopen_exp as its format);
    /// nothing clears them. A TCP-MD5 SYN (20 bytes of option, no timestamps) has
    /// room for a cookie request but not for an 8-byte cookie.
    #[test]
    fn syn_fastopen_only_when_the_option_fits() {
        let cfg = Config::default();
        let cookie = FastOpenOption::cookie(false, &[1; 8]);
        let exp_request = FastOpenOption::request(true);
        for (c, md5, sent) in [
            (cookie, false, true),
            (cookie, true, false),
            (exp_request, true, true),
            (exp_request, false, true),
        ] {
            let mut t = Tcb::for_test(&cfg);
            t.state = TcpState::SynSent;
            t.tfo.syn_cookie = Some(c);
            let mut st = TestStack::default();
            let ctx = st.ctx(&cfg, Instant::ZERO, false);
            let o = t.syn_options(&ctx, Instant::ZERO, md5);
            assert_eq!(o.fastopen.is_some(), sent, "{c:?} md5 {md5}");
            assert_eq!(t.tfo.syn_fastopen, sent, "{c:?} md5 {md5}");
            assert_eq!(t.tfo.syn_fastopen_exp, sent && c.exp);
            // A later SYN without the option leaves the bits.
            t.tfo.syn_cookie = None;
            t.syn_options(&ctx, Instant::ZERO, md5);
            assert_eq!(t.tfo.syn_fastopen, sent);
        }
        // A SYN-ACK's cookie (a passive child's) marks nothing.
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::SynRecv;
        t.tfo.syn_cookie = Some(cookie);
        let mut st = TestStack::default();
        let ctx = st.ctx(&cfg, Instant::ZERO, false);
        assert!(t.syn_options(&ctx, Instant::ZERO, false).fastopen.is_some());
        assert!(!t.tfo.syn_fastopen);
    }

    /// The second branch: data received on a socket marked `syn_fastopen_ch`, over
    /// a route that is not loopback.
    #[test]
    fn data_after_a_pause_resets_the_count_unless_loopback() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        for (ch, remote, worked) in [
            (true, "10.0.0.2:2", true),
            (false, "10.0.0.2:2", false),
            (true, "127.0.0.1:2", false),
            (true, "[::ffff:127.0.0.1]:2", false),
            (true, "[::1]:2", false),
            (true, "10.0.0.1:2", false),
        ] {
            let mut t = tfo_established(&cfg);
            t.tfo.syn_fastopen_ch = ch;
            t.tuple.remote = remote.parse().expect("address");
            queue(&mut t, &mut ctx, TcpFlags::ACK, 1, &[7; 100]);
            t.fastopen_active_disable_ofo_check();
            assert_eq!(t.tfo.active_worked, worked, "{ch} {remote}");
            assert!(!t.tfo.blackhole);
        }
    }
}
