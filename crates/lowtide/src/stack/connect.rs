//! Active opens (Linux's tcp_ipv4.c `tcp_v4_connect` and inet_hashtables.c
//! `__inet_hash_connect`): the 4-tuple, the ISN and timestamp offset, the route, and
//! the SYN, with or without Fast Open data.

use super::{timewait, Sock, Stack};
use crate::socket::{SocketError, SocketHandle, UserBytes};
use crate::tcp::{self, FourTuple, Tcb};
use crate::time::Instant;
use std::net::SocketAddr;

impl Stack {
    /// Starts an active open from `local` (port 0 picks an ephemeral port) to `remote`.
    /// Completion is reported as [`EventKind::Connected`](crate::EventKind::Connected)
    /// or an error event.
    pub fn connect(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<SocketHandle, SocketError> {
        self.active_open(now, local, remote, None)
    }

    /// `tcp_v4_connect`: picks the 4-tuple, a secure ISN (`new_tcb`), applies the
    /// socket's options if it has any, and sends the SYN.
    pub(crate) fn active_open(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        opts: Option<&tcp::sockopt::SockOptions>,
    ) -> Result<SocketHandle, SocketError> {
        self.active_open_tfo(now, local, remote, opts, None)
            .map(|(h, _)| h)
    }

    /// [`Stack::active_open`] with Fast Open: `syn_data` (`MSG_FASTOPEN`) goes in
    /// the SYN as far as a cookie allows; without it, `TCP_FASTOPEN_CONNECT` may defer
    /// the SYN to the first write. Returns the handle and the bytes the SYN took.
    /// The data comes with whether it was sent `MSG_ZEROCOPY`.
    pub(crate) fn active_open_tfo(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        opts: Option<&tcp::sockopt::SockOptions>,
        syn_data: Option<(UserBytes<'_>, bool)>,
    ) -> Result<(SocketHandle, usize), SocketError> {
        if remote.port() == 0 || remote.ip().is_unspecified() || local.is_ipv4() != remote.is_ipv4()
        {
            return Err(SocketError::InvalidInput);
        }
        // ip_route_connect: the bound device first (ENODEV).
        if let Some(o) = opts {
            self.route_bound_dev(o.bound_dev_if, remote.is_ipv6())?;
            self.note_bound_dev(o.bound_dev_if);
        }
        if !self.addrs.contains(&local.ip()) {
            return Err(SocketError::AddrNotAvailable);
        }
        let (tuple, reuse) = self.pick_tuple(now, local, remote)?;
        let mut tcb = self.new_tcb(tuple, now);
        match (reuse, opts) {
            (Some(r), _) => {
                // tcp_twsk_unique: write_seq and the peer's timestamp from TIME-WAIT.
                tcb.iss = tcp::seq::Seq(r.isn);
                if let Some(stamp) = r.ts_recent_stamp {
                    (tcb.rx_opt.ts_recent, tcb.rx_opt.ts_recent_stamp) = (r.ts_recent, stamp);
                    tcb.rx_opt.ts_recent_from_tw = true;
                }
            }
            // tcp_v4_connect: "if (!tp->write_seq)": tcp_disconnect left one.
            (None, Some(o)) if o.write_seq != 0 => tcb.iss = tcp::seq::Seq(o.write_seq),
            _ => {}
        }
        if let Some(o) = opts {
            tcb.apply_options(&self.cfg, o);
            // tcp_connect_init's tcp_initialize_rcv_mss reads the rcv_wnd
            // tcp_disconnect left on the socket (0 before any connection).
            tcb.rcv_wnd = o.disconnected.as_ref().map_or(0, |d| d.rcv_wnd());
            // The same tcp_sock: timeout_rehash goes on counting, and reordering is
            // the last connection's.
            tcb.timeout_rehash = o.disconnected.as_ref().map_or(0, |d| d.timeout_rehash());
            if let Some(d) = &o.disconnected {
                tcb.reordering = d.reordering();
                d.keep_fastopen_syn_bits(&mut tcb.tfo);
            }
            // ... and app_limited: 1 from a send on the unconnected socket.
            if o.app_limited {
                tcb.rate.app_limited = 1;
            }
        }
        // inet_bind (SOCK_BINDPORT_LOCK) against inet_hash_connect's own pick.
        tcb.bind.by_bind = local.port() != 0;
        let defer = tcb.tfo.connect;
        let no_cookie = tcb.tfo.no_cookie;
        let h = self.alloc(Sock::Tcp(Box::new(tcb)));
        self.conns.insert(tuple, h.index);
        if syn_data.is_none() && !defer {
            self.with_tcb(now, h.index, |tcb, ctx| tcb.connect(ctx));
            return Ok((h, 0));
        }
        let fo = self.fastopen_cookie_check(now, tuple, no_cookie);
        let copied = match syn_data {
            // tcp_fastopen_defer_connect: a usable cookie holds the SYN back.
            None if fo.ok => {
                self.with_tcb(now, h.index, |tcb, _| tcb.defer_connect());
                0
            }
            None => self.with_tcb(now, h.index, |tcb, ctx| {
                tcb.connect_fastopen(ctx, UserBytes::Bytes(&[]), fo, false)
            }),
            Some((d, zc)) => self.with_tcb(now, h.index, |tcb, ctx| {
                tcb.connect_fastopen(ctx, d, fo, zc)
            }),
        };
        Ok((h, copied))
    }

    /// `inet_hash_connect`: the 4-tuple of a new connection, free or taken over
    /// from a timewait socket (`stack/timewait.rs`), with what it hands over.
    pub(super) fn pick_tuple(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<(FourTuple, Option<timewait::TwReuse>), SocketError> {
        if local.port() != 0 {
            let t = FourTuple { local, remote };
            return match self.check_established(now, t, false) {
                None => Err(SocketError::AddrInUse),
                Some(reuse) => Ok((t, reuse)),
            };
        }
        // __inet_hash_connect (RFC 6056 Algorithm 4): from a keyed hash of the
        // destination plus a perturbation, ports of one parity, then the other.
        let [lo, hi] = self.cfg.ip_local_port_range;
        let span = (hi - lo) as u32 + 1;
        let (offset, index) = self.secrets.port_offset(local.ip(), remote, span);
        let mut tried = 0u32;
        for parity in 0..2 {
            for i in (0..span).step_by(2) {
                let port = lo + ((offset + i + parity) % span) as u16;
                // A reserved port, or a bucket a bind made (tb->fastreuse >= 0).
                if self.port_bound(port) || self.cfg.is_local_reserved_port(port) {
                    tried += 2;
                    continue;
                }
                let t = FourTuple {
                    local: SocketAddr::new(local.ip(), port),
                    remote,
                };
                if let Some(reuse) = self.check_established(now, t, true) {
                    let jitter = self.rng.range_u32(0, 7);
                    self.secrets.advance(index, tried, jitter);
                    return Ok((t, reuse));
                }
                tried += 2;
            }
        }
        Err(SocketError::AddrNotAvailable)
    }

    /// A connection for `tuple` with its RFC 6528 ISN and timestamp offset.
    pub(super) fn new_tcb(&self, tuple: FourTuple, now: Instant) -> Tcb {
        let iss = self.secrets.tcp_seq(tuple.local, tuple.remote, now);
        let mut tcb = Tcb::new(&self.cfg, tuple, iss, now);
        tcb.ts_offset = self.secrets.ts_off(tuple.local.ip(), tuple.remote.ip());
        // sk_set_txhash (tcp_v4_connect) / a request's net_tx_rndhash.
        tcb.txhash = tcp::flowlabel::next_txhash(self.flow_key, &tuple, iss);
        self.attach_route(now, &mut tcb);
        tcb
    }

    /// The connection takes its route: metrics and `dst_mtu` (`ip_route_connect`,
    /// `inet_csk_route_req`).
    pub(super) fn attach_route(&self, now: Instant, tcb: &mut Tcb) {
        let remote = tcb.tuple.remote.ip();
        let mtu = self.route_mtu(now, remote);
        tcb.attach_dst(&self.routes, now, mtu);
    }
}
