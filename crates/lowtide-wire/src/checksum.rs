//! The Internet checksum (RFC 1071) and the TCP pseudo-header (RFC 9293 section 3.1).

use std::net::IpAddr;

/// Adds `data` to a running ones'-complement sum (not folded, not complemented).
pub fn sum(data: &[u8], initial: u64) -> u64 {
    let _ = (data, initial);
    todo!()
}

/// Folds a running sum to 16 bits (not complemented).
pub fn fold(sum: u64) -> u16 {
    let _ = sum;
    todo!()
}

/// The pseudo-header sum for an upper-layer packet of `len` bytes.
pub fn pseudo_header(src: IpAddr, dst: IpAddr, protocol: u8, len: u32) -> u64 {
    let _ = (src, dst, protocol, len);
    todo!()
}

/// True if the TCP segment (header + payload) checksums correctly under the
/// given pseudo-header addresses.
pub fn verify_tcp(src: IpAddr, dst: IpAddr, segment: &[u8]) -> bool {
    let _ = (src, dst, segment);
    todo!()
}

/// Writes the full TCP checksum into the segment's checksum field.
pub fn fill_tcp(src: IpAddr, dst: IpAddr, segment: &mut [u8]) {
    let _ = (src, dst, segment);
    todo!()
}

/// Writes the pseudo-header sum (folded, not complemented) into the checksum field,
/// as Linux's CHECKSUM_PARTIAL / virtio NEEDS_CSUM expects; the device finishes it.
pub fn fill_tcp_partial(src: IpAddr, dst: IpAddr, segment: &mut [u8]) {
    let _ = (src, dst, segment);
    todo!()
}
