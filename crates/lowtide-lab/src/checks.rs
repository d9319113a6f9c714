//! Each experiment's direction, checked on its records: what the seed's message
//! says changes (and what it says does not), with margins wide enough that a
//! reduced run (`--quick`) must show it too.

use super::{Experiment, RunRecord};
use serde::{Deserialize, Serialize};

/// One checked direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionCheck {
    /// Which experiment.
    pub experiment: Experiment,
    /// What is claimed ("TCP memory B < 0.8 x A").
    pub claim: String,
    /// The figures behind the verdict.
    pub detail: String,
    /// Whether the records show it.
    pub pass: bool,
}

/// The checks of experiment `e` over `runs` (records of other experiments are
/// ignored); a comparison whose runs are missing or failed is a failed check.
pub fn check(e: Experiment, runs: &[RunRecord]) -> Vec<DirectionCheck> {
    let mine: Vec<&RunRecord> = runs.iter().filter(|r| r.experiment == e).collect();
    let mut out = Vec::new();
    for r in &mine {
        if !r.figures.verified {
            out.push(DirectionCheck {
                experiment: e,
                claim: format!("{} / {}: every byte verified", r.group, r.variant),
                detail: r.figures.failure.clone().unwrap_or_default(),
                pass: false,
            });
        }
    }
    let c = Ctx { e, runs: &mine };
    match e {
        Experiment::E1 => e1(&c, &mut out),
        Experiment::E2 => e2(&c, &mut out),
        Experiment::E3 => e3(&c, &mut out),
        Experiment::E4 => e4(&c, &mut out),
        Experiment::E5 => e5(&c, &mut out),
    }
    out
}

struct Ctx<'a> {
    e: Experiment,
    runs: &'a [&'a RunRecord],
}

impl Ctx<'_> {
    /// The mean of `f` over the runs of `group` whose variant starts with `v`.
    fn mean(&self, group: &str, v: &str, f: impl Fn(&RunRecord) -> f64) -> Option<f64> {
        let xs: Vec<f64> = (self.runs.iter())
            .filter(|r| r.group == group && r.variant.starts_with(v))
            .map(|r| f(r))
            .collect();
        (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
    }

    fn groups(&self) -> Vec<String> {
        let mut g: Vec<String> = self.runs.iter().map(|r| r.group.clone()).collect();
        g.dedup();
        g
    }

    /// Checks `pass(a, b)` on figure `f` of variants `va` and `vb` of `group`.
    #[allow(clippy::too_many_arguments)]
    fn compare(
        &self,
        out: &mut Vec<DirectionCheck>,
        group: &str,
        (va, vb): (&str, &str),
        what: &str,
        claim: &str,
        f: impl Fn(&RunRecord) -> f64,
        pass: impl Fn(f64, f64) -> bool,
    ) {
        let (a, b) = (self.mean(group, va, &f), self.mean(group, vb, &f));
        let (detail, ok) = match (a, b) {
            (Some(a), Some(b)) => (format!("{what}: {va} {a:.4e}, {vb} {b:.4e}"), pass(a, b)),
            _ => ("runs missing".to_string(), false),
        };
        out.push(DirectionCheck {
            experiment: self.e,
            claim: format!("{group}: {claim}"),
            detail,
            pass: ok,
        });
    }

    /// `claim`: the goodput of variants A and B of `group` is the same within `tol`.
    fn goodput_same(&self, out: &mut Vec<DirectionCheck>, group: &str, claim: &str, tol: f64) {
        let what = "goodput bit/s";
        self.compare(out, group, ("A", "B"), what, claim, goodput, |a, b| {
            same(a, b, tol)
        });
    }
}

fn same(a: f64, b: f64, tol: f64) -> bool {
    a > 0.0 && b > 0.0 && (a - b).abs() / a.max(b) <= tol
}

fn goodput(r: &RunRecord) -> f64 {
    r.figures.goodput_bps
}

