//! The real path's plots: E3's device-queue delay over time, lowtide (TSQ off/on) and
//! the kernel (tcp_limit_output_bytes 1 GB / default) side by side, one panel per
//! setting; and for E1, E2, E4 and E5, each experiment's figures on the real path,
//! lowtide beside the kernel per variant, with the range over the repetitions.

use super::{RealResults, RealRun, Side};
use crate::plot::{draw, font_ready, Chart, Series};
use crate::Experiment;
use std::path::{Path, PathBuf};

/// Draws the real path's plots under `out`: `plots/e3_real_delay.{png,svg}` and
/// `plots/eN_real_kernel.{png,svg}` for E1, E2, E4 and E5; returns the files
/// (relative to `out`), none without the font or for an experiment without runs.
pub fn render(real: &RealResults, out: &Path) -> Result<Vec<PathBuf>, String> {
    if !font_ready() {
        return Ok(Vec::new());
    }
    let mut files = e3_delay(real, out)?;
    for e in [
        Experiment::E1,
        Experiment::E2,
        Experiment::E4,
        Experiment::E5,
    ] {
        files.extend(side_by_side(real, e, out)?);
    }
    Ok(files)
}

/// `plots/e3_real_delay.{png,svg}`: one panel per E3 setting, the first repetition.
fn e3_delay(real: &RealResults, out: &Path) -> Result<Vec<PathBuf>, String> {
    let e3 = (real.runs.iter()).filter(|r| r.experiment == Some(Experiment::E3));
    let mut panels = Vec::new();
    for g in super::groups(e3) {
        // The first repetition: one line per variant.
        let rs: Vec<_> = (real.runs.iter())
            .filter(|r| r.experiment == Some(Experiment::E3) && r.group == g && r.rep == 0)
            .filter(|r| !r.series.is_empty())
            .collect();
        let Some(first) = rs.first() else { continue };
        let params: Vec<String> = (first.params.iter())
            .filter(|(k, _)| ["rate", "flows", "duration", "queue"].contains(&k.as_str()))
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        // Short labels: the legend sits over the plot's upper right.
        let label = |r: &RealRun| {
            let v = r.variant.split(" (").next().unwrap_or("");
            match r.side {
                Some(Side::Kernel) => format!("kernel {v}"),
                _ => format!("lowtide {v}"),
            }
        };
        panels.push(Chart {
            title: format!("E3 real path, {g}: device-queue delay over time (lowtide: its link queue; kernel: pfifo under htb)"),
            caption: format!(
                "{}, 1 ms RTT; delay = backlog / rate; {}",
                params.join(", "),
                real.machine
            ),
            x: "wall-clock time since the flows started (s)".into(),
            y: "queueing delay (ms)".into(),
            series: rs
                .iter()
                .map(|r| Series {
                    label: label(r),
                    points: r.series.clone(),
                    ..Series::default()
                })
                .collect(),
            ..Chart::default()
        });
    }
    write(out, "e3_real_delay", &panels)
}

/// Draws `plots/NAME.{png,svg}` under `out` (nothing without panels).
fn write(out: &Path, name: &str, panels: &[Chart]) -> Result<Vec<PathBuf>, String> {
    if panels.is_empty() {
        return Ok(Vec::new());
    }
    let dir = out.join("plots");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for ext in ["png", "svg"] {
        let rel = PathBuf::from("plots").join(format!("{name}.{ext}"));
        draw(&out.join(&rel), panels)?;
        files.push(rel);
    }
    Ok(files)
}

/// A figure of the side-by-side plot.
struct Figure {
    /// What it is: the panel's title.
    what: &'static str,
    /// The y axis' label.
    unit: &'static str,
    /// A logarithmic y axis (the values span decades).
    log: bool,
    /// How to read it off a run.
    get: fn(&RealRun) -> Option<f64>,
}

