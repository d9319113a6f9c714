//! iperf3's TCP test protocol (the control connection with its cookie, state bytes and
//! JSON exchanges, and the data streams) as state machines over any non-blocking
//! socket API ([`Sockets`]), so that lowtide's runtime and the kernel's sockets both run it.
//!
//! [`Client`] and [`Server`] do no I/O of their own and read time only from
//! [`Sockets::now`]. A driver calls `poll` after every batch of network events and at the
//! `wake_at` it returned, until [`Poll::Done`]. [`kernel`] has a [`Sockets`] over the
//! kernel's sockets and blocking drivers; [`text_report`] and [`json_report`] render
//! an outcome like iperf3 does.
//!
//! ```no_run
//! use lowtide_iperf3::{kernel::KernelSockets, Client, ClientConfig, Poll};
//! let mut net = KernelSockets::new()?;
//! let mut client = Client::new(ClientConfig::new("127.0.0.1:5201".parse().unwrap()));
//! let outcome = loop {
//!     match client.poll(&mut net) {
//!         Poll::Done(o) => break o,
//!         Poll::Pending { wake_at } => net.wait_until(wake_at)?,
//!     }
//! };
//! print!("{}", lowtide_iperf3::text_report(&outcome));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Differences from iperf3 3.12:
//! - TCP only; no UDP/SCTP or `--bidir` (our server answers a request for them with
//!   `SERVER_ERROR`/`IEUNIMP`).
//! - Intervals carry no `pmtu`/`snd_wnd`.
//! - The `[ ID]`/`socket` columns show the stream id (1, 3, 4, ...), not a descriptor.
//! - On `TEST_END` our receiving server first reads what has already arrived (iperf3
//!   closes the streams unread); our sending side stops at exactly `-n` bytes (iperf3
//!   may overshoot by part of a block).
//! - Our reports fill `sum_sent`/`sum_received` from both sides' results (iperf3's
//!   server prints its report before the exchange, so one of them is 0 there).

#![warn(missing_docs)]

pub mod client;
pub mod cpu;
pub mod interval;
pub mod kernel;
pub mod outcome;
pub mod protocol;
pub mod report;
pub mod server;
pub mod sockets;
mod stream;
#[cfg(test)]
mod tests;

pub use client::{Client, ClientConfig};
pub use interval::{Interval, IntervalResults};
pub use outcome::{Poll, Role, StreamOutcome, TestOutcome};
pub use protocol::{TestError, TestParams};
pub use report::{json_report, text_interval, text_report};
pub use server::{Server, ServerConfig};
pub use sockets::{ConnStats, Sockets};
