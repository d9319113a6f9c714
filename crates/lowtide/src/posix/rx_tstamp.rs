//! Timestamps at the socket layer: `SO_TIMESTAMP`, `SO_TIMESTAMPNS`, their `_NEW`
//! forms and `SO_TIMESTAMPING(_NEW)` as options (net/core/sock.c
//! `sk_setsockopt`, `sk_getsockopt`), and the cmsgs a read carries (tcp.c
//! `tcp_recv_timestamp`) or an error-queue entry carries (net/socket.c
//! `__sock_recv_timestamp`). The times are `CLOCK_REALTIME` as the host sees it
//! ([`Host::set_realtime_zero`]); the stamps themselves: tcp/rx_tstamp.rs.

use super::consts::*;
use super::msg::Cmsg;
use super::sockopt::int_arg;
use super::{err, Errno, Fd, Host, SockState};
use crate::tcp::rx_tstamp::RcvTstamp;
use crate::tcp::tstamp::{
    check_flags, check_late_flags, realtime, SOF_TIMESTAMPING_OPT_ID, SOF_TIMESTAMPING_OPT_ID_TCP,
    SOF_TIMESTAMPING_OPT_RX_FILTER, SOF_TIMESTAMPING_RX_SOFTWARE, SOF_TIMESTAMPING_SOFTWARE,
};
use crate::time::Instant;

/// `(new, ns)` of `SO_TIMESTAMP` (`_OLD`), `SO_TIMESTAMPNS` (`_OLD`),
/// `SO_TIMESTAMP_NEW` and `SO_TIMESTAMPNS_NEW`; `None` for other names.
pub(super) fn rx_option(name: i32) -> Option<(bool, bool)> {
    match name {
        SO_TIMESTAMP => Some((false, false)),
        SO_TIMESTAMPNS => Some((false, true)),
        SO_TIMESTAMP_NEW => Some((true, false)),
        SO_TIMESTAMPNS_NEW => Some((true, true)),
        _ => None,
    }
}

/// A cmsg of `SOL_SOCKET`.
fn sol_socket(kind: i32, data: Vec<u8>) -> Cmsg {
    Cmsg {
        level: SOL_SOCKET,
        kind,
        data,
    }
}

/// Two 64-bit words (`struct timeval`, `struct timespec` and their 64-bit-time
/// forms are all two on x86-64).
fn two(a: i64, b: i64) -> Vec<u8> {
    [a.to_ne_bytes(), b.to_ne_bytes()].concat()
}

impl Host {
    /// `setsockopt` of a timestamp option of `SOL_SOCKET`; `None` for other
    /// options.
    pub(super) fn set_timestamp_option(
        &mut self,
        fd: Fd,
        level: i32,
        name: i32,
        val: &[u8],
    ) -> Option<Result<(), Errno>> {
        if level != SOL_SOCKET {
            return None;
        }
        if let Some(k) = rx_option(name) {
            return Some(int_arg(val).and_then(|v| self.set_rx_timestamp(fd, k, v != 0)));
        }
        if name == SO_TIMESTAMPING || name == SO_TIMESTAMPING_NEW {
            // An int, or struct so_timestamping { flags, bind_phc }.
            let flags = int_arg(val.get(..4).unwrap_or(val));
            let new = name == SO_TIMESTAMPING_NEW;
            return Some(flags.and_then(|f| self.set_timestamping(fd, f as u32, new)));
        }
        None
    }

    /// `getsockopt` of a timestamp option of `SOL_SOCKET` (`sk_getsockopt`): the
    /// bytes (before the caller's length cuts them); `None` for other options.
    pub(super) fn get_timestamp_option(
        &self,
        fd: Fd,
        level: i32,
        name: i32,
    ) -> Option<Result<Vec<u8>, Errno>> {
        if level != SOL_SOCKET {
            return None;
        }
        if let Some((new, ns)) = rx_option(name) {
            let on = self.timestamp_flags(fd).map(|(rx, _)| rx.get(new, ns));
            return Some(on.map(|on| (on as i32).to_ne_bytes().to_vec()));
        }
        if name == SO_TIMESTAMPING || name == SO_TIMESTAMPING_NEW {
            return Some(self.timestamping_opt(fd, name == SO_TIMESTAMPING_NEW));
        }
        None
    }

