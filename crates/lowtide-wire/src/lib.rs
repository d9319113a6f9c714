//! Wire formats for lowtide.
//!
//! Checked views and plain representations, in the smoltcp manner: `parse` checks
//! lengths and fields once and returns a `Repr`/view or a [`WireError`]; `emit` writes a
//! `Repr` into a caller-owned buffer. After the length check nothing here panics on
//! hostile input.
//!
//! - [`checksum`]: the Internet checksum (RFC 1071) and pseudo-headers.
//! - [`ip`]: IPv4 (RFC 791) and IPv6 (RFC 8200) headers.
//! - [`tcp`]: the TCP header (RFC 9293) and its options: MSS, window scale,
//!   timestamps (RFC 7323), SACK-permitted and SACK blocks (RFC 2018).
//! - [`udp`]: the UDP header (RFC 768) and its checksum.
//! - [`gso`]: cutting a GSO super-packet into MSS-sized segments, as a NIC with TSO
//!   or Linux's `tcp_gso_segment` does, and coalescing (GRO).
//! - [`pool`]: packet buffers reused instead of freed.
//! - [`build`]: hand-built IP packets of any protocol and IP + TCP packets (tests
//!   and the hostile peers that write their own segments).
//! - `testing` (feature `testing`, for other crates' tests): hand-built IP + TCP
//!   packets.

#![warn(missing_docs)]

pub mod build;
pub mod checksum;
pub mod gso;
pub mod ip;
pub mod pool;
pub mod tcp;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod udp;

/// Why a packet could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than its headers or than the length its headers claim.
    Truncated,
    /// A version, header length or option length that is not allowed.
    Malformed,
    /// The checksum does not verify.
    BadChecksum,
    /// A protocol or feature lowtide does not handle (e.g. IPv4 fragments, IPv6
    /// extension headers other than none).
    Unsupported,
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            WireError::Truncated => "truncated packet",
            WireError::Malformed => "malformed header",
            WireError::BadChecksum => "bad checksum",
            WireError::Unsupported => "unsupported protocol feature",
        };
        f.write_str(s)
    }
}

impl std::error::Error for WireError {}
