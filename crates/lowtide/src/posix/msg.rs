//! `recvmsg(2)` with its control messages (`put_cmsg`): receive timestamps
//! (posix/rx_tstamp.rs), `TCP_CM_INQ` for `TCP_INQ`, and `MSG_ERRQUEUE`
//! (`ip_recv_error`/`ipv6_recv_error`).

use super::consts::*;
use super::{err, Errno, Fd, Host, SockState};
use crate::time::Instant;
use crate::OobRead;

/// One control message as Linux's `put_cmsg` writes it: `cmsg_level`, `cmsg_type`
/// and the data, in the host's byte order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmsg {
    /// `cmsg_level` (`SOL_SOCKET`, `SOL_TCP`, `SOL_IP`, ...).
    pub level: i32,
    /// `cmsg_type`.
    pub kind: i32,
    /// The payload (`CMSG_DATA`).
    pub data: Vec<u8>,
}

/// What `recvmsg(2)` returns besides the bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecvMsg {
    /// Bytes copied into the buffer.
    pub len: usize,
    /// `msg_flags` (`MSG_TRUNC`, `MSG_ERRQUEUE`, ...); `MSG_CTRUNC` is the caller's
    /// to add when the cmsgs do not fit its control buffer.
    pub flags: i32,
    /// The control messages, in Linux's order.
    pub cmsgs: Vec<Cmsg>,
}

impl Host {
    /// `recvmsg(2)` (`tcp_recvmsg`): [`Host::recv`] plus the control messages the
    /// socket asked for: the arrival time of what it read (`tcp_recv_timestamp`:
    /// `SCM_TIMESTAMP(NS)` with `SO_TIMESTAMP(NS)`, `SCM_TIMESTAMPING` with
    /// `SOF_TIMESTAMPING_SOFTWARE`), then `TCP_CM_INQ` (`tcp_inq_hint`) with
    /// `TCP_INQ` on. With
    /// `MSG_TRUNC` the bytes are read (or with `MSG_PEEK` counted) but not copied:
    /// `buf` is left as it was, only its length counts.
    pub fn recvmsg(
        &mut self,
        now: Instant,
        fd: Fd,
        buf: &mut [u8],
        flags: i32,
    ) -> Result<RecvMsg, Errno> {
        if flags & MSG_ERRQUEUE != 0 {
            return self.recv_error(now, fd, buf);
        }
        if self.is_pipe(fd) {
            let len = self.pipe_read(fd, buf)?;
            return Ok(RecvMsg {
                len,
                ..RecvMsg::default()
            });
        }
        let off = self.peek_offset(fd, flags);
        let s = self.sock(fd)?;
        let oob = flags & MSG_OOB != 0;
        let h = match s.state {
            SockState::Conn { h, .. } => h,
            // tcp_recv_urg on a socket with no connection: no urgent data.
            SockState::Unconnected if oob => return err(errno::EINVAL),
            // tcp_recvmsg_locked: sk_err (sock_error) before TCP_CLOSE's ENOTCONN.
            SockState::Unconnected => {
                let e = self.sock_mut(fd)?.sk_err.take();
                return Err(e.unwrap_or(Errno(errno::ENOTCONN)));
            }
            _ => return err(errno::ENOTCONN),
        };
        if oob {
            let m = self.recv_oob(h, buf, flags)?;
            return Ok(self.with_inq(fd, h, m));
        }
        let (len, tss) = self.recv_copy(now, fd, h, buf, flags, off)?;
        Ok(self.recv_done(fd, h, len, tss))
    }

    /// One copy of `tcp_recvmsg_locked` without a sleep: the bytes from `off`
    /// past `copied_seq` with `MSG_PEEK` (else from `copied_seq`, consumed), and
    /// its `tss`: the stamp of the last stamped skb the read takes bytes from,
    /// known before it takes them (`None`: no stamped skb).
    pub(super) fn recv_copy(
        &mut self,
        now: Instant,
        fd: Fd,
        h: crate::SocketHandle,
        buf: &mut [u8],
        flags: i32,
        off: usize,
    ) -> Result<(usize, Option<Option<Instant>>), Errno> {
        let tss = self.stack.socket_ref(h).recv_tstamp(off, buf.len());
        let peek = flags & MSG_PEEK != 0;
        let r = if flags & MSG_TRUNC != 0 {
            // tcp_recvmsg_locked: "if (!(flags & MSG_TRUNC))" copy; the bytes
            // are taken (or, peeking, counted) all the same.
            self.stack
                .recv_trunc(now, h, buf.len(), peek.then_some(off))
        } else if peek {
            self.stack.peek_at(h, off, buf)
        } else {
            self.stack.recv(now, h, buf)
        };
        self.sync_events();
        let len = r.map_err(Errno::from)?;
        self.peek_offset_moved(fd, len, peek);
        Ok((len, tss.ok().flatten()))
    }

