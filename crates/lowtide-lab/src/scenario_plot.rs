//! A scenario run's plots (`lowtide sim run --out`, `lowtide net run --out`), drawn
//! from its results only ([`NetResults`]'s `flow_series` and `series`): goodput and
//! cwnd per flow over time, a panel per pair of hosts the flows run between, and
//! the delay of each queue where packets waited, a panel per queue. With two runs
//! (`net run --compare`) each flow or queue keeps one colour, the first run's line
//! (the simulator's) solid and the second's (the kernel's) dashed.

use crate::plot::{draw_png8, font_ready, Chart, Series};
use lowtide_sim::network::{FlowSeries, NetResults, QueueSeries};
use std::path::{Path, PathBuf};

/// Most panels a plot has; the caption names what was left out.
const MAX_PANELS: usize = 6;
/// A queue is plotted if its mean sojourn reached this (ms) in one of the runs:
/// the queues where packets waited, not the near-idle ones beside them (a host's
/// 1 Gbit/s access link).
const WAITED_MS: f64 = 1.0;
/// About how many points a goodput line has at most: longer runs' goodput is
/// drawn as the mean over several of the series' intervals ([`bin_of`]).
const GOODPUT_POINTS: usize = 60;

/// One run to plot: its name in the legends ("sim", "kernel", "real") and results.
pub type Run<'a> = (&'a str, &'a NetResults);

/// Draws `plots/goodput.png`, `plots/cwnd.png` and `plots/queue-delay.png` under
/// `out` from `runs` (one, or the simulator's and the real-time run's of the same
/// file), `caption` under each panel; returns the files (relative to `out`), none
/// without the font or without series (`run.series_interval = "0"`).
pub fn render(out: &Path, runs: &[Run], caption: &str) -> Result<Vec<PathBuf>, String> {
    let Some(&(_, first)) = runs.first() else {
        return Ok(Vec::new());
    };
    if !font_ready() {
        return Ok(Vec::new());
    }
    let dir = out.join("plots");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let style = style_note(runs);
    let flows = |what: &str, y: &str, note: &str, pick: &dyn Fn(&FlowSeries) -> Vec<(f64, f64)>| {
        let groups = host_pairs(first);
        let mut panels: Vec<Chart> = (groups.iter().take(MAX_PANELS))
            .map(|(pair, names)| Chart {
                title: format!("{what} per flow, {pair}{style}"),
                caption: format!("{caption}{note}"),
                x: "time (s)".into(),
                y: y.into(),
                series: lines(runs, names, |r, n| {
                    (r.flow_series.iter().find(|s| s.name == *n)).map(pick)
                }),
                ..Chart::default()
            })
            .collect();
        note_left_out(&mut panels, groups.len(), "host pairs");
        panels
    };
    let mut files = Vec::new();
    let mut put = |name: &str, panels: Vec<Chart>| -> Result<(), String> {
        if panels
            .iter()
            .all(|c| c.series.iter().all(|s| s.points.is_empty()))
        {
            return Ok(());
        }
        let rel = PathBuf::from("plots").join(format!("{name}.png"));
        draw_png8(&out.join(&rel), &panels)?;
        files.push(rel);
        Ok(())
    };
    let k = bin_of(first);
    let secs = first
        .flow_series
        .first()
        .and_then(|s| s.t_s.first())
        .copied()
        .unwrap_or(0.0);
    let note = match k {
        1 => format!("; goodput over each {secs} s"),
        k => format!("; goodput: the mean over each {} s", k as f64 * secs),
    };
    put(
        "goodput",
        flows("goodput", "goodput (Mbit/s)", &note, &|s| goodput(s, k)),
    )?;
    put("cwnd", flows("cwnd", "snd_cwnd (segments)", "", &cwnd))?;
    put("queue-delay", queue_panels(runs, caption, &style))?;
    Ok(files)
}

/// How many of the series' intervals one goodput point spans: 1, 2 or 5 times a
/// power of ten, so that a line has at most about [`GOODPUT_POINTS`] points.
fn bin_of(r: &NetResults) -> usize {
    let n = r.flow_series.iter().map(|s| s.t_s.len()).max().unwrap_or(0);
    let want = n.div_ceil(GOODPUT_POINTS).max(1);
    (0..)
        .flat_map(|e| [1, 2, 5].map(|m| m * 10usize.pow(e)))
        .find(|&k| k >= want)
        .unwrap_or(1)
}

/// Goodput over each `k` intervals of the series (Mbit/s), at each span's end.
fn goodput(s: &FlowSeries, k: usize) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut last = (0.0, 0);
    for j in (k..=s.bytes.len()).step_by(k) {
        let (t, b) = (s.t_s[j - 1], s.bytes[j - 1]);
        out.push((
            t,
            b.saturating_sub(last.1) as f64 * 8.0 / (t - last.0) / 1e6,
        ));
        last = (t, b);
    }
    out
}

fn cwnd(s: &FlowSeries) -> Vec<(f64, f64)> {
    (s.t_s.iter().zip(&s.cwnd))
        .filter_map(|(&t, c)| c.map(|c| (t, c as f64)))
        .collect()
}

fn sojourn(q: &QueueSeries) -> Vec<(f64, f64)> {
    (q.t_s.iter().zip(&q.sojourn_ms))
        .filter_map(|(&t, d)| d.map(|d| (t, d)))
        .collect()
}

/// " (sim solid, kernel dashed)" with two runs.
fn style_note(runs: &[Run]) -> String {
    match runs {
        [(a, _), (b, _), ..] => format!(" ({a} solid, {b} dashed)"),
        _ => String::new(),
    }
}

