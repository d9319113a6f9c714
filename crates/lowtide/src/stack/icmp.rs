//! ICMP errors for TCP (`icmp_rcv` -> `icmp_unreach` -> `tcp_v4_err`, and
//! `icmpv6_rcv` -> `icmpv6_notify` -> `tcp_v6_err`): a destination unreachable, time
//! exceeded or parameter problem that answers one of our SYNs aborts the connect
//! with Linux's errno; on a synchronized connection it is a soft error only, as on
//! Linux without `IP_RECVERR` (`tcp/icmp_err.rs`, with RFC 6069's RTO revert); one
//! that answers a SYN-ACK of a request drops the request if Linux's table calls it
//! fatal (`tcp_req_err`). A "fragmentation needed" (RFC 1191) or "packet too big"
//! (RFC 8201) lowers the path MTU of its destination, remembered for
//! `net.ipv4.route.mtu_expires` as Linux's route exceptions are, and the
//! connection's MSS (`tcp/pmtu.rs`).

use super::Stack;
use crate::mib::Mib;
use crate::socket::SocketError;
use crate::tcp::{FourTuple, TcpState};
use crate::time::Instant;
use core::time::Duration;
use lowtide_wire::checksum;
use lowtide_wire::ip::{IpRepr, PROTO_ICMPV6, PROTO_TCP};
use lowtide_wire::udp::PROTO_UDP;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use tracing::trace;

/// IPv4's protocol number for ICMP.
pub(crate) const PROTO_ICMP: u8 = 1;
/// `ICMP_DEST_UNREACH`.
pub(super) const ICMP_DEST_UNREACH: u8 = 3;
/// `ICMP_FRAG_NEEDED`: path MTU discovery (RFC 1191), not an error (and never rate
/// limited when sent).
pub(super) const ICMP_FRAG_NEEDED: u8 = 4;
/// `ICMP_SOURCE_QUENCH`, `ICMP_REDIRECT`: delivered to TCP, which ignores them.
const ICMP_SOURCE_QUENCH: u8 = 4;
const ICMP_REDIRECT: u8 = 5;
/// `ICMP_TIME_EXCEEDED`.
const ICMP_TIME_EXCEEDED: u8 = 11;
/// `ICMP_PARAMETERPROB`.
const ICMP_PARAMETERPROB: u8 = 12;
/// `NR_ICMP_UNREACH`: the largest code of a destination unreachable.
const NR_ICMP_UNREACH: u8 = 15;
/// `ICMPV6_DEST_UNREACH`.
pub(super) const ICMPV6_DEST_UNREACH: u8 = 1;
/// `ICMPV6_PKT_TOO_BIG`.
const ICMPV6_PKT_TOO_BIG: u8 = 2;
/// `ICMPV6_TIME_EXCEED`.
const ICMPV6_TIME_EXCEED: u8 = 3;
/// `ICMPV6_PARAMPROB`.
const ICMPV6_PARAMPROB: u8 = 4;
/// `ICMPV6_INFOMSG_MASK`: types from 128 are informational, not errors.
const ICMPV6_INFOMSG_MASK: u8 = 0x80;
pub(super) use crate::route::IPV6_MIN_MTU;

/// What an ICMP error asks of the connection it quotes (`tcp_v4_err`'s and
/// `tcp_v6_err`'s switch on the type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IcmpAction {
    /// A hard error in SYN-SENT, soft otherwise; `revert`: it may undo an RTO
    /// backoff (RFC 6069).
    Error { err: SocketError, revert: bool },
    /// The path MTU is at most this many bytes.
    MtuReduced(u32),
    /// Counted against the window, nothing more (source quench, redirect, a "packet
    /// too big" under the IPv6 minimum MTU).
    Ignore,
}

/// What TCP makes of one ICMP error: its action on a connection, and whether it
/// drops a request whose SYN-ACK it quotes (`tcp_req_err`'s `abort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TcpIcmp {
    action: IcmpAction,
    abort: bool,
}

/// `icmp_err_convert[]`: the errno of each destination-unreachable code and
/// whether it is fatal (for UDP; TCP decides by state).
fn icmp_err_convert(code: u8) -> (SocketError, bool) {
    use SocketError::*;
    match code {
        0 | 11 => (NetworkUnreachable, false),
        1 | 12 => (HostUnreachable, false),
        2 => (ProtocolUnavailable, true),
        3 => (ConnectionRefused, true),
        4 => (MessageTooLong, false),
        5 => (NotSupported, false),
        6 | 9 => (NetworkUnreachable, true),
        7 => (HostDown, true),
        8 => (NoNetwork, true),
        _ => (HostUnreachable, true), // 10, 13, 14, 15
    }
}

/// `icmpv6_err_convert`: the errno of an ICMPv6 error and whether it is fatal
/// (`tab_unreach` for a destination unreachable; `EPROTO` for a code past it and
/// for a type it does not know).
fn icmpv6_err_convert(kind: u8, code: u8) -> (SocketError, bool) {
    use SocketError::*;
    match (kind, code) {
        (ICMPV6_DEST_UNREACH, 0) => (NetworkUnreachable, false),
        (ICMPV6_DEST_UNREACH, 1 | 5 | 6) => (AccessDenied, true),
        (ICMPV6_DEST_UNREACH, 2 | 3) => (HostUnreachable, false),
        (ICMPV6_DEST_UNREACH, 4) => (ConnectionRefused, true),
        (ICMPV6_DEST_UNREACH, _) => (ProtocolError, true),
        (ICMPV6_PKT_TOO_BIG, _) => (MessageTooLong, false),
        (ICMPV6_PARAMPROB, _) => (ProtocolError, true),
        (ICMPV6_TIME_EXCEED, _) => (HostUnreachable, false),
        _ => (ProtocolError, false),
    }
}

/// `icmp_unreach`'s "fragmentation needed" by `net.ipv4.ip_no_pmtu_disc`: the
/// message's second word as the sockets get it (the next hop's MTU in its low 16
/// bits), or `None` when it goes no further. 0 takes the MTU; 2 drops it; 3 drops
/// it for a protocol that does not validate ICMP tags strictly and takes it for one
/// that does (`icmp_tag_validation`); anything else passes an MTU of 0 on.
fn frag_needed_info(no_pmtu_disc: u8, strict_tag: bool, info: u32) -> Option<u32> {
    match no_pmtu_disc {
        0 => Some(info),
        2 => None,
        3 => strict_tag.then_some(info),
        _ => Some(0),
    }
}

