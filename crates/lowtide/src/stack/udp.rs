//! UDP sockets (net/ipv4/udp.c, net/ipv6/udp.c): bind, connect, `sendto`,
//! `recvfrom`, a receive queue bounded by the socket's buffer, and a catch-all
//! socket for transparent proxies (tun2socks), whose datagrams keep the
//! destination their sender chose. Sans-IO as the rest of the stack: a send
//! queues the datagram for [`Stack::poll_transmit`] at once (UDP has no send
//! queue to wait on), a datagram no socket wants is answered with an ICMP port
//! unreachable (`stack/icmp_out.rs`).
//!
//! UDP GSO as Linux's `UDP_SEGMENT` (`udp_send_skb`): a socket with a segment size
//! ([`Stack::udp_set_segment`]) hands a larger send to the device as one
//! super-packet ([`Transmit::gso_size`], `SKB_GSO_UDP_L4`, checksum partial) that a
//! TUN device with USO takes whole and anything else cuts into datagrams
//! ([`Transmit::segments`]); received super-packets are cut by the device
//! (`lowtide_wire::udp::gso_segment`), as `udp_rcv_segment` does for a socket
//! without `UDP_GRO`.
//!
//! A datagram larger than the path MTU is fragmented as Linux's `ip_fragment` /
//! `ip6_fragment` do (`stack/ip_output.rs`) under the socket's `IP_MTU_DISCOVER`
//! ([`Stack::udp_set_mtu_discover`]; `IP_PMTUDISC_WANT`, or `DONT` under
//! `net.ipv4.ip_no_pmtu_disc`, by default), `IPV6_DONTFRAG` and `IPV6_MTU`;
//! `EMSGSIZE` where those forbid it. A connected IPv4 socket numbers its datagrams
//! from a random `inet_id`; the others take `ip_idents`' hashed counter (0 under
//! `IP_PMTUDISC_DO`/`PROBE`).
//!
//! Not here yet: ICMP errors reported to UDP sockets (`IP_RECVERR`, the
//! `EMSGSIZE` of a learned path MTU), multicast and broadcast.

use super::icmp_out::IcmpError;
use super::ip_output::IpCork;
use super::Stack;
use crate::mib::Mib;
use crate::socket::{SocketError, Transmit, TxRetrans, TxToken};
use crate::tcp::flowlabel::{self, FlowLabel};
use crate::tcp::FourTuple;
use crate::time::Instant;
use lowtide_wire::ip::{set_ipv4_tos_df, set_ipv6_flowlabel, IpRepr};
use lowtide_wire::udp::{UdpRepr, PROTO_UDP, UDP_HEADER_LEN, UDP_MAX_SEGMENTS};
use std::collections::VecDeque;
use std::net::SocketAddr;
use tracing::trace;

/// `net.core.rmem_default`: a UDP socket's receive buffer (`sk_rcvbuf`).
const RMEM_DEFAULT: usize = 212_992;
/// What a queued datagram costs beyond its bytes, as an skb's `truesize` counts its
/// `sk_buff` and `skb_shared_info` (`SKB_TRUESIZE(0)` on x86-64: 320 + 256 + 64).
const SKB_OVERHEAD: usize = 640;
/// `IP_DEFAULT_TTL` / `ipv6.conf.all.hop_limit`.
const DEFAULT_TTL: u8 = 64;

/// A UDP socket of a [`Stack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UdpHandle {
    index: u32,
    generation: u32,
}

impl core::fmt::Display for UdpHandle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "udp{}", self.index)
    }
}

/// A received datagram ([`Stack::udp_recv_from`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// The payload.
    pub data: Vec<u8>,
    /// Its sender.
    pub src: SocketAddr,
    /// The address and port it was sent to: the socket's own, or for a catch-all
    /// socket the original destination (as `IP_RECVORIGDSTADDR` gives a `TPROXY`
    /// socket on Linux).
    pub dst: SocketAddr,
}

struct UdpSock {
    /// Bound address (unspecified: any of the stack's), port never 0.
    local: SocketAddr,
    /// `connect(2)`ed peer: the default destination, and the only source accepted.
    remote: Option<SocketAddr>,
    catch_all: bool,
    queue: VecDeque<Datagram>,
    /// `sk_rmem_alloc`: the queue's true size.
    rmem: usize,
    /// `sk_err`: a hard ICMP error about a datagram of this connected socket.
    error: Option<SocketError>,
    /// `UDP_SEGMENT` (`up->gso_size`): sends longer than this leave as one GSO
    /// super-packet of datagrams this long; 0: off.
    segment: u16,
    /// `IP_MTU_DISCOVER`/`IPV6_MTU_DISCOVER`, `IPV6_DONTFRAG`, `IPV6_MTU`.
    cork: IpCork,
    /// `inet_id` of a connected IPv4 socket (`__ip4_datagram_connect`).
    inet_id: Option<u16>,
    /// `sk_txhash`, set at `connect(2)` (`sk_set_txhash`); 0: none, each
    /// datagram's IPv6 flow label comes from its flow's hash.
    txhash: u32,
    /// `IPV6_AUTOFLOWLABEL` if set (`autoflowlabel_set`).
    autoflowlabel: Option<bool>,
}

#[derive(Default)]
pub(super) struct UdpTable {
    slots: Vec<(u32, Option<UdpSock>)>,
    catch_all: Option<u32>,
}

impl UdpTable {
    fn get(&self, h: UdpHandle) -> Result<&UdpSock, SocketError> {
        match self.slots.get(h.index as usize) {
            Some((g, Some(s))) if *g == h.generation => Ok(s),
            _ => Err(SocketError::BadHandle),
        }
    }

