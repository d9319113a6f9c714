//! Parameter sweeps of a scenario file (`lowtide sim sweep`, issue 22): the grid of
//! `--param PATH=[V1,V2,...]` values, each point one `lowtide sim run` with those
//! values as `--set` overrides, its verdict and its checks; shards of the grid
//! (`--shard I/N`, as [`crate::Shard`] cuts an experiment's plan) and their merge
//! ([`merge`], through [`crate::slot_by_index`]); a report that tables every flow and
//! queue figure per point and plots chosen figures against the first parameter
//! ([`crate::plot`]'s charts). Everything here reads only a [`SweepFile`], so a
//! merged sweep renders as a single run does.

use crate::plot::{draw, font_ready, Chart, Series};
use crate::report::num;
use crate::{slot_by_index, MergeError, Shard};
use lowtide_sim::network::check::{Figure, Owner, FLOW_FIGURES, QUEUE_FIGURES};
use lowtide_sim::network::report::{flow_figure, queue_figure};
use lowtide_sim::network::NetResults;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Version of the sweep results file's layout.
pub const SWEEP_FORMAT: u32 = 1;

/// One swept setting: a dotted path (as `--set` takes) and its values, each as
/// written (`--set PATH=VALUE` reads it: a TOML value, else the text itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    /// The dotted path (`links.bottleneck.rate`).
    pub path: String,
    /// The values, as written.
    pub values: Vec<String>,
}

impl Param {
    /// Parses `PATH=[V1,V2,...]`: values apart by commas, a value holding a comma
    /// quoted (`links.b.queue=["pfifo", "fq_codel,ecn=1"]`).
    pub fn parse(s: &str) -> Result<Param, String> {
        let (path, list) =
            (s.split_once('=')).ok_or_else(|| format!("--param {s}: PATH=[V1,V2,...] expected"))?;
        let (path, list) = (path.trim(), list.trim());
        let inner = (list.strip_prefix('['))
            .and_then(|l| l.strip_suffix(']'))
            .ok_or_else(|| format!("--param {s}: the values go in [ ], apart by commas"))?;
        let values = split_list(inner).map_err(|e| format!("--param {s}: {e}"))?;
        if path.is_empty() || path.split('.').any(str::is_empty) {
            return Err(format!("--param {s}: {path}: not a dotted path"));
        }
        if values.is_empty() {
            return Err(format!("--param {s}: no values"));
        }
        Ok(Param {
            path: path.to_string(),
            values,
        })
    }
}

/// The elements of a list's inside, apart by commas outside quotes and brackets.
fn split_list(s: &str) -> Result<Vec<String>, String> {
    let (mut out, mut cur) = (Vec::new(), String::new());
    let (mut quote, mut depth) = (None::<char>, 0i32);
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => depth += 1,
            (None, ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if quote.is_some() || depth != 0 {
        return Err("unbalanced quotes or brackets".into());
    }
    out.push(cur);
    let out: Vec<String> = out.into_iter().map(|v| v.trim().to_string()).collect();
    match out.as_slice() {
        [one] if one.is_empty() => Ok(Vec::new()),
        _ if out.iter().any(String::is_empty) => Err("an empty value".into()),
        _ => Ok(out),
    }
}

/// A value as the tables show it: a quoted TOML string without its quotes.
pub fn shown(value: &str) -> String {
    let doc: Result<toml::Table, _> = format!("v = {value}").parse();
    match doc.ok().and_then(|mut t| t.remove("v")) {
        Some(toml::Value::String(s)) => s,
        _ => value.to_string(),
    }
}

/// The grid: every combination of the parameters' values, the first parameter
/// outermost; each point its `(path, value)` pairs in the parameters' order.
pub fn grid(params: &[Param]) -> Vec<Vec<(String, String)>> {
    let mut points = vec![Vec::new()];
    for p in params {
        points = (points.into_iter())
            .flat_map(|pt: Vec<(String, String)>| {
                (p.values.iter()).map(move |v| {
                    let mut next = pt.clone();
                    next.push((p.path.clone(), v.clone()));
                    next
                })
            })
            .collect();
    }
    points
}

/// One flow's or queue's figures at a point (`None`: it has none, e.g. a bulk
/// flow's probe delay).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The flow (`NAME`, `NAME#i`) or queue (`SRC->DST`).
    pub name: String,
    /// Its figures by name ([`FLOW_FIGURES`], [`QUEUE_FIGURES`]).
    pub figures: BTreeMap<String, Option<f64>>,
}

