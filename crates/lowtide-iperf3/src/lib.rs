//! iperf3's TCP test protocol (the control connection with its cookie, state bytes and
//! JSON exchanges, and the data streams) as state machines over any non-blocking
//! socket API ([`Net`]), so that lowtide's runtime and the kernel's sockets both run it.

#![warn(missing_docs)]

pub mod net;

pub use net::{ConnStats, Net};
