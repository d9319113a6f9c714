//! `--timeseries FILE`: a run's time series as CSV or JSON lines.

use lowtide_sim::Timeseries;
use std::path::{Path, PathBuf};

/// Writes the flow rows to `path` and the host rows beside it (`STEM-host.EXT`):
/// JSON lines if the extension is `jsonl`, else CSV.
pub fn write(path: &Path, ts: &Timeseries) -> Result<(), String> {
    let jsonl = path.extension().is_some_and(|e| e == "jsonl");
    let (flows, host) = match jsonl {
        true => (lines(&ts.flows)?, lines(&ts.host)?),
        false => (ts.flows_csv(), ts.host_csv()),
    };
    std::fs::write(path, flows).map_err(|e| format!("{}: {e}", path.display()))?;
    let hp = host_path(path);
    std::fs::write(&hp, host).map_err(|e| format!("{}: {e}", hp.display()))
}

fn lines<T: serde::Serialize>(rows: &[T]) -> Result<String, String> {
    let mut s = String::new();
    for r in rows {
        s += &serde_json::to_string(r).map_err(|e| e.to_string())?;
        s.push('\n');
    }
    Ok(s)
}

/// `run.csv` -> `run-host.csv`.
fn host_path(p: &Path) -> PathBuf {
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default();
    let name = match p.extension() {
        Some(e) => format!("{stem}-host.{}", e.to_string_lossy()),
        None => format!("{stem}-host"),
    };
    p.with_file_name(name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_file_sits_beside() {
        let p = super::host_path(std::path::Path::new("/tmp/run.csv"));
        assert_eq!(p, std::path::Path::new("/tmp/run-host.csv"));
    }
}