/// `tcp_v4_err`'s switch on the type (an unreachable code above `NR_ICMP_UNREACH`
/// never gets here), and `tcp_req_err`'s `abort`: a parameter problem, a time
/// exceeded, a network or host unreachable.
fn tcp_v4_icmp(e: &IcmpError) -> TcpIcmp {
    let action = match (e.kind, e.code) {
        (ICMP_PARAMETERPROB, _) => IcmpAction::Error {
            err: SocketError::ProtocolError,
            revert: false,
        },
        // icmp_unreach (ip_no_pmtu_disc 0): the MTU is the low 16 bits, as
        // reported (tp->mtu_info); __ip_rt_update_pmtu raises one under
        // ip_rt_min_pmtu (0 included) to it for the route.
        (ICMP_DEST_UNREACH, ICMP_FRAG_NEEDED) => IcmpAction::MtuReduced(e.info & 0xffff),
        (ICMP_DEST_UNREACH, code) => IcmpAction::Error {
            err: icmp_err_convert(code).0,
            revert: code <= 1,
        },
        (ICMP_TIME_EXCEEDED, _) => IcmpAction::Error {
            err: SocketError::HostUnreachable,
            revert: false,
        },
        _ => IcmpAction::Ignore,
    };
    let abort = matches!(e.kind, ICMP_PARAMETERPROB | ICMP_TIME_EXCEEDED)
        || (e.kind == ICMP_DEST_UNREACH && e.code <= 1);
    TcpIcmp { action, abort }
}

/// `tcp_v6_err`: a "packet too big" of at least `IPV6_MIN_MTU` lowers the path
/// MTU; any other error is `icmpv6_err_convert`'s, and a "no route" may revert
/// the RTO; `tcp_req_err` aborts a request on a fatal one.
fn tcp_v6_icmp(e: &IcmpError) -> TcpIcmp {
    let (err, fatal) = icmpv6_err_convert(e.kind, e.code);
    let action = match e.kind {
        ICMPV6_PKT_TOO_BIG if e.info >= IPV6_MIN_MTU => IcmpAction::MtuReduced(e.info),
        ICMPV6_PKT_TOO_BIG => IcmpAction::Ignore,
        kind => IcmpAction::Error {
            err,
            revert: kind == ICMPV6_DEST_UNREACH && e.code == 0,
        },
    };
    TcpIcmp {
        action,
        abort: fatal,
    }
}

/// What `tcp_v4_err` needs from an ICMP error: the connection its quoted header
/// names, the quoted sequence number, and the type and code.
#[derive(Debug, PartialEq, Eq)]
struct IcmpError {
    kind: u8,
    code: u8,
    /// The header's second word: the next-hop MTU of a "fragmentation needed" (its
    /// low 16 bits) or of a "packet too big".
    info: u32,
    tuple: FourTuple,
    seq: u32,
    /// The quoted protocol: TCP or UDP (ports at the same offsets).
    proto: u8,
    /// The quoted bytes from the transport header on.
    quoted: u32,
    /// The TTL `tcp_v4_err` / `tcp_v6_err` hold against `IP_MINTTL` /
    /// `IPV6_MINHOPCOUNT`: the quoted IPv4 header's (`iph` is `skb->data`, the
    /// header the message carries), the ICMPv6 packet's own hop limit
    /// (`ipv6_hdr(skb)`, the outer header).
    ttl: u8,
}

/// Parses an ICMPv4 error quoting a TCP segment we sent (`icmp_rcv`: checksum over
/// the whole message; the quote is the IPv4 header and at least 8 bytes of TCP).
fn parse_icmp_error(msg: &[u8]) -> Option<IcmpError> {
    if msg.len() < 8 + 20 + 8 || checksum::fold(checksum::sum(msg, 0)) != 0xffff {
        return None;
    }
    let (kind, code) = (msg[0], msg[1]);
    let inner = &msg[8..];
    let ihl = (inner[0] & 0x0f) as usize * 4;
    if inner[0] >> 4 != 4
        || ihl < 20
        || ![PROTO_TCP, PROTO_UDP].contains(&inner[9])
        || inner.len() < ihl + 8
    {
        return None;
    }
    let addr = |o: usize| {
        IpAddr::V4(Ipv4Addr::new(
            inner[o],
            inner[o + 1],
            inner[o + 2],
            inner[o + 3],
        ))
    };
    let th = &inner[ihl..];
    let port = |o: usize| u16::from_be_bytes([th[o], th[o + 1]]);
    Some(IcmpError {
        kind,
        code,
        info: u32::from_be_bytes([msg[4], msg[5], msg[6], msg[7]]),
        tuple: FourTuple {
            local: SocketAddr::new(addr(12), port(0)),
            remote: SocketAddr::new(addr(16), port(2)),
        },
        seq: u32::from_be_bytes([th[4], th[5], th[6], th[7]]),
        proto: inner[9],
        quoted: th.len() as u32,
        ttl: inner[8],
    })
}

/// Parses an ICMPv6 error quoting a TCP segment we sent (`icmpv6_rcv`: checksum
/// with the pseudo-header; the quote is the IPv6 header, TCP next, and at least 8
/// bytes of TCP; a quote with extension headers is not followed).
fn parse_icmpv6_error(ip: &IpRepr, msg: &[u8]) -> Option<IcmpError> {
    let (src, dst) = (ip.src, ip.dst);
    const V6: usize = 40;
    if msg.len() < 8 + V6 + 8 {
        return None;
    }
    let pseudo = checksum::pseudo_header(src, dst, PROTO_ICMPV6, msg.len() as u32);
    if checksum::fold(checksum::sum(msg, pseudo)) != 0xffff {
        return None;
    }
    let inner = &msg[8..];
    if inner[0] >> 4 != 6 || ![PROTO_TCP, PROTO_UDP].contains(&inner[6]) {
        return None;
    }
    let addr = |o: usize| {
        let b: [u8; 16] = inner[o..o + 16].try_into().unwrap_or([0; 16]);
        IpAddr::from(b)
    };
    let th = &inner[V6..];
    let port = |o: usize| u16::from_be_bytes([th[o], th[o + 1]]);
    Some(IcmpError {
        kind: msg[0],
        code: msg[1],
        info: u32::from_be_bytes([msg[4], msg[5], msg[6], msg[7]]),
        tuple: FourTuple {
            local: SocketAddr::new(addr(8), port(0)),
            remote: SocketAddr::new(addr(24), port(2)),
        },
        seq: u32::from_be_bytes([th[4], th[5], th[6], th[7]]),
        proto: inner[6],
        quoted: th.len() as u32,
        ttl: ip.hop_limit,
    })
}

