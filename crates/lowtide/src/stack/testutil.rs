//! Builders the stack's unit tests share: a stack holding one address, and an ICMP
//! echo request as a peer's `ping` sends it.

use crate::{Config, Stack};
use lowtide_wire::checksum;
use lowtide_wire::ip::IpRepr;
use std::net::IpAddr;

/// A stack (default config, seed 1) with the address `ip`.
pub(crate) fn stack(ip: &str) -> Stack {
    let mut s = Stack::new(Config::default(), 1);
    s.add_address(ip.parse().unwrap());
    s
}

/// An echo request (`ping`) of `data` from `src` to `dst`, id 0x1234, seq 7: ICMP
/// type 8 in IPv4 (DF set, identification 1), ICMPv6 type 128 in IPv6.
pub(crate) fn echo_request(src: &str, dst: &str, data: &[u8]) -> Vec<u8> {
    let (src, dst): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
    let v4 = src.is_ipv4();
    let mut msg = vec![if v4 { 8 } else { 128 }, 0, 0, 0, 0x12, 0x34, 0, 7];
    msg.extend_from_slice(data);
    let pseudo = match v4 {
        true => 0,
        false => checksum::pseudo_header(src, dst, 58, msg.len() as u32),
    };
    let sum = !checksum::fold(checksum::sum(&msg, pseudo));
    msg[2..4].copy_from_slice(&sum.to_be_bytes());
    let ip = IpRepr {
        src,
        dst,
        protocol: if v4 { 1 } else { 58 },
        hop_limit: 64,
        ecn: 0,
        tos: 0,
        header_len: 0,
        payload_len: msg.len(),
    };
    let mut p = vec![0; ip.emit_len()];
    ip.emit(&mut p, 1);
    p.extend_from_slice(&msg);
    p
}
