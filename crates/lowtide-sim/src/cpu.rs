//! A deterministic CPU cost model of the sending host (seed 003's experiment, E4).
//!
//! In virtual time the engine's work is free, so a retransmit queue walked from its
//! head costs nothing. With a [`CpuModel`], host A has one CPU: every packet it
//! receives and every packet it sends costs virtual time, computed from the work
//! the engine reports (`Stack::rtx_work`: retransmit-queue nodes visited and SACK
//! blocks processed), and a packet arriving while its socket is owned (the CPU is on
//! one of its packets, or its backlog holds some) waits in the socket backlog as
//! Linux 6.18's `tcp_add_backlog` keeps it ([`crate::sk_backlog`]: coalesced into
//! the tail, or dropped once `sk_backlog.len`, reset only when the backlog drains,
//! exceeds `2 * sk_rcvbuf + sk_sndbuf / 2 + 64 KB`). A sender whose CPU is saturated
//! processes ACKs late, so its clock slows and its goodput falls; ACKs dropped from
//! the backlog are lost work.
//!
//! The costs come from timed workloads (`lowtide experiment calibrate` on the machine
//! that runs the model, stored in calibration.json and results.json; else the
//! built-in [`CpuModel::calibrated`]): of lowtide's own code per packet, per SACK block and per
//! tree node, and, for the list before seed 003, of a walk of a linked list of
//! separately allocated skb-sized nodes (lowtide's list ablation is a contiguous
//! `VecDeque`, whose walk would be far cheaper than Linux's). The simulation itself
//! stays deterministic because it uses those constants, never a clock.

use crate::sk_backlog::{Added, Backlog, SockLimit};
use lowtide::config::RtxQueueKind;
use serde::{Deserialize, Serialize};

/// Points of [`CpuModel::list_node_ns`].
pub const LIST_POINTS: usize = 5;

/// Costs of the sender's work, in nanoseconds of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuModel {
    /// One incoming packet (an ACK) through `handle_packet`, SACK work aside.
    pub per_packet_in_ns: f64,
    /// One retransmit-queue node visited in the tree (a `BTreeMap` here).
    pub per_tree_node_ns: f64,
    /// One retransmit-queue node visited in the list, by the list's length: `(skbs,
    /// ns)` points in ascending order, interpolated linearly between them and held
    /// flat beyond the ends ([`CpuModel::list_node_ns`]). Linux's list was a linked
    /// list of separately allocated skbs, so a node costs a cache miss once the
    /// queue outgrows the caches; lowtide's list is a contiguous `VecDeque`, whose
    /// own walk is not what is charged.
    pub list_node_ns: [(u64, f64); LIST_POINTS],
    /// One SACK block processed.
    pub per_sack_block_ns: f64,
    /// One packet (an skb, TSO or not) handed to the device.
    pub per_packet_out_ns: f64,
    /// Truesize charged per backlogged packet on top of its length (an skb's
    /// overhead).
    pub backlog_overhead: u64,
}

