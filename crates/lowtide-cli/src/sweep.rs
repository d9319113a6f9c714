//! `lowtide sim sweep FILE --param PATH=[V1,...]... --out DIR`: a scenario file run
//! at every point of a grid of settings (each point the file with those values as
//! `--set` overrides, its own verdict and checks), `--shard I/N` for job arrays,
//! `--jobs` threads; `lowtide sim merge DIR...` joins the shards. The grid, the
//! results file, the merge and the report are `lowtide_lab::sweep`'s; this module
//! parses the command, runs the points and writes the files. Exit codes: 0 every
//! point passed, 1 a point failed (each named on stderr), 2 bad usage.

use crate::scenario::FileArgs;
use crate::{run_failure, usage_error};
use clap::Args;
use lowtide_lab::sweep::{self, Param, Point, SweepFile, SWEEP_FORMAT};
use lowtide_lab::{parallel_map, Shard};
use lowtide_sim::network::check::Figure;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `sim sweep`'s arguments.
#[derive(Args, Debug)]
pub struct SweepArgs {
    #[command(flatten)]
    file: FileArgs,
    /// A swept setting and its values: `PATH=[V1,V2,...]` (a value holding a comma
    /// quoted: `links.b.queue=["pfifo","fq_codel,ecn=1"]`); repeatable, the grid
    /// is every combination, the first parameter outermost and on the plots' x axis.
    #[arg(long = "param", value_name = "PATH=[V1,V2,...]", required = true)]
    params: Vec<String>,
    /// A figure to plot against the first parameter (`flow.NAME.F`,
    /// `queue.SRC->DST.F`, as checks name them; repeatable) [default: the left
    /// figures of the file's checks].
    #[arg(long = "plot", value_name = "FIGURE")]
    plots: Vec<String>,
    /// Runs only every N-th point, from the I-th (1-based): slice I of N, for job
    /// arrays; join the shards' directories with `lowtide sim merge`.
    #[arg(long, value_name = "I/N", value_parser = crate::experiment::parse_shard)]
    shard: Option<Shard>,
    /// Points simulated in parallel, 1 to 256.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: u32,
    /// Where report.md, results.json and the plots go.
    #[arg(long)]
    out: PathBuf,
    /// Prints a JSON summary instead of text (and no progress display).
    #[arg(long)]
    json: bool,
    /// No progress display on stderr (it is shown only on a terminal anyway).
    #[arg(short = 'q', long)]
    quiet: bool,
}

/// `sim merge`'s arguments.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shards' directories (each holding the results.json of `sim sweep
    /// --shard`).
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Where the merged report.md, results.json and plots go.
    #[arg(long)]
    out: PathBuf,
    /// Prints a JSON summary instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `sim sweep`.
pub fn run(args: &SweepArgs) -> ExitCode {
    let shown = args.file.shown();
    let text = match args.file.text() {
        Ok(t) => t,
        Err(e) => return usage_error(&e),
    };
    let params: Vec<Param> = match args.params.iter().map(|p| Param::parse(p)).collect() {
        Ok(p) => p,
        Err(e) => return usage_error(&format!("sim sweep: {e}")),
    };
    if let Err(e) = crate::outputs::check_dir("--out", &args.out) {
        return usage_error(&e);
    }
    let grid = sweep::grid(&params);
    let sets = |pt: &[(String, String)]| -> Vec<String> {
        pt.iter().map(|(p, v)| format!("{p}={v}")).collect()
    };
    // Every point must be a valid scenario before any runs.
    let mut checks = Vec::new();
    for (i, pt) in grid.iter().enumerate() {
        match args.file.resolve(&text, &sets(pt)) {
            Ok((f, _)) if i == 0 => checks = f.checks,
            Ok(_) => {}
            Err(e) => return usage_error(&format!("point {i} ({}): {e}", label(pt))),
        }
    }
    let plots = match args.plots.is_empty() {
        false => args.plots.clone(),
        true => {
            let mut lefts: Vec<String> = (checks.iter())
                .filter_map(|c| c.split_whitespace().next().map(str::to_string))
                .collect();
            lefts.dedup();
            lefts
        }
    };
    if let Some(e) = plots.iter().find_map(|p| Figure::parse(p).err()) {
        return usage_error(&format!("sim sweep: --plot: {e}"));
    }
    let mine: Vec<(usize, &Vec<(String, String)>)> = (grid.iter().enumerate())
        .filter(|(i, _)| args.shard.is_none_or(|s| s.contains(*i)))
        .collect();
    let bar = match crate::progress::wanted(args.json, args.quiet) {
        true => Some(crate::progress::CountBar::new(mine.len() as u64, "sweep")),
        false => None,
    };
    let failed = std::sync::atomic::AtomicU64::new(0);
    let points = parallel_map(&mine, args.jobs as usize, |_, &(i, pt)| {
        let p = match args.file.resolve(&text, &sets(pt)) {
            Ok((_, t)) => match lowtide_sim::network::run(&t) {
                Ok(r) => Point::new(i, pt.clone(), &r),
                Err(e) => Point::failed(i, pt.clone(), e),
            },
            Err(e) => Point::failed(i, pt.clone(), e),
        };
        let ordering = std::sync::atomic::Ordering::Relaxed;
        let so_far = failed.fetch_add(u64::from(!p.pass()), ordering) + u64::from(!p.pass());
        if let Some(b) = &bar {
            b.inc(so_far);
        }
        p
    });
    if let Some(b) = &bar {
        b.finish();
    }
    let file = SweepFile {
        format: SWEEP_FORMAT,
        scenario: shown,
        scenario_sha256: format!("{:x}", Sha256::digest(text.as_bytes())),
        quick: args.file.quick(),
        sets: args.file.sets().to_vec(),
        params,
        plots,
        plan_points: grid.len(),
        shard: args.shard,
        points,
    };
    finish(&file, &args.out, args.json)
}

