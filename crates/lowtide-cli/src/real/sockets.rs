//! lowtide's stack as the non-blocking socket API the iperf3 protocol runs on, and
//! the loop that drives an application on the runtime.

use super::connect::{connect_failed, ConnectWatch};
use lowtide::{EventKind, Shutdown, SocketError, SocketHandle};
use lowtide_iperf3::{ConnStats, Sockets};
use lowtide_tun::runtime::Runtime;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The errno-named socket error as an `io::Error` of the same kind.
pub fn io_error(e: SocketError) -> io::Error {
    use io::ErrorKind as K;
    let kind = match e {
        SocketError::WouldBlock => K::WouldBlock,
        SocketError::BadHandle | SocketError::InvalidInput | SocketError::MessageTooLong => {
            K::InvalidInput
        }
        SocketError::NotConnected => K::NotConnected,
        SocketError::BrokenPipe => K::BrokenPipe,
        SocketError::ConnectionRefused => K::ConnectionRefused,
        SocketError::ConnectionReset => K::ConnectionReset,
        SocketError::TimedOut => K::TimedOut,
        SocketError::AddrInUse => K::AddrInUse,
        SocketError::AddrNotAvailable => K::AddrNotAvailable,
        SocketError::HostUnreachable => K::HostUnreachable,
        SocketError::NetworkUnreachable => K::NetworkUnreachable,
        SocketError::NoBufferSpace => K::OutOfMemory,
        SocketError::PermissionDenied | SocketError::AccessDenied => K::PermissionDenied,
        SocketError::HostDown => K::HostUnreachable,
        SocketError::NoNetwork => K::NetworkUnreachable,
        SocketError::NotFound | SocketError::NoDevice => K::NotFound,
        SocketError::NoMemory => K::OutOfMemory,
        SocketError::ProtocolError
        | SocketError::ProtocolUnavailable
        | SocketError::NotSupported => K::Other,
    };
    io::Error::new(kind, e)
}

/// [`Sockets`] over lowtide's stack on a runtime, with `local` as the source address.
pub struct StackSockets {
    /// The runtime.
    pub rt: Runtime,
    /// lowtide's address.
    pub local: IpAddr,
    /// Active opens still in SYN-SENT.
    pub connects: Vec<ConnectWatch>,
    /// Every connection opened or accepted, in order (for `--timeseries`).
    pub opened: Vec<SocketHandle>,
    /// `--timeseries`' recorder, if asked for.
    pub recorder: Option<crate::real_timeseries::Recorder>,
}

impl StackSockets {
    /// [`Sockets`] over `rt` with `local` as the source address.
    pub fn new(rt: Runtime, local: IpAddr) -> Self {
        StackSockets {
            rt,
            local,
            connects: Vec::new(),
            opened: Vec::new(),
            recorder: None,
        }
    }

    /// Drains the stack's events; reports SYN retransmissions of the opens in
    /// progress, and fails with Linux's error when one of them failed.
    pub fn watch_connects(&mut self) -> Result<(), String> {
        let mut failed = None;
        while let Some(ev) = self.rt.stack().poll_event() {
            if let EventKind::Error(e) = ev.kind {
                if let Some(w) = self.connects.iter().find(|w| w.handle == ev.socket) {
                    failed.get_or_insert(connect_failed(w.to, e));
                }
            }
        }
        if let Some(msg) = failed {
            return Err(msg);
        }
        let rt = &self.rt;
        self.connects.retain_mut(|w| w.check(rt));
        Ok(())
    }
}

/// A [`Sockets`] the real-path commands drive: lowtide's address, the active opens'
/// watch, and the wait between two looks at the sockets.
pub trait Driven: Sockets {
    /// lowtide's address.
    fn local(&self) -> IpAddr;
    /// `net.ipv4.tcp_syn_retries` of the stack(s).
    fn syn_retries(&self) -> u8;
    /// Reports SYN retransmissions of the opens in progress, and fails with Linux's
    /// error when one of them failed.
    fn watch_connects(&mut self) -> Result<(), String>;
    /// Serves the network until the protocol's next deadline (`wake_at`, on
    /// [`Sockets::now`]'s clock) or a network event.
    fn turn(&mut self, wake_at: Option<Duration>) -> Result<(), String>;
}