impl Stack {
    /// `icmpv6_rcv` for an IPv6 packet carrying ICMPv6: errors (destination
    /// unreachable, packet too big, time exceeded, parameter problem, and error
    /// types it does not know) go to their socket (`icmpv6_notify`: `tcp_v6_err`,
    /// `__udp6_lib_err`); informational messages other than an echo request are
    /// counted and dropped.
    pub(super) fn icmpv6_rcv(&mut self, now: Instant, ip: &IpRepr, packet: &[u8], msg: &[u8]) {
        self.mib.inc(Mib::Icmp6InMsgs);
        if msg.first() == Some(&super::icmp_out::ICMPV6_ECHO_REQUEST) {
            return self.icmp_echo(now, ip, packet, msg);
        }
        if msg.first().is_some_and(|&t| t & ICMPV6_INFOMSG_MASK != 0) {
            return;
        }
        let Some(e) = parse_icmpv6_error(ip, msg) else {
            self.mib.inc(Mib::Icmp6InErrors);
            trace!(src = %ip.src, "drop: malformed ICMPv6");
            return;
        };
        match e.kind {
            ICMPV6_DEST_UNREACH => self.mib.inc(Mib::Icmp6InDestUnreachs),
            ICMPV6_PKT_TOO_BIG => self.mib.inc(Mib::Icmp6InPktTooBigs),
            ICMPV6_TIME_EXCEED => self.mib.inc(Mib::Icmp6InTimeExcds),
            ICMPV6_PARAMPROB => self.mib.inc(Mib::Icmp6InParmProblems),
            _ => {}
        }
        if e.proto == PROTO_UDP {
            return self.udp6_err(now, &e);
        }
        self.tcp_err(now, &e, tcp_v6_icmp(&e), ip.src);
    }

    /// `__udp6_lib_err`: a "packet too big" lowers the path MTU
    /// (`ip6_sk_update_pmtu`, which keeps the IPv6 minimum); without `IPV6_RECVERR`
    /// only a fatal error reaches a connected socket.
    fn udp6_err(&mut self, now: Instant, e: &IcmpError) {
        let (local, remote) = (e.tuple.local, e.tuple.remote);
        if e.kind == ICMPV6_PKT_TOO_BIG {
            if self.udp_sock_for(local, remote) {
                self.update_pmtu(now, remote.ip(), e.info);
            }
            return;
        }
        let (err, fatal) = icmpv6_err_convert(e.kind, e.code);
        self.udp_err(local, remote, fatal.then_some(err));
    }

    /// `icmp_rcv` for an IPv4 packet carrying ICMP: destination unreachable (a code
    /// up to `NR_ICMP_UNREACH`), source quench, redirect, time exceeded and
    /// parameter problem go to their socket (`icmp_unreach`, `icmp_redirect` ->
    /// `tcp_v4_err`, `__udp4_lib_err`); anything else is counted and dropped.
    pub(super) fn icmp_rcv(&mut self, now: Instant, ip: &IpRepr, packet: &[u8], msg: &[u8]) {
        self.mib.inc(Mib::IcmpInMsgs);
        if msg.first() == Some(&super::icmp_out::ICMP_ECHO) {
            return self.icmp_echo(now, ip, packet, msg);
        }
        if super::icmp_out::broadcast_v4(ip.dst) {
            // icmp_rcv: to a broadcast or multicast address only queries count.
            self.mib.inc(Mib::IcmpInErrors);
            return;
        }
        let Some(e) = parse_icmp_error(msg) else {
            self.mib.inc(Mib::IcmpInErrors);
            trace!(src = %ip.src, "drop: malformed ICMP");
            return;
        };
        match e.kind {
            ICMP_DEST_UNREACH => self.mib.inc(Mib::IcmpInDestUnreachs),
            ICMP_TIME_EXCEEDED => self.mib.inc(Mib::IcmpInTimeExcds),
            ICMP_PARAMETERPROB => self.mib.inc(Mib::IcmpInParmProbs),
            ICMP_SOURCE_QUENCH | ICMP_REDIRECT => {}
            _ => return,
        }
        if e.kind == ICMP_DEST_UNREACH && e.code > NR_ICMP_UNREACH {
            return;
        }
        let mut e = e;
        if e.kind == ICMP_DEST_UNREACH && e.code == ICMP_FRAG_NEEDED {
            let strict = e.proto != PROTO_UDP; // TCP's icmp_strict_tag_validation
            match frag_needed_info(self.cfg.ip_no_pmtu_disc, strict, e.info) {
                Some(info) => e.info = info,
                None => return,
            }
        }
        if e.proto == PROTO_UDP {
            return self.udp4_err(now, &e);
        }
        self.tcp_err(now, &e, tcp_v4_icmp(&e), ip.src);
    }

    /// `__udp4_lib_err`: a "fragmentation needed" lowers the path MTU
    /// (`ipv4_sk_update_pmtu`); without `IP_RECVERR` only a hard error (a parameter
    /// problem, a fatal unreachable of `icmp_err_convert`) reaches a connected
    /// socket.
    fn udp4_err(&mut self, now: Instant, e: &IcmpError) {
        let (local, remote) = (e.tuple.local, e.tuple.remote);
        let err = match (e.kind, e.code) {
            (ICMP_DEST_UNREACH, ICMP_FRAG_NEEDED) => {
                if self.udp_sock_for(local, remote) {
                    self.update_pmtu(now, remote.ip(), e.info & 0xffff);
                }
                return;
            }
            (ICMP_DEST_UNREACH, code) => {
                let (err, fatal) = icmp_err_convert(code);
                fatal.then_some(err)
            }
            (ICMP_PARAMETERPROB, _) => Some(SocketError::ProtocolError),
            _ => None,
        };
        self.udp_err(local, remote, err);
    }

    /// The path MTU to `dst` for a new connection (`dst_mtu`): a learned one that
    /// has not expired, else the route's, else the device's.
    pub(super) fn route_mtu(&self, now: Instant, dst: IpAddr) -> u32 {
        self.routes.mtu(now, dst, self.cfg.mtu)
    }

    /// `ip link set dev D mtu N` (`dev_set_mtu`): the device's MTU, at least 68
    /// (`ETH_MIN_MTU`, a tun's `min_mtu`) and at most 65535, else `InvalidInput` as
    /// Linux's `EINVAL`. Routes follow it (`dst_mtu`, under a learned path MTU, reads
    /// the device's MTU when asked): new connections take it, and each connection's
    /// next `tcp_current_mss` finds its `icsk_pmtu_cookie` stale and re-syncs its MSS
    /// (`tcp_sync_mss`), up or down. Until then `tcpi_pmtu` and `tcpi_snd_mss` keep
    /// the old values, as nothing on the device's notifier chain reaches the sockets.
    pub fn set_device_mtu(&mut self, now: Instant, mtu: u32) -> Result<(), SocketError> {
        if !(68..=65535).contains(&mtu) {
            return Err(SocketError::InvalidInput);
        }
        self.cfg.mtu = mtu;
        let live: Vec<(u32, IpAddr)> = (0..self.slots.len() as u32)
            .filter_map(|i| match &self.slots[i as usize].sock {
                Some(super::Sock::Tcp(t)) => Some((i, t.tuple.remote.ip())),
                _ => None,
            })
            .collect();
        for (i, dst) in live {
            let mtu = self.route_mtu(now, dst);
            if let Some(super::Sock::Tcp(t)) = &mut self.slots[i as usize].sock {
                t.dst.mtu = mtu;
            }
        }
        Ok(())
    }