/// Seed 000's claims: with 200 flows, less TCP memory (-55 % there) at the same
/// goodput; one flow's throughput unchanged ("no bad effect on the throughput"),
/// with more context switches (6.5x there), where lowat binds (the LAN group; in
/// the send-buffer-limited one nothing waits unsent and A equals B).
fn e1(c: &Ctx, out: &mut Vec<DirectionCheck>) {
    for g in c.groups() {
        if g.starts_with("1 flow") {
            c.goodput_same(
                out,
                &g,
                "one flow's goodput unchanged by lowat (within 5 %)",
                0.05,
            );
            if g == "1 flow" {
                let wake = |r: &RunRecord| r.figures.wakeups_per_s;
                let claim = "one flow: lowat 128 KB wakes the writer more often (seed: 6.5x the context switches)";
                c.compare(out, &g, ("A", "B"), "wakeups/s", claim, wake, |a, b| {
                    b > 2.0 * a
                });
            }
            continue;
        }
        let mem = |r: &RunRecord| r.figures.mean_pages;
        let claim = "mean TCP memory with lowat 128 KB < 0.8 x without";
        c.compare(out, &g, ("A", "B"), "mean pages", claim, mem, |a, b| {
            b < 0.8 * a
        });
        c.goodput_same(out, &g, "goodput unchanged (within 5 %)", 0.05);
    }
}

fn e2(c: &Ctx, out: &mut Vec<DirectionCheck>) {
    for g in c.groups().iter().filter(|g| !g.starts_with("sweep")) {
        e2_group(c, out, g);
    }
    // The sweep: A's send-queue memory per flow follows the per-flow
    // bandwidth-delay product (tcp_sndbuf_expand of the peak cwnd), whatever the
    // link rate or flow count.
    let k: Vec<(f64, f64)> = (c.runs.iter())
        .filter(|r| r.group.starts_with("sweep") && r.variant.starts_with('A'))
        .filter_map(|r| {
            let bdp = crate::report::per_flow_bdp(r)?;
            Some((bdp, r.figures.mean_wmem_per_flow / bdp))
        })
        .collect();
    if k.is_empty() {
        return;
    }
    let span = |f: fn(&(f64, f64)) -> f64| {
        let lo = k.iter().map(f).fold(f64::INFINITY, f64::min);
        let hi = k.iter().map(f).fold(0.0, f64::max);
        (lo, hi)
    };
    let ((b0, b1), (k0, k1)) = (span(|x| x.0), span(|x| x.1));
    out.push(DirectionCheck {
        experiment: c.e,
        claim: "sweep: A's send-queue memory per flow follows the per-flow bandwidth-delay product (wmem / BDP within a factor of 2 while the BDP changes 4x or more)".into(),
        detail: format!(
            "per-flow BDP {:.2}-{:.2} MB, wmem / BDP {k0:.2}-{k1:.2}",
            b0 / 1e6,
            b1 / 1e6
        ),
        pass: b1 >= 4.0 * b0 && k0 > 0.0 && k1 < 2.0 * k0,
    });
}

fn e2_group(c: &Ctx, out: &mut Vec<DirectionCheck>, g: &str) {
    let mem = |r: &RunRecord| r.figures.mean_pages;
    let wake = |r: &RunRecord| r.figures.wakeups_per_s;
    let claim = "mean TCP memory with lowat 2 MB < 0.5 x without";
    c.compare(out, g, ("A", "B"), "mean pages", claim, mem, |a, b| {
        b < 0.5 * a
    });
    let claim = "lowat 2 MB wakes the writers more often than no lowat";
    c.compare(out, g, ("A", "B"), "wakeups/s", claim, wake, |a, b| b > a);
    let claim = "the lowat/2 rule wakes the writers less often than waking below lowat";
    c.compare(out, g, ("C", "B"), "wakeups/s", claim, wake, |cc, b| b < cc);
    c.goodput_same(out, g, "goodput with lowat within 10 % of without", 0.10);
}

