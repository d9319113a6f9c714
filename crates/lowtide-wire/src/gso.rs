//! Generic segmentation offload: a super-packet (one IP/TCP header, up to 64 KB of
//! payload, a segment size) cut into wire segments, and receive coalescing (GRO).

use crate::WireError;

/// Cuts `packet` (an IPv4/IPv6 + TCP packet whose TCP checksum field may hold only the
/// pseudo-header sum) into segments of at most `gso_size` payload bytes, as a NIC with
/// TSO or Linux's `tcp_gso_segment` does: each segment gets its own IP length (IPv4: id
/// incremented per segment, header checksum), its sequence number, FIN and PSH only on
/// the last segment, CWR only on the first, and a complete TCP checksum. `gso_size` 0,
/// or a payload no longer than `gso_size`, gives one segment. Returns the number of
/// segments passed to `out`.
pub fn segment(
    packet: &[u8],
    gso_size: u16,
    mut out: impl FnMut(Vec<u8>),
) -> Result<usize, WireError> {
    let _ = (packet, gso_size, &mut out);
    todo!()
}

/// Appends the payload of `seg` to the super-packet `acc` if `seg` continues it the way
/// Linux's `tcp_gro_receive` requires (same addresses and ports, in-order sequence
/// number, same ack and window, identical options, only ACK/PSH flags, a full-sized
/// previous segment, total at most `max_len`). Fixes `acc`'s IP length (and IPv4 header
/// checksum); the TCP checksum of `acc` is left stale, so the caller hands the result
/// to the stack as already verified. Returns false (and leaves `acc` alone) if not.
pub fn gro_merge(acc: &mut Vec<u8>, seg: &[u8], max_len: usize) -> bool {
    let _ = (acc, seg, max_len);
    todo!()
}
