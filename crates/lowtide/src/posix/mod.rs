//! A socket layer with Linux's semantics over one [`Stack`]: file descriptors,
//! `socket`/`bind`/`listen`/`accept`/`connect`, reads and writes with `MSG_*` flags,
//! `shutdown`/`close`, `fcntl`, `ioctl`, socket options by level, `poll` and `epoll`,
//! with Linux's constants and errno values ([`consts`]).
//!
//! Like the engine it never blocks and reads no clock: a call that would block in
//! Linux returns `EAGAIN` (`EINPROGRESS` for `connect`), and readiness is what
//! [`Host::poll_mask`] reports. A caller that wants blocking calls (a test harness, an
//! async runtime) waits for readiness and calls again; [`Host::is_nonblocking`] says
//! whether the socket asked not to wait.
//!
//! Packets and timers pass through [`Host::handle_packet`], [`Host::poll_transmit`],
//! [`Host::handle_timeout`] and [`Host::poll_timeout`], so that the layer sees every
//! wakeup (for edge-triggered epoll).

mod addr;
mod bind;
mod connect;
pub mod consts;
mod embed;
mod fastopen;
mod fdtable;
mod getsockopt;
mod linger;
mod md5sig;
mod msg;
mod netdev;
pub mod pipe;
mod poll;
pub use fastopen::SendTo;
pub use fdtable::LingerWait;
pub use linger::Linger;
pub use sockaddr::{UserSockAddr, AF_UNSPEC, SOCKADDR_STORAGE_LEN};
mod procnet;
mod recv_wait;
mod rx_tstamp;
mod sockaddr;
mod sockopt;
mod timeo;
mod ulp;

pub use consts::errno;
pub use msg::{Cmsg, RecvMsg};
pub use pipe::Spliced;
pub use poll::{EpollEvent, PollFd, PollWait};
pub use recv_wait::{RecvStep, RecvWait};

use crate::socket::{
    RxChecksum, SendFlags, SendPart, SocketError, SocketHandle, Transmit, TxToken,
};
use crate::tcp::sockopt::SockOptions;
use crate::time::Instant;
use crate::{Shutdown, Stack, TcpState, UserBytes};
use consts::*;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

/// A file descriptor of a [`Host`].
pub type Fd = i32;

/// A Linux errno value (`errno::EAGAIN`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "errno {}", self.0)
    }
}

impl std::error::Error for Errno {}

impl From<SocketError> for Errno {
    fn from(e: SocketError) -> Errno {
        Errno(e.errno())
    }
}

fn err<T>(e: i32) -> Result<T, Errno> {
    Err(Errno(e))
}

/// The `send(2)` flags the stack takes, for attempt `part` of its call.
fn send_flags(flags: i32, part: SendPart) -> SendFlags {
    SendFlags {
        more: flags & MSG_MORE != 0,
        eor: flags & MSG_EOR != 0,
        zerocopy: flags & MSG_ZEROCOPY != 0,
        oob: flags & MSG_OOB != 0,
        part,
    }
}

/// Where a socket is in its life (`sock->state` with the listener and the
/// connection it wraps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SockState {
    /// `SS_UNCONNECTED`: fresh, bound, or after a failed connect.
    Unconnected,
    /// Listening.
    Listening(SocketHandle),
    /// `SS_CONNECTING` (`connected == false`) or `SS_CONNECTED`.
    Conn { h: SocketHandle, connected: bool },
}

