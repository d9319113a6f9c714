//! `lowtide sim run FILE`: a scenario file (hosts, routers, links with their queues,
//! flows, checks; `lowtide_sim::network`) run in the simulator, with a table per
//! flow and per queue, or the results as JSON. Exit codes: 0 every byte verified
//! and every check held, 1 a flow failed or a check did not hold (each failed one
//! on stderr with its values), 2 a bad file or argument.

use clap::Args;
use lowtide_sim::network::{NetResults, NetTimeseries, ScenarioFile, Topology};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// The scenario file and its overrides, as `sim run` and `net run` take them.
#[derive(Args, Debug)]
pub struct FileArgs {
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
}

impl FileArgs {
    /// The file's name as the messages show it.
    pub fn shown(&self) -> String {
        self.file.display().to_string()
    }

    /// The file's name without its directory.
    pub fn file_name(&self) -> String {
        (self.file.file_name()).map_or_else(|| self.shown(), |n| n.to_string_lossy().into())
    }

    /// The file read, its overrides applied, resolved; the error (a usage error)
    /// names the file.
    pub fn load(&self) -> Result<(ScenarioFile, Topology), String> {
        self.resolve(&self.text()?, &[])
    }

    /// The file's text; the error names the file.
    pub fn text(&self) -> Result<String, String> {
        std::fs::read_to_string(&self.file).map_err(|e| format!("{}: {e}", self.shown()))
    }

    /// `text` with `--quick`, the `--set`s and then `extra` (`PATH=VALUE` each)
    /// applied, resolved; the error names the file.
    pub fn resolve(
        &self,
        text: &str,
        extra: &[String],
    ) -> Result<(ScenarioFile, Topology), String> {
        let sets: Vec<String> = self.sets.iter().chain(extra).cloned().collect();
        (ScenarioFile::parse(text, self.quick, &sets))
            .and_then(|f| Topology::new(&f).map(|t| (f, t)))
            .map_err(|e| format!("{}: {e}", self.shown()))
    }

    /// `--quick`.
    pub fn quick(&self) -> bool {
        self.quick
    }

    /// The `--set` overrides.
    pub fn sets(&self) -> &[String] {
        &self.sets
    }
}

/// `sim run`'s arguments.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    file: FileArgs,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// How the senders' bytes reach the sockets, as `sim stream --payload`: stored
    /// (copied into the send queue, the real data path) or pattern (the sockets
    /// store no payload). Every figure is the same; pattern uses less memory.
    #[arg(long, default_value = "stored", value_name = "stored|pattern")]
    payload: lowtide_sim::PayloadMode,
    /// Writes the run's time series into this directory (made if missing):
    /// `flows.csv`, each flow's sender every --timeseries-interval (`sim stream
    /// --timeseries`'s columns, with DCTCP's alpha), `flow-names.csv` (ids to
    /// names) and `marks.csv`, every CE mark of a router's queue with the packets
    /// queued then, the marked packet's flow and that flow's bytes among them.
    #[arg(long, value_name = "DIR")]
    timeseries: Option<PathBuf>,
    /// Interval of the flows' time series, at least 1us.
    #[arg(long, default_value = "1ms", value_parser = crate::limits::timeseries_interval)]
    timeseries_interval: std::time::Duration,
    /// Writes the report into this directory (made if missing): `report.txt` (as
    /// printed), `results.json` (as --json prints) and `plots/goodput.png`,
    /// `plots/cwnd.png` (per flow, a panel per pair of hosts) and
    /// `plots/queue-delay.png` (a panel per queue where packets waited), on the
    /// run's series grid (`run.series_interval`).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Runs `sim run`.
