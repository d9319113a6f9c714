//! A deterministic CPU cost model of the sending host (seed 003's experiment, E4).
//!
//! In virtual time the engine's work is free, so a retransmit queue walked from its
//! head costs nothing. With a [`CpuModel`], host A has one CPU: every packet it
//! receives and every packet it sends costs virtual time, computed from the work
//! the engine reports (`Stack::rtx_work`: retransmit-queue nodes visited and SACK
//! blocks processed), and a packet arriving while the CPU is busy waits in the
//! socket backlog (Linux's `sk_add_backlog` while the socket is owned), which
//! overflows into drops above `sk_rcvbuf + sk_sndbuf` bytes of truesize
//! (`tcp_add_backlog`). A sender whose CPU is saturated processes ACKs late, so its
//! clock slows and its goodput falls; ACKs dropped from the backlog are lost work.
//!
//! The costs come from timed workloads (`lowtide experiment calibrate` on the machine
//! that runs the model, stored in calibration.json and results.json; else the
//! built-in [`CpuModel::calibrated`]): of lowtide's own code per packet, per SACK block and per
//! tree node, and, for the list before seed 003, of a walk of a linked list of
//! separately allocated skb-sized nodes (lowtide's list ablation is a contiguous
//! `VecDeque`, whose walk would be far cheaper than Linux's). The simulation itself
//! stays deterministic because it uses those constants, never a clock.

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
    /// Packets dropped because the backlog was full.
    pub backlog_drops: u64,
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
    /// Packets waiting, with their arrival times (ns).
    pub backlog: std::collections::VecDeque<(u64, Vec<u8>)>,
    pub backlog_bytes: u64,
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
            backlog: Default::default(),
            backlog_bytes: 0,
            wake_at: None,
            figures: CpuFigures {
                model: Some(model),
                ..CpuFigures::default()
            },
            nodes: 0,
            blocks: 0,
            skbs: 0,
            in_ns: 0,
            wait_ns: 0,
        }
    }

    /// Queues an arrived packet in the backlog unless the backlog already holds more
    /// than `limit` bytes of truesize (a drop, counted). As `sk_rcvqueues_full` in
    /// `sk_add_backlog`, the test is on what is queued before this packet, so a
    /// packet that finds the backlog empty always gets in.
    pub fn add_backlog(&mut self, now_ns: u64, pkt: Vec<u8>, limit: u64) {
        let size = pkt.len() as u64 + self.model.backlog_overhead;
        if self.backlog_bytes > limit {
            self.figures.backlog_drops += 1;
            return;
        }
        self.backlog_bytes += size;
        self.backlog.push_back((now_ns, pkt));
        let n = self.backlog.len() as u64;
        self.figures.backlog_peak_packets = self.figures.backlog_peak_packets.max(n);
    }

    /// Takes the next packet if the CPU is free at `now_ns`.
    pub fn next_packet(&mut self, now_ns: u64) -> Option<Vec<u8>> {
        if self.busy_until > now_ns {
            return None;
        }
        let (arrived, pkt) = self.backlog.pop_front()?;
        self.backlog_bytes -= pkt.len() as u64 + self.model.backlog_overhead;
        self.wait_ns += (now_ns - arrived) as u128;
        Some(pkt)
    }

    /// Charges one processed packet that did `nodes` and `blocks` of work on queues
    /// holding `skbs` skbs.
    pub fn charge_in(&mut self, now_ns: u64, nodes: u64, blocks: u64, skbs: u64) {
        let ns = self.model.packet_in_ns(self.kind, nodes, blocks, skbs);
        self.skbs += skbs;
        self.busy_until = self.busy_until.max(now_ns) + ns;
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
        let oldest = self
            .backlog
            .front()
            .map_or(0, |&(t, _)| now_ns.saturating_sub(t));
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
        let mut big = CpuState::new(m, RtxQueueKind::List);
        big.add_backlog(0, vec![0; 1000], 300); // an empty backlog takes any packet
        assert_eq!(big.figures.backlog_drops, 0);
        let mut c = CpuState::new(m, RtxQueueKind::List);
        c.add_backlog(0, vec![0; 100], 300);
        c.add_backlog(0, vec![0; 100], 300); // 200 queued <= 300: taken
        c.add_backlog(0, vec![0; 100], 300); // 400 queued > 300: dropped
        assert_eq!(c.figures.backlog_drops, 1);
        assert!(c.next_packet(0).is_some());
        c.charge_in(0, 100, 0, 50); // 1000 + 100 * 10 ns
        assert_eq!(c.busy_until, 2000);
        assert!(c.next_packet(1999).is_none(), "busy");
        assert!(c.next_packet(2000).is_some());
        c.charge_in(2000, 0, 0, 0);
        c.charge_out(2500); // queued behind the busy CPU
        assert_eq!(c.busy_until, 3100);
        let f = c.result(10_000);
        assert_eq!(f.packets_in, 2);
        assert!((f.utilization - 0.31).abs() < 1e-9);
        assert!((f.nodes_per_packet_in - 50.0).abs() < 1e-9);
        assert!((f.backlog_mean_wait_us - 1.0).abs() < 1e-9);
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
