//! `setsockopt(2)` (`sock_setsockopt`, `do_ip_setsockopt`, `do_ipv6_setsockopt`,
//! `do_tcp_setsockopt`) and `struct tcp_info` in Linux's byte layout; the getters
//! are in posix/getsockopt.rs.

use super::consts::*;
use super::timeo::timeout_from_user;
use super::{err, Errno, Fd, Host, SockState};
use crate::tcp::consts::{MAX_TCP_WINDOW, TCP_MIN_MSS};
use crate::tcp::fastopen::{FastOpenKeys, TFO_CLIENT_ENABLE};
use crate::tcp::info::TcpInfo;
use crate::tcp::keepalive::{Keepalive, MAX_TCP_KEEPCNT, MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL};
use crate::tcp::md5::Md5Error;
use crate::tcp::sockopt::{rcvlowat_from_user, tos_to_priority, MAX_TCP_SYNCNT};
use crate::time::Instant;
use crate::TcpState;

/// `sizeof(struct tcp_info)` in Linux 6.x (through `tcpi_accecn_opt_seen`).
pub const TCP_INFO_LEN: usize = 280;
/// `sizeof(u32) * SK_MEMINFO_VARS`.
pub const SK_MEMINFO_LEN: usize = 36;
/// `TCP_CA_NAME_MAX`.
pub(super) const TCP_CA_NAME_MAX: usize = 16;

/// `SO_KEEPALIVE` (`sock_setsockopt`) or one of `TCP_KEEPIDLE`, `TCP_KEEPINTVL`,
/// `TCP_KEEPCNT` (`do_tcp_setsockopt`, `EINVAL` out of range) applied to `ka`.
fn keepalive_opt(level: i32, name: i32, v: i32, mut ka: Keepalive) -> Result<Keepalive, Errno> {
    let in_range = |max: u32| (1..=max as i32).contains(&v);
    let secs = Some(core::time::Duration::from_secs(v.max(0) as u64));
    match (level, name) {
        (SOL_SOCKET, _) => ka.enabled = v != 0,
        (_, TCP_KEEPIDLE) if in_range(MAX_TCP_KEEPIDLE) => ka.idle = secs,
        (_, TCP_KEEPINTVL) if in_range(MAX_TCP_KEEPINTVL) => ka.interval = secs,
        (_, TCP_KEEPCNT) if in_range(MAX_TCP_KEEPCNT as u32) => ka.probes = Some(v as u8),
        _ => return err(errno::EINVAL),
    }
    Ok(ka)
}

pub(super) fn int_arg(val: &[u8]) -> Result<i32, Errno> {
    // sock_setsockopt/do_tcp_setsockopt: optlen < sizeof(int) is EINVAL.
    let b: [u8; 4] = val
        .get(..4)
        .and_then(|s| s.try_into().ok())
        .ok_or(Errno(errno::EINVAL))?;
    Ok(i32::from_ne_bytes(b))
}

/// `sk_setsockopt`'s `SO_SNDBUF` / `SO_RCVBUF` before doubling: at most `max`
/// (`net.core.wmem_max` / `rmem_max`), compared unsigned, so a negative value is
/// `max`; with `force` (`SO_SNDBUFFORCE`, `SO_RCVBUFFORCE`) no cap, a negative value
/// 0. Either way at most `INT_MAX / 2`, so that the doubled value stays an int.
fn buf_from_user(val: i32, force: bool, max: u32) -> u32 {
    let v = match force {
        true => val.max(0) as u32,
        false => (val as u32).min(max),
    };
    v.min(i32::MAX as u32 / 2)
}

/// `do_ip_setsockopt`'s integer: an int when `optlen >= sizeof(int)`, else one
/// unsigned byte (`optlen >= 1`), else the 0 `val` starts as.
fn ip_int_arg(val: &[u8]) -> Result<i32, Errno> {
    match val.len() {
        0 => Ok(0),
        1..=3 => Ok(val[0] as i32),
        _ => int_arg(val),
    }
}

/// [`ip_int_arg`] for the options `do_ip_setsockopt` checks `optlen < 1` for
/// (`IP_TTL`, `IP_MINTTL`, `IP_FREEBIND`): `EINVAL` without a byte.
fn ip_byte_arg(val: &[u8]) -> Result<i32, Errno> {
    match val.is_empty() {
        true => err(errno::EINVAL),
        false => ip_int_arg(val),
    }
}

