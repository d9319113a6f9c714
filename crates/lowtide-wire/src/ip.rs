//! IPv4 (RFC 791) and IPv6 (RFC 8200) headers.

use crate::WireError;
use std::net::IpAddr;

/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// Length of an IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = 20;
/// Length of the fixed IPv6 header.
pub const IPV6_HEADER_LEN: usize = 40;

/// A parsed IPv4 or IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRepr {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Upper-layer protocol (IPv4 protocol / IPv6 next header).
    pub protocol: u8,
    /// TTL or hop limit.
    pub hop_limit: u8,
    /// The two ECN bits of the TOS / traffic class byte.
    pub ecn: u8,
    /// Header length in bytes (IPv4 IHL*4, including options; 40 for IPv6).
    pub header_len: usize,
    /// Length of the upper-layer payload in bytes.
    pub payload_len: usize,
}

impl IpRepr {
    /// Parses the IP header at the start of `packet` (version from the first nibble).
    ///
    /// Verifies the IPv4 header checksum when `verify_csum`. Bytes after the length the
    /// header claims (link padding) are ignored; a packet shorter than it is
    /// `Truncated`. IPv4 fragments and IPv6 extension headers are `Unsupported`.
    pub fn parse(packet: &[u8], verify_csum: bool) -> Result<IpRepr, WireError> {
        let _ = (packet, verify_csum);
        todo!()
    }

    /// The header length `emit` writes for this address family (20 or 40).
    pub fn emit_len(&self) -> usize {
        match self.src {
            IpAddr::V4(_) => IPV4_HEADER_LEN,
            IpAddr::V6(_) => IPV6_HEADER_LEN,
        }
    }

    /// Writes the header into `buf[..self.emit_len()]`: IPv4 with DF set, the given
    /// identification and a correct header checksum; IPv6 with flow label 0.
    /// `self.payload_len` gives the length fields.
    pub fn emit(&self, buf: &mut [u8], ipv4_id: u16) {
        let _ = (buf, ipv4_id);
        todo!()
    }
}
