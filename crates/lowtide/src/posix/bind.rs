//! `bind(2)` and `listen(2)` of the socket layer: the local port, as Linux's
//! inet_connection_sock.c (`inet_csk_get_port`, `inet_csk_find_open_port`,
//! `inet_csk_bind_conflict`, `inet_bind_conflict`) and `inet_csk_listen_start`.
//!
//! A port is held by every socket bound to it: a socket bound here and neither
//! connected nor listening, and in the engine ([`Stack::port_owners`]) listeners,
//! connections (orphans still closing and a listener's children included) and
//! timewait sockets. All sockets of a [`Host`] have one owner (one process), so
//! `SO_REUSEPORT`'s same-user rule always holds; two sockets bound to different
//! devices (`SO_BINDTODEVICE`) never conflict.
//!
//! [`Stack::port_owners`]: crate::Stack::port_owners

use super::consts::{errno, AF_INET6};
use super::sockaddr::UserSockAddr;
use super::{addr, err, Errno, Fd, File, Host, SockState, Socket};
use crate::stack::PortOwner;
use crate::tcp::TcpState;
use std::net::SocketAddr;

/// What a socket asking for a port brings to the rule: `sk_reuse`,
/// `sk_reuseport`, `sk_ipv6only` and `sk_bound_dev_if`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asker {
    pub reuse: bool,
    pub reuseport: bool,
    pub v6only: bool,
    pub bound_dev_if: u32,
}

/// `inet_bind_conflict` for two sockets of one owner: whether `sk2` keeps `sk`
/// off the port (when their addresses overlap). Never when both are bound to
/// devices and not the same one; else `relax` lets `SO_REUSEADDR` sockets share
/// with ones that set it and do not listen (an explicit port, or
/// `ip_autobind_reuse`'s second search), and `reuseport_ok` lets `SO_REUSEPORT`
/// sockets share (an explicit port only).
pub(crate) fn bind_conflict(sk: Asker, sk2: &PortOwner, relax: bool, reuseport_ok: bool) -> bool {
    let (dev, dev2) = (sk.bound_dev_if, sk2.bound_dev_if);
    if dev != 0 && dev2 != 0 && dev != dev2 {
        return false;
    }
    if sk.reuse && sk2.reuse && !sk2.listening {
        // sk2 in TIME_WAIT or of the same user: always here.
        !relax || (!reuseport_ok && sk.reuseport && sk2.reuseport)
    } else {
        !reuseport_ok || !sk.reuseport || !sk2.reuseport
    }
}

impl Host {
    /// Every socket holding `port` but the one of `fd` (`tb->owners`, `sk2 != sk`).
    fn port_owners(&self, port: u16, fd: Option<Fd>) -> Vec<PortOwner> {
        let own = fd
            .and_then(|fd| self.sock(fd).ok())
            .and_then(|s| s.handle());
        let mut owners: Vec<PortOwner> = self.stack.port_owners(port);
        owners.retain(|o| o.handle.is_none() || o.handle != own);
        let own_file = fd.and_then(|fd| self.files.id(fd));
        for (f, file) in self.files.files() {
            let File::Socket(s) = file else { continue };
            match s.bound {
                Some(b) if s.held && b.port() == port && Some(f) != own_file => {
                    owners.push(PortOwner {
                        local: b,
                        reuse: s.opts.reuse,
                        reuseport: s.opts.reuseport,
                        v6only: s.opts.v6only,
                        bound_dev_if: s.opts.bound_dev_if,
                        listening: false,
                        timewait: false,
                        handle: None,
                    })
                }
                _ => {}
            }
        }
        owners
    }

    /// `inet_csk_bind_conflict`: whether a socket of `fd` asking for `addr` (an
    /// engine address) meets a socket that keeps it off, on an overlapping address
    /// (`inet_rcv_saddr_equal`).
    fn bind_conflict(
        &self,
        fd: Option<Fd>,
        addr: SocketAddr,
        sk: Asker,
        relax: bool,
        reuseport_ok: bool,
    ) -> bool {
        self.port_owners(addr.port(), fd).iter().any(|o| {
            addr::conflict(o.local, o.v6only, addr, sk.v6only)
                && bind_conflict(sk, o, relax, reuseport_ok)
        })
    }

