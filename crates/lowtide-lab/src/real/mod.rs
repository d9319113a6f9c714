//! `lowtide experiment E --real`: the seed experiments on the real path (lowtide's
//! stack on a TUN device, its emulated link, kernel receivers) and this machine's
//! kernel doing the same job in network namespaces, at the scale one small machine
//! holds. Root only. The results go into results.json under `"real"` beside the
//! simulator's runs, and into report.md's "lowtide real path" and "kernel" columns.

pub mod checks;
pub mod kernel;
pub mod plan;
pub mod plot;
pub mod report;
pub mod tun;

use crate::{DirectionCheck, Experiment};
use serde::{Deserialize, Serialize};

/// Version of the `"real"` section's layout.
pub const FORMAT: u32 = 1;

/// Who did the job: lowtide on TUN, or the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// lowtide's stack on a TUN device through its emulated link.
    Lowtide,
    /// The kernel's TCP of this machine.
    Kernel,
}

/// One real-path run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RealRun {
    /// Which experiment.
    pub experiment: Option<Experiment>,
    /// lowtide or the kernel.
    pub side: Option<Side>,
    /// The setting compared (same names as the simulator's groups).
    pub group: String,
    /// The knob's value ("A: TSQ off", ...).
    pub variant: String,
    /// Repetition of the plan (0, 1, 2: the plan runs whole, then again).
    #[serde(default)]
    pub rep: u32,
    /// Parameters, for the tables.
    pub params: Vec<(String, String)>,
    /// Why the run failed, if it did.
    pub error: Option<String>,
    /// Bytes the receivers read over the time from connect to close (bit/s).
    pub goodput_bps: f64,
    /// Device-queue delay: backlog bytes / line rate, time-weighted mean (ms).
    pub queue_mean_ms: Option<f64>,
    /// Peak of the same (ms).
    pub queue_peak_ms: Option<f64>,
    /// Sender's counters (nstat names).
    pub ip_out_requests: Option<u64>,
    /// Segments sent.
    pub tcp_out_segs: Option<u64>,
    /// Packets the sender received (ACKs).
    pub ip_in_receives: Option<u64>,
    /// Segments retransmitted.
    pub retrans_segs: Option<u64>,
    /// Sender thread's user CPU time per packet received (µs).
    pub cpu_per_ack_us: Option<f64>,
    /// Sender thread's user and system CPU time (s).
    pub cpu_user_s: Option<f64>,
    /// System time.
    pub cpu_sys_s: Option<f64>,
    /// TCP memory of the sender's sockets while writing, time mean (4 KB pages):
    /// lowtide's own accounting, or the kernel's skmem r + w + f summed over the
    /// sender namespace's sockets (`ss -tm`).
    pub mean_pages: Option<f64>,
    /// Writer wakeups per second: lowtide's writable events (`tcp_info` wakeups); the
    /// kernel senders' context switches (what the seeds counted).
    pub wakeups_per_s: Option<f64>,
    /// (s, device-queue delay ms) over the run.
    pub series: Vec<(f64, f64)>,
}

/// The groups of `runs` (settings such as "20 flows"), each once, in plan order.
pub(crate) fn groups<'a>(runs: impl Iterator<Item = &'a RealRun>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for r in runs {
        if !out.contains(&r.group.as_str()) {
            out.push(&r.group);
        }
    }
    out
}

/// The `"real"` section of results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RealResults {
    /// Layout version.
    pub format: u32,
    /// Reduced scale (`--quick`).
    pub quick: bool,
    /// When it was measured (UTC, from `date -u`).
    pub measured: String,
    /// This machine (kernel release, CPUs).
    pub machine: String,
    /// The experiments run.
    pub experiments: Vec<Experiment>,
    /// The runs.
    pub runs: Vec<RealRun>,
    /// The checked directions.
    pub checks: Vec<DirectionCheck>,
}

impl RealResults {
    /// Derives the checks again from the runs ([`checks::checks`]): they are a
    /// function of the runs, so a results file recorded before a check existed gets
    /// it when it is read.
    pub fn recheck(&mut self) {
        let exps = self.experiments.clone();
        self.checks = (exps.iter())
            .flat_map(|&e| checks::checks(e, &self.runs))
            .collect();
    }

    /// The runs of `e` on `side` in `group` whose variant starts with `v`.
    pub fn select(&self, e: Experiment, side: Side, group: &str, v: &str) -> Vec<&RealRun> {
        (self.runs.iter())
            .filter(|r| r.experiment == Some(e) && r.side == Some(side))
            .filter(|r| r.group == group && r.variant.starts_with(v))
            .collect()
    }

    /// Replaces the runs and checks of the experiments in `newer` with newer's.
    pub fn update(&mut self, newer: RealResults) {
        let all_again = (self.experiments.iter()).all(|e| newer.experiments.contains(e));
        let names: Vec<&str> = newer.experiments.iter().map(|e| e.name()).collect();
        self.measured = match all_again {
            true => newer.measured.clone(),
            false => format!(
                "{}; {} again {}",
                self.measured,
                names.join(" + "),
                newer.measured
            ),
        };
        let fresh = |e: &Option<Experiment>| e.is_some_and(|e| newer.experiments.contains(&e));
        self.runs.retain(|r| !fresh(&r.experiment));
        self.checks
            .retain(|c| !newer.experiments.contains(&c.experiment));
        self.runs.extend(newer.runs);
        self.checks.extend(newer.checks);
        for e in newer.experiments {
            if !self.experiments.contains(&e) {
                self.experiments.push(e);
            }
        }
        self.experiments.sort();
        self.runs
            .sort_by_key(|r| r.experiment.map_or(9, |e| e as u8));
        self.machine = newer.machine;
        self.quick = newer.quick;
    }
}

/// What is missing for `--real` (empty if nothing): root, /dev/net/tun, tc, ip.
pub fn missing_privileges() -> Vec<String> {
    let mut m = Vec::new();
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        m.push(format!(
            "needs root (network namespaces, TUN, tc); effective uid is {euid}"
        ));
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        m.push("/dev/net/tun does not exist".into());
    }
    for tool in ["ip", "tc", "sysctl"] {
        let ok = std::process::Command::new(tool).arg("-V").output().is_ok();
        if !ok {
            m.push(format!("`{tool}` is not installed (iproute2, procps)"));
        }
    }
    m
}

/// "kernel 6.18.44, 2 CPUs".
pub fn machine() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("Linux {}, {cpus} CPUs", release.trim())
}

/// The current UTC time as `date -u` prints it.
pub fn now_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}
