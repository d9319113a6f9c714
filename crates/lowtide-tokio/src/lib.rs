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
//! let mut stack = lowtide::Stack::new(lowtide::Config::default(), 1);
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

/// A lowtide stack running on a device: the handle sockets are made from. Cheap to
/// clone; the driver task stops when the last clone and the last socket are gone
/// (connections closed just before then get no further FIN retransmissions: keep a
/// `Net` alive while they finish, as a Linux host keeps orphans).
#[derive(Clone)]
pub struct Net {
    shared: Shared,
}

impl Net {
    /// Runs `stack` (with its addresses added) on `dev`, spawning the driver task on
    /// the current tokio runtime. Panics outside a runtime, like `tokio::spawn`.
    pub fn new<D: PacketDevice>(mut stack: Stack, dev: D) -> Net {
        stack.set_tx_payload_apart(dev.payload_apart());
        let shared = driver::shared(Host::new(stack));
        tokio::spawn(driver::drive(shared.clone(), dev));
        Net { shared }
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
