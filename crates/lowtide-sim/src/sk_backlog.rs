//! The socket backlog of host A under the CPU model ([`crate::cpu`]), as Linux 6.18
//! keeps it: `tcp_add_backlog` (coalescing into the backlog's tail, its limit),
//! `sk_add_backlog` / `sk_rcvqueues_full` and `__release_sock`.
//!
//! The model has one CPU, and a socket is owned while that CPU processes one of
//! its packets or its backlog still holds some: the regime seed 003 describes
//! (process context in `__release_sock`, softirq adding behind it). A packet for a
//! socket that is not owned goes to the stack directly (`tcp_v4_do_rcv` in softirq),
//! waiting only for the CPU, outside the socket's backlog and its accounting.
//!
//! Linux's rules kept whole:
//! - a packet for an owned socket is first offered to the tail of that socket's
//!   backlog (`tcp_add_backlog`: same `end_seq`/`seq`, DS field, no SYN, RST or URG,
//!   ACK on both, the same ECE, CWR and AE, the same header length and option bytes;
//!   then `skb_try_coalesce`), even above the limit; a merge adds its truesize delta
//!   to `sk_backlog.len` and counts `TcpExtTCPBacklogCoalesce`;
//! - otherwise it is dropped (`TcpExtTCPBacklogDrop`) if `sk_backlog.len +
//!   sk_rmem_alloc` exceeds `(sk_rcvbuf << 1) + (sk_sndbuf >> 1) + 64 KB`, at most
//!   `UINT_MAX` ([`tcp_add_backlog_limit`]; the packet's own size is not counted);
//! - `sk_backlog.len` is reset only when the owner finds the backlog empty at the
//!   end of `__release_sock`, not as packets leave it, so a backlog that never drains
//!   keeps counting every packet that entered it;
//! - the owner takes the whole backlog at once (`sk_backlog.tail = NULL`): nothing
//!   coalesces into packets it has taken.
//!
//! Where the model's skb differs: a received packet is one linear buffer with no
//! tailroom (truesize: its length plus [`crate::cpu::CpuModel::backlog_overhead`]),
//! so a payload joins the tail as a stolen head (`skb_try_coalesce`: delta =
//! truesize less `SKB_DATA_ALIGN(sizeof(struct sk_buff))`, one more frag, at most
//! `MAX_SKB_FRAGS`) and a pure ACK (no payload) always fits (delta 0). A packet
//! whose checksum fails is not offered (Linux drops it in `tcp_add_backlog` and
//! counts `TcpInCsumErrors`; here the stack counts it when the CPU reaches it).

use lowtide_wire::checksum;
use lowtide_wire::ip::{IpRepr, PROTO_TCP};
use lowtide_wire::tcp::TcpFlags;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

/// `SKB_DATA_ALIGN(sizeof(struct sk_buff))` on x86_64 (`skb_try_coalesce`'s stolen
/// head frees only the `struct sk_buff`).
const SK_BUFF_SIZE: u64 = 256;
/// `MAX_SKB_FRAGS` (`CONFIG_MAX_SKB_FRAGS`' default).
const MAX_SKB_FRAGS: u32 = 17;

/// `tcp_add_backlog`'s limit: `(sk_rcvbuf << 1) + (sk_sndbuf >> 1) + 64 KB`, at most
/// `UINT_MAX`.
pub fn tcp_add_backlog_limit(rcvbuf: u32, sndbuf: u32) -> u64 {
    let limit = ((rcvbuf as u64) << 1) + (sndbuf >> 1) as u64 + 64 * 1024;
    limit.min(u32::MAX as u64)
}

/// A socket's receive budget as `tcp_add_backlog` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockLimit {
    /// [`tcp_add_backlog_limit`] of the socket.
    pub limit: u64,
    /// `sk_rmem_alloc`: bytes of truesize in its receive and out-of-order queues.
    pub rmem_alloc: u64,
}

/// What became of an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// Its socket was not owned: it waits only for the CPU (`tcp_v4_do_rcv`).
    Direct,
    /// Queued in its socket's backlog.
    Queued,
    /// Merged into the tail of its socket's backlog (`TcpExtTCPBacklogCoalesce`).
    Coalesced,
    /// Dropped: the backlog was full (`TcpExtTCPBacklogDrop`).
    Dropped,
}

