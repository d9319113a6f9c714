//! lowtide: a sans-IO TCP/IP engine.
//!
//! The engine performs no I/O, reads no clock and keeps no global state: time is an
//! argument of every entry point and randomness comes from a seed. A runtime (the
//! simulator in `lowtide-sim`, or a TUN device) drives one [`Stack`] like this:
//!
//! 1. hand it every received IP packet with [`Stack::handle_packet`];
//! 2. take packets for the device with [`Stack::poll_transmit`] until it returns
//!    `None`, and report each one's TX completion with [`Stack::handle_tx_complete`]
//!    once the device has sent it;
//! 3. call [`Stack::handle_timeout`] when the time from [`Stack::poll_timeout`] comes;
//! 4. drain readiness with [`Stack::poll_event`] and use the socket API ([`Stack::send`],
//!    [`Stack::recv`], ...).
//!
//! The TCP engine is split by role as Linux's is: `tcp::input` (tcp_input.c),
//! `tcp::output` (tcp_output.c), `tcp::timer` (tcp_timer.c), `tcp::recovery` (SACK
//! scoreboard and loss marking), `tcp::cong` (congestion control ops), `tcp::api`
//! (tcp.c: sendmsg, recvmsg, close).
//!
//! [`posix`] puts Linux's socket API on top: file descriptors, errno values,
//! readiness as `tcp_poll` computes it, `poll`/`epoll`, and socket options by level,
//! still without blocking or a clock of its own.

pub mod config;
pub mod mib;
pub mod posix;
pub mod rng;
mod secure;
pub mod socket;
mod stack;
pub mod tcp;
pub mod time;

pub use config::{Config, ConfigError};
pub use mib::{Counters, Mib};
pub use socket::{
    EventKind, RxChecksum, Shutdown, SocketError, SocketEvent, SocketHandle, Transmit, TxToken,
};
pub use stack::{RtxWork, Stack, TcpMemory};
pub use tcp::info::TcpInfo;
pub use tcp::TcpState;
pub use time::Instant;
