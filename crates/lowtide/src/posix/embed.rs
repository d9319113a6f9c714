//! What an embedding runtime (the async API in `lowtide-tokio`) needs from the
//! socket layer beyond the system calls: packets straight from another stack, the
//! catch-all listener of transparent proxies, `tcp_info` as a struct, and errno as
//! [`std::io::Error`].

use super::{err, Errno, Fd, Host, SockState};
use crate::socket::Transmit;
use crate::time::Instant;
use crate::TcpInfo;
use std::io;

impl Host {
    /// [`crate::Stack::handle_transmit`]: a packet straight from another stack's
    /// `poll_transmit`, with no device in between.
    pub fn handle_transmit(&mut self, now: Instant, tx: &Transmit) {
        self.stack.handle_transmit(now, tx);
        self.sync_events();
    }

    /// `listen(2)` on a transparent-proxy socket ([`crate::Stack::listen_catch_all`]):
    /// `fd` accepts connections to any address and port; each accepted socket's
    /// [`Host::local_addr`] is the original destination (as `getsockname(2)` on a
    /// connection a Linux `TPROXY` rule delivered). `fd` must be fresh and unbound.
    pub fn listen_catch_all(&mut self, fd: Fd, backlog: i32) -> Result<(), Errno> {
        let s = self.sock(fd)?;
        if s.state != SockState::Unconnected || s.bound.is_some() {
            return err(super::errno::EINVAL);
        }
        let opts = s.opts.clone();
        let h = self
            .stack
            .listen_catch_all(backlog as u32) // negative: somaxconn, as __sys_listen
            .map_err(Errno::from)?;
        self.stack
            .socket(h)
            .set_listener_options(&opts)
            .map_err(Errno::from)?;
        self.sock_mut(fd)?.state = SockState::Listening(h);
        self.bind_handle(h, fd);
        Ok(())
    }

    /// `getsockopt(TCP_INFO)` as a struct: the connection's [`TcpInfo`].
    pub fn tcp_info(&self, now: Instant, fd: Fd) -> Result<TcpInfo, Errno> {
        let Some(h) = self.conn(fd)? else {
            return err(super::errno::ENOTCONN);
        };
        self.stack.info(now, h).map_err(Errno::from)
    }
}

impl Errno {
    /// The [`io::ErrorKind`] Rust's standard library gives this errno on Linux.
    pub fn kind(self) -> io::ErrorKind {
        use super::errno::*;
        use io::ErrorKind as K;
        match self.0 {
            EAGAIN => K::WouldBlock,
            EPIPE => K::BrokenPipe,
            ECONNREFUSED => K::ConnectionRefused,
            ECONNRESET => K::ConnectionReset,
            ECONNABORTED => K::ConnectionAborted,
            ENOTCONN => K::NotConnected,
            ETIMEDOUT => K::TimedOut,
            EADDRINUSE => K::AddrInUse,
            EADDRNOTAVAIL => K::AddrNotAvailable,
            EINVAL => K::InvalidInput,
            EPERM => K::PermissionDenied,
            ENOENT => K::NotFound,
            EEXIST => K::AlreadyExists,
            ENOMEM => K::OutOfMemory,
            EOPNOTSUPP | EAFNOSUPPORT | EPROTONOSUPPORT | ESOCKTNOSUPPORT | ENOPROTOOPT => {
                K::Unsupported
            }
            _ => K::Other,
        }
    }

    /// Linux's name for the errno (`"ECONNREFUSED"`), or `None` for one this layer
    /// never returns.
    pub fn name(self) -> Option<&'static str> {
        use super::errno::*;
        Some(match self.0 {
            EPERM => "EPERM",
            ENOENT => "ENOENT",
            EBADF => "EBADF",
            EAGAIN => "EAGAIN",
            ENOMEM => "ENOMEM",
            EFAULT => "EFAULT",
            EEXIST => "EEXIST",
            EINVAL => "EINVAL",
            EMFILE => "EMFILE",
            ENOTTY => "ENOTTY",
            EPIPE => "EPIPE",
            ENOTSOCK => "ENOTSOCK",
            EDESTADDRREQ => "EDESTADDRREQ",
            EMSGSIZE => "EMSGSIZE",
            ENOPROTOOPT => "ENOPROTOOPT",
            EPROTONOSUPPORT => "EPROTONOSUPPORT",
            ESOCKTNOSUPPORT => "ESOCKTNOSUPPORT",
            EOPNOTSUPP => "EOPNOTSUPP",
            EAFNOSUPPORT => "EAFNOSUPPORT",
            EADDRINUSE => "EADDRINUSE",
            EADDRNOTAVAIL => "EADDRNOTAVAIL",
            ECONNABORTED => "ECONNABORTED",
            ECONNRESET => "ECONNRESET",
            EISCONN => "EISCONN",
            ENOTCONN => "ENOTCONN",
            ETIMEDOUT => "ETIMEDOUT",
            ECONNREFUSED => "ECONNREFUSED",
            EALREADY => "EALREADY",
            EINPROGRESS => "EINPROGRESS",
            _ => return None,
        })
    }
}

