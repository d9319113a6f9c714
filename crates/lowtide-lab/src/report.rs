//! report.md and the text summary, rendered from a results file only.

use super::real::report as real_report;
use super::real::RealResults;
use super::stats;
use crate::{DirectionCheck, Experiment, Figures, ResultsFile, RunRecord, Scale};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// What a seed's message published for one comparison.
struct SeedFigure {
    /// What is compared.
    what: &'static str,
    /// The seed's A -> B (and ratio), as published.
    seed: &'static str,
    /// The group of lowtide runs to compare, and the variants' prefixes.
    group: &'static str,
    variants: (&'static str, &'static str),
    /// The figure and its unit (NaN where a run lacks it: left out).
    figure: fn(&RunRecord) -> f64,
    unit: &'static str,
    /// Sum over repetitions instead of the mean (E4's "sum of 10 runs").
    sum: bool,
}

fn seed_figures(e: Experiment) -> Vec<SeedFigure> {
    let f = |what, seed, group, variants, figure, unit| SeedFigure {
        what,
        seed,
        group,
        variants,
        figure,
        unit,
        sum: false,
    };
    let pages: fn(&RunRecord) -> f64 = |r| r.figures.mean_pages;
    let mbit: fn(&RunRecord) -> f64 = |r| r.figures.goodput_bps / 1e6;
    let wake: fn(&RunRecord) -> f64 = |r| r.figures.wakeups_per_s;
    let delay_ms: fn(&RunRecord) -> f64 = |r| r.figures.dev_mean_delay_us / 1e3;
    let steady_ms: fn(&RunRecord) -> f64 = steady_queue_ms;
    match e {
        Experiment::E1 => vec![
            f("TCP memory, 200 flows (pages; seed: 60 s in, lowtide: mean over the run)", "45,458 -> 20,567 (0.45x)", "200 flows", ("A", "B"), pages, "pages"),
            f("goodput, 200 flows", "not published", "200 flows", ("A", "B"), mbit, "Mbit/s"),
            f("one flow's throughput", "17,448 vs 17,321 Mbit/s (0.99x)", "1 flow", ("A", "B"), mbit, "Mbit/s"),
            f("one flow: context switches (seed: 10 x 20 s of netperf) / writer wakeups per second (lowtide)", "412,514 -> 2,675,818 (6.5x)", "1 flow", ("A", "B"), wake, "wakeups/s"),
            f("writer wakeups per second, 200 flows", "not published", "200 flows", ("A", "B"), wake, "wakeups/s"),
            f("one flow's TCP memory (pages)", "not published", "1 flow", ("A", "B"), pages, "pages"),
            f("one flow, send-buffer-limited (10 Gbit/s, 10 ms): wakeups per second", "not published", "1 flow, 10 Gbit/s, 10 ms (send-buffer-limited)", ("A", "B"), wake, "wakeups/s"),
        ],
        Experiment::E2 => vec![
            f("TCP memory (pages)", "1,364,904 -> 86,411 (0.063x)", "", ("A", "B"), pages, "pages"),
            f("context switches (seed, vmstat cs/s) / writer wakeups per second (lowtide)", "~6,000/s -> ~13,000/s (~2x)", "", ("A", "B"), wake, "wakeups/s"),
            f("wakeups without the lowat/2 rule (C) vs with it (B)", "not published (the rule is the commit)", "", ("C", "B"), wake, "wakeups/s"),
            f("goodput", "not published", "", ("A", "B"), mbit, "Mbit/s"),
        ],
        Experiment::E3 => vec![
            f("queueing per bulk sender, 1 Gbit/s, 1 flow (mean device-queue delay)", "50 ms -> < 1 ms", "1 Gbit/s, 1 flow", ("A", "B"), delay_ms, "ms"),
            f("queueing, 1 Gbit/s, 4 flows", "not published", "1 Gbit/s, 4 flows", ("A", "B"), delay_ms, "ms"),
            f("queueing per bulk sender, 100 Mbit/s, 1 flow", "132 ms -> < 8 ms", "100 Mbit/s, 1 flow", ("A", "B"), delay_ms, "ms"),
            f("queueing, 100 Mbit/s, 4 flows", "not published", "100 Mbit/s, 4 flows", ("A", "B"), delay_ms, "ms"),
            f("throughput, 1 Gbit/s, 1 flow", "unchanged", "1 Gbit/s, 1 flow", ("A", "B"), mbit, "Mbit/s"),
            f("throughput, 100 Mbit/s, 1 flow", "unchanged", "100 Mbit/s, 1 flow", ("A", "B"), mbit, "Mbit/s"),
            f("queueing per bulk sender, 1 Gbit/s, 1 flow, TSQ as in seed 002 (fixed 128 KB; C)", "50 ms -> < 1 ms", "1 Gbit/s, 1 flow", ("A", "C"), delay_ms, "ms"),
            f("queueing per bulk sender, 100 Mbit/s, 1 flow, TSQ as in seed 002 (C)", "132 ms -> < 8 ms", "100 Mbit/s, 1 flow", ("A", "C"), delay_ms, "ms"),
            f("steady state: queue in the run's second half (backlog / rate), 1 Gbit/s, 1 flow, today's TSQ", "50 ms -> < 1 ms", "1 Gbit/s, 1 flow", ("A", "B"), steady_ms, "ms"),
            f("steady state, 1 Gbit/s, 1 flow, TSQ as in seed 002 (C)", "50 ms -> < 1 ms", "1 Gbit/s, 1 flow", ("A", "C"), steady_ms, "ms"),
            f("steady state, 100 Mbit/s, 1 flow, today's TSQ", "132 ms -> < 8 ms", "100 Mbit/s, 1 flow", ("A", "B"), steady_ms, "ms"),
            f("steady state, 100 Mbit/s, 1 flow, TSQ as in seed 002 (C)", "132 ms -> < 8 ms", "100 Mbit/s, 1 flow", ("A", "C"), steady_ms, "ms"),
        ],
        Experiment::E4 => vec![SeedFigure {
            sum: true,
            ..f("sum of the runs' goodput (list -> tree)", "2,840 -> 18,053 Mbit/s (6.4x)", "", ("A", "B"), mbit, "Mbit/s")
        }],
        Experiment::E5 => vec![
            f("IpOutRequests", "599 -> 232 (0.39x)", "2,000,000 bytes", ("A", "B"), |r| r.figures.ip_out_requests as f64, ""),
            f("IpInReceives (ACKs at the sender)", "600 -> 221 (0.37x)", "2,000,000 bytes", ("A", "B"), |r| r.figures.ip_in_receives as f64, ""),
            f("TcpOutSegs", "1,397 -> 1,397 (1.00x)", "2,000,000 bytes", ("A", "B"), |r| r.figures.tcp_out_segs as f64, ""),
            f("throughput", "44.22 -> 44.27 Mbit/s (1.00x)", "2,000,000 bytes", ("A", "B"), mbit, "Mbit/s"),
        ],
    }
}

