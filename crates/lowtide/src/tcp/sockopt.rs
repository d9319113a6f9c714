//! Socket options and socket-call variants the POSIX layer needs (tcp.c:
//! `do_tcp_setsockopt`, `tcp_poll`, `tcp_ioctl`, `MSG_PEEK`, `MSG_MORE`).

use super::consts::{TCP_RTO_MAX, TCP_RTO_MIN, TCP_TIMEOUT_MIN};
use super::sock::Tcb;
use super::{Ctx, TcpState};
use crate::config::Config;
use core::time::Duration;

/// `TCP_FIN_TIMEOUT_MAX / HZ`: the largest `TCP_LINGER2`, in seconds.
pub const TCP_FIN_TIMEOUT_MAX_SECS: i32 = 120;

/// `do_tcp_setsockopt(TCP_LINGER2)`: negative is -1, larger than
/// `TCP_FIN_TIMEOUT_MAX` is capped.
pub fn linger2_from_user(secs: i32) -> i32 {
    if secs < 0 {
        -1
    } else {
        secs.min(TCP_FIN_TIMEOUT_MAX_SECS)
    }
}

/// `do_tcp_getsockopt(TCP_LINGER2)`: -1, or the stored seconds, 0 meaning
/// `tcp_fin_timeout`.
pub fn linger2_to_user(v: i32, fin_timeout: u32) -> i32 {
    match v {
        0 => fin_timeout as i32,
        v => v,
    }
}

/// `do_tcp_getsockopt(TCP_TIMESTAMP)`: the TSval clock (`tcp_clock_ts`, milliseconds:
/// lowtide has no `tcp_usec_ts`) plus the socket's `tsoffset`, its low bit the
/// microsecond flag, here always clear.
pub fn tcp_timestamp_to_user(clock_ms: u32, tsoffset: u32) -> i32 {
    (clock_ms.wrapping_add(tsoffset) & !1) as i32
}

/// `do_tcp_setsockopt(TCP_TX_DELAY)`: 0 to 2^28 - 1 microseconds ("tp->srtt_us is
/// u32, and is shifted by 3"), else `EINVAL`.
pub fn tx_delay_from_user(val: i32) -> Option<u32> {
    u32::try_from(val).ok().filter(|&v| v < 1 << (31 - 3))
}

/// `MAX_TCP_SYNCNT`: the largest `TCP_SYNCNT`.
pub const MAX_TCP_SYNCNT: u8 = 127;

/// `do_tcp_setsockopt(TCP_RTO_MAX_MS)` (Linux 6.15+): 1 to 120 s
/// (`TCP_RTO_MAX_MIN_SEC`, `TCP_RTO_MAX_SEC`), else `EINVAL`.
pub fn rto_max_from_user(ms: i32) -> Option<Duration> {
    let d = Duration::from_millis(u64::try_from(ms).ok()?);
    rto_max_valid(d).then_some(d)
}

/// The `TCP_RTO_MAX_MS` range: `TCP_RTO_MAX_MIN_SEC` (1 s) to `TCP_RTO_MAX`.
pub fn rto_max_valid(d: Duration) -> bool {
    (Duration::from_secs(1)..=TCP_RTO_MAX).contains(&d)
}

/// The `TCP_RTO_MIN_US` range: `TCP_TIMEOUT_MIN` (2 jiffies) to `TCP_RTO_MIN`.
pub fn rto_min_valid(d: Duration) -> bool {
    (TCP_TIMEOUT_MIN..=TCP_RTO_MIN).contains(&d)
}

/// `do_tcp_setsockopt(TCP_RTO_MIN_US)` (Linux 6.15+): the microseconds rounded up
/// to jiffies (`usecs_to_jiffies`, HZ 1000), from `TCP_TIMEOUT_MIN` (2 ms) to
/// `TCP_RTO_MIN` (200 ms), else `EINVAL` (a negative value is a huge unsigned one).
pub fn rto_min_from_user(us: i32) -> Option<Duration> {
    let d = Duration::from_millis((us as u32 as u64).div_ceil(1000));
    rto_min_valid(d).then_some(d)
}

/// `SO_RCVLOWAT`'s `sk_rcvlowat` (`sock_setsockopt`, `tcp_set_rcvlowat`): a
/// negative value is `INT_MAX`, capped at half of `locked_rcvbuf` (an `SO_RCVBUF`
/// buffer, as `sk_rcvbuf` holds it) or else of `tcp_rmem[2]`; 0 is 1.
pub fn rcvlowat_from_user(cfg: &Config, locked_rcvbuf: Option<u32>, val: i32) -> u32 {
    let val = u32::try_from(val).unwrap_or(i32::MAX as u32);
    let cap = locked_rcvbuf.unwrap_or(cfg.tcp_rmem[2]) >> 1;
    val.min(cap).max(1)
}

/// The TTL / hop limit of a packet no socket option decides (`ip4_dst_hoplimit`,
/// `ip6_dst_hoplimit`): `net.ipv4.ip_default_ttl` or `net.ipv6.conf.all.hop_limit`.
pub(crate) fn default_ttl(cfg: &Config, ipv6: bool) -> u8 {
    match ipv6 {
        true => cfg.ipv6_hop_limit,
        false => cfg.ip_default_ttl,
    }
}

/// `rt_tos2priority` (`ip_tos2prio`): the `SO_PRIORITY` `IP_TOS` sets, from the
/// TOS field's four bits (RFC 1349): best effort, bulk, interactive, interactive
/// bulk, each with or without "minimize monetary cost".
pub fn tos_to_priority(tos: u8) -> u32 {
    const IP_TOS2PRIO: [u8; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];
    IP_TOS2PRIO[((tos & 0x1e) >> 1) as usize] as u32
}

