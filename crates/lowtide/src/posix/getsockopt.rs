//! `getsockopt(2)` (`sk_getsockopt`, `do_ip_getsockopt`, `do_ipv6_getsockopt`,
//! `do_tcp_getsockopt`).

use super::consts::*;
use super::sockopt::{
    encode_tcp_info, ip_int_out, linux_state, put, SK_MEMINFO_LEN, TCP_CA_NAME_MAX,
};
use super::timeo::timeout_to_user;
use super::{err, Errno, Fd, Host, SockState};
use crate::tcp::consts::{SOCK_MIN_RCVBUF, SOCK_MIN_SNDBUF};
use crate::tcp::disconnect::notsent_bytes;
use crate::tcp::info::TcpInfo;
use crate::tcp::sockopt::rcvlowat_from_user;
use crate::time::Instant;
use crate::TcpState;

impl Host {
    /// What `getsockopt(TCP_SAVED_SYN)` writes to `optlen` when it fails with
    /// `EINVAL` (a buffer shorter than the saved headers, which stay): their
    /// length (`tcp_saved_syn_len`); `None` without a saved SYN.
    pub fn saved_syn_len(&self, fd: Fd) -> Result<Option<usize>, Errno> {
        match self.conn(fd)? {
            Some(h) => self
                .stack
                .socket_ref(h)
                .saved_syn_len()
                .map_err(Errno::from),
            None => Ok(None),
        }
    }

