//! report.md and the text summary, rendered from a results file only.

use super::real::report as real_report;
use super::real::RealResults;
use lowtide_sim::experiment::{Experiment, Figures, ResultsFile, RunRecord, Scale};
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
    /// The figure and its unit.
    figure: fn(&Figures) -> f64,
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
    let pages: fn(&Figures) -> f64 = |f| f.mean_pages;
    let mbit: fn(&Figures) -> f64 = |f| f.goodput_bps / 1e6;
    let wake: fn(&Figures) -> f64 = |f| f.wakeups_per_s;
    let delay_ms: fn(&Figures) -> f64 = |f| f.dev_mean_delay_us / 1e3;
    match e {
        Experiment::E1 => vec![
            f("TCP memory, 200 flows (pages; seed: 60 s in, lowtide: mean over the run)", "45,458 -> 20,567 (0.45x)", "200 flows", ("A", "B"), pages, "pages"),
            f("goodput, 200 flows", "not published", "200 flows", ("A", "B"), mbit, "Mbit/s"),
            f("one flow's throughput", "17,448 vs 17,321 Mbit/s (0.99x)", "1 flow", ("A", "B"), mbit, "Mbit/s"),
            f("context switches (seed: one flow, 10 x 20 s) / writer wakeups per second (lowtide, 200 flows)", "412,514 -> 2,675,818 (6.5x)", "200 flows", ("A", "B"), wake, "wakeups/s"),
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
        ],
        Experiment::E4 => vec![SeedFigure {
            sum: true,
            ..f("sum of the runs' goodput (list -> tree)", "2,840 -> 18,053 Mbit/s (6.4x)", "", ("A", "B"), mbit, "Mbit/s")
        }],
        Experiment::E5 => vec![
            f("IpOutRequests", "599 -> 232 (0.39x)", "2,000,000 bytes", ("A", "B"), |f| f.ip_out_requests as f64, ""),
            f("IpInReceives (ACKs at the sender)", "600 -> 221 (0.37x)", "2,000,000 bytes", ("A", "B"), |f| f.ip_in_receives as f64, ""),
            f("TcpOutSegs", "1,397 -> 1,397 (1.00x)", "2,000,000 bytes", ("A", "B"), |f| f.tcp_out_segs as f64, ""),
            f("throughput", "44.22 -> 44.27 Mbit/s (1.00x)", "2,000,000 bytes", ("A", "B"), mbit, "Mbit/s"),
        ],
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

fn num(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 => format!("{x:.0}"),
        a if a >= 10.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}

/// "A -> B (ratio)" of a seed figure over the runs, or why it is missing.
fn lowtide_figure(file: &ResultsFile, e: Experiment, s: &SeedFigure) -> String {
    let agg = |v| {
        let runs = select(file, e, s.group, v);
        let xs: Vec<f64> = runs.iter().map(|r| (s.figure)(&r.figures)).collect();
        match (xs.is_empty(), s.sum) {
            (true, _) => None,
            (false, true) => Some(xs.iter().sum::<f64>()),
            (false, false) => Some(xs.iter().sum::<f64>() / xs.len() as f64),
        }
    };
    match (agg(s.variants.0), agg(s.variants.1)) {
        (Some(a), Some(b)) => {
            let ratio = if a != 0.0 {
                format!(" ({:.2}x)", b / a)
            } else {
                String::new()
            };
            format!("{} -> {} {}{ratio}", num(a), num(b), s.unit)
        }
        _ => "not in this run".into(),
    }
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
    let _ = writeln!(s, "{}\n", real_report::intro(real));
    for &e in &file.experiments {
        experiment_section(&mut s, file, real, e, plots);
    }
    checks_section(&mut s, file);
    real_report::checks(&mut s, real);
    s
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
    real_report::section(s, real, e);
}

fn plot_of(p: &Path, e: Experiment) -> bool {
    let n = p
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    n.starts_with(e.name()) && n.ends_with(".png")
}

/// Every run of `e`: its parameters once, then one row per run.
fn runs_table(s: &mut String, file: &ResultsFile, e: Experiment) {
    let runs: Vec<&RunRecord> = file.runs.iter().filter(|r| r.experiment == e).collect();
    let Some(first) = runs.first() else { return };
    let params: Vec<String> = (first.params.iter())
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(
        s,
        "Runs ({}; first run's parameters: {}):\n",
        runs.len(),
        params.join(", ")
    );
    let _ = writeln!(
        s,
        "| group | variant | seed | goodput Mbit/s | mean pages | wmem/flow KB | wakeups/s | wakeups/MB | dev. queue delay ms (mean/peak) | dev. queue KB/flow | mean RTT ms | IpOutRequests | TcpOutSegs | IpInReceives | retrans |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in runs {
        let f = &r.figures;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} | {} |",
            r.group,
            r.variant,
            r.seed,
            num(f.goodput_bps / 1e6),
            num(f.mean_pages),
            num(f.mean_wmem_per_flow / 1024.0),
            num(f.wakeups_per_s),
            num(f.wakeups_per_mb),
            num(f.dev_mean_delay_us / 1e3),
            num(f.dev_peak_delay_us / 1e3),
            num(f.dev_mean_bytes_per_flow / 1024.0),
            num(f.mean_rtt_us / 1e3),
            f.ip_out_requests,
            f.tcp_out_segs,
            f.ip_in_receives,
            f.retrans_segs
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
    let _ = writeln!(
        s,
        "CPU model of the sender (lowtide_sim::cpu; constants from `cargo bench -p lowtide \
         --bench engine`, `--bench sack` and `--bench list_walk` on this machine): {:.0} ns \
         per incoming packet, {:.0} ns per SACK block, {:.0} ns per tree node visited, per \
         list node visited by the list's length (a linked list of separately allocated \
         skbs, interpolated) {}, {:.0} ns per packet sent; backlog limit sk_rcvbuf + \
         sk_sndbuf.\n",
        model.per_packet_in_ns,
        model.per_sack_block_ns,
        model.per_tree_node_ns,
        model
            .list_node_ns
            .iter()
            .map(|(n, ns)| format!("{ns} ns at {n} skbs"))
            .collect::<Vec<_>>()
            .join(", "),
        model.per_packet_out_ns
    );
    let _ = writeln!(s, "| group | variant | rep | goodput Mbit/s | mean packets in flight | skbs in rtx queue | CPU per ACK us | nodes per ACK | SACK blocks per ACK | CPU utilization | backlog peak packets | backlog drops | backlog wait us |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in runs {
        let Some(c) = r.figures.cpu else { continue };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} % | {} | {} | {} |",
            r.group,
            r.variant,
            r.rep,
            num(r.figures.goodput_bps / 1e6),
            num(r.figures.mean_in_flight),
            num(c.queue_skbs_per_packet_in),
            num(c.cpu_per_packet_in_ns / 1e3),
            num(c.nodes_per_packet_in),
            num(c.sack_blocks_per_packet_in),
            c.utilization * 100.0,
            c.backlog_peak_packets,
            c.backlog_drops,
            num(c.backlog_mean_wait_us)
        );
    }
    let _ = writeln!(s);
}

