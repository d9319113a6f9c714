//! The progress display on stderr: one bar per running simulation (its label and
//! virtual time done of total) and one for the plan (runs done, ETA).

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use lowtide_sim::experiment::{ProgressSink, RunRecord, RunSpec};
use std::collections::HashMap;
use std::sync::Mutex;

/// indicatif bars for a plan's runs.
pub struct Bars {
    multi: MultiProgress,
    total: ProgressBar,
    running: Mutex<HashMap<usize, ProgressBar>>,
}

impl Bars {
    /// A display for `specs` (the runs of this process).
    pub fn new(specs: &[RunSpec]) -> Bars {
        let multi = MultiProgress::new();
        let total = multi.add(ProgressBar::new(specs.len() as u64));
        total.set_style(
            ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} runs, {elapsed} elapsed, ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        total.set_prefix("plan");
        Bars {
            multi,
            total,
            running: Mutex::new(HashMap::new()),
        }
    }
}

impl ProgressSink for Bars {
    fn started(&self, spec: &RunSpec) {
        let b = self
            .multi
            .add(ProgressBar::new(spec.virtual_ns() / 1_000_000));
        b.set_style(
            ProgressStyle::with_template("{prefix:50!} [{bar:30}] {msg} virtual, ETA {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
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
