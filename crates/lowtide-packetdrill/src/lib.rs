//! packetdrill's shared-object interface (`--so_filename`) over lowtide's socket
//! layer ([`lowtide::posix`]), in virtual time.
//!
//! `packetdrill_interface_init` fills the 35 members of `struct
//! packetdrill_interface` (packetdrill's `src/packetdrill.h`). Every entry catches
//! panics and reports errors through `errno`; the state sits behind one mutex, and a
//! call that blocks in Linux waits on a condvar until another thread's call (a packet,
//! the clock) makes progress. The clock rules are those of
//! `../shared/docs/packetdrill-so.md`: `gettimeofday` moves 1 us per call, `usleep`
//! and `netdev_receive` move it to the next timer, and moves wait until every woken
//! blocked thread has re-checked and read the clock.

#![allow(clippy::missing_safety_doc)]

mod cmsg;
pub mod device;
mod ffi;
pub mod procnet;
pub mod route;
pub mod state;
pub mod sysctl;

pub use ffi::packetdrill_interface_init;