/// What to keep in mind when reading an experiment's figures.
fn notes(e: Experiment) -> Option<&'static str> {
    Some(match e {
        Experiment::E1 => {
            "The seed read /proc/net/protocols 60 s into 90 s runs; lowtide's \
            pages are host A's sockstat-style memory (send plus receive queues) averaged over \
            the whole run, slow start included. The seed's context switches are of one flow; \
            lowtide counts writer wakeups (EPOLLOUT events delivered), not context switches."
        }
        Experiment::E2 => {
            "The seed's hosts had 64 MB tcp_wmem and netem's 100 ms; lowtide \
            uses the seed's sysctls and the default tcp_rmem (32 MB, Linux 6.16+), which caps \
            each flow's window at about 21 MB (scaling_ratio 162/256): the unsent backlog without lowat is what grows, as in the seed."
        }
        Experiment::E3 => {
            "Delay is per packet from enqueue to the start of its serialization \
            in host A's NIC queue (a 64 KB GSO packet counts once), averaged over the whole \
            run, ramp included. Without TSQ the queue grows until the receive window (about \
            21 MB per flow with the default tcp_rmem) stops the flow; the plot of the delay over \
            time shows when that is (at the seeds' scale, 100 Mbit/s with 4 flows, it is still \
            growing when the 10 s run ends). \
            The seed does not say which RTT, windows or duration it used."
        }
        Experiment::E4 => {
            "In virtual time a walk costs nothing, so the sender's CPU is modeled \
            (table above): each ACK costs the work the engine did, counted in queue nodes \
            visited, a list node at the cost measured for a linked list of separately \
            allocated skbs of the queue's length (`--bench list_walk`). The path has the \
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
            predate SACK compression). In the last full run (2026-11-25, still with the \
            256 MB receive buffer) the list visited 1,000-1,460 \
            nodes per ACK against the tree's 40-42 (table above), the sender's CPU was busy \
            37-78 % (tree 21-46 %), ACKs waited 67-208 ms in the backlog (tree 1-6 ms), the \
            list's RTT grew to 217-358 ms and its goodput fell. Why the ratio stayed below \
            the seed's 6.4x there, as far as measured: the queue held only 1,700-3,300 skbs \
            (64 KB TSO skbs, SACKed runs merged), so a list node costs 6-8 ns (nearly \
            cache-warm) where the seed counts 40 ns per miss at ~100,000 skbs; the backlog \
            never overflows (its limit, sk_rcvbuf + sk_sndbuf, is hundreds of MB with these \
            buffers), where the seed saw massive drops; packets in flight stayed at \
            10,000-22,000. Without the jitter the same model gives 0.95x \
            (docs/experiments/README.md, \"E4 with the seed's jitter\"). The sweep shows \
            the cost against packets in flight."
        }
        Experiment::E5 => {
            "Counters are host A's nstat counters for the whole transfer \
            (handshake included), on a 10 Gbit/s NIC. The seed's NIC rate is not \
            published, but its IpInReceives followed IpOutRequests (one ACK per TSO \
            packet), so its receiver's GRO got each TSO packet whole within one NAPI \
            poll: at 10 Gbit/s a 64 KB packet is 52 us on the wire. At 1 Gbit/s (the \
            second group) a packet's segments arrive 12 us apart, a 20 us NAPI poll holds \
            about two, and the receiver acks every second segment whatever the sender's \
            packet sizes: IpInReceives does not fall there."
        }
    })
}

fn checks_section(s: &mut String, file: &ResultsFile) {
    if file.checks.is_empty() {
        return;
    }
    let _ = writeln!(s, "## Directions checked\n");
    let _ = writeln!(s, "| experiment | claim | figures | result |");
    let _ = writeln!(s, "|---|---|---|---|");
    for c in &file.checks {
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
    let pass = file.checks.iter().filter(|c| c.pass).count();
    if !file.checks.is_empty() {
        let _ = writeln!(s, "directions: {pass} of {} checks pass", file.checks.len());
        for c in file.checks.iter().filter(|c| !c.pass) {
            let _ = writeln!(
                s,
                "  FAIL {}: {} ({})",
                c.experiment.name(),
                c.claim,
                c.detail
            );
        }
    }
    let _ = writeln!(s, "wrote {}", out.join("report.md").display());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
