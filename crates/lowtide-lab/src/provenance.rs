//! results.json's `"provenance"`: what produced the figures (commit, compiler,
//! machine, load, non-default sysctls, the seeds' Linux commits).
//!
//! It is machine- and time-dependent, so it stays out of the deterministic part of
//! the file: scripts/determinism.py and the byte-for-byte tests drop its keys.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;

/// The seed texts (../shared/seeds/, kept outside the repo) by their Linux commit
/// ids: (seed file, title, commit). The file names' hex is not a Linux commit id;
/// the ids are those of the patches named by the titles (seed 003's text shows its
/// id; the others were looked up by title in Linux's history).
pub const SEEDS: [(&str, &str, &str); 5] = [
    (
        "000_05f9c5076752fb74.txt",
        "tcp: TCP_NOTSENT_LOWAT socket option",
        "c9bee3b7fdecb0c1d070c7b54113b3bdfb9a3d36",
    ),
    (
        "001_61c182db45ab1e98.txt",
        "tcp: reduce POLLOUT events caused by TCP_NOTSENT_LOWAT",
        "a74f0fa082b76c6a76cba5672f36218518bfdc09",
    ),
    (
        "002_97f2bcb9bbec6c8e.txt",
        "tcp: TCP Small Queues",
        "46d3ceabd8d98ed0ad10f20c595ca784e34786c5",
    ),
    (
        "003_4ee3b1a252bf650a.txt",
        "tcp: implement rb-tree based retransmit queue",
        "75c119afe14f74b4dd967d75ed9f57ab6c0ef045",
    ),
    (
        "004_7e5c37f952fa8416.txt",
        "tcp: refine TSO autosizing",
        "605ad7f184b60cfaacbc038aa6c55ee68dee3c89",
    ),
];

/// The keys every provenance object has (tests check them).
pub const KEYS: &[&str] = &[
    "command",
    "commit",
    "dirty",
    "commit_source",
    "build_commit",
    "build_dirty",
    "rustc",
    "lowtide_version",
    "cpu_model",
    "kernel",
    "logical_cpus",
    "loadavg_before",
    "loadavg_after",
    "started",
    "finished",
    "sysctls",
    "seeds",
];

/// Provenance being gathered: started before the runs, finished after them.
#[derive(Debug, Clone)]
pub struct Provenance {
    command: String,
    loadavg_before: Option<[f64; 3]>,
    /// HEAD and the dirty flag of the source checkout when the runs started (a run
    /// takes minutes to hours; the checkout may move meanwhile).
    git: Option<(String, bool)>,
    /// When the runs started and finished (UTC).
    started: Option<String>,
    /// For a merge: the shards' own provenance, in the order given.
    pub shards: Vec<Value>,
    /// For a `--real` run added to an earlier real-path section: the provenance of
    /// the runs it kept (oldest first), so every real-path figure names its run.
    pub earlier: Vec<Value>,
}

impl Provenance {
    /// Records the command and the load average before the runs.
    pub fn start() -> Provenance {
        Provenance {
            command: std::env::args().skip(1).collect::<Vec<_>>().join(" "),
            loadavg_before: loadavg(),
            git: runtime_git(),
            started: utc_now(),
            shards: Vec::new(),
            earlier: Vec::new(),
        }
    }

