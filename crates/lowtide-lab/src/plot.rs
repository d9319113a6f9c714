//! The experiments' plots (PNG and SVG, plotters), drawn from a results file only.
//!
//! Text is rendered with ab_glyph from DejaVu Sans (Debian's fonts-dejavu-core,
//! which .ci/run installs); without the font no plot is drawn and the report says
//! so.

use crate::{Experiment, ResultsFile, RunRecord};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Where the font is looked for.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];
const FONT: &str = "sans-serif";
const COLORS: [RGBColor; 6] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// Registers the font once; false if it cannot be found.
pub(super) fn font_ready() -> bool {
    static READY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *READY.get_or_init(|| {
        let Some(bytes) = FONT_PATHS.iter().find_map(|p| std::fs::read(p).ok()) else {
            return false;
        };
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok()
    })
}

/// One line (or set of points) of a chart.
pub(super) struct Series {
    pub(super) label: String,
    pub(super) points: Vec<(f64, f64)>,
}

/// A chart: title, caption (the parameters), axis labels, series.
pub(super) struct Chart {
    pub(super) title: String,
    pub(super) caption: String,
    pub(super) x: String,
    pub(super) y: String,
    pub(super) series: Vec<Series>,
    /// Draw points instead of lines.
    pub(super) points: bool,
}

/// Draws every plot the file's experiments have into `out/plots`; returns the files
/// (relative to `out`). Without the font, returns none.
pub fn render_all(file: &ResultsFile, out: &Path) -> Result<Vec<PathBuf>, String> {
    if !font_ready() {
        return Ok(Vec::new());
    }
    let dir = out.join("plots");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for &e in &file.experiments {
        for (name, panels) in charts(file, e) {
            if panels
                .iter()
                .all(|c| c.series.iter().all(|s| s.points.is_empty()))
            {
                continue;
            }
            for ext in ["png", "svg"] {
                let rel = PathBuf::from("plots").join(format!("{name}.{ext}"));
                draw(&out.join(&rel), &panels)?;
                files.push(rel);
            }
        }
    }
    Ok(files)
}

pub(super) fn draw(path: &Path, panels: &[Chart]) -> Result<(), String> {
    let size = (900, 420 * panels.len() as u32);
    let err = |e: String| format!("{}: {e}", path.display());
    if path.extension().is_some_and(|e| e == "svg") {
        let root = SVGBackend::new(path, size).into_drawing_area();
        draw_on(&root, panels).map_err(err)?;
        root.present().map_err(|e| err(e.to_string()))
    } else {
        let root = BitMapBackend::new(path, size).into_drawing_area();
        draw_on(&root, panels).map_err(err)?;
        root.present().map_err(|e| err(e.to_string()))
    }
}

fn draw_on<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panels: &[Chart],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let areas = root.split_evenly((panels.len(), 1));
    for (area, c) in areas.iter().zip(panels) {
        panel(area, c)?;
    }
    Ok(())
}

/// Pixels per caption character at 13 px (a conservative average for the font).
const CAPTION_CHAR_PX: usize = 7;

/// `text` in lines of at most `width` characters, broken after ", " where possible.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for part in text.split_inclusive(", ") {
        let cur = lines.last_mut().expect("one line");
        if !cur.is_empty() && cur.len() + part.trim_end().len() > width.max(1) {
            lines.push(part.to_string());
        } else {
            cur.push_str(part);
        }
    }
    lines.iter().map(|l| l.trim_end().to_string()).collect()
}

fn range(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = vals.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    match (lo, hi) {
        (l, h) if l > h => (0.0, 1.0),
        (l, h) if h - l < 1e-12 => (l - 1.0, h + 1.0),
        (l, h) => (l.min(0.0), h + (h - l) * 0.05),
    }
}

fn panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, c: &Chart) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let (w, h) = area.dim_in_pixel();
    let lines = wrap(
        &c.caption,
        (w as usize).saturating_sub(20) / CAPTION_CHAR_PX,
    );
    let (body, foot) = area.split_vertically(h as i32 - 12 - 16 * lines.len() as i32);
    let style = (FONT, 13).into_font().color(&BLACK.mix(0.8));
    for (i, line) in lines.iter().enumerate() {
        foot.draw_text(line, &style, (10, 6 + 16 * i as i32))
            .map_err(|x| e(&x))?;
    }
    let all = || c.series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = range(all().map(|p| p.0));
    let (y0, y1) = range(all().map(|p| p.1));
    let mut ch = ChartBuilder::on(&body)
        .caption(&c.title, (FONT, 18))
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|x| e(&x))?;
    ch.configure_mesh()
        .x_desc(&c.x)
        .y_desc(&c.y)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(|x| e(&x))?;
    for (i, s) in c.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let style = color.stroke_width(2);
        let drawn = match c.points {
            // Rings under dots, so that equal points of two series both show.
            true => ch.draw_series(s.points.iter().map(|&p| match i {
                0 => Circle::new(p, 8, color.stroke_width(2)),
                _ => Circle::new(p, 4, color.filled()),
            })),
            false => ch.draw_series(LineSeries::new(s.points.iter().copied(), style)),
        };
        drawn
            .map_err(|x| e(&x))?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
    }
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .position(match c.points {
            true => SeriesLabelPosition::LowerRight,
            false => SeriesLabelPosition::UpperRight,
        })
        .draw()
        .map_err(|x| e(&x))
}

