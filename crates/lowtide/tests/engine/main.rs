//! The engine's integration tests, one binary with a module per role of tcp/ (one
//! binary builds and links once, where 30 did before). Each test drives whole stacks
//! through the public API: `common` has the two-host test network in virtual time
//! (`Pair`) and the packetdrill-like harness (`common::drill`).

mod common;
mod heap;
mod layout;

mod cong;
mod conn;
mod output;
mod rcv;
mod readme_sysctls;
mod recovery;
mod robust;
mod timer;
