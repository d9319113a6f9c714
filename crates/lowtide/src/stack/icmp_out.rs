//! ICMP the stack sends (net/ipv4/icmp.c, net/ipv6/icmp.c): echo replies
//! (`icmp_echo`, `icmpv6_echo_reply`) and port unreachable for a UDP datagram no
//! socket takes (`__icmp_send`, `icmp6_send`), under Linux's rate limits and their
//! sysctls: the types `net.ipv4.icmp_ratemask` selects (ICMPv6: the errors but
//! packet too big, `net.ipv6.icmp.ratemask`'s default) pass the global bucket
//! (`icmp_global_allow`, `net.ipv4.icmp_msgs_per_sec` and `icmp_msgs_burst`, shared
//! by both families) and the per-destination one (`inet_peer_xrlim_allow` with
//! `net.ipv4.icmp_ratelimit` / `net.ipv6.icmp.ratelimit`, a burst of 6). Echo
//! replies are outside the default masks, so never limited; `icmp_echo_ignore_all`,
//! `icmp_echo_ignore_broadcasts` and `net.ipv6.icmp.echo_ignore_all` silence them.
//! lowtide knows no prefix lengths: the IPv4 broadcast it sees is 255.255.255.255
//! (and multicast), not a subnet's.

use super::icmp::{ICMPV6_DEST_UNREACH, ICMP_DEST_UNREACH, ICMP_FRAG_NEEDED, IPV6_MIN_MTU};
use super::ip_output::IpCork;
use super::Stack;
use crate::mib::Mib;
use crate::tcp::flowlabel::{FlowLabel, FLOWLABEL_REFLECT_ICMPV6_ECHO_REPLIES};
use crate::tcp::FourTuple;
use crate::time::Instant;
use lowtide_wire::checksum;
use lowtide_wire::ip::{set_ipv4_tos_df, set_ipv6_flowlabel, IpRepr, PROTO_ICMPV6};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// `ICMP_ECHOREPLY`, `ICMP_ECHO`.
const ICMP_ECHOREPLY: u8 = 0;
pub(super) const ICMP_ECHO: u8 = 8;
/// `ICMP_PROT_UNREACH`, `ICMP_PORT_UNREACH`.
const ICMP_PROT_UNREACH: u8 = 2;
const ICMP_PORT_UNREACH: u8 = 3;
/// `ICMPV6_TIME_EXCEED` (its code `ICMPV6_EXC_FRAGTIME` is 1, as ICMP's).
const ICMPV6_TIME_EXCEED: u8 = 3;
/// `ICMP_TIME_EXCEEDED` and its code `ICMP_EXC_FRAGTIME`.
const ICMP_TIME_EXCEEDED: u8 = 11;
const ICMP_EXC_FRAGTIME: u8 = 1;
/// `ICMPV6_ECHO_REQUEST`, `ICMPV6_ECHO_REPLY`.
pub(super) const ICMPV6_ECHO_REQUEST: u8 = 128;
const ICMPV6_ECHO_REPLY: u8 = 129;
/// `NR_ICMP_TYPES`.
const NR_ICMP_TYPES: u8 = 18;
/// `ICMPV6_PKT_TOOBIG`, outside `net.ipv6.icmp.ratemask`'s default ("0-1,3-127").
const ICMPV6_PKT_TOOBIG: u8 = 2;
/// `ICMPV6_PORT_UNREACH`.
const ICMPV6_PORT_UNREACH: u8 = 4;
/// `ICMPV6_PARAMPROB` and its code `ICMPV6_UNK_NEXTHDR`.
const ICMPV6_PARAMPROB: u8 = 4;
const ICMPV6_UNK_NEXTHDR: u8 = 1;
/// `IPTOS_PREC_INTERNETCONTROL`: the precedence of ICMP errors (`__icmp_send`).
const IPTOS_PREC_INTERNETCONTROL: u8 = 0xc0;
/// `__icmp_send`: an IPv4 error is at most 576 bytes
/// ([RFC 1812 section 4.3.2.3](https://www.rfc-editor.org/rfc/rfc1812#section-4.3.2.3)).
const ICMP_ERR_MAX: usize = 576;
/// `XRLIM_BURST_FACTOR`: a destination may take this many intervals' worth at once.
const XRLIM_BURST_FACTOR: i64 = 6;
/// inet_peer entries kept before the oldest go (Linux ages them out; a bound here).
const PEERS_MAX: usize = 4096;
/// `IP_DEFAULT_TTL`, the IPv6 default hop limit.
const TTL: u8 = 64;

