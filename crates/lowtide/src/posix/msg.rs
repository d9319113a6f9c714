//! `recvmsg(2)` with its control messages (`put_cmsg`): `TCP_CM_INQ` for `TCP_INQ`.

use super::consts::*;
use super::{err, Errno, Fd, Host, SockState};
use crate::time::Instant;

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
    /// socket asked for: `TCP_CM_INQ` (`tcp_inq_hint`) with `TCP_INQ` on.
    pub fn recvmsg(
        &mut self,
        now: Instant,
        fd: Fd,
        buf: &mut [u8],
        flags: i32,
    ) -> Result<RecvMsg, Errno> {
        let s = self.sock(fd)?;
        let inq = s.opts.recvmsg_inq;
        let h = match s.state {
            SockState::Conn { h, .. } => h,
            _ => return err(errno::ENOTCONN),
        };
        let r = if flags & MSG_PEEK != 0 {
            self.stack.peek(h, buf)
        } else {
            self.stack.recv(now, h, buf)
        };
        self.sync_events();
        let len = r.map_err(Errno::from)?;
        let mut m = RecvMsg {
            len,
            ..RecvMsg::default()
        };
        if inq {
            // tcp_recvmsg: "if (msg->msg_get_inq) ... put_cmsg(TCP_CM_INQ)" after a
            // successful read.
            let hint = self.stack.status(h).map_or(0, |st| st.inq_hint) as i32;
            m.cmsgs.push(Cmsg {
                level: SOL_TCP,
                kind: TCP_CM_INQ,
                data: hint.to_ne_bytes().to_vec(),
            });
        }
        Ok(m)
    }
}