/// The link rate of a run (bit/s) from its "rate" parameter ("1 Gbit/s", "100 Mbit/s").
pub(crate) fn rate_bps(r: &RunRecord) -> Option<f64> {
    let (_, v) = r.params.iter().find(|(k, _)| k == "rate")?;
    let (n, unit) = v.split_once(' ')?;
    let n: f64 = n.parse().ok()?;
    match unit {
        "Gbit/s" => Some(n * 1e9),
        "Mbit/s" => Some(n * 1e6),
        _ => None,
    }
}

/// One flow's share of the path's bandwidth-delay product (bytes), from a run's
/// "rate", "flows" and "rtt" parameters.
pub(crate) fn per_flow_bdp(r: &RunRecord) -> Option<f64> {
    let p = |k: &str| {
        r.params
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let flows: f64 = p("flows")?.parse().ok()?;
    let rtt_ms: f64 = p("rtt")?.strip_suffix(" ms")?.parse().ok()?;
    Some(rate_bps(r)? / flows.max(1.0) * rtt_ms / 1e3 / 8.0)
}

/// E2's sweep: A's send-queue memory per flow against the per-flow bandwidth-delay
/// product, and what tcp_sndbuf_expand of BBR's cwnd predicts.
fn e2_sweep_table(s: &mut String, file: &ResultsFile) {
    let runs: Vec<&RunRecord> = (file.runs.iter())
        .filter(|r| r.experiment == Experiment::E2 && r.variant.starts_with('A'))
        .collect();
    let groups = by_variant(&runs);
    if groups.len() < 2 {
        return;
    }
    let _ = writeln!(
        s,
        "What sets A's memory, over link rates and flow counts (A: lowat off; mean ± 95 % CI over n seeds; the prediction is 9.5 x the per-flow BDP, tcp_sndbuf_expand's 3 x cwnd x 2,304 bytes with cwnd = 2 x BDP / 1,448):\n"
    );
    let _ = writeln!(
        s,
        "| group | n | per-flow rate Mbit/s | per-flow BDP MB | wmem/flow MB | wmem / BDP | predicted MB | goodput Mbit/s |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for (g, _, rs) in groups {
        let Some(bdp) = rs.first().and_then(|r| per_flow_bdp(r)) else {
            continue;
        };
        let flows: f64 = rs[0]
            .params
            .iter()
            .find(|(k, _)| k == "flows")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(1.0);
        let rate = rate_bps(rs[0]).unwrap_or(0.0) / flows / 1e6;
        let w: Vec<f64> = rs
            .iter()
            .map(|r| r.figures.mean_wmem_per_flow / 1e6)
            .collect();
        let k: Vec<f64> = rs
            .iter()
            .map(|r| r.figures.mean_wmem_per_flow / bdp)
            .collect();
        let gp: Vec<f64> = rs.iter().map(|r| r.figures.goodput_bps / 1e6).collect();
        let _ = writeln!(
            s,
            "| {g} | {} | {} | {} | {} | {} | {} | {} |",
            rs.len(),
            num(rate),
            num(bdp / 1e6),
            cell(&w),
            cell(&k),
            num(9.5 * bdp / 1e6),
            cell(&gp)
        );
    }
    let _ = writeln!(s);
}

/// E3's steady state: host A's NIC backlog over the second half of the run (the
/// time series' samples from half the duration on), as a delay at the link rate
/// (ms); NaN without a series.
pub(crate) fn steady_queue_ms(r: &RunRecord) -> f64 {
    let half_us = r.figures.duration_s * 1e6 / 2.0;
    let xs: Vec<f64> = (r.series.iter())
        .filter(|x| x.time_us as f64 >= half_us)
        .map(|x| x.dev_queue_bytes as f64)
        .collect();
    match (rate_bps(r), xs.is_empty()) {
        (Some(rate), false) => xs.iter().sum::<f64>() / xs.len() as f64 * 8.0 / rate * 1e3,
        _ => f64::NAN,
    }
}

fn title(e: Experiment) -> &'static str {
    match e {
        Experiment::E1 => "E1 (seed 000): TCP_NOTSENT_LOWAT and TCP memory",
        Experiment::E2 => "E2 (seed 001): the lowat/2 wakeup rule",
        Experiment::E3 => "E3 (seed 002): TCP Small Queues and the device queue",
        Experiment::E4 => "E4 (seed 003): retransmit queue, list vs rb-tree",
        Experiment::E5 => "E5 (seed 004): skb sizing at write vs transmit time",
    }
}

/// The runs of `e` in `group` (all groups but sweeps if empty) whose variant starts
/// with `v`.
fn select<'a>(file: &'a ResultsFile, e: Experiment, group: &str, v: &str) -> Vec<&'a RunRecord> {
    (file.runs.iter())
        .filter(|r| r.experiment == e)
        .filter(|r| r.group == group || (group.is_empty() && !r.group.starts_with("sweep")))
        .filter(|r| r.variant.starts_with(v))
        .collect()
}