/// An ICMP error the stack sends about a packet it received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IcmpError {
    /// No socket has the UDP port (`__udp4_lib_rcv`, `__udp6_lib_rcv`): port
    /// unreachable.
    PortUnreach,
    /// No handler for the protocol: protocol unreachable (`ip_protocol_deliver_rcu`),
    /// for IPv6 a parameter problem pointing at the byte that named the unknown
    /// next header, `nhoff` (`ip6_protocol_deliver_rcu`).
    ProtoUnreach { nhoff: u32 },
    /// A fragment queue timed out with its first fragment (`ip_expire`,
    /// `ip6_frag_expire`): time exceeded, fragment reassembly time exceeded.
    FragTimeExceeded,
    /// IPv6 only: a parameter problem of `code` pointing at byte `pointer` of the
    /// packet (`icmpv6_param_prob`: extension headers, fragments).
    ParamProb6 { code: u8, pointer: u32 },
}

impl IcmpError {
    /// Type, code, the 32-bit word after the checksum, and the counter of the
    /// message in the family of `v4`.
    fn message(self, v4: bool) -> (u8, u8, u32, Mib) {
        let unreach = |code| (ICMP_DEST_UNREACH, code, 0, Mib::IcmpOutDestUnreachs);
        let param = |code, at| (ICMPV6_PARAMPROB, code, at, Mib::Icmp6OutParmProblems);
        match (self, v4) {
            (IcmpError::PortUnreach, true) => unreach(ICMP_PORT_UNREACH),
            (IcmpError::ProtoUnreach { .. }, true) => unreach(ICMP_PROT_UNREACH),
            (IcmpError::FragTimeExceeded, true) => (
                ICMP_TIME_EXCEEDED,
                ICMP_EXC_FRAGTIME,
                0,
                Mib::IcmpOutTimeExcds,
            ),
            (IcmpError::PortUnreach, _) => (
                ICMPV6_DEST_UNREACH,
                ICMPV6_PORT_UNREACH,
                0,
                Mib::Icmp6OutDestUnreachs,
            ),
            (IcmpError::ProtoUnreach { nhoff }, _) => param(ICMPV6_UNK_NEXTHDR, nhoff),
            (IcmpError::FragTimeExceeded, _) => (
                ICMPV6_TIME_EXCEED,
                ICMP_EXC_FRAGTIME,
                0,
                Mib::Icmp6OutTimeExcds,
            ),
            (IcmpError::ParamProb6 { code, pointer }, _) => param(code, pointer),
        }
    }
}

/// The rate limiters' state.
#[derive(Default)]
pub(super) struct IcmpLimits {
    /// `icmp_global_credit` and `icmp_global_stamp` (ms; `None`: never).
    credit: i64,
    stamp: Option<u64>,
    /// Per destination: `rate_tokens` and `rate_last` (ms).
    peers: HashMap<IpAddr, (i64, i64)>,
}

/// Whether an IPv4 `ip` is the limited broadcast or multicast (`RTCF_BROADCAST |
/// RTCF_MULTICAST` as far as lowtide, without prefix lengths, can tell).
pub(super) fn broadcast_v4(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V4(a) if a == Ipv4Addr::BROADCAST || a.is_multicast())
}

/// `__icmp_send`'s and `icmpv6_send`'s (`is_ineligible`) rule: no error about an
/// ICMP error (IPv4: `icmp_pointers[type].error`, a type unknown counting as one;
/// ICMPv6: an error type, below 128), nor about a packet too short to tell.
fn icmp_error_about_error(ip: &IpRepr, packet: &[u8]) -> bool {
    if ip.src.is_ipv6() {
        return is_ineligible(packet);
    }
    let kind = packet.get(ip.header_len).copied();
    ip.protocol == super::icmp::PROTO_ICMP
        && kind.is_none_or(|t| t > NR_ICMP_TYPES || matches!(t, 3 | 4 | 5 | 11 | 12))
}

/// `is_ineligible` (net/ipv6/icmp.c): the upper layer found past the extension
/// headers is ICMPv6 and the message an error (or cut before its type, unless a
/// later fragment).
fn is_ineligible(packet: &[u8]) -> bool {
    let end = lowtide_wire::ip::IPV6_HEADER_LEN;
    if packet.len() < end {
        return true;
    }
    let Some((off, nh, frag_off)) = super::exthdrs::ipv6_skip_exthdr(packet, end, packet[6]) else {
        return false;
    };
    if nh != PROTO_ICMPV6 {
        return false;
    }
    match packet.get(off) {
        None => frag_off == 0,
        Some(&t) => t < 128,
    }
}

