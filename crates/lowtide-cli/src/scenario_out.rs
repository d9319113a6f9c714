//! `--out DIR` of `sim run` and `net run`: a scenario run's report written into a
//! directory, as `lowtide experiment --out` writes its own: `report.txt` (the text
//! report as printed), `results.json` (what `--json` prints) and
//! `plots/{goodput,cwnd,queue-delay}.png` ([`lowtide_lab::scenario_plot`]; under
//! `net run --compare` the simulator's lines solid, the real-time run's dashed).

use lowtide_lab::scenario_plot::{self, Run};
use std::path::{Path, PathBuf};

/// Writes the report, the results and the plots of `runs` into `dir` (made if
/// missing); `caption` goes under each plot. Returns the files written, relative
/// to `dir` (no plots without the font, which the message then says).
pub fn write(
    dir: &Path,
    text: &str,
    json: &serde_json::Value,
    runs: &[Run],
    caption: &str,
) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = serde_json::to_string_pretty(json).map_err(|e| format!("results: {e}"))?;
    let mut files = Vec::new();
    for (name, body) in [("report.txt", text), ("results.json", &json)] {
        let p = dir.join(name);
        std::fs::write(&p, format!("{}\n", body.trim_end()))
            .map_err(|e| format!("{}: {e}", p.display()))?;
        files.push(PathBuf::from(name));
    }
    files.extend(scenario_plot::render(dir, runs, caption)?);
    Ok(files)
}

/// The plots' caption: the file's name and the options that change the run
/// (`bufferbloat.toml --quick --set ...`).
pub fn caption(args: &crate::scenario::FileArgs) -> String {
    let mut s = args.file_name();
    if args.quick() {
        s += " --quick";
    }
    for set in args.sets() {
        s += &format!(" --set {set}");
    }
    s
}

/// The line that says what `write` wrote (the plots' absence explained).
pub fn wrote(dir: &Path, files: &[PathBuf]) -> String {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let plots = match files.iter().any(|f| f.starts_with("plots")) {
        true => "",
        false => " (no plots: DejaVu Sans not found, or no series)",
    };
    format!("wrote {}/{{{}}}{plots}\n", dir.display(), names.join(","))
}