pub(crate) fn num(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 => format!("{x:.0}"),
        a if a >= 10.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}

/// "mean ± half-width of its 95 % CI" (the mean alone for one repetition), scaled
/// by `k` (n for a sum).
fn pm(sm: &stats::Summary, k: f64) -> String {
    match sm.half {
        Some(h) => format!("{} ± {}", num(sm.mean * k), num(h * k)),
        None => num(sm.mean * k),
    }
}

/// The cell of a figure over repetitions: its mean ± 95 % CI.
fn cell(xs: &[f64]) -> String {
    stats::summary(xs).map_or("-".into(), |sm| pm(&sm, 1.0))
}

/// "n = 5" or "n = 10 / 10".
fn n_of(na: usize, nb: usize) -> String {
    match na == nb {
        true => format!("n = {na}"),
        false => format!("n = {na} / {nb}"),
    }
}

/// "A -> B (ratio)" of a seed figure over the runs, each side its mean (or sum) ±
/// 95 % CI, the ratio with its bootstrap interval and n; or why it is missing.
fn lowtide_figure(file: &ResultsFile, e: Experiment, s: &SeedFigure) -> String {
    let xs = |v| -> Vec<f64> {
        (select(file, e, s.group, v).iter())
            .map(|r| (s.figure)(r))
            .filter(|x| x.is_finite())
            .collect()
    };
    let (xa, xb) = (xs(s.variants.0), xs(s.variants.1));
    let (Some(a), Some(b)) = (stats::summary(&xa), stats::summary(&xb)) else {
        return "not in this run".into();
    };
    let (agg, ka, kb) = match s.sum {
        true => (stats::Agg::Sum, a.n as f64, b.n as f64),
        false => (stats::Agg::Mean, 1.0, 1.0),
    };
    let label = format!("{} {} {} {:?}", e.name(), s.group, s.what, s.variants);
    let ratio = match a.mean != 0.0 {
        true => {
            let r = b.mean * kb / (a.mean * ka);
            match stats::ratio_ci(&xa, &xb, agg, &label) {
                Some((lo, hi)) => format!("{r:.2}x, 95 % CI {lo:.2}-{hi:.2}; "),
                None => format!("{r:.2}x; "),
            }
        }
        false => String::new(),
    };
    let unit = match s.unit {
        "" => String::new(),
        u => format!(" {u}"),
    };
    format!(
        "{} -> {}{unit} ({ratio}{})",
        pm(&a, ka),
        pm(&b, kb),
        n_of(a.n, b.n)
    )
}

/// report.md.
pub fn markdown(file: &ResultsFile, real: Option<&RealResults>, plots: &[PathBuf]) -> String {
    let mut s = String::new();
    let scale = match file.scale {
        Scale::Full => "the seeds' scale",
        Scale::Quick => "reduced scale (--quick)",
    };
    let _ = writeln!(s, "# lowtide: the seed experiments\n");
    let _ = writeln!(
        s,
        "Simulator runs at {scale}, base seed {}, {} runs{}. Every figure below is computed \
         from results.json beside this file (deterministic: the same command and seed give the \
         same bytes). Published figures are quoted from the messages of the seed commits \
         (the Linux commits listed at the end); their hardware was 2013-2017 Google \
         servers, so compare directions and ratios.\n",
        file.seed,
        file.runs.len(),
        match file.shard {
            Some(sh) => format!(" (shard {}/{} of {})", sh.index, sh.count, file.plan_runs),
            None if file.runs.len() < file.plan_runs => format!(
                " (of {} in the plan: the run was cut short, the missing runs are absent \
                 from every table and their checks fail)",
                file.plan_runs
            ),
            None => String::new(),
        }
    );
    let _ = writeln!(s, "{}\n", reps_line(file));
    let _ = writeln!(s, "{}\n", real_report::intro(real));
    for &e in &file.experiments {
        experiment_section(&mut s, file, real, e, plots);
    }
    checks_section(&mut s, file);
    real_report::checks(&mut s, real);
    s
}

/// "Repetitions: ..." : how many seeds each experiment's variants ran with.
fn reps_line(file: &ResultsFile) -> String {
    let parts: Vec<String> = (file.experiments.iter())
        .filter_map(|&e| {
            let runs: Vec<&RunRecord> = file.runs.iter().filter(|r| r.experiment == e).collect();
            let vs = by_variant(&runs);
            let lo = vs.iter().map(|(_, _, rs)| rs.len()).min()?;
            let hi = vs.iter().map(|(_, _, rs)| rs.len()).max()?;
            Some(match lo == hi {
                true => format!("{} n = {lo}", e.name().to_uppercase()),
                false => format!("{} n = {lo}-{hi}", e.name().to_uppercase()),
            })
        })
        .collect();
    format!(
        "Repetitions: each simulator variant ran with n seeds (base seed, base + 1, ...): \
         {}. A seed draws the stacks' initial sequence numbers and ports, the payload, \
         the device's flow hash and the link's loss and jitter; where a path has no loss \
         or jitter the runs differ only through those, and the spread can be nil. Figures \
         are mean ± the half-width of the 95 % confidence interval of the mean (Student's \
         t), ratios with a 95 % percentile-bootstrap interval (4,000 resamples of each \
         variant's runs, seeded by the figure's name, so the report is deterministic); n = \
         1 gives no interval.",
        parts.join(", ")
    )
}