/// The flows of `r` by the hosts they run between, in the report's order:
/// ("FROM -> TO", flow names).
fn host_pairs(r: &NetResults) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for f in &r.flows {
        let pair = format!("{} -> {}", f.from, f.to);
        match out.iter_mut().find(|(p, _)| *p == pair) {
            Some((_, names)) => names.push(f.name.clone()),
            None => out.push((pair, vec![f.name.clone()])),
        }
    }
    out
}

/// A line per name and run, coloured by name, the second run's dashed and left
/// out of the legend (the title says which run is dashed).
fn lines(
    runs: &[Run],
    names: &[String],
    points: impl Fn(&NetResults, &String) -> Option<Vec<(f64, f64)>>,
) -> Vec<Series> {
    let mut out = Vec::new();
    for (k, name) in names.iter().enumerate() {
        for (i, (_, r)) in runs.iter().enumerate() {
            let Some(points) = points(r, name) else {
                continue;
            };
            out.push(Series {
                label: match i {
                    0 => name.clone(),
                    _ => String::new(),
                },
                points,
                dashed: i > 0,
                color: Some(k),
                ..Series::default()
            });
        }
    }
    out
}

/// A panel per queue where packets waited (in any run), its sojourn time over
/// time; every queue with a series if none did.
fn queue_panels(runs: &[Run], caption: &str, style: &str) -> Vec<Chart> {
    let first = runs[0].1;
    let waited = |name: &str| {
        (runs.iter().flat_map(|(_, r)| r.queues.iter()))
            .any(|q| q.name == name && q.sojourn_ms >= WAITED_MS)
    };
    let mut names: Vec<&str> = (first.series.iter().map(|q| q.name.as_str()))
        .filter(|n| waited(n))
        .collect();
    if names.is_empty() {
        names = first.series.iter().map(|q| q.name.as_str()).collect();
    }
    let qdisc = |n: &str| (first.queues.iter().find(|q| q.name == n)).map_or("", |q| q.qdisc);
    let mut panels: Vec<Chart> = (names.iter().take(MAX_PANELS))
        .map(|&n| Chart {
            title: format!("queue delay, {n} ({}){style}", qdisc(n)),
            caption: format!("{caption}; mean sojourn of the packets that left in each interval"),
            x: "time (s)".into(),
            y: "sojourn (ms)".into(),
            series: lines(runs, &[n.to_string()], |r, n| {
                (r.series.iter().find(|q| q.name == *n)).map(sojourn)
            }),
            ..Chart::default()
        })
        .collect();
    note_left_out(&mut panels, names.len(), "queues");
    panels
}

/// Says in the last panel's caption how many of `total` were not drawn.
fn note_left_out(panels: &mut [Chart], total: usize, what: &str) {
    if let Some(last) = panels.last_mut().filter(|_| total > MAX_PANELS) {
        last.caption += &format!("; the first {MAX_PANELS} of {total} {what} drawn");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_are_grouped_by_the_hosts_they_run_between_in_report_order() {
        let text = r#"
            [run]
            duration = "300ms"
            [hosts.a]
            [hosts.b]
            [links.l]
            between = ["a", "b"]
            rate = "10mbit"
            [flows.x]
            from = "a"
            to = "b"
            count = 2
            [flows.y]
            from = "b"
            to = "a"
        "#;
        let r = lowtide_sim::network::run_text(text, false, &[]).unwrap();
        let pairs = host_pairs(&r);
        assert_eq!(
            pairs,
            vec![
                (
                    "a -> b".to_string(),
                    vec!["x#0".to_string(), "x#1".to_string()]
                ),
                ("b -> a".to_string(), vec!["y".to_string()]),
            ]
        );
        let two = lines(&[("sim", &r), ("kernel", &r)], &pairs[0].1, |r, n| {
            (r.flow_series.iter().find(|s| s.name == *n)).map(|s| goodput(s, 1))
        });
        let styles: Vec<(&str, bool, Option<usize>)> = (two.iter())
            .map(|s| (s.label.as_str(), s.dashed, s.color))
            .collect();
        assert_eq!(
            styles,
            vec![
                ("x#0", false, Some(0)),
                ("", true, Some(0)),
                ("x#1", false, Some(1)),
                ("", true, Some(1)),
            ]
        );
    }

    #[test]
    fn long_runs_goodput_is_drawn_as_the_mean_over_several_intervals() {
        let s = FlowSeries::from_grid(
            "f",
            100_000_000,
            vec![0, 125_000, 125_000, 500_000, 500_000],
            vec![Some(10); 5],
        );
        assert_eq!(goodput(&s, 1).len(), 5);
        // Two intervals a point: 125,000 bytes in 0.2 s, then 375,000; the odd
        // last interval is left out.
        assert_eq!(goodput(&s, 2), vec![(0.2, 5.0), (0.4, 15.0)]);
        let r = |n: usize| NetResults {
            flow_series: vec![FlowSeries::from_grid("f", 1, vec![0; n], vec![None; n])],
            ..lowtide_sim::network::run_text(SHORT, false, &[]).unwrap()
        };
        let bins: Vec<usize> = [60, 61, 300, 400, 3_000].map(|n| bin_of(&r(n))).to_vec();
        assert_eq!(bins, vec![1, 2, 5, 10, 50]);
    }

    /// A short run without series: its results take the series above.
    const SHORT: &str = r#"
        [run]
        duration = "10ms"
        series_interval = "0s"
        [hosts.a]
        [hosts.b]
        [links.l]
        between = ["a", "b"]
        [flows.f]
        from = "a"
        to = "b"
        bytes = 1000
    "#;
}
