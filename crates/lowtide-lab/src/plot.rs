//! The experiments' plots (PNG and SVG, plotters), drawn from a results file only.
//!
//! Text is rendered with ab_glyph from DejaVu Sans (Debian's fonts-dejavu-core,
//! which .ci/run installs); without the font no plot is drawn and the report says
//! so.

use crate::{stats, Experiment, ResultsFile, RunRecord};
use lowtide_sim::timeseries::HostSample;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Where the font is looked for.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];
const FONT: &str = "sans-serif";
const COLORS: [RGBColor; 10] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
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
#[derive(Default)]
pub(super) struct Series {
    pub(super) label: String,
    pub(super) points: Vec<(f64, f64)>,
    /// The 95 % confidence interval of the mean over the repetitions at each x,
    /// `(x, low, high)`: a shaded band along a line, error bars on points.
    pub(super) band: Vec<(f64, f64, f64)>,
    /// Dashed: a line drawn over one it may cover (E1's lowat 2 MB equals lowat off).
    pub(super) dashed: bool,
    /// The colour's index, if not the series' own (two runs of one flow alike).
    pub(super) color: Option<usize>,
}

/// A horizontal reference line: a seed's published figure, the kernel's.
pub(super) struct Reference {
    pub(super) label: String,
    pub(super) y: f64,
}

