//! The network the protocol runs on: a small non-blocking socket API, implemented by
//! lowtide's runtime over its own stack and by the kernel's sockets (for tests).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// Per-connection statistics the protocol reports (iperf3's `retransmits`,
/// `snd_cwnd`, `rtt`), from `tcp_info` or lowtide's info snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// `tcpi_total_retrans`.
    pub retransmits: u64,
    /// `tcpi_snd_cwnd * tcpi_snd_mss` in bytes.
    pub snd_cwnd_bytes: u64,
    /// `tcpi_rtt` (µs).
    pub rtt_us: u64,
    /// `tcpi_rttvar` (µs).
    pub rttvar_us: u64,
}

/// A non-blocking TCP socket API. Every call returns at once: an operation that cannot
/// proceed yet returns `io::ErrorKind::WouldBlock`, and the driver calls the protocol's
/// `poll` again after the next network event or timeout.
pub trait Sockets {
    /// A connection.
    type Conn: Copy + Eq + core::fmt::Debug;
    /// A listening socket.
    type Listener: Copy + Eq + core::fmt::Debug;

    /// Monotonic time since an arbitrary start.
    fn now(&self) -> Duration;
    /// Starts an active open; the connection may complete later (reads and writes
    /// return `WouldBlock` until it does, or the connect error once it fails).
    fn connect(&mut self, to: SocketAddr) -> io::Result<Self::Conn>;
    /// Opens a listener.
    fn listen(&mut self, at: SocketAddr) -> io::Result<Self::Listener>;
    /// An established connection from the listener's queue, or `WouldBlock`.
    fn accept(&mut self, l: Self::Listener) -> io::Result<Self::Conn>;
    /// Reads into `buf`: `Ok(0)` is end of stream, `WouldBlock` means no data yet.
    fn read(&mut self, c: Self::Conn, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes from `buf`, possibly partly; `WouldBlock` when the send buffer is full
    /// or the connection is not established yet.
    fn write(&mut self, c: Self::Conn, buf: &[u8]) -> io::Result<usize>;
    /// Sends FIN after the queued data (`shutdown(SHUT_WR)`).
    fn shutdown_write(&mut self, c: Self::Conn) -> io::Result<()>;
    /// Closes the connection (`close()`); the handle is invalid afterwards.
    fn close(&mut self, c: Self::Conn);
    /// Closes a listener.
    fn close_listener(&mut self, l: Self::Listener);
    /// The connection's statistics.
    fn stats(&self, c: Self::Conn) -> ConnStats;

    /// CPU time the process has used, for iperf3's `cpu_utilization_percent`
    /// (`getrusage(RUSAGE_SELF)` by default).
    fn cpu_time(&self) -> crate::cpu::CpuTime {
        crate::cpu::process_cpu_time()
    }

    /// Bytes written but not yet acknowledged by the peer (Linux's `SIOCOUTQ`), if
    /// known (`None` by default). Information only: as iperf3, a sender ends the test
    /// at `-t` with these bytes still in flight, counted as sent, not received.
    fn send_queue_len(&self, c: Self::Conn) -> Option<u64> {
        let _ = c;
        None
    }

    /// The connection's local address, if known (for reports; defaults to `None`).
    fn local_addr(&self, c: Self::Conn) -> Option<SocketAddr> {
        let _ = c;
        None
    }
    /// The connection's remote address, if known (for reports; defaults to `None`).
    fn peer_addr(&self, c: Self::Conn) -> Option<SocketAddr> {
        let _ = c;
        None
    }
}
