//! Listening sockets (Linux's inet_connection_sock.c, tcp_ipv4.c's `tcp_v4_conn_request`
//! and tcp_minisocks.c): LISTEN, the SYN and accept queues, SYN-RECV children, SYN
//! cookies (syncookies.c), and what happens to children when their listener closes.

use super::{Sock, Stack};
use crate::mib::Mib;
use crate::socket::{EventKind, SocketError, SocketEvent, SocketHandle};
use crate::tcp::rcvqueue::Payload;
use crate::tcp::{self, Ctx, FourTuple, Tcb};
use crate::time::Instant;
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};
use std::net::{IpAddr, SocketAddr};
use tracing::trace;

impl Stack {
    /// Opens a listener on `local` (an unspecified IP listens on every address).
    /// `backlog` is `sk_max_ack_backlog`, at most `net.core.somaxconn` (`__sys_listen`:
    /// a negative backlog, cast to `u32`, is somaxconn); 0 stays 0, which still
    /// queues one connection (`sk_acceptq_is_full`).
    pub fn listen(&mut self, local: SocketAddr, backlog: u32) -> Result<SocketHandle, SocketError> {
        self.listen_with(local, backlog, &tcp::sockopt::SockOptions::default())
    }

    /// `listen(2)` on a listener (`__inet_listen_sk`): "if the socket is already in
    /// listen state we can only allow the backlog to be adjusted", at most
    /// `net.core.somaxconn` as [`Stack::listen`]'s.
    pub fn set_listen_backlog(&mut self, h: SocketHandle, backlog: u32) -> Result<(), SocketError> {
        let somaxconn = self.cfg.somaxconn;
        self.listener_mut(h)?.backlog = backlog.min(somaxconn);
        Ok(())
    }

    /// Takes an established connection from a listener's accept queue.
    pub fn accept(&mut self, listener: SocketHandle) -> Result<SocketHandle, SocketError> {
        let l = self.listener_mut(listener)?;
        let idx = l.accept_queue.pop_front().ok_or(SocketError::WouldBlock)?;
        let generation = self.slots[idx as usize].generation;
        if let Some(Sock::Tcp(t)) = &mut self.slots[idx as usize].sock {
            t.parent = None;
        }
        Ok(SocketHandle {
            index: idx,
            generation,
        })
    }

