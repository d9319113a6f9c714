//! Hand-built IP + TCP packets: addresses, flags, options and payload in, a
//! checksummed packet out. Tests build theirs with it (through `testing`, which
//! re-exports it), and so do the hostile peers that write their own segments (the simulator's,
//! `lowtide_sim::hostile`, and the raw-socket attacker on the real path).

use crate::checksum;
use crate::ip::{IpRepr, PROTO_TCP};
use crate::tcp::TcpRepr;
use std::net::SocketAddr;

/// What the TCP checksum field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Csum {
    /// The full checksum, as on the wire.
    Full,
    /// Only the pseudo-header sum (`CHECKSUM_PARTIAL`), as lowtide's `Transmit` and a
    /// TSO super-packet carry it: the device finishes it.
    Partial,
}

/// An IP + TCP packet from `src` to `dst`: IPv4 (DF set, identification `ipv4_id`,
/// no options) or IPv6 by `src`'s family, hop limit 64, not ECN-capable; the TCP
/// header `th` with its ports replaced by `src`'s and `dst`'s; then `payload`; the
/// checksum filled as `csum` says.
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
    let mut ip = IpRepr {
        src: src.ip(),
        dst: dst.ip(),
        protocol: PROTO_TCP,
        hop_limit: 64,
        ecn: 0,
        tos: 0,
        header_len: 0,
        payload_len: th.header_len() + payload.len(),
    };
    ip.header_len = ip.emit_len();
    let ihl = ip.header_len;
    let mut p = vec![0u8; ihl + th.header_len()];
    ip.emit(&mut p[..ihl], ipv4_id);
    th.emit(&mut p[ihl..]);
    p.extend_from_slice(payload);
    match csum {
        Csum::Full => checksum::fill_tcp(src.ip(), dst.ip(), &mut p[ihl..]),
        Csum::Partial => checksum::fill_tcp_partial(src.ip(), dst.ip(), &mut p[ihl..]),
    }
    p
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