/// A check's outcome at a point (`None`: the figure has no value).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRow {
    /// The check as written.
    pub check: String,
    /// Its left figure's value.
    pub left: Option<f64>,
    /// Its right side's value.
    pub right: Option<f64>,
    /// Whether it held.
    pub pass: bool,
}

/// One point of the grid, run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Position in the grid.
    pub index: usize,
    /// Its values: `(path, value as written)`.
    pub params: Vec<(String, String)>,
    /// Every flow connected and delivered its bytes intact.
    pub verified: bool,
    /// Why not, if not (or why the point could not run).
    pub failure: Option<String>,
    /// The file's checks.
    pub checks: Vec<CheckRow>,
    /// Every flow's figures.
    pub flows: Vec<Row>,
    /// The figures of the queues that carry a flow's data.
    pub queues: Vec<Row>,
    /// Virtual time run (s).
    pub duration_s: f64,
    /// Events processed.
    pub sim_events: u64,
    /// Wire segments serialized.
    pub sim_packets: u64,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

impl Point {
    /// The point's record from its run's results (wall-clock figures left out:
    /// the file is a function of the grid).
    pub fn new(index: usize, params: Vec<(String, String)>, r: &NetResults) -> Point {
        let row = |name: &str, f: &dyn Fn(&str) -> Option<f64>, names: &[&str]| Row {
            name: name.to_string(),
            figures: (names.iter())
                .map(|n| (n.to_string(), f(n).and_then(finite)))
                .collect(),
        };
        Point {
            index,
            params,
            verified: r.bytes_verified,
            failure: r.failure.clone(),
            checks: (r.checks.iter())
                .map(|c| CheckRow {
                    check: c.check.clone(),
                    left: finite(c.left),
                    right: finite(c.right),
                    pass: c.pass,
                })
                .collect(),
            flows: (r.flows.iter())
                .map(|f| row(&f.name, &|n| flow_figure(f, n), FLOW_FIGURES))
                .collect(),
            queues: (r.queues.iter().filter(|q| q.flows > 0))
                .map(|q| row(&q.name, &|n| queue_figure(q, n), QUEUE_FIGURES))
                .collect(),
            duration_s: r.duration_s,
            sim_events: r.sim_events,
            sim_packets: r.sim_packets,
        }
    }

    /// A point that could not run (`why`).
    pub fn failed(index: usize, params: Vec<(String, String)>, why: String) -> Point {
        Point {
            index,
            params,
            verified: false,
            failure: Some(why),
            checks: Vec::new(),
            flows: Vec::new(),
            queues: Vec::new(),
            duration_s: 0.0,
            sim_events: 0,
            sim_packets: 0,
        }
    }

    /// Every byte verified and every check held.
    pub fn pass(&self) -> bool {
        self.verified && self.checks.iter().all(|c| c.pass)
    }