/// A chart: title, caption (the parameters), axis labels, series.
#[derive(Default)]
pub(super) struct Chart {
    pub(super) title: String,
    pub(super) caption: String,
    pub(super) x: String,
    pub(super) y: String,
    pub(super) series: Vec<Series>,
    /// Draw points instead of lines.
    pub(super) points: bool,
    /// Logarithmic x axis (values spanning decades; only positive values drawn).
    pub(super) log_x: bool,
    /// Logarithmic y axis.
    pub(super) log_y: bool,
    /// Horizontal reference lines (dashed grey, labeled in the legend).
    pub(super) refs: Vec<Reference>,
    /// Categories along x: each name is the tick label at its x (1, 2, ...); the x
    /// axis then spans half a step beyond them and shows no other labels, and the y
    /// axis leaves room above the points for the legend.
    pub(super) x_names: Vec<(f64, String)>,
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

/// Draws `panels` into a palette PNG at `path` ([`crate::png8`]): a third of
/// [`draw`]'s size, for plots kept in the repository.
pub(super) fn draw_png8(path: &Path, panels: &[Chart]) -> Result<(), String> {
    let size = (900, 420 * panels.len() as u32);
    let err = |e: String| format!("{}: {e}", path.display());
    let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
        draw_on(&root, panels).map_err(err)?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    crate::png8::write(path, &rgb, size)
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

/// A logarithmic axis' range over the positive values: a little beyond them.
fn log_range(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = (vals.filter(|v| *v > 0.0 && v.is_finite()))
        .fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    match (lo, hi) {
        (l, h) if l > h => (0.1, 1.0),
        (l, h) => (l / 1.5, h * 1.5),
    }
}

/// Keeps what a log axis can show.
fn visible(c: &Chart, (x, y): (f64, f64)) -> bool {
    x.is_finite() && y.is_finite() && (!c.log_x || x > 0.0) && (!c.log_y || y > 0.0)
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
    let pts = || {
        (c.series.iter())
            .flat_map(|s| {
                let band = s.band.iter().flat_map(|&(x, lo, hi)| [(x, lo), (x, hi)]);
                s.points.iter().copied().chain(band)
            })
            .filter(|&p| visible(c, p))
    };
    let xs = || pts().map(|p| p.0);
    let ys = || pts().map(|p| p.1).chain(c.refs.iter().map(|r| r.y));
    let (x0, x1) = match (c.log_x, c.x_names.is_empty()) {
        (true, _) => log_range(xs()),
        (false, true) => range(xs()),
        (false, false) => (c.x_names[0].0 - 0.5, c.x_names[c.x_names.len() - 1].0 + 0.5),
    };
    let (y0, mut y1) = match c.log_y {
        true => log_range(ys()),
        false => range(ys()),
    };
    // Room above the points for the legend.
    match (c.x_names.is_empty(), c.log_y) {
        (true, _) => {}
        (false, false) => y1 += (y1 - y0) * 0.3,
        (false, true) => y1 *= 4.0,
    }
    let mut b = ChartBuilder::on(&body);
    b.caption(&c.title, (FONT, 18))
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(70);
    match (c.log_x, c.log_y) {
        (false, false) => body_of(b.build_cartesian_2d(x0..x1, y0..y1), c),
        (true, false) => body_of(b.build_cartesian_2d((x0..x1).log_scale(), y0..y1), c),
        (false, true) => body_of(b.build_cartesian_2d(x0..x1, (y0..y1).log_scale()), c),
        (true, true) => body_of(
            b.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale()),
            c,
        ),
    }
}

/// Mesh, bands, series, references and legend of a built chart (any axis kinds).
fn body_of<'a, DB, X, Y, E>(
    built: Result<ChartContext<'a, DB, Cartesian2d<X, Y>>, E>,
    c: &Chart,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    E: std::fmt::Display,
{
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let mut ch = built.map_err(|x| e(&x))?;
    let name_at = |x: &f64| {
        (c.x_names.iter())
            .find(|(at, _)| (at - x).abs() < 1e-6)
            .map(|(_, n)| n.clone())
            .unwrap_or_default()
    };
    let mut mesh = ch.configure_mesh();
    mesh.x_desc(&c.x)
        .y_desc(&c.y)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14));
    if !c.x_names.is_empty() {
        // Key points every 0.1 include each category's x; the others stay blank.
        mesh.x_labels(60)
            .x_label_formatter(&name_at)
            .disable_x_mesh();
    }
    mesh.draw().map_err(|x| e(&x))?;
    let n = c.series.len();
    for (i, s) in c.series.iter().enumerate() {
        let color = COLORS[s.color.unwrap_or(i) % COLORS.len()];
        let band: Vec<(f64, f64, f64)> = (s.band.iter().copied())
            .filter(|&(x, lo, hi)| visible(c, (x, lo)) && visible(c, (x, hi)))
            .collect();
        if c.points {
            // Error bars: a vertical stroke from the interval's low to its high end.
            ch.draw_series(band.iter().map(|&(x, lo, hi)| {
                PathElement::new(vec![(x, lo), (x, hi)], color.stroke_width(2))
            }))
            .map_err(|x| e(&x))?;
        } else if band.len() >= 2 {
            let poly: Vec<(f64, f64)> = (band.iter().map(|&(x, lo, _)| (x, lo)))
                .chain(band.iter().rev().map(|&(x, _, hi)| (x, hi)))
                .collect();
            ch.draw_series(std::iter::once(Polygon::new(poly, color.mix(0.2).filled())))
                .map_err(|x| e(&x))?;
        }
        let points: Vec<(f64, f64)> = (s.points.iter().copied())
            .filter(|&p| visible(c, p))
            .collect();
        // Earlier series a little wider, so that an equal later one leaves a rim.
        let width = 2 + (n - i).min(3) as u32 - 1;
        let drawn = match (c.points, s.dashed) {
            // Rings under dots, so that equal points of two series both show.
            (true, _) => ch.draw_series(points.iter().map(|&p| match i {
                0 => Circle::new(p, 8, color.stroke_width(2)),
                _ => Circle::new(p, 4, color.filled()),
            })),
            (false, true) => ch.draw_series(DashedLineSeries::new(
                points.iter().copied(),
                10,
                6,
                color.stroke_width(2),
            )),
            (false, false) => ch.draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(width),
            )),
        };
        let drawn = drawn.map_err(|x| e(&x))?;
        // A series without a label has no legend entry (the title says what it is).
        if !s.label.is_empty() {
            drawn.label(s.label.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
        }
    }
    let (x0, x1) = {
        let r = ch.x_range();
        (r.start, r.end)
    };
    for (k, r) in c.refs.iter().enumerate() {
        let grey = RGBColor(0x40, 0x40, 0x40).mix(0.35 + 0.3 * (k % 2) as f64);
        ch.draw_series(DashedLineSeries::new(
            [(x0, r.y), (x1, r.y)],
            6,
            4,
            grey.stroke_width(2),
        ))
        .map_err(|x| e(&x))?
        .label(r.label.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], grey.stroke_width(2)));
    }
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .position(match c.points && c.x_names.is_empty() {
            true => SeriesLabelPosition::LowerRight,
            false => SeriesLabelPosition::UpperRight,
        })
        .draw()
        .map_err(|x| e(&x))
}

