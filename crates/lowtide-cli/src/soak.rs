//! `lowtide sim soak`: many randomized transfers ([`lowtide_sim::soak`]), run on
//! `--jobs` threads, each checked byte for byte and against its liveness deadline.
//! Failing runs are printed with a `lowtide sim stream` command that reproduces them;
//! exit code 1 if any run failed.

use clap::Args;
use lowtide_sim::soak::{SoakCase, SoakOutcome};
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub(crate) struct SoakArgs {
    /// Number of randomized runs, 1 to 1000000.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    runs: u64,
    /// Seed of the soak: run i is a function of (seed, i) alone.
    #[arg(long, default_value_t = 1, value_parser = crate::limits::seed, allow_hyphen_values = true)]
    seed: u64,
    /// Runs in parallel, 1 to 256 [default: the number of CPUs].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: Option<u32>,
    /// How the senders' bytes reach the sockets, as `sim stream --payload`:
    /// stored or pattern (same results, less memory).
    #[arg(long, default_value = "stored", value_name = "stored|pattern")]
    payload: lowtide_sim::PayloadMode,
    /// Prints the summary and the failures as JSON (and no progress display).
    #[arg(long)]
    json: bool,
    /// No progress display on stderr (it is shown only on a terminal anyway).
    #[arg(short = 'q', long)]
    quiet: bool,
}

/// A failing run, for the report.
#[derive(Serialize)]
struct Failure {
    run: u64,
    reasons: Vec<String>,
    repro: String,
    case: SoakCase,
}

/// The soak's result.
#[derive(Serialize)]
struct Summary {
    seed: u64,
    runs: u64,
    passed: u64,
    failed: u64,
    flows: u64,
    bytes_verified: u64,
    sim_s: f64,
    retrans_segs: u64,
    /// Longest simulated run (s) and its index.
    longest_sim_s: f64,
    longest_run: u64,
    wall_s: f64,
    /// Flows reset by the listener after a failed SYN cookie check, in runs that
    /// exercise cookies (Linux behaviour, passed; `SoakCase::check`), and those runs.
    cookie_resets: u64,
    cookie_reset_runs: Vec<u64>,
    /// Runs with a hostile peer beside their flows, by attack (`SoakCase::hostile`),
    /// and the passed ones' largest receive memory of an attacked connection over
    /// its buffer (`sk_rmem_alloc / sk_rcvbuf`).
    hostile_runs: BTreeMap<String, u64>,
    hostile_peak_rmem_ratio: f64,
    failures: Vec<Failure>,
}

pub(crate) fn run(args: &SoakArgs) -> ExitCode {
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
        u64::from,
    );
    let wall = Instant::now();
    let outcomes = run_all(args, jobs.min(args.runs));
    let summary = summarize(args, outcomes, wall.elapsed());
    if args.json {
        match serde_json::to_string_pretty(&summary) {
            Ok(s) => println!("{s}"),
            Err(e) => return crate::run_failure(&format!("cannot serialize results: {e}")),
        }
    } else {
        print!("{}", render(&summary));
    }
    match summary.failed {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}

/// Runs every case on `jobs` threads; outcomes in run order.
fn run_all(args: &SoakArgs, jobs: u64) -> Vec<SoakOutcome> {
    let next = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let slots: Mutex<Vec<Option<SoakOutcome>>> = Mutex::new(vec![None; args.runs as usize]);
    let bar = crate::progress::wanted(args.json, args.quiet)
        .then(|| crate::progress::CountBar::new(args.runs, "soak"));
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= args.runs {
                    break;
                }
                let out = case(args, i).run();
                if !out.ok {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                slots.lock().expect("no panics while held")[i as usize] = Some(out);
                if let Some(b) = &bar {
                    b.inc(failed.load(Ordering::Relaxed));
                }
            });
        }
    });
    if let Some(b) = &bar {
        b.finish();
    }
    let slots = slots.into_inner().expect("no panics while held");
    slots
        .into_iter()
        .map(|o| o.expect("every run ran"))
        .collect()
}

/// Run `i` of the soak, with the payload mode asked for.
fn case(args: &SoakArgs, i: u64) -> SoakCase {
    SoakCase {
        payload: args.payload,
        ..SoakCase::generate(args.seed, i)
    }
}