/// Whether `ip` is an address a reply may come from and go to (not multicast,
/// broadcast or unspecified: `__icmp_send` answers unicast only).
pub(super) fn unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => !(a.is_multicast() || a.is_broadcast() || a.is_unspecified()),
        IpAddr::V6(a) => !(a.is_multicast() || a.is_unspecified()),
    }
}

impl IcmpLimits {
    /// `icmp_global_allow` (Linux 6.10+ credit form), with
    /// `net.ipv4.icmp_msgs_per_sec` and `icmp_msgs_burst`.
    fn global_allow(&mut self, now_ms: u64, per_sec: u32, burst: u32) -> bool {
        if self.credit > 0 {
            return true;
        }
        let delta = self
            .stamp
            .map_or(1000, |s| now_ms.saturating_sub(s).min(1000));
        // HZ / 50.
        if delta < 20 {
            return false;
        }
        let incr = (per_sec as u64 * delta / 1000) as i64;
        if incr == 0 {
            return false;
        }
        self.stamp = Some(now_ms);
        self.credit = (self.credit + incr).min(burst as i64);
        true
    }

    /// `inet_peer_xrlim_allow`: a token bucket of `XRLIM_BURST_FACTOR` intervals of
    /// `timeout` ms per destination, a new peer starting full (`rate_last` 60 s back).
    fn peer_allow(&mut self, dst: IpAddr, now_ms: u64, timeout: u32) -> bool {
        let timeout = timeout as i64;
        if self.peers.len() >= PEERS_MAX && !self.peers.contains_key(&dst) {
            self.peers.clear();
        }
        let now = now_ms as i64;
        let (tokens, last) = self.peers.entry(dst).or_insert((0, now - 60_000));
        let mut token = *tokens + (now - *last).max(0);
        *last = now;
        token = token.min(XRLIM_BURST_FACTOR * timeout);
        let ok = token >= timeout;
        if ok {
            token -= timeout;
        }
        *tokens = token;
        ok
    }
}

impl Stack {
    /// `icmp_echo` / `icmpv6_echo_reply`: answers an echo request to one of our
    /// addresses (or, with a catch-all socket, to any unicast address) with the
    /// same identifier, sequence number and data. An IPv4 request to a broadcast
    /// or multicast address is answered from our first IPv4 address unless
    /// `icmp_echo_ignore_broadcasts` (`icmp_rcv`). `msg` is the ICMP message.
    pub(super) fn icmp_echo(&mut self, now: Instant, ip: &IpRepr, packet: &[u8], msg: &[u8]) {
        let v4 = ip.src.is_ipv4();
        let ok = match v4 {
            true => checksum::fold(checksum::sum(msg, 0)) == 0xffff,
            false => {
                let pseudo =
                    checksum::pseudo_header(ip.src, ip.dst, PROTO_ICMPV6, msg.len() as u32);
                checksum::fold(checksum::sum(msg, pseudo)) == 0xffff
            }
        };
        if msg.len() < 8 || !ok {
            self.mib.inc(if v4 {
                Mib::IcmpInErrors
            } else {
                Mib::Icmp6InErrors
            });
            return;
        }
        self.mib.inc(if v4 {
            Mib::IcmpInEchos
        } else {
            Mib::Icmp6InEchos
        });
        let bcast = broadcast_v4(ip.dst);
        if bcast && self.cfg.icmp_echo_ignore_broadcasts {
            // RFC 1122 section 3.2.2.6: "MAY be silently discarded" (icmp_rcv).
            self.mib.inc(Mib::IcmpInErrors);
            return;
        }
        let ignore = match v4 {
            true => self.cfg.icmp_echo_ignore_all,
            false => self.cfg.icmpv6_echo_ignore_all,
        };
        let ours = self.addrs.contains(&ip.dst) || self.catch_all_any() && unicast(ip.dst);
        // fib_compute_spec_dst: a broadcast is answered from the device's address.
        let src = match bcast {
            true => self.addrs.iter().copied().find(IpAddr::is_ipv4),
            false => Some(ip.dst).filter(|_| ours),
        };
        let Some(src) = src.filter(|_| !ignore && unicast(ip.src)) else {
            return;
        };
        let kind = if v4 {
            ICMP_ECHOREPLY
        } else {
            ICMPV6_ECHO_REPLY
        };
        if !self.icmp_allow(now, v4, kind, 0, ip.src) {
            return;
        }
        let mut reply = msg.to_vec();
        reply[0] = kind;
        // icmp_reply copies the request's TOS, icmpv6_echo_reply its traffic class
        // (ipv6_get_dsfield) and, under flowlabel_reflect's bit 4, its flow label.
        let reflect = self.cfg.ipv6_flowlabel_reflect & FLOWLABEL_REFLECT_ICMPV6_ECHO_REPLIES;
        let label = match reflect {
            0 => 0,
            _ => lowtide_wire::ip::ipv6_flowlabel(packet),
        };
        self.icmp_push(now, src, ip.src, reply, ip.tos | ip.ecn, label);
        self.mib.inc(if v4 {
            Mib::IcmpOutEchoReps
        } else {
            Mib::Icmp6OutEchoReplies
        });
    }