    /// `setsockopt(SO_TIMESTAMP | SO_TIMESTAMPNS | ..._NEW)` (`sock_set_timestamp`):
    /// `new` and `ns` from [`rx_option`]; any non-zero int is on.
    pub(super) fn set_rx_timestamp(
        &mut self,
        fd: Fd,
        (new, ns): (bool, bool),
        on: bool,
    ) -> Result<(), Errno> {
        let conn = self.conn(fd)?;
        if let Some(h) = conn {
            let r = self.stack.socket(h).set_rx_timestamp(on, new, ns);
            r.map_err(Errno::from)?;
        }
        self.sock_mut(fd)?.opts.rx_tstamp.set(on, new, ns);
        self.listener_follows(fd)
    }

    /// A listener's children inherit its options (`sk_clone_lock`): the stack's
    /// copy follows them.
    fn listener_follows(&mut self, fd: Fd) -> Result<(), Errno> {
        let s = self.sock(fd)?;
        if let SockState::Listening(h) = s.state {
            let opts = s.opts.clone();
            let r = self.stack.socket(h).set_listener_options(&opts);
            r.map_err(Errno::from)?;
        }
        Ok(())
    }

    /// `setsockopt(SO_TIMESTAMPING | SO_TIMESTAMPING_NEW)` (`sock_set_timestamping`):
    /// an int or `struct so_timestamping { flags, bind_phc }`. `OPT_ID` needs a
    /// connection (CLOSE and LISTEN refuse it).
    pub(super) fn set_timestamping(&mut self, fd: Fd, flags: u32, new: bool) -> Result<(), Errno> {
        match self.conn(fd)? {
            Some(h) => {
                let r = self.stack.socket(h).set_timestamping(flags, new);
                r.map_err(Errno::from)?
            }
            None if flags & SOF_TIMESTAMPING_OPT_ID != 0 => return err(errno::EINVAL),
            None => {
                check_flags(flags).map_err(Errno::from)?;
                let bound = self.sock(fd)?.opts.bound_dev_if != 0;
                check_late_flags(flags, bound).map_err(Errno::from)?
            }
        }
        let s = self.sock_mut(fd)?;
        s.opts.tsflags = flags & !(SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_ID_TCP);
        s.opts.rx_tstamp.tstamp_new = new;
        self.listener_follows(fd)
    }

    /// The socket's timestamp bits and `sk_tsflags`: its connection's, else its own.
    pub(super) fn timestamp_flags(&self, fd: Fd) -> Result<(RcvTstamp, u32), Errno> {
        let s = self.sock(fd)?;
        Ok(match s.state {
            SockState::Conn { h, .. } => {
                let r = self.stack.socket_ref(h);
                let rx = r.rx_timestamp().map_err(Errno::from)?;
                (rx, r.timestamping().map_err(Errno::from)?)
            }
            _ => (s.opts.rx_tstamp, s.opts.tsflags),
        })
    }

    /// `getsockopt(SO_TIMESTAMPING | SO_TIMESTAMPING_NEW)`: `struct so_timestamping`
    /// (`bind_phc` 0); the `_NEW` one reads the flags only when they were set
    /// through it (`SOCK_TSTAMP_NEW`), else zeroes.
    pub(super) fn timestamping_opt(&self, fd: Fd, new: bool) -> Result<Vec<u8>, Errno> {
        let (rx, flags) = self.timestamp_flags(fd)?;
        let flags = if !new || rx.tstamp_new { flags } else { 0 };
        Ok([flags.to_ne_bytes(), 0u32.to_ne_bytes()].concat())
    }