fn experiment_section(
    s: &mut String,
    file: &ResultsFile,
    real: Option<&RealResults>,
    e: Experiment,
    plots: &[PathBuf],
) {
    let _ = writeln!(s, "## {}\n", title(e));
    let _ = writeln!(
        s,
        "| figure | seed (published) | lowtide sim | lowtide real path | kernel (this machine) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|");
    for (i, f) in seed_figures(e).into_iter().enumerate() {
        let (real_path, kernel) = real_report::cells(real, e, i);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {real_path} | {kernel} |",
            f.what,
            f.seed,
            lowtide_figure(file, e, &f)
        );
    }
    let _ = writeln!(s);
    runs_table(s, file, e);
    if e == Experiment::E4 {
        cpu_table(s, file);
    }
    for p in plots.iter().filter(|p| plot_of(p, e)) {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let _ = writeln!(s, "![{name}]({})\n", p.display());
    }
    if let Some(text) = notes(e) {
        let _ = writeln!(s, "{text}\n");
    }
    if e == Experiment::E3 {
        e3_bounds(s, file);
    }
    if e == Experiment::E2 {
        e2_sweep_table(s, file);
    }
    real_report::section(s, real, e);
}

fn plot_of(p: &Path, e: Experiment) -> bool {
    let n = p
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    n.starts_with(e.name()) && n.ends_with(".png")
}

/// The (group, variant) pairs of `runs` in plan order, each with its runs.
fn by_variant<'a>(runs: &[&'a RunRecord]) -> Vec<(String, String, Vec<&'a RunRecord>)> {
    let mut out: Vec<(String, String, Vec<&RunRecord>)> = Vec::new();
    for &r in runs {
        match out
            .iter_mut()
            .find(|(g, v, _)| *g == r.group && *v == r.variant)
        {
            Some((_, _, rs)) => rs.push(r),
            None => out.push((r.group.clone(), r.variant.clone(), vec![r])),
        }
    }
    out
}

/// "1-5" or "1, 3".
fn seeds(rs: &[&RunRecord]) -> String {
    let s: Vec<u64> = rs.iter().map(|r| r.seed).collect();
    let (lo, hi) = (s.iter().min(), s.iter().max());
    match (lo, hi) {
        (Some(&lo), Some(&hi)) if hi - lo + 1 == s.len() as u64 && s.len() > 1 => {
            format!("{lo}-{hi}")
        }
        _ => s.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
    }
}

/// Every variant of `e`: its parameters once, then one row per (group, variant)
/// with each figure's mean ± 95 % CI over the seeds (each run's own figures are in
/// results.json).
fn runs_table(s: &mut String, file: &ResultsFile, e: Experiment) {
    let runs: Vec<&RunRecord> = file.runs.iter().filter(|r| r.experiment == e).collect();
    let Some(first) = runs.first() else { return };
    let params: Vec<String> = (first.params.iter())
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(
        s,
        "Runs ({}; first run's parameters: {}). Each row is a variant over n seeds: \
         mean ± the half-width of its 95 % confidence interval (Student's t), each run's \
         own figures in results.json:\n",
        runs.len(),
        params.join(", ")
    );
    let _ = writeln!(
        s,
        "| group | variant | n | seeds | goodput Mbit/s | mean pages | wmem/flow KB | wakeups/s | wakeups/MB | dev. queue delay ms (mean) | (peak) | dev. queue KB/flow | mean RTT ms | IpOutRequests | TcpOutSegs | IpInReceives | retrans |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (g, v, rs) in by_variant(&runs) {
        let c =
            |f: fn(&Figures) -> f64| cell(&rs.iter().map(|r| f(&r.figures)).collect::<Vec<_>>());
        let _ = writeln!(
            s,
            "| {g} | {v} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            rs.len(),
            seeds(&rs),
            c(|f| f.goodput_bps / 1e6),
            c(|f| f.mean_pages),
            c(|f| f.mean_wmem_per_flow / 1024.0),
            c(|f| f.wakeups_per_s),
            c(|f| f.wakeups_per_mb),
            c(|f| f.dev_mean_delay_us / 1e3),
            c(|f| f.dev_peak_delay_us / 1e3),
            c(|f| f.dev_mean_bytes_per_flow / 1024.0),
            c(|f| f.mean_rtt_us / 1e3),
            c(|f| f.ip_out_requests as f64),
            c(|f| f.tcp_out_segs as f64),
            c(|f| f.ip_in_receives as f64),
            c(|f| f.retrans_segs as f64),
        );
    }
    let _ = writeln!(s);
}