/// A connection as the packets name it (source, destination).
type Key = (SocketAddr, SocketAddr);

/// A packet waiting for the CPU.
#[derive(Debug)]
pub(crate) struct Waiting {
    /// Arrival time (ns).
    pub arrived: u64,
    pub pkt: Vec<u8>,
    key: Option<Key>,
    /// In its socket's backlog (not [`Added::Direct`]).
    owned: bool,
    id: u64,
    /// Frags its payload came to by coalescing.
    nr_frags: u32,
}

/// `sk->sk_backlog` of one socket, plus when the CPU is done with its last packet.
#[derive(Debug, Default)]
struct SockBacklog {
    /// `sk_backlog.len` (bytes of truesize).
    len: u64,
    /// Its packets in the queue.
    queued: u32,
    /// `sk_backlog.tail`: the last packet the owner has not taken.
    tail: Option<u64>,
    /// The last packet of the batch the owner took.
    taken_until: Option<u64>,
    /// The CPU processes one of its packets until then (ns).
    busy_until: u64,
}

/// The packets waiting for host A's CPU, in arrival order, with their sockets'
/// backlogs.
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    q: VecDeque<Waiting>,
    /// The id of `q`'s front.
    front_id: u64,
    socks: FxHashMap<Key, SockBacklog>,
    /// Truesize of a packet beyond its length.
    overhead: u64,
}

