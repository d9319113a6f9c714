//! lowtide's experiments in one home: the five seed experiments
//! (../shared/docs/experiments.md) as runnable plans, the harnesses that run them
//! (the simulator in virtual time; [`real`]: lowtide on a TUN device and this
//! machine's kernel in network namespaces, in real time), and one renderer of their
//! results ([`report`], [`plot`]). The `lowtide experiment` command only parses its
//! arguments and calls these.
//!
//! An experiment is a list of independent simulations ([`PlannedRun`]), each a
//! [`Scenario`] with a label; running one gives a [`RunRecord`] that holds only what
//! the report and the plots need, as plain data that survives a JSON round trip.
//! The list is deterministic, so a plan can be cut into shards (`index % count`)
//! that run anywhere and merge back ([`merge`]) into exactly what one run gives.
//! Rendering (markdown, plots) reads only [`ResultsFile`], never a simulation.

pub mod calibrate;
mod checks;
mod defs;
mod runner;
pub mod sweep;

pub mod plot;
mod png8;
pub mod provenance;
pub mod real;
pub mod report;
pub mod scenario_plot;
pub mod stats;

pub use checks::{check, DirectionCheck};
pub use defs::{e4_sensitivity, plan, quick_reps, use_cpu_model, E4_RCVBUF, FULL_REPS};
pub use runner::{parallel_map, run_specs, NoProgress, ProgressSink};

use lowtide::Mib;
use lowtide_sim::nic::{delay_bucket_upper_us, SIZE_BUCKET};
use lowtide_sim::timeseries::HostSample;
use lowtide_sim::{RunResults, Scenario};
use serde::{Deserialize, Serialize};

/// Version of the results file's layout.
pub const FORMAT: u32 = 1;

/// One of the seed experiments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Experiment {
    /// Seed 000: TCP_NOTSENT_LOWAT and TCP memory.
    E1,
    /// Seed 001: the lowat/2 wakeup rule.
    E2,
    /// Seed 002: TCP Small Queues and the device queue.
    E3,
    /// Seed 003: the retransmit queue as a tree.
    E4,
    /// Seed 004: skb sizing at transmit time.
    E5,
}

impl Experiment {
    /// All five, in order.
    pub const ALL: [Experiment; 5] = [
        Experiment::E1,
        Experiment::E2,
        Experiment::E3,
        Experiment::E4,
        Experiment::E5,
    ];

    /// "e1" .. "e5".
    pub fn name(self) -> &'static str {
        match self {
            Experiment::E1 => "e1",
            Experiment::E2 => "e2",
            Experiment::E3 => "e3",
            Experiment::E4 => "e4",
            Experiment::E5 => "e5",
        }
    }

    /// Parses "e1" .. "e5" (any case).
    pub fn parse(s: &str) -> Option<Experiment> {
        Experiment::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(s))
    }
}

/// The seeds' scale or a reduced one (CI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// The seeds' setups.
    Full,
    /// Every experiment reduced to well under a minute, directions still checked.
    Quick,
}

/// One simulation of a plan.
#[derive(Debug, Clone)]
pub struct PlannedRun {
    /// Position in the plan (shards take `index % count == shard - 1`).
    pub index: usize,
    /// Which experiment.
    pub experiment: Experiment,
    /// The setting the A/B is compared in (e.g. "1gbit, 4 flows"); runs with the
    /// same group and different variants form one comparison.
    pub group: String,
    /// The knob's value ("A: lowat off", "B: lowat 128 KB", ...).
    pub variant: String,
    /// Repetition number (E4 runs ten), 0 otherwise.
    pub rep: u32,
    /// Human parameters for captions and tables.
    pub params: Vec<(String, String)>,
    /// What to simulate.
    pub scenario: Scenario,
    /// Keep the host time series in the record.
    pub keep_series: bool,
    /// Write the run's time series (host rows, and flow rows where the run samples
    /// them) as CSV into this directory (`lowtide experiment --timeseries DIR`).
    pub timeseries_dir: Option<std::path::PathBuf>,
}

impl PlannedRun {
    /// Virtual time the run lasts (ns; the time limit for fixed transfers).
    pub fn virtual_ns(&self) -> u64 {
        match self.scenario.workload {
            lowtide_sim::Workload::Bulk { duration_ns } => duration_ns,
            lowtide_sim::Workload::Bytes { time_limit_ns, .. } => time_limit_ns.min(10_000_000_000),
        }
    }