/// Options a socket carries from `socket(2)` on, before it has a connection. Linux
/// keeps them in `struct sock`/`tcp_sock`; a listener's children inherit them
/// (`sk_clone_lock`, `tcp_create_openreq_child`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SockOptions {
    /// `TCP_NODELAY`.
    pub nodelay: bool,
    /// `TCP_CORK`.
    pub cork: bool,
    /// `SO_SNDBUF` as passed (Linux stores it doubled).
    pub sndbuf: Option<u32>,
    /// `SO_RCVBUF` as passed.
    pub rcvbuf: Option<u32>,
    /// `TCP_MAXSEG` (`user_mss`); 0 when unset.
    pub user_mss: u32,
    /// `TCP_NOTSENT_LOWAT`; 0 when unset.
    pub notsent_lowat: u32,
    /// `tp->reordering` as `tcp_init_sock` set it: `net.ipv4.tcp_reordering` when
    /// `socket(2)` ran (the POSIX layer reads it then), which a listener reports and
    /// its children and a later `connect(2)` keep; `None` reads the sysctl when the
    /// connection is made.
    pub reordering: Option<u32>,
    /// `SO_RCVLOWAT` as last passed; `None` until set (`sk_rcvlowat` 1). Applied
    /// after `SO_RCVBUF`, whichever the application set first.
    pub rcvlowat: Option<i32>,
    /// The largest mark `SO_RCVLOWAT` set while the buffer was not locked: the
    /// receive buffer it grew to (`tcp_set_rcvlowat`; 0 when none).
    pub rcvlowat_grown: u32,
    /// `SO_MAX_PACING_RATE` in bytes per second.
    pub max_pacing_rate: Option<u64>,
    /// `TCP_CONGESTION`.
    pub congestion: Option<String>,
    /// `TCP_USER_TIMEOUT` in milliseconds; 0 when unset.
    pub user_timeout_ms: u32,
    /// `TCP_RTO_MAX_MS` (`icsk_rto_max`); `None` until set
    /// (`net.ipv4.tcp_rto_max_ms`).
    pub rto_max: Option<Duration>,
    /// `TCP_RTO_MIN_US` (`icsk_rto_min`); `None` until set
    /// (`net.ipv4.tcp_rto_min_us`).
    pub rto_min: Option<Duration>,
    /// `TCP_LINGER2` in seconds (-1, 0 when unset, or up to 120).
    pub linger2: i32,
    /// `SO_KEEPALIVE`, `TCP_KEEPIDLE`, `TCP_KEEPINTVL`, `TCP_KEEPCNT`.
    pub keepalive: super::keepalive::Keepalive,
    /// `TCP_INQ` (`tp->recvmsg_inq`): `recvmsg` adds a `TCP_CM_INQ` cmsg.
    pub recvmsg_inq: bool,
    /// `TCP_FASTOPEN`: a listener's Fast Open queue length (`fastopen_queue_tune`).
    pub fastopen_qlen: Option<u32>,
    /// `TCP_FASTOPEN_KEY`: the socket's own keys (else the stack's).
    pub fastopen_key: Option<super::fastopen::FastOpenKeys>,
    /// `TCP_FASTOPEN_CONNECT`: `connect(2)` defers the SYN to the first write.
    pub fastopen_connect: bool,
    /// `TCP_FASTOPEN_NO_COOKIE`: Fast Open without cookies on this socket.
    pub fastopen_no_cookie: bool,
    /// `IPV6_V6ONLY` (`sk_ipv6only`): a listener on the IPv6 wildcard takes IPv6
    /// connections only; without it (Linux's `net.ipv6.bindv6only` default, 0) it
    /// takes IPv4 ones too.
    pub v6only: bool,
    /// `SO_REUSEADDR` (`sk_reuse`): the port may be shared with sockets that set it
    /// too and do not listen (`inet_bind_conflict`).
    pub reuse: bool,
    /// `SO_BINDTODEVICE` / `SO_BINDTOIFINDEX` (`sk_bound_dev_if`): the device the
    /// socket sends on and takes segments from, 0 for any (stack/netdev.rs);
    /// children inherit it (`sk_clone_lock`).
    pub bound_dev_if: u32,
    /// `SO_REUSEPORT` (`sk_reuseport`): sockets that all set it share the port,
    /// listeners as a group the SYNs are spread over (`reuseport_select_sock`).
    pub reuseport: bool,
    /// `IP_RECVERR` (`inet->recverr`): ICMP errors on a synchronized IPv4
    /// connection are hard errors.
    pub recverr: bool,
    /// `IPV6_RECVERR` (`np->recverr`): the same for IPv6, and ICMPv6 errors in
    /// SYN-SENT go on the error queue.
    pub recverr6: bool,
    /// `SO_ZEROCOPY` (`SOCK_ZEROCOPY`).
    pub zerocopy: bool,
    /// `SO_TIMESTAMPING` flags (`sk_tsflags`) set before a connection (no
    /// `SOF_TIMESTAMPING_OPT_ID`, which needs one); children inherit them.
    pub tsflags: u32,
    /// `SO_TIMESTAMP`, `SO_TIMESTAMPNS` and `_NEW` bits of `sk_flags`
    /// (tcp/rx_tstamp.rs); children inherit them (`sk_clone_lock`).
    pub rx_tstamp: super::sock_errqueue::RcvTstamp,
    /// `TCP_SYNCNT` (`icsk_syn_retries`); 0 when unset (the sysctl decides).
    pub syn_retries: u8,
    /// `TCP_THIN_LINEAR_TIMEOUTS` (`tp->thin_lto`).
    pub thin_lto: bool,
    /// `sk_txrehash` as `socket(2)` read `net.core.txrehash` (`inet_create`); `None`:
    /// the sysctl when the connection is made.
    pub txrehash: Option<bool>,
    /// `IPV6_AUTOFLOWLABEL` if set: the IPv6 flow label from the flow's hash
    /// (tcp/flowlabel.rs); `None`: `net.ipv6.auto_flowlabels` decides.
    pub autoflowlabel: Option<bool>,
    /// `np->repflow` as `socket(2)` read `net.ipv6.flowlabel_reflect` (bit 1);
    /// `None`: the sysctl when the connection is made.
    pub repflow: Option<bool>,
    /// `TCP_DEFER_ACCEPT` as SYN-ACK timeouts (`rskq_defer_accept`,
    /// [`secs_to_retrans`]): a listener's requests drop bare final ACKs until then.
    pub defer_accept: u8,
    /// `TCP_QUICKACK` set to 0 (`inet_csk_enter_pingpong_mode`): the connection
    /// starts in pingpong mode (a listener's children inherit it, as
    /// `inet_csk_clone_lock` copies `icsk_ack`).
    pub pingpong: bool,
    /// `SO_MARK` (`sk_mark`): kept and reported; lowtide has no policy routing
    /// for it to select.
    pub mark: u32,
    /// `IP_TOS` (`inet->tos`): the TOS byte of the socket's IPv4 packets; TCP keeps
    /// the two ECN bits its own (`__ip_sock_set_tos`).
    pub tos: u8,
    /// `IP_MTU_DISCOVER` (`inet->pmtudisc`, `IP_PMTUDISC_*`); `None` until set,
    /// which is `inet_create`'s: `IP_PMTUDISC_WANT`, or `IP_PMTUDISC_DONT` under
    /// `net.ipv4.ip_no_pmtu_disc` (the POSIX layer reads it at `socket()`).
    pub pmtudisc: Option<u8>,
    /// `IPV6_MTU_DISCOVER` (`np->pmtudisc`); `None` until set, which is
    /// `inet6_create`'s `IPV6_PMTUDISC_WANT` whatever `ip_no_pmtu_disc` says.
    pub pmtudisc6: Option<u8>,
    /// `IP_FREEBIND`: `bind(2)` may take an address the host does not have
    /// (`inet_can_nonlocal_bind`).
    pub freebind: bool,
    /// `SO_OOBINLINE` (`SOCK_URGINLINE`, a socket flag children inherit).
    pub oobinline: bool,
    /// `IPV6_TCLASS` (`np->tclass`): the traffic class of an AF_INET6 socket's IPv6
    /// packets; TCP keeps the ECN bits its own.
    pub tclass: u8,
    /// `SO_PRIORITY` (`sk_priority`): kept, inherited and reported; `IP_TOS` sets it
    /// from the TOS (`rt_tos2priority`). lowtide's device has no priority bands.
    pub priority: u32,
    /// `IP_TTL` (`inet->uc_ttl`); `None` is -1, `net.ipv4.ip_default_ttl`.
    pub ttl: Option<u8>,
    /// `IPV6_UNICAST_HOPS` (`np->hop_limit`); `None` is -1,
    /// `net.ipv6.conf.all.hop_limit`.
    pub hop_limit: Option<u8>,
    /// `IP_MINTTL` (`inet->min_ttl`): IPv4 segments with a lower TTL are dropped.
    pub min_ttl: u8,
    /// `IPV6_MINHOPCOUNT` (`np->min_hopcount`): the same for IPv6's hop limit.
    pub min_hopcount: u8,
    /// `TCP_TX_DELAY` in microseconds (`tp->tcp_tx_delay`); children inherit it.
    pub tx_delay: u32,
    /// `TCP_SAVE_SYN` (`tp->save_syn`, 0 to 2): a listener keeps each SYN's headers
    /// for its child's `TCP_SAVED_SYN` (tcp/saved_syn.rs).
    pub save_syn: u8,
    /// `TCP_WINDOW_CLAMP` (`tp->window_clamp`): the largest window to offer; 0 when
    /// unset (the route's `window`, else the buffer's, decides).
    pub window_clamp: u32,
    /// The socket is `AF_INET6` (`sk_family`), whatever family its packets are:
    /// `/proc/net/tcp6` lists it, with IPv4-mapped addresses for IPv4 traffic.
    pub family_v6: bool,
    /// `TCP_MD5SIG` / `TCP_MD5SIG_EXT` keys (tcp/md5.rs): a connection takes them
    /// all, a listener's child the one for its peer (`tcp_v4_syn_recv_sock`).
    pub md5: super::md5::Md5Keys,
    /// `sk_shutdown` of a socket without a connection (bit 1 `RCV_SHUTDOWN`, bit 2
    /// `SEND_SHUTDOWN`): `inet_shutdown` sets it in `TCP_CLOSE` even as it fails
    /// with `ENOTCONN`, and nothing clears it but `tcp_disconnect`, so a connection
    /// made from the socket keeps it, and a listener's children inherit it
    /// (`sk_clone_lock` copies the whole sock).
    pub shutdown: u8,
    /// `tp->write_seq` of a socket without a connection: 0 until `tcp_disconnect`
    /// moves it past the last connection's (or a listener's, or a fresh socket's)
    /// sequence space ([`disconnect_write_seq`]); the next connect's SYN starts
    /// there (`tcp_v4_connect`/`tcp_v6_connect`: "if (!tp->write_seq)") instead of
    /// a new ISN, unless a TIME-WAIT socket hands it one (`tcp_twsk_unique`).
    pub write_seq: u32,
    /// What `tcp_disconnect` left of the socket's last connection (its `tcp_info`
    /// in `TCP_CLOSE`, the `rcv_wnd` its next connect starts from); `None` on a
    /// socket never connected.
    pub disconnected: Option<super::disconnect::Disconnected>,
    /// `tp->app_limited` is 1 on a socket without a connection: a send on it
    /// (refused with `EPIPE`) ran `tcp_rate_check_app_limited`, which found
    /// `delivered` and the flight at 0 ([`SockOptions::closed_rate_check_app_limited`]).
    /// The next connect keeps it, so its first ACK (`delivered` 1) does not end the
    /// bubble as it ends `tcp_init_sock`'s `~0U`; `tcp_disconnect` restores `~0U`.
    pub app_limited: bool,
}

