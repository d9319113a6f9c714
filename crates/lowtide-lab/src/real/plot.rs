//! The real path's plot: E3's device-queue delay over time, lowtide (TSQ off/on) and
//! the kernel (tcp_limit_output_bytes 1 GB / default) side by side, one panel per
//! setting.

use super::{RealResults, Side};
use crate::plot::{draw, font_ready, Chart, Series};
use crate::Experiment;
use std::path::{Path, PathBuf};

/// Draws `plots/e3_real_delay.{png,svg}` under `out`; returns the files (relative to
/// `out`), none without the font or without E3 runs.
pub fn render(real: &RealResults, out: &Path) -> Result<Vec<PathBuf>, String> {
    if !font_ready() {
        return Ok(Vec::new());
    }
    let mut groups: Vec<&str> = Vec::new();
    for r in real
        .runs
        .iter()
        .filter(|r| r.experiment == Some(Experiment::E3))
    {
        if !groups.contains(&r.group.as_str()) {
            groups.push(&r.group);
        }
    }
    let mut panels = Vec::new();
    for g in groups {
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
        let label = |r: &super::RealRun| {
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
    if panels.is_empty() {
        return Ok(Vec::new());
    }
    let dir = out.join("plots");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for ext in ["png", "svg"] {
        let rel = PathBuf::from("plots").join(format!("e3_real_delay.{ext}"));
        draw(&out.join(&rel), &panels)?;
        files.push(rel);
    }
    Ok(files)
}
