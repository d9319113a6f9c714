//! The retransmit queue: the skbs sent and not yet cumulatively acknowledged, with
//! the SACK scoreboard kept beside them (Linux's `tcp_rtx_queue` and the
//! `tcp_skb_cb` bits tcp_input.c and tcp_output.c keep on it).
//!
//! | module | Linux counterpart |
//! |---|---|
//! | [`queue`] | the queue and its counters (`packets_out`, `sacked_out`, `lost_out`, `retrans_out`), `tcp_clean_rtx_queue`, loss marking |
//! | [`sacktag`] | `tcp_sacktag_write_queue` and what it calls: D-SACK checks, block validation, the walk, skb splits and merges |
//! | `store` | where the skbs live: the rb-tree `tcp_rtx_queue`, or the list before seed 003 |
//! | `tree` | the tree shape of the store, keyed by stream offset |
//! | [`tsorted`] | `tsorted_sent_queue`: the skbs in flight by transmit time, for RACK |
//! | [`data`] | the payload an skb carries: stored bytes or a [`data::PayloadSource`]'s (pattern mode; no Linux counterpart) |
//! | [`skb`] | `struct sk_buff` and `struct tcp_skb_cb` as TCP uses them |

pub mod data;
pub mod queue;
pub mod sacktag;
pub mod skb;
mod store;
mod tree;
pub mod tsorted;

pub use queue::{Cleaned, Delivered, RackLoss, RtxQueue, RtxQueueKind, RtxWalk};