/// The length rule that comes before any option's own: `sk_setsockopt` reads an
/// int for every option but `SO_BINDTODEVICE`, and `do_tcp_setsockopt` for every
/// one but its strings (`TCP_CONGESTION`, `TCP_ULP`, `TCP_FASTOPEN_KEY`), so a
/// shorter `optlen` is `EINVAL` whatever the option, one unknown or read-only too.
fn int_optlen_first(level: i32, name: i32, len: usize) -> Result<(), Errno> {
    let reads_int = match level {
        SOL_SOCKET => name != SO_BINDTODEVICE,
        SOL_TCP => !matches!(name, TCP_CONGESTION | TCP_ULP | TCP_FASTOPEN_KEY),
        _ => false,
    };
    match reads_int && len < 4 {
        true => err(errno::EINVAL),
        false => Ok(()),
    }
}

/// `IP_MTU_DISCOVER` / `IPV6_MTU_DISCOVER`: `IP_PMTUDISC_DONT` to
/// `IP_PMTUDISC_OMIT` (`IPV6_PMTUDISC_*` are the same numbers), else `EINVAL`.
fn pmtudisc_arg(v: i32) -> Result<u8, Errno> {
    match (IP_PMTUDISC_DONT..=IP_PMTUDISC_OMIT).contains(&v) {
        true => Ok(v as u8),
        false => err(errno::EINVAL),
    }
}

/// `do_tcp_setsockopt(TCP_CONGESTION)`'s name: `EINVAL` for an empty `optlen`, else
/// at most `TCP_CA_NAME_MAX - 1` bytes up to a NUL (`strncpy_from_sockptr`).
fn congestion_name(val: &[u8]) -> Result<&[u8], Errno> {
    if val.is_empty() {
        return err(errno::EINVAL);
    }
    let name = &val[..val.len().min(TCP_CA_NAME_MAX - 1)];
    Ok(name.split(|&c| c == 0).next().unwrap_or_default())
}

/// `do_ip_getsockopt`'s answer: an int, or one byte when the caller's buffer is
/// shorter than an int and the value fits (`len < sizeof(int) && val >= 0 &&
/// val <= 255`).
pub(super) fn ip_int_out(out: &mut [u8], v: i32) -> usize {
    if out.len() < 4 && (0..=255).contains(&v) && !out.is_empty() {
        out[0] = v as u8;
        return 1;
    }
    put(out, &v.to_ne_bytes())
}

pub(super) fn put(out: &mut [u8], bytes: &[u8]) -> usize {
    let n = out.len().min(bytes.len());
    out[..n].copy_from_slice(&bytes[..n]);
    n
}

/// Linux's `TCP_*` state number (`include/net/tcp_states.h`).
pub fn linux_state(s: TcpState) -> u8 {
    match s {
        TcpState::Established => 1,
        TcpState::SynSent => 2,
        TcpState::SynRecv => 3,
        TcpState::FinWait1 => 4,
        TcpState::FinWait2 => 5,
        TcpState::TimeWait => 6,
        TcpState::Closed => 7,
        TcpState::CloseWait => 8,
        TcpState::LastAck => 9,
        TcpState::Listen => 10,
        TcpState::Closing => 11,
    }
}

fn ca_state_num(name: &str) -> u8 {
    match name {
        "Disorder" => 1,
        "CWR" => 2,
        "Recovery" => 3,
        "Loss" => 4,
        _ => 0,
    }
}

