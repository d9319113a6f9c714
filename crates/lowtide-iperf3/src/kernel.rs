//! [`Sockets`] over the kernel's sockets (non-blocking, via mio), and small blocking
//! drivers: the same protocol code against the kernel's TCP, for tests and comparisons.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Token};

use crate::client::{Client, ClientConfig};
use crate::outcome::{Poll, Role, TestOutcome};
use crate::protocol::{Cookie, TestError};
use crate::server::{Server, ServerConfig};
use crate::sockets::{ConnStats, Sockets};

/// A kernel connection handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelConn(usize);

/// A kernel listener handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelListener(usize);

/// The kernel's TCP through mio: every socket is registered for readable and writable
/// events, so [`wait`](Self::wait) returns after any network event.
pub struct KernelSockets {
    poll: mio::Poll,
    events: Events,
    conns: HashMap<usize, TcpStream>,
    listeners: HashMap<usize, TcpListener>,
    next: usize,
    epoch: Instant,
}

impl core::fmt::Debug for KernelSockets {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KernelSockets")
            .field("conns", &self.conns.len())
            .field("listeners", &self.listeners.len())
            .finish()
    }
}

fn not_connected() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "unknown connection handle")
}

impl KernelSockets {
    /// A new poller.
    pub fn new() -> io::Result<Self> {
        Ok(KernelSockets {
            poll: mio::Poll::new()?,
            events: Events::with_capacity(256),
            conns: HashMap::new(),
            listeners: HashMap::new(),
            next: 0,
            epoch: Instant::now(),
        })
    }

    /// Blocks until a socket event or `timeout`.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        match self.poll.poll(&mut self.events, timeout) {
            Err(e) if e.kind() != io::ErrorKind::Interrupted => Err(e),
            _ => Ok(()),
        }
    }

    /// Blocks until a socket event or the `wake_at` a `poll` returned.
    pub fn wait_until(&mut self, wake_at: Option<Duration>) -> io::Result<()> {
        let now = self.now();
        self.wait(wake_at.map(|w| w.saturating_sub(now)))
    }

    /// The listener's bound address.
    pub fn listener_addr(&self, l: KernelListener) -> Option<SocketAddr> {
        self.listeners.get(&l.0)?.local_addr().ok()
    }

    fn register_conn(&mut self, mut s: TcpStream) -> io::Result<KernelConn> {
        let id = self.next;
        self.next += 1;
        self.poll.registry().register(
            &mut s,
            Token(id),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        self.conns.insert(id, s);
        Ok(KernelConn(id))
    }

    fn conn(&self, c: KernelConn) -> io::Result<&TcpStream> {
        self.conns.get(&c.0).ok_or_else(not_connected)
    }
}

impl Sockets for KernelSockets {
    type Conn = KernelConn;
    type Listener = KernelListener;

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    fn connect(&mut self, to: SocketAddr) -> io::Result<KernelConn> {
        let s = TcpStream::connect(to)?;
        self.register_conn(s)
    }

    fn listen(&mut self, at: SocketAddr) -> io::Result<KernelListener> {
        let mut l = TcpListener::bind(at)?;
        let id = self.next;
        self.next += 1;
        self.poll
            .registry()
            .register(&mut l, Token(id), Interest::READABLE)?;
        self.listeners.insert(id, l);
        Ok(KernelListener(id))
    }

    fn accept(&mut self, l: KernelListener) -> io::Result<KernelConn> {
        let listener = self.listeners.get(&l.0).ok_or_else(not_connected)?;
        let (s, _) = listener.accept()?;
        self.register_conn(s)
    }

    fn read(&mut self, c: KernelConn, buf: &mut [u8]) -> io::Result<usize> {
        let mut s = self.conn(c)?;
        s.read(buf)
    }