/// The figures each experiment's real-path runs are compared by.
fn figures(e: Experiment) -> Vec<Figure> {
    let fig = |what, unit, log, get| Figure {
        what,
        unit,
        log,
        get,
    };
    let pages: fn(&RealRun) -> Option<f64> = |r| r.mean_pages;
    let wakeups: fn(&RealRun) -> Option<f64> = |r| r.wakeups_per_s;
    let goodput: fn(&RealRun) -> Option<f64> = |r| Some(r.goodput_bps / 1e6);
    let memory = "TCP memory of the senders' sockets";
    let woken = "wakeups (lowtide: writable events; kernel: context switches)";
    match e {
        Experiment::E1 => vec![
            fig(memory, "pages (time mean)", false, pages),
            fig(woken, "per second", false, wakeups),
        ],
        // E2's wakeups span decades (lowat off against the ablation).
        Experiment::E2 => vec![
            fig(memory, "pages (time mean)", false, pages),
            fig(woken, "per second (log)", true, wakeups),
        ],
        Experiment::E4 => vec![
            fig("goodput", "Mbit/s", false, goodput),
            fig("segments retransmitted", "TcpRetransSegs", false, |r| {
                r.retrans_segs.map(|n| n as f64)
            }),
        ],
        Experiment::E5 => vec![
            fig("packets the sender received", "IpInReceives", false, |r| {
                r.ip_in_receives.map(|n| n as f64)
            }),
            fig("goodput", "Mbit/s", false, goodput),
        ],
        Experiment::E3 => Vec::new(),
    }
}

/// The variant's letter ("A" of "A: lowat off"): lowtide's and the kernel's variants
/// share it where they do the same job under different names.
fn letter(variant: &str) -> &str {
    variant.split(':').next().unwrap_or(variant).trim()
}

/// `plots/eN_real_kernel.{png,svg}`: per group and figure, one panel with the
/// variants along x (A, B, C as 1, 2, 3) and lowtide and the kernel a little apart at
/// each: the mean of the repetitions as a point, their range as a bar.
fn side_by_side(real: &RealResults, e: Experiment, out: &Path) -> Result<Vec<PathBuf>, String> {
    let runs: Vec<&RealRun> = (real.runs.iter())
        .filter(|r| r.experiment == Some(e) && r.error.is_none())
        .collect();
    let mut panels = Vec::new();
    for g in super::groups(runs.iter().copied()) {
        let in_group: Vec<&RealRun> = runs.iter().copied().filter(|r| r.group == g).collect();
        let mut letters: Vec<&str> = Vec::new();
        for r in &in_group {
            if !letters.contains(&letter(&r.variant)) {
                letters.push(letter(&r.variant));
            }
        }
        letters.sort_unstable();
        for f in figures(e) {
            let series: Vec<Series> = [
                (Side::Lowtide, "lowtide", -0.1),
                (Side::Kernel, "kernel", 0.1),
            ]
            .into_iter()
            .map(|(side, name, dx)| {
                let mut s = Series {
                    label: name.into(),
                    ..Series::default()
                };
                for (i, l) in letters.iter().enumerate() {
                    let vals: Vec<f64> = (in_group.iter())
                        .filter(|r| r.side == Some(side) && letter(&r.variant) == *l)
                        .filter_map(|r| (f.get)(r))
                        .collect();
                    if vals.is_empty() {
                        continue;
                    }
                    let x = (i + 1) as f64 + dx;
                    let mean = vals.iter().sum::<f64>() / vals.len() as f64;
                    let (lo, hi) =
                        (vals.iter()).fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
                    s.points.push((x, mean));
                    s.band.push((x, lo, hi));
                }
                s
            })
            .filter(|s| !s.points.is_empty())
            .collect();
            if series.is_empty() {
                continue;
            }
            panels.push(Chart {
                title: format!("{} real path, {g}: {}", e.name().to_uppercase(), f.what),
                caption: format!(
                    "point: mean of the repetitions, bar: their range (n = {}); {}",
                    reps(&in_group),
                    real.machine
                ),
                x: "variant (lowtide / kernel)".into(),
                y: f.unit.into(),
                log_y: f.log,
                series,
                points: true,
                x_names: variant_names(&in_group, &letters),
                ..Chart::default()
            });
        }
    }
    write(out, &format!("{}_real_kernel", e.name()), &panels)
}