    /// Whether a catch-all (TCP or UDP) makes every unicast address ours.
    fn catch_all_any(&self) -> bool {
        self.catch_all.is_some() || self.udp_catch_all()
    }

    /// The rate limits of an ICMP message of `kind`/`code` to `dst`:
    /// `icmpv4_global_allow` + `icmpv4_xrlim_allow` (`icmpv6_global_allow` +
    /// `icmpv6_xrlim_allow`), counting `RateLimitGlobal`/`RateLimitHost` and, when
    /// allowed, consuming 0, 1 or 2 global credits (`icmp_global_consume`), so
    /// that the rate cannot be measured exactly from outside.
    fn icmp_allow(&mut self, now: Instant, v4: bool, kind: u8, code: u8, dst: IpAddr) -> bool {
        let limited = match v4 {
            // icmpv4_mask_allow.
            true => {
                kind <= NR_ICMP_TYPES
                    && !(kind == ICMP_DEST_UNREACH && code == ICMP_FRAG_NEEDED)
                    && (1u32 << kind) & self.cfg.icmp_ratemask != 0
            }
            // icmpv6_mask_allow with the default ratemask; icmpv6_xrlim_allow also
            // spares informational messages and packet too big.
            false => kind < 128 && kind != ICMPV6_PKT_TOOBIG,
        };
        if !limited {
            return true;
        }
        let now_ms = now.as_millis();
        let (per_sec, burst) = (self.cfg.icmp_msgs_per_sec, self.cfg.icmp_msgs_burst);
        if !self.icmp_limits.global_allow(now_ms, per_sec, burst) {
            self.mib.inc(if v4 {
                Mib::IcmpRateLimitGlobal
            } else {
                Mib::Icmp6RateLimitGlobal
            });
            return false;
        }
        let timeout = match v4 {
            true => self.cfg.icmp_ratelimit,
            false => self.cfg.icmpv6_ratelimit,
        };
        if timeout != 0 && !self.icmp_limits.peer_allow(dst, now_ms, timeout) {
            self.mib.inc(if v4 {
                Mib::IcmpRateLimitHost
            } else {
                Mib::Icmp6RateLimitHost
            });
            return false;
        }
        self.icmp_limits.credit -= self.rng.range_u32(0, 2) as i64;
        true
    }

    /// `__icmp_send` / `icmp6_send` of the error `err` about `packet` (an IP
    /// packet to `ip.dst` that no socket or protocol takes), within the rate limits.
    pub(super) fn icmp_send_error(
        &mut self,
        now: Instant,
        ip: &IpRepr,
        packet: &[u8],
        err: IcmpError,
    ) {
        if !unicast(ip.src) || !unicast(ip.dst) || icmp_error_about_error(ip, packet) {
            return;
        }
        let v4 = ip.src.is_ipv4();
        let (kind, code, info, mib) = err.message(v4);
        if !self.icmp_allow(now, v4, kind, code, ip.src) {
            return;
        }
        let room = match v4 {
            true => ICMP_ERR_MAX - 20 - 8,
            // An ICMPv6 error fits IPV6_MIN_MTU (RFC 4443 section 2.4 (c)).
            false => IPV6_MIN_MTU as usize - 40 - 8,
        };
        let quote = &packet[..(ip.header_len + ip.payload_len).min(room)];
        let mut msg = Vec::with_capacity(8 + quote.len());
        msg.extend_from_slice(&[kind, code, 0, 0]);
        msg.extend_from_slice(&info.to_be_bytes());
        msg.extend_from_slice(quote);
        let tos = if v4 {
            (packet[1] & 0x1e) | IPTOS_PREC_INTERNETCONTROL
        } else {
            0
        };
        self.icmp_push(now, ip.dst, ip.src, msg, tos, 0);
        self.mib.inc(mib);
    }

