//! lowtide on tokio: `TcpListener` and `TcpStream` (with
//! [`AsyncRead`](tokio::io::AsyncRead)/[`AsyncWrite`](tokio::io::AsyncWrite)),
//! and [`UdpSocket`] (the stack answers pings and sends ICMP port unreachable), over
//! lowtide's socket layer with Linux's semantics ([`lowtide::posix`]), driven on a
//! TUN device or any [`PacketDevice`]. One dependency suffices: the engine
//! ([`lowtide`]) and the TUN device ([`TunDevice`], [`Offload`]; all of
//! `lowtide-tun` as `lowtide_tokio::tun`) are re-exported.
//!
//! New here? [`guide`] is a whole first program (TCP and UDP servers, a client, the
//! errors, counters, a graceful end) that `cargo test --doc` compiles and runs.
//!
//! An echo server on a TUN device that stops after a client says "bye", with a
//! graceful end:
//!
//! ```no_run
//! use lowtide_tokio::lowtide::{Config, Stack};
//! use lowtide_tokio::{Net, Offload, TcpListener, TunDevice, TunPacketDevice};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use std::time::Duration;
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let dev = TunDevice::open("lt0", Offload::Full)?;
//!     dev.set_ipv4("10.9.0.1".parse().unwrap(), 24)?; // the kernel's side
//!     dev.set_up()?;
//!     // The seed does not matter here: Net::new keys the stack from getrandom(2).
//!     let mut stack = Stack::new(Config::default(), 0);
//!     stack.add_address("10.9.0.2".parse().unwrap()); // lowtide's side
//!     let net = Net::new(stack, TunPacketDevice::new(dev)?);
//!     println!("{net:?}");
//!     let listener = TcpListener::bind(&net, "10.9.0.2:7")?;
//!     loop {
//!         let (mut s, peer) = listener.accept().await?;
//!         let mut buf = vec![0; 65536];
//!         let n = s.read(&mut buf).await?;
//!         s.write_all(&buf[..n]).await?;
//!         println!("{peer}: {s:?}");
//!         if buf[..n].starts_with(b"bye") {
//!             break;
//!         }
//!     }
//!     drop(listener);
//!     // Let the last FIN and ACK leave before the runtime (and the driver) ends.
//!     net.shutdown(Duration::from_secs(5)).await
//! }
//! ```
//!
//! [`Net::new`] spawns a driver task on the current tokio runtime. It feeds the
//! device's packets to the stack, runs the stack's timers with tokio's clock, hands
//! the stack's packets (64 KB GSO super-packets with partial checksums) to the
//! device, and wakes the tasks whose sockets became ready. Write readiness is
//! Linux's: with `TCP_NOTSENT_LOWAT` set ([`TcpStream::set_notsent_lowat`]), a
//! writer that filled the socket wakes once the unsent bytes drop below half the
//! mark.
//!
//! Secure by default: [`Net::new`] keys the stack's initial sequence numbers,
//! timestamp offsets and ephemeral ports from the OS (`getrandom(2)`, RFC 6528 and
//! RFC 6056); [`Net::new_deterministic`] is the opt-in for reproducible tests.
//!
//! A program that ends ends its runtime, and the driver task with it: finish with
//! [`Net::shutdown`] so that the FINs and ACKs `close` queued leave and the
//! connections reach a final state, as Linux keeps a closed socket going after its
//! process exits.
//!
//! Virtual time: the driver's timers are tokio's, so under a paused clock two stacks
//! joined by [`channel_pair`] run a 10 MB transfer in milliseconds of wall time
//! (the `sim_pair` example). Pausing needs tokio's `test-util` feature in your
//! `Cargo.toml` (`tokio = { version = "1", features = ["full", "test-util"] }`),
//! then `#[tokio::test(start_paused = true)]`, `#[tokio::main(flavor =
//! "current_thread", start_paused = true)]` or `tokio::time::pause()`.
//!
//! Errors are [`std::io::Error`]s as a kernel socket's are: `raw_os_error()` is
//! Linux's errno, the kind std's mapping of it (`ECONNREFUSED` is
//! [`std::io::ErrorKind::ConnectionRefused`]) and the text the standard one
//! (`Connection refused (os error 111)`).

#![warn(missing_docs)]

mod device;
mod driver;
pub mod guide;
mod tcp;
mod udp;

pub use device::{channel_pair, ChannelDevice, PacketDevice, TunPacketDevice};
/// The engine: [`lowtide::Stack`], [`lowtide::Config`], counters, `tcp_info`.
pub use lowtide;
/// A datagram with its sender and original destination ([`UdpSocket::recv_datagram`]).
pub use lowtide::Datagram;
/// `lowtide-tun` whole (network namespaces, the OS random source, ...).
pub use lowtide_tun as tun;
/// `lowtide-tun`'s TUN device and its offload setting, so that one dependency
/// suffices: `TunDevice::open(name, Offload::Full)` (or `open_in` a namespace),
/// `set_ipv4`, `set_up`, then [`TunPacketDevice::new`].
pub use lowtide_tun::device::{Offload, TunDevice};
pub use tcp::{OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream};
pub use udp::UdpSocket;