/// `tcp_disconnect`'s `write_seq`: "seq = tp->write_seq + tp->max_window + 2", 1
/// where that wraps to 0.
pub fn disconnect_write_seq(write_seq: u32, max_window: u32) -> u32 {
    match write_seq.wrapping_add(max_window).wrapping_add(2) {
        0 => 1,
        seq => seq,
    }
}

impl SockOptions {
    /// What `tcp_disconnect` resets of the options a socket keeps (`connect(2)`
    /// with `AF_UNSPEC`, `shutdown(SHUT_RD)` of a listener): `icsk_rto_min` and
    /// `icsk_delack_max` to their defaults, `window_clamp` 0, `rx_opt` zeroed
    /// (`user_mss`), `inet_csk_delack_init` (pingpong), `sk_shutdown` 0. Its
    /// `write_seq` comes from the connection it ended ([`disconnect_write_seq`]).
    pub fn tcp_disconnect(&mut self) {
        self.app_limited = false; // "There's a bubble in the pipe": ~0U again
        self.rto_min = None;
        self.window_clamp = 0;
        self.user_mss = 0;
        self.pingpong = false;
        self.shutdown = 0;
    }

    /// `tcp_disconnect`'s `write_seq` of a socket without a connection (a fresh or
    /// bound one, a listener): its own `write_seq` plus 2 (`max_window` 0).
    pub fn disconnect_without_conn(&mut self) {
        self.write_seq = disconnect_write_seq(self.write_seq, 0);
    }

