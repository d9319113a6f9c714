//! TCP Fast Open at the stack: the server's decision on a SYN (`tcp_try_fastopen`),
//! the listener's Fast Open queue, the stack's keys, and the client's cookie cache
//! and blackhole state (net/ipv4/tcp_fastopen.c; the connection's side is in
//! `tcp/fastopen.rs` and `tcp/fastopen_conn.rs`).

use super::{Sock, SocketMut, SocketRef, Stack};
use crate::mib::Mib;
use crate::route::Rtax;
use crate::socket::{SocketError, SocketHandle, UserBytes};
use crate::tcp::fastopen::{
    FastOpenKeys, TCP_FASTOPEN_KEY_LENGTH, TFO_CLIENT_NO_COOKIE, TFO_SERVER_COOKIE_NOT_REQD,
    TFO_SERVER_ENABLE, TFO_SERVER_WO_SOCKOPT1,
};
use crate::tcp::fastopen_active::CookieCheck;
use crate::tcp::FourTuple;
use crate::time::Instant;
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{FastOpenOption, TcpRepr};

/// What `tcp_try_fastopen` decided for a SYN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TfoDecision {
    /// Create the child now and take the SYN's data (`fastopen_sk`).
    pub child: bool,
    /// The cookie option the SYN-ACK carries (`foc` with `len >= 0`).
    pub synack_cookie: Option<FastOpenOption>,
}

impl Stack {
    /// `tcp_fastopen_init_key_once`: the stack draws a key if it has none.
    pub fn fastopen_init_key_once(&mut self) {
        if self.cfg.tcp_fastopen_key.keys.is_empty() {
            let mut k = [0u8; TCP_FASTOPEN_KEY_LENGTH];
            for c in k.chunks_exact_mut(4) {
                c.copy_from_slice(&self.rng.next_u32().to_le_bytes());
            }
            self.cfg.tcp_fastopen_key = FastOpenKeys { keys: vec![k] };
        }
    }

    /// `inet_listen`'s Fast Open part: with `TFO_SERVER_WO_SOCKOPT1` and
    /// `TFO_SERVER_ENABLE` a new listener does Fast Open without `TCP_FASTOPEN`
    /// (`fastopen_queue_tune` to its backlog); `TCP_FASTOPEN` set before `listen`
    /// applies.
    pub(super) fn fastopen_listen(&mut self, index: u32, backlog: u32) {
        let tfo = self.cfg.tcp_fastopen;
        let somaxconn = self.cfg.somaxconn;
        let Some(Sock::Listener(l)) = &mut self.slots[index as usize].sock else {
            return;
        };
        if let Some(q) = l.opts.fastopen_qlen {
            l.fastopen.max_qlen = q; // fastopen_queue_tune clamped it at setsockopt
        }
        let wo_sockopt = tfo & TFO_SERVER_WO_SOCKOPT1 != 0 && tfo & TFO_SERVER_ENABLE != 0;
        if wo_sockopt && l.fastopen.max_qlen == 0 {
            l.fastopen.max_qlen = backlog.min(somaxconn);
            self.fastopen_init_key_once();
        }
    }

    /// The Fast Open keys a listener (or the stack, `None`) makes its cookies with
    /// (`tcp_fastopen_get_ctx`: its own, else the stack's; `TCP_FASTOPEN_KEY` reads
    /// its own only).
    pub fn fastopen_keys(&self, listener: Option<SocketHandle>) -> FastOpenKeys {
        let own = listener
            .and_then(|h| self.slot_sock(h).ok())
            .and_then(|s| match s {
                Sock::Listener(l) => l.opts.fastopen_key.clone(),
                _ => None,
            });
        own.unwrap_or_else(|| self.cfg.tcp_fastopen_key.clone())
    }