    /// `getsockopt(2)`: writes at most `out.len()` bytes and returns how many.
    pub fn getsockopt(
        &mut self,
        now: Instant,
        fd: Fd,
        level: i32,
        name: i32,
        out: &mut [u8],
    ) -> Result<usize, Errno> {
        if let Some(r) = self.get_timestamp_option(fd, level, name) {
            return r.map(|v| super::sockopt::put(out, &v));
        }
        if (level, name) == (SOL_SOCKET, SO_ERROR) && self.conn(fd)?.is_none() {
            // sock_error: the error tcp_disconnect left, read once.
            let e = self.sock_mut(fd)?.sk_err.take().map_or(0, |e| e.0);
            return Ok(put(out, &e.to_ne_bytes()));
        }
        let s = self.sock(fd)?;
        let conn = self.conn(fd)?;
        let info = conn.and_then(|h| self.stack.info(now, h).ok());
        let cfg = self.stack.config();
        let int = |out: &mut [u8], v: i32| put(out, &v.to_ne_bytes());
        let conn_ecn = conn.and_then(|h| self.stack.socket_ref(h).tos_ecn().ok());
        let tos_ecn = |own: u8| conn_ecn.unwrap_or(own & 3);
        // sk_sndbuf and sk_rcvbuf: the connection's, else what SO_SNDBUF/SO_RCVBUF
        // set (doubled, at least SOCK_MIN_*) or tcp_init_sock's tcp_wmem[1]/tcp_rmem[1].
        let sndbuf = match (&info, s.opts.sndbuf) {
            (Some(i), _) => i.sndbuf,
            (None, Some(b)) => (b * 2).max(SOCK_MIN_SNDBUF),
            (None, None) => cfg.tcp_wmem[1],
        };
        let rcvbuf = match (&info, s.opts.rcvbuf) {
            (Some(i), _) => i.rcvbuf,
            (None, Some(b)) => (b * 2).max(SOCK_MIN_RCVBUF),
            (None, None) => cfg.tcp_rmem[1],
        };
        let n = match (level, name) {
            (SOL_SOCKET, SO_TYPE) => int(out, SOCK_STREAM),
            // sk_getsockopt: sk_state == TCP_LISTEN, sk_protocol, sk_family.
            (SOL_SOCKET, SO_ACCEPTCONN) => {
                int(out, matches!(s.state, SockState::Listening(_)) as i32)
            }
            (SOL_SOCKET, SO_PROTOCOL) => int(out, IPPROTO_TCP),
            (SOL_SOCKET, SO_DOMAIN) => int(out, s.family),
            (SOL_SOCKET, SO_PRIORITY) => int(out, s.opts.priority as i32),
            (SOL_SOCKET, SO_TXREHASH) => int(out, s.opts.txrehash.unwrap_or(cfg.txrehash) as i32),
            (SOL_SOCKET, SO_BINDTOIFINDEX) => int(out, s.opts.bound_dev_if as i32),
            (SOL_SOCKET, SO_BINDTODEVICE) => {
                super::netdev::getbindtodevice(&self.stack, s.opts.bound_dev_if, out)?
            }
            // do_ip_getsockopt: uc_ttl, or net.ipv4.ip_default_ttl for -1.
            (SOL_IP, IP_TTL) => ip_int_out(out, s.opts.ttl.unwrap_or(cfg.ip_default_ttl) as i32),
            (SOL_IP, IP_MINTTL) => ip_int_out(out, s.opts.min_ttl as i32),
            // do_ipv6_getsockopt: hop_limit, else the route's (the device's
            // hop_limit), else net.ipv6.conf.all.hop_limit: one value in lowtide.
            (IPPROTO_IPV6, IPV6_UNICAST_HOPS) if s.family == AF_INET6 => {
                int(out, s.opts.hop_limit.unwrap_or(cfg.ipv6_hop_limit) as i32)
            }
            (IPPROTO_IPV6, IPV6_MINHOPCOUNT) if s.family == AF_INET6 => {
                int(out, s.opts.min_hopcount as i32)
            }
            // do_tcp_getsockopt: the deprecated option reads 0.
            (SOL_TCP, TCP_THIN_DUPACK) => int(out, 0),
            (IPPROTO_IPV6, IPV6_V6ONLY) if s.family == AF_INET6 => int(out, s.opts.v6only as i32),
            (SOL_SOCKET, SO_REUSEADDR) => int(out, s.opts.reuse as i32),
            (SOL_SOCKET, SO_REUSEPORT) => int(out, s.opts.reuseport as i32),
            // do_ip_getsockopt / do_ipv6_getsockopt: inet->tos and np->tclass whole,
            // with the ECN bits the connection's tcp_ecn_send last set.
            (SOL_IP, IP_TOS) => ip_int_out(out, (s.opts.tos & !3 | tos_ecn(s.opts.tos)) as i32),
            (IPPROTO_IPV6, IPV6_TCLASS) if s.family == AF_INET6 => {
                int(out, (s.opts.tclass & !3 | tos_ecn(s.opts.tclass)) as i32)
            }
            // ip6_autoflowlabel: the socket's choice, else the sysctl's default.
            (IPPROTO_IPV6, IPV6_AUTOFLOWLABEL) if s.family == AF_INET6 => {
                let dflt = crate::tcp::flowlabel::default_autolabel(cfg);
                int(out, s.opts.autoflowlabel.unwrap_or(dflt) as i32)
            }
            (SOL_IP, IP_MTU_DISCOVER) => {
                let v = s.opts.pmtudisc.map_or(IP_PMTUDISC_WANT, i32::from);
                ip_int_out(out, v)
            }
            (IPPROTO_IPV6, IPV6_MTU_DISCOVER) if s.family == AF_INET6 => {
                int(out, s.opts.pmtudisc6.map_or(IP_PMTUDISC_WANT, i32::from))
            }
            (SOL_IP, IP_FREEBIND) => ip_int_out(out, s.opts.freebind as i32),
            (SOL_IP, IP_RECVERR) => ip_int_out(out, s.opts.recverr as i32),
            (IPPROTO_IPV6, IPV6_RECVERR) if s.family == AF_INET6 => {
                int(out, s.opts.recverr6 as i32)
            }
            // do_ip_getsockopt: the route's MTU, ENOTCONN without a route.
            (SOL_IP, IP_MTU) => match conn {
                Some(h) => ip_int_out(
                    out,
                    self.stack.socket_ref(h).path_mtu().map_err(Errno::from)? as i32,
                ),
                None => return err(errno::ENOTCONN),
            },
            // do_ipv6_getsockopt: the same, as a plain int.
            (IPPROTO_IPV6, IPV6_MTU) if s.family == AF_INET6 => match conn {
                Some(h) => int(
                    out,
                    self.stack.socket_ref(h).path_mtu().map_err(Errno::from)? as i32,
                ),
                None => return err(errno::ENOTCONN),
            },
            (SOL_SOCKET, SO_KEEPALIVE) => int(out, s.opts.keepalive.enabled as i32),
            // keepalive_time_when and friends: the socket's value or the sysctl.
            (SOL_TCP, TCP_KEEPIDLE) => {
                let d = s.opts.keepalive.idle.map(|d| d.as_secs() as u32);
                int(out, d.unwrap_or(cfg.tcp_keepalive_time) as i32)
            }
            (SOL_TCP, TCP_KEEPINTVL) => {
                let d = s.opts.keepalive.interval.map(|d| d.as_secs() as u32);
                int(out, d.unwrap_or(cfg.tcp_keepalive_intvl) as i32)
            }
            (SOL_TCP, TCP_KEEPCNT) => {
                let n = s.opts.keepalive.probes.unwrap_or(cfg.tcp_keepalive_probes);
                int(out, n as i32)
            }
            (SOL_TCP, TCP_INQ) => int(out, s.opts.recvmsg_inq as i32),
            (SOL_SOCKET, SO_ZEROCOPY) => int(out, s.opts.zerocopy as i32),
            (SOL_SOCKET, SO_MARK) => int(out, s.opts.mark as i32),
            (SOL_SOCKET, SO_OOBINLINE) => int(out, s.opts.oobinline as i32),
            (SOL_SOCKET, SO_RCVLOWAT) => {
                let v = match conn {
                    Some(h) => self.stack.socket_ref(h).rcvlowat().map_err(Errno::from)?,
                    None => {
                        let locked = s.opts.rcvbuf.map(|b| (b * 2).max(SOCK_MIN_RCVBUF));
                        s.opts
                            .rcvlowat
                            .map_or(1, |v| rcvlowat_from_user(cfg, locked, v))
                    }
                };
                int(out, v as i32)
            }
            (SOL_SOCKET, SO_LINGER) => put(out, &s.linger.to_user()),
            // sk_getsockopt: "case SO_SNDLOWAT: v.val = 1" (setting it is ENOPROTOOPT).
            (SOL_SOCKET, SO_SNDLOWAT) => int(out, 1),
            // sk_getsockopt: sock_get_timeout, a 16-byte timeval either way.
            (SOL_SOCKET, SO_RCVTIMEO | SO_RCVTIMEO_NEW) => put(out, &timeout_to_user(s.rcvtimeo)),
            (SOL_SOCKET, SO_SNDTIMEO | SO_SNDTIMEO_NEW) => put(out, &timeout_to_user(s.sndtimeo)),
            (SOL_SOCKET, SO_PEEK_OFF) => int(out, s.peek_off),
            (SOL_SOCKET, SO_SNDBUF) => int(out, sndbuf as i32),
            (SOL_SOCKET, SO_RCVBUF) => int(out, rcvbuf as i32),
            (SOL_SOCKET, SO_ERROR) => {
                let e = match conn {
                    Some(h) => self.stack.socket_error(h).ok().flatten(),
                    None => None,
                };
                int(out, e.map_or(0, |e| Errno::from(e).0))
            }
            (SOL_SOCKET, SO_MAX_PACING_RATE) => {
                let r = s.opts.max_pacing_rate.unwrap_or(u64::MAX);
                if out.len() >= 8 {
                    put(out, &r.to_ne_bytes())
                } else {
                    put(out, &(r.min(u32::MAX as u64) as u32).to_ne_bytes())
                }
            }
            (SOL_SOCKET, SO_MEMINFO) => {
                let mut b = [0u8; SK_MEMINFO_LEN];
                // sk_get_meminfo, of any socket: rmem_alloc, rcvbuf, wmem_alloc,
                // sndbuf, fwd_alloc, wmem_queued, optmem, backlog, drops.
                let (rmem, wmem, queued) = info
                    .as_ref()
                    .map_or((0, 0, 0), |i| (i.rmem_alloc, i.wmem_alloc, i.wmem_queued));
                // sk_omem_alloc: a connection's notifications and keys; before
                // listen/connect and on a listener, the socket's TCP-MD5 keys.
                let optmem = conn.and_then(|h| self.stack.socket_ref(h).optmem().ok());
                let optmem = optmem.unwrap_or_else(|| s.opts.md5.omem());
                let drops = match s.state {
                    SockState::Conn { h, .. } | SockState::Listening(h) => {
                        self.stack.socket_ref(h).sk_drops().unwrap_or(0)
                    }
                    SockState::Unconnected => 0,
                } as u64;
                let vals = [
                    rmem,
                    rcvbuf as u64,
                    wmem,
                    sndbuf as u64,
                    0,
                    queued,
                    optmem as u64,
                    0,
                    (drops as u32).wrapping_add(s.sk_drops as u32) as u64,
                ];
                for (k, v) in vals.iter().enumerate() {
                    b[k * 4..k * 4 + 4].copy_from_slice(&(*v as u32).to_ne_bytes());
                }
                put(out, &b)
            }
            (SOL_TCP, TCP_FASTOPEN) => {
                let q = match s.state {
                    SockState::Listening(h) => {
                        self.stack.socket_ref(h).fastopen_max_qlen().unwrap_or(0)
                    }
                    _ => s.opts.fastopen_qlen.unwrap_or(0),
                };
                int(out, q as i32)
            }
            (SOL_TCP, TCP_FASTOPEN_CONNECT) => int(out, s.opts.fastopen_connect as i32),
            (SOL_TCP, TCP_FASTOPEN_NO_COOKIE) => int(out, s.opts.fastopen_no_cookie as i32),
            // tcp_fastopen_get_cipher(net, icsk): the socket's own keys only (none,
            // and no bytes, before TCP_FASTOPEN_KEY), not the stack's.
            (SOL_TCP, TCP_FASTOPEN_KEY) => {
                let keys = s.opts.fastopen_key.as_ref();
                put(out, &keys.map(|k| k.to_bytes()).unwrap_or_default())
            }
            (SOL_TCP, TCP_NODELAY) => int(out, s.opts.nodelay as i32),
            (SOL_TCP, TCP_CORK) => int(out, s.opts.cork as i32),
            (SOL_TCP, TCP_SYNCNT) => {
                let n = match conn {
                    Some(h) => self
                        .stack
                        .socket_ref(h)
                        .syn_retries()
                        .map_err(Errno::from)?,
                    None if s.opts.syn_retries != 0 => s.opts.syn_retries,
                    None => cfg.tcp_syn_retries,
                };
                int(out, n as i32)
            }
            (SOL_TCP, TCP_THIN_LINEAR_TIMEOUTS) => int(out, s.opts.thin_lto as i32),
            (SOL_TCP, TCP_DEFER_ACCEPT) => int(
                out,
                crate::tcp::sockopt::retrans_to_secs(s.opts.defer_accept),
            ),
            (SOL_TCP, TCP_QUICKACK) => {
                let quick = match conn {
                    Some(h) => self.stack.socket_ref(h).quickack().map_err(Errno::from)?,
                    None => !s.opts.pingpong,
                };
                int(out, quick as i32)
            }
            (SOL_TCP, TCP_MAXSEG) => {
                let v = match conn {
                    Some(h) => self.stack.socket_ref(h).maxseg().map_err(Errno::from)?,
                    // A socket without a connection: user_mss, else the mss_cache
                    // its last one left, else TCP_MSS_DEFAULT.
                    None if s.opts.user_mss != 0 => s.opts.user_mss,
                    None => s.opts.disconnected.as_ref().map_or(536, |d| d.mss_cache()),
                };
                int(out, v as i32)
            }
            (SOL_TCP, TCP_NOTSENT_LOWAT) => int(out, s.opts.notsent_lowat as i32),
            (SOL_TCP, TCP_SAVE_SYN) => int(out, s.opts.save_syn as i32),
            (SOL_TCP, TCP_TX_DELAY) => {
                let v = match conn {
                    Some(h) => self.stack.socket_ref(h).tx_delay().map_err(Errno::from)?,
                    None => s.opts.tx_delay,
                };
                int(out, v as i32)
            }
            (SOL_TCP, TCP_SAVED_SYN) => match conn {
                Some(h) => match self.stack.socket(h).take_saved_syn(out.len()) {
                    Ok(Some(syn)) => put(out, &syn),
                    Ok(None) => 0,
                    Err(e) => return Err(Errno::from(e)),
                },
                None => 0,
            },
            (SOL_TCP, TCP_TIMESTAMP) => {
                let v = match conn {
                    Some(h) => self
                        .stack
                        .socket_ref(h)
                        .tcp_timestamp(now)
                        .map_err(Errno::from)? as i32,
                    // No connection: tsoffset 0 (tcp_v4_connect sets it).
                    None => crate::tcp::sockopt::tcp_timestamp_to_user(now.as_millis() as u32, 0),
                };
                int(out, v)
            }
            (SOL_TCP, TCP_WINDOW_CLAMP) => {
                let v = match conn {
                    Some(h) => self
                        .stack
                        .socket_ref(h)
                        .window_clamp()
                        .map_err(Errno::from)?,
                    None => s.opts.window_clamp,
                };
                int(out, v as i32)
            }
            (SOL_TCP, TCP_LINGER2) => {
                let v = match conn {
                    Some(h) => self.stack.socket_ref(h).linger2().map_err(Errno::from)?,
                    None => {
                        crate::tcp::sockopt::linger2_to_user(s.opts.linger2, cfg.tcp_fin_timeout)
                    }
                };
                int(out, v)
            }
            (SOL_TCP, TCP_RTO_MAX_MS) => {
                let d = match conn {
                    Some(h) => self.stack.socket_ref(h).rto_max().map_err(Errno::from)?,
                    None => s
                        .opts
                        .rto_max
                        .unwrap_or(core::time::Duration::from_millis(cfg.tcp_rto_max_ms as u64)),
                };
                int(out, d.as_millis() as i32)
            }
            (SOL_TCP, TCP_RTO_MIN_US) => {
                // jiffies_to_usecs(icsk_rto_min): whole milliseconds at HZ 1000.
                let d = match conn {
                    Some(h) => self.stack.socket_ref(h).rto_min().map_err(Errno::from)?,
                    None => s.opts.rto_min.unwrap_or(core::time::Duration::from_millis(
                        (cfg.tcp_rto_min_us as u64).div_ceil(1000),
                    )),
                };
                int(out, (d.as_millis() * 1000) as i32)
            }
            (SOL_TCP, TCP_USER_TIMEOUT) => {
                let v = match conn {
                    Some(h) => self
                        .stack
                        .socket_ref(h)
                        .user_timeout()
                        .map_err(Errno::from)?
                        .as_millis() as u32,
                    None => s.opts.user_timeout_ms,
                };
                int(out, v as i32)
            }
            // do_tcp_getsockopt: no icsk_ulp_ops, so length 0 (posix/ulp.rs).
            (SOL_TCP, TCP_ULP) => 0,
            (SOL_TCP, TCP_CONGESTION) => {
                let name = match conn {
                    Some(h) => self
                        .stack
                        .socket_ref(h)
                        .congestion()
                        .map_err(Errno::from)?
                        .to_string(),
                    None => s
                        .opts
                        .congestion
                        .clone()
                        .unwrap_or_else(|| cfg.tcp_congestion_control.clone()),
                };
                let mut b = [0u8; TCP_CA_NAME_MAX];
                let n = name.len().min(TCP_CA_NAME_MAX - 1);
                b[..n].copy_from_slice(&name.as_bytes()[..n]);
                put(out, &b)
            }
            (SOL_TCP, TCP_INFO) => {
                let max_rate = s.opts.max_pacing_rate.unwrap_or(u64::MAX);
                let b = match (&info, s.state) {
                    (Some(i), SockState::Conn { h, .. }) => {
                        let st = self.stack.state(h).map_err(Errno::from)?;
                        encode_tcp_info(i, linux_state(st))
                    }
                    (_, SockState::Listening(h)) => {
                        let l = self.stack.socket_ref(h);
                        let queued = l.accept_queue_len().map_err(Errno::from)? as u32;
                        let backlog = l.accept_backlog().map_err(Errno::from)?;
                        let mut i = TcpInfo::listener(cfg, max_rate, queued, backlog);
                        i.reordering = s.opts.reordering.unwrap_or(i.reordering);
                        encode_tcp_info(&i, linux_state(TcpState::Listen))
                    }
                    // TCP_CLOSE: what tcp_disconnect left of the last connection,
                    // else what tcp_init_sock set; write_seq moved by each
                    // tcp_disconnect since (tcpi_notsent_bytes).
                    _ => {
                        let seq = s.opts.write_seq;
                        let i = match &s.opts.disconnected {
                            Some(d) => d.info(now, max_rate, seq),
                            None => {
                                let ms = now.as_millis();
                                let mut i = TcpInfo::without_connection(cfg, max_rate, ms);
                                i.reordering = s.opts.reordering.unwrap_or(i.reordering);
                                i.notsent_bytes = notsent_bytes(seq, 0);
                                i
                            }
                        };
                        encode_tcp_info(&i, linux_state(TcpState::Closed))
                    }
                };
                put(out, &b)
            }
            // get_info: DCTCP's tcp_dctcp_info (dctcp_get_info; on a socket not yet
            // connected, its zeroed private area); CUBIC and Reno answer with length
            // 0, as in Linux (BBR's tcp_bbr_info is not exported here).
            (SOL_TCP, TCP_CC_INFO) => {
                let info = match conn {
                    Some(h) => self.stack.socket_ref(h).cc_info().map_err(Errno::from)?,
                    None => {
                        let name = s.opts.congestion.as_deref();
                        crate::tcp::cong::by_name(name.unwrap_or(&cfg.tcp_congestion_control))
                            .and_then(|cc| cc.get_info(&Default::default()))
                    }
                };
                match info {
                    Some(crate::tcp::cong::CcInfo::Dctcp(i)) => put(out, &i.to_bytes()),
                    None => 0,
                }
            }
            _ => return err(errno::ENOPROTOOPT),
        };
        Ok(n)
    }
}