impl Backlog {
    /// An empty backlog whose packets weigh their length plus `overhead`.
    pub fn new(overhead: u64) -> Backlog {
        Backlog {
            overhead,
            ..Backlog::default()
        }
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// The arrival time of the oldest packet waiting.
    pub fn oldest(&self) -> Option<u64> {
        self.q.front().map(|w| w.arrived)
    }

    /// The arrival time of the oldest packet waiting for the local port `port` (its
    /// destination), if any.
    pub fn oldest_to_port(&self, port: u16) -> Option<u64> {
        (self.q.iter())
            .find(|w| w.key.is_some_and(|(_, dst)| dst.port() == port))
            .map(|w| w.arrived)
    }

    /// `sk_backlog.len` of the connection `pkt` belongs to (0 if unknown).
    #[cfg(test)]
    fn sock_len(&self, pkt: &[u8]) -> u64 {
        key(pkt)
            .and_then(|k| self.socks.get(&k))
            .map_or(0, |s| s.len)
    }

    /// Takes an arrived packet at `now`; `verify` says its TCP checksum is to be
    /// checked before it may coalesce, `limit` gives its socket's budget (`None`: no
    /// socket of the model's, nothing limits it).
    pub fn add(
        &mut self,
        now: u64,
        pkt: Vec<u8>,
        verify: bool,
        limit: impl FnOnce() -> Option<SockLimit>,
    ) -> Added {
        let key = key(&pkt);
        let Some(s) = key.map(|k| self.socks.entry(k).or_default()) else {
            self.push(now, pkt, None, false);
            return Added::Direct;
        };
        if s.queued == 0 && s.busy_until <= now {
            // Not owned: __release_sock has ended, and with it sk_backlog.len.
            s.len = 0;
            s.tail = None;
            self.push(now, pkt, key, false);
            return Added::Direct;
        }
        if verify && !csum_ok(&pkt) {
            self.push(now, pkt, key, false);
            return Added::Direct;
        }
        if let Some(t) = s.tail {
            let w = &mut self.q[(t - self.front_id) as usize];
            if let Some(delta) = try_coalesce(w, &pkt, self.overhead) {
                s.len += delta;
                return Added::Coalesced;
            }
        }
        if limit().is_some_and(|l| s.len + l.rmem_alloc > l.limit) {
            return Added::Dropped;
        }
        s.len += pkt.len() as u64 + self.overhead;
        s.queued += 1;
        s.tail = Some(self.front_id + self.q.len() as u64);
        self.push(now, pkt, key, true);
        Added::Queued
    }

    fn push(&mut self, now: u64, pkt: Vec<u8>, key: Option<Key>, owned: bool) {
        let id = self.front_id + self.q.len() as u64;
        self.q.push_back(Waiting {
            arrived: now,
            pkt,
            key,
            owned,
            id,
            nr_frags: 0,
        });
    }

    /// The next packet for the CPU; its socket is owned until `processed`.
    pub fn pop(&mut self) -> Option<Waiting> {
        let w = self.q.pop_front()?;
        self.front_id += 1;
        if let (true, Some(s)) = (w.owned, w.key.and_then(|k| self.socks.get_mut(&k))) {
            s.queued -= 1;
            if s.taken_until.is_none_or(|t| w.id > t) {
                // __release_sock takes the whole backlog: head = tail = NULL.
                s.taken_until = s.tail.take();
            }
        }
        Some(w)
    }

    /// The CPU works on `w`'s packet until `until` (ns).
    pub fn processed(&mut self, w: &Waiting, until: u64) {
        if let Some(s) = w.key.and_then(|k| self.socks.get_mut(&k)) {
            s.busy_until = s.busy_until.max(until);
        }
    }
}

/// The connection of a TCP packet.
fn key(pkt: &[u8]) -> Option<Key> {
    lowtide_wire::tcp::four_tuple(pkt).ok()
}

fn csum_ok(pkt: &[u8]) -> bool {
    let Ok(ip) = IpRepr::parse(pkt, true) else {
        return false;
    };
    match pkt.get(ip.header_len..ip.header_len + ip.payload_len) {
        Some(seg) if ip.protocol == PROTO_TCP => checksum::verify_tcp(ip.src, ip.dst, seg),
        _ => false,
    }
}

/// What `tcp_add_backlog` reads of a packet.
struct Seg {
    ip: IpRepr,
    /// Offset of the TCP header.
    th: usize,
    /// TCP header length (`doff * 4`).
    hdrlen: usize,
    seq: u32,
    ack: u32,
    flags: u16,
    /// Payload bytes.
    len: usize,
    /// `gso_size` as lowtide's GRO encodes it (the urgent pointer of a packet without
    /// URG whose payload is longer), else the payload length.
    gso_size: usize,
}

impl Seg {
    fn parse(pkt: &[u8]) -> Option<Seg> {
        let ip = IpRepr::parse(pkt, false).ok()?;
        let th = ip.header_len;
        let tcp = pkt.get(th..th + ip.payload_len)?;
        let hdrlen = (*tcp.get(12)? >> 4) as usize * 4;
        if ip.protocol != PROTO_TCP || hdrlen < 20 || hdrlen > tcp.len() {
            return None;
        }
        let be32 = |i: usize| u32::from_be_bytes([tcp[i], tcp[i + 1], tcp[i + 2], tcp[i + 3]]);
        let flags = u16::from_be_bytes([tcp[12] & 0x01, tcp[13]]);
        let len = tcp.len() - hdrlen;
        let urgent = u16::from_be_bytes([tcp[18], tcp[19]]) as usize;
        let gso_size = match flags & TcpFlags::URG.0 == 0 && urgent != 0 && urgent < len {
            true => urgent,
            false => len,
        };
        Some(Seg {
            ip,
            th,
            hdrlen,
            seq: be32(4),
            ack: be32(8),
            flags,
            len,
            gso_size,
        })
    }

    /// `TCP_SKB_CB(skb)->end_seq`.
    fn end_seq(&self) -> u32 {
        let syn_fin = (self.flags & (TcpFlags::SYN.0 | TcpFlags::FIN.0)).count_ones();
        self.seq.wrapping_add(self.len as u32).wrapping_add(syn_fin)
    }

