//! `lowtide sim run FILE`: a scenario file (hosts, routers, links with their queues,
//! flows, checks; `lowtide_sim::network`) run in the simulator, with a table per
//! flow and per queue, or the results as JSON. Exit codes: 0 every byte verified
//! and every check held, 1 a flow failed or a check did not hold (each failed one
//! on stderr with its values), 2 a bad file or argument.

use clap::Args;
use lowtide_sim::network::{run_text, NetResults};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// `sim run`'s arguments.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario file (TOML; README, "Scenarios").
    file: PathBuf,
    /// Apply the file's `[quick]` overrides: its reduced scale, for CI.
    #[arg(long)]
    quick: bool,
    /// Override a setting of the file: `PATH=VALUE`, e.g.
    /// `links.bottleneck.queue=fq_codel` or `flows.bulk.count=4` (repeatable;
    /// applied after --quick).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    sets: Vec<String>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `sim run`.
pub fn run(args: &RunArgs) -> ExitCode {
    let shown = args.file.display();
    let text = match std::fs::read_to_string(&args.file) {
        Ok(t) => t,
        Err(e) => return crate::usage_error(&format!("{shown}: {e}")),
    };
    let r = match run_text(&text, args.quick, &args.sets) {
        Ok(r) => r,
        Err(e) => return crate::usage_error(&format!("{shown}: {e}")),
    };
    if args.json {
        match serde_json::to_string_pretty(&r) {
            Ok(s) => println!("{s}"),
            Err(e) => return crate::run_failure(&format!("cannot serialize results: {e}")),
        }
    } else {
        print!("{}", render(&r));
    }
    let mut ok = true;
    if let Some(why) = &r.failure {
        eprintln!("lowtide: {shown}: {why}");
        ok = false;
    }
    for c in r.checks.iter().filter(|c| !c.pass) {
        eprintln!(
            "lowtide: {shown}: check failed: {} (left {}, right {})",
            c.check,
            num(c.left),
            num(c.right)
        );
        ok = false;
    }
    match ok {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(1),
    }
}

/// A figure for the text tables: three significant decimals at most.
fn num(x: f64) -> String {
    match x {
        x if x.is_nan() => "-".into(),
        x if x.abs() >= 100.0 => format!("{x:.0}"),
        x if x.abs() >= 10.0 => format!("{x:.1}"),
        x => format!("{x:.2}"),
    }
}

/// The text report: flows, queues (those that carry a flow's data), the verdict
/// and the checks.
pub fn render(r: &NetResults) -> String {
    let mut s = String::new();
    let w = |xs: &mut dyn Iterator<Item = usize>, head: &str| xs.max().unwrap_or(0).max(head.len());
    let (nw, hw) = (
        w(&mut r.flows.iter().map(|f| f.name.len()), "flow"),
        w(
            &mut r.flows.iter().flat_map(|f| [f.from.len(), f.to.len()]),
            "from",
        ),
    );
    let _ = writeln!(
        s,
        "{:<nw$} {:<hw$} {:<hw$} {:<6} {:>7} {:>11} {:>7} {:>7} {:>5} {:>8} {:>7}",
        "flow",
        "from",
        "to",
        "cc",
        "Mbit/s",
        "bytes",
        "rtt ms",
        "min ms",
        "retr",
        "delay ms",
        "p99 ms"
    );
    for f in &r.flows {
        let opt = |x: Option<f64>| x.map_or("-".into(), num);
        let _ = writeln!(
            s,
            "{:<nw$} {:<hw$} {:<hw$} {:<6} {:>7} {:>11} {:>7} {:>7} {:>5} {:>8} {:>7}",
            f.name,
            f.from,
            f.to,
            f.cc,
            num(f.goodput_mbps),
            f.bytes,
            num(f.rtt_ms),
            num(f.min_rtt_ms),
            f.retrans,
            opt(f.delay_ms),
            opt(f.delay_p99_ms)
        );
    }
    let queues: Vec<_> = r.queues.iter().filter(|q| q.flows > 0).collect();
    let qw = w(&mut queues.iter().map(|q| q.name.len()), "queue");
    let _ = writeln!(
        s,
        "\n{:<qw$} {:<8} {:>5} {:>9} {:>7} {:>10} {:>7} {:>6} {:>6} {:>5} {:>5}",
        "queue",
        "qdisc",
        "flows",
        "backlog B",
        "max pkt",
        "sojourn ms",
        "max ms",
        "drops",
        "ce",
        "util",
        "jain"
    );
    for q in queues {
        let _ = writeln!(
            s,
            "{:<qw$} {:<8} {:>5} {:>9} {:>7} {:>10} {:>7} {:>6} {:>6} {:>5.2} {:>5}",
            q.name,
            q.qdisc,
            q.flows,
            num(q.backlog_bytes),
            q.backlog_max_packets,
            num(q.sojourn_ms),
            num(q.sojourn_max_ms),
            q.drops,
            q.ce_marks,
            q.utilization,
            q.jain.map_or("-".into(), |j| format!("{j:.2}"))
        );
    }
    let _ = writeln!(
        s,
        "\n{:.1} s simulated: {} ({} events, {} packets, {:.2} s wall)",
        r.duration_s,
        r.verdict.summary(),
        r.sim_events,
        r.sim_packets,
        r.sim_wall_s
    );
    for c in &r.checks {
        let verdict = if c.pass { "ok" } else { "FAILED" };
        let _ = writeln!(
            s,
            "check {}: {} vs {}: {verdict}",
            c.check,
            num(c.left),
            num(c.right)
        );
    }
    s
}