    /// `tcp_rate_check_app_limited` of a send on the socket without a connection
    /// (`tcp_sendmsg_locked` runs it before `sk_stream_wait_connect` refuses the
    /// send): its queues are empty, nothing is in flight or lost, `delivered` is 0
    /// and `snd_cwnd` `TCP_INIT_CWND` (`tcp_init_sock`, `tcp_disconnect`), so only
    /// `write_seq - snd_nxt < mss_cache` is left to hold (`tcp_disconnect` moved
    /// `write_seq` `max_window + 2` past `snd_nxt`; `mss_cache` is the last
    /// connection's, `TCP_MSS_DEFAULT` on a socket never connected); then
    /// `app_limited` is `delivered + in flight`, 0, so 1.
    pub fn closed_rate_check_app_limited(&mut self) {
        let d = self.disconnected.as_ref();
        let snd_nxt = d.map_or(0, |d| d.snd_nxt());
        let mss_cache = d.map_or(super::consts::TCP_MSS_DEFAULT, |d| d.mss_cache());
        if self.write_seq.wrapping_sub(snd_nxt) < mss_cache {
            self.app_limited = true;
        }
    }

    /// `tcp_stream_memory_free(sk, wake)` of the socket in `TCP_CLOSE` without a
    /// connection, which is all `__sk_stream_is_writeable` asks of it (its queues
    /// are empty): `write_seq - snd_nxt` as a `u32`, shifted by `wake` (bits shifted
    /// out are lost, as in C), below `tcp_notsent_lowat()` (the socket's
    /// `TCP_NOTSENT_LOWAT`, else the sysctl). `tcp_disconnect` left `write_seq`
    /// `max_window + 2` past the last connection's `snd_nxt` (2 on a socket never
    /// connected, `snd_nxt` 0), so with a sysctl below twice that `tcp_poll` no
    /// longer reports `EPOLLOUT`.
    pub fn closed_stream_memory_free(&self, cfg: &Config, wake: u32) -> bool {
        let snd_nxt = self.disconnected.as_ref().map_or(0, |d| d.snd_nxt());
        let notsent = self.write_seq.wrapping_sub(snd_nxt);
        let lowat = match self.notsent_lowat {
            0 => cfg.tcp_notsent_lowat,
            own => own,
        };
        (notsent << wake) < lowat
    }

    /// `inet_csk_listen_start`'s `inet_csk_delack_init`: a `TCP_QUICKACK` 0 set
    /// before `listen(2)` is forgotten (one set on the listener is inherited).
    pub fn listen_start(&mut self) {
        self.pingpong = false;
    }
}

/// What `tcp_poll` and the ioctls read from a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockStatus {
    /// The state.
    pub state: TcpState,
    /// Bytes ready to read before any urgent mark (`tcp_inq`, `SIOCINQ`).
    pub inq: usize,
    /// `tcp_stream_is_readable` as `tcp_poll` asks it (`EPOLLIN`): at least one byte
    /// beyond an urgent byte the reader sits on, or memory pressure, or a window
    /// shrunk to one segment (`tcp_epollin_ready`).
    pub readable: bool,
    /// `tcp_poll`'s `EPOLLPRI`: the peer's urgent byte arrived, not yet read.
    pub urg_valid: bool,
    /// `SIOCATMARK`: the reader is at the urgent mark.
    pub at_mark: bool,
    /// `tcp_inq_hint`: `rcv_nxt - copied_seq` (a received FIN counts one), and 1
    /// rather than 0 once the FIN is in, telling the reader to read on (to EOF).
    pub inq_hint: u32,
    /// `sk_shutdown & RCV_SHUTDOWN`: the peer's FIN was received or `SHUT_RD`.
    pub rcv_shutdown: bool,
    /// `sk_shutdown & SEND_SHUTDOWN`.
    pub send_shutdown: bool,
    /// A socket error is pending (`sk_err`).
    pub err: bool,
    /// The error queue holds an entry (`tcp_poll`'s `EPOLLERR` too).
    pub err_queue: bool,
    /// `__sk_stream_is_writeable(sk, 1)`.
    pub writeable: bool,
    /// `SIOCOUTQ`: `write_seq - snd_una`, the SYN's and FIN's sequence space
    /// included (a refused connect leaves 1); 0 in SYN-SENT and SYN-RECV.
    pub outq: u64,
    /// `SIOCOUTQNSD`: `write_seq - snd_nxt`; 0 in SYN-SENT and SYN-RECV.
    pub outq_nsd: u64,
    /// How many times `tcp_data_ready` woke the reader (`sk_data_ready`): on
    /// in-order data once `SO_RCVLOWAT` bytes are ready, and on the peer's FIN.
    pub data_ready: u64,
    /// A Fast Open connect waits for the first write (`DEFER_CONNECT`).
    pub defer_connect: bool,
    /// A passive Fast Open child before its handshake (`tcp_passive_fastopen`).
    pub passive_fastopen: bool,
}

