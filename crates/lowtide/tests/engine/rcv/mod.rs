//! The receive side: delayed and compressed ACKs, reads in place, window updates (tcp_input.c, tcp.c `tcp_cleanup_rbuf`).

mod comp_sack;
mod delack;
mod fast_path;
mod read_sock;
mod segs_in;
mod sk_drops;
mod window_update;