impl From<Errno> for io::Error {
    /// The [`io::Error`] a kernel socket call gives: on Linux, where the errno values
    /// are lowtide's, [`io::Error::from_raw_os_error`], so `raw_os_error()` is the
    /// errno, the kind is std's mapping and the text the standard one (`Connection
    /// refused (os error 111)`). Elsewhere, an error of [`Errno::kind`] whose message
    /// names the errno (`ECONNREFUSED (errno 111)`).
    fn from(e: Errno) -> io::Error {
        if cfg!(target_os = "linux") {
            return io::Error::from_raw_os_error(e.0);
        }
        let msg = match e.name() {
            Some(n) => format!("{n} (errno {})", e.0),
            None => format!("errno {}", e.0),
        };
        io::Error::new(e.kind(), msg)
    }
}

#[cfg(test)]
mod tests {
    use super::super::consts::*;
    use super::super::errno;
    use super::*;
    use crate::{Config, Stack};
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    #[test]
    fn errno_maps_to_io_kinds() {
        let e: io::Error = Errno(errno::ECONNREFUSED).into();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        #[cfg(target_os = "linux")]
        {
            assert_eq!(e.raw_os_error(), Some(111));
            assert_eq!(e.to_string(), "Connection refused (os error 111)");
            // std maps each errno as our Errno::kind does.
            for n in [
                errno::EAGAIN,
                errno::ECONNRESET,
                errno::ETIMEDOUT,
                errno::EADDRINUSE,
                errno::EPIPE,
                errno::ENOTCONN,
                errno::EINVAL,
            ] {
                assert_eq!(
                    io::Error::from(Errno(n)).kind(),
                    Errno(n).kind(),
                    "errno {n}"
                );
            }
        }
        assert_eq!(Errno(errno::EAGAIN).kind(), io::ErrorKind::WouldBlock);
        assert_eq!(
            Errno(errno::ECONNRESET).kind(),
            io::ErrorKind::ConnectionReset
        );
        assert_eq!(Errno(errno::ETIMEDOUT).kind(), io::ErrorKind::TimedOut);
        assert_eq!(Errno(999).kind(), io::ErrorKind::Other);
    }

    #[test]
    fn catch_all_socket_reports_original_destination() {
        let a_ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let mut sa = Stack::new(Config::default(), 1);
        sa.add_address(a_ip);
        let mut a = Host::new(sa);
        let mut b = Host::new(Stack::new(Config::default(), 2));
        let now = Instant::ZERO;
        let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        b.listen_catch_all(l, 8).unwrap();
        let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        let dst: SocketAddr = "203.0.113.7:8443".parse().unwrap();
        assert_eq!(a.connect(now, c, dst), Err(Errno(errno::EINPROGRESS)));
        for _ in 0..4 {
            while let Some(tx) = a.poll_transmit(now) {
                b.handle_transmit(now, &tx);
            }
            while let Some(tx) = b.poll_transmit(now) {
                a.handle_transmit(now, &tx);
            }
        }
        let (s, peer) = b.accept(l).unwrap();
        assert_eq!(b.local_addr(s).unwrap(), Some(dst));
        assert_eq!(Some(peer), a.local_addr(c).unwrap());
        assert_eq!(a.connect(now, c, dst), Ok(()));
        assert!(b.tcp_info(now, s).is_ok());
        assert_eq!(b.tcp_info(now, l), Err(Errno(errno::ENOTCONN)));
        // A listening or bound socket cannot become the catch-all listener.
        let l2 = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        assert_eq!(b.listen_catch_all(l2, 8), Err(Errno(errno::EADDRINUSE)));
    }
}
