//! Active TCP Fast Open at the socket layer: `tcp_sendmsg_fastopen` and
//! `__inet_stream_connect` called from `sendmsg` (`is_sendmsg`), for `MSG_FASTOPEN`
//! and for the first write after a deferred `connect` (`TCP_FASTOPEN_CONNECT`).

use super::consts::*;
use super::{err, Errno, Fd, Host, SockState, UserSockAddr};
use crate::tcp::fastopen::TFO_CLIENT_ENABLE;
use crate::time::Instant;
use crate::{TcpState, UserBytes};

/// The destination of a `sendto`/`sendmsg` (`msg_name`), as the caller gave it.
/// TCP reads it only for Fast Open (`tcp_sendmsg_fastopen`), and there only once
/// the socket's state lets `__inet_stream_connect` connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendTo {
    /// None given (`send`, `write`, a null `msg_name`).
    None,
    /// The caller's `struct sockaddr` (`sendto`'s `addr` of any length, 0 too;
    /// `sendmsg`'s `msg_name` of a length above 0).
    Name(UserSockAddr),
}

impl Host {
    /// `tcp_sendmsg_fastopen`: `EOPNOTSUPP` without `TFO_CLIENT_ENABLE` or to
    /// `AF_UNSPEC`; a deferred connect sends its SYN with the data now; else a
    /// connect whose SYN carries the data (`EALREADY` while one runs, `EISCONN` once
    /// connected), `__inet_stream_connect`'s: a destination short of `sa_family` is
    /// `EINVAL` before the state (after a deferred SYN), which answers before
    /// `tcp_v4_connect`/`tcp_v6_connect` read the address (none is a length of 0,
    /// `EINVAL`). The SYN's bytes are the result; with none, a non-blocking caller
    /// gets `EINPROGRESS` and a blocking one `EAGAIN`, to wait for the connection
    /// and write then. `None`: a connect that finished meanwhile; the data goes as
    /// for any connected socket.
    pub(crate) fn sendmsg_fastopen(
        &mut self,
        now: Instant,
        fd: Fd,
        data: UserBytes<'_>,
        flags: i32,
        dest: SendTo,
    ) -> Result<Option<usize>, Errno> {
        let name = match dest {
            SendTo::Name(a) => Some(a),
            SendTo::None => None,
        };
        if self.stack.config().tcp_fastopen & TFO_CLIENT_ENABLE == 0
            || name.is_some_and(|a| a.is_unspec())
        {
            return err(errno::EOPNOTSUPP);
        }
        // __inet_stream_connect: "if (addr_len < sizeof(uaddr->sa_family))".
        let short = name.is_some_and(|a| a.len() < 2);
        let nonblock = self.is_nonblocking(fd, flags);
        let s = self.sock(fd)?;
        let copied = match s.state {
            SockState::Conn { h, .. } if self.stack.fastopen_deferred(h) => {
                let zc = flags & MSG_ZEROCOPY != 0;
                let r = self
                    .stack
                    .fastopen_connect_deferred_handle(now, h, data, zc);
                self.sync_events();
                let n = r.map_err(Errno::from)?;
                if short {
                    return err(errno::EINVAL); // tcp_connect ran first
                }
                n
            }
            _ if short => return err(errno::EINVAL),
            // __inet_stream_connect in SS_CONNECTING: EALREADY during the handshake;
            // once it is over the socket is connected and the data goes as usual.
            SockState::Conn {
                h,
                connected: false,
            } => {
                self.connect_progress(now, fd, h)?;
                return Ok(None);
            }
            SockState::Conn { .. } | SockState::Listening(_) => return err(errno::EISCONN),
            SockState::Unconnected => {
                let remote = name.unwrap_or_default().for_connect(s.family)?;
                self.connect_tfo(now, fd, remote, Some((data, flags & MSG_ZEROCOPY != 0)))?
                    .1
            }
        };
        match (copied, nonblock) {
            (0, true) => err(errno::EINPROGRESS),
            (0, false) => err(errno::EAGAIN),
            (n, _) => Ok(Some(n)),
        }
    }

