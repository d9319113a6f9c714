//! Connection setup and the state machine: LISTEN, SYN-RECV, SYN cookies, ISNs, forged segments per state (tcp_ipv4.c, tcp_minisocks.c, tcp_input.c `tcp_rcv_state_process`).

mod check_req;
mod close;
mod deathrow;
mod fastopen_client;
mod fastopen_server;
mod handshake;
mod isn;
mod listener;
mod md5;
mod md5_reset;
mod reflect_tos;
mod states;
mod syncookies;
mod synsent_ack;
mod timewait;
mod unhash;