impl CpuModel {
    /// The built-in constants, used where no calibration of the machine that runs
    /// the model is given (`lowtide experiment calibrate`, `lowtide_lab::calibrate`):
    /// measured on the project machine of that day (2 shared vCPUs; `lscpu` on
    /// 2026-11-25: Intel Xeon, L2 2 MB per core), release build, medians:
    /// - `engine_per_packet/ack` 1.27 µs (2026-11-23, `cargo bench -p lowtide-lab --bench
    ///   engine`): `handle_packet` of one ACK of a bulk flow without loss (no SACK
    ///   blocks; a few nodes visited);
    /// - `engine_per_packet/xmit` 54 ns (same run): `poll_transmit` + TX completion
    ///   per skb (both re-run 2026-11-25 15:15 UTC at load 4-5: 0.97 µs and 72 ns,
    ///   within this shared machine's spread; kept);
    /// - 277 ns per SACK block and 30 ns per tree node (2026-11-23, `--bench sack`,
    ///   1 % loss, 3 SACK blocks per ACK, node counts as that day's engine visited
    ///   them): the list's time per ACK against nodes visited at 10k and 100k skbs
    ///   gave 0.831 µs per ACK besides the nodes (its three blocks: 277 ns each); the
    ///   tree's time above that, per node visited, was 10 / 58 / 30 ns at 1k / 10k /
    ///   100k skbs, and the median, 30 ns, is kept (a `BTreeMap` descent that misses
    ///   the caches). These predate two counting fixes of 2026-11-25 (the list reaches
    ///   Linux's `lost_skb_hint`/`retransmit_skb_hint` as pointers, the tree steps
    ///   through `tcp_clean_rtx_queue`) and were not re-derived;
    /// - the list's node from `cargo bench -p lowtide-lab --bench list_walk` (2026-11-25,
    ///   14:42 and 14:44 UTC, load 2-3, mean of the two runs' medians): a linked list
    ///   of separately allocated 232-byte nodes interleaved with other allocations
    ///   and linked in a random order, walked reading `next` and `end_seq`: 5.9 /
    ///   8.7 / 52.2 / 62.2 / 203.4 ns per node at 1k / 10k / 30k / 100k / 300k
    ///   nodes. Linked in allocation order instead (the hardware prefetcher's best
    ///   case) it was 5.0 / 6.5 / 35 / 38 / 103 ns. The random order is used: a
    ///   long-lived flow's skbs come from a slab whose free list is refilled in the
    ///   order skbs are freed (cumulative ACKs, SACK merges, TX completions, the
    ///   ACKs' own skbs), so neighbours in sequence are not neighbours in memory.
    ///   The bench's nodes lie on 4 KB pages, so from 30k nodes a step also misses
    ///   the TLB, which the kernel's slabs in its huge-page direct map do not: above
    ///   10k skbs the figures bound Linux's from above on this machine. The old
    ///   3.1375 ns per node came from lowtide's own contiguous `VecDeque` and did not
    ///   model Linux's list.
    pub fn calibrated() -> CpuModel {
        CpuModel {
            per_packet_in_ns: 1270.0,
            per_tree_node_ns: 30.0,
            list_node_ns: [
                (1_000, 5.9),
                (10_000, 8.7),
                (30_000, 52.2),
                (100_000, 62.2),
                (300_000, 203.4),
            ],
            per_sack_block_ns: 277.0,
            per_packet_out_ns: 54.0,
            backlog_overhead: lowtide::tcp::consts::SKB_OVERHEAD as u64,
        }
    }

    /// The cost of one node of a list walk when the list holds `skbs` skbs (ns): the
    /// measured points of `list_node_ns` joined by straight lines, flat beyond them.
    pub fn list_node_ns(&self, skbs: u64) -> f64 {
        let p = &self.list_node_ns;
        if skbs <= p[0].0 {
            return p[0].1;
        }
        for w in p.windows(2) {
            let ((n0, t0), (n1, t1)) = (w[0], w[1]);
            if skbs <= n1 {
                return t0 + (t1 - t0) * (skbs - n0) as f64 / (n1 - n0) as f64;
            }
        }
        p[LIST_POINTS - 1].1
    }

    /// The cost of one incoming packet that did `nodes` node visits of a queue of
    /// `kind` holding `skbs` skbs and `blocks` SACK blocks of work (ns, at least 1).
    pub fn packet_in_ns(&self, kind: RtxQueueKind, nodes: u64, blocks: u64, skbs: u64) -> u64 {
        let per_node = match kind {
            RtxQueueKind::Tree => self.per_tree_node_ns,
            RtxQueueKind::List => self.list_node_ns(skbs),
        };
        let ns = self.per_packet_in_ns
            + per_node * nodes as f64
            + self.per_sack_block_ns * blocks as f64;
        (ns.round() as u64).max(1)
    }
}

/// What the model saw over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuFigures {
    /// The model's constants.
    pub model: Option<CpuModel>,
    /// Packets host A's stack processed.
    pub packets_in: u64,
    /// Packets it sent to the device.
    pub packets_out: u64,
    /// Virtual CPU time spent (ns).
    pub busy_ns: u64,
    /// `busy_ns` over the run's duration.
    pub utilization: f64,
    /// Mean CPU time per incoming packet (ns).
    pub cpu_per_packet_in_ns: f64,
    /// Mean retransmit-queue nodes visited per incoming packet.
    pub nodes_per_packet_in: f64,
    /// Mean SACK blocks per incoming packet.
    pub sack_blocks_per_packet_in: f64,
    /// Mean skbs in the retransmit queue when a packet came in.
    #[serde(default)]
    pub queue_skbs_per_packet_in: f64,
    /// Packets dropped because the backlog was full (`TcpExtTCPBacklogDrop`).
    pub backlog_drops: u64,
    /// Packets merged into the tail of their socket's backlog
    /// (`TcpExtTCPBacklogCoalesce`); `None` in results written before the model
    /// coalesced (2026-12-06), whose backlog was limited at `sk_rcvbuf + sk_sndbuf`.
    #[serde(default)]
    pub backlog_coalesce: Option<u64>,
    /// Most packets waiting in the backlog at once.
    pub backlog_peak_packets: u64,
    /// Mean wait of a packet in the backlog (µs).
    pub backlog_mean_wait_us: f64,
}