/// The runs of `e` in `group` (all but sweeps if empty) with variant prefix `v`,
/// every repetition.
fn runs<'a>(f: &'a ResultsFile, e: Experiment, group: &str, v: &str) -> Vec<&'a RunRecord> {
    (f.runs.iter())
        .filter(|r| r.experiment == e)
        .filter(|r| r.group == group || (group.is_empty() && !r.group.starts_with("sweep")))
        .filter(|r| r.variant.starts_with(v))
        .collect()
}

/// The variants of `rs` in plan order, each with its repetitions.
fn by_variant<'a>(rs: &[&'a RunRecord]) -> Vec<Vec<&'a RunRecord>> {
    let mut out: Vec<Vec<&RunRecord>> = Vec::new();
    for &r in rs {
        match out.iter_mut().find(|v| v[0].variant == r.variant) {
            Some(v) => v.push(r),
            None => out.push(vec![r]),
        }
    }
    out
}

/// The mean over repetitions of per-run series on one x grid (the shortest run's),
/// with the 95 % confidence interval of the mean as its band (none for n = 1).
fn mean_series(label: String, per_run: Vec<Vec<(f64, f64)>>) -> Series {
    let n = per_run.iter().map(Vec::len).min().unwrap_or(0);
    let mut s = Series {
        label,
        ..Series::default()
    };
    for i in 0..n {
        let ys: Vec<f64> = per_run.iter().map(|p| p[i].1).collect();
        let Some(sm) = stats::summary(&ys) else {
            continue;
        };
        let x = per_run[0][i].0;
        s.points.push((x, sm.mean));
        if let Some(h) = sm.half {
            s.band.push((x, sm.mean - h, sm.mean + h));
        }
    }
    s
}

/// ", mean of n seeds with its 95 % CI band" (", one seed" for n = 1).
fn reps_note(vs: &[Vec<&RunRecord>]) -> String {
    match vs.iter().map(Vec::len).max().unwrap_or(0) {
        0 | 1 => ", one seed".into(),
        n => format!(", mean of {n} seeds (shaded: its 95 % CI)"),
    }
}

fn param<'a>(r: &'a RunRecord, k: &str) -> &'a str {
    r.params.iter().find(|(n, _)| n == k).map_or("", |(_, v)| v)
}

/// "flows 200, rate 10 Gbit/s, rtt 10 ms, duration 15 s".
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
    let parts: Vec<String> = (keys.iter())
        .filter(|k| !param(r, k).is_empty())
        .map(|k| format!("{k} {}", param(r, k)))
        .collect();
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

fn host_points(r: &RunRecord, y: impl Fn(&HostSample) -> f64) -> Vec<(f64, f64)> {
    (r.series.iter())
        .map(|s| (s.time_us as f64 / 1e6, y(s)))
        .collect()
}

/// Per-second rate of a cumulative host column.
fn rate_points(r: &RunRecord, y: impl Fn(&HostSample) -> f64) -> Vec<(f64, f64)> {
    (r.series.windows(2))
        .map(|w| {
            let dt = (w[1].time_us - w[0].time_us) as f64 / 1e6;
            (
                w[1].time_us as f64 / 1e6,
                (y(&w[1]) - y(&w[0])) / dt.max(1e-9),
            )
        })
        .collect()
}