    /// `__ip_rt_update_pmtu`/`__ip6_rt_update_pmtu`: remembers a path MTU for `dst`
    /// (never raising one that holds); [`crate::route::RouteTable::mtu`] gives the one
    /// that holds.
    fn update_pmtu(&mut self, now: Instant, dst: IpAddr, mtu: u32) {
        let device = self.cfg.mtu;
        let secs = match dst {
            IpAddr::V4(_) => self.cfg.route_mtu_expires,
            IpAddr::V6(_) => self.cfg.ipv6_route_mtu_expires,
        };
        let rule = (Duration::from_secs(secs.into()), self.cfg.route_min_pmtu);
        self.routes.learn_pmtu(now, dst, mtu, rule, device);
    }

    /// `tcp_v4_err`/`tcp_v6_err`: the socket the error quotes, on the device
    /// (`inet_match`: a socket bound to another device does not hear it); a
    /// request (SYN-RECV, not Fast Open) takes
    /// `tcp_req_err`; a connection only what is about a segment in flight
    /// (`TcpExtOutOfWindowIcmps` otherwise): a smaller path MTU is remembered for
    /// the destination and shrinks the connection's MSS (`tcp_v4_mtu_reduced`), an
    /// error goes to the connection by its state (`tcp/icmp_err.rs`).
    fn tcp_err(&mut self, now: Instant, e: &IcmpError, t: TcpIcmp, offender: IpAddr) {
        // __inet_lookup_established with the device it came in on (inet_iif).
        let Some(index) = self.ehash_lookup(&e.tuple) else {
            // __inet_lookup_established found nothing: ICMP_MIB_INERRORS.
            return self.mib.inc(match e.tuple.local.is_ipv4() {
                true => Mib::IcmpInErrors,
                false => Mib::Icmp6InErrors,
            });
        };
        let Some(super::Sock::Tcp(tcb)) = &self.slots[index as usize].sock else {
            return; // tcp_v4_err: a timewait socket takes no ICMP
        };
        if tcb.state == TcpState::Closed {
            return;
        }
        if tcb.state == TcpState::SynRecv && tcb.parent.is_some() && tcb.tfo.rsk.is_none() {
            return self.tcp_req_err(now, index, e.seq, t.abort);
        }
        if tcb.below_min_ttl(e.ttl) {
            // tcp_v4_err / tcp_v6_err: before the window check.
            return self.mib.inc(Mib::TcpExtTCPMinTTLDrop);
        }
        if !self.in_flight(index, e.seq) {
            self.mib.inc(Mib::TcpExtOutOfWindowIcmps);
            return;
        }
        match t.action {
            IcmpAction::MtuReduced(reported) => {
                let dst = e.tuple.remote.ip();
                // tcp_v6_err's ip6_sk_accept_pmtu, and tcp_v6_mtu_reduced's "Drop
                // requests trying to increase our current mss", both before
                // inet6_csk_update_pmtu, so the route does not learn them either
                // (tcp_v4_mtu_reduced has no such checks).
                if e.tuple.local.is_ipv6() && !self.v6_takes_pmtu(index, reported) {
                    return;
                }
                self.update_pmtu(now, dst, reported);
                self.with_tcb(now, index, |tcb, ctx| {
                    tcb.mtu_reduced(ctx, reported);
                });
            }
            IcmpAction::Error { err, revert } => {
                let report = crate::tcp::icmp_err::IcmpReport {
                    kind: e.kind,
                    code: e.code,
                    // icmp_unreach: a parameter problem's pointer, else 0;
                    // icmpv6_rcv: the header's second word.
                    info: match (e.tuple.local.is_ipv4(), e.kind) {
                        (true, ICMP_PARAMETERPROB) => e.info >> 24,
                        (true, _) => 0,
                        (false, _) => e.info,
                    },
                    offender,
                    len: e.quoted,
                };
                self.with_tcb(now, index, |tcb, ctx| {
                    tcb.icmp_error(ctx, err, e.seq, revert, &report)
                })
            }
            IcmpAction::Ignore => {}
        }
    }

    /// `tcp_req_err`: an ICMP error about a request's SYN-ACK (its ISN, else
    /// `TcpExtOutOfWindowIcmps`) that `abort`s drops the request silently ("there
    /// is no good way to pass the error to the newly created socket, and POSIX
    /// does not want network errors returned from accept()"), counted as a listen
    /// drop (`inet_csk_reqsk_queue_drop`, `tcp_listendrop`).
    fn tcp_req_err(&mut self, now: Instant, index: u32, seq: u32, abort: bool) {
        let Some(super::Sock::Tcp(tcb)) = &self.slots[index as usize].sock else {
            return;
        };
        if seq != tcb.snd_seq(0).0 {
            self.mib.inc(Mib::TcpExtOutOfWindowIcmps);
        } else if abort {
            let parent = tcb.parent;
            if let Some(l) = parent {
                self.listendrop(l);
            } else {
                self.mib.inc(Mib::TcpExtListenDrops);
            }
            self.free_slot(now, index);
        }
    }

    /// Whether an ICMPv6 packet too big reporting `mtu` reaches the route and the
    /// connection: `tcp_v6_err`'s `ip6_sk_accept_pmtu` (not under
    /// `IPV6_PMTUDISC_INTERFACE` or `OMIT`), then `tcp_v6_mtu_reduced`'s test, the
    /// MSS for `mtu` (`tcp_mtu_to_mss`) below the connection's `mss_cache`.
    fn v6_takes_pmtu(&self, index: u32, mtu: u32) -> bool {
        use crate::tcp::pmtu::{IP_PMTUDISC_INTERFACE, IP_PMTUDISC_OMIT};
        match &self.slots[index as usize].sock {
            Some(super::Sock::Tcp(t)) => {
                !matches!(t.pmtudisc6, IP_PMTUDISC_INTERFACE | IP_PMTUDISC_OMIT)
                    && t.mtu_to_mss(mtu, self.cfg.tcp_min_snd_mss) < t.mss_cache
            }
            _ => false,
        }
    }

    /// Whether the quoted `seq` is in flight on the connection at `index` (read only).
    fn in_flight(&self, index: u32, seq: u32) -> bool {
        match &self.slots[index as usize].sock {
            Some(super::Sock::Tcp(t)) => seq_in_flight(t, seq),
            _ => false,
        }
    }
}

/// `between(seq, snd_una, snd_nxt)`: an ICMP error counts only about what is in
/// flight ([RFC 5927 section 4.1](https://www.rfc-editor.org/rfc/rfc5927#section-4.1)); for
/// a Fast Open child whose handshake is pending, from the SYN-ACK's ISN (`tcp_v4_err`:
/// `tcp_rsk(fastopen)->snt_isn`).
fn seq_in_flight(tcb: &crate::tcp::Tcb, seq: u32) -> bool {
    let off = seq.wrapping_sub(tcb.snd_seq(0).0) as u64;
    let una = match tcb.tfo.rsk {
        Some(_) => 0,
        None => tcb.snd_una & 0xffff_ffff,
    };
    let nxt = tcb.snd_nxt & 0xffff_ffff;
    off.wrapping_sub(una) & 0xffff_ffff <= nxt.wrapping_sub(una) & 0xffff_ffff
}