    /// "e3 1gbit, 4 flows / B: TSQ on".
    pub fn label(&self) -> String {
        let rep = match self.rep {
            0 => String::new(),
            r => format!(" #{r}"),
        };
        format!(
            "{} {} / {}{rep}",
            self.experiment.name(),
            self.group,
            self.variant
        )
    }
}

/// The figures of one run that the report needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Every byte verified.
    pub verified: bool,
    /// Why the run failed, if it did.
    pub failure: Option<String>,
    /// Measured (virtual) seconds.
    pub duration_s: f64,
    /// Total goodput (bit/s).
    pub goodput_bps: f64,
    /// Host A's TCP memory, mean and peak (4 KB pages).
    pub mean_pages: f64,
    /// Peak of the same.
    pub peak_pages: u64,
    /// Mean `sk_wmem_queued` per flow (bytes).
    pub mean_wmem_per_flow: f64,
    /// Writable events per second and per MB delivered.
    pub wakeups_per_s: f64,
    /// Per 1e6 bytes delivered.
    pub wakeups_per_mb: f64,
    /// Host A's NIC queue: mean and peak wait per packet (µs).
    pub dev_mean_delay_us: f64,
    /// Peak wait.
    pub dev_peak_delay_us: f64,
    /// Mean bytes one flow has in the NIC queue.
    pub dev_mean_bytes_per_flow: f64,
    /// Mean of the flows' mean RTT samples (µs).
    pub mean_rtt_us: f64,
    /// Sender counters (nstat names).
    pub ip_out_requests: u64,
    /// Segments sent.
    pub tcp_out_segs: u64,
    /// Packets the sender received (ACKs).
    pub ip_in_receives: u64,
    /// Segments retransmitted.
    pub retrans_segs: u64,
    /// Mean over the flows' time-series samples of the packets in flight (0 without
    /// a per-flow time series).
    pub mean_in_flight: f64,
    /// Host A's CPU model figures, if the run had a model.
    pub cpu: Option<lowtide_sim::cpu::CpuFigures>,
}

/// One finished run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Position in the plan.
    pub index: usize,
    /// Which experiment.
    pub experiment: Experiment,
    /// Comparison group.
    pub group: String,
    /// Variant within the group.
    pub variant: String,
    /// Repetition.
    pub rep: u32,
    /// The run's seed.
    pub seed: u64,
    /// Parameters for captions.
    pub params: Vec<(String, String)>,
    /// The figures.
    pub figures: Figures,
    /// Host A over time (only for experiments that plot it).
    pub series: Vec<HostSample>,
    /// Host A's NIC: (upper edge of the wait bucket in µs, packets).
    pub delay_hist: Vec<(f64, u64)>,
    /// Host A's NIC: (lower edge of the size bucket in bytes, packets).
    pub size_hist: Vec<(u64, u64)>,
    /// Why the run's `--timeseries` files could not be written (not serialized: the
    /// figures do not depend on it).
    #[serde(skip)]
    pub timeseries_error: Option<String>,
}

/// Which part of a plan a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1-based shard number.
    pub index: u32,
    /// Number of shards.
    pub count: u32,
}

impl Shard {
    /// Whether run `i` of the plan belongs to this shard.
    pub fn contains(&self, i: usize) -> bool {
        i % self.count as usize == (self.index - 1) as usize
    }
}

/// What `lowtide experiment` writes to results.json: a function of the plan only
/// (no wall-clock figures), so the same seed gives the same bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultsFile {
    /// Layout version ([`FORMAT`]).
    pub format: u32,
    /// The experiments of the plan.
    pub experiments: Vec<Experiment>,
    /// Full or quick.
    pub scale: Scale,
    /// The base seed.
    pub seed: u64,
    /// Runs in the whole plan.
    pub plan_runs: usize,
    /// The shard this file holds, `None` for a whole plan.
    pub shard: Option<Shard>,
    /// The runs, by index.
    pub runs: Vec<RunRecord>,
    /// The direction checks (empty in a shard: they need every run).
    pub checks: Vec<DirectionCheck>,
    /// The CPU model's constants as measured on the machine that ran E4
    /// (`lowtide experiment calibrate`); absent where E4 used the built-in ones
    /// (`CpuModel::calibrated`) or the file predates calibration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<calibrate::Calibration>,
}

