//! Progress displays on stderr (indicatif), shared by the long-running commands:
//! one simulation ([`RunBar`]: `sim stream`), a count of runs ([`CountBar`]: `sim
//! soak`) and a plan of simulations ([`Bars`]: `experiment`). They are shown only
//! when [`wanted`]: stderr is a terminal and neither `--json` nor `--quiet` was given.
//! The simulator reports through [`lowtide_sim::ProgressHook`], which only reads the
//! run's state, so a display never changes a result.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use lowtide_lab::{PlannedRun, ProgressSink, RunRecord};
use lowtide_sim::{ProgressHook, RunProgress};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A single run's bar appears only once the run has taken this much wall time.
const RUN_BAR_DELAY: Duration = Duration::from_secs(1);

/// Whether to show progress: a terminal on stderr, no `--json`, no `--quiet`.
pub fn wanted(json: bool, quiet: bool) -> bool {
    !json && !quiet && std::io::stderr().is_terminal()
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// What one simulation measures its progress in.
#[derive(Debug, Clone, Copy)]
pub enum RunGoal {
    /// A timed (bulk) run: virtual time, ns.
    Timed(u64),
    /// Fixed-size transfers: bytes over all flows.
    Bytes(u64),
}

/// How long a run goes before its bar appears: `LOWTIDE_PROGRESS_AFTER_MS` if set
/// (0 draws at once: scripts and tests that need the bar on a fast machine), else
/// [`RUN_BAR_DELAY`].
fn run_bar_delay() -> Duration {
    std::env::var("LOWTIDE_PROGRESS_AFTER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(RUN_BAR_DELAY, Duration::from_millis)
}

/// The bar of one simulation (`sim stream`): virtual time done of total (or bytes
/// delivered of total), wall-clock ETA, flows connected and done. It is drawn only
/// after [`RUN_BAR_DELAY`], so short runs print nothing.
pub struct RunBar {
    bar: ProgressBar,
    goal: RunGoal,
    started: Instant,
    /// When the bar appears ([`run_bar_delay`], read once).
    delay: Duration,
    shown: Mutex<bool>,
}

impl RunBar {
    /// A hidden bar for a run towards `goal`.
    pub fn new(goal: RunGoal) -> Arc<RunBar> {
        let len = match goal {
            RunGoal::Timed(ns) => ns / 1_000_000,
            RunGoal::Bytes(b) => b,
        };
        let bar = ProgressBar::with_draw_target(Some(len.max(1)), ProgressDrawTarget::hidden());
        bar.set_style(style(
            "sim stream [{bar:30}] {msg}, {elapsed} elapsed, ETA {eta}",
        ));
        Arc::new(RunBar {
            bar,
            goal,
            started: Instant::now(),
            delay: run_bar_delay(),
            shown: Mutex::new(false),
        })
    }

    /// The hook to put in the scenario.
    pub fn hook(self: &Arc<Self>) -> ProgressHook {
        let me = Arc::clone(self);
        ProgressHook(Arc::new(move |p| me.update(p)))
    }

    fn update(&self, p: &RunProgress) {
        if let Ok(mut shown) = self.shown.lock() {
            if !*shown && self.started.elapsed() >= self.delay {
                *shown = true;
                self.bar.set_draw_target(ProgressDrawTarget::stderr());
            }
        }
        self.bar.set_message(run_message(self.goal, p));
        self.bar.set_position(match self.goal {
            RunGoal::Timed(_) => p.virtual_ns / 1_000_000,
            RunGoal::Bytes(_) => p.bytes_delivered,
        });
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The text beside a run's bar.
pub fn run_message(goal: RunGoal, p: &RunProgress) -> String {
    let t = p.virtual_ns as f64 / 1e9;
    let flows = format!("{}/{} flows connected", p.flows_connected, p.flows);
    match goal {
        RunGoal::Timed(ns) => format!("{t:.1}/{:.1} s virtual, {flows}", ns as f64 / 1e9),
        RunGoal::Bytes(total) => format!(
            "{:.1}/{:.1} MB, {flows}, {} done, {t:.1} s virtual",
            p.bytes_delivered as f64 / 1e6,
            total as f64 / 1e6,
            p.flows_done
        ),
    }
}

/// A count of runs (`sim soak`): done of total, failures so far, ETA.
pub struct CountBar {
    bar: ProgressBar,
}

impl CountBar {
    /// A bar for `total` runs.
    pub fn new(total: u64, prefix: &str) -> CountBar {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(style(
            "{prefix} [{bar:30}] {pos}/{len} runs, {msg}, {elapsed} elapsed, ETA {eta}",
        ));
        bar.set_prefix(prefix.to_string());
        bar.set_message("0 failed");
        CountBar { bar }
    }

    /// One more run done; `failed` so far.
    pub fn inc(&self, failed: u64) {
        self.bar.set_message(format!("{failed} failed"));
        self.bar.inc(1);
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// indicatif bars for a plan's runs (`experiment`): one per running simulation
/// (its label and virtual time done of total) and one for the plan (runs done, ETA).
pub struct Bars {
    multi: MultiProgress,
    total: ProgressBar,
    running: Mutex<HashMap<usize, ProgressBar>>,
}

impl Bars {
    /// A display for `specs` (the runs of this process).
    pub fn new(specs: &[PlannedRun]) -> Bars {
        let multi = MultiProgress::new();
        let total = multi.add(ProgressBar::new(specs.len() as u64));
        total.set_style(style(
            "{prefix} [{bar:30}] {pos}/{len} runs, {elapsed} elapsed, ETA {eta}",
        ));
        total.set_prefix("plan");
        Bars {
            multi,
            total,
            running: Mutex::new(HashMap::new()),
        }
    }
}

impl ProgressSink for Bars {
    fn started(&self, spec: &PlannedRun) {
        let b = self
            .multi
            .add(ProgressBar::new(spec.virtual_ns() / 1_000_000));
        b.set_style(style("{prefix:50!} [{bar:30}] {msg} virtual, ETA {eta}"));
        b.set_prefix(spec.label());
        b.set_message(format!("0.0/{:.1} s", spec.virtual_ns() as f64 / 1e9));
        if let Ok(mut r) = self.running.lock() {
            r.insert(spec.index, b);
        }
    }

    fn advanced(&self, index: usize, virtual_ns: u64) {
        if let Ok(r) = self.running.lock() {
            if let Some(b) = r.get(&index) {
                b.set_position(virtual_ns / 1_000_000);
                let len = b.length().unwrap_or(0) as f64 / 1e3;
                b.set_message(format!("{:.1}/{len:.1} s", virtual_ns as f64 / 1e9));
            }
        }
    }

    fn finished(&self, index: usize, _rec: &RunRecord) {
        if let Ok(mut r) = self.running.lock() {
            if let Some(b) = r.remove(&index) {
                b.finish_and_clear();
                self.multi.remove(&b);
            }
        }
        self.total.inc(1);
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        self.total.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_messages() {
        let p = RunProgress {
            virtual_ns: 2_500_000_000,
            flows: 200,
            flows_connected: 150,
            flows_done: 40,
            bytes_delivered: 12_300_000,
        };
        assert_eq!(
            run_message(RunGoal::Timed(10_000_000_000), &p),
            "2.5/10.0 s virtual, 150/200 flows connected"
        );
        assert_eq!(
            run_message(RunGoal::Bytes(20_000_000), &p),
            "12.3/20.0 MB, 150/200 flows connected, 40 done, 2.5 s virtual"
        );
    }
}
