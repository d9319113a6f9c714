//! A link direction and the qdisc in front of it, and a router's forwarding step:
//! what the simulator's network ([`super::engine`]) and the real-time fabric
//! ([`super::fabric`], `lowtide net run`) both run, so that the two have the same
//! queues and links from the same code.

use super::topology::Topology;
use crate::device::flow_hash;
use crate::nic::NicQueue;
use crate::qdisc::Skb;
use crate::world::derive_seed;
use lowtide::Instant;
use lowtide_link::{LinkDir, Pipe, WireSeg};
use lowtide_wire::tcp::four_tuple_apart;
use rustc_hash::FxHashMap;
use std::net::{IpAddr, Ipv4Addr};

/// A link direction and, where the port's segments are queued here, the qdisc in
/// front of it (a simulated host's is its NIC's, so it has none).
pub(crate) struct Port {
    pub dir: LinkDir,
    pub pipe: Pipe,
    pub src: usize,
    pub dst: usize,
    pub queue: Option<NicQueue<WireSeg>>,
    pub busy: bool,
    pub wake_at: Option<Instant>,
    hash_seed: u64,
    /// Each CE mark the qdisc made, when asked for (`sim run --timeseries`).
    pub marks: Option<Vec<PortMark>>,
}

/// A CE mark a port's qdisc made, with what it held when the marked packet arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PortMark {
    /// Virtual time (ns).
    pub time_ns: u64,
    /// Packets queued.
    pub packets: u64,
    /// Bytes queued.
    pub bytes: u64,
    /// The marked packet's flow ([`crate::nic::NO_FLOW`] if none).
    pub flow: u32,
    /// Bytes of that flow's own packets among them.
    pub flow_bytes: u64,
}

impl Port {
    /// Port `i` of `t`, with its qdisc if `queued` (with the file's `txqueuelen`
    /// of its source node).
    pub fn new(t: &Topology, i: usize, queued: bool) -> Port {
        let p = &t.ports[i];
        Port {
            dir: LinkDir::new(p.link.clone(), derive_seed(t.seed, 1001 + i as u64)),
            pipe: Pipe::for_config(&p.link),
            src: p.src,
            dst: p.dst,
            queue: queued.then(|| {
                let txq = t.nodes[p.src].txqueuelen;
                let seed = derive_seed(t.seed, 2001 + i as u64);
                NicQueue::with_qdisc(p.queue.build(txq, crate::qdisc::PSCHED_MTU, seed))
            }),
            busy: false,
            wake_at: None,
            hash_seed: derive_seed(t.seed, 3001 + i as u64),
            marks: None,
        }
    }

    /// The seed of this port's flow hash (`skb_get_hash`'s key).
    pub fn hash_seed(&self) -> u64 {
        self.hash_seed
    }

    /// Queues a segment that has no socket here (forwarded, or from a host outside
    /// the simulator): classified by its flow hash, `skb->tstamp` cleared
    /// (`skb_clear_tstamp`). A qdisc drop frees it. `flow` tags it for the
    /// queue's per-flow bytes ([`crate::nic::NO_FLOW`]: none).
    pub fn enqueue(&mut self, now: Instant, seg: WireSeg, flow: u32) {
        let Some(q) = self.queue.as_mut() else { return };
        let mut skb = Skb::new(seg, now.as_nanos());
        skb.tag = flow;
        if q.classifies() {
            let tuple = four_tuple_apart(&skb.item.head, skb.item.body.len()).ok();
            skb.hash = flow_hash(tuple, self.hash_seed);
        }
        let before = self
            .marks
            .is_some()
            .then(|| (q.totals(), q.flow_bytes(flow)));
        let _ = q.enqueue_skb(now, skb);
        q.take_freed().for_each(drop);
        if let (Some((b, flow_bytes)), Some(marks)) = (before, self.marks.as_mut()) {
            if q.totals().ce_marks > b.ce_marks {
                marks.push(PortMark {
                    time_ns: now.as_nanos(),
                    packets: b.packets,
                    bytes: b.bytes,
                    flow,
                    flow_bytes,
                });
            }
        }
    }

    /// The transmitter takes the qdisc's next packet onto the link: `Ok(end)`, when
    /// its serialization ends (it arrives in [`Port::pipe`] after the delay), or
    /// `Err(wake)` if nothing is sent now, with when a qdisc that holds packets back
    /// can give one.
    pub fn transmit(&mut self, now: Instant) -> Result<u64, Option<Instant>> {
        let Some(q) = self.queue.as_mut() else {
            return Err(None);
        };
        let seg = q.dequeue(now);
        q.take_freed().for_each(drop);
        let Some(seg) = seg else {
            return Err(q.next_ready().filter(|&t| t > now));
        };
        let (_, end) = self.dir.serialize(now.as_nanos(), seg.len());
        let pipe = &mut self.pipe;
        self.dir.propagate(end, seg, |at, s| pipe.push(at, s));
        self.busy = true;
        Ok(end)
    }
}

/// `ip_forward`'s first steps at `node`: the port towards the segment's
/// destination host, and `ip_decrease_ttl`; `None` (the segment is dropped) for an
/// unknown destination, no route, or an expired TTL.
pub(crate) fn route(
    t: &Topology,
    host_of: &FxHashMap<IpAddr, usize>,
    node: usize,
    seg: &mut WireSeg,
) -> Option<usize> {
    let port = ipv4_dst(&seg.head)
        .and_then(|d| host_of.get(&IpAddr::V4(d)))
        .and_then(|&h| t.next_hop[node][h]);
    port.filter(|_| decrease_ttl(&mut seg.head))
}

/// The destination of an IPv4 packet's header.
pub(crate) fn ipv4_dst(head: &[u8]) -> Option<Ipv4Addr> {
    let b: [u8; 4] = head.get(16..20)?.try_into().ok()?;
    (head[0] >> 4 == 4).then_some(Ipv4Addr::from(b))
}

/// `ip_decrease_ttl`: false if the TTL ran out (the packet is dropped), else the TTL
/// one less and the header checksum updated.
fn decrease_ttl(head: &mut [u8]) -> bool {
    let ihl = head.first().map_or(0, |b| (b & 0xf) as usize * 4);
    if ihl < 20 || head.len() < ihl || head[8] <= 1 {
        return false;
    }
    head[8] -= 1;
    lowtide_wire::ip::fill_ipv4_checksum(&mut head[..ihl]);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_decreases_with_a_valid_checksum_and_runs_out() {
        let mut h = vec![
            0x45, 0, 0, 40, 0, 0, 0, 0, 2, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        lowtide_wire::ip::fill_ipv4_checksum(&mut h);
        assert_eq!(ipv4_dst(&h), Some(Ipv4Addr::new(10, 0, 0, 2)));
        assert!(decrease_ttl(&mut h));
        assert_eq!(h[8], 1);
        let mut again = h.clone();
        lowtide_wire::ip::fill_ipv4_checksum(&mut again);
        assert_eq!(h, again, "the checksum is the header's");
        assert!(!decrease_ttl(&mut h), "TTL 1 cannot be forwarded");
        assert!(!decrease_ttl(&mut [0x45, 0]));
        assert_eq!(ipv4_dst(&[0x60; 40]), None);
    }
}
