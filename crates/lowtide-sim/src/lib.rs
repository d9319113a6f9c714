//! lowtide-sim: a deterministic discrete-event network simulator for lowtide.
//!
//! Two hosts, A (10.0.0.1, senders) and B (10.0.0.2, receivers), each a
//! [`lowtide::Stack`], are joined by a full-duplex link whose directions have their
//! own rate, delay and netem-like impairments ([`lowtide_link::LinkDir`], the same
//! code as the TUN runtime's emulated path). Each host's NIC has a pfifo queue
//! drained at link rate, which cuts GSO packets into wire segments ([`nic`],
//! [`host`]); the receive path batches arrivals like NAPI with interrupt coalescing
//! and optional GRO ([`host`]). Applications ([`app`]) send bulk or fixed-size
//! streams whose bytes are a function of (seed, flow, offset) ([`payload`]), so every
//! byte is verified at the receiver.
//!
//! Time is virtual ([`lowtide::Instant`], ns) and advances from event to event
//! ([`lowtide_link::EventQueue`]); ties are broken by insertion order, and every
//! random choice comes from a stream derived from the run's seed, so a [`Scenario`]
//! always gives the same [`RunResults`] (except the wall-clock `sim_wall_s`).
//!
//! ```no_run
//! use lowtide_sim::{Scenario, Workload};
//! let sc = Scenario {
//!     flows: 2,
//!     workload: Workload::Bytes { bytes: 1_000_000, time_limit_ns: 600_000_000_000 },
//!     ..Scenario::default()
//! };
//! let r = sc.run().unwrap();
//! assert!(r.bytes_verified);
//! ```

pub mod app;
pub mod cpu;
mod device;
pub mod host;
pub mod hostile;
pub mod intervals;
pub mod network;
pub mod nic;
pub mod payload;
pub mod qdisc;
mod run;
pub mod sample;
pub mod scenario;
pub mod sk_backlog;
pub mod soak;
pub mod timeseries;
pub mod units;
pub mod verdict;
mod world;

pub use lowtide_link::{LinkConfig, LinkStats};
pub use payload::PayloadMode;
pub use sample::MemoryResult;
pub use scenario::{
    DeviceQueueResult, ProgressHook, RunProgress, RunResults, Scenario, SimError, TxCompletion,
    Wakeups, Workload,
};
pub use timeseries::{Timeseries, TimeseriesConfig};
pub use world::LISTEN_PORT;