impl Driven for StackSockets {
    fn local(&self) -> IpAddr {
        self.local
    }

    fn syn_retries(&self) -> u8 {
        self.rt.stack_ref().config().tcp_syn_retries
    }

    fn watch_connects(&mut self) -> Result<(), String> {
        StackSockets::watch_connects(self)
    }

    fn turn(&mut self, wake_at: Option<Duration>) -> Result<(), String> {
        self.watch_connects()?;
        if let Some(r) = self.recorder.as_mut() {
            // The data streams: the first connection is the test's control connection.
            r.observe(&self.rt, self.opened.get(1..).unwrap_or(&[]));
        }
        let wake = wake_at.map(|d| lowtide::Instant(d.as_nanos() as u64));
        self.rt
            .turn(wake, Duration::from_millis(100))
            .map_err(|e| format!("event loop: {e}"))
    }
}

impl Sockets for StackSockets {
    type Conn = SocketHandle;
    type Listener = SocketHandle;

    fn now(&self) -> Duration {
        Duration::from_nanos(self.rt.now().as_nanos())
    }

    fn connect(&mut self, to: SocketAddr) -> io::Result<SocketHandle> {
        let now = self.rt.now();
        let from = SocketAddr::new(self.local, 0);
        let h = self.rt.stack().connect(now, from, to).map_err(io_error)?;
        self.connects.push(ConnectWatch::new(h, to));
        self.opened.push(h);
        Ok(h)
    }

    fn listen(&mut self, at: SocketAddr) -> io::Result<SocketHandle> {
        self.rt.stack().listen(at, 128).map_err(io_error)
    }

    fn accept(&mut self, l: SocketHandle) -> io::Result<SocketHandle> {
        let h = self.rt.stack().accept(l).map_err(io_error)?;
        self.opened.push(h);
        Ok(h)
    }

    fn read(&mut self, c: SocketHandle, buf: &mut [u8]) -> io::Result<usize> {
        let now = self.rt.now();
        self.rt.stack().recv(now, c, buf).map_err(io_error)
    }

    fn write(&mut self, c: SocketHandle, buf: &[u8]) -> io::Result<usize> {
        let now = self.rt.now();
        self.rt.stack().send(now, c, buf).map_err(io_error)
    }

    fn shutdown_write(&mut self, c: SocketHandle) -> io::Result<()> {
        let now = self.rt.now();
        let r = self.rt.stack().shutdown(now, c, Shutdown::Write);
        r.map_err(io_error)
    }

    fn close(&mut self, c: SocketHandle) {
        let now = self.rt.now();
        let _ = self.rt.stack().close(now, c);
    }

    fn close_listener(&mut self, l: SocketHandle) {
        let now = self.rt.now();
        let _ = self.rt.stack().close(now, l);
    }

    fn send_queue_len(&self, c: SocketHandle) -> Option<u64> {
        let i = self.rt.stack_ref().info(self.rt.now(), c).ok()?;
        // Unacknowledged segments, or bytes not sent yet.
        Some(i.unacked as u64 + i.notsent_bytes)
    }

    fn local_addr(&self, c: SocketHandle) -> Option<SocketAddr> {
        self.rt.stack_ref().addresses(c).ok().map(|(l, _)| l)
    }

    fn peer_addr(&self, c: SocketHandle) -> Option<SocketAddr> {
        self.rt.stack_ref().addresses(c).ok().map(|(_, r)| r)
    }

    fn stats(&self, c: SocketHandle) -> ConnStats {
        let info = self.rt.stack_ref().info(self.rt.now(), c);
        info.map_or_else(|_| ConnStats::default(), |i| conn_stats(&i))
    }
}

/// iperf3's per-stream figures from a connection's `tcp_info`.
pub fn conn_stats(i: &lowtide::TcpInfo) -> ConnStats {
    ConnStats {
        retransmits: i.total_retrans as u64,
        snd_cwnd_bytes: i.snd_cwnd as u64 * i.snd_mss as u64,
        rtt_us: i.rtt as u64,
        rttvar_us: i.rttvar as u64,
    }
}