impl Tcb {
    /// Applies a socket's options to a new connection before its SYN or SYN-ACK.
    pub(crate) fn apply_options(&mut self, cfg: &Config, o: &SockOptions) {
        self.nodelay = o.nodelay;
        self.bind.reuse = o.reuse;
        self.bind.reuseport = o.reuseport;
        self.bind.v6only = o.v6only;
        self.bind.bound_dev_if = o.bound_dev_if;
        self.recverr = (o.recverr, o.recverr6);
        self.thin_lto = o.thin_lto;
        self.txrehash = o.txrehash.unwrap_or(cfg.txrehash);
        self.autoflowlabel = o.autoflowlabel;
        let reflect = cfg.ipv6_flowlabel_reflect & super::flowlabel::FLOWLABEL_REFLECT_ESTABLISHED;
        self.repflow = o.repflow.unwrap_or(reflect != 0);
        self.cork = o.cork;
        if let Some(b) = o.sndbuf {
            self.set_sndbuf(b);
        }
        if let Some(b) = o.rcvbuf {
            self.set_rcvbuf(b);
        }
        self.notsent_lowat = o.notsent_lowat;
        if let Some(r) = o.reordering {
            self.reordering = r;
        }
        // A listener's clamp reaches its requests (`tcp_openreq_init_rwin`), a closed
        // socket's its SYN (`tcp_connect_init`).
        self.window_clamp = o.window_clamp;
        self.tx_delay = o.tx_delay;
        if let Some(v) = o.rcvlowat {
            let locked = self.rcvbuf_locked.then_some(self.rcvbuf);
            self.rcvlowat = rcvlowat_from_user(cfg, locked, v);
        }
        self.rcvlowat_grow(o.rcvlowat_grown);
        self.linger2 = o.linger2;
        // sk_shutdown: reads end at once, writes fail with EPIPE; no FIN yet.
        self.shut_rd = o.shutdown & 1 != 0;
        self.shut_wr = o.shutdown & 2 != 0;
        self.errq.zerocopy = o.zerocopy;
        if let Some(r) = o.max_pacing_rate {
            self.set_max_pacing_rate(r);
        }
        if let Some(cc) = o
            .congestion
            .as_deref()
            .and_then(|n| super::cong::by_name_cfg(n, cfg))
        {
            self.cc = cc;
        }
        // tcp_mss_clamp: TCP_MAXSEG caps the MSS we advertise and accept.
        if o.user_mss != 0 {
            self.rx_opt.user_mss = o.user_mss;
            self.advmss = self.advmss.min(o.user_mss);
            self.mss_cache = self.mss_cache.min(o.user_mss);
        }
        if o.user_timeout_ms != 0 {
            self.icsk.user_timeout = core::time::Duration::from_millis(o.user_timeout_ms as u64);
        }
        if let Some(d) = o.rto_max {
            self.icsk.rto_max = d;
        }
        if let Some(d) = o.rto_min {
            self.icsk.rto_min = d;
        }
        self.keepalive = o.keepalive;
        self.icsk.syn_retries = o.syn_retries;
        self.req.defer_accept = o.defer_accept;
        self.tstamp.flags = o.tsflags;
        self.tstamp.rx = o.rx_tstamp;
        if o.pingpong {
            self.enter_pingpong_mode(cfg);
        }
        self.urg.inline = o.oobinline;
        self.tfo.connect = o.fastopen_connect;
        self.tfo.no_cookie = o.fastopen_no_cookie;
        self.tos = o.tos & !crate::tcp::ecn::INET_ECN_MASK;
        self.tclass = o.tclass & !crate::tcp::ecn::INET_ECN_MASK;
        (self.uc_ttl, self.hop_limit) = (o.ttl, o.hop_limit);
        (self.min_ttl, self.min_hopcount) = (o.min_ttl, o.min_hopcount);
        self.pmtudisc = o.pmtudisc.unwrap_or(super::pmtu::default_pmtudisc(cfg));
        self.pmtudisc6 = o.pmtudisc6.unwrap_or(super::pmtu::IP_PMTUDISC_WANT);
        self.family_v6 = o.family_v6 || self.tuple.local.is_ipv6();
        self.md5 = o.md5.clone();
    }

    /// `IP_TOS` on a connection (`__ip_sock_set_tos`): the TOS byte less the ECN
    /// bits, which stay TCP's; a change drops the cached route (`sk_dst_reset`), so
    /// the next transmission looks it up again.
    pub(crate) fn set_tos(&mut self, tos: u8) {
        let tos = tos & !crate::tcp::ecn::INET_ECN_MASK;
        if tos != self.tos {
            self.tos = tos;
            self.dst.obsolete = true;
        }
    }

    /// `TCP_TX_DELAY` (`tcp_enable_tx_delay`, Linux 6.18): the delay, microseconds,
    /// added to each departure time from now on. On an established connection a
    /// change moves `srtt` by the difference at once, and with it the RTO
    /// (`tcp_set_rto`, backoff ignored: "best effort"), forgets the min RTT filter
    /// (`minmax_reset(~0U)`) and recomputes the pacing rate, so that TCP need not
    /// learn the emulated RTT sample by sample. Linux's static key, on from the
    /// first non-zero delay, only spares the others the addition.
    pub(crate) fn set_tx_delay(&mut self, cfg: &Config, now: crate::time::Instant, val: u32) {
        let delta = (val as i64 - self.tx_delay as i64) << 3;
        if delta != 0 && self.state == TcpState::Established {
            let e = &mut self.rtt.est;
            e.srtt8 = (e.srtt8 as i64 + delta).clamp(1, u32::MAX as i64) as u32;
            self.rtt.srtt_us = (e.srtt8 >> 3).max(1);
            self.icsk.rto = self.rto_from_estimator();
            self.rtt.min_rtt_us = self.rtt.rtt_min.reset(now.as_millis() as u32, u32::MAX);
            self.update_pacing_rate(cfg);
        }
        self.tx_delay = val;
    }

    /// `IPV6_TCLASS` on a connection (`do_ipv6_setsockopt`): the traffic class of
    /// its IPv6 packets less the ECN bits, which stay TCP's; a change drops the
    /// cached route (`sk_dst_reset`).
    pub(crate) fn set_tclass(&mut self, tclass: u8) {
        let tclass = tclass & !crate::tcp::ecn::INET_ECN_MASK;
        if tclass != self.tclass {
            self.tclass = tclass;
            self.dst.obsolete = true;
        }
    }

    /// The DS field of the connection's packets, ECN bits aside: `IPV6_TCLASS`
    /// (`np->tclass`, `inet6_csk_xmit`) for IPv6 ones, `IP_TOS` (`inet->tos`,
    /// `__ip_queue_xmit`) for IPv4 ones, an AF_INET6 socket's IPv4-mapped traffic
    /// included.
    pub(crate) fn dsfield(&self) -> u8 {
        match self.tuple.local.is_ipv6() {
            true => self.tclass,
            false => self.tos,
        }
    }