#[cfg(test)]
pub(crate) mod tests {

    #[test]
    fn ip_no_pmtu_disc_modes_of_icmp_unreach() {
        let mtu = 1400;
        assert_eq!(frag_needed_info(0, true, mtu), Some(mtu));
        assert_eq!(frag_needed_info(0, false, mtu), Some(mtu));
        assert_eq!(frag_needed_info(1, true, mtu), Some(0));
        assert_eq!(frag_needed_info(2, true, mtu), None);
        assert_eq!(
            frag_needed_info(3, true, mtu),
            Some(mtu),
            "TCP: strict tags"
        );
        assert_eq!(frag_needed_info(3, false, mtu), None, "UDP");
        assert_eq!(frag_needed_info(4, false, mtu), Some(0));
    }
    use super::*;

    /// An ICMP destination unreachable quoting a SYN from `local` to `remote`.
    pub(crate) fn unreach(code: u8, local: SocketAddr, remote: SocketAddr, seq: u32) -> Vec<u8> {
        icmp4(ICMP_DEST_UNREACH, code, local, remote, seq)
    }

    /// An ICMP error of type `kind` quoting a segment from `local` to `remote`.
    pub(crate) fn icmp4(
        kind: u8,
        code: u8,
        local: SocketAddr,
        remote: SocketAddr,
        seq: u32,
    ) -> Vec<u8> {
        let mut m = vec![kind, code, 0, 0, 0, 0, 0, 0];
        let mut ip = vec![0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, PROTO_TCP, 0, 0];
        for a in [local.ip(), remote.ip()] {
            let IpAddr::V4(a) = a else { panic!("v4") };
            ip.extend_from_slice(&a.octets());
        }
        m.extend_from_slice(&ip);
        m.extend_from_slice(&local.port().to_be_bytes());
        m.extend_from_slice(&remote.port().to_be_bytes());
        m.extend_from_slice(&seq.to_be_bytes());
        let c = !checksum::fold(checksum::sum(&m, 0));
        m[2..4].copy_from_slice(&c.to_be_bytes());
        m
    }

    #[test]
    fn parses_a_quoted_syn_and_drops_garbage() {
        let (l, r) = (
            "10.7.0.2:40000".parse().unwrap(),
            "10.7.0.1:5201".parse().unwrap(),
        );
        let m = unreach(1, l, r, 77);
        let e = parse_icmp_error(&m).expect("parsed");
        assert_eq!((e.kind, e.code, e.seq), (3, 1, 77));
        assert_eq!(
            e.tuple,
            FourTuple {
                local: l,
                remote: r
            }
        );
        let mut bad = m.clone();
        bad[30] ^= 1;
        assert_eq!(parse_icmp_error(&bad), None, "bad checksum");
        for n in 0..m.len() {
            assert_eq!(parse_icmp_error(&m[..n]), None, "truncated at {n}");
        }
    }

    /// `msg` in an IPv4 packet from `src` to `dst`.
    pub(crate) fn in_ipv4(src: IpAddr, dst: IpAddr, msg: &[u8]) -> Vec<u8> {
        let ip = IpRepr {
            src,
            dst,
            protocol: PROTO_ICMP,
            hop_limit: 64,
            ecn: 0,
            tos: 0,
            header_len: 20,
            payload_len: msg.len(),
        };
        let mut p = vec![0; ip.emit_len() + msg.len()];
        ip.emit(&mut p, 1);
        lowtide_wire::ip::fill_ipv4_checksum(&mut p[..20]);
        p[20..].copy_from_slice(msg);
        p
    }

    /// A stack with one connect in SYN-SENT: (stack, handle, local, remote, ISN).
    fn syn_sent() -> (Stack, crate::SocketHandle, SocketAddr, SocketAddr, u32) {
        let (mut st, h, local, remote, seq) = connecting("10.7.0.2", "10.9.0.1:5201", 7, None);
        while st.poll_event().is_some() {}
        (st, h, local, remote, seq)
    }

    /// A stack (`seed`) at address `me` whose connect to `remote` (with `opts` if
    /// given) has sent its SYN: the socket, its address, the remote and the ISN.
    fn connecting(
        me: &str,
        remote: &str,
        seed: u64,
        opts: Option<&crate::tcp::sockopt::SockOptions>,
    ) -> (Stack, crate::SocketHandle, SocketAddr, SocketAddr, u32) {
        let mut st = Stack::new(crate::Config::default(), seed);
        let me: IpAddr = me.parse().unwrap();
        st.add_address(me);
        let remote: SocketAddr = remote.parse().unwrap();
        let local = SocketAddr::new(me, 0);
        let h = match opts {
            Some(opts) => st.connect_with(Instant::ZERO, local, remote, opts),
            None => st.connect(Instant::ZERO, local, remote),
        }
        .unwrap();
        let syn = st.poll_transmit(Instant::ZERO).expect("SYN");
        let p = &syn.packet[if me.is_ipv6() { 40 } else { 20 }..];
        let seq = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
        let (local, _) = st.addresses(h).unwrap();
        (st, h, local, remote, seq)
    }

    /// [`connecting`] from fd00::2 to [2001:db8::1]:5201 behind router fd00::1.
    fn connecting6(
        opts: Option<&crate::tcp::sockopt::SockOptions>,
    ) -> (Stack, crate::SocketHandle, SocketAddr, SocketAddr, u32) {
        connecting("fd00::2", "[2001:db8::1]:5201", 3, opts)
    }

    /// The router of [`connecting6`].
    const ROUTER6: &str = "fd00::1";

    #[test]
    fn unreachable_aborts_the_connect() {
        let router: IpAddr = "10.7.0.1".parse().unwrap();
        for (code, want) in [
            (0, SocketError::NetworkUnreachable),
            (1, SocketError::HostUnreachable),
            (2, SocketError::ProtocolUnavailable),
            (3, SocketError::ConnectionRefused),
            (5, SocketError::NotSupported),
            (7, SocketError::HostDown),
            (8, SocketError::NoNetwork),
        ] {
            let (mut st, h, local, remote, isn) = syn_sent();
            // Out of window: the quoted sequence is not our SYN's.
            let stale = in_ipv4(
                router,
                local.ip(),
                &unreach(code, local, remote, isn ^ 0x8000),
            );
            st.handle_packet(Instant::ZERO, &stale, crate::RxChecksum::Verify);
            assert_eq!(st.state(h), Ok(TcpState::SynSent));
            assert_eq!(st.counters().get(Mib::TcpExtOutOfWindowIcmps), 1);
            assert_eq!(st.closing_count(), 1, "a connect in progress");
            let p = in_ipv4(router, local.ip(), &unreach(code, local, remote, isn));
            st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
            assert_eq!(st.socket_error(h), Ok(Some(want)), "code {code}");
            assert_eq!(st.closing_count(), 0, "closed, its handle still held");
            assert_eq!(st.state(h), Ok(TcpState::Closed));
            assert_eq!(st.counters().get(Mib::IcmpInDestUnreachs), 2);
        }
    }