/// A seed's figure in 4 KB pages as a reference line in MB.
fn pages_ref(label: &str, pages: f64) -> Reference {
    Reference {
        label: label.into(),
        y: pages * 4096.0 / 1e6,
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

fn mb(s: &HostSample) -> f64 {
    s.tcp_mem_pages as f64 * 4096.0 / 1e6
}

fn e1(f: &ResultsFile) -> Vec<(String, Vec<Chart>)> {
    let mut panels = Vec::new();
    for g in ["200 flows", "1 flow"] {
        let rs = runs(f, Experiment::E1, g, "");
        let Some(first) = rs.first() else {
            continue;
        };
        let vs = by_variant(&rs);
        let series = (vs.iter())
            .map(|v| Series {
                // The sweep's lines dashed: lowat 2 MB equals lowat off (200 flows
                // never hold 2 MB unsent), and would hide it.
                dashed: v[0].variant.starts_with("sweep"),
                ..mean_series(
                    v[0].variant.clone(),
                    v.iter().map(|r| host_points(r, mb)).collect(),
                )
            })
            .collect();
        let (refs, note) = match g {
            "200 flows" => (
                vec![
                    pages_ref("seed 000: lowat off, 45,458 pages", 45_458.0),
                    pages_ref("seed 000: lowat 128 KB, 20,567 pages", 20_567.0),
                ],
                "; dashed grey: seed 000's figures (60 s into 90 s runs)",
            ),
            _ => (
                Vec::new(),
                "; the seed published no memory figure for one flow",
            ),
        };
        panels.push(Chart {
            title: format!("E1, {g}: sender TCP memory over time, TCP_NOTSENT_LOWAT off vs on"),
            caption: caption(first) + &reps_note(&vs) + note,
            x: "virtual time (s)".into(),
            y: "TCP memory (MB, sockstat pages x 4 KB)".into(),
            series,
            refs,
            ..Chart::default()
        });
    }
    match panels.is_empty() {
        true => Vec::new(),
        false => vec![("e1_memory".into(), panels)],
    }
}

fn e2(f: &ResultsFile) -> Vec<(String, Vec<Chart>)> {
    let rs = runs(f, Experiment::E2, "", "");
    let Some(first) = rs.first() else {
        return Vec::new();
    };
    let vs = by_variant(&rs);
    let wk = |s: &HostSample| s.wakeups as f64;
    let mut out = vec![(
        "e2_wakeups_memory".into(),
        vec![
            Chart {
                title: "E2: writer wakeups per second (all flows; log scale)".into(),
                caption: caption(first) + ", BBR, tcp_wmem max 64 MB" + &reps_note(&vs) + "; dashed grey: the seed's vmstat context switches per second (not the same event)",
                x: "virtual time (s)".into(),
                y: "wakeups/s".into(),
                series: (vs.iter())
                    .map(|v| {
                        let per_run = v.iter().map(|r| rate_points(r, wk)).collect();
                        mean_series(v[0].variant.clone(), per_run)
                    })
                    .collect(),
                log_y: true,
                refs: vec![
                    Reference {
                        label: "seed 001: ~6,000 cs/s without lowat".into(),
                        y: 6_000.0,
                    },
                    Reference {
                        label: "seed 001: ~13,000 cs/s with lowat 2 MB".into(),
                        y: 13_000.0,
                    },
                ],
                ..Chart::default()
            },
            Chart {
                title: "E2: sender TCP memory (log scale)".into(),
                caption: caption(first) + &reps_note(&vs) + "; dashed grey: seed 001's sockstat figures",
                x: "virtual time (s)".into(),
                y: "TCP memory (MB)".into(),
                series: (vs.iter())
                    .map(|v| {
                        let per_run = v.iter().map(|r| host_points(r, mb)).collect();
                        mean_series(v[0].variant.clone(), per_run)
                    })
                    .collect(),
                log_y: true,
                refs: vec![
                    pages_ref("seed 001: lowat off, 1,364,904 pages", 1_364_904.0),
                    pages_ref("seed 001: lowat 2 MB, 86,411 pages", 86_411.0),
                ],
                ..Chart::default()
            },
        ],
    )];
    out.extend(e2_sweep(f));
    out
}

/// E2's sweep: A's memory per flow against the per-flow bandwidth-delay product,
/// each group's mean with its 95 % CI, and tcp_sndbuf_expand's prediction.
fn e2_sweep(f: &ResultsFile) -> Vec<(String, Vec<Chart>)> {
    let rs: Vec<&RunRecord> = (f.runs.iter())
        .filter(|r| r.experiment == Experiment::E2 && r.group.starts_with("sweep"))
        .collect();
    let mut groups: Vec<Vec<&RunRecord>> = Vec::new();
    for &r in &rs {
        match groups.iter_mut().find(|g| g[0].group == r.group) {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    let mut measured = Series {
        label: "A: lowat off, mean wmem per flow".into(),
        ..Series::default()
    };
    let mut predicted = Series {
        label: "9.5 x BDP: tcp_sndbuf_expand, 3 x (2 x BDP) x 2,304 B / 1,448 B".into(),
        ..Series::default()
    };
    for g in &groups {
        let Some(bdp) = crate::report::per_flow_bdp(g[0]) else {
            continue;
        };
        let xs: Vec<f64> = g
            .iter()
            .map(|r| r.figures.mean_wmem_per_flow / 1e6)
            .collect();
        let Some(sm) = stats::summary(&xs) else {
            continue;
        };
        let x = bdp / 1e6;
        measured.points.push((x, sm.mean));
        if let Some(h) = sm.half {
            measured.band.push((x, sm.mean - h, sm.mean + h));
        }
        predicted.points.push((x, 9.5 * x));
    }
    if measured.points.is_empty() {
        return Vec::new();
    }
    vec![(
        "e2_sweep".into(),
        vec![Chart {
            title: "E2: memory without lowat vs the per-flow bandwidth-delay product".into(),
            caption: format!(
                "BBR flows, rtt 100 ms, tcp_wmem max 64 MB; {} settings of link rate x flow count (see the report's table), error bars: 95 % CI over the seeds; log scales",
                measured.points.len()
            ),
            x: "per-flow BDP (MB)".into(),
            y: "sk_wmem_queued per flow, mean over the run (MB)".into(),
            series: vec![predicted, measured],
            points: true,
            log_x: true,
            log_y: true,
            ..Chart::default()
        }],
    )]
}

/// The seed's before/after for E3's one-flow groups, as reference lines (ms).
fn e3_refs(group: &str) -> Vec<Reference> {
    let r = |label: &str, y| Reference {
        label: label.into(),
        y,
    };
    match group {
        "1 Gbit/s, 1 flow" => vec![
            r("seed 002: 50 ms without TSQ", 50.0),
            r("seed 002: < 1 ms with TSQ", 1.0),
        ],
        "100 Mbit/s, 1 flow" => vec![
            r("seed 002: 132 ms without TSQ", 132.0),
            r("seed 002: < 8 ms with TSQ", 8.0),
        ],
        _ => Vec::new(),
    }
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
        let vs = by_variant(&rs);
        let series = (vs.iter())
            .map(|v| {
                let per_run = (v.iter())
                    .map(|r| {
                        let bps = rate_bps(r).max(1.0);
                        host_points(r, move |s| s.dev_queue_bytes as f64 * 8.0 / bps * 1e3)
                    })
                    .collect();
                mean_series(v[0].variant.clone(), per_run)
            })
            .collect();
        over_time.push(Chart {
            title: format!("E3, {g}: device-queue delay over time (backlog / rate; log scale)"),
            caption: caption(first)
                + ", pfifo 1000 packets"
                + &reps_note(&vs)
                + "; dashed grey: seed 002's figures",
            x: "virtual time (s)".into(),
            y: "queueing delay (ms)".into(),
            series,
            log_y: true,
            refs: e3_refs(g),
            ..Chart::default()
        });
        cdf.push(Chart {
            title: format!("E3, {g}: CDF of the per-packet device-queue delay"),
            caption: caption(first)
                + ", every seed's packets pooled; dashed grey: seed 002's figures",
            x: "delay from enqueue to serialization (ms, log scale)".into(),
            y: "fraction of packets".into(),
            series: vs.iter().map(|v| delay_cdf(v)).collect(),
            log_x: true,
            ..Chart::default()
        });
    }
    vec![("e3_delay".into(), over_time), ("e3_delay_cdf".into(), cdf)]
}

/// The CDF of the per-packet NIC wait over a variant's runs (histograms pooled), x
/// in ms at each bucket's upper edge.
fn delay_cdf(v: &[&RunRecord]) -> Series {
    let mut hist: Vec<(f64, u64)> = Vec::new();
    for r in v {
        for &(us, c) in &r.delay_hist {
            match hist.iter_mut().find(|(u, _)| *u == us) {
                Some((_, n)) => *n += c,
                None => hist.push((us, c)),
            }
        }
    }
    hist.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: u64 = hist.iter().map(|(_, c)| c).sum();
    let mut acc = 0u64;
    let points = (hist.iter())
        .map(|&(us, c)| {
            acc += c;
            (us / 1e3, acc as f64 / total.max(1) as f64)
        })
        .collect();
    Series {
        label: v.first().map_or(String::new(), |r| r.variant.clone()),
        points,
        ..Series::default()
    }
}

fn e4(f: &ResultsFile) -> Vec<(String, Vec<Chart>)> {
    let rs: Vec<&RunRecord> = (f.runs.iter())
        .filter(|r| r.experiment == Experiment::E4)
        .collect();
    let Some(first) = rs.first() else {
        return Vec::new();
    };
    let by = |v: &str, y: fn(&RunRecord) -> f64| Series {
        label: (if v == "A" { "list" } else { "tree" }).into(),
        points: (rs.iter())
            .filter(|r| r.variant.starts_with(v) && r.figures.cpu.is_some())
            .map(|r| (r.figures.mean_in_flight, y(r)))
            .collect(),
        ..Series::default()
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
                ..Chart::default()
            },
            Chart {
                title: "E4: sender CPU per incoming packet (ACK) vs packets in flight".into(),
                caption: cap,
                x: "mean packets in flight".into(),
                y: "modeled CPU per ACK (us)".into(),
                series: vec![by("A", cpu), by("B", cpu)],
                points: true,
                ..Chart::default()
            },
        ],
    )]
}