    /// The TTL / hop limit of the connection's packets: `IPV6_UNICAST_HOPS` for
    /// IPv6 ones (`ip6_xmit`), `IP_TTL` for IPv4 ones (`ip_select_ttl`), else the
    /// default ([`default_ttl`]).
    pub(crate) fn ip_ttl(&self, cfg: &Config) -> u8 {
        let own = match self.tuple.local.is_ipv6() {
            true => self.hop_limit,
            false => self.uc_ttl,
        };
        own.unwrap_or_else(|| default_ttl(cfg, self.tuple.local.is_ipv6()))
    }

    /// `IP_MINTTL` / `IPV6_MINHOPCOUNT` (`tcp_v4_rcv`, `tcp_v6_rcv`): whether a
    /// segment that arrived with `ttl` is below the socket's minimum.
    pub(crate) fn below_min_ttl(&self, ttl: u8) -> bool {
        match self.tuple.local.is_ipv6() {
            true => ttl < self.min_hopcount,
            false => ttl < self.min_ttl,
        }
    }

    /// `TCP_MAXSEG` getsockopt: `mss_cache`, or `user_mss` in CLOSE/LISTEN.
    pub(crate) fn maxseg(&self) -> u32 {
        if self.rx_opt.user_mss != 0 && matches!(self.state, TcpState::Closed | TcpState::Listen) {
            self.rx_opt.user_mss
        } else {
            self.mss_cache
        }
    }

    /// `__tcp_sock_set_cork`: clearing the cork pushes what it held, with
    /// `TCP_NAGLE_PUSH` set in `tp->nonagle` if `TCP_NODELAY` is on (else Nagle
    /// decides).
    pub(crate) fn set_cork(&mut self, ctx: &mut Ctx, on: bool) {
        self.cork = on;
        if !on {
            if self.nodelay {
                self.nonagle_push = true;
            }
            self.write_xmit(ctx); // tcp_push_pending_frames
        }
    }

    /// `__tcp_sock_set_nodelay`: turning it on sets `TCP_NAGLE_OFF` and
    /// `TCP_NAGLE_PUSH` in `tp->nonagle` and pushes; the push bit stays until the
    /// writer starts a new skb.
    pub(crate) fn set_nodelay(&mut self, ctx: &mut Ctx, on: bool) {
        self.nodelay = on;
        if on {
            self.nonagle_push = true;
            self.write_xmit(ctx); // tcp_push_pending_frames
        }
    }

    /// What `tcp_poll` and `tcp_ioctl` need; `mem_pressure` is the stack's
    /// `tcp_under_memory_pressure`.
    pub(crate) fn status(&self, cfg: &Config, mem_pressure: bool) -> SockStatus {
        let closed = self.state == TcpState::Closed;
        // tcp_ioctl: SIOCOUTQ and SIOCOUTQNSD are 0 during the handshake, else plain
        // differences of sequence numbers, whatever the state.
        let handshake = matches!(self.state, TcpState::SynSent | TcpState::SynRecv);
        let outq = |upto: u64| match handshake {
            true => 0,
            false => self.write_seq.saturating_sub(upto),
        };
        SockStatus {
            state: self.state,
            inq: self.inq(),
            readable: self.poll_readable(mem_pressure),
            urg_valid: self.urg_valid(),
            at_mark: self.at_mark(),
            inq_hint: self.inq_hint(),
            rcv_shutdown: self.rcv_shutdown || self.shut_rd || closed,
            send_shutdown: self.shut_wr || closed,
            err: self.sk_err.is_some(),
            err_queue: self.errq.has_entries(),
            writeable: self.is_writeable(cfg),
            outq: outq(self.snd_una),
            outq_nsd: outq(self.snd_nxt),
            data_ready: self.data_ready_count,
            defer_connect: self.tfo.defer_connect,
            passive_fastopen: self.passive_fastopen(),
        }
    }

    /// `tcp_inq`: the bytes queued, or only those before the urgent byte while one
    /// lies ahead in the queue (not `SO_OOBINLINE`); 0 before the handshake ends.
    fn inq(&self) -> usize {
        if matches!(self.state, TcpState::SynSent | TcpState::SynRecv) {
            return 0;
        }
        let u = &self.urg;
        if u.inline || u.data == 0 || u.seq < self.copied_seq || u.seq >= self.rcv_nxt {
            self.rcv_queue.len()
        } else {
            (u.seq - self.copied_seq) as usize
        }
    }

    /// `tcp_stream_is_readable` as `tcp_poll` asks it: its target is `sock_rcvlowat`,
    /// one more when the reader sits on an urgent byte it will skip.
    fn poll_readable(&self, mem_pressure: bool) -> bool {
        let mut target = self.rcvlowat as usize;
        if self.urg.data != 0 && self.urg.seq == self.copied_seq && !self.urg.inline {
            target += 1;
        }
        self.epollin_ready(target, mem_pressure)
    }

    /// `tcp_epollin_ready`: `target` bytes to read, or memory pressure
    /// (`tcp_rmem_pressure`), or a receive window down to one segment.
    pub(crate) fn epollin_ready(&self, target: usize, mem_pressure: bool) -> bool {
        let avail = self.rcv_queue.len();
        if avail == 0 {
            return false;
        }
        let rcvbuf = self.rcvbuf as u64;
        let rmem_pressure = mem_pressure || self.rmem_alloc() > rcvbuf - (rcvbuf >> 3);
        avail >= target || rmem_pressure || self.receive_window() <= self.ack.rcv_mss
    }

    /// `SO_RCVLOWAT` (`sock_setsockopt`, then `tcp_set_rcvlowat`): a negative value
    /// is `INT_MAX`; capped at half the buffer (`SO_RCVBUF`'s if locked, else
    /// `tcp_rmem[2]`'s), 0 is 1; a reader already satisfied is woken
    /// (`tcp_data_ready`, in any state: a closed socket that took the peer's FIN,
    /// `SOCK_DONE`, or that holds enough unread bytes is woken too); an unlocked
    /// buffer grows to hold the mark, with `window_clamp` the mark.
    pub(crate) fn set_rcvlowat(&mut self, ctx: &mut Ctx, val: i32) {
        self.rcvlowat_apply(ctx.cfg, val);
        self.data_ready(ctx);
    }

    /// `tcp_set_rcvlowat` without the wakeup.
    fn rcvlowat_apply(&mut self, cfg: &Config, val: i32) {
        let locked = self.rcvbuf_locked.then_some(self.rcvbuf);
        self.rcvlowat = rcvlowat_from_user(cfg, locked, val);
        // The mark before `val ? : 1`: 0 asks for no buffer.
        self.rcvlowat_grow(self.rcvlowat * (val != 0) as u32);
    }