    /// `tcp_try_fastopen`: whether a SYN to listener `l` opens a Fast Open child,
    /// and which cookie the SYN-ACK carries (a request answered, a stale cookie
    /// replaced, a backup key's cookie renewed).
    pub(super) fn try_fastopen(
        &mut self,
        now: Instant,
        l: u32,
        ip: &IpRepr,
        th: &TcpRepr,
        syn_data: bool,
    ) -> TfoDecision {
        let foc = th.options.fastopen;
        let no = TfoDecision {
            child: false,
            synack_cookie: None,
        };
        if foc.is_some_and(|f| f.len == 0) {
            self.mib.inc(Mib::TcpExtTCPFastOpenCookieReqd);
        }
        let tfo = self.cfg.tcp_fastopen;
        let Some(Sock::Listener(lst)) = &mut self.slots[l as usize].sock else {
            return no;
        };
        if tfo & TFO_SERVER_ENABLE == 0 || !(syn_data || foc.is_some()) {
            return no;
        }
        if let Err(overflow) = lst.fastopen.check(now) {
            if overflow {
                self.mib.inc(Mib::TcpExtTCPFastOpenListenOverflow);
            }
            return no;
        }
        // tcp_fastopen_no_cookie: the sysctl bit, the socket option, or the
        // route to the client (RTAX_FASTOPEN_NO_COOKIE, inet_csk_route_req's dst).
        let no_cookie = tfo & TFO_SERVER_COOKIE_NOT_REQD != 0
            || lst.opts.fastopen_no_cookie
            || self.routes.lookup(ip.src).get(Rtax::FastopenNoCookie) != 0;
        let keys = lst
            .opts
            .fastopen_key
            .clone()
            .unwrap_or_else(|| self.cfg.tcp_fastopen_key.clone());
        let exp = foc.is_some_and(|f| f.exp);
        let with_exp = |c: Option<FastOpenOption>| c.map(|c| FastOpenOption { exp, ..c });
        let key_used = match foc {
            _ if no_cookie => 0,
            Some(f) if f.len == 0 => {
                return TfoDecision {
                    child: false,
                    synack_cookie: with_exp(keys.cookie_gen(ip.src, ip.dst)),
                }
            }
            Some(f) => match keys.cookie_check(ip.src, ip.dst, &f) {
                (0, valid) => {
                    self.mib.inc(Mib::TcpExtTCPFastOpenPassiveFail);
                    return TfoDecision {
                        child: false,
                        synack_cookie: with_exp(valid),
                    };
                }
                (k, _) => k,
            },
            None => return no,
        };
        // tcp_fastopen_create_child succeeds here (no allocation to fail): the
        // child counts in the queue; a backup key's cookie is renewed.
        lst.fastopen.qlen += 1;
        let synack_cookie = match key_used {
            2 => {
                self.mib.inc(Mib::TcpExtTCPFastOpenPassiveAltKey);
                with_exp(keys.cookie_gen(ip.src, ip.dst))
            }
            _ => None,
        };
        self.mib.inc(Mib::TcpExtTCPFastOpenPassive);
        TfoDecision {
            child: true,
            synack_cookie,
        }
    }

    /// `reqsk_fastopen_remove` on the listener's side: a Fast Open child that left
    /// SYN-RECV (handshake done, reset, closed) frees its place in the queue, or
    /// holds it for 60 s if reset after `accept` (while the listener still exists).
    pub(super) fn fastopen_released(&mut self, now: Instant, child: u32) {
        let Some(Sock::Tcp(t)) = &mut self.slots[child as usize].sock else {
            return;
        };
        let Some(((l, lgen), reset)) = t.tfo.released.take() else {
            return;
        };
        let accepted = t.parent.is_none();
        let slot = &mut self.slots[l as usize];
        if slot.generation != lgen {
            return;
        }
        if let Some(Sock::Listener(lst)) = &mut slot.sock {
            lst.fastopen.remove(now, reset, accepted);
        }
    }