pub fn run(args: &RunArgs) -> ExitCode {
    let shown = args.file.shown();
    if let Some(Err(e)) = (args.out.as_ref()).map(|d| crate::outputs::check_dir("--out", d)) {
        return crate::usage_error(&e);
    }
    let interval = args.timeseries_interval.as_nanos() as u64;
    let run = |t: &Topology| match &args.timeseries {
        None => lowtide_sim::network::run(t).map(|r| (r, None)),
        Some(_) => {
            lowtide_sim::network::run_with_timeseries(t, interval).map(|(r, s)| (r, Some(s)))
        }
    };
    let (r, series) = match args.file.load().and_then(|(_, mut t)| {
        t.payload = args.payload;
        run(&t).map_err(|e| format!("{shown}: {e}"))
    }) {
        Ok(r) => r,
        Err(e) => return crate::usage_error(&e),
    };
    if let (Some(dir), Some(s)) = (&args.timeseries, &series) {
        if let Err(e) = write_timeseries(dir, s) {
            return crate::run_failure(&format!("--timeseries: {e}"));
        }
    }
    let text = render(&r);
    if args.json {
        match serde_json::to_string_pretty(&r) {
            Ok(s) => println!("{s}"),
            Err(e) => return crate::run_failure(&format!("cannot serialize results: {e}")),
        }
    } else {
        print!("{text}");
    }
    if let Some(dir) = &args.out {
        let caption = crate::scenario_out::caption(&args.file);
        let json = serde_json::json!(r);
        match crate::scenario_out::write(dir, &text, &json, &[("sim", &r)], &caption) {
            Ok(files) if !args.json => print!("{}", crate::scenario_out::wrote(dir, &files)),
            Ok(_) => {}
            Err(e) => return crate::run_failure(&format!("--out: {e}")),
        }
    }
    match report_failures(&shown, &r) {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(1),
    }
}

/// `--timeseries DIR`: the flows' rows, their names and the marks, as CSV.
fn write_timeseries(dir: &std::path::Path, s: &NetTimeseries) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (name, text) in [
        ("flows.csv", s.flows_csv()),
        ("flow-names.csv", s.names_csv()),
        ("marks.csv", s.marks_csv()),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// Says on stderr why `r` failed, under `label` (the file): the verdict, then
/// each check that did not hold with its values. True if nothing failed.
pub fn report_failures(label: &str, r: &NetResults) -> bool {
    let mut ok = true;
    if let Some(why) = &r.failure {
        eprintln!("lowtide: {label}: {why}");
        ok = false;
    }
    for c in r.checks.iter().filter(|c| !c.pass) {
        eprintln!(
            "lowtide: {label}: check failed: {} (left {}, right {})",
            c.check,
            num(c.left),
            num(c.right)
        );
        ok = false;
    }
    ok
}

/// A figure for the text tables: three significant decimals at most.
pub fn num(x: f64) -> String {
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
    let mut s = render_tables(r);
    let _ = writeln!(
        s,
        "\n{:.1} s simulated: {} ({} events, {} packets, {:.2} s wall)",
        r.duration_s,
        r.verdict.summary(),
        r.sim_events,
        r.sim_packets,
        r.sim_wall_s
    );
    s.push_str(&render_checks(r));
    s
}

/// The report's tables: flows, and the queues that carry a flow's data.
pub fn render_tables(r: &NetResults) -> String {
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
        "{:<nw$} {:<hw$} {:<hw$} {:<6} {:>7} {:>11} {:>7} {:>7} {:>5} {:>6} {:>8} {:>7}",
        "flow",
        "from",
        "to",
        "cc",
        "Mbit/s",
        "bytes",
        "rtt ms",
        "min ms",
        "retr",
        "cwnd",
        "delay ms",
        "p99 ms"
    );
    for f in &r.flows {
        let opt = |x: Option<f64>| x.map_or("-".into(), num);
        let _ = writeln!(
            s,
            "{:<nw$} {:<hw$} {:<hw$} {:<6} {:>7} {:>11} {:>7} {:>7} {:>5} {:>6} {:>8} {:>7}",
            f.name,
            f.from,
            f.to,
            f.cc,
            num(f.goodput_mbps),
            f.bytes,
            num(f.rtt_ms),
            num(f.min_rtt_ms),
            f.retrans,
            opt(f.cwnd),
            opt(f.delay_ms),
            opt(f.delay_p99_ms)
        );
    }
    let rr: Vec<_> = r
        .flows
        .iter()
        .filter(|f| f.transactions.is_some())
        .collect();
    if !rr.is_empty() {
        let _ = writeln!(
            s,
            "\n{:<nw$} {:>12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7}",
            "flow", "transactions", "trans/s", "lat ms", "p50 ms", "p90 ms", "p99 ms", "max ms"
        );
        for f in rr {
            let opt = |x: Option<f64>| x.map_or("-".into(), num);
            let _ = writeln!(
                s,
                "{:<nw$} {:>12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7}",
                f.name,
                f.transactions.unwrap_or(0),
                opt(f.tps),
                opt(f.latency_ms),
                opt(f.latency_p50_ms),
                opt(f.latency_p90_ms),
                opt(f.latency_p99_ms),
                opt(f.latency_max_ms)
            );
        }
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
    s
}

/// One line per check: the figures and whether it held.
pub fn render_checks(r: &NetResults) -> String {
    let mut s = String::new();
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
