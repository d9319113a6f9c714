//! `lowtide experiment calibrate`: the CPU model's constants (`lowtide_sim::cpu`)
//! measured on the machine that runs the experiment, with their spread.
//!
//! Each constant is the median of several repetitions of a timed workload
//! ([`workload`]); the minimum and maximum are kept beside it. What is measured:
//! - per ACK: host A's `handle_packet` of one ACK of a lossless bulk flow (no SACK
//!   work; [`workload::Bulk`]);
//! - per packet sent: its `poll_transmit` and TX completion;
//! - per SACK block: the list's time per ACK at queue lengths whose list stays in
//!   the caches (1k, 2k, 4k skbs; in order the hints hold, so it visits a few nodes
//!   per ACK), less those nodes at the cache-warm walk's cost, over the SACK blocks
//!   per ACK ([`workload::SackWorkload`]);
//! - per tree node: the tree's time per ACK of the same workload, less its SACK
//!   blocks at that cost, per node visited, at 1k, 3k, 10k and 100k skbs (the model
//!   takes the median of the lengths' medians);
//! - per list node, by the queue's length: a walk of a linked list of separately
//!   allocated skb-sized nodes linked in a random order, at 1k, 10k, 30k, 100k and
//!   300k nodes ([`workload::list_walk_ns`]; also in allocation order, the bound
//!   below, recorded but not used).
//!
//! The simulation stays deterministic: it reads the constants, never a clock. A
//! calibration is stored as calibration.json and copied into results.json, so a
//! report names the machine the constants came from.

pub mod workload;

use crate::provenance;
use lowtide::tcp::rtx::RtxQueueKind;
use lowtide_sim::cpu::{CpuModel, LIST_POINTS};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use workload::{BulkPart, ListOrder, SackWorkload};

/// Version of calibration.json's layout.
pub const CALIBRATION_FORMAT: u32 = 1;

/// Queue lengths of the list's per-node cost (the model's points).
pub const LIST_LENGTHS: [u64; LIST_POINTS] = [1_000, 10_000, 30_000, 100_000, 300_000];
/// Queue lengths of the per-SACK-block fit (the list stays in the caches).
const FIT_LENGTHS: [u64; 3] = [1_000, 2_000, 4_000];
/// Queue lengths of the tree's per-node cost.
const TREE_LENGTHS: [u64; 4] = [1_000, 3_000, 10_000, 100_000];

/// A measured figure: the median of its repetitions, and their extremes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Median of the repetitions.
    pub median: f64,
    /// Smallest repetition.
    pub min: f64,
    /// Largest repetition.
    pub max: f64,
    /// Repetitions.
    pub n: u32,
}

impl Spread {
    /// The spread of `xs` (empty: all zero).
    pub fn of(xs: &[f64]) -> Spread {
        let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let median = match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        Spread {
            median,
            min: v.first().copied().unwrap_or(0.0),
            max: v.last().copied().unwrap_or(0.0),
            n: v.len() as u32,
        }
    }

    /// "5.9 ns (5.7-6.3)".
    pub fn text(&self) -> String {
        format!(
            "{} ns ({}-{})",
            crate::report::num(self.median),
            crate::report::num(self.min),
            crate::report::num(self.max)
        )
    }
}

/// One queue length's SACK workload in one shape, over the repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SackPoint {
    /// "list" or "tree".
    pub kind: String,
    /// Skbs in the queue.
    pub skbs: u64,
    /// Nodes visited per ACK (the same in every repetition).
    pub nodes_per_ack: f64,
    /// SACK blocks per ACK.
    pub blocks_per_ack: f64,
    /// Time per ACK.
    pub ns_per_ack: Spread,
}

/// A calibration: the machine, the measurements and the model they give.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Layout version ([`CALIBRATION_FORMAT`]).
    pub format: u32,
    /// The command that measured it.
    pub command: String,
    /// /proc/cpuinfo's model name.
    pub cpu_model: Option<String>,
    /// Logical CPUs of the machine.
    pub logical_cpus: Option<usize>,
    /// The kernel (`uname -r`).
    pub kernel: Option<String>,
    /// lowtide's build: commit, dirty flag and rustc (as in the provenance).
    pub build: serde_json::Value,
    /// When it ran (UTC).
    pub started: Option<String>,
    /// When it finished (UTC).
    pub finished: Option<String>,
    /// Load average (1/5/15 min) before and after.
    pub loadavg_before: Option<[f64; 3]>,
    /// After.
    pub loadavg_after: Option<[f64; 3]>,
    /// Repetitions of each workload.
    pub reps: u32,
    /// Per ACK (`handle_packet`, no SACK work).
    pub per_ack_ns: Spread,
    /// Per packet sent.
    pub per_xmit_ns: Spread,
    /// Per SACK block (the fit's intercept over the blocks per ACK).
    pub per_sack_block_ns: Spread,
    /// Per tree node visited, by queue length.
    pub tree_node_ns: Vec<(u64, Spread)>,
    /// Per list node, by queue length, nodes linked in a random order (used).
    pub list_node_ns: Vec<(u64, Spread)>,
    /// The same in allocation order (the prefetcher's best case; not used).
    pub list_node_ns_alloc_order: Vec<(u64, Spread)>,
    /// The SACK workload's points behind the per-block and per-tree-node figures.
    pub sack_points: Vec<SackPoint>,
    /// The model these give (medians).
    pub model: CpuModel,
}

