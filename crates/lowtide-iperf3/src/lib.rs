//! iperf3's TCP test protocol (the control connection with its cookie, state bytes and
//! JSON exchanges, and the data streams) as state machines over any non-blocking
//! socket API ([`Net`]), so that lowtide's runtime and the kernel's sockets both run it.
//!
//! [`Client`] and [`Server`] do no I/O of their own and read time only from
//! [`Net::now`]. A driver calls `poll` after every batch of network events and at the
//! `wake_at` it returned, until [`Poll::Done`]. [`kernel`] has a [`Net`] over the
//! kernel's sockets and blocking drivers; [`text_report`] and [`json_report`] render
//! an outcome like iperf3 does.

#![warn(missing_docs)]

pub mod client;
pub mod kernel;
pub mod net;
pub mod outcome;
pub mod protocol;
pub mod report;
pub mod server;
mod stream;
#[cfg(test)]
mod tests;

pub use client::{Client, ClientConfig};
pub use net::{ConnStats, Net};
pub use outcome::{Poll, Role, StreamOutcome, TestOutcome};
pub use protocol::{TestError, TestParams};
pub use report::{json_report, text_report};
pub use server::{Server, ServerConfig};