    /// `tcp_recvmsg` after `tcp_recvmsg_locked` read `len` bytes: "if (cmsg_flags &
    /// TCP_CMSG_TS) tcp_recv_timestamp()" for `tss` (a zero time puts nothing),
    /// then `TCP_CM_INQ`.
    pub(super) fn recv_done(
        &self,
        fd: Fd,
        h: crate::SocketHandle,
        len: usize,
        tss: Option<Option<Instant>>,
    ) -> RecvMsg {
        let cmsgs = match tss {
            Some(Some(at)) => self.recv_timestamp_cmsgs(fd, at),
            _ => Vec::new(),
        };
        let m = RecvMsg {
            len,
            cmsgs,
            ..RecvMsg::default()
        };
        self.with_inq(fd, h, m)
    }

    /// `m` with `TCP_CM_INQ` (`tcp_inq_hint`) after its cmsgs when `TCP_INQ` is
    /// on: `tcp_recvmsg`'s "if (msg->msg_get_inq) ... put_cmsg(TCP_CM_INQ)" after
    /// a successful read.
    fn with_inq(&self, fd: Fd, h: crate::SocketHandle, mut m: RecvMsg) -> RecvMsg {
        if self.sock(fd).is_ok_and(|s| s.opts.recvmsg_inq) {
            let hint = self
                .stack
                .socket_ref(h)
                .status()
                .map_or(0, |st| st.inq_hint) as i32;
            m.cmsgs.push(Cmsg {
                level: SOL_TCP,
                kind: TCP_CM_INQ,
                data: hint.to_ne_bytes().to_vec(),
            });
        }
        m
    }

    /// `sk_peek_offset`: where a receive with `flags` starts past `copied_seq`:
    /// `SO_PEEK_OFF`'s offset for `MSG_PEEK` (0 when it is off), else 0.
    pub(super) fn peek_offset(&self, fd: Fd, flags: i32) -> usize {
        match self.sock(fd) {
            Ok(s) if flags & MSG_PEEK != 0 => s.peek_off.max(0) as usize,
            _ => 0,
        }
    }

    /// `tcp_recvmsg_locked` after copying `n` bytes: `sk_peek_offset_fwd` for a
    /// peek, `sk_peek_offset_bwd` for a read (not below 0); an offset that is off
    /// (negative) stays off.
    fn peek_offset_moved(&mut self, fd: Fd, n: usize, peek: bool) {
        if let Ok(s) = self.sock_mut(fd) {
            if s.peek_off >= 0 {
                let n = n.min(i32::MAX as usize) as i32;
                s.peek_off = match peek {
                    true => s.peek_off.saturating_add(n),
                    false => (s.peek_off - n).max(0),
                };
            }
        }
    }

    /// `recv(MSG_OOB)` (`tcp_recv_urg`): the urgent byte with `MSG_OOB` in the
    /// flags (and `MSG_TRUNC` for an empty buffer); never waits.
    fn recv_oob(
        &mut self,
        h: crate::SocketHandle,
        buf: &mut [u8],
        flags: i32,
    ) -> Result<RecvMsg, Errno> {
        let peek = flags & MSG_PEEK != 0;
        let r = self
            .stack
            .recv_oob(h, peek, buf.len())
            .map_err(Errno::from)?;
        Ok(match r {
            OobRead::Byte(b) => {
                // MSG_TRUNC: the byte counts but is not copied.
                if flags & MSG_TRUNC == 0 {
                    buf[0] = b;
                }
                RecvMsg {
                    len: 1,
                    flags: MSG_OOB,
                    ..RecvMsg::default()
                }
            }
            OobRead::Truncated => RecvMsg {
                len: 0,
                flags: MSG_OOB | MSG_TRUNC,
                ..RecvMsg::default()
            },
            OobRead::End => RecvMsg::default(),
        })
    }

