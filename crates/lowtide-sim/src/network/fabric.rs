//! A scenario's routers, links and queues for hosts outside the simulator: the
//! same ports (qdisc, serializer, propagation, impairments) and the same
//! forwarding as the simulator's engine ([`super::run`]), driven by the caller's
//! clock, which hands in the packets its hosts send and takes those that reach
//! them. `lowtide net run` drives it in real time between TUN devices, one per
//! host, in network namespaces, so that the kernel's own TCP runs through the
//! scenario's network.
//!
//! Every port has its qdisc here, a host's egress too: a host outside the
//! simulator hands its packets over at once (a TUN device has no line rate), and
//! its queue is the one the file gives its link, with the host's `txqueuelen`.
//!
//! ```
//! use lowtide_sim::network::{fabric::Fabric, ScenarioFile, Topology};
//! let text = r#"
//!     [run]
//!     duration = "1s"
//!     [hosts.a]
//!     [hosts.b]
//!     [routers.r]
//!     [links.up]
//!     between = ["a", "r"]
//!     [links.down]
//!     between = ["r", "b"]
//!     delay = "5ms"
//!     [flows.f]
//!     from = "a"
//!     to = "b"
//! "#;
//! let t = Topology::new(&ScenarioFile::parse(text, false, &[]).unwrap()).unwrap();
//! let mut fabric = Fabric::new(&t);
//! // An IPv4 header from a (10.0.0.1) to b (10.0.0.2), TTL 64.
//! let mut p = vec![0x45, 0, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
//! lowtide_wire::ip::fill_ipv4_checksum(&mut p);
//! fabric.send(0, 0, p);
//! let mut got = Vec::new();
//! fabric.advance(10_000_000, |host, pkt| got.push((host, pkt[8])));
//! assert_eq!(got, [(1, 63)], "b got it, one router on the way");
//! ```

use super::port::{route, Port};
use super::report::{queue_report, FlowReport, QueueReport};
use super::series::{QueueSeries, Sampler};
use super::topology::{NodeKind, Topology};
use crate::nic::NO_FLOW;
use lowtide::Instant;
use lowtide_link::WireSeg;
use rustc_hash::FxHashMap;
use std::net::IpAddr;

/// What is due next on a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    /// Its transmitter finished a packet.
    TxDone,
    /// Its qdisc may release a packet it held back.
    Wake,
    /// A segment reaches the far end.
    Arrival,
}

/// The network between the hosts of a [`Topology`].
pub struct Fabric<'t> {
    topo: &'t Topology,
    ports: Vec<Port>,
    /// When each port's transmitter finishes its packet (ns).
    busy_until: Vec<Option<u64>>,
    host_of: FxHashMap<IpAddr, usize>,
    /// Each host's egress port.
    egress: Vec<usize>,
    hosts: usize,
    sampler: Sampler,
    /// Segments routers dropped (TTL expired, no route) or hosts sent to nowhere.
    pub router_drops: u64,
    /// Wire segments delivered to hosts.
    pub delivered: u64,
}