/// `path=value, ...` of a grid point.
fn label(pt: &[(String, String)]) -> String {
    (pt.iter())
        .map(|(p, v)| format!("{p}={}", sweep::shown(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs `sim merge`.
pub fn merge(args: &MergeArgs) -> ExitCode {
    if let Err(e) = crate::outputs::check_dir("--out", &args.out) {
        return usage_error(&e);
    }
    let mut parts = Vec::new();
    for d in &args.dirs {
        match crate::experiment::read_json(d) {
            Ok(f) => parts.push(f),
            Err(e) => return usage_error(&format!("sim merge: {e}")),
        }
    }
    match sweep::merge(parts) {
        Ok(file) => finish(&file, &args.out, args.json),
        Err(e) => usage_error(&format!("sim merge: {e}")),
    }
}

/// Writes results.json, the plots (of a whole grid) and report.md into `out`,
/// prints the summary, and turns failed points into exit code 1.
fn finish(file: &SweepFile, out: &Path, json: bool) -> ExitCode {
    if let Err(e) = write_outputs(file, out) {
        return run_failure(&format!("sim sweep: {e}"));
    }
    let failed = file.failed();
    if json {
        let v = serde_json::json!({
            "out": out,
            "points": file.points.len(),
            "plan_points": file.plan_points,
            "shard": file.shard,
            "failed": failed.iter().map(|p| serde_json::json!({
                "index": p.index, "params": p.label(), "why": p.failures(),
            })).collect::<Vec<_>>(),
            "pass": failed.is_empty(),
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        println!(
            "{}: {} of {} points pass ({} in the grid); wrote {}",
            file.scenario,
            file.points.len() - failed.len(),
            file.points.len(),
            file.plan_points,
            out.join("report.md").display()
        );
    }
    for p in &failed {
        for why in p.failures() {
            eprintln!(
                "lowtide: {}: point {} ({}): {why}",
                file.scenario,
                p.index,
                p.label()
            );
        }
    }
    match failed.is_empty() {
        true => ExitCode::SUCCESS,
        false => run_failure(&format!(
            "sim sweep: {} of {} points failed: {}",
            failed.len(),
            file.points.len(),
            (failed.iter())
                .map(|p| format!("{} ({})", p.index, p.label()))
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
}

fn write_outputs(file: &SweepFile, out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let json = serde_json::to_string_pretty(file).map_err(|e| e.to_string())?;
    let p = out.join("results.json");
    std::fs::write(&p, json + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
    let plots = match file.shard {
        None => sweep::render_plots(file, out)?,
        Some(_) => Vec::new(),
    };
    let p = out.join("report.md");
    std::fs::write(&p, sweep::markdown(file, &plots)).map_err(|e| format!("{}: {e}", p.display()))
}