    /// `path=value, ...`, values as the tables show them.
    pub fn label(&self) -> String {
        (self.params.iter())
            .map(|(p, v)| format!("{p}={}", shown(v)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What failed: the verdict and the checks that did not hold.
    pub fn failures(&self) -> Vec<String> {
        let mut out: Vec<String> = self.failure.iter().cloned().collect();
        for c in self.checks.iter().filter(|c| !c.pass) {
            let v = |x: Option<f64>| x.map_or("-".into(), num);
            out.push(format!(
                "check failed: {} (left {}, right {})",
                c.check,
                v(c.left),
                v(c.right)
            ));
        }
        out
    }

    /// The value of a figure (`flow.NAME.F`: a flow's, or the mean over a
    /// `count` group's instances; `queue.SRC->DST.F`), as a check reads it.
    pub fn figure(&self, f: &Figure) -> Option<f64> {
        let rows: Vec<&Row> = match f.owner {
            Owner::Flow => {
                let group = format!("{}#", f.name);
                (self.flows.iter())
                    .filter(|r| r.name == f.name || r.name.starts_with(&group))
                    .collect()
            }
            Owner::Queue => self.queues.iter().filter(|q| q.name == f.name).collect(),
        };
        let xs: Vec<f64> = (rows.iter())
            .map(|r| r.figures.get(&f.figure).copied().flatten())
            .collect::<Option<_>>()?;
        (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
    }
}

/// What `lowtide sim sweep` writes to results.json: a function of the file, the
/// overrides and the grid (no wall-clock figures), so shards merge into exactly
/// what one run gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepFile {
    /// Layout version ([`SWEEP_FORMAT`]).
    pub format: u32,
    /// The scenario file, as given.
    pub scenario: String,
    /// SHA-256 of its text (shards of another file's sweep do not merge).
    pub scenario_sha256: String,
    /// `--quick`.
    pub quick: bool,
    /// The `--set` overrides, applied before each point's values.
    pub sets: Vec<String>,
    /// The swept parameters, in order.
    pub params: Vec<Param>,
    /// The figures plotted against the first parameter.
    pub plots: Vec<String>,
    /// Points in the whole grid.
    pub plan_points: usize,
    /// The shard this file holds, `None` for the whole grid.
    pub shard: Option<Shard>,
    /// The points run, by index.
    pub points: Vec<Point>,
}

impl SweepFile {
    /// The points that failed.
    pub fn failed(&self) -> Vec<&Point> {
        self.points.iter().filter(|p| !p.pass()).collect()
    }
}

/// Combines shard files of one sweep into the file the whole grid gives; every
/// point must be there once.
pub fn merge(parts: Vec<SweepFile>) -> Result<SweepFile, MergeError> {
    let Some(first) = parts.first() else {
        return Err(MergeError("nothing to merge".into()));
    };
    let same = |p: &SweepFile| {
        p.format == first.format
            && p.scenario_sha256 == first.scenario_sha256
            && (p.quick, &p.sets, &p.params) == (first.quick, &first.sets, &first.params)
            && p.plan_points == first.plan_points
    };
    if !parts.iter().all(same) {
        return Err(MergeError(
            "the files come from different sweeps (scenario, --quick, --set, --param or format differ)"
                .into(),
        ));
    }
    let mut file = SweepFile {
        points: Vec::new(),
        shard: None,
        ..first.clone()
    };
    let n = file.plan_points;
    let all = (parts.into_iter().flat_map(|p| p.points)).map(|p| (p.index, p));
    let slots = slot_by_index(n, "point", all)?;
    let missing: Vec<usize> = (0..n).filter(|&i| slots[i].is_none()).collect();
    if let Some(first) = missing.first() {
        return Err(MergeError(format!(
            "{} of {n} points missing (first: {first})",
            missing.len()
        )));
    }
    file.points = slots.into_iter().flatten().collect();
    Ok(file)
}

/// report.md: what ran, each point's verdict and checks, the plots, then a table
/// per flow and per queue with every figure per point.
pub fn markdown(f: &SweepFile, plots: &[PathBuf]) -> String {
    let mut s = format!("# Sweep of {}\n\n", f.scenario);
    let grid: Vec<String> = (f.params.iter())
        .map(|p| format!("`{}` ({} values)", p.path, p.values.len()))
        .collect();
    let _ = write!(s, "{} points: {}", f.plan_points, grid.join(" x "));
    if f.quick {
        s.push_str(", `--quick`");
    }
    for set in &f.sets {
        let _ = write!(s, ", `--set {set}`");
    }
    let failed = f.failed().len();
    let _ = writeln!(
        s,
        ". {} of {} points pass (every byte verified, every check held).\n",
        f.points.len() - failed,
        f.points.len()
    );
    if let Some(sh) = f.shard {
        let _ = writeln!(
            s,
            "Shard {} of {}: merge the shards' directories with `lowtide sim merge`.\n",
            sh.index, sh.count
        );
    }
    let heads: Vec<&str> = f.params.iter().map(|p| p.path.as_str()).collect();
    let head = |extra: &[&str]| {
        let cols: Vec<&str> = ["#"].iter().chain(&heads).chain(extra).copied().collect();
        format!("| {} |\n|{}\n", cols.join(" | "), "---|".repeat(cols.len()))
    };
    let lead = |p: &Point| {
        let vals: Vec<String> = p.params.iter().map(|(_, v)| shown(v)).collect();
        format!("| {} | {}", p.index, vals.join(" | "))
    };
    s.push_str("## Points\n\n");
    s.push_str(&head(&["verdict", "checks"]));
    for p in &f.points {
        let held = p.checks.iter().filter(|c| c.pass).count();
        let verdict = match (&p.failure, p.pass()) {
            (Some(why), _) => format!("FAILED: {why}"),
            (None, true) => "ok".into(),
            (None, false) => "FAILED (checks)".into(),
        };
        let _ = writeln!(
            s,
            "{} | {verdict} | {held} of {} |",
            lead(p),
            p.checks.len()
        );
    }
    if !plots.is_empty() {
        s.push_str("\n## Plots\n\n");
        for p in plots
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "png"))
        {
            let _ = writeln!(s, "![{0}]({0})\n", p.display());
        }
    }
    let v = |x: Option<f64>| x.map_or("-".into(), figure_text);
    for (kind, rows) in [
        ("flow", (|p: &Point| &p.flows) as fn(&Point) -> &Vec<Row>),
        ("queue", |p: &Point| &p.queues),
    ] {
        let mut names: Vec<&str> = (f.points.iter())
            .flat_map(|p| rows(p).iter().map(|r| r.name.as_str()))
            .collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let known = if kind == "flow" {
                FLOW_FIGURES
            } else {
                QUEUE_FIGURES
            };
            let of = |p: &Point| rows(p).iter().find(|r| r.name == name).cloned();
            // Only the figures some point has a value of.
            let cols: Vec<&str> = (known.iter().copied())
                .filter(|c| {
                    (f.points.iter()).any(|p| {
                        of(p).is_some_and(|r| r.figures.get(*c).copied().flatten().is_some())
                    })
                })
                .collect();
            let _ = writeln!(s, "\n## {kind} {name}\n");
            s.push_str(&head(&cols));
            for p in &f.points {
                let Some(r) = of(p) else { continue };
                let vals: Vec<String> = (cols.iter())
                    .map(|c| v(r.figures.get(*c).copied().flatten()))
                    .collect();
                let _ = writeln!(s, "{} | {} |", lead(p), vals.join(" | "));
            }
        }
    }
    if f.points.iter().any(|p| !p.checks.is_empty()) {
        s.push_str("\n## Checks\n\n");
        s.push_str(&head(&["check", "left", "right", "held"]));
        for p in &f.points {
            for c in &p.checks {
                let held = if c.pass { "yes" } else { "NO" };
                let _ = writeln!(
                    s,
                    "{} | `{}` | {} | {} | {held} |",
                    lead(p),
                    c.check,
                    v(c.left),
                    v(c.right)
                );
            }
        }
    }
    s
}