/// How much to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effort {
    /// Repetitions of each workload.
    pub reps: u32,
    /// ACKs (and packets sent) timed per repetition of the bulk workload.
    pub bulk_packets: u64,
    /// ACKs timed per pass of the SACK workload (at most N/10).
    pub sack_acks: usize,
}

impl Effort {
    /// The default: 7 repetitions, 40,000 ACKs each (1-3 minutes on the project's
    /// shared 2-core machine, by its load).
    pub const FULL: Effort = Effort {
        reps: 7,
        bulk_packets: 40_000,
        sack_acks: 2_000,
    };
    /// `--quick`: 3 repetitions of a fifth of the work (CI).
    pub const QUICK: Effort = Effort {
        reps: 3,
        bulk_packets: 8_000,
        sack_acks: 400,
    };
}

/// Measures every constant `effort.reps` times; `progress` gets a line per step.
pub fn measure(effort: Effort, progress: &mut dyn FnMut(&str)) -> Calibration {
    let prov = provenance::Provenance::start();
    let reps = effort.reps.max(1) as usize;
    let per = |d: std::time::Duration, n: u64| d.as_nanos() as f64 / n.max(1) as f64;
    progress("per ACK and per packet sent (bulk flow)");
    let mut ack = Vec::new();
    let mut xmit = Vec::new();
    for _ in 0..reps {
        let t = workload::bulk_times(effort.bulk_packets, BulkPart::Ack);
        ack.push(per(t.ack, t.acks));
        xmit.push(per(t.xmit, t.xmits));
    }
    progress("per list node by length (linked list of separately allocated skbs)");
    let walk = |order| -> Vec<(u64, Spread)> {
        (LIST_LENGTHS.iter())
            .map(|&n| {
                (
                    n,
                    Spread::of(&workload::list_walk_ns(n as usize, order, reps)),
                )
            })
            .collect()
    };
    let list_node_ns = walk(ListOrder::Shuffled);
    let list_node_ns_alloc_order = walk(ListOrder::Alloc);
    progress("per SACK block and per tree node (SACK workload)");
    // The list's few nodes per ACK at these lengths (the hints hold in order) at
    // the cache-warm walk's cost; the rest of its time is the blocks'.
    let warm_node = list_node_ns[0].1.median;
    let mut points = Vec::new();
    let mut block_reps = vec![Vec::new(); reps];
    for n in FIT_LENGTHS {
        let w = SackWorkload::new(n);
        let (pt, per_rep) = sack_point(&w, RtxQueueKind::List, n, reps, effort.sack_acks);
        for (r, ns) in per_rep.into_iter().enumerate() {
            let blocks = pt.blocks_per_ack.max(1e-9);
            block_reps[r].push((ns - pt.nodes_per_ack * warm_node) / blocks);
        }
        points.push(pt);
    }
    // Each repetition's per-block cost: the mean over the lengths.
    let block_all: Vec<f64> = (block_reps.iter())
        .map(|b| b.iter().sum::<f64>() / b.len().max(1) as f64)
        .collect();
    let per_block = Spread::of(&block_all);
    let mut tree_node_ns = Vec::new();
    for n in TREE_LENGTHS {
        let w = SackWorkload::new(n);
        let (pt, per_rep) = sack_point(&w, RtxQueueKind::Tree, n, reps, effort.sack_acks);
        let xs: Vec<f64> = (per_rep.iter().zip(&block_all))
            .map(|(ns, b)| (ns - b * pt.blocks_per_ack) / pt.nodes_per_ack.max(1e-9))
            .collect();
        tree_node_ns.push((n, Spread::of(&xs)));
        points.push(pt);
    }
    let tree_medians: Vec<f64> = tree_node_ns.iter().map(|(_, s)| s.median).collect();
    let mut list_pts = [(0u64, 0.0f64); LIST_POINTS];
    for (p, (n, s)) in list_pts.iter_mut().zip(&list_node_ns) {
        *p = (*n, s.median);
    }
    let (per_ack, per_xmit) = (Spread::of(&ack), Spread::of(&xmit));
    let model = CpuModel {
        per_packet_in_ns: per_ack.median,
        per_tree_node_ns: Spread::of(&tree_medians).median.max(0.0),
        list_node_ns: list_pts,
        per_sack_block_ns: per_block.median.max(0.0),
        per_packet_out_ns: per_xmit.median,
        backlog_overhead: lowtide::tcp::consts::SKB_OVERHEAD as u64,
    };
    let p = prov.finish(serde_json::Value::Array(Vec::new()));
    let s = |k: &str| p[k].as_str().map(String::from);
    let avg = |k: &str| serde_json::from_value(p[k].clone()).ok();
    Calibration {
        format: CALIBRATION_FORMAT,
        command: p["command"].as_str().unwrap_or("").to_string(),
        cpu_model: s("cpu_model"),
        logical_cpus: p["logical_cpus"].as_u64().map(|n| n as usize),
        kernel: s("kernel"),
        build: serde_json::json!({
            "commit": p["commit"], "dirty": p["dirty"], "rustc": p["rustc"],
        }),
        started: s("started"),
        finished: s("finished"),
        loadavg_before: avg("loadavg_before"),
        loadavg_after: avg("loadavg_after"),
        reps: reps as u32,
        per_ack_ns: per_ack,
        per_xmit_ns: per_xmit,
        per_sack_block_ns: per_block,
        tree_node_ns,
        list_node_ns,
        list_node_ns_alloc_order,
        sack_points: points,
        model,
    }
}