    /// `recvmsg(MSG_ERRQUEUE)` (`ip_recv_error`, `ipv6_recv_error`): never waits;
    /// `EAGAIN` when the error queue is empty, else its oldest entry: a timestamp
    /// report's timestamp cmsgs first (`sock_recv_timestamp`: `SCM_TIMESTAMP(NS)`
    /// with `SO_TIMESTAMP(NS)`, the software time in `SCM_TIMESTAMPING`'s `ts[0]`
    /// with `SOF_TIMESTAMPING_SOFTWARE`), then an `IP_RECVERR`
    /// (`IPV6_RECVERR` on an IPv6 socket) cmsg: the `sock_extended_err` and the
    /// offender address (an ICMP error's sender, else zeroes), with `MSG_ERRQUEUE`
    /// in the flags, and `MSG_TRUNC` when the entry's bytes exceed `buf`; returns
    /// how many of them fit in `buf` (lowtide keeps only the count of a packet
    /// copy, an ICMP error's quoted bytes or a report's packet: it writes zeroes
    /// in their place; the statistics of
    /// `SOF_TIMESTAMPING_OPT_STATS` are copied, and between the two cmsgs comes
    /// `SCM_TIMESTAMPING_OPT_STATS` with them: `__sock_recv_timestamp`).
    fn recv_error(&mut self, now: Instant, fd: Fd, buf: &mut [u8]) -> Result<RecvMsg, Errno> {
        let s = self.sock(fd)?;
        // inet6_recv_error for an AF_INET6 socket, IPv4-mapped peers included.
        let v6 = s.family == AF_INET6;
        let ee = match s.state {
            SockState::Conn { h, .. } => {
                self.stack.socket(h).recv_errqueue().map_err(Errno::from)?
            }
            _ => None,
        };
        self.sync_events(); // sock_dequeue_err_skb's sk_error_report
        let Some(ee) = ee else {
            return err(errno::EAGAIN);
        };
        let (level, kind, offender) = match v6 {
            false => (SOL_IP, IP_RECVERR, 16),    // sizeof(struct sockaddr_in)
            true => (SOL_IPV6, IPV6_RECVERR, 28), // sizeof(struct sockaddr_in6)
        };
        let (mut cmsgs, stamped) = self.errqueue_timestamp_cmsgs(fd, ee.tstamp, now);
        // ip_recv_error: "copied = skb->len", cut to the caller's buffer.
        let copied = (ee.len as usize).min(buf.len());
        buf[..copied].fill(0);
        if let Some(stats) = ee.opt_stats {
            let data = stats.to_nla();
            let n = copied.min(data.len());
            buf[..n].copy_from_slice(&data[..n]);
            // __sock_recv_timestamp puts the statistics only after an
            // SCM_TIMESTAMPING ("if (!empty)"): none without SOF_TIMESTAMPING_SOFTWARE.
            if stamped {
                cmsgs.push(Cmsg {
                    level: SOL_SOCKET,
                    kind: SCM_TIMESTAMPING_OPT_STATS,
                    data,
                });
            }
        }
        let mut data = ee.ee.to_bytes().to_vec();
        data.extend_from_slice(&offender_addr(v6, ee.offender)[..offender]);
        cmsgs.push(Cmsg { level, kind, data });
        let mut flags = MSG_ERRQUEUE;
        if ee.len as usize > buf.len() {
            flags |= MSG_TRUNC;
        }
        Ok(RecvMsg {
            len: copied,
            flags,
            cmsgs,
        })
    }
}

/// The offender address after the `sock_extended_err` (`SO_EE_OFFENDER`): the
/// ICMP error's sender as a `sockaddr_in`, or on an `AF_INET6` socket a
/// `sockaddr_in6` (IPv4-mapped for an ICMP one, `ipv6_recv_error`); zeroes for an
/// entry of another origin. 28 bytes, of which a `sockaddr_in` takes 16.
fn offender_addr(v6_socket: bool, offender: Option<std::net::IpAddr>) -> [u8; 28] {
    use std::net::IpAddr;
    let mut b = [0u8; 28];
    let Some(ip) = offender else {
        return b;
    };
    match (v6_socket, ip) {
        (false, IpAddr::V4(a)) => {
            b[..2].copy_from_slice(&(AF_INET as u16).to_ne_bytes());
            b[4..8].copy_from_slice(&a.octets());
        }
        (_, ip) => {
            let a = match ip {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            b[..2].copy_from_slice(&(AF_INET6 as u16).to_ne_bytes());
            b[8..24].copy_from_slice(&a.octets());
        }
    }
    b
}