/// E4's CPU model figures per run, and the model's constants.
fn cpu_table(s: &mut String, file: &ResultsFile) {
    let runs: Vec<&RunRecord> = (file.runs.iter())
        .filter(|r| r.experiment == Experiment::E4 && r.figures.cpu.is_some())
        .collect();
    let Some(model) = runs
        .first()
        .and_then(|r| r.figures.cpu)
        .and_then(|c| c.model)
    else {
        return;
    };
    // Runs from before 2026-12-06 carry no coalescing count: their backlog was
    // limited at sk_rcvbuf + sk_sndbuf of the bytes queued.
    let backlog = match runs
        .iter()
        .any(|r| r.figures.cpu.is_some_and(|c| c.backlog_coalesce.is_some()))
    {
        true => {
            "socket backlog as Linux 6.18's tcp_add_backlog (limit 2 x sk_rcvbuf + \
                 sk_sndbuf / 2 + 64 KB on sk_backlog.len, reset only when the backlog \
                 drains; ACKs coalesced into its tail)"
        }
        false => "backlog limit sk_rcvbuf + sk_sndbuf",
    };
    let source = match &file.calibration {
        Some(c) => format!("constants {}", c.describe()),
        None => "built-in constants, measured once with `cargo bench` (engine, sack, \
                 list_walk) on another machine (an Intel Xeon, 2026-11-23 and 25), not on \
                 the machine of this run; `lowtide experiment calibrate` measures them on \
                 the machine that runs E4"
            .to_string(),
    };
    let _ = writeln!(
        s,
        "CPU model of the sender (lowtide_sim::cpu; {source}). Used: {:.0} ns \
         per incoming packet, {:.0} ns per SACK block, {:.0} ns per tree node visited, per \
         list node visited by the list's length (a linked list of separately allocated \
         skbs, interpolated) {}, {:.0} ns per packet sent; {backlog}.\n",
        model.per_packet_in_ns,
        model.per_sack_block_ns,
        model.per_tree_node_ns,
        model
            .list_node_ns
            .iter()
            .map(|(n, ns)| format!("{} ns at {n} skbs", num(*ns)))
            .collect::<Vec<_>>()
            .join(", "),
        model.per_packet_out_ns
    );
    let _ = writeln!(s, "Per variant, mean ± 95 % CI over its n runs (the backlog's peak and drops: the largest of the runs):\n");
    let _ = writeln!(s, "| group | variant | n | goodput Mbit/s | mean packets in flight | skbs in rtx queue | CPU per ACK us | nodes per ACK | SACK blocks per ACK | CPU utilization % | backlog peak packets (max) | backlog drops (max) | backlog wait us |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (g, v, rs) in by_variant(&runs) {
        let cs: Vec<(f64, lowtide_sim::cpu::CpuFigures)> = (rs.iter())
            .filter_map(|r| r.figures.cpu.map(|c| (r.figures.goodput_bps, c)))
            .collect();
        let c = |f: &dyn Fn(&lowtide_sim::cpu::CpuFigures) -> f64| {
            cell(&cs.iter().map(|(_, x)| f(x)).collect::<Vec<_>>())
        };
        let max = |f: &dyn Fn(&lowtide_sim::cpu::CpuFigures) -> u64| {
            cs.iter().map(|(_, x)| f(x)).max().unwrap_or(0)
        };
        let inflight: Vec<f64> = rs.iter().map(|r| r.figures.mean_in_flight).collect();
        let gp: Vec<f64> = cs.iter().map(|(g, _)| g / 1e6).collect();
        let _ = writeln!(
            s,
            "| {g} | {v} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cs.len(),
            cell(&gp),
            cell(&inflight),
            c(&|x| x.queue_skbs_per_packet_in),
            c(&|x| x.cpu_per_packet_in_ns / 1e3),
            c(&|x| x.nodes_per_packet_in),
            c(&|x| x.sack_blocks_per_packet_in),
            c(&|x| x.utilization * 100.0),
            max(&|x| x.backlog_peak_packets),
            max(&|x| x.backlog_drops),
            c(&|x| x.backlog_mean_wait_us),
        );
    }
    let _ = writeln!(s);
    ratio_table(s, &runs);
}

/// E4's tree/list goodput ratio per group (the main comparison, the rate sweep and
/// the sensitivity sweep alike), with what decides it: the list's CPU and the
/// backlog drops of each side.
fn ratio_table(s: &mut String, runs: &[&RunRecord]) {
    let mut groups: Vec<&str> = runs.iter().map(|r| r.group.as_str()).collect();
    groups.dedup();
    let _ = writeln!(
        s,
        "The tree/list goodput ratio by group (means over the group's runs):\n"
    );
    let _ = writeln!(s, "| group | list Mbit/s | tree Mbit/s | tree/list | list CPU % | list backlog drops | tree backlog drops |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for g in groups {
        let side = |v: &str| -> Vec<&RunRecord> {
            (runs.iter().copied())
                .filter(|r| r.group == g && r.variant.starts_with(v))
                .collect()
        };
        let (a, b) = (side("A"), side("B"));
        let mean = |rs: &[&RunRecord], f: &dyn Fn(&RunRecord) -> f64| {
            rs.iter().map(|r| f(r)).sum::<f64>() / rs.len().max(1) as f64
        };
        let gp = |r: &RunRecord| r.figures.goodput_bps / 1e6;
        let drops = |r: &RunRecord| r.figures.cpu.map_or(0.0, |c| c.backlog_drops as f64);
        let (ga, gb) = (mean(&a, &gp), mean(&b, &gp));
        let ratio = match ga > 0.0 {
            true => format!("{:.2}x", gb / ga),
            false => "-".into(),
        };
        let _ = writeln!(
            s,
            "| {g} | {} | {} | {ratio} | {} | {} | {} |",
            num(ga),
            num(gb),
            num(mean(&a, &|r| r
                .figures
                .cpu
                .map_or(0.0, |c| c.utilization * 100.0))),
            num(mean(&a, &drops)),
            num(mean(&b, &drops)),
        );
    }
    let _ = writeln!(s);
}

/// E3's B and C held against the seed's published bounds, from the runs.
fn e3_bounds(s: &mut String, file: &ResultsFile) {
    let e = Experiment::E3;
    let mean = |g: &str, v: &str, f: fn(&RunRecord) -> f64| {
        let xs: Vec<f64> = (select(file, e, g, v).iter())
            .map(|r| f(r))
            .filter(|x| x.is_finite())
            .collect();
        stats::summary(&xs).map(|sm| sm.mean)
    };
    let delay: fn(&RunRecord) -> f64 = |r| r.figures.dev_mean_delay_us / 1e3;
    let mut parts = Vec::new();
    for (g, bound) in [("1 Gbit/s, 1 flow", 1.0), ("100 Mbit/s, 1 flow", 8.0)] {
        for (v, name) in [("B", "today's rule (B)"), ("C", "seed 002's rule (C)")] {
            let (Some(all), Some(steady)) = (mean(g, v, delay), mean(g, v, steady_queue_ms)) else {
                continue;
            };
            let verdict = |x: f64| match x < bound {
                true => "meets",
                false => "misses",
            };
            parts.push(format!(
                "{g}, {name}: {} ms over the run ({} the seed's < {bound} ms), {} ms in its \
                 second half ({})",
                num(all),
                verdict(all),
                num(steady),
                verdict(steady)
            ));
        }
    }
    if !parts.is_empty() {
        let _ = writeln!(
            s,
            "Against the seed's bounds, per bulk sender (means over the seeds): {}.\n",
            parts.join("; ")
        );
    }
}