    /// tcp_v4_err in SYN-SENT: ip_icmp_error queues the error whatever
    /// IP_RECVERR says, with the type, code, the router as offender and the
    /// quoted TCP bytes; a parameter problem's ee_info is its pointer.
    #[test]
    fn a_connect_error_goes_on_the_error_queue() {
        use crate::tcp::errqueue::SO_EE_ORIGIN_ICMP;
        let router: IpAddr = "10.7.0.1".parse().unwrap();
        let (mut st, h, local, remote, isn) = syn_sent();
        let p = in_ipv4(router, local.ip(), &unreach(1, local, remote, isn));
        st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
        let e = st.socket(h).recv_errqueue().unwrap().expect("queued");
        let ee = e.ee;
        assert_eq!((ee.origin, ee.kind, ee.code), (SO_EE_ORIGIN_ICMP, 3, 1));
        assert_eq!((ee.errno, ee.info, ee.data), (113, 0, 0), "EHOSTUNREACH");
        assert_eq!((e.offender, e.len), (Some(router), 8));
        let mut events = std::iter::from_fn(|| st.poll_event());
        assert!(events.any(|ev| ev.kind == crate::EventKind::ErrQueue));
        assert_eq!(st.socket(h).recv_errqueue(), Ok(None));

        let (mut st, h, local, remote, isn) = syn_sent();
        let mut m = icmp4(ICMP_PARAMETERPROB, 0, local, remote, isn);
        m[4] = 20; // the pointer, in the second word's first byte
        m[2..4].copy_from_slice(&[0, 0]);
        let c = !checksum::fold(checksum::sum(&m, 0));
        m[2..4].copy_from_slice(&c.to_be_bytes());
        st.handle_packet(
            Instant::ZERO,
            &in_ipv4(router, local.ip(), &m),
            crate::RxChecksum::Verify,
        );
        let e = st.socket(h).recv_errqueue().unwrap().expect("queued");
        assert_eq!(
            (e.ee.kind, e.ee.info, e.ee.errno),
            (ICMP_PARAMETERPROB, 20, 71)
        );
    }

    #[test]
    fn time_exceeded_and_parameter_problem_abort_the_connect_and_quench_does_not() {
        let router: IpAddr = "10.7.0.1".parse().unwrap();
        for (kind, want) in [
            (ICMP_TIME_EXCEEDED, SocketError::HostUnreachable),
            (ICMP_PARAMETERPROB, SocketError::ProtocolError),
        ] {
            let (mut st, h, local, remote, isn) = syn_sent();
            for quiet in [ICMP_SOURCE_QUENCH, ICMP_REDIRECT] {
                let p = in_ipv4(router, local.ip(), &icmp4(quiet, 0, local, remote, isn));
                st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
            }
            assert_eq!(st.state(h), Ok(TcpState::SynSent));
            let p = in_ipv4(router, local.ip(), &icmp4(kind, 0, local, remote, isn));
            st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
            assert_eq!(st.socket_error(h), Ok(Some(want)), "type {kind}");
            let mib = match kind {
                ICMP_TIME_EXCEEDED => Mib::IcmpInTimeExcds,
                _ => Mib::IcmpInParmProbs,
            };
            assert_eq!(st.counters().get(mib), 1);
        }
    }

    #[test]
    fn a_connection_bound_to_lo_hears_no_error_from_the_device() {
        // tcp_v4_err's __inet_lookup_established matches the device (inet_iif).
        let router: IpAddr = "10.7.0.1".parse().unwrap();
        let (mut st, h, local, remote, isn) = syn_sent();
        st.socket(h)
            .set_bound_dev_if(super::super::LOOPBACK_IFINDEX)
            .unwrap();
        let p = in_ipv4(router, local.ip(), &unreach(1, local, remote, isn));
        st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
        assert_eq!(st.counters().get(Mib::IcmpInErrors), 1);
        assert_eq!(st.state(h), Ok(TcpState::SynSent));
    }

    #[test]
    fn an_error_for_no_connection_counts_as_icmp_in_errors() {
        let router: IpAddr = "10.7.0.1".parse().unwrap();
        let (mut st, _, local, remote, isn) = syn_sent();
        let other = SocketAddr::new(remote.ip(), remote.port() + 1);
        let p = in_ipv4(router, local.ip(), &unreach(1, local, other, isn));
        st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
        assert_eq!(st.counters().get(Mib::IcmpInErrors), 1);
    }

    #[test]
    fn request_abort_follows_tcp_req_err() {
        let e = |kind, code| IcmpError {
            kind,
            code,
            info: 0,
            tuple: FourTuple {
                local: "10.0.0.1:1".parse().unwrap(),
                remote: "10.0.0.2:2".parse().unwrap(),
            },
            seq: 0,
            proto: PROTO_TCP,
            quoted: 8,
            ttl: 64,
        };
        for (kind, code, abort) in [
            (ICMP_DEST_UNREACH, 0, true),
            (ICMP_DEST_UNREACH, 1, true),
            (ICMP_DEST_UNREACH, 3, false),
            (ICMP_DEST_UNREACH, ICMP_FRAG_NEEDED, false),
            (ICMP_TIME_EXCEEDED, 0, true),
            (ICMP_PARAMETERPROB, 0, true),
            (ICMP_REDIRECT, 0, false),
        ] {
            assert_eq!(tcp_v4_icmp(&e(kind, code)).abort, abort, "{kind}/{code}");
        }
        for (kind, code, abort) in [
            (ICMPV6_DEST_UNREACH, 0, false),
            (ICMPV6_DEST_UNREACH, 1, true),
            (ICMPV6_DEST_UNREACH, 4, true),
            (ICMPV6_TIME_EXCEED, 0, false),
            (ICMPV6_PARAMPROB, 0, true),
        ] {
            assert_eq!(tcp_v6_icmp(&e(kind, code)).abort, abort, "v6 {kind}/{code}");
        }
        // RFC 6069: net and host unreachable (ICMPv6: no route) may revert.
        let revert = |t: TcpIcmp| matches!(t.action, IcmpAction::Error { revert: true, .. });
        assert!(revert(tcp_v4_icmp(&e(ICMP_DEST_UNREACH, 1))));
        assert!(!revert(tcp_v4_icmp(&e(ICMP_DEST_UNREACH, 3))));
        assert!(revert(tcp_v6_icmp(&e(ICMPV6_DEST_UNREACH, 0))));
        assert!(!revert(tcp_v6_icmp(&e(ICMPV6_DEST_UNREACH, 3))));
    }