/// The model's running state on host A.
#[derive(Debug)]
pub(crate) struct CpuState {
    pub model: CpuModel,
    /// The shape of host A's retransmit queues.
    pub kind: RtxQueueKind,
    /// The CPU is busy until then (ns of virtual time).
    pub busy_until: u64,
    /// Packets waiting for the CPU, with their sockets' backlogs.
    pub backlog: Backlog,
    /// The packet the CPU took last, for [`Backlog::processed`].
    current: Option<crate::sk_backlog::Waiting>,
    /// A wakeup event for the CPU is pending at this time.
    pub wake_at: Option<u64>,
    pub figures: CpuFigures,
    nodes: u64,
    blocks: u64,
    skbs: u64,
    in_ns: u64,
    wait_ns: u128,
}

impl CpuState {
    pub fn new(model: CpuModel, kind: RtxQueueKind) -> CpuState {
        CpuState {
            model,
            kind,
            busy_until: 0,
            backlog: Backlog::new(model.backlog_overhead),
            current: None,
            wake_at: None,
            figures: CpuFigures {
                model: Some(model),
                backlog_coalesce: Some(0),
                ..CpuFigures::default()
            },
            nodes: 0,
            blocks: 0,
            skbs: 0,
            in_ns: 0,
            wait_ns: 0,
        }
    }

    /// Takes a packet arrived at `now` ([`Backlog::add`]: waiting for the CPU, in its
    /// socket's backlog, merged into its tail, or dropped), counting what became of
    /// it; `verify`: its checksum is to be checked before it may coalesce.
    pub fn add_backlog(
        &mut self,
        now_ns: u64,
        pkt: Vec<u8>,
        verify: bool,
        limit: impl FnOnce() -> Option<SockLimit>,
    ) {
        match self.backlog.add(now_ns, pkt, verify, limit) {
            Added::Dropped => self.figures.backlog_drops += 1,
            Added::Coalesced => *self.figures.backlog_coalesce.get_or_insert(0) += 1,
            Added::Direct | Added::Queued => {}
        }
        let n = self.backlog.len() as u64;
        self.figures.backlog_peak_packets = self.figures.backlog_peak_packets.max(n);
    }

    /// Takes the next packet if the CPU is free at `now_ns`.
    pub fn next_packet(&mut self, now_ns: u64) -> Option<Vec<u8>> {
        if self.busy_until > now_ns {
            return None;
        }
        let mut w = self.backlog.pop()?;
        self.wait_ns += (now_ns - w.arrived) as u128;
        let pkt = std::mem::take(&mut w.pkt);
        self.current = Some(w);
        Some(pkt)
    }

    /// Charges one processed packet that did `nodes` and `blocks` of work on queues
    /// holding `skbs` skbs.
    pub fn charge_in(&mut self, now_ns: u64, nodes: u64, blocks: u64, skbs: u64) {
        let ns = self.model.packet_in_ns(self.kind, nodes, blocks, skbs);
        self.skbs += skbs;
        self.busy_until = self.busy_until.max(now_ns) + ns;
        if let Some(w) = self.current.take() {
            self.backlog.processed(&w, self.busy_until);
        }
        self.figures.packets_in += 1;
        self.figures.busy_ns += ns;
        self.nodes += nodes;
        self.blocks += blocks;
        self.in_ns += ns;
    }

    /// Charges one packet sent.
    pub fn charge_out(&mut self, now_ns: u64) {
        let ns = self.model.per_packet_out_ns.round() as u64;
        self.busy_until = self.busy_until.max(now_ns) + ns;
        self.figures.packets_out += 1;
        self.figures.busy_ns += ns;
    }

    /// The state at `now_ns`, for the time series.
    pub fn sample(&self, now_ns: u64) -> crate::timeseries::CpuSample {
        let oldest = (self.backlog.oldest()).map_or(0, |t| now_ns.saturating_sub(t));
        crate::timeseries::CpuSample {
            busy_ns: self.figures.busy_ns,
            backlog_packets: self.backlog.len() as u64,
            backlog_oldest_wait_us: oldest / 1_000,
        }
    }