impl<'t> Fabric<'t> {
    /// The network of `t`, empty, its clock at 0.
    pub fn new(t: &'t Topology) -> Fabric<'t> {
        let mut host_of = FxHashMap::default();
        let mut egress = Vec::new();
        for (i, n) in t.nodes.iter().enumerate() {
            if let NodeKind::Host { addr, .. } = &n.kind {
                host_of.insert(*addr, i);
                egress.push(t.ports.iter().position(|p| p.src == i).unwrap_or(0));
            }
        }
        Fabric {
            topo: t,
            ports: (0..t.ports.len()).map(|i| Port::new(t, i, true)).collect(),
            busy_until: vec![None; t.ports.len()],
            hosts: egress.len(),
            egress,
            host_of,
            sampler: Sampler::new(t),
            router_drops: 0,
            delivered: 0,
        }
    }

    /// Host `host` sends `packet` (an IP packet, checksums complete) at `now` (ns,
    /// not before the last [`Fabric::advance`]): onto its link's queue.
    pub fn send(&mut self, now: u64, host: usize, packet: Vec<u8>) {
        let Some(&p) = self.egress.get(host) else {
            return;
        };
        self.ports[p].enqueue(Instant(now), WireSeg::whole(packet), NO_FLOW);
        if !self.ports[p].busy {
            self.try_tx(p, now);
        }
    }

    /// Runs the network up to `now` (ns): transmissions, forwarding and arrivals in
    /// time order; each packet that reaches a host is handed to `deliver` with the
    /// host's index.
    pub fn advance(&mut self, now: u64, mut deliver: impl FnMut(usize, Vec<u8>)) {
        while let Some((at, due, p)) = self.next_due().filter(|d| d.0 <= now) {
            let ports = &self.ports;
            self.sampler.until(at, |p| totals(ports, p), |_| (0, None));
            match due {
                Due::TxDone => {
                    self.busy_until[p] = None;
                    self.ports[p].busy = false;
                    self.try_tx(p, at);
                }
                Due::Wake => {
                    self.ports[p].wake_at = None;
                    if !self.ports[p].busy {
                        self.try_tx(p, at);
                    }
                }
                Due::Arrival => {
                    let Some(mut seg) = self.ports[p].pipe.pop_arrived(at) else {
                        continue;
                    };
                    let node = self.ports[p].dst;
                    if node < self.hosts {
                        self.delivered += 1;
                        deliver(node, seg.flatten());
                        continue;
                    }
                    let Some(q) = route(self.topo, &self.host_of, node, &mut seg) else {
                        self.router_drops += 1;
                        continue;
                    };
                    self.ports[q].enqueue(Instant(at), seg, NO_FLOW);
                    if !self.ports[q].busy {
                        self.try_tx(q, at);
                    }
                }
            }
        }
        let ports = &self.ports;
        self.sampler.until(now, |p| totals(ports, p), |_| (0, None));
    }

    /// When something is next due (ns), if anything is.
    pub fn next_event(&self) -> Option<u64> {
        self.next_due().map(|d| d.0)
    }

    /// The earliest (time, what, port) due.
    fn next_due(&self) -> Option<(u64, Due, usize)> {
        let mut best: Option<(u64, Due, usize)> = None;
        for (p, port) in self.ports.iter().enumerate() {
            let cands = [
                self.busy_until[p].map(|t| (t, Due::TxDone, p)),
                port.wake_at.map(|t| (t.as_nanos(), Due::Wake, p)),
                port.pipe.head_time().map(|t| (t, Due::Arrival, p)),
            ];
            for c in cands.into_iter().flatten() {
                if best.is_none_or(|b| c < b) {
                    best = Some(c);
                }
            }
        }
        best
    }

    /// Port `p`'s transmitter takes its qdisc's next packet at `now`, if any.
    fn try_tx(&mut self, p: usize, now: u64) {
        match self.ports[p].transmit(Instant(now)) {
            Ok(end) => self.busy_until[p] = Some(end),
            Err(Some(at)) => {
                let port = &mut self.ports[p];
                if port.wake_at.is_none_or(|cur| at < cur) {
                    port.wake_at = Some(at);
                }
            }
            Err(None) => {}
        }
    }

    /// Every port's queue figures at `end_ns`, with Jain's index of `flows` (the
    /// topology's flows, in order).
    pub fn queue_reports(&self, end_ns: u64, flows: &[FlowReport]) -> Vec<QueueReport> {
        (self.ports.iter().enumerate())
            .map(|(p, port)| {
                let q = port
                    .queue
                    .as_ref()
                    .expect("every fabric port has its qdisc");
                let stats = (q.stats(Instant(end_ns)), q.kind());
                queue_report(self.topo, p, stats, &port.dir, end_ns, flows)
            })
            .collect()
    }

    /// Wire segments serialized on every link direction.
    pub fn packets(&self) -> u64 {
        self.ports.iter().map(|p| p.dir.stats.packets).sum()
    }

    /// The queues' time series so far.
    pub fn series(&self) -> Vec<QueueSeries> {
        self.sampler.clone().finish(self.topo).0
    }
}

fn totals(ports: &[Port], p: usize) -> crate::nic::QueueTotals {
    ports[p]
        .queue
        .as_ref()
        .map(|q| q.totals())
        .unwrap_or_default()
}
