//! Linux's queueing disciplines (net/sched/), for a device's transmit queue in the
//! simulator: [`fifo`] (pfifo, bfifo, and pfifo_fast as it treats TCP),
//! [`codel`], [`fq_codel`], [`fq`], [`red`], [`tbf`] and [`htb`].
//!
//! Each implements [`Qdisc`]: `enqueue` with the time and the packet's flow
//! identity ([`Skb`]: its socket, its flow hash, its earliest departure time),
//! `dequeue` with the time, [`Qdisc::next_ready`] for a queue that holds packets
//! back (fq's pacing, as its `qdisc_watchdog`), and [`QdiscStats`]. A packet the
//! qdisc drops, the one being enqueued or one already queued (CoDel's head drops,
//! fq_codel's batch drops), is handed to the caller in `dropped`, to be freed
//! (TX completion) as `kfree_skb` runs the socket's destructor.
//!
//! Times are nanoseconds (`ktime_get_ns`). Parameter names and defaults are
//! Linux's (`tc qdisc add ... NAME` with no options); [`QdiscSpec`] parses
//! `NAME[,PARAM=VALUE]...` as the simulator's `--qdisc` takes it.
//!
//! `lowtide-tun` already depends on this crate, so `lowtide link` can take these
//! queues without a crate of their own.

pub mod codel;
pub mod fifo;
pub mod fq;
pub mod fq_codel;
pub mod htb;
pub mod red;
mod spec;
pub mod tbf;

use lowtide::Transmit;
pub use spec::{HostAddr, QdiscSpec};

/// What a queue holds: anything with an IP length and an ECN field.
pub trait QueueItem {
    /// Bytes of the IP packet (a GSO packet counts its whole length).
    fn ip_len(&self) -> usize;
    /// Marks Congestion Experienced if the packet is ECN-capable
    /// ([`lowtide_wire::ip::mark_ce`]); false if it is not (or not an IP packet).
    fn mark_ce(&mut self) -> bool;
    /// The two ECN bits of the IP header (0 if it is not an IP packet).
    fn ecn(&self) -> u8;
    /// The bytes from the IP header on, at least the IP header (for classifiers
    /// that match addresses, as htb's filters); empty if there is none.
    fn ip_head(&self) -> &[u8] {
        &[]
    }
    /// Memory the packet takes (`skb->truesize`), for fq_codel's `memory_limit`;
    /// by default its IP length (the engine keeps its skbs' truesize to itself).
    fn truesize(&self) -> usize {
        self.ip_len()
    }
}

/// The ECN bits of an IPv4 or IPv6 header.
fn ecn_of(packet: &[u8]) -> u8 {
    match (packet.first().map(|b| b >> 4), packet.get(1)) {
        (Some(4), Some(b)) => b & 3,
        (Some(6), Some(b)) => (b >> 4) & 3,
        _ => 0,
    }
}

impl QueueItem for Transmit {
    fn ip_len(&self) -> usize {
        self.len()
    }
    fn mark_ce(&mut self) -> bool {
        lowtide_wire::ip::mark_ce(&mut self.packet)
    }
    fn ecn(&self) -> u8 {
        ecn_of(&self.packet)
    }
    fn ip_head(&self) -> &[u8] {
        &self.packet
    }
}

impl QueueItem for Vec<u8> {
    fn ip_len(&self) -> usize {
        self.len()
    }
    fn mark_ce(&mut self) -> bool {
        lowtide_wire::ip::mark_ce(self)
    }
    fn ecn(&self) -> u8 {
        ecn_of(self)
    }
    fn ip_head(&self) -> &[u8] {
        self
    }
}

/// A segment forwarded by a router: its headers are in `head`.
impl QueueItem for lowtide_link::WireSeg {
    fn ip_len(&self) -> usize {
        self.len()
    }
    fn mark_ce(&mut self) -> bool {
        lowtide_wire::ip::mark_ce(&mut self.head)
    }
    fn ecn(&self) -> u8 {
        ecn_of(&self.head)
    }
    fn ip_head(&self) -> &[u8] {
        &self.head
    }
}