    /// `tcp_fastopen_cookie_check`: the cached MSS and cookie for `tuple`'s
    /// destination; none while active Fast Open is paused for a blackhole; data
    /// without a cookie with `TFO_CLIENT_NO_COOKIE`, `TCP_FASTOPEN_NO_COOKIE` or
    /// the route's `fastopen_no_cookie`;
    /// else data only with a cookie (a request otherwise).
    pub(super) fn fastopen_cookie_check(
        &self,
        now: Instant,
        tuple: FourTuple,
        no_cookie: bool,
    ) -> CookieCheck {
        let (mss, cookie, exp) =
            (self.tcp_metrics).fastopen_get(tuple.local.ip(), tuple.remote.ip());
        let cookie = cookie.or(Some(FastOpenOption::request(exp)));
        let timeout = self.cfg.tcp_fastopen_blackhole_timeout_sec;
        let ch = match self.tfo_blackhole.should_disable(now, timeout) {
            Some(true) => {
                return CookieCheck {
                    ok: false,
                    cookie: None,
                    mss,
                    ch: false,
                }
            }
            Some(false) => true,
            None => false,
        };
        // tcp_fastopen_no_cookie: the sysctl bit, the socket option, or the
        // connection's route (RTAX_FASTOPEN_NO_COOKIE).
        let route_no_cookie = self
            .routes
            .lookup(tuple.remote.ip())
            .get(Rtax::FastopenNoCookie);
        if self.cfg.tcp_fastopen & TFO_CLIENT_NO_COOKIE != 0 || no_cookie || route_no_cookie != 0 {
            return CookieCheck {
                ok: true,
                cookie: None,
                mss,
                ch,
            };
        }
        CookieCheck {
            ok: cookie.is_some_and(|c| c.len > 0),
            cookie,
            mss,
            ch,
        }
    }

    /// A deferred connect's first write (`tcp_sendmsg_fastopen` with
    /// `DEFER_CONNECT`): the SYN leaves now with as much of `data` as the cookie
    /// allows (`zerocopy`: see [`crate::tcp::Tcb`]'s `connect_fastopen`). Returns
    /// the bytes it took.
    pub(crate) fn fastopen_connect_deferred(
        &mut self,
        now: Instant,
        index: u32,
        data: UserBytes<'_>,
        zerocopy: bool,
    ) -> usize {
        let Some(Sock::Tcp(t)) = &self.slots[index as usize].sock else {
            return 0;
        };
        let (tuple, no_cookie) = (t.tuple, t.tfo.no_cookie);
        let fo = self.fastopen_cookie_check(now, tuple, no_cookie);
        self.with_tcb(now, index, |tcb, ctx| {
            tcb.connect_fastopen(ctx, data, fo, zerocopy)
        })
    }

    /// What an active Fast Open connection reported: the SYN-ACK's lesson for the
    /// cookie cache (`tcp_fastopen_cache_set`), a suspected blackhole
    /// (`tcp_fastopen_active_disable`).
    pub(super) fn fastopen_active_done(&mut self, now: Instant, index: u32) {
        let Some(Sock::Tcp(t)) = &mut self.slots[index as usize].sock else {
            return;
        };
        let key = (t.tuple.local.ip(), t.tuple.remote.ip());
        let update = t.tfo.cache_update.take();
        if let Some(u) = update {
            let dst = self.routes.lookup(key.1);
            (self.tcp_metrics).fastopen_set(now, dst, key, u.mss, u.cookie, u.syn_lost, u.try_exp);
        }
        self.fastopen_active_blackhole(now, index);
    }

