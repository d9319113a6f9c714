//! lowtide-sim: a deterministic discrete-event network simulator for lowtide.
pub mod event;
pub mod link;
pub mod nic;
pub mod payload;
