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
//!    [`Stack::recv`], ...; a socket's options through [`Stack::socket`], as
//!    `stack.socket(h).set_nodelay(true)`).
//!
//! The TCP engine ([`tcp`]) is split by role as Linux's is, one module per Linux file
//! or function family: `tcp::input`, `tcp::ack` and `tcp::data_queue` (tcp_input.c's
//! state machine, ACK path and data path), `tcp::output` (tcp_output.c),
//! `tcp::timer` (tcp_timer.c), `tcp::fastretrans` (tcp_input.c's fast recovery: PRR,
//! RFC 6675, undo), `tcp::recovery` (tcp_recovery.c: RACK), [`tcp::rtx`] (the retransmit
//! queue and SACK processing), [`tcp::rate`] (tcp_rate.c), [`tcp::cong`]
//! (`tcp_congestion_ops`: Reno, CUBIC, BBR, DCTCP), `tcp::api` (tcp.c: sendmsg, recvmsg,
//! close), [`tcp::consts`] (include/net/tcp.h); [`tcp`]'s table lists every module
//! with its Linux counterpart. The stack around it (the socket table, demux, LISTEN
//! and SYN cookies as tcp_ipv4.c and tcp_minisocks.c, ICMP) is in src/stack/, behind
//! [`Stack`].
//!
//! [`posix`] puts Linux's socket API on top: file descriptors, errno values,
//! readiness as `tcp_poll` computes it, `poll`/`epoll`, and socket options by level,
//! still without blocking or a clock of its own.
//!
//! Async users: the `lowtide-tokio` crate runs a stack on a tokio task over a TUN
//! device or any packet device, with `TcpListener` and `TcpStream` as tokio's.

pub mod config;
pub mod mib;
pub mod posix;
pub mod rng;
pub mod route;
mod secure;
pub mod socket;
mod stack;
pub mod tcp;
pub mod time;

pub use config::{Config, ConfigError};
pub use mib::{Counters, Mib};
pub use socket::{
    EventKind, OobRead, RxChecksum, SendFlags, SendPart, Shutdown, SocketError, SocketEvent,
    SocketHandle, Transmit, TxPayload, TxToken, UserBytes,
};
pub use stack::{
    Datagram, PortOwner, ProcKind, ProcTcpEntry, RtxWork, SocketMut, SocketRef, Stack, TcpMemory,
    UdpHandle, DEVICE_IFINDEX, LOOPBACK_IFINDEX,
};
pub use tcp::info::TcpInfo;
pub use tcp::rtx::data::{PatternPayload, PayloadSource, SharedSource};
pub use tcp::TcpState;
pub use time::Instant;