/// `INET_ECN_set_ce`: true if the packet now carries CE (it was ECT and got it, or
/// already had it), false for a packet that is not ECN-capable.
pub fn inet_ecn_set_ce<T: QueueItem>(item: &mut T) -> bool {
    item.ecn() == 3 || item.mark_ce()
}

/// A packet in a qdisc: the `sk_buff` fields and control block the disciplines
/// read.
#[derive(Debug, Clone)]
pub struct Skb<T> {
    /// The packet.
    pub item: T,
    /// `qdisc_pkt_len` (IP bytes; a GSO packet counts whole).
    pub len: u32,
    /// `skb->truesize`.
    pub truesize: u32,
    /// The sending socket (`skb->sk`), as an id; `None` for a packet no full socket
    /// owns (a listener's SYN-ACK, a reset for no connection): fq files it under
    /// its flow hash as an orphan.
    pub sk: Option<u64>,
    /// `skb_get_hash`: the flow hash of its addresses and ports.
    pub hash: u32,
    /// `skb->tstamp`: the earliest departure time the sender set (EDT, ns); 0 for
    /// none.
    pub tstamp: u64,
    /// The socket's `sk_pacing_rate` (bytes/s; `u64::MAX`: unlimited), which fq
    /// applies to packets without a departure time.
    pub pacing_rate: u64,
    /// When it was enqueued (ns; `codel_set_enqueue_time`, set by the caller).
    pub enqueued_at: u64,
    /// The sending socket's `sk_hash` (fq starts a flow afresh when a socket id
    /// comes back with another).
    pub sk_hash: u32,
    /// The socket is not connected (`TCP_CLOSE`, as a UDP socket using sendto):
    /// fq files its packets under their flow hash, though they keep its rate.
    pub sk_unconnected: bool,
    /// `skb->priority` (`TC_PRIO_*`; TCP's default 0), which picks fq's band.
    pub priority: u32,
    /// The caller's own label (the simulator's flow number, for its figures).
    pub tag: u32,
    /// The caller's sequence number (to tell packets apart among the dropped).
    pub seq: u64,
}

impl<T: QueueItem> Skb<T> {
    /// A packet with no flow identity (hash 0, no socket, no departure time).
    pub fn new(item: T, now: u64) -> Skb<T> {
        Skb {
            len: item.ip_len().min(u32::MAX as usize) as u32,
            truesize: item.truesize().min(u32::MAX as usize) as u32,
            item,
            sk: None,
            hash: 0,
            tstamp: 0,
            pacing_rate: u64::MAX,
            sk_hash: 0,
            sk_unconnected: false,
            priority: 0,
            enqueued_at: now,
            tag: u32::MAX,
            seq: 0,
        }
    }
}

/// What `enqueue` returns (`NET_XMIT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetXmit {
    /// `NET_XMIT_SUCCESS`: queued.
    Success,
    /// `NET_XMIT_DROP`: this packet was dropped (it is the last one pushed to
    /// `dropped`); the sender's `tcp_transmit_skb` sees an error and keeps it unsent.
    Drop,
    /// `NET_XMIT_CN`: congestion notified; the queue dropped packets of this flow
    /// (RED's early drop of this one, or fq_codel's batch from this fat flow).
    /// `net_xmit_eval` counts it as sent.
    Cn,
}

/// Counters every qdisc keeps (`tc -s qdisc`: backlog, drops, overlimits; and the
/// CE marks of its xstats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QdiscStats {
    /// Packets queued (`sch->q.qlen`).
    pub qlen: u32,
    /// Bytes queued (`sch->qstats.backlog`).
    pub backlog: u64,
    /// Packets dropped, by any rule (`qstats.drops`).
    pub drops: u64,
    /// Packets the discipline found over a limit (`qstats.overlimits`).
    pub overlimits: u64,
    /// Packets marked CE instead of dropped (CoDel's `ecn_mark` plus `ce_mark`,
    /// fq's `ce_mark`, RED's `prob_mark + forced_mark`, a fifo's step marks).
    pub ce_marks: u64,
}