/// The runs of `e` in `group` (all if empty) with variant prefix `v`: only each
/// variant's first seed (repetition 0) for E1, E2, E3 and E5, whose plots draw one
/// run per variant over time; every run for E4 (a point per run).
fn runs<'a>(f: &'a ResultsFile, e: Experiment, group: &str, v: &str) -> Vec<&'a RunRecord> {
    (f.runs.iter())
        .filter(|r| r.experiment == e && (group.is_empty() || r.group == group))
        .filter(|r| r.variant.starts_with(v))
        .filter(|r| e == Experiment::E4 || r.rep == 0)
        .collect()
}

fn param<'a>(r: &'a RunRecord, k: &str) -> &'a str {
    r.params.iter().find(|(n, _)| n == k).map_or("", |(_, v)| v)
}

/// "flows 200, rate 10 Gbit/s, rtt 10 ms, duration 15 s, seed 1".
fn caption(r: &RunRecord) -> String {
    let keys = [
        "flows",
        "rate",
        "rtt",
        "duration",
        "loss",
        "bytes",
        "SO_SNDBUF",
    ];
    let mut parts: Vec<String> = (keys.iter())
        .filter(|k| !param(r, k).is_empty())
        .map(|k| format!("{k} {}", param(r, k)))
        .collect();
    parts.push(format!("seed {}", r.seed));
    parts.join(", ")
}

/// Link rate in bit/s from a run's "rate" parameter ("1 Gbit/s", "100 Mbit/s").
fn rate_bps(r: &RunRecord) -> f64 {
    let s = param(r, "rate");
    let n: f64 = s
        .split_whitespace()
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0.0);
    match s.contains("Gbit") {
        true => n * 1e9,
        false => n * 1e6,
    }
}

fn series_of(r: &RunRecord, y: impl Fn(&lowtide_sim::timeseries::HostSample) -> f64) -> Series {
    Series {
        label: r.variant.clone(),
        points: r
            .series
            .iter()
            .map(|s| (s.time_us as f64 / 1e6, y(s)))
            .collect(),
    }
}

/// Per-second rate of a cumulative host column.
fn rate_series(r: &RunRecord, y: impl Fn(&lowtide_sim::timeseries::HostSample) -> f64) -> Series {
    let pts = r
        .series
        .windows(2)
        .map(|w| {
            let dt = (w[1].time_us - w[0].time_us) as f64 / 1e6;
            (
                w[1].time_us as f64 / 1e6,
                (y(&w[1]) - y(&w[0])) / dt.max(1e-9),
            )
        })
        .collect();
    Series {
        label: r.variant.clone(),
        points: pts,
    }
}

fn charts(f: &ResultsFile, e: Experiment) -> Vec<(String, Vec<Chart>)> {
    match e {
        Experiment::E1 => e1(f),
        Experiment::E2 => e2(f),
        Experiment::E3 => e3(f),
        Experiment::E4 => e4(f),
        Experiment::E5 => e5(f),
    }
}

fn e1(f: &ResultsFile) -> Vec<(String, Vec<Chart>)> {
    let rs = runs(f, Experiment::E1, "200 flows", "");
    let Some(first) = rs.first() else {
        return Vec::new();
    };
    let mb = |s: &lowtide_sim::timeseries::HostSample| s.tcp_mem_pages as f64 * 4096.0 / 1e6;
    vec![(
        "e1_memory".into(),
        vec![Chart {
            title: "E1: sender TCP memory over time, TCP_NOTSENT_LOWAT off vs on".into(),
            caption: caption(first),
            x: "virtual time (s)".into(),
            y: "TCP memory (MB, sockstat pages x 4 KB)".into(),
            series: rs.iter().map(|r| series_of(r, mb)).collect(),
            points: false,
        }],
    )]
}

fn e2(f: &ResultsFile) -> Vec<(String, Vec<Chart>)> {
    let rs = runs(f, Experiment::E2, "", "");
    let Some(first) = rs.first() else {
        return Vec::new();
    };
    let mb = |s: &lowtide_sim::timeseries::HostSample| s.tcp_mem_pages as f64 * 4096.0 / 1e6;
    let wk = |s: &lowtide_sim::timeseries::HostSample| s.wakeups as f64;
    vec![(
        "e2_wakeups_memory".into(),
        vec![
            Chart {
                title: "E2: writer wakeups per second (all flows)".into(),
                caption: caption(first) + ", BBR, tcp_wmem max 64 MB",
                x: "virtual time (s)".into(),
                y: "wakeups/s".into(),
                series: rs.iter().map(|r| rate_series(r, wk)).collect(),
                points: false,
            },
            Chart {
                title: "E2: sender TCP memory".into(),
                caption: caption(first),
                x: "virtual time (s)".into(),
                y: "TCP memory (MB)".into(),
                series: rs.iter().map(|r| series_of(r, mb)).collect(),
                points: false,
            },
        ],
    )]
}

