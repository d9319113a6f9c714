//! Hand-built IP + TCP packets: addresses, flags, options and payload in, a
//! checksummed packet out. Tests build theirs with it (through `testing`, which
//! re-exports it), and so do the hostile peers that write their own segments (the simulator's,
//! `lowtide_sim::hostile`, and the raw-socket attacker on the real path).

use crate::checksum;
use crate::ip::{IpRepr, PROTO_TCP};
use crate::tcp::TcpRepr;
use std::net::{IpAddr, SocketAddr};

/// What the TCP checksum field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Csum {
    /// The full checksum, as on the wire.
    Full,
    /// Only the pseudo-header sum (`CHECKSUM_PARTIAL`), as lowtide's `Transmit` and a
    /// TSO super-packet carry it: the device finishes it.
    Partial,
}

/// An IP packet of `protocol` from `src` to `dst` carrying `l4`: IPv4 (DF set,
/// identification `ipv4_id`, no options) or IPv6 by `src`'s family, hop limit 64,
/// not ECN-capable. `l4` goes as it is (its checksum, if any, is the caller's).
pub fn ip_packet(src: IpAddr, dst: IpAddr, protocol: u8, l4: &[u8], ipv4_id: u16) -> Vec<u8> {
    let ip = IpRepr {
        src,
        dst,
        protocol,
        hop_limit: 64,
        ecn: 0,
        tos: 0,
        header_len: 0,
        payload_len: l4.len(),
    };
    let mut p = vec![0u8; ip.emit_len()];
    ip.emit(&mut p, ipv4_id);
    p.extend_from_slice(l4);
    p
}

/// An IP + TCP packet from `src` to `dst`, as [`ip_packet`] writes the IP header;
/// the TCP header `th` with its ports replaced by `src`'s and `dst`'s; then
/// `payload`; the checksum filled as `csum` says.
pub fn tcp_packet(
    src: SocketAddr,
    dst: SocketAddr,
    th: &TcpRepr,
    payload: &[u8],
    ipv4_id: u16,
    csum: Csum,
) -> Vec<u8> {
    let mut th = *th;
    th.src_port = src.port();
    th.dst_port = dst.port();
    let mut seg = vec![0u8; th.header_len()];
    th.emit(&mut seg);
    seg.extend_from_slice(payload);
    match csum {
        Csum::Full => checksum::fill_tcp(src.ip(), dst.ip(), &mut seg),
        Csum::Partial => checksum::fill_tcp_partial(src.ip(), dst.ip(), &mut seg),
    }
    ip_packet(src.ip(), dst.ip(), PROTO_TCP, &seg, ipv4_id)
}

/// The options of a Linux client's SYN on a 1500-byte path (MSS 1460, window scale
/// 7, SACK permitted, timestamps with `tsval`), as hand-written peers send them.
pub fn syn_options(tsval: u32) -> crate::tcp::TcpOptions {
    crate::tcp::TcpOptions {
        mss: Some(1460),
        wscale: Some(7),
        sack_permitted: true,
        timestamp: Some((tsval, 0)),
        ..crate::tcp::TcpOptions::default()
    }
}