    /// The figures over a run of `duration_ns`.
    pub fn result(&self, duration_ns: u64) -> CpuFigures {
        let mut f = self.figures;
        let n = f.packets_in.max(1) as f64;
        f.utilization = match duration_ns {
            0 => 0.0,
            d => f.busy_ns as f64 / d as f64,
        };
        f.cpu_per_packet_in_ns = self.in_ns as f64 / n;
        f.nodes_per_packet_in = self.nodes as f64 / n;
        f.sack_blocks_per_packet_in = self.blocks as f64 / n;
        f.queue_skbs_per_packet_in = self.skbs as f64 / n;
        f.backlog_mean_wait_us = self.wait_ns as f64 / n / 1e3;
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pure ACK from host B's port 5001 to host A's port 40000 with TSval `tsval`.
    fn ack(tsval: u32) -> Vec<u8> {
        use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr};
        let th = TcpRepr {
            seq: 1,
            ack: 1000,
            flags: TcpFlags::ACK,
            options: TcpOptions {
                timestamp: Some((tsval, 1)),
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        };
        let (src, dst) = (
            "10.0.0.2:5001".parse().unwrap(),
            "10.0.0.1:40000".parse().unwrap(),
        );
        lowtide_wire::testing::tcp_packet(src, dst, &th, &[], 1, lowtide_wire::testing::Csum::Full)
    }

    #[test]
    fn a_busy_cpu_holds_packets_and_a_full_backlog_drops() {
        let m = CpuModel {
            per_packet_in_ns: 1000.0,
            per_tree_node_ns: 99.0,
            list_node_ns: [(1, 10.0); LIST_POINTS],
            per_sack_block_ns: 0.0,
            per_packet_out_ns: 100.0,
            backlog_overhead: 100,
        };
        // A 52-byte ACK weighs 152 bytes; two fit under 300 (the test is on what is
        // queued before the packet), the third finds 304 and is dropped.
        let limit = || {
            Some(SockLimit {
                limit: 300,
                rmem_alloc: 0,
            })
        };
        let mut c = CpuState::new(m, RtxQueueKind::List);
        c.add_backlog(0, ack(1), true, limit); // the socket is not owned: direct
        assert!(c.next_packet(0).is_some());
        c.charge_in(0, 100, 0, 50); // 1000 + 100 * 10 ns, the socket owned meanwhile
        assert_eq!(c.busy_until, 2000);
        c.add_backlog(10, ack(2), true, limit);
        c.add_backlog(10, ack(2), true, limit); // the same ACK again: coalesced
        c.add_backlog(10, ack(3), true, limit);
        c.add_backlog(10, ack(4), true, limit);
        assert_eq!(
            (c.figures.backlog_drops, c.figures.backlog_coalesce),
            (1, Some(1))
        );
        assert_eq!(c.figures.backlog_peak_packets, 2);
        assert!(c.next_packet(1999).is_none(), "busy");
        assert!(c.next_packet(2000).is_some());
        c.charge_in(2000, 0, 0, 0);
        c.charge_out(2500); // queued behind the busy CPU
        assert_eq!(c.busy_until, 3100);
        let f = c.result(10_000);
        assert_eq!(f.packets_in, 2);
        assert!((f.utilization - 0.31).abs() < 1e-9);
        assert!((f.nodes_per_packet_in - 50.0).abs() < 1e-9);
        assert!((f.backlog_mean_wait_us - 0.995).abs() < 1e-9);
        assert!((f.queue_skbs_per_packet_in - 25.0).abs() < 1e-9);
    }

    /// The list's cost per node follows the measured points, straight between them
    /// and flat beyond them; the tree's stays one constant.
    #[test]
    fn a_list_node_costs_what_the_bench_measured_at_that_length() {
        let m = CpuModel::calibrated();
        assert_eq!(m.list_node_ns(0), 5.9);
        assert_eq!(m.list_node_ns(1_000), 5.9);
        assert_eq!(m.list_node_ns(100_000), 62.2);
        assert_eq!(m.list_node_ns(1_000_000), 203.4);
        let mid = m.list_node_ns(20_000); // halfway from 10k to 30k
        assert!((mid - (8.7 + 52.2) / 2.0).abs() < 1e-9, "{mid}");
        let mut last = 0.0;
        for n in (0..400_000).step_by(997) {
            let ns = m.list_node_ns(n);
            assert!(ns >= last, "not decreasing with the length: {n}");
            last = ns;
        }
        // 1270 ns + 1000 nodes at 62.2 ns + 3 blocks at 277 ns.
        assert_eq!(
            m.packet_in_ns(RtxQueueKind::List, 1000, 3, 100_000),
            1270 + 62_200 + 831
        );
        assert_eq!(
            m.packet_in_ns(RtxQueueKind::Tree, 10, 0, 100_000),
            1270 + 300
        );
    }
}
