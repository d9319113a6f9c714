//! Active TCP Fast Open at the socket layer: `tcp_sendmsg_fastopen` and
//! `__inet_stream_connect` called from `sendmsg` (`is_sendmsg`), for `MSG_FASTOPEN`
//! and for the first write after a deferred `connect` (`TCP_FASTOPEN_CONNECT`).

use super::consts::*;
use super::{err, Errno, Fd, Host, SockState};
use crate::tcp::fastopen::TFO_CLIENT_ENABLE;
use crate::time::Instant;
use crate::TcpState;
use std::net::SocketAddr;

/// The destination of a `sendto`/`sendmsg` (`msg_name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendTo {
    /// None given (`send`, `write`, a null `msg_name`).
    None,
    /// An `AF_UNSPEC` address (a disconnect request for `connect`).
    Unspec,
    /// An address.
    Addr(SocketAddr),
}

impl Host {
    /// `tcp_sendmsg_fastopen`: `EOPNOTSUPP` without `TFO_CLIENT_ENABLE` or to
    /// `AF_UNSPEC`; a deferred connect sends its SYN with the data now; else a
    /// connect whose SYN carries the data (`EALREADY` while one runs, `EISCONN` once
    /// connected). The SYN's bytes are the result; with none, a non-blocking caller
    /// gets `EINPROGRESS` and a blocking one `EAGAIN`, to wait for the connection
    /// and write then. `None`: a connect that finished meanwhile; the data goes as
    /// for any connected socket.
    pub(crate) fn sendmsg_fastopen(
        &mut self,
        now: Instant,
        fd: Fd,
        data: &[u8],
        flags: i32,
        dest: SendTo,
    ) -> Result<Option<usize>, Errno> {
        if self.stack.config().tcp_fastopen & TFO_CLIENT_ENABLE == 0 || dest == SendTo::Unspec {
            return err(errno::EOPNOTSUPP);
        }
        let nonblock = self.is_nonblocking(fd, flags);
        let copied = match self.sock(fd)?.state {
            SockState::Conn { h, .. } if self.stack.fastopen_deferred(h) => {
                let zc = flags & MSG_ZEROCOPY != 0;
                let r = self
                    .stack
                    .fastopen_connect_deferred_handle(now, h, data, zc);
                self.sync_events();
                r.map_err(Errno::from)?
            }
            // __inet_stream_connect in SS_CONNECTING: EALREADY during the handshake;
            // once it is over the socket is connected and the data goes as usual.
            SockState::Conn {
                h,
                connected: false,
            } => {
                self.connect_progress(fd, h)?;
                return Ok(None);
            }
            SockState::Conn { .. } | SockState::Listening(_) => return err(errno::EISCONN),
            SockState::Unconnected => {
                let SendTo::Addr(remote) = dest else {
                    return err(errno::EINVAL); // tcp_v4_connect without an address
                };
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

    /// A `connect` with `TCP_FASTOPEN_CONNECT` holds its SYN for the first write.
    pub fn is_fastopen_deferred(&self, fd: Fd) -> bool {
        matches!(self.sock(fd).map(|s| s.state), Ok(SockState::Conn { h, .. }) if self.stack.fastopen_deferred(h))
    }
}