/// A socket's state kept above the engine (`struct socket` and `struct sock` fields).
#[derive(Debug)]
pub(crate) struct Socket {
    /// `AF_INET` or `AF_INET6` (`sk_family`).
    pub family: i32,
    pub nonblock: bool,
    pub opts: SockOptions,
    /// The socket holds its bound port itself, in the bind table's count: bound and
    /// neither connected nor listening, or bound after its connection ended and
    /// freed its port (`__inet_bind` in `TCP_CLOSE` with `inet_num` 0); the engine
    /// does not know it.
    pub held: bool,
    /// The user bound an explicit port (`SOCK_BINDPORT_LOCK`): it stays bound
    /// when a connection or listener of the socket closes.
    pub bind_lock: bool,
    /// The user bound a specific address (`SOCK_BINDADDR_LOCK`): `tcp_disconnect`
    /// keeps it (`inet_reset_saddr` otherwise).
    pub bindaddr_lock: bool,
    /// What `getsockname` names once the socket lost its port (`inet_put_port`
    /// clears `inet_num`, not `inet_sport`), until it has one again.
    pub name: Option<SocketAddr>,
    /// `SS_DISCONNECTING`: `shutdown(2)` found the connect already ended
    /// (`inet_shutdown` of an `SS_CONNECTING` socket in `TCP_CLOSE`); `connect(2)`
    /// is `EINVAL` until one with `AF_UNSPEC`.
    pub disconnecting: bool,
    /// `SO_LINGER`.
    pub linger: Linger,
    /// `sk_err` of a connection `tcp_disconnect` ended (`connect(2)` with
    /// `AF_UNSPEC`), which the socket reports once: to a read, a send, `SO_ERROR`
    /// (`sock_error`), and as `POLLERR` until then; a new connect clears it
    /// (`tcp_connect_init`).
    pub sk_err: Option<Errno>,
    /// `sk_rcvtimeo` / `sk_sndtimeo` in jiffies (`SO_RCVTIMEO` / `SO_SNDTIMEO`,
    /// posix/timeo.rs), `MAX_SCHEDULE_TIMEOUT` for no limit.
    pub rcvtimeo: i64,
    pub sndtimeo: i64,
    /// `sk_peek_off` (`SO_PEEK_OFF`): where `MSG_PEEK` starts, in bytes past the
    /// next byte to read; negative when off (the default, -1).
    pub peek_off: i32,
    /// `sk_drops` the socket's earlier connections and listeners counted:
    /// `tcp_disconnect` and a listener's stop leave it (tcp/drops.rs).
    pub sk_drops: i32,
    /// The bound address as the engine has it (IPv4 for a mapped one).
    pub bound: Option<SocketAddr>,
    pub state: SockState,
    /// Wakeups of the socket's wait queue, counted per key (`poll::Wake`), for
    /// epoll's ready list.
    pub wake: [u64; poll::WAKE_KEYS],
}

impl Socket {
    fn new(family: i32, nonblock: bool) -> Socket {
        Socket {
            family,
            nonblock,
            opts: SockOptions {
                family_v6: family == AF_INET6,
                ..SockOptions::default()
            },
            held: false,
            bind_lock: false,
            bindaddr_lock: false,
            name: None,
            disconnecting: false,
            linger: Linger::default(),
            sk_err: None,
            rcvtimeo: timeo::MAX_SCHEDULE_TIMEOUT,
            sndtimeo: timeo::MAX_SCHEDULE_TIMEOUT,
            peek_off: -1,
            sk_drops: 0,
            bound: None,
            state: SockState::Unconnected,
            wake: [0; poll::WAKE_KEYS],
        }
    }

    fn handle(&self) -> Option<SocketHandle> {
        match self.state {
            SockState::Unconnected => None,
            SockState::Listening(h) | SockState::Conn { h, .. } => Some(h),
        }
    }
}

enum File {
    // Boxed: a socket's options make it far larger than an epoll instance.
    Socket(Box<Socket>),
    Epoll(poll::Epoll),
    Pipe(pipe::PipeEnd),
}

/// One host's socket table over a [`Stack`].
pub struct Host {
    stack: Stack,
    files: fdtable::FdTable,
    /// The open file each connection or listener belongs to.
    by_handle: HashMap<SocketHandle, fdtable::FileId>,
    /// What `CLOCK_REALTIME` read at `Instant::ZERO` (timestamps in cmsgs).
    realtime_zero: core::time::Duration,
    /// The lowest descriptor handed out (3: after stdio).
    fd_base: Fd,
    /// Pipes by id, while one of their ends is open.
    pipes: BTreeMap<u32, pipe::Pipe>,
    next_pipe: u32,
}

impl Host {
    /// A host over `stack` (whose addresses are already added).
    pub fn new(stack: Stack) -> Host {
        Host {
            stack,
            files: fdtable::FdTable::default(),
            by_handle: HashMap::new(),
            realtime_zero: core::time::Duration::ZERO,
            fd_base: 3,
            pipes: BTreeMap::new(),
            next_pipe: 0,
        }
    }

    /// Makes new descriptors start at `base` (still the lowest free one from there):
    /// for an embedding whose process also has the kernel's descriptors, so that the
    /// two never share a number.
    pub fn set_fd_base(&mut self, base: Fd) {
        self.fd_base = base.max(0);
    }