impl ResultsFile {
    /// A file for `runs` of a plan, with the checks if it is whole.
    pub fn new(
        experiments: Vec<Experiment>,
        scale: Scale,
        seed: u64,
        plan_runs: usize,
        shard: Option<Shard>,
        mut runs: Vec<RunRecord>,
    ) -> ResultsFile {
        runs.sort_by_key(|r| r.index);
        let checks = match shard {
            None => experiments.iter().flat_map(|&e| check(e, &runs)).collect(),
            Some(_) => Vec::new(),
        };
        ResultsFile {
            format: FORMAT,
            experiments,
            scale,
            seed,
            plan_runs,
            shard,
            runs,
            checks,
            calibration: None,
        }
    }
}

/// Why shards do not merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeError(pub String);

impl core::fmt::Display for MergeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Puts records of a plan of `n` into their slots by index (`what` names them in
/// errors): a record outside the plan or a slot filled twice is an error; empty
/// slots are runs no shard had. The merge of experiments' and of sweeps' shards.
pub fn slot_by_index<T>(
    n: usize,
    what: &str,
    records: impl IntoIterator<Item = (usize, T)>,
) -> Result<Vec<Option<T>>, MergeError> {
    let mut slots: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for (i, r) in records {
        match slots.get_mut(i) {
            Some(slot @ None) => *slot = Some(r),
            Some(Some(_)) => return Err(MergeError(format!("{what} {i} appears twice"))),
            None => return Err(MergeError(format!("{what} {i} is outside the plan"))),
        }
    }
    Ok(slots)
}

/// Combines shard files of one plan into the file a single run of it writes; with
/// `partial`, runs may be missing (a plan cut short): the file then holds fewer runs
/// than `plan_runs` and the checks that need a missing run fail.
pub fn merge(parts: Vec<ResultsFile>, partial: bool) -> Result<ResultsFile, MergeError> {
    let Some(first) = parts.first() else {
        return Err(MergeError("nothing to merge".into()));
    };
    let (experiments, scale, seed, n) = (
        first.experiments.clone(),
        first.scale,
        first.seed,
        first.plan_runs,
    );
    if parts.iter().any(|p| {
        p.format != FORMAT
            || p.experiments != experiments
            || p.scale != scale
            || p.seed != seed
            || p.plan_runs != n
    }) {
        return Err(MergeError(
            "the files come from different plans (experiments, scale, seed or format differ)"
                .into(),
        ));
    }
    let calibration = first.calibration.clone();
    if parts.iter().any(|p| p.calibration != calibration) {
        return Err(MergeError(
            "the shards' E4 runs used different CPU-model calibrations (give each shard \
             the same --calibration FILE)"
                .into(),
        ));
    }
    let all = parts.into_iter().flat_map(|p| p.runs).map(|r| (r.index, r));
    let runs = slot_by_index(n, "run", all)?;
    let missing: Vec<usize> = (0..n).filter(|&i| runs[i].is_none()).collect();
    if !missing.is_empty() && !partial {
        return Err(MergeError(format!(
            "{} of {n} runs missing (first: {})",
            missing.len(),
            missing[0]
        )));
    }
    let runs = runs.into_iter().flatten().collect();
    let mut file = ResultsFile::new(experiments.clone(), scale, seed, n, None, runs);
    file.calibration = calibration;
    // A check over the seeds present can pass with some missing: a plan cut short
    // fails, per experiment, the check that all its runs are there.
    let specs = plan(&experiments, scale, seed);
    for e in experiments {
        let of_e: Vec<usize> = (specs.iter())
            .filter(|r| r.experiment == e)
            .map(|r| r.index)
            .collect();
        let lost = of_e.iter().filter(|i| missing.contains(i)).count();
        if lost > 0 || specs.len() != n {
            file.checks.push(DirectionCheck {
                experiment: e,
                claim: "every run of the plan present".into(),
                detail: format!(
                    "{lost} of {} runs missing (the plan was cut short)",
                    of_e.len()
                ),
                pass: false,
            });
        }
    }
    Ok(file)
}

/// Writes a run's time series as DIR/eN-INDEX-host.csv (with host A's modeled CPU
/// where the run models it) and, with flow rows, DIR/eN-INDEX-flows.csv. A file that
/// cannot be written is the error returned (the run's figures do not depend on it).
fn write_timeseries(
    dir: &std::path::Path,
    spec: &PlannedRun,
    ts: &lowtide_sim::timeseries::Timeseries,
) -> Result<(), String> {
    let stem = format!("{}-{}", spec.experiment.name(), spec.index + 1);
    let mut files = vec![(format!("{stem}-host.csv"), ts.host_csv())];
    if !ts.flows.is_empty() {
        files.push((format!("{stem}-flows.csv"), ts.flows_csv()));
    }
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// Runs one spec to its record.
pub fn run_one(spec: &PlannedRun) -> RunRecord {
    let results = match spec.timeseries_dir {
        Some(_) => sampling_every_flow(&spec.scenario).run(),
        None => spec.scenario.run(),
    };
    let mut rec = RunRecord {
        index: spec.index,
        experiment: spec.experiment,
        group: spec.group.clone(),
        variant: spec.variant.clone(),
        rep: spec.rep,
        seed: spec.scenario.seed,
        params: spec.params.clone(),
        figures: Figures::default(),
        series: Vec::new(),
        delay_hist: Vec::new(),
        size_hist: Vec::new(),
        timeseries_error: None,
    };
    match results {
        Ok(r) => fill(&mut rec, spec, &r),
        Err(e) => rec.figures.failure = Some(e.to_string()),
    }
    rec
}

/// `--timeseries`: the scenario sampling host A and every flow, at the plan's interval
/// or, for a run whose plan samples nothing (E5), every [`TIMESERIES_DEFAULT_NS`].
/// Sampling only reads the hosts, so every figure stays the plan's.
fn sampling_every_flow(sc: &Scenario) -> Scenario {
    let interval_ns = (sc.timeseries.as_ref()).map_or(TIMESERIES_DEFAULT_NS, |t| t.interval_ns);
    let mut sc = sc.clone();
    sc.timeseries = Some(lowtide_sim::TimeseriesConfig {
        interval_ns,
        per_flow: true,
    });
    sc
}

/// `--timeseries`' interval for a run whose plan samples nothing: 10 ms.
const TIMESERIES_DEFAULT_NS: u64 = 10_000_000;

/// The mean of the flows' in-flight samples, where the plan samples flows (E4); 0
/// otherwise, also when `--timeseries` added the samples.
fn mean_in_flight(spec: &PlannedRun, r: &RunResults) -> f64 {
    if !spec.scenario.timeseries.is_some_and(|t| t.per_flow) {
        return 0.0;
    }
    let Some(ts) = &r.timeseries else { return 0.0 };
    match ts.flows.len() {
        0 => 0.0,
        n => ts.flows.iter().map(|f| f.in_flight as f64).sum::<f64>() / n as f64,
    }
}

fn fill(rec: &mut RunRecord, spec: &PlannedRun, r: &RunResults) {
    let n = r.per_flow.len().max(1) as f64;
    rec.figures = Figures {
        verified: r.bytes_verified,
        failure: r.failure.clone(),
        duration_s: r.duration_s,
        goodput_bps: r.goodput_bps,
        mean_pages: r.memory.mean_pages,
        peak_pages: r.memory.peak_pages,
        mean_wmem_per_flow: r.memory.mean_wmem_queued_per_flow,
        wakeups_per_s: r.wakeups.per_s,
        wakeups_per_mb: r.wakeups.per_mb,
        dev_mean_delay_us: r.device_queue.mean_delay_us,
        dev_peak_delay_us: r.device_queue.peak_delay_us,
        dev_mean_bytes_per_flow: r.device_queue.mean_bytes_per_flow,
        mean_rtt_us: r.per_flow.iter().map(|f| f.mean_rtt_us as f64).sum::<f64>() / n,
        ip_out_requests: r.counters.get(Mib::IpOutRequests),
        tcp_out_segs: r.counters.get(Mib::TcpOutSegs),
        ip_in_receives: r.counters.get(Mib::IpInReceives),
        retrans_segs: r.counters.get(Mib::TcpRetransSegs),
        mean_in_flight: mean_in_flight(spec, r),
        cpu: r.cpu,
    };
    if let (Some(dir), Some(ts)) = (&spec.timeseries_dir, &r.timeseries) {
        rec.timeseries_error = write_timeseries(dir, spec, ts).err();
    }
    if spec.keep_series {
        if let Some(ts) = &r.timeseries {
            rec.series = ts.host.clone();
        }
    }
    rec.delay_hist = (r.device_delay_histogram.iter().enumerate())
        .filter(|(_, &c)| c > 0)
        .map(|(b, &c)| (delay_bucket_upper_us(b), c))
        .collect();
    rec.size_hist = (r.device_size_histogram.iter().enumerate())
        .filter(|(_, &c)| c > 0)
        .map(|(b, &c)| ((b * SIZE_BUCKET) as u64, c))
        .collect();
}