    /// The object, with the load average now and the non-default `sysctls`.
    pub fn finish(&self, sysctls: Value) -> Value {
        let (commit, dirty, source) = match self.git.clone() {
            Some((c, d)) => (
                Some(c),
                Some(d),
                format!("git at the start of the run in {}", src_dir()),
            ),
            None => (
                option_env!("LOWTIDE_BUILD_COMMIT").map(String::from),
                option_env!("LOWTIDE_BUILD_DIRTY").map(|d| d == "true"),
                "build time (build.rs)".to_string(),
            ),
        };
        let seeds: Vec<Value> = (SEEDS.iter())
            .map(|(file, title, commit)| json!({"file": file, "title": title, "commit": commit}))
            .collect();
        let mut v = json!({
            "command": self.command,
            "commit": commit,
            "dirty": dirty,
            "commit_source": source,
            "build_commit": option_env!("LOWTIDE_BUILD_COMMIT"),
            "build_dirty": option_env!("LOWTIDE_BUILD_DIRTY").map(|d| d == "true"),
            "rustc": option_env!("LOWTIDE_BUILD_RUSTC"),
            "lowtide_version": env!("CARGO_PKG_VERSION"),
            "cpu_model": cpu_model(),
            "kernel": kernel(),
            "logical_cpus": logical_cpus(),
            "loadavg_before": self.loadavg_before,
            "loadavg_after": loadavg(),
            "started": self.started,
            "finished": utc_now(),
            "sysctls": sysctls,
            "seeds": seeds,
        });
        if let (false, Some(obj)) = (self.shards.is_empty(), v.as_object_mut()) {
            obj.insert("shards".into(), Value::Array(self.shards.clone()));
        }
        if let (false, Some(obj)) = (self.earlier.is_empty(), v.as_object_mut()) {
            obj.insert("earlier".into(), Value::Array(self.earlier.clone()));
        }
        v
    }
}

/// The sysctl assignments in runs' parameters (key `"sysctl"`) that differ from
/// lowtide's defaults (`lowtide::Config::default()`), each with the experiments that
/// set it; an assignment lowtide does not know (a kernel-only sysctl) is kept.
pub fn non_default_sysctls<'a>(
    runs: impl Iterator<Item = (&'a str, &'a [(String, String)])>,
) -> Value {
    let mut set: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (exp, params) in runs {
        for (_, v) in params.iter().filter(|(k, _)| k == "sysctl") {
            let ex = set.entry(v.as_str()).or_default();
            if !ex.contains(&exp) {
                ex.push(exp);
            }
        }
    }
    let default = lowtide::Config::default();
    let list: Vec<Value> = (set.into_iter())
        .filter(|(a, _)| {
            let mut c = default.clone();
            c.set_assignment(a).is_err() || c != default
        })
        .map(|(a, ex)| json!({"set": a, "experiments": ex}))
        .collect();
    Value::Array(list)
}

/// report.md's "Provenance" section: the commit, compiler, machine, load and
/// non-default sysctls of the simulator runs (and of the real-path runs), and the
/// seeds by their Linux commit ids.
pub fn report_section(md: &mut String, sim: Option<&Value>, real: Option<&Value>) {
    let _ = writeln!(md, "\n## Provenance\n");
    let earlier = (real
        .and_then(|p| p["earlier"].as_array())
        .into_iter()
        .flatten())
    .map(|p| {
        (
            "Real-path runs kept from an earlier run (the experiments not repeated)",
            Some(p),
        )
    });
    let all = [("Simulator runs", sim), ("Real-path runs", real)];
    for (what, p) in all.into_iter().chain(earlier) {
        let Some(p) = p else { continue };
        let s = |k: &str| match &p[k] {
            Value::Null => "unknown".to_string(),
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let dirty = match p["dirty"].as_bool() {
            Some(true) => " (dirty: tracked files changed)",
            Some(false) => "",
            None => " (dirty flag unknown)",
        };
        let _ = writeln!(md, "{what}: `lowtide {}`", s("command"));
        let _ = writeln!(
            md,
            "- commit {}{dirty}, from {}; lowtide {}, {}",
            s("commit"),
            s("commit_source"),
            s("lowtide_version"),
            s("rustc")
        );
        let _ = writeln!(
            md,
            "- {}, {} logical CPUs, kernel {}; {} to {}; load average (1/5/15 min) {} before, {} after",
            s("cpu_model"),
            s("logical_cpus"),
            s("kernel"),
            s("started"),
            s("finished"),
            s("loadavg_before"),
            s("loadavg_after")
        );
        let sysctls: Vec<String> = (p["sysctls"].as_array().into_iter().flatten())
            .map(|x| {
                let ex: Vec<&str> = (x["experiments"].as_array().into_iter().flatten())
                    .filter_map(Value::as_str)
                    .collect();
                format!("`{}` ({})", x["set"].as_str().unwrap_or(""), ex.join(", "))
            })
            .collect();
        if let Some(n) = p["shards"].as_array().map(Vec::len) {
            let _ = writeln!(
                md,
                "- merged from {n} shard(s); each shard's own provenance is in results.json"
            );
        }
        let _ = match sysctls.is_empty() {
            true => writeln!(md, "- sysctls: lowtide's defaults\n"),
            false => writeln!(
                md,
                "- sysctls unlike lowtide's defaults: {}\n",
                sysctls.join(", ")
            ),
        };
    }
    let _ = writeln!(
        md,
        "Seeds, by Linux commit (their messages hold the published figures):"
    );
    for (_, title, commit) in SEEDS {
        let _ = writeln!(md, "- {} \"{title}\"", &commit[..12]);
    }
}

/// The source checkout the binary was built from.
fn src_dir() -> &'static str {
    env!("CARGO_MANIFEST_DIR")
}