/// A figure for the tables: whole numbers (bytes, drops) whole, others to three
/// significant decimals at most.
fn figure_text(x: f64) -> String {
    match x.fract() == 0.0 && x.abs() < 1e15 {
        true => format!("{x:.0}"),
        false => num(x),
    }
}

/// A number of a value as written: bare, else a rate (bit/s), a duration (ms)
/// or a size (`kb`, `mb`: bytes); `None` for text such as a qdisc's name.
fn numeric(v: &str) -> Option<(f64, &'static str)> {
    let v = shown(v);
    if let Ok(x) = v.trim().parse::<f64>() {
        return Some((x, ""));
    }
    if let Ok(bps) = lowtide_sim::units::parse_rate(&v) {
        return Some((bps as f64 / 1e6, "Mbit/s"));
    }
    if let Ok(d) = lowtide_sim::units::parse_duration(&v) {
        return Some((d.as_secs_f64() * 1e3, "ms"));
    }
    None
}

/// Draws each plotted figure against the first parameter into `out/plots` (one
/// line per combination of the other parameters' values); returns the files
/// (relative to `out`). Without the font, or without points, none.
pub fn render_plots(f: &SweepFile, out: &Path) -> Result<Vec<PathBuf>, String> {
    let Some(x_param) = f.params.first() else {
        return Ok(Vec::new());
    };
    if !font_ready() || f.points.is_empty() {
        return Ok(Vec::new());
    }
    // x: the values' numbers if all have one, else their positions.
    let nums: Option<Vec<(f64, &str)>> = x_param.values.iter().map(|v| numeric(v)).collect();
    // Each value's x, and the axis's unit (or, by position, what each is).
    let (xs, unit): (Vec<f64>, String) = match &nums {
        Some(ns) => (
            ns.iter().map(|n| n.0).collect(),
            ns.first().map_or("", |n| n.1).to_string(),
        ),
        None => (
            (0..x_param.values.len()).map(|i| i as f64).collect(),
            (x_param.values.iter().enumerate())
                .map(|(i, v)| format!("{i} = {}", shown(v)))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    };
    let x_of = |v: &str| {
        let i = x_param.values.iter().position(|w| w == v);
        i.map_or(0.0, |i| xs[i])
    };
    let dir = out.join("plots");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for (k, fig_text) in f.plots.iter().enumerate() {
        let fig = Figure::parse(fig_text)?;
        let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for p in &f.points {
            let (Some((_, xv)), Some(y)) = (p.params.first(), p.figure(&fig)) else {
                continue;
            };
            let others: Vec<String> = (p.params.iter().skip(1))
                .map(|(path, v)| format!("{path}={}", shown(v)))
                .collect();
            let label = match others.is_empty() {
                true => fig_text.clone(),
                false => others.join(", "),
            };
            series.entry(label).or_default().push((x_of(xv), y));
        }
        if series.is_empty() {
            continue;
        }
        let x_desc = match (&nums, unit.is_empty()) {
            (Some(_), false) => format!("{} ({unit})", x_param.path),
            _ => x_param.path.clone(),
        };
        let mut caption = format!("{}, {} points", f.scenario, f.plan_points);
        if nums.is_none() {
            let _ = write!(caption, ", {unit}");
        }
        if f.quick {
            caption.push_str(", --quick");
        }
        let chart = Chart {
            title: format!("{fig_text} against {}", x_param.path),
            caption,
            x: x_desc,
            y: fig_text.clone(),
            series: (series.into_iter())
                .map(|(label, mut points)| {
                    points.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Series {
                        label,
                        points,
                        ..Series::default()
                    }
                })
                .collect(),
            ..Chart::default()
        };
        let stem: String = (fig_text.chars())
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        for ext in ["png", "svg"] {
            let rel = PathBuf::from("plots").join(format!("sweep{k}_{stem}.{ext}"));
            draw(&out.join(&rel), std::slice::from_ref(&chart))?;
            files.push(rel);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_parse_with_quotes_and_units() {
        let p = Param::parse("links.b.rate=[10mbit, 20mbit,40mbit]").unwrap();
        assert_eq!(p.path, "links.b.rate");
        assert_eq!(p.values, ["10mbit", "20mbit", "40mbit"]);
        let q =
            Param::parse(r#"links.b.queue=["pfifo", "fq_codel,ecn=1", 'red,limit=1mb']"#).unwrap();
        assert_eq!(q.values.len(), 3);
        assert_eq!(shown(&q.values[1]), "fq_codel,ecn=1");
        assert_eq!(shown("3"), "3");
        let e = |s: &str| Param::parse(s).unwrap_err();
        assert!(e("x=1").contains("[ ]"));
        assert!(e("x=[]").contains("no values"));
        assert!(e("x=[1,,2]").contains("empty"));
        assert!(e("x=[\"a]").contains("unbalanced"));
        assert!(e("x..y=[1]").contains("dotted"));
        assert!(e("nothing").contains("PATH="));
    }

    #[test]
    fn grid_is_the_product_first_outermost() {
        let ps = [
            Param::parse("a=[1,2]").unwrap(),
            Param::parse("b=[x,y,z]").unwrap(),
        ];
        let g = grid(&ps);
        assert_eq!(g.len(), 6);
        assert_eq!(g[0], [("a".into(), "1".into()), ("b".into(), "x".into())]);
        assert_eq!(g[5], [("a".into(), "2".into()), ("b".into(), "z".into())]);
        assert_eq!(grid(&[]), vec![Vec::new()]);
    }

    fn point(i: usize, pass: bool) -> Point {
        let mut p = Point::failed(i, vec![("a".into(), i.to_string())], "x".into());
        p.verified = pass;
        p.failure = (!pass).then(|| "stalled".into());
        let figs = [("goodput_mbps".to_string(), Some(i as f64))];
        for name in ["f#0", "f#1"] {
            p.flows.push(Row {
                name: name.into(),
                figures: figs.iter().cloned().collect(),
            });
        }
        p
    }

    fn file(shard: Option<Shard>, points: Vec<Point>) -> SweepFile {
        SweepFile {
            format: SWEEP_FORMAT,
            scenario: "s.toml".into(),
            scenario_sha256: "00".into(),
            quick: true,
            sets: Vec::new(),
            params: vec![Param::parse("a=[0,1,2]").unwrap()],
            plots: vec!["flow.f.goodput_mbps".into()],
            plan_points: 3,
            shard,
            points,
        }
    }

    #[test]
    fn shards_merge_into_the_whole_and_refuse_gaps_or_strangers() {
        let whole = file(None, (0..3).map(|i| point(i, i != 1)).collect());
        let s1 = Shard { index: 1, count: 2 };
        let s2 = Shard { index: 2, count: 2 };
        let part = |s: Shard| {
            let pts = (0..3).filter(|&i| s.contains(i)).map(|i| point(i, i != 1));
            file(Some(s), pts.collect())
        };
        assert_eq!(merge(vec![part(s2), part(s1)]).unwrap(), whole);
        assert!(merge(vec![part(s1)]).unwrap_err().0.contains("missing"));
        assert!(merge(vec![part(s1), part(s1)])
            .unwrap_err()
            .0
            .contains("twice"));
        let mut other = part(s2);
        other.quick = false;
        assert!(merge(vec![part(s1), other])
            .unwrap_err()
            .0
            .contains("different"));
        assert_eq!(whole.failed().len(), 1);
        assert_eq!(whole.points[2].label(), "a=2");
        let fig = Figure::parse("flow.f.goodput_mbps").unwrap();
        assert_eq!(whole.points[2].figure(&fig), Some(2.0));
        let md = markdown(&whole, &[]);
        assert!(md.contains("## flow f#1") && md.contains("FAILED: stalled"));
        assert!(md.contains("| 2 | 2 | 2 |"), "{md}");
    }
}