    #[test]
    fn unknown_code_and_frag_needed_leave_the_connect_alone() {
        let router: IpAddr = "10.7.0.1".parse().unwrap();
        let (mut st, h, local, remote, isn) = syn_sent();
        for code in [4, 16] {
            let p = in_ipv4(router, local.ip(), &unreach(code, local, remote, isn));
            st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
        }
        assert_eq!(st.state(h), Ok(TcpState::SynSent));
        let mut junk = in_ipv4(router, local.ip(), &[3, 1, 0, 0]);
        st.handle_packet(Instant::ZERO, &junk, crate::RxChecksum::Verify);
        junk.truncate(22);
        st.handle_packet(Instant::ZERO, &junk, crate::RxChecksum::Verify);
        assert_eq!(st.counters().get(Mib::IcmpInErrors), 1);
        assert_eq!(st.state(h), Ok(TcpState::SynSent));
    }

    /// An ICMPv6 destination unreachable from `router` to `local`'s address,
    /// quoting a SYN from `local` to `remote`, in its IPv6 packet.
    fn unreach6(
        code: u8,
        router: IpAddr,
        local: SocketAddr,
        remote: SocketAddr,
        seq: u32,
    ) -> Vec<u8> {
        icmp6((ICMPV6_DEST_UNREACH, code, 0), router, local, remote, seq)
    }

    /// An ICMPv6 error of `(type, code, info)` from `router` to `local`'s address,
    /// quoting a segment from `local` to `remote` at `seq`, in its IPv6 packet.
    fn icmp6(
        (kind, code, info): (u8, u8, u32),
        router: IpAddr,
        local: SocketAddr,
        remote: SocketAddr,
        seq: u32,
    ) -> Vec<u8> {
        let mut m = vec![kind, code, 0, 0];
        m.extend_from_slice(&info.to_be_bytes());
        m.extend_from_slice(&[0x60, 0, 0, 0, 0, 40, PROTO_TCP, 64]);
        for a in [local.ip(), remote.ip()] {
            let IpAddr::V6(a) = a else { panic!("v6") };
            m.extend_from_slice(&a.octets());
        }
        m.extend_from_slice(&local.port().to_be_bytes());
        m.extend_from_slice(&remote.port().to_be_bytes());
        m.extend_from_slice(&seq.to_be_bytes());
        let pseudo = checksum::pseudo_header(router, local.ip(), PROTO_ICMPV6, m.len() as u32);
        let c = !checksum::fold(checksum::sum(&m, pseudo));
        m[2..4].copy_from_slice(&c.to_be_bytes());
        let ip = IpRepr {
            src: router,
            dst: local.ip(),
            protocol: PROTO_ICMPV6,
            hop_limit: 64,
            ecn: 0,
            tos: 0,
            header_len: 40,
            payload_len: m.len(),
        };
        let mut p = vec![0; ip.emit_len() + m.len()];
        ip.emit(&mut p, 0);
        p[40..].copy_from_slice(&m);
        p
    }

    #[test]
    fn icmpv6_unreachable_aborts_a_v6_connect() {
        let router: IpAddr = ROUTER6.parse().unwrap();
        for (code, want) in [
            (0, SocketError::NetworkUnreachable),
            (3, SocketError::HostUnreachable),
            (4, SocketError::ConnectionRefused),
            (1, SocketError::AccessDenied),
            (7, SocketError::ProtocolError),
        ] {
            let (mut st, h, local, remote, isn) = connecting6(None);
            let mut bad = unreach6(code, router, local, remote, isn);
            let last = bad.len() - 1;
            bad[last] ^= 1;
            st.handle_packet(Instant::ZERO, &bad, crate::RxChecksum::Verify);
            assert_eq!(st.counters().get(Mib::Icmp6InErrors), 1, "bad checksum");
            let p = unreach6(code, router, local, remote, isn);
            st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
            assert_eq!(st.counters().get(Mib::Icmp6InDestUnreachs), 1);
            assert_eq!(st.socket_error(h), Ok(Some(want)), "code {code}");
        }
    }

    /// tcp_v6_err in SYN-SENT: ipv6_icmp_error queues only with IPV6_RECVERR.
    #[test]
    fn a_v6_connect_error_is_queued_with_ipv6_recverr_only() {
        use crate::tcp::errqueue::SO_EE_ORIGIN_ICMP6;
        let router: IpAddr = ROUTER6.parse().unwrap();
        for recverr6 in [false, true] {
            let opts = crate::tcp::sockopt::SockOptions {
                recverr6,
                ..Default::default()
            };
            let (mut st, h, local, remote, isn) = connecting6(Some(&opts));
            let p = unreach6(3, router, local, remote, isn);
            st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
            assert_eq!(st.socket_error(h), Ok(Some(SocketError::HostUnreachable)));
            let e = st.socket(h).recv_errqueue().unwrap();
            assert_eq!(e.is_some(), recverr6);
            if let Some(e) = e {
                let ee = e.ee;
                assert_eq!((ee.origin, ee.kind, ee.code), (SO_EE_ORIGIN_ICMP6, 1, 3));
                assert_eq!((e.offender, e.len), (Some(router), 8));
            }
        }
    }

    /// tcp_v6_mtu_reduced: a packet too big whose MTU gives no smaller MSS than
    /// `mss_cache` (`tcp_mtu_to_mss`) returns before `inet6_csk_update_pmtu`, so
    /// the route learns nothing; one that does shrinks both. A v6 connect's clamp
    /// is 1220 (`IPV6_MIN_MTU` less the headers), so no packet too big (at least
    /// 1280) reaches its route.
    #[test]
    fn a_v6_packet_too_big_that_shrinks_no_mss_leaves_the_route_alone() {
        let router: IpAddr = ROUTER6.parse().unwrap();
        let (mut st, h, local, remote, isn) = connecting6(None);
        let ptb = |mtu| icmp6((ICMPV6_PKT_TOO_BIG, 0, mtu), router, local, remote, isn);
        for mtu in [1400, 1280] {
            st.handle_packet(Instant::ZERO, &ptb(mtu), crate::RxChecksum::Verify);
            assert_eq!(st.route_mtu(Instant::ZERO, remote.ip()), 1500, "{mtu}");
            assert_eq!(st.info(Instant::ZERO, h).unwrap().pmtu, 1500, "{mtu}");
        }
        // A clamp of 1440 (mss_cache 1428 with timestamps): 1400 gives 1328.
        let tcb = st.tcb_mut(h).unwrap();
        (tcb.rx_opt.mss_clamp, tcb.mss_cache) = (1440, 1428);
        st.handle_packet(Instant::ZERO, &ptb(1400), crate::RxChecksum::Verify);
        assert_eq!(st.route_mtu(Instant::ZERO, remote.ip()), 1400);
        let info = st.info(Instant::ZERO, h).unwrap();
        assert_eq!((info.pmtu, info.snd_mss), (1400, 1328));
    }