/// `reps` passes of `w` on a queue of `kind`: the point (median time per ACK) and
/// each pass's time per ACK.
fn sack_point(
    w: &SackWorkload,
    kind: RtxQueueKind,
    skbs: u64,
    reps: usize,
    acks: usize,
) -> (SackPoint, Vec<f64>) {
    let passes: Vec<_> = (0..reps).map(|_| w.pass(kind, acks)).collect();
    let first = passes[0];
    let per_ack: Vec<f64> = (passes.iter())
        .map(|p| p.time.as_nanos() as f64 / p.acks.max(1) as f64)
        .collect();
    let kind = match kind {
        RtxQueueKind::List => "list",
        RtxQueueKind::Tree => "tree",
    };
    let pt = SackPoint {
        kind: kind.into(),
        skbs,
        nodes_per_ack: first.nodes as f64 / first.acks.max(1) as f64,
        blocks_per_ack: first.blocks as f64 / first.acks.max(1) as f64,
        ns_per_ack: Spread::of(&per_ack),
    };
    (pt, per_ack)
}

impl Calibration {
    /// One paragraph for report.md and the command's output: the machine, then
    /// each constant as median (min-max) over the repetitions.
    pub fn describe(&self) -> String {
        let or = |o: &Option<String>| o.clone().unwrap_or_else(|| "unknown".into());
        let lens = |v: &[(u64, Spread)]| {
            (v.iter())
                .map(|(n, s)| format!("{} at {n} skbs", s.text()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut s = String::new();
        let _ = write!(
            s,
            "measured by `lowtide {}` on {} ({} logical CPUs, kernel {}), {} to {}, load \
             average {} before and {} after; medians of {} repetitions (min-max): {} per \
             ACK, {} per packet sent, {} per SACK block, per tree node {} (the model takes \
             {} ns), per list node (a linked list of separately allocated skbs, random \
             order) {}; in allocation order (not used) {}",
            self.command,
            or(&self.cpu_model),
            self.logical_cpus.map_or("?".into(), |n| n.to_string()),
            or(&self.kernel),
            or(&self.started),
            or(&self.finished),
            fmt_load(self.loadavg_before),
            fmt_load(self.loadavg_after),
            self.reps,
            self.per_ack_ns.text(),
            self.per_xmit_ns.text(),
            self.per_sack_block_ns.text(),
            lens(&self.tree_node_ns),
            crate::report::num(self.model.per_tree_node_ns),
            lens(&self.list_node_ns),
            lens(&self.list_node_ns_alloc_order),
        );
        s
    }
}

fn fmt_load(l: Option<[f64; 3]>) -> String {
    match l {
        Some([a, b, c]) => format!("{a}/{b}/{c}"),
        None => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_median_and_extremes() {
        let s = Spread::of(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 1.0, 10.0, 4));
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0]).median, 2.0);
    }

    /// A tiny calibration runs end to end and gives a usable model.
    #[test]
    fn a_small_calibration_gives_a_model() {
        let e = Effort {
            reps: 2,
            bulk_packets: 500,
            sack_acks: 50,
        };
        let c = measure(e, &mut |_| {});
        let m = c.model;
        assert!(
            m.per_packet_in_ns > 0.0 && m.per_packet_out_ns > 0.0,
            "{m:?}"
        );
        assert!(m.list_node_ns.iter().all(|&(_, ns)| ns > 0.0), "{m:?}");
        assert_eq!(m.list_node_ns[0].0, 1_000);
        assert_eq!(c.reps, 2);
        let back: Calibration = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(c.describe().contains("per SACK block"));
    }
}