    fn get_mut(&mut self, h: UdpHandle) -> Result<&mut UdpSock, SocketError> {
        match self.slots.get_mut(h.index as usize) {
            Some((g, Some(s))) if *g == h.generation => Ok(s),
            _ => Err(SocketError::BadHandle),
        }
    }

    fn insert(&mut self, s: UdpSock) -> UdpHandle {
        let index = match self.slots.iter().position(|(_, s)| s.is_none()) {
            Some(i) => i,
            None => {
                self.slots.push((0, None));
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.0 = slot.0.wrapping_add(1);
        slot.1 = Some(s);
        UdpHandle {
            index: index as u32,
            generation: slot.0,
        }
    }

    fn live(&self) -> impl Iterator<Item = (usize, &UdpSock)> {
        (self.slots.iter().enumerate()).filter_map(|(i, (_, s))| s.as_ref().map(|s| (i, s)))
    }

    /// Whether a bound socket other than a catch-all holds `local`'s port in a way
    /// that conflicts (`udp_lib_lport_inuse` without `SO_REUSEADDR`): same port and
    /// family, and the same address or either a wildcard.
    fn in_use(&self, local: SocketAddr) -> bool {
        self.live().any(|(_, s)| {
            !s.catch_all
                && s.local.port() == local.port()
                && s.local.is_ipv4() == local.is_ipv4()
                && (s.local.ip() == local.ip()
                    || s.local.ip().is_unspecified()
                    || local.ip().is_unspecified())
        })
    }

    /// `__udp4_lib_lookup`'s `compute_score`: the socket bound to the port that
    /// matches best (a connected socket's peer and a bound address each count), then
    /// the catch-all.
    fn lookup(&self, src: SocketAddr, dst: SocketAddr) -> Option<usize> {
        let mut best: Option<(u32, usize)> = None;
        for (i, s) in self.live() {
            if s.catch_all || s.local.port() != dst.port() || s.local.is_ipv4() != dst.is_ipv4() {
                continue;
            }
            let mut score = 1;
            if !s.local.ip().is_unspecified() {
                if s.local.ip() != dst.ip() {
                    continue;
                }
                score += 2;
            }
            if let Some(r) = s.remote {
                if r != src {
                    continue;
                }
                score += 4;
            }
            if best.is_none_or(|(b, _)| score > b) {
                best = Some((score, i));
            }
        }
        best.map(|(_, i)| i).or(self.catch_all.map(|i| i as usize))
    }
}

impl Stack {
    /// `socket(AF_INET[6], SOCK_DGRAM)` + `bind(2)`: a UDP socket on `local` (an
    /// address of the stack or unspecified; port 0 picks a free one in
    /// `net.ipv4.ip_local_port_range` from a random start, as `udp_lib_get_port`).
    /// `AddrInUse` if the port is taken, `AddrNotAvailable` for an address the stack
    /// does not have.
    pub fn udp_bind(&mut self, local: SocketAddr) -> Result<UdpHandle, SocketError> {
        if !local.ip().is_unspecified() && !self.addrs.contains(&local.ip()) {
            return Err(SocketError::AddrNotAvailable);
        }
        let local = match local.port() {
            0 => self.udp_pick_port(local)?,
            _ if self.udp.in_use(local) => return Err(SocketError::AddrInUse),
            _ => local,
        };
        let cork = self.udp_default_cork(local.is_ipv4());
        Ok(self.udp.insert(UdpSock {
            local,
            remote: None,
            catch_all: false,
            queue: VecDeque::new(),
            rmem: 0,
            error: None,
            segment: 0,
            cork,
            inet_id: None,
            txhash: 0,
            autoflowlabel: None,
        }))
    }

    /// `udp_lib_get_port` with port 0: from a random start, the first free port.
    fn udp_pick_port(&mut self, local: SocketAddr) -> Result<SocketAddr, SocketError> {
        let [lo, hi] = self.cfg.ip_local_port_range;
        let span = (hi - lo) as u32 + 1;
        let start = self.rng.range_u32(0, span - 1);
        (0..span)
            .map(|i| SocketAddr::new(local.ip(), lo + ((start + i) % span) as u16))
            .find(|a| !self.udp.in_use(*a))
            .ok_or(SocketError::AddrInUse)
    }

    /// A catch-all UDP socket for a transparent proxy: it receives the datagrams, to
    /// any address and port, that no other UDP socket takes; each [`Datagram::dst`]
    /// is where its sender sent it, and [`Stack::udp_send_from`] answers from there
    /// (Linux: an `IP_TRANSPARENT` socket under a `TPROXY` rule). One per stack
    /// (`AddrInUse` otherwise).
    pub fn udp_bind_catch_all(&mut self) -> Result<UdpHandle, SocketError> {
        if self.udp.catch_all.is_some() {
            return Err(SocketError::AddrInUse);
        }
        let cork = self.udp_default_cork(true);
        let h = self.udp.insert(UdpSock {
            local: SocketAddr::from(([0, 0, 0, 0], 0)),
            remote: None,
            catch_all: true,
            queue: VecDeque::new(),
            rmem: 0,
            error: None,
            segment: 0,
            cork,
            inet_id: None,
            txhash: 0,
            autoflowlabel: None,
        });
        self.udp.catch_all = Some(h.index);
        Ok(h)
    }

    /// `connect(2)` on a UDP socket: `remote` becomes the destination of
    /// [`Stack::udp_send`] and the only sender whose datagrams the socket receives.
    pub fn udp_connect(&mut self, h: UdpHandle, remote: SocketAddr) -> Result<(), SocketError> {
        let s = self.udp.get(h)?;
        if s.catch_all || remote.port() == 0 || remote.is_ipv4() != s.local.is_ipv4() {
            return Err(SocketError::InvalidInput);
        }
        // __ip4_datagram_connect: inet_id = get_random_u16().
        let inet_id = remote.is_ipv4().then(|| self.rng.next_u32() as u16);
        let tuple = FourTuple {
            local: s.local,
            remote,
        };
        // __ip{4,6}_datagram_connect: sk_set_txhash.
        let txhash = flowlabel::next_txhash(self.flow_key, &tuple, 0);
        let s = self.udp.get_mut(h)?;
        s.remote = Some(remote);
        s.inet_id = inet_id;
        s.txhash = txhash;
        Ok(())
    }

    /// `setsockopt(IPV6_AUTOFLOWLABEL)` on an IPv6 socket: whether its datagrams
    /// carry a flow label from their flow's hash (`net.ipv6.auto_flowlabels` 1 or
    /// 2 let the socket choose); `InvalidInput` on an IPv4 socket.
    pub fn udp_set_autoflowlabel(&mut self, h: UdpHandle, on: bool) -> Result<(), SocketError> {
        let s = self.udp.get_mut(h)?;
        if s.local.is_ipv4() {
            return Err(SocketError::InvalidInput);
        }
        s.autoflowlabel = Some(on);
        Ok(())
    }

    /// `getsockopt(IPV6_AUTOFLOWLABEL)`: `ip6_autoflowlabel`, the socket's choice
    /// or the sysctl's default.
    pub fn udp_autoflowlabel(&self, h: UdpHandle) -> Result<bool, SocketError> {
        let s = self.udp.get(h)?;
        if s.local.is_ipv4() {
            return Err(SocketError::InvalidInput);
        }
        Ok(s.autoflowlabel
            .unwrap_or_else(|| flowlabel::default_autolabel(&self.cfg)))
    }

    /// `inet_create` / `inet6_create`: `IP_PMTUDISC_DONT` under
    /// `net.ipv4.ip_no_pmtu_disc`, else `WANT`; an IPv6 socket's
    /// `IPV6_MTU_DISCOVER` is `IPV6_PMTUDISC_WANT` whatever the sysctl.
    fn udp_default_cork(&self, v4: bool) -> IpCork {
        let pmtudisc = match v4 {
            true => crate::tcp::pmtu::default_pmtudisc(&self.cfg),
            false => crate::tcp::consts::IP_PMTUDISC_WANT,
        };
        IpCork {
            pmtudisc,
            dontfrag: false,
            frag_size: 0,
        }
    }

    /// `setsockopt(IP_MTU_DISCOVER)` on an IPv4 socket, `IPV6_MTU_DISCOVER` on an
    /// IPv6 one: `IP_PMTUDISC_DONT` (0, no DF, fragment), `WANT` (1, DF when it
    /// fits, else fragment), `DO` (2, DF, `EMSGSIZE` over the path MTU), `PROBE`
    /// (3, DF, the device's MTU), `INTERFACE` (4, no DF, the device's MTU, over it
    /// `EMSGSIZE`), `OMIT` (5, no DF, the device's MTU, fragment); the constants are
    /// [`crate::tcp::consts`]'. `InvalidInput` past 5 (`EINVAL`).
    pub fn udp_set_mtu_discover(&mut self, h: UdpHandle, mode: u8) -> Result<(), SocketError> {
        if mode > crate::tcp::consts::IP_PMTUDISC_OMIT {
            return Err(SocketError::InvalidInput);
        }
        self.udp.get_mut(h)?.cork.pmtudisc = mode;
        Ok(())
    }

    /// `getsockopt(IP_MTU_DISCOVER)` / `IPV6_MTU_DISCOVER`.
    pub fn udp_mtu_discover(&self, h: UdpHandle) -> Result<u8, SocketError> {
        Ok(self.udp.get(h)?.cork.pmtudisc)
    }

    /// `setsockopt(IPV6_DONTFRAG)` on an IPv6 socket: a datagram over the MTU is
    /// `EMSGSIZE` instead of fragments. `InvalidInput` on an IPv4 socket.
    pub fn udp_set_dontfrag(&mut self, h: UdpHandle, on: bool) -> Result<(), SocketError> {
        let s = self.udp.get_mut(h)?;
        if s.local.is_ipv4() {
            return Err(SocketError::InvalidInput);
        }
        s.cork.dontfrag = on;
        Ok(())
    }

    /// `setsockopt(IPV6_MTU)` on an IPv6 socket (`np->frag_size`): a datagram
    /// that needs fragmenting is cut into fragments of at most `mtu` bytes, and a
    /// datagram over it with `IPV6_DONTFRAG` is `EMSGSIZE`; 0 unsets it. Below
    /// 1280 (`IPV6_MIN_MTU`) or on an IPv4 socket `InvalidInput`.
    pub fn udp_set_ipv6_mtu(&mut self, h: UdpHandle, mtu: u16) -> Result<(), SocketError> {
        let s = self.udp.get_mut(h)?;
        if s.local.is_ipv4() || (mtu != 0 && mtu < 1280) {
            return Err(SocketError::InvalidInput);
        }
        s.cork.frag_size = mtu;
        Ok(())
    }

    /// `setsockopt(UDP_SEGMENT)`: from now on a send of more than `size` bytes
    /// leaves as one GSO super-packet of `size`-byte datagrams (the last shorter):
    /// one [`Transmit`] with `gso_size` = `size`, cut by the device (`udp_send_skb`).
    /// Such a send may be up to `UDP_MAX_SEGMENTS` (128) datagrams and 64 KB; one
    /// datagram must fit the path MTU (`EMSGSIZE`). 0 turns it off.
    pub fn udp_set_segment(&mut self, h: UdpHandle, size: u16) -> Result<(), SocketError> {
        self.udp.get_mut(h)?.segment = size;
        Ok(())
    }

    /// `getsockopt(UDP_SEGMENT)`: the socket's segment size (0: off).
    pub fn udp_segment(&self, h: UdpHandle) -> Result<u16, SocketError> {
        Ok(self.udp.get(h)?.segment)
    }

    /// The socket's bound address (`getsockname(2)`; the catch-all's is 0.0.0.0:0).
    pub fn udp_local_addr(&self, h: UdpHandle) -> Result<SocketAddr, SocketError> {
        Ok(self.udp.get(h)?.local)
    }

    /// The connected peer (`getpeername(2)`): `NotConnected` if none.
    pub fn udp_peer_addr(&self, h: UdpHandle) -> Result<SocketAddr, SocketError> {
        self.udp.get(h)?.remote.ok_or(SocketError::NotConnected)
    }

    /// `send(2)` on a connected UDP socket.
    pub fn udp_send(
        &mut self,
        now: Instant,
        h: UdpHandle,
        data: &[u8],
    ) -> Result<usize, SocketError> {
        let dst = self
            .udp_peer_addr(h)
            .map_err(|_| SocketError::NotConnected)?;
        self.udp_send_to(now, h, data, dst)
    }

    /// `sendto(2)`: one datagram to `dst`, from the socket's address (or, if it is
    /// unspecified, the stack's first address of `dst`'s family); fragmented over
    /// the path MTU, or `MessageTooLong` (`EMSGSIZE`) where the socket's
    /// `IP_MTU_DISCOVER` or `IPV6_DONTFRAG` forbids it, or past 64 KB.
    pub fn udp_send_to(
        &mut self,
        now: Instant,
        h: UdpHandle,
        data: &[u8],
        dst: SocketAddr,
    ) -> Result<usize, SocketError> {
        let s = self.udp.get(h)?;
        if s.catch_all || dst.port() == 0 || dst.is_ipv4() != s.local.is_ipv4() {
            return Err(SocketError::InvalidInput);
        }
        let ip = match s.local.ip() {
            ip if !ip.is_unspecified() => ip,
            _ => (self.addrs.iter().copied())
                .find(|a| a.is_ipv4() == dst.is_ipv4())
                .ok_or(SocketError::AddrNotAvailable)?,
        };
        let src = SocketAddr::new(ip, s.local.port());
        self.udp_output(now, h, src, dst, data)
    }

    /// Sends one datagram from any `src` through the catch-all socket `h`: the
    /// answer of a transparent proxy, from the address its client sent to.
    pub fn udp_send_from(
        &mut self,
        now: Instant,
        h: UdpHandle,
        data: &[u8],
        src: SocketAddr,
        dst: SocketAddr,
    ) -> Result<usize, SocketError> {
        let s = self.udp.get(h)?;
        if !s.catch_all {
            return Err(SocketError::InvalidInput);
        }
        if src.is_ipv4() != dst.is_ipv4() || src.port() == 0 || dst.port() == 0 {
            return Err(SocketError::InvalidInput);
        }
        self.udp_output(now, h, src, dst, data)
    }

    /// `udp_send_skb`: the IP and UDP headers with a full checksum, through
    /// [`Stack::ip_local_out`] (fragmented over the MTU); with a segment size below
    /// the payload, one GSO super-packet with a partial checksum (`udp4_hwcsum`)
    /// instead.
    fn udp_output(
        &mut self,
        now: Instant,
        h: UdpHandle,
        src: SocketAddr,
        dst: SocketAddr,
        data: &[u8],
    ) -> Result<usize, SocketError> {
        let s = self.udp.get(h)?;
        let (gso, cork, connected) = (s.segment as usize, s.cork, s.inet_id.is_some());
        let fl = FlowLabel {
            txhash: s.txhash,
            label: 0,
            auto: s.autoflowlabel,
        };
        let ip = IpRepr {
            src: src.ip(),
            dst: dst.ip(),
            protocol: PROTO_UDP,
            hop_limit: DEFAULT_TTL,
            ecn: 0,
            tos: 0,
            header_len: 0,
            payload_len: UDP_HEADER_LEN + data.len(),
        };
        let segs = match gso {
            0 => 1,
            g => data.len().div_ceil(g).max(1),
        };
        let out = match segs > 1 {
            true => self.udp_gso_check(now, &ip, cork, data.len(), gso)?,
            false if dst.is_ipv4() => self.ip_cork(now, dst.ip(), cork, ip.payload_len)?,
            false => self.ip6_cork(now, dst.ip(), cork, ip.payload_len, UDP_HEADER_LEN)?,
        };
        let id = match self.udp.get_mut(h)?.inet_id.as_mut() {
            // ip_select_ident_segs: a connected socket's own counter.
            Some(id) if connected => {
                *id = id.wrapping_add(1);
                *id
            }
            _ => self.ip_select_ident(now, (src.ip(), dst.ip(), PROTO_UDP), out),
        };
        let mut packet = vec![0; ip.emit_len()];
        ip.emit(&mut packet, id);
        set_ipv4_tos_df(&mut packet, 0, out.df);
        if dst.is_ipv6() {
            // __ip6_make_skb: ip6_make_flowlabel(fl6->flowlabel 0, ip6_autoflowlabel).
            let tuple = FourTuple {
                local: src,
                remote: dst,
            };
            let label = fl.make_proto(&self.cfg, self.flow_key, &tuple, PROTO_UDP);
            set_ipv6_flowlabel(&mut packet, label);
        }
        packet.reserve(ip.payload_len);
        if segs > 1 {
            // Don't checksum the payload: the device will cut it (udp_send_skb).
            let check = lowtide_wire::udp::partial_checksum(src.ip(), dst.ip(), ip.payload_len);
            packet.extend_from_slice(&src.port().to_be_bytes());
            packet.extend_from_slice(&dst.port().to_be_bytes());
            packet.extend_from_slice(&(ip.payload_len as u16).to_be_bytes());
            packet.extend_from_slice(&check.to_be_bytes());
            packet.extend_from_slice(data);
        } else {
            let udp = UdpRepr {
                src_port: src.port(),
                dst_port: dst.port(),
            };
            udp.emit(src.ip(), dst.ip(), data, &mut packet);
        }
        self.mib.inc(match dst.is_ipv4() {
            true => Mib::UdpOutDatagrams,
            false => Mib::Udp6OutDatagrams,
        });
        match segs > 1 {
            true => self.queue_datagram_gso(packet, gso as u16, segs as u16),
            false => self.ip_local_out(now, packet, out),
        }
        Ok(data.len())
    }

    /// `udp_send_skb`'s checks of a GSO send (one segment within the path MTU, at
    /// most `UDP_MAX_SEGMENTS`), and the 16-bit length; the device cuts the
    /// segments, none is fragmented.
    fn udp_gso_check(
        &self,
        now: Instant,
        ip: &IpRepr,
        cork: IpCork,
        len: usize,
        gso: usize,
    ) -> Result<super::ip_output::OutParams, SocketError> {
        let mtu = self.route_mtu(now, ip.dst) as usize;
        let hlen = ip.emit_len() + UDP_HEADER_LEN;
        // ip_append_data / ip6_append_data: the IPv4 total length, the IPv6
        // payload length fit 16 bits.
        let v4_hdr = if ip.dst.is_ipv4() { ip.emit_len() } else { 0 };
        if v4_hdr + ip.payload_len > u16::MAX as usize || hlen + len.min(gso) > mtu {
            return Err(SocketError::MessageTooLong);
        }
        if len > gso * UDP_MAX_SEGMENTS {
            return Err(SocketError::InvalidInput);
        }
        Ok(super::ip_output::OutParams {
            mtu: usize::MAX,
            ignore_df: false,
            frag_size: 0,
            df: ip.dst.is_ipv4() && self.ip_df(now, ip.dst, cork, v4_hdr + ip.payload_len),
        })
    }

    /// [`Stack::ip_local_out`] of a UDP GSO super-packet of `gso_segs` datagrams,
    /// cut by the device (a GSO packet counts once).
    fn queue_datagram_gso(&mut self, packet: Vec<u8>, gso_size: u16, gso_segs: u16) {
        let ver = crate::mib::ip_version(&packet);
        self.mib.inc(Mib::IpOutRequests.for_ip_version(ver));
        self.ip_finish_output2(packet, gso_size, gso_segs);
    }

    /// `ip_finish_output2` / `ip6_finish_output2`: one packet (a datagram, a
    /// fragment, a GSO super-packet) with its checksums done to the device: not TCP,
    /// so no TX completion to report to a socket.
    pub(super) fn ip_finish_output2(&mut self, packet: Vec<u8>, gso_size: u16, gso_segs: u16) {
        let ver = crate::mib::ip_version(&packet);
        self.mib.inc(Mib::IpOutTransmits.for_ip_version(ver));
        self.mib
            .add(Mib::IpExtOutOctets.for_ip_version(ver), packet.len() as u64);
        self.out.push_back(Transmit {
            packet,
            payload: crate::socket::TxPayload::default(),
            gso_size,
            gso_segs,
            tcp_accecn: false,
            token: TxToken {
                index: u32::MAX,
                generation: 0,
                truesize: 0,
                seq: 0,
                len: 0,
                prr: (0, 0),
                rtx: TxRetrans::None,
                fclone: 0,
                zc: None,
            },
            // Not paced: due at once (a qdisc reads no EDT from it).
            tstamp: Instant::ZERO,
        });
    }

    /// `recvfrom(2)`: the next datagram, `WouldBlock` if none. A pending error
    /// (an ICMP port unreachable about a connected socket's datagram:
    /// `ConnectionRefused`) comes first, once (`sock_error`).
    pub fn udp_recv_from(&mut self, h: UdpHandle) -> Result<Datagram, SocketError> {
        let s = self.udp.get_mut(h)?;
        if let Some(e) = s.error.take() {
            return Err(e);
        }
        let d = s.queue.pop_front().ok_or(SocketError::WouldBlock)?;
        s.rmem -= d.data.len() + SKB_OVERHEAD;
        Ok(d)
    }

    /// Whether a datagram or an error is waiting (`EPOLLIN`/`EPOLLERR` on a UDP
    /// socket).
    pub fn udp_readable(&self, h: UdpHandle) -> Result<bool, SocketError> {
        let s = self.udp.get(h)?;
        Ok(!s.queue.is_empty() || s.error.is_some())
    }

    /// The socket (not the catch-all) that sent a datagram from `local` to
    /// `remote`, as `__udp4_lib_err` looks it up.
    fn udp_sender(&self, local: SocketAddr, remote: SocketAddr) -> Option<usize> {
        (self.udp.lookup(remote, local)).filter(|&i| self.udp.catch_all != Some(i as u32))
    }

    /// Whether a UDP socket sent from `local` to `remote`.
    pub(super) fn udp_sock_for(&self, local: SocketAddr, remote: SocketAddr) -> bool {
        self.udp_sender(local, remote).is_some()
    }

    /// `__udp4_lib_err` / `__udp6_lib_err` without `IP_RECVERR`: a hard error
    /// (`err`) about a datagram of a connected socket becomes its `sk_err`; an
    /// unconnected socket hears nothing.
    pub(super) fn udp_err(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        err: Option<SocketError>,
    ) {
        let Some(i) = self.udp_sender(local, remote) else {
            return;
        };
        if let Some(s) = self.udp.slots[i].1.as_mut() {
            if s.remote == Some(remote) && err.is_some() {
                s.error = err;
            }
        }
    }

    /// `close(2)`: the socket and its queued datagrams are gone.
    pub fn udp_close(&mut self, h: UdpHandle) -> Result<(), SocketError> {
        self.udp.get(h)?;
        self.udp.slots[h.index as usize].1 = None;
        if self.udp.catch_all == Some(h.index) {
            self.udp.catch_all = None;
        }
        Ok(())
    }

    /// Whether a catch-all UDP socket takes datagrams to any address.
    pub(super) fn udp_catch_all(&self) -> bool {
        self.udp.catch_all.is_some()
    }

    /// `__udp4_lib_rcv` / `__udp6_lib_rcv`: checks the datagram, finds its socket
    /// and queues it there (`__udp_enqueue_schedule_skb`: dropped past `sk_rcvbuf`),
    /// or answers with an ICMP port unreachable.
    pub(super) fn udp_rcv(&mut self, now: Instant, ip: &IpRepr, packet: &[u8], verify: bool) {
        let v4 = ip.src.is_ipv4();
        let (in_dgrams, no_ports, in_errors, rcvbuf_errors, csum_errors) = match v4 {
            true => (
                Mib::UdpInDatagrams,
                Mib::UdpNoPorts,
                Mib::UdpInErrors,
                Mib::UdpRcvbufErrors,
                Mib::UdpInCsumErrors,
            ),
            false => (
                Mib::Udp6InDatagrams,
                Mib::Udp6NoPorts,
                Mib::Udp6InErrors,
                Mib::Udp6RcvbufErrors,
                Mib::Udp6InCsumErrors,
            ),
        };
        let seg = &packet[ip.header_len..ip.header_len + ip.payload_len];
        let (udp, payload) = match UdpRepr::parse(ip.src, ip.dst, seg, verify) {
            Ok(p) => p,
            Err(e) => {
                if e == lowtide_wire::WireError::BadChecksum {
                    self.mib.inc(csum_errors);
                }
                self.mib.inc(in_errors);
                trace!(error = %e, "drop: bad UDP datagram");
                return;
            }
        };
        let src = SocketAddr::new(ip.src, udp.src_port);
        let dst = SocketAddr::new(ip.dst, udp.dst_port);
        // Only the catch-all takes datagrams to addresses that are not ours.
        let ours = self.addrs.contains(&ip.dst);
        let found = self.udp.lookup(src, dst).filter(|&i| {
            ours || self.udp.catch_all == Some(i as u32) && super::icmp_out::unicast(ip.dst)
        });
        let Some(i) = found else {
            self.mib.inc(no_ports);
            return self.icmp_send_error(now, ip, packet, IcmpError::PortUnreach);
        };
        let Some(s) = self.udp.slots[i].1.as_mut() else {
            return;
        };
        let truesize = payload.len() + SKB_OVERHEAD;
        if s.rmem + truesize > RMEM_DEFAULT {
            self.mib.inc(rcvbuf_errors);
            self.mib.inc(in_errors);
            return;
        }
        s.rmem += truesize;
        s.queue.push_back(Datagram {
            data: payload.to_vec(),
            src,
            dst,
        });
        self.mib.inc(in_dgrams);
    }
}

#[cfg(test)]
mod tests {
    use crate::stack::testutil::stack;
    use crate::{Instant, Mib, RxChecksum, SocketError, Stack};
    use std::net::{IpAddr, SocketAddr};

    const T: Instant = Instant::ZERO;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// Moves every packet `from` sends to `to`.
    fn deliver(from: &mut Stack, to: &mut Stack) -> usize {
        let mut n = 0;
        while let Some(tx) = from.poll_transmit(T) {
            to.handle_packet(T, &tx.packet, RxChecksum::Verify);
            n += 1;
        }
        n
    }

    #[test]
    fn datagrams_both_ways_in_both_families() {
        for (a_ip, b_ip, b_port) in [
            ("10.0.0.1", "10.0.0.2", "10.0.0.2:53"),
            ("fd00::1", "fd00::2", "[fd00::2]:53"),
        ] {
            let (mut a, mut b) = (stack(a_ip), stack(b_ip));
            let any = if a_ip.contains(':') {
                "[::]:0"
            } else {
                "0.0.0.0:0"
            };
            let server = b.udp_bind(addr(b_port)).unwrap();
            let client = a.udp_bind(addr(any)).unwrap();
            let port = a.udp_local_addr(client).unwrap().port();
            assert!((32768..=60999).contains(&port), "{port}");
            assert_eq!(a.udp_send_to(T, client, b"ping", addr(b_port)), Ok(4));
            assert_eq!(deliver(&mut a, &mut b), 1);
            assert_eq!(b.udp_readable(server), Ok(true));
            let d = b.udp_recv_from(server).unwrap();
            let from = SocketAddr::new(a_ip.parse().unwrap(), port);
            assert_eq!(
                (d.data.as_slice(), d.src, d.dst),
                (&b"ping"[..], from, addr(b_port))
            );
            assert_eq!(b.udp_recv_from(server), Err(SocketError::WouldBlock));
            b.udp_send_to(T, server, b"pong", d.src).unwrap();
            deliver(&mut b, &mut a);
            assert_eq!(a.udp_recv_from(client).unwrap().data, b"pong");
            let (inn, out) = match a_ip.contains(':') {
                false => (Mib::UdpInDatagrams, Mib::UdpOutDatagrams),
                true => (Mib::Udp6InDatagrams, Mib::Udp6OutDatagrams),
            };
            assert_eq!((b.counters().get(inn), b.counters().get(out)), (1, 1));
        }
    }

    #[test]
    fn ipv6_datagrams_carry_their_flows_labels() {
        use lowtide_wire::ip::ipv6_flowlabel;
        let mut a = stack("fd00::1");
        let s = a.udp_bind(addr("[fd00::1]:5000")).unwrap();
        let sent = |a: &mut Stack, to: &str| {
            a.udp_send_to(T, s, b"x", addr(to)).unwrap();
            ipv6_flowlabel(&a.poll_transmit(T).unwrap().packet)
        };
        // Unconnected: skb_get_hash_flowi6, one label per flow.
        let l1 = sent(&mut a, "[fd00::2]:53");
        assert_ne!(l1, 0);
        assert_eq!(sent(&mut a, "[fd00::2]:53"), l1, "one flow, one label");
        assert_ne!(sent(&mut a, "[fd00::2]:54"), l1, "another flow");
        assert_eq!(a.udp_autoflowlabel(s), Ok(true), "auto_flowlabels 1");
        a.udp_set_autoflowlabel(s, false).unwrap();
        assert_eq!(sent(&mut a, "[fd00::2]:53"), 0, "opted out");
        a.udp_set_autoflowlabel(s, true).unwrap();
        // Connected: the socket's sk_txhash, drawn at connect(2).
        a.udp_connect(s, addr("[fd00::2]:53")).unwrap();
        a.udp_send(T, s, b"y").unwrap();
        let l2 = ipv6_flowlabel(&a.poll_transmit(T).unwrap().packet);
        assert!(l2 != 0 && l2 != l1, "{l2:#x} {l1:#x}");
        let v4 = a.udp_bind(addr("0.0.0.0:0")).unwrap();
        assert_eq!(
            a.udp_set_autoflowlabel(v4, true),
            Err(SocketError::InvalidInput)
        );
    }

    #[test]
    fn a_connected_socket_takes_only_its_peer() {
        let (mut a, mut b) = (stack("10.0.0.1"), stack("10.0.0.2"));
        let any = b.udp_bind(addr("0.0.0.0:53")).unwrap();
        let conn = b.udp_bind(addr("10.0.0.2:54")).unwrap();
        b.udp_connect(conn, addr("10.0.0.1:1000")).unwrap();
        assert_eq!(b.udp_bind(addr("10.0.0.2:53")), Err(SocketError::AddrInUse));
        let c1 = a.udp_bind(addr("10.0.0.1:1000")).unwrap();
        let c2 = a.udp_bind(addr("10.0.0.1:1001")).unwrap();
        a.udp_send_to(T, c2, b"stranger", addr("10.0.0.2:54"))
            .unwrap();
        a.udp_send_to(T, c1, b"peer", addr("10.0.0.2:54")).unwrap();
        a.udp_send_to(T, c1, b"any", addr("10.0.0.2:53")).unwrap();
        deliver(&mut a, &mut b);
        assert_eq!(b.udp_recv_from(conn).unwrap().data, b"peer");
        assert_eq!(b.udp_recv_from(conn), Err(SocketError::WouldBlock));
        assert_eq!(b.udp_recv_from(any).unwrap().data, b"any");
        // The stranger's datagram found no socket: port unreachable back to it.
        assert_eq!(b.counters().get(Mib::UdpNoPorts), 1);
        assert_eq!(b.counters().get(Mib::IcmpOutDestUnreachs), 1);
        assert_eq!(b.udp_send(T, conn, b"x"), Ok(1));
        assert_eq!(b.udp_send(T, any, b"x"), Err(SocketError::NotConnected));
        // The port unreachable for the stranger: a's unconnected socket hears
        // nothing; a connected one gets ECONNREFUSED once, then its data.
        a.udp_connect(c2, addr("10.0.0.2:54")).unwrap();
        deliver(&mut b, &mut a);
        assert_eq!(a.counters().get(Mib::IcmpInDestUnreachs), 1);
        assert_eq!(a.udp_readable(c2), Ok(true));
        assert_eq!(a.udp_recv_from(c2), Err(SocketError::ConnectionRefused));
        assert_eq!(a.udp_recv_from(c2), Err(SocketError::WouldBlock));
        assert_eq!(a.udp_recv_from(c1).unwrap().data, b"x");
    }

    #[test]
    fn the_catch_all_keeps_the_original_destination() {
        let (mut a, mut b) = (stack("10.0.0.1"), stack("10.0.0.2"));
        let ca = b.udp_bind_catch_all().unwrap();
        assert_eq!(b.udp_bind_catch_all(), Err(SocketError::AddrInUse));
        let c = a.udp_bind(addr("10.0.0.1:5000")).unwrap();
        // Sent to an address b does not have: a's route sends it to b anyway.
        a.udp_send_to(T, c, b"q", addr("192.0.2.53:53")).unwrap();
        deliver(&mut a, &mut b);
        let d = b.udp_recv_from(ca).unwrap();
        assert_eq!(
            (d.src, d.dst),
            (addr("10.0.0.1:5000"), addr("192.0.2.53:53"))
        );
        b.udp_send_from(T, ca, b"r", d.dst, d.src).unwrap();
        deliver(&mut b, &mut a);
        let r = a.udp_recv_from(c).unwrap();
        assert_eq!(
            (r.data.as_slice(), r.src),
            (&b"r"[..], addr("192.0.2.53:53"))
        );
    }

    #[test]
    fn the_receive_buffer_bounds_the_queue() {
        let (mut a, mut b) = (stack("10.0.0.1"), stack("10.0.0.2"));
        let s = b.udp_bind(addr("10.0.0.2:9")).unwrap();
        let c = a.udp_bind(addr("0.0.0.0:0")).unwrap();
        for _ in 0..200 {
            a.udp_send_to(T, c, &[7; 1000], addr("10.0.0.2:9")).unwrap();
        }
        deliver(&mut a, &mut b);
        // 212,992 / (1000 + 640) = 129 datagrams fit.
        assert_eq!(b.counters().get(Mib::UdpInDatagrams), 129);
        assert_eq!(b.counters().get(Mib::UdpRcvbufErrors), 71);
        let mut n = 0;
        while b.udp_recv_from(s).is_ok() {
            n += 1;
        }
        assert_eq!(n, 129);
    }

    #[test]
    fn bad_datagrams_are_counted_and_sizes_checked() {
        let (mut a, mut b) = (stack("10.0.0.1"), stack("10.0.0.2"));
        let s = b.udp_bind(addr("10.0.0.2:9")).unwrap();
        let c = a.udp_bind(addr("0.0.0.0:0")).unwrap();
        // Over the MTU only IP_PMTUDISC_DO (and PROBE, INTERFACE) say EMSGSIZE;
        // the default WANT fragments (stack/ip_output.rs).
        a.udp_set_mtu_discover(c, crate::tcp::consts::IP_PMTUDISC_DO)
            .unwrap();
        assert_eq!(
            a.udp_send_to(T, c, &[0; 1473], addr("10.0.0.2:9")),
            Err(SocketError::MessageTooLong)
        );
        a.udp_send_to(T, c, &[0; 1472], addr("10.0.0.2:9")).unwrap();
        let mut p = a.poll_transmit(T).unwrap().packet;
        assert_eq!(p.len(), 1500);
        p[100] ^= 0xff;
        b.handle_packet(T, &p, RxChecksum::Verify);
        assert_eq!(b.counters().get(Mib::UdpInCsumErrors), 1);
        assert_eq!(b.udp_readable(s), Ok(false));
        // Every truncation is dropped without a panic.
        for n in 0..p.len() {
            b.handle_packet(T, &p[..n], RxChecksum::Unnecessary);
        }
        assert_eq!(b.udp_readable(s), Ok(false));
        assert_eq!(b.udp_close(s), Ok(()));
        assert_eq!(b.udp_readable(s), Err(SocketError::BadHandle));
        assert_eq!(
            b.udp_bind(SocketAddr::new(IpAddr::from([10, 0, 0, 9]), 1)),
            Err(SocketError::AddrNotAvailable)
        );
    }

    #[test]
    fn udp_segment_sends_one_gso_super_packet_of_datagrams() {
        for (a_ip, b_ip, dst) in [
            ("10.0.0.1", "10.0.0.2", "10.0.0.2:53"),
            ("fd00::1", "fd00::2", "[fd00::2]:53"),
        ] {
            let (mut a, mut b) = (stack(a_ip), stack(b_ip));
            let sa = a
                .udp_bind(addr(&format!(
                    "{}:0",
                    if a_ip.contains(':') {
                        format!("[{a_ip}]")
                    } else {
                        a_ip.into()
                    }
                )))
                .unwrap();
            let sb = b.udp_bind(addr(dst)).unwrap();
            a.udp_set_segment(sa, 1000).unwrap();
            assert_eq!(a.udp_segment(sa), Ok(1000));
            let data: Vec<u8> = (0..2500u32).map(|i| (i % 251) as u8).collect();
            assert_eq!(a.udp_send_to(T, sa, &data, addr(dst)), Ok(2500));
            let tx = a.poll_transmit(T).expect("one super-packet");
            assert!(a.poll_transmit(T).is_none());
            assert_eq!((tx.gso_size, tx.gso_segs), (1000, 3));
            assert_eq!(tx.segments().len(), 3);
            b.handle_transmit(T, &tx);
            let got: Vec<usize> = std::iter::from_fn(|| b.udp_recv_from(sb).ok())
                .map(|d| d.data.len())
                .collect();
            assert_eq!(got, [1000, 1000, 500]);
            // The device's datagrams verify on their own.
            for s in tx.segments() {
                b.handle_packet(T, &s, RxChecksum::Verify);
            }
            assert_eq!(std::iter::from_fn(|| b.udp_recv_from(sb).ok()).count(), 3);
            // No more than one datagram: a plain one.
            a.udp_send_to(T, sa, &data[..1000], addr(dst)).unwrap();
            let tx = a.poll_transmit(T).unwrap();
            assert_eq!((tx.gso_size, tx.gso_segs), (0, 1));
            // A segment over the MTU is EMSGSIZE, more than 128 segments EINVAL
            // (udp_send_skb); the 64 KB limit holds.
            a.udp_set_segment(sa, 1500).unwrap();
            assert_eq!(
                a.udp_send_to(T, sa, &data, addr(dst)),
                Err(SocketError::MessageTooLong)
            );
            a.udp_set_segment(sa, 100).unwrap();
            assert_eq!(a.udp_send_to(T, sa, &[0; 12_800], addr(dst)), Ok(12_800));
            assert_eq!(
                a.udp_send_to(T, sa, &[0; 12_801], addr(dst)),
                Err(SocketError::InvalidInput)
            );
            a.udp_set_segment(sa, 1000).unwrap();
            assert_eq!(
                a.udp_send_to(T, sa, &[0; 65_530], addr(dst)),
                Err(SocketError::MessageTooLong)
            );
            assert_eq!(
                b.counters().get(Mib::UdpInCsumErrors) + b.counters().get(Mib::Udp6InCsumErrors),
                0
            );
        }
    }
}