/// What to keep in mind when reading an experiment's figures.
fn notes(e: Experiment) -> Option<&'static str> {
    Some(match e {
        Experiment::E1 => {
            "The seed read /proc/net/protocols 60 s into 90 s runs; lowtide's pages are \
            host A's sockstat-style memory (send plus receive queues) averaged over the \
            whole run, slow start included. The seed's scale is a LAN: its single flow did \
            17.4 Gbit/s with a final send buffer of 1.6 MB (netperf's \"Send Socket Size \
            Final\"), so its round trip held well under 1 MB; E1 runs on 25 Gbit/s with a \
            100 us round trip (312 KB in flight at the link's rate), 3 s (30,000 round \
            trips). The seed's context switches are of one netperf flow: the \
            context-switch row sets them beside lowtide's one flow; lowtide counts writer \
            wakeups (EPOLLOUT events delivered), not context switches; the 200-flow \
            wakeups are a row of their own. In the one-flow LAN group lowat binds: the \
            send buffer (tcp_sndbuf_expand: twice cwnd's truesize) leaves room for unsent \
            data, which lowat caps at 128 KB, so the writer wakes more often and holds \
            less. The last group is the setting E1 had before (10 Gbit/s, 10 ms): there \
            tcp_wmem[2] (4 MB per 10 ms round trip) caps the flow below the link, nothing \
            waits unsent, lowat never binds and A equals B. A results.json recorded \
            before 2026-12-02 ran every E1 group at 10 Gbit/s and 10 ms (its runs table's \
            parameters say which)."
        }
        Experiment::E2 => {
            "The seed's hosts had 64 MB tcp_wmem and netem's 100 ms; lowtide uses the \
            seed's sysctls and the default tcp_rmem (32 MB). What sets A's memory (the \
            sweep below): without lowat each writer fills its send buffer, and \
            tcp_sndbuf_expand sizes that buffer from the peak cwnd, 3 (BBR's \
            sndbuf_expand) x cwnd x 2,304 bytes per segment, with BBR's cwnd about twice \
            the bandwidth-delay product: about 3 x 2 x 2,304 / 1,448 = 9.5 times the \
            per-flow BDP per flow. So A's memory follows the per-flow rate chosen here \
            (100 Mbit/s at 100 ms, a 1.25 MB BDP), not the receive window: an earlier \
            version of this report blamed a ~21 MB receive-window cap, which cannot bind \
            at a 1.25 MB BDP. The seed's 54 MB per flow would be a per-flow BDP near 5.7 \
            MB at that ratio (about 450 Mbit/s per flow at 100 ms), which its message does \
            not give."
        }
        Experiment::E3 => {
            "Delay is per packet from enqueue to the start of its serialization in host \
            A's NIC queue (a 64 KB GSO packet counts once), averaged over the whole run, \
            ramp included; the steady-state rows average the NIC backlog over the run's \
            second half (the time series, every 5 ms) as a delay at the link rate. Without \
            TSQ (A) the queue grows until the send buffer stops the writer, not the receive \
            window: in the one-flow 1 Gbit/s A run (its per-flow time series, \
            docs/experiments/README.md has the command) sk_wmem_queued stays within a few \
            per cent of sk_sndbuf = tcp_wmem[2] = 4 MB with nothing unsent, all of it in \
            flight below cwnd, and the peer's window (6.2 MB) is never reached; at 100 \
            Mbit/s the queue needs about 5 s to reach that cap (4 MB is 340 ms there), so \
            the run's mean and its second half differ. B is TSQ as Linux has had it since \
            3.12: a limit of max(2 x truesize, pacing_rate >> 10), capped by \
            tcp_limit_output_bytes (4 MB since 6.16, for paced sockets too). C is seed \
            002's own rule (46d3ceabd8d9, Linux 3.6; `experimental.tsq_rule=fixed` with \
            tcp_limit_output_bytes 128 KB): no new data while sk_wmem_alloc >= 128 KB, at \
            any rate, so about two 64 KB TSO packets (0.5 ms of waiting at 1 Gbit/s, 10 ms \
            at 100 Mbit/s). The seed also capped the TSO size goal at half that limit (64 \
            KB, the GSO maximum anyway; not modeled). TSO autosizing (Linux 3.12, after the \
            seed) is on in all three. The seed does not say which RTT, windows or duration \
            it used (1 ms, the defaults and 10 s here). The kernel column's A and B runs have lowtide's 1 ms too: \
            their htb + pfifo sits on the kernel sender's TUN device and `lowtide link` \
            beyond it adds the round trip (this kernel has no netem, and veth alone has no \
            delay), so tcp_tso_autosize sees a min_rtt like lowtide's. It matters at 100 \
            Mbit/s: on a path below 512 us tcp_tso_autosize adds all of gso_max_size >> \
            (min_rtt >> tcp_tso_rtt_log) = 64 KB to each TSO packet's goal and TSQ's 2 x \
            truesize lets about 130 KB wait (10.5 ms at 100 Mbit/s), as the kernel's runs \
            over veth without delay did before 2026-12-02; at 1 ms the bonus is 32 KB \
            (min_rtt below 1,024 us) or 16 KB, so the goal is that plus a millisecond at \
            the pacing rate (docs/experiments/README.md, \"E3: seed 002's own rule, the \
            send buffer, and the 100 Mbit/s gap\", has lowtide's simulator on a 100 us \
            path, which queues 10.5 ms too). Measured on 2026-12-03: over this path the \
            kernel's B at 100 Mbit/s queues 8.8 ms (10.0 over veth), twice lowtide's real \
            path. The reason is the device, not TSQ's rule: TUN and veth orphan the skb \
            when the qdisc hands it to the driver (tun_net_xmit, veth_xmit), so the \
            packet on the wire no longer counts in sk_wmem_alloc, while lowtide's \
            emulated NIC completes it at the end of its serialization, as a hardware NIC \
            does. The freed budget lets more wait, flights then exceed cwnd so CUBIC \
            grows it, and the TSO packets approach the autosize goal: the simulator with \
            the kernel's completion point (`--tx-completion dequeue`) queues 6.6 ms \
            instead of 2.4 (docs/experiments/README.md). The kernel's A equals its B: \
            since Linux 3.12 tcp_limit_output_bytes only caps TSQ's limit of max(2 x \
            truesize, pacing_rate >> 10), so raising it does not turn TSQ off; R is the \
            kernel's queue without TSQ."
        }
        Experiment::E4 => {
            "In virtual time a walk costs nothing, so the sender's CPU is modeled \
            (table above): each ACK costs the work the engine did, counted in queue nodes \
            visited, a list node at the cost measured for a linked list of separately \
            allocated skbs of the queue's length (where the constants come from: above \
            the table). The path has the \
            seed's netem `delay 150ms 200us`: 200 us of jitter on the data direction, \
            which reorders packets sent microseconds apart (GRO off: the seed's SACK \
            storm). The receiver's buffer is 1 GiB from the start (tcp_rmem[1] = \
            tcp_rmem[2]): the seed measured the sender, and with 256 MB reached by DRS \
            from 128 KB the receive window decided the goodput (E4_RCVBUF in \
            lowtide-sim's experiment plan says how). The list ablation walks as Linux did \
            just before seed 003: \
            tcp_sacktag_write_queue from the head where the recv_sack_cache and \
            highest_sack hints do not apply, tcp_sacktag_skip linear; the retransmit and \
            lost hints are pointers in both shapes; RACK uses the time-sorted list in both \
            (tcp_mark_head_lost's walks of 4.13 are not modeled); the receiver sends a SACK \
            for every out-of-order segment (tcp_comp_sack_nr 0: the seed's 4.14 receivers \
            predate SACK compression). The receiver is Linux 6.18's by choice, with that \
            one 4.14 setting: the SACK stream is the load the seed measured, so it is \
            4.14's; the window is 6.18's, but with 1 GiB from the start it holds twice the \
            path's bandwidth-delay product (E4_RCVBUF), so which era's window rules apply \
            is not what the comparison measures. Why the ratio \
            can stay below the seed's 6.4x, from the table above: the retransmit queue holds \
            thousands of skbs (64 KB TSO skbs, SACKed runs merged), not the seed's \
            ~100,000, so a list walk is short and nearly cache-warm; and the socket \
            backlog (tcp_add_backlog's limit: over 1 GB here, since the sender \
            shares the receiver's 1 GiB tcp_rmem, where the seed's sender had its own \
            default) does not overflow, where the seed's hosts were \"massively dropping \
            packets\" (see the drops column). The rate sweep shows the cost against \
            packets in flight. `lowtide experiment e4 --sensitivity` is the sensitivity \
            sweep: per-ACK and per-node costs x0.5 and x2, and the sender's backlog as \
            Linux sizes it for the seed's sender (its own 128 KB sk_rcvbuf, tcp_wmem[2] \
            256 down to 16 MB), where the list's backlog drops; its results are apart \
            from these (docs/experiments/README.md, \"E4's sensitivity sweep\")."
        }
        Experiment::E5 => {
            "Counters are host A's nstat counters for the whole transfer (handshake \
            included), on a 10 Gbit/s NIC. History, in order: E5 first ran on a 1 Gbit/s \
            NIC, and there IpInReceives went the wrong way (sized at transmit time, \
            lowtide's simulator drew 695 ACKs where the seed's receiver sent 221, with \
            182 packets sent; docs/experiments/README.md, 2026-11-23); only after that was \
            the NIC made 10 Gbit/s (2026-11-25), on this argument: the seed's NIC rate is \
            not published, but its IpInReceives followed IpOutRequests (one ACK per TSO \
            packet), so its receiver's GRO got each TSO packet whole within one NAPI \
            poll, which a 10 Gbit/s NIC does (a 64 KB packet is 52 us on the wire). At 1 \
            Gbit/s (the second group, kept in the plan to show it) a packet's segments \
            arrive 12 us apart, a 20 us NAPI poll holds about two, and the receiver acks \
            every second segment whatever the sender's packet sizes: IpInReceives does not \
            fall there. The choice of NIC was made after seeing the direction fail; the \
            GRO argument explains that failure and the kernel's own receiver (the real \
            path's column, through `lowtide link`, which hands GSO packets whole) agrees \
            with it, but it remains a choice made after the fact."
        }
    })
}

