//! Running a plan's simulations on a few threads. Each run is independent and
//! deterministic, so the records do not depend on the number of threads or on
//! which thread ran what; they are returned in plan order.

use super::{run_one, PlannedRun, RunRecord};
use lowtide_sim::ProgressHook;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Receives progress reports (a terminal display, or nothing); called from the
/// worker threads.
pub trait ProgressSink: Send + Sync {
    /// Run `spec` starts.
    fn started(&self, spec: &PlannedRun);
    /// Run `index` has reached `virtual_ns` of virtual time.
    fn advanced(&self, index: usize, virtual_ns: u64);
    /// Run `index` is done.
    fn finished(&self, index: usize, rec: &RunRecord);
}

/// A sink that ignores everything.
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn started(&self, _: &PlannedRun) {}
    fn advanced(&self, _: usize, _: u64) {}
    fn finished(&self, _: usize, _: &RunRecord) {}
}

/// Runs `f` on every item on `jobs` threads (at least one, at most one per item),
/// returning the results in the order of `items`; `f` gets the item's position.
pub fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(usize, &T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let jobs = jobs.clamp(1, items.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { return };
                let r = f(i, item);
                if let Ok(mut o) = out.lock() {
                    o[i] = Some(r);
                }
            });
        }
    });
    let out = out.into_inner().unwrap_or_else(|e| e.into_inner());
    out.into_iter().flatten().collect()
}

/// Runs `specs` on `jobs` threads (at least one) and returns their records in the
/// order of `specs`.
pub fn run_specs(
    specs: &[PlannedRun],
    jobs: usize,
    progress: Arc<dyn ProgressSink>,
) -> Vec<RunRecord> {
    parallel_map(specs, jobs, |_, spec| {
        let mut spec = spec.clone();
        let (p, index) = (Arc::clone(&progress), spec.index);
        spec.scenario.progress = Some(ProgressHook(Arc::new(move |r| {
            p.advanced(index, r.virtual_ns);
        })));
        progress.started(&spec);
        let rec = run_one(&spec);
        progress.finished(index, &rec);
        rec
    })
}