/// HEAD and the dirty flag (tracked files changed) of the source checkout, if git
/// runs there.
fn runtime_git() -> Option<(String, bool)> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(src_dir())
            .args(args)
            .output()
            .ok()?;
        match out.status.success() {
            true => Some(String::from_utf8_lossy(&out.stdout).trim().to_string()),
            false => None,
        }
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    let status = git(&["status", "--porcelain", "--untracked-files=no"])?;
    Some((commit, !status.is_empty()))
}

/// The time now, as `date -u` prints it ("2026-12-01 21:30 UTC").
fn utc_now() -> Option<String> {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()?;
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

/// /proc/cpuinfo's first "model name".
fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    (text.lines())
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// The running kernel's release (`uname -r`).
fn kernel() -> Option<String> {
    match std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        Ok(s) => Some(s.trim().to_string()),
        Err(_) => {
            let out = Command::new("uname").arg("-r").output().ok()?;
            Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
        }
    }
}

/// Logical CPUs of the machine (/proc/cpuinfo's processors), else those this
/// process may use.
fn logical_cpus() -> Option<usize> {
    let n = (std::fs::read_to_string("/proc/cpuinfo").ok())
        .map(|t| t.lines().filter(|l| l.starts_with("processor")).count())
        .unwrap_or(0);
    match n {
        0 => std::thread::available_parallelism().ok().map(|n| n.get()),
        n => Some(n),
    }
}

/// /proc/loadavg's 1, 5 and 15 minute averages.
fn loadavg() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_present() {
        let v = Provenance::start().finish(Value::Array(Vec::new()));
        for k in KEYS {
            assert!(v.get(k).is_some(), "{k} missing in {v}");
        }
        assert_eq!(v["seeds"].as_array().map(Vec::len), Some(SEEDS.len()));
    }

    #[test]
    fn only_non_default_sysctls_are_listed() {
        let d = lowtide::Config::default();
        let mut c = d.clone();
        c.set_assignment("net.ipv4.tcp_congestion_control=bbr")
            .unwrap();
        let bbr_is_default = c == d;
        let params = vec![
            (
                "sysctl".to_string(),
                "net.ipv4.tcp_congestion_control=bbr".to_string(),
            ),
            ("sysctl".to_string(), "experimental.tsq=true".to_string()),
            ("sysctl".to_string(), "experimental.tsq=false".to_string()),
            ("duration".to_string(), "1 s".to_string()),
        ];
        let v = non_default_sysctls([("e3", params.as_slice()), ("e4", &params[..1])].into_iter());
        let set: Vec<&str> = (v.as_array().unwrap().iter())
            .map(|x| x["set"].as_str().unwrap())
            .collect();
        assert!(set.contains(&"experimental.tsq=false"), "{v}");
        assert!(
            !set.contains(&"experimental.tsq=true"),
            "TSQ is on by default: {v}"
        );
        assert_eq!(
            set.contains(&"net.ipv4.tcp_congestion_control=bbr"),
            !bbr_is_default
        );
        if !bbr_is_default {
            assert_eq!(v[1]["experiments"], json!(["e3", "e4"]), "{v}");
        }
        assert_eq!(v[0]["experiments"], json!(["e3"]), "{v}");
    }
}