    /// `bind(2)` (`inet_bind`, `__inet6_bind`: see the `addr` module for the
    /// families): an explicit port as `inet_csk_get_port` (`relax`, SO_REUSEPORT
    /// allowed), port 0 as `inet_csk_find_open_port`.
    pub fn bind(&mut self, fd: Fd, addr: SocketAddr) -> Result<(), Errno> {
        self.bind_user(fd, &UserSockAddr::from(addr))
    }

    /// [`Host::bind`] of a caller's `struct sockaddr`, its checks in Linux's order:
    /// the length and family (`inet_bind_sk`, `inet6_bind_sk`); then `__inet_bind`
    /// checks the address before the socket's state ("active socket, double bind":
    /// `EINVAL`), `__inet6_bind` after it.
    pub fn bind_user(&mut self, fd: Fd, addr: &UserSockAddr) -> Result<(), Errno> {
        let s = self.sock(fd)?;
        let addr = addr.for_bind(s.family)?;
        let active = self.has_port_or_state(s);
        if active && s.family == AF_INET6 {
            return err(errno::EINVAL);
        }
        let (mut addr, ipv6only) = addr::bind_addr(s.family, s.opts.v6only, addr)?;
        let v6only = s.opts.v6only || ipv6only;
        // inet_can_nonlocal_bind: IP_FREEBIND lets a socket bind an address the
        // host does not (yet) have.
        let nonlocal = s.opts.freebind;
        if !addr.ip().is_unspecified() && !self.stack.has_address(addr.ip()) && !nonlocal {
            return err(errno::EADDRNOTAVAIL);
        }
        if active {
            return err(errno::EINVAL);
        }
        let sk = Asker {
            reuse: s.opts.reuse,
            reuseport: s.opts.reuseport,
            v6only,
            bound_dev_if: s.opts.bound_dev_if,
        };
        let bind_lock = addr.port() != 0; // SOCK_BINDPORT_LOCK
        if addr.port() == 0 {
            addr.set_port(self.find_open_port(addr, sk)?);
        } else if self.bind_conflict(Some(fd), addr, sk, true, true) {
            return err(errno::EADDRINUSE);
        }
        self.stack.bhash_hold(addr.port());
        let s = self.sock_mut(fd)?;
        s.bound = Some(addr);
        s.held = true;
        s.bind_lock = bind_lock;
        s.bindaddr_lock = !addr.ip().is_unspecified(); // SOCK_BINDADDR_LOCK
        s.opts.v6only = v6only;
        Ok(())
    }

    /// `__inet_bind`'s "active socket, double bind" check (`sk_state != TCP_CLOSE
    /// || inet_num`), whatever `sock->state`: a connection (connected or not) that
    /// ended is in `TCP_CLOSE`, its port freed unless the user bound one
    /// (`tcp_set_state`'s `inet_put_port` without `SOCK_BINDPORT_LOCK`).
    fn has_port_or_state(&self, s: &Socket) -> bool {
        match s.state {
            SockState::Unconnected => s.bound.is_some(),
            SockState::Listening(_) => true,
            SockState::Conn { h, .. } => {
                s.held || s.bind_lock || self.stack.state(h) != Ok(TcpState::Closed)
            }
        }
    }

    /// `inet_csk_find_open_port`: a port of `net.ipv4.ip_local_port_range` for
    /// `addr` (port 0) that no socket holds in a way that conflicts. The search
    /// starts at a random odd offset (`__inet_hash_connect` favours even ones: "we do
    /// the opposite to not pollute connect() users"), takes the other parity next;
    /// a `SO_REUSEADDR` socket tries the lower half of the range first, then the
    /// upper; ports in `ip_local_reserved_ports` are passed over. With
    /// `ip_autobind_reuse`, a second search may share a port with `SO_REUSEADDR`
    /// sockets that do not listen. `EADDRINUSE` when none is left.
    fn find_open_port(&mut self, addr: SocketAddr, sk: Asker) -> Result<u16, Errno> {
        let cfg = self.stack.config();
        let [lo, hi] = cfg.ip_local_port_range;
        let autobind_reuse = cfg.ip_autobind_reuse;
        let mut relax = false;
        loop {
            let mut attempt_half = u8::from(sk.reuse);
            loop {
                let (mut low, mut high) = (lo as u32, hi as u32 + 1);
                if high - low < 4 {
                    attempt_half = 0;
                }
                if attempt_half != 0 {
                    let half = low + (((high - low) >> 2) << 1);
                    match attempt_half {
                        1 => high = half,
                        _ => low = half,
                    }
                }
                let mut remaining = high - low;
                if remaining > 1 {
                    remaining &= !1;
                }
                let offset = self.stack.random_below(remaining) | 1;
                if let Some(p) = self.scan_ports(addr, sk, (low, high, remaining), offset, relax) {
                    return Ok(p);
                }
                if attempt_half != 1 {
                    break;
                }
                attempt_half = 2;
            }
            if !autobind_reuse || relax {
                return err(errno::EADDRINUSE);
            }
            relax = true;
        }
    }