/// A queueing discipline (`struct Qdisc_ops`).
pub trait Qdisc<T: QueueItem> {
    /// Its `tc` name (`pfifo`, `fq_codel`, ...).
    fn kind(&self) -> &'static str;
    /// Takes `skb` at `now` (ns). Packets it drops go to `dropped` (see
    /// [`NetXmit::Drop`] for the arriving one).
    fn enqueue(&mut self, now: u64, skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> NetXmit;
    /// The next packet to send at `now`, if one may go; packets dropped on the way
    /// (CoDel) go to `dropped`.
    fn dequeue(&mut self, now: u64, dropped: &mut Vec<Skb<T>>) -> Option<Skb<T>>;
    /// When a queue that gave nothing at `now` although it holds packets can give
    /// one (`qdisc_watchdog_schedule_ns`), if it holds packets back.
    fn next_ready(&self) -> Option<u64> {
        None
    }
    /// Its counters.
    fn stats(&self) -> QdiscStats;
    /// Whether it sorts packets by their socket or flow hash ([`Skb::sk`],
    /// [`Skb::hash`]); the others need not be computed for it.
    fn classifies(&self) -> bool {
        false
    }
    /// Its own counters by Linux's xstats names (`tc -s qdisc`).
    fn xstats(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// `psched_mtu` of an Ethernet device with a 1500-byte MTU: MTU plus the 14-byte
/// link header.
pub const PSCHED_MTU: u32 = 1514;

/// Builds the qdisc `spec` names for a device whose `txqueuelen` is `txqueuelen`
/// and whose MTU is `mtu`; `seed` seeds the qdiscs that draw random numbers (RED)
/// and perturb hashes.
pub fn build<T: QueueItem + 'static>(
    spec: &QdiscSpec,
    txqueuelen: u32,
    mtu: u32,
    seed: u64,
) -> Box<dyn Qdisc<T>> {
    spec.build(txqueuelen, mtu + 14, seed)
}

/// The TCP flags of an IPv4 or IPv6 packet's headers.
pub fn tcp_flags(pkt: &[u8]) -> Option<u8> {
    let hlen = match pkt.first()? >> 4 {
        4 => (pkt[0] & 0xf) as usize * 4,
        6 => 40,
        _ => return None,
    };
    pkt.get(hlen + 13).copied()
}

/// Takes the head of the list (new or old flows) a flow was served from.
pub(crate) fn pop_head(
    new_flows: &mut std::collections::VecDeque<u32>,
    old_flows: &mut std::collections::VecDeque<u32>,
    from_new: bool,
) {
    match from_new {
        true => new_flows.pop_front(),
        false => old_flows.pop_front(),
    };
}

/// Packets for the disciplines' tests.
#[cfg(test)]
pub(crate) mod test_pkt {
    use super::Skb;

    /// An IPv4 packet of `len` bytes with ECN field `ecn`, flow hash `hash`, socket
    /// `sk`.
    pub fn pkt(len: usize, ecn: u8, hash: u32, sk: Option<u64>) -> Skb<Vec<u8>> {
        let mut p = vec![0u8; len.max(20)];
        p[0] = 0x45;
        p[1] = ecn;
        let mut s = Skb::new(p, 0);
        s.hash = hash;
        s.sk = sk;
        s
    }

    /// [`pkt`] enqueued at `at` (ns).
    pub fn pkt_at(len: usize, ecn: u8, hash: u32, at: u64) -> Skb<Vec<u8>> {
        let mut s = pkt(len, ecn, hash, None);
        s.enqueued_at = at;
        s
    }
}
