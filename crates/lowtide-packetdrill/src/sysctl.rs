//! The sysctl directory the runner keeps (`DIR/net/ipv4/tcp_wmem` mirrors
//! `/proc/sys/net/ipv4/tcp_wmem`, `DIR/module/<m>/parameters/<p>` mirrors
//! `/sys/module`): rescanned at every call, changes applied through
//! `Stack::set_sysctl`, and everything lowtide does not take reported once.

use lowtide::posix::Host;
use lowtide::Instant;
use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The watched directory and what was last applied from it.
#[derive(Debug, Default)]
pub struct SysctlDir {
    dir: Option<PathBuf>,
    report: Option<PathBuf>,
    seen: BTreeMap<String, String>,
    reported: HashSet<String>,
    /// The counters last written for the runner's `nstat` shim.
    published: Vec<u64>,
}

/// The lowtide name of a file under the directory: `net/ipv4/tcp_wmem` is
/// `net.ipv4.tcp_wmem`; `module/tcp_cubic/parameters/hystart_detect` is
/// `module.tcp_cubic.hystart_detect`.
pub fn sysctl_name(rel: &str) -> String {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        ["module", m, "parameters", p] => format!("module.{m}.{p}"),
        _ => parts.join("."),
    }
}

impl SysctlDir {
    /// Watches `dir` (if any), reporting to `report` (if any).
    pub fn new(dir: Option<PathBuf>, report: Option<PathBuf>) -> SysctlDir {
        SysctlDir {
            dir,
            report,
            ..SysctlDir::default()
        }
    }

    /// Applies what changed since the last scan.
    pub fn rescan(&mut self, host: &mut Host, now: Instant) {
        let Some(dir) = self.dir.clone() else {
            return;
        };
        let mut files = BTreeMap::new();
        collect(&dir, &dir, &mut files);
        for (rel, value) in files {
            if self.seen.get(&rel) == Some(&value) {
                continue;
            }
            self.seen.insert(rel.clone(), value.clone());
            let name = sysctl_name(&rel);
            let known = lowtide::Config::NAMES.contains(&name.as_str());
            let line = if !known {
                Some(format!("unknown sysctl {name}={value}"))
            } else {
                match host.stack_mut().set_sysctl(now, &name, &value) {
                    Ok(()) => None,
                    Err(e) => Some(format!("rejected sysctl {name}={value}: {e}")),
                }
            };
            host.sync_events();
            if let Some(line) = line {
                self.report_once(line);
            }
        }
    }

    /// Writes the stack's counters (`name value` lines) beside the directory, in
    /// `counters`, when they changed: the runner's `nstat` shim reads them, as
    /// `nstat` reads /proc/net/snmp and netstat.
    pub fn publish_counters(&mut self, c: &lowtide::Counters) {
        let Some(dir) = &self.dir else {
            return;
        };
        let now: Vec<u64> = c.iter().map(|(_, v)| v).collect();
        if now == self.published {
            return;
        }
        self.published = now;
        let Some(parent) = dir.parent() else {
            return;
        };
        let mut text = String::new();
        for (name, v) in c.iter() {
            text.push_str(&format!("{name} {v}\n"));
        }
        let tmp = parent.join("counters.tmp");
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, parent.join("counters"));
        }
    }

    /// Appends `line` to the report, once per run.
    pub fn report_once(&mut self, line: String) {
        if !self.reported.insert(line.clone()) {
            return;
        }
        match &self.report {
            Some(p) => {
                if let Ok(mut f) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                {
                    let _ = writeln!(f, "{line}");
                }
            }
            None => eprintln!("lowtide-packetdrill: {line}"),
        }
    }
}

fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(root, &p, out);
        } else if let (Ok(rel), Ok(text)) = (p.strip_prefix(root), std::fs::read_to_string(&p)) {
            let value = text.split_whitespace().collect::<Vec<_>>().join(" ");
            out.insert(rel.to_string_lossy().into_owned(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_proc_and_sys_module() {
        assert_eq!(sysctl_name("net/ipv4/tcp_wmem"), "net.ipv4.tcp_wmem");
        assert_eq!(
            sysctl_name("module/tcp_cubic/parameters/hystart_detect"),
            "module.tcp_cubic.hystart_detect"
        );
    }
}
