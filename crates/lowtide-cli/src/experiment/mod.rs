//! `lowtide experiment`: the five seed experiments in the simulator, a report
//! (markdown and plots) and results.json; shards of a plan and their merge.
//!
//! The plans, the runs (simulator and real path) and the renderer live in
//! `lowtide_lab`; this module parses the command, shows progress and writes the
//! files. Rendering reads only the results file, so a merged sweep renders as a
//! single run does.

use crate::{run_failure, usage_error};
use clap::Args;
use lowtide_lab::{
    calibrate, merge, plan, plot, provenance, real, report, run_specs, Experiment, NoProgress,
    ProgressSink, ResultsFile, Scale, Shard,
};
use lowtide_sim::cpu::CpuModel;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Default output directory.
const DEFAULT_OUT: &str = "lowtide-experiments";

#[derive(Args, Debug)]
pub struct ExperimentArgs {
    /// e1, e2, e3, e4, e5, all; merge (then the directories of the shards follow);
    /// render DIR (report.md and the plots again from DIR/results.json, into --out);
    /// summary DIR (the provenance and the seed figures of DIR/results.json as
    /// markdown on stdout: what the docs quote); calibrate (the CPU model's
    /// constants measured on this machine, into OUT/calibration.json).
    #[arg(value_name = "e1|e2|e3|e4|e5|all|merge|render|summary|calibrate")]
    what: String,
    /// For merge: the directories holding the shards' results.json; for render and
    /// summary: the directory holding results.json.
    #[arg(value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// For summary: only this experiment's figures (e1 .. e5).
    #[arg(long, value_name = "E")]
    only: Option<String>,
    /// Where report.md, results.json and the plots go.
    #[arg(long, default_value = DEFAULT_OUT)]
    out: PathBuf,
    /// Every experiment at reduced scale (CI); the directions are still checked.
    #[arg(long)]
    quick: bool,
    /// Simulations run in parallel, 1 to 256.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: u32,
    /// Runs only slice I of N of the plan (1-based), for job arrays; merge the
    /// shards' directories with `lowtide experiment merge`.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<Shard>,
    /// How the simulated senders' bytes reach the sockets, as `sim stream
    /// --payload`: stored or pattern (same results, less memory).
    #[arg(long, default_value = "stored", value_name = "stored|pattern")]
    payload: lowtide_sim::PayloadMode,
    /// Base seed of the runs.
    #[arg(long, default_value_t = 1, value_parser = crate::limits::seed, allow_hyphen_values = true)]
    seed: u64,
    /// For merge: accept a plan with runs missing (cut short); the report says how
    /// many finished and the checks that need a missing run fail.
    #[arg(long)]
    partial: bool,
    /// Prints a JSON summary instead of text (and no progress display).
    #[arg(long)]
    json: bool,
    /// No progress display on stderr (it is shown only on a terminal anyway).
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Runs the real-path side instead of the simulator (root: namespaces, TUN,
    /// tc): lowtide on a TUN device against kernel receivers, and the kernel doing
    /// the same job; adds the results to OUT/results.json beside the simulator's.
    /// (--jobs, --shard and --partial are the simulator's: refused with it.)
    #[arg(long, conflicts_with_all = ["shard", "jobs", "partial"])]
    real: bool,
    /// E4's CPU model from this calibration.json (`lowtide experiment calibrate`).
    /// Without it a full-scale E4 calibrates first (OUT/calibration.json) and a
    /// `--quick` one uses the built-in constants; shards at full scale need it (they
    /// must share one calibration).
    #[arg(long, value_name = "FILE")]
    calibration: Option<PathBuf>,
    /// E4 only: the sensitivity sweep instead of the plan (per-ACK and per-node
    /// costs x0.5 and x2, the sender's backlog down to the seed's regime; one list/tree
    /// pair per setting), checks not applied.
    #[arg(long, conflicts_with_all = ["shard", "real"])]
    sensitivity: bool,
    /// Writes every simulator run's time series as CSV into DIR: DIR/eN-INDEX-host.csv
    /// (host A; E4 adds its modeled CPU: busy time, backlog, the oldest ACK's wait)
    /// and DIR/eN-INDEX-flows.csv (one row per sending socket and sample). Runs sample
    /// at their plan's interval (E1 10 or 50 ms, E2 100 ms, E3 5 ms, E4 100 ms), E5,
    /// which plots none, at 10 ms; sampling only reads, so no figure changes. INDEX is
    /// the run's place in the plan, as --shard I/1000 numbers it. A file that cannot
    /// be written fails the command (exit 1).
    #[arg(long, value_name = "DIR", conflicts_with = "real")]
    timeseries: Option<PathBuf>,
}

/// `--shard I/N` (1 <= I <= N), as `experiment` and `sim sweep` take it.
pub(crate) fn parse_shard(s: &str) -> Result<Shard, String> {
    let bad = || format!("shard '{s}' is not I/N with 1 <= I <= N");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (index, count): (u32, u32) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    match index >= 1 && index <= count {
        true => Ok(Shard { index, count }),
        false => Err(bad()),
    }
}

/// Runs the command.
pub fn run(args: &ExperimentArgs) -> ExitCode {
    let mut prov = provenance::Provenance::start();
    if args.what == "merge" {
        return run_merge(args, &mut prov);
    }
    if args.what == "render" || args.what == "summary" {
        return run_render(args);
    }
    if args.what == "calibrate" {
        return run_calibrate(args);
    }
    if args.only.is_some() {
        return usage_error("experiment: --only is summary's");
    }
    if !args.dirs.is_empty() {
        return usage_error(&format!(
            "experiment: unexpected argument '{}' (only merge takes directories)",
            args.dirs[0].display()
        ));
    }
    let exps: Vec<Experiment> = match args.what.as_str() {
        "all" => Experiment::ALL.to_vec(),
        w => match Experiment::parse(w) {
            Some(e) => vec![e],
            None => {
                return usage_error(&format!(
                    "experiment: unknown experiment '{w}' (e1, e2, e3, e4, e5, all or merge)"
                ))
            }
        },
    };
    if args.real {
        return run_real(args, &exps, &prov);
    }
    if let Err(e) = crate::outputs::check_dir("--out", &args.out) {
        return usage_error(&e);
    }
    let scale = if args.quick {
        Scale::Quick
    } else {
        Scale::Full
    };
    if args.sensitivity && exps != [Experiment::E4] {
        return usage_error("experiment --sensitivity: e4 only");
    }
    let mut all = plan(&exps, scale, args.seed);
    let calibration = match e4_calibration(args, &exps) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    let source = match &calibration {
        Some(c) => format!(
            "measured on this machine ({}; lowtide experiment calibrate)",
            c.cpu_model.as_deref().unwrap_or("CPU unknown")
        ),
        None => "built-in constants (lowtide_sim::cpu::CpuModel::calibrated)".to_string(),
    };
    let model = calibration
        .as_ref()
        .map_or_else(CpuModel::calibrated, |c| c.model);
    if args.sensitivity {
        all = lowtide_lab::e4_sensitivity(scale, args.seed, &model, &source);
    } else if calibration.is_some() {
        lowtide_lab::use_cpu_model(&mut all, &model, &source);
    }
    let plan_runs = all.len();
    let mut specs: Vec<_> = match args.shard {
        Some(s) => all.into_iter().filter(|r| s.contains(r.index)).collect(),
        None => all,
    };
    if let Some(d) = &args.timeseries {
        if let Err(e) = std::fs::create_dir_all(d) {
            return usage_error(&format!("--timeseries: {}: {e}", d.display()));
        }
    }
    for s in &mut specs {
        s.scenario.payload = args.payload;
        s.timeseries_dir = args.timeseries.clone();
    }
    let show = crate::progress::wanted(args.json, args.quiet);
    let sink: Arc<dyn ProgressSink> = match show {
        true => Arc::new(crate::progress::Bars::new(&specs)),
        false => Arc::new(NoProgress),
    };
    let records = run_specs(&specs, args.jobs as usize, sink);
    let mut file = ResultsFile::new(exps, scale, args.seed, plan_runs, args.shard, records);
    file.calibration = calibration;
    if args.sensitivity {
        // A sweep of the model's inputs, not the seed's comparison.
        file.checks.clear();
    }
    finish(args, &file, &prov)
}

/// The calibration E4's simulator runs use: `--calibration FILE`; else, at full
/// scale, one measured now (written to OUT/calibration.json); else none (the
/// built-in constants).
fn e4_calibration(
    args: &ExperimentArgs,
    exps: &[Experiment],
) -> Result<Option<calibrate::Calibration>, String> {
    if let Some(p) = &args.calibration {
        return read_calibration(p).map(Some);
    }
    if !exps.contains(&Experiment::E4) || args.quick {
        return Ok(None);
    }
    if args.shard.is_some() {
        return Err(
            "experiment --shard at full scale: E4 needs one calibration for every \
             shard: run `lowtide experiment calibrate --out DIR` once and give each shard \
             --calibration DIR/calibration.json"
                .into(),
        );
    }
    let quiet = args.json || args.quiet;
    let c = calibrate::measure(calibrate::Effort::FULL, &mut |step| {
        if !quiet {
            eprintln!("calibrating the CPU model: {step}");
        }
    });
    write_calibration(&args.out, &c)?;
    Ok(Some(c))
}

/// Reads a calibration.json.
fn read_calibration(p: &Path) -> Result<calibrate::Calibration, String> {
    let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
}

/// Writes OUT/calibration.json.
fn write_calibration(out: &Path, c: &calibrate::Calibration) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let p = out.join("calibration.json");
    let json = serde_json::to_string_pretty(c).map_err(|e| e.to_string())?;
    std::fs::write(&p, json + "\n").map_err(|e| format!("{}: {e}", p.display()))
}

