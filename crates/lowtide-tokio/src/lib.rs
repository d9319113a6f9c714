//! lowtide on tokio: `TcpListener` and `TcpStream` (with `AsyncRead`/`AsyncWrite`)
//! over lowtide's socket layer with Linux's semantics ([`lowtide::posix`]), driven on
//! a TUN device or any [`PacketDevice`].
//!
//! ```no_run
//! use lowtide_tokio::{Net, TcpListener};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # async fn run() -> std::io::Result<()> {
//! let dev = lowtide_tun::device::TunDevice::open("lt0", lowtide_tun::device::Offload::Full)?;
//! dev.set_ipv4("10.9.0.1".parse().unwrap(), 24)?; // the kernel's side
//! dev.set_up()?;
//! // The seed does not matter here: Net::new keys the stack from getrandom(2).
//! let mut stack = lowtide::Stack::new(lowtide::Config::default(), 0);
//! stack.add_address("10.9.0.2".parse().unwrap()); // lowtide's side
//! let net = Net::new(stack, lowtide_tokio::TunPacketDevice::new(dev)?);
//! let listener = TcpListener::bind(&net, "10.9.0.2:7".parse().unwrap())?;
//! loop {
//!     let (mut s, _peer) = listener.accept().await?;
//!     tokio::spawn(async move {
//!         let mut buf = vec![0; 65536];
//!         while let Ok(n) = s.read(&mut buf).await {
//!             if n == 0 || s.write_all(&buf[..n]).await.is_err() {
//!                 break;
//!             }
//!         }
//!     });
//! }
//! # }
//! ```
//!
//! [`Net::new`] spawns a driver task on the current tokio runtime. It feeds the
//! device's packets to the stack, runs the stack's timers with tokio's clock (so
//! `tokio::time::pause` gives virtual time, see the `sim_pair` example), hands the
//! stack's packets (64 KB GSO super-packets with partial checksums) to the device,
//! and wakes the tasks whose sockets became ready. Write readiness is Linux's:
//! with `TCP_NOTSENT_LOWAT` set ([`TcpStream::set_notsent_lowat`]), a writer that
//! filled the socket wakes once the unsent bytes drop below half the mark.
//!
//! Secure by default: [`Net::new`] keys the stack's initial sequence numbers,
//! timestamp offsets and ephemeral ports from the OS (`getrandom(2)`, RFC 6528 and
//! RFC 6056); [`Net::new_deterministic`] is the opt-in for reproducible tests.
//!
//! A program that ends ends its runtime, and the driver task with it: finish with
//! [`Net::shutdown`] so that the FINs and ACKs `close` queued leave and the
//! connections reach a final state, as Linux keeps a closed socket going after its
//! process exits:
//!
//! ```no_run
//! # async fn run(net: lowtide_tokio::Net, stream: lowtide_tokio::TcpStream) -> std::io::Result<()> {
//! drop(stream); // close(2): FIN after the queued data
//! net.shutdown(std::time::Duration::from_secs(5)).await?;
//! # Ok(()) }
//! ```
//!
//! Errors are [`std::io::Error`]s with the kind of Linux's errno
//! (`ECONNREFUSED` is [`std::io::ErrorKind::ConnectionRefused`], ...).

#![warn(missing_docs)]

mod device;
mod driver;
mod tcp;

pub use device::{channel_pair, ChannelDevice, PacketDevice, TunPacketDevice};
pub use tcp::{OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream};

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

    /// The stack's counters (nstat names), e.g. `TcpRetransSegs`.
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

impl Drop for Net {
    /// Lets the driver see whether it was the last handle.
    fn drop(&mut self) {
        driver::lock(&self.shared).kick();
    }
}