    /// tcp_v6_err's ip6_sk_accept_pmtu: under IPV6_PMTUDISC_INTERFACE or OMIT a
    /// packet too big reaches neither the route nor the MSS; every other mode
    /// takes it (IPV6_MTU_DISCOVER is np->pmtudisc, not IP_MTU_DISCOVER's).
    #[test]
    fn ipv6_pmtudisc_interface_and_omit_refuse_a_packet_too_big() {
        use crate::tcp::pmtu::*;
        let router: IpAddr = ROUTER6.parse().unwrap();
        for mode in [
            None,
            Some(IP_PMTUDISC_DONT),
            Some(IP_PMTUDISC_WANT),
            Some(IP_PMTUDISC_DO),
            Some(IP_PMTUDISC_PROBE),
            Some(IP_PMTUDISC_INTERFACE),
            Some(IP_PMTUDISC_OMIT),
        ] {
            let opts = crate::tcp::sockopt::SockOptions {
                pmtudisc6: mode,
                pmtudisc: Some(IP_PMTUDISC_INTERFACE), // IPv4's, not read here
                ..Default::default()
            };
            let (mut st, h, local, remote, isn) = connecting6(Some(&opts));
            let tcb = st.tcb_mut(h).unwrap();
            assert_eq!(tcb.pmtudisc6, mode.unwrap_or(IP_PMTUDISC_WANT));
            (tcb.rx_opt.mss_clamp, tcb.mss_cache) = (1440, 1428);
            let ptb = icmp6((ICMPV6_PKT_TOO_BIG, 0, 1400), router, local, remote, isn);
            st.handle_packet(Instant::ZERO, &ptb, crate::RxChecksum::Verify);
            let refused = matches!(mode, Some(IP_PMTUDISC_INTERFACE | IP_PMTUDISC_OMIT));
            let want = if refused { (1500, 1500) } else { (1400, 1400) };
            let pmtu = st.info(Instant::ZERO, h).unwrap().pmtu;
            let route = st.route_mtu(Instant::ZERO, remote.ip());
            assert_eq!((route, pmtu), want, "{mode:?}");
        }
        let (mut st, h, ..) = connecting6(None);
        assert_eq!(
            st.socket(h).set_pmtudisc6(6),
            Err(SocketError::InvalidInput)
        );
        assert_eq!(st.socket(h).set_pmtudisc6(IP_PMTUDISC_OMIT), Ok(()));
    }

    /// tcp_v4_err / tcp_v6_err: an error below IP_MINTTL / IPV6_MINHOPCOUNT is
    /// dropped (TcpExtTCPMinTTLDrop) before the window check; IPv4 reads the
    /// quoted header's TTL, IPv6 the ICMPv6 packet's own hop limit.
    #[test]
    fn min_ttl_drops_an_error_by_the_quoted_ttl_v4_and_the_hop_limit_v6() {
        let router: IpAddr = "10.7.0.1".parse().unwrap();
        let opts = crate::tcp::sockopt::SockOptions {
            min_ttl: 100,
            ..Default::default()
        };
        let (mut st, h, local, remote, isn) =
            connecting("10.7.0.2", "10.9.0.1:5201", 7, Some(&opts));
        // Quoted TTL 64: dropped, in the window or not; the outer TTL is 64 too.
        for seq in [isn, isn ^ 0x8000] {
            let p = in_ipv4(router, local.ip(), &unreach(1, local, remote, seq));
            st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
        }
        assert_eq!(st.counters().get(Mib::TcpExtTCPMinTTLDrop), 2);
        assert_eq!(st.counters().get(Mib::TcpExtOutOfWindowIcmps), 0);
        assert_eq!(st.state(h), Ok(TcpState::SynSent));
        // Quoted TTL 200 under an outer 64: the error aborts the connect.
        let mut m = unreach(1, local, remote, isn);
        m[8 + 8] = 200;
        m[2..4].copy_from_slice(&[0, 0]);
        let c = !checksum::fold(checksum::sum(&m, 0));
        m[2..4].copy_from_slice(&c.to_be_bytes());
        let p = in_ipv4(router, local.ip(), &m);
        st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
        assert_eq!(st.socket_error(h), Ok(Some(SocketError::HostUnreachable)));
        assert_eq!(st.counters().get(Mib::TcpExtTCPMinTTLDrop), 2);

        let router: IpAddr = ROUTER6.parse().unwrap();
        let opts = crate::tcp::sockopt::SockOptions {
            min_hopcount: 100,
            ..Default::default()
        };
        let (mut st, h, local, remote, isn) = connecting6(Some(&opts));
        let mut p = unreach6(4, router, local, remote, isn);
        st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
        assert_eq!(st.counters().get(Mib::TcpExtTCPMinTTLDrop), 1);
        assert_eq!(st.state(h), Ok(TcpState::SynSent));
        p[7] = 100; // the outer hop limit; the quoted one stays 64
        st.handle_packet(Instant::ZERO, &p, crate::RxChecksum::Verify);
        assert_eq!(st.socket_error(h), Ok(Some(SocketError::ConnectionRefused)));
        assert_eq!(st.counters().get(Mib::TcpExtTCPMinTTLDrop), 1);
    }

    #[test]
    fn device_mtu_bounds_and_a_connect_in_progress() {
        let (mut st, h, _, remote, _) = syn_sent();
        for bad in [0, 67, 65536] {
            assert_eq!(
                st.set_device_mtu(Instant::ZERO, bad),
                Err(SocketError::InvalidInput)
            );
        }
        assert_eq!(st.config().mtu, 1500);
        st.set_device_mtu(Instant::ZERO, 1400).unwrap();
        // icsk_pmtu_cookie waits for the next tcp_current_mss.
        assert_eq!(st.info(Instant::ZERO, h).unwrap().pmtu, 1500);
        // A learned path MTU under the device's still bounds the route.
        st.update_pmtu(Instant::ZERO, remote.ip(), 1300);
        st.set_device_mtu(Instant::ZERO, 9000).unwrap();
        assert_eq!(st.route_mtu(Instant::ZERO, remote.ip()), 1300);
        assert_eq!(st.info(Instant::ZERO, h).unwrap().pmtu, 1500);
    }

    #[test]
    fn errno_of_each_code() {
        use SocketError::*;
        assert_eq!(icmp_err_convert(0), (NetworkUnreachable, false));
        assert_eq!(icmp_err_convert(1), (HostUnreachable, false));
        assert_eq!(icmp_err_convert(3), (ConnectionRefused, true));
        assert_eq!(icmp_err_convert(13), (HostUnreachable, true));
        assert_eq!(icmp_err_convert(7), (HostDown, true));
        assert_eq!(icmpv6_err_convert(1, 0), (NetworkUnreachable, false));
        assert_eq!(icmpv6_err_convert(1, 5), (AccessDenied, true));
        assert_eq!(icmpv6_err_convert(1, 7), (ProtocolError, true));
        assert_eq!(icmpv6_err_convert(3, 0), (HostUnreachable, false));
        assert_eq!(icmpv6_err_convert(4, 1), (ProtocolError, true));
        assert_eq!(icmpv6_err_convert(100, 0), (ProtocolError, false));
    }
}