    /// `tcp_set_rcvlowat`'s end: an unlocked buffer grows to hold the mark `val`
    /// (`tcp_space_from_win`), and a `window_clamp` already set but below the mark
    /// rises to it (as Linux 6.18 and its stable trees; earlier kernels set it).
    fn rcvlowat_grow(&mut self, val: u32) {
        if self.rcvbuf_locked {
            return;
        }
        let space = self.space_from_win(val as u64);
        if space > self.rcvbuf as u64 {
            self.rcvbuf = space as u32;
            if self.window_clamp != 0 && self.window_clamp < val {
                self.window_clamp = val;
            }
        }
    }

    /// `tcp_inq_hint` (tcp.h): what `TCP_CM_INQ` reports.
    fn inq_hint(&self) -> u32 {
        let inq = self.rcv_nxt.saturating_sub(self.copied_seq) as u32;
        // "After receiving a FIN, tell the user-space to continue reading by
        // returning a non-zero inq" (SOCK_DONE).
        if inq == 0 && self.rcv_shutdown {
            1
        } else {
            inq
        }
    }

    /// `tcp_poll` found the socket not writable: set `SOCK_NOSPACE` so the next
    /// freed space wakes the poller (`sk_stream_write_space`).
    pub(crate) fn mark_nospace(&mut self) {
        self.nospace = true;
    }
}

/// `secs_to_retrans` (tcp.c): `TCP_DEFER_ACCEPT`'s seconds as the number of SYN-ACK
/// timeouts, from `TCP_TIMEOUT_INIT` (1 s) doubling up to `TCP_RTO_MAX` (120 s), that
/// cover them; 0 for none, at most 255.
pub fn secs_to_retrans(seconds: i32) -> u8 {
    let (mut timeout, rto_max) = (1i32, 120i32);
    if seconds <= 0 {
        return 0;
    }
    let (mut period, mut res) = (timeout, 1u8);
    while seconds > period && res < 255 {
        res += 1;
        timeout = (timeout << 1).min(rto_max);
        period += timeout;
    }
    res
}