    fn write(&mut self, c: KernelConn, buf: &[u8]) -> io::Result<usize> {
        let mut s = self.conn(c)?;
        match s.write(buf) {
            // A connect still in progress.
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                Err(io::ErrorKind::WouldBlock.into())
            }
            r => r,
        }
    }

    fn shutdown_write(&mut self, c: KernelConn) -> io::Result<()> {
        self.conn(c)?.shutdown(Shutdown::Write)
    }

    fn close(&mut self, c: KernelConn) {
        if let Some(mut s) = self.conns.remove(&c.0) {
            let _ = self.poll.registry().deregister(&mut s);
        }
    }

    fn close_listener(&mut self, l: KernelListener) {
        if let Some(mut s) = self.listeners.remove(&l.0) {
            let _ = self.poll.registry().deregister(&mut s);
        }
    }

    fn stats(&self, c: KernelConn) -> ConnStats {
        self.conn(c).map(tcp_info).unwrap_or_default()
    }

    fn local_addr(&self, c: KernelConn) -> Option<SocketAddr> {
        self.conn(c).ok()?.local_addr().ok()
    }

    fn peer_addr(&self, c: KernelConn) -> Option<SocketAddr> {
        self.conn(c).ok()?.peer_addr().ok()
    }
}

/// `getsockopt(TCP_INFO)`.
#[cfg(target_os = "linux")]
fn tcp_info(s: &TcpStream) -> ConnStats {
    use std::os::fd::AsRawFd;
    // SAFETY: tcp_info is plain old data, zero is a valid value, and the kernel
    // writes at most `len` bytes into it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a valid fd, and a pointer/length pair describing `info`.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return ConnStats::default();
    }
    ConnStats {
        retransmits: u64::from(info.tcpi_total_retrans),
        snd_cwnd_bytes: u64::from(info.tcpi_snd_cwnd) * u64::from(info.tcpi_snd_mss),
        rtt_us: u64::from(info.tcpi_rtt),
        rttvar_us: u64::from(info.tcpi_rttvar),
    }
}

#[cfg(not(target_os = "linux"))]
fn tcp_info(_: &TcpStream) -> ConnStats {
    ConnStats::default()
}

/// Runs an iperf3 client test over the kernel's sockets, blocking until it ends.
pub fn run_client(cfg: ClientConfig) -> TestOutcome {
    let mut net = match KernelSockets::new() {
        Ok(n) => n,
        Err(e) => {
            let cookie = Cookie::generate(cfg.seed).as_string();
            let mut o = TestOutcome::empty(Role::Client, cfg.params(), cookie);
            o.error = Some(TestError::io("creating the poller", &e));
            return o;
        }
    };
    let mut client = Client::new(cfg);
    loop {
        match client.poll(&mut net) {
            Poll::Done(o) => return o,
            Poll::Pending { wake_at } => {
                if net.wait_until(wake_at).is_err() {
                    return client.abort(&mut net);
                }
            }
        }
    }
}

/// A server bound to its port over the kernel's sockets, ready to [`run`](Self::run).
#[derive(Debug)]
pub struct KernelServer {
    net: KernelSockets,
    server: Server<KernelSockets>,
    addr: Option<SocketAddr>,
}

impl KernelServer {
    /// Opens the listener (so that clients can connect as soon as this returns).
    pub fn bind(cfg: ServerConfig) -> io::Result<Self> {
        let mut net = KernelSockets::new()?;
        let server = Server::new(cfg, &mut net)?;
        let addr = net
            .listeners
            .values()
            .next()
            .and_then(|l| l.local_addr().ok());
        Ok(KernelServer { net, server, addr })
    }

    /// The listener's address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// Serves tests, calling `on_result` after each; returns after the first test with
    /// `one_off`, otherwise only on a poller error.
    pub fn run(mut self, mut on_result: impl FnMut(&TestOutcome)) -> io::Result<()> {
        loop {
            let poll = self.server.poll(&mut self.net);
            for o in self.server.take_finished() {
                on_result(&o);
            }
            match poll {
                Poll::Done(o) => {
                    on_result(&o);
                    return Ok(());
                }
                Poll::Pending { wake_at } => self.net.wait_until(wake_at)?,
            }
        }
    }
}

/// Binds and runs a server over the kernel's sockets (see [`KernelServer::run`]).
pub fn run_server(cfg: ServerConfig, on_result: impl FnMut(&TestOutcome)) -> io::Result<()> {
    KernelServer::bind(cfg)?.run(on_result)
}