    /// Fills the checksum of the ICMP message `msg` (type, code, zeroed checksum,
    /// rest) and sends it in an IP packet from `src` to `dst` as the ICMP sockets
    /// do (`icmp_push_reply`, `icmpv6_push_pending_frames`): IPv4 with `tos`,
    /// without DF (`IP_PMTUDISC_DONT`) and a hashed identification, fragmented
    /// over the path MTU, as is IPv6 (`IPV6_PMTUDISC_WANT`), whose traffic class is
    /// `tos` and flow label `label` if given, else (`__ip6_make_skb`'s
    /// `ip6_make_flowlabel`, the ICMP socket's default `IPV6_AUTOFLOWLABEL`) from
    /// the flow's hash over its addresses and ICMP type and code. Dropped if too
    /// long for IP's 16-bit length.
    fn icmp_push(
        &mut self,
        now: Instant,
        src: IpAddr,
        dst: IpAddr,
        mut msg: Vec<u8>,
        tos: u8,
        label: u32,
    ) {
        msg[2..4].fill(0);
        let v4 = src.is_ipv4();
        let initial = match v4 {
            true => 0,
            false => checksum::pseudo_header(src, dst, PROTO_ICMPV6, msg.len() as u32),
        };
        let sum = !checksum::fold(checksum::sum(&msg, initial));
        msg[2..4].copy_from_slice(&sum.to_be_bytes());
        let protocol = if v4 {
            super::icmp::PROTO_ICMP
        } else {
            PROTO_ICMPV6
        };
        let ip = IpRepr {
            src,
            dst,
            protocol,
            hop_limit: TTL,
            ecn: if v4 { 0 } else { tos & 0x03 },
            tos: if v4 { 0 } else { tos & !0x03 },
            header_len: 0,
            payload_len: msg.len(),
        };
        let cork = IpCork::icmp(v4);
        let out = match v4 {
            true => self.ip_cork(now, dst, cork, msg.len()),
            false => self.ip6_cork(now, dst, cork, msg.len(), 8),
        };
        let Ok(out) = out else {
            return;
        };
        let id = match v4 {
            true => self.ip_select_ident(now, (src, dst, protocol), out),
            false => 0,
        };
        let mut packet = vec![0; ip.emit_len()];
        ip.emit(&mut packet, id);
        match v4 {
            true => set_ipv4_tos_df(&mut packet, tos, out.df),
            false => {
                let fl = FlowLabel {
                    label,
                    ..FlowLabel::default()
                };
                let flow = FourTuple {
                    local: SocketAddr::new(src, 0),
                    remote: SocketAddr::new(dst, u16::from_be_bytes([msg[0], msg[1]])),
                };
                let label = fl.make_proto(&self.cfg, self.flow_key, &flow, PROTO_ICMPV6);
                set_ipv6_flowlabel(&mut packet, label);
            }
        }
        packet.extend_from_slice(&msg);
        self.mib.inc(if v4 {
            Mib::IcmpOutMsgs
        } else {
            Mib::Icmp6OutMsgs
        });
        self.ip_local_out(now, packet, out);
    }
}

#[cfg(test)]
mod tests {
    use super::IcmpLimits;
    use crate::stack::testutil::{echo_request, stack};
    use crate::{Config, Instant, Mib, RxChecksum, Stack};
    use lowtide_wire::checksum;
    use lowtide_wire::ip::IpRepr;
    use std::net::{IpAddr, SocketAddr};

