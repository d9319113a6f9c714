//! Output paths named on the command line (`--pcap`, `--timeseries`, `--out`),
//! checked before any work: a path that cannot be written is a usage error (exit
//! code 2, `lowtide: --opt: PATH: why`) found at once, not after a run (issue 25).

use std::fs::OpenOptions;
use std::path::Path;

/// Checks that the file `path` given to `opt` can be created or written: opens it
/// for writing without truncating it, and removes it again if it did not exist.
pub fn check_file(opt: &str, path: &Path) -> Result<(), String> {
    let bad = |why: &dyn std::fmt::Display| format!("{opt}: {}: {why}", path.display());
    if path.is_dir() {
        return Err(bad(&"is a directory"));
    }
    let existed = path.exists();
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| bad(&e))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Checks that the directory `dir` given to `opt` exists or can be made, and takes
/// files (it is left created).
pub fn check_dir(opt: &str, dir: &Path) -> Result<(), String> {
    let bad = |why: &dyn std::fmt::Display| format!("{opt}: {}: {why}", dir.display());
    if dir.exists() && !dir.is_dir() {
        return Err(bad(&"not a directory"));
    }
    std::fs::create_dir_all(dir).map_err(|e| bad(&e))?;
    let probe = dir.join(".lowtide-write-check");
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&probe)
        .map_err(|e| bad(&e))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Checks each `(option, file)` pair given.
pub fn check_files<'a>(
    files: impl IntoIterator<Item = (&'a str, Option<&'a Path>)>,
) -> Result<(), String> {
    for (opt, path) in files {
        if let Some(p) = path {
            check_file(opt, p)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_folders_directories_and_read_only_places_are_refused() {
        let e = check_file("--pcap", Path::new("/nonexistent-dir/x.pcap")).unwrap_err();
        assert_eq!(
            e,
            "--pcap: /nonexistent-dir/x.pcap: No such file or directory (os error 2)"
        );
        let e = check_file("--timeseries", Path::new("/tmp")).unwrap_err();
        assert_eq!(e, "--timeseries: /tmp: is a directory");
        let e = check_dir("--out", Path::new("/proc/lowtide-out")).unwrap_err();
        assert!(e.starts_with("--out: /proc/lowtide-out: "), "{e}");
        let e = check_dir("--out", Path::new("/etc/hostname")).unwrap_err();
        assert_eq!(e, "--out: /etc/hostname: not a directory");
    }

    #[test]
    fn a_writable_file_is_left_as_it_was() {
        let dir = std::env::temp_dir().join(format!("lowtide-outputs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let new = dir.join("new.csv");
        check_file("--timeseries", &new).unwrap();
        assert!(!new.exists(), "the check left a file behind");
        let old = dir.join("old.csv");
        std::fs::write(&old, "kept").unwrap();
        check_file("--timeseries", &old).unwrap();
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "kept");
        check_dir("--out", &dir.join("sub")).unwrap();
        assert!(dir.join("sub").is_dir());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