    /// `tcp_recv_timestamp` for a read whose `tss` is `at` (the last stamped skb's
    /// time, tcp/rx_tstamp.rs): `SCM_TIMESTAMP(NS)(_NEW)` with `SO_TIMESTAMP(NS)`,
    /// then `SCM_TIMESTAMPING(_NEW)` with the time in `ts[0]` when
    /// `SOF_TIMESTAMPING_SOFTWARE` and either `RX_SOFTWARE` or no `OPT_RX_FILTER`.
    pub(super) fn recv_timestamp_cmsgs(&self, fd: Fd, at: Instant) -> Vec<Cmsg> {
        let Ok((rx, tsflags)) = self.timestamp_flags(fd) else {
            return Vec::new();
        };
        let mut cmsgs = Vec::new();
        if rx.rcvtstamp {
            cmsgs.push(self.so_timestamp(rx, at));
        }
        let sw = tsflags & SOF_TIMESTAMPING_SOFTWARE != 0
            && (tsflags & SOF_TIMESTAMPING_RX_SOFTWARE != 0
                || tsflags & SOF_TIMESTAMPING_OPT_RX_FILTER == 0);
        if sw {
            cmsgs.push(self.scm_timestamping(rx, at));
        }
        cmsgs
    }

    /// `sock_recv_timestamp` / `__sock_recv_timestamp` for an error-queue entry
    /// stamped `tstamp`: `SCM_TIMESTAMP(NS)` with `SO_TIMESTAMP(NS)` (the time of
    /// `now` when the entry has none: "race occurred between timestamp enabling
    /// and packet receiving"), then `SCM_TIMESTAMPING` with
    /// `SOF_TIMESTAMPING_SOFTWARE`. The flag says whether that last one was put
    /// (`SCM_TIMESTAMPING_OPT_STATS` may follow only then).
    pub(super) fn errqueue_timestamp_cmsgs(
        &self,
        fd: Fd,
        tstamp: Option<Instant>,
        now: Instant,
    ) -> (Vec<Cmsg>, bool) {
        let Ok((rx, tsflags)) = self.timestamp_flags(fd) else {
            return (Vec::new(), false);
        };
        let sw = tsflags & SOF_TIMESTAMPING_SOFTWARE != 0;
        let wanted =
            rx.rcvtstamp || tsflags & SOF_TIMESTAMPING_RX_SOFTWARE != 0 || (tstamp.is_some() && sw);
        if !wanted {
            return (Vec::new(), false);
        }
        let mut cmsgs = Vec::new();
        let mut kt = tstamp;
        if rx.rcvtstamp {
            let t = *kt.get_or_insert(now);
            cmsgs.push(self.so_timestamp(rx, t));
        }
        // skb_is_err_queue: OPT_RX_FILTER does not apply.
        let stamped = match kt.filter(|_| sw) {
            Some(t) => {
                cmsgs.push(self.scm_timestamping(rx, t));
                true
            }
            None => false,
        };
        (cmsgs, stamped)
    }

    /// `SCM_TIMESTAMP` (`struct timeval`) or `SCM_TIMESTAMPNS` (`struct timespec`),
    /// the `_NEW` type with `SOCK_TSTAMP_NEW`.
    fn so_timestamp(&self, rx: RcvTstamp, at: Instant) -> Cmsg {
        let (sec, nsec) = realtime(at, self.realtime_zero);
        match (rx.rcvtstampns, rx.tstamp_new) {
            (false, false) => sol_socket(SCM_TIMESTAMP, two(sec, nsec / 1000)),
            (false, true) => sol_socket(SCM_TIMESTAMP_NEW, two(sec, nsec / 1000)),
            (true, false) => sol_socket(SCM_TIMESTAMPNS, two(sec, nsec)),
            (true, true) => sol_socket(SCM_TIMESTAMPNS_NEW, two(sec, nsec)),
        }
    }

    /// `put_cmsg_scm_timestamping(64)`: `struct scm_timestamping(64)`, the software
    /// time in `ts[0]`, `ts[1]` and `ts[2]` (hardware) zero.
    fn scm_timestamping(&self, rx: RcvTstamp, at: Instant) -> Cmsg {
        let (sec, nsec) = realtime(at, self.realtime_zero);
        let mut data = two(sec, nsec);
        data.resize(48, 0);
        let kind = match rx.tstamp_new {
            false => SCM_TIMESTAMPING,
            true => SCM_TIMESTAMPING_NEW,
        };
        sol_socket(kind, data)
    }
}