/// `calibrate`: measures the CPU model's constants on this machine into
/// OUT/calibration.json (`--quick`: fewer repetitions, for CI).
fn run_calibrate(args: &ExperimentArgs) -> ExitCode {
    if !args.dirs.is_empty() || args.real || args.shard.is_some() || args.calibration.is_some() {
        return usage_error("experiment calibrate: takes only --out, --quick, --json and --quiet");
    }
    if let Err(e) = crate::outputs::check_dir("--out", &args.out) {
        return usage_error(&e);
    }
    let effort = match args.quick {
        true => calibrate::Effort::QUICK,
        false => calibrate::Effort::FULL,
    };
    let quiet = args.json || args.quiet;
    let c = calibrate::measure(effort, &mut |step| {
        if !quiet {
            eprintln!("calibrating: {step}");
        }
    });
    if let Err(e) = write_calibration(&args.out, &c) {
        return run_failure(&format!("experiment calibrate: {e}"));
    }
    match args.json {
        true => println!("{}", serde_json::to_string_pretty(&c).unwrap_or_default()),
        false => println!(
            "CPU model {}.\nwrote {}",
            c.describe(),
            args.out.join("calibration.json").display()
        ),
    }
    ExitCode::SUCCESS
}

/// `--real`: the real-path runs, added to the simulator's results in OUT (if any).
fn run_real(args: &ExperimentArgs, exps: &[Experiment], prov: &provenance::Provenance) -> ExitCode {
    let mut prov = prov.clone();
    let missing = real::missing_privileges();
    if !missing.is_empty() {
        return usage_error(&format!("experiment --real: {}", missing.join("; ")));
    }
    if let Err(e) = crate::outputs::check_dir("--out", &args.out) {
        return usage_error(&e);
    }
    // Ctrl-C or SIGTERM ends the plan after the run in progress, whose guards remove
    // its namespaces and devices; nothing is written then.
    lowtide_tun::stop::install_handlers();
    let fresh = real::plan::run(exps, args.quick, args.seed, args.json || args.quiet);
    if lowtide_tun::stop::requested() {
        return run_failure("experiment --real: interrupted (SIGINT or SIGTERM): the namespaces are removed, no results written");
    }
    let mut sim = match read_results(&args.out) {
        Ok(f) => f,
        // No simulator results here: a file with the plan's experiments and no runs.
        Err(_) => {
            let scale = match args.quick {
                true => Scale::Quick,
                false => Scale::Full,
            };
            let mut f = ResultsFile::new(exps.to_vec(), scale, args.seed, 0, None, Vec::new());
            f.checks.clear();
            f
        }
    };
    for &e in exps {
        if !sim.experiments.contains(&e) {
            sim.experiments.push(e);
        }
    }
    sim.experiments.sort();
    let real = match read_real(&args.out) {
        Some(mut old) => {
            // The runs kept from the earlier section keep their provenance.
            if let Some(mut p) = read_key(&args.out, REAL_PROVENANCE) {
                let older = p.as_object_mut().and_then(|o| o.remove("earlier"));
                prov.earlier = older
                    .and_then(|v| v.as_array().cloned())
                    .unwrap_or_default();
                prov.earlier.push(p);
            }
            old.update(fresh.clone());
            old
        }
        None => fresh.clone(),
    };
    // The simulator's provenance stays; the real-path runs get their own.
    let sysctls = provenance::non_default_sysctls(
        (fresh.runs.iter()).map(|r| (r.experiment.map_or("", |e| e.name()), r.params.as_slice())),
    );
    let prov = Provenances {
        sim: read_key(&args.out, PROVENANCE),
        real: Some(prov.finish(sysctls)),
    };
    if let Err(e) = write_outputs(&args.out, &sim, Some(&real), &prov) {
        return run_failure(&format!("experiment: {e}"));
    }
    let failed: Vec<&lowtide_lab::DirectionCheck> =
        fresh.checks.iter().filter(|c| !c.pass).collect();
    if args.json {
        let v = serde_json::json!({
            "out": args.out,
            "real": fresh,
            "pass": failed.is_empty(),
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", real::report::summary_text(&fresh, &args.out));
    }
    match failed.is_empty() {
        true => ExitCode::SUCCESS,
        false => run_failure(&format!(
            "experiment --real: {} check(s) failed: {}",
            failed.len(),
            (failed.iter())
                .map(|c| format!("{} ({})", c.claim, c.detail))
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
}

/// The `"real"` section of DIR/results.json, if there is one, its checks derived
/// again from its runs.
fn read_real(dir: &Path) -> Option<real::RealResults> {
    let mut real: real::RealResults = serde_json::from_value(read_key(dir, "real")?).ok()?;
    real.recheck();
    Some(real)
}

/// results.json's key for the provenance of the simulator runs.
const PROVENANCE: &str = "provenance";
/// results.json's key for the provenance of the real-path runs.
const REAL_PROVENANCE: &str = "real_provenance";

/// The provenance objects written to results.json (provenance.rs).
struct Provenances {
    /// Of the simulator runs (or their merge).
    sim: Option<serde_json::Value>,
    /// Of the real-path runs (`--real`).
    real: Option<serde_json::Value>,
}

/// Top-level `key` of DIR/results.json, if there is one.
fn read_key(dir: &Path, key: &str) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("results.json")).ok()?;
    let mut v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(v.get_mut(key)?.take())
}

fn run_merge(args: &ExperimentArgs, prov: &mut provenance::Provenance) -> ExitCode {
    if args.real {
        return usage_error("experiment merge: --real does not apply (shards are simulator runs)");
    }
    if args.dirs.is_empty() {
        return usage_error("experiment merge: give the shards' directories");
    }
    if let Err(e) = crate::outputs::check_dir("--out", &args.out) {
        return usage_error(&e);
    }
    let mut parts = Vec::new();
    for d in &args.dirs {
        match read_results(d) {
            Ok(f) => parts.push(f),
            Err(e) => return usage_error(&format!("experiment merge: {e}")),
        }
        // The shards ran elsewhere or earlier: their provenance goes along.
        prov.shards.extend(read_key(d, PROVENANCE));
    }
    match merge(parts, args.partial) {
        Ok(file) => finish(args, &file, prov),
        Err(e) => usage_error(&format!("experiment merge: {e}")),
    }
}

/// `render DIR` and `summary DIR`: from DIR/results.json alone, no run.
fn run_render(args: &ExperimentArgs) -> ExitCode {
    let [dir] = args.dirs.as_slice() else {
        return usage_error(&format!(
            "experiment {}: give one directory (the one holding results.json)",
            args.what
        ));
    };
    if args.real || args.shard.is_some() || args.partial {
        return usage_error(&format!(
            "experiment {}: --real, --shard and --partial do not apply",
            args.what
        ));
    }
    let file = match read_results(dir) {
        Ok(f) => f,
        Err(e) => return usage_error(&format!("experiment {}: {e}", args.what)),
    };
    let real = read_real(dir);
    let prov = Provenances {
        sim: read_key(dir, PROVENANCE),
        real: read_key(dir, REAL_PROVENANCE),
    };
    if args.what == "summary" {
        let only = match args.only.as_deref().map(Experiment::parse) {
            None => None,
            Some(Some(e)) => Some(e),
            Some(None) => return usage_error("experiment summary: --only takes e1 .. e5"),
        };
        print!(
            "{}",
            report::summary_markdown(
                &file,
                real.as_ref(),
                (prov.sim.as_ref(), prov.real.as_ref()),
                only
            )
        );
        return ExitCode::SUCCESS;
    }
    if args.only.is_some() {
        return usage_error("experiment: --only is summary's");
    }
    if let Err(e) = crate::outputs::check_dir("--out", &args.out) {
        return usage_error(&e);
    }
    match write_outputs(&args.out, &file, real.as_ref(), &prov) {
        Ok(()) => {
            println!("wrote {}", args.out.join("report.md").display());
            ExitCode::SUCCESS
        }
        Err(e) => run_failure(&format!("experiment render: {e}")),
    }
}

/// Reads DIR/results.json.
pub fn read_results(dir: &Path) -> Result<ResultsFile, String> {
    read_json(dir)
}

/// Reads DIR/results.json as a `T` (an experiment's or a sweep's results).
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(dir: &Path) -> Result<T, String> {
    let p = dir.join("results.json");
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
}

/// Writes the files, prints the summary, and turns the checks into the exit code.
fn finish(args: &ExperimentArgs, file: &ResultsFile, prov: &provenance::Provenance) -> ExitCode {
    // A real-path section already in OUT stays (it is measured apart, with --real).
    let real = match file.shard {
        None => read_real(&args.out),
        Some(_) => None,
    };
    let sysctls = provenance::non_default_sysctls(
        (file.runs.iter()).map(|r| (r.experiment.name(), r.params.as_slice())),
    );
    let prov = Provenances {
        sim: Some(prov.finish(sysctls)),
        real: real
            .as_ref()
            .and_then(|_| read_key(&args.out, REAL_PROVENANCE)),
    };
    if let Err(e) = write_outputs(&args.out, file, real.as_ref(), &prov) {
        return run_failure(&format!("experiment: {e}"));
    }
    let failed_runs: Vec<String> = (file.runs.iter())
        .filter(|r| !r.figures.verified)
        .map(|r| format!("{} {} / {}", r.experiment.name(), r.group, r.variant))
        .collect();
    let failed_checks = file.checks.iter().filter(|c| !c.pass).count();
    let unwritten: Vec<&str> = (file.runs.iter())
        .filter_map(|r| r.timeseries_error.as_deref())
        .collect();
    if args.json {
        let v = serde_json::json!({
            "out": args.out,
            "runs": file.runs.len(),
            "plan_runs": file.plan_runs,
            "shard": file.shard,
            "checks": file.checks,
            "failed_runs": failed_runs,
            "pass": failed_runs.is_empty() && failed_checks == 0,
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", report::summary_text(file, &args.out));
    }
    if !failed_runs.is_empty() {
        return run_failure(&format!(
            "experiment: {} run(s) did not verify: {}",
            failed_runs.len(),
            failed_runs.join("; ")
        ));
    }
    if let Some(first) = unwritten.first() {
        return run_failure(&format!(
            "--timeseries: {} run(s) not written: {first}",
            unwritten.len()
        ));
    }
    if failed_checks > 0 {
        return run_failure(&format!(
            "experiment: {failed_checks} direction check(s) failed (see {})",
            args.out.join("report.md").display()
        ));
    }
    ExitCode::SUCCESS
}

/// results.json (with the real-path section under `"real"`), report.md and the plots
/// into `out`.
fn write_outputs(
    out: &Path,
    file: &ResultsFile,
    real: Option<&real::RealResults>,
    prov: &Provenances,
) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut v = serde_json::to_value(file).map_err(|e| e.to_string())?;
    if let Some(obj) = v.as_object_mut() {
        if let Some(r) = real {
            let r = serde_json::to_value(r).map_err(|e| e.to_string())?;
            obj.insert("real".into(), r);
        }
        for (k, p) in [(PROVENANCE, &prov.sim), (REAL_PROVENANCE, &prov.real)] {
            if let Some(p) = p {
                obj.insert(k.into(), p.clone());
            }
        }
    }
    let json = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
    let p = out.join("results.json");
    std::fs::write(&p, json + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
    let mut plots = match file.shard {
        None => plot::render_all(file, out)?,
        Some(_) => Vec::new(),
    };
    if let Some(r) = real {
        plots.extend(real::plot::render(r, out)?);
    }
    let mut md = report::markdown(file, real, &plots);
    provenance::report_section(&mut md, prov.sim.as_ref(), prov.real.as_ref());
    let p = out.join("report.md");
    std::fs::write(&p, md).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(())
}