/// The simulator's checked directions.
fn checks_section(s: &mut String, file: &ResultsFile) {
    directions_table(s, "Directions checked", &file.checks);
}

/// The one "Directions checked" table: a heading and a row per claim, of the
/// simulator's checks or the real path's.
/// The summary's lines for `checks`: how many pass, then each failure.
pub(crate) fn checks_summary(s: &mut String, label: &str, checks: &[DirectionCheck]) {
    let pass = checks.iter().filter(|c| c.pass).count();
    let _ = writeln!(s, "{label}: {pass} of {} checks pass", checks.len());
    for c in checks.iter().filter(|c| !c.pass) {
        let _ = writeln!(
            s,
            "  FAIL {}: {} ({})",
            c.experiment.name(),
            c.claim,
            c.detail
        );
    }
}

pub(crate) fn directions_table(s: &mut String, heading: &str, checks: &[DirectionCheck]) {
    if checks.is_empty() {
        return;
    }
    let _ = writeln!(s, "## {heading}\n");
    let _ = writeln!(s, "| experiment | claim | figures | result |");
    let _ = writeln!(s, "|---|---|---|---|");
    for c in checks {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            c.experiment.name(),
            c.claim,
            c.detail,
            if c.pass { "pass" } else { "FAIL" }
        );
    }
    let _ = writeln!(s);
}

