//! Replies that belong to no socket's state or memory (tcp_ipv4.c / tcp_ipv6.c):
//! `tcp_v4_send_reset` / `tcp_v6_send_reset` and `tcp_v4_send_ack` /
//! `tcp_v6_send_ack`, sent from the stack's control socket, signed with TCP-MD5
//! when the socket that answers holds a key for the peer.

use super::flowlabel::FlowLabel;
use super::md5::Md5Key;
use super::output::{build_packet, push, IpOut};
use super::{Ctx, FourTuple};
use crate::mib::Mib;
use crate::socket::{TxPayload, TxRetrans, TxToken};
use lowtide_wire::tcp::{TcpFlags, TcpRepr};

/// [RFC 9293 section 3.10.7.1](https://www.rfc-editor.org/rfc/rfc9293#section-3.10.7.1):
/// answer a segment that belongs to no connection (`tcp_v4_send_reset`,
/// `tcp_v6_send_reset`); the reset reflects the segment's TOS ([`Ctx::rx_tos`]),
/// whichever socket, if any, sends it, and its IPv6 flow label comes from `fl`
/// (the sender's hash and label, see [`FlowLabel`]). A socket with a TCP-MD5 key
/// for the peer signs it with `key` (`tcp_v4_send_reset`'s `tcp_md5_do_lookup`).
pub(crate) fn send_reset(
    ctx: &mut Ctx,
    (tuple, fl): (FourTuple, FlowLabel),
    th: &TcpRepr,
    len: usize,
    key: Option<&Md5Key>,
) {
    let mut rst = TcpRepr {
        src_port: tuple.local.port(),
        dst_port: tuple.remote.port(),
        ..TcpRepr::default()
    };
    if th.flags.contains(TcpFlags::ACK) {
        rst.seq = th.ack;
        rst.flags = TcpFlags::RST;
    } else {
        let syn_fin =
            th.flags.contains(TcpFlags::SYN) as u32 + th.flags.contains(TcpFlags::FIN) as u32;
        rst.ack = th.seq.wrapping_add(len as u32 + syn_fin);
        rst.flags = TcpFlags::RST | TcpFlags::ACK;
    }
    // ip_send_unicast_reply / tcp_v6_send_response send it from the stack's
    // control socket: the default TTL.
    let ttl = super::sockopt::default_ttl(ctx.cfg, tuple.local.is_ipv6());
    push_reset(ctx, (tuple, ctx.rx_tos, true, fl), ttl, &rst, key);
}

/// Sends a reset that belongs to no socket's memory accounting (no TX completion
/// owed), with the TOS byte, DF and TTL given (see [`build_packet`]), signed with
/// `key` if any.
pub(super) fn push_reset(ctx: &mut Ctx, ip: IpOut, ttl: u8, rst: &TcpRepr, key: Option<&Md5Key>) {
    ctx.mib.inc(Mib::TcpOutRsts);
    send_bare(ctx, ip, ttl, rst, key);
}

/// Sends a segment without payload that belongs to no socket's memory accounting
/// (`ip_send_unicast_reply`: resets, TIME-WAIT's ACKs), with the TOS byte and DF of
/// `ip` and the TTL `ttl` (see [`build_packet`]), signed with `key` if any
/// (`tcp_v4_send_reset`, `tcp_v4_send_ack`: the option goes first,
/// `tcp_v4_md5_hash_hdr`).
pub(crate) fn send_bare(ctx: &mut Ctx, ip: IpOut, ttl: u8, th: &TcpRepr, key: Option<&Md5Key>) {
    let mut th = *th;
    th.options.md5sig = key.map(|_| [0; 16]);
    let pkt = build_packet(ctx, ip, &th, (TxPayload::default(), false), ttl, key);
    let token = TxToken {
        index: u32::MAX,
        generation: 0,
        truesize: 0,
        seq: 0,
        len: 0,
        prr: (0, 0),
        rtx: TxRetrans::None,
        fclone: 0,
        zc: None,
    };
    let now = ctx.now;
    // tcp_v4_send_reset / tcp_v4_send_ack: TCP_MIB_OUTSEGS for each.
    ctx.mib.inc(Mib::TcpOutSegs);
    push(ctx, pkt, (1, false), 0, token, now);
}

/// `tcp_v4_send_ack` / `tcp_v6_send_ack`: a bare ACK that belongs to no socket's
/// state (TIME-WAIT's, a request's): `seq`, `ack`, the window as given, and the
/// timestamps `(tsval, tsecr)` if any, and the TCP-MD5 option signed with `key`
/// (`tw_md5_key`, or the listener's key for the peer of a request). The stack's
/// control socket sends it, with the default TTL.
pub(crate) fn send_reply_ack(
    ctx: &mut Ctx,
    ip: IpOut,
    (seq, ack, window): (u32, u32, u16),
    ts: Option<(u32, u32)>,
    key: Option<&Md5Key>,
) {
    let th = TcpRepr {
        src_port: ip.0.local.port(),
        dst_port: ip.0.remote.port(),
        seq,
        ack,
        flags: TcpFlags::ACK,
        window,
        options: lowtide_wire::tcp::TcpOptions {
            timestamp: ts,
            ..Default::default()
        },
        ..TcpRepr::default()
    };
    let ttl = super::sockopt::default_ttl(ctx.cfg, ip.0.local.is_ipv6());
    send_bare(ctx, ip, ttl, &th, key);
}