/// Encodes `info` as Linux's `struct tcp_info` (`tcp_get_info`), 280 bytes.
pub fn encode_tcp_info(i: &TcpInfo, state: u8) -> [u8; TCP_INFO_LEN] {
    let mut b = [0u8; TCP_INFO_LEN];
    let u32s = |b: &mut [u8; TCP_INFO_LEN], off: usize, v: u64| {
        b[off..off + 4].copy_from_slice(&(v.min(u32::MAX as u64) as u32).to_ne_bytes())
    };
    let u64s = |b: &mut [u8; TCP_INFO_LEN], off: usize, v: u64| {
        b[off..off + 8].copy_from_slice(&v.to_ne_bytes())
    };
    b[0] = state;
    b[1] = ca_state_num(i.ca_state);
    b[2] = i.retransmits;
    b[3] = i.probes;
    b[4] = i.backoff.min(255) as u8;
    b[5] = i.options;
    b[6] = (i.snd_wscale & 0xf) | (i.rcv_wscale & 0xf) << 4;
    b[7] = i.delivery_rate_app_limited as u8 | (i.fastopen_client_fail & 3) << 1;
    u32s(&mut b, 8, i.rto);
    u32s(&mut b, 12, i.ato as u64);
    u32s(&mut b, 16, i.snd_mss as u64);
    u32s(&mut b, 20, i.rcv_mss as u64);
    u32s(&mut b, 24, i.unacked as u64);
    u32s(&mut b, 28, i.sacked as u64);
    u32s(&mut b, 32, i.lost as u64);
    u32s(&mut b, 36, i.retrans as u64);
    // 40: tcpi_fackets, always 0 since Linux 4.15.
    u32s(&mut b, 44, i.last_data_sent);
    // 48: tcpi_last_ack_sent, "not remembered" by Linux either.
    u32s(&mut b, 52, i.last_data_recv);
    u32s(&mut b, 56, i.last_ack_recv);
    u32s(&mut b, 60, i.pmtu as u64);
    u32s(&mut b, 64, i.rcv_ssthresh as u64);
    u32s(&mut b, 68, i.rtt as u64);
    u32s(&mut b, 72, i.rttvar as u64);
    u32s(&mut b, 76, i.snd_ssthresh as u64);
    u32s(&mut b, 80, i.snd_cwnd as u64);
    u32s(&mut b, 84, i.advmss as u64);
    u32s(&mut b, 88, i.reordering as u64);
    u32s(&mut b, 92, i.rcv_rtt as u64);
    u32s(&mut b, 96, i.rcv_space as u64);
    u32s(&mut b, 100, i.total_retrans as u64);
    u64s(&mut b, 104, i.pacing_rate);
    u64s(&mut b, 112, i.max_pacing_rate);
    u64s(&mut b, 120, i.bytes_acked);
    u64s(&mut b, 128, i.bytes_received);
    u32s(&mut b, 136, i.segs_out);
    u32s(&mut b, 140, i.segs_in);
    u32s(&mut b, 144, i.notsent_bytes);
    u32s(&mut b, 148, i.min_rtt as u64);
    u32s(&mut b, 152, i.data_segs_in);
    u32s(&mut b, 156, i.data_segs_out);
    u64s(&mut b, 160, i.delivery_rate);
    u64s(&mut b, 168, i.busy_time);
    u64s(&mut b, 176, i.rwnd_limited);
    u64s(&mut b, 184, i.sndbuf_limited);
    u32s(&mut b, 192, i.delivered);
    u32s(&mut b, 196, i.delivered_ce);
    u64s(&mut b, 200, i.bytes_sent);
    u64s(&mut b, 208, i.bytes_retrans);
    u32s(&mut b, 216, i.dsack_dups);
    u32s(&mut b, 220, i.reord_seen as u64);
    u32s(&mut b, 224, i.rcv_ooopack);
    b[240..242].copy_from_slice(&(i.total_rto.min(u16::MAX as u32) as u16).to_ne_bytes());
    b[242..244]
        .copy_from_slice(&(i.total_rto_recoveries.min(u16::MAX as u32) as u16).to_ne_bytes());
    u32s(&mut b, 244, i.total_rto_time);
    u32s(&mut b, 236, i.rehash as u64);
    u32s(&mut b, 228, i.snd_wnd as u64);
    u32s(&mut b, 232, i.rcv_wnd as u64);
    // Linux 6.18's AccECN fields, its last word two __u16s: tcpi_accecn_fail_mode
    // and tcpi_accecn_opt_seen (6.19 packs them with tcpi_ecn_mode in bit fields).
    u32s(&mut b, 248, i.received_ce as u64);
    u32s(&mut b, 252, i.delivered_e1_bytes as u64);
    u32s(&mut b, 256, i.delivered_e0_bytes as u64);
    u32s(&mut b, 260, i.delivered_ce_bytes as u64);
    u32s(&mut b, 264, i.received_e1_bytes as u64);
    u32s(&mut b, 268, i.received_e0_bytes as u64);
    u32s(&mut b, 272, i.received_ce_bytes as u64);
    b[276..278].copy_from_slice(&(i.accecn_fail_mode as u16).to_ne_bytes());
    b[278..280].copy_from_slice(&(i.accecn_opt_seen as u16).to_ne_bytes());
    b
}