use driver::Shared;
use lowtide::posix::Host;
use lowtide::{Counters, Stack};
use std::future::poll_fn;
use std::io;

/// A lowtide stack running on a device: the handle sockets are made from. Cheap to
/// clone; the driver task stops when the last clone and the last socket are gone
/// (connections closed just before then get no further FIN retransmissions: end
/// with [`Net::shutdown`], which lets them finish as a Linux host keeps orphans).
#[derive(Clone)]
pub struct Net {
    shared: Shared,
}

impl Net {
    /// Runs `stack` (with its addresses added) on `dev`, spawning the driver task on
    /// the current tokio runtime, after keying the stack from the OS random source
    /// (`getrandom(2)`, [`Stack::set_secret`]): initial sequence numbers (RFC 6528),
    /// timestamp offsets and ephemeral ports (RFC 6056) are then unpredictable, and
    /// the seed given to [`Stack::new`] decides none of them. For reproducible runs
    /// (tests), [`Net::new_deterministic`] keeps the seed's keys.
    ///
    /// # Panics
    /// Outside a tokio runtime, like `tokio::spawn`; and if `getrandom(2)` fails,
    /// as std's `RandomState` does.
    pub fn new<D: PacketDevice>(mut stack: Stack, dev: D) -> Net {
        let key = lowtide_tun::random::os_secret()
            .unwrap_or_else(|e| panic!("lowtide-tokio: getrandom(2) failed: {e}"));
        stack.set_secret(key);
        Net::new_deterministic(stack, dev)
    }

    /// Like [`Net::new`] but without the OS key: the stack's ISNs, ports and
    /// timestamps follow from the seed given to [`Stack::new`], the same on every
    /// run. An explicit opt-in for tests and reproductions; on a real network it
    /// lets anyone who knows the seed predict them (what RFC 6528 and RFC 6056
    /// guard against).
    pub fn new_deterministic<D: PacketDevice>(mut stack: Stack, dev: D) -> Net {
        stack.set_tx_payload_apart(dev.payload_apart());
        let shared = driver::shared(Host::new(stack));
        tokio::spawn(driver::drive(shared.clone(), dev));
        Net { shared }
    }

    /// Ends the stack gracefully, as a Linux host lets the connections a process
    /// closed finish after it exits: waits, up to `timeout`, until what `close`
    /// and `shutdown` queued (data, FIN, the ACK of the peer's FIN) has been sent,
    /// retransmitted as needed, and every connection has reached a final state
    /// (closed, or TIME-WAIT: [`Stack::closing_count`] is 0). Call it before the
    /// runtime ends (e.g. at the end of `main`): the driver is a task of the
    /// runtime, and without it the peer is left retransmitting its FIN.
    ///
    /// Drop or close your sockets first: a connection still open counts as
    /// unfinished. Returns [`io::ErrorKind::TimedOut`] if some are still closing
    /// at `timeout`.
    pub async fn shutdown(self, timeout: std::time::Duration) -> io::Result<()> {
        driver::lock(&self.shared).kick();
        let settled = poll_fn(|cx| driver::lock(&self.shared).poll_settled(cx));
        if tokio::time::timeout(timeout, settled).await.is_ok() {
            return Ok(());
        }
        let left = driver::lock(&self.shared).host.stack().closing_count();
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{left} connection(s) still closing after {timeout:?}"),
        ))
    }

    /// A snapshot of the stack's counters, by nstat name:
    /// `net.counters().by_name("TcpRetransSegs")`, or by [`lowtide::mib::Mib`]
    /// with [`Counters::get`]; [`Counters::iter`] lists them all.
    pub fn counters(&self) -> Counters {
        driver::lock(&self.shared).host.stack().counters().clone()
    }

    /// Runs `f` on the socket layer, for what this API does not wrap
    /// (`setsockopt`, `Stack::set_sysctl` through `stack_mut`, ...).
    pub fn with_host<R>(&self, f: impl FnOnce(&mut Host) -> R) -> R {
        let mut g = driver::lock(&self.shared);
        let r = f(&mut g.host);
        g.host.sync_events();
        g.kick();
        r
    }
}

impl std::fmt::Debug for Net {
    /// The stack's connections: all in its table, and those not yet in a final
    /// state ([`Stack::closing_count`]); not shown while the stack is locked (e.g.
    /// inside [`Net::with_host`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Net");
        if let Ok(g) = self.shared.try_lock() {
            let st = g.host.stack();
            d.field("connections", &st.connection_count());
            d.field("live", &st.closing_count());
        }
        d.finish_non_exhaustive()
    }
}

impl Drop for Net {
    /// Lets the driver see whether it was the last handle.
    fn drop(&mut self) {
        driver::lock(&self.shared).kick();
    }
}