/// One line naming what produced a results file's runs (its provenance object):
/// command, commit, time, machine, load.
pub fn provenance_line(what: &str, p: &serde_json::Value) -> String {
    use serde_json::Value;
    let s = |k: &str| match &p[k] {
        Value::Null => "unknown".to_string(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let commit = match p["commit"].as_str() {
        Some(c) => c.chars().take(12).collect(),
        None => "unknown".to_string(),
    };
    let dirty = match p["dirty"].as_bool() {
        Some(true) => ", with uncommitted changes",
        Some(false) => "",
        None => ", dirty flag unknown",
    };
    let mut line = format!(
        "{what}: `lowtide {}` at commit {commit}{dirty} ({}), {} to {}, on {} ({} logical CPUs, Linux {}), load average {} before and {} after",
        s("command"),
        s("rustc"),
        s("started"),
        s("finished"),
        s("cpu_model"),
        s("logical_cpus"),
        s("kernel"),
        s("loadavg_before"),
        s("loadavg_after"),
    );
    for e in p["earlier"].as_array().into_iter().flatten() {
        line += &format!(
            "; {} (kept from the earlier run this one was added to)",
            provenance_line("the other real-path runs", e)
        );
    }
    line
}

/// `lowtide experiment summary DIR`: what produced DIR/results.json and every seed
/// figure beside lowtide's (simulator, real path, kernel), as markdown; the block
/// README.md, BENCHMARKS.md and docs/experiments/README.md quote (a test compares).
pub fn summary_markdown(
    file: &ResultsFile,
    real: Option<&RealResults>,
    prov: (Option<&serde_json::Value>, Option<&serde_json::Value>),
    only: Option<Experiment>,
) -> String {
    let mut s = String::new();
    let exps: Vec<Experiment> = (file.experiments.iter())
        .copied()
        .filter(|&e| only.is_none_or(|o| o == e))
        .collect();
    let runs: Vec<&RunRecord> = (file.runs.iter())
        .filter(|r| exps.contains(&r.experiment))
        .collect();
    let checks: Vec<_> = (file.checks.iter())
        .filter(|c| exps.contains(&c.experiment))
        .collect();
    let _ = match prov.0 {
        Some(p) => writeln!(s, "{}.", provenance_line("Simulator", p)),
        None => writeln!(
            s,
            "Simulator: provenance not recorded in this results.json (written before it had one)."
        ),
    };
    let scale = match file.scale {
        Scale::Full => "the seeds' scale",
        Scale::Quick => "reduced scale (--quick)",
    };
    let _ = writeln!(
        s,
        "{} simulator runs at {scale} (base seed {}), every byte verified in {}; {} of {} direction checks pass. {}\n",
        runs.len(),
        file.seed,
        runs.iter().filter(|r| r.figures.verified).count(),
        checks.iter().filter(|c| c.pass).count(),
        checks.len(),
        reps_line(file).split(". ").next().unwrap_or("")
    );
    if let Some(real) = real {
        let _ = match prov.1 {
            Some(p) => writeln!(s, "{}.", provenance_line("Real path", p)),
            None => writeln!(
                s,
                "Real path: provenance not recorded in this results.json (written before it had one)."
            ),
        };
        let rr: Vec<_> = (real.runs.iter())
            .filter(|r| r.experiment.is_some_and(|e| exps.contains(&e)))
            .collect();
        let rc: Vec<_> = (real.checks.iter())
            .filter(|c| exps.contains(&c.experiment))
            .collect();
        let _ = writeln!(
            s,
            "{} real-path runs ({} repetition(s) of the plan, interleaved; figures are means with the range of the repetitions), {} without error; {} of {} real-path checks pass.\n",
            rr.len(),
            rr.iter().map(|r| r.rep + 1).max().unwrap_or(0),
            rr.iter().filter(|r| r.error.is_none()).count(),
            rc.iter().filter(|c| c.pass).count(),
            rc.len()
        );
    }
    let _ = writeln!(
        s,
        "| experiment | figure | seed (published) | lowtide sim | lowtide real path | kernel (this machine) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for e in exps {
        for (i, f) in seed_figures(e).into_iter().enumerate() {
            let (real_path, kernel) = real_report::cells(real, e, i);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {real_path} | {kernel} |",
                e.name().to_uppercase(),
                f.what,
                f.seed,
                lowtide_figure(file, e, &f)
            );
        }
    }
    s
}

/// The text printed after a run.
pub fn summary_text(file: &ResultsFile, out: &Path) -> String {
    let mut s = String::new();
    // Labels whole: the column is as wide as the longest.
    let width = (file.experiments.iter())
        .flat_map(|&e| seed_figures(e))
        .map(|f| f.what.chars().count())
        .max()
        .unwrap_or(0);
    for &e in &file.experiments {
        let _ = writeln!(s, "{}", title(e));
        for f in seed_figures(e) {
            let _ = writeln!(
                s,
                "  {:<width$} seed {:<32} lowtide {}",
                f.what,
                f.seed,
                lowtide_figure(file, e, &f)
            );
        }
    }
    if !file.checks.is_empty() {
        checks_summary(&mut s, "directions", &file.checks);
    }
    let _ = writeln!(s, "wrote {}", out.join("report.md").display());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_run_added_to_an_earlier_one_names_both() {
        let old =
            serde_json::json!({"command": "experiment all --real", "commit": "04adc23b96ed0b3a"});
        let new = serde_json::json!({
            "command": "experiment e3 --real",
            "commit": "a1174a43d634f100",
            "earlier": [old],
        });
        let line = provenance_line("Real path", &new);
        assert!(
            line.starts_with("Real path: `lowtide experiment e3 --real` at commit a1174a43d634")
        );
        assert!(line.contains(
            "the other real-path runs: `lowtide experiment all --real` at commit 04adc23b96ed"
        ));
        let mut md = String::new();
        crate::provenance::report_section(&mut md, None, Some(&new));
        assert!(md.contains("Real-path runs kept from an earlier run"));
        assert!(md.contains("`lowtide experiment all --real`"));
    }

    #[test]
    fn the_summary_shows_every_label_whole() {
        let file = ResultsFile::new(
            Experiment::ALL.to_vec(),
            Scale::Quick,
            1,
            0,
            None,
            Vec::new(),
        );
        let text = summary_text(&file, Path::new("out"));
        for e in Experiment::ALL {
            for f in seed_figures(e) {
                assert!(
                    text.contains(&format!("  {} ", f.what)),
                    "{}: {text}",
                    f.what
                );
            }
        }
    }
}