    /// What a connection found of active Fast Open's blackholes: a suspected one
    /// pauses it (`tcp_fastopen_active_disable`, `TCPFastOpenBlackhole`); one that
    /// worked after a pause counts the pauses from 0 again
    /// (`tcp_fastopen_active_disable_ofo_check`).
    pub(super) fn fastopen_active_blackhole(&mut self, now: Instant, index: u32) {
        let Some(Sock::Tcp(t)) = &mut self.slots[index as usize].sock else {
            return;
        };
        let blackhole = std::mem::take(&mut t.tfo.blackhole);
        if std::mem::take(&mut t.tfo.active_worked) {
            self.tfo_blackhole.times = 0;
        }
        let timeout = self.cfg.tcp_fastopen_blackhole_timeout_sec;
        if blackhole && self.tfo_blackhole.disable(now, timeout) {
            self.mib.inc(Mib::TcpExtTCPFastOpenBlackhole);
        }
    }

    /// `ip tcp_metrics flush`: every cached RTT, window, reordering degree and Fast
    /// Open cookie is forgotten.
    pub fn flush_tcp_metrics(&mut self) {
        self.tcp_metrics.flush();
    }

    /// The TCP metrics cache (`ip tcp_metrics show`).
    pub fn tcp_metrics(&self) -> &crate::tcp::metrics::TcpMetrics {
        &self.tcp_metrics
    }

    /// `connect(2)` with options and, for `MSG_FASTOPEN`, the data its SYN should
    /// carry (whose copy may fault, [`UserBytes::Fault`]): the handle and the bytes
    /// the SYN took. With `TCP_FASTOPEN_CONNECT`
    /// and a cookie the SYN waits for the first write ([`Stack::fastopen_deferred`]).
    /// `zerocopy` is `MSG_ZEROCOPY` for the data: on a socket with `SO_ZEROCOPY`
    /// the data the SYN carries completes on the error queue once acknowledged.
    pub fn connect_fastopen(
        &mut self,
        now: Instant,
        local: std::net::SocketAddr,
        remote: std::net::SocketAddr,
        opts: &crate::tcp::sockopt::SockOptions,
        syn_data: Option<UserBytes<'_>>,
        zerocopy: bool,
    ) -> Result<(SocketHandle, usize), SocketError> {
        self.active_open_tfo(
            now,
            local,
            remote,
            Some(opts),
            syn_data.map(|d| (d, zerocopy)),
        )
    }

    /// A connect waits for its first write to send the SYN (`DEFER_CONNECT`).
    pub fn fastopen_deferred(&self, h: SocketHandle) -> bool {
        matches!(self.slot_sock(h), Ok(Sock::Tcp(t)) if t.tfo.defer_connect)
    }

    /// The first write of a deferred connect: its SYN leaves with as much of `data`
    /// as the cookie allows; the bytes it took (`zerocopy`: as
    /// [`Stack::connect_fastopen`]).
    pub fn fastopen_connect_deferred_handle(
        &mut self,
        now: Instant,
        h: SocketHandle,
        data: UserBytes<'_>,
        zerocopy: bool,
    ) -> Result<usize, SocketError> {
        let index = self.user_slot(h)?;
        Ok(self.fastopen_connect_deferred(now, index, data, zerocopy))
    }
}

impl SocketMut<'_> {
    /// `TCP_FASTOPEN` on a socket in CLOSE or LISTEN (`fastopen_queue_tune`); for a
    /// listener it applies at once.
    pub fn set_fastopen_qlen(&mut self, qlen: u32) -> Result<(), SocketError> {
        self.stack.fastopen_init_key_once();
        let somaxconn = self.stack.cfg.somaxconn;
        let l = self.stack.listener_mut(self.h)?;
        // fastopen_queue_tune: min(qlen, somaxconn), now.
        l.opts.fastopen_qlen = Some(qlen.min(somaxconn));
        l.fastopen.max_qlen = qlen.min(somaxconn);
        Ok(())
    }
}

impl SocketRef<'_> {
    /// `TCP_FASTOPEN` (getsockopt) of a listener: its `max_qlen`.
    pub fn fastopen_max_qlen(&self) -> Result<u32, SocketError> {
        match self.stack.slot_sock(self.h)? {
            Sock::Listener(l) => Ok(l.fastopen.max_qlen),
            _ => Err(SocketError::InvalidInput),
        }
    }
}