    /// `inet_csk_listen_stop`: the listener in `index` closes. Children still in
    /// SYN-RECV are dropped without a word (Linux's request socks die with their
    /// listener; the client's ACK then finds no socket and is reset); established
    /// children nobody accepted (`queued`) are reset (`tcp_disconnect`).
    pub(super) fn listen_stop(&mut self, now: Instant, index: u32, queued: &[u32]) {
        let syn_recv: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&i| {
                matches!(&self.slots[i as usize].sock,
                    Some(Sock::Tcp(t)) if t.parent == Some(index) && !t.in_accept_queue)
            })
            .collect();
        for child in syn_recv {
            self.free_slot(now, child);
        }
        for &child in queued {
            self.slots[child as usize].orphan = true;
            self.with_tcb(now, child, |tcb, ctx| tcb.disconnect(ctx));
        }
    }

    /// A child joins its listener's accept queue; one that waited in SYN-RECV
    /// (`was_pending`: not a Fast Open child; whether it was still young) leaves the
    /// SYN queue.
    pub(super) fn child_established(&mut self, parent: u32, child: u32, was_pending: Option<bool>) {
        let pgen = self.slots[parent as usize].generation;
        if let Some(Sock::Listener(l)) = &mut self.slots[parent as usize].sock {
            if let Some(young) = was_pending {
                l.leave_syn_queue(young);
            }
            l.accept_queue.push_back(child);
            self.events.push_back(SocketEvent {
                socket: SocketHandle {
                    index: parent,
                    generation: pgen,
                },
                kind: EventKind::Acceptable,
            });
        }
    }

    /// `__inet_lookup_listener`: the listener on the segment's address, else on its
    /// family's wildcard, else (IPv4) on the IPv6 wildcard unless that one is
    /// `IPV6_V6ONLY` (an IPv4 socket outscores an IPv6 one in `compute_score`); of a
    /// `SO_REUSEPORT` group, the one the tuple's hash picks
    /// (`inet_lookup_reuseport`).
    pub(super) fn find_listener(&self, tuple: FourTuple) -> Option<u32> {
        let local = tuple.local;
        let any = match local {
            SocketAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        };
        let any6 = SocketAddr::new(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), local.port());
        let dual = |i: &u32| matches!(&self.slots[*i as usize].sock, Some(Sock::Listener(l)) if !l.opts.v6only);
        self.lhash2_lookup(local, &tuple)
            .or_else(|| self.lhash2_lookup(SocketAddr::new(any, local.port()), &tuple))
            .or_else(|| match local {
                SocketAddr::V4(_) => self.lhash2_lookup(any6, &tuple).filter(dual),
                SocketAddr::V6(_) => None,
            })
    }

    /// `inet_lhash2_lookup` over the listeners on `addr`, for a segment that came
    /// in on the device: in bucket order (`__inet_hash` puts a listener first, an
    /// `AF_INET6` one with `SO_REUSEPORT` last), each whose device matches
    /// (`inet_bound_dev_eq`) and scores higher than those before it
    /// (`compute_score`: 2 when bound to a device, else 1, and 1 more for an
    /// `AF_INET` socket) is taken, and the first one in a `SO_REUSEPORT` group
    /// answers from the group at once.
    fn lhash2_lookup(&self, addr: SocketAddr, tuple: &FourTuple) -> Option<u32> {
        let group = self.listeners.get(&addr)?;
        if !self.off_device {
            // No socket is bound to a device: one listener, or one group.
            return Some(self.reuseport_select(group, tuple));
        }
        let listener = |i: u32| match &self.slots[i as usize].sock {
            Some(Sock::Listener(l)) => Some(l),
            _ => None,
        };
        let mut bucket: Vec<(bool, i64, u32)> = group
            .iter()
            .filter_map(|&i| listener(i).map(|l| (i, l)))
            .map(|(i, l)| {
                let tail = l.opts.family_v6 && l.opts.reuseport;
                let seq = l.hash_seq as i64;
                (tail, if tail { seq } else { -seq }, i)
            })
            .collect();
        bucket.sort_unstable();
        let (mut result, mut hiscore) = (None, 0);
        for (_, _, i) in bucket {
            let Some(l) = listener(i) else { continue };
            let dev = l.opts.bound_dev_if;
            if !super::netdev::bound_dev_eq(dev, super::DEVICE_IFINDEX) {
                continue;
            }
            let score = if dev != 0 { 2 } else { 1 } + u32::from(!l.opts.family_v6);
            if score > hiscore {
                if l.opts.reuseport {
                    let members = self.reuseport_group(addr, i);
                    return Some(self.reuseport_select(&members, tuple));
                }
                (result, hiscore) = (Some(i), score);
            }
        }
        result
    }

    /// `tcp_v4_conn_request` and friends: a segment for a listener; `tw_isn` is the
    /// ISN a TIME-WAIT socket chose for a SYN that reopens its connection
    /// (`tcp_tw_isn`: `tcp_conn_request` takes it instead of a secure one, cookies
    /// excepted).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn listen_rcv(
        &mut self,
        now: Instant,
        l: u32,
        tuple: FourTuple,
        ip: &IpRepr,
        th: &TcpRepr,
        payload: &[u8],
        tw_isn: Option<u32>,
    ) {
        let f = th.flags;
        // tcp_rcv_state_process in LISTEN: a reset, a SYN-FIN and a segment with
        // none of SYN, ACK, RST go to `discard:` (tcp_drop_reason, tcp/drops.rs); an
        // ACK is answered with a reset, uncounted.
        if f.contains(TcpFlags::RST) {
            return self.sk_drops_skbadd(l);
        }
        if f.contains(TcpFlags::ACK) {
            if !f.contains(TcpFlags::SYN) && self.cookie_ack(now, l, tuple, ip, th, payload) {
                return;
            }
            // RFC 9293 3.10.7.2: an ACK to a listener gets a reset.
            return self.send_reset_for(now, Some(l), (tuple, ip), th, payload);
        }
        if !f.contains(TcpFlags::SYN) || f.contains(TcpFlags::FIN) {
            return self.sk_drops_skbadd(l);
        }
        // tcp_v6_conn_request: a SYN from an IPv4-mapped source (which the
        // dual-stack model cannot tell from IPv4's) is an IPv6 header error,
        // dropped without a reset or a listen drop.
        if matches!(ip.src, IpAddr::V6(a) if a.to_ipv4_mapped().is_some()) {
            self.mib.inc(Mib::Ip6InHdrErrors);
            trace!(%tuple.remote, "drop SYN: IPv4-mapped IPv6 source");
            return;
        }
        let Some(Sock::Listener(lst)) = &self.slots[l as usize].sock else {
            return;
        };
        // tcp_conn_request: a SYN that reopens a TIME-WAIT connection (tcp_tw_isn)
        // is taken without limits ("they conserve resources and peer is evidently
        // real one"): no cookie, whatever tcp_syncookies says or the SYN queue
        // holds. Otherwise tcp_syncookies 2, or a full SYN queue, asks
        // tcp_syn_flood_action: cookies, or a drop. A full accept queue always drops.
        let syncookies = self.cfg.tcp_syncookies;
        let flood = tw_isn.is_none() && (syncookies == 2 || lst.syn_queue_full());
        let want_cookie = flood && self.syn_flood_action();
        if flood && !want_cookie {
            self.listendrop(l);
            trace!(%tuple.remote, "drop SYN: SYN queue full");
            return;
        }
        let Some(Sock::Listener(lst)) = &mut self.slots[l as usize].sock else {
            return;
        };
        if lst.accept_queue_full() {
            self.mib.inc(Mib::TcpExtListenOverflows);
            self.listendrop(l);
            trace!(%tuple.remote, "drop SYN: accept queue full");
            return;
        }
        if want_cookie {
            lst.last_overflow = Some(now);
            let opts = lst.opts.clone();
            return self.cookie_synack(now, tuple, ip, th, &opts);
        }
        let pending = lst.pending;
        if tw_isn.is_none() && self.syn_backlog_reserved(now, tuple, pending) {
            self.listendrop(l);
            trace!(%tuple.remote, "drop SYN: tcp_max_syn_backlog's last quarter");
            return;
        }
        let Some(Sock::Listener(lst)) = &mut self.slots[l as usize].sock else {
            return;
        };
        let opts = lst.opts.clone();
        // tcp_try_fastopen: a Fast Open child skips the SYN queue, straight to the
        // accept queue (inet_csk_reqsk_queue_add).
        let tfo = self.try_fastopen(now, l, ip, th, !payload.is_empty());
        if let (false, Some(Sock::Listener(lst))) = (tfo.child, &mut self.slots[l as usize].sock) {
            lst.pending += 1; // reqsk_queue_added
            lst.young += 1;
        }
        if tfo.child {
            // tcp_fastopen_create_child -> tcp_create_openreq_child: a Fast Open child
            // is made at its SYN. A request's child is made, and counted, at the final
            // ACK (`Tcb::synrecv_acked`).
            self.mib.inc(Mib::TcpPassiveOpens);
        }
        let mut tcb = self.new_tcb(tuple, now);
        if let Some(isn) = tw_isn {
            tcb.iss = tcp::seq::Seq(isn);
        }
        tcb.apply_options(&self.cfg, &opts);
        if tcb.repflow {
            // tcp_v6_init_req keeps the SYN (ireq->pktopts): its SYN-ACK reflects
            // the SYN's flow label.
            tcb.flow_label = self.rx_flowlabel.unwrap_or(0);
        }
        tcb.md5 = opts.md5.child_copy(tuple.remote.ip()); // tcp_v4_syn_recv_sock
        tcb.bind.by_bind = true; // __inet_inherit_port: the listener's bucket
        if opts.save_syn != 0 {
            tcb.saved_syn = self.syn_headers.take(); // tcp_reqsk_record_syn
        }
        tcb.parent = Some(l);
        tcb.req.young = !tfo.child;
        tcb.tfo.syn_cookie = tfo.synack_cookie;
        if tfo.child {
            tcb.tfo.rsk = Some((l, self.slots[l as usize].generation));
            tcb.tfo.syn_fastopen_child = true;
        }
        let h = self.alloc(Sock::Tcp(Box::new(tcb)));
        self.conns.insert(tuple, h.index);
        let syn_data = if tfo.child { payload } else { &[] };
        self.with_tcb(now, h.index, |tcb, ctx| {
            tcb.passive_open(ctx, ip, th, syn_data)
        });
    }

    /// tcp_input.c `tcp_syn_flood_action`: with `tcp_syncookies` on (1, or 2, which
    /// sends cookies always) the SYN gets a cookie, counted as
    /// TcpExtTCPReqQFullDoCookies (with 2, every SYN that asks); off, it is dropped,
    /// counted as TcpExtTCPReqQFullDrop. Linux's one-time "Possible SYN flooding"
    /// log line (`synflood_warned`) is not kept.
    fn syn_flood_action(&mut self) -> bool {
        let want_cookie = self.cfg.tcp_syncookies != 0;
        self.mib.inc(match want_cookie {
            true => Mib::TcpExtTCPReqQFullDoCookies,
            false => Mib::TcpExtTCPReqQFullDrop,
        });
        want_cookie
    }

    /// `tcp_conn_request` without SYN cookies (`tcp_syncookies` 0): "the last
    /// quarter of backlog is filled with destinations, proven to be alive", those
    /// with an RTT in the metrics cache (`tcp_peer_is_proven`); `pending` requests
    /// wait now.
    fn syn_backlog_reserved(&mut self, now: Instant, tuple: FourTuple, pending: u32) -> bool {
        let max = self.cfg.tcp_max_syn_backlog as i64;
        if self.cfg.tcp_syncookies != 0 || max - (pending as i64) >= max >> 2 {
            return false;
        }
        let dst = self.routes.lookup(tuple.remote.ip());
        let key = (tuple.local.ip(), tuple.remote.ip());
        !self.tcp_metrics.peer_is_proven(now, dst, key)
    }

    /// The route to `tuple`'s peer has `features ecn` (`dst_feature`).
    fn route_ecn(&self, tuple: FourTuple) -> bool {
        self.routes.lookup(tuple.remote.ip()).ecn()
    }

    /// `tcp_conn_request` with `want_cookie`: a SYN-ACK whose ISN is the cookie and
    /// whose TSval carries the options (`cookie_init_timestamp`); no state is kept.
    /// The SYN-ACK is the listener's (`tcp_make_synack` reads `sk`): its options
    /// `opts` decide the MSS it offers (`TCP_MAXSEG`, `tcp_mss_clamp`), its window
    /// (`TCP_WINDOW_CLAMP`, a locked `SO_RCVBUF`: `tcp_openreq_init_rwin`), its TOS or
    /// traffic class (`tcp_v4_send_synack`, `tcp_v6_send_synack`), its congestion
    /// control's ECN wish and its `TCP_TX_DELAY`, as for a request that is kept.
    fn cookie_synack(
        &mut self,
        now: Instant,
        tuple: FourTuple,
        ip: &IpRepr,
        th: &TcpRepr,
        opts: &tcp::sockopt::SockOptions,
    ) {
        use tcp::syncookies::{init_timestamp, mss_index, CookieOpts};
        let default_mss = if tuple.local.is_ipv6() { 1220 } else { 536 };
        // tcp_parse_options: the listener's TCP_MAXSEG below the peer's MSS option
        // clamps it (user_mss), so the cookie encodes at most that.
        let peer_mss = match (th.options.mss.filter(|&m| m > 0), opts.user_mss) {
            (Some(m), u) if u != 0 && u < m as u32 => u as u16,
            (Some(m), _) => m,
            (None, _) => default_mss,
        };
        let (mssind, mss) = mss_index(peer_mss, tuple.local.is_ipv6());
        let iss = self
            .secrets
            .cookie
            .make(tuple.remote, tuple.local, th.seq, mssind, now);
        let mut tcb = Tcb::new(&self.cfg, tuple, iss, now);
        tcb.handle = SocketHandle {
            index: u32::MAX,
            generation: 0,
        };
        tcb.apply_options(&self.cfg, opts);
        tcb.md5 = opts.md5.child_copy(tuple.remote.ip());
        tcb.req.cookie = true;
        let ts_off = self.secrets.ts_off(tuple.local.ip(), tuple.remote.ip());
        let mut syn = *th;
        syn.options.mss = Some(mss);
        if th.options.timestamp.is_some() && self.cfg.tcp_timestamps {
            let o = CookieOpts {
                wscale: syn.options.wscale.filter(|_| self.cfg.tcp_window_scaling),
                sack: syn.options.sack_permitted && self.cfg.tcp_sack,
                ecn: tcp::ecn::syn_agrees(
                    &self.cfg,
                    ip,
                    th,
                    self.route_ecn(tuple),
                    tcb.cc.needs_ecn(),
                ),
            };
            let ms = now.as_millis() as u32;
            tcb.ts_offset = ts_off.wrapping_add(init_timestamp(ms, o).wrapping_sub(ms));
        } else {
            // Only a timestamp can bring these options back: offer none
            // (tcp_clear_options), and no ECN either ("if (!tmp_opt.tstamp_ok)
            // inet_rsk(req)->ecn_ok = 0"): the SYN-ACK goes without ECE.
            syn.options.wscale = None;
            syn.options.sack_permitted = false;
            syn.flags = syn.flags.without(TcpFlags::ECE | TcpFlags::CWR);
            tcb.ts_offset = ts_off;
        }
        self.mib.inc(Mib::TcpExtSyncookiesSent);
        let mut ctx = ctx!(self, now);
        ctx.tx_delay_us = tcb.tx_delay;
        tcb.passive_open(&mut ctx, ip, &syn, &[]);
    }

    /// `cookie_v4_check` + `tcp_get_cookie_sock`: an ACK to a listener that overflowed
    /// in the last 2 minutes may complete a cookie handshake; the connection is rebuilt
    /// from the cookie and the echoed options and queued for `accept`. False if the
    /// ACK is no valid cookie (the caller resets it).
    fn cookie_ack(
        &mut self,
        now: Instant,
        l: u32,
        tuple: FourTuple,
        ip: &IpRepr,
        th: &TcpRepr,
        payload: &[u8],
    ) -> bool {
        use tcp::syncookies::cookie_timestamp_decode;
        let Some(Sock::Listener(lst)) = &mut self.slots[l as usize].sock else {
            return false;
        };
        if !lst.checks_cookies(now, self.cfg.tcp_syncookies) {
            return false;
        }
        let cookie = self
            .secrets
            .cookie
            .check(tuple.remote, tuple.local, th.ack, th.seq, now);
        let Some(mss) = cookie else {
            self.mib.inc(Mib::TcpExtSyncookiesFailed);
            return false;
        };
        // cookie_tcp_check counts the valid cookie before anything can refuse it:
        // the echoed options, the accept queue, the child's MD5 key.
        self.mib.inc(Mib::TcpExtSyncookiesRecv);
        let ts_off = self.secrets.ts_off(tuple.local.ip(), tuple.remote.ip());
        let Some(opts) = cookie_timestamp_decode(&self.cfg, th.options.timestamp, ts_off) else {
            return false; // cookie_tcp_check's "goto out": the listener resets it
        };
        if lst.accept_queue_full() {
            // tcp_get_cookie_sock -> syn_recv_sock's exit_overflow: tcp_listendrop.
            self.mib.inc(Mib::TcpExtListenOverflows);
            self.listendrop(l);
            return true; // dropped: the client retransmits its ACK or data
        }
        if lst
            .opts
            .md5
            .child_copy(tuple.remote.ip())
            .child_copy_fails(self.cfg.optmem_max)
        {
            // syn_recv_sock's tcp_md5_key_copy found no option memory for the
            // child's key (put_and_exit): tcp_listendrop.
            self.listendrop(l);
            return true;
        }
        lst.pending += 1;
        let sock_opts = lst.opts.clone();
        // The SYN this ACK answers, as far as the cookie remembers it.
        let syn = TcpRepr {
            seq: th.seq.wrapping_sub(1),
            flags: TcpFlags::SYN,
            window: th.window,
            options: lowtide_wire::tcp::TcpOptions {
                mss: Some(mss),
                wscale: opts.wscale,
                sack_permitted: opts.sack,
                timestamp: th.options.timestamp.map(|(v, _)| (v, 0)),
                ..Default::default()
            },
            ..*th
        };
        let mut tcb = Tcb::new(&self.cfg, tuple, th.ack.wrapping_sub(1), now);
        tcb.ts_offset = ts_off;
        self.attach_route(now, &mut tcb);
        tcb.apply_options(&self.cfg, &sock_opts); // sk_clone_lock: the listener's options
        tcb.md5 = sock_opts.md5.child_copy(tuple.remote.ip()); // tcp_v4_syn_recv_sock
        tcb.req.cookie = true;
        tcb.req.cookie_mss = mss.into();
        tcb.bind.by_bind = true; // __inet_inherit_port
        tcb.parent = Some(l);
        let h = self.alloc(Sock::Tcp(Box::new(tcb)));
        self.conns.insert(tuple, h.index);
        let segs = self.rx_segs;
        let owed = self.with_tcb(now, h.index, |tcb, ctx| {
            let sent = ctx.out.len();
            tcb.passive_open(ctx, ip, &syn, &[]);
            // tcp_create_openreq_child: the clamp is req->mss, the cookie's MSS, which
            // TCP_MAXSEG bounded before encoding but does not bound again (IPv6's
            // smallest entry, 1220, is above a TCP_MAXSEG of 1000).
            tcb.cookie_mss_clamp(ctx);
            tcb.ecn_cookie_ok(ctx.cfg, opts.ecn, th);
            // The SYN-ACK went out already, as the cookie: this one is dropped
            // uncounted (cookie_v4_check sends nothing).
            tcp::output::unpush_from(ctx, sent);

            // No SYN-ACK of this request's own: Linux's cookie child skips
            // tcp_check_req and its TSecr range (cookie_tcp_reqsk_init: 0).
            tcb.req.snt_tsval = (0, 0);
            tcb.rcv_segment(ctx, ip, th, Payload::Flat(payload), segs);
            (tcb.parent, std::mem::take(&mut tcb.req.listener_drops))
        });
        self.listener_drops(owed);
        true
    }
}