    #[test]
    fn ipv6_echo_replies_take_a_flow_label_and_the_traffic_class() {
        use lowtide_wire::ip::{ipv6_flowlabel, set_ipv6_flowlabel};
        let (us, them) = ("fd00::2", "fd00::1");
        let mut req = echo_request(them, us, b"x");
        set_ipv6_flowlabel(&mut req, 0xabcde);
        req[0] = 0x6b; // traffic class 0xb8 (EF)
        req[1] = 0x80 | (req[1] & 0x0f);
        let reply = |cfg: Config| {
            let mut st = Stack::new(cfg, 1);
            st.add_address(us.parse().unwrap());
            st.handle_packet(Instant::ZERO, &req, RxChecksum::Verify);
            st.poll_transmit(Instant::ZERO).expect("a reply").packet
        };
        let auto = reply(Config::default());
        assert_eq!((auto[0] << 4) | (auto[1] >> 4), 0xb8, "ipv6_get_dsfield");
        let label = ipv6_flowlabel(&auto);
        assert!(label != 0 && label != 0xabcde, "{label:#x}");
        assert_eq!(ipv6_flowlabel(&reply(Config::default())), label, "per flow");
        let mut cfg = Config {
            ipv6_flowlabel_reflect: 4,
            ..Config::default()
        };
        assert_eq!(ipv6_flowlabel(&reply(cfg.clone())), 0xabcde, "reflected");
        cfg.ipv6_flowlabel_reflect = 3;
        assert_eq!(ipv6_flowlabel(&reply(cfg.clone())), label, "bits 1, 2 only");
        cfg.ipv6_auto_flowlabels = 0;
        assert_eq!(ipv6_flowlabel(&reply(cfg)), 0, "auto_flowlabels 0");
    }