impl Host {
    /// `setsockopt(2)`. Unsupported options fail with `ENOPROTOOPT`.
    pub fn setsockopt(
        &mut self,
        now: Instant,
        fd: Fd,
        level: i32,
        name: i32,
        val: &[u8],
    ) -> Result<(), Errno> {
        self.sock(fd)?;
        int_optlen_first(level, name, val.len())?;
        if let Some(r) = self.set_timestamp_option(fd, level, name, val) {
            return r;
        }
        let conn = self.conn(fd)?;
        let listener = match self.sock(fd)?.state {
            SockState::Listening(h) => Some(h),
            _ => None,
        };
        let tcp_close = self.in_tcp_close(fd)?;
        let stack = &mut self.stack;
        let s = match self.files.get_mut(&fd) {
            Some(super::File::Socket(s)) => s,
            _ => return err(errno::ENOTSOCK),
        };
        let e = |r: Result<(), crate::SocketError>| r.map_err(Errno::from);
        // do_tcp_setsockopt: the TFO options want TCP_CLOSE (no connection yet, or
        // one that ended) or, but TCP_FASTOPEN_CONNECT, TCP_LISTEN.
        let close_or_listen = tcp_close || listener.is_some();
        match (level, name) {
            (SOL_TCP, TCP_FASTOPEN_KEY) => {
                // Any state; 16 bytes (a primary key) or 32 (and a backup).
                let keys = FastOpenKeys::from_bytes(val).ok_or(Errno(errno::EINVAL))?;
                s.opts.fastopen_key = Some(keys);
            }
            (SOL_TCP, TCP_FASTOPEN) => {
                let v = int_arg(val)?;
                if v < 0 || !close_or_listen {
                    return err(errno::EINVAL);
                }
                stack.fastopen_init_key_once();
                // fastopen_queue_tune: min(val, somaxconn) now, as max_qlen.
                s.opts.fastopen_qlen = Some((v as u32).min(stack.config().somaxconn));
                if let Some(h) = listener {
                    e(stack.socket(h).set_fastopen_qlen(v as u32))?;
                }
            }
            (SOL_TCP, TCP_FASTOPEN_CONNECT) => {
                let v = int_arg(val)?;
                if !(0..=1).contains(&v) {
                    return err(errno::EINVAL);
                }
                if stack.config().tcp_fastopen & TFO_CLIENT_ENABLE == 0 {
                    return err(errno::EOPNOTSUPP);
                }
                if !tcp_close {
                    return err(errno::EINVAL);
                }
                s.opts.fastopen_connect = v == 1;
            }
            (SOL_TCP, TCP_FASTOPEN_NO_COOKIE) => {
                let v = int_arg(val)?;
                if !(0..=1).contains(&v) || !close_or_listen {
                    return err(errno::EINVAL);
                }
                s.opts.fastopen_no_cookie = v == 1;
            }
            // sock_setsockopt: sk_reuse and sk_reuseport, in any state.
            (SOL_SOCKET, SO_REUSEADDR | SO_REUSEPORT) => {
                let on = int_arg(val)? != 0;
                match name {
                    SO_REUSEADDR => s.opts.reuse = on,
                    _ => s.opts.reuseport = on,
                }
                if let Some(h) = conn.or(listener) {
                    stack.set_reuse(h, s.opts.reuse, s.opts.reuseport);
                }
            }
            // do_ip_setsockopt (an AF_INET6 socket takes SOL_IP too: ipv6_setsockopt
            // hands it to ip_setsockopt, for its IPv4-mapped traffic). These take an
            // int or, shorter, one byte (`ip_setsockopt`'s `optlen >= 1` rule).
            (SOL_IP, IP_TOS) => {
                let v = ip_int_arg(val)?;
                // __ip_sock_set_tos: a changed TOS sets sk_priority from it.
                let tos = (v as u8) & !3 | s.opts.tos & 3;
                if tos != s.opts.tos {
                    s.opts.priority = tos_to_priority(tos);
                }
                s.opts.tos = tos;
                if let Some(h) = conn {
                    e(stack.socket(h).set_ip_tos(v as u8))?;
                }
            }
            (SOL_IP, IP_MTU_DISCOVER) => {
                let v = pmtudisc_arg(ip_int_arg(val)?)?;
                s.opts.pmtudisc = Some(v);
                if let Some(h) = conn {
                    e(stack.socket(h).set_pmtudisc(v))?;
                }
            }
            // do_ipv6_setsockopt (lockless): a whole int.
            (IPPROTO_IPV6, IPV6_MTU_DISCOVER) if s.family == AF_INET6 => {
                s.opts.pmtudisc6 = Some(pmtudisc_arg(int_arg(val)?)?);
                if let (Some(h), Some(v)) = (conn, s.opts.pmtudisc6) {
                    e(stack.socket(h).set_pmtudisc6(v))?;
                }
            }
            (SOL_IP, IP_FREEBIND) => s.opts.freebind = ip_byte_arg(val)? != 0,
            // inet->recverr / np->recverr (IPV6_RECVERR wants a whole int); a 0
            // purges the error queue's ICMP entries.
            (SOL_IP, IP_RECVERR) | (IPPROTO_IPV6, IPV6_RECVERR)
                if level == SOL_IP || s.family == AF_INET6 =>
            {
                let on = match level {
                    SOL_IP => ip_int_arg(val)?,
                    _ => int_arg(val)?,
                } != 0;
                match level {
                    SOL_IP => s.opts.recverr = on,
                    _ => s.opts.recverr6 = on,
                }
                if let Some(h) = conn.or(listener) {
                    let (v4, v6) = (s.opts.recverr, s.opts.recverr6);
                    e(stack.socket(h).set_recverr(v4, v6, !on))?;
                }
            }
            // do_ip_setsockopt: 1 to 255, or -1 for the route's default.
            (SOL_IP, IP_TTL) => {
                let v = ip_byte_arg(val)?;
                if v != -1 && !(1..=255).contains(&v) {
                    return err(errno::EINVAL);
                }
                s.opts.ttl = (v != -1).then_some(v as u8);
                if let Some(h) = conn {
                    e(stack.socket(h).set_ttl(s.opts.ttl))?;
                }
            }
            (SOL_IP, IP_MINTTL) => {
                let v = ip_byte_arg(val)?;
                if !(0..=255).contains(&v) {
                    return err(errno::EINVAL);
                }
                s.opts.min_ttl = v as u8;
                if let Some(h) = conn {
                    e(stack.socket(h).set_min_ttl(v as u8, s.opts.min_hopcount))?;
                }
            }
            // do_ipv6_setsockopt: an int (optlen >= sizeof(int)), -1 to 255.
            (IPPROTO_IPV6, IPV6_UNICAST_HOPS) if s.family == AF_INET6 => {
                let v = int_arg(val)?;
                if !(-1..=255).contains(&v) {
                    return err(errno::EINVAL);
                }
                s.opts.hop_limit = (v != -1).then_some(v as u8);
                if let Some(h) = conn {
                    e(stack.socket(h).set_hop_limit(s.opts.hop_limit))?;
                }
            }
            (IPPROTO_IPV6, IPV6_MINHOPCOUNT) if s.family == AF_INET6 => {
                let v = int_arg(val)?;
                if !(0..=255).contains(&v) {
                    return err(errno::EINVAL);
                }
                s.opts.min_hopcount = v as u8;
                if let Some(h) = conn {
                    e(stack.socket(h).set_min_ttl(s.opts.min_ttl, v as u8))?;
                }
            }
            // do_ipv6_setsockopt: an int from -1 (RFC 3542 6.5's default, 0) to
            // 255; a stream socket keeps its ECN bits.
            (IPPROTO_IPV6, IPV6_TCLASS) if s.family == AF_INET6 => {
                let v = int_arg(val)?;
                if !(-1..=0xff).contains(&v) {
                    return err(errno::EINVAL);
                }
                let v = v.max(0) as u8;
                s.opts.tclass = v & !3 | s.opts.tclass & 3;
                if let Some(h) = conn {
                    e(stack.socket(h).set_tclass(v))?;
                }
            }
            // do_ipv6_setsockopt: any int, as a bool (autoflowlabel_set from now on).
            (IPPROTO_IPV6, IPV6_AUTOFLOWLABEL) if s.family == AF_INET6 => {
                let on = int_arg(val)? != 0;
                s.opts.autoflowlabel = Some(on);
                if let Some(h) = conn {
                    e(stack.socket(h).set_autoflowlabel(on))?;
                }
            }
            // do_ipv6_setsockopt: not for an IPv4 socket (ip_setsockopt's ENOPROTOOPT),
            // and only before the socket has a port (inet_num).
            (IPPROTO_IPV6, IPV6_V6ONLY) if s.family == AF_INET6 => {
                let v = int_arg(val)?;
                if s.bound.is_some() {
                    return err(errno::EINVAL);
                }
                s.opts.v6only = v != 0;
            }
            (SOL_SOCKET, SO_KEEPALIVE) | (SOL_TCP, TCP_KEEPIDLE | TCP_KEEPINTVL | TCP_KEEPCNT) => {
                let ka = keepalive_opt(level, name, int_arg(val)?, s.opts.keepalive)?;
                s.opts.keepalive = ka;
                if let Some(h) = conn {
                    e(stack.socket(h).set_keepalive(now, ka))?;
                }
            }
            (SOL_SOCKET, SO_LINGER) => s.linger = s.linger.set_from_user(val)?,
            // sk_setsockopt: sock_setbindtodevice (its own optlen rules) and
            // SO_BINDTOIFINDEX, both sock_bindtoindex_locked (posix/netdev.rs).
            (SOL_SOCKET, SO_BINDTODEVICE | SO_BINDTOIFINDEX) => {
                let ifindex = match name {
                    SO_BINDTODEVICE => super::netdev::bindtodevice_arg(stack, val)?,
                    _ => super::netdev::bindtoindex_arg(int_arg(val)?)?,
                };
                s.opts.bound_dev_if = ifindex;
                if let Some(h) = conn {
                    e(stack.socket(h).set_bound_dev_if(ifindex))?;
                }
            }
            // sk_setsockopt: sock_set_timeout (the _NEW options take a
            // __kernel_sock_timeval, the same 16 bytes on a 64-bit host).
            (SOL_SOCKET, SO_RCVTIMEO | SO_RCVTIMEO_NEW) => {
                s.rcvtimeo = timeout_from_user(val)?;
            }
            (SOL_SOCKET, SO_SNDTIMEO | SO_SNDTIMEO_NEW) => {
                s.sndtimeo = timeout_from_user(val)?;
            }
            // sk_setsockopt: inet_stream_ops' set_peek_off (Linux 6.10+),
            // sk_set_peek_off, takes any int.
            (SOL_SOCKET, SO_PEEK_OFF) => s.peek_off = int_arg(val)?,
            // sk_setsockopt: the value doubled in the engine; the FORCE variants need
            // CAP_NET_ADMIN, which the embedding process is taken to have.
            (SOL_SOCKET, SO_SNDBUF | SO_SNDBUFFORCE) => {
                let max = stack.config().wmem_max;
                let v = buf_from_user(int_arg(val)?, name == SO_SNDBUFFORCE, max);
                s.opts.sndbuf = Some(v);
                if let Some(h) = conn {
                    e(stack.socket(h).set_sndbuf(now, v))?;
                }
            }
            (SOL_SOCKET, SO_RCVBUF | SO_RCVBUFFORCE) => {
                let max = stack.config().rmem_max;
                let v = buf_from_user(int_arg(val)?, name == SO_RCVBUFFORCE, max);
                s.opts.rcvbuf = Some(v);
                if let Some(h) = conn {
                    e(stack.socket(h).set_rcvbuf(v))?;
                }
            }
            (SOL_SOCKET, SO_MAX_PACING_RATE) => {
                let rate = if val.len() >= 8 {
                    u64::from_ne_bytes(val[..8].try_into().expect("8 bytes"))
                } else {
                    match int_arg(val)? as u32 {
                        u32::MAX => u64::MAX,
                        r => r as u64,
                    }
                };
                s.opts.max_pacing_rate = Some(rate);
                if let Some(h) = conn {
                    e(stack.socket(h).set_max_pacing_rate(rate))?;
                }
            }
            (SOL_TCP, TCP_NODELAY) => {
                let on = int_arg(val)? != 0;
                s.opts.nodelay = on;
                if let Some(h) = conn {
                    e(stack.socket(h).set_nodelay_push(now, on))?;
                }
            }
            (SOL_TCP, TCP_SYNCNT) => {
                let v = int_arg(val)?;
                if !(1..=MAX_TCP_SYNCNT as i32).contains(&v) {
                    return err(errno::EINVAL);
                }
                s.opts.syn_retries = v as u8;
                if let Some(h) = conn {
                    e(stack.socket(h).set_syn_retries(v as u8))?;
                }
            }
            (SOL_TCP, TCP_THIN_LINEAR_TIMEOUTS) => {
                let v = int_arg(val)?;
                if !(0..=1).contains(&v) {
                    return err(errno::EINVAL);
                }
                s.opts.thin_lto = v == 1;
                if let Some(h) = conn {
                    e(stack.socket(h).set_thin_linear_timeouts(v == 1))?;
                }
            }
            // do_tcp_setsockopt: "TCP_THIN_DUPACK is deprecated and a no-op" (Linux
            // 4.15's removal of the feature kept the option for old binaries).
            (SOL_TCP, TCP_THIN_DUPACK) => {
                if !(0..=1).contains(&int_arg(val)?) {
                    return err(errno::EINVAL);
                }
            }
            (SOL_TCP, TCP_DEFER_ACCEPT) => {
                // Any socket keeps it (icsk_accept_queue); a listener's requests use it,
                // a connection in SYN-SENT saves the ACK of its SYN-ACK.
                let v = crate::tcp::sockopt::secs_to_retrans(int_arg(val)?);
                s.opts.defer_accept = v;
                if let Some(h) = conn {
                    e(stack.socket(h).set_defer_accept(v))?;
                }
            }
            (SOL_TCP, TCP_QUICKACK) => {
                let v = int_arg(val)?;
                s.opts.pingpong = v == 0;
                if let Some(h) = conn {
                    e(stack.socket(h).set_quickack(now, v))?;
                }
            }
            (SOL_TCP, TCP_CORK) => {
                let on = int_arg(val)? != 0;
                s.opts.cork = on;
                if let Some(h) = conn {
                    e(stack.socket(h).set_cork(now, on))?;
                }
            }
            (SOL_TCP, TCP_MAXSEG) => {
                let v = int_arg(val)?;
                if v != 0 && (v < TCP_MIN_MSS as i32 || v > MAX_TCP_WINDOW as i32) {
                    return err(errno::EINVAL);
                }
                s.opts.user_mss = v as u32;
                if let Some(h) = conn {
                    e(stack.socket(h).set_user_mss(v as u32))?;
                }
            }
            // do_tcp_setsockopt: "if (!tp->repair) err = -EPERM"; lowtide has no
            // TCP_REPAIR, so the offset is never the user's.
            (SOL_TCP, TCP_TIMESTAMP) => {
                int_arg(val)?;
                return err(errno::EPERM);
            }
            (SOL_TCP, TCP_TX_DELAY) => {
                let v = int_arg(val)?;
                if let Some(h) = conn {
                    e(stack.socket(h).set_tx_delay(now, v))?;
                }
                let v = crate::tcp::sockopt::tx_delay_from_user(v);
                s.opts.tx_delay = v.ok_or(Errno(errno::EINVAL))?;
            }
            (SOL_TCP, TCP_SAVE_SYN) => {
                let v = crate::tcp::saved_syn::save_syn_from_user(int_arg(val)?);
                s.opts.save_syn = v.map_err(Errno::from)?;
            }
            (SOL_TCP, TCP_WINDOW_CLAMP) => {
                let v = int_arg(val)?;
                match conn {
                    Some(h) => e(stack.socket(h).set_window_clamp(v))?,
                    // tcp_set_window_clamp: 0 only in CLOSE (a listener is LISTEN).
                    None if v == 0 && listener.is_some() => return err(errno::EINVAL),
                    None => {}
                }
                s.opts.window_clamp = match v {
                    0 => 0,
                    v => crate::tcp::rcvwin::window_clamp_from_user(v),
                };
            }
            (SOL_TCP, TCP_NOTSENT_LOWAT) => {
                let v = int_arg(val)? as u32;
                s.opts.notsent_lowat = v;
                if let Some(h) = conn {
                    e(stack.socket(h).set_notsent_lowat(now, v))?;
                }
            }
            (SOL_TCP, TCP_LINGER2) => {
                let v = crate::tcp::sockopt::linger2_from_user(int_arg(val)?);
                s.opts.linger2 = v;
                if let Some(h) = conn {
                    e(stack.socket(h).set_linger2(v))?;
                }
            }
            (SOL_TCP, TCP_RTO_MAX_MS) => {
                let Some(d) = crate::tcp::sockopt::rto_max_from_user(int_arg(val)?) else {
                    return err(errno::EINVAL);
                };
                s.opts.rto_max = Some(d);
                if let Some(h) = conn {
                    e(stack.socket(h).set_rto_max(d))?;
                }
            }
            (SOL_TCP, TCP_RTO_MIN_US) => {
                let Some(d) = crate::tcp::sockopt::rto_min_from_user(int_arg(val)?) else {
                    return err(errno::EINVAL);
                };
                s.opts.rto_min = Some(d);
                if let Some(h) = conn {
                    e(stack.socket(h).set_rto_min(d))?;
                }
            }
            (SOL_TCP, TCP_USER_TIMEOUT) => {
                let v = int_arg(val)?;
                if v < 0 {
                    return err(errno::EINVAL);
                }
                s.opts.user_timeout_ms = v as u32;
                if let Some(h) = conn {
                    let d = core::time::Duration::from_millis(v as u64);
                    e(stack.socket(h).set_user_timeout(d))?;
                }
            }
            // sock_setsockopt: needs CAP_NET_RAW or CAP_NET_ADMIN, which the embedding
            // process is taken to have (as packetdrill, root, does).
            (SOL_SOCKET, SO_MARK) => s.opts.mark = int_arg(val)? as u32,
            // sk_set_prio_allowed: 0 to 6, any value with CAP_NET_ADMIN or CAP_NET_RAW
            // (taken as for SO_MARK). No wire effect here (skb->priority).
            (SOL_SOCKET, SO_PRIORITY) => s.opts.priority = int_arg(val)? as u32,
            // sk_setsockopt: -1 (SOCK_TXREHASH_DEFAULT) is net.core.txrehash now.
            (SOL_SOCKET, SO_TXREHASH) => {
                let v = int_arg(val)?;
                if !(-1..=1).contains(&v) {
                    return err(errno::EINVAL);
                }
                let on = if v == -1 {
                    stack.config().txrehash
                } else {
                    v == 1
                };
                s.opts.txrehash = Some(on);
                if let Some(h) = conn {
                    e(stack.socket(h).set_txrehash(on))?;
                }
            }
            (SOL_SOCKET, SO_RCVLOWAT) => {
                let v = int_arg(val)?;
                s.opts.rcvlowat = Some(v);
                if s.opts.rcvbuf.is_none() && v != 0 {
                    let mark = rcvlowat_from_user(stack.config(), None, v);
                    s.opts.rcvlowat_grown = s.opts.rcvlowat_grown.max(mark);
                }
                if let Some(h) = conn {
                    e(stack.socket(h).set_rcvlowat(now, v))?;
                }
            }
            (SOL_SOCKET, SO_OOBINLINE) => {
                s.opts.oobinline = int_arg(val)? != 0;
                if let Some(h) = conn {
                    e(stack.socket(h).set_oobinline(s.opts.oobinline))?;
                }
            }
            (SOL_SOCKET, SO_ZEROCOPY) => {
                // sock_setsockopt: 0 or 1 only.
                let on = match int_arg(val)? {
                    v @ (0 | 1) => v == 1,
                    _ => return err(errno::EINVAL),
                };
                s.opts.zerocopy = on;
                if let Some(h) = conn {
                    e(stack.socket(h).set_zerocopy(on))?;
                }
            }
            (SOL_TCP, TCP_INQ) => {
                // do_tcp_setsockopt: 0 or 1 only.
                s.opts.recvmsg_inq = match int_arg(val)? {
                    v @ (0 | 1) => v == 1,
                    _ => return err(errno::EINVAL),
                };
            }
            // do_tcp_setsockopt: tp->af_specific->md5_parse, in any state; a
            // connection's own keys change, else the socket's (a listener's reach it
            // below).
            (SOL_TCP, TCP_MD5SIG | TCP_MD5SIG_EXT) => {
                let cmd = super::md5sig::md5sig_arg(s.family, name == TCP_MD5SIG_EXT, val)?;
                match conn {
                    Some(h) => e(stack.socket(h).set_md5sig(cmd))?,
                    // A socket before listen/connect, or a listener: its keys
                    // alone hold its sk_omem_alloc (__tcp_md5_do_add's sock_kmalloc).
                    None => {
                        let max = stack.config().optmem_max;
                        s.opts.md5.apply(cmd, 0, max).map_err(|e| match e {
                            Md5Error::NotFound => Errno(errno::ENOENT),
                            Md5Error::NoMemory => Errno(errno::ENOMEM),
                        })?
                    }
                }
            }
            // do_tcp_setsockopt: before the int read, as TCP_CONGESTION.
            (SOL_TCP, TCP_ULP) => return super::ulp::tcp_set_ulp(val),
            (SOL_TCP, TCP_CONGESTION) => {
                let name = congestion_name(val)?;
                let name = std::str::from_utf8(name).map_err(|_| Errno(errno::ENOENT))?;
                if crate::tcp::cong::by_name(name).is_none() {
                    return err(errno::ENOENT);
                }
                s.opts.congestion = Some(name.to_string());
                if let Some(h) = conn {
                    e(stack.socket(h).set_congestion(now, name))?;
                }
            }
            _ => return err(errno::ENOPROTOOPT),
        }
        if let Some(h) = listener {
            let opts = s.opts.clone();
            e(stack.socket(h).set_listener_options(&opts))?;
        }
        self.sync_events();
        Ok(())
    }
}
