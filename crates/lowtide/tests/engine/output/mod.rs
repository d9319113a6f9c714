//! The send side: send buffer autotuning, packet buffers, local drops, path MTU (tcp_output.c, tcp_input.c `tcp_sndbuf_expand`).

mod buffer_pool;
mod local_drop;
mod mss;
pub(crate) mod pmtu;
mod routes;
mod sndbuf;
mod zerocopy;
