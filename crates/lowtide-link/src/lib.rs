//! lowtide-link: the emulated link that both lowtide's simulator (`lowtide-sim`, in
//! virtual time) and its TUN runtime (`lowtide-tun`, in real time) put packets on, so
//! that the two have the same link semantics from the same code.
//!
//! - [`dir`]: one direction of a point-to-point link ([`LinkDir`]): a serializer at a
//!   fixed rate (each wire segment costs its IP length plus [`FRAMING_OVERHEAD`]), a
//!   one-way delay and netem-like impairments (jitter, loss with an optional burst
//!   model, reordering, duplication, corruption) drawn from the direction's own
//!   random stream; the segments in flight ([`Pipe`]) and what crosses ([`WireSeg`]).
//! - [`event`]: the [`EventQueue`], events keyed by (time, insertion order), so that
//!   ties are broken deterministically.
//! - [`pcap`]: a capture of what crosses a link ([`PcapSink`], raw IP, µs timestamps).
//!
//! Time is [`lowtide::Instant`] or plain nanoseconds: the caller's clock, virtual or
//! monotonic. The crate does no I/O besides the capture file, and holds no threads.
//!
//! ```
//! use lowtide_link::{LinkConfig, LinkDir, WireSeg};
//! let cfg = LinkConfig {
//!     rate_bps: 1_000_000_000,
//!     delay_ns: 1_000_000,
//!     ..LinkConfig::default()
//! };
//! let mut dir = LinkDir::new(cfg, 7);
//! let (_start, end) = dir.serialize(0, 1500); // 1538 byte times at 1 Gbit/s
//! let mut arrivals = Vec::new();
//! let seg = WireSeg::whole(vec![0; 1500]);
//! dir.propagate(end, seg, |at, seg| arrivals.push((at, seg.len())));
//! assert_eq!(arrivals, [(12_304 + 1_000_000, 1500)]);
//! ```

#![warn(missing_docs)]

pub mod dir;
pub mod event;
pub mod pcap;

pub use dir::{LinkConfig, LinkDir, LinkStats, Pipe, WireSeg, FRAMING_OVERHEAD};
pub use event::EventQueue;
pub use pcap::PcapSink;