fn e3(c: &Ctx, out: &mut Vec<DirectionCheck>) {
    for g in c.groups() {
        let delay = |r: &RunRecord| r.figures.dev_mean_delay_us;
        let claim = "mean device-queue delay with TSQ < 1/4 of without";
        c.compare(
            out,
            &g,
            ("A", "B"),
            "mean delay us",
            claim,
            delay,
            |a, b| b < a / 4.0,
        );
        c.goodput_same(out, &g, "goodput unchanged by TSQ (within 5 %)", 0.05);
        // Seed 002's own rule (fixed 128 KB), where the plan has it, per bulk sender
        // as the seed claims (four flows queue four times 128 KB).
        if g.ends_with(", 1 flow") && c.mean(&g, "C", delay).is_some() {
            let claim =
                "mean device-queue delay with seed 002's TSQ (fixed 128 KB) < 1/4 of without";
            c.compare(
                out,
                &g,
                ("A", "C"),
                "mean delay us",
                claim,
                delay,
                |a, x| x < a / 4.0,
            );
        }
    }
}

/// The seed's mechanism: a list walked from its head costs more per ACK as the queue
/// grows, a tree about log n. Over the runs with a CPU model, the growth of nodes
/// visited per ACK from the run with the fewest packets in flight to the one with
/// the most must be larger for the list than for the tree. (The goodput ratio is
/// reported, not asserted: see the report's notes.)
fn e4(c: &Ctx, out: &mut Vec<DirectionCheck>) {
    let growth = |v: &str| {
        let mut pts: Vec<(f64, f64)> = (c.runs.iter())
            .filter(|r| r.variant.starts_with(v))
            .filter_map(|r| {
                r.figures
                    .cpu
                    .map(|x| (r.figures.mean_in_flight, x.nodes_per_packet_in))
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        match (pts.first(), pts.last()) {
            (Some(lo), Some(hi)) if pts.len() >= 2 && lo.1 > 0.0 => Some((lo.0, hi.0, hi.1 / lo.1)),
            _ => None,
        }
    };
    let (detail, pass) = match (growth("A"), growth("B")) {
        (Some(l), Some(t)) => (
            format!(
                "nodes per ACK from {:.0} to {:.0} packets in flight: list x{:.2}, tree x{:.2}",
                l.0, l.1, l.2, t.2
            ),
            l.2 > t.2,
        ),
        _ => ("runs at two flight sizes missing".to_string(), false),
    };
    out.push(DirectionCheck {
        experiment: c.e,
        claim: "the list's work per ACK grows faster with packets in flight than the tree's".into(),
        detail,
        pass,
    });
    // The seed's figure: goodput with the tree above the list's (6.4x there).
    for g in c.groups().iter().filter(|g| !g.starts_with("sweep")) {
        let claim = "the tree's mean goodput at least 1.2x the list's (seed: 6.4x)";
        let above = |list: f64, tree: f64| tree >= 1.2 * list;
        c.compare(out, g, ("A", "B"), "goodput bit/s", claim, goodput, above);
    }
}

fn e5(c: &Ctx, out: &mut Vec<DirectionCheck>) {
    let g = "2,000,000 bytes";
    let req = |r: &RunRecord| r.figures.ip_out_requests as f64;
    let segs = |r: &RunRecord| r.figures.tcp_out_segs as f64;
    let claim = "IpOutRequests sized at transmit < 2/3 of sized at write";
    c.compare(out, g, ("A", "B"), "IpOutRequests", claim, req, |a, b| {
        b < a * 2.0 / 3.0
    });
    let acks = |r: &RunRecord| r.figures.ip_in_receives as f64;
    let claim = "IpInReceives (ACKs) sized at transmit < 2/3 of sized at write";
    c.compare(out, g, ("A", "B"), "IpInReceives", claim, acks, |a, b| {
        b < a * 2.0 / 3.0
    });
    let claim = "same TcpOutSegs (within 1 %)";
    c.compare(out, g, ("A", "B"), "TcpOutSegs", claim, segs, |a, b| {
        same(a, b, 0.01)
    });
    c.goodput_same(out, g, "goodput unchanged (within 5 %)", 0.05);
}
