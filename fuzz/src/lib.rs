//! Coverage-guided fuzz targets for lowtide, as plain functions.
//!
//! Each module has a `run(data: &[u8])` that the AFL++ binaries in `src/bin/` call
//! (`cargo afl build --features afl`, see `fuzz/README.md`) and that the replay test
//! (`tests/replay.rs`) calls on every checked-in corpus and regression file, so CI
//! checks old findings without AFL. A target fails by panicking: a parser or the
//! engine panicked on hostile input, or an oracle (round trip, reference model)
//! disagreed.
//!
//! - [`wire`]: IPv4/IPv6 and TCP (options) parsers, GSO/GRO, the virtio-net header.
//! - [`engine`]: a [`lowtide::Stack`] fed segment sequences by a scripted peer, from
//!   every TCP state, with sequence numbers relative to the connection's own.
//! - [`scoreboard`]: the retransmit queue's SACK scoreboard (tree and list) against
//!   a byte-level reference model.

pub mod engine;
pub mod scoreboard;
pub mod wire;

/// Reads the input as little records: a cursor that yields zeros past the end, so
/// every input decodes to something.
pub(crate) struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Bytes { data }
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub(crate) fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }
}
