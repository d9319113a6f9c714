//! Loss recovery and the retransmit queue: fast recovery, CWR's PRR, RACK, Karn, D-SACK, old ACKs, SACK reneging, both queue kinds (tcp_input.c, tcp_recovery.c, tcp_rate.c).

mod cwr_prr;
mod dsack_delivered;
mod fast_recovery;
mod karn;
mod newreno_hold;
mod old_ack;
mod rack;
mod reordering;
mod rtx_queue_kinds;
mod sack_reneg_rate;