    #[test]
    fn echo_requests_are_answered_in_both_families() {
        for (us, them) in [("10.0.0.2", "10.0.0.1"), ("fd00::2", "fd00::1")] {
            let mut st = stack(us);
            st.handle_packet(
                Instant::ZERO,
                &echo_request(them, us, b"abcdefgh"),
                RxChecksum::Verify,
            );
            let tx = st.poll_transmit(Instant::ZERO).expect("an echo reply");
            let ip = IpRepr::parse(&tx.packet, true).unwrap();
            assert_eq!(
                (ip.src, ip.dst),
                (us.parse().unwrap(), them.parse().unwrap())
            );
            let msg = &tx.packet[ip.header_len..];
            let v4 = ip.src.is_ipv4();
            assert_eq!(msg[0], if v4 { 0 } else { 129 });
            assert_eq!(
                &msg[4..],
                &[0x12, 0x34, 0, 7, b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h']
            );
            let pseudo = match v4 {
                true => 0,
                false => checksum::pseudo_header(ip.src, ip.dst, 58, msg.len() as u32),
            };
            assert_eq!(checksum::fold(checksum::sum(msg, pseudo)), 0xffff);
            let (inn, out) = match v4 {
                true => (Mib::IcmpInEchos, Mib::IcmpOutEchoReps),
                false => (Mib::Icmp6InEchos, Mib::Icmp6OutEchoReplies),
            };
            assert_eq!((st.counters().get(inn), st.counters().get(out)), (1, 1));
            // Not to an address we do not have; a bad checksum is an error.
            st.handle_packet(
                Instant::ZERO,
                &echo_request(them, if v4 { "10.0.0.9" } else { "fd00::9" }, b""),
                RxChecksum::Verify,
            );
            let mut bad = echo_request(them, us, b"x");
            let n = bad.len();
            bad[n - 1] ^= 1;
            st.handle_packet(Instant::ZERO, &bad, RxChecksum::Verify);
            assert!(st.poll_transmit(Instant::ZERO).is_none());
        }
    }

    #[test]
    fn a_datagram_to_no_socket_gets_a_port_unreachable_quoting_it() {
        let (mut a, mut b) = (stack("10.0.0.1"), stack("10.0.0.2"));
        let c = a.udp_bind("10.0.0.1:4000".parse().unwrap()).unwrap();
        a.udp_send_to(Instant::ZERO, c, &[1; 1000], "10.0.0.2:9".parse().unwrap())
            .unwrap();
        let sent = a.poll_transmit(Instant::ZERO).unwrap().packet;
        b.handle_packet(Instant::ZERO, &sent, RxChecksum::Verify);
        let err = b.poll_transmit(Instant::ZERO).unwrap().packet;
        assert_eq!(err.len(), 576, "cut to 576 bytes");
        let ip = IpRepr::parse(&err, true).unwrap();
        assert_eq!(ip.dst, "10.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(err[1], 0xc0, "IPTOS_PREC_INTERNETCONTROL");
        assert_eq!(&err[20..22], &[3, 3]);
        assert_eq!(&err[28..576], &sent[..548]);
        assert_eq!(checksum::fold(checksum::sum(&err[20..], 0)), 0xffff);
    }

    #[test]
    fn port_unreachables_are_rate_limited_per_destination_and_globally() {
        let mut l = IcmpLimits::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let t = 100_000;
        // A burst of 6, then one a second.
        let burst = (0..10).filter(|_| l.peer_allow(a, t, 1000)).count();
        assert_eq!(burst, 6);
        assert!(!l.peer_allow(a, t + 999, 1000));
        assert!(l.peer_allow(a, t + 1000, 1000));
        // The global bucket: 50 credits, refilled at 1000/s after 20 ms.
        let mut g = IcmpLimits::default();
        assert!(g.global_allow(t, 1000, 50));
        assert_eq!(g.credit, 50);
        g.credit = 0;
        assert!(!g.global_allow(t + 19, 1000, 50));
        assert!(g.global_allow(t + 20, 1000, 50));
        assert_eq!(g.credit, 20);

        let (mut a, mut b) = (stack("10.0.0.1"), stack("10.0.0.2"));
        let c = a.udp_bind("10.0.0.1:4000".parse().unwrap()).unwrap();
        for _ in 0..10 {
            a.udp_send_to(Instant::ZERO, c, b"x", "10.0.0.2:9".parse().unwrap())
                .unwrap();
        }
        while let Some(tx) = a.poll_transmit(Instant::ZERO) {
            b.handle_packet(Instant::ZERO, &tx.packet, RxChecksum::Verify);
        }
        assert_eq!(b.counters().get(Mib::UdpNoPorts), 10);
        assert_eq!(b.counters().get(Mib::IcmpOutDestUnreachs), 6);
        assert_eq!(b.counters().get(Mib::IcmpRateLimitHost), 4);
    }

    /// Port unreachables and echo replies `b` (with `sysctls`) sends for `n`
    /// datagrams to a closed port and `n` echo requests from `a`, all at `t` ms.
    fn answers(v4: bool, sysctls: &[(&str, &str)], n: usize, t: u64) -> (u64, u64, Stack) {
        let (us, them) = match v4 {
            true => ("10.0.0.2", "10.0.0.1"),
            false => ("fd00::2", "fd00::1"),
        };
        let (mut a, mut b) = (stack(them), stack(us));
        for (k, v) in sysctls {
            b.set_sysctl(Instant::ZERO, k, v).unwrap();
        }
        let now = Instant::from_nanos(t * 1_000_000);
        let c = a
            .udp_bind(SocketAddr::new(them.parse().unwrap(), 4000))
            .unwrap();
        let dst = SocketAddr::new(us.parse().unwrap(), 9);
        for _ in 0..n {
            a.udp_send_to(now, c, b"x", dst).unwrap();
            b.handle_packet(now, &echo_request(them, us, b"ping"), RxChecksum::Verify);
        }
        while let Some(tx) = a.poll_transmit(now) {
            b.handle_packet(now, &tx.packet, RxChecksum::Verify);
        }
        while b.poll_transmit(now).is_some() {}
        let c = b.counters();
        let (unreach, reps) = match v4 {
            true => (Mib::IcmpOutDestUnreachs, Mib::IcmpOutEchoReps),
            false => (Mib::Icmp6OutDestUnreachs, Mib::Icmp6OutEchoReplies),
        };
        (c.get(unreach), c.get(reps), b)
    }

    #[test]
    fn icmp_sysctls_have_linux_defaults_and_bounds() {
        let c = Config::default();
        assert_eq!(
            (
                c.icmp_ratelimit,
                c.icmp_ratemask,
                c.icmp_msgs_per_sec,
                c.icmp_msgs_burst
            ),
            (1000, 6168, 1000, 50)
        );
        assert!(!c.icmp_echo_ignore_all && c.icmp_echo_ignore_broadcasts);
        assert_eq!((c.icmpv6_ratelimit, c.icmpv6_echo_ignore_all), (100, false));
        let mut c = Config::default();
        for bad in [
            ("net.ipv4.icmp_msgs_burst", "-1"),
            ("net.ipv4.icmp_echo_ignore_all", "2"),
            ("net.ipv6.icmp.echo_ignore_all", "yes"),
            ("net.ipv6.icmp.ratelimit", "-5"),
        ] {
            assert!(c.set(bad.0, bad.1).is_err(), "{bad:?}");
        }
        c.set("net.ipv4.icmp_ratemask", "-1").unwrap();
        assert_eq!(c.icmp_ratemask, u32::MAX);
    }

    #[test]
    fn echo_ignore_sysctls_silence_echo_replies() {
        for v4 in [true, false] {
            assert_eq!(answers(v4, &[], 3, 100_000).1, 3);
            let name = match v4 {
                true => "net.ipv4.icmp_echo_ignore_all",
                false => "net.ipv6.icmp.echo_ignore_all",
            };
            let (_, reps, b) = answers(v4, &[(name, "1")], 3, 100_000);
            assert_eq!(reps, 0, "{name}");
            let echos = if v4 {
                Mib::IcmpInEchos
            } else {
                Mib::Icmp6InEchos
            };
            assert_eq!(b.counters().get(echos), 3, "still counted as received");
        }
    }

    #[test]
    fn broadcast_echo_is_ignored_unless_asked() {
        for (ignore, want) in [("1", 0), ("0", 1)] {
            let mut b = stack("10.0.0.2");
            b.set_sysctl(
                Instant::ZERO,
                "net.ipv4.icmp_echo_ignore_broadcasts",
                ignore,
            )
            .unwrap();
            let req = echo_request("10.0.0.1", "255.255.255.255", b"");
            b.handle_packet(Instant::ZERO, &req, RxChecksum::Verify);
            let out: Vec<_> = std::iter::from_fn(|| b.poll_transmit(Instant::ZERO)).collect();
            assert_eq!(out.len(), want);
            if let Some(tx) = out.first() {
                let ip = IpRepr::parse(&tx.packet, true).unwrap();
                let us: IpAddr = "10.0.0.2".parse().unwrap();
                assert_eq!(ip.src, us, "answered from our address");
            }
            assert_eq!(b.counters().get(Mib::IcmpInErrors), 1 - want as u64);
        }
    }

    #[test]
    fn ratemask_and_ratelimit_choose_what_is_limited() {
        let counts = |v4, sysctls: &[(&str, &str)]| {
            let (u, r, _) = answers(v4, sysctls, 10, 100_000);
            (u, r)
        };
        // Default: 6 port unreachables of 10 (the burst), every echo reply.
        assert_eq!(counts(true, &[]), (6, 10));
        assert_eq!(counts(false, &[]), (6, 10));
        // Type 3 out of the mask: no limit; type 0 in it: echo replies limited.
        assert_eq!(counts(true, &[("net.ipv4.icmp_ratemask", "1")]), (10, 6));
        // No per-destination limit: the global burst of 50 is far.
        assert_eq!(counts(true, &[("net.ipv4.icmp_ratelimit", "0")]), (10, 10));
        assert_eq!(counts(false, &[("net.ipv6.icmp.ratelimit", "0")]), (10, 10));
        // A global burst of 3: each message costs 0 to 2 credits and one passes while
        // any is left, so 2 (2 + 2) pass, or more (all 10 only if every one is free).
        let (u, _) = counts(
            true,
            &[
                ("net.ipv4.icmp_msgs_burst", "3"),
                ("net.ipv4.icmp_ratelimit", "0"),
            ],
        );
        assert!((2..10).contains(&u), "{u}");
        // No credit at all.
        assert_eq!(counts(true, &[("net.ipv4.icmp_msgs_per_sec", "0")]).0, 0);
        // IPv6's interval is 100 ms (Linux's current default), IPv4's 1000 ms.
        for (v4, next) in [(true, 1000), (false, 100)] {
            let (_, _, mut b) = answers(v4, &[], 6, 100_000);
            let mut a = stack(if v4 { "10.0.0.1" } else { "fd00::1" });
            let c = a
                .udp_bind(
                    if v4 {
                        "10.0.0.1:4000"
                    } else {
                        "[fd00::1]:4000"
                    }
                    .parse()
                    .unwrap(),
                )
                .unwrap();
            let dst = if v4 { "10.0.0.2:9" } else { "[fd00::2]:9" }
                .parse()
                .unwrap();
            for (t, sent) in [(100_000 + next - 1, false), (100_000 + next, true)] {
                let now = Instant::from_nanos(t * 1_000_000);
                a.udp_send_to(now, c, b"x", dst).unwrap();
                let tx = a.poll_transmit(now).unwrap();
                b.handle_packet(now, &tx.packet, RxChecksum::Verify);
                assert_eq!(
                    b.poll_transmit(now).is_some(),
                    sent,
                    "v4 {v4} at +{}",
                    t - 100_000
                );
            }
        }
    }
}
