//! The TCP header (RFC 9293 section 3.1) and its options.

use crate::WireError;

/// TCP header flags (the low byte of the flags field: CWR ECE URG ACK PSH RST SYN FIN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push function.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// Acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// Urgent pointer field is significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN-Echo (RFC 3168).
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion Window Reduced (RFC 3168).
    pub const CWR: TcpFlags = TcpFlags(0x80);

    /// True if every flag in `other` is set.
    pub fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// True if any flag in `other` is set.
    pub fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }
}

impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl core::ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

/// One SACK block (RFC 2018): `[start, end)` in sequence space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackBlock {
    /// Left edge: first sequence number of the block.
    pub start: u32,
    /// Right edge: sequence number just past the block.
    pub end: u32,
}

/// The options lowtide understands. Unknown options are skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpOptions {
    /// Maximum segment size (kind 2), SYN only.
    pub mss: Option<u16>,
    /// Window scale shift (kind 3), SYN only; values above 14 are kept as sent
    /// (RFC 7323 section 2.3 says the receiver clamps them to 14).
    pub wscale: Option<u8>,
    /// SACK permitted (kind 4), SYN only.
    pub sack_permitted: bool,
    /// Timestamps (kind 8): (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
    /// SACK blocks (kind 5), the first `sack_len` entries are valid.
    pub sack: [SackBlock; 4],
    /// Number of valid SACK blocks (0..=4).
    pub sack_len: u8,
}

impl TcpOptions {
    /// The valid SACK blocks.
    pub fn sack_blocks(&self) -> &[SackBlock] {
        &self.sack[..self.sack_len as usize]
    }
}

/// A parsed TCP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Window field, unscaled as on the wire.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Options.
    pub options: TcpOptions,
}

/// Length of a TCP header without options.
pub const TCP_HEADER_LEN: usize = 20;

impl TcpRepr {
    /// Parses a TCP header at the start of `segment` (TCP header followed by payload).
    /// Returns the header and the header length (data offset * 4); the payload is
    /// `&segment[header_len..]`. Does not verify the checksum (see
    /// [`crate::checksum`]). A data offset below 5 or past the segment, or an option
    /// whose length is below 2 or runs past the header, is `Malformed`; known options
    /// with an unexpected length are ignored as Linux's `tcp_parse_options` does.
    pub fn parse(segment: &[u8]) -> Result<(TcpRepr, usize), WireError> {
        let _ = segment;
        todo!()
    }

    /// Length of the header `emit` writes, options included, padded to 4 bytes.
    pub fn header_len(&self) -> usize {
        todo!()
    }

    /// Writes the header and options into `buf[..self.header_len()]`, with the
    /// checksum field set to zero. Option layout follows Linux (`tcp_options_write`):
    /// MSS, then SACK-permitted+timestamps packed (`NOP NOP TS` or `SACKOK TS`),
    /// NOP+wscale, NOP NOP + SACK blocks.
    pub fn emit(&self, buf: &mut [u8]) {
        let _ = buf;
        todo!()
    }
}
