//! `connect(2)` and `connect(AF_UNSPEC)` as `__inet_stream_connect`, `tcp_v4_connect`
//! / `tcp_v6_connect` and `tcp_disconnect` see them from the socket layer: the first
//! call, the progress a later call reports, and a disconnect that keeps the socket.

use super::*;

impl Host {
    /// `connect(2)`. The first call returns `EINPROGRESS`; calling again reports
    /// progress as Linux's `__inet_stream_connect` does: `EALREADY` while the
    /// handshake runs, `Ok` once established (then `EISCONN`), or the error that
    /// ended it. A blocking caller waits for `POLLOUT` between calls.
    pub fn connect(&mut self, now: Instant, fd: Fd, remote: SocketAddr) -> Result<(), Errno> {
        self.connect_user(now, fd, &UserSockAddr::from(remote))
    }

    /// [`Host::connect`] of a caller's `struct sockaddr`, as `__inet_stream_connect`
    /// takes it: `EINVAL` if it does not reach `sa_family`; `AF_UNSPEC` disconnects
    /// ([`Host::disconnect`]); then the socket's state decides (`EISCONN`,
    /// `EALREADY`, ...) before `tcp_v4_connect`/`tcp_v6_connect` read the address
    /// (its length, then its family).
    pub fn connect_user(&mut self, now: Instant, fd: Fd, addr: &UserSockAddr) -> Result<(), Errno> {
        let s = self.sock(fd)?;
        if addr.len() < 2 {
            return err(errno::EINVAL);
        }
        if addr.is_unspec() {
            return self.disconnect(now, fd);
        }
        let remote = match (s.state, addr.for_connect(s.family)) {
            (SockState::Unconnected, r) => r?,
            // Not read: the state answers first.
            (_, r) => r.unwrap_or(addr::any(s.family, 0)),
        };
        self.connect_remote(now, fd, remote)
    }

    /// `tcp_disconnect`, which `connect(2)` with `AF_UNSPEC` calls whatever the
    /// state: a listener stops (as `shutdown(SHUT_RD)`), a connection is reset
    /// where `tcp_need_reset` says (SYN-SENT quietly) and ends, and the socket is
    /// `TCP_CLOSE` again, free to connect or listen anew; its port stays only if
    /// the user bound it (`SOCK_BINDPORT_LOCK`, else `inet_put_port`). It ends
    /// with `sk_error_report`, whatever the state: a wakeup keyed `EPOLLERR`, which
    /// every epoll item takes (an `EPOLLET` one reports what it finds).
    pub fn disconnect(&mut self, now: Instant, fd: Fd) -> Result<(), Errno> {
        let r = self.tcp_disconnect(now, fd);
        if let Ok(s) = self.sock_mut(fd) {
            s.wake[poll::Wake::Error as usize] += 1;
        }
        r
    }

    /// [`Host::disconnect`] before its wakeup.
    fn tcp_disconnect(&mut self, now: Instant, fd: Fd) -> Result<(), Errno> {
        let h = match self.sock(fd)?.state {
            SockState::Unconnected => {
                // tcp_disconnect in TCP_CLOSE: no state change, so no port put.
                self.sock_mut(fd)?.opts.disconnect_without_conn();
                self.disconnected(fd);
                return Ok(());
            }
            SockState::Listening(h) => return self.shutdown_listener(now, fd, h, Shutdown::Read),
            SockState::Conn { h, .. } => h,
        };
        self.by_handle.remove(&h);
        self.keep_from_conn(now, fd, h)?;
        // tcp_disconnect returns 0: a connection the engine already ended is gone.
        let sk_err = self.stack.disconnect(now, h).ok().flatten();
        self.sock_mut(fd)?.sk_err = sk_err.map(Errno::from);
        self.disconnected(fd);
        self.sync_events();
        Ok(())
    }

    /// What `tcp_disconnect` keeps on the socket from its connection `h` at `now`:
    /// the fields it does not reset (`mss_cache` for `TCP_MAXSEG`, `TCP_INFO`'s, the
    /// `rcv_wnd` of the next connect) and the `write_seq` of its next connect.
    fn keep_from_conn(&mut self, now: Instant, fd: Fd, h: SocketHandle) -> Result<(), Errno> {
        let c = self.stack.socket_ref(h);
        let (kept, seq) = (c.disconnected(now).ok(), c.disconnect_write_seq().ok());
        let drops = c.sk_drops().unwrap_or(0);
        let s = self.sock_mut(fd)?;
        s.sk_drops = s.sk_drops.wrapping_add(drops as i32);
        s.opts.disconnected = kept.or(s.opts.disconnected.take());
        s.opts.write_seq = seq.unwrap_or(s.opts.write_seq);
        Ok(())
    }