    /// `ip_dsfield`: the whole TOS / traffic class byte.
    fn dsfield(&self) -> u8 {
        self.ip.tos | self.ip.ecn
    }
}

/// `tcp_add_backlog`'s test and `skb_try_coalesce` of `pkt` into the waiting `tail`:
/// the truesize it adds, or `None` if it does not coalesce.
fn try_coalesce(tail: &mut Waiting, pkt: &[u8], overhead: u64) -> Option<u64> {
    let (t, s) = (Seg::parse(&tail.pkt)?, Seg::parse(pkt)?);
    let (syn_rst_urg, ece_cwr_ae) = (
        TcpFlags::SYN.0 | TcpFlags::RST.0 | TcpFlags::URG.0,
        TcpFlags::ECE.0 | TcpFlags::CWR.0 | TcpFlags::AE.0,
    );
    if t.end_seq() != s.seq
        || t.dsfield() != s.dsfield()
        || (t.flags | s.flags) & syn_rst_urg != 0
        || t.flags & s.flags & TcpFlags::ACK.0 == 0
        || (t.flags ^ s.flags) & ece_cwr_ae != 0
        || t.hdrlen != s.hdrlen
        || tail.pkt[t.th + 20..t.th + t.hdrlen] != pkt[s.th + 20..s.th + s.hdrlen]
    {
        return None;
    }
    // The model's packet cannot carry a FIN before payload (Linux's merged skb can).
    if s.len > 0 && t.flags & TcpFlags::FIN.0 != 0 {
        return None;
    }
    if t.ip.header_len + t.hdrlen + t.len + s.len > u16::MAX as usize {
        return None; // more than one IP packet of the model holds
    }
    // skb_try_coalesce: no payload fits any tailroom; a payload steals its head.
    let delta = match s.len {
        0 => 0,
        _ if tail.nr_frags >= MAX_SKB_FRAGS => return None,
        _ => (pkt.len() as u64 + overhead).saturating_sub(SK_BUFF_SIZE),
    };
    if s.len > 0 {
        tail.nr_frags += 1;
    }
    merge(&mut tail.pkt, &t, pkt, &s);
    Some(delta)
}

/// Appends `s`'s payload to `tail` and updates its headers as `tcp_add_backlog` does.
fn merge(tail: &mut Vec<u8>, t: &Seg, pkt: &[u8], s: &Seg) {
    let end = t.th + t.hdrlen + t.len;
    tail.truncate(end);
    tail.extend_from_slice(&pkt[s.th + s.hdrlen..s.th + s.hdrlen + s.len]);
    let th = t.th;
    // ack_seq and window only from a newer ACK (!before(skb's ack, tail's ack)).
    if (s.ack.wrapping_sub(t.ack) as i32) >= 0 {
        tail[th + 8..th + 12].copy_from_slice(&s.ack.to_be_bytes());
        tail[th + 14..th + 16].copy_from_slice(&pkt[s.th + 14..s.th + 16]);
    }
    // tcp_flags |= skb's (fin among them); SYN, RST, URG are in neither.
    tail[th + 13] |= (s.flags & 0xff) as u8;
    // gso_size = max of both: the urgent pointer as lowtide's GRO writes it.
    let gso = s.gso_size.max(t.gso_size);
    let payload = t.len + s.len;
    let urgent = if gso > 0 && gso < payload {
        gso as u16
    } else {
        0
    };
    tail[th + 18..th + 20].copy_from_slice(&urgent.to_be_bytes());
    set_ip_length(tail, &t.ip, t.hdrlen + payload);
    checksum::fill_tcp(t.ip.src, t.ip.dst, &mut tail[th..]);
}

/// Rewrites the IP header's length for `tcp_len` bytes of TCP (and an IPv4 header's
/// checksum); IPv6 extension headers are not in the model's packets.
fn set_ip_length(pkt: &mut [u8], ip: &IpRepr, tcp_len: usize) {
    match ip.src {
        IpAddr::V4(_) => {
            let total = (ip.header_len + tcp_len) as u16;
            pkt[2..4].copy_from_slice(&total.to_be_bytes());
            lowtide_wire::ip::fill_ipv4_checksum(&mut pkt[..ip.header_len]);
        }
        IpAddr::V6(_) => {
            let len = (ip.header_len - 40 + tcp_len) as u16;
            pkt[4..6].copy_from_slice(&len.to_be_bytes());
        }
    }
}

#[cfg(test)]
#[path = "sk_backlog_tests.rs"]
mod tests;
