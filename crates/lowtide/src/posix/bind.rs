//! `bind(2)` and `listen(2)` of the socket layer: the local port, as Linux's
//! inet_connection_sock.c (`inet_csk_get_port`, `inet_csk_bind_conflict`) and
//! `inet_listen`.

use super::consts::errno;
use super::{addr, err, Errno, Fd, File, Host, SockState};
use std::net::{IpAddr, SocketAddr};

impl Host {
    /// Whether `addr` (an engine address; `v6only` its socket's `IPV6_V6ONLY`) would
    /// share a port with a bound socket (`inet_csk_bind_conflict`).
    fn port_in_use(&self, addr: SocketAddr, v6only: bool, reuse: bool) -> bool {
        self.files.values().any(|f| match f {
            File::Socket(s) => {
                s.bound
                    .is_some_and(|b| addr::conflict(b, s.opts.v6only, addr, v6only))
                    && !(reuse && s.reuseaddr && !matches!(s.state, SockState::Listening(_)))
            }
            File::Epoll(_) | File::Pipe(_) => false,
        })
    }

    /// `bind(2)` (`inet_bind`, `__inet6_bind`: see the `addr` module for the families).
    pub fn bind(&mut self, fd: Fd, addr: SocketAddr) -> Result<(), Errno> {
        let s = self.sock(fd)?;
        if s.bound.is_some() || s.state != SockState::Unconnected {
            return err(errno::EINVAL);
        }
        let reuse = s.reuseaddr;
        let (mut addr, ipv6only) = addr::bind_addr(s.family, s.opts.v6only, addr)?;
        let v6only = s.opts.v6only || ipv6only;
        // inet_can_nonlocal_bind: IP_FREEBIND lets a socket bind an address the
        // host does not (yet) have.
        let nonlocal = s.opts.freebind;
        if !addr.ip().is_unspecified() && !self.stack.has_address(addr.ip()) && !nonlocal {
            return err(errno::EADDRNOTAVAIL);
        }
        if addr.port() == 0 {
            addr.set_port(self.ephemeral_port(addr.ip(), v6only)?);
        } else if self.port_in_use(addr, v6only, reuse) {
            return err(errno::EADDRINUSE);
        }
        let s = self.sock_mut(fd)?;
        s.bound = Some(addr);
        s.opts.v6only = v6only;
        Ok(())
    }

    fn ephemeral_port(&self, ip: IpAddr, v6only: bool) -> Result<u16, Errno> {
        let [lo, hi] = self.stack.config().ip_local_port_range;
        (lo..=hi)
            .find(|&p| !self.port_in_use(SocketAddr::new(ip, p), v6only, false))
            .ok_or(Errno(errno::EADDRINUSE))
    }

    /// `listen(2)`; an unbound socket gets an ephemeral port (`inet_autobind`).
    /// The backlog is at most `net.core.somaxconn`, a negative one somaxconn, as
    /// `__sys_listen` compares it unsigned; on a listener only the backlog changes
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
        let local = match s.bound {
            Some(a) => a,
            None => {
                let any = addr::any(s.family, 0).ip();
                SocketAddr::new(any, self.ephemeral_port(any, s.opts.v6only)?)
            }
        };
        let opts = s.opts.clone();
        let h = self
            .stack
            .listen_with(local, backlog as u32, &opts)
            .map_err(Errno::from)?;
        let s = self.sock_mut(fd)?;
        s.bound = Some(local);
        s.state = SockState::Listening(h);
        self.by_handle.insert(h, fd);
        Ok(())
    }
}