fn e3(f: &ResultsFile) -> Vec<(String, Vec<Chart>)> {
    let mut groups: Vec<&str> = (f.runs.iter())
        .filter(|r| r.experiment == Experiment::E3)
        .map(|r| r.group.as_str())
        .collect();
    groups.dedup();
    let mut over_time = Vec::new();
    let mut cdf = Vec::new();
    for g in groups {
        let rs = runs(f, Experiment::E3, g, "");
        let Some(first) = rs.first() else { continue };
        let series = rs
            .iter()
            .map(|r| {
                let bps = rate_bps(r).max(1.0);
                series_of(r, move |s| s.dev_queue_bytes as f64 * 8.0 / bps * 1e3)
            })
            .collect();
        over_time.push(Chart {
            title: format!("E3, {g}: device-queue delay over time (backlog / rate)"),
            caption: caption(first) + ", pfifo 1000 packets",
            x: "virtual time (s)".into(),
            y: "queueing delay (ms)".into(),
            series,
            points: false,
        });
        cdf.push(Chart {
            title: format!("E3, {g}: CDF of the per-packet device-queue delay"),
            caption: caption(first) + ", x in log2(us)",
            x: "log2 of delay (us)".into(),
            y: "fraction of packets".into(),
            series: rs.iter().map(|r| delay_cdf(r)).collect(),
            points: false,
        });
    }
    vec![("e3_delay".into(), over_time), ("e3_delay_cdf".into(), cdf)]
}

fn delay_cdf(r: &RunRecord) -> Series {
    let total: u64 = r.delay_hist.iter().map(|(_, c)| c).sum();
    let mut acc = 0u64;
    let points = (r.delay_hist.iter())
        .map(|&(us, c)| {
            acc += c;
            (us.log2(), acc as f64 / total.max(1) as f64)
        })
        .collect();
    Series {
        label: r.variant.clone(),
        points,
    }
}

fn e4(f: &ResultsFile) -> Vec<(String, Vec<Chart>)> {
    let rs = runs(f, Experiment::E4, "", "");
    let Some(first) = rs.first() else {
        return Vec::new();
    };
    let by = |v: &str, y: fn(&RunRecord) -> f64| Series {
        label: (if v == "A" { "list" } else { "tree" }).into(),
        points: (rs.iter())
            .filter(|r| r.variant.starts_with(v) && r.figures.cpu.is_some())
            .map(|r| (r.figures.mean_in_flight, y(r)))
            .collect(),
    };
    let gp: fn(&RunRecord) -> f64 = |r| r.figures.goodput_bps / 1e6;
    let cpu: fn(&RunRecord) -> f64 =
        |r| r.figures.cpu.map_or(0.0, |c| c.cpu_per_packet_in_ns / 1e3);
    let jitter = match param(first, "jitter") {
        "" => String::new(),
        j => format!(", jitter {j}"),
    };
    let cap = format!(
        "one BBR flow, rtt {}, loss {}{jitter}, receiver GRO off, each point one run (rates 0.5-10 Gbit/s)",
        param(first, "rtt"),
        param(first, "loss")
    );
    vec![(
        "e4_goodput_cpu".into(),
        vec![
            Chart {
                title: "E4: goodput vs packets in flight, list vs tree (CPU modeled)".into(),
                caption: cap.clone(),
                x: "mean packets in flight".into(),
                y: "goodput (Mbit/s)".into(),
                series: vec![by("A", gp), by("B", gp)],
                points: true,
            },
            Chart {
                title: "E4: sender CPU per incoming packet (ACK) vs packets in flight".into(),
                caption: cap,
                x: "mean packets in flight".into(),
                y: "modeled CPU per ACK (us)".into(),
                series: vec![by("A", cpu), by("B", cpu)],
                points: true,
            },
        ],
    )]
}

fn e5(f: &ResultsFile) -> Vec<(String, Vec<Chart>)> {
    let rs = runs(f, Experiment::E5, "2,000,000 bytes", "");
    let Some(first) = rs.first() else {
        return Vec::new();
    };
    let series = rs
        .iter()
        .map(|r| Series {
            label: r.variant.clone(),
            points: (r.size_hist.iter())
                .flat_map(|&(b, c)| {
                    let x = b as f64 / 1024.0;
                    [(x, 0.0), (x, c as f64), (x + 1.0, c as f64), (x + 1.0, 0.0)]
                })
                .collect(),
        })
        .collect();
    vec![(
        "e5_packet_sizes".into(),
        vec![Chart {
            title: "E5: sizes of the packets handed to the device (GSO packets count once)".into(),
            caption: caption(first) + ", 1 KB buckets",
            x: "IP packet size (KB)".into(),
            y: "packets".into(),
            series,
            points: false,
        }],
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captions_wrap_after_commas() {
        let l = wrap("flows 1, rate 10 Gbit/s, rtt 40 ms, seed 1", 20);
        assert_eq!(l, vec!["flows 1,", "rate 10 Gbit/s,", "rtt 40 ms, seed 1"]);
        assert_eq!(wrap("short", 80), vec!["short"]);
    }
}