fn e5(f: &ResultsFile) -> Vec<(String, Vec<Chart>)> {
    let rs: Vec<&RunRecord> = (runs(f, Experiment::E5, "2,000,000 bytes", "").into_iter())
        .filter(|r| r.rep == 0)
        .collect();
    let Some(first) = rs.first() else {
        return Vec::new();
    };
    // Side by side: variant i draws its 1 KB bucket in the i-th part of the bucket.
    let n = rs.len().max(1) as f64;
    let series = (rs.iter().enumerate())
        .map(|(i, r)| Series {
            label: r.variant.clone(),
            points: (r.size_hist.iter())
                .flat_map(|&(b, c)| {
                    let x = b as f64 / 1024.0 + i as f64 / n;
                    let w = 1.0 / n;
                    [(x, 0.0), (x, c as f64), (x + w, c as f64), (x + w, 0.0)]
                })
                .collect(),
            ..Series::default()
        })
        .collect();
    vec![(
        "e5_packet_sizes".into(),
        vec![Chart {
            title: "E5: sizes of the packets handed to the device (GSO packets count once)".into(),
            caption: caption(first)
                + &format!(
                    ", seed {}, 1 KB buckets, the variants side by side in each",
                    first.seed
                ),
            x: "IP packet size (KB)".into(),
            y: "packets".into(),
            series,
            ..Chart::default()
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