    /// `tcp_disconnect` on the socket's side, once its connection or listener is
    /// gone: `TCP_CLOSE` and `SS_UNCONNECTED`, the options it resets, the source
    /// address unless the user bound one (`inet_reset_saddr` without
    /// `SOCK_BINDADDR_LOCK`), the port unless the user bound one (`tcp_set_state`'s
    /// `inet_put_port` without `SOCK_BINDPORT_LOCK`); `getsockname` still names the
    /// port (`inet_sport`), a new connect or listen takes another. A port the socket
    /// holds itself (bound in `TCP_CLOSE`, after its connection ended) stays: no
    /// `tcp_set_state` puts it.
    pub(super) fn disconnected(&mut self, fd: Fd) {
        let Ok(s) = self.sock_mut(fd) else { return };
        s.state = SockState::Unconnected;
        s.disconnecting = false;
        s.opts.tcp_disconnect();
        s.peek_off = -1; // sk_set_peek_off(sk, -1)
        if let Some(b) = s.bound.filter(|_| !s.held) {
            let ip = match s.bindaddr_lock {
                true => b.ip(),
                false => addr::any(s.family, 0).ip(),
            };
            let name = SocketAddr::new(ip, b.port());
            s.name = Some(name);
            s.bound = s.bind_lock.then_some(name);
        }
        self.rebind_after_close(fd);
    }

    /// The address a connect or listen starts from: the bound one, else the one
    /// the user bound without a port (`SOCK_BINDADDR_LOCK` kept by
    /// `tcp_disconnect`) with port 0.
    pub(super) fn local_base(s: &Socket) -> Option<SocketAddr> {
        let locked = s.name.filter(|_| s.bindaddr_lock);
        s.bound.or(locked.map(|a| SocketAddr::new(a.ip(), 0)))
    }

    fn connect_remote(&mut self, now: Instant, fd: Fd, remote: SocketAddr) -> Result<(), Errno> {
        if let SockState::Conn {
            h,
            connected: false,
        } = self.sock(fd)?.state
        {
            return self.connect_progress(now, fd, h);
        }
        match self.connect_tfo(now, fd, remote, None)? {
            // tcp_fastopen_defer_connect: connected as far as the caller knows; the
            // SYN goes with the first write.
            (true, _) => Ok(()),
            (false, _) => err(errno::EINPROGRESS),
        }
    }

    /// `__inet_stream_connect` from CLOSE (`tcp_v4_connect`), with Fast Open data
    /// for the SYN (`MSG_FASTOPEN`, and whether it was sent `MSG_ZEROCOPY`) or none.
    /// Returns whether the SYN was deferred and the bytes it took.
    pub(crate) fn connect_tfo(
        &mut self,
        now: Instant,
        fd: Fd,
        remote: SocketAddr,
        syn_data: Option<(UserBytes<'_>, bool)>,
    ) -> Result<(bool, usize), Errno> {
        let s = self.sock(fd)?;
        match s.state {
            SockState::Listening(_) => return err(errno::EISCONN),
            SockState::Conn {
                connected: true, ..
            } => return err(errno::EISCONN),
            SockState::Conn {
                h,
                connected: false,
            } => return self.connect_progress(now, fd, h).map(|_| (false, 0)),
            SockState::Unconnected => {}
        }
        let base = Host::local_base(s);
        let remote = addr::connect_addr(s.family, s.opts.v6only, base, remote)?;
        let local = match base {
            Some(a) if !a.ip().is_unspecified() => a,
            b => {
                let ip = self
                    .stack
                    .source_address(remote.ip())
                    .ok_or(Errno(errno::EADDRNOTAVAIL))?;
                SocketAddr::new(ip, b.map_or(0, |a| a.port()))
            }
        };
        let opts = s.opts.clone();
        // tcp_connect_init: "sk->sk_err = 0".
        self.sock_mut(fd)?.sk_err = None;
        let (h, copied) = self
            .stack
            .connect_fastopen(
                now,
                local,
                remote,
                &opts,
                syn_data.map(|d| d.0),
                syn_data.is_some_and(|d| d.1),
            )
            .map_err(Errno::from)?;
        let (local, _) = self.stack.addresses(h).map_err(Errno::from)?;
        self.unhold_port(fd);
        let s = self.sock_mut(fd)?;
        s.bound = Some(local);
        s.state = SockState::Conn {
            h,
            connected: false,
        };
        self.bind_handle(h, fd);
        self.sync_events();
        Ok((self.stack.fastopen_deferred(h), copied))
    }

    /// `__inet_stream_connect` in `SS_CONNECTING` (`SS_DISCONNECTING`: `EINVAL`): a
    /// connection that ended reports its error (`sock_error`, else
    /// `ECONNABORTED`) and is `tcp_disconnect`ed.
    pub(super) fn connect_progress(
        &mut self,
        now: Instant,
        fd: Fd,
        h: SocketHandle,
    ) -> Result<(), Errno> {
        if self.sock(fd)?.disconnecting {
            return err(errno::EINVAL);
        }
        let st = self.stack.state(h).map_err(Errno::from)?;
        if self.stack.fastopen_deferred(h) {
            return err(errno::EISCONN); // SS_CONNECTING with DEFER_CONNECT
        }
        match st {
            TcpState::SynSent | TcpState::SynRecv => err(errno::EALREADY),
            TcpState::Closed => {
                let e = self.stack.socket_error(h).ok().flatten();
                self.keep_from_conn(now, fd, h)?;
                self.by_handle.remove(&h);
                let _ = self.stack.close(Instant::ZERO, h);
                self.disconnected(fd);
                Err(e.map_or(Errno(errno::ECONNABORTED), Errno::from))
            }
            _ => {
                self.sock_mut(fd)?.state = SockState::Conn { h, connected: true };
                Ok(())
            }
        }
    }
}
