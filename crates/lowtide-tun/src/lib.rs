//! lowtide on a real network: a Linux TUN device with virtio-net offload (TSO and
//! checksum offload), an in-process emulated link with the simulator's semantics, and
//! a real-time runtime that drives the sans-IO [`lowtide::Stack`].
//!
//! - [`vnet`]: the `virtio_net_hdr` that precedes every packet on an `IFF_VNET_HDR`
//!   device (GSO type and size, partial checksum).
//! - [`device`]: opening and configuring the TUN device (`TUNSETIFF`,
//!   `TUNSETOFFLOAD`, address, link up), reading a packet for the path
//!   ([`device::TunDevice::read_frame`]).
//! - [`netns`]: network namespaces (create, enter, delete) for `lowtide link` and the
//!   tests.
//! - [`link`]: the emulated path (pfifo, rate, delay, jitter, loss) in real time,
//!   built on [`lowtide_link`], the simulator's link, so that both have the same
//!   semantics (this crate does not depend on the simulator).
//! - [`clock`]: `CLOCK_MONOTONIC` time and a timerfd for nanosecond deadlines.
//! - [`runtime`]: the event loop that drives a [`lowtide::Stack`] on a device through
//!   the path, with TX completions from the path's serializer.
//! - [`shard`]: one runtime per queue of a multi-queue device, each on its own
//!   thread, and how the kernel steers flows over the queues.
//! - [`bridge`]: two devices joined by the path (`lowtide link`).
//! - [`stop`]: SIGINT and SIGTERM as a flag, so that a program cleans up before it ends.

#![warn(missing_docs)]

pub mod attack;
pub mod bridge;
pub mod clock;
pub mod device;
mod lend;
pub mod link;
pub mod netns;
pub mod random;
pub mod runtime;
pub mod shard;
pub mod stop;
pub mod vnet;
