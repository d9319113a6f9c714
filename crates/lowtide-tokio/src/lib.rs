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
//! Every core: [`Net::new_sharded`] runs one stack and driver task per queue of a
//! multi-queue TUN device ([`TunDevice::open_queues`]), connections steered as the
//! kernel steers them (the `shard` module's rules: a listener on every shard, active
//! opens in turn from per-shard port slices, misrouted packets handed over).
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
mod shard;
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
use shard::{Mailbox, Steer};
use std::future::poll_fn;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A lowtide stack running on a device: the handle sockets are made from. Cheap to
/// clone; the driver task stops when the last clone and the last socket are gone
/// (connections closed just before then get no further FIN retransmissions: end
/// with [`Net::shutdown`], which lets them finish as a Linux host keeps orphans).
///
/// A sharded `Net` ([`Net::new_sharded`]) runs one stack per queue of a
/// multi-queue device, each with its own driver task, so that a multi-thread
/// runtime spreads the connections over its workers.
#[derive(Clone)]
pub struct Net {
    shards: Arc<[Shared]>,
    mail: Arc<[Arc<Mailbox>]>,
    /// The shard of the next connection lowtide opens (round robin).
    next: Arc<AtomicUsize>,
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
        tokio::spawn(driver::drive(shared.clone(), dev, None));
        Net {
            shards: Arc::new([shared]),
            mail: Arc::new([]),
            next: Arc::default(),
        }
    }

    /// Runs one stack per queue of a multi-queue device, each on its own driver
    /// task, so that a multi-thread runtime spreads the connections over its
    /// workers: `devs` are the queues (for a TUN device,
    /// [`TunDevice::open_queues`], each through [`TunPacketDevice::new`]) and
    /// `stacks` one stack each, all with the device's addresses. Each stack is
    /// keyed from the OS as [`Net::new`] does, and opens connections from its own
    /// slice of its `net.ipv4.ip_local_port_range`.
    ///
    /// Connections the peer opens stay on the queue the kernel steers them to
    /// (every shard listens on a [`TcpListener`]'s port); connections lowtide opens
    /// go to the shards in turn; UDP sockets live on the first shard. A packet that
    /// arrives on another shard's queue is handed to its owner (the kernel steers a
    /// SYN-ACK by its flow hash, before it learns the flow's queue). See
    /// [`Net::handed`]. [`Net::with_host`] reaches the first shard,
    /// [`Net::with_each_host`] every one.
    ///
    /// # Errors
    /// `InvalidInput` if there are no queues, or not one stack per queue.
    ///
    /// # Panics
    /// As [`Net::new`].
    pub fn new_sharded<D: PacketDevice>(stacks: Vec<Stack>, devs: Vec<D>) -> io::Result<Net> {
        if stacks.is_empty() || stacks.len() != devs.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} stacks for {} queues", stacks.len(), devs.len()),
            ));
        }
        let n = stacks.len();
        let mut ports = Vec::with_capacity(n);
        let mut shards = Vec::with_capacity(n);
        for (k, (mut stack, dev)) in stacks.into_iter().zip(&devs).enumerate() {
            let key = lowtide_tun::random::os_secret()
                .unwrap_or_else(|e| panic!("lowtide-tokio: getrandom(2) failed: {e}"));
            stack.set_secret(key);
            let slice = lowtide_tun::shard::port_range(stack.config().ip_local_port_range, k, n);
            let range = format!("{} {}", slice[0], slice[1]);
            // A range inside a valid one is valid: this cannot fail.
            let _ = stack.set_sysctl(
                lowtide::Instant::ZERO,
                "net.ipv4.ip_local_port_range",
                &range,
            );
            stack.set_tx_payload_apart(dev.payload_apart());
            ports.push(slice);
            shards.push(driver::shared(Host::new(stack)));
        }
        let mail: Arc<[Arc<Mailbox>]> = (0..n).map(|_| Arc::default()).collect();
        let ports: Arc<[[u16; 2]]> = ports.into();
        for (me, (dev, shared)) in devs.into_iter().zip(&shards).enumerate() {
            let steer = Steer {
                me,
                ports: ports.clone(),
                mail: mail.clone(),
            };
            tokio::spawn(driver::drive(shared.clone(), dev, Some(steer)));
        }
        Ok(Net {
            shards: shards.into(),
            mail,
            next: Arc::default(),
        })
    }

    /// The number of shards: 1 unless made by [`Net::new_sharded`].
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Packets that arrived on another shard's queue and were handed to shard `k`
    /// (0 if not sharded).
    pub fn handed(&self, k: usize) -> u64 {
        self.mail
            .get(k)
            .map_or(0, |m| m.handed.load(Ordering::Relaxed))
    }

    /// The first shard: UDP sockets' home, and the whole stack when not sharded.
    pub(crate) fn first(&self) -> &Shared {
        &self.shards[0]
    }

    /// Every shard.
    pub(crate) fn all(&self) -> &[Shared] {
        &self.shards
    }

    /// The shard of the next connection lowtide opens.
    pub(crate) fn pick(&self) -> &Shared {
        let k = self.next.fetch_add(1, Ordering::Relaxed) % self.shards.len();
        &self.shards[k]
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
        let settled = async {
            for shared in self.all() {
                driver::lock(shared).kick();
                poll_fn(|cx| driver::lock(shared).poll_settled(cx)).await;
            }
        };
        if tokio::time::timeout(timeout, settled).await.is_ok() {
            return Ok(());
        }
        let left: usize = (self.all().iter())
            .map(|s| driver::lock(s).host.stack().closing_count())
            .sum();
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{left} connection(s) still closing after {timeout:?}"),
        ))
    }

    /// A snapshot of the stack's counters, by nstat name:
    /// `net.counters().by_name("TcpRetransSegs")`, or by [`lowtide::mib::Mib`]
    /// with [`Counters::get`]; [`Counters::iter`] lists them all.
    /// Summed over the shards of a sharded `Net`.
    pub fn counters(&self) -> Counters {
        let mut sum = Counters::default();
        for s in self.all() {
            sum.merge(driver::lock(s).host.stack().counters());
        }
        sum
    }

    /// Runs `f` on the socket layer, for what this API does not wrap
    /// (`setsockopt`, `Stack::set_sysctl` through `stack_mut`, ...); on the first
    /// shard of a sharded `Net` (see [`Net::with_each_host`]).
    pub fn with_host<R>(&self, f: impl FnOnce(&mut Host) -> R) -> R {
        with_shard(self.first(), f)
    }

    /// Runs `f` on every shard's socket layer in turn, with the shard's index (a
    /// sysctl for the whole `Net`: `net.with_each_host(|_, h| ...)`).
    pub fn with_each_host(&self, mut f: impl FnMut(usize, &mut Host)) {
        for (k, s) in self.all().iter().enumerate() {
            with_shard(s, |h| f(k, h));
        }
    }
}

/// Runs `f` on one shard's socket layer, then lets its driver act on it.
fn with_shard<R>(shared: &Shared, f: impl FnOnce(&mut Host) -> R) -> R {
    let mut g = driver::lock(shared);
    let r = f(&mut g.host);
    g.host.sync_events();
    g.kick();
    r
}

impl std::fmt::Debug for Net {
    /// The stack's connections: all in its table, and those not yet in a final
    /// state ([`Stack::closing_count`]); not shown while the stack is locked (e.g.
    /// inside [`Net::with_host`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Net");
        let locked: Option<Vec<_>> = self.all().iter().map(|s| s.try_lock().ok()).collect();
        if let Some(gs) = locked {
            let count =
                |f: fn(&Stack) -> usize| -> usize { gs.iter().map(|g| f(g.host.stack())).sum() };
            d.field("connections", &count(Stack::connection_count));
            d.field("live", &count(Stack::closing_count));
        }
        if self.shards() > 1 {
            d.field("shards", &self.shards());
        }
        d.finish_non_exhaustive()
    }
}

impl Drop for Net {
    /// Lets the driver see whether it was the last handle.
    fn drop(&mut self) {
        for s in self.all() {
            driver::lock(s).kick();
        }
    }
}