/// `retrans_to_secs` (tcp.c): what `getsockopt(TCP_DEFER_ACCEPT)` reports, the
/// seconds `retrans` SYN-ACK timeouts take.
pub fn retrans_to_secs(retrans: u8) -> i32 {
    let (mut timeout, rto_max) = (1i32, 120i32);
    if retrans == 0 {
        return 0;
    }
    let mut period = timeout;
    for _ in 1..retrans {
        timeout = (timeout << 1).min(rto_max);
        period += timeout;
    }
    period
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disconnect_write_seq_skips_zero() {
        // tcp_disconnect: "seq = tp->write_seq + tp->max_window + 2; if (!seq) seq = 1".
        assert_eq!(disconnect_write_seq(1001, 65792), 66795);
        assert_eq!(disconnect_write_seq(u32::MAX - 1, 0), 1);
        assert_eq!(disconnect_write_seq(u32::MAX, 0), 1);
    }

    #[test]
    fn closed_socket_memory_free_against_lowat() {
        // tcp_stream_memory_free: "(notsent_bytes << wake) < tcp_notsent_lowat(tp)",
        // u32 arithmetic; a socket never connected counts from snd_nxt 0.
        let mut cfg = Config::default();
        let mut o = SockOptions {
            write_seq: 65537,
            ..SockOptions::default()
        };
        assert!(o.closed_stream_memory_free(&cfg, 1), "sysctl UINT_MAX");
        cfg.tcp_notsent_lowat = 131074;
        assert!(!o.closed_stream_memory_free(&cfg, 1));
        assert!(o.closed_stream_memory_free(&cfg, 0));
        o.notsent_lowat = 131075;
        assert!(
            o.closed_stream_memory_free(&cfg, 1),
            "the socket's own lowat"
        );
        // The shift drops the top bit: 2^31 + 1 unsent shifts to 2.
        o.write_seq = (1 << 31) + 1;
        assert!(o.closed_stream_memory_free(&cfg, 1));
        assert!(!o.closed_stream_memory_free(&cfg, 0));
    }

    #[test]
    fn closed_send_marks_app_limited_unless_write_seq_ran_ahead() {
        // tcp_rate_check_app_limited on a socket without a connection: only
        // "write_seq - snd_nxt < mss_cache" can fail (u32 arithmetic).
        let mut fresh = SockOptions::default();
        fresh.closed_rate_check_app_limited();
        assert!(fresh.app_limited, "0 - 0 < TCP_MSS_DEFAULT");
        fresh.tcp_disconnect();
        assert!(!fresh.app_limited, "tcp_disconnect: ~0U again");
        // After a connection: write_seq max_window + 2 past its snd_nxt.
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        (t.snd_nxt, t.mss_cache) = (1001, 1000);
        let snd_nxt = t.snd_seq(t.snd_nxt).0;
        let mut o = SockOptions {
            disconnected: Some(t.disconnected(crate::time::Instant::ZERO)),
            ..SockOptions::default()
        };
        o.write_seq = disconnect_write_seq(snd_nxt, 997);
        o.closed_rate_check_app_limited();
        assert!(o.app_limited, "999 < 1000");
        o.app_limited = false;
        o.write_seq = disconnect_write_seq(snd_nxt, 998);
        o.closed_rate_check_app_limited();
        assert!(!o.app_limited, "1000 is a whole segment to send");
    }

    #[test]
    fn linger2_as_do_tcp_setsockopt_and_getsockopt() {
        assert_eq!(linger2_from_user(-5), -1);
        assert_eq!(linger2_from_user(0), 0);
        assert_eq!(linger2_from_user(30), 30);
        assert_eq!(linger2_from_user(1000), TCP_FIN_TIMEOUT_MAX_SECS);
        assert_eq!(linger2_to_user(0, 60), 60, "unset: the sysctl");
        assert_eq!(linger2_to_user(-1, 60), -1);
        assert_eq!(linger2_to_user(7, 60), 7);
    }

    #[test]
    fn maxseg_reads_user_mss_only_before_the_connection() {
        // do_tcp_getsockopt TCP_MAXSEG: user_mss in CLOSE/LISTEN, else mss_cache.
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.apply_options(
            &cfg,
            &SockOptions {
                user_mss: 1100,
                ..SockOptions::default()
            },
        );
        assert_eq!(t.maxseg(), 1100);
        assert_eq!(t.advmss, 1100, "tcp_mss_clamp caps the advertised MSS");
        t.state = TcpState::Established;
        t.mss_cache = 1000;
        assert_eq!(t.maxseg(), 1000);
    }

    /// tcp_enable_tx_delay: on an established connection a change moves srtt by
    /// the difference, recomputes the RTO and empties the min RTT filter; in any
    /// other state only the value changes.
    #[test]
    fn tx_delay_moves_srtt_of_an_established_connection() {
        let cfg = Config::default();
        let now = crate::time::Instant::from_nanos(5_000_000_000);
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::Established;
        t.rtt_sample(100_000);
        t.rtt.min_rtt_us = 100_000;
        let (srtt, rto) = (t.rtt.srtt_us, t.icsk.rto);
        t.set_tx_delay(&cfg, now, 30_000);
        assert_eq!(t.rtt.srtt_us, srtt + 30_000);
        assert_eq!(t.icsk.rto, rto + Duration::from_millis(30));
        assert_eq!(t.rtt.min_rtt_us, u32::MAX, "minmax_reset(~0U)");
        t.set_tx_delay(&cfg, now, 10_000);
        assert_eq!(t.rtt.srtt_us, srtt + 10_000, "down by the difference");
        t.set_tx_delay(&cfg, now, 10_000);
        assert_eq!(t.rtt.srtt_us, srtt + 10_000, "no change, no move");
        let mut c = Tcb::for_test(&cfg);
        c.set_tx_delay(&cfg, now, 50_000);
        assert_eq!((c.tx_delay, c.rtt.srtt_us), (50_000, 0), "not established");
        assert_eq!(tx_delay_from_user((1 << 28) - 1), Some((1 << 28) - 1));
        assert_eq!(tx_delay_from_user(1 << 28), None);
        assert_eq!(tx_delay_from_user(-1), None);
    }

    /// tcp_inq_hint: unread in-order bytes plus an unread FIN; 1 once a FIN is in
    /// and everything before it was read; 0 with nothing to read and no FIN.
    #[test]
    fn inq_hint_counts_unread_bytes_and_the_fin() {
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::Established;
        t.copied_seq = 1;
        t.rcv_nxt = 1;
        assert_eq!(t.status(&cfg, false).inq_hint, 0);
        t.rcv_nxt = 10_001;
        assert_eq!(t.status(&cfg, false).inq_hint, 10_000);
        t.copied_seq = 10_001;
        assert_eq!(t.status(&cfg, false).inq_hint, 0);
        t.rcv_nxt = 10_002; // tcp_fin
        t.rcv_shutdown = true;
        assert_eq!(t.status(&cfg, false).inq_hint, 1);
        t.copied_seq = 10_002; // a reader that consumed the FIN (found_fin_ok)
        assert_eq!(t.status(&cfg, false).inq_hint, 1);
    }

    /// sock_setsockopt + tcp_set_rcvlowat: negative is INT_MAX, the cap is half the
    /// locked buffer or half of tcp_rmem[2], 0 is 1.
    #[test]
    fn rcvlowat_from_user_caps_and_floors() {
        let cfg = Config::default();
        let half_rmem2 = cfg.tcp_rmem[2] >> 1;
        assert_eq!(rcvlowat_from_user(&cfg, None, 0), 1);
        assert_eq!(rcvlowat_from_user(&cfg, None, 3000), 3000);
        assert_eq!(rcvlowat_from_user(&cfg, None, -1), half_rmem2);
        assert_eq!(rcvlowat_from_user(&cfg, None, i32::MAX), half_rmem2);
        assert_eq!(rcvlowat_from_user(&cfg, Some(32768), 20_000), 16384);
    }

    /// tcp_set_rcvlowat: an unlocked buffer grows to hold the mark; window_clamp
    /// rises to the mark only when already set and below it; a locked buffer and
    /// a 0 mark leave both alone.
    #[test]
    fn rcvlowat_grows_an_unlocked_buffer_and_a_set_clamp() {
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        let rcvbuf = t.rcvbuf;
        t.rcvlowat_apply(&cfg, 0);
        assert_eq!((t.rcvlowat, t.rcvbuf, t.window_clamp), (1, rcvbuf, 0));
        t.rcvlowat_apply(&cfg, 4 << 20);
        assert_eq!(t.rcvbuf as u64, t.space_from_win(4 << 20));
        assert_eq!(t.window_clamp, 0, "an unset clamp stays unset");
        t.window_clamp = 65535;
        t.rcvlowat_apply(&cfg, 5 << 20);
        assert_eq!(t.window_clamp, 5 << 20);
        t.rcvlowat_apply(&cfg, 1000);
        assert_eq!((t.rcvlowat, t.window_clamp), (1000, 5 << 20), "no shrink");
        let mut l = Tcb::for_test(&cfg);
        l.set_rcvbuf(8192);
        l.rcvlowat_apply(&cfg, 1 << 20);
        assert_eq!(
            (l.rcvlowat, l.rcvbuf),
            (8192, 16384),
            "locked: capped, kept"
        );
    }

    /// tcp_poll's target is sk_rcvlowat: below it no EPOLLIN, unless the window is
    /// down to a segment or memory is short.
    #[test]
    fn poll_reads_readable_at_the_mark() {
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::Established;
        (t.rcv_wnd, t.ack.rcv_mss) = (65535, 1000);
        t.rcv_queue.push(bytes::Bytes::from(vec![0u8; 1000]), 2304);
        assert!(t.status(&cfg, false).readable);
        t.rcvlowat = 3000;
        assert!(!t.status(&cfg, false).readable);
        assert!(t.status(&cfg, true).readable, "tcp_rmem_pressure");
        t.rcv_wnd = 1000;
        assert!(
            t.status(&cfg, false).readable,
            "a window down to one segment"
        );
        t.rcv_wnd = 65535;
        t.rcv_queue.push(bytes::Bytes::from(vec![0u8; 2000]), 4352);
        assert!(t.status(&cfg, false).readable);
    }
}