    /// `inet_csk_find_open_port`'s two scans of one range (`other_parity_scan`):
    /// from `offset`, every other port, then from `offset - 1`.
    fn scan_ports(
        &self,
        addr: SocketAddr,
        sk: Asker,
        (low, high, remaining): (u32, u32, u32),
        mut offset: u32,
        relax: bool,
    ) -> Option<u16> {
        let cfg = self.stack.config();
        loop {
            let mut port = low + offset;
            for _ in (0..remaining).step_by(2) {
                if port >= high {
                    port -= remaining;
                }
                let p = port as u16;
                let at = SocketAddr::new(addr.ip(), p);
                if !cfg.is_local_reserved_port(p) && !self.bind_conflict(None, at, sk, relax, false)
                {
                    return Some(p);
                }
                port += 2;
            }
            offset = offset.wrapping_sub(1);
            if offset & 1 != 0 {
                return None;
            }
        }
    }

    /// `listen(2)`: `inet_csk_listen_start` takes the bound port again as a
    /// listener (`get_port` in `TCP_LISTEN`: a `SO_REUSEADDR` neighbour that listens
    /// now conflicts), or a port of its own for an unbound socket. The backlog is at
    /// most `net.core.somaxconn`, a negative one somaxconn, as `__sys_listen`
    /// compares it unsigned; on a listener only the backlog changes
    /// (`__inet_listen_sk`).
    pub fn listen(&mut self, fd: Fd, backlog: i32) -> Result<(), Errno> {
        let s = self.sock(fd)?;
        match s.state {
            SockState::Listening(h) => {
                return self
                    .stack
                    .set_listen_backlog(h, backlog as u32)
                    .map_err(Errno::from)
            }
            SockState::Conn { .. } => return err(errno::EINVAL),
            SockState::Unconnected => {}
        }
        let sk = Asker {
            reuse: s.opts.reuse,
            reuseport: s.opts.reuseport,
            v6only: s.opts.v6only,
            bound_dev_if: s.opts.bound_dev_if,
        };
        let held = s.held;
        let local = match Host::local_base(s) {
            Some(a) if a.port() == 0 => SocketAddr::new(a.ip(), self.find_open_port(a, sk)?),
            Some(a) if self.bind_conflict(Some(fd), a, sk, true, true) => {
                return err(errno::EADDRINUSE)
            }
            Some(a) => a,
            None => {
                let any = addr::any(s.family, 0);
                SocketAddr::new(any.ip(), self.find_open_port(any, sk)?)
            }
        };
        let s = self.sock_mut(fd)?;
        s.opts.listen_start();
        let opts = s.opts.clone();
        let h = self
            .stack
            .listen_with(local, backlog as u32, &opts)
            .map_err(Errno::from)?;
        if held {
            self.stack.bhash_release(local.port());
        }
        let s = self.sock_mut(fd)?;
        s.bound = Some(local);
        s.held = false;
        s.state = SockState::Listening(h);
        self.bind_handle(h, fd);
        Ok(())
    }

    /// The socket of `fd` is left bound without a connection or a listener
    /// (`tcp_set_state(TCP_CLOSE)` after a failed connect or a stopped listener):
    /// it keeps its port only if the user bound one (`SOCK_BINDPORT_LOCK`), else
    /// `inet_put_port` lets it go.
    pub(super) fn rebind_after_close(&mut self, fd: Fd) {
        let Ok(s) = self.sock_mut(fd) else { return };
        let port = match (s.bind_lock, s.held, s.bound) {
            (true, false, Some(b)) => b.port(),
            _ => return,
        };
        s.held = true;
        self.stack.bhash_hold(port);
    }

    /// The socket of `fd` hands its port to the engine (a connection now holds it)
    /// or closes: it holds it no more.
    pub(super) fn unhold_port(&mut self, fd: Fd) {
        let Ok(s) = self.sock_mut(fd) else { return };
        if let (true, Some(b)) = (s.held, s.bound) {
            s.held = false;
            self.stack.bhash_release(b.port());
        }
    }
}