fn summarize(args: &SoakArgs, outcomes: Vec<SoakOutcome>, wall: Duration) -> Summary {
    let mut s = Summary {
        seed: args.seed,
        runs: args.runs,
        passed: 0,
        failed: 0,
        flows: 0,
        bytes_verified: 0,
        sim_s: 0.0,
        retrans_segs: 0,
        longest_sim_s: 0.0,
        longest_run: 0,
        wall_s: wall.as_secs_f64(),
        cookie_resets: 0,
        cookie_reset_runs: Vec::new(),
        hostile_runs: BTreeMap::new(),
        hostile_peak_rmem_ratio: 0.0,
        failures: Vec::new(),
    };
    for (i, o) in outcomes.into_iter().enumerate() {
        let case = case(args, i as u64);
        s.flows += case.flows as u64;
        s.sim_s += o.sim_s;
        s.retrans_segs += o.retrans_segs;
        if o.sim_s > s.longest_sim_s {
            (s.longest_sim_s, s.longest_run) = (o.sim_s, i as u64);
        }
        if let Some(h) = &o.hostile {
            *s.hostile_runs.entry(h.attack.clone()).or_default() += 1;
            if o.ok && h.rcvbuf > 0 {
                let ratio = h.peak_rmem as f64 / h.rcvbuf as f64;
                s.hostile_peak_rmem_ratio = s.hostile_peak_rmem_ratio.max(ratio);
            }
        }
        if o.ok && o.cookie_resets > 0 {
            s.cookie_resets += o.cookie_resets;
            s.cookie_reset_runs.push(i as u64);
        }
        if o.ok {
            s.passed += 1;
            s.bytes_verified += o.bytes_delivered;
        } else {
            s.failed += 1;
            s.failures.push(Failure {
                run: i as u64,
                reasons: o.reasons,
                repro: case.repro(),
                case,
            });
        }
    }
    s
}

fn render(s: &Summary) -> String {
    let mut out = String::new();
    for f in &s.failures {
        out += &format!("run {} FAILED:\n", f.run);
        for r in &f.reasons {
            out += &format!("  {r}\n");
        }
        out += &format!("  reproduce: {}\n", f.repro);
    }
    if s.cookie_resets > 0 {
        out += &format!(
            "{} flows in {} passed runs were reset by the listener after a failed SYN cookie \
             check, as Linux does (runs {:?})\n",
            s.cookie_resets,
            s.cookie_reset_runs.len(),
            s.cookie_reset_runs
        );
    }
    if !s.hostile_runs.is_empty() {
        let by: Vec<String> = (s.hostile_runs.iter())
            .map(|(a, n)| format!("{a} {n}"))
            .collect();
        out += &format!(
            "hostile peer beside the flows in {} runs ({}); the attacked receive memory \
             peaked at {:.2}x its buffer\n",
            s.hostile_runs.values().sum::<u64>(),
            by.join(", "),
            s.hostile_peak_rmem_ratio
        );
    }
    out += &format!(
        "soak (seed {}): {} runs, {} passed, {} failed; {} flows, {} bytes verified, \
         {:.0} s simulated (longest {:.1} s, run {}), {} segments retransmitted; {:.1} s wall\n",
        s.seed,
        s.runs,
        s.passed,
        s.failed,
        s.flows,
        s.bytes_verified,
        s.sim_s,
        s.longest_sim_s,
        s.longest_run,
        s.retrans_segs,
        s.wall_s
    );
    out
}

#[cfg(test)]
mod tests {
    use crate::{Cli, Command, SimCommand};
    use clap::Parser;
    use lowtide_sim::soak::SoakCase;

    /// The reproduction flags rebuild exactly the scenario the soak ran.
    #[test]
    fn repro_flags_give_the_same_scenario() {
        for run in 0..500 {
            let case = SoakCase::generate(11, run);
            let mut argv = vec!["lowtide".to_string(), "sim".into(), "stream".into()];
            argv.extend(case.args());
            let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let Command::Sim(SimCommand::Stream(a)) = cli.command else {
                panic!("not a stream command");
            };
            let from_flags = a.scenario().expect("valid flags");
            let direct = case.scenario().expect("valid case");
            assert_eq!(
                format!("{from_flags:?}"),
                format!("{direct:?}"),
                "run {run}: {}",
                case.repro()
            );
        }
    }
}