/// The categories along x: at 1, 2, ... each letter's variant as each side names it
/// ("B: tree / B: kernel BBR").
fn variant_names(runs: &[&RealRun], letters: &[&str]) -> Vec<(f64, String)> {
    let names = letters.iter().enumerate().map(|(i, l)| {
        let mut vs: Vec<&str> = Vec::new();
        for r in runs.iter().filter(|r| letter(&r.variant) == *l) {
            let v = r.variant.split(" (").next().unwrap_or(&r.variant);
            if !vs.contains(&v) {
                vs.push(v);
            }
        }
        ((i + 1) as f64, vs.join(" / "))
    });
    names.collect()
}

/// The number of repetitions ("3", or "1-3" where sides or variants differ).
fn reps(runs: &[&RealRun]) -> String {
    let mut counts: Vec<usize> = Vec::new();
    for r in runs {
        let n = (runs.iter())
            .filter(|o| o.side == r.side && o.variant == r.variant)
            .count();
        if !counts.contains(&n) {
            counts.push(n);
        }
    }
    let (lo, hi) = (counts.iter().min(), counts.iter().max());
    match (lo, hi) {
        (Some(lo), Some(hi)) if lo != hi => format!("{lo}-{hi}"),
        (Some(n), _) => n.to_string(),
        _ => "0".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(side: Side, variant: &str, rep: u32, pages: f64) -> RealRun {
        RealRun {
            experiment: Some(Experiment::E1),
            side: Some(side),
            group: "20 flows".into(),
            variant: variant.into(),
            rep,
            mean_pages: Some(pages),
            ..RealRun::default()
        }
    }

    #[test]
    fn variants_meet_by_their_letter_and_each_side_keeps_its_name() {
        let (a, b) = (
            run(Side::Lowtide, "B: tree", 0, 1.0),
            run(Side::Kernel, "B: kernel BBR (a tree)", 0, 1.0),
        );
        let c = run(Side::Lowtide, "A: list", 0, 1.0);
        assert_eq!(letter(&a.variant), "B");
        let names = variant_names(&[&a, &b, &c], &["A", "B"]);
        assert_eq!(
            names,
            vec![
                (1.0, "A: list".to_string()),
                (2.0, "B: tree / B: kernel BBR".to_string())
            ]
        );
        assert_eq!(reps(&[&a, &b, &c]), "1");
    }

    #[test]
    fn the_side_by_side_plot_is_drawn_only_for_an_experiment_with_runs() {
        if !font_ready() {
            return;
        }
        let dir = std::env::temp_dir().join(format!("lowtide-real-plot-{}", std::process::id()));
        let mut runs = Vec::new();
        for rep in 0..3 {
            runs.push(run(Side::Lowtide, "A: lowat off", rep, 5000.0 + rep as f64));
            runs.push(run(Side::Kernel, "A: lowat off", rep, 10000.0));
            runs.push(run(Side::Lowtide, "B: lowat 128 KB", rep, 1300.0));
            runs.push(run(Side::Kernel, "B: lowat 128 KB", rep, 2800.0));
        }
        let real = RealResults {
            format: crate::real::FORMAT,
            quick: true,
            measured: String::new(),
            machine: "test".into(),
            experiments: vec![Experiment::E1],
            runs,
            checks: Vec::new(),
        };
        let e1 = side_by_side(&real, Experiment::E1, &dir).expect("drawn");
        let e2 = side_by_side(&real, Experiment::E2, &dir).expect("nothing to draw");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(e1.len(), 2, "png and svg: {e1:?}");
        assert!(e2.is_empty());
    }
}