    /// `sendmsg(2)` of `len` bytes from a buffer whose copy faults (a NULL pointer),
    /// for a Fast Open connect (`MSG_FASTOPEN`, or the write a `TCP_FASTOPEN_CONNECT`
    /// waits for): the SYN leaves without data as `tcp_send_syn_data`'s fallback
    /// sends it, and the result is [`Host::sendmsg`]'s for a SYN that took nothing
    /// (`EINPROGRESS`, or `EAGAIN` for a blocking caller to wait for the connection
    /// and try again). Elsewhere `tcp_sendmsg_locked` fails as with any buffer
    /// before it copies (a send of nothing says how), then `EFAULT`.
    pub fn sendmsg_fault(
        &mut self,
        now: Instant,
        fd: Fd,
        len: usize,
        flags: i32,
        dest: SendTo,
    ) -> Result<usize, Errno> {
        if self.is_fastopen_send(fd, flags) {
            // Never Some: the SYN takes no byte of a faulting buffer.
            self.sendmsg_fastopen(now, fd, UserBytes::Fault(len), flags, dest)?;
        }
        self.sendmsg(now, fd, &[], flags & !MSG_FASTOPEN, SendTo::None)?;
        err(errno::EFAULT)
    }

    /// A blocking writer starts (`waiting`) or stops waiting for `fd`'s connection
    /// with data left to send (`sk_write_pending`): a Fast Open send whose SYN did
    /// not take all its data (`inet_wait_for_connect`'s write bias), or a write on a
    /// connection still in its handshake (`sk_stream_wait_connect`). While one
    /// waits, the ACK of the SYN-ACK is left for its data to carry. A writer that
    /// waits for buffer space on an established connection does not count: the
    /// result says whether this call counted (call again with `false` once only if so).
    pub fn set_write_pending(&mut self, fd: Fd, waiting: bool) -> Result<bool, Errno> {
        let Some(h) = self.conn(fd)? else {
            return Ok(false);
        };
        let state = self.stack.state(h).map_err(Errno::from)?;
        if waiting && !matches!(state, TcpState::SynSent | TcpState::SynRecv) {
            return Ok(false);
        }
        self.stack
            .socket(h)
            .set_write_pending(waiting)
            .map_err(Errno::from)?;
        Ok(true)
    }

    /// `sk_state == TCP_CLOSE`: no connection yet, or one that ended (a reset, a
    /// timeout, a refused connect) and is not yet disconnected. `do_tcp_setsockopt`
    /// takes the Fast Open options then.
    pub(crate) fn in_tcp_close(&self, fd: Fd) -> Result<bool, Errno> {
        Ok(match self.sock(fd)?.state {
            SockState::Unconnected => true,
            SockState::Listening(_) => false,
            SockState::Conn { h, .. } => {
                self.stack.state(h).map_or(true, |s| s == TcpState::Closed)
            }
        })
    }

    /// A `connect` with `TCP_FASTOPEN_CONNECT` holds its SYN for the first write.
    pub fn is_fastopen_deferred(&self, fd: Fd) -> bool {
        matches!(self.sock(fd).map(|s| s.state), Ok(SockState::Conn { h, .. }) if self.stack.fastopen_deferred(h))
    }

    /// A send with `flags` on `fd` is a Fast Open connect: `MSG_FASTOPEN`, or the
    /// write a `TCP_FASTOPEN_CONNECT` connect waits for (`tcp_sendmsg_locked`'s
    /// `tcp_sendmsg_fastopen` branch).
    pub fn is_fastopen_send(&self, fd: Fd, flags: i32) -> bool {
        flags & MSG_FASTOPEN != 0 || self.is_fastopen_deferred(fd)
    }
}