    /// Sets what `CLOCK_REALTIME` read at [`Instant::ZERO`], so that timestamps the
    /// socket layer reports (`SCM_TIMESTAMPING`) are wall-clock times as on Linux;
    /// 0 (the default) reports the stack's own clock.
    pub fn set_realtime_zero(&mut self, t: core::time::Duration) {
        self.realtime_zero = t;
    }

    /// The stack (read-only: changes go through the host so it sees every wakeup).
    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    /// The stack, for what the host does not wrap (`set_sysctl`, `add_address`);
    /// call [`Host::sync_events`] after anything that may wake sockets.
    pub fn stack_mut(&mut self) -> &mut Stack {
        &mut self.stack
    }

    // ---- the device and the clock ----------------------------------------------------

    /// [`Stack::handle_packet`]: a device that checked checksums, or a GRO/TSO
    /// super-packet with a partial checksum, passes [`RxChecksum::Unnecessary`];
    /// anything else [`RxChecksum::Verify`].
    pub fn handle_packet(&mut self, now: Instant, packet: &[u8], csum: RxChecksum) {
        self.stack.handle_packet(now, packet, csum);
        self.sync_events();
    }

    /// [`Stack::poll_transmit`].
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.stack.poll_transmit(now)
    }

    /// [`Stack::handle_tx_complete`].
    pub fn handle_tx_complete(&mut self, now: Instant, token: TxToken) {
        self.stack.handle_tx_complete(now, token);
        self.sync_events();
    }

    /// [`Stack::handle_tx_dropped`].
    pub fn handle_tx_dropped(&mut self, now: Instant, token: TxToken) {
        self.stack.handle_tx_dropped(now, token);
        self.sync_events();
    }

    /// [`Stack::poll_timeout`].
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.stack.poll_timeout()
    }

    /// [`Stack::handle_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.stack.handle_timeout(now);
        self.sync_events();
    }

    /// Takes the engine's readiness events: each is a wakeup of its socket's wait
    /// queue with the key Linux's callback gives it (`poll::Wake::of`).
    pub fn sync_events(&mut self) {
        while let Some(ev) = self.stack.poll_event() {
            if let Some(id) = self.by_handle.get(&ev.socket) {
                if let Some(File::Socket(s)) = self.files.by_id_mut(*id) {
                    for w in poll::Wake::of(ev.kind) {
                        s.wake[*w as usize] += 1;
                    }
                }
            }
        }
    }

    // ---- descriptors -------------------------------------------------------------------

    fn alloc_fd(&mut self, f: File) -> Fd {
        // Linux hands out the lowest free descriptor; 0-2 are stdio.
        let mut fd = self.fd_base;
        while self.files.contains_key(&fd) {
            fd += 1;
        }
        self.files.install(fd, f);
        fd
    }

    fn sock(&self, fd: Fd) -> Result<&Socket, Errno> {
        match self.files.get(&fd) {
            Some(File::Socket(s)) => Ok(s),
            Some(File::Epoll(_) | File::Pipe(_)) => err(errno::ENOTSOCK),
            None => err(errno::EBADF),
        }
    }

    /// `sockfd_lookup_light`, which every socket call starts with: `EBADF` for no
    /// such descriptor, `ENOTSOCK` for one that is not a socket.
    pub fn sockfd_lookup(&self, fd: Fd) -> Result<(), Errno> {
        self.sock(fd).map(|_| ())
    }

    /// `read(2)`/`readv(2)` (`reading`) or `writev(2)` of no bytes: 0 at once, whatever
    /// a socket's state (`sock_read_iter`'s "Match SYS5 behaviour", `vfs_readv` and
    /// `vfs_writev`'s `!tot_len`, `pipe_read`), after the file's own checks: `EBADF`
    /// for no such descriptor or the wrong end of a pipe (`FMODE_READ`/`WRITE`),
    /// `EINVAL` for an epoll file (no `read_iter`). A `write(2)` of nothing goes on
    /// to the socket (`sock_write_iter` has no such test).
    pub fn io_of_nothing(&self, fd: Fd, reading: bool) -> Result<usize, Errno> {
        match self.files.get(&fd) {
            Some(File::Socket(_)) => Ok(0),
            Some(File::Pipe(end)) if end.write == reading => err(errno::EBADF),
            Some(File::Pipe(_)) => Ok(0),
            Some(File::Epoll(_)) => err(errno::EINVAL),
            None => err(errno::EBADF),
        }
    }

    /// An `optlen` as `setsockopt(2)` and `getsockopt(2)` take it, an `int`: the
    /// descriptor's errors first (`sockfd_lookup_light`: `EBADF`, `ENOTSOCK`), then
    /// `EINVAL` for a negative one (`do_sock_setsockopt`'s `optlen < 0`; `sk_getsockopt`,
    /// `do_tcp_getsockopt` and `do_ip_getsockopt`'s `len < 0`); else its length.
    pub fn sockopt_len(&self, fd: Fd, optlen: i32) -> Result<usize, Errno> {
        self.sockfd_lookup(fd)?;
        usize::try_from(optlen).map_err(|_| Errno(errno::EINVAL))
    }

    fn sock_mut(&mut self, fd: Fd) -> Result<&mut Socket, Errno> {
        match self.files.get_mut(&fd) {
            Some(File::Socket(s)) => Ok(s),
            Some(File::Epoll(_) | File::Pipe(_)) => err(errno::ENOTSOCK),
            None => err(errno::EBADF),
        }
    }

    /// The connection of a connected (or connecting) socket.
    fn conn(&self, fd: Fd) -> Result<Option<SocketHandle>, Errno> {
        Ok(match self.sock(fd)?.state {
            SockState::Conn { h, .. } => Some(h),
            _ => None,
        })
    }

    /// Whether calls on `fd` with `flags` must not wait (`O_NONBLOCK` or
    /// `MSG_DONTWAIT`).
    pub fn is_nonblocking(&self, fd: Fd, flags: i32) -> bool {
        let pipe = matches!(self.files.get(&fd), Some(File::Pipe(p)) if p.nonblock);
        flags & MSG_DONTWAIT != 0 || pipe || self.sock(fd).is_ok_and(|s| s.nonblock)
    }

    /// `SO_LINGER` of `fd`: `Some(time)` when lingering is on, the time `None`
    /// without a limit (`MAX_SCHEDULE_TIMEOUT`).
    pub fn linger(&self, fd: Fd) -> Option<Option<core::time::Duration>> {
        let l = self.sock(fd).ok()?.linger;
        l.on.then(|| l.wait())
    }

    // ---- socket calls --------------------------------------------------------------------

    /// `socket(2)`: TCP over IPv4 or IPv6 only.
    pub fn socket(&mut self, domain: i32, ty: i32, protocol: i32) -> Result<Fd, Errno> {
        // __sys_socket_create: flags other than SOCK_NONBLOCK/SOCK_CLOEXEC, then
        // __sock_create: a type past SOCK_MAX, are EINVAL before the family.
        if ty & !SOCK_TYPE_MASK & !(SOCK_NONBLOCK | SOCK_CLOEXEC) != 0
            || ty & SOCK_TYPE_MASK >= SOCK_MAX
        {
            return err(errno::EINVAL);
        }
        if domain != AF_INET && domain != AF_INET6 {
            return err(errno::EAFNOSUPPORT);
        }
        // inet_create: a protocol number out of range is EINVAL; lowtide has stream
        // sockets only (Linux's UDP, raw and ping sockets are not modelled).
        if !(0..IPPROTO_MAX).contains(&protocol) {
            return err(errno::EINVAL);
        }
        if ty & SOCK_TYPE_MASK != SOCK_STREAM {
            return err(errno::ESOCKTNOSUPPORT);
        }
        if protocol != IPPROTO_IP && protocol != IPPROTO_TCP {
            return err(errno::EPROTONOSUPPORT);
        }
        let mut s = Socket::new(domain, ty & SOCK_NONBLOCK != 0);
        // inet_create / inet6_create read these sysctls now.
        s.opts.txrehash = Some(self.stack.config().txrehash);
        let reflect = self.stack.config().ipv6_flowlabel_reflect;
        s.opts.repflow = Some(reflect & crate::tcp::flowlabel::FLOWLABEL_REFLECT_ESTABLISHED != 0);
        s.opts.pmtudisc = Some(crate::tcp::pmtu::default_pmtudisc(self.stack.config()));
        // tcp_init_sock: tp->reordering, read once.
        s.opts.reordering = Some(self.stack.config().tcp_reordering);
        Ok(self.alloc_fd(File::Socket(Box::new(s))))
    }

    /// `accept(2)`: the new descriptor and the peer's address (IPv4-mapped for an
    /// IPv4 peer of an `AF_INET6` listener).
    pub fn accept(&mut self, fd: Fd) -> Result<(Fd, SocketAddr), Errno> {
        let s = self.sock(fd)?;
        let SockState::Listening(l) = s.state else {
            return err(errno::EINVAL);
        };
        let family = s.family;
        let mut child = Socket::new(family, false);
        child.opts = s.opts.clone();
        // inet_csk_clone_lock zeroes the child's icsk_accept_queue: no Fast Open
        // queue length nor keys of its own (TCP_FASTOPEN 0, TCP_FASTOPEN_KEY none),
        // no rskq_defer_accept (TCP_DEFER_ACCEPT 0).
        (child.opts.fastopen_qlen, child.opts.fastopen_key) = (None, None);
        child.opts.defer_accept = 0;
        // sk_clone_lock copies the listener's struct sock.
        child.linger = s.linger;
        (child.rcvtimeo, child.sndtimeo) = (s.rcvtimeo, s.sndtimeo);
        child.peek_off = s.peek_off;
        let h = self.stack.accept(l).map_err(Errno::from)?;
        let (local, remote) = self.stack.addresses(h).map_err(Errno::from)?;
        // The child's IP_TOS / IPV6_TCLASS, which tcp_reflect_tos may have taken
        // from its SYN (tcp_v4_syn_recv_sock); the ECN bits stay as they were.
        let (tos, tclass) = self.stack.socket_ref(h).dsfields().map_err(Errno::from)?;
        child.opts.tos = tos | child.opts.tos & 3;
        child.opts.tclass = tclass | child.opts.tclass & 3;
        child.bound = Some(local);
        child.state = SockState::Conn { h, connected: true };
        let nfd = self.alloc_fd(File::Socket(Box::new(child)));
        self.bind_handle(h, nfd);
        Ok((nfd, addr::user_addr(family, remote)))
    }

    /// `recv(2)`/`read(2)`: `MSG_PEEK` copies without consuming; `Ok(0)` is the end
    /// of the stream. [`Host::recvmsg`] without the control messages.
    pub fn recv(
        &mut self,
        now: Instant,
        fd: Fd,
        buf: &mut [u8],
        flags: i32,
    ) -> Result<usize, Errno> {
        self.recvmsg(now, fd, buf, flags).map(|m| m.len)
    }

    /// `send(2)`/`write(2)`: how many bytes the send buffer took (`EAGAIN` if none);
    /// `MSG_MORE` holds a sub-MSS tail and its PSH. [`Host::sendmsg`] of one buffer.
    pub fn send(&mut self, now: Instant, fd: Fd, data: &[u8], flags: i32) -> Result<usize, Errno> {
        self.sendmsg(now, fd, &[data], flags, SendTo::None)
    }

    /// `sendto(2)`: [`Host::sendmsg`] of one buffer.
    pub fn sendto(
        &mut self,
        now: Instant,
        fd: Fd,
        data: &[u8],
        flags: i32,
        dest: SendTo,
    ) -> Result<usize, Errno> {
        self.sendmsg(now, fd, &[data], flags, dest)
    }

    /// `sk_stream_wait_memory`: a writer waiting for send space stops at a socket
    /// error (`sk_err`) or `SEND_SHUTDOWN` (a reset, a timeout, `tcp_done`) with
    /// `-EPIPE`, which `tcp_sendmsg_locked`'s `do_error` turns into the bytes it
    /// had queued, if any, leaving `sk_err` for the next call (only with none
    /// does `sk_stream_error` take it). True when `fd`'s waiting writer stops so.
    pub fn send_wait_stops(&self, fd: Fd) -> bool {
        let Ok(s) = self.sock(fd) else {
            return true;
        };
        if s.sk_err.is_some() {
            return true;
        }
        match s.state {
            SockState::Conn { h, .. } => self
                .stack
                .socket_ref(h)
                .status()
                .map_or(true, |st| st.err || st.send_shutdown),
            SockState::Unconnected | SockState::Listening(_) => true,
        }
    }

    /// `sendmsg(2)` of the buffers `iov`: `MSG_MORE`, `MSG_EOR`, `MSG_ZEROCOPY`
    /// (with `SO_ZEROCOPY`: each buffer one page fragment, see [`Stack::sendmsg`];
    /// the completion is read with `recvmsg(MSG_ERRQUEUE)`), and `MSG_FASTOPEN` (a
    /// connect whose SYN carries the data) to `dest`.
    pub fn sendmsg(
        &mut self,
        now: Instant,
        fd: Fd,
        iov: &[&[u8]],
        flags: i32,
        dest: SendTo,
    ) -> Result<usize, Errno> {
        self.sendmsg_part(now, fd, iov, flags, dest, SendPart::Whole)
    }

    /// [`Host::sendmsg`] as one attempt of a blocking call that waits for send
    /// space between its attempts (`part`, see [`SendPart`]); the caller ends a
    /// call it stops before all was copied with [`Host::send_end`].
    pub fn sendmsg_part(
        &mut self,
        now: Instant,
        fd: Fd,
        iov: &[&[u8]],
        flags: i32,
        dest: SendTo,
        part: SendPart,
    ) -> Result<usize, Errno> {
        if self.is_pipe(fd) {
            return self.pipe_write(fd, &iov.concat());
        }
        let s = self.sock(fd)?;
        // tcp_sendmsg_locked: msg_zerocopy_realloc before the Fast Open step and
        // sk_stream_wait_connect (a connection's own send asks it in the engine).
        let closed = !matches!(s.state, SockState::Conn { .. });
        let zc = flags & MSG_ZEROCOPY != 0 && s.opts.zerocopy && iov.iter().any(|b| !b.is_empty());
        let optmem = (s.opts.md5.omem() as u64, self.stack.config().optmem_max);
        if closed && zc && !crate::tcp::errqueue::omalloc_fits(optmem.0, optmem.1) {
            return err(errno::ENOBUFS);
        }
        let deferred =
            matches!(s.state, SockState::Conn { h, .. } if self.stack.fastopen_deferred(h));
        if flags & MSG_FASTOPEN != 0 || deferred {
            let data = iov.concat();
            if let Some(n) = self.sendmsg_fastopen(now, fd, UserBytes::Bytes(&data), flags, dest)? {
                return Ok(n);
            }
        }
        let s = self.sock_mut(fd)?;
        let h = match s.state {
            // sk_stream_wait_connect: sock_error first, then EPIPE (TCP_CLOSE, LISTEN),
            // after tcp_rate_check_app_limited (a listener's mark goes with the
            // tcp_disconnect that ends it).
            SockState::Unconnected | SockState::Listening(_) => {
                if matches!(s.state, SockState::Unconnected) {
                    s.opts.closed_rate_check_app_limited();
                }
                return Err(s.sk_err.take().unwrap_or(Errno(errno::EPIPE)));
            }
            SockState::Conn { h, .. } => h,
        };
        let r = self.stack.sendmsg(now, h, iov, send_flags(flags, part));
        self.sync_events();
        match r {
            // tcp_sendmsg on a closed connection: sk_stream_error gives EPIPE.
            Err(SocketError::NotConnected) => err(errno::EPIPE),
            r => r.map_err(Errno::from),
        }
    }

    /// The end of a blocking `sendmsg(2)` with `flags` that stopped waiting for
    /// space before all was copied (see [`Stack::send_end`]).
    pub fn send_end(&mut self, now: Instant, fd: Fd, flags: i32) {
        if let Ok(Some(h)) = self.conn(fd) {
            self.stack
                .send_end(now, h, send_flags(flags, SendPart::Whole));
            self.sync_events();
        }
    }

    /// `shutdown(2)`.
    pub fn shutdown(&mut self, now: Instant, fd: Fd, how: i32) -> Result<(), Errno> {
        let how = match how {
            SHUT_RD => Shutdown::Read,
            SHUT_WR => Shutdown::Write,
            SHUT_RDWR => Shutdown::Both,
            _ => return err(errno::EINVAL),
        };
        self.sock(fd)?;
        let r = self.shutdown_how(now, fd, how);
        // inet_shutdown ends with sk_state_change ("wake up anyone sleeping in
        // poll"): a wakeup without a key, for every waiter, ENOTCONN or not.
        if let Some(File::Socket(s)) = self.files.get_mut(&fd) {
            s.wake[poll::Wake::State as usize] += 1;
        }
        r
    }

    /// `inet_shutdown` past its argument check, before its wakeup.
    fn shutdown_how(&mut self, now: Instant, fd: Fd, how: Shutdown) -> Result<(), Errno> {
        let s = self.sock_mut(fd)?;
        let (h, connected) = match s.state {
            SockState::Listening(h) => return self.shutdown_listener(now, fd, h, how),
            SockState::Unconnected => {
                // inet_shutdown in TCP_CLOSE: ENOTCONN, the bits set all the same
                // (and kept by a connection or listener made from the socket).
                s.opts.shutdown |= match how {
                    Shutdown::Read => RCV_SHUTDOWN,
                    Shutdown::Write => SEND_SHUTDOWN,
                    Shutdown::Both => RCV_SHUTDOWN | SEND_SHUTDOWN,
                };
                return err(errno::ENOTCONN);
            }
            SockState::Conn { h, connected } => (h, connected),
        };
        if !connected {
            // inet_shutdown of SS_CONNECTING: SS_DISCONNECTING in SYN-SENT,
            // SYN-RECV or CLOSE, else SS_CONNECTED; SYN-SENT is tcp_disconnect
            // (SS_UNCONNECTED).
            match self.stack.state(h).map_err(Errno::from)? {
                TcpState::SynSent => return self.disconnect(now, fd),
                TcpState::SynRecv | TcpState::Closed => self.sock_mut(fd)?.disconnecting = true,
                _ => self.sock_mut(fd)?.state = SockState::Conn { h, connected: true },
            }
        }
        let r = self.stack.shutdown(now, h, how);
        self.sync_events();
        r.map_err(Errno::from)
    }

    /// `inet_shutdown` on a listener: `SHUT_WR` leaves it alone; `SHUT_RD` (or
    /// `SHUT_RDWR`) is `tcp_disconnect`, which stops it (`inet_csk_listen_stop`: its
    /// unaccepted children are reset) and leaves the socket in `TCP_CLOSE`, still
    /// bound, so `accept` fails with `EINVAL` and `listen` may start it again.
    fn shutdown_listener(
        &mut self,
        now: Instant,
        fd: Fd,
        h: SocketHandle,
        how: Shutdown,
    ) -> Result<(), Errno> {
        if how == Shutdown::Write {
            return Ok(());
        }
        self.by_handle.remove(&h);
        let drops = self.stack.socket_ref(h).sk_drops().unwrap_or(0);
        let s = self.sock_mut(fd)?;
        s.opts.disconnect_without_conn();
        s.sk_drops = s.sk_drops.wrapping_add(drops as i32);
        let r = self.stack.close(now, h);
        self.disconnected(fd);
        self.sync_events();
        r.map_err(Errno::from)
    }

    /// `close(2)`: the descriptor leaves the table; the file is released once no
    /// call holds it any more ([`Host::fdget`]): a connection then finishes in the
    /// background (FIN after the queued data; RST if unread data remains or with
    /// `SO_LINGER` 0, as `tcp_close`).
    pub fn close(&mut self, now: Instant, fd: Fd) -> Result<(), Errno> {
        if let Some((h, _)) = self.close_linger(now, fd)? {
            self.close_linger_done(now, h);
        }
        Ok(())
    }

    /// The end of the wait [`Host::close_linger`] or [`Host::fdput`] asked for (the
    /// FIN acknowledged, the time up, the connection gone): `__tcp_close`'s
    /// `adjudge_to_death` orphans the socket only now.
    pub fn close_linger_done(&mut self, now: Instant, h: SocketHandle) {
        self.stack.close_linger_done(now, h);
        self.sync_events();
    }

    /// [`Host::close`], returning what a caller that blocks must wait for: with
    /// `SO_LINGER` on and a positive time, Linux's `close` sleeps until the FIN is
    /// acknowledged or the time is up (`inet_release` → `tcp_close` →
    /// `sk_stream_wait_close`), on a non-blocking socket too. Wait while
    /// [`Host::is_closing`] holds, at most the returned duration (`None`: no limit,
    /// a negative `l_linger`), then call [`Host::close_linger_done`]. Nothing to
    /// wait for when a call still holds the file: its [`Host::fdput`] releases it.
    pub fn close_linger(&mut self, now: Instant, fd: Fd) -> Result<LingerWait, Errno> {
        let linger = match self.files.get(&fd) {
            Some(File::Socket(s)) => match (s.state, s.linger) {
                (SockState::Conn { h, .. }, l) if l.on && !l.is_zero() => Some((h, l.wait())),
                _ => None,
            },
            _ => None,
        };
        let released = self.close_fd(now, fd)?;
        Ok(linger.filter(|_| released))
    }

    /// `sk_stream_closing`: the connection of a closed socket still waits for the
    /// ACK of its FIN (FIN-WAIT-1, CLOSING, LAST-ACK).
    pub fn is_closing(&self, h: SocketHandle) -> bool {
        matches!(
            self.stack.orphan_state(h),
            Some(TcpState::FinWait1 | TcpState::Closing | TcpState::LastAck)
        )
    }

    /// `fcntl(F_GETFL)`: `O_RDWR` plus `O_NONBLOCK` if set.
    pub fn fcntl_getfl(&self, fd: Fd) -> Result<i32, Errno> {
        match self.files.get(&fd) {
            Some(File::Epoll(_)) => return Ok(O_RDWR),
            // O_RDONLY (0) and O_WRONLY (1) ends.
            Some(File::Pipe(p)) => return Ok(p.write as i32 | (p.nonblock as i32 * O_NONBLOCK)),
            _ => {}
        }
        Ok(O_RDWR
            | if self.sock(fd)?.nonblock {
                O_NONBLOCK
            } else {
                0
            })
    }

    /// `fcntl(F_SETFL)`: only `O_NONBLOCK` matters for a socket.
    pub fn fcntl_setfl(&mut self, fd: Fd, flags: i32) -> Result<(), Errno> {
        if self.pipe_setfl(fd, flags) {
            return Ok(());
        }
        self.sock_mut(fd)?.nonblock = flags & O_NONBLOCK != 0;
        Ok(())
    }

    /// `ioctl(2)`: `SIOCINQ`, `SIOCOUTQ`, `SIOCOUTQNSD`, `SIOCATMARK` (`tcp_ioctl`).
    pub fn ioctl(&self, fd: Fd, request: u64) -> Result<i32, Errno> {
        let s = self.sock(fd)?;
        if !matches!(request, SIOCINQ | SIOCOUTQ | SIOCOUTQNSD | SIOCATMARK) {
            return err(errno::ENOTTY);
        }
        let h = match s.state {
            // SIOCATMARK reads urg_data, whatever the state.
            _ if request == SIOCATMARK && s.handle().is_none() => return Ok(0),
            SockState::Listening(_) if request == SIOCATMARK => return Ok(0),
            SockState::Listening(_) => return err(errno::EINVAL),
            SockState::Unconnected => return Ok(0),
            SockState::Conn { h, .. } => h,
        };
        let st = self.stack.socket_ref(h).status().map_err(Errno::from)?;
        let v = match request {
            SIOCATMARK => st.at_mark as u64,
            SIOCINQ => st.inq as u64,
            SIOCOUTQ => st.outq,
            _ => st.outq_nsd,
        };
        Ok(v.min(i32::MAX as u64) as i32)
    }

    /// The peer's address of a connected socket (`getpeername(2)`; IPv4-mapped on
    /// an `AF_INET6` socket talking IPv4).
    pub fn peer_addr(&self, fd: Fd) -> Result<Option<SocketAddr>, Errno> {
        let family = self.sock(fd)?.family;
        Ok(match self.conn(fd)? {
            Some(h) => self.stack.addresses(h).ok().map(|(_, r)| r),
            None => None,
        }
        .map(|a| addr::user_addr(family, a)))
    }

    /// The local address of a socket (`getsockname(2)`, as [`Host::peer_addr`]).
    pub fn local_addr(&self, fd: Fd) -> Result<Option<SocketAddr>, Errno> {
        let s = self.sock(fd)?;
        Ok(s.bound.or(s.name).map(|a| addr::user_addr(s.family, a)))
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_addr;
#[cfg(test)]
mod tests_bind;
#[cfg(test)]
mod tests_close;
#[cfg(test)]
mod tests_disconnect;
#[cfg(test)]
mod tests_md5;
#[cfg(test)]
mod tests_netdev;
#[cfg(test)]
mod tests_recv_wait;
#[cfg(test)]
mod tests_recverr;
#[cfg(test)]
mod tests_rx_tstamp;
#[cfg(test)]
mod tests_sock;
#[cfg(test)]
mod tests_sockopt;
#[cfg(test)]
mod tests_wake;
